/* ops.c: the per-ISA tables of the forward's element-wise vector operations (ops.h). */
#include "model/ops.h"

#include "kernels/kernels.h"

#include <string.h>

static const model_ops ops_generic = {
    .name = "generic",
    .attn_tile = blk_attn_tile_generic,
    .swiglu_fast = blk_swiglu_fast_generic,
    .f16_from_f32 = blk_f16_from_f32_generic,
    .gdn_conv_blocks = gdn_conv_blocks_generic,
    .norm_gate = gdn_norm_gate_generic,
    .delta_tokens = gdn_delta_tokens_generic,
    .delta_chunk = gdn_delta_chunk_generic,
    .fwht_blocks = had_fwht_blocks_generic,
};

#if defined(__x86_64__) && defined(__GNUC__)
/* The AVX2 copies both x86 tables hold; they differ in the attention tile, the SwiGLU and the
 * delta rule. */
#define OPS_X86_SHARED                                                                              \
    .f16_from_f32 = blk_f16_from_f32_avx2, .gdn_conv_blocks = gdn_conv_blocks_avx2,                \
    .norm_gate = gdn_norm_gate_avx2,                                                                \
    .delta_chunk = gdn_delta_chunk_avx2, .fwht_blocks = had_fwht_blocks_avx2
static const model_ops ops_avx2 = {.name = "avx2", .attn_tile = blk_attn_tile_avx2,
                                   .swiglu_fast = blk_swiglu_fast_avx2, .delta_tokens = gdn_delta_tokens_avx2,
                                   OPS_X86_SHARED};
/* AVX-512 (avx512vnni): the attention tile compiled for 32 vector registers and 16-lane vectors,
 * the SwiGLU and the delta rule 16 lanes at a time. */
static const model_ops ops_avx512 = {.name = "avx512", .attn_tile = blk_attn_tile_avx512,
                                     .swiglu_fast = blk_swiglu_fast_avx512, .delta_tokens = gdn_delta_tokens_avx512,
                                     OPS_X86_SHARED};
#undef OPS_X86_SHARED
#endif

const model_ops *const model_ops_all[] = {
    &ops_generic,
#if defined(__x86_64__) && defined(__GNUC__)
    &ops_avx2,
    &ops_avx512,
#endif
    NULL,
};

const model_ops *model_ops_active(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (kern_isa_avx512()) return &ops_avx512;
    if (kern_isa_avx2()) return &ops_avx2;
#endif
    return &ops_generic;
}

const model_ops *model_ops_find(const char *name) {
    if (!name) return NULL;
    if (!strcmp(name, "avx512vnni") || !strcmp(name, "amx")) name = "avx512";   /* amx: the AVX-512 code beside the tiles */
    if (!strcmp(name, "avxvnni")) name = "avx2";   /* the same vector code: AVX2 is part of it */
    for (int i = 0; model_ops_all[i]; i++)
        if (!strcmp(model_ops_all[i]->name, name)) return model_ops_all[i];
    return NULL;
}
