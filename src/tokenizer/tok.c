/* tok.c: vocabulary build/load, special-token partition, encode dispatch, pieces, streaming
 * detokeniser, end-of-generation set. Layer 6.
 * Sources of truth: ../shared/spec/ternary-gguf.md section 7; llama.cpp's vocab conventions
 * (token types, the GPT-2 byte<->unicode alphabet, SPM space prefix and byte fallback, the EOG
 * rule) as described in tok.h; checked against the reference vectors in ../shared/data.
 * Invariants: every id stored in the tables is in [0, n_vocab); the lookup table holds the
 * "lookup form" of each token (see tok_impl.h); no function recurses or rescans its input. */
#include "tokenizer/tok_impl.h"
#include "core/os.h"

#include <stdlib.h>
#include <string.h>

_Thread_local uint64_t tok_work;

/* ==== GPT-2 byte <-> unicode alphabet ===========================================================
 * Bytes 33..126, 161..172 and 174..255 stand for themselves; the other 68 bytes map, in byte
 * order, to U+0100.. U+0143. (GPT-2's bytes_to_unicode.) */
static bool b2u_identity(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

/* Code point -> byte, or -1 if cp is not in the alphabet. U+0100 + k stands for the k-th byte
 * outside the identity ranges, in byte order: bytes 0..32 (k 0..32), 127..160 (k 33..66) and 173
 * (k 67). A closed form, so nothing is filled at run time and any thread may call it. */
static int u2b(uint32_t cp) {
    if (cp < 256) return b2u_identity((int)cp) ? (int)cp : -1;
    const uint32_t k = cp - 256;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(127 + k - 33);
    return k == 67 ? 173 : -1;
}

uint32_t tok_byte_cp(int b) {
    if (b2u_identity(b)) return (uint32_t)b;
    uint32_t n = 0;
    for (int i = 0; i < b; i++) n += !b2u_identity(i);
    return 256 + n;
}

int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = 0xFFFD; return 1; }
    if ((size_t)len > n) { *cp = 0xFFFD; return 1; }
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = 0xFFFD; return 1; }
    *cp = v;
    return len;
}

/* ==== hashing =================================================================================*/
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;                      /* FNV-1a */
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ull; }
    return h ^ (h >> 29);
}
static uint64_t hash_pair(int32_t l, int32_t r) {
    uint64_t x = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;  /* splitmix64 finaliser */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint32_t table_size(uint64_t n) {       /* power of two >= 2n, >= 16 */
    uint32_t s = 16;
    while ((uint64_t)s < 2 * n) s <<= 1;
    return s;
}

int32_t tok_lookup(const tok_vocab *v, const char *s, size_t n) {
    if (n > (size_t)v->max_token_len) return -1;
    uint32_t i = (uint32_t)hash_bytes(s, n) & v->ht_mask;
    for (;; i = (i + 1) & v->ht_mask) {
        int32_t id = v->ht[i];
        if (id < 0) return -1;
        uint32_t tn;
        const char *t = tok_text(v, id, &tn);
        if (tn == n && memcmp(t, s, n) == 0) return id;
    }
}

static const tok_merge *merge_find(const tok_vocab *v, int32_t l, int32_t r) {
    if (!v->mt) return NULL;
    uint32_t i = (uint32_t)hash_pair(l, r) & v->mt_mask;
    for (;; i = (i + 1) & v->mt_mask) {
        const tok_merge *m = &v->mt[i];
        if (m->l < 0) return NULL;
        if (m->l == l && m->r == r) return m;
    }
}
const tok_merge *tok_merge_find(const tok_vocab *v, int32_t l, int32_t r) { return merge_find(v, l, r); }

void tok_ids_push(tok_ids *a, int32_t id) {
    if (a->oom) return;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        int32_t *p = realloc(a->p, cap * sizeof *p);
        if (!p) { a->oom = true; return; }
        a->p = p;
        a->cap = cap;
    }
    a->p[a->n++] = id;
}

/* ==== build ===================================================================================*/
void tok_desc_init(tok_desc *d) {
    memset(d, 0, sizeof *d);
    d->bos = d->eos = d->eot = d->eom = d->unk = d->pad = -1;
    d->fim_pad = d->fim_rep = d->fim_sep = -1;
    d->add_bos = d->add_eos = d->add_space_prefix = -1;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    free(v->text); free(v->off); free(v->type); free(v->score); free(v->ht); free(v->mt);
    free(v->special);
    free(v->chat_template);
    free(v);
}

/* Byte-decode a GPT-2 alphabet string into out (capacity >= n); code points outside the
 * alphabet are kept as their UTF-8 bytes. Returns the decoded length. */
static size_t bpe_decode_text(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_next((const unsigned char *)s + i, n - i, &cp);
        int b = (l > 1 || cp < 0x80) ? u2b(cp) : -1;
        if (b >= 0) out[o++] = (char)b;
        else { memcpy(out + o, s + i, (size_t)l); o += (size_t)l; }
        i += (size_t)l;
    }
    return o;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const tok_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t nx, ny;
    const char *tx = tok_text(v, x, &nx), *ty = tok_text(v, y, &ny);
    if (nx != ny) return nx > ny ? -1 : 1;                    /* longest first */
    int c = memcmp(tx, ty, nx);
    if (c) return c;
    return x < y ? -1 : x > y;
}

static void eog_add(tok_vocab *v, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < v->n_eog; i++) if (v->eog[i] == id) return;
    if (v->n_eog < (int)(sizeof v->eog / sizeof v->eog[0])) v->eog[v->n_eog++] = id;
}

static int32_t find_text(const tok_vocab *v, const char *s) { return tok_lookup(v, s, strlen(s)); }

static int check_id(int32_t id, int32_t n_vocab, const char *what, tern_err *err) {
    if (id < -1 || id >= n_vocab)
        return tern_err_set(err, TERN_E_FORMAT, "tokenizer: %s id %d outside the vocabulary [0, %d)", what, id, n_vocab);
    return TERN_OK;
}

int tok_build(tok_vocab **out, const tok_desc *d, tern_err *err) {
    *out = NULL;
    int kind;
    if (d->model && strcmp(d->model, "gpt2") == 0) kind = TOK_KIND_BPE;
    else if (d->model && strcmp(d->model, "llama") == 0) kind = TOK_KIND_SPM;
    else return tern_err_set(err, TERN_E_UNSUPPORTED, "tokenizer.ggml.model '%s': expected 'gpt2' or 'llama'", d->model ? d->model : "(none)");
    int pre = TOK_PRE_NONE;
    if (kind == TOK_KIND_BPE) {
        if (!d->pre || strcmp(d->pre, "qwen2") == 0) pre = TOK_PRE_QWEN2;
        else if (strcmp(d->pre, "qwen35") == 0) pre = TOK_PRE_QWEN35;
        else return tern_err_set(err, TERN_E_UNSUPPORTED, "tokenizer.ggml.pre '%s': expected 'qwen2' or 'qwen35'", d->pre);
    }
    if (d->n_vocab <= 0 || !d->tokens)
        return tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.tokens: expected a non-empty array, got %d tokens", d->n_vocab);
    const int32_t nv = d->n_vocab;
    int rc;
    if ((rc = check_id(d->bos, nv, "bos", err)) || (rc = check_id(d->eos, nv, "eos", err)) ||
        (rc = check_id(d->eot, nv, "eot", err)) || (rc = check_id(d->eom, nv, "eom", err)) ||
        (rc = check_id(d->unk, nv, "unknown", err)) || (rc = check_id(d->pad, nv, "padding", err)) ||
        (rc = check_id(d->fim_pad, nv, "fim_pad", err)) || (rc = check_id(d->fim_rep, nv, "fim_rep", err)) ||
        (rc = check_id(d->fim_sep, nv, "fim_sep", err)))
        return rc;

    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory");
    v->kind = kind;
    v->pre = pre;
    v->n_vocab = nv;
    v->bos = d->bos; v->eos = d->eos; v->eot = d->eot; v->eom = d->eom; v->unk = d->unk; v->pad = d->pad;
    v->add_bos = d->add_bos >= 0 ? d->add_bos != 0 : kind == TOK_KIND_SPM;
    v->add_eos = d->add_eos > 0;
    v->add_space_prefix = d->add_space_prefix >= 0 ? d->add_space_prefix != 0 : kind == TOK_KIND_SPM;

    uint64_t total = 0;
    for (int32_t i = 0; i < nv; i++) {
        if (d->tokens[i].n > 0xFFFF) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.tokens[%d]: length %llu, expected < 65536", i, (unsigned long long)d->tokens[i].n); goto fail; }
        total += d->tokens[i].n;
    }
    if (total > 0xFFFFFFF0u) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.tokens: %llu bytes of text, expected < 4 GiB", (unsigned long long)total); goto fail; }
    v->text = malloc(total + 1);
    v->off = malloc(((size_t)nv + 1) * sizeof *v->off);
    v->type = malloc((size_t)nv);
    v->ht_mask = table_size((uint64_t)nv) - 1;
    v->ht = malloc(((size_t)v->ht_mask + 1) * sizeof *v->ht);
    if (kind == TOK_KIND_SPM) v->score = calloc((size_t)nv, sizeof *v->score);
    if (!v->text || !v->off || !v->type || !v->ht || (kind == TOK_KIND_SPM && !v->score)) { rc = tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory for %d tokens", nv); goto fail; }
    memset(v->ht, 0xff, ((size_t)v->ht_mask + 1) * sizeof *v->ht);

    /* token texts in lookup form, types, scores */
    uint32_t o = 0;
    for (int32_t i = 0; i < nv; i++) {
        int t = d->types ? d->types[i] : TOK_TYPE_NORMAL;
        if (t < 0 || t > TOK_TYPE_BYTE) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.token_type[%d]: %d, expected 0..6", i, t); goto fail; }
        if (t == TOK_TYPE_UNDEFINED) t = TOK_TYPE_NORMAL;
        v->type[i] = (uint8_t)t;
        v->off[i] = o;
        const gguf_str s = d->tokens[i];
        if (kind == TOK_KIND_BPE && (t == TOK_TYPE_NORMAL || t == TOK_TYPE_BYTE)) o += (uint32_t)bpe_decode_text(s.p, s.n, v->text + o);
        else { if (s.n) memcpy(v->text + o, s.p, s.n); o += (uint32_t)s.n; }
        if (v->score && d->scores) v->score[i] = d->scores[i];
        uint32_t n = o - v->off[i];
        if ((int)n > v->max_token_len) v->max_token_len = (int)n;
    }
    v->off[nv] = o;
    /* hash: the first token with a given text wins; UNUSED placeholders are not looked up */
    for (int32_t i = 0; i < nv; i++) {
        if (v->type[i] == TOK_TYPE_UNUSED) continue;
        uint32_t n;
        const char *t = tok_text(v, i, &n);
        uint32_t h = (uint32_t)hash_bytes(t, n) & v->ht_mask;
        for (;; h = (h + 1) & v->ht_mask) {
            int32_t id = v->ht[h];
            if (id < 0) { v->ht[h] = i; break; }
            uint32_t m;
            const char *u = tok_text(v, id, &m);
            if (m == n && memcmp(u, t, n) == 0) break;
        }
    }

    /* byte tokens */
    for (int b = 0; b < 256; b++) {
        if (kind == TOK_KIND_BPE) {
            char c = (char)b;
            v->byte_tok[b] = tok_lookup(v, &c, 1);
            if (v->byte_tok[b] < 0) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.tokens: byte-level BPE vocabulary has no token for byte 0x%02X", b); goto fail; }
        } else {
            char hex[8];
            static const char dig[] = "0123456789ABCDEF";
            memcpy(hex, "<0x", 3); hex[3] = dig[b >> 4]; hex[4] = dig[b & 15]; hex[5] = '>';
            v->byte_tok[b] = tok_lookup(v, hex, 6);
        }
    }

    /* merges (BPE): (left id, right id) -> rank, result id */
    if (kind == TOK_KIND_BPE && d->n_merges > 0) {
        if (!d->merges) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.merges: missing"); goto fail; }
        v->mt_mask = table_size((uint64_t)d->n_merges) - 1;
        v->mt = malloc(((size_t)v->mt_mask + 1) * sizeof *v->mt);
        char *buf = malloc((size_t)v->max_token_len * 2 + 16);
        if (!v->mt || !buf) { free(buf); rc = tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory for %d merges", d->n_merges); goto fail; }
        for (uint32_t i = 0; i <= v->mt_mask; i++) v->mt[i].l = -1;
        for (int32_t r = 0; r < d->n_merges; r++) {
            const gguf_str s = d->merges[r];
            const char *sp = s.n > 1 ? memchr(s.p + 1, ' ', s.n - 1) : NULL;   /* llama.cpp: find(' ', 1) */
            if (!sp) { free(buf); rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.merges[%d]: expected 'left right', got no separating space", r); goto fail; }
            size_t na = (size_t)(sp - s.p), nb = s.n - na - 1;
            char *da = malloc(na + nb + 1);
            if (!da) { free(buf); rc = tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory"); goto fail; }
            size_t la = bpe_decode_text(s.p, na, da), lb = bpe_decode_text(sp + 1, nb, da + la);
            int32_t l = tok_lookup(v, da, la), rr = tok_lookup(v, da + la, lb), res = tok_lookup(v, da, la + lb);
            free(da);
            if (l < 0 || rr < 0 || res < 0) continue;           /* can never apply */
            uint32_t h = (uint32_t)hash_pair(l, rr) & v->mt_mask;
            for (;; h = (h + 1) & v->mt_mask) {
                if (v->mt[h].l < 0) { v->mt[h] = (tok_merge){l, rr, r, res}; break; }
                if (v->mt[h].l == l && v->mt[h].r == rr) break;   /* duplicate: keep the lower rank */
            }
        }
        free(buf);
    }

    /* special tokens for parse_special: CONTROL, USER_DEFINED, UNKNOWN with non-empty text */
    int ns = 0;
    for (int32_t i = 0; i < nv; i++) {
        int t = v->type[i];
        if ((t == TOK_TYPE_CONTROL || t == TOK_TYPE_USER_DEFINED || t == TOK_TYPE_UNKNOWN) && v->off[i + 1] > v->off[i]) ns++;
    }
    if (ns) {
        v->special = malloc((size_t)ns * sizeof *v->special);
        if (!v->special) { rc = tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory"); goto fail; }
        for (int32_t i = 0; i < nv; i++) {
            int t = v->type[i];
            if ((t == TOK_TYPE_CONTROL || t == TOK_TYPE_USER_DEFINED || t == TOK_TYPE_UNKNOWN) && v->off[i + 1] > v->off[i]) {
                v->special[v->n_special++] = i;
                unsigned char c = (unsigned char)v->text[v->off[i]];
                v->special_first[c >> 5] |= 1u << (c & 31);
            }
        }
        os_qsort_r(v->special, (size_t)v->n_special, sizeof *v->special, cmp_special, v);
    }

    /* end-of-generation set (llama.cpp's rule, see tok.h) */
    static const char *const eog_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
        "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "</s>",
    };
    static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>"};
    static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
    static const char *const fim_sep_texts[] = {"<|file_sep|>", "<file_sep>", "<fim-sep>"};
    int32_t fim[3] = {d->fim_pad, d->fim_rep, d->fim_sep};
    const char *const *fim_texts[3] = {fim_pad_texts, fim_rep_texts, fim_sep_texts};
    const int fim_n[3] = {3, 5, 3};
    for (int k = 0; k < 3; k++)
        for (int j = 0; fim[k] < 0 && j < fim_n[k]; j++) fim[k] = find_text(v, fim_texts[k][j]);
    for (int k = 0; k < 3; k++) eog_add(v, fim[k]);
    for (size_t j = 0; j < sizeof eog_texts / sizeof eog_texts[0]; j++) eog_add(v, find_text(v, eog_texts[j]));
    eog_add(v, v->eos);
    eog_add(v, v->eot);
    eog_add(v, v->eom);
    /* SentencePiece llama vocabularies (llama2.c's models: stories260K) are trained on documents
     * that each start with BOS and have no EOS; a generated BOS is the start of the next
     * document, so it ends the reply, as llama2.c's run.c stops on BOS. Only for this kind:
     * byte-level BPE models do not generate their BOS. */
    if (v->kind == TOK_KIND_SPM) eog_add(v, v->bos);
    for (int i = 1; i < v->n_eog; i++)                        /* insertion sort: at most 16 */
        for (int j = i; j > 0 && v->eog[j - 1] > v->eog[j]; j--) { int32_t t = v->eog[j]; v->eog[j] = v->eog[j - 1]; v->eog[j - 1] = t; }

    *out = v;
    return TERN_OK;
fail:
    tok_free(v);
    return rc;
}

/* ==== load from GGUF ==========================================================================*/
static int get_id(const gguf_ctx *g, const char *key, int32_t n_vocab, int32_t *out, tern_err *err) {
    return gguf_get_token_id(g, key, (uint64_t)n_vocab, out, err);
}

int tok_load(tok_vocab **out, const gguf_ctx *g, tern_err *err) {
    *out = NULL;
    int rc;
    gguf_str model = {0}, pre = {0};
    gguf_arr toks = {0}, types = {0}, scores = {0}, merges = {0};
    int32_t *ty = NULL;
    float *sc = NULL;
    char model_c[32], pre_c[32];
    if ((rc = gguf_check_tokenizer(g, err))) return rc;           /* types, lengths, id ranges */
    if ((rc = gguf_get_str(g, "tokenizer.ggml.model", true, &model, err))) return rc;
    if ((rc = gguf_get_str(g, "tokenizer.ggml.pre", false, &pre, err))) return rc;
    if (model.n >= sizeof model_c) return tern_err_set(err, TERN_E_UNSUPPORTED, "tokenizer.ggml.model: expected 'gpt2' or 'llama', got a %llu-byte string", (unsigned long long)model.n);
    memcpy(model_c, model.p, model.n); model_c[model.n] = 0;
    if (pre.n >= sizeof pre_c) return tern_err_set(err, TERN_E_UNSUPPORTED, "tokenizer.ggml.pre: expected 'qwen2' or 'qwen35', got a %llu-byte string", (unsigned long long)pre.n);
    if (pre.n) memcpy(pre_c, pre.p, pre.n);
    pre_c[pre.n] = 0;

    if ((rc = gguf_get_arr(g, "tokenizer.ggml.tokens", true, &toks, err))) return rc;
    if (toks.type != GGUF_T_STRING) return tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.tokens: expected an array of string, got an array of %s", gguf_vtype_name(toks.type));
    if (toks.n == 0 || toks.n > INT32_MAX) return tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.tokens: expected 1..%d tokens, got %llu", INT32_MAX, (unsigned long long)toks.n);
    const int32_t nv = (int32_t)toks.n;

    tok_desc d;
    tok_desc_init(&d);
    d.model = model_c;
    d.pre = pre.n && strcmp(pre_c, "default") != 0 ? pre_c : NULL;    /* absent: qwen2 */
    if (strcmp(model_c, "gpt2") == 0 && strcmp(pre_c, "default") == 0)
        return tern_err_set(err, TERN_E_UNSUPPORTED, "tokenizer.ggml.pre 'default': expected 'qwen2' or 'qwen35'");
    d.n_vocab = nv;
    d.tokens = toks.strs;

    if ((rc = gguf_get_arr(g, "tokenizer.ggml.token_type", false, &types, err))) return rc;
    if (types.data || types.n) {
        if (!gguf_arr_is_int(&types)) return tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.token_type: expected an integer array, got an array of %s", gguf_vtype_name(types.type));
        if (types.n != toks.n) return tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.token_type: expected %d elements (one per token), got %llu", nv, (unsigned long long)types.n);
        ty = malloc((size_t)nv * sizeof *ty);
        if (!ty) return tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory");
        for (int32_t i = 0; i < nv; i++) {   /* out of range: named here with the file's value */
            const int64_t t = gguf_arr_int(&types, (uint64_t)i);
            if (t < 0 || t > TOK_TYPE_BYTE) {
                free(ty);
                return tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.token_type[%d]: %lld, expected 0..6", i, (long long)t);
            }
            ty[i] = (int32_t)t;
        }
        d.types = ty;
    }
    if ((rc = gguf_get_arr(g, "tokenizer.ggml.scores", false, &scores, err))) goto done;
    if (scores.data || scores.n) {
        if (scores.type != GGUF_T_F32 && scores.type != GGUF_T_F64) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.scores: expected an array of f32, got an array of %s", gguf_vtype_name(scores.type)); goto done; }
        if (scores.n != toks.n) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.scores: expected %d elements (one per token), got %llu", nv, (unsigned long long)scores.n); goto done; }
        sc = malloc((size_t)nv * sizeof *sc);
        if (!sc) { rc = tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory"); goto done; }
        for (int32_t i = 0; i < nv; i++) sc[i] = (float)gguf_arr_float(&scores, (uint64_t)i);
        d.scores = sc;
    }
    if ((rc = gguf_get_arr(g, "tokenizer.ggml.merges", false, &merges, err))) goto done;
    if (merges.data || merges.n) {
        if (merges.type != GGUF_T_STRING) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.merges: expected an array of string, got an array of %s", gguf_vtype_name(merges.type)); goto done; }
        if (merges.n > INT32_MAX) { rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer.ggml.merges: %llu merges, expected at most %d", (unsigned long long)merges.n, INT32_MAX); goto done; }
        d.n_merges = (int32_t)merges.n;
        d.merges = merges.strs;
    }
    if ((rc = get_id(g, "tokenizer.ggml.bos_token_id", nv, &d.bos, err)) ||
        (rc = get_id(g, "tokenizer.ggml.eos_token_id", nv, &d.eos, err)) ||
        (rc = get_id(g, "tokenizer.ggml.eot_token_id", nv, &d.eot, err)) ||
        (rc = get_id(g, "tokenizer.ggml.eom_token_id", nv, &d.eom, err)) ||
        (rc = get_id(g, "tokenizer.ggml.unknown_token_id", nv, &d.unk, err)) ||
        (rc = get_id(g, "tokenizer.ggml.padding_token_id", nv, &d.pad, err)) ||
        (rc = get_id(g, "tokenizer.ggml.fim_pad_token_id", nv, &d.fim_pad, err)) ||
        (rc = get_id(g, "tokenizer.ggml.fim_rep_token_id", nv, &d.fim_rep, err)) ||
        (rc = get_id(g, "tokenizer.ggml.fim_sep_token_id", nv, &d.fim_sep, err)))
        goto done;
    {
        int64_t dummy;   /* seperator id: validated, unused */
        if ((rc = gguf_get_int(g, "tokenizer.ggml.seperator_token_id", false, -1, &dummy, err))) goto done;
    }
    const gguf_kv *kv;
    bool b;
    if ((kv = gguf_find_kv(g, "tokenizer.ggml.add_bos_token"))) { if ((rc = gguf_get_bool(g, "tokenizer.ggml.add_bos_token", true, false, &b, err))) goto done; d.add_bos = b; }
    if ((kv = gguf_find_kv(g, "tokenizer.ggml.add_eos_token"))) { if ((rc = gguf_get_bool(g, "tokenizer.ggml.add_eos_token", true, false, &b, err))) goto done; d.add_eos = b; }
    if ((kv = gguf_find_kv(g, "tokenizer.ggml.add_space_prefix"))) { if ((rc = gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", true, false, &b, err))) goto done; d.add_space_prefix = b; }
    rc = tok_build(out, &d, err);
    if (rc == TERN_OK) {
        gguf_str ct = {0};
        if ((rc = gguf_get_str(g, "tokenizer.chat_template", false, &ct, err)) == TERN_OK && ct.n) {
            if (!((*out)->chat_template = malloc(ct.n + 1))) rc = tern_err_set(err, TERN_E_NOMEM, "tokenizer: out of memory");
            else { memcpy((*out)->chat_template, ct.p, ct.n); (*out)->chat_template[ct.n] = 0; }
        }
        if (rc) { tok_free(*out); *out = NULL; }
    }
done:
    free(ty);
    free(sc);
    return rc;
}

/* ==== queries =================================================================================*/
int32_t tok_n_vocab(const tok_vocab *v) { return v->n_vocab; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
bool tok_add_bos(const tok_vocab *v) { return v->add_bos; }
const char *tok_chat_template(const tok_vocab *v) { return v->chat_template; }
int tok_type(const tok_vocab *v, int32_t id) { return id >= 0 && id < v->n_vocab ? v->type[id] : -1; }
bool tok_is_eog(const tok_vocab *v, int32_t id) {
    for (int i = 0; i < v->n_eog; i++) if (v->eog[i] == id) return true;
    return false;
}
int tok_eog_ids(const tok_vocab *v, int32_t *out, int n) {
    for (int i = 0; i < v->n_eog && i < n; i++) out[i] = v->eog[i];
    return v->n_eog;
}
int32_t tok_find(const tok_vocab *v, const char *text) {
    /* exact GGUF text: for BPE NORMAL tokens the lookup form is byte-decoded, so also try it */
    int32_t id = find_text(v, text);
    if (id >= 0 || v->kind != TOK_KIND_BPE) return id;
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    if (!buf) return -1;
    size_t m = bpe_decode_text(text, n, buf);
    id = tok_lookup(v, buf, m);
    free(buf);
    return id;
}

/* ==== encode ==================================================================================*/
typedef struct { const tok_vocab *v; tok_scratch *s; const char *text; tok_ids *ids; } bpe_ctx;
static void on_word(void *ctx, size_t b0, size_t b1) {
    bpe_ctx *c = ctx;
    tok_bpe_word(c->v, c->s, c->text + b0, b1 - b0, c->ids);
}

/* One raw-text fragment [b0, b1) of the input. */
static bool encode_raw(const tok_vocab *v, tok_scratch *s, const char *text, size_t b0, size_t b1,
                       bool space_prefix, tok_ids *ids, char **esc, size_t *esc_cap) {
    if (v->kind == TOK_KIND_BPE) {
        bpe_ctx c = {v, s, text + b0, ids};
        return tok_pretok_split(v->pre, text + b0, b1 - b0, on_word, &c);
    }
    /* SPM: optional leading space, then ' ' -> U+2581 (3 bytes) */
    size_t need = (b1 - b0 + 1) * 3;
    if (need > *esc_cap) {
        char *p = realloc(*esc, need);
        if (!p) return false;
        *esc = p;
        *esc_cap = need;
    }
    size_t o = 0;
    char *e = *esc;
    if (space_prefix) { memcpy(e, "\xE2\x96\x81", 3); o = 3; }
    for (size_t i = b0; i < b1; i++) {
        if (text[i] == ' ') { memcpy(e + o, "\xE2\x96\x81", 3); o += 3; }
        else e[o++] = text[i];
    }
    tok_spm_fragment(v, s, e, o, ids);
    return true;
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, bool parse_special, bool add_bos,
               int32_t *out, int n_max, int *n_out, tern_err *err) {
    static const tok_span none = {0, 0};
    /* parse_special off = the whole text is one plain range */
    tok_span all = {0, len};
    return tok_encode_spans(v, text, len, parse_special ? &none : &all, 1, add_bos, out, n_max, n_out, err);
}

int tok_encode_spans(const tok_vocab *v, const char *text, size_t len, const tok_span *plain, int n_plain,
                     bool add_bos, int32_t *out, int n_max, int *n_out, tern_err *err) {
    if (n_out) *n_out = 0;
    if (n_plain < 0 || (n_plain > 0 && !plain)) return tern_err_set(err, TERN_E_ARG, "tok_encode_spans: bad span array (n %d)", n_plain);
    for (int k = 0; k < n_plain; k++)
        if (plain[k].b0 > plain[k].b1 || plain[k].b1 > len || (k && plain[k].b0 < plain[k - 1].b1))
            return tern_err_set(err, TERN_E_ARG, "tok_encode_spans: span %d [%zu, %zu) not sorted, disjoint and inside %zu bytes", k, plain[k].b0, plain[k].b1, len);
    if (!text && len) return tern_err_set(err, TERN_E_ARG, "tok_encode: text is NULL with len %zu", len);
    if (n_max < 0 || (n_max > 0 && !out)) return tern_err_set(err, TERN_E_ARG, "tok_encode: bad output buffer (n_max %d)", n_max);
    tok_ids ids = {0};
    tok_scratch s = {0};
    char *esc = NULL;
    size_t esc_cap = 0;
    bool ok = true;
    if (add_bos && v->add_bos && v->bos >= 0) tok_ids_push(&ids, v->bos);

    size_t raw0 = 0;
    bool prev_special = true;          /* SPM: a space prefix starts the text and follows specials */
    if (v->n_special) {
        int sp = 0;                                         /* first plain range ending after i */
        for (size_t i = 0; i < len && ok;) {
            while (sp < n_plain && plain[sp].b1 <= i) sp++;
            if (sp < n_plain && plain[sp].b0 <= i) { i = plain[sp].b1; continue; }   /* inside user text */
            size_t lim = sp < n_plain ? plain[sp].b0 : len;  /* a special must end before the next range */
            unsigned char c = (unsigned char)text[i];
            int32_t hit = -1;
            uint32_t hn = 0;
            if (v->special_first[c >> 5] & (1u << (c & 31))) {
                for (int k = 0; k < v->n_special; k++) {       /* longest first: first match wins */
                    tok_work++;
                    uint32_t n;
                    const char *t = tok_text(v, v->special[k], &n);
                    if ((unsigned char)t[0] == c && n <= lim - i && memcmp(t, text + i, n) == 0) { hit = v->special[k]; hn = n; break; }
                }
            }
            tok_work++;
            if (hit < 0) { i++; continue; }
            if (i > raw0) { ok = encode_raw(v, &s, text, raw0, i, v->add_space_prefix && prev_special, &ids, &esc, &esc_cap); prev_special = false; }
            tok_ids_push(&ids, hit);
            prev_special = true;
            i += hn;
            raw0 = i;
        }
    }
    if (ok && len > raw0) ok = encode_raw(v, &s, text, raw0, len, v->add_space_prefix && prev_special, &ids, &esc, &esc_cap);
    if (ok && v->add_eos && v->eos >= 0 && add_bos) tok_ids_push(&ids, v->eos);
    free(esc);
    ok = ok && !s.oom && !ids.oom;
    tok_scratch_free(&s);
    if (!ok) { free(ids.p); return tern_err_set(err, TERN_E_NOMEM, "tokenize: out of memory encoding %zu bytes", len); }
    if (ids.n > INT32_MAX) { free(ids.p); return tern_err_set(err, TERN_E_RANGE, "tokenize: the text gives %zu tokens, more than an int counts", ids.n); }
    if (n_out) *n_out = (int)ids.n;
    int rc = TERN_OK;
    size_t nc = ids.n;
    if (nc > (size_t)n_max) {
        nc = (size_t)n_max;
        rc = tern_err_set(err, TERN_E_RANGE, "tokenize: the text gives %zu token%s, the output holds %d (n_max): call again "
                          "with n_max >= %zu", ids.n, ids.n == 1 ? "" : "s", n_max, ids.n);
    }
    if (nc) memcpy(out, ids.p, nc * sizeof *out);
    free(ids.p);
    return rc;
}

/* ==== pieces ==================================================================================*/
int tok_piece(const tok_vocab *v, int32_t id, bool special, char *buf, int n) {
    if (id < 0 || id >= v->n_vocab) return TERN_E_RANGE;
    if (n < 0) n = 0;
    uint32_t tn;
    const char *t = tok_text(v, id, &tn);
    int type = v->type[id];
    if (type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN) { if (!special) return 0; }
    else if (type == TOK_TYPE_UNUSED) return 0;
    else if (v->kind == TOK_KIND_SPM && type == TOK_TYPE_BYTE && tn == 6 && memcmp(t, "<0x", 3) == 0) {
        int hi = t[3], lo = t[4];
        hi = hi <= '9' ? hi - '0' : (hi | 32) - 'a' + 10;
        lo = lo <= '9' ? lo - '0' : (lo | 32) - 'a' + 10;
        if (n >= 1) buf[0] = (char)(hi * 16 + lo);
        return 1;
    } else if (v->kind == TOK_KIND_SPM && type == TOK_TYPE_NORMAL) {
        int o = 0;                                              /* U+2581 -> ' ' */
        for (uint32_t i = 0; i < tn;) {
            if (i + 3 <= tn && memcmp(t + i, "\xE2\x96\x81", 3) == 0) { if (o < n) buf[o] = ' '; o++; i += 3; }
            else { if (o < n) buf[o] = t[i]; o++; i++; }
        }
        return o;
    }
    if ((int)tn <= n) memcpy(buf, t, tn);
    return (int)tn;
}

/* ==== streaming detokeniser ===================================================================*/
void tok_stream_init(tok_stream *s) { memset(s, 0, sizeof *s); }

/* The pending bytes then in[0..n): each complete sequence as is, each maximal invalid subpart as
 * one U+FFFD, an incomplete tail held in s->pend. Returns the bytes of output; writes them to out
 * and updates s only when write is set (a dry run sizes the output first). */
static int stream_walk(tok_stream *s, const char *in, int n, char *out, bool write) {
    int o = 0, np = s->n_pend;
    /* walk the pending bytes followed by in[] without copying in[] */
    unsigned char tmp[8];
    int i = 0;
    const int total = np + n;
    while (i < total) {
        int avail = total - i;
        const unsigned char *p;
        if (i < np) {                                           /* straddles pend and in */
            int k = 0;
            for (int j = i; j < total && k < 4; j++, k++) tmp[k] = j < np ? (unsigned char)s->pend[j] : (unsigned char)in[j - np];
            p = tmp;
            if (avail > 4) avail = 4;
        } else p = (const unsigned char *)in + (i - np);
        int l = tern_utf8_seq(p, avail);
        if (l == 0) {                                           /* hold the incomplete tail (< 4 bytes) */
            if (write) {
                int k = 0;
                for (int j = i; j < total; j++) tmp[k++] = j < np ? (unsigned char)s->pend[j] : (unsigned char)in[j - np];
                memcpy(s->pend, tmp, (size_t)k);
                s->n_pend = k;
            }
            return o;
        }
        if (l < 0) {
            if (write) memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += -l;
            continue;
        }
        if (write) memcpy(out + o, p, (size_t)l);
        o += l;
        i += l;
    }
    if (write) s->n_pend = 0;
    return o;
}

int tok_stream_bytes(tok_stream *s, const char *in, int n, char *out, int cap) {
    if (n < 0 || s->n_pend < 0 || s->n_pend > 3) return TERN_E_ARG;
    if (stream_walk(s, in, n, NULL, false) > cap) return TERN_E_ARG;   /* nothing consumed */
    return stream_walk(s, in, n, out, true);
}

size_t tok_utf8_repair(const char *s, size_t n, char *out) {
    tok_stream st;
    tok_stream_init(&st);
    size_t o = 0;
    for (size_t i = 0; i < n;) {                                /* chunks keep the int sizes small */
        const int k = n - i > (1u << 20) ? 1 << 20 : (int)(n - i);
        const int w = tok_stream_bytes(&st, s + i, k, out + o, 3 * (k + st.n_pend) + 9);
        TERN_ASSERT(w >= 0);
        o += (size_t)w;
        i += (size_t)k;
    }
    o += (size_t)tok_stream_flush(&st, out + o, 3);
    out[o] = '\0';
    return o;
}

int tok_stream_put(const tok_vocab *v, tok_stream *s, int32_t id, char *out, int cap) {
    char small[256];
    int n = tok_piece(v, id, false, small, (int)sizeof small);
    if (n < 0) return n;
    if (!s->started) {                  /* SPM rule: only the piece right after a leading BOS */
        s->started = true;
        if (id == v->bos && v->bos >= 0) s->first = true;
    }
    char *piece = small;
    if (n > (int)sizeof small) {
        piece = malloc((size_t)n);
        if (!piece) return TERN_E_NOMEM;
        tok_piece(v, id, false, piece, n);
    }
    const char *p = piece;
    int m = n;
    if (s->first && m > 0) {
        if (v->kind == TOK_KIND_SPM && v->add_space_prefix && p[0] == ' ') { p++; m--; }
    }
    int rc = tok_stream_bytes(s, p, m, out, cap);
    if (rc >= 0 && n > 0) s->first = false;
    if (piece != small) free(piece);
    return rc;
}

int tok_stream_flush(tok_stream *s, char *out, int cap) {
    if (s->n_pend == 0) return 0;
    if (cap < 3) return TERN_E_ARG;
    memcpy(out, "\xEF\xBF\xBD", 3);                             /* an incomplete sequence: one U+FFFD */
    s->n_pend = 0;
    return 3;
}
