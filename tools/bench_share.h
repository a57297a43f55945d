/* bench_share.h: the share of its decode ceiling a `tern bench` tg row reports, from the
 * repeats' own shares (t/s over the ceiling of the probe passes right before each repeat).
 * A repeat above 1 is no result (its probe read low: the neighbours took the bus while it ran,
 * or the bus sped up after it), so it is left out of the median and the range and counted;
 * when every repeat is above 1 the median of them all is kept only to be named as no result.
 * A model whose bytes per token fit in the last-level cache is not bound by DRAM: nothing is
 * left out there. Header-only so the test runner checks the rule the command uses. */
#ifndef TERN_TOOLS_BENCH_SHARE_H
#define TERN_TOOLS_BENCH_SHARE_H

#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    double med, lo, hi;   /* median and range of the counted repeats (lo, hi unset when none) */
    int n_above;          /* repeats above their ceiling, left out */
    bool none;            /* every repeat above: med is the median of all of them, no result */
} bench_share;

/* qsort's order of doubles (also bench.c's) */
static int bench_cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* fr: the reps shares (sorted in place); reps >= 1. */
static inline bench_share bench_share_of(double *fr, int reps, bool in_cache) {
    bench_share s = {0};
    qsort(fr, (size_t)reps, sizeof fr[0], bench_cmp_dbl);
    int nv = reps;
    while (!in_cache && nv > 0 && fr[nv - 1] > 1.0) nv--;
    s.n_above = reps - nv;
    s.none = nv == 0;
    const int n = s.none ? reps : nv;
    s.med = n % 2 ? fr[n / 2] : 0.5 * (fr[n / 2 - 1] + fr[n / 2]);
    s.lo = fr[0];
    s.hi = fr[n - 1];
    return s;
}

#endif /* TERN_TOOLS_BENCH_SHARE_H */
