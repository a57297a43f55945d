/* chat.c: the ChatML-family chat templates, written out in C. Layer 6.
 * Source of truth: ../shared/data/qwen3-tokenizer/Qwen-Qwen3-0.6B.jinja (qwen3) and
 * Qwen3.5-4B.jinja (qwen35); each render_* function follows its template statement by statement
 * (comments quote the Jinja where the logic is not obvious). Python string semantics used by the
 * templates: s.split(x)[-1] = the part after the LAST x, s.split(x)[0] = before the FIRST x,
 * strip('\n') strips newlines only, the |trim filter strips whitespace (ASCII here), `tojson`
 * is json.dumps(ensure_ascii=False) with ", " and ": " separators. */
#include "tokenizer/chat.h"
#include "core/os.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== string pieces ===========================================================================*/
typedef struct { const char *p; size_t n; } sv;
static sv sv_c(const char *s) { return (sv){s ? s : "", s ? strlen(s) : 0}; }
static bool sv_empty(sv s) { return s.n == 0; }

static const char *sv_find(sv s, const char *x) {               /* first occurrence or NULL */
    size_t m = strlen(x);
    if (m == 0 || m > s.n) return NULL;
    return os_memmem(s.p, s.n, x, m);
}
static const char *sv_rfind(sv s, const char *x) {              /* last occurrence or NULL */
    size_t m = strlen(x);
    if (m == 0 || m > s.n) return NULL;
    for (size_t i = s.n - m + 1; i-- > 0;)
        if (s.p[i] == x[0] && memcmp(s.p + i, x, m) == 0) return s.p + i;
    return NULL;
}
static bool sv_starts(sv s, const char *x) { size_t m = strlen(x); return s.n >= m && memcmp(s.p, x, m) == 0; }
static bool sv_ends(sv s, const char *x) { size_t m = strlen(x); return s.n >= m && memcmp(s.p + s.n - m, x, m) == 0; }
static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static sv sv_lstrip_nl(sv s) { while (s.n && s.p[0] == '\n') { s.p++; s.n--; } return s; }
static sv sv_rstrip_nl(sv s) { while (s.n && s.p[s.n - 1] == '\n') s.n--; return s; }
static sv sv_strip_nl(sv s) { return sv_rstrip_nl(sv_lstrip_nl(s)); }
static sv sv_trim(sv s) {
    while (s.n && is_ws(s.p[0])) { s.p++; s.n--; }
    while (s.n && is_ws(s.p[s.n - 1])) s.n--;
    return s;
}
/* s.split(x)[-1] */
static sv sv_after_last(sv s, const char *x) {
    const char *f = sv_rfind(s, x);
    if (!f) return s;
    size_t o = (size_t)(f - s.p) + strlen(x);
    return (sv){s.p + o, s.n - o};
}
/* s.split(x)[0] */
static sv sv_before_first(sv s, const char *x) {
    const char *f = sv_find(s, x);
    return f ? (sv){s.p, (size_t)(f - s.p)} : s;
}

/* Output buffer; `sp` collects the byte ranges that hold message data (user text), as opposed to
 * template scaffolding: the tokenizer parses special tokens only outside them. */
typedef struct {
    char *p; size_t n, cap; bool oom; tok_span *sp; int n_sp, cap_sp;
    const chat_msg *m; const bool *scaffold; int n_m;   /* text from a scaffold[i] message's content is
                                                           template text, not message data */
} sbuf;
static void sb_mark(sbuf *b, size_t start) {                    /* [start, n) is message data */
    if (b->oom || b->n <= start) return;
    if (b->n_sp && b->sp[b->n_sp - 1].b1 == start) { b->sp[b->n_sp - 1].b1 = b->n; return; }
    if (b->n_sp == b->cap_sp) {
        int cap = b->cap_sp ? b->cap_sp * 2 : 16;
        tok_span *q = realloc(b->sp, (size_t)cap * sizeof *q);
        if (!q) { b->oom = true; return; }
        b->sp = q;
        b->cap_sp = cap;
    }
    b->sp[b->n_sp++] = (tok_span){start, b->n};
}
/* Appends s[0..n); the first call allocates even for n = 0, so a rendered text is never NULL. */
static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom || (n == 0 && b->p)) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_s(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
/* Whether s lies inside the content of a message marked scaffold (its text is template text). */
static bool sb_scaffold(const sbuf *b, sv s) {
    for (int i = 0; b->scaffold && i < b->n_m; i++) {
        const char *c = b->m[i].content;
        if (b->scaffold[i] && c && s.p >= c && s.p + s.n <= c + strlen(c)) return true;
    }
    return false;
}
static void sb_v(sbuf *b, sv s) {                                   /* message data */
    size_t st = b->n;
    sb_put(b, s.p, s.n);
    if (!sb_scaffold(b, s)) sb_mark(b, st);
}
static void sb_d(sbuf *b, const char *s) { sb_v(b, sv_c(s)); }

/* ==== tojson (Python json.dumps(ensure_ascii=False) layout) ===================================*/
static void json_str(sbuf *b, const char *s) {
    sb_s(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': sb_s(b, "\\\""); break;
        case '\\': sb_s(b, "\\\\"); break;
        case '\n': sb_s(b, "\\n"); break;
        case '\r': sb_s(b, "\\r"); break;
        case '\t': sb_s(b, "\\t"); break;
        case '\b': sb_s(b, "\\b"); break;
        case '\f': sb_s(b, "\\f"); break;
        default:
            if (*p < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", *p); sb_s(b, esc); }
            else sb_put(b, (const char *)p, 1);
        }
    }
    sb_s(b, "\"");
}
static void json_num(sbuf *b, double d, bool python_str) {
    char t[40];
    if (d == floor(d) && fabs(d) < 1e16) snprintf(t, sizeof t, "%.0f", d);
    else if (!isfinite(d)) snprintf(t, sizeof t, "%s", isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
    else {
        for (int prec = 1; prec <= 17; prec++) {                /* shortest text that reads back */
            snprintf(t, sizeof t, "%.*g", prec, d);
            if (strtod(t, NULL) == d) break;
        }
        if (!strpbrk(t, ".en")) strcat(t, ".0");
    }
    (void)python_str;
    sb_s(b, t);
}
static void json_dump(sbuf *b, const cJSON *j) {
    if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
        const bool obj = cJSON_IsObject(j);
        sb_s(b, obj ? "{" : "[");
        const cJSON *c;
        bool first = true;
        cJSON_ArrayForEach(c, j) {
            if (!first) sb_s(b, ", ");
            first = false;
            if (obj) {
                json_str(b, c->string ? c->string : "");
                sb_s(b, ": ");
            }
            json_dump(b, c);
        }
        sb_s(b, obj ? "}" : "]");
    } else if (cJSON_IsString(j)) json_str(b, j->valuestring);
    else if (cJSON_IsNumber(j)) json_num(b, j->valuedouble, false);
    else if (cJSON_IsTrue(j)) sb_s(b, "true");
    else if (cJSON_IsFalse(j)) sb_s(b, "false");
    else sb_s(b, "null");
}
/* Jinja `x | string` of a JSON scalar, as Python's str() */
static void py_str(sbuf *b, const cJSON *j) {
    if (cJSON_IsString(j)) sb_s(b, j->valuestring);
    else if (cJSON_IsNumber(j)) json_num(b, j->valuedouble, true);
    else if (cJSON_IsTrue(j)) sb_s(b, "True");
    else if (cJSON_IsFalse(j)) sb_s(b, "False");
    else sb_s(b, "None");
}

/* ==== families ================================================================================*/
const char *chat_tmpl_name(chat_tmpl t) {
    switch (t) {
    case CHAT_TMPL_CHATML: return "chatml";
    case CHAT_TMPL_QWEN3: return "qwen3";
    case CHAT_TMPL_QWEN35: return "qwen35";
    }
    return "?";
}

int chat_tmpl_by_name(const char *name, chat_tmpl *out, tern_err *err) {
    if (!name) return tern_err_set(err, TERN_E_ARG, "chat template name is NULL");
    if (!strcmp(name, "chatml")) *out = CHAT_TMPL_CHATML;
    else if (!strcmp(name, "qwen3")) *out = CHAT_TMPL_QWEN3;
    else if (!strcmp(name, "qwen35") || !strcmp(name, "qwen3.5") || !strcmp(name, "bonsai")) *out = CHAT_TMPL_QWEN35;
    else return tern_err_set(err, TERN_E_UNSUPPORTED, "chat template '%s': expected chatml, qwen3 or qwen35", name);
    return TERN_OK;
}

int chat_tmpl_detect(const char *t, chat_tmpl *out, tern_err *err) {
    if (!t || !*t) { *out = CHAT_TMPL_CHATML; return TERN_OK; }
    sv s = sv_c(t);
    bool im = sv_find(s, "<|im_start|>") != NULL;
    if (im && sv_find(s, "<function=") && sv_find(s, "<tool_call>") && sv_find(s, "enable_thinking")) { *out = CHAT_TMPL_QWEN35; return TERN_OK; }
    if (im && sv_find(s, "reasoning_content") && sv_find(s, "enable_thinking") && sv_find(s, "<tool_call>\\n{\\\"name\\\"")) { *out = CHAT_TMPL_QWEN3; return TERN_OK; }
    /* plain ChatML: the im_start scaffolding and nothing else (no default system prompt, no tools
     * or thinking logic we would silently drop) */
    if (im && !sv_find(s, "<think>") && !sv_find(s, "tools") && !sv_find(s, "You are") && s.n < 600) { *out = CHAT_TMPL_CHATML; return TERN_OK; }
    char head[48];
    size_t k = 0;
    for (size_t i = 0; i < s.n && k + 1 < sizeof head; i++) head[k++] = (s.p[i] == '\n' || s.p[i] == '\r') ? ' ' : s.p[i];
    head[k] = 0;
    return tern_err_set(err, TERN_E_UNSUPPORTED, "unknown chat template (starts \"%s...\"): expected the ChatML, Qwen3 or Qwen3.5 family; choose one with --chat-template chatml|qwen3|qwen35", head);
}

/* ==== rendering ===============================================================================*/
typedef struct {
    sbuf b;
    const chat_msg *m;
    int n;
    const chat_opts *o;
    cJSON *tools;
    tern_err *err;
    int rc;
} rctx;

static int fail(rctx *c, int code, const char *what, int i) {
    if (!c->rc) c->rc = tern_err_set(c->err, code, "chat template: message %d: %s", i, what);
    return c->rc;
}
static sv content_of(const chat_msg *m) { return sv_c(m->content); }
static bool role_is(const chat_msg *m, const char *r) { return m->role && !strcmp(m->role, r); }

/* Parse an assistant message's tool_calls JSON (array expected). NULL with c->rc set on error. */
static cJSON *parse_calls(rctx *c, const chat_msg *m, int i) {
    cJSON *j = cJSON_Parse(m->tool_calls);
    if (!cJSON_IsArray(j)) { cJSON_Delete(j); fail(c, TERN_E_ARG, "tool_calls: expected a JSON array", i); return NULL; }
    return j;
}
static const cJSON *call_fn(const cJSON *tc) {                   /* tool_call.function if defined */
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
    return f && !cJSON_IsNull(f) ? f : tc;
}
static const char *call_name(const cJSON *f) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
    return cJSON_IsString(nm) ? nm->valuestring : "";
}

static void render_chatml(rctx *c) {
    for (int i = 0; i < c->n; i++) {
        sb_s(&c->b, "<|im_start|>"); sb_d(&c->b, c->m[i].role); sb_s(&c->b, "\n");
        sb_v(&c->b, content_of(&c->m[i])); sb_s(&c->b, "<|im_end|>\n");
    }
    if (c->o->add_generation_prompt) sb_s(&c->b, "<|im_start|>assistant\n");
}

/* Index of the last user turn that is not a bare <tool_response> (ns.last_query_index), or -1. */
static int last_query(rctx *c, bool trim) {
    for (int i = c->n - 1; i >= 0; i--) {
        if (!role_is(&c->m[i], "user")) continue;
        sv s = content_of(&c->m[i]);
        if (trim) s = sv_trim(s);
        if (!(sv_starts(s, "<tool_response>") && sv_ends(s, "</tool_response>"))) return i;
    }
    return -1;
}

/* The tools section of the Qwen3 and Qwen3.5 system turns, without the turn around it: a
 * header, one `tool | tojson` line per tool (message data: marked), a footer with the call
 * format. The templates' texts, byte for byte; chat_tools_section gives it to the server. */
static void render_tools(sbuf *b, chat_tmpl t, const cJSON *tools) {
    if (t == CHAT_TMPL_QWEN3)
        sb_s(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    else
        sb_s(b, "# Tools\n\nYou have access to the following functions:\n\n<tools>");
    const cJSON *x;
    cJSON_ArrayForEach(x, tools) { sb_s(b, "\n"); size_t st = b->n; json_dump(b, x); sb_mark(b, st); }
    if (t == CHAT_TMPL_QWEN3)
        sb_s(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                "\"arguments\": <args-json-object>}\n</tool_call>");
    else
        sb_s(b, "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
                "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
                "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
                "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
                "block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
                "specified\n- You may provide optional reasoning for your function call in natural language "
                "BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
                "question like normal with your current knowledge and do not tell the user about function "
                "calls\n</IMPORTANT>");
}

static void render_qwen3(rctx *c) {
    sbuf *b = &c->b;
    const chat_msg *m = c->m;
    const int n = c->n;
    if (c->tools && cJSON_GetArraySize(c->tools) > 0) {           /* "if tools": a non-empty list */
        sb_s(b, "<|im_start|>system\n");
        if (n > 0 && role_is(&m[0], "system")) { sb_v(b, content_of(&m[0])); sb_s(b, "\n\n"); }
        render_tools(b, CHAT_TMPL_QWEN3, c->tools);
        sb_s(b, "<|im_end|>\n");
    } else if (n > 0 && role_is(&m[0], "system")) {
        sb_s(b, "<|im_start|>system\n"); sb_v(b, content_of(&m[0])); sb_s(b, "<|im_end|>\n");
    }
    int lq = last_query(c, false);
    if (lq < 0) lq = n - 1;                                     /* namespace default */
    for (int i = 0; i < n && !c->rc; i++) {
        const chat_msg *msg = &m[i];
        if (role_is(msg, "user") || (role_is(msg, "system") && i > 0)) {
            sb_s(b, "<|im_start|>"); sb_d(b, msg->role); sb_s(b, "\n"); sb_v(b, content_of(msg)); sb_s(b, "<|im_end|>\n");
        } else if (role_is(msg, "assistant")) {
            sv content = content_of(msg), reasoning = sv_c("");
            if (msg->reasoning_content) reasoning = sv_c(msg->reasoning_content);
            else if (sv_find(content, "</think>")) {
                sv all = content;
                content = sv_lstrip_nl(sv_after_last(all, "</think>"));
                reasoning = sv_lstrip_nl(sv_after_last(sv_rstrip_nl(sv_before_first(all, "</think>")), "<think>"));
            }
            sb_s(b, "<|im_start|>assistant\n");
            if (i > lq && (i == n - 1 || !sv_empty(reasoning))) {
                sb_s(b, "<think>\n"); sb_v(b, sv_strip_nl(reasoning)); sb_s(b, "\n</think>\n\n"); sb_v(b, sv_lstrip_nl(content));
            } else sb_v(b, content);
            if (msg->tool_calls) {
                cJSON *calls = parse_calls(c, msg, i);
                if (!calls) return;
                const cJSON *tc;
                bool first = true;
                cJSON_ArrayForEach(tc, calls) {
                    if ((first && !sv_empty(content)) || !first) sb_s(b, "\n");
                    first = false;
                    const cJSON *f = call_fn(tc);
                    sb_s(b, "<tool_call>\n{\"name\": \""); sb_d(b, call_name(f)); sb_s(b, "\", \"arguments\": ");
                    const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
                    size_t st = b->n;
                    if (cJSON_IsString(args)) sb_s(b, args->valuestring);
                    else json_dump(b, args);
                    sb_mark(b, st);
                    sb_s(b, "}\n</tool_call>");
                }
                cJSON_Delete(calls);
            }
            sb_s(b, "<|im_end|>\n");
        } else if (role_is(msg, "tool")) {
            if (i == 0 || !role_is(&m[i - 1], "tool")) sb_s(b, "<|im_start|>user");
            sb_s(b, "\n<tool_response>\n"); sb_v(b, content_of(msg)); sb_s(b, "\n</tool_response>");
            if (i == n - 1 || !role_is(&m[i + 1], "tool")) sb_s(b, "<|im_end|>\n");
        } else if (!role_is(msg, "system")) {
            fail(c, TERN_E_ARG, "unknown role (expected system, user, assistant or tool)", i);
            return;
        }
    }
    if (c->o->add_generation_prompt) {
        sb_s(b, "<|im_start|>assistant\n");
        if (!c->o->enable_thinking) sb_s(b, "<think>\n\n</think>\n\n");
    }
}

static void render_qwen35(rctx *c) {
    sbuf *b = &c->b;
    const chat_msg *m = c->m;
    const int n = c->n;
    if (n == 0) { fail(c, TERN_E_ARG, "no messages provided", 0); return; }
    if (c->tools && cJSON_GetArraySize(c->tools) > 0) {           /* "if tools and tools is iterable" */
        sb_s(b, "<|im_start|>system\n");
        render_tools(b, CHAT_TMPL_QWEN35, c->tools);
        if (role_is(&m[0], "system")) {
            sv s = sv_trim(content_of(&m[0]));
            if (!sv_empty(s)) { sb_s(b, "\n\n"); sb_v(b, s); }
        }
        sb_s(b, "<|im_end|>\n");
    } else if (role_is(&m[0], "system")) {
        sb_s(b, "<|im_start|>system\n"); sb_v(b, sv_trim(content_of(&m[0]))); sb_s(b, "<|im_end|>\n");
    }
    int lq = last_query(c, true);
    if (lq < 0) { fail(c, TERN_E_ARG, "no user query found in messages", n - 1); return; }
    for (int i = 0; i < n && !c->rc; i++) {
        const chat_msg *msg = &m[i];
        sv content = sv_trim(content_of(msg));
        if (role_is(msg, "system")) {
            if (i != 0) { fail(c, TERN_E_ARG, "a system message must be at the beginning", i); return; }
        } else if (role_is(msg, "user")) {
            sb_s(b, "<|im_start|>user\n"); sb_v(b, content); sb_s(b, "<|im_end|>\n");
        } else if (role_is(msg, "assistant")) {
            sv reasoning = sv_c("");
            if (msg->reasoning_content) reasoning = sv_c(msg->reasoning_content);
            else if (sv_find(content, "</think>")) {
                sv all = content;
                reasoning = sv_lstrip_nl(sv_after_last(sv_rstrip_nl(sv_before_first(all, "</think>")), "<think>"));
                content = sv_lstrip_nl(sv_after_last(all, "</think>"));
            }
            reasoning = sv_trim(reasoning);
            sb_s(b, "<|im_start|>assistant\n");
            if (i > lq) { sb_s(b, "<think>\n"); sb_v(b, reasoning); sb_s(b, "\n</think>\n\n"); }
            sb_v(b, content);
            if (msg->tool_calls) {
                cJSON *calls = parse_calls(c, msg, i);
                if (!calls) return;
                const cJSON *tc;
                bool first = true;
                cJSON_ArrayForEach(tc, calls) {
                    const cJSON *f = call_fn(tc);
                    if (first) sb_s(b, !sv_empty(sv_trim(content)) ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
                    else sb_s(b, "\n<tool_call>\n<function=");
                    first = false;
                    sb_d(b, call_name(f)); sb_s(b, ">\n");
                    const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
                    cJSON *parsed = NULL;
                    if (cJSON_IsString(args)) {                  /* arguments given as JSON text */
                        parsed = cJSON_Parse(args->valuestring);
                        if (!cJSON_IsObject(parsed)) { cJSON_Delete(parsed); cJSON_Delete(calls); fail(c, TERN_E_ARG, "tool_calls: arguments is not a JSON object", i); return; }
                        args = parsed;
                    }
                    if (args && !cJSON_IsNull(args)) {
                        const cJSON *a;
                        cJSON_ArrayForEach(a, args) {
                            sb_s(b, "<parameter="); sb_d(b, a->string ? a->string : ""); sb_s(b, ">\n");
                            size_t st = b->n;
                            if (cJSON_IsObject(a) || cJSON_IsArray(a)) json_dump(b, a);
                            else py_str(b, a);
                            sb_mark(b, st);
                            sb_s(b, "\n</parameter>\n");
                        }
                    }
                    cJSON_Delete(parsed);
                    sb_s(b, "</function>\n</tool_call>");
                }
                cJSON_Delete(calls);
            }
            sb_s(b, "<|im_end|>\n");
        } else if (role_is(msg, "tool")) {
            if (i > 0 && !role_is(&m[i - 1], "tool")) sb_s(b, "<|im_start|>user");   /* loop.previtem */
            sb_s(b, "\n<tool_response>\n"); sb_v(b, content); sb_s(b, "\n</tool_response>");
            if (i == n - 1 || !role_is(&m[i + 1], "tool")) sb_s(b, "<|im_end|>\n");
        } else {
            fail(c, TERN_E_ARG, "unexpected message role (expected system, user, assistant or tool)", i);
            return;
        }
    }
    if (c->o->add_generation_prompt) {
        sb_s(b, "<|im_start|>assistant\n");
        sb_s(b, c->o->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    }
}

int chat_render(chat_tmpl t, const chat_msg *msgs, int n, const chat_opts *o, char **out, size_t *n_out,
                tern_err *err) {
    return chat_render_spans(t, msgs, n, o, out, n_out, NULL, NULL, err);
}

/* The tools JSON as an array, or NULL with err set: text that does not parse (or has bytes after
 * the value) named with the byte offset where parsing stopped, another JSON value by its kind. */
static cJSON *parse_tools(const char *json, tern_err *err) {
    if (!json) {
        tern_err_set(err, TERN_E_ARG, "chat template: tools: NULL, expected a JSON array");
        return NULL;
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(json, &end, true);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        const size_t off = at && at >= json ? (size_t)(at - json) : 0;
        tern_err_set(err, TERN_E_ARG, "chat template: tools: not JSON at byte %zu (of %zu), expected a JSON array", off,
                     strlen(json));
        return NULL;
    }
    if (!cJSON_IsArray(j)) {
        tern_err_set(err, TERN_E_ARG, "chat template: tools: a JSON %s, expected a JSON array",
                     cJSON_IsObject(j) ? "object" : cJSON_IsString(j) ? "string" : cJSON_IsNumber(j) ? "number" : "value");
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static int render_spans(chat_tmpl t, const chat_msg *msgs, const bool *scaffold, int n, const chat_opts *o, char **out,
                        size_t *n_out, tok_span **spans, int *n_spans, tern_err *err) {
    *out = NULL;
    if (n_out) *n_out = 0;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    chat_opts def = {true, true, NULL};
    if (!o) o = &def;
    if (n < 0 || (n > 0 && !msgs)) return tern_err_set(err, TERN_E_ARG, "chat_render: bad message array (n %d)", n);
    for (int i = 0; i < n; i++)
        if (!msgs[i].role) return tern_err_set(err, TERN_E_ARG, "chat template: message %d has no role", i);
    rctx c = {.m = msgs, .n = n, .o = o, .err = err};
    c.b.m = msgs;
    c.b.scaffold = scaffold;
    c.b.n_m = n;
    if (o->tools) {
        c.tools = parse_tools(o->tools, err);
        if (!c.tools) return TERN_E_ARG;              /* parse_tools's every failure */
    }
    sb_s(&c.b, "");   /* allocates: a render of nothing is "", never NULL */
    switch (t) {
    case CHAT_TMPL_CHATML: render_chatml(&c); break;
    case CHAT_TMPL_QWEN3: render_qwen3(&c); break;
    case CHAT_TMPL_QWEN35: render_qwen35(&c); break;
    default: c.rc = tern_err_set(err, TERN_E_ARG, "chat_render: unknown template family %d", (int)t);
    }
    cJSON_Delete(c.tools);
    if (!c.rc && c.b.oom) c.rc = tern_err_set(err, TERN_E_NOMEM, "chat template: out of memory");
    if (c.rc) { free(c.b.p); free(c.b.sp); return c.rc; }
    *out = c.b.p;
    if (n_out) *n_out = c.b.n;
    if (spans) { *spans = c.b.sp; *n_spans = c.b.n_sp; }
    else free(c.b.sp);
    return TERN_OK;
}

int chat_render_spans(chat_tmpl t, const chat_msg *msgs, int n, const chat_opts *o, char **out, size_t *n_out,
                      tok_span **spans, int *n_spans, tern_err *err) {
    return render_spans(t, msgs, NULL, n, o, out, n_out, spans, n_spans, err);
}

int chat_tmpl_resolve(const tok_vocab *v, const char *name, chat_tmpl *out, tern_err *err) {
    if (name && *name) return chat_tmpl_by_name(name, out, err);
    return chat_tmpl_detect(v ? tok_chat_template(v) : NULL, out, err);
}

int chat_tokenize(const tok_vocab *v, chat_tmpl t, const chat_msg *msgs, const bool *scaffold, int n,
                  const chat_opts *o, bool add_bos,
                  int32_t **ids, int *n_ids, tern_err *err) {
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    size_t len = 0;
    tok_span *sp = NULL;
    int nsp = 0;
    int rc = render_spans(t, msgs, scaffold, n, o, &text, &len, &sp, &nsp, err);
    if (rc) return rc;
    int need = 0;
    rc = tok_encode_spans(v, text, len, sp, nsp, add_bos, NULL, 0, &need, NULL);   /* count */
    if (rc == TERN_OK || rc == TERN_E_RANGE) {
        int32_t *buf = malloc(((size_t)need + 1) * sizeof *buf);
        if (!buf) rc = tern_err_set(err, TERN_E_NOMEM, "chat_tokenize: out of memory for %d tokens", need);
        else if ((rc = tok_encode_spans(v, text, len, sp, nsp, add_bos, buf, need, n_ids, err)) != TERN_OK) free(buf);
        else *ids = buf;
    } else rc = tok_encode_spans(v, text, len, sp, nsp, add_bos, NULL, 0, &need, err);   /* report */
    free(text);
    free(sp);
    return rc;
}

int chat_tools_section(chat_tmpl t, const char *tools_json, char **out, size_t *n_out, tern_err *err) {
    *out = NULL;
    *n_out = 0;
    if (t != CHAT_TMPL_QWEN3 && t != CHAT_TMPL_QWEN35)
        return tern_err_set(err, TERN_E_UNSUPPORTED, "chat template %s has no tools section (expected qwen3 or qwen35)",
                            chat_tmpl_name(t));
    cJSON *tools = parse_tools(tools_json, err);
    if (!tools) return TERN_E_ARG;                    /* parse_tools's every failure */
    sbuf b = {0};
    sb_s(&b, "");
    render_tools(&b, t, tools);
    cJSON_Delete(tools);
    free(b.sp);
    if (b.oom) { free(b.p); return tern_err_set(err, TERN_E_NOMEM, "chat template: out of memory"); }
    *out = b.p;
    *n_out = b.n;
    return TERN_OK;
}
