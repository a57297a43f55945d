/* attn_avx2.c: the attention tile body (attn_impl.h) and the fast SwiGLU (swiglu_impl.h) compiled
 * with -mavx2 -mf16c (Makefile): 8-lane vectors in ymm registers and fp16 widened by vcvtph2ps
 * (exact, as the portable table), and the f32 -> fp16 row conversion of the KV store (F16C).
 * Only blk_attn_tile_avx2, blk_swiglu_fast_avx2 and blk_f16_from_f32_avx2 are exported; the avx2
 * ops table (ops.c) holds them, and the model takes that table when the kernels run an x86 SIMD
 * path. */
#include "model/blocks.h"

#if defined(__x86_64__)
#if !defined(__AVX2__) || !defined(__F16C__)
#error "attn_avx2.c must be compiled with -mavx2 -mf16c"
#endif
#include "core/fp16.h"
#include "model/x86/f16c.h"

#include <immintrin.h>
#include <string.h>

#define ATTN_SUFFIX avx2
#define ATTN_LD_F16(p) attn_ld_f16c(p)
#define ATTN_PV_HALVES 1   /* the prefill tile 1.11x as fast on Zen 3 (bench/RESULTS.md host B) */
#include "model/attn_impl.h"

#define SWIGLU_SUFFIX avx2
#include "model/swiglu_impl.h"

/* f32 -> fp16 by vcvtps2ph with round-to-nearest-even (IEEE: the same as f32_to_fp16 for every
 * non-NaN input, subnormals and overflow to inf included); a group of 8 holding a NaN goes
 * through f32_to_fp16 (whose NaN is sign | 0x7e00, where vcvtps2ph would keep payload bits). */
void blk_f16_from_f32_avx2(uint16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            for (int l = 0; l < 8; l++) dst[i + l] = f32_to_fp16(src[i + l]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}
#endif
