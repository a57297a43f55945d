/* tern.h: the public API of tern, a C11 inference engine for ternary LLMs in GGUF.
 *
 * Conventions (stated once): row-major; a weight W has GGUF shape ne = [n_in, n_out], so
 * y[o] = dot(W[o, :], x). Every function returns TERN_OK (0) or a negative TERN_E_* code and,
 * when given a tern_err, fills it with a message naming what, where, expected and got. A
 * tern_err keeps the first error set into it (the innermost cause), so give each call a cleared
 * one ({0}, or tern_err_clear) unless the earlier error is what you want to keep.
 * The library never exits, never prints to stdout and never aborts on bad input.
 * Memory: objects returned through an out-pointer are owned by the caller and released with
 * the matching *_free(); *_free(NULL) is always safe. */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_VERSION "0.1.0"

enum {
    TERN_OK = 0,
    TERN_E_IO = -1,          /* open/read/write/mmap failed */
    TERN_E_FORMAT = -2,      /* malformed input file or data */
    TERN_E_UNSUPPORTED = -3, /* well-formed but not supported (type, architecture, transform) */
    TERN_E_NOMEM = -4,       /* allocation failed, or the request does not fit in memory */
    TERN_E_ARG = -5,         /* invalid argument from the caller */
    TERN_E_RANGE = -6,       /* value out of range (token id, position, context full) */
};

/* Error report. code: TERN_OK or a TERN_E_*; msg: NUL-terminated text, owned by the caller; cut to
 * fit. 1024 bytes hold a message that quotes a long path (a model several directories deep in a
 * Hugging Face cache) with its reason after it. */
typedef struct tern_err {
    int code;
    char msg[1024];
} tern_err;

/* Name of an error code ("TERN_E_FORMAT"); static string. */
const char *tern_strerror(int code);
/* Fill *err (if not NULL) with code and a printf-style message; returns code. The first error
 * wins: if err->code is already negative it is left unchanged. For programs that report their own
 * errors in the library's style. */
int tern_err_set(tern_err *err, int code, const char *fmt, ...)
#if defined(__MINGW32__) && defined(__GNUC__)
    __attribute__((format(gnu_printf, 3, 4)))   /* the library formats with mingw-w64's C99 printf */
#elif defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Reset *err (if not NULL) to TERN_OK and an empty message. */
void tern_err_clear(tern_err *err);
/* Monotonic time in seconds (CLOCK_MONOTONIC). */
double tern_time_s(void);

/* ==== Model ====================================================================================
 * A model is read-only after load and shared by any number of sessions (thread-safe to share:
 * sessions never write to it). Architectures: llama, qwen3, qwen35 (see docs/ARCHITECTURE.md). */
typedef struct tern_model tern_model;

typedef enum {
    TERN_NUMERICS_FAST = 0, /* tern's int8 activation blocks (default) */
    TERN_NUMERICS_GGML = 1, /* Q8_0 activations rounded as the reference runtime's x86 build */
    TERN_NUMERICS_F32 = 2,  /* dequantised weights, f32 activations, f32 KV (the reference math) */
} tern_numerics;

/* How PTQ1_0 (1.75-bit) matrices run: TRANSCODE to the 2-bit layout (faster where decode
 * streams at the bus: a side buffer of 34/28 of those matrices' bytes, the file pages it replaces
 * released); DIRECT runs the base-3 bytes (regrouped in place on x86; no side buffer). AUTO is the
 * transcode when file and side buffer fit in the memory available, else direct. Both give the
 * same bits. */
typedef enum {
    TERN_PTQ1_0_AUTO = 0,
    TERN_PTQ1_0_TRANSCODE = 1,
    TERN_PTQ1_0_DIRECT = 2,
} tern_ptq1_0_mode;

typedef struct tern_model_opts {
    int n_threads;          /* worker threads incl. the caller, 1..1024; 0 = the CPUs this process may run on */
    bool use_mmap;          /* false (default): read() into anonymous memory; true: private mapping */
    tern_numerics numerics;
    bool progress;          /* draw a progress bar on stderr when loading takes more than a moment */
    uint64_t mem_available; /* 0 (default): memory checks use what the OS reports (MemAvailable, a
                               cgroup v2 limit); else they assume this many bytes are available */
    tern_ptq1_0_mode ptq1_0;
} tern_model_opts;

/* Fill o with the defaults (n_threads 0, read(), fast numerics, no progress bar, the OS's
 * memory figure, PTQ1_0 auto). */
void tern_model_opts_default(tern_model_opts *o);
/* Choose the kernel path for the whole process by name ("ref", "avx2", "avxvnni", "avx512vnni", "amx",
 * "neon", "dotprod", "i8mm"; NULL or "" the automatic choice, also after an earlier name: the fastest path
 * this CPU runs).
 * Call it before loading any model: weights are laid out at load for the path then active.
 * Errors (nothing changes): TERN_E_ARG for a name that is none of these; TERN_E_UNSUPPORTED when
 * the path is not compiled in, this CPU cannot run it, or it disagrees with the scalar reference
 * on this CPU. */
int tern_set_isa(const char *name, tern_err *err);
/* Load a GGUF model: validates every tensor's shape and type (error names the tensor, expected,
 * got), repacks ternary weights in place, checks the weights fit in available memory.
 * Errors: TERN_E_IO, TERN_E_FORMAT, TERN_E_UNSUPPORTED, TERN_E_NOMEM, TERN_E_ARG. */
int tern_model_load(tern_model **out, const char *path, const tern_model_opts *opts, tern_err *err);
void tern_model_free(tern_model *m);

typedef struct tern_model_info {
    const char *arch;       /* "llama", "qwen3", "qwen35" (static or owned by the model) */
    const char *name;       /* general.name or "" */
    int32_t n_vocab;        /* logits per position */
    int32_t n_ctx_train;
    int32_t n_embd, n_layer, n_head, n_head_kv;
    int32_t bos, eos;       /* -1 if none */
    bool add_bos;           /* the vocab asks for BOS at the start of a sequence */
    uint64_t weight_bytes;  /* in-memory weight bytes */
    uint64_t bytes_per_token; /* decode byte budget (DESIGN.md) at position 0 */
    const char *isa;        /* kernel path in use ("avx512vnni", ...) */
    int n_threads;
    bool has_chat_template; /* the file has tokenizer.chat_template (without one, chat uses ChatML) */
} tern_model_info;
void tern_model_get_info(const tern_model *m, tern_model_info *info);
/* The string value of GGUF metadata `key` ("tokenizer.chat_template", "general.name", ...) into buf
 * (cap bytes, NUL-terminated, cut to fit when cap is too small; buf may be NULL with cap 0).
 * Returns its whole length in bytes, TERN_E_RANGE when the key is absent or not a string, or
 * TERN_E_ARG for a NULL model or key, or a NULL buf with cap > 0. */
int tern_model_meta_str(const tern_model *m, const char *key, char *buf, size_t cap);

/* Measure memory read bandwidth in GB/s (1e9 bytes/s): n_threads threads (0 = the CPUs this process may run on) read
 * disjoint slices of a `bytes` buffer (allocated and freed here), best of reps. The decode
 * ceiling of `tern bench` is bytes_per_token / this. Errors: TERN_E_ARG, TERN_E_NOMEM. */
int tern_membw(int n_threads, size_t bytes, int reps, double *gbs, tern_err *err);
/* The same probe, writing each of the reps timed passes (GB/s, in run order) into passes[0..reps):
 * the spread says how steady the machine was while the ceiling was measured. */
int tern_membw_passes(int n_threads, size_t bytes, int reps, double *passes, tern_err *err);

/* Per-op time profile of forward passes, for benchmarks (process-wide counters; forwards of one
 * model are serialised). tern_profile_enable(true) resets and starts, (false) stops. Fields are
 * wall seconds summed over forwards: embed (lookup + RoPE angles), norm (QK-norm, RoPE, KV
 * store, residual adds; RMSNorms not fused below), quant (activation quantisation, fused with the
 * RMSNorm or SwiGLU that feeds it in the dense archs), matmul (projections incl. the LM head,
 * wall), attn (attention over the KV cache), swiglu (unfused SwiGLU), recur (qwen35's conv + delta rule
 * + gated norm); matmul_busy_s = thread-seconds inside the kernels (matmul_s * threads -
 * matmul_busy_s = barrier wait + imbalance). In qwen35, quant also holds the Hadamard rotation
 * fused with it, and norm the residual adds. */
typedef struct tern_profile {
    double total_s, embed_s, norm_s, quant_s, matmul_s, matmul_busy_s, attn_s, swiglu_s, recur_s;
    long n_forward;
} tern_profile;
void tern_profile_enable(bool on);
void tern_profile_get(tern_profile *p);

/* ==== Tokens ===================================================================================*/
/* Encode text (len bytes, any bytes accepted). add_bos: prepend BOS if the vocab has one.
 * parse_special: control-token text becomes control tokens (templates) - off for user text.
 * Writes up to n_max ids to out; *n_out = total needed; TERN_E_RANGE if n_max was too small. */
int tern_tokenize(const tern_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                  int32_t *out, int n_max, int *n_out, tern_err *err);
/* Bytes of one token (special: include control-token text). Returns bytes written, the size
 * needed if cap is too small (buf NULL with cap 0 asks only the size), TERN_E_RANGE for an id
 * outside the vocabulary, TERN_E_ARG for a NULL model or a NULL buf with cap > 0. */
int tern_token_piece(const tern_model *m, int32_t id, bool special, char *buf, int cap);
bool tern_token_is_eog(const tern_model *m, int32_t id);

/* Streaming detokeniser: never emits an incomplete or invalid UTF-8 sequence (held back until
 * complete; invalid bytes become U+FFFD). Owned by the caller; it allocates only a temporary copy
 * of a piece longer than 256 bytes. SentencePiece vocabularies with a space prefix: a stream
 * whose first id is BOS drops the leading space of the first piece after it (the text of a whole
 * sequence, as llama.cpp's detokenize); a stream that starts with any other id - generation after
 * a prompt - keeps every space, so prompt text + streamed text = the detokenised whole sequence.
 * Fields are private. */
typedef struct tern_detok { char pend[8]; int n_pend; int n_out; } tern_detok;
void tern_detok_init(tern_detok *d);
/* Append the text of id to out (cap bytes); returns bytes written or a TERN_E_* (TERN_E_ARG for
 * a NULL model or stream, a stream not made by tern_detok_init and these calls, a NULL out with
 * cap > 0, or a cap under the text's bytes; TERN_E_RANGE for an id outside the vocabulary;
 * TERN_E_NOMEM when a piece over 256 bytes finds no memory for its copy). The text is at most
 * 3 x (n + h) bytes: n the piece's bytes (tern_token_piece, special false), h the bytes held from
 * earlier pieces (at most 3), each byte of an invalid sequence becoming a 3-byte U+FFFD; so a cap
 * of 3 x (n + 3) always fits. On an error nothing is written and the stream is unchanged. */
int tern_detok_put(const tern_model *m, tern_detok *d, int32_t id, char *out, int cap);
/* Write the held bytes (an incomplete sequence becomes one U+FFFD): at most 3 bytes; returns
 * bytes written, or TERN_E_ARG for a NULL or invalid stream (as tern_detok_put), a NULL out with
 * cap > 0 or, when bytes are held, a cap under 3. */
int tern_detok_flush(tern_detok *d, char *out, int cap);

/* ==== Session ==================================================================================
 * A session is one sequence: KV cache + recurrent state + scratch, all allocated at creation
 * (the token loop allocates nothing). Use from one thread at a time. */
typedef struct tern_session tern_session;

typedef struct tern_session_opts {
    int n_ctx;              /* context length in tokens; 0 (the default) = 4096, or the model's trained length
                             * (n_ctx_train) when that is shorter: never more than 4096 by default; < 0 or
                             * > 2^24: TERN_E_ARG */
    int n_batch;            /* max tokens per forward pass (prefill chunk); 0 = 512; clamped to n_ctx; < 0, or
                             * > 65536 after the clamp: TERN_E_ARG */
    bool kv_f32;            /* f32 KV cache (default f16; f32 numerics always use f32) */
    int n_checkpoints;      /* recurrent models (qwen35): room for this many whole-state copies that
                               tern_session_checkpoint takes (default 0; 0..64), so positions inside
                               an evaluated prompt stay restorable (prefix reuse); attention-only
                               models need none: every position is restorable */
} tern_session_opts;
void tern_session_opts_default(tern_session_opts *o);
/* Errors: TERN_E_NOMEM (KV does not fit: the message says how much is needed and available),
 * TERN_E_ARG. */
int tern_session_init(tern_session **out, tern_model *m, const tern_session_opts *o, tern_err *err);
void tern_session_free(tern_session *s);
/* The memory one session with options o (NULL: defaults) allocates for its caches, as
 * tern_session_init sizes it (src/engine.c): *kv_bytes the KV cache (f16 per value, f32 with kv_f32
 * or f32 numerics; 2 x n_layer_kv x n_ctx x n_head_kv x head size), *state_bytes the recurrent
 * state of a hybrid model (qwen35: state and conv, their rollback copy and the token log; 0 for
 * attention-only models), and *avail the memory available to the process now (bytes; 0 when
 * unknown: the model's tern_model_opts.mem_available less the model's own file and side buffer
 * bytes when set, else MemAvailable within a cgroup limit). tern_session_init checks one session against avail; a program creating N sessions at
 * once (tern serve's -np slots) checks N x (kv + state) up front, before any allocates. Any
 * pointer may be NULL. */
void tern_session_mem(const tern_model *m, const tern_session_opts *o, uint64_t *kv_bytes, uint64_t *state_bytes,
                      uint64_t *avail);
int tern_session_n_ctx(const tern_session *s);
/* Most tokens per forward pass (n_batch after clamping to n_ctx). */
int tern_session_n_batch(const tern_session *s);
/* Number of tokens in the sequence so far (the position of the next token). */
int tern_session_pos(const tern_session *s);
/* The model s was created for (NULL for a NULL s). */
const tern_model *tern_session_model(const tern_session *s);

/* Append n tokens (in chunks of n_batch through the batched path) and return the logits of the
 * last one (n_vocab floats, owned by the session, valid until the next call), or NULL with err
 * set: TERN_E_RANGE (bad token id, or pos + n > n_ctx: nothing is appended), TERN_E_ARG. */
const float *tern_session_eval(tern_session *s, const int32_t *tok, int n, tern_err *err);
/* Same, writing the logits of every position to logits[i * n_vocab] (caller buffer, n * n_vocab). */
int tern_session_eval_all(tern_session *s, const int32_t *tok, int n, float *logits, tern_err *err);
/* Batched serving: append ONE token to each of n distinct sessions of the same model in a single
 * forward pass (every weight streamed once for all of them) and write the logits of session i to
 * logits[i * n_vocab] (caller buffer; each session's own last logits are updated too). Column i
 * is bit-identical to tern_session_eval(sessions[i], &tok[i], 1). Scratch is sessions[0]'s:
 * n <= its n_batch, and every session's next position < sessions[0]'s n_ctx. Errors:
 * TERN_E_ARG (n, NULL, different models, a session twice, scratch too small),
 * TERN_E_RANGE (bad token id, a full context: nothing is appended). Recurrent architectures
 * (qwen35): each column updates its own session's conv and recurrent state, and the token stays
 * inside that session's rollback window like a single-token eval. */
int tern_batch_eval(tern_session *const *sessions, const int32_t *tok, int n, float *logits, tern_err *err);
/* Mixed batch (chunked prefill inside a decode step, as vLLM schedules it): session i appends
 * n_tok[i] >= 1 tokens in the same single forward pass; tok holds them packed in session order
 * (session i's at tok[n_tok[0] + ... + n_tok[i-1]], n_tok NULL: one token each, which is
 * tern_batch_eval). Writes the logits of each session's LAST token to logits[i * n_vocab]
 * (caller buffer, n_seq * n_vocab; each session's own last logits too). Every column computes
 * exactly what the same tokens give through tern_session_eval (a decode column bit-identical to
 * a one-token eval, a chunk's columns to that chunk evaluated alone: the kernels' per-column
 * results do not depend on the other columns; attention reads each column's own KV; recurrent
 * state per session, a run of 17+ tokens with the chunked delta rule as a prefill of that size).
 * The total column count must be <= sessions[0]'s n_batch and each session's end position <=
 * sessions[0]'s n_ctx (its scratch). Errors as tern_batch_eval (TERN_E_RANGE: also
 * pos + n_tok[i] > n_ctx; nothing is appended on any error). */
int tern_batch_eval_seqs(tern_session *const *sessions, const int32_t *tok, const int *n_tok, int n_seq, float *logits,
                         tern_err *err);
/* How a sequence's tokens may be split across forward passes (prefill chunks, mixed passes)
 * without changing any result. *block = 0: any split is bit-identical (attention-only models:
 * every column's math is independent of how the tokens are grouped). Recurrent models (qwen35):
 * a pass holding n >= *run_min tokens of one sequence runs the chunked delta rule in blocks of
 * *block tokens from the run's first token (the last block shorter), a pass with fewer goes token
 * by token (each bit-identical to a one-token eval); so two splits of a span agree when the span is
 * evaluated token by token in both (every run < *run_min), or when the block boundaries and the
 * final partial block coincide (runs >= *run_min, starting on the same block boundaries). The
 * server uses it to cut its chunks so that a request equals running it alone. */
void tern_model_split_rule(const tern_model *m, int *block, int *run_min);   /* block, run_min: may be NULL */
/* Forget every token from position pos on (pos <= current). Attention KV is truncated; for
 * recurrent layers the state must be restorable at pos (a snapshot or a checkpoint within the
 * rollback window), else TERN_E_RANGE. pos 0 always works (fresh state).
 * Speculative verification on qwen35: evaluate up to 16 tokens with tern_session_eval_all (one
 * call, or several consecutive ones; each position's logits are bit-identical to single-token
 * decode in fast and f32 numerics; ggml numerics mirrors the reference runtime, whose BF16
 * gate projections take another order for multi-token batches), then truncate to any position
 * inside them: the conv and recurrent state are exactly
 * those after the last kept token. Batches of 17+ tokens (prefill) are computed with the chunked
 * delta rule and cannot be truncated into. Restoring recurrent state runs on the model's
 * threads, so it waits for a forward of another session of the same model to end. */
int tern_session_truncate(tern_session *s, int pos, tern_err *err);
/* Mark the current position as a rollback point for recurrent state: positions within the
 * rollback window are restorable anyway; with n_checkpoints room, a copy of the whole state is
 * also taken (the oldest copy is replaced), so this position stays restorable after later
 * batches. */
int tern_session_checkpoint(tern_session *s, tern_err *err);
/* The largest position <= pos that tern_session_truncate can restore (pos itself for
 * attention-only models; 0 at least). */
int tern_session_restorable(const tern_session *s, int pos);
/* Reset to an empty sequence. */
void tern_session_reset(tern_session *s);

/* ==== Sampling =================================================================================
 * llama.cpp's order: logit bias -> repetition penalty -> top-k -> top-p -> min-p -> temperature
 * -> draw, after the mask when one is set (tern_sampler_set_mask). temp <= 0, or so small that
 * 1 / temp overflows (under ~2.9e-39): greedy (argmax, ties to the lowest id). Disabled stages
 * cost nothing. */
typedef struct tern_sampler_params {
    float temp;             /* 0.8 default; 0 = greedy */
    int32_t top_k;          /* 40; <= 0 disables */
    float top_p;            /* 0.95; >= 1 disables */
    float min_p;            /* 0.05; <= 0 disables */
    float repeat_penalty;   /* 1.0 = off */
    int32_t repeat_last_n;  /* 64 */
    uint64_t seed;          /* same seed + same logits -> same tokens; TERN_SEED_RANDOM (default):
                               drawn from the OS at init, read it back with tern_sampler_seed */
} tern_sampler_params;
#define TERN_SEED_RANDOM UINT64_MAX
/* Defaults as llama.cpp: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0 (off),
 * repeat_last_n 64, seed TERN_SEED_RANDOM. */
void tern_sampler_params_default(tern_sampler_params *p);
typedef struct tern_sampler tern_sampler;
/* Create a sampler for m's vocabulary (n_vocab from tern_model_get_info). Valid parameters:
 * temp, top_p finite (NaN/inf rejected), top_k any (<= 0 off), min_p in [0, 1],
 * repeat_penalty finite > 0, repeat_last_n >= 0 (0 = off; programs map llama.cpp's -1 to n_ctx).
 * Allocates O(n_vocab + repeat_last_n) once; sampling allocates nothing.
 * Errors: TERN_E_ARG (bad parameter, NULL model), TERN_E_NOMEM. */
int tern_sampler_init(tern_sampler **out, const tern_model *m, const tern_sampler_params *p, tern_err *err);
/* Same without a model: for a vocabulary of n_vocab ids (> 0). */
int tern_sampler_init_vocab(tern_sampler **out, int32_t n_vocab, const tern_sampler_params *p, tern_err *err);
void tern_sampler_free(tern_sampler *s);
/* Choose the next token from logits (n_vocab floats, not modified; NaN counts as -inf). Does not
 * record it: call tern_sampler_accept with the token actually appended. Returns an id in
 * [0, n_vocab). Cost: O(n_vocab) copy + O(k log k) for top-k; top-p without top-k sorts only
 * the candidates it needs (partial selection); min-p and temperature are linear. */
int32_t tern_sampler_sample(tern_sampler *s, const float *logits);   /* -1 for a NULL s or logits */
/* The vocabulary size s was created for (0 for a NULL s). */
int32_t tern_sampler_n_vocab(const tern_sampler *s);
/* A constraint on what may be drawn: mask(user, logits, n_vocab) gets a copy of each call's logits
 * and sets -INFINITY on the tokens that must not be drawn (constrained output, e.g. JSON); it
 * runs on the thread that samples and must leave at least one token finite. NULL removes it.
 * Allocates n_vocab floats once. Errors: TERN_E_ARG, TERN_E_NOMEM. */
typedef void (*tern_sampler_mask)(void *user, float *logits, int32_t n_vocab);
int tern_sampler_set_mask(tern_sampler *s, tern_sampler_mask mask, void *user, tern_err *err);
/* Add bias[i] to the logit of token ids[i] before every draw (OpenAI's and llama.cpp's
 * logit_bias), first in the chain: before the repetition penalty, top-k, top-p, min-p and the
 * temperature. -INFINITY bans the token; a repeated id adds each bias. The arrays are copied;
 * n 0 removes the biases. With every token banned a draw still returns an id of the vocabulary.
 * Errors: TERN_E_ARG (an id outside 0..n_vocab-1, a NaN or +inf bias), TERN_E_NOMEM. */
int tern_sampler_set_logit_bias(tern_sampler *s, const int32_t *ids, const float *bias, int n, tern_err *err);
/* Record an accepted token (repetition-penalty history of the last repeat_last_n); ids outside
 * the vocabulary are ignored. */
void tern_sampler_accept(tern_sampler *s, int32_t tok);
/* Forget the history and restart the random stream from the seed. */
void tern_sampler_reset(tern_sampler *s);
/* The seed in use (the drawn one when the params said TERN_SEED_RANDOM). */
uint64_t tern_sampler_seed(const tern_sampler *s);

/* ==== Chat templates ===========================================================================*/
typedef struct tern_chat_msg {
    const char *role;       /* "system", "user", "assistant", "tool" (any other, or NULL: TERN_E_ARG) */
    const char *content;    /* NUL-terminated UTF-8, "" for none (NULL: TERN_E_ARG) */
} tern_chat_msg;
/* Render msgs with the model's template (tokenizer.chat_template, detected as a known family) or
 * the named one (tmpl: "chatml", "qwen3", "qwen35"; NULL = the model's, ChatML if it has none).
 * enable_thinking false pre-fills the empty think block where the template does so.
 * Writes a NUL-terminated string to out (cap bytes); *n_out = bytes needed without the NUL;
 * TERN_E_RANGE if cap is too small, TERN_E_UNSUPPORTED for an unknown template. */
int tern_chat_apply(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs,
                    bool add_generation_prompt, bool enable_thinking, char *out, size_t cap,
                    size_t *n_out, tern_err *err);
/* Render msgs as tern_chat_apply does and tokenise the result in one step, the way a chat
 * program should feed the model: special-token text (<|im_start|>, <|im_end|>, <think>) is parsed
 * only in the template's scaffolding; message contents (and roles) are tokenised as plain text,
 * so a user who types "<|im_end|>" gets ordinary text tokens, never the control token.
 * add_bos: prepend BOS if the vocab asks for it (as tern_tokenize; Qwen vocabs never do).
 * Writes up to n_max ids to out (out may be NULL when n_max is 0); *n_out = the number of ids
 * of the whole prompt; TERN_E_RANGE if n_max was too small (call again with *n_out).
 * Memory: the caller's buffer; temporary text and ids are freed before returning.
 * Errors: TERN_E_ARG (NULL model/msgs/n_out, n_max < 0, unknown or NULL role, a misplaced system
 * turn (qwen35), no user turn (qwen35)), TERN_E_UNSUPPORTED (unknown template name or an
 * unrecognised tokenizer.chat_template), TERN_E_RANGE, TERN_E_NOMEM.
 * Source: the templates of src/tokenizer/chat.h (byte-equal to the reference Jinja renderings)
 * and llama.cpp's tokenisation with parse_special; for a chat without special text in its
 * contents the ids equal tern_tokenize(tern_chat_apply(...), parse_special = true), which
 * golden/qwen3-tiny-pq2_0/prompts.json p5 records from the reference fork. */
int tern_chat_tokenize(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs,
                       bool add_generation_prompt, bool enable_thinking, bool add_bos, int32_t *out, int n_max,
                       int *n_out, tern_err *err);
/* tern_chat_tokenize where scaffold[i] (scaffold may be NULL: none) marks message i's content as
 * template text the caller rendered itself (a server's tools section): control-token text is
 * parsed in it as in the scaffolding. Every other content is tokenised as plain text. */
int tern_chat_tokenize_ex(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, const bool *scaffold,
                          int n_msgs, bool add_generation_prompt, bool enable_thinking, bool add_bos, int32_t *out,
                          int n_max, int *n_out, tern_err *err);

/* The tools section that the named template ("qwen3" or "qwen35", and the other names
 * tern_chat_apply takes for them) puts in its system turn for tools_json, a JSON array of tool
 * definitions: the same bytes, without the turn around it, for a caller that builds the system
 * turn itself (tern serve). Writes a NUL-terminated string to out (cap bytes); *n_out = bytes
 * needed without the NUL. Errors: TERN_E_ARG (NULL tmpl or n_out, out NULL with cap > 0,
 * tools_json not an array), TERN_E_UNSUPPORTED (an unknown name, or chatml: no tools section),
 * TERN_E_RANGE (cap too small: call again with *n_out + 1), TERN_E_NOMEM. */
int tern_chat_tools_section(const char *tmpl, const char *tools_json, char *out, size_t cap, size_t *n_out,
                            tern_err *err);

/* ==== Speculative decoding (prompt lookup) =====================================================
 * Draft-and-verify decoding with an n-gram prompt-lookup drafter, for generation whose answer
 * repeats its context (code edits, summaries, RAG). Each step evaluates [last, d1..dk] - the last
 * sampled token and k drafted ones - in ONE tern_session_eval_all call (every weight streamed once
 * for the k+1 columns; each column is bit-identical to a single-token decode step), accepts the
 * longest prefix of the draft that the target agrees with, appends the target's own token, and
 * truncates the session to the accepted position (KV cache and recurrent state exact: the state
 * after a step equals the state of a sequence that never saw the rejected drafts).
 *
 * Acceptance rule (Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via
 * Speculative Decoding", Algorithm 1; Chen et al. 2023, "Accelerating Large Language Model
 * Decoding with Speculative Sampling", Theorem 1), specialised to a deterministic draft
 * (q = point mass on the drafted token x): with p the sampler's final distribution at that
 * position (repetition penalty, top-k, top-p, min-p and temperature applied, given the tokens
 * accepted before it), x is accepted with probability p(x); on rejection the step's token is drawn
 * from p with x removed and renormalised (= norm(max(0, p - q))). After k acceptances one more
 * token is drawn from p at the last position. The output distribution is exactly the sampler's,
 * token by token. Greedy (temp <= 0): p is a point mass on the argmax, so the tokens are identical
 * to plain greedy decoding (tern_sampler_sample + tern_session_eval one token at a time), by
 * construction. With temp > 0 the tokens differ from a plain run with the same seed (the random
 * stream is consumed differently) but follow the same distribution.
 *
 * Protocol (what plain decoding does, in steps): evaluate the prompt, tell the drafter its tokens
 * (tern_spec_add), sample the first token `last` as usual (tern_sampler_sample +
 * tern_sampler_accept), then while generating: tern_spec_step(sp, s, smp, last, ...) returns
 * n >= 1 new tokens out[0..n); out[n-1] is the new `last` (sampled, NOT yet in the session, like
 * the token plain decoding holds between sample and eval). The step calls tern_sampler_accept for
 * each token it returns (the caller must not). Stop conditions match plain decoding exactly: the
 * step ends at an end-of-generation token (unless ignore_eos), never returns more than n_max
 * tokens, never writes past n_ctx; before each step the caller stops if the last token is EOG,
 * if it has enough tokens, or if tern_session_pos(s) == n_ctx (context full: `last` cannot be
 * evaluated).
 *
 * Drafter: the longest n-gram (ngram_max down to ngram_min) ending at `last` that occurred
 * earlier in the history (prompt + generated), most recent occurrence; the draft is the tokens
 * that followed it (continuing through the draft itself when the match is periodic). Lookup is a
 * hash of every n-gram of the history, updated incrementally (O(ngram_max^2) per token, not
 * O(context)). Adaptive length: after a step that accepts all k drafted tokens the next draft may
 * be twice as long (up to draft_max); after a rejection at draft position a+1 it is at most a+1.
 * No match: k = 0, a plain one-token decode step (no extra forward work).
 * Recurrent models (qwen35): each verification is one small batch (k + 1 <= TERN_SPEC_DRAFT_LIMIT
 * + 1 < 16 tokens) that the recurrent state logs, so the rollback is exact. A draft is also cut
 * to the session's n_batch - 1 (one forward per verification). */
#define TERN_SPEC_DRAFT_LIMIT 14

typedef struct tern_spec_params {
    int draft_max;          /* most tokens drafted per step, 1..TERN_SPEC_DRAFT_LIMIT (default 3: a
                               verification of 4 columns is one column tile of the matmul kernels,
                               5 columns cost a second tile; raise it for text that repeats much) */
    int ngram_min;          /* shortest n-gram matched, >= 1 (default 2) */
    int ngram_max;          /* longest n-gram matched, ngram_min..16 (default 4) */
    bool adaptive;          /* adapt the draft length to acceptance (default true) */
    bool ignore_eos;        /* do not stop at end-of-generation tokens (default false) */
} tern_spec_params;
void tern_spec_params_default(tern_spec_params *p);

/* Counters since init or tern_spec_reset_stats. acceptance = n_accepted / n_drafted. */
typedef struct tern_spec_stats {
    int64_t n_steps;        /* verification forwards (tern_spec_step / tern_spec_verify calls that ran) */
    int64_t n_drafted;      /* drafted tokens verified */
    int64_t n_accepted;     /* of them, accepted */
    int64_t n_tokens;       /* tokens returned (accepted + the target's own) */
} tern_spec_stats;

typedef struct tern_spec tern_spec;
/* Create a drafter for m (used for n_vocab and end-of-generation ids; not owned, must outlive
 * it). Allocates the verification logits ((draft_max + 1) x n_vocab floats) and the sampler's
 * candidate buffers once; the history index grows with the history (amortised doubling).
 * Errors: TERN_E_ARG (NULL, bad parameter: the message names it), TERN_E_NOMEM. */
int tern_spec_init(tern_spec **out, const tern_model *m, const tern_spec_params *p, tern_err *err);
void tern_spec_free(tern_spec *sp);
/* Forget the history (a new sequence: call with tern_session_reset / truncate to 0); keeps the
 * stats and the adaptive length. */
void tern_spec_reset(tern_spec *sp);
void tern_spec_get_stats(const tern_spec *sp, tern_spec_stats *st);
void tern_spec_reset_stats(tern_spec *sp);
/* Append n tokens that were evaluated into the session outside tern_spec_step (the prompt, a
 * new chat turn). The history must always equal the session's tokens when a step starts (a step
 * compares the lengths; other tokens of the same length only draft worse: the output stays the
 * sampler's). Errors: TERN_E_ARG (an id outside the vocabulary, named), TERN_E_NOMEM. */
int tern_spec_add(tern_spec *sp, const int32_t *tok, int n, tern_err *err);
/* History length (== tern_session_pos of the session in use between steps). */
int tern_spec_n_history(const tern_spec *sp);

/* One speculative step (see above). last: the sampled token not yet evaluated; n_max >= 1: most
 * tokens to return (out has room for n_max). Writes out[0..*n_out), 1 <= *n_out <= n_max, each
 * already passed to tern_sampler_accept. On return the session holds the history plus `last`
 * and out[0..*n_out - 1) (the new last is out[*n_out - 1]).
 * Errors (the session, sampler and history are unchanged): TERN_E_ARG (NULL, n_max < 1, the
 * history is not the session's tokens), TERN_E_RANGE (bad token id, the
 * session is full: pos == n_ctx); a forward or truncation failure returns its code (the session
 * must then be reset). */
int tern_spec_step(tern_spec *sp, tern_session *s, tern_sampler *smp, int32_t last, int n_max, int32_t *out,
                   int *n_out, tern_err *err);
/* Same with a caller-given draft (n_draft >= 0 tokens, at most draft_max; cut to n_max - 1 and to
 * the context) instead of the lookup: for other drafters, tests and benchmarks. Does not change
 * the adaptive length. */
int tern_spec_verify(tern_spec *sp, tern_session *s, tern_sampler *smp, int32_t last, const int32_t *draft,
                     int n_draft, int n_max, int32_t *out, int *n_out, tern_err *err);

/* ==== Generation ===============================================================================
 * The loop every program runs after a prompt (tern run, tern chat, tern bench-spec, the server's
 * scheduler): sample a token, apply the stop rules, detokenise, append it to the session, repeat;
 * plainly (one tern_session_eval per token) or speculatively (tern_spec_step, when a tern_spec is
 * given). A tern_gen holds one reply's state (detokeniser, think-block state, the token to append,
 * counters, times); it allocates nothing after tern_gen_init.
 *
 * Stop rules, for each sampled token t in order:
 *   0. (before sampling) the logits hold a NaN or an Inf: TERN_STOP_LOGITS, nothing is sampled
 *      from them (damaged weights make every later token meaningless; the stats name the
 *      position). Plain steps and a reply's first token are checked;
 *   1. t is an end-of-generation token (tern_token_is_eog) and ignore_eos is off: TERN_STOP_EOG
 *      (t is counted and reported with eog set, has no text, and is not appended);
 *   2. t's text goes to on_token; a non-zero return stops: TERN_STOP_CALLER (a stop string, an
 *      interrupt);
 *   3. n_predict tokens sampled: TERN_STOP_LENGTH;
 *   4. the session is full, so t cannot be appended: TERN_STOP_CTX.
 * Otherwise t is pending: the next step appends it. Every sampled token is passed to
 * tern_sampler_accept (a speculative step does that itself), as are the prompt's tokens.
 *
 * Use: tern_gen_begin, then either tern_gen_prompt (evaluates the prompt) + tern_gen_run (the
 * whole loop, ends the reply), or, to batch several sequences' forwards (the server), the steps:
 * tern_gen_sample on logits the caller computed, appending tern_gen_pending itself, or
 * tern_gen_step (appends it here: plain or speculative), and tern_gen_end at the stop. */
typedef struct tern_gen tern_gen;

typedef enum tern_stop {
    TERN_STOP_NONE = 0,     /* still generating: a token is pending */
    TERN_STOP_EOG,          /* an end-of-generation token was sampled */
    TERN_STOP_LENGTH,       /* n_predict tokens */
    TERN_STOP_CTX,          /* the context is full */
    TERN_STOP_CALLER,       /* on_token returned non-zero */
    TERN_STOP_ERROR,        /* a forward or truncation failed: see the tern_err; reset the session */
    TERN_STOP_LOGITS,       /* the logits were not finite (NaN or Inf: damaged weights); nothing was
                               sampled from them: tern_gen_get_stats's bad_logits_* say where */
} tern_stop;

/* One event of a reply, passed to on_token: a sampled token, or the end (id -1: the text the
 * detokeniser held back). Pointers are valid during the call only. */
typedef struct tern_gen_token {
    int32_t id;             /* the token, or -1 at the end of the reply */
    const char *text;       /* its text (n_text bytes, complete UTF-8; may be empty) */
    int n_text;
    bool eog;               /* an end-of-generation token that stops the reply (no text) */
    bool in_think;          /* split_think: text lies inside a <think> block */
    int think;              /* split_think: +1 the token is <think>, -1 </think> (their text is not
                               emitted; text holds what the detokeniser flushed), else 0 */
    int n_gen;              /* tokens sampled in this reply, this one included */
    const float *logits;    /* the logits id was sampled from (n_vocab), or NULL (speculative) */
} tern_gen_token;
typedef int (*tern_gen_cb)(void *user, const tern_gen_token *t);

typedef struct tern_gen_params {
    int n_predict;          /* most tokens sampled per reply; -1: until a stop (default -1) */
    bool ignore_eos;        /* end-of-generation tokens are ordinary tokens (default false) */
    bool split_think;       /* <think> / </think> switch in_think and are not shown (chat replies) */
    bool eval_last;         /* at TERN_STOP_LENGTH or _CALLER, tern_gen_end appends the last token,
                               so the session holds the whole reply (a chat that continues) */
    int think_budget;       /* with split_think: after this many tokens inside a <think> block the
                               next token is </think> instead of a sampled one (the answer begins;
                               speculation pauses inside the block); -1 (default): no budget */
    const int32_t *forced;  /* replies given in advance (tests, replays): token i of the reply is
                               forced[i] while i < n_forced (stop rules apply as to sampled tokens;
                               no speculation meanwhile), sampled after; NULL: none. Not owned */
    int n_forced;
    tern_gen_cb on_token;   /* NULL: tokens are only counted */
    void *user;
} tern_gen_params;
void tern_gen_params_default(tern_gen_params *p);

typedef struct tern_gen_stats {
    int n_prompt;           /* tokens given to tern_gen_prompt / tern_gen_prompt_seen */
    int n_gen;              /* tokens sampled, a stopping end-of-generation token included */
    double t_prompt_s;      /* time in tern_gen_prompt's forward */
    double t_first_s;       /* from tern_gen_begin to the first token sampled */
    double t_gen_s;         /* from the first token sampled to the last, or to tern_gen_end */
    int bad_logits_pos;     /* the position whose logits held a NaN or Inf (the reply stopped
                               there: TERN_STOP_LOGITS), -1: none */
    int32_t bad_logits_id;  /* the first such logit and its value */
    float bad_logits_val;
} tern_gen_stats;

/* Create a generator for m (the end-of-generation set, think tags, n_vocab; m must outlive it).
 * Errors: TERN_E_ARG, TERN_E_NOMEM. */
int tern_gen_init(tern_gen **out, const tern_model *m, tern_err *err);
void tern_gen_free(tern_gen *g);
/* Start a reply on s, sampling with smp; spec non-NULL: speculative steps (its history must be
 * the session's tokens before each step). p is copied (NULL: defaults). Not owned. */
void tern_gen_begin(tern_gen *g, tern_session *s, tern_sampler *smp, tern_spec *spec, const tern_gen_params *p);
/* (A NULL s or smp, a session of another model, a sampler of another vocabulary size or a spec of
 * another model makes the reply stop at once with TERN_STOP_ERROR, the reason given by
 * tern_gen_prompt / tern_gen_step / tern_gen_end's err; so does sampling before any begin. A NULL
 * generator is never read: the tern_gen_* calls return TERN_STOP_ERROR (err set where the call
 * takes one), NULL, 0 or -1 and record nothing.) */
/* Evaluate n prompt tokens into the session and return the logits of the last one (as
 * tern_session_eval), and record them as tern_gen_prompt_seen does; with a spec, also add them to
 * its history. NULL with err set on failure (TERN_E_RANGE: nothing was appended). */
const float *tern_gen_prompt(tern_gen *g, const int32_t *tok, int n, tern_err *err);
/* Record n prompt tokens the caller evaluated: the sampler's history, whether the reply starts
 * inside a <think> block (split_think), the prompt count. */
void tern_gen_prompt_seen(tern_gen *g, const int32_t *tok, int n);
/* Sample a token from logits (the session's last logits, or a batched forward's column) and apply
 * the stop rules. TERN_STOP_NONE: the token is pending (tern_gen_pending); append it with
 * tern_gen_step or yourself, then sample again from its logits. */
tern_stop tern_gen_sample(tern_gen *g, const float *logits);
/* The pending token (sampled, not yet in the session), or -1. */
int32_t tern_gen_pending(const tern_gen *g);
/* The tokens the last tern_gen_sample or tern_gen_step call reported to on_token, in order, a
 * stopping end-of-generation token excluded (*tok: owned by g, valid until the next call); returns
 * their count. For callers that read the tokens instead of taking a callback (language bindings,
 * whose callbacks cannot stop the program on an interrupt). */
int tern_gen_tokens(const tern_gen *g, const int32_t **tok);
/* Append the pending token and sample the next: plain, one tern_session_eval; speculative, one
 * tern_spec_step (several tokens per forward, each through the stop rules in order; tokens after
 * a stop stay in the session). Returns the stop, TERN_STOP_ERROR with err set on a failed
 * forward. *tok / *n_tok (may be NULL) receive the tokens this step appended to the session. */
tern_stop tern_gen_step(tern_gen *g, const int32_t **tok, int *n_tok, tern_err *err);
/* End the reply: with eval_last, append the last token where a stop left it pending (when the
 * session is full it cannot: the stop becomes TERN_STOP_CTX); then report the detokeniser's
 * held-back text (on_token with id -1). Returns the stop (TERN_STOP_ERROR if the append failed). */
tern_stop tern_gen_end(tern_gen *g, tern_err *err);
/* tern_gen_sample on logits, tern_gen_step until a stop, tern_gen_end. */
tern_stop tern_gen_run(tern_gen *g, const float *logits, tern_err *err);
void tern_gen_get_stats(const tern_gen *g, tern_gen_stats *st);
/* After TERN_STOP_LOGITS: sets err to TERN_E_FORMAT, "the logits for position P are not finite
 * (logit I of N is NaN); expected finite logits: the model's weights may be damaged (NaN or Inf)",
 * and returns TERN_E_FORMAT; TERN_OK (err untouched) when no logits were found non-finite. */
int tern_gen_logits_error(const tern_gen *g, tern_err *err);

#ifdef __cplusplus
}
#endif
#endif /* TERN_TERN_H */
