/* kmv_ab.c: in-process A/B of the PQ2_0 matvec (one column, fast numerics) of two builds of
 * src/kernels/x86/avx2.c: kern_table_avx2 (this tree) against kern_table_avx2_old (an older
 * commit's avx2.c, renamed and linked next to it by bench/kmv_ab.sh). Per repeat: `inner` calls of
 * the old table, then `inner` of the new, outputs compared bit for bit; 1 thread timed by thread
 * CPU time (preemption by other processes does not count), or `threads` > 0 on a tern_pool timed
 * by wall clock. Prints the best GW/s of each and the median [min, max] of the per-repeat ratio
 * old time / new time (> 1: the new kernel is faster). NCOLS (default 1) > 1 times the matmul of
 * that many activation columns instead (2-4: the narrow path; GMAC/s = rows x K x NCOLS).
 * usage: kmv_ab ROWS K REPEATS INNER [THREADS [NCOLS]] */
#include "core/core.h"
#include "kernels/kern_impl.h"
#include "runtime/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const kern_table kern_table_avx2_old;

typedef struct { const kern_table *t; const kern_w *w; const kern_act *a; float *y; } ab_job;

static void ab_run(void *ctx, int64_t r0, int64_t r1, int ith) {
    (void)ith;
    const ab_job *j = ctx;
    kern_matmul_table(j->t, j->w, j->a, j->y, j->w->n_out, r0, r1, NULL);
}

static double ab_clock(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t ab_state = 88172645463325252ull;
static uint64_t ab_rnd(void) {
    ab_state ^= ab_state << 13; ab_state ^= ab_state >> 7; ab_state ^= ab_state << 17;
    return ab_state;
}

static int ab_cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: kmv_ab ROWS K REPEATS INNER [THREADS [NCOLS]]\n");
        return 2;
    }
    const int64_t N = atoll(argv[1]), K = atoll(argv[2]);
    const int reps = atoi(argv[3]), inner = atoi(argv[4]), nt = argc > 5 ? atoi(argv[5]) : 0;
    const int nc = argc > 6 ? atoi(argv[6]) : 1;
    if (N < 4 || K < 128 || K % 128 || reps < 1 || reps > 1000 || inner < 1 || nc < 1 || nc > 64) {
        fprintf(stderr, "kmv_ab: ROWS >= 4, K a multiple of 128, 1 <= REPEATS <= 1000, INNER >= 1, 1 <= NCOLS <= 64\n");
        return 2;
    }
    const int64_t nb = K / 128;
    const size_t bytes = (size_t)(N * nb * 34);
    uint8_t *d = tern_alloc_aligned(bytes);
    float *x = malloc(sizeof(float) * (size_t)(K * nc)), *y0 = malloc(4 * (size_t)(N * nc)), *y1 = malloc(4 * (size_t)(N * nc));
    void *q = tern_alloc_aligned(kern_act_bytes(KQ_FAST, K, nc));
    double *ratio = malloc(sizeof(double) * (size_t)reps);
    if (!d || !x || !y0 || !y1 || !q || !ratio) return 1;
    for (size_t o = 0; o < bytes; o += 34) {   /* fp16 scale 0.06 .. 0.12, random codes (code 3 included) */
        const uint16_t h = (uint16_t)(0x2c00 + ab_rnd() % 512);
        memcpy(d + o, &h, 2);
        for (int j = 0; j < 32; j++) d[o + 2 + j] = (uint8_t)ab_rnd();
    }
    kern_w w;
    tern_err err = {0};
    if (kern_w_init(&w, "ab", QT_PQ2_0, d, K, N, &err) != TERN_OK) {
        fprintf(stderr, "kmv_ab: %s\n", err.msg);
        return 1;
    }
    for (int64_t i = 0; i < K * nc; i++) x[i] = (float)((ab_rnd() >> 40) % 2001) / 1000.0f - 1.0f;
    kern_act a = {.x = x, .q = q, .K = K, .ncols = nc, .mode = KQ_FAST};
    kern_quantize(&a);
    tern_pool *pool = NULL;
    if (nt > 0 && pool_init(&pool, nt, &err) != TERN_OK) {
        fprintf(stderr, "kmv_ab: %s\n", err.msg);
        return 1;
    }
    ab_job jo = {&kern_table_avx2_old, &w, &a, y0}, jn = {&kern_table_avx2, &w, &a, y1};
    const clockid_t clk = nt > 0 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
    double best_old = 1e30, best_new = 1e30;
    for (int r = 0; r < reps; r++) {
        double t[3];
        const ab_job *jobs[2] = {&jo, &jn};
        t[0] = ab_clock(clk);
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < inner; i++) {
                if (pool) pool_for(pool, N, KERN_ROW_ALIGN, ab_run, (void *)jobs[k]);
                else ab_run((void *)jobs[k], 0, N, 0);
            }
            t[k + 1] = ab_clock(clk);
        }
        if (memcmp(y0, y1, 4 * (size_t)(N * nc)) != 0) {
            fprintf(stderr, "kmv_ab: old and new outputs differ\n");
            return 1;
        }
        const double to = t[1] - t[0], tn = t[2] - t[1];
        ratio[r] = to / tn;
        if (to < best_old) best_old = to;
        if (tn < best_new) best_new = tn;
    }
    qsort(ratio, (size_t)reps, sizeof *ratio, ab_cmp);
    const double gw = (double)N * (double)K * nc * inner / 1e9;
    printf("threads %d %lldx%lld x%d (%.1f MB): old best %.1f %s, new best %.1f (%.1f GB/s); old/new time median %.3f "
           "[%.3f, %.3f] over %d repeats\n", nt ? nt : 1, (long long)N, (long long)K, nc, (double)bytes / 1e6, gw / best_old,
           nc > 1 ? "GMAC/s" : "GW/s",
           gw / best_new, (double)bytes * inner / best_new / 1e9, ratio[reps / 2], ratio[0], ratio[reps - 1], reps);
    if (pool) pool_free(pool);
    kern_w_free(&w);
    tern_free_aligned(d);
    tern_free_aligned(q);
    free(x); free(y0); free(y1); free(ratio);
    return 0;
}
