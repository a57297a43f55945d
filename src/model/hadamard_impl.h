/* hadamard_impl.h: the body of the blocked Walsh-Hadamard transform (had_fwht_blocks), included
 * once per instruction set: by hadamard.c (portable, had_fwht_blocks_generic) and by
 * x86/hadamard_avx2.c (-mavx2, had_fwht_blocks_avx2). Lane-wise IEEE adds and subtracts on 8-lane
 * vectors only, so every copy gives the bits of had_fwht. */
#ifndef TERN_MODEL_HADAMARD_IMPL_H
#define TERN_MODEL_HADAMARD_IMPL_H

#include <stdint.h>

typedef float hv8 __attribute__((vector_size(32)));
typedef float hv8u __attribute__((vector_size(32), aligned(4), may_alias));
#define HLD8(p) (*(const hv8u *)(const void *)(p))
#define HST8(p, v) (*(hv8u *)(void *)(p) = (v))

/* Each level of the butterfly only reads the previous level's values, so doing levels 1, 2, 4
 * inside each group of 8 before the wider levels performs the same operations as had_fwht.
 * Levels 1, 2, 4 in one vector: lo/hi gather each pair's first/second operand, the sums and
 * differences are formed lane-wise, and a shuffle puts a + b and a - b back in place (every
 * output is the same single add or subtract of the same two values as the scalar loop). */
#define HSH(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
static inline __attribute__((always_inline)) void fwht_blocks_body(float *x, int64_t K, int64_t n) {
    for (int64_t b0 = 0; b0 < K; b0 += n) {
        float *p = x + b0;
        for (int64_t g = 0; g < n; g += 8) {
            hv8 v = HLD8(p + g), lo, hi;
            lo = HSH(v, v, 0, 0, 2, 2, 4, 4, 6, 6);
            hi = HSH(v, v, 1, 1, 3, 3, 5, 5, 7, 7);
            v = HSH(lo + hi, lo - hi, 0, 9, 2, 11, 4, 13, 6, 15);
            lo = HSH(v, v, 0, 1, 0, 1, 4, 5, 4, 5);
            hi = HSH(v, v, 2, 3, 2, 3, 6, 7, 6, 7);
            v = HSH(lo + hi, lo - hi, 0, 1, 10, 11, 4, 5, 14, 15);
            lo = HSH(v, v, 0, 1, 2, 3, 0, 1, 2, 3);
            hi = HSH(v, v, 4, 5, 6, 7, 4, 5, 6, 7);
            HST8(p + g, HSH(lo + hi, lo - hi, 0, 1, 2, 3, 12, 13, 14, 15));
        }
        for (int64_t h = 8; h < n; h *= 2)
            for (int64_t i = 0; i < n; i += 2 * h)
                for (int64_t j = i; j < i + h; j += 8) {
                    const hv8 a = HLD8(p + j), b = HLD8(p + j + h);
                    HST8(p + j, a + b);
                    HST8(p + j + h, a - b);
                }
    }
}

#endif /* TERN_MODEL_HADAMARD_IMPL_H */
