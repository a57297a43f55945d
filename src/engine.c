/* engine.c: the public API of include/tern.h on top of the model, runtime and tokenizer layers.
 * A session owns its KV cache, arch state and forward workspace, all allocated at creation; eval
 * feeds tokens in chunks of n_batch columns through the arch's forward (prefill = many columns,
 * decode = one) with the model's eval lock held (the thread pool is shared by all sessions of a
 * model) and, in debug builds, the no-allocation guard armed. */
#include "tern.h"

#include "core/core.h"
#include "model/blocks.h"
#include "model/model.h"
#include "runtime/pool.h"
#include "tokenizer/tok.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ==== model ================================================================================== */

void tern_model_opts_default(tern_model_opts *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->numerics = TERN_NUMERICS_FAST;
    o->ptq1_0 = TERN_PTQ1_0_AUTO;
}

int tern_set_isa(const char *name, tern_err *err) {
    if (!name || !*name) {
        kern_auto_isa();
        return TERN_OK;
    }
    return kern_force_isa(name, err);
}

int tern_model_load(tern_model **out, const char *path, const tern_model_opts *opts, tern_err *err) {
    if (!out) return tern_err_set(err, TERN_E_ARG, "tern_model_load: out is NULL");
    *out = NULL;
    tern_model_opts def;
    if (!opts) { tern_model_opts_default(&def); opts = &def; }
    if (opts->numerics < TERN_NUMERICS_FAST || opts->numerics > TERN_NUMERICS_F32)
        return tern_err_set(err, TERN_E_ARG, "numerics %d, expected fast, ggml or f32", (int)opts->numerics);
    if (opts->ptq1_0 < TERN_PTQ1_0_AUTO || opts->ptq1_0 > TERN_PTQ1_0_DIRECT)
        return tern_err_set(err, TERN_E_ARG, "ptq1_0 %d, expected auto, transcode or direct", (int)opts->ptq1_0);
    if (!path) return tern_err_set(err, TERN_E_ARG, "tern_model_load: path is NULL");
    if (opts->n_threads < 0 || opts->n_threads > 1024)
        return tern_err_set(err, TERN_E_ARG, "n_threads %d, expected 0 (the CPUs this process may run on) or 1..1024",
                            opts->n_threads);
    int nt = opts->n_threads;
    if (nt == 0) nt = TERN_MIN(pool_cpus_available(), 256);
    model_load_opts lo = {
        .n_threads = nt,
        .use_mmap = opts->use_mmap,
        .numerics = opts->numerics == TERN_NUMERICS_GGML ? KQ_GGML : opts->numerics == TERN_NUMERICS_F32 ? KQ_F32 : KQ_FAST,
        .progress = opts->progress,
        .mem_available = opts->mem_available,
        .ptq1_0 = opts->ptq1_0 == TERN_PTQ1_0_DIRECT      ? MODEL_PTQ1_0_DIRECT
                  : opts->ptq1_0 == TERN_PTQ1_0_TRANSCODE ? MODEL_PTQ1_0_TRANSCODE
                                                          : MODEL_PTQ1_0_AUTO,
    };
    (void)kern_isa();   /* choose the kernel table now: its start-up self-check allocates, and the first
                           kern_matmul would otherwise run it inside a token loop (debug no-alloc guard) */
    return model_load(out, path, &lo, err);
}

void tern_model_free(tern_model *m) { model_free(m); }

int tern_model_meta_str(const tern_model *m, const char *key, char *buf, size_t cap) {
    if (!m || !key || (!buf && cap > 0)) return TERN_E_ARG;
    const gguf_kv *kv = gguf_find_kv(m->g, key);
    if (!kv || kv->type != GGUF_T_STRING) return TERN_E_RANGE;
    const gguf_str v = kv->v.s;
    if (buf && cap) {
        const size_t k = v.n < cap - 1 ? v.n : cap - 1;
        memcpy(buf, v.p, k);
        buf[k] = '\0';
    }
    return v.n > (uint64_t)INT32_MAX ? TERN_E_RANGE : (int)v.n;
}

void tern_model_get_info(const tern_model *m, tern_model_info *info) {
    if (!info) return;
    memset(info, 0, sizeof *info);
    if (!m) return;
    info->arch = m->arch->name;
    info->name = m->name;
    info->n_vocab = m->hp.n_vocab;
    info->n_ctx_train = m->hp.n_ctx_train;
    info->n_embd = m->hp.n_embd;
    info->n_layer = m->hp.n_layer;
    info->n_head = m->hp.n_head;
    info->n_head_kv = m->hp.n_head_kv;
    info->bos = tok_bos(m->vocab);
    info->eos = tok_eos(m->vocab);
    info->add_bos = tok_add_bos(m->vocab);
    info->weight_bytes = m->weight_bytes;
    info->bytes_per_token = m->bytes_per_token;
    info->isa = kern_isa();
    info->n_threads = m->n_threads;
    info->has_chat_template = tok_chat_template(m->vocab) != NULL;
}

/* ==== tokens ================================================================================= */

int tern_tokenize(const tern_model *m, const char *text, size_t len, bool add_bos, bool parse_special, int32_t *out,
                  int n_max, int *n_out, tern_err *err) {
    if (!m) return tern_err_set(err, TERN_E_ARG, "tern_tokenize: model is NULL");
    if (!text && len) return tern_err_set(err, TERN_E_ARG, "tern_tokenize: text is NULL with len %zu (expected len 0)", len);
    if (n_max < 0) return tern_err_set(err, TERN_E_ARG, "tern_tokenize: n_max is %d (expected >= 0)", n_max);
    if (!out && n_max) return tern_err_set(err, TERN_E_ARG, "tern_tokenize: out is NULL with n_max %d (expected n_max 0)", n_max);
    if (!n_out) return tern_err_set(err, TERN_E_ARG, "tern_tokenize: n_out is NULL");
    return tok_encode(m->vocab, text ? text : "", len, parse_special, add_bos, out, n_max, n_out, err);
}

int tern_token_piece(const tern_model *m, int32_t id, bool special, char *buf, int cap) {
    if (!m || (!buf && cap > 0)) return TERN_E_ARG;   /* NULL buf with cap 0: the size query */
    return tok_piece(m->vocab, id, special, buf, cap);
}

bool tern_token_is_eog(const tern_model *m, int32_t id) { return m && tok_is_eog(m->vocab, id); }

void tern_detok_init(tern_detok *d) {
    if (d) memset(d, 0, sizeof *d);
}

/* tern_detok mirrors tok_stream: pend/n_pend, and n_out holds its two flags (0: nothing put yet;
 * 1: started; 2: started at BOS, the next SPM piece drops its space prefix). */
static void detok_to_stream(const tern_detok *d, tok_stream *s) {
    tok_stream_init(s);
    memcpy(s->pend, d->pend, sizeof s->pend);
    s->n_pend = d->n_pend;
    s->started = d->n_out != 0;
    s->first = d->n_out == 2;
}

/* A stream tern_detok_init and these functions can have made: at most 3 held bytes, flags 0..2. */
static bool detok_valid(const tern_detok *d) { return d->n_pend >= 0 && d->n_pend <= 3 && d->n_out >= 0 && d->n_out <= 2; }

int tern_detok_put(const tern_model *m, tern_detok *d, int32_t id, char *out, int cap) {
    if (!m || !d || (!out && cap > 0) || !detok_valid(d)) return TERN_E_ARG;
    tok_stream s;
    detok_to_stream(d, &s);
    const int r = tok_stream_put(m->vocab, &s, id, out, cap);
    if (r < 0) return r;
    memcpy(d->pend, s.pend, sizeof d->pend);
    d->n_pend = s.n_pend;
    d->n_out = s.first ? 2 : 1;
    return r;
}

int tern_detok_flush(tern_detok *d, char *out, int cap) {
    if (!d || (!out && cap > 0) || !detok_valid(d)) return TERN_E_ARG;
    tok_stream s;
    detok_to_stream(d, &s);
    const int r = tok_stream_flush(&s, out, cap);
    if (r < 0) return r;
    d->n_pend = 0;
    return r;
}

/* ==== session ================================================================================ */

/* One forward of the model (a session's own or a batch of sessions), counted in the per-op
 * profile's total and forward count when profiling is on (tern_profile_enable). */
static int forward(const model_t *m, model_ws *ws, const model_batch *b) {
    const double t0 = g_blk_prof.on ? tern_time_s() : 0;
    const int rc = m->arch->forward(m, ws, b);
    if (g_blk_prof.on) {
        g_blk_prof.total_s += tern_time_s() - t0;
        g_blk_prof.n_forward++;
    }
    return rc;
}

struct tern_session {
    tern_model *m;
    int n_ctx, n_batch;
    int pos;                 /* tokens in the sequence */
    kv_cache kv;
    void *state;             /* arch recurrent state or NULL */
    model_ws ws;
    float *logits;           /* (n_vocab) logits of the last evaluated token */
    int32_t *bpos;           /* (n_batch) positions of a chunk */
    kv_cache **bkv;          /* (n_batch) = &kv */
    void **bstate;           /* (n_batch) = state */
    bool *bwant;             /* (n_batch) */
};

void tern_session_opts_default(tern_session_opts *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->n_batch = 512;                  /* n_ctx 0: session_ctx */
}

/* The context of n_ctx 0: 4096, or the model's trained length when that is shorter (text past it
 * degrades; a longer trained length, 32k to 256k in real models, would size a KV cache of GBs). */
static int session_ctx(const tern_model *m, int n_ctx) {
    if (n_ctx > 0) return n_ctx;
    const int train = m->hp.n_ctx_train;
    return train > 0 && train < 4096 ? train : 4096;
}

void tern_session_mem(const tern_model *m, const tern_session_opts *o, uint64_t *kv_out, uint64_t *state_out,
                      uint64_t *avail_out) {
    tern_session_opts def;
    if (!o) { tern_session_opts_default(&def); o = &def; }
    if (!m) {   /* no model: nothing to size */
        if (kv_out) *kv_out = 0;
        if (state_out) *state_out = 0;
        if (avail_out) *avail_out = 0;
        return;
    }
    const int n_ctx = session_ctx(m, o->n_ctx);
    const bool kv_f32 = o->kv_f32 || m->numerics == KQ_F32;
    const model_hparams *hp = &m->hp;
    if (kv_out)
        *kv_out = m->n_layer_kv > 0 ? kv_bytes(m->n_layer_kv, n_ctx, hp->n_head_kv, hp->n_embd_head_k, hp->n_embd_head_v, kv_f32)
                                    : 0;
    if (state_out) *state_out = m->arch->state_bytes ? m->arch->state_bytes(m, n_ctx, o->n_checkpoints) : 0;
    if (avail_out) *avail_out = model_mem_available(m);
}

int tern_session_init(tern_session **out, tern_model *m, const tern_session_opts *o, tern_err *err) {
    if (!out || !m) return tern_err_set(err, TERN_E_ARG, "tern_session_init: %s is NULL", !out ? "out" : "model");
    *out = NULL;
    tern_session_opts def;
    if (!o) { tern_session_opts_default(&def); o = &def; }
    if (o->n_ctx < 0)
        return tern_err_set(err, TERN_E_ARG, "n_ctx %d, expected 0 (4096, or the model's trained length if shorter) or more",
                            o->n_ctx);
    if (o->n_batch < 0) return tern_err_set(err, TERN_E_ARG, "n_batch %d, expected 0 (512) or more", o->n_batch);
    const int n_ctx = session_ctx(m, o->n_ctx);
    int n_batch = o->n_batch > 0 ? o->n_batch : 512;
    if (o->n_checkpoints < 0 || o->n_checkpoints > 64)
        return tern_err_set(err, TERN_E_ARG, "n_checkpoints %d, expected 0..64", o->n_checkpoints);
    if (n_ctx > (1 << 24)) return tern_err_set(err, TERN_E_ARG, "n_ctx %d, expected at most %d", n_ctx, 1 << 24);
    if (n_batch > n_ctx) n_batch = n_ctx;             /* clamped first: a larger n_batch than n_ctx is no error */
    if (n_batch > (1 << 16))
        return tern_err_set(err, TERN_E_ARG, "n_batch %d with n_ctx %d, expected at most %d", n_batch, n_ctx, 1 << 16);
    const bool kv_f32 = o->kv_f32 || m->numerics == KQ_F32;
    const model_hparams *hp = &m->hp;
    const int hk = hp->n_head_kv, dk = hp->n_embd_head_k, dv = hp->n_embd_head_v;
    /* the KV cache and the recurrent state together, before either is allocated */
    const uint64_t need = m->n_layer_kv > 0 ? kv_bytes(m->n_layer_kv, n_ctx, hk, dk, dv, kv_f32) : 0;
    const uint64_t need_st = m->arch->state_bytes ? m->arch->state_bytes(m, n_ctx, o->n_checkpoints) : 0;
    const uint64_t avail = model_mem_available(m);
    if (avail && need + need_st > avail) {
        char st[96] = "";
        if (need_st) snprintf(st, sizeof st, " and recurrent state %.1f MB", (double)need_st / 1e6);
        /* the advice that can help: the recurrent state does not shrink with the context */
        const char *fix = need_st <= avail        ? "lower n_ctx"
                          : o->n_checkpoints > 0 ? "lower n_checkpoints, or make more memory available"
                                                 : "the recurrent state alone does not fit, whatever n_ctx: make more "
                                                   "memory available";
        return tern_err_set(err, TERN_E_NOMEM, "KV cache for n_ctx %d needs %.1f MB (%s)%s, only %.1f MB available: %s",
                            n_ctx, (double)need / 1e6, kv_f32 ? "f32" : "f16", st, (double)avail / 1e6, fix);
    }
    tern_session *s = calloc(1, sizeof *s);
    if (!s) return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    int rc;
    if (m->n_layer_kv > 0 && (rc = kv_init(&s->kv, m->n_layer_kv, n_ctx, hk, dk, dv, kv_f32, err))) goto fail;
    if (m->arch->state_init && (rc = m->arch->state_init(m, &s->state, n_ctx, o->n_checkpoints, err))) goto fail;
    if ((rc = model_ws_init(&s->ws, m, n_batch, n_ctx, err))) goto fail;
    s->logits = tern_alloc_aligned((size_t)hp->n_vocab * sizeof(float));
    s->bpos = calloc((size_t)n_batch, sizeof *s->bpos);
    s->bkv = calloc((size_t)n_batch, sizeof *s->bkv);
    s->bstate = calloc((size_t)n_batch, sizeof *s->bstate);
    s->bwant = calloc((size_t)n_batch, sizeof *s->bwant);
    if (!s->logits || !s->bpos || !s->bkv || !s->bstate || !s->bwant) {
        rc = tern_err_set(err, TERN_E_NOMEM, "out of memory (session buffers)");
        goto fail;
    }
    for (int i = 0; i < n_batch; i++) {
        s->bkv[i] = &s->kv;
        s->bstate[i] = s->state;
    }
    *out = s;
    return TERN_OK;
fail:
    tern_session_free(s);
    return rc;
}

void tern_session_free(tern_session *s) {
    if (!s) return;
    kv_free(&s->kv);
    if (s->state && s->m->arch->state_free) s->m->arch->state_free(s->state);
    model_ws_free(&s->ws);
    tern_free_aligned(s->logits);
    free(s->bpos);
    free(s->bkv);
    free(s->bstate);
    free(s->bwant);
    free(s);
}

int tern_session_n_ctx(const tern_session *s) { return s ? s->n_ctx : 0; }
int tern_session_n_batch(const tern_session *s) { return s ? s->n_batch : 0; }
int tern_session_pos(const tern_session *s) { return s ? s->pos : 0; }

const tern_model *tern_session_model(const tern_session *s) { return s ? s->m : NULL; }

/* Evaluate tok[0..n) in chunks; logits of every position to all_logits (n * n_vocab) when given,
 * else the last position's to s->logits. */
static int session_eval(tern_session *s, const int32_t *tok, int n, float *all_logits, const char *fn,
                        tern_err *err) {
    const model_t *m = s->m;
    if (n <= 0) return tern_err_set(err, TERN_E_ARG, "%s: n is %d (expected at least one token)", fn, n);
    if (!tok) return tern_err_set(err, TERN_E_ARG, "%s: tok is NULL with n = %d", fn, n);
    if (n > s->n_ctx - s->pos)
        return tern_err_set(err, TERN_E_RANGE, "context full: position %d + %d token%s > n_ctx %d", s->pos, n,
                            n == 1 ? "" : "s", s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= m->hp.n_vocab)
            return tern_err_set(err, TERN_E_RANGE, "token %d at index %d: expected 0..%d", tok[i], i, m->hp.n_vocab - 1);
    pthread_mutex_lock(&s->m->eval_lock);
    tern_noalloc_enter();
    int rc = TERN_OK;
    for (int i0 = 0; i0 < n && rc == TERN_OK; i0 += s->n_batch) {
        const int nb = TERN_MIN(s->n_batch, n - i0);
        for (int c = 0; c < nb; c++) {
            s->bpos[c] = s->pos + c;
            s->bwant[c] = all_logits ? true : (i0 + c == n - 1);
        }
        model_batch b = {
            .n = nb,
            .tok = tok + i0,
            .pos = s->bpos,
            .kv = s->bkv,
            .state = s->bstate,
            .want_logits = s->bwant,
            .logits = all_logits ? all_logits + (size_t)i0 * (size_t)m->hp.n_vocab : s->logits,
        };
        rc = forward(m, &s->ws, &b);
        if (rc == TERN_OK) s->pos += nb;
    }
    tern_noalloc_leave();
    pthread_mutex_unlock(&s->m->eval_lock);
    if (rc) return tern_err_set(err, rc, "forward failed at position %d", s->pos);
    if (all_logits) memcpy(s->logits, all_logits + (size_t)(n - 1) * (size_t)m->hp.n_vocab,
                           (size_t)m->hp.n_vocab * sizeof(float));
    return TERN_OK;
}

const float *tern_session_eval(tern_session *s, const int32_t *tok, int n, tern_err *err) {
    if (!s) { tern_err_set(err, TERN_E_ARG, "tern_session_eval: session is NULL"); return NULL; }
    return session_eval(s, tok, n, NULL, "tern_session_eval", err) == TERN_OK ? s->logits : NULL;
}

int tern_session_eval_all(tern_session *s, const int32_t *tok, int n, float *logits, tern_err *err) {
    if (!s || !logits) return tern_err_set(err, TERN_E_ARG, "tern_session_eval_all: %s is NULL", !s ? "the session" : "logits");
    return session_eval(s, tok, n, logits, "tern_session_eval_all", err);
}

int tern_batch_eval(tern_session *const *ss, const int32_t *tok, int n, float *logits, tern_err *err) {
    if (n < 1) return tern_err_set(err, TERN_E_ARG, "tern_batch_eval: n %d, expected >= 1 (one token per session)", n);
    return tern_batch_eval_seqs(ss, tok, NULL, n, logits, err);
}

/* The batched forward of tern_batch_eval (n_tok NULL: one token each) and of mixed steps (a
 * prefill chunk beside decode tokens): the columns of session i are consecutive, at positions
 * pos_i .. pos_i + n_tok[i] - 1 (model_batch's contract), and only each session's last column
 * asks for logits, packed in session order. Scratch is sessions[0]'s. */
int tern_batch_eval_seqs(tern_session *const *ss, const int32_t *tok, const int *n_tok, int n_seq, float *logits,
                         tern_err *err) {
    if (n_seq < 1) return tern_err_set(err, TERN_E_ARG, "tern_batch_eval: %d sessions, expected >= 1", n_seq);
    if (!ss || !tok || !logits || !ss[0])
        return tern_err_set(err, TERN_E_ARG, "tern_batch_eval: %s is NULL",
                            !ss ? "sessions" : !tok ? "tok" : !logits ? "logits" : "sessions[0]");
    tern_session *s0 = ss[0];
    const model_t *m = s0->m;
    int n = 0;   /* columns */
    for (int i = 0; i < n_seq; i++) {
        const int k = n_tok ? n_tok[i] : 1;
        if (k < 1) return tern_err_set(err, TERN_E_ARG, "session %d: %d tokens, expected >= 1", i, k);
        if (k > s0->n_batch - n)
            return tern_err_set(err, TERN_E_ARG, "batch of %d columns and more > n_batch %d of the first session",
                                n + k, s0->n_batch);
        if (!ss[i] || ss[i]->m != m) return tern_err_set(err, TERN_E_ARG, "session %d: NULL or another model", i);
        for (int j = 0; j < i; j++)
            if (ss[j] == ss[i]) return tern_err_set(err, TERN_E_ARG, "session %d appears twice (also at %d)", i, j);
        if (k > ss[i]->n_ctx - ss[i]->pos)
            return tern_err_set(err, TERN_E_RANGE, "session %d: context full (position %d + %d token%s > n_ctx %d)", i,
                                ss[i]->pos, k, k == 1 ? "" : "s", ss[i]->n_ctx);
        if (k > s0->n_ctx - ss[i]->pos)
            return tern_err_set(err, TERN_E_ARG, "session %d at position %d + %d token%s: beyond the first session's n_ctx %d",
                                i, ss[i]->pos, k, k == 1 ? "" : "s", s0->n_ctx);
        for (int c = 0; c < k; c++)
            if (tok[n + c] < 0 || tok[n + c] >= m->hp.n_vocab)
                return tern_err_set(err, TERN_E_RANGE, "token %d for session %d (index %d): expected 0..%d", tok[n + c], i,
                                    c, m->hp.n_vocab - 1);
        n += k;
    }
    pthread_mutex_lock(&s0->m->eval_lock);
    tern_noalloc_enter();
    for (int i = 0, c = 0; i < n_seq; i++) {
        const int k = n_tok ? n_tok[i] : 1;
        for (int t = 0; t < k; t++, c++) {
            s0->bpos[c] = ss[i]->pos + t;
            s0->bkv[c] = &ss[i]->kv;
            s0->bstate[c] = ss[i]->state;   /* recurrent archs: each column its own sequence state */
            s0->bwant[c] = t == k - 1;
        }
    }
    model_batch b = {.n = n, .tok = tok, .pos = s0->bpos, .kv = s0->bkv, .state = s0->bstate,
                     .want_logits = s0->bwant, .logits = logits};
    const int rc = forward(m, &s0->ws, &b);
    for (int c = 0; c < n; c++) {       /* back to the session's own */
        s0->bkv[c] = &s0->kv;
        s0->bstate[c] = s0->state;
    }
    tern_noalloc_leave();
    pthread_mutex_unlock(&s0->m->eval_lock);
    if (rc) return tern_err_set(err, rc, "batched forward failed");
    for (int i = 0; i < n_seq; i++) {
        ss[i]->pos += n_tok ? n_tok[i] : 1;
        memcpy(ss[i]->logits, logits + (size_t)i * (size_t)m->hp.n_vocab, (size_t)m->hp.n_vocab * sizeof(float));
    }
    return TERN_OK;
}

#include "model/gdn.h"

void tern_model_split_rule(const tern_model *m, int *block, int *run_min) {
    const bool recurrent = m && m->arch->state_init;
    if (block) *block = recurrent ? GDN_CHUNK : 0;
    if (run_min) *run_min = recurrent ? GDN_CHUNK_MIN : 0;
}

int tern_session_truncate(tern_session *s, int pos, tern_err *err) {
    if (!s) return tern_err_set(err, TERN_E_ARG, "tern_session_truncate: session is NULL");
    if (pos < 0 || pos > s->pos)
        return tern_err_set(err, TERN_E_RANGE, "truncate to %d: expected 0..%d (current position)", pos, s->pos);
    if (s->state) {
        if (pos == 0) {
            if (s->m->arch->state_reset) s->m->arch->state_reset(s->state);
        } else if (pos != s->pos) {
            /* the restore replays on the model's pool, which one forward or restore uses at a time */
            pthread_mutex_lock(&s->m->eval_lock);
            int rc = s->m->arch->state_truncate ? s->m->arch->state_truncate(s->state, pos, err)
                                                : tern_err_set(err, TERN_E_RANGE, "truncate: state not restorable");
            pthread_mutex_unlock(&s->m->eval_lock);
            if (rc) return rc;
        }
    }
    s->pos = pos;   /* KV rows past pos are never read and get overwritten */
    return TERN_OK;
}

int tern_session_checkpoint(tern_session *s, tern_err *err) {
    if (!s) return tern_err_set(err, TERN_E_ARG, "tern_session_checkpoint: session is NULL");
    if (s->state && s->m->arch->state_checkpoint) return s->m->arch->state_checkpoint(s->state, s->pos, err);
    return TERN_OK;   /* pure attention: every position is restorable by truncation */
}

int tern_session_restorable(const tern_session *s, int pos) {
    if (!s || pos <= 0) return 0;
    if (pos > s->pos) pos = s->pos;
    return s->state && s->m->arch->state_restorable ? s->m->arch->state_restorable(s->state, pos) : pos;
}

void tern_session_reset(tern_session *s) {
    if (!s) return;
    if (s->state && s->m->arch->state_reset) s->m->arch->state_reset(s->state);
    s->pos = 0;
}

/* ==== benchmarking helpers =================================================================== */

#include "runtime/membw.h"

static int membw_run(int n_threads, size_t bytes, int reps, double *passes, double *gbs, tern_err *err) {
    if (n_threads < 0 || n_threads > 1024)
        return tern_err_set(err, TERN_E_ARG, "n_threads %d, expected 0 (the CPUs this process may run on) or 1..1024",
                            n_threads);
    if (n_threads == 0) n_threads = TERN_MIN(pool_cpus_available(), 256);
    tern_pool *p = NULL;
    int rc = pool_init(&p, n_threads, err);
    if (rc) return rc;
    rc = membw_read_passes(p, bytes, reps, passes, gbs, err);
    pool_free(p);
    return rc;
}

int tern_membw(int n_threads, size_t bytes, int reps, double *gbs, tern_err *err) {
    if (!gbs) return tern_err_set(err, TERN_E_ARG, "tern_membw: gbs is NULL");
    return membw_run(n_threads, bytes, reps, NULL, gbs, err);
}

int tern_membw_passes(int n_threads, size_t bytes, int reps, double *passes, tern_err *err) {
    if (!passes) return tern_err_set(err, TERN_E_ARG, "tern_membw_passes: passes is NULL");
    double best;
    return membw_run(n_threads, bytes, reps, passes, &best, err);
}

/* ==== chat templates ========================================================================= */

#include "tokenizer/chat.h"

/* The template family for tmpl (NULL: the model's) and msgs as the tokenizer's chat_msg array
 * (*cm: malloc'd, caller frees). */
static int chat_prepare(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs, chat_tmpl *t,
                        chat_msg **cm, tern_err *err) {
    int rc = chat_tmpl_resolve(m->vocab, tmpl, t, err);
    if (rc) return rc;
    *cm = calloc((size_t)(n_msgs > 0 ? n_msgs : 1), sizeof **cm);
    if (!*cm) return tern_err_set(err, TERN_E_NOMEM, "out of memory for %d chat messages", n_msgs);
    for (int i = 0; i < n_msgs; i++) {
        const char *r = msgs[i].role;
        if (!r || (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))) {
            free(*cm);
            *cm = NULL;
            if (!r) return tern_err_set(err, TERN_E_ARG, "message %d: role is NULL", i);
            return tern_err_set(err, TERN_E_ARG, "message %d: unknown role '%.40s' (expected system, user, assistant or tool)", i, r);
        }
        if (!msgs[i].content) {
            free(*cm);
            *cm = NULL;
            return tern_err_set(err, TERN_E_ARG, "message %d (%s): content is NULL (expected a string, \"\" for none)", i, r);
        }
        (*cm)[i].role = r;
        (*cm)[i].content = msgs[i].content;
    }
    return TERN_OK;
}

/* Hands text (n bytes and a NUL, malloc'd; freed here) to a caller's buffer of cap bytes: *n_out =
 * n always, so a caller can size a second call; TERN_E_RANGE when n + 1 > cap. */
static int copy_out(char *text, size_t n, char *out, size_t cap, size_t *n_out, const char *what, tern_err *err) {
    *n_out = n;
    if (n + 1 > cap) {
        free(text);
        return tern_err_set(err, TERN_E_RANGE, "%s needs %zu bytes, buffer has %zu", what, n + 1, cap);
    }
    memcpy(out, text, n + 1);
    free(text);
    return TERN_OK;
}

int tern_chat_apply(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs,
                    bool add_generation_prompt, bool enable_thinking, char *out, size_t cap, size_t *n_out,
                    tern_err *err) {
    if (!m || (!msgs && n_msgs) || n_msgs < 0 || !n_out || (!out && cap))
        return tern_err_set(err, TERN_E_ARG, "tern_chat_apply: %s",
                            !m ? "the model is NULL" : n_msgs < 0 ? "n_msgs is negative" : !msgs ? "msgs is NULL with n_msgs > 0"
                            : !n_out ? "n_out is NULL" : "out is NULL with cap > 0");
    chat_tmpl t;
    chat_msg *cm = NULL;
    int rc = chat_prepare(m, tmpl, msgs, n_msgs, &t, &cm, err);
    if (rc) return rc;
    const chat_opts co = {.add_generation_prompt = add_generation_prompt, .enable_thinking = enable_thinking};
    char *text = NULL;
    size_t n = 0;
    rc = chat_render(t, cm, n_msgs, &co, &text, &n, err);
    free(cm);
    if (rc) return rc;
    return copy_out(text, n, out, cap, n_out, "chat template output", err);
}

int tern_chat_tools_section(const char *tmpl, const char *tools_json, char *out, size_t cap, size_t *n_out,
                            tern_err *err) {
    if (!tmpl || !n_out || (!out && cap))
        return tern_err_set(err, TERN_E_ARG, "tern_chat_tools_section: %s",
                            !tmpl ? "the template name is NULL" : !n_out ? "n_out is NULL" : "out is NULL with cap > 0");
    chat_tmpl t;
    int rc = chat_tmpl_by_name(tmpl, &t, err);
    if (rc) return rc;
    char *text = NULL;
    size_t n = 0;
    if ((rc = chat_tools_section(t, tools_json, &text, &n, err))) return rc;
    return copy_out(text, n, out, cap, n_out, "tools section", err);
}

int tern_chat_tokenize(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs,
                       bool add_generation_prompt, bool enable_thinking, bool add_bos, int32_t *out, int n_max,
                       int *n_out, tern_err *err) {
    return tern_chat_tokenize_ex(m, tmpl, msgs, NULL, n_msgs, add_generation_prompt, enable_thinking, add_bos, out,
                                 n_max, n_out, err);
}

int tern_chat_tokenize_ex(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, const bool *scaffold,
                          int n_msgs, bool add_generation_prompt, bool enable_thinking, bool add_bos, int32_t *out,
                          int n_max, int *n_out, tern_err *err) {
    if (!m) return tern_err_set(err, TERN_E_ARG, "tern_chat_tokenize: the model is NULL");
    if (n_msgs < 0) return tern_err_set(err, TERN_E_ARG, "tern_chat_tokenize: n_msgs %d, expected >= 0", n_msgs);
    if (!msgs && n_msgs)
        return tern_err_set(err, TERN_E_ARG, "tern_chat_tokenize: msgs is NULL with n_msgs %d (expected 0)", n_msgs);
    if (!n_out) return tern_err_set(err, TERN_E_ARG, "tern_chat_tokenize: n_out is NULL");
    if (n_max < 0) return tern_err_set(err, TERN_E_ARG, "tern_chat_tokenize: n_max %d, expected >= 0", n_max);
    if (!out && n_max)
        return tern_err_set(err, TERN_E_ARG, "tern_chat_tokenize: out is NULL with n_max %d (expected 0: ask the size)",
                            n_max);
    chat_tmpl t;
    chat_msg *cm = NULL;
    int rc = chat_prepare(m, tmpl, msgs, n_msgs, &t, &cm, err);
    if (rc) return rc;
    const chat_opts co = {.add_generation_prompt = add_generation_prompt, .enable_thinking = enable_thinking};
    int32_t *ids = NULL;
    int n = 0;
    rc = chat_tokenize(m->vocab, t, cm, scaffold, n_msgs, &co, add_bos, &ids, &n, err);
    free(cm);
    if (rc) return rc;
    *n_out = n;
    if (n > n_max)
        rc = tern_err_set(err, TERN_E_RANGE, "tern_chat_tokenize: the prompt has %d token%s, the buffer %d", n,
                          n == 1 ? "" : "s", n_max);
    if (n && n_max > 0) memcpy(out, ids, (size_t)TERN_MIN(n, n_max) * sizeof *ids);   /* as tern_tokenize: the first n_max */
    free(ids);
    return rc;
}

/* ==== profiling ============================================================================== */

void tern_profile_enable(bool on) {
    memset(&g_blk_prof, 0, sizeof g_blk_prof);
    g_blk_prof.on = on;
}

void tern_profile_get(tern_profile *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->total_s = g_blk_prof.total_s;
    p->n_forward = g_blk_prof.n_forward;
    p->embed_s = g_blk_prof.s[BLK_PROF_EMBED];
    p->norm_s = g_blk_prof.s[BLK_PROF_NORM];
    p->quant_s = g_blk_prof.s[BLK_PROF_QUANT];
    p->matmul_s = g_blk_prof.s[BLK_PROF_MATMUL];
    p->attn_s = g_blk_prof.s[BLK_PROF_ATTN];
    p->swiglu_s = g_blk_prof.s[BLK_PROF_SWIGLU];
    p->recur_s = g_blk_prof.s[BLK_PROF_RECUR];
    for (int i = 0; i < 64; i++) p->matmul_busy_s += g_blk_prof.busy[i];
}
