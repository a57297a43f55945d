/* reply.c: reasoning/content split, stop strings with hold-back, tool-call parsing (reply.h).
 * Invariant: content[0..content_sent) and reasoning[0..reasoning_sent) have been handed to the
 * client; content_sent never passes a byte that could begin a stop string or the tool markup,
 * so a stop string is never emitted, even partly. The held-back tail starts where a stop string
 * would start: a UTF-8 lead byte, so what is sent stays valid UTF-8. */
#include "reply.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char TOOL_OPEN[] = "<tool_call>";
static const char TOOL_CLOSE[] = "</tool_call>";

bool sbuf_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

void sbuf_free(sbuf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

void reply_init(srv_reply *r, char *const *stop, int n_stop, bool tools) {
    memset(r, 0, sizeof *r);
    r->stop = stop;
    r->n_stop = n_stop;
    r->tools = tools;
    sbuf_add(&r->content, "", 0);
    sbuf_add(&r->reasoning, "", 0);
}

void reply_free(srv_reply *r) {
    sbuf_free(&r->content);
    sbuf_free(&r->reasoning);
    free(r->pieces);
    r->pieces = NULL;
    r->n_pieces = r->cap_pieces = r->piece_next = 0;
}

static bool piece_push(srv_reply *r, bool think, size_t end, int tok_end) {
    if (r->n_pieces == r->cap_pieces) {
        int cap = r->cap_pieces ? 2 * r->cap_pieces : 64;
        reply_piece *p = realloc(r->pieces, (size_t)cap * sizeof *p);
        if (!p) return false;
        r->pieces = p;
        r->cap_pieces = cap;
    }
    r->pieces[r->n_pieces++] = (reply_piece){.end = end, .tok_end = tok_end, .think = think};
    return true;
}

static size_t max_pattern_len(const srv_reply *r) {
    size_t mx = r->tools ? sizeof TOOL_OPEN - 1 : 0;
    for (int i = 0; i < r->n_stop; i++) {
        size_t l = strlen(r->stop[i]);
        if (l > mx) mx = l;
    }
    return mx;
}

bool reply_add(srv_reply *r, bool think, const char *text, size_t n) {
    return reply_add_tok(r, think, text, n, r->n_pieces + 1);
}

bool reply_add_tok(srv_reply *r, bool think, const char *text, size_t n, int tok_end) {
    if (n == 0) return true;
    if (think) return sbuf_add(&r->reasoning, text, n) && piece_push(r, true, r->reasoning.n, tok_end);
    if (r->stopped) return true;                      /* nothing after a stop string counts */
    const size_t old = r->content.n;
    if (!sbuf_add(&r->content, text, n) || !piece_push(r, false, r->content.n, tok_end)) return false;
    if (r->tool_started) return true;                 /* tool markup: collected, not matched */
    const size_t mx = max_pattern_len(r);
    const size_t from = old > mx ? old - mx + 1 : 0;  /* a match must end in the new text */
    const char *base = r->content.p + from;
    const size_t len = r->content.n - from;
    size_t best = (size_t)-1;
    for (int i = 0; i < r->n_stop; i++) {
        const char *hit = memmem(base, len, r->stop[i], strlen(r->stop[i]));
        if (hit && (size_t)(hit - r->content.p) < best) best = (size_t)(hit - r->content.p);
    }
    size_t tool = (size_t)-1;
    if (r->tools) {
        const char *hit = memmem(base, len, TOOL_OPEN, sizeof TOOL_OPEN - 1);
        if (hit) tool = (size_t)(hit - r->content.p);
    }
    if (tool != (size_t)-1 && tool <= best) {
        r->tool_started = true;
        r->tool_pos = tool;
    } else if (best != (size_t)-1) {
        r->stopped = true;
        r->content.n = best;                          /* drop the stop string and what follows */
        r->content.p[best] = '\0';
    }
    return true;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of pat. */
static size_t partial_suffix(const char *s, size_t n, const char *pat) {
    const size_t pl = strlen(pat);
    if (pl == 0) return 0;
    for (size_t k = pl - 1 < n ? pl - 1 : n; k > 0; k--)
        if (memcmp(s + n - k, pat, k) == 0) return k;
    return 0;
}

/* Where the content that may be sent now ends (see reply_take). */
static size_t content_limit(const srv_reply *r, bool final) {
    size_t safe = r->content.n;
    if (r->tool_started) safe = r->tool_pos;
    else if (!final && !r->stopped) {
        size_t hold = 0;
        for (int i = 0; i < r->n_stop; i++) {
            size_t k = partial_suffix(r->content.p, r->content.n, r->stop[i]);
            if (k > hold) hold = k;
        }
        if (r->tools) {
            size_t k = partial_suffix(r->content.p, r->content.n, TOOL_OPEN);
            if (k > hold) hold = k;
        }
        safe = r->content.n - hold;
    }
    return safe;
}

void reply_take(srv_reply *r, bool final, const char **content, size_t *n_content, const char **reasoning,
                size_t *n_reasoning) {
    size_t safe = content_limit(r, final);
    if (safe < r->content_sent) safe = r->content_sent;
    *content = r->content.p + r->content_sent;
    *n_content = safe - r->content_sent;
    r->content_sent = safe;
    *reasoning = r->reasoning.p + r->reasoning_sent;
    *n_reasoning = r->reasoning.n - r->reasoning_sent;
    r->reasoning_sent = r->reasoning.n;
}

bool reply_next(srv_reply *r, bool final, bool *think, const char **text, size_t *n, int *tok_end) {
    while (r->piece_next < r->n_pieces) {
        const reply_piece pc = r->pieces[r->piece_next];
        if (pc.think) {
            r->piece_next++;
            if (pc.end <= r->reasoning_sent) continue;
            *think = true;
            *text = r->reasoning.p + r->reasoning_sent;
            *n = pc.end - r->reasoning_sent;
            *tok_end = pc.tok_end;
            r->reasoning_sent = pc.end;
            return true;
        }
        /* hard: the content's end is final (a stop string, tool markup, or generation over) */
        const bool hard = final || r->stopped || r->tool_started;
        const size_t limit = content_limit(r, final);
        size_t end = pc.end < limit ? pc.end : limit;
        const size_t start = r->content_sent;
        if (end < start) end = start;
        const bool whole = end >= pc.end || hard;
        if (whole) r->piece_next++;
        if (end > start) {
            *think = false;
            *text = r->content.p + start;
            *n = end - start;
            *tok_end = pc.tok_end;
            r->content_sent = end;
            return true;
        }
        if (!whole) return false;                     /* held back: it may still begin a stop string */
    }
    return false;
}

int reply_tok_kept(const srv_reply *r) {
    if (!r->stopped) return INT_MAX;
    size_t start = 0;                                 /* where the next content piece begins */
    int kept = 0;
    for (int i = 0; i < r->n_pieces; i++) {
        const reply_piece *pc = &r->pieces[i];
        if (!pc->think) {
            if (start >= r->content.n) break;         /* begins at or past the cut: none of it is sent */
            start = pc->end;
        }
        kept = pc->tok_end;
    }
    return kept;
}

/* ---- tool calls ------------------------------------------------------------------------------ */

static char *dup_range(const char *a, const char *b) {
    char *s = malloc((size_t)(b - a) + 1);
    if (!s) return NULL;
    memcpy(s, a, (size_t)(b - a));
    s[b - a] = '\0';
    return s;
}

/* A parameter value: JSON if the whole value parses as a JSON number, literal, array or
 * object; otherwise the text as a string (the Qwen3.5 template writes strings raw). */
static cJSON *param_value(const char *v) {
    cJSON *j = cJSON_Parse(v);
    if (j && !cJSON_IsString(j)) return j;
    cJSON_Delete(j);
    return cJSON_CreateString(v);
}

/* Qwen3.5: <function=NAME>\n<parameter=P>\nVALUE\n</parameter>...</function> */
static cJSON *parse_xml_call(const char *a, const char *b) {
    const char *f = memmem(a, (size_t)(b - a), "<function=", 10);
    if (!f) return NULL;
    const char *name0 = f + 10, *name1 = memchr(name0, '>', (size_t)(b - name0));
    if (!name1 || name1 == name0) return NULL;
    cJSON *call = cJSON_CreateObject(), *args = cJSON_CreateObject();
    char *name = dup_range(name0, name1);
    cJSON_AddStringToObject(call, "name", name ? name : "");
    free(name);
    const char *p = name1 + 1;
    for (;;) {
        const char *q = memmem(p, (size_t)(b - p), "<parameter=", 11);
        if (!q) break;
        const char *k0 = q + 11, *k1 = memchr(k0, '>', (size_t)(b - k0));
        if (!k1) break;
        const char *v0 = k1 + 1;
        const char *v1 = memmem(v0, (size_t)(b - v0), "</parameter>", 12);
        const char *next = v1 ? v1 + 12 : b;
        if (!v1) {                                     /* unterminated: up to </function> or the end */
            const char *fe = memmem(v0, (size_t)(b - v0), "</function>", 11);
            v1 = fe ? fe : b;
            next = v1;
        }
        if (v0 < v1 && *v0 == '\n') v0++;             /* the template puts the value on its own lines */
        if (v1 > v0 && v1[-1] == '\n') v1--;
        char *key = dup_range(k0, k1), *val = dup_range(v0, v1);
        if (key && val) cJSON_AddItemToObject(args, key, param_value(val));
        free(key);
        free(val);
        p = next;
    }
    char *args_text = cJSON_PrintUnformatted(args);
    cJSON_AddStringToObject(call, "arguments", args_text ? args_text : "{}");
    free(args_text);
    cJSON_Delete(args);
    return call;
}

/* Qwen3: {"name": NAME, "arguments": {...}} */
static cJSON *parse_json_call(const char *a, const char *b) {
    char *s = dup_range(a, b);
    if (!s) return NULL;
    cJSON *j = cJSON_Parse(s);
    free(s);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!cJSON_IsString(name)) {
        cJSON_Delete(j);
        return NULL;
    }
    cJSON *call = cJSON_CreateObject();
    cJSON_AddStringToObject(call, "name", name->valuestring);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
    char *args_text = args ? (cJSON_IsString(args) ? strdup(args->valuestring) : cJSON_PrintUnformatted(args)) : NULL;
    cJSON_AddStringToObject(call, "arguments", args_text ? args_text : "{}");
    free(args_text);
    cJSON_Delete(j);
    return call;
}

char *reply_tool_calls_json(const srv_reply *r, const char *id_prefix) {
    if (!r->tool_started) return NULL;
    const char *p = r->content.p + r->tool_pos, *end = r->content.p + r->content.n;
    cJSON *arr = cJSON_CreateArray();
    int n = 0;
    for (;;) {
        const char *o = memmem(p, (size_t)(end - p), TOOL_OPEN, sizeof TOOL_OPEN - 1);
        if (!o) break;
        const char *a = o + sizeof TOOL_OPEN - 1;
        const char *c = memmem(a, (size_t)(end - a), TOOL_CLOSE, sizeof TOOL_CLOSE - 1);
        const char *b = c ? c : end;
        cJSON *fn = parse_xml_call(a, b);
        if (!fn) fn = parse_json_call(a, b);
        if (fn) {
            cJSON *call = cJSON_CreateObject();
            char id[96];
            snprintf(id, sizeof id, "%s_%d", id_prefix ? id_prefix : "call", n++);
            cJSON_AddStringToObject(call, "id", id);
            cJSON_AddStringToObject(call, "type", "function");
            cJSON_AddItemToObject(call, "function", fn);
            cJSON_AddItemToArray(arr, call);
        }
        p = c ? c + sizeof TOOL_CLOSE - 1 : end;
    }
    char *out = n ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    return out;
}
