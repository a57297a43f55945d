/* prompt.c: chat prompts as token ids with control tokens parsed only in the template
 * scaffolding (a user typing "<|im_end|>" gets text tokens, never a control token): the library's
 * tern_chat_tokenize_ex, which knows from the renderer which bytes are message data. Growable id
 * arrays, the closing of an assistant turn, the template family. Only tern.h is used. */
#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prompt_ids_free(prompt_ids *p) {
    if (!p) return;
    free(p->ids);
    p->ids = NULL;
    p->n = p->cap = 0;
}

static int ids_reserve(prompt_ids *p, int extra) {
    if (extra < 0 || p->n > INT32_MAX - extra) return TERN_E_NOMEM;
    const int need = p->n + extra;
    if (need <= p->cap) return TERN_OK;
    int cap = p->cap ? p->cap : 256;
    while (cap < need) cap = cap > INT32_MAX / 2 ? need : cap * 2;
    int32_t *q = realloc(p->ids, (size_t)cap * sizeof *q);
    if (!q) return TERN_E_NOMEM;
    p->ids = q;
    p->cap = cap;
    return TERN_OK;
}

int prompt_ids_reserve(prompt_ids *p, int n) { return ids_reserve(p, n); }

int prompt_ids_push(prompt_ids *p, const int32_t *ids, int n) {
    if (ids_reserve(p, n) != TERN_OK) return TERN_E_NOMEM;
    memcpy(p->ids + p->n, ids, (size_t)n * sizeof *ids);
    p->n += n;
    return TERN_OK;
}

int prompt_tokenize_append(const tern_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                           prompt_ids *out, tern_err *err) {
    if (add_bos) {
        tern_model_info info;
        tern_model_get_info(m, &info);
        add_bos = info.add_bos && info.bos >= 0;
    }
    if (len == 0 && !add_bos) return TERN_OK;
    if (len > (size_t)INT32_MAX / 2) return tern_err_set(err, TERN_E_RANGE, "prompt: text of %zu bytes is too long", len);
    int cap = (int)len + 8, n = 0;                    /* usually enough; else the exact count */
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = ids_reserve(out, cap);
        if (rc != TERN_OK) return tern_err_set(err, rc, "prompt: out of memory for %d token ids", cap);
        tern_err e = {0};
        rc = tern_tokenize(m, text, len, add_bos, parse_special, out->ids + out->n, cap, &n, &e);
        if (rc == TERN_OK) break;
        if (rc != TERN_E_RANGE || n <= cap || attempt == 1) return tern_err_set(err, rc, "%s", e.msg);
        cap = n;
    }
    out->n += n;
    return TERN_OK;
}

/* Render with tern_chat_apply into a malloc'd string, growing the buffer as needed. */
static int render(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs, bool gen,
                  bool think, char **out, size_t *n_out, tern_err *err) {
    size_t cap = 4096, need = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        char *buf = malloc(cap);
        if (!buf) return tern_err_set(err, TERN_E_NOMEM, "prompt: out of memory rendering the chat template");
        tern_err e = {0};
        int rc = tern_chat_apply(m, tmpl, msgs, n_msgs, gen, think, buf, cap, &need, &e);
        if (rc == TERN_OK) {
            *out = buf;
            *n_out = need;
            return TERN_OK;
        }
        free(buf);
        if (rc != TERN_E_RANGE || need + 1 <= cap) return tern_err_set(err, rc, "%s", e.msg);
        cap = need + 1;
    }
    return tern_err_set(err, TERN_E_RANGE, "prompt: chat template output kept growing (%zu bytes)", need);
}

int prompt_chat_append_ex(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, const bool *trusted,
                          int n_msgs, bool add_generation_prompt, bool enable_thinking, bool add_bos, prompt_ids *out,
                          char **text, tern_err *err) {
    if (text) *text = NULL;
    if (n_msgs < 0 || (n_msgs > 0 && !msgs)) return tern_err_set(err, TERN_E_ARG, "prompt: bad message list");
    for (int i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return tern_err_set(err, TERN_E_ARG, "prompt: message %d has no role or content", i);
    int need = 0, rc = TERN_OK;
    for (int attempt = 0; attempt < 2; attempt++) {  /* the count, then the ids */
        tern_err e = {0};
        const int cap = attempt ? need : 0;
        if (attempt && (rc = ids_reserve(out, cap)) != TERN_OK)
            return tern_err_set(err, rc, "prompt: out of memory for %d token ids", cap);
        rc = tern_chat_tokenize_ex(m, tmpl, msgs, trusted, n_msgs, add_generation_prompt, enable_thinking, add_bos,
                                   attempt ? out->ids + out->n : NULL, cap, &need, &e);
        if (rc != TERN_OK && !(rc == TERN_E_RANGE && attempt == 0 && need > 0)) return tern_err_set(err, rc, "%s", e.msg);
    }
    if (text) {
        size_t n_text = 0;
        if ((rc = render(m, tmpl, msgs, n_msgs, add_generation_prompt, enable_thinking, text, &n_text, err)) != TERN_OK)
            return rc;
    }
    out->n += need;
    return TERN_OK;
}

int prompt_chat_append(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, int n_msgs,
                       bool add_generation_prompt, bool enable_thinking, bool add_bos, prompt_ids *out,
                       char **text, tern_err *err) {
    return prompt_chat_append_ex(m, tmpl, msgs, NULL, n_msgs, add_generation_prompt, enable_thinking, add_bos, out,
                                 text, err);
}

int prompt_chat_close_assistant(const tern_model *m, const char *tmpl, prompt_ids *out, tern_err *err) {
    static const char mark[] = "TERNCLOSEMARKER7f3aZ";
    const tern_chat_msg msgs[2] = {{"user", "hi"}, {"assistant", mark}};
    char *r = NULL;
    size_t rlen = 0;
    int rc = render(m, tmpl, msgs, 2, false, true, &r, &rlen, err);
    if (rc != TERN_OK) return rc;
    const char *hit = strstr(r, mark);
    if (!hit) {
        free(r);
        return tern_err_set(err, TERN_E_FORMAT, "prompt: the chat template dropped the assistant message");
    }
    const char *tail = hit + sizeof mark - 1;
    rc = prompt_tokenize_append(m, tail, rlen - (size_t)(tail - r), false, true, out, err);
    free(r);
    return rc;
}

int32_t prompt_special_id(const tern_model *m, const char *text) {
    int32_t ids[4];
    int n = 0;
    tern_err e = {0};
    if (tern_tokenize(m, text, strlen(text), false, true, ids, 4, &n, &e) != TERN_OK || n != 1) return -1;
    return ids[0];
}

static bool ends_with(const char *s, size_t n, const char *tail) {
    const size_t k = strlen(tail);
    return n >= k && memcmp(s + n - k, tail, k) == 0;
}

int prompt_chat_family(const tern_model *m, const char *tmpl, tern_err *err) {
    const tern_chat_msg msg = {"user", "hi"};
    char *on = NULL, *off = NULL;
    size_t n_on = 0, n_off = 0;
    int rc = render(m, tmpl, &msg, 1, true, true, &on, &n_on, err);
    if (rc == TERN_OK) rc = render(m, tmpl, &msg, 1, true, false, &off, &n_off, err);
    if (rc == TERN_OK)
        rc = ends_with(on, n_on, "<think>\n") ? PROMPT_FAMILY_QWEN35
           : ends_with(off, n_off, "<think>\n\n</think>\n\n") ? PROMPT_FAMILY_QWEN3 : PROMPT_FAMILY_CHATML;
    free(on);
    free(off);
    return rc;
}
