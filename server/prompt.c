/* prompt.c: chat prompts as token ids with control tokens parsed only in the template
 * scaffolding (issue 6: a user typing "<|im_end|>" gets text tokens, never a control token).
 * Method: render the conversation with every content replaced by a marker that carries a
 * per-call nonce, then tokenise the text between markers with control-token parsing and each
 * content without. The markers have no leading or trailing whitespace, so a template that trims
 * content leaves them intact. Only tern.h is used. */
#include "prompt.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    if (len > (size_t)INT32_MAX / 2) return srv_err_set(err, TERN_E_RANGE, "prompt: text of %zu bytes is too long", len);
    int cap = (int)len + 8, n = 0;                    /* usually enough; else the exact count */
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = ids_reserve(out, cap);
        if (rc != TERN_OK) return srv_err_set(err, rc, "prompt: out of memory for %d token ids", cap);
        tern_err e = {0};
        rc = tern_tokenize(m, text, len, add_bos, parse_special, out->ids + out->n, cap, &n, &e);
        if (rc == TERN_OK) break;
        if (rc != TERN_E_RANGE || n <= cap || attempt == 1) return srv_err_set(err, rc, "%s", e.msg);
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
        if (!buf) return srv_err_set(err, TERN_E_NOMEM, "prompt: out of memory rendering the chat template");
        tern_err e = {0};
        int rc = tern_chat_apply(m, tmpl, msgs, n_msgs, gen, think, buf, cap, &need, &e);
        if (rc == TERN_OK) {
            *out = buf;
            *n_out = need;
            return TERN_OK;
        }
        free(buf);
        if (rc != TERN_E_RANGE || need + 1 <= cap) return srv_err_set(err, rc, "%s", e.msg);
        cap = need + 1;
    }
    return srv_err_set(err, TERN_E_RANGE, "prompt: chat template output kept growing (%zu bytes)", need);
}

static atomic_uint_fast64_t marker_counter;

static bool is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

/* Content i as inserted: verbatim, or trimmed of ASCII whitespace (as Jinja's |trim). */
static void content_span(const char *c, bool trim, const char **p, size_t *n) {
    size_t len = strlen(c), a = 0;
    if (trim) {
        while (a < len && is_ws(c[a])) a++;
        while (len > a && is_ws(c[len - 1])) len--;
    }
    *p = c + a;
    *n = len - a;
}

/* Walks the marker render r: calls piece(scaffold) and content(idx) in order. With ids == NULL
 * it only assembles the text into buf (if not NULL) and returns its length through *n_text. */
static int walk(const tern_model *m, const char *r, size_t rlen, const char *nonce, const tern_chat_msg *msgs,
                int n_msgs, const bool *trusted, bool trim, bool add_bos, prompt_ids *ids, char *buf, size_t *n_text,
                tern_err *err) {
    const size_t nonce_len = strlen(nonce);
    size_t pos = 0, n = 0;
    bool first = true;
    for (;;) {
        const char *hit = strstr(r + pos, nonce);
        const size_t end = hit ? (size_t)(hit - r) : rlen;
        if (end > pos || (first && ids)) {            /* scaffolding: control tokens parsed */
            if (ids) {
                int rc = prompt_tokenize_append(m, r + pos, end - pos, add_bos && first, true, ids, err);
                if (rc != TERN_OK) return rc;
            }
            if (buf) memcpy(buf + n, r + pos, end - pos);
            n += end - pos;
            first = false;
        }
        if (!hit) break;
        char *after = NULL;
        long idx = strtol(hit + nonce_len, &after, 10);
        if (after == hit + nonce_len || *after != 'Z' || idx < 0 || idx >= n_msgs)
            return srv_err_set(err, TERN_E_FORMAT, "prompt: the chat template altered a message marker");
        const char *c;
        size_t clen;
        content_span(msgs[idx].content, trim, &c, &clen);
        if (ids) {
            int rc = prompt_tokenize_append(m, c, clen, add_bos && first, trusted && trusted[idx], ids, err);
            if (rc != TERN_OK) return rc;
        }
        first = false;
        if (buf) memcpy(buf + n, c, clen);
        n += clen;
        pos = (size_t)(after + 1 - r);
    }
    *n_text = n;
    return TERN_OK;
}

int prompt_chat_append_ex(const tern_model *m, const char *tmpl, const tern_chat_msg *msgs, const bool *trusted,
                          int n_msgs, bool add_generation_prompt, bool enable_thinking, bool add_bos, prompt_ids *out,
                          char **text, tern_err *err) {
    if (text) *text = NULL;
    if (n_msgs < 0 || (n_msgs > 0 && !msgs)) return srv_err_set(err, TERN_E_ARG, "prompt: bad message list");
    /* marker: "TERNMSG" nonce "x" index "Z": the nonce makes it unguessable by content */
    char nonce[48];
    snprintf(nonce, sizeof nonce, "TERNMSG%016llx%08llxx",
             (unsigned long long)(atomic_fetch_add(&marker_counter, 1) * 0x9e3779b97f4a7c15ULL ^ (uintptr_t)out),
             (unsigned long long)time(NULL) & 0xffffffffULL);
    tern_chat_msg *mk = calloc((size_t)(n_msgs ? n_msgs : 1), sizeof *mk);
    char *marks = calloc((size_t)(n_msgs ? n_msgs : 1), 64);
    char *r = NULL, *real = NULL, *a = NULL;
    size_t rlen = 0, real_len = 0, alen = 0;
    int rc = TERN_OK;
    if (!mk || !marks) {
        rc = srv_err_set(err, TERN_E_NOMEM, "prompt: out of memory");
        goto done;
    }
    size_t total = 0;
    for (int i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            rc = srv_err_set(err, TERN_E_ARG, "prompt: message %d has no role or content", i);
            goto done;
        }
        snprintf(marks + 64 * i, 64, "%s%dZ", nonce, i);
        mk[i].role = msgs[i].role;
        mk[i].content = marks + 64 * i;
        total += strlen(msgs[i].content);
    }
    rc = render(m, tmpl, mk, n_msgs, add_generation_prompt, enable_thinking, &r, &rlen, err);
    if (rc == TERN_OK) rc = render(m, tmpl, msgs, n_msgs, add_generation_prompt, enable_thinking, &real, &real_len, err);
    if (rc != TERN_OK) goto done;
    /* which insertion reproduces the template's own rendering: verbatim or trimmed content */
    a = malloc(rlen + total + 1);
    if (!a) {
        rc = srv_err_set(err, TERN_E_NOMEM, "prompt: out of memory");
        goto done;
    }
    bool trim = false;
    rc = walk(m, r, rlen, nonce, msgs, n_msgs, trusted, false, add_bos, NULL, a, &alen, err);
    if (rc != TERN_OK) goto done;
    if (alen != real_len || memcmp(a, real, alen) != 0) {
        rc = walk(m, r, rlen, nonce, msgs, n_msgs, trusted, true, add_bos, NULL, a, &alen, err);
        if (rc != TERN_OK) goto done;
        trim = alen == real_len && memcmp(a, real, alen) == 0;
        if (!trim) rc = walk(m, r, rlen, nonce, msgs, n_msgs, trusted, false, add_bos, NULL, a, &alen, err);
        if (rc != TERN_OK) goto done;
    }
    rc = walk(m, r, rlen, nonce, msgs, n_msgs, trusted, trim, add_bos, out, NULL, &alen, err);
    if (rc != TERN_OK) goto done;
    if (text) {
        a[alen] = '\0';
        *text = a;
        a = NULL;
    }
done:
    free(a);
    free(real);
    free(r);
    free(marks);
    free(mk);
    return rc;
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
        return srv_err_set(err, TERN_E_FORMAT, "prompt: the chat template dropped the assistant message");
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
