/* hadamard_avx2.c: the blocked Walsh-Hadamard transform (hadamard_impl.h) compiled with -mavx2
 * (Makefile); only had_fwht_blocks_avx2 is exported, through the ops table (ops.h). */
#include "model/ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#if !defined(__AVX2__)
#error "hadamard_avx2.c must be compiled with -mavx2"
#endif
#include "model/hadamard_impl.h"

void had_fwht_blocks_avx2(float *x, int64_t K, int64_t n, const int8_t *s, const float *scale) {
    fwht_blocks_body(x, K, n, s, scale);
}
#endif
