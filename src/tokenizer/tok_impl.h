/* tok_impl.h: internal layout of tok_vocab shared by tok.c (load, pieces, streaming), pretok.c
 * (qwen2/qwen35 splitter) and bpe.c (byte-level BPE and SentencePiece merging). Not a public
 * contract: only src/tokenizer/ includes it. */
#ifndef TERN_TOKENIZER_TOK_IMPL_H
#define TERN_TOKENIZER_TOK_IMPL_H

#include "tokenizer/tok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { TOK_KIND_BPE = 1, TOK_KIND_SPM = 2 };

typedef struct {
    int32_t l, r;        /* left and right token ids; l == -1 marks an empty slot */
    int32_t rank;        /* merge priority: lower merges first (index in tokenizer.ggml.merges) */
    int32_t res;         /* id of the merged token */
} tok_merge;

struct tok_vocab {
    int kind;                 /* TOK_KIND_* */
    int pre;                  /* TOK_PRE_* (BPE only) */
    int32_t n_vocab;
    /* "Lookup form" of every token, concatenated: BPE NORMAL/BYTE tokens are byte-decoded from
     * the GPT-2 byte<->unicode alphabet ("Ġthe" -> " the"); every other token (and every SPM
     * token) is its GGUF text as is. text[off[i] .. off[i+1]) is token i. */
    char *text;
    uint32_t *off;            /* n_vocab + 1 */
    uint8_t *type;            /* TOK_TYPE_* per token */
    float *score;             /* SPM scores (n_vocab), NULL for BPE */
    int32_t *ht;              /* open-addressing table text -> id; -1 = empty */
    uint32_t ht_mask;
    tok_merge *mt;            /* (l, r) -> merge, open addressing */
    uint32_t mt_mask;
    int32_t byte_tok[256];    /* BPE: token of each single byte; SPM: "<0xXX>" token or -1 */
    int32_t *special;         /* ids matched by parse_special (CONTROL, USER_DEFINED, UNKNOWN),
                                 sorted by text length, longest first */
    int n_special;
    uint32_t special_first[8];/* bitmap of the first bytes of special texts (fast reject) */
    int32_t bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos, add_space_prefix;
    int32_t eog[16];          /* end-of-generation ids (sorted, unique) */
    int n_eog;
    int max_token_len;        /* longest lookup-form text, bytes */
    char *chat_template;      /* tokenizer.chat_template (NUL-terminated) or NULL */
};

/* Work counter for the linear-time test: code points classified, heap pushes and pops. Per
 * thread; only ever incremented (tests read differences). */
extern _Thread_local uint64_t tok_work;

/* Id of an exact byte string, or -1. */
int32_t tok_lookup(const tok_vocab *v, const char *s, size_t n);
static inline const char *tok_text(const tok_vocab *v, int32_t id, uint32_t *n) {
    *n = v->off[id + 1] - v->off[id];
    return v->text + v->off[id];
}

/* The merge of the pair (l, r), or NULL. */
const tok_merge *tok_merge_find(const tok_vocab *v, int32_t l, int32_t r);

/* Growable id list used while encoding. */
typedef struct { int32_t *p; size_t n, cap; bool oom; } tok_ids;
void tok_ids_push(tok_ids *a, int32_t id);

/* Scratch for one encode call (grown to the longest word; freed by tok_scratch_free). */
typedef struct {
    int32_t *sym_id, *prev, *next;
    uint32_t *start, *len;
    void *heap;
    size_t cap_sym, cap_heap, n_heap;
    bool oom;
} tok_scratch;
void tok_scratch_free(tok_scratch *s);

/* Byte-level BPE of one pre-tokenised word (bytes w[0..n)); appends ids. Work O(n log n). */
void tok_bpe_word(const tok_vocab *v, tok_scratch *s, const char *w, size_t n, tok_ids *out);
/* SentencePiece BPE over an already escaped fragment (' ' -> U+2581); appends ids, byte
 * fallback for characters without a token. Work O(n log n). */
void tok_spm_fragment(const tok_vocab *v, tok_scratch *s, const char *t, size_t n, tok_ids *out);

/* Pre-tokeniser: splits s[0..n) into words and calls fn(ctx, start, end) for each, in order;
 * the words cover the input exactly. pre: TOK_PRE_QWEN2 or TOK_PRE_QWEN35. Linear time.
 * Returns false only on allocation failure. */
typedef void (*tok_word_fn)(void *ctx, size_t b0, size_t b1);
bool tok_pretok_split(int pre, const char *s, size_t n, tok_word_fn fn, void *ctx);

/* Decode one UTF-8 sequence at s[0..n) (n >= 1): returns its length (1..4) and the code point in
 * *cp; an invalid or truncated sequence gives length 1 and *cp = 0xFFFD. */
int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* The code point that stands for byte b (0..255) in GPT-2's byte-level alphabet. */
uint32_t tok_byte_cp(int b);

#endif /* TERN_TOKENIZER_TOK_IMPL_H */
