/* http.c: the HTTP side of `tern serve` on libmicrohttpd (one thread per connection):
 * routing, API key, body limit, request validation (api.c), prompt tokenisation and the
 * context check, submission to the scheduler (429 when the queue is full), and the response:
 * one JSON object, or Server-Sent Events in OpenAI's chunk format ending with `data: [DONE]`.
 * A waiting connection thread polls its socket, so a client that disconnects (mid-prefill or
 * mid-stream) cancels its job, which frees the slot at the scheduler's next step. */
#include "info.h"
#include "models.h"
#include "wire.h"
#include "sched.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

extern const char srv_page_html[];

struct srv {
    srv_config cfg;
    srv_models *models;         /* the model given at start, or a folder's (--models-dir) */
    srv_metrics mx;             /* the HTTP layer's counts (requests by status); the models keep the rest */
    struct MHD_Daemon *d;
    unsigned conn_limit;   /* MHD_OPTION_CONNECTION_LIMIT as started (srv_conn_limit) */
    int port;
    atomic_uint_fast64_t next_id;
    atomic_int in_flight;       /* requests whose headers are in and that have not completed */
    atomic_int gen_in_flight;   /* of those, the generation requests (gen_begin): srv_idle waits for them */
    atomic_bool draining;       /* srv_drain: /health is 503 and new generation requests are refused */
};

void srv_config_default(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->parallel = 4;
    c->n_ctx = 4096;
    c->n_batch = 512;
    c->prefill_chunk = 64;
    c->queue_max = 32;
    c->body_max = 1 << 20;
    c->timeout_s = 600;
    c->idle_timeout_s = 10;
    tern_spec_params_default(&c->spec_p);
}

/* ---- per-connection state ------------------------------------------------------------------- */

typedef struct conn {
    srv *s;
    struct MHD_Connection *c;
    sbuf body;
    bool too_large;
    uint64_t arrived;        /* body bytes received, the refused ones included */
    double t0;               /* when its headers were in (srv_config.log_requests) */
    char method[16];         /* the request line, for the log: printable ASCII, cut to fit */
    char path[160];
    bool gen;                /* counted in s->gen_in_flight (gen_begin) until on_completed */
} conn;

typedef struct stream {
    srv *s;
    srv_backend *b;         /* the model the request holds until the stream ends */
    struct MHD_Connection *c;
    srv_job *job;
    int fd;
    sbuf out;               /* SSE bytes not yet handed to MHD */
    size_t out_off;
    int lp_sent;            /* logprob entries already sent */
    size_t text_off;        /* completions: bytes of text sent (logprobs text_offset) */
    bool sent_role, finished, failed;
    srv_wire wire;          /* WIRE_OPENAI: chat or completion chunks; else the Messages / Responses events */
    wire_stream ws;
    bool ws_started;
} stream;

/* Restarts the connection's silence timer (libmicrohttpd restarts it when a timeout is set on a
 * connection whose timeout is 0): called when the model has produced something after a wait, so
 * the time spent waiting for the model (queue, prefill, the next token) never counts as the
 * client's silence. */
static void conn_touch(srv *s, struct MHD_Connection *c) {
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->cfg.timeout_s);
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

/* The peer closed its side (or the socket failed). */
static bool peer_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* Waits until the job changes past *seen or finishes; false if the client went away (the job is
 * then cancelled). */
static bool wait_job(srv_job *j, uint64_t *seen, int fd) {
    pthread_mutex_lock(&j->mu);
    while (j->seq == *seen && j->state != JOB_DONE) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;               /* poll the socket every 20 ms */
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->seq == *seen && j->state != JOB_DONE && peer_gone(fd)) {
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
            return false;
        }
    }
    *seen = j->seq;
    pthread_mutex_unlock(&j->mu);
    return true;
}

/* ---- responses ------------------------------------------------------------------------------ */

static void count_status(srv *s, int status) {
    static const int codes[] = {400, 401, 404, 405, 413, 415, 429, 503};   /* classes 1..8 (sched.h) */
    int k = status < 300 ? 0 : 9;
    for (int i = 0; k == 9 && i < 8; i++)
        if (status == codes[i]) k = i + 1;
    pthread_mutex_lock(&s->mx.mu);
    s->mx.requests[k]++;
    pthread_mutex_unlock(&s->mx.mu);
}

/* text (malloc'd, freed here) as the body of a status reply; allow, when not NULL, is the Allow
 * header a 405 carries (RFC 9110: the methods the path takes). */
static enum MHD_Result send_text_allow(srv *s, struct MHD_Connection *c, int status, const char *type, char *text,
                                       const char *allow) {
    if (!text) {
        text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
        status = 500;
        type = "application/json";
        if (!text) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");   /* CORS: see on_request */
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (status == 429) MHD_add_response_header(r, "Retry-After", "1");   /* seconds; the openai clients honour it */
    if (allow) MHD_add_response_header(r, "Allow", allow);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(s, status);
    return ret;
}

static enum MHD_Result send_text(srv *s, struct MHD_Connection *c, int status, const char *type, char *text) {
    return send_text_allow(s, c, status, type, text, NULL);
}

static enum MHD_Result send_error(srv *s, struct MHD_Connection *c, const srv_error *e) {
    return send_text(s, c, e->status, "application/json", api_error_json(e));
}

static enum MHD_Result fail(srv *s, struct MHD_Connection *c, int status, const char *type, const char *param,
                            const char *msg) {
    srv_error e;
    srv_fail(&e, status, type, param, "%s", msg);
    return send_error(s, c, &e);
}

/* The same in a request format's own error shape (wire.h). */
static enum MHD_Result send_error_w(srv *s, struct MHD_Connection *c, srv_wire w, const srv_error *e) {
    return send_text(s, c, e->status, "application/json", wire_error_json(w, e));
}

static enum MHD_Result fail_w(srv *s, struct MHD_Connection *c, srv_wire w, int status, const char *type,
                              const char *param, const char *msg) {
    srv_error e;
    srv_fail(&e, status, type, param, "%s", msg);
    return send_error_w(s, c, w, &e);
}

/* ---- /metrics -------------------------------------------------------------------------------- */

/* A histogram in the exposition format; labels ("" or `k="v"` pairs) go on every series; help
 * NULL: the HELP and TYPE lines are the caller's (several label sets in one family). */
static void hist_text(sbuf *b, const char *name, const char *labels, const char *help, const srv_hist *h,
                      const double *bounds) {
    char line[1024];
    const char *sep = *labels ? "," : "";
    if (help) {
        snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
        sbuf_add(b, line, strlen(line));
    }
    for (int i = 0; i < SRV_HIST_N; i++) {
        snprintf(line, sizeof line, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[i],
                 (unsigned long long)h->count[i]);
        sbuf_add(b, line, strlen(line));
    }
    snprintf(line, sizeof line, "%s_bucket{%s%sle=\"+Inf\"} %llu\n%s_sum%s%s%s %.6f\n%s_count%s%s%s %llu\n", name, labels,
             sep, (unsigned long long)h->n, name, *labels ? "{" : "", labels, *labels ? "}" : "", h->sum, name,
             *labels ? "{" : "", labels, *labels ? "}" : "", (unsigned long long)h->n);
    sbuf_add(b, line, strlen(line));
}

/* One loaded model's figures for /metrics, taken under its locks. */
typedef struct model_snap {
    const char *name;
    int active, queued;
    uint64_t held;          /* tokens its slots hold */
    double cap;             /* slots x n_ctx */
    srv_metrics mx;         /* a copy (its mutex unused) */
} model_snap;

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_value(char *out, size_t cap, const char *v) {
    size_t k = 0;
    for (; *v && k + 3 < cap; v++) {
        if (*v == '\\' || *v == '"') out[k++] = '\\', out[k++] = *v;
        else if (*v == '\n') out[k++] = '\\', out[k++] = 'n';
        else out[k++] = *v;
    }
    out[k] = '\0';
}

/* One gauge or counter family with a sample per model (vLLM's, labelled model_name). */
static void family(sbuf *b, const char *name, const char *sample, const char *type, const char *help,
                   const model_snap *ms, int n, double (*value)(const model_snap *)) {
    char line[1024], lab[600];
    snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    sbuf_add(b, line, strlen(line));
    for (int i = 0; i < n; i++) {
        label_value(lab, sizeof lab, ms[i].name);
        snprintf(line, sizeof line, "%s{model_name=\"%s\"} %.6g\n", sample, lab, value(&ms[i]));
        sbuf_add(b, line, strlen(line));
    }
}

static double v_running(const model_snap *m) { return m->active; }
static double v_waiting(const model_snap *m) { return m->queued; }
static double v_kv(const model_snap *m) { return m->cap > 0 ? (double)m->held / m->cap : 0; }
static double v_queries(const model_snap *m) { return (double)m->mx.tokens_prompt; }
static double v_hits(const model_snap *m) { return (double)m->mx.tokens_cached; }
static double v_generated(const model_snap *m) { return (double)m->mx.tokens_generated; }

/* The series routers read, under the names vLLM and llama-server export (counters as the family
 * name with the _total sample, as Prometheus clients write them), so the Gateway API Inference
 * Extension's endpoint picker and the vLLM / SGLang routers balance tern replicas as they
 * balance those servers. vLLM's carry model_name, one sample per loaded model; llama-server's are
 * the server's sums. KV-cache use is the tokens the slots hold over their capacity (n_slots x
 * n_ctx); prefix-cache queries and hits count prompt tokens and the prompt tokens reused from a
 * slot's cache. */
static void metrics_router(sbuf *b, const model_snap *ms, int n, const srv_metrics *sum) {
    family(b, "vllm:num_requests_running", "vllm:num_requests_running", "gauge", "requests in a slot (prefill or decode)",
           ms, n, v_running);
    family(b, "vllm:num_requests_waiting", "vllm:num_requests_waiting", "gauge", "requests waiting for a slot", ms, n,
           v_waiting);
    family(b, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc", "gauge",
           "KV-cache use, 0..1 (tokens the slots hold / slots x n_ctx)", ms, n, v_kv);
    family(b, "vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total", "counter",
           "prompt tokens looked up in the prefix cache", ms, n, v_queries);
    family(b, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total", "counter", "prompt tokens reused from the prefix cache",
           ms, n, v_hits);
    family(b, "vllm:prompt_tokens", "vllm:prompt_tokens_total", "counter", "prompt tokens of finished requests", ms, n,
           v_queries);
    family(b, "vllm:generation_tokens", "vllm:generation_tokens_total", "counter", "generated tokens", ms, n, v_generated);
    static const struct { const char *name, *help; } hs[2] = {
        {"vllm:time_to_first_token_seconds", "time from submission to the first generated token"},
        {"vllm:inter_token_latency_seconds", "time between two generated tokens of a request"}};
    for (int h = 0; h < 2; h++) {
        char line[512], lab[600];
        snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", hs[h].name, hs[h].help, hs[h].name);
        sbuf_add(b, line, strlen(line));
        for (int i = 0; i < n; i++) {
            char l2[640];
            label_value(lab, sizeof lab, ms[i].name);
            snprintf(l2, sizeof l2, "model_name=\"%s\"", lab);
            hist_text(b, hs[h].name, l2, NULL, h ? &ms[i].mx.itl : &ms[i].mx.ttft, h ? srv_tpot_bounds : srv_ttft_bounds);
        }
    }
    uint64_t held = 0;
    double cap = 0;
    int active = 0, queued = 0;
    for (int i = 0; i < n; i++) held += ms[i].held, cap += ms[i].cap, active += ms[i].active, queued += ms[i].queued;
    char line[4096];
    snprintf(line, sizeof line,
             "# HELP llamacpp:prompt_tokens_total prompt tokens of finished requests\n"
             "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total %llu\n"
             "# HELP llamacpp:tokens_predicted_total generated tokens\n"
             "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total %llu\n"
             "# HELP llamacpp:n_decode_total decode forward passes\n"
             "# TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total %llu\n"
             "# HELP llamacpp:requests_processing requests in a slot\n"
             "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing %d\n"
             "# HELP llamacpp:requests_deferred requests waiting for a slot\n"
             "# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred %d\n"
             "# HELP llamacpp:kv_cache_usage_ratio KV-cache use, 0..1\n"
             "# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio %.6f\n"
             "# HELP llamacpp:kv_cache_tokens tokens held in the KV caches of the slots\n"
             "# TYPE llamacpp:kv_cache_tokens gauge\nllamacpp:kv_cache_tokens %llu\n",
             (unsigned long long)sum->tokens_prompt, (unsigned long long)sum->tokens_generated,
             (unsigned long long)sum->decode_steps, active, queued, cap > 0 ? (double)held / cap : 0,
             (unsigned long long)held);
    sbuf_add(b, line, strlen(line));
}

static char *metrics_text(srv *s) {
    srv_backend *bk[64];
    const int nb = srv_models_loaded(s->models, bk, 64);
    model_snap ms[64];
    srv_metrics sum;
    memset(&sum, 0, sizeof sum);
    int active = 0, queued = 0, slots = 0;
    for (int i = 0; i < nb; i++) {                    /* each model under its own locks, one at a time */
        model_snap *m = &ms[i];
        m->name = bk[i]->name;
        srv_sched_load(bk[i]->sched, &m->active, &m->queued);
        srv_slot_info si[64];
        const int n = srv_sched_slots(bk[i]->sched, si, 64);
        m->held = 0;
        for (int k = 0; k < n && k < 64; k++) m->held += (uint64_t)si[k].n_cached;
        m->cap = (double)bk[i]->n_ctx * (double)(n < 64 ? n : 64);
        pthread_mutex_lock(&bk[i]->mx.mu);
        m->mx = bk[i]->mx;
        pthread_mutex_unlock(&bk[i]->mx.mu);
        srv_metrics_add(&sum, &m->mx);
        active += m->active;
        queued += m->queued;
        slots += n;
    }
    srv_models_retired(s->models, &sum);              /* unloaded models' counts stay in the totals */
    pthread_mutex_lock(&s->mx.mu);
    memcpy(sum.requests, s->mx.requests, sizeof sum.requests);
    pthread_mutex_unlock(&s->mx.mu);
    sbuf b = {0};
    char line[2048];
    static const char *cls[10] = {"2xx", "400", "401", "404", "405", "413", "415", "429", "503", "5xx"};
    static const char req_head[] = "# HELP tern_requests_total HTTP requests answered, by status class\n"
                                   "# TYPE tern_requests_total counter\n";
    sbuf_add(&b, req_head, sizeof req_head - 1);
    for (int i = 0; i < 10; i++) {
        snprintf(line, sizeof line, "tern_requests_total{status=\"%s\"} %llu\n", cls[i], (unsigned long long)sum.requests[i]);
        sbuf_add(&b, line, strlen(line));
    }
    snprintf(line, sizeof line,
             "# HELP tern_requests_cancelled_total generations ended because the client disconnected\n"
             "# TYPE tern_requests_cancelled_total counter\ntern_requests_cancelled_total %llu\n"
             "# HELP tern_prompt_tokens_total prompt tokens of finished requests\n# TYPE tern_prompt_tokens_total counter\n"
             "tern_prompt_tokens_total %llu\n"
             "# HELP tern_prompt_tokens_cached_total prompt tokens reused from a slot's cache\n"
             "# TYPE tern_prompt_tokens_cached_total counter\ntern_prompt_tokens_cached_total %llu\n"
             "# HELP tern_generated_tokens_total generated tokens\n# TYPE tern_generated_tokens_total counter\n"
             "tern_generated_tokens_total %llu\n",
             (unsigned long long)sum.requests_cancelled, (unsigned long long)sum.tokens_prompt,
             (unsigned long long)sum.tokens_cached, (unsigned long long)sum.tokens_generated);
    sbuf_add(&b, line, strlen(line));
    hist_text(&b, "tern_time_to_first_token_seconds", "", "time from submission to the first generated token", &sum.ttft, srv_ttft_bounds);
    hist_text(&b, "tern_time_per_output_token_seconds", "", "mean time between generated tokens of a request", &sum.tpot, srv_tpot_bounds);
    snprintf(line, sizeof line,
             "# HELP tern_decode_steps_total decode forward passes (all decoding sequences of a scheduler step in one)\n"
             "# TYPE tern_decode_steps_total counter\ntern_decode_steps_total %llu\n"
             "# HELP tern_decode_batched_steps_total decode passes over 2 or more sequences at once\n"
             "# TYPE tern_decode_batched_steps_total counter\ntern_decode_batched_steps_total %llu\n"
             "# HELP tern_decode_sequences_total sequences summed over decode passes (mean batch = this / steps)\n"
             "# TYPE tern_decode_sequences_total counter\ntern_decode_sequences_total %llu\n"
             "# HELP tern_decode_batch_max widest decode pass so far\n# TYPE tern_decode_batch_max gauge\n"
             "tern_decode_batch_max %llu\n"
             "# HELP tern_prefill_chunks_total prompt chunks evaluated (at most n_batch tokens; alone or in a shared pass)\n"
             "# TYPE tern_prefill_chunks_total counter\ntern_prefill_chunks_total %llu\n"
             "# HELP tern_shared_passes_total forward passes carrying prompt chunks of 2+ sequences or beside decode tokens\n"
             "# TYPE tern_shared_passes_total counter\ntern_shared_passes_total %llu\n"
             "# HELP tern_mixed_steps_total decode passes that also carried prompt chunks (chunked prefill)\n"
             "# TYPE tern_mixed_steps_total counter\ntern_mixed_steps_total %llu\n"
             "# HELP tern_spec_steps_total speculative verification passes (a slot decoding alone, --spec)\n"
             "# TYPE tern_spec_steps_total counter\ntern_spec_steps_total %llu\n"
             "# HELP tern_spec_drafted_total drafted tokens verified\n# TYPE tern_spec_drafted_total counter\n"
             "tern_spec_drafted_total %llu\n"
             "# HELP tern_spec_accepted_total drafted tokens accepted\n# TYPE tern_spec_accepted_total counter\n"
             "tern_spec_accepted_total %llu\n",
             (unsigned long long)sum.decode_steps, (unsigned long long)sum.decode_batched,
             (unsigned long long)sum.decode_seqs, (unsigned long long)sum.decode_batch_max,
             (unsigned long long)sum.prefill_chunks, (unsigned long long)sum.shared_passes,
             (unsigned long long)sum.mixed_steps, (unsigned long long)sum.spec_steps,
             (unsigned long long)sum.spec_drafted, (unsigned long long)sum.spec_accepted);
    sbuf_add(&b, line, strlen(line));
    snprintf(line, sizeof line,
             "# HELP tern_decode_only_steps_total scheduler steps that only decoded (no prompt chunk, no speculation)\n"
             "# TYPE tern_decode_only_steps_total counter\ntern_decode_only_steps_total %llu\n"
             "# HELP tern_decode_only_tokens_total tokens appended by those steps\n"
             "# TYPE tern_decode_only_tokens_total counter\ntern_decode_only_tokens_total %llu\n"
             "# HELP tern_decode_only_seconds_total wall time of those steps (steady-state decode rate = tokens / seconds)\n"
             "# TYPE tern_decode_only_seconds_total counter\ntern_decode_only_seconds_total %.6f\n",
             (unsigned long long)sum.decode_only_steps, (unsigned long long)sum.decode_only_tokens,
             sum.decode_only_seconds);
    sbuf_add(&b, line, strlen(line));
    metrics_router(&b, ms, nb, &sum);
    for (int i = 0; i < nb; i++) srv_models_release(s->models, bk[i]);
    snprintf(line, sizeof line,
             "# HELP tern_queue_depth requests waiting for a slot\n# TYPE tern_queue_depth gauge\ntern_queue_depth %d\n"
             "# HELP tern_slots_active slots generating\n# TYPE tern_slots_active gauge\ntern_slots_active %d\n"
             "# HELP tern_slots_total slots of the loaded models\n# TYPE tern_slots_total gauge\ntern_slots_total %d\n"
             "# HELP tern_models_loaded models loaded\n# TYPE tern_models_loaded gauge\ntern_models_loaded %d\n",
             queued, active, slots, nb);
    sbuf_add(&b, line, strlen(line));
    return b.p;
}

/* ---- streaming ------------------------------------------------------------------------------ */

static void sse_add(stream *st, char *json) {
    if (!json) return;
    sbuf_add(&st->out, "data: ", 6);
    sbuf_add(&st->out, json, strlen(json));
    sbuf_add(&st->out, "\n\n", 2);
    free(json);
}

/* The logprobs JSON of the job's entries [st->lp_sent, upto) (NULL when not asked for). Under j->mu. */
static char *stream_logprobs(stream *st, int upto) {
    srv_job *j = st->job;
    if (!j->req.logprobs) return NULL;
    if (upto > j->n_lp) upto = j->n_lp;
    if (upto < st->lp_sent) upto = st->lp_sent;
    size_t off = st->text_off;
    char *js = api_logprobs_json(st->b->m, j->req.kind, j->lp + st->lp_sent, upto - st->lp_sent, &off);
    st->lp_sent = upto;
    return js;
}

/* Appends the events for whatever the job has produced since the last call: one chunk per
 * generated token's text (llama-server's granularity), text that could begin a stop string or a
 * partial UTF-8 character held back until it is decided. */
/* The finished job's reply as wire.h's summary (under j->mu; calls: reply_tool_calls_json's). */
/* The reply's content: up to the tool markup when it parsed into calls; the whole text (markup
 * included) when it did not, so nothing the model wrote is dropped. Under j->mu. */
static size_t job_content_len(const srv_job *j, const char *calls) {
    return j->reply.tool_started && calls ? j->reply.tool_pos : j->reply.content.n;
}

static wire_reply job_wire_reply(srv_job *j, const char *calls) {
    const size_t n_content = job_content_len(j, calls);
    return (wire_reply){j->reply.content.p, n_content, j->reply.reasoning.p, j->reply.reasoning.n, calls,
                        j->finish ? j->finish : "stop", j->reply.stopped, j->usage};
}

/* stream_collect for the Messages and Responses formats. Under j->mu. */
static void stream_collect_wire(stream *st, bool done) {
    srv_job *j = st->job;
    if (!st->ws_started) {
        wire_stream_start(&st->ws, st->wire, j->id, j->created, st->b->name, j->prompt.n, &st->out);
        st->ws_started = true;
    }
    bool think;
    const char *t;
    size_t n;
    int tok_end;
    while (reply_next(&j->reply, done, &think, &t, &n, &tok_end)) wire_stream_text(&st->ws, think, t, n, &st->out);
    if (!done) return;
    if (j->failed) wire_stream_error(&st->ws, &j->error, &st->out);
    else {
        char *calls = reply_tool_calls_json(&j->reply, j->id);
        if (j->reply.tool_started && !calls)          /* markup that parsed into no call: sent as text */
            wire_stream_text(&st->ws, false, j->reply.content.p + j->reply.tool_pos,
                             j->reply.content.n - j->reply.tool_pos, &st->out);
        const wire_reply r = job_wire_reply(j, calls);
        wire_stream_end(&st->ws, &r, &st->out);
        free(calls);
    }
    st->finished = true;
}

static void stream_collect(stream *st) {
    srv_job *j = st->job;
    const srv_backend *b = st->b;
    const bool chat = j->req.kind == SRV_CHAT;
    pthread_mutex_lock(&j->mu);
    const bool done = j->state == JOB_DONE;
    if (st->wire != WIRE_OPENAI) {
        stream_collect_wire(st, done);
        pthread_mutex_unlock(&j->mu);
        return;
    }
    bool think;
    const char *t;
    size_t n;
    int tok_end;
    while (reply_next(&j->reply, done, &think, &t, &n, &tok_end)) {
        char *lp = stream_logprobs(st, tok_end);
        if (chat)
            sse_add(st, api_chat_chunk(j->id, j->created, b->name, !st->sent_role, think ? NULL : t, think ? 0 : n,
                                       think ? t : NULL, think ? n : 0, NULL, NULL, lp, NULL, NULL));
        else
            sse_add(st, api_completion_chunk(j->id, j->created, b->name, t, n, NULL, lp, NULL, NULL));
        free(lp);
        st->sent_role = true;
        if (!think) st->text_off += n;
    }
    if (chat && !st->sent_role) {                     /* the role comes first, before any text */
        sse_add(st, api_chat_chunk(j->id, j->created, b->name, true, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL));
        st->sent_role = true;
    }
    if (done) {
        if (j->failed) {
            sse_add(st, api_error_json(&j->error));
        } else {
            char *calls = chat ? reply_tool_calls_json(&j->reply, j->id) : NULL;
            if (chat && j->reply.tool_started && !calls)   /* markup that parsed into no call: sent as text */
                sse_add(st, api_chat_chunk(j->id, j->created, b->name, false, j->reply.content.p + j->reply.tool_pos,
                                           j->reply.content.n - j->reply.tool_pos, NULL, 0, NULL, NULL, NULL, NULL, NULL));
            const char *finish = calls ? "tool_calls" : j->finish;
            const int kept = reply_tok_kept(&j->reply), n_lp = j->n_lp < kept ? j->n_lp : kept;   /* none past a stop string */
            char *lp = j->req.logprobs && st->lp_sent < n_lp ? stream_logprobs(st, n_lp) : NULL;
            if (calls) sse_add(st, api_chat_chunk(j->id, j->created, b->name, false, NULL, 0, NULL, 0, calls, NULL, NULL, NULL, NULL));
            if (chat) sse_add(st, api_chat_chunk(j->id, j->created, b->name, false, NULL, 0, NULL, 0, NULL, finish, lp, NULL, &j->tm));
            else sse_add(st, api_completion_chunk(j->id, j->created, b->name, "", 0, finish, lp, NULL, &j->tm));
            free(lp);
            if (j->req.include_usage) {
                if (chat) sse_add(st, api_chat_chunk(j->id, j->created, b->name, false, NULL, 0, NULL, 0, NULL, NULL, NULL, &j->usage, NULL));
                else sse_add(st, api_completion_chunk(j->id, j->created, b->name, NULL, 0, NULL, NULL, &j->usage, NULL));
            }
            free(calls);
        }
        sbuf_add(&st->out, "data: [DONE]\n\n", 14);
        st->finished = true;
    }
    pthread_mutex_unlock(&j->mu);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    uint64_t seen = 0;
    while (st->out_off >= st->out.n) {
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        st->out.n = st->out_off = 0;
        pthread_mutex_lock(&st->job->mu);
        seen = st->job->seq;
        pthread_mutex_unlock(&st->job->mu);
        stream_collect(st);
        if (st->out.n > 0) break;
        if (!wait_job(st->job, &seen, st->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    conn_touch(st->s, st->c);
    size_t n = st->out.n - st->out_off;
    if (n > max) n = max;
    memcpy(buf, st->out.p + st->out_off, n);
    st->out_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream *st = cls;
    srv_job_cancel(st->job);                          /* no-op for a finished job */
    srv_job_unref(st->job);
    srv_models_release(st->s->models, st->b);
    sbuf_free(&st->out);
    wire_stream_free(&st->ws);
    free(st);
}

/* ---- completions ---------------------------------------------------------------------------- */

/* The job of a parsed request on model b, tokenised and checked against b's context; NULL with e
 * set when the prompt cannot run. */
static srv_job *completion_job(srv *s, srv_backend *b, srv_job *j, srv_kind kind, srv_error *e) {
    tern_err err = {0};
    int rc;
    if (kind == SRV_CHAT && b->template_err[0]) {   /* the model's template, not the request */
        srv_fail(e, 500, "server_error", NULL, "the model '%s' cannot render chat messages: %s", b->name, b->template_err);
        return NULL;
    }
    {
        tern_model_info info;
        tern_model_get_info(b->m, &info);
        if (!api_check_logit_bias(&j->req, info.n_vocab, e)) return NULL;
    }
    if (kind == SRV_CHAT)
        rc = prompt_chat_append_ex(b->m, s->cfg.chat_template, j->req.msgs, j->req.trusted, j->req.n_msgs, true,
                                   j->req.enable_thinking, true, &j->prompt, NULL, &err);
    else if (j->req.n_prompt_ids > 0) {
        tern_model_info info;
        tern_model_get_info(b->m, &info);
        for (int i = 0; i < j->req.n_prompt_ids; i++)
            if (j->req.prompt_ids[i] >= info.n_vocab) {
                srv_fail(e, 400, "invalid_request_error", "prompt", "'prompt%s[%d]' is token id %d; the vocabulary has ids 0..%d",
                         j->req.prompt_ids_nested ? "[0]" : "", i, j->req.prompt_ids[i], info.n_vocab - 1);
                return NULL;
            }
        if (prompt_ids_push(&j->prompt, j->req.prompt_ids, j->req.n_prompt_ids) != TERN_OK) {
            srv_fail(e, 500, "server_error", NULL, "out of memory");
            return NULL;
        }
        rc = TERN_OK;
    } else
        rc = prompt_tokenize_append(b->m, j->req.prompt, strlen(j->req.prompt), true, j->req.parse_special, &j->prompt,
                                    &err);
    if (rc != TERN_OK) {
        srv_fail(e, 400, "invalid_request_error", kind == SRV_CHAT ? "messages" : "prompt", "%s", err.msg);
        return NULL;
    }
    const int n_ctx = srv_sched_n_ctx(b->sched);
    if (j->prompt.n == 0) {
        srv_fail(e, 400, "invalid_request_error", "prompt", "the prompt is empty and the model has no BOS token to start from");
        return NULL;
    }
    if (j->prompt.n >= n_ctx) {
        srv_fail(e, 400, "invalid_request_error", kind == SRV_CHAT ? "messages" : "prompt",
                 "the prompt is %d tokens; the context is %d tokens (it must leave room for at least one generated token)",
                 j->prompt.n, n_ctx);
        return NULL;
    }
    return j;
}

/* A chat or text completion; w: the request's format (Messages and Responses requests are
 * translated into chat requests first, and answered in their own shapes). The request holds its
 * model from here to its last byte (a stream releases it when it ends). */
static enum MHD_Result handle_completion(srv *s, conn *cn, srv_kind kind, srv_wire w) {
    struct MHD_Connection *c = cn->c;
    srv_error e;
    const char *body = cn->body.p ? cn->body.p : "";
    size_t n_body = cn->body.n;
    char *chat = NULL;
    if (w != WIRE_OPENAI && !(chat = wire_to_chat(w, body, n_body, &e))) return send_error_w(s, c, w, &e);
    if (chat) body = chat, n_body = strlen(chat);
    char *want = NULL;
    if (srv_models_multi(s->models)) {                /* a bad request must not load (or unload) a model */
        srv_request check;
        if (!api_parse_request_fmt(kind, SRV_TOOLS_QWEN35, body, n_body, &check, &e)) {
            free(chat);
            return send_error_w(s, c, w, &e);
        }
        api_request_free(&check);
        if (!api_body_model(body, n_body, &want, &e)) {
            free(chat);
            return send_error_w(s, c, w, &e);
        }
    }
    srv_backend *b = srv_models_acquire(s->models, want, &e);
    free(want);
    srv_job *j = b ? srv_job_new() : NULL;
    if (b && !j) srv_fail(&e, 500, "server_error", NULL, "out of memory");
    const bool parsed = j && api_parse_request_fmt(kind, b->tools_fmt, body, n_body, &j->req, &e);
    free(chat);
    if (!parsed || !completion_job(s, b, j, kind, &e)) {
        srv_job_unref(j);
        srv_models_release(s->models, b);
        return send_error_w(s, c, w, &e);
    }
    reply_init(&j->reply, j->req.stop, j->req.n_stop, j->req.has_tools);
    snprintf(j->id, sizeof j->id, "%s-%llx%06llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)time(NULL),
             (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    j->created = (long)time(NULL);
    const int rc = srv_sched_submit(b->sched, j);
    if (rc != 0) {
        srv_job_unref(j);
        srv_models_release(s->models, b);
        if (rc != -1) return fail_w(s, c, w, 503, "unavailable_error", NULL, "the server is shutting down");
        char msg[160];
        snprintf(msg, sizeof msg, "too many requests: every slot (-np %d) is busy and the queue is full (--queue %d); retry later",
                 s->cfg.parallel, s->cfg.queue_max);
        return fail_w(s, c, w, 429, "rate_limit_error", NULL, msg);
    }
    const int fd = conn_fd(c);
    if (j->req.stream) {
        stream *st = calloc(1, sizeof *st);
        struct MHD_Response *r = st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free) : NULL;
        if (!r) {
            srv_job_cancel(j);
            srv_job_unref(j);
            srv_models_release(s->models, b);
            free(st);
            return MHD_NO;
        }
        st->s = s;
        st->b = b;                                    /* released by stream_free */
        st->c = c;
        st->job = j;                                  /* the stream owns the HTTP reference now */
        st->fd = fd;
        st->wire = w;
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        count_status(s, 200);
        return ret;
    }
    uint64_t seen = 0;
    double t_peer = tern_time_s();
    for (;;) {
        pthread_mutex_lock(&j->mu);
        const bool done = j->state == JOB_DONE;
        pthread_mutex_unlock(&j->mu);
        if (done) break;
        bool gone = !wait_job(j, &seen, fd);          /* (checks the socket only while nothing happens) */
        if (!gone && tern_time_s() - t_peer >= 0.02) {    /* tokens flowing: look at the socket every 20 ms too */
            t_peer = tern_time_s();
            if (peer_gone(fd)) {
                srv_job_cancel(j);
                gone = true;
            }
        }
        if (gone) {                                   /* client gone: the slot is freed at the next step */
            srv_job_unref(j);
            srv_models_release(s->models, b);
            return MHD_NO;
        }
    }
    char *out;
    int status = 200;
    pthread_mutex_lock(&j->mu);
    if (j->failed) {
        out = wire_error_json(w, &j->error);
        status = j->error.status;
    } else {
        const char *cc, *rr;
        size_t nc, nr;
        reply_take(&j->reply, true, &cc, &nc, &rr, &nr);
        (void)cc, (void)rr, (void)nc, (void)nr;       /* the whole texts are used below */
        char *calls = kind == SRV_CHAT ? reply_tool_calls_json(&j->reply, j->id) : NULL;
        if (w != WIRE_OPENAI) {
            const wire_reply r = job_wire_reply(j, calls);
            out = wire_response(w, j->id, j->created, b->name, &r);
        } else {
            const size_t n_content = job_content_len(j, calls);
            size_t off = 0;
            const int kept = reply_tok_kept(&j->reply), n_lp = j->n_lp < kept ? j->n_lp : kept;   /* none past a stop string */
            char *lp = j->req.logprobs ? api_logprobs_json(b->m, kind, j->lp, n_lp, &off) : NULL;
            if (kind == SRV_CHAT)
                out = api_chat_response(j->id, j->created, b->name, j->reply.content.p, n_content, j->reply.reasoning.p,
                                        j->reply.reasoning.n, calls, calls ? "tool_calls" : j->finish, lp, &j->usage, &j->tm);
            else
                out = api_completion_response(j->id, j->created, b->name, j->reply.content.p, n_content, j->finish, lp,
                                              &j->usage, &j->tm);
            free(lp);
        }
        free(calls);
    }
    pthread_mutex_unlock(&j->mu);
    srv_job_unref(j);
    srv_models_release(s->models, b);
    return send_text(s, c, status, "application/json", out);
}

/* ---- routing -------------------------------------------------------------------------------- */

/* The request body's media type. llama-server reads any body as JSON; vLLM refuses every type but
 * application/json with 415, a missing Content-Type included. tern takes application/json (any
 * case, parameters allowed, a charset only if it is UTF-8) and, as llama-server, a request with no
 * Content-Type (raw clients); anything else (text/plain, multipart/form-data, the
 * application/x-www-form-urlencoded of a bare `curl -d`) is refused with 415 and says what to
 * send. Returns true if acceptable, else writes the message into why. */
static bool content_type_ok(const char *ct, char *why, size_t n) {
    if (!ct) return true;
    const char *p = ct;
    while (*p == ' ' || *p == '\t') p++;
    size_t k = strcspn(p, ";");
    while (k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t')) k--;
    if (k != 16 || strncasecmp(p, "application/json", 16) != 0) {
        snprintf(why, n, "Content-Type '%.80s' is not supported: send the body as JSON with Content-Type: application/json", ct);
        return false;
    }
    for (const char *q = strchr(p, ';'); q; q = strchr(q + 1, ';')) {   /* parameters: only charset matters */
        const char *a = q + 1;
        while (*a == ' ' || *a == '\t') a++;
        if (strncasecmp(a, "charset=", 8) != 0) continue;
        a += 8;
        const size_t m = strcspn(a, "; \t");
        const bool quoted = m >= 2 && a[0] == '"' && a[m - 1] == '"';
        const char *v = quoted ? a + 1 : a;
        const size_t vl = quoted ? m - 2 : m;
        if (!((vl == 5 && !strncasecmp(v, "utf-8", 5)) || (vl == 4 && !strncasecmp(v, "utf8", 4)))) {
            snprintf(why, n, "Content-Type '%.80s' is not supported: the JSON body must be UTF-8 (charset=utf-8, or no charset)", ct);
            return false;
        }
    }
    return true;
}

/* The API key check. RFC 9110 section 11.1/11.4: credentials = auth-scheme 1*SP token68, and the
 * scheme is case-insensitive, so "Bearer", "bearer" and "BEARER" are the same scheme (OpenAI's
 * clients send "Bearer"; some proxies and curl users write "bearer"); one or more spaces (or
 * tabs) separate it from the key, and whitespace around the key is not part of it. The key
 * compare takes the same time wherever the first difference is (no early exit). */
/* k[0..lk) equals the server's key, compared in constant time (no early exit on a difference). */
static bool key_matches(const srv *s, const char *k) {
    while (*k == ' ' || *k == '\t') k++;
    size_t lk = strlen(k);
    while (lk > 0 && (k[lk - 1] == ' ' || k[lk - 1] == '\t')) lk--;
    const char *want = s->cfg.api_key;
    const size_t lw = strlen(want);
    unsigned diff = (unsigned)(lk != lw);
    for (size_t i = 0; i < lw; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < lk ? k[i] : 0);
    return diff == 0;
}

/* The key, as "Authorization: Bearer KEY" (OpenAI's clients) or "x-api-key: KEY" (Anthropic's):
 * either one carrying it is enough. */
static bool authorized(srv *s, struct MHD_Connection *c) {
    if (!s->cfg.api_key || !*s->cfg.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (h) {
        while (*h == ' ' || *h == '\t') h++;
        if (strncasecmp(h, "Bearer", 6) == 0 && (h[6] == ' ' || h[6] == '\t') && key_matches(s, h + 6)) return true;
    }
    return x && key_matches(s, x);
}

/* The Content-Length headers of a request (MHD_get_connection_values iterator). */
typedef struct {
    int n;
    bool differ;
    const char *first, *other;
} cl_seen;
static enum MHD_Result count_content_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    cl_seen *c = cls;
    if (!key || strcasecmp(key, "Content-Length") != 0) return MHD_YES;
    c->n++;
    if (!c->first) c->first = value ? value : "";
    else if (strcmp(c->first, value ? value : "") != 0 && !c->differ) {
        c->differ = true;
        c->other = value ? value : "";
    }
    return MHD_YES;
}

/* The request path as an error message shows it: invalid UTF-8 as U+FFFD, whole up to
 * SRV_PATH_SHOWN bytes, else its first bytes (cut at a character boundary) then "... (N bytes)",
 * N the bytes the path had, so the client sees it was cut (a message has 320 bytes, a path can be
 * as long as the request line). Returns buf. */
enum { SRV_PATH_SHOWN = 128 };
static const char *path_shown(const char *url, char buf[SRV_PATH_SHOWN + 40]) {
    const size_t n = strlen(url);
    char *clean = api_utf8_dup(url, n);
    if (!clean) return strcpy(buf, "(a path)");
    const size_t m = strlen(clean);
    if (m <= SRV_PATH_SHOWN) {
        memcpy(buf, clean, m + 1);
    } else {
        size_t k = SRV_PATH_SHOWN - 3;                /* the kept bytes and "..." fit SRV_PATH_SHOWN */
        while (k > 0 && ((unsigned char)clean[k] & 0xc0) == 0x80) k--;
        snprintf(buf, SRV_PATH_SHOWN + 40, "%.*s... (%zu bytes)", (int)k, clean, n);
    }
    free(clean);
    return buf;
}

/* 405 naming the method and path received and the one the path takes ("GET" or "POST"), in the
 * path's error shape w, with the Allow header listing what the path answers (GET paths answer HEAD
 * as GET; every path answers a CORS preflight, OPTIONS). */
static enum MHD_Result fail_method(srv *s, struct MHD_Connection *c, srv_wire w, const char *method, const char *url,
                                   const char *want) {
    char shown[SRV_PATH_SHOWN + 40];
    srv_error e;
    srv_fail(&e, 405, "invalid_request_error", NULL, "method %.16s not allowed on %s; use %s", method, path_shown(url, shown), want);
    return send_text_allow(s, c, 405, "application/json", wire_error_json(w, &e),
                           !strcmp(want, "GET") ? "GET, HEAD, OPTIONS" : "POST, OPTIONS");
}

/* Routes that answer without the API key. */
static bool open_route(const char *url) { return !strcmp(url, "/") || !strcmp(url, "/index.html") || !strcmp(url, "/health"); }

/* The error shape a URL's clients read: Anthropic's for /v1/messages and any path under it (an
 * Anthropic client's /v1/messages/count_tokens, /v1/messages/batches), OpenAI's elsewhere. */
static srv_wire wire_of(const char *url) {
    const size_t n = strlen("/v1/messages");
    return !strncmp(url, "/v1/messages", n) && (url[n] == '\0' || url[n] == '/') ? WIRE_ANTHROPIC : WIRE_OPENAI;
}

static enum MHD_Result fail_auth(srv *s, struct MHD_Connection *c, const char *url) {
    return fail_w(s, c, wire_of(url), 401, "authentication_error", NULL,
                  "invalid or missing API key (Authorization: Bearer KEY, or x-api-key: KEY)");
}

static enum MHD_Result fail_too_large(srv *s, struct MHD_Connection *c, const char *url, const char *how) {
    char msg[160];
    snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes%s", s->cfg.body_max, how);
    return fail_w(s, c, wire_of(url), 413, "invalid_request_error", NULL, msg);
}

/* The error response for a request whose body is still arriving, written straight to the socket,
 * after which the caller returns MHD_NO (libmicrohttpd closes the connection). libmicrohttpd
 * 0.9.75 refuses MHD_queue_response while a body is being received (it accepts one only before
 * the body or after all of it), and waiting for the rest of a chunked body that has already
 * passed the limit means waiting on a client that may never send it (the connection timeout).
 * In thread-per-connection mode this thread owns the socket and libmicrohttpd has nothing queued
 * on it. The write side is shut down after the response and what the client still sends is
 * drained for a moment (at most 1 s), so the close does not reset the connection before the
 * client has read the answer. */
static enum MHD_Result reject_upload(srv *s, conn *cn, srv_wire shape, int status, const srv_error *e) {
    char *body = wire_error_json(shape, e);
    const int fd = conn_fd(cn->c);
    count_status(s, status);
    if (!body || fd < 0) {
        free(body);
        return MHD_NO;
    }
    char head[320];
    const int nh = snprintf(head, sizeof head,
                            "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                            "Access-Control-Allow-Origin: *\r\n%sConnection: close\r\n\r\n",
                            status, MHD_get_reason_phrase_for((unsigned)status), strlen(body),
                            status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
    const char *parts[2] = {head, body};
    const size_t lens[2] = {(size_t)nh, strlen(body)};
    const double t0 = tern_time_s();
    for (int i = 0; i < 2; i++)
        for (size_t off = 0; off < lens[i] && tern_time_s() - t0 < 2.0;) {
            const ssize_t w = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (w > 0) off += (size_t)w;
            else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, 100);
            } else {
                i = 2;                                /* the client is gone */
                break;
            }
        }
    free(body);
    shutdown(fd, SHUT_WR);
    char sink[4096];
    for (const double t1 = tern_time_s(); tern_time_s() - t1 < 1.0;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0) break;             /* quiet for 200 ms (a stalled client): done */
        const ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
    }
    return MHD_NO;
}

/* 204 to a CORS preflight: any origin, the methods the API takes, the headers the browser asks
 * for (or Authorization and Content-Type), cached for a day. */
static enum MHD_Result preflight(srv *s, struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", want && *want ? want : "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    const enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    count_status(s, 204);
    return ret;
}

/* src as a log field in dst (size n >= 4): bytes outside printable ASCII become '?' (a path
 * decoded from %0A must not start a line of its own), and a longer value ends in "...". */
static void log_field(char *dst, size_t n, const char *src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < n; i++) dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
    dst[i] = '\0';
    if (src && src[i] && n >= 4) memcpy(dst + n - 4, "...", 4);
}

/* Counts the Transfer-Encoding headers (MHD_get_connection_values: cls an int). */
static enum MHD_Result count_te(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind, (void)value;
    if (key && !strcasecmp(key, "Transfer-Encoding")) ++*(int *)cls;
    return MHD_YES;
}

/* Counts the query arguments named "model" (MHD_get_connection_values: cls an int). */
static enum MHD_Result count_model_args(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind, (void)value;
    if (key && !strcmp(key, "model")) ++*(int *)cls;
    return MHD_YES;
}

/* A Transfer-Encoding value that libmicrohttpd decodes: exactly "chunked", any case. A list
 * ("gzip, chunked"), another coding, or blanks it keeps around the word are not. */
static bool te_chunked(const char *te) { return strcasecmp(te, "chunked") == 0; }

/* A generation request (completions, chat, messages, responses) counts in s->gen_in_flight from
 * here until the connection completes it, whatever it answers: srv_idle waits for those, so a
 * drain never stops a request that is still tokenising, loading its model or generating. The
 * count comes before the draining check, so every request is either refused by it or seen by
 * srv_idle. Returns false when the server is draining (503). */
static bool gen_begin(srv *s, conn *cn) {
    if (!cn->gen) {
        cn->gen = true;
        atomic_fetch_add(&s->gen_in_flight, 1);
    }
    return !atomic_load(&s->draining);
}

/* The path of an absolute-form request target ("http://host:port/path": RFC 9112 3.2.2, which a
 * server must accept): what follows the authority, "/" when nothing does; any other url as is. */
static const char *origin_form(const char *url) {
    size_t k = 0;
    if (!strncasecmp(url, "http://", 7)) k = 7;
    else if (!strncasecmp(url, "https://", 8)) k = 8;
    else return url;
    const char *p = strchr(url + k, '/');
    return p ? p : "/";
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    url = origin_form(url);
    srv *s = cls;
    conn *cn = *con_cls;
    if (!cn) {                                        /* first call: headers only */
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        cn->s = s;
        cn->c = c;
        *con_cls = cn;
        if (s->cfg.log_requests) {
            cn->t0 = tern_time_s();
            log_field(cn->method, sizeof cn->method, method);
            log_field(cn->path, sizeof cn->path, url);
        }
        atomic_fetch_add(&s->in_flight, 1);
        /* the headers are in: from now on the request's timeout (body, reply) instead of the idle one */
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->cfg.timeout_s);
        /* Content-Length given twice with different values: 400 before any body is read (RFC 9112
         * 6.3: an unrecoverable framing error; a proxy that took the other value would see the
         * body's rest as the next request). libmicrohttpd 0.9.75 keeps both and frames by the first. */
        cl_seen seen = {0};
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_content_length, &seen);
        if (seen.differ) {
            char msg[200];
            snprintf(msg, sizeof msg, "the Content-Length header is given %d times with different values ('%.40s', '%.40s'): "
                     "expected one length", seen.n, seen.first ? seen.first : "", seen.other ? seen.other : "");
            return fail(s, c, 400, "invalid_request_error", NULL, msg);
        }
        /* Content-Length beside Transfer-Encoding: 400 and the connection closes (RFC 9112 6.3: the
         * two disagree on where the body ends; a proxy that framed it by the other would read the
         * body's rest as the next request) */
        const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
        int n_te = 0;                  /* several Transfer-Encoding headers are one list (RFC 9110 5.3) */
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_te, &n_te);
        if (te && (n_te > 1 || !te_chunked(te))) {   /* RFC 9112 6.1: a coding the server does not know is 501, then close */
            char msg[200];
            if (n_te > 1)
                snprintf(msg, sizeof msg, "Transfer-Encoding is given %d times (one list of codings, the first '%.60s'); "
                         "expected 'chunked' alone (or Content-Length)", n_te, te);
            else
                snprintf(msg, sizeof msg, "Transfer-Encoding '%.60s' is not supported; expected 'chunked' alone (or "
                         "Content-Length)", te);
            return fail(s, c, 501, "invalid_request_error", NULL, msg);
        }
        if (seen.n > 0 && te) {
            char msg[200];
            snprintf(msg, sizeof msg, "the request has both Content-Length ('%.40s') and Transfer-Encoding ('%.40s'): "
                     "expected one of them", seen.first, te);
            return fail(s, c, 400, "invalid_request_error", NULL, msg);
        }
        /* a declared Content-Length over the limit is answered now, before any of the body is read
         * (libmicrohttpd then closes the connection); the key is checked first, as for any request */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end = NULL;
            const unsigned long long n = strtoull(cl, &end, 10);
            if (end != cl && n > s->cfg.body_max) {      /* (past 64 bits libmicrohttpd answers 413 itself) */
                if (!open_route(url) && !authorized(s, c)) return fail_auth(s, c, url);
                char how[64];
                snprintf(how, sizeof how, ": Content-Length is %llu", n);
                return fail_too_large(s, c, url, how);
            }
        }
        return MHD_YES;
    }
    if (*upload_size > 0) {                           /* body, in pieces */
        cn->arrived += *upload_size;
        if (!cn->too_large && cn->body.n + *upload_size > s->cfg.body_max) cn->too_large = true;
        if (!cn->too_large && !sbuf_add(&cn->body, upload_data, *upload_size)) cn->too_large = true;
        *upload_size = 0;
        if (cn->too_large) {                          /* a chunked body past the limit: answer now, close */
            srv_error e;
            if (!open_route(url) && !authorized(s, c))
                srv_fail(&e, 401, "authentication_error", NULL, "invalid or missing API key (Authorization: Bearer KEY)");
            else
                srv_fail(&e, 413, "invalid_request_error", NULL,
                         "the request body is larger than the limit of %zu bytes: %llu bytes had arrived", s->cfg.body_max,
                         (unsigned long long)cn->arrived);
            return reject_upload(s, cn, wire_of(url), e.status, &e);
        }
        return MHD_YES;
    }
    /* HEAD is answered as GET (libmicrohttpd sends the headers only): load balancers and uptime checks */
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    /* CORS, as llama-server: every answer carries Access-Control-Allow-Origin: * and a preflight
     * (OPTIONS) is answered without the key (browsers send none with it), so a front end served from
     * another origin (a local HTML file, Open WebUI in a tab) can call the API. With --api-key the
     * key is still required for every request; without one, any page in the user's browser can use
     * the server, as it can llama-server's (README). */
    if (!strcmp(method, "OPTIONS")) return preflight(s, c);
    if (get && (!strcmp(url, "/") || !strcmp(url, "/index.html"))) {
        char *page = strdup(srv_page_html);
        return send_text(s, c, 200, "text/html; charset=utf-8", page);
    }
    if (get && !strcmp(url, "/health")) {
        if (atomic_load(&s->draining))   /* load balancers take the replica out before it stops */
            return send_text(s, c, 503, "application/json", strdup("{\"status\":\"draining\"}"));
        return send_text(s, c, 200, "application/json", strdup("{\"status\":\"ok\"}"));
    }
    if (open_route(url)) return fail_method(s, c, WIRE_OPENAI, method, url, "GET");   /* PUT /health, POST / */
    if (!authorized(s, c)) return fail_auth(s, c, url);
    if (cn->too_large) {
        char how[64];
        snprintf(how, sizeof how, ": %llu bytes had arrived", (unsigned long long)cn->arrived);
        return fail_too_large(s, c, url, how);
    }
    const bool is_chat = !strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions");
    const bool is_cmpl = !strcmp(url, "/v1/completions") || !strcmp(url, "/completions");
    if (is_chat || is_cmpl) {
        if (!post) return fail_method(s, c, WIRE_OPENAI, method, url, "POST");
        if (!gen_begin(s, cn))
            return fail(s, c, 503, "unavailable_error", NULL, "the server is draining (stopping after its running requests)");
        char why[256];
        if (!content_type_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"), why, sizeof why))
            return fail(s, c, 415, "invalid_request_error", NULL, why);
        return handle_completion(s, cn, is_chat ? SRV_CHAT : SRV_COMPLETION, WIRE_OPENAI);
    }
    const bool is_msgs = !strcmp(url, "/v1/messages"), is_resp = !strcmp(url, "/v1/responses");
    if (is_msgs || is_resp) {
        const srv_wire w = is_msgs ? WIRE_ANTHROPIC : WIRE_RESPONSES;
        if (!post) return fail_method(s, c, w, method, url, "POST");
        if (!gen_begin(s, cn))
            return fail_w(s, c, w, 503, "unavailable_error", NULL, "the server is draining (stopping after its running requests)");
        char why[256];
        if (!content_type_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"), why, sizeof why))
            return fail_w(s, c, w, 415, "invalid_request_error", NULL, why);
        return handle_completion(s, cn, SRV_CHAT, w);
    }
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
        if (!get) return fail_method(s, c, WIRE_OPENAI, method, url, "GET");
        return send_text(s, c, 200, "application/json", srv_models_list_json(s->models, (long)time(NULL)));
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) return fail_method(s, c, WIRE_OPENAI, method, url, "GET");
        return send_text(s, c, 200, "text/plain; version=0.0.4", metrics_text(s));
    }
    const bool is_load = !strcmp(url, "/models/load"), is_unload = !strcmp(url, "/models/unload");
    if (is_load || is_unload) {                        /* llama-server's router: {"model": id} */
        if (!post) return fail_method(s, c, WIRE_OPENAI, method, url, "POST");
        char why[256];
        if (!content_type_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"), why, sizeof why))
            return fail(s, c, 415, "invalid_request_error", NULL, why);
        if (!srv_models_multi(s->models))
            return fail(s, c, 400, "invalid_request_error", NULL,
                        "this server serves the one model of -m, loaded for its whole life (--models-dir serves a folder)");
        char *name = NULL;
        srv_error e;
        bool ok = api_body_model(cn->body.p ? cn->body.p : "", cn->body.n, &name, &e);
        if (ok && (!name || !*name))
            ok = srv_fail(&e, 400, "invalid_request_error", "model", "'model' is %s: expected a model id (GET /v1/models)",
                          name ? "an empty string" : "required");
        if (ok && is_unload) ok = srv_models_unload(s->models, name, &e);
        else if (ok) {
            srv_backend *b = srv_models_acquire(s->models, name, &e);
            srv_models_release(s->models, b);
            ok = b != NULL;
        }
        free(name);
        return ok ? send_text(s, c, 200, "application/json", strdup("{\"success\":true}")) : send_error(s, c, &e);
    }
    if (!strncmp(url, "/v1/models/", 11) || !strncmp(url, "/models/", 8)) {
        if (!get) return fail_method(s, c, WIRE_OPENAI, method, url, "GET");
        srv_error e;
        const char *id = url + (url[1] == 'v' ? strlen("/v1/models/") : strlen("/models/"));
        char *list = srv_models_list_json(s->models, (long)time(NULL));
        char *j = info_model(list, id, &e);
        free(list);
        return j ? send_text(s, c, 200, "application/json", j) : send_error(s, c, &e);
    }
    const bool is_tok = !strcmp(url, "/tokenize"), is_detok = !strcmp(url, "/detokenize"),
               is_tmpl = !strcmp(url, "/apply-template"), is_props = !strcmp(url, "/props"), is_slots = !strcmp(url, "/slots");
    if (is_tok || is_detok || is_tmpl || is_props || is_slots) {
        const bool is_get = is_props || is_slots;
        if (is_get ? !get : !post) return fail_method(s, c, WIRE_OPENAI, method, url, is_get ? "GET" : "POST");
        char why[256];
        if (!is_get && !content_type_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"), why, sizeof why))
            return fail(s, c, 415, "invalid_request_error", NULL, why);
        const char *body = cn->body.p ? cn->body.p : "";
        /* which model: the body's "model" (POST) or ?model= (GET); with one model, that one */
        char *want = NULL;
        srv_error e;
        if (srv_models_multi(s->models)) {
            const char *q = NULL;
            size_t qn = 0;              /* the decoded length: a %00 in the query shows as strlen(q) < qn */
            if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "model", strlen("model"), &q, &qn) != MHD_YES) q = NULL;
            int n_model = 0;            /* ?model= given twice names no one model, as a duplicate JSON key does not */
            if (is_get) MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, count_model_args, &n_model);
            if (n_model > 1) {
                srv_fail(&e, 400, "invalid_request_error", "model", "the query gives 'model' %d times; expected one model id",
                         n_model);
                return send_error(s, c, &e);
            }
            if (is_get && q && strlen(q) != qn) {
                srv_fail(&e, 400, "invalid_request_error", "model", "the query's 'model' has a NUL byte (%%00) at offset %zu of "
                         "%zu: a model id holds none", strlen(q), qn);
                return send_error(s, c, &e);
            }
            if (is_get) want = q ? strdup(q) : NULL;
            else if (!api_body_model(body, cn->body.n, &want, &e)) return send_error(s, c, &e);
        }
        srv_backend *b = srv_models_acquire(s->models, want, &e);
        free(want);
        if (!b) return send_error(s, c, &e);
        char *j;
        if (is_props) {
            const info_props_in in = {b->name, b->path[0] ? b->path : s->cfg.model_path, b->n_ctx, s->cfg.parallel,
                                      s->cfg.chat_template};
            j = info_props(b->m, &in);
        } else if (is_slots) {
            srv_slot_info si[64];
            const int n = srv_sched_slots(b->sched, si, 64);
            j = info_slots(si, n < 64 ? n : 64);
        } else if (!is_tok && !is_detok && b->template_err[0]) {   /* /apply-template: the model's template */
            srv_fail(&e, 500, "server_error", NULL, "the model '%s' cannot render chat messages: %s", b->name, b->template_err);
            j = NULL;
        } else
            j = is_tok     ? info_tokenize(b->m, body, cn->body.n, &e)
                : is_detok ? info_detokenize(b->m, body, cn->body.n, &e)
                           : info_apply_template(b->m, s->cfg.chat_template, b->tools_fmt, body, cn->body.n, &e);
        srv_models_release(s->models, b);
        return j ? send_text(s, c, 200, "application/json", j) : send_error(s, c, &e);
    }
    srv_error e;   /* OpenAI names the method and path, so a client sees which URL it built */
    char shown[SRV_PATH_SHOWN + 40];
    srv_fail(&e, 404, "invalid_request_error", NULL, "no such endpoint: %.16s %s; expected /v1/chat/completions, "
             "/v1/completions, /v1/messages, /v1/responses, /v1/models, /health, /metrics, ...", method, path_shown(url, shown));
    return send_error_w(s, c, wire_of(url), &e);   /* under /v1/messages: Anthropic's not_found_error */
}

/* The access log line of a finished request (srv_config.log_requests), in one write so that lines
 * of concurrent requests do not interleave: "tern serve: PEER METHOD PATH STATUS SECONDS s", the
 * status that was queued (or "-" for none: the connection ended before a reply), and why it ended
 * when that was not with its reply complete (libmicrohttpd's termination code). */
static void log_request(const conn *cn, enum MHD_RequestTerminationCode toe) {
    char peer[INET6_ADDRSTRLEN + 2] = "-", status[12] = "-";
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(cn->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ai && ai->client_addr) {
        const struct sockaddr *sa = ai->client_addr;
        const socklen_t len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        if (getnameinfo(sa, len, peer, sizeof peer, NULL, 0, NI_NUMERICHOST) != 0) snprintf(peer, sizeof peer, "-");
    }
    const union MHD_ConnectionInfo *si = MHD_get_connection_info(cn->c, MHD_CONNECTION_INFO_HTTP_STATUS);
    if (si && si->http_status) snprintf(status, sizeof status, "%u", si->http_status);
    const char *why = " (cut short)";   /* the connection ended before its reply: the client left, a write failed */
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: why = ""; break;
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT: why = " (the client closed it)"; break;
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: why = " (timed out)"; break;
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: why = " (the server stopped)"; break;
    case MHD_REQUEST_TERMINATED_READ_ERROR: why = " (a read error)"; break;
    default: break;
    }
    char line[512];
    const int k = snprintf(line, sizeof line, "tern serve: %s %s %s %s %.3f s%s\n", peer, cn->method, cn->path, status,
                           tern_time_s() - cn->t0, why);
    if (k > 0) fputs(line, stderr);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    const srv *s = cls;
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->cfg.idle_timeout_s);   /* keep-alive: idle again */
    conn *cn = *con_cls;
    if (!cn) return;
    if (s->cfg.log_requests) log_request(cn, toe);
    if (cn->gen) atomic_fetch_sub(&cn->s->gen_in_flight, 1);
    atomic_fetch_sub(&cn->s->in_flight, 1);
    sbuf_free(&cn->body);
    free(cn);
    *con_cls = NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int srv_resolve_host(const char *host, int port, struct addrinfo **out, tern_err *err) {
    *out = NULL;
    if (!host || !*host) return tern_err_set(err, TERN_E_ARG, "--host: empty; expected a host name or an IPv4/IPv6 address");
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char serv[16], bare[256];
    snprintf(serv, sizeof serv, "%d", port);
    const size_t n = strlen(host);
    const char *name = host;
    if (n >= 2 && n < sizeof bare && host[0] == '[' && host[n - 1] == ']') {   /* "[::1]", as in a URL */
        memcpy(bare, host + 1, n - 2);
        bare[n - 2] = '\0';
        name = bare;
    }
    const int rc = getaddrinfo(name, serv, &hints, out);
    if (rc != 0 || !*out) {
        if (*out) freeaddrinfo(*out);
        *out = NULL;
        return tern_err_set(err, TERN_E_ARG, "--host '%s': cannot resolve it (%s)", host,
                           rc == EAI_SYSTEM ? strerror(errno) : rc ? gai_strerror(rc) : "no address");
    }
    return TERN_OK;
}

/* The server around a table of models: checks the configuration, then listens. Takes models
 * (freed on failure). */
static int srv_listen(srv **out, srv_models *models, const srv_config *cfg, tern_err *err);

static int check_config(const srv_config *cfg, tern_err *err) {
    if (cfg->parallel < 1 || cfg->parallel > 64) return tern_err_set(err, TERN_E_ARG, "--parallel %d, expected 1..64", cfg->parallel);
    if (cfg->timeout_s < 0 || cfg->idle_timeout_s < 0 || cfg->conn_per_ip < 0 || cfg->conn_max < 0)
        return tern_err_set(err, TERN_E_ARG, "--timeout %d, --idle-timeout %d, --conn-per-ip %d, --conn-max %d: expected >= 0",
                           cfg->timeout_s, cfg->idle_timeout_s, cfg->conn_per_ip, cfg->conn_max);
    if (cfg->queue_max < 0) return tern_err_set(err, TERN_E_ARG, "--queue %d, expected >= 0", cfg->queue_max);
    if (cfg->n_ctx < 2)   /* every request holds a prompt token and needs a position to generate */
        return tern_err_set(err, TERN_E_ARG, "-c %d: expected -c 2 or more (one prompt token and one to generate)", cfg->n_ctx);
    if (cfg->api_key) return srv_check_api_key(cfg->api_key, "--api-key", err);
    return TERN_OK;
}

int srv_check_api_key(const char *key, const char *what, tern_err *err) {
    const size_t n = strlen(key);
    if (n == 0)   /* "" would read as "a key is required" and let everyone in */
        return tern_err_set(err, TERN_E_ARG, "%s: empty key; expected a non-empty string", what);
    size_t n_blank = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)key[i];
        if (c == ' ') n_blank++;
        else if (c < 0x20 || c == 0x7f)   /* CR from a CRLF key file, a tab, ... */
            return tern_err_set(err, TERN_E_ARG,
                                "%s: byte %zu of the %zu-byte key is the control character 0x%02x; expected printable "
                                "characters only (a request cannot carry it, so no client could match)",
                                what, i + 1, n, c);
    }
    if (n_blank == n)
        return tern_err_set(err, TERN_E_ARG, "%s: the key is %zu space%s and nothing else; expected a non-empty string "
                            "(whitespace around a request's key is stripped)", what, n, n == 1 ? "" : "s");
    if (key[0] == ' ' || key[n - 1] == ' ')
        return tern_err_set(err, TERN_E_ARG, "%s: the %zu-byte key %s with a space; expected no whitespace around "
                            "the key (it is stripped from a request's key, so no client could match)",
                            what, n, key[0] == ' ' ? "begins" : "ends");
    return TERN_OK;
}

int srv_start(srv **out, tern_model *m, const srv_config *cfg, tern_err *err) {
    *out = NULL;
    int rc = check_config(cfg, err);
    if (rc != TERN_OK) return rc;
    tern_model_info info;
    tern_model_get_info(m, &info);
    /* the id: --alias, else the file's name without .gguf (as --models-dir names its files, and
     * as llama-server and vLLM name a model after its path), else general.name, else "tern" */
    const char *name = cfg->model_name && *cfg->model_name ? cfg->model_name : info.name && *info.name ? info.name : "tern";
    size_t name_len = strlen(name);
    if (!(cfg->model_name && *cfg->model_name) && cfg->model_path && *cfg->model_path) {
        const char *base = strrchr(cfg->model_path, '/');
        base = base ? base + 1 : cfg->model_path;
        size_t n = strlen(base);
        if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
        if (n > 0) { name = base; name_len = n; }
    }
    char *fixed = api_utf8_dup(name, name_len);
    srv_models *models = NULL;
    rc = srv_models_init_one(&models, m, cfg, fixed ? fixed : "tern", err);
    free(fixed);
    if (rc != TERN_OK) return rc;
    return srv_listen(out, models, cfg, err);
}

int srv_start_dir(srv **out, const char *dir, const tern_model_opts *mo, const srv_config *cfg, tern_err *err) {
    *out = NULL;
    int rc = check_config(cfg, err);
    if (rc != TERN_OK) return rc;
    srv_models *models = NULL;
    rc = srv_models_init_dir(&models, dir, mo, cfg, err);
    if (rc != TERN_OK) return rc;
    return srv_listen(out, models, cfg, err);
}

static int srv_listen(srv **out, srv_models *models, const srv_config *cfg, tern_err *err) {
    srv *s = calloc(1, sizeof *s);
    if (!s) {
        srv_models_free(models);
        return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    }
    s->cfg = *cfg;
    s->models = models;
    pthread_mutex_init(&s->mx.mu, NULL);
    int rc;
    /* bind address: a name or a numeric IPv4/IPv6 address; each address it resolves to is tried
     * in the resolver's order until one can be bound */
    struct addrinfo *ai = NULL;
    rc = srv_resolve_host(cfg->host, cfg->port, &ai, err);
    if (rc != TERN_OK) {
        srv_stop(s);
        return rc;
    }
    /* connection limits: one IP address may hold as many connections as can be served or queued,
     * plus some slack (keep-alive, /health, /metrics), and the excess is closed at once, so one
     * client cannot take every connection; all addresses together 4 times that, within the open
     * file limit (each connection is a socket and a thread) */
    const unsigned per_ip = cfg->conn_per_ip > 0 ? (unsigned)cfg->conn_per_ip : (unsigned)(cfg->parallel + cfg->queue_max + 16);
    unsigned limit = 4u * (unsigned)(cfg->parallel + cfg->queue_max + 16);
    if (cfg->conn_max > 0) limit = (unsigned)cfg->conn_max;
    /* every connection is a descriptor: above the open-file limit accept() fails with EMFILE and
     * the daemon spins on the listen socket instead of closing the excess, so the limit stays
     * below it by the descriptors the process holds now (counted) plus the daemon's own (listen
     * socket, its wake-up pipe) and some slack */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        unsigned open_fds = 0;
        DIR *dir = opendir("/proc/self/fd");
        if (dir) {
            for (struct dirent *de; (de = readdir(dir));) open_fds += de->d_name[0] != '.';
            closedir(dir);
        } else open_fds = 16;
        const rlim_t reserve = (rlim_t)open_fds + 16;
        const rlim_t room = rl.rlim_cur > reserve ? rl.rlim_cur - reserve : 0;
        if (room < 4) {
            srv_stop(s);
            freeaddrinfo(ai);
            return tern_err_set(err, TERN_E_ARG, "the open-file limit (%llu, `ulimit -n`) leaves room for %llu connections "
                               "(%u descriptors in use, %u reserved); expected at least 4: raise `ulimit -n`",
                               (unsigned long long)rl.rlim_cur, (unsigned long long)room, open_fds, 16u);
        }
        if ((rlim_t)limit > room) limit = (unsigned)room;
    }
    s->conn_limit = limit;
    int bind_errno = 0;
    for (const struct addrinfo *a = ai; a && !s->d; a = a->ai_next) {
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
        if (a->ai_family == AF_INET6)                 /* "::" (any address) also takes IPv4, as Linux does by default */
            flags |= IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)a->ai_addr)->sin6_addr) ? MHD_USE_DUAL_STACK
                                                                                                                : MHD_USE_IPv6;
        errno = 0;
        s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, a->ai_addr,
                                MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout_s,
                                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
        if (!s->d && !bind_errno) bind_errno = errno;
    }
    freeaddrinfo(ai);
    if (!s->d) {
        srv_stop(s);
        return tern_err_set(err, TERN_E_IO, "cannot listen on %s:%d (%s)", cfg->host, cfg->port,
                           bind_errno ? strerror(bind_errno) : "the HTTP daemon did not start");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    *out = s;
    return TERN_OK;
}

int srv_port(const srv *s) { return s->port; }

unsigned srv_conn_limit(const srv *s) { return s->conn_limit; }

void srv_drain(srv *s) {
    if (s) atomic_store(&s->draining, true);
}

bool srv_idle(srv *s) { return atomic_load(&s->gen_in_flight) == 0 && srv_models_idle(s->models); }

void srv_stop(srv *s) {
    if (!s) return;
    if (s->d) MHD_quiesce_daemon(s->d);              /* stop accepting */
    srv_models_shutdown(s->models);                   /* ends jobs: waiting threads return */
    /* let the connection threads send what those jobs answer (503, the end of a stream) before the
     * daemon closes every connection: at most 2 s */
    for (const double t0 = tern_time_s(); s->d && atomic_load(&s->in_flight) > 0 && tern_time_s() - t0 < 2.0;) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (s->d) MHD_stop_daemon(s->d);                  /* joins the connection threads */
    srv_models_free(s->models);
    pthread_mutex_destroy(&s->mx.mu);
    free(s);
}
