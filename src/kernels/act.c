/* act.c: activation quantisation for the three numerics modes (layouts and rounding rules in
 * kern_impl.h). Scalar and ISA-independent: every path reads the same quantised bytes, so the
 * quantisation itself can never make ISAs differ. One pass over each column per block.
 * Source: DESIGN.md "Numerics modes"; spec/ternary-gguf.md 8.1 (AVX2 rounding: 127/amax, RNE). */
#include "kernels/kern_impl.h"

#include "core/fp16.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

size_t kern_act_col_bytes(kern_numerics m, int64_t K) {
    if (K <= 0) return 0;
    switch (m) {
    case KQ_FAST: return (size_t)((K + KA_FAST_BLOCK - 1) / KA_FAST_BLOCK) * sizeof(kact_fast);
    case KQ_GGML: return (size_t)((K + KA_GGML_BLOCK - 1) / KA_GGML_BLOCK) * sizeof(kact_ggml);
    default: return 0;
    }
}

size_t kern_act_bytes(kern_numerics m, int64_t K, int ncols) {
    if (ncols <= 0) return 0;
    return kern_act_col_bytes(m, K) * (size_t)ncols;
}

/* round-half-even of x * id, clamped to +-127. x * id is one f32 multiply (no contraction:
 * the build uses -ffp-contract=off), nearbyintf rounds half to even in the default mode. */
static inline int8_t q8_round(float x, float id) {
    float v = nearbyintf(x * id);
    if (v > 127.0f) v = 127.0f;
    if (v < -127.0f) v = -127.0f;
    if (v != v) v = 0.0f;   /* NaN (inf * 0 from a non-finite activation): defined, not UB */
    return (int8_t)v;
}

/* Tiny amax (< ~3.7e-37: 127 / amax overflows f32): compute x / amax * 127 in double instead.
 * Exact enough to be deterministic, and the same on every path (this code is the only copy). */
static inline int8_t q8_round_tiny(float x, float amax) {
    double v = nearbyint((double)x / (double)amax * 127.0);
    if (v > 127.0) v = 127.0;
    if (v < -127.0) v = -127.0;
    if (v != v) v = 0.0;
    return (int8_t)v;
}

static float amax_of(const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    return amax;
}

/* A full 128-value fast block, 4 lanes at a time (GCC/clang vector extensions: element-wise IEEE
 * operations, so the same bytes as q8_round on every target). amax: the lane maxima of |x| (a
 * maximum does not depend on the order; NaN never wins, as in amax_of). Rounding: for |v| < 2^22,
 * (v + 1.5 * 2^23) - 1.5 * 2^23 is v rounded half to even, as nearbyintf in the default mode; here
 * |v| <= 127 (1 + 2^-22) since |x| <= amax and id = 127 / amax. Clamp and NaN -> 0 as q8_round. */
typedef float act_v4f __attribute__((vector_size(16)));
typedef int32_t act_v4i __attribute__((vector_size(16)));
typedef int8_t act_v4c __attribute__((vector_size(4)));
static float amax_of_128(const float *x) {
    act_v4f m = {0, 0, 0, 0};
    for (int i = 0; i < KA_FAST_BLOCK; i += 4) {
        act_v4f v;
        memcpy(&v, x + i, sizeof v);
        v = (act_v4f)((act_v4i)v & 0x7fffffff);
        const act_v4i gt = v > m;
        m = (act_v4f)(((act_v4i)v & gt) | ((act_v4i)m & ~gt));
    }
    float amax = 0.0f;
    for (int l = 0; l < 4; l++) amax = m[l] > amax ? m[l] : amax;
    return amax;
}
/* Rounds a full block (as q8_round per value) into qs, and returns its 16-value sums in bsums
 * and their total. The rounded values are integer-valued floats in [-127, 127]: a sum of 16 of
 * them (|s| <= 2032) is exact in float in any order, and converting them to int8 is exact; on
 * x86-64 the conversion is cvttps2dq + two saturating packs (no value saturates: the bytes are
 * those of the plain conversion), elsewhere the element-wise conversion. */
static int32_t q8_round_128(const float *x, float id, int8_t *qs, int16_t *bsums) {
    const act_v4f vid = {id, id, id, id}, magic = {12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f};
    const act_v4f hi = {127.0f, 127.0f, 127.0f, 127.0f}, lo = -hi;
    int32_t total = 0;
    for (int g = 0; g < 8; g++) {
        act_v4f r[4];
        for (int k = 0; k < 4; k++) {
            act_v4f v;
            memcpy(&v, x + 16 * g + 4 * k, sizeof v);
            v = ((v * vid) + magic) - magic;
            act_v4i c = v > hi;
            v = (act_v4f)(((act_v4i)hi & c) | ((act_v4i)v & ~c));
            c = v < lo;
            v = (act_v4f)(((act_v4i)lo & c) | ((act_v4i)v & ~c));
            r[k] = (act_v4f)((act_v4i)v & (v == v));                 /* NaN -> +0 */
        }
#if defined(__SSE2__)
        __m128 f[4];
        memcpy(f, r, sizeof f);
        const __m128i p01 = _mm_packs_epi32(_mm_cvttps_epi32(f[0]), _mm_cvttps_epi32(f[1]));
        const __m128i p23 = _mm_packs_epi32(_mm_cvttps_epi32(f[2]), _mm_cvttps_epi32(f[3]));
        _mm_storeu_si128((__m128i *)(void *)(qs + 16 * g), _mm_packs_epi16(p01, p23));
#else
        for (int k = 0; k < 4; k++) {
            const act_v4c q = __builtin_convertvector(__builtin_convertvector(r[k], act_v4i), act_v4c);
            memcpy(qs + 16 * g + 4 * k, &q, sizeof q);
        }
#endif
        const act_v4f s4 = (r[0] + r[1]) + (r[2] + r[3]);
        const int s = (int)((s4[0] + s4[1]) + (s4[2] + s4[3]));
        bsums[g] = (int16_t)s;
        total += s;
    }
    return total;
}

static void quantize_fast_col(const float *x, int64_t K, kact_fast *blk, kact_path path) {
    (void)path;
    const int64_t nb = (K + KA_FAST_BLOCK - 1) / KA_FAST_BLOCK;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t k0 = b * KA_FAST_BLOCK;
        const int n = (int)TERN_MIN((int64_t)KA_FAST_BLOCK, K - k0);
        kact_fast *o = &blk[b];
        float amax;
#if defined(__x86_64__)
        if (path == KACT_AVX512 && n == KA_FAST_BLOCK) amax = kern_act_amax128_avx512(x + k0);
        else if (path == KACT_AVX2 && n == KA_FAST_BLOCK) amax = kern_act_amax128_avx2(x + k0);
        else
#endif
            amax = n == KA_FAST_BLOCK ? amax_of_128(x + k0) : amax_of(x + k0, n);
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        o->d = amax / 127.0f;
        int32_t total = 0;
        if (isfinite(id) && n == KA_FAST_BLOCK) {
#if defined(__x86_64__)
            if (path == KACT_AVX512) total = kern_act_round128_avx512(x + k0, id, o->qs, o->bsums);
            else if (path == KACT_AVX2) total = kern_act_round128_avx2(x + k0, id, o->qs, o->bsums);
            else
#endif
                total = q8_round_128(x + k0, id, o->qs, o->bsums);
        } else {
            memset(o->qs, 0, sizeof o->qs);
            if (isfinite(id)) for (int i = 0; i < n; i++) o->qs[i] = q8_round(x[k0 + i], id);
            else for (int i = 0; i < n; i++) o->qs[i] = q8_round_tiny(x[k0 + i], amax);
            for (int g = 0; g < 8; g++) {
                int s = 0;
                for (int i = 0; i < 16; i++) s += o->qs[16 * g + i];
                o->bsums[g] = (int16_t)s;
                total += s;
            }
        }
        o->sum = total;
        o->nsum[0] = (int16_t)-total;
        o->nsum[1] = o->nsum[2] = o->nsum[3] = 0;
    }
}

static void quantize_ggml_col(const float *x, int64_t K, kact_ggml *blk) {
    const int64_t nb = (K + KA_GGML_BLOCK - 1) / KA_GGML_BLOCK;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t k0 = b * KA_GGML_BLOCK;
        const int n = (int)TERN_MIN((int64_t)KA_GGML_BLOCK, K - k0);
        kact_ggml *o = &blk[b];
        const float amax = amax_of(x + k0, n);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;   /* the reference tests amax */
        o->d = f32_to_fp16(d);
        memset(o->qs, 0, sizeof o->qs);
        int s = 0;
        for (int i = 0; i < n; i++) {
            o->qs[i] = isfinite(id) ? q8_round(x[k0 + i], id) : q8_round_tiny(x[k0 + i], amax);
            s += o->qs[i];
        }
        o->sum = (int16_t)s;
    }
}

void kern_quantize(kern_act *a) { kern_quantize_path(a, kern_act_path()); }

void kern_quantize_path(kern_act *a, kact_path path) {
    TERN_ASSERT(a && a->K > 0 && a->ncols >= 1);
    if (a->mode == KQ_F32) return;
    TERN_ASSERT(a->q != NULL && a->x != NULL);
    const size_t col = kern_act_col_bytes(a->mode, a->K);
    for (int c = 0; c < a->ncols; c++) {
        const float *x = a->x + (int64_t)c * a->K;
        uint8_t *dst = (uint8_t *)a->q + (size_t)c * col;
        if (a->mode == KQ_FAST) quantize_fast_col(x, a->K, (kact_fast *)(void *)dst, path);
        else quantize_ggml_col(x, a->K, (kact_ggml *)(void *)dst);
    }
}
