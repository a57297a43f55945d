/* fp16.h: exact IEEE binary16 and bfloat16 conversions (portable, no F16C needed).
 * f32 -> fp16 and f32 -> bf16 round to nearest, ties to even; subnormals, infinities and NaN
 * are handled (real PQ2_0 scales go down to ~1.1e-5, i.e. fp16 subnormals).
 * Source: IEEE 754-2008 binary16; spec/ternary-gguf.md "fp16". */
#ifndef TERN_CORE_FP16_H
#define TERN_CORE_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float tern_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t tern_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float fp16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {                          /* zero or subnormal: man * 2^-24, exact in f32 */
        const float f = (float)man * 5.9604644775390625e-08f;
        return tern_bits_f32(tern_f32_bits(f) | sign);
    }
    if (exp == 31) return tern_bits_f32(sign | 0x7f800000u | (man << 13));
    return tern_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t f32_to_fp16(float f) {
    const uint32_t x = tern_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);        /* NaN (quiet) */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);       /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                          /* below 2^-14: subnormal */
        /* a * 2^24 is exact (a < 2^-14); round to the nearest integer, ties to even. The
         * result 1024 encodes the smallest normal correctly (exp 1, man 0). */
        const float scaled = tern_bits_f32(ax) * 16777216.0f;
        return (uint16_t)(sign | (uint16_t)lrintf(scaled));
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);                    /* round 13 bits, ties even */
    r -= 112u << 23;                                                 /* rebias 127 -> 15 */
    return (uint16_t)(sign | (uint16_t)(r >> 13));
}

static inline float bf16_to_f32(uint16_t h) { return tern_bits_f32((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f) {
    const uint32_t x = tern_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#endif /* TERN_CORE_FP16_H */
