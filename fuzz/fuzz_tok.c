/* fuzz_tok.c: libFuzzer target for the tokenizers and the chat templates on arbitrary bytes:
 * tok_encode (byte-level BPE with the qwen2 and qwen35 splitters, SentencePiece), special-token
 * parsing on and off, decoding back through tok_piece and the streaming detokeniser, the UTF-8
 * repair, chat_tmpl_detect on the bytes as a template text, and chat_render_spans +
 * tok_encode_spans over messages cut from the input (roles, contents, reasoning, tool calls and
 * tool definitions as arbitrary text, JSON or not). Vocabularies: Qwen3's tokenizer.json
 * (imported) and the llama2 SentencePiece GGUF from $TERN_SHARED/data (default ../shared).
 * Build and run: `make fuzz` (fuzz/run.sh; clang -fsanitize=fuzzer,address,undefined).
 *
 * Checked besides crashes, sanitizer reports and leaks: every id is inside the vocabulary; BPE
 * without special parsing decodes back to the input bytes exactly, SentencePiece to the input
 * after its prefix space when the input has no U+2581, its space mark (the contract in tok.h);
 * the streaming detokeniser and the repair emit valid UTF-8 only, and the repair passes valid
 * UTF-8 unchanged; rendered spans are sorted, disjoint and inside the text; an error comes with
 * a message. A broken check aborts, which the fuzzer reports. */
#include "format/gguf.h"
#include "hf_vocab.h"
#include "tokenizer/chat.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { V_BPE, V_BPE35, V_SPM, N_VOCAB };
static tok_vocab *g_vocab[N_VOCAB];

static void die(const char *what, const tern_err *e) {
    fprintf(stderr, "fuzz_tok: %s: %s\n", what, e->msg);
    exit(1);
}

/* Byte-level BPE from the HF import, with the pre-tokeniser `pre`. */
static tok_vocab *bpe_vocab(const tok_hf *h, const char *pre) {
    tok_vocab *v = NULL;
    tern_err e = {0};
    if (hf_vocab_build(&v, h, pre, &e) != TERN_OK) die("tok_build", &e);
    return v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *shared = getenv("TERN_SHARED");
    if (!shared || !*shared) shared = "../shared";
    char p[1024];
    tern_err e = {0};
    snprintf(p, sizeof p, "%s/data/qwen3-tokenizer/tokenizer.json", shared);
    tok_hf *h = NULL;
    const tok_hf_opts o = {.pre = "qwen2", .n_rows = 151936};
    if (tok_hf_load(&h, p, &o, &e) != TERN_OK) die(p, &e);
    g_vocab[V_BPE] = bpe_vocab(h, "qwen2");
    g_vocab[V_BPE35] = bpe_vocab(h, "qwen35");
    tok_hf_free(h);
    snprintf(p, sizeof p, "%s/data/llama2-spm-vocab/ggml-vocab-llama-spm.gguf", shared);
    gguf_ctx *g = NULL;
    if (gguf_open(&g, p, GGUF_LOAD_READ, &e) != TERN_OK) die(p, &e);
    if (tok_load(&g_vocab[V_SPM], g, &e) != TERN_OK) die(p, &e);
    gguf_close(g);
    return 0;
}

/* Whether s[0..n) is valid UTF-8 (shortest forms, no surrogates, at most U+10FFFF). */
static bool utf8_ok(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        const unsigned c = u[i];
        size_t k;
        unsigned cp, min;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) k = 1, cp = c & 0x1F, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) k = 2, cp = c & 0x0F, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) k = 3, cp = c & 0x07, min = 0x10000;
        else return false;
        if (i + k >= n) return false;   /* truncated */
        for (size_t j = 1; j <= k; j++) {
            if ((u[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (u[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += k + 1;
    }
    return true;
}

/* tok_encode into a malloc'd array (retrying with the size it asks for); NULL on an error,
 * which must carry a message. */
static int32_t *encode(const tok_vocab *v, const char *s, size_t n, bool special, bool bos, int *n_ids) {
    int cap = (int)n + 8, got = 0;
    for (int tries = 0; tries < 2; tries++) {
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        if (!ids) abort();
        tern_err e = {0};
        const int rc = tok_encode(v, s, n, special, bos, ids, cap, &got, &e);
        if (rc == TERN_OK) {
            *n_ids = got;
            return ids;
        }
        free(ids);
        if (e.msg[0] == '\0') abort();
        if (rc != TERN_E_RANGE || got <= cap) return NULL;
        cap = got;
    }
    abort();   /* the second call had the size the first one asked for */
}

/* The ids decoded by tok_piece (control tokens as their text when `special`) into a malloc'd
 * buffer; every id must be inside the vocabulary. */
static char *pieces(const tok_vocab *v, const int32_t *ids, int n, bool special, size_t *len) {
    size_t cap = 64, l = 0;
    char *out = malloc(cap);
    if (!out) abort();
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok_n_vocab(v)) abort();
        const int k = tok_piece(v, ids[i], special, NULL, 0);   /* the size it needs */
        if (k < 0) abort();
        if (l + (size_t)k + 1 > cap) {
            while (l + (size_t)k + 1 > cap) cap *= 2;
            out = realloc(out, cap);
            if (!out) abort();
        }
        if (tok_piece(v, ids[i], special, out + l, k) != k) abort();
        l += (size_t)k;
    }
    *len = l;
    return out;
}

/* The streaming detokeniser over ids: valid UTF-8 out, whatever the ids. */
static void stream(const tok_vocab *v, const int32_t *ids, int n) {
    tok_stream st;
    tok_stream_init(&st);
    char out[3 * (256 + 3) + 8];
    for (int i = 0; i < n; i++) {
        const int k = tok_stream_put(v, &st, ids[i], out, (int)sizeof out);
        if (k < 0 || !utf8_ok(out, (size_t)k)) abort();
    }
    const int k = tok_stream_flush(&st, out, (int)sizeof out);
    if (k < 0 || !utf8_ok(out, (size_t)k)) abort();
}

static void check_encode(const tok_vocab *v, bool spm, const char *s, size_t n, bool special) {
    int ni = 0;
    int32_t *ids = encode(v, s, n, special, false, &ni);
    if (!ids) return;
    size_t dl = 0;
    char *dec = pieces(v, ids, ni, true, &dl);
    if (!special) {
        if (!spm && (dl != n || memcmp(dec, s, n) != 0)) abort();
        /* SentencePiece writes a space as U+2581, so a U+2581 of the text decodes as a space */
        if (spm && n > 0 && !memmem(s, n, "\xE2\x96\x81", 3) &&
            (dl != n + 1 || dec[0] != ' ' || memcmp(dec + 1, s, n) != 0))
            abort();
    }
    stream(v, ids, ni);
    free(dec);
    free(ids);
}

/* Up to n fields of s cut at NUL bytes (each field NUL-terminated in a copy). */
static int split_fields(char *copy, size_t n, char **f, int max) {
    int k = 0;
    f[k++] = copy;
    for (size_t i = 0; i < n && k < max; i++)
        if (copy[i] == '\0') f[k++] = copy + i + 1;
    return k;
}

static void check_chat(const char *s, size_t n, unsigned ctl) {
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer", ""};
    char *copy = malloc(n + 1);
    if (!copy) abort();
    memcpy(copy, s, n);
    copy[n] = '\0';
    char *f[24];
    const int nf = split_fields(copy, n, f, 24);
    /* field 0: tools (or none); then per message: content, reasoning or none, tool calls or none */
    chat_msg msgs[8];
    int nm = 0;
    for (int i = 1; i < nf && nm < 8; i += 3, nm++) {
        const unsigned r = (ctl >> (2 * nm)) + (unsigned)nm;
        msgs[nm].role = roles[r % 6];
        msgs[nm].content = i < nf ? f[i] : NULL;
        msgs[nm].reasoning_content = i + 1 < nf && (r & 8) ? f[i + 1] : NULL;
        msgs[nm].tool_calls = i + 2 < nf && (r & 16) ? f[i + 2] : NULL;
    }
    const chat_opts o = {.add_generation_prompt = ctl & 1, .enable_thinking = ctl & 2,
                         .tools = (ctl & 4) ? f[0] : NULL};
    for (int t = 0; t < 3; t++) {
        char *out = NULL;
        size_t n_out = 0;
        tok_span *sp = NULL;
        int n_sp = 0;
        tern_err e = {0};
        if (chat_render_spans((chat_tmpl)t, msgs, nm, &o, &out, &n_out, &sp, &n_sp, &e) != TERN_OK) {
            if (e.msg[0] == '\0' || out || sp) abort();
            continue;
        }
        if (strlen(out) != n_out) abort();
        for (int i = 0; i < n_sp; i++)
            if (sp[i].b0 > sp[i].b1 || sp[i].b1 > n_out || (i && sp[i].b0 < sp[i - 1].b1)) abort();
        const tok_vocab *v = g_vocab[t == 2 ? V_BPE35 : V_BPE];
        int32_t ids[4096];
        int got = 0;
        if (tok_encode_spans(v, out, n_out, sp, n_sp, false, ids, 4096, &got, &e) == TERN_OK)
            for (int i = 0; i < got; i++)
                if (ids[i] < 0 || ids[i] >= tok_n_vocab(v)) abort();
        free(out);
        free(sp);
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const unsigned ctl = data[0];
    const char *s = (const char *)data + 1;
    const size_t n = size - 1;
    /* the text, exact size: ASan sees any over-read */
    char *text = malloc(n ? n : 1);
    if (!text) abort();
    memcpy(text, s, n);
    check_encode(g_vocab[V_BPE], false, text, n, ctl & 1);
    check_encode(g_vocab[V_BPE35], false, text, n, ctl & 2);
    check_encode(g_vocab[V_SPM], true, text, n, ctl & 4);
    char *rep = malloc(3 * n + 1);
    if (!rep) abort();
    const size_t rn = tok_utf8_repair(text, n, rep);
    if (rn > 3 * n || rep[rn] != '\0' || !utf8_ok(rep, rn)) abort();
    if (utf8_ok(text, n) && (rn != n || memcmp(rep, text, n) != 0)) abort();   /* valid text passes unchanged */
    free(rep);
    /* the bytes as a template text, NUL-terminated */
    char *tmpl = malloc(n + 1);
    if (!tmpl) abort();
    memcpy(tmpl, text, n);
    tmpl[n] = '\0';
    chat_tmpl t;
    tern_err e = {0};
    if (chat_tmpl_detect(tmpl, &t, &e) != TERN_OK && e.msg[0] == '\0') abort();
    free(tmpl);
    check_chat(text, n, ctl >> 3);
    free(text);
    return 0;
}
