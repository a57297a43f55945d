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
#include <stdint.h>
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
    OPT_BIAS,    /* a logit bias TOKEN_ID(+|-)BIAS (15043+1, 15043-inf) -> opt_val.i (the id, 0..2^31-1) and .f
                  * (the signed bias, finite or -inf); the one kind that may be given more than once */
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
 * error (unknown option, missing value, value not of the kind or out of range, an option given a
 * second time under any of its spellings: `-p a --prompt b`; only OPT_BIAS repeats). cmd is the
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
/* Whether path can be opened for reading and is not a directory. If not, writes "FLAG: cannot
 * open 'PATH': REASON" (REASON: the OS's, strerror) or "FLAG: 'PATH' is a directory, expected a
 * regular file" into msg (n bytes) and returns false. flag may be NULL (then the message starts
 * at "cannot" or the path). */
bool opts_input_ok(const char *flag, const char *path, char *msg, size_t n);
/* opts_input_ok, and path must be a regular file (a model: not a FIFO, a device or a socket):
 * else "FLAG: 'PATH' is a character device, expected a regular file (a GGUF model)". */
bool opts_model_input_ok(const char *flag, const char *path, char *msg, size_t n);
/* The largest input file opts_read_input reads (prompts, corpora, templates): 1 GiB. */
#define OPTS_INPUT_MAX (1 << 30)
/* Read a whole file (NUL-terminated, caller frees), at most OPTS_INPUT_MAX bytes. On failure
 * prints "tern CMD: FLAG: cannot open|read 'PATH': REASON" (or "'PATH' is over 1024 MiB ...")
 * and returns -1. */
int opts_read_input(const char *flag, const char *path, char **out, size_t *len);
/* opts_read_input without a flag name. */
int opts_read_file(const char *path, char **out, size_t *len);

/* ---- token id lists ------------------------------------------------------------------------- */
/* Parse a list of token ids: integers in 0..2^31-1 separated by blanks (spaces, tabs, newlines)
 * or by commas, optionally inside one pair of brackets ("1 2 3", "1,2,3", "[1, 2, 3]": what
 * tokenize --ids prints). A comma ends an id: one before the first id or two in a row is an
 * error, one after the last is allowed. what names the source ("-p", "--tokens PATH") in the
 * message. Returns 0 with *ids (malloc'd, to free even when *n is 0) and *n, or -1 after printing "tern CMD:
 * WHAT: index I at byte B: expected ..., got '...'" (bytes outside printable ASCII as \xNN). */
int opts_parse_ids(const char *what, const char *s, int32_t **ids, int *n);

/* ---- output files --------------------------------------------------------------------------- */
/* The last-level cache in bytes: sysfs (index3/size), else sysconf, else 32 MB. Data that fits in
 * it is read from cache, not DRAM: the benchmarks' bandwidth ceilings do not bound it. */
unsigned long long opts_llc_bytes(void);
/* Whether `bytes` read again and again are served by the last-level cache, not DRAM: up to an
 * eighth of opts_llc_bytes by size alone; above that, up to the whole cache, only if a buffer of
 * that size, read 3 times over with n_threads, reads at least 1.5x dram_gbs (the DRAM probe,
 * GB/s). A VM's share of a large L3 that many tenants use can be far below the size sysfs gives
 * (an Intel Xeon VM: sysfs 480 MB, and a 457 MB model streamed at the DRAM probe's rate), so near
 * the cache's size the size does not decide it. The probe allocates `bytes`; on any error, false
 * (the DRAM ceiling applies). */
bool opts_fits_llc(int n_threads, double bytes, double dram_gbs);
/* Whether nothing exists at path yet (lstat fails with ENOENT; a dangling symlink exists): a
 * command that writes path calls it before opening, and on a failed write removes only a file it
 * so created, never a path that was already there (a file, a symlink, /dev/full). */
bool opts_output_is_new(const char *path);

/* Writing an output file safely (tern quantize, tern synth). A failed or interrupted write never
 * leaves a truncated file where a good one was: the data goes to a temporary file beside the
 * target ("DIR/.tern-XXXXXX", mkstemp, mode 0600, so on the same filesystem and short enough for
 * any legal OUT name), which opts_out_commit gives its final mode, fsyncs and rename()s over the
 * target only after the writer succeeded; opts_out_abort removes it.
 *   - OUT does not exist: the target is OUT; the new file gets 0666 & ~umask (as fopen would).
 *   - OUT is a regular file: the target is OUT; its permission bits (0777, not set-uid, set-gid
 *     or sticky: as cp without -p) are kept (not its owner or group unless the run may set them,
 *     nor its other hard links: a hard link of OUT keeps the old contents, as after mv). OUT that
 *     the user may not write is refused ("'OUT' is not writable"), as cp does.
 *   - OUT is a symlink to a regular file: the link's target is replaced (as cp writes through a
 *     link) and the link itself stays; the temporary file lies beside that target.
 *   - OUT exists and no temporary file can be made beside it (a directory we may not write):
 *     refused ("cannot create a temporary file beside OUT ...; OUT not touched"), never written
 *     in place.
 *   - OUT exists but is not a regular file (/dev/null, /dev/full, a FIFO; a dangling symlink), or
 *     a new OUT whose temporary file cannot be made: written in place (write_path = OUT), and a
 *     path that was there before is never removed on failure.
 * On a failure of the write itself, a new file is never left behind and an existing one is left
 * as it was. While the temporary file exists, SIGINT, SIGTERM and SIGHUP (unless ignored) remove
 * it and then kill the process with the same signal; after SIGKILL a "DIR/.tern-XXXXXX" is left
 * (the target is intact). */
typedef struct opts_out {
    const char *path;   /* OUT as given */
    char *write_path;   /* where the writer writes: the temporary file, or path itself (in place) */
    char *target;       /* the file rename() replaces; NULL when in place */
    bool created;       /* nothing was at path before (in place, a failure removes it) */
    unsigned mode;      /* the mode the temporary file gets at commit (with a target) */
} opts_out;
/* Prepare o for path (no file is written yet beyond the empty temporary file). Returns 0, or -1
 * after printing "tern CMD: ..." (out of memory; an existing OUT not writable or without room for
 * a temporary file beside it: "...; OUT not touched"). */
int opts_out_begin(opts_out *o, const char *path);
/* After the writer closed write_path successfully: give it its mode, fsync it, rename it over the target, fsync the
 * directory. Returns 0, or -1 after writing "cannot ... 'PATH': REASON" into msg (n bytes) and
 * removing the temporary file (the target is left as it was). Frees o's memory either way. */
int opts_out_commit(opts_out *o, char *msg, size_t n);
/* After a failed write: remove the temporary file (or, in place, a file this run created) and
 * free o's memory. */
void opts_out_abort(opts_out *o);
/* For the message of a failed write (before opts_out_abort): " (OUT 'PATH' left as it was)" when a
 * temporary file protected an existing OUT, " (OUT 'PATH' not created)" when nothing was there,
 * "" otherwise (written in place). Points into a static buffer. */
const char *opts_out_note(const opts_out *o);

/* ---- standard output ------------------------------------------------------------------------ */
/* fflush(stdout) for programs that stream (run, chat): returns fflush's result and keeps the errno
 * of the first failure, since a stream in error later flushes "successfully" with nothing to say
 * why; opts_stdout_errno() returns it (0: no failure seen). */
int opts_flush_stdout(void);
int opts_stdout_errno(void);

/* The largest thread count any -t accepts: 4 x online CPUs, at least 4, at most 1024 (the model
 * loader's limit). */
int opts_max_threads(void);

#endif /* TERN_TOOLS_OPTS_H */
