/* vexp.h: e^x on 8-lane GCC/clang float vectors for x <= 0, with IEEE multiplies, adds, compares
 * and integer operations only, so every ISA (and the portable build) gives the same bits. The one
 * vector exp of the library: the attention softmax (attn_impl.h's attn_exp), the sampler's
 * weights, and the SiLU of fast numerics (vsilu8 below: the dense SwiGLU, and the Gated DeltaNet's
 * conv, output gate and FFN).
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

/* One body for both widths (the same operations per lane, so the same bits): VF/VI are the
 * float and int32 vector types, B(c) broadcasts a constant. */
#define VEXP_LE0_BODY(VF, VI, B)                                                                 \
    VF x = *xp;                                                                                  \
    const VI ok = x >= B(-87.0f);                                     /* false for NaN */        \
    x = (VF)(((VI)x & ok) | ((VI)B(-87.0f) & ~ok));                                              \
    const VF t = x * B(1.44269504088896341f) + B(12582912.0f);                                   \
    const VF n = t - B(12582912.0f);                                  /* integer in [-126, 0] */ \
    const VF r = (x - n * B(0.693359375f)) - n * B(-2.12194440e-4f);                             \
    VF p = B(1.0f / 5040.0f);                                                                    \
    p = p * r + B(1.0f / 720.0f);                                                                \
    p = p * r + B(1.0f / 120.0f);                                                                \
    p = p * r + B(1.0f / 24.0f);                                                                 \
    p = p * r + B(1.0f / 6.0f);                                                                  \
    p = p * r + B(0.5f);                                                                         \
    p = p * r + B(1.0f);                                                                         \
    p = p * r + B(1.0f);                                                                         \
    const VI e = (__builtin_convertvector(n, VI) + 127) << 23;                                   \
    return (VF)((VI)(p * (VF)e) & ok)

#define VEXP_B8(c) ((attn_v8f){c, c, c, c, c, c, c, c})
static inline __attribute__((always_inline)) attn_v8f vexp_le0(const attn_v8f *xp) {   /* by pointer: no vector ABI */
    VEXP_LE0_BODY(attn_v8f, attn_v8i, VEXP_B8);
}

/* The 4-lane form, for code built without ISA flags (4 lanes is the baseline x86-64 and ARM64
 * register: 8-lane vectors are split there, and compares are not always kept in registers). */
typedef float vexp_v4f __attribute__((vector_size(16)));
typedef int32_t vexp_v4i __attribute__((vector_size(16)));
#define VEXP_B4(c) ((vexp_v4f){c, c, c, c})
static inline __attribute__((always_inline)) vexp_v4f vexp4_le0(const vexp_v4f *xp) {
    VEXP_LE0_BODY(vexp_v4f, vexp_v4i, VEXP_B4);
}

/* silu(x) = x / (1 + e^-x) lane-wise from t = e^-|x| (<= 1: the exp never overflows): x / (1 + t)
 * for x >= 0, (x * t) / (1 + t) for x < 0. Within 3 ulp of the exact value for x >= -87; below,
 * where |silu(x)| < 2^-118, the result is -0 (vexp_le0 flushes e^x to 0 there). NaN stays NaN. */
#define VSILU_BODY(VF, VI, B, EXP)                                                               \
    const VF x = *xp;                                                                            \
    const VI neg = x < B(0.0f);                                                                  \
    const VF nx = (VF)((VI)x | (VI)B(-0.0f));                         /* -|x| */                 \
    const VF t = EXP(&nx);                                                                       \
    const VF num = (VF)(((VI)(x * t) & neg) | ((VI)x & ~neg));                                   \
    return num / (B(1.0f) + t)

static inline __attribute__((always_inline)) attn_v8f vsilu8(const attn_v8f *xp) {
    VSILU_BODY(attn_v8f, attn_v8i, VEXP_B8, vexp_le0);
}
static inline __attribute__((always_inline)) vexp_v4f vsilu4(const vexp_v4f *xp) {
    VSILU_BODY(vexp_v4f, vexp_v4i, VEXP_B4, vexp4_le0);
}

#endif /* TERN_MODEL_VEXP_H */
