/* arm_common.h: the loops shared by the three ARM kernel files (owner: arm). Everything here is
 * `static inline` and uses plain AdvSIMD only: each ISA file includes it and compiles its own
 * copy under its own -march flags, so no sdot/smmla can leak into the ARMv8.0 table. The ISA
 * files supply the inner "block dot" functions; these drivers walk rows, blocks and columns and
 * apply the fixed float order of kernels/kern_impl.h:
 *   fast:  acc = fmaf(d_w * d_a, (float)isum, acc) per (row, 128-block), blocks in order;
 *   ggml:  blk = fmaf(d_y(k), (float)isum(k), blk) over the 4 Q8_0 units of a weight block,
 *          then sum = fmaf(d_w, blk, sum).
 * vfmaq_f32 / vfmaq_n_f32 are the same single-rounding fused multiply-add per lane as fmaf,
 * vmulq_n_f32 the same IEEE multiply, vcvtq_f32_s32 exact here (|isum| < 2^24), and FCVT
 * fp16 -> f32 exact for every fp16 value (subnormals too; Linux starts with FPCR.FZ = FZ16 = 0).
 *
 * Row ranges: r0 is a multiple of 4; rows N & ~3 .. N-1 of a row-pair weight stay in file
 * layout and go through the reference entry (at most 3 rows per tensor).
 * Columns: processed in chunks of ARM_NC so the float accumulators live on the stack; within a
 * chunk every weight block is loaded once and used for all its columns. */
#ifndef TERN_KERNELS_ARM_ARM_COMMON_H
#define TERN_KERNELS_ARM_ARM_COMMON_H

#include "kernels/arm/arm.h"

#include "core/fp16.h"

#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define ARM_INLINE static inline __attribute__((always_inline))
#define ARM_NC 64   /* columns per chunk */

/* A zero activation column block: the padding of a leftover column tile (its outputs are
 * computed in the same pass and dropped). */
static const int8_t arm_zero_q[KA_FAST_BLOCK] __attribute__((aligned(16)));

/* u . q of 4 rows (one row-pair block) for one column: lanes = rows 0..3, before "- sum(q)". */
typedef int32x4_t (*arm_rp1_fn)(const kern_rp_block *blk, const int8_t *q);
/* The same for a tile of 4 columns (out[c] = lanes rows 0..3 of column c); NULL if the path has
 * no tile kernel. */
typedef void (*arm_rp4_fn)(const kern_rp_block *blk, const int8_t *const q[4], int32x4_t out[4]);
/* ggml: per 32-weight unit k (= word k of the block) the exact t . q of the 4 rows. */
typedef void (*arm_rpg_fn)(const kern_rp_block *blk, const kact_ggml *ag, int32x4_t out[4]);
/* PTQ1_0: t . q per 32-weight unit k (lane k) of one decoded block; q[k] = 32 int8. */
typedef int32x4_t (*arm_t_fn)(const int8x16_t t[8], const int8_t *const q[4]);

ARM_INLINE float32x4_t arm_rp_dw(const kern_rp_block *b) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(b->d)));
}

/* 8 activation bytes in both halves (one ld1r): the operand of a row-pair slot for sdot. */
ARM_INLINE int8x16_t arm_dup8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return vreinterpretq_s8_s64(vdupq_n_s64(v));
}

ARM_INLINE const uint8_t *arm_col(const kern_act *a, size_t col_bytes, int c) {
    return (const uint8_t *)a->q + col_bytes * (size_t)c;
}

/* Reduce four int32x4 to [sum(A), sum(B), sum(C), sum(D)]. */
ARM_INLINE int32x4_t arm_hsum4(int32x4_t A, int32x4_t B, int32x4_t C, int32x4_t D) {
    return vpaddq_s32(vpaddq_s32(A, B), vpaddq_s32(C, D));
}

ARM_INLINE void arm_store4(float *y, float32x4_t v) { vst1q_f32(y, v); }

/* The row-pair base of w: PQ2_0 repacked in place, or a PTQ1_0 transcode's side buffer. */
ARM_INLINE const kern_rp_block *arm_rp_base(const kern_w *w) {
    return (const kern_rp_block *)(const void *)(w->layout == KW_PTQ_ROWPAIR ? (const uint8_t *)w->aux : w->data);
}

/* ---- fast numerics over the row-pair layout --------------------------------------------------- */

ARM_INLINE void arm_fast_acc(const kern_mm_args *m, float32x4_t *acc, int32x4_t u, const kact_fast *ab,
                             float32x4_t dw, int64_t col, int64_t g, int64_t b, int64_t nb) {
    const int32x4_t is = vsubq_s32(u, vdupq_n_s32(ab->sum));   /* t.q = u.q - sum(q), exact */
    if (m->isum) {
        int32_t *p = m->isum + (col * m->w->n_out + 4 * g) * nb + b;
        p[0] = vgetq_lane_s32(is, 0);
        p[nb] = vgetq_lane_s32(is, 1);
        p[2 * nb] = vgetq_lane_s32(is, 2);
        p[3 * nb] = vgetq_lane_s32(is, 3);
    }
    *acc = vfmaq_f32(*acc, vmulq_n_f32(dw, ab->d), vcvtq_f32_s32(is));
}

ARM_INLINE void arm_rp_fast(const kern_mm_args *m, int64_t r0, int64_t r1, arm_rp1_fn f1, arm_rp4_fn f4) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t nb = w->n_in / 128, n4 = w->n_out & ~(int64_t)3, re = r1 < n4 ? r1 : n4;
    const size_t colb = kern_act_col_bytes(KQ_FAST, a->K);
    const kern_rp_block *rp = arm_rp_base(w);
    for (int c0 = 0; c0 < a->ncols; c0 += ARM_NC) {
        const int nc = a->ncols - c0 < ARM_NC ? a->ncols - c0 : ARM_NC;
        for (int64_t g = r0 / 4; g < re / 4; g++) {
            float32x4_t acc[ARM_NC];
            for (int c = 0; c < nc; c++) acc[c] = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                const kern_rp_block *blk = rp + g * nb + b;
                const float32x4_t dw = arm_rp_dw(blk);
                int c = 0;
                /* 4-column tiles; a leftover of 2 or 3 columns is padded with zero columns and
                 * done in the same single pass; a single leftover column takes f1. */
                if (f4)
                    for (; nc - c >= 2; c += 4) {
                        const kact_fast *ab[4] = {NULL, NULL, NULL, NULL};
                        const int8_t *q[4];
                        for (int i = 0; i < 4; i++) {
                            if (c + i < nc) ab[i] = (const kact_fast *)(const void *)arm_col(a, colb, c0 + c + i) + b;
                            q[i] = ab[i] ? ab[i]->qs : arm_zero_q;
                        }
                        int32x4_t u[4];
                        f4(blk, q, u);
                        for (int i = 0; i < 4 && c + i < nc; i++)
                            arm_fast_acc(m, &acc[c + i], u[i], ab[i], dw, c0 + c + i, g, b, nb);
                    }
                for (; c < nc; c++) {
                    const kact_fast *ab = (const kact_fast *)(const void *)arm_col(a, colb, c0 + c) + b;
                    arm_fast_acc(m, &acc[c], f1(blk, ab->qs), ab, dw, c0 + c, g, b, nb);
                }
            }
            for (int c = 0; c < nc; c++) arm_store4(m->y + (int64_t)(c0 + c) * m->ldy + 4 * g, acc[c]);
        }
    }
    if (r1 > n4) kern_ref_mm_fast(m, r0 > n4 ? r0 : n4, r1);   /* file-layout tail rows */
}

/* ---- ggml numerics over the row-pair layout ---------------------------------------------------- */

ARM_INLINE void arm_rp_ggml(const kern_mm_args *m, int64_t r0, int64_t r1, arm_rpg_fn fg) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t nb = w->n_in / 128, nu = 4 * nb, n4 = w->n_out & ~(int64_t)3, re = r1 < n4 ? r1 : n4;
    const size_t colb = kern_act_col_bytes(KQ_GGML, a->K);
    const kern_rp_block *rp = arm_rp_base(w);
    for (int c0 = 0; c0 < a->ncols; c0 += ARM_NC) {
        const int nc = a->ncols - c0 < ARM_NC ? a->ncols - c0 : ARM_NC;
        for (int64_t g = r0 / 4; g < re / 4; g++) {
            float32x4_t acc[ARM_NC];
            for (int c = 0; c < nc; c++) acc[c] = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                const kern_rp_block *blk = rp + g * nb + b;
                const float32x4_t dw = arm_rp_dw(blk);
                for (int c = 0; c < nc; c++) {
                    const kact_ggml *ag = (const kact_ggml *)(const void *)arm_col(a, colb, c0 + c) + 4 * b;
                    int32x4_t is[4];
                    fg(blk, ag, is);
                    float32x4_t bl = vdupq_n_f32(0.0f);
                    for (int k = 0; k < 4; k++) bl = vfmaq_n_f32(bl, vcvtq_f32_s32(is[k]), fp16_to_f32(ag[k].d));
                    acc[c] = vfmaq_f32(acc[c], dw, bl);
                    if (m->isum) {
                        int32_t *p = m->isum + ((int64_t)(c0 + c) * w->n_out + 4 * g) * nu + 4 * b;
                        for (int k = 0; k < 4; k++) {
                            p[k] = vgetq_lane_s32(is[k], 0);
                            p[nu + k] = vgetq_lane_s32(is[k], 1);
                            p[2 * nu + k] = vgetq_lane_s32(is[k], 2);
                            p[3 * nu + k] = vgetq_lane_s32(is[k], 3);
                        }
                    }
                }
            }
            for (int c = 0; c < nc; c++) arm_store4(m->y + (int64_t)(c0 + c) * m->ldy + 4 * g, acc[c]);
        }
    }
    if (r1 > n4) kern_ref_mm_ggml(m, r0 > n4 ? r0 : n4, r1);
}

/* ---- PTQ1_0 direct: base-3 decode by threshold compares ---------------------------------------- */

/* Trits of 16 bytes v that already hold byte * 3^n (mod 256): digit u = (3v) >> 8 is the number
 * of thresholds 86 and 171 that v reaches (3v >= 256 <=> v >= 86; 3v >= 512 <=> v >= 171;
 * checked for all 256 values by the arm suite), and t = u - 1. vcgeq gives -1 for true, so
 * t = -1 - ge86 - ge171. */
ARM_INLINE int8x16_t arm_b3_trits(uint8x16_t v) {
    const int8x16_t ge1 = vreinterpretq_s8_u8(vcgeq_u8(v, vdupq_n_u8(86)));
    const int8x16_t ge2 = vreinterpretq_s8_u8(vcgeq_u8(v, vdupq_n_u8(171)));
    return vsubq_s8(vsubq_s8(vdupq_n_s8(-1), ge1), ge2);
}

/* Decode one PTQ1_0 block (spec 3.4) into 8 vectors of 16 trits in element order: vector i holds
 * elements 16 i .. 16 i + 15, so it pairs with 16 consecutive activations.
 *   qs[m], m < 16, digit n      -> element 16 n + m              (vectors 0..4)
 *   qs[16 + m], m < 8, digit n  -> element 80 + 8 n + m          (vectors 5, 6, low half of 7)
 *   qh[m], m < 2, digit n       -> element 120 + 2 n + m         (high half of vector 7) */
ARM_INLINE void arm_ptq_decode(const uint8_t *blk, int8x16_t t[8]) {
    const uint8x16_t v = vld1q_u8(blk);
    const uint8x16_t v3 = vmulq_u8(v, vdupq_n_u8(3)), v9 = vmulq_u8(v, vdupq_n_u8(9));
    const uint8x16_t v27 = vmulq_u8(v, vdupq_n_u8(27)), v81 = vmulq_u8(v, vdupq_n_u8(81));
    t[0] = arm_b3_trits(v);
    t[1] = arm_b3_trits(v3);
    t[2] = arm_b3_trits(v9);
    t[3] = arm_b3_trits(v27);
    t[4] = arm_b3_trits(v81);
    const uint8x8_t h = vld1_u8(blk + 16);
    const uint8x16_t h01 = vcombine_u8(h, vmul_u8(h, vdup_n_u8(3)));
    t[5] = arm_b3_trits(h01);
    t[6] = arm_b3_trits(vmulq_u8(h01, vdupq_n_u8(9)));
    /* qh bytes as [qh0, qh1] x {1, 3, 9, 27}: lane 2n + m = qh[m] * 3^n */
    static const uint8_t pw[8] = {1, 1, 3, 3, 9, 9, 27, 27};
    const uint16_t qh = (uint16_t)(blk[24] | (blk[25] << 8));
    const uint8x8_t hq = vmul_u8(vreinterpret_u8_u16(vdup_n_u16(qh)), vld1_u8(pw));
    t[7] = arm_b3_trits(vcombine_u8(vmul_u8(h, vdup_n_u8(81)), hq));
}

ARM_INLINE float arm_ptq_d(const uint8_t *blk) { return fp16_to_f32((uint16_t)(blk[26] | (blk[27] << 8))); }

ARM_INLINE void arm_ptq_direct(const kern_mm_args *m, int64_t r0, int64_t r1, kern_numerics mode, arm_t_fn ft) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t nb = w->n_in / 128;
    const size_t colb = kern_act_col_bytes(mode, a->K);
    for (int c0 = 0; c0 < a->ncols; c0 += ARM_NC) {
        const int nc = a->ncols - c0 < ARM_NC ? a->ncols - c0 : ARM_NC;
        for (int64_t r = r0; r < r1; r++) {
            float acc[ARM_NC];
            for (int c = 0; c < nc; c++) acc[c] = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = w->data + (r * nb + b) * 28;
                int8x16_t t[8];
                arm_ptq_decode(blk, t);
                const float dw = arm_ptq_d(blk);
                for (int c = 0; c < nc; c++) {
                    const int64_t col = c0 + c;
                    const int8_t *q[4];
                    if (mode == KQ_FAST) {
                        const kact_fast *ab = (const kact_fast *)(const void *)arm_col(a, colb, (int)col) + b;
                        for (int k = 0; k < 4; k++) q[k] = ab->qs + 32 * k;
                        const int32_t is = vaddvq_s32(ft(t, q));
                        if (m->isum) m->isum[(col * w->n_out + r) * nb + b] = is;
                        acc[c] = fmaf(dw * ab->d, (float)is, acc[c]);
                    } else {
                        const kact_ggml *ag = (const kact_ggml *)(const void *)arm_col(a, colb, (int)col) + 4 * b;
                        for (int k = 0; k < 4; k++) q[k] = ag[k].qs;
                        const int32x4_t is = ft(t, q);
                        int32_t iv[4];
                        vst1q_s32(iv, is);
                        float bl = 0.0f;
                        for (int k = 0; k < 4; k++) bl = fmaf(fp16_to_f32(ag[k].d), (float)iv[k], bl);
                        acc[c] = fmaf(dw, bl, acc[c]);
                        if (m->isum)
                            for (int k = 0; k < 4; k++) m->isum[(col * w->n_out + r) * 4 * nb + 4 * b + k] = iv[k];
                    }
                }
            }
            for (int c = 0; c < nc; c++) m->y[(int64_t)(c0 + c) * m->ldy + r] = acc[c];
        }
    }
}

/* ---- table entries built from an ISA's block functions ----------------------------------------- */

/* Defines the four entries of one ISA file (prefix P): PQ2_0 and PTQ1_0, fast and ggml. A PQ2_0
 * weight kept in file layout (KW_F_KEEP_FILE) goes to the reference. */
#define ARM_DEFINE_ENTRIES(P, F1, F4, FG, FT)                                                          \
    static void P##_mm_pq2_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {                        \
        if (m->w->layout != KW_ROWPAIR) { kern_ref_mm_fast(m, r0, r1); return; }                        \
        arm_rp_fast(m, r0, r1, F1, F4);                                                                 \
    }                                                                                                   \
    static void P##_mm_pq2_ggml(const kern_mm_args *m, int64_t r0, int64_t r1) {                        \
        if (m->w->layout != KW_ROWPAIR) { kern_ref_mm_ggml(m, r0, r1); return; }                        \
        arm_rp_ggml(m, r0, r1, FG);                                                                     \
    }                                                                                                   \
    static void P##_mm_ptq_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {                        \
        if (m->w->layout == KW_PTQ_ROWPAIR) arm_rp_fast(m, r0, r1, F1, F4);                             \
        else if (m->w->layout == KW_FILE) arm_ptq_direct(m, r0, r1, KQ_FAST, FT);                       \
        else kern_ref_mm_fast(m, r0, r1);   /* 16-row transcode: the file rows may be released */      \
    }                                                                                                   \
    static void P##_mm_ptq_ggml(const kern_mm_args *m, int64_t r0, int64_t r1) {                        \
        if (m->w->layout == KW_PTQ_ROWPAIR) arm_rp_ggml(m, r0, r1, FG);                                 \
        else if (m->w->layout == KW_FILE) arm_ptq_direct(m, r0, r1, KQ_GGML, FT);                       \
        else kern_ref_mm_ggml(m, r0, r1);                                                               \
    }

/* The table entries: PQ2_0 and PTQ1_0 of ISA file P (fast, ggml), and the float weights in every
 * mode (arm_mm_f32/f16/bf16 of neon.c, shared by the three tables). */
#define ARM_TABLE_MM(P)                                                                                \
    [KT_PQ2_0] = {P##_mm_pq2_fast, P##_mm_pq2_ggml, NULL},                                             \
    [KT_PTQ1_0] = {P##_mm_ptq_fast, P##_mm_ptq_ggml, NULL},                                            \
    [KT_F32] = {arm_mm_f32, arm_mm_f32, arm_mm_f32},                                                   \
    [KT_F16] = {arm_mm_f16, arm_mm_f16, arm_mm_f16},                                                   \
    [KT_BF16] = {arm_mm_bf16, arm_mm_bf16, arm_mm_bf16}

#endif /* TERN_KERNELS_ARM_ARM_COMMON_H */
