/* cli.c: the `tern` binary: dispatches `tern <command> [args]` to tools/<command>.c. */
#include "cli.h"
#include "model_opts.h"
#include "opts.h"
#include "tern.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef _WIN32
#include <fcntl.h>
#include <unistd.h>

/* A standard stream the parent left closed (`tern chat <&-`, `tern synth >&-`) gets /dev/null
 * opened on its descriptor in the mode it is not used in: the descriptor stays taken, so no file
 * the process opens later (a worker thread's /proc file, quantize's output) becomes its stdin,
 * stdout or stderr, while reading or writing it still fails with EBADF, as a closed one does
 * (a closed stdout is still a write error only for a command that writes to it). */
static void std_fds_taken(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int got = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (got >= 0 && got != fd) close(got);        /* a lower one was free: never, as 0..fd-1 are taken */
    }
}
#endif

#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#include <stdlib.h>
#include <windows.h>
#include <shellapi.h>

/* Windows start-up: the console shows UTF-8 (the text we print is UTF-8), the standard streams
 * are binary (no "\n" -> "\r\n" on output, no "\r\n" and ^Z handling on input: the bytes are
 * those of Linux), and argv is rebuilt in UTF-8 from the UTF-16 command line (the CRT's argv is
 * in the ANSI code page). Files are still opened by the CRT with those bytes as ANSI names, so
 * paths outside the ANSI code page do not open. The rebuilt argv lives until the process ends. */
static void win_start(int *argc, char ***argv) {
    SetConsoleOutputCP(CP_UTF8);
    SetConsoleCP(CP_UTF8);
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
    _setmode(_fileno(stdin), _O_BINARY);
    int n = 0;
    LPWSTR *w = CommandLineToArgvW(GetCommandLineW(), &n);
    if (!w || n < 1) return;                       /* keep the CRT's argv */
    char **a = calloc((size_t)n + 1, sizeof *a);
    for (int i = 0; a && i < n; i++) {
        const int len = WideCharToMultiByte(CP_UTF8, 0, w[i], -1, NULL, 0, NULL, NULL);
        if (len <= 0 || !(a[i] = malloc((size_t)len))) return;   /* partial: keep the CRT's argv */
        WideCharToMultiByte(CP_UTF8, 0, w[i], -1, a[i], len, NULL, NULL);
    }
    LocalFree(w);
    if (!a) return;
    *argc = n;
    *argv = a;
}
#endif

typedef struct { const char *name; int (*fn)(int, char **); const char *help; } cli_cmd;

static const cli_cmd cmds[] = {
    {"version", cmd_version, "print the version"},
    {"run", cmd_run, "generate text from a raw prompt (streamed), with speeds"},
    {"bench", cmd_bench, "pp/tg tokens/s (llama-bench style) against the decode ceiling"},
    {"perplexity", cmd_perplexity, "perplexity of a text (llama-perplexity conventions) or of token ids"},
    {"bench-spec", cmd_bench_spec, "speculative decoding (prompt lookup) vs plain greedy; verification cost"},
    {"bench-kernel", cmd_bench_kernel, "kernel speed vs memory bandwidth and int8 peak (per ISA, threads)"},
    {"tokenize", cmd_tokenize, "token ids and pieces of a text (llama-tokenize's output), or the text of ids"},
    {"info", cmd_info, "what a GGUF file holds: metadata, tensors, parameters, per-token bytes and decode ceiling"},
    {"synth", cmd_synth, "write a Bonsai-format model with random ternary weights (tests, benchmarks)"},
    {"quantize", cmd_quantize, "convert the weight matrices of a GGUF to another type"},
    {"chat", cmd_chat, "interactive multi-turn chat (streaming, thinking, Ctrl-C stops a reply)"},
    {"serve", cmd_serve, "OpenAI- and Anthropic-compatible HTTP server (chat, completions, streaming, /metrics, chat page)"},
};

/* `tern version` takes no options: -h/--help prints its usage; anything else is a usage error
 * (exit 2) from the shared parser, as for every other command. */
int cmd_version(int argc, char **argv) {
    static const opt_table none = {NULL, 0};
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("version", &none, 1, argc, argv, &i, &v);
        if (id == OPT_HELP) {
            printf("usage: tern version\nprints the version (takes no options)\n");
            opts_help(stdout, &none, 1);
            return 0;
        }
        if (id == OPT_POSITIONAL) return opts_unexpected("version", v.str);
        return 2;                                      /* OPT_ERR: printed by the parser */
    }
    printf("tern %s\n", TERN_VERSION);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: tern <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) fprintf(f, "  %-14s %s\n", cmds[i].name, cmds[i].help);
    fprintf(f, "\n`tern <command> --help` for the options of a command.\n");
}

/* Results on stdout must not be lost silently (`tern info M > /dev/full`, a full disk under
 * `tern bench --json >> runs.jsonl`): after the command, flush and close stdout and, if any write
 * failed, say so and exit 1 (a command that failed keeps its own status), as coreutils'
 * close_stdout does. */
static int close_stdout(const char *cmd, int rc) {
    errno = 0;
    const bool had_error = ferror(stdout) != 0;
    int e = errno;
    const int flush_rc = fflush(stdout);
    if (flush_rc != 0) e = errno;
    const int close_rc = fclose(stdout);
    if (close_rc != 0 && !e) e = errno;
    if (!had_error && flush_rc == 0 && close_rc == 0) return rc;
    if (!e) e = opts_stdout_errno();   /* the stream's error came from a flush during the command */
    fprintf(stderr, "tern%s%s: write error on standard output%s%s\n", cmd ? " " : "", cmd ? cmd : "", e ? ": " : "",
            e ? strerror(e) : "");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
#ifdef _WIN32
    win_start(&argc, &argv);
#else
    std_fds_taken();
#endif
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return close_stdout(NULL, argc < 2 ? 2 : 0);
    }
    /* TERN_ISA is checked before any command runs (opts_env_isa): an unknown name is exit 1, as
     * for the other TERN_ variables. */
    tern_err isa_err = {0};
    if (opts_env_isa(&isa_err) != TERN_OK) {
        fprintf(stderr, "tern: %s\n", isa_err.msg);
        return 1;
    }
    if (strcmp(argv[1], "--version") == 0) return close_stdout("version", cmd_version(argc - 1, argv + 1));
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0) return close_stdout(cmds[i].name, cmds[i].fn(argc - 1, argv + 1));
    if (argv[1][0] == '-')   /* an option where the command goes: `tern -m x.gguf` */
        fprintf(stderr, "tern: '%s' is an option; expected a command first (tern <command> [options])\n", argv[1]);
    else
        fprintf(stderr, "tern: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
