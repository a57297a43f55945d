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
    char param[64];         /* offending field or "" */
    char message[320];      /* valid UTF-8 */
    const char *code;       /* OpenAI's machine-readable code ("model_not_found", static) or NULL */
} srv_error;
/* Fill e; returns false (so parsers can `return srv_fail(...)`). */
bool srv_fail(srv_error *e, int status, const char *type, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

enum { SRV_MAX_STOP = 16, SRV_MAX_STOP_LEN = 256, SRV_MAX_MESSAGES = 4096, SRV_MAX_TOP_LOGPROBS = 20, SRV_MAX_LOGIT_BIAS = 1024 };

typedef struct srv_request {
    srv_kind kind;
    tern_chat_msg *msgs;    /* chat: role and content strings owned by the request */
    bool *trusted;          /* msgs[i] is server-made scaffolding (the tools block) */
    int n_msgs;
    char *prompt;           /* completion as text, or NULL when given as token ids */
    int32_t *prompt_ids;    /* completion as token ids (n_prompt_ids > 0), used as given: no BOS added */
    int n_prompt_ids;
    bool prompt_ids_nested; /* the ids came as [[ids]]: errors name prompt[0][i] */
    bool parse_special;     /* completion text: control-token text becomes control tokens (default true,
                               as llama-server and vLLM); chat contents are always plain text */
    int max_tokens;         /* -1: until the end of generation or the context */
    tern_sampler_params sp;
    int32_t *bias_ids;      /* logit_bias: bias[i] added to the logit of bias_ids[i] (-inf: banned) */
    float *bias;
    int n_bias;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    bool stream, include_usage;
    bool enable_thinking;   /* chat_template_kwargs.enable_thinking (default true) */
    bool json_object;       /* response_format json_object: the reply (content) is one JSON object */
    int think_budget;       /* reasoning_budget / thinking_budget: tokens inside the think block
                               before it is closed (-1, the default: no budget) */
    bool has_tools;
    bool ignore_eos;        /* llama-server/vLLM ignore_eos: an end-of-generation token does not end the
                               reply (it is generated and counted; a control token shows no text), as tern run
                               --ignore-eos; the reply ends at max_tokens, a stop string or the context */
    bool cache_prompt;      /* llama-server's cache_prompt (default true): reuse the slot's cached prefix;
                               false evaluates the whole prompt, so the reply does not depend on what the
                               slot held (a hybrid model's reused state may carry other rounding) */
    bool logprobs;          /* chat: logprobs true; completions: logprobs N given (N >= 0) */
    int top_logprobs;       /* alternatives per token, 0..SRV_MAX_TOP_LOGPROBS */
    char *model;            /* as sent, or NULL */
} srv_request;

/* How tools and tool calls go into the chat prompt, by template family (spec section 7: ChatML
 * turns; the tool definitions inside <tools>...</tools> in the system turn, and instructions):
 * QWEN35: the Qwen3.5 / Bonsai 2 section and the <function=NAME><parameter=P> call markup, the
 *         client's system text after the section;
 * QWEN3:  the Qwen3 section and the {"name": ..., "arguments": ...} call markup, the client's
 *         system text before the section (the qwen3 template renders tool results itself);
 * CHATML: as QWEN3, and tool results are written as Qwen3 does (a user turn of <tool_response>
 *         blocks), so plain ChatML renders the same bytes as the Qwen3 template. */
typedef enum { SRV_TOOLS_QWEN35 = 0, SRV_TOOLS_QWEN3 = 1, SRV_TOOLS_CHATML = 2 } srv_tools_fmt;

/* Parse and validate a request body. On failure returns false with e set (status 400, the
 * offending field in e->param) and req holding nothing to free. Defaults: llama-server's
 * sampling defaults (temp 0.8, top_k 40, top_p 0.95, min_p 0.05), random seed, no limit. */
bool api_parse_request(srv_kind kind, const char *body, size_t len, srv_request *req, srv_error *e);
/* Same, with tools and tool calls written for the template family fmt (api_parse_request: QWEN35). */
bool api_parse_request_fmt(srv_kind kind, srv_tools_fmt fmt, const char *body, size_t len, srv_request *req, srv_error *e);
void api_request_free(srv_request *req);
/* The logit_bias ids of req against a vocabulary of n_vocab tokens: false with e set (400 naming
 * the first id outside it). */
bool api_check_logit_bias(const srv_request *req, int32_t n_vocab, srv_error *e);

/* ---- responses (malloc'd NUL-terminated JSON; NULL only when out of memory) ---------------- */
typedef struct srv_usage {
    int prompt_tokens, completion_tokens;
    int cached_tokens;      /* prompt tokens reused from the slot's cache */
} srv_usage;

/* Log-probabilities of one generated token: lp = log-softmax of the model's raw logits at that
 * position (before repetition penalty and temperature: what vLLM returns by default) for the
 * chosen token, and the n_top most likely tokens (descending, ties to the lower id). */
typedef struct srv_logprob {
    int32_t tok;
    float lp;
    int n_top;
    int32_t top_tok[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
} srv_logprob;

/* Fill e from n_vocab logits (NaN counts as -inf): log-softmax in double, the token's value and
 * the n_top largest. */
void api_logprob_compute(const float *logits, int32_t n_vocab, int32_t tok, int n_top, srv_logprob *e);

/* The "logprobs" object of a choice for entries e[0..n), as JSON text (malloc'd): chat
 * {"content": [{"token","logprob","bytes","top_logprobs": [...]}]}; completions (legacy)
 * {"tokens","token_logprobs","top_logprobs": [{text: lp}],"text_offset"}, where *text_offset is
 * the byte offset of the first token in the completion text (advanced past the entries). Token
 * texts are m's pieces (control tokens as their text), UTF-8 repaired; "bytes" are the raw bytes. */
char *api_logprobs_json(const tern_model *m, srv_kind kind, const srv_logprob *e, int n, size_t *text_offset);

/* llama-server's "timings" object, with the scheduler's chunking counts. */
typedef struct srv_timings {
    double ttft_ms;         /* from submission (queue wait included) to the first generated token */
    int prompt_n;           /* prompt tokens evaluated (not reused from the cache) */
    double prompt_ms;       /* from admission to the end of prefill */
    int predicted_n;
    double predicted_ms;    /* from the first to the last generated token */
    int prefill_chunks;     /* forward passes the prefill took */
    int decode_steps_in_prefill; /* batched decode steps of other streams between its first and last chunk */
} srv_timings;

char *api_error_json(const srv_error *e);
/* A request body as a JSON object, checked as every endpoint checks it: one JSON value and
 * nothing after it, an object, valid UTF-8 (the field named), no duplicate key (its path named),
 * no U+0000 in strings. NULL with e set (400) otherwise; the caller frees with cJSON_Delete. */
struct cJSON;
struct cJSON *api_parse_body(const char *body, size_t len, srv_error *e);
/* The "model" member of a request body, checked as api_parse_body checks the body: true with
 * *model a copy (the caller frees) or NULL when absent or null; false with e set (400: the body's
 * fault, or "'model' must be a string, got ...") or 500 (out of memory). */
bool api_body_model(const char *body, size_t len, char **model, srv_error *e);
/* A member of a JSON object, NULL when absent or JSON null ("not given"). */
const struct cJSON *api_field(const struct cJSON *o, const char *name);
/* What v is, for "got ..." in messages: a number as its JSON text ("-1", "0.5"), else its kind
 * ("a string", "an array", "null", ...). buf: 32 bytes, used for numbers. */
const char *api_got(const struct cJSON *v, char buf[32]);
/* 404 model_not_found naming id (OpenAI's shape for a model that is not served); returns false. */
bool api_model_not_found(srv_error *e, const char *id);
/* The compact text of root (malloc'd; NULL when out of memory), root freed. */
char *api_print_free(struct cJSON *root);
/* Whole responses. reasoning/tool_calls_json/logprobs_json/t may be NULL; finish: "stop",
 * "length", "tool_calls". logprobs_json: the choice's "logprobs" object (null if NULL). */
char *api_chat_response(const char *id, long created, const char *model, const char *content, size_t n_content,
                        const char *reasoning, size_t n_reasoning, const char *tool_calls_json, const char *finish,
                        const char *logprobs_json, const srv_usage *u, const srv_timings *t);
char *api_completion_response(const char *id, long created, const char *model, const char *text, size_t n_text,
                              const char *finish, const char *logprobs_json, const srv_usage *u, const srv_timings *t);
/* Stream chunks: a delta with role (first chunk), content and/or reasoning, tool calls, or a
 * finish reason (finish != NULL; t != NULL adds "timings" to it, as llama-server's last chunk).
 * usage != NULL: the usage-only chunk (empty choices). */
char *api_chat_chunk(const char *id, long created, const char *model, bool role, const char *content, size_t n_content,
                     const char *reasoning, size_t n_reasoning, const char *tool_calls_json, const char *finish,
                     const char *logprobs_json, const srv_usage *usage, const srv_timings *t);
char *api_completion_chunk(const char *id, long created, const char *model, const char *text, size_t n_text,
                           const char *finish, const char *logprobs_json, const srv_usage *usage, const srv_timings *t);

/* Copy at most n bytes of s into a fresh string, replacing invalid UTF-8 with U+FFFD. */
char *api_utf8_dup(const char *s, size_t n);
/* Offset of the first byte of s[0..n) that does not start a valid UTF-8 sequence (NUL counts as
 * invalid: it cuts C strings), or n. */
size_t api_utf8_bad_at(const char *s, size_t n);

#endif /* TERN_SERVER_API_H */
