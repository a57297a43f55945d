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
#include "runtime/pool.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rs = 7;
static uint32_t rnd32(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

enum { W_RANDOM, W_ALL3 };
enum { A_RANDOM, A_PLUS, A_MINUS };

typedef struct {
    int64_t K, N;
    uint8_t *data;
    kern_w w;
    float *x; void *q;
    kern_act a;
    float *y0;         /* ref */
    int32_t *i0;       /* ref isum */
} mv_fx;

/* N rows x K of PQ2_0 (per block fp16 d 0.004 .. 0.03 + 32 code bytes), one activation column. */
static void mvfx_make(mv_fx *f, int64_t K, int64_t N, int wp, int ap) {
    memset(f, 0, sizeof *f);
    f->K = K; f->N = N;
    const size_t bytes = (size_t)(K / 128) * 34 * (size_t)N;
    f->data = malloc(bytes);
    assert_non_null(f->data);
    for (size_t o = 0; o < bytes; o += 34) {
        const uint16_t d = (uint16_t)(0x1c00 + rnd32() % 0x0c00);
        f->data[o] = (uint8_t)d; f->data[o + 1] = (uint8_t)(d >> 8);
        for (int j = 0; j < 32; j++) f->data[o + 2 + j] = wp == W_ALL3 ? 0xff : (uint8_t)rnd32();
    }
    tern_err err = {0};
    assert_int_equal(kern_w_init(&f->w, "mv", QT_PQ2_0, f->data, K, N, &err), TERN_OK);
    assert_int_equal(f->w.layout, KW_ROWPAIR);
    f->x = malloc(sizeof(float) * (size_t)K);
    assert_non_null(f->x);
    for (int64_t i = 0; i < K; i++)
        f->x[i] = ap == A_PLUS ? 1.0f : ap == A_MINUS ? -1.0f : ((float)(rnd32() % 20001) / 10000.0f - 1.0f) * (1 + (float)(i % 3));
    f->q = tern_alloc_aligned(kern_act_bytes(KQ_FAST, K, 1));
    assert_non_null(f->q);
    f->a = (kern_act){.x = f->x, .q = f->q, .K = K, .ncols = 1, .mode = KQ_FAST};
    kern_quantize(&f->a);
    f->y0 = malloc((size_t)N * 4);
    f->i0 = malloc((size_t)(N * (K / 128)) * 4);
    assert_non_null(f->y0);
    assert_non_null(f->i0);
    kern_matmul_table(&kern_table_ref, &f->w, &f->a, f->y0, N, 0, N, f->i0);
}

static void mvfx_free(mv_fx *f) {
    kern_w_free(&f->w);
    tern_free_aligned(f->q);
    free(f->x); free(f->data); free(f->y0); free(f->i0);
}

static bool host_runs(const kern_table *t) { return (t->needs & kern_cpu_features()) == t->needs; }

/* Every runnable SIMD table equals ref on f: isum, y with the hook, y without it. */
static int mvfx_check(const mv_fx *f) {
    const size_t ny = (size_t)f->N, ni = ny * (size_t)(f->K / 128);
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
                        fail_msg("%s K=%lld N=%lld: isum[%zu] (row %zu block %zu) %d != ref %d", t->name, (long long)f->K,
                                 (long long)f->N, i, i / (size_t)(f->K / 128), i % (size_t)(f->K / 128), is[i], f->i0[i]);
            for (size_t i = 0; i < ny; i++)
                if (tern_f32_bits(y[i]) != tern_f32_bits(f->y0[i]))
                    fail_msg("%s K=%lld N=%lld hook=%d: y[%zu] %.9g != ref %.9g", t->name, (long long)f->K, (long long)f->N,
                             hook, i, y[i], f->y0[i]);
        }
        n++;
    }
    free(y); free(is);
    return n;
}

/* K around the chunk of 136 blocks: one block, 135, 136 (one full chunk), 137 (a chunk of one
 * block after it), 273 (three chunks); rows: one group (pass4 only), 13 (pass8 + pass4 + a tail
 * row), 20 (two pass8 + pass4), 24 (three pass8). */
static void test_mv_chunks(void **state) {
    (void)state;
    rs = 201;
    static const int64_t Ks[] = {128, 135 * 128, 136 * 128, 137 * 128, 273 * 128};
    static const int64_t Ns[] = {4, 13, 20, 24};
    int n = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++) {
            mv_fx f;
            mvfx_make(&f, Ks[ki], Ns[ni], W_RANDOM, A_RANDOM);
            n += mvfx_check(&f);
            mvfx_free(&f);
        }
    assert_true(n > 0);   /* at least one SIMD table ran (ref alone checks nothing here) */
}

/* The int16 worst case through two K chunks: every code 3 against q = +127 / -127. */
static void test_mv_code3_bound(void **state) {
    (void)state;
    rs = 202;
    static const int aps[] = {A_PLUS, A_MINUS};
    for (int k = 0; k < 2; k++) {
        mv_fx f;
        mvfx_make(&f, 137 * 128, 12, W_ALL3, aps[k]);
        for (size_t i = 0; i < (size_t)(f.N * (f.K / 128)); i++) assert_int_equal(f.i0[i], aps[k] == A_PLUS ? 32512 : -32512);
        assert_true(mvfx_check(&f) > 0);
        mvfx_free(&f);
    }
}

/* Row splits that leave odd groups on both sides, and 1 vs 2 threads: same bits, two K chunks. */
typedef struct { const kern_w *w; const kern_act *a; float *y; } mvjob;
static void job_mv(void *ctx, int64_t r0, int64_t r1, int ith) {
    (void)ith;
    const mvjob *j = ctx;
    kern_matmul(j->w, j->a, j->y, j->w->n_out, r0, r1);
}

static void test_mv_splits(void **state) {
    (void)state;
    rs = 203;
    mv_fx f;
    mvfx_make(&f, 137 * 128, 45, W_RANDOM, A_RANDOM);
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
    mvfx_free(&f);
}

int suite_kernels_mv(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mv_chunks),
        cmocka_unit_test(test_mv_code3_bound),
        cmocka_unit_test(test_mv_splits),
    };
    TEST_RUN_SUITE("kernels_mv", tests);
}
