/* sessions.c: several sessions sharing one loaded model. Each -p PROMPT gets its own session;
 * the program generates greedily for all of them in lock step (one token of each in turn) and
 * then prints one line per prompt: the prompt followed by its continuation. The output equals
 * running examples/simple once per prompt in separate processes.
 *     cc sessions.c $(pkg-config --cflags --libs tern) -o sessions
 *     ./sessions -m stories260K.gguf -n 64 -p "Once upon a time" -p "The cat" */
#include <tern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SESSIONS = 8, TEXT_CAP = 1 << 16 };

typedef struct seq {
    const char *prompt;
    tern_session *session;
    tern_sampler *sampler;
    tern_detok dt;
    const float *logits;
    char text[TEXT_CAP];
    int n_text;
    int done;
} seq;

/* A token count from text: all digits, 1..1000000; -1 when it is not one. */
static long parse_count(const char *s) {
    char *end;
    const long v = strtol(s, &end, 10);
    return *s && !*end && v >= 1 && v <= 1000000 ? v : -1;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    long n_predict = 64;
    int n_seq = 0;
    static seq seqs[MAX_SESSIONS];
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc || (strcmp(argv[i], "-m") && strcmp(argv[i], "-p") && strcmp(argv[i], "-n"))) {
            fprintf(stderr, "usage: %s -m MODEL [-n N] -p PROMPT [-p PROMPT ...]\n", argv[0]);
            return 2;
        }
        if (!strcmp(argv[i], "-m")) {
            path = argv[i + 1];
        } else if (!strcmp(argv[i], "-n")) {
            if ((n_predict = parse_count(argv[i + 1])) < 0) {
                fprintf(stderr, "%s: -n: expected a token count in 1..1000000, got '%s'\n", argv[0], argv[i + 1]);
                return 2;
            }
        } else if (n_seq == MAX_SESSIONS) {
            fprintf(stderr, "%s: -p: at most %d prompts, got more\n", argv[0], MAX_SESSIONS);
            return 2;
        } else {
            seqs[n_seq++].prompt = argv[i + 1];
        }
    }
    if (!path || n_seq == 0) {
        fprintf(stderr, "usage: %s -m MODEL [-n N] -p PROMPT [-p PROMPT ...]\n", argv[0]);
        return 2;
    }
    tern_err err = {0};
    tern_model *model = NULL;
    int status = 1;
    tern_model_opts mo;
    tern_model_opts_default(&mo);
    if (tern_model_load(&model, path, &mo, &err) != TERN_OK) goto done;

    for (int s = 0; s < n_seq; s++) {                  /* one session + sampler per prompt */
        seq *q = &seqs[s];
        tern_session_opts so;
        tern_session_opts_default(&so);
        if (tern_session_init(&q->session, model, &so, &err) != TERN_OK) goto done;
        tern_sampler_params sp;
        tern_sampler_params_default(&sp);
        sp.temp = 0.0f;
        if (tern_sampler_init(&q->sampler, model, &sp, &err) != TERN_OK) goto done;
        int32_t ids[4096];
        int n_ids = 0;
        if (tern_tokenize(model, q->prompt, strlen(q->prompt), true, false, ids, 4096, &n_ids, &err) != TERN_OK) goto done;
        if (n_ids == 0) { fprintf(stderr, "empty prompt and no BOS\n"); goto done; }
        q->logits = tern_session_eval(q->session, ids, n_ids, &err);
        if (!q->logits) goto done;
        tern_detok_init(&q->dt);
        q->n_text = snprintf(q->text, TEXT_CAP, "%s", q->prompt);
    }
    for (int i = 0; i < n_predict; i++) {              /* lock step: one token per session */
        for (int s = 0; s < n_seq; s++) {
            seq *q = &seqs[s];
            if (q->done) continue;
            int32_t tok = tern_sampler_sample(q->sampler, q->logits);
            if (tern_token_is_eog(model, tok)) { q->done = 1; continue; }
            int n = tern_detok_put(model, &q->dt, tok, q->text + q->n_text, TEXT_CAP - 1 - q->n_text);
            if (n < 0) { q->done = 1; continue; }      /* the text buffer is full */
            q->n_text += n;
            tern_sampler_accept(q->sampler, tok);
            if (tern_session_pos(q->session) >= tern_session_n_ctx(q->session)) { q->done = 1; continue; }
            q->logits = tern_session_eval(q->session, &tok, 1, &err);
            if (!q->logits) goto done;
        }
    }
    for (int s = 0; s < n_seq; s++) {
        seq *q = &seqs[s];
        int n = tern_detok_flush(&q->dt, q->text + q->n_text, TEXT_CAP - 1 - q->n_text);
        if (n > 0) q->n_text += n;
        q->text[q->n_text] = '\0';
        printf("%s\n", q->text);
    }
    status = 0;
done:
    if (err.code != TERN_OK) fprintf(stderr, "error: %s\n", err.msg);
    for (int s = 0; s < n_seq; s++) {
        tern_sampler_free(seqs[s].sampler);
        tern_session_free(seqs[s].session);
    }
    tern_model_free(model);
    return status;
}
