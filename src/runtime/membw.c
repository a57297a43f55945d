/* membw.c: memory read-bandwidth probe (see membw.h). Each thread sums 64-bit words of its slice
 * with 8 independent accumulators (the compiler vectorises it; the loop is load-bound), the sum
 * is kept so the reads cannot be elided. */
#include "runtime/membw.h"

#include <string.h>

typedef struct {
    const uint64_t *buf;
    uint64_t sums[64];
} membw_job;

static void job_read(void *ctx, int64_t i0, int64_t i1, int ith) {
    membw_job *j = ctx;
    uint64_t a[8] = {0};
    for (int64_t i = i0 * 8; i < i1 * 8; i += 8)
        for (int k = 0; k < 8; k++) a[k] += j->buf[i + k];
    j->sums[ith & 63] += a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

int membw_read_gbs(tern_pool *pool, size_t bytes, int reps, double *gbs, tern_err *err) {
    const size_t lines = bytes / 64;
    if (lines < 1024 || reps < 1) return tern_err_set(err, TERN_E_ARG, "membw: %zu bytes / %d reps too small", bytes, reps);
    uint64_t *buf = tern_alloc_aligned(lines * 64);
    if (!buf) return tern_err_set(err, TERN_E_NOMEM, "membw: cannot allocate %zu bytes", lines * 64);
    memset(buf, 1, lines * 64);                       /* touch every page before timing */
    membw_job j = {.buf = buf};
    double best = 0;
    for (int r = 0; r < reps + 1; r++) {              /* first pass warms up the pool */
        const double t0 = tern_time_s();
        pool_for(pool, (int64_t)lines, 1, job_read, &j);
        const double dt = tern_time_s() - t0;
        if (r > 0 && dt > 0 && (double)(lines * 64) / dt / 1e9 > best) best = (double)(lines * 64) / dt / 1e9;
    }
    tern_free_aligned(buf);
    *gbs = best;
    return TERN_OK;
}
