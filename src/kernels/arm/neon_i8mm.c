/* neon_i8mm.c: the i8mm path, built with -march=armv8.2-a+dotprod+i8mm only (owner: arm).
 * Matmul (prefill, >= 2 columns) by smmla on tiles of 4 activation columns; matvec and a single
 * leftover column by sdot (arm_dot.h); a leftover of 2 or 3 columns is padded with zero columns
 * into one full tile (one weight pass, the padded outputs are dropped).
 *
 * smmla(acc, W, B): W = 2x8 int8 (bytes 0-7 row a, 8-15 row b), B = 2x8 int8 (bytes 0-7 column
 * c, 8-15 column c+1), acc += [a.c, a.c+1, b.c, b.c+1]. A decoded row-pair slot (arm_dot.h:
 * 3 AND + 1 USHR per word) is already W, so nothing is zipped; B interleaves the 8 activations
 * of that slot from two columns (two 8-byte loads). Per block and 4-column tile: 2 pairs x
 * 2 column pairs x 4 slots = 16 accumulators, the powers of four removed once per block by
 * arithmetic shifts as in arm_dot.h. Bound: a lane of the slot-2 accumulator sums 4 words x
 * 8 products of 16u <= 48 by |q| <= 127 = 195072, inside int32. */
#include "kernels/arm/arm_common.h"

#if defined(__aarch64__)
#include "kernels/arm/arm_dot.h"

#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "neon_i8mm.c needs -march=...+i8mm"
#endif

/* u . q for the 4 rows of a block and a tile of 4 columns: out[c] lanes = rows 0..3. */
ARM_INLINE void mm_rp_dot4(const kern_rp_block *blk, const int8_t *const q[4], int32x4_t out[4]) {
    int32x4_t a[4][2][2];   /* [slot][pair][column pair] */
    #pragma GCC unroll 8
    for (int s = 0; s < 4; s++)
        #pragma GCC unroll 8
        for (int p = 0; p < 2; p++)
            #pragma GCC unroll 8
            for (int cp = 0; cp < 2; cp++) a[s][p][cp] = vdupq_n_s32(0);
    #pragma GCC unroll 8
    for (int wd = 0; wd < 4; wd++) {
        const uint8x16_t v0 = vld1q_u8(blk->qs[0][wd]), v1 = vld1q_u8(blk->qs[1][wd]);
#define MM_SLOT(s_, SLOT)                                                                            \
        {                                                                                          \
            const int k = 32 * wd + 8 * (s_);                                                      \
            const int8x16_t b01 = vcombine_s8(vld1_s8(q[0] + k), vld1_s8(q[1] + k));               \
            const int8x16_t b23 = vcombine_s8(vld1_s8(q[2] + k), vld1_s8(q[3] + k));               \
            const int8x16_t w0 = SLOT(v0), w1 = SLOT(v1);                                          \
            a[s_][0][0] = vmmlaq_s32(a[s_][0][0], w0, b01);                                        \
            a[s_][0][1] = vmmlaq_s32(a[s_][0][1], w0, b23);                                        \
            a[s_][1][0] = vmmlaq_s32(a[s_][1][0], w1, b01);                                        \
            a[s_][1][1] = vmmlaq_s32(a[s_][1][1], w1, b23);                                        \
        }
        MM_SLOT(0, DOT_SLOT0)
        MM_SLOT(1, DOT_SLOT1)
        MM_SLOT(2, DOT_SLOT2)
        MM_SLOT(3, DOT_SLOT3)
#undef MM_SLOT
    }
    int32x4_t t[2][2];   /* [pair][column pair] = [ra.c, ra.c+1, rb.c, rb.c+1] */
    #pragma GCC unroll 8
    for (int p = 0; p < 2; p++)
        #pragma GCC unroll 8
        for (int cp = 0; cp < 2; cp++) {
            int32x4_t x = vaddq_s32(a[0][p][cp], a[3][p][cp]);
            x = vsraq_n_s32(x, a[1][p][cp], 2);
            t[p][cp] = vsraq_n_s32(x, a[2][p][cp], 4);
        }
    /* column 2cp: lanes 0 and 2 of both pairs = [r0, r1, r2, r3]; column 2cp+1: lanes 1, 3 */
    #pragma GCC unroll 8
    for (int cp = 0; cp < 2; cp++) {
        out[2 * cp] = vuzp1q_s32(t[0][cp], t[1][cp]);
        out[2 * cp + 1] = vuzp2q_s32(t[0][cp], t[1][cp]);
    }
}

ARM_DEFINE_ENTRIES(i8mm, dot_rp_dot1, mm_rp_dot4, dot_rp_ggml, dot_ptq_dot)

const kern_table kern_table_i8mm = {
    .name = "i8mm",
    .needs = KCPU_NEON | KCPU_DOTPROD | KCPU_I8MM,
    .fallback = &kern_table_dotprod,
    .mm = {ARM_TABLE_MM(i8mm)},
};

#endif /* __aarch64__ */
