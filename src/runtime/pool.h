/* pool.h: the persistent thread pool. Layer 4. Workers persist for the pool's life; the calling
 * thread works too. A job's work is claimed at run time in chunks, so a thread that the OS has
 * descheduled (a busy machine, more threads than CPUs) holds back at most the chunk it is in:
 * the threads that run take the rest, and a job is complete when all of its work is done, not
 * when every thread has looked at it. Waiting threads spin for a few tens of microseconds
 * (decode issues hundreds of short jobs per token, each far shorter than a sleep/wake round
 * trip), then sleep; with more threads than CPUs they do not spin at all. One job at a time per
 * pool (not re-entrant).
 *   Bits: which thread computes which range changes from run to run, so a job function must
 * compute each index the same way in any range it falls in, with one writer per output (the
 * kernels do: kernels.h); then results never depend on the schedule or the thread count. */
#ifndef TERN_RUNTIME_POOL_H
#define TERN_RUNTIME_POOL_H

#include "core/core.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tern_pool tern_pool;
/* ith: 0 .. n_threads-1 (0 = the caller), for per-thread scratch. */
typedef void (*pool_fn)(void *ctx, int64_t i0, int64_t i1, int ith);

/* n_threads >= 1 (1 = no workers). Errors: TERN_E_ARG, TERN_E_NOMEM, TERN_E_IO (pthread). */
int pool_init(tern_pool **out, int n_threads, tern_err *err);
void pool_free(tern_pool *p);
int pool_n_threads(const tern_pool *p);
/* fixed: every chunked job (pool_for, pool_for_dyn) takes min(n_threads, CPUs available)
 * threads; the per-kind choice of one thread less and the caller-alone phases described in
 * pool.c are off. For benchmarks that time a kernel at a thread count (bench-kernel); the model's
 * pool keeps the choice. Call between jobs, from the caller's thread. */
void pool_set_fixed(tern_pool *p, bool fixed);
/* The CPUs this process may run on (sched_getaffinity; the online count where that is not
 * available), at least 1: the default thread count of every command and of the library. */
int pool_cpus_available(void);

/* Run fn over [0, n) in chunks aligned to align (>= 1); returns when all are done. Chunks are
 * claimed as in pool_for_dyn with cmin = ceil(units / 4T) units of align (so at most ~4T + 2
 * calls: a matmul re-reads its activations per call) and no maximum; fn is never called for an
 * empty range. */
void pool_for(tern_pool *p, int64_t n, int64_t align, pool_fn fn, void *ctx);

/* Run fn over [0, n) with chunks claimed at run time: each thread (the caller included) claims
 * the next chunk as soon as it finishes its last one, until none is left; returns when all are
 * done.
 *   Who claims what: [0, n) is held as the unclaimed units [lo, hi) of `align` elements. The
 * caller (ith 0) claims from the back (hi downwards), the workers (ith >= 1) from the front (lo
 * upwards), so with 2 threads each streams its own end of the rows and every chunk the caller
 * takes lies above every chunk a worker takes.
 *   Chunk size (guided): ceil(units left / (2 T)) units of align (T = n_threads), at least cmin
 * and at most cmax elements, at most what is left. Every chunk boundary but n is a multiple of
 * align; every chunk has <= cmax elements; chunks shrink towards the end of the job.
 *   Arguments: align >= 1; cmin >= align and cmax >= cmin, both multiples of align (INT64_MAX:
 * no maximum). When n / align >= 2^32 (the packed counter's range), the unit becomes a multiple
 * of align large enough to fit (boundaries stay multiples of align).
 *   Memory ordering: the unclaimed range is one 64-bit atomic (lo | hi << 32), stored by the
 * caller with release after every other job field and claimed by acquire compare-and-swap; a
 * thread reads the job's fields only after a successful claim, so a worker that wakes late
 * (after its job completed without it) either claims nothing or claims work of the job then
 * current, with that job's fields. Completion is a count of units done (seq_cst), which also
 * publishes every output to the caller. */
void pool_for_dyn(tern_pool *p, int64_t n, int64_t align, int64_t cmin, int64_t cmax, pool_fn fn, void *ctx);

/* Run fn(ctx, ith, ith + 1, ith) exactly once on every thread at the same time and wait for all
 * (a barrier: one descheduled thread delays it). For benchmarks that time each thread's own
 * loop; the model never uses it. */
void pool_run_all(tern_pool *p, pool_fn fn, void *ctx);

/* The static split [*i0, *i1) of thread ith of n_threads (for callers that size per-thread
 * work, e.g. inside pool_run_all): chunks of align, thread t takes chunks
 * [t * C / T, (t + 1) * C / T) with C = ceil(n / align), clipped to n. */
void pool_split(int64_t n, int64_t align, int n_threads, int ith, int64_t *i0, int64_t *i1);

#endif /* TERN_RUNTIME_POOL_H */
