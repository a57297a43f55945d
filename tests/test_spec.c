/* test_spec.c: speculative decoding (tern_spec_*, src/spec/).
 * - the prompt-lookup drafter against hand-worked histories (longest n-gram first, most recent
 *   occurrence, periodic continuation, no match);
 * - greedy equality: token for token with plain greedy decoding (argmax + one-token eval, written
 *   here independently of the library's loop) on stories260K (llama, real weights), the
 *   synthetic Bonsai-format qwen3-tiny and qwen35-tiny (hybrid Gated DeltaNet) goldens, for their
 *   golden prompts and several draft settings, generation ending at n_predict and at the context
 *   limit; after generation the next logits are compared bit for bit (KV and recurrent state
 *   exact after every rollback);
 * - forced partial acceptance on every architecture: drafts built from the plain greedy output
 *   with one token changed at a chosen position must be accepted exactly up to that position;
 * - the sampling rule: the distribution of the first returned token after a drafted x must be
 *   the sampler's distribution p (softmax of the logits at temperature T, top-k applied),
 *   computed here from the logits; chi-square over 6000 draws, plus the acceptance frequency of
 *   x against p(x);
 * - the programs: `tern run` and `tern chat` print the same text with and without --spec lookup
 *   (greedy; run to -n and to the context limit; chat over two turns), and print the stats. */
#include "model_fx.h"
#include "run_util.h"
#include "test.h"

#include "core/core.h"
#include "spec/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORIES "data/stories260k/stories260K.gguf"
#define QWEN3 "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"
#define QWEN35 "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf"
#define MAXP 64
#define MAXG 320

static tern_model *load_fx(const char *rel) {
    char path[1024];
    fx_require(path, sizeof path, rel);
    return mfx_load(path, TERN_NUMERICS_FAST, 1);   /* one thread: fast under load */
}

/* ---- drafter --------------------------------------------------------------------------------- */

static void check_lookup(const tern_spec_params *p, const int32_t *hist, int n, int32_t last, int k,
                         const int32_t *want, int n_want) {
    tern_err err = {0};
    tern_spec *sp = NULL;
    tern_model *m = load_fx(STORIES);
    assert_int_equal(tern_spec_init(&sp, m, p, &err), TERN_OK);
    assert_int_equal(tern_spec_add(sp, hist, n, &err), TERN_OK);
    int32_t d[TERN_SPEC_DRAFT_LIMIT];
    const int got = spec_lookup(sp, last, d, k, &err);
    assert_int_equal(got, n_want);
    for (int i = 0; i < n_want; i++)
        if (d[i] != want[i]) fail_msg("draft[%d] = %d, expected %d", i, d[i], want[i]);
    assert_int_equal(tern_spec_n_history(sp), n);   /* lookup leaves the history alone */
    tern_spec_free(sp);
    tern_model_free(m);
}

static void test_lookup(void **st) {
    (void)st;
    tern_spec_params p;
    tern_spec_params_default(&p);   /* n-grams 2..4 */
    {   /* (10 11 12) seen at 0..2: continuation 13 14 10 11 12, then periodic through the draft */
        const int32_t h[] = {10, 11, 12, 13, 14, 10, 11};
        const int32_t w[] = {13, 14, 10, 11, 12, 13, 14, 10};
        check_lookup(&p, h, 7, 12, 8, w, 8);
    }
    {   /* (1 2) occurs twice: the most recent (followed by 4) wins */
        const int32_t h[] = {1, 2, 3, 1, 2, 4, 1};
        const int32_t w[] = {4, 1, 2, 4};
        check_lookup(&p, h, 7, 2, 4, w, 4);
    }
    {   /* longest first: (5 1 2) -> 9 beats the more recent (1 2) -> 8 */
        const int32_t h[] = {5, 1, 2, 9, 7, 1, 2, 8, 5, 1};
        const int32_t w[] = {9, 7};
        check_lookup(&p, h, 10, 2, 2, w, 2);
    }
    {   /* nothing matches: no draft (plain decode) */
        const int32_t h[] = {1, 2, 3, 4, 5};
        check_lookup(&p, h, 5, 2, 4, NULL, 0);
    }
    p.ngram_min = 1;
    {   /* unigram (2) -> 3 */
        const int32_t h[] = {1, 2, 3};
        const int32_t w[] = {3, 2, 3};
        check_lookup(&p, h, 3, 2, 3, w, 3);
    }
    /* a long history: the index finds the one earlier occurrence among thousands of n-grams */
    {
        enum { N = 5000 };
        int32_t *h = malloc(N * sizeof *h);
        for (int i = 0; i < N; i++) h[i] = 3 + (int32_t)((i * 7919u) % 250u) + (i >= 1000 ? 250 : 0);   /* < 512: the vocabulary */
        h[N - 2] = h[10];   /* suffix (h[10], h[11], last = h[12]) occurred at 10..12 */
        h[N - 1] = h[11];
        const int32_t w[] = {h[13], h[14], h[15]};
        tern_spec_params_default(&p);
        check_lookup(&p, h, N, h[12], 3, w, 3);
        free(h);
    }
}

/* Parts made for different models are refused before any buffer is touched: a spec against a
 * session or sampler of another model, a generator begun with another model's session, sampler or
 * spec (its calls stop with TERN_STOP_ERROR and say why); sampling before any begin, a NULL
 * sampler or logits, an out-of-vocabulary id given to the drafter, and an empty tern_spec_add. */
static void test_mismatched_parts(void **st) {
    (void)st;
    tern_model *ms = load_fx(STORIES), *mq = load_fx(QWEN3);
    tern_err err = {0};
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = 64;
    tern_session *ss = NULL, *sq = NULL;
    assert_int_equal(tern_session_init(&ss, ms, &so, &err), TERN_OK);
    assert_int_equal(tern_session_init(&sq, mq, &so, &err), TERN_OK);
    assert_ptr_equal(tern_session_model(sq), mq);
    tern_sampler_params sp_p;
    tern_sampler_params_default(&sp_p);
    sp_p.temp = 0;
    tern_sampler *smp_s = NULL, *smp_q = NULL;
    assert_int_equal(tern_sampler_init(&smp_s, ms, &sp_p, &err), TERN_OK);
    assert_int_equal(tern_sampler_init(&smp_q, mq, &sp_p, &err), TERN_OK);
    assert_int_equal(tern_sampler_n_vocab(smp_s), 512);
    tern_spec *spec_s = NULL;
    assert_int_equal(tern_spec_init(&spec_s, ms, NULL, &err), TERN_OK);
    const int32_t pr[] = {1, 100, 101, 102};
    assert_int_equal(tern_spec_add(spec_s, pr, 0, &err), TERN_OK);   /* nothing to add: fine */
    const int32_t bad_ids[] = {5, -1};
    err = (tern_err){0};
    assert_int_equal(tern_spec_add(spec_s, bad_ids, 2, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "tern_spec_add: token -1 at index 1, expected 0..511");
    assert_int_equal(tern_spec_n_history(spec_s), 0);
    assert_non_null(tern_session_eval(sq, pr, 4, &err));
    assert_int_equal(tern_spec_add(spec_s, pr, 4, &err), TERN_OK);
    int32_t out[8];
    int n_out = 0;
    const int32_t draft[] = {100, 101};
    err = (tern_err){0};
    assert_int_equal(tern_spec_verify(spec_s, sq, smp_s, 100, draft, 2, 8, out, &n_out, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "tern_spec_verify: the session is of another model than the spec's (tern_spec_init)");
    assert_non_null(tern_session_eval(ss, pr, 4, &err));
    err = (tern_err){0};
    assert_int_equal(tern_spec_step(spec_s, ss, smp_q, 100, 8, out, &n_out, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "tern_spec_step: the sampler is for 151936 tokens, the model has 512");
    assert_int_equal(tern_session_pos(ss), 4);   /* nothing evaluated */
    /* the generator */
    tern_gen *g = NULL;
    assert_int_equal(tern_gen_init(&g, ms, &err), TERN_OK);
    float logits[512] = {0};
    assert_int_equal(tern_gen_sample(g, logits), TERN_STOP_ERROR);   /* before any begin */
    err = (tern_err){0};
    assert_int_equal(tern_gen_end(g, &err), TERN_STOP_ERROR);
    assert_string_equal(err.msg, "no reply begun (call tern_gen_begin first)");
    tern_gen_begin(g, ss, smp_q, NULL, NULL);
    err = (tern_err){0};
    assert_int_equal(tern_gen_run(g, logits, &err), TERN_STOP_ERROR);
    assert_string_equal(err.msg, "tern_gen_begin: the sampler is for 151936 tokens, the model has 512");
    tern_gen_begin(g, sq, smp_s, NULL, NULL);
    err = (tern_err){0};
    assert_null(tern_gen_prompt(g, pr, 4, &err));
    assert_string_equal(err.msg, "tern_gen_begin: the session is of another model than the generator's");
    tern_spec *spec_q = NULL;
    assert_int_equal(tern_spec_init(&spec_q, mq, NULL, &err), TERN_OK);
    tern_gen_begin(g, ss, smp_s, spec_q, NULL);
    err = (tern_err){0};
    assert_int_equal(tern_gen_run(g, logits, &err), TERN_STOP_ERROR);
    assert_string_equal(err.msg, "tern_gen_begin: the spec is of another model than the generator's");
    /* a forced id outside the vocabulary is named */
    tern_gen_params gp;
    tern_gen_params_default(&gp);
    const int32_t forced[] = {5, 600};
    gp.forced = forced;
    gp.n_forced = 2;
    gp.n_predict = 4;
    tern_gen_begin(g, ss, smp_s, NULL, &gp);
    err = (tern_err){0};
    assert_int_equal(tern_gen_run(g, logits, &err), TERN_STOP_ERROR);
    assert_string_equal(err.msg, "tern_gen: forced token 600 at reply index 1, expected 0..511");
    /* parts that match run */
    gp.n_forced = 1;
    tern_gen_begin(g, ss, smp_s, NULL, &gp);
    err = (tern_err){0};
    assert_int_equal(tern_gen_run(g, tern_session_eval(ss, pr, 1, &err), &err), TERN_STOP_LENGTH);
    assert_int_equal(tern_sampler_sample(NULL, logits), -1);
    assert_int_equal(tern_sampler_sample(smp_s, NULL), -1);
    uint64_t kv = 1;
    tern_session_mem(NULL, NULL, &kv, NULL, NULL);
    assert_int_equal(kv, 0);
    tern_gen_free(g);
    tern_spec_free(spec_q);
    tern_spec_free(spec_s);
    tern_sampler_free(smp_s);
    tern_sampler_free(smp_q);
    tern_session_free(ss);
    tern_session_free(sq);
    tern_model_free(ms);
    tern_model_free(mq);
}

static void test_params(void **st) {
    (void)st;
    tern_model *m = load_fx(STORIES);
    tern_err err = {0};
    tern_spec *sp = NULL;
    tern_spec_params p;
    tern_spec_params_default(&p);
    p.draft_max = TERN_SPEC_DRAFT_LIMIT + 1;
    assert_int_equal(tern_spec_init(&sp, m, &p, &err), TERN_E_ARG);
    assert_non_null(strstr(err.msg, "draft_max"));
    tern_spec_params_default(&p);
    p.ngram_max = 1;
    err = (tern_err){0};   /* errors are sticky */
    assert_int_equal(tern_spec_init(&sp, m, &p, &err), TERN_E_ARG);
    assert_non_null(strstr(err.msg, "ngram_max"));
    assert_null(sp);
    /* a step whose history is not the session's tokens is refused, nothing changes */
    tern_spec_params_default(&p);
    assert_int_equal(tern_spec_init(&sp, m, &p, &err), TERN_OK);
    tern_session *s = mfx_session(m, 16, 16, false);
    tern_sampler_params sprm;
    tern_sampler_params_default(&sprm);
    sprm.temp = 0;
    tern_sampler *smp = NULL;
    assert_int_equal(tern_sampler_init(&smp, m, &sprm, &err), TERN_OK);
    const int32_t pr[] = {1, 403, 407};
    assert_non_null(tern_session_eval(s, pr, 3, &err));
    int32_t out[8];
    int n = -1;
    tern_err_clear(&err);
    assert_int_equal(tern_spec_step(sp, s, smp, 261, 8, out, &n, &err), TERN_E_ARG);
    assert_non_null(strstr(err.msg, "history"));
    assert_int_equal(tern_session_pos(s), 3);
    assert_int_equal(tern_spec_add(sp, pr, 3, &err), TERN_OK);
    assert_int_equal(tern_spec_step(sp, s, smp, 9999, 8, out, &n, &err), TERN_E_RANGE);
    assert_int_equal(tern_spec_step(sp, s, smp, 261, 0, out, &n, &err), TERN_E_ARG);
    /* full context: the last token cannot be evaluated */
    int32_t fill[13];
    for (int i = 0; i < 13; i++) fill[i] = 300 + i;
    assert_non_null(tern_session_eval(s, fill, 13, &err));
    assert_int_equal(tern_spec_add(sp, fill, 13, &err), TERN_OK);
    assert_int_equal(tern_spec_step(sp, s, smp, 261, 8, out, &n, &err), TERN_E_RANGE);
    tern_sampler_free(smp);
    tern_session_free(s);
    tern_spec_free(sp);
    tern_model_free(m);
}

/* ---- greedy equality ------------------------------------------------------------------------- */

/* Plain greedy decoding as tern run does it: sample (argmax), stop at EOG / n_predict / full
 * context, else evaluate the token. Returns the token count; *next gets the logits after the
 * last token (evaluated here if room is left; else left untouched and *has_next = false). */
static int plain_greedy(tern_model *m, int n_ctx, const int32_t *prompt, int np, int n_predict, int32_t *out,
                        float *next, bool *has_next) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *s = mfx_session(m, n_ctx, 64, false);
    tern_err err = {0};
    const float *l = tern_session_eval(s, prompt, np, &err);
    assert_non_null(l);
    int n = 0;
    for (;;) {
        const int32_t id = mfx_argmax(l, info.n_vocab);
        out[n++] = id;
        if (tern_token_is_eog(m, id) || n == n_predict || tern_session_pos(s) >= n_ctx) break;
        l = tern_session_eval(s, &id, 1, &err);
        assert_non_null(l);
    }
    *has_next = tern_session_pos(s) < n_ctx;
    if (*has_next) {
        l = tern_session_eval(s, &out[n - 1], 1, &err);
        assert_non_null(l);
        memcpy(next, l, (size_t)info.n_vocab * sizeof(float));
    }
    tern_session_free(s);
    return n;
}

/* Same through tern_spec_step (forced != NULL: tern_spec_verify with drafts from forced[], the
 * plain output, changed at a chosen position; the accepted count is checked). */
static int spec_greedy(tern_model *m, int n_ctx, int n_batch, const int32_t *prompt, int np, int n_predict,
                       const tern_spec_params *p, const int32_t *forced, int n_forced, int32_t *out, float *next,
                       tern_spec_stats *stats) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *s = mfx_session(m, n_ctx, n_batch, false);
    tern_err err = {0};
    tern_spec *sp = NULL;
    if (tern_spec_init(&sp, m, p, &err)) fail_msg("spec init: %s", err.msg);
    tern_sampler_params sprm;
    tern_sampler_params_default(&sprm);
    sprm.temp = 0;
    tern_sampler *smp = NULL;
    assert_int_equal(tern_sampler_init(&smp, m, &sprm, &err), TERN_OK);
    const float *l = tern_session_eval(s, prompt, np, &err);
    assert_non_null(l);
    assert_int_equal(tern_spec_add(sp, prompt, np, &err), TERN_OK);
    int32_t last = tern_sampler_sample(smp, l);
    tern_sampler_accept(smp, last);
    int n = 0, step = 0;
    out[n++] = last;
    while (!tern_token_is_eog(m, last) && n < n_predict && tern_session_pos(s) < n_ctx) {
        int32_t buf[TERN_SPEC_DRAFT_LIMIT + 1];
        int k = 0;
        const int n_max = TERN_MIN(n_predict - n, TERN_SPEC_DRAFT_LIMIT + 1);
        if (forced) {
            /* draft forced[n .. n+kd) with the token at position j (if j < kd) changed */
            const int kd = TERN_MIN(1 + step % p->draft_max, n_forced - n);
            const int j = step % (kd + 1);
            int32_t d[TERN_SPEC_DRAFT_LIMIT];
            for (int i = 0; i < kd; i++) d[i] = forced[n + i];
            if (j < kd) d[j] = (d[j] + 1) % info.n_vocab;
            const int pos0 = tern_session_pos(s);
            tern_spec_stats before, after;
            tern_spec_get_stats(sp, &before);
            if (tern_spec_verify(sp, s, smp, last, d, kd, n_max, buf, &k, &err)) fail_msg("verify: %s", err.msg);
            tern_spec_get_stats(sp, &after);
            /* the draft as cut by n_max and the context */
            const int kc = TERN_MIN(kd, TERN_MIN(n_max - 1, n_ctx - pos0 - 1));
            const int64_t want_acc = TERN_MIN(j, kc);
            if (after.n_accepted - before.n_accepted != want_acc)
                fail_msg("step %d: %d of %d drafted accepted, expected %d (changed at %d)", step,
                         (int)(after.n_accepted - before.n_accepted), kc, (int)want_acc, j);
            assert_int_equal(k, want_acc + 1);
        } else if (tern_spec_step(sp, s, smp, last, n_max, buf, &k, &err)) {
            fail_msg("step: %s", err.msg);
        }
        assert_true(k >= 1 && k <= n_max);
        for (int i = 0; i < k; i++) out[n++] = buf[i];
        last = buf[k - 1];
        assert_int_equal(tern_spec_n_history(sp), tern_session_pos(s));
        step++;
    }
    if (tern_session_pos(s) < n_ctx) {
        l = tern_session_eval(s, &last, 1, &err);
        assert_non_null(l);
        memcpy(next, l, (size_t)info.n_vocab * sizeof(float));
    }
    tern_spec_get_stats(sp, stats);
    tern_sampler_free(smp);
    tern_spec_free(sp);
    tern_session_free(s);
    return n;
}

typedef struct { int n_ctx_extra; int n_predict; int draft_max; int ngram_min, ngram_max; bool adaptive; } gcase;

/* Every golden prompt of the model (prompts.json) x cases: same tokens, same next logits. */
static void greedy_equal(const char *model_rel, const char *prompts_rel, int max_prompts, const gcase *cases,
                         int n_cases, bool forced, tern_spec_stats *total) {
    tern_model *m = load_fx(model_rel);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t V = (size_t)info.n_vocab;
    float *na = malloc(V * sizeof(float)), *nb = malloc(V * sizeof(float));
    int32_t *ga = malloc(MAXG * sizeof *ga), *gb = malloc(MAXG * sizeof *gb);
    assert_true(na && nb && ga && gb);
    cJSON *j = mfx_json(prompts_rel);
    const cJSON *pe;
    memset(total, 0, sizeof *total);
    int n_prompts = 0;
    cJSON_ArrayForEach(pe, cJSON_GetObjectItem(j, "prompts")) {
        if (n_prompts++ == max_prompts) break;
        int np = 0;
        int32_t *prompt = mfx_ids(cJSON_GetObjectItem(pe, "token_ids"), &np);
        if (np > MAXP) np = MAXP;
        for (int c = 0; c < n_cases; c++) {
            const gcase *gc = &cases[c];
            const int n_ctx = gc->n_ctx_extra > 0 ? np + gc->n_ctx_extra : 512;
            bool has_next = false;
            const int n_a = plain_greedy(m, n_ctx, prompt, np, gc->n_predict, ga, na, &has_next);
            tern_spec_params p;
            tern_spec_params_default(&p);
            p.draft_max = gc->draft_max;
            p.ngram_min = gc->ngram_min;
            p.ngram_max = gc->ngram_max;
            p.adaptive = gc->adaptive;
            tern_spec_stats stt;
            const int n_b = spec_greedy(m, n_ctx, 64, prompt, np, gc->n_predict, &p, forced ? ga : NULL, n_a, gb, nb, &stt);
            if (n_a != n_b) fail_msg("%s prompt %s case %d: %d plain tokens, %d speculative", model_rel,
                                     cJSON_GetObjectItem(pe, "id")->valuestring, c, n_a, n_b);
            for (int i = 0; i < n_a; i++)
                if (ga[i] != gb[i])
                    fail_msg("%s prompt %s case %d: token %d is %d plain, %d speculative", model_rel,
                             cJSON_GetObjectItem(pe, "id")->valuestring, c, i, ga[i], gb[i]);
            if (has_next && memcmp(na, nb, V * sizeof(float)) != 0)
                fail_msg("%s prompt %s case %d: the logits after generation differ (state not exact)", model_rel,
                         cJSON_GetObjectItem(pe, "id")->valuestring, c);
            total->n_steps += stt.n_steps;
            total->n_drafted += stt.n_drafted;
            total->n_accepted += stt.n_accepted;
            total->n_tokens += stt.n_tokens;
        }
        free(prompt);
    }
    cJSON_Delete(j);
    free(na);
    free(nb);
    free(ga);
    free(gb);
    tern_model_free(m);
}

static const gcase LOOKUP_CASES[] = {
    {0, 200, 8, 2, 4, true},    /* to n_predict, default drafter */
    {0, 120, 14, 1, 3, false},  /* longest drafts, unigram matches, no adaptation */
    {0, 97, 3, 2, 2, true},     /* odd n_predict: drafts cut at the end of generation */
    {40, 300, 8, 1, 4, true},   /* to the context limit (n_ctx = prompt + 40) */
};

static void test_greedy_stories(void **st) {
    (void)st;
    tern_spec_stats t;
    greedy_equal(STORIES, "golden/stories260k/prompts.json", 99, LOOKUP_CASES, 4, false, &t);
    /* the story text repeats itself: the drafter must have drafted and been accepted */
    assert_true(t.n_drafted > 0 && t.n_accepted > 0);
    assert_true(t.n_tokens > t.n_steps);   /* fewer forwards than tokens */
}

static void test_greedy_qwen3(void **st) {
    (void)st;
    tern_spec_stats t;
    static const gcase c[] = {{0, 64, 8, 1, 4, true}, {20, 80, 6, 1, 2, false}};
    greedy_equal(QWEN3, "golden/qwen3-tiny-pq2_0/prompts.json", 2, c, 2, false, &t);
}

static void test_greedy_qwen35(void **st) {
    (void)st;
    tern_spec_stats t;
    static const gcase c[] = {{0, 64, 8, 1, 4, true}, {20, 80, 14, 1, 2, false}};
    greedy_equal(QWEN35, "golden/qwen35-tiny-pq2_0/prompts.json", 3, c, 2, false, &t);
}

/* Forced drafts with one wrong token at a rotating position: partial acceptance of every length
 * 0..k on every architecture, the KV and recurrent state rolled back each time. */
static void test_forced_partial(void **st) {
    (void)st;
    static const gcase c[] = {{0, 60, 7, 2, 4, true}, {30, 90, 14, 2, 4, true}};
    tern_spec_stats t;
    greedy_equal(QWEN35, "golden/qwen35-tiny-pq2_0/prompts.json", 2, c, 2, true, &t);
    assert_true(t.n_accepted > 0 && t.n_accepted < t.n_drafted);
    greedy_equal(QWEN3, "golden/qwen3-tiny-pq2_0/prompts.json", 1, c, 1, true, &t);
    greedy_equal(STORIES, "golden/stories260k/prompts.json", 99, c, 2, true, &t);
}

/* ---- sampling: the output distribution is the sampler's ------------------------------------- */

/* Chi-square upper quantile at probability 1e-4 (Wilson-Hilferty, z = 3.719). */
static double chi2_crit(int df) {
    const double a = 2.0 / (9.0 * df);
    const double c = 1.0 - a + 3.719 * sqrt(a);
    return df * c * c * c;
}

static void sampling_rule(float temp, int top_k, int draft_rank) {
    tern_model *m = load_fx(STORIES);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const int V = info.n_vocab;
    tern_session *s = mfx_session(m, 64, 16, false);
    tern_err err = {0};
    const int32_t prompt[] = {1, 403, 407, 261, 378, 432, 383};
    const int np = 7;
    const int32_t last = 286;
    assert_non_null(tern_session_eval(s, prompt, np, &err));
    /* the target distribution at the draft position, computed here from the logits after last */
    const float *l = tern_session_eval(s, &last, 1, &err);
    assert_non_null(l);
    double *p = calloc((size_t)V, sizeof *p);
    int *rank = malloc((size_t)V * sizeof *rank);   /* ids by logit, best first (ties: lower id) */
    for (int i = 0; i < V; i++) rank[i] = i;
    for (int i = 1; i < V; i++) {                   /* insertion sort, V = 512 */
        const int x = rank[i];
        int j = i;
        for (; j > 0 && (l[x] > l[rank[j - 1]] || (l[x] == l[rank[j - 1]] && x < rank[j - 1])); j--) rank[j] = rank[j - 1];
        rank[j] = x;
    }
    const int kk = top_k > 0 ? top_k : V;
    double z = 0;
    for (int r = 0; r < kk; r++) z += exp(((double)l[rank[r]] - l[rank[0]]) / temp);
    for (int r = 0; r < kk; r++) p[rank[r]] = exp(((double)l[rank[r]] - l[rank[0]]) / temp) / z;
    const int32_t x = rank[draft_rank];
    assert_int_equal(tern_session_truncate(s, np, &err), TERN_OK);

    tern_sampler_params sprm;
    tern_sampler_params_default(&sprm);
    sprm.temp = temp;
    sprm.top_k = top_k;
    sprm.top_p = 1.0f;
    sprm.min_p = 0.0f;
    sprm.seed = 1234;
    tern_sampler *smp = NULL;
    assert_int_equal(tern_sampler_init(&smp, m, &sprm, &err), TERN_OK);
    tern_spec *sp = NULL;
    assert_int_equal(tern_spec_init(&sp, m, NULL, &err), TERN_OK);
    enum { N = 6000 };
    long *cnt = calloc((size_t)V, sizeof *cnt);
    long n_acc = 0;
    for (int t = 0; t < N; t++) {
        tern_spec_reset(sp);
        assert_int_equal(tern_spec_add(sp, prompt, np, &err), TERN_OK);
        int32_t out[2];
        int n = 0;
        assert_int_equal(tern_spec_verify(sp, s, smp, last, &x, 1, 2, out, &n, &err), TERN_OK);
        assert_true(n == 1 || n == 2);
        assert_true(out[0] >= 0 && out[0] < V);
        cnt[out[0]]++;
        if (n == 2) {
            assert_int_equal(out[0], x);   /* two tokens only when x was accepted */
            n_acc++;
        }
        assert_int_equal(tern_session_truncate(s, np, &err), TERN_OK);
    }
    /* acceptance frequency of x: binomial, within 5 sigma of N p(x) */
    const double sd = sqrt(N * p[x] * (1 - p[x]));
    if (fabs((double)n_acc - N * p[x]) > 5 * sd + 1e-9)
        fail_msg("x accepted %ld times of %d, expected %.1f (p(x) = %.4f)", n_acc, N, N * p[x], p[x]);
    /* chi-square of the returned token against p: cells with expectation >= 5, the rest pooled */
    double chi = 0, pool_e = 0;
    long pool_o = 0;
    int cells = 0;
    for (int i = 0; i < V; i++) {
        const double e = N * p[i];
        if (e == 0.0 && cnt[i] != 0) fail_msg("token %d drawn %ld times, but its probability is 0", i, cnt[i]);
        if (e >= 5) {
            chi += (cnt[i] - e) * (cnt[i] - e) / e;
            cells++;
        } else {
            pool_e += e;
            pool_o += cnt[i];
        }
    }
    if (pool_e >= 5) {
        chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        cells++;
    }
    assert_true(cells >= 3);
    if (chi > chi2_crit(cells - 1))
        fail_msg("temp %.2f top_k %d draft rank %d: chi-square %.1f over %d cells > %.1f", (double)temp, top_k,
                 draft_rank, chi, cells, chi2_crit(cells - 1));
    free(cnt);
    free(p);
    free(rank);
    tern_spec_free(sp);
    tern_sampler_free(smp);
    tern_session_free(s);
    tern_model_free(m);
}

static void test_sampling_rule(void **st) {
    (void)st;
    sampling_rule(2.0f, 0, 1);     /* full softmax, x the second most likely */
    sampling_rule(1.5f, 8, 0);     /* top-k 8 and temperature, x the most likely */
    sampling_rule(2.5f, 8, 20);    /* x outside the top-k: p(x) = 0, always rejected */
}

/* ---- the programs ----------------------------------------------------------------------------- */

static void cli_same(const char *what, const char *plain_args, const char *spec_args) {
    char *a = NULL, *b = NULL, *eb = NULL;
    assert_int_equal(ru_tern(&a, NULL, "%s", plain_args), 0);
    assert_int_equal(ru_tern(&b, &eb, "%s %s", plain_args, spec_args), 0);
    if (strcmp(a, b) != 0) fail_msg("%s: output differs with %s", what, spec_args);
    if (!strstr(eb, "speculative: ") || !strstr(eb, "accepted (acceptance "))
        fail_msg("%s: no speculative stats on stderr: %s", what, eb);
    free(a);
    free(b);
    free(eb);
}

static void test_programs(void **st) {
    (void)st;
    char bin[1024], m[1024], q[1024];
    ru_need_tern(bin, sizeof bin);
    fx_require(m, sizeof m, STORIES);
    fx_require(q, sizeof q, QWEN35);
    char args[3000];
    snprintf(args, sizeof args, "run -m '%s' -p 'Once upon a time' -n 150 --temp 0 -t 1", m);
    cli_same("tern run", args, "--spec lookup");
    cli_same("tern run", args, "--spec lookup --draft-max 14 --spec-ngram-min 1 --spec-ngram-max 3");
    snprintf(args, sizeof args, "run -m '%s' -p 'Lily and Ben' -n 300 -c 90 --temp 0 -t 1", m);   /* to the context */
    cli_same("tern run (context limit)", args, "--spec lookup --draft-max 6");
    for (int n = 0; n <= 2; n++) {                                                  /* -n 0, 1, 2 */
        snprintf(args, sizeof args, "run -m '%s' -p 'Once upon a time' -n %d --temp 0 -t 1", m, n);
        cli_same("tern run (short -n)", args, "--spec lookup");
    }
    snprintf(args, sizeof args, "run -m '%s' -p 'The history of' -n 40 --temp 0 -t 1", q);
    cli_same("tern run (qwen35)", args, "--spec lookup --spec-ngram-min 1");
    char in[512];
    fx_tmp_path(in, sizeof in, "spec-chat-in.txt");
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    fputs("Once upon a time\nThe cat sat\n", f);
    fclose(f);
    snprintf(args, sizeof args, "chat -m '%s' --temp 0 -n 60 -t 1 < '%s'", m, in);
    char *a = NULL, *b = NULL, *eb = NULL;
    assert_int_equal(ru_tern(&a, NULL, "%s", args), 0);
    snprintf(args, sizeof args, "chat -m '%s' --temp 0 -n 60 -t 1 --spec lookup --draft-max 4 < '%s'", m, in);
    assert_int_equal(ru_tern(&b, &eb, "%s", args), 0);
    unlink(in);
    if (strcmp(a, b) != 0) fail_msg("tern chat: the replies differ with --spec lookup");
    assert_non_null(strstr(eb, "[turn 2:"));
    assert_non_null(strstr(eb, "speculative: "));
    free(a);
    free(b);
    free(eb);
}

int suite_spec(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_mismatched_parts),
        cmocka_unit_test(test_greedy_stories),
        cmocka_unit_test(test_greedy_qwen3),
        cmocka_unit_test(test_greedy_qwen35),
        cmocka_unit_test(test_forced_partial),
        cmocka_unit_test(test_sampling_rule),
        cmocka_unit_test(test_programs),
    };
    TEST_RUN_SUITE("spec", tests);
}
