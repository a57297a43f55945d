/* test_kernels_wide.c: the wide (prefill) matmul path of every ISA table the host runs, against
 * the scalar reference, bit for bit. The shapes are chosen for the AVX2 wide kernel's loop
 * structure (x86/avx2.c, "wide matmul"): row chunks of 32 groups (128 rows), K chunks of 4
 * blocks, tile groups of 8 tiles of 8 columns, a padded last tile (5-7 columns) or narrow
 * leftovers (1-4), N % 4 tail rows. Each case is checked three ways: the int32 of every
 * (row, block) through the test hook, the float bits with the hook, and the float bits WITHOUT
 * the hook (the production path, which the hook-based tests of test_kernels.c do not run for
 * batches wider than 7). Independent values: all-code-3 weights against q = +-127 give
 * isum = +-2 * 127 * 128 per block (the int16 worst case of vpmaddubsw). */
#include "test.h"

#include "core/core.h"
#include "core/fp16.h"
#include "kernels/kern_impl.h"
#include "runtime/pool.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rs = 7;
static uint32_t rnd32(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

enum { W_RANDOM, W_ALL3, W_TERNARY };
enum { A_RANDOM, A_PLUS, A_MINUS, A_PM };

/* N rows x K of PQ2_0 in file layout: per block fp16 d (0.004 .. 0.03) + 32 code bytes. */
static uint8_t *wide_weights(int64_t K, int64_t N, int wp, size_t *bytes) {
    *bytes = (size_t)(K / 128) * 34 * (size_t)N;
    uint8_t *p = malloc(*bytes);
    assert_non_null(p);
    for (size_t o = 0; o < *bytes; o += 34) {
        const uint16_t d = (uint16_t)(0x1c00 + rnd32() % 0x0c00);
        p[o] = (uint8_t)d; p[o + 1] = (uint8_t)(d >> 8);
        for (int j = 0; j < 32; j++) {
            uint8_t b = (uint8_t)rnd32();
            if (wp == W_ALL3) b = 0xff;
            if (wp == W_TERNARY) b = (uint8_t)((rnd32() % 3) | (rnd32() % 3) << 2 | (rnd32() % 3) << 4 | (rnd32() % 3) << 6);
            p[o + 2 + j] = b;
        }
    }
    return p;
}

static float *wide_act(int64_t K, int ncols, int ap) {
    float *x = malloc(sizeof(float) * (size_t)(K * ncols));
    assert_non_null(x);
    for (int64_t i = 0; i < K * ncols; i++) {
        const float r = (float)(rnd32() % 20001) / 10000.0f - 1.0f;
        x[i] = ap == A_PLUS ? 1.0f : ap == A_MINUS ? -1.0f : ap == A_PM ? ((i % 5) < 2 ? -1.0f : 1.0f) : r * (1 + (float)(i % 3));
    }
    return x;
}

typedef struct {
    int64_t K, N; int ncols;
    uint8_t *data;
    kern_w w;
    float *x; void *q;
    kern_act a;
    float *y0;         /* ref */
    int32_t *i0;       /* ref isum */
} wide_fx;

static void wfx_make(wide_fx *f, int64_t K, int64_t N, int ncols, int wp, int ap) {
    memset(f, 0, sizeof *f);
    f->K = K; f->N = N; f->ncols = ncols;
    size_t bytes;
    f->data = wide_weights(K, N, wp, &bytes);
    tern_err err = {0};
    assert_int_equal(kern_w_init(&f->w, "wide", QT_PQ2_0, f->data, K, N, &err), TERN_OK);
    assert_int_equal(f->w.layout, KW_ROWPAIR);
    f->x = wide_act(K, ncols, ap);
    f->q = tern_alloc_aligned(kern_act_bytes(KQ_FAST, K, ncols));
    assert_non_null(f->q);
    f->a = (kern_act){.x = f->x, .q = f->q, .K = K, .ncols = ncols, .mode = KQ_FAST};
    kern_quantize(&f->a);
    const size_t ny = (size_t)(N * ncols), ni = ny * (size_t)(K / 128);
    f->y0 = malloc(ny * 4);
    f->i0 = malloc(ni * 4);
    assert_non_null(f->y0);
    assert_non_null(f->i0);
    kern_matmul_table(&kern_table_ref, &f->w, &f->a, f->y0, N, 0, N, f->i0);
}

static void wfx_free(wide_fx *f) {
    kern_w_free(&f->w);
    tern_free_aligned(f->q);
    free(f->x); free(f->data); free(f->y0); free(f->i0);
}

static bool host_runs(const kern_table *t) { return (t->needs & kern_cpu_features()) == t->needs; }

/* Every runnable table equals ref on f: isum, y with the hook, y without it. */
static int wfx_check(const wide_fx *f) {
    const size_t ny = (size_t)(f->N * f->ncols), ni = ny * (size_t)(f->K / 128);
    float *y = malloc(ny * 4);
    int32_t *is = malloc(ni * 4);
    assert_non_null(y);
    assert_non_null(is);
    int n = 0;
    for (int ti = 0; kern_tables[ti]; ti++) {
        const kern_table *t = kern_tables[ti];
        if (t == &kern_table_ref || !host_runs(t) || !t->mm[KT_PQ2_0][KQ_FAST]) continue;
        for (int hook = 0; hook < 2; hook++) {
            memset(y, 0xff, ny * 4);
            memset(is, 0xa5, ni * 4);
            kern_matmul_table(t, &f->w, &f->a, y, f->N, 0, f->N, hook ? is : NULL);
            if (hook)
                for (size_t i = 0; i < ni; i++)
                    if (is[i] != f->i0[i])
                        fail_msg("%s K=%lld N=%lld ncols=%d: isum[%zu] %d != ref %d", t->name, (long long)f->K, (long long)f->N,
                                 f->ncols, i, is[i], f->i0[i]);
            for (size_t i = 0; i < ny; i++)
                if (tern_f32_bits(y[i]) != tern_f32_bits(f->y0[i]))
                    fail_msg("%s K=%lld N=%lld ncols=%d hook=%d: y[%zu] (column %zu row %zu) %.9g != ref %.9g", t->name,
                             (long long)f->K, (long long)f->N, f->ncols, hook, i, i / (size_t)f->N, i % (size_t)f->N, y[i], f->y0[i]);
        }
        n++;
    }
    free(y); free(is);
    return n;
}

/* Column counts around every tile boundary; 265 rows = 2 row chunks + 2 groups + 1 tail row;
 * K = 768 = one K chunk of 4 blocks + a partial one of 2. */
static void test_wide_shapes(void **state) {
    (void)state;
    rs = 101;
    static const int cols[] = {5, 6, 7, 8, 9, 12, 13, 16, 17, 21, 64, 66, 69, 72, 77, 130};
    int n = 0;
    for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
        wide_fx f;
        wfx_make(&f, 768, 265, cols[ci], ci % 2 ? W_TERNARY : W_RANDOM, A_RANDOM);
        n += wfx_check(&f);
        wfx_free(&f);
    }
    /* K a multiple of the chunk, one group, and K = 128 (one block) */
    static const int64_t shapes[][3] = {{512, 4, 64}, {128, 132, 9}, {1024, 8, 72}, {5120, 12, 16}};
    for (size_t si = 0; si < 4; si++) {
        wide_fx f;
        wfx_make(&f, shapes[si][0], shapes[si][1], (int)shapes[si][2], W_RANDOM, A_RANDOM);
        n += wfx_check(&f);
        wfx_free(&f);
    }
    assert_true(n > 0);   /* at least one SIMD table ran (ref alone checks nothing here) */
}

/* The int16 worst case: every code 3 (t = +2) against q = +127 / -127 (and a mix): the isum of
 * every (row, block) is known without ref: +-2 * 127 * 128 = +-32512 for the constant columns. */
static void test_wide_code3_bound(void **state) {
    (void)state;
    rs = 102;
    static const int aps[] = {A_PLUS, A_MINUS, A_PM};
    for (int k = 0; k < 3; k++) {
        wide_fx f;
        wfx_make(&f, 768, 136, 24, W_ALL3, aps[k]);
        if (aps[k] != A_PM)
            for (size_t i = 0; i < (size_t)(f.N * f.ncols * (f.K / 128)); i++)
                assert_int_equal(f.i0[i], aps[k] == A_PLUS ? 32512 : -32512);
        assert_true(wfx_check(&f) > 0);
        wfx_free(&f);
    }
    wide_fx f;
    wfx_make(&f, 768, 136, 24, W_RANDOM, A_PM);   /* random codes incl. 3 against +-127 */
    assert_true(wfx_check(&f) > 0);
    wfx_free(&f);
}

/* Row splits (one aligned to nothing of the kernel's chunks) and 1 vs 2 threads: same bits. */
typedef struct { const kern_w *w; const kern_act *a; float *y; int64_t ldy; } wjob;
static void job_wide(void *ctx, int64_t r0, int64_t r1, int ith) {
    (void)ith;
    const wjob *j = ctx;
    kern_matmul(j->w, j->a, j->y, j->ldy, r0, r1);
}

static void test_wide_splits(void **state) {
    (void)state;
    rs = 103;
    wide_fx f;
    wfx_make(&f, 768, 265, 72, W_RANDOM, A_RANDOM);
    const size_t ny = (size_t)(f.N * f.ncols);
    float *y = malloc(ny * 4), *y2 = malloc(ny * 4);
    assert_non_null(y);
    assert_non_null(y2);
    const int64_t cut[] = {0, 4, 132, 136, 260, 265};
    for (int ti = 0; kern_tables[ti]; ti++) {
        const kern_table *t = kern_tables[ti];
        if (!host_runs(t)) continue;
        memset(y, 0xff, ny * 4);
        for (int s = 0; s < 5; s++) kern_matmul_table(t, &f.w, &f.a, y, f.N, cut[s], cut[s + 1], NULL);
        assert_memory_equal(y, f.y0, ny * 4);
    }
    for (int nt = 1; nt <= 2; nt++) {
        tern_pool *p;
        tern_err err = {0};
        assert_int_equal(pool_init(&p, nt, &err), TERN_OK);
        wjob j = {&f.w, &f.a, y2, f.N};
        memset(y2, 0xff, ny * 4);
        pool_for(p, f.N, KERN_ROW_ALIGN, job_wide, &j);
        assert_memory_equal(y2, f.y0, ny * 4);
        pool_free(p);
    }
    free(y); free(y2);
    wfx_free(&f);
}

int suite_kernels_wide(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wide_shapes),
        cmocka_unit_test(test_wide_code3_bound),
        cmocka_unit_test(test_wide_splits),
    };
    TEST_RUN_SUITE("kernels_wide", tests);
}
