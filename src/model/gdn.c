/* gdn.c: Gated DeltaNet layer math (see gdn.h for shapes and contracts).
 * Source of truth: spec 5.4 (token-by-token recurrence, conv, gates, gated norm); the chunked
 * form below is exact algebra of the same recurrence (Gated DeltaNet paper, Yang et al. 2024).
 *
 * Vector code uses GCC/Clang vector extensions lane-wise (v8 = 8 floats): every lane performs
 * exactly the scalar operations in the scalar order, with -ffp-contract=off, so the bits are
 * those of the plain loop on every ISA (SSE2, AVX2, NEON all give IEEE single results).
 *
 * Chunked delta rule (per head, chunk of n tokens, S0 the state before the chunk). With
 * Lg_i = sum_{j<=i} gam_j (log cumulative decay, so ratios G_i/G_j = exp(Lg_i - Lg_j) <= 1 never
 * overflow or divide by an underflowed product):
 *   S_i     = e^{Lg_i} S0 + sum_{j<=i} e^{Lg_i-Lg_j} k_j delta_j^T
 *   delta_i = beta_i (v_i - e^{Lg_i} S0^T k_i) - sum_{j<i} beta_i e^{Lg_i-Lg_j} (k_i.k_j) delta_j
 *             (forward substitution of the unit lower-triangular system: the UT transform)
 *   o_i     = (e^{Lg_i} S0^T q_i + sum_{j<=i} e^{Lg_i-Lg_j} (q_i.k_j) delta_j) / sqrt(d)
 *   S_n     = e^{Lg_n} S0 + K^T diag(e^{Lg_n-Lg_j}) Delta
 * The state is read for K S0 and Q S0 in 4-token tiles and written once per chunk, instead of
 * read and written twice per token. */
#include "model/gdn.h"
#include "model/ops.h"

#include "core/core.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define GDN_X86 1
#else
#define GDN_X86 0
#endif

#if GDN_X86
/* The AVX2 build of the vector code; the ops table (ops.h) takes it where the kernels run AVX2
 * (same bits either way). */
#define GDN_AVX2_FN __attribute__((target("avx2")))
#endif

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define LD8(p) (*(const v8u *)(const void *)(p))
#define ST8(p, x) (*(v8u *)(void *)(p) = (x))

#define GDN_D_MAX 256

int64_t gdn_n_ch(const gdn_dims *g) { return (int64_t)(2 * g->n_k_head + g->n_v_head) * g->d_head; }
int64_t gdn_state_floats(const gdn_dims *g) { return (int64_t)g->n_v_head * g->d_head * g->d_head; }
int64_t gdn_conv_floats(const gdn_dims *g) { return (int64_t)(g->d_conv - 1) * gdn_n_ch(g); }

float gdn_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

float gdn_silu(float x) { return x / (1.0f + expf(-x)); }

/* ggml_v_expf (AVX-512) one lane at a time: z = x log2(e) + 1.5*2^23 (fused), n = z - 1.5*2^23
 * (round to integer), b = x - n ln2 in two fused steps, j = 1 + b + ... (degree 5, fused Horner
 * pairs), result = j * 2^n (scalef: exact unless it under/overflows; ldexpf rounds the same way),
 * |n| > 192: 0 or inf. Constants are the published ones of that routine. */
static float expf_ggml(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return ldexpf(j, (int)n);
}

float gdn_silu_ggml(float x) { return x / (1.0f + expf_ggml(0.0f - x)); }

/* ---- the fast-numerics SiLU: one exp per value in lane-wise vector code ------------------
 * exp(t), t = -x: Cody-Waite reduction t = n ln2 + f (n = round(t log2 e) by the 1.5 * 2^23
 * shift, ln2 in two parts, the first exact in n * ln2_hi), e^f by the degree-6 minimax polynomial
 * of Cephes' expf (published coefficients), scaled by 2^(n-1) built in the exponent field and
 * then by 2 (exact; lets n reach 128). t is clamped to [-86, ln(FLT_MAX)]; above, +inf (silu -> -0,
 * as libm's overflowing expf gives); below, e^-86, which 1 + e rounds away as libm's would. Plain multiply and
 * add only (-ffp-contract=off), so the scalar and every vector build give the same bits. Within a
 * few ulp of x / (1 + expf(-x)) (test_gdn: silu_fast). */
#define SF_T_MAX 88.7228394f                         /* ln(FLT_MAX): above, exp overflows */
#define SF_T_MIN (-86.0f)                             /* below, 1 + e^t == 1 */
#define SF_LOG2E 1.44269504088896341f
#define SF_SHIFT 12582912.0f                          /* 1.5 * 2^23 */
#define SF_LN2_HI 0.693359375f
#define SF_LN2_LO (-2.12194440e-4f)
#define SF_P0 1.9875691500e-4f
#define SF_P1 1.3981999507e-3f
#define SF_P2 8.3334519073e-3f
#define SF_P3 4.1665795894e-2f
#define SF_P4 1.6666665459e-1f
#define SF_P5 5.0000001201e-1f

typedef uint32_t v8w __attribute__((vector_size(32)));
typedef int32_t v8m __attribute__((vector_size(32)));

/* y[0..8) = silu(x[0..8)) (y may alias x); pointers, not vector values, cross the call (psABI) */
static inline __attribute__((always_inline)) void silu8(float *y, const float *xp) {
    const v8 x = LD8(xp);
    const v8 t0 = (v8){0} - x;
    const v8m over = t0 > SF_T_MAX;
    v8 t = (v8)(((v8m)t0 & ~over) | ((v8m)((v8){0} + SF_T_MAX) & over));
    const v8m under = t < SF_T_MIN;
    t = (v8)(((v8m)t & ~under) | ((v8m)((v8){0} + SF_T_MIN) & under));
    const v8 zm = t * SF_LOG2E + SF_SHIFT;
    const v8 n = zm - SF_SHIFT;
    v8 f = t - n * SF_LN2_HI;
    f = f - n * SF_LN2_LO;
    v8 p = f * SF_P0 + SF_P1;
    p = p * f + SF_P2;
    p = p * f + SF_P3;
    p = p * f + SF_P4;
    p = p * f + SF_P5;
    v8 e = p * f * f + f + 1.0f;
    const v8w sc = (((v8w)zm - 0x4B400000u) + 126u) << 23;   /* 2^(n-1) */
    e = (e * (v8)sc) * 2.0f;
    e = (v8)(((v8m)e & ~over) | ((v8m)((v8){0} + INFINITY) & over));
    ST8(y, x / (1.0f + e));
}

float gdn_silu_fast(float x) {
    const float t0 = 0.0f - x;
    const bool over = t0 > SF_T_MAX;
    float t = over ? SF_T_MAX : t0;
    if (t < SF_T_MIN) t = SF_T_MIN;
    const float zm = t * SF_LOG2E + SF_SHIFT;
    const float n = zm - SF_SHIFT;
    float f = t - n * SF_LN2_HI;
    f = f - n * SF_LN2_LO;
    float p = f * SF_P0 + SF_P1;
    p = p * f + SF_P2;
    p = p * f + SF_P3;
    p = p * f + SF_P4;
    p = p * f + SF_P5;
    float e = p * f * f + f + 1.0f;
    uint32_t zb, sb;
    memcpy(&zb, &zm, 4);
    sb = ((zb - 0x4B400000u) + 126u) << 23;          /* 2^(n-1) */
    float sc;
    memcpy(&sc, &sb, 4);
    e = (e * sc) * 2.0f;
    if (over) e = INFINITY;
    return x / (1.0f + e);
}

void gdn_silu_fast_n(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) silu8(y + i, x + i);
    for (; i < n; i++) y[i] = gdn_silu_fast(x[i]);
}

static inline __attribute__((always_inline)) void swiglu_body(float *y, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        float sg[8];
        silu8(sg, g + i);
        ST8(y + i, LD8(sg) * LD8(u + i));
    }
}
void gdn_swiglu8_generic(float *y, const float *g, const float *u, int64_t n) { swiglu_body(y, g, u, n); }
#if GDN_X86
GDN_AVX2_FN void gdn_swiglu8_avx2(float *y, const float *g, const float *u, int64_t n) { swiglu_body(y, g, u, n); }
#endif

void gdn_swiglu_fast(float *y, const float *g, const float *u, int64_t n) {
    model_ops_active()->gdn_swiglu8(y, g, u, n);
    for (int64_t i = n & ~(int64_t)7; i < n; i++) y[i] = gdn_silu_fast(g[i]) * u[i];
}

#define silu(x) gdn_silu_fast(x)

void gdn_gates(const gdn_dims *g, int n, const float *a, const float *b, const float *dt_bias,
               const float *ssm_a, float *gam, float *beta) {
    const int hv = g->n_v_head;
    for (int i = 0; i < n; i++) {
        for (int h = 0; h < hv; h++) {
            const float sp = gdn_softplus(a[i * hv + h] + dt_bias[h]);
            gam[i * hv + h] = sp * ssm_a[h];
            beta[i * hv + h] = 1.0f / (1.0f + expf(-b[i * hv + h]));
        }
    }
}

/* Fast path, 8 channels at a time (lane l = channel c + l): the same sum from 0.0f, oldest first,
 * then the shift, then SiLU, as the scalar loop below. wt: the 8 channels' weights transposed
 * (tap-major) once per block. */
static inline __attribute__((always_inline)) void conv_block8(const float *conv_w, float *state, const float *x, float *y,
                                                              int64_t nch, int dc, int64_t c) {
    const int ns = dc - 1;
    float wt[16][8];
    for (int l = 0; l < 8; l++)
        for (int j = 0; j < dc; j++) wt[j][l] = conv_w[(c + l) * dc + j];
    v8 sum = (v8){0};
    for (int j = 0; j < ns; j++) sum += LD8(wt[j]) * LD8(state + (int64_t)j * nch + c);
    sum += LD8(wt[ns]) * LD8(x + c);
    for (int j = 0; j + 1 < ns; j++) ST8(state + (int64_t)j * nch + c, LD8(state + (int64_t)(j + 1) * nch + c));
    if (ns > 0) ST8(state + (int64_t)(ns - 1) * nch + c, LD8(x + c));
    ST8(y + c, sum);
    silu8(y + c, y + c);
}

/* Blocks of 8 channels from c0 while c + 8 <= c1; returns where the blocks stop. dc == 4 (every
 * qwen35 file) is a constant in its copy, so the tap loops unroll. */
static inline __attribute__((always_inline)) int64_t conv_blocks_body(const float *conv_w, float *state, const float *x,
                                                                      float *y, int64_t nch, int dc, int64_t c0,
                                                                      int64_t c1) {
    int64_t c = c0;
    if (dc == 4)
        for (; c + 8 <= c1; c += 8) conv_block8(conv_w, state, x, y, nch, 4, c);
    else
        for (; c + 8 <= c1; c += 8) conv_block8(conv_w, state, x, y, nch, dc, c);
    return c;
}
int64_t gdn_conv_blocks_generic(const float *conv_w, float *state, const float *x, float *y, int64_t nch, int dc,
                                int64_t c0, int64_t c1) {
    return conv_blocks_body(conv_w, state, x, y, nch, dc, c0, c1);
}
#if GDN_X86
GDN_AVX2_FN int64_t gdn_conv_blocks_avx2(const float *conv_w, float *state, const float *x, float *y, int64_t nch,
                                         int dc, int64_t c0, int64_t c1) {
    return conv_blocks_body(conv_w, state, x, y, nch, dc, c0, c1);
}
#endif

void gdn_conv(const gdn_dims *g, int n, const float *conv_w, float *state, const float *in,
              float *out, int64_t c0, int64_t c1) {
    const int64_t nch = gdn_n_ch(g);
    const int dc = g->d_conv, ns = dc - 1;
    for (int i = 0; i < n; i++) {
        const float *x = in + (int64_t)i * nch;
        float *y = out + (int64_t)i * nch;
        int64_t c = c0;
        if (!g->ggml) c = model_ops_active()->gdn_conv_blocks(conv_w, state, x, y, nch, dc, c0, c1);
        for (; c < c1; c++) {
            const float *w = conv_w + c * dc;
            float sum = 0.0f;
            if (g->ggml) {                              /* the reference's contracted loop */
                for (int j = 0; j < ns; j++) sum = fmaf(state[(int64_t)j * nch + c], w[j], sum);
                sum = fmaf(x[c], w[ns], sum);
            } else {
                for (int j = 0; j < ns; j++) sum += w[j] * state[(int64_t)j * nch + c];
                sum += w[ns] * x[c];
            }
            for (int j = 0; j + 1 < ns; j++) state[(int64_t)j * nch + c] = state[(int64_t)(j + 1) * nch + c];
            if (ns > 0) state[(int64_t)(ns - 1) * nch + c] = x[c];
            y[c] = g->ggml ? gdn_silu_ggml(sum) : silu(sum);
        }
    }
}

void gdn_l2norm_heads(float *x, int n_head, int d, float eps) {
    for (int h = 0; h < n_head; h++) {
        float *p = x + (int64_t)h * d;
        double sum = 0.0;
        for (int i = 0; i < d; i++) sum += (double)(p[i] * p[i]);
        const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (int i = 0; i < d; i++) p[i] *= scale;
    }
}

void gdn_norm_gate(float *y, const float *o, const float *z, const float *w, int d, float eps, bool ggml) {
    double sum = 0.0;
    for (int i = 0; i < d; i++) sum += (double)(o[i] * o[i]);
    const float mean = (float)(sum / d);
    const float r = 1.0f / sqrtf(mean + eps);
    if (ggml) {
        for (int i = 0; i < d; i++) y[i] = o[i] * r * w[i] * gdn_silu_ggml(z[i]);
        return;
    }
    int i = 0;
    for (; i + 8 <= d; i += 8) {
        float sz[8];
        silu8(sz, z + i);
        ST8(y + i, LD8(o + i) * r * LD8(w + i) * LD8(sz));
    }
    for (; i < d; i++) y[i] = o[i] * r * w[i] * silu(z[i]);
}

/* ---- the reference runtime's order (ggml numerics) ----------------------------------------- */

/* sum_a S[a][b] x[a] for every b, as ggml_vec_dot_f32 (AVX-512) over the contiguous key index of
 * the reference's transposed state: element a goes to lane a % 64 (4 registers x 16 lanes), fused
 * multiply-add in order of a; then registers 0 += 2, 1 += 3, 0 += 1, and _mm512_reduce_add_ps
 * (halves 8, 4, then (0+2) + (1+3)). acc: 64 x d scratch. */
static void dot_cols_ggml(float *out, const float *S, const float *x, int d, float *acc) {
    memset(acc, 0, sizeof(float) * 64 * (size_t)d);
    for (int a = 0; a < d; a++) {
        float *ac = acc + (size_t)(a % 64) * d;
        const float *row = S + (int64_t)a * d;
        const float xa = x[a];
        for (int b = 0; b < d; b++) ac[b] = fmaf(row[b], xa, ac[b]);
    }
    for (int b = 0; b < d; b++) {
        float r[64];
        for (int s = 0; s < 64; s++) r[s] = acc[(size_t)s * d + b];
        for (int l = 0; l < 16; l++) { r[l] += r[32 + l]; r[16 + l] += r[48 + l]; }
        for (int l = 0; l < 16; l++) r[l] += r[16 + l];
        float t8[8], t4[4];
        for (int l = 0; l < 8; l++) t8[l] = r[l + 8] + r[l];
        for (int l = 0; l < 4; l++) t4[l] = t8[l + 4] + t8[l];
        out[b] = (t4[0] + t4[2]) + (t4[1] + t4[3]);
    }
}

void gdn_delta_token_ggml(float *S, int d, const float *q, const float *k, const float *v, float beta,
                          float gam, float *o) {
    TERN_ASSERT(d % 64 == 0 && d <= GDN_D_MAX);
    float acc[64 * GDN_D_MAX];                                    /* 64 x d lanes (64 KB) */
    const float dec = expf(gam);
    const int64_t dd = (int64_t)d * d;
    for (int64_t e = 0; e < dd; e++) S[e] *= dec;                  /* ggml_vec_scale_f32 */
    float kv[GDN_D_MAX], delta[GDN_D_MAX];
    dot_cols_ggml(kv, S, k, d, acc);
    for (int b = 0; b < d; b++) delta[b] = (v[b] - kv[b]) * beta;
    for (int a = 0; a < d; a++) {                                 /* ggml_vec_mad_f32 per row */
        float *row = S + (int64_t)a * d;
        const float ka = k[a];
        for (int b = 0; b < d; b++) row[b] = fmaf(ka, delta[b], row[b]);
    }
    if (!o) return;
    const float scale = 1.0f / sqrtf((float)d);
    dot_cols_ggml(o, S, q, d, acc);
    for (int b = 0; b < d; b++) o[b] = o[b] * scale;
}

/* ---- token-by-token delta rule (the reference) ------------------------------------------- */

/* One token on one head, column tiles of W v8 (8 W columns of S) at a time, each tile's
 * accumulators in registers (the whole d = 128 row would need 16 ymm plus operands):
 *   pass 1 (read only): kv_b = sum_a (S[a][b] dec) k_a, lane b in order of a;
 *   pass 2: S[a][b] = S[a][b] dec + k_a delta_b (the decayed value recomputed with the same
 *           rounding as pass 1, so S is written once); o_b = sum_a S[a][b] q_a in order of a.
 * Every lane performs the operations of the plain two-pass loop (decay stored, then the rank-1
 * update) in the same order, so the bits are the same for any tile width and ISA.
 * pf (optional): the next head's state, prefetched during pass 2 (two lines per row of a tile,
 * d^2 / 16 lines over the d^2 / (8 W) rows of pass 2), so its first pass finds it in cache while
 * this head computes. */
#define GDN_UNROLL _Pragma("GCC unroll 4")
#define GDN_TILE_P1(W)                                                                              \
    do {                                                                                            \
        v8 acc[W];                                                                                  \
        GDN_UNROLL for (int t = 0; t < (W); t++) acc[t] = (v8){0};                                             \
        const float *row = S + b0;                                                                  \
        for (int a = 0; a < d; a++, row += d) {                                                     \
            const float ka = k[a];                                                                  \
            GDN_UNROLL for (int t = 0; t < (W); t++) acc[t] += (LD8(row + 8 * t) * dec) * ka;                  \
        }                                                                                           \
        GDN_UNROLL for (int t = 0; t < (W); t++) ST8(delta + b0 + 8 * t, (LD8(v + b0 + 8 * t) - acc[t]) * beta); \
        b0 += 8 * (W);                                                                              \
    } while (0)

#define GDN_TILE_P2(W)                                                                              \
    do {                                                                                            \
        v8 acc[W], dl[W];                                                                           \
        GDN_UNROLL for (int t = 0; t < (W); t++) { acc[t] = (v8){0}; dl[t] = LD8(delta + b0 + 8 * t); }        \
        float *row = S + b0;                                                                        \
        for (int a = 0; a < d; a++, row += d) {                                                     \
            const float ka = k[a], qa = q[a];                                                       \
            if (pfp < pf_end) { __builtin_prefetch(pfp, 0, 3); __builtin_prefetch(pfp + 64, 0, 3); pfp += 128; } \
            GDN_UNROLL for (int t = 0; t < (W); t++) {                                                         \
                const v8 s = LD8(row + 8 * t) * dec + ka * dl[t];                                   \
                ST8(row + 8 * t, s);                                                                \
                acc[t] += s * qa;                                                                   \
            }                                                                                       \
        }                                                                                           \
        GDN_UNROLL for (int t = 0; t < (W); t++) ST8(o + b0 + 8 * t, acc[t] * scale);                          \
        b0 += 8 * (W);                                                                              \
    } while (0)

#define GDN_TILE_P2_NOOUT(W)                                                                        \
    do {                                                                                            \
        v8 dl[W];                                                                                   \
        GDN_UNROLL for (int t = 0; t < (W); t++) dl[t] = LD8(delta + b0 + 8 * t);                              \
        float *row = S + b0;                                                                        \
        for (int a = 0; a < d; a++, row += d) {                                                     \
            const float ka = k[a];                                                                  \
            GDN_UNROLL for (int t = 0; t < (W); t++) ST8(row + 8 * t, LD8(row + 8 * t) * dec + ka * dl[t]);    \
        }                                                                                           \
        b0 += 8 * (W);                                                                              \
    } while (0)

static inline __attribute__((always_inline)) void delta_token_body(float *S, int d, const float *q, const float *k,
                                                                   const float *v, float beta, float gam, float *o,
                                                                   const float *pf) {
    const float dec = expf(gam);
    const float scale = 1.0f / sqrtf((float)d);
    float delta[GDN_D_MAX] __attribute__((aligned(32)));
    int b0 = 0;
    while (b0 + 32 <= d) GDN_TILE_P1(4);
    while (b0 < d) GDN_TILE_P1(1);
    const char *pfp = (const char *)pf, *pf_end = pf ? (const char *)(pf + (int64_t)d * d) : NULL;
    b0 = 0;
    if (o) {
        while (b0 + 32 <= d) GDN_TILE_P2(4);
        while (b0 < d) GDN_TILE_P2(1);
    } else {
        while (b0 + 32 <= d) GDN_TILE_P2_NOOUT(4);
        while (b0 < d) GDN_TILE_P2_NOOUT(1);
    }
}

void gdn_delta_token_generic(float *S, int d, const float *q, const float *k, const float *v, float beta, float gam,
                             float *o, const float *pf) {
    delta_token_body(S, d, q, k, v, beta, gam, o, pf);
}

#if GDN_X86
GDN_AVX2_FN void gdn_delta_token_avx2(float *S, int d, const float *q, const float *k, const float *v, float beta,
                                      float gam, float *o, const float *pf) {
    delta_token_body(S, d, q, k, v, beta, gam, o, pf);
}
#endif

typedef void (*delta_token_fn)(float *, int, const float *, const float *, const float *, float, float, float *,
                               const float *);

/* The named table's copy (tests), the portable one when that table is not compiled in. */
static const model_ops *ops_named(const char *isa) {
    const model_ops *o = model_ops_find(isa);
    return o ? o : model_ops_find("generic");
}

void gdn_delta_token_isa(const char *isa, float *S, int d, const float *q, const float *k, const float *v,
                         float beta, float gam, float *o) {
    TERN_ASSERT(d % 8 == 0 && d <= GDN_D_MAX);
    ops_named(isa)->delta_token(S, d, q, k, v, beta, gam, o, NULL);
}

void gdn_delta_token(float *S, int d, const float *q, const float *k, const float *v, float beta,
                     float gam, float *o) {
    TERN_DASSERT(d % 8 == 0 && d <= GDN_D_MAX);
    model_ops_active()->delta_token(S, d, q, k, v, beta, gam, o, NULL);
}

/* ---- chunked delta rule ------------------------------------------------------------------ */

size_t gdn_chunk_scratch_floats(int d) {
    /* Lg[C] | KS[C][d] | QS[C][d] | D[C][d] | kk[C][C] | qk[C][C] */
    return (size_t)GDN_CHUNK + 3 * (size_t)GDN_CHUNK * d + 2 * (size_t)GDN_CHUNK * GDN_CHUNK;
}

/* G[i*C + j] = x_i . y_j for j < jn(i) = i + jn_off (x_i at x + i*ldx, y_j at y + j*ldy): four j
 * at a time share each load of x_i; lane-wise partial sums over the d values, then the 8 lanes
 * in order (a fixed order per output, independent of the tiling). */
static inline __attribute__((always_inline)) void gram_lower(float *G, int C, const float *x, int64_t ldx, const float *y, int64_t ldy, int n,
                       int d, int jn_off) {
    for (int i = 0; i < n; i++) {
        const float *xi = x + (int64_t)i * ldx;
        const int jn = i + jn_off;
        int j = 0;
        for (; j + 4 <= jn; j += 4) {
            const float *y0 = y + (int64_t)j * ldy, *y1 = y0 + ldy, *y2 = y1 + ldy, *y3 = y2 + ldy;
            v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int e = 0; e < d; e += 8) {
                const v8 xv = LD8(xi + e);
                a0 += xv * LD8(y0 + e); a1 += xv * LD8(y1 + e); a2 += xv * LD8(y2 + e); a3 += xv * LD8(y3 + e);
            }
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            for (int l = 0; l < 8; l++) { s0 += a0[l]; s1 += a1[l]; s2 += a2[l]; s3 += a3[l]; }
            G[i * C + j] = s0; G[i * C + j + 1] = s1; G[i * C + j + 2] = s2; G[i * C + j + 3] = s3;
        }
        for (; j < jn; j++) {
            const float *y0 = y + (int64_t)j * ldy;
            v8 a0 = {0};
            for (int e = 0; e < d; e += 8) a0 += LD8(xi + e) * LD8(y0 + e);
            float s0 = 0.0f;
            for (int l = 0; l < 8; l++) s0 += a0[l];
            G[i * C + j] = s0;
        }
    }
}

/* R[i][b] = sum_a X_i[a] S[a][b] for i < n (X row i at x + i*ld), R row-major (n x d).
 * Tiles of 4 rows x 8 columns (4 v8 accumulators: fits 16 xmm registers on plain SSE2);
 * each output sums over a in order. */
static inline __attribute__((always_inline)) void mul_rows_state(float *R, const float *x, int64_t ld, int n, const float *S, int d) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float *x0 = x + (int64_t)i * ld, *x1 = x0 + ld, *x2 = x1 + ld, *x3 = x2 + ld;
        for (int b = 0; b < d; b += 8) {
            v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            const float *sp = S + b;
            for (int a = 0; a < d; a++, sp += d) {
                const v8 s0 = LD8(sp);
                a0 += s0 * x0[a]; a1 += s0 * x1[a]; a2 += s0 * x2[a]; a3 += s0 * x3[a];
            }
            ST8(R + (int64_t)(i + 0) * d + b, a0); ST8(R + (int64_t)(i + 1) * d + b, a1);
            ST8(R + (int64_t)(i + 2) * d + b, a2); ST8(R + (int64_t)(i + 3) * d + b, a3);
        }
    }
    for (; i < n; i++) {
        const float *x0 = x + (int64_t)i * ld;
        for (int b = 0; b < d; b += 8) {
            v8 acc = {0};
            for (int a = 0; a < d; a++) acc += LD8(S + (int64_t)a * d + b) * x0[a];
            ST8(R + (int64_t)i * d + b, acc);
        }
    }
}

static inline __attribute__((always_inline)) void delta_chunk_body(float *S, int d, int n, const float *q, int64_t ld_q,
                                                                   const float *k, int64_t ld_k, const float *v,
                                                                   int64_t ld_v, const float *beta, const float *gam,
                                                                   int64_t ld_g, float *o, int64_t ld_o,
                                                                   float *scratch) {
    TERN_DASSERT(n >= 1 && n <= GDN_CHUNK && d % 16 == 0 && d <= GDN_D_MAX);
    const int C = GDN_CHUNK;
    float *Lg = scratch;
    float *KS = Lg + C;
    float *QS = KS + (size_t)C * d;
    float *D = QS + (size_t)C * d;
    float *kk = D + (size_t)C * d;
    float *qk = kk + (size_t)C * C;
    const float scale = 1.0f / sqrtf((float)d);

    float cum = 0.0f;
    for (int i = 0; i < n; i++) { cum += gam[i * ld_g]; Lg[i] = cum; }

    mul_rows_state(KS, k, ld_k, n, S, d);
    if (o) mul_rows_state(QS, q, ld_q, n, S, d);
    gram_lower(kk, C, k, ld_k, k, ld_k, n, d, 0);             /* kk[i][j] = k_i.k_j, j < i */
    if (o) gram_lower(qk, C, q, ld_q, k, ld_k, n, d, 1);      /* qk[i][j] = q_i.k_j, j <= i */

    /* forward substitution for delta */
    for (int i = 0; i < n; i++) {
        const float bi = beta[i * ld_g], ei = expf(Lg[i]);
        float *Di = D + (size_t)i * d;
        const float *vi = v + i * ld_v, *KSi = KS + (size_t)i * d;
        for (int b = 0; b < d; b += 8) ST8(Di + b, (LD8(vi + b) - LD8(KSi + b) * ei) * bi);
        for (int j = 0; j < i; j++) {
            const float c = bi * expf(Lg[i] - Lg[j]) * kk[i * C + j];
            const float *Dj = D + (size_t)j * d;
            for (int b = 0; b < d; b += 8) ST8(Di + b, LD8(Di + b) - LD8(Dj + b) * c);
        }
    }

    /* outputs */
    if (o) {
        for (int i = 0; i < n; i++) {
            const float ei = expf(Lg[i]);
            float *oi = o + i * ld_o;
            const float *QSi = QS + (size_t)i * d;
            v8 acc[GDN_D_MAX / 8];
            for (int b = 0; b < d; b += 8) acc[b / 8] = LD8(QSi + b) * ei;
            for (int j = 0; j <= i; j++) {
                const float c = expf(Lg[i] - Lg[j]) * qk[i * C + j];
                const float *Dj = D + (size_t)j * d;
                for (int b = 0; b < d; b += 8) acc[b / 8] += LD8(Dj + b) * c;
            }
            for (int b = 0; b < d; b += 8) ST8(oi + b, acc[b / 8] * scale);
        }
    }

    /* state: S = e^{Lg_n} S + sum_j (e^{Lg_n - Lg_j} k_j) delta_j^T; 4 rows of S at a time.
     * The per-token weights w_j = e^{Lg_n - Lg_j} reuse the Lg slots (no longer needed). */
    const float en = expf(Lg[n - 1]);
    for (int j = 0; j < n; j++) Lg[j] = expf(Lg[n - 1] - Lg[j]);
    for (int a = 0; a < d; a += 4) {
        float c[4][GDN_CHUNK];
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < n; j++) c[r][j] = Lg[j] * k[j * ld_k + a + r];
        for (int b = 0; b < d; b += 8) {
            float *s0 = S + (int64_t)a * d + b, *s1 = s0 + d, *s2 = s1 + d, *s3 = s2 + d;
            v8 r0 = LD8(s0) * en, r1 = LD8(s1) * en, r2 = LD8(s2) * en, r3 = LD8(s3) * en;
            for (int j = 0; j < n; j++) {
                const v8 dj = LD8(D + (size_t)j * d + b);
                r0 += dj * c[0][j]; r1 += dj * c[1][j]; r2 += dj * c[2][j]; r3 += dj * c[3][j];
            }
            ST8(s0, r0); ST8(s1, r1); ST8(s2, r2); ST8(s3, r3);
        }
    }
}

void gdn_delta_chunk_generic(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                             const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                             int64_t ld_o, float *scratch) {
    delta_chunk_body(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, scratch);
}
#if GDN_X86
GDN_AVX2_FN void gdn_delta_chunk_avx2(float *S, int d, int n, const float *q, int64_t ld_q, const float *k,
                                         int64_t ld_k, const float *v, int64_t ld_v, const float *beta,
                                         const float *gam, int64_t ld_g, float *o, int64_t ld_o, float *scratch) {
    delta_chunk_body(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, scratch);
}
#endif

/* The AVX2 build of the same lane-wise code where kern runs AVX2 (same bits: tested). */
void gdn_delta_chunk_isa(const char *isa, float *S, int d, int n, const float *q, int64_t ld_q, const float *k,
                         int64_t ld_k, const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g,
                         float *o, int64_t ld_o, float *scratch) {
    ops_named(isa)->delta_chunk(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, scratch);
}

void gdn_delta_chunk(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                     const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g,
                     float *o, int64_t ld_o, float *scratch) {
    model_ops_active()->delta_chunk(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, scratch);
}

/* ---- one layer's heads ------------------------------------------------------------------- */

void gdn_layer_heads(const gdn_dims *g, int n, const float *u, const float *gam, const float *beta,
                     const float *z, const float *ssm_norm, float *S, float *y, int h0, int h1,
                     bool chunked, float *scratch) {
    const int d = g->d_head, hk = g->n_k_head, hv = g->n_v_head;
    const int64_t nch = gdn_n_ch(g), ldy = (int64_t)hv * d;
    const delta_token_fn tok = model_ops_active()->delta_token;
    for (int t = h0; t < h1; t++) {
        const int kh = t % hk;                        /* tiled order: v-head t <-> key head t mod Hk */
        const float *q = u + (int64_t)kh * d;
        const float *k = u + (int64_t)(hk + kh) * d;
        const float *v = u + (int64_t)(2 * hk + t) * d;
        float *St = S + (int64_t)t * d * d;
        float *yt = y + (int64_t)t * d;
        if (g->ggml) {
            for (int i = 0; i < n; i++)
                gdn_delta_token_ggml(St, d, q + i * nch, k + i * nch, v + i * nch, beta[(int64_t)i * hv + t],
                                     gam[(int64_t)i * hv + t], yt + i * ldy);
        } else if (chunked && n >= GDN_CHUNK_MIN) {
            for (int i0 = 0; i0 < n; i0 += GDN_CHUNK) {
                const int m = TERN_MIN(GDN_CHUNK, n - i0);
                gdn_delta_chunk(St, d, m, q + i0 * nch, nch, k + i0 * nch, nch, v + i0 * nch, nch,
                                beta + (int64_t)i0 * hv + t, gam + (int64_t)i0 * hv + t, hv,
                                yt + i0 * ldy, ldy, scratch);
            }
        } else {
            /* the last token of a head prefetches the next head's state (decode: one token) */
            const float *pf = t + 1 < h1 ? St + (int64_t)d * d : NULL;
            for (int i = 0; i < n; i++)
                tok(St, d, q + i * nch, k + i * nch, v + i * nch, beta[(int64_t)i * hv + t], gam[(int64_t)i * hv + t],
                    yt + i * ldy, i == n - 1 ? pf : NULL);
        }
        for (int i = 0; i < n; i++)
            gdn_norm_gate(yt + i * ldy, yt + i * ldy, z + i * ldy + (int64_t)t * d, ssm_norm, d, g->eps, g->ggml);
    }
}

/* ---- rollback support -------------------------------------------------------------------- */

int64_t gdn_log_floats(const gdn_dims *g) { return gdn_n_ch(g) + 2 * (int64_t)g->n_v_head; }

void gdn_log_token(const gdn_dims *g, float *dst, const float *qkv_raw, const float *gam, const float *beta) {
    const int64_t nch = gdn_n_ch(g);
    memcpy(dst, qkv_raw, sizeof(float) * (size_t)nch);
    memcpy(dst + nch, gam, sizeof(float) * (size_t)g->n_v_head);
    memcpy(dst + nch + g->n_v_head, beta, sizeof(float) * (size_t)g->n_v_head);
}

void gdn_replay_conv(const gdn_dims *g, const float *conv_w, float *conv, const float *in, int n, float *u, int64_t c0,
                     int64_t c1) {
    const int d = g->d_head, hk = g->n_k_head;
    const int64_t nch = gdn_n_ch(g), nl = gdn_log_floats(g), qk_end = 2 * (int64_t)hk * d;
    for (int i = 0; i < n; i++) {                     /* conv + SiLU + L2 norm, token by token */
        gdn_conv(g, 1, conv_w, conv, in + i * nl, u + i * nch, c0, c1);
        for (int64_t c = c0; c < TERN_MIN(c1, qk_end); c += d) gdn_l2norm_heads(u + i * nch + c, 1, d, g->eps);
    }
}

void gdn_replay_heads(const gdn_dims *g, float *S, const float *in, int n, const float *u, int h0, int h1) {
    const int d = g->d_head, hk = g->n_k_head, hv = g->n_v_head;
    const int64_t nch = gdn_n_ch(g), nl = gdn_log_floats(g);
    const delta_token_fn tok = model_ops_active()->delta_token;
    for (int t = h0; t < h1; t++) {                   /* head-outer: the head's state stays in cache */
        const int kh = t % hk;
        float *St = S + (int64_t)t * d * d;
        for (int i = 0; i < n; i++) {
            const float *ui = u + i * nch, *gi = in + i * nl + nch;
            if (g->ggml)
                gdn_delta_token_ggml(St, d, ui + (int64_t)kh * d, ui + (int64_t)(hk + kh) * d,
                                     ui + (int64_t)(2 * hk + t) * d, gi[hv + t], gi[t], NULL);
            else
                tok(St, d, ui + (int64_t)kh * d, ui + (int64_t)(hk + kh) * d, ui + (int64_t)(2 * hk + t) * d, gi[hv + t],
                    gi[t], NULL, i == n - 1 && t + 1 < h1 ? St + (int64_t)d * d : NULL);
        }
    }
}

void gdn_replay(const gdn_dims *g, const float *conv_w, float *S, float *conv, const float *in, int n,
                float *u) {
    gdn_replay_conv(g, conv_w, conv, in, n, u, 0, gdn_n_ch(g));
    gdn_replay_heads(g, S, in, n, u, 0, g->n_v_head);
}
