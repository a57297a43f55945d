/* test_kernels_mv.c: the one-column (decode) matvec of every ISA table the host runs, against the
 * scalar reference, bit for bit, on the shapes of the AVX2 matvec's loop structure (x86/avx2.c,
 * mv_rowpair): the activation is expanded per K chunk of MV_KB = 136 blocks (K = 17408), the
 * float accumulators carried in y between chunks; 8-row passes, an odd last 4-row group
 * (rp_mv_pass4), N % 4 tail rows (ref). Each case is checked three ways: the int32 of every
 * (row, block) through the test hook, the float bits with the hook, and without it (the
 * production path). Independent values: all-code-3 weights against q = +-127 give isum =
 * +-2 * 127 * 128 = +-32512 per block (the int16 worst case of vpmaddubsw). */
#include "test.h"

#include "core/core.h"
#include "core/fp16.h"
#include "kernels/kern_impl.h"
#include "kern_pq2_fx.h"
#include "runtime/pool.h"

#include <stdlib.h>
#include <string.h>

/* K around the chunk of 136 blocks: one block, 135, 136 (one full chunk), 137 (a chunk of one
 * block after it), 273 (three chunks); rows: one group (pass4 only), 13 (pass8 + pass4 + a tail
 * row), 20 (two pass8 + pass4), 24 (three pass8), 70 (17 groups: a pass8 pairs group i with group
 * 8 + i, the two halves of the range, then pass4 and two tail rows). */
static void mv_chunks(void) {
    rs = 201;
    static const int64_t Ks[] = {128, 135 * 128, 136 * 128, 137 * 128, 273 * 128};
    static const int64_t Ns[] = {4, 13, 20, 24, 70};
    int n = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++) {
            pq2_fx f;
            pq2fx_make(&f, Ks[ki], Ns[ni], 1, W_RANDOM, A_RANDOM);
            n += pq2fx_check(&f);
            pq2fx_free(&f);
        }
    assert_true(n > 0);   /* at least one SIMD table ran (ref alone checks nothing here) */
}

/* The int16 worst case through two K chunks: every code 3 against q = +127 / -127. */
static void mv_code3_bound(void) {
    rs = 202;
    static const int aps[] = {A_PLUS, A_MINUS};
    for (int k = 0; k < 2; k++) {
        pq2_fx f;
        pq2fx_make(&f, 137 * 128, 12, 1, W_ALL3, aps[k]);
        for (size_t i = 0; i < (size_t)(f.N * (f.K / 128)); i++) assert_int_equal(f.i0[i], aps[k] == A_PLUS ? 32512 : -32512);
        assert_true(pq2fx_check(&f) > 0);
        pq2fx_free(&f);
    }
}

/* Row splits that leave odd groups on both sides, and 1 vs 2 threads: same bits, two K chunks. */
typedef struct { const kern_w *w; const kern_act *a; float *y; } mvjob;
static void job_mv(void *ctx, int64_t r0, int64_t r1, int ith) {
    (void)ith;
    const mvjob *j = ctx;
    kern_matmul(j->w, j->a, j->y, j->w->n_out, r0, r1);
}

static void mv_splits(void) {
    rs = 203;
    pq2_fx f;
    pq2fx_make(&f, 137 * 128, 45, 1, W_RANDOM, A_RANDOM);
    float *y = malloc((size_t)f.N * 4);
    assert_non_null(y);
    const int64_t cut[] = {0, 4, 16, 28, 44, 45};
    for (int ti = 0; kern_tables[ti]; ti++) {
        const kern_table *t = kern_tables[ti];
        if (!host_runs(t)) continue;
        memset(y, 0xff, (size_t)f.N * 4);
        for (int s = 0; s < 5; s++) kern_matmul_table(t, &f.w, &f.a, y, f.N, cut[s], cut[s + 1], NULL);
        assert_memory_equal(y, f.y0, (size_t)f.N * 4);
    }
    for (int nt = 1; nt <= 2; nt++) {
        tern_pool *p;
        tern_err err = {0};
        assert_int_equal(pool_init(&p, nt, &err), TERN_OK);
        mvjob j = {&f.w, &f.a, y};
        memset(y, 0xff, (size_t)f.N * 4);
        pool_for(p, f.N, KERN_ROW_ALIGN, job_mv, &j);
        assert_memory_equal(y, f.y0, (size_t)f.N * 4);
        pool_free(p);
    }
    free(y);
    pq2fx_free(&f);
}

/* Each case in the row-pair and the 16-row layout. */
static void test_mv_chunks(void **state) { (void)state; pq2fx_each_layout(mv_chunks); }
static void test_mv_code3_bound(void **state) { (void)state; pq2fx_each_layout(mv_code3_bound); }
static void test_mv_splits(void **state) { (void)state; pq2fx_each_layout(mv_splits); }

int suite_kernels_mv(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mv_chunks),
        cmocka_unit_test(test_mv_code3_bound),
        cmocka_unit_test(test_mv_splits),
    };
    TEST_RUN_SUITE("kernels_mv", tests);
}
