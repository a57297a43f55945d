/* qwen3.c: the dense Qwen3 architecture (Ternary Bonsai 1.7B / 4B / 8B).
 * Source of truth: spec/ternary-gguf.md section 6 (keys, tensors, forward): QK-norm (per-head
 * RMSNorm of q and k before RoPE), NeoX RoPE on all head dims (pairs (i, i + hd/2)), GQA, tied
 * or untied LM head, YaRN only when qwen3.rope.scaling.type = "yarn". */
#include "model/blocks.h"

static int qwen3_load(model_t *m, tern_err *err) {
    int rc = model_load_hparams_common(m, err);
    if (rc) return rc;
    m->hp.rope_type = ROPE_NEOX;
    return model_bind_dense(m, true, err);
}

/* x = embd(tok); per layer: x += attn(x); x += ffn(x); logits = output(norm(x)). */
static int qwen3_forward(const model_t *m, model_ws *ws, const model_batch *b) {
    blk_embed(m, ws, b);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const model_layer *L = &m->layers[il];
        blk_attn_layer(m, ws, b, L, il, true);
        blk_ffn_layer(m, ws, b->n, L);
    }
    blk_logits(m, ws, b);
    return TERN_OK;
}

const model_arch model_arch_qwen3 = {
    .name = "qwen3",
    .load = qwen3_load,
    .forward = qwen3_forward,
};
