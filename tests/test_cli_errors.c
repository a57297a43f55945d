/* test_cli_errors.c: bad input to the tern programs gets a clear error and a non-zero exit,
 * never a crash (regressions found by trying the CLI as a new user). */
#include "test.h"
#include "test_synth_util.h"

#include <stdio.h>
#include <string.h>

#define STORIES "data/stories260k/stories260K.gguf"

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* perplexity --tokens: the last id is only a prediction target; an out-of-range last id used to
 * index past the logits (segfault for 99999, a silently wrong PPL for n_vocab). */
static void test_perplexity_tokens_range(void **state) {
    (void)state;
    char model[1024], ids[512], msg[2048];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(ids, sizeof ids, "ppl-ids.txt");
    const char *bad[] = {"1 2 99999\n", "1 2 512\n", "1 -3 2\n"};
    const char *want[] = {"token 99999 at index 2: expected 0..511", "token 512 at index 2: expected 0..511", "bad token id near byte 2"};
    for (int i = 0; i < 3; i++) {
        write_text(ids, bad[i]);
        int rc = st_run(msg, sizeof msg, "perplexity -m '%s' --tokens '%s'", model, ids);
        if (rc != 1 || !strstr(msg, want[i])) fail_msg("ids '%s': exit %d, stderr: %s", bad[i], rc, msg);
    }
    write_text(ids, "1 2 511\n");                       /* in range: runs */
    ST_RUN_OK("perplexity -m '%s' --tokens '%s'", model, ids);
    remove(ids);
}

int suite_cli_errors(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perplexity_tokens_range),
    };
    TEST_RUN_SUITE("cli_errors", tests);
}
