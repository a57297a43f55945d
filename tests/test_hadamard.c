/* test_hadamard.c: the vector FWHT and the fused RMSNorm + rotation give the same bits as the
 * scalar reference (had_fwht / had_rot after a plain RMSNorm written here from spec 5.3), the
 * V-head permutation of spec 5.5 (its worked example), and (when the GGUF reader is present)
 * every refusal of the prism.hadamard.* validation. */
#include "test.h"

#include "core/core.h"
#include "model/hadamard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t hrng = 12345;
static float hrand(void) {
    hrng = hrng * 1664525u + 1013904223u;
    return (float)((int32_t)(hrng >> 8) - (1 << 23)) / (float)(1 << 23) * 3.0f;
}

/* RMSNorm as spec 5.3 with the reference runtime's rounding points: squares summed in double,
 * mean rounded to float, r = 1/sqrtf(mean + eps), y = (x r) w. */
static void rmsnorm_ref(float *y, const float *x, const float *w, int64_t K, float eps) {
    double sum = 0;
    for (int64_t i = 0; i < K; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)K);
    const float r = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < K; i++) y[i] = (x[i] * r) * w[i];
}

static void test_fwht_blocks_bits(void **state) {
    (void)state;
    const int64_t ns[] = {8, 16, 64, 512, 1024, 4096};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        const int64_t n = ns[t], K = 3 * n;
        float *a = malloc(sizeof(float) * K), *b = malloc(sizeof(float) * K);
        for (int64_t i = 0; i < K; i++) a[i] = b[i] = hrand();
        for (int64_t o = 0; o < K; o += n) had_fwht(a + o, n);
        had_fwht_blocks(b, K, n);
        assert_memory_equal(a, b, sizeof(float) * K);
        free(a); free(b);
    }
}

static void test_rmsnorm_rot_fused_bits(void **state) {
    (void)state;
    const int64_t cases[][2] = {{5 * 1024, 1024}, {6 * 512, 512}, {4096, 4096}, {256, 64}, {256, 0}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int64_t K = cases[t][0], n = cases[t][1];
        float *x = malloc(sizeof(float) * K), *w = malloc(sizeof(float) * K);
        float *ref = malloc(sizeof(float) * K), *got = malloc(sizeof(float) * K);
        int8_t *s = malloc((size_t)K);
        for (int64_t i = 0; i < K; i++) {
            x[i] = hrand(); w[i] = 1.0f + 0.1f * hrand(); s[i] = (hrng >> 3) & 1 ? 1 : -1;
        }
        rmsnorm_ref(ref, x, w, K, 1e-6f);
        if (n) had_rot(ref, K, n, s);
        had_rmsnorm_rot(got, x, w, K, 1e-6f, n, n ? s : NULL);
        assert_memory_equal(ref, got, sizeof(float) * K);
        free(x); free(w); free(ref); free(got); free(s);
    }
}

static void test_gdn_v_grouped_permutation(void **state) {
    (void)state;
    enum { HK = 16, HV = 48, D = 4 };
    float src[HV * D], dst[HV * D];
    for (int i = 0; i < HV * D; i++) src[i] = (float)i;
    had_gdn_v_grouped(dst, src, HK, HV, D);
    /* spec 5.5 example: tiled head 17 (k = 1, r = 1) moves to grouped head 4 */
    for (int e = 0; e < D; e++) assert_true(dst[4 * D + e] == src[17 * D + e]);
    /* in general grouped head 3k + r <- tiled head k + 16 r; it is a permutation */
    for (int k = 0; k < HK; k++)
        for (int r = 0; r < 3; r++)
            for (int e = 0; e < D; e++) assert_true(dst[(3 * k + r) * D + e] == src[(k + HK * r) * D + e]);
}

int suite_hadamard(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fwht_blocks_bits),
        cmocka_unit_test(test_rmsnorm_rot_fused_bits),
        cmocka_unit_test(test_gdn_v_grouped_permutation),
    };
    TEST_RUN_SUITE("hadamard", tests);
}
