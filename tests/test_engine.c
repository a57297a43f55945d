/* test_engine.c: the tern.h engine API around the forward pass: model info, tokenize with and
 * without BOS / special parsing, streaming detokenisation, chat template rendering through the
 * model (golden p5: the fork's Jinja rendering of the Qwen3 template), bandwidth probe sanity,
 * argument errors. */
#include "test.h"
#include "model_fx.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

static tern_model *load_rel(const char *rel) {
    char path[1024];
    fx_require(path, sizeof path, rel);
    return mfx_load(path, TERN_NUMERICS_FAST, 1);
}

static void test_info(void **st) {
    (void)st;
    tern_model *m = load_rel("golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf");
    tern_model_info in;
    tern_model_get_info(m, &in);
    assert_string_equal(in.arch, "qwen3");
    assert_int_equal(in.n_vocab, 151936);
    assert_int_equal(in.n_embd, 256);
    assert_int_equal(in.n_layer, 4);
    assert_int_equal(in.n_head, 4);
    assert_int_equal(in.n_head_kv, 2);
    assert_int_equal(in.bos, 151643);
    assert_int_equal(in.eos, 151645);
    assert_false(in.add_bos);
    assert_int_equal(in.n_threads, 1);
    /* tied head: the PQ2_0 embedding is read once per token as the LM head (34 bytes per 128
     * weights); every other tensor as stored */
    assert_true(in.bytes_per_token > (uint64_t)151936 * 256 / 128 * 34);
    assert_true(in.bytes_per_token <= in.weight_bytes);
    assert_true(tern_token_is_eog(m, 151645));
    assert_false(tern_token_is_eog(m, 785));
    tern_model_free(m);
}

static void test_chat_apply(void **st) {
    (void)st;
    cJSON *pj = mfx_json("golden/qwen3-tiny-pq2_0/prompts.json");
    tern_model *m = load_rel("golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf");
    {   /* trained on 40960 positions: the default context stays 4096 */
        tern_session *s = NULL;
        tern_err e0 = {0};
        if (tern_session_init(&s, m, NULL, &e0) != TERN_OK) fail_msg("session: %s", e0.msg);
        assert_int_equal(tern_session_n_ctx(s), 4096);
        tern_session_free(s);
    }
    const cJSON *p5 = NULL, *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(pj, "prompts"))
        if (strcmp(cJSON_GetObjectItem(e, "id")->valuestring, "p5") == 0) p5 = e;
    assert_non_null(p5);
    const cJSON *msg = cJSON_GetArrayItem(cJSON_GetObjectItem(p5, "messages"), 0);
    tern_chat_msg cm = {cJSON_GetObjectItem(msg, "role")->valuestring, cJSON_GetObjectItem(msg, "content")->valuestring};
    char out[1024];
    size_t n = 0;
    tern_err err = {0};
    assert_int_equal(tern_chat_apply(m, NULL, &cm, 1, true, true, out, sizeof out, &n, &err), TERN_OK);
    assert_string_equal(out, cJSON_GetObjectItem(p5, "text")->valuestring);
    assert_int_equal(n, strlen(out));
    /* tokenised with special parsing: the fork's ids */
    int32_t ids[64];
    int n_ids = 0;
    assert_int_equal(tern_tokenize(m, out, n, false, true, ids, 64, &n_ids, &err), TERN_OK);
    int nw;
    int32_t *want = mfx_ids(cJSON_GetObjectItem(p5, "token_ids"), &nw);
    assert_int_equal(n_ids, nw);
    assert_memory_equal(ids, want, (size_t)nw * sizeof *want);
    free(want);
    /* too small a buffer: TERN_E_RANGE with the size needed */
    err = (tern_err){0};
    assert_int_equal(tern_chat_apply(m, NULL, &cm, 1, true, true, out, 8, &n, &err), TERN_E_RANGE);
    assert_int_equal(n, strlen(cJSON_GetObjectItem(p5, "text")->valuestring));
    err = (tern_err){0};
    assert_int_equal(tern_chat_apply(m, "no-such-template", &cm, 1, true, true, out, sizeof out, &n, &err),
                     TERN_E_UNSUPPORTED);
    /* a role outside system/user/assistant/tool, a NULL role or NULL content: TERN_E_ARG naming the
     * message, under every template (ChatML would otherwise render any role text) */
    const char *tmpls[] = {"chatml", "qwen3", NULL};
    for (size_t t = 0; t < sizeof tmpls / sizeof tmpls[0]; t++) {
        tern_chat_msg bad[2] = {{"user", "hi"}, {"wizard", "abracadabra"}};
        err = (tern_err){0};
        assert_int_equal(tern_chat_apply(m, tmpls[t], bad, 2, true, true, out, sizeof out, &n, &err), TERN_E_ARG);
        assert_string_equal(err.msg, "message 1: unknown role 'wizard' (expected system, user, assistant or tool)");
        int32_t tids[8];
        int nt = 0;
        err = (tern_err){0};
        assert_int_equal(tern_chat_tokenize(m, tmpls[t], bad, 2, true, true, false, tids, 8, &nt, &err), TERN_E_ARG);
        bad[1] = (tern_chat_msg){NULL, "x"};
        err = (tern_err){0};
        assert_int_equal(tern_chat_apply(m, tmpls[t], bad, 2, true, true, out, sizeof out, &n, &err), TERN_E_ARG);
        assert_string_equal(err.msg, "message 1: role is NULL");
        bad[1] = (tern_chat_msg){"assistant", NULL};
        err = (tern_err){0};
        assert_int_equal(tern_chat_apply(m, tmpls[t], bad, 2, true, true, out, sizeof out, &n, &err), TERN_E_ARG);
        assert_string_equal(err.msg, "message 1 (assistant): content is NULL (expected a string, \"\" for none)");
    }
    tern_model_free(m);
    cJSON_Delete(pj);
}

static void test_tokenize_detok(void **st) {
    (void)st;
    tern_model *m = load_rel("data/stories260k/stories260K.gguf");
    tern_err err = {0};
    int32_t ids[64];
    int n = 0;
    const char *txt = "Once upon a time, there was a little girl named Lily.";
    assert_int_equal(tern_tokenize(m, txt, strlen(txt), true, false, ids, 64, &n, &err), TERN_OK);
    const int32_t want[] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
    assert_int_equal(n, 16);
    assert_memory_equal(ids, want, sizeof want);
    /* a too-small buffer reports the size needed */
    int need = 0;
    err = (tern_err){0};
    assert_int_equal(tern_tokenize(m, txt, strlen(txt), true, false, ids, 3, &need, &err), TERN_E_RANGE);
    assert_int_equal(need, 16);
    /* streaming detokenisation round-trips the text */
    char out[256];
    int k = 0;
    tern_detok d;
    tern_detok_init(&d);
    for (int i = 0; i < n; i++) {           /* from BOS: the first piece drops its SPM space */
        const int r = tern_detok_put(m, &d, ids[i], out + k, (int)sizeof out - k);
        assert_true(r >= 0);
        k += r;
    }
    k += tern_detok_flush(&d, out + k, (int)sizeof out - k);
    out[k] = 0;
    assert_string_equal(out, txt);
    char piece[16];
    assert_int_equal(tern_token_piece(m, 403, false, piece, sizeof piece), 5);
    assert_memory_equal(piece, " Once", 5);
    assert_int_equal(tern_token_piece(m, 512, false, piece, sizeof piece), TERN_E_RANGE);
    /* a NULL buffer with cap 0 asks the size; with cap > 0 it is refused, never written */
    assert_int_equal(tern_token_piece(m, 403, false, NULL, 0), 5);
    assert_int_equal(tern_token_piece(m, 403, false, NULL, 8), TERN_E_ARG);
    tern_detok_init(&d);
    assert_int_equal(tern_detok_put(m, &d, 403, NULL, 8), TERN_E_ARG);
    assert_int_equal(tern_detok_flush(&d, NULL, 8), TERN_E_ARG);
    /* the capacity is the text's bytes: one byte less is refused, nothing written and the stream
     * unchanged, so the same call with the capacity then succeeds */
    tern_detok_init(&d);
    assert_int_equal(tern_detok_put(m, &d, 403, out, 256), 5);   /* " Once": 5 bytes, nothing held */
    memset(out, 'x', 16);
    assert_int_equal(tern_detok_put(m, &d, 407, out, 5 - 1), TERN_E_ARG);   /* " upon" */
    assert_int_equal(out[0], 'x');
    assert_int_equal(tern_detok_put(m, &d, 407, out, 5), 5);
    assert_memory_equal(out, " upon", 5);
    /* metadata strings: the whole length, a cut copy, and the errors */
    char nm[8];
    assert_int_equal(tern_model_meta_str(m, "general.architecture", nm, sizeof nm), 5);   /* "llama" */
    assert_string_equal(nm, "llama");
    assert_int_equal(tern_model_meta_str(m, "general.architecture", nm, 3), 5);
    assert_string_equal(nm, "ll");
    assert_int_equal(tern_model_meta_str(m, "general.architecture", NULL, 0), 5);
    assert_int_equal(tern_model_meta_str(m, "no.such.key", nm, sizeof nm), TERN_E_RANGE);
    assert_int_equal(tern_model_meta_str(m, "llama.block_count", nm, sizeof nm), TERN_E_RANGE);   /* not a string */
    assert_int_equal(tern_model_meta_str(NULL, "general.architecture", nm, sizeof nm), TERN_E_ARG);
    assert_int_equal(tern_model_meta_str(m, NULL, nm, sizeof nm), TERN_E_ARG);
    assert_int_equal(tern_model_meta_str(m, "general.architecture", NULL, 8), TERN_E_ARG);
    d.n_pend = 9;                                     /* a stream no tern_detok call makes: refused */
    assert_int_equal(tern_detok_put(m, &d, 407, out, 64), TERN_E_ARG);
    assert_int_equal(tern_detok_flush(&d, out, 64), TERN_E_ARG);
    tern_detok_init(&d);
    assert_int_equal(tern_detok_put(m, NULL, 407, out, 64), TERN_E_ARG);
    assert_int_equal(tern_detok_put(m, &d, 512, out, 64), TERN_E_RANGE);
    /* tern_tokenize names the argument it refuses */
    err = (tern_err){0};
    assert_int_equal(tern_tokenize(m, NULL, 3, true, false, ids, 64, &n, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "tern_tokenize: text is NULL with len 3 (expected len 0)");
    err = (tern_err){0};
    assert_int_equal(tern_tokenize(m, txt, strlen(txt), true, false, NULL, 4, &n, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "tern_tokenize: out is NULL with n_max 4 (expected n_max 0)");
    /* negative sizes in the session options are refused, not taken as the defaults */
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = -5;
    tern_session *s = NULL;
    err = (tern_err){0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "n_ctx -5, expected 0 (4096, or the model's trained length if shorter) or more");
    tern_session_opts_default(&so);
    so.n_batch = -7;
    err = (tern_err){0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_ARG);
    assert_null(s);
    /* and sizes past the limits name the limit */
    tern_session_opts_default(&so);
    so.n_ctx = INT_MAX;
    err = (tern_err){0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "n_ctx 2147483647, expected at most 16777216");
    tern_session_opts_default(&so);
    so.n_ctx = 1 << 17;
    so.n_batch = 1 << 20;                             /* clamped to n_ctx, still past the limit */
    err = (tern_err){0};
    assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "n_batch 131072 with n_ctx 131072, expected at most 65536");
    so.n_ctx = 64;                                    /* an n_batch past the limit but over n_ctx is clamped */
    err = (tern_err){0};
    if (tern_session_init(&s, m, &so, &err) != TERN_OK) fail_msg("n_ctx 64, n_batch 2^20: %s", err.msg);
    assert_int_equal(tern_session_n_batch(s), 64);
    tern_session_free(s);
    s = NULL;
    /* a NULL token array is named as such */
    tern_session_opts_default(&so);
    so.n_ctx = 64;
    err = (tern_err){0};
    if (tern_session_init(&s, m, &so, &err) != TERN_OK) fail_msg("session: %s", err.msg);
    err = (tern_err){0};
    assert_null(tern_session_eval(s, NULL, 3, &err));
    assert_int_equal(err.code, TERN_E_ARG);
    assert_string_equal(err.msg, "tern_session_eval: tok is NULL with n = 3");
    float one_row[1];
    int32_t t0 = 0;
    err = (tern_err){0};
    assert_int_equal(tern_session_eval_all(s, &t0, 0, one_row, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "tern_session_eval_all: n is 0 (expected at least one token)");
    /* a full context: one token more is "1 token", two are "2 tokens" (64 ids of BOS fill n_ctx 64) */
    int32_t fill[64];
    for (int i = 0; i < 64; i++) fill[i] = 1;
    err = (tern_err){0};
    if (!tern_session_eval(s, fill, 64, &err)) fail_msg("eval: %s", err.msg);
    assert_null(tern_session_eval(s, fill, 1, &err));
    assert_string_equal(err.msg, "context full: position 64 + 1 token > n_ctx 64");
    err = (tern_err){0};
    assert_null(tern_session_eval(s, fill, 2, &err));
    assert_string_equal(err.msg, "context full: position 64 + 2 tokens > n_ctx 64");
    err = (tern_err){0};
    float row[512 * 1];
    assert_int_equal(tern_batch_eval(&s, fill, 1, row, &err), TERN_E_RANGE);
    assert_string_equal(err.msg, "session 0: context full (position 64 + 1 token > n_ctx 64)");
    tern_session_free(s);
    /* the empty text with BOS is one token: a size query (n_max 0) says "1 token" */
    err = (tern_err){0};
    assert_int_equal(tern_tokenize(m, "", 0, true, false, NULL, 0, &n, &err), TERN_E_RANGE);
    assert_int_equal(n, 1);
    assert_string_equal(err.msg, "tokenize: the text gives 1 token, the output holds 0 (n_max): call again with n_max >= 1");
    /* n_ctx 0 (the default): 4096, or the trained length when shorter: stories260K's is 2048, and
     * tern_session_mem sizes the same context (the same bytes as n_ctx 2048) */
    tern_session_opts_default(&so);
    assert_int_equal(so.n_ctx, 0);
    if (tern_session_init(&s, m, &so, &err) != TERN_OK) fail_msg("session: %s", err.msg);
    assert_int_equal(tern_session_n_ctx(s), 2048);
    uint64_t kv = 0;
    tern_session_mem(m, &so, &kv, NULL, NULL);
    so.n_ctx = 2048;
    uint64_t kv2048 = 0;
    tern_session_mem(m, &so, &kv2048, NULL, NULL);
    assert_true(kv == kv2048 && kv > 0);
    tern_session_free(s);
    tern_model_free(m);
}

static void test_membw(void **st) {
    (void)st;
    double gbs = 0;
    tern_err err = {0};
    assert_int_equal(tern_membw(1, (size_t)16 << 20, 1, &gbs, &err), TERN_OK);
    assert_true(gbs > 0.1 && gbs < 10000);   /* a physical range, not a fixed value */
    assert_int_equal(tern_membw(1, 100, 1, &gbs, &err), TERN_E_ARG);
    /* every pass is written, each in the physical range */
    double passes[5] = {0};
    assert_int_equal(tern_membw_passes(2, (size_t)16 << 20, 5, passes, &err), TERN_OK);
    for (int i = 0; i < 5; i++) assert_true(passes[i] > 0.1 && passes[i] < 10000);
    assert_int_equal(tern_membw_passes(1, (size_t)16 << 20, 1, NULL, &err), TERN_E_ARG);
}

static void test_bad_args(void **st) {
    (void)st;
    tern_model *m = NULL;
    tern_err err = {0};
    tern_model_opts o;
    tern_model_opts_default(&o);
    o.numerics = (tern_numerics)7;
    assert_int_equal(tern_model_load(&m, "x.gguf", &o, &err), TERN_E_ARG);
    assert_null(m);
    tern_model_opts_default(&o);
    o.n_threads = -3;
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, "x.gguf", &o, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "n_threads -3, expected 0 (the CPUs this process may run on) or 1..1024");
    tern_model_opts_default(&o);
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, NULL, &o, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "tern_model_load: path is NULL");
    /* a file that cannot be opened: the library's own message names it and the OS's reason */
    tern_model_opts_default(&o);
    err = (tern_err){0};
    assert_int_equal(tern_model_load(&m, "/nonexistent/tern-engine-test.gguf", &o, &err), TERN_E_IO);
    assert_null(m);
    assert_non_null(strstr(err.msg, "'/nonexistent/tern-engine-test.gguf'"));
    assert_non_null(strstr(err.msg, strerror(ENOENT)));
    err = (tern_err){0};
    assert_int_equal(tern_session_init(NULL, NULL, NULL, &err), TERN_E_ARG);
    tern_model_free(NULL);
    tern_session_free(NULL);
    /* getters and defaults take NULL without touching it */
    tern_model_info info;
    memset(&info, 0xff, sizeof info);
    tern_model_get_info(NULL, &info);
    assert_int_equal(info.n_vocab, 0);
    tern_model_get_info(NULL, NULL);
    assert_int_equal(tern_session_pos(NULL), 0);
    assert_int_equal(tern_session_n_ctx(NULL), 0);
    assert_false(tern_token_is_eog(NULL, 2));
    tern_model_opts_default(NULL);
    tern_session_opts_default(NULL);
    tern_detok_init(NULL);
    tern_profile_get(NULL);
    /* a tools list that does not parse, or has bytes after the array, is named with the offset */
    char sec[256];
    size_t n_sec = 0;
    err = (tern_err){0};
    assert_int_equal(tern_chat_tools_section("qwen3", "[1] trailing", sec, sizeof sec, &n_sec, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "chat template: tools: not JSON at byte 4 (of 12), expected a JSON array");
    err = (tern_err){0};
    assert_int_equal(tern_chat_tools_section("qwen3", "{\"a\": 1}", sec, sizeof sec, &n_sec, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "chat template: tools: a JSON object, expected a JSON array");
    /* the bandwidth probe's thread count is checked as tern_model_load's */
    double gbs = 0;
    err = (tern_err){0};
    assert_int_equal(tern_membw(-1, 1 << 20, 1, &gbs, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "n_threads -1, expected 0 (the CPUs this process may run on) or 1..1024");
    err = (tern_err){0};
    assert_int_equal(tern_membw(1, 1000, 1, &gbs, &err), TERN_E_ARG);
    assert_string_equal(err.msg, "membw: 1000 bytes, expected at least 65536");
}


/* ---- two models on two threads ------------------------------------------------------------- */

/* One thread's work: load its model (f32 numerics, 2 pool threads) while the other thread loads
 * its own, then follow the golden greedy path of the first golden prompt (teacher forced, so the
 * path does not depend on this run's choices) and record the argmax and the logits of every step.
 * Errors are recorded, not asserted: cmocka's checks belong to the main thread. */
#define TWO_STEPS 24
typedef struct two_job {
    const char *gguf, *golden;   /* paths under shared/ */
    char path[1024];
    int32_t *prompt, want[TWO_STEPS];
    int n_prompt, n_steps, n_vocab;
    int32_t got[TWO_STEPS];
    float *logits;               /* [n_steps][n_vocab] */
    char err[1400];
} two_job;

static void two_follow(two_job *j, tern_model *m, int32_t *got, float *logits) {
    tern_session *s = NULL;
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = 256;
    tern_err e = {0};
    if (tern_session_init(&s, m, &so, &e)) { snprintf(j->err, sizeof j->err, "session: %s", e.msg); return; }
    const float *l = tern_session_eval(s, j->prompt, j->n_prompt, &e);
    for (int k = 0; l && k < j->n_steps; k++) {
        got[k] = mfx_argmax(l, j->n_vocab);
        memcpy(logits + (size_t)k * (size_t)j->n_vocab, l, sizeof(float) * (size_t)j->n_vocab);
        if (k + 1 < j->n_steps) l = tern_session_eval(s, &j->want[k], 1, &e);
    }
    if (!l) snprintf(j->err, sizeof j->err, "eval: %s", e.msg);
    tern_session_free(s);
}

static tern_model *two_load(two_job *j) {
    tern_model_opts o;
    tern_model_opts_default(&o);
    o.numerics = TERN_NUMERICS_F32;
    o.n_threads = 2;
    tern_model *m = NULL;
    tern_err e = {0};
    if (tern_model_load(&m, j->path, &o, &e)) snprintf(j->err, sizeof j->err, "load %s: %.300s", j->path, e.msg);
    return m;
}

static void *two_thread(void *arg) {
    two_job *j = arg;
    tern_model *m = two_load(j);
    if (m) two_follow(j, m, j->got, j->logits);
    tern_model_free(m);
    return NULL;
}

/* Two models (stories260K, llama; qwen3-tiny PQ2_0, qwen3) loaded and run at the same time on two
 * threads, each with its own 2-thread pool: every step's argmax is the golden greedy token where
 * the golden top-2 margin exceeds 0.5 (f32 numerics are within ~1e-3 of the reference logits),
 * and the logits are bit-identical to the same model run alone afterwards. A shared mutable
 * global in the loader or the forward (progress state, profiler, scratch) breaks one or both. */
static void test_two_models_two_threads(void **st) {
    (void)st;
    two_job jobs[2] = {{.gguf = "data/stories260k/stories260K.gguf", .golden = "golden/stories260k/greedy.json"},
                       {.gguf = "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf",
                        .golden = "golden/qwen3-tiny-pq2_0/greedy.json"}};
    cJSON *gold[2];
    for (int i = 0; i < 2; i++) {
        two_job *j = &jobs[i];
        fx_require(j->path, sizeof j->path, j->gguf);
        gold[i] = mfx_json(j->golden);
        const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(gold[i], "greedy"), 0);
        j->prompt = mfx_ids(cJSON_GetObjectItem(e, "prompt_ids"), &j->n_prompt);
        const cJSON *steps = cJSON_GetObjectItem(e, "steps");
        j->n_steps = cJSON_GetArraySize(steps) < TWO_STEPS ? cJSON_GetArraySize(steps) : TWO_STEPS;
        for (int k = 0; k < j->n_steps; k++)
            j->want[k] = (int32_t)cJSON_GetObjectItem(cJSON_GetArrayItem(steps, k), "token")->valuedouble;
        j->n_vocab = (int)cJSON_GetObjectItem(gold[i], "n_vocab")->valuedouble;
        j->logits = malloc(sizeof(float) * (size_t)j->n_steps * (size_t)j->n_vocab);
        assert_non_null(j->logits);
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, two_thread, &jobs[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        two_job *j = &jobs[i];
        if (j->err[0]) fail_msg("%s: %s", j->gguf, j->err);
        const cJSON *steps = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(gold[i], "greedy"), 0), "steps");
        int checked = 0;
        for (int k = 0; k < j->n_steps; k++) {
            if (cJSON_GetObjectItem(cJSON_GetArrayItem(steps, k), "margin12")->valuedouble <= 0.5) continue;
            if (j->got[k] != j->want[k]) fail_msg("%s step %d: argmax %d, golden %d", j->gguf, k, j->got[k], j->want[k]);
            checked++;
        }
        assert_true(checked >= 8);
        /* alone, afterwards: the same bits */
        tern_model *m = two_load(j);
        if (!m) fail_msg("%s", j->err);
        int32_t got[TWO_STEPS];
        float *alone = malloc(sizeof(float) * (size_t)j->n_steps * (size_t)j->n_vocab);
        assert_non_null(alone);
        two_follow(j, m, got, alone);
        if (j->err[0]) fail_msg("%s alone: %s", j->gguf, j->err);
        assert_memory_equal(got, j->got, sizeof(int32_t) * (size_t)j->n_steps);
        assert_memory_equal(alone, j->logits, sizeof(float) * (size_t)j->n_steps * (size_t)j->n_vocab);
        print_message("%s: %d steps on the golden path (%d with margin > 0.5 equal), bit-identical alone\n", j->gguf,
                      j->n_steps, checked);
        free(alone);
        tern_model_free(m);
        free(j->logits);
        free(j->prompt);
        cJSON_Delete(gold[i]);
    }
}

int suite_engine(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_chat_apply),
        cmocka_unit_test(test_tokenize_detok),
        cmocka_unit_test(test_membw),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_two_models_two_threads),
    };
    TEST_RUN_SUITE("engine", tests);
}
