/* membw.h: memory read-bandwidth probe (the decode ceiling's denominator, DESIGN.md
 * "Performance model"). Layer 4. Shared by `tern bench` (through tern_membw in tern.h) and any
 * other benchmark that states a decode speed as a fraction of the bus. */
#ifndef TERN_RUNTIME_MEMBW_H
#define TERN_RUNTIME_MEMBW_H

#include "runtime/pool.h"

#include <stddef.h>

/* The probe's read loop: sum of n 64-bit words at p (32-byte aligned when avx2), 256-bit loads
 * into four accumulators when avx2 is true (the caller checked the CPU), else a scalar loop with
 * eight accumulators; the tail beyond a multiple of 16 (avx2) or 8 words is not read. Shared
 * with `tern bench-kernel`, which times it per thread. */
uint64_t membw_sum(const uint64_t *p, int64_t n, bool avx2);
#if defined(__x86_64__)
/* The AVX2 loop (x86/membw_avx2.c, built with -mavx2): call only where the CPU has AVX2. */
uint64_t membw_sum_avx2(const uint64_t *p, int64_t n);
#endif

/* Best-of-reps read bandwidth in GB/s (1e9 bytes/s) over a buffer of `bytes` (rounded down to a
 * multiple of 64 * threads; use several times the last-level cache) read by every thread of
 * pool on disjoint slices, writing every timed pass's GB/s into passes[0..reps) (in run order;
 * passes may be NULL) and the best into *gbs. Allocates the buffer (TERN_E_NOMEM). */
int membw_read_passes(tern_pool *pool, size_t bytes, int reps, double *passes, double *gbs, tern_err *err);

#endif /* TERN_RUNTIME_MEMBW_H */
