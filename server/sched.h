/* sched.h: jobs, metrics and the scheduler thread of `tern serve` (see tern_server.h for the model). */
#ifndef TERN_SERVER_SCHED_H
#define TERN_SERVER_SCHED_H

#include "api.h"
#include "prompt.h"
#include "reply.h"
#include "tern_server.h"

#include <pthread.h>
#include <stdint.h>

typedef enum { JOB_QUEUED = 0, JOB_RUNNING, JOB_DONE } srv_job_state;

/* Whole-state copies each slot of a recurrent model keeps (tern_session_opts.n_checkpoints): taken
 * after every prompt chunk, so a later request that shares a long prefix with a slot's cached
 * prompt resumes from the last copy inside it instead of from 0. */
enum { SRV_CHECKPOINTS = 4 };

struct srv_job {
    /* set by the HTTP thread before submission, read-only afterwards */
    srv_request req;
    prompt_ids prompt;
    char id[48];
    long created;
    double t_submit;
    /* guarded by mu (the scheduler writes, the HTTP thread reads and takes text) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    srv_job_state state;
    uint64_t seq;           /* bumped on every change: waiters compare */
    srv_reply reply;
    const char *finish;     /* "stop", "length", "cancelled", "error" (static) */
    srv_usage usage;
    bool cancelled;         /* the client went away */
    bool failed;
    srv_error error;
    srv_logprob *lp;        /* one per generated token (EOG excluded) when req.logprobs */
    int n_lp, cap_lp;
    /* scheduler-thread only until JOB_DONE (then read-only) */
    int n_gen;
    double t_first, t_last, t_done, t_admit, t_prefilled;
    srv_timings tm;
};

srv_job *srv_job_new(void);  /* one reference (the caller's) */
void srv_job_unref(srv_job *j);
void srv_job_cancel(srv_job *j);

enum { SRV_HIST_N = 12 };
typedef struct srv_hist {
    uint64_t count[SRV_HIST_N];   /* cumulative: observations <= bound i */
    uint64_t n;
    double sum;
} srv_hist;
extern const double srv_ttft_bounds[SRV_HIST_N], srv_tpot_bounds[SRV_HIST_N];

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[10];      /* by status: 2xx ok, 400, 401, 404, 405, 413, 415, 429, 503, other (5xx) */
    uint64_t requests_cancelled;
    uint64_t tokens_prompt, tokens_cached, tokens_generated;
    srv_hist ttft, tpot;        /* per request: submission -> first token; mean gap between tokens */
    srv_hist itl;               /* per generated token after a request's first: the gap since the one before */
    uint64_t decode_steps;      /* decode forward passes (one per scheduler step with a decoding slot) */
    uint64_t decode_batched;    /* of those, passes over 2 or more sequences (tern_batch_eval) */
    uint64_t decode_seqs;       /* sequences summed over decode passes (mean batch = seqs / steps) */
    uint64_t decode_batch_max;  /* widest decode pass */
    uint64_t prefill_chunks;    /* prompt chunks evaluated (at most n_batch tokens; alone or in a shared pass) */
    uint64_t shared_passes;     /* passes that carried prompt chunks of 2+ sequences, or chunks beside decode tokens */
    uint64_t mixed_steps;       /* of those, decode passes that also carried prompt chunks (chunked prefill) */
    uint64_t decode_only_steps; /* scheduler steps that only decoded (no prompt chunk, no speculative step) */
    uint64_t decode_only_tokens;    /* tokens those steps appended */
    double decode_only_seconds;     /* their wall time, whole step (sampling, output, forward) */
    uint64_t spec_steps, spec_drafted, spec_accepted;   /* speculative decoding (tern_spec_stats) */
} srv_metrics;

/* Create n_slots sessions (n_ctx, n_batch each) and start the scheduler thread. Each step:
 * admit queued jobs into free slots; drop cancelled jobs; sample one token for every slot that
 * has logits (each with its own sampler); then ONE forward (tern_batch_eval_seqs) appends those
 * tokens to all their sessions and, in the same pass, a chunk of the waiting prompts (oldest
 * admission first): at most prefill_chunk (<= n_batch) prompt tokens while a slot is decoding,
 * n_batch when none is (several prompts may share the pass). Prompts are cut where
 * tern_model_split_rule allows (recurrent models: on the delta rule's block boundaries, pieces of
 * 32+ tokens), so every request's result equals running it alone. A lone prompt with nothing to
 * decode, or architectures the batched call refuses, go through their own evals.
 * spec (NULL: off): a slot that decodes alone (no other slot has a token to evaluate) and did not
 * ask for logprobs takes speculative steps instead (tern_spec_step, prompt-lookup drafts: several
 * tokens per forward; greedy output identical to plain decoding), after the prompts' own passes. */
int srv_sched_init(srv_sched **out, tern_model *m, srv_metrics *mx, int n_slots, int n_ctx, int n_batch, int prefill_chunk,
                   int queue_max,
                   bool kv_f32, const tern_spec_params *spec, tern_err *err);
/* Enqueue (takes its own reference): 0, -1 queue full (429), -2 shutting down (503). */
int srv_sched_submit(srv_sched *s, srv_job *j);
int srv_sched_n_ctx(const srv_sched *s);
void srv_sched_load(srv_sched *s, int *n_active, int *n_queued);
/* One slot as the scheduler left it after its last step (a snapshot: /slots, /metrics). */
typedef struct srv_slot_info {
    int id;
    bool busy;              /* a request holds it */
    int n_ctx;
    int n_cached;           /* tokens whose KV the slot holds (a later request may reuse a prefix) */
    int n_prompt;           /* the request's prompt tokens (0 when idle) */
    int n_prefilled;        /* of those, evaluated or reused */
    int n_decoded;          /* tokens generated so far */
    char job_id[48];        /* the request's id ("chatcmpl-...", "" when idle) */
} srv_slot_info;
/* Tests: every chat reply starts with these tokens instead of sampled ones (tern_gen_params
 * forced), so a test can make a model "write" tool-call markup. Call before any request. */
int srv_sched_set_script(srv_sched *s, const int32_t *ids, int n);
/* Copies the snapshot of every slot (at most cap) into out; returns the number of slots. */
int srv_sched_slots(srv_sched *s, srv_slot_info *out, int cap);
/* Stop the thread: running and queued jobs end with a 503 error, later submissions get -2. */
void srv_sched_shutdown(srv_sched *s);
/* Shut down (if not yet) and free the sessions. */
void srv_sched_free(srv_sched *s);

#endif /* TERN_SERVER_SCHED_H */
