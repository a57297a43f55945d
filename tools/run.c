/* run.c: `tern run`: generate text from a raw prompt (no chat template), streamed to stdout;
 * prompt speed, generation speed and time to first token on stderr. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"
#include "spec_opts.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fail_msg(tern_err *e, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    e->code = code;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

static void run_usage(FILE *f) {
    fprintf(f,
            "usage: tern run -m MODEL [-p PROMPT | -f FILE] [options]\n"
            "  -m, --model PATH        GGUF model\n"
            "  -p, --prompt TEXT       prompt, used raw (no chat template); empty: start from BOS\n"
            "  -f, --file PATH         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 256)\n"
            "  --echo                  print the prompt before the generated text\n"
            "  --parse-special         parse control-token text in the prompt as control tokens\n"
            "  --ignore-eos            keep generating past end-of-generation tokens\n");
    opts_usage_common(f);
    opts_usage_sampling(f);
    spec_opts_usage(f);
}

/* Print a generated token (streaming detokeniser). */
static void run_put(const tern_model *m, tern_detok *dt, int32_t id) {
    char out[256];
    const int nb = tern_detok_put(m, dt, id, out, sizeof out);
    if (nb > 0) { fwrite(out, 1, (size_t)nb, stdout); fflush(stdout); }
}

int cmd_run(int argc, char **argv) {
    opts_common oc;
    opts_common_default(&oc);
    tern_sampler_params sp;
    tern_sampler_params_default(&sp);
    const char *prompt = NULL, *prompt_file = NULL;
    int n_predict = 256;
    bool echo = false, parse_special = false, ignore_eos = false;
    spec_opts so;
    spec_opts_default(&so);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = opts_parse_common(&oc, argc, argv, &i);
        if (r == 0) r = opts_parse_sampling(&sp, argc, argv, &i);
        if (r == 0) r = spec_opts_parse(&so, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { run_usage(stdout); return 0; }
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc) prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && i + 1 < argc) prompt_file = argv[++i];
        else if ((!strcmp(a, "-n") || !strcmp(a, "--n-predict")) && i + 1 < argc) {
            if (opts_int(a, argv[++i], -1, 1 << 24, &n_predict)) return 2;
        } else if (!strcmp(a, "--echo")) echo = true;
        else if (!strcmp(a, "--parse-special")) parse_special = true;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
        else {
            fprintf(stderr, "tern run: unknown or incomplete option '%s'\n", a);
            run_usage(stderr);
            return 2;
        }
    }
    if (!oc.model) {
        fprintf(stderr, "tern run: -m MODEL is required\n");
        run_usage(stderr);
        return 2;
    }
    char *file_text = NULL;
    size_t plen = prompt ? strlen(prompt) : 0;
    if (prompt_file) {
        if (opts_read_file(prompt_file, &file_text, &plen)) return 1;
        prompt = file_text;
    }
    if (!prompt) prompt = "";

    int status = 1;
    tern_err err = {0};
    tern_model *m = NULL;
    tern_session *s = NULL;
    tern_sampler *smp = NULL;
    tern_spec *spec = NULL;
    int32_t *toks = NULL;
    const double t_load0 = now_s();
    if (opts_load(&oc, &m, &s, &err)) goto done;
    const double t_load = now_s() - t_load0;
    tern_model_info info;
    tern_model_get_info(m, &info);
    if (tern_sampler_init(&smp, m, &sp, &err)) goto done;
    so.p.ignore_eos = ignore_eos;
    if (so.on && tern_spec_init(&spec, m, &so.p, &err)) goto done;

    int n_tok = 0;
    const bool add_bos = info.add_bos || plen == 0;
    if (tern_tokenize(m, prompt, plen, add_bos, parse_special, NULL, 0, &n_tok, &err) && err.code != TERN_E_RANGE)
        goto done;
    err.code = TERN_OK;
    toks = malloc(((size_t)n_tok + 1) * sizeof *toks);
    if (!toks) { fail_msg(&err, TERN_E_NOMEM, "out of memory"); goto done; }
    if (tern_tokenize(m, prompt, plen, add_bos, parse_special, toks, n_tok, &n_tok, &err)) goto done;
    if (n_tok == 0) {
        fail_msg(&err, TERN_E_ARG, "empty prompt and the model has no BOS token: give a prompt with -p");
        goto done;
    }
    if (n_tok >= tern_session_n_ctx(s)) {
        fail_msg(&err, TERN_E_RANGE, "prompt has %d tokens, context is %d (-c)", n_tok, tern_session_n_ctx(s));
        goto done;
    }
    if (echo) { fwrite(prompt, 1, plen, stdout); fflush(stdout); }

    const double t0 = now_s();
    const float *logits = tern_session_eval(s, toks, n_tok, &err);
    if (!logits) goto done;
    const double t_prompt = now_s() - t0;
    double t_first = 0, t_gen0 = 0;
    int n_gen = 0;
    tern_detok dt;
    tern_detok_init(&dt);
    char out[256];
    if (spec) {   /* speculative: same tokens and stops as the plain loop below */
        if (tern_spec_add(spec, toks, n_tok, &err)) goto done;
        int32_t last = tern_sampler_sample(smp, logits);
        t_first = now_s() - t0;
        t_gen0 = now_s();
        tern_sampler_accept(smp, last);
        n_gen = 1;
        for (;;) {
            if (!ignore_eos && tern_token_is_eog(m, last)) break;
            run_put(m, &dt, last);
            if (n_gen == n_predict) break;
            if (tern_session_pos(s) >= tern_session_n_ctx(s)) {
                fprintf(stderr, "\ntern run: context full (%d tokens, -c)\n", tern_session_n_ctx(s));
                break;
            }
            int32_t buf[TERN_SPEC_DRAFT_LIMIT + 1];
            int k = 0;
            const int n_max = n_predict < 0 ? TERN_SPEC_DRAFT_LIMIT + 1
                                            : (n_predict - n_gen < TERN_SPEC_DRAFT_LIMIT + 1 ? n_predict - n_gen
                                                                                             : TERN_SPEC_DRAFT_LIMIT + 1);
            if (tern_spec_step(spec, s, smp, last, n_max, buf, &k, &err)) goto done;
            for (int j = 0; j + 1 < k; j++) run_put(m, &dt, buf[j]);   /* an EOG can only be the last */
            n_gen += k;
            last = buf[k - 1];
        }
    }
    for (int i = 0; !spec && (i < n_predict || n_predict < 0); i++) {
        const int32_t id = tern_sampler_sample(smp, logits);
        if (i == 0) { t_first = now_s() - t0; t_gen0 = now_s(); }
        tern_sampler_accept(smp, id);
        n_gen++;
        if (!ignore_eos && tern_token_is_eog(m, id)) break;
        const int nb = tern_detok_put(m, &dt, id, out, sizeof out);
        if (nb > 0) { fwrite(out, 1, (size_t)nb, stdout); fflush(stdout); }
        if (i + 1 == n_predict) break;
        if (tern_session_pos(s) >= tern_session_n_ctx(s)) {
            fprintf(stderr, "\ntern run: context full (%d tokens, -c)\n", tern_session_n_ctx(s));
            break;
        }
        logits = tern_session_eval(s, &id, 1, &err);
        if (!logits) goto done;
    }
    const int nb = tern_detok_flush(&dt, out, sizeof out);
    if (nb > 0) fwrite(out, 1, (size_t)nb, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    const double t_gen = n_gen > 1 ? now_s() - t_gen0 : 0;
    fprintf(stderr, "\nmodel: %s (%s), %s, %d threads, numerics %s, load %.2f s (%s)\n", oc.model, info.arch, info.isa,
            info.n_threads, opts_numerics_name(oc.numerics), t_load, oc.use_mmap ? "mmap" : "read");
    fprintf(stderr, "prompt: %d tokens in %.1f ms, %.2f tokens/s\n", n_tok, t_prompt * 1e3,
            t_prompt > 0 ? n_tok / t_prompt : 0.0);
    fprintf(stderr, "generation: %d tokens in %.1f ms, %.2f tokens/s\n", n_gen > 0 ? n_gen - 1 : 0, t_gen * 1e3,
            t_gen > 0 ? (n_gen - 1) / t_gen : 0.0);
    fprintf(stderr, "time to first token: %.1f ms\n", t_first * 1e3);
    if (spec) {
        tern_spec_stats st;
        tern_spec_get_stats(spec, &st);
        spec_opts_print_stats(stderr, &st, 0);
    }
    status = 0;
done:
    if (status) fprintf(stderr, "tern run: %s: %s\n", tern_strerror(err.code), err.msg);
    free(toks);
    free(file_text);
    tern_sampler_free(smp);
    tern_spec_free(spec);
    tern_session_free(s);
    tern_model_free(m);
    return status;
}
