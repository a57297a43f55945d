/* membw.h: memory read-bandwidth probe (the decode ceiling's denominator, DESIGN.md
 * "Performance model"). Layer 4. Shared by `tern bench` (through tern_membw in tern.h) and any
 * other benchmark that states a decode speed as a fraction of the bus. */
#ifndef TERN_RUNTIME_MEMBW_H
#define TERN_RUNTIME_MEMBW_H

#include "runtime/pool.h"

#include <stddef.h>

/* Best-of-reps read bandwidth in GB/s (1e9 bytes/s) over a buffer of `bytes` (rounded down to a
 * multiple of 64 * threads; use several times the last-level cache) read by every thread of
 * pool on disjoint slices. Allocates the buffer (TERN_E_NOMEM). */
int membw_read_gbs(tern_pool *pool, size_t bytes, int reps, double *gbs, tern_err *err);

#endif /* TERN_RUNTIME_MEMBW_H */
