/* serve.c: `tern serve`: the HTTP server (server/: OpenAI and Anthropic Messages APIs, one model
 * or every model of --models-dir).
 * Loopback by default. SIGINT stops at once; SIGTERM (what Kubernetes and systemd send) drains:
 * /health turns 503, new requests are refused, the running ones finish (at most --drain-timeout
 * seconds), then the server stops; a second signal stops at once. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"
#include "spec_opts.h"
#include "tern_server.h"

#include <netdb.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Signals: SIGINT and SIGTERM are blocked in every thread (the mask is set before the model's
 * pool and the server's threads start, which inherit it) and taken by one thread with sigwait, so
 * whichever thread the kernel would have picked, the main thread learns of them. While loading,
 * either stops the process at once; while serving, SIGINT stops, the first SIGTERM drains and a
 * second signal stops. The signal thread is joined before the command returns (signals_stop), so
 * the process exits with its main thread alone (LeakSanitizer's exit-time check stops every
 * thread, and one parked in sigwait has hung it). */
static sigset_t g_sigs;
static pthread_mutex_t g_sig_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_sig_cv = PTHREAD_COND_INITIALIZER;
static bool g_serving, g_stop, g_term, g_quit;   /* under g_sig_mu */
static pthread_t g_sig_th;
static bool g_sig_th_on;

static void *signal_thread(void *arg) {
    (void)arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&g_sigs, &sig) != 0) continue;
        pthread_mutex_lock(&g_sig_mu);
        if (g_quit) {                                  /* signals_stop */
            pthread_mutex_unlock(&g_sig_mu);
            return NULL;
        }
        if (!g_serving) {
            pthread_mutex_unlock(&g_sig_mu);
            fprintf(stderr, "\ntern serve: %s before serving: stopping\n", sig == SIGTERM ? "SIGTERM" : "interrupted");
            _exit(sig == SIGINT ? 130 : 143);
        }
        if (sig == SIGTERM && !g_term && !g_stop) g_term = true;   /* the first SIGTERM drains */
        else g_stop = true;
        pthread_cond_broadcast(&g_sig_cv);
        pthread_mutex_unlock(&g_sig_mu);
    }
    return NULL;
}

/* Blocks SIGINT and SIGTERM here and in every thread started later, and starts the thread that
 * takes them. */
static void signals_start(void) {
    sigemptyset(&g_sigs);
    sigaddset(&g_sigs, SIGINT);
    sigaddset(&g_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &g_sigs, NULL);
    g_sig_th_on = pthread_create(&g_sig_th, NULL, signal_thread, NULL) == 0;
}

/* Ends the signal thread: SIGTERM sent to it alone (blocked everywhere, so its sigwait takes it)
 * finds g_quit set. Then takes any copy still pending (a signal sent to the process and to its
 * group arrives twice, as `timeout` and `kill 0` send it), so the process exits with none
 * queued: LeakSanitizer's exit-time stop of the threads has hung on a pending one. */
static void signals_stop(void) {
    if (!g_sig_th_on) return;
    pthread_mutex_lock(&g_sig_mu);
    g_quit = true;
    pthread_mutex_unlock(&g_sig_mu);
    pthread_kill(g_sig_th, SIGTERM);
    pthread_join(g_sig_th, NULL);
    g_sig_th_on = false;
    const struct timespec now = {0, 0};
    while (sigtimedwait(&g_sigs, NULL, &now) > 0) {}
}

/* Waits until a signal sets what it stops (g_stop or g_term), at most ms milliseconds (< 0: no
 * limit). Returns whether g_stop is set. */
static bool signals_wait(int ms) {
    pthread_mutex_lock(&g_sig_mu);
    if (ms < 0)
        while (!g_stop && !g_term) pthread_cond_wait(&g_sig_cv, &g_sig_mu);
    else if (!g_stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)ms * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g_sig_cv, &g_sig_mu, &until);
    }
    const bool stop = g_stop;
    pthread_mutex_unlock(&g_sig_mu);
    return stop;
}

enum { SERVE_HOST = 1, SERVE_PORT, SERVE_PARALLEL, SERVE_CTX, SERVE_PREFILL_CHUNK, SERVE_QUEUE, SERVE_BODY_LIMIT, SERVE_API_KEY, SERVE_ALIAS,
       SERVE_TEMPLATE, SERVE_TIMEOUT, SERVE_IDLE_TIMEOUT, SERVE_CONN_PER_IP, SERVE_CONN_MAX, SERVE_DRAIN_TIMEOUT,
       SERVE_MODELS_DIR, SERVE_NO_REQUEST_LOG };
static const opt_def serve_defs[] = {
    {SERVE_HOST, "--host", OPT_TEXT, "ADDR", 0, 0, NULL, "bind address: a host name or an IPv4/IPv6 address (default 127.0.0.1)"},
    {SERVE_PORT, "--port", OPT_INT, "N", 0, 65535, NULL, "port (default 8080; 0 = any free port, printed)"},
    {SERVE_PARALLEL, "-np, --parallel", OPT_INT, "N", 1, 64, NULL, "sequences generated at once (default 4)"},
    /* at least 2: a request holds one prompt token (BOS at the least) and needs a position to generate */
    {SERVE_CTX, "-c, --ctx-size, --ctx", OPT_INT, "N", 2, 1 << 24, NULL, "context per sequence (default 4096, or the model's trained length if shorter)"},
    {SERVE_PREFILL_CHUNK, "--prefill-chunk", OPT_INT, "N", 1, 65536, NULL,
     "prompt tokens per step while other streams decode (default 64, at most -b)"},
    {SERVE_QUEUE, "--queue", OPT_INT, "N", 0, 100000, NULL, "requests waiting for a slot before 429 (default 32)"},
    {SERVE_BODY_LIMIT, "--body-limit", OPT_INT, "BYTES", 1024, 1 << 30, NULL, "request body limit (default 1048576)"},
    {SERVE_TIMEOUT, "--timeout", OPT_INT, "SECONDS", 0, 86400, NULL,
     "close a connection silent this long mid-request: body arriving, reply not read (default 600; 0 = never)"},
    {SERVE_IDLE_TIMEOUT, "--idle-timeout", OPT_INT, "SECONDS", 0, 86400, NULL,
     "close a connection silent this long with no request in progress (default 10; 0 = never)"},
    {SERVE_CONN_PER_IP, "--conn-per-ip", OPT_INT, "N", 1, 100000, NULL,
     "connections at once from one IP address; more are closed at once (default -np + --queue + 16)"},
    {SERVE_CONN_MAX, "--conn-max", OPT_INT, "N", 1, 100000, NULL, "connections at once in all (default 4 x (-np + --queue + 16))"},
    {SERVE_MODELS_DIR, "--models-dir", OPT_PATH, "DIR", 0, 0, NULL,
     "serve every .gguf in DIR instead of -m: a request's \"model\" picks one (its file name without .gguf); "
     "models load on first use, the least recently used idle one unloads when memory runs short"},
    {SERVE_DRAIN_TIMEOUT, "--drain-timeout", OPT_INT, "SECONDS", 0, 86400, NULL,
     "on SIGTERM, let running requests finish for at most this long (default 30; 0 = stop at once)"},
    {SERVE_NO_REQUEST_LOG, "--no-request-log", OPT_FLAG, NULL, 0, 0, NULL,
     "no line on stderr per finished request (peer, method, path, status, seconds)"},
    {SERVE_API_KEY, "--api-key", OPT_TEXT, "KEY", 0, 0, NULL, "require Authorization: Bearer KEY (also $TERN_API_KEY)"},
    {SERVE_ALIAS, "--alias", OPT_TEXT, "NAME", 0, 0, NULL, "model id reported to clients"},
    {SERVE_TEMPLATE, "--chat-template", OPT_TEXT, "NAME", 0, 0, NULL, "chatml | qwen3 | qwen35 (default: the model's)"},
};

static void usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern serve (-m MODEL | --models-dir DIR) [options]\n");
    opts_help(f, t, n_t);
}

/* Serves until a signal: SIGINT stops at once; the first SIGTERM drains (at most drain_s
 * seconds). Then stops the server and frees m (the -m model; NULL with --models-dir). */
static int serve_until_signal(srv *s, const srv_config *cfg, int drain_s, tern_model *m) {
    if (cfg->conn_max > 0 && (unsigned)cfg->conn_max > srv_conn_limit(s))
        fprintf(stderr, "tern serve: warning: --conn-max %d lowered to %u to fit the open-file limit (`ulimit -n`)\n",
                cfg->conn_max, srv_conn_limit(s));
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_lock(&g_sig_mu);
    g_serving = true;
    pthread_mutex_unlock(&g_sig_mu);
    const bool v6 = strchr(cfg->host, ':') != NULL && cfg->host[0] != '[';   /* an IPv6 literal goes in brackets in a URL */
    /* with --models-dir each model's context is this one capped at its trained length (models.c) */
    /* the kernel path and thread count of the one model of -m (with --models-dir none is loaded yet) */
    char path[96] = "";
    if (m) {
        tern_model_info info;
        tern_model_get_info(m, &info);
        snprintf(path, sizeof path, ", %s, %d thread%s", info.isa, info.n_threads, info.n_threads == 1 ? "" : "s");
    }
    fprintf(stderr, "tern serve: listening on http://%s%s%s:%d (%d slot%s%s, context %d%s%s%s); Ctrl-C stops\n",
            v6 ? "[" : "", cfg->host, v6 ? "]" : "", srv_port(s), cfg->parallel, cfg->parallel == 1 ? "" : "s",
            m ? "" : " per model", cfg->n_ctx, m ? "" : " or the model's trained length if shorter", path,
            cfg->api_key ? ", API key required" : "");
    fflush(stderr);
    const bool stop = signals_wait(-1);
    if (!stop && drain_s > 0) {                       /* SIGTERM */
        fprintf(stderr, "tern serve: SIGTERM: draining (at most %d s; a second signal stops at once)\n", drain_s);
        srv_drain(s);
        for (int waited_ms = 0; !srv_idle(s) && waited_ms < drain_s * 1000; waited_ms += 20)
            if (signals_wait(20)) break;
    }
    fprintf(stderr, "tern serve: stopping\n");
    srv_stop(s);
    tern_model_free(m);
    signals_stop();
    return 0;
}

int cmd_serve(int argc, char **argv) {
    srv_config cfg;
    srv_config_default(&cfg);
    cfg.log_requests = true;
    cfg.api_key = getenv("TERN_API_KEY");
    bool key_from_env = cfg.api_key != NULL;
    int drain_s = 30;
    const char *models_dir = NULL;
    opts_common oc;
    opts_common_default(&oc);
    oc.n_batch = cfg.n_batch;
    spec_opts so;
    spec_opts_default(&so);
    bool ctx_given = false;
    const opt_table tabs[] = {opts_tab_model, OPT_TABLE(serve_defs), opts_tab_threads, opts_tab_load, spec_opts_tab};
    const int n_tabs = (int)(sizeof tabs / sizeof tabs[0]);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("serve", tabs, n_tabs, argc, argv, &i, &v);
        if (id == OPT_HELP) { usage(stdout, tabs, n_tabs); return 0; }
        if (id == OPT_ERR) return 2;
        if (id == OPT_POSITIONAL) return opts_unexpected("serve", v.str);
        if (opts_apply_common(&oc, id, &v) || spec_opts_apply(&so, id, &v)) continue;
        switch (id) {
        case SERVE_HOST: cfg.host = v.str; break;
        case SERVE_PORT: cfg.port = (int)v.i; break;
        case SERVE_PARALLEL: cfg.parallel = (int)v.i; break;
        case SERVE_CTX: cfg.n_ctx = (int)v.i; ctx_given = true; break;
        case SERVE_PREFILL_CHUNK: cfg.prefill_chunk = (int)v.i; break;
        case SERVE_QUEUE: cfg.queue_max = (int)v.i; break;
        case SERVE_BODY_LIMIT: cfg.body_max = (size_t)v.i; break;
        case SERVE_TIMEOUT: cfg.timeout_s = (int)v.i; break;
        case SERVE_IDLE_TIMEOUT: cfg.idle_timeout_s = (int)v.i; break;
        case SERVE_CONN_PER_IP: cfg.conn_per_ip = (int)v.i; break;
        case SERVE_CONN_MAX: cfg.conn_max = (int)v.i; break;
        case SERVE_DRAIN_TIMEOUT: drain_s = (int)v.i; break;
        case SERVE_MODELS_DIR: models_dir = v.str; break;
        case SERVE_NO_REQUEST_LOG: cfg.log_requests = false; break;
        case SERVE_API_KEY: cfg.api_key = v.str; key_from_env = false; break;
        case SERVE_ALIAS: cfg.model_name = v.str; break;
        case SERVE_TEMPLATE: cfg.chat_template = v.str; break;
        default: break;
        }
    }
    if (!oc.model == !models_dir) {
        fprintf(stderr, "tern serve: %s; see tern serve --help\n",
                models_dir ? "-m and --models-dir exclude each other: give one" : "-m MODEL or --models-dir DIR is required");
        return 2;
    }
    if (cfg.model_name && !*cfg.model_name) {   /* as --host '': never fall back silently */
        fprintf(stderr, "tern serve: --alias: empty; expected a model id\n");
        return 2;
    }
    if (models_dir && cfg.model_name) {
        fprintf(stderr, "tern serve: --alias names the one model of -m; with --models-dir the ids are the file names\n");
        return 2;
    }
    if (spec_opts_check(&so)) return 2;
    if (opts_check_chat_template("serve", cfg.chat_template)) return 2;   /* not at the first request */
    if (cfg.api_key) {   /* a key no request can match (empty, blank, whitespace around it): before the load */
        tern_err kerr = {0};
        if (srv_check_api_key(cfg.api_key, key_from_env ? "TERN_API_KEY" : "--api-key", &kerr) != TERN_OK) {
            fprintf(stderr, "tern serve: %s%s\n", kerr.msg, key_from_env ? " (or unset TERN_API_KEY)" : "");
            return 2;
        }
    }
    {                                                 /* a --host that does not resolve: before the model loads */
        tern_err herr = {0};
        struct addrinfo *ai = NULL;
        if (srv_resolve_host(cfg.host, cfg.port, &ai, &herr) != TERN_OK) {
            fprintf(stderr, "tern serve: %s\n", herr.msg);
            return 2;
        }
        /* A busy port fails here, in milliseconds, not after the model loads (minutes for a big
         * one): a test bind of each resolved address, released at once (SO_REUSEADDR as the HTTP
         * library binds). It cannot reserve the port: one taken between this check and the
         * server's own bind fails there, after the load. Port 0 (any free port) cannot be busy. */
        int bind_err = 0;
        bool bound = cfg.port == 0;
        for (struct addrinfo *a = ai; a && !bound; a = a->ai_next) {
            const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd < 0) { bind_err = errno; continue; }
            const int one = 1;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int){0}, sizeof(int));
            if (bind(fd, a->ai_addr, a->ai_addrlen) == 0) bound = true;
            else bind_err = errno;
            close(fd);
        }
        freeaddrinfo(ai);
        if (!bound) {
            fprintf(stderr, "tern serve: cannot listen on %s port %d: %s%s (nothing loaded)\n", cfg.host, cfg.port,
                    strerror(bind_err), bind_err == EADDRINUSE ? "; another program holds it: stop it or give --port" : "");
            return 1;
        }
    }
    signals_start();                                  /* before any thread starts: they inherit the mask */
    cfg.n_batch = oc.n_batch;
    cfg.model_path = oc.model;
    cfg.spec = so.on;
    cfg.spec_p = so.p;
    cfg.kv_f32 = oc.kv_f32;
    tern_err err = {0};
    tern_model *m = NULL;
    srv *s = NULL;
    if (models_dir) {
        tern_model_opts mo;
        if (opts_model_opts(&oc, &mo, &err) != TERN_OK || srv_start_dir(&s, models_dir, &mo, &cfg, &err) != TERN_OK) {
            fprintf(stderr, "tern serve: %s\n", err.msg);
            signals_stop();
            return 1;
        }
        return serve_until_signal(s, &cfg, drain_s, NULL);
    }
    if (opts_load(&oc, &m, NULL, &err) != TERN_OK) {
        fprintf(stderr, "tern serve: %s\n", err.msg);
        signals_stop();
        return 1;
    }
    cfg.n_ctx = opts_ctx_resolve(m, ctx_given ? cfg.n_ctx : 0, ctx_given, 0);
    if (srv_start(&s, m, &cfg, &err) != TERN_OK) {
        fprintf(stderr, "tern serve: %s\n", err.msg);
        tern_model_free(m);
        signals_stop();
        return 1;
    }
    opts_note_chat_template("serve", m, cfg.chat_template);   /* once it is sure to serve */
    return serve_until_signal(s, &cfg, drain_s, m);
}
