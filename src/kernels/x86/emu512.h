/* emu512.h: a portable stand-in for the handful of AVX-512 operations avx512vnni.c uses, so the
 * same kernel source can be compiled with -DKERN_EMU512 and AVX2 flags and checked against the
 * reference on hosts without AVX-512 (tests only; never in the library). Semantics follow the
 * Intel SDM: a zmm is 64 bytes = 4 x 128-bit lanes (here lo = lanes 0-1, hi = lanes 2-3);
 * vpdpbusd: each int32 lane += sum of 4 (unsigned byte of u) * (signed byte of s), wrapping;
 * vpermt2q: qword i = concat(a, b)[idx[i] & 15]; a masked store leaves the masked-off lanes'
 * memory untouched (the caller's out-of-range rows). */
#ifndef TERN_KERNELS_X86_EMU512_H
#define TERN_KERNELS_X86_EMU512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef struct { __m256i lo, hi; } v512;

static inline v512 v512_loadu(const void *p) {
    v512 r;
    r.lo = _mm256_loadu_si256((const __m256i *)p);
    r.hi = _mm256_loadu_si256((const __m256i *)((const uint8_t *)p + 32));
    return r;
}
static inline v512 v512_and(v512 a, v512 b) { return (v512){_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)}; }
#define v512_srli16(a, n) ((v512){_mm256_srli_epi16((a).lo, (n)), _mm256_srli_epi16((a).hi, (n))})
static inline v512 v512_set1_8(char c) { return (v512){_mm256_set1_epi8(c), _mm256_set1_epi8(c)}; }
static inline v512 v512_zero(void) { return (v512){_mm256_setzero_si256(), _mm256_setzero_si256()}; }
static inline void v512_store(void *p, v512 a) {
    _mm256_storeu_si256((__m256i *)p, a.lo);
    _mm256_storeu_si256((__m256i *)((uint8_t *)p + 32), a.hi);
}
static inline v512 v512_dpbusd(v512 acc, v512 u, v512 s) {
    int32_t a[16];
    uint8_t ub[64];
    int8_t sb[64];
    v512_store(a, acc);
    v512_store(ub, u);
    v512_store(sb, s);
    for (int i = 0; i < 16; i++) {
        int64_t t = a[i];
        for (int j = 0; j < 4; j++) t += (int32_t)ub[4 * i + j] * (int32_t)sb[4 * i + j];
        a[i] = (int32_t)(uint32_t)t;   /* wraps like the instruction (never reached here) */
    }
    return v512_loadu(a);
}
static inline v512 v512_perm2_64(v512 a, v512 idx, v512 b) {
    uint64_t t[16], ix[8], o[8];
    v512_store(t, a);
    v512_store(t + 8, b);
    v512_store(ix, idx);
    for (int i = 0; i < 8; i++) o[i] = t[ix[i] & 15];
    return v512_loadu(o);
}
static inline v512 v512_idx64(long long i0, long long i1, long long i2, long long i3, long long i4, long long i5,
                              long long i6, long long i7) {
    return (v512){_mm256_setr_epi64x(i0, i1, i2, i3), _mm256_setr_epi64x(i4, i5, i6, i7)};
}
static inline __m256i v512_lo256(v512 a) { return a.lo; }
static inline __m256i v512_hi256(v512 a) { return a.hi; }
static inline v512 v512_set1_32(int32_t x) { return (v512){_mm256_set1_epi32(x), _mm256_set1_epi32(x)}; }
/* vpbroadcastd from memory (the {1to16} operand): the 4 bytes at p in every int32 lane */
static inline v512 v512_bcast32(const void *p) {
    int32_t x;
    memcpy(&x, p, 4);
    return v512_set1_32(x);
}
static inline v512 v512_dpbusd_b32(v512 acc, v512 u, const void *p) { return v512_dpbusd(acc, u, v512_bcast32(p)); }
static inline v512 v512_add32(v512 a, v512 b) { return (v512){_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
static inline v512 v512_sub32(v512 a, v512 b) { return (v512){_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
#define v512_srai32(a, n) ((v512){_mm256_srai_epi32((a).lo, (n)), _mm256_srai_epi32((a).hi, (n))})

static inline v512 v512_add8(v512 a, v512 b) { return (v512){_mm256_add_epi8(a.lo, b.lo), _mm256_add_epi8(a.hi, b.hi)}; }
/* the base-3 digit of every byte v: [v >= 86] + [v >= 171] (unsigned; kern_impl.h), here by signed
 * compares after flipping the sign bit */
static inline __m256i emu_b3digit(__m256i v) {
    const __m256i vx = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
    const __m256i neg = _mm256_add_epi8(_mm256_cmpgt_epi8(vx, _mm256_set1_epi8((char)(85 ^ 0x80))),
                                        _mm256_cmpgt_epi8(vx, _mm256_set1_epi8((char)(170 ^ 0x80))));
    return _mm256_sub_epi8(_mm256_setzero_si256(), neg);
}
static inline v512 v512_b3digit(v512 v) { return (v512){emu_b3digit(v.lo), emu_b3digit(v.hi)}; }
/* vpmovzxwd from memory: the 16 uint16 at p, one per int32 lane */
static inline v512 v512_zext16_32(const void *p) {
    return (v512){_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)),
                  _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint8_t *)p + 16)))};
}

/* 16 f32 lanes (lo = 0-7, hi = 8-15). */
typedef struct { __m256 lo, hi; } v512f;
static inline v512f v512f_zero(void) { return (v512f){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline v512f v512f_loadu(const float *p) { return (v512f){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline void v512f_storeu(float *p, v512f a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
}
static inline v512f v512f_set1(float x) { return (v512f){_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
static inline v512f v512f_mul(v512f a, v512f b) { return (v512f){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
/* vfmadd: a * b + c fused, per lane */
static inline v512f v512f_fmadd(v512f a, v512f b, v512f c) {
    return (v512f){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
static inline v512f v512f_cvt32(v512 a) { return (v512f){_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)}; }
/* vcvtph2ps of the 16 fp16 at p (exact) */
static inline v512f v512f_ph(const void *p) {
    return (v512f){_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)),
                   _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint8_t *)p + 16)))};
}
/* masked vmovups: lane i stored to p[i] iff bit i of keep; the other lanes' memory is not touched */
static inline void v512f_mask_storeu(float *p, unsigned keep, v512f a) {
    float t[16];
    _mm256_storeu_ps(t, a.lo);
    _mm256_storeu_ps(t + 8, a.hi);
    for (int i = 0; i < 16; i++)
        if ((keep >> i) & 1) p[i] = t[i];
}

#endif /* TERN_KERNELS_X86_EMU512_H */
