/* spec.c: speculative decoding with an n-gram prompt-lookup drafter (tern_spec_* in tern.h).
 *
 * Layer 7 (on top of the public session and sampler API): a step evaluates [last, d1..dk] with one
 * tern_session_eval_all (the matmul path, each column bit-identical to a one-token step), walks
 * the draft with the accept/reject rule for a point-mass draft (Leviathan et al. 2023,
 * Algorithm 1; Chen et al. 2023, Theorem 1: accept x with probability p(x), else draw from p with
 * x removed), and truncates the session to the accepted position.
 *
 * Drafter index: an open-addressing hash table of (n, n-gram) -> the most recent end position,
 * for every n in [ngram_min, ngram_max] and every n-gram of the history that has a following
 * token. Ends are indexed lazily (just before a lookup) so the suffix being looked up is never
 * its own match. Keys are 64-bit hashes; a hit is confirmed by comparing the tokens, so a hash
 * collision can never produce a wrong match (only a probe more). */
#include "tern.h"

#include "core/core.h"
#include "sampling/sampler.h"
#include "spec/spec.h"

#include <stdlib.h>
#include <string.h>

#define SPEC_NGRAM_LIMIT 16

typedef struct ng_ent {
    uint64_t h;
    int32_t end;             /* history index of the n-gram's last token; -1: empty slot */
    int32_t n;
} ng_ent;

struct tern_spec {
    tern_spec_params p;
    const tern_model *m;
    int32_t n_vocab;
    int32_t *hist;           /* (cap_hist) tokens of the sequence */
    int n_hist, cap_hist;
    int n_indexed;           /* n-grams ending at 0 .. n_indexed-1 are in the table */
    ng_ent *tab;             /* (tab_cap, a power of two) */
    size_t tab_cap, tab_used;
    int cur;                 /* adaptive draft length */
    float *logits;           /* ((draft_max + 1) x n_vocab) verification logits */
    int32_t *ids;            /* (n_vocab) sampler distribution */
    float *probs;            /* (n_vocab) */
    int32_t *toks;           /* (draft_max + 1) [last, draft...] */
    tern_spec_stats st;
};

void tern_spec_params_default(tern_spec_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->draft_max = 3;
    p->ngram_min = 2;
    p->ngram_max = 4;
    p->adaptive = true;
    p->ignore_eos = false;
}

/* ---- history and n-gram index ---------------------------------------------------------------- */

/* splitmix64 finaliser over the tokens, seeded with n (so equal token runs of different n differ). */
static uint64_t ng_hash(const int32_t *t, int n) {
    uint64_t h = 0x9e3779b97f4a7c15ull * (uint64_t)(n + 1);
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)t[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h ^= h >> 30;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 27;
        h *= 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

static bool ng_equal(const tern_spec *sp, int end_a, int end_b, int n) {
    return memcmp(sp->hist + end_a - n + 1, sp->hist + end_b - n + 1, (size_t)n * sizeof(int32_t)) == 0;
}

static int tab_grow(tern_spec *sp, tern_err *err) {
    const size_t cap = sp->tab_cap ? sp->tab_cap * 2 : 1024;
    ng_ent *t = malloc(cap * sizeof *t);
    if (!t) return tern_err_set(err, TERN_E_NOMEM, "spec: out of memory for an n-gram index of %zu entries", cap);
    for (size_t i = 0; i < cap; i++) t[i].end = -1;
    for (size_t i = 0; i < sp->tab_cap; i++) {
        const ng_ent e = sp->tab[i];
        if (e.end < 0) continue;
        size_t j = (size_t)e.h & (cap - 1);
        while (t[j].end >= 0) j = (j + 1) & (cap - 1);
        t[j] = e;
    }
    free(sp->tab);
    sp->tab = t;
    sp->tab_cap = cap;
    return TERN_OK;
}

/* Record the n-gram of length n ending at history index end (replacing an older occurrence). */
static int tab_insert(tern_spec *sp, int end, int n, tern_err *err) {
    if ((sp->tab_used + 1) * 2 > sp->tab_cap) {
        int rc = tab_grow(sp, err);
        if (rc) return rc;
    }
    const uint64_t h = ng_hash(sp->hist + end - n + 1, n);
    size_t j = (size_t)h & (sp->tab_cap - 1);
    for (;;) {
        ng_ent *e = &sp->tab[j];
        if (e->end < 0) {
            *e = (ng_ent){.h = h, .end = end, .n = n};
            sp->tab_used++;
            return TERN_OK;
        }
        if (e->h == h && e->n == n && ng_equal(sp, e->end, end, n)) {
            e->end = end;
            return TERN_OK;
        }
        j = (j + 1) & (sp->tab_cap - 1);
    }
}

/* Most recent earlier end of the n-gram that ends the history, or -1. */
static int tab_find(const tern_spec *sp, int n) {
    if (!sp->tab_cap || sp->n_hist < n + 1) return -1;
    const int last = sp->n_hist - 1;
    const uint64_t h = ng_hash(sp->hist + last - n + 1, n);
    size_t j = (size_t)h & (sp->tab_cap - 1);
    for (;;) {
        const ng_ent *e = &sp->tab[j];
        if (e->end < 0) return -1;
        if (e->h == h && e->n == n && ng_equal(sp, e->end, last, n)) return e->end;
        j = (j + 1) & (sp->tab_cap - 1);
    }
}

/* Index every n-gram ending before the last history token. */
static int spec_index(tern_spec *sp, tern_err *err) {
    for (; sp->n_indexed < sp->n_hist - 1; sp->n_indexed++) {
        const int e = sp->n_indexed;
        for (int n = sp->p.ngram_min; n <= sp->p.ngram_max && n <= e + 1; n++) {
            int rc = tab_insert(sp, e, n, err);
            if (rc) return rc;
        }
    }
    return TERN_OK;
}

static int hist_reserve(tern_spec *sp, int extra, tern_err *err) {
    if (extra > INT32_MAX / 2 - sp->n_hist)
        return tern_err_set(err, TERN_E_ARG, "spec: history of %d + %d tokens is too long", sp->n_hist, extra);
    const int need = sp->n_hist + extra;
    if (need <= sp->cap_hist) return TERN_OK;
    int cap = sp->cap_hist ? sp->cap_hist : 256;
    while (cap < need) cap = cap > INT32_MAX / 4 ? need : cap * 2;
    int32_t *h = realloc(sp->hist, (size_t)cap * sizeof *h);
    if (!h) return tern_err_set(err, TERN_E_NOMEM, "spec: out of memory for a history of %d tokens", cap);
    sp->hist = h;
    sp->cap_hist = cap;
    return TERN_OK;
}

/* Write up to k drafted tokens to draft; returns how many (0: no match). The history ends with
 * the token the draft continues. */
static int spec_draft(tern_spec *sp, int32_t *draft, int k, tern_err *err, int *rc) {
    *rc = spec_index(sp, err);
    if (*rc || k <= 0) return 0;
    for (int n = sp->p.ngram_max; n >= sp->p.ngram_min; n--) {
        const int e = tab_find(sp, n);
        if (e < 0) continue;
        /* continuation: hist[e+1 ..], running on into the draft itself when it reaches the end
         * (a periodic match predicts its own repetition) */
        for (int j = 0; j < k; j++) {
            const int src = e + 1 + j;
            draft[j] = src < sp->n_hist ? sp->hist[src] : draft[src - sp->n_hist];
        }
        return k;
    }
    return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

int tern_spec_init(tern_spec **out, const tern_model *m, const tern_spec_params *p, tern_err *err) {
    if (!out || !m) return tern_err_set(err, TERN_E_ARG, "tern_spec_init: %s is NULL", !out ? "out" : "the model");
    *out = NULL;
    tern_spec_params def;
    if (!p) {
        tern_spec_params_default(&def);
        p = &def;
    }
    if (p->draft_max < 1 || p->draft_max > TERN_SPEC_DRAFT_LIMIT)
        return tern_err_set(err, TERN_E_ARG, "spec: draft_max %d, expected 1..%d", p->draft_max, TERN_SPEC_DRAFT_LIMIT);
    if (p->ngram_min < 1 || p->ngram_min > SPEC_NGRAM_LIMIT)
        return tern_err_set(err, TERN_E_ARG, "spec: ngram_min %d, expected 1..%d", p->ngram_min, SPEC_NGRAM_LIMIT);
    if (p->ngram_max < p->ngram_min || p->ngram_max > SPEC_NGRAM_LIMIT)
        return tern_err_set(err, TERN_E_ARG, "spec: ngram_max %d, expected %d..%d (ngram_min..)", p->ngram_max,
                            p->ngram_min, SPEC_NGRAM_LIMIT);
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return tern_err_set(err, TERN_E_NOMEM, "spec: out of memory");
    sp->p = *p;
    sp->m = m;
    sp->n_vocab = info.n_vocab;
    sp->cur = p->draft_max;
    const size_t V = (size_t)info.n_vocab;
    sp->logits = malloc((size_t)(p->draft_max + 1) * V * sizeof(float));
    sp->ids = malloc(V * sizeof *sp->ids);
    sp->probs = malloc(V * sizeof *sp->probs);
    sp->toks = malloc((size_t)(p->draft_max + 1) * sizeof *sp->toks);
    if (!sp->logits || !sp->ids || !sp->probs || !sp->toks) {
        tern_spec_free(sp);
        return tern_err_set(err, TERN_E_NOMEM, "spec: out of memory for %d x %d verification logits",
                            p->draft_max + 1, (int)info.n_vocab);
    }
    *out = sp;
    return TERN_OK;
}

void tern_spec_free(tern_spec *sp) {
    if (!sp) return;
    free(sp->hist);
    free(sp->tab);
    free(sp->logits);
    free(sp->ids);
    free(sp->probs);
    free(sp->toks);
    free(sp);
}

void tern_spec_reset(tern_spec *sp) {
    if (!sp) return;
    sp->n_hist = 0;
    sp->n_indexed = 0;
    for (size_t i = 0; i < sp->tab_cap; i++) sp->tab[i].end = -1;
    sp->tab_used = 0;
}

void tern_spec_get_stats(const tern_spec *sp, tern_spec_stats *st) {
    if (!st) return;
    if (sp) *st = sp->st;
    else memset(st, 0, sizeof *st);
}

void tern_spec_reset_stats(tern_spec *sp) {
    if (sp) memset(&sp->st, 0, sizeof sp->st);
}

int tern_spec_n_history(const tern_spec *sp) { return sp ? sp->n_hist : 0; }

const tern_model *spec_model(const tern_spec *sp) { return sp ? sp->m : NULL; }

int tern_spec_add(tern_spec *sp, const int32_t *tok, int n, tern_err *err) {
    if (!sp) return tern_err_set(err, TERN_E_ARG, "tern_spec_add: the spec is NULL");
    if (n < 0) return tern_err_set(err, TERN_E_ARG, "tern_spec_add: n %d, expected >= 0", n);
    if (!tok && n) return tern_err_set(err, TERN_E_ARG, "tern_spec_add: tok is NULL with n %d", n);
    if (n == 0) return TERN_OK;
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= sp->n_vocab)
            return tern_err_set(err, TERN_E_ARG, "tern_spec_add: token %d at index %d, expected 0..%d", tok[i], i,
                                sp->n_vocab - 1);
    int rc = hist_reserve(sp, n, err);
    if (rc) return rc;
    memcpy(sp->hist + sp->n_hist, tok, (size_t)n * sizeof *tok);
    sp->n_hist += n;
    return TERN_OK;
}

/* ---- verification ---------------------------------------------------------------------------- */

/* Draw from dist (ids/probs, n entries) with token x removed, renormalised. Uses no random number
 * when one candidate is left. Returns -1 if nothing is left (x had all the mass). */
static int32_t draw_residual(tern_sampler *smp, const int32_t *ids, const float *probs, int n, int32_t x) {
    double sum = 0.0;
    int left = 0, only = -1;
    for (int i = 0; i < n; i++)
        if (ids[i] != x && probs[i] > 0.0f) {
            sum += probs[i];
            left++;
            only = i;
        }
    if (left == 0) return -1;
    if (left == 1) return ids[only];
    const double u = samp_uniform(smp) * sum;
    double acc = 0.0;
    int last = only;
    for (int i = 0; i < n; i++) {
        if (ids[i] == x || !(probs[i] > 0.0f)) continue;
        acc += probs[i];
        last = i;
        if (u < acc) return ids[i];
    }
    return ids[last];                                 /* u within rounding of the total */
}

/* Common part of step and verify: validates, evaluates [last, draft[0..k)], accepts, truncates.
 * sp->toks[1..k] holds the draft. *n_acc: drafted tokens accepted. */
static int spec_run(tern_spec *sp, tern_session *s, tern_sampler *smp, int32_t last, int k, int n_max, int32_t *out,
                    int *n_out, int *n_acc, tern_err *err) {
    const int P = tern_session_pos(s);
    const size_t V = (size_t)sp->n_vocab;
    sp->toks[0] = last;
    const float *bonus = NULL;                        /* logits after the last drafted token */
    int rc = TERN_OK;
    if (k == 0) {                                     /* no draft: exactly a plain decode step */
        tern_err e = {0};                             /* its own: err may hold an earlier error */
        bonus = tern_session_eval(s, &last, 1, &e);
        if (!bonus) return tern_err_set(err, e.code, "%s", e.msg);
    } else {
        rc = tern_session_eval_all(s, sp->toks, k + 1, sp->logits, err);
        if (rc) return rc;
        bonus = sp->logits + (size_t)k * V;
    }
    int n = 0, a = 0;
    bool done = false;                                /* a rejection or an accepted EOG ended the walk */
    for (int i = 1; i <= k && !done; i++) {
        const float *L = sp->logits + (size_t)(i - 1) * V;
        const int32_t x = sp->toks[i];
        const int nc = samp_dist(smp, L, sp->ids, sp->probs, (int)V);
        TERN_ASSERT(nc >= 1);
        float px = 0.0f;
        for (int c = 0; c < nc; c++)
            if (sp->ids[c] == x) { px = sp->probs[c]; break; }
        /* accept with probability p(x): no random number when p(x) is 0 or 1 (greedy never draws) */
        const bool accept = px >= 1.0f || (px > 0.0f && samp_uniform(smp) < (double)px);
        int32_t t = x;
        if (accept) {
            a++;
            if (!sp->p.ignore_eos && tern_token_is_eog(sp->m, x)) done = true;
        } else {
            t = draw_residual(smp, sp->ids, sp->probs, nc, x);
            if (t < 0) t = x;                         /* p(x) rounded below 1 but held all the mass */
            done = true;
        }
        tern_sampler_accept(smp, t);
        out[n++] = t;
    }
    if (!done) {                                      /* all k accepted: the target's next token */
        const int32_t t = tern_sampler_sample(smp, bonus);
        tern_sampler_accept(smp, t);
        out[n++] = t;
    }
    TERN_ASSERT(n >= 1 && n <= n_max);
    /* the session keeps last + out[0..n-1): position P + n */
    rc = tern_session_truncate(s, P + n, err);
    if (rc) return rc;
    sp->hist[sp->n_hist++] = last;                    /* room reserved by the caller */
    memcpy(sp->hist + sp->n_hist, out, (size_t)(n - 1) * sizeof *out);
    sp->n_hist += n - 1;
    sp->st.n_steps++;
    sp->st.n_drafted += k;
    sp->st.n_accepted += a;
    sp->st.n_tokens += n;
    *n_out = n;
    *n_acc = a;
    return TERN_OK;
}

/* Checks shared by step and verify; returns the draft length limit (>= 0) or a TERN_E_*. */
static int spec_check(const char *fn, tern_spec *sp, tern_session *s, tern_sampler *smp, int32_t last, int n_max,
                      int32_t *out, int *n_out, tern_err *err) {
    if (!sp || !s || !smp || !out || !n_out)
        return tern_err_set(err, TERN_E_ARG, "%s: %s is NULL", fn,
                            !sp ? "the spec" : !s ? "the session" : !smp ? "the sampler" : !out ? "out" : "n_out");
    *n_out = 0;
    if (tern_session_model(s) != sp->m)   /* its logits would not fit the spec's buffers */
        return tern_err_set(err, TERN_E_ARG, "%s: the session is of another model than the spec's "
                                             "(tern_spec_init)", fn);
    if (tern_sampler_n_vocab(smp) != sp->n_vocab)
        return tern_err_set(err, TERN_E_ARG, "%s: the sampler is for %d tokens, the model has %d", fn,
                            (int)tern_sampler_n_vocab(smp), (int)sp->n_vocab);
    if (n_max < 1) return tern_err_set(err, TERN_E_ARG, "%s: n_max %d, expected >= 1", fn, n_max);
    const int P = tern_session_pos(s), n_ctx = tern_session_n_ctx(s);
    if (sp->n_hist != P)
        return tern_err_set(err, TERN_E_ARG,
                            "%s: the drafter's history has %d tokens, the session %d (tern_spec_add the "
                            "tokens evaluated outside the step)", fn, sp->n_hist, P);
    if (P >= n_ctx) return tern_err_set(err, TERN_E_RANGE, "%s: context full (%d tokens)", fn, n_ctx);
    if (last < 0 || last >= sp->n_vocab)
        return tern_err_set(err, TERN_E_RANGE, "%s: token %d, expected 0..%d", fn, last, sp->n_vocab - 1);
    int rc = hist_reserve(sp, TERN_SPEC_DRAFT_LIMIT + 2, err);
    if (rc) return rc;
    int k = sp->p.draft_max;
    k = TERN_MIN(k, n_max - 1);                       /* the bonus token makes k + 1 */
    k = TERN_MIN(k, n_ctx - P - 1);                   /* never write past n_ctx */
    k = TERN_MIN(k, tern_session_n_batch(s) - 1);     /* one forward */
    return k < 0 ? 0 : k;
}

int spec_lookup(tern_spec *sp, int32_t last, int32_t *draft, int k, tern_err *err) {
    if (!sp || (!draft && k > 0) || k < 0 || k > TERN_SPEC_DRAFT_LIMIT)
        return tern_err_set(err, TERN_E_ARG, "spec_lookup: bad arguments");
    int rc = hist_reserve(sp, 1, err);
    if (rc) return rc;
    sp->hist[sp->n_hist++] = last;                    /* looked up with last appended, then removed */
    const int n = spec_draft(sp, draft, k, err, &rc);
    sp->n_hist--;                                     /* the index covers ends 0 .. n_hist-1: real history */
    return rc ? rc : n;
}

int tern_spec_step(tern_spec *sp, tern_session *s, tern_sampler *smp, int32_t last, int n_max, int32_t *out,
                   int *n_out, tern_err *err) {
    int kmax = spec_check("tern_spec_step", sp, s, smp, last, n_max, out, n_out, err);
    if (kmax < 0) return kmax;
    if (sp->p.adaptive) kmax = TERN_MIN(kmax, sp->cur);
    const int k = spec_lookup(sp, last, sp->toks + 1, kmax, err);
    if (k < 0) return k;
    int a = 0;
    const int rc = spec_run(sp, s, smp, last, k, n_max, out, n_out, &a, err);
    if (rc) return rc;
    if (sp->p.adaptive && k > 0) {
        if (a == k) sp->cur = TERN_MIN(sp->p.draft_max, TERN_MAX(sp->cur, k) * 2);
        else sp->cur = TERN_MAX(1, a + 1);
    }
    return TERN_OK;
}

int tern_spec_verify(tern_spec *sp, tern_session *s, tern_sampler *smp, int32_t last, const int32_t *draft,
                     int n_draft, int n_max, int32_t *out, int *n_out, tern_err *err) {
    const int kmax = spec_check("tern_spec_verify", sp, s, smp, last, n_max, out, n_out, err);
    if (kmax < 0) return kmax;
    if (n_draft < 0 || (n_draft > 0 && !draft) || n_draft > sp->p.draft_max)
        return tern_err_set(err, TERN_E_ARG, "tern_spec_verify: n_draft %d, expected 0..%d (draft_max)", n_draft,
                            sp->p.draft_max);
    const int k = TERN_MIN(n_draft, kmax);
    for (int i = 0; i < k; i++) {
        if (draft[i] < 0 || draft[i] >= sp->n_vocab)
            return tern_err_set(err, TERN_E_RANGE, "tern_spec_verify: draft token %d at %d, expected 0..%d", draft[i], i,
                                sp->n_vocab - 1);
        sp->toks[1 + i] = draft[i];
    }
    int a = 0;
    return spec_run(sp, s, smp, last, k, n_max, out, n_out, &a, err);
}
