/* test_server_http.c: `tern serve` end to end on loopback with real clients: curl for every
 * endpoint, limit and error (401, 400 with OpenAI error objects, 404/405, 413, 429, context
 * overflow), max_tokens 0/1/2, stop strings spanning tokens (streamed and not), the SSE format,
 * batch equivalence (concurrent greedy == one at a time), prefix reuse, disconnects mid-stream
 * and mid-prefill (the slot is freed), and the official `openai` npm client and the chat page in
 * headless Chromium (tests/server/ scripts, dependencies installed by .ci/run into
 * tests/server/node_modules). Expected texts come from the same server's greedy output without
 * the feature under test (e.g. the text cut at the first occurrence of the stop string). */
#include "test.h"
#include "model_fx.h"
#include "run_util.h"

#include "../server/api.h"
#include "../server/prompt.h"
#include "../server/reply.h"
#include "../server/sched.h"
#include "format/gguf.h"
#include "format/qtypes.h"
#include "model/model.h"
#include "tokenizer/chat.h"
#include "tern_server.h"
#include "tern.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STORIES "data/stories260k/stories260K.gguf"
#define QWEN3 "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"
#define QWEN35 "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tern_model *load(const char *rel) {
    char path[1024];
    return mfx_load(fx_require(path, sizeof path, rel), TERN_NUMERICS_FAST, 1);
}

static srv *start(tern_model *m, int parallel, int n_ctx, int queue, size_t body_max, const char *key, int n_batch) {
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = parallel;
    c.n_ctx = n_ctx;
    c.queue_max = queue;
    if (body_max) c.body_max = body_max;
    c.api_key = key;
    if (n_batch) c.n_batch = n_batch;
    c.model_name = "test-model";
    srv *s = NULL;
    tern_err err = {0};
    if (srv_start(&s, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    return s;
}

/* One slot of 256 positions; path: the file /props and the default model id come from (NULL:
 * none); name: --alias (NULL: none). */
static srv *start_path(tern_model *m, const char *path, const char *name) {
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = 1;
    c.n_ctx = 256;
    c.model_path = path;
    c.model_name = name;
    srv *s = NULL;
    tern_err err = {0};
    if (srv_start(&s, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    return s;
}

/* ---- curl ------------------------------------------------------------------------------------ */

static atomic_int body_counter;

/* HTTP request with curl to the server on port; returns the body (caller frees) and the status in
 * *code. */
static char *http_at(int port, const char *method, const char *path, const char *body, const char *extra, int *code) {
    char file[512] = "", cmd[2048];
    if (body) {
        char stem[64];
        snprintf(stem, sizeof stem, "body-%d", atomic_fetch_add(&body_counter, 1));
        fx_tmp_path(file, sizeof file, stem);
        FILE *f = fopen(file, "wb");
        fwrite(body, 1, strlen(body), f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "curl -s -N -o - -w '\\n%%{http_code}' -X %s %s%s%s %s http://127.0.0.1:%d%s", method,
             body ? "-H 'Content-Type: application/json' --data-binary @'" : "", body ? file : "", body ? "'" : "",
             extra ? extra : "", port, path);
    char *out = ru_capture(cmd, NULL);
    if (body) unlink(file);
    char *nl = strrchr(out, '\n');
    *code = nl ? atoi(nl + 1) : 0;
    if (nl) *nl = '\0';
    return out;
}

static char *http(srv *s, const char *method, const char *path, const char *body, const char *extra, int *code) {
    return http_at(srv_port(s), method, path, body, extra, code);
}

static cJSON *http_json(srv *s, const char *path, const char *body, int want_code) {
    int code;
    char *out = http(s, "POST", path, body, NULL, &code);
    if (code != want_code) fail_msg("POST %s %s: status %d, expected %d: %s", path, body, code, want_code, out);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON: %s", out);
    free(out);
    return j;
}

static uint64_t metric(srv *s, const char *name) {
    int code;
    char *out = http(s, "GET", "/metrics", NULL, NULL, &code);
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(out, key);
    uint64_t v = p ? strtoull(p + strlen(key), NULL, 10) : UINT64_MAX;
    free(out);
    return v;
}

static const char *choice_text(cJSON *j) {
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    cJSON *t = cJSON_GetObjectItem(c, "text");
    if (!t) t = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content");
    return cJSON_IsString(t) ? t->valuestring : "";
}

static const char *finish_reason(cJSON *j) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "finish_reason")->valuestring;
}

static int usage(cJSON *j, const char *what) {
    return cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), what)->valueint;
}

/* Checks an OpenAI error object with the given param (NULL: any). */
static void expect_error(srv *s, const char *method, const char *path, const char *body, const char *extra, int code,
                         const char *param) {
    int got;
    char *out = http(s, method, path, body, extra, &got);
    if (got != code) fail_msg("%s %s: status %d, expected %d: %s", method, path, got, code, out);
    cJSON *j = cJSON_Parse(out);
    cJSON *e = cJSON_GetObjectItem(j, "error");
    if (!cJSON_IsObject(e) || !cJSON_IsString(cJSON_GetObjectItem(e, "message")) || !cJSON_IsString(cJSON_GetObjectItem(e, "type")))
        fail_msg("no OpenAI error object: %s", out);
    if (param && (!cJSON_IsString(cJSON_GetObjectItem(e, "param")) || strcmp(cJSON_GetObjectItem(e, "param")->valuestring, param)))
        fail_msg("param is not '%s': %s", param, out);
    cJSON_Delete(j);
    free(out);
}

/* ---- SSE --------------------------------------------------------------------------------- */

typedef struct sse {
    char *content;          /* concatenated content (chat) or text (completions) */
    char *finish;
    int n_events;
    bool done, role_first;
    cJSON *usage;
} sse;

static void sse_parse(const char *raw, sse *o) {
    memset(o, 0, sizeof *o);
    size_t cap = strlen(raw) + 1, n = 0;
    o->content = calloc(cap, 1);
    const char *p = raw;
    while ((p = strstr(p, "data: "))) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        if (!end) fail_msg("unterminated SSE event: %s", p);
        if (o->done) fail_msg("an event after [DONE]");
        if (!strncmp(p, "[DONE]", 6)) {
            o->done = true;
            p = end;
            continue;
        }
        char *ev = strndup(p, (size_t)(end - p));
        cJSON *j = cJSON_Parse(ev);
        if (!j) fail_msg("event is not JSON: %s", ev);
        free(ev);
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
        if (!ch) {
            o->usage = cJSON_Duplicate(cJSON_GetObjectItem(j, "usage"), 1);
        } else {
            cJSON *d = cJSON_GetObjectItem(ch, "delta");
            cJSON *t = d ? cJSON_GetObjectItem(d, "content") : cJSON_GetObjectItem(ch, "text");
            if (o->n_events == 0) o->role_first = d && cJSON_IsString(cJSON_GetObjectItem(d, "role"));
            if (cJSON_IsString(t)) {
                size_t l = strlen(t->valuestring);
                memcpy(o->content + n, t->valuestring, l);
                n += l;
            }
            cJSON *f = cJSON_GetObjectItem(ch, "finish_reason");
            if (cJSON_IsString(f)) o->finish = strdup(f->valuestring);
        }
        o->n_events++;
        cJSON_Delete(j);
        p = end;
    }
}

static void sse_free(sse *o) {
    free(o->content);
    free(o->finish);
    cJSON_Delete(o->usage);
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_endpoints_and_errors(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 2, 256, 4, 4096, NULL, 0);
    int code;
    char *out = http(s, "GET", "/health", NULL, NULL, &code);
    assert_int_equal(code, 200);
    free(out);
    out = http(s, "GET", "/v1/models", NULL, NULL, &code);
    assert_int_equal(code, 200);
    cJSON *j = cJSON_Parse(out);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "id")->valuestring, "test-model");
    cJSON_Delete(j);
    free(out);
    out = http(s, "GET", "/", NULL, NULL, &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(out, "<html"));
    free(out);
    const uint64_t n404 = metric(s, "tern_requests_total{status=\"404\"}"), n405 = metric(s, "tern_requests_total{status=\"405\"}");
    expect_error(s, "GET", "/v1/nothing", NULL, NULL, 404, NULL);
    {   /* the message names the method and path the client sent */
        int got;
        char *o = http(s, "POST", "/v1/nothing", "{}", NULL, &got);
        if (got != 404 || !strstr(o, "no such endpoint: POST /v1/nothing;")) fail_msg("POST /v1/nothing: %d %s", got, o);
        free(o);
    }
    expect_error(s, "GET", "/v1/completions", NULL, NULL, 405, NULL);
    expect_error(s, "DELETE", "/v1/models", NULL, NULL, 405, NULL);
    expect_error(s, "PUT", "/health", NULL, NULL, 405, NULL);   /* an open GET path: the wrong method */
    {   /* a 405 names the method and path received and the method the path takes */
        static const char *const cases[][3] = {{"PUT", "/health", "GET"}, {"GET", "/v1/chat/completions", "POST"},
                                               {"DELETE", "/v1/models", "GET"}, {"GET", "/v1/messages", "POST"},
                                               {"POST", "/props", "GET"}, {"PATCH", "/tokenize", "POST"}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            int got;
            char *o = http(s, cases[i][0], cases[i][1], NULL, NULL, &got);
            char want[160];
            snprintf(want, sizeof want, "method %s not allowed on %s; use %s", cases[i][0], cases[i][1], cases[i][2]);
            cJSON *jo = cJSON_Parse(o);
            const cJSON *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(jo, "error"), "message");
            if (got != 405 || !cJSON_IsString(msg) || strcmp(msg->valuestring, want))
                fail_msg("%s %s: %d %s, expected 405 '%s'", cases[i][0], cases[i][1], got, o, want);
            cJSON_Delete(jo);
            free(o);
            /* the Allow header lists what the path answers (RFC 9110): HEAD with GET, and OPTIONS */
            char cmd[512];
            snprintf(cmd, sizeof cmd, "curl -s -D - -o /dev/null -X %s http://127.0.0.1:%d%s", cases[i][0], srv_port(s),
                     cases[i][1]);
            char *head = ru_capture(cmd, NULL);
            const char *allow = !strcmp(cases[i][2], "GET") ? "Allow: GET, HEAD, OPTIONS\r\n" : "Allow: POST, OPTIONS\r\n";
            if (!head || !strstr(head, allow)) fail_msg("%s %s: expected '%.*s' among the headers:\n%s", cases[i][0],
                                                        cases[i][1], (int)strlen(allow) - 2, allow, head ? head : "(none)");
            free(head);
        }
    }
    assert_int_equal(metric(s, "tern_requests_total{status=\"404\"}"), n404 + 2);   /* each status its own count */
    assert_int_equal(metric(s, "tern_requests_total{status=\"405\"}"), n405 + 3 + 2 * 6);   /* each case twice */
    expect_error(s, "POST", "/v1/completions", "{\"prompt\": ", NULL, 400, NULL);
    out = http(s, "POST", "/v1/completions", "{\"prompt\": \"x\",\n \"max_tokens\": 5x}", NULL, &code);
    if (code != 400 || !strstr(out, "\"the request body is not valid JSON: at byte 32 (line 2, column 17): found 'x'\""))
        fail_msg("malformed JSON: status %d, %s", code, out);
    free(out);
    expect_error(s, "POST", "/v1/completions", "{\"prompt\": \"x\", \"temperature\": \"hot\"}", NULL, 400, "temperature");
    expect_error(s, "POST", "/v1/chat/completions", "{\"messages\": []}", NULL, 400, "messages");
    expect_error(s, "POST", "/v1/chat/completions", "{\"messages\": [null]}", NULL, 400, "messages[0]");
    expect_error(s, "POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, "
                 "{\"role\": \"tool\", \"content\": \"r\"}]}", NULL, 400, "messages[1].tool_call_id");
    expect_error(s, "POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xc3 \xff\"}]}", NULL,
                 400, "messages[0].content");
    out = http(s, "POST", "/v1/completions", "{\"prompt\": \"ab\xc3\"}", NULL, &code);
    if (code != 400 || !strstr(out, "\"'prompt' is not valid UTF-8: byte 0xc3 at offset 2 of the string\""))
        fail_msg("invalid UTF-8 prompt: status %d, %s", code, out);
    free(out);
    expect_error(s, "POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": -3}", NULL, 400, "max_tokens");
    /* body limit 4096 */
    char *big = malloc(8192);
    memset(big, 'a', 8191);
    big[8191] = '\0';
    memcpy(big, "{\"prompt\": \"", 12);
    memcpy(big + 8189, "\"}", 2);
    expect_error(s, "POST", "/v1/completions", big, NULL, 413, NULL);
    free(big);
    /* a prompt longer than the context (256) */
    char *longp = malloc(16384);
    strcpy(longp, "{\"prompt\": \"");
    for (int i = 0; i < 70; i++) strcat(longp, "Once upon a time ");
    strcat(longp, "\"}");
    expect_error(s, "POST", "/v1/completions", longp, NULL, 400, "prompt");
    out = http(s, "POST", "/v1/completions", longp, NULL, &code);
    assert_non_null(strstr(out, "context"));
    free(out);
    free(longp);
    /* metrics: Prometheus text with the counters and histograms */
    out = http(s, "GET", "/metrics", NULL, NULL, &code);
    assert_int_equal(code, 200);
    const char *names[] = {"tern_requests_total{status=\"400\"}", "tern_requests_total{status=\"413\"}", "tern_queue_depth",
                           "tern_time_to_first_token_seconds_bucket", "tern_time_per_output_token_seconds_count",
                           "tern_generated_tokens_total"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strstr(out, names[i])) fail_msg("/metrics lacks %s:\n%s", names[i], out);
    free(out);
    srv_stop(s);

    /* API key */
    s = start(m, 1, 256, 4, 0, "sekret", 0);
    expect_error(s, "POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 1}", NULL, 401, NULL);
    expect_error(s, "POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 1}", "-H 'Authorization: Bearer wrong'", 401, NULL);
    expect_error(s, "GET", "/v1/models", NULL, NULL, 401, NULL);
    out = http(s, "POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 1}", "-H 'Authorization: Bearer sekret'", &code);
    assert_int_equal(code, 200);
    free(out);
    out = http(s, "GET", "/health", NULL, NULL, &code);       /* health needs no key */
    assert_int_equal(code, 200);
    free(out);
    srv_stop(s);
    tern_model_free(m);
}

/* The Authorization scheme is case-insensitive (RFC 9110 section 11.1): "bearer", "BEARER" and
 * one or more spaces before the key are accepted; a wrong, truncated, extended or missing key, a
 * missing separator and another scheme still get 401 with an OpenAI error object and a
 * WWW-Authenticate: Bearer challenge. */
static void test_api_key_scheme(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 0, "sekret", 0);
    const char *body = "{\"prompt\": \"Once\", \"max_tokens\": 1, \"temperature\": 0}";
    struct { const char *auth; int code; } cases[] = {
        {"Bearer sekret", 200},
        {"bearer sekret", 200},
        {"BEARER sekret", 200},
        {"bEaReR   sekret", 200},
        {"Bearer\tsekret", 200},
        {"bearer sekre", 401},
        {"bearer sekretx", 401},
        {"bearer Sekret", 401},
        {"bearer", 401},
        {"bearer ", 401},
        {"bearersekret", 401},
        {"Basic sekret", 401},
        {"Bearerx sekret", 401},
        {NULL, 401},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char extra[128] = "", cmd[1024], file[512], stem[64];
        if (cases[i].auth) snprintf(extra, sizeof extra, "-H $'Authorization: %s'", cases[i].auth);
        snprintf(stem, sizeof stem, "body-%d", atomic_fetch_add(&body_counter, 1));
        fx_tmp_path(file, sizeof file, stem);
        FILE *f = fopen(file, "wb");
        fputs(body, f);
        fclose(f);
        /* bash for $'\t'; -D - puts the headers before the body */
        snprintf(cmd, sizeof cmd, "bash -c \"curl -s -D - -o - -H 'Content-Type: application/json' --data-binary @'%s' %s "
                 "http://127.0.0.1:%d/v1/completions\"", file, extra, srv_port(s));
        char *out = ru_capture(cmd, NULL);
        unlink(file);
        const char *sp = strchr(out, ' ');
        const int code = sp ? atoi(sp + 1) : 0;
        const char *json = strstr(out, "\r\n\r\n");
        cJSON *j = json ? cJSON_Parse(json + 4) : NULL;
        bool good = code == cases[i].code && j;
        if (good && code == 401) {
            cJSON *e = cJSON_GetObjectItem(j, "error");
            good = cJSON_IsString(cJSON_GetObjectItem(e, "message")) &&
                   !strcmp(cJSON_GetObjectItem(e, "message")->valuestring,
                          "invalid or missing API key (Authorization: Bearer KEY, or x-api-key: KEY)") &&
                   cJSON_IsString(cJSON_GetObjectItem(e, "type")) && !strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "authentication_error") &&
                   cJSON_IsNull(cJSON_GetObjectItem(e, "param")) && strstr(out, "WWW-Authenticate: Bearer\r\n");
        } else if (good) {
            good = cJSON_IsArray(cJSON_GetObjectItem(j, "choices"));
        }
        if (!good) fail_msg("Authorization '%s': expected %d, got:\n%s", cases[i].auth ? cases[i].auth : "(none)", cases[i].code, out);
        cJSON_Delete(j);
        free(out);
    }
    srv_stop(s);
    tern_model_free(m);
}

/* A raw HTTP exchange on loopback: sends head, then body_bytes bytes of 'a', then waits (up to
 * limit_s) for the server to answer and close, WITHOUT closing or sending more (a stalled client).
 * Returns what came back (malloc'd) and the seconds from the last byte sent to the server's close. */
static char *raw_exchange(srv *s, const char *head, size_t body_bytes, double limit_s, double *secs) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)srv_port(s));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) fail_msg("connect to the server failed");
    if (send(fd, head, strlen(head), MSG_NOSIGNAL) != (ssize_t)strlen(head)) fail_msg("send failed");
    char *chunk = malloc(4096);
    memset(chunk, 'a', 4096);
    for (size_t sent = 0; sent < body_bytes;) {
        const size_t k = body_bytes - sent < 4096 ? body_bytes - sent : 4096;
        const ssize_t w = send(fd, chunk, k, MSG_NOSIGNAL);
        if (w <= 0) break;                            /* the server already answered and closed */
        sent += (size_t)w;
    }
    free(chunk);
    const double t0 = now_s();
    sbuf got = {0};
    sbuf_add(&got, "", 0);
    char buf[4096];
    for (;;) {
        const double left = limit_s - (now_s() - t0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
        const ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) break;
        sbuf_add(&got, buf, (size_t)r);
    }
    *secs = now_s() - t0;
    close(fd);
    return got.p;
}

/* Content-Length given twice with different values (RFC 9112 6.3: a framing error; behind a proxy
 * that takes the other value, the rest of the body would be read as the next request) gets 400
 * with an OpenAI error object before any body is read, and the connection closes; the same value
 * twice is one length. */
static void test_content_length_twice(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 4096, NULL, 0);
    const char *body = "{\"prompt\": \"Once\", \"max_tokens\": 1, \"temperature\": 0}";
    char head[512];
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nContent-Length: 0\r\n\r\n%s", strlen(body), body);
    double secs;
    char *out = raw_exchange(s, head, 0, 10.0, &secs);
    const char *json = strstr(out, "\r\n\r\n");
    cJSON *j = json ? cJSON_Parse(json + 4) : NULL;
    cJSON *e = cJSON_GetObjectItem(j, "error");
    char want[160];
    snprintf(want, sizeof want, "the Content-Length header is given 2 times with different values ('%zu', '0'): expected one length",
             strlen(body));
    if (strncmp(out, "HTTP/1.1 400 ", 13) || !cJSON_IsString(cJSON_GetObjectItem(e, "message")) ||
        strcmp(cJSON_GetObjectItem(e, "message")->valuestring, want) ||
        strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error"))
        fail_msg("two different Content-Length:\n%s", out);
    cJSON_Delete(j);
    free(out);
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\ncontent-length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), strlen(body), body);
    out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "\"completion_tokens\":1")) fail_msg("the same Content-Length twice:\n%s", out);
    free(out);
    /* Content-Length beside Transfer-Encoding: chunked: 400 before the body, and the connection
     * closes (not held until the timeout) */
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", strlen(body), body);
    out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 400 ", 13) ||
        !strstr(out, "the request has both Content-Length ('3') and Transfer-Encoding ('chunked'): expected one of them"))
        fail_msg("Content-Length with Transfer-Encoding:\n%s", out);
    if (secs > 5.0) fail_msg("Content-Length with Transfer-Encoding: the connection stayed open %.1f s", secs);
    free(out);
    /* a transfer coding other than chunked alone: 501 (RFC 9112 6.1) and the connection closes,
     * not held until the timeout; "Chunked" is chunked */
    static const char *const codings[] = {"gzip, chunked", "gzip", "chunked, chunked", "identity", "chunked "};
    for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
        snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: %s\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", codings[i], strlen(body), body);
        out = raw_exchange(s, head, 0, 10.0, &secs);
        char want_te[160];
        snprintf(want_te, sizeof want_te, "Transfer-Encoding '%s' is not supported; expected 'chunked' alone (or Content-Length)",
                 codings[i]);
        if (strncmp(out, "HTTP/1.1 501 ", 13) || !strstr(out, want_te) || secs > 5.0)
            fail_msg("Transfer-Encoding: %s: %.1f s:\n%s", codings[i], secs, out);
        free(out);
    }
    /* two Transfer-Encoding headers are one list ("chunked, gzip"): 501 too, whichever comes first */
    for (int order = 0; order < 2; order++) {
        snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: %s\r\nTransfer-Encoding: %s\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", order ? "gzip" : "chunked",
                 order ? "chunked" : "gzip", strlen(body), body);
        out = raw_exchange(s, head, 0, 10.0, &secs);
        if (strncmp(out, "HTTP/1.1 501 ", 13) || !strstr(out, "Transfer-Encoding is given 2 times") || secs > 5.0)
            fail_msg("two Transfer-Encoding headers (%s first): %.1f s:\n%s", order ? "gzip" : "chunked", secs, out);
        free(out);
    }
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", strlen(body), body);
    out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "\"completion_tokens\":1")) fail_msg("Transfer-Encoding: Chunked:\n%s", out);
    free(out);
    srv_stop(s);
    tern_model_free(m);
}

/* An absolute-form request target (RFC 9112 3.2.2: a server must accept it) is served as its
 * path: a completion, the page for a bare authority, and a 404 that names the path alone. */
static void test_absolute_form(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 4096, NULL, 0);
    const char *body = "{\"prompt\": \"Once\", \"max_tokens\": 1, \"temperature\": 0}";
    char head[512];
    snprintf(head, sizeof head, "POST http://127.0.0.1:1/v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
    double secs;
    char *out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "\"completion_tokens\":1")) fail_msg("absolute-form POST:\n%s", out);
    free(out);
    out = raw_exchange(s, "GET HTTPS://example.org HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "text/html")) fail_msg("absolute-form GET of the root:\n%s", out);
    free(out);
    out = raw_exchange(s, "GET http://x/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 404 ", 13) || !strstr(out, "no such endpoint: GET /nope;") || strstr(out, "http://x")) fail_msg("absolute-form 404:\n%s", out);
    free(out);
    srv_stop(s);
    tern_model_free(m);
}

/* A path too long for the 404 message (20000 bytes here) is shown cut, and marked: its first bytes,
 * "...", and how many bytes it had; a path of 2-byte characters is cut between characters. A short
 * one is shown whole (test_endpoints_and_errors). */
static void test_long_path_404(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 4096, NULL, 0);
    for (int utf8 = 0; utf8 < 2; utf8++) {
        const size_t n = 20000;                         /* the path's bytes: "/" then 19999 of 'x' or of "é" */
        char *path = malloc(n + 1);
        path[0] = '/';
        for (size_t i = 1; i < n; i++) path[i] = utf8 ? (i % 2 ? '\xc3' : '\xa9') : 'x';
        if (utf8) path[n - 1] = 'x';                    /* 9999 "é" and one 'x': 1 + 19998 + 1 bytes */
        path[n] = '\0';
        char *head = malloc(n + 128);
        snprintf(head, n + 128, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
        double secs;
        char *out = raw_exchange(s, head, 0, 10.0, &secs);
        const char *json = strstr(out, "\r\n\r\n");
        cJSON *j = json ? cJSON_Parse(json + 4) : NULL;
        const cJSON *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message");
        if (strncmp(out, "HTTP/1.1 404 ", 13) || !cJSON_IsString(msg)) fail_msg("GET of a %zu-byte path:\n%.400s", n, out);
        const char *t = msg->valuestring, *lead = "no such endpoint: GET ";
        char mark[64];
        snprintf(mark, sizeof mark, "... (%zu bytes); expected /v1/chat/completions", n);
        const char *cut = strstr(t, mark);
        if (strncmp(t, lead, strlen(lead)) || !cut) fail_msg("the %zu-byte path is not shown cut and marked: %s", n, t);
        const char *shown = t + strlen(lead);
        const size_t k = (size_t)(cut - shown);         /* the bytes of the path shown */
        if (k < 64 || k >= n || memcmp(shown, path, k)) fail_msg("not the path's first bytes (%zu shown): %s", k, t);
        if (utf8 && k % 2 != 1) fail_msg("the path is cut inside a character (%zu bytes shown): %s", k, t);
        cJSON_Delete(j);
        free(out);
        free(head);
        free(path);
    }
    srv_stop(s);
    tern_model_free(m);
}

/* The body limit (4096 here) is enforced as the body arrives: a chunked body that passes it gets
 * 413 with an OpenAI error object as soon as the received bytes pass the limit, even when the
 * client declared a larger chunk and stalls (no wait for the 120 s connection timeout);
 * a declared Content-Length over the limit gets 413 before any of the body is read; without the
 * API key it is 401 either way. A chunked body within the limit is served, and so is the next
 * request. */
/* A 413 message: want exactly, or (want ending in ": ") want followed by "N bytes had arrived" with
 * N over the 4096-byte limit (how much of a chunked body arrived depends on its TCP segments). */
static bool msg_413(const char *got, const char *want) {
    const size_t n = strlen(want);
    if (n < 2 || strcmp(want + n - 2, ": ")) return !strcmp(got, want);
    if (strncmp(got, want, n)) return false;
    char *end = NULL;
    const unsigned long long arrived = strtoull(got + n, &end, 10);
    return end != got + n && arrived > 4096 && !strcmp(end, " bytes had arrived");
}

static void test_body_limit_on_arrival(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 4096, NULL, 0);
    struct { const char *head; size_t body; int code; const char *msg; } cases[] = {
        /* a chunk of 0x100000 bytes declared, 8000 sent, then nothing */
        {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n",
         8000, 413, "the request body is larger than the limit of 4096 bytes: "},   /* then how many had arrived (> 4096) */
        /* 4097 bytes declared, none sent */
        {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4097\r\n\r\n",
         0, 413, "the request body is larger than the limit of 4096 bytes: Content-Length is 4097"},
    };
    const uint64_t n413 = metric(s, "tern_requests_total{status=\"413\"}");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double secs;
        char *out = raw_exchange(s, cases[i].head, cases[i].body, 10.0, &secs);
        char status[32];
        snprintf(status, sizeof status, "HTTP/1.1 %d ", cases[i].code);
        const char *json = strstr(out, "\r\n\r\n");
        cJSON *j = json ? cJSON_Parse(json + 4) : NULL;
        cJSON *e = cJSON_GetObjectItem(j, "error");
        const bool good = !strncmp(out, status, strlen(status)) && cJSON_IsString(cJSON_GetObjectItem(e, "message")) &&
                          msg_413(cJSON_GetObjectItem(e, "message")->valuestring, cases[i].msg) &&
                          !strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error") &&
                          cJSON_IsNull(cJSON_GetObjectItem(e, "param")) && secs < 5.0;
        if (!good) fail_msg("case %zu: after %.2f s:\n%s", i, secs, out);
        print_message("case %zu: %d after %.3f s\n", i, cases[i].code, secs);
        cJSON_Delete(j);
        free(out);
    }
    assert_int_equal(metric(s, "tern_requests_total{status=\"413\"}"), n413 + 2);
    {   /* the same on /v1/messages: Anthropic's shape, as its other errors */
        double secs;
        char *out = raw_exchange(s, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n100000\r\n", 8000, 10.0, &secs);
        const char *json = strstr(out, "\r\n\r\n");
        cJSON *j = json ? cJSON_Parse(json + 4) : NULL;
        const cJSON *e = cJSON_GetObjectItem(j, "error");
        const bool good = !strncmp(out, "HTTP/1.1 413 ", 13) && cJSON_IsString(cJSON_GetObjectItem(j, "type")) &&
                          !strcmp(cJSON_GetObjectItem(j, "type")->valuestring, "error") &&
                          cJSON_IsString(cJSON_GetObjectItem(e, "type")) &&
                          !strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "request_too_large") &&
                          cJSON_IsString(cJSON_GetObjectItem(e, "message")) &&
                          msg_413(cJSON_GetObjectItem(e, "message")->valuestring, cases[0].msg);
        if (!good) fail_msg("chunked /v1/messages over the limit: expected 413 {\"type\": \"error\", \"error\": "
                            "{\"type\": \"request_too_large\", \"message\": \"%s\"}}, got:\n%s", cases[0].msg, out);
        cJSON_Delete(j);
        free(out);
    }
    /* a chunked body within the limit: served */
    const char *body = "{\"prompt\": \"Once\", \"max_tokens\": 2, \"temperature\": 0}";
    char head[512];
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", strlen(body), body);
    double secs;
    char *out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "\"completion_tokens\":2")) fail_msg("chunked within the limit:\n%s", out);
    free(out);
    srv_stop(s);
    /* with an API key: no key gets 401 first, a chunked body past the limit with the key gets 413 */
    s = start(m, 1, 256, 4, 4096, "sekret", 0);
    out = raw_exchange(s, cases[0].head, 8000, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 401 ", 13) || !strstr(out, "WWW-Authenticate: Bearer\r\n") || !strstr(out, "\"authentication_error\"") || secs >= 5.0)
        fail_msg("chunked, no key: after %.2f s:\n%s", secs, out);
    free(out);
    out = raw_exchange(s, cases[1].head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 401 ", 13)) fail_msg("Content-Length over the limit, no key:\n%s", out);
    free(out);
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
             "Transfer-Encoding: chunked\r\n\r\n100000\r\n");
    out = raw_exchange(s, head, 8000, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 413 ", 13) || secs >= 5.0) fail_msg("chunked with the key: after %.2f s:\n%s", secs, out);
    free(out);
    int code;
    out = http(s, "POST", "/v1/completions", body, "-H 'Authorization: Bearer sekret'", &code);
    assert_int_equal(code, 200);
    free(out);
    srv_stop(s);
    tern_model_free(m);
}

/* POST with a given Content-Type header value (NULL: none at all) through curl. */
static char *http_ct(srv *s, const char *path, const char *body, const char *ct, int *code) {
    char file[512], cmd[2048], stem[64];
    snprintf(stem, sizeof stem, "body-%d", atomic_fetch_add(&body_counter, 1));
    fx_tmp_path(file, sizeof file, stem);
    FILE *f = fopen(file, "wb");
    fwrite(body, 1, strlen(body), f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "curl -s -o - -w '\\n%%{http_code}' -H 'Content-Type:%s%s' --data-binary @'%s' http://127.0.0.1:%d%s",
             ct ? " " : "", ct ? ct : "", file, srv_port(s), path);
    char *out = ru_capture(cmd, NULL);
    unlink(file);
    char *nl = strrchr(out, '\n');
    *code = nl ? atoi(nl + 1) : 0;
    if (nl) *nl = '\0';
    return out;
}

/* The body's media type (llama-server reads any body; vLLM refuses all but application/json with
 * 415): application/json in any case with a UTF-8 charset or none, and no Content-Type at all, are
 * served; text/plain, multipart/form-data, a bare `curl -d`'s form encoding and a non-UTF-8 charset
 * get 415 with an OpenAI error object saying what to send, counted in /metrics. */
static void test_content_type(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 0, NULL, 0);
    const char *body = "{\"prompt\": \"Once\", \"max_tokens\": 1, \"temperature\": 0}";
    const char *chat = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 1}";
    struct { const char *ct; int code; } cases[] = {
        {NULL, 200},
        {"application/json", 200},
        {"Application/JSON; charset=UTF-8", 200},
        {"application/json;charset=\"utf-8\"", 200},
        {"text/plain", 415},
        {"text/plain;charset=UTF-8", 415},
        {"multipart/form-data; boundary=xyz", 415},
        {"application/x-www-form-urlencoded", 415},
        {"application/jsonx", 415},
        {"application/json; charset=latin1", 415},
    };
    int n415 = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 2; k++) {
            int code;
            char *out = http_ct(s, k ? "/v1/chat/completions" : "/v1/completions", k ? chat : body, cases[i].ct, &code);
            if (code != cases[i].code) fail_msg("Content-Type %s: status %d, expected %d: %s", cases[i].ct ? cases[i].ct : "(none)", code, cases[i].code, out);
            if (code == 415) {
                n415++;
                char want[320];
                const bool charset = strstr(cases[i].ct, "latin1") != NULL;
                snprintf(want, sizeof want, "Content-Type '%s' is not supported: %s", cases[i].ct,
                         charset ? "the JSON body must be UTF-8 (charset=utf-8, or no charset)"
                                 : "send the body as JSON with Content-Type: application/json");
                cJSON *j = cJSON_Parse(out);
                cJSON *e = cJSON_GetObjectItem(j, "error");
                if (!cJSON_IsString(cJSON_GetObjectItem(e, "message")) || strcmp(cJSON_GetObjectItem(e, "message")->valuestring, want) ||
                    strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error") || !cJSON_IsNull(cJSON_GetObjectItem(e, "param")))
                    fail_msg("Content-Type %s: %s (expected the message \"%s\")", cases[i].ct, out, want);
                cJSON_Delete(j);
            } else {
                cJSON *j = cJSON_Parse(out);
                if (!cJSON_IsArray(cJSON_GetObjectItem(j, "choices"))) fail_msg("Content-Type %s: %s", cases[i].ct ? cases[i].ct : "(none)", out);
                cJSON_Delete(j);
            }
            free(out);
        }
    assert_int_equal(metric(s, "tern_requests_total{status=\"415\"}"), (uint64_t)n415);
    srv_stop(s);
    tern_model_free(m);
}

static void test_max_tokens_and_length(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 64, 4, 0, NULL, 0);
    cJSON *ref = http_json(s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, \"temperature\": 0}", 200);
    const int n_prompt = usage(ref, "prompt_tokens");
    for (int n = 0; n <= 2; n++) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\": \"Once upon a time\", \"max_tokens\": %d, \"temperature\": 0}", n);
        cJSON *j = http_json(s, "/v1/completions", body, 200);
        assert_int_equal(usage(j, "completion_tokens"), n);
        assert_string_equal(finish_reason(j), "length");
        assert_true(strncmp(choice_text(ref), choice_text(j), strlen(choice_text(j))) == 0);   /* a prefix */
        if (n == 0) {   /* nothing generated, nothing evaluated: the timings count no prompt token */
            assert_string_equal(choice_text(j), "");
            const cJSON *t = cJSON_GetObjectItem(j, "timings");
            assert_non_null(t);
            assert_int_equal(cJSON_GetObjectItem(t, "prompt_n")->valueint, 0);
            assert_int_equal(usage(j, "prompt_tokens"), n_prompt);
        }
        cJSON_Delete(j);
        /* streamed: same count */
        snprintf(body, sizeof body, "{\"prompt\": \"Once upon a time\", \"max_tokens\": %d, \"temperature\": 0, \"stream\": true, \"stream_options\": {\"include_usage\": true}}", n);
        int code;
        char *raw = http(s, "POST", "/v1/completions", body, NULL, &code);
        assert_int_equal(code, 200);
        sse e;
        sse_parse(raw, &e);
        assert_true(e.done);
        assert_non_null(e.usage);
        assert_int_equal(cJSON_GetObjectItem(e.usage, "completion_tokens")->valueint, n);
        assert_string_equal(e.finish, "length");
        sse_free(&e);
        free(raw);
    }
    /* a large max_tokens ends at the context (64): finish_reason "length" */
    cJSON *j = http_json(s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 100000, \"temperature\": 0}", 200);
    assert_string_equal(finish_reason(j), "length");
    assert_int_equal(usage(j, "completion_tokens"), 64 - n_prompt + 1);   /* the last token needs no KV */
    cJSON_Delete(j);
    cJSON_Delete(ref);
    srv_stop(s);
    tern_model_free(m);
}

static void test_stop_strings_and_stream(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    cJSON *ref = http_json(s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 60, \"temperature\": 0}", 200);
    const char *full = choice_text(ref);
    assert_true(strlen(full) > 60);
    /* a stop string from the middle of the text: 9 bytes span several tokens of this vocabulary */
    char stop[16];
    memcpy(stop, full + 30, 9);
    stop[9] = '\0';
    const size_t cut = (size_t)(strstr(full, stop) - full);
    char *want = strndup(full, cut);
    cJSON *sj = cJSON_CreateString(stop);
    char *stop_json = cJSON_PrintUnformatted(sj);
    cJSON_Delete(sj);
    char body[1024];
    snprintf(body, sizeof body, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 60, \"temperature\": 0, \"stop\": [\"zzzz\", %s]}", stop_json);
    cJSON *j = http_json(s, "/v1/completions", body, 200);
    assert_string_equal(choice_text(j), want);
    assert_string_equal(finish_reason(j), "stop");
    cJSON_Delete(j);
    /* streamed: the chunks never carry any part of the stop string */
    snprintf(body, sizeof body, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 60, \"temperature\": 0, \"stream\": true, \"stop\": %s}", stop_json);
    int code;
    char *raw = http(s, "POST", "/v1/completions", body, NULL, &code);
    sse e;
    sse_parse(raw, &e);
    assert_true(e.done);
    assert_string_equal(e.content, want);
    assert_string_equal(e.finish, "stop");
    assert_true(e.n_events >= 2);                     /* text, then the finish chunk */
    sse_free(&e);
    free(raw);
    /* chat, streamed vs not: the same text; the first chunk carries the role */
    const char *chat = "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story\"}], \"max_tokens\": 30, \"temperature\": 0%s}";
    snprintf(body, sizeof body, chat, "");
    cJSON *cj = http_json(s, "/v1/chat/completions", body, 200);
    assert_string_equal(cJSON_GetObjectItem(cj, "object")->valuestring, "chat.completion");
    snprintf(body, sizeof body, chat, ", \"stream\": true");
    raw = http(s, "POST", "/v1/chat/completions", body, NULL, &code);
    assert_int_equal(code, 200);
    sse_parse(raw, &e);
    assert_true(e.done && e.role_first);
    assert_string_equal(e.content, choice_text(cj));
    assert_string_equal(e.finish, finish_reason(cj));
    sse_free(&e);
    free(raw);
    cJSON_Delete(cj);
    free(stop_json);
    free(want);
    cJSON_Delete(ref);
    srv_stop(s);
    tern_model_free(m);
}

/* One request on its own thread: the port is read when the argument is made, so the thread never
 * touches the srv, which the caller may stop (and free) while the request is still answering. */
typedef struct req_arg {
    int port;
    const char *body;
    char *text;
} req_arg;

static void *req_thread(void *p) {
    req_arg *a = p;
    int code;
    char *out = http_at(a->port, "POST", "/v1/completions", a->body, NULL, &code);
    cJSON *j = cJSON_Parse(out);
    a->text = strdup(j && code == 200 ? choice_text(j) : out);
    cJSON_Delete(j);
    free(out);
    return NULL;
}

/* N concurrent greedy requests give the same texts as the same requests one at a time, and (where
 * need_batch) the concurrent ones really went through the batched forward (tern_batch_eval:
 * /metrics counts decode passes over 2 or more sequences). On qwen3-tiny (qwen3) and qwen35-tiny,
 * whose 200-token requests (ignore_eos; a quarter of that in the sanitizer build, TEST_SLOW_BUILD)
 * last tens of ms even at several thousand tokens/s, so the requests started together overlap,
 * and stories260K (llama). */
static void batch_equivalence(tern_model *m, const char *const *bodies, int n, int min_len, bool need_batch) {
    srv *s = start(m, n, 512, 8, 0, NULL, 0);
    req_arg seq[8], par[8];
    pthread_t th[8];
    for (int i = 0; i < n; i++) {                     /* one at a time */
        seq[i] = (req_arg){srv_port(s), bodies[i], NULL};
        req_thread(&seq[i]);
    }
    assert_int_equal(metric(s, "tern_decode_batched_steps_total"), 0);
    for (int i = 0; i < n; i++) {                     /* all together */
        par[i] = (req_arg){srv_port(s), bodies[i], NULL};
        pthread_create(&th[i], NULL, req_thread, &par[i]);
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) {
        if ((int)strlen(seq[i].text) < min_len) fail_msg("request %d: short text '%s'", i, seq[i].text);
        assert_string_equal(seq[i].text, par[i].text);
        free(seq[i].text);
        free(par[i].text);
    }
    const uint64_t batched = metric(s, "tern_decode_batched_steps_total"), widest = metric(s, "tern_decode_batch_max");
    print_message("batched decode passes %llu, widest %llu of %d\n", (unsigned long long)batched, (unsigned long long)widest, n);
    if (need_batch) assert_true(batched > 0 && widest >= 2 && widest != UINT64_MAX);
    srv_stop(s);
}

static void test_batch_equivalence_and_429(void **state) {
    (void)state;
    /* the third request stops 10 tokens before the others; the fourth samples with top_k 1 */
    const int n_tok = 200 / TEST_SLOW_BUILD;
    char qbuf[4][160];
    const char *qb[4] = {qbuf[0], qbuf[1], qbuf[2], qbuf[3]};
    snprintf(qbuf[0], 160, "{\"prompt\": \"Hello\", \"max_tokens\": %d, \"temperature\": 0, \"ignore_eos\": true}", n_tok);
    snprintf(qbuf[1], 160, "{\"prompt\": \"The capital of France\", \"max_tokens\": %d, \"temperature\": 0, \"ignore_eos\": true}",
             n_tok);
    snprintf(qbuf[2], 160, "{\"prompt\": \"def main():\", \"max_tokens\": %d, \"temperature\": 0, \"ignore_eos\": true}", n_tok - 10);
    snprintf(qbuf[3], 160,
             "{\"prompt\": \"One two three\", \"max_tokens\": %d, \"temperature\": 0, \"top_k\": 1, \"ignore_eos\": true}", n_tok);
    tern_model *q = load(QWEN3);
    batch_equivalence(q, qb, 4, 20, true);
    tern_model_free(q);
    /* qwen35 (recurrent state): batched too (each column updates its own session's state) */
    q = load(QWEN35);
    batch_equivalence(q, qb, 3, 8, true);
    tern_model_free(q);
    tern_model *m = load(STORIES);
    const char *bodies[4] = {
        "{\"prompt\": \"Once upon a time\", \"max_tokens\": 40, \"temperature\": 0}",
        "{\"prompt\": \"The little dog\", \"max_tokens\": 40, \"temperature\": 0}",
        "{\"prompt\": \"Lily and Ben went\", \"max_tokens\": 40, \"temperature\": 0}",
        "{\"prompt\": \"One day, a big bird\", \"max_tokens\": 40, \"temperature\": 0}",
    };
    batch_equivalence(m, bodies, 4, 20, false);       /* stories is too fast to be sure they overlap */
    srv *s;
    /* one slot, no queue: a second request while the first runs gets 429 */
    s = start(m, 1, 16384, 0, 0, NULL, 0);            /* 16000 tokens: seconds even on a fast machine */
    req_arg slow = {srv_port(s), "{\"prompt\": \"Once upon a time\", \"max_tokens\": 16000, \"temperature\": 0, \"ignore_eos\": true}", NULL};
    pthread_t t1;
    pthread_create(&t1, NULL, req_thread, &slow);
    int code = 0;
    char *out = NULL;
    for (int tries = 0; tries < 200; tries++) {       /* wait until it is running */
        out = http(s, "GET", "/metrics", NULL, NULL, &code);
        bool busy = strstr(out, "tern_slots_active 1") != NULL;
        free(out);
        if (busy) break;
        usleep(10 * 1000);
    }
    out = http(s, "POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 1}", NULL, &code);
    if (code != 429 || !strstr(out, "\"too many requests: every slot (-np 1) is busy and the queue is full (--queue 0); retry later\""))
        fail_msg("a request while the only slot is busy, no queue: status %d: %s", code, out);
    free(out);
    srv_stop(s);                                      /* ends the slow request (503) */
    pthread_join(t1, NULL);
    free(slow.text);
    tern_model_free(m);
}

static void test_disconnects_free_the_slot(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    srv *s = start(m, 1, 16384, 4, 0, NULL, 4);
    /* mid-stream: curl gives up after 0.5 s of a 16000-token stream (4000 tokens take about 1 s here) */
    int code;
    char *out = http(s, "POST", "/v1/completions", "{\"prompt\": \"Hello\", \"max_tokens\": 16000, \"temperature\": 0, \"stream\": true}",
                      "--max-time 0.5", &code);
    free(out);
    double t0 = now_s();
    while (metric(s, "tern_requests_cancelled_total") != 1 && now_s() - t0 < 5) usleep(10 * 1000);
    assert_int_equal(metric(s, "tern_requests_cancelled_total"), 1);
    while (metric(s, "tern_slots_active") != 0 && now_s() - t0 < 5) usleep(10 * 1000);
    assert_int_equal(metric(s, "tern_slots_active"), 0);
    uint64_t gen = metric(s, "tern_generated_tokens_total");
    assert_true(gen < 16000);
    /* mid-generation, not streamed: tokens come every few ms, so the wait for the next one never
     * times out; the socket is still watched, or the whole reply would be generated for nobody */
    out = http(s, "POST", "/v1/completions", "{\"prompt\": \"Hello\", \"max_tokens\": 12000, \"temperature\": 0}", "--max-time 0.5", &code);
    free(out);
    t0 = now_s();
    while (metric(s, "tern_slots_active") != 0 && now_s() - t0 < 5) usleep(2 * 1000);
    const double freed = now_s() - t0;
    print_message("non-streamed request abandoned mid-generation: slot free %.3f s after the client left\n", freed);
    assert_int_equal(metric(s, "tern_slots_active"), 0);
    assert_int_equal(metric(s, "tern_requests_cancelled_total"), 2);
    assert_true(metric(s, "tern_generated_tokens_total") < gen + 12000);
    assert_true(freed < 0.25);                        /* within a few steps (the socket is looked at every 20 ms) */
    gen = metric(s, "tern_generated_tokens_total");
    /* mid-prefill: a prompt of about 12000 tokens in 4-token chunks, abandoned after 0.2 s */
    char *longp = malloc(65536);
    strcpy(longp, "{\"prompt\": \"");
    for (int i = 0; i < 2000; i++) strcat(longp, "The quick brown fox jumps. ");
    strcat(longp, "\", \"max_tokens\": 5}");
    out = http(s, "POST", "/v1/completions", longp, "--max-time 0.2", &code);
    free(out);
    free(longp);
    t0 = now_s();
    while (metric(s, "tern_requests_cancelled_total") != 3 && now_s() - t0 < 5) usleep(10 * 1000);
    assert_int_equal(metric(s, "tern_requests_cancelled_total"), 3);
    assert_int_equal(metric(s, "tern_generated_tokens_total"), gen);   /* it never got to generate */
    /* the slot was freed: no prefill chunk after the cancellation was counted (3000 were left) */
    const uint64_t chunks = metric(s, "tern_prefill_chunks_total");
    usleep(100 * 1000);
    assert_int_equal(metric(s, "tern_prefill_chunks_total"), chunks);
    assert_int_equal(metric(s, "tern_slots_active"), 0);
    assert_true(chunks < 2000);
    /* and the server still serves */
    cJSON *j = http_json(s, "/v1/completions", "{\"prompt\": \"Hello\", \"max_tokens\": 3, \"temperature\": 0}", 200);
    assert_int_equal(usage(j, "completion_tokens"), 3);
    cJSON_Delete(j);
    srv_stop(s);
    tern_model_free(m);
}

/* cache_prompt false (llama-server's field): the slot's cached prefix is not reused
 * (cached_tokens 0) and the reply equals a fresh server's bit for bit. On qwen35-tiny a reused
 * prefix decoded token by token and a fresh run's chunked prefill round differently, so with the
 * default, after a cancelled stream of the first turn, this follow-up's greedy reply differed
 * from a fresh server's. */
static void test_cache_prompt_false(void **state) {
    (void)state;
    tern_model *m = load(QWEN35);
    const char *first = "{\"messages\": [{\"role\": \"user\", \"content\": \"hello hello hello hello\"}], \"max_tokens\": 6, \"temperature\": 0}";
    const char *follow = "{\"messages\": [{\"role\": \"user\", \"content\": \"hello hello hello hello\"}, {\"role\": \"assistant\", "
                         "\"content\": \"\"}, {\"role\": \"user\", \"content\": \"hello hello hello hello again\"}], \"max_tokens\": 24, "
                         "\"temperature\": 0, \"cache_prompt\": false}";
    srv *fresh = start(m, 1, 1024, 4, 0, NULL, 0);
    cJSON *want = http_json(fresh, "/v1/chat/completions", follow, 200);
    srv_stop(fresh);
    srv *s = start(m, 1, 1024, 4, 0, NULL, 0);
    cJSON *a = http_json(s, "/v1/chat/completions", first, 200);
    cJSON *again = http_json(s, "/v1/chat/completions", first, 200);   /* the default reuses the slot's prefix */
    const int reused = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(again, "usage"), "prompt_tokens_details"),
                                           "cached_tokens")->valueint;
    assert_true(reused > 0);
    cJSON *got = http_json(s, "/v1/chat/completions", follow, 200);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "usage"), "prompt_tokens_details"), "cached_tokens")->valueint, 0);
    char *w = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(want, "choices"), 0), "message"));
    char *g = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(got, "choices"), 0), "message"));
    assert_true(strlen(w) > 20);
    assert_string_equal(w, g);
    free(w);
    free(g);
    cJSON_Delete(want);
    cJSON_Delete(a);
    cJSON_Delete(again);
    cJSON_Delete(got);
    srv_stop(s);
    tern_model_free(m);
}

static void test_prefix_reuse(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 2, 1024, 4, 0, NULL, 0);
    cJSON *a = http_json(s, "/v1/chat/completions",
                         "{\"messages\": [{\"role\": \"system\", \"content\": \"You tell stories.\"}, {\"role\": \"user\", \"content\": \"A story about a cat\"}],"
                         " \"max_tokens\": 12, \"temperature\": 0}", 200);
    const int p1 = usage(a, "prompt_tokens");
    cJSON *sj = cJSON_CreateString(choice_text(a));
    char *reply = cJSON_PrintUnformatted(sj);
    cJSON_Delete(sj);
    char body[4096];
    snprintf(body, sizeof body,
             "{\"messages\": [{\"role\": \"system\", \"content\": \"You tell stories.\"}, {\"role\": \"user\", \"content\": \"A story about a cat\"},"
             " {\"role\": \"assistant\", \"content\": %s}, {\"role\": \"user\", \"content\": \"And then?\"}], \"max_tokens\": 12, \"temperature\": 0}",
             reply);
    cJSON *b = http_json(s, "/v1/chat/completions", body, 200);
    const int cached = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "usage"), "prompt_tokens_details"), "cached_tokens")->valueint;
    print_message("follow-up: %d of %d prompt tokens reused (first prompt %d)\n", cached, usage(b, "prompt_tokens"), p1);
    assert_true(cached >= p1);                        /* at least the whole first prompt */
    /* the reused answer equals a fresh server's answer */
    srv *s2 = start(m, 1, 1024, 4, 0, NULL, 0);
    cJSON *c = http_json(s2, "/v1/chat/completions", body, 200);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "usage"), "prompt_tokens_details"), "cached_tokens")->valueint, 0);
    assert_string_equal(choice_text(b), choice_text(c));
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
    free(reply);
    srv_stop(s2);
    srv_stop(s);
    tern_model_free(m);
}


/* Chunked prefill interleaved with decoding: while stream A decodes, request B's long prompt is
 * prefilled in chunks of prefill_chunk = 8 tokens, and A gets a decode step between B's chunks
 * (counted by the scheduler, not timed: B's timings say how many decode steps of other streams
 * ran between its first and last chunk). A then continues to its full length. With nothing
 * decoding, a prompt goes in chunks of n_batch (64). */
typedef struct stream_arg {
    srv *s;
    const char *body;
    char *raw;
} stream_arg;

static void *stream_thread(void *p) {
    stream_arg *a = p;
    int code;
    a->raw = http(a->s, "POST", "/v1/completions", a->body, NULL, &code);
    return NULL;
}

static void test_chunked_prefill(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = 2;
    c.n_ctx = 2048;
    c.n_batch = 64;
    c.prefill_chunk = 8;                              /* while another stream decodes */
    srv *s = NULL;
    tern_err err = {0};
    if (srv_start(&s, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    /* A's reply is long enough to outlast B's arrival on a loaded machine (about a second here;
     * TEST_SLOW_BUILD) */
    const int a_len = 1500 / TEST_SLOW_BUILD;
    char a_body[160];
    snprintf(a_body, sizeof a_body,
             "{\"prompt\": \"Hello\", \"max_tokens\": %d, \"temperature\": 0, \"stream\": true, \"stream_options\": "
             "{\"include_usage\": true}}", a_len);
    stream_arg a = {s, a_body, NULL};
    pthread_t th;
    pthread_create(&th, NULL, stream_thread, &a);
    const double t0 = now_s();
    while (metric(s, "tern_decode_steps_total") < 3 && now_s() - t0 < 10) usleep(2000);   /* A is decoding */
    char *longp = malloc(8192);
    strcpy(longp, "{\"prompt\": \"");
    for (int i = 0; i < 16; i++) strcat(longp, "The quick brown fox jumps over the lazy dog. ");
    strcat(longp, "\", \"max_tokens\": 2, \"temperature\": 0}");
    cJSON *b = http_json(s, "/v1/completions", longp, 200);
    free(longp);
    cJSON *t = cJSON_GetObjectItem(b, "timings");
    const int prompt_n = cJSON_GetObjectItem(t, "prompt_n")->valueint;
    const int chunks = cJSON_GetObjectItem(t, "prefill_chunks")->valueint;
    const int between = cJSON_GetObjectItem(t, "decode_steps_in_prefill")->valueint;
    print_message("B: %d prompt tokens in %d chunks, %d decode steps of A between them\n", prompt_n, chunks, between);
    assert_true(prompt_n > 100);
    assert_int_equal(chunks, (prompt_n + 7) / 8);    /* prefill_chunk-sized while A decodes */
    assert_true(between >= chunks - 1);               /* A was never stalled for two chunks in a row */
    cJSON_Delete(b);
    pthread_join(th, NULL);
    /* nobody decoding: chunks of n_batch (64) */
    longp = malloc(8192);
    strcpy(longp, "{\"prompt\": \"");
    for (int i = 0; i < 20; i++) strcat(longp, "Lorem ipsum dolor sit amet, consectetur. ");
    strcat(longp, "\", \"max_tokens\": 1, \"temperature\": 0}");
    b = http_json(s, "/v1/completions", longp, 200);
    free(longp);
    t = cJSON_GetObjectItem(b, "timings");
    const int n2 = cJSON_GetObjectItem(t, "prompt_n")->valueint;
    assert_true(n2 > 64);
    assert_int_equal(cJSON_GetObjectItem(t, "prefill_chunks")->valueint, (n2 + 63) / 64);
    assert_int_equal(cJSON_GetObjectItem(t, "decode_steps_in_prefill")->valueint, 0);
    cJSON_Delete(b);
    sse e;
    sse_parse(a.raw, &e);
    assert_true(e.done && e.usage);
    assert_int_equal(cJSON_GetObjectItem(e.usage, "completion_tokens")->valueint, a_len);
    assert_string_equal(e.finish, "length");
    sse_free(&e);
    free(a.raw);
    srv_stop(s);
    tern_model_free(m);
}

/* A client that leaves while its request waits in the queue frees its queue place at once, not
 * when the job reaches the head of the queue (i.e. when the requests ahead of it are admitted):
 * with one slot busy and a queue of two, a request abandoned behind another waiting one does not
 * make the next one a 429; the cancellation is counted. */
typedef struct wait_arg {
    srv *s;
    const char *extra;
    int code;
} wait_arg;

static void *waiting_request(void *p) {
    wait_arg *a = p;
    char *out = http(a->s, "POST", "/v1/completions", "{\"prompt\": \"y\", \"max_tokens\": 1}", a->extra, &a->code);
    free(out);
    return NULL;
}

static void test_queue_disconnect(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    srv *s = start(m, 1, 16384, 2, 0, NULL, 0);       /* the stream outlasts the test (srv_stop ends it) */
    stream_arg a = {s, "{\"prompt\": \"Hello\", \"max_tokens\": 16000, \"temperature\": 0, \"stream\": true}", NULL};
    pthread_t th, tb;
    pthread_create(&th, NULL, stream_thread, &a);
    double t0 = now_s();
    while (metric(s, "tern_slots_active") != 1 && now_s() - t0 < 10) usleep(5000);
    assert_int_equal(metric(s, "tern_slots_active"), 1);
    wait_arg b = {s, "--max-time 60", -1};            /* B waits at the head of the queue (srv_stop ends it) */
    pthread_create(&tb, NULL, waiting_request, &b);
    while (metric(s, "tern_queue_depth") != 1 && now_s() - t0 < 10) usleep(5000);
    assert_int_equal(metric(s, "tern_queue_depth"), 1);
    const uint64_t c0 = metric(s, "tern_requests_cancelled_total");
    int code;
    char *out = http(s, "POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 1}", "--max-time 0.3", &code);
    assert_int_equal(code, 0);                        /* C: curl gave up while it was queued behind B */
    free(out);
    t0 = now_s();
    while (metric(s, "tern_queue_depth") != 1 && now_s() - t0 < 5) usleep(5000);
    assert_int_equal(metric(s, "tern_queue_depth"), 1);   /* only B */
    assert_int_equal(metric(s, "tern_requests_cancelled_total"), c0 + 1);
    /* D is queued (curl times out waiting), not refused with 429 */
    out = http(s, "POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 1}", "--max-time 0.3", &code);
    if (code != 0) fail_msg("a request after the abandoned one: status %d: %s", code, out);
    free(out);
    assert_int_equal(metric(s, "tern_slots_active"), 1);   /* the long stream is still running */
    t0 = now_s();
    while (metric(s, "tern_queue_depth") != 1 && now_s() - t0 < 5) usleep(5000);
    assert_int_equal(metric(s, "tern_queue_depth"), 1);    /* B still waits (D left too) */
    srv_stop(s);                                      /* ends the long stream (503 in the stream) and B */
    pthread_join(tb, NULL);
    if (b.code != 503) fail_msg("B: status %d after %.2f s", b.code, now_s() - t0);
    pthread_join(th, NULL);
    free(a.raw);
    tern_model_free(m);
}

/* A TCP connection to the server from the loopback source address src (127.0.0.2 is loopback too
 * on Linux: a second client IP on one machine); -1 if the source cannot be bound. */
static int connect_from(srv *s, const char *src) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0}, b = {0};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, src, &a.sin_addr);
    b.sin_family = AF_INET;
    b.sin_port = htons((uint16_t)srv_port(s));
    b.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || connect(fd, (struct sockaddr *)&b, sizeof b) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* The server closed fd (EOF or reset) within wait_ms. */
static bool closed_by_server(int fd, int wait_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) <= 0) return false;
    char c;
    const ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Holds the only slot with a long greedy request until curl gives up (a->extra: --max-time). */
static void *hold_request(void *p) {
    wait_arg *a = p;
    char *out = http(a->s, "POST", "/v1/completions", "{\"prompt\": \"Hello\", \"max_tokens\": 8000, \"temperature\": 0}",
                     a->extra, &a->code);
    free(out);
    return NULL;
}

/* One client cannot lock everyone out (without the limits, 52 idle connections from anywhere would
 * take every connection, /health included, for the 120 s timeout, which each byte restarts). With
 * --conn-per-ip 8: a client at 127.0.0.2 that opens 20 idle connections gets 8, and the other 12
 * are closed at once (no request read); meanwhile a client at 127.0.0.1 is served (/health, a
 * completion). What this does not protect: that client's own further requests (a 9th connection
 * from 127.0.0.2 is closed unanswered while it holds 8), and many addresses together (the total
 * limit, 4 x (slots + queue + 16) by default). The idle connections are closed after
 * --idle-timeout (here 1 s; it also bounds a connection that never sends a byte, which would
 * otherwise wait 120 s), after which 127.0.0.2 is served again. And the request timeout
 * (--timeout, here 1 s) counts only the client's silence, never the wait for the model: a stream
 * queued 2+ s behind another request (first bytes: the headers; then nothing until its first
 * token) runs to its end. */
static void test_connection_limits(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = 1;
    c.n_ctx = 8192;
    c.queue_max = 2;
    c.conn_per_ip = 8;
    c.idle_timeout_s = 1;
    c.timeout_s = 1;
    srv *s = NULL;
    tern_err err = {0};
    if (srv_start(&s, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    int fds[20];
    const int probe = connect_from(s, "127.0.0.2");
    if (probe < 0) {
        srv_stop(s);
        tern_model_free(m);
        test_skip("cannot connect from 127.0.0.2 (not Linux loopback?)");
    }
    close(probe);
    usleep(100 * 1000);                               /* the probe's slot is released */
    const double t0 = now_s();
    for (int i = 0; i < 20; i++) {
        fds[i] = connect_from(s, "127.0.0.2");
        assert_true(fds[i] >= 0);                     /* the kernel accepts; the server closes the excess */
    }
    int n_closed = 0;
    for (int i = 0; i < 20; i++) n_closed += closed_by_server(fds[i], i < 8 ? 0 : 500);
    const double t_closed = now_s() - t0;
    if (n_closed != 12 || t_closed > 0.9) fail_msg("%d of 20 connections from one IP closed after %.2f s, expected 12 at once", n_closed, t_closed);
    for (int i = 0; i < 8; i++) assert_false(closed_by_server(fds[i], 0));   /* the first 8 are held */
    int code;
    char *out = http(s, "GET", "/health", NULL, NULL, &code);   /* another address is served */
    assert_int_equal(code, 200);
    free(out);
    cJSON *j = http_json(s, "/v1/completions", "{\"prompt\": \"Hello\", \"max_tokens\": 2}", 200);
    assert_int_equal(usage(j, "completion_tokens"), 2);
    cJSON_Delete(j);
    /* the same address: its 9th connection is closed without an answer */
    const int extra = connect_from(s, "127.0.0.2");
    const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    (void)!send(extra, req, sizeof req - 1, MSG_NOSIGNAL);
    if (!closed_by_server(extra, 500)) fail_msg("a 9th connection from 127.0.0.2 was not closed");
    char buf[64];
    assert_true(recv(extra, buf, sizeof buf, MSG_DONTWAIT) <= 0);   /* nothing was answered */
    close(extra);
    /* idle connections end after --idle-timeout (1 s) */
    for (int i = 0; i < 8; i++)
        if (!closed_by_server(fds[i], 3000)) fail_msg("idle connection %d still open %.1f s after it opened", i, now_s() - t0);
    const double t_idle = now_s() - t0;
    print_message("12 excess connections closed within %.2f s, the 8 idle ones after %.2f s\n", t_closed, t_idle);
    assert_true(t_idle >= 0.9);
    for (int i = 0; i < 20; i++) close(fds[i]);
    /* the address is served again: the server counts a timed-out connection out of its address's
     * share when it cleans the connection up, which can follow the close the client sees by a
     * moment (under ASan, milliseconds), so a connection closed unanswered is retried for up to
     * 2 s, as a client would; a share never given back fails */
    ssize_t r = 0;
    for (int tries = 0; r <= 12 && now_s() - t0 < t_idle + 2.0; tries++) {
        if (tries) usleep(20 * 1000);
        const int again = connect_from(s, "127.0.0.2");
        (void)!send(again, req, sizeof req - 1, MSG_NOSIGNAL);
        struct pollfd p = {.fd = again, .events = POLLIN};
        r = poll(&p, 1, 5000) == 1 ? recv(again, buf, sizeof buf - 1, 0) : -1;
        close(again);
    }
    if (r <= 12) fail_msg("127.0.0.2 was not served within 2 s after its idle connections closed");
    buf[r] = '\0';
    if (strncmp(buf, "HTTP/1.1 200 ", 13)) fail_msg("127.0.0.2 after its idle connections closed: %s", buf);
    /* a stream that waits 2.5 s in the queue (the slot busy until curl gives up on A) is not cut by
     * the 1 s timeout */
    wait_arg hold = {s, "--max-time 2.5", -1};
    pthread_t th;
    const double t1 = now_s();
    pthread_create(&th, NULL, hold_request, &hold);
    while (metric(s, "tern_slots_active") != 1 && now_s() - t1 < 10) usleep(5000);
    assert_int_equal(metric(s, "tern_slots_active"), 1);
    out = http(s, "POST", "/v1/completions", "{\"prompt\": \"Hello\", \"max_tokens\": 3, \"temperature\": 0, \"stream\": true}",
               NULL, &code);
    const double t_stream = now_s() - t1;
    pthread_join(th, NULL);
    sse e;
    sse_parse(out, &e);
    if (code != 200 || !e.done || !e.finish || strcmp(e.finish, "length") || t_stream < 2.0)
        fail_msg("a stream queued for %.2f s (timeout 1 s): status %d, done %d:\n%s", t_stream, code, e.done, out);
    print_message("a stream queued behind another request finished after %.2f s (timeout 1 s)\n", t_stream);
    sse_free(&e);
    free(out);
    srv_stop(s);
    tern_model_free(m);
}

/* HTTP details clients rely on: HEAD /health answers as GET without a body (load balancers and
 * uptime checks use HEAD); a 429 carries Retry-After: 1 (the openai clients wait that long before
 * retrying); CORS as llama-server: a preflight OPTIONS gets 204 with
 * Access-Control-Allow-Origin: *, the methods and the headers asked for, without the API key
 * (browsers send none with it), and every answer (JSON, 401, the SSE stream, the 413 written
 * mid-upload) carries Access-Control-Allow-Origin: *, while the key is still required. */
/* Waits (at most 5 s) until /metrics (with the key) shows slots_active == want. With --queue 0 a
 * request sent the moment the previous answer arrived can still find the slot counted busy. */
static void wait_slots(srv *s, int want) {
    const double t0 = now_s();
    char line[64];
    snprintf(line, sizeof line, "\ntern_slots_active %d\n", want);
    for (;;) {
        int code;
        char *mx = http(s, "GET", "/metrics", NULL, "-H 'Authorization: Bearer sekret'", &code);
        const bool ok = strstr(mx, line) != NULL;
        free(mx);
        if (ok) return;
        if (now_s() - t0 > 5) fail_msg("slots_active never became %d", want);
        usleep(5000);
    }
}

/* A model whose weights hold NaN (blk.4.ffn_down.weight of stories260K set to 0xff bytes: an F32
 * projection, not scanned at load) gives non-finite logits: the request fails with 500 naming
 * the position, instead of a 200 with meaningless text, and a streamed sampled request gets the
 * error before any text; the same server answers the next request the same way (no state lost).
 * The undamaged model answers 200 with text (the control). */
static void test_nonfinite_logits_refused(void **state) {
    (void)state;
    char model[1024], bad[512];
    fx_require(model, sizeof model, STORIES);
    fx_tmp_path(bad, sizeof bad, "srv-nan-model.gguf");
    mfx_write_nan_tensor(model, "blk.4.ffn_down.weight", bad);
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":4}";
    const char *sbody = "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":4,"
                        "\"stream\":true,\"temperature\":1,\"seed\":1}";
    for (int damaged = 0; damaged < 2; damaged++) {
        tern_model *m = mfx_load(damaged ? bad : model, TERN_NUMERICS_FAST, 1);
        srv *sv = start(m, 1, 256, 0, 0, NULL, 0);
        for (int rep = 0; rep < 2; rep++) {
            int code;
            char *out = http(sv, "POST", "/v1/chat/completions", body, NULL, &code);
            if (damaged ? code != 500 || !strstr(out, "are not finite") || !strstr(out, "may be damaged") : code != 200)
                fail_msg("%s model: status %d: %s", damaged ? "damaged" : "undamaged", code, out);
            free(out);
            /* streamed and sampled (temperature > 0 samples even from NaN logits): the error comes
             * before any text, since nothing is sampled from non-finite logits */
            out = http(sv, "POST", "/v1/chat/completions", sbody, NULL, &code);
            const char *text = strstr(out, "\"content\":\"");
            const bool has_text = text && text[11] != '"';
            if (damaged ? !strstr(out, "are not finite") || has_text
                        : code != 200 || !has_text || !strstr(out, "[DONE]"))
                fail_msg("%s model, streamed: status %d: %s", damaged ? "damaged" : "undamaged", code, out);
            free(out);
        }
        srv_stop(sv);
        tern_model_free(m);
    }
    remove(bad);
}

static void test_http_head_retry_cors(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    srv *s = start(m, 1, 8192, 0, 4096, "sekret", 0);
    double secs;
    char *out = raw_exchange(s, "HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0, 5.0, &secs);
    const char *end = strstr(out, "\r\n\r\n");
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "Content-Type: application/json\r\n") || !end || end[4])
        fail_msg("HEAD /health:\n%s", out);
    free(out);
    out = raw_exchange(s, "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://example.org\r\n"
                       "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type\r\n"
                       "Connection: close\r\n\r\n", 0, 5.0, &secs);
    if (strncmp(out, "HTTP/1.1 204 ", 13) || !strstr(out, "Access-Control-Allow-Origin: *\r\n") ||
        !strstr(out, "Access-Control-Allow-Methods: GET, HEAD, POST, OPTIONS\r\n") ||
        !strstr(out, "Access-Control-Allow-Headers: authorization, content-type\r\n"))
        fail_msg("preflight:\n%s", out);
    free(out);
    const char *body = "{\"prompt\": \"Hello\", \"max_tokens\": 2}";
    char head[512];
    wait_slots(s, 0);
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://example.org\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
    out = raw_exchange(s, head, 0, 10.0, &secs);      /* no key: 401, readable by the page */
    if (strncmp(out, "HTTP/1.1 401 ", 13) || !strstr(out, "Access-Control-Allow-Origin: *\r\n")) fail_msg("401:\n%s", out);
    free(out);
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://example.org\r\nAuthorization: Bearer sekret\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
    out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "Access-Control-Allow-Origin: *\r\n") || !strstr(out, "\"completion_tokens\":2"))
        fail_msg("200:\n%s", out);
    free(out);
    const char *sbody = "{\"prompt\": \"Hello\", \"max_tokens\": 2, \"stream\": true}";
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(sbody), sbody);
    wait_slots(s, 0);
    out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 200 ", 13) || !strstr(out, "Access-Control-Allow-Origin: *\r\n") || !strstr(out, "data: [DONE]"))
        fail_msg("stream:\n%s", out);
    free(out);
    out = raw_exchange(s, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\nContent-Length: 5000\r\n\r\n", 0,
                       10.0, &secs);
    if (strncmp(out, "HTTP/1.1 413 ", 13) || !strstr(out, "Access-Control-Allow-Origin: *\r\n")) fail_msg("413:\n%s", out);
    free(out);
    /* 429: the only slot busy, no queue */
    wait_arg hold = {s, "--max-time 3 -H 'Authorization: Bearer sekret'", -1};
    pthread_t th;
    pthread_create(&th, NULL, hold_request, &hold);
    wait_slots(s, 1);
    out = raw_exchange(s, head, 0, 10.0, &secs);
    if (strncmp(out, "HTTP/1.1 429 ", 13) || !strstr(out, "Retry-After: 1\r\n") || !strstr(out, "\"rate_limit_error\""))
        fail_msg("429:\n%s", out);
    free(out);
    pthread_join(th, NULL);
    srv_stop(s);
    tern_model_free(m);
}

/* The bytes m's memory checks assume available (what tern_model_opts.mem_available sets at
 * load), changed in place so one loaded model serves every case; 0: the OS's figure. */
/* avail bytes left for sessions: a given budget less the model's own bytes (model_mem_available) */
static void set_avail(tern_model *m, uint64_t avail) { m->mem_given = avail ? avail + m->mem_model : 0; }

/* srv_start with avail bytes "available": the return code, the server stopped. */
static int start_with_avail(tern_model *m, int parallel, int n_ctx, uint64_t avail, tern_err *err) {
    set_avail(m, avail);
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = parallel;
    c.n_ctx = n_ctx;
    srv *s = NULL;
    memset(err, 0, sizeof *err);                      /* (errors are sticky) */
    const int rc = srv_start(&s, m, &c, err);
    set_avail(m, 0);
    if (rc == TERN_OK) assert_non_null(s);
    else assert_null(s);
    srv_stop(s);
    return rc;
}

/* The memory check covers every slot at once, before any slot allocates (a check of each
 * session's KV alone would let -np 8 with a context whose KV fits once allocate and touch the
 * first slots and then fail with a bare allocation error, or swap): -np N needs N x (KV +
 * recurrent state), as tern_session_init sizes one (tern_session_mem, checked here against
 * tern_session_init itself), and the message names -c and -np. qwen3-tiny (KV only) and
 * qwen35-tiny (KV + recurrent state), in process and through `tern serve` (exit 1). */
static void test_slots_memory(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = 4096;
    uint64_t kv = 0, st = 1, kv2 = 0;
    tern_session_mem(m, &so, &kv, &st, NULL);
    assert_true(kv > 0);
    assert_int_equal(st, 0);
    so.n_ctx = 8192;
    tern_session_mem(m, &so, &kv2, NULL, NULL);
    assert_int_equal(kv2, 2 * kv);
    /* the size is what tern_session_init checks: kv - 1 bytes refused, kv accepted */
    so.n_ctx = 4096;
    for (int k = 0; k < 2; k++) {
        set_avail(m, kv - 1 + (uint64_t)k);
        tern_session *ss = NULL;
        tern_err err = {0};
        const int rc = tern_session_init(&ss, m, &so, &err);
        set_avail(m, 0);
        assert_int_equal(rc, k ? TERN_OK : TERN_E_NOMEM);
        tern_session_free(ss);
    }
    tern_err err = {0};
    const uint64_t avail = kv * 5 / 2;                /* 2.5 slots' worth */
    assert_int_equal(start_with_avail(m, 2, 4096, avail, &err), TERN_OK);
    assert_int_equal(start_with_avail(m, 3, 4096, avail, &err), TERN_E_NOMEM);
    char want[512];
    snprintf(want, sizeof want, "3 slots (-np 3) with context 4096 (-c) need %.1f MB: per slot %.1f MB KV cache; only %.1f MB "
             "available: lower -c or -np", 3.0 * (double)kv / 1e6, (double)kv / 1e6, (double)avail / 1e6);
    assert_string_equal(err.msg, want);
    /* the CLI: exit 1 with that message, before a slot allocates */
    char bin[4096], model[1024], cmd[8192];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, QWEN3);
    so.n_ctx = 65536;
    uint64_t kvb = 0;
    tern_session_mem(m, &so, &kvb, NULL, NULL);
    const uint64_t big = kvb * 5 / 2;
    struct stat mst;   /* the budget less the model file (PQ2_0: no side buffer) is what the slots get */
    assert_int_equal(stat(model, &mst), 0);
    snprintf(cmd, sizeof cmd, "TERN_MEM_AVAILABLE=%llu %s serve -m %s -t 1 -c 65536 -np 8 --port 0 --no-progress 2>&1",
             (unsigned long long)(big + (uint64_t)mst.st_size), bin, model);
    int rc;
    char *out = ru_capture(cmd, &rc);
    snprintf(want, sizeof want, "tern serve: 8 slots (-np 8) with context 65536 (-c) need %.1f MB: per slot %.1f MB KV cache; only "
             "%.1f MB available: lower -c or -np\n", 8.0 * (double)kvb / 1e6, (double)kvb / 1e6, (double)big / 1e6);
    assert_int_equal(rc, 1);
    if (!strstr(out, want)) fail_msg("tern serve -np 8:\n%s\nexpected:\n%s", out, want);
    free(out);
    tern_model_free(m);
    /* a hybrid model: the recurrent state counts too, with the checkpoints each slot keeps for
     * prefix reuse (the KV alone of 2 slots fits) */
    m = load(QWEN35);
    so.n_ctx = 1024;
    so.n_checkpoints = SRV_CHECKPOINTS;
    tern_session_mem(m, &so, &kv, &st, NULL);
    assert_true(st > 0);
    assert_int_equal(start_with_avail(m, 2, 1024, 2 * (kv + st), &err), TERN_OK);
    assert_int_equal(start_with_avail(m, 2, 1024, 2 * kv + st, &err), TERN_E_NOMEM);
    snprintf(want, sizeof want, "2 slots (-np 2) with context 1024 (-c) need %.1f MB: per slot %.1f MB KV cache + %.1f MB recurrent "
             "state; only %.1f MB available: lower -c or -np", 2.0 * (double)(kv + st) / 1e6, (double)kv / 1e6, (double)st / 1e6,
             (double)(2 * kv + st) / 1e6);
    assert_string_equal(err.msg, want);
    tern_model_free(m);
}

/* Mixed steps (chunked prefill inside the decode pass): while A decodes, B's and C's long prompts
 * go in chunks of prefill_chunk = 8 tokens in the same forward as A's (and then each other's)
 * decode tokens (/metrics: tern_mixed_steps_total), and every greedy text equals the same request
 * run alone on a one-slot server (where nothing is ever mixed). On qwen3-tiny and qwen35-tiny
 * (recurrent state per sequence; its prompts are cut so the delta rule's blocks fall where they
 * fall alone: with 8-token chunks the texts differed before tern_model_split_rule). */
static void mixed_equivalence(tern_model *m) {
    char *longb = malloc(8192), *longc = malloc(8192);
    strcpy(longb, "{\"prompt\": \"");
    for (int i = 0; i < 10; i++) strcat(longb, "The quick brown fox jumps over the lazy dog. ");
    strcat(longb, "\", \"max_tokens\": 16, \"temperature\": 0}");
    strcpy(longc, "{\"prompt\": \"");
    for (int i = 0; i < 12; i++) strcat(longc, "Lorem ipsum dolor sit amet, consectetur. ");
    strcat(longc, "\", \"max_tokens\": 12, \"temperature\": 0}");
    /* A decodes long enough (ignore_eos; TEST_SLOW_BUILD) that B and C arrive while it runs, even
     * on a loaded machine */
    char longa[128];
    snprintf(longa, sizeof longa, "{\"prompt\": \"Hello\", \"max_tokens\": %d, \"temperature\": 0, \"ignore_eos\": true}",
             600 / TEST_SLOW_BUILD);
    const char *bodies[3] = {longa, longb, longc};
    srv *one = start(m, 1, 1024, 4, 0, NULL, 64);
    req_arg seq[3], par[3];
    for (int i = 0; i < 3; i++) {                     /* alone */
        seq[i] = (req_arg){srv_port(one), bodies[i], NULL};
        req_thread(&seq[i]);
    }
    assert_int_equal(metric(one, "tern_mixed_steps_total"), 0);
    srv_stop(one);
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = 3;
    c.n_ctx = 1024;
    c.n_batch = 64;
    c.prefill_chunk = 8;
    srv *s = NULL;
    tern_err err = {0};
    if (srv_start(&s, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    pthread_t th[3];
    par[0] = (req_arg){srv_port(s), bodies[0], NULL};
    pthread_create(&th[0], NULL, req_thread, &par[0]);
    const double t0 = now_s();
    while (metric(s, "tern_decode_steps_total") < 2 && now_s() - t0 < 10) usleep(2000);   /* A is decoding */
    for (int i = 1; i < 3; i++) {
        par[i] = (req_arg){srv_port(s), bodies[i], NULL};
        pthread_create(&th[i], NULL, req_thread, &par[i]);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    const uint64_t mixed = metric(s, "tern_mixed_steps_total"), chunks = metric(s, "tern_prefill_chunks_total");
    print_message("mixed steps %llu, prompt chunks %llu\n", (unsigned long long)mixed, (unsigned long long)chunks);
    for (int i = 0; i < 3; i++) {
        if (strlen(seq[i].text) < 4) fail_msg("request %d: short text '%s'", i, seq[i].text);
        assert_string_equal(seq[i].text, par[i].text);
        free(seq[i].text);
        free(par[i].text);
    }
    assert_true(mixed != UINT64_MAX && mixed >= 4);
    /* the steady-state counters see only pure decode steps: never a mixed one */
    const uint64_t steps = metric(s, "tern_decode_steps_total"), donly = metric(s, "tern_decode_only_steps_total");
    assert_true(donly > 0 && donly + mixed <= steps);
    assert_true(metric(s, "tern_decode_only_tokens_total") >= donly);   /* B's and C's chunks rode A's decode passes (qwen35: pieces of 32+) */
    srv_stop(s);
    free(longb);
    free(longc);
}

static void test_mixed_steps(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    mixed_equivalence(m);
    tern_model_free(m);
    m = load(QWEN35);
    mixed_equivalence(m);
    tern_model_free(m);
}

/* Streaming granularity: one SSE chunk per generated token's text (stories260K's greedy text is
 * plain ASCII, so every token has text), each carrying that token's logprobs; the concatenation
 * equals the non-streamed text. */
static void test_stream_per_token(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    cJSON *ref = http_json(s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 20, \"temperature\": 0}", 200);
    int code;
    char *raw = http(s, "POST", "/v1/completions",
                     "{\"prompt\": \"Once upon a time\", \"max_tokens\": 20, \"temperature\": 0, \"stream\": true, \"logprobs\": 0}",
                     NULL, &code);
    assert_int_equal(code, 200);
    int n_text = 0, n_finish = 0;
    sbuf all = {0};
    sbuf_add(&all, "", 0);
    for (const char *p = raw; (p = strstr(p, "data: ")); p += 6) {
        if (!strncmp(p + 6, "[DONE]", 6)) break;
        const char *end = strstr(p, "\n\n");
        char *ev = strndup(p + 6, (size_t)(end - p - 6));
        cJSON *j = cJSON_Parse(ev);
        free(ev);
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
        const char *text = cJSON_GetObjectItem(ch, "text")->valuestring;
        if (cJSON_IsString(cJSON_GetObjectItem(ch, "finish_reason"))) {   /* the last chunk: llama-server's timings */
            cJSON *t = cJSON_GetObjectItem(j, "timings");
            assert_int_equal(cJSON_GetObjectItem(t, "predicted_n")->valueint, 20);
            assert_true(cJSON_GetObjectItem(t, "ttft_ms")->valuedouble > 0);
            n_finish++;
        }
        if (*text) {
            n_text++;
            sbuf_add(&all, text, strlen(text));
            cJSON *toks = cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "logprobs"), "tokens");
            assert_int_equal(cJSON_GetArraySize(toks), 1);   /* this chunk's one token */
        }
        cJSON_Delete(j);
    }
    assert_int_equal(n_text, 20);
    assert_int_equal(n_finish, 1);
    assert_string_equal(all.p, choice_text(ref));
    sbuf_free(&all);
    free(raw);
    cJSON_Delete(ref);
    srv_stop(s);
    tern_model_free(m);
}

/* Completions logprobs beside a stop string: the tokens are those whose text begins before the
 * cut, so they cover the returned text and no offset points past it. stories260K's greedy text
 * after "Once upon a time" is ", there was a little girl named Lily. She" (golden), so the stop
 * "e w" cuts it to ", ther"; checked non-streamed and streamed (the chunks' tokens together). */
static void check_stop_tokens(const char *text, cJSON *const *tok, const int *off, int n) {
    assert_string_equal(text, ", ther");
    assert_true(n >= 1);
    char cat[256] = "";
    for (int i = 0; i < n; i++) {
        if (off[i] >= (int)strlen(text)) fail_msg("token %d '%s' at offset %d, past the text's %zu bytes", i, tok[i]->valuestring, off[i], strlen(text));
        if (i == n - 1 && strlen(cat) >= strlen(text)) fail_msg("token %d '%s' is not needed for the text '%s'", i, tok[i]->valuestring, text);
        assert_int_equal(off[i], (int)strlen(cat));
        strncat(cat, tok[i]->valuestring, sizeof cat - strlen(cat) - 1);
    }
    if (strncmp(cat, text, strlen(text)) != 0) fail_msg("tokens '%s' do not begin with the text '%s'", cat, text);
}

static void test_logprobs_stop(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    const char *req = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 20, \"temperature\": 0, \"stop\": [\"e w\"], \"logprobs\": 1%s}";
    char body[256];
    snprintf(body, sizeof body, req, "");
    cJSON *j = http_json(s, "/v1/completions", body, 200);
    cJSON *lp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "logprobs");
    cJSON *toks = cJSON_GetObjectItem(lp, "tokens"), *offs = cJSON_GetObjectItem(lp, "text_offset");
    const int n = cJSON_GetArraySize(toks);
    assert_true(n <= 16);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "token_logprobs")), n);
    cJSON *tk[16];
    int of[16];
    for (int i = 0; i < n; i++) tk[i] = cJSON_GetArrayItem(toks, i), of[i] = cJSON_GetArrayItem(offs, i)->valueint;
    check_stop_tokens(choice_text(j), tk, of, n);
    snprintf(body, sizeof body, req, ", \"stream\": true");
    int code, ns = 0;
    char *raw = http(s, "POST", "/v1/completions", body, NULL, &code);
    assert_int_equal(code, 200);
    sbuf all = {0};
    sbuf_add(&all, "", 0);
    cJSON *evs[64];
    int n_ev = 0;
    for (const char *p = raw; (p = strstr(p, "data: ")); p += 6) {
        if (!strncmp(p + 6, "[DONE]", 6)) break;
        const char *end = strstr(p, "\n\n");
        char *ev = strndup(p + 6, (size_t)(end - p - 6));
        cJSON *ej = cJSON_Parse(ev);
        free(ev);
        assert_true(n_ev < 64);
        evs[n_ev++] = ej;
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(ej, "choices"), 0);
        cJSON *t = cJSON_GetObjectItem(ch, "text");
        if (cJSON_IsString(t)) sbuf_add(&all, t->valuestring, strlen(t->valuestring));
        cJSON *sl = cJSON_GetObjectItem(ch, "logprobs");
        for (int i = 0; sl && i < cJSON_GetArraySize(cJSON_GetObjectItem(sl, "tokens")); i++, ns++) {
            assert_true(ns < 16);
            tk[ns] = cJSON_GetArrayItem(cJSON_GetObjectItem(sl, "tokens"), i);
            of[ns] = cJSON_GetArrayItem(cJSON_GetObjectItem(sl, "text_offset"), i)->valueint;
        }
    }
    assert_int_equal(ns, n);
    check_stop_tokens(all.p, tk, of, ns);
    for (int i = 0; i < n_ev; i++) cJSON_Delete(evs[i]);
    sbuf_free(&all);
    free(raw);
    cJSON_Delete(j);
    srv_stop(s);
    tern_model_free(m);
}

/* logprobs against an independent log-softmax (long double) of the model's logits, computed
 * here through a session of our own on the same model: completions (legacy format, top 5) and
 * chat (content entries, top 3, streamed and not). */
static const float *g_sort_logits;
static int by_logit_desc(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_sort_logits[x] != g_sort_logits[y]) return g_sort_logits[x] > g_sort_logits[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void test_logprobs(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    enum { NTOK = 8, NTOP = 5 };
    cJSON *j = http_json(s, "/v1/completions",
                         "{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, \"temperature\": 0, \"logprobs\": 5}", 200);
    cJSON *lp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "logprobs");
    cJSON *toks = cJSON_GetObjectItem(lp, "tokens"), *vals = cJSON_GetObjectItem(lp, "token_logprobs");
    cJSON *tops = cJSON_GetObjectItem(lp, "top_logprobs"), *offs = cJSON_GetObjectItem(lp, "text_offset");
    assert_int_equal(cJSON_GetArraySize(toks), NTOK);
    assert_int_equal(cJSON_GetArraySize(vals), NTOK);
    assert_int_equal(cJSON_GetArraySize(offs), NTOK);
    /* the reference */
    tern_model_info info;
    tern_model_get_info(m, &info);
    tern_session *ss = NULL;
    tern_err err = {0};
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = 512;
    assert_int_equal(tern_session_init(&ss, m, &so, &err), TERN_OK);
    int32_t ids[64];
    int n_ids = 0;
    assert_int_equal(tern_tokenize(m, "Once upon a time", 16, info.add_bos, false, ids, 64, &n_ids, &err), TERN_OK);
    assert_int_equal(n_ids, usage(j, "prompt_tokens"));
    const float *lg = tern_session_eval(ss, ids, n_ids, &err);
    int off = 0;
    for (int i = 0; i < NTOK; i++) {
        assert_non_null(lg);
        long double mx = -INFINITY, sum = 0;
        int32_t best = 0;
        for (int32_t v = 0; v < info.n_vocab; v++) {
            if (lg[v] > mx) mx = lg[v];
            if (lg[v] > lg[best]) best = v;
        }
        for (int32_t v = 0; v < info.n_vocab; v++) sum += expl((long double)lg[v] - mx);
        const long double lse = mx + logl(sum);
        char piece[256];
        int np = tern_token_piece(m, best, true, piece, sizeof piece);
        piece[np] = '\0';
        assert_string_equal(cJSON_GetArrayItem(toks, i)->valuestring, piece);
        const double got = cJSON_GetArrayItem(vals, i)->valuedouble;
        if (fabsl((long double)got - ((long double)lg[best] - lse)) > 1e-4L)
            fail_msg("token %d: logprob %.6f, expected %.6Lf", i, got, (long double)lg[best] - lse);
        assert_int_equal(cJSON_GetArrayItem(offs, i)->valueint, off);
        off += tern_token_piece(m, best, false, NULL, 0);   /* the bytes it adds to the text */
        /* the top 5: the 5 largest logits, by value */
        cJSON *top = cJSON_GetArrayItem(tops, i);
        assert_true(cJSON_GetArraySize(top) >= 1 && cJSON_GetArraySize(top) <= NTOP);
        int32_t *order = malloc((size_t)info.n_vocab * sizeof *order);
        for (int32_t v = 0; v < info.n_vocab; v++) order[v] = v;
        g_sort_logits = lg;
        qsort(order, (size_t)info.n_vocab, sizeof *order, by_logit_desc);
        for (int k = 0; k < NTOP; k++) {              /* k-th largest (ties: lower id) */
            const int32_t arg = order[k];
            np = tern_token_piece(m, arg, true, piece, sizeof piece);
            piece[np] = '\0';
            cJSON *v = cJSON_GetObjectItem(top, piece);
            if (!cJSON_IsNumber(v)) fail_msg("token %d: top %d '%s' missing", i, k, piece);
            assert_true(fabsl((long double)v->valuedouble - ((long double)lg[arg] - lse)) < 1e-4L);
        }
        free(order);
        lg = tern_session_eval(ss, &best, 1, &err);
    }
    tern_session_free(ss);
    cJSON_Delete(j);
    /* chat: entries with bytes and top 3, greedy = the first alternative; streamed: same entries */
    const char *chat = "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story\"}], \"max_tokens\": 6, \"temperature\": 0,"
                       " \"logprobs\": true, \"top_logprobs\": 3%s}";
    char body[512];
    snprintf(body, sizeof body, chat, "");
    j = http_json(s, "/v1/chat/completions", body, 200);
    cJSON *content = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "logprobs"), "content");
    const int n = cJSON_GetArraySize(content);
    assert_true(n >= 1 && n <= 6);
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_GetArrayItem(content, i), *top = cJSON_GetObjectItem(e, "top_logprobs");
        assert_int_equal(cJSON_GetArraySize(top), 3);
        assert_true(cJSON_GetObjectItem(e, "logprob")->valuedouble == cJSON_GetObjectItem(cJSON_GetArrayItem(top, 0), "logprob")->valuedouble);
        assert_string_equal(cJSON_GetObjectItem(e, "token")->valuestring, cJSON_GetObjectItem(cJSON_GetArrayItem(top, 0), "token")->valuestring);
        for (int k = 1; k < 3; k++)
            assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(top, k), "logprob")->valuedouble <=
                        cJSON_GetObjectItem(cJSON_GetArrayItem(top, k - 1), "logprob")->valuedouble);
        const char *tk = cJSON_GetObjectItem(e, "token")->valuestring;
        cJSON *bytes = cJSON_GetObjectItem(e, "bytes");
        assert_int_equal(cJSON_GetArraySize(bytes), (int)strlen(tk));
        for (int b = 0; b < (int)strlen(tk); b++) assert_int_equal(cJSON_GetArrayItem(bytes, b)->valueint, (unsigned char)tk[b]);
    }
    snprintf(body, sizeof body, chat, ", \"stream\": true");
    int code;
    char *raw = http(s, "POST", "/v1/chat/completions", body, NULL, &code);
    int n_stream = 0;
    for (const char *p = raw; (p = strstr(p, "data: ")); p += 6) {
        if (!strncmp(p + 6, "[DONE]", 6)) break;
        const char *end = strstr(p, "\n\n");
        char *ev = strndup(p + 6, (size_t)(end - p - 6));
        cJSON *ej = cJSON_Parse(ev);
        free(ev);
        cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ej, "choices"), 0), "logprobs"), "content");
        for (int i = 0; c && i < cJSON_GetArraySize(c); i++, n_stream++) {
            assert_true(n_stream < n);
            assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(c, i), "logprob")->valuedouble ==
                        cJSON_GetObjectItem(cJSON_GetArrayItem(content, n_stream), "logprob")->valuedouble);
        }
        cJSON_Delete(ej);
    }
    assert_int_equal(n_stream, n);
    free(raw);
    cJSON_Delete(j);
    srv_stop(s);
    tern_model_free(m);
}

/* /metrics histograms: one TTFT observation per request that generated a token, one TPOT
 * observation per request with 2 or more, whose value is (last - first token time) / (n - 1):
 * recomputed here from each response's timings (predicted_ms, predicted_n), bucket by bucket. */
static void test_metrics_histograms(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    const int max_tokens[] = {6, 12, 3, 1, 0};
    double tpot[8];
    int n_tpot = 0, n_ttft = 0;
    for (int i = 0; i < 5; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\": \"Once upon a time\", \"max_tokens\": %d, \"temperature\": 0}", max_tokens[i]);
        cJSON *j = http_json(s, "/v1/completions", body, 200);
        cJSON *t = cJSON_GetObjectItem(j, "timings");
        const int pn = cJSON_GetObjectItem(t, "predicted_n")->valueint;
        assert_int_equal(pn, max_tokens[i]);
        if (pn >= 1) n_ttft++;
        if (pn >= 2) tpot[n_tpot++] = cJSON_GetObjectItem(t, "predicted_ms")->valuedouble / 1e3 / (pn - 1);
        cJSON_Delete(j);
    }
    int code;
    char *out = http(s, "GET", "/metrics", NULL, NULL, &code);
    char key[128];
    snprintf(key, sizeof key, "\ntern_time_to_first_token_seconds_count ");
    assert_non_null(strstr(out, key));
    assert_int_equal(atoi(strstr(out, key) + strlen(key)), n_ttft);
    snprintf(key, sizeof key, "\ntern_time_per_output_token_seconds_count ");
    assert_int_equal(atoi(strstr(out, key) + strlen(key)), n_tpot);
    snprintf(key, sizeof key, "\ntern_time_per_output_token_seconds_sum ");
    double sum = 0;
    for (int i = 0; i < n_tpot; i++) sum += tpot[i];
    assert_true(sum > 0);
    assert_true(fabs(strtod(strstr(out, key) + strlen(key), NULL) - sum) < 1e-5);
    const double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        int want = 0;
        for (int i = 0; i < n_tpot; i++) want += tpot[i] <= bounds[b];
        snprintf(key, sizeof key, "\ntern_time_per_output_token_seconds_bucket{le=\"%g\"} ", bounds[b]);
        const char *p = strstr(out, key);
        if (!p) fail_msg("no bucket %s in\n%s", key, out);
        assert_int_equal(atoi(p + strlen(key)), want);
    }
    free(out);
    srv_stop(s);
    tern_model_free(m);
}


/* Speculative decoding (--spec lookup) for a slot decoding alone: greedy texts, finish reasons and
 * token counts equal a server without it (max_tokens, stop strings, the context limit), drafts
 * were verified and some accepted (/metrics), and concurrent requests (batched, no speculation
 * while not alone) still equal the plain server's. */
static void test_speculative(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = 2;
    c.n_ctx = 256;
    c.model_name = "test-model";
    srv *plain = NULL, *spec = NULL;
    tern_err err = {0};
    if (srv_start(&plain, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    c.spec = true;
    c.spec_p.draft_max = 8;
    if (srv_start(&spec, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    const char *bodies[] = {
        "{\"prompt\": \"Once upon a time, there was a little girl named Lily. She liked to play outside. Once upon a time,"
        " there was a little girl named\", \"max_tokens\": 60, \"temperature\": 0}",
        "{\"prompt\": \"Once upon a time\", \"max_tokens\": 300, \"temperature\": 0}",            /* to the context (256) */
        "{\"prompt\": \"Once upon a time\", \"max_tokens\": 80, \"temperature\": 0, \"stop\": [\"park\"]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story about a cat and a dog.\"}], \"max_tokens\": 50,"
        " \"temperature\": 0}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        const char *path = strstr(bodies[i], "messages") ? "/v1/chat/completions" : "/v1/completions";
        cJSON *a = http_json(plain, path, bodies[i], 200), *b = http_json(spec, path, bodies[i], 200);
        assert_string_equal(choice_text(a), choice_text(b));
        assert_string_equal(finish_reason(a), finish_reason(b));
        assert_int_equal(usage(a, "completion_tokens"), usage(b, "completion_tokens"));
        cJSON_Delete(a);
        cJSON_Delete(b);
    }
    const uint64_t steps = metric(spec, "tern_spec_steps_total"), drafted = metric(spec, "tern_spec_drafted_total"),
                   accepted = metric(spec, "tern_spec_accepted_total");
    print_message("speculative: %llu verifications, %llu drafted, %llu accepted\n", (unsigned long long)steps,
                  (unsigned long long)drafted, (unsigned long long)accepted);
    assert_true(steps > 0 && drafted > 0 && accepted > 0 && accepted <= drafted);
    assert_int_equal(metric(plain, "tern_spec_steps_total"), 0);
    /* a guided JSON object runs no speculative step: with every token banned but '{' (id 126), the
     * guide has nothing to draw after it, and the reply is the 400 naming logit_bias on both servers */
    {
        tern_model_info info;
        tern_model_get_info(m, &info);
        size_t cap = 256 + (size_t)info.n_vocab * 16, n = 0;
        char *body = malloc(cap);
        char piece[8];
        assert_int_equal(tern_token_piece(m, 126, false, piece, sizeof piece), 1);
        assert_int_equal(piece[0], '{');
        n += (size_t)snprintf(body + n, cap - n, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, \"temperature\": 0, "
                              "\"response_format\": {\"type\": \"json_object\"}, \"logit_bias\": {");
        for (int t = 0, first = 1; t < info.n_vocab; t++)
            if (t != 126) n += (size_t)snprintf(body + n, cap - n, "%s\"%d\": false", first ? "" : ", ", t), first = 0;
        snprintf(body + n, cap - n, "}}");
        const uint64_t steps0 = metric(spec, "tern_spec_steps_total");
        for (int k = 0; k < 2; k++) {
            int code;
            char *out = http(k ? spec : plain, "POST", "/v1/completions", body, NULL, &code);
            if (code != 400 || !strstr(out, "'logit_bias' bans every token that can continue the JSON object of "
                                            "response_format json_object after 1 generated token"))
                fail_msg("json_object after '{' with speculation %s: status %d: %s", k ? "on" : "off", code, out);
            free(out);
        }
        assert_int_equal(metric(spec, "tern_spec_steps_total"), steps0);
        free(body);
    }
    /* two at once: batched (no speculation while another slot decodes), same texts */
    req_arg par[2] = {{srv_port(spec), bodies[0], NULL}, {srv_port(spec), bodies[2], NULL}},
            seq[2] = {{srv_port(plain), bodies[0], NULL}, {srv_port(plain), bodies[2], NULL}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, req_thread, &par[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        req_thread(&seq[i]);
        assert_string_equal(par[i].text, seq[i].text);
        free(par[i].text);
        free(seq[i].text);
    }
    srv_stop(spec);
    srv_stop(plain);
    tern_model_free(m);
}

/* Errors from starting the server carry one "tern serve:" prefix (flag ranges: test_cli.c). */
static void test_start_errors(void **state) {
    (void)state;
    char bin[4096], model[1024], cmd[8192];
    ru_need_tern(bin, sizeof bin);
    fx_require(model, sizeof model, STORIES);
    /* a name that does not resolve (.invalid never does, RFC 6761): a usage error naming the host and
     * the resolver's own message, before the model is loaded */
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const int gai = getaddrinfo("no-such-host.invalid", "8080", &hints, &ai);
    if (gai == 0) {
        freeaddrinfo(ai);
        test_skip("this resolver resolves no-such-host.invalid");
    }
    char want[512];
    snprintf(want, sizeof want, "tern serve: --host 'no-such-host.invalid': cannot resolve it (%s)\n", gai_strerror(gai));
    snprintf(cmd, sizeof cmd, "%s serve -m %s -t 1 -c 256 --host no-such-host.invalid --port 0 2>&1", bin, model);
    int st;
    char *out = ru_capture(cmd, &st);
    assert_int_equal(st, 2);
    assert_string_equal(out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve -m %s -t 1 -c 256 --host '' --port 0 2>&1", bin, model);
    out = ru_capture(cmd, &st);
    assert_int_equal(st, 2);
    assert_string_equal(out, "tern serve: --host: empty; expected a host name or an IPv4/IPv6 address\n");
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve -m %s -t 1 -c 256 --alias '' --port 0 2>&1", bin, model);
    out = ru_capture(cmd, &st);
    assert_int_equal(st, 2);
    assert_string_equal(out, "tern serve: --alias: empty; expected a model id\n");
    free(out);
}

/* Can this machine bind a TCP socket to ::1? (No IPv6 stack, or IPv6 disabled: the IPv6 cases are
 * skipped with a message.) */
static bool have_ipv6_loopback(void) {
    const int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0) return false;
    struct sockaddr_in6 a = {0};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    const bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* --host takes names as well as numeric addresses (getaddrinfo): "localhost", "0.0.0.0", and where
 * the machine has IPv6, "::1" and "::"; each server answers /health and a completion at the
 * address a client would use (IPv6 literals in brackets). */
static void test_host_names(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    const bool v6 = have_ipv6_loopback();
    if (!v6) print_message("no IPv6 loopback on this machine: the ::1 and :: cases are skipped\n");
    struct { const char *host, *url_host; bool ipv6; } cases[] = {
        {"localhost", "127.0.0.1", false},
        {"0.0.0.0", "127.0.0.1", false},
        {"127.0.0.1", "localhost", false},
        {"::1", "[::1]", true},
        {"::", "[::1]", true},
        {"::", "127.0.0.1", true},                    /* dual stack: IPv4 too */
        {"[::1]", "[::1]", true},                     /* as written in a URL */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].ipv6 && !v6) continue;
        srv_config c;
        srv_config_default(&c);
        c.host = cases[i].host;
        c.port = 0;
        c.parallel = 1;
        c.n_ctx = 128;
        srv *s = NULL;
        tern_err err = {0};
        if (srv_start(&s, m, &c, &err) != TERN_OK) fail_msg("--host %s: srv_start: %s", cases[i].host, err.msg);
        char cmd[512];
        snprintf(cmd, sizeof cmd, "curl -s -g -o - -w ' %%{http_code}' http://%s:%d/health", cases[i].url_host, srv_port(s));
        char *out = ru_capture(cmd, NULL);
        if (strcmp(out, "{\"status\":\"ok\"} 200")) fail_msg("--host %s: GET %s: %s", cases[i].host, cmd, out);
        free(out);
        snprintf(cmd, sizeof cmd, "curl -s -g -o - -w ' %%{http_code}' -H 'Content-Type: application/json' "
                 "-d '{\"prompt\": \"Once\", \"max_tokens\": 2}' http://%s:%d/v1/completions", cases[i].url_host, srv_port(s));
        out = ru_capture(cmd, NULL);
        if (!strstr(out, "\"completion_tokens\":2") || !strstr(out, " 200")) fail_msg("--host %s: %s: %s", cases[i].host, cmd, out);
        free(out);
        srv_stop(s);
    }
    /* a name that does not resolve: srv_start says so (the CLI turns it into exit 2: test_start_errors) */
    srv_config c;
    srv_config_default(&c);
    c.host = "no-such-host.invalid";
    c.port = 0;
    srv *s = NULL;
    tern_err err = {0};
    assert_int_equal(srv_start(&s, m, &c, &err), TERN_E_ARG);
    assert_null(s);
    assert_non_null(strstr(err.msg, "--host 'no-such-host.invalid': cannot resolve it ("));
    tern_model_free(m);
}

/* OpenAI fields tern does not implement are refused rather than ignored (echo, suffix, best_of,
 * llama-server's n_probs, response_format json_schema, a forced tool_choice,
 * llama-server's grammar and json_schema, the typical_p / mirostat / DRY / XTC /
 * dynamic-temperature samplers, vLLM's min_tokens and repetition_penalty): each gets 400 with an
 * OpenAI error object naming the field and saying "not supported", on both endpoints, as
 * presence_penalty; their neutral values (and null) are still served. logit_bias is served; its
 * bad keys, values and ids are 400 naming them. An empty API key is refused by srv_start (it would
 * let everyone in). */

/* ---- tern serve under a low open-file limit ------------------------------------------------- */

/* Start `tern serve` on stories260K with RLIMIT_NOFILE nofile (set in the child before exec),
 * --conn-max conn_max and, when not NULL, the flag extra; *err_fd reads its stderr. Returns the
 * child's pid. */
static pid_t serve_low_nofile(rlim_t nofile, const char *conn_max, const char *extra, int *err_fd) {
    char model[1024];
    fx_require(model, sizeof model, STORIES);
    const char *bin = getenv("TERN_BIN");
    if (!bin) bin = "./tern";
    if (access(bin, X_OK) != 0) fail_msg("no tern binary at %s (set TERN_BIN)", bin);
    int p[2];
    assert_int_equal(pipe(p), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 2);
        for (int fd = 3; fd < 1024; fd++) close(fd);
        const struct rlimit rl = {nofile, nofile};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(99);
        execl(bin, bin, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", "-np", "1", "-t", "1", "--no-progress",
              "--conn-max", conn_max, extra, (char *)NULL);
        _exit(98);
    }
    close(p[1]);
    *err_fd = p[0];
    return pid;
}

/* Read fd until it holds want (or EOF / 30 s); returns what was read (caller frees). */
static char *read_until(int fd, const char *want) {
    size_t n = 0, cap = 1 << 16;
    char *buf = calloc(1, cap);
    for (const double t0 = now_s(); now_s() - t0 < 30 && !strstr(buf, want) && n + 1 < cap;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 200) <= 0) continue;
        const ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
        buf[n] = '\0';
    }
    return buf;
}

/* utime + stime of pid in seconds (/proc/PID/stat fields 14 and 15) */
static double cpu_s(pid_t pid) {
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    const size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *q = strrchr(line, ')');              /* the command name may hold spaces */
    unsigned long ut = 0, st = 0;
    if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) fail_msg("bad %s", path);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void test_serve_low_nofile(void **state) {
    (void)state;
    /* a limit that leaves fewer than 4 connections: refused at start (exit 1), naming ulimit -n */
    int efd;
    pid_t pid = serve_low_nofile(16, "1000", NULL, &efd);
    char *err = read_until(efd, "listening on");     /* EOF when it exits (or 30 s) */
    int st;
    pid_t w = 0;
    for (int i = 0; i < 40 && (w = waitpid(pid, &st, WNOHANG)) != pid; i++) usleep(50 * 1000);
    if (w != pid) {                                   /* still running: it started serving */
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("under ulimit -n 16 tern serve started (expected exit 1 naming ulimit -n): %s", err);
    }
    close(efd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 1 || !strstr(err, "ulimit -n"))
        fail_msg("under ulimit -n 16: status %d, stderr: %s", st, err);
    free(err);
    /* ulimit -n 40 with --conn-max 1000: lowered with a warning; 60 idle connections: the excess
     * is closed at once (no accept() spinning on EMFILE), then /health answers */
    pid = serve_low_nofile(40, "1000", NULL, &efd);
    err = read_until(efd, "Ctrl-C stops");
    const char *at = strstr(err, "listening on http://127.0.0.1:");
    if (!at || !strstr(err, "warning: --conn-max 1000 lowered to")) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("tern serve under ulimit -n 40 --conn-max 1000: stderr: %s", err);
    }
    const int port = atoi(at + strlen("listening on http://127.0.0.1:"));
    enum { N = 60 };
    int socks[N];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < N; i++) {
        socks[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(socks[i] >= 0);
        assert_int_equal(connect(socks[i], (struct sockaddr *)&sa, sizeof sa), 0);
    }
    usleep(500 * 1000);
    int closed = 0;                                   /* EOF from the server: the excess closed */
    for (int i = 0; i < N; i++) {
        struct pollfd pf = {socks[i], POLLIN, 0};
        char c;
        if (poll(&pf, 1, 0) == 1 && recv(socks[i], &c, 1, MSG_DONTWAIT) == 0) closed++;
    }
    const double c0 = cpu_s(pid);
    usleep(1500 * 1000);
    const double busy = cpu_s(pid) - c0;              /* a busy accept loop would use ~1.5 s */
    for (int i = 0; i < N; i++) close(socks[i]);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "curl -s --max-time 10 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%d/health", port);
    char *code = ru_capture(cmd, NULL);
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    close(efd);
    if (closed < N - 40 || busy > 0.5 || strcmp(code, "200"))
        fail_msg("ulimit -n 40, %d idle connections: %d closed by the server (expected >= %d), CPU %.2f s in 1.5 s "
                 "(expected <= 0.5), /health %s (expected 200); stderr: %s", N, closed, N - 40, busy, code, err);
    free(code);
    free(err);
}

/* tern serve writes one line per finished request on stderr: peer, method, path, status, seconds;
 * the path's bytes outside printable ASCII are '?' there, so a client cannot start a line of its
 * own with a decoded %0A. --no-request-log writes none. */
static void test_serve_request_log(void **state) {
    (void)state;
    for (int quiet = 0; quiet < 2; quiet++) {
        int efd, st;
        const pid_t pid = serve_low_nofile(1024, "100", quiet ? "--no-request-log" : NULL, &efd);
        char *err = read_until(efd, "Ctrl-C stops");
        const char *at = strstr(err, "listening on http://127.0.0.1:");
        if (!at) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("tern serve%s did not start: %s", quiet ? " --no-request-log" : "", err);
        }
        const int port = atoi(at + strlen("listening on http://127.0.0.1:"));
        char cmd[256];
        snprintf(cmd, sizeof cmd, "curl -s --max-time 10 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%d/health", port);
        char *health = ru_capture(cmd, NULL);
        snprintf(cmd, sizeof cmd, "curl -s --max-time 10 -o /dev/null -w '%%{http_code}' 'http://127.0.0.1:%d/no%%0Aforged'",
                 port);
        char *nope = ru_capture(cmd, NULL);
        kill(pid, SIGINT);
        char *rest = read_until(efd, "tern serve: stopping");
        waitpid(pid, &st, 0);
        close(efd);
        const bool ok = quiet ? !strstr(rest, " GET /") && strstr(rest, "tern serve: stopping")
                              : strstr(rest, "tern serve: 127.0.0.1 GET /health 200 ") &&
                                    strstr(rest, "tern serve: 127.0.0.1 GET /no?forged 404 ") && !strstr(rest, "\nforged");
        if (!ok || strcmp(health, "200") || strcmp(nope, "404"))
            fail_msg("tern serve%s: /health %s, /no%%0Aforged %s (expected 200 and 404); stderr after listening: %s",
                     quiet ? " --no-request-log" : "", health, nope, rest);
        free(health);
        free(nope);
        free(rest);
        free(err);
    }
}

static void test_unsupported_fields(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.api_key = "";
    srv *s = NULL;
    tern_err err = {0};
    assert_int_equal(srv_start(&s, m, &c, &err), TERN_E_ARG);
    assert_null(s);
    assert_non_null(strstr(err.msg, "--api-key: empty key; expected a non-empty string"));
    c.api_key = "k\r";                            /* as read from a CRLF key file: no request could carry it */
    err = (tern_err){0};
    assert_int_equal(srv_start(&s, m, &c, &err), TERN_E_ARG);
    assert_null(s);
    assert_non_null(strstr(err.msg, "--api-key: byte 2 of the 2-byte key is the control character 0x0d"));
    c.api_key = NULL;
    c.n_ctx = 1;                                  /* no room for a prompt token and a generated one */
    err = (tern_err){0};
    assert_int_equal(srv_start(&s, m, &c, &err), TERN_E_ARG);
    assert_null(s);
    assert_non_null(strstr(err.msg, "-c 1: expected -c 2 or more"));
    s = start(m, 1, 1024, 4, 0, NULL, 0);         /* room for a tools block */
    const char *paths[] = {"/v1/completions", "/v1/chat/completions"};
    const char *heads[] = {"{\"prompt\": \"Once\", \"max_tokens\": 1, ", "{\"messages\": [{\"role\": \"user\", \"content\": \"Once\"}], \"max_tokens\": 1, "};
    struct { const char *field, *json, *want; } cases[] = {   /* want NULL: served (200) */
        {"echo", "\"echo\": true", "'echo': true is not supported (the prompt is not repeated in the reply)"},
        {"echo", "\"echo\": false", NULL},
        {"echo", "\"echo\": 1", "'echo' must be true or false"},
        {"suffix", "\"suffix\": \" The end.\"", "'suffix' is not supported"},
        {"suffix", "\"suffix\": \"\"", NULL},
        {"suffix", "\"suffix\": null", NULL},
        {"suffix", "\"suffix\": 3", "'suffix' must be a string"},
        {"best_of", "\"best_of\": 2", "'best_of' is not supported above 1 (one completion per request), got 2"},
        {"best_of", "\"best_of\": 1", NULL},
        {"best_of", "\"best_of\": 0", "'best_of' must be an integer in [1, 2147483647], got 0"},
        {"logit_bias", "\"logit_bias\": {\"50\": -100}", NULL},
        {"logit_bias", "\"logit_bias\": {\"50\": false, \"7\": 2.5}", NULL},
        {"logit_bias", "\"logit_bias\": {}", NULL},
        {"logit_bias", "\"logit_bias\": null", NULL},
        {"logit_bias", "\"logit_bias\": [1]", "'logit_bias' must be an object {\"token id\": bias}, got an array"},
        {"logit_bias", "\"logit_bias\": {\"abc\": 1}", "'logit_bias' key 'abc' must be a token id (a decimal integer >= 0 without leading zeros)"},
        {"logit_bias", "\"logit_bias\": {\"-1\": 1}", "'logit_bias' key '-1' must be a token id"},
        {"logit_bias", "\"logit_bias\": {\" 5\": 1}", "'logit_bias' key ' 5' must be a token id"},
        {"logit_bias", "\"logit_bias\": {\"\": 1}", "'logit_bias' key '' must be a token id"},
        {"logit_bias", "\"logit_bias\": {\"99999999999\": 1}", "'logit_bias' key '99999999999' is not a token of the model (token ids are below 2^31)"},
        {"logit_bias", "\"logit_bias\": {\"2147483648\": 1}", "'logit_bias' key '2147483648' is not a token of the model"},
        {"logit_bias", "\"logit_bias\": {\"300\": 100, \"0300\": -100}", "'logit_bias' key '0300' must be a token id (a decimal integer >= 0 without leading zeros)"},
        {"logit_bias", "\"logit_bias\": {\"0\": 1}", NULL},
        {"logit_bias", "\"logit_bias\": {\"5\": 101}", "'logit_bias[\"5\"]' must be a number in [-100, 100] or false (a ban), got 101"},
        {"logit_bias", "\"logit_bias\": {\"5\": \"x\"}", "'logit_bias[\"5\"]' must be a number in [-100, 100] or false (a ban), got a string"},
        {"logit_bias", "\"logit_bias\": {\"5\": true}", "'logit_bias[\"5\"]' must be a number in [-100, 100] or false"},
        {"logit_bias", "\"logit_bias\": {\"2000000\": 1}", "'logit_bias' key '2000000' is not a token of the model: the vocabulary has ids 0.."},
        {"n", "\"n\": 2", "'n' is not supported above 1 (one choice per request), got 2"},
        {"n", "\"n\": 1", NULL},
        {"presence_penalty", "\"presence_penalty\": 0.5", "'presence_penalty' is not supported"},
        {"n_probs", "\"n_probs\": 5", "'n_probs' is not supported: ask for 'logprobs'"},
        {"n_probs", "\"n_probs\": 0", NULL},
        {"n_probs", "\"n_probs\": -1", "'n_probs' must be an integer in [0, 2147483647], got -1"},
        {"response_format", "\"response_format\": {\"type\": \"json_schema\"}",
         "'response_format' type 'json_schema' is not supported (a JSON schema is not enforced)"},
        {"response_format", "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {}}}",
         "'response_format' type 'json_schema' is not supported"},
        {"response_format", "\"response_format\": {\"type\": \"xml\"}",
         "'response_format' type 'xml' is not supported; send {\"type\": \"json_object\"}"},
        {"response_format", "\"response_format\": {\"type\": \"text\"}", NULL},
        {"response_format", "\"response_format\": \"json\"", "'response_format' must be an object {\"type\": \"text\"}, got a string"},
        {"response_format.type", "\"response_format\": {}", "'response_format.type' must be a string, got nothing"},
        {"grammar", "\"grammar\": \"root ::= \\\"yes\\\"\"", "'grammar' is not supported (no grammar-constrained decoding)"},
        {"grammar", "\"grammar\": \"\"", NULL},
        {"grammar", "\"grammar\": 1", "'grammar' must be a string, got 1"},
        {"json_schema", "\"json_schema\": {\"type\": \"object\"}", "'json_schema' is not supported (output is not constrained to a schema)"},
        {"json_schema", "\"json_schema\": {}", "'json_schema' is not supported"},
        {"json_schema", "\"json_schema\": null", NULL},
        {"typical_p", "\"typical_p\": 0.5", "'typical_p' is not supported (locally typical sampling is not implemented), got 0.5; send 1"},
        {"typical_p", "\"typical_p\": 1", NULL},
        {"typical_p", "\"typical_p\": \"0.5\"", "'typical_p' must be a number, got a string"},
        {"mirostat", "\"mirostat\": 2", "'mirostat' is not supported (Mirostat sampling is not implemented), got 2; send 0"},
        {"mirostat", "\"mirostat\": 0", NULL},
        {"min_tokens", "\"min_tokens\": 5", "'min_tokens' is not supported"},
        {"repetition_penalty", "\"repetition_penalty\": 1.1", "use repeat_penalty"},
        {"repetition_penalty", "\"repetition_penalty\": 1.0", NULL},
        {"dry_multiplier", "\"dry_multiplier\": 0.8", "'dry_multiplier' is not supported"},
        {"xtc_probability", "\"xtc_probability\": 0.5", "'xtc_probability' is not supported"},
        {"dynatemp_range", "\"dynatemp_range\": 0.5", "'dynatemp_range' is not supported"},
        {"ignore_eos", "\"ignore_eos\": \"yes\"", "'ignore_eos' must be true or false, got a string"},
        {"ignore_eos", "\"ignore_eos\": false", NULL},
        {"cache_prompt", "\"cache_prompt\": 1", "'cache_prompt' must be true or false, got 1"},
        {"cache_prompt", "\"cache_prompt\": false", NULL},
        {"guided_json", "\"guided_json\": {\"type\": \"object\"}", "'guided_json' is not supported"},
        {"guided_regex", "\"guided_regex\": \"a+\"", "'guided_regex' is not supported"},
        {"guided_choice", "\"guided_choice\": [\"a\", \"b\"]", "'guided_choice' is not supported"},
        {"guided_grammar", "\"guided_grammar\": \"root ::= \\\"a\\\"\"", "'guided_grammar' is not supported"},
        {"structured_outputs", "\"structured_outputs\": {\"json\": {}}", "'structured_outputs' is not supported"},
        {"allowed_token_ids", "\"allowed_token_ids\": [5]", "'allowed_token_ids' is not supported"},
        {"samplers", "\"samplers\": [\"top_k\"]", "'samplers' is not supported"},
        {"bad_words", "\"bad_words\": [\"the\"]", "'bad_words' is not supported"},
        {"bad_words", "\"bad_words\": []", NULL},
        {"bad_words", "\"bad_words\": \"the\"", "'bad_words' must be an array, got a string"},
        {"stop_token_ids", "\"stop_token_ids\": [5]", "'stop_token_ids' is not supported"},
        {"stop_token_ids", "\"stop_token_ids\": []", NULL},
        {"length_penalty", "\"length_penalty\": 2", "'length_penalty' is not supported"},
        {"length_penalty", "\"length_penalty\": 1", NULL},
        {"top_n_sigma", "\"top_n_sigma\": 1", "'top_n_sigma' is not supported"},
        {"top_n_sigma", "\"top_n_sigma\": -1", NULL},
        {"top_n_sigma", "\"top_n_sigma\": 0", NULL},
        {"n_predict", "\"n_predict\": 2", "'n_predict' (2) and 'max_tokens' (1) differ"},
        {"n_predict", "\"n_predict\": 1", NULL},
        {"n_predict", "\"n_predict\": \"1\"", "'n_predict' must be an integer"},
        {"max_tokens", "\"max_completion_tokens\": 2", "'max_tokens' (1) and 'max_completion_tokens' (2) differ"},
        {"max_tokens", "\"max_completion_tokens\": 1", NULL},
    };
    for (int ep = 0; ep < 2; ep++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char body[512];
            snprintf(body, sizeof body, "%s%s}", heads[ep], cases[i].json);
            int code;
            char *out = http(s, "POST", paths[ep], body, NULL, &code);
            cJSON *j = cJSON_Parse(out);
            cJSON *e = cJSON_GetObjectItem(j, "error");
            const cJSON *param = cJSON_GetObjectItem(e, "param"), *msg = cJSON_GetObjectItem(e, "message");
            const bool good = cases[i].want ? code == 400 && cJSON_IsString(param) && !strcmp(param->valuestring, cases[i].field) &&
                                                  cJSON_IsString(msg) && strstr(msg->valuestring, cases[i].want)
                                            : code == 200 && !e;
            if (!good) fail_msg("POST %s %s: status %d: %s (expected %s%s)", paths[ep], body, code, out,
                                cases[i].want ? "400: " : "200", cases[i].want ? cases[i].want : "");
            cJSON_Delete(j);
            free(out);
        }
    /* tool_choice (chat): "auto" and "none" are served; a forced call cannot be honoured */
    struct { const char *json, *want; } tc[] = {
        {"\"tool_choice\": \"auto\"", NULL},
        {"\"tool_choice\": \"none\"", NULL},
        {"\"tool_choice\": \"required\"", "'tool_choice' 'required' is not supported (a tool call cannot be forced)"},
        {"\"tool_choice\": \"bogus\"", "'tool_choice' must be \"auto\" or \"none\" (OpenAI's \"required\" and a named function "
                                     "are not supported here), got 'bogus'"},
        {"\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}}",
         "'tool_choice' naming a function is not supported (a tool call cannot be forced)"},
        {"\"tool_choice\": 5", "'tool_choice' must be \"auto\" or \"none\", got 5"},
    };
    for (size_t i = 0; i < sizeof tc / sizeof tc[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "%s\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], %s}", heads[1], tc[i].json);
        int code;
        char *out = http(s, "POST", paths[1], body, NULL, &code);
        cJSON *j = cJSON_Parse(out);
        cJSON *e = cJSON_GetObjectItem(j, "error");
        const cJSON *param = cJSON_GetObjectItem(e, "param"), *msg = cJSON_GetObjectItem(e, "message");
        const bool good = tc[i].want ? code == 400 && cJSON_IsString(param) && !strcmp(param->valuestring, "tool_choice") &&
                                           cJSON_IsString(msg) && strstr(msg->valuestring, tc[i].want)
                                     : code == 200 && !e;
        if (!good) fail_msg("POST %s %s: status %d: %s (expected %s%s)", paths[1], body, code, out, tc[i].want ? "400: " : "200",
                            tc[i].want ? tc[i].want : "");
        cJSON_Delete(j);
        free(out);
    }
    srv_stop(s);
    tern_model_free(m);
}

/* logit_bias steers the draw: with +100 on token A, greedy decoding gives A at every step (the
 * text of A twice, A's text from /detokenize); with A banned (false) and +100 on token B, B twice;
 * on the chat endpoint too (its content). */
static void test_logit_bias_served(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    const int tok[2] = {300, 301};
    char piece[2][64];
    for (int i = 0; i < 2; i++) {
        char body[64];
        snprintf(body, sizeof body, "{\"tokens\": [%d]}", tok[i]);
        cJSON *r = http_json(s, "/detokenize", body, 200);
        const cJSON *c = cJSON_GetObjectItem(r, "content");
        assert_true(cJSON_IsString(c) && strlen(c->valuestring) > 0 && strlen(c->valuestring) < sizeof piece[i]);
        snprintf(piece[i], sizeof piece[i], "%s", c->valuestring);
        cJSON_Delete(r);
    }
    assert_string_not_equal(piece[0], piece[1]);
    const char *bias[2] = {"{\"300\": 100}", "{\"300\": false, \"301\": 100}"};
    for (int i = 0; i < 2; i++) {
        char body[256], want[256];
        snprintf(want, sizeof want, "%s%s", piece[i], piece[i]);
        snprintf(body, sizeof body, "{\"prompt\": \"Once\", \"max_tokens\": 2, \"temperature\": 0, \"logit_bias\": %s}", bias[i]);
        cJSON *r = http_json(s, "/v1/completions", body, 200);
        const cJSON *t = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "choices"), 0), "text");
        assert_true(cJSON_IsString(t));
        if (strcmp(t->valuestring, want)) fail_msg("%s: text '%s', expected '%s'", body, t->valuestring, want);
        cJSON_Delete(r);
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Once\"}], \"max_tokens\": 2, "
                 "\"temperature\": 0, \"logit_bias\": %s}", bias[i]);
        r = http_json(s, "/v1/chat/completions", body, 200);
        const cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "choices"), 0), "message");
        const cJSON *c = cJSON_GetObjectItem(msg, "content");
        assert_true(cJSON_IsString(c));
        if (strcmp(c->valuestring, want)) fail_msg("%s: content '%s', expected '%s'", body, c->valuestring, want);
        cJSON_Delete(r);
    }
    {   /* a control token forced (id 0, no text of its own): the text is empty and the legacy
         * logprobs' text_offset stays 0, while its tokens show the control token's text */
        char ctl[64];
        const int nc = tern_token_piece(m, 0, true, ctl, sizeof ctl);
        assert_true(nc > 0 && nc < (int)sizeof ctl && tern_token_piece(m, 0, false, NULL, 0) == 0);
        ctl[nc] = '\0';
        cJSON *r = http_json(s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 3, \"temperature\": 0, \"logprobs\": 1, "
                             "\"logit_bias\": {\"0\": 100}}", 200);
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "choices"), 0), *lp = cJSON_GetObjectItem(ch, "logprobs");
        assert_string_equal(cJSON_GetObjectItem(ch, "text")->valuestring, "");
        for (int i = 0; i < 3; i++) {
            assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "tokens"), i)->valuestring, ctl);
            assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "text_offset"), i)->valueint, 0);
        }
        cJSON_Delete(r);
    }
    {   /* every token banned: 400, nothing generated */
        tern_model_info info;
        tern_model_get_info(m, &info);
        size_t cap = 128 + (size_t)info.n_vocab * 16, n = 0;
        char *body = malloc(cap);
        n += (size_t)snprintf(body + n, cap - n, "{\"prompt\": \"Once\", \"max_tokens\": 2, \"logit_bias\": {");
        for (int t = 0; t < info.n_vocab; t++) n += (size_t)snprintf(body + n, cap - n, "%s\"%d\": false", t ? ", " : "", t);
        snprintf(body + n, cap - n, "}}");
        int code;
        char *out = http(s, "POST", "/v1/completions", body, NULL, &code);
        assert_int_equal(code, 400);
        assert_non_null(strstr(out, "'logit_bias' bans every token of the model (512); leave at least one token allowed"));
        free(out);
        /* response_format json_object with every token banned but id 1 (<s>: no text, so it
         * cannot start the object): 400 naming logit_bias, never a banned token or a broken
         * object; the server goes on serving */
        n = (size_t)snprintf(body, cap, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 4, "
                             "\"response_format\": {\"type\": \"json_object\"}, \"logit_bias\": {");
        for (int t = 0, first = 1; t < info.n_vocab; t++)
            if (t != 1) n += (size_t)snprintf(body + n, cap - n, "%s\"%d\": false", first ? "" : ", ", t), first = 0;
        snprintf(body + n, cap - n, "}}");
        out = http(s, "POST", "/v1/chat/completions", body, NULL, &code);
        if (code != 400 || !strstr(out, "'logit_bias' bans every token that can continue the JSON object of response_format "
                                        "json_object after 0 generated tokens"))
            fail_msg("json_object with every token banned but <s>: status %d: %s", code, out);
        free(out);
        free(body);
        cJSON_Delete(http_json(s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 2}", 200));
    }
    {   /* a prompt id past the vocabulary, flat and nested: the path names where it is */
        const char *bodies[2][2] = {{"{\"prompt\": [1, 99999], \"max_tokens\": 1}", "'prompt[1]' is token id 99999; the vocabulary has ids 0..511"},
                                    {"{\"prompt\": [[1, 99999]], \"max_tokens\": 1}", "'prompt[0][1]' is token id 99999; the vocabulary has ids 0..511"}};
        for (int i = 0; i < 2; i++) {
            int code;
            char *out = http(s, "POST", "/v1/completions", bodies[i][0], NULL, &code);
            if (code != 400 || !strstr(out, bodies[i][1])) fail_msg("%s: status %d: %s", bodies[i][0], code, out);
            free(out);
        }
    }
    srv_stop(s);
    tern_model_free(m);
}

/* A copy of stories260K (at path) whose tokenizer.ggml.eos_token_id (a UINT32 in that file) is eos:
 * the TinyStories model never ends a story with its own </s> (it starts the next with <s>), so a
 * token that greedy decoding does produce is made the end-of-generation token instead. */
static void stories_with_eos(const char *path, uint32_t eos) {
    char src[1024];
    fx_require(src, sizeof src, STORIES);
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    static const char key[] = "tokenizer.ggml.eos_token_id";
    unsigned char *k = memmem(b, (size_t)n, key, sizeof key - 1);
    assert_non_null(k);
    uint32_t type;
    memcpy(&type, k + sizeof key - 1, 4);
    assert_int_equal(type, 4);                        /* GGUF_TYPE_UINT32 */
    memcpy(k + sizeof key - 1 + 4, &eos, 4);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(b);
}

/* ignore_eos (vLLM's and llama-server's field): with it the end-of-generation token is generated
 * and counted and the reply goes on to max_tokens, as `tern run --ignore-eos`. On a stories260K
 * whose EOS is the 4th-or-later new token of the greedy continuation of "Once", the plain request
 * stops there (finish_reason "stop", k + 1 tokens), and with ignore_eos: true it goes past it: 30
 * tokens, finish_reason "length", the same text as the unmodified model's 30 greedy tokens (the
 * token is an ordinary one, so its text shows), streamed or not. */
static void test_ignore_eos(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    tern_err err = {0};
    int32_t ids[64], gen[16];
    int n_ids = 0;
    assert_int_equal(tern_tokenize(m, "Once", 4, true, false, ids, 64, &n_ids, &err), TERN_OK);
    tern_session *ss = mfx_session(m, 128, 64, false);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const float *lg = tern_session_eval(ss, ids, n_ids, &err);
    for (int i = 0; i < 16; i++) {
        assert_non_null(lg);
        gen[i] = mfx_argmax(lg, info.n_vocab);
        lg = tern_session_eval(ss, &gen[i], 1, &err);
    }
    tern_session_free(ss);
    int k = 3;                                        /* the first new token from index 3 on */
    for (; k < 16; k++) {
        bool seen = false;
        for (int i = 0; i < k; i++) seen |= gen[i] == gen[k];
        if (!seen) break;
    }
    assert_true(k < 16);
    srv *s = start(m, 1, 128, 4, 0, NULL, 0);
    const char *body30 = "{\"prompt\": \"Once\", \"max_tokens\": 30, \"temperature\": 0}";
    cJSON *want = http_json(s, "/v1/completions", body30, 200);
    assert_int_equal(usage(want, "completion_tokens"), 30);
    srv_stop(s);
    tern_model_free(m);

    char path[512];
    fx_tmp_path(path, sizeof path, "stories-eos.gguf");
    stories_with_eos(path, (uint32_t)gen[k]);
    m = mfx_load(path, TERN_NUMERICS_FAST, 1);
    s = start(m, 1, 128, 4, 0, NULL, 0);
    cJSON *j = http_json(s, "/v1/completions", body30, 200);
    assert_string_equal(finish_reason(j), "stop");
    assert_int_equal(usage(j, "completion_tokens"), k + 1);
    assert_true(strncmp(choice_text(want), choice_text(j), strlen(choice_text(j))) == 0);
    assert_true(strlen(choice_text(j)) < strlen(choice_text(want)));
    cJSON_Delete(j);
    j = http_json(s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 30, \"temperature\": 0, \"ignore_eos\": true}", 200);
    assert_string_equal(finish_reason(j), "length");
    assert_int_equal(usage(j, "completion_tokens"), 30);
    assert_string_equal(choice_text(j), choice_text(want));
    cJSON_Delete(j);
    int code;
    char *out = http(s, "POST", "/v1/completions",
                     "{\"prompt\": \"Once\", \"max_tokens\": 30, \"temperature\": 0, \"ignore_eos\": true, \"stream\": true}", NULL, &code);
    assert_int_equal(code, 200);
    sse e;
    sse_parse(out, &e);
    assert_true(e.done);
    assert_string_equal(e.finish, "length");
    assert_string_equal(e.content, choice_text(want));
    sse_free(&e);
    free(out);
    srv_stop(s);
    tern_model_free(m);
    unlink(path);
    cJSON_Delete(want);
}

/* Tools in the prompt by template family (spec section 7: the definitions inside <tools> in the
 * system turn, with the instructions for emitting calls). A model without a chat template is
 * served with ChatML, which renders a system turn verbatim, so it can carry the tools exactly as
 * Qwen3's template does: the prompt the server builds for a conversation with tools, an
 * assistant turn with tool calls (string and object arguments, a non-integer number) and two tool
 * results must equal, byte for byte, the reference Qwen3 rendering (src/tokenizer/chat.c,
 * byte-equal to Qwen-Qwen3-0.6B.jinja) -- with and without a system message; and on qwen3-tiny
 * (a Qwen3 template) the same. Checked on the text (api + prompt) and over HTTP (the response's
 * prompt_tokens is the count of those ids; on qwen3-tiny, for tools and one user turn, the ids are
 * the reference text's tokenised whole: the tools block is scaffolding, its <tool_call> a token).
 * Before, every family got the Qwen3.5 block. */
static const char TOOLS_JSON[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \u00e9t\u00e9\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"number\","
    " \"default\": 1.5}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\","
    " \"parameters\": {}}}]";
static const char CALLS_JSON[] =
    "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}},"
    " {\"id\": \"c2\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\", \"offset\": 0.1}}}]";

static void tools_case(tern_model *m, srv_tools_fmt fmt, bool with_system, bool exact_ids, bool over_http) {
    const char *user1 = "What is the weather in Paris?", *user2 = "Thanks. And tomorrow?";
    chat_msg ref[6];
    int n = 0;
    if (with_system) ref[n++] = (chat_msg){"system", "Be brief.", NULL, NULL};
    ref[n++] = (chat_msg){"user", user1, NULL, NULL};
    if (!exact_ids) {                                 /* (history: its tool-call markup is message text) */
        ref[n++] = (chat_msg){"assistant", "", NULL, CALLS_JSON};
        ref[n++] = (chat_msg){"tool", "sunny, 21.5", NULL, NULL};
        ref[n++] = (chat_msg){"tool", "12:00", NULL, NULL};
        ref[n++] = (chat_msg){"user", user2, NULL, NULL};
    }
    const chat_opts o = {true, true, TOOLS_JSON};
    char *want = NULL;
    size_t n_want = 0;
    tern_err err = {0};
    assert_int_equal(chat_render(CHAT_TMPL_QWEN3, ref, n, &o, &want, &n_want, &err), TERN_OK);
    char body[4096];
    if (exact_ids)
        snprintf(body, sizeof body, "{\"messages\": [%s{\"role\": \"user\", \"content\": \"%s\"}], \"tools\": %s, \"max_tokens\": 1}",
                 with_system ? "{\"role\": \"system\", \"content\": \"Be brief.\"}, " : "", user1, TOOLS_JSON);
    else snprintf(body, sizeof body,
             "{\"messages\": [%s{\"role\": \"user\", \"content\": \"%s\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": %s},"
             " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"sunny, 21.5\"}, {\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": \"12:00\"},"
             " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"%s\"}]}], \"tools\": %s, \"max_tokens\": 1, \"temperature\": 0}",
             with_system ? "{\"role\": \"system\", \"content\": \"Be brief.\"}, " : "", user1, CALLS_JSON, user2, TOOLS_JSON);
    srv_request r;
    srv_error e;
    if (!api_parse_request_fmt(SRV_CHAT, fmt, body, strlen(body), &r, &e)) fail_msg("%s", e.message);
    prompt_ids ids = {0};
    char *text = NULL;
    assert_int_equal(prompt_chat_append_ex(m, NULL, r.msgs, r.trusted, r.n_msgs, true, true, true, &ids, &text, &err), TERN_OK);
    if (strcmp(text, want)) fail_msg("the prompt differs from the Qwen3 rendering:\n--- got\n%s\n--- want\n%s", text, want);
    api_request_free(&r);
    free(text);
    if (exact_ids) {                                  /* byte-level BPE: the pieces tokenise as the whole */
        tern_model_info info;
        tern_model_get_info(m, &info);
        int n_ref = 0;
        tern_tokenize(m, want, n_want, info.add_bos, true, NULL, 0, &n_ref, &err);
        assert_int_equal(ids.n, n_ref);               /* contents had no special text: the same ids */
        int32_t *ref_ids = malloc((size_t)n_ref * sizeof *ref_ids);
        err = (tern_err){0};
        assert_int_equal(tern_tokenize(m, want, n_want, info.add_bos, true, ref_ids, n_ref, &n_ref, &err), TERN_OK);
        assert_memory_equal(ids.ids, ref_ids, (size_t)n_ref * sizeof *ref_ids);
        free(ref_ids);
    }
    if (over_http) {                                  /* the server builds this prompt */
        srv *s = start(m, 1, 2048, 4, 0, NULL, 0);
        cJSON *j = http_json(s, "/v1/chat/completions", body, 200);
        assert_int_equal(usage(j, "prompt_tokens"), ids.n);
        cJSON_Delete(j);
        srv_stop(s);
    }
    prompt_ids_free(&ids);
    free(want);
}

static void test_tools_by_template_family(void **state) {
    (void)state;
    tern_model *m = load(STORIES);                    /* no chat template: ChatML */
    tern_err err = {0};
    assert_int_equal(prompt_chat_family(m, NULL, &err), PROMPT_FAMILY_CHATML);
    tools_case(m, SRV_TOOLS_CHATML, true, false, true);
    tools_case(m, SRV_TOOLS_CHATML, false, false, true);
    tern_model_free(m);
    m = load(QWEN3);
    assert_int_equal(prompt_chat_family(m, NULL, &err), PROMPT_FAMILY_QWEN3);
    tools_case(m, SRV_TOOLS_QWEN3, true, false, true);
    tools_case(m, SRV_TOOLS_QWEN3, false, false, true);
    tools_case(m, SRV_TOOLS_QWEN3, false, true, true);   /* tools + one user turn: the reference ids */
    tern_model_free(m);
    m = load(QWEN35);
    assert_int_equal(prompt_chat_family(m, NULL, &err), PROMPT_FAMILY_QWEN35);
    assert_int_equal(prompt_chat_family(m, "chatml", &err), PROMPT_FAMILY_CHATML);
    assert_int_equal(prompt_chat_family(m, "qwen3", &err), PROMPT_FAMILY_QWEN3);
    tern_model_free(m);
}

/* The model id without --alias: the file's name less .gguf (as --models-dir names its files),
 * or general.name when no path is known (stories260K's is "llama"). */
static void test_default_model_id(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    const char *paths[2] = {"some/dir/stories260K.gguf", NULL}, *ids[2] = {"stories260K", "llama"};
    for (int i = 0; i < 2; i++) {
        srv *s = start_path(m, paths[i], NULL);
        int code;
        char *out = http(s, "GET", "/v1/models", NULL, NULL, &code);
        assert_int_equal(code, 200);
        cJSON *r = cJSON_Parse(out);
        free(out);
        assert_non_null(r);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "data"), 0), "id")),
                            ids[i]);
        cJSON_Delete(r);
        srv_stop(s);
    }
    tern_model_free(m);
}

/* An error in Anthropic's shape, {"type": "error", "error": {"type", "message"}}, with this
 * status, error type and message. */
static void expect_anth_error(srv *s, const char *method, const char *path, const char *body, int code, const char *type,
                              const char *message) {
    int got;
    char *out = http(s, method, path, body, NULL, &got);
    cJSON *j = cJSON_Parse(out);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    const cJSON *jt = cJSON_GetObjectItem(j, "type"), *et = cJSON_GetObjectItem(e, "type"), *em = cJSON_GetObjectItem(e, "message");
    if (got != code || !cJSON_IsString(jt) || strcmp(jt->valuestring, "error") || !cJSON_IsString(et) ||
        strcmp(et->valuestring, type) || !cJSON_IsString(em) || strcmp(em->valuestring, message))
        fail_msg("%s %s %s: %d %s; expected %d {\"type\": \"error\", \"error\": {\"type\": \"%s\", \"message\": \"%s\"}}",
                 method, path, body ? body : "", got, out, code, type, message);
    cJSON_Delete(j);
    free(out);
}

/* /v1/messages refusals name the fields the client sent, also those the chat parser checks
 * under the chat names they become (stop, reasoning_budget). */
static void test_messages_field_names(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 0, NULL, 0);
    static const struct { const char *extra, *message; } cases[] = {
        {"\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":-7}",
         "'thinking.budget_tokens' must be an integer in [-1, 16777216], got -7"},
        {"\"stop_sequences\":[1]", "'stop_sequences[0]' must be a string, got 1"},
        {"\"thinking\":5", "'thinking' must be an object {\"type\": \"enabled\" or \"disabled\", \"budget_tokens\"}, got 5"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"model\":\"m\",\"max_tokens\":3,%s,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 cases[i].extra);
        expect_anth_error(s, "POST", "/v1/messages", body, 400, "invalid_request_error", cases[i].message);
    }
    srv_stop(s);
    tern_model_free(m);
}

/* A path under /v1/messages that is no endpoint (an Anthropic client's count_tokens, batches) is
 * 404 in Anthropic's shape, as /v1/messages's other errors; a path that only begins with the same
 * letters keeps OpenAI's. With a key, a request without it is 401 in the same shapes. */
static void test_messages_unknown_paths(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 0, NULL, 0);
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    static const char *const under[][2] = {{"POST", "/v1/messages/count_tokens"}, {"GET", "/v1/messages/batches"},
                                           {"POST", "/v1/messages/"}};
    for (size_t i = 0; i < sizeof under / sizeof under[0]; i++) {
        char want[320];
        snprintf(want, sizeof want, "no such endpoint: %s %s; expected /v1/chat/completions, /v1/completions, /v1/messages, "
                 "/v1/responses, /v1/models, /health, /metrics, ...", under[i][0], under[i][1]);
        expect_anth_error(s, under[i][0], under[i][1], !strcmp(under[i][0], "POST") ? body : NULL, 404, "not_found_error", want);
    }
    expect_error(s, "POST", "/v1/messagesx", body, NULL, 404, NULL);   /* OpenAI's object */
    srv_stop(s);
    s = start(m, 1, 256, 4, 0, "sekret", 0);
    expect_anth_error(s, "POST", "/v1/messages/count_tokens", body, 401, "authentication_error",
                      "invalid or missing API key (Authorization: Bearer KEY, or x-api-key: KEY)");
    srv_stop(s);
    tern_model_free(m);
}

/* A chat template no family renders (a Llama-3 one): the server starts (completions need no
 * template), and every request that renders chat messages answers 500 server_error naming the
 * template and --chat-template, not a 400 blaming the request. */
static void test_unknown_template_is_server_error(void **state) {
    (void)state;
    static const char l3[] = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
                             "{{ m.content }}<|eot_id|>{% endfor %}";
    char tmpl[1024], gguf[1024];
    fx_tmp_path(tmpl, sizeof tmpl, "l3-template.jinja");
    fx_tmp_path(gguf, sizeof gguf, "l3-template.gguf");
    FILE *f = fopen(tmpl, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(l3, 1, sizeof l3 - 1, f), sizeof l3 - 1);
    fclose(f);
    char *out = NULL, *er = NULL;
    if (ru_tern(&out, &er, "synth --arch qwen3-tiny --seed 1 --chat-template '%s' -o '%s'", tmpl, gguf) != 0)
        fail_msg("synth: %s%s", out, er);
    free(out);
    free(er);
    tern_model *m = mfx_load(gguf, TERN_NUMERICS_FAST, 1);
    tern_err err = {0};
    assert_true(prompt_chat_family(m, NULL, &err) < 0);   /* independently: no family renders it */
    srv *s = start_path(m, NULL, "test-model");
    static const char *const chat[][2] = {
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 2}"},
        {"/apply-template", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"},
    };
    for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++) {
        cJSON *r = http_json(s, chat[i][0], chat[i][1], 500);
        const cJSON *e = cJSON_GetObjectItem(r, "error");
        const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(e, "message"));
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")), "server_error");
        if (!msg || !strstr(msg, "unknown chat template") || !strstr(msg, "--chat-template"))
            fail_msg("%s: %s", chat[i][0], msg ? msg : "(no message)");
        cJSON_Delete(r);
    }
    cJSON_Delete(http_json(s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 2}", 200));
    srv_stop(s);
    tern_model_free(m);
    remove(tmpl);
    remove(gguf);
}

/* node scripts: the official openai client, and the page in headless Chromium */
static void run_node_args(const char *script, const char *needs, srv *s, const char *args);
static void run_node(const char *script, const char *needs, srv *s) { run_node_args(script, needs, s, ""); }

/* node tests/server/SCRIPT URL ARGS; needs: an npm package it imports (skipped when missing, a
 * failure under CI=true). */
static void run_node_args(const char *script, const char *needs, srv *s, const char *args) {
    char path[256];
    snprintf(path, sizeof path, "tests/server/node_modules/%s/package.json", needs);
    const bool ci = getenv("CI") && !strcmp(getenv("CI"), "true");
    if (access(path, R_OK) != 0 || system("command -v node >/dev/null 2>&1") != 0) {
        if (ci) fail_msg("%s is missing: .ci/run installs it (npm ci --prefix tests/server)", path);
        test_skip("%s not installed (npm ci --prefix tests/server)", needs);
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "node tests/server/%s http://127.0.0.1:%d %s 2>&1", script, srv_port(s), args);
    int st;
    char *out = ru_capture(cmd, &st);
    print_message("%s", out);
    if (st != 0) fail_msg("%s failed:\n%s", script, out);
    free(out);
}

static void test_openai_client(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 2, 512, 4, 0, NULL, 0);
    run_node("openai_client.mjs", "openai", s);
    srv_stop(s);
    tern_model_free(m);
}

/* Tool calls through the official clients' stream helpers (tests/server/tool_calls.mjs): the Qwen3
 * golden model with a reply given in advance (script_reply), two calls in the Qwen3 template's
 * markup, then markup whose arguments are not JSON (kept as content). */
static void tool_calls_with(const char *reply, const char *mode) {
    tern_model *m = load(QWEN3);
    srv_config c;
    srv_config_default(&c);
    c.port = 0;
    c.parallel = 1;
    c.n_ctx = 1024;
    c.model_name = "test-model";
    c.script_reply = reply;
    srv *s = NULL;
    tern_err err = {0};
    if (srv_start(&s, m, &c, &err) != TERN_OK) fail_msg("srv_start: %s", err.msg);
    run_node_args("tool_calls.mjs", "@anthropic-ai/sdk", s, mode);
    srv_stop(s);
    tern_model_free(m);
}

static void test_tool_calls_official_clients(void **state) {
    (void)state;
    tool_calls_with("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call><|im_end|>",
                    "calls");
    tool_calls_with("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"oops}\n</tool_call><|im_end|>",
                    "broken");
}

static void test_chat_page_in_chromium(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    const bool ci = getenv("CI") && !strcmp(getenv("CI"), "true");
    if (system("command -v chromium >/dev/null 2>&1") != 0) {
        if (ci) fail_msg("chromium is not installed (.ci/run installs it)");
        srv_stop(s);
        tern_model_free(m);
        test_skip("chromium not installed");
    }
    run_node("page_chromium.mjs", "playwright-core", s);
    srv_stop(s);
    tern_model_free(m);
}


/* ---- endpoints without generation, token-id prompts ------------------------------------------ */

/* The first vector of the Qwen3 tokenizer's published set whose text needs byte-level pieces
 * (" this is 🦙.cpp": the emoji is three tokens, none of them valid UTF-8 alone). */
static cJSON *qwen3_split_vector(void) {
    char path[1024];
    size_t n = 0;
    char *all = fx_read_file(fx_require(path, sizeof path, "data/qwen3-tokenizer/qwen3_encode_vectors.jsonl"), &n);
    cJSON *found = NULL;
    for (char *line = strtok(all, "\n"); line && !found; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (j && strstr(cJSON_GetObjectItem(j, "text")->valuestring, "\xf0\x9f\xa6\x99")) found = j;
        else cJSON_Delete(j);
    }
    free(all);
    if (!found) fail_msg("no vector with the llama emoji in qwen3_encode_vectors.jsonl");
    return found;
}

/* /tokenize and /detokenize against the tokenizer's published vector (ids and text), pieces that
 * concatenate to the text (byte arrays where a piece is not UTF-8), special-token parsing on by
 * default and off on request, /apply-template against the reference runtime's rendering (golden
 * prompts p5), and the errors of each. */
static void test_tokenize_detokenize_template(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    srv *s = start(m, 1, 512, 4, 0, NULL, 0);
    cJSON *vec = qwen3_split_vector();
    const char *text = cJSON_GetObjectItem(vec, "text")->valuestring;
    const cJSON *ids = cJSON_GetObjectItem(vec, "ids");
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "content", text);
    char *body = cJSON_PrintUnformatted(req);
    cJSON *r = http_json(s, "/tokenize", body, 200);
    free(body);
    const cJSON *toks = cJSON_GetObjectItem(r, "tokens");
    assert_int_equal(cJSON_GetArraySize(toks), cJSON_GetArraySize(ids));
    for (int i = 0; i < cJSON_GetArraySize(ids); i++)
        assert_int_equal(cJSON_GetArrayItem(toks, i)->valueint, cJSON_GetArrayItem(ids, i)->valueint);
    cJSON_Delete(r);
    /* with_pieces: the pieces in order are the text's bytes */
    cJSON_AddBoolToObject(req, "with_pieces", true);
    body = cJSON_PrintUnformatted(req);
    r = http_json(s, "/tokenize", body, 200);
    free(body);
    char joined[256] = "";
    size_t nj = 0;
    int n_bytes_pieces = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(r, "tokens")) {
        const cJSON *pc = cJSON_GetObjectItem(t, "piece");
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(t, "id")));
        if (cJSON_IsString(pc)) {
            const size_t k = strlen(pc->valuestring);
            assert_true(nj + k < sizeof joined);
            memcpy(joined + nj, pc->valuestring, k);
            nj += k;
        } else {
            assert_true(cJSON_IsArray(pc));
            n_bytes_pieces++;
            const cJSON *b;
            cJSON_ArrayForEach(b, pc) joined[nj++] = (char)b->valueint;
        }
    }
    joined[nj] = '\0';
    assert_string_equal(joined, text);
    assert_int_equal(n_bytes_pieces, 3);
    cJSON_Delete(r);
    cJSON_Delete(req);
    /* /detokenize: the ids give the text back */
    req = cJSON_CreateObject();
    cJSON_AddItemToObject(req, "tokens", cJSON_Duplicate(ids, true));
    body = cJSON_PrintUnformatted(req);
    r = http_json(s, "/detokenize", body, 200);
    free(body);
    assert_string_equal(cJSON_GetObjectItem(r, "content")->valuestring, text);
    cJSON_Delete(r);
    cJSON_Delete(req);
    cJSON_Delete(vec);
    /* control-token text: one token by default (llama-server's parse_special), text tokens when off */
    r = http_json(s, "/tokenize", "{\"content\":\"<|im_end|>\"}", 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "tokens")), 1);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "tokens"), 0)->valueint, 151645);
    cJSON_Delete(r);
    r = http_json(s, "/tokenize", "{\"content\":\"<|im_end|>\",\"parse_special\":false}", 200);
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(r, "tokens")) > 1);
    cJSON_Delete(r);
    /* /apply-template: the golden rendering of p5 */
    cJSON *pj = mfx_json("golden/qwen3-tiny-pq2_0/prompts.json");
    const cJSON *p5 = NULL, *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(pj, "prompts"))
        if (!strcmp(cJSON_GetObjectItem(e, "id")->valuestring, "p5")) p5 = e;
    assert_non_null(p5);
    req = cJSON_CreateObject();
    cJSON_AddItemToObject(req, "messages", cJSON_Duplicate(cJSON_GetObjectItem(p5, "messages"), true));
    body = cJSON_PrintUnformatted(req);
    r = http_json(s, "/apply-template", body, 200);
    free(body);
    assert_string_equal(cJSON_GetObjectItem(r, "prompt")->valuestring, cJSON_GetObjectItem(p5, "text")->valuestring);
    cJSON_Delete(r);
    cJSON_Delete(req);
    cJSON_Delete(pj);
    /* errors */
    expect_error(s, "POST", "/tokenize", "{\"content\":5}", NULL, 400, "content");
    expect_error(s, "POST", "/tokenize", "{}", NULL, 400, "content");
    expect_error(s, "POST", "/tokenize", "{\"content\":\"a\",\"with_pieces\":\"yes\"}", NULL, 400, "with_pieces");
    {   /* the message says what came */
        int code;
        char *out = http(s, "POST", "/tokenize", "{\"content\":\"a\",\"add_special\":\"yes\"}", NULL, &code);
        assert_int_equal(code, 400);
        if (!strstr(out, "'add_special' must be true or false, got a string")) fail_msg("/tokenize add_special \"yes\": %s", out);
        free(out);
    }
    expect_error(s, "POST", "/tokenize", "{\"content\":\"a\"", NULL, 400, NULL);
    expect_error(s, "POST", "/tokenize", "{\"content\":\"a\",\"content\":\"b\"}", NULL, 400, NULL);
    expect_error(s, "POST", "/tokenize", "{\"content\":\"\xff\"}", NULL, 400, "content");
    expect_error(s, "GET", "/tokenize", NULL, NULL, 405, NULL);
    int code;
    char *o415 = http_ct(s, "/tokenize", "{\"content\":\"a\"}", "text/plain", &code);
    assert_int_equal(code, 415);
    free(o415);
    /* a bad element is named as the element (param tokens[i]), as messages[1].role and stop[2] are */
    expect_error(s, "POST", "/detokenize", "{\"tokens\":[1,\"x\"]}", NULL, 400, "tokens[1]");
    expect_error(s, "POST", "/detokenize", "{\"tokens\":[151936]}", NULL, 400, "tokens[0]");
    expect_error(s, "POST", "/detokenize", "{\"tokens\":[5,6,-1]}", NULL, 400, "tokens[2]");
    expect_error(s, "POST", "/detokenize", "{\"tokens\":5}", NULL, 400, "tokens");
    static const char *const bad_ids[][2] = {   /* each message says what the id was */
        {"{\"tokens\":[1,\"x\"]}", "'tokens[1]' must be a token id in 0..151935, got a string"},
        {"{\"tokens\":[-1]}", "'tokens[0]' must be a token id in 0..151935, got -1"},
        {"{\"tokens\":5}", "'tokens' must be an array of token ids, got 5"},
    };
    {
        cJSON *rb = http_json(s, "/tokenize", "{\"content\":5}", 400);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(rb, "error"), "message")),
                            "'content' must be a string, got 5");
        cJSON_Delete(rb);
    }
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        cJSON *rb = http_json(s, "/detokenize", bad_ids[i][0], 400);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(rb, "error"), "message")), bad_ids[i][1]);
        cJSON_Delete(rb);
    }
    expect_error(s, "POST", "/apply-template", "{\"messages\":[]}", NULL, 400, "messages");
    {
        cJSON *rb = http_json(s, "/v1/chat/completions", "{\"messages\":[]}", 400);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(rb, "error"), "message")),
                            "'messages' must not be empty: expected at least one {\"role\", \"content\"} object, got []");
        cJSON_Delete(rb);
    }
    expect_error(s, "POST", "/apply-template", "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", NULL, 400, NULL);
    srv_stop(s);
    tern_model_free(m);
}

/* /props reports the slots, the context and the file's chat template (read from the GGUF here
 * with the reader); /slots follows a request (its prompt's tokens cached afterwards, idle again);
 * /v1/models/{id} answers the served id and 404 model_not_found for any other. */
static void test_props_slots_model(void **state) {
    (void)state;
    tern_model *m = load(QWEN3);
    srv *s = start(m, 2, 384, 4, 0, NULL, 0);
    int code;
    char *out = http(s, "GET", "/props", NULL, NULL, &code);
    assert_int_equal(code, 200);
    cJSON *p = cJSON_Parse(out);
    free(out);
    assert_int_equal(cJSON_GetObjectItem(p, "total_slots")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "default_generation_settings"), "n_ctx")->valueint, 384);
    char path[1024];
    gguf_ctx *g = NULL;
    tern_err err = {0};
    assert_int_equal(gguf_open(&g, fx_require(path, sizeof path, QWEN3), GGUF_LOAD_MMAP, &err), TERN_OK);
    gguf_str tmpl;
    assert_int_equal(gguf_get_str(g, "tokenizer.chat_template", true, &tmpl, &err), TERN_OK);
    const char *got = cJSON_GetObjectItem(p, "chat_template")->valuestring;
    assert_int_equal(strlen(got), tmpl.n);
    assert_memory_equal(got, tmpl.p, tmpl.n);
    gguf_close(g);
    cJSON_Delete(p);
    {   /* a model without a template: the ChatML fallback, by its name */
        tern_model *st = load(STORIES);
        srv *s2 = start(st, 1, 256, 0, 0, NULL, 0);
        out = http(s2, "GET", "/props", NULL, NULL, &code);
        cJSON *p2 = cJSON_Parse(out);
        if (code != 200 || !cJSON_IsString(cJSON_GetObjectItem(p2, "chat_template")) ||
            strcmp(cJSON_GetObjectItem(p2, "chat_template")->valuestring, "chatml"))
            fail_msg("/props of stories260K (no template in the file): expected chat_template \"chatml\": %s", out);
        free(out);
        cJSON_Delete(p2);
        srv_stop(s2);
        tern_model_free(st);
    }
    /* a request: afterwards one slot caches at least its prompt, none is busy */
    cJSON *r = http_json(s, "/v1/completions", "{\"prompt\":\"The cat sat on the mat\",\"max_tokens\":4,\"temperature\":0}", 200);
    const int n_prompt = usage(r, "prompt_tokens");
    cJSON_Delete(r);
    out = http(s, "GET", "/slots", NULL, NULL, &code);
    assert_int_equal(code, 200);
    cJSON *sl = cJSON_Parse(out);
    free(out);
    assert_int_equal(cJSON_GetArraySize(sl), 2);
    int cached = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, sl) {
        assert_int_equal(cJSON_GetObjectItem(o, "n_ctx")->valueint, 384);
        assert_false(cJSON_IsTrue(cJSON_GetObjectItem(o, "is_processing")));
        const int c = cJSON_GetObjectItem(o, "n_cached_tokens")->valueint;
        if (c >= n_prompt) cached++;
    }
    assert_int_equal(cached, 1);
    cJSON_Delete(sl);
    out = http(s, "GET", "/v1/models/test-model", NULL, NULL, &code);
    assert_int_equal(code, 200);
    cJSON *mo = cJSON_Parse(out);
    free(out);
    assert_string_equal(cJSON_GetObjectItem(mo, "id")->valuestring, "test-model");
    assert_string_equal(cJSON_GetObjectItem(mo, "object")->valuestring, "model");
    cJSON_Delete(mo);
    out = http(s, "GET", "/v1/models/other", NULL, NULL, &code);
    assert_int_equal(code, 404);
    assert_non_null(strstr(out, "\"code\":\"model_not_found\""));
    free(out);
    expect_error(s, "POST", "/props", "{}", NULL, 405, NULL);
    srv_stop(s);
    tern_model_free(m);
}

/* A completion prompt given as token ids generates what the same ids give as text (greedy, the
 * text's own ids, BOS included as the text path adds it); top_k -1 is vLLM's "off"; control-token
 * text in a completion prompt is a control token unless parse_special is false; several prompts,
 * an empty array, a negative id and an id past the vocabulary are 400 naming the prompt. */
static void test_prompt_token_ids(void **state) {
    (void)state;
    tern_model *m = load(STORIES);
    srv *s = start(m, 1, 256, 4, 0, NULL, 0);
    int32_t ids[32];
    int n = 0;
    tern_err err = {0};
    assert_int_equal(tern_tokenize(m, "Once upon a time", 16, true, false, ids, 32, &n, &err), TERN_OK);
    cJSON *a = http_json(s, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0}", 200);
    char body[512];
    int k = snprintf(body, sizeof body, "{\"prompt\":[");
    for (int i = 0; i < n; i++) k += snprintf(body + k, sizeof body - (size_t)k, "%s%d", i ? "," : "", ids[i]);
    snprintf(body + k, sizeof body - (size_t)k, "],\"max_tokens\":12,\"temperature\":0,\"top_k\":-1}");
    cJSON *b = http_json(s, "/v1/completions", body, 200);
    assert_string_equal(choice_text(a), choice_text(b));
    assert_int_equal(usage(a, "prompt_tokens"), n);
    assert_int_equal(usage(b, "prompt_tokens"), n);
    cJSON_Delete(a);
    cJSON_Delete(b);
    a = http_json(s, "/v1/completions", "{\"prompt\":\"</s>\",\"max_tokens\":1,\"temperature\":0}", 200);
    b = http_json(s, "/v1/completions", "{\"prompt\":\"</s>\",\"max_tokens\":1,\"temperature\":0,\"parse_special\":false}", 200);
    assert_int_equal(usage(a, "prompt_tokens"), 2);   /* BOS + </s> */
    assert_true(usage(b, "prompt_tokens") > 2);
    cJSON_Delete(a);
    cJSON_Delete(b);
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":[[1,2],[1,3]]}", NULL, 400, "prompt");
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":[\"a\",\"b\"]}", NULL, 400, "prompt");
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":[]}", NULL, 400, "prompt");
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":[1,-2]}", NULL, 400, "prompt");
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":[1,2.5]}", NULL, 400, "prompt");
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":[1,512]}", NULL, 400, "prompt");
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":\"a\",\"top_k\":-2}", NULL, 400, "top_k");
    expect_error(s, "POST", "/v1/completions", "{\"prompt\":\"a\",\"parse_special\":1}", NULL, 400, "parse_special");
    srv_stop(s);
    tern_model_free(m);
}

int suite_server_http(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints_and_errors),
        cmocka_unit_test(test_tokenize_detokenize_template),
        cmocka_unit_test(test_props_slots_model),
        cmocka_unit_test(test_prompt_token_ids),
        cmocka_unit_test(test_api_key_scheme),
        cmocka_unit_test(test_body_limit_on_arrival),
        cmocka_unit_test(test_content_length_twice),
        cmocka_unit_test(test_absolute_form),
        cmocka_unit_test(test_long_path_404),
        cmocka_unit_test(test_content_type),
        cmocka_unit_test(test_max_tokens_and_length),
        cmocka_unit_test(test_stop_strings_and_stream),
        cmocka_unit_test(test_batch_equivalence_and_429),
        cmocka_unit_test(test_disconnects_free_the_slot),
        cmocka_unit_test(test_queue_disconnect),
        cmocka_unit_test(test_connection_limits),
        cmocka_unit_test(test_http_head_retry_cors),
        cmocka_unit_test(test_nonfinite_logits_refused),
        cmocka_unit_test(test_slots_memory),
        cmocka_unit_test(test_prefix_reuse),
        cmocka_unit_test(test_cache_prompt_false),
        cmocka_unit_test(test_chunked_prefill),
        cmocka_unit_test(test_mixed_steps),
        cmocka_unit_test(test_stream_per_token),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_logprobs_stop),
        cmocka_unit_test(test_metrics_histograms),
        cmocka_unit_test(test_speculative),
        cmocka_unit_test(test_start_errors),
        cmocka_unit_test(test_host_names),
        cmocka_unit_test(test_unsupported_fields),
        cmocka_unit_test(test_logit_bias_served),
        cmocka_unit_test(test_serve_low_nofile),
        cmocka_unit_test(test_serve_request_log),
        cmocka_unit_test(test_ignore_eos),
        cmocka_unit_test(test_tools_by_template_family),
        cmocka_unit_test(test_unknown_template_is_server_error),
        cmocka_unit_test(test_default_model_id),
        cmocka_unit_test(test_messages_field_names),
        cmocka_unit_test(test_messages_unknown_paths),
        cmocka_unit_test(test_openai_client),
        cmocka_unit_test(test_tool_calls_official_clients),
        cmocka_unit_test(test_chat_page_in_chromium),
    };
    TEST_RUN_SUITE("server_http", tests);
}
