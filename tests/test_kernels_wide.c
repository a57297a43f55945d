/* test_kernels_wide.c: the wide (prefill) matmul path of every ISA table the host runs, against
 * the scalar reference, bit for bit. The shapes are chosen for the AVX2 wide kernel's loop
 * structure (x86/avx2.c, "wide matmul"): row chunks of 64 groups (256 rows), K chunks of 4
 * blocks, tile groups of 16 tiles of 8 columns, a padded last tile (5-7 columns) or narrow
 * leftovers (1-4), N % 4 tail rows. Each case is checked three ways: the int32 of every
 * (row, block) through the test hook, the float bits with the hook, and the float bits WITHOUT
 * the hook (the production path, which the hook-based tests of test_kernels.c do not run for
 * batches wider than 7). Independent values: all-code-3 weights against q = +-127 give
 * isum = +-2 * 127 * 128 per block (the int16 worst case of vpmaddubsw). */
#include "test.h"

#include "core/core.h"
#include "core/fp16.h"
#include "kernels/kern_impl.h"
#include "kern_pq2_fx.h"
#include "runtime/pool.h"

#include <stdlib.h>
#include <string.h>

/* Column counts around every tile boundary (140: two tile groups, the second of one tile, plus
 * 4 leftover columns); 265 rows = a row chunk of 64 groups + one of 2 groups + 1 tail row;
 * K = 768 = one K chunk of 4 blocks + a partial one of 2. */
static void wide_shapes(void) {
    rs = 101;
    static const int cols[] = {5, 6, 7, 8, 9, 12, 13, 16, 17, 21, 64, 66, 69, 72, 77, 130, 140};
    int n = 0;
    for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
        pq2_fx f;
        pq2fx_make(&f, 768, 265, cols[ci], ci % 2 ? W_TERNARY : W_RANDOM, A_RANDOM);
        n += pq2fx_check(&f);
        pq2fx_free(&f);
    }
    /* K a multiple of the chunk, one group, and K = 128 (one block) */
    static const int64_t shapes[][3] = {{512, 4, 64}, {128, 132, 9}, {1024, 8, 72}, {5120, 12, 16}};
    for (size_t si = 0; si < 4; si++) {
        pq2_fx f;
        pq2fx_make(&f, shapes[si][0], shapes[si][1], (int)shapes[si][2], W_RANDOM, A_RANDOM);
        n += pq2fx_check(&f);
        pq2fx_free(&f);
    }
    assert_true(n > 0);   /* at least one SIMD table ran (ref alone checks nothing here) */
}

/* The int16 worst case: every code 3 (t = +2) against q = +127 / -127 (and a mix): the isum of
 * every (row, block) is known without ref: +-2 * 127 * 128 = +-32512 for the constant columns. */
static void wide_code3_bound(void) {
    rs = 102;
    static const int aps[] = {A_PLUS, A_MINUS, A_PM};
    for (int k = 0; k < 3; k++) {
        pq2_fx f;
        pq2fx_make(&f, 768, 136, 24, W_ALL3, aps[k]);
        if (aps[k] != A_PM)
            for (size_t i = 0; i < (size_t)(f.N * f.ncols * (f.K / 128)); i++)
                assert_int_equal(f.i0[i], aps[k] == A_PLUS ? 32512 : -32512);
        assert_true(pq2fx_check(&f) > 0);
        pq2fx_free(&f);
    }
    pq2_fx f;
    pq2fx_make(&f, 768, 136, 24, W_RANDOM, A_PM);   /* random codes incl. 3 against +-127 */
    assert_true(pq2fx_check(&f) > 0);
    pq2fx_free(&f);
}

/* Row splits (one aligned to nothing of the kernel's chunks) and 1 vs 2 threads: same bits. */
typedef struct { const kern_w *w; const kern_act *a; float *y; int64_t ldy; } wjob;
static void job_wide(void *ctx, int64_t r0, int64_t r1, int ith) {
    (void)ith;
    const wjob *j = ctx;
    kern_matmul(j->w, j->a, j->y, j->ldy, r0, r1);
}

static void wide_splits(void) {
    rs = 103;
    pq2_fx f;
    pq2fx_make(&f, 768, 265, 72, W_RANDOM, A_RANDOM);
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
    pq2fx_free(&f);
}

/* Each case in the row-pair and the 16-row layout. */
static void test_wide_shapes(void **state) { (void)state; pq2fx_each_layout(wide_shapes); }
static void test_wide_code3_bound(void **state) { (void)state; pq2fx_each_layout(wide_code3_bound); }
static void test_wide_splits(void **state) { (void)state; pq2fx_each_layout(wide_splits); }

int suite_kernels_wide(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wide_shapes),
        cmocka_unit_test(test_wide_code3_bound),
        cmocka_unit_test(test_wide_splits),
    };
    TEST_RUN_SUITE("kernels_wide", tests);
}
