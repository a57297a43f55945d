/* hf_vocab.h: the fuzzers' way from a Hugging Face import (tok_hf) to a vocabulary: the keys
 * `tern synth --tokenizer` writes, given to tok_build directly instead of through a GGUF file. */
#ifndef TERN_FUZZ_HF_VOCAB_H
#define TERN_FUZZ_HF_VOCAB_H

#include "tokenizer/hf_import.h"
#include "tokenizer/tok.h"

/* Byte-level BPE from h with the pre-tokeniser pre (NULL: h's own). */
static inline int hf_vocab_build(tok_vocab **out, const tok_hf *h, const char *pre, tern_err *err) {
    tok_desc d;
    tok_desc_init(&d);
    d.model = "gpt2";
    d.pre = pre ? pre : h->pre;
    d.n_vocab = h->n_vocab;
    d.tokens = h->tokens;
    d.types = h->types;
    d.n_merges = h->n_merges;
    d.merges = h->merges;
    d.bos = h->bos;
    d.eos = h->eos;
    d.pad = h->pad;
    return tok_build(out, &d, err);
}

#endif /* TERN_FUZZ_HF_VOCAB_H */
