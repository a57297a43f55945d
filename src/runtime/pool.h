/* pool.h: the persistent thread pool. Layer 4. Workers persist for the pool's life; the calling
 * thread works too; workers spin briefly, then sleep. pool_for splits [0, n) into disjoint
 * ranges aligned to `align` (the last range takes the remainder), one per thread, the same split
 * for the same (n, align, n_threads), so every output has one writer and results never depend
 * on the thread count. One pool_for at a time per pool (not re-entrant). pool_for_dyn (below):
 * the same job, but threads claim chunks from a shared counter as they finish. */
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

/* Run fn over [0, n) with chunks claimed at run time instead of one fixed range per thread: each
 * thread (the caller included) claims the next chunk as soon as it finishes its last one, until
 * none is left; returns when all are done. A thread that the OS delays, or a range that runs
 * slower, then leaves at most its current chunk to wait for at the job's end.
 *   Who claims what: [0, n) is held as the unclaimed units [lo, hi) of `align` elements. The
 * caller (ith 0) claims from the back (hi downwards), the workers (ith >= 1) from the front (lo
 * upwards), so with 2 threads each streams its own end of the rows and every chunk the caller
 * takes lies above every chunk a worker takes.
 *   Chunk size (guided): ceil(units left / (2 T)) units of align (T = n_threads), at least cmin
 * and at most cmax elements, at most what is left. Every chunk boundary but n is a multiple of
 * align; every chunk has <= cmax elements; chunks shrink towards the end of the job.
 *   Arguments: align >= 1; cmin >= align and cmax >= cmin, both multiples of align (INT64_MAX:
 * no maximum). When n <= cmin, the pool has one thread (fn(ctx, 0, n, 0): one call), or
 * n / align >= 2^32 (the packed counter's range), pool_for's static split is used instead.
 *   Memory ordering: the claim counter is one 64-bit atomic (lo | hi << 32) updated by relaxed
 * compare-and-swap: the RMWs on one atomic are totally ordered, so every unit is claimed exactly
 * once; the outputs are published to the caller by pool_for's own seq_cst completion handshake.
 *   Bits: the split (and which thread computes what) changes from run to run, so fn must
 * compute each index the same way in any range it falls in, with one writer per output (as
 * the kernels do: kernels.h); then results never depend on the schedule or the thread count.
 * Not re-entrant (one pool job at a time per pool, as pool_for). */
void pool_for_dyn(tern_pool *p, int64_t n, int64_t align, int64_t cmin, int64_t cmax, pool_fn fn, void *ctx);

#endif /* TERN_RUNTIME_POOL_H */
