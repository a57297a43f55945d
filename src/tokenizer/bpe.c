/* bpe.c: the two merge loops. Layer 6.
 * - Byte-level BPE (GPT-2 / Qwen): a word starts as one symbol per byte; the adjacent pair with
 *   the lowest merge rank is merged (leftmost first on equal rank), until no pair has a merge.
 *   This is the algorithm of HF tokenizers' BPE model and llama.cpp's llm_tokenizer_bpe.
 * - SentencePiece BPE (llama.cpp's llm_tokenizer_spm): a fragment starts as one symbol per UTF-8
 *   character; the adjacent pair whose concatenation is a token with the highest score is merged
 *   (leftmost first on equal score); leftover symbols that are not tokens fall back to <0xXX>
 *   byte tokens (or unk).
 * Both keep candidate pairs in a binary heap and drop stale entries when popped, so a word of n
 * symbols costs O(n log n): at most n - 1 merges, each pushing at most two new pairs. */
#include "tokenizer/tok_impl.h"

#include <stdlib.h>
#include <string.h>

void tok_scratch_free(tok_scratch *s) {
    free(s->sym_id); free(s->prev); free(s->next); free(s->start); free(s->len); free(s->heap);
    memset(s, 0, sizeof *s);
}

static bool scratch_reserve(tok_scratch *s, size_t n_sym, size_t heap_elem) {
    if (n_sym > s->cap_sym) {
        size_t cap = n_sym < 64 ? 64 : n_sym;
        int32_t *a = realloc(s->sym_id, cap * sizeof *a); if (a) s->sym_id = a;
        int32_t *b = realloc(s->prev, cap * sizeof *b); if (b) s->prev = b;
        int32_t *c = realloc(s->next, cap * sizeof *c); if (c) s->next = c;
        uint32_t *d = realloc(s->start, cap * sizeof *d); if (d) s->start = d;
        uint32_t *e = realloc(s->len, cap * sizeof *e); if (e) s->len = e;
        if (!a || !b || !c || !d || !e) { s->oom = true; return false; }
        s->cap_sym = cap;
    }
    size_t need = (3 * n_sym + 8) * heap_elem;                  /* n - 1 initial + 2 per merge */
    if (need > s->cap_heap) {
        void *h = realloc(s->heap, need);
        if (!h) { s->oom = true; return false; }
        s->heap = h;
        s->cap_heap = need;
    }
    s->n_heap = 0;
    return true;
}

/* ==== byte-level BPE ==========================================================================*/
typedef struct { int32_t rank; uint32_t pos; int32_t l, r; } bpe_cand;

static bool bpe_less(const bpe_cand *a, const bpe_cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}
static void bpe_push(tok_scratch *s, bpe_cand c) {
    tok_work++;
    bpe_cand *h = s->heap;
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bpe_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}
static bpe_cand bpe_pop(tok_scratch *s) {
    tok_work++;
    bpe_cand *h = s->heap;
    bpe_cand top = h[0], last = h[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bpe_less(&h[c + 1], &h[c])) c++;
        if (!bpe_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}
static void bpe_try(const tok_vocab *v, tok_scratch *s, int32_t a) {
    if (a < 0 || s->next[a] < 0) return;
    const tok_merge *m = tok_merge_find(v, s->sym_id[a], s->sym_id[s->next[a]]);
    if (m) bpe_push(s, (bpe_cand){m->rank, (uint32_t)a, m->l, m->r});
}

void tok_bpe_word(const tok_vocab *v, tok_scratch *s, const char *w, size_t n, tok_ids *out) {
    if (n == 0) return;
    if (n > INT32_MAX / 4 || !scratch_reserve(s, n, sizeof(bpe_cand))) { s->oom = true; return; }
    for (size_t i = 0; i < n; i++) {
        s->sym_id[i] = v->byte_tok[(unsigned char)w[i]];
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    if (n > 1 && v->mt) {
        for (size_t i = 0; i + 1 < n; i++) bpe_try(v, s, (int32_t)i);
        while (s->n_heap) {
            bpe_cand c = bpe_pop(s);
            int32_t a = (int32_t)c.pos, b = s->next[a];
            /* stale: a was absorbed (sym_id -1), or a or its right neighbour changed since */
            if (s->sym_id[a] != c.l || b < 0 || s->sym_id[b] != c.r) continue;
            const tok_merge *m = tok_merge_find(v, c.l, c.r);
            s->sym_id[a] = m->res;
            s->sym_id[b] = -1;
            s->next[a] = s->next[b];
            if (s->next[b] >= 0) s->prev[s->next[b]] = a;
            bpe_try(v, s, s->prev[a]);
            bpe_try(v, s, a);
        }
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) tok_ids_push(out, s->sym_id[i]);
}

/* ==== SentencePiece BPE =======================================================================*/
typedef struct { float score; uint32_t left; uint32_t size; } spm_cand;

static bool spm_before(const spm_cand *a, const spm_cand *b) {   /* a pops before b */
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}
static void spm_push(tok_scratch *s, spm_cand c) {
    tok_work++;
    spm_cand *h = s->heap;
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!spm_before(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}
static spm_cand spm_pop(tok_scratch *s) {
    tok_work++;
    spm_cand *h = s->heap;
    spm_cand top = h[0], last = h[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && spm_before(&h[c + 1], &h[c])) c++;
        if (!spm_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}
static void spm_try(const tok_vocab *v, tok_scratch *s, const char *t, int32_t a) {
    if (a < 0) return;
    int32_t b = s->next[a];
    if (b < 0) return;
    uint32_t size = s->len[a] + s->len[b];
    int32_t id = tok_lookup(v, t + s->start[a], size);
    if (id < 0) return;
    spm_push(s, (spm_cand){v->score[id], (uint32_t)a, size});
}

void tok_spm_fragment(const tok_vocab *v, tok_scratch *s, const char *t, size_t n, tok_ids *out) {
    if (n == 0) return;
    if (n > INT32_MAX / 4 || !scratch_reserve(s, n, sizeof(spm_cand))) { s->oom = true; return; }
    size_t ns = 0;
    for (size_t b = 0; b < n;) {                                /* one symbol per UTF-8 character */
        uint32_t cp;
        int l = tok_utf8_next((const unsigned char *)t + b, n - b, &cp);
        s->start[ns] = (uint32_t)b;
        s->len[ns] = (uint32_t)l;
        s->prev[ns] = (int32_t)ns - 1;
        s->next[ns] = -1;
        if (ns) s->next[ns - 1] = (int32_t)ns;
        ns++;
        b += (size_t)l;
    }
    for (size_t i = 0; i + 1 < ns; i++) spm_try(v, s, t, (int32_t)i);
    while (s->n_heap) {
        spm_cand c = spm_pop(s);
        int32_t a = (int32_t)c.left, b = s->next[a];
        /* stale: either side was merged since (lengths only grow, so the sum changes) */
        if (s->len[a] == 0 || b < 0 || s->len[a] + s->len[b] != c.size) continue;
        s->len[a] += s->len[b];
        s->len[b] = 0;
        s->next[a] = s->next[b];
        if (s->next[b] >= 0) s->prev[s->next[b]] = a;
        spm_try(v, s, t, s->prev[a]);
        spm_try(v, s, t, a);
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        int32_t id = tok_lookup(v, t + s->start[i], s->len[i]);
        if (id >= 0) { tok_ids_push(out, id); continue; }
        for (uint32_t k = 0; k < s->len[i]; k++) {              /* byte fallback */
            int32_t bt = v->byte_tok[(unsigned char)t[s->start[i] + k]];
            if (bt >= 0) tok_ids_push(out, bt);
            else if (v->unk >= 0) tok_ids_push(out, v->unk);
        }
    }
}
