/* test_model.c: the model layer end to end on real and golden models (../shared):
 *  - stories260K (trained llama): greedy from BOS equals the 255 reference tokens (f16 and f32
 *    KV); top-5 logits and log-sum-exp of the first 8 positions within 1e-4 (f32 KV) / 1e-2 (f16
 *    KV) of the independent float64 reference; perplexity of each reference story from BOS to
 *    1e-3 and 3.548 +- 0.001 over all five (data/stories260k/PROVENANCE.md);
 *  - batch vs single: every position of a batched forward is bit-identical to computing it as a
 *    single-token step (and to any other chunking), in every numerics mode, also where the batch
 *    takes the prefill paths (16 tokens or more) and the single step the decode ones;
 *  - threads and ISA paths: identical tokens and logit bits for 1 and 2 threads and for every
 *    kernel path the host can run, in every numerics mode;
 *  - load errors: a GGUF with a wrong tensor shape, a wrong type or a missing tensor (written with
 *    the GGUF writer from stories260K) fails with a message naming the tensor, expected and got. */
#include "test.h"
#include "model_fx.h"

#include "format/gguf.h"
#include "format/qtypes.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORIES "data/stories260k/stories260K.gguf"
#define QWEN3_TINY "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"

static tern_model *load_fx(const char *rel, tern_numerics num, int nt) {
    char path[1024];
    fx_require(path, sizeof path, rel);
    return mfx_load(path, num, nt);
}

/* ---- stories260K ---------------------------------------------------------------------------- */

static void stories_greedy(bool kv_f32) {
    cJSON *ref = mfx_json("data/stories260k/reference_greedy_256.json");
    int n;
    int32_t *want = mfx_ids(cJSON_GetObjectItem(ref, "tokens_including_bos"), &n);
    assert_int_equal(n, 256);
    tern_model *m = load_fx(STORIES, TERN_NUMERICS_FAST, 2);
    tern_session *s = mfx_session(m, 512, 512, kv_f32);
    tern_err err = {0};
    const float *l = tern_session_eval(s, want, 1, &err);
    assert_non_null(l);
    for (int i = 1; i < n; i++) {
        const int32_t id = mfx_argmax(l, 512);
        if (id != want[i]) fail_msg("stories greedy (kv %s) step %d: id %d, reference %d", kv_f32 ? "f32" : "f16", i, id, want[i]);
        if (i + 1 < n) {
            l = tern_session_eval(s, &id, 1, &err);
            assert_non_null(l);
        }
    }
    /* the decoded text is the reference text */
    char text[4096];
    int k = 0;
    tern_detok d;
    tern_detok_init(&d);
    for (int i = 0; i < n; i++) {           /* from BOS: the first piece drops its SPM space */
        const int r = tern_detok_put(m, &d, want[i], text + k, (int)sizeof text - k);
        assert_true(r >= 0);
        k += r;
    }
    k += tern_detok_flush(&d, text + k, (int)sizeof text - k);
    text[k] = 0;
    assert_string_equal(text, cJSON_GetObjectItem(ref, "text")->valuestring);
    tern_session_free(s);
    tern_model_free(m);
    free(want);
    cJSON_Delete(ref);
}

static void test_stories_greedy_f16(void **st) { (void)st; stories_greedy(false); }
static void test_stories_greedy_f32(void **st) { (void)st; stories_greedy(true); }

static void stories_first_logits(bool kv_f32, double tol) {
    cJSON *ref = mfx_json("data/stories260k/reference_greedy_256.json");
    int n;
    int32_t *ids = mfx_ids(cJSON_GetObjectItem(ref, "tokens_including_bos"), &n);
    const cJSON *pos = cJSON_GetObjectItem(ref, "first_positions_logits");
    const int np = cJSON_GetArraySize(pos);
    tern_model *m = load_fx(STORIES, TERN_NUMERICS_FAST, 2);
    tern_session *s = mfx_session(m, 512, 512, kv_f32);
    float *l = malloc((size_t)np * 512 * sizeof(float));
    tern_err err = {0};
    assert_int_equal(tern_session_eval_all(s, ids, np, l, &err), TERN_OK);
    double worst = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pos) {
        const int ip = cJSON_GetObjectItem(p, "pos")->valueint;
        assert_int_equal(cJSON_GetObjectItem(p, "input_token")->valueint, ids[ip]);
        const double e = mfx_topk_err(l + ip * 512, cJSON_GetObjectItem(p, "top5"));
        const double el = fabs(mfx_logsumexp(l + ip * 512, 512) - cJSON_GetObjectItem(p, "logsumexp")->valuedouble);
        if (e > tol || el > tol) fail_msg("stories kv %s position %d: top-5 error %.3g, lse error %.3g > %.g", kv_f32 ? "f32" : "f16", ip, e, el, tol);
        worst = fmax(worst, fmax(e, el));
    }
    print_message("stories first %d positions, kv %s: max error %.3g\n", np, kv_f32 ? "f32" : "f16", worst);
    free(l);
    tern_session_free(s);
    tern_model_free(m);
    free(ids);
    cJSON_Delete(ref);
}

static void test_stories_logits_f32(void **st) { (void)st; stories_first_logits(true, 1e-4); }
static void test_stories_logits_f16(void **st) { (void)st; stories_first_logits(false, 1e-2); }

static void test_stories_ppl(void **st) {
    (void)st;
    cJSON *ref = mfx_json("data/stories260k/reference_ppl_tinystories_sample.json");
    tern_model *m = load_fx(STORIES, TERN_NUMERICS_FAST, 2);
    tern_session *s = mfx_session(m, 512, 512, true);
    float *l = malloc((size_t)512 * 512 * sizeof(float));
    double total = 0;
    long count = 0;
    const cJSON *story;
    cJSON_ArrayForEach(story, cJSON_GetObjectItem(ref, "stories")) {
        int n;
        int32_t *ids = mfx_ids(cJSON_GetObjectItem(story, "token_ids"), &n);
        assert_int_equal(ids[0], 1);   /* BOS */
        assert_int_equal(n - 1, cJSON_GetObjectItem(story, "n_predicted")->valueint);
        tern_session_reset(s);
        tern_err err = {0};
        assert_int_equal(tern_session_eval_all(s, ids, n - 1, l, &err), TERN_OK);
        double nll = 0;
        for (int i = 0; i < n - 1; i++) nll += mfx_nll(l + (size_t)i * 512, 512, ids[i + 1]);
        const double ppl = exp(nll / (n - 1)), want = cJSON_GetObjectItem(story, "ppl")->valuedouble;
        print_message("story %d: %d predictions, ppl %.5f (reference %.4f)\n",
                      cJSON_GetObjectItem(story, "story_index")->valueint, n - 1, ppl, want);
        if (fabs(ppl - want) > 1e-3) fail_msg("story ppl %.5f, reference %.4f", ppl, want);
        total += nll;
        count += n - 1;
        free(ids);
    }
    assert_int_equal(count, cJSON_GetObjectItem(ref, "total_predicted_tokens")->valueint);
    const double ppl = exp(total / (double)count);
    print_message("all stories: ppl %.5f (reference 3.548)\n", ppl);
    assert_true(fabs(ppl - 3.548) <= 1e-3);
    free(l);
    tern_session_free(s);
    tern_model_free(m);
    cJSON_Delete(ref);
}

/* ---- batch vs single ------------------------------------------------------------------------ */

static const int32_t QPROMPT[] = {785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13};

static void batch_identity(const char *rel, tern_numerics num, const int32_t *ids, int n, bool kv_f32) {
    tern_model *m = load_fx(rel, num, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t V = (size_t)info.n_vocab;
    float *a = malloc((size_t)n * V * sizeof(float)), *b = malloc((size_t)n * V * sizeof(float));
    assert_true(a && b);
    tern_err err = {0};
    tern_session *s = mfx_session(m, 64, 64, kv_f32);
    assert_int_equal(tern_session_eval_all(s, ids, n, a, &err), TERN_OK);           /* one batch */
    tern_session_reset(s);
    for (int i = 0; i < n; i++) assert_int_equal(tern_session_eval_all(s, ids + i, 1, b + i * V, &err), TERN_OK);
    for (int i = 0; i < n; i++)
        if (memcmp(a + i * V, b + i * V, V * sizeof(float)) != 0)
            fail_msg("%s numerics %d: position %d differs between batch and single-token eval", rel, (int)num, i);
    tern_session_free(s);
    s = mfx_session(m, 64, 3, kv_f32);                                              /* chunks of 3 */
    assert_int_equal(tern_session_eval_all(s, ids, n, b, &err), TERN_OK);
    assert_memory_equal(a, b, (size_t)n * V * sizeof(float));
    /* truncate + re-eval gives the same bits (rollback) */
    assert_int_equal(tern_session_truncate(s, 2, &err), TERN_OK);
    assert_int_equal(tern_session_eval_all(s, ids + 2, n - 2, b + 2 * V, &err), TERN_OK);
    assert_memory_equal(a, b, (size_t)n * V * sizeof(float));
    tern_session_free(s);
    free(a);
    free(b);
    tern_model_free(m);
}

static void test_batch_identity(void **st) {
    (void)st;
    const int32_t sids[] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
    for (int num = 0; num < 3; num++) {
        batch_identity(STORIES, (tern_numerics)num, sids, 12, false);
        batch_identity(QWEN3_TINY, (tern_numerics)num, QPROMPT, 6, false);
        /* 17 tokens: the batch takes the prefill paths (16 columns or more: row chunks claimed as
         * threads finish, the attention in query tiles), each single step the decode ones */
        int32_t q17[17];
        for (int i = 0; i < 17; i++) q17[i] = QPROMPT[i % 10];
        batch_identity(QWEN3_TINY, (tern_numerics)num, q17, 17, false);
    }
    batch_identity(STORIES, TERN_NUMERICS_FAST, sids, 12, true);
}

/* ---- batched serving: several sessions, one token each, one forward ------------------------ */

static void batch_sessions(const char *rel, tern_numerics num) {
    tern_model *m = load_fx(rel, num, 2);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t V = (size_t)info.n_vocab;
    enum { NS = 3 };
    const int32_t *prompts[NS] = {QPROMPT, QPROMPT + 3, QPROMPT + 1};
    const int plen[NS] = {4, 2, 5};
    tern_session *a[NS], *b[NS];
    tern_err err = {0};
    for (int i = 0; i < NS; i++) {
        a[i] = mfx_session(m, 32, 8, false);
        b[i] = mfx_session(m, 32, 8, false);
        const int32_t *p = prompts[i];
        int32_t ids[8];
        for (int k = 0; k < plen[i]; k++) ids[k] = p[k] % info.n_vocab;
        assert_non_null(tern_session_eval(a[i], ids, plen[i], &err));
        assert_non_null(tern_session_eval(b[i], ids, plen[i], &err));
    }
    float *lb = malloc(NS * V * sizeof(float));
    int32_t next[NS] = {11 % info.n_vocab, 7, 300 % info.n_vocab};
    for (int step = 0; step < 3; step++) {
        if (step == 0) tern_profile_enable(true);
        assert_int_equal(tern_batch_eval(b, next, NS, lb, &err), TERN_OK);
        if (step == 0) {   /* the batched forward is one forward of the profile, as a session's own */
            tern_profile pr;
            tern_profile_get(&pr);
            tern_profile_enable(false);
            assert_int_equal(pr.n_forward, 1);
            assert_true(pr.total_s > 0 && pr.matmul_s > 0 && pr.matmul_s <= pr.total_s);
        }
        for (int i = 0; i < NS; i++) {
            const float *la = tern_session_eval(a[i], &next[i], 1, &err);
            assert_non_null(la);
            if (memcmp(la, lb + i * V, V * sizeof(float)) != 0)
                fail_msg("%s numerics %d: batched session %d step %d differs from its own eval", rel, (int)num, i, step);
            assert_int_equal(tern_session_pos(a[i]), tern_session_pos(b[i]));
            next[i] = mfx_argmax(la, info.n_vocab);
        }
    }
    /* argument errors */
    tern_session *dup[2] = {b[0], b[0]};
    err = (tern_err){0};
    assert_int_equal(tern_batch_eval(dup, next, 2, lb, &err), TERN_E_ARG);
    const int32_t badtok[NS] = {0, (int32_t)info.n_vocab, 0};
    err = (tern_err){0};
    assert_int_equal(tern_batch_eval(b, badtok, NS, lb, &err), TERN_E_RANGE);
    for (int i = 0; i < NS; i++) { tern_session_free(a[i]); tern_session_free(b[i]); }
    free(lb);
    tern_model_free(m);
}

static void test_batch_sessions(void **st) {
    (void)st;
    batch_sessions(STORIES, TERN_NUMERICS_FAST);
    batch_sessions(QWEN3_TINY, TERN_NUMERICS_FAST);
    batch_sessions(QWEN3_TINY, TERN_NUMERICS_GGML);
}

/* ---- threads x ISA -------------------------------------------------------------------------- */

static void greedy_run(const char *rel, tern_numerics num, int nt, int32_t *out, int n_gen, float *last) {
    tern_model *m = load_fx(rel, num, nt);
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *s = mfx_session(m, 64, 64, false);
    tern_err err = {0};
    const float *l = tern_session_eval(s, QPROMPT, 4, &err);
    assert_non_null(l);
    for (int i = 0; i < n_gen; i++) {
        out[i] = mfx_argmax(l, info.n_vocab);
        l = tern_session_eval(s, &out[i], 1, &err);
        assert_non_null(l);
    }
    memcpy(last, l, (size_t)info.n_vocab * sizeof(float));
    tern_session_free(s);
    tern_model_free(m);
}

static void test_threads_isa(void **st) {
    (void)st;
    static const char *const isas[] = {"ref", "avx2", "avxvnni", "avx512vnni", "amx", "neon", "dotprod", "i8mm"};
    const char *orig = kern_isa();
    char orig_name[32];
    snprintf(orig_name, sizeof orig_name, "%s", orig);
    enum { NG = 3, V = 151936 };
    float *base = malloc(V * sizeof(float)), *cur = malloc(V * sizeof(float));
    for (int num = 0; num < 3; num++) {
        int32_t want[NG], got[NG];
        bool have = false;
        for (size_t k = 0; k < sizeof isas / sizeof isas[0]; k++) {
            tern_err err = {0};
            if (kern_force_isa(isas[k], &err) != TERN_OK) continue;
            for (int nt = 1; nt <= 2; nt++) {
                greedy_run(QWEN3_TINY, (tern_numerics)num, nt, have ? got : want, NG, have ? cur : base);
                if (have) {
                    if (memcmp(want, got, sizeof want) != 0) fail_msg("numerics %d isa %s threads %d: tokens differ", num, isas[k], nt);
                    if (memcmp(base, cur, V * sizeof(float)) != 0) fail_msg("numerics %d isa %s threads %d: logits differ", num, isas[k], nt);
                }
                have = true;
                print_message("numerics %d isa %s threads %d: tokens %d %d %d\n", num, isas[k], nt, want[0], want[1], want[2]);
            }
        }
    }
    tern_err err = {0};
    assert_int_equal(kern_force_isa(orig_name, &err), TERN_OK);
    free(base);
    free(cur);
}

/* ---- load errors ---------------------------------------------------------------------------- */

typedef enum { MUT_SHAPE, MUT_TYPE, MUT_MISSING, MUT_FEWER_LAYERS, MUT_EXTRA } mutation;

/* Copy src to path with one tensor mutated (MUT_FEWER_LAYERS: the u32 key `victim` one lower, every
 * tensor kept; MUT_EXTRA: a tensor `victim` added, a copy of the first tensor's shape and bytes). */
static void write_mutated(const char *src, const char *path, const char *victim, mutation mut) {
    gguf_ctx *g = NULL;
    tern_err err = {0};
    assert_int_equal(gguf_open(&g, src, GGUF_LOAD_READ, &err), TERN_OK);
    gguf_writer *w = NULL;
    assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        switch (kv->type) {
        case GGUF_T_U8: case GGUF_T_U16: case GGUF_T_U32:
            gguf_w_set_u32(w, kv->key, (uint32_t)kv->v.u - (mut == MUT_FEWER_LAYERS && strcmp(kv->key, victim) == 0));
            break;
        case GGUF_T_I8: case GGUF_T_I16: case GGUF_T_I32: gguf_w_set_i32(w, kv->key, (int32_t)kv->v.i); break;
        case GGUF_T_U64: case GGUF_T_I64: gguf_w_set_u64(w, kv->key, kv->v.u); break;
        case GGUF_T_F32: case GGUF_T_F64: gguf_w_set_f32(w, kv->key, (float)kv->v.f); break;
        case GGUF_T_BOOL: gguf_w_set_bool(w, kv->key, kv->v.b); break;
        case GGUF_T_STRING: {
            char *s = strndup(kv->v.s.p, kv->v.s.n);
            gguf_w_set_str(w, kv->key, s);
            free(s);
            break;
        }
        case GGUF_T_ARRAY:
            if (kv->v.a.type == GGUF_T_STRING) {
                const char **p = malloc(kv->v.a.n * sizeof *p);
                uint64_t *lens = malloc(kv->v.a.n * sizeof *lens);
                for (uint64_t j = 0; j < kv->v.a.n; j++) { p[j] = kv->v.a.strs[j].p; lens[j] = kv->v.a.strs[j].n; }
                gguf_w_set_arr_str(w, kv->key, p, lens, kv->v.a.n);
                free(p);
                free(lens);
            } else {
                gguf_w_set_arr(w, kv->key, kv->v.a.type, kv->v.a.data, kv->v.a.n);
            }
            break;
        default: break;
        }
    }
    static uint16_t zeros[1 << 16];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        int type = t->type;
        const void *data = t->data;
        if (strcmp(t->name, victim) == 0) {
            if (mut == MUT_MISSING) continue;
            if (mut == MUT_SHAPE) { ne[0] = t->ne[1]; ne[1] = t->ne[0]; }   /* transposed: same bytes */
            if (mut == MUT_TYPE) { type = QT_F16; data = zeros; }
        }
        assert_true(gguf_w_add_tensor(w, t->name, type, t->n_dims, ne, data) >= 0);
    }
    if (mut == MUT_EXTRA) {
        const gguf_tensor *t = &g->tensors[0];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        assert_true(gguf_w_add_tensor(w, victim, t->type, t->n_dims, ne, t->data) >= 0);
    }
    assert_int_equal(gguf_w_write_file(w, path, &err), TERN_OK);
    gguf_w_free(w);
    gguf_close(g);
}

static void expect_load_error(const char *path, int code, const char *const *needles) {
    tern_model *m = NULL;
    tern_err err = {0};
    tern_model_opts o;
    tern_model_opts_default(&o);
    o.n_threads = 1;
    const int rc = tern_model_load(&m, path, &o, &err);
    assert_null(m);
    if (rc != code) fail_msg("load %s: got %s (%s), expected %s", path, tern_strerror(rc), err.msg, tern_strerror(code));
    for (int i = 0; needles[i]; i++)
        if (!strstr(err.msg, needles[i])) fail_msg("error message '%s' lacks '%s'", err.msg, needles[i]);
    print_message("load error: %s\n", err.msg);
}

static void test_load_errors(void **st) {
    (void)st;
    char src[1024], path[1024];
    fx_require(src, sizeof src, STORIES);
    fx_tmp_path(path, sizeof path, "mutated.gguf");
    write_mutated(src, path, "blk.2.ffn_gate.weight", MUT_SHAPE);
    {
        /* sanity: the same copy unmutated loads (the writer copy is faithful) */
        char ok[1024];
        fx_tmp_path(ok, sizeof ok, "copy.gguf");
        write_mutated(src, ok, "none", MUT_SHAPE);
        tern_model *m = mfx_load(ok, TERN_NUMERICS_FAST, 1);
        tern_model_free(m);
        unlink(ok);
    }
    expect_load_error(path, TERN_E_FORMAT, (const char *const[]){"blk.2.ffn_gate.weight", "[172, 64]", "expected [64, 172]", NULL});
    write_mutated(src, path, "blk.1.attn_k.weight", MUT_SHAPE);
    expect_load_error(path, TERN_E_FORMAT, (const char *const[]){"blk.1.attn_k.weight", "[32, 64]", "expected [64, 32]", NULL});
    write_mutated(src, path, "blk.0.ffn_norm.weight", MUT_TYPE);
    expect_load_error(path, TERN_E_UNSUPPORTED, (const char *const[]){"blk.0.ffn_norm.weight", "F16", "expected F32", NULL});
    write_mutated(src, path, "blk.4.ffn_up.weight", MUT_MISSING);
    expect_load_error(path, TERN_E_FORMAT, (const char *const[]){path, ": missing tensor 'blk.4.ffn_up.weight'", NULL});
    /* tensors the metadata does not describe: a block_count lowered by damage, a stray tensor */
    write_mutated(src, path, "llama.block_count", MUT_FEWER_LAYERS);
    expect_load_error(path, TERN_E_FORMAT, (const char *const[]){path, ": tensor 'blk.4.", "(and 8 more) is not read by a llama model with block_count 4", NULL});
    write_mutated(src, path, "blk.9.attn_q.weight", MUT_EXTRA);
    expect_load_error(path, TERN_E_FORMAT, (const char *const[]){path, ": tensor 'blk.9.attn_q.weight' is not read by a llama model with block_count 5", NULL});
    unlink(path);
    /* a tokenizer-only GGUF (no tensors at all): named as such, with its path */
    char vocab[1024];
    if (access(fx_path(vocab, sizeof vocab, "data/llama2-spm-vocab/ggml-vocab-llama-spm.gguf"), R_OK) == 0)
        expect_load_error(vocab, TERN_E_FORMAT,
                          (const char *const[]){vocab, ": no tensors (a vocabulary-only GGUF?), expected the weights of a llama model", NULL});
    /* not a file */
    expect_load_error("/nonexistent/model.gguf", TERN_E_IO, (const char *const[]){"/nonexistent/model.gguf", NULL});
}

/* ---- session API errors --------------------------------------------------------------------- */

static void test_session_errors(void **st) {
    (void)st;
    tern_model *m = load_fx(STORIES, TERN_NUMERICS_FAST, 1);
    tern_session *s = mfx_session(m, 8, 4, false);
    tern_err err = {0};
    const int32_t bad[] = {1, 512};
    assert_null(tern_session_eval(s, bad, 2, &err));
    assert_int_equal(err.code, TERN_E_RANGE);
    assert_int_equal(tern_session_pos(s), 0);
    const int32_t nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    err = (tern_err){0};
    assert_null(tern_session_eval(s, nine, 9, &err));
    assert_int_equal(err.code, TERN_E_RANGE);
    assert_non_null(tern_session_eval(s, nine, 8, &err));
    assert_int_equal(tern_session_pos(s), 8);
    err = (tern_err){0};
    assert_null(tern_session_eval(s, nine, 1, &err));   /* context full */
    assert_int_equal(err.code, TERN_E_RANGE);
    err = (tern_err){0};
    assert_int_equal(tern_session_truncate(s, 9, &err), TERN_E_RANGE);
    assert_int_equal(tern_session_truncate(s, 3, &err), TERN_OK);
    assert_int_equal(tern_session_pos(s), 3);
    assert_int_equal(tern_session_checkpoint(s, &err), TERN_OK);
    tern_session_reset(s);
    assert_int_equal(tern_session_pos(s), 0);
    tern_session_free(s);
    tern_model_free(m);
}

/* ---- memory check ---------------------------------------------------------------------------- */

/* The check before the weights (file size vs available memory) and before the KV cache (its
 * bytes vs what is left), with the available amount given in tern_model_opts.mem_available. */
static void test_memory_check(void **st) {
    (void)st;
    char path[1024];
    fx_require(path, sizeof path, STORIES);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    tern_model_opts o;
    tern_model_opts_default(&o);
    o.n_threads = 1;
    o.mem_available = (uint64_t)sb.st_size - 1;
    tern_model *m = NULL;
    tern_err err = {0};
    assert_int_equal(tern_model_load(&m, path, &o, &err), TERN_E_NOMEM);
    assert_null(m);
    print_message("weights: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "needs"));
    assert_non_null(strstr(err.msg, "available"));
    char bytes[96];   /* exact byte counts beside the rounded MB */
    snprintf(bytes, sizeof bytes, "needs %lld bytes", (long long)sb.st_size);
    assert_non_null(strstr(err.msg, bytes));
    snprintf(bytes, sizeof bytes, "only %lld bytes", (long long)sb.st_size - 1);
    assert_non_null(strstr(err.msg, bytes));
    /* 100 MB: the weights fit; a KV cache for 2^24 positions (5 layers x 2 x 32 fp16 = 640 bytes
     * a position: 10.7 GB) does not */
    o.mem_available = 100000000;
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, path, &o, &err), TERN_OK);
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = 1 << 24;
    tern_session *s = NULL;
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_NOMEM);
    assert_null(s);
    print_message("kv: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "KV cache for n_ctx 16777216 needs 10737.4 MB"));
    so.n_ctx = 4096;                                        /* 2.6 MB: fits */
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_OK);
    tern_session_free(s);
    tern_model_free(m);
    /* a given figure is a budget the model's file takes its share of: room for exactly 1024
     * positions (640 bytes each) beside the file */
    o.mem_available = (uint64_t)sb.st_size + 1024 * 640;
    assert_int_equal(tern_model_load(&m, path, &o, &err), TERN_OK);
    uint64_t kv = 0, avail = 0;
    so.n_ctx = 1024;
    tern_session_mem(m, &so, &kv, NULL, &avail);
    assert_int_equal(kv, 1024 * 640);
    assert_int_equal(avail, 1024 * 640);
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_OK);
    tern_session_free(s);
    so.n_ctx = 1025;
    err = (tern_err){0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_NOMEM);
    assert_non_null(strstr(err.msg, "KV cache for n_ctx 1025"));
    tern_model_free(m);
    /* a hybrid model's session needs its KV cache and its recurrent state together: a budget that
     * holds either alone but not both is refused, naming both; the sum fits */
    char qpath[1024];
    fx_require(qpath, sizeof qpath, "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf");
    assert_int_equal(stat(qpath, &sb), 0);
    o.mem_available = (uint64_t)sb.st_size + (1u << 30);
    assert_int_equal(tern_model_load(&m, qpath, &o, &err), TERN_OK);
    uint64_t q_kv = 0, q_st = 0;
    so.n_ctx = 256;
    tern_session_mem(m, &so, &q_kv, &q_st, NULL);
    assert_true(q_kv > 0 && q_st > 0);
    tern_model_free(m);
    o.mem_available = (uint64_t)sb.st_size + q_kv + q_st - 1;
    assert_true(o.mem_available - (uint64_t)sb.st_size >= (q_kv > q_st ? q_kv : q_st));
    assert_int_equal(tern_model_load(&m, qpath, &o, &err), TERN_OK);
    err = (tern_err){0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_NOMEM);
    print_message("kv + state: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "KV cache for n_ctx 256"));
    assert_non_null(strstr(err.msg, "and recurrent state"));
    assert_non_null(strstr(err.msg, "available: lower n_ctx"));   /* the state fits alone: the context is the lever */
    tern_model_free(m);
    o.mem_available = (uint64_t)sb.st_size + q_st - 1;          /* the state alone does not fit: no context helps */
    assert_int_equal(tern_model_load(&m, qpath, &o, &err), TERN_OK);
    so.n_ctx = 16;
    err = (tern_err){0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_NOMEM);
    print_message("state alone: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "the recurrent state alone does not fit, whatever n_ctx: make more memory available"));
    tern_model_free(m);
    so.n_ctx = 256;
    o.mem_available = (uint64_t)sb.st_size + q_kv + q_st;
    assert_int_equal(tern_model_load(&m, qpath, &o, &err), TERN_OK);
    err = (tern_err){0};
    if (tern_session_init(&s, m, &so, &err) != TERN_OK) fail_msg("kv + state exactly available: %s", err.msg);
    tern_session_free(s);
    tern_model_free(m);
    /* a PTQ1_0 matrix also needs its row-pair transcode (34 bytes per 128 weights: 64 rows x 8
     * blocks = 17408 bytes) unless ptq1_0 is direct; the check runs before anything else is
     * read from the file (the header below has no hyperparameters at all) */
    char ppath[128];
    snprintf(ppath, sizeof ppath, "/tmp/tern-test-memptq-%ld.gguf", (long)getpid());
    gguf_writer *w = NULL;
    assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
    gguf_w_set_str(w, "general.architecture", "qwen3");
    static uint8_t ptq[64 * 8 * 28];
    const int64_t ne[2] = {1024, 64};
    assert_true(gguf_w_add_tensor(w, "blk.0.ffn_up.weight", QT_PTQ1_0, 2, ne, ptq) >= 0);
    assert_int_equal(gguf_w_write_file(w, ppath, &err), TERN_OK);
    gguf_w_free(w);
    assert_int_equal(stat(ppath, &sb), 0);
    o.mem_available = (uint64_t)sb.st_size + 17407;
    o.ptq1_0 = TERN_PTQ1_0_TRANSCODE;
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, ppath, &o, &err), TERN_E_NOMEM);
    print_message("ptq1_0: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "PTQ1_0 transcode 17408 bytes"));
    o.mem_available = (uint64_t)sb.st_size + 17408;   /* exactly enough: next error */
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, ppath, &o, &err), TERN_E_FORMAT);
    o.ptq1_0 = TERN_PTQ1_0_AUTO;    /* auto: one byte short of the transcode runs direct (next error) */
    o.mem_available = (uint64_t)sb.st_size + 17407;
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, ppath, &o, &err), TERN_E_FORMAT);
    o.ptq1_0 = TERN_PTQ1_0_DIRECT;                              /* no side buffer */
    o.mem_available = (uint64_t)sb.st_size;
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, ppath, &o, &err), TERN_E_FORMAT);
    unlink(ppath);
}

int suite_model(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_greedy_f16),
        cmocka_unit_test(test_stories_greedy_f32),
        cmocka_unit_test(test_stories_logits_f32),
        cmocka_unit_test(test_stories_logits_f16),
        cmocka_unit_test(test_stories_ppl),
        cmocka_unit_test(test_session_errors),
        cmocka_unit_test(test_memory_check),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_batch_identity),
        cmocka_unit_test(test_batch_sessions),
        cmocka_unit_test(test_threads_isa),
    };
    TEST_RUN_SUITE("model", tests);
}
