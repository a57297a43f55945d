/* tok.h: tokenizers. Layer 6. Byte-level BPE (tokenizer.ggml.model = "gpt2") with the qwen2 and
 * qwen35 pre-tokenizers, and SentencePiece BPE ("llama") with byte fallback.
 * Source of truth: ../shared/spec/ternary-gguf.md section 7; llama.cpp vocab conventions;
 * verified against ../shared/data/qwen3-tokenizer and ../shared/data/llama2-spm-vocab vectors.
 * All functions are linear (or n log n) in the input: no recursion, no quadratic scans. */
#ifndef TERN_TOKENIZER_TOK_H
#define TERN_TOKENIZER_TOK_H

#include "core/core.h"
#include "format/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tok_vocab tok_vocab;

/* Build from the tokenizer.ggml.* keys of an open GGUF (copies what it needs; g may be closed
 * afterwards). Validates array types and lengths and special ids (TERN_E_FORMAT naming the key). */
int tok_load(tok_vocab **out, const gguf_ctx *g, tern_err *err);
void tok_free(tok_vocab *v);

int32_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v);        /* -1 if none */
int32_t tok_eos(const tok_vocab *v);        /* -1 if none */
bool tok_add_bos(const tok_vocab *v);       /* tokenizer.ggml.add_bos_token (llama default true) */
bool tok_is_eog(const tok_vocab *v, int32_t id);   /* end-of-generation set */
/* Id of an exact token text (e.g. "<think>"), or -1. */
int32_t tok_find(const tok_vocab *v, const char *text);

/* Encode len bytes of text. parse_special: text of CONTROL/USER_DEFINED tokens becomes those
 * tokens (template scaffolding, reference vectors); off for user text. add_bos prepends BOS when
 * the vocab has one. Writes at most n_max ids; *n_out = the total count (may exceed n_max: then
 * returns TERN_E_RANGE and the caller retries with a larger buffer). Invalid UTF-8 is encoded
 * byte-wise (never rejected). */
int tok_encode(const tok_vocab *v, const char *text, size_t len, bool parse_special, bool add_bos,
               int32_t *out, int n_max, int *n_out, tern_err *err);

/* The bytes of one token's piece (byte-level decoded; SPM: U+2581 -> space, <0xXX> -> byte).
 * Control tokens give their text only when `special` is set. Returns the byte count written (at
 * most n) or the needed size if n is too small, or a TERN_E_RANGE for a bad id. */
int tok_piece(const tok_vocab *v, int32_t id, bool special, char *buf, int n);

/* Streaming detokeniser: feeds ids, emits only complete valid UTF-8; invalid sequences become
 * U+FFFD. */
typedef struct {
    char pend[8];
    int n_pend;
    bool first;            /* SPM: drop the leading space of the first piece */
} tok_stream;
void tok_stream_init(tok_stream *s);
/* Appends the text for id to out (capacity cap); returns bytes written (>= 0) or TERN_E_RANGE. */
int tok_stream_put(const tok_vocab *v, tok_stream *s, int32_t id, char *out, int cap);
/* Flushes held bytes (as U+FFFD if incomplete). */
int tok_stream_flush(tok_stream *s, char *out, int cap);

#endif /* TERN_TOKENIZER_TOK_H */
