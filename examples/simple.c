/* simple.c: the smallest program on libtern: load a model, generate greedily from a prompt,
 * print the text as it comes. Build against an installed libtern:
 *     cc simple.c $(pkg-config --cflags --libs tern) -o simple
 *     ./simple -m stories260K.gguf -p "Once upon a time" -n 64 */
#include <tern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A token count from text: all digits, 1..1000000; -1 when it is not one. */
static long parse_count(const char *s) {
    char *end;
    const long v = strtol(s, &end, 10);
    return *s && !*end && v >= 1 && v <= 1000000 ? v : -1;
}

int main(int argc, char **argv) {
    const char *path = NULL, *prompt = "";
    long n_predict = 64;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc || (strcmp(argv[i], "-m") && strcmp(argv[i], "-p") && strcmp(argv[i], "-n"))) {
            fprintf(stderr, "usage: %s -m MODEL [-p PROMPT] [-n N]\n", argv[0]);
            return 2;
        }
        if (!strcmp(argv[i], "-m")) path = argv[i + 1];
        else if (!strcmp(argv[i], "-p")) prompt = argv[i + 1];
        else if ((n_predict = parse_count(argv[i + 1])) < 0) {
            fprintf(stderr, "%s: -n: expected a token count in 1..1000000, got '%s'\n", argv[0], argv[i + 1]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: %s -m MODEL [-p PROMPT] [-n N]\n", argv[0]);
        return 2;
    }

    tern_err err = {0};
    tern_model *model = NULL;
    tern_session *session = NULL;
    tern_sampler *sampler = NULL;
    int32_t *ids = NULL;
    int status = 1;

    tern_model_opts mo;
    tern_model_opts_default(&mo);
    if (tern_model_load(&model, path, &mo, &err) != TERN_OK) goto done;
    tern_session_opts so;
    tern_session_opts_default(&so);
    if (tern_session_init(&session, model, &so, &err) != TERN_OK) goto done;
    tern_sampler_params sp;
    tern_sampler_params_default(&sp);
    sp.temp = 0.0f;                                   /* greedy */
    if (tern_sampler_init(&sampler, model, &sp, &err) != TERN_OK) goto done;

    /* tokenize: a first call with no room tells the size */
    int n_ids = 0;
    tern_tokenize(model, prompt, strlen(prompt), true, false, NULL, 0, &n_ids, NULL);
    ids = malloc((size_t)(n_ids > 0 ? n_ids : 1) * sizeof *ids);
    if (!ids || tern_tokenize(model, prompt, strlen(prompt), true, false, ids, n_ids, &n_ids, &err) != TERN_OK) goto done;
    if (n_ids == 0) {
        fprintf(stderr, "the prompt is empty and the model has no BOS token\n");
        goto done;
    }

    fputs(prompt, stdout);
    const float *logits = tern_session_eval(session, ids, n_ids, &err);
    tern_detok dt;
    tern_detok_init(&dt);
    char text[1024];   /* one token's text: 3 x (its piece + 3) bytes always fit (tern.h) */
    for (int i = 0; logits && i < n_predict; i++) {
        int32_t tok = tern_sampler_sample(sampler, logits);
        if (tern_token_is_eog(model, tok)) break;
        int n = tern_detok_put(model, &dt, tok, text, sizeof text);
        if (n < 0) {
            fprintf(stderr, "\ntoken %d: its text does not fit %zu bytes (%s)\n", (int)tok, sizeof text, tern_strerror(n));
            break;
        }
        fwrite(text, 1, (size_t)n, stdout);
        fflush(stdout);
        tern_sampler_accept(sampler, tok);
        if (tern_session_pos(session) >= tern_session_n_ctx(session)) break;
        logits = tern_session_eval(session, &tok, 1, &err);
    }
    int n = tern_detok_flush(&dt, text, sizeof text);
    if (n > 0) fwrite(text, 1, (size_t)n, stdout);
    fputs("\n", stdout);
    status = logits ? 0 : 1;
done:
    if (err.code != TERN_OK) fprintf(stderr, "error: %s\n", err.msg);
    free(ids);
    tern_sampler_free(sampler);
    tern_session_free(session);
    tern_model_free(model);
    return status;
}
