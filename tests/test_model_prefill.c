/* test_model_prefill.c: the prefill (many-column) path of the dense forward gives the same bits
 * whatever the thread count and however the work is shared. A 45-token prompt (the AVX2 wide
 * matmul's 5 tiles of 8 columns plus 5 leftover columns; attention tiles over a causal triangle)
 * through the golden qwen3-tiny PQ2_0 model, in every numerics mode:
 *   - one batch with 1, 2 and 3 threads: every position's logits bit-identical (the projections
 *     and the FFN hand out row chunks dynamically, and attention tiles are taken by whichever
 *     thread is free, src/model/blocks.c: none of that may change a bit);
 *   - the same prompt token by token (decode: matvec, one-query attention) with 2 threads:
 *     bit-identical to the batch (the kernels' integer and float order, kern_impl.h, and the
 *     attention order, attn_impl.h, do not depend on the number of columns). */
#include "test.h"
#include "model_fx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QWEN3_TINY "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"
enum { NP = 45 };

static float *prefill(tern_numerics num, int nt, const int32_t *ids, bool one_by_one, size_t *V) {
    char path[1024];
    fx_require(path, sizeof path, QWEN3_TINY);
    tern_model *m = mfx_load(path, num, nt);
    tern_model_info info;
    tern_model_get_info(m, &info);
    *V = (size_t)info.n_vocab;
    float *l = malloc(NP * *V * sizeof(float));
    assert_non_null(l);
    tern_session *s = mfx_session(m, 128, 64, false);
    tern_err err = {0};
    if (one_by_one) {
        for (int i = 0; i < NP; i++) assert_int_equal(tern_session_eval_all(s, ids + i, 1, l + i * *V, &err), TERN_OK);
    } else {
        assert_int_equal(tern_session_eval_all(s, ids, NP, l, &err), TERN_OK);
    }
    tern_session_free(s);
    tern_model_free(m);
    return l;
}

static void test_prefill_threads(void **st) {
    (void)st;
    int32_t ids[NP];
    for (int i = 0; i < NP; i++) ids[i] = (int32_t)((i * 7919 + 13) % 150000);   /* any ids of the vocabulary */
    for (int num = 0; num < 3; num++) {
        size_t V;
        float *want = prefill((tern_numerics)num, 1, ids, false, &V);
        for (int nt = 2; nt <= 3; nt++) {
            float *got = prefill((tern_numerics)num, nt, ids, false, &V);
            for (int i = 0; i < NP; i++)
                if (memcmp(want + i * V, got + i * V, V * sizeof(float)) != 0)
                    fail_msg("numerics %d, %d threads: position %d differs from 1 thread", num, nt, i);
            free(got);
        }
        float *dec = prefill((tern_numerics)num, 2, ids, true, &V);
        for (int i = 0; i < NP; i++)
            if (memcmp(want + i * V, dec + i * V, V * sizeof(float)) != 0)
                fail_msg("numerics %d: position %d differs between the batch and token-by-token decode", num, i);
        print_message("numerics %d: %d positions identical for 1, 2, 3 threads and token by token\n", num, NP);
        free(dec);
        free(want);
    }
}

int suite_model_prefill(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_threads),
    };
    TEST_RUN_SUITE("model_prefill", tests);
}
