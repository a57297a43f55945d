/* act.c: activation quantisation for the three numerics modes (layouts and rounding rules in
 * kern_impl.h). Scalar and ISA-independent: every path reads the same quantised bytes, so the
 * quantisation itself can never make ISAs differ. One pass over each column per block.
 * Source: DESIGN.md "Numerics modes"; spec/ternary-gguf.md 8.1 (AVX2 rounding: 127/amax, RNE). */
#include "kernels/kern_impl.h"

#include "core/fp16.h"

#include <math.h>
#include <string.h>

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

static void quantize_fast_col(const float *x, int64_t K, kact_fast *blk) {
    const int64_t nb = (K + KA_FAST_BLOCK - 1) / KA_FAST_BLOCK;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t k0 = b * KA_FAST_BLOCK;
        const int n = (int)TERN_MIN((int64_t)KA_FAST_BLOCK, K - k0);
        kact_fast *o = &blk[b];
        const float amax = amax_of(x + k0, n);
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        o->d = amax / 127.0f;
        memset(o->qs, 0, sizeof o->qs);
        if (isfinite(id)) for (int i = 0; i < n; i++) o->qs[i] = q8_round(x[k0 + i], id);
        else for (int i = 0; i < n; i++) o->qs[i] = q8_round_tiny(x[k0 + i], amax);
        int32_t total = 0;
        for (int g = 0; g < 8; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += o->qs[16 * g + i];
            o->bsums[g] = (int16_t)s;
            total += s;
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

void kern_quantize(kern_act *a) {
    TERN_ASSERT(a && a->K > 0 && a->ncols >= 1);
    if (a->mode == KQ_F32) return;
    TERN_ASSERT(a->q != NULL && a->x != NULL);
    const size_t col = kern_act_col_bytes(a->mode, a->K);
    for (int c = 0; c < a->ncols; c++) {
        const float *x = a->x + (int64_t)c * a->K;
        uint8_t *dst = (uint8_t *)a->q + (size_t)c * col;
        if (a->mode == KQ_FAST) quantize_fast_col(x, a->K, (kact_fast *)(void *)dst);
        else quantize_ggml_col(x, a->K, (kact_ggml *)(void *)dst);
    }
}
