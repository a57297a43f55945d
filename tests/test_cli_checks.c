/* test_cli_checks.c: behaviour of the tern programs at their edges, each checked against a value
 * computed independently of tern: the shipped default model (models/stories260K.gguf) has the
 * sha256 models/PROVENANCE.md gives (sha256sum computes it) and generates the start of the greedy
 * sample published for it (shared/data/stories260k/expected_greedy_karpathy_doc.txt). Runs the
 * tern binary built beside the test runner, from the repository root (make test's directory). */
#include "test.h"
#include "run_util.h"

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

int suite_cli_checks(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_model_checksum),
        cmocka_unit_test(test_shipped_model_golden),
    };
    TEST_RUN_SUITE("cli_checks", tests);
}
