/* test_cli_input.c: usability and bad input of the tern commands (session 4): every command
 * (version included) refuses an unknown option as a usage error (exit 2, the command named);
 * `tern bench -p 0 -n 0` is refused instead of printing an empty table; perplexity keeps its
 * results on stdout in both modes (a "perplexity: ..." first line, `PPL = x` last) and words its
 * UTF-8 warning for what it does; chat and serve say once on stderr that a model without a chat
 * template gets ChatML. Runs the tern binary built beside the test runner. */
#include "test.h"
#include "model_fx.h"
#include "run_util.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * usage errors naming the command; `tern version` itself still prints the version. */
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
        snprintf(want, sizeof want, "tern: unknown option --bogus-option for `tern %s`; see tern %s --help", cmd, cmd);
        expect_err(2, want, NULL, args);
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    free(out);
    assert_true(version);
    assert_true(n >= 11);
    expect_err(2, "tern version: unexpected argument 'x'; see tern version --help", NULL, "version x");
    expect_err(2, "tern: unknown option --bogus for `tern version`", NULL, "--version --bogus");
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
 * `PPL = x`; stderr has neither. A text that is not UTF-8: the warning says it is tokenised byte
 * by byte and never that perplexity prints it (it does not); run --echo does show it. */
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
    write_file(ids, "1 403 407 261 107 300 100 42 17 88\n", 36);
    for (int mode = 0; mode < 2; mode++) {
        char *out = NULL, *err = NULL, line[256];
        const int rc = mode == 0 ? ru_tern(&out, &err, "perplexity -m '%s' -f '%s' -c 16 -t 1", model, text)
                                 : ru_tern(&out, &err, "perplexity -m '%s' --tokens '%s' -t 1", model, ids);
        if (rc != 0 || strncmp(out, "perplexity: ", 12) != 0 || !strstr(out, " tokens, ") ||
            strncmp(last_line(out, line, sizeof line), "PPL = ", 6) != 0 || !(atof(line + 6) > 1.0) ||
            strstr(err, "perplexity:") || strstr(err, "tokens,"))
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
    snprintf(want, sizeof want, "tern run: warning: %s is not valid UTF-8 (first bad byte 0xc3 at offset 3 of %d); it is "
             "tokenised byte by byte and shown with U+FFFD", bad, nb);
    expect_err(0, want, NULL, args);
    snprintf(args, sizeof args, "run -m '%s' -f '%s' -n 1 --temp 0 -t 1", model, bad);
    expect_err(0, "it is tokenised byte by byte (the model sees those exact bytes)", "U+FFFD", args);
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
        /* serve: SIGINT after 3 s stops it cleanly (exit 0); the notice comes before it listens */
        {"serve -m '%s' --port 0 -t 1 </dev/null", spm, "serve", true},
        {"serve -m '%s' --port 0 -t 1 --chat-template qwen3 </dev/null", spm, "serve", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], cmd[8192], want[512];
        snprintf(args, sizeof args, cases[i].args, cases[i].model);
        const bool serve = !strcmp(cases[i].cmd, "serve");
        snprintf(cmd, sizeof cmd, "%s'%s' %s 2>&1 >/dev/null", serve ? "timeout -s INT --preserve-status 3 " : "", bin, args);
        int rc = -1;
        char *err = ru_capture(cmd, &rc);
        snprintf(want, sizeof want, "tern %s: %s", cases[i].cmd, note);
        const char *hit = strstr(err, note);
        const bool once = hit && !strstr(hit + 1, note) && strstr(err, want);
        if (rc != 0 || (cases[i].warn ? !once : hit != NULL))
            fail_msg("%s: exit %d, stderr: %s(expected %s)", cmd, rc, err, cases[i].warn ? "the notice once" : "no notice");
        free(err);
    }
}

/* Values found wrong by feeding bad input to every command: bench-kernel --isa with an unknown
 * name ran every path (exit 0); perplexity --tokens echoed raw bytes that are not text (now
 * \xNN); a text shorter than one chunk names the file, its length and the -c needed; bench-spec's
 * prompt file names a line that is not JSON and says what it expects. */
static void test_bad_input_messages(void **state) {
    (void)state;
    expect_err(2, "tern bench-kernel: --isa: expected a comma-separated list of ref, avx2, avx512vnni, neon, dotprod, i8mm, "
                  "got 'avx2,bogus'", NULL, "bench-kernel --isa avx2,bogus");
    char model[1024], ids[512], text[512], args[2048], want[1200];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(ids, sizeof ids, "ppl-badbytes.txt");
    fx_tmp_path(text, sizeof text, "ppl-short.txt");
    write_file(ids, "12 ab\x01\xff 5\n", 10);
    snprintf(args, sizeof args, "perplexity -m '%s' --tokens '%s'", model, ids);
    expect_err(1, "token 1 at byte 3: expected an integer id in 0..2147483647, got 'ab\\x01\\xff'", NULL, args);
    write_file(text, "Once upon a time\n", 17);
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c 64", model, text);
    snprintf(want, sizeof want, "tern perplexity: -f %s: the text is 5 tokens, expected at least 64 (one chunk of -c 64; "
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
    write_file(jl, "{\"turns\": 5}\n\n", 14);
    snprintf(want, sizeof want, "tern bench-spec: no prompt in %s (2 lines: 0 not JSON, 1 without a string \"prompt\" or "
             "\"turns\"[0]); expected JSON lines with one of those fields", jl);
    expect_err(1, want, NULL, args);
    remove(jl);
    remove(ids);
    remove(text);
}

int suite_cli_input(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_options_every_command),
        cmocka_unit_test(test_bench_nothing_to_measure),
        cmocka_unit_test(test_perplexity_stdout_and_utf8),
        cmocka_unit_test(test_no_chat_template_notice),
        cmocka_unit_test(test_bad_input_messages),
    };
    TEST_RUN_SUITE("cli_input", tests);
}
