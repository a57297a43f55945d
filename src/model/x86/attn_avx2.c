/* attn_avx2.c: the attention tile body (attn_impl.h) and the fast SwiGLU (swiglu_impl.h) compiled
 * with -mavx2 -mf16c (Makefile): 8-lane vectors in ymm registers and fp16 widened by vcvtph2ps
 * (exact, as the portable table). Only blk_attn_tile_avx2 and blk_swiglu_fast_avx2 are exported;
 * attn.c / blocks.c call them when the kernels run an x86 SIMD path. */
#include "model/blocks.h"

#if defined(__x86_64__)
#if !defined(__AVX2__) || !defined(__F16C__)
#error "attn_avx2.c must be compiled with -mavx2 -mf16c"
#endif
#include <immintrin.h>
#include <string.h>

static inline __attribute__((always_inline)) attn_v8f attn_ld_f16c(const uint16_t *p) {
    const __m256 r = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
    attn_v8f v;
    memcpy(&v, &r, sizeof v);
    return v;
}

#define ATTN_SUFFIX avx2
#define ATTN_LD_F16(p) attn_ld_f16c(p)
#include "model/attn_impl.h"

#define SWIGLU_SUFFIX avx2
#include "model/swiglu_impl.h"
#endif
