/* test_server.c: the model-free parts of `tern serve`: request validation (every rejected field
 * gives 400 with an OpenAI error object naming it), response JSON shapes, stop strings that span
 * tokens (held back, never emitted), reasoning split, tool-call parsing (Qwen3.5 markup and
 * Qwen3 JSON), the tools block as the Qwen3.5 template prints it, UTF-8 repair. */
#include "test.h"

#include "../server/api.h"
#include "../server/reply.h"
#include "core/core.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reply: stop strings ------------------------------------------------------------------- */

/* Feeds pieces one by one, collecting what reply_take lets out; returns the concatenation. */
static char *feed(const char *const *pieces, int n, char **stop, int n_stop, bool tools, bool *stopped, srv_reply *keep) {
    srv_reply r;
    reply_init(&r, stop, n_stop, tools);
    sbuf out = {0};
    sbuf_add(&out, "", 0);
    for (int i = 0; i < n && !r.stopped; i++) {
        assert_true(reply_add(&r, false, pieces[i], strlen(pieces[i])));
        const char *c, *rs;
        size_t nc, nr;
        reply_take(&r, false, &c, &nc, &rs, &nr);
        sbuf_add(&out, c, nc);
        /* what is out so far never ends with the start of a stop string */
        for (int s = 0; s < n_stop; s++)
            for (size_t k = 1; k < strlen(stop[s]) && k <= out.n; k++)
                if (!r.stopped && memcmp(out.p + out.n - k, stop[s], k) == 0 && out.n == r.content.n)
                    fail_msg("emitted a possible stop prefix '%.*s'", (int)k, stop[s]);
    }
    const char *c, *rs;
    size_t nc, nr;
    reply_take(&r, true, &c, &nc, &rs, &nr);
    sbuf_add(&out, c, nc);
    *stopped = r.stopped;
    if (keep) *keep = r;
    else reply_free(&r);
    return out.p;
}

static void test_stop_across_tokens(void **state) {
    (void)state;
    char *stop[] = {"lo w", "XYZ"};
    bool st;
    const char *p1[] = {"Hel", "lo wo", "rld"};
    char *o = feed(p1, 3, stop, 2, false, &st, NULL);
    assert_string_equal(o, "Hel");
    assert_true(st);
    free(o);
    /* a partial match that turns out not to be one is released */
    const char *p2[] = {"Hel", "lo", " there"};
    o = feed(p2, 3, stop, 2, false, &st, NULL);
    assert_string_equal(o, "Hello there");
    assert_false(st);
    free(o);
    /* held back at the end of generation: released (it is not a stop string) */
    const char *p3[] = {"abc X", "Y"};
    o = feed(p3, 2, stop, 2, false, &st, NULL);
    assert_string_equal(o, "abc XY");
    assert_false(st);
    free(o);
    /* the earliest of several stop strings wins, even when both arrive in one piece */
    char *stop2[] = {"cd", "b"};
    const char *p4[] = {"a", "bcd"};
    o = feed(p4, 2, stop2, 2, false, &st, NULL);
    assert_string_equal(o, "a");
    free(o);
    /* multi-byte stop string split inside a character */
    char *stop3[] = {"\xc3\xa9t\xc3\xa9"};            /* "ete" with accents */
    const char *p5[] = {"un \xc3\xa9", "t\xc3", "\xa9 chaud"};
    o = feed(p5, 3, stop3, 1, false, &st, NULL);
    assert_string_equal(o, "un ");
    assert_true(st);
    free(o);
    /* the stop string as the very first text */
    const char *p6[] = {"XYZ and more"};
    o = feed(p6, 1, stop, 2, false, &st, NULL);
    assert_string_equal(o, "");
    free(o);
}

/* Per-token pieces (the stream's granularity): each add comes out as its own piece, in order,
 * reasoning and content, with its token count; a possible stop prefix is held (the piece is cut
 * there and its rest comes later); a matched stop string is never emitted. */
static void test_reply_pieces(void **state) {
    (void)state;
    char *stop[] = {"lo w"};
    srv_reply r;
    reply_init(&r, stop, 1, false);
    char got[16][32];
    int tok[16], n = 0;
    bool think[16];
    const char *t;
    size_t len;
    int te;
    bool th;
#define DRAIN(final) \
    while (reply_next(&r, final, &th, &t, &len, &te)) { \
        assert_true(n < 16 && len < 32); \
        memcpy(got[n], t, len); \
        got[n][len] = '\0'; \
        tok[n] = te; \
        think[n++] = th; \
    }
    assert_true(reply_add_tok(&r, true, "hmm", 3, 1));
    assert_true(reply_add_tok(&r, false, "He", 2, 3));     /* token 2 had no text (a partial character) */
    DRAIN(false);
    assert_true(reply_add_tok(&r, false, "l", 1, 4));      /* "l" could begin "lo w": held */
    DRAIN(false);
    assert_int_equal(n, 2);
    assert_true(reply_add_tok(&r, false, "lo", 2, 5));     /* "llo": the first "l" is released alone */
    DRAIN(false);
    assert_int_equal(n, 3);
    assert_true(reply_add_tok(&r, false, "!", 1, 6));      /* "lo!": not a stop, released */
    DRAIN(false);
    assert_true(reply_add_tok(&r, false, " lo", 3, 7));
    assert_int_equal(reply_tok_kept(&r), INT_MAX);         /* no stop yet: every token counts */
    assert_true(reply_add_tok(&r, false, " wide", 5, 8));  /* " lo wide": stop at "lo w" */
    assert_true(r.stopped);
    assert_int_equal(reply_tok_kept(&r), 7);               /* " lo" begins before the cut, " wide" after */
    DRAIN(true);
    /* "l" held then released alone; "lo" and "!" one piece each; " lo" cut before the stop */
    const char *want[] = {"hmm", "He", "l", "lo", "!", " "};
    const int want_tok[] = {1, 3, 4, 5, 6, 7};
    assert_int_equal(n, 6);
    for (int i = 0; i < n; i++) {
        assert_string_equal(got[i], want[i]);
        assert_int_equal(tok[i], want_tok[i]);
        assert_true(think[i] == (i == 0));
    }
    reply_free(&r);
#undef DRAIN
    /* a stop string that begins exactly where a token's text begins: that token is not kept */
    char *stop2[] = {"!"};
    reply_init(&r, stop2, 1, false);
    assert_true(reply_add_tok(&r, true, "hmm", 3, 1));
    assert_true(reply_add_tok(&r, false, "Hi", 2, 2));
    assert_true(reply_add_tok(&r, false, "!x", 2, 3));
    assert_true(r.stopped);
    assert_int_equal(reply_tok_kept(&r), 2);
    reply_free(&r);
    reply_init(&r, stop2, 1, false);                       /* the first token's text is the stop */
    assert_true(reply_add_tok(&r, false, "!", 1, 1));
    assert_int_equal(reply_tok_kept(&r), 0);
    reply_free(&r);
}

/* api_logprob_compute against a direct log-softmax in long double, with ties and NaN. */
static void test_logprob_compute(void **state) {
    (void)state;
    enum { V = 1000 };
    static float lg[V];
    for (int i = 0; i < V; i++) lg[i] = (float)((i * 7919) % 1009) / 50.0f - 10.0f;
    lg[17] = NAN;
    lg[400] = lg[401] = 25.0f;                        /* a tie at the top: the lower id first */
    lg[3] = -INFINITY;
    long double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) if (lg[i] == lg[i] && lg[i] > mx) mx = lg[i];
    for (int i = 0; i < V; i++) if (lg[i] == lg[i]) sum += expl((long double)lg[i] - mx);
    const long double lse = mx + logl(sum);
    srv_logprob e;
    api_logprob_compute(lg, V, 123, 5, &e);
    assert_int_equal(e.tok, 123);
    assert_true(fabsl((long double)e.lp - ((long double)lg[123] - lse)) < 1e-5L);
    assert_int_equal(e.n_top, 5);
    assert_int_equal(e.top_tok[0], 400);
    assert_int_equal(e.top_tok[1], 401);
    for (int k = 0; k < 5; k++) {
        assert_true(fabsl((long double)e.top_lp[k] - ((long double)lg[e.top_tok[k]] - lse)) < 1e-5L);
        if (k > 0) assert_true(lg[e.top_tok[k]] <= lg[e.top_tok[k - 1]]);
        for (int i = 0; i < V; i++)                   /* nothing outside the top is larger */
            if (lg[i] == lg[i] && lg[i] > lg[e.top_tok[4]]) {
                bool in = false;
                for (int q = 0; q < 5; q++) in |= e.top_tok[q] == i;
                assert_true(in);
            }
    }
    double total = 0;                                 /* probabilities sum to 1 */
    for (int i = 0; i < V; i++) {
        api_logprob_compute(lg, V, i, 0, &e);
        if (i == 17 || i == 3) assert_true(isinf(e.lp) && e.lp < 0);
        else total += exp((double)e.lp);
    }
    assert_true(fabs(total - 1.0) < 1e-4);
}

static void test_reasoning_split(void **state) {
    (void)state;
    srv_reply r;
    char *stop[] = {"END"};
    reply_init(&r, stop, 1, false);
    assert_true(reply_add(&r, true, "let me think END", 16));   /* stop strings ignore reasoning */
    assert_true(reply_add(&r, false, "The answer", 10));
    const char *c, *rs;
    size_t nc, nr;
    reply_take(&r, false, &c, &nc, &rs, &nr);
    assert_int_equal(nr, 16);
    assert_memory_equal(rs, "let me think END", 16);
    assert_int_equal(nc, 10);
    assert_false(r.stopped);
    reply_free(&r);
}

static void test_tool_calls(void **state) {
    (void)state;
    const char *pieces[] = {"Let me check.\n<tool", "_call>\n<function=get_weather>\n<parameter=city>\nParis, France\n</parameter>\n",
                            "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"unit\": \"C\"}\n</parameter>\n</function>\n</tool_call>",
                            "\n<tool_call>\n{\"name\": \"now\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>"};
    srv_reply r;
    bool st;
    char *o = feed(pieces, 4, NULL, 0, true, &st, &r);
    assert_string_equal(o, "Let me check.\n");              /* the markup is never streamed */
    free(o);
    char *calls = reply_tool_calls_json(&r, "call_x");
    assert_non_null(calls);
    cJSON *j = cJSON_Parse(calls);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    cJSON *c0 = cJSON_GetArrayItem(j, 0), *f0 = cJSON_GetObjectItem(c0, "function");
    assert_string_equal(cJSON_GetObjectItem(c0, "id")->valuestring, "call_x_0");
    assert_string_equal(cJSON_GetObjectItem(c0, "type")->valuestring, "function");
    assert_string_equal(cJSON_GetObjectItem(f0, "name")->valuestring, "get_weather");
    cJSON *args = cJSON_Parse(cJSON_GetObjectItem(f0, "arguments")->valuestring);
    assert_string_equal(cJSON_GetObjectItem(args, "city")->valuestring, "Paris, France");
    assert_true(cJSON_GetObjectItem(args, "days")->valuedouble == 3);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(args, "opts"), "unit")->valuestring, "C");
    cJSON_Delete(args);
    cJSON *f1 = cJSON_GetObjectItem(cJSON_GetArrayItem(j, 1), "function");
    assert_string_equal(cJSON_GetObjectItem(f1, "name")->valuestring, "now");
    assert_string_equal(cJSON_GetObjectItem(f1, "arguments")->valuestring, "{\"tz\":\"UTC\"}");
    cJSON_Delete(j);
    free(calls);
    reply_free(&r);
    /* no tools in the request: the markup is ordinary content */
    const char *p2[] = {"a <tool_call> b"};
    o = feed(p2, 1, NULL, 0, false, &st, NULL);
    assert_string_equal(o, "a <tool_call> b");
    free(o);
}

/* ---- UTF-8 ------------------------------------------------------------------------------------ */

static void test_utf8_repair(void **state) {
    (void)state;
    const char in[] = "ok \xc3\xa9 bad \xff \xc3 surrogate \xed\xa0\x80 overlong \xc0\xaf end";
    char *o = api_utf8_dup(in, sizeof in - 1);
    assert_string_equal(o, "ok \xc3\xa9 bad \xef\xbf\xbd \xef\xbf\xbd surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd overlong \xef\xbf\xbd\xef\xbf\xbd end");
    free(o);
    /* JSON output of invalid text is valid UTF-8 and parses */
    srv_usage u = {1, 2, 0};
    char *js = api_completion_response("cmpl-1", 5, "m", "\xff\xfe", 2, "stop", NULL, &u, NULL);
    cJSON *j = cJSON_Parse(js);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text")->valuestring,
                        "\xef\xbf\xbd\xef\xbf\xbd");
    cJSON_Delete(j);
    free(js);
}

/* ---- request validation ------------------------------------------------------------------------ */

static void expect_400(srv_kind kind, const char *body, const char *param) {
    srv_request r;
    srv_error e;
    memset(&e, 0, sizeof e);
    if (api_parse_request(kind, body, strlen(body), &r, &e)) fail_msg("accepted: %s", body);
    assert_int_equal(e.status, 400);
    if (strcmp(e.param, param) != 0) fail_msg("body %s: param '%s', expected '%s' (%s)", body, e.param, param, e.message);
    char *js = api_error_json(&e);
    cJSON *j = cJSON_Parse(js);
    cJSON *err = cJSON_GetObjectItem(j, "error");
    assert_true(cJSON_IsString(cJSON_GetObjectItem(err, "message")));
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "invalid_request_error");
    cJSON_Delete(j);
    free(js);
}

/* As expect_400, and the message is exactly `message`. */
static void expect_400_msg(srv_kind kind, const char *body, const char *param, const char *message) {
    expect_400(kind, body, param);
    srv_request r;
    srv_error e;
    assert_false(api_parse_request(kind, body, strlen(body), &r, &e));
    if (strcmp(e.message, message) != 0) fail_msg("body %s:\n  message '%s'\n expected '%s'", body, e.message, message);
    char *js = api_error_json(&e), *fixed = api_utf8_dup(js, strlen(js));   /* what we send is valid UTF-8 */
    assert_string_equal(js, fixed);
    free(fixed);
    free(js);
}

/* Numbers in messages are written as the client would write them: integers with all their
 * digits (99999999999, not 1e+11; the limit 2147483647, not 2.14748e+09), fractions in the
 * fewest digits that read back (0.1, 2.5). */
static void test_request_number_messages(void **state) {
    (void)state;
    const char *m = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
    struct { const char *extra, *param, *message; } cases[] = {
        {"\"max_tokens\": 99999999999", "max_tokens", "'max_tokens' must be an integer in [-1, 2147483647], got 99999999999"},
        {"\"max_completion_tokens\": -2", "max_completion_tokens",
         "'max_completion_tokens' must be an integer in [-1, 2147483647], got -2"},
        {"\"top_k\": 10000000000", "top_k", "'top_k' must be an integer in [-1, 1000000000], got 10000000000"},
        {"\"top_k\": 2.5", "top_k", "'top_k' must be an integer in [-1, 1000000000], got 2.5"},
        {"\"repeat_last_n\": 1000001", "repeat_last_n", "'repeat_last_n' must be an integer in [0, 1000000], got 1000001"},
        {"\"seed\": 100000000000000000", "seed",
         "'seed' must be an integer in [-9007199254740991, 9007199254740991], got 100000000000000000 (as read: past 2^53 "
         "a JSON number does not hold every integer)"},
        /* 2^53 + 1 parses as 2^53: refused, not taken as the seed 2^53; the message says the value shown is as read */
        {"\"seed\": 9007199254740993", "seed", "'seed' must be an integer in [-9007199254740991, 9007199254740991], got "
         "9007199254740992 (as read: past 2^53 a JSON number does not hold every integer)"},
        {"\"seed\": -9007199254740992", "seed", "'seed' must be an integer in [-9007199254740991, 9007199254740991], got "
         "-9007199254740992 (as read: past 2^53 a JSON number does not hold every integer)"},
        {"\"temperature\": 2.5", "temperature", "'temperature' must be a number in [0, 2], got 2.5"},
        {"\"temperature\": 1e300", "temperature", "'temperature' must be a number in [0, 2], got 1e+300"},   /* no integer note */
        {"\"top_p\": 1.1", "top_p", "'top_p' must be a number in [0, 1], got 1.1"},
        {"\"repeat_penalty\": 0.0001", "repeat_penalty", "'repeat_penalty' must be a number in [0.001, 100], got 0.0001"},
        {"\"temperature\": \"hot\"", "temperature", "'temperature' must be a number in [0, 2], got a string"},
        {"\"max_tokens\": null, \"n\": 2", "n", "'n' is not supported above 1 (one choice per request), got 2"},
        {"\"max_tokens\": [5]", "max_tokens", "'max_tokens' must be an integer in [-1, 2147483647], got an array"},
        {"\"max_tokens\": 5, \"max_completion_tokens\": 7", "max_tokens",
         "'max_tokens' (5) and 'max_completion_tokens' (7) differ: send one of them"},
        {"\"max_completion_tokens\": 7, \"max_tokens\": \"7\"", "max_tokens",
         "'max_tokens' must be an integer in [-1, 2147483647], got a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{%s, %s}", m, cases[i].extra);
        expect_400_msg(SRV_CHAT, body, cases[i].param, cases[i].message);
    }
    /* max_tokens and max_completion_tokens with one value are one request */
    const char *same = "{\"prompt\": \"a\", \"max_tokens\": 7, \"max_completion_tokens\": 7}";
    srv_request r;
    srv_error e;
    assert_true(api_parse_request(SRV_COMPLETION, same, strlen(same), &r, &e));
    assert_int_equal(r.max_tokens, 7);
    api_request_free(&r);
}

/* A member name given twice in one object is refused, naming the key and the object's path (cJSON
 * alone lets the first value win silently, while Python's json, JavaScript's JSON.parse and so vLLM
 * take the last, so one body would mean two different requests). The same name in different
 * objects, or a name that only differs in case, is fine. A body of 50000 distinct keys is checked
 * quickly. */
static void test_request_duplicate_keys(void **state) {
    (void)state;
    const char *tail = "the request body: each member name may appear once in an object (parsers differ on which one counts); send it once";
    char want[512];
    snprintf(want, sizeof want, "duplicate key 'max_tokens' in %s", tail);
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 3, \"max_tokens\": -1}",
                   "max_tokens", want);
    snprintf(want, sizeof want, "duplicate key 'prompt' in %s", tail);
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": \"a\", \"stream\": false, \"prompt\": \"b\"}", "prompt", want);
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"user\", \"content\": \"a\", "
                   "\"role\": \"system\"}]}", "messages[1].role",
                   "duplicate key 'role' in 'messages[1]': each member name may appear once in an object (parsers differ on which "
                   "one counts); send it once");
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"chat_template_kwargs\": "
                   "{\"enable_thinking\": true, \"x\": 1, \"enable_thinking\": false}}", "chat_template_kwargs.enable_thinking",
                   "duplicate key 'enable_thinking' in 'chat_template_kwargs': each member name may appear once in an object "
                   "(parsers differ on which one counts); send it once");
    /* inside a value tern does not read (a tool's schema) too: the tools JSON goes into the prompt */
    expect_400(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"tools\": [{\"type\": \"function\", "
               "\"function\": {\"name\": \"f\", \"parameters\": {\"a\": 1, \"b\": 2, \"a\": 3}}}]}", "tools[0].function.parameters.a");
    /* the first repeat in document order is named */
    expect_400(SRV_COMPLETION, "{\"prompt\": \"a\", \"z\": 1, \"y\": 1, \"y\": 2, \"z\": 2}", "y");
    /* fine: the same name in sibling objects, names differing in case */
    const char *ok[] = {
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}], "
        "\"stream_options\": null, \"Max_tokens\": 1, \"max_tokens\": 2}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        srv_request r;
        srv_error e;
        if (!api_parse_request(SRV_CHAT, ok[i], strlen(ok[i]), &r, &e)) fail_msg("refused: %s: %s", ok[i], e.message);
        api_request_free(&r);
    }
    /* many keys: sorted, not compared pairwise */
    sbuf b = {0};
    sbuf_add(&b, "{\"prompt\": \"a\"", 14);
    char k[32];
    for (int i = 0; i < 50000; i++) {
        const int n = snprintf(k, sizeof k, ", \"k%d\": %d", i, i);
        sbuf_add(&b, k, (size_t)n);
    }
    sbuf_add(&b, "}", 1);
    srv_request r;
    srv_error e;
    const double t0 = tern_time_s();
    if (!api_parse_request(SRV_COMPLETION, b.p, b.n, &r, &e)) fail_msg("50000 keys refused: %s", e.message);
    const double dt = tern_time_s() - t0;
    api_request_free(&r);
    print_message("50000 distinct keys parsed and checked in %.3f s\n", dt);
    assert_true(dt < 2.0);
    sbuf_free(&b);
}

/* A value of the wrong type, at any depth, is named by its path (messages[0], not messages[0].role,
 * for a null message), with what was expected and what came (its JSON kind). */
static void test_request_element_types(void **state) {
    (void)state;
    struct { srv_kind kind; const char *body, *param, *message; } cases[] = {
        {SRV_CHAT, "{\"messages\": [null]}", "messages[0]", "'messages[0]' must be an object with 'role' and 'content', got null"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, \"hi\"]}", "messages[1]",
         "'messages[1]' must be an object with 'role' and 'content', got a string"},
        {SRV_CHAT, "{\"messages\": [[]]}", "messages[0]", "'messages[0]' must be an object with 'role' and 'content', got an array"},
        {SRV_CHAT, "{\"messages\": null}", "messages", "'messages' is required: an array of {\"role\", \"content\"} objects"},
        {SRV_CHAT, "{\"messages\": {\"role\": \"user\"}}", "messages",
         "'messages' must be an array of {\"role\", \"content\"} objects, got an object"},
        {SRV_CHAT, "{\"messages\": [{\"content\": \"x\"}]}", "messages[0].role",
         "'messages[0].role' must be one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\", got nothing"},
        {SRV_CHAT, "{\"messages\": [{\"role\": 1, \"content\": \"x\"}]}", "messages[0].role",
         "'messages[0].role' must be one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\", got 1"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", "messages[0].role",
         "'messages[0].role' must be one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\", got 'wizard'"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": true}]}", "messages[0].content",
         "'messages[0].content' must be a string, null or an array of text parts, got true"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, null]}]}",
         "messages[0].content[1]", "'messages[0].content[1]' must be a text part {\"type\": \"text\", \"text\": string}, got null"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages[0].content[0]",
         "'messages[0].content[0]' must be a text part {\"type\": \"text\", \"text\": string}, got type 'image_url'"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": 5}]}]}",
         "messages[0].content[0].text", "'messages[0].content[0].text' must be a string, got 5"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\": {}}]}]}",
         "messages[0].tool_calls[0].function.name", "'messages[0].tool_calls[0].function.name' must be a string, got nothing"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": 3}]}", "messages[0].tool_calls",
         "'messages[0].tool_calls' must be an array of tool calls, got 3"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": [\"a\", null]}", "stop[1]",
         "'stop[1]' must be a string, got null"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [null]}", "tools[0]",
         "'tools[0]' must be an object {\"type\": \"function\", \"function\": {...}}, got null"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"retrieval\"}]}", "tools[0].type",
         "'tools[0].type' must be \"function\", got 'retrieval'"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": \"yes\"}", "stream",
         "'stream' must be true or false, got a string"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream_options\": {\"include_usage\": 1}}",
         "stream_options.include_usage", "'stream_options.include_usage' must be true or false, got 1"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream_options\": {\"include_usage\": true}}",
         "stream_options", "'stream_options' is only allowed when 'stream' is true"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"stream\": false, \"stream_options\": {}}", "stream_options",
         "'stream_options' is only allowed when 'stream' is true"},
        {SRV_COMPLETION, "{\"prompt\": null}", "prompt",
         "'prompt' is required: a string or an array of token ids (or an array of one of those)"},
        {SRV_COMPLETION, "{\"prompt\": {}}", "prompt", "'prompt' must be a string or an array of token ids (or an array of one of those), got an object"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"model\": false}", "model", "'model' must be a string, got false"},
        {SRV_COMPLETION, "[1, 2]", "", "the request body must be a JSON object, got an array"},
        {SRV_COMPLETION, "null", "", "the request body must be a JSON object, got null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_400_msg(cases[i].kind, cases[i].body, cases[i].param, cases[i].message);
}

/* Malformed JSON: the message says where (byte offset, line:column) and what was found there, or
 * why: the end of the body inside a string or an open object, nesting deeper than cJSON's limit, a
 * lone UTF-16 surrogate, data after the value. Offsets are counted here from the bodies. */
static void test_request_json_syntax(void **state) {
    (void)state;
    static const char h[] = "the request body is not valid JSON: ";
    char want[512];
    struct { const char *body, *message; } cases[] = {
        {"", "it is empty, expected a JSON object"},
        {" \n ", "it is empty, expected a JSON object"},
        {"{\"prompt\": ", "the body ends at byte 11 (line 1, column 12) before the value is complete (1 array or object still open)"},
        {"{\"prompt\": [[\"x\", ", "the body ends at byte 18 (line 1, column 19) before the value is complete (3 arrays or objects still open)"},
        {"{\"prompt\": \"abc", "the string that opens at byte 11 (line 1, column 12) is not closed before the end of the body (byte 15)"},
        {"{\"prompt\": \"x\",\n \"max_tokens\": 5x}", "at byte 32 (line 2, column 17): found 'x'"},
        {"{\"prompt\": \xff}", "at byte 11 (line 1, column 12): found byte 0xff"},
        {"{\"prompt\": \"x\\qy\"}", "at byte 13 (line 1, column 14): found '\\' inside a string"},
        {"{\"prompt\": \"a\\ud800b\"}", "a lone UTF-16 surrogate \\ud800 at byte 13 (line 1, column 14): a high surrogate "
                                          "\\ud800-\\udbff must be followed by a low surrogate \\udc00-\\udfff, and a low one must follow a high one"},
        {"{\"prompt\":\n\"\\udc00\"}", "a lone UTF-16 surrogate \\udc00 at byte 12 (line 2, column 2): a high surrogate "
                                       "\\ud800-\\udbff must be followed by a low surrogate \\udc00-\\udfff, and a low one must follow a high one"},
        {"{\"prompt\": \"x\"} {\"prompt\": \"y\"}", "unexpected data after the JSON value at byte 16 (line 1, column 17): found '{'"},
        /* a member name without its opening quote: the byte where the quote should be */
        {"{a:1}", "at byte 1 (line 1, column 2): found 'a', expected '\"' to start a member name"},
        {"{'a':1}", "at byte 1 (line 1, column 2): found ''', expected '\"' to start a member name"},
        {"{\"a\":1,}", "at byte 7 (line 1, column 8): found '}', expected '\"' to start a member name"},
        {"{\"a\":1, \n }", "at byte 10 (line 2, column 2): found '}', expected '\"' to start a member name"},
        {"{\"messages\":[{\"role\":\"user\",}]}", "at byte 28 (line 1, column 29): found '}', expected '\"' to start a member name"},
        {"{\"prompt\": [1,]}", "at byte 14 (line 1, column 15): found ']'"},   /* an array wants no name */
        /* numbers cJSON's reader takes but JSON does not (RFC 8259) */
        {"{\"prompt\": \"x\", \"max_tokens\": 01}", "the number '01' at byte 30 (line 1, column 31) is not a JSON number "
                                                     "(no leading zeros, digits on both sides of a '.')"},
        {"{\"prompt\": \"a\\\" 1.\", \"seed\": -007}", "the number '-007' at byte 29 (line 1, column 30) is not a JSON number "
                                                       "(no leading zeros, digits on both sides of a '.')"},
        {"{\"prompt\": [1,\n 2.]}", "the number '2.' at byte 16 (line 2, column 2) is not a JSON number "
                                  "(no leading zeros, digits on both sides of a '.')"},
        {"{\"prompt\": \"x\", \"temperature\": 1.e0}", "the number '1.e0' at byte 31 (line 1, column 32) is not a JSON number "
                                                        "(no leading zeros, digits on both sides of a '.')"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(want, sizeof want, "%s%s", h, cases[i].message);
        expect_400_msg(SRV_COMPLETION, cases[i].body, "", want);
    }
    /* nesting: the bracket that would open level 1001 ({ then 999 [ are open before it) */
    const int limit = 1000;
    char *deep = malloc(16 + 2 * (size_t)limit);
    strcpy(deep, "{\"a\": ");
    const size_t at = strlen(deep) + (size_t)limit - 1;
    for (int k = 0; k < limit + 5; k++) strcat(deep, "[");
    snprintf(want, sizeof want, "%sarrays and objects nested deeper than %d levels at byte %zu (line 1, column %zu)", h, limit,
             at, at + 1);
    expect_400_msg(SRV_COMPLETION, deep, "", want);
    free(deep);
    /* JSON numbers of every form, and number-like text inside strings, pass */
    const char nums[] = "{\"prompt\": \"01 1. \\\"-0\", \"temperature\": 0.5e0, \"top_p\": 1E-0, \"seed\": 0, "
                        "\"logit_bias\": {\"5\": -0.25, \"6\": -1e+1}}";
    srv_request r;
    srv_error e;
    if (!api_parse_request(SRV_COMPLETION, nums, sizeof nums - 1, &r, &e)) fail_msg("%s: %s", nums, e.message);
    assert_string_equal(r.prompt, "01 1. \"-0");
    api_request_free(&r);
}

/* Invalid UTF-8 anywhere in the body is refused (JSON text is UTF-8, and llama-server and vLLM
 * refuse it too): a string names its JSON path, the bad byte and its offset in the string; a
 * member name names the object it is in; any other byte (a raw NUL) its offset in the body. */
static void test_request_utf8(void **state) {
    (void)state;
    struct { const char *body, *param, *message; } cases[] = {
        {"{\"prompt\": \"ab\xc3\"}", "prompt", "'prompt' is not valid UTF-8: byte 0xc3 at offset 2 of the string"},
        {"{\"prompt\": \"ok\", \"stop\": [\"a\", \"x\xed\xa0\x80\"]}", "stop[1]",
         "'stop[1]' is not valid UTF-8: byte 0xed at offset 1 of the string"},
        {"{\"prompt\": \"\xc0\xaf\"}", "prompt", "'prompt' is not valid UTF-8: byte 0xc0 at offset 0 of the string"},
        {"{\"prompt\": \"x\", \"model\": \"m\xfe\"}", "model", "'model' is not valid UTF-8: byte 0xfe at offset 1 of the string"},
        {"{\"prompt\": \"x\", \"user\": \"\xff\"}", "user", "'user' is not valid UTF-8: byte 0xff at offset 0 of the string"},
        {"{\"prompt\": \"x\", \"\xff\x61\": 1}", "", "a member name in the body is not valid UTF-8: byte 0xff at offset 0 of the name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_400_msg(SRV_COMPLETION, cases[i].body, cases[i].param, cases[i].message);
    struct { const char *body, *param, *message; } chat[] = {
        {"{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"hi \xff\"}]}",
         "messages[1].content", "'messages[1].content' is not valid UTF-8: byte 0xff at offset 3 of the string"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"\xe2\x82\"}]}]}",
         "messages[0].content[1].text", "'messages[0].content[1].text' is not valid UTF-8: byte 0xe2 at offset 0 of the string"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"n\xff" "ame\": 1}]}", "messages[0]",
         "a member name in 'messages[0]' is not valid UTF-8: byte 0xff at offset 1 of the name"},
    };
    for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++) expect_400_msg(SRV_CHAT, chat[i].body, chat[i].param, chat[i].message);
    /* a raw NUL cuts the string cJSON returns ("a"); the body check still finds it */
    const char nul[] = "{\"prompt\": \"a\0\xff\"}";
    srv_request r;
    srv_error e;
    assert_false(api_parse_request(SRV_COMPLETION, nul, sizeof nul - 1, &r, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.message, "the request body has a raw NUL byte at byte 13 (line 1, column 14): JSON text cannot "
                                   "hold one (in a string, write \\u0000)");
    /* valid multi-byte text (2, 3 and 4 bytes, escapes of a surrogate pair) passes unchanged */
    const char ok[] = "{\"prompt\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82 \\ud83d\\ude42\"}";
    assert_true(api_parse_request(SRV_COMPLETION, ok, sizeof ok - 1, &r, &e));
    assert_string_equal(r.prompt, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82 \xf0\x9f\x99\x82");
    api_request_free(&r);
    /* content is required except for an assistant turn (which may carry only tool calls) */
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\"}]}", "messages[0].content",
                   "'messages[0].content' is required for a 'user' message (a string or an array of text parts), got no field");
    const char asst[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\"}, "
                        "{\"role\": \"user\", \"content\": \"again\"}]}";
    assert_true(api_parse_request(SRV_CHAT, asst, sizeof asst - 1, &r, &e));
    api_request_free(&r);
    /* the escape \u0000 would cut the decoded C string ("hello"): refused with its position; an
     * escaped backslash followed by the text u0000 is not that escape and passes */
    const char esc[] = "{\"prompt\": \"hello\\u0000 world\"}";
    assert_false(api_parse_request(SRV_COMPLETION, esc, sizeof esc - 1, &r, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.message, "a string of the request holds \\u0000 (U+0000) at byte 17 (line 1, column 18): NUL "
                                   "characters are not supported in text");
    const char chat_esc[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\\u0000 y\"}]}";
    assert_false(api_parse_request(SRV_CHAT, chat_esc, sizeof chat_esc - 1, &r, &e));
    assert_int_equal(e.status, 400);
    const char lit[] = "{\"prompt\": \"a\\\\u0000\"}";
    assert_true(api_parse_request(SRV_COMPLETION, lit, sizeof lit - 1, &r, &e));
    assert_string_equal(r.prompt, "a\\u0000");
    api_request_free(&r);
}

static void test_request_errors(void **state) {
    (void)state;
    expect_400(SRV_CHAT, "{\"messages\": [", "");
    expect_400(SRV_CHAT, "[1, 2]", "");
    expect_400(SRV_CHAT, "{}", "messages");
    expect_400(SRV_CHAT, "{\"messages\": []}", "messages");
    expect_400(SRV_CHAT, "{\"messages\": \"hi\"}", "messages");
    expect_400(SRV_CHAT, "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", "messages[0].role");
    expect_400(SRV_CHAT, "{\"messages\": [{\"content\": \"x\"}]}", "messages[0].role");
    expect_400(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content");
    expect_400(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages[0].content[0]");
    const char *m = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
    struct { const char *extra, *param; } cases[] = {
        {"\"temperature\": \"hot\"", "temperature"},
        {"\"temperature\": 2.5", "temperature"},
        {"\"temperature\": -0.1", "temperature"},
        {"\"top_p\": 1.5", "top_p"},
        {"\"top_k\": 2.5", "top_k"},
        {"\"top_k\": -2", "top_k"},
        {"\"min_p\": 2", "min_p"},
        {"\"max_tokens\": -5", "max_tokens"},
        {"\"max_tokens\": 1.5", "max_tokens"},
        {"\"max_tokens\": \"10\"", "max_tokens"},
        {"\"max_completion_tokens\": -2", "max_completion_tokens"},
        {"\"seed\": \"abc\"", "seed"},
        {"\"stream\": \"yes\"", "stream"},
        {"\"stream_options\": 3", "stream_options"},
        {"\"stop\": 5", "stop"},
        {"\"stop\": [\"a\", 5]", "stop[1]"},
        {"\"stop\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]", "stop"},
        {"\"n\": 2", "n"},
        {"\"logprobs\": \"yes\"", "logprobs"},
        {"\"logprobs\": 3", "logprobs"},
        {"\"logprobs\": true, \"top_logprobs\": 21", "top_logprobs"},
        {"\"logprobs\": true, \"top_logprobs\": -1", "top_logprobs"},
        {"\"logprobs\": true, \"top_logprobs\": 1.5", "top_logprobs"},
        {"\"top_logprobs\": 3", "top_logprobs"},
        {"\"presence_penalty\": 0.5", "presence_penalty"},
        {"\"model\": 7", "model"},
        {"\"chat_template_kwargs\": {\"enable_thinking\": \"no\"}", "chat_template_kwargs.enable_thinking"},
        {"\"tools\": [{\"type\": \"function\"}]", "tools[0].function"},
        {"\"tools\": {}", "tools"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{%s, %s}", m, cases[i].extra);
        expect_400(SRV_CHAT, body, cases[i].param);
    }
    expect_400(SRV_COMPLETION, "{}", "prompt");
    expect_400(SRV_COMPLETION, "{\"prompt\": [[1, 2], [3]]}", "prompt");   /* several prompts: one per request */
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [5, -1]}", "prompt", "'prompt[1]' must be a token id (an integer in 0..2147483647), got -1");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [5, 2.5]}", "prompt", "'prompt[1]' must be a token id (an integer in 0..2147483647), got 2.5");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [[5, -1]]}", "prompt", "'prompt[0][1]' must be a token id (an integer in 0..2147483647), got -1");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [[]]}", "prompt", "'prompt[0]' is an empty array; expected token ids");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [5, \"a\"]}", "prompt", "'prompt[1]' must be a token id (an integer in 0..2147483647), got a string");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [\"a\", \"b\"]}", "prompt",
                   "'prompt' holds several prompts (element 0 is a string); send one prompt per request");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [[\"a\"]]}", "prompt",
                   "'prompt[0]' nests its prompt one level too deep (element 0 is a string); expected a string, token ids, "
                   "or a list holding one of those");
    expect_400(SRV_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": 1e300}", "max_tokens");
    expect_400(SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": true}", "logprobs");
    expect_400(SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": 21}", "logprobs");
    expect_400(SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": -1}", "logprobs");
    /* an invalid UTF-8 role is reported in valid UTF-8 */
    srv_request r;
    srv_error e;
    const char bad[] = "{\"messages\": [{\"role\": \"\xff\xfe\", \"content\": \"x\"}]}";
    assert_false(api_parse_request(SRV_CHAT, bad, sizeof bad - 1, &r, &e));
    char *js = api_error_json(&e);
    char *fixed = api_utf8_dup(js, strlen(js));
    assert_string_equal(js, fixed);
    free(fixed);
    free(js);
}

/* Token ids given as numbers past every integer type (1e300; 1e400, which reads as inf; -1e19)
 * are refused with a 400 like any other bad id, without converting them to an integer first (an
 * out-of-range conversion is undefined: the debug build aborts on it). */
static void test_request_token_id_range(void **state) {
    (void)state;
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [5, 1e300]}", "prompt",
                   "'prompt[1]' must be a token id (an integer in 0..2147483647), got 1e+300");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [[-1e19]]}", "prompt",
                   "'prompt[0][0]' must be a token id (an integer in 0..2147483647), got -1e+19");
    expect_400(SRV_COMPLETION, "{\"prompt\": [1e400]}", "prompt");
    expect_400_msg(SRV_COMPLETION, "{\"prompt\": [2147483648]}", "prompt",
                   "'prompt[0]' must be a token id (an integer in 0..2147483647), got 2147483648");
    const char *top = "{\"prompt\": [0, 2147483647]}";   /* the largest id is still an id */
    srv_request r;
    srv_error e;
    assert_true(api_parse_request(SRV_COMPLETION, top, strlen(top), &r, &e));
    assert_int_equal(r.n_prompt_ids, 2);
    assert_int_equal(r.prompt_ids[1], 2147483647);
    api_request_free(&r);
}

static void test_request_fields(void **state) {
    (void)state;
    const char *body =
        "{\"model\": \"x\", \"messages\": [{\"role\": \"developer\", \"content\": \"be brief\"},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]},"
        " {\"role\": \"assistant\", \"content\": null}], \"max_tokens\": 0, \"temperature\": 0, \"top_p\": 0.5,"
        " \"top_k\": 7, \"min_p\": 0, \"seed\": 99, \"stop\": \"\\n\\n\", \"stream\": true,"
        " \"stream_options\": {\"include_usage\": true}, \"chat_template_kwargs\": {\"enable_thinking\": false}}";
    srv_request r;
    srv_error e;
    assert_true(api_parse_request(SRV_CHAT, body, strlen(body), &r, &e));
    assert_int_equal(r.n_msgs, 3);
    assert_string_equal(r.msgs[0].role, "system");
    assert_string_equal(r.msgs[1].content, "ab");
    assert_string_equal(r.msgs[2].content, "");
    assert_int_equal(r.max_tokens, 0);
    assert_true(r.sp.temp == 0.0f && r.sp.top_p == 0.5f && r.sp.top_k == 7 && r.sp.min_p == 0.0f);
    assert_true(r.sp.seed == 99);
    assert_int_equal(r.n_stop, 1);
    assert_string_equal(r.stop[0], "\n\n");
    assert_true(r.stream && r.include_usage && !r.enable_thinking);
    api_request_free(&r);
    /* defaults: llama-server's sampling, no limit, random seed, thinking on */
    const char *b2 = "{\"prompt\": [\"once\"]}";
    assert_true(api_parse_request(SRV_COMPLETION, b2, strlen(b2), &r, &e));
    assert_string_equal(r.prompt, "once");
    assert_int_equal(r.max_tokens, -1);
    assert_true(r.sp.temp == 0.8f && r.sp.top_k == 40 && r.sp.seed == TERN_SEED_RANDOM && r.enable_thinking);
    api_request_free(&r);
}

static void test_tools_block_and_history(void **state) {
    (void)state;
    const char *body =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"weather?\"},"
        " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\","
        " \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 2}\"}}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"sunny\"}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\u00e9t\\u00e9\","
        " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}";
    srv_request r;
    srv_error e;
    if (!api_parse_request(SRV_CHAT, body, strlen(body), &r, &e)) fail_msg("%s", e.message);
    assert_true(r.has_tools);
    assert_int_equal(r.n_msgs, 4);
    assert_string_equal(r.msgs[0].role, "system");
    assert_true(r.trusted[0]);
    /* the template's tojson: Python separators, non-ASCII kept */
    const char *want_tool =
        "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \xc3\xa9t\xc3\xa9\", "
        "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>";
    assert_non_null(strstr(r.msgs[0].content, want_tool));
    assert_true(strncmp(r.msgs[0].content, "# Tools\n\nYou have access to the following functions:\n\n<tools>\n", 61) == 0);
    /* the assistant's call written back as the template writes it */
    assert_string_equal(r.msgs[2].content,
                        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                        "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>");
    assert_false(r.trusted[1] || r.trusted[2] || r.trusted[3]);
    api_request_free(&r);
}

/* Assistant tool calls in the history: arguments must be JSON text or an object (a number is
 * refused, not dropped without a word); for the Qwen3.5 markup, text that is not a JSON object
 * cannot become <parameter=...> entries and is refused rather than silently left out, while the
 * Qwen3 form writes the text as given (as its template). A null user content says "got null". */
static void test_tool_call_arguments(void **state) {
    (void)state;
    const char *fmt = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"\","
                      " \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": %s}}]}]}";
    char body[512];
    snprintf(body, sizeof body, fmt, "5");
    expect_400_msg(SRV_CHAT, body, "messages[1].tool_calls[0].function.arguments",
                   "'messages[1].tool_calls[0].function.arguments' must be a string (the arguments as JSON text) or an object, got 5");
    snprintf(body, sizeof body, fmt, "[1]");
    expect_400(SRV_CHAT, body, "messages[1].tool_calls[0].function.arguments");
    snprintf(body, sizeof body, fmt, "\"not json\"");
    expect_400_msg(SRV_CHAT, body, "messages[1].tool_calls[0].function.arguments",
                   "'messages[1].tool_calls[0].function.arguments' must be the JSON text of an object (the template writes each "
                   "member as a parameter), got 'not json'");
    srv_request r;
    srv_error e;
    assert_true(api_parse_request_fmt(SRV_CHAT, SRV_TOOLS_QWEN3, body, strlen(body), &r, &e));   /* Qwen3: as given */
    assert_string_equal(r.msgs[1].content, "<tool_call>\n{\"name\": \"f\", \"arguments\": not json}\n</tool_call>");
    api_request_free(&r);
    snprintf(body, sizeof body, fmt, "{\"a\": 0.5}");
    assert_true(api_parse_request(SRV_CHAT, body, strlen(body), &r, &e));
    assert_string_equal(r.msgs[1].content, "<tool_call>\n<function=f>\n<parameter=a>\n0.5\n</parameter>\n</function>\n</tool_call>");
    api_request_free(&r);
    snprintf(body, sizeof body, fmt, "null");
    assert_true(api_parse_request(SRV_CHAT, body, strlen(body), &r, &e));
    api_request_free(&r);
    /* a call's type, when given, is "function" (the only kind) */
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"tool_calls\": "
                   "[{\"type\": \"nonfunction\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}",
                   "messages[1].tool_calls[0].type", "'messages[1].tool_calls[0].type' must be \"function\", got 'nonfunction'");
    expect_400(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"tool_calls\": "
               "[{\"type\": 1, \"function\": {\"name\": \"f\"}}]}]}", "messages[1].tool_calls[0].type");
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": null}]}", "messages[0].content",
                   "'messages[0].content' is required for a 'user' message (a string or an array of text parts), got null");
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\"}]}", "messages[0].content",
                   "'messages[0].content' is required for a 'user' message (a string or an array of text parts), got no field");
}

/* A tool message names the call it answers (tool_call_id, a string), as OpenAI requires: without
 * one it is 400 naming messages[i].tool_call_id, with what came; so is one that answers no call of
 * the assistant turn before it. */
static void test_tool_message_call_id(void **state) {
    (void)state;
    const char *fmt = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"\","
                      " \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {}}}]},"
                      " {\"role\": \"tool\", \"content\": \"r\"%s}]}";
    static const struct { const char *id, *got; } bad[] = {{"", "nothing"}, {", \"tool_call_id\": null", "null"},
                                                          {", \"tool_call_id\": 7", "7"}, {", \"tool_call_id\": [\"c1\"]", "an array"}};
    char body[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[200];
        snprintf(body, sizeof body, fmt, bad[i].id);
        snprintf(want, sizeof want, "'messages[2].tool_call_id' is required for a 'tool' message: a string, the id of the "
                 "tool call it answers; got %s", bad[i].got);
        expect_400_msg(SRV_CHAT, body, "messages[2].tool_call_id", want);
    }
    snprintf(body, sizeof body, fmt, ", \"tool_call_id\": \"c1\"");
    srv_request r;
    srv_error e;
    if (!api_parse_request(SRV_CHAT, body, strlen(body), &r, &e)) fail_msg("tool message with tool_call_id refused: %s", e.message);
    assert_int_equal(r.n_msgs, 3);
    assert_string_equal(r.msgs[2].role, "tool");
    assert_string_equal(r.msgs[2].content, "r");
    api_request_free(&r);
    /* it answers a call of the assistant turn before it (other results may come between): an id
     * no call has, or no such turn, is 400 as OpenAI has it */
    snprintf(body, sizeof body, fmt, ", \"tool_call_id\": \"c9\"");
    expect_400_msg(SRV_CHAT, body, "messages[2].tool_call_id", "'messages[2].tool_call_id' is 'c9', expected the id of a call in messages[1].tool_calls");
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"tool\", \"content\": \"r\", \"tool_call_id\": \"c1\"}]}",
                   "messages[1]", "'messages[1]' is a 'tool' message, expected after an assistant message with 'tool_calls' (and that turn's other results)");
    expect_400_msg(SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}, "
                   "{\"role\": \"tool\", \"content\": \"r\", \"tool_call_id\": \"c1\"}]}",
                   "messages[2]", "'messages[2]' is a 'tool' message, expected after an assistant message with 'tool_calls' (and that turn's other results)");
    static const char two[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
                              "{\"id\": \"a\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {}}},"
                              "{\"id\": \"b\", \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": {}}}]},"
                              "{\"role\": \"tool\", \"content\": \"rb\", \"tool_call_id\": \"b\"}, {\"role\": \"tool\", \"content\": \"ra\", \"tool_call_id\": \"a\"}]}";
    if (!api_parse_request(SRV_CHAT, two, sizeof two - 1, &r, &e)) fail_msg("two results in another order refused: %s", e.message);
    api_request_free(&r);
    static const char noid[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
                               "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {}}}]},"
                               "{\"role\": \"tool\", \"content\": \"r\", \"tool_call_id\": \"any\"}]}";
    if (!api_parse_request(SRV_CHAT, noid, sizeof noid - 1, &r, &e)) fail_msg("a result of a call sent without an id refused: %s", e.message);
    api_request_free(&r);
}

static void test_response_shapes(void **state) {
    (void)state;
    srv_usage u = {10, 3, 4};
    char *s = api_chat_response("chatcmpl-1", 1700000000, "tern", "Hi", 2, "hmm", 3, NULL, "stop", NULL, &u, NULL);
    cJSON *j = cJSON_Parse(s);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "chat.completion");
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    cJSON *msg = cJSON_GetObjectItem(c, "message");
    assert_string_equal(cJSON_GetObjectItem(msg, "content")->valuestring, "Hi");
    assert_string_equal(cJSON_GetObjectItem(msg, "reasoning_content")->valuestring, "hmm");
    assert_string_equal(cJSON_GetObjectItem(msg, "reasoning")->valuestring, "hmm");   /* vLLM's name */
    assert_string_equal(cJSON_GetObjectItem(c, "finish_reason")->valuestring, "stop");
    cJSON *us = cJSON_GetObjectItem(j, "usage");
    assert_int_equal(cJSON_GetObjectItem(us, "total_tokens")->valueint, 13);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(us, "prompt_tokens_details"), "cached_tokens")->valueint, 4);
    cJSON_Delete(j);
    free(s);
    s = api_chat_chunk("chatcmpl-1", 1, "tern", false, NULL, 0, "why", 3, NULL, NULL, NULL, NULL, NULL);
    j = cJSON_Parse(s);
    c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "reasoning_content")->valuestring, "why");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "reasoning")->valuestring, "why");
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "content"));
    cJSON_Delete(j);
    free(s);
    s = api_chat_chunk("chatcmpl-1", 1, "tern", true, "x", 1, NULL, 0, NULL, NULL, NULL, NULL, NULL);
    j = cJSON_Parse(s);
    c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "role")->valuestring, "assistant");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(c, "finish_reason")));
    cJSON_Delete(j);
    free(s);
    s = api_chat_chunk("chatcmpl-1", 1, "tern", false, NULL, 0, NULL, 0, NULL, NULL, NULL, &u, NULL);
    j = cJSON_Parse(s);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "choices")), 0);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens")->valueint, 3);
    cJSON_Delete(j);
    free(s);
}

int suite_server(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_across_tokens),
        cmocka_unit_test(test_reply_pieces),
        cmocka_unit_test(test_logprob_compute),
        cmocka_unit_test(test_reasoning_split),
        cmocka_unit_test(test_tool_calls),
        cmocka_unit_test(test_utf8_repair),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_request_number_messages),
        cmocka_unit_test(test_request_element_types),
        cmocka_unit_test(test_request_json_syntax),
        cmocka_unit_test(test_request_utf8),
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_request_token_id_range),
        cmocka_unit_test(test_request_duplicate_keys),
        cmocka_unit_test(test_tools_block_and_history),
        cmocka_unit_test(test_tool_call_arguments),
        cmocka_unit_test(test_tool_message_call_id),
        cmocka_unit_test(test_response_shapes),
    };
    TEST_RUN_SUITE("server", tests);
}
