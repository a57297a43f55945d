/* act_avx512.c: the fast-numerics quantisation of one full 128-value activation block with
 * AVX-512 (built with -mavx512f -mavx512bw -mavx512vl -mavx512dq; act.c calls it while the active
 * kernel table is the AVX-512 one). The same steps as act_avx2.c on 16 lanes, so the same bytes
 * as act.c's portable path:
 *   amax  = max |x| (vmaxps(v, m): a NaN v leaves m; the maximum of a set does not depend on
 *           the order);
 *   v     = (x * id + 1.5 * 2^23) - 1.5 * 2^23  (round half to even);
 *   NaN -> +0 first, then clamp to [-127, 127] by vmaxps / vminps;
 *   bytes = vcvttps2dq (exact: v is integer-valued) then vpmovdb (truncating; every value fits):
 *           one zmm is one 16-value group of the block, in order;
 *   sums  = of the group's 16 int32 (|sum| <= 2032: exact in any order).
 * Source of truth for the layout: kern_impl.h (kact_fast). */
#include "kernels/kern_impl.h"

#if defined(__x86_64__)
#if !defined(__AVX512F__) || !defined(__AVX512BW__)
#error "act_avx512.c must be compiled with -mavx512f -mavx512bw"
#endif
#include <immintrin.h>

float kern_act_amax128_avx512(const float *x) {
    const __m512 abs = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
    for (int i = 0; i < KA_FAST_BLOCK; i += 32) {
        m0 = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + i), abs), m0);
        m1 = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + i + 16), abs), m1);
    }
    const __m512 m = _mm512_max_ps(m0, m1);   /* no NaN in m0, m1: any order gives the maximum */
    __m256 h8 = _mm256_max_ps(_mm512_castps512_ps256(m), _mm512_extractf32x8_ps(m, 1));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

int32_t kern_act_round128_avx512(const float *x, float id, int8_t *qs, int16_t *bsums) {
    const __m512 vid = _mm512_set1_ps(id), magic = _mm512_set1_ps(12582912.0f);
    const __m512 hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
    int32_t total = 0;
    for (int g = 0; g < 8; g++) {   /* one 16-value group per zmm */
        __m512 v = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vid), magic), magic);
        v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);   /* NaN -> +0 */
        const __m512i q = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
        _mm_storeu_si128((__m128i *)(void *)(qs + 16 * g), _mm512_cvtepi32_epi8(q));
        const int s = _mm512_reduce_add_epi32(q);
        bsums[g] = (int16_t)s;
        total += s;
    }
    return total;
}
#endif
