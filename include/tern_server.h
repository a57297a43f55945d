/* tern_server.h: the server library (server/, built as libtern_server.a; not installed) that
 * `tern serve` (tools/serve.c) runs: an OpenAI-compatible HTTP server.
 * Threads: libmicrohttpd runs one thread per connection; those threads parse and validate
 * requests, tokenise prompts and enqueue jobs, then wait for output. One scheduler thread owns
 * every session (a fixed set of slots): between steps it admits queued jobs into free slots (the
 * slot whose cached tokens share the longest prefix with the prompt, so a follow-up request reuses
 * that KV); each step samples one token per decoding slot and appends them all in one batched
 * forward (tern_batch_eval_seqs) that also carries a chunk of the waiting prompts: at most
 * prefill_chunk tokens while other streams decode (so a long prompt does not stall them), n_batch
 * when none does. A cancelled job (client gone) frees its slot at
 * the scheduler's next step. Only tern.h is used. */
#ifndef TERN_TERN_SERVER_H
#define TERN_TERN_SERVER_H

#include "tern.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct srv_config {
    const char *host;       /* bind address, default "127.0.0.1" */
    int port;               /* 0: an ephemeral port (read it back with srv_port) */
    int parallel;           /* slots: sequences in flight (default 4) */
    int n_ctx;              /* context per slot (default 4096) */
    int n_batch;            /* prefill chunk (default 512) */
    int prefill_chunk;      /* prompt tokens per step while other streams decode (default 64; <= n_batch) */
    int queue_max;          /* requests waiting for a slot before 429 (default 32) */
    size_t body_max;        /* request body limit in bytes (default 1 MiB) */
    int timeout_s;          /* seconds a connection may stay silent in the middle of a request (its body
                               arriving, its reply not being read; default 600, llama-server's --timeout);
                               waiting for the model (queue, prefill, tokens) does not count */
    int idle_timeout_s;     /* seconds a connection may stay silent with no request in progress (before
                               its headers are complete, or between keep-alive requests; default 10) */
    int conn_per_ip;        /* connections at once from one IP address, the excess closed at once
                               (0: parallel + queue_max + 16) */
    int conn_max;           /* connections at once in all (0: 4 x the per-IP default, at most what the
                               open-file limit allows) */
    const char *api_key;    /* NULL: no authentication; a key srv_check_api_key refuses is refused by
                               srv_start (TERN_E_ARG) */
    const char *model_name; /* the id in /v1/models and responses */
    const char *model_path; /* the file, as /props reports it (NULL: not reported) */
    const char *script_reply; /* tests only (no flag sets it): every chat reply begins with this text's
                               tokens (control tokens parsed) instead of sampled ones, then samples */
    const char *chat_template; /* NULL: the model's */
    bool kv_f32;
    bool log_requests;      /* one line on stderr per finished request: peer, method, path, status,
                               seconds (default false; `tern serve` turns it on) */
    bool spec;              /* speculative decoding (prompt lookup) for a slot decoding alone */
    tern_spec_params spec_p;
} srv_config;
void srv_config_default(srv_config *c);

/* Checks an API key before the server starts: TERN_OK, or TERN_E_ARG with a message that begins
 * with what (the flag or variable that gave the key, e.g. "--api-key") and never quotes the key.
 * A request's key is compared with the spaces and tabs around it stripped, and an HTTP header
 * carries no CR or LF, so a key that is empty, only whitespace, has whitespace at either end or
 * holds a control character (0x00-0x1f, 0x7f) could never be matched: each is refused. */
int srv_check_api_key(const char *key, const char *what, tern_err *err);

typedef struct srv srv;
/* Start the scheduler and the HTTP daemon on m (which must outlive the server). Errors:
 * TERN_E_IO (cannot bind), TERN_E_NOMEM (slots do not fit), TERN_E_ARG. */
int srv_start(srv **out, tern_model *m, const srv_config *c, tern_err *err);
/* The same for every .gguf file of dir (tern serve --models-dir): models load on first use
 * (mo: how), each with c's slots and context (capped at its trained context), and the least
 * recently used idle one is unloaded when memory would not hold the next. Errors: those of
 * srv_start, and TERN_E_IO / TERN_E_ARG for a folder that cannot be read or holds no .gguf. */
int srv_start_dir(srv **out, const char *dir, const tern_model_opts *mo, const srv_config *c, tern_err *err);
int srv_port(const srv *s);
/* The connection limit in force: conn_max (or its default) lowered to fit the open-file limit
 * (RLIMIT_NOFILE less the descriptors in use at start and a reserve); srv_start refuses
 * (TERN_E_ARG naming `ulimit -n`) when that leaves fewer than 4. */
unsigned srv_conn_limit(const srv *s);
/* Resolve a --host value (a name such as "localhost", or a numeric IPv4/IPv6 address such as
 * "0.0.0.0", "::1", "::", also in URL brackets "[::1]") with getaddrinfo for a passive TCP socket on port; *out (free with
 * freeaddrinfo) lists the addresses in the resolver's order, which srv_start tries until one binds.
 * Errors: TERN_E_ARG naming the host and the resolver's message (gai_strerror). */
struct addrinfo;
int srv_resolve_host(const char *host, int port, struct addrinfo **out, tern_err *err);
/* Start draining: /health answers 503 {"status":"draining"} (a load balancer's health check takes
 * the replica out), new completion requests get 503, and the requests already running or queued
 * go on to their end. srv_idle tells when none is left; srv_stop then ends the server. */
void srv_drain(srv *s);
bool srv_idle(srv *s);
/* Stop accepting, end all jobs, join the threads, free everything. NULL is fine. */
void srv_stop(srv *s);

/* ---- scheduler (sched.c), used by http.c ---------------------------------------------------- */
typedef struct srv_job srv_job;
typedef struct srv_sched srv_sched;

#endif /* TERN_TERN_SERVER_H */
