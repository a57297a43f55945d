/* passes_impl.h: the body of a samp_passes table (passes.h), included once per table. The
 * includer defines
 *   SP_N          lanes per vector (4 or 8; the weights pass walks groups of 8 ids either way)
 *   SP_VF, SP_VI  the GCC float and int32 vector types of SP_N lanes
 *   SP_B(c), SP_BI(c), SP_IOTA   a float and an int broadcast, the lane indices 0 .. SP_N-1
 *   SP_EXP(p)     vexp.h's e^x of that width (by pointer)
 *   SP_ANY(m)     nonzero when any lane of the int mask m is set
 *   SP_FN(name)   the table's name for a pass function; SP_TABLE the table's name
 * Every pass ends with the same per-logit code for the ids past the last full vector, so the
 * lane count changes only how many logits one instruction takes (passes.h: the same bits). */
#include "model/vexp.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define SP_SEL(m, a, b) ((SP_VF)(((SP_VI)(a) & (m)) | ((SP_VI)(b) & ~(m))))   /* m ? a : b, lane-wise */

static inline __attribute__((always_inline)) SP_VF SP_FN(ld)(const float *p) { SP_VF v; memcpy(&v, p, sizeof v); return v; }
static inline __attribute__((always_inline)) void SP_FN(st)(float *p, SP_VF v) { memcpy(p, &v, sizeof v); }

/* The kept predicate (passes.h) for ids i .. i + SP_N - 1. */
static inline __attribute__((always_inline)) SP_VI SP_FN(keep)(const samp_keep *k, SP_VF l, int32_t i) {
    if (k->all) return SP_BI(-1);
    const SP_VI id = SP_IOTA + i;
    return ((l > SP_B(k->cut_l)) | ((l == SP_B(k->cut_l)) & (id <= SP_BI(k->cut_id)))) & (l >= SP_B(k->thr));
}

/* e^x of one x <= 0 (the 8-lane vexp: the same bits as any lane of any width). */
static inline float SP_FN(exp1)(float x) {
    attn_v8f v = {x, x, x, x, x, x, x, x};
    return vexp_le0(&v)[0];
}

static void SP_FN(load)(const float *logits, float *x, int32_t n, float *mxp, float *mnp) {
    SP_VF m = SP_B(-INFINITY), lo = SP_B(INFINITY);
    int32_t i = 0;
    for (; i + SP_N <= n; i += SP_N) {
        const SP_VF l = SP_FN(ld)(logits + i);
        const SP_VF c = SP_SEL(l > SP_B(FLT_MAX), SP_B(FLT_MAX), l);
        const SP_VF v = SP_SEL(l == l, c, SP_B(-INFINITY));
        SP_FN(st)(x + i, v);
        m = SP_SEL(v > m, v, m);
        lo = SP_SEL(v < lo, v, lo);
    }
    float mx = -INFINITY, mn = INFINITY;
    for (int k = 0; k < SP_N; k++) { mx = m[k] > mx ? m[k] : mx; mn = lo[k] < mn ? lo[k] : mn; }
    for (; i < n; i++) {
        const float l = logits[i];
        x[i] = l != l ? -INFINITY : l > FLT_MAX ? FLT_MAX : l;
        mx = x[i] > mx ? x[i] : mx;
        mn = x[i] < mn ? x[i] : mn;
    }
    *mxp = mx;
    *mnp = mn;
}

static void SP_FN(kept_range)(const float *x, int32_t n, const samp_keep *kp, float *mxp, float *mnp) {
    const samp_keep k = *kp;
    SP_VF m = SP_B(-INFINITY), lo = SP_B(INFINITY);
    int32_t i = 0;
    for (; i + SP_N <= n; i += SP_N) {
        const SP_VF l = SP_FN(ld)(x + i);
        const SP_VI kk = SP_FN(keep)(&k, l, i);
        m = SP_SEL(kk & (l > m), l, m);
        lo = SP_SEL(kk & (l < lo), l, lo);
    }
    float mx = -INFINITY, mn = INFINITY;
    for (int j = 0; j < SP_N; j++) { mx = m[j] > mx ? m[j] : mx; mn = lo[j] < mn ? lo[j] : mn; }
    for (; i < n; i++)
        if (samp_keep1(&k, x[i], i)) { mx = x[i] > mx ? x[i] : mx; mn = x[i] < mn ? x[i] : mn; }
    *mxp = mx;
    *mnp = mn;
}

static uint64_t SP_FN(masses)(const float *x, float *w, int32_t n, const samp_keep *kp, float mx, float scale, uint64_t *bm) {
    const samp_keep k = *kp;                          /* in registers: the stores to w cannot change it */
    const float last = (float)(SAMP_BINS - 1);
    uint64_t total = 0;
    int32_t i = 0;
    for (; i + SP_N <= n; i += SP_N) {
        const SP_VF l = SP_FN(ld)(x + i);
        const SP_VF d = SP_SEL(SP_FN(keep)(&k, l, i), l - SP_B(mx), SP_B(-INFINITY));
        const SP_VF e = SP_EXP(&d) * SP_B(1073741824.0f);   /* exact: a power of two */
        SP_FN(st)(w + i, e);
        SP_VF bf = (SP_B(mx) - l) * SP_B(scale);
        bf = SP_SEL(bf < SP_B(last), bf, SP_B(last));     /* +inf (l = -inf) clamped */
        const SP_VI q = __builtin_convertvector(e, SP_VI), b = __builtin_convertvector(bf, SP_VI);
        for (int j = 0; j < SP_N; j++) {
            total += (uint32_t)q[j];
            bm[b[j]] += (uint32_t)q[j];
        }
    }
    for (; i < n; i++) {
        w[i] = samp_keep1(&k, x[i], i) ? SP_FN(exp1)(x[i] - mx) * 1073741824.0f : 0.0f;
        const uint32_t q = (uint32_t)w[i];
        float bf = (mx - x[i]) * scale;
        bf = bf < last ? bf : last;
        total += q;
        bm[(int)bf] += q;
    }
    return total;
}

static int SP_FN(bin)(const float *x, const float *w, int32_t n, float mx, float scale, int bstar, samp_cand *c) {
    const float last = (float)(SAMP_BINS - 1);
    int cnt = 0;
    int32_t j = 0;
    for (; j + SP_N <= n; j += SP_N) {
        const SP_VF l = SP_FN(ld)(x + j), e = SP_FN(ld)(w + j);
        SP_VF bf = (SP_B(mx) - l) * SP_B(scale);
        bf = SP_SEL(bf < SP_B(last), bf, SP_B(last));
        const SP_VI hit = (__builtin_convertvector(bf, SP_VI) == SP_BI(bstar)) & (e >= SP_B(1.0f));
        if (!SP_ANY(hit)) continue;
        for (int k = 0; k < SP_N; k++)
            if (hit[k]) c[cnt++] = (samp_cand){l[k], j + k, (uint32_t)e[k]};
    }
    for (; j < n; j++) {
        if (!(w[j] >= 1.0f)) continue;
        float bf = (mx - x[j]) * scale;
        bf = bf < last ? bf : last;
        if ((int)bf == bstar) c[cnt++] = (samp_cand){x[j], j, (uint32_t)w[j]};
    }
    return cnt;
}

static int32_t SP_FN(above)(const float *x, int32_t i, int32_t n, float t) {
    for (; i + SP_N <= n; i += SP_N) {
        const SP_VI hit = SP_FN(ld)(x + i) > SP_B(t);
        if (!SP_ANY(hit)) continue;
        for (int j = 0;; j++)
            if (hit[j]) return i + j;
    }
    for (; i < n; i++)
        if (x[i] > t) return i;
    return n;
}

static double SP_FN(weights)(const float *x, float *w, int32_t n, const samp_keep *kp, float mx, float inv_t, bool from_masses,
                             double *gsum) {
    const samp_keep k = *kp;
    double sum = 0.0;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {                      /* weights and the group's sum: one pass */
        double g = 0.0;
        for (int h = 0; h < 8; h += SP_N) {
            const SP_VF l = SP_FN(ld)(x + i + h);
            const SP_VI kk = SP_FN(keep)(&k, l, i + h);
            SP_VF e;
            if (from_masses) {                        /* e^(l - mx) = mass * 2^-30, exactly */
                e = SP_SEL(kk, SP_FN(ld)(w + i + h) * SP_B(0x1p-30f), SP_B(0.0f));
            } else {
                const SP_VF d = SP_SEL(kk, (l - SP_B(mx)) * SP_B(inv_t), SP_B(-INFINITY));
                e = SP_EXP(&d);
            }
            SP_FN(st)(w + i + h, e);
            for (int j = 0; j < SP_N; j++) g += e[j];
        }
        gsum[i / 8] = g;
        sum += g;
    }
    if (i < n) {                                      /* the last group, fewer than 8 ids */
        double g = 0.0;
        for (int32_t j = i; j < n; j++) {
            const bool kj = samp_keep1(&k, x[j], j);
            w[j] = !kj ? 0.0f : from_masses ? w[j] * 0x1p-30f : SP_FN(exp1)((x[j] - mx) * inv_t);
            g += w[j];
        }
        gsum[i / 8] = g;
        sum += g;
    }
    return sum;
}

const samp_passes SP_TABLE = {
    .name = SP_NAME,
    .load = SP_FN(load),
    .kept_range = SP_FN(kept_range),
    .masses = SP_FN(masses),
    .bin = SP_FN(bin),
    .weights = SP_FN(weights),
    .above = SP_FN(above),
};

#undef SP_SEL
