/* chat.h: chat-template rendering for the ChatML family (plain ChatML, Qwen3, Qwen3.5 / Bonsai).
 * Layer 6. Not a Jinja engine: each family's template is reproduced in C, output byte for byte
 * equal to what the reference templates render (../shared/data/qwen3-tokenizer/
 * Qwen-Qwen3-0.6B.jinja and Qwen3.5-4B.jinja) for the cases they cover: system/user/assistant/
 * tool turns, reasoning of earlier assistant turns dropped, tool calls, the tools section,
 * enable_thinking. Plain ChatML is llama.cpp's built-in "chatml". Needs cJSON (tools JSON). */
#ifndef TERN_TOKENIZER_CHAT_H
#define TERN_TOKENIZER_CHAT_H

#include "core/core.h"
#include "tokenizer/tok.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    CHAT_TMPL_CHATML = 0,  /* <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n */
    CHAT_TMPL_QWEN3 = 1,   /* Qwen3 (Qwen-Qwen3-0.6B.jinja): thinking off pre-fills <think>\n\n</think>\n\n */
    CHAT_TMPL_QWEN35 = 2,  /* Qwen3.5 / Bonsai 2 (Qwen3.5-4B.jinja): pre-fills <think>\n, or the empty block when off */
} chat_tmpl;

typedef struct chat_msg {
    const char *role;              /* "system", "user", "assistant", "tool" */
    const char *content;           /* UTF-8, NULL = "" */
    const char *reasoning_content; /* assistant: its reasoning (without <think> tags); NULL = absent
                                      (then it is split out of content at </think>, as the templates do) */
    const char *tool_calls;        /* assistant: JSON array of {"name", "arguments"} or
                                      {"type": "function", "function": {...}}; NULL = none */
} chat_msg;

typedef struct chat_opts {
    bool add_generation_prompt;    /* end with the assistant header (and the template's think pre-fill) */
    bool enable_thinking;          /* false: pre-fill the empty think block */
    const char *tools;             /* JSON array of tool (function) definitions, or NULL */
} chat_opts;

/* Family of a tokenizer.chat_template text. NULL or "" (a model without a template) gives
 * CHAT_TMPL_CHATML, as llama.cpp does. A template that is none of the known families gives
 * TERN_E_UNSUPPORTED with a message that quotes its start and says how to choose one. */
int chat_tmpl_detect(const char *template_text, chat_tmpl *out, tern_err *err);
/* "chatml", "qwen3", "qwen35" (also "qwen3.5", "bonsai") -> family; else TERN_E_UNSUPPORTED. */
int chat_tmpl_by_name(const char *name, chat_tmpl *out, tern_err *err);
const char *chat_tmpl_name(chat_tmpl t);

/* Render n messages. *out: malloc'd NUL-terminated text owned by the caller (free()); *n_out its
 * length. Errors: TERN_E_ARG (unknown role, NULL role, a system turn not first (qwen35), no user
 * turn (qwen35), invalid tools/tool_calls JSON), TERN_E_NOMEM. Linear in the input size. */
int chat_render(chat_tmpl t, const chat_msg *msgs, int n, const chat_opts *o, char **out, size_t *n_out,
                tern_err *err);

/* Same, and also returns the byte ranges of the output that hold message data (contents,
 * reasoning, roles, tool definitions and call arguments) rather than template scaffolding:
 * *spans (malloc'd, caller frees; sorted, disjoint; *n_spans of them). Tokenise the text with
 * tok_encode_spans(..., *spans, *n_spans, ...) so that special tokens are recognised only in the
 * scaffolding: a user typing <|im_end|> or <think> gets ordinary text tokens. */
int chat_render_spans(chat_tmpl t, const chat_msg *msgs, int n, const chat_opts *o, char **out, size_t *n_out,
                      tok_span **spans, int *n_spans, tern_err *err);

/* The tools section the qwen3 and qwen35 templates put in their system turn for a non-empty
 * tools_json (a JSON array of tool definitions), without the turn's scaffolding: the bytes
 * chat_render writes there. *out: malloc'd NUL-terminated (caller frees), *n_out its length.
 * Errors: TERN_E_UNSUPPORTED (ChatML has no tools section), TERN_E_ARG (tools_json not an array),
 * TERN_E_NOMEM. */
int chat_tools_section(chat_tmpl t, const char *tools_json, char **out, size_t *n_out, tern_err *err);

/* The family for a model: `name` (chatml, qwen3, qwen35) when given, else detected from the
 * vocabulary's tokenizer.chat_template (no template: ChatML). Errors as chat_tmpl_detect/by_name. */
int chat_tmpl_resolve(const tok_vocab *v, const char *name, chat_tmpl *out, tern_err *err);

/* Render and tokenise in one step, special tokens parsed only in the scaffolding (what a chat
 * program should feed the model). scaffold[i] (scaffold may be NULL) marks message i's content as
 * template text the caller rendered (special tokens parsed in it too). *ids: malloc'd (caller
 * frees), *n_ids of them; add_bos as in tok_encode. Errors: those of chat_render and
 * tok_encode_spans. */
int chat_tokenize(const tok_vocab *v, chat_tmpl t, const chat_msg *msgs, const bool *scaffold, int n,
                  const chat_opts *o, bool add_bos,
                  int32_t **ids, int *n_ids, tern_err *err);

#endif /* TERN_TOKENIZER_CHAT_H */
