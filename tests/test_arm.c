/* test_arm.c: the ARM64 kernel paths (owner: arm). Runs on every host: on x86-64 it checks the
 * tables compiled there, under qemu-aarch64 (make test-aarch64) the neon, dotprod and i8mm
 * tables.
 * - dispatch: TERN_EXPECT_ISA (set by scripts/test_aarch64.sh per emulated CPU) must be the
 *   path the dispatcher chose; a path is forcible exactly when the CPU has its features.
 * - the base-3 threshold identity behind the PTQ1_0 decoder, for all 256 byte values;
 * - oracle: every table the host can run equals the scalar reference exactly: the int32 of every
 *   (row, unit) through the isum hook, and the float bits of every output; PQ2_0 (row pairs,
 *   code 3, N % 4 tails), PTQ1_0 direct (every byte value in every position) and transcoded,
 *   fast and ggml numerics, 1 to 64 columns (padded leftover tiles), denormal and zero scales,
 *   zero and +-127 activations, odd row splits;
 * - golden hashes: fixed-seed inputs whose outputs were hashed from the reference on x86-64;
 *   every table on both architectures must give those exact bits (x86 == ARM). */
#include "test.h"

#include "core/fp16.h"
#include "format/qtypes.h"
#include "kernels/kern_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixtures ---------------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {   /* xorshift64*: fixed sequences on every platform */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static float rng_unit(uint64_t *s) { return (float)(rng_next(s) >> 40) / 16777216.0f; }   /* [0, 1) */

enum { W_RANDOM, W_ZERO_SCALE, W_DENORMAL, W_CODE3_ALL, W_CONST };
enum { A_RANDOM, A_ZERO, A_PM127, A_CONST };

/* File-layout bytes of an (n_out, K) PQ2_0 or PTQ1_0 tensor (malloc'd). */
static uint8_t *make_weight(int type, int64_t K, int64_t N, int kind, uint64_t seed) {
    const int bb = type == QT_PQ2_0 ? 34 : 28;
    const int64_t nb = K / 128;
    uint8_t *d = malloc((size_t)(N * nb * bb));
    assert_non_null(d);
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int64_t i = 0; i < N * nb; i++) {
        uint8_t *blk = d + i * bb;
        uint16_t sc;
        switch (kind) {
        case W_ZERO_SCALE: sc = (i % 3 == 0) ? 0x0000 : (i % 3 == 1 ? 0x8000 : 0x2e66); break;
        case W_DENORMAL: sc = (uint16_t)(1 + rng_next(&s) % 0x3ff) | (uint16_t)(i & 1 ? 0x8000 : 0); break;
        default: sc = f32_to_fp16(0.001f + 0.2f * rng_unit(&s)); break;
        }
        uint8_t *code = type == QT_PQ2_0 ? blk + 2 : blk;
        const int ncode = type == QT_PQ2_0 ? 32 : 26;
        for (int j = 0; j < ncode; j++) {
            uint8_t v = (uint8_t)rng_next(&s);
            if (kind == W_CODE3_ALL && type == QT_PQ2_0) v = 0xff;
            if (kind == W_CONST) v = type == QT_PQ2_0 ? 0xaa : 0xff;   /* all +1 */
            /* PTQ1_0: every byte value in every position across the blocks */
            if (type == QT_PTQ1_0 && kind == W_RANDOM) v = (uint8_t)(i * 7 + j * 13 + (int64_t)(i / 256));
            code[j] = v;
        }
        const int off = type == QT_PQ2_0 ? 0 : 26;
        blk[off] = (uint8_t)(sc & 0xff);
        blk[off + 1] = (uint8_t)(sc >> 8);
    }
    return d;
}

static float *make_act(int64_t K, int ncols, int kind, uint64_t seed) {
    float *x = malloc((size_t)(K * ncols) * sizeof *x);
    assert_non_null(x);
    uint64_t s = seed * 0xD1B54A32D192ED03ULL + 7;
    for (int64_t i = 0; i < K * ncols; i++) {
        switch (kind) {
        case A_ZERO: x[i] = 0.0f; break;
        case A_PM127: x[i] = (i % 3 == 0) ? -1.0f : 1.0f; break;   /* every q = +-127 */
        case A_CONST: x[i] = 0.25f; break;
        default: x[i] = (rng_unit(&s) - 0.5f) * (1.0f + 10.0f * rng_unit(&s)); break;
        }
    }
    return x;
}

typedef struct {
    kern_w w;
    uint8_t *bytes;
    kern_act a;
    float *x;
    int64_t nu;
} case_t;

static void case_init(case_t *c, int type, unsigned flags, int64_t K, int64_t N, int wkind, int ncols, int akind,
                      kern_numerics mode, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->bytes = make_weight(type, K, N, wkind, seed);
    tern_err err = {0};
    assert_int_equal(kern_w_init_ex(&c->w, "test", type, c->bytes, K, N, flags, &err), TERN_OK);
    c->x = make_act(K, ncols, akind, seed + 1);
    c->a.x = c->x;
    c->a.K = K;
    c->a.ncols = ncols;
    c->a.mode = mode;
    c->a.q = malloc(kern_act_bytes(mode, K, ncols));
    assert_non_null(c->a.q);
    kern_quantize(&c->a);
    c->nu = K / (mode == KQ_GGML ? 32 : 128);
}

static void case_free(case_t *c) {
    kern_w_free(&c->w);
    free(c->bytes);
    free(c->x);
    free(c->a.q);
}

/* A float-weight case (F32, F16 or BF16): weights from bits[] (f32 bit patterns, or 16-bit
 * patterns stored as given for F16/BF16), activations x (n_cols x K, copied). */
static void case_init_float(case_t *c, int type, int64_t K, int64_t N, const uint32_t *bits, int ncols,
                            const float *x, kern_numerics mode) {
    memset(c, 0, sizeof *c);
    const size_t es = type == QT_F32 ? 4 : 2;
    c->bytes = malloc((size_t)(K * N) * es);
    assert_non_null(c->bytes);
    for (int64_t i = 0; i < K * N; i++) {
        if (es == 4) memcpy(c->bytes + 4 * i, &bits[i], 4);
        else { c->bytes[2 * i] = (uint8_t)bits[i]; c->bytes[2 * i + 1] = (uint8_t)(bits[i] >> 8); }
    }
    tern_err err = {0};
    assert_int_equal(kern_w_init_ex(&c->w, "test", type, c->bytes, K, N, 0, &err), TERN_OK);
    c->x = malloc((size_t)(K * ncols) * sizeof *c->x);
    assert_non_null(c->x);
    memcpy(c->x, x, (size_t)(K * ncols) * sizeof *c->x);
    c->a.x = c->x;
    c->a.K = K;
    c->a.ncols = ncols;
    c->a.mode = mode;
    c->a.q = mode == KQ_F32 ? NULL : malloc(kern_act_bytes(mode, K, ncols));
    if (mode != KQ_F32) { assert_non_null(c->a.q); kern_quantize(&c->a); }
    c->nu = 0;
}

/* Random weights as bit patterns of `type` (values in about [-1, 1]) and activations. */
static uint32_t *rand_float_bits(int type, int64_t n, uint64_t seed) {
    uint32_t *b = malloc((size_t)n * sizeof *b);
    assert_non_null(b);
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 3;
    for (int64_t i = 0; i < n; i++) {
        const float v = (rng_unit(&s) - 0.5f) * 2.0f;
        b[i] = type == QT_F32 ? tern_f32_bits(v) : type == QT_F16 ? f32_to_fp16(v) : f32_to_bf16(v);
    }
    return b;
}

static bool runnable(const kern_table *t) { return (t->needs & kern_cpu_features()) == t->needs; }

/* Runs table t over rows [0, N) split at `split` (a multiple of 4, or 0 = one call). */
static void run_table(const kern_table *t, const case_t *c, float *y, int32_t *isum, int64_t split) {
    const int64_t N = c->w.n_out;
    if (split > 0 && split < N) {
        kern_matmul_table(t, &c->w, &c->a, y, N, 0, split, isum);
        kern_matmul_table(t, &c->w, &c->a, y, N, split, N, isum);
    } else {
        kern_matmul_table(t, &c->w, &c->a, y, N, 0, N, isum);
    }
}

/* Every runnable table vs ref on one case: exact int32 per (row, unit) and identical float bits;
 * a NaN output must be NaN in both, its payload is not compared: which of two NaN operands an add
 * returns depends on the operand order the compiler picks for a commutative add (and x86 and ARM
 * make different default NaNs), so payloads are no part of the cross-ISA contract (the AVX2
 * register lane tree gives another payload than ref's scalar tree on a row of F16 NaNs). */
static int check_case(const case_t *c, const char *what) {
    const int64_t N = c->w.n_out, n_y = N * c->a.ncols, n_is = n_y * c->nu;   /* float weights: nu = 0 */
    float *y_ref = malloc((size_t)n_y * sizeof(float)), *y = malloc((size_t)n_y * sizeof(float));
    int32_t *is_ref = malloc((size_t)(n_is + 1) * sizeof(int32_t)), *is = malloc((size_t)(n_is + 1) * sizeof(int32_t));
    assert_true(y_ref && y && is_ref && is);
    if (!c->nu) { free(is_ref); free(is); is_ref = is = NULL; }
    run_table(&kern_table_ref, c, y_ref, is_ref, 0);
    int n_tables = 0;
    for (const kern_table *const *tp = kern_tables; *tp; tp++) {
        if (*tp == &kern_table_ref || !runnable(*tp)) continue;
        n_tables++;
        for (int split = 0; split < 2; split++) {
            memset(y, 0xff, (size_t)n_y * sizeof(float));
            if (is) memset(is, 0x7f, (size_t)n_is * sizeof(int32_t));
            run_table(*tp, c, y, is, split ? 4 * ((N / 4 + 1) / 2) : 0);
            for (int64_t i = 0; i < n_is; i++)
                if (is[i] != is_ref[i])
                    fail_msg("%s: %s: isum[col %lld, row %lld, unit %lld] = %d, ref %d", (*tp)->name, what,
                             (long long)(i / c->nu / N), (long long)(i / c->nu % N), (long long)(i % c->nu), is[i],
                             is_ref[i]);
            for (int64_t i = 0; i < n_y; i++)
                if (tern_f32_bits(y[i]) != tern_f32_bits(y_ref[i]) && !(isnan(y[i]) && isnan(y_ref[i])))
                    fail_msg("%s: %s: y[col %lld, row %lld] = %.9g (0x%08x), ref %.9g (0x%08x)", (*tp)->name, what,
                             (long long)(i / N), (long long)(i % N), (double)y[i], tern_f32_bits(y[i]),
                             (double)y_ref[i], tern_f32_bits(y_ref[i]));
        }
    }
    free(y_ref); free(y); free(is_ref); free(is);
    return n_tables;
}

/* ---- tests ---------------------------------------------------------------------------------------- */

static void test_arm_dispatch(void **state) {
    (void)state;
    const char *expect = getenv("TERN_EXPECT_ISA");
    if (expect && *expect) assert_string_equal(kern_isa(), expect);
    const char *active = kern_isa();
    for (const kern_table *const *tp = kern_tables; *tp; tp++) {
        tern_err err = {0};
        const int rc = kern_force_isa((*tp)->name, &err);
        if (runnable(*tp)) assert_int_equal(rc, TERN_OK);
        else assert_int_equal(rc, TERN_E_UNSUPPORTED);
    }
    tern_err err = {0};
    assert_int_equal(kern_force_isa(active, &err), TERN_OK);   /* restore */
    assert_string_equal(kern_isa(), active);
#if defined(__aarch64__)
    /* The ARM tables are compiled in, worst -> best, and NEON is always there on ARMv8-A. */
    const char *names[] = {"neon", "dotprod", "i8mm"};
    for (int i = 0; i < 3; i++) {
        bool found = false;
        for (const kern_table *const *tp = kern_tables; *tp; tp++) found |= strcmp((*tp)->name, names[i]) == 0;
        assert_true(found);
    }
    assert_true(kern_cpu_features() & KCPU_NEON);
    if (kern_cpu_features() & KCPU_I8MM) assert_true(kern_cpu_features() & KCPU_DOTPROD);
#endif
}

static void test_arm_b3_thresholds(void **state) {
    (void)state;
    /* digit u = (3v) >> 8 equals the number of thresholds (86, 171) that v reaches */
    for (int v = 0; v < 256; v++) assert_int_equal((3 * v) >> 8, (v >= 86) + (v >= 171));
    /* and the 8-bit multiply-by-3^n walk reproduces kern_b3_digit for every byte and digit */
    for (int b = 0; b < 256; b++) {
        uint8_t v = (uint8_t)b;
        for (int n = 0; n < 5; n++) {
            assert_int_equal((v >= 86) + (v >= 171), kern_b3_digit((uint8_t)b, n));
            v = (uint8_t)(v * 3);
        }
    }
}

static void test_arm_oracle_pq2_0(void **state) {
    (void)state;
    static const int ncols_list[] = {1, 2, 3, 4, 5, 7, 8, 16, 64};
    static const int64_t rows_list[] = {4, 8, 12, 13, 15};
    char what[160];
    int n = 0;
    for (int mode = KQ_FAST; mode <= KQ_GGML; mode++)
        for (size_t ic = 0; ic < sizeof ncols_list / sizeof *ncols_list; ic++)
            for (size_t ir = 0; ir < sizeof rows_list / sizeof *rows_list; ir++) {
                const int64_t K = 256 + 128 * (int64_t)(ir % 3);
                case_t c;
                case_init(&c, QT_PQ2_0, 0, K, rows_list[ir], W_RANDOM, ncols_list[ic], A_RANDOM, (kern_numerics)mode,
                          100 + ic * 10 + ir);
                snprintf(what, sizeof what, "PQ2_0 %s K=%lld N=%lld ncols=%d", mode ? "ggml" : "fast", (long long)K,
                         (long long)rows_list[ir], ncols_list[ic]);
                n += check_case(&c, what);
                case_free(&c);
            }
    /* the K list, the big ones with few rows and columns */
    static const int64_t K_list[] = {128, 512, 1024, 5120, 17408};
    for (int mode = KQ_FAST; mode <= KQ_GGML; mode++)
        for (size_t ik = 0; ik < sizeof K_list / sizeof *K_list; ik++)
            for (int nc = 1; nc <= 5; nc += 4) {
                case_t c;
                const int64_t N = K_list[ik] >= 5120 ? 5 : 13;
                case_init(&c, QT_PQ2_0, 0, K_list[ik], N, W_RANDOM, nc, A_RANDOM, (kern_numerics)mode, 7 + ik);
                snprintf(what, sizeof what, "PQ2_0 %s K=%lld N=%lld ncols=%d", mode ? "ggml" : "fast",
                         (long long)K_list[ik], (long long)N, nc);
                n += check_case(&c, what);
                case_free(&c);
            }
    print_message("arm: PQ2_0 oracle: %d (table, case) pairs checked\n", n);
}

static void test_arm_oracle_edges(void **state) {
    (void)state;
    /* weight kinds x activation kinds, both types, both modes, matvec and a padded tile */
    static const int wkinds[] = {W_ZERO_SCALE, W_DENORMAL, W_CODE3_ALL, W_CONST, W_RANDOM};
    static const int akinds[] = {A_ZERO, A_PM127, A_CONST, A_RANDOM};
    char what[160];
    for (int type = 0; type < 2; type++)
        for (int mode = KQ_FAST; mode <= KQ_GGML; mode++)
            for (size_t iw = 0; iw < sizeof wkinds / sizeof *wkinds; iw++)
                for (size_t ia = 0; ia < sizeof akinds / sizeof *akinds; ia++)
                    for (int nc = 1; nc <= 3; nc += 2) {
                        const int qt = type ? QT_PTQ1_0 : QT_PQ2_0;
                        case_t c;
                        case_init(&c, qt, 0, 256, 9, wkinds[iw], nc, akinds[ia], (kern_numerics)mode, iw * 5 + ia);
                        snprintf(what, sizeof what, "%s %s wkind=%d akind=%d ncols=%d", type ? "PTQ1_0" : "PQ2_0",
                                 mode ? "ggml" : "fast", wkinds[iw], akinds[ia], nc);
                        check_case(&c, what);
                        case_free(&c);
                    }
}

static void test_arm_oracle_ptq1_0(void **state) {
    (void)state;
    static const unsigned flags[] = {KW_F_PTQ1_0_DIRECT, KW_F_PTQ1_0_TRANSCODE};
    static const int ncols_list[] = {1, 2, 3, 4, 5, 8, 16};
    char what[160];
    for (int f = 0; f < 2; f++)
        for (int mode = KQ_FAST; mode <= KQ_GGML; mode++)
            for (size_t ic = 0; ic < sizeof ncols_list / sizeof *ncols_list; ic++) {
                /* 14 rows x 20 blocks = 280 blocks: every byte value reaches every qs/qh position */
                case_t c;
                case_init(&c, QT_PTQ1_0, flags[f], 2560, 14, W_RANDOM, ncols_list[ic], A_RANDOM, (kern_numerics)mode,
                          300 + ic);
                snprintf(what, sizeof what, "PTQ1_0 %s %s ncols=%d", f ? "transcode" : "direct", mode ? "ggml" : "fast",
                         ncols_list[ic]);
                check_case(&c, what);
                case_free(&c);
            }
}

/* Float weights (F32, F16, BF16; every numerics mode: the same float path): every table equals
 * ref bit for bit over K with and without a K % 16 tail (K < 16: tail only), 1 to 16 columns (the
 * 2 x 2 / 2 x 1 tiles and their odd leftovers), odd row counts and row splits (the far-apart row
 * pairs of a split range). */
static void test_arm_oracle_float(void **state) {
    (void)state;
    static const int types[] = {QT_F32, QT_F16, QT_BF16};
    static const int64_t K_list[] = {1, 15, 16, 17, 48, 172, 1040};
    static const int64_t N_list[] = {1, 2, 3, 8, 13};
    static const int nc_list[] = {1, 2, 3, 4, 5, 7, 16};
    char what[160];
    int n = 0;
    for (int ti = 0; ti < 3; ti++)
        for (size_t ik = 0; ik < sizeof K_list / sizeof *K_list; ik++)
            for (size_t in = 0; in < sizeof N_list / sizeof *N_list; in++) {
                const int64_t K = K_list[ik], N = N_list[in];
                const int nc = nc_list[(ik + in + (size_t)ti) % (sizeof nc_list / sizeof *nc_list)];
                const kern_numerics mode = (kern_numerics)((ik + in) % 3);
                uint32_t *wb = rand_float_bits(types[ti], K * N, 500 + ik * 10 + in);
                float *x = make_act(K, nc, A_RANDOM, 600 + ik + in);
                case_t c;
                case_init_float(&c, types[ti], K, N, wb, nc, x, mode);
                snprintf(what, sizeof what, "type %d mode %d K=%lld N=%lld ncols=%d", types[ti], (int)mode, (long long)K,
                         (long long)N, nc);
                n += check_case(&c, what);
                case_free(&c);
                free(wb);
                free(x);
            }
    print_message("arm: float oracle: %d (table, case) pairs checked\n", n);
}

/* Float edge values. (1) Every 16-bit pattern as an F16 and as a BF16 weight (subnormals, +-0,
 * +-inf, NaNs): 4096 rows of 16, two columns of finite activations, so a wrong conversion of any
 * pattern changes its row. (2) Special activations against finite weights, one kind per column:
 * +-0 and f32 subnormals, bf16 rounding ties (to even), values that round to bf16 infinity, quiet
 * and signalling NaNs with payloads (the bf16 rounding quiets them), infinities. (3) A row whose
 * products all underflow to -0: the result is -0, also with a K % 16 tail (a zero-padded tail would
 * turn those lanes into +0: fmaf(0, 0, -0) = +0), checked against the value, not only ref. */
static void test_arm_float_edges(void **state) {
    (void)state;
    char what[160];
    /* (1) */
    {
        const int64_t K = 16, N = 4096;
        uint32_t *wb = malloc((size_t)(K * N) * sizeof *wb);
        assert_non_null(wb);
        for (int64_t i = 0; i < K * N; i++) wb[i] = (uint32_t)i;
        float *x = make_act(K, 2, A_RANDOM, 77);
        for (int t = 0; t < 2; t++) {
            case_t c;
            case_init_float(&c, t ? QT_BF16 : QT_F16, K, N, wb, 2, x, KQ_F32);
            snprintf(what, sizeof what, "every 16-bit pattern as %s", t ? "BF16" : "F16");
            check_case(&c, what);
            case_free(&c);
        }
        free(wb);
        free(x);
    }
    /* (2) */
    {
        const int64_t K = 40, N = 5;
        const int nc = 6;
        static const uint32_t special[6][4] = {
            {0x80000000u, 0x00000000u, 0x00000001u, 0x807fffffu},   /* -0, +0, subnormals */
            {0x3f808000u, 0x3f818000u, 0xbf808001u, 0x00008000u},   /* bf16 ties: even down, even up; above; a subnormal tie */
            {0x7f7fffffu, 0xff7f8000u, 0x7f7f7fffu, 0x7f7f8001u},   /* round to bf16 +-inf, or stay finite */
            {0x7fc12345u, 0xffc00001u, 0x7fffffffu, 0x7fc00000u},   /* quiet NaNs with payloads */
            {0x7f800001u, 0xff80ffffu, 0x7fa00000u, 0x7f80ffffu},   /* signalling NaNs */
            {0x7f800000u, 0xff800000u, 0x7f800000u, 0x3f800000u},   /* infinities */
        };
        float *x = make_act(K, nc, A_RANDOM, 91);
        for (int col = 0; col < nc; col++)
            for (int j = 0; j < 4; j++) {   /* positions in the vector body and in the tail (K % 16 = 8) */
                const int64_t k = (int64_t)col * K + (j < 3 ? 5 + 11 * j : 37);
                x[k] = tern_bits_f32(special[col][j]);
            }
        for (int ti = 0; ti < 3; ti++) {
            const int type = ti == 0 ? QT_F32 : ti == 1 ? QT_F16 : QT_BF16;
            uint32_t *wb = rand_float_bits(type, K * N, 31 + ti);
            case_t c;
            case_init_float(&c, type, K, N, wb, nc, x, KQ_FAST);
            snprintf(what, sizeof what, "special activations, type %d", type);
            check_case(&c, what);
            case_free(&c);
            free(wb);
        }
        free(x);
    }
    /* (3) -tiny * tiny underflows to -0 in every lane; the lanes start at +0 and fmaf(-tiny, tiny,
     * +0) = -0 (round to nearest of a negative result below the smallest subnormal) */
    static const int64_t K3[] = {16, 20, 172};
    for (int ti = 0; ti < 3; ti++)
        for (int ik = 0; ik < 3; ik++) {
            const int type = ti == 0 ? QT_F32 : ti == 1 ? QT_F16 : QT_BF16;
            const int64_t K = K3[ik], N = 3;
            /* the smallest negative subnormal weight of each type, times an f32 subnormal */
            const uint32_t wneg = type == QT_F32 ? 0x80000001u : 0x8001u;
            uint32_t *wb = malloc((size_t)(K * N) * sizeof *wb);
            float *x = malloc((size_t)K * sizeof *x);
            assert_true(wb && x);
            for (int64_t i = 0; i < K * N; i++) wb[i] = wneg;
            /* 2^-149 (BF16: 2^-133, the smallest value that survives the rounding of x to bf16) */
            for (int64_t k = 0; k < K; k++) x[k] = tern_bits_f32(type == QT_BF16 ? 0x00010000u : 0x00000001u);
            case_t c;
            case_init_float(&c, type, K, N, wb, 1, x, KQ_GGML);
            for (const kern_table *const *tp = kern_tables; *tp; tp++) {
                if (!runnable(*tp)) continue;
                float y[3];
                kern_matmul_table(*tp, &c.w, &c.a, y, N, 0, N, NULL);
                for (int r = 0; r < N; r++)
                    if (tern_f32_bits(y[r]) != 0x80000000u)
                        fail_msg("%s: type %d K=%lld row %d: 0x%08x, expected -0 (0x80000000)", (*tp)->name, type,
                                 (long long)K, r, tern_f32_bits(y[r]));
            }
            case_free(&c);
            free(wb);
            free(x);
        }
}

/* FNV-1a over the output bits and the isums of a fixed case. */
static uint64_t hash_case(const kern_table *t, const case_t *c) {
    const int64_t N = c->w.n_out, n_y = N * c->a.ncols, n_is = n_y * c->nu;
    float *y = malloc((size_t)n_y * sizeof(float));
    int32_t *is = n_is ? malloc((size_t)n_is * sizeof(int32_t)) : NULL;
    assert_true(y && (is || !n_is));
    run_table(t, c, y, is, 0);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n_y; i++) {
        const uint32_t u = tern_f32_bits(y[i]);
        for (int k = 0; k < 4; k++) { h ^= (u >> (8 * k)) & 0xff; h *= 0x100000001b3ULL; }
    }
    for (int64_t i = 0; i < n_is; i++) {
        const uint32_t u = (uint32_t)is[i];
        for (int k = 0; k < 4; k++) { h ^= (u >> (8 * k)) & 0xff; h *= 0x100000001b3ULL; }
    }
    free(y);
    free(is);
    return h;
}

static void test_arm_golden_hash(void **state) {
    (void)state;
    /* Hashes of the scalar reference's outputs on x86-64 (gcc, -ffp-contract=off) for these
     * fixed-seed cases; every table on every architecture must reproduce them bit for bit. */
    static const struct {
        int type;
        unsigned flags;
        int64_t K, N;
        int ncols;
        kern_numerics mode;
        uint64_t hash;
    } golden[] = {
        {QT_PQ2_0, 0, 1024, 13, 1, KQ_FAST, 0x7ecc1283507ffef9ULL},
        {QT_PQ2_0, 0, 1024, 13, 7, KQ_FAST, 0xa1365cfc1b2a7168ULL},
        {QT_PQ2_0, 0, 512, 10, 3, KQ_GGML, 0x2e9f74958767846dULL},
        {QT_PTQ1_0, KW_F_PTQ1_0_DIRECT, 768, 6, 5, KQ_FAST, 0x13623de14ea61c0bULL},
        {QT_PTQ1_0, KW_F_PTQ1_0_TRANSCODE, 768, 6, 2, KQ_GGML, 0xbb64871c8dad88fdULL},
    };
    for (size_t i = 0; i < sizeof golden / sizeof *golden; i++) {
        case_t c;
        case_init(&c, golden[i].type, golden[i].flags, golden[i].K, golden[i].N, W_RANDOM, golden[i].ncols, A_RANDOM,
                  golden[i].mode, 4242 + i);
        for (const kern_table *const *tp = kern_tables; *tp; tp++) {
            if (!runnable(*tp)) continue;
            const uint64_t h = hash_case(*tp, &c);
            if (h != golden[i].hash)
                fail_msg("golden case %zu: table %s hash 0x%016llx, expected 0x%016llx", i, (*tp)->name,
                         (unsigned long long)h, (unsigned long long)golden[i].hash);
        }
        case_free(&c);
    }
    /* float weights, the same way (random finite values; K % 16 = 12, odd rows, 5 columns) */
    static const struct {
        int type;
        int64_t K, N;
        int ncols;
        kern_numerics mode;
        uint64_t hash;
    } fgolden[] = {
        {QT_F32, 172, 13, 5, KQ_F32, 0x87dcef28b5098270ULL},
        {QT_F16, 172, 13, 5, KQ_FAST, 0x6f7aa2de69652c88ULL},
        {QT_BF16, 172, 13, 5, KQ_GGML, 0xd75810c1111eaff1ULL},
        {QT_BF16, 1040, 7, 1, KQ_F32, 0x537907db24b10467ULL},
    };
    for (size_t i = 0; i < sizeof fgolden / sizeof *fgolden; i++) {
        uint32_t *wb = rand_float_bits(fgolden[i].type, fgolden[i].K * fgolden[i].N, 4300 + i);
        float *x = make_act(fgolden[i].K, fgolden[i].ncols, A_RANDOM, 4400 + i);
        case_t c;
        case_init_float(&c, fgolden[i].type, fgolden[i].K, fgolden[i].N, wb, fgolden[i].ncols, x, fgolden[i].mode);
        for (const kern_table *const *tp = kern_tables; *tp; tp++) {
            if (!runnable(*tp)) continue;
            const uint64_t h = hash_case(*tp, &c);
            if (h != fgolden[i].hash)
                fail_msg("float golden case %zu: table %s hash 0x%016llx, expected 0x%016llx", i, (*tp)->name,
                         (unsigned long long)h, (unsigned long long)fgolden[i].hash);
        }
        case_free(&c);
        free(wb);
        free(x);
    }
}

int suite_arm(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arm_dispatch),
        cmocka_unit_test(test_arm_b3_thresholds),
        cmocka_unit_test(test_arm_oracle_pq2_0),
        cmocka_unit_test(test_arm_oracle_edges),
        cmocka_unit_test(test_arm_oracle_ptq1_0),
        cmocka_unit_test(test_arm_oracle_float),
        cmocka_unit_test(test_arm_float_edges),
        cmocka_unit_test(test_arm_golden_hash),
    };
    TEST_RUN_SUITE("arm", tests);
}
