/* serve.c: `tern serve`: an OpenAI-compatible HTTP server for one model (server/, issue 9).
 * Loopback by default; the server runs until SIGINT or SIGTERM. */
#include "cli.h"
#include "tern.h"
#include "../server/server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: tern serve -m MODEL [options]\n"
            "  -m, --model FILE        GGUF model\n"
            "  --host ADDR             bind address (default 127.0.0.1; numeric IPv4/IPv6)\n"
            "  --port N                port (default 8080; 0 = any free port, printed)\n"
            "  --parallel N, -np N     sequences generated at once (default 4)\n"
            "  --ctx N, -c N           context per sequence (default 4096)\n"
            "  -b, --batch-size N      prefill chunk (default 512)\n"
            "  --queue N               requests waiting for a slot before 429 (default 32)\n"
            "  --body-limit BYTES      request body limit (default 1048576)\n"
            "  --api-key KEY           require Authorization: Bearer KEY (also $TERN_API_KEY)\n"
            "  --alias NAME            model id reported to clients\n"
            "  --chat-template NAME    chatml | qwen3 | qwen35 (default: the model's)\n"
            "  -t, --threads N         threads (default: all cores)\n"
            "  --cache-type f16|f32    KV cache type\n"
            "  --numerics fast|ggml|f32\n"
            "  --mmap                  map the model file instead of reading it\n");
}

static bool to_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

int cmd_serve(int argc, char **argv) {
    srv_config cfg;
    srv_config_default(&cfg);
    cfg.api_key = getenv("TERN_API_KEY");
    const char *model = NULL;
    tern_model_opts mo;
    tern_model_opts_default(&mo);
    mo.progress = isatty(STDERR_FILENO);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int iv = 0;
#define VAL() do { if (!v) { fprintf(stderr, "tern serve: %s needs a value\n", a); return 2; } i++; } while (0)
#define BAD(want) do { fprintf(stderr, "tern serve: %s '%s': expected %s\n", a, v, want); return 2; } while (0)
#define INT(lo, hi, dst) do { VAL(); if (!to_int(v, lo, hi, dst)) BAD("an integer in " #lo ".." #hi); } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); model = v; }
        else if (!strcmp(a, "--host")) { VAL(); cfg.host = v; }
        else if (!strcmp(a, "--port")) INT(0, 65535, &cfg.port);
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) INT(1, 64, &cfg.parallel);
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c") || !strcmp(a, "--ctx-size")) INT(0, 16777216, &cfg.n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) INT(1, 65536, &cfg.n_batch);
        else if (!strcmp(a, "--queue")) INT(0, 100000, &cfg.queue_max);
        else if (!strcmp(a, "--body-limit")) { INT(1024, 1073741824, &iv); cfg.body_max = (size_t)iv; }
        else if (!strcmp(a, "--api-key")) { VAL(); cfg.api_key = v; }
        else if (!strcmp(a, "--alias")) { VAL(); cfg.model_name = v; }
        else if (!strcmp(a, "--chat-template")) { VAL(); cfg.chat_template = v; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) INT(0, 1024, &mo.n_threads);
        else if (!strcmp(a, "--mmap")) mo.use_mmap = true;
        else if (!strcmp(a, "--cache-type")) {
            VAL();
            if (!strcmp(v, "f32")) cfg.kv_f32 = true;
            else if (strcmp(v, "f16")) BAD("f16 or f32");
        } else if (!strcmp(a, "--numerics")) {
            VAL();
            if (!strcmp(v, "fast")) mo.numerics = TERN_NUMERICS_FAST;
            else if (!strcmp(v, "ggml")) mo.numerics = TERN_NUMERICS_GGML;
            else if (!strcmp(v, "f32")) mo.numerics = TERN_NUMERICS_F32;
            else BAD("fast, ggml or f32");
        } else {
            fprintf(stderr, "tern serve: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef VAL
#undef BAD
#undef INT
    }
    if (!model) {
        fprintf(stderr, "tern serve: -m MODEL is required\n");
        usage(stderr);
        return 2;
    }
    tern_err err = {0};
    tern_model *m = NULL;
    if (tern_model_load(&m, model, &mo, &err) != TERN_OK) {
        fprintf(stderr, "tern serve: %s\n", err.msg);
        return 1;
    }
    srv *s = NULL;
    if (srv_start(&s, m, &cfg, &err) != TERN_OK) {
        fprintf(stderr, "tern serve: %s\n", err.msg);
        tern_model_free(m);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "tern serve: listening on http://%s:%d (%d slots, context %d%s); Ctrl-C stops\n", cfg.host,
            srv_port(s), cfg.parallel, cfg.n_ctx, cfg.api_key ? ", API key required" : "");
    fflush(stderr);
    while (!g_stop) pause();
    fprintf(stderr, "tern serve: stopping\n");
    srv_stop(s);
    tern_model_free(m);
    return 0;
}
