/* test_cli.c: the tern command line: every command's --help lists each option once and every
 * listed option is parsed; numeric values outside their documented range, missing values and
 * unknown options are refused with a message naming the flag, the range and the value given
 * (tools/opts.h), exit status 2. `tern run` output after a prompt keeps the SentencePiece space
 * of its first piece. Runs the tern binary built beside the test runner. */
#include "test.h"
#include "model_fx.h"
#include "run_util.h"

#include "tern.h"

#include <ctype.h>
#include <errno.h>
#include <utf8proc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STORIES "data/stories260k/stories260K.gguf"

/* The commands `tern --help` lists (all but `version`, which takes no options); at least the
 * ten known today, so a broken listing cannot pass by listing nothing. */
static int list_commands(char cmds[][32], int cap) {
    char *out = NULL;
    const int rc = ru_tern(&out, NULL, "--help");
    assert_int_equal(rc, 0);
    int n = 0;
    const char *p = strstr(out, "commands:\n");
    assert_non_null(p);
    for (p = strchr(p, '\n') + 1; p[0] == ' ' && p[1] == ' ' && islower((unsigned char)p[2]);) {
        size_t k = 0;
        while (p[2 + k] && p[2 + k] != ' ' && k < 31) k++;
        assert_true(n < cap);
        memcpy(cmds[n], p + 2, k);
        cmds[n][k] = '\0';
        if (strcmp(cmds[n], "version") != 0) n++;
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    free(out);
    const char *must[] = {"run", "bench", "perplexity", "bench-kernel", "bench-spec", "info", "synth", "quantize", "chat", "serve"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        bool found = false;
        for (int j = 0; j < n; j++) found |= !strcmp(cmds[j], must[i]);
        if (!found) fail_msg("tern --help does not list %s", must[i]);
    }
    return n;
}

/* opts_max_threads() computed again from its documented rule: 4 x online CPUs in 4..1024. */
static long max_threads(void) {
    long m = 4 * sysconf(_SC_NPROCESSORS_ONLN);
    return m < 4 ? 4 : m > 1024 ? 1024 : m;
}

/* A flag token: -x or --xy-z (letters first), maybe ending in ','. Copies it without the comma. */
static bool flag_token(const char *t, size_t n, char *out, size_t cap) {
    if (n && t[n - 1] == ',') n--;
    if (n < 2 || n >= cap || t[0] != '-') return false;
    size_t k = t[1] == '-' ? 2 : 1;
    if (k >= n || !isalpha((unsigned char)t[k])) return false;
    for (size_t j = k; j < n; j++)
        if (!isalnum((unsigned char)t[j]) && t[j] != '-') return false;
    memcpy(out, t, n);
    out[n] = '\0';
    return true;
}

typedef struct { char name[64]; bool value; } flag_t;

/* The flags of the option lines of a help text ("  -t, --threads N   help"): flag [, flag]...
 * [META] [, flag ... [META]]..., stopping at the first other word (the help). A META (a word
 * one space after a flag, not starting with '-') marks every flag before it as taking a value.
 * Returns the count. */
static int help_flags(const char *help, flag_t *out, int cap) {
    int n = 0;
    for (const char *line = help; *line;) {
        const char *eol = strchr(line, '\n');
        if (!eol) eol = line + strlen(line);
        if (line[0] == ' ' && line[1] == ' ' && line[2] == '-') {
            const char *p = line + 2;
            int group = n;                       /* first flag sharing the next META */
            bool after_flag = false;             /* the previous word was a flag without a comma */
            while (p < eol) {
                const char *e = p;
                while (e < eol && *e != ' ') e++;
                char tok[64];
                const bool comma = e[-1] == ',';
                if (flag_token(p, (size_t)(e - p), tok, sizeof tok)) {
                    assert_true(n < cap);
                    snprintf(out[n].name, sizeof out[n].name, "%s", tok);
                    out[n++].value = false;
                    after_flag = !comma;
                } else if (after_flag && p[-2] != ' ') {   /* one space after a flag: its META */
                    for (int k = group; k < n; k++) out[k].value = true;
                    group = n;
                    after_flag = false;
                    if (!comma) break;
                } else break;
                if (after_flag && e + 1 < eol && e[0] == ' ' && e[1] == ' ') break;   /* the help follows */
                p = e;
                while (p < eol && *p == ' ') p++;
            }
        }
        line = *eol ? eol + 1 : eol;
    }
    return n;
}

/* --help of every command `tern --help` lists: exit 0 on stdout; no option listed twice; a listed option that takes
 * a value, given without one, says "FLAG needs a value (...)"; a listed flag is accepted (the
 * unknown option after it is the one refused). */
static void test_help_lists_each_option_once(void **state) {
    (void)state;
    char k_cmds[32][32];
    const int n_cmds = list_commands(k_cmds, 32);
    for (int c = 0; c < n_cmds; c++) {
        char *out = NULL, *err = NULL;
        int rc = ru_tern(&out, &err, "%s --help", k_cmds[c]);
        if (rc != 0 || !strstr(out, "usage: tern")) fail_msg("tern %s --help: exit %d, stdout: %s", k_cmds[c], rc, out);
        flag_t f[128];
        const int n = help_flags(out, f, 128);
        if (n < 2) fail_msg("tern %s --help: only %d options found in:\n%s", k_cmds[c], n, out);
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                if (!strcmp(f[i].name, f[j].name)) fail_msg("tern %s --help lists %s twice:\n%s", k_cmds[c], f[i].name, out);
        free(out);
        free(err);
        for (int i = 0; i < n; i++) {
            if (!strcmp(f[i].name, "-h") || !strcmp(f[i].name, "--help")) continue;
            char want[256];
            if (f[i].value) {
                rc = ru_tern(NULL, &err, "%s %s", k_cmds[c], f[i].name);
                snprintf(want, sizeof want, "tern %.31s: %.64s needs a value (", k_cmds[c], f[i].name);
            } else {
                rc = ru_tern(NULL, &err, "%s %s --zz-unknown", k_cmds[c], f[i].name);
                snprintf(want, sizeof want, "tern %.31s: unknown option --zz-unknown; see tern %.31s --help", k_cmds[c],
                         k_cmds[c]);
            }
            if (rc != 2 || !strstr(err, want))
                fail_msg("tern %s %s (listed in --help): exit %d, stderr: %s (expected \"%s\")", k_cmds[c], f[i].name, rc, err, want);
            free(err);
        }
    }
}

/* The help parser itself on a made-up help with a duplicate, placeholders and prose. */
static void test_help_parser(void **state) {
    (void)state;
    const char *h = "usage: tern x [-a]\n"
                    "  -m, --model PATH        GGUF model (default -1: none, see --json)\n"
                    "  --json                  one object\n"
                    "  -np, --parallel N       slots\n"
                    "  -c, --ctx-size, --ctx N context\n"
                    "  -c N                    again\n";
    flag_t f[16];
    const int n = help_flags(h, f, 16);
    const char *want[] = {"-m", "--model", "--json", "-np", "--parallel", "-c", "--ctx-size", "--ctx", "-c"};
    const bool val[] = {true, true, false, true, true, true, true, true, true};
    assert_int_equal(n, 9);
    for (int i = 0; i < n; i++) {
        assert_string_equal(f[i].name, want[i]);
        if (f[i].value != val[i]) fail_msg("%s: value %d", want[i], f[i].value);
    }
}

typedef struct { const char *cmd, *args, *want; } bad_case;

static void write_file(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* `tern ARGS` exits with want_rc and `want` is in its stderr. */
static void expect_tern(int want_rc, const char *want, const char *args) {
    char *err = NULL;
    const int rc = ru_tern(NULL, &err, "%s", args);
    if (rc != want_rc || !strstr(err, want))
        fail_msg("tern %s: exit %d, stderr: %s(expected exit %d and \"%s\")", args, rc, err, want_rc, want);
    free(err);
}

/* Each `tern CMD ARGS` exits 2 with `want` in its stderr. */
static void expect_usage_errors(const bad_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char args[1024];
        snprintf(args, sizeof args, "%s %s", cases[i].cmd, cases[i].args);
        expect_tern(2, cases[i].want, args);
    }
}

/* Out-of-range and malformed values: exit 2, message "tern CMD: FLAG: expected RANGE, got 'V'". */
static void test_values_out_of_range(void **state) {
    (void)state;
    char thr[160], thr_list[200], thr_chat[160];
    const long mt = max_threads();
    snprintf(thr, sizeof thr, "tern run: -t: expected an integer in 1..%ld, that is 4 per online CPU, got '1000'", mt);
    snprintf(thr_chat, sizeof thr_chat, "tern chat: --threads: expected an integer in 1..%ld, that is 4 per online CPU, got '0'", mt);
    snprintf(thr_list, sizeof thr_list, "tern bench: -t: expected a comma-separated list of at most 16 integers in 1..%ld, that is 4 per online CPU, got '1,2000': item 2 (2000) is out of range", mt);
    const bad_case cases[] = {
        {"run", "-t 1000", thr},
        {"run", "-c 0", "tern run: -c: expected an integer in 1..16777216, got '0'"},
        {"run", "--ctx-size=99999999", "tern run: --ctx-size: expected an integer in 1..16777216, got '99999999'"},
        /* a request holds a prompt token and needs a position to generate: -c 1 could serve none */
        {"serve", "-c 1", "tern serve: -c: expected an integer in 2..16777216, got '1'"},
        {"run", "-n -2", "tern run: -n: expected an integer in -1..16777216, got '-2'"},
        {"run", "-b 70000", "tern run: -b: expected an integer in 1..65536, got '70000'"},
        {"run", "--temp -0.5", "tern run: --temp: expected a number in 0..100, got '-0.5'"},
        {"run", "--top-p 1.5", "tern run: --top-p: expected a number in 0..1, got '1.5'"},
        {"run", "--min-p nan", "tern run: --min-p: expected a number in 0..1, got 'nan'"},
        {"run", "--temp 0x10", "tern run: --temp: expected a number in 0..100, got '0x10'"},   /* strtod: 16 */
        {"run", "--top-p 0x1p-2", "tern run: --top-p: expected a number in 0..1, got '0x1p-2'"},   /* strtod: 0.25 */
        {"run", "--temp 0X1.8P1", "tern run: --temp: expected a number in 0..100, got '0X1.8P1'"},   /* strtod: 3 */
        {"run", "--temp inf", "tern run: --temp: expected a number in 0..100, got 'inf'"},
        {"run", "--temp -Infinity", "tern run: --temp: expected a number in 0..100, got '-Infinity'"},
        {"run", "--min-p 'NAN(1)'", "tern run: --min-p: expected a number in 0..1, got 'NAN(1)'"},
        {"run", "-l 300+0x10", "tern run: -l: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '300+0x10'"},
        {"run", "--repeat-penalty 0", "tern run: --repeat-penalty: expected a number in 0.01..100, got '0'"},
        {"run", "--top-k 4x", "tern run: --top-k: expected an integer in -1..1073741824, got '4x'"},
        {"run", "--repeat-last-n -2", "tern run: --repeat-last-n: expected an integer in -1..16777216, got '-2'"},
        {"run", "--seed -5", "tern run: --seed: expected an integer in 0..18446744073709551614 or -1 (random), got '-5'"},
        {"run", "--seed 18446744073709551615", "tern run: --seed: expected an integer in 0..18446744073709551614 or -1 (random), got '18446744073709551615'"},
        {"synth", "--seed -1", "tern synth: --seed: expected an integer in 0..18446744073709551614 (synth is deterministic: no random seed), got '-1'"},
        {"synth", "-o ''", "tern synth: -o: expected a path, got ''"},
        {"run", "--mmap --no-mmap", "tern run: --mmap and --no-mmap choose different loads; use one of them; see tern run --help"},
        {"bench", "--no-mmap --mmap", "tern bench: --mmap and --no-mmap choose different loads; use one of them; see tern bench --help"},
        {"synth", "--arch qwen3-tiny --unrotated-f32 --type q2_0 -o x.gguf", "tern synth: --type q2_0 and --unrotated-f32 choose different weights (--unrotated-f32 writes F32); use one of them"},
        {"quantize", "in.gguf '' --type q8_0", "tern quantize: OUT: expected a path, got ''; see tern quantize --help"},
        {"quantize", "in.gguf out.gguf q8_0", "tern quantize: unexpected argument 'q8_0' (IN and OUT already given); the type is given as --type q8_0"},
        {"bench", "-p ''", "tern bench: -p: expected a comma-separated list of at most 16 integers in 0..1048576, got ''"},
        {"bench-kernel", "--isa ''", "tern bench-kernel: --isa: expected a comma-separated list of ref, avx2, avxvnni, avx512vnni, amx, neon, dotprod, i8mm (item 1 is empty), got ''"},
        {"bench-kernel", "--isa ref,", "tern bench-kernel: --isa: expected a comma-separated list of ref, avx2, avxvnni, avx512vnni, amx, neon, dotprod, i8mm (item 2 is empty), got 'ref,'"},
        {"bench-kernel", "--isa ref,,avx2", "tern bench-kernel: --isa: expected a comma-separated list of ref, avx2, avxvnni, avx512vnni, amx, neon, dotprod, i8mm (item 2 is empty), got 'ref,,avx2'"},
        {"run", "--numerics fast2", "tern run: --numerics: expected one of fast, ggml, f32, got 'fast2'"},
        {"run", "--cache-type q8", "tern run: --cache-type: expected one of f16, f32, got 'q8'"},
        {"perplexity", "--chunks 0", "tern perplexity: --chunks: expected an integer in 1..1073741824, got '0'"},
        {"perplexity", "-c 1", "tern perplexity: -c: expected an integer in 2..16777216, got '1'"},
        {"bench", "-r 0", "tern bench: -r: expected an integer in 1..1000, got '0'"},
        {"bench", "-np 0", "tern bench: -np: expected a comma-separated list of at most 16 integers in 1..64, got '0': item 1 (0) is out of range"},
        {"bench", "--parallel 1,65", "tern bench: --parallel: expected a comma-separated list of at most 16 integers in 1..64, got '1,65': item 2 (65) is out of range"},
        {"bench", "-t 1,2000", thr_list},
        {"bench", "-p 512,", "tern bench: -p: expected a comma-separated list of at most 16 integers in 0..1048576, got '512,': a comma ends the list"},
        {"bench", "-p 1,,2", "tern bench: -p: expected a comma-separated list of at most 16 integers in 0..1048576, got '1,,2': item 2 is empty"},
        {"bench", "-n 64,1x", "tern bench: -n: expected a comma-separated list of at most 16 integers in 0..1048576, got '64,1x': item 2 ('1x') is not an integer"},
        {"bench", "-n '64, 1'", "tern bench: -n: expected a comma-separated list of at most 16 integers in 0..1048576, got '64, 1': item 2 (' 1') is not an integer"},
        {"bench", "-o csv", "tern bench: -o: expected one of md, json, jsonl, got 'csv'"},
        {"bench", "--json -o md", "tern bench: --json (a JSON object per line) and -o md (the table) choose different outputs; use one of them; see tern bench --help"},
        {"bench", "--json -o json", "tern bench: --json (a JSON object per line) and -o json (one JSON array) choose different outputs; use one of them; see tern bench --help"},
        {"chat", "--threads 0", thr_chat},
        {"chat", "-n -5", "tern chat: -n: expected an integer in -1..16777216, got '-5'"},
        {"serve", "--port 70000", "tern serve: --port: expected an integer in 0..65535, got '70000'"},
        {"serve", "-np 0", "tern serve: -np: expected an integer in 1..64, got '0'"},
        {"serve", "--body-limit 10", "tern serve: --body-limit: expected an integer in 1024..1073741824, got '10'"},
        {"synth", "--n-vocab 0", "tern synth: --n-vocab: expected an integer in 285..1048576, got '0'"},
        {"synth", "--seed x", "tern synth: --seed: expected an integer in 0..18446744073709551614 (synth is deterministic: no random seed), got 'x'"},
        {"bench-kernel", "--threads 0", "tern bench-kernel: --threads: expected a comma-separated list of at most 16 integers in 1.."},
        {"bench-kernel", "--decode-seq --sampler", "tern bench-kernel: --attn, --sampler, --decode-seq, --f16 and --gdn each select one set of benchmarks; expected one of them, got --sampler --decode-seq"},
        {"bench-kernel", "--gdn --attn", "tern bench-kernel: --attn, --sampler, --decode-seq, --f16 and --gdn each select one set of benchmarks; expected one of them, got --attn --gdn"},
        {"info", "--pos -1", "tern info: --pos: expected an integer in 0..2147483647, got '-1'"},
        {"info", "--bw 0", "tern info: --bw: expected a number in 0.001..1000000, got '0'"},
        {"run", "--echo=1", "tern run: --echo takes no value, got '1'"},
        {"run", "--temp ' 0.5'", "tern run: --temp: expected a number in 0..100, got ' 0.5'"},
        {"run", "-l 300", "tern run: -l: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '300'"},
        {"chat", "--logit-bias 300+inf", "tern chat: --logit-bias: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '300+inf'"},
        {"run", "-l '300+ 1'", "tern run: -l: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '300+ 1'"},
        {"run", "-l 99999999999+1", "tern run: -l: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '99999999999+1'"},
        {"run", "-l 300--1", "tern run: -l: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '300--1'"},
        {"run", "-l 300+3.5e38", "tern run: -l: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '300+3.5e38'"},
        {"run", "-l 300-3.5e38", "tern run: -l: expected TOKEN_ID(+|-)BIAS, a token id and a signed number within the float range (|BIAS| <= 3.4e38), or -inf for a ban (15043+1, 15043-inf), got '300-3.5e38'"},
        {"run", "-n ' 5'", "tern run: -n: expected an integer in -1..16777216, got ' 5'"},
        /* speculative flags against each other: the flag given is named, usage exit status */
        {"run", "-m x.gguf --spec lookup --spec-ngram-min 4 --spec-ngram-max 2",
         "tern run: --spec-ngram-max: expected an integer in 4..16 (at least --spec-ngram-min), got '2'"},
        {"run", "-m x.gguf --spec lookup --spec-ngram-min 5",
         "tern run: --spec-ngram-min: expected an integer in 1..4 (at most --spec-ngram-max, default 4), got '5'"},
        {"chat", "-m x.gguf --spec lookup --spec-ngram-max 1",
         "tern chat: --spec-ngram-max: expected an integer in 2..16 (at least --spec-ngram-min), got '1'"},
        {"serve", "-m x.gguf --spec-ngram-min 3 --spec-ngram-max 2 --spec lookup",
         "tern serve: --spec-ngram-max: expected an integer in 3..16 (at least --spec-ngram-min), got '2'"},
        {"perplexity", "-m x.gguf -f y.txt -c 3", "tern perplexity: -c: expected an integer in 4..16777216, got '3'"},
        {"run", "-m x.gguf -p hi -f prompt.txt", "tern run: -p and -f both give the prompt; use one of them; see tern run --help"},
        {"serve", "-m x.gguf --chat-template foo", "tern serve: --chat-template: expected one of chatml, qwen3, qwen35, got 'foo'"},
        {"chat", "-m x.gguf --chat-template foo", "tern chat: --chat-template: expected one of chatml, qwen3, qwen35, got 'foo'"},
        {"bench-spec", "-m x.gguf --prompts x.txt --spec-ngram-min 5 --spec-ngram-max 4",
         "tern bench-spec: --spec-ngram-max: expected an integer in 5..16 (at least --spec-ngram-min), got '4'"},
        /* bench-spec always compares lookup speculation with plain decoding: --spec has nothing to choose */
        {"bench-spec", "-m x.gguf --prompts p.jsonl --spec none", "tern bench-spec: unknown option --spec; see tern bench-spec --help"},
        {"bench-spec", "-m x.gguf --cost --cost-pos 4093", "tern bench-spec: --cost-pos 4093 + 4 tokens (--draft-max + 1) > context 4096 (the default; -c N sets it): expected a position and draft that fit the context"},
        {"bench-spec", "-m x.gguf --cost --cost-pos 60 -c 64 --draft-max 4", "tern bench-spec: --cost-pos 60 + 5 tokens (--draft-max + 1) > context 64 (-c): expected a position and draft that fit the context"},
        {"bench-spec", "-m x.gguf --cost -c 8", "tern bench-spec: --cost-pos 64 (the default) + 4 tokens (--draft-max + 1) > context 8 (-c): expected a position and draft that fit the context"},
        /* large values and limits with all their digits (never 1e+11) */
        {"run", "-n 99999999999", "tern run: -n: expected an integer in -1..16777216, got '99999999999'"},
        {"synth", "--n-vocab 99999999999", "tern synth: --n-vocab: expected an integer in 285..1048576, got '99999999999'"},
        {"bench", "-p 99999999999", "tern bench: -p: expected a comma-separated list of at most 16 integers in 0..1048576, got '99999999999'"},
    };
    expect_usage_errors(cases, sizeof cases / sizeof cases[0]);
}

/* The ends of each range are accepted: the run gets past the options to the model file. */
static void test_values_at_range_ends(void **state) {
    (void)state;
    const long mt = max_threads();
    const char *missing = "/nonexistent/tern-test.gguf";
    const char *ok[] = {
        "run -t 1 -c 16777216 -n -1 -b 65536 --temp 0 --top-p 1 --min-p 0 --top-k -1 --repeat-last-n -1 --seed -1",
        "run -t %ld -c 1 -n 16777216 -b 1 --temp 100 --top-p 0 --min-p 1 --repeat-penalty 0.01 --seed 18446744073709551614",
        "perplexity -f /dev/null --chunks 1 -c 4 -t %ld",   /* -c 4: the lower end with -f (2 with --tokens); a
                                                            * readable text: it is read before the model */
        "chat -t %ld -n -1 --no-think",
        "run --temp 4.9e-324 --min-p 1e-320",   /* values that underflow to subnormals are numbers in range */
        "run --temp 1e-3 --top-p 5E-1 --min-p .5e+0 -l 300-1.5e1",   /* decimal forms with exponents */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char args[512], cmd[1024];
        snprintf(args, sizeof args, ok[i], mt);
        snprintf(cmd, sizeof cmd, "%s -m %s </dev/null", args, missing);
        expect_tern(1, missing, cmd);
    }
}

/* A missing value names the flag and the kind of value; an unknown option names the command. */
static void test_missing_value_and_unknown_option(void **state) {
    (void)state;
    const bad_case cases[] = {
        {"run", "-m", "tern run: -m needs a value (a path)"},
        {"run", "-m -p hello", "tern run: -m needs a value (a path)"},
        {"run", "-p", "tern run: -p needs a value (text)"},
        {"run", "-t", "tern run: -t needs a value (an integer in 1.."},
        {"perplexity", "--tokens", "tern perplexity: --tokens needs a value (a path)"},
        {"serve", "--port", "tern serve: --port needs a value (an integer in 0..65535)"},
        {"run", "--x", "tern run: unknown option --x; see tern run --help"},
        {"bench", "--ctx-size 5", "tern bench: unknown option --ctx-size; see tern bench --help"},
        {"perplexity", "--temp 1", "tern perplexity: unknown option --temp; see tern perplexity --help"},
        {"chat", "-x", "tern chat: unknown option -x; see tern chat --help"},
        {"serve", "--nope", "tern serve: unknown option --nope; see tern serve --help"},
        {"synth", "--arch", "tern synth: --arch needs a value (text)"},
        {"quantize", "--bad", "tern quantize: unknown option --bad; see tern quantize --help"},
        {"info", "--x", "tern info: unknown option --x; see tern info --help"},
        {"bench-kernel", "--x", "tern bench-kernel: unknown option --x; see tern bench-kernel --help"},
        {"run", "hello", "tern run: unexpected argument 'hello'"},
    };
    expect_usage_errors(cases, sizeof cases / sizeof cases[0]);
}

/* A speculative tuning flag without --spec lookup runs, with a warning that it does nothing (none
 * with --spec lookup). */
static void test_spec_flags_without_spec(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    struct { const char *args, *warn; } cases[] = {
        {"run -m '%s' -p Once -n 2 --temp 0 --draft-max 5", "tern run: warning: --draft-max has no effect without --spec lookup (speculative decoding is off)"},
        {"run -m '%s' -p Once -n 2 --temp 0 --spec none --spec-ngram-max 6 --draft-max 2",
         "tern run: warning: --spec-ngram-max has no effect without --spec lookup (speculative decoding is off)"},
        {"chat -m '%s' -n 2 --temp 0 --spec-ngram-min 3 </dev/null",
         "tern chat: warning: --spec-ngram-min has no effect without --spec lookup (speculative decoding is off)"},
        {"run -m '%s' -p Once -n 2 --temp 0 --spec lookup --draft-max 5", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], *err = NULL;
        snprintf(args, sizeof args, cases[i].args, model);
        const int rc = ru_tern(NULL, &err, "%s", args);
        const bool warned = strstr(err, "has no effect without --spec lookup") != NULL;
        if (rc != 0 || (cases[i].warn ? !strstr(err, cases[i].warn) : warned))
            fail_msg("tern %s: exit %d, stderr: %s(expected %s)", args, rc, err, cases[i].warn ? cases[i].warn : "no warning");
        free(err);
    }
}

/* -l TOKEN_ID(+|-)BIAS, repeatable, as llama.cpp: +100 on a token makes greedy decoding give it at
 * every step (its text from the library), a later -inf on it bans it and +100 on another token
 * gives that one; an id outside the vocabulary is an error naming the flag; more than 256 is a
 * usage error. */
static void test_logit_bias_flag(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    tern_model *m = NULL;
    tern_err e = {0};
    assert_int_equal(tern_model_load(&m, model, NULL, &e), TERN_OK);
    char p300[64], p301[64], want[256];
    int n = tern_token_piece(m, 300, false, p300, sizeof p300 - 1);
    assert_true(n > 0);
    p300[n] = '\0';
    n = tern_token_piece(m, 301, false, p301, sizeof p301 - 1);
    assert_true(n > 0);
    p301[n] = '\0';
    tern_model_free(m);
    struct { const char *flags, *piece; } cases[] = {{"-l 300+100", p300}, {"-l 300+100 --logit-bias 300-inf -l 301+100", p301}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        const int rc = ru_tern(&out, NULL, "run -m '%s' -p Once -n 3 --temp 0 -t 1 %s", model, cases[i].flags);
        snprintf(want, sizeof want, "%s%s%s\n", cases[i].piece, cases[i].piece, cases[i].piece);
        if (rc != 0 || !strstr(out, want)) fail_msg("run %s: exit %d, output '%s', expected '%s'", cases[i].flags, rc, out, want);
        free(out);
    }
    char *err = NULL;
    int rc = ru_tern(NULL, &err, "run -m '%s' -p Once -n 1 -l 600+1", model);
    if (rc != 2 || !strstr(err, "-l, --logit-bias: token id 600 is not in the model's vocabulary (ids 0..511)"))
        fail_msg("-l 600+1: exit %d, stderr %s", rc, err);
    free(err);
    err = NULL;   /* chat: the same usage error, found after the load */
    rc = ru_tern(NULL, &err, "chat -m '%s' -n 1 -l 600+1 < /dev/null", model);
    if (rc != 2 || !strstr(err, "tern chat: -l, --logit-bias: token id 600 is not in the model's vocabulary (ids 0..511)"))
        fail_msg("chat -l 600+1: exit %d, stderr %s", rc, err);
    free(err);
    char many[257 * 10 + 1] = "";
    for (int i = 0; i < 257; i++) snprintf(many + strlen(many), sizeof many - strlen(many), " -l %d+1", i);
    err = NULL;
    rc = ru_tern(NULL, &err, "run -m '%s' -p Once -n 1%s", model, many);
    if (rc != 2 || !strstr(err, "tern run: -l, --logit-bias: given 257 times, at most 256")) fail_msg("257 x -l: exit %d, stderr %s", rc, err);
    free(err);
    /* many -l do not hide another option given twice */
    err = NULL;
    many[0] = '\0';
    for (int i = 0; i < 150; i++) snprintf(many + strlen(many), sizeof many - strlen(many), " -l %d+1", i);
    rc = ru_tern(NULL, &err, "run -m '%s' -p Once -n 1%s --temp 0 --temp 1", model, many);
    if (rc != 2 || !strstr(err, "tern run: --temp given twice")) fail_msg("-l x 150 then --temp twice: exit %d, stderr %s", rc, err);
    free(err);
}

/* bench-spec --cost past the context names where the context came from: the default capped at
 * the trained length (stories260K: 2048), or -c. */
static void test_bench_spec_cost_pos_context(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    struct { const char *args, *want; } cases[] = {
        {"bench-spec -m '%s' --cost --cost-pos 3000", "--cost-pos 3000 + 4 tokens (--draft-max + 1) > context 2048 (the model's trained length; -c N sets it)"},
        {"bench-spec -m '%s' --cost --cost-pos 3000 -c 3002", "--cost-pos 3000 + 4 tokens (--draft-max + 1) > context 3002 (-c)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], *err = NULL;
        snprintf(args, sizeof args, cases[i].args, model);
        const int rc = ru_tern(NULL, &err, "%s", args);
        if (rc != 2 || !strstr(err, cases[i].want)) fail_msg("tern %s: exit %d, stderr: %s(expected 2 and %s)", args, rc, err, cases[i].want);
        free(err);
    }
}

/* bench-spec --cost on a model whose bytes per token fit in any last-level cache (stories260K: 1.0
 * MB) gives no share of the bandwidth ceiling, and its rollback line says what a truncation did:
 * lowered the position (attention only, stories260K) or restored the recurrent state and replayed
 * the logged tokens (the qwen35 tiny). */
static void test_bench_spec_cost_lines(void **state) {
    (void)state;
    char spm[1024], hyb[1024];
    fx_require(spm, sizeof spm, STORIES);
    fx_require(hyb, sizeof hyb, "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf");
    char *out = NULL, *err = NULL;
    /* with two flags only the prompts mode reads: each named in a warning */
    /* --cost reads no n-gram flag: a range that run would refuse is only warned about */
    int rc = ru_tern(&out, &err, "bench-spec -m '%s' --cost -t 1 --reps 1 --draft-max 1 -c 128 --spec-ngram-min 5 "
                                 "--spec-ngram-max 2", spm);
    if (rc != 0 || !strstr(err, "warning: --spec-ngram-max has no effect with --cost") || strstr(err, "expected"))
        fail_msg("bench-spec --cost with --spec-ngram-min 5 --spec-ngram-max 2: exit %d, stderr:\n%s", rc, err ? err : "");
    free(out);
    free(err);
    out = err = NULL;
    rc = ru_tern(&out, &err, "bench-spec -m '%s' --cost -t 1 --reps 1 --draft-max 2 -c 128 -n 5 --raw", spm);
    if (rc != 0 || !strstr(out, "decode ceiling: none (1.0 MB per token fits in the") || strstr(out, "of it\n") ||
        !strstr(out, "attention layers only: the position is lowered") || strstr(out, "recurrent") ||
        !strstr(err, "warning: -n has no effect with --cost") || !strstr(err, "warning: --raw has no effect with --cost"))
        fail_msg("bench-spec --cost on stories260K: exit %d, stdout:\n%sstderr:\n%s", rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
    out = err = NULL;
    /* the prompts mode names --cost-pos, which only --cost reads; its total counts the tokens after
     * each prompt's first: 1 prompt, -n 6 -> 5 */
    char pf[512];
    fx_tmp_path(pf, sizeof pf, "bs-prompt.txt");
    FILE *f = fopen(pf, "w");
    assert_non_null(f);
    fputs("Once upon a time", f);
    fclose(f);
    rc = ru_tern(&out, &err, "bench-spec -m '%s' --prompts '%s' -n 6 -t 1 --cost-pos 8", spm, pf);
    if (rc != 0 || !strstr(err, "warning: --cost-pos has no effect without --cost") ||
        !strstr(out, "total: 5 tokens in all, not counting each prompt's first"))
        fail_msg("bench-spec --prompts on stories260K: exit %d, stdout:\n%sstderr:\n%s", rc, out ? out : "", err ? err : "");
    remove(pf);
    free(out);
    free(err);
    out = NULL;
    rc = ru_tern(&out, NULL, "bench-spec -m '%s' --cost -t 1 --reps 1 --draft-max 2 -c 128", hyb);
    if (rc != 0 || !strstr(out, "the recurrent state restored and 16 tokens replayed"))
        fail_msg("bench-spec --cost on the qwen35 tiny: exit %d, stdout:\n%s", rc, out ? out : "");
    free(out);
}

/* Without -c, the context is 4096 capped at the model's trained length, with a one-line notice
 * (stories260K: 2048; qwen3-tiny, trained on 40960: 4096, no notice); an -c past the trained
 * length is kept, with a warning. Checked by what fits: a prompt of more than 2048 and fewer than
 * 4096 tokens is refused by the default context and runs with -c 4096. */
static void test_default_ctx_trained(void **state) {
    (void)state;
    char spm[1024], bpe[1024], file[512];
    fx_require(spm, sizeof spm, STORIES);
    fx_require(bpe, sizeof bpe, "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf");
    fx_tmp_path(file, sizeof file, "long-prompt.txt");
    /* the prompt's length in tokens, counted here */
    tern_model *m = mfx_load(spm, TERN_NUMERICS_FAST, 1);
    char *text = malloc(20000);
    text[0] = '\0';
    for (int i = 0; i < 700; i++) strcat(text, "Once upon a time ");
    tern_err err = {0};
    int n_tok = 0;
    tern_tokenize(m, text, strlen(text), true, false, NULL, 0, &n_tok, &err);
    tern_model_free(m);
    if (n_tok <= 2048 || n_tok >= 4096) fail_msg("the prompt is %d tokens, expected 2049..4095", n_tok);
    write_file(file, text, strlen(text));
    free(text);
    const char *notice = "context 2048 tokens, the model's trained length (the default 4096 is longer; -c N sets it)";
    char *out = NULL, *errs = NULL, want[1024];
    int rc = ru_tern(&out, &errs, "run -m '%s' -f '%s' -n 1 --temp 0 -t 1", spm, file);
    snprintf(want, sizeof want, "the prompt file '%s' (-f) is too long for the context: %d tokens, expected at most 2047", file, n_tok);
    if (rc != 1 || !strstr(errs, "tern run: ") || !strstr(errs, notice) || !strstr(errs, want))
        fail_msg("default context: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    rc = ru_tern(&out, &errs, "run -m '%s' -f '%s' -n 1 --temp 0 -t 1 -c 4096", spm, file);
    if (rc != 0 || strstr(errs, notice) ||
        !strstr(errs, "tern run: warning: -c 4096 is longer than the model's trained context (2048 tokens); text past position 2048 may degrade"))
        fail_msg("-c 4096: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    rc = ru_tern(&out, &errs, "run -m '%s' -p Once -n 1 --temp 0 -t 1 -c 2048", spm);   /* the trained length: silent */
    if (rc != 0 || strstr(errs, "trained")) fail_msg("-c 2048: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    /* without -c: a run that cannot reach the cap (4 bytes of prompt + 2000 tokens < 2048) is
     * silent; one that can (-n 2045, or -n -1: until the end) gets the notice */
    rc = ru_tern(&out, &errs, "run -m '%s' -p Once -n 2000 --ignore-eos --temp 0 -t 1", spm);
    if (rc != 0 || strstr(errs, "trained")) fail_msg("-n 2000: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    rc = ru_tern(&out, &errs, "run -m '%s' -p Once -n 2045 --ignore-eos --temp 0 -t 1", spm);
    if (rc != 0 || !strstr(errs, notice)) fail_msg("-n 2045: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    rc = ru_tern(&out, &errs, "run -m '%s' -p Once -n -1 --temp 0 -t 1", spm);
    if (rc != 0 || !strstr(errs, notice)) fail_msg("-n -1: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    rc = ru_tern(&out, &errs, "run -m '%s' -p Once -n 1 --temp 0 -t 1", bpe);              /* trained 40960: 4096, silent */
    if (rc != 0 || strstr(errs, "trained")) fail_msg("qwen3-tiny: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    rc = ru_tern(&out, &errs, "chat -m '%s' -n 1 --temp 0 -t 1 </dev/null", spm);
    if (rc != 0 || !strstr(errs, "tern chat: context 2048 tokens, the model's trained length") || !strstr(errs, ", 1 thread, context 2048, seed"))
        fail_msg("chat: exit %d, stderr: %s", rc, errs);
    free(out);
    free(errs);
    /* serve: the notice and the context it listens with (stopped by SIGINT once it listens) */
    int st = -1;
    char args[2048];
    snprintf(args, sizeof args, "-m '%s' --port 0 -t 1", spm);
    out = ru_serve_signal(args, SIGINT, &st);
    if (st != 0 || !strstr(out, "tern serve: context 2048 tokens, the model's trained length") || !strstr(out, "(4 slots, context 2048, "))
        fail_msg("serve: expected exit 0, the notice and '(4 slots, context 2048, ' (-np's default 4), got %d: %s", st, out);
    free(out);
    /* one slot is "1 slot" */
    /* and the kernel path and threads it runs (TERN_ISA=ref: the path every build and CPU has) */
    snprintf(args, sizeof args, "-m '%s' --port 0 -t 1 -np 1", spm);
    setenv("TERN_ISA", "ref", 1);
    out = ru_serve_signal(args, SIGINT, &st);
    unsetenv("TERN_ISA");
    if (st != 0 || !strstr(out, "(1 slot, context 2048, ref, 1 thread)"))
        fail_msg("serve -np 1: expected exit 0 and '(1 slot, context 2048, ref, 1 thread)', got %d: %s", st, out);
    free(out);
    remove(file);
}

/* ---- README ---------------------------------------------------------------------------------- */

/* README.md of this checkout: the current directory's (make runs the tests from the root), or
 * beside the tern binary, or two levels above it (build/debug/tern). Caller frees. */
static char *read_readme(void) {
    char bin[4096], path[4200];
    ru_tern_bin(bin, sizeof bin);
    char *slash = strrchr(bin, '/');
    if (slash) *slash = '\0';
    const char *tries[3] = {".", bin, NULL};
    char up[4200];
    snprintf(up, sizeof up, "%s/../..", bin);
    tries[2] = up;
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/README.md", tries[i]);
        char *t = fx_read_file(path, NULL);
        if (t && strstr(t, "# tern")) return t;
        free(t);
    }
    fail_msg("README.md not found (tried ., %s, %s)", bin, up);
    return NULL;
}

/* What the README and docs/CLI.md tell a new user holds: the README says synth models have random
 * weights and shows perplexity with -c and --chunks (that command runs on stories260K), and
 * CLI.md lists the chat commands, each of which does what it says when typed into tern chat. */
static void test_readme_usage(void **state) {
    (void)state;
    char model[1024], text[1024];
    fx_require(model, sizeof model, STORIES);
    fx_require(text, sizeof text, "data/tinystories-sample/tinystories_sample.txt");
    char *readme = read_readme();
    const char *must[] = {"writes models with *random* ternary weights", "./tern perplexity -m model.gguf -f text.txt -c 512 --chunks 20"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!strstr(readme, must[i])) fail_msg("README.md does not say: %s", must[i]);
    free(readme);
    char *cli = fx_read_file("docs/CLI.md", NULL);   /* make runs the tests from the checkout's root */
    if (!cli) fail_msg("docs/CLI.md not found in the current directory");
    const char *table[] = {"| `/help` |", "| `/clear` |", "| `/exit`, `/quit`, `/bye`, Ctrl-D |", "| Ctrl-C |", "| `//text` |",
                           "| any other `/word` |"};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strstr(cli, table[i])) fail_msg("docs/CLI.md does not list: %s", table[i]);
    free(cli);
    /* the README's stories260K perplexity command runs and ends with PPL = x, x in (1, 10) */
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "perplexity -m '%s' -f '%s' -c 256 -t 1", model, text);
    const char *ppl = strstr(out, "PPL = ");
    if (rc != 0 || !ppl || !(atof(ppl + 6) > 1.0 && atof(ppl + 6) < 10.0)) fail_msg("perplexity: exit %d, %s%s", rc, out, err);
    free(out);
    free(err);
    /* the chat commands, typed in: /help, an unknown /word (not sent; its control bytes echoed as
     * \xNN, never raw to the terminal, and a word past 64 bytes cut before the UTF-8 character
     * that would cross byte 64: "/ab" and 40 x "é" shows "/ab" and 30 of them), //text (sent), /clear,
     * /bye (Ollama's quit: what follows it is never read) */
    char input[512], long_word[128] = "/ab", long_want[128] = "unknown command /ab";
    for (int i = 0; i < 40; i++) strcat(long_word, "\xc3\xa9");
    for (int i = 0; i < 30; i++) strcat(long_want, "\xc3\xa9");
    strcat(long_want, "; try /help");
    fx_tmp_path(input, sizeof input, "chat-commands.txt");
    char lines[512];
    snprintf(lines, sizeof lines, "/help\n/bogus words\n/bo\033[2Jgus\x01 x\n%s\n//slash\n/clear \n/bye\t\nnever sent\n",
             long_word);                                                              /* blanks after a command */
    write_file(input, lines, strlen(lines));
    rc = ru_tern(&out, &err, "chat -m '%s' -n 2 --temp 0 -t 1 < '%s'", model, input);
    static const char help[] = "/help lists these commands, /clear starts a new conversation, /exit, /quit or /bye (or "
                               "Ctrl-D) quits, Ctrl-C stops a reply; start a message with // to send a text that begins with /";
    const char *want[] = {help, "unknown command /bogus; try /help", "unknown command /bo\\x1b[2Jgus\\x01; try /help",
                          long_want, "[new conversation]"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (rc != 0 || !strstr(out, want[i])) fail_msg("chat: exit %d, no \"%s\" in stdout: %s\nstderr: %s", rc, want[i], out, err);
    if (strchr(out, '\033') || strchr(out, '\x01')) fail_msg("chat: a control byte of a typed command reached stdout: %s", out);
    /* exactly one turn: //slash; /help, /bogus, /clear and the line after /bye are not sent */
    const char *t1 = strstr(err, "[turn 1:");
    if (!t1 || strstr(t1 + 1, "[turn ")) fail_msg("chat: expected exactly one turn, stderr: %s", err);
    free(out);
    free(err);
    remove(input);
}

/* ---- files named on the command line ------------------------------------------------------------- */

/* Every file-taking flag of every command names the command, the flag, the file and the OS's
 * reason (strerror, computed here) and exits 1: a missing model (-m) for each model command, a
 * missing or unreadable prompt, text or id file, synth's inputs, quantize's and info's inputs. */
static void test_file_errors(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    const char *nx = "/nonexistent/tern-test";
    char enoent[128], eisdir[128];
    snprintf(enoent, sizeof enoent, "%s", strerror(ENOENT));
    snprintf(eisdir, sizeof eisdir, "%s", strerror(EISDIR));
    struct { const char *args, *want_fmt, *reason; } cases[] = {
        {"run -m %1$s.gguf -p x", "tern run: -m: cannot open '%1$s.gguf': %2$s", enoent},
        {"bench -m %1$s.gguf -p 1 -n 1", "tern bench: -m: cannot open '%1$s.gguf': %2$s", enoent},
        {"perplexity -m %1$s.gguf --tokens %1$s.txt", "tern perplexity: --tokens: cannot open '%1$s.txt': %2$s", enoent},
        {"perplexity -m %1$s.gguf -f %3$s", "tern perplexity: -m: cannot open '%1$s.gguf': %2$s", enoent},
        {"chat -m %1$s.gguf", "tern chat: -m: cannot open '%1$s.gguf': %2$s", enoent},
        {"serve -m %1$s.gguf --port 0", "tern serve: -m: cannot open '%1$s.gguf': %2$s", enoent},
        {"bench-spec -m %1$s.gguf --cost", "tern bench-spec: -m: cannot open '%1$s.gguf': %2$s", enoent},
        {"run -m %3$s -f %1$s.txt", "tern run: -f: cannot open '%1$s.txt': %2$s", enoent},
        {"run -m %3$s -f /", "tern run: -f: cannot read '/': %2$s", eisdir},
        /* a stream that never ends is read up to the 1 GiB limit, not until memory runs out */
        {"tokenize -m %3$s -f /dev/zero", "tern tokenize: -f: '/dev/zero' is over 1024 MiB (1073741824 bytes), the most an input "
                                          "file may be", ""},
        {"perplexity -m %3$s -f %1$s.txt", "tern perplexity: -f: cannot open '%1$s.txt': %2$s", enoent},
        {"perplexity -m %3$s -f /", "tern perplexity: -f: cannot read '/': %2$s", eisdir},
        {"perplexity -m %3$s --tokens /", "tern perplexity: --tokens: cannot read '/': %2$s", eisdir},
        {"bench-spec -m %3$s --prompts %1$s.txt", "tern bench-spec: --prompts: cannot open '%1$s.txt': %2$s", enoent},
        {"synth --arch qwen3-tiny --tokenizer %1$s.json -o %1$s.gguf", "tern synth: --tokenizer: cannot open '%1$s.json': %2$s", enoent},
        {"synth --arch qwen3-tiny --chat-template %1$s.j2 -o %1$s.gguf", "tern synth: --chat-template: cannot open '%1$s.j2': %2$s", enoent},
        {"synth --arch qwen3-tiny --tokenizer %3$s -o %1$s.gguf", "tern synth: --tokenizer: '%3$s': invalid JSON near byte 0", enoent},
        {"quantize %1$s.gguf %1$s-out.gguf --type f32", "tern quantize: cannot open '%1$s.gguf': %2$s", enoent},
        {"info %1$s.gguf", "tern info: cannot open '%1$s.gguf': %2$s", enoent},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], want[2048];
        snprintf(args, sizeof args, cases[i].args, nx, cases[i].reason, model);
        snprintf(want, sizeof want, cases[i].want_fmt, nx, cases[i].reason, model);
        strcat(args, " </dev/null");
        expect_tern(1, want, args);
    }
}

/* A context that holds only the BOS token (no prompt, -c 1) is named as such, not as a prompt
 * that is too long. */
static void test_ctx_only_bos(void **state) {
    (void)state;
    char model[1024], args[2048];
    fx_require(model, sizeof model, STORIES);
    snprintf(args, sizeof args, "run -m '%s' -c 1 -n 3 -t 1 </dev/null", model);
    expect_tern(1, "tern run: the context (-c 1) holds only the BOS token the generation starts from, with no room to "
                   "generate: expected -c 2 or more", args);
}

/* synth --tokenizer refuses, before writing anything, a tokenizer.json whose ids would make a
 * model of millions of rows (an added token's id past the largest vocabulary), a byte-level BPE
 * vocabulary without a token for every byte (the loader would refuse the file it wrote), an added
 * token that replaces a vocabulary token or another added token, bad ids and contents, and merges
 * that "left right" cannot hold, each message naming the entry and what came. */
static void test_synth_tokenizer_refusals(void **state) {
    (void)state;
    char tok[1024], out[1024], args[4096], want[2048];
    fx_tmp_path(tok, sizeof tok, "tok-refusal.json");
    fx_tmp_path(out, sizeof out, "tok-refusal.gguf");
    const char *huge = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]},"
                       "\"added_tokens\":[{\"id\":1048576,\"content\":\"<x>\",\"special\":true}]}";
    write_file(tok, huge, strlen(huge));
    unlink(out);
    snprintf(args, sizeof args, "synth --arch qwen3-tiny --tokenizer '%s' -o '%s' </dev/null", tok, out);
    snprintf(want, sizeof want, "tern synth: --tokenizer: '%s': token id 1048576: expected ids below 1048576", tok);
    expect_tern(1, want, args);
    assert_int_equal(access(out, F_OK), -1);
    const char *nobytes = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}";
    write_file(tok, nobytes, strlen(nobytes));
    /* byte 0x00 is U+0100 in GPT-2's byte alphabet */
    snprintf(want, sizeof want, "tern synth: --tokenizer: '%s': model.vocab: byte-level BPE needs a token for each of the 256 "
                                "bytes; byte 0x00 (\"\xc4\x80\") has none", tok);
    expect_tern(1, want, args);
    assert_int_equal(access(out, F_OK), -1);
    /* a full byte alphabet (GPT-2's map, written here: bytes 33..126, 161..172, 174..255 stand for
     * themselves, the other 68 for U+0100.. in byte order), then an added token on byte 0x05's id
     * with other text, an added id given twice with two texts, a negative id, an empty content,
     * merges that cannot be written as "left right", and merges of texts that are not tokens */
    char *full = malloc(16384);
    size_t n = (size_t)snprintf(full, 16384, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0, extra = 0; b < 256; b++) {
        const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        const unsigned cp = self ? (unsigned)b : 256u + (unsigned)extra++;
        char u[8];
        if (cp == '"' || cp == '\\') snprintf(u, sizeof u, "\\%c", (char)cp);
        else if (cp < 0x80) snprintf(u, sizeof u, "%c", (char)cp);
        else snprintf(u, sizeof u, "%c%c", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)));
        n += (size_t)snprintf(full + n, 16384 - n, "%s\"%s\":%d", b ? "," : "", u, b);
    }
    /* each case: the text after the vocabulary's entries, and what the refusal says */
#define ADDED(a) "},\"merges\":[]},\"added_tokens\":[" a "]}"
#define MERGE(m) "},\"merges\":[" m "]}}"
#define MERGE_WHY "model.merges[0]: expected a non-empty left token without spaces and a right token (\"a b\" or [\"a\", \"b\"]), "
#define MERGE_VOCAB(got) "model.merges[0]: expected two tokens of model.vocab whose join is a token too, got \"" got "\", which is not in model.vocab"
    struct { const char *tail, *why; } bad[] = {
        {ADDED("{\"id\":5,\"content\":\"<x>\"}"), "added_tokens[0]: id 5 is model.vocab's \"\xc4\x85\" already, got content \"<x>\""},
        {ADDED("{\"id\":256,\"content\":\"<a>\"},{\"id\":256,\"content\":\"<b>\"}"),
         "added_tokens[1]: id 256 is an earlier added token's \"<a>\" already, got content \"<b>\""},
        {ADDED("{\"id\":-5,\"content\":\"<x>\"}"), "added_tokens[0].id: expected an integer in 0..1048575, got -5"},
        {ADDED("{\"id\":256,\"content\":\"\"}"), "added_tokens[0].content: expected a non-empty string, got \"\""},
        /* merges that "left right" cannot hold: the file written would not load (the loader splits
         * at the first space after the first byte) or would split elsewhere */
        {MERGE("\"ab\""), MERGE_WHY "got \"ab\""},
        {MERGE("[\"\",\"b\"]"), MERGE_WHY "got \"\""},
        {MERGE("[\"a b\",\"c\"]"), MERGE_WHY "got \"a b\""},
        /* merges that could never apply (Hugging Face refuses them too): a part or the join not
         * a token (this vocabulary has the 256 byte tokens only) */
        {MERGE("\"a  b\""), MERGE_VOCAB(" b")},
        {MERGE("[\"a\",\"zz\"]"), MERGE_VOCAB("zz")},
        {MERGE("\"a b\""), MERGE_VOCAB("ab")},
    };
    char *j = malloc(n + 256);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(j, n + 256, "%.*s%s", (int)n, full, bad[i].tail);
        write_file(tok, j, strlen(j));
        snprintf(want, sizeof want, "tern synth: --tokenizer: '%s': %s", tok, bad[i].why);
        expect_tern(1, want, args);
        assert_int_equal(access(out, F_OK), -1);
    }
    /* the same text on an added id twice is one token: written */
    snprintf(j, n + 256, "%.*s" ADDED("{\"id\":256,\"content\":\"<a>\"},{\"id\":256,\"content\":\"<a>\"}"), (int)n, full);
#undef ADDED
#undef MERGE
#undef MERGE_WHY
#undef MERGE_VOCAB
    write_file(tok, j, strlen(j));
    free(j);
    free(full);
    char *errs = NULL;
    if (ru_tern(NULL, &errs, "%s", args) != 0 || access(out, F_OK) != 0) fail_msg("a repeated added token: %s", errs);
    free(errs);
    unlink(out);
    unlink(tok);
}

/* bench-spec --cost: a measurement position and draft past the context (-c) is a usage error
 * (exit 2) that names the three flags; 300 + (4 + 1) > 256. */
static void test_cost_pos_past_context(void **state) {
    (void)state;
    char model[1024], args[2048];
    fx_require(model, sizeof model, STORIES);
    snprintf(args, sizeof args, "bench-spec -m '%s' --cost --cost-pos 300 -c 256 --draft-max 4 -t 1 </dev/null", model);
    expect_tern(2, "tern bench-spec: --cost-pos 300 + 5 tokens (--draft-max + 1) > context 256 (-c)", args);
}

/* ---- tern run: the streamed continuation appends to the prompt ------------------------------------ */

/* Greedy continuation of prompt on stories260K computed here through the API (argmax, no
 * sampler), and the whole sequence's text from the pieces (tern_token_piece), with the SPM rule
 * for a whole sequence: the first piece after BOS loses its leading space. Returns the
 * continuation text = whole text minus the prompt (malloc'd). */
static char *stories_continuation(const char *model_path, const char *prompt, int n_gen) {
    tern_model *m = mfx_load(model_path, TERN_NUMERICS_FAST, 1);
    tern_session *s = mfx_session(m, 256, 256, false);
    tern_err err = {0};
    int32_t ids[256];
    int n = 0;
    assert_int_equal(tern_tokenize(m, prompt, strlen(prompt), true, false, ids, 128, &n, &err), TERN_OK);
    assert_int_equal(ids[0], 1);                                 /* BOS */
    const float *l = tern_session_eval(s, ids, n, &err);
    assert_non_null(l);
    for (int i = 0; i < n_gen; i++) {
        const int32_t id = mfx_argmax(l, 512);
        assert_false(tern_token_is_eog(m, id));
        ids[n++] = id;
        if (i + 1 < n_gen) assert_non_null(l = tern_session_eval(s, &id, 1, &err));
    }
    char whole[4096];
    size_t k = 0;
    bool first = true;
    for (int i = 0; i < n; i++) {
        char piece[64];
        const int np = tern_token_piece(m, ids[i], false, piece, sizeof piece);
        assert_true(np >= 0 && np < (int)sizeof piece);
        const char *p = piece;
        int len = np;
        if (first && len > 0) {
            if (p[0] == ' ') { p++; len--; }
            first = false;
        }
        memcpy(whole + k, p, (size_t)len);
        k += (size_t)len;
    }
    whole[k] = '\0';
    const size_t pl = strlen(prompt);
    if (k < pl || memcmp(whole, prompt, pl) != 0) fail_msg("the whole text does not start with the prompt: %s", whole);
    tern_session_free(s);
    tern_model_free(m);
    return strdup(whole + pl);
}

/* The continuation of "Once upon a time, there was a little" starts with the piece " girl": the
 * stream after a prompt keeps its space (never "girl named", glued to the prompt). */
static void test_run_continuation_keeps_space(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    const char *prompt = "Once upon a time, there was a little";
    char *want = stories_continuation(model, prompt, 12);
    if (want[0] != ' ') fail_msg("the fixture's continuation should start with a space: '%s'", want);
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "run -m '%s' -p '%s' --temp 0 -n 12 -t 1", model, prompt);
    if (rc != 0) fail_msg("tern run: exit %d: %s", rc, err);
    const size_t wl = strlen(want);
    if (strlen(out) != wl + 1 || memcmp(out, want, wl) != 0 || out[wl] != '\n')
        fail_msg("tern run printed '%s', expected '%s' + newline", out, want);
    free(out);
    free(err);
    /* --echo: prompt + continuation = the whole text */
    rc = ru_tern(&out, &err, "run -m '%s' -p '%s' --temp 0 -n 12 -t 1 --echo", model, prompt);
    if (rc != 0) fail_msg("tern run --echo: exit %d: %s", rc, err);
    if (strncmp(out, prompt, strlen(prompt)) != 0 || strncmp(out + strlen(prompt), want, wl) != 0)
        fail_msg("tern run --echo printed '%s'", out);
    free(out);
    free(err);
    free(want);
}

/* ---- invalid UTF-8 in prompts and chat input ------------------------------------------------------ */

/* Valid UTF-8 by utf8proc (independent of the tokenizer's checker). */
static bool utf8_ok(const char *s) {
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    utf8proc_ssize_t n = (utf8proc_ssize_t)strlen(s);
    while (n > 0) {
        utf8proc_int32_t cp;
        const utf8proc_ssize_t k = utf8proc_iterate(p, n, &cp);
        if (k <= 0) return false;
        p += k;
        n -= k;
    }
    return true;
}

/* The documented behaviour (tern run --help): a prompt that is not UTF-8 is tokenised byte by byte
 * with a warning naming the first bad byte; stdout (--echo and the generation) stays valid UTF-8,
 * each maximal invalid subpart shown as one U+FFFD. Chat input: replaced by U+FFFD, with a notice.
 * Both tokenizer kinds (SentencePiece stories260K: -p, -f, chat with bad bytes and with a NUL;
 * byte-level BPE qwen3-tiny: -p and chat); never a crash. */
/* A prompt that starts with BOS (written with --parse-special) on a model that adds BOS itself:
 * a warning that the sequence starts with two (as llama.cpp warns); without --parse-special the
 * text "<s>" is plain text and nothing is said. */
static void test_run_double_bos(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    const char *warn = "tern run: warning: the prompt starts with the BOS token and the model adds one too: two BOS tokens";
    char *out = NULL, *err = NULL;
    int rc = ru_tern(&out, &err, "run -m '%s' -p '<s>Once' --parse-special -n 2 --temp 0 --no-progress", model);
    if (rc != 0 || !strstr(err, warn)) fail_msg("--parse-special '<s>Once': exit %d, stderr: %s", rc, err);
    free(out);
    free(err);
    rc = ru_tern(&out, &err, "run -m '%s' -p '<s>Once' -n 2 --temp 0 --no-progress", model);
    if (rc != 0 || strstr(err, "two BOS")) fail_msg("'<s>Once' as text: exit %d, stderr: %s", rc, err);
    free(out);
    free(err);
}

static void test_invalid_utf8_input(void **state) {
    (void)state;
    char spm[1024], bpe[1024], file[512], input[512];
    fx_require(spm, sizeof spm, STORIES);
    fx_require(bpe, sizeof bpe, "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf");
    /* "caf" C3 (truncated), FF, FE, " ok ", ED A0 80 (a surrogate), F0 9F (truncated at the end) */
    const char *bad = "caf\xC3 \xFF\xFE ok \xED\xA0\x80 \xF0\x9F";
    const char *shown = "caf\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD ok \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD";
    fx_tmp_path(file, sizeof file, "bad-utf8.txt");
    fx_tmp_path(input, sizeof input, "bad-utf8-chat.txt");
    write_file(file, bad, strlen(bad));
    const char *models[2] = {spm, bpe};
    for (int k = 0; k < 2; k++) {
        /* the byte-level BPE model costs minutes under qemu in CI: -p only there */
        for (int from_file = 0; from_file < (k == 0 ? 2 : 1); from_file++) {
            char *out = NULL, *err = NULL, want[1200];
            int rc;
            if (from_file) rc = ru_tern(&out, &err, "run -m '%s' -f '%s' -n 2 --temp 0 -t 1 --echo", models[k], file);
            else rc = ru_tern(&out, &err, "run -m '%s' -p '%s' -n 2 --temp 0 -t 1 --echo", models[k], bad);
            char what[1100] = "the prompt (-p)";
            if (from_file) snprintf(what, sizeof what, "the prompt file '%s' (-f)", file);
            snprintf(want, sizeof want, "tern run: warning: %s is not valid UTF-8 (first bad byte 0xc3 at offset 3 of 17)", what);
            if (rc != 0 || !strstr(err, want)) fail_msg("%s %s: exit %d, stderr: %s", models[k], from_file ? "-f" : "-p", rc, err);
            if (strncmp(out, shown, strlen(shown)) != 0 || !utf8_ok(out))
                fail_msg("%s: stdout is not the repaired prompt + valid UTF-8: '%s'", models[k], out);
            free(out);
            free(err);
        }
        /* chat: a message with invalid bytes and one with a NUL byte, each the second line of stdin; the note
         * names the line and counts the bytes replaced of the line's (without its newline): 0xFF and the
         * truncated 0xC3 (2 of 11), the NUL (1 of 10) */
        const char lines[2][24] = {"hello\nhi \xFF\xC3 there\n", "hello\nhi \0 there\n"};
        const size_t line_len[2] = {6 + 12, 6 + 11};
        const char *notes[2] = {"tern chat: your message (line 2 of stdin) is not valid UTF-8 (first bad byte 0xff at offset 3 of "
                                "11); 2 of its 11 bytes were replaced by U+FFFD",
                                "tern chat: your message (line 2 of stdin) has a NUL byte at offset 3 of 10 (no text holds one: it "
                                "would end the message there); 1 of its 10 bytes was replaced by U+FFFD"};
        for (int l = 0; l < (k == 0 ? 2 : 1); l++) {
            char *out = NULL, *err = NULL;
            write_file(input, lines[l], line_len[l]);
            const int rc = ru_tern(&out, &err, "chat -m '%s' -n 2 --temp 0 -t 1 < '%s'", models[k], input);
            if (rc != 0 || !strstr(err, notes[l]) || !utf8_ok(out))
                fail_msg("chat %s line %d: exit %d, stderr: %s, stdout: %s", models[k], l, rc, err, out);
            free(out);
            free(err);
        }
        if (k == 0) {   /* the system prompt (-sys): the same repair, with a note naming it */
            char *out = NULL, *err = NULL;
            write_file(input, "hi\n", 3);
            const int rc = ru_tern(&out, &err, "chat -m '%s' -n 2 --temp 0 -t 1 -sys 'be \xFF\xC3 nice' < '%s'", models[k], input);
            const char *note = "tern chat: the system prompt (-sys) is not valid UTF-8 (first bad byte 0xff at offset 3 of "
                               "10); 2 of its 10 bytes were replaced by U+FFFD";   /* 0xFF and the truncated 0xC3 */
            if (rc != 0 || !strstr(err, note) || !utf8_ok(out))
                fail_msg("chat -sys %s: exit %d, stderr: %s, stdout: %s", models[k], rc, err, out);
            free(out);
            free(err);
        }
    }
    remove(file);
    remove(input);
}

/* perplexity --tokens: the last id is only a prediction target, yet an out-of-range last id is
 * refused like any other: as an index it would read past the logits (segfault for 99999, a
 * silently wrong PPL for n_vocab). */
static void test_perplexity_tokens_range(void **state) {
    (void)state;
    char model[1024], ids[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(ids, sizeof ids, "ppl-ids.txt");
    const char *bad[] = {"1 2 99999\n", "1 2 512\n", "1 -3 2\n"};
    const char *want[] = {"id 99999 at index 2: expected an id in 0..511 (the model's vocabulary)",
                          "id 512 at index 2: expected an id in 0..511 (the model's vocabulary)",
                          "index 1 at byte 2: expected an integer id in 0..2147483647 (ids separated by spaces or commas), got '-3'"};
    char args[2048];
    snprintf(args, sizeof args, "perplexity -m '%s' --tokens '%s'", model, ids);
    for (int i = 0; i < 3; i++) {
        write_file(ids, bad[i], strlen(bad[i]));
        expect_tern(1, want[i], args);
    }
    write_file(ids, "1 2 511\n", 8);                   /* in range: runs */
    expect_tern(0, "", args);
    remove(ids);
}

/* A count of one takes the singular noun, in every message of the programs that can say "1":
 * each case pins the count by construction. --tokens "1 2": 2 ids give 1 next-token prediction;
 * --chunks 1: one chunk; -l 1+1000 (BOS, stories260K's end-of-generation token, far above every
 * other logit): the reply is that one token; chat -n 1: a one-token reply; run -n 2 --spec lookup:
 * the first token comes from the prompt's logits, the second from one verification forward. */
static void test_singular_counts(void **state) {
    (void)state;
    char model[1024], text[1024], ids[512], input[512];
    fx_require(model, sizeof model, STORIES);
    fx_require(text, sizeof text, "data/tinystories-sample/tinystories_sample.txt");
    fx_tmp_path(ids, sizeof ids, "singular-ids.txt");
    fx_tmp_path(input, sizeof input, "singular-chat.txt");
    write_file(ids, "1 2\n", 4);
    write_file(input, "Hello\n", 6);
    struct { const char *args, *want_out, *want_err; } cases[] = {
        {"perplexity -m '%1$s' --tokens '%3$s' -t 1", "perplexity: 2 tokens, 1 prediction scored (every next token)", NULL},
        {"perplexity -m '%1$s' -f '%2$s' -c 16 --chunks 1 -t 1", " tokens, 1 chunk of 16, scoring positions 8..14", NULL},
        {"run -m '%1$s' -p Once --temp 0 -n -1 -t 1 -l 1+1000", NULL,
         "tern run: end of text after 1 token (the model's end-of-generation token;"},
        {"run -m '%1$s' -p Once --temp 0 -n 1 -t 1 -l 1+1000", NULL, "generation: 1 token (no decode step"},
        {"chat -m '%1$s' -n 1 --temp 0 -t 1 < '%4$s'", NULL, " s, 1 token at "},
        {"run -m '%1$s' -p Once --temp 0 -n 2 -t 1 --spec lookup", NULL, ", 1 verification, 1 token (1.00 per forward)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[4096];
        snprintf(args, sizeof args, cases[i].args, model, text, ids, input);
        char *out = NULL, *err = NULL;
        const int rc = ru_tern(&out, &err, "%s", args);
        if (rc != 0 || (cases[i].want_out && !strstr(out, cases[i].want_out)) ||
            (cases[i].want_err && !strstr(err, cases[i].want_err)))
            fail_msg("tern %s: exit %d, expected \"%s\"; stdout: %s\nstderr: %s", args, rc,
                     cases[i].want_out ? cases[i].want_out : cases[i].want_err, out, err);
        free(out);
        free(err);
    }
    remove(ids);
    remove(input);
}

/* run --help states the sampler's order as the chain applies it (src/sampling/sampler.c:
 * sampler_chain: bias, penalty, top-k, top-p, min-p, then the draw at the temperature), and
 * docs/CLI.md lists the same stages in the same order. */
static void test_help_sampling_order(void **state) {
    (void)state;
    char *out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "run --help"), 0);
    const char *want = "sampling follows llama.cpp's order: logit bias (-l) -> repeat penalty -> top-k -> top-p -> min-p -> "
                       "temperature\n";
    if (!strstr(out, want)) fail_msg("run --help does not say \"%s\":\n%s", want, out);
    free(out);
    char *cli = fx_read_file("docs/CLI.md", NULL);
    if (!cli) fail_msg("docs/CLI.md not found in the current directory");
    if (!strstr(cli, "in llama.cpp's order: logit bias, repeat penalty, top-k, top-p, min-p,\ntemperature."))
        fail_msg("docs/CLI.md does not list the sampling order logit bias, repeat penalty, top-k, top-p, min-p, temperature");
    free(cli);
}

/* docs/CLI.md quotes the -t range error as the program words it: this host's message with its
 * bound (4 per online CPU, from sysconf here) put back to the 2-CPU host's 8 that the doc names. */
static void test_doc_threads_error(void **state) {
    (void)state;
    char *err = NULL, want[200], doc[200];
    assert_int_equal(ru_tern(NULL, &err, "run -t 1000"), 2);
    snprintf(want, sizeof want, "tern run: -t: expected an integer in 1..%ld, that is 4 per online CPU, got '1000'\n",
             max_threads());
    if (strcmp(err, want)) fail_msg("tern run -t 1000: stderr %s(expected %s)", err, want);
    free(err);
    snprintf(doc, sizeof doc, "on a host with 2 online CPUs, `tern run -t 1000` says `tern run: -t: expected an integer "
             "in 1..8,\nthat is 4 per online CPU, got '1000'`");
    char *cli = fx_read_file("docs/CLI.md", NULL);
    if (!cli) fail_msg("docs/CLI.md not found in the current directory");
    if (!strstr(cli, doc)) fail_msg("docs/CLI.md does not quote the -t error as: %s", doc);
    free(cli);
}

/* README.md and docs/CLI.md say what --spec lookup keeps: the greedy text, and with sampling only
 * the distribution, so a fixed --seed gives another text than the run without it. The sampled case
 * is shown on a prompt that repeats itself (drafts are accepted, so the draws fall elsewhere). */
static void test_doc_spec_sampling(void **state) {
    (void)state;
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    const char *docs[][2] = {
        {"README.md", "with\n`--temp` above 0 and a fixed `--seed` the text differs from the run without it: the same\n"
                      "distribution, not the same random draws"},
        {"docs/CLI.md", "With `--temp` above 0 the tokens\nfollow the same distribution as plain decoding but not the same "
                        "random draws, so with a fixed\n`--seed` the text differs from the run without `--spec lookup`"},
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char *text = fx_read_file(docs[i][0], NULL);
        if (!text || !strstr(text, docs[i][1])) fail_msg("%s does not say: %s", docs[i][0], docs[i][1]);
        free(text);
    }
    const char *p = "Once upon a time, there was a little girl named Lily. Once upon a time, there was a little girl named Lily.";
    char *plain = NULL, *spec = NULL;
    assert_int_equal(ru_tern(&plain, NULL, "run -m '%s' -p '%s' -n 60 --seed 7 -t 1", model, p), 0);
    assert_int_equal(ru_tern(&spec, NULL, "run -m '%s' -p '%s' -n 60 --seed 7 -t 1 --spec lookup", model, p), 0);
    if (!strcmp(plain, spec)) fail_msg("--seed 7 at the default temperature: the same text with --spec lookup: %s", spec);
    free(plain);
    free(spec);
}

int suite_cli(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_parser),
        cmocka_unit_test(test_help_lists_each_option_once),
        cmocka_unit_test(test_values_out_of_range),
        cmocka_unit_test(test_values_at_range_ends),
        cmocka_unit_test(test_missing_value_and_unknown_option),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_cost_pos_past_context),
        cmocka_unit_test(test_synth_tokenizer_refusals),
        cmocka_unit_test(test_ctx_only_bos),
        cmocka_unit_test(test_spec_flags_without_spec),
        cmocka_unit_test(test_bench_spec_cost_pos_context),
        cmocka_unit_test(test_bench_spec_cost_lines),
        cmocka_unit_test(test_logit_bias_flag),
        cmocka_unit_test(test_default_ctx_trained),
        cmocka_unit_test(test_readme_usage),
        cmocka_unit_test(test_run_continuation_keeps_space),
        cmocka_unit_test(test_run_double_bos),
        cmocka_unit_test(test_invalid_utf8_input),
        cmocka_unit_test(test_perplexity_tokens_range),
        cmocka_unit_test(test_singular_counts),
        cmocka_unit_test(test_help_sampling_order),
        cmocka_unit_test(test_doc_threads_error),
        cmocka_unit_test(test_doc_spec_sampling),
    };
    TEST_RUN_SUITE("cli", tests);
}
