/* bench_spec.c: `tern bench-spec`: speculative decoding (prompt lookup) against plain greedy
 * decoding on a set of prompts, and the cost of a verification batch against one decode step.
 *
 * Generation mode (default): for each prompt, plain greedy decoding (tern_sampler_sample +
 * tern_session_eval of one token) and speculative decoding (tern_spec_step) of -n tokens each,
 * run back to back per prompt (A/B interleaved, --reps times, best time of each kept) in one
 * process. Both must give the same tokens (checked; exit 1 otherwise). Reports per prompt and in
 * total: acceptance (accepted / drafted), tokens per forward, plain and speculative tokens/s,
 * their ratio, and both as a ratio to the decode ceiling measured in the same run (model
 * bytes per token / read bandwidth, tern bench's ceiling).
 *
 * Cost mode (--cost): after a prefix of --cost-pos tokens, times tern_session_eval_all of n
 * tokens (n = 1 is a decode step; n = 1 + k verifies k drafted tokens) followed by the truncation
 * back (the rollback a fully rejected draft costs), interleaved over n and repeated --reps times;
 * reports the median time of each n and its ratio to n = 1. The drafts are forced (fixed token
 * ids), so the figure does not depend on the text. --profile adds, per n, the per-op profile of
 * its timed evaluations (tern_profile, ms per forward), so 1 and n columns can be compared. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"
#include "spec_opts.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { BS_PROMPTS = 1, BS_CATEGORY, BS_N_PROMPTS, BS_N_PREDICT, BS_REPS, BS_RAW, BS_COST, BS_COST_POS, BS_MAX_PROMPT,
       BS_PROFILE };
static const opt_def bs_defs[] = {
    {BS_PROMPTS, "--prompts", OPT_PATH, "PATH", 0, 0, NULL,
     "prompts: a .jsonl file (field \"prompt\", else \"turns\"[0]: quixbugs, spec-bench)\n"
     "                          or any other file as one prompt"},
    {BS_CATEGORY, "--category", OPT_TEXT, "NAME", 0, 0, NULL, "only .jsonl lines with this \"category\" (spec-bench: summarization, rag, ...)"},
    {BS_N_PROMPTS, "--n-prompts", OPT_INT, "N", 1, 100000, NULL, "first N prompts (default 4)"},
    {BS_N_PREDICT, "-n, --n-predict", OPT_INT, "N", 1, 1 << 20, NULL, "tokens generated per prompt (default 128)"},
    {BS_REPS, "--reps", OPT_INT, "N", 1, 1000, NULL, "repetitions (default 1 for generation, 7 for --cost)"},
    {BS_RAW, "--raw", OPT_FLAG, NULL, 0, 0, NULL, "use the prompt text raw (default: raw for llama, the chat template otherwise)"},
    {BS_MAX_PROMPT, "--max-prompt-tokens", OPT_INT, "N", 1, 1 << 24, NULL, "cut longer prompts to their first N tokens (default: none)"},
    {BS_COST, "--cost", OPT_FLAG, NULL, 0, 0, NULL, "verification cost mode: eval of 1..draft-max+1 tokens vs one decode step"},
    {BS_COST_POS, "--cost-pos", OPT_INT, "N", 1, 1 << 20, NULL, "--cost: context position of the measurement (default 64)"},
    {BS_PROFILE, "--profile", OPT_FLAG, NULL, 0, 0, NULL, "--cost: per-op time profile of each column count (ms per forward)"},
};

typedef struct bs_args {
    opts_common oc;
    spec_opts so;
    const char *prompts, *category;
    int n_prompts, n_predict, reps, cost_pos, max_prompt;
    bool raw, raw_set, cost, profile;
} bs_args;

/* ---- prompts ---------------------------------------------------------------------------------- */

static char *read_all(const char *path, size_t *len) {
    char *s = NULL;
    if (opts_read_input("--prompts", path, &s, len)) return NULL;   /* the message names the flag */
    return s;
}

/* Prompt texts (malloc'd strings) from a .jsonl (prompt / turns[0], optional category filter) or a
 * whole file. Returns the count, -1 on error (message printed). */
static int load_prompts(const bs_args *a, char ***out) {
    size_t len = 0;
    char *txt = read_all(a->prompts, &len);
    if (!txt) return -1;
    char **v = calloc((size_t)a->n_prompts, sizeof *v);
    if (!v) {
        free(txt);
        fprintf(stderr, "tern bench-spec: out of memory for %d prompts\n", a->n_prompts);
        return -1;
    }
    int n = 0;
    const size_t pl = strlen(a->prompts);
    if (pl < 6 || strcmp(a->prompts + pl - 6, ".jsonl") != 0) {   /* the whole file is one prompt */
        if (len == 0) {
            fprintf(stderr, "tern bench-spec: --prompts %s: the file is empty; expected a prompt text or .jsonl lines\n",
                    a->prompts);
            free(txt);
            free(v);
            return -1;
        }
        if (strlen(txt) < len)
            fprintf(stderr, "tern bench-spec: warning: --prompts %s: a NUL byte at offset %zu ends the prompt there "
                            "(%zu of %zu bytes used)\n", a->prompts, strlen(txt), strlen(txt), len);
        if (a->category)
            fprintf(stderr, "tern bench-spec: warning: --category has no effect: %s is not a .jsonl file (one prompt)\n",
                    a->prompts);
        char what[320];
        snprintf(what, sizeof what, "the prompt file '%.256s' (--prompts)", a->prompts);
        opts_warn_utf8("bench-spec", what, txt, strlen(txt), false);
        v[n++] = txt;
        *out = v;
        return n;
    }
    int line_no = 0, n_bad = 0, n_none = 0, n_empty = 0, n_other = 0;   /* n_other: lines of another category */
    char cats[256] = "";   /* the categories seen on other lines, for the message when none match */
    for (char *line = txt, *next; line && *line && n < a->n_prompts; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        line_no++;
        if (!*line) continue;
        cJSON *j = cJSON_Parse(line);
        if (!j) {                                     /* said for the first few, then counted */
            const char *at = cJSON_GetErrorPtr();
            if (n_bad++ < 3)
                fprintf(stderr, "tern bench-spec: warning: %s line %d: not JSON (at byte %ld of the line); skipped\n",
                        a->prompts, line_no, at && at >= line && at <= line + strlen(line) ? (long)(at - line) : 0L);
            continue;
        }
        const cJSON *cat = cJSON_GetObjectItem(j, "category");
        if (a->category && !(cJSON_IsString(cat) && strcmp(cat->valuestring, a->category) == 0)) {
            n_other++;
            if (cJSON_IsString(cat) && !strstr(cats, cat->valuestring) && strlen(cats) + strlen(cat->valuestring) + 8 < sizeof cats)
                snprintf(cats + strlen(cats), sizeof cats - strlen(cats), "%s'%s'", cats[0] ? ", " : "", cat->valuestring);
            cJSON_Delete(j);
            continue;
        }
        const cJSON *p = cJSON_GetObjectItem(j, "prompt");
        if (!cJSON_IsString(p)) p = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "turns"), 0);
        if (cJSON_IsString(p) && !p->valuestring[0]) {
            if (n_empty++ < 3) fprintf(stderr, "tern bench-spec: warning: %s line %d: an empty prompt; skipped\n", a->prompts, line_no);
        } else if (cJSON_IsString(p)) {
            v[n++] = strdup(p->valuestring);
        } else if (n_none++ < 3) {
            fprintf(stderr, "tern bench-spec: warning: %s line %d: no string \"prompt\" or \"turns\"[0]; skipped\n",
                    a->prompts, line_no);
        }
        cJSON_Delete(j);
    }
    free(txt);
    if (n_bad > 3) fprintf(stderr, "tern bench-spec: warning: %s: %d lines in all are not JSON; skipped\n", a->prompts, n_bad);
    if (n == 0 && a->category && n_other > 0)
        fprintf(stderr, "tern bench-spec: --category %s: no line of %s has that category (%s%s)\n", a->category, a->prompts,
                cats[0] ? "the categories there: " : "no line has a string \"category\"", cats);
    else if (n == 0)
        fprintf(stderr, "tern bench-spec: no prompt in %s%s%s (%d lines: %d not JSON, %d without a string \"prompt\" or "
                        "\"turns\"[0], %d empty); expected JSON lines with one of those fields\n",
                a->prompts, a->category ? " of category " : "", a->category ? a->category : "", line_no, n_bad, n_none,
                n_empty);
    if (n == 0) {
        free(v);
        return -1;
    }
    *out = v;
    return n;
}

/* Tokens of a prompt (raw text, or a user turn in the model's chat template, thinking off). */
static int prompt_tokens(tern_model *m, const char *text, bool raw, int max_tok, int32_t **ids, int *n, tern_err *err) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    char *rendered = NULL;
    const char *t = text;
    if (!raw) {
        tern_chat_msg msg = {"user", text};
        size_t need = 0;
        tern_chat_apply(m, NULL, &msg, 1, true, false, NULL, 0, &need, err);
        *err = (tern_err){0};
        rendered = malloc(need + 1);
        if (!rendered) return TERN_E_NOMEM;
        int rc = tern_chat_apply(m, NULL, &msg, 1, true, false, rendered, need + 1, &need, err);
        if (rc) { free(rendered); return rc; }
        t = rendered;
    }
    const size_t len = strlen(t);
    int cnt = 0;
    tern_tokenize(m, t, len, info.add_bos, !raw, NULL, 0, &cnt, err);
    *err = (tern_err){0};
    *ids = malloc(((size_t)cnt + 1) * sizeof **ids);
    int rc = *ids ? tern_tokenize(m, t, len, info.add_bos, !raw, *ids, cnt, &cnt, err) : TERN_E_NOMEM;
    free(rendered);
    if (rc) return rc;
    *n = max_tok > 0 && cnt > max_tok ? max_tok : cnt;
    return TERN_OK;
}

/* ---- generation ------------------------------------------------------------------------------- */

/* Collects the tokens of a reply (tern_gen's on_token) into out[0 .. n). */
typedef struct gen_out { int32_t *out; int n; } gen_out;

static int collect(void *user, const tern_gen_token *t) {
    gen_out *o = user;
    if (t->id >= 0) o->out[o->n++] = t->id;
    return 0;
}

/* Greedy generation of up to n tokens after the prompt (the end-of-generation token included, as
 * tern_gen counts it), through tern_gen (the loop of tern run). Speculative when sp != NULL.
 * Returns the token count (< 0: error), *t_gen the seconds from the first sample to the end. */
static int generate(tern_gen *g, tern_session *s, tern_sampler *smp, tern_spec *sp, const int32_t *prompt, int np,
                    int n, int32_t *out, double *t_gen, tern_err *err) {
    tern_session_reset(s);
    tern_sampler_reset(smp);
    tern_spec_reset(sp);
    gen_out o = {.out = out};
    tern_gen_params gp;
    tern_gen_params_default(&gp);
    gp.n_predict = n;
    gp.on_token = collect;
    gp.user = &o;
    tern_gen_begin(g, s, smp, sp, &gp);
    const float *l = tern_gen_prompt(g, prompt, np, err);
    if (!l) return err->code;
    const double t0 = now_s();
    const tern_stop stop = tern_gen_run(g, l, err);
    if (stop == TERN_STOP_ERROR) return err->code;
    if (stop == TERN_STOP_LOGITS) return tern_gen_logits_error(g, err);   /* damaged weights: nothing to time */
    *t_gen = now_s() - t0;
    return o.n;
}

/* ceil_tps: the decode ceiling, read bandwidth / bytes per token; 0 where the bytes per token are
 * served by the last-level cache (opts_fits_llc): then decode is not bound by the read bandwidth,
 * and a share of that ceiling (which can pass 1) is no measure of it, as `tern bench` leaves it
 * out for such models. */
static int run_generation(const bs_args *a, tern_model *m, tern_session *s, double ceil_tps, char **texts, int n_p) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    const bool raw = a->raw_set ? a->raw : strcmp(info.arch, "llama") == 0;
    tern_err err = {0};
    tern_sampler_params spp;
    tern_sampler_params_default(&spp);
    spp.temp = 0;
    tern_sampler *smp = NULL;
    tern_spec *sp = NULL;
    tern_gen *gen = NULL;
    int32_t *ga = malloc((size_t)a->n_predict * sizeof *ga), *gb = malloc((size_t)a->n_predict * sizeof *gb);
    int status = 1;
    if (!ga || !gb || tern_sampler_init(&smp, m, &spp, &err) || tern_spec_init(&sp, m, &a->so.p, &err) ||
        tern_gen_init(&gen, m, &err))
        goto done;
    printf("bench-spec: %s (%s), %d thread%s, prompts %s%s%s (%d), -n %d, %s, draft-max %d, n-gram %d..%d\n",
           a->oc.model, info.arch, info.n_threads, info.n_threads == 1 ? "" : "s", a->prompts, a->category ? " category " : "",
           a->category ? a->category : "", n_p, a->n_predict, raw ? "raw text" : "chat template", a->so.p.draft_max,
           a->so.p.ngram_min, a->so.p.ngram_max);
    printf("%-4s %7s %6s %9s %9s %7s %10s %10s %7s\n", "#", "prompt", "gen", "drafted", "accepted", "tok/fwd",
           "plain t/s", "spec t/s", "speedup");
    double sum_plain = 0, sum_spec = 0;
    long tot_gen = 0;
    tern_spec_stats tot = {0};
    for (int i = 0; i < n_p; i++) {
        int32_t *ids = NULL;
        int np = 0;
        if (prompt_tokens(m, texts[i], raw, a->max_prompt, &ids, &np, &err)) goto done;
        if (np + 1 >= tern_session_n_ctx(s)) {
            fprintf(stderr, "tern bench-spec: prompt %d has %d tokens, context is %d (-c, --max-prompt-tokens)\n", i, np,
                    tern_session_n_ctx(s));
            free(ids);
            goto done;
        }
        double best_a = 1e30, best_b = 1e30;
        int na = 0, nb = 0;
        tern_spec_stats st = {0};
        if (i == 0) {   /* untimed warm-up of both paths: the first timed pass paid the process's cold
                         * start (workspace pages, the pool's first jobs), which read as a speedup */
            double tw = 0;
            if (generate(gen, s, smp, NULL, ids, np, a->n_predict, ga, &tw, &err) < 0 ||
                generate(gen, s, smp, sp, ids, np, a->n_predict, gb, &tw, &err) < 0) {
                free(ids);
                goto done;
            }
        }
        for (int r = 0; r < a->reps; r++) {
            double ta = 0, tb = 0;
            na = generate(gen, s, smp, NULL, ids, np, a->n_predict, ga, &ta, &err);
            if (na < 0) { free(ids); goto done; }
            tern_spec_reset_stats(sp);
            nb = generate(gen, s, smp, sp, ids, np, a->n_predict, gb, &tb, &err);
            if (nb < 0) { free(ids); goto done; }
            tern_spec_get_stats(sp, &st);
            if (ta < best_a) best_a = ta;
            if (tb < best_b) best_b = tb;
        }
        free(ids);
        if (na != nb || memcmp(ga, gb, (size_t)na * sizeof *ga) != 0) {
            int d = 0;
            while (d < na && d < nb && ga[d] == gb[d]) d++;
            fprintf(stderr, "tern bench-spec: prompt %d: speculative tokens differ from plain greedy at %d (%d vs %d tokens)\n",
                    i, d, na, nb);
            goto done;
        }
        const double tpa = (na - 1) / best_a, tpb = (nb - 1) / best_b;   /* tokens after the first */
        printf("%-4d %7d %6d %9lld %9lld %7.2f %10.2f %10.2f %7.2f\n", i, np, na, (long long)st.n_drafted,
               (long long)st.n_accepted, st.n_steps ? (double)st.n_tokens / (double)st.n_steps : 0.0, tpa, tpb, tpb / tpa);
        fflush(stdout);
        sum_plain += best_a;
        sum_spec += best_b;
        tot_gen += na - 1;
        tot.n_steps += st.n_steps;
        tot.n_drafted += st.n_drafted;
        tot.n_accepted += st.n_accepted;
        tot.n_tokens += st.n_tokens;
    }
    const double tpa = tot_gen / sum_plain, tpb = tot_gen / sum_spec;
    printf("total: %ld tokens in all, not counting each prompt's first (as the t/s columns), acceptance %.1f%% (%lld of "
           "%lld drafted), %.2f tokens per forward\n", tot_gen,
           tot.n_drafted ? 100.0 * (double)tot.n_accepted / (double)tot.n_drafted : 0.0, (long long)tot.n_accepted,
           (long long)tot.n_drafted, tot.n_steps ? (double)tot.n_tokens / (double)tot.n_steps : 0.0);
    if (ceil_tps <= 0)
        printf("plain %.2f tokens/s, speculative %.2f tokens/s (no decode ceiling: %.1f MB per token fits in the "
               "last-level cache), speedup %.2fx; tokens identical\n",
               tpa, tpb, (double)info.bytes_per_token / 1e6, tpb / tpa);
    else
        printf("plain %.2f tokens/s (%.2f of the decode ceiling %.1f), speculative %.2f tokens/s (%.2f of it), "
               "speedup %.2fx; tokens identical\n",
               tpa, tpa / ceil_tps, ceil_tps, tpb, tpb / ceil_tps, tpb / tpa);
    status = 0;
done:
    if (status && err.code) fprintf(stderr, "tern bench-spec: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
    for (int i = 0; i < n_p; i++) free(texts[i]);
    free(texts);
    free(ga);
    free(gb);
    tern_spec_free(sp);
    tern_gen_free(gen);
    tern_sampler_free(smp);
    return status;
}

/* ---- verification cost ------------------------------------------------------------------------ */

static int cmp_dbl(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of n >= 1 sorted values (the mean of the middle two when n is even). */
static double med_sorted(const double *v, int n) {
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run_cost(const bs_args *a, tern_model *m, tern_session *s, double ceil_tps) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    const int P = a->cost_pos, nmax = a->so.p.draft_max + 1;
    if (P + nmax > tern_session_n_ctx(s)) {   /* without -c: the default capped at the trained length */
        fprintf(stderr, "tern bench-spec: --cost-pos %d + %d tokens (--draft-max + 1) > context %d (%s): expected a "
                        "position and draft that fit the context\n", P, nmax, tern_session_n_ctx(s),
                a->oc.ctx_given ? "-c" : "the model's trained length; -c N sets it");
        return 2;
    }
    if (nmax > tern_session_n_batch(s)) {
        fprintf(stderr, "tern bench-spec: --draft-max + 1 = %d > n_batch %d (-b): expected a draft that fits one batch\n",
                nmax, tern_session_n_batch(s));
        return 2;
    }
    tern_err err = {0};
    int32_t *pre = malloc((size_t)P * sizeof *pre);
    float *logits = malloc((size_t)nmax * (size_t)info.n_vocab * sizeof(float));
    double *t = calloc((size_t)(nmax + 1) * (size_t)a->reps, sizeof *t), *tr = calloc((size_t)(nmax + 1) * (size_t)a->reps, sizeof *tr);
    tern_profile *prof = calloc((size_t)nmax + 1, sizeof *prof);   /* --profile: sums per n */
    int status = 1;
    if (!pre || !logits || !t || !tr || !prof) goto done;
    for (int i = 0; i < P; i++) pre[i] = (int32_t)((7u * (unsigned)i + 3u) % (unsigned)info.n_vocab);
    int32_t toks[TERN_SPEC_DRAFT_LIMIT + 1];
    for (int i = 0; i < nmax; i++) toks[i] = (int32_t)((11u * (unsigned)i + 5u) % (unsigned)info.n_vocab);
    tern_session_reset(s);
    if (P > 4096)   /* the prefix's attention grows with P squared: minutes past a few 10k positions */
        fprintf(stderr, "tern bench-spec: evaluating the %d-token prefix of --cost-pos first\n", P);
    if (!tern_session_eval(s, pre, P, &err)) goto done;
    /* warm-up: one of each */
    for (int n = 1; n <= nmax; n++) {
        if (tern_session_eval_all(s, toks, n, logits, &err) || tern_session_truncate(s, P, &err)) goto done;
    }
    for (int r = 0; r < a->reps; r++)
        for (int n = 1; n <= nmax; n++) {
            if (a->profile) tern_profile_enable(true);
            const double t0 = now_s();
            if (tern_session_eval_all(s, toks, n, logits, &err)) goto done;
            const double t1 = now_s();
            if (a->profile) {
                tern_profile p;
                tern_profile_get(&p);
                tern_profile_enable(false);
                tern_profile *q = &prof[n];
                q->total_s += p.total_s;
                q->embed_s += p.embed_s;
                q->norm_s += p.norm_s;
                q->quant_s += p.quant_s;
                q->matmul_s += p.matmul_s;
                q->matmul_busy_s += p.matmul_busy_s;
                q->attn_s += p.attn_s;
                q->swiglu_s += p.swiglu_s;
                q->recur_s += p.recur_s;
                q->n_forward += p.n_forward;
            }
            if (tern_session_truncate(s, P, &err)) goto done;
            t[n * a->reps + r] = t1 - t0;
            tr[n * a->reps + r] = now_s() - t1;
        }
    for (int n = 1; n <= nmax; n++) {
        qsort(t + n * a->reps, (size_t)a->reps, sizeof *t, cmp_dbl);
        qsort(tr + n * a->reps, (size_t)a->reps, sizeof *tr, cmp_dbl);
    }
    /* A rollback inside the window: COST_W_LOGGED decode steps from the prefix, a verify of nmax
     * tokens, then the truncation (timed) that keeps its first token: on recurrent layers the
     * state is restored from the base (at the prefix, the last unlogged batch) and the
     * COST_W_LOGGED + 1 logged tokens are replayed, as a rejected draft after that many accepted
     * tokens costs; attention-only models just lower the position. Untimed: back to the prefix. */
    enum { COST_W_LOGGED = 15 };
    double *tw = calloc((size_t)a->reps, sizeof *tw);
    const bool fits_w = P + COST_W_LOGGED + nmax <= tern_session_n_ctx(s);
    if (!tw) goto done;
    for (int r = 0; fits_w && r < a->reps; r++) {
        for (int i = 0; i < COST_W_LOGGED; i++)
            if (!tern_session_eval(s, &toks[i % nmax], 1, &err)) { free(tw); goto done; }
        if (tern_session_eval_all(s, toks, nmax, logits, &err)) { free(tw); goto done; }
        const double t0 = now_s();
        if (tern_session_truncate(s, P + COST_W_LOGGED + 1, &err)) { free(tw); goto done; }
        tw[r] = now_s() - t0;
        if (tern_session_truncate(s, P, &err)) { free(tw); goto done; }
    }
    if (fits_w) qsort(tw, (size_t)a->reps, sizeof *tw, cmp_dbl);
    const double t1 = med_sorted(t + 1 * a->reps, a->reps);
    printf("bench-spec --cost: %s (%s, %d layers, n_embd %d), %d thread%s, %s, position %d, median of %d\n", a->oc.model,
           info.arch, info.n_layer, info.n_embd, info.n_threads, info.n_threads == 1 ? "" : "s", info.isa, P, a->reps);
    if (ceil_tps <= 0)
        printf("decode ceiling: none (%.1f MB per token fits in the %.1f MB last-level cache: not bound by the "
               "read bandwidth); one decode step %.2f ms\n",
               (double)info.bytes_per_token / 1e6, (double)opts_llc_bytes() / 1e6, t1 * 1e3);
    else
        printf("decode ceiling %.2f tokens/s (%.1f MB per token / read bandwidth); one decode step %.2f ms = %.2f of it\n",
               ceil_tps, (double)info.bytes_per_token / 1e6, t1 * 1e3, (1.0 / t1) / ceil_tps);
    printf("%8s %8s %12s %12s %14s\n", "columns", "drafted", "eval ms", "vs 1 step", "rollback ms");
    for (int n = 1; n <= nmax; n++) {
        const double tn = med_sorted(t + n * a->reps, a->reps);
        printf("%8d %8d %12.3f %12.3f %14.3f\n", n, n - 1, tn * 1e3, tn / t1, med_sorted(tr + n * a->reps, a->reps) * 1e3);
    }
    uint64_t state_bytes = 0;
    tern_session_mem(m, NULL, NULL, &state_bytes, NULL);
    if (fits_w && state_bytes)
        printf("rollback after %d logged decode steps and a %d-token verify, keeping its first token: %.3f ms (%.2f steps; "
               "the recurrent state restored and %d tokens replayed)\n",
               COST_W_LOGGED, nmax, med_sorted(tw, a->reps) * 1e3, med_sorted(tw, a->reps) / t1, COST_W_LOGGED + 1);
    else if (fits_w)
        printf("rollback after %d logged decode steps and a %d-token verify, keeping its first token: %.3f ms (%.2f steps; "
               "attention layers only: the position is lowered)\n",
               COST_W_LOGGED, nmax, med_sorted(tw, a->reps) * 1e3, med_sorted(tw, a->reps) / t1);
    else
        printf("rollback inside the window: not measured (--cost-pos %d + %d + %d tokens > context %d)\n", P, COST_W_LOGGED,
               nmax, tern_session_n_ctx(s));
    free(tw);
    if (a->profile) {
        /* ms per forward (mean over the timed forwards of each n); wait = matmul wall x threads -
         * thread-seconds inside the kernels, per thread (barrier wait + imbalance) */
        printf("profile, ms per forward:\n%8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "columns", "total", "matmul",
               "wait", "attn", "norm", "quant", "swiglu", "recur", "embed", "other");
        const double nt = info.n_threads;
        for (int n = 1; n <= nmax; n++) {
            const tern_profile *q = &prof[n];
            if (q->n_forward == 0) continue;
            const double k = 1e3 / (double)a->reps;
            const double other = q->total_s - q->embed_s - q->norm_s - q->quant_s - q->matmul_s - q->attn_s -
                                 q->swiglu_s - q->recur_s;
            printf("%8d %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f\n", n, q->total_s * k,
                   q->matmul_s * k, (q->matmul_s * nt - q->matmul_busy_s) / nt * k, q->attn_s * k, q->norm_s * k,
                   q->quant_s * k, q->swiglu_s * k, q->recur_s * k, q->embed_s * k, other * k);
        }
    }
    status = 0;
done:
    if (status && err.code) fprintf(stderr, "tern bench-spec: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
    free(pre);
    free(logits);
    free(t);
    free(tr);
    free(prof);
    return status;
}

/* ---- command ---------------------------------------------------------------------------------- */

static void bs_usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern bench-spec -m MODEL --prompts FILE [options]   (speculative vs plain greedy)\n"
               "       tern bench-spec -m MODEL --cost [options]            (verification cost vs a decode step)\n");
    opts_help(f, t, n_t);
}

int cmd_bench_spec(int argc, char **argv) {
    bs_args a;
    memset(&a, 0, sizeof a);
    opts_common_default(&a.oc);
    spec_opts_default(&a.so);
    a.n_prompts = 4;
    a.n_predict = 128;
    a.cost_pos = 64;
    const opt_table tabs[] = {opts_tab_model, OPT_TABLE(bs_defs), spec_opts_tab_tuning, opts_tab_threads, opts_tab_ctx,
                              opts_tab_load};
    const int n_tabs = (int)(sizeof tabs / sizeof tabs[0]);
    /* the flags given that only one mode reads, as typed, for the warning below */
    const char *cost_only[4], *prompts_only[8];
    int n_cost_only = 0, n_prompts_only = 0;
    bool cost_pos_given = false;
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int at = i;
        const int id = opts_next("bench-spec", tabs, n_tabs, argc, argv, &i, &v);
        if (id == OPT_HELP) { bs_usage(stdout, tabs, n_tabs); return 0; }
        if (id == OPT_ERR) return 2;
        if (id == OPT_POSITIONAL) return opts_unexpected("bench-spec", v.str);
        if (id == BS_COST_POS || id == BS_PROFILE) {
            if (n_cost_only < 4) cost_only[n_cost_only++] = argv[at];
        } else if (id == BS_PROMPTS || id == BS_CATEGORY || id == BS_N_PROMPTS || id == BS_N_PREDICT || id == BS_RAW ||
                   id == BS_MAX_PROMPT) {
            if (n_prompts_only < 8) prompts_only[n_prompts_only++] = argv[at];
        }
        if (opts_apply_common(&a.oc, id, &v) || spec_opts_apply(&a.so, id, &v)) continue;
        switch (id) {
        case BS_PROMPTS: a.prompts = v.str; break;
        case BS_CATEGORY: a.category = v.str; break;
        case BS_N_PROMPTS: a.n_prompts = (int)v.i; break;
        case BS_N_PREDICT: a.n_predict = (int)v.i; break;
        case BS_REPS: a.reps = (int)v.i; break;
        case BS_RAW: a.raw = a.raw_set = true; break;
        case BS_COST: a.cost = true; break;
        case BS_COST_POS: a.cost_pos = (int)v.i; cost_pos_given = true; break;
        case BS_PROFILE: a.profile = true; break;
        case BS_MAX_PROMPT: a.max_prompt = (int)v.i; break;
        default: break;
        }
    }
    if (!a.oc.model || (!a.cost && !a.prompts)) {
        fprintf(stderr, "tern bench-spec: %s is required; see tern bench-spec --help\n", !a.oc.model ? "-m MODEL" : "--prompts FILE (or --cost)");
        return 2;
    }
    if (a.so.min_given && n_prompts_only < 8) prompts_only[n_prompts_only++] = "--spec-ngram-min";
    if (a.so.max_given && n_prompts_only < 8) prompts_only[n_prompts_only++] = "--spec-ngram-max";
    /* each mode names the flags it does not read (a --prompts file is then not opened either) */
    const char *const *ignored = a.cost ? prompts_only : cost_only;
    const int n_ignored = a.cost ? n_prompts_only : n_cost_only;
    for (int k = 0; k < n_ignored; k++)
        fprintf(stderr, "tern bench-spec: warning: %s has no effect %s\n", ignored[k],
                a.cost ? "with --cost (it times forwards of fixed tokens)" : "without --cost (it belongs to the cost mode)");
    a.so.on = true;                       /* bench-spec always speculates: no "--spec lookup" needed */
    /* the n-gram range, named by its flags (as run/chat do); --cost reads neither end (warned above) */
    if (!a.cost && spec_opts_check(&a.so)) return 2;
    if (!a.reps) a.reps = a.cost ? 7 : 1;
    tern_err err = {0};
    tern_model *m = NULL;
    tern_session *s = NULL;
    int status = 1;
    char **texts = NULL;   /* the prompts, read and checked before the model loads */
    int n_p = 0;
    if (!a.cost && (n_p = load_prompts(&a, &texts)) < 0) goto done;
    if (a.cost) {   /* before the load: the context is at most -c, or the default 4096 without it */
        const int ctx_max = a.oc.ctx_given ? a.oc.n_ctx : 4096, nmax = a.so.p.draft_max + 1;
        if (a.cost_pos + nmax > ctx_max) {
            fprintf(stderr, "tern bench-spec: --cost-pos %d%s + %d tokens (--draft-max + 1) > context %d (%s): expected a "
                            "position and draft that fit the context\n", a.cost_pos, cost_pos_given ? "" : " (the default)",
                    nmax, ctx_max, a.oc.ctx_given ? "-c" : "the default; -c N sets it");
            status = 2;
            goto done;
        }
    }
    if (opts_load(&a.oc, &m, &s, &err)) goto done;
    tern_model_info info;
    tern_model_get_info(m, &info);
    double gbs = 0;
    if (tern_membw(info.n_threads, (size_t)256 << 20, 3, &gbs, &err)) goto done;
    const double ceil_tps = opts_fits_llc(info.n_threads, (double)info.bytes_per_token, gbs)
                                ? 0 : gbs * 1e9 / (double)info.bytes_per_token;
    status = a.cost ? run_cost(&a, m, s, ceil_tps) : run_generation(&a, m, s, ceil_tps, texts, n_p);
    texts = NULL;   /* run_generation frees them */
done:
    if (texts) {
        for (int i = 0; i < n_p; i++) free(texts[i]);
        free(texts);
    }
    if (err.code && status) fprintf(stderr, "tern bench-spec: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
    tern_session_free(s);
    tern_model_free(m);
    return status;
}
