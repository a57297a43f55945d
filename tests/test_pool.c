/* test_pool.c: the persistent thread pool. Ranges are disjoint, aligned and cover [0, n)
 * exactly once (checked by counting writes per index); the split is the documented one; results
 * are bit-identical for 1, 2 and 3 threads; many short jobs in a row complete (no lost
 * wake-up), including after the workers fell asleep. */
#include "test.h"

#include "runtime/pool.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    atomic_int *hits;       /* per index */
    int64_t align, n;
    atomic_int bad;         /* a range with a misaligned start or an empty call */
    atomic_int calls[8];
} cover_ctx;

static void job_cover(void *ctx, int64_t i0, int64_t i1, int ith) {
    cover_ctx *c = ctx;
    if (i0 % c->align != 0 || i0 >= i1 || (i1 % c->align != 0 && i1 != c->n) || ith < 0 || ith >= 8) atomic_fetch_add(&c->bad, 1);
    else atomic_fetch_add(&c->calls[ith], 1);
    for (int64_t i = i0; i < i1; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void test_cover(void **state) {
    (void)state;
    static const int64_t ns[] = {1, 3, 4, 5, 13, 64, 1000, 151669};
    static const int64_t aligns[] = {1, 4, 16};
    for (int T = 1; T <= 3; T++) {
        tern_pool *p;
        tern_err err = {0};
        assert_int_equal(pool_init(&p, T, &err), TERN_OK);
        assert_int_equal(pool_n_threads(p), T);
        for (size_t ni = 0; ni < 8; ni++)
            for (size_t ai = 0; ai < 3; ai++) {
                cover_ctx c = {0};
                c.n = ns[ni]; c.align = aligns[ai];
                c.hits = calloc((size_t)c.n, sizeof *c.hits);
                pool_for(p, c.n, c.align, job_cover, &c);
                assert_int_equal(atomic_load(&c.bad), 0);
                for (int64_t i = 0; i < c.n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
                /* the split is the documented one: thread t's range from pool_split */
                for (int t = 0; t < T; t++) {
                    int64_t i0, i1;
                    pool_split(c.n, c.align, T, t, &i0, &i1);
                    assert_int_equal(atomic_load(&c.calls[t]), i0 < i1 ? 1 : 0);
                }
                free(c.hits);
            }
        pool_free(p);
    }
    /* pool_split by hand: n = 13, align 4, 2 threads: chunks 4 -> [0, 8) and [8, 13) */
    int64_t a, b;
    pool_split(13, 4, 2, 0, &a, &b); assert_int_equal(a, 0); assert_int_equal(b, 8);
    pool_split(13, 4, 2, 1, &a, &b); assert_int_equal(a, 8); assert_int_equal(b, 13);
    pool_split(3, 4, 2, 0, &a, &b); assert_int_equal(a, 0); assert_int_equal(b, 0);
    pool_split(3, 4, 2, 1, &a, &b); assert_int_equal(a, 0); assert_int_equal(b, 3);
}

/* A float reduction per range whose result depends on the order within the range only: the
 * outputs (one writer each) must be bit-identical for any thread count. */
typedef struct { const float *x; float *y; int64_t m; } red_ctx;
static void job_red(void *ctx, int64_t i0, int64_t i1, int ith) {
    (void)ith;
    red_ctx *c = ctx;
    for (int64_t i = i0; i < i1; i++) {
        float s = 0.0f;
        for (int64_t k = 0; k < c->m; k++) s += c->x[i * c->m + k] * (float)(k + 1);
        c->y[i] = s;
    }
}

static void test_bit_identical(void **state) {
    (void)state;
    enum { N = 777, M = 97 };
    float *x = malloc(sizeof(float) * N * M), *y[3];
    for (int i = 0; i < N * M; i++) x[i] = (float)((i * 2654435761u) % 1000) / 999.0f - 0.5f;
    for (int T = 1; T <= 3; T++) {
        tern_pool *p;
        assert_int_equal(pool_init(&p, T, NULL), TERN_OK);
        y[T - 1] = malloc(sizeof(float) * N);
        red_ctx c = {x, y[T - 1], M};
        pool_for(p, N, T == 3 ? 5 : 4, job_red, &c);       /* odd split for 3 threads */
        pool_free(p);
    }
    assert_memory_equal(y[0], y[1], sizeof(float) * N);
    assert_memory_equal(y[0], y[2], sizeof(float) * N);
    for (int i = 0; i < 3; i++) free(y[i]);
    free(x);
}

typedef struct { atomic_long sum; } many_ctx;
static void job_many(void *ctx, int64_t i0, int64_t i1, int ith) {
    (void)ith;
    many_ctx *c = ctx;
    atomic_fetch_add(&c->sum, (long)(i1 - i0));
}

static void test_many_short_jobs(void **state) {
    (void)state;
    tern_pool *p;
    assert_int_equal(pool_init(&p, 2, NULL), TERN_OK);
    many_ctx c;
    atomic_init(&c.sum, 0);
    for (int i = 0; i < 20000; i++) pool_for(p, 8, 4, job_many, &c);
    assert_int_equal(atomic_load(&c.sum), 20000L * 8);
    /* let the workers fall asleep, then jobs must still complete */
    for (int i = 0; i < 5; i++) {
        struct timespec ts = {0, 3 * 1000 * 1000};
        nanosleep(&ts, NULL);
        pool_for(p, 100, 4, job_many, &c);
    }
    assert_int_equal(atomic_load(&c.sum), 20000L * 8 + 500);
    pool_free(p);
    pool_free(NULL);
}

static void test_init_errors(void **state) {
    (void)state;
    tern_pool *p = (tern_pool *)(uintptr_t)1;
    tern_err err = {0};
    assert_int_equal(pool_init(&p, 0, &err), TERN_E_ARG);
    assert_null(p);
}

int suite_pool(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cover),
        cmocka_unit_test(test_bit_identical),
        cmocka_unit_test(test_many_short_jobs),
        cmocka_unit_test(test_init_errors),
    };
    TEST_RUN_SUITE("pool", tests);
}
