/* gdn.h: Gated DeltaNet (GDN) layer math for the qwen35 recurrent layers. Layer 5 primitive.
 * Source of truth: ../shared/spec/ternary-gguf.md section 5.4 (GDN(i, h)) and 5.3 (primitives);
 * the chunked form is the exact block algebra of the gated delta rule (Yang, Kautz, Hatamizadeh,
 * "Gated Delta Networks", 2024, section 3: the WY/UT formulation), derived in gdn.c.
 *
 * Shapes (one GDN layer; d = d_head = ssm.state_size, Hk = n_k_head, Hv = n_v_head):
 *   qkv row of one token: n_ch = (2 Hk + Hv) d floats = [q: Hk x d | k: Hk x d | v: Hv x d]
 *   z, y (one token): Hv x d ("tiled" V-head order: v-head t pairs with key head t mod Hk)
 *   S (one layer): Hv x d x d f32, S[t][a][b], a = key index, b = value index (row-major)
 *   conv state (one layer): (d_conv - 1) x n_ch f32, oldest input first
 *   conv weight ssm_conv1d: ne = [d_conv, n_ch], i.e. n_ch rows of d_conv taps (oldest first)
 * Gates: gam = softplus(alpha + dt_bias) * ssm_a (the log of the decay, <= 0), beta in (0, 1).
 * The decay is carried as its log (gam) so the chunked form never divides cumulative decays.
 *
 * Numerics: every function here uses a fixed float order per output element (vector code is
 * lane-wise, i.e. the same IEEE operations as the scalar loop), so results do not depend on the
 * ISA or on how heads are split between threads. The token-by-token path (gdn_delta_token) is
 * the reference; the chunked path (gdn_delta_chunk) is exact algebra with a different rounding
 * order (tests bound the difference). */
#ifndef TERN_MODEL_GDN_H
#define TERN_MODEL_GDN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gdn_dims {
    int n_k_head;   /* Hk: q/k heads (qwen35.ssm.group_count) */
    int n_v_head;   /* Hv: v heads (qwen35.ssm.time_step_rank), a multiple of Hk */
    int d_head;     /* d: ssm.state_size (dk = dv), a multiple of 8 */
    int d_conv;     /* ssm.conv_kernel (4); the conv state keeps d_conv - 1 inputs */
    float eps;      /* RMS / L2 norm epsilon (layer_norm_rms_epsilon) */
    bool ggml;      /* mirror the reference runtime's AVX-512 build bit for bit (ggml numerics):
                       FMA conv, ggml's vector expf in SiLU, its f32 dot order in the recurrence
                       (needs d % 64 == 0); slower (fmaf), only for comparisons */
} gdn_dims;

/* Channels of the qkv projection: (2 Hk + Hv) d. */
int64_t gdn_n_ch(const gdn_dims *g);
/* Floats of one layer's recurrent state (Hv d d) and conv state ((d_conv - 1) n_ch). */
int64_t gdn_state_floats(const gdn_dims *g);
int64_t gdn_conv_floats(const gdn_dims *g);

/* Largest chunk of the chunked delta rule, and the batch size from which gdn_layer_heads uses
 * it. Batches smaller than GDN_CHUNK_MIN (so every batch of 1..16 tokens: speculative
 * verification of up to 16 drafts, small batches) run token by token, so each position is
 * bit-identical to single-token decode. */
/* GDN_CHUNK 16: measured fastest of 16/32/64 on Zen 4 (the C^2 d work grows with C, the C d^2 work
 * does not shrink) */
#define GDN_CHUNK 16
#define GDN_CHUNK_MIN 17

/* softplus(x) = x for x > 20, else ln(1 + e^x) (spec 5.3). */
float gdn_softplus(float x);
/* SiLU: x / (1 + expf(-x)) with libm expf; gdn_silu_ggml: the same with the reference runtime's
 * AVX-512 vector exp (ggml_v_expf: range reduction by 2^n, degree-5 polynomial, scalef), each
 * vector operation mirrored with the same single rounding (fmaf for its fused ones). */
float gdn_silu(float x);
float gdn_silu_ggml(float x);
/* The SiLU of fast and f32 numerics (conv, gated norm; the FFN's SwiGLU is blk_swiglu_fast with
 * the same SiLU): vexp.h's vsilu8, the same bits in scalar and vector code on every ISA; within 3
 * ulp of the exact value for x >= -87, -0 below (tested). _n: y[i] = silu(x[i]) for n values. */
float gdn_silu_fast(float x);
void gdn_silu_fast_n(float *y, const float *x, int64_t n);

/* Gates of n tokens: a, b are the ssm_alpha / ssm_beta projections (n x Hv, token-major).
 * gam[i] = softplus(a[i] + dt_bias[h]) * ssm_a[h]; beta[i] = sigmoid(b[i]). In place allowed
 * (gam may alias a, beta may alias b). */
void gdn_gates(const gdn_dims *g, int n, const float *a, const float *b, const float *dt_bias,
               const float *ssm_a, float *gam, float *beta);

/* Short causal conv + SiLU over n tokens, channels [c0, c1): for token i,
 *   out[i][c] = silu( sum_{j<d_conv-1} w[c][j] * state[j][c] + w[c][d_conv-1] * in[i][c] ),
 * summed oldest first, then the state shifts in in[i][c]. in/out are (n x n_ch); state is
 * (d_conv - 1) x n_ch and is updated in place. out must not alias in. */
void gdn_conv(const gdn_dims *g, int n, const float *conv_w, float *state, const float *in,
              float *out, int64_t c0, int64_t c1);

/* In place: x[h] = x[h] / max(||x[h]||_2, eps) for n_head heads of d (sum of squares in double). */
void gdn_l2norm_heads(float *x, int n_head, int d, float eps);

/* The same token step with the reference runtime's float order (ggml_compute_forward_gated_delta_net
 * on its AVX-512 build): dots over the key index in 4 x 16 fused-multiply-add lanes reduced as
 * GGML_F32x16_REDUCE + _mm512_reduce_add_ps, the rank-1 update as fmaf(k, delta, S). d % 64 == 0. */
void gdn_delta_token_ggml(float *S, int d, const float *q, const float *k, const float *v, float beta,
                          float gam, float *o);

/* One token of the delta rule on one head's state S (d x d), updated in place:
 *   S = e^gam S;  delta_b = beta (v_b - sum_a S[a][b] k_a);  S[a][b] += k_a delta_b;
 *   o_b = (sum_a S[a][b] q_a) / sqrt(d)   (o may be NULL: state update only, for replay). */
void gdn_delta_token(float *S, int d, const float *q, const float *k, const float *v, float beta,
                     float gam, float *o);

/* The same step on the named ops table's path (ops.h: "avx2", "avx512" or their kernel paths'
 * names, x86 only; anything else: the generic build), for tests that compare the paths bit for
 * bit. */
void gdn_delta_token_isa(const char *isa, float *S, int d, const float *q, const float *k, const float *v,
                         float beta, float gam, float *o);

/* n tokens (1 <= n <= GDN_CHUNK) of gdn_delta_token on one head in one call, on the named ISA
 * path (as gdn_delta_token_isa): token i reads q + i*ld_q, k + i*ld_k, v + i*ld_v, beta[i*ld_g],
 * gam[i*ld_g] and writes o + i*ld_o (o may be NULL). The same bits as n calls of
 * gdn_delta_token (each column of the state is its own recurrence; the tests check it). */
void gdn_delta_tokens_isa(const char *isa, float *S, int d, int n, const float *q, int64_t ld_q, const float *k,
                          int64_t ld_k, const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g,
                          float *o, int64_t ld_o);

/* n tokens (n <= GDN_CHUNK) of the delta rule on one head at once (chunked form). Token i reads
 * q + i*ld_q, k + i*ld_k, v + i*ld_v, beta[i*ld_g], gam[i*ld_g]; writes o + i*ld_o (o may be
 * NULL). scratch: gdn_chunk_scratch_floats(d) floats, 64-byte aligned. Agrees with n calls of
 * gdn_delta_token to within f32 rounding of the different summation order (see the tests). */
size_t gdn_chunk_scratch_floats(int d);
/* gdn_delta_chunk on the named ISA path (as gdn_delta_token_isa), for tests. */
void gdn_delta_chunk_isa(const char *isa, float *S, int d, int n, const float *q, int64_t ld_q, const float *k,
                         int64_t ld_k, const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g,
                         float *o, int64_t ld_o, float *scratch);
void gdn_delta_chunk(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                     const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g,
                     float *o, int64_t ld_o, float *scratch);

/* Gated RMSNorm of one head: y_b = o_b * r * w_b * silu(z_b), r = 1/sqrt(mean(o^2) + eps)
 * (sum of squares in double, as the reference runtime; ggml: gdn_silu_ggml). y may alias o. */
void gdn_norm_gate(float *y, const float *o, const float *z, const float *w, int d, float eps, bool ggml);

/* The recurrent part of one GDN layer for n tokens and v-heads [h0, h1) (split heads across
 * threads; each head is independent, so the bits do not depend on the split):
 *   u    (n x n_ch) the conv+SiLU output, with q and k heads already L2-normalised
 *   gam, beta (n x Hv), z (n x Hv d), ssm_norm (d)
 *   S    the layer's state (Hv x d x d), heads [h0, h1) updated in place
 *   y    (n x Hv d) output, tiled order, gated-normed
 * chunked (and n >= GDN_CHUNK_MIN): the chunked form (chunks of GDN_CHUNK), else token by
 * token (the reference runtime's sequential recurrence; ggml numerics mode uses it always).
 * scratch: gdn_chunk_scratch_floats(d) floats for this thread (used only when chunking). */
void gdn_layer_heads(const gdn_dims *g, int n, const float *u, const float *gam, const float *beta,
                     const float *z, const float *ssm_norm, float *S, float *y, int h0, int h1,
                     bool chunked, float *scratch);

/* ---- rollback support (runtime/rstate.h) -------------------------------------------------
 * The logged inputs of one token for one layer: [raw qkv (n_ch) | gam (Hv) | beta (Hv)]. */
int64_t gdn_log_floats(const gdn_dims *g);
/* Write token i's entry: qkv_raw (n_ch), gam and beta (Hv each). */
void gdn_log_token(const gdn_dims *g, float *dst, const float *qkv_raw, const float *gam, const float *beta);
/* Re-apply n logged tokens (entry i at in + i * gdn_log_floats) to one layer's state S and conv
 * state, with the token-by-token math of the forward (bit-identical state). S_from, conv_from:
 * NULL (in place), or the state to start from, copied into S and conv first (n may be 0: the
 * copy alone). u: scratch of n * n_ch floats. */
void gdn_replay(const gdn_dims *g, const float *conv_w, float *S, float *conv, const float *S_from, const float *conv_from,
                const float *in, int n, float *u);
/* gdn_replay in two parts that split across threads (the same bits for any split):
 * gdn_replay_conv: the conv state of channels [c0, c1) from conv_from (when not NULL), then conv
 * + SiLU of those channels for the n tokens into u (n x n_ch), and the L2 norm of the q/k heads
 * in the range (c0, c1 multiples of d, or c1 = n_ch); then, after every channel is done,
 * gdn_replay_heads: the state of v-heads [h0, h1) from S_from (when not NULL: one head's d x d
 * floats at a time, so the delta rule finds it in cache), then their delta rule (state update
 * only). */
void gdn_replay_conv(const gdn_dims *g, const float *conv_w, float *conv, const float *conv_from, const float *in, int n,
                     float *u, int64_t c0, int64_t c1);
void gdn_replay_heads(const gdn_dims *g, float *S, const float *S_from, const float *in, int n, const float *u, int h0,
                      int h1);

#endif /* TERN_MODEL_GDN_H */
