/* pool.h: the persistent thread pool. Layer 4. Workers persist for the pool's life; the calling
 * thread works too; workers spin briefly, then sleep. pool_for splits [0, n) into disjoint
 * ranges aligned to `align` (the last range takes the remainder), one per thread, the same split
 * for the same (n, align, n_threads), so every output has one writer and results never depend
 * on the thread count. One pool_for at a time per pool (not re-entrant). */
#ifndef TERN_RUNTIME_POOL_H
#define TERN_RUNTIME_POOL_H

#include "core/core.h"

#include <stdint.h>

typedef struct tern_pool tern_pool;
/* ith: 0 .. n_threads-1 (0 = the caller), for per-thread scratch. */
typedef void (*pool_fn)(void *ctx, int64_t i0, int64_t i1, int ith);

/* n_threads >= 1 (1 = no workers). Errors: TERN_E_ARG, TERN_E_NOMEM, TERN_E_IO (pthread). */
int pool_init(tern_pool **out, int n_threads, tern_err *err);
void pool_free(tern_pool *p);
int pool_n_threads(const tern_pool *p);
/* Run fn over [0, n) split in ranges aligned to align (>= 1); returns when all are done.
 * Ranges may be empty (fn is not called for an empty range). */
void pool_for(tern_pool *p, int64_t n, int64_t align, pool_fn fn, void *ctx);
/* The range [*i0, *i1) thread ith of n_threads gets from pool_for (exposed for tests and for
 * callers that size per-thread work): chunks of align, thread t takes chunks
 * [t * C / T, (t + 1) * C / T) with C = ceil(n / align), clipped to n. */
void pool_split(int64_t n, int64_t align, int n_threads, int ith, int64_t *i0, int64_t *i1);

#endif /* TERN_RUNTIME_POOL_H */
