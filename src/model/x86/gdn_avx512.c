/* gdn_avx512.c: the delta rule's body (gdn_impl.h, delta_tokens_body) compiled with -mavx2
 * -mavx512f (Makefile) and 16-lane vectors (GDN_V16): column tiles of 64 and 16, each lane the
 * same scalar operations in the same order as in the 8-lane AVX2 copy, so the same bits in half
 * the vector instructions (the multi-token recurrence of speculative verification on the hybrid
 * models is compute-bound). Only gdn_delta_tokens_avx512 is exported; the avx512 ops table
 * (ops.c) holds it. */
#include "model/ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#if !defined(__AVX2__) || !defined(__AVX512F__)
#error "gdn_avx512.c must be compiled with -mavx2 -mavx512f"
#endif
#define GDN_V16
#include "model/gdn_impl.h"

void gdn_delta_tokens_avx512(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                             const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                             int64_t ld_o, const float *pf) {
    delta_tokens_body(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, pf);
}
#endif
