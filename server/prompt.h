/* prompt.h: chat prompts as token ids, with control tokens recognised only in the template's
 * scaffolding (a user typing "<|im_end|>" or "<think>" gets ordinary text tokens). Shared by
 * `tern chat` and `tern serve`. Uses only tern.h. */
#ifndef TERN_SERVER_PROMPT_H
#define TERN_SERVER_PROMPT_H

#include "tern.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable id array (ids owned by the struct; free with prompt_ids_free). */
typedef struct prompt_ids {
    int32_t *ids;
    int n, cap;
} prompt_ids;
void prompt_ids_free(prompt_ids *p);
/* Append n ids; TERN_E_NOMEM on allocation failure (never when room for them was reserved). */
int prompt_ids_push(prompt_ids *p, const int32_t *ids, int n);
/* Room for n more ids, so that pushes of up to n ids in all allocate nothing; TERN_E_NOMEM. */
int prompt_ids_reserve(prompt_ids *p, int n);

/* Tokenise len bytes of text and append the ids to out. parse_special as tern_tokenize; add_bos
 * prepends BOS only when the model asks for one (tern_model_info.add_bos). */
int prompt_tokenize_append(const tern_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                           prompt_ids *out, tern_err *err);

/* Render msgs with the chat template (tmpl as tern_chat_apply: NULL = the model's) and append
 * the token ids to out: tern_chat_tokenize, control tokens parsed only in the scaffolding. add_bos:
 * as prompt_tokenize_append. If text is not NULL, *text receives the rendered prompt (malloc'd,
 * NUL-terminated; caller frees). Errors: those of tern_chat_tokenize and tern_chat_apply,
 * TERN_E_ARG (a message without role or content), TERN_E_NOMEM. */
int prompt_chat_append(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs,
                       bool add_generation_prompt, bool enable_thinking, bool add_bos, prompt_ids *out,
                       char **text, tern_err *err);
/* Same; trusted[i] (if trusted is not NULL) marks a content that is itself scaffolding (a tools
 * block the server renders), tokenised with control tokens parsed (tern_chat_tokenize_ex). */
int prompt_chat_append_ex(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, const bool *trusted,
                          int n_msgs, bool add_generation_prompt, bool enable_thinking, bool add_bos, prompt_ids *out,
                          char **text, tern_err *err);

/* The text the template puts after an assistant message's content to close the turn (ChatML:
 * "<|im_end|>\n"), as ids appended to out. Used to continue a conversation whose reply was
 * generated in place (the KV cache keeps the reply as generated). */
int prompt_chat_close_assistant(const tern_model *m, const char *tmpl, prompt_ids *out, tern_err *err);

/* The chat template family that tmpl (NULL: the model's; ChatML if it has none) renders, told
 * apart through tern_chat_apply on one user turn: Qwen3.5 opens the reply with "<think>\n" when
 * thinking is on; Qwen3 pre-fills the empty "<think>\n\n</think>\n\n" only when it is off; plain
 * ChatML does neither. Returns PROMPT_FAMILY_*, or a negative TERN_E_* (an unknown template). */
enum { PROMPT_FAMILY_CHATML = 0, PROMPT_FAMILY_QWEN3 = 1, PROMPT_FAMILY_QWEN35 = 2 };
int prompt_chat_family(const tern_model *m, const char *tmpl, tern_err *err);

/* The id of a single control token given by its text ("<think>"), or -1 if the text is not one
 * token of the vocabulary. */
int32_t prompt_special_id(const tern_model *m, const char *text);

#endif /* TERN_SERVER_PROMPT_H */
