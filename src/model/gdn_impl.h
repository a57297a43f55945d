/* gdn_impl.h: the lane-wise vector bodies of the Gated DeltaNet math (gdn.c: the fast SiLU, the
 * causal conv's channel blocks, the delta rule per token and per chunk), included
 * once per instruction set: by gdn.c (portable, the *_generic copies) and by x86/gdn_avx2.c
 * (-mavx2, the *_avx2 copies the ops table takes). Every lane performs the scalar operations in
 * the scalar order (-ffp-contract=off), so every copy gives the same bits. */
#ifndef TERN_MODEL_GDN_IMPL_H
#define TERN_MODEL_GDN_IMPL_H

#include "model/gdn.h"
#include "model/vexp.h"

#include "core/core.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define LD8(p) (*(const v8u *)(const void *)(p))
#define ST8(p, x) (*(v8u *)(void *)(p) = (x))
#ifdef GDN_V16   /* 16-lane vectors (an AVX-512 build): the delta rule's column tiles of 16 and 64 */
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define LD16(p) (*(const v16u *)(const void *)(p))
#define ST16(p, x) (*(v16u *)(void *)(p) = (x))
#endif

#define GDN_D_MAX 256

/* y[0..8) = silu(x[0..8)) (vexp.h's vsilu8; y may alias x); pointers, not vector values, cross
 * the call (psABI) */
static inline __attribute__((always_inline)) void silu8(float *y, const float *xp) {
    attn_v8f x;
    memcpy(&x, xp, sizeof x);
    const attn_v8f r = vsilu8(&x);
    memcpy(y, &r, sizeof r);
}

/* Fast path, 8 channels at a time (lane l = channel c + l) through n tokens (token i: x + i nch,
 * y + i nch): per token the same sum from 0.0f, oldest first, then the shift, then SiLU, as the
 * scalar loop of gdn_conv. wt: the 8 channels' weights transposed (tap-major) once for all the
 * tokens (dc == 4: by vector shuffles); the state rows stay in registers between tokens and are
 * stored after the last one. */
#define CONV_NS_MAX 15   /* d_conv <= 16 (the loader's bound) */
static inline __attribute__((always_inline)) void conv_block8(const float *conv_w, float *state, const float *x, float *y,
                                                              int64_t nch, int dc, int64_t c, int n) {
    const int ns = dc - 1;
    v8 wt[CONV_NS_MAX + 1];
    if (dc == 4) {   /* the 32 weights as 4 vectors of 2 channels' taps, transposed by shuffles */
        const float *p = conv_w + c * 4;
        const v8 a = LD8(p), b = LD8(p + 8), e = LD8(p + 16), f = LD8(p + 24);
        for (int j = 0; j < 4; j++) {
            const attn_v8i pick = {j, j + 4, j + 8, j + 12, j, j + 4, j + 8, j + 12};   /* lanes 4-7 unused */
            const v8 lo = __builtin_shuffle(a, b, pick), hi = __builtin_shuffle(e, f, pick);
            wt[j] = __builtin_shuffle(lo, hi, (attn_v8i){0, 1, 2, 3, 8, 9, 10, 11});
        }
    } else {
        float w1[CONV_NS_MAX + 1][8];
        for (int l = 0; l < 8; l++)
            for (int j = 0; j < dc; j++) w1[j][l] = conv_w[(c + l) * dc + j];
        for (int j = 0; j < dc; j++) wt[j] = LD8(w1[j]);
    }
    v8 st[CONV_NS_MAX];
    for (int j = 0; j < ns; j++) st[j] = LD8(state + (int64_t)j * nch + c);
    for (int i = 0; i < n; i++) {
        const v8 xi = LD8(x + (int64_t)i * nch + c);
        v8 sum = (v8){0};
        for (int j = 0; j < ns; j++) sum += wt[j] * st[j];
        sum += wt[ns] * xi;
        for (int j = 0; j + 1 < ns; j++) st[j] = st[j + 1];
        if (ns > 0) st[ns - 1] = xi;
        float *yi = y + (int64_t)i * nch + c;
        ST8(yi, sum);
        silu8(yi, yi);
    }
    for (int j = 0; j < ns; j++) ST8(state + (int64_t)j * nch + c, st[j]);
}

/* Blocks of 8 channels from c0 while c + 8 <= c1, each through the n tokens; returns where the
 * blocks stop. dc == 4 (every qwen35 file) is a constant in its copy, so the tap loops unroll
 * and the state stays in registers; other widths take the general copy. */
static inline __attribute__((always_inline)) int64_t conv_blocks_body(const float *conv_w, float *state, const float *x,
                                                                      float *y, int64_t nch, int dc, int64_t c0,
                                                                      int64_t c1, int n) {
    int64_t c = c0;
    if (dc == 4)
        for (; c + 8 <= c1; c += 8) conv_block8(conv_w, state, x, y, nch, 4, c, n);
    else if (dc >= 1 && dc <= CONV_NS_MAX + 1)
        for (; c + 8 <= c1; c += 8) conv_block8(conv_w, state, x, y, nch, dc, c, n);
    return c;
}

/* gdn_norm_gate of fast numerics (gdn.h): the sum of squares in double in order of b, then 8
 * values at a time y = o r w silu(z) (vsilu8: the bits of the scalar gdn_silu_fast). */
static inline __attribute__((always_inline)) void norm_gate_body(float *y, const float *o, const float *z, const float *w,
                                                                 int d, float eps) {
    double sum = 0.0;
    for (int i = 0; i < d; i++) sum += (double)(o[i] * o[i]);
    const float mean = (float)(sum / d);
    const float r = 1.0f / sqrtf(mean + eps);
    int i = 0;
    for (; i + 8 <= d; i += 8) {
        float sz[8];
        silu8(sz, z + i);
        ST8(y + i, LD8(o + i) * r * LD8(w + i) * LD8(sz));
    }
    for (; i < d; i++) {
        const vexp_v4f v = {z[i], z[i], z[i], z[i]};
        y[i] = o[i] * r * w[i] * vsilu4(&v)[0];
    }
}

/* n tokens on one head, column tiles of W vectors of VL lanes (VL W columns of S) at a time,
 * each tile's accumulators in registers (the whole d = 128 row would need 16 ymm plus operands):
 * tiles of 32 and 8 columns (v8), and first, for two or more tokens, of 64 and 16 (v16) in a
 * 16-lane build (GDN_V16).
 * Column b of S meets only column b of the update (delta_b, o_b), so the tiles are independent:
 * each tile runs all n tokens while its d x VL W floats (16 / 32 KB at d = 128, W = 4) stay in
 * L1, instead of every token streaming the whole state (64 KB) through L2 twice. Per token i, on
 * the tile:
 *   pass 1: kv_b = sum_a (S[a][b] dec) k_a, lane b in order of a;
 *   pass 2: S[a][b] = S[a][b] dec + k_a delta_b (the decayed value of pass 1, same rounding);
 *           o_b = sum_a S[a][b] q_a in order of a.
 * Token i's pass 2 and token i + 1's pass 1 run as one pass (GDN_TILE_P2P1): n + 1 passes over
 * the tile for n tokens instead of 2 n, with two independent sums per row. One token reads the
 * tile in pass 1 and writes it once in pass 2; with more, each pass but the last leaves the
 * decayed state S dec in the tile, so the next pass loads it instead of multiplying again (the
 * same values: the bits do not change), and the last pass stores S.
 * Every lane performs the operations of the plain two-pass loop (decay stored, then the rank-1
 * update), token after token, in the same order, so the bits are the same for any tile width,
 * token count per call and ISA: n calls of one token equal one call of n.
 * pf (optional): the next head's state, prefetched so that its first pass finds it in cache while
 * this head computes: with one token during the last pass 2 (VL / 4 lines per row of a tile, d^2
 * / 16 lines over the d^2 / (VL W) rows of the tiles' pass 2), with more spread into L2 over all
 * n + 1 passes (pf_row lines a row), so the stream runs beside the whole head's arithmetic
 * instead of its last sixth. With both, `tern bench-kernel --gdn -t 2` (bonsai2-27b's state from
 * memory) on bench/RESULTS.md host D: 5 tokens 14.0-14.3 ms against 15.9-16.0 per 48 layers, 16
 * tokens 35.2-35.4 against 38.9-39.6; one token unchanged. */
#define GDN_UNROLL _Pragma("GCC unroll 4")
/* pf_row lines of the next head's state into L2 (prefetcht1), until the whole state is asked for */
#define GDN_PF_SPREAD()                                                                                         \
    for (int pl = 0; pl < pf_row && pfp < pf_stop; pl++) {                                                      \
        __builtin_prefetch(pfp, 0, 2);                                                                          \
        pfp += 64;                                                                                              \
    }
/* Token 0's pass 1; PD (two or more tokens): stores S dec in place for the pass after it. */
#define GDN_TILE_P1(W, V, VL, LD, ST, PD)                                                                       \
    do {                                                                                                        \
        V acc[W];                                                                                               \
        GDN_UNROLL for (int t = 0; t < (W); t++) acc[t] = (V){0};                                               \
        float *row = S + b0;                                                                                    \
        for (int a = 0; a < d; a++, row += d) {                                                                 \
            const float ka = k[a];                                                                              \
            GDN_PF_SPREAD()                                                                                     \
            GDN_UNROLL for (int t = 0; t < (W); t++) {                                                          \
                const V sd = LD(row + (VL) * t) * dec;                                                          \
                if (PD) ST(row + (VL) * t, sd);                                                                 \
                acc[t] += sd * ka;                                                                              \
            }                                                                                                   \
        }                                                                                                       \
        GDN_UNROLL for (int t = 0; t < (W); t++) ST(delta + b0 + (VL) * t, (LD(v + b0 + (VL) * t) - acc[t]) * beta); \
    } while (0)

/* Pass 2 of the last token (WO: with its output o), prefetching the next head's state (pf). PD:
 * the rows hold S dec (stored by the pass before), so the multiply by dec is not repeated. */
#define GDN_TILE_P2(W, V, VL, LD, ST, WO, PD)                                                                   \
    do {                                                                                                        \
        V acc[W], dl[W];                                                                                        \
        GDN_UNROLL for (int t = 0; t < (W); t++) { acc[t] = (V){0}; dl[t] = LD(delta + b0 + (VL) * t); }        \
        float *row = S + b0;                                                                                    \
        for (int a = 0; a < d; a++, row += d) {                                                                 \
            const float ka = k[a], qa = (WO) ? q[a] : 0.0f;                                                     \
            for (int pl = 0; pl < (VL) / 8 && pfp < pf_stop; pl++) { __builtin_prefetch(pfp, 0, 3); __builtin_prefetch(pfp + 64, 0, 3); pfp += 128; } \
            GDN_UNROLL for (int t = 0; t < (W); t++) {                                                          \
                V s = LD(row + (VL) * t);                                                                       \
                if (!(PD)) s = s * dec;                                                                         \
                s = s + ka * dl[t];                                                                             \
                ST(row + (VL) * t, s);                                                                          \
                if (WO) acc[t] += s * qa;                                                                       \
            }                                                                                                   \
        }                                                                                                       \
        if (WO) {                                                                                               \
            GDN_UNROLL for (int t = 0; t < (W); t++) ST(o + b0 + (VL) * t, acc[t] * scale);                     \
        }                                                                                                       \
    } while (0)

/* Token i's pass 2 fused with token i + 1's pass 1 (WO: with token i's output): the value s that
 * pass 2 computes is the value token i + 1's pass 1 would load back, so kv_b of token i + 1 (kn,
 * decn) is summed from it in the same order with the same roundings, while the row is in
 * registers; two independent accumulator sets per row, and one pass over the tile per
 * token instead of two. The rows hold S dec on entry and s decn on exit: the decayed value both
 * passes of the next token need, computed once. delta: token i's on entry (loaded first),
 * token i + 1's (vn, betan) on exit. */
#define GDN_TILE_P2P1(W, V, VL, LD, ST, WO)                                                                     \
    do {                                                                                                        \
        V acc[W], kv[W], dl[W];                                                                                 \
        GDN_UNROLL for (int t = 0; t < (W); t++) { acc[t] = (V){0}; kv[t] = (V){0}; dl[t] = LD(delta + b0 + (VL) * t); } \
        float *row = S + b0;                                                                                    \
        for (int a = 0; a < d; a++, row += d) {                                                                 \
            const float ka = k[a], qa = (WO) ? q[a] : 0.0f, kna = kn[a];                                        \
            GDN_PF_SPREAD()                                                                                     \
            GDN_UNROLL for (int t = 0; t < (W); t++) {                                                          \
                const V s = LD(row + (VL) * t) + ka * dl[t];                                                    \
                const V sd = s * decn;                                                                          \
                ST(row + (VL) * t, sd);                                                                         \
                if (WO) acc[t] += s * qa;                                                                       \
                kv[t] += sd * kna;                                                                              \
            }                                                                                                   \
        }                                                                                                       \
        GDN_UNROLL for (int t = 0; t < (W); t++) {                                                              \
            if (WO) ST(o + b0 + (VL) * t, acc[t] * scale);                                                      \
            ST(delta + b0 + (VL) * t, (LD(vn + b0 + (VL) * t) - kv[t]) * betan);                               \
        }                                                                                                       \
    } while (0)

/* The n tokens of the tile at column bt, width W: token 0's pass 1, then per token i its pass 2,
 * fused with token i + 1's pass 1 while there is one (the macros above on the token's q, k, v,
 * beta, dec and o: names they read). With two or more tokens the tile holds the decayed state
 * between passes (the same values as recomputing it: the bits do not change); the last pass
 * stores the state. */
#define GDN_TOKENS_TILE(W, V, VL, LD, ST)                                                                       \
    {                                                                                                           \
        const int b0 = bt;                                                                                      \
        {   /* token 0's pass 1 */                                                                              \
            const float *const k = k0, *const v = v0;                                                           \
            const float beta = beta0[0], dec = decs[0];                                                         \
            if (n > 1) GDN_TILE_P1(W, V, VL, LD, ST, 1);                                                        \
            else GDN_TILE_P1(W, V, VL, LD, ST, 0);                                                              \
        }                                                                                                       \
        for (int i = 0; i < n; i++) {                                                                           \
            const float *const q = q0 + i * ld_q, *const k = k0 + i * ld_k;                                     \
            const float dec = decs[i];                                                                          \
            float *const o = o0 ? o0 + i * ld_o : NULL;                                                         \
            if (i + 1 < n) {                                                                                    \
                const float *const kn = k0 + (i + 1) * ld_k, *const vn = v0 + (i + 1) * ld_v;                   \
                const float betan = beta0[(i + 1) * ld_g], decn = decs[i + 1];                                  \
                if (o) GDN_TILE_P2P1(W, V, VL, LD, ST, 1);                                                      \
                else GDN_TILE_P2P1(W, V, VL, LD, ST, 0);                                                        \
                continue;                                                                                       \
            }                                                                                                   \
            (void)dec;                                                                                          \
            if (n > 1) {                                                                                        \
                if (o) GDN_TILE_P2(W, V, VL, LD, ST, 1, 1);                                                     \
                else GDN_TILE_P2(W, V, VL, LD, ST, 0, 1);                                                       \
            } else {                                                                                            \
                if (o) GDN_TILE_P2(W, V, VL, LD, ST, 1, 0);                                                     \
                else GDN_TILE_P2(W, V, VL, LD, ST, 0, 0);                                                       \
            }                                                                                                   \
        }                                                                                                       \
    }

/* Token i reads q0 + i ld_q, k0 + i ld_k, v0 + i ld_v, beta0[i ld_g], gam0[i ld_g] and writes
 * o0 + i ld_o (o0 may be NULL: state update only). d % 8 == 0, d <= GDN_D_MAX, n <= GDN_CHUNK. */
static inline __attribute__((always_inline)) void delta_tokens_body(float *S, int d, int n, const float *q0,
                                                                    int64_t ld_q, const float *k0, int64_t ld_k,
                                                                    const float *v0, int64_t ld_v, const float *beta0,
                                                                    const float *gam0, int64_t ld_g, float *o0,
                                                                    int64_t ld_o, const float *pf) {
    const float scale = 1.0f / sqrtf((float)d);
    float decs[GDN_CHUNK];
    for (int i = 0; i < n; i++) decs[i] = expf(gam0[i * ld_g]);
    float delta[GDN_D_MAX] __attribute__((aligned(32)));
    const char *pfp = (const char *)pf;
    const char *const pf_stop = pf ? (const char *)(pf + (int64_t)d * d) : NULL;
    const int pf_row = n > 1 ? (d * d / 16 + (n + 1) * d * TERN_MAX(1, d / 64) - 1) / ((n + 1) * d * TERN_MAX(1, d / 64)) : 0;
    int bt = 0;
#ifdef GDN_V16
    if (n > 1) {   /* one token (decode) streams the state from memory: the 8-lane tiles, faster there */
        for (; bt + 64 <= d; bt += 64) GDN_TOKENS_TILE(4, v16, 16, LD16, ST16)
        for (; bt + 16 <= d; bt += 16) GDN_TOKENS_TILE(1, v16, 16, LD16, ST16)
    }
#endif
    for (; bt + 32 <= d; bt += 32) GDN_TOKENS_TILE(4, v8, 8, LD8, ST8)
    for (; bt < d; bt += 8) GDN_TOKENS_TILE(1, v8, 8, LD8, ST8)
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
     * The per-token weights w_j = e^{Lg_n - Lg_j} reuse the Lg slots (their values are not read after this point). */
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

#endif /* TERN_MODEL_GDN_IMPL_H */
