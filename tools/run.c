/* run.c: `tern run`: generate text from a raw prompt (no chat template), streamed to stdout;
 * prompt speed, generation speed and time to first token on stderr. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"
#include "spec_opts.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

enum { RUN_PROMPT = 1, RUN_FILE, RUN_N_PREDICT, RUN_ECHO, RUN_PARSE_SPECIAL, RUN_IGNORE_EOS };
static const opt_def run_defs[] = {
    {RUN_PROMPT, "-p, --prompt", OPT_TEXT, "TEXT", 0, 0, NULL, "prompt, used raw (no chat template); empty: start from BOS"},
    {RUN_FILE, "-f, --file", OPT_PATH, "PATH", 0, 0, NULL, "read the prompt from a file (one trailing newline dropped)"},
    {RUN_N_PREDICT, "-n, --n-predict", OPT_INT, "N", -1, 1 << 24, NULL, "tokens to generate (default 256; -1 = until the end of text or a full context)"},
    {RUN_ECHO, "--echo", OPT_FLAG, NULL, 0, 0, NULL, "print the prompt before the generated text"},
    {RUN_PARSE_SPECIAL, "--parse-special", OPT_FLAG, NULL, 0, 0, NULL, "parse control-token text in the prompt as control tokens"},
    {RUN_IGNORE_EOS, "--ignore-eos", OPT_FLAG, NULL, 0, 0, NULL, "keep generating past end-of-generation tokens"},
};

/* Print a generated token's text as it comes (tern_gen's on_token). */
static int run_put(void *user, const tern_gen_token *t) {
    if (t->n_text > 0) {
        fwrite(t->text, 1, (size_t)t->n_text, stdout);
        opts_flush_stdout();
        *(bool *)user = true;   /* something printed: end it with a newline */
    }
    return 0;
}

static void run_usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern run -m MODEL [-p PROMPT | -f FILE] [options]\n"
               "A prompt that is not valid UTF-8 is tokenised byte by byte (with a warning naming the first\n"
               "bad byte); printed text (--echo, the generation) has U+FFFD for invalid sequences.\n");
    opts_help(f, t, n_t);
    fprintf(f, "stderr: \"generation: N tokens\" counts every generated token; its tokens/s covers those after the\n"
               "first (the first token's time is in \"time to first token\", with the prompt)\n");
    /* the order of sampler_chain (src/sampling/sampler.c), then the draw at the temperature */
    fprintf(f, "sampling follows llama.cpp's order: logit bias (-l) -> repeat penalty -> top-k -> top-p -> min-p -> "
               "temperature\n");
}

int cmd_run(int argc, char **argv) {
    opts_common oc;
    opts_common_default(&oc);
    opts_sampling sp;
    opts_sampling_default(&sp);
    const char *prompt = NULL, *prompt_file = NULL;
    int n_predict = 256;
    bool echo = false, parse_special = false, ignore_eos = false;
    spec_opts so;
    spec_opts_default(&so);
    const opt_table tabs[] = {opts_tab_model, OPT_TABLE(run_defs), opts_tab_threads, opts_tab_ctx, opts_tab_load,
                              opts_tab_sampling, spec_opts_tab};
    const int n_tabs = (int)(sizeof tabs / sizeof tabs[0]);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("run", tabs, n_tabs, argc, argv, &i, &v);
        if (id == OPT_HELP) { run_usage(stdout, tabs, n_tabs); return 0; }
        if (id == OPT_ERR) return 2;
        if (id == OPT_POSITIONAL) return opts_unexpected("run", v.str);
        if (opts_apply_common(&oc, id, &v) || opts_apply_sampling(&sp, id, &v) || spec_opts_apply(&so, id, &v)) continue;
        switch (id) {
        case RUN_PROMPT: prompt = v.str; break;
        case RUN_FILE: prompt_file = v.str; break;
        case RUN_N_PREDICT: n_predict = (int)v.i; break;
        case RUN_ECHO: echo = true; break;
        case RUN_PARSE_SPECIAL: parse_special = true; break;
        case RUN_IGNORE_EOS: ignore_eos = true; break;
        default: break;
        }
    }
    if (!oc.model) {
        fprintf(stderr, "tern run: -m MODEL is required; see tern run --help\n");
        return 2;
    }
    if (spec_opts_check(&so) || !opts_sampling_check(&sp)) return 2;
    if (prompt && prompt_file) {   /* one prompt: never drop one of the two silently */
        fprintf(stderr, "tern run: -p and -f both give the prompt; use one of them; see tern run --help\n");
        return 2;
    }
    char *file_text = NULL;
    const char *empty_note = "";   /* an empty -f file: what it held, for the notice after the load */
    size_t plen = prompt ? strlen(prompt) : 0;
    if (prompt_file) {
        if (opts_read_input("-f", prompt_file, &file_text, &plen)) return 1;
        const bool nl_only = plen == 1 && file_text[0] == '\n';
        if (plen > 0 && file_text[plen - 1] == '\n') file_text[--plen] = '\0';   /* an editor's final newline, as llama.cpp's -f */
        prompt = file_text;
        empty_note = nl_only ? " (a newline only, which -f drops)" : "";
    }
    if (!prompt) prompt = "";
    char what[320] = "the prompt (-p)";
    if (prompt_file) snprintf(what, sizeof what, "the prompt file '%.256s' (-f)", prompt_file);
    opts_warn_utf8("run", what, prompt, plen, echo);

    int status = 1;
    bool bad_logits = false;   /* non-finite logits seen: warned once, exit 1 */
    tern_err err = {0};
    tern_model *m = NULL;
    tern_session *s = NULL;
    tern_sampler *smp = NULL;
    tern_spec *spec = NULL;
    tern_gen *gen = NULL;
    int32_t *toks = NULL;
    const double t_load0 = now_s();
    /* the prompt is at most plen + 3 tokens (each token covers a byte or more; BOS, EOS and a
     * SentencePiece dummy prefix add at most 3), so a run of -n tokens needs at most this many
     * positions: the context notice is shown only when the cap can cut it short */
    if (n_predict >= 0) {
        const long long need = (long long)plen + 4 + n_predict;
        oc.ctx_need = need > INT_MAX ? INT_MAX : (int)need;
    }
    if (opts_load(&oc, &m, &s, &err)) goto done;
    const double t_load = now_s() - t_load0;
    tern_model_info info;
    tern_model_get_info(m, &info);
    if (opts_bias_check(&sp, m, &err)) {
        status = 2;   /* a usage error found after the load */
        goto done;
    }
    if (opts_sampler_init(&sp, m, s, &smp, &err)) goto done;
    so.p.ignore_eos = ignore_eos;
    if (so.on && tern_spec_init(&spec, m, &so.p, &err)) goto done;
    if (tern_gen_init(&gen, m, &err)) goto done;

    int n_tok = 0;
    const bool add_bos = info.add_bos || plen == 0;
    if (tern_tokenize(m, prompt, plen, add_bos, parse_special, NULL, 0, &n_tok, &err) && err.code != TERN_E_RANGE)
        goto done;
    err.code = TERN_OK;
    toks = malloc(((size_t)n_tok + 1) * sizeof *toks);
    if (!toks) { fail_msg(&err, TERN_E_NOMEM, "out of memory"); goto done; }
    if (tern_tokenize(m, prompt, plen, add_bos, parse_special, toks, n_tok, &n_tok, &err)) goto done;
    if (n_tok == 0) {
        if (prompt_file)
            fail_msg(&err, TERN_E_ARG, "the prompt file '%.256s' (-f) %s and the model has no BOS token to start from: "
                     "give a prompt", prompt_file, plen ? "gives no token" : *empty_note ? "is empty (a newline only, "
                     "which -f drops)" : "is empty");
        else fail_msg(&err, TERN_E_ARG, "the prompt (-p) %s and the model has no BOS token to start from: give a prompt",
                      plen ? "gives no token" : "is empty");
        goto done;
    }
    if (prompt_file && plen == 0)   /* more likely a mistake than a wish to start from BOS alone */
        fprintf(stderr, "tern run: warning: the prompt file '%s' (-f) is empty%s: the generation starts from BOS alone\n",
                prompt_file, empty_note);
    if (add_bos && info.bos >= 0 && n_tok >= 2 && toks[0] == info.bos && toks[1] == info.bos)   /* as llama.cpp warns */
        fprintf(stderr, "tern run: warning: the prompt starts with the BOS token and the model adds one too: two BOS "
                        "tokens (leave the prompt's own out, or drop --parse-special)\n");
    if (n_tok >= tern_session_n_ctx(s) && plen == 0) {   /* no prompt text: only BOS */
        fail_msg(&err, TERN_E_RANGE, "the context (-c %d) holds only the BOS token the generation starts from, with no "
                 "room to generate: expected -c %d or more", tern_session_n_ctx(s), n_tok + 1);
        goto done;
    }
    if (n_tok >= tern_session_n_ctx(s)) {
        char src[300];
        if (prompt_file) snprintf(src, sizeof src, "the prompt file '%.256s' (-f)", prompt_file);
        else snprintf(src, sizeof src, "the prompt (-p)");
        fail_msg(&err, TERN_E_RANGE, "%s is too long for the context: %d token%s, expected at most %d (the context of %d "
                 "token%s less one to generate; -c sets it)", src, n_tok, n_tok == 1 ? "" : "s", tern_session_n_ctx(s) - 1,
                 tern_session_n_ctx(s), tern_session_n_ctx(s) == 1 ? "" : "s");
        goto done;
    }
    if (echo) { opts_write_utf8(stdout, prompt, plen); opts_flush_stdout(); }

    tern_gen_params gp;
    tern_gen_params_default(&gp);
    gp.n_predict = n_predict;
    gp.ignore_eos = ignore_eos;
    bool printed = echo && plen > 0;
    gp.on_token = run_put;
    gp.user = &printed;
    tern_gen_begin(gen, s, smp, spec, &gp);
    const float *logits = tern_gen_prompt(gen, toks, n_tok, &err);
    if (!logits) goto done;
    const tern_stop stop = tern_gen_run(gen, logits, &err);
    if (stop == TERN_STOP_ERROR) goto done;
    if (printed) {
        fputc('\n', stdout);
        opts_flush_stdout();
    }
    /* on a terminal a blank line sets the notices and speeds apart from the text; in a file it
     * would only open it with an empty line */
    const char *gap = isatty(STDERR_FILENO) ? "\n" : "";
    tern_gen_stats gs;
    tern_gen_get_stats(gen, &gs);
    if (stop == TERN_STOP_CTX && n_predict > 0)   /* short of -n: say how far it got */
        fprintf(stderr, "%stern run: context full after %d of -n %d token%s (-c %d; a larger -c goes on)\n", gap, gs.n_gen,
                n_predict, n_predict == 1 ? "" : "s", tern_session_n_ctx(s));
    else if (stop == TERN_STOP_CTX)
        fprintf(stderr, "%stern run: context full (%d tokens, -c)\n", gap, tern_session_n_ctx(s));
    /* damaged weights (NaN, Inf) make the logits NaN: the generation stopped at the first such
     * position (nothing is sampled from them); the run says where and exits 1 */
    bad_logits = opts_warn_bad_logits("run", gen, "the run exits with status 1");
    const int n_gen = gs.n_gen;
    /* say why it stopped: short of -n, or with -n -1 (until the end) before the context's end */
    if (stop == TERN_STOP_EOG && n_predict > 0 && n_gen < n_predict)
        fprintf(stderr, "%stern run: end of text after %d of -n %d token%s (the model's end-of-generation token; "
                        "--ignore-eos goes on to -n)\n", gap, n_gen, n_predict, n_predict == 1 ? "" : "s");
    else if (stop == TERN_STOP_EOG && n_predict < 0)
        fprintf(stderr, "%stern run: end of text after %d token%s (the model's end-of-generation token; "
                        "--ignore-eos goes on to the context's end)\n", gap, n_gen, n_gen == 1 ? "" : "s");
    const double t_prompt = gs.t_prompt_s, t_first = gs.t_first_s;
    const double t_gen = n_gen > 1 ? gs.t_gen_s : 0;
    fprintf(stderr, "%smodel: %s (%s), %s, %d thread%s, numerics %s, load %.2f s (%s)\n", gap, oc.model, info.arch, info.isa,
            info.n_threads, info.n_threads == 1 ? "" : "s", opts_numerics_name(oc.numerics), t_load,
            oc.use_mmap ? "mmap" : "read");
    fprintf(stderr, "prompt: %d token%s in %.1f ms, %.2f tokens/s\n", n_tok, n_tok == 1 ? "" : "s", t_prompt * 1e3,
            t_prompt > 0 ? n_tok / t_prompt : 0.0);
    /* n_gen counts every token sampled, the first included; the rate covers the tokens after the
     * first (their time from the first token's sample to the end), since the first token's time is
     * the prompt's (time to first token); with one token there is no decode step and no rate */
    if (n_gen > 1)
        fprintf(stderr, "generation: %d tokens in %.1f ms, %.2f tokens/s (the %d after the first)\n", n_gen, t_gen * 1e3,
                t_gen > 0 ? (n_gen - 1) / t_gen : 0.0, n_gen - 1);
    else if (n_gen == 1)
        fprintf(stderr, "generation: 1 token (no decode step to time: see time to first token)\n");
    else
        fprintf(stderr, "generation: 0 tokens\n");
    if (n_gen > 0) fprintf(stderr, "time to first token: %.1f ms\n", t_first * 1e3);
    if (spec) {
        tern_spec_stats st;
        tern_spec_get_stats(spec, &st);
        spec_opts_print_stats(stderr, &st, 0);
    }
    status = bad_logits ? 1 : 0;   /* the warning above says why */
done:
    if (status && (err.code || !bad_logits)) fprintf(stderr, "tern run: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
    free(toks);
    free(file_text);
    tern_sampler_free(smp);
    tern_spec_free(spec);
    tern_gen_free(gen);
    tern_session_free(s);
    tern_model_free(m);
    return status;
}
