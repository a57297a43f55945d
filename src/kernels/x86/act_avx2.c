/* act_avx2.c: the fast-numerics quantisation of one full 128-value activation block with AVX2
 * (built with -mavx2 only; act.c calls it when the active kernel table needs AVX2). The bytes
 * are those of act.c's portable path (and of q8_round per value), because every step is the same
 * element-wise IEEE operation or an exact integer one:
 *   amax  = max |x| (vmaxps(v, m): a NaN v leaves m, as `v > m` does; the maximum of a set does
 *           not depend on the order);
 *   v     = (x * id + 1.5 * 2^23) - 1.5 * 2^23  (round half to even, |v| <= 127 (1 + 2^-22));
 *   NaN -> +0 first, then clamp to [-127, 127] by vmaxps / vminps (for a non-NaN v the same value
 *           as act.c's compare-and-select clamps followed by its NaN -> +0);
 *   bytes = vcvttps2dq (exact: v is integer-valued) + saturating packs (nothing saturates) put
 *           back in order by vpermd;
 *   sums  = of integer-valued floats (|sum of 16| <= 2032: exact in any order).
 * Source of truth for the layout: kern_impl.h (kact_fast). */
#include "kernels/kern_impl.h"

#if defined(__x86_64__)
#if !defined(__AVX2__)
#error "act_avx2.c must be compiled with -mavx2"
#endif
#include <immintrin.h>

float kern_act_amax128_avx2(const float *x) {
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < KA_FAST_BLOCK; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

int32_t kern_act_round128_avx2(const float *x, float id, int8_t *qs, int16_t *bsums) {
    const __m256 vid = _mm256_set1_ps(id), magic = _mm256_set1_ps(12582912.0f);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int32_t total = 0;
    for (int g = 0; g < 8; g += 2) {   /* two 16-value groups per pass: 32 bytes */
        __m256 r[4];
        for (int k = 0; k < 4; k++) {
            __m256 v = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g + 8 * k), vid), magic), magic);
            v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));           /* NaN -> +0 */
            r[k] = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        }
        /* packs work per 128-bit lane: p01 = [r0 lo, r1 lo | r0 hi, r1 hi] as int16, then bytes
         * [r0l r1l r2l r3l | r0h r1h r2h r3h] in dwords; vpermd restores r0 r1 r2 r3 order */
        const __m256i p01 = _mm256_packs_epi32(_mm256_cvttps_epi32(r[0]), _mm256_cvttps_epi32(r[1]));
        const __m256i p23 = _mm256_packs_epi32(_mm256_cvttps_epi32(r[2]), _mm256_cvttps_epi32(r[3]));
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), perm);
        _mm256_storeu_si256((__m256i *)(void *)(qs + 16 * g), b);
        for (int h = 0; h < 2; h++) {
            const __m256 s8 = _mm256_add_ps(r[2 * h], r[2 * h + 1]);
            __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
            s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
            s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
            const int s = (int)_mm_cvtss_f32(s4);
            bsums[g + h] = (int16_t)s;
            total += s;
        }
    }
    return total;
}
#endif
