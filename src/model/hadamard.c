/* hadamard.c: scalar Walsh-Hadamard rotation (the reference; see hadamard.h for the math). */
#include "model/hadamard.h"

#include <math.h>

void had_fwht(float *x, int64_t n) {
    for (int64_t h = 1; h < n; h *= 2) {
        for (int64_t i = 0; i < n; i += 2 * h) {
            for (int64_t j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
        }
    }
}

void had_rot(float *x, int64_t K, int64_t n, const int8_t *s) {
    const float scale = (float)(1.0 / sqrt((double)n));
    for (int64_t k = 0; k < K; k++) x[k] = (s ? (float)s[k] * x[k] : x[k]) * scale;  /* scale first */
    for (int64_t b = 0; b < K; b += n) had_fwht(x + b, n);
}

void had_rot_inv(float *x, int64_t K, int64_t n, const int8_t *s) {
    const float scale = (float)(1.0 / sqrt((double)n));
    /* The same scaled FWHT as rot (scale before the butterflies, as the fork's transform does;
     * it only matters for n = 512, spec 4.2), then the signs. */
    for (int64_t k = 0; k < K; k++) x[k] *= scale;
    for (int64_t b = 0; b < K; b += n) had_fwht(x + b, n);
    if (s)
        for (int64_t k = 0; k < K; k++) x[k] *= (float)s[k];
}
