/* opts.c: table-driven option parsing and help for the tern programs (see opts.h). */
#include "opts.h"

#include "tern.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef _WIN32
/* Windows (mingw-w64 CRT): no symbolic links, O_CLOEXEC, O_DIRECTORY or O_NONBLOCK; _commit is fsync. OUT is
 * written in place there (opts_out_begin), so the temporary-file half below is not used. */
#include <io.h>
#include <windows.h>
#define lstat stat
#define S_ISLNK(m) 0
#define O_CLOEXEC 0
#define O_DIRECTORY 0
#define O_NONBLOCK 0   /* no FIFOs to block on */
#define fsync _commit
#define realpath(p, r) _fullpath((r), (p), 0)
#endif

static const char *g_cmd = "";      /* the program runs one command: its name, for messages */

const char *opts_cmd(void) { return g_cmd; }

bool opts_input_ok(const char *flag, const char *path, char *msg, size_t n) {
    /* O_NONBLOCK: a FIFO opens at once (without it, open waits for a writer); what may be read
     * (a regular file, for a model) is the loader's check */
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        struct stat st;
        const bool dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
        close(fd);
        if (!dir) return true;
        snprintf(msg, n, "%s%s'%s' is a directory, expected a regular file", flag ? flag : "", flag ? ": " : "", path);
        return false;
    }
    snprintf(msg, n, "%s%scannot open '%s': %s", flag ? flag : "", flag ? ": " : "", path, strerror(errno));
    return false;
}

bool opts_model_input_ok(const char *flag, const char *path, char *msg, size_t n) {
    if (!opts_input_ok(flag, path, msg, n)) return false;
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return true;   /* a race: the loader says what it finds */
    const char *kind = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                       : S_ISBLK(st.st_mode) ? "a block device" : "not a regular file";
    snprintf(msg, n, "%s%s'%s' is %s, expected a regular file (a GGUF model)", flag ? flag : "", flag ? ": " : "", path,
             kind);
    return false;
}

int opts_read_input(const char *flag, const char *path, char **out, size_t *len) {
    *out = NULL;
    char msg[1200];
    FILE *f = fopen(path, "rb");
    if (!f) {
        opts_input_ok(flag, path, msg, sizeof msg);
        fprintf(stderr, "tern %s: %s\n", g_cmd, msg);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    int e = 0;
    bool too_big = false;
    while (b) {
        const size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) { if (ferror(f)) e = errno ? errno : EIO; break; }
        if (n > OPTS_INPUT_MAX) { too_big = true; break; }   /* /dev/zero, a stream that never ends */
        cap = cap * 2 > OPTS_INPUT_MAX ? OPTS_INPUT_MAX + 1 : cap * 2;
        char *nb = realloc(b, cap + 1);
        if (!nb) { free(b); b = NULL; }
        else b = nb;
    }
    fclose(f);
    if (too_big) {
        free(b);
        fprintf(stderr, "tern %s: %s%s'%s' is over %d MiB (%llu bytes), the most an input file may be\n", g_cmd, flag ? flag : "",
                flag ? ": " : "", path, OPTS_INPUT_MAX >> 20, (unsigned long long)OPTS_INPUT_MAX);
        return -1;
    }
    if (!b || e) {
        free(b);
        fprintf(stderr, "tern %s: %s%scannot read '%s': %s\n", g_cmd, flag ? flag : "", flag ? ": " : "", path,
                strerror(b ? e : ENOMEM));
        return -1;
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

int opts_read_file(const char *path, char **out, size_t *len) { return opts_read_input(NULL, path, out, len); }

bool opts_output_is_new(const char *path) {
    struct stat st;
    return lstat(path, &st) != 0 && errno == ENOENT;
}

static char *str_dup(const char *s) {
    const size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The temporary file being written (for the signal handler): a fixed buffer, set before the
 * handlers are installed and cleared before they are removed. */
#ifndef _WIN32
static char g_tmp_path[4352];
static volatile sig_atomic_t g_tmp_set;
static struct sigaction g_old_act[3];
static const int g_sigs[3] = {SIGINT, SIGTERM, SIGHUP};
static bool g_handlers;

/* SIGINT/SIGTERM/SIGHUP while OUT's temporary file exists: remove it (unlink is async-signal
 * safe), then die of the same signal with its default action. */
static void out_on_signal(int sig) {
    if (g_tmp_set) unlink(g_tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void out_handlers_install(const char *tmp) {
    const size_t n = strlen(tmp);
    if (n >= sizeof g_tmp_path) return;   /* cannot happen: PATH_MAX-bounded; then no cleanup */
    memcpy(g_tmp_path, tmp, n + 1);
    g_tmp_set = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = out_on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        sigaction(g_sigs[i], NULL, &old);
        g_old_act[i] = old;
        if (old.sa_handler == SIG_IGN) continue;   /* nohup: leave ignored signals ignored */
        sigaction(g_sigs[i], &sa, NULL);
    }
    g_handlers = true;
}

static void out_handlers_remove(void) {
    if (!g_handlers) return;
    g_tmp_set = 0;
    for (int i = 0; i < 3; i++) sigaction(g_sigs[i], &g_old_act[i], NULL);
    g_handlers = false;
}
#else
static void out_handlers_install(const char *tmp) { (void)tmp; }
static void out_handlers_remove(void) {}
#endif

int opts_out_begin(opts_out *o, const char *path) {
    *o = (opts_out){.path = path};
#ifdef _WIN32
    goto in_place;   /* the CRT's rename() does not replace an existing file: no atomic replace */
#endif
    struct stat lst, st;
    const bool exists = lstat(path, &lst) == 0;
    const bool regular = exists && stat(path, &st) == 0 && S_ISREG(st.st_mode);
    if (exists && !regular) goto in_place;        /* /dev/full, a FIFO, a dangling link: as before */
    if (!exists && errno != ENOENT) goto in_place;   /* EACCES, ENOTDIR...: the writer says it */
    char *target = NULL;
    if (exists && S_ISLNK(lst.st_mode)) target = realpath(path, NULL);   /* replace the link's target */
    else target = str_dup(path);
    if (!target) {
        if (!exists) goto in_place;
        fprintf(stderr, "tern %s: cannot resolve OUT '%s': %s; OUT not touched\n", g_cmd, path, strerror(errno));
        return -1;
    }
    if (exists && access(target, W_OK) != 0) {   /* as cp: a read-only OUT is refused, named */
        fprintf(stderr, "tern %s: '%s' is not writable (%s); OUT not touched\n", g_cmd, path, strerror(errno));
        free(target);
        return -1;
    }
    /* ".tern-XXXXXX" in OUT's directory: hidden, on the same filesystem, and short enough for
     * any legal OUT name (NAME_MAX) */
    const char *slash = strrchr(target, '/');
    const size_t dlen = slash ? (size_t)(slash - target) + 1 : 0;
    const size_t n = dlen + sizeof ".tern-XXXXXX";
    char *tmp = malloc(n);
    if (!tmp) { free(target); goto nomem; }
    memcpy(tmp, target, dlen);
    memcpy(tmp + dlen, ".tern-XXXXXX", sizeof ".tern-XXXXXX");
    const int fd = mkstemp(tmp);   /* mode 0600 until the commit gives it OUT's */
    if (fd < 0) {
        const int e = errno;
        free(tmp);
        free(target);
        if (!exists) goto in_place;   /* a new OUT: the writer creates it or says why not */
        fprintf(stderr, "tern %s: cannot create a temporary file beside OUT '%s' (%s); OUT not touched\n", g_cmd,
                path, strerror(e));
        return -1;
    }
    close(fd);
    if (exists) o->mode = st.st_mode & 0777;   /* no set-uid/set-gid/sticky, as cp without -p */
    else {
        const mode_t mask = umask(0);   /* read the umask (a single-threaded moment of the CLI) */
        umask(mask);
        o->mode = 0666 & ~mask;
    }
    o->write_path = tmp;
    o->target = target;
    o->created = !exists;
    out_handlers_install(tmp);
    return 0;
in_place:
    o->created = opts_output_is_new(path);
    if ((o->write_path = str_dup(path))) return 0;
nomem:
    fprintf(stderr, "tern %s: out of memory preparing '%s'\n", g_cmd, path);
    return -1;
}

/* fsync a file or directory by path; 0 or -1 with errno. */
static int sync_path(const char *path, int flags) {
    const int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return -1;
    const int rc = fsync(fd);
    const int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int opts_out_commit(opts_out *o, char *msg, size_t n) {
    int rc = 0;
    if (o->target) {
        if (sync_path(o->write_path, O_RDONLY) != 0) {
            snprintf(msg, n, "cannot sync '%s' (the new '%s'): %s", o->write_path, o->path, strerror(errno));
            rc = -1;
        } else if (chmod(o->write_path, o->mode) != 0) {
            snprintf(msg, n, "cannot set the mode of '%s' (the new '%s'): %s", o->write_path, o->path, strerror(errno));
            rc = -1;
        } else if (rename(o->write_path, o->target) != 0) {
            snprintf(msg, n, "cannot rename '%s' to '%s': %s", o->write_path, o->target, strerror(errno));
            rc = -1;
        } else {   /* make the rename durable; a filesystem that cannot sync a directory is no error */
            char *dir = str_dup(o->target);
            if (dir) {
                char *slash = strrchr(dir, '/');
                if (!slash) strcpy(dir, ".");
                else if (slash == dir) dir[1] = '\0';
                else *slash = '\0';
                (void)sync_path(dir, O_RDONLY | O_DIRECTORY);
                free(dir);
            }
        }
        if (rc) unlink(o->write_path);
        out_handlers_remove();
    }
    free(o->write_path);
    free(o->target);
    *o = (opts_out){0};
    return rc;
}

const char *opts_out_note(const opts_out *o) {
    static char note[1200];
    if (!o->created && !o->target) return "";
    snprintf(note, sizeof note, " (OUT '%s' %s)", o->path, o->created ? "not created" : "left as it was");
    return note;
}

void opts_out_abort(opts_out *o) {
    if (o->target || o->created) unlink(o->write_path);   /* never a path that was there before */
    if (o->target) out_handlers_remove();
    free(o->write_path);
    free(o->target);
    *o = (opts_out){0};
}

static int g_stdout_errno;   /* the first failed flush's errno */

int opts_flush_stdout(void) {
    errno = 0;
    const int rc = fflush(stdout);
    if (rc != 0 && !g_stdout_errno) g_stdout_errno = errno ? errno : EIO;
    return rc;
}

int opts_stdout_errno(void) { return g_stdout_errno; }

int opts_max_threads(void) {
#ifdef _WIN32
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    const long nc = (long)si.dwNumberOfProcessors;
#else
    const long nc = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    long m = nc > 0 ? 4 * nc : 4;
    if (m < 4) m = 4;
    if (m > 1024) m = 1024;
    return (int)m;
}

static double def_hi(const opt_def *d) { return d->hi == OPT_HI_THREADS ? (double)opts_max_threads() : d->hi; }

/* Does `arg` (n bytes) equal one of the ", "-separated spellings of d? */
static bool name_is(const opt_def *d, const char *arg, size_t n) {
    const char *p = d->names;
    while (*p) {
        const char *e = strstr(p, ", ");
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !memcmp(p, arg, n)) return true;
        if (!e) break;
        p = e + 2;
    }
    return false;
}

static const opt_def *find(const opt_table *t, int n_t, const char *arg, size_t n) {
    for (int k = 0; k < n_t; k++)
        for (int j = 0; j < t[k].n; j++)
            if (name_is(&t[k].defs[j], arg, n)) return &t[k].defs[j];
    return NULL;
}

/* What a value of d must be, e.g. "an integer in 1..8", into buf. */
static const char *expected(const opt_def *d, char *buf, size_t n) {
    switch (d->kind) {
    case OPT_INT:   /* all digits, never 1e+11; the thread bound says where it comes from */
        snprintf(buf, n, "an integer in %.0f..%.0f%s", d->lo, def_hi(d),
                 d->hi == OPT_HI_THREADS ? ", that is 4 per online CPU" : "");
        break;
    case OPT_FLOAT: snprintf(buf, n, "a number in %.15g..%.15g", d->lo, def_hi(d)); break;
    case OPT_SEED: snprintf(buf, n, "an integer in 0..18446744073709551614 or -1 (random)"); break;
    case OPT_TEXT: snprintf(buf, n, "text"); break;
    case OPT_BIAS: snprintf(buf, n, "TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf)"); break;
    case OPT_PATH: snprintf(buf, n, "a path"); break;
    case OPT_LIST:
        snprintf(buf, n, "a comma-separated list of at most %d integers in %.0f..%.0f%s", OPT_LIST_MAX, d->lo, def_hi(d),
                 d->hi == OPT_HI_THREADS ? ", that is 4 per online CPU" : "");
        break;
    case OPT_CHOICE: {
        size_t o = (size_t)snprintf(buf, n, "one of ");
        for (const char *p = d->choices; *p && o + 3 < n; p++) {
            if (*p == '|') { buf[o++] = ','; buf[o++] = ' '; }
            else buf[o++] = *p;
        }
        buf[o < n ? o : n - 1] = '\0';
        break;
    }
    default: snprintf(buf, n, "no value"); break;
    }
    return buf;
}

void opts_bad_value(const char *cmd, const char *flag, const char *exp, const char *got) {
    fprintf(stderr, "tern %s: %s: expected %s, got '%s'\n", cmd, flag, exp, got);
}

int opts_unexpected(const char *cmd, const char *arg) {
    fprintf(stderr, "tern %s: unexpected argument '%s'; see tern %s --help\n", cmd, arg, cmd);
    return 2;
}

static bool parse_ll(const char *s, long long *out) {
    char *end;
    if (isspace((unsigned char)*s)) return false;   /* strtoll would skip it */
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

/* Whether s has only the characters of a decimal number (digits, '.', a sign, an exponent's e):
 * strtod also reads C hex floats ("0x10" is 16), "inf", "infinity" and "nan" in any case, and
 * skips leading space, none of which a number flag accepts. strtod still checks the form. */
static bool decimal_chars(const char *s) { return s[strspn(s, "0123456789.eE+-")] == '\0'; }

/* Parse s as a value of d into v; false if it is not one, with why (a list's first bad item, as
 * ": item 2 (99) is out of range"; else "") in why[0..nwhy). */
static bool parse_value(const opt_def *d, const char *s, opt_val *v, char *why, size_t nwhy) {
    why[0] = '\0';
    const double hi = def_hi(d);
    switch (d->kind) {
    case OPT_INT: {
        long long x;
        if (!parse_ll(s, &x) || (double)x < d->lo || (double)x > hi) return false;
        v->i = x;
        return true;
    }
    case OPT_FLOAT: {
        char *end;
        if (!decimal_chars(s)) return false;   /* strtod would take hex, inf, nan and a leading space */
        errno = 0;
        const double x = strtod(s, &end);
        /* ERANGE on a finite result is an underflow (a value below 2^-1022 read as a subnormal
         * or 0): a number all the same; an overflow gives inf */
        if (end == s || *end || !isfinite(x) || x < d->lo || x > hi) return false;
        v->f = x;
        return true;
    }
    case OPT_SEED: {
        char *end;
        errno = 0;
        if (!strcmp(s, "-1")) { v->u = UINT64_MAX; return true; }   /* llama.cpp's "random" */
        if (!(*s >= '0' && *s <= '9')) return false;         /* strtoull would take "-2" */
        const unsigned long long x = strtoull(s, &end, 10);
        if (errno || *end || x >= UINT64_MAX) return false;   /* 2^64 - 1 is the random seed's mark (-1) */
        v->u = x;
        return true;
    }
    case OPT_CHOICE: {
        int k = 0;
        const size_t n = strlen(s);
        for (const char *p = d->choices;; k++) {
            const char *e = strchr(p, '|');
            const size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == n && !memcmp(p, s, n)) { v->choice = k; return true; }
            if (!e) return false;
            p = e + 1;
        }
    }
    case OPT_LIST: {   /* each item an integer in range, at most OPT_LIST_MAX, no empty one */
        v->n_list = 0;
        if (!*s) return false;                                    /* "" is no list */
        for (const char *p = s;; p++) {
            const char *e = strchr(p, ',');
            const int len = e ? (int)(e - p) : (int)strlen(p), k = v->n_list + 1;
            if (v->n_list == OPT_LIST_MAX) { snprintf(why, nwhy, ": more than %d items", OPT_LIST_MAX); return false; }
            if (len == 0) {
                if (e || k == 1) snprintf(why, nwhy, ": item %d is empty", k);
                else snprintf(why, nwhy, ": a comma ends the list");
                return false;
            }
            char *end = (char *)(uintptr_t)p;
            errno = 0;
            const long long x = isspace((unsigned char)*p) ? 0 : strtoll(p, &end, 10);   /* strtoll would skip the space */
            if (end != p + len) { snprintf(why, nwhy, ": item %d ('%.*s') is not an integer", k, len, p); return false; }
            if (errno || (double)x < d->lo || (double)x > hi) {
                snprintf(why, nwhy, ": item %d (%.*s) is out of range", k, len, p);
                return false;
            }
            v->list[v->n_list++] = (int)x;
            if (!e) return true;
            p = e;
        }
    }
    case OPT_BIAS: {   /* digits, a sign, then a number (strtod: no leading space after the sign) or inf */
        const size_t nd = strspn(s, "0123456789");
        if (nd == 0 || nd > 10 || (s[nd] != '+' && s[nd] != '-') || isspace((unsigned char)s[nd + 1])) return false;
        const long long id = strtoll(s, NULL, 10);
        if (id > 2147483647LL) return false;
        const char *b = s + nd + 1;
        char *end;
        const double x = strcmp(b, "inf") ? strtod(b, &end) : INFINITY;
        if (strcmp(b, "inf") && (!decimal_chars(b) || end == b || *end || !(fabs(x) <= FLT_MAX) || *b == '+' || *b == '-')) return false;   /* a float */
        if (s[nd] == '+' && !isfinite(x)) return false;             /* +inf would make the token the only one */
        v->i = id;
        v->f = s[nd] == '-' ? -x : x;
        return true;
    }
    case OPT_PATH: return s[0] != '\0';                        /* "" names no file */
    default: return true;                                     /* TEXT */
    }
}

int opts_next(const char *cmd, const opt_table *t, int n_t, int argc, char **argv, int *i, opt_val *v) {
    memset(v, 0, sizeof *v);
    g_cmd = cmd;
    const char *a = argv[*i];
    if (a[0] != '-' || a[1] == '\0') { v->str = a; return OPT_POSITIONAL; }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return OPT_HELP;
    size_t n = strlen(a);
    const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;     /* --name=value */
    if (eq) n = (size_t)(eq - a);
    const opt_def *d = find(t, n_t, a, n);
    if (!d) {
        fprintf(stderr, "tern %s: unknown option %.*s; see tern %s --help\n", cmd, (int)n, a, cmd);
        return OPT_ERR;
    }
    /* An option given twice is refused, as the server refuses a JSON key given twice: which one
     * should count is a guess (getopt programs take the last). No option is repeatable; a list
     * is one comma-separated value (OPT_LIST). Every command parses argv from index 1, so the
     * ids seen are forgotten there. */
    static int seen[128], n_seen;
    if (*i <= 1) n_seen = 0;
    for (int k = 0; k < n_seen && d->kind != OPT_BIAS; k++)
        if (seen[k] == d->id) {
            /* the option's other spellings, where it has them: -p and --prompt are one option */
            const bool aliases = strlen(d->names) != n || strncmp(d->names, a, n) != 0;
            fprintf(stderr, "tern %s: %.*s given twice%s%s%s; give it once; see tern %s --help\n", cmd, (int)n, a,
                    aliases ? " (" : "", aliases ? d->names : "", aliases ? " are one option)" : "", cmd);
            return OPT_ERR;
        }
    if (d->kind != OPT_BIAS && n_seen < (int)(sizeof seen / sizeof seen[0])) seen[n_seen++] = d->id;   /* -l repeats */
    char what[160];
    if (d->kind == OPT_FLAG) {
        if (eq) {
            fprintf(stderr, "tern %s: %.*s takes no value, got '%s'\n", cmd, (int)n, a, eq + 1);
            return OPT_ERR;
        }
        return d->id;
    }
    const char *s = eq ? eq + 1 : *i + 1 < argc ? argv[*i + 1] : NULL;
    /* `-m -p x`: a path that is an option name is a missing path */
    if (!s || (d->kind == OPT_PATH && s[0] == '-' && s[1] && find(t, n_t, s, strlen(s)))) {
        fprintf(stderr, "tern %s: %.*s needs a value (%s)\n", cmd, (int)n, a, expected(d, what, sizeof what));
        return OPT_ERR;
    }
    char fault[96];
    if (!parse_value(d, s, v, fault, sizeof fault)) {
        fprintf(stderr, "tern %s: %.*s: expected %s, got '%s'%s\n", cmd, (int)n, a, expected(d, what, sizeof what), s, fault);
        return OPT_ERR;
    }
    v->str = s;
    if (!eq) (*i)++;
    return d->id;
}

void opts_help(FILE *f, const opt_table *t, int n_t) {
    for (int k = 0; k < n_t; k++)
        for (int j = 0; j < t[k].n; j++) {
            const opt_def *d = &t[k].defs[j];
            char left[96];
            const char *meta = d->meta ? d->meta : d->kind == OPT_CHOICE ? d->choices : NULL;
            snprintf(left, sizeof left, "%s%s%s", d->names, meta ? " " : "", meta ? meta : "");
            fprintf(f, "  %-24s%s%s", left, strlen(left) >= 24 ? " " : "", d->help);
            if (d->kind == OPT_INT || d->kind == OPT_LIST) fprintf(f, " [%.0f..%.0f]", d->lo, def_hi(d));
            else if (d->kind == OPT_FLOAT) fprintf(f, " [%.15g..%.15g]", d->lo, def_hi(d));
            fputc('\n', f);
        }
    fprintf(f, "  %-24s%s\n", "-h, --help", "this help");
}

/* The last-level cache in bytes: /sys/devices/system/cpu/cpu0/cache/index3/size ("32768K", the
 * kernel's figure for the L3 cpu0 shares), else sysconf(_SC_LEVEL3_CACHE_SIZE), else 32 MB (a
 * common L3 today). sysfs first: glibc's sysconf figure comes from CPUID and can be far off (256 MB
 * on a host whose L3 is 32 MB has been seen). A model whose decode bytes per token fit in it is
 * read from cache, not DRAM, so the decode ceiling (DRAM bandwidth / bytes per token) does not
 * bound it (such a model can run at several times that ceiling). */
unsigned long long opts_llc_bytes(void) {
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        unsigned long long n = 0;
        char unit = 0;
        const int k = fscanf(f, "%llu%c", &n, &unit);
        fclose(f);
        if (k >= 1 && n > 0) return n * (unit == 'K' ? 1024ull : unit == 'M' ? 1048576ull : unit == 'G' ? 1073741824ull : 1ull);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v > 0) return (unsigned long long)v;
#endif
    return 32ull << 20;
}

bool opts_fits_llc(int n_threads, double bytes, double dram_gbs) {
    const unsigned long long llc = opts_llc_bytes();
    if (!(bytes > 0) || bytes > (double)llc) return false;
    if (bytes <= (double)llc / 8 || !(dram_gbs > 0)) return true;   /* small beside the cache: by size alone */
    const size_t n = bytes < (double)(1u << 20) ? (size_t)1 << 20 : (size_t)bytes;
    enum { PASSES = 3 };
    double p[PASSES] = {0};
    tern_err err = {0};
    if (tern_membw_passes(n_threads, n, PASSES, p, &err)) return false;
    double best = 0;
    for (int i = 0; i < PASSES; i++) best = p[i] > best ? p[i] : best;
    return best >= 1.5 * dram_gbs;
}

int opts_parse_ids(const char *what, const char *s, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    int cap = 64, k = 0;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    if (!v) { fprintf(stderr, "tern %s: out of memory\n", g_cmd); return -1; }
    const char *p = s;
    bool open = false, closed = false, after_id = false;   /* a comma ends an id: none before the first, no two in a row */
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (*p == ',') {
            if (!after_id) {
                fprintf(stderr, "tern %s: %s: index %d at byte %ld: expected an id before ',', got an empty item\n", g_cmd, what,
                        k, (long)(p - s));
                free(v);
                return -1;
            }
            after_id = false;
            p++;
            continue;
        }
        if (!*p) break;
        if (*p == '[' && !open && k == 0) { open = true; p++; continue; }
        if (*p == ']' && open && !closed) { closed = true; p++; continue; }
        char *end = NULL;
        const long long x = closed ? -1 : strtoll(p, &end, 10);
        if (closed || end == p || x < 0 || x > INT32_MAX || (*end && !strchr(" \t\n\r,]", *end))) {
            char word[4 * 24 + 1];
            size_t o = 0;
            for (size_t w = 0; w < 24 && p[w] && !strchr(" \t\n\r,", p[w]); w++) {
                const unsigned char b = (unsigned char)p[w];
                o += (size_t)snprintf(word + o, sizeof word - o, b >= 0x20 && b < 0x7f ? "%c" : "\\x%02x", b);
            }
            word[o] = '\0';
            fprintf(stderr, "tern %s: %s: index %d at byte %ld: expected %s, got '%s'\n", g_cmd, what, k, (long)(p - s),
                    closed ? "nothing after ']'" : "an integer id in 0..2147483647 (ids separated by spaces or commas)", word);
            free(v);
            return -1;
        }
        if (k == cap) {
            int32_t *nv = cap < (1 << 28) ? realloc(v, (size_t)(cap *= 2) * sizeof *v) : NULL;
            if (!nv) { free(v); fprintf(stderr, "tern %s: out of memory\n", g_cmd); return -1; }
            v = nv;
        }
        v[k++] = (int32_t)x;
        after_id = true;
        p = end;
    }
    if (open && !closed) {
        fprintf(stderr, "tern %s: %s: expected ']' to close the list of %d ids, got the end of the text\n", g_cmd, what, k);
        free(v);
        return -1;
    }
    *ids = v;
    *n = k;
    return 0;
}
