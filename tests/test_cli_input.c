/* test_cli_input.c: usability and bad input of the tern commands: every command
 * (version included) refuses an unknown option as a usage error (exit 2, the command named);
 * `tern bench -p 0 -n 0` is refused instead of printing an empty table; perplexity keeps its
 * results on stdout in both modes (a "perplexity: ..." first line, `PPL = x` last) and words its
 * UTF-8 warning for what it does; chat and serve say once on stderr that a model without a chat
 * template gets ChatML. Runs the tern binary built beside the test runner. */
#include "test.h"
#include "model_fx.h"
#include "run_util.h"
#include "../tools/bench_share.h"

#include "format/gguf.h"
#include "format/qtypes.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STORIES "data/stories260k/stories260K.gguf"
#define QWEN3_TINY "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"

static void write_file(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* `tern ARGS` exits with want_rc, `want` is in its stderr and (if not NULL) `not` is not. */
static void expect_err(int want_rc, const char *want, const char *not, const char *args) {
    char *err = NULL;
    const int rc = ru_tern(NULL, &err, "%s", args);
    if (rc != want_rc || !strstr(err, want) || (not && strstr(err, not)))
        fail_msg("tern %s: exit %d, stderr: %s(expected exit %d, \"%s\"%s%s)", args, rc, err, want_rc, want,
                 not ? " and not " : "", not ? not : "");
    free(err);
}

/* Every command `tern --help` lists, version included: an unknown option and a stray argument are
 * usage errors naming the command; `tern version` itself still prints the version. Before the
 * command, an option or an unknown word is a usage error saying so. */
static void test_unknown_options_every_command(void **state) {
    (void)state;
    char bin[4096];
    ru_need_tern(bin, sizeof bin);
    char *out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "--help"), 0);
    const char *p = strstr(out, "commands:\n");
    assert_non_null(p);
    int n = 0;
    bool version = false;
    for (p = strchr(p, '\n') + 1; p[0] == ' ' && p[1] == ' ' && islower((unsigned char)p[2]); n++) {
        char cmd[32], args[128], want[160];
        size_t k = 0;
        while (p[2 + k] && p[2 + k] != ' ' && k < 31) k++;
        memcpy(cmd, p + 2, k);
        cmd[k] = '\0';
        version |= !strcmp(cmd, "version");
        snprintf(args, sizeof args, "%s --bogus-option </dev/null", cmd);
        snprintf(want, sizeof want, "tern %s: unknown option --bogus-option; see tern %s --help", cmd, cmd);
        expect_err(2, want, NULL, args);
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    free(out);
    assert_true(version);
    assert_true(n >= 11);
    expect_err(2, "tern version: unexpected argument 'x'; see tern version --help", NULL, "version x");
    expect_err(2, "tern version: unknown option --bogus", NULL, "--version --bogus");
    /* an option where the command goes, and a word that is no command */
    expect_err(2, "tern: '-m' is an option; expected a command first (tern <command> [options])", NULL, "-m x.gguf");
    expect_err(2, "tern: unknown command 'bogus'", NULL, "bogus");
    /* options that contradict each other: refused before the model is opened */
    expect_err(2, "tern chat: --show-think with --no-think: thinking is off", NULL,
               "chat -m no-such-model.gguf --no-think --show-think </dev/null");
    out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "version"), 0);
    assert_true(strncmp(out, "tern ", 5) == 0);
    free(out);
    out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "version --help"), 0);
    assert_non_null(strstr(out, "usage: tern version"));
    free(out);
}

/* Nothing to measure: a usage error before any model loads, stdout empty. */
static void test_bench_nothing_to_measure(void **state) {
    (void)state;
    const char *want = "tern bench: -p and -n: nothing to measure (every prompt and generation length is 0); "
                       "expected at least one length above 0 in -p or -n";
    expect_err(2, want, NULL, "bench -m /nonexistent/x.gguf -p 0 -n 0");
    expect_err(2, want, NULL, "bench -m /nonexistent/x.gguf -p 0,0 -n 0");
    char *out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "bench -m /nonexistent/x.gguf -p 0 -n 0"), 2);
    assert_string_equal(out, "");
    free(out);
    /* one length above 0 is enough: the run gets to the model file */
    expect_err(1, "/nonexistent/x.gguf", "nothing to measure", "bench -m /nonexistent/x.gguf -p 0 -n 4");
}

/* The last line of s (without its newline) into buf. */
static const char *last_line(const char *s, char *buf, size_t n) {
    size_t len = strlen(s);
    while (len && s[len - 1] == '\n') len--;
    size_t b = len;
    while (b && s[b - 1] != '\n') b--;
    snprintf(buf, n, "%.*s", (int)(len - b), s + b);
    return buf;
}

/* -f and --tokens: stdout starts with the "perplexity: N tokens, ..." line and ends with
 * `PPL = x`; stderr has neither, only the model line (its kernel path, threads and numerics). A text that is not UTF-8: the warning says it is tokenised byte
 * by byte and never that perplexity prints it (it does not); run --echo does show it; bench-spec
 * --prompts warns as run -f does. */
static void test_perplexity_stdout_and_utf8(void **state) {
    (void)state;
    char model[1024], text[512], ids[512], bad[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(text, sizeof text, "ppl-text.txt");
    fx_tmp_path(ids, sizeof ids, "ppl-ids2.txt");
    fx_tmp_path(bad, sizeof bad, "ppl-bad.txt");
    const char *story = "Once upon a time there was a little girl named Lily. She liked to play in the park with her "
                        "dog. One day the dog ran away and Lily was sad. Then her mom found the dog under a tree.\n";
    write_file(text, story, strlen(story));
    write_file(ids, "1 403 407 261 107 300 100 42 17 88\n", 35);
    for (int mode = 0; mode < 2; mode++) {
        char *out = NULL, *err = NULL, line[256];
        const int rc = mode == 0 ? ru_tern(&out, &err, "perplexity -m '%s' -f '%s' -c 16 -t 1", model, text)
                                 : ru_tern(&out, &err, "perplexity -m '%s' --tokens '%s' -t 1", model, ids);
        if (rc != 0 || strncmp(out, "perplexity: ", 12) != 0 || !strstr(out, " tokens, ") ||
            strncmp(last_line(out, line, sizeof line), "PPL = ", 6) != 0 || !(atof(line + 6) > 1.0) ||
            strncmp(err, "perplexity:", 11) == 0 || strstr(err, "\nperplexity:") || strstr(err, "tokens,") ||
            strstr(err, "PPL") || !strstr(err, "tern perplexity: ") || !strstr(err, ", 1 thread, numerics fast\n"))
            fail_msg("perplexity %s: exit %d, stdout: %s, stderr: %s", mode ? "--tokens" : "-f", rc, out, err);
        free(out);
        free(err);
    }
    /* "caf" C3 (truncated) then a story long enough for one chunk of 16 */
    char badtext[512];
    const int nb = snprintf(badtext, sizeof badtext, "caf\xC3 %s", story);
    write_file(bad, badtext, (size_t)nb);
    char args[2048], want[1200];
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c 16 -t 1", model, bad);
    snprintf(want, sizeof want,
             "tern perplexity: warning: %s is not valid UTF-8 (first bad byte 0xc3 at offset 3 of %d); it is tokenised "
             "byte by byte (the model sees those exact bytes)", bad, nb - 1);
    expect_err(0, want, "U+FFFD", args);
    snprintf(args, sizeof args, "run -m '%s' -f '%s' -n 1 --temp 0 -t 1 --echo", model, bad);
    snprintf(want, sizeof want, "tern run: warning: the prompt file '%s' (-f) is not valid UTF-8 (first bad byte 0xc3 at "
             "offset 3 of %d); it is tokenised byte by byte and shown with U+FFFD", bad, nb - 1);   /* its final newline dropped */
    expect_err(0, want, NULL, args);
    snprintf(args, sizeof args, "run -m '%s' -f '%s' -n 1 --temp 0 -t 1", model, bad);
    expect_err(0, "it is tokenised byte by byte (the model sees those exact bytes)", "U+FFFD", args);
    /* bench-spec reads a file that is not .jsonl as one prompt, whole (its final newline kept) */
    snprintf(args, sizeof args, "bench-spec -m '%s' --prompts '%s' -n 2 --n-prompts 1 -t 1", model, bad);
    snprintf(want, sizeof want, "tern bench-spec: warning: the prompt file '%s' (--prompts) is not valid UTF-8 (first bad "
             "byte 0xc3 at offset 3 of %d); it is tokenised byte by byte (the model sees those exact bytes)", bad, nb);
    expect_err(0, want, "U+FFFD", args);
    remove(text);
    remove(ids);
    remove(bad);
}

/* chat and serve on stories260K (no tokenizer.chat_template) warn once that ChatML is used; not
 * with --chat-template given, nor on a model that has a template (qwen3-tiny). */
static void test_no_chat_template_notice(void **state) {
    (void)state;
    char spm[1024], bpe[1024], bin[4096];
    fx_require(spm, sizeof spm, STORIES);
    fx_require(bpe, sizeof bpe, QWEN3_TINY);
    ru_need_tern(bin, sizeof bin);
    const char *note = "warning: the model has no chat template (no tokenizer.chat_template in the file); using ChatML "
                       "(--chat-template chatml|qwen3|qwen35 chooses one)";
    struct { const char *args, *model, *cmd; bool warn; } cases[] = {
        {"chat -m '%s' -n 1 --temp 0 -t 1 </dev/null", spm, "chat", true},
        {"chat -m '%s' -n 1 --temp 0 -t 1 --chat-template chatml </dev/null", spm, "chat", false},
        {"chat -m '%s' -n 1 --temp 0 -t 1 </dev/null", bpe, "chat", false},
        /* serve: SIGINT once it listens stops it cleanly (exit 0); the notice comes before it listens */
        {"serve -m '%s' --port 0 -t 1 </dev/null", spm, "serve", true},
        {"serve -m '%s' --port 0 -t 1 --chat-template qwen3 </dev/null", spm, "serve", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], cmd[8192], want[512];
        snprintf(args, sizeof args, cases[i].args, cases[i].model);
        int rc = -1;
        char *err;
        if (!strcmp(cases[i].cmd, "serve")) {
            err = ru_serve_signal(args + strlen("serve "), SIGINT, &rc);
            snprintf(cmd, sizeof cmd, "tern %s, SIGINT once listening", args);
        } else {
            snprintf(cmd, sizeof cmd, "'%s' %s 2>&1 >/dev/null", bin, args);
            err = ru_capture(cmd, &rc);
        }
        snprintf(want, sizeof want, "tern %s: %s", cases[i].cmd, note);
        const char *hit = strstr(err, note);
        const bool once = hit && !strstr(hit + 1, note) && strstr(err, want);
        if (rc != 0 || (cases[i].warn ? !once : hit != NULL))
            fail_msg("%s: exit %d, stderr: %s(expected %s)", cmd, rc, err, cases[i].warn ? "the notice once" : "no notice");
        free(err);
    }
}

/* Bad input named in the error: bench-kernel --isa with an unknown name is a usage error (exit 2)
 * listing the known ones, not a run of every path; perplexity --tokens shows bytes that are not
 * text as \xNN; a text shorter than one chunk names the file, its length and the -c needed;
 * bench-spec's prompt file names a line that is not JSON and says what it expects; a directory
 * as -m is named with the flag. */
static void test_bad_input_messages(void **state) {
    (void)state;
    expect_err(2, "tern bench-kernel: --isa: expected a comma-separated list of ref, avx2, avxvnni, avx512vnni, amx, neon, dotprod, i8mm "
                  "(item 2, 'bogus', is none of them), got 'avx2,bogus'", NULL, "bench-kernel --isa avx2,bogus");
    char model[1024], ids[512], text[512], args[2048], want[1200];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(ids, sizeof ids, "ppl-badbytes.txt");
    fx_tmp_path(text, sizeof text, "ppl-short.txt");
    write_file(ids, "12 ab\x01\xff 5\n", 10);
    snprintf(args, sizeof args, "perplexity -m '%s' --tokens '%s'", model, ids);
    expect_err(1, "index 1 at byte 3: expected an integer id in 0..2147483647 (ids separated by spaces or commas), got "
                  "'ab\\x01\\xff'", NULL, args);
    write_file(ids, "1 2 3\0 4 5", 10);               /* a NUL byte would drop the ids after it unseen */
    expect_err(1, "a NUL byte at offset 5 of 10, expected token ids as text", NULL, args);
    {   /* the trained-context warning follows the ids evaluated (stories260K: 2048), not -c */
        char *o1 = NULL, *e1 = NULL;
        write_file(ids, "1 2 3 4 5 6 7 8\n", 16);
        int r1 = ru_tern(&o1, &e1, "%s -c 3000 -t 1", args);
        if (r1 != 0 || strstr(e1, "trained context")) fail_msg("8 ids, -c 3000: exit %d, stderr: %s", r1, e1);
        free(o1);
        free(e1);
        static char many[2050 * 4 + 1];                 /* 2050 ids: "1 1 ..." */
        for (int i = 0; i < 2050; i++) memcpy(many + 2 * i, "1 ", 2);
        write_file(ids, many, 2 * 2050);
        r1 = ru_tern(&o1, &e1, "%s -c 3000 -t 1", args);
        if (r1 != 0 || !strstr(e1, "warning: the 2050 ids (one sequence) are longer than the model's trained context (2048 tokens)"))
            fail_msg("2050 ids, -c 3000: exit %d, stderr: %s", r1, e1);
        free(o1);
        free(e1);
    }
    write_file(ids, "7\n", 2);
    expect_err(1, ": 1 id, expected at least 2", NULL, args);
    write_file(ids, "[1, 403\n", 8);                  /* a list in brackets must close */
    expect_err(1, ": expected ']' to close the list of 2 ids, got the end of the text", NULL, args);
    write_file(ids, "1, 403,, 407\n", 13);           /* an empty item is no id */
    expect_err(1, ": index 2 at byte 7: expected an id before ',', got an empty item", NULL, args);
    {   /* "[1, 403, 407]" (tokenize --ids' output) scores as "1 403 407" */
        char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL;
        write_file(ids, "[1, 403, 407, 261]\n", 19);
        const int r1 = ru_tern(&o1, &e1, "%s -t 1", args);
        write_file(ids, "1 403 407 261\n", 14);
        const int r2 = ru_tern(&o2, &e2, "%s -t 1", args);
        if (r1 != 0 || r2 != 0 || strcmp(o1, o2) != 0) fail_msg("[list]: exit %d '%s' (%s); plain: exit %d '%s'", r1, o1, e1, r2, o2);
        free(o1);
        free(e1);
        free(o2);
        free(e2);
    }
    write_file(ids, "12 5x 7\n", 8);                  /* a number with trailing letters is no id */
    expect_err(1, "index 1 at byte 3: expected an integer id in 0..2147483647 (ids separated by spaces or commas), got "
                  "'5x'", NULL, args);
    write_file(text, "Once upon a time\n", 17);
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c 64", model, text);
    snprintf(want, sizeof want, "tern perplexity: -f %s: the text is too short: 5 tokens, expected at least 64 (one chunk of -c 64; "
             "a smaller -c, at least 4, scores a shorter text)", text);
    expect_err(1, want, NULL, args);
    /* bench-spec prompts: a line that is not JSON is named (line, byte) and skipped; a file with no
     * usable line says what it found and what it expects */
    char jl[512];
    fx_tmp_path(jl, sizeof jl, "spec-prompts.jsonl");
    write_file(jl, "{\"prompt\": \"Once upon\"}\n{bad json\n", 34);
    snprintf(args, sizeof args, "bench-spec -m '%s' --prompts '%s' -n 2 -t 1", model, jl);
    snprintf(want, sizeof want, "tern bench-spec: warning: %s line 2: not JSON (at byte ", jl);
    expect_err(0, want, NULL, args);
    write_file(jl, "{\"turns\": 5}\n{\"prompt\": \"\"}\n", 28);
    snprintf(want, sizeof want, "tern bench-spec: no prompt in %s (2 lines: 0 not JSON, 1 without a string \"prompt\" or "
             "\"turns\"[0], 1 empty); expected JSON lines with one of those fields", jl);
    expect_err(1, want, NULL, args);
    /* a category no line has: the categories there are listed */
    write_file(jl, "{\"prompt\": \"a\", \"category\": \"rag\"}\n{\"prompt\": \"b\", \"category\": \"math\"}\n", 71);
    snprintf(args, sizeof args, "bench-spec -m '%s' --prompts '%s' --category coding -n 2 -t 1", model, jl);
    snprintf(want, sizeof want, "tern bench-spec: --category coding: no line of %s has that category (the categories there: "
             "'rag', 'math')", jl);
    expect_err(1, want, NULL, args);
    remove(jl);
    /* a prompt file that is empty is refused before the model loads */
    write_file(text, "", 0);
    snprintf(args, sizeof args, "bench-spec -m '%s' --prompts '%s' -n 2 -t 1", model, text);
    snprintf(want, sizeof want, "tern bench-spec: --prompts %s: the file is empty; expected a prompt text or .jsonl lines", text);
    expect_err(1, want, NULL, args);
    remove(ids);
    remove(text);
    /* a directory given as the model is named with its flag */
    char dir[512];
    fx_tmp_path(dir, sizeof dir, "model-dir");
    assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 2", dir);
    snprintf(want, sizeof want, "tern run: -m: '%s' is a directory, expected a regular file", dir);
    expect_err(1, want, NULL, args);
    rmdir(dir);
    /* synth: an empty chat template file is refused (it would render nothing) */
    char tmpl[512], out[512];
    fx_tmp_path(tmpl, sizeof tmpl, "empty-template.jinja");
    fx_tmp_path(out, sizeof out, "empty-template.gguf");
    write_file(tmpl, "", 0);
    snprintf(args, sizeof args, "synth --arch qwen3-tiny --chat-template '%s' -o '%s'", tmpl, out);
    snprintf(want, sizeof want, "tern synth: --chat-template '%s' is empty, expected a chat template's text", tmpl);
    expect_err(1, want, NULL, args);
    assert_int_equal(access(out, F_OK), -1);          /* nothing written */
    /* ... and so is one that is not UTF-8 text (GGUF strings are UTF-8) or holds a NUL byte */
    write_file(tmpl, "{{ x }}\xff\xfe", 9);
    snprintf(want, sizeof want, "tern synth: --chat-template '%s': not valid UTF-8 (byte 0xff at offset 7 of 9), expected a "
             "chat template's text", tmpl);
    expect_err(1, want, NULL, args);
    write_file(tmpl, "{{ x }}\0y", 9);
    snprintf(want, sizeof want, "tern synth: --chat-template '%s': a NUL byte at offset 7 of 9, expected a chat template's text",
             tmpl);
    expect_err(1, want, NULL, args);
    assert_int_equal(access(out, F_OK), -1);
    remove(tmpl);
}

/* `tern run -n 0` generates nothing and prints nothing on stdout (no lone newline); with --echo
 * the prompt and one newline; -n 2 the generation and one newline. */
static void test_run_n0_prints_nothing(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    char *out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "run -m '%s' -p Hello -n 0", model), 0);
    assert_string_equal(out, "");
    free(out);
    out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "run -m '%s' -p Hello -n 0 --echo", model), 0);
    assert_string_equal(out, "Hello\n");
    free(out);
    out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "run -m '%s' -p Hello -n 2 --ignore-eos --temp 0", model), 0);
    const size_t n = strlen(out);
    assert_true(n >= 2 && out[n - 1] == '\n' && out[n - 2] != '\n');
    free(out);
}

/* A failed write of synth or quantize never removes an OUT that existed before (for OUT a symlink
 * to /dev/full, run as root, that would delete /dev/full): a symlink to /dev/full survives both
 * (exit 1, the message names the path), while a file the run itself created is removed when writing
 * it fails (a file-size limit of 512 bytes, SIGXFSZ ignored). */
static void test_failed_write_keeps_existing_output(void **state) {
    (void)state;
    char bin[4096], model[1024], dir[512], link[600], fresh[600], args[2048], cmd[8192];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(dir, sizeof dir, "outdir");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", dir, strerror(errno));
    snprintf(link, sizeof link, "%s/model.gguf", dir);
    snprintf(fresh, sizeof fresh, "%s/new.gguf", dir);
    unlink(link);
    unlink(fresh);
    if (symlink("/dev/full", link) != 0) fail_msg("symlink %s: %s", link, strerror(errno));
    const char *runs[] = {"synth --arch qwen3-tiny --no-weights -o '%s'", "synth --arch qwen3-tiny -o '%s'",
                          "quantize '%s' '%s' --type q8_0"};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        if (r == 2) snprintf(args, sizeof args, runs[r], model, link);
        else snprintf(args, sizeof args, runs[r], link);
        char *err = NULL;
        const int rc = ru_tern(NULL, &err, "%s", args);
        struct stat st;
        char target[64] = "";
        const ssize_t k = readlink(link, target, sizeof target - 1);
        if (k > 0) target[k] = '\0';
        if (rc != 1 || !strstr(err, link) || lstat(link, &st) != 0 || !S_ISLNK(st.st_mode) || strcmp(target, "/dev/full"))
            fail_msg("tern %s: exit %d, stderr: %s(expected exit 1, the path named, and the symlink to /dev/full kept)",
                     args, rc, err);
        free(err);
    }
    /* a new file that cannot be written whole: removed (512-byte file-size limit, SIGXFSZ ignored) */
    snprintf(cmd, sizeof cmd, "sh -c \"trap '' XFSZ; ulimit -f 1; exec '%s' synth --arch qwen3-tiny --no-weights -o '%s'\" 2>&1",
             bin, fresh);
    int rc = -1;
    char *out = ru_capture(cmd, &rc);
    if (rc != 1 || !strstr(out, fresh) || access(fresh, F_OK) == 0)
        fail_msg("%s: exit %d, output: %s(expected exit 1, the path named and the partial file removed)", cmd, rc, out);
    free(out);
    unlink(link);
    unlink(fresh);
    rmdir(dir);
}

/* Whether the files at a and b have the same bytes. */
static bool same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = fx_read_file(a, &na), *y = fx_read_file(b, &nb);
    const bool eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

/* `tern quantize IN OUT` with OUT naming IN by another path (dir/../, a symlink, a hard link), not
 * only the identical string, is a usage error (exit 2) naming both paths, refused before anything
 * is written: writing OUT would truncate the mmapped input under the reader (SIGBUS, the model
 * lost). IN keeps its bytes. */
static void test_quantize_same_file(void **state) {
    (void)state;
    char bin[4096], model[1024], dir[512], in[600], alias[3][1200], args[8192];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(dir, sizeof dir, "samedir");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", dir, strerror(errno));
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    size_t len = 0;
    char *bytes = fx_read_file(model, &len);
    assert_non_null(bytes);
    write_file(in, bytes, len);
    free(bytes);
    snprintf(alias[0], sizeof alias[0], "%s/../%s/in.gguf", dir, strrchr(dir, '/') + 1);
    snprintf(alias[1], sizeof alias[1], "%s/link.gguf", dir);
    snprintf(alias[2], sizeof alias[2], "%s/hard.gguf", dir);
    unlink(alias[1]);
    unlink(alias[2]);
    if (symlink("in.gguf", alias[1]) != 0) fail_msg("symlink %s: %s", alias[1], strerror(errno));
    if (link(in, alias[2]) != 0) fail_msg("link %s: %s", alias[2], strerror(errno));
    for (int i = 0; i < 3; i++) {
        char want[8192];
        snprintf(args, sizeof args, "quantize '%s' '%s' --type q8_0", in, alias[i]);
        snprintf(want, sizeof want, "tern quantize: IN '%s' and OUT '%s' are the same file", in, alias[i]);
        expect_err(2, want, NULL, args);
        if (!same_bytes(in, model)) fail_msg("tern %s changed IN", args);
    }
    unlink(alias[1]);
    unlink(alias[2]);
    unlink(in);
    rmdir(dir);
}

/* Whether dir holds a file whose name contains ".tern-" (a temporary file left behind). */
static bool tmp_left(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -a '%s'", dir);
    int rc = -1;
    char *out = ru_capture(cmd, &rc);
    const bool left = strstr(out, ".tern-") != NULL;
    free(out);
    return left;
}

/* quantize/synth write OUT to a temporary file beside it and rename it over OUT on success, so a
 * failed run never leaves an existing OUT truncated: under a file-size limit (SIGXFSZ ignored) both
 * fail with exit 1, OUT keeps its old bytes, the message says so, and no temporary file is left; a
 * successful run replaces OUT keeping its permission bits (0640); a symlink OUT stays a symlink and
 * its target gets the new file (as cp). */
static void test_failed_write_keeps_old_output(void **state) {
    (void)state;
    char bin[4096], model[1024], dir[512], out[600], link[600], cmd[8192];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(dir, sizeof dir, "replacedir");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", dir, strerror(errno));
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(link, sizeof link, "%s/link.gguf", dir);
    const char *old = "the user's previous model\n";
    const char *runs[] = {"quantize '%s' '%s' --type q8_0", "synth --arch qwen3-tiny --no-weights -o '%s'"};
    for (int r = 0; r < 2; r++) {
        write_file(out, old, strlen(old));
        assert_int_equal(chmod(out, 0640), 0);
        char args[2048];
        if (r == 0) snprintf(args, sizeof args, runs[r], model, out);
        else snprintf(args, sizeof args, runs[r], out);
        snprintf(cmd, sizeof cmd, "sh -c \"trap '' XFSZ; ulimit -f 1; exec '%s' %s\" 2>&1", bin, args);
        int rc = -1;
        char *msg = ru_capture(cmd, &rc);
        char want[800];
        snprintf(want, sizeof want, "(OUT '%s' left as it was)", out);
        size_t len = 0;
        char *now = fx_read_file(out, &len);
        if (rc != 1 || !strstr(msg, want) || !now || len != strlen(old) || memcmp(now, old, len) || tmp_left(dir))
            fail_msg("%s: exit %d, output: %s(expected exit 1, \"%s\", OUT's old bytes and no temporary file)", cmd, rc,
                     msg, want);
        free(now);
        free(msg);
    }
    char args[2048];
    snprintf(args, sizeof args, "quantize '%s' '%s' --type q8_0", model, out);
    expect_err(0, "tern quantize: ", NULL, args);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    if ((st.st_mode & 07777) != 0640) fail_msg("OUT's mode after quantize: %o, expected 640", (unsigned)(st.st_mode & 07777));
    gguf_ctx *g = NULL;
    tern_err err = {0};
    if (gguf_open(&g, out, GGUF_LOAD_MMAP, &err) != TERN_OK) fail_msg("%s after quantize: %s", out, err.msg);
    gguf_close(g);
    assert_false(tmp_left(dir));
    /* a symlink OUT: the link stays, its target is replaced */
    write_file(out, old, strlen(old));
    unlink(link);
    if (symlink("out.gguf", link) != 0) fail_msg("symlink %s: %s", link, strerror(errno));
    snprintf(args, sizeof args, "quantize '%s' '%s' --type q8_0", model, link);
    expect_err(0, "tern quantize: ", NULL, args);
    if (lstat(link, &st) != 0 || !S_ISLNK(st.st_mode)) fail_msg("%s is no longer a symlink", link);
    g = NULL;
    if (gguf_open(&g, out, GGUF_LOAD_MMAP, &err) != TERN_OK) fail_msg("%s (the link's target): %s", out, err.msg);
    gguf_close(g);
    assert_false(tmp_left(dir));
    unlink(link);
    unlink(out);
    rmdir(dir);
}

/* The temporary file is "DIR/.tern-XXXXXX", whose name fits beside any OUT name (a name derived
 * from OUT's would be too long for one of 245..255 bytes), and OUT is never written in place when
 * it cannot be made: with a 252-byte OUT name a run under a file-size limit fails with exit 1, OUT
 * keeps its bytes and no temporary file is left; a successful run replaces OUT with its permission
 * bits but not set-uid (4750 -> 750, as cp). A read-only OUT is refused naming OUT, and an OUT in a
 * directory the user may not write is refused, not written in place (both only when not root: root
 * may write either). */
static void test_out_temp_beside(void **state) {
    (void)state;
    char bin[4096], model[1024], dir[512], out[900], cmd[8192], args[2048], want[1200];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(dir, sizeof dir, "tempbeside");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", dir, strerror(errno));
    char name[300];
    memset(name, 'y', 247);
    memcpy(name + 247, ".gguf", 6);
    snprintf(out, sizeof out, "%s/%s", dir, name);
    const char *old = "the user's previous model\n";
    write_file(out, old, strlen(old));
    assert_int_equal(chmod(out, 04750), 0);
    snprintf(args, sizeof args, "quantize '%s' '%s' --type q8_0", model, out);
    snprintf(cmd, sizeof cmd, "sh -c \"trap '' XFSZ; ulimit -f 1; exec '%s' %s\" 2>&1", bin, args);
    int rc = -1;
    char *msg = ru_capture(cmd, &rc);
    snprintf(want, sizeof want, "(OUT '%s' left as it was)", out);
    size_t len = 0;
    char *now = fx_read_file(out, &len);
    if (rc != 1 || !strstr(msg, want) || !now || len != strlen(old) || memcmp(now, old, len) || tmp_left(dir))
        fail_msg("%s: exit %d, output: %s(expected exit 1, \"%s\", OUT's old bytes and no temporary file)", cmd, rc,
                 msg, want);
    free(now);
    free(msg);
    expect_err(0, "tern quantize: ", NULL, args);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    if ((st.st_mode & 07777) != 0750) fail_msg("OUT's mode after quantize: %o, expected 750", (unsigned)(st.st_mode & 07777));
    gguf_ctx *g = NULL;
    tern_err err = {0};
    if (gguf_open(&g, out, GGUF_LOAD_MMAP, &err) != TERN_OK) fail_msg("%s after quantize: %s", out, err.msg);
    gguf_close(g);
    assert_false(tmp_left(dir));
    if (geteuid() != 0) {
        /* a read-only OUT: refused, the message names OUT */
        write_file(out, old, strlen(old));
        assert_int_equal(chmod(out, 0444), 0);
        snprintf(want, sizeof want, "'%s' is not writable", out);
        expect_err(1, want, ".tern-", args);
        now = fx_read_file(out, &len);
        if (!now || len != strlen(old) || memcmp(now, old, len)) fail_msg("a read-only OUT was changed");
        free(now);
        /* a writable OUT in a directory we may not write: refused, OUT untouched */
        assert_int_equal(chmod(out, 0644), 0);
        assert_int_equal(chmod(dir, 0500), 0);
        snprintf(want, sizeof want, "cannot create a temporary file beside OUT '%s'", out);
        expect_err(1, want, NULL, args);
        assert_int_equal(chmod(dir, 0700), 0);
        now = fx_read_file(out, &len);
        if (!now || len != strlen(old) || memcmp(now, old, len)) fail_msg("OUT in a read-only directory was changed");
        free(now);
    }
    unlink(out);
    rmdir(dir);
}

/* Whether dir holds a temporary file ".tern-*" of at least min_size bytes. */
static bool tmp_find(const char *dir, off_t min_size) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (strncmp(e->d_name, ".tern-", 6)) continue;
        char p[1200];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        found = stat(p, &st) == 0 && st.st_size >= min_size;
    }
    closedir(d);
    return found;
}

/* SIGINT/SIGTERM during synth: the temporary file (large by then) is removed and the process
 * dies of the signal; an existing OUT keeps its bytes.
 * (synth of a 1-layer bonsai-1.7b writes ~100 MB in ~0.4 s: the signal is sent as soon as the
 * temporary file has 1 MB.) */
static void test_signal_removes_temp(void **state) {
    (void)state;
    char bin[4096], dir[512], out[600];
    ru_need_tern(bin, sizeof bin);
    fx_tmp_path(dir, sizeof dir, "sigtemp");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", dir, strerror(errno));
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    const char *old = "the user's previous model\n";
    const int sigs[2] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        write_file(out, old, strlen(old));
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            if (!freopen("/dev/null", "w", stderr)) _exit(126);
            execl(bin, bin, "synth", "--arch", "bonsai-1.7b", "--n-layer", "1", "-o", out, (char *)NULL);
            _exit(127);
        }
        bool seen = false;
        for (int t = 0; t < 20000 && !seen; t++) {   /* up to ~20 s */
            seen = tmp_find(dir, 1 << 20);
            if (!seen) nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        if (seen) kill(pid, sigs[i]);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!seen) fail_msg("synth wrote no temporary file of 1 MB in %s (status %d)", dir, st);
        size_t len = 0;
        char *now = fx_read_file(out, &len);
        const bool left = tmp_find(dir, 0);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != sigs[i] || left || !now || len != strlen(old) || memcmp(now, old, len))
            fail_msg("synth sent signal %d: status %d, temporary file left: %d, OUT kept: %d (expected death by the "
                     "signal, no temporary file, OUT's old bytes)", sigs[i], st, left,
                     now && len == strlen(old) && !memcmp(now, old, len));
        free(now);
    }
    unlink(out);
    rmdir(dir);
}

/* Results written to a full device are not lost silently: every command checks stdout at the end:
 * exit 1 and "tern CMD: write error on standard output" on stderr; the same commands into /dev/null
 * exit 0 (the control). */
static void test_stdout_write_error(void **state) {
    (void)state;
    char bin[4096], model[1024], text[1024];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    fx_require(text, sizeof text, "data/tinystories-sample/tinystories_sample.txt");
    const char *cmds[][2] = {
        {"info", "info '%s'"},
        {"run", "run -m '%s' -p Once -n 20 -t 1"},
        {"bench", "bench -m '%s' -p 4 -n 4 -r 1 -t 1 --json"},
        {"perplexity", "perplexity -m '%s' -f '%s' -c 64 --chunks 2 -t 1"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[4096], full[4200], want[200];
        snprintf(args, sizeof args, cmds[i][1], model, text);
        for (int dev = 0; dev < 2; dev++) {
            snprintf(full, sizeof full, "%s >%s", args, dev ? "/dev/full" : "/dev/null");
            snprintf(want, sizeof want, "tern %s: write error on standard output", cmds[i][0]);
            char *out = NULL, *err = NULL;
            const int rc = ru_tern(&out, &err, "%s", full);
            if (dev ? rc != 1 || !strstr(err, want) : rc != 0 || strstr(err, "write error"))
                fail_msg("tern %s: exit %d, stderr: %s(expected exit %d%s%s)", full, rc, err, dev, dev ? ", " : "",
                         dev ? want : "");
            free(out);
            free(err);
        }
    }
}

/* An error about a file deep in a long directory path (a Hugging Face cache path easily passes 200
 * bytes) still ends in its reason: the whole path and then what is wrong with the file. */
static void test_long_path_errors(void **state) {
    (void)state;
    char dir[1024];
    fx_tmp_path(dir, sizeof dir, "");
    size_t n = strlen(dir);
    for (int i = 0; i < 4; i++) {                     /* 4 levels of 90 bytes: ~400 bytes of path */
        n += (size_t)snprintf(dir + n, sizeof dir - n, "%s%.90s", i ? "/" : "", "dddddddddddddddddddddddddddddddddddddddddddd"
                              "dddddddddddddddddddddddddddddddddddddddddddddd");
        assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
    }
    char bad[1200], missing[1200];
    snprintf(bad, sizeof bad, "%s/bad.gguf", dir);
    snprintf(missing, sizeof missing, "%s/missing.gguf", dir);
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    fputs("not a gguf file at all, but 32 b", f);   /* past the 24-byte header */
    fclose(f);
    char want[1400];
    char *err = NULL;
    assert_int_equal(ru_tern(NULL, &err, "run -m '%s' -p hi", bad), 1);
    snprintf(want, sizeof want, "%s: GGUF magic at byte 0: got 6e 6f 74 20, expected 47 47 55 46", bad);
    if (!strstr(err, want)) fail_msg("a bad file at a %zu-byte path: %s(expected '%s')", strlen(bad), err, want);
    free(err);
    assert_int_equal(ru_tern(NULL, &err, "run -m '%s' -p hi", missing), 1);
    snprintf(want, sizeof want, "cannot open '%s': No such file or directory", missing);
    if (!strstr(err, want)) fail_msg("a missing file at a %zu-byte path: %s(expected '%s')", strlen(missing), err, want);
    free(err);
    unlink(bad);
    for (int i = 0; i < 4; i++) {
        rmdir(dir);
        *strrchr(dir, '/') = '\0';
    }
}

/* A standard stream the parent closed stays closed for tern's own use, and no file the process
 * opens takes its descriptor: chat with stdin closed reads no message (a worker thread's /proc
 * file once landed on descriptor 0 and was sent as one) and ends as at EOF; synth and quantize,
 * which write nothing to stdout, succeed with it closed; run, which does, still fails with a
 * write error. */
static void test_closed_std_streams(void **state) {
    (void)state;
    char model[1024], q3[512], q3b[512];
    fx_require(model, sizeof model, STORIES);
    for (int i = 0; i < 8; i++) {
        char *out = NULL, *err = NULL;
        const int rc = ru_tern(&out, &err, "chat -m '%s' -n 5 --temp 0 <&-", model);
        if (rc != 0 || strstr(err, "[turn")) fail_msg("chat with stdin closed: exit %d, a turn was run: %s", rc, err);
        free(out);
        free(err);
    }
    fx_tmp_path(q3, sizeof q3, "closed-q3.gguf");
    fx_tmp_path(q3b, sizeof q3b, "closed-q3b.gguf");
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "synth --arch qwen3-tiny -o '%s' >&-", q3);
    if (rc != 0 || strstr(err, "write error")) fail_msg("synth with stdout closed: exit %d: %s", rc, err);
    free(out);
    free(err);
    rc = ru_tern(&out, &err, "quantize '%s' '%s' --type ptq1_0 >&-", q3, q3b);
    if (rc != 0 || strstr(err, "write error")) fail_msg("quantize with stdout closed: exit %d: %s", rc, err);
    free(out);
    free(err);
    rc = ru_tern(&out, &err, "run -m '%s' -p Once -n 3 -t 1 >&-", model);
    if (rc != 1 || !strstr(err, "tern run: write error on standard output: Bad file descriptor"))
        fail_msg("run with stdout closed: exit %d (expected 1 and a write error): %s", rc, err);
    free(out);
    free(err);
    unlink(q3);
    unlink(q3b);
}

/* `serve --api-key ""` (or TERN_API_KEY set to nothing) is a usage error before the model loads:
 * an empty key would claim a key is required while serving everyone. A non-empty --api-key
 * overrides an empty TERN_API_KEY (the run reaches the model file). --n-vocab has a maximum (2^20),
 * so a value such as 2147483647 is refused instead of eating the memory. */
static void test_empty_api_key_and_vocab_limit(void **state) {
    (void)state;
    char bin[4096], cmd[8192], path[512];
    ru_need_tern(bin, sizeof bin);
    expect_err(2, "tern serve: --api-key: empty key; expected a non-empty string", NULL,
               "serve -m /nonexistent/x.gguf --api-key ''");
    expect_err(2, "tern serve: --api-key: empty key; expected a non-empty string", NULL,
               "serve -m /nonexistent/x.gguf --api-key=");
    struct { const char *env_args; int rc; const char *want; } cases[] = {
        {"TERN_API_KEY= '%s' serve -m /nonexistent/x.gguf 2>&1", 2,
         "tern serve: TERN_API_KEY: empty key; expected a non-empty string (or unset TERN_API_KEY)"},
        /* past the options the server listens, then loads: any free port, so that a program on
         * 8080 does not end it before the load names the file */
        {"TERN_API_KEY= '%s' serve -m /nonexistent/x.gguf --api-key k --port 0 2>&1", 1, "/nonexistent/x.gguf"},
        {"TERN_API_KEY=k '%s' serve -m /nonexistent/x.gguf --api-key '' 2>&1", 2,
         "tern serve: --api-key: empty key; expected a non-empty string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, cases[i].env_args, bin);
        int rc = -1;
        char *out = ru_capture(cmd, &rc);
        if (rc != cases[i].rc || !strstr(out, cases[i].want))
            fail_msg("%s: exit %d, output: %s(expected exit %d, \"%s\")", cmd, rc, out, cases[i].rc, cases[i].want);
        free(out);
    }
    fx_tmp_path(path, sizeof path, "huge-vocab.gguf");
    unlink(path);
    char args[1024];
    snprintf(args, sizeof args, "synth --arch qwen3-tiny --n-vocab 2147483647 --no-weights -o '%s'", path);
    expect_err(2, "tern synth: --n-vocab: expected an integer in 285..1048576, got '2147483647'", NULL, args);
    assert_int_equal(access(path, F_OK), -1);
    char *out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "synth --help"), 0);
    if (!strstr(out, "at most 2^20, about 4x the") || !strstr(out, "[285..1048576]"))
        fail_msg("synth --help does not state --n-vocab's maximum:\n%s", out);
    free(out);
}

/* A key no request could match is a usage error before the model loads, naming the flag or the
 * variable and the offending byte but never the key: a request's key is stripped of the spaces and
 * tabs around it and a header carries no CR or LF. Byte positions and codes are counted by hand
 * ("abc\r": byte 4 of 4 is 0x0d). A key with a space inside is a key a client can send: the run
 * goes on to the model file. */
static void test_api_key_unmatchable(void **state) {
    (void)state;
    char bin[4096], cmd[8192];
    ru_need_tern(bin, sizeof bin);
    struct { const char *env_args; int rc; const char *want; } cases[] = {
        {"'%s' serve -m /nonexistent/x.gguf --api-key ' ' 2>&1", 2,
         "tern serve: --api-key: the key is 1 space and nothing else; expected a non-empty string"},
        {"'%s' serve -m /nonexistent/x.gguf --api-key '   ' 2>&1", 2, "--api-key: the key is 3 spaces and nothing else"},
        {"'%s' serve -m /nonexistent/x.gguf --api-key ' sekrit' 2>&1", 2,
         "tern serve: --api-key: the 7-byte key begins with a space; expected no whitespace around the key"},
        {"'%s' serve -m /nonexistent/x.gguf --api-key 'sekrit ' 2>&1", 2, "--api-key: the 7-byte key ends with a space"},
        {"'%s' serve -m /nonexistent/x.gguf --api-key \"$(printf 'sek\trit')\" 2>&1", 2,
         "--api-key: byte 4 of the 7-byte key is the control character 0x09; expected printable characters only"},
        {"TERN_API_KEY=\"$(printf 'sekrit\r')\" '%s' serve -m /nonexistent/x.gguf 2>&1", 2,
         "tern serve: TERN_API_KEY: byte 7 of the 7-byte key is the control character 0x0d; expected printable "
         "characters only (a request cannot carry it, so no client could match) (or unset TERN_API_KEY)"},
        {"TERN_API_KEY=\"$(printf '\033sekrit')\" '%s' serve -m /nonexistent/x.gguf 2>&1", 2,
         "TERN_API_KEY: byte 1 of the 7-byte key is the control character 0x1b"},
        {"TERN_API_KEY=\"$(printf 'sekrit\177')\" '%s' serve -m /nonexistent/x.gguf 2>&1", 2,
         "TERN_API_KEY: byte 7 of the 7-byte key is the control character 0x7f"},
        /* --api-key overrides the variable, so a bad TERN_API_KEY under a good flag is not read */
        {"TERN_API_KEY=' ' '%s' serve -m /nonexistent/x.gguf --api-key sekrit --port 0 2>&1", 1, "/nonexistent/x.gguf"},
        {"'%s' serve -m /nonexistent/x.gguf --api-key 'sek rit' --port 0 2>&1", 1, "/nonexistent/x.gguf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, cases[i].env_args, bin);
        int rc = -1;
        char *out = ru_capture(cmd, &rc);
        if (rc != cases[i].rc || !strstr(out, cases[i].want) || strstr(out, "sekrit"))
            fail_msg("%s: exit %d, output: %s(expected exit %d, \"%s\", and not the key)", cmd, rc, out, cases[i].rc,
                     cases[i].want);
        free(out);
    }
}

/* NaN weights that the load does not scan: rather than `PPL = nan` with exit 0 or silent garbage,
 * perplexity fails (exit 1, no PPL line) naming where the logits first were not finite: with
 * -c 16 the first scored position is 8 of chunk 1 (c/2, llama-perplexity's convention), with
 * --tokens position 0; run stops at the position after the prompt, says so once on stderr, has
 * generated no token and exits 1; chat says so after the reply and exits 1 (a NaN in a norm weight is refused at load instead:
 * test_damaged_model_refused). The undamaged model gives exit 0 with the same arguments (the
 * control). */
static void test_nonfinite_logits(void **state) {
    (void)state;
    char model[1024], bad[512], text[512], ids[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(bad, sizeof bad, "nan-model.gguf");
    fx_tmp_path(text, sizeof text, "nan-text.txt");
    fx_tmp_path(ids, sizeof ids, "nan-ids.txt");
    mfx_write_nan_tensor(model, "blk.4.ffn_down.weight", bad);   /* an F32 projection: not scanned at load */
    const char *story = "Once upon a time there was a little girl named Lily. She liked to play in the park with her "
                        "dog. One day the dog ran away and Lily was sad.\n";
    write_file(text, story, strlen(story));
    write_file(ids, "1 403 407 261 107 300\n", 22);
    for (int damaged = 0; damaged < 2; damaged++) {
        const char *m = damaged ? bad : model;
        char *out = NULL, *err = NULL;
        int rc = ru_tern(&out, &err, "perplexity -m '%s' -f '%s' -c 16 -t 1", m, text);
        const char *want = "tern perplexity: the logits at chunk 1, position 8 (token 8 of the text) are not finite "
                           "(logit 0 of 512 is NaN); expected finite logits: the model's weights may be damaged";
        if (damaged ? rc != 1 || !strstr(err, want) || strstr(out, "PPL") : rc != 0 || !strstr(out, "PPL = "))
            fail_msg("perplexity -f on %s: exit %d, stdout: %s, stderr: %s", m, rc, out, err);
        free(out);
        free(err);
        out = err = NULL;
        rc = ru_tern(&out, &err, "perplexity -m '%s' --tokens '%s' -t 1", m, ids);
        char want2[1200];
        snprintf(want2, sizeof want2, "tern perplexity: the logits at position 0 of the ids in %s are not finite", ids);
        if (damaged ? rc != 1 || !strstr(err, want2) || strstr(out, "PPL") : rc != 0 || !strstr(out, "PPL = "))
            fail_msg("perplexity --tokens on %s: exit %d, stdout: %s, stderr: %s", m, rc, out, err);
        free(out);
        free(err);
        for (int spec = 0; spec < 2; spec++) {
            err = NULL;
            rc = ru_tern(NULL, &err, "run -m '%s' -p 'Once upon a time' -n 4 --temp 0 -t 1 --ignore-eos%s", m,
                         spec ? " --spec lookup" : "");
            const char *w = "tern run: the logits for position ";
            const char *hit = strstr(err, w);
            const bool once = hit && !strstr(hit + 1, w) && strstr(hit, "are not finite (logit 0 of 512 is NaN)") &&
                              strstr(err, "generation: 0 tokens");   /* nothing sampled from NaN logits */
            if (damaged ? rc != 1 || !once : rc != 0 || hit)
                fail_msg("run%s on %s: exit %d, stderr: %s(expected %s)", spec ? " --spec lookup" : "", m, rc, err,
                         damaged ? "exit 1, the message once, no token generated" : "exit 0, no message");
            free(err);
        }
        /* chat: the warning after the reply, then exit 1 (the next message is not read) */
        err = NULL;
        rc = ru_tern(NULL, &err, "chat -m '%s' -n 4 --temp 0 -t 1 <'%s'", m, text);
        const char *wc = "tern chat: the logits for position ";
        if (damaged ? rc != 1 || !strstr(err, wc) || !strstr(err, "chat ends with status 1") : rc != 0 || strstr(err, wc))
            fail_msg("chat on %s: exit %d, stderr: %s", m, rc, err);
        free(err);
    }
    remove(bad);
    remove(text);
    remove(ids);
}

/* A NaN/Inf fp16 block scale in a PQ2_0/PTQ1_0 model, or a NaN in a norm weight, is refused by the
 * model load whatever the numerics (exit 1), naming the tensor, row, block (element) and bits: on
 * --numerics fast/ggml the int8 activation path would turn it into finite logits, hiding the
 * damage. Damaged copies of the golden qwen3-tiny-pq2_0 (n_embd 256, n_ff 768: scale of
 * blk.0.attn_q.weight block 0 -> NaN; row 1 block 2 -> +Inf), of its PTQ1_0 quantization (scale at
 * byte 26 of row 3's block 1 -> -Inf) and of stories260K (element 3 of blk.4.ffn_norm.weight ->
 * NaN); the undamaged PTQ1_0 copy runs (exit 0, the control). */
static void test_damaged_model_refused(void **state) {
    (void)state;
    char bin[4096], q3[1024], stories[1024], bad[512], ptq[512];
    ru_need_tern(bin, sizeof bin);
    fx_require(q3, sizeof q3, QWEN3_TINY);
    fx_require(stories, sizeof stories, STORIES);
    fx_tmp_path(bad, sizeof bad, "damaged.gguf");
    fx_tmp_path(ptq, sizeof ptq, "damaged-src-ptq.gguf");
    char args[4096];
    snprintf(args, sizeof args, "quantize '%s' '%s' --type ptq1_0", q3, ptq);
    expect_err(0, "tern quantize: ", NULL, args);
    const struct { const char *model, *tensor; uint64_t at; uint8_t v[4]; size_t n; const char *numerics, *want; } c[] = {
        {q3, "blk.0.attn_q.weight", 0, {0x00, 0x7e}, 2, "fast",
         "tensor 'blk.0.attn_q.weight': row 0, block 0: scale 0x7e00 is NaN; expected a finite fp16 scale"},
        {q3, "blk.0.attn_q.weight", 0, {0x00, 0x7e}, 2, "ggml", "tensor 'blk.0.attn_q.weight': row 0, block 0: scale 0x7e00 is NaN"},
        {q3, "blk.0.attn_q.weight", 0, {0x00, 0x7e}, 2, "f32", "tensor 'blk.0.attn_q.weight': row 0, block 0: scale 0x7e00 is NaN"},
        {q3, "blk.1.ffn_down.weight", 0, {0x00, 0x7c}, 2, "fast", NULL},   /* at: set below */
        {ptq, "blk.0.ffn_gate.weight", (3 * 2 + 1) * 28 + 26, {0x00, 0xfc}, 2, "fast",
         "tensor 'blk.0.ffn_gate.weight': row 3, block 1: scale 0xfc00 is -Inf"},
        {stories, "blk.4.ffn_norm.weight", 12, {0x00, 0x00, 0xc0, 0x7f}, 4, "fast",
         "tensor 'blk.4.ffn_norm.weight': element 3 (row 0, column 3) is NaN (bits 0x7fc00000)"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint64_t at = c[i].at;
        char want[300];
        const char *w = c[i].want;
        if (!w) {   /* ffn_down: rows of n_ff = 768 weights (6 blocks); row 1, block 2 */
            at = (768 / 128 * 34) * 1 + 2 * 34;
            snprintf(want, sizeof want, "tensor 'blk.1.ffn_down.weight': row 1, block 2: scale 0x7c00 is +Inf");
            w = want;
        }
        mfx_write_damaged(c[i].model, c[i].tensor, at, c[i].v, c[i].n, bad);
        snprintf(args, sizeof args, "run -m '%s' -p 'Once upon a time' -n 2 --temp 0 -t 1 --numerics %s", bad, c[i].numerics);
        expect_err(1, w, NULL, args);
        if (c[i].model != stories && strcmp(c[i].numerics, "ggml")) {
            /* quantize refuses the damaged block with the same words rather than write the NaN
             * out as F16/F32 weights (f16, and ptq1_0/pq2_0: the lossless paths) */
            char qout[600];
            fx_tmp_path(qout, sizeof qout, "damaged-out.gguf");
            const char *types[] = {"f16", "f32", c[i].model == ptq ? "pq2_0" : "ptq1_0"};
            for (int k = 0; k < 3; k++) {
                snprintf(args, sizeof args, "quantize '%s' '%s' --type %s", bad, qout, types[k]);
                expect_err(1, w, NULL, args);
                if (access(qout, F_OK) == 0) fail_msg("tern %s left '%s'", args, qout);
            }
        }
    }
    /* element types: a NaN in an F32 weight matrix (not scanned at load) is refused by quantize */
    {
        const uint8_t nan[4] = {0x00, 0x00, 0xc0, 0x7f};
        char qout[600];
        fx_tmp_path(qout, sizeof qout, "damaged-out.gguf");
        mfx_write_damaged(stories, "blk.0.attn_q.weight", (64 + 5) * 4, nan, 4, bad);
        snprintf(args, sizeof args, "quantize '%s' '%s' --type q8_0", bad, qout);
        expect_err(1, "tensor 'blk.0.attn_q.weight': element 69 (row 1, column 5) is NaN (bits 0x7fc00000)", NULL, args);
        if (access(qout, F_OK) == 0) fail_msg("tern %s left '%s'", args, qout);
    }
    snprintf(args, sizeof args, "run -m '%s' -p 'Once upon a time' -n 2 --temp 0 -t 1", ptq);
    expect_err(0, "generation: ", NULL, args);
    remove(bad);
    remove(ptq);
}

/* The number after `key` in s (0 if absent). */
static double num_after(const char *s, const char *key) {
    const char *p = strstr(s, key);
    return p ? atof(p + strlen(key)) : 0.0;
}

/* The share a tg row reports (tools/bench_share.h): repeats above their ceiling are left out of
 * the median and the range and counted; all above is no result; cache-resident rows leave
 * nothing out. Expected values worked by hand from the rule. */
static void test_bench_share_rule(void **state) {
    (void)state;
    double a[] = {0.8, 0.9, 1.2, 0.85};
    bench_share s = bench_share_of(a, 4, false);
    assert_int_equal(s.n_above, 1);
    assert_false(s.none);
    assert_true(fabs(s.med - 0.85) < 1e-12 && fabs(s.lo - 0.8) < 1e-12 && fabs(s.hi - 0.9) < 1e-12);
    double b[] = {0.7, 0.9, 1.01, 0.8, 0.6};   /* four counted: the median of an even count */
    s = bench_share_of(b, 5, false);
    assert_int_equal(s.n_above, 1);
    assert_true(fabs(s.med - 0.75) < 1e-12 && fabs(s.hi - 0.9) < 1e-12);
    double c[] = {1.3, 1.1};
    s = bench_share_of(c, 2, false);
    assert_true(s.none);
    assert_int_equal(s.n_above, 2);
    assert_true(fabs(s.med - 1.2) < 1e-12);
    double d[] = {3.0, 1.5, 2.0};   /* in cache: no ceiling to pass, nothing left out */
    s = bench_share_of(d, 3, true);
    assert_int_equal(s.n_above, 0);
    assert_false(s.none);
    assert_true(fabs(s.med - 2.0) < 1e-12 && fabs(s.lo - 1.5) < 1e-12 && fabs(s.hi - 3.0) < 1e-12);
    double e[] = {1.0, 0.95, 1.0};   /* exactly the ceiling counts */
    s = bench_share_of(e, 3, false);
    assert_int_equal(s.n_above, 0);
    assert_true(fabs(s.med - 1.0) < 1e-12);
}

/* bench --busy-cpu N: the competitor is named in the JSON of every row; a CPU outside the range
 * is a usage error, one this process may not run on (offline, or outside its affinity mask) a
 * runtime error naming it. */
static void test_bench_busy_cpu(void **state) {
    (void)state;
    char model[1024], args[2048];
    fx_require(model, sizeof model, STORIES);
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    int cpu = 0, off = -1;
    while (!CPU_ISSET(cpu, &set)) cpu++;
    for (int c = 0; c < 1024 && off < 0; c++)
        if (!CPU_ISSET(c, &set)) off = c;
    snprintf(args, sizeof args, "bench -m '%s' -p 0 -n 4 -r 1 -t 1 --json --busy-cpu %d", model, cpu);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "%s", args);
    char want[64];
    snprintf(want, sizeof want, "\"busy_cpu\": %d,", cpu);
    if (rc != 0 || !strstr(out, want)) fail_msg("tern %s: exit %d, stdout: %s, stderr: %s", args, rc, out, err);
    free(out);
    free(err);
    rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -r 1 -t 1 --busy-cpu 1024", model);
    if (rc != 2 || !strstr(err, "--busy-cpu")) fail_msg("--busy-cpu 1024: exit %d, stderr: %s", rc, err);
    free(out);
    free(err);
    if (off >= 0) {
        rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -r 1 -t 1 --busy-cpu %d", model, off);
        snprintf(want, sizeof want, "--busy-cpu %d: cannot start", off);
        if (rc != 1 || !strstr(err, want)) fail_msg("--busy-cpu %d: exit %d, stderr: %s", off, rc, err);
        free(out);
        free(err);
    }
    /* a CPU that exists but is outside the mask bench inherits (taskset -c CPU) competes with
     * nothing of it: refused the same way */
    int other = cpu + 1;
    while (other < 1024 && !CPU_ISSET(other, &set)) other++;
    if (other < 1024) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
        rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -r 1 -t 1 --busy-cpu %d", model, other);
        assert_int_equal(sched_setaffinity(0, sizeof set, &set), 0);
        snprintf(want, sizeof want, "--busy-cpu %d: cannot start", other);
        if (rc != 1 || !strstr(err, want)) fail_msg("--busy-cpu %d outside the mask: exit %d, stderr: %s", other, rc, err);
        free(out);
        free(err);
    }
}

/* bench -np N: each tg test runs again as N sequences in lockstep, a row "tgL xN" per count with
 * n_parallel N; its ceiling counts the K/V rows of every sequence (N times the one-sequence row's,
 * the weights once); the aggregate t/s is a positive finite number; -np wider than the test's
 * length still runs (the context and the pass hold every sequence). */
static void test_bench_parallel(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -np 1,3,8 -r 1 -t 1 --json", model);
    if (rc != 0) fail_msg("bench -np 1,3,8: exit %d, stderr: %s", rc, err);
    const int want_np[3] = {1, 3, 8};
    const char *want_test[3] = {"tg4", "tg4 x3", "tg4 x8"};
    double kv[3] = {0}, bytes[3] = {0}, tps[3] = {0};
    int n = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *row = cJSON_Parse(line);
        if (!row) fail_msg("bench -np: a line that is not JSON: %s", line);
        const cJSON *np = cJSON_GetObjectItem(row, "n_parallel"), *test = cJSON_GetObjectItem(row, "test");
        if (n >= 3 || !cJSON_IsNumber(np) || np->valueint != want_np[n] || !cJSON_IsString(test) ||
            strcmp(test->valuestring, want_test[n]) != 0)
            fail_msg("bench -np 1,3,8: row %d: expected test '%s' with n_parallel %d, got: %s", n + 1, n < 3 ? want_test[n] : "none",
                     n < 3 ? want_np[n] : 0, line);
        kv[n] = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "kv_bytes_per_token"));
        bytes[n] = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "bytes_per_token"));
        tps[n] = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "t_s"));
        cJSON_Delete(row);
        n++;
    }
    if (n != 3) fail_msg("bench -np 1,3,8: expected 3 rows, got %d", n);
    /* a pass reads the weights once and every sequence's K/V rows */
    if (!(kv[0] > 0) || kv[1] != 3 * kv[0] || kv[2] != 8 * kv[0] || bytes[1] - bytes[0] != 2 * kv[0])
        fail_msg("bench -np: expected the K/V bytes of 1, 3 and 8 sequences and the weights once, got kv %.0f / %.0f / %.0f, "
                 "bytes %.0f / %.0f", kv[0], kv[1], kv[2], bytes[0], bytes[1]);
    for (int k = 0; k < 3; k++)
        if (!(tps[k] > 0) || !isfinite(tps[k])) fail_msg("bench -np: row %d: t/s %f", k + 1, tps[k]);
    free(out);
    free(err);
}

/* bench --interleave loads the model once per thread count and runs each test's repeats on all of
 * them in turn, so its rows come test by test (each test at every count, in -t's order); without
 * it, count by count (every test at one count, then the next). Each row carries its own count,
 * and the two counts' rows of one test have the same bytes per token. The copies for the other
 * counts are checked against the memory available before they load: with room for one more copy
 * of the weights but not two, -t 1,2 runs and -t 1,2,3 is refused naming --interleave. */
static void test_bench_interleave(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    static const struct { const char *flag; const char *test[4]; int threads[4]; } cases[] = {
        {"--interleave", {"pp4", "pp4", "tg4", "tg4"}, {2, 1, 2, 1}},
        {"", {"pp4", "tg4", "pp4", "tg4"}, {2, 2, 1, 1}},
    };
    double weights = 0;   /* the model's in-memory weight bytes (size_bytes) */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *out = NULL, *err = NULL;
        const int rc = ru_tern(&out, &err, "bench -m '%s' -p 4 -n 4 -r 2 -t 2,1 --json %s", model, cases[c].flag);
        if (rc != 0) fail_msg("bench -t 2,1 %s: exit %d, stderr: %s", cases[c].flag, rc, err);
        double bytes[4] = {0};
        int n = 0;
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
            cJSON *row = cJSON_Parse(line);
            if (!row) fail_msg("bench %s: a line that is not JSON: %s", cases[c].flag, line);
            const cJSON *th = cJSON_GetObjectItem(row, "threads"), *test = cJSON_GetObjectItem(row, "test");
            if (n >= 4 || !cJSON_IsNumber(th) || th->valueint != cases[c].threads[n] || !cJSON_IsString(test) ||
                strcmp(test->valuestring, cases[c].test[n]) != 0)
                fail_msg("bench -t 2,1 %s: row %d: expected test '%s' at %d threads, got: %s", cases[c].flag, n + 1,
                         n < 4 ? cases[c].test[n] : "none", n < 4 ? cases[c].threads[n] : 0, line);
            const double tps = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "t_s"));
            if (!(tps > 0) || !isfinite(tps)) fail_msg("bench %s: row %d: t/s %f", cases[c].flag, n + 1, tps);
            bytes[n] = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "bytes_per_token"));
            weights = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "size_bytes"));
            cJSON_Delete(row);
            n++;
        }
        if (n != 4) fail_msg("bench -t 2,1 %s: expected 4 rows, got %d", cases[c].flag, n);
        const int tg0 = c == 0 ? 2 : 1, tg1 = 3;   /* the two tg4 rows */
        if (!(bytes[tg0] > 0) || bytes[tg0] != bytes[tg1])
            fail_msg("bench %s: the tg4 rows read %.0f and %.0f bytes per token; expected the same", cases[c].flag,
                     bytes[tg0], bytes[tg1]);
        free(out);
        free(err);
    }
    struct stat st;
    if (stat(model, &st) != 0 || !(weights > 0)) fail_msg("bench: %s: no size (stat), or no size_bytes in the rows", model);
    /* the file's bytes (the load's own, which the figure is taken less) and 1.5 copies of the weights */
    char mem[32];
    snprintf(mem, sizeof mem, "%.0f", (double)st.st_size + 1.5 * weights);
    setenv("TERN_MEM_AVAILABLE", mem, 1);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -r 1 -t 1,2 --json --interleave", model);
    if (rc != 0) fail_msg("TERN_MEM_AVAILABLE=%s bench -t 1,2 --interleave: exit %d, stderr: %s", mem, rc, err);
    free(out);
    free(err);
    rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -r 1 -t 1,2,3 --json --interleave", model);
    unsetenv("TERN_MEM_AVAILABLE");
    if (rc != 1 || !strstr(err, "tern bench: --interleave: 2 more copies of the model for -t's other counts need ") ||
        !strstr(err, " bytes are available with the first loaded; ") || *out)
        fail_msg("TERN_MEM_AVAILABLE=%s bench -t 1,2,3 --interleave: exit %d (expected 1 and no rows), stdout: %s, stderr: %s",
                 mem, rc, out, err);
    free(out);
    free(err);
}

/* perplexity prints llama-perplexity's `+/- error`: `PPL = x +/- se`,
 * se = PPL * sqrt(var(nll) / (n - 1)) (the delta method over the n scored negative
 * log-likelihoods). Checked on two predictions, whose nlls come from separate runs (causal: the
 * ids 1 403 give nll1 = ln PPL(1 403), and nll2 = 2 ln PPL(1 403 407) - nll1), so
 * se = PPL * |nll1 - nll2| / 2; a single prediction prints no +/-. */
static void test_perplexity_stderr_estimate(void **state) {
    (void)state;
    char model[1024], ids[512], args[2048];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(ids, sizeof ids, "se-ids.txt");
    double ppl[2] = {0, 0}, se = 0;
    for (int k = 0; k < 2; k++) {
        write_file(ids, k ? "1 403 407\n" : "1 403\n", k ? 10 : 6);
        char *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "perplexity -m '%s' --tokens '%s' -t 1", model, ids);
        const int rc = ru_tern(&out, &err, "%s", args);
        ppl[k] = num_after(out, "PPL = ");
        if (k) se = num_after(out, " +/- ");
        if (rc != 0 || !(ppl[k] > 1) || (k == 0) != (strstr(out, "+/-") == NULL))
            fail_msg("tern %s: exit %d, stdout: %s, stderr: %s", args, rc, out, err);
        free(out);
        free(err);
    }
    const double nll1 = log(ppl[0]), nll2 = 2 * log(ppl[1]) - nll1, want = ppl[1] * fabs(nll1 - nll2) / 2;
    if (!(fabs(se - want) <= 1e-5 * want + 2e-6))
        fail_msg("PPL %.6f +/- %.6f, expected +/- %.6f (nll %.6f, %.6f)", ppl[1], se, want, nll1, nll2);
    remove(ids);
}

/* perplexity past the model's trained context (stories260K: 2048) warns, as run does:
 * -f with -c 2100 and --tokens with 2100 ids warn once on stderr (and still print PPL); -c 256
 * does not. */
static void test_perplexity_past_trained_context(void **state) {
    (void)state;
    char model[1024], sample[1024], text[512], ids[512], args[2048];
    fx_require(model, sizeof model, STORIES);
    fx_require(sample, sizeof sample, "data/tinystories-sample/tinystories_sample.txt");
    fx_tmp_path(text, sizeof text, "ctx-text.txt");
    fx_tmp_path(ids, sizeof ids, "ctx-ids.txt");
    size_t len = 0;
    char *t = fx_read_file(sample, &len);
    assert_non_null(t);
    FILE *f = fopen(text, "wb");
    assert_non_null(f);
    for (int i = 0; i < 3; i++) assert_int_equal(fwrite(t, 1, len, f), len);   /* ~5600 tokens */
    assert_int_equal(fclose(f), 0);
    free(t);
    f = fopen(ids, "wb");
    assert_non_null(f);
    for (int i = 0; i < 2100; i++) fprintf(f, "%d ", i % 2 ? 403 : 5);
    assert_int_equal(fclose(f), 0);
    const struct { const char *fmt, *path, *want; } c[] = {
        {"perplexity -m '%s' -f '%s' -c 2100 --chunks 1 -t 2",  text,
         "tern perplexity: warning: -c 2100 is longer than the model's trained context (2048 tokens)"},
        {"perplexity -m '%s' --tokens '%s' -t 2", ids,
         "tern perplexity: warning: the 2100 ids (one sequence) are longer than the model's trained context (2048 tokens)"},
        {"perplexity -m '%s' -f '%s' -c 256 --chunks 1 -t 1", text, NULL},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        snprintf(args, sizeof args, c[i].fmt, model, c[i].path);
        char *out = NULL, *err = NULL;
        const int rc = ru_tern(&out, &err, "%s", args);
        const char *w = c[i].want ? strstr(err, c[i].want) : NULL;
        if (rc != 0 || !strstr(out, "PPL = ") || (c[i].want ? !w || strstr(w + strlen(c[i].want), "warning") : strstr(err, "warning") != NULL))
            fail_msg("tern %s: exit %d, stdout: %s, stderr: %s(expected %s)", args, rc, out, err, c[i].want ? c[i].want : "no warning");
        free(out);
        free(err);
    }
    remove(text);
    remove(ids);
}

/* An empty prompt file (-f) is more likely a mistake than a wish to start from BOS: run warns,
 * naming the file, and still generates (exit 0); a non-empty file gets no such warning. With a
 * model that has no BOS token (qwen3-tiny) there is nothing to start from: one error naming the
 * file (or -p), and no warning promising a start from BOS before it. */
static void test_empty_prompt_file(void **state) {
    (void)state;
    char model[1024], path[512], args[2048], want[1024], nobos[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(path, sizeof path, "empty-prompt.txt");
    write_file(path, "", 0);
    snprintf(args, sizeof args, "run -m '%s' -f '%s' -n 2 --temp 0 -t 1", model, path);
    snprintf(want, sizeof want, "tern run: warning: the prompt file '%s' (-f) is empty", path);
    expect_err(0, want, NULL, args);
    write_file(path, "\n", 1);                        /* a newline only: -f drops it, so the same */
    snprintf(want, sizeof want, "tern run: warning: the prompt file '%s' (-f) is empty (a newline only, which -f drops)", path);
    expect_err(0, want, NULL, args);
    write_file(path, "Once", 4);
    expect_err(0, "generation: ", "is empty", args);
    fx_tmp_path(nobos, sizeof nobos, "empty-prompt-nobos.gguf");
    snprintf(args, sizeof args, "synth --arch qwen3-tiny -o '%s'", nobos);
    expect_err(0, "tern synth: wrote", NULL, args);
    write_file(path, "", 0);
    snprintf(args, sizeof args, "run -m '%s' -f '%s' -n 2 --temp 0 -t 1 --no-progress", nobos, path);
    snprintf(want, sizeof want, "tern run: the prompt file '%s' (-f) is empty and the model has no BOS token to start "
             "from: give a prompt", path);
    expect_err(1, want, "BOS alone", args);
    snprintf(args, sizeof args, "run -m '%s' -p '' -n 2 --temp 0 -t 1 --no-progress", nobos);
    expect_err(1, "tern run: the prompt (-p) is empty and the model has no BOS token to start from: give a prompt",
               NULL, args);
    remove(nobos);
    remove(path);
}

/* run -f drops one trailing newline, as llama.cpp's -f (an editor ends a saved file with one):
 * the greedy text of a file holding "Once upon a time\n" is that of -p "Once upon a time" (with
 * the newline kept, stories260K continues differently). A NUL byte in the prompt is tokenised as
 * the byte, with a warning naming its offset. */
static void test_prompt_file_newline_and_nul(void **state) {
    (void)state;
    char model[1024], path[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(path, sizeof path, "newline-prompt.txt");
    write_file(path, "Once upon a time\n", 17);
    char *out_f = NULL, *err_f = NULL, *out_p = NULL, *err_p = NULL;
    int rc = ru_tern(&out_f, &err_f, "run -m '%s' -f '%s' -n 12 --temp 0 -t 1", model, path);
    const int rc_p = ru_tern(&out_p, &err_p, "run -m '%s' -p 'Once upon a time' -n 12 --temp 0 -t 1", model);
    if (rc != 0 || rc_p != 0 || strcmp(out_f, out_p) != 0)
        fail_msg("-f with a final newline: exit %d, '%s'; -p without: exit %d, '%s'", rc, out_f, rc_p, out_p);
    free(out_f);
    free(err_f);
    free(out_p);
    free(err_p);
    write_file(path, "Once\0upon", 9);
    char args[2048], want[1024];
    snprintf(args, sizeof args, "run -m '%s' -f '%s' -n 2 --temp 0 -t 1", model, path);
    snprintf(want, sizeof want, "tern run: warning: the prompt file '%s' (-f) has a NUL byte at offset 4 of 9", path);
    expect_err(0, want, NULL, args);
    remove(path);
}

/* chat -sys "" is no system prompt (llama.cpp's -sys ""): the first turn's prompt is the one
 * without -sys, token for token; a non-empty one adds its turn. Lines of only blanks before the
 * message are no messages: "Hi" is turn 1, and there is no turn 2. */
static void test_chat_empty_system(void **state) {
    (void)state;
    char model[1024], input[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(input, sizeof input, "chat-sys.txt");
    write_file(input, "   \n\t \nHi\n", 9);
    const char *sys[3] = {"", " -sys ''", " -sys 'Be brief.'"};
    int n[3];
    for (int i = 0; i < 3; i++) {
        char *out = NULL, *err = NULL;
        const int rc = ru_tern(&out, &err, "chat -m '%s' -n 1 --temp 0 -t 1%s < '%s'", model, sys[i], input);
        const char *t = strstr(err, "[turn 1: ");
        if (rc != 0 || !t || sscanf(t, "[turn 1: %d new prompt tokens", &n[i]) != 1 || strstr(err, "[turn 2: "))
            fail_msg("chat%s: exit %d, %s", sys[i], rc, err);
        free(out);
        free(err);
    }
    assert_int_equal(n[1], n[0]);
    assert_true(n[2] > n[0]);
    remove(input);
}

/* bench does not hold a model read from cache to the DRAM decode ceiling (stories260K, 1 MB of
 * weights, would show some 300% of it): a model whose bytes per token fit in the last-level
 * cache (any cache >= 2 MB, or 32 MB if unknown) has "cache_resident": true in the JSON and the
 * note beside its tg figure in the table; pp rows have none. */
/* A test that reaches past the model's trained context (stories260K: 2048 tokens, its GGUF's
 * llama.context_length) is timed with a warning, as run -c past it is; up to it, no warning. */
static void test_bench_past_trained_ctx(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -d 2048 -r 1 -t 1", model);
    if (rc != 0 || !strstr(err, "tern bench: warning: the longest test reaches position 2052 (-d + its length), past the "
                                "model's trained context (2048 tokens)") || !strstr(out, "| tg4 @ d2048 |"))
        fail_msg("bench -d 2048: exit %d, stdout: %s, stderr: %s", rc, out, err);
    free(out);
    free(err);
    rc = ru_tern(&out, &err, "bench -m '%s' -p 0 -n 4 -d 2044 -r 1 -t 1", model);
    if (rc != 0 || strstr(err, "warning"))
        fail_msg("bench -d 2044 (ends at the trained context): exit %d, stderr: %s", rc, err);
    free(out);
    free(err);
}

/* A GGUF with a valid header and nothing else: the model loader names the file beside the missing
 * key, quantize says the file has no tensors (not that none needed converting), and perplexity
 * with --tokens says --chunks does nothing there. */
static void test_empty_gguf_messages(void **state) {
    (void)state;
    char path[512], out[512], ids[512], args[2048], want[1400];
    fx_tmp_path(path, sizeof path, "header-only.gguf");
    fx_tmp_path(out, sizeof out, "header-only-q8.gguf");
    fx_tmp_path(ids, sizeof ids, "two-ids.txt");
    static const unsigned char hdr[24] = {'G', 'G', 'U', 'F', 3};   /* v3, 0 tensors, 0 keys */
    write_file(path, (const char *)hdr, sizeof hdr);
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 2", path);
    snprintf(want, sizeof want, "tern run: %s: missing key 'general.architecture'", path);
    expect_err(1, want, NULL, args);
    snprintf(args, sizeof args, "quantize '%s' '%s' --type q8_0", path, out);
    expect_err(1, "tern quantize: IN has no tensors (a vocabulary-only GGUF?), nothing to convert to Q8_0 (OUT '", NULL, args);
    assert_int_equal(access(out, F_OK), -1);
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    write_file(ids, "1 403", 5);
    snprintf(args, sizeof args, "perplexity -m '%s' --tokens '%s' --chunks 2", model, ids);
    expect_err(0, "tern perplexity: warning: --chunks has no effect with --tokens", NULL, args);
    remove(path);
    remove(ids);
}

/* bench writes the model's file name into its output as data: in a JSON line '"' and '\\' are
 * escaped and bytes that are not UTF-8 become U+FFFD (the line parses, and gives the name back);
 * in the markdown table a '|' is escaped so the row keeps its cells. */
static void test_bench_name_escaped(void **state) {
    (void)state;
    char model[1024], dir[512], link[1024], args[2048];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(dir, sizeof dir, "bench-names");
    mkdir(dir, 0755);
    snprintf(link, sizeof link, "%s/q\"uo\\te|\xff.gguf", dir);
    unlink(link);
    char target[4096];   /* absolute: a relative one would resolve from the link's folder */
    if (!realpath(model, target)) fail_msg("realpath %s: %s", model, strerror(errno));
    if (symlink(target, link) != 0) fail_msg("symlink %s: %s", link, strerror(errno));
    snprintf(args, sizeof args, "bench -m '%s' -p 4 -n 0 -r 1 -t 1 --json", link);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "%s", args);
    cJSON *j = rc == 0 && out ? cJSON_Parse(out) : NULL;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (!cJSON_IsString(name) || strcmp(name->valuestring, "q\"uo\\te|\xef\xbf\xbd.gguf") != 0)
        fail_msg("tern %s: exit %d, stdout: %s, stderr: %s (expected one JSON object with model "
                 "\"q\\\"uo\\\\te|\\ufffd.gguf\")", args, rc, out, err);
    cJSON_Delete(j);
    free(out);
    free(err);
    snprintf(args, sizeof args, "bench -m '%s' -p 4 -n 0 -r 1 -t 1", link);
    rc = ru_tern(&out, &err, "%s", args);
    if (rc != 0 || !strstr(out, "| q\"uo\\te\\|\xef\xbf\xbd.gguf | "))
        fail_msg("tern %s: exit %d, stdout: %s (expected the row to begin with the name, '|' escaped)", args, rc, out);
    free(out);
    free(err);
    unlink(link);
    rmdir(dir);
}

/* -o json is llama-bench's: one JSON array of every row (a pp and a tg row here), with --profile's
 * lines on stderr so stdout stays one JSON document; -o jsonl keeps a row per line. */
static void test_bench_json_array(void **state) {
    (void)state;
    char model[1024], args[2048];
    fx_require(model, sizeof model, STORIES);
    snprintf(args, sizeof args, "bench -m '%s' -p 4 -n 4 -r 1 -t 1 -o json --profile", model);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "%s", args);
    cJSON *j = rc == 0 && out ? cJSON_ParseWithOpts(out, NULL, true) : NULL;
    const cJSON *t0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(j, 0), "test");
    const cJSON *t1 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(j, 1), "test");
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 2 || !cJSON_IsString(t0) || strcmp(t0->valuestring, "pp4") ||
        !cJSON_IsString(t1) || strcmp(t1->valuestring, "tg4") || !strstr(err, "# profile tg4 t=1:"))
        fail_msg("tern %s: exit %d, stdout: %s, stderr: %s (expected a JSON array of the pp4 and tg4 rows, the "
                 "profile on stderr)", args, rc, out, err);
    cJSON_Delete(j);
    free(out);
    free(err);
    snprintf(args, sizeof args, "bench -m '%s' -p 4 -n 4 -r 1 -t 1 -o jsonl", model);
    rc = ru_tern(&out, &err, "%s", args);
    const char *nl = out ? strchr(out, '\n') : NULL;
    if (rc != 0 || out[0] != '{' || !nl || nl[1] != '{')
        fail_msg("tern %s: exit %d, stdout: %s (expected one JSON object per line)", args, rc, out);
    free(out);
    free(err);
}

/* A test that evaluates 4096 or more tokens per run (its length and depth) is announced on stderr
 * before it starts, with its runs and tokens, so a long one does not look hung; a shorter one is not.
 * Both sides of the bound in one command: tg1 @ d4094 (4095 tokens) runs whole without a notice,
 * then tg2 @ d4094 (4096) is announced, and the process is stopped there (its runs would only
 * repeat the first test's work). */
static void test_bench_long_test_note(void **state) {
    (void)state;
    char model[1024], args[1400];
    fx_require(model, sizeof model, STORIES);
    snprintf(args, sizeof args, "-m '%s' -p 0 -n 1,2 -d 4094 -r 1 -t 1", model);
    const char *note = "tern bench: tg2 @ d4094 at 1 thread: 2 runs (a warm-up and -r 1), each evaluating 2 tokens "
                       "after the 4094 of the depth (not timed); this can take a while\n";
    int st = 0;
    char *err = ru_tern_until("bench", args, note, SIGTERM, &st);
    const char *at = strstr(err, note);
    /* the notice is the first thing said about a test: nothing of it before (tg1's would be) */
    const char *first = strstr(err, "this can take a while");
    if (!at || first != at + strlen(note) - strlen("this can take a while\n") || st != 128 + SIGTERM)
        fail_msg("bench %s: status %d (expected the notice of tg2 @ d4094 alone, then 128 + SIGTERM), stderr: %s", args, st,
                 err);
    free(err);
}

static void test_bench_cache_resident(void **state) {
    (void)state;
    char model[1024], args[2048];
    fx_require(model, sizeof model, STORIES);
    snprintf(args, sizeof args, "bench -m '%s' -p 4 -n 4 -r 1 -t 1 --json", model);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "%s", args);
    const char *tg = strstr(out, "\"test\": \"tg4\"");
    if (rc != 0 || !tg || !strstr(tg, "\"cache_resident\": true, \"frac_of_ceiling\": null}"))   /* the tg row too, as the table's "-" */
        fail_msg("tern %s: exit %d, stdout: %s, stderr: %s", args, rc, out, err);
    /* the K/V a tg4 step reads on average from an empty context: positions 1..4, mean 2.5, of
     * 5 layers x 4 kv heads x (8 + 8) head dims x 2 bytes (stories260K's hparams: n_embd 64 over
     * 8 heads) = 640 bytes per position */
    if (!strstr(tg, "\"kv_bytes_per_token\": 1600,"))
        fail_msg("tern %s: expected \"kv_bytes_per_token\": 1600 in the tg4 row, got %s", args, tg);
    free(out);
    free(err);
    /* -d 8: the same test after 8 tokens already in the context: named as llama-bench names it,
     * and its K/V per token is 8 + 2.5 positions' worth (6720 bytes) */
    snprintf(args, sizeof args, "bench -m '%s' -p 0 -n 4 -d 0,8 -r 1 -t 1 --json", model);
    rc = ru_tern(&out, &err, "%s", args);
    const char *d8 = strstr(out, "\"test\": \"tg4 @ d8\", \"n_depth\": 8,");
    if (rc != 0 || !strstr(out, "\"test\": \"tg4\", \"n_depth\": 0,") || !d8 || !strstr(d8, "\"kv_bytes_per_token\": 6720,"))
        fail_msg("tern %s: exit %d, stdout: %s, stderr: %s", args, rc, out, err);
    free(out);
    free(err);
    snprintf(args, sizeof args, "bench -m '%s' -p 4 -n 4 -r 1 -t 1", model);
    rc = ru_tern(&out, &err, "%s", args);
    const char *note = "| - (fits in cache: not bound by DRAM) |";
    const char *row = strstr(out, "| tg4 |"), *pp = strstr(out, "| pp4 |");
    if (rc != 0 || !row || !pp || !strstr(row, note) || strstr(pp, note) < row)
        fail_msg("tern %s: exit %d, stdout: %s, stderr: %s", args, rc, out, err);
    /* the cache size is the kernel's (sysfs index3), not glibc's CPUID figure (which can say
     * 256 MB for a 32 MB L3); read here independently when the host has the file */
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    unsigned long long kb = 0;
    char unit = 0;
    if (f && fscanf(f, "%lluK%c", &kb, &unit) >= 1 && kb > 0) {
        char want[64];
        snprintf(want, sizeof want, "last-level cache (%.1f MB here)", (double)kb * 1024.0 / 1e6);   /* decimal MB, as the size column */
        if (!strstr(out, want)) fail_msg("tern %s: stdout: %s(expected \"%s\": sysfs says %lluK)", args, out, want, kb);
    }
    if (f) fclose(f);
    free(out);
    free(err);
}

/* `tern info -m FILE` (llama.cpp's habit) gives the same output as `tern info FILE`; two files
 * (one each way) are a usage error. synth --n-vocab below the built-in vocabulary (285) is the
 * parser's usage error with the real range, not a failure at write time. */
static void test_info_m_and_vocab_minimum(void **state) {
    (void)state;
    char model[1024], args[4096];
    fx_require(model, sizeof model, STORIES);
    char *a = NULL, *b = NULL;
    assert_int_equal(ru_tern(&a, NULL, "info '%s' --no-tensors", model), 0);
    assert_int_equal(ru_tern(&b, NULL, "info -m '%s' --no-tensors", model), 0);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "stories260K.gguf"));
    free(a);
    free(b);
    snprintf(args, sizeof args, "info -m '%s' '%s'", model, model);
    expect_err(2, "tern info: unexpected argument", NULL, args);
    expect_err(2, "tern synth: --n-vocab: expected an integer in 285..1048576, got '284'", NULL,
               "synth --arch qwen3-tiny --n-vocab 284 --no-weights -o /nonexistent/x.gguf");
}

/* chat with a first message that does not fit -c says the context is too small and the -c it needs
 * (not "Type /clear", which cannot help on an empty conversation); that -c (checked by running with
 * it) holds the message and a one-token reply without any context message. */
static void test_chat_context_too_small(void **state) {
    (void)state;
    char model[1024], in[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(in, sizeof in, "chat-in.txt");
    const char *msg = "Tell me a story about a little dog who finds a red ball in the park\n";
    write_file(in, msg, strlen(msg));
    char *err = NULL;
    int rc = ru_tern(NULL, &err, "chat -m '%s' -c 10 -n 1 --temp 0 -t 1 <'%s'", model, in);
    const char *p = strstr(err, "[this message is too long for the context (-c 10): it needs ");
    int need = p ? atoi(p + strlen("[this message is too long for the context (-c 10): it needs ")) : 0;
    char want[256];
    snprintf(want, sizeof want, "start tern chat with -c %d or more, or send a shorter message.]", need);
    if (rc != 1 || !p || need <= 10 || !strstr(err, want) || strstr(err, "Type /clear") ||
        !strstr(err, "tern chat: 1 of 1 message got no reply"))
        fail_msg("chat -c 10: exit %d, stderr: %s", rc, err);
    free(err);
    err = NULL;
    rc = ru_tern(NULL, &err, "chat -m '%s' -c %d -n 1 --temp 0 -t 1 <'%s'", model, need, in);
    if (rc != 0 || strstr(err, "too small") || strstr(err, "context full") || !strstr(err, "[turn 1: "))
        fail_msg("chat -c %d: exit %d, stderr: %s", need, rc, err);
    free(err);
    /* the note on how a reply ended ("[context full: ...]") goes to stderr, never to stdout among
     * the replies (3 more positions than needed, 20 tokens asked for) */
    char *out = NULL;
    err = NULL;
    rc = ru_tern(&out, &err, "chat -m '%s' -c %d -n 20 --temp 0 -t 1 <'%s'", model, need + 3, in);
    if (rc != 0 || strstr(out, "[context full") || !strstr(err, "[context full: type /clear to start a new conversation]"))
        fail_msg("chat -c %d -n 20: exit %d, stdout: %s, stderr: %s(expected the context-full note on stderr only)", need + 3,
                 rc, out, err);
    free(out);
    free(err);
    /* a message that needs more than the model's trained context (stories260K: 2048 tokens) gets
     * the -c it needs and the note that text past 2048 may degrade */
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    for (int i = 0; i < 100; i++) fputs("the little dog ran to the park and found a red ball. ", f);
    fputs("\n", f);
    fclose(f);
    err = NULL;
    rc = ru_tern(NULL, &err, "chat -m '%s' -c 10 -n 1 --temp 0 -t 1 <'%s'", model, in);
    p = strstr(err, "[this message is too long for the context (-c 10): it needs ");
    need = p ? atoi(p + strlen("[this message is too long for the context (-c 10): it needs ")) : 0;
    snprintf(want, sizeof want, "start tern chat with -c %d or more (past the model's trained context of 2048 tokens, "
             "where text may degrade), or send a shorter message.]", need);
    if (rc != 1 || need <= 2048 || !strstr(err, want)) fail_msg("chat -c 10, a %d-token message: exit %d, stderr: %s", need, rc, err);
    free(err);
    remove(in);
}

/* perplexity -f with a file that cannot be read says so before loading the model: with a model
 * path that does not exist either, the error is the text's. */
static void test_perplexity_text_before_model(void **state) {
    (void)state;
    expect_err(1, "tern perplexity: -f: cannot open '/nonexistent/ppl.txt'", "/nonexistent/m.gguf",
               "perplexity -m /nonexistent/m.gguf -f /nonexistent/ppl.txt");
}

/* perplexity -f /dev/null says "empty" with the count (never "the text is 1 tokens"); a short
 * text "too short" with its count; -c 1 with -f states the real minimum (4), with --tokens 2. */
static void test_perplexity_short_wording(void **state) {
    (void)state;
    char model[1024], args[2048], want[1200];
    fx_require(model, sizeof model, STORIES);
    snprintf(args, sizeof args, "perplexity -m '%s' -f /dev/null -c 16", model);
    expect_err(1, "tern perplexity: -f /dev/null: the text is empty (1 token: the BOS only), expected at least 16 (one chunk "
                  "of -c 16; a smaller -c, at least 4, scores a shorter text)", "1 tokens", args);
    snprintf(want, sizeof want, "-c: expected an integer in 4..16777216, got '1'");
    expect_err(2, want, NULL, "perplexity -m x.gguf -c 1 -f y.txt");
    expect_err(2, want, NULL, "perplexity -m x.gguf --file=y.txt -c 1");
    expect_err(2, "-c: expected an integer in 2..16777216, got '1'", NULL, "perplexity -m x.gguf -c 1 --tokens y.txt");
}

int suite_cli_input(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_options_every_command),
        cmocka_unit_test(test_bench_nothing_to_measure),
        cmocka_unit_test(test_perplexity_stdout_and_utf8),
        cmocka_unit_test(test_no_chat_template_notice),
        cmocka_unit_test(test_bad_input_messages),
        cmocka_unit_test(test_run_n0_prints_nothing),
        cmocka_unit_test(test_failed_write_keeps_existing_output),
        cmocka_unit_test(test_quantize_same_file),
        cmocka_unit_test(test_failed_write_keeps_old_output),
        cmocka_unit_test(test_out_temp_beside),
        cmocka_unit_test(test_signal_removes_temp),
        cmocka_unit_test(test_stdout_write_error),
        cmocka_unit_test(test_empty_api_key_and_vocab_limit),
        cmocka_unit_test(test_api_key_unmatchable),
        cmocka_unit_test(test_nonfinite_logits),
        cmocka_unit_test(test_damaged_model_refused),
        cmocka_unit_test(test_chat_context_too_small),
        cmocka_unit_test(test_perplexity_stderr_estimate),
        cmocka_unit_test(test_perplexity_past_trained_context),
        cmocka_unit_test(test_empty_gguf_messages),
        cmocka_unit_test(test_bench_cache_resident),
        cmocka_unit_test(test_bench_name_escaped),
        cmocka_unit_test(test_bench_json_array),
        cmocka_unit_test(test_bench_long_test_note),
        cmocka_unit_test(test_bench_past_trained_ctx),
        cmocka_unit_test(test_empty_prompt_file),
        cmocka_unit_test(test_prompt_file_newline_and_nul),
        cmocka_unit_test(test_chat_empty_system),
        cmocka_unit_test(test_bench_busy_cpu),
        cmocka_unit_test(test_bench_parallel),
        cmocka_unit_test(test_bench_interleave),
        cmocka_unit_test(test_bench_share_rule),
        cmocka_unit_test(test_info_m_and_vocab_minimum),
        cmocka_unit_test(test_perplexity_short_wording),
        cmocka_unit_test(test_perplexity_text_before_model),
        cmocka_unit_test(test_closed_std_streams),
        cmocka_unit_test(test_long_path_errors),
    };
    TEST_RUN_SUITE("cli_input", tests);
}
