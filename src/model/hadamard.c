/* hadamard.c: scalar Walsh-Hadamard rotation (the reference; see hadamard.h for the math). */
#include "model/hadamard.h"
#include "core/core.h"
#include "model/ops.h"

#include <math.h>

void had_fwht(float *x, int64_t n) {
    for (int64_t h = 1; h < n; h *= 2) {
        for (int64_t i = 0; i < n; i += 2 * h) {
            for (int64_t j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
        }
    }
}

static void sign_scale(float *y, const float *x, const int8_t *s, float scale, int64_t K);

void had_rot(float *x, int64_t K, int64_t n, const int8_t *s) {
    const float scale = (float)(1.0 / sqrt((double)n));
    if (n >= 8) {   /* x[k] = (s[k] x[k]) * scale, fused into the blocked FWHT's first pass */
        TERN_ASSERT(K % n == 0);
        model_ops_active()->fwht_blocks(x, K, n, s, &scale);
        return;
    }
    sign_scale(x, x, s, scale, K);                    /* x[k] = (s[k] x[k]) * scale: scale first */
    for (int64_t b = 0; b < K; b += n) had_fwht(x + b, n);
}

void had_rot_inv(float *x, int64_t K, int64_t n, const int8_t *s) {
    const float scale = (float)(1.0 / sqrt((double)n));
    /* The same scaled FWHT as rot (scale before the butterflies, as the fork's transform does;
     * it only matters for n = 512, spec 4.2), then the signs. */
    for (int64_t k = 0; k < K; k++) x[k] *= scale;
    if (n >= 8) had_fwht_blocks(x, K, n);
    else
        for (int64_t b = 0; b < K; b += n) had_fwht(x + b, n);
    if (s)
        for (int64_t k = 0; k < K; k++) x[k] *= (float)s[k];
}

/* ---- vector FWHT, fused norm + rotation, V-head permutation ----------------------------- */

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

#include "model/hadamard_impl.h"

void had_fwht_blocks_generic(float *x, int64_t K, int64_t n, const int8_t *s, const float *scale) {
    fwht_blocks_body(x, K, n, s, scale);
}

void had_fwht_blocks_isa(const char *isa, float *x, int64_t K, int64_t n) {
    TERN_ASSERT(n >= 8 && K % n == 0);
    const model_ops *o = model_ops_find(isa);
    (o ? o : model_ops_find("generic"))->fwht_blocks(x, K, n, NULL, NULL);
}

void had_fwht_blocks(float *x, int64_t K, int64_t n) {
    TERN_ASSERT(n >= 8 && K % n == 0);
    model_ops_active()->fwht_blocks(x, K, n, NULL, NULL);
}

/* y[k] = (s ? s[k] * x[k] : x[k]) * scale, 8 at a time (the int8 sign converted exactly). */
typedef int8_t hv8b __attribute__((vector_size(8), aligned(1), may_alias));
static void sign_scale(float *y, const float *x, const int8_t *s, float scale, int64_t K) {
    int64_t k = 0;
    if (s)
        for (; k + 8 <= K; k += 8)
            HST8(y + k, __builtin_convertvector(*(const hv8b *)(const void *)(s + k), hv8) * HLD8(x + k) * scale);
    else
        for (; k + 8 <= K; k += 8) HST8(y + k, HLD8(x + k) * scale);
    for (; k < K; k++) y[k] = (s ? (float)s[k] * x[k] : x[k]) * scale;
}

void had_rmsnorm_rot(float *y, const float *x, const float *w, int64_t K, float eps, int64_t n, const int8_t *s) {
    double sum = 0.0;
    for (int64_t i = 0; i < K; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)K);
    const float r = 1.0f / sqrtf(mean + eps);
    if (n == 0) {
        for (int64_t i = 0; i < K; i++) y[i] = w ? (x[i] * r) * w[i] : x[i] * r;
        return;
    }
    const float scale = (float)(1.0 / sqrt((double)n));
    if (n >= 8) {   /* the sign and scale step in the blocked FWHT's first pass */
        TERN_ASSERT(K % n == 0);
        for (int64_t i = 0; i < K; i++) y[i] = w ? (x[i] * r) * w[i] : x[i] * r;
        model_ops_active()->fwht_blocks(y, K, n, s, &scale);
        return;
    }
    for (int64_t i = 0; i < K; i++) {
        float v = w ? (x[i] * r) * w[i] : x[i] * r;
        y[i] = (s ? (float)s[i] * v : v) * scale;
    }
    for (int64_t b = 0; b < K; b += n) had_fwht(y + b, n);
}

void had_rmsnorm_rot_quant(float *y, void *q, kern_numerics mode, float *yn, const float *x, const float *w, int64_t K,
                           float eps, int64_t n, const int8_t *s) {
    double sum = 0.0;
    for (int64_t i = 0; i < K; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)K);
    const float r = 1.0f / sqrtf(mean + eps);
    const float scale = n ? (float)(1.0 / sqrt((double)n)) : 1.0f;
    const int64_t chunk = n > 128 ? n : 128;          /* powers of two: a multiple of n, 128 and 32 */
    for (int64_t k0 = 0; k0 < K; k0 += chunk) {
        const int64_t len = TERN_MIN(chunk, K - k0);  /* a multiple of n (K is) */
        float *yc = y + k0;
        int64_t i = k0;
        /* v = (x r) w, 8 at a time at the rotated sites (the same operations per value); then
         * for n >= 8 (every Bonsai 2 file) (s v) * scale and the butterflies in the blocked
         * FWHT, whose first pass does the sign and scale step */
        if (w && n)
            for (; i + 8 <= k0 + len; i += 8) {
                const hv8 v = (HLD8(x + i) * r) * HLD8(w + i);
                if (yn) HST8(yn + i, v);
                if (n >= 8) HST8(yc + (i - k0), v);
                else HST8(yc + (i - k0), (s ? __builtin_convertvector(*(const hv8b *)(const void *)(s + i), hv8) * v : v) * scale);
            }
        for (; i < k0 + len; i++) {
            const float v = w ? (x[i] * r) * w[i] : x[i] * r;
            if (yn) yn[i] = v;
            yc[i - k0] = n && n < 8 ? (s ? (float)s[i] * v : v) * scale : v;
        }
        if (n >= 8) model_ops_active()->fwht_blocks(yc, len, n, s ? s + k0 : NULL, &scale);
        else if (n > 0)
            for (int64_t b = 0; b < len; b += n) had_fwht(yc + b, n);
        if (mode != KQ_F32) {   /* quantisation blocks are independent: this chunk's blocks */
            kern_act a = {.x = yc, .q = (uint8_t *)q + kern_act_bytes(mode, k0, 1), .K = len, .ncols = 1, .mode = mode};
            kern_quantize(&a);
        }
    }
}

void had_gdn_v_grouped(float *dst, const float *src, int n_k_head, int n_v_head, int d) {
    const int r_per = n_v_head / n_k_head;
    for (int k = 0; k < n_k_head; k++)
        for (int r = 0; r < r_per; r++)
            memcpy(dst + (int64_t)d * (r_per * k + r), src + (int64_t)d * (k + n_k_head * r), sizeof(float) * (size_t)d);
}

