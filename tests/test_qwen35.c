/* test_qwen35.c: the qwen35 forward through the public API against the reference runtime's
 * goldens (../shared/golden/qwen35-tiny-pq2_0, tolerances from its PROVENANCE.md and
 * golden/README.md), and the engine properties: 1 vs 2 threads bit-identical,
 * chunked prefill vs token by token, small batches bit-identical to single tokens, no leak
 * between sequences of one session, truncation (recurrent-state rollback) exact; and the
 * rotation: a synthetic qwen35-tiny with folded Walsh-Hadamard weights (`tern synth`) computes the
 * same function as its --unrotated-f32 twin in f32 numerics. */
#include "test.h"

#include "tern.h"
#include "model/model.h"
#include "test_synth_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#define GOLD "golden/qwen35-tiny-pq2_0/"

static tern_model *models[3][3];          /* [numerics][threads] cache for the suite */

static tern_model *get_model(tern_numerics nm, int threads) {
    if (models[nm][threads]) return models[nm][threads];
    char p[512];
    fx_require(p, sizeof p, GOLD "qwen35-tiny-pq2_0.gguf");
    tern_model_opts o;
    tern_model_opts_default(&o);
    o.n_threads = threads;
    o.numerics = nm;
    tern_err err = {0};
    tern_model *m = NULL;
    if (tern_model_load(&m, p, &o, &err) != TERN_OK) fail_msg("load %s: %s", p, err.msg);
    models[nm][threads] = m;
    return m;
}

static cJSON *json_load(const char *rel) {
    char p[512];
    fx_require(p, sizeof p, rel);
    size_t len;
    char *s = fx_read_file(p, &len);
    assert_non_null(s);
    cJSON *j = cJSON_Parse(s);
    free(s);
    assert_non_null(j);
    return j;
}

static int ids_from(const cJSON *arr, int32_t *out, int cap) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) { assert_true(n < cap); out[n++] = (int32_t)e->valuedouble; }
    return n;
}

static const cJSON *find_id(const cJSON *arr, const char *id) {
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if (strcmp(cJSON_GetObjectItem(e, "id")->valuestring, id) == 0) return e;
    return NULL;
}

static tern_session *new_session(tern_model *m, int n_batch) {
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = 512;
    so.n_batch = n_batch;
    tern_session *s = NULL;
    tern_err err = {0};
    if (tern_session_init(&s, m, &so, &err) != TERN_OK) fail_msg("session: %s", err.msg);
    return s;
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[b]) b = i;
    return b;
}

/* max |ours[id] - golden| over a [[id, logit], ...] list */
static double top_err(const float *l, const cJSON *top) {
    double e = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, top) {
        const int id = (int)cJSON_GetArrayItem(p, 0)->valuedouble;
        e = fmax(e, fabs((double)l[id] - cJSON_GetArrayItem(p, 1)->valuedouble));
    }
    return e;
}

/* First-8 positions: eval_all over the prompt, top-20 logits of positions 0..7 within tol. */
static void check_first8(tern_numerics nm, const cJSON *positions, const int32_t *ids, int n, double tol) {
    assert_true(n >= 8);
    tern_model *m = get_model(nm, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *s = new_session(m, 512);
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)info.n_vocab);
    tern_err err = {0};
    n = 8;                        /* positions 0..7 depend on tokens 0..7 only (causal) */
    assert_int_equal(tern_session_eval_all(s, ids, n, lg, &err), TERN_OK);
    double emax = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, positions) {
        const int pos = cJSON_GetObjectItem(p, "pos")->valueint;
        assert_int_equal(ids[pos], cJSON_GetObjectItem(p, "input_token")->valueint);
        const double e = top_err(lg + (size_t)pos * (size_t)info.n_vocab, cJSON_GetObjectItem(p, "top20"));
        emax = fmax(emax, e);
    }
    print_message("first-8 logits (%s): max |d| = %.3g (tolerance %.g)\n", nm == TERN_NUMERICS_F32 ? "f32" : "ggml", emax, tol);
    assert_true(emax <= tol);
    free(lg);
    tern_session_free(s);
}

static void test_golden_first8_f32(void **state) {
    (void)state;
    cJSON *f = json_load(GOLD "f32ref.json"), *pr = json_load(GOLD "prompts.json");
    int32_t ids[256];
    const int n = ids_from(cJSON_GetObjectItem(find_id(cJSON_GetObjectItem(pr, "prompts"), "p1"), "token_ids"), ids, 256);
    check_first8(TERN_NUMERICS_F32, cJSON_GetObjectItem(cJSON_GetObjectItem(f, "first8"), "positions"), ids, n, 2e-2);
    cJSON_Delete(f); cJSON_Delete(pr);
}

static void test_golden_first8_ggml(void **state) {
    (void)state;
    cJSON *f = json_load(GOLD "logits_p1_first8.json");
    int32_t ids[256];
    const int n = ids_from(cJSON_GetObjectItem(f, "prompt_ids"), ids, 256);
    check_first8(TERN_NUMERICS_GGML, cJSON_GetObjectItem(f, "positions"), ids, n, 1e-3);
    cJSON_Delete(f);
}

/* Teacher-forced along the golden greedy path: top-5 within tol at every step; greedy ids equal
 * while the golden margin exceeds twice the largest error seen so far (golden/README.md). */
static void check_greedy(tern_numerics nm, const char *file, const char *pid, int steps, double tol, int min_ids) {
    cJSON *g = json_load(file);
    const cJSON *e = find_id(cJSON_GetObjectItem(g, "greedy"), pid);
    assert_non_null(e);
    int32_t prompt[256], gen[64];
    const int np = ids_from(cJSON_GetObjectItem(e, "prompt_ids"), prompt, 256);
    ids_from(cJSON_GetObjectItem(e, "generated_ids"), gen, 64);
    tern_model *m = get_model(nm, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *s = new_session(m, 512);
    tern_err err = {0};
    const float *lg = tern_session_eval(s, prompt, np, &err);
    assert_non_null(lg);
    double emax = 0;
    int compared = 0;
    bool ids_on = true;
    const cJSON *st = cJSON_GetObjectItem(e, "steps");
    for (int k = 0; k < steps; k++) {
        const cJSON *sk = cJSON_GetArrayItem(st, k);
        const double ek = top_err(lg, cJSON_GetObjectItem(sk, "top5"));
        emax = fmax(emax, ek);
        assert_true(ek <= tol);
        const double margin = cJSON_GetObjectItem(sk, "margin12")->valuedouble;
        if (ids_on && margin > 2 * emax) {
            assert_int_equal(argmax(lg, info.n_vocab), gen[k]);
            compared++;
        } else {
            ids_on = false;       /* from here on a flip is allowed: stop comparing ids */
        }
        lg = tern_session_eval(s, &gen[k], 1, &err);
        assert_non_null(lg);
    }
    print_message("greedy %s (%s): %d steps, top-5 max |d| %.3g, ids equal on the first %d steps (margin rule)\n", pid,
                  nm == TERN_NUMERICS_F32 ? "f32" : "ggml", steps, emax, compared);
    assert_true(compared >= min_ids);
    tern_session_free(s);
    cJSON_Delete(g);
}

static void test_golden_greedy_f32(void **state) {
    (void)state;
    check_greedy(TERN_NUMERICS_F32, GOLD "f32ref.json", "p1", 10, 2e-2, 1);
}

static void test_golden_greedy_ggml(void **state) {
    (void)state;
    /* our ggml numerics mirror the fork bit for bit on this model: every step's ids compare */
    check_greedy(TERN_NUMERICS_GGML, GOLD "greedy.json", "p1", 24, 1.0, 24);
}

/* p4 (the code prompt) in ggml numerics: unlike p1, p2 and p5 (bit-exact for all 48 steps), one
 * activation rounds to a different Q8_0 step than the fork's somewhere in the prompt, which the
 * random-weight model amplifies to 0.12 at step 0 (0.29 at most over 24 steps) - the case
 * golden/README.md describes. Its rule: top-5 within 1.0 at every step, ids compared while the
 * golden margin exceeds twice the error seen; p4's first margin (0.0098) is below that, so no
 * id is required to compare. */
static void test_golden_greedy_ggml_p4(void **state) {
    (void)state;
    check_greedy(TERN_NUMERICS_GGML, GOLD "greedy.json", "p4", 24, 1.0, 0);
}

static int prompt_ids(const char *pid, int32_t *ids, int cap) {
    cJSON *pr = json_load(GOLD "prompts.json");
    const int n = ids_from(cJSON_GetObjectItem(find_id(cJSON_GetObjectItem(pr, "prompts"), pid), "token_ids"), ids, cap);
    cJSON_Delete(pr);
    return n;
}

/* Prompt + 3 greedy tokens on 1 and on 2 threads: every logit bit-identical. */
static void test_threads_bit_identical(void **state) {
    (void)state;
    int32_t ids[256];
    const int n = prompt_ids("p1", ids, 256);
    tern_model *m1 = get_model(TERN_NUMERICS_FAST, 1), *m2 = get_model(TERN_NUMERICS_FAST, 2);
    tern_model_info info;
    tern_model_get_info(m1, &info);
    tern_session *s1 = new_session(m1, 512), *s2 = new_session(m2, 512);
    tern_err err = {0};
    const float *l1 = tern_session_eval(s1, ids, n, &err), *l2 = tern_session_eval(s2, ids, n, &err);
    for (int k = 0; k < 3; k++) {
        assert_non_null(l1); assert_non_null(l2);
        assert_memory_equal(l1, l2, sizeof(float) * (size_t)info.n_vocab);
        int32_t t = argmax(l1, info.n_vocab);
        l1 = tern_session_eval(s1, &t, 1, &err);
        l2 = tern_session_eval(s2, &t, 1, &err);
    }
    tern_session_free(s1); tern_session_free(s2);
}

/* Decode at 2 and 3 threads (qwen35.c q35_project: threads claim a one-column forward's rows as
 * they finish, so which thread computes which row varies from run to run): prompt + 4 greedy
 * tokens, every logit bit-identical to 1 thread. */
static void test_decode_threads_bit_identical(void **state) {
    (void)state;
    int32_t ids[256];
    const int n = prompt_ids("p1", ids, 256);
    tern_model *m1 = get_model(TERN_NUMERICS_FAST, 1);
    tern_model_info info;
    tern_model_get_info(m1, &info);
    char p[512];
    fx_require(p, sizeof p, GOLD "qwen35-tiny-pq2_0.gguf");
    for (int threads = 2; threads <= 3; threads++) {
        tern_model_opts o;
        tern_model_opts_default(&o);
        o.n_threads = threads;
        tern_err err = {0};
        tern_model *md = NULL;
        if (tern_model_load(&md, p, &o, &err) != TERN_OK) fail_msg("load %s: %s", p, err.msg);
        tern_session *s1 = new_session(m1, 512), *sd = new_session(md, 512);
        const float *l1 = tern_session_eval(s1, ids, n, &err), *ld = tern_session_eval(sd, ids, n, &err);
        for (int k = 0; k < 5; k++) {
            assert_non_null(l1); assert_non_null(ld);
            assert_memory_equal(l1, ld, sizeof(float) * (size_t)info.n_vocab);
            if (k == 4) break;
            const int32_t t = argmax(l1, info.n_vocab);
            l1 = tern_session_eval(s1, &t, 1, &err);
            ld = tern_session_eval(sd, &t, 1, &err);
        }
        tern_session_free(s1); tern_session_free(sd);
        tern_model_free(md);
    }
}

/* f32 mode: the prompt in one batch (chunked delta rule) vs token by token (n_batch 1): logits
 * within 5e-3 over 4 steps (stated tolerance: the chunked algebra reorders f32 sums, ~1e-6
 * relative in the state, which this random-weight model amplifies to ~2e-3 on logits of ~20),
 * the same 4 greedy tokens. */
static void test_chunked_prefill_vs_tokens(void **state) {
    (void)state;
    int32_t ids[256];
    const int n = prompt_ids("p2", ids, 256);
    assert_true(n >= 17);                   /* a chunked batch (GDN_CHUNK_MIN) */
    tern_model *m = get_model(TERN_NUMERICS_F32, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *sa = new_session(m, 512), *sb = new_session(m, 1);
    tern_err err = {0};
    const float *la = tern_session_eval(sa, ids, n, &err), *lb = tern_session_eval(sb, ids, n, &err);
    double emax = 0;
    for (int k = 0; k < 4; k++) {
        assert_non_null(la); assert_non_null(lb);
        for (int i = 0; i < info.n_vocab; i++) emax = fmax(emax, fabs((double)la[i] - lb[i]));
        const int32_t ta = argmax(la, info.n_vocab), tb = argmax(lb, info.n_vocab);
        assert_int_equal(ta, tb);
        la = tern_session_eval(sa, &ta, 1, &err);
        lb = tern_session_eval(sb, &tb, 1, &err);
    }
    print_message("chunked prefill vs token by token: max |d logit| %.3g over 4 steps\n", emax);
    assert_true(emax <= 5e-3);
    tern_session_free(sa); tern_session_free(sb);
}

/* A batch of 3 tokens (not chunked) gives each position the bits of single-token decode. */
static void test_small_batch_bits(void **state) {
    (void)state;
    int32_t ids[256];
    const int n = prompt_ids("p1", ids, 256);
    assert_true(n >= 13);
    tern_model *m = get_model(TERN_NUMERICS_FAST, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t nv = (size_t)info.n_vocab;
    tern_session *sa = new_session(m, 512), *sb = new_session(m, 512);
    tern_err err = {0};
    assert_non_null(tern_session_eval(sa, ids, 10, &err));
    assert_non_null(tern_session_eval(sb, ids, 10, &err));
    float *la = malloc(sizeof(float) * 3 * nv);
    assert_int_equal(tern_session_eval_all(sa, ids + 10, 3, la, &err), TERN_OK);
    for (int i = 0; i < 3; i++) {
        const float *lb = tern_session_eval(sb, ids + 10 + i, 1, &err);
        assert_non_null(lb);
        assert_memory_equal(la + i * nv, lb, sizeof(float) * nv);
    }
    free(la);
    tern_session_free(sa); tern_session_free(sb);
}

/* Request B's logits are the same bits whether or not request A ran before in the same session
 * (after a reset), and after speculative tokens were truncated away (state rollback). */
static void test_sequences_do_not_leak(void **state) {
    (void)state;
    int32_t a[256], b[256];
    const int na = prompt_ids("p1", a, 256), nb = prompt_ids("p2", b, 256);
    tern_model *m = get_model(TERN_NUMERICS_FAST, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t nv = (size_t)info.n_vocab;
    tern_err err = {0};
    tern_session *s = new_session(m, 512);
    /* B is always fed as [nb - 2 tokens (a chunked batch)] + [2 tokens (token by token)] so the
     * runs compare the same arithmetic */
    float *ref = malloc(sizeof(float) * nv);
    assert_non_null(tern_session_eval(s, b, nb - 2, &err));
    const float *l = tern_session_eval(s, b + nb - 2, 2, &err);
    assert_non_null(l);
    memcpy(ref, l, sizeof(float) * nv);
    /* A, reset, B */
    tern_session_reset(s);
    assert_non_null(tern_session_eval(s, a, na, &err));
    tern_session_reset(s);
    assert_non_null(tern_session_eval(s, b, nb - 2, &err));
    l = tern_session_eval(s, b + nb - 2, 2, &err);
    assert_non_null(l);
    assert_memory_equal(l, ref, sizeof(float) * nv);
    /* B minus its last 2 tokens, then 3 wrong tokens one by one and 2 as a batch (speculative
     * drafts), truncate back (recurrent-state rollback), then the last 2 */
    tern_session_reset(s);
    assert_non_null(tern_session_eval(s, b, nb - 2, &err));
    assert_int_equal(tern_session_checkpoint(s, &err), TERN_OK);
    for (int i = 0; i < 3; i++) assert_non_null(tern_session_eval(s, &a[i], 1, &err));
    assert_non_null(tern_session_eval(s, a + 3, 2, &err));
    assert_int_equal(tern_session_truncate(s, nb - 2, &err), TERN_OK);
    l = tern_session_eval(s, b + nb - 2, 2, &err);
    assert_non_null(l);
    assert_memory_equal(l, ref, sizeof(float) * nv);
    /* and a rollback past the window is refused, not silently wrong */
    for (int i = 0; i < 34; i++) assert_non_null(tern_session_eval(s, &a[i % na], 1, &err));   /* > window 32 */
    assert_int_equal(tern_session_truncate(s, nb, &err), TERN_E_RANGE);
    free(ref);
    tern_session_free(s);
}


/* ---- batched serving and speculative verification --------------------------------------- */

/* tern_batch_eval over sessions of different sequences: 4 sessions with prompts of 26, 5, 12 and
 * 20 tokens (chunked and logged prefills), `steps` steps of one token each, in rotating order
 * and with one session left out (fed alone) on odd steps; every column is bit-identical to the
 * session's twin evaluated with tern_session_eval one token at a time, and the positions agree.
 * Then one session is truncated back 3 tokens (recurrent-state rollback after batched steps) and
 * one more batch runs, still bit-identical. (f32 and ggml numerics: short prompts and fewer steps,
 * to keep the suite fast: f32's LM head reads 155 MB of f32 weights per column.) */
static void check_batch_sessions(tern_numerics nm, int steps) {
    enum { NS = 4 };
    tern_model *m = get_model(nm, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t nv = (size_t)info.n_vocab;
    int32_t pr[NS][256];
    const bool full = steps > 2;   /* long prompts: chunked and logged prefills */
    const int np[NS] = {full ? prompt_ids("p1", pr[0], 256) : 3, full ? 5 : 2, full ? 12 : 4, full ? 20 : 1};
    if (!full) prompt_ids("p1", pr[0], 256);
    prompt_ids("p2", pr[1], 256);
    prompt_ids("p4", pr[2], 256);
    prompt_ids("p5", pr[3], 256);
    tern_session *sb[NS], *st[NS];
    int32_t next[NS];
    tern_err err = {0};
    for (int i = 0; i < NS; i++) {
        sb[i] = new_session(m, 512);
        st[i] = new_session(m, 512);
        const float *lb = tern_session_eval(sb[i], pr[i], np[i], &err), *lt = tern_session_eval(st[i], pr[i], np[i], &err);
        assert_non_null(lb); assert_non_null(lt);
        assert_memory_equal(lb, lt, sizeof(float) * nv);
        next[i] = argmax(lt, (int)nv);
    }
    float *lg = malloc(sizeof(float) * NS * nv);
    for (int k = 0; k <= steps; k++) {
        if (k == steps) {                   /* rollback of session 2, then one more batch */
            const int p = tern_session_pos(sb[2]) - 3;
            assert_int_equal(tern_session_truncate(sb[2], p, &err), TERN_OK);
            assert_int_equal(tern_session_truncate(st[2], p, &err), TERN_OK);
        }
        const int nb = (k % 2 && k < steps) ? NS - 1 : NS;
        tern_session *bs[NS];
        int32_t bt[NS];
        int who[NS];
        for (int c = 0; c < NS; c++) { who[c] = (c + k) % NS; bs[c] = sb[who[c]]; bt[c] = next[who[c]]; }
        assert_int_equal(tern_batch_eval(bs, bt, nb, lg, &err), TERN_OK);
        if (nb < NS) assert_non_null(tern_session_eval(sb[who[NS - 1]], &bt[NS - 1], 1, &err));
        for (int c = 0; c < NS; c++) {
            const int i = who[c];
            const float *lt = tern_session_eval(st[i], &next[i], 1, &err);
            assert_non_null(lt);
            if (c < nb) assert_memory_equal(lg + (size_t)c * nv, lt, sizeof(float) * nv);
            assert_int_equal(tern_session_pos(sb[i]), tern_session_pos(st[i]));
            next[i] = argmax(lt, (int)nv);
        }
    }
    free(lg);
    for (int i = 0; i < NS; i++) { tern_session_free(sb[i]); tern_session_free(st[i]); }
}

static void test_batch_eval_sessions_fast(void **state) { (void)state; check_batch_sessions(TERN_NUMERICS_FAST, 8); }
static void test_batch_eval_sessions_f32(void **state) { (void)state; check_batch_sessions(TERN_NUMERICS_F32, 1); }
static void test_batch_eval_sessions_ggml(void **state) { (void)state; check_batch_sessions(TERN_NUMERICS_GGML, 2); }

/* Speculative verification on one session: after the same 5-token prompt (logged, so the same
 * bits for any n_batch), a reference decodes VN greedy tokens one at a time; the speculative session evaluates batches of nv tokens (tern_session_eval_all
 * in one call, or split by its n_batch) whose first a tokens are the reference's and the rest wrong
 * drafts, with a cycling through 0..nv; positions < a must equal the reference's single-token
 * logits bit for bit, and tern_session_truncate to the last accepted position must leave the state
 * exactly as the reference's there (checked by the next batch's first position, and at the end).
 * 5 + VN > 32 tokens: the rollback log wraps during the verification. */
enum { VN = 36 };
static void check_verify(tern_model *m, int n_batch, int nv, const int32_t *prompt, int np, const int32_t *t,
                         const float *ref) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t nvocab = (size_t)info.n_vocab;
    tern_session *s = new_session(m, n_batch);
    tern_err err = {0};
    assert_non_null(tern_session_eval(s, prompt, np, &err));
    float *lg = malloc(sizeof(float) * (size_t)nv * nvocab);
    int32_t batch[16];
    int p = 0, step = 0, compared = 0;
    while (p + nv <= VN) {
        const int a = (step * 7 + 1) % (nv + 1);
        for (int i = 0; i < nv; i++) batch[i] = i < a ? t[p + i] : (t[p + i] + 1 + i) % (int32_t)nvocab;
        assert_int_equal(tern_session_eval_all(s, batch, nv, lg, &err), TERN_OK);
        for (int i = 0; i < a; i++, compared++)
            assert_memory_equal(lg + (size_t)i * nvocab, ref + (size_t)(p + i) * nvocab, sizeof(float) * nvocab);
        assert_int_equal(tern_session_truncate(s, np + p + a, &err), TERN_OK);
        p += a;
        step++;
    }
    if (p < VN) {
        const float *l = tern_session_eval(s, &t[p], 1, &err);
        assert_non_null(l);
        assert_memory_equal(l, ref + (size_t)p * nvocab, sizeof(float) * nvocab);
    }
    assert_true(compared >= VN / 2);
    free(lg);
    tern_session_free(s);
}

static void verify_all(tern_numerics nm) {
    int32_t prompt[256], t[VN];
    prompt_ids("p2", prompt, 256);
    const int np = 5;
    tern_model *m = get_model(nm, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t nvocab = (size_t)info.n_vocab;
    float *ref = malloc(sizeof(float) * VN * nvocab);
    tern_session *r = new_session(m, 512);
    tern_err err = {0};
    const float *l = tern_session_eval(r, prompt, np, &err);
    assert_non_null(l);
    t[0] = argmax(l, (int)nvocab);
    for (int j = 0; j < VN; j++) {
        l = tern_session_eval(r, &t[j], 1, &err);
        assert_non_null(l);
        memcpy(ref + (size_t)j * nvocab, l, sizeof(float) * nvocab);
        if (j + 1 < VN) t[j + 1] = argmax(l, (int)nvocab);
    }
    tern_session_free(r);
    check_verify(m, 512, 2, prompt, np, t, ref);
    check_verify(m, 512, 16, prompt, np, t, ref);    /* the largest verify batch: never chunked */
    check_verify(m, 5, 16, prompt, np, t, ref);      /* the same split into 5 + 5 + 5 + 1 */
    free(ref);
}

static void test_verify_truncate(void **state) { (void)state; verify_all(TERN_NUMERICS_FAST); }

/* From 17 tokens a batch is a prefill (chunked delta rule, not logged): truncating into it is
 * refused with TERN_E_RANGE (never a silently different state), truncating to its end works. */
static void test_verify_limit(void **state) {
    (void)state;
    int32_t prompt[256];
    const int np = prompt_ids("p2", prompt, 256);
    tern_model *m = get_model(TERN_NUMERICS_FAST, 2);
    tern_session *s = new_session(m, 512);
    tern_err err = {0};
    assert_non_null(tern_session_eval(s, prompt, 5, &err));
    assert_non_null(tern_session_eval(s, prompt + 5, 17, &err));
    assert_int_equal(tern_session_truncate(s, 21, &err), TERN_E_RANGE);
    assert_non_null(strstr(err.msg, "cannot restore position 21"));
    assert_int_equal(tern_session_truncate(s, 22, &err), TERN_OK);
    assert_int_equal(tern_session_truncate(s, 0, &err), TERN_OK);   /* always */
    assert_true(np >= 22);
    tern_session_free(s);
}

/* The memory check: a context whose KV cache cannot fit (n_ctx 2^24 with f32
 * KV on the tiny model: 2 attention layers x 2^24 x (128 + 128) x 4 B = 34.4 GB, more than this
 * machine's MemTotal, checked) is refused at session creation with TERN_E_NOMEM and a message
 * that gives the bytes needed and available; nothing is allocated. The default context works. */
static void test_context_memory_check(void **state) {
    (void)state;
    tern_model *m = get_model(TERN_NUMERICS_FAST, 2);
    const uint64_t need = 2ull * (1ull << 24) * (128 + 128) * 4;
    FILE *f = fopen("/proc/meminfo", "r");
    assert_non_null(f);
    unsigned long long total_kb = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &total_kb) == 1) break;
    fclose(f);
    assert_true(total_kb > 0 && need > total_kb * 1024ull);
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = 1 << 24;
    so.kv_f32 = true;
    tern_session *s = NULL;
    tern_err err = {0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_NOMEM);
    assert_null(s);
    char want[64];
    snprintf(want, sizeof want, "needs %.1f MB", (double)need / 1e6);
    print_message("refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "MB available"));
    tern_session_opts_default(&so);
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_OK);
    assert_int_equal(tern_session_n_ctx(s), 4096);
    tern_session_free(s);
}

static tern_model *load_path_ptq(const char *path, tern_numerics nm, tern_ptq1_0_mode ptq) {
    tern_model_opts o;
    tern_model_opts_default(&o);
    o.n_threads = 2;
    o.numerics = nm;
    o.ptq1_0 = ptq;
    tern_err err = {0};
    tern_model *m = NULL;
    if (tern_model_load(&m, path, &o, &err) != TERN_OK) fail_msg("load %s: %s", path, err.msg);
    return m;
}

static tern_model *load_path(const char *path, tern_numerics nm) { return load_path_ptq(path, nm, TERN_PTQ1_0_AUTO); }

/* Folded rotation (inverse-rotated embedding rows, rot() before every folded projection, the
 * grouped V-head permutation before ssm_out, untied rotated head) vs the same model stored
 * unrotated in F32, f32 numerics: the same 24 greedy tokens and logits within 1e-2 (stated
 * tolerance; measured ~2e-3 on logits up to ~19: the two files differ by the f32 rounding of
 * the generator's unrotation, amplified by the random-weight model). */
static void test_rotation_equivalence(void **state) {
    (void)state;
    char rp[512], up[512];
    fx_tmp_path(rp, sizeof rp, "q35-rot.gguf");
    fx_tmp_path(up, sizeof up, "q35-unrot.gguf");
    ST_RUN_OK("synth --arch qwen35-tiny --seed 5 -o '%s'", rp);
    ST_RUN_OK("synth --arch qwen35-tiny --seed 5 --unrotated-f32 -o '%s'", up);
    tern_model *mr = load_path(rp, TERN_NUMERICS_F32), *mu = load_path(up, TERN_NUMERICS_F32);
    tern_model_info info;
    tern_model_get_info(mr, &info);
    const int nv = info.n_vocab;
    tern_session *sr = new_session(mr, 512), *su = new_session(mu, 512);
    int32_t t[20];
    for (int i = 0; i < 20; i++) t[i] = (i * 37 + 11) % nv;
    tern_err err = {0};
    const float *lr = tern_session_eval(sr, t, 20, &err), *lu = tern_session_eval(su, t, 20, &err);
    double emax = 0;
    for (int k = 0; k < 24; k++) {
        assert_non_null(lr); assert_non_null(lu);
        for (int i = 0; i < nv; i++) emax = fmax(emax, fabs((double)lr[i] - lu[i]));
        const int32_t a = argmax(lr, nv), b = argmax(lu, nv);
        assert_int_equal(a, b);
        lr = tern_session_eval(sr, &a, 1, &err);
        lu = tern_session_eval(su, &b, 1, &err);
    }
    print_message("rotated vs unrotated-f32: 24 equal greedy tokens, max |d logit| %.3g\n", emax);
    assert_true(emax <= 1e-2);
    tern_session_free(sr); tern_session_free(su);
    tern_model_free(mr); tern_model_free(mu);
    unlink(rp); unlink(up);
}

/* PTQ1_0: a transcoded weight's file bytes of rows 0..NG-1 are released at load
 * (not resident: mincore), and every path reads the transcode instead: logits bit-identical to
 * the direct base-3 kernels (which read the file bytes) in fast, ggml and f32 numerics, with a
 * vocabulary of 1022 rows (N % 4 = 2 tail rows in the tied embedding/head: the lookup reads
 * rows of both kinds). */

static void test_ptq1_0_release(void **state) {
    (void)state;
    char pp[512];
    fx_tmp_path(pp, sizeof pp, "q35-ptq.gguf");
    ST_RUN_OK("synth --arch qwen35-tiny --type ptq1_0 --n-vocab 1022 --seed 3 -o '%s'", pp);
    const long pg = sysconf(_SC_PAGESIZE);
    for (int nm = TERN_NUMERICS_FAST; nm <= TERN_NUMERICS_F32; nm++) {
        tern_model *md = load_path_ptq(pp, (tern_numerics)nm, TERN_PTQ1_0_DIRECT),
                   *mt = load_path_ptq(pp, (tern_numerics)nm, TERN_PTQ1_0_TRANSCODE);
        /* the released pages: the ffn_up file bytes of layer 0 (768 rows of 2 blocks of 28 bytes) */
        const kern_w *w = &mt->layers[0].ffn_up;
        /* ggml numerics keep the row-pair layout (model.c); fast and f32 take the active table's */
        const bool r16 = nm != TERN_NUMERICS_GGML && kern_isa_row16();
        assert_int_equal(w->layout, r16 ? KW_PTQ_ROW16 : KW_PTQ_ROWPAIR);
        const uintptr_t a = ((uintptr_t)w->data + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
        const uintptr_t e = ((uintptr_t)w->data + (uintptr_t)(w->n_out * (w->n_in / 128) * 28)) & ~((uintptr_t)pg - 1);
        assert_true(e > a);
        unsigned char vec[64];
        assert_true((e - a) / (uintptr_t)pg <= sizeof vec);
        assert_int_equal(mincore((void *)a, e - a, vec), 0);
        for (uintptr_t i = 0; i < (e - a) / (uintptr_t)pg; i++) assert_int_equal(vec[i] & 1, 0);
        tern_model_info id, it;
        tern_model_get_info(md, &id);
        tern_model_get_info(mt, &it);
        assert_true(it.weight_bytes > id.weight_bytes);   /* the side buffers are 34/28 of the rows */
        assert_true(it.bytes_per_token > id.bytes_per_token);   /* and a decode streams them */
        tern_session *sd = new_session(md, 512), *st = new_session(mt, 512);
        int32_t t[8];
        for (int i = 0; i < 8; i++) t[i] = (int32_t)((i * 131 + 1019) % 1022);   /* rows 1018..1021 are tails */
        tern_err err = {0};
        const float *ld = tern_session_eval(sd, t, 8, &err), *lt = tern_session_eval(st, t, 8, &err);
        for (int k = 0; k < 3; k++) {
            assert_non_null(ld); assert_non_null(lt);
            assert_memory_equal(ld, lt, sizeof(float) * (size_t)id.n_vocab);
            const int32_t nx = argmax(ld, id.n_vocab);
            ld = tern_session_eval(sd, &nx, 1, &err);
            lt = tern_session_eval(st, &nx, 1, &err);
        }
        tern_session_free(sd); tern_session_free(st);
        tern_model_free(md); tern_model_free(mt);
    }
    unlink(pp);
}

/* Upstream-style unrotated qwen35 files with F16 or Q8_0 projection weights (`tern quantize` of
 * the --unrotated-f32 twin) against the F32 file, f32 numerics. F16: the same 16 greedy tokens,
 * logits within 0.25 (measured 0.09: fp16 rounds each weight by <= 2^-11 relative). Q8_0: the
 * first position within 4 (measured 1.5: ~30x the F16 error, as 1/127 of the row block maximum
 * vs 2^-11 predicts for these dense rows). */
static void test_upstream_f16_q8_0(void **state) {
    (void)state;
    char up[512], hp[512], qp[512];
    fx_tmp_path(up, sizeof up, "q35u-f32.gguf");
    fx_tmp_path(hp, sizeof hp, "q35u-f16.gguf");
    fx_tmp_path(qp, sizeof qp, "q35u-q8_0.gguf");
    ST_RUN_OK("synth --arch qwen35-tiny --seed 9 --unrotated-f32 -o '%s'", up);
    ST_RUN_OK("quantize '%s' '%s' --type f16", up, hp);
    ST_RUN_OK("quantize '%s' '%s' --type q8_0", up, qp);
    tern_model *mu = load_path(up, TERN_NUMERICS_F32), *mh = load_path(hp, TERN_NUMERICS_F32),
               *mq = load_path(qp, TERN_NUMERICS_F32);
    tern_model_info info;
    tern_model_get_info(mu, &info);
    const int nv = info.n_vocab;
    tern_session *su = new_session(mu, 512), *sh = new_session(mh, 512), *sq = new_session(mq, 512);
    int32_t t[12];
    for (int i = 0; i < 12; i++) t[i] = (i * 53 + 7) % nv;
    tern_err err = {0};
    const float *lu = tern_session_eval(su, t, 12, &err), *lh = tern_session_eval(sh, t, 12, &err),
                *lq = tern_session_eval(sq, t, 12, &err);
    assert_non_null(lu); assert_non_null(lh); assert_non_null(lq);
    double eq = 0, eh = 0;
    for (int i = 0; i < nv; i++) eq = fmax(eq, fabs((double)lq[i] - lu[i]));
    for (int k = 0; k < 16; k++) {
        for (int i = 0; i < nv; i++) eh = fmax(eh, fabs((double)lh[i] - lu[i]));
        const int32_t a = argmax(lu, nv), b = argmax(lh, nv);
        assert_int_equal(a, b);
        lu = tern_session_eval(su, &a, 1, &err);
        lh = tern_session_eval(sh, &b, 1, &err);
        assert_non_null(lu); assert_non_null(lh);
    }
    print_message("upstream-style F16: 16 equal greedy tokens, max |d| %.3g; Q8_0 first position max |d| %.3g\n", eh, eq);
    assert_true(eh <= 0.25);
    assert_true(eq <= 4.0);
    tern_session_free(su); tern_session_free(sh); tern_session_free(sq);
    tern_model_free(mu); tern_model_free(mh); tern_model_free(mq);
    unlink(up); unlink(hp); unlink(qp);
}

static int teardown_models(void **state) {
    (void)state;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) { tern_model_free(models[i][j]); models[i][j] = NULL; }
    return 0;
}

int suite_qwen35(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_first8_f32),
        cmocka_unit_test(test_golden_first8_ggml),
        cmocka_unit_test(test_golden_greedy_f32),
        cmocka_unit_test(test_golden_greedy_ggml),
        cmocka_unit_test(test_golden_greedy_ggml_p4),
        cmocka_unit_test(test_threads_bit_identical),
        cmocka_unit_test(test_decode_threads_bit_identical),
        cmocka_unit_test(test_chunked_prefill_vs_tokens),
        cmocka_unit_test(test_small_batch_bits),
        cmocka_unit_test(test_batch_eval_sessions_fast),
        cmocka_unit_test(test_batch_eval_sessions_f32),
        cmocka_unit_test(test_batch_eval_sessions_ggml),
        cmocka_unit_test(test_verify_truncate),
        cmocka_unit_test(test_verify_limit),
        cmocka_unit_test(test_context_memory_check),
        cmocka_unit_test(test_rotation_equivalence),
        cmocka_unit_test(test_upstream_f16_q8_0),
        cmocka_unit_test(test_ptq1_0_release),
        cmocka_unit_test_teardown(test_sequences_do_not_leak, teardown_models),
    };
    TEST_RUN_SUITE("qwen35", tests);
}
