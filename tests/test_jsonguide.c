/* test_jsonguide.c: server/jsonguide.c, the prefix checker behind response_format json_object:
 * valid objects (RFC 8259 examples and edge cases) are accepted byte by byte and complete only at
 * their end; texts that stop being a JSON-object prefix are refused exactly at the first wrong
 * byte; whitespace, depth and the top level. */
#include "test.h"
#include "../server/jsonguide.h"

#include <string.h>

/* Feeds s one byte at a time; returns the index of the first refused byte, or -1. */
static int first_bad(const char *s, json_guide *g) {
    json_guide_init(g);
    for (size_t i = 0; s[i]; i++)
        if (!json_guide_feed(g, s + i, 1)) return (int)i;
    return -1;
}

static void test_valid_objects(void **state) {
    (void)state;
    static const char *ok[] = {
        "{}", " {} \n", "{\"a\":1}", "{\"a\": [1, -2, 0.5, 1e10, -0.0, 2E-3, 3.25e+2]}",
        "{\"s\": \"x\\\"y\\\\z\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00 caf\xc3\xa9\"}",
        "{\"t\": true, \"f\": false, \"n\": null, \"o\": {\"p\": {}}, \"e\": []}",
        "{\"k\":[[],[[]],{\"a\":[{}]}]}", "\t{\r\n\"a\"\t:\t[ 1 , 2 ]\n}\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        json_guide g;
        const int bad = first_bad(ok[i], &g);
        if (bad >= 0) fail_msg("'%s': refused at byte %d", ok[i], bad);
        assert_true(json_guide_done(&g));
        /* every proper prefix that ends before the closing brace is incomplete */
        json_guide p;
        json_guide_init(&p);
        const char *close = strrchr(ok[i], '}');
        assert_true(json_guide_feed(&p, ok[i], (size_t)(close - ok[i])));
        assert_false(json_guide_done(&p));
    }
    json_guide g;
    json_guide_init(&g);
    assert_true(json_guide_empty(&g));
    assert_true(json_guide_feed(&g, "  ", 2));
    assert_true(json_guide_empty(&g));
}

static void test_refused_at_first_wrong_byte(void **state) {
    (void)state;
    static const struct { const char *s; int at; } bad[] = {
        {"[1]", 0},                  /* the top level is an object */
        {"\"a\"", 0},  {"1", 0},      {"x", 0},
        {"{a:1}", 1},                /* keys are strings */
        {"{\"a\" 1}", 5},             /* the colon */
        {"{\"a\":}", 5},              /* a value */
        {"{\"a\":1,}", 7},            /* no trailing comma */
        {"{\"a\":01}", 6},            /* no leading zero */
        {"{\"a\":-}", 6},             /* a digit after '-' */
        {"{\"a\":1.}", 7},            /* a digit after '.' */
        {"{\"a\":1e}", 7},            /* a digit in the exponent */
        {"{\"a\":tru}", 8},           /* the literal */
        {"{\"a\":nul1}", 8},
        {"{\"a\":\"\\x\"}", 7},       /* the escapes */
        {"{\"a\":\"\\u12G4\"}", 10},
        {"{\"a\":\"\x01\"}", 6},      /* control bytes in strings */
        {"{\"a\":[1}", 7},            /* the closer matches */
        {"{\"a\":1]", 6},
        {"{} x", 3},                  /* nothing but whitespace after the object */
        {"{}{}", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_guide g;
        const int at = first_bad(bad[i].s, &g);
        if (at != bad[i].at) fail_msg("'%s': refused at byte %d, expected %d", bad[i].s, at, bad[i].at);
    }
}

/* Whitespace runs outside strings: up to JSON_GUIDE_WS_RUN(depth) bytes, one more is refused; a
 * pretty-printed object with 4-space indentation passes; inside strings there is no bound. */
static void test_whitespace_runs(void **state) {
    (void)state;
    char s[512];
    json_guide g;
    memset(s, ' ', 8);
    strcpy(s + 8, "{}");
    assert_int_equal(first_bad(s, &g), -1);                /* 8 blanks before the object */
    memset(s, ' ', 9);
    strcpy(s + 9, "{}");
    assert_int_equal(first_bad(s, &g), 8);                 /* the 9th is refused */
    strcpy(s, "{}\n\n\n\n\n\n\n\n\n");
    assert_int_equal(first_bad(s, &g), 10);                /* after the object too */
    strcpy(s, "{\n    \"a\": {\n        \"b\": [\n            1,\n            2\n        ]\n    }\n}\n");
    assert_int_equal(first_bad(s, &g), -1);
    assert_true(json_guide_done(&g));
    strcpy(s, "{\"a\":");                                /* depth 1: 12 blanks, not 13 */
    memset(s + 5, ' ', 12);
    strcpy(s + 17, "1}");
    assert_int_equal(first_bad(s, &g), -1);
    memset(s + 5, ' ', 13);
    strcpy(s + 18, "1}");
    assert_int_equal(first_bad(s, &g), 17);
    strcpy(s, "{\"a\": \"");                           /* a string holds any number of blanks */
    memset(s + 7, ' ', 100);
    strcpy(s + 107, "\"}");
    assert_int_equal(first_bad(s, &g), -1);
}

static void test_depth(void **state) {
    (void)state;
    json_guide g;
    json_guide_init(&g);
    assert_true(json_guide_feed(&g, "{\"a\":", 5));
    for (int i = 1; i < JSON_GUIDE_DEPTH; i++) assert_true(json_guide_feed(&g, "[", 1));
    assert_false(json_guide_feed(&g, "[", 1));   /* one container more than the bound */
}

int suite_jsonguide(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_objects),
        cmocka_unit_test(test_refused_at_first_wrong_byte),
        cmocka_unit_test(test_whitespace_runs),
        cmocka_unit_test(test_depth),
    };
    TEST_RUN_SUITE("jsonguide", tests);
}
