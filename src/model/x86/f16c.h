/* f16c.h: 8 fp16 values widened to an attn_v8f by vcvtph2ps (exact), for the attention copies
 * compiled with F16C (attn_avx2.c, attn_avx512.c). */
#ifndef TERN_MODEL_X86_F16C_H
#define TERN_MODEL_X86_F16C_H

#if !defined(__F16C__)
#error "f16c.h needs -mf16c"
#endif

#include "model/blocks.h"

#include <immintrin.h>
#include <string.h>

static inline __attribute__((always_inline)) attn_v8f attn_ld_f16c(const uint16_t *p) {
    const __m256 r = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
    attn_v8f v;
    memcpy(&v, &r, sizeof v);
    return v;
}

#endif /* TERN_MODEL_X86_F16C_H */
