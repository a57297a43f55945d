/* info.h: the server's endpoints that run no generation, in llama-server's shapes: /tokenize,
 * /detokenize, /apply-template, /props, /slots, and one model of /v1/models/{id}. Each builds its
 * JSON answer (malloc'd text) or fills e (status, OpenAI error object fields) and returns NULL.
 * Uses tern.h and the request checks of api.h; no threads of its own. */
#ifndef TERN_SERVER_INFO_H
#define TERN_SERVER_INFO_H

#include "api.h"
#include "sched.h"
#include "tern.h"

/* POST /tokenize {"content": str, "add_special": bool (false), "parse_special": bool (true),
 * "with_pieces": bool (false)} -> {"tokens": [id, ...]}, or with_pieces [{"id", "piece"}, ...]
 * where a piece that is valid UTF-8 is a string and any other a list of its byte values. */
char *info_tokenize(const tern_model *m, const char *body, size_t len, srv_error *e);
/* POST /detokenize {"tokens": [id, ...]} -> {"content": text}: the pieces in order, control
 * tokens as their text, invalid UTF-8 replaced by U+FFFD. An id outside the vocabulary is 400. */
char *info_detokenize(const tern_model *m, const char *body, size_t len, srv_error *e);
/* POST /apply-template: a chat request's messages (and tools) -> {"prompt": text}, the prompt
 * /v1/chat/completions would evaluate for them, with the generation prompt appended. */
char *info_apply_template(const tern_model *m, const char *tmpl, srv_tools_fmt fmt, const char *body, size_t len,
                          srv_error *e);

/* What /props reports. */
typedef struct info_props_in {
    const char *model_name;
    const char *model_path;     /* as given to the server, or NULL */
    int n_ctx, n_slots;
    const char *tmpl;           /* --chat-template, or NULL: the file's */
} info_props_in;
/* GET /props: {"model_alias", "model_path", "total_slots", "chat_template", "build_info",
 * "default_generation_settings": {"n_ctx", "params": {sampling defaults}}, "modalities"}. */
char *info_props(const tern_model *m, const info_props_in *in);
/* GET /slots: one object per slot {"id", "n_ctx", "is_processing", "id_task", "n_prompt_tokens",
 * "n_prompt_tokens_processed", "n_decoded", "n_cached_tokens"}. */
char *info_slots(const srv_slot_info *si, int n);
/* GET /v1/models/{id}: the entry of /v1/models (list_json) whose id is id, else 404 (model_not_found). */
char *info_model(const char *list_json, const char *id, srv_error *e);

#endif /* TERN_SERVER_INFO_H */
