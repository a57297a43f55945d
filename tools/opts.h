/* opts.h: table-driven command-line options for the tern programs. One table per command (plus
 * the shared tables of model_opts.h) drives both the parser and the --help text, so a flag cannot
 * be parsed without being listed, listed without being parsed, or listed twice (opts_help refuses
 * nothing but tests/test_cli.c checks every command's help for that).
 *
 * Errors are printed to stderr by the parser, each naming the flag, what it expects and what it
 * got, e.g.
 *   tern run: -t: expected an integer in 1..8, got '1000'
 *   tern run: -m needs a value (a path)
 *   tern: unknown option --x for `tern run`; see tern run --help
 * Programs turn them into exit status 2 (usage error, tools/cli.h). */
#ifndef TERN_TOOLS_OPTS_H
#define TERN_TOOLS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum {
    OPT_FLAG,    /* no value */
    OPT_INT,     /* integer in [lo, hi] -> opt_val.i */
    OPT_FLOAT,   /* finite number in [lo, hi] -> opt_val.f */
    OPT_SEED,    /* a seed: unsigned 64-bit integer, or -1 = UINT64_MAX (TERN_SEED_RANDOM) -> opt_val.u */
    OPT_TEXT,    /* any text -> opt_val.str */
    OPT_PATH,    /* a file path -> opt_val.str (a value that is itself an option name counts as missing) */
    OPT_CHOICE,  /* one of the '|'-separated words of `choices` -> opt_val.choice (index) */
    OPT_LIST,    /* comma-separated integers, each in [lo, hi], at most OPT_LIST_MAX -> list/n_list */
} opt_kind;

/* hi of an option counting threads: replaced by opts_max_threads() when parsing and printing. */
#define OPT_HI_THREADS (-1.0)
#define OPT_LIST_MAX 16

typedef struct opt_def {
    int id;              /* > 0, unique among the tables of one command; returned by opts_next */
    const char *names;   /* the spellings, ", "-separated: "-t, --threads" */
    opt_kind kind;
    const char *meta;    /* placeholder of the value in the help ("N", "PATH"); NULL for flags */
    double lo, hi;       /* OPT_INT, OPT_FLOAT, OPT_LIST: the inclusive range (listed in the help) */
    const char *choices; /* OPT_CHOICE: "fast|ggml|f32" */
    const char *help;    /* one line (may hold "\n" + indentation for a second line) */
} opt_def;

typedef struct opt_table { const opt_def *defs; int n; } opt_table;
#define OPT_TABLE(a) ((opt_table){(a), (int)(sizeof(a) / sizeof((a)[0]))})

typedef struct opt_val {
    const char *str;          /* the value as given (NULL for flags) */
    long long i;
    double f;
    unsigned long long u;
    int choice;
    int list[OPT_LIST_MAX];
    int n_list;
} opt_val;

enum { OPT_ERR = -1, OPT_POSITIONAL = -2, OPT_HELP = -3 };

/* Parse argv[*i] against the tables. Returns the matched option's id (value parsed into *v, *i
 * advanced past the value), OPT_POSITIONAL for an argument that is not an option (does not start
 * with '-', or is "-" alone; *v->str = it), OPT_HELP for -h/--help, or OPT_ERR after printing the
 * error (unknown option, missing value, value not of the kind or out of range). cmd is the
 * command's name without "tern " ("run"). */
int opts_next(const char *cmd, const opt_table *t, int n_t, int argc, char **argv, int *i, opt_val *v);
/* Print one line per option (names, placeholder, help, range or choices) and -h, --help. */
void opts_help(FILE *f, const opt_table *t, int n_t);
/* Print the error for a value the caller checks itself (cross-option rules), in the parser's
 * form: "tern CMD: FLAG: expected WHAT, got 'VALUE'". */
void opts_bad_value(const char *cmd, const char *flag, const char *expected, const char *got);
/* Print "tern CMD: unexpected argument 'ARG'; see tern CMD --help" (for an OPT_POSITIONAL a command
 * does not take) and return 2, the usage-error exit status. */
int opts_unexpected(const char *cmd, const char *arg);
/* The command being parsed ("run"): the name the last opts_next call was given, "" before any.
 * Messages printed outside the parser (files, notices) use it: "tern run: ...". */
const char *opts_cmd(void);

/* ---- input files ---------------------------------------------------------------------------- */
/* Whether path can be opened for reading. If not, writes "FLAG: cannot open 'PATH': REASON"
 * (REASON: the OS's, strerror) into msg (n bytes) and returns false. flag may be NULL (then the
 * message starts at "cannot"). */
bool opts_input_ok(const char *flag, const char *path, char *msg, size_t n);
/* Read a whole file (NUL-terminated, caller frees). On failure prints "tern CMD: FLAG: cannot
 * open|read 'PATH': REASON" and returns -1. */
int opts_read_input(const char *flag, const char *path, char **out, size_t *len);
/* opts_read_input without a flag name. */
int opts_read_file(const char *path, char **out, size_t *len);

/* ---- output files --------------------------------------------------------------------------- */
/* Whether nothing exists at path yet (lstat fails with ENOENT; a dangling symlink exists): a
 * command that writes path calls it before opening, and on a failed write removes only a file it
 * so created, never a path that was already there (a file, a symlink, /dev/full). */
bool opts_output_is_new(const char *path);

/* The largest thread count any -t accepts: 4 x online CPUs, at least 4, at most 1024 (the model
 * loader's limit). */
int opts_max_threads(void);

#endif /* TERN_TOOLS_OPTS_H */
