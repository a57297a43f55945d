/* blocks.c: shared forward-pass blocks (see blocks.h). Everything here is portable C (scalar, or
 * GCC vector extensions whose lanes repeat the scalar operations) with a fixed operation order
 * (compiled with -ffp-contract=off; fmaf() only where ggml's AVX-512 build fuses), so the results
 * are the same bits on every ISA and for every thread count. */
#include "model/blocks.h"
#include "model/gdn.h"
#include "model/hadamard.h"
#include "model/ops.h"
#include "model/vexp.h"

#include "core/fp16.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- profiling ------------------------------------------------------------------------------ */

blk_prof g_blk_prof;

/* The element-wise loops below run on vexp.h's 4-float vectors (one SSE2 or NEON register on the
 * baseline build). Each lane runs the scalar code's operations in the same order, so the bits are
 * those of the scalar loops; the loads and stores are unaligned copies. */
typedef vexp_v4f v4f;
typedef double v2d __attribute__((vector_size(16)));
static inline v4f v4f_ld(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void v4f_st(float *p, v4f v) { memcpy(p, &v, sizeof v); }

/* ---- RMSNorm -------------------------------------------------------------------------------- */

/* The RMSNorm scale 1 / sqrt(mean(x^2) + eps), ggml's order: float squares summed in double. */
static float rms_scale(const float *x, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    return 1.0f / sqrtf(mean + eps);
}

/* Fast numerics: the same float squares summed in double over 8 lanes (lane l: i = l mod 8 in
 * increasing i), combined ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): 8 independent
 * chains instead of one (the sequential sum is a latency chain of n double adds on the critical
 * path of every decode step); differs from ggml's order by at most ~1 ulp of the scale. */
static float rms_scale_lanes(const float *x, int n, float eps) {
    v2d a01 = {0, 0}, a23 = {0, 0}, a45 = {0, 0}, a67 = {0, 0};   /* lanes 0-1, 2-3, 4-5, 6-7 */
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const v4f u = v4f_ld(x + i), w = v4f_ld(x + i + 4), pu = u * u, pw = w * w;
        a01 += __builtin_convertvector(__builtin_shufflevector(pu, pu, 0, 1), v2d);
        a23 += __builtin_convertvector(__builtin_shufflevector(pu, pu, 2, 3), v2d);
        a45 += __builtin_convertvector(__builtin_shufflevector(pw, pw, 0, 1), v2d);
        a67 += __builtin_convertvector(__builtin_shufflevector(pw, pw, 2, 3), v2d);
    }
    double a[8] = {a01[0], a01[1], a23[0], a23[1], a45[0], a45[1], a67[0], a67[1]};
    for (; i < n; i++) a[i & 7] += (double)(x[i] * x[i]);
    const double sum = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    const float mean = (float)(sum / n);
    return 1.0f / sqrtf(mean + eps);
}

static float rms_scale_mode(const float *x, int n, float eps, kern_numerics mode) {
    return mode == KQ_FAST ? rms_scale_lanes(x, n, eps) : rms_scale(x, n, eps);
}

static void rms_apply(float *y, const float *x, const float *w, int n, float scale) {
    const v4f vs = {scale, scale, scale, scale};
    int i = 0;
    if (w) {
        for (; i + 4 <= n; i += 4) v4f_st(y + i, (v4f_ld(x + i) * vs) * v4f_ld(w + i));
        for (; i < n; i++) y[i] = (x[i] * scale) * w[i];
    } else {
        for (; i + 4 <= n; i += 4) v4f_st(y + i, v4f_ld(x + i) * vs);
        for (; i < n; i++) y[i] = x[i] * scale;
    }
}

void blk_rmsnorm(float *y, const float *x, const float *w, int n, float eps) { rms_apply(y, x, w, n, rms_scale(x, n, eps)); }

void blk_rmsnorm_mode(float *y, const float *x, const float *w, int n, float eps, kern_numerics mode) {
    rms_apply(y, x, w, n, rms_scale_mode(x, n, eps, mode));
}

/* ---- RoPE ----------------------------------------------------------------------------------- */

static float rope_yarn_ramp(float low, float high, int i0) {
    const float y = (float)(i0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

void blk_rope_cache(float *cs, int pos, const model_hparams *hp) {
    const float theta_scale = powf(hp->rope_freq_base, -2.0f / (float)hp->n_rot);
    float theta = (float)pos;
    for (int i0 = 0; i0 < hp->n_rot; i0 += 2) {
        float th = hp->rope_freq_scale * theta, mscale = hp->yarn_attn_factor;
        if (hp->yarn_ext_factor != 0.0f) {
            const float ramp_mix = rope_yarn_ramp(hp->yarn_corr_lo, hp->yarn_corr_hi, i0) * hp->yarn_ext_factor;
            th = th * (1.0f - ramp_mix) + theta * ramp_mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / hp->rope_freq_scale);
        }
        cs[i0] = cosf(th) * mscale;
        cs[i0 + 1] = sinf(th) * mscale;
        theta *= theta_scale;
    }
}

void blk_rope(float *x, int n_head, int hd, const float *cs, int n_rot, int rope_type) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_head; h++) {
        float *xh = x + (size_t)h * hd;
        int i = 0;
        if (rope_type == ROPE_NEOX)   /* pairs (i, i + half): 4 pairs per step, cs de-interleaved */
            for (; i + 4 <= half; i += 4) {
                const v4f p0 = v4f_ld(cs + 2 * i), p1 = v4f_ld(cs + 2 * i + 4);
                const v4f c = __builtin_shufflevector(p0, p1, 0, 2, 4, 6), s = __builtin_shufflevector(p0, p1, 1, 3, 5, 7);
                const v4f x0 = v4f_ld(xh + i), x1 = v4f_ld(xh + i + half);
                v4f_st(xh + i, x0 * c - x1 * s);
                v4f_st(xh + i + half, x0 * s + x1 * c);
            }
        for (; i < half; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            float *a, *b;
            if (rope_type == ROPE_NEOX) { a = &xh[i]; b = &xh[i + half]; }
            else { a = &xh[2 * i]; b = &xh[2 * i + 1]; }
            const float x0 = *a, x1 = *b;
            *a = x0 * c - x1 * s;
            *b = x0 * s + x1 * c;
        }
    }
}

/* ---- SwiGLU --------------------------------------------------------------------------------- */

void blk_swiglu(float *out, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        out[i] = (x / (1.0f + expf(-x))) * u[i];
    }
}

/* SwiGLU of fast numerics: the body (swiglu_impl.h) compiled here portably and in
 * x86/attn_avx2.c with AVX2 (the avx2 and avx512 tables' copy); both give the same bits, the ops
 * table (ops.h) picks one. */
#define SWIGLU_SUFFIX generic
#include "model/swiglu_impl.h"
#undef SWIGLU_SUFFIX

void blk_swiglu_fast(float *out, const float *g, const float *u, int64_t n) {
    model_ops_active()->swiglu_fast(out, g, u, n);
}

/* The SwiGLU of a numerics mode: fast numerics use blk_swiglu_fast, ggml and f32 glibc's expf. */
static void swiglu_mode(float *out, const float *g, const float *u, int64_t n, kern_numerics mode) {
    if (mode == KQ_FAST) blk_swiglu_fast(out, g, u, n);
    else blk_swiglu(out, g, u, n);
}

/* ---- KV store ------------------------------------------------------------------------------ */

void blk_f16_from_f32_generic(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}

void blk_f16_from_f32(uint16_t *dst, const float *src, int n) { model_ops_active()->f16_from_f32(dst, src, n); }

/* kv_store_heads with the fp16 conversion of blk_f16_from_f32 (the same bytes): kv heads [h0, h1)
 * of position pos from k, v (their elements, head after head). */
static void kv_put(kv_cache *kv, int il, int pos, int h0, int h1, const float *k, const float *v) {
    if (kv->f32) { kv_store_heads(kv, il, pos, h0, h1, k, v); return; }
    for (int h = h0; h < h1; h++, k += kv->hd_k, v += kv->hd_v) {
        blk_f16_from_f32((uint16_t *)kv_k_at(kv, il, h, pos), k, kv->hd_k);
        blk_f16_from_f32((uint16_t *)kv_v_at(kv, il, h, pos), v, kv->hd_v);
    }
}

blk_kv_view blk_kv_view_of(const kv_cache *kv, int il) {
    return (blk_kv_view){kv_k_at(kv, il, 0, 0), kv_v_at(kv, il, 0, 0), (size_t)kv->hd_k, (size_t)kv->hd_v,
                         (size_t)kv->n_ctx * (size_t)kv->hd_k, (size_t)kv->n_ctx * (size_t)kv->hd_v, kv->f32};
}

/* ---- attention ------------------------------------------------------------------------------ */

/* ggml_vec_dot_f16 on the AVX-512 build (GGML_F16_STEP 64, 4 accumulators of 16 lanes, fused
 * multiply-add per lane, then the GGML_F32x16_REDUCE tree and gcc's _mm512_reduce_add_ps halving
 * order; leftovers past the last multiple of 64 added in double). Products of two fp16 values
 * are exact in float. */
static float dot_f16_ggml(const uint16_t *x, const uint16_t *y, int n) {
    const int np = n & ~63;
    double sumf = 0.0;
    if (np > 0) {
        float acc[4][16];
        memset(acc, 0, sizeof acc);
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++) {
                    const int e = i + j * 16 + l;
                    acc[j][l] = fmaf(fp16_to_f32(x[e]), fp16_to_f32(y[e]), acc[j][l]);
                }
        for (int l = 0; l < 16; l++) { acc[0][l] += acc[2][l]; acc[1][l] += acc[3][l]; }
        for (int l = 0; l < 16; l++) acc[0][l] += acc[1][l];
        float t3[8], t6[4];
        for (int l = 0; l < 8; l++) t3[l] = acc[0][l + 8] + acc[0][l];
        for (int l = 0; l < 4; l++) t6[l] = t3[l + 4] + t3[l];
        const float t80 = t6[0] + t6[2], t81 = t6[1] + t6[3];
        sumf = (double)(t80 + t81);
    }
    for (int i = np; i < n; i++) sumf += (double)(fp16_to_f32(x[i]) * fp16_to_f32(y[i]));
    return (float)sumf;
}

static float dot_f32(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void blk_attn_head(float *out, const float *q, const blk_kv_view *kv, int ikv, int n_kv, int hd_k, int hd_v,
                   float scale, bool flash_ggml, float *scores, uint16_t *qh, float *acc) {
    const size_t koff = (size_t)ikv * kv->k_head, voff = (size_t)ikv * kv->v_head;
    if (flash_ggml) {
        /* ggml_compute_forward_flash_attn_ext_f16, one query row, no mask beyond causality
         * (masked keys are skipped), no softcap, no sinks. */
        float M = -INFINITY, S = 0.0f;
        if (!kv->f32) {
            uint16_t *vkq = (uint16_t *)acc;            /* hd_v fp16 accumulators */
            for (int i = 0; i < hd_k; i++) qh[i] = f32_to_fp16(q[i]);
            for (int i = 0; i < hd_v; i++) vkq[i] = 0;
            const bool simd_v = (hd_v & 63) == 0;       /* ggml_vec_mad_f16: FMA lanes vs scalar tail */
            for (int j = 0; j < n_kv; j++) {
                const uint16_t *kr = (const uint16_t *)kv->k + (size_t)j * kv->k_stride + koff;
                const uint16_t *vr = (const uint16_t *)kv->v + (size_t)j * kv->v_stride + voff;
                const float s = dot_f16_ggml(kr, qh, hd_k) * scale;
                float ms = 1.0f, vs = 1.0f;
                if (s > M) {
                    const float Mold = M;
                    M = s;
                    ms = expf(Mold - M);
                    for (int i = 0; i < hd_v; i++) vkq[i] = f32_to_fp16(fp16_to_f32(vkq[i]) * ms);
                } else {
                    vs = expf(s - M);
                }
                if (simd_v) {
                    for (int i = 0; i < hd_v; i++) vkq[i] = f32_to_fp16(fmaf(fp16_to_f32(vr[i]), vs, fp16_to_f32(vkq[i])));
                } else {
                    for (int i = 0; i < hd_v; i++) vkq[i] = f32_to_fp16(fp16_to_f32(vkq[i]) + fp16_to_f32(vr[i]) * vs);
                }
                S = S * ms + vs;
            }
            const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
            for (int i = 0; i < hd_v; i++) out[i] = fp16_to_f32(vkq[i]) * S_inv;
        } else {
            float *vkq = acc;
            for (int i = 0; i < hd_v; i++) vkq[i] = 0.0f;
            for (int j = 0; j < n_kv; j++) {
                const float *kr = (const float *)kv->k + (size_t)j * kv->k_stride + koff;
                const float *vr = (const float *)kv->v + (size_t)j * kv->v_stride + voff;
                const float s = dot_f32(kr, q, hd_k) * scale;
                float ms = 1.0f, vs = 1.0f;
                if (s > M) {
                    const float Mold = M;
                    M = s;
                    ms = expf(Mold - M);
                    for (int i = 0; i < hd_v; i++) vkq[i] *= ms;
                } else {
                    vs = expf(s - M);
                }
                for (int i = 0; i < hd_v; i++) vkq[i] = fmaf(vr[i], vs, vkq[i]);
                S = S * ms + vs;
            }
            const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
            for (int i = 0; i < hd_v; i++) out[i] = vkq[i] * S_inv;
        }
        return;
    }
    /* standard softmax attention: a tile of one query (attn_impl.h) */
    (void)qh;
    (void)acc;
    blk_attn_tile(1, &q, &out, &n_kv, kv, ikv, hd_k, hd_v, scale, scores);
}

/* ---- pooled projections and quantisation ---------------------------------------------------- */

/* Values per split unit of a column-internal split (norm/SwiGLU + quantisation of one column,
 * FFN rows): a multiple of every activation block (fast 128, ggml 32), so a thread's range starts
 * on a block boundary and quantising it alone writes the bytes of the whole-column quantisation. */
#define BLK_SPLIT 128

/* Quantise values [i0, i1) of each of ncols columns of x (column stride K) into q (the column
 * layout of kern_act_bytes(mode, K, 1) per column); i0 a multiple of BLK_SPLIT, i1 one or K. */
static void quantize_range(const float *x, int64_t K, int ncols, int64_t i0, int64_t i1, void *q, kern_numerics mode) {
    const size_t col = kern_act_bytes(mode, K, 1), off = i0 ? kern_act_bytes(mode, i0, 1) : 0;
    for (int c = 0; c < ncols; c++) {
        kern_act a = {.x = x + (size_t)c * K + i0, .K = i1 - i0, .ncols = 1, .mode = mode,
                      .q = (uint8_t *)q + (size_t)c * col + off};
        kern_quantize(&a);
    }
}

/* How a projection job's rows are split over the pool (no split changes a bit: each row is the
 * same kern_matmul computation in any range, kernels.h):
 * - batches of at least BLK_DYN_COLS columns (prefill): claimed in chunks of 32..512 rows as
 *   threads finish (pool_for_dyn), so a thread the OS delays, or a range that runs slower, does
 *   not leave the others waiting at the job's end; the AVX2 wide matmul works in row chunks of
 *   256 (x86/avx2.c);
 * - fewer columns (decode, speculative verification, small server batches): claims of
 *   (rows left) / (2 T), at least BLK_CLAIM_MIN rows, the caller from the back and the workers
 *   from the front, each streaming its own end of the rows: a thread slowed down for a while (a
 *   neighbour on a shared VM, a page fault, an interrupt) leaves at most its current claim to
 *   wait for, instead of a quarter of the rows. Every claim is read in ascending row order, the
 *   caller's too: the hardware prefetchers and the kernels' prefetches follow ascending streams
 *   (a caller reading its claims downwards makes decode ~15% slower on Zen 5). The boundaries
 *   between claims cost no measurable stream time: one fixed half per thread decodes no faster
 *   (bench/RESULTS.md host A). */
#define BLK_DYN_COLS 16
#define BLK_DYN_CMIN 32
#define BLK_DYN_CMAX 512
#define BLK_CLAIM_MIN 64

typedef struct {
    const blk_proj *p;
    int64_t off[BLK_PROJ_MAX];   /* virtual row offset of each weight */
} project_job;

static void job_project(void *ctx, int64_t i0, int64_t i1, int ith) {
    const project_job *pj = ctx;
    const blk_proj *j = pj->p;
    const double t0 = blk_prof_now();
    for (int k = 0; k < j->n_w; k++) {
        const int64_t N = j->w[k]->n_out;   /* rows [lo, hi) of weight k */
        const int64_t lo = TERN_MAX(i0, pj->off[k]) - pj->off[k], hi = TERN_MIN(i1, pj->off[k] + N) - pj->off[k];
        if (lo >= hi) continue;
        kern_matmul(j->w[k], j->a[k], j->y[k], N, lo, hi);
        if (j->resid) {   /* the residual add of these rows: one writer per element */
            for (int c = 0; c < j->a[k]->ncols; c++) {
                float *x = j->resid + (size_t)c * N;
                const float *y = j->y[k] + (size_t)c * N;
                int64_t r = lo;
                for (; r + 4 <= hi; r += 4) v4f_st(x + r, v4f_ld(x + r) + v4f_ld(y + r));
                for (; r < hi; r++) x[r] += y[r];
            }
        }
    }
    if (g_blk_prof.on) g_blk_prof.busy[ith & 63] += tern_time_s() - t0;   /* one writer per ith */
}

void blk_project_job(tern_pool *pool, const blk_proj *p) {
    TERN_ASSERT(p->n_w >= 1 && p->n_w <= BLK_PROJ_MAX && (!p->resid || p->n_w == 1));
    project_job j = {.p = p};
    int64_t off = 0;
    int ncols = 0;
    for (int k = 0; k < p->n_w; k++) {   /* virtual rows: each weight padded to KERN_ROW_SPLIT */
        j.off[k] = off;
        off += (p->w[k]->n_out + KERN_ROW_SPLIT - 1) / KERN_ROW_SPLIT * KERN_ROW_SPLIT;
        ncols = TERN_MAX(ncols, p->a[k]->ncols);
    }
    const double t0 = blk_prof_now();
    if (ncols >= BLK_DYN_COLS) pool_for_dyn(pool, off, KERN_ROW_SPLIT, BLK_DYN_CMIN, BLK_DYN_CMAX, job_project, &j);
    else pool_for_dyn(pool, off, KERN_ROW_SPLIT, BLK_CLAIM_MIN, INT64_MAX, job_project, &j);
    blk_prof_add(BLK_PROF_MATMUL, t0);
}

typedef struct {
    int op;              /* BLK_PREP_* */
    const float *src;    /* (n, K) */
    const float *aux;    /* RMSNorm weight (K) or SwiGLU up (n, K) */
    float *dst;          /* (n, K) */
    float eps;
    int64_t K;
    void *q;             /* quantised columns, or NULL */
    kern_numerics mode;
} prep_job;

/* Columns [c0, c1): the pre-step into dst, then the quantisation of those columns of dst (the
 * activation layout is per column: column c at c * kern_act_bytes(mode, K, 1)). */
static void job_prep(void *ctx, int64_t c0, int64_t c1, int ith) {
    (void)ith;
    const prep_job *j = ctx;
    const int64_t K = j->K;
    for (int64_t c = c0; c < c1; c++) {
        if (j->op == BLK_PREP_NORM) blk_rmsnorm_mode(j->dst + c * K, j->src + c * K, j->aux, (int)K, j->eps, j->mode);
        else if (j->op == BLK_PREP_SWIGLU) swiglu_mode(j->dst + c * K, j->src + c * K, j->aux + c * K, K, j->mode);
    }
    if (!j->q) return;
    kern_act a = {.x = j->dst + c0 * K, .K = K, .ncols = (int)(c1 - c0), .mode = j->mode,
                  .q = (uint8_t *)j->q + (size_t)c0 * kern_act_bytes(j->mode, K, 1)};
    kern_quantize(&a);
}

/* One column, values [i0, i1) (a BLK_SPLIT range): every thread computes the RMSNorm scale over
 * the whole column (the same code, so the same bits), then writes and quantises its own range. */
static void job_prep_split(void *ctx, int64_t i0, int64_t i1, int ith) {
    (void)ith;
    const prep_job *j = ctx;
    if (j->op == BLK_PREP_NORM) {
        const float scale = rms_scale_mode(j->src, (int)j->K, j->eps, j->mode);
        rms_apply(j->dst + i0, j->src + i0, j->aux + i0, (int)(i1 - i0), scale);
    } else if (j->op == BLK_PREP_SWIGLU) {
        swiglu_mode(j->dst + i0, j->src + i0, j->aux + i0, i1 - i0, j->mode);
    }
    if (j->q) quantize_range(j->dst, j->K, 1, i0, i1, j->q, j->mode);
}

void blk_prep_act(tern_pool *pool, kern_act *a, int op, const float *src, const float *aux, float *dst, float eps,
                  int64_t K, int ncols, void *q, kern_numerics mode) {
    a->x = dst;
    a->K = K;
    a->ncols = ncols;
    a->mode = mode;
    a->q = mode == KQ_F32 ? NULL : q;
    prep_job j = {.op = op, .src = src, .aux = aux, .dst = dst, .eps = eps, .K = K, .q = a->q, .mode = mode};
    const double t0 = blk_prof_now();
    if (op == BLK_PREP_NONE && !a->q) return;
    if (ncols > 1) pool_for(pool, ncols, 1, job_prep, &j);
    else if (pool_n_threads(pool) > 1 && K >= 2 * BLK_SPLIT && (op != BLK_PREP_NORM || dst != src))
        pool_for(pool, K, BLK_SPLIT, job_prep_split, &j);   /* one column: split by blocks */
    else job_prep(&j, 0, ncols, 0);
    blk_prof_add(BLK_PROF_QUANT, t0);
}

void blk_quantize(tern_pool *pool, kern_act *a, const float *x, void *q, int64_t K, int ncols, kern_numerics mode) {
    blk_prep_act(pool, a, BLK_PREP_NONE, x, NULL, (float *)x, 0.0f, K, ncols, q, mode);
}

/* FFN gate/up + SwiGLU (+ rotation) + quantisation in one job: a thread takes rows [r0, r1)
 * (aligned to the job's unit) of both gate and up for every column, then SwiGLU, rotates and
 * quantises those values of each column: the activation of ffn_down is ready when the job ends. */
typedef struct {
    const kern_act *a;
    const kern_w *gate, *up;
    float *hg, *hu;        /* (ncols, F); hg becomes silu(gate) * up */
    void *q;               /* quantised (ncols, F), or NULL (f32 numerics) */
    kern_numerics mode;
    blk_silu silu;
    model_rot rot;
} ffn_up_job;

static void job_ffn_up(void *ctx, int64_t r0, int64_t r1, int ith) {
    const ffn_up_job *j = ctx;
    const int64_t F = j->gate->n_out;
    const int n = j->a->ncols;
    const double t0 = blk_prof_now();
    kern_matmul(j->gate, j->a, j->hg, F, r0, r1);
    kern_matmul(j->up, j->a, j->hu, F, r0, r1);
    const double t1 = blk_prof_now();
    for (int c = 0; c < n; c++) {
        float *g = j->hg + (size_t)c * F + r0;
        const float *u = j->hu + (size_t)c * F + r0;
        if (j->silu == BLK_SILU_FAST) blk_swiglu_fast(g, g, u, r1 - r0);
        else if (j->silu == BLK_SILU_LIBM) blk_swiglu(g, g, u, r1 - r0);
        else for (int64_t i = 0; i < r1 - r0; i++) g[i] = gdn_silu_ggml(g[i]) * u[i];
        if (j->rot.n) had_rot(g, r1 - r0, j->rot.n, j->rot.s ? j->rot.s + r0 : NULL);
    }
    if (j->q) quantize_range(j->hg, F, n, r0, r1, j->q, j->mode);
    if (g_blk_prof.on) {   /* one writer per ith; the caller's share of SwiGLU + quantise is shown apart */
        g_blk_prof.busy[ith & 63] += t1 - t0;
        if (ith == 0) g_blk_prof.s[BLK_PROF_SWIGLU] += tern_time_s() - t1;
    }
}

void blk_ffn_up(tern_pool *pool, kern_act *out, const kern_act *a, const kern_w *gate, const kern_w *up, float *hg,
                float *hu, void *q, kern_numerics mode, blk_silu silu, const model_rot *rot) {
    const int64_t F = gate->n_out;
    TERN_ASSERT(up->n_out == F && gate->n_in == a->K && up->n_in == a->K);
    ffn_up_job j = {.a = a, .gate = gate, .up = up, .hg = hg, .hu = hu, .q = mode == KQ_F32 ? NULL : q, .mode = mode,
                    .silu = silu, .rot = rot ? *rot : (model_rot){0}};
    /* the unit: whole activation blocks (BLK_SPLIT) and whole rotation blocks (powers of two) */
    const int64_t unit = TERN_MAX((int64_t)BLK_SPLIT, j.rot.n);
    TERN_ASSERT(!j.rot.n || F % j.rot.n == 0);   /* the loader checks every rotated width */
    out->x = hg;
    out->K = F;
    out->ncols = a->ncols;
    out->mode = mode;
    out->q = j.q;
    const double t0 = blk_prof_now();
    const double sw0 = g_blk_prof.s[BLK_PROF_SWIGLU];
    if (a->ncols >= BLK_DYN_COLS) pool_for_dyn(pool, F, unit, unit, 4 * unit, job_ffn_up, &j);
    else pool_for_dyn(pool, F, unit, (BLK_CLAIM_MIN + unit - 1) / unit * unit, INT64_MAX, job_ffn_up, &j);   /* as blk_project_job */
    if (g_blk_prof.on) g_blk_prof.s[BLK_PROF_MATMUL] += tern_time_s() - t0 - (g_blk_prof.s[BLK_PROF_SWIGLU] - sw0);
}

/* ---- dense transformer layers --------------------------------------------------------------- */

void blk_embed(const model_t *m, model_ws *ws, const model_batch *b) {
    const model_hparams *hp = &m->hp;
    const double t0 = blk_prof_now();
    for (int c = 0; c < b->n; c++) {
        kern_w_row_f32(&m->tok_embd, b->tok[c], ws->x + (size_t)c * hp->n_embd);
        blk_rope_cache(ws->rope_cs + (size_t)c * hp->n_rot, b->pos[c], hp);
    }
    blk_prof_add(BLK_PROF_EMBED, t0);
}

typedef struct {
    const model_t *m;
    model_ws *ws;
    const model_batch *b;
    const model_layer *L;
    int il_kv;
    bool qk_norm;
    int n_tiles;                 /* standard attention: tiles in ws->attn_tiles (attn_plan) */
} attn_job;

/* Per column: QK-norm, RoPE, store K and V at the column's position. */
static void job_qk_store(void *ctx, int64_t c0, int64_t c1, int ith) {
    (void)ith;
    const attn_job *j = ctx;
    const model_hparams *hp = &j->m->hp;
    const int dq = hp->n_head * hp->n_embd_head_k, dk = hp->n_head_kv * hp->n_embd_head_k;
    const int dv = hp->n_head_kv * hp->n_embd_head_v;
    for (int64_t c = c0; c < c1; c++) {
        float *q = j->ws->q + c * dq, *k = j->ws->k + c * dk, *v = j->ws->v + c * dv;
        if (j->qk_norm) {
            const int hd = hp->n_embd_head_k;
            const kern_numerics mode = j->m->numerics;
            for (int h = 0; h < hp->n_head; h++)
                blk_rmsnorm_mode(q + (size_t)h * hd, q + (size_t)h * hd, j->L->attn_q_norm, hd, hp->f_norm_rms_eps, mode);
            for (int h = 0; h < hp->n_head_kv; h++)
                blk_rmsnorm_mode(k + (size_t)h * hd, k + (size_t)h * hd, j->L->attn_k_norm, hd, hp->f_norm_rms_eps, mode);
        }
        const float *cs = j->ws->rope_cs + c * hp->n_rot;
        blk_rope(q, hp->n_head, hp->n_embd_head_k, cs, hp->n_rot, hp->rope_type);
        blk_rope(k, hp->n_head_kv, hp->n_embd_head_k, cs, hp->n_rot, hp->rope_type);
        kv_cache *kvc = j->b->kv[c];
        kv_put(kvc, j->il_kv, j->b->pos[c], 0, kvc->n_head_kv, k, v);
    }
}

/* ggml numerics: per (column, head), ggml's flash attention over the column's KV cache up to its
 * own position. */
static void job_attn_flash(void *ctx, int64_t i0, int64_t i1, int ith) {
    const attn_job *j = ctx;
    const model_hparams *hp = &j->m->hp;
    const model_ws *ws = j->ws;
    const int hd_k = hp->n_embd_head_k, hd_v = hp->n_embd_head_v, gqa = hp->n_head / hp->n_head_kv;
    const int hd_max = TERN_MAX(hd_k, hd_v);
    float *scores = ws->scores + (size_t)ith * BLK_ATTN_NQ * ws->n_ctx;
    uint16_t *qh = ws->qh + (size_t)ith * hd_max;
    float *acc = ws->vacc + (size_t)ith * 2 * hd_max;
    for (int64_t it = i0; it < i1; it++) {
        const int c = (int)(it / hp->n_head), h = (int)(it % hp->n_head);
        const float *q = ws->q + ((size_t)c * hp->n_head + h) * hd_k;
        float *out = ws->att + ((size_t)c * hp->n_head + h) * hd_v;
        const kv_cache *kv = j->b->kv[c];
        const blk_kv_view view = blk_kv_view_of(kv, j->il_kv);
        blk_attn_head(out, q, &view, h / gqa, j->b->pos[c] + 1, hd_k, hd_v, hp->f_attn_scale, true, scores, qh, acc);
    }
}

/* Standard attention over the query tiles [t0, t1) of the plan (pool_for_dyn: threads claim one
 * tile at a time as they finish; a tile's bits do not depend on who computes it). */
static void job_attn_tiles(void *ctx, int64_t t0, int64_t t1, int ith) {
    const attn_job *j = ctx;
    const model_hparams *hp = &j->m->hp;
    const model_ws *ws = j->ws;
    const int hd_k = hp->n_embd_head_k, hd_v = hp->n_embd_head_v, gqa = hp->n_head / hp->n_head_kv;
    float *scores = ws->scores + (size_t)ith * BLK_ATTN_NQ * ws->n_ctx;
    for (int64_t t = t0; t < t1; t++) {
        const int32_t *T = ws->attn_tiles + 4 * (size_t)t;   /* c0, nc, h0, nh */
        const float *q[BLK_ATTN_NQ];
        float *out[BLK_ATTN_NQ];
        int n_kv[BLK_ATTN_NQ], nq = 0;
        for (int c = T[0]; c < T[0] + T[1]; c++) {
            for (int h = T[2]; h < T[2] + T[3]; h++) {
                q[nq] = ws->q + ((size_t)c * hp->n_head + h) * hd_k;
                out[nq] = ws->att + ((size_t)c * hp->n_head + h) * hd_v;
                n_kv[nq++] = j->b->pos[c] + 1;
            }
        }
        const kv_cache *kv = j->b->kv[T[0]];
        const blk_kv_view view = blk_kv_view_of(kv, j->il_kv);
        blk_attn_tile(nq, q, out, n_kv, &view, T[2] / gqa, hd_k, hd_v, hp->f_attn_scale, scores);
    }
}

/* Split the batch's queries into tiles (columns of one sequence x heads of one kv group, at most
 * BLK_ATTN_NQ queries) in kv-head-major order (a kv head's rows stay in cache across its tiles),
 * within a kv head from the last columns (the longest rows) to the first, so the tiles taken last
 * are the cheapest and the threads finish together. Returns the number of tiles. The plan only
 * decides who computes a query, never its bits. */
static int attn_plan(const model_t *m, model_ws *ws, const model_batch *b) {
    const model_hparams *hp = &m->hp;
    const int gqa = hp->n_head / hp->n_head_kv, nh = TERN_MIN(gqa, BLK_ATTN_NQ), C = TERN_MAX(1, BLK_ATTN_NQ / nh);
    int n_tiles = 0;
    for (int c0 = 0; c0 < b->n;) {
        int c1 = c0 + 1;
        while (c1 < b->n && b->kv[c1] == b->kv[c0]) c1++;
        const int ntc = (c1 - c0 + C - 1) / C;   /* column tiles of this sequence */
        for (int g = 0; g < hp->n_head_kv; g++) {
            for (int h0 = g * gqa; h0 < (g + 1) * gqa; h0 += nh) {
                for (int k = ntc - 1; k >= 0; k--) {
                    const int cc = c0 + k * C;
                    int32_t *T = ws->attn_tiles + 4 * (size_t)n_tiles++;
                    T[0] = cc;
                    T[1] = TERN_MIN(C, c1 - cc);
                    T[2] = h0;
                    T[3] = TERN_MIN(nh, (g + 1) * gqa - h0);
                }
            }
        }
        c0 = c1;
    }
    TERN_ASSERT(n_tiles <= ws->n_batch * hp->n_head);
    return n_tiles;
}

/* Decode and small batches (fewer than BLK_DYN_COLS columns): per kv head g of [g0, g1), for
 * each sequence of the batch (a run of consecutive columns with one KV cache) and each of its
 * columns: QK-norm and RoPE of k_g and of its query heads, K/V of head g stored at the column's
 * position; then the attention of those queries in tiles of up to BLK_ATTN_NQ (as attn_plan:
 * columns of the sequence x heads of g; ggml numerics: per query, right after its column's store);
 * then the quantisation of every column's outputs of [g0, g1) when they fill whole activation
 * blocks (j->att_q). Head g's queries read only head g's K/V, which this thread stored for every
 * column before the tiles, so no other thread's work is needed. Every operation is the one
 * job_qk_store / the attention jobs run per head, so the bits are the same; it saves the batch
 * path's separate store and quantisation jobs. */
typedef struct {
    const model_t *m;
    model_ws *ws;
    const model_batch *b;
    const model_layer *L;
    int il_kv;
    bool qk_norm;
    void *att_q;       /* quantised attention output (column layout), or NULL: quantised after */
} attn_fused_job;

static void job_attn_fused(void *ctx, int64_t g0, int64_t g1, int ith) {
    const attn_fused_job *j = ctx;
    const model_hparams *hp = &j->m->hp;
    model_ws *ws = j->ws;
    const model_batch *b = j->b;
    const int hd_k = hp->n_embd_head_k, hd_v = hp->n_embd_head_v, gqa = hp->n_head / hp->n_head_kv;
    const int hd_max = TERN_MAX(hd_k, hd_v), n = b->n;
    const int dq = hp->n_head * hd_k, dk = hp->n_head_kv * hd_k, dv = hp->n_head_kv * hd_v, da = hp->n_head * hd_v;
    const int nh = TERN_MIN(gqa, BLK_ATTN_NQ), C = TERN_MAX(1, BLK_ATTN_NQ / nh);   /* tile: C columns x nh heads */
    const float eps = hp->f_norm_rms_eps;
    const kern_numerics mode = j->m->numerics;
    float *scores = ws->scores + (size_t)ith * BLK_ATTN_NQ * ws->n_ctx;
    const bool flash = mode == KQ_GGML;
    for (int g = (int)g0; g < (int)g1; g++) {
        for (int c0 = 0; c0 < n;) {
            int c1 = c0 + 1;
            while (c1 < n && b->kv[c1] == b->kv[c0]) c1++;
            kv_cache *kv = b->kv[c0];
            const blk_kv_view view = blk_kv_view_of(kv, j->il_kv);
            for (int c = c0; c < c1; c++) {
                const float *cs = ws->rope_cs + (size_t)c * hp->n_rot;
                float *k = ws->k + (size_t)c * dk + (size_t)g * hd_k;
                if (j->qk_norm) blk_rmsnorm_mode(k, k, j->L->attn_k_norm, hd_k, eps, mode);
                blk_rope(k, 1, hd_k, cs, hp->n_rot, hp->rope_type);
                kv_put(kv, j->il_kv, b->pos[c], g, g + 1, k, ws->v + (size_t)c * dv + (size_t)g * hd_v);
                for (int h = g * gqa; h < (g + 1) * gqa; h++) {
                    float *qh = ws->q + (size_t)c * dq + (size_t)h * hd_k;
                    if (j->qk_norm) blk_rmsnorm_mode(qh, qh, j->L->attn_q_norm, hd_k, eps, mode);
                    blk_rope(qh, 1, hd_k, cs, hp->n_rot, hp->rope_type);
                    if (flash)
                        blk_attn_head(ws->att + (size_t)c * da + (size_t)h * hd_v, qh, &view, g, b->pos[c] + 1, hd_k,
                                      hd_v, hp->f_attn_scale, true, scores, ws->qh + (size_t)ith * hd_max,
                                      ws->vacc + (size_t)ith * 2 * hd_max);
                }
            }
            for (int h0 = g * gqa; !flash && h0 < (g + 1) * gqa; h0 += nh) {
                for (int cc = c0; cc < c1; cc += C) {
                    const float *q[BLK_ATTN_NQ];
                    float *out[BLK_ATTN_NQ];
                    int n_kv[BLK_ATTN_NQ], nq = 0;
                    for (int c = cc; c < TERN_MIN(cc + C, c1); c++) {
                        for (int h = h0; h < TERN_MIN(h0 + nh, (g + 1) * gqa); h++) {
                            q[nq] = ws->q + (size_t)c * dq + (size_t)h * hd_k;
                            out[nq] = ws->att + (size_t)c * da + (size_t)h * hd_v;
                            n_kv[nq++] = b->pos[c] + 1;
                        }
                    }
                    blk_attn_tile(nq, q, out, n_kv, &view, g, hd_k, hd_v, hp->f_attn_scale, scores);
                }
            }
            c0 = c1;
        }
    }
    if (j->att_q) {
        const int64_t w = (int64_t)gqa * hd_v;
        quantize_range(ws->att, da, n, g0 * w, g1 * w, j->att_q, mode);
    }
}

void blk_attn_layer(const model_t *m, model_ws *ws, const model_batch *b, const model_layer *L, int il_kv,
                    bool qk_norm) {
    const model_hparams *hp = &m->hp;
    const int n = b->n, D = hp->n_embd;
    kern_act a;
    /* xb (n, D) = RMSNorm(x) * attn_norm, quantised into aq */
    blk_prep_act(m->pool, &a, BLK_PREP_NORM, ws->x, L->attn_norm, ws->xb, hp->f_norm_rms_eps, D, n, ws->aq, m->numerics);
    /* q (n, Hq hd), k, v (n, Hkv hd): one job */
    blk_project_job(m->pool, &(blk_proj){.n_w = 3, .a = {&a, &a, &a}, .w = {&L->attn_q, &L->attn_k, &L->attn_v},
                                         .y = {ws->q, ws->k, ws->v}});
    /* att (n, Hq hd) = softmax(q . K^T / sqrt(hd)) . V after QK-norm, RoPE and the KV store */
    const bool att_quantised = blk_attn(m, ws, b, L, il_kv, qk_norm, true);
    /* att quantised; x (n, D) += attn_output . att */
    const int da = hp->n_head * hp->n_embd_head_v;
    if (att_quantised) {
        a = (kern_act){.x = ws->att, .q = ws->aq, .K = da, .ncols = n, .mode = m->numerics};
    } else {
        blk_quantize(m->pool, &a, ws->att, ws->aq, da, n, m->numerics);
    }
    blk_project_job(m->pool, &(blk_proj){.n_w = 1, .a = {&a}, .w = {&L->attn_output}, .y = {ws->xb}, .resid = ws->x});
}

bool blk_attn(const model_t *m, model_ws *ws, const model_batch *b, const model_layer *L, int il_kv, bool qk_norm,
              bool quantise) {
    const model_hparams *hp = &m->hp;
    const int n = b->n;
    bool att_quantised = false;
    if (n < BLK_DYN_COLS) {
        /* decode and verification: QK-norm, RoPE, KV store, attention (and the quantisation of
         * its output when a kv head's outputs are whole blocks) in one job over kv heads */
        const int gqa = hp->n_head / hp->n_head_kv;
        att_quantised = quantise && m->numerics != KQ_F32 && ((int64_t)gqa * hp->n_embd_head_v) % BLK_SPLIT == 0;
        attn_fused_job jd = {.m = m, .ws = ws, .b = b, .L = L, .il_kv = il_kv, .qk_norm = qk_norm,
                             .att_q = att_quantised ? ws->aq : NULL};
        const double t0 = blk_prof_now();
        pool_for(m->pool, hp->n_head_kv, 1, job_attn_fused, &jd);
        blk_prof_add(BLK_PROF_ATTN, t0);
    } else {
        attn_job j = {.m = m, .ws = ws, .b = b, .L = L, .il_kv = il_kv, .qk_norm = qk_norm};
        double t0 = blk_prof_now();
        pool_for(m->pool, n, 1, job_qk_store, &j);
        blk_prof_add(BLK_PROF_NORM, t0);
        t0 = blk_prof_now();
        if (m->numerics == KQ_GGML) {
            pool_for(m->pool, (int64_t)n * hp->n_head, 1, job_attn_flash, &j);
        } else {
            j.n_tiles = attn_plan(m, ws, b);
            pool_for_dyn(m->pool, j.n_tiles, 1, 1, 1, job_attn_tiles, &j);
        }
        blk_prof_add(BLK_PROF_ATTN, t0);
    }
    return att_quantised;
}

void blk_ffn_layer(const model_t *m, model_ws *ws, int n, const model_layer *L) {
    const model_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    kern_act a, h;
    /* xb (n, D) = RMSNorm(x) * ffn_norm, quantised into aq */
    blk_prep_act(m->pool, &a, BLK_PREP_NORM, ws->x, L->ffn_norm, ws->xb, hp->f_norm_rms_eps, D, n, ws->aq, m->numerics);
    /* hg (n, F) = silu(ffn_gate . xb) * (ffn_up . xb) (hu (n, F) the up half), quantised into aq2:
     * gate, up, SwiGLU and the quantisation in one job (a is read before any thread writes the
     * quantised output: a separate buffer) */
    blk_ffn_up(m->pool, &h, &a, &L->ffn_gate, &L->ffn_up, ws->hg, ws->hu, ws->aq2, m->numerics,
               m->numerics == KQ_FAST ? BLK_SILU_FAST : BLK_SILU_LIBM, NULL);
    /* x (n, D) += ffn_down . hg */
    blk_project_job(m->pool, &(blk_proj){.n_w = 1, .a = {&h}, .w = {&L->ffn_down}, .y = {ws->xb}, .resid = ws->x});
}

void blk_logits(const model_t *m, model_ws *ws, const model_batch *b) {
    const model_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    int nl = 0, last = 0;
    for (int c = 0; c < b->n; c++) {
        const bool want = b->want_logits ? b->want_logits[c] : c == b->n - 1;
        if (!want) continue;
        last = c;
        nl++;
    }
    if (nl == 0) return;
    kern_act a;
    if (nl == 1) {   /* one column: normed out of place, so the norm can be split over the pool */
        blk_prep_act(m->pool, &a, BLK_PREP_NORM, ws->x + (size_t)last * D, m->output_norm, ws->lx, hp->f_norm_rms_eps, D,
                     1, ws->aq, m->numerics);
    } else {
        nl = 0;
        for (int c = 0; c < b->n; c++) {   /* gather the wanted columns (the norm writes lx in place) */
            const bool want = b->want_logits ? b->want_logits[c] : c == b->n - 1;
            if (!want) continue;
            memcpy(ws->lx + (size_t)nl * D, ws->x + (size_t)c * D, (size_t)D * sizeof(float));
            nl++;
        }
        blk_prep_act(m->pool, &a, BLK_PREP_NORM, ws->lx, m->output_norm, ws->lx, hp->f_norm_rms_eps, D, nl, ws->aq,
                     m->numerics);
    }
    /* logits (nl, n_vocab) = output . lx */
    blk_project_job(m->pool, &(blk_proj){.n_w = 1, .a = {&a}, .w = {&m->output}, .y = {b->logits}});
}
