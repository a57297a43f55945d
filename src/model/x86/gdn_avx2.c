/* gdn_avx2.c: the Gated DeltaNet vector bodies (gdn_impl.h) compiled with -mavx2 (Makefile);
 * only the *_avx2 copies the ops table (ops.h) points at are exported. */
#include "model/ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#if !defined(__AVX2__)
#error "gdn_avx2.c must be compiled with -mavx2"
#endif
#include "model/gdn_impl.h"

int64_t gdn_conv_blocks_avx2(const float *conv_w, float *state, const float *x, float *y, int64_t nch, int dc,
                             int64_t c0, int64_t c1, int n) {
    return conv_blocks_body(conv_w, state, x, y, nch, dc, c0, c1, n);
}

void gdn_norm_gate_avx2(float *y, const float *o, const float *z, const float *w, int d, float eps) {
    norm_gate_body(y, o, z, w, d, eps);
}

void gdn_delta_tokens_avx2(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                           const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                           int64_t ld_o, const float *pf) {
    delta_tokens_body(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, pf);
}

void gdn_delta_chunk_avx2(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                          const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                          int64_t ld_o, float *scratch) {
    delta_chunk_body(S, d, n, q, ld_q, k, ld_k, v, ld_v, beta, gam, ld_g, o, ld_o, scratch);
}
#endif
