/* attn_avx512.c: the attention tile body (attn_impl.h) compiled with -mavx2 -mf16c -mavx512f
 * -mavx512vl (Makefile): the same 8-lane vectors and vcvtph2ps widening as x86/attn_avx2.c, so the
 * same bits, with AVX-512VL's 32 vector registers, where the 8-query tiles of prefill keep their
 * accumulators, query chunks and broadcast weights in registers instead of reloading them, and
 * 16-lane vectors that hold two 8-lane ones side by side (ATTN_V16, attn_impl.h); and the fast
 * SwiGLU 16 lanes at a time (swiglu_impl.h). Only blk_attn_tile_avx512 and blk_swiglu_fast_avx512
 * are exported; the avx512 ops table (ops.c) holds them. */
#include "model/blocks.h"

#if defined(__x86_64__)
#if !defined(__AVX2__) || !defined(__F16C__) || !defined(__AVX512VL__)
#error "attn_avx512.c must be compiled with -mavx2 -mf16c -mavx512f -mavx512vl"
#endif

#include "model/x86/f16c.h"

/* 16 fp16 values widened by vcvtph2ps zmm (exact, as the 8-lane form). */
static inline __attribute__((always_inline)) float __attribute__((vector_size(64))) attn_ld16_f16c(const uint16_t *p) {
    const __m512 r = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
    float __attribute__((vector_size(64))) v;
    memcpy(&v, &r, sizeof v);
    return v;
}

#define ATTN_SUFFIX avx512
#define ATTN_LD_F16(p) attn_ld_f16c(p)
#define ATTN_CG_WIDE 2   /* 8 queries x 2 chunks of the weighted V sum in registers */
#define ATTN_V16         /* two keys per dot-product vector, 16 output dims per accumulator */
#define ATTN_LD_F16_16(p) attn_ld16_f16c(p)
#include "model/attn_impl.h"

#define SWIGLU_SUFFIX avx512
#define SWIGLU_V16
#include "model/swiglu_impl.h"
#endif
