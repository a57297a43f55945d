/* hf_import.h: read a Hugging Face tokenizer (tokenizer.json + the tokenizer_config.json beside
 * it) into the tokenizer.ggml.* keys, exactly as llama.cpp's convert_hf_to_gguf.py writes them
 * for Qwen3 (byte-level BPE). Used by `tern synth --tokenizer` and by the tokenizer tests.
 * Layer 6. Needs cJSON (link -lcjson).
 *
 * Rules (convert_hf_to_gguf.py get_vocab_base + gguf SpecialVocab):
 *  - rows 0..n_rows-1: the BPE vocabulary (model.vocab) and the added tokens by id; ids with no
 *    token become "[PAD<id>]" with type UNUSED;
 *  - token_type: NORMAL for vocabulary tokens; an added token is CONTROL when it is `special`
 *    or looks special (<|...|>, <｜...｜>, <pad>, <mask>, <2mass>, [@BOS@], <unused...>),
 *    USER_DEFINED otherwise (<think>, <tool_call>);
 *  - merges as "left right" strings in rank order (tokenizer.json may store [left, right]);
 *  - model "gpt2", pre "qwen2" (or the caller's choice, e.g. "qwen35");
 *  - bos/eos/padding ids from tokenizer_config.json's bos_token/eos_token/pad_token (a string or
 *    {"content": ...}); a null bos_token falls back to config.json's bos_token_id beside the
 *    file, and for a Qwen2Tokenizer without config.json to <|endoftext|> (what Qwen's
 *    config.json says); add_bos_token when the config has it; tokenizer.chat_template from the
 *    config (or the caller's template text). */
#ifndef TERN_TOKENIZER_HF_IMPORT_H
#define TERN_TOKENIZER_HF_IMPORT_H

#include "core/core.h"
#include "format/gguf.h"
#include "tokenizer/tok.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tok_hf_opts {
    const char *pre;            /* tokenizer.ggml.pre: NULL = "qwen2" */
    int32_t n_rows;             /* rows of the model's embedding (>= tokenizer ids); 0 = max id + 1 */
    const char *chat_template;  /* template text to store instead of the config's; NULL = config's */
} tok_hf_opts;

/* The imported keys. All memory owned by the struct. */
typedef struct tok_hf {
    char pre[16];
    int32_t n_vocab;            /* = rows */
    gguf_str *tokens;           /* n_vocab texts (point into an owned arena) */
    int32_t *types;             /* n_vocab TOK_TYPE_* */
    int32_t n_merges;
    gguf_str *merges;           /* "left right" */
    int32_t bos, eos, pad;      /* -1 if none */
    int add_bos;                /* -1 absent, else 0/1 */
    char *chat_template;        /* NUL-terminated, or NULL */
    char *arena;                /* storage of tokens and merges */
} tok_hf;

/* Read tokenizer_json_path and the tokenizer_config.json (and config.json, if present) in the
 * same folder. Errors: TERN_E_IO (unreadable file), TERN_E_FORMAT (not JSON, not a BPE model,
 * missing vocab/merges, an id >= n_rows or >= TOK_HF_MAX_ROWS, duplicate ids, a byte of the
 * byte-level alphabet with no token, a special token name not in the vocabulary), TERN_E_NOMEM.
 * *out owned by the caller (tok_hf_free). */
#define TOK_HF_MAX_ROWS 1048576   /* token ids stop below this: the largest vocabulary written */
int tok_hf_load(tok_hf **out, const char *tokenizer_json_path, const tok_hf_opts *opts, tern_err *err);
void tok_hf_free(tok_hf *h);

/* Write the tokenizer.ggml.* keys and tokenizer.chat_template into w, in the order llama.cpp's
 * converter does (model, pre, tokens, token_type, merges, bos, padding, eos, add_bos,
 * chat_template). Errors: TERN_E_NOMEM / what the writer returns. */
int tok_hf_write(const tok_hf *h, gguf_writer *w, tern_err *err);

#endif /* TERN_TOKENIZER_HF_IMPORT_H */
