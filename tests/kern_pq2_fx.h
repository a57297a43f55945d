/* kern_pq2_fx.h: the PQ2_0 fixture shared by the kernel suites that check one ISA path's loop
 * structure against the scalar reference (test_kernels_mv.c: one column; test_kernels_wide.c: 5+
 * columns): N x K random, all-code-3 or ternary weights in file layout (repacked by kern_w_init_ex
 * into the row-pair or the 16-row layout, pq2fx_layout),
 * ncols activation columns (random, +-1, or a +-1 pattern), ref's int32 per (row, block) and
 * float outputs, and a check of every table the host runs: isum and y with the test hook, y
 * without it (the production path). Static functions: include once per test file. */
#ifndef TERN_TESTS_KERN_PQ2_FX_H
#define TERN_TESTS_KERN_PQ2_FX_H

#include "test.h"

#include "core/core.h"
#include "core/fp16.h"
#include "kernels/kern_impl.h"

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
static uint8_t *pq2fx_weights(int64_t K, int64_t N, int wp, size_t *bytes) {
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

static float *pq2fx_act(int64_t K, int ncols, int ap) {
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
} pq2_fx;

/* The layout pq2fx_make repacks into: KW_F_ROWPAIR or KW_F_ROW16 (pq2fx_each_layout sets it). */
static unsigned pq2fx_layout = KW_F_ROWPAIR;

static void pq2fx_make(pq2_fx *f, int64_t K, int64_t N, int ncols, int wp, int ap) {
    memset(f, 0, sizeof *f);
    f->K = K; f->N = N; f->ncols = ncols;
    size_t bytes;
    f->data = pq2fx_weights(K, N, wp, &bytes);
    tern_err err = {0};
    assert_int_equal(kern_w_init_ex(&f->w, "pq2fx", QT_PQ2_0, f->data, K, N, pq2fx_layout, &err), TERN_OK);
    assert_int_equal(f->w.layout, pq2fx_layout == KW_F_ROW16 ? KW_ROW16 : KW_ROWPAIR);
    f->x = pq2fx_act(K, ncols, ap);
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

static void pq2fx_free(pq2_fx *f) {
    kern_w_free(&f->w);
    tern_free_aligned(f->q);
    free(f->x); free(f->data); free(f->y0); free(f->i0);
}

/* Runs body once with each layout (row-pair, then 16-row). */
static void pq2fx_each_layout(void (*body)(void)) {
    pq2fx_layout = KW_F_ROWPAIR;
    body();
    pq2fx_layout = KW_F_ROW16;
    body();
    pq2fx_layout = KW_F_ROWPAIR;
}

static bool host_runs(const kern_table *t) { return (t->needs & kern_cpu_features()) == t->needs; }

/* Every runnable table equals ref on f: isum, y with the hook, y without it. */
static int pq2fx_check(const pq2_fx *f) {
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

#endif
