/* passes.h: the sampler's passes over the whole vocabulary, as a table per ISA (sampler.c picks
 * one at init). Each table runs the same operations per logit (IEEE compares, adds, multiplies
 * and the one vector exp, vexp.h), and its reductions are exact (max, min, integer sums) or in
 * a fixed order (the double sum of each group of 8 ids, lane by lane), so every table gives the
 * same bits: the lanes only set how many logits one instruction takes. */
#ifndef TERN_SAMPLING_PASSES_H
#define TERN_SAMPLING_PASSES_H

#include <stdbool.h>
#include <stdint.h>

/* A candidate of the sorted paths: its logit (or weight), id and top-p mass (units of 2^-30 of
 * the best candidate's). */
typedef struct samp_cand {
    float logit;
    int32_t id;
    uint32_t q;
} samp_cand;

/* The wide path's kept predicate: (l, id) at least as good as (cut_l, cut_id) in candidate
 * order (higher logit first, equal logits by lower id) and l >= thr. all: nothing narrowed. */
typedef struct samp_keep {
    float cut_l, thr;
    int32_t cut_id;
    bool all;
} samp_keep;

/* The kept predicate for one id. */
static inline bool samp_keep1(const samp_keep *k, float l, int32_t id) {
    return k->all || ((l > k->cut_l || (l == k->cut_l && id <= k->cut_id)) && l >= k->thr);
}

#define SAMP_BINS 4096   /* top-p histogram bins */

typedef struct samp_passes {
    const char *name;
    /* x[i] = logits[i] with NaN -> -inf and +inf -> FLT_MAX; *mx, *mn their max and min. */
    void (*load)(const float *logits, float *x, int32_t n, float *mx, float *mn);
    /* *mx, *mn: the max and min of the kept x (-inf and +inf when none is kept). */
    void (*kept_range)(const float *x, int32_t n, const samp_keep *k, float *mx, float *mn);
    /* Top-p masses: w[i] = e^(x[i] - mx) * 2^30 for the kept (0 otherwise), and bm[b] += the
     * integer mass q = (uint32_t)w[i] of every id whose bin b = min((mx - x[i]) * scale,
     * SAMP_BINS - 1) (truncated); returns the sum of q. bm is zeroed by the caller. */
    uint64_t (*masses)(const float *x, float *w, int32_t n, const samp_keep *k, float mx, float scale, uint64_t *bm);
    /* The ids of bin bstar that weigh (w >= 1) into c in id order: {x, id, (uint32_t)w}; returns
     * their count. */
    int (*bin)(const float *x, const float *w, int32_t n, float mx, float scale, int bstar, samp_cand *c);
    /* Draw weights into w: e^((x - mx) * inv_t) for the kept, 0 otherwise (from_masses: w
     * already holds top-p's masses for this mx and inv_t is 1, so the weight is w * 2^-30,
     * exactly); gsum[i / 8] = the double sum of ids i .. i + 7 in order; returns the sum of the
     * gsum in order. */
    double (*weights)(const float *x, float *w, int32_t n, const samp_keep *k, float mx, float inv_t, bool from_masses,
                      double *gsum);
    /* The first id j in [i, n) with x[j] > t, or n when there is none (a top-k scan skips the
     * logits that cannot enter its heap a vector at a time). */
    int32_t (*above)(const float *x, int32_t i, int32_t n, float t);
} samp_passes;

extern const samp_passes samp_passes_generic;
#if defined(__x86_64__) && defined(__GNUC__)
extern const samp_passes samp_passes_avx2;
#endif

/* The table of the active kernel path (kern_isa_avx2: AVX2 and up -> avx2, else generic). */
const samp_passes *samp_passes_active(void);

#endif /* TERN_SAMPLING_PASSES_H */
