/* fuzz_request.c: libFuzzer target for the HTTP server's request bodies. The input bytes are one
 * body, given to every parser a request meets: api_parse_body, api_body_model and
 * api_parse_request_fmt for chat and text completions with each tools format (then
 * api_check_logit_bias and api_request_free); wire_to_chat for Anthropic Messages and OpenAI
 * Responses bodies, its chat text through api_parse_request_fmt again; the error objects of
 * api_error_json and wire_error_json; and json_guide_feed (response_format json_object) on the raw
 * bytes. Build and run: `make fuzz` (fuzz/run.sh; clang -fsanitize=fuzzer,address,undefined; this
 * target runs FUZZ_SHORT_SECONDS, 30 by default). Any crash, sanitizer report, leak or abort is
 * a bug: every body must give a request whose fields are in their documented ranges, or a 400
 * whose message says what is wrong (nothing here runs out of memory, so no 500 either). */
#include "../server/api.h"
#include "../server/jsonguide.h"
#include "../server/wire.h"
#include "tokenizer/chat.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* engine.c and the sampler are not linked: they pull in the model and kernel code, which clang
 * does not build (gcc vector builtins). api.c needs three of their entry points: the tools
 * section, as engine.c computes it (chat_tools_section behind the public name, TERN_E_RANGE when
 * cap is too small); the sampling defaults tern.h documents; token pieces, which only
 * api_logprobs_json asks for (not fuzzed here). */
int tern_chat_tools_section(const char *tmpl, const char *tools_json, char *out, size_t cap, size_t *n_out,
                            tern_err *err) {
    chat_tmpl t;
    char *text = NULL;
    int rc = chat_tmpl_by_name(tmpl, &t, err);
    if (rc == TERN_OK) rc = chat_tools_section(t, tools_json, &text, n_out, err);
    if (rc == TERN_OK && *n_out + 1 > cap)
        rc = tern_err_set(err, TERN_E_RANGE, "tools section needs %zu bytes, buffer has %zu", *n_out + 1, cap);
    if (rc == TERN_OK) memcpy(out, text, *n_out + 1);
    free(text);
    return rc;
}

void tern_sampler_params_default(tern_sampler_params *p) {
    *p = (tern_sampler_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                               .repeat_last_n = 64, .seed = TERN_SEED_RANDOM};
}

int tern_token_piece(const tern_model *m, int32_t id, bool special, char *buf, int cap) {
    (void)m, (void)id, (void)special, (void)buf, (void)cap;
    abort();
}

#define CHECK(x) do { if (!(x)) abort(); } while (0)   /* a broken promise: the fuzzer reports it */

static bool utf8_ok(const char *s) { return s && api_utf8_bad_at(s, strlen(s)) == strlen(s); }

/* A parser's error before it runs: no NUL in message and param, no type, so a field the parser
 * leaves unset shows. */
static void error_poison(srv_error *e) {
    memset(e, 0xa5, sizeof *e);
    e->type = NULL;
    e->code = NULL;
}

/* A refused body: 400 with an invalid_request_error, a non-empty NUL-terminated UTF-8 message
 * and param, and an error object (OpenAI's, and the wire format's w) that is JSON carrying it. */
static void check_error(const srv_error *e, srv_wire w) {
    CHECK(e->status == 400 && e->type && !strcmp(e->type, "invalid_request_error"));
    CHECK(memchr(e->message, 0, sizeof e->message) && e->message[0] && utf8_ok(e->message));
    CHECK(memchr(e->param, 0, sizeof e->param) && utf8_ok(e->param));
    char *js = w == WIRE_OPENAI ? api_error_json(e) : wire_error_json(w, e);
    cJSON *j = cJSON_Parse(js);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "message")));
    cJSON_Delete(j);
    free(js);
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* An accepted request: every field in its documented range, chat and completion fields apart. */
static void check_request(const srv_request *r, srv_kind kind, srv_tools_fmt fmt) {
    CHECK(r->kind == kind && r->max_tokens >= -1);
    const tern_sampler_params *p = &r->sp;
    CHECK(p->temp >= 0 && p->temp <= 2 && p->top_p >= 0 && p->top_p <= 1 && p->min_p >= 0 && p->min_p <= 1);
    CHECK(p->top_k >= -1 && p->top_k <= 1000000000 && p->repeat_last_n >= 0 && p->repeat_last_n <= 1000000);
    CHECK(p->repeat_penalty >= 1e-3f && p->repeat_penalty <= 100);
    CHECK(r->n_stop >= 0 && r->n_stop <= SRV_MAX_STOP);
    for (int i = 0; i < r->n_stop; i++)
        CHECK(utf8_ok(r->stop[i]) && strlen(r->stop[i]) >= 1 && strlen(r->stop[i]) <= SRV_MAX_STOP_LEN);
    CHECK(r->n_bias >= 0 && r->n_bias <= SRV_MAX_LOGIT_BIAS && (r->n_bias == 0 || (r->bias_ids && r->bias)));
    if (r->n_bias) {                                  /* distinct ids >= 0, biases in [-100, 100] or a ban */
        int32_t ids[SRV_MAX_LOGIT_BIAS];
        memcpy(ids, r->bias_ids, (size_t)r->n_bias * sizeof *ids);
        qsort(ids, (size_t)r->n_bias, sizeof *ids, cmp_i32);
        for (int i = 0; i < r->n_bias; i++) {
            CHECK(ids[i] >= 0 && (i == 0 || ids[i] != ids[i - 1]));
            CHECK((r->bias[i] >= -100 && r->bias[i] <= 100) || r->bias[i] == -INFINITY);
        }
    }
    CHECK(r->top_logprobs >= 0 && r->top_logprobs <= SRV_MAX_TOP_LOGPROBS && (r->logprobs || r->top_logprobs == 0));
    CHECK(r->think_budget >= -1 && r->think_budget <= 1 << 24);
    CHECK(!r->include_usage || r->stream);
    CHECK(!r->model || utf8_ok(r->model));
    if (kind == SRV_COMPLETION) {                     /* text or ids, never both; no messages */
        CHECK(!r->msgs && !r->trusted && r->n_msgs == 0 && !r->has_tools);
        CHECK(r->n_prompt_ids >= 0 && (r->n_prompt_ids > 0) == (r->prompt_ids != NULL) && !r->prompt != !r->prompt_ids);
        CHECK(!r->prompt || utf8_ok(r->prompt));
        for (int i = 0; i < r->n_prompt_ids; i++) CHECK(r->prompt_ids[i] >= 0);
        return;
    }
    CHECK(!r->prompt && !r->prompt_ids && r->n_prompt_ids == 0 && r->msgs && r->trusted);
    CHECK(r->n_msgs >= 1 && r->n_msgs <= SRV_MAX_MESSAGES + 1);   /* + 1: the tools system turn */
    for (int i = 0; i < r->n_msgs; i++) {
        const char *role = r->msgs[i].role;
        CHECK(role && (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") ||
                       !strcmp(role, "tool")));
        CHECK(fmt != SRV_TOOLS_CHATML || strcmp(role, "tool"));   /* ChatML: results became user turns */
        CHECK(utf8_ok(r->msgs[i].content));
        CHECK(!r->trusted[i] || (i == 0 && r->has_tools));         /* only the server's tools turn */
    }
    CHECK(!r->has_tools || !strcmp(r->msgs[0].role, "system"));
}

/* A request parsed as kind with fmt: accepted and in range, or refused with nothing to free.
 * Returns whether it was accepted; *e holds the error. */
static bool parse_one(srv_kind kind, srv_tools_fmt fmt, srv_wire w, const char *body, size_t len, const char *model,
                      srv_error *e) {
    srv_request r;
    error_poison(e);
    memset(&r, 0x5a, sizeof r);
    if (!api_parse_request_fmt(kind, fmt, body, len, &r, e)) {
        check_error(e, w);
        CHECK(!r.msgs && !r.trusted && !r.n_msgs && !r.prompt && !r.prompt_ids && !r.bias_ids && !r.bias &&
              !r.model && !r.n_stop);
        api_request_free(&r);                         /* nothing to free: must be harmless */
        return false;
    }
    check_request(&r, kind, fmt);
    CHECK(!r.model == !model && (!model || !strcmp(r.model, model)));   /* api_body_model reads the same */
    srv_error le;
    for (int32_t n_vocab = 1; n_vocab <= 1000; n_vocab *= 1000) {
        error_poison(&le);
        if (!api_check_logit_bias(&r, n_vocab, &le)) check_error(&le, WIRE_OPENAI);
    }
    api_request_free(&r);
    return true;
}

/* Every kind and tools format over one body (w: the format the client sent, for the errors).
 * The formats only change how tools and calls are written: ChatML and Qwen3 agree, and what
 * Qwen3.5 (which also wants call arguments as an object) takes, Qwen3 takes. */
static void parse_all(srv_wire w, const char *body, size_t len) {
    srv_error e;
    error_poison(&e);
    cJSON *root = api_parse_body(body, len, &e);
    if (!root) check_error(&e, w);
    else CHECK(cJSON_IsObject(root));
    cJSON_Delete(root);

    char *model = NULL;
    srv_error me;
    error_poison(&me);
    const bool model_ok = api_body_model(body, len, &model, &me);
    if (!model_ok) {
        check_error(&me, w);
        CHECK(!model);
        if (!root) CHECK(!strcmp(me.message, e.message));   /* the same refusal, said the same way */
    } else CHECK(root && (!model || utf8_ok(model)));

    for (int kind = SRV_CHAT; kind <= SRV_COMPLETION; kind++) {
        if (w != WIRE_OPENAI && kind != SRV_CHAT) break;   /* Messages and Responses are chat requests */
        bool ok[3];
        srv_error fe[3];
        for (int fmt = SRV_TOOLS_QWEN35; fmt <= SRV_TOOLS_CHATML; fmt++) {
            ok[fmt] = parse_one((srv_kind)kind, (srv_tools_fmt)fmt, w, body, len, model, &fe[fmt]);
            CHECK(!ok[fmt] || model_ok);
            if (!ok[fmt] && !root) CHECK(!strcmp(fe[fmt].message, e.message));
        }
        CHECK(ok[SRV_TOOLS_QWEN3] == ok[SRV_TOOLS_CHATML] && (!ok[SRV_TOOLS_QWEN35] || ok[SRV_TOOLS_QWEN3]));
        if (!ok[SRV_TOOLS_QWEN3]) CHECK(!strcmp(fe[SRV_TOOLS_QWEN3].message, fe[SRV_TOOLS_CHATML].message));
    }
    free(model);
}

/* json_guide over the bytes: fed whole or in two pieces it answers the same, and a text it
 * completes is one JSON object a JSON parser reads (cJSON refuses a lone UTF-16 surrogate escape,
 * which the guide's grammar lets through: texts with a \uD... escape are not compared). */
static void guide(const char *s, size_t n) {
    json_guide a, b;
    json_guide_init(&a);
    json_guide_init(&b);
    const bool whole = json_guide_feed(&a, s, n);
    const size_t cut = n ? (unsigned char)s[0] % (n + 1) : 0;
    const bool split = json_guide_feed(&b, s, cut) && json_guide_feed(&b, s + cut, n - cut);
    CHECK(whole == split);
    if (!whole) return;
    CHECK(json_guide_done(&a) == json_guide_done(&b) && json_guide_empty(&a) == json_guide_empty(&b));
    CHECK(a.depth >= 0 && a.depth <= JSON_GUIDE_DEPTH);
    if (!json_guide_done(&a)) return;
    for (size_t i = 0; i + 2 < n; i++)
        if (s[i] == '\\' && s[i + 1] == 'u' && (s[i + 2] == 'd' || s[i + 2] == 'D')) return;
    cJSON *j = cJSON_ParseWithLength(s, n);
    CHECK(cJSON_IsObject(j));
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *body = malloc(size ? size : 1);             /* exact size, no NUL after it: ASan sees any over-read */
    if (!body) return 0;
    if (size) memcpy(body, data, size);
    parse_all(WIRE_OPENAI, body, size);
    for (srv_wire w = WIRE_ANTHROPIC; w <= WIRE_RESPONSES; w++) {
        srv_error e;
        error_poison(&e);
        char *chat = wire_to_chat(w, body, size, &e);
        if (!chat) {
            check_error(&e, w);
            continue;
        }
        srv_error ce;                                 /* what the server parses next: a valid body */
        error_poison(&ce);
        cJSON *root = api_parse_body(chat, strlen(chat), &ce);
        CHECK(root);
        cJSON_Delete(root);
        parse_all(w, chat, strlen(chat));
        free(chat);
    }
    guide(body, size);
    free(body);
    return 0;
}
