/* blocks.h: shared building blocks of the forward passes (RMSNorm, RoPE, attention over the KV
 * cache, SwiGLU, pooled projections). Layer 5. Pure functions of their arguments: the same code
 * runs on every ISA, so no output bit depends on the ISA or the thread count.
 * Source of truth: spec/ternary-gguf.md 5.3 (primitives), 6 (qwen3 forward), 8 (numerics);
 * the ggml CPU operators these mirror are named next to each function. */
#ifndef TERN_MODEL_BLOCKS_H
#define TERN_MODEL_BLOCKS_H

#include "model/model.h"

#include <stdint.h>

/* Per-op profile (tern bench --profile): process-wide counters, written only while a forward
 * runs under the model's eval lock (one forward at a time); `on` is set by tern_profile_enable.
 * s[]: wall seconds per category; busy[ith]: seconds thread ith spent inside kern_matmul (the
 * rest of the matmul wall time, times the thread count, is barrier wait and imbalance). */
enum { BLK_PROF_EMBED, BLK_PROF_NORM, BLK_PROF_QUANT, BLK_PROF_MATMUL, BLK_PROF_ATTN, BLK_PROF_SWIGLU, BLK_PROF_RECUR, BLK_PROF_N };
typedef struct blk_prof {
    bool on;
    double s[BLK_PROF_N];
    double busy[64];
    double total_s;
    long n_forward;
} blk_prof;
extern blk_prof g_blk_prof;
/* The profile's clock: blk_prof_now() is the time when profiling (0 otherwise, no clock read);
 * blk_prof_add(cat, t0) adds the time since t0 to category cat and returns the time it read,
 * so consecutive sections chain: t = blk_prof_add(A, t); t = blk_prof_add(B, t). */
static inline double blk_prof_now(void) { return g_blk_prof.on ? tern_time_s() : 0.0; }
static inline double blk_prof_add(int cat, double t0) {
    if (!g_blk_prof.on) return 0.0;
    const double t1 = tern_time_s();
    g_blk_prof.s[cat] += t1 - t0;
    return t1;
}

/* dst[i] = f32_to_fp16(src[i]) (core/fp16.h), bit for bit; F16C in the avx2 ops table (ops.h),
 * else the scalar conversion. The KV cache store of the forwards. */
void blk_f16_from_f32(uint16_t *dst, const float *src, int n);
void blk_f16_from_f32_avx2(uint16_t *dst, const float *src, int n);
/* One-time tables (fp16 -> f32); called by model_load. Thread-safe. */
void blk_init(void);

/* y = RMSNorm_eps(x) * w over n values (y may alias x). Order as ggml_compute_forward_rms_norm
 * then ggml_mul: sum of float squares in double, mean rounded to float, scale = 1/sqrtf(mean +
 * eps), y = (x * scale) * w (two roundings). w NULL: no weight. */
void blk_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
/* blk_rmsnorm of a numerics mode: ggml and f32 as blk_rmsnorm; fast numerics sum the same float
 * squares in double over 8 lanes (lane l: i = l mod 8, increasing i; combined ((l0 + l4) + (l2 +
 * l6)) + ((l1 + l5) + (l3 + l7))), within ~1 ulp of the sequential scale, same bits on every ISA.
 * What the dense forward and blk_prep_act use. */
void blk_rmsnorm_mode(float *y, const float *x, const float *w, int n, float eps, kern_numerics mode);

/* RoPE angles of one position: cs[2i] = cos, cs[2i+1] = sin of pair i (n_rot / 2 pairs), as
 * ggml's rope cache: theta_i = pos * base^(-2i/n_rot) by repeated float multiplication with
 * theta_scale = powf(base, -2/n_rot), YaRN mixing (rope_yarn) when hp->yarn. */
void blk_rope_cache(float *cs, int pos, const model_hparams *hp);
/* Rotate the first n_rot dims of each of n_head heads (length hd) of x in place. ROPE_NORMAL
 * pairs (2i, 2i+1); ROPE_NEOX pairs (i, i + n_rot/2). */
void blk_rope(float *x, int n_head, int hd, const float *cs, int n_rot, int rope_type);

/* out[i] = silu(g[i]) * u[i], silu(x) = x / (1 + expf(-x)) (ggml_vec_swiglu_f32). out may alias g. */
void blk_swiglu(float *out, const float *g, const float *u, int64_t n);
/* The SwiGLU of fast numerics (what blk_prep_act and the FFN use in KQ_FAST): the same product
 * with t = e^-|x| from an 8-lane IEEE-only exp (model/vexp.h, within ~2 ulp of expf, the same bits
 * on every ISA): silu(x) = x / (1 + t) for x >= 0, (x * t) / (1 + t) for x < 0. out may alias g. */
void blk_swiglu_fast(float *out, const float *g, const float *u, int64_t n);
/* Its copies (blocks.c portable, x86/attn_avx2.c AVX2, x86/attn_avx512.c AVX-512): same bits; blk_swiglu_fast takes the one
 * of the active ops table (ops.h), as blk_attn_tile does. */
void blk_swiglu_fast_generic(float *out, const float *g, const float *u, int64_t n);
void blk_swiglu_fast_avx2(float *out, const float *g, const float *u, int64_t n);
void blk_swiglu_fast_avx512(float *out, const float *g, const float *u, int64_t n);

/* Attention of one query head over positions [0, n_kv) of a layer's K/V rows, kv head ikv.
 *   q: (hd_k) roped query; out: (hd_v).
 *   flash_ggml: mirror ggml's CPU flash attention (one query row): Q rounded to fp16 for an
 *     fp16 cache, online softmax with expf, V accumulated in the cache type (fp16 rounding per
 *     step), dot order of ggml_vec_dot_f16's 4x16-lane AVX-512 layout; else: scores in float
 *     (sequential dot), softmax with max subtraction and the sum in double (ggml_soft_max_f32),
 *     V accumulated in float.
 *   scratch: n_kv floats (scores); qh: hd_k uint16; acc: max(hd_k, hd_v) floats at least. */
typedef struct blk_kv_view {
    const void *k, *v;           /* the layer's keys / values of kv head 0 at position 0 */
    size_t k_stride, v_stride;   /* elements between consecutive positions of one head */
    size_t k_head, v_head;       /* elements between kv head h and h + 1 at one position */
    bool f32;                    /* element type f32, else fp16 */
} blk_kv_view;
/* The view of layer il of a KV cache (head-major: kv.h). */
blk_kv_view blk_kv_view_of(const kv_cache *kv, int il);
void blk_attn_head(float *out, const float *q, const blk_kv_view *kv, int ikv, int n_kv, int hd_k, int hd_v,
                   float scale, bool flash_ggml, float *scores, uint16_t *qh, float *acc);

/* Standard-softmax attention of a tile of nq (1..BLK_ATTN_NQ) queries that read the same kv head
 * ikv of the same K/V rows: query s (q[s]: hd_k roped floats) attends to positions [0, n_kv[s])
 * and writes out[s] (hd_v floats). The K/V rows (and their fp16 widening) are loaded once per
 * tile. Each query's output bits depend only on (q[s], n_kv[s], the rows, scale): not on the tile,
 * its other queries, the thread or the ISA (the order of operations is in attn_impl.h: 8-lane
 * dot, softmax with the sum in double, V accumulated in increasing row order). This is the
 * non-ggml path of blk_attn_head (nq = 1).
 *   scores: nq * max(n_kv) floats of scratch. hd_k, hd_v >= 1 (any; multiples of 8 are fastest). */
#define BLK_ATTN_NQ 8
void blk_attn_tile(int nq, const float *const *q, float *const *out, const int *n_kv, const blk_kv_view *kv, int ikv,
                   int hd_k, int hd_v, float scale, float *scores);
/* The copies (attn.c, x86/attn_avx2.c, x86/attn_avx512.c): same contract and bits as blk_attn_tile. */
typedef float attn_v8f __attribute__((vector_size(32)));
typedef int32_t attn_v8i __attribute__((vector_size(32)));
typedef double attn_v4d __attribute__((vector_size(32)));
void blk_attn_tile_generic(int nq, const float *const *q, float *const *out, const int *n_kv, const blk_kv_view *kv,
                           int ikv, int hd_k, int hd_v, float scale, float *scores);
void blk_attn_tile_avx2(int nq, const float *const *q, float *const *out, const int *n_kv, const blk_kv_view *kv,
                        int ikv, int hd_k, int hd_v, float scale, float *scores);
void blk_attn_tile_avx512(int nq, const float *const *q, float *const *out, const int *n_kv, const blk_kv_view *kv,
                          int ikv, int hd_k, int hd_v, float scale, float *scores);

/* Projections in ONE pool job: y[k] = w[k] . a[k] for k < n_w (y[k]: (a[k]->ncols, w[k]->n_out),
 * column-major), every row of every weight. The rows are split over the pool in multiples of
 * KERN_ROW_SPLIT on a virtual concatenation of the weights (each padded to the alignment); how
 * (claimed as threads finish, in chunk sizes by batch width) is in blocks.c. With resid (n_w == 1):
 * resid[c * n_out + r] += y[c * n_out + r], added by the thread that computed the row (the
 * residual add inside the same job). Called with a literal:
 *   blk_project_job(pool, &(blk_proj){.n_w = 2, .a = {&a, &a}, .w = {&gate, &up}, .y = {hg, hu}}); */
#define BLK_PROJ_MAX 4
typedef struct blk_proj {
    int n_w;
    const kern_act *a[BLK_PROJ_MAX];
    const kern_w *w[BLK_PROJ_MAX];
    float *y[BLK_PROJ_MAX];
    float *resid;
} blk_proj;
void blk_project_job(tern_pool *pool, const blk_proj *p);
/* Which SiLU an FFN's SwiGLU takes: libm's expf (blk_swiglu), the fast-numerics vsilu8
 * (blk_swiglu_fast), or the reference runtime's AVX-512 vector exp (gdn_silu_ggml). */
typedef enum { BLK_SILU_LIBM, BLK_SILU_FAST, BLK_SILU_GGML } blk_silu;
/* The FFN's first half in ONE pool job: threads take row ranges (multiples of 128 and of the
 * rotation block: whole activation and rotation blocks) of BOTH gate and up (hg = gate . a,
 * hu = up . a, (a->ncols, n_ff) each), then write hg = SwiGLU(hg, hu) with the given SiLU, rotate
 * those values of every column when rot is set (rot->n > 0: had_rot, the rotated basis of
 * ffn_down), quantise them into q (must not overlap a->q), and fill *out for ffn_down (x = hg,
 * K = n_ff). The same bits as the separate steps, whatever the split. */
void blk_ffn_up(tern_pool *pool, kern_act *out, const kern_act *a, const kern_w *gate, const kern_w *up, float *hg,
                float *hu, void *q, kern_numerics mode, blk_silu silu, const model_rot *rot);
/* Prepare the activation of a projection over the pool: columns split across threads (ncols > 1),
 * or one column split into ranges of 128 values (each thread computes the RMSNorm scale of the
 * whole column itself, then writes and quantises its range; RMSNorm in place stays on the caller),
 * or the caller alone (short columns, one thread). Per column, the pre-step op writes dst from src
 *   BLK_PREP_NONE: nothing (dst == src);
 *   BLK_PREP_NORM: dst = RMSNorm_eps(src) * aux (blk_rmsnorm_mode; aux: weight, K floats; dst may
 *                  alias src);
 *   BLK_PREP_SWIGLU: dst = silu(src) * aux (aux: up, ncols x K; dst may alias src; KQ_FAST:
 *                    blk_swiglu_fast, else blk_swiglu);
 * then quantises dst into q (kern_act_bytes; nothing in KQ_F32) and fills *a (a->x = dst). Each
 * column's bits are those of the scalar steps, whatever the split. Profiled as quantise. */
enum { BLK_PREP_NONE, BLK_PREP_NORM, BLK_PREP_SWIGLU };
void blk_prep_act(tern_pool *pool, kern_act *a, int op, const float *src, const float *aux, float *dst, float eps,
                  int64_t K, int ncols, void *q, kern_numerics mode);
/* Quantise an activation (x: ncols columns of K floats) into q (kern_act_bytes) and fill *a:
 * blk_prep_act with BLK_PREP_NONE. */
void blk_quantize(tern_pool *pool, kern_act *a, const float *x, void *q, int64_t K, int ncols, kern_numerics mode);

#endif /* TERN_MODEL_BLOCKS_H */
