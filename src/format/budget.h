/* budget.h: model facts derived from a GGUF header alone: parameter count, bytes by tensor type,
 * and the per-token byte budget of ../shared/DESIGN.md "Performance model", which sets the
 * decode-speed ceiling (bytes per token / memory bandwidth). Layer 2 (reads gguf only). Used by
 * `tern info`, and by benchmarks that quote a ceiling. Works on a header-only (sparse) file. */
#ifndef TERN_FORMAT_BUDGET_H
#define TERN_FORMAT_BUDGET_H

#include "format/gguf.h"

#define GGUF_BUDGET_MAX_TYPES 16

typedef struct {
    char arch[64];                 /* general.architecture ("" if absent) */
    uint64_t n_tensors;
    uint64_t n_params;             /* sum of element counts over all tensors */
    uint64_t tensor_bytes;         /* sum of nbytes over all tensors, as stored (no padding) */
    uint64_t data_bytes;           /* file size - data offset (includes alignment padding) */
    struct { int type; uint64_t n_tensors, n_params, bytes; } by_type[GGUF_BUDGET_MAX_TYPES];
    int n_types;                   /* by_type entries, in order of first appearance */

    /* per-token bytes (DESIGN.md): every tensor read per token as stored in memory. The token
     * embedding is lookup-only (one row) when an output.weight exists; when absent (tied) it is
     * read in full once, as the LM head. PTQ1_0 counted as stored (a load-time transcode to the
     * 2-bit layout would read ptq1_0_as_2bit_extra bytes more). */
    bool tied_embd;
    uint64_t embd_row_bytes;       /* one row of token_embd.weight (0 if absent) */
    uint64_t weight_bytes;         /* weights read per token */
    uint64_t ptq1_0_as_2bit_extra; /* sum over PTQ1_0 tensors read per token of nbytes * (34/28 - 1) */

    /* KV cache, f16 as in the reference runtime: n_attn_layers x n_head_kv x (key_length +
     * value_length) x 2 bytes per position; decoding the token at position pos reads pos + 1. */
    int64_t n_layer, n_attn_layers, n_gdn_layers, n_head_kv, key_length, value_length;
    int64_t pos;
    uint64_t kv_bytes_per_pos;
    uint64_t kv_bytes;

    /* qwen35 recurrent state, f32, read and written once per token:
     * rstate = 2 x n_gdn_layers x ssm heads (time_step_rank) x d_k x d_v x 4 (d_k = d_v = state_size);
     * conv = 2 x n_gdn_layers x (conv_kernel - 1) x conv channels x 4. */
    int64_t ssm_n_heads, ssm_d_state, ssm_d_conv, ssm_conv_channels;
    uint64_t rstate_bytes;
    uint64_t conv_bytes;

    uint64_t total_bytes;          /* weight_bytes + kv_bytes + rstate_bytes + conv_bytes */
} gguf_budget;

/* Fill *out from an open file for decoding at position pos (>= 0). Hyperparameters are read from
 * the "<arch>." keys: block_count, attention.head_count(_kv), attention.key_length /
 * value_length (default n_embd / n_head), full_attention_interval or
 * attention.recurrent_layers (qwen35 layer schedule, spec 5.1), ssm.* (spec 5.1). A file
 * without an architecture or attention keys gets weight figures only (KV = 0).
 * Errors: TERN_E_ARG (pos < 0), TERN_E_FORMAT (a hyperparameter of the wrong type or out of
 * range, naming the key; or an arithmetic overflow). */
int gguf_budget_compute(const gguf_ctx *g, int64_t pos, gguf_budget *out, tern_err *err);

#endif /* TERN_FORMAT_BUDGET_H */
