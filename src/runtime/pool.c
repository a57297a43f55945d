/* pool.c: the persistent thread pool (contract in pool.h).
 * A job is published in three steps by the caller: the job fields (fn, ctx, n, unit, chunk
 * limits, the target count of done units), the work word(s) with release, then a bump of the
 * generation counter that wakes the workers. Work is only ever taken by an atomic
 * read-modify-write on a work word, and the job fields are read after it:
 *   left      unclaimed units [lo, hi) of a chunked job as lo | hi << 32 (pool_for, pool_for_dyn)
 *   each[w]   bit t of word w: thread 64 w + t has still to run its one call (pool_run_all)
 * Both words are exhausted whenever no job of their kind runs, so a worker that acts on a stale
 * generation claims nothing, or claims work of the current job (which is then correct work).
 * `done` counts finished units; the caller returns when it reaches `target`, so a job never
 * waits for a thread that claimed nothing.
 * Waiting: a worker waits for a new generation, the caller for done == target; both spin on
 * the counter for at most POOL_SPIN_NS (then sleep on a condition variable; the Dekker-style
 * handshakes n_sleeping/gen and caller_waiting/done are seq_cst, so no wake-up is lost, except
 * that a chunked job's caller does not wait for a worker descheduled while it holds the mutex:
 * wake_workers).
 * Threads spin only while those awake for work (`active`) are no more than the CPUs the process
 * may run on (beyond them a spinning thread would take the CPU from one that works): a chunked
 * job wakes min(n_threads, CPUs) of them, so an oversubscribed pool spins as one of that size
 * does, and only pool_run_all, which wakes every thread, sleeps at once. Nor does a thread spin on
 * the CPU where another thread of the job runs (the scheduler put both on one CPU, e.g. when
 * another process holds the other one): a worker does not spin where the caller last published
 * a job from, and the caller does not spin where a worker of the job last took work; they sleep
 * at once, so the one that works keeps the CPU. */
#include "runtime/pool.h"
#include "runtime/pool_adapt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "core/os.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

#define POOL_SPIN_NS 40000      /* 40 us: a few decode jobs; far below a scheduler time slice */
#define POOL_SPIN_CHECK 16      /* pause loops between two clock reads (a read is ~20 ns) */
#define POOL_WAKE_TRY_NS 50000  /* 50 us: how long a chunked job's caller tries for mu to wake the workers */

/* How many threads take a chunked job (adapt_* below): at most hi = min(n_threads, CPUs the
 * process may run on), so threads beyond the CPUs stay parked (an explicit oversubscription costs
 * nothing); and per job kind (its function and size: a forward pass repeats the same kinds token
 * after token) either hi or hi - 1 (with hi = 2: the caller alone, no publication). hi - 1 wins
 * for jobs shorter than a wake-up, and on a machine where another process holds one of our CPUs.
 *   The measure: the job's wall time on the caller, the gap since the previous job included (the
 * code between jobs runs on the same contended CPUs; after an idle gap over ADAPT_GAP_NS, the job
 * alone), as a running mean per kind and count. Every `every` runs of a kind, ADAPT_TRY runs use
 * the other count; it is kept if their mean is below ADAPT_MARGIN of the current count's. Each
 * confirmation doubles that kind's `every` (up to ADAPT_EVERY_MAX), so on a quiet machine a kind
 * spends about 1% of its runs on the slower count. A try ends at its first run slower than
 * ADAPT_ABORT times the current mean (it cannot win). A kind that runs hi threads for
 * ADAPT_LONG_NS or more tries hi - 1 only while the caller, its own claims done, waits for the
 * others for over ADAPT_WAIT of the job (running mean): with less, the threads share the work
 * and one thread alone cannot win, while a try runs whole long jobs (a prefill matmul: with 28
 * layers, several of a forward's 28 runs of each kind) on one thread.
 *   With hi = 2, a run of both threads shorter than ADAPT_LONG_NS in which the worker took its
 * work on the caller's CPU counts as lost at once (the kind goes to the caller alone; a try of
 * two ends): the scheduler put both on one CPU, where two threads cannot beat one, and on a
 * machine with other processes' noise the timing alone takes many runs to see it. A longer run
 * is left to the timing: while both threads work for milliseconds the scheduler may move one
 * to another CPU, which a caller alone would never let it do. (With more threads, dropping one
 * need not separate the two that share a CPU, so there the timing alone decides.)
 *   With hi = 2, a thread that waits for its CPU behind another process sends every kind
 * shorter than ADAPT_LONG_NS to the caller alone for POOL_HOLD_NS. The scheduler may leave the
 * caller on a CPU that another process holds while the worker has the other: then two threads
 * time faster than the caller alone on its shared CPU, and while the worker spins or works the
 * other CPU is never idle, so the kernel never moves the caller there. Held, the worker sleeps,
 * its CPU goes idle and the kernel pulls the caller over (as it does for a single thread);
 * longer kinds (prefill's matmuls) still take both threads. Or the caller has a CPU of its own
 * and the worker shares the other: every job in which the worker loses its turn while it holds
 * a chunk waits a time slice for it (stories260K at -t 2 beside a busy loop: some repeats at a
 * half or a third of one thread's rate); held, the caller runs at one thread's rate on its own
 * CPU. The sign: a thread's run delay (time ready to run with no CPU) over POOL_CHECK_DELAY of a
 * check window of POOL_CHECK_NS or more (one pread per window and thread: the caller's in
 * adapt_begin, the worker's in worker_check, which the caller counts at its next check), in
 * POOL_STREAK windows each within POOL_STREAK_NS of the last: sharing a CPU with a busy process
 * costs about half of most windows, a kernel thread on a quiet machine a sliver.
 * Bursts of another process's work give signs too, a few at a time: a server's streaming client
 * (tests/server/load.mjs at 4 sequences on 2 vCPUs) gave 2-19 signs per 5 s (of ~1100 windows)
 * in clusters of 2-3, and a streak of 2 held the decode's jobs to one thread for 5-29% of the
 * time; a busy loop gives a sign in most windows, so a streak of 4 still takes it within ~20 ms.
 *   With hi = 2, the short kinds also go to the caller alone all at once while a comparison of
 * the two counts over all of them says so: the solo phase.
 *   The per-kind choice and the solo phase, with their ADAPT_* and POOL_SOLO_* constants, are in
 * pool_adapt.h: they depend only on the times and signs this file measures and hands them. */
#define POOL_CHECK_NS 4000000
#define POOL_CHECK_DELAY 0.25
#define POOL_STREAK 4
#define POOL_STREAK_NS 50000000
#define POOL_HOLD_NS 500000000
#define ADAPT_GAP_NS 2000000
#define ADAPT_KINDS 64            /* job kinds remembered (a hash of function and size) */
typedef struct pool_adapt {
    int hi;                       /* min(n_threads, CPUs available): the most threads worth running */
    int64_t last;                 /* end of the last chunked job (ns; 0: none) */
    int64_t wait;                 /* the last job's wait of the caller for the others (ns) */
    bool beside;                  /* a worker of the last job took its work on the caller's CPU */
    bool held;                    /* the current job: a short kind held to the caller alone */
    int solo_job;                 /* the current job in the solo phase (pool_solo_begin): 0 no, 1 alone, 2 both */
    pool_solo solo;               /* the solo phase (pool_adapt.h) */
    int64_t contended;            /* when the last streak of contention was seen (ns; 0: never) */
    int64_t ev_last;              /* the last sign of contention (ns) */
    int streak;                   /* signs in a row, each within POOL_STREAK_NS of the one before */
    int rd;                       /* the caller's run-delay handle (os_run_delay_open; -1: none) */
    pthread_t rd_th;              /* the thread that opened it */
    int64_t rd_t, rd_v;           /* the last check: when, the run delay then (ns) */
    int64_t wsigns;               /* the workers' signs counted at the last check */
    adapt_kind *k;                /* the current job's kind */
    adapt_kind kind[ADAPT_KINDS];
} pool_adapt;

typedef struct worker {
    struct tern_pool *pool;
    int ith;
    pthread_t th;
    atomic_int cpu;            /* where it last took work (os_current_cpu; -1: not known) */
    int rd;                    /* its run-delay handle (os_run_delay_open; -1: none) */
    int64_t rd_t, rd_v;        /* its last check: when, the run delay then (ns) */
    char pad[64];
} worker;

struct tern_pool {
    int n_threads;
    int n_each_words;          /* ceil(n_threads / 64) */
    int cpus;                  /* CPUs the process may run on (at pool_init) */
    worker *w;                 /* n_threads - 1 workers (ith 1 ..) */
    /* current job (written by the caller before the work word) */
    pool_fn fn;
    void *ctx;
    int64_t n, unit;           /* elements, and elements per unit (align or a multiple of it) */
    /* read by workers before a claim or after the job's end (a late worker), so atomic (relaxed) */
    atomic_int_fast64_t cmin, cmax;    /* chunk limits in units */
    atomic_int_fast64_t target;        /* units (chunked job) or threads (pool_run_all) to finish */
    char pad0[64];
    atomic_uint_fast64_t left; /* chunked job: unclaimed units lo | hi << 32 */
    char pad1[64];
    atomic_int_fast64_t done;  /* finished units of the current job */
    char pad2[64];
    atomic_uint_fast64_t gen;  /* job generation */
    atomic_int stop;
    atomic_int n_sleeping;     /* workers waiting on cv_work */
    atomic_int caller_waiting;
    atomic_int caller_cpu;     /* where the caller published the last job (-1: not known) */
    atomic_int_fast64_t wsigns;/* contention signs seen by workers (worker_check) */
    atomic_uint_fast64_t *each;/* pool_run_all: n_each_words bit words */
    atomic_int active;         /* threads awake for chunked work (ith < active); the rest park */
    atomic_int job_threads;    /* threads that take part in the current chunked job (read before a
                                * claim, so a late worker may read the next job's: only speed
                                * depends on it) */
    pool_adapt ad;             /* caller-only state of the choice of `active` */
    bool fixed;                /* pool_set_fixed: every chunked job takes ad.hi threads */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done, cv_active;
};

int pool_cpus_available(void) { return os_cpus_available(); }

void pool_split(int64_t n, int64_t align, int n_threads, int ith, int64_t *i0, int64_t *i1) {
    const int64_t chunks = (n + align - 1) / align;
    const int64_t c0 = chunks * ith / n_threads, c1 = chunks * (ith + 1) / n_threads;
    *i0 = TERN_MIN(c0 * align, n);
    *i1 = TERN_MIN(c1 * align, n);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Claim the next chunk of the chunked job (front: from lo, else from hi); false when none is
 * left. The chunk size read from the job fields before the claim may belong to a job published
 * meanwhile: it is clipped to the range the compare-and-swap validates, so the claim is always
 * a valid unclaimed part of the job then current; unit and n are read after the claim. */
static bool chunk_claim(struct tern_pool *p, bool front, int64_t *u0, int64_t *cu) {
    uint_fast64_t cur = atomic_load_explicit(&p->left, memory_order_acquire), nw;
    int64_t lo, hi, c;
    do {
        lo = (int64_t)(cur & 0xffffffffu);
        hi = (int64_t)(cur >> 32);
        if (lo >= hi) return false;
        c = (hi - lo + 2 * (int64_t)p->n_threads - 1) / (2 * (int64_t)p->n_threads);
        const int64_t cmin = atomic_load_explicit(&p->cmin, memory_order_relaxed);
        const int64_t cmax = atomic_load_explicit(&p->cmax, memory_order_relaxed);
        c = TERN_MIN(TERN_MIN(TERN_MAX(c, cmin), cmax), hi - lo);
        if (c < 1) c = 1;
        nw = front ? (uint_fast64_t)(lo + c) | (uint_fast64_t)hi << 32 : (uint_fast64_t)lo | (uint_fast64_t)(hi - c) << 32;
    } while (!atomic_compare_exchange_weak_explicit(&p->left, &cur, nw, memory_order_acq_rel, memory_order_acquire));
    *u0 = front ? lo : hi - c;
    *cu = c;
    return true;
}

/* Count finished work; the thread that finishes the job wakes a sleeping caller. */
static void finish(struct tern_pool *p, int64_t units, bool is_caller) {
    const int64_t d = atomic_fetch_add(&p->done, units) + units;
    if (!is_caller && d == atomic_load_explicit(&p->target, memory_order_relaxed) && atomic_load(&p->caller_waiting)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Everything thread ith can take of the current job(s). */
static void take_work(struct tern_pool *p, int ith) {
    const int w = ith / 64;
    const uint_fast64_t bit = (uint_fast64_t)1 << (ith % 64);
    if (atomic_load_explicit(&p->each[w], memory_order_relaxed) & bit) {
        if (atomic_fetch_and_explicit(&p->each[w], ~bit, memory_order_acq_rel) & bit) {
            p->fn(p->ctx, ith, ith + 1, ith);
            finish(p, 1, ith == 0);
        }
    }
    int64_t u0, cu;
    if (ith >= atomic_load_explicit(&p->active, memory_order_relaxed) ||
        ith >= atomic_load_explicit(&p->job_threads, memory_order_relaxed))
        return;
    int64_t mine = 0;
    while (chunk_claim(p, ith != 0, &u0, &cu)) {
        const int64_t i0 = u0 * p->unit, i1 = TERN_MIN((u0 + cu) * p->unit, p->n);
        p->fn(p->ctx, i0, i1, ith);
        mine += cu;
    }
    /* counted once, after the last claim (the job cannot end before it): one update of `done`
     * per thread and job, so its cache line moves between the threads once per job */
    if (mine) finish(p, mine, ith == 0);
}

/* Whether a waiting thread may spin: the threads awake for work fit the CPUs. */
static bool may_spin(const struct tern_pool *p) {
    return atomic_load_explicit(&p->active, memory_order_relaxed) <= p->cpus;
}

/* Whether the calling thread runs on CPU `cpu` (never when either is not known). */
static bool on_cpu(int cpu) {
    return cpu >= 0 && os_current_cpu() == cpu;
}

/* Whether a worker of the current job last took work on the caller's CPU. */
static bool worker_beside_caller(struct tern_pool *p) {
    const int me = os_current_cpu(), n = atomic_load_explicit(&p->job_threads, memory_order_relaxed);
    if (me < 0) return false;
    for (int i = 1; i < n && i < p->n_threads; i++)
        if (atomic_load_explicit(&p->w[i - 1].cpu, memory_order_relaxed) == me) return true;
    return false;
}

/* After a worker's work, at most once per POOL_CHECK_NS: a sign of contention when its run delay
 * grew by POOL_CHECK_DELAY of the window or more (the caller's test in adapt_begin). It counts
 * the signs for the caller, which takes them into its streak: the scheduler may leave the caller
 * alone on a CPU while the worker shares the other with a busy process, where the caller's own
 * run delay shows nothing but every job waits on the worker's turns. */
static void worker_check(struct tern_pool *p, worker *wk) {
    if (wk->rd < 0) return;
    const int64_t t = now_ns();
    if (t - wk->rd_t < POOL_CHECK_NS) return;
    const int64_t v = os_run_delay_read(wk->rd);
    if (v >= 0 && wk->rd_v >= 0 && (double)(v - wk->rd_v) >= POOL_CHECK_DELAY * (double)(t - wk->rd_t))
        atomic_fetch_add_explicit(&p->wsigns, 1, memory_order_relaxed);
    wk->rd_t = t;
    wk->rd_v = v;
}

static void *worker_main(void *arg) {
    worker *wk = arg;
    struct tern_pool *p = wk->pool;
    uint_fast64_t seen = 0;
    wk->rd = p->ad.hi == 2 ? os_run_delay_open() : -1;   /* this thread's: opened on it */
    wk->rd_t = now_ns();
    wk->rd_v = os_run_delay_read(wk->rd);
    for (;;) {
        if (wk->ith >= atomic_load(&p->active)) {   /* parked: no spinning, no wake-up per job */
            pthread_mutex_lock(&p->mu);
            while (wk->ith >= atomic_load(&p->active) && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv_active, &p->mu);
            pthread_mutex_unlock(&p->mu);
            if (atomic_load(&p->stop)) break;
            /* the job that made it active may already be published: look at once (a claim
             * on a finished job's words takes nothing) */
            seen = atomic_load(&p->gen);
            atomic_store_explicit(&wk->cpu, os_current_cpu(), memory_order_relaxed);
            take_work(p, wk->ith);
            worker_check(p, wk);
            continue;
        }
        uint_fast64_t g = atomic_load(&p->gen);
        if (g == seen && may_spin(p) && !on_cpu(atomic_load_explicit(&p->caller_cpu, memory_order_relaxed))) {
            const int64_t t_end = now_ns() + POOL_SPIN_NS;
            for (int i = 1; g == seen && !atomic_load_explicit(&p->stop, memory_order_relaxed); i++) {
                CPU_RELAX();
                g = atomic_load(&p->gen);
                if (i % POOL_SPIN_CHECK == 0 &&
                    (now_ns() > t_end || on_cpu(atomic_load_explicit(&p->caller_cpu, memory_order_relaxed))))
                    break;
            }
        }
        if (g == seen) {
            /* announce the sleep BEFORE re-reading gen: the caller bumps gen and then reads
             * n_sleeping, so one of the two sees the other (no lost wake-up) */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop) && wk->ith < atomic_load(&p->active))
                pthread_cond_wait(&p->cv_work, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        if (g == seen) continue;                    /* woken to park */
        seen = g;
        atomic_store_explicit(&wk->cpu, os_current_cpu(), memory_order_relaxed);
        take_work(p, wk->ith);
        worker_check(p, wk);
    }
    os_run_delay_close(wk->rd);
    return NULL;
}

int pool_init(tern_pool **out, int n_threads, tern_err *err) {
    if (!out) return tern_err_set(err, TERN_E_ARG, "pool_init: NULL out");
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return tern_err_set(err, TERN_E_ARG, "pool_init: n_threads = %d, expected 1..1024", n_threads);
    struct tern_pool *p = calloc(1, sizeof *p);
    if (!p) return tern_err_set(err, TERN_E_NOMEM, "pool_init: no memory");
    p->n_threads = n_threads;
    p->n_each_words = (n_threads + 63) / 64;
    p->cpus = pool_cpus_available();
    atomic_init(&p->left, 0);
    atomic_init(&p->cmin, 1);
    atomic_init(&p->cmax, 1);
    atomic_init(&p->target, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->caller_waiting, 0);
    atomic_init(&p->caller_cpu, -1);
    atomic_init(&p->wsigns, 0);
    atomic_init(&p->active, n_threads);
    const int hi = TERN_MIN(n_threads, p->cpus);
    p->ad = (pool_adapt){.hi = hi, .rd = -1};
    atomic_init(&p->job_threads, hi);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_active, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->each = calloc((size_t)p->n_each_words, sizeof *p->each);
    if (!p->each) { pool_free(p); return tern_err_set(err, TERN_E_NOMEM, "pool_init: no memory"); }
    for (int i = 0; i < p->n_each_words; i++) atomic_init(&p->each[i], 0);
    if (n_threads > 1) {
        p->w = calloc((size_t)n_threads - 1, sizeof *p->w);
        if (!p->w) { pool_free(p); return tern_err_set(err, TERN_E_NOMEM, "pool_init: no memory"); }
        for (int i = 0; i < n_threads - 1; i++) {
            p->w[i].pool = p;
            p->w[i].ith = i + 1;
            atomic_init(&p->w[i].cpu, -1);
            if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]) != 0) {
                p->n_threads = i + 1;          /* pool_free joins only the started ones */
                pool_free(p);
                return tern_err_set(err, TERN_E_IO, "pool_init: pthread_create failed for worker %d of %d", i + 1,
                                    n_threads);
            }
        }
    }
    *out = p;
    return TERN_OK;
}

void pool_free(tern_pool *p) {
    if (!p) return;
    if (p->w) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->cv_work);
        pthread_cond_broadcast(&p->cv_active);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->w[i].th, NULL);
        free(p->w);
    }
    free(p->each);
    os_run_delay_close(p->ad.rd);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_cond_destroy(&p->cv_active);
    free(p);
}

int pool_n_threads(const tern_pool *p) { return p ? p->n_threads : 1; }

void pool_set_fixed(tern_pool *p, bool fixed) { p->fixed = fixed; }

/* Wake the sleeping workers for a new generation. Under mu the broadcast cannot fall between a
 * worker's check of gen and its wait (it holds mu across both). A worker holds mu only for that
 * check (and its wake-up's bookkeeping), so mu is normally had within nanoseconds; a worker
 * that holds it longer has been descheduled inside that window. For a chunked job (all_needed
 * false) the caller then broadcasts without mu after POOL_WAKE_TRY_NS rather than wait for a
 * thread the job does not need: that worker may sleep through this job (the others do its
 * share) and wakes at the next one's broadcast. pool_run_all needs every thread: it waits. */
static void wake_workers(struct tern_pool *p, bool all_needed) {
    if (all_needed) {
        pthread_mutex_lock(&p->mu);
    } else {
        const int64_t t_end = now_ns() + POOL_WAKE_TRY_NS;
        for (int i = 1; pthread_mutex_trylock(&p->mu) != 0; i++) {
            CPU_RELAX();
            if (i % POOL_SPIN_CHECK == 0 && now_ns() > t_end) {
                pthread_cond_broadcast(&p->cv_work);
                return;
            }
        }
    }
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
}

/* Wake the workers (the job's fields and work word are stored), take work, wait for the rest. */
static void run_job(struct tern_pool *p, bool all_needed) {
    atomic_store_explicit(&p->caller_cpu, os_current_cpu(), memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->n_sleeping) > 0) wake_workers(p, all_needed);
    take_work(p, 0);
    const int64_t target = atomic_load_explicit(&p->target, memory_order_relaxed);
    p->ad.wait = 0;
    p->ad.beside = worker_beside_caller(p);
    if (atomic_load(&p->done) == target) return;
    const int64_t w0 = now_ns();
    if (may_spin(p) && !p->ad.beside) {
        const int64_t t_end = now_ns() + POOL_SPIN_NS;
        for (int i = 1; atomic_load(&p->done) != target; i++) {
            CPU_RELAX();
            if (i % POOL_SPIN_CHECK == 0 && (now_ns() > t_end || worker_beside_caller(p))) break;
        }
    }
    if (atomic_load(&p->done) != target) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_waiting, 1);
        while (atomic_load(&p->done) != target) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    atomic_store(&p->caller_waiting, 0);
    p->ad.wait = now_ns() - w0;
}

/* Fields of a job, before its work word is stored (the previous job is complete: nothing reads
 * them until a claim on the new word succeeds). */
static void set_job(struct tern_pool *p, pool_fn fn, void *ctx, int64_t n, int64_t unit, int64_t target) {
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->unit = unit;
    atomic_store_explicit(&p->target, target, memory_order_relaxed);
    atomic_store(&p->done, 0);
    atomic_store(&p->caller_waiting, 0);
}

static void set_active(struct tern_pool *p, int n) {
    if (atomic_load(&p->active) == n) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->active, n);
    pthread_cond_broadcast(&p->cv_active);
    pthread_cond_broadcast(&p->cv_work);   /* a worker asleep on cv_work re-checks `active` */
    pthread_mutex_unlock(&p->mu);
}

/* A sign at time t that a thread of the pool shares its CPU with another process. */
static void contention_sign(pool_adapt *a, int64_t t) {
    if (t - a->ev_last > POOL_STREAK_NS) a->streak = 0;
    a->ev_last = t;
    if (++a->streak >= POOL_STREAK) a->contended = t;
}

/* Before a chunked job starting at t0: the thread count for it. */
static int adapt_begin(struct tern_pool *p, pool_fn fn, int64_t n, int64_t t0) {
    pool_adapt *a = &p->ad;
    a->held = false;
    a->solo_job = 0;
    if (a->hi == 1 || p->fixed) return a->hi;
    const uint64_t h = ((uint64_t)(uintptr_t)fn * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)n * 0xc2b2ae3d27d4eb4full);
    adapt_kind *k = &a->kind[(h >> 32) % ADAPT_KINDS];
    if (k->fn != fn || k->n != n) *k = (adapt_kind){.fn = fn, .n = n, .every = ADAPT_EVERY_MIN};   /* takes the entry */
    a->k = k;
    const int act = pool_kind_fewer(k) ? a->hi - 1 : a->hi;
    if (a->hi != 2) return act;
    if (t0 - a->rd_t >= POOL_CHECK_NS) {   /* the caller's own CPU: shared? */
        const pthread_t me = pthread_self();
        if (a->rd_t == 0 || !pthread_equal(me, a->rd_th)) {   /* first check on this thread */
            os_run_delay_close(a->rd);
            a->rd = os_run_delay_open();
            a->rd_th = me;
            a->rd_v = os_run_delay_read(a->rd);
        } else {
            const int64_t v = os_run_delay_read(a->rd), ws = atomic_load_explicit(&p->wsigns, memory_order_relaxed);
            if ((v >= 0 && a->rd_v >= 0 && (double)(v - a->rd_v) >= POOL_CHECK_DELAY * (double)(t0 - a->rd_t)) ||
                ws != a->wsigns)
                contention_sign(a, t0);
            a->rd_v = v;
            a->wsigns = ws;
        }
        a->rd_t = t0;
    }
    if (act == 2 && k->t_cur < ADAPT_LONG_NS && a->contended && t0 - a->contended < POOL_HOLD_NS) {
        a->held = true;
        return 1;
    }
    if (act == 2 && k->t_cur < ADAPT_LONG_NS) {
        a->solo_job = pool_solo_begin(&a->solo, t0);
        if (a->solo_job == 1) {
            a->held = true;
            return 1;
        }
    }
    return act;
}

/* After it (t0, t: its start and end): account its time to its kind; end a try, choose. */
static void adapt_end(struct tern_pool *p, int64_t t0, int64_t t) {
    pool_adapt *a = &p->ad;
    if (a->hi == 1 || p->fixed) return;
    const double dt = (double)(a->last && t0 - a->last <= ADAPT_GAP_NS ? t - a->last : t - t0);
    a->last = t;
    if (a->solo_job) pool_solo_end(&a->solo, a->solo_job - 1, dt, a->k->t_cur, t);
    if (a->held) return;                 /* not the kind's chosen count: no measure of it */
    pool_kind_end(a->k, a->hi, dt, (double)a->wait, a->beside);
}

void pool_for_dyn(tern_pool *p, int64_t n, int64_t align, int64_t cmin, int64_t cmax, pool_fn fn, void *ctx) {
    TERN_ASSERT(p && fn && align >= 1 && n >= 0 && cmin >= align && cmax >= cmin && cmin % align == 0 &&
                (cmax == INT64_MAX || cmax % align == 0));
    if (n == 0) return;
    if (p->n_threads == 1 || n <= cmin) { fn(ctx, 0, n, 0); return; }
    const int64_t t0 = p->ad.hi > 1 ? now_ns() : 0;
    const int act = adapt_begin(p, fn, n, t0);
    set_active(p, p->ad.hi);              /* threads beyond the CPUs park (a no-op once set) */
    atomic_store_explicit(&p->job_threads, act, memory_order_relaxed);
    if (act == 1) {                       /* the caller alone, in chunks of at most cmax */
        const int64_t step = cmax == INT64_MAX ? n : cmax;
        for (int64_t i = 0; i < n; i += step) fn(ctx, i, TERN_MIN(i + step, n), 0);
        p->ad.wait = 0;
        p->ad.beside = false;
        adapt_end(p, t0, p->ad.hi > 1 ? now_ns() : 0);
        return;
    }
    /* the unit: align, or the smallest multiple of it that keeps the unit count below 2^32 */
    int64_t unit = align, units = n / align + (n % align != 0);
    if (units >= ((int64_t)1 << 32)) {
        const int64_t k = units / (((int64_t)1 << 32) - 1) + 1;
        unit = align * k;
        units = n / unit + (n % unit != 0);
    }
    set_job(p, fn, ctx, n, unit, units);
    const int64_t ucmin = TERN_MAX(cmin / unit, 1);
    atomic_store_explicit(&p->cmin, ucmin, memory_order_relaxed);
    atomic_store_explicit(&p->cmax, cmax == INT64_MAX ? units : TERN_MAX(cmax / unit, ucmin), memory_order_relaxed);
    atomic_store_explicit(&p->left, (uint_fast64_t)units << 32, memory_order_release);
    run_job(p, false);
    adapt_end(p, t0, p->ad.hi > 1 ? now_ns() : 0);
}

void pool_for(tern_pool *p, int64_t n, int64_t align, pool_fn fn, void *ctx) {
    TERN_ASSERT(p && fn && align >= 1 && n >= 0);
    /* chunks of at least 1 / (4 T) of the job: few calls per thread (a matmul re-reads its
     * activations per call), while a held thread still delays at most a quarter of it */
    const int64_t units = n / align + (n % align != 0), T = p->n_threads;
    pool_for_dyn(p, n, align, align * TERN_MAX((int64_t)1, (units + 4 * T - 1) / (4 * T)), INT64_MAX, fn, ctx);
}

void pool_run_all(tern_pool *p, pool_fn fn, void *ctx) {
    TERN_ASSERT(p && fn);
    if (p->n_threads == 1) { fn(ctx, 0, 1, 0); return; }
    set_active(p, p->n_threads);          /* every thread: parked ones too */
    set_job(p, fn, ctx, p->n_threads, 1, p->n_threads);
    for (int w = 0; w < p->n_each_words; w++) {
        const int nb = TERN_MIN(64, p->n_threads - 64 * w);
        atomic_store_explicit(&p->each[w], nb == 64 ? ~(uint_fast64_t)0 : (((uint_fast64_t)1 << nb) - 1),
                              memory_order_release);
    }
    run_job(p, true);
}
