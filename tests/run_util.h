/* run_util.h: helpers for suites that run programs: the tern binary of this build, a command's
 * output captured, and `tern ARGS` with stdout and stderr captured apart. Static inline, so each
 * suite that includes it gets its own copy and no other file changes. */
#ifndef TERN_TESTS_RUN_UTIL_H
#define TERN_TESTS_RUN_UTIL_H

#include "test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _WIN32
/* Windows: popen runs cmd.exe (no POSIX quoting), pclose returns the exit code itself, and there
 * is no /proc/self/exe: the binary is $TERN_BIN, else tern.exe in the current directory. */
#define WIFEXITED(st) 1
#define WEXITSTATUS(st) (st)
#define readlink(p, b, n) (-1)
#define dirname(p) (p)
#else
#include <libgen.h>
#include <sys/wait.h>
#endif

/* The tern binary: $TERN_BIN, else <dir of the runner>/../tern (tests/run -> ./tern,
 * build/debug/tests/run -> build/debug/tern). */
static inline const char *ru_tern_bin(char *buf, size_t n) {
    const char *env = getenv("TERN_BIN");
    if (env && *env) {   /* a bare name means the file in the current directory, not $PATH */
        snprintf(buf, n, "%s%s", strchr(env, '/') ? "" : "./", env);
        return buf;
    }
    char exe[4096];
    const ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) { snprintf(buf, n, "./tern"); return buf; }
    exe[k] = '\0';
    char *dir = dirname(exe);          /* .../tests */
    char *root = dirname(dir);         /* ... */
    snprintf(buf, n, "%s/tern", root);
    return buf;
}

/* ru_tern_bin, and the test stops there if that file is not an executable: it fails under
 * CI=true (make builds the binary before the tests), it is skipped elsewhere. */
static inline const char *ru_need_tern(char *buf, size_t n) {
    ru_tern_bin(buf, n);
    if (access(buf, X_OK) != 0) {
        const char *ci = getenv("CI");
        if (ci && strcmp(ci, "true") == 0) fail_msg("%s not built (make builds it before the tests)", buf);
        test_skip("%s not built", buf);
    }
    return buf;
}

/* The exit status of a system()/pclose() result, or -1 if the command did not exit normally. */
static inline int ru_exit_status(int st) { return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st); }

/* Run a shell command and return its stdout (malloc'd, NUL-terminated, caller frees; the test
 * fails if it cannot be started or memory runs out). *status (may be NULL): ru_exit_status of
 * the command. */
static inline char *ru_capture(const char *cmd, int *status) {
    if (status) *status = -1;
    FILE *p = popen(cmd, "r");
    if (!p) fail_msg("cannot run: %s", cmd);
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; }
            buf = nb;
        }
    }
    const int st = pclose(p);
    if (status) *status = ru_exit_status(st);
    if (!buf) fail_msg("out of memory reading the output of: %s", cmd);
    buf[n] = '\0';
    return buf;
}

#ifndef _WIN32
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <time.h>

/* Runs `tern CMD ARGS` (ARGS: a shell-quoted string, as for ru_tern) with its stderr read here,
 * waits until that stderr holds `until` or the process exits, sends sig once to it alone (kill(2),
 * not to a process group: one copy, as a terminal's Ctrl-C or systemd's stop sends) and reads its
 * stderr to the end. A slow start (a loaded machine, ASan) waits up to 120 s for `until`; the
 * exit after the signal up to 60 s, then it is killed. Returns its stderr (malloc'd; the caller
 * frees); *status: its exit code, 128 + the signal that ended it, or -1 if it had to be killed.
 * The signal is sent only after `until` was seen (or the 120 s passed), so sig 0 means "wait for
 * the exit". */
static inline char *ru_tern_until(const char *cmd_name, const char *args, const char *until, int sig, int *status) {
    char bin[4096], cmd[16384];
    ru_need_tern(bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "exec '%s' %s %s 2>&1 >/dev/null", bin, cmd_name, args);
    int p[2];
    if (pipe(p) != 0) fail_msg("pipe: %s", strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);   /* not what the runner inherited (a background job ignores SIGINT) */
        signal(SIGTERM, SIG_DFL);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0, cap = 1 << 16;
    char *buf = calloc(1, cap);
    if (!buf) fail_msg("out of memory");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool sent = false, eof = false;
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        const double el = (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
        if (!sent && (strstr(buf, until) || el > 120)) {
            if (sig) kill(pid, sig);
            sent = true;
            t0 = t;
            continue;
        }
        if (sent && el > 60) break;
        struct pollfd pf = {p[0], POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0) continue;
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) fail_msg("out of memory");
            buf = nb;
        }
        const ssize_t r = read(p[0], buf + n, cap - 1 - n);
        if (r <= 0) { eof = true; break; }
        n += (size_t)r;
        buf[n] = '\0';
    }
    close(p[0]);
    if (!eof) kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    *status = !eof ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return buf;
}

/* ru_tern_until for `tern serve ARGS`: the signal goes once it says it listens ("Ctrl-C stops"). */
static inline char *ru_serve_signal(const char *args, int sig, int *status) {
    return ru_tern_until("serve", args, "Ctrl-C stops", sig, status);
}
#endif

/* Run `tern ARGS` (ARGS: a shell-quoted string built by the caller, may hold redirections of
 * stdin). *out / *err (either may be NULL: discarded) receive its stdout / stderr, malloc'd and
 * NUL-terminated (the caller frees). Returns the exit status, or -1 if it did not exit normally. */
static inline int ru_tern(char **out, char **err, const char *fmt, ...) {
    char bin[4096], args[8192], cmd[16384], errp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    fx_tmp_path(errp, sizeof errp, "ru-stderr.txt");
    snprintf(cmd, sizeof cmd, "'%s' %s %s 2>'%s'", ru_tern_bin(bin, sizeof bin), args, out ? "" : ">/dev/null", errp);
    int st = -1;
    char *o = ru_capture(cmd, &st);
    if (out) *out = o;
    else free(o);
    if (err) {
        size_t len = 0;
        char *e = fx_read_file(errp, &len);
        *err = e ? e : calloc(1, 1);
    }
    unlink(errp);
    return st;
}

#endif /* TERN_TESTS_RUN_UTIL_H */
