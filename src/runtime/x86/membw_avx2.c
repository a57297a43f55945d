/* membw_avx2.c: the bandwidth probe's AVX2 read loop (membw.h membw_sum), compiled with -mavx2
 * (Makefile): 256-bit loads into four independent accumulators. */
#include "runtime/membw.h"

#if defined(__x86_64__)
#if !defined(__AVX2__)
#error "membw_avx2.c must be compiled with -mavx2"
#endif
#include <immintrin.h>

uint64_t membw_sum_avx2(const uint64_t *p, int64_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(const void *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(const void *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(const void *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(const void *)(p + i + 12)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)(void *)t, a0);
    return t[0] + t[1] + t[2] + t[3];
}
#endif
