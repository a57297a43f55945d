/* test_core.c: fp16/bf16 conversions (exhaustive against an independent double-based oracle),
 * checked arithmetic, and the Walsh-Hadamard reference (spec 4.2 worked example, naive O(n^2)). */
#include "test.h"

#include "core/core.h"
#include "core/fp16.h"
#include "model/hadamard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Independent oracle: value of an fp16 bit pattern computed with ldexp in double. */
static double fp16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp((double)(m + 1024), e - 25);
    return s ? -v : v;
}

static void test_fp16_decode_all(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = fp16_value((uint16_t)h);
        float got = fp16_to_f32((uint16_t)h);
        if (isnan(want)) { assert_true(isnan(got)); continue; }
        assert_true((double)got == want);
        if (want == 0) assert_int_equal(signbit(got) != 0, (h >> 15) != 0);
    }
}

static void test_fp16_encode_roundtrip_and_ties(void **state) {
    (void)state;
    /* every finite fp16 value round-trips */
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 31) == 31) continue;
        assert_int_equal(f32_to_fp16(fp16_to_f32((uint16_t)h)), h);
    }
    /* midpoints between consecutive positive fp16 values round to the even mantissa */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double lo = fp16_value((uint16_t)h), hi = fp16_value((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2);           /* exact in f32: fp16 has 11-bit mantissa */
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        assert_int_equal(f32_to_fp16(mid), want);
        assert_int_equal(f32_to_fp16(-mid), want | 0x8000);
    }
    assert_int_equal(f32_to_fp16(65519.0f), 0x7bff);
    assert_int_equal(f32_to_fp16(65520.0f), 0x7c00);
    assert_int_equal(f32_to_fp16(1e-9f), 0);
    assert_int_equal(f32_to_fp16(0.0999755859375f), 0x2e66);   /* spec 3.1 worked example */
}

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(f32_to_bf16(1.0f), 0x3f80);
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: rounds to even (1.0) */
    assert_int_equal(f32_to_bf16(1.00390625f), 0x3f80);
    assert_int_equal(f32_to_bf16(1.01171875f), 0x3f82);         /* tie 1+3*2^-8 -> 1+2^-6 */
    assert_true(bf16_to_f32(0xc000) == -2.0f);
    for (uint32_t h = 0; h < 65536; h += 7) {
        float f = bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(f32_to_bf16(f), h);
    }
}

static void test_checked_arith(void **state) {
    (void)state;
    uint64_t r = 7;
    assert_false(ck_mul_u64(UINT64_MAX / 2 + 1, 2, &r));
    assert_int_equal(r, 7);
    assert_true(ck_mul_u64(1u << 31, 1u << 31, &r));
    assert_true(r == (uint64_t)1 << 62);
    assert_false(ck_add_u64(UINT64_MAX, 1, &r));
    assert_true(ck_add_u64(UINT64_MAX - 1, 1, &r) && r == UINT64_MAX);
}

static void test_err_sticky(void **state) {
    (void)state;
    tern_err e = {0};
    assert_int_equal(tern_err_set(&e, TERN_E_FORMAT, "first %d", 1), TERN_E_FORMAT);
    assert_int_equal(tern_err_set(&e, TERN_E_IO, "second"), TERN_E_IO);
    assert_int_equal(e.code, TERN_E_FORMAT);
    assert_string_equal(e.msg, "first 1");
    assert_string_equal(tern_strerror(TERN_E_RANGE), "TERN_E_RANGE");
}

static void test_hadamard_worked_example(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4};
    const int8_t s[4] = {1, -1, 1, 1};
    had_rot(x, 4, 4, s);
    const float want[4] = {3, 1, -4, 2};                 /* spec 4.2 worked example */
    for (int i = 0; i < 4; i++) assert_true(x[i] == want[i]);
    had_rot_inv(x, 4, 4, s);
    const float back[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) assert_true(fabsf(x[i] - back[i]) < 1e-6f);
}

static void test_hadamard_vs_naive(void **state) {
    (void)state;
    enum { N = 64, K = 256 };
    float x[K], y[K];
    int8_t s[K];
    srand(1);
    for (int k = 0; k < K; k++) { x[k] = (float)rand() / RAND_MAX - 0.5f; s[k] = (rand() & 1) ? 1 : -1; }
    memcpy(y, x, sizeof x);
    had_rot(y, K, N, s);
    for (int b = 0; b < K / N; b++) {
        for (int i = 0; i < N; i++) {
            double acc = 0;
            for (int j = 0; j < N; j++) {
                int sign = (__builtin_popcount((unsigned)(i & j)) & 1) ? -1 : 1;
                acc += sign * (double)s[b * N + j] * x[b * N + j];
            }
            acc /= sqrt((double)N);
            assert_true(fabs(acc - y[b * N + i]) < 1e-5);
        }
    }
    had_rot_inv(y, K, N, s);
    for (int k = 0; k < K; k++) assert_true(fabsf(y[k] - x[k]) < 1e-5f);
}

int suite_core(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp16_decode_all),
        cmocka_unit_test(test_fp16_encode_roundtrip_and_ties),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_checked_arith),
        cmocka_unit_test(test_err_sticky),
        cmocka_unit_test(test_hadamard_worked_example),
        cmocka_unit_test(test_hadamard_vs_naive),
    };
    TEST_RUN_SUITE("core", tests);
}
