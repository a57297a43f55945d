/* neon.c: the ARMv8.0 AdvSIMD path (no dotprod, no i8mm), built with -march=armv8-a only
 * (owner: arm). Integer products by widening multiply-accumulate: smlal/smlal2 (int8 x int8 ->
 * int16 lanes), widened to int32 once per block.
 *
 * PQ2_0 row-pair block (layout: kern_impl.h), mask-only slots as in the dotprod path: slot s of
 * a word is `v & (3 << 2s)` = u * 4^s for s = 0, 1, 2 and `v >> 6` = u for s = 3, so the four
 * slots need 3 ANDs + 1 shift per 16-byte word (64 weights). Each (pair, row half, slot) keeps
 * its own int16x8 accumulator over the 4 words of a block; the powers of four are removed once
 * per block, exactly, by arithmetic shifts (acc1 is a multiple of 4, acc2 of 16):
 *   t = acc0 + acc3 + (acc1 >> 2) + (acc2 >> 4)        (int16, vsra)
 * Bounds: a lane of acc2 sums 4 products (one per word) of u*16 <= 48 by |q| <= 127: 24384,
 * below 32767; t sums 16 products of u <= 3 by 127: 6096. Then t . q over the block is widened
 * (saddlp) and reduced to [row0..row3]; "- sum(q)" turns u back into t = u - 1.
 * PTQ1_0: arm_ptq_decode (threshold compares) and smull/smlal per 32-weight unit.
 * Float weights (F32, F16, BF16, every numerics mode): arm_mm_f32/f16/bf16 below, the entries of
 * all three ARM tables (plain AdvSIMD, so the one copy built here serves them all). */
#include "kernels/arm/arm_common.h"

#if defined(__aarch64__)

/* u . q for 4 rows, one column (see the file comment). */
ARM_INLINE int32x4_t neon_rp_dot1(const kern_rp_block *blk, const int8_t *q) {
    int16x8_t acc[2][2][4];   /* [pair][row half: a = bytes 0-7, b = 8-15][slot] */
    #pragma GCC unroll 8
    for (int p = 0; p < 2; p++)
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++)
            #pragma GCC unroll 8
            for (int s = 0; s < 4; s++) acc[p][h][s] = vdupq_n_s16(0);
    #pragma GCC unroll 8
    for (int wd = 0; wd < 4; wd++) {
        int8x8_t y[4];
        #pragma GCC unroll 8
        for (int s = 0; s < 4; s++) y[s] = vld1_s8(q + 32 * wd + 8 * s);
        #pragma GCC unroll 8
        for (int p = 0; p < 2; p++) {
            const uint8x16_t v = vld1q_u8(blk->qs[p][wd]);
            const int8x16_t w[4] = {
                vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x03))),
                vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0c))),
                vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x30))),
                vreinterpretq_s8_u8(vshrq_n_u8(v, 6)),
            };
            #pragma GCC unroll 8
            for (int s = 0; s < 4; s++) {
                acc[p][0][s] = vmlal_s8(acc[p][0][s], vget_low_s8(w[s]), y[s]);
                acc[p][1][s] = vmlal_s8(acc[p][1][s], vget_high_s8(w[s]), y[s]);
            }
        }
    }
    int32x4_t R[4];
    #pragma GCC unroll 8
    for (int p = 0; p < 2; p++)
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            int16x8_t t = vaddq_s16(acc[p][h][0], acc[p][h][3]);
            t = vsraq_n_s16(t, acc[p][h][1], 2);
            t = vsraq_n_s16(t, acc[p][h][2], 4);
            R[2 * p + h] = vpaddlq_s16(t);
        }
    return arm_hsum4(R[0], R[1], R[2], R[3]);
}

/* ggml: exact t . q of the 4 rows per word k (one Q8_0 unit each). Slots decoded to u (shift +
 * mask) so one int16 accumulator per row serves all four slots: 4 products of u <= 3 by 127. */
ARM_INLINE void neon_rp_ggml(const kern_rp_block *blk, const kact_ggml *ag, int32x4_t out[4]) {
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        int8x8_t y[4];
        #pragma GCC unroll 8
        for (int s = 0; s < 4; s++) y[s] = vld1_s8(ag[k].qs + 8 * s);
        int32x4_t R[4];
        #pragma GCC unroll 8
        for (int p = 0; p < 2; p++) {
            const uint8x16_t v = vld1q_u8(blk->qs[p][k]);
            const uint8x16_t m3 = vdupq_n_u8(3);
            const int8x16_t w0 = vreinterpretq_s8_u8(vandq_u8(v, m3));
            const int8x16_t w1 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 2), m3));
            const int8x16_t w2 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 4), m3));
            const int8x16_t w3 = vreinterpretq_s8_u8(vshrq_n_u8(v, 6));
            int16x8_t lo = vmull_s8(vget_low_s8(w0), y[0]);
            int16x8_t hi = vmull_s8(vget_high_s8(w0), y[0]);
            lo = vmlal_s8(lo, vget_low_s8(w1), y[1]);
            hi = vmlal_s8(hi, vget_high_s8(w1), y[1]);
            lo = vmlal_s8(lo, vget_low_s8(w2), y[2]);
            hi = vmlal_s8(hi, vget_high_s8(w2), y[2]);
            lo = vmlal_s8(lo, vget_low_s8(w3), y[3]);
            hi = vmlal_s8(hi, vget_high_s8(w3), y[3]);
            R[2 * p] = vpaddlq_s16(lo);
            R[2 * p + 1] = vpaddlq_s16(hi);
        }
        out[k] = vsubq_s32(arm_hsum4(R[0], R[1], R[2], R[3]), vdupq_n_s32(ag[k].sum));
    }
}

/* PTQ1_0: t . q per 32-weight unit k (lane k). 4 products of |t| <= 1 by 127 per int16 lane. */
ARM_INLINE int32x4_t neon_ptq_dot(const int8x16_t t[8], const int8_t *const q[4]) {
    int32x4_t P[4];
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        const int8x16_t q0 = vld1q_s8(q[k]), q1 = vld1q_s8(q[k] + 16);
        int16x8_t s = vmull_s8(vget_low_s8(t[2 * k]), vget_low_s8(q0));
        s = vmlal_s8(s, vget_high_s8(t[2 * k]), vget_high_s8(q0));
        s = vmlal_s8(s, vget_low_s8(t[2 * k + 1]), vget_low_s8(q1));
        s = vmlal_s8(s, vget_high_s8(t[2 * k + 1]), vget_high_s8(q1));
        P[k] = vpaddlq_s16(s);
    }
    return arm_hsum4(P[0], P[1], P[2], P[3]);
}

ARM_DEFINE_ENTRIES(neon, neon_rp_dot1, NULL, neon_rp_ggml, neon_ptq_dot)

/* ---- float weights: F32, F16, BF16 (every numerics mode; shared by the three tables) -----------
 * The reference's math (ref.c ref_row_float, kern_impl.h "float"): 16 lanes, lane j accumulates
 * acc[j] = fmaf(w_k, x_k, acc[j]) for k = j mod 16 in increasing k; a BF16 weight meets x_k
 * rounded to bf16 first (f32_to_bf16: nearest-even, NaN quieted); the K % 16 tail lane by lane
 * with fmaf (fmadd); then kern_lane_reduce. Lanes 0-3, 4-7, 8-11, 12-15 of each 16-chunk are the
 * four float32x4 accumulators of one (row, column); vfmaq_f32 (fmla) is the same single-rounding
 * fused multiply-add per lane as fmaf. Weight conversions are exact: F16 by fcvtl/fcvtl2 (ARMv8.0
 * AdvSIMD, subnormals too: Linux runs with FPCR.FZ = 0), BF16 by a 16-bit left shift (ushll).
 * The tail is not zero-padded: an accumulator lane at -0 would become +0 after fmaf(0, 0, -0).
 *
 * Tiling as the AVX2 path (x86/avx2.c half_tile/half_rows): rows in pairs, row i of the range's
 * first half with row i of its second half (two streams far apart), columns in pairs, so one
 * 16-weight load (and conversion) of a row feeds two columns and one activation load (and bf16
 * rounding) feeds two rows: 2 rows x 2 columns x 4 quarter accumulators = 16 registers, + 8 for
 * the two rows' weights + 4 for one column's activations, within the 32 vector registers. An odd
 * last column is a 2 x 1 tile, an odd last row a 1 x 2 / 1 x 1 tile. Each (row, column) output is
 * the same fmaf sequence in every tile, so the bits do not depend on the tiling or the row split.
 * No software prefetch: two sequential streams per thread are what the cores' hardware
 * prefetchers follow, and nothing here could measure one (qemu only). */
enum { AF_F32, AF_F16, AF_BF16 };

/* f32_to_bf16 then back to f32, per lane (core/fp16.h): nearest-even on the bits, NaN quieted.
 * r = u + 0x7fff + bit 16 of u (the usra adds (u << 15) >> 31); a NaN lane (fcmeq x, x false)
 * takes u | 0x400000 instead; then the low 16 bits are cleared. 7 instructions, 2 constants. */
ARM_INLINE float32x4_t af_bf16_round(float32x4_t x) {
    const uint32x4_t u = vreinterpretq_u32_f32(x);
    const uint32x4_t r = vsraq_n_u32(vaddq_u32(u, vdupq_n_u32(0x7fffu)), vshlq_n_u32(u, 15), 31);
    const uint32x4_t q = vorrq_u32(u, vdupq_n_u32(0x400000u));
    const uint32x4_t v = vbslq_u32(vceqq_f32(x, x), r, q);
    return vreinterpretq_f32_u32(vandq_u32(v, vdupq_n_u32(0xffff0000u)));
}

/* Weights k .. k + 15 of a row as 4 x f32x4 (exact). */
ARM_INLINE void af_load16(const uint8_t *row, int64_t k, const int T, float32x4_t w[4]) {
    if (T == AF_F32) {
        const float *p = (const float *)(const void *)row + k;
        #pragma GCC unroll 4
        for (int q = 0; q < 4; q++) w[q] = vld1q_f32(p + 4 * q);
        return;
    }
    const uint16_t *p = (const uint16_t *)(const void *)row + k;
    const uint16x8_t a = vld1q_u16(p), b = vld1q_u16(p + 8);
    if (T == AF_F16) {
        w[0] = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(a)));
        w[1] = vcvt_high_f32_f16(vreinterpretq_f16_u16(a));
        w[2] = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(b)));
        w[3] = vcvt_high_f32_f16(vreinterpretq_f16_u16(b));
    } else {
        w[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(a), 16));
        w[1] = vreinterpretq_f32_u32(vshll_high_n_u16(a, 16));
        w[2] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(b), 16));
        w[3] = vreinterpretq_f32_u32(vshll_high_n_u16(b, 16));
    }
}

/* Weight k of a row, scalar (exact). */
ARM_INLINE float af_w1(const uint8_t *row, int64_t k, const int T) {
    if (T == AF_F32) return ((const float *)(const void *)row)[k];
    const uint16_t h = ((const uint16_t *)(const void *)row)[k];
    return T == AF_F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

/* One (row, column) output from its four quarter accumulators: the K % 16 tail lane by lane,
 * then the pairwise lane tree. */
ARM_INLINE float af_finish(const float32x4_t acc[4], const uint8_t *row, const float *x, int64_t K16, int64_t K,
                           const int T) {
    float l[16];
    for (int q = 0; q < 4; q++) vst1q_f32(l + 4 * q, acc[q]);
    for (int64_t k = K16; k < K; k++) {
        const float xv = T == AF_BF16 ? bf16_to_f32(f32_to_bf16(x[k])) : x[k];
        l[k & 15] = fmaf(af_w1(row, k, T), xv, l[k & 15]);
    }
    return kern_lane_reduce(l);
}

/* An R-row x C-column tile: rows ra (and rb when R == 2) and columns [c, c + C). R, C, T are
 * constants at every call (the loops unroll and the accumulators stay in registers). */
ARM_INLINE void af_tile(const kern_mm_args *m, int64_t ra, int64_t rb, int c, const int R, const int C, const int T) {
    const int64_t K = m->w->n_in, K16 = K & ~(int64_t)15;
    const size_t rowb = (size_t)K * (T == AF_F32 ? 4 : 2);
    const uint8_t *wr[2] = {m->w->data + (size_t)ra * rowb, m->w->data + (size_t)rb * rowb};
    const float *x = m->a->x + (int64_t)c * K;
    float32x4_t acc[2][2][4];
    #pragma GCC unroll 2
    for (int i = 0; i < R; i++)
        #pragma GCC unroll 2
        for (int j = 0; j < C; j++)
            #pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[i][j][q] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < K16; k += 16) {
        float32x4_t w[2][4];
        #pragma GCC unroll 2
        for (int i = 0; i < R; i++) af_load16(wr[i], k, T, w[i]);
        #pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
            #pragma GCC unroll 2
            for (int j = 0; j < C; j++) {
                float32x4_t xv = vld1q_f32(x + j * K + k + 4 * q);
                if (T == AF_BF16) xv = af_bf16_round(xv);
                #pragma GCC unroll 2
                for (int i = 0; i < R; i++) acc[i][j][q] = vfmaq_f32(acc[i][j][q], w[i][q], xv);
            }
    }
    #pragma GCC unroll 2
    for (int i = 0; i < R; i++)
        #pragma GCC unroll 2
        for (int j = 0; j < C; j++)
            m->y[(c + j) * m->ldy + (i ? rb : ra)] = af_finish(acc[i][j], wr[i], x + j * K, K16, K, T);
}

/* Rows [r0, r1) of every column (see the section comment). */
ARM_INLINE void af_rows(const kern_mm_args *m, int64_t r0, int64_t r1, const int T) {
    const int nc = m->a->ncols;
    const int64_t h = (r1 - r0) / 2;
    for (int64_t i = 0; i < h; i++) {
        const int64_t ra = r0 + i, rb = r0 + h + i;
        int c = 0;
        for (; c + 2 <= nc; c += 2) af_tile(m, ra, rb, c, 2, 2, T);
        if (c < nc) af_tile(m, ra, rb, c, 2, 1, T);
    }
    if (r0 + 2 * h < r1) {   /* an odd row count: the last row alone */
        int c = 0;
        for (; c + 2 <= nc; c += 2) af_tile(m, r1 - 1, r1 - 1, c, 1, 2, T);
        if (c < nc) af_tile(m, r1 - 1, r1 - 1, c, 1, 1, T);
    }
}

/* One copy of the loops per type: no runtime type branch inside them. */
void arm_mm_f32(const kern_mm_args *m, int64_t r0, int64_t r1) { af_rows(m, r0, r1, AF_F32); }
void arm_mm_f16(const kern_mm_args *m, int64_t r0, int64_t r1) { af_rows(m, r0, r1, AF_F16); }
void arm_mm_bf16(const kern_mm_args *m, int64_t r0, int64_t r1) { af_rows(m, r0, r1, AF_BF16); }

const kern_table kern_table_neon = {
    .name = "neon",
    .needs = KCPU_NEON,
    .mm = {ARM_TABLE_MM(neon)},
};

#endif /* __aarch64__ */
