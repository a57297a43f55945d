/* sampler.c: the token sampler behind tern_sampler_* (tern.h).
 * Order and flag meaning follow llama.cpp's default chain (src/llama-sampling.cpp, common/
 * sampling.cpp): repetition penalty over the last n accepted tokens -> top-k -> top-p -> min-p ->
 * temperature -> draw. temp <= 0 is greedy: the argmax after the penalty, ties to the lowest id
 * (the later stages always keep the best candidate, so they cannot change it).
 *
 * Cost model: no setting sorts the vocabulary; the passes over it run 4 lanes at a time, or 8 on
 * AVX2 (passes.h: one body, the same bits). One
 * copy of the logits (sanitised; the input is const), the penalty on at most repeat_last_n ids,
 * then greedy (one max pass), or top-k <= SAMP_SMALL_K (one heap pass; the k sorted), or the
 * wide path (top-k off or larger: a quickselect copy for top-k, one max/min pass, one fused
 * mass + histogram pass and one bin pass for top-p, one weights pass and part of one for the
 * draw). Nothing allocates after init (own heapsort: glibc qsort may malloc). Figures:
 * `tern bench-kernel --sampler`.
 *
 * Candidate order is a strict total order: higher logit first, equal logits by lower id. So the
 * kept set is well defined at ties and independent of the selection algorithm. NaN logits count
 * as -inf and +inf as FLT_MAX, so the arithmetic below never meets NaN. */
#include "sampling/sampler.h"

#include "sampling/passes.h"

#include "model/vexp.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tern_sampler {
    tern_sampler_params p;
    int32_t n_vocab;
    uint64_t seed;          /* the seed in use (drawn when p.seed was TERN_SEED_RANDOM) */
    samp_rng rng;
    int32_t *hist;          /* ring of the last p.repeat_last_n accepted ids (NULL if 0) */
    int n_hist, hist_next;
    uint32_t *seen;         /* (n_vocab) stamp of the last penalty pass that touched the id */
    uint32_t stamp;
    float *x;               /* (n_vocab) sanitised, penalised logits of the current call */
    float *w;               /* (n_vocab) scratch: top-k copy, top-p masses, draw weights */
    uint64_t *bin_mass;     /* (SAMP_BINS) top-p histogram */
    double *gsum;           /* (n_vocab / 8 + 1) wide draw: the weight sum of each group of 8 ids */
    samp_cand *cand;        /* (n_vocab) small path: the candidates; wide top-p: one bin */
    int n_cand;
    bool sorted;            /* cand[0..n_cand) is in candidate order (best first) */
    bool wide;              /* this call took the wide path: kept = wide_keep() */
    bool w_masses;          /* wide: w holds top-p's masses e^(l - mx) * 2^30 (0 for the unkept) */
    float cut_l, mx, mn, thr;   /* wide: mx, mn of the kept; kept iff (l, id) >= (cut_l, cut_id) in candidate order and l >= thr */
    int32_t cut_id;
    const samp_passes *ops; /* the vocabulary passes of the kernel path active at init */
    tern_sampler_mask mask; /* tern_sampler_set_mask: called on a copy of the logits before each draw */
    void *mask_user;
    float *masked;          /* (n_vocab) that copy */
    int32_t *bias_id;       /* tern_sampler_set_logit_bias: bias_v[i] added to the logit of bias_id[i] */
    float *bias_v;
    int n_bias;
};

void tern_sampler_params_default(tern_sampler_params *p) {
    if (!p) return;
    p->temp = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = TERN_SEED_RANDOM;
}

/* ---- ordering, selection, sorting ------------------------------------------------------------ */

static inline bool cand_better(const samp_cand *a, const samp_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void cand_swap(samp_cand *a, samp_cand *b) {
    samp_cand t = *a;
    *a = *b;
    *b = t;
}

/* Sorts c[0..n) best first: insertion sort for short runs, heapsort otherwise (in place,
 * O(n log n) worst case, no allocation). */
static void cand_sift(samp_cand *c, int root, int n) {
    for (;;) {
        int child = 2 * root + 1;
        if (child >= n) return;
        /* max-heap on "worse": the root is the worst, moved to the end of the array */
        if (child + 1 < n && cand_better(&c[child], &c[child + 1])) child++;
        if (!cand_better(&c[root], &c[child])) return;
        cand_swap(&c[root], &c[child]);
        root = child;
    }
}

static void cand_sort(samp_cand *c, int n) {
    if (n <= 16) {
        for (int i = 1; i < n; i++) {
            samp_cand x = c[i];
            int j = i;
            for (; j > 0 && cand_better(&x, &c[j - 1]); j--) c[j] = c[j - 1];
            c[j] = x;
        }
        return;
    }
    for (int i = n / 2 - 1; i >= 0; i--) cand_sift(c, i, n);
    for (int end = n - 1; end > 0; end--) {
        cand_swap(&c[0], &c[end]);
        cand_sift(c, 0, end);
    }
}

/* ---- 4-lane helpers (GCC vector extensions: the same operations, so the same bits, on every
 * ISA; 4 lanes is the baseline register of x86-64 and ARM64, so no ISA flags are needed) ---- */
typedef vexp_v4f samp_v4f;
typedef int32_t samp_v4i __attribute__((vector_size(16)));
static inline __attribute__((always_inline)) samp_v4f v4_load(const float *p) { samp_v4f v; memcpy(&v, p, sizeof v); return v; }
static inline __attribute__((always_inline)) void v4_store(float *p, samp_v4f v) { memcpy(p, &v, sizeof v); }
static inline __attribute__((always_inline)) samp_v4f v4_sel(samp_v4i m, samp_v4f a, samp_v4f b) {   /* m ? a : b */
    return (samp_v4f)(((samp_v4i)a & m) | ((samp_v4i)b & ~m));
}
#define V4F(c) ((samp_v4f){c, c, c, c})

/* Largest of x[0..n) (no NaN in x), 4 lanes at a time. */
static float v4_max(const float *x, int32_t n) {
    samp_v4f m = V4F(-INFINITY);
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const samp_v4f v = v4_load(x + i);
        m = v4_sel(v > m, v, m);
    }
    float r = -INFINITY;
    for (int l = 0; l < 4; l++) r = m[l] > r ? m[l] : r;
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

/* ---- the stages ------------------------------------------------------------------------------ */
/* Two paths after load + penalty (both on s->x, the sanitised logits in id order):
 *   small (top-k in 1..SAMP_SMALL_K): the k best are picked by one pass with a heap and sorted;
 *     top-p, min-p, the weights and the draw then run on those k, best first.
 *   wide (top-k off or larger): nothing is copied or sorted; each stage narrows a predicate on
 *     (logit, id): "at least as good as the cut" (top-k, top-p) and "logit >= threshold" (min-p);
 *     the weights and the draw walk the vocabulary in id order. */
#define SAMP_SMALL_K 256

/* Copy the logits into s->x, sanitising NaN and +inf. */
/* Also the max and min of all of them into s->mx, s->mn (the wide path's, when nothing narrows
 * the candidates before it). */
static void stage_load(tern_sampler *s, const float *logits) {
    s->ops->load(logits, s->x, s->n_vocab, &s->mx, &s->mn);
    s->wide = false;
    s->w_masses = false;
    s->n_cand = 0;
    s->sorted = false;
}

/* The logit bias (OpenAI's logit_bias), first in the chain as llama.cpp's: bias_v[i] added to
 * x[bias_id[i]] in the order given (-inf bans the token; a repeated id adds each of its biases).
 * A sum past FLT_MAX is clamped to it, as stage_load clamps +inf (never NaN: the biases are
 * finite or -inf, the logits finite or -inf). */
static void stage_bias(tern_sampler *s) {
    for (int i = 0; i < s->n_bias; i++) {
        float *l = &s->x[s->bias_id[i]];
        *l += s->bias_v[i];
        if (*l > FLT_MAX) *l = FLT_MAX;
    }
}

/* Whether a stage after stage_load (the bias, the penalty) changes the logits: then the max and
 * min must be recomputed. */
static bool changed_after_load(const tern_sampler *s) {
    return s->n_bias > 0 || (s->p.repeat_penalty != 1.0f && s->n_hist > 0);
}

/* llama.cpp's repetition penalty: each distinct id among the last repeat_last_n accepted is
 * penalised once: logit / penalty if positive, logit * penalty otherwise, so its probability
 * drops (for penalty > 1) whatever the sign. */
static void stage_penalty(tern_sampler *s) {
    if (s->p.repeat_penalty == 1.0f || s->n_hist == 0) return;
    if (++s->stamp == 0) {                            /* wrapped: forget all stamps */
        memset(s->seen, 0, (size_t)s->n_vocab * sizeof *s->seen);
        s->stamp = 1;
    }
    const float pen = s->p.repeat_penalty;
    for (int i = 0; i < s->n_hist; i++) {
        const int32_t id = s->hist[i];
        if (s->seen[id] == s->stamp) continue;
        s->seen[id] = s->stamp;
        float *l = &s->x[id];
        if (*l <= 0.0f) *l *= pen;
        else if ((*l /= pen) > FLT_MAX) *l = FLT_MAX;   /* a tiny penalty: clamped as stage_bias clamps, never +inf */
    }
}

/* Argmax: the lowest id holding the largest logit. */
static int32_t stage_greedy(const tern_sampler *s) {
    const float mx = changed_after_load(s) ? v4_max(s->x, s->n_vocab) : s->mx;   /* else stage_load's */
    int32_t i = 0;
    while (s->x[i] != mx) i++;
    return i;
}

/* small path: the k best of x into cand[0..k), best first. A heap of the k best so far with the
 * worst at its root (cand_sift's heap): in id order a later id never beats an equal logit, so one
 * compare with the root rejects almost every id. */
static void stage_top_k_small(tern_sampler *s, int k) {
    samp_cand *h = s->cand;
    const float *x = s->x;
    for (int i = 0; i < k; i++) h[i] = (samp_cand){x[i], i, 0};
    for (int i = k / 2 - 1; i >= 0; i--) cand_sift(h, i, k);
    /* the ids above the heap's least, in id order: each replaces it (the least only rises, so an
     * id skipped under it would have been skipped one by one too) */
    for (int32_t i = s->ops->above(x, k, s->n_vocab, h[0].logit); i < s->n_vocab;
         i = s->ops->above(x, i + 1, s->n_vocab, h[0].logit)) {
        h[0] = (samp_cand){x[i], i, 0};
        cand_sift(h, 0, k);
    }
    cand_sort(h, k);
    s->n_cand = k;
    s->sorted = true;
}

static float cand_max_logit(const tern_sampler *s) {
    if (s->sorted) return s->cand[0].logit;
    float mx = -INFINITY;
    for (int i = 0; i < s->n_cand; i++) mx = s->cand[i].logit > mx ? s->cand[i].logit : mx;
    return mx;
}

/* e^x for x[0..n) <= 0 (vexp_le0: the same bits on every ISA), 8 at a time; strides in floats. */
static void exp_le0_n(const float *x, float *out, int n, int stride_in, int stride_out) {
    int i = 0;
    if (stride_in == 1 && stride_out == 1)
        for (; i + 4 <= n; i += 4) {
            const vexp_v4f v = v4_load(x + i);
            v4_store(out + i, vexp4_le0(&v));
        }
    for (; i < n; i += 8) {
        attn_v8f v;
        for (int l = 0; l < 8; l++) v[l] = i + l < n ? x[(size_t)(i + l) * stride_in] : -INFINITY;
        const attn_v8f e = vexp_le0(&v);
        for (int l = 0; l < 8 && i + l < n; l++) out[(size_t)(i + l) * stride_out] = e[l];
    }
}

/* Top-p mass of a logit l against the best logit mx: q = floor(e^(l - mx) * 2^30), an integer
 * (sums do not depend on their order; a candidate below 2^-30 of the best weighs 0). Both paths
 * keep the smallest best-first prefix whose mass reaches ceil(top_p * sum q) (at least one). */
static uint64_t topp_target(double p, uint64_t total) {
    const double t = ceil(p * (double)total);         /* total <= 2^48: exact in a double */
    return t < 1.0 ? 1 : t > (double)total ? total : (uint64_t)t;
}

/* small path top-p: the sorted candidates are scanned. */
static void stage_top_p_small(tern_sampler *s) {
    const double p = s->p.top_p;
    if (p >= 1.0 || s->n_cand <= 1) return;
    samp_cand *c = s->cand;
    const int n = s->n_cand;
    const float mx = c[0].logit;
    if (!(mx > -INFINITY)) return;                   /* all -inf: nothing to weigh */
    float e[SAMP_SMALL_K];
    for (int i = 0; i < n; i++) e[i] = c[i].logit - mx;
    exp_le0_n(e, e, n, 1, 1);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += c[i].q = (uint32_t)(e[i] * 1073741824.0f);   /* exact: 2^30 */
    const uint64_t target = topp_target(p, total);
    uint64_t acc = 0;
    for (int i = 0; i < n; i++) {
        acc += c[i].q;
        if (acc >= target) { s->n_cand = i + 1; return; }
    }
}

/* Keeps candidates whose probability is at least min_p times the best one's, i.e.
 * logit >= max + log(min_p) (llama.cpp compares logits the same way). Order is preserved. */
static void stage_min_p_small(tern_sampler *s) {
    const float min_p = s->p.min_p;
    if (min_p <= 0.0f || s->n_cand <= 1) return;
    const float thr = cand_max_logit(s) + logf(min_p);
    samp_cand *c = s->cand;
    int o = 0;
    for (int i = 0; i < s->n_cand; i++)
        if (c[i].logit >= thr) c[o++] = c[i];
    s->n_cand = o;                                    /* >= 1: the best always passes */
}

/* ---- wide path ---- */
/* The kept predicate (passes.h) of the current cut and threshold. */
static samp_keep wide_keep_of(const tern_sampler *s) {
    return (samp_keep){s->cut_l, s->thr, s->cut_id, s->cut_l == -INFINITY && s->cut_id == INT32_MAX && s->thr == -INFINITY};
}
static inline bool wide_keep(const tern_sampler *s, float l, int32_t id) {
    const samp_keep k = wide_keep_of(s);
    return samp_keep1(&k, l, id);
}

/* top-k above SAMP_SMALL_K: the k-th best logit v by quickselect on a copy, then the cut is v
 * with the id of the (k - #(x > v))-th id holding v. */
static void stage_top_k_wide(tern_sampler *s, int k) {
    float *w = s->w;
    const int32_t V = s->n_vocab;
    memcpy(w, s->x, (size_t)V * sizeof *w);
    int l = 0, r = V - 1;
    const int kk = k - 1;                             /* rank of the cut, best first */
    while (l < r) {                                   /* Hoare's FIND, descending */
        const float a = w[l], b = w[l + (r - l) / 2], c = w[r];
        const float piv = a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
        int i = l, j = r;
        do {
            while (w[i] > piv) i++;
            while (piv > w[j]) j--;
            if (i <= j) { const float t = w[i]; w[i] = w[j]; w[j] = t; i++; j--; }
        } while (i <= j);
        if (j < kk) l = i;
        if (kk < i) r = j;
    }
    const float v = w[kk];
    int gt = 0;
    for (int32_t i = 0; i < V; i++) gt += s->x[i] > v;
    int need = k - gt, id = 0;                        /* 1 <= need: v itself is the k-th */
    for (int32_t i = 0; i < V && need > 0; i++)
        if (s->x[i] == v && --need == 0) id = i;
    s->cut_l = v;
    s->cut_id = id;
}

/* Max (s->mx) and min (s->mn) of the kept logits. */
static void wide_max(tern_sampler *s) {
    const samp_keep kp = wide_keep_of(s);
    s->ops->kept_range(s->x, s->n_vocab, &kp, &s->mx, &s->mn);
}

/* wide top-p: masses by vexp into w; a histogram of (mx - l) in SAMP_BINS bins over the range
 * of the candidates that weigh anything finds the bin where the mass is reached; only that bin's
 * candidates are sorted (into cand) and scanned. Bins are non-decreasing in candidate order, so
 * the cut equals a full sort's. */
static void stage_top_p_wide(tern_sampler *s) {
    const double p = s->p.top_p;
    if (p >= 1.0) return;
    const int32_t V = s->n_vocab;
    const float mx = s->mx;
    if (!(mx > -INFINITY)) return;
    /* bins over d = mx - l in [0, range]: range covers every candidate that weighs anything
     * (e^-21 < 2^-30); later ones, and the unkept, fall in the last bin (the unkept with mass 0) */
    const float range = TERN_MIN(mx - s->mn, 21.0f);
    const float scale = range > 0.0f ? (float)SAMP_BINS / range : 0.0f;
    uint64_t *bm = s->bin_mass;
    memset(bm, 0, SAMP_BINS * sizeof *bm);
    const samp_keep kp = wide_keep_of(s);
    const uint64_t total = s->ops->masses(s->x, s->w, V, &kp, mx, scale, bm);   /* masses, total, histogram: one pass */
    s->w_masses = true;
    const uint64_t target = topp_target(p, total);
    uint64_t acc = 0;
    int bstar = 0;
    while (bstar < SAMP_BINS - 1 && acc + bm[bstar] < target) acc += bm[bstar++];
    samp_cand *c = s->cand;
    const int n = s->ops->bin(s->x, s->w, V, mx, scale, bstar, c);   /* the candidates of bin bstar that weigh */
    cand_sort(c, n);
    for (int t = 0; t < n; t++) {
        acc += c[t].q;
        if (acc >= target) {
            s->cut_l = c[t].logit;
            s->cut_id = c[t].id;
            return;
        }
    }
}

/* Sum of w[i0..n) (i0 a multiple of 8) in the draw's order: per group of 8 ids a double sum of
 * its lanes in order, kept in gsum[group], the groups added in order (wide_draw walks gsum). */
static double wide_sum8(const float *w, int32_t i0, int32_t n, double *gsum) {
    double sum = 0.0;
    for (int32_t i = i0; i < n; i += 8) {
        double g = 0.0;
        for (int32_t l = i; l < i + 8 && l < n; l++) g += w[l];
        gsum[i / 8] = g;
        sum += g;
    }
    return sum;
}

/* The id whose weight interval holds u (0 <= u < sum): the group sums in order, then the ids of
 * the group that holds u, with the same additions as wide_weights made. */
static int32_t wide_draw(const float *w, const double *gsum, int32_t n, double u) {
    double acc = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i += 8) {
        const double g = gsum[i / 8];
        if (g > 0.0) last = i;
        if (u < acc + g) {                            /* in this group: walk its ids */
            double a = acc;
            for (int32_t l = i; l < i + 8 && l < n; l++) {
                if (w[l] <= 0.0f) continue;
                a += w[l];
                if (u < a) return l;
            }
        }
        acc += g;
    }
    if (last < 0) return 0;
    for (int32_t l = TERN_MIN(last + 7, n - 1); l >= last; l--)   /* u within rounding of the sum */
        if (w[l] > 0.0f) return l;
    return last;
}

/* wide weights e^((l - max) / temp) of the kept ids into w (0 elsewhere); returns their sum. */
static double wide_weights(tern_sampler *s) {
    const int32_t V = s->n_vocab;
    float *w = s->w;
    const float *x = s->x;
    const float mx = s->mx;
    if (!(mx > -INFINITY)) {                          /* all -inf: uniform over the kept */
        for (int32_t i = 0; i < V; i++) w[i] = wide_keep(s, x[i], i) ? 1.0f : 0.0f;
        return wide_sum8(w, 0, V, s->gsum);
    }
    const samp_keep kp = wide_keep_of(s);
    /* at temperature 1 the weights are top-p's masses (the same vexp of the same l - mx) */
    const bool masses = s->w_masses && s->p.temp == 1.0f;
    const double sum = s->ops->weights(x, w, V, &kp, mx, 1.0f / s->p.temp, masses, s->gsum);
    return sum;                                       /* >= 1: the best has weight e^0 */
}

/* Turns the surviving logits into unnormalised weights e^((l - max) / temp) (vexp_le0), stored in
 * the logit field; returns their sum (> 0). */
static double stage_weights_small(tern_sampler *s) {
    samp_cand *c = s->cand;
    const float mx = cand_max_logit(s);
    if (!(mx > -INFINITY)) {                          /* all -inf: uniform over the survivors */
        for (int i = 0; i < s->n_cand; i++) c[i].logit = 1.0f;
        return s->n_cand;
    }
    const float inv_t = 1.0f / s->p.temp;
    for (int i = 0; i < s->n_cand; i++) c[i].logit = (c[i].logit - mx) * inv_t;
    exp_le0_n(&c[0].logit, &c[0].logit, s->n_cand, (int)(sizeof *c / sizeof(float)), (int)(sizeof *c / sizeof(float)));
    double sum = 0.0;
    for (int i = 0; i < s->n_cand; i++) sum += c[i].logit;
    return sum;
}

/* Runs bias -> penalty -> top-k -> top-p -> min-p; returns the greedy id if temp <= 0, else -1 with
 * the survivors in s->cand[0..n_cand) (small path) or described by the cut and threshold (wide). */
static int32_t sampler_chain(tern_sampler *s, const float *logits) {
    stage_load(s, logits);
    stage_bias(s);
    stage_penalty(s);
    /* temp <= 0, or so small that 1 / temp overflows (below ~2.9e-39): the limit, greedy */
    if (!(s->p.temp > 0.0f) || !(1.0f / s->p.temp <= FLT_MAX)) return stage_greedy(s);
    const int k = s->p.top_k;
    if (k > 0 && k <= SAMP_SMALL_K && k < s->n_vocab) {
        stage_top_k_small(s, k);
        stage_top_p_small(s);
        stage_min_p_small(s);
        return -1;
    }
    s->wide = true;
    s->cut_l = -INFINITY;                             /* keep all (-inf logits too) */
    s->cut_id = INT32_MAX;
    s->thr = -INFINITY;
    if (k > 0 && k < s->n_vocab) stage_top_k_wide(s, k);
    if ((k > 0 && k < s->n_vocab) || changed_after_load(s)) wide_max(s);   /* else stage_load's max and min hold */
    stage_top_p_wide(s);
    if (s->p.min_p > 0.0f && s->mx > -INFINITY) s->thr = s->mx + logf(s->p.min_p);
    return -1;
}

/* ---- public API ------------------------------------------------------------------------------ */

int tern_sampler_init_vocab(tern_sampler **out, int32_t n_vocab, const tern_sampler_params *p, tern_err *err) {
    if (!out) return tern_err_set(err, TERN_E_ARG, "tern_sampler_init: out is NULL");
    *out = NULL;
    tern_sampler_params def;
    if (!p) {
        tern_sampler_params_default(&def);
        p = &def;
    }
    if (n_vocab <= 0) return tern_err_set(err, TERN_E_ARG, "tern_sampler_init: n_vocab %d, expected > 0", (int)n_vocab);
    if (!isfinite(p->temp)) return tern_err_set(err, TERN_E_ARG, "sampler: temp %g, expected a finite number", (double)p->temp);
    if (!isfinite(p->top_p)) return tern_err_set(err, TERN_E_ARG, "sampler: top_p %g, expected a finite number", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return tern_err_set(err, TERN_E_ARG, "sampler: min_p %g, expected 0..1", (double)p->min_p);
    if (!(isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f))
        return tern_err_set(err, TERN_E_ARG, "sampler: repeat_penalty %g, expected a finite number > 0", (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return tern_err_set(err, TERN_E_ARG, "sampler: repeat_last_n %d, expected >= 0 (map -1 to the context size)", (int)p->repeat_last_n);

    tern_sampler *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->x = malloc((size_t)n_vocab * sizeof *s->x);
    s->w = malloc((size_t)n_vocab * sizeof *s->w);
    s->bin_mass = malloc(SAMP_BINS * sizeof *s->bin_mass);
    s->gsum = malloc(((size_t)n_vocab / 8 + 1) * sizeof *s->gsum);
    s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
    if (!s->cand || !s->x || !s->w || !s->bin_mass || !s->gsum || !s->seen) goto nomem;
    if (p->repeat_last_n > 0) {
        s->hist = malloc((size_t)p->repeat_last_n * sizeof *s->hist);
        if (!s->hist) goto nomem;
    }
    s->ops = samp_passes_active();
    s->seed = p->seed == TERN_SEED_RANDOM ? samp_rng_os_seed() : p->seed;
    samp_rng_seed(&s->rng, s->seed);
    *out = s;
    return TERN_OK;
nomem:
    tern_sampler_free(s);
    return tern_err_set(err, TERN_E_NOMEM, "sampler: out of memory for a vocabulary of %d", (int)n_vocab);
}

void tern_sampler_free(tern_sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->seen);
    free(s->cand);
    free(s->x);
    free(s->w);
    free(s->bin_mass);
    free(s->gsum);
    free(s->masked);
    free(s->bias_id);
    free(s->bias_v);
    free(s);
}

int tern_sampler_set_logit_bias(tern_sampler *s, const int32_t *ids, const float *bias, int n, tern_err *err) {
    if (!s) return tern_err_set(err, TERN_E_ARG, "tern_sampler_set_logit_bias: sampler is NULL");
    if (n < 0 || (n > 0 && (!ids || !bias)))
        return tern_err_set(err, TERN_E_ARG, "tern_sampler_set_logit_bias: n %d with ids %p and bias %p", n,
                            (const void *)ids, (const void *)bias);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return tern_err_set(err, TERN_E_ARG,
                                "logit bias of token %d (entry %d of %d): not a token of the model, whose vocabulary "
                                "has ids 0..%d",
                                (int)ids[i], i + 1, n, (int)s->n_vocab - 1);
        if (isnan(bias[i]) || bias[i] == INFINITY)
            return tern_err_set(err, TERN_E_ARG,
                                "logit bias of token %d (entry %d of %d): %g, expected a finite number or -inf (a ban)",
                                (int)ids[i], i + 1, n, (double)bias[i]);
    }
    int32_t *id2 = NULL;
    float *v2 = NULL;
    if (n > 0 && (!(id2 = malloc((size_t)n * sizeof *id2)) || !(v2 = malloc((size_t)n * sizeof *v2)))) {
        free(id2);
        return tern_err_set(err, TERN_E_NOMEM, "out of memory for %d logit biases", n);
    }
    if (n > 0) {
        memcpy(id2, ids, (size_t)n * sizeof *id2);
        memcpy(v2, bias, (size_t)n * sizeof *v2);
    }
    free(s->bias_id);
    free(s->bias_v);
    s->bias_id = id2;
    s->bias_v = v2;
    s->n_bias = n;
    return TERN_OK;
}

int tern_sampler_set_mask(tern_sampler *s, tern_sampler_mask mask, void *user, tern_err *err) {
    if (!s) return tern_err_set(err, TERN_E_ARG, "tern_sampler_set_mask: sampler is NULL");
    if (mask && !s->masked && !(s->masked = malloc(sizeof(float) * (size_t)s->n_vocab)))
        return tern_err_set(err, TERN_E_NOMEM, "out of memory for the sampler's masked logits");
    s->mask = mask;
    s->mask_user = user;
    return TERN_OK;
}

int32_t tern_sampler_n_vocab(const tern_sampler *s) { return s ? s->n_vocab : 0; }

/* The logits the chain sees: with a mask, a copy the mask has filtered (the draw, and the
 * distribution speculative verification uses, see only the tokens it leaves). */
static const float *masked_logits(tern_sampler *s, const float *logits) {
    if (!s->mask) return logits;
    memcpy(s->masked, logits, sizeof(float) * (size_t)s->n_vocab);
    s->mask(s->mask_user, s->masked, s->n_vocab);
    return s->masked;
}

int32_t tern_sampler_sample(tern_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const int32_t g = sampler_chain(s, masked_logits(s, logits));
    if (g >= 0) return g;
    if (s->wide) {                                    /* the draw walks the ids in order */
        const double sum = wide_weights(s);
        return wide_draw(s->w, s->gsum, s->n_vocab, samp_rng_uniform(&s->rng) * sum);
    }
    const double sum = stage_weights_small(s);
    const double u = samp_rng_uniform(&s->rng) * sum;
    double acc = 0.0;
    int last = 0;
    for (int i = 0; i < s->n_cand; i++) {
        if (s->cand[i].logit <= 0.0f) continue;
        acc += s->cand[i].logit;
        last = i;
        if (u < acc) return s->cand[i].id;
    }
    return s->cand[last].id;                          /* u within rounding of the total */
}

int samp_dist(tern_sampler *s, const float *logits, int32_t *ids, float *probs, int cap) {
    TERN_ASSERT(s && logits);
    const int32_t g = sampler_chain(s, masked_logits(s, logits));
    if (g >= 0) {
        if (cap < 1) return TERN_E_RANGE;
        ids[0] = g;
        probs[0] = 1.0f;
        return 1;
    }
    if (s->wide) {
        int n = 0;
        for (int32_t i = 0; i < s->n_vocab; i++) n += wide_keep(s, s->x[i], i);
        if (n > cap) return TERN_E_RANGE;
        const double sum = wide_weights(s);
        n = 0;
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (wide_keep(s, s->x[i], i)) {
                ids[n] = i;
                probs[n++] = (float)(s->w[i] / sum);
            }
        return n;
    }
    if (s->n_cand > cap) return TERN_E_RANGE;
    const double sum = stage_weights_small(s);
    for (int i = 0; i < s->n_cand; i++) {
        ids[i] = s->cand[i].id;
        probs[i] = (float)(s->cand[i].logit / sum);
    }
    return s->n_cand;
}

double samp_uniform(tern_sampler *s) {
    TERN_ASSERT(s);
    return samp_rng_uniform(&s->rng);
}

void tern_sampler_accept(tern_sampler *s, int32_t tok) {
    if (!s || s->p.repeat_last_n <= 0 || tok < 0 || tok >= s->n_vocab) return;
    s->hist[s->hist_next] = tok;
    s->hist_next = (s->hist_next + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n) s->n_hist++;
}

void tern_sampler_reset(tern_sampler *s) {
    if (!s) return;
    s->n_hist = 0;
    s->hist_next = 0;
    samp_rng_seed(&s->rng, s->seed);
}

uint64_t tern_sampler_seed(const tern_sampler *s) { return s ? s->seed : 0; }
