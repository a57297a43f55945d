/* chat_apply.c: tern_chat_apply (tern.h) over the tokenizer's chat-template renderer
 * (src/tokenizer/chat.h): the family comes from the name given, else from the GGUF's
 * tokenizer.chat_template (ChatML when the model has none, as llama.cpp); an unknown template or
 * name is TERN_E_UNSUPPORTED with the renderer's message. Kept apart from engine.c (owner: model);
 * it may move there. */
#include "tern.h"

#include "core/core.h"
#include "model/model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tok.h"

#include <stdlib.h>
#include <string.h>

int tern_chat_apply(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs,
                    bool add_generation_prompt, bool enable_thinking, char *out, size_t cap, size_t *n_out,
                    tern_err *err) {
    if (n_out) *n_out = 0;
    if (!m || !n_out || (n_msgs > 0 && !msgs) || n_msgs < 0 || (cap > 0 && !out))
        return tern_err_set(err, TERN_E_ARG, "tern_chat_apply: bad arguments (model %p, %d messages)", (const void *)m, n_msgs);
    chat_tmpl t;
    int rc = tmpl ? chat_tmpl_by_name(tmpl, &t, err) : chat_tmpl_detect(tok_chat_template(m->vocab), &t, err);
    if (rc != TERN_OK) return rc;
    chat_msg *cm = calloc((size_t)(n_msgs ? n_msgs : 1), sizeof *cm);
    if (!cm) return tern_err_set(err, TERN_E_NOMEM, "tern_chat_apply: out of memory for %d messages", n_msgs);
    for (int i = 0; i < n_msgs; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content;
    }
    const chat_opts o = {.add_generation_prompt = add_generation_prompt, .enable_thinking = enable_thinking, .tools = NULL};
    char *text = NULL;
    size_t n = 0;
    rc = chat_render(t, cm, n_msgs, &o, &text, &n, err);
    free(cm);
    if (rc != TERN_OK) return rc;
    *n_out = n;
    if (n + 1 > cap) {
        free(text);
        return tern_err_set(err, TERN_E_RANGE, "tern_chat_apply: the prompt needs %zu bytes + NUL, the buffer holds %zu", n, cap);
    }
    memcpy(out, text, n + 1);
    free(text);
    return TERN_OK;
}
