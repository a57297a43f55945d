/* sampler.c: the token sampler behind tern_sampler_* (tern.h).
 * Order and flag meaning follow llama.cpp's default chain (src/llama-sampling.cpp, common/
 * sampling.cpp): repetition penalty over the last n accepted tokens -> top-k -> top-p -> min-p ->
 * temperature -> draw. temp <= 0 is greedy: the argmax after the penalty, ties to the lowest id
 * (the later stages always keep the best candidate, so they cannot change it).
 *
 * Cost model ("disabled samplers cost nothing"): one O(n_vocab) copy of the logits into the
 * candidate array (the input is const). top-k selects its k best by quickselect and sorts only
 * those k. top-p on an unsorted array selects and sorts a growing prefix (64, 256, 1024, ...) until
 * the mass is reached, so a peaked distribution never sorts the vocabulary. min-p and temperature
 * are linear filters. Nothing allocates after init (own heapsort: glibc qsort may malloc).
 *
 * Candidate order is a strict total order: higher logit first, equal logits by lower id. So the
 * kept set is well defined at ties and independent of the selection algorithm. NaN logits count
 * as -inf and +inf as FLT_MAX, so the arithmetic below never meets NaN. */
#include "sampling/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct samp_cand {
    float logit;
    int32_t id;
} samp_cand;

struct tern_sampler {
    tern_sampler_params p;
    int32_t n_vocab;
    uint64_t seed;          /* the seed in use (drawn when p.seed was TERN_SEED_RANDOM) */
    samp_rng rng;
    int32_t *hist;          /* ring of the last p.repeat_last_n accepted ids (NULL if 0) */
    int n_hist, hist_next;
    uint32_t *seen;         /* (n_vocab) stamp of the last penalty pass that touched the id */
    uint32_t stamp;
    samp_cand *cand;        /* (n_vocab) candidates of the current call */
    int n_cand;
    bool sorted;            /* cand[0..n_cand) is in candidate order (best first) */
};

void tern_sampler_params_default(tern_sampler_params *p) {
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

/* Rearranges c[0..n) so that c[k] holds the candidate of rank k, everything before it is better
 * and everything after worse (Hoare's FIND with a median-of-three pivot value). k < n. */
static void cand_select(samp_cand *c, int n, int k) {
    int l = 0, r = n - 1;
    while (l < r) {
        const int m = l + (r - l) / 2;
        samp_cand x;                                  /* median of c[l], c[m], c[r] */
        {
            const samp_cand *a = &c[l], *b = &c[m], *d = &c[r];
            if (cand_better(a, b)) {
                if (cand_better(b, d)) x = *b;
                else x = cand_better(a, d) ? *d : *a;
            } else {
                if (cand_better(a, d)) x = *a;
                else x = cand_better(b, d) ? *d : *b;
            }
        }
        int i = l, j = r;
        do {                                          /* x is in [l, r]: both scans stop */
            while (cand_better(&c[i], &x)) i++;
            while (cand_better(&x, &c[j])) j--;
            if (i <= j) {
                cand_swap(&c[i], &c[j]);
                i++;
                j--;
            }
        } while (i <= j);
        if (j < k) l = i;
        if (k < i) r = j;
    }
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

/* ---- the stages ------------------------------------------------------------------------------ */

/* Copy the logits into the candidate array in id order, sanitising NaN and +inf. */
static void stage_load(tern_sampler *s, const float *logits) {
    samp_cand *c = s->cand;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float l = logits[i];
        if (isnan(l)) l = -INFINITY;
        else if (l > FLT_MAX) l = FLT_MAX;
        c[i].logit = l;
        c[i].id = i;
    }
    s->n_cand = s->n_vocab;
    s->sorted = false;
}

/* llama.cpp's repetition penalty: each distinct id among the last repeat_last_n accepted is
 * penalised once: logit / penalty if positive, logit * penalty otherwise, so its probability
 * drops (for penalty > 1) whatever the sign. Needs cand in id order (cand[id].id == id). */
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
        float *l = &s->cand[id].logit;
        if (*l <= 0.0f) *l *= pen;
        else *l /= pen;
    }
}

/* Argmax in id order: strict > keeps the lowest id at ties. */
static int32_t stage_greedy(const tern_sampler *s) {
    const samp_cand *c = s->cand;
    int best = 0;
    for (int i = 1; i < s->n_cand; i++)
        if (c[i].logit > c[best].logit) best = i;
    return c[best].id;
}

static void stage_top_k(tern_sampler *s) {
    const int k = s->p.top_k;
    if (k <= 0 || k >= s->n_cand) return;
    cand_select(s->cand, s->n_cand, k - 1);
    cand_sort(s->cand, k);
    s->n_cand = k;
    s->sorted = true;
}

static float cand_max_logit(const tern_sampler *s) {
    if (s->sorted) return s->cand[0].logit;
    float mx = -INFINITY;
    for (int i = 0; i < s->n_cand; i++) mx = s->cand[i].logit > mx ? s->cand[i].logit : mx;
    return mx;
}

/* Keeps the smallest best-first prefix whose softmax mass (over the current candidates, at
 * temperature 1, as llama.cpp) reaches top_p; at least one. On an unsorted array it selects and
 * sorts a growing prefix, so only the candidates it keeps (and at most 4x more) get sorted. */
static void stage_top_p(tern_sampler *s) {
    const double p = s->p.top_p;
    if (p >= 1.0 || s->n_cand <= 1) return;
    samp_cand *c = s->cand;
    const int n = s->n_cand;
    const double mx = cand_max_logit(s);
    if (!(mx > -INFINITY)) return;                   /* all -inf: nothing to weigh */
    double total = 0.0;
    for (int i = 0; i < n; i++) total += exp((double)c[i].logit - mx);
    double cum = 0.0;
    int done = 0;                                     /* c[0..done) sorted, mass in cum */
    int m = s->sorted ? n : (n < 64 ? n : 64);
    for (;;) {
        if (!s->sorted) {
            if (m < n) cand_select(c + done, n - done, m - done - 1);
            cand_sort(c + done, m - done);
        }
        for (int i = done; i < m; i++) {
            cum += exp((double)c[i].logit - mx) / total;
            if (cum >= p) {
                s->n_cand = i + 1;
                s->sorted = true;
                return;
            }
        }
        if (m == n) break;                            /* rounding left the sum below p: keep all */
        done = m;
        m = (m > n / 4) ? n : m * 4;
    }
    s->sorted = true;
}

/* Keeps candidates whose probability is at least min_p times the best one's, i.e.
 * logit >= max + log(min_p) (llama.cpp compares logits the same way). Order is preserved. */
static void stage_min_p(tern_sampler *s) {
    const float min_p = s->p.min_p;
    if (min_p <= 0.0f || s->n_cand <= 1) return;
    const float mx = cand_max_logit(s);
    const float thr = mx + logf(min_p);
    samp_cand *c = s->cand;
    int o = 0;
    for (int i = 0; i < s->n_cand; i++)
        if (c[i].logit >= thr) c[o++] = c[i];
    s->n_cand = o;                                    /* >= 1: the best always passes */
}

/* Turns the surviving logits into unnormalised weights exp((l - max) / temp), stored in the
 * logit field; returns their sum (> 0). */
static double stage_weights(tern_sampler *s) {
    samp_cand *c = s->cand;
    const double mx = cand_max_logit(s);
    if (!(mx > -INFINITY)) {                          /* all -inf: uniform over the survivors */
        for (int i = 0; i < s->n_cand; i++) c[i].logit = 1.0f;
        return s->n_cand;
    }
    const double inv_t = 1.0 / (double)s->p.temp;
    double sum = 0.0;
    for (int i = 0; i < s->n_cand; i++) {
        const float w = (float)exp(((double)c[i].logit - mx) * inv_t);
        c[i].logit = w;
        sum += w;
    }
    return sum;                                       /* >= 1: the best has weight exp(0) */
}

/* Runs penalty -> top-k -> top-p -> min-p; returns the greedy id if temp <= 0, else -1 with the
 * survivors in s->cand[0..n_cand). */
static int32_t sampler_chain(tern_sampler *s, const float *logits) {
    stage_load(s, logits);
    stage_penalty(s);
    if (!(s->p.temp > 0.0f)) return stage_greedy(s);
    stage_top_k(s);
    stage_top_p(s);
    stage_min_p(s);
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
    s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
    if (!s->cand || !s->seen) goto nomem;
    if (p->repeat_last_n > 0) {
        s->hist = malloc((size_t)p->repeat_last_n * sizeof *s->hist);
        if (!s->hist) goto nomem;
    }
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
    free(s);
}

int32_t tern_sampler_sample(tern_sampler *s, const float *logits) {
    TERN_ASSERT(s && logits);
    const int32_t g = sampler_chain(s, logits);
    if (g >= 0) return g;
    const double sum = stage_weights(s);
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
    const int32_t g = sampler_chain(s, logits);
    if (g >= 0) {
        if (cap < 1) return TERN_E_RANGE;
        ids[0] = g;
        probs[0] = 1.0f;
        return 1;
    }
    if (s->n_cand > cap) return TERN_E_RANGE;
    const double sum = stage_weights(s);
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
