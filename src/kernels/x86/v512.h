/* v512.h: the AVX-512 operations the 16-row kernels use (avx512vnni.c, amx.c), under the names
 * their portable stand-in emu512.h gives them, so one kernel source compiles over either: the real
 * instructions here (AVX-512 F/BW/VL/DQ/VNNI flags), the emulation in the tests. */
#ifndef TERN_KERNELS_X86_V512_H
#define TERN_KERNELS_X86_V512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef __m512i v512;
static inline v512 v512_loadu(const void *p) { return _mm512_loadu_si512(p); }
static inline v512 v512_and(v512 a, v512 b) { return _mm512_and_si512(a, b); }
#define v512_srli16(a, n) _mm512_srli_epi16((a), (n))
static inline v512 v512_set1_8(char c) { return _mm512_set1_epi8(c); }
static inline v512 v512_zero(void) { return _mm512_setzero_si512(); }
static inline v512 v512_dpbusd(v512 acc, v512 u, v512 s) { return _mm512_dpbusd_epi32(acc, u, s); }
/* vpdpbusd with the 4 bytes at p broadcast as its memory operand ({1to16}): one fused uop where
 * the compiler emits a separate vpbroadcastd + vpdpbusd (GCC does not fold this one). */
static inline v512 v512_dpbusd_b32(v512 acc, v512 u, const void *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)p));
    return acc;
}
static inline v512 v512_perm2_64(v512 a, v512 idx, v512 b) { return _mm512_permutex2var_epi64(a, idx, b); }
static inline v512 v512_idx64(long long i0, long long i1, long long i2, long long i3, long long i4, long long i5,
                              long long i6, long long i7) {
    return _mm512_setr_epi64(i0, i1, i2, i3, i4, i5, i6, i7);
}
static inline __m256i v512_lo256(v512 a) { return _mm512_castsi512_si256(a); }
static inline __m256i v512_hi256(v512 a) { return _mm512_extracti64x4_epi64(a, 1); }
static inline v512 v512_set1_32(int32_t x) { return _mm512_set1_epi32(x); }
/* a load broadcast to 16 lanes: as a vpdpbusd/vpsubd operand it folds into {1to16} */
static inline v512 v512_bcast32(const void *p) {
    int32_t x;
    memcpy(&x, p, 4);
    return _mm512_set1_epi32(x);
}
static inline v512 v512_add32(v512 a, v512 b) { return _mm512_add_epi32(a, b); }
static inline v512 v512_sub32(v512 a, v512 b) { return _mm512_sub_epi32(a, b); }
#define v512_srai32(a, n) _mm512_srai_epi32((a), (n))
typedef __m512 v512f;
static inline v512f v512f_zero(void) { return _mm512_setzero_ps(); }
static inline v512f v512f_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void v512f_storeu(float *p, v512f a) { _mm512_storeu_ps(p, a); }
static inline v512f v512f_set1(float x) { return _mm512_set1_ps(x); }
static inline v512f v512f_mul(v512f a, v512f b) { return _mm512_mul_ps(a, b); }
static inline v512f v512f_fmadd(v512f a, v512f b, v512f c) { return _mm512_fmadd_ps(a, b, c); }
static inline v512f v512f_cvt32(v512 a) { return _mm512_cvtepi32_ps(a); }
static inline v512f v512f_ph(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline void v512f_mask_storeu(float *p, unsigned keep, v512f a) { _mm512_mask_storeu_ps(p, (__mmask16)keep, a); }
static inline void v512_store(void *p, v512 a) { _mm512_storeu_si512(p, a); }
static inline v512 v512_add8(v512 a, v512 b) { return _mm512_add_epi8(a, b); }
/* the base-3 digit of every byte v: [v >= 86] + [v >= 171] (kern_impl.h): two unsigned compares
 * into masks, then 1 where the first holds, 2 where the second does */
static inline v512 v512_b3digit(v512 v) {
    const __mmask64 k1 = _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8(86));
    const __mmask64 k2 = _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)171));
    return _mm512_mask_mov_epi8(_mm512_maskz_mov_epi8(k1, _mm512_set1_epi8(1)), k2, _mm512_set1_epi8(2));
}
static inline v512 v512_zext16_32(const void *p) { return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)); }

#endif /* TERN_KERNELS_X86_V512_H */
