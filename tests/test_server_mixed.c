/* test_server_mixed.c: the mixed pass behind `tern serve`'s chunked prefill
 * (tern_batch_eval_seqs): decode tokens of some sessions and prompt chunks of others in ONE
 * forward. The reference is each session run alone through tern_session_eval with the same
 * chunks (a decode token alone, a chunk alone): every session's logits after every pass must be
 * bit-identical to its reference and positions must agree. Covered: stories260K (llama), qwen3-tiny
 * (fast and ggml numerics) and qwen35-tiny (recurrent state: a chunk of 17+ tokens takes the chunked
 * delta rule, a short one the sequential rule, both beside decode columns of other sequences).
 * Then the argument errors, each leaving every session where it was. */
#include "test.h"
#include "model_fx.h"

#include "tern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORIES "data/stories260k/stories260K.gguf"
#define QWEN3 "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"
#define QWEN35 "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf"

enum { NS = 3, PLEN = 48, NCTX = 128, NBATCH = 64 };

static tern_model *load(const char *rel, tern_numerics num) {
    char path[1024];
    return mfx_load(fx_require(path, sizeof path, rel), num, 2);
}

/* Deterministic token ids below n_vocab (a fixed LCG; any valid ids do). */
static void fill_ids(int32_t *ids, int n, uint32_t seed, int32_t n_vocab) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
    }
}

static void check_same(const float *got, const float *want, size_t V, const char *what, const char *rel, int num,
                       int pass, int seq) {
    if (memcmp(got, want, V * sizeof(float)) != 0)
        fail_msg("%s numerics %d, pass %d, session %d (%s): the mixed pass differs from the session's own eval", rel,
                 num, pass, seq, what);
}

/* Sessions 0 and 2 decode (a short prompt first, then one greedy token per pass); session 1's
 * prompt of PLEN tokens goes in the chunks `chunk` (summing to PLEN) beside them, then it decodes
 * too. Reference sessions (r) do the same work one call at a time. */
static void mixed_vs_alone(const char *rel, tern_numerics num, const int *chunk, int n_chunk) {
    tern_model *m = load(rel, num);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const size_t V = (size_t)info.n_vocab;
    tern_session *b[NS], *r[NS];
    tern_err err = {0};
    int32_t prompt[NS][PLEN];
    const int plen[NS] = {5, PLEN, 3};
    for (int i = 0; i < NS; i++) {
        b[i] = mfx_session(m, NCTX, NBATCH, false);
        r[i] = mfx_session(m, NCTX, NBATCH, false);
        fill_ids(prompt[i], plen[i], 7u + 31u * (uint32_t)i, info.n_vocab);
    }
    int32_t next[NS];
    for (int i = 0; i < NS; i += 2) {                 /* the decoding sessions' prompts */
        const float *l = tern_session_eval(b[i], prompt[i], plen[i], &err);
        assert_non_null(l);
        next[i] = mfx_argmax(l, info.n_vocab);
        assert_non_null(tern_session_eval(r[i], prompt[i], plen[i], &err));
    }
    float *lb = malloc(NS * V * sizeof(float));
    int32_t tok[NS + PLEN];
    int ntok[NS];
    int done = 0;                                     /* session 1's prompt tokens evaluated */
    for (int pass = 0; pass < n_chunk + 3; pass++) {
        /* packed in session order: 0 (decode), 1 (a chunk, or its decode token after the prompt), 2 */
        int c = 0;
        tok[c++] = next[0];
        ntok[0] = 1;
        const bool prefill = done < PLEN;
        if (prefill) {
            memcpy(tok + c, prompt[1] + done, (size_t)chunk[pass] * sizeof *tok);
            ntok[1] = chunk[pass];
        } else {
            tok[c] = next[1];
            ntok[1] = 1;
        }
        c += ntok[1];
        tok[c++] = next[2];
        ntok[2] = 1;
        assert_int_equal(tern_batch_eval_seqs(b, tok, ntok, NS, lb, &err), TERN_OK);
        for (int i = 0; i < NS; i++) {
            const int32_t *t = i == 1 && prefill ? prompt[1] + done : &next[i];
            const float *la = tern_session_eval(r[i], t, ntok[i], &err);
            assert_non_null(la);
            check_same(lb + (size_t)i * V, la, V, i == 1 && prefill ? "prompt chunk" : "decode", rel, (int)num, pass, i);
            assert_int_equal(tern_session_pos(b[i]), tern_session_pos(r[i]));
        }
        if (prefill) done += chunk[pass];
        for (int i = 0; i < NS; i++) next[i] = mfx_argmax(lb + (size_t)i * V, info.n_vocab);
    }
    assert_int_equal(done, PLEN);
    /* two prompts in one pass, no decode: chunks of two fresh sessions */
    tern_session_reset(b[0]);
    tern_session_reset(b[1]);
    tern_session_reset(r[0]);
    tern_session_reset(r[1]);
    memcpy(tok, prompt[1], 20 * sizeof *tok);
    memcpy(tok + 20, prompt[0], 5 * sizeof *tok);
    ntok[0] = 20;
    ntok[1] = 5;
    tern_session *two[2] = {b[1], b[0]};
    assert_int_equal(tern_batch_eval_seqs(two, tok, ntok, 2, lb, &err), TERN_OK);
    const float *la = tern_session_eval(r[1], prompt[1], 20, &err);
    assert_non_null(la);
    check_same(lb, la, V, "first of two prompts", rel, (int)num, -1, 1);
    la = tern_session_eval(r[0], prompt[0], 5, &err);
    assert_non_null(la);
    check_same(lb + V, la, V, "second of two prompts", rel, (int)num, -1, 0);
    for (int i = 0; i < NS; i++) {
        tern_session_free(b[i]);
        tern_session_free(r[i]);
    }
    free(lb);
    tern_model_free(m);
}

static void test_mixed_equals_alone(void **st) {
    (void)st;
    const int ch[] = {16, 16, 16};
    mixed_vs_alone(STORIES, TERN_NUMERICS_FAST, ch, 3);
    const int ch2[] = {8, 32, 7, 1};
    mixed_vs_alone(QWEN3, TERN_NUMERICS_FAST, ch2, 4);
    mixed_vs_alone(QWEN3, TERN_NUMERICS_GGML, ch, 3);
    const int ch35[] = {20, 5, 23};                   /* chunked delta rule, sequential, chunked */
    mixed_vs_alone(QWEN35, TERN_NUMERICS_FAST, ch35, 3);
}

/* Errors name the session and leave every session's position unchanged. */
static void test_mixed_errors(void **st) {
    (void)st;
    tern_model *m = load(QWEN3, TERN_NUMERICS_FAST);
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *s[2] = {mfx_session(m, 32, 8, false), mfx_session(m, 32, 8, false)};
    tern_err err = {0};
    int32_t tok[40] = {0};
    fill_ids(tok, 40, 3, info.n_vocab);
    assert_non_null(tern_session_eval(s[0], tok, 2, &err));
    float *lb = malloc(2 * (size_t)info.n_vocab * sizeof(float));
    int n[2] = {1, 8};                                /* 9 columns > n_batch 8 */
    err = (tern_err){0};
    assert_int_equal(tern_batch_eval_seqs(s, tok, n, 2, lb, &err), TERN_E_ARG);
    assert_non_null(strstr(err.msg, "n_batch 8"));
    n[1] = 0;
    err = (tern_err){0};
    assert_int_equal(tern_batch_eval_seqs(s, tok, n, 2, lb, &err), TERN_E_ARG);
    assert_non_null(strstr(err.msg, "session 1"));
    n[0] = 3;
    n[1] = 4;
    tok[5] = info.n_vocab;                            /* session 1's token index 2 */
    err = (tern_err){0};
    assert_int_equal(tern_batch_eval_seqs(s, tok, n, 2, lb, &err), TERN_E_RANGE);
    assert_non_null(strstr(err.msg, "session 1 (index 2)"));
    fill_ids(tok, 40, 3, info.n_vocab);
    for (int k = 0; k < 4; k++) assert_non_null(tern_session_eval(s[1], tok, 7, &err));   /* 28 of 32 */
    err = (tern_err){0};
    n[0] = 1;
    n[1] = 5;                                         /* 28 + 5 > 32 */
    assert_int_equal(tern_batch_eval_seqs(s, tok, n, 2, lb, &err), TERN_E_RANGE);
    assert_non_null(strstr(err.msg, "context full"));
    tern_session *dup[2] = {s[0], s[0]};
    n[1] = 1;
    assert_int_equal(tern_batch_eval_seqs(dup, tok, n, 2, lb, &err), TERN_E_ARG);
    assert_int_equal(tern_session_pos(s[0]), 2);      /* nothing was appended by any of them */
    assert_int_equal(tern_session_pos(s[1]), 28);
    n[1] = 4;                                         /* and a valid call still works */
    assert_int_equal(tern_batch_eval_seqs(s, tok, n, 2, lb, &err), TERN_OK);
    assert_int_equal(tern_session_pos(s[0]), 3);
    assert_int_equal(tern_session_pos(s[1]), 32);
    free(lb);
    tern_session_free(s[0]);
    tern_session_free(s[1]);
    tern_model_free(m);
}

int suite_server_mixed(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_equals_alone),
        cmocka_unit_test(test_mixed_errors),
    };
    TEST_RUN_SUITE("server_mixed", tests);
}
