/* api.h: the OpenAI wire format: request bodies parsed and validated into srv_request, and the
 * JSON texts of responses, stream chunks and error objects. cJSON underneath; no model, no
 * threads. Source of truth: OpenAI's API reference for /v1/chat/completions and /v1/completions
 * (object shapes, error object), llama-server's extensions (top_k, min_p, repeat_penalty,
 * chat_template_kwargs.enable_thinking, reasoning_content). */
#ifndef TERN_SERVER_API_H
#define TERN_SERVER_API_H

#include "tern.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { SRV_CHAT = 0, SRV_COMPLETION = 1 } srv_kind;

/* An HTTP error in OpenAI's shape: {"error":{"message","type","param","code"}}. */
typedef struct srv_error {
    int status;             /* HTTP status (400, 401, 404, 413, 429, 500, 503) */
    const char *type;       /* "invalid_request_error", "authentication_error", ... (static) */
    char param[48];         /* offending field or "" */
    char message[320];      /* valid UTF-8 */
} srv_error;
/* Fill e; returns false (so parsers can `return srv_fail(...)`). */
bool srv_fail(srv_error *e, int status, const char *type, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

enum { SRV_MAX_STOP = 16, SRV_MAX_STOP_LEN = 256, SRV_MAX_MESSAGES = 4096 };

typedef struct srv_request {
    srv_kind kind;
    tern_chat_msg *msgs;    /* chat: role and content strings owned by the request */
    bool *trusted;          /* msgs[i] is server-made scaffolding (the tools block) */
    int n_msgs;
    char *prompt;           /* completion */
    int max_tokens;         /* -1: until the end of generation or the context */
    tern_sampler_params sp;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    bool stream, include_usage;
    bool enable_thinking;   /* chat_template_kwargs.enable_thinking (default true) */
    bool has_tools;
    char *model;            /* as sent, or NULL */
} srv_request;

/* Parse and validate a request body. On failure returns false with e set (status 400, the
 * offending field in e->param) and req holding nothing to free. Defaults: llama-server's
 * sampling defaults (temp 0.8, top_k 40, top_p 0.95, min_p 0.05), random seed, no limit. */
bool api_parse_request(srv_kind kind, const char *body, size_t len, srv_request *req, srv_error *e);
void api_request_free(srv_request *req);

/* ---- responses (malloc'd NUL-terminated JSON; NULL only when out of memory) ---------------- */
typedef struct srv_usage {
    int prompt_tokens, completion_tokens;
    int cached_tokens;      /* prompt tokens reused from the slot's cache */
} srv_usage;

char *api_error_json(const srv_error *e);
/* Whole responses. reasoning/tool_calls_json may be NULL; finish: "stop", "length", "tool_calls". */
char *api_chat_response(const char *id, long created, const char *model, const char *content, size_t n_content,
                        const char *reasoning, size_t n_reasoning, const char *tool_calls_json, const char *finish,
                        const srv_usage *u);
char *api_completion_response(const char *id, long created, const char *model, const char *text, size_t n_text,
                              const char *finish, const srv_usage *u);
/* Stream chunks: a delta with role (first chunk), content and/or reasoning, tool calls, or a
 * finish reason (finish != NULL). usage != NULL: the usage-only chunk (empty choices). */
char *api_chat_chunk(const char *id, long created, const char *model, bool role, const char *content, size_t n_content,
                     const char *reasoning, size_t n_reasoning, const char *tool_calls_json, const char *finish,
                     const srv_usage *usage);
char *api_completion_chunk(const char *id, long created, const char *model, const char *text, size_t n_text,
                           const char *finish, const srv_usage *usage);
char *api_models_json(const char *model_id, long created);

/* Copy at most n bytes of s into a fresh string, replacing invalid UTF-8 with U+FFFD. */
char *api_utf8_dup(const char *s, size_t n);

/* The tools block the Qwen3.5 template puts in the system turn (spec section 7), from the
 * request's "tools" array text; malloc'd. */
char *api_tools_block(const char *tools_json);

#endif /* TERN_SERVER_API_H */
