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

/* Runs the tests of `tests` (n of them) that TERN_TEST_FILTER and TERN_TEST_SKIP select (each a
 * comma-separated list of '*' / '?' patterns: a test runs when its name matches a FILTER
 * pattern, or there is none, and no SKIP pattern) as a cmocka group named `group` with the
 * group fixtures setup / teardown (NULL: none); stores how many ran in *n_tests and returns how
 * many failed. */
int test_run_suite(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                   CMFixtureFunction teardown, int *n_tests);

/* A suite's body: runs the array `tests` as the group `name` (with group fixtures: the _GROUP form). */
#define TEST_RUN_SUITE(name, tests) \
    return test_run_suite(name, tests, sizeof(tests) / sizeof((tests)[0]), NULL, NULL, n_tests)
#define TEST_RUN_SUITE_GROUP(name, tests, setup, teardown) \
    return test_run_suite(name, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown, n_tests)

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

/* How many times slower the build runs a model than the release build, rounded down to a safe
 * divisor: the sanitizer build (TERN_DEBUG: ASan+UBSan at -O1) decodes qwen3-tiny about 7x
 * slower (300 tokens: 9.3 s against 1.3 s on a 2-vCPU Zen 3). Token counts that exist only to
 * make one request last while others arrive divide by it, so a request lasts at least as long
 * in wall time in every build; counts a test compares or checks for their own sake do not. */
#ifdef TERN_DEBUG
#define TEST_SLOW_BUILD 4
#else
#define TEST_SLOW_BUILD 1
#endif

#endif /* TERN_TESTS_TEST_H */
