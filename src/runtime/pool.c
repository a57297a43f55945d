/* pool.c: the persistent thread pool (contract in pool.h). Workers are created once; a job is
 * published by bumping a generation counter; workers spin on it for a short while (about
 * POOL_SPIN pause loops, a few tens of microseconds: decode issues hundreds of jobs per token,
 * each far shorter than a sleep/wake round trip) and then sleep on a condition variable. The
 * caller runs range 0 itself, then waits for the others the same way (spin, then sleep).
 * Split rule (pool_split): [0, n) in chunks of `align`; thread t of T takes chunks
 * [t * C / T, (t + 1) * C / T), C = ceil(n / align); the last chunk ends at n. Deterministic for
 * (n, align, T), disjoint, and every boundary but n is a multiple of align.
 * Dynamic jobs (pool_for_dyn): the same publication, with cmin > 0; each thread then claims
 * chunks from `left` (lo | hi << 32 in units of align: the caller from hi down, workers from lo
 * up) until lo == hi. The claims are relaxed CAS (only their atomicity matters: each unit goes
 * to one claimant); `left` is stored before the generation bump, so a worker that sees the new
 * generation sees it (or a later claim).
 * Memory order: seq_cst atomics throughout (the job fields are written before the generation
 * bump and read after it; the Dekker-style handshake on `caller_waiting`/`pending` needs it). */
#include "runtime/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

#define POOL_SPIN 4096

typedef struct worker {
    struct tern_pool *pool;
    int ith;
    pthread_t th;
} worker;

struct tern_pool {
    int n_threads;
    worker *w;                 /* n_threads - 1 workers (ith 1 ..) */
    /* current job (written by the caller before the generation bump) */
    pool_fn fn;
    void *ctx;
    int64_t n, align;
    int64_t cmin, cmax;        /* dynamic job: chunk limits in units of align (cmin == 0: static job) */
    /* dynamic job: unclaimed units [lo, hi) as lo | hi << 32, on a cache line of its own (the
     * claims write it while the others read the job fields) */
    char pad0[64];
    atomic_uint_fast64_t left;
    char pad1[64];
    atomic_uint_fast64_t gen;  /* job generation */
    atomic_int pending;        /* workers that have not finished the current job */
    atomic_int stop;
    atomic_int n_sleeping;     /* workers waiting on cv_work */
    atomic_int caller_waiting;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
};

void pool_split(int64_t n, int64_t align, int n_threads, int ith, int64_t *i0, int64_t *i1) {
    const int64_t chunks = (n + align - 1) / align;
    const int64_t c0 = chunks * ith / n_threads, c1 = chunks * (ith + 1) / n_threads;
    *i0 = TERN_MIN(c0 * align, n);
    *i1 = TERN_MIN(c1 * align, n);
}

/* Claim the next chunk of a dynamic job (front: from lo, else from hi); false when none is left. */
static bool dyn_claim(struct tern_pool *p, bool front, int64_t *i0, int64_t *i1) {
    uint_fast64_t cur = atomic_load_explicit(&p->left, memory_order_relaxed), nw;
    int64_t lo, hi, c;
    do {
        lo = (int64_t)(cur & 0xffffffffu);
        hi = (int64_t)(cur >> 32);
        if (lo >= hi) return false;
        c = (hi - lo + 2 * (int64_t)p->n_threads - 1) / (2 * (int64_t)p->n_threads);
        c = TERN_MIN(TERN_MIN(TERN_MAX(c, p->cmin), p->cmax), hi - lo);
        nw = front ? (uint_fast64_t)(lo + c) | (uint_fast64_t)hi << 32 : (uint_fast64_t)lo | (uint_fast64_t)(hi - c) << 32;
    } while (!atomic_compare_exchange_weak_explicit(&p->left, &cur, nw, memory_order_relaxed, memory_order_relaxed));
    const int64_t u0 = front ? lo : hi - c;
    *i0 = u0 * p->align;
    *i1 = TERN_MIN((u0 + c) * p->align, p->n);
    return true;
}

static void run_range(struct tern_pool *p, int ith) {
    int64_t i0, i1;
    if (p->cmin > 0) {
        while (dyn_claim(p, ith != 0, &i0, &i1)) p->fn(p->ctx, i0, i1, ith);
        return;
    }
    pool_split(p->n, p->align, p->n_threads, ith, &i0, &i1);
    if (i0 < i1) p->fn(p->ctx, i0, i1, ith);
}

static void *worker_main(void *arg) {
    worker *wk = arg;
    struct tern_pool *p = wk->pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t g = atomic_load(&p->gen);
        for (int i = 0; i < POOL_SPIN && g == seen && !atomic_load(&p->stop); i++) {
            CPU_RELAX();
            g = atomic_load(&p->gen);
        }
        if (g == seen) {
            /* announce the sleep BEFORE re-reading gen: pool_for bumps gen and then reads
             * n_sleeping, so one of the two sees the other (no lost wake-up) */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv_work, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        run_range(p, wk->ith);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

int pool_init(tern_pool **out, int n_threads, tern_err *err) {
    if (!out) return tern_err_set(err, TERN_E_ARG, "pool_init: NULL out");
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return tern_err_set(err, TERN_E_ARG, "pool_init: n_threads = %d, expected 1..1024", n_threads);
    struct tern_pool *p = calloc(1, sizeof *p);
    if (!p) return tern_err_set(err, TERN_E_NOMEM, "pool_init: no memory");
    p->n_threads = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->caller_waiting, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->w = calloc((size_t)n_threads - 1, sizeof *p->w);
        if (!p->w) { pool_free(p); return tern_err_set(err, TERN_E_NOMEM, "pool_init: no memory"); }
        for (int i = 0; i < n_threads - 1; i++) {
            p->w[i].pool = p;
            p->w[i].ith = i + 1;
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
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->w[i].th, NULL);
        free(p->w);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}

int pool_n_threads(const tern_pool *p) { return p ? p->n_threads : 1; }

/* Publish the job (p->fn .. p->left written by the caller), run the caller's share, wait. */
static void run_job(struct tern_pool *p) {
    atomic_store(&p->caller_waiting, 0);
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
    }
    run_range(p, 0);
    for (int i = 0; i < POOL_SPIN && atomic_load(&p->pending) != 0; i++) CPU_RELAX();
    if (atomic_load(&p->pending) != 0) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_waiting, 1);
        while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void pool_for(tern_pool *p, int64_t n, int64_t align, pool_fn fn, void *ctx) {
    TERN_ASSERT(p && fn && align >= 1 && n >= 0);
    if (n == 0) return;
    if (p->n_threads == 1) { fn(ctx, 0, n, 0); return; }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->align = align;
    p->cmin = p->cmax = 0;
    run_job(p);
}

void pool_for_dyn(tern_pool *p, int64_t n, int64_t align, int64_t cmin, int64_t cmax, pool_fn fn, void *ctx) {
    TERN_ASSERT(p && fn && align >= 1 && n >= 0 && cmin >= align && cmax >= cmin && cmin % align == 0 &&
                (cmax == INT64_MAX || cmax % align == 0));
    const int64_t units = n / align + (n % align != 0);
    if (n <= cmin || p->n_threads == 1 || units >= ((int64_t)1 << 32)) { pool_for(p, n, align, fn, ctx); return; }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->align = align;
    p->cmin = cmin / align;
    p->cmax = cmax == INT64_MAX ? units : cmax / align;
    atomic_store_explicit(&p->left, (uint_fast64_t)units << 32, memory_order_relaxed);
    run_job(p);
}
