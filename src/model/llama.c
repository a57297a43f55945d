/* llama.c: the Llama architecture (stories260K and Llama-2-style models).
 * Source of truth: llama.cpp's llama graph (build_llama): RMSNorm, adjacent-pair ("normal") RoPE
 * on rope.dimension_count dims (freq_base default 10000 when the key is absent), GQA, SwiGLU FFN,
 * untied or tied LM head. */
#include "model/blocks.h"

static int llama_load(model_t *m, tern_err *err) {
    int rc = model_load_hparams_common(m, err);
    if (rc) return rc;
    m->hp.rope_type = ROPE_NORMAL;
    return model_bind_dense(m, false, err);
}

/* x = embd(tok); per layer: x += attn(x); x += ffn(x); logits = output(norm(x)). */
static int llama_forward(const model_t *m, model_ws *ws, const model_batch *b) {
    blk_embed(m, ws, b);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const model_layer *L = &m->layers[il];
        blk_attn_layer(m, ws, b, L, il, false);
        blk_ffn_layer(m, ws, b->n, L);
    }
    blk_logits(m, ws, b);
    return TERN_OK;
}

const model_arch model_arch_llama = {
    .name = "llama",
    .load = llama_load,
    .forward = llama_forward,
};
