/* test_model_act.c: the activation preparation the model layer relies on, against scalar formulas
 * written here:
 *  - kern_quantize, fast numerics, full 128-value blocks (the 4-lane path in act.c): every byte
 *    equals clamp(nearbyintf(x * (127 / amax)), +-127) with amax = max |x| computed here, d =
 *    amax / 127, the 16-value sums; random data at several scales, exact ties, and blocks holding
 *    NaN / inf (quantised to the defined value: NaN -> 0, inf makes id 0 -> all 0);
 *  - blk_prep_act: RMSNorm / SwiGLU + quantisation split over the pool gives the same bytes and
 *    floats as the scalar steps on one thread. */
#include "test.h"

#include "core/fp16.h"
#include "kernels/kern_impl.h"
#include "kernels/kernels.h"
#include "model/blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t st_rng = 0x2545f4914f6cdd1dull;
static float urand(void) {
    st_rng ^= st_rng << 13;
    st_rng ^= st_rng >> 7;
    st_rng ^= st_rng << 17;
    return (float)((double)(st_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void check_fast_block(const float *x) {
    kact_fast b;
    kern_act a = {.x = x, .q = &b, .K = 128, .ncols = 1, .mode = KQ_FAST};
    kern_quantize(&a);
    float amax = 0.0f;
    for (int i = 0; i < 128; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    assert_true(tern_f32_bits(b.d) == tern_f32_bits(amax / 127.0f));
    int tot = 0;
    for (int i = 0; i < 128; i++) {
        float v = nearbyintf(x[i] * id);
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        if (v != v) v = 0.0f;
        if (b.qs[i] != (int8_t)v) fail_msg("x[%d] = %a, amax %a: q %d, expected %d", i, x[i], amax, b.qs[i], (int)v);
        tot += b.qs[i];
    }
    for (int g = 0; g < 8; g++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += b.qs[16 * g + i];
        assert_int_equal(b.bsums[g], s);
    }
    assert_int_equal(b.sum, tot);
}

static void test_quantize_fast_exact(void **st) {
    (void)st;
    float x[128];
    static const float scales[] = {1.0f, 3e-3f, 250.0f, 1e-20f, 1e20f};
    for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        for (int rep = 0; rep < 200; rep++) {
            for (int i = 0; i < 128; i++) x[i] = urand() * scales[k];
            check_fast_block(x);
        }
    }
    for (int i = 0; i < 128; i++) x[i] = (float)(i - 64) + 0.5f;   /* every value a tie after scaling by 1 */
    x[0] = 127.0f;
    check_fast_block(x);
    for (int i = 0; i < 128; i++) x[i] = urand();
    x[5] = NAN;
    check_fast_block(x);
    x[9] = -INFINITY;
    check_fast_block(x);
    memset(x, 0, sizeof x);
    check_fast_block(x);
}

static void test_prep_act_threads(void **st) {
    (void)st;
    enum { K = 384, N = 7 };
    float src[N * K], src2[N * K], w[K], up[N * K], d1[N * K], d2[N * K];
    for (int i = 0; i < N * K; i++) { src[i] = urand() * 4.0f; up[i] = urand(); }
    for (int i = 0; i < K; i++) w[i] = 1.0f + urand() * 0.5f;
    const size_t qb = kern_act_bytes(KQ_FAST, K, N);
    void *q1 = malloc(qb), *q2 = malloc(qb);
    tern_pool *pool = NULL;
    tern_err err = {0};
    assert_int_equal(pool_init(&pool, 2, &err), TERN_OK);
    for (int op = BLK_PREP_NORM; op <= BLK_PREP_SWIGLU; op++) {
        /* scalar reference, one column at a time */
        for (int c = 0; c < N; c++) {
            if (op == BLK_PREP_NORM) blk_rmsnorm(d1 + c * K, src + c * K, w, K, 1e-6f);
            else blk_swiglu(d1 + c * K, src + c * K, up + c * K, K);
        }
        kern_act a1 = {.x = d1, .q = q1, .K = K, .ncols = N, .mode = KQ_FAST};
        kern_quantize(&a1);
        memcpy(src2, src, sizeof src);
        kern_act a2;
        /* in place (dst == src), as the forward does for SwiGLU */
        blk_prep_act(pool, &a2, op, src2, op == BLK_PREP_NORM ? w : up, op == BLK_PREP_NORM ? d2 : src2, 1e-6f, K, N, q2,
                     KQ_FAST);
        const float *got = op == BLK_PREP_NORM ? d2 : src2;
        assert_true(a2.x == got && a2.ncols == N && a2.K == K);
        assert_memory_equal(d1, got, sizeof d1);
        assert_memory_equal(q1, q2, qb);
    }
    pool_free(pool);
    free(q1);
    free(q2);
}

int suite_model_act(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_fast_exact),
        cmocka_unit_test(test_prep_act_threads),
    };
    TEST_RUN_SUITE("model_act", tests);
}
