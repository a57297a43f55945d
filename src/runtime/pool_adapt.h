/* pool_adapt.h: the pool's choices of thread count (pool.c) as state machines driven only by the
 * times and signs they are given, so tests/test_pool.c steps them with made-up times and checks
 * each decision against the rules below. pool.c measures (a job's wall time on the caller, the gap
 * since the previous job included; the caller's wait for the others; whether a worker took its
 * work on the caller's CPU) and says why these rules; this file decides.
 *
 * Per job kind (pool.c hashes its function and size): hi or hi - 1 threads (hi = min(threads,
 * CPUs)). A kind keeps a running mean (1/8 per run) of its time at its current count. Every
 * `every` runs (ADAPT_EVERY_MIN at first) it tries the other count for ADAPT_TRY runs and switches
 * when their mean is below ADAPT_MARGIN of the current mean (`every` back to ADAPT_EVERY_MIN);
 * otherwise `every` doubles, up to ADAPT_EVERY_MAX. A try ends at its first run slower than
 * ADAPT_ABORT times the current mean. A kind whose mean at hi threads is ADAPT_LONG_NS or more
 * tries only while the caller's wait for the others averages over ADAPT_WAIT of the job. With hi =
 * 2, a run on both threads shorter than ADAPT_LONG_NS in which a worker took its work on the
 * caller's CPU sends the kind to the caller alone at once (and ends a try of both threads as lost).
 *
 * The solo phase, with hi = 2: every job kind shorter than ADAPT_LONG_NS that would run on both
 * threads goes to the caller alone at once. Per kind, a try of the caller alone can lose where
 * all of them would win: when the worker sits on another L3 than the caller (a VM's two vCPUs
 * placed on two CCXs of the host: a cache line's round trip between them took 370-450 ns against
 * 80-100 within one) every job pays for moving its activations, outputs and the pool's words
 * between the caches, and a kind tried alone still reads what the worker wrote in the job before
 * (stories260K at -t 2 ran 0.65-0.8x -t 1 there, with a third of its jobs on the caller alone).
 *   A comparison starts POOL_SOLO_FIRST_NS after the first job (and after a kept phase ends),
 * then alternates blocks of POOL_SOLO_BLOCK such jobs on the caller alone and on both threads,
 * for POOL_SOLO_WINDOW_NS and POOL_SOLO_BLOCKS blocks at least. Each side sums its jobs' times
 * and the same kinds' running means, so the two sides see the same work however it drifts (a
 * decode's attention grows with its position); a job whose kind has no mean yet is not counted.
 * At a block's end, with both sides counted:
 *   - window and blocks complete: the phase is kept when the caller alone's time per unit of
 *     mean is below ADAPT_MARGIN of both threads' (pool_solo_ratio), else rejected;
 *   - earlier, a ratio above ADAPT_ABORT rejects at once.
 * A comparison still open POOL_SOLO_CMP_MAX_NS after its start, where short jobs are sparse (a
 * prefill's few short kinds between its long matmuls), is decided at the next job: kept when it
 * has 4 blocks or more and the ratio is below ADAPT_MARGIN.
 *   A kept phase sends every such job to the caller alone for `keep` (POOL_SOLO_KEEP_NS, doubled
 * by each kept comparison up to POOL_SOLO_KEEP_MAX_NS); a rejection resets `keep`, doubles the
 * gap before the next comparison (from POOL_SOLO_FIRST_NS up to POOL_SOLO_EVERY_MAX_NS) and runs
 * both threads until then, so a machine where both threads win spends one short comparison per
 * 16 s once settled. */
#ifndef TERN_RUNTIME_POOL_ADAPT_H
#define TERN_RUNTIME_POOL_ADAPT_H

#include "core/core.h"
#include "runtime/pool.h"

#include <stdbool.h>
#include <stdint.h>

#define ADAPT_ABORT 1.5          /* a try or a comparison ends early when this much slower */
#define ADAPT_MARGIN 0.90        /* the other choice must take less than this share of the time */
#define ADAPT_LONG_NS 2000000.0
#define ADAPT_WAIT 0.25
#define ADAPT_TRY 4
#define ADAPT_EVERY_MIN 16
#define ADAPT_EVERY_MAX 1024
#define POOL_SOLO_FIRST_NS 20000000        /* the first comparison: 20 ms after the first job */
#define POOL_SOLO_EVERY_MAX_NS 16000000000
#define POOL_SOLO_KEEP_NS 1000000000       /* a kept phase: 1 s, doubling while confirmed */
#define POOL_SOLO_KEEP_MAX_NS 8000000000
#define POOL_SOLO_WINDOW_NS 5000000        /* a comparison: 5 ms and POOL_SOLO_BLOCKS blocks at least */
#define POOL_SOLO_BLOCK 16                 /* jobs per block of a comparison */
#define POOL_SOLO_BLOCKS 16
#define POOL_SOLO_CMP_MAX_NS 25000000      /* a comparison not full by then is decided */

typedef struct {
    pool_fn fn;
    int64_t n;
    double t_cur;                 /* running mean ns in the current count (0: none yet) */
    double w_cur;                 /* running mean of the caller's end wait / the job (current count) */
    double try_sum;               /* ns summed over the runs of the current try */
    int alt;                      /* 0: hi threads, 1: hi - 1 */
    int trying;                   /* runs left in the try of the other count (0: none) */
    int every, since;             /* runs between tries, runs since the last */
} adapt_kind;

/* The next run of kind k takes hi - 1 threads (else hi). */
static inline bool pool_kind_fewer(const adapt_kind *k) { return k->trying ? !k->alt : k->alt; }

/* After a run of kind k at the count pool_kind_fewer chose (a run held to the caller alone by
 * contention or the solo phase is not measured): dt its time (ns), wait the caller's wait for the
 * others at its end (ns), beside: a worker took its work on the caller's CPU. */
static inline void pool_kind_end(adapt_kind *k, int hi, double dt, double wait, bool beside) {
    const bool ran_hi = !pool_kind_fewer(k);
    if (k->trying) {
        k->try_sum += dt;
        const int runs = ADAPT_TRY - --k->trying;
        const bool lost = hi == 2 && ran_hi && beside && dt < ADAPT_LONG_NS;   /* both on one CPU */
        if (lost) k->trying = 0;
        if (k->trying > 0 && !(k->t_cur > 0 && dt > ADAPT_ABORT * k->t_cur)) return;
        k->trying = 0;                                            /* the try ends: all runs, or one too slow */
        const double mean = k->try_sum / runs;
        if (!lost && runs == ADAPT_TRY && k->t_cur > 0 && mean < ADAPT_MARGIN * k->t_cur) {   /* the other count is faster */
            k->alt = !k->alt;
            k->t_cur = mean;
            k->w_cur = 0;
            k->every = ADAPT_EVERY_MIN;
        } else if (k->every < ADAPT_EVERY_MAX) {
            k->every *= 2;
        }
        k->since = 0;
        return;
    }
    if (hi == 2 && ran_hi && beside && dt < ADAPT_LONG_NS) {   /* both on one CPU: the caller alone */
        *k = (adapt_kind){.fn = k->fn, .n = k->n, .alt = 1, .every = ADAPT_EVERY_MIN};
        return;
    }
    const double wf = dt > 0 ? wait / dt : 0.0;
    k->w_cur = k->t_cur > 0 ? k->w_cur + (wf - k->w_cur) / 8 : wf;
    k->t_cur = k->t_cur > 0 ? k->t_cur + (dt - k->t_cur) / 8 : dt;
    if (!k->alt && k->t_cur >= ADAPT_LONG_NS && k->w_cur < ADAPT_WAIT) {   /* long and shared: no try */
        k->since = 0;
        return;
    }
    if (++k->since >= k->every) {
        k->trying = ADAPT_TRY;
        k->try_sum = 0;
    }
}

enum { POOL_SOLO_NONE, POOL_SOLO_COMPARING, POOL_SOLO_KEPT };

typedef struct {
    int state;            /* POOL_SOLO_* */
    int64_t at;           /* NONE: when the next comparison starts (0: no job yet);
                           * COMPARING: when it started; KEPT: when the phase ends (ns) */
    int64_t every, keep;  /* the gap before the next comparison, the next kept phase (ns) */
    int64_t i;            /* the comparison's jobs so far */
    double dt[2], ref[2]; /* the comparison's job times and their kinds' means: alone, both */
} pool_solo;

/* The comparison's alone time per unit of mean over both threads' (1 where a side has none yet). */
static inline double pool_solo_ratio(const pool_solo *s) {
    if (s->ref[0] <= 0 || s->ref[1] <= 0 || s->dt[1] <= 0) return 1.0;
    return (s->dt[0] / s->ref[0]) / (s->dt[1] / s->ref[1]);
}

/* End the comparison at t: keep the phase (win) or go back to both threads. */
static inline void pool_solo_decide(pool_solo *s, bool win, int64_t t) {
    if (win) {
        s->state = POOL_SOLO_KEPT;
        s->at = t + s->keep;
        s->keep = TERN_MIN(2 * s->keep, (int64_t)POOL_SOLO_KEEP_MAX_NS);
    } else {
        s->state = POOL_SOLO_NONE;
        s->every = TERN_MIN(2 * s->every, (int64_t)POOL_SOLO_EVERY_MAX_NS);
        s->at = t + s->every;
        s->keep = POOL_SOLO_KEEP_NS;
    }
}

/* Before a short job that would run both threads (t0: its start, > 0): 0 both threads, outside a
 * comparison; 1 the caller alone; 2 both threads, in a comparison. */
static inline int pool_solo_begin(pool_solo *s, int64_t t0) {
    if (s->at == 0) {                       /* the first job */
        s->every = POOL_SOLO_FIRST_NS;
        s->keep = POOL_SOLO_KEEP_NS;
        s->at = t0 + s->every;
    }
    if (s->state == POOL_SOLO_COMPARING && t0 - s->at >= POOL_SOLO_CMP_MAX_NS)   /* too sparse to fill it */
        pool_solo_decide(s, s->i >= 4 * POOL_SOLO_BLOCK && pool_solo_ratio(s) < ADAPT_MARGIN, t0);
    if (s->state == POOL_SOLO_KEPT && t0 >= s->at) {   /* a kept phase ends: both threads, a comparison soon */
        s->state = POOL_SOLO_NONE;
        s->every = POOL_SOLO_FIRST_NS;
        s->at = t0 + s->every;
    }
    if (s->state == POOL_SOLO_NONE && t0 >= s->at) {
        s->state = POOL_SOLO_COMPARING;
        s->at = t0;
        s->i = 0;
        for (int k = 0; k < 2; k++) s->dt[k] = s->ref[k] = 0;
    }
    if (s->state == POOL_SOLO_KEPT) return 1;
    if (s->state == POOL_SOLO_NONE) return 0;
    return (s->i++ / POOL_SOLO_BLOCK) % 2 == 0 ? 1 : 2;
}

/* After a job that pool_solo_begin sent to a side of a comparison (side 0: the caller alone, 1:
 * both threads; dt: its time; ref: its kind's mean, 0: none yet; t: its end). */
static inline void pool_solo_end(pool_solo *s, int side, double dt, double ref, int64_t t) {
    if (s->state != POOL_SOLO_COMPARING) return;
    if (ref > 0) {   /* a kind with no mean yet counts on neither side */
        s->dt[side] += dt;
        s->ref[side] += ref;
    }
    if (s->i % POOL_SOLO_BLOCK != 0 || s->ref[0] <= 0 || s->ref[1] <= 0) return;   /* not a block's end */
    const double r = pool_solo_ratio(s);
    if (s->i >= POOL_SOLO_BLOCKS * POOL_SOLO_BLOCK && t - s->at >= POOL_SOLO_WINDOW_NS)
        pool_solo_decide(s, r < ADAPT_MARGIN, t);
    else if (r > ADAPT_ABORT) pool_solo_decide(s, false, t);
}

#endif /* TERN_RUNTIME_POOL_ADAPT_H */
