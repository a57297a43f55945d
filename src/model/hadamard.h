/* hadamard.h: the Walsh-Hadamard rotation of Ternary Bonsai 2 files. Layer 5 primitive.
 * Source of truth: ../shared/spec/ternary-gguf.md section 4.2 (rot), 4.4 (inverse rows).
 *   rot(x):      y = s (.) x; per block of n: y_b = FWHT_n(y_b) * (1/sqrt n)  (scale first)
 *   rot_inv(r):  e = s (.) (FWHT_blockwise(r) * (1/sqrt n))
 * FWHT_n is the unnormalised Sylvester transform, natural order: for span h = 1, 2, ..., n/2,
 * (a, b) -> (a + b, a - b). n is a power of two; K a multiple of n; s has K entries (+-1) or is
 * NULL (identity signs). Scalar reference; SIMD versions must give the same bits. */
#ifndef TERN_MODEL_HADAMARD_H
#define TERN_MODEL_HADAMARD_H

#include <stdint.h>

/* In-place unnormalised FWHT of x[0..n). */
void had_fwht(float *x, int64_t n);
/* In place: x = rot(x) over K values with block size n and signs s (int8 +-1, or NULL). */
void had_rot(float *x, int64_t K, int64_t n, const int8_t *s);
/* In place: x = rot_inv(x) (inverse of rot; used for embedding rows and unrotating weights). */
void had_rot_inv(float *x, int64_t K, int64_t n, const int8_t *s);

#endif /* TERN_MODEL_HADAMARD_H */
