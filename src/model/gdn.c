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
#include "model/gdn_impl.h"

#include "core/core.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>



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

/* ---- the fast-numerics SiLU: vexp.h's vsilu8 ------------------------------------------------
 * One lane of the 4-lane form, so the scalar value has the bits of every vector copy. */
float gdn_silu_fast(float x) {
    const vexp_v4f v = {x, x, x, x};
    return vsilu4(&v)[0];
}

void gdn_silu_fast_n(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) silu8(y + i, x + i);
    for (; i < n; i++) y[i] = gdn_silu_fast(x[i]);
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

int64_t gdn_conv_blocks_generic(const float *conv_w, float *state, const float *x, float *y, int64_t nch, int dc,
                                int64_t c0, int64_t c1, int n) {
    return conv_blocks_body(conv_w, state, x, y, nch, dc, c0, c1, n);
}

void gdn_conv(const gdn_dims *g, int n, const float *conv_w, float *state, const float *in,
              float *out, int64_t c0, int64_t c1) {
    const int64_t nch = gdn_n_ch(g);
    const int dc = g->d_conv, ns = dc - 1;
    /* each channel is its own recurrence: the blocks take every token of theirs, the channels
     * left over go token by token below */
    const int64_t cb = g->ggml ? c0 : model_ops_active()->gdn_conv_blocks(conv_w, state, in, out, nch, dc, c0, c1, n);
    for (int i = 0; i < n; i++) {
        const float *x = in + (int64_t)i * nch;
        float *y = out + (int64_t)i * nch;
        for (int64_t c = cb; c < c1; c++) {
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

void gdn_norm_gate_generic(float *y, const float *o, const float *z, const float *w, int d, float eps) {
    norm_gate_body(y, o, z, w, d, eps);
}

void gdn_norm_gate(float *y, const float *o, const float *z, const float *w, int d, float eps, bool ggml) {
    if (!ggml) {
        model_ops_active()->norm_gate(y, o, z, w, d, eps);
        return;
    }
    double sum = 0.0;
    for (int i = 0; i < d; i++) sum += (double)(o[i] * o[i]);
    const float mean = (float)(sum / d);
    const float r = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < d; i++) y[i] = o[i] * r * w[i] * gdn_silu_ggml(z[i]);
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

void gdn_delta_tokens_generic(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                              const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                              int64_t ld_o, const float *pf) {
    delta_tokens_body(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, pf);
}

/* The named table's copy (tests), the portable one when that table is not compiled in. */
static const model_ops *ops_named(const char *isa) {
    const model_ops *o = model_ops_find(isa);
    return o ? o : model_ops_find("generic");
}

void gdn_delta_token_isa(const char *isa, float *S, int d, const float *q, const float *k, const float *v,
                         float beta, float gam, float *o) {
    gdn_delta_tokens_isa(isa, S, d, 1, q, 0, k, 0, v, 0, &beta, &gam, 0, o, 0);
}

void gdn_delta_tokens_isa(const char *isa, float *S, int d, int n, const float *q, int64_t ld_q, const float *k,
                          int64_t ld_k, const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g,
                          float *o, int64_t ld_o) {
    TERN_ASSERT(d % 8 == 0 && d <= GDN_D_MAX && n >= 1 && n <= GDN_CHUNK);
    ops_named(isa)->delta_tokens(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, NULL);
}

void gdn_delta_token(float *S, int d, const float *q, const float *k, const float *v, float beta,
                     float gam, float *o) {
    TERN_DASSERT(d % 8 == 0 && d <= GDN_D_MAX);
    model_ops_active()->delta_tokens(S, d, 1, q, 0, k, 0, v, 0, &beta, &gam, 0, o, 0, NULL);
}

/* ---- chunked delta rule ------------------------------------------------------------------ */

size_t gdn_chunk_scratch_floats(int d) {
    /* Lg[C] | KS[C][d] | QS[C][d] | D[C][d] | kk[C][C] | qk[C][C] */
    return (size_t)GDN_CHUNK + 3 * (size_t)GDN_CHUNK * d + 2 * (size_t)GDN_CHUNK * GDN_CHUNK;
}

void gdn_delta_chunk_generic(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                             const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                             int64_t ld_o, float *scratch) {
    delta_chunk_body(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, scratch);
}

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
    const model_ops *ops = model_ops_active();
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
            /* up to GDN_CHUNK tokens per call, each column tile through all of them in L1; the
             * last call of a head prefetches the next head's state */
            const float *pf = t + 1 < h1 ? St + (int64_t)d * d : NULL;
            for (int i0 = 0; i0 < n; i0 += GDN_CHUNK) {
                const int m = TERN_MIN(GDN_CHUNK, n - i0);
                ops->delta_tokens(St, d, m, q + i0 * nch, nch, k + i0 * nch, nch, v + i0 * nch, nch,
                                  beta + (int64_t)i0 * hv + t, gam + (int64_t)i0 * hv + t, hv, yt + i0 * ldy, ldy,
                                  i0 + m == n ? pf : NULL);
            }
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

void gdn_replay_conv(const gdn_dims *g, const float *conv_w, float *conv, const float *conv_from, const float *in, int n,
                     float *u, int64_t c0, int64_t c1) {
    const int d = g->d_head, hk = g->n_k_head;
    const int64_t nch = gdn_n_ch(g), nl = gdn_log_floats(g), qk_end = 2 * (int64_t)hk * d;
    if (conv_from)   /* the state's rows (d_conv - 1 of n_ch floats): this range of each */
        for (int j = 0; j < g->d_conv - 1; j++)
            memcpy(conv + (int64_t)j * nch + c0, conv_from + (int64_t)j * nch + c0, sizeof(float) * (size_t)(c1 - c0));
    for (int i = 0; i < n; i++) {                     /* conv + SiLU + L2 norm, token by token */
        gdn_conv(g, 1, conv_w, conv, in + i * nl, u + i * nch, c0, c1);
        for (int64_t c = c0; c < TERN_MIN(c1, qk_end); c += d) gdn_l2norm_heads(u + i * nch + c, 1, d, g->eps);
    }
}

void gdn_replay_heads(const gdn_dims *g, float *S, const float *S_from, const float *in, int n, const float *u, int h0,
                      int h1) {
    const int d = g->d_head, hk = g->n_k_head, hv = g->n_v_head;
    const int64_t nch = gdn_n_ch(g), nl = gdn_log_floats(g);
    const model_ops *ops = model_ops_active();
    for (int t = h0; t < h1; t++) {                   /* head-outer: the head's state stays in cache */
        const int kh = t % hk;
        float *St = S + (int64_t)t * d * d;
        if (S_from) memcpy(St, S_from + (int64_t)t * d * d, sizeof(float) * (size_t)d * (size_t)d);
        if (g->ggml) {
            for (int i = 0; i < n; i++) {
                const float *ui = u + i * nch, *gi = in + i * nl + nch;
                gdn_delta_token_ggml(St, d, ui + (int64_t)kh * d, ui + (int64_t)(hk + kh) * d,
                                     ui + (int64_t)(2 * hk + t) * d, gi[hv + t], gi[t], NULL);
            }
            continue;
        }
        /* the next head's state, read next: from S_from when restoring */
        const float *pf = t + 1 >= h1 ? NULL : S_from ? S_from + (int64_t)(t + 1) * d * d : St + (int64_t)d * d;
        for (int i0 = 0; i0 < n; i0 += GDN_CHUNK) {   /* the logged gam and beta of token i at in + i nl + nch */
            const int m = TERN_MIN(GDN_CHUNK, n - i0);
            const float *ui = u + i0 * nch, *gi = in + i0 * nl + nch;
            ops->delta_tokens(St, d, m, ui + (int64_t)kh * d, nch, ui + (int64_t)(hk + kh) * d, nch,
                              ui + (int64_t)(2 * hk + t) * d, nch, gi + hv + t, gi + t, nl, NULL, 0,
                              i0 + m == n ? pf : NULL);
        }
    }
}

void gdn_replay(const gdn_dims *g, const float *conv_w, float *S, float *conv, const float *S_from, const float *conv_from,
                const float *in, int n, float *u) {
    gdn_replay_conv(g, conv_w, conv, conv_from, in, n, u, 0, gdn_n_ch(g));
    gdn_replay_heads(g, S, S_from, in, n, u, 0, g->n_v_head);
}
