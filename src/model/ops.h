/* ops.h: the element-wise vector operations of the forward passes, one table per instruction set,
 * chosen beside the kernel table (kern_isa_avx512, kern_isa_avx2): the attention tile, the fast SwiGLU, the f16 KV
 * store, the causal conv, the delta rule (token and chunked) and the Walsh-Hadamard transform.
 * Layer 5.
 * Every table computes the same bits (IEEE operations in the same order, the exp of vexp.h); a
 * table only chooses the instruction set the compiler may use. So the choice never changes a
 * result, and the portable table runs wherever the kernels run without x86 AVX2 (TERN_ISA=ref
 * exercises it). To add an ISA: compile the bodies (attn_impl.h, swiglu_impl.h, the gdn and
 * hadamard bodies) for it, add a table here and a case to model_ops_active, and list it in
 * model_ops_all (tests/test_ops.c checks that every table has every entry and matches the
 * portable one). */
#ifndef TERN_MODEL_OPS_H
#define TERN_MODEL_OPS_H

#include "model/blocks.h"

#include <stdint.h>

typedef struct model_ops {
    const char *name;   /* "generic", "avx2", "avx512" */
    /* blk_attn_tile (blocks.h) */
    void (*attn_tile)(int nq, const float *const *q, float *const *out, const int *n_kv, const blk_kv_view *kv,
                      int ikv, int hd_k, int hd_v, float scale, float *scores);
    /* blk_swiglu_fast: out = silu(g) * u over n values */
    void (*swiglu_fast)(float *out, const float *g, const float *u, int64_t n);
    /* blk_f16_from_f32: dst[i] = f32_to_fp16(src[i]) bit for bit */
    void (*f16_from_f32)(uint16_t *dst, const float *src, int n);
    /* gdn_conv's channel blocks [c0, ...) through n tokens (token i: x + i nch, y + i nch): returns
     * the first channel it left to the caller */
    int64_t (*gdn_conv_blocks)(const float *conv_w, float *state, const float *x, float *y, int64_t nch, int dc,
                               int64_t c0, int64_t c1, int n);
    /* gdn_norm_gate of fast numerics (not ggml) on one head */
    void (*norm_gate)(float *y, const float *o, const float *z, const float *w, int d, float eps);
    /* 1..GDN_CHUNK tokens of gdn_delta_token (the strides of gdn_delta_tokens_isa, gdn.h) with a
     * prefetch hint pf (may be NULL): the next head's state */
    void (*delta_tokens)(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                         const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                         int64_t ld_o, const float *pf);
    /* gdn_delta_chunk */
    void (*delta_chunk)(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                        const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                        int64_t ld_o, float *scratch);
    /* had_fwht_blocks, with had_rot's sign and scale step fused into its first pass when scale
     * is given (hadamard_impl.h) */
    void (*fwht_blocks)(float *x, int64_t K, int64_t n, const int8_t *s, const float *scale);
} model_ops;

/* The table of the active kernel path: one test of a flag per call, no name comparison. */
const model_ops *model_ops_active(void);
/* The table named name ("generic", "avx2", "avx512"; the kernel paths' names "avxvnni" and
 * "avx512vnni" and "amx" are "avx2", "avx512" and "avx512"), or NULL if it is not compiled
 * in. For tests that run every table. */
const model_ops *model_ops_find(const char *name);
/* NULL-terminated list of the tables compiled in. */
extern const model_ops *const model_ops_all[];

/* The copies the tables point at (each file compiles its bodies once per table). */
int64_t gdn_conv_blocks_generic(const float *conv_w, float *state, const float *x, float *y, int64_t nch, int dc,
                                int64_t c0, int64_t c1, int n);
void gdn_norm_gate_generic(float *y, const float *o, const float *z, const float *w, int d, float eps);
void gdn_delta_tokens_generic(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                              const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                              int64_t ld_o, const float *pf);
void gdn_delta_chunk_generic(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                             const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                             int64_t ld_o, float *scratch);
void had_fwht_blocks_generic(float *x, int64_t K, int64_t n, const int8_t *s, const float *scale);
void blk_f16_from_f32_generic(uint16_t *dst, const float *src, int n);
#if defined(__x86_64__) && defined(__GNUC__)
int64_t gdn_conv_blocks_avx2(const float *conv_w, float *state, const float *x, float *y, int64_t nch, int dc,
                             int64_t c0, int64_t c1, int n);
void gdn_norm_gate_avx2(float *y, const float *o, const float *z, const float *w, int d, float eps);
void gdn_delta_tokens_avx2(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                           const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                           int64_t ld_o, const float *pf);
void gdn_delta_chunk_avx2(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                          const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                          int64_t ld_o, float *scratch);
void had_fwht_blocks_avx2(float *x, int64_t K, int64_t n, const int8_t *s, const float *scale);
void gdn_delta_tokens_avx512(float *S, int d, int n, const float *q, int64_t ld_q, const float *k, int64_t ld_k,
                             const float *v, int64_t ld_v, const float *beta, const float *gam, int64_t ld_g, float *o,
                             int64_t ld_o, const float *pf);
#endif

#endif /* TERN_MODEL_OPS_H */
