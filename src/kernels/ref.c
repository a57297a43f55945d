/* ref.c: the scalar reference kernels (the oracle). Always compiled, forced with tern_set_isa("ref") (TERN_ISA=ref in the programs),
 * and complete: every weight type and numerics mode has an entry, so a faster table may leave
 * any entry NULL. Written for obviousness, not speed: decode a block to its integer values
 * t_k, then sum t_k * q_k directly (no "+1 removal" trick, so the tricks of the fast paths are
 * checked against plain arithmetic). Integer and float order: kern_impl.h.
 * Source of truth: spec/ternary-gguf.md 3 (layouts) and 8 (reference numerics). */
#include "kernels/kern_impl.h"

#include "core/fp16.h"

#include <math.h>
#include <string.h>

/* ---- block decoding (any layout) ----------------------------------------------------------- */

/* Block facts come from the type table (format/qtypes.h): the kernels keep no list of types. */
int kern_block_size(int qt_type) {
    const qt_traits *q = qt_get(qt_type);
    return q ? q->block : 0;
}

int kern_block_bytes(int qt_type) {
    const qt_traits *q = qt_get(qt_type);
    return q ? q->block_bytes : 0;
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

void kern_block_int(const kern_w *w, int64_t r, int64_t b, int8_t *t, float *d) {
    const qt_traits *q = qt_get(w->type);
    TERN_ASSERT(q && q->decode);
    const int64_t nb = w->n_in / q->block;
    const int64_t n4 = w->n_out & ~(int64_t)3;
    /* rows 0 .. N4-1 in row-pair layout: PQ2_0 repacked in place, or a PTQ1_0 transcode (aux, the
     * same trits and d losslessly; the loader may release those rows' file bytes) */
    if (r < n4 && ((w->type == QT_PQ2_0 && w->layout == KW_ROWPAIR) || w->layout == KW_PTQ_ROWPAIR)) {
        const uint8_t *base = w->layout == KW_PTQ_ROWPAIR ? (const uint8_t *)w->aux : w->data;
        const kern_rp_block *rp = (const kern_rp_block *)(const void *)base + (r / 4) * nb + b;
        const int rr = (int)(r & 3), p = rr >> 1, half = (rr & 1) * 8;
        *d = fp16_to_f32(rp->d[rr]);
        for (int wd = 0; wd < 4; wd++)
            for (int s = 0; s < 4; s++)
                for (int j = 0; j < 8; j++)
                    t[32 * wd + 8 * s + j] = (int8_t)(((rp->qs[p][wd][half + j] >> (2 * s)) & 3) - 1);
        return;
    }
    /* rows 0 .. N16-1 in 16-row layout (PQ2_0 in place, or the PTQ1_0 transcode in aux) */
    if (r < (w->n_out & ~(int64_t)15) && ((w->type == QT_PQ2_0 && w->layout == KW_ROW16) || w->layout == KW_PTQ_ROW16)) {
        const uint8_t *base = w->layout == KW_PTQ_ROW16 ? (const uint8_t *)w->aux : w->data;
        const kern_r16_block *rb = (const kern_r16_block *)(const void *)base + (r / 16) * nb + b;
        const int i = (int)(r & 15);
        *d = fp16_to_f32(rb->d[i]);
        for (int j = 0; j < 8; j++)
            for (int s = 0; s < 4; s++)
                for (int tt = 0; tt < 4; tt++) t[16 * j + 4 * s + tt] = (int8_t)(((rb->qs[j][i][tt] >> (2 * s)) & 3) - 1);
        return;
    }
    /* rows 0 .. N16-1 of a PTQ1_0 regrouped in place (KW_PTQ3_ROW16): its file block, reassembled */
    if (r < (w->n_out & ~(int64_t)15) && w->layout == KW_PTQ3_ROW16) {
        const kern_r16t_block *rb = (const kern_r16t_block *)(const void *)w->data + (r / 16) * nb + b;
        const int i = (int)(r & 15);
        uint8_t blk[28];
        for (int j = 0; j < 4; j++) memcpy(blk + 4 * j, rb->qa[j][i], 4);
        for (int j = 0; j < 2; j++) memcpy(blk + 16 + 4 * j, rb->qb[j][i], 4);
        memcpy(blk + 24, rb->qh[i], 2);
        *d = fp16_to_f32(rb->d[i]);
        q->decode(blk, t);
        return;
    }
    /* the file layout: the type's own decoder, the scale at its offset */
    const uint8_t *blk = w->data + (r * nb + b) * q->block_bytes;
    *d = fp16_to_f32(rd16(blk + q->d_offset));
    q->decode(blk, t);
}

/* Dequantise values [k0, k0 + n) of row r to f32 (k0 and n multiples of the block size, or any
 * for the float types). */
static void row_f32_range(const kern_w *w, int64_t r, int64_t k0, int64_t n, float *dst) {
    const qt_traits *q = qt_get(w->type);
    if (q->dequant) {   /* element types: the table's decoder, from element r * K + k0 */
        q->dequant(w->data + (r * w->n_in + k0) * q->block_bytes, dst, n);
        return;
    }
    const int bs = q->block;
    int8_t t[QT_BLOCK_MAX];
    for (int64_t k = 0; k < n; k += bs) {
        float d;
        kern_block_int(w, r, (k0 + k) / bs, t, &d);
        for (int j = 0; j < bs; j++) dst[k + j] = (float)t[j] * d;   /* exact: |t| <= 128 */
    }
}

void kern_w_row_f32(const kern_w *w, int64_t r, float *dst) {
    TERN_ASSERT(w && r >= 0 && r < w->n_out);
    row_f32_range(w, r, 0, w->n_in, dst);
}

/* ---- integer paths --------------------------------------------------------------------------- */

static float ref_row_fast(const kern_w *w, const void *act, int64_t r, int32_t *isum) {
    const kact_fast *a = act;
    const int bs = kern_block_size(w->type), unit = kern_unit(w, KQ_FAST);
    const int64_t nb = w->n_in / bs;
    int8_t t[QT_BLOCK_MAX];
    float acc = 0.0f;
    int64_t u_idx = 0;
    for (int64_t b = 0; b < nb; b++) {
        float dw;
        kern_block_int(w, r, b, t, &dw);
        for (int u0 = 0; u0 < bs; u0 += unit) {
            const int64_t k0 = b * bs + u0;
            const kact_fast *ab = &a[k0 / KA_FAST_BLOCK];
            const int off = (int)(k0 % KA_FAST_BLOCK);
            int32_t s = 0;
            for (int j = 0; j < unit; j++) s += (int32_t)t[u0 + j] * ab->qs[off + j];
            if (isum) isum[u_idx] = s;
            u_idx++;
            acc = fmaf(dw * ab->d, (float)s, acc);
        }
    }
    return acc;
}

static float ref_row_ggml(const kern_w *w, const void *act, int64_t r, int32_t *isum) {
    const kact_ggml *a = act;
    const int bs = kern_block_size(w->type);
    const int64_t nb = w->n_in / bs;
    int8_t t[QT_BLOCK_MAX];
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        float dw;
        kern_block_int(w, r, b, t, &dw);
        float blk = 0.0f;
        for (int u0 = 0; u0 < bs; u0 += KA_GGML_BLOCK) {
            const int64_t k0 = b * bs + u0;
            const kact_ggml *ab = &a[k0 / KA_GGML_BLOCK];
            int32_t s = 0;
            for (int j = 0; j < KA_GGML_BLOCK; j++) s += (int32_t)t[u0 + j] * ab->qs[j];
            if (isum) isum[k0 / KA_GGML_BLOCK] = s;
            blk = fmaf(fp16_to_f32(ab->d), (float)s, blk);
        }
        sum = fmaf(dw, blk, sum);
    }
    return sum;
}

/* ---- float path ------------------------------------------------------------------------------ */

static float ref_row_float(const kern_w *w, const float *x, int64_t r) {
    const int64_t K = w->n_in;
    const int bs = kern_block_size(w->type);
    const int64_t chunk = bs > 1 ? (256 / bs) * bs : 256;   /* a multiple of 16 and of bs */
    float acc[16] = {0};
    float wb[256];
    for (int64_t k0 = 0; k0 < K; k0 += chunk) {
        const int64_t n = TERN_MIN(chunk, K - k0);
        row_f32_range(w, r, k0, n, wb);
        for (int64_t i = 0; i < n; i++) {
            const int64_t k = k0 + i;
            float xv = x[k];
            if (w->type == QT_BF16) xv = bf16_to_f32(f32_to_bf16(xv));
            acc[k & 15] = fmaf(wb[i], xv, acc[k & 15]);
        }
    }
    return kern_lane_reduce(acc);
}

/* ---- table entries ---------------------------------------------------------------------------- */

/* Rows [r0, r1) of every column through one integer row function (fast or ggml numerics); the
 * isum hook gets each row's n_units sums at (c * n_out + r) * n_units. */
static void ref_mm_int(const kern_mm_args *m, int64_t r0, int64_t r1, kern_numerics mode,
                       float (*row)(const kern_w *w, const void *a, int64_t r, int32_t *isum)) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const size_t col = kern_act_col_bytes(mode, a->K);
    const int64_t nu = w->n_in / kern_unit(w, mode);
    for (int c = 0; c < a->ncols; c++) {
        const void *ac = (const uint8_t *)a->q + col * (size_t)c;
        for (int64_t r = r0; r < r1; r++) {
            int32_t *is = m->isum ? m->isum + ((int64_t)c * w->n_out + r) * nu : NULL;
            m->y[c * m->ldy + r] = row(w, ac, r, is);
        }
    }
}

void kern_ref_mm_fast(const kern_mm_args *m, int64_t r0, int64_t r1) { ref_mm_int(m, r0, r1, KQ_FAST, ref_row_fast); }

void kern_ref_mm_ggml(const kern_mm_args *m, int64_t r0, int64_t r1) { ref_mm_int(m, r0, r1, KQ_GGML, ref_row_ggml); }

void kern_ref_mm_float(const kern_mm_args *m, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    for (int c = 0; c < a->ncols; c++)
        for (int64_t r = r0; r < r1; r++)
            m->y[c * m->ldy + r] = ref_row_float(w, a->x + (int64_t)c * a->K, r);
}

#define REF_INT {kern_ref_mm_fast, kern_ref_mm_ggml, kern_ref_mm_float}
#define REF_FLT {kern_ref_mm_float, kern_ref_mm_float, kern_ref_mm_float}

const kern_table kern_table_ref = {
    .name = "ref",
    .needs = 0,
    .mm = {
        [KT_PQ2_0] = REF_INT, [KT_Q2_0] = REF_INT, [KT_PTQ1_0] = REF_INT, [KT_TQ1_0] = REF_INT,
        [KT_TQ2_0] = REF_INT, [KT_Q1_0] = REF_INT, [KT_Q8_0] = REF_INT,
        [KT_F32] = REF_FLT, [KT_F16] = REF_FLT, [KT_BF16] = REF_FLT,
    },
};
