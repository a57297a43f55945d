/* hadamard_impl.h: the body of the blocked Walsh-Hadamard transform (had_fwht_blocks), included
 * once per instruction set: by hadamard.c (portable, had_fwht_blocks_generic) and by
 * x86/hadamard_avx2.c (-mavx2, had_fwht_blocks_avx2). Lane-wise IEEE adds, subtracts and
 * multiplies on 8-lane vectors only, so every copy gives the bits of had_fwht (and of had_rot's
 * definition, with the sign and scale step). */
#ifndef TERN_MODEL_HADAMARD_IMPL_H
#define TERN_MODEL_HADAMARD_IMPL_H

#include <stdint.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

typedef float hv8 __attribute__((vector_size(32)));
typedef float hv8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int8_t hv8s __attribute__((vector_size(8), aligned(1), may_alias));
typedef int32_t hv8i __attribute__((vector_size(32)));
#define HLD8(p) (*(const hv8u *)(const void *)(p))
#define HST8(p, v) (*(hv8u *)(void *)(p) = (v))

/* Each level of the butterfly only reads the previous level's values, and a level pairs values
 * only inside aligned spans of twice its distance, so any schedule that runs level h on a span
 * after levels h/2, h/4, ... of that span performs the same operations as had_fwht, in the same
 * order per value. The schedule here loads and stores a block of n values 1 + ceil((log2 n - 3)
 * / 3) times (4 at n = 1024) instead of log2 n - 2:
 * - first, levels 1, 2, 4 inside each vector of 8 (after had_rot's sign and scale step, when
 *   asked): lo/hi gather each pair's first/second operand, the sums and differences are formed
 *   lane-wise, and a shuffle puts a + b and a - b back in place (every output is the same single
 *   add or subtract of the same two values as the scalar loop);
 * - then levels h, 2h, 4h (h = 8, 64, 512, ...; fewer at the top) between 8 vectors h apart,
 *   held in registers across the three levels. */
#define HSH(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
/* By pointer, in place: no vector crosses a call boundary (the portable build has no AVX ABI). */
static inline __attribute__((always_inline)) void fwht_low3(hv8 *vp) {
    hv8 v = *vp, lo, hi;
    lo = HSH(v, v, 0, 0, 2, 2, 4, 4, 6, 6);
    hi = HSH(v, v, 1, 1, 3, 3, 5, 5, 7, 7);
    v = HSH(lo + hi, lo - hi, 0, 9, 2, 11, 4, 13, 6, 15);
    lo = HSH(v, v, 0, 1, 0, 1, 4, 5, 4, 5);
    hi = HSH(v, v, 2, 3, 2, 3, 6, 7, 6, 7);
    v = HSH(lo + hi, lo - hi, 0, 1, 10, 11, 4, 5, 14, 15);
    lo = HSH(v, v, 0, 1, 2, 3, 0, 1, 2, 3);
    hi = HSH(v, v, 4, 5, 6, 7, 4, 5, 6, 7);
    *vp = HSH(lo + hi, lo - hi, 0, 1, 2, 3, 12, 13, 14, 15);
}

/* Levels d, 2d, 4d (as many as NV = 2, 4 or 8 vectors hold; NV a constant in each use) of the
 * vectors v[0..NV-1], vector m at distance m d from v[0]: the lower operand of each pair gets
 * a + b, the upper a - b. */
#define HBF(a, b) do { const hv8 t_ = (a); (a) = t_ + (b); (b) = t_ - (b); } while (0)
static inline __attribute__((always_inline)) void fwht_radix(hv8 *v, const int NV) {
#pragma GCC unroll 8
    for (int m = 0; m < NV; m += 2) HBF(v[m], v[m + 1]);
    if (NV >= 4) { HBF(v[0], v[2]); HBF(v[1], v[3]); }
    if (NV >= 8) {
        HBF(v[4], v[6]);
        HBF(v[5], v[7]);
        HBF(v[0], v[4]);
        HBF(v[1], v[5]);
        HBF(v[2], v[6]);
        HBF(v[3], v[7]);
    }
}

/* Signs s[0..7] (int8 +-1) as floats: exact either way; the AVX2 build widens them in two
 * instructions, where GCC's generic vector conversion goes byte by byte. */
static inline __attribute__((always_inline)) void fwht_signs8_to(hv8 *out, const int8_t *s) {
#ifdef __AVX2__
    *out = (hv8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)s)));
#else
    *out = __builtin_convertvector(__builtin_convertvector(*(const hv8s *)(const void *)s, hv8i), hv8);
#endif
}

/* The first pass over one block: each value first becomes (s x) * scale when scale is given (s
 * NULL: x * scale; had_rot's order), then levels 1, 2, 4 of each vector of 8. One vector at a
 * time: few registers on any target. */
static inline __attribute__((always_inline)) void fwht_first(float *p, int64_t n, const int8_t *s, const float *scale) {
    for (int64_t i = 0; i < n; i += 8) {
        hv8 v = HLD8(p + i);
        if (scale) {
            if (s) {
                hv8 sg;
                fwht_signs8_to(&sg, s + i);
                v = sg * v;
            }
            v = v * *scale;
        }
        fwht_low3(&v);
        HST8(p + i, v);
    }
}

/* Levels h .. h NV / 2 of one block: NV vectors h apart at a time. */
static inline __attribute__((always_inline)) void fwht_pass(float *p, int64_t n, int64_t h, const int NV) {
    for (int64_t i = 0; i < n; i += h * NV)
        for (int64_t j = i; j < i + h; j += 8) {
            hv8 v[8];
#pragma GCC unroll 8
            for (int m = 0; m < NV; m++) v[m] = HLD8(p + j + m * h);
            fwht_radix(v, NV);
#pragma GCC unroll 8
            for (int m = 0; m < NV; m++) HST8(p + j + m * h, v[m]);
        }
}

static inline __attribute__((always_inline)) void fwht_blocks_body(float *x, int64_t K, int64_t n, const int8_t *sg,
                                                                  const float *scale) {
    for (int64_t b0 = 0; b0 < K; b0 += n) {
        float *p = x + b0;
        fwht_first(p, n, sg ? sg + b0 : NULL, scale);
        for (int64_t h = 8; h < n;) {
            if (n >= 8 * h) { fwht_pass(p, n, h, 8); h *= 8; }
            else if (n >= 4 * h) { fwht_pass(p, n, h, 4); h *= 4; }
            else { fwht_pass(p, n, h, 2); h *= 2; }
        }
    }
}

#undef HBF

#endif /* TERN_MODEL_HADAMARD_IMPL_H */
