/* test_model_act.c: the activation preparation the model layer relies on, against scalar formulas
 * written here:
 *  - kern_quantize, fast numerics, full 128-value blocks (the 4-lane path in act.c and the AVX2
 *    one in x86/act_avx2.c): every byte
 *    equals clamp(nearbyintf(x * (127 / amax)), +-127) with amax = max |x| computed here, d =
 *    amax / 127, the 16-value sums; random data at several scales, exact ties, and blocks holding
 *    NaN / inf (quantised to the defined value: NaN -> 0, inf makes id 0 -> all 0);
 *  - blk_prep_act: RMSNorm / SwiGLU + quantisation split over the pool (by columns, or one column
 *    by 128-value ranges) gives the same bytes and floats as the scalar steps on one thread;
 *  - blk_swiglu_fast (fast numerics' SiLU with its own exp) against silu in double. */
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

static void check_fast_block_path(const float *x, kact_path path) {
    kact_fast b;
    kern_act a = {.x = x, .q = &b, .K = 128, .ncols = 1, .mode = KQ_FAST};
    kern_quantize_path(&a, path);
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

/* The portable block path, the AVX2 one (x86/act_avx2.c) where the host has AVX2 and the
 * AVX-512 one (x86/act_avx512.c) where it runs the AVX-512 table. */
static void check_fast_block(const float *x) {
    check_fast_block_path(x, KACT_PORTABLE);
#if defined(__x86_64__)
    if (kern_cpu_features() & KCPU_AVX2) check_fast_block_path(x, KACT_AVX2);
    if (kern_cpu_features() & KCPU_AVX512VNNI) check_fast_block_path(x, KACT_AVX512);
#endif
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

/* blk_prep_act against the scalar steps (the norm, blk_swiglu_fast in fast numerics, blk_swiglu
 * otherwise, then kern_quantize) for several column counts: N > 1 splits columns, N = 1 splits one
 * column into 128-value ranges (K = 384: ranges [0, 128) and [128, 384); K = 300: a partial last
 * block), in place and out of place. */
static void prep_act_case(tern_pool *pool, int K, int N, kern_numerics mode) {
    float *src = malloc(sizeof(float) * (size_t)N * K), *src2 = malloc(sizeof(float) * (size_t)N * K);
    float *w = malloc(sizeof(float) * (size_t)K), *up = malloc(sizeof(float) * (size_t)N * K);
    float *d1 = malloc(sizeof(float) * (size_t)N * K), *d2 = malloc(sizeof(float) * (size_t)N * K);
    for (int i = 0; i < N * K; i++) { src[i] = urand() * 4.0f; up[i] = urand(); }
    for (int i = 0; i < K; i++) w[i] = 1.0f + urand() * 0.5f;
    const size_t qb = kern_act_bytes(mode, K, N);
    void *q1 = malloc(qb ? qb : 1), *q2 = malloc(qb ? qb : 1);
    for (int op = BLK_PREP_NONE; op <= BLK_PREP_SWIGLU; op++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            /* scalar reference, one column at a time */
            for (int c = 0; c < N; c++) {
                if (op == BLK_PREP_NORM) blk_rmsnorm_mode(d1 + c * K, src + c * K, w, K, 1e-6f, mode);
                else if (op == BLK_PREP_SWIGLU && mode == KQ_FAST) blk_swiglu_fast(d1 + c * K, src + c * K, up + c * K, K);
                else if (op == BLK_PREP_SWIGLU) blk_swiglu(d1 + c * K, src + c * K, up + c * K, K);
                else memcpy(d1 + c * K, src + c * K, sizeof(float) * (size_t)K);
            }
            if (qb) {
                kern_act a1 = {.x = d1, .q = q1, .K = K, .ncols = N, .mode = mode};
                kern_quantize(&a1);
                memset(q2, 0xa5, qb);
            }
            memcpy(src2, src, sizeof(float) * (size_t)N * K);
            float *dst = inplace || op == BLK_PREP_NONE ? src2 : d2;
            kern_act a2;
            blk_prep_act(pool, &a2, op, src2, op == BLK_PREP_NORM ? w : up, dst, 1e-6f, K, N, q2, mode);
            assert_true(a2.x == dst && a2.ncols == N && a2.K == K && a2.mode == mode);
            assert_memory_equal(d1, dst, sizeof(float) * (size_t)N * K);
            if (qb) assert_memory_equal(q1, q2, qb);
            else assert_null(a2.q);
        }
    }
    free(src); free(src2); free(w); free(up); free(d1); free(d2); free(q1); free(q2);
}

/* blk_rmsnorm_mode: ggml and f32 are blk_rmsnorm bit for bit; fast (8 double lanes) is within
 * 2 ulp of it and of a double-precision RMSNorm, for lengths with and without a tail. */
static void test_rmsnorm_mode(void **st) {
    (void)st;
    static const int lens[] = {1, 7, 8, 64, 128, 300, 2048, 6144};
    float x[6144], w[6144], y0[6144], y1[6144];
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        const int n = lens[k];
        for (int i = 0; i < n; i++) { x[i] = urand() * (i % 5 == 0 ? 40.0f : 1.0f); w[i] = 1.0f + 0.3f * urand(); }
        blk_rmsnorm(y0, x, w, n, 1e-6f);
        for (int mode = KQ_GGML; mode <= KQ_F32; mode++) {
            blk_rmsnorm_mode(y1, x, w, n, 1e-6f, (kern_numerics)mode);
            assert_memory_equal(y0, y1, sizeof(float) * (size_t)n);
        }
        blk_rmsnorm_mode(y1, x, w, n, 1e-6f, KQ_FAST);
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
        const double sc = 1.0 / sqrt(ss / n + 1e-6);
        for (int i = 0; i < n; i++) {
            const double ref = x[i] * sc * w[i];
            assert_true(fabsf(y1[i] - y0[i]) <= 2.4e-7f * fabsf(y0[i]));
            assert_true(fabs((double)y1[i] - ref) <= 4e-7 * fabs(ref));
        }
    }
}

/* Fast numerics' RMSNorm, bit for bit against its documented order written out here in scalar
 * code: float squares summed in double over 8 lanes (lane l: i = l mod 8, increasing i), combined
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), scale = 1 / sqrtf(mean + eps), then
 * (x * scale) * w; lengths with every tail of the 4- and 8-wide loops. */
static void test_rmsnorm_fast_order(void **st) {
    (void)st;
    static const int lens[] = {1, 3, 4, 5, 7, 8, 9, 12, 13, 64, 127, 128, 300, 2048};
    float x[2048], w[2048], y[2048], ref[2048];
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        const int n = lens[k];
        for (int i = 0; i < n; i++) { x[i] = urand() * (i % 7 == 0 ? 50.0f : 1.5f); w[i] = 1.0f + 0.3f * urand(); }
        double a[8] = {0};
        for (int i = 0; i < n; i++) a[i % 8] += (double)(x[i] * x[i]);
        const double sum = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
        const float scale = 1.0f / sqrtf((float)(sum / n) + 1e-6f);
        for (int i = 0; i < n; i++) ref[i] = (x[i] * scale) * w[i];
        blk_rmsnorm_mode(y, x, w, n, 1e-6f, KQ_FAST);
        assert_memory_equal(ref, y, sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) ref[i] = x[i] * scale;
        blk_rmsnorm_mode(y, x, NULL, n, 1e-6f, KQ_FAST);
        assert_memory_equal(ref, y, sizeof(float) * (size_t)n);
    }
}

/* blk_rope bit for bit against the rotation written out in scalar code, NEOX pairs (i, i + n_rot/2)
 * and normal pairs (2i, 2i + 1), for rotated widths whose half is and is not a multiple of 4 and
 * heads wider than the rotated part (the rest untouched). */
static void test_rope_exact(void **st) {
    (void)st;
    static const int rots[][2] = {{128, 128}, {64, 128}, {8, 8}, {12, 16}, {6, 10}, {2, 4}};
    enum { NH = 3 };
    float x[NH * 128], ref[NH * 128], cs[128];
    for (size_t k = 0; k < sizeof rots / sizeof rots[0]; k++) {
        const int n_rot = rots[k][0], hd = rots[k][1], half = n_rot / 2;
        for (int i = 0; i < n_rot; i++) cs[i] = urand() * 1.2f;
        for (int type = 0; type < 2; type++) {
            const int rope_type = type ? ROPE_NEOX : ROPE_NORMAL;
            for (int i = 0; i < NH * hd; i++) x[i] = ref[i] = urand() * 3.0f;
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < half; i++) {
                    const int ia = h * hd + (type ? i : 2 * i), ib = h * hd + (type ? i + half : 2 * i + 1);
                    const float x0 = ref[ia], x1 = ref[ib], c = cs[2 * i], s = cs[2 * i + 1];
                    ref[ia] = x0 * c - x1 * s;
                    ref[ib] = x0 * s + x1 * c;
                }
            blk_rope(x, NH, hd, cs, n_rot, rope_type);
            assert_memory_equal(ref, x, sizeof(float) * (size_t)(NH * hd));
        }
    }
}

static void test_prep_act_threads(void **st) {
    (void)st;
    tern_pool *pool = NULL;
    tern_err err = {0};
    assert_int_equal(pool_init(&pool, 2, &err), TERN_OK);
    for (int mode = KQ_FAST; mode <= KQ_F32; mode++) {
        prep_act_case(pool, 384, 7, (kern_numerics)mode);
        prep_act_case(pool, 384, 1, (kern_numerics)mode);
        prep_act_case(pool, 300, 1, (kern_numerics)mode);
        prep_act_case(pool, 2048, 1, (kern_numerics)mode);
    }
    pool_free(pool);
}

/* blk_swiglu_fast against silu(x) * u in double: within 4e-7 relative of the exact product (the
 * exp is within ~2 ulp; one division, one multiply; below x = -87, where e^x < 2^-125, it gives 0
 * for |x e^x u| < 1e-30), over a wide range of x, plus the special
 * values (0, +-inf, large |x|), and the tail (n not a multiple of 8). */
static void test_swiglu_fast(void **st) {
    (void)st;
    enum { N = 4099 };
    float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N), *o = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) {
        g[i] = urand() * (i % 3 == 0 ? 30.0f : i % 3 == 1 ? 4.0f : 0.01f);
        u[i] = urand() * 2.0f;
    }
    g[0] = 0.0f; g[1] = -0.0f; g[2] = 100.0f; g[3] = -100.0f; g[4] = 88.0f; g[5] = -88.0f; g[6] = INFINITY;
    u[6] = 1.0f;
    blk_swiglu_fast(o, g, u, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        if (isinf(g[i])) { assert_true(o[i] == INFINITY); continue; }
        const double x = g[i], ref = x / (1.0 + exp(-x)) * (double)u[i];
        const double err = fabs((double)o[i] - ref), tol = 4e-7 * fabs(ref) + 1e-30;   /* x < -87: 0 for ~x e^x */
        if (err > tol) fail_msg("swiglu(%a, %a) = %a, expected %a", g[i], u[i], o[i], ref);
        if (fabs(ref) > 1e-30 && err / fabs(ref) > worst) worst = err / fabs(ref);
    }
    print_message("blk_swiglu_fast: max relative error %.3g\n", worst);
    /* in place (out == g) gives the same bits */
    float *g2 = malloc(sizeof(float) * N);
    memcpy(g2, g, sizeof(float) * N);
    blk_swiglu_fast(g2, g2, u, N);
    assert_memory_equal(g2, o, sizeof(float) * N);
    /* both copies give the same bits (the portable one is what aarch64 and TERN_ISA=ref run) */
    blk_swiglu_fast_generic(g2, g, u, N);
    assert_memory_equal(g2, o, sizeof(float) * N);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        blk_swiglu_fast_avx2(g2, g, u, N);
        assert_memory_equal(g2, o, sizeof(float) * N);
    }
#endif
    free(g); free(u); free(o); free(g2);
}

int suite_model_act(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_fast_exact),
        cmocka_unit_test(test_prep_act_threads),
        cmocka_unit_test(test_swiglu_fast),
        cmocka_unit_test(test_rmsnorm_mode),
        cmocka_unit_test(test_rmsnorm_fast_order),
        cmocka_unit_test(test_rope_exact),
    };
    TEST_RUN_SUITE("model_act", tests);
}
