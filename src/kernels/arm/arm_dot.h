/* arm_dot.h: the sdot block functions (owner: arm), included by neon_dot.c and neon_i8mm.c,
 * each compiling its own static copy under its own -march flags (both have +dotprod).
 *
 * PQ2_0 row-pair decode (the seed's design): a 16-byte word v of row pair p holds, in slot s,
 * [row a: 8 weights | row b: the same 8] (weights 32 wd + 8 s + 0..7). Mask, don't shift:
 *   slot 0: v & 0x03 = u,  slot 1: v & 0x0c = 4u,  slot 2: v & 0x30 = 16u,  slot 3: v >> 6 = u
 * (slot 3 needs the shift: sdot is signed and u = 2 at bit 6 would read as -128). The 8
 * activations of slot s are duplicated into both halves (dup8), so one sdot serves both rows:
 * lanes 0-1 collect row a, lanes 2-3 row b. One accumulator per (pair, slot) = 8 independent
 * sdot chains; once per block the powers of four go, exactly, by arithmetic shifts:
 *   t = a0 + a3 + (a1 >> 2) + (a2 >> 4)    (a1 is a multiple of 4, a2 of 16; vsra)
 * Bound: a lane of a2 sums 16 products of 16u <= 48 by |q| <= 127 = 97536: far inside int32.
 * Cost per 64 weights (one word): 3 AND + 1 USHR + 4 SDOT (+ the activation dup loads, shared
 * by the two pairs). */
#ifndef TERN_KERNELS_ARM_ARM_DOT_H
#define TERN_KERNELS_ARM_ARM_DOT_H

#include "kernels/arm/arm_common.h"

#if !defined(__ARM_FEATURE_DOTPROD)
#error "arm_dot.h needs -march=...+dotprod"
#endif

#define DOT_SLOT0(v) vreinterpretq_s8_u8(vandq_u8((v), vdupq_n_u8(0x03)))
#define DOT_SLOT1(v) vreinterpretq_s8_u8(vandq_u8((v), vdupq_n_u8(0x0c)))
#define DOT_SLOT2(v) vreinterpretq_s8_u8(vandq_u8((v), vdupq_n_u8(0x30)))
#define DOT_SLOT3(v) vreinterpretq_s8_u8(vshrq_n_u8((v), 6))

/* u . q for the 4 rows of a row-pair block, one column (lanes = rows). */
ARM_INLINE int32x4_t dot_rp_dot1(const kern_rp_block *blk, const int8_t *q) {
    int32x4_t a[2][4];
    #pragma GCC unroll 8
    for (int p = 0; p < 2; p++)
        #pragma GCC unroll 8
        for (int s = 0; s < 4; s++) a[p][s] = vdupq_n_s32(0);
    #pragma GCC unroll 8
    for (int wd = 0; wd < 4; wd++) {
        const int8x16_t y0 = arm_dup8(q + 32 * wd + 0), y1 = arm_dup8(q + 32 * wd + 8);
        const int8x16_t y2 = arm_dup8(q + 32 * wd + 16), y3 = arm_dup8(q + 32 * wd + 24);
        #pragma GCC unroll 8
        for (int p = 0; p < 2; p++) {
            const uint8x16_t v = vld1q_u8(blk->qs[p][wd]);
            a[p][0] = vdotq_s32(a[p][0], DOT_SLOT0(v), y0);
            a[p][1] = vdotq_s32(a[p][1], DOT_SLOT1(v), y1);
            a[p][2] = vdotq_s32(a[p][2], DOT_SLOT2(v), y2);
            a[p][3] = vdotq_s32(a[p][3], DOT_SLOT3(v), y3);
        }
    }
    int32x4_t t[2];
    #pragma GCC unroll 8
    for (int p = 0; p < 2; p++) {
        t[p] = vaddq_s32(a[p][0], a[p][3]);
        t[p] = vsraq_n_s32(t[p], a[p][1], 2);
        t[p] = vsraq_n_s32(t[p], a[p][2], 4);
    }
    return vpaddq_s32(t[0], t[1]);   /* [row 0, row 1, row 2, row 3] */
}

/* ggml: exact t . q per word k (one Q8_0 unit) for the 4 rows. The slots are decoded to u
 * (shift + mask) so one sdot chain per pair holds the whole word. */
ARM_INLINE void dot_rp_ggml(const kern_rp_block *blk, const kact_ggml *ag, int32x4_t out[4]) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        const int8_t *q = ag[k].qs;
        const int8x16_t y0 = arm_dup8(q), y1 = arm_dup8(q + 8), y2 = arm_dup8(q + 16), y3 = arm_dup8(q + 24);
        int32x4_t a[2];
        #pragma GCC unroll 8
        for (int p = 0; p < 2; p++) {
            const uint8x16_t v = vld1q_u8(blk->qs[p][k]);
            int32x4_t s = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(v, m3)), y0);
            s = vdotq_s32(s, vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 2), m3)), y1);
            s = vdotq_s32(s, vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 4), m3)), y2);
            a[p] = vdotq_s32(s, DOT_SLOT3(v), y3);
        }
        out[k] = vsubq_s32(vpaddq_s32(a[0], a[1]), vdupq_n_s32(ag[k].sum));
    }
}

/* PTQ1_0: t . q per 32-weight unit k (lane k) of a decoded block. */
ARM_INLINE int32x4_t dot_ptq_dot(const int8x16_t t[8], const int8_t *const q[4]) {
    int32x4_t A[4];
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        A[k] = vdotq_s32(vdupq_n_s32(0), t[2 * k], vld1q_s8(q[k]));
        A[k] = vdotq_s32(A[k], t[2 * k + 1], vld1q_s8(q[k] + 16));
    }
    return arm_hsum4(A[0], A[1], A[2], A[3]);
}

#endif /* TERN_KERNELS_ARM_ARM_DOT_H */
