/* test.h: shared helpers for the test runner (cmocka underneath).
 * Each tests/test_<name>.c defines `int suite_<name>(int *n_tests)` with TEST_RUN_SUITE; the
 * Makefile discovers the files, tests/main.c runs the suites named on the command line (all by
 * default) and prints the closing line "N passed, N failed, N skipped". */
#ifndef TERN_TESTS_TEST_H
#define TERN_TESTS_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <cmocka.h>

/* How many of the n tests run: all, or with TERN_TEST_FILTER=pattern (cmocka's test filter,
 * `*` and `?` wildcards; set by tests/main.c) those whose name matches, less those matching
 * TERN_TEST_SKIP=pattern (cmocka's skip filter). */
int test_n_selected(const struct CMUnitTest *tests, size_t n);

/* Runs a cmocka group named `name` from the array `tests` and reports how many tests it runs. */
#define TEST_RUN_SUITE(name, tests)                                                          \
    do {                                                                                     \
        *n_tests = test_n_selected(tests, sizeof(tests) / sizeof((tests)[0]));               \
        return cmocka_run_group_tests_name(name, tests, NULL, NULL);                         \
    } while (0)

/* Path of a file under the shared data folder ($TERN_SHARED or ../shared); static buffer per
 * call site is NOT used: writes into buf (size n) and returns buf. */
const char *fx_path(char *buf, size_t n, const char *rel);
/* Like fx_path, but if the file is missing: in CI (CI=true) the test FAILS, elsewhere it is
 * SKIPPED with a message. Returns the path (only returns when the file exists). */
const char *fx_require(char *buf, size_t n, const char *rel);
/* Skip the current test with a reason (counted in the closing line). */
void test_skip(const char *fmt, ...);
/* Read a whole file into a malloc'd NUL-terminated buffer (caller frees); NULL on failure. */
char *fx_read_file(const char *path, size_t *len);
/* A temporary file path unique to this process (in $TMPDIR or /tmp), written into buf. */
const char *fx_tmp_path(char *buf, size_t n, const char *stem);

#endif /* TERN_TESTS_TEST_H */
