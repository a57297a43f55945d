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
 * PTQ1_0: arm_ptq_decode (threshold compares) and smull/smlal per 32-weight unit. */
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

const kern_table kern_table_neon = {
    .name = "neon",
    .needs = KCPU_NEON,
    .mm = {ARM_TABLE_MM(neon)},
};

#endif /* __aarch64__ */
