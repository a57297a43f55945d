/* membw.c: memory read-bandwidth probe (see membw.h).
 * The probe reads memory the way the token loop reads weights, so the ceiling is not lower than
 * what the model itself can reach: the buffer is anonymous memory advised for transparent huge
 * pages (as gguf.c advises the model buffer; with THP in "madvise" mode this alone moves the
 * figure by ~40% on the development host), and on x86-64 with AVX2 each thread sums 256-bit
 * loads into four independent accumulators (a scalar loop is load-issue bound below the bus on
 * one core). The sums are kept so the reads cannot be elided. */
#include "runtime/membw.h"

#include <string.h>

#include "core/os.h"

static uint64_t sum_plain(const uint64_t *p, int64_t n) {
    uint64_t a[8] = {0};
    for (int64_t i = 0; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) a[k] += p[i + k];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

uint64_t membw_sum(const uint64_t *p, int64_t n, bool avx2) {
#if defined(__x86_64__)
    if (avx2) return membw_sum_avx2(p, n);
#endif
    (void)avx2;
    return sum_plain(p, n);
}

typedef struct {
    const uint64_t *buf;
    bool avx2;
    uint64_t sums[64 * 8];   /* one cache line per thread */
} membw_job;

/* Items are 64-byte lines. */
static void job_read(void *ctx, int64_t i0, int64_t i1, int ith) {
    membw_job *j = ctx;
    j->sums[(ith & 63) * 8] += membw_sum(j->buf + i0 * 8, (i1 - i0) * 8, j->avx2);
}

int membw_read_passes(tern_pool *pool, size_t bytes, int reps, double *passes, double *gbs, tern_err *err) {
    const size_t lines = bytes / 64;
    if (lines < 1024) return tern_err_set(err, TERN_E_ARG, "membw: %zu bytes, expected at least 65536", bytes);
    if (reps < 1) return tern_err_set(err, TERN_E_ARG, "membw: %d passes, expected at least 1", reps);
    const size_t len = lines * 64;
    void *p = os_pages_alloc(len);
    if (!p) return tern_err_set(err, TERN_E_NOMEM, "membw: cannot map %zu bytes", len);
    os_advise_huge(p, len);                           /* advisory, as for the model buffer */
    memset(p, 1, len);                                /* touch every page before timing */
    membw_job j = {.buf = p};
#if defined(__x86_64__)
    __builtin_cpu_init();
    j.avx2 = __builtin_cpu_supports("avx2");
#endif
    double best = 0;
    for (int r = 0; r < reps + 1; r++) {              /* first pass warms up the pool */
        const double t0 = tern_time_s();
        pool_for(pool, (int64_t)lines, 64, job_read, &j);
        const double dt = tern_time_s() - t0;
        const double g = dt > 0 ? (double)len / dt / 1e9 : 0;
        if (r > 0 && passes) passes[r - 1] = g;
        if (r > 0 && g > best) best = g;
    }
    os_pages_free(p, len);
    *gbs = best;
    return TERN_OK;
}

