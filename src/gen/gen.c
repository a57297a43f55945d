/* gen.c: the generation loop of every program (tern_gen_* in tern.h): sampling, the stop rules,
 * detokenisation and the reply's counters, over plain decoding (tern_session_eval of one token)
 * or speculative steps (tern_spec_step).
 *
 * Layer 7, on the public session, sampler, spec and token API only. State of one reply: the
 * pending token (sampled, not in the session) and whether the last reported token is in the
 * session (a speculative step appends several at once), so tern_gen_end knows what eval_last
 * must still append. */
#include "tern.h"

#include "core/core.h"
#include "spec/spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tern_gen {
    const tern_model *m;
    int32_t n_vocab;
    int32_t think_open, think_close;   /* single-token <think> / </think>, or -1 */
    tern_session *s;
    tern_sampler *smp;
    tern_spec *spec;
    tern_gen_params p;
    tern_detok dt;
    bool in_think;
    int n_think;             /* tokens sampled inside the open think block (think_budget) */
    tern_stop stop;
    int32_t pending;         /* sampled, not yet in the session; -1: none */
    int32_t last;            /* the last token reported; -1: none */
    bool last_in_session;
    int32_t step[TERN_SPEC_DRAFT_LIMIT + 2];   /* the tokens the last step appended */
    int n_step;
    int32_t ev[TERN_SPEC_DRAFT_LIMIT + 2];     /* the tokens the last sample / step call reported */
    int n_ev;
    tern_gen_stats st;
    double t_begin, t_first, t_last;
    char bad[160];           /* why the reply cannot run ("": it can): no begin, mismatched parts, a bad
                                forced id; every call then stops with TERN_STOP_ERROR and says this */
    char *text;              /* one token's text: text_cap = 3 x (the vocabulary's longest piece + 3), */
    int text_cap;            /* which tern_detok_put and tern_detok_flush always fit */
};

/* The reply stops with an error: the reason kept for the calls that take an err. */
static tern_stop gen_bad(tern_gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tern_stop gen_bad(tern_gen *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->bad, sizeof g->bad, fmt, ap);
    va_end(ap);
    g->pending = -1;
    return g->stop = TERN_STOP_ERROR;
}

void tern_gen_params_default(tern_gen_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->n_predict = -1;
    p->think_budget = -1;
}

/* The id of text when it is exactly one control token of the vocabulary, else -1. */
static int32_t single_token(const tern_model *m, const char *text) {
    int32_t ids[4];
    int n = 0;
    tern_err e = {0};
    if (tern_tokenize(m, text, strlen(text), false, true, ids, 4, &n, &e) != TERN_OK || n != 1) return -1;
    return ids[0];
}

int tern_gen_init(tern_gen **out, const tern_model *m, tern_err *err) {
    if (!out || !m) return tern_err_set(err, TERN_E_ARG, "tern_gen_init: %s is NULL", !out ? "out" : "the model");
    *out = NULL;
    tern_gen *g = calloc(1, sizeof *g);
    if (!g) return tern_err_set(err, TERN_E_NOMEM, "tern_gen_init: out of memory");
    tern_model_info info;
    tern_model_get_info(m, &info);
    g->m = m;
    g->n_vocab = info.n_vocab;
    g->think_open = single_token(m, "<think>");
    g->think_close = single_token(m, "</think>");
    g->pending = g->last = -1;
    int longest = 0;
    for (int32_t id = 0; id < info.n_vocab; id++) {
        const int k = tern_token_piece(m, id, false, NULL, 0);
        if (k > longest) longest = k;
    }
    g->text_cap = 3 * (longest + 3);
    g->text = malloc((size_t)g->text_cap);
    if (!g->text) {
        const int cap = g->text_cap;
        free(g);
        return tern_err_set(err, TERN_E_NOMEM, "tern_gen_init: out of memory (%d bytes of token text)", cap);
    }
    tern_gen_params_default(&g->p);
    snprintf(g->bad, sizeof g->bad, "no reply begun (call tern_gen_begin first)");
    *out = g;
    return TERN_OK;
}

void tern_gen_free(tern_gen *g) {
    if (g) free(g->text);
    free(g);
}

void tern_gen_begin(tern_gen *g, tern_session *s, tern_sampler *smp, tern_spec *spec, const tern_gen_params *p) {
    if (!g) return;
    g->s = s;
    g->smp = smp;
    g->spec = spec;
    if (p) g->p = *p;
    else tern_gen_params_default(&g->p);
    tern_detok_init(&g->dt);
    g->in_think = false;
    g->n_think = 0;
    g->stop = TERN_STOP_NONE;
    g->pending = g->last = -1;
    g->last_in_session = false;
    g->n_step = g->n_ev = 0;
    memset(&g->st, 0, sizeof g->st);
    g->st.bad_logits_pos = -1;
    g->t_begin = tern_time_s();
    g->t_first = g->t_last = 0;
    g->bad[0] = '\0';
    /* parts made for another model would read and write past each other's buffers */
    if (!s || !smp) gen_bad(g, "tern_gen_begin: the %s is NULL", !s ? "session" : "sampler");
    else if (tern_session_model(s) != g->m) gen_bad(g, "tern_gen_begin: the session is of another model than the generator's");
    else if (tern_sampler_n_vocab(smp) != g->n_vocab)
        gen_bad(g, "tern_gen_begin: the sampler is for %d tokens, the model has %d", (int)tern_sampler_n_vocab(smp),
                (int)g->n_vocab);
    else if (spec && spec_model(spec) != g->m) gen_bad(g, "tern_gen_begin: the spec is of another model than the generator's");
    else if (g->p.n_predict < -1) gen_bad(g, "tern_gen_begin: n_predict %d, expected -1 (until a stop) or >= 0", g->p.n_predict);
    else if (g->p.forced && g->p.n_forced < 0)   /* forced NULL: none, whatever n_forced says (the header) */
        gen_bad(g, "tern_gen_begin: n_forced %d, expected >= 0", g->p.n_forced);
}

void tern_gen_prompt_seen(tern_gen *g, const int32_t *tok, int n) {
    if (!g || g->bad[0] || n <= 0 || !tok) return;   /* nothing to record (a reply that cannot run says why elsewhere) */
    for (int i = 0; i < n; i++) {
        tern_sampler_accept(g->smp, tok[i]);
        if (!g->p.split_think) continue;
        if (tok[i] == g->think_open) g->in_think = true, g->n_think = 0;   /* the last tag decides */
        else if (tok[i] == g->think_close) g->in_think = false;
    }
    g->st.n_prompt += n;
}

const float *tern_gen_prompt(tern_gen *g, const int32_t *tok, int n, tern_err *err) {
    if (!g) {
        tern_err_set(err, TERN_E_ARG, "tern_gen_prompt: the generator is NULL, expected one from tern_gen_init");
        return NULL;
    }
    if (g->bad[0]) {
        tern_err_set(err, TERN_E_ARG, "%s", g->bad);
        return NULL;
    }
    tern_err e_local = {0};
    tern_err *e = err ? err : &e_local;
    const double t0 = tern_time_s();
    const float *logits = tern_session_eval(g->s, tok, n, e);
    g->st.t_prompt_s += tern_time_s() - t0;
    if (!logits) return NULL;
    if (g->spec && tern_spec_add(g->spec, tok, n, e) != TERN_OK) return NULL;
    tern_gen_prompt_seen(g, tok, n);
    return logits;
}

/* Record the first non-finite logit of the first damaged position. */
static void check_logits(tern_gen *g, const float *logits) {
    if (g->st.bad_logits_pos >= 0) return;
    for (int32_t i = 0; i < g->n_vocab; i++)
        if (!isfinite(logits[i])) {
            g->st.bad_logits_pos = tern_session_pos(g->s);
            g->st.bad_logits_id = i;
            g->st.bad_logits_val = logits[i];
            return;
        }
}

static int report(tern_gen *g, const tern_gen_token *t) {
    return g->p.on_token ? g->p.on_token(g->p.user, t) : 0;
}

/* The stop rules for token t (already passed to tern_sampler_accept); in_session: a speculative
 * step appended it already. Sets g->stop, or leaves t pending. */
static tern_stop emit(tern_gen *g, int32_t t, const float *logits, bool in_session) {
    g->t_last = tern_time_s();
    if (g->st.n_gen++ == 0) g->t_first = g->t_last;
    g->last = t;
    g->last_in_session = in_session;
    if (g->p.ignore_eos || !tern_token_is_eog(g->m, t)) g->ev[g->n_ev++] = t;   /* room: one call's tokens */
    tern_gen_token ev = {.id = t, .text = g->text, .n_gen = g->st.n_gen, .logits = logits, .in_think = g->in_think};
    if (!g->p.ignore_eos && tern_token_is_eog(g->m, t)) {
        ev.eog = true;
        report(g, &ev);
        g->last_in_session = true;   /* nothing to append */
        return g->stop = TERN_STOP_EOG;
    }
    if (g->p.split_think && (t == g->think_open || t == g->think_close)) {
        const int k = tern_detok_flush(&g->dt, g->text, g->text_cap);
        if (k < 0) return gen_bad(g, "token %d: its text did not fit %d bytes (%s)", (int)t, g->text_cap, tern_strerror(k));
        ev.n_text = k;
        ev.think = t == g->think_open ? 1 : -1;
        /* a <think> inside an open block neither reopens it nor restarts its budget (else a model
         * that repeats the tag would never be closed) */
        if (!(t == g->think_open && g->in_think)) g->n_think = 0;
        g->in_think = t == g->think_open;
    } else {
        const int k = tern_detok_put(g->m, &g->dt, t, g->text, g->text_cap);
        if (k < 0) return gen_bad(g, "token %d: its text did not fit %d bytes (%s)", (int)t, g->text_cap, tern_strerror(k));
        ev.n_text = k;
    }
    if (report(g, &ev) != 0) return g->stop = TERN_STOP_CALLER;
    if (g->p.n_predict >= 0 && g->st.n_gen >= g->p.n_predict) return g->stop = TERN_STOP_LENGTH;
    if (!in_session) {
        if (tern_session_pos(g->s) >= tern_session_n_ctx(g->s)) return g->stop = TERN_STOP_CTX;
        g->pending = t;
    }
    return TERN_STOP_NONE;
}

/* tern_gen_sample without forgetting the tokens reported earlier in the same call (a step). */
static tern_stop sample_one(tern_gen *g, const float *logits) {
    if (g->bad[0]) return g->stop = TERN_STOP_ERROR;
    if (g->stop != TERN_STOP_NONE) return g->stop;
    if (!logits) return gen_bad(g, "tern_gen_sample: logits is NULL");
    if (g->p.n_predict >= 0 && g->st.n_gen >= g->p.n_predict) return g->stop = TERN_STOP_LENGTH;
    if (g->spec == NULL || g->st.n_gen == 0) {
        check_logits(g, logits);
        if (g->st.bad_logits_pos >= 0) return g->stop = TERN_STOP_LOGITS;   /* nothing to sample from */
    }
    /* the think block has used its budget: the reply's next token closes it (the answer begins) */
    const bool close = g->p.think_budget >= 0 && g->p.split_think && g->in_think && g->think_close >= 0 &&
                       g->n_think >= g->p.think_budget;
    const bool given = g->p.forced && g->st.n_gen < g->p.n_forced;
    if (given && (g->p.forced[g->st.n_gen] < 0 || g->p.forced[g->st.n_gen] >= g->n_vocab))
        return gen_bad(g, "tern_gen: forced token %d at reply index %d, expected 0..%d", (int)g->p.forced[g->st.n_gen],
                       g->st.n_gen, (int)g->n_vocab - 1);
    const int32_t t = given ? g->p.forced[g->st.n_gen] : close ? g->think_close : tern_sampler_sample(g->smp, logits);
    if (g->in_think && !close) g->n_think++;
    tern_sampler_accept(g->smp, t);
    g->pending = -1;
    return emit(g, t, logits, false);
}

tern_stop tern_gen_sample(tern_gen *g, const float *logits) {
    if (!g) return TERN_STOP_ERROR;
    g->n_ev = 0;
    return sample_one(g, logits);
}

int tern_gen_tokens(const tern_gen *g, const int32_t **tok) {
    if (tok) *tok = g ? g->ev : NULL;
    return g ? g->n_ev : 0;
}

int32_t tern_gen_pending(const tern_gen *g) { return g && g->stop == TERN_STOP_NONE ? g->pending : -1; }

tern_stop tern_gen_step(tern_gen *g, const int32_t **tok, int *n_tok, tern_err *err) {
    if (tok) *tok = g ? g->step : NULL;
    if (n_tok) *n_tok = 0;
    if (!g) {
        tern_err_set(err, TERN_E_ARG, "tern_gen_step: the generator is NULL, expected one from tern_gen_init");
        return TERN_STOP_ERROR;
    }
    g->n_step = 0;
    g->n_ev = 0;
    if (g->bad[0]) {
        tern_err_set(err, TERN_E_ARG, "%s", g->bad);
        return g->stop = TERN_STOP_ERROR;
    }
    if (g->stop != TERN_STOP_NONE) return g->stop;
    if (g->pending < 0) {
        tern_err_set(err, TERN_E_ARG, "tern_gen_step: no pending token (call tern_gen_sample first)");
        return g->stop = TERN_STOP_ERROR;
    }
    const int32_t last = g->pending;
    g->pending = -1;
    const bool budgeted = (g->p.think_budget >= 0 && g->in_think) ||   /* each token counts: no drafts */
                          (g->p.forced && g->st.n_gen < g->p.n_forced);
    if (!g->spec || budgeted) {
        tern_err e_local = {0};
        tern_err *e = err ? err : &e_local;
        const float *logits = tern_session_eval(g->s, &last, 1, e);
        if (!logits || (g->spec && tern_spec_add(g->spec, &last, 1, e) != TERN_OK)) return g->stop = TERN_STOP_ERROR;
        g->step[g->n_step++] = last;
        if (n_tok) *n_tok = g->n_step;
        return sample_one(g, logits);
    }
    int32_t out[TERN_SPEC_DRAFT_LIMIT + 1];
    int k = 0, n_max = TERN_SPEC_DRAFT_LIMIT + 1;
    if (g->p.n_predict >= 0 && g->p.n_predict - g->st.n_gen < n_max) n_max = g->p.n_predict - g->st.n_gen;
    if (n_max < 1) n_max = 1;
    if (tern_spec_step(g->spec, g->s, g->smp, last, n_max, out, &k, err) != TERN_OK) return g->stop = TERN_STOP_ERROR;
    g->step[g->n_step++] = last;                      /* the session: + last + out[0 .. k-1) */
    for (int i = 0; i + 1 < k; i++) g->step[g->n_step++] = out[i];
    if (n_tok) *n_tok = g->n_step;
    for (int i = 0; i < k; i++)                       /* only the last one is not in the session */
        if (emit(g, out[i], NULL, i + 1 < k) != TERN_STOP_NONE) break;
    return g->stop;
}

tern_stop tern_gen_end(tern_gen *g, tern_err *err) {
    if (!g) {
        tern_err_set(err, TERN_E_ARG, "tern_gen_end: the generator is NULL, expected one from tern_gen_init");
        return TERN_STOP_ERROR;
    }
    if (g->bad[0]) {   /* no reply ran: nothing to flush or report */
        tern_err_set(err, TERN_E_ARG, "%s", g->bad);
        return g->stop = TERN_STOP_ERROR;
    }
    if (g->p.eval_last && (g->stop == TERN_STOP_LENGTH || g->stop == TERN_STOP_CALLER) && g->last >= 0 &&
        !g->last_in_session && tern_session_pos(g->s) >= tern_session_n_ctx(g->s)) {
        g->stop = TERN_STOP_CTX;                      /* the last token has no room: the context is full */
    } else if (g->p.eval_last && (g->stop == TERN_STOP_LENGTH || g->stop == TERN_STOP_CALLER) && g->last >= 0 &&
               !g->last_in_session) {
        tern_err e_local = {0};
        tern_err *e = err ? err : &e_local;
        if (!tern_session_eval(g->s, &g->last, 1, e) || (g->spec && tern_spec_add(g->spec, &g->last, 1, e) != TERN_OK))
            g->stop = TERN_STOP_ERROR;
        g->last_in_session = true;
    }
    g->pending = -1;
    const int k = tern_detok_flush(&g->dt, g->text, g->text_cap);
    const tern_gen_token ev = {.id = -1, .text = g->text, .n_text = k > 0 ? k : 0, .in_think = g->in_think,
                               .n_gen = g->st.n_gen};
    report(g, &ev);
    if (g->st.n_gen > 0) g->t_last = tern_time_s();
    return g->stop;
}

tern_stop tern_gen_run(tern_gen *g, const float *logits, tern_err *err) {
    tern_stop stop = tern_gen_sample(g, logits);
    while (stop == TERN_STOP_NONE) stop = tern_gen_step(g, NULL, NULL, err);
    return tern_gen_end(g, err);
}

void tern_gen_get_stats(const tern_gen *g, tern_gen_stats *st) {
    if (!g || !st) return;
    *st = g->st;
    st->t_first_s = g->st.n_gen > 0 ? g->t_first - g->t_begin : 0.0;
    st->t_gen_s = g->st.n_gen > 0 ? g->t_last - g->t_first : 0.0;
}

int tern_gen_logits_error(const tern_gen *g, tern_err *err) {
    if (!g || g->st.bad_logits_pos < 0) return TERN_OK;
    const float v = g->st.bad_logits_val;
    return tern_err_set(err, TERN_E_FORMAT, "the logits for position %d are not finite (logit %d of %d is %s); expected "
                        "finite logits: the model's weights may be damaged (NaN or Inf)", g->st.bad_logits_pos,
                        (int)g->st.bad_logits_id, (int)g->n_vocab, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
}
