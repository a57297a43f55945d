/* blocks.c: shared forward-pass blocks (see blocks.h). Everything here is scalar C with a fixed
 * operation order (compiled with -ffp-contract=off; fmaf() only where ggml's AVX-512 build fuses),
 * so the results are the same bits on every ISA and for every thread count. */
#include "model/blocks.h"

#include "core/fp16.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- profiling ------------------------------------------------------------------------------ */

blk_prof g_blk_prof;

static inline double prof_t0(void) { return g_blk_prof.on ? tern_time_s() : 0.0; }
static inline void prof_add(int cat, double t0) {
    if (g_blk_prof.on) g_blk_prof.s[cat] += tern_time_s() - t0;
}

/* ---- RMSNorm -------------------------------------------------------------------------------- */

void blk_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int i = 0; i < n; i++) y[i] = x[i] * scale;
    }
}

void blk_rmsnorm_heads(float *x, const float *w, int n_head, int hd, float eps) {
    for (int h = 0; h < n_head; h++) blk_rmsnorm(x + (size_t)h * hd, x + (size_t)h * hd, w, hd, eps);
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
        for (int i = 0; i < half; i++) {
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
    const size_t koff = (size_t)ikv * (size_t)hd_k, voff = (size_t)ikv * (size_t)hd_v;
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

typedef struct {
    const kern_act *a;
    int n_w;
    const kern_w *const *w;
    float *const *y;
    int64_t off[5];            /* virtual row offset of each weight (padded to KERN_ROW_ALIGN) */
} project_job;

static void job_project(void *ctx, int64_t i0, int64_t i1, int ith) {
    const project_job *j = ctx;
    const double t0 = prof_t0();
    for (int k = 0; k < j->n_w; k++) {
        const int64_t lo = TERN_MAX(i0, j->off[k]), hi = TERN_MIN(i1, j->off[k] + j->w[k]->n_out);
        if (lo >= hi) continue;
        kern_matmul(j->w[k], j->a, j->y[k], j->w[k]->n_out, lo - j->off[k], hi - j->off[k]);
    }
    if (g_blk_prof.on) g_blk_prof.busy[ith & 63] += tern_time_s() - t0;   /* one writer per ith */
}

void blk_project(tern_pool *pool, const kern_act *a, int n_w, const kern_w *const *w, float *const *y) {
    TERN_ASSERT(n_w >= 1 && n_w <= 4);
    project_job j = {.a = a, .n_w = n_w, .w = w, .y = y};
    int64_t off = 0;
    for (int k = 0; k < n_w; k++) {
        j.off[k] = off;
        off += (w[k]->n_out + KERN_ROW_ALIGN - 1) / KERN_ROW_ALIGN * KERN_ROW_ALIGN;
    }
    j.off[n_w] = off;
    const double t0 = prof_t0();
    pool_for(pool, off, KERN_ROW_ALIGN, job_project, &j);
    prof_add(BLK_PROF_MATMUL, t0);
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
        if (j->op == BLK_PREP_NORM) blk_rmsnorm(j->dst + c * K, j->src + c * K, j->aux, (int)K, j->eps);
        else if (j->op == BLK_PREP_SWIGLU) blk_swiglu(j->dst + c * K, j->src + c * K, j->aux + c * K, K);
    }
    if (!j->q) return;
    kern_act a = {.x = j->dst + c0 * K, .K = K, .ncols = (int)(c1 - c0), .mode = j->mode,
                  .q = (uint8_t *)j->q + (size_t)c0 * kern_act_bytes(j->mode, K, 1)};
    kern_quantize(&a);
}

void blk_prep_act(tern_pool *pool, kern_act *a, int op, const float *src, const float *aux, float *dst, float eps,
                  int64_t K, int ncols, void *q, kern_numerics mode) {
    a->x = dst;
    a->K = K;
    a->ncols = ncols;
    a->mode = mode;
    a->q = mode == KQ_F32 ? NULL : q;
    prep_job j = {.op = op, .src = src, .aux = aux, .dst = dst, .eps = eps, .K = K, .q = a->q, .mode = mode};
    const double t0 = prof_t0();
    if (op == BLK_PREP_NONE && !a->q) return;
    if (ncols > 1) pool_for(pool, ncols, 1, job_prep, &j);
    else job_prep(&j, 0, ncols, 0);
    prof_add(BLK_PROF_QUANT, t0);
}

void blk_quantize(tern_pool *pool, kern_act *a, const float *x, void *q, int64_t K, int ncols, kern_numerics mode) {
    blk_prep_act(pool, a, BLK_PREP_NONE, x, NULL, (float *)x, 0.0f, K, ncols, q, mode);
}

/* ---- dense transformer layers --------------------------------------------------------------- */

void blk_embed(const model_t *m, model_ws *ws, const model_batch *b) {
    const model_hparams *hp = &m->hp;
    const double t0 = prof_t0();
    for (int c = 0; c < b->n; c++) {
        kern_w_row_f32(&m->tok_embd, b->tok[c], ws->x + (size_t)c * hp->n_embd);
        blk_rope_cache(ws->rope_cs + (size_t)c * hp->n_rot, b->pos[c], hp);
    }
    prof_add(BLK_PROF_EMBED, t0);
}

typedef struct {
    const model_t *m;
    model_ws *ws;
    const model_batch *b;
    const model_layer *L;
    int il_kv;
    bool qk_norm;
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
            blk_rmsnorm_heads(q, j->L->attn_q_norm, hp->n_head, hp->n_embd_head_k, hp->f_norm_rms_eps);
            blk_rmsnorm_heads(k, j->L->attn_k_norm, hp->n_head_kv, hp->n_embd_head_k, hp->f_norm_rms_eps);
        }
        const float *cs = j->ws->rope_cs + c * hp->n_rot;
        blk_rope(q, hp->n_head, hp->n_embd_head_k, cs, hp->n_rot, hp->rope_type);
        blk_rope(k, hp->n_head_kv, hp->n_embd_head_k, cs, hp->n_rot, hp->rope_type);
        kv_store(j->b->kv[c], j->il_kv, j->b->pos[c], k, v);
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
        const blk_kv_view view = {kv_k_row(kv, j->il_kv, 0), kv_v_row(kv, j->il_kv, 0), (size_t)kv->n_embd_k,
                                  (size_t)kv->n_embd_v, kv->f32};
        blk_attn_head(out, q, &view, h / gqa, j->b->pos[c] + 1, hd_k, hd_v, hp->f_attn_scale, true, scores, qh, acc);
    }
}

/* Standard attention over query tiles: thread r runs tiles [attn_bounds[r], attn_bounds[r + 1]). */
static void job_attn_tiles(void *ctx, int64_t r0, int64_t r1, int ith) {
    const attn_job *j = ctx;
    const model_hparams *hp = &j->m->hp;
    const model_ws *ws = j->ws;
    const int hd_k = hp->n_embd_head_k, hd_v = hp->n_embd_head_v, gqa = hp->n_head / hp->n_head_kv;
    float *scores = ws->scores + (size_t)ith * BLK_ATTN_NQ * ws->n_ctx;
    for (int64_t r = r0; r < r1; r++) {
        for (int t = ws->attn_bounds[r]; t < ws->attn_bounds[r + 1]; t++) {
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
            const blk_kv_view view = {kv_k_row(kv, j->il_kv, 0), kv_v_row(kv, j->il_kv, 0), (size_t)kv->n_embd_k,
                                      (size_t)kv->n_embd_v, kv->f32};
            blk_attn_tile(nq, q, out, n_kv, &view, T[2] / gqa, hd_k, hd_v, hp->f_attn_scale, scores);
        }
    }
}

/* Split the batch's queries into tiles (columns of one sequence x heads of one kv group, at most
 * BLK_ATTN_NQ queries) in kv-head-major order (a kv head's rows stay in cache across its tiles),
 * and the tiles into one contiguous range per thread of about equal work (rows x queries). The
 * split only decides who computes a query, never its bits. */
static void attn_plan(const model_t *m, model_ws *ws, const model_batch *b) {
    const model_hparams *hp = &m->hp;
    const int gqa = hp->n_head / hp->n_head_kv, nh = TERN_MIN(gqa, BLK_ATTN_NQ), C = TERN_MAX(1, BLK_ATTN_NQ / nh);
    const int nt = pool_n_threads(m->pool);
    int n_tiles = 0;
    double total = 0;
    for (int c0 = 0; c0 < b->n;) {
        int c1 = c0 + 1;
        while (c1 < b->n && b->kv[c1] == b->kv[c0]) c1++;
        for (int g = 0; g < hp->n_head_kv; g++) {
            for (int h0 = g * gqa; h0 < (g + 1) * gqa; h0 += nh) {
                for (int cc = c0; cc < c1; cc += C) {
                    int32_t *T = ws->attn_tiles + 4 * (size_t)n_tiles++;
                    T[0] = cc;
                    T[1] = TERN_MIN(C, c1 - cc);
                    T[2] = h0;
                    T[3] = TERN_MIN(nh, (g + 1) * gqa - h0);
                    total += (double)T[1] * T[3] * (b->pos[cc + T[1] - 1] + 1 + 16);
                }
            }
        }
        c0 = c1;
    }
    TERN_ASSERT(n_tiles <= ws->n_batch * hp->n_head);
    ws->attn_bounds[0] = 0;
    double acc = 0;
    int r = 1;
    for (int t = 0; t < n_tiles && r < nt; t++) {
        const int32_t *T = ws->attn_tiles + 4 * (size_t)t;
        acc += (double)T[1] * T[3] * (b->pos[T[0] + T[1] - 1] + 1 + 16);
        while (r < nt && acc >= total * r / nt) ws->attn_bounds[r++] = t + 1;
    }
    while (r <= nt) ws->attn_bounds[r++] = n_tiles;
}

void blk_attn_layer(const model_t *m, model_ws *ws, const model_batch *b, const model_layer *L, int il_kv,
                    bool qk_norm) {
    const model_hparams *hp = &m->hp;
    const int n = b->n, D = hp->n_embd;
    kern_act a;
    blk_prep_act(m->pool, &a, BLK_PREP_NORM, ws->x, L->attn_norm, ws->xb, hp->f_norm_rms_eps, D, n, ws->aq, m->numerics);
    const kern_w *w3[3] = {&L->attn_q, &L->attn_k, &L->attn_v};
    float *y3[3] = {ws->q, ws->k, ws->v};
    blk_project(m->pool, &a, 3, w3, y3);                                 /* one job for q, k, v */
    attn_job j = {.m = m, .ws = ws, .b = b, .L = L, .il_kv = il_kv, .qk_norm = qk_norm};
    double t0 = prof_t0();
    if (n > 1) pool_for(m->pool, n, 1, job_qk_store, &j);
    else job_qk_store(&j, 0, 1, 0);                                      /* decode: no barrier */
    prof_add(BLK_PROF_NORM, t0);
    t0 = prof_t0();
    if (m->numerics == KQ_GGML) {
        pool_for(m->pool, (int64_t)n * hp->n_head, 1, job_attn_flash, &j);
    } else {
        attn_plan(m, ws, b);
        pool_for(m->pool, pool_n_threads(m->pool), 1, job_attn_tiles, &j);
    }
    prof_add(BLK_PROF_ATTN, t0);
    const int da = hp->n_head * hp->n_embd_head_v;
    blk_quantize(m->pool, &a, ws->att, ws->aq, da, n, m->numerics);
    const kern_w *wo[1] = {&L->attn_output};
    float *yo[1] = {ws->xb};
    blk_project(m->pool, &a, 1, wo, yo);
    t0 = prof_t0();
    for (size_t i = 0; i < (size_t)n * D; i++) ws->x[i] += ws->xb[i];
    prof_add(BLK_PROF_NORM, t0);
}

void blk_ffn_layer(const model_t *m, model_ws *ws, int n, const model_layer *L) {
    const model_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    kern_act a;
    blk_prep_act(m->pool, &a, BLK_PREP_NORM, ws->x, L->ffn_norm, ws->xb, hp->f_norm_rms_eps, D, n, ws->aq, m->numerics);
    const kern_w *w2[2] = {&L->ffn_gate, &L->ffn_up};
    float *y2[2] = {ws->hg, ws->hu};
    blk_project(m->pool, &a, 2, w2, y2);                                 /* one job for gate, up */
    blk_prep_act(m->pool, &a, BLK_PREP_SWIGLU, ws->hg, ws->hu, ws->hg, 0.0f, hp->n_ff, n, ws->aq, m->numerics);
    const kern_w *wd[1] = {&L->ffn_down};
    float *yd[1] = {ws->xb};
    blk_project(m->pool, &a, 1, wd, yd);
    const double t0 = prof_t0();
    for (size_t i = 0; i < (size_t)n * D; i++) ws->x[i] += ws->xb[i];
    prof_add(BLK_PROF_NORM, t0);
}

void blk_logits(const model_t *m, model_ws *ws, const model_batch *b) {
    const model_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    int nl = 0;
    for (int c = 0; c < b->n; c++) {   /* gather the wanted columns (the norm writes lx in place) */
        const bool want = b->want_logits ? b->want_logits[c] : c == b->n - 1;
        if (!want) continue;
        memcpy(ws->lx + (size_t)nl * D, ws->x + (size_t)c * D, (size_t)D * sizeof(float));
        nl++;
    }
    if (nl == 0) return;
    kern_act a;
    blk_prep_act(m->pool, &a, BLK_PREP_NORM, ws->lx, m->output_norm, ws->lx, hp->f_norm_rms_eps, D, nl, ws->aq, m->numerics);
    const kern_w *w1[1] = {&m->output};
    float *y1[1] = {b->logits};
    blk_project(m->pool, &a, 1, w1, y1);
}
