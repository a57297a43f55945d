/* model.h: the loaded model (hyperparameters, bound weights), the per-architecture hooks, and the
 * forward-pass inputs (a batch of token columns, each with its own position and KV cache).
 * Layer 5. Source of truth: ../shared/spec/ternary-gguf.md sections 5-6 (architectures) and 8
 * (reference numerics); ../shared/DESIGN.md "Numerics modes", "Memory".
 *
 * Shape convention (stated once): activations are column-major batches, column c of a (n, K)
 * buffer is x[c * K .. c * K + K); a weight W has GGUF ne = [K, N] = [n_in, n_out] and
 * y[c * N + o] = dot(W[o, :], x[c, :]).
 *
 * How an architecture plugs in (see docs/ARCHITECTURE.md "Adding an architecture"):
 *   1. write src/model/<arch>.c with a `const model_arch model_arch_<arch>` whose hooks are
 *      load (read keys into m->hp, bind + validate every tensor with model_bind_*),
 *      ws_bytes/forward (the straight-line forward over a model_batch) and, for recurrent
 *      state, the rs_* hooks;
 *   2. add it to the table in arch.c.
 * Everything generic (GGUF open, memory check, vocab, thread pool, KV cache, sessions, logits)
 * stays in model.c / engine.c. */
#ifndef TERN_MODEL_MODEL_H
#define TERN_MODEL_MODEL_H

#include "core/core.h"
#include "format/gguf.h"
#include "kernels/kernels.h"
#include "runtime/kv.h"
#include "runtime/pool.h"
#include "tokenizer/tok.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

enum { ROPE_NORMAL = 0, ROPE_NEOX = 2 };   /* llama.cpp rope types: adjacent pairs / half split */

/* Hyperparameters (llama.cpp / GGUF names). */
typedef struct model_hparams {
    int32_t n_vocab;         /* rows of token_embd (spec 6: trust the tensor, not the vocab) */
    int32_t n_ctx_train;     /* <arch>.context_length */
    int32_t n_embd;          /* <arch>.embedding_length */
    int32_t n_layer;         /* <arch>.block_count */
    int32_t n_ff;            /* <arch>.feed_forward_length */
    int32_t n_head;          /* <arch>.attention.head_count */
    int32_t n_head_kv;       /* <arch>.attention.head_count_kv (default n_head) */
    int32_t n_embd_head_k;   /* <arch>.attention.key_length (default n_embd / n_head) */
    int32_t n_embd_head_v;   /* <arch>.attention.value_length (default n_embd_head_k) */
    int32_t n_rot;           /* <arch>.rope.dimension_count (default n_embd_head_k) */
    int rope_type;           /* ROPE_NORMAL (llama) or ROPE_NEOX (qwen3) */
    float rope_freq_base;    /* <arch>.rope.freq_base (default 10000) */
    float f_norm_rms_eps;    /* <arch>.attention.layer_norm_rms_epsilon */
    /* YaRN (only when <arch>.rope.scaling.type = "yarn"): llama.cpp's rope_yarn. */
    bool yarn;
    float rope_freq_scale;   /* 1 / factor (1 when no scaling) */
    float yarn_ext_factor;   /* 1 with YaRN, else 0 */
    float yarn_attn_factor;  /* cos/sin multiplier base (1) */
    float yarn_corr_lo, yarn_corr_hi;   /* correction dims (pair index range, as ggml) */
    int32_t n_ctx_orig;      /* <arch>.rope.scaling.original_context_length */
    float f_attn_scale;      /* 1/sqrt(n_embd_head_k) */
} model_hparams;

/* A dense attention + SwiGLU FFN layer (llama, qwen3; qwen35's attention layers reuse the
 * norm/proj fields it needs). Norm weights point into the GGUF buffer (F32). */
/* A rotation site of a Walsh-Hadamard basis (spec 4): the activation read by the weights there is
 * rotated in blocks of n values (0: none) with signs s (NULL: identity signs). */
typedef struct model_rot { int64_t n; const int8_t *s; } model_rot;

/* One layer's tensors. The dense archs use the first block; the hybrid qwen35 also the second
 * (its attention layers read attn_q..attn_output, its recurrent layers attn_qkv..ssm_norm). */
typedef struct model_layer {
    const float *attn_norm;      /* (n_embd) */
    const float *attn_q_norm;    /* (n_embd_head_k), qwen3 only, else NULL */
    const float *attn_k_norm;    /* (n_embd_head_k), qwen3 only, else NULL */
    const float *ffn_norm;       /* (n_embd) */
    kern_w attn_q;               /* [n_embd, n_head * n_embd_head_k] */
    kern_w attn_k;               /* [n_embd, n_head_kv * n_embd_head_k] */
    kern_w attn_v;               /* [n_embd, n_head_kv * n_embd_head_v] */
    kern_w attn_output;          /* [n_head * n_embd_head_v, n_embd] */
    kern_w ffn_gate, ffn_up;     /* [n_embd, n_ff] */
    kern_w ffn_down;             /* [n_ff, n_embd] */
    /* qwen35 */
    bool recurrent;              /* Gated DeltaNet layer, else gated full attention */
    int il_kv;                   /* attention: its KV cache layer, else -1 */
    int il_rs;                   /* recurrent: its recurrent-state layer, else -1 */
    model_rot rot_in;            /* input of attn_qkv + attn_gate, or of attn_q/k/v */
    model_rot rot_out;           /* input of ssm_out / attn_output */
    model_rot rot_ffn, rot_down; /* input of ffn_gate + ffn_up, of ffn_down */
    kern_w attn_qkv;             /* [n_embd, 2 n_k_head d_head + n_v_head d_head] */
    kern_w attn_gate;            /* [n_embd, n_v_head d_head] */
    kern_w ssm_alpha, ssm_beta;  /* [n_embd, n_v_head] */
    kern_w ssm_out;              /* [n_v_head d_head, n_embd] */
    const float *ssm_conv1d;     /* (n_ch, d_conv) */
    const float *ssm_dt_bias, *ssm_a;   /* (n_v_head) */
    const float *ssm_norm;       /* (d_head) */
} model_layer;

/* Progress of one load (model_load draws it on stderr when asked and slow). */
typedef struct model_progress { bool on, drawn; double t0; uint64_t done, total; int last; } model_progress;

/* How PTQ1_0 matrices run: the load-time transcode to the 2-bit layout (KERN_PTQ1_0_TRANSCODE_DEFAULT
 * decides AUTO) or the direct base-3 kernel. */
enum { MODEL_PTQ1_0_AUTO = 0, MODEL_PTQ1_0_TRANSCODE = 1, MODEL_PTQ1_0_DIRECT = 2 };

struct model_ws;
struct model_batch;
struct model_arch;

/* The loaded model: read-only after tern_model_load (sessions never write to it), except the
 * pool, whose use is serialised by `eval_lock`. */
struct tern_model {
    gguf_ctx *g;                  /* owns the file bytes (weights live inside, repacked in place) */
    const struct model_arch *arch;
    model_hparams hp;
    kern_numerics numerics;
    int ptq1_0;                   /* MODEL_PTQ1_0_* */
    uint8_t *side;                /* the PTQ1_0 transcodes of the bound weights, one buffer (huge pages), or NULL */
    size_t side_cap, side_used;   /* its bytes; those handed out (64-byte aligned slices, model_bind_w) */
    uint64_t mem_given;           /* bytes the memory checks assume available; 0: ask the OS */
    uint64_t mem_model;           /* the file and side buffer bytes the load checked against it */
    model_progress prog;          /* during load only */
    uint8_t *t_used;              /* during load only: per file tensor, 1 once a bind has read it */
    tok_vocab *vocab;
    tern_pool *pool;
    pthread_mutex_t eval_lock;    /* one forward at a time per model (the pool is shared) */
    char name[96];                /* general.name */

    kern_w tok_embd;              /* [n_embd, n_vocab]: row lookups (kern_w_row_f32) */
    kern_w output;                /* [n_embd, n_vocab]: LM head (a copy of tok_embd's descriptor when tied) */
    bool tied_output;
    const float *output_norm;     /* (n_embd) */
    model_layer *layers;          /* n_layer */
    kern_w **all_w;               /* every kern_w that kern_w_init prepared (for kern_w_free) */
    int n_all_w, cap_all_w;
    void *arch_data;              /* arch-private (qwen35) */
    int n_layer_kv;               /* layers with a KV cache (default n_layer; the arch maps il) */
    uint64_t weight_bytes;        /* bytes of every tensor in memory */
    uint64_t bytes_per_token;     /* decode byte budget at position 0 (DESIGN.md) */
    int n_threads;
    double load_s;                /* wall time of the load */
};
typedef struct tern_model model_t;

/* One forward pass over n columns. Column c is token tok[c] at position pos[c] of the sequence
 * whose KV cache is kv[c]; columns of the same sequence must be consecutive positions in
 * increasing order (causal attention within the batch). Logits are written for the columns
 * with want_logits[c] (NULL: only the last column), packed in column order into `logits`
 * (n_logits * n_vocab floats). */
typedef struct model_batch {
    int n;
    const int32_t *tok;          /* (n) token ids, validated by the caller (< n_vocab) */
    const int32_t *pos;          /* (n) */
    kv_cache *const *kv;         /* (n) */
    void *const *state;          /* (n) per-sequence arch state (recurrent layers) or NULL */
    const bool *want_logits;     /* (n) or NULL */
    float *logits;               /* (n_logits, n_vocab) */
} model_batch;

/* Scratch for forwards of up to n_batch columns with contexts up to n_ctx (allocated once at
 * session creation; the forward allocates nothing). Sized by the arch's ws_bytes hook; the
 * generic part is laid out by model_ws_init. */
typedef struct model_ws {
    int n_batch, n_ctx;
    float *x;          /* (n_batch, n_embd) residual stream */
    float *xb;         /* (n_batch, n_embd) normed input of a projection */
    float *q;          /* (n_batch, n_head * n_embd_head_k) */
    float *k;          /* (n_batch, n_head_kv * n_embd_head_k) */
    float *v;          /* (n_batch, n_head_kv * n_embd_head_v) */
    float *att;        /* (n_batch, n_head * n_embd_head_v) attention output */
    float *hg;         /* (n_batch, n_ff) ffn_gate output, then silu(gate) * up */
    float *hu;         /* (n_batch, n_ff) ffn_up output */
    float *rope_cs;    /* (n_batch, n_rot) cos/sin pairs per column */
    float *scores;     /* (n_threads, BLK_ATTN_NQ * n_ctx) attention scratch per thread */
    uint16_t *qh;      /* (n_threads, max head dim) f16 query (ggml flash attention) */
    float *vacc;       /* (n_threads, 2 * max head dim) attention accumulators */
    void *aq;          /* quantised activation (largest of n_embd, n_ff, n_head*n_embd_head_v) */
    void *aq2;         /* a second one, same size: written while aq is read (blk_ffn_up) */
    float *lx;         /* (n_batch, n_embd) columns that want logits, gathered */
    int32_t *attn_tiles;   /* (n_batch * n_head, 4) query tiles of one layer's attention (blocks.c) */
    void *arch_ws;     /* arch-private scratch */
    void *mem;         /* one allocation holding all of the above (fresh pages: zero until written) */
    size_t mem_bytes;  /* its size */
} model_ws;

/* Architecture hooks. */
typedef struct model_arch {
    const char *name;                 /* general.architecture value */
    /* Read hyperparameters into m->hp and bind/validate every tensor (model_bind_*). */
    int (*load)(model_t *m, tern_err *err);
    /* Extra workspace bytes beyond the generic model_ws (0 if none). */
    size_t (*ws_extra_bytes)(const model_t *m, int n_batch, int n_ctx);
    /* The forward pass. Never fails on validated input (returns TERN_OK); allocates nothing. */
    int (*forward)(const model_t *m, model_ws *ws, const model_batch *b);
    void (*free)(model_t *m);         /* arch_data cleanup, may be NULL */
    /* Per-sequence recurrent state (NULL hooks for pure-attention archs): allocated at session
     * creation with room for n_ckpt checkpoints (whole-state copies), reset to empty,
     * checkpointed at the current position, restored to a restorable position (TERN_E_RANGE
     * otherwise; the caller holds eval_lock, so the restore may split its work across the
     * model's pool); state_restorable: the largest restorable position <= pos. */
    int (*state_init)(const model_t *m, void **state, int n_ctx, int n_ckpt, tern_err *err);
    /* Bytes state_init allocates for one sequence (memory checks; NULL with state_init NULL). */
    uint64_t (*state_bytes)(const model_t *m, int n_ctx, int n_ckpt);
    void (*state_free)(void *state);
    void (*state_reset)(void *state);
    int (*state_checkpoint)(void *state, int pos, tern_err *err);
    int (*state_truncate)(void *state, int pos, tern_err *err);
    int (*state_restorable)(const void *state, int pos);
} model_arch;

/* Arch table (arch.c): the arch named `name`, or NULL. */
const model_arch *model_arch_find(const char *name);
/* Comma-separated names of the supported architectures (static string). */
const char *model_arch_names(void);
/* The arch table itself: model_arch_count() entries, model_arch_at(i) for i in [0, count) (NULL
 * outside), in the order model_arch_names lists them. */
int model_arch_count(void);
const model_arch *model_arch_at(int i);

/* ---- loading (model.c) ------------------------------------------------------------------- */
typedef struct model_load_opts {
    int n_threads;            /* >= 1 */
    bool use_mmap;
    kern_numerics numerics;
    bool progress;
    uint64_t mem_available;   /* 0: ask the OS; else the bytes every memory check assumes available */
    int ptq1_0;               /* MODEL_PTQ1_0_* */
} model_load_opts;
/* Open, dispatch on general.architecture, read hparams, bind and prepare weights, load the
 * vocab, start the pool. Refuses when the file does not fit in MemAvailable (TERN_E_NOMEM). */
int model_load(model_t **out, const char *path, const model_load_opts *o, tern_err *err);
void model_free(model_t *m);
/* Memory still available to this process in bytes (0 when unknown: no check): the model's
 * mem_available option if set, else MemAvailable of /proc/meminfo lowered to the room under a
 * cgroup v2 memory.max. Checked before the weights (model_load) and before the KV cache and the
 * recurrent state (session init). m may be NULL (then the OS's figure). */
uint64_t model_mem_available(const model_t *m);

/* Helpers for the arch load hooks. Key names are formatted with the arch prefix:
 * model_key(m, buf, "attention.head_count") -> "qwen3.attention.head_count". */
const char *model_key(const model_t *m, char *buf, size_t n, const char *suffix);
/* Integer key <arch>.<suffix> into *out (int32 range checked; required or default). */
int model_get_i32(const model_t *m, const char *suffix, bool required, int32_t def, int32_t *out, tern_err *err);
int model_get_f32(const model_t *m, const char *suffix, bool required, float def, float *out, tern_err *err);
/* The tensor `name` must exist with n_dims <= 2, ne = [ne0, ne1] and type F32: returns its data.
 * Error names the tensor, expected and got. */
int model_bind_f32(model_t *m, const char *name, int64_t ne0, int64_t ne1, const float **out, tern_err *err);
/* A matrix weight [ne0, ne1] of a type the kernels take (ternary, F32, F16, BF16, Q8_0): prepared
 * with kern_w_init into *w and registered for kern_w_free. optional: absent -> *found false. */
int model_bind_w(model_t *m, const char *name, int64_t ne0, int64_t ne1, kern_w *w, bool optional,
                 bool *found, tern_err *err);
/* Common hparams of dense transformer archs (llama-style keys). */
int model_load_hparams_common(model_t *m, tern_err *err);
/* Binds token_embd, output_norm, output (or tied) and every dense layer's tensors; qk_norm: bind
 * attn_q_norm/attn_k_norm (qwen3). */
int model_bind_dense(model_t *m, bool qk_norm, tern_err *err);

/* ---- transformer pieces (blocks.c): the layers of llama.c and qwen3.c, and blk_attn of qwen35.c */
/* Embedding rows of every column into ws->x and RoPE angles into ws->rope_cs. */
void blk_embed(const model_t *m, model_ws *ws, const model_batch *b);
/* x += attn_output(attention(RoPE(norm_qk?(q, k)), v)) for layer il (KV layer ikv_layer), with
 * x normed by L->attn_norm; qk_norm: per-head RMSNorm of q and k before RoPE (qwen3). */
void blk_attn_layer(const model_t *m, model_ws *ws, const model_batch *b, const model_layer *L, int il_kv,
                    bool qk_norm);
/* The attention of layer L on projected q (ws->q, (n, Hq hd_k)), k and v (ws->k, ws->v, (n, Hkv
 * hd)): per-head RMSNorm of q and k when qk_norm, RoPE, k and v stored at each column's position
 * of its KV cache (layer il_kv), then ws->att (n, Hq hd_v) = softmax(q . K^T * f_attn_scale) . V
 * over the column's own cache up to its position. Under 16 columns (decode, verification) it runs
 * as one job over KV heads, which also quantises att into ws->aq when quantise is set and each KV
 * head's outputs are whole activation blocks: returns whether it did. */
bool blk_attn(const model_t *m, model_ws *ws, const model_batch *b, const model_layer *L, int il_kv, bool qk_norm,
              bool quantise);
/* x += ffn_down(silu(ffn_gate(h)) * ffn_up(h)), h = RMSNorm(x, ffn_norm). */
void blk_ffn_layer(const model_t *m, model_ws *ws, int n, const model_layer *L);
/* Logits of the wanted columns: output(RMSNorm(x, output_norm)) -> b->logits. */
void blk_logits(const model_t *m, model_ws *ws, const model_batch *b);

/* ---- workspace (model.c) ---------------------------------------------------------------- */
int model_ws_init(model_ws *ws, const model_t *m, int n_batch, int n_ctx, tern_err *err);
void model_ws_free(model_ws *ws);

#endif /* TERN_MODEL_MODEL_H */
