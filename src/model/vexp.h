/* vexp.h: e^x on 8-lane GCC/clang float vectors for x <= 0, with IEEE multiplies, adds, compares
 * and integer operations only, so every ISA (and the portable build) gives the same bits. The
 * exp of the attention softmax (attn_impl.h's attn_exp calls it) and of the element-wise blocks
 * (blocks.c: SiLU of fast numerics).
 * Method: n = round(x log2 e) by the 1.5 * 2^23 trick (round half to even), r = x - n ln2 in two
 * parts (ln2_hi has 9 significant bits: n * ln2_hi is exact), e^r by a degree-7 Taylor polynomial
 * in Horner form (|r| <= 0.347: truncation < 6e-9 relative), times 2^n built in the exponent bits;
 * within ~2 ulp of e^x. x < -87 (e^x < 2^-125) and NaN give 0. */
#ifndef TERN_MODEL_VEXP_H
#define TERN_MODEL_VEXP_H

#include "model/blocks.h"

/* The helpers return 32-byte vectors; they are static and always inlined, so no call crosses an
 * ABI boundary and GCC's note about the AVX calling convention is moot. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#define VEXP_B8(c) ((attn_v8f){c, c, c, c, c, c, c, c})

static inline __attribute__((always_inline)) attn_v8f vexp_le0(const attn_v8f *xp) {   /* by pointer: no vector ABI */
    attn_v8f x = *xp;
    const attn_v8i ok = x >= VEXP_B8(-87.0f);                               /* false for NaN */
    x = (attn_v8f)(((attn_v8i)x & ok) | ((attn_v8i)VEXP_B8(-87.0f) & ~ok));
    const attn_v8f t = x * VEXP_B8(1.44269504088896341f) + VEXP_B8(12582912.0f);
    const attn_v8f n = t - VEXP_B8(12582912.0f);                            /* integer in [-126, 0] */
    const attn_v8f r = (x - n * VEXP_B8(0.693359375f)) - n * VEXP_B8(-2.12194440e-4f);
    attn_v8f p = VEXP_B8(1.0f / 5040.0f);
    p = p * r + VEXP_B8(1.0f / 720.0f);
    p = p * r + VEXP_B8(1.0f / 120.0f);
    p = p * r + VEXP_B8(1.0f / 24.0f);
    p = p * r + VEXP_B8(1.0f / 6.0f);
    p = p * r + VEXP_B8(0.5f);
    p = p * r + VEXP_B8(1.0f);
    p = p * r + VEXP_B8(1.0f);
    const attn_v8i e = (__builtin_convertvector(n, attn_v8i) + 127) << 23;
    return (attn_v8f)((attn_v8i)(p * (attn_v8f)e) & ok);
}

#endif /* TERN_MODEL_VEXP_H */
