/* test_cli_checks.c: behaviour of the tern programs at their edges, each checked against a value
 * computed independently of tern: the shipped default model (models/stories260K.gguf) has the
 * sha256 models/PROVENANCE.md gives (sha256sum computes it) and generates the start of the greedy
 * sample published for it (shared/data/stories260k/expected_greedy_karpathy_doc.txt). Runs the
 * tern binary built beside the test runner, from the repository root (make test's directory). */
#include "test.h"
#include "run_util.h"
#include "tern.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHIPPED "models/stories260K.gguf"

/* The sha256 models/PROVENANCE.md gives for stories260K.gguf: the 64 hex digits in backquotes on
 * its "| sha256 |" row, into hex (65 bytes). */
static void provenance_sha256(char *hex) {
    char *doc = fx_read_file("models/PROVENANCE.md", NULL);
    if (!doc) fail_msg("cannot read models/PROVENANCE.md (run from the repository root)");
    const char *row = strstr(doc, "| sha256 | `");
    if (!row) fail_msg("models/PROVENANCE.md has no \"| sha256 | `...`\" row");
    row += strlen("| sha256 | `");
    size_t k = 0;
    while (k < 64 && strchr("0123456789abcdef", row[k]) && row[k]) k++;
    if (k != 64 || row[64] != '`') fail_msg("models/PROVENANCE.md: sha256 is not 64 hex digits: %.70s", row);
    memcpy(hex, row, 64);
    hex[64] = '\0';
    free(doc);
}

static void test_shipped_model_checksum(void **state) {
    (void)state;
    char want[65];
    provenance_sha256(want);
    int st = -1;
    char *out = ru_capture("sha256sum " SHIPPED, &st);
    if (st != 0 || strncmp(out, want, 64) != 0)
        fail_msg("sha256sum %s: exit %d, got '%.64s', models/PROVENANCE.md says %s", SHIPPED, st, out, want);
    free(out);
}

/* Greedy from BOS (no prompt), 16 tokens: the published sample's first 16 tokens. tern prints the
 * first piece with its SentencePiece space (llama2.c's run.c drops it), then a newline. */
static void test_shipped_model_golden(void **state) {
    (void)state;
    char tern[4096], gold_path[1024];
    ru_need_tern(tern, sizeof tern);
    fx_require(gold_path, sizeof gold_path, "data/stories260k/expected_greedy_karpathy_doc.txt");
    char *gold = fx_read_file(gold_path, NULL);
    assert_non_null(gold);
    char *out = NULL, *err = NULL;
    const int rc = ru_tern(&out, &err, "run -m " SHIPPED " --temp 0 -n 16 -t 1");
    if (rc != 0) fail_msg("tern run -m %s: exit %d: %s", SHIPPED, rc, err);
    /* 16 tokens of this vocabulary are "Once upon a time, there was a little girl named Lily. She" */
    const char *want16 = "Once upon a time, there was a little girl named Lily. She";
    if (strncmp(gold, want16, strlen(want16)) != 0) fail_msg("the golden file does not start with '%s'", want16);
    char want[256];
    snprintf(want, sizeof want, " %s\n", want16);
    if (strcmp(out, want) != 0) fail_msg("tern run: got '%s', expected '%s' (the golden's start)", out, want);
    free(gold);
    free(out);
    free(err);
}

/* A FIFO, a device or a directory as the model is refused before the loader opens it (opening a
 * FIFO would wait for a writer forever), naming the flag, the path and its type; exit 1 within the
 * timeout. */
static void test_model_not_regular(void **state) {
    (void)state;
    char tern[4096], fifo[512];
    ru_need_tern(tern, sizeof tern);
    fx_tmp_path(fifo, sizeof fifo, "model.fifo");
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *paths[3] = {fifo, "/dev/null", "."};
    const char *kinds[3] = {"a FIFO", "a character device", "a directory"};
    for (int i = 0; i < 3; i++) {
        char cmd[6000], want[1024];
        /* timeout 20 (exit 124): a loader blocking in open(2) on the FIFO fails, not hangs */
        snprintf(cmd, sizeof cmd, "timeout 20 '%s' run -m '%s' -n 1 2>&1 >/dev/null", tern, paths[i]);
        int rc = -1;
        char *err = ru_capture(cmd, &rc);
        /* the command's own input check names each with its flag */
        snprintf(want, sizeof want, "-m: '%s' is %s, expected a regular file", paths[i], kinds[i]);
        if (rc != 1 || !strstr(err, want)) fail_msg("tern run -m %s: exit %d (expected 1), stderr: %s; expected '%s'", paths[i], rc, err, want);
        free(err);
    }
    unlink(fifo);
}

/* "generation: N tokens" counts every generated token: -n N with --ignore-eos generates exactly N
 * (the option's definition); -n 1 has no decode step, so no rate is printed for it. */
static void test_run_token_count(void **state) {
    (void)state;
    char tern[4096];
    ru_need_tern(tern, sizeof tern);
    const int ns[3] = {1, 2, 7};
    for (int i = 0; i < 3; i++) {
        char *err = NULL, want[64];
        const int rc = ru_tern(NULL, &err, "run -m " SHIPPED " --temp 0 --ignore-eos -t 1 -n %d", ns[i]);
        snprintf(want, sizeof want, "generation: %d %s", ns[i], ns[i] == 1 ? "token" : "tokens");
        const char *g = strstr(err, want);
        if (rc != 0 || !g || (g[strlen(want)] != ' ' && g[strlen(want)] != '\n'))
            fail_msg("-n %d: exit %d, expected '%s' in stderr: %s", ns[i], rc, want, err);
        if (ns[i] == 1 && strstr(g, "0.00 tokens/s")) fail_msg("-n 1 prints a rate of 0: %s", err);
        if (ns[i] > 1 && !strstr(g, "tokens/s")) fail_msg("-n %d prints no rate: %s", ns[i], err);
        free(err);
    }
}

/* A context that fills before -n: "context full after G of -n N tokens (-c C; ...)", G the
 * tokens a context of C positions holds after the prompt's P (C - P evaluated, and the last one
 * sampled without an evaluation: C - P + 1), P from the library's tokenizer; with -n -1 there is
 * no -n to fall short of: "context full (C tokens, -c)". */
static void test_run_context_full(void **state) {
    (void)state;
    char tern[4096];
    ru_need_tern(tern, sizeof tern);
    tern_model *m = NULL;
    tern_err e = {0};
    assert_int_equal(tern_model_load(&m, SHIPPED, NULL, &e), TERN_OK);
    int32_t ids[16];
    int P = 0;
    assert_int_equal(tern_tokenize(m, "Once", 4, true, false, ids, 16, &P, &e), TERN_OK);
    tern_model_free(m);
    const int C = P + 3;
    char *err = NULL, want[128];
    int rc = ru_tern(NULL, &err, "run -m " SHIPPED " -p Once -c %d -n 10 --temp 0 --ignore-eos -t 1", C);
    snprintf(want, sizeof want, "tern run: context full after %d of -n 10 tokens (-c %d;", C - P + 1, C);
    if (rc != 0 || !strstr(err, want)) fail_msg("-c %d -n 10: exit %d, expected '%s' in stderr: %s", C, rc, want, err);
    free(err);
    rc = ru_tern(NULL, &err, "run -m " SHIPPED " -p Once -c %d -n -1 --temp 0 --ignore-eos -t 1", C);
    snprintf(want, sizeof want, "tern run: context full (%d tokens, -c)", C);
    if (rc != 0 || !strstr(err, want)) fail_msg("-c %d -n -1: exit %d, expected '%s' in stderr: %s", C, rc, want, err);
    free(err);
}

/* A streamed reply into a full device: "tern CMD: write error on standard output: REASON" (the
 * README's form), REASON the C library's text for ENOSPC, exit 1. */
static void test_write_error_reason(void **state) {
    (void)state;
    char tern[4096], in[512];
    ru_need_tern(tern, sizeof tern);
    if (access("/dev/full", W_OK) != 0) test_skip("no /dev/full");
    fx_tmp_path(in, sizeof in, "full-chat-in.txt");
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    fputs("Hello\n", f);
    fclose(f);
    const char *cmds[2] = {"run", "chat"};
    for (int i = 0; i < 2; i++) {
        char *out = NULL, *err = NULL, want[256];   /* out: no >/dev/null after our redirection */
        const int rc = ru_tern(&out, &err, "%s -m " SHIPPED " --temp 0 -n 8 -t 1 < '%s' > /dev/full", cmds[i], in);
        free(out);
        snprintf(want, sizeof want, "tern %s: write error on standard output: %s\n", cmds[i], strerror(ENOSPC));
        if (rc != 1 || !strstr(err, want)) fail_msg("tern %s > /dev/full: exit %d, stderr: %s; expected '%s'", cmds[i], rc, err, want);
        free(err);
    }
    unlink(in);
}

/* An option given twice, under the same or another spelling, is a usage error (exit 2) naming it,
 * before any model is read (the model path does not exist). */
static void test_option_twice(void **state) {
    (void)state;
    char tern[4096];
    ru_need_tern(tern, sizeof tern);
    const char *args[4] = {"run -m /nonexistent.gguf -p a -p b", "run -m /nonexistent.gguf -p a --prompt=b",
                           "chat -m /nonexistent.gguf -n 3 -n 4", "serve -m /a.gguf -m /b.gguf"};
    const char *flag[5] = {"tern run: -p given twice (-p, --prompt are one option); give it once",
                           "tern run: --prompt given twice (-p, --prompt are one option); give it once",
                           "-n given twice", "-m given twice",
                           "tern run: --mmap given twice; give it once; see tern run --help"};
    const char *args5[5] = {args[0], args[1], args[2], args[3], "run -m /nonexistent.gguf --mmap --mmap"};
    for (int i = 0; i < 5; i++) {
        char *err = NULL;
        const int rc = ru_tern(NULL, &err, "%s", args5[i]);
        if (rc != 2 || !strstr(err, flag[i])) fail_msg("tern %s: exit %d (expected 2), stderr: %s", args5[i], rc, err);
        free(err);
    }
}

/* The environment the programs read (TERN_MEM_AVAILABLE, TERN_PTQ1_0) is checked like a flag: a
 * malformed value is exit 1 naming the variable and what it expects, before the model loads;
 * TERN_MEM_AVAILABLE smaller than the file refuses the load naming both sizes. */
static void test_env_values(void **state) {
    (void)state;
    char tern[4096];
    ru_need_tern(tern, sizeof tern);
    /* decimal digits only: a blank or a sign before them is refused, as strtoull alone would take it */
    enum { N = 8 };
    const char *var[N] = {"TERN_MEM_AVAILABLE", "TERN_MEM_AVAILABLE", "TERN_MEM_AVAILABLE", "TERN_PTQ1_0",
                          "TERN_MEM_AVAILABLE", "TERN_MEM_AVAILABLE", "TERN_MEM_AVAILABLE", "TERN_MEM_AVAILABLE"};
    const char *val[N] = {"12x", "-5", "1e20", "fast", "1000", " 5000000000", "+5000000000", "\t5000000000"};
    const char *want[N] = {"TERN_MEM_AVAILABLE='12x': expected a positive integer number of bytes in decimal digits only",
                           "TERN_MEM_AVAILABLE='-5': expected a positive integer number of bytes in decimal",
                           "TERN_MEM_AVAILABLE='1e20': expected a positive integer number of bytes in decimal",
                           "TERN_PTQ1_0='fast': expected auto, transcode or direct", "only 1000 bytes (0.0 MB) available",
                           "TERN_MEM_AVAILABLE=' 5000000000': expected a positive integer number of bytes in decimal digits",
                           "TERN_MEM_AVAILABLE='+5000000000': expected a positive integer number of bytes in decimal digits",
                           "TERN_MEM_AVAILABLE='\t5000000000': expected a positive integer number of bytes in decimal"};
    for (int i = 0; i < N; i++) {
        setenv(var[i], val[i], 1);
        char *err = NULL;
        const int rc = ru_tern(NULL, &err, "run -m " SHIPPED " -n 1 -t 1");
        unsetenv(var[i]);
        if (rc != 1 || !strstr(err, want[i])) fail_msg("%s=%s tern run: exit %d (expected 1), stderr: %s", var[i], val[i], rc, err);
        free(err);
    }
}

/* TERN_ISA is checked like the other variables: a name that is no kernel path on any architecture
 * (include/tern.h lists them) is exit 1 naming the variable, the value and the accepted names,
 * before anything runs; a real path this build cannot run (the other architecture's) is a warning
 * giving the reason, and the command runs on the automatic path (exit 0). */
static void test_env_isa(void **state) {
    (void)state;
    char tern[4096];
    ru_need_tern(tern, sizeof tern);
    const char *had = getenv("TERN_ISA");   /* the runner's forced path, restored below */
    char *saved = had ? strdup(had) : NULL;
    setenv("TERN_ISA", "bogus", 1);
    char *err = NULL;
    int rc = ru_tern(NULL, &err, "run -m " SHIPPED " -n 1 -t 1");
    const char *want = "tern: TERN_ISA: expected ref, avx2, avxvnni, avx512vnni, amx (x86-64), neon, dotprod or i8mm (ARM64), "
                       "got 'bogus'\n";
    if (rc != 1 || strcmp(err, want)) fail_msg("TERN_ISA=bogus tern run: exit %d (expected 1), stderr: %s", rc, err);
    free(err);
#if defined(__x86_64__) || defined(_M_X64)
    const char *other = "neon";
#else
    const char *other = "avx2";
#endif
    char warn[256];
    snprintf(warn, sizeof warn, "tern: warning: TERN_ISA=%s: ISA path '%s' is not compiled in; using the best available path",
             other, other);
    setenv("TERN_ISA", other, 1);
    char *out = NULL;
    err = NULL;
    rc = ru_tern(&out, &err, "run -m " SHIPPED " -n 1 -t 1");
    if (saved) setenv("TERN_ISA", saved, 1);
    else unsetenv("TERN_ISA");
    free(saved);
    if (rc != 0 || !strstr(err, warn) || !out || !*out)
        fail_msg("TERN_ISA=%s tern run: exit %d (expected 0 with the warning '%s'), stdout '%s', stderr: %s", other, rc, warn,
                 out ? out : "", err);
    free(out);
    free(err);
}

/* stories260K (width 64, ffn 172) has no matrix whose rows fit PQ2_0's block of 128: quantize
 * converts nothing, so it fails (exit 1) saying why and writes no OUT. Its 48 tensors
 * (models/PROVENANCE.md, shared/data/stories260k/PROVENANCE.md): 5 blocks x 7 matrices +
 * token_embd + output = 37 matrices, 11 norms. */
static void test_quantize_nothing(void **state) {
    (void)state;
    char tern[4096], out[512];
    ru_need_tern(tern, sizeof tern);
    fx_tmp_path(out, sizeof out, "q-nothing.gguf");
    unlink(out);
    char *err = NULL;
    const int rc = ru_tern(NULL, &err, "quantize " SHIPPED " '%s' --type pq2_0", out);
    const char *want = "no tensor converted to PQ2_0 (37 have rows not a multiple of 128 (e.g. '";
    if (rc != 1 || !strstr(err, want) || !strstr(err, "'), 11 keep their type by rule) (OUT '"))
        fail_msg("tern quantize to pq2_0: exit %d (expected 1), stderr: %s", rc, err);
    if (access(out, F_OK) == 0) fail_msg("%s was written", out);
    free(err);
    /* to F16 twice: the second finds every matrix F16 already, and names no row rule that does
     * not apply */
    char f16[512];
    fx_tmp_path(f16, sizeof f16, "q-nothing-f16.gguf");
    err = NULL;
    if (ru_tern(NULL, &err, "quantize " SHIPPED " '%s' --type f16", f16) != 0) fail_msg("quantize to f16: %s", err);
    free(err);
    err = NULL;
    const int rc2 = ru_tern(NULL, &err, "quantize '%s' '%s' --type f16", f16, out);
    if (rc2 != 1 || !strstr(err, "no tensor converted to F16 (37 matrices are F16 already, 11 keep their type by rule) (OUT '"))
        fail_msg("tern quantize f16 -> f16: exit %d (expected 1), stderr: %s", rc2, err);
    free(err);
    /* an OUT that names a directory (a trailing '/') that does not exist: said as such */
    err = NULL;
    const int rc3 = ru_tern(NULL, &err, "quantize " SHIPPED " '%s/nodir/' --type f16", f16);
    if (rc3 != 1 || !strstr(err, "nodir/': the name ends with '/', expected a file name"))
        fail_msg("tern quantize to 'nodir/': exit %d (expected 1), stderr: %s", rc3, err);
    free(err);
    unlink(f16);
}

/* Converting into a ternary type warns when the weights were not ternary. stories260K is an F32
 * model not trained ternary: its 32 matrices whose rows are a multiple of Q2_0's 64 (the 37 above
 * but the five ffn_down of width 172) convert, and all 32 are named as not ternary. Into Q8_0 it
 * converts without that warning, and so does a ternary model (the synthetic qwen3-tiny through
 * F16) into Q2_0, PQ2_0 and PTQ1_0, whose encoders reproduce it exactly. */
static void test_quantize_not_ternary(void **state) {
    (void)state;
    char tern[4096], out[512], pq[512], f16[512];
    ru_need_tern(tern, sizeof tern);
    fx_tmp_path(out, sizeof out, "nt-out.gguf");
    fx_tmp_path(pq, sizeof pq, "nt-pq2.gguf");
    fx_tmp_path(f16, sizeof f16, "nt-f16.gguf");
    char *err = NULL;
    int rc = ru_tern(NULL, &err, "quantize " SHIPPED " '%s' --type q2_0", out);
    if (rc != 0 || !strstr(err, "warning: 32 of the 32 converted tensors were not ternary (the worst, '") ||
        !strstr(err, "so a model not trained ternary loses most of its accuracy; q8_0 or f16 keep it"))
        fail_msg("stories260K -> q2_0: exit %d (expected 0 and the warning), stderr: %s", rc, err);
    free(err);
    err = NULL;
    rc = ru_tern(NULL, &err, "quantize " SHIPPED " '%s' --type q8_0", out);
    if (rc != 0 || strstr(err, "warning"))
        fail_msg("stories260K -> q8_0: exit %d (expected 0, no warning), stderr: %s", rc, err);
    free(err);
    err = NULL;
    if (ru_tern(NULL, &err, "synth --arch qwen3-tiny --seed 5 -o '%s'", pq) != 0) fail_msg("synth: %s", err);
    free(err);
    err = NULL;
    if (ru_tern(NULL, &err, "quantize '%s' '%s' --type f16", pq, f16) != 0) fail_msg("pq2_0 -> f16: %s", err);
    free(err);
    static const char *const types[] = {"q2_0", "pq2_0", "ptq1_0"};
    for (int i = 0; i < 3; i++) {
        err = NULL;
        rc = ru_tern(NULL, &err, "quantize '%s' '%s' --type %s", f16, out, types[i]);
        if (rc != 0 || strstr(err, "warning"))
            fail_msg("ternary f16 -> %s: exit %d (expected 0, no warning), stderr: %s", types[i], rc, err);
        free(err);
    }
    unlink(out); unlink(pq); unlink(f16);
}

/* A Q8_0 weight goes into another quantized type only with --allow-requantize (as llama-quantize):
 * without it quantize exits 1 naming the tensor and the flag, writing no OUT; with it, and into
 * F16 without it, the file is written. The Q8_0 file comes from the synthetic qwen3-tiny (PQ2_0:
 * a ternary source converts into any type). */
static void test_quantize_requantize(void **state) {
    (void)state;
    char pq[512], q8[512], out[512];
    fx_tmp_path(pq, sizeof pq, "rq-pq2.gguf");
    fx_tmp_path(q8, sizeof q8, "rq-q8.gguf");
    fx_tmp_path(out, sizeof out, "rq-out.gguf");
    char *err = NULL;
    if (ru_tern(NULL, &err, "synth --arch qwen3-tiny --seed 1 -o '%s'", pq) != 0) fail_msg("synth: %s", err);
    free(err);
    err = NULL;
    if (ru_tern(NULL, &err, "quantize '%s' '%s' --type q8_0", pq, q8) != 0) fail_msg("pq2_0 -> q8_0: %s", err);
    free(err);
    unlink(out);
    err = NULL;
    int rc = ru_tern(NULL, &err, "quantize '%s' '%s' --type pq2_0", q8, out);
    if (rc != 1 || !strstr(err, "tensor 'token_embd.weight' is quantized already (Q8_0): converting it to PQ2_0 rounds it a "
                                "second time; --allow-requantize does so anyway") || access(out, F_OK) == 0)
        fail_msg("q8_0 -> pq2_0: exit %d (expected 1, no OUT), stderr: %s", rc, err);
    free(err);
    err = NULL;
    if (ru_tern(NULL, &err, "quantize '%s' '%s' --type pq2_0 --allow-requantize", q8, out) != 0 || access(out, F_OK) != 0)
        fail_msg("q8_0 -> pq2_0 --allow-requantize: %s", err);
    free(err);
    err = NULL;
    if (ru_tern(NULL, &err, "quantize '%s' '%s' --type f16", q8, out) != 0) fail_msg("q8_0 -> f16: %s", err);
    free(err);
    unlink(pq); unlink(q8); unlink(out);
}

/* stories260K (SentencePiece llama vocabulary, trained on documents that each start with BOS)
 * generates BOS where a story ends: that ends the reply, as llama2.c's run.c stops on BOS. The
 * greedy text from BOS reaches its first generated BOS before 400 tokens (llama2.c's 256-step
 * sample, shared/data/stories260k/expected_greedy_karpathy_doc.txt, is one story); with
 * --ignore-eos the run goes on to 400 tokens and starts with the same text; with -n -1 it stops at
 * the same BOS and says so. A chat reply is capped
 * at 1024 tokens by default, so it cannot fill the context. */
static void test_bos_ends_reply(void **state) {
    (void)state;
    char tern[4096], in[512];
    ru_need_tern(tern, sizeof tern);
    char *out = NULL, *err = NULL, *out_all = NULL, *err_all = NULL;
    int rc = ru_tern(&out, &err, "run -m " SHIPPED " --temp 0 -n 400 -t 1");
    const char *g = strstr(err, "generation: ");
    const int n = g ? atoi(g + strlen("generation: ")) : -1;
    if (rc != 0 || n <= 0 || n >= 400) fail_msg("run -n 400: exit %d, %d tokens (expected fewer than 400): %s", rc, n, err);
    char why[128];   /* the run says why it stopped short of -n */
    snprintf(why, sizeof why, "tern run: end of text after %d of -n 400 tokens", n);
    if (!strstr(err, why)) fail_msg("run -n 400: expected '%s' in stderr: %s", why, err);
    free(err);
    err = NULL;
    /* -n -1 (until the end): the same stop, said without a count to fall short of */
    rc = ru_tern(NULL, &err, "run -m " SHIPPED " --temp 0 -n -1 -t 1");
    snprintf(why, sizeof why, "tern run: end of text after %d tokens (", n);
    if (rc != 0 || !strstr(err, why)) fail_msg("run -n -1: exit %d, expected '%s' in stderr: %s", rc, why, err);
    rc = ru_tern(&out_all, &err_all, "run -m " SHIPPED " --temp 0 -n 400 -t 1 --ignore-eos");
    if (rc != 0 || !strstr(err_all, "generation: 400 tokens") || strstr(err_all, "end of text"))
        fail_msg("--ignore-eos: exit %d: %s", rc, err_all);
    const size_t len = strlen(out) - 1;   /* without the closing newline */
    if (strncmp(out, out_all, len) != 0 || strlen(out_all) <= len + 1)
        fail_msg("the reply is not where the --ignore-eos run stops at BOS: '%s' vs '%s'", out, out_all);
    free(out); free(err); free(out_all); free(err_all);
    fx_tmp_path(in, sizeof in, "bos-chat-in.txt");
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    fputs("Once upon a time\n", f);
    fclose(f);
    /* greedy under ChatML this model never generates BOS or EOS: the default cap (chat --help:
     * 1024 tokens) ends the reply before the 2048-token context fills */
    rc = ru_tern(&out, &err, "chat -m " SHIPPED " --temp 0 -t 1 < '%s'", in);
    if (rc != 0 || strstr(err, "context full") || !strstr(err, " 1024 tokens at ") || !*out)
        fail_msg("chat: exit %d, stderr: %s, stdout: %s", rc, err, out);
    free(out); free(err);
    unlink(in);
}

/* Mid-conversation, a message that alone needs more than -c is "too long for the context (-c N)"
 * with its token count M > N (the message is 120 words: more than 100 tokens in any vocabulary
 * that gives a word at least one token), never "Type /clear" (clearing cannot make it fit); the
 * refused message is no turn: the next message is turn 2, and the run exits 1 (stdin is a file).
 * The count it gives is the one it has sent first, in an empty conversation. */
static void test_chat_message_too_long(void **state) {
    (void)state;
    char tern[4096], in[512];
    ru_need_tern(tern, sizeof tern);
    fx_tmp_path(in, sizeof in, "chat-long-in.txt");
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    fputs("Hi\n", f);
    for (int i = 0; i < 120; i++) fputs("dog ", f);
    fputs("\nHi\n", f);
    fclose(f);
    char *out = NULL, *err = NULL;
    const int rc = ru_tern(&out, &err, "chat -m " SHIPPED " -c 100 -n 2 --temp 0 -t 1 < '%s'", in);
    const char *key = "[this message is too long for the context (-c 100): it needs ";
    const char *p = strstr(err, key);
    const int need = p ? atoi(p + strlen(key)) : 0;
    /* from a file, a message without a reply makes the exit status 1, with a count at the end */
    if (rc != 1 || !p || need <= 120 || strstr(err, "Type /clear") || !strstr(err, "[turn 2: ") || strstr(err, "[turn 3: ") ||
        !strstr(err, "tern chat: 1 of 3 messages got no reply (the notes above say why); exit status 1\n"))
        fail_msg("chat -c 100: exit %d, stderr: %s", rc, err);
    free(out);
    free(err);
    /* the count is the message's in an empty conversation: the same when it is sent first */
    f = fopen(in, "w");
    assert_non_null(f);
    for (int i = 0; i < 120; i++) fputs("dog ", f);
    fputs("\n", f);
    fclose(f);
    out = err = NULL;
    assert_int_equal(ru_tern(&out, &err, "chat -m " SHIPPED " -c 100 -n 2 --temp 0 -t 1 < '%s'", in), 1);
    p = strstr(err, key);
    if (!p || atoi(p + strlen(key)) != need) fail_msg("sent first: stderr %s; mid-conversation it needed %d", err, need);
    free(out);
    free(err);
    unlink(in);
}

/* tern serve on a port another socket listens on: exit 1 naming the port, before the model is
 * read (a model path that does not exist is not reached: its error would come first if the model
 * loaded before the bind). */
static void test_serve_busy_port(void **state) {
    (void)state;
    char tern[4096];
    ru_need_tern(tern, sizeof tern);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 1), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    const int port = ntohs(sa.sin_port);
    char cmd[6000], want[128];
    snprintf(cmd, sizeof cmd, "timeout 20 '%s' serve -m /nonexistent/model.gguf --host 127.0.0.1 --port %d 2>&1", tern, port);
    int rc = -1;
    char *err = ru_capture(cmd, &rc);
    snprintf(want, sizeof want, "cannot listen on 127.0.0.1 port %d: %s", port, strerror(EADDRINUSE));
    if (rc != 1 || !strstr(err, want) || strstr(err, "nonexistent")) fail_msg("serve on busy port %d: exit %d: %s", port, rc, err);
    free(err);
    close(fd);
}

/* A synthetic Bonsai 1.7B (one block; 151,936 vocabulary rows: the built-in vocabulary's 285 and
 * the rest) generates text: every id has a piece, so 8 greedy tokens print at least 8 bytes (the
 * rows past 285 need a piece each, or the run prints nothing). */
static void test_synth_output_text(void **state) {
    (void)state;
    char tern[4096], model[512];
    ru_need_tern(tern, sizeof tern);
    fx_tmp_path(model, sizeof model, "synth-bonsai.gguf");
    char *out = NULL, *err = NULL;
    int rc = ru_tern(NULL, &err, "synth --arch bonsai-1.7b --n-layer 1 -o '%s'", model);
    if (rc != 0) fail_msg("synth: exit %d: %s", rc, err);
    free(err);
    rc = ru_tern(&out, &err, "run -m '%s' -p 'the' --temp 0 -n 8 --ignore-eos -t 1", model);
    size_t len = strlen(out);
    while (len && out[len - 1] == '\n') len--;
    if (rc != 0 || len < 8) fail_msg("run on the synthetic model: exit %d, %zu bytes of text: '%s', stderr: %s", rc, len, out, err);
    free(out);
    free(err);
    unlink(model);
}

int suite_cli_checks(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_model_checksum),
        cmocka_unit_test(test_shipped_model_golden),
        cmocka_unit_test(test_model_not_regular),
        cmocka_unit_test(test_run_token_count),
        cmocka_unit_test(test_write_error_reason),
        cmocka_unit_test(test_option_twice),
        cmocka_unit_test(test_env_values),
        cmocka_unit_test(test_env_isa),
        cmocka_unit_test(test_quantize_nothing),
        cmocka_unit_test(test_quantize_requantize),
        cmocka_unit_test(test_quantize_not_ternary),
        cmocka_unit_test(test_run_context_full),
        cmocka_unit_test(test_bos_ends_reply),
        cmocka_unit_test(test_chat_message_too_long),
        cmocka_unit_test(test_serve_busy_port),
        cmocka_unit_test(test_synth_output_text),
    };
    TEST_RUN_SUITE("cli_checks", tests);
}
