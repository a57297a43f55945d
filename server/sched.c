/* sched.c: the scheduler of `tern serve` (tern_server.h, sched.h): one thread owns every session.
 * Jobs come from the HTTP threads through a bounded FIFO (srv_sched_submit); the scheduler
 * admits them into free slots (longest cached prefix first) between steps (continuous batching).
 * A step: drop cancelled jobs; sample one token for every slot with fresh logits, each with its
 * own sampler and settings; then ONE forward (tern_batch_eval_seqs) over all continuing slots'
 * tokens plus a chunk of the waiting prompts (chunked prefill as vLLM schedules it: at most
 * prefill_chunk prompt tokens while a stream decodes, n_batch when none does; oldest admission
 * first), so a joining request costs the running streams a wider pass per chunk, not a pass of its
 * own. Every weight is streamed once per step for all of them; each column computes what the
 * slot's own eval would, and prompts are cut as tern_model_split_rule allows, so results equal
 * running each request alone. Output goes into the job's srv_reply under the job's mutex; the HTTP
 * thread waits on the job's condition variable and takes what may be sent.
 * Lifetime: a job has two references (HTTP thread, scheduler); the last unref frees it. */
#include "sched.h"
#include "jsonguide.h"


#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    tern_session *s;
    prompt_ids cache;       /* the tokens whose KV is in s, in order: n_ctx ids reserved at init, so
                               the pushes that follow each forward never allocate (nor fail) */
    srv_job *job;           /* NULL: free */
    uint64_t admitted;      /* admission order (prefill goes oldest first) */
    bool fresh;             /* assigned, not set up yet */
    tern_sampler *smp;
    tern_gen *gen;          /* the reply: sampling, stop rules, detokenisation (tern_gen_*) */
    bool gen_on;            /* tern_gen_begin was called for this job */
    int n_prefilled;        /* prompt tokens evaluated (incl. reused) */
    const float *logits;    /* logits of the last evaluated token: ready to sample when not NULL */
    int32_t next;           /* the last sampled token, to evaluate (when pending) */
    bool pending;
    tern_spec *sp;          /* speculative decoding (NULL: off) */
    int sp_n;               /* cache tokens the drafter's history holds (a prefix of cache) */
    srv_sched *sched;
    bool json;              /* response_format json_object: the content is guided (jg) */
    bool json_think;        /* inside a think block (reasoning is not guided) */
    bool json_stuck;        /* the guide and logit_bias left no token: the job ends with an error */
    bool spec_on;           /* this job's generator runs speculative steps (sp, no logprobs, not json) */
    json_guide jg;          /* the content so far */
} slot;

struct srv_sched {
    tern_model *m;
    srv_metrics *mx;
    int n_ctx, n_batch, prefill_chunk, queue_max;
    int32_t n_vocab;
    int split_block, split_min;   /* tern_model_split_rule: how prompts may be cut */
    slot *slots;
    prompt_ids script;      /* srv_sched_set_script: every chat reply's first tokens (tests) */
    char *tok_text;         /* json_object: every token's bytes (control tokens: none), built at first use */
    int32_t *tok_off;       /* n_vocab + 1 offsets into tok_text */
    int32_t think_open, think_close;   /* "<think>", "</think>" as one token each, or -1 */
    srv_slot_info *pub;     /* n_slots: the slots as of the last step, guarded by mu */
    int n_slots;
    bool batch_ok;          /* tern_batch_eval accepts this model (false after TERN_E_UNSUPPORTED) */
    float *blogits;         /* n_slots * n_vocab: logits of the batched pass */
    tern_session **bsess;   /* n_slots */
    int32_t *btok;          /* n_batch + n_slots: the tokens of a pass */
    int *bntok;             /* n_slots: tokens per session of a pass */
    slot **bslot;           /* n_slots: decode slots of a step */
    slot **pfslot;          /* n_slots: prefilling slots of a mixed step */
    int *pfn;               /* n_slots: their chunk sizes */
    uint64_t n_admitted;
    bool spec;
    pthread_t th;
    bool th_started;
    pthread_mutex_t mu;     /* guards the queue, stopping, n_active */
    pthread_cond_t cv;
    srv_job **q;
    int q_head, q_n, q_cap;
    int n_active;
    bool stopping;
};

/* ---- jobs -------------------------------------------------------------------------------------- */

srv_job *srv_job_new(void) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    return j;
}

void srv_job_unref(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    api_request_free(&j->req);
    free(j->lp);
    prompt_ids_free(&j->prompt);
    reply_free(&j->reply);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void srv_job_cancel(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = true;
    pthread_mutex_unlock(&j->mu);
}

/* ---- metrics -------------------------------------------------------------------------------- */

const double srv_ttft_bounds[SRV_HIST_N] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const double srv_tpot_bounds[SRV_HIST_N] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

static void hist_add(srv_hist *h, const double *bounds, double v) {
    for (int i = 0; i < SRV_HIST_N; i++)
        if (v <= bounds[i]) h->count[i]++;
    h->n++;
    h->sum += v;
}

/* ---- scheduler ------------------------------------------------------------------------------ */

static int slot_on_token(void *user, const tern_gen_token *t);
static bool json_table(srv_sched *s);
static void slot_json_mask(void *user, float *logits, int32_t n_vocab);

/* One slot's state for readers on other threads (/slots, /metrics; the caller holds mu). The
 * scheduler thread is the only writer of the slots, so it reads them here without a race. */
static void slot_publish(srv_sched *s, const slot *sl) {
    const int i = (int)(sl - s->slots);
    srv_slot_info *p = &s->pub[i];
    *p = (srv_slot_info){.id = i, .busy = sl->job != NULL, .n_ctx = s->n_ctx, .n_cached = sl->cache.n};
    if (sl->job) {
        p->n_prompt = sl->job->prompt.n;
        p->n_prefilled = sl->fresh ? 0 : sl->n_prefilled;
        p->n_decoded = sl->job->n_gen;
        snprintf(p->job_id, sizeof p->job_id, "%s", sl->job->id);
    }
}

/* Ends the slot's job: ends the reply (the detokeniser's held-back text goes to the reply),
 * publishes the result, frees the slot. */
static void slot_finish(srv_sched *s, slot *sl, const char *finish, const srv_error *fail) {
    srv_job *j = sl->job;
    if (sl->gen_on) tern_gen_end(sl->gen, NULL);      /* eval_last is off: nothing is evaluated */
    sl->gen_on = false;
    const double now = tern_time_s();
    j->tm.predicted_n = j->n_gen;
    j->tm.ttft_ms = j->n_gen > 0 ? 1e3 * (j->t_first - j->t_submit) : 0;
    j->tm.predicted_ms = j->n_gen > 0 ? 1e3 * (j->t_last - j->t_first) : 0;
    if (j->t_prefilled == 0 && j->t_admit > 0) j->tm.prompt_ms = 1e3 * (now - j->t_admit);
    pthread_mutex_lock(&j->mu);
    const bool cancelled = j->cancelled;
    pthread_mutex_unlock(&j->mu);

    /* The metrics and the slot are released before the job is published as done: a client that
     * sends its next request the moment this answer arrives must find the slot free (with
     * --queue 0 it got 429 while n_active still counted this job), and its /metrics read must
     * already count this request. Only this thread assigns slots, so the slot is not reused
     * before this function returns. */
    pthread_mutex_lock(&s->mx->mu);
    s->mx->tokens_prompt += (uint64_t)j->usage.prompt_tokens;
    s->mx->tokens_cached += (uint64_t)j->usage.cached_tokens;
    s->mx->tokens_generated += (uint64_t)j->n_gen;
    if (cancelled) s->mx->requests_cancelled++;
    if (j->n_gen > 0) hist_add(&s->mx->ttft, srv_ttft_bounds, j->t_first - j->t_submit);
    if (j->n_gen > 1) hist_add(&s->mx->tpot, srv_tpot_bounds, (j->t_last - j->t_first) / (j->n_gen - 1));
    pthread_mutex_unlock(&s->mx->mu);

    tern_sampler_free(sl->smp);
    sl->smp = NULL;
    sl->job = NULL;
    sl->logits = NULL;
    sl->pending = false;
    pthread_mutex_lock(&s->mu);
    s->n_active--;
    slot_publish(s, sl);
    pthread_mutex_unlock(&s->mu);

    pthread_mutex_lock(&j->mu);
    j->finish = finish;
    if (fail) {
        j->failed = true;
        j->error = *fail;
    }
    j->usage.completion_tokens = j->n_gen;
    j->t_done = now;
    j->state = JOB_DONE;
    j->seq++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    srv_job_unref(j);
}

static void slot_fail(srv_sched *s, slot *sl, const tern_err *err) {
    srv_error e;
    srv_fail(&e, 500, "server_error", NULL, "generation failed: %s", err->msg);
    tern_session_reset(sl->s);                        /* unknown state: drop the cache */
    sl->cache.n = 0;
    sl->sp_n = 0;
    if (sl->sp) tern_spec_reset(sl->sp);
    slot_finish(s, sl, "error", &e);
}

/* Sets up a newly admitted job: reuse the cached prefix, create its sampler. */
static bool slot_setup(srv_sched *s, slot *sl) {
    srv_job *j = sl->job;
    int common = 0;
    while (j->req.cache_prompt && common < sl->cache.n && common < j->prompt.n && sl->cache.ids[common] == j->prompt.ids[common])
        common++;
    if (common >= j->prompt.n) common = j->prompt.n - 1;   /* evaluate at least one token: logits */
    if (common < sl->cache.n) {
        tern_err e = {0};
        /* recurrent state: back to the last position it can restore at or before the common
         * prefix (a checkpoint taken after one of the earlier prompt's chunks, or 0) */
        if (common > 0) common = tern_session_restorable(sl->s, common);
        if (common == 0 || tern_session_truncate(sl->s, common, &e) != TERN_OK) {
            tern_session_reset(sl->s);
            common = 0;
        }
        sl->cache.n = common;
        if (sl->sp_n > common) {                      /* the drafter's history went past it: rebuild */
            tern_spec_reset(sl->sp);
            sl->sp_n = 0;
        }
    }
    sl->n_prefilled = common;
    sl->logits = NULL;
    j->t_admit = tern_time_s();
    tern_err err = {0};
    if (tern_sampler_init(&sl->smp, s->m, &j->req.sp, &err) != TERN_OK ||
        tern_sampler_set_logit_bias(sl->smp, j->req.bias_ids, j->req.bias, j->req.n_bias, &err) != TERN_OK) {
        srv_error e;
        srv_fail(&e, 400, "invalid_request_error", NULL, "%s", err.msg);
        slot_finish(s, sl, "error", &e);
        return false;
    }
    sl->json = false;
    sl->json_stuck = false;
    if (j->req.json_object) {
        if (!json_table(s) || tern_sampler_set_mask(sl->smp, slot_json_mask, sl, &err) != TERN_OK) {
            srv_error e;
            srv_fail(&e, 500, "server_error", NULL, "out of memory for the JSON constraint");
            slot_finish(s, sl, "error", &e);
            return false;
        }
        sl->json = true;
        json_guide_init(&sl->jg);
        sl->json_think = false;                       /* the prompt may leave a think block open */
        for (int i = 0; i < j->prompt.n; i++)
            if (j->prompt.ids[i] == s->think_open) sl->json_think = true;
            else if (s->think_open >= 0 && j->prompt.ids[i] == s->think_close) sl->json_think = false;
    }
    tern_gen_params gp;
    tern_gen_params_default(&gp);
    gp.n_predict = j->req.max_tokens > 0 ? j->req.max_tokens : -1;
    gp.ignore_eos = j->req.ignore_eos;
    gp.split_think = j->req.kind == SRV_CHAT;         /* completions: the raw text, tags included */
    gp.think_budget = j->req.think_budget;
    if (j->req.kind == SRV_CHAT && s->script.n > 0) gp.forced = s->script.ids, gp.n_forced = s->script.n;
    gp.on_token = slot_on_token;
    gp.user = sl;
    /* speculative steps only for a request without logprobs (a step's logits are internal) nor a
     * guided JSON object (each token's mask depends on the one before) */
    sl->spec_on = sl->sp && !j->req.logprobs && !sl->json;
    tern_gen_begin(sl->gen, sl->s, sl->smp, sl->spec_on ? sl->sp : NULL, &gp);
    sl->gen_on = true;
    tern_gen_prompt_seen(sl->gen, j->prompt.ids, j->prompt.n);
    j->tm.prompt_n = j->req.max_tokens == 0 ? 0 : j->prompt.n - common;   /* the tokens this request evaluates */
    pthread_mutex_lock(&j->mu);
    j->state = JOB_RUNNING;
    j->usage.prompt_tokens = j->prompt.n;
    j->usage.cached_tokens = common;
    j->seq++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    sl->fresh = false;
    if (j->req.max_tokens == 0) {                     /* nothing to generate: honoured exactly */
        slot_finish(s, sl, "length", NULL);
        return false;
    }
    return true;
}

/* One prefill chunk of at most budget tokens; returns the tokens evaluated (0 if it failed). */
static int slot_prefill(srv_sched *s, slot *sl, int budget) {
    srv_job *j = sl->job;
    int n = j->prompt.n - sl->n_prefilled;
    if (n > budget) n = budget;
    tern_err err = {0};
    const float *lg = tern_session_eval(sl->s, j->prompt.ids + sl->n_prefilled, n, &err);
    if (!lg) {
        slot_fail(s, sl, &err);
        return 0;
    }
    prompt_ids_push(&sl->cache, j->prompt.ids + sl->n_prefilled, n);
    sl->n_prefilled += n;
    j->tm.prefill_chunks++;
    tern_session_checkpoint(sl->s, NULL);             /* the chunk's end stays restorable (prefix reuse) */
    if (sl->n_prefilled == j->prompt.n) {
        sl->logits = lg;
        j->t_prefilled = tern_time_s();
        j->tm.prompt_ms = 1e3 * (j->t_prefilled - j->t_admit);
    }
    return n;
}

/* ---- response_format json_object ---------------------------------------------------------- */

/* The bytes of every token (control tokens: none), for the JSON mask; built once, on the
 * scheduler thread, at the first json_object request. */
static bool json_table(srv_sched *s) {
    if (s->tok_off) return true;
    int32_t *off = malloc(sizeof *off * ((size_t)s->n_vocab + 1));
    size_t cap = (size_t)s->n_vocab * 8 + 64, n = 0;
    char *text = malloc(cap);
    if (!off || !text) goto fail;
    for (int32_t id = 0; id < s->n_vocab; id++) {
        off[id] = (int32_t)n;
        char buf[256];
        int k = tern_token_piece(s->m, id, false, buf, sizeof buf);
        if (k < 0 || k > (int)sizeof buf) k = 0;      /* an out-of-range or oversized piece: never allowed */
        if (n + (size_t)k > cap) {
            cap = 2 * (n + (size_t)k);
            char *t = realloc(text, cap);
            if (!t) goto fail;
            text = t;
        }
        memcpy(text + n, buf, (size_t)k);
        n += (size_t)k;
    }
    off[s->n_vocab] = (int32_t)n;
    s->tok_text = text;
    s->tok_off = off;
    return true;
fail:
    free(off);
    free(text);
    return false;
}

/* Whether the request's logit_bias bans token id (a -inf bias). */
static bool slot_banned(const srv_request *rq, int32_t id) {
    for (int i = 0; i < rq->n_bias; i++)
        if (rq->bias_ids[i] == id && rq->bias[i] == -INFINITY) return true;
    return false;
}

/* The sampler's mask for a json_object reply: a token is kept if its bytes keep the content a
 * prefix of one JSON object; an end-of-generation token once the object is complete; <think> before
 * the content begins; anything inside a think block. When nothing would be left (the object
 * complete and no whitespace or end token among the finite logits), the end tokens that the
 * request does not ban stay; otherwise the job fails (slot_sample). */
static void slot_json_mask(void *user, float *logits, int32_t n_vocab) {
    slot *sl = user;
    const srv_sched *s = sl->sched;
    if (sl->json_think) return;
    /* the request's bans first (the sampler's bias stage comes after this mask; -inf stays -inf
     * there), so that kept below counts only tokens that can still be drawn */
    const srv_request *rq = &sl->job->req;
    for (int i = 0; i < rq->n_bias; i++)
        if (rq->bias[i] == -INFINITY) logits[rq->bias_ids[i]] = -INFINITY;
    const bool done = json_guide_done(&sl->jg), fresh = json_guide_empty(&sl->jg);
    int32_t kept = 0;
    for (int32_t id = 0; id < n_vocab; id++) {
        if (logits[id] == -INFINITY) continue;
        const int32_t a = s->tok_off[id], n = s->tok_off[id + 1] - a;
        bool ok;
        if (n == 0) ok = (done && tern_token_is_eog(s->m, id)) || (fresh && id == s->think_open);
        else {
            json_guide g = sl->jg;
            ok = json_guide_feed(&g, s->tok_text + a, (size_t)n);
        }
        if (ok) kept++;
        else logits[id] = -INFINITY;
    }
    /* Nothing left: once the object is complete, the end tokens that are not banned stay (a
     * vocabulary without whitespace tokens); else the request's logit_bias bans every token the
     * object allows here. Whatever the sampler draws then is dropped: the job ends with an error
     * (slot_sample) rather than with a banned token or a broken object. */
    if (kept == 0 && done)
        for (int32_t id = 0; id < n_vocab; id++)
            if (tern_token_is_eog(s->m, id) && !slot_banned(rq, id)) logits[id] = 0.0f, kept++;
    if (kept == 0) sl->json_stuck = true;
}

/* A reply's event (tern_gen's on_token): counts the token, adds its text to the reply (logprobs
 * from logits when asked and given) and wakes the HTTP thread. Returns non-zero when the reply
 * has reached a stop string (tern_gen then stops: TERN_STOP_CALLER). */
static int slot_on_token(void *user, const tern_gen_token *t) {
    slot *sl = user;
    srv_sched *s = sl->sched;
    srv_job *j = sl->job;
    if (sl->json_stuck) return 1;                     /* a draw among banned tokens: not the reply's */
    if (t->id >= 0) {
        const double now = tern_time_s();
        j->n_gen = t->n_gen;                          /* written by this thread only */
        if (j->n_gen == 1) j->t_first = now;
        else {                                        /* every gap between two tokens of a request */
            pthread_mutex_lock(&s->mx->mu);
            hist_add(&s->mx->itl, srv_tpot_bounds, now - j->t_last);
            pthread_mutex_unlock(&s->mx->mu);
        }
        j->t_last = now;
        if (t->eog) return 0;
        if (sl->json) {                               /* follow the content (not the reasoning) */
            if (t->think) sl->json_think = t->think > 0;
            else if (!sl->json_think) {
                const int32_t a = s->tok_off[t->id], n = s->tok_off[t->id + 1] - a;
                if (!json_guide_feed(&sl->jg, s->tok_text + a, (size_t)n)) {   /* a forced token: unguided */
                    sl->json = false;
                    tern_sampler_set_mask(sl->smp, NULL, NULL, NULL);
                }
            }
        }
    }
    srv_logprob lpe;
    const bool lp = t->id >= 0 && j->req.logprobs && t->logits;
    if (lp) api_logprob_compute(t->logits, s->n_vocab, t->id, j->req.top_logprobs, &lpe);
    pthread_mutex_lock(&j->mu);
    if (t->n_text > 0) reply_add_tok(&j->reply, t->in_think, t->text, (size_t)t->n_text, j->n_gen);
    if (lp) {
        if (j->n_lp == j->cap_lp) {
            const int cap = j->cap_lp ? 2 * j->cap_lp : 32;
            srv_logprob *p = realloc(j->lp, (size_t)cap * sizeof *p);
            if (p) j->lp = p, j->cap_lp = cap;
        }
        if (j->n_lp < j->cap_lp) j->lp[j->n_lp++] = lpe;
    }
    const bool stopped = j->reply.stopped;
    j->seq++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return stopped;
}

/* The job's finish_reason for a stop of its reply. */
static const char *finish_reason(tern_stop stop) {
    return stop == TERN_STOP_EOG || stop == TERN_STOP_CALLER ? "stop" : "length";   /* LENGTH, CTX */
}

/* The job fails on non-finite logits (damaged weights: the reply would be meaningless); nothing
 * was sampled from them, so no token of that position reached the client. */
static void slot_fail_logits(srv_sched *s, slot *sl) {
    tern_err err = {0};
    tern_gen_logits_error(sl->gen, &err);
    slot_fail(s, sl, &err);
}

/* The job ends with a 400: the JSON guide and the request's logit_bias left no token to draw. */
static void slot_fail_json_stuck(srv_sched *s, slot *sl) {
    srv_error e;
    srv_fail(&e, 400, "invalid_request_error", "logit_bias",
             "'logit_bias' bans every token that can continue the JSON object of response_format json_object "
             "after %d generated token%s", sl->job->n_gen, sl->job->n_gen == 1 ? "" : "s");
    slot_finish(s, sl, "error", &e);
}

/* Samples the next token from the slot's logits (its own sampler and settings): the slot
 * continues with it pending, or the job ends (end of generation, stop string, max_tokens, a full
 * context). */
static bool slot_sample(srv_sched *s, slot *sl) {
    const float *logits = sl->logits;
    sl->logits = NULL;
    const tern_stop stop = tern_gen_sample(sl->gen, logits);
    if (stop == TERN_STOP_LOGITS) {
        slot_fail_logits(s, sl);
        return false;
    }
    if (sl->json_stuck) {
        slot_fail_json_stuck(s, sl);
        return false;
    }
    if (stop != TERN_STOP_NONE) {
        slot_finish(s, sl, finish_reason(stop), NULL);
        return false;
    }
    sl->next = tern_gen_pending(sl->gen);
    sl->pending = true;
    return true;
}

/* A speculative step for a slot decoding alone: tern_gen_step (tern_spec_step) evaluates its
 * pending token and a prompt-lookup draft in one forward; the accepted tokens plus the target's
 * own go through the stop rules in order; the last one is pending. */
static void slot_spec(srv_sched *s, slot *sl) {
    tern_err err = {0};
    if (sl->sp_n < sl->cache.n &&                     /* the drafter's history = the session's tokens */
        tern_spec_add(sl->sp, sl->cache.ids + sl->sp_n, sl->cache.n - sl->sp_n, &err) != TERN_OK) {
        slot_fail(s, sl, &err);
        return;
    }
    sl->sp_n = sl->cache.n;
    tern_spec_stats st0, st1;
    tern_spec_get_stats(sl->sp, &st0);
    sl->pending = false;
    const int32_t *added = NULL;
    int n_added = 0;
    const tern_stop stop = tern_gen_step(sl->gen, &added, &n_added, &err);
    if (stop == TERN_STOP_ERROR) {
        slot_fail(s, sl, &err);
        return;
    }
    if (stop == TERN_STOP_LOGITS) {
        slot_fail_logits(s, sl);
        return;
    }
    if (sl->json_stuck) {                             /* never with spec_on (not a guided job); as slot_sample */
        slot_fail_json_stuck(s, sl);
        return;
    }
    tern_spec_get_stats(sl->sp, &st1);
    prompt_ids_push(&sl->cache, added, n_added);      /* the session: history + last + out[0..k-1) */
    sl->sp_n = sl->cache.n;
    if (tern_spec_n_history(sl->sp) != sl->cache.n || tern_session_pos(sl->s) != sl->cache.n) {
        tern_spec_reset(sl->sp);                      /* never expected: rebuild the history next time */
        sl->sp_n = 0;
    }
    pthread_mutex_lock(&s->mx->mu);
    s->mx->decode_steps++;
    s->mx->decode_seqs++;
    s->mx->spec_steps += (uint64_t)(st1.n_steps - st0.n_steps);
    s->mx->spec_drafted += (uint64_t)(st1.n_drafted - st0.n_drafted);
    s->mx->spec_accepted += (uint64_t)(st1.n_accepted - st0.n_accepted);
    pthread_mutex_unlock(&s->mx->mu);
    if (stop != TERN_STOP_NONE) {                     /* the job ended (stop, EOG, length) */
        slot_finish(s, sl, finish_reason(stop), NULL);
        return;
    }
    sl->next = tern_gen_pending(sl->gen);
    sl->pending = true;
}

/* Appends each slot's sampled token (returns true if it went through the batched call): one batched forward over all of them (in groups of at most
 * n_batch, the scratch of the first session), or slot by slot where the batched call refuses
 * the model (recurrent state) or fails (then each slot's own error is reported). */
static bool decode(srv_sched *s, slot **sl, int n) {
    if (n == 0) return false;
    bool batched = false;
    if (n >= 2 && s->batch_ok) {
        batched = true;
        for (int g = 0; g < n && batched; g += s->n_batch) {
            const int ng = n - g < s->n_batch ? n - g : s->n_batch;
            for (int i = 0; i < ng; i++) {
                s->bsess[i] = sl[g + i]->s;
                s->btok[i] = sl[g + i]->next;
            }
            tern_err err = {0};
            const int rc = tern_batch_eval(s->bsess, s->btok, ng, s->blogits + (size_t)g * (size_t)s->n_vocab, &err);
            if (rc == TERN_E_UNSUPPORTED) s->batch_ok = false;
            if (rc != TERN_OK) {                      /* nothing of this group was appended */
                batched = false;
                for (int i = 0; i < g; i++) {         /* earlier groups went through */
                    sl[i]->pending = false;
                    prompt_ids_push(&sl[i]->cache, &sl[i]->next, 1);
                    sl[i]->logits = s->blogits + (size_t)i * (size_t)s->n_vocab;
                }
                sl += g;
                n -= g;
                break;
            }
        }
        if (batched)
            for (int i = 0; i < n; i++) {
                sl[i]->pending = false;
                prompt_ids_push(&sl[i]->cache, &sl[i]->next, 1);
                sl[i]->logits = s->blogits + (size_t)i * (size_t)s->n_vocab;
            }
    }
    if (!batched)
        for (int i = 0; i < n; i++) {
            tern_err err = {0};
            sl[i]->pending = false;
            const float *lg = tern_session_eval(sl[i]->s, &sl[i]->next, 1, &err);
            if (!lg) {
                slot_fail(s, sl[i], &err);
                continue;
            }
            prompt_ids_push(&sl[i]->cache, &sl[i]->next, 1);
            sl[i]->logits = lg;
        }
    return batched;
}

/* The prompt tokens of sl to evaluate in this pass: at most budget (a soft limit for recurrent
 * models) and at most cap (columns left in the pass; 0 when the piece does not fit). A request's
 * result must equal running it alone, where its prompt goes in n_batch chunks from its first
 * uncached token (the "alone" pieces). Attention-only models give the same bits for any split
 * (tern_model_split_rule: block 0). Recurrent ones (qwen35) differ between the chunked delta rule
 * (runs of >= run_min tokens, in blocks from the run's start) and token by token, so a piece never
 * crosses an alone piece's end, and an alone piece of run_min+ tokens is cut only on block
 * boundaries into runs of run_min+ tokens (the smallest such run, 32, may exceed budget). */
static int prompt_piece(const srv_sched *s, const slot *sl, int budget, int cap) {
    const int total = sl->job->prompt.n, done = sl->n_prefilled;
    if (budget > cap) budget = cap;
    int k = total - done;
    if (s->split_block > 0) {
        const int p0 = sl->job->usage.cached_tokens, nb = s->n_batch, bl = s->split_block;
        const int ps = p0 + (done - p0) / nb * nb, pe = ps + nb < total ? ps + nb : total;
        k = pe - done;                                /* never across the alone piece's end */
        if (k > budget && pe - ps < s->split_min) {
            k = budget;                               /* token by token: any split */
        } else if (k > budget) {                      /* done - ps is a multiple of the block */
            const int lim = (k - s->split_min) / bl * bl;   /* leaves a run of run_min+ */
            const int run = (s->split_min + bl - 1) / bl * bl;
            int c = budget / bl * bl;
            if (c > lim) c = lim;
            if (c < run) c = run <= lim ? run : k;
            k = c;
        }
    } else if (k > budget) {
        k = budget;
    }
    return k <= cap ? k : 0;
}

/* A step's prompts without a shared pass (a lone prompt, beside a speculative step, or where the
 * mixed call refuses the model or fails): each prefilling slot (oldest first) gets its own forward
 * of up to budget tokens. Returns the chunks evaluated. */
static int prefill_alone(srv_sched *s, int budget) {
    int chunks = 0;
    while (budget > 0) {
        slot *old = NULL;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->job && sl->n_prefilled < sl->job->prompt.n && (!old || sl->admitted < old->admitted)) old = sl;
        }
        if (!old) break;
        const int k = prompt_piece(s, old, budget, s->n_batch);
        if (k == 0) break;
        const int n = slot_prefill(s, old, k);
        if (n == 0) continue;                         /* it failed and left */
        budget -= n;
        chunks++;
    }
    return chunks;
}

/* A mixed step (chunked prefill as vLLM schedules it): ONE forward (tern_batch_eval_seqs) carries
 * the decode slots' pending tokens (dec[0..n_dec)) and a chunk of pf_n[i] prompt tokens of each
 * prefilling slot pf[i]. Every column computes what the slot's own eval would (the API's
 * contract), so results equal running each request alone. Returns false if the call failed
 * (nothing was appended: the caller evaluates the same work slot by slot). */
static bool mixed_eval(srv_sched *s, slot **dec, int n_dec, slot **pf, const int *pf_n, int n_pf) {
    int n_seq = 0, n_col = 0;
    for (int i = 0; i < n_dec; i++, n_seq++) {
        s->bsess[n_seq] = dec[i]->s;
        s->bntok[n_seq] = 1;
        s->btok[n_col++] = dec[i]->next;
    }
    for (int i = 0; i < n_pf; i++, n_seq++) {
        srv_job *j = pf[i]->job;
        s->bsess[n_seq] = pf[i]->s;
        s->bntok[n_seq] = pf_n[i];
        memcpy(s->btok + n_col, j->prompt.ids + pf[i]->n_prefilled, (size_t)pf_n[i] * sizeof *s->btok);
        n_col += pf_n[i];
    }
    tern_err err = {0};
    const int rc = tern_batch_eval_seqs(s->bsess, s->btok, s->bntok, n_seq, s->blogits, &err);
    if (rc == TERN_E_UNSUPPORTED) s->batch_ok = false;
    if (rc != TERN_OK) return false;
    for (int i = 0; i < n_dec; i++) {
        dec[i]->pending = false;
        prompt_ids_push(&dec[i]->cache, &dec[i]->next, 1);
        dec[i]->logits = s->blogits + (size_t)i * (size_t)s->n_vocab;
    }
    const double now = tern_time_s();
    for (int i = 0; i < n_pf; i++) {
        slot *sl = pf[i];
        srv_job *j = sl->job;
        prompt_ids_push(&sl->cache, j->prompt.ids + sl->n_prefilled, pf_n[i]);
        sl->n_prefilled += pf_n[i];
        j->tm.prefill_chunks++;
        tern_session_checkpoint(sl->s, NULL);         /* the chunk's end stays restorable (prefix reuse) */
        if (sl->n_prefilled == j->prompt.n) {
            sl->logits = s->blogits + (size_t)(n_dec + i) * (size_t)s->n_vocab;
            j->t_prefilled = now;
            j->tm.prompt_ms = 1e3 * (j->t_prefilled - j->t_admit);
        }
    }
    return true;
}

/* One scheduler step over the admitted slots: sample every slot that has logits (each with its
 * own sampler); then one forward that appends every sampled token and, in the same pass, a chunk
 * of the waiting prompts: at most prefill_chunk prompt tokens while a stream decodes (it waits
 * for one small chunk's columns, not a separate prefill pass), n_batch when none does (several
 * prompts share the pass), oldest admission first. A slot decoding alone with speculative
 * decoding on takes its speculative step after the prompts' own passes. */
static void sched_step(srv_sched *s) {
    const double t_step = tern_time_s();
    for (int i = 0; i < s->n_slots; i++) {            /* cancelled jobs leave; new ones are set up */
        slot *sl = &s->slots[i];
        if (!sl->job) continue;
        pthread_mutex_lock(&sl->job->mu);
        const bool cancelled = sl->job->cancelled;
        pthread_mutex_unlock(&sl->job->mu);
        if (cancelled) slot_finish(s, sl, "cancelled", NULL);
        else if (sl->fresh) slot_setup(s, sl);
    }
    /* sample every slot with logits; those that continue have a pending token */
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job && sl->logits) slot_sample(s, sl);
    }
    int n = 0;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job && s->slots[i].pending) s->bslot[n++] = &s->slots[i];
    const bool decoded = n > 0;
    bool batched = false, mixed = false;
    int chunks = 0;
    if (n == 1 && s->bslot[0]->spec_on) {
        chunks = prefill_alone(s, s->prefill_chunk);  /* prompts first, each in its own pass */
        if (s->bslot[0]->job) slot_spec(s, s->bslot[0]);   /* decoding alone: several tokens per forward */
        n = 0;                                        /* counted by slot_spec */
    } else {
        /* the decode slots' tokens and the oldest prompts' chunks in one pass of <= n_batch columns
         * (more decode slots than n_batch, never with the defaults: no room for a prompt chunk;
         * decode takes the slots in groups of n_batch) */
        int budget = n > 0 ? s->prefill_chunk : s->n_batch;
        if (budget > s->n_batch - n) budget = s->n_batch - n;
        int n_pf = 0, cols = 0;
        while (budget > 0 && s->batch_ok) {           /* oldest admission first */
            slot *old = NULL;
            for (int i = 0; i < s->n_slots; i++) {
                slot *sl = &s->slots[i];
                bool taken = false;
                for (int k = 0; k < n_pf; k++) taken |= s->pfslot[k] == sl;
                if (!taken && sl->job && sl->n_prefilled < sl->job->prompt.n && (!old || sl->admitted < old->admitted))
                    old = sl;
            }
            if (!old) break;
            const int k = prompt_piece(s, old, budget, s->n_batch - n - cols);
            if (k == 0) break;                        /* it waits for a pass with room */
            cols += k;
            s->pfslot[n_pf] = old;
            s->pfn[n_pf++] = k;
            budget -= k;
        }
        if (n_pf > 0 && n + n_pf >= 2) {              /* one pass for all of it */
            mixed = mixed_eval(s, s->bslot, n, s->pfslot, s->pfn, n_pf);
            if (mixed) {
                chunks = n_pf;
                batched = n >= 2;
            }
        }
        if (!mixed) {                                 /* a lone prompt, no prompt, or the model refused */
            if (n_pf > 0 || !s->batch_ok) chunks = prefill_alone(s, n > 0 ? s->prefill_chunk : s->n_batch);
            batched = decode(s, s->bslot, n);         /* a failed prefill left its slot only */
        }
    }
    if (decoded)                                      /* prompts still in prefill saw a decode step */
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->job && sl->n_prefilled > sl->job->usage.cached_tokens && sl->n_prefilled < sl->job->prompt.n)
                sl->job->tm.decode_steps_in_prefill++;
        }
    const double dt = tern_time_s() - t_step;
    pthread_mutex_lock(&s->mx->mu);
    if (n > 0 && chunks == 0) {                       /* a pure decode step (no prompt, no speculation) */
        s->mx->decode_only_steps++;
        s->mx->decode_only_tokens += (uint64_t)n;
        s->mx->decode_only_seconds += dt;
    }
    s->mx->prefill_chunks += (uint64_t)chunks;
    if (mixed) s->mx->shared_passes++;
    if (mixed && n > 0) s->mx->mixed_steps++;
    if (n > 0) {                                      /* slot by slot: n passes of one */
        s->mx->decode_steps += batched || mixed ? 1 : (uint64_t)n;
        s->mx->decode_seqs += (uint64_t)n;
        if (batched) s->mx->decode_batched++;
        const uint64_t w = batched || mixed ? (uint64_t)n : 1;
        if (w > s->mx->decode_batch_max) s->mx->decode_batch_max = w;
    }
    pthread_mutex_unlock(&s->mx->mu);
}

/* The free slot whose cache shares the longest prefix with the job's prompt; for a job that
 * does not reuse a prefix (cache_prompt false), the one that caches least (the others keep theirs). */
static slot *pick_slot(srv_sched *s, const srv_job *j) {
    slot *best = NULL;
    int best_n = INT_MIN;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job) continue;
        int n = 0;
        if (j->req.cache_prompt)
            while (n < sl->cache.n && n < j->prompt.n && sl->cache.ids[n] == j->prompt.ids[n]) n++;
        else
            n = -sl->cache.n;
        if (n > best_n) best = sl, best_n = n;
    }
    return best;
}

/* Ends every queued job whose client has gone (cancelled while waiting for a slot), wherever it
 * is in the queue, so its queue place is free at once (kept until the job reached the head, it
 * would turn others away with 429).
 * Called with s->mu held; returns how many left (the caller counts them in /metrics without
 * s->mu held). */
static int queue_purge_cancelled(srv_sched *s) {
    int kept = 0, gone = 0;
    for (int i = 0; i < s->q_n; i++) {
        srv_job *j = s->q[(s->q_head + i) % s->q_cap];
        pthread_mutex_lock(&j->mu);
        const bool cancelled = j->cancelled;
        if (cancelled) {
            j->state = JOB_DONE;
            j->finish = "cancelled";
            j->seq++;
            pthread_cond_broadcast(&j->cv);
        }
        pthread_mutex_unlock(&j->mu);
        if (cancelled) {
            srv_job_unref(j);
            gone++;
        } else {
            s->q[(s->q_head + kept++) % s->q_cap] = j;
        }
    }
    s->q_n = kept;
    return gone;
}

static void count_cancelled(srv_sched *s, int n) {
    if (n <= 0) return;
    pthread_mutex_lock(&s->mx->mu);
    s->mx->requests_cancelled += (uint64_t)n;
    pthread_mutex_unlock(&s->mx->mu);
}

static void slots_publish(srv_sched *s) {
    for (int i = 0; i < s->n_slots; i++) slot_publish(s, &s->slots[i]);
}

static void *sched_main(void *arg) {
    srv_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && s->q_n == 0 && s->n_active == 0) pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        const int gone = queue_purge_cancelled(s);   /* clients gone while queued: their places free */
        while (s->q_n > 0) {                          /* admit between steps */
            srv_job *j = s->q[s->q_head];
            slot *sl = NULL;
            pthread_mutex_lock(&j->mu);
            const bool cancelled = j->cancelled;
            pthread_mutex_unlock(&j->mu);
            if (!cancelled && !(sl = pick_slot(s, j))) break;
            s->q_head = (s->q_head + 1) % s->q_cap;
            s->q_n--;
            if (cancelled) {
                pthread_mutex_lock(&j->mu);
                j->state = JOB_DONE;
                j->finish = "cancelled";
                pthread_cond_broadcast(&j->cv);
                pthread_mutex_unlock(&j->mu);
                srv_job_unref(j);
                continue;
            }
            sl->job = j;
            sl->fresh = true;
            sl->logits = NULL;
            sl->admitted = ++s->n_admitted;
            s->n_active++;
        }
        slots_publish(s);
        pthread_mutex_unlock(&s->mu);
        count_cancelled(s, gone);
        sched_step(s);
    }
    /* shutting down: end every job */
    srv_error e;
    srv_fail(&e, 503, "unavailable_error", NULL, "the server is shutting down");
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job) slot_finish(s, &s->slots[i], "error", &e);
    pthread_mutex_lock(&s->mu);
    while (s->q_n > 0) {
        srv_job *j = s->q[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_n--;
        pthread_mutex_lock(&j->mu);
        j->state = JOB_DONE;
        j->failed = true;
        j->error = e;
        j->finish = "error";
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        srv_job_unref(j);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int srv_sched_init(srv_sched **out, tern_model *m, srv_metrics *mx, int n_slots, int n_ctx, int n_batch, int prefill_chunk,
                   int queue_max,
                   bool kv_f32, const tern_spec_params *spec, tern_err *err) {
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    s->m = m;
    s->mx = mx;
    s->n_batch = n_batch;
    s->prefill_chunk = prefill_chunk;
    s->queue_max = queue_max;
    s->think_open = prompt_special_id(m, "<think>");
    s->think_close = prompt_special_id(m, "</think>");
    tern_model_split_rule(m, &s->split_block, &s->split_min);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->q_cap = queue_max + n_slots + 1;
    s->q = calloc((size_t)s->q_cap, sizeof *s->q);
    s->slots = calloc((size_t)n_slots, sizeof *s->slots);
    s->pub = calloc((size_t)n_slots, sizeof *s->pub);
    if (!s->q || !s->slots || !s->pub) {
        srv_sched_free(s);
        return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    }
    s->n_slots = n_slots;
    tern_model_info info;
    tern_model_get_info(m, &info);
    s->n_vocab = info.n_vocab;
    s->batch_ok = true;
    s->blogits = malloc((size_t)n_slots * (size_t)info.n_vocab * sizeof *s->blogits);
    s->bsess = calloc((size_t)n_slots, sizeof *s->bsess);
    s->btok = calloc((size_t)n_batch + (size_t)n_slots, sizeof *s->btok);
    s->bntok = calloc((size_t)n_slots, sizeof *s->bntok);
    s->bslot = calloc((size_t)n_slots, sizeof *s->bslot);
    s->pfslot = calloc((size_t)n_slots, sizeof *s->pfslot);
    s->pfn = calloc((size_t)n_slots, sizeof *s->pfn);
    if (!s->blogits || !s->bsess || !s->btok || !s->bntok || !s->bslot || !s->pfslot || !s->pfn) {
        srv_sched_free(s);
        return tern_err_set(err, TERN_E_NOMEM, "out of memory for %d slots' logits", n_slots);
    }
    for (int i = 0; i < n_slots; i++) {
        tern_session_opts so;
        tern_session_opts_default(&so);
        so.n_ctx = n_ctx;
        so.n_batch = n_batch;
        so.kv_f32 = kv_f32;
        so.n_checkpoints = SRV_CHECKPOINTS;
        s->slots[i].sched = s;
        int rc = tern_session_init(&s->slots[i].s, m, &so, err);
        if (rc == TERN_OK && spec) rc = tern_spec_init(&s->slots[i].sp, m, spec, err);
        if (rc == TERN_OK) rc = tern_gen_init(&s->slots[i].gen, m, err);
        if (rc == TERN_OK && prompt_ids_reserve(&s->slots[i].cache, tern_session_n_ctx(s->slots[i].s)) != TERN_OK)
            rc = tern_err_set(err, TERN_E_NOMEM, "out of memory for slot %d's token cache", i);
        if (rc != TERN_OK) {
            srv_sched_free(s);
            return rc;
        }
    }
    s->n_ctx = tern_session_n_ctx(s->slots[0].s);
    s->n_batch = tern_session_n_batch(s->slots[0].s);   /* <= n_batch (clamped to n_ctx): columns per pass */
    if (s->prefill_chunk > s->n_batch) s->prefill_chunk = s->n_batch;
    slots_publish(s);   /* idle slots, before the thread starts */
    if (pthread_create(&s->th, NULL, sched_main, s) != 0) {
        srv_sched_free(s);
        return tern_err_set(err, TERN_E_NOMEM, "cannot start the scheduler thread");
    }
    s->th_started = true;
    *out = s;
    return TERN_OK;
}

int srv_sched_n_ctx(const srv_sched *s) { return s->n_ctx; }

int srv_sched_submit(srv_sched *s, srv_job *j) {
    pthread_mutex_lock(&s->mu);
    int rc = 0, gone = 0;
    if (!s->stopping && (s->q_n + s->n_active >= s->n_slots + s->queue_max || s->q_n >= s->q_cap))
        gone = queue_purge_cancelled(s);              /* full? not of clients that have left */
    if (s->stopping) rc = -2;
    else if (s->q_n + s->n_active >= s->n_slots + s->queue_max || s->q_n >= s->q_cap) rc = -1;
    else {
        j->refs++;                                    /* the scheduler's reference */
        j->t_submit = tern_time_s();
        s->q[(s->q_head + s->q_n) % s->q_cap] = j;
        s->q_n++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    count_cancelled(s, gone);
    return rc;
}

int srv_sched_set_script(srv_sched *s, const int32_t *ids, int n) {
    s->script.n = 0;
    return prompt_ids_push(&s->script, ids, n);
}

int srv_sched_slots(srv_sched *s, srv_slot_info *out, int cap) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_slots && i < cap; i++) out[i] = s->pub[i];
    pthread_mutex_unlock(&s->mu);
    return s->n_slots;
}

void srv_sched_load(srv_sched *s, int *n_active, int *n_queued) {
    pthread_mutex_lock(&s->mu);
    *n_active = s->n_active;
    *n_queued = s->q_n;
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_shutdown(srv_sched *s) {
    if (!s || !s->th_started) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    s->th_started = false;
}

void srv_sched_free(srv_sched *s) {
    if (!s) return;
    srv_sched_shutdown(s);
    for (int i = 0; i < s->n_slots; i++) {
        tern_session_free(s->slots[i].s);
        tern_spec_free(s->slots[i].sp);
        tern_gen_free(s->slots[i].gen);
        tern_sampler_free(s->slots[i].smp);
        prompt_ids_free(&s->slots[i].cache);
    }
    free(s->slots);
    free(s->pub);
    prompt_ids_free(&s->script);
    free(s->tok_text);
    free(s->tok_off);
    free(s->q);
    free(s->blogits);
    free(s->bsess);
    free(s->btok);
    free(s->bntok);
    free(s->bslot);
    free(s->pfslot);
    free(s->pfn);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
