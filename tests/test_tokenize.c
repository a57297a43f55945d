/* test_tokenize.c: `tern tokenize` against the shared tokenizer vectors. The ids it prints
 * (--ids, the default "%6d -> 'PIECE'" lines, --show-count) must equal the reference runtime's
 * ids of golden/<model>/prompts.json (tokenised there with add_special and parse_special, so
 * with --parse-special here), and the default lines' pieces its token_pieces_hex; --detokenize
 * of the ids of data/qwen3-tokenizer/qwen3_encode_vectors.jsonl must give back their texts;
 * bad input is refused with the documented exit status and a message naming it. Runs the tern
 * binary built beside the test runner. */
#include "test.h"
#include "model_fx.h"
#include "run_util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORIES "data/stories260k/stories260K.gguf"
#define QWEN3 "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"

static void write_file(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(s, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Parse "[a, b, c]\n" (exactly the --ids form) into ids; returns the count, -1 if malformed. */
static int parse_id_list(const char *s, int32_t *ids, int cap) {
    if (*s++ != '[') return -1;
    int n = 0;
    if (*s == ']') return s[1] == '\n' && !s[2] ? 0 : -1;
    for (;;) {
        char *end;
        const long v = strtol(s, &end, 10);
        if (end == s || n == cap) return -1;
        ids[n++] = (int32_t)v;
        if (*end == ']') return end[1] == '\n' && !end[2] ? n : -1;
        if (end[0] != ',' || end[1] != ' ') return -1;
        s = end + 2;
    }
}

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* The bytes of a hex string as the default output shows a piece: valid UTF-8 as is, any other
 * byte as \xNN (the rule of tools/tokenize.c), written into out. */
static void piece_shown(const char *hex, char *out, size_t cap) {
    unsigned char b[256];
    size_t n = strlen(hex) / 2, o = 0;
    assert_true(n < sizeof b);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(hexval(hex[2 * i]) * 16 + hexval(hex[2 * i + 1]));
    for (size_t i = 0; i < n;) {
        /* length of a valid UTF-8 sequence at b[i] (Unicode D92: no overlongs or surrogates), 0 if none */
        size_t len = 0;
        const unsigned c = b[i];
        if (c < 0x80) len = 1;
        else if (c >= 0xc2 && c <= 0xdf) len = 2;
        else if (c >= 0xe0 && c <= 0xef) len = 3;
        else if (c >= 0xf0 && c <= 0xf4) len = 4;
        if (len > 1) {
            if (i + len > n) len = 0;
            for (size_t k = 1; len && k < len; k++)
                if ((b[i + k] & 0xc0) != 0x80) len = 0;
            if (len == 3 && ((c == 0xe0 && b[i + 1] < 0xa0) || (c == 0xed && b[i + 1] > 0x9f))) len = 0;
            if (len == 4 && ((c == 0xf0 && b[i + 1] < 0x90) || (c == 0xf4 && b[i + 1] > 0x8f))) len = 0;
        }
        if (len) { assert_true(o + len < cap); memcpy(out + o, b + i, len); o += len; i += len; }
        else { assert_true(o + 4 < cap); o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c); i++; }
    }
    out[o] = '\0';
}

/* Every prompt with a "text" of golden prompts.json: the three output forms against its ids. */
static void check_prompts(const char *model_rel, const char *prompts_rel) {
    char model[1024], txt[512];
    fx_require(model, sizeof model, model_rel);
    cJSON *j = mfx_json(prompts_rel);
    fx_tmp_path(txt, sizeof txt, "tokenize-text.txt");
    int n_checked = 0;
    const cJSON *pr;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItem(j, "prompts")) {
        const cJSON *text = cJSON_GetObjectItem(pr, "text");
        const char *pid = cJSON_GetObjectItem(pr, "id")->valuestring;
        if (!cJSON_IsString(text)) continue;
        int n_want = 0;
        int32_t *want = mfx_ids(cJSON_GetObjectItem(pr, "token_ids"), &n_want);
        const cJSON *hex = cJSON_GetObjectItem(pr, "token_pieces_hex");
        assert_int_equal(cJSON_GetArraySize(hex), n_want);
        write_file(txt, text->valuestring, strlen(text->valuestring));

        char *out = NULL, *err = NULL;
        int rc = ru_tern(&out, &err, "tokenize -m '%s' -f '%s' --parse-special --ids", model, txt);
        if (rc != 0) fail_msg("%s %s: exit %d: %s", prompts_rel, pid, rc, err);
        int32_t got[4096];
        const int n_got = parse_id_list(out, got, 4096);
        if (n_got != n_want) fail_msg("%s %s: --ids printed %d ids (%s), golden %d", prompts_rel, pid, n_got, out, n_want);
        for (int i = 0; i < n_want; i++)
            if (got[i] != want[i]) fail_msg("%s %s: id %d is %d, golden %d", prompts_rel, pid, i, got[i], want[i]);
        free(out);
        free(err);

        /* default form: one "%6d -> 'PIECE'" line per golden token, then the count line */
        rc = ru_tern(&out, &err, "tokenize -m '%s' -f '%s' --parse-special --show-count", model, txt);
        if (rc != 0) fail_msg("%s %s: exit %d: %s", prompts_rel, pid, rc, err);
        const char *p = out;
        for (int i = 0; i < n_want; i++) {
            char shown[1100], line[1200];
            piece_shown(cJSON_GetArrayItem(hex, i)->valuestring, shown, sizeof shown);
            snprintf(line, sizeof line, "%6d -> '%s'\n", (int)want[i], shown);
            if (strncmp(p, line, strlen(line)) != 0) fail_msg("%s %s: line %d: expected %s got %.80s", prompts_rel, pid, i, line, p);
            p += strlen(line);
        }
        char count[64];
        snprintf(count, sizeof count, "Total number of tokens: %d\n", n_want);
        if (strcmp(p, count) != 0) fail_msg("%s %s: after the tokens expected \"%s\", got \"%s\"", prompts_rel, pid, count, p);
        free(out);
        free(err);
        free(want);
        n_checked++;
    }
    remove(txt);
    cJSON_Delete(j);
    assert_true(n_checked >= 3);   /* the files hold at least plain, unicode and empty prompts */
}

static void test_golden_prompt_ids(void **state) {
    (void)state;
    char bin[4096];
    ru_need_tern(bin, sizeof bin);
    check_prompts(STORIES, "golden/stories260k/prompts.json");
    check_prompts(QWEN3, "golden/qwen3-tiny-pq2_0/prompts.json");
}

/* A vocabulary-only GGUF (no tensors: the Llama 2 SPM vocabulary) tokenises as llama-tokenize
 * does with one: tokenize reads only the header and tokenizer.* keys. The ids are llama.cpp's own
 * expected ids for its vocab test strings (.inp / .out, shared/data/llama2-spm-vocab), the first
 * 12 of them (the empty string and whitespace-only ones included). */
static void test_vocab_only_gguf(void **state) {
    (void)state;
    char bin[4096], vocab[1024], inp[1024], outp[1024], txt[512];
    ru_need_tern(bin, sizeof bin);
    fx_require(vocab, sizeof vocab, "data/llama2-spm-vocab/ggml-vocab-llama-spm.gguf");
    fx_require(inp, sizeof inp, "data/llama2-spm-vocab/ggml-vocab-llama-spm.gguf.inp");
    fx_require(outp, sizeof outp, "data/llama2-spm-vocab/ggml-vocab-llama-spm.gguf.out");
    fx_tmp_path(txt, sizeof txt, "vocab-only.txt");
    size_t n_in = 0, n_out = 0;
    char *in = fx_read_file(inp, &n_in), *out = fx_read_file(outp, &n_out);
    assert_non_null(in);
    assert_non_null(out);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *s = in, *line = out;
    for (int k = 0; k < 12; k++) {
        char *e = strstr(s, sep);
        assert_non_null(e);
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        write_file(txt, s, (size_t)(e - s));
        char want[1024] = "[";                        /* .out's "474 287" as tokenize --ids prints it */
        size_t w = 1;
        for (char *t = strtok(line, " "); t; t = strtok(NULL, " "))
            w += (size_t)snprintf(want + w, sizeof want - w, "%s%s", w > 1 ? ", " : "", t);
        snprintf(want + w, sizeof want - w, "]\n");
        char *o = NULL, *er = NULL;
        const int rc = ru_tern(&o, &er, "tokenize -m '%s' -f '%s' --ids --no-bos", vocab, txt);
        if (rc != 0 || strcmp(o, want) != 0) fail_msg("string %d: exit %d, got %s expected %s (stderr: %s)", k, rc, o, want, er);
        free(o);
        free(er);
        s = e + strlen(sep);
        line = nl + 1;
    }
    free(in);
    free(out);
    remove(txt);
}

/* --no-bos drops exactly the leading BOS; without --parse-special control text stays text. */
static void test_bos_and_special(void **state) {
    (void)state;
    char bin[4096], model[1024], qwen[1024];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    fx_require(qwen, sizeof qwen, QWEN3);
    char *out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' -p 'Once upon a time' --ids", model), 0);
    assert_string_equal(out, "[1, 403, 407, 261, 378]\n");   /* golden/stories260k/prompts.json s2: its first 5 ids */
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' -p 'Once upon a time' --ids --no-bos", model), 0);
    assert_string_equal(out, "[403, 407, 261, 378]\n");
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' -p 'Once' --pieces", model), 0);
    assert_string_equal(out, "'<s>'\n' Once'\n");
    free(out);
    /* <|im_start|> is 151644 with --parse-special (the golden p5 ids start with it), text otherwise */
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' -p '<|im_start|>' --ids --parse-special", qwen), 0);
    assert_string_equal(out, "[151644]\n");
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' -p '<|im_start|>' --ids", qwen), 0);
    int32_t ids[64];
    const int n = parse_id_list(out, ids, 64);
    assert_true(n > 1);
    for (int i = 0; i < n; i++) assert_true(ids[i] < 151643);   /* no control token */
    free(out);
}

/* --detokenize --parse-special of the vectors' ids gives their text (every round-trip vector,
 * both id forms; the texts are decodes that keep control-token text). */
static void test_detokenize_vectors(void **state) {
    (void)state;
    char bin[4096], qwen[1024], p[1024], idf[512];
    ru_need_tern(bin, sizeof bin);
    fx_require(qwen, sizeof qwen, QWEN3);
    size_t n = 0;
    char *all = fx_read_file(fx_require(p, sizeof p, "data/qwen3-tokenizer/qwen3_encode_vectors.jsonl"), &n);
    assert_non_null(all);
    fx_tmp_path(idf, sizeof idf, "tokenize-ids.txt");
    int line_no = 0, n_checked = 0;
    for (char *line = all; *line; line_no++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const cJSON *ok = cJSON_GetObjectItem(j, "roundtrip_ok");
        if (cJSON_IsTrue(ok)) {
            const cJSON *arr = cJSON_GetObjectItem(j, "ids"), *id;
            char *list = malloc(16 * (size_t)(cJSON_GetArraySize(arr) + 1) + 4);
            assert_non_null(list);
            size_t o = 0;
            const bool brackets = n_checked % 2 == 0;   /* "[1, 2]" and "1 2" */
            if (brackets) list[o++] = '[';
            cJSON_ArrayForEach(id, arr) o += (size_t)sprintf(list + o, "%s%d", o > (brackets ? 1u : 0u) ? (brackets ? ", " : " ") : "", id->valueint);
            if (brackets) list[o++] = ']';
            list[o++] = '\n';
            write_file(idf, list, o);
            free(list);
            char *out = NULL, *err = NULL;
            const int rc = ru_tern(&out, &err, "tokenize -m '%s' --detokenize --parse-special -f '%s'", qwen, idf);
            const char *text = cJSON_GetObjectItem(j, "text")->valuestring;
            const size_t tl = strlen(text);
            /* the text may hold NUL-free bytes only; the output is it plus one newline */
            if (rc != 0 || strlen(out) != tl + 1 || memcmp(out, text, tl) != 0 || out[tl] != '\n')
                fail_msg("vector line %d: exit %d, expected \"%s\\n\", got \"%s\" (%s)", line_no + 1, rc, text, out, err);
            free(out);
            free(err);
            n_checked++;
        }
        cJSON_Delete(j);
        if (!nl) break;
        line = nl + 1;
    }
    remove(idf);
    free(all);
    assert_true(n_checked >= 50);   /* the file holds 54 */
}

/* A leading BOS drops the SentencePiece space of the next piece; control tokens give no text. */
static void test_detokenize_bos(void **state) {
    (void)state;
    char bin[4096], model[1024];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    char *out = NULL;
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' --detokenize -p '[1, 403, 407, 261, 378]'", model), 0);
    assert_string_equal(out, "Once upon a time\n");
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' --detokenize -p '403 407'", model), 0);
    assert_string_equal(out, " Once upon\n");
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' --detokenize -p '[403 , 407,]'", model), 0);
    assert_string_equal(out, " Once upon\n");               /* a comma may end the list */
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' --detokenize -p '1 403 2'", model), 0);
    assert_string_equal(out, "Once\n");                     /* BOS and EOS (2) give no text */
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' --detokenize --parse-special -p '1 403 2'", model), 0);
    assert_string_equal(out, "<s>Once</s>\n");              /* ... unless asked for */
    free(out);
    assert_int_equal(ru_tern(&out, NULL, "tokenize -m '%s' --detokenize -p '[]'", model), 0);
    assert_string_equal(out, "\n");
    free(out);
}

static void test_errors(void **state) {
    (void)state;
    char bin[4096], model[1024], missing[512];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(missing, sizeof missing, "tokenize-missing.txt");
    remove(missing);
    static const struct { int rc; const char *args, *msg; } cases[] = {
        {2, "-p hi", "tern tokenize: -m MODEL is required; see tern tokenize --help"},
        {2, "-m M", "tern tokenize: need exactly one of -p TEXT or -f FILE; see tern tokenize --help"},
        {2, "-m M -p a -f b", "tern tokenize: need exactly one of -p TEXT or -f FILE (both given)"},
        {2, "-m M -p a --ids --pieces", "tern tokenize: --ids and --pieces choose different outputs"},
        {2, "-m M -p 1 --detokenize --ids", "tern tokenize: --ids: not used with --detokenize"},
        {2, "-m M --detokenize -p '1 two'", "tern tokenize: -p: index 1 at byte 2: expected an integer id in 0..2147483647 (ids separated by spaces or commas), got 'two'"},
        {2, "-m M --detokenize -p '[1, 2'", "tern tokenize: -p: expected ']' to close the list of 2 ids, got the end of the text"},
        {2, "-m M --detokenize -p '[1] 2'", "tern tokenize: -p: index 1 at byte 4: expected nothing after ']', got '2'"},
        {2, "-m M --detokenize -p '1,,2'", "tern tokenize: -p: index 1 at byte 2: expected an id before ',', got an empty item"},
        {2, "-m M --detokenize -p '[, 1]'", "tern tokenize: -p: index 0 at byte 1: expected an id before ',', got an empty item"},
        {2, "-m M -p x --bogus", "tern tokenize: unknown option --bogus; see tern tokenize --help"},
        {2, "-m M stray", "tern tokenize: unexpected argument 'stray'"},
        {2, "-m M --detokenize -p '1 512'", "tern tokenize: -p: id 512 at index 1: expected an id in 0..511 (the model's vocabulary)"},
        {1, "-m /nonexistent/m.gguf -p x", "tern tokenize: -m: cannot open '/nonexistent/m.gguf': No such file or directory"},
        {1, "-m M -f MISSING", "tern tokenize: -f: cannot open 'MISSING': No such file or directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], want[2048];
        size_t o = 0;
        for (const char *a = cases[i].args; *a && o + 1100 < sizeof args; a++) {   /* M -> the model, MISSING -> the path */
            if (!strncmp(a, "MISSING", 7)) { o += (size_t)sprintf(args + o, "'%s'", missing); a += 6; }
            else if (*a == 'M' && (a[1] == ' ' || !a[1]) && a > cases[i].args && a[-1] == ' ') o += (size_t)sprintf(args + o, "'%s'", model);
            else args[o++] = *a;
        }
        args[o] = '\0';
        const char *mp = strstr(cases[i].msg, "MISSING");
        if (mp) snprintf(want, sizeof want, "%.*s%s%s", (int)(mp - cases[i].msg), cases[i].msg, missing, mp + 7);
        else snprintf(want, sizeof want, "%s", cases[i].msg);
        char *out = NULL, *err = NULL;
        const int rc = ru_tern(&out, &err, "tokenize %s", args);
        if (rc != cases[i].rc || !strstr(err, want))
            fail_msg("tern tokenize %s: exit %d (expected %d), stderr \"%s\", expected it to hold \"%s\"", args, rc, cases[i].rc, err, want);
        assert_string_equal(out, "");   /* nothing on stdout on an error */
        free(out);
        free(err);
    }
    /* an id list in a file that does not parse is a runtime error (exit 1) naming the file */
    char idf[512];
    fx_tmp_path(idf, sizeof idf, "tokenize-bad-ids.txt");
    write_file(idf, "1 2\n3 x\n", 8);
    char *out = NULL, *err = NULL;
    const int rc = ru_tern(&out, &err, "tokenize -m '%s' --detokenize -f '%s'", model, idf);
    char want[1200];
    snprintf(want, sizeof want, "tern tokenize: -f %s: index 3 at byte 6: expected an integer id", idf);
    if (rc != 1 || !strstr(err, want)) fail_msg("bad id file: exit %d, stderr %s", rc, err);
    free(out);
    free(err);
    remove(idf);
}

int suite_tokenize(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_prompt_ids),
        cmocka_unit_test(test_vocab_only_gguf),
        cmocka_unit_test(test_bos_and_special),
        cmocka_unit_test(test_detokenize_vectors),
        cmocka_unit_test(test_detokenize_bos),
        cmocka_unit_test(test_errors),
    };
    TEST_RUN_SUITE("tokenize", tests);
}
