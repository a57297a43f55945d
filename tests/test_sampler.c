/* test_sampler.c: the sampler chain (src/sampling) against values computed here independently:
 * hand-built distributions (softmax in double of the logits the stage should keep), a full-sort
 * reference for top-k/top-p on a vocabulary-sized input, the penalty rule on positive and
 * negative logits, chi-square checks of draw frequencies with fixed seeds, and every table of
 * vocabulary passes against the generic one, bit for bit. */
#include "test.h"

#include "kernels/kernels.h"
#include "model/vexp.h"
#include "sampling/passes.h"
#include "sampling/sampler.h"
#include "tern.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static tern_sampler_params params(float temp, int top_k, float top_p, float min_p) {
    tern_sampler_params p;
    tern_sampler_params_default(&p);
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = 1234;
    return p;
}

static tern_sampler *mk(int n_vocab, const tern_sampler_params *p) {
    tern_sampler *s = NULL;
    tern_err e = {0};
    assert_int_equal(tern_sampler_init_vocab(&s, n_vocab, p, &e), TERN_OK);
    assert_non_null(s);
    return s;
}

/* Expected distribution: softmax of logits[keep[i]] / temp, in double. */
static void softmax_ref(const float *logits, const int *keep, int n, double temp, double *out) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) mx = fmax(mx, logits[keep[i]]);
    for (int i = 0; i < n; i++) sum += out[i] = exp((logits[keep[i]] - mx) / temp);
    for (int i = 0; i < n; i++) out[i] /= sum;
}

/* Checks samp_dist's result equals the set keep[] with softmax probabilities (in any order: the
 * small path returns it best first, the wide path in id order). */
static void check_dist(tern_sampler *s, const float *logits, const int *keep, int n, double temp) {
    int32_t ids[64];
    float probs[64];
    double want[64];
    int got = samp_dist(s, logits, ids, probs, 64);
    assert_int_equal(got, n);
    softmax_ref(logits, keep, n, temp, want);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < n && keep[j] != ids[i]) j++;
        if (j == n) fail_msg("id %d kept, expected only the listed ones", ids[i]);
        for (int k = 0; k < i; k++) assert_int_not_equal(ids[k], ids[i]);
        if (fabs(probs[i] - want[j]) > 1e-6) fail_msg("prob of id %d = %.8f, expected %.8f", ids[i], probs[i], want[j]);
    }
}

static void test_greedy_ties_and_negative(void **state) {
    (void)state;
    tern_sampler_params p = params(0.0f, 40, 0.95f, 0.05f);
    tern_sampler *s = mk(6, &p);
    const float a[6] = {-3.0f, -1.0f, -2.0f, -1.0f, -5.0f, -1.5f};     /* tie at ids 1 and 3 */
    for (int i = 0; i < 10; i++) assert_int_equal(tern_sampler_sample(s, a), 1);
    const float b[6] = {0.5f, 2.0f, 7.0f, 7.0f, 7.0f, 1.0f};
    assert_int_equal(tern_sampler_sample(s, b), 2);
    tern_sampler_free(s);
    p.temp = -1.0f;                                                      /* negative temp is greedy too */
    s = mk(6, &p);
    assert_int_equal(tern_sampler_sample(s, b), 2);
    tern_sampler_free(s);
}

static void test_k1_is_argmax(void **state) {
    (void)state;
    tern_sampler_params p = params(5.0f, 1, 1.0f, 0.0f);               /* hot, but k = 1 */
    tern_sampler *s = mk(5, &p);
    const float l[5] = {1.0f, 1.2f, 1.1f, 1.2f, 0.0f};
    for (int i = 0; i < 200; i++) assert_int_equal(tern_sampler_sample(s, l), 1);
    const int keep[1] = {1};
    check_dist(s, l, keep, 1, 5.0);
    tern_sampler_free(s);
}

static void test_plain_softmax_and_temperature(void **state) {
    (void)state;
    const float l[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    const int all[4] = {0, 1, 2, 3};                  /* nothing sorted: id order */
    tern_sampler_params p = params(1.0f, 0, 1.0f, 0.0f);
    tern_sampler *s = mk(4, &p);
    check_dist(s, l, all, 4, 1.0);
    /* hand check of one value: e^4 / (e + e^2 + e^3 + e^4) = 0.643914 */
    int32_t ids[4];
    float pr[4];
    assert_int_equal(samp_dist(s, l, ids, pr, 4), 4);
    assert_true(fabsf(pr[3] - 0.6439142f) < 1e-6f);
    tern_sampler_free(s);
    p.temp = 0.5f;
    s = mk(4, &p);
    check_dist(s, l, all, 4, 0.5);
    tern_sampler_free(s);
}

static void test_top_k(void **state) {
    (void)state;
    const float l[6] = {0.1f, 3.0f, -2.0f, 3.0f, 2.5f, 1.0f};
    tern_sampler_params p = params(1.0f, 3, 1.0f, 0.0f);
    tern_sampler *s = mk(6, &p);
    const int keep[3] = {1, 3, 4};                    /* sorted best first, tie by lower id */
    check_dist(s, l, keep, 3, 1.0);
    tern_sampler_free(s);
    p.top_k = 6;                                      /* k >= n_vocab: a no-op */
    s = mk(6, &p);
    const int all[6] = {0, 1, 2, 3, 4, 5};
    check_dist(s, l, all, 6, 1.0);
    tern_sampler_free(s);
}

/* probabilities 0.05, 0.5, 0.15, 0.3 at ids 0..3 (logits = their logs) */
static const float pl_logits[4] = {-2.995732274f, -0.693147181f, -1.897119985f, -1.203972804f};

static void test_top_p(void **state) {
    (void)state;
    struct { float top_p; int n; } cases[] = {
        {1e-6f, 1}, {0.5f, 1}, {0.75f, 2}, {0.81f, 3}, {0.96f, 4}, {1.0f, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tern_sampler_params p = params(1.0f, 0, cases[c].top_p, 0.0f);
        tern_sampler *s = mk(4, &p);
        static const int sorted[4] = {1, 3, 2, 0};
        static const int ids[4] = {0, 1, 2, 3};
        /* top_p >= 1 is disabled: no sort, id order */
        check_dist(s, pl_logits, cases[c].top_p >= 1.0f ? ids : sorted, cases[c].n, 1.0);
        tern_sampler_free(s);
    }
    /* top-k then top-p: the mass is over the top-k survivors (llama.cpp renormalises). Top-2
     * masses: 0.5/0.8 = 0.625, then 1.0; top_p 0.6 keeps one, 0.7 keeps both. */
    tern_sampler_params p = params(1.0f, 2, 0.6f, 0.0f);
    tern_sampler *s = mk(4, &p);
    const int k1[1] = {1}, k2[2] = {1, 3};
    check_dist(s, pl_logits, k1, 1, 1.0);
    tern_sampler_free(s);
    p.top_p = 0.7f;
    s = mk(4, &p);
    check_dist(s, pl_logits, k2, 2, 1.0);
    tern_sampler_free(s);
}

static void test_min_p(void **state) {
    (void)state;
    /* best 0.5: min_p 0.2 -> threshold 0.1 keeps 0.5, 0.3, 0.15 (in id order, nothing sorted) */
    tern_sampler_params p = params(1.0f, 0, 1.0f, 0.2f);
    tern_sampler *s = mk(4, &p);
    const int k3[3] = {1, 2, 3};
    check_dist(s, pl_logits, k3, 3, 1.0);
    tern_sampler_free(s);
    p.min_p = 0.7f;                                   /* threshold 0.35: only the best */
    s = mk(4, &p);
    const int k1[1] = {1};
    check_dist(s, pl_logits, k1, 1, 1.0);
    tern_sampler_free(s);
    p.min_p = 1.0f;                                   /* still keeps the best */
    s = mk(4, &p);
    check_dist(s, pl_logits, k1, 1, 1.0);
    tern_sampler_free(s);
    /* after top-k (sorted): min_p 0.5 -> threshold 0.25 keeps 0.5 and 0.3 */
    p = params(1.0f, 3, 1.0f, 0.5f);
    s = mk(4, &p);
    const int k2[2] = {1, 3};
    check_dist(s, pl_logits, k2, 2, 1.0);
    tern_sampler_free(s);
}

static void test_repeat_penalty(void **state) {
    (void)state;
    tern_sampler_params p = params(1.0f, 0, 1.0f, 0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 3;
    tern_sampler *s = mk(4, &p);
    tern_sampler_accept(s, 0);
    tern_sampler_accept(s, 1);
    tern_sampler_accept(s, 0);                        /* repeated: penalised once, not twice */
    const float l[4] = {2.0f, -1.0f, 0.5f, 1.0f};
    const float pen[4] = {1.0f, -2.0f, 0.5f, 1.0f};  /* 2/2 and -1*2 */
    const int all[4] = {0, 1, 2, 3};
    int32_t ids[4];
    float pr[4];
    double want[4];
    assert_int_equal(samp_dist(s, l, ids, pr, 4), 4);
    softmax_ref(pen, all, 4, 1.0, want);
    for (int i = 0; i < 4; i++) assert_true(fabs(pr[i] - want[i]) < 1e-6);
    /* window: after two more tokens, 0 and 1 have left the last 3 ([0, 2, 3]: 0 stays) */
    tern_sampler_accept(s, 2);
    tern_sampler_accept(s, 3);
    const float pen2[4] = {1.0f, -1.0f, 0.25f, 0.5f};
    assert_int_equal(samp_dist(s, l, ids, pr, 4), 4);
    softmax_ref(pen2, all, 4, 1.0, want);
    for (int i = 0; i < 4; i++) assert_true(fabs(pr[i] - want[i]) < 1e-6);
    tern_sampler_accept(s, 99);                       /* outside the vocabulary: ignored */
    assert_int_equal(samp_dist(s, l, ids, pr, 4), 4);
    for (int i = 0; i < 4; i++) assert_true(fabs(pr[i] - want[i]) < 1e-6);
    /* reset forgets the history */
    tern_sampler_reset(s);
    check_dist(s, l, all, 4, 1.0);
    tern_sampler_free(s);

    /* greedy with the penalty: a repeated token loses the argmax, positive or negative */
    p = params(0.0f, 40, 0.95f, 0.05f);
    p.repeat_penalty = 1.5f;
    s = mk(2, &p);
    const float pos[2] = {3.0f, 2.9f};                /* 3/1.5 = 2 < 2.9 */
    const float neg[2] = {-1.0f, -1.4f};              /* -1*1.5 = -1.5 < -1.4 */
    assert_int_equal(tern_sampler_sample(s, pos), 0);
    tern_sampler_accept(s, 0);
    assert_int_equal(tern_sampler_sample(s, pos), 1);
    assert_int_equal(tern_sampler_sample(s, neg), 1);
    tern_sampler_free(s);
    /* repeat_last_n 0: penalty off */
    p.repeat_last_n = 0;
    s = mk(2, &p);
    tern_sampler_accept(s, 0);
    assert_int_equal(tern_sampler_sample(s, pos), 0);
    tern_sampler_free(s);
}

/* logit bias: the distribution is the softmax of the biased logits (computed here), before the
 * penalty (which sees the biased value's sign); -inf bans; the draws of a biased sampler equal
 * those of an unbiased one given the biased logits (same seed), on the small and the wide path;
 * bad ids and values are refused and leave the biases in place. */
static void test_logit_bias(void **state) {
    (void)state;
    tern_sampler_params p = params(1.0f, 0, 1.0f, 0.0f);
    tern_sampler *s = mk(4, &p);
    const float l[4] = {2.0f, -1.0f, 0.5f, 1.0f};
    const int32_t ids[3] = {1, 3, 1};
    const float bias[3] = {1.5f, -INFINITY, 0.5f};    /* id 1 twice: +2 in all; id 3 banned */
    tern_err e = {0};
    assert_int_equal(tern_sampler_set_logit_bias(s, ids, bias, 3, &e), TERN_OK);
    {   /* the softmax of the biased logits, computed here (the banned id: probability 0) */
        const float biased[4] = {2.0f, 1.0f, 0.5f, -INFINITY};
        const int all[4] = {0, 1, 2, 3};
        int32_t got[4];
        float pr[4];
        double want[4];
        const int n = samp_dist(s, l, got, pr, 4);
        assert_true(n == 3 || n == 4);
        softmax_ref(biased, all, 4, 1.0, want);
        for (int i = 0; i < n; i++) assert_true(fabs(pr[i] - want[got[i]]) < 1e-6);
        assert_true(fabs(want[3]) == 0.0);
    }
    /* greedy: the bias moves the argmax; the ban holds even for the largest logit */
    tern_sampler_params g = params(0.0f, 40, 0.95f, 0.05f);
    tern_sampler *sg = mk(4, &g);
    const float top3[4] = {0.0f, 0.0f, 0.0f, 9.0f};
    const int32_t ban3 = 3, up2 = 2;
    const float ninf = -INFINITY, plus = 0.5f;
    assert_int_equal(tern_sampler_sample(sg, top3), 3);
    assert_int_equal(tern_sampler_set_logit_bias(sg, &ban3, &ninf, 1, &e), TERN_OK);
    assert_int_equal(tern_sampler_sample(sg, top3), 0);   /* ties to the lowest id */
    assert_int_equal(tern_sampler_set_logit_bias(sg, &up2, &plus, 1, &e), TERN_OK);   /* replaces the ban */
    assert_int_equal(tern_sampler_sample(sg, top3), 3);
    const float top2[4] = {0.0f, 0.0f, 0.0f, 0.25f};
    assert_int_equal(tern_sampler_sample(sg, top2), 2);
    /* the penalty comes after the bias: -1 + 2 = 1 > 0 is divided, not multiplied */
    g.repeat_penalty = 4.0f;
    tern_sampler *sp = mk(2, &g);
    const int32_t one = 1;
    const float two = 2.0f;
    assert_int_equal(tern_sampler_set_logit_bias(sp, &one, &two, 1, &e), TERN_OK);
    tern_sampler_accept(sp, 1);
    const float pl[2] = {0.3f, -1.0f};                /* id 1: (-1 + 2) / 4 = 0.25 < 0.3 */
    assert_int_equal(tern_sampler_sample(sp, pl), 0);
    tern_sampler_free(sp);
    /* every token banned: the draw still returns an id of the vocabulary */
    const int32_t all4[4] = {0, 1, 2, 3};
    const float ban4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    assert_int_equal(tern_sampler_set_logit_bias(s, all4, ban4, 4, &e), TERN_OK);
    for (int i = 0; i < 4; i++) {
        const int32_t t = tern_sampler_sample(s, l);
        assert_true(t >= 0 && t < 4);
    }
    /* a huge bias on a huge logit stays finite (clamped to FLT_MAX): the draw is still that token,
     * on the greedy and the wide path */
    {
        const float big[4] = {3e38f, 0.0f, 0.0f, 1.0f};
        const int32_t b0 = 0;
        const float huge = 3e38f;
        tern_sampler_params w = params(1.0f, 0, 1.0f, 0.0f);
        tern_sampler *sw = mk(4, &w);
        assert_int_equal(tern_sampler_set_logit_bias(sw, &b0, &huge, 1, &e), TERN_OK);
        for (int i = 0; i < 8; i++) assert_int_equal(tern_sampler_sample(sw, big), 0);
        int32_t got[4];
        float pr[4];
        const int nd = samp_dist(sw, big, got, pr, 4);
        for (int i = 0; i < nd; i++)
            if (!(pr[i] == (got[i] == 0 ? 1.0f : 0.0f))) fail_msg("huge bias: p(%d) = %g", (int)got[i], (double)pr[i]);
        tern_sampler_free(sw);
        tern_sampler *s0 = mk(4, &g);
        assert_int_equal(tern_sampler_set_logit_bias(s0, &b0, &huge, 1, &e), TERN_OK);
        assert_int_equal(tern_sampler_sample(s0, big), 0);
        tern_sampler_free(s0);
    }
    /* refused: an id outside the vocabulary, NaN, +inf, n < 0; the biases in place stay */
    const int32_t bad_id = 4;
    const float nan_v = NAN, inf_v = INFINITY, zero = 0.0f;
    assert_int_equal(tern_sampler_set_logit_bias(sg, &bad_id, &zero, 1, &e), TERN_E_ARG);
    assert_non_null(strstr(e.msg, "token 4 (entry 1 of 1): not a token of the model, whose vocabulary has ids 0..3"));
    assert_int_equal(tern_sampler_set_logit_bias(sg, &up2, &nan_v, 1, &e), TERN_E_ARG);
    assert_int_equal(tern_sampler_set_logit_bias(sg, &up2, &inf_v, 1, &e), TERN_E_ARG);
    assert_int_equal(tern_sampler_set_logit_bias(sg, &up2, &plus, -1, &e), TERN_E_ARG);
    assert_int_equal(tern_sampler_set_logit_bias(NULL, &up2, &plus, 1, &e), TERN_E_ARG);
    assert_int_equal(tern_sampler_sample(sg, top2), 2);   /* still +0.5 on id 2 */
    assert_int_equal(tern_sampler_set_logit_bias(sg, NULL, NULL, 0, &e), TERN_OK);   /* cleared */
    assert_int_equal(tern_sampler_sample(sg, top2), 3);
    tern_sampler_free(sg);
    tern_sampler_free(s);
    /* draws: biased sampler on l == plain sampler on l + bias, same seed; small (top-k 40) and
     * wide (top-k off, top-p 0.9) paths */
    enum { V = 5000, T = 200, NB = 64 };
    float *lv = malloc(V * sizeof *lv), *lb = malloc(V * sizeof *lb);
    int32_t bid[NB];
    float bv[NB];
    srand(11);
    for (int i = 0; i < V; i++) lv[i] = (float)rand() / RAND_MAX * 6.0f;
    memcpy(lb, lv, V * sizeof *lb);
    for (int i = 0; i < NB; i++) {
        bid[i] = (int32_t)(((unsigned)i * 2654435761u) % V);
        bv[i] = i % 5 == 0 ? -INFINITY : (float)(i % 7) - 1.5f;
        lb[bid[i]] += bv[i];
    }
    for (int path = 0; path < 2; path++) {
        tern_sampler_params q = path ? params(0.9f, 0, 0.9f, 0.02f) : params(0.9f, 40, 0.95f, 0.05f);
        tern_sampler *a = mk(V, &q), *b = mk(V, &q);
        assert_int_equal(tern_sampler_set_logit_bias(a, bid, bv, NB, &e), TERN_OK);
        for (int t = 0; t < T; t++) assert_int_equal(tern_sampler_sample(a, lv), tern_sampler_sample(b, lb));
        tern_sampler_free(a);
        tern_sampler_free(b);
    }
    free(lv);
    free(lb);
}

/* Chi-square of the counts of n draws against probabilities want[] (k categories). */
static double chi2(const int *count, const double *want, int k, int n) {
    double x = 0;
    for (int i = 0; i < k; i++) {
        double e = want[i] * n;
        x += (count[i] - e) * (count[i] - e) / e;
    }
    return x;
}

static void test_draw_frequencies(void **state) {
    (void)state;
    enum { K = 8, N = 40000 };
    const float l[K] = {0.3f, -1.0f, 1.7f, 0.0f, 2.2f, -0.4f, 1.1f, 0.9f};
    const int all[K] = {0, 1, 2, 3, 4, 5, 6, 7};
    double want[K];
    /* temperature 0.7, all filters off: chi2 with 7 degrees of freedom; 24.32 is the 0.999
     * quantile. The seed is fixed, so the statistic is a fixed number, and a sampler drawing
     * from the wrong distribution (e.g. ignoring temp: chi2 in the thousands) fails. */
    tern_sampler_params p = params(0.7f, 0, 1.0f, 0.0f);
    tern_sampler *s = mk(K, &p);
    int count[K] = {0};
    for (int i = 0; i < N; i++) count[tern_sampler_sample(s, l)]++;
    softmax_ref(l, all, K, 0.7, want);
    double x = chi2(count, want, K, N);
    if (x > 24.32) fail_msg("chi2 %.2f > 24.32 (temp 0.7)", x);
    tern_sampler_free(s);

    /* top-k 3 at temp 1.3: only ids 4, 2, 6 may appear, with softmax(l/1.3) over them
     * (2 degrees of freedom: 13.82 at 0.999) */
    p = params(1.3f, 3, 1.0f, 0.0f);
    s = mk(K, &p);
    memset(count, 0, sizeof count);
    for (int i = 0; i < N; i++) count[tern_sampler_sample(s, l)]++;
    const int keep[3] = {4, 2, 6};
    double w3[3];
    int c3[3] = {count[4], count[2], count[6]};
    softmax_ref(l, keep, 3, 1.3, w3);
    assert_int_equal(c3[0] + c3[1] + c3[2], N);
    x = chi2(c3, w3, 3, N);
    if (x > 13.82) fail_msg("chi2 %.2f > 13.82 (top-k 3, temp 1.3)", x);
    tern_sampler_free(s);
}

static void test_seed_determinism(void **state) {
    (void)state;
    enum { V = 1000, T = 300 };
    float *l = malloc(V * sizeof *l);
    srand(7);
    for (int i = 0; i < V; i++) l[i] = (float)rand() / RAND_MAX * 4.0f;
    tern_sampler_params p = params(1.0f, 0, 0.95f, 0.0f);
    p.seed = 42;
    tern_sampler *a = mk(V, &p), *b = mk(V, &p);
    p.seed = 43;
    tern_sampler *c = mk(V, &p);
    int32_t first[T];
    int differ = 0;
    for (int t = 0; t < T; t++) {
        int32_t x = tern_sampler_sample(a, l), y = tern_sampler_sample(b, l), z = tern_sampler_sample(c, l);
        assert_int_equal(x, y);
        differ += x != z;
        first[t] = x;
    }
    assert_true(differ > T / 2);                      /* another seed, another stream */
    tern_sampler_reset(a);                            /* reset replays the stream */
    for (int t = 0; t < T; t++) assert_int_equal(tern_sampler_sample(a, l), first[t]);
    assert_true(tern_sampler_seed(a) == 42);
    tern_sampler_free(a);
    tern_sampler_free(b);
    tern_sampler_free(c);
    /* TERN_SEED_RANDOM draws a seed and reports it */
    p.seed = TERN_SEED_RANDOM;
    a = mk(V, &p);
    assert_true(tern_sampler_seed(a) != TERN_SEED_RANDOM);
    tern_sampler_free(a);
    /* the stream itself: xoshiro256** is fixed by its seed (first outputs for seed 0 through
     * splitmix64: two independent runs of the generator must agree, and u in [0, 1)) */
    samp_rng r1, r2;
    samp_rng_seed(&r1, 0);
    samp_rng_seed(&r2, 0);
    for (int i = 0; i < 1000; i++) {
        double u = samp_rng_uniform(&r1);
        assert_true(u >= 0.0 && u < 1.0);
        assert_true(u == samp_rng_uniform(&r2));
    }
    free(l);
}

/* Full-sort reference on a vocabulary-sized input with many ties: the kept set of top-k and of
 * top-p (without top-k: the partial-selection path) equals sorting everything. */
typedef struct { float l; int id; } ref_c;
static int ref_cmp(const void *a, const void *b) {
    const ref_c *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return x->id - y->id;
}

static void test_large_vocab_vs_full_sort(void **state) {
    (void)state;
    enum { V = 151936 };
    float *l = malloc(V * sizeof *l);
    ref_c *r = malloc(V * sizeof *r);
    int32_t *ids = malloc(V * sizeof *ids);
    float *pr = malloc(V * sizeof *pr);
    srand(11);
    for (int i = 0; i < V; i++) l[i] = (float)(rand() % 2000) / 100.0f - 10.0f;   /* many ties */
    l[777] = NAN;                                     /* counts as -inf */
    for (int i = 0; i < V; i++) r[i] = (ref_c){isnan(l[i]) ? -INFINITY : l[i], i};
    qsort(r, V, sizeof *r, ref_cmp);

    const int ks[] = {1, 2, 40, 1000, 50000};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        tern_sampler_params p = params(1.0f, ks[t], 1.0f, 0.0f);
        tern_sampler *s = mk(V, &p);
        int n = samp_dist(s, l, ids, pr, V);
        assert_int_equal(n, ks[t]);
        if (ks[t] <= 256) {                           /* small path: best first */
            for (int i = 0; i < n; i++) assert_int_equal(ids[i], r[i].id);
        } else {                                      /* wide path: the same set in id order */
            for (int i = 1; i < n; i++) assert_true(ids[i - 1] < ids[i]);
            unsigned char *in = calloc(V, 1);
            for (int i = 0; i < n; i++) in[r[i].id] = 1;
            for (int i = 0; i < n; i++) assert_int_equal(in[ids[i]], 1);
            free(in);
        }
        tern_sampler_free(s);
    }
    /* top-p alone: the smallest prefix of the full sort whose mass reaches p, with the documented
     * integer mass (q = floor(e^(l - max) * 2^30), target = ceil(p * sum q)); kept as a set (the
     * selection leaves it in partition order). Also within 0.1% of the count that a double
     * softmax gives. */
    const float mx = r[0].l;
    uint64_t qtot = 0;
    uint32_t *q = malloc(V * sizeof *q);
    double dtot = 0;
    for (int i = 0; i < V; i += 8) {
        attn_v8f v;
        for (int k = 0; k < 8; k++) v[k] = i + k < V ? r[i + k].l - mx : -INFINITY;
        const attn_v8f e = vexp_le0(&v);
        for (int k = 0; k < 8 && i + k < V; k++) { q[i + k] = (uint32_t)(e[k] * 1073741824.0f); qtot += q[i + k]; }
    }
    for (int i = 0; i < V; i++) dtot += exp((double)r[i].l - mx);
    const float ps[] = {0.001f, 0.3f, 0.9f, 0.95f, 0.999f};
    unsigned char *mark = malloc(V);
    for (size_t t = 0; t < sizeof ps / sizeof ps[0]; t++) {
        const uint64_t target = (uint64_t)ceil((double)ps[t] * (double)qtot);
        int want = 0, want_d = 0;
        uint64_t acc = 0;
        while (want < V && acc < target) acc += q[want++];
        double cum = 0;
        while (want_d < V && cum < ps[t]) cum += exp((double)r[want_d++].l - mx) / dtot;
        assert_true(abs(want - want_d) <= 1 + want_d / 1000);
        tern_sampler_params p = params(1.0f, 0, ps[t], 0.0f);
        tern_sampler *s = mk(V, &p);
        int n = samp_dist(s, l, ids, pr, V);
        if (n != want) fail_msg("top_p %g kept %d, full sort says %d", (double)ps[t], n, want);
        memset(mark, 0, V);
        for (int i = 0; i < n; i++) mark[r[i].id] = 1;
        for (int i = 0; i < n; i++) assert_int_equal(mark[ids[i]], 1);
        tern_sampler_free(s);
    }
    free(mark);
    free(q);
    /* greedy on the large input: the lowest id among the maxima */
    tern_sampler_params p = params(0.0f, 40, 0.95f, 0.05f);
    tern_sampler *s = mk(V, &p);
    assert_int_equal(tern_sampler_sample(s, l), r[0].id);
    tern_sampler_free(s);
    free(l);
    free(r);
    free(ids);
    free(pr);
}

static void test_degenerate_logits(void **state) {
    (void)state;
    const float ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    const float pinf[3] = {0.0f, INFINITY, 1.0f};
    const float nan3[3] = {NAN, 1.0f, NAN};
    tern_sampler_params p = params(1.0f, 0, 0.9f, 0.1f);
    tern_sampler *s = mk(3, &p);
    for (int i = 0; i < 50; i++) {
        int32_t a = tern_sampler_sample(s, ninf);
        assert_true(a >= 0 && a < 3);
        assert_int_equal(tern_sampler_sample(s, pinf), 1);
        assert_int_equal(tern_sampler_sample(s, nan3), 1);
    }
    tern_sampler_free(s);
}

/* Settings the init accepts at their extremes: a positive temperature so small that 1 / temp
 * overflows draws the argmax (the limit of the softmax), not a NaN-weighted id; a tiny repeat
 * penalty pushes a repeated positive logit to FLT_MAX, not +inf, so it is drawn every time; on
 * the small (top-k) and the wide path both. */
static void test_extreme_settings(void **state) {
    (void)state;
    const float l[8] = {-10.0f, 1.0f, 2.0f, -3.0f, 0.5f, 1.5f, 4.0f, -1.0f};   /* argmax 6 */
    for (int k = 0; k <= 2; k += 2) {                 /* top_k 0 (wide), 2 (small) */
        tern_sampler_params p = params(1e-40f, k, 1.0f, 0.0f);
        tern_sampler *s = mk(8, &p);
        for (int i = 0; i < 200; i++) assert_int_equal(tern_sampler_sample(s, l), 6);
        int32_t ids[8];
        float pr[8];
        assert_int_equal(samp_dist(s, l, ids, pr, 8), 1);
        assert_true(ids[0] == 6 && pr[0] == 1.0f);
        tern_sampler_free(s);
        p = params(1.0f, k == 0 ? 0 : 8, 1.0f, 0.0f);
        p.repeat_penalty = 1e-38f;
        p.repeat_last_n = 4;
        s = mk(8, &p);
        tern_sampler_accept(s, 5);                    /* 1.5 / 1e-38 > FLT_MAX: clamped */
        for (int i = 0; i < 200; i++) assert_int_equal(tern_sampler_sample(s, l), 5);
        tern_sampler_free(s);
    }
}

/* The mask applies to the distribution speculative verification reads (samp_dist) as to the draw:
 * a banned id has no probability. */
static void ban_id2(void *user, float *logits, int32_t n) {
    (void)user;
    assert_int_equal(n, 4);
    logits[2] = -INFINITY;
}
static void test_mask_in_dist(void **state) {
    (void)state;
    const float l[4] = {0.0f, 1.0f, 3.0f, 0.5f};
    for (int k = 0; k <= 3; k += 3) {                 /* wide, small */
        tern_sampler_params p = params(1.0f, k, 1.0f, 0.0f);
        tern_sampler *s = mk(4, &p);
        tern_err e = {0};
        assert_int_equal(tern_sampler_set_mask(s, ban_id2, NULL, &e), TERN_OK);
        const int keep[3] = {0, 1, 3};
        double want[3];
        softmax_ref(l, keep, 3, 1.0, want);
        int32_t ids[4];
        float pr[4];
        const int n = samp_dist(s, l, ids, pr, 4);    /* the wide path lists a banned id, at 0 */
        assert_true(n == 3 || n == 4);
        for (int i = 0; i < n; i++) {
            int j = 0;
            while (j < 3 && keep[j] != ids[i]) j++;
            const double w = j < 3 ? want[j] : 0.0;
            if (fabs(pr[i] - w) > 1e-6) fail_msg("top_k %d: prob of id %d = %.8f, expected %.8f", k, ids[i], pr[i], w);
        }
        for (int i = 0; i < 100; i++) assert_int_not_equal(tern_sampler_sample(s, l), 2);
        tern_sampler_free(s);
    }
}

static void test_init_errors(void **state) {
    (void)state;
    tern_sampler *s = (tern_sampler *)1;
    tern_err e = {0};
    tern_sampler_params p = params(1.0f, 0, 1.0f, 0.0f);
    assert_int_equal(tern_sampler_init_vocab(&s, 0, &p, &e), TERN_E_ARG);
    assert_null(s);
    assert_non_null(strstr(e.msg, "n_vocab"));
    static const char *const what[] = {"temp", "top_p", "min_p", "repeat_penalty", "repeat_last_n"};
    for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) {
        p = params(1.0f, 0, 1.0f, 0.0f);
        switch (i) {
        case 0: p.temp = NAN; break;
        case 1: p.top_p = INFINITY; break;
        case 2: p.min_p = 1.5f; break;
        case 3: p.repeat_penalty = 0.0f; break;
        case 4: p.repeat_last_n = -1; break;
        }
        tern_err_clear(&e);
        assert_int_equal(tern_sampler_init_vocab(&s, 10, &p, &e), TERN_E_ARG);
        if (!strstr(e.msg, what[i])) fail_msg("message '%s' does not name %s", e.msg, what[i]);
    }
    /* NULL params: the defaults */
    assert_int_equal(tern_sampler_init_vocab(&s, 10, NULL, &e), TERN_OK);
    tern_sampler_free(s);
    tern_sampler_free(NULL);
}

/* Every pass table the host runs (sampling/passes.h) equals the generic one bit for bit, pass by
 * pass, on a vocabulary that is not a multiple of 8 with NaN, +-inf, ties and a narrowed kept
 * predicate; then whole draws of a sampler built under each kernel path agree. */
static void test_pass_tables_same_bits(void **state) {
    (void)state;
    enum { V = 151936 + 5 };
    const samp_passes *g = &samp_passes_generic;
    const samp_passes *tabs[4] = {0};
    int nt = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    const char *before = kern_isa();
    tern_err err = {0};
    if (kern_force_isa("avx2", &err) == TERN_OK) {
        tabs[nt++] = samp_passes_active();
        assert_ptr_equal(tabs[nt - 1], &samp_passes_avx2);
    }
    assert_int_equal(kern_force_isa(before, &err), TERN_OK);
#endif
    if (nt == 0) skip();
    float *l = malloc(V * sizeof *l), *x0 = malloc(V * sizeof *x0), *x1 = malloc(V * sizeof *x1);
    float *w0 = malloc(V * sizeof *w0), *w1 = malloc(V * sizeof *w1);
    uint64_t *b0 = calloc(SAMP_BINS, sizeof *b0), *b1 = calloc(SAMP_BINS, sizeof *b1);
    double *gs0 = malloc((V / 8 + 1) * sizeof *gs0), *gs1 = malloc((V / 8 + 1) * sizeof *gs1);
    samp_cand *c0 = malloc(V * sizeof *c0), *c1 = malloc(V * sizeof *c1);
    srand(5);
    for (int i = 0; i < V; i++) l[i] = (float)(rand() % 4000) / 200.0f - 10.0f;
    l[3] = NAN;
    l[9] = INFINITY;
    l[V - 1] = -INFINITY;
    l[V - 2] = 9.995f;
    for (int t = 0; t < nt; t++) {
        const samp_passes *o = tabs[t];
        float mx0, mn0, mx1, mn1;
        g->load(l, x0, V, &mx0, &mn0);
        o->load(l, x1, V, &mx1, &mn1);
        assert_memory_equal(x0, x1, V * sizeof *x0);
        assert_true(mx0 == mx1 && mn0 == mn1);
        /* above: the first id past each start whose logit is over the threshold, against a plain
         * scan, from starts on and off a vector boundary, up to the ends */
        const float ts[] = {9.99f, 9.995f, 0.0f, -INFINITY, FLT_MAX};
        const int32_t starts[] = {0, 1, 7, 8, 13, V - 9, V - 1, V};
        for (size_t a = 0; a < sizeof ts / sizeof ts[0]; a++)
            for (size_t b = 0; b < sizeof starts / sizeof starts[0]; b++) {
                int32_t want = starts[b];
                while (want < V && !(x0[want] > ts[a])) want++;
                const int32_t got0 = g->above(x0, starts[b], V, ts[a]), got1 = o->above(x1, starts[b], V, ts[a]);
                if (got0 != want || got1 != want)
                    fail_msg("above(%d, %g): generic %d, %s %d, expected %d", starts[b], (double)ts[a], got0, o->name, got1, want);
            }
        x0[9] = x1[9] = 9.995f;                       /* the passes below take mx = the max (load made +inf FLT_MAX) */
        const float mx = 9.995f, scale = (float)SAMP_BINS / 21.0f;
        const samp_keep keeps[] = {{-INFINITY, -INFINITY, INT32_MAX, true}, {2.5f, -3.0f, 70000, false}};
        for (size_t k = 0; k < sizeof keeps / sizeof keeps[0]; k++) {
            float r0[2], r1[2];
            g->kept_range(x0, V, &keeps[k], &r0[0], &r0[1]);
            o->kept_range(x1, V, &keeps[k], &r1[0], &r1[1]);
            assert_memory_equal(r0, r1, sizeof r0);
            float emx = -INFINITY, emn = INFINITY;   /* kept: all, or (here) exactly l >= 2.5 */
            for (int i = 0; i < V; i++)
                if (k == 0 || x0[i] >= 2.5f) { emx = fmaxf(emx, x0[i]); emn = fminf(emn, x0[i]); }
            if (!(r0[0] == emx && r0[1] == emn)) fail_msg("keep %d: range %a %a, expected %a %a", (int)k, (double)r0[0], (double)r0[1], (double)emx, (double)emn);
            memset(b0, 0, SAMP_BINS * sizeof *b0);
            memset(b1, 0, SAMP_BINS * sizeof *b1);
            const uint64_t t0 = g->masses(x0, w0, V, &keeps[k], mx, scale, b0);
            const uint64_t t1 = o->masses(x1, w1, V, &keeps[k], mx, scale, b1);
            assert_true(t0 == t1 && t0 > 0);
            assert_memory_equal(w0, w1, V * sizeof *w0);
            assert_memory_equal(b0, b1, SAMP_BINS * sizeof *b0);
            for (int bs = 0; bs < SAMP_BINS; bs += 97) {
                const int n0 = g->bin(x0, w0, V, mx, scale, bs, c0), n1 = o->bin(x1, w1, V, mx, scale, bs, c1);
                assert_int_equal(n0, n1);
                assert_memory_equal(c0, c1, (size_t)n0 * sizeof *c0);
            }
            for (int fm = 1; fm >= 0; fm--) {             /* from the masses first: w holds them now */
                const float inv_t = fm ? 1.0f : 1.0f / 0.7f;
                const double s0 = g->weights(x0, w0, V, &keeps[k], mx, inv_t, fm, gs0);
                const double s1 = o->weights(x1, w1, V, &keeps[k], mx, inv_t, fm, gs1);
                if (!(s0 == s1 && s0 >= 1.0)) fail_msg("keep %d fm %d: sums %.17g %.17g", (int)k, fm, s0, s1);
                assert_memory_equal(w0, w1, V * sizeof *w0);
                assert_memory_equal(gs0, gs1, (V / 8 + 1) * sizeof *gs0);
            }
        }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    /* whole draws: the same ids from a sampler made under each path */
    const tern_sampler_params ps[] = {params(1.0f, 0, 0.95f, 0.0f), params(0.8f, 0, 0.9f, 0.05f), params(1.0f, 0, 1.0f, 0.0f)};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        int32_t ids[2][64];
        const char *isas[2] = {"ref", "avx2"};
        for (int a = 0; a < 2; a++) {
            assert_int_equal(kern_force_isa(isas[a], &err), TERN_OK);
            tern_sampler *s = mk(V, &ps[k]);
            assert_int_equal(kern_force_isa(before, &err), TERN_OK);
            for (int r = 0; r < 64; r++) {
                l[(r * 7919) % V] += 0.5f;            /* the logits move between draws */
                ids[a][r] = tern_sampler_sample(s, l);
            }
            for (int r = 0; r < 64; r++) l[(r * 7919) % V] -= 0.5f;
            tern_sampler_free(s);
        }
        assert_memory_equal(ids[0], ids[1], sizeof ids[0]);
    }
#endif
    free(l); free(x0); free(x1); free(w0); free(w1); free(b0); free(b1); free(gs0); free(gs1); free(c0); free(c1);
}

int suite_sampler(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_ties_and_negative),
        cmocka_unit_test(test_k1_is_argmax),
        cmocka_unit_test(test_plain_softmax_and_temperature),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_repeat_penalty),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_draw_frequencies),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_large_vocab_vs_full_sort),
        cmocka_unit_test(test_degenerate_logits),
        cmocka_unit_test(test_extreme_settings),
        cmocka_unit_test(test_mask_in_dist),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_pass_tables_same_bits),
    };
    TEST_RUN_SUITE("sampler", tests);
}
