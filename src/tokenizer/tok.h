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

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum {
    TOK_TYPE_UNDEFINED = 0, TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6,
};
/* Pre-tokenisers for byte-level BPE (tokenizer.ggml.pre). */
enum { TOK_PRE_NONE = 0, TOK_PRE_QWEN2 = 1, TOK_PRE_QWEN35 = 2 };

/* A vocabulary described by plain arrays (what tok_load reads from a GGUF and what the HF
 * import produces). Strings are (pointer, length), not NUL-terminated; all borrowed for the
 * duration of tok_build only. Special ids: -1 = none. */
typedef struct tok_desc {
    const char *model;          /* "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE) */
    const char *pre;            /* gpt2: "qwen2" or "qwen35"; ignored for llama; NULL = qwen2 */
    int32_t n_vocab;
    const gguf_str *tokens;     /* n_vocab token texts as stored in GGUF */
    const int32_t *types;       /* n_vocab TOK_TYPE_* or NULL (all NORMAL) */
    const float *scores;        /* n_vocab SPM scores or NULL (0) */
    int32_t n_merges;
    const gguf_str *merges;     /* gpt2: "left right" in rank order; NULL if none */
    int32_t bos, eos, eot, eom, unk, pad;
    int32_t fim_pad, fim_rep, fim_sep; /* -1: found by text (<|fim_pad|>, <|repo_name|>, <|file_sep|>) */
    int add_bos;                /* 0/1, or -1 = the model's default (llama: 1, gpt2: 0) */
    int add_eos;                /* 0/1, -1 = 0 */
    int add_space_prefix;       /* 0/1, -1 = default (llama: 1, gpt2: 0) */
} tok_desc;
/* Fill d with "none"/default values (all ids -1, flags -1, arrays NULL). */
void tok_desc_init(tok_desc *d);

/* Build a vocabulary from a description (copies everything). Validates: known model and pre,
 * n_vocab > 0, types in 0..6, special ids inside the vocabulary, merges of the form "a b", every
 * byte has a token (gpt2). Merges naming unknown tokens, or whose result is not a token, are
 * ignored (they can never apply). Errors: TERN_E_FORMAT, TERN_E_UNSUPPORTED, TERN_E_NOMEM. */
int tok_build(tok_vocab **out, const tok_desc *d, tern_err *err);

/* Build from the tokenizer.ggml.* keys of an open GGUF (copies what it needs; g may be closed
 * afterwards). Validates array types and lengths and special ids (TERN_E_FORMAT naming the key);
 * a special id of -1 or 0xFFFFFFFF means "none". */
int tok_load(tok_vocab **out, const gguf_ctx *g, tern_err *err);
void tok_free(tok_vocab *v);

int32_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v);        /* -1 if none */
int32_t tok_eos(const tok_vocab *v);        /* -1 if none */
bool tok_add_bos(const tok_vocab *v);       /* tokenizer.ggml.add_bos_token (llama default true) */
bool tok_is_eog(const tok_vocab *v, int32_t id);   /* end-of-generation set */
/* Id of an exact token text (e.g. "<think>"), or -1. */
int32_t tok_find(const tok_vocab *v, const char *text);
/* tokenizer.chat_template of the GGUF the vocabulary was loaded from (owned by v), or NULL. */
const char *tok_chat_template(const tok_vocab *v);
/* Token type (TOK_TYPE_*) of id, or -1 for an id outside the vocabulary. */
int tok_type(const tok_vocab *v, int32_t id);
/* The end-of-generation set: writes up to n ids to out, returns the set's size. llama.cpp's
 * rule: eos, eot, eom; the FIM pad/repo/sep tokens; and every token whose text is one of
 * <|eot_id|> <|im_end|> <|end|> <|return|> <|call|> <end_of_turn> <|endoftext|> <|eom_id|>
 * <EOT> _<EOT> <|end_of_text|> <end_of_utterance> </s>; for a SentencePiece ("llama") vocabulary
 * also bos (llama2.c's rule: a generated BOS starts the next document). */
int tok_eog_ids(const tok_vocab *v, int32_t *out, int n);

/* Encode len bytes of text. parse_special: text of CONTROL/USER_DEFINED tokens becomes those
 * tokens (template scaffolding, reference vectors); off for user text. add_bos is llama.cpp's
 * add_special: BOS is prepended only if the vocab asks for it (tokenizer.ggml.add_bos_token;
 * default true for llama/SPM, false for gpt2: Qwen never gets a BOS here, so a caller that wants
 * to start an empty prompt from BOS uses tok_bos()), and EOS appended if add_eos_token says so.
 * Writes at most n_max ids; *n_out = the total count (may exceed n_max: then returns
 * TERN_E_RANGE and the caller retries with a larger buffer). Invalid UTF-8 is encoded byte-wise
 * (never rejected) and decodes back to the same bytes. Allocates scratch per call (not for the
 * token loop). Matches llama.cpp's llama_tokenize (no NFC normalisation, as llama.cpp). */
int tok_encode(const tok_vocab *v, const char *text, size_t len, bool parse_special, bool add_bos,
               int32_t *out, int n_max, int *n_out, tern_err *err);

/* A byte range [b0, b1) of a text. */
typedef struct tok_span { size_t b0, b1; } tok_span;
/* tok_encode with parse_special on, except that special-token text is matched only where it lies
 * wholly outside the `plain` ranges (sorted, disjoint; n_plain of them): for rendered chat
 * prompts (chat_render_spans), where the scaffolding holds the special tokens and the message
 * contents are user text. Apart from that the text is tokenised as one string, so plain text gives
 * exactly the ids of tok_encode. Errors as tok_encode, plus TERN_E_ARG for unsorted ranges. */
int tok_encode_spans(const tok_vocab *v, const char *text, size_t len, const tok_span *plain, int n_plain,
                     bool add_bos, int32_t *out, int n_max, int *n_out, tern_err *err);

/* The bytes of one token's piece (byte-level decoded; SPM: U+2581 -> space, <0xXX> -> byte).
 * Control tokens give their text only when `special` is set. Returns the byte count written (at
 * most n) or the needed size if n is too small, or a TERN_E_RANGE for a bad id. */
int tok_piece(const tok_vocab *v, int32_t id, bool special, char *buf, int n);

/* Streaming detokeniser: feeds ids, emits only complete valid UTF-8; invalid sequences become
 * U+FFFD (one per maximal invalid subpart, as the Unicode standard recommends); an incomplete
 * sequence at the end of a piece is held (at most 3 bytes) until the next piece completes it.
 * Control tokens (CONTROL/UNKNOWN/UNUSED) give no text; USER_DEFINED tokens (<think>) give theirs. */
typedef struct {
    char pend[8];
    int n_pend;
    bool first;            /* SPM with a space prefix: drop the leading space of the next piece
                              with text. tok_stream_init sets it false; tok_stream_put sets it when
                              the stream's first id is BOS (the text of a whole sequence, as
                              llama.cpp's detokenize); a caller may set it by hand for a stream
                              that stands for a sequence start without its BOS. A stream that
                              starts with any other id (generation after a prompt) keeps every
                              space, so its text appends to the prompt's exactly. */
    bool started;          /* an id has been put (tok_stream_init: false) */
} tok_stream;
void tok_stream_init(tok_stream *s);
/* Appends the text for id to out (capacity cap). Returns bytes written (>= 0), TERN_E_RANGE for
 * an id outside the vocabulary, or TERN_E_ARG when the text is longer than cap (nothing consumed:
 * it is at most 3 * (piece bytes + 3) bytes, each byte an invalid sequence would become a U+FFFD). */
int tok_stream_put(const tok_vocab *v, tok_stream *s, int32_t id, char *out, int cap);
/* Flushes held bytes (an incomplete sequence becomes one U+FFFD); needs at most 3 bytes of out.
 * Returns bytes written or TERN_E_ARG if cap < 3 and something is held. */
int tok_stream_flush(tok_stream *s, char *out, int cap);
/* Same UTF-8 repair on a whole buffer: appends in[0..n) to the stream's pending bytes and writes
 * the complete part to out; TERN_E_ARG, nothing consumed, when that is longer than cap (at most
 * 3 * (n + 3) bytes) or s holds more than 3 pending bytes. Used by tok_stream_put; exposed for tests. */
int tok_stream_bytes(tok_stream *s, const char *in, int n, char *out, int cap);

/* Copy s[0..n) to out replacing each maximal invalid subpart, and a truncated sequence at the
 * end, by U+FFFD (the tok_stream rule). out must hold 3 * n + 1 bytes; it is NUL-terminated.
 * Returns the length written (without the NUL). */
size_t tok_utf8_repair(const char *s, size_t n, char *out);

#endif /* TERN_TOKENIZER_TOK_H */
