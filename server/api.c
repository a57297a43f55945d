/* api.c: OpenAI-compatible request parsing/validation and response JSON (api.h).
 * Validation happens here, once, at the boundary: every field has its type and range checked
 * and a failure names the field (e->param) with a message that says what was expected. Text
 * that goes back to the client passes through api_utf8_dup (invalid bytes -> U+FFFD), so every
 * JSON text produced is valid UTF-8 (cJSON escapes control characters). */
#include "api.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool srv_fail(srv_error *e, int status, const char *type, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->code = NULL;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    char raw[sizeof e->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    char *clean = api_utf8_dup(raw, strlen(raw));
    snprintf(e->message, sizeof e->message, "%s", clean ? clean : "error");
    /* snprintf may cut a multi-byte character: drop a trailing partial sequence */
    size_t n = strlen(e->message);
    size_t k = n;
    while (k > 0 && ((unsigned char)e->message[k - 1] & 0xc0) == 0x80) k--;
    if (k > 0 && (unsigned char)e->message[k - 1] >= 0xc0) {
        unsigned char lead = (unsigned char)e->message[k - 1];
        size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
        if (n - (k - 1) < want) e->message[k - 1] = '\0';
    }
    free(clean);
    return false;
}

/* ---- UTF-8 ----------------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 if invalid (RFC 3629:
 * no overlongs, no surrogates, max U+10FFFF). */
static size_t utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return c ? 1 : 0;                   /* NUL is replaced too (C strings) */
    size_t len;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    unsigned cp = c & (0xff >> (len + 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

char *api_utf8_dup(const char *s, size_t n) {
    char *out = malloc(n * 3 + 1);                    /* worst case: every byte -> U+FFFD */
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_valid_len((const unsigned char *)s + i, n - i);
        if (l == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        }
    }
    out[o] = '\0';
    return out;
}

/* ---- Python-style JSON (what the template's tojson prints) -------------------------------- */

static bool pj_add(char **buf, size_t *n, size_t *cap, const char *s, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        while (c < *n + len + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return false;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *n, s, len);
    *n += len;
    (*buf)[*n] = '\0';
    return true;
}

/* json.dumps(x, ensure_ascii=False) separators ", " and ": ", keys in document order. */
static bool pj_print(const cJSON *j, char **buf, size_t *n, size_t *cap) {
    if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
        const bool obj = cJSON_IsObject(j);
        if (!pj_add(buf, n, cap, obj ? "{" : "[", 1)) return false;
        for (const cJSON *c = j->child; c; c = c->next) {
            if (obj) {
                cJSON *key = cJSON_CreateString(c->string);
                char *k = cJSON_PrintUnformatted(key);
                cJSON_Delete(key);
                bool ok = k && pj_add(buf, n, cap, k, strlen(k)) && pj_add(buf, n, cap, ": ", 2);
                free(k);
                if (!ok) return false;
            }
            if (!pj_print(c, buf, n, cap)) return false;
            if (c->next && !pj_add(buf, n, cap, ", ", 2)) return false;
        }
        return pj_add(buf, n, cap, obj ? "}" : "]", 1);
    }
    if (cJSON_IsNumber(j)) {                          /* Python's repr: the shortest text that reads back */
        char t[64];
        double v = j->valuedouble;
        if (v == floor(v) && fabs(v) < 1e16) snprintf(t, sizeof t, "%.0f", v);
        else {
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(t, sizeof t, "%.*g", prec, v);
                if (strtod(t, NULL) == v) break;
            }
            if (!strpbrk(t, ".en")) strcat(t, ".0");
        }
        return pj_add(buf, n, cap, t, strlen(t));
    }
    if (!j) return pj_add(buf, n, cap, "null", 4);
    char *s = cJSON_PrintUnformatted(j);             /* strings, true, false, null */
    bool ok = s && pj_add(buf, n, cap, s, strlen(s));
    free(s);
    return ok;
}

/* ---- request parsing --------------------------------------------------------------------------- */

/* What a JSON value is, for "got ..." in messages: "null", "a string", "an array", ... */
static const char *json_kind(const cJSON *v) {
    if (!v) return "nothing";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

static const cJSON *field(const cJSON *root, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    return cJSON_IsNull(f) ? NULL : f;                /* null means "not given" */
}

const cJSON *api_field(const cJSON *o, const char *name) { return field(o, name); }

/* v as a JSON reader would write it back: an integer as all its digits (never 1e+11), anything
 * else in the fewest digits that read back to the same double. Into buf (32 bytes). */
static const char *num_text(double v, char buf[32]) {
    if (v == floor(v) && fabs(v) < 1e18) snprintf(buf, 32, "%.0f", v);
    else {
        snprintf(buf, 32, "%.15g", v);
        if (strtod(buf, NULL) != v) snprintf(buf, 32, "%.17g", v);
    }
    return buf;
}

const char *api_got(const cJSON *v, char buf[32]) {
    return cJSON_IsNumber(v) ? num_text(v->valuedouble, buf) : json_kind(v);
}

/* A number field in [lo, hi] (an integer when integer): the message says what, expected and got. */
static bool get_num(const cJSON *root, const char *name, bool integer, double lo, double hi, double *out, srv_error *e) {
    const cJSON *f = field(root, name);
    if (!f) return true;
    const char *what = integer ? "an integer" : "a number";
    char a[32], b[32], g[32];
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) || (integer && f->valuedouble != floor(f->valuedouble))) {
        const bool num = cJSON_IsNumber(f);
        return srv_fail(e, 400, "invalid_request_error", name, "'%s' must be %s in [%s, %s], got %s%s", name, what,
                        num_text(lo, a), num_text(hi, b), num ? "" : json_kind(f),
                        num ? num_text(f->valuedouble, g) : "");
    }
    if (f->valuedouble < lo || f->valuedouble > hi)   /* past 2^53 the value shown is the one read, maybe not the one sent */
        return srv_fail(e, 400, "invalid_request_error", name, "'%s' must be %s in [%s, %s], got %s%s", name, what,
                        num_text(lo, a), num_text(hi, b), num_text(f->valuedouble, g),
                        integer && fabs(f->valuedouble) >= 9007199254740992.0 ? " (as read: past 2^53 a JSON number "
                                                                                "does not hold every integer)" : "");
    *out = f->valuedouble;
    return true;
}

static bool get_number(const cJSON *root, const char *name, double lo, double hi, double *out, srv_error *e) {
    return get_num(root, name, false, lo, hi, out, e);
}

static bool get_int(const cJSON *root, const char *name, double lo, double hi, double *out, srv_error *e) {
    return get_num(root, name, true, lo, hi, out, e);
}

/* "'PARAM' must be EXPECTED, got KIND" (400, the field in e->param); returns false. */
static bool bad_type(srv_error *e, const char *param, const char *expected, const cJSON *got) {
    char g[32];
    return srv_fail(e, 400, "invalid_request_error", param, "'%s' must be %s, got %s", param, expected, api_got(got, g));
}

/* A completion prompt given as token ids (OpenAI's and vLLM's array of integers) into
 * r->prompt_ids. Several prompts at once (an array of arrays or of strings) are batching, which
 * tern serve does not do: 400 saying to send one prompt per request. Ids are checked against the
 * vocabulary later (api_check_prompt_ids), when the model is known. */
static bool parse_prompt_ids(const cJSON *p, const char *name, srv_request *r, srv_error *e) {
    const int n = cJSON_GetArraySize(p);
    if (n == 0) return srv_fail(e, 400, "invalid_request_error", "prompt", "'%s' is an empty array; expected token ids", name);
    if (n > (1 << 24)) return srv_fail(e, 400, "invalid_request_error", "prompt", "'%s' has %d token ids, at most %d", name, n, 1 << 24);
    r->prompt_ids = malloc(sizeof *r->prompt_ids * (size_t)n);
    if (!r->prompt_ids) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, p) {
        if (i == 0 && (cJSON_IsArray(v) || cJSON_IsString(v)))   /* a list of prompts (one is unwrapped before) */
            return srv_fail(e, 400, "invalid_request_error", "prompt",
                            n > 1 ? "'%s' holds several prompts (element 0 is %s); send one prompt per request"
                                  : "'%s' nests its prompt one level too deep (element 0 is %s); expected a string, "
                                    "token ids, or a list holding one of those",
                            name, json_kind(v));
        /* the range first: a double past int64 (1e300, or 1e400 read as inf) has no integer
         * conversion, so it is never converted; NaN fails the range too */
        const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        char g[32];
        if (!(d >= 0 && d <= 2147483647.0 && d == floor(d)))
            return srv_fail(e, 400, "invalid_request_error", "prompt",
                            "'%s[%d]' must be a token id (an integer in 0..2147483647), got %s", name, i, api_got(v, g));
        r->prompt_ids[i++] = (int32_t)d;
    }
    r->n_prompt_ids = n;
    return true;
}

/* logit_bias (OpenAI): an object {"TOKEN_ID": BIAS}, the id a decimal integer >= 0 written without
 * leading zeros (so two keys never name one token: the JSON parser refuses repeated keys), the bias a
 * number in -100..100 added to the token's logit before sampling, or false (llama-server's ban:
 * -inf). At most SRV_MAX_LOGIT_BIAS entries. Ids are checked against the vocabulary when the
 * model is known (api_check_logit_bias); null and {} set nothing. */
static bool parse_logit_bias(const cJSON *root, srv_request *r, srv_error *e) {
    const cJSON *f = field(root, "logit_bias");
    if (!f) return true;
    if (!cJSON_IsObject(f)) return bad_type(e, "logit_bias", "an object {\"token id\": bias}", f);
    const int n = cJSON_GetArraySize(f);
    if (n == 0) return true;
    if (n > SRV_MAX_LOGIT_BIAS)
        return srv_fail(e, 400, "invalid_request_error", "logit_bias", "'logit_bias' has %d entries, at most %d", n,
                        SRV_MAX_LOGIT_BIAS);
    r->bias_ids = malloc(sizeof *r->bias_ids * (size_t)n);
    r->bias = malloc(sizeof *r->bias * (size_t)n);
    if (!r->bias_ids || !r->bias) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, f) {
        const char *k = v->string;
        const size_t nk = strlen(k);
        if (!nk || strspn(k, "0123456789") != nk || (k[0] == '0' && nk > 1))   /* one spelling per id: no "0300" */
            return srv_fail(e, 400, "invalid_request_error", "logit_bias",
                            "'logit_bias' key '%.40s' must be a token id (a decimal integer >= 0 without leading zeros)", k);
        const long long id = nk <= 10 ? strtoll(k, NULL, 10) : -1;
        if (id < 0 || id > 2147483647LL)
            return srv_fail(e, 400, "invalid_request_error", "logit_bias",
                            "'logit_bias' key '%.40s' is not a token of the model (token ids are below 2^31)", k);
        char g[32];
        if (cJSON_IsFalse(v)) r->bias[i] = -INFINITY;
        else if (cJSON_IsNumber(v) && v->valuedouble >= -100.0 && v->valuedouble <= 100.0) r->bias[i] = (float)v->valuedouble;
        else
            return srv_fail(e, 400, "invalid_request_error", "logit_bias",
                            "'logit_bias[\"%s\"]' must be a number in [-100, 100] or false (a ban), got %s", k, api_got(v, g));
        r->bias_ids[i++] = (int32_t)id;
    }
    r->n_bias = n;
    return true;
}

bool api_check_logit_bias(const srv_request *r, int32_t n_vocab, srv_error *e) {
    int n_ban = 0;   /* the keys are distinct ids (one spelling each, no duplicate keys) */
    for (int i = 0; i < r->n_bias; i++) {
        if (r->bias_ids[i] >= n_vocab)
            return srv_fail(e, 400, "invalid_request_error", "logit_bias",
                            "'logit_bias' key '%d' is not a token of the model: the vocabulary has ids 0..%d", (int)r->bias_ids[i],
                            (int)n_vocab - 1);
        n_ban += r->bias[i] == -INFINITY;
    }
    if (n_ban == n_vocab)
        return srv_fail(e, 400, "invalid_request_error", "logit_bias",
                        "'logit_bias' bans every token of the model (%d); leave at least one token allowed", (int)n_vocab);
    return true;
}

/* A boolean field of root; path names it in errors ("stream", "stream_options.include_usage"). */
static bool get_bool(const cJSON *root, const char *name, const char *path, bool *out, srv_error *e) {
    const cJSON *f = field(root, name);
    if (!f) return true;
    if (!cJSON_IsBool(f)) return bad_type(e, path, "true or false", f);
    *out = cJSON_IsTrue(f);
    return true;
}

/* OpenAI fields that would change the answer and that tern does not implement: 400 naming the
 * field instead of a reply that silently ignores it (as presence_penalty). Their neutral values
 * pass: n 1, best_of 1, echo false and suffix "" (null: not given). */
static bool refuse_unsupported(const cJSON *root, srv_error *e) {
    double d = 1;
    char g[32], a[32];
    if (!get_int(root, "n", 1, 2147483647.0, &d, e)) return false;
    if (d != 1)
        return srv_fail(e, 400, "invalid_request_error", "n", "'n' is not supported above 1 (one choice per request), got %s",
                        num_text(d, g));
    d = 1;
    if (!get_int(root, "best_of", 1, 2147483647.0, &d, e)) return false;
    if (d != 1)
        return srv_fail(e, 400, "invalid_request_error", "best_of",
                        "'best_of' is not supported above 1 (one completion per request), got %s", num_text(d, g));
    bool echo = false;
    if (!get_bool(root, "echo", "echo", &echo, e)) return false;
    if (echo)
        return srv_fail(e, 400, "invalid_request_error", "echo",
                        "'echo': true is not supported (the prompt is not repeated in the reply); send false or leave it out");
    const cJSON *f = field(root, "suffix");
    if (f && !cJSON_IsString(f)) return bad_type(e, "suffix", "a string", f);
    if (f && *f->valuestring)
        return srv_fail(e, 400, "invalid_request_error", "suffix",
                        "'suffix' is not supported (no text after the insertion point); send \"\" or leave it out");
    d = 0;                                            /* llama-server's token probabilities */
    if (!get_int(root, "n_probs", 0, 2147483647.0, &d, e)) return false;
    if (d != 0)
        return srv_fail(e, 400, "invalid_request_error", "n_probs",
                        "'n_probs' is not supported: ask for 'logprobs' (chat: \"logprobs\": true, \"top_logprobs\": N; "
                        "completions: \"logprobs\": N), N at most %d", SRV_MAX_TOP_LOGPROBS);
    f = field(root, "response_format");               /* structured output: text, or one JSON object */
    if (f && !cJSON_IsObject(f)) return bad_type(e, "response_format", "an object {\"type\": \"text\"}", f);
    const cJSON *rt = f ? cJSON_GetObjectItemCaseSensitive(f, "type") : NULL;
    if (f && !cJSON_IsString(rt)) return bad_type(e, "response_format.type", "a string", rt);
    if (f && strcmp(rt->valuestring, "text") && strcmp(rt->valuestring, "json_object"))
        return srv_fail(e, 400, "invalid_request_error", "response_format",
                        "'response_format' type '%.40s' is not supported%s; send "
                        "{\"type\": \"json_object\"}, {\"type\": \"text\"} or leave it out", rt->valuestring,
                        strcmp(rt->valuestring, "json_schema") == 0 ? " (a JSON schema is not enforced)" : "");
    f = field(root, "grammar");                       /* llama-server's GBNF grammar */
    if (f && !cJSON_IsString(f)) return bad_type(e, "grammar", "a string", f);
    if (f && *f->valuestring)
        return srv_fail(e, 400, "invalid_request_error", "grammar",
                        "'grammar' is not supported (no grammar-constrained decoding); send \"\" or leave it out");
    f = field(root, "json_schema");                   /* llama-server's schema (even {} constrains to JSON) */
    if (f)
        return srv_fail(e, 400, "invalid_request_error", "json_schema",
                        "'json_schema' is not supported (output is not constrained to a schema); leave it out");
    /* vLLM's constrained decoding, llama-server's sampler order: refused whenever given */
    static const struct { const char *name, *what; } constrained[] = {
        {"guided_json", "output is not constrained to a schema"},
        {"guided_regex", "output is not constrained to a regular expression"},
        {"guided_choice", "output is not constrained to a list of choices"},
        {"guided_grammar", "no grammar-constrained decoding"},
        {"structured_outputs", "output is not constrained"},
        {"allowed_token_ids", "the vocabulary is not restricted"},
        {"samplers", "the sampler chain and its order are fixed"},
    };
    for (size_t i = 0; i < sizeof constrained / sizeof constrained[0]; i++)
        if (field(root, constrained[i].name))
            return srv_fail(e, 400, "invalid_request_error", constrained[i].name, "'%s' is not supported (%s); leave it out",
                            constrained[i].name, constrained[i].what);
    /* vLLM's token lists: an empty list is neutral */
    static const struct { const char *name, *what; } lists[] = {
        {"bad_words", "words are not banned from the reply"},
        {"stop_token_ids", "generation does not stop at given token ids; use 'stop' with text"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        f = field(root, lists[i].name);
        if (f && !cJSON_IsArray(f)) return bad_type(e, lists[i].name, "an array", f);
        if (f && f->child)
            return srv_fail(e, 400, "invalid_request_error", lists[i].name, "'%s' is not supported (%s); send [] or leave it out",
                            lists[i].name, lists[i].what);
    }
    f = field(root, "top_n_sigma");                   /* llama-server's: a value <= 0 switches it off */
    if (f && !cJSON_IsNumber(f)) return bad_type(e, "top_n_sigma", "a number", f);
    if (f && f->valuedouble > 0)
        return srv_fail(e, 400, "invalid_request_error", "top_n_sigma",
                        "'top_n_sigma' is not supported (top-n-sigma sampling is not implemented), got %s; send -1 or leave it out",
                        num_text(f->valuedouble, g));
    /* llama-server's and vLLM's other samplers: a number whose neutral value switches them off */
    static const struct { const char *name, *what; double neutral; } knobs[] = {
        {"typical_p", "locally typical sampling is not implemented", 1},
        {"mirostat", "Mirostat sampling is not implemented", 0},
        {"min_tokens", "end-of-generation is not held back for a minimum length", 0},
        {"repetition_penalty", "vLLM's penalty over the prompt and the whole reply; use repeat_penalty, llama.cpp's over the last repeat_last_n tokens", 1},
        {"dry_multiplier", "DRY sampling is not implemented", 0},
        {"xtc_probability", "XTC sampling is not implemented", 0},
        {"dynatemp_range", "dynamic temperature is not implemented", 0},
        {"length_penalty", "vLLM's beam-search length penalty; there is no beam search", 1},
    };
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        f = field(root, knobs[i].name);
        if (!f) continue;
        if (!cJSON_IsNumber(f)) return bad_type(e, knobs[i].name, "a number", f);
        if (f->valuedouble != knobs[i].neutral)
            return srv_fail(e, 400, "invalid_request_error", knobs[i].name, "'%s' is not supported (%s), got %s; send %s or leave it out",
                            knobs[i].name, knobs[i].what, num_text(f->valuedouble, g), num_text(knobs[i].neutral, a));
    }
    return true;
}

/* Message content: a string, null, or an array of {"type":"text","text":...} parts. */
static bool get_content(const cJSON *msg, int i, char **out, srv_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    const cJSON *c = field(msg, "content");
    const cJSON *role = field(msg, "role");
    if (!c && !(cJSON_IsString(role) && strcmp(role->valuestring, "assistant") == 0))   /* as OpenAI: only an */
        return srv_fail(e, 400, "invalid_request_error", param,                         /* assistant may omit it */
                        "'%s' is required for a '%.32s' message (a string or an array of text parts), got %s", param,
                        cJSON_IsString(role) ? role->valuestring : "?",
                        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(msg, "content")) ? "null" : "no field");
    if (!c) {
        *out = strdup("");
        return *out ? true : srv_fail(e, 500, "server_error", NULL, "out of memory");
    }
    if (cJSON_IsString(c)) {
        *out = strdup(c->valuestring);
        return *out ? true : srv_fail(e, 500, "server_error", NULL, "out of memory");
    }
    if (!cJSON_IsArray(c)) return bad_type(e, param, "a string, null or an array of text parts", c);
    size_t n = 0;
    int k = 0;
    for (const cJSON *p = c->child; p; p = p->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        char pk[64];
        snprintf(pk, sizeof pk, "messages[%d].content[%d]", i, k);
        if (!cJSON_IsObject(p)) return bad_type(e, pk, "a text part {\"type\": \"text\", \"text\": string}", p);
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0)
            return srv_fail(e, 400, "invalid_request_error", pk,
                            "'%s' must be a text part {\"type\": \"text\", \"text\": string}, got type %s%.40s%s", pk,
                            cJSON_IsString(type) ? "'" : "", cJSON_IsString(type) ? type->valuestring : json_kind(type),
                            cJSON_IsString(type) ? "'" : "");
        if (!cJSON_IsString(text)) {
            snprintf(pk, sizeof pk, "messages[%d].content[%d].text", i, k);
            return bad_type(e, pk, "a string", text);
        }
        n += strlen(text->valuestring);
    }
    char *s = malloc(n + 1);
    if (!s) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    size_t o = 0;
    for (const cJSON *p = c->child; p; p = p->next) {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        memcpy(s + o, t, strlen(t));
        o += strlen(t);
    }
    s[o] = '\0';
    *out = s;
    return true;
}

/* Assistant tool calls in the history, written back in the Qwen3.5 markup after the content. */
static bool append_tool_calls(const cJSON *msg, int i, srv_tools_fmt fmt, char **content, srv_error *e) {
    const cJSON *calls = field(msg, "tool_calls");
    if (!calls) return true;
    char param[64];
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(calls)) return bad_type(e, param, "an array of tool calls", calls);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    bool ok = pj_add(&buf, &n, &cap, *content, strlen(*content));
    bool first = true;
    int k = 0;
    for (const cJSON *c = calls->child; ok && c; c = c->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsObject(c)) {
            free(buf);
            snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", i, k);
            return bad_type(e, param, "an object {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", c);
        }
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
        if (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function"))) {   /* the only kind of call */
            free(buf);
            snprintf(param, sizeof param, "messages[%d].tool_calls[%d].type", i, k);
            if (cJSON_IsString(type))
                return srv_fail(e, 400, "invalid_request_error", param, "'%s' must be \"function\", got '%.40s'", param,
                                type->valuestring);
            return bad_type(e, param, "\"function\"", type);
        }
        if (!cJSON_IsString(name)) {
            free(buf);
            snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.name", i, k);
            return bad_type(e, param, "a string", name);
        }
        if (args && !cJSON_IsNull(args) && !cJSON_IsString(args) && !cJSON_IsObject(args)) {
            free(buf);
            snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.arguments", i, k);
            return bad_type(e, param, "a string (the arguments as JSON text) or an object", args);
        }
        if (fmt == SRV_TOOLS_QWEN35 && cJSON_IsString(args)) {   /* written as <parameter=KEY> entries */
            cJSON *a = cJSON_Parse(args->valuestring);
            const bool obj = cJSON_IsObject(a);
            cJSON_Delete(a);
            if (!obj) {
                free(buf);
                snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.arguments", i, k);
                return srv_fail(e, 400, "invalid_request_error", param,
                                "'%s' must be the JSON text of an object (the template writes each member as a parameter), got '%.60s'",
                                param, args->valuestring);
            }
        }
        if (fmt != SRV_TOOLS_QWEN35) {                /* Qwen3: {"name": ..., "arguments": ...} */
            if (!first || strlen(*content)) ok = pj_add(&buf, &n, &cap, "\n", 1);
            first = false;
            ok = ok && pj_add(&buf, &n, &cap, "<tool_call>\n{\"name\": \"", 22) &&
                 pj_add(&buf, &n, &cap, name->valuestring, strlen(name->valuestring)) &&
                 pj_add(&buf, &n, &cap, "\", \"arguments\": ", 16);
            if (ok && cJSON_IsString(args)) ok = pj_add(&buf, &n, &cap, args->valuestring, strlen(args->valuestring));
            else if (ok) ok = pj_print(args, &buf, &n, &cap);
            ok = ok && pj_add(&buf, &n, &cap, "}\n</tool_call>", 14);
            continue;
        }
        const char *sep = first ? (strlen(*content) ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=")
                                : "\n<tool_call>\n<function=";
        first = false;
        ok = pj_add(&buf, &n, &cap, sep, strlen(sep)) && pj_add(&buf, &n, &cap, name->valuestring, strlen(name->valuestring)) &&
             pj_add(&buf, &n, &cap, ">\n", 2);
        cJSON *a = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : cJSON_Duplicate(args, 1);
        for (const cJSON *kv = cJSON_IsObject(a) ? a->child : NULL; ok && kv; kv = kv->next) {
            ok = pj_add(&buf, &n, &cap, "<parameter=", 11) && pj_add(&buf, &n, &cap, kv->string, strlen(kv->string)) &&
                 pj_add(&buf, &n, &cap, ">\n", 2);
            if (ok && cJSON_IsString(kv)) ok = pj_add(&buf, &n, &cap, kv->valuestring, strlen(kv->valuestring));
            else if (ok) ok = pj_print(kv, &buf, &n, &cap);
            ok = ok && pj_add(&buf, &n, &cap, "\n</parameter>\n", 14);
        }
        cJSON_Delete(a);
        ok = ok && pj_add(&buf, &n, &cap, "</function>\n</tool_call>", 24);
    }
    if (!ok) {
        free(buf);
        return srv_fail(e, 500, "server_error", NULL, "out of memory");
    }
    free(*content);
    *content = buf;
    return true;
}

/* Qwen3 writes tool results as one user turn of <tool_response> blocks per run of tool messages;
 * for plain ChatML the server does the same, so the prompt is the Qwen3 template's. */
static bool tool_results_as_user(srv_request *r, srv_error *e) {
    int w = 0;
    for (int i = 0; i < r->n_msgs;) {
        if (strcmp(r->msgs[i].role, "tool")) {
            r->msgs[w] = r->msgs[i];
            r->trusted[w++] = r->trusted[i++];
            continue;
        }
        char *buf = NULL;
        size_t n = 0, cap = 0;
        bool ok = true;
        const int start = i;
        for (; i < r->n_msgs && !strcmp(r->msgs[i].role, "tool"); i++) {
            const char *c = r->msgs[i].content;
            ok = ok && (i == start || pj_add(&buf, &n, &cap, "\n", 1)) && pj_add(&buf, &n, &cap, "<tool_response>\n", 16) &&
                 pj_add(&buf, &n, &cap, c, strlen(c)) && pj_add(&buf, &n, &cap, "\n</tool_response>", 17);
            free((char *)r->msgs[i].content);
            free((char *)r->msgs[i].role);
        }
        char *role = strdup("user");
        if (!ok || !role) {
            free(buf);
            free(role);
            for (int k = i; k < r->n_msgs; k++) {         /* leave only owned, valid entries behind */
                r->msgs[w] = r->msgs[k];
                r->trusted[w++] = r->trusted[k];
            }
            r->n_msgs = w;
            return srv_fail(e, 500, "server_error", NULL, "out of memory");
        }
        r->msgs[w].role = role;
        r->msgs[w].content = buf;
        r->trusted[w++] = false;
    }
    r->n_msgs = w;
    return true;
}

static bool parse_messages(const cJSON *root, srv_tools_fmt fmt, srv_request *r, srv_error *e) {
    const cJSON *msgs = field(root, "messages");
    if (!msgs) return srv_fail(e, 400, "invalid_request_error", "messages", "'messages' is required: an array of {\"role\", \"content\"} objects");
    if (!cJSON_IsArray(msgs)) return bad_type(e, "messages", "an array of {\"role\", \"content\"} objects", msgs);
    const int n = cJSON_GetArraySize(msgs);
    if (n == 0) return srv_fail(e, 400, "invalid_request_error", "messages", "'messages' must not be empty: expected at least one {\"role\", \"content\"} object, got []");
    if (n > SRV_MAX_MESSAGES) return srv_fail(e, 400, "invalid_request_error", "messages", "'messages' has %d entries, at most %d", n, SRV_MAX_MESSAGES);
    r->msgs = calloc((size_t)n + 1, sizeof *r->msgs);    /* + 1: room for a tools system turn */
    r->trusted = calloc((size_t)n + 1, sizeof *r->trusted);
    if (!r->msgs || !r->trusted) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    int i = 0;
    const cJSON *calls = NULL;   /* the tool_calls of the assistant turn that tool messages answer */
    int calls_at = -1;
    for (const cJSON *m = msgs->child; m; m = m->next, i++) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m)) return bad_type(e, param, "an object with 'role' and 'content'", m);
        snprintf(param, sizeof param, "messages[%d].role", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role))
            return bad_type(e, param, "one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\"", role);
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system";      /* OpenAI's newer name for system */
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool"))
            return srv_fail(e, 400, "invalid_request_error", param,
                            "'%s' must be one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\", got '%.40s'",
                            param, role->valuestring);
        if (!strcmp(rs, "tool")) {                    /* as OpenAI: a tool result names the call it answers */
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
            if (!cJSON_IsString(id)) {
                char g[32];
                snprintf(param, sizeof param, "messages[%d].tool_call_id", i);
                return srv_fail(e, 400, "invalid_request_error", param,
                                "'%s' is required for a 'tool' message: a string, the id of the tool call it answers; got %s",
                                param, id ? api_got(id, g) : "nothing");
            }
            /* as OpenAI: it follows (after other results) an assistant turn with tool_calls, and
             * answers one of them; calls sent without ids cannot be matched and are not */
            snprintf(param, sizeof param, "messages[%d]", i);
            if (!calls)
                return srv_fail(e, 400, "invalid_request_error", param,
                                "'messages[%d]' is a 'tool' message, expected after an assistant message with 'tool_calls' "
                                "(and that turn's other results)", i);
            bool any_id = false, found = false;
            for (const cJSON *c = calls->child; c; c = c->next) {
                const cJSON *cid = cJSON_GetObjectItemCaseSensitive(c, "id");
                if (!cJSON_IsString(cid)) continue;
                any_id = true;
                found = found || !strcmp(cid->valuestring, id->valuestring);
            }
            if (any_id && !found) {
                snprintf(param, sizeof param, "messages[%d].tool_call_id", i);
                return srv_fail(e, 400, "invalid_request_error", param,
                                "'%s' is '%.64s', expected the id of a call in messages[%d].tool_calls", param, id->valuestring,
                                calls_at);
            }
        } else {
            const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
            calls = !strcmp(rs, "assistant") && cJSON_IsArray(tc) && cJSON_GetArraySize(tc) > 0 ? tc : NULL;
            calls_at = i;
        }
        char *content = NULL;
        if (!get_content(m, i, &content, e)) return false;
        r->msgs[r->n_msgs].role = strdup(rs);
        r->msgs[r->n_msgs].content = content;
        r->n_msgs++;
        if (!r->msgs[r->n_msgs - 1].role) return srv_fail(e, 500, "server_error", NULL, "out of memory");
        if (!strcmp(rs, "assistant") && !append_tool_calls(m, i, fmt, (char **)&r->msgs[r->n_msgs - 1].content, e)) return false;
    }
    return fmt == SRV_TOOLS_CHATML ? tool_results_as_user(r, e) : true;
}

/* The template's tools section for the request's tools array (tern_chat_tools_section, the
 * renderer the chat templates use); malloc'd, NULL when out of memory. ChatML models get the
 * Qwen3 section. */
static char *tools_section(srv_tools_fmt fmt, const char *tools_json) {
    const char *tmpl = fmt == SRV_TOOLS_QWEN35 ? "qwen35" : "qwen3";
    size_t n = 0;
    if (tern_chat_tools_section(tmpl, tools_json, NULL, 0, &n, NULL) != TERN_E_RANGE) return NULL;
    char *out = malloc(n + 1);
    if (out && tern_chat_tools_section(tmpl, tools_json, out, n + 1, &n, NULL) != TERN_OK) {
        free(out);
        out = NULL;
    }
    return out;
}

static bool parse_tools(const cJSON *root, srv_tools_fmt fmt, srv_request *r, srv_error *e) {
    const cJSON *tools = field(root, "tools");
    const cJSON *choice = field(root, "tool_choice");
    /* tool_choice: "auto" (the default) and "none" (no tools in the prompt); the model cannot be
     * made to call a tool, so "required" and a named function are refused, not ignored */
    if (choice && !cJSON_IsString(choice) && !cJSON_IsObject(choice))
        return bad_type(e, "tool_choice", "\"auto\" or \"none\"", choice);
    if (choice && cJSON_IsString(choice) && strcmp(choice->valuestring, "auto") && strcmp(choice->valuestring, "none") &&
        strcmp(choice->valuestring, "required"))
        return srv_fail(e, 400, "invalid_request_error", "tool_choice",
                        "'tool_choice' must be \"auto\" or \"none\" (OpenAI's \"required\" and a named function are not "
                        "supported here), got '%.40s'", choice->valuestring);
    if (choice && (cJSON_IsObject(choice) || (strcmp(choice->valuestring, "auto") && strcmp(choice->valuestring, "none"))))
        return srv_fail(e, 400, "invalid_request_error", "tool_choice",
                        "'tool_choice' %s%.40s%s is not supported (a tool call cannot be forced); send \"auto\" or \"none\", or leave it out",
                        cJSON_IsString(choice) ? "'" : "", cJSON_IsString(choice) ? choice->valuestring : "naming a function",
                        cJSON_IsString(choice) ? "'" : "");
    if (!tools) return true;
    if (!cJSON_IsArray(tools)) return bad_type(e, "tools", "an array of {\"type\": \"function\", \"function\": {...}}", tools);
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        char pt[64];
        snprintf(pt, sizeof pt, "tools[%d]", i);
        if (!cJSON_IsObject(t)) return bad_type(e, pt, "an object {\"type\": \"function\", \"function\": {...}}", t);
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function")) {
            snprintf(pt, sizeof pt, "tools[%d].type", i);
            return cJSON_IsString(type) ? srv_fail(e, 400, "invalid_request_error", pt, "'%s' must be \"function\", got '%.40s'", pt, type->valuestring)
                                        : bad_type(e, pt, "\"function\"", type);
        }
        if (!cJSON_IsObject(fn)) {
            snprintf(pt, sizeof pt, "tools[%d].function", i);
            return bad_type(e, pt, "an object with 'name'", fn);
        }
        if (!cJSON_IsString(name)) {
            snprintf(pt, sizeof pt, "tools[%d].function.name", i);
            return bad_type(e, pt, "a string", name);
        }
    }
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) return true;
    if (i == 0) return true;
    char *txt = cJSON_PrintUnformatted(tools);
    char *block = txt ? tools_section(fmt, txt) : NULL;
    free(txt);
    if (!block) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    if (fmt != SRV_TOOLS_QWEN35 && r->n_msgs > 0 && !strcmp(r->msgs[0].role, "system")) {
        /* Qwen3: the client's system text as given, a blank line, then the section */
        const char *sys = r->msgs[0].content;
        char *joined = malloc(strlen(sys) + 2 + strlen(block) + 1);
        if (!joined) { free(block); return srv_fail(e, 500, "server_error", NULL, "out of memory"); }
        sprintf(joined, "%s\n\n%s", sys, block);
        free(block);
        free((char *)r->msgs[0].content);
        r->msgs[0].content = joined;
        r->trusted[0] = false;                        /* it holds the client's system text */
    } else if (r->n_msgs > 0 && !strcmp(r->msgs[0].role, "system")) {
        /* Qwen3.5: the tools block opens the system turn; a given system message follows it */
        const char *sys = r->msgs[0].content;
        size_t a = 0, b = strlen(sys);
        while (a < b && strchr(" \t\r\n", sys[a])) a++;
        while (b > a && strchr(" \t\r\n", sys[b - 1])) b--;
        if (b > a) {
            /* the system text stays untrusted: keep it a message of its own after the block */
            char *joined = malloc(strlen(block) + 2 + (b - a) + 1);
            if (!joined) { free(block); return srv_fail(e, 500, "server_error", NULL, "out of memory"); }
            sprintf(joined, "%s\n\n%.*s", block, (int)(b - a), sys + a);
            free(block);
            block = joined;
        }
        free((char *)r->msgs[0].content);
        r->msgs[0].content = block;
        r->trusted[0] = false;                        /* it holds the client's system text */
    } else {
        memmove(r->msgs + 1, r->msgs, (size_t)r->n_msgs * sizeof *r->msgs);
        memmove(r->trusted + 1, r->trusted, (size_t)r->n_msgs * sizeof *r->trusted);
        r->msgs[0].role = strdup("system");
        r->msgs[0].content = block;
        r->trusted[0] = true;
        r->n_msgs++;
        if (!r->msgs[0].role) return srv_fail(e, 500, "server_error", NULL, "out of memory");
    }
    r->has_tools = true;
    return true;
}

static bool parse_stop(const cJSON *root, srv_request *r, srv_error *e) {
    const cJSON *stop = field(root, "stop");
    if (!stop) return true;
    const cJSON *one = stop;
    if (cJSON_IsArray(stop)) {
        if (cJSON_GetArraySize(stop) > SRV_MAX_STOP)
            return srv_fail(e, 400, "invalid_request_error", "stop", "'stop' has %d strings, at most %d", cJSON_GetArraySize(stop), SRV_MAX_STOP);
        one = stop->child;
    } else if (!cJSON_IsString(stop)) {
        return bad_type(e, "stop", "a string or an array of strings", stop);
    }
    int k = 0;
    for (; one; one = cJSON_IsArray(stop) ? one->next : NULL, k++) {
        char ps[24];
        if (cJSON_IsArray(stop)) snprintf(ps, sizeof ps, "stop[%d]", k);
        else snprintf(ps, sizeof ps, "stop");
        if (!cJSON_IsString(one)) return bad_type(e, ps, "a string", one);
        size_t l = strlen(one->valuestring);
        if (l == 0) continue;                         /* an empty stop string matches nothing */
        if (l > SRV_MAX_STOP_LEN)
            return srv_fail(e, 400, "invalid_request_error", ps, "'%s' must be at most %d bytes, got %zu", ps, SRV_MAX_STOP_LEN, l);
        r->stop[r->n_stop] = strdup(one->valuestring);
        if (!r->stop[r->n_stop]) return srv_fail(e, 500, "server_error", NULL, "out of memory");
        r->n_stop++;
    }
    return true;
}

/* ---- JSON syntax errors: where cJSON stopped and why ----------------------------------------- */

/* Lexical state of s[0..upto): inside a string (and where it opened), open arrays/objects. */
typedef struct json_scan {
    bool in_str;
    size_t str_start;       /* offset of the opening quote of the current string */
    int depth;              /* '[' and '{' not yet closed */
    uint64_t objs;          /* bit d - 1: the container open at depth d (<= 64) is an object */
} json_scan;

static json_scan json_scan_to(const char *s, size_t upto) {
    json_scan st = {0};
    bool esc = false;
    for (size_t i = 0; i < upto; i++) {
        const char c = s[i];
        if (st.in_str) {
            if (esc) esc = false;
            else if (c == '\\') esc = true;
            else if (c == '"') st.in_str = false;
        } else if (c == '"') {
            st.in_str = true;
            st.str_start = i;
        } else if (c == '[' || c == '{') {
            if (st.depth < 64) {
                const uint64_t bit = (uint64_t)1 << st.depth;
                st.objs = c == '{' ? st.objs | bit : st.objs & ~bit;
            }
            st.depth++;
        } else if ((c == ']' || c == '}') && st.depth > 0) st.depth--;
    }
    return st;
}

/* Parse s[0..n) into *root (NULL if cJSON refuses it) and return where cJSON stopped: the end
 * of the value, or the offset of the byte it could not take (n - 1 when it ran off the end). */
static size_t json_stop(const char *s, size_t n, cJSON **root) {
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(s, n, &end, false);
    return end ? (size_t)(end - s) : 0;
}

static bool json_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* "byte N (line L, column C)" of s[pos]; lines and columns count from 1, columns in bytes. */
static const char *json_where(const char *s, size_t pos, char *buf, size_t n) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos; i++) {
        if (s[i] == '\n') line++, col = 1;
        else col++;
    }
    snprintf(buf, n, "byte %zu (line %zu, column %zu)", pos, line, col);
    return buf;
}

/* The 400 for a body cJSON refuses (stopped at pos) or leaves data after (trailing): says where
 * (byte offset, line:column), what was found there and, for the cases a client can fix, what was
 * expected: the end of the body inside a string or an unclosed array/object, nesting deeper than
 * cJSON's limit, a lone UTF-16 surrogate escape. */
static bool json_syntax_error(const char *body, size_t len, size_t pos, bool trailing, srv_error *e) {
    static const char head[] = "the request body is not valid JSON: ";
    char where[80], found[32];
    size_t first = 0;
    while (first < len && json_ws(body[first])) first++;
    if (first == len) return srv_fail(e, 400, "invalid_request_error", NULL, "%sit is empty, expected a JSON object", head);
    if (pos > len) pos = len;
    /* cJSON reads a member name from one byte past where it expects the opening quote and stops
     * there (or, at the end of the body, on the last byte) when the quote is missing ({a:1},
     * {'a':1}, {"a":1,}): the byte at fault is the first non-blank one where an object wants a
     * name (after its '{' or a ','), and it is not a quote */
    bool want_name = false;
    for (int d = 1; d >= 0 && !trailing && !want_name; d--) {   /* the byte before pos, then pos */
        if ((size_t)d > pos || pos - (size_t)d >= len) continue;
        const size_t k = pos - (size_t)d;
        if (json_ws(body[k]) || body[k] == '"') continue;
        const json_scan at = json_scan_to(body, k);
        size_t b = k;
        while (b > 0 && json_ws(body[b - 1])) b--;
        if (!at.in_str && b > 0 && (body[b - 1] == '{' || body[b - 1] == ',') && at.depth >= 1 && at.depth <= 64 &&
            ((at.objs >> (at.depth - 1)) & 1)) {
            want_name = true;
            pos = k;
        }
    }
    const unsigned char c = pos < len ? (unsigned char)body[pos] : 0;
    if (pos == len) snprintf(found, sizeof found, "the end of the body");
    else if (c >= 0x20 && c < 0x7f) snprintf(found, sizeof found, "'%c'", c);
    else snprintf(found, sizeof found, "byte 0x%02x", c);
    if (trailing)
        return srv_fail(e, 400, "invalid_request_error", NULL, "%sunexpected data after the JSON value at %s: found %s", head,
                        json_where(body, pos, where, sizeof where), found);
    const json_scan st = json_scan_to(body, pos);
    if (!st.in_str && (c == '[' || c == '{') && st.depth >= CJSON_NESTING_LIMIT)
        return srv_fail(e, 400, "invalid_request_error", NULL, "%sarrays and objects nested deeper than %d levels at %s", head,
                        CJSON_NESTING_LIMIT, json_where(body, pos, where, sizeof where));
    if (st.in_str && c == '\\' && pos + 6 <= len && body[pos + 1] == 'u') {
        const int u = hex4(body + pos + 2);
        if (u >= 0xd800 && u <= 0xdfff)
            return srv_fail(e, 400, "invalid_request_error", NULL,
                            "%sa lone UTF-16 surrogate \\u%.4s at %s: a high surrogate \\ud800-\\udbff must be followed by a "
                            "low surrogate \\udc00-\\udfff, and a low one must follow a high one", head, body + pos + 2,
                            json_where(body, pos, where, sizeof where));
    }
    if (want_name)
        return srv_fail(e, 400, "invalid_request_error", NULL, "%sat %s: found %s, expected '\"' to start a member name", head,
                        json_where(body, pos, where, sizeof where), found);
    /* cJSON looks for a string's closing quote first and stops just inside the opening one */
    const json_scan all = json_scan_to(body, len);
    if (all.in_str && pos == all.str_start + 1)
        return srv_fail(e, 400, "invalid_request_error", NULL, "%sthe string that opens at %s is not closed before the end of the body (byte %zu)",
                        head, json_where(body, all.str_start, where, sizeof where), len);
    /* did it run off the end? the same bytes and one more space stop past the last byte */
    bool ended = false;
    char *more = malloc(len + 1);
    if (more) {
        memcpy(more, body, len);
        more[len] = ' ';
        cJSON *j;
        ended = json_stop(more, len + 1, &j) >= len;
        cJSON_Delete(j);
        free(more);
    }
    if (ended)
        return srv_fail(e, 400, "invalid_request_error", NULL,
                        "%sthe body ends at %s before the value is complete (%d array%s or object%s still open)", head,
                        json_where(body, len, where, sizeof where), all.depth, all.depth == 1 ? "" : "s", all.depth == 1 ? "" : "s");
    return srv_fail(e, 400, "invalid_request_error", NULL, "%sat %s: found %s%s", head, json_where(body, pos, where, sizeof where),
                    found, st.in_str ? " inside a string" : "");
}

/* ---- invalid UTF-8 in the request ------------------------------------------------------------ */

size_t api_utf8_bad_at(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const size_t l = utf8_valid_len((const unsigned char *)s + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

/* The first string of v (a member name or a string value, in document order) that is not valid
 * UTF-8: 400 naming its JSON path (path: v's own, plen bytes used), the bad byte and its offset
 * in the string. False if it found one. */
static bool json_utf8_check(const cJSON *v, char *path, size_t cap, size_t plen, srv_error *e) {
    if (cJSON_IsString(v) && v->valuestring) {
        const size_t n = strlen(v->valuestring), at = api_utf8_bad_at(v->valuestring, n);
        if (at < n)
            return srv_fail(e, 400, "invalid_request_error", path, "'%s' is not valid UTF-8: byte 0x%02x at offset %zu of the string",
                            path, (unsigned char)v->valuestring[at], at);
        return true;
    }
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return true;
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        size_t k;
        if (cJSON_IsArray(v)) k = (size_t)snprintf(path + plen, cap - plen, "[%d]", i);
        else {
            const size_t n = strlen(c->string ? c->string : ""), at = api_utf8_bad_at(c->string ? c->string : "", n);
            if (at < n) {
                path[plen] = '\0';
                return srv_fail(e, 400, "invalid_request_error", path,
                                "a member name in %s%s%s is not valid UTF-8: byte 0x%02x at offset %zu of the name",
                                plen ? "'" : "the body", path, plen ? "'" : "", (unsigned char)c->string[at], at);
            }
            k = (size_t)snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", c->string);
        }
        if (!json_utf8_check(c, path, cap, plen + k < cap ? plen + k : cap - 1, e)) return false;
        path[plen] = '\0';
    }
    return true;
}

typedef struct key_ref {
    const char *name;
    int index;              /* position among the object's members */
} key_ref;

static int key_ref_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* The first member name of object v that repeats an earlier one (the repeat earliest in document
 * order), or NULL. Sorted copy of the names: O(n log n), so a body of 100k keys stays fast. */
static const char *json_dup_key(const cJSON *v, bool *oom) {
    int n = 0;
    for (const cJSON *c = v->child; c; c = c->next) n++;
    if (n < 2) return NULL;
    key_ref *k = malloc((size_t)n * sizeof *k);
    if (!k) {
        *oom = true;
        return NULL;
    }
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) k[i] = (key_ref){c->string ? c->string : "", i};
    qsort(k, (size_t)n, sizeof *k, key_ref_cmp);
    const char *dup = NULL;
    int at = n;
    for (i = 1; i < n; i++)
        if (!strcmp(k[i].name, k[i - 1].name) && k[i].index < at) at = k[i].index, dup = k[i].name;
    free(k);
    return dup;
}

/* A member name given twice in one object, anywhere in v (path: v's own, plen bytes used): 400
 * naming the key and the object's path. cJSON keeps both and its lookups take the first; Python's
 * json and JavaScript's JSON.parse (vLLM, the openai clients) take the last, so the same body would
 * mean different requests: it is refused. False if it found one. */
static bool json_dup_check(const cJSON *v, char *path, size_t cap, size_t plen, srv_error *e) {
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return true;
    if (cJSON_IsObject(v)) {
        bool oom = false;
        const char *dup = json_dup_key(v, &oom);
        if (oom) return srv_fail(e, 500, "server_error", NULL, "out of memory");
        if (dup) {
            char obj[sizeof e->param];
            snprintf(obj, sizeof obj, "%.*s", (int)plen, path);
            snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", dup);
            return srv_fail(e, 400, "invalid_request_error", path,
                            "duplicate key '%.80s' in %s%s%s: each member name may appear once in an object (parsers differ on "
                            "which one counts); send it once", dup, plen ? "'" : "the request body", obj, plen ? "'" : "");
        }
    }
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (!cJSON_IsArray(c) && !cJSON_IsObject(c)) continue;
        size_t k;
        if (cJSON_IsArray(v)) k = (size_t)snprintf(path + plen, cap - plen, "[%d]", i);
        else k = (size_t)snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", c->string);
        if (!json_dup_check(c, path, cap, plen + k < cap ? plen + k : cap - 1, e)) return false;
        path[plen] = '\0';
    }
    return true;
}

/* Offset of the first \u0000 escape inside a JSON string of body[0..len) (already parsed: well
 * formed), or len. cJSON decodes it to a NUL byte, which ends the C string: the rest of the text
 * would be dropped without a word, so the request is refused instead. */
static size_t json_nul_escape_at(const char *body, size_t len) {
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        if (!in_str) { in_str = body[i] == '"'; continue; }
        if (body[i] == '"') { in_str = false; continue; }
        if (body[i] != '\\' || i + 1 >= len) continue;
        if (body[i + 1] == 'u' && i + 5 < len && memcmp(body + i + 2, "0000", 4) == 0) return i;
        i++;                                             /* the escaped character */
    }
    return len;
}

/* Whether s[0..n) is a JSON number (RFC 8259): -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool json_number_ok(const char *s, size_t n) {
    size_t p = 0;
#define DIGIT(k) ((k) < n && s[k] >= '0' && s[k] <= '9')
    if (p < n && s[p] == '-') p++;
    if (p < n && s[p] == '0') p++;
    else if (DIGIT(p)) while (DIGIT(p)) p++;
    else return false;
    if (p < n && s[p] == '.') {
        if (!DIGIT(p + 1)) return false;
        p++;
        while (DIGIT(p)) p++;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < n && (s[p] == '+' || s[p] == '-')) p++;
        if (!DIGIT(p)) return false;
        while (DIGIT(p)) p++;
    }
#undef DIGIT
    return p == n;
}

/* The offset of the first number token (outside strings: a '-' or digit and the number characters
 * after it) that is not a JSON number, its length in *n_tok; len when there is none. Run on a body
 * cJSON took: its number reader takes 01, -01, 00, 1. and 1.e5 too, which Python's json (vLLM)
 * refuses, and a number a client did not mean to send should not be read as another. */
static size_t json_bad_number(const char *body, size_t len, size_t *n_tok) {
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        const char c = body[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') {
            in_str = true;
            continue;
        }
        if (c != '-' && !(c >= '0' && c <= '9')) continue;
        size_t j = i;
        while (j < len && body[j] && ((body[j] >= '0' && body[j] <= '9') || strchr("+-.eE", body[j]))) j++;
        if (!json_number_ok(body + i, j - i)) {
            *n_tok = j - i;
            return i;
        }
        i = j - 1;
    }
    return len;
}

bool api_parse_request(srv_kind kind, const char *body, size_t len, srv_request *r, srv_error *e) {
    return api_parse_request_fmt(kind, SRV_TOOLS_QWEN35, body, len, r, e);
}

cJSON *api_parse_body(const char *body, size_t len, srv_error *e) {
    cJSON *root = NULL;
    size_t end = json_stop(body, len, &root);
    if (!root) {
        json_syntax_error(body, len, end, false, e);
        return NULL;
    }
    while (end < len && json_ws(body[end])) end++;
    if (end < len) {                                   /* cJSON stops after one value: refuse the rest */
        json_syntax_error(body, len, end, true, e);
        goto fail;
    }
    size_t n_tok = 0;
    const size_t at = json_bad_number(body, len, &n_tok);
    if (at < len) {
        char where[80];
        srv_fail(e, 400, "invalid_request_error", NULL,
                 "the request body is not valid JSON: the number '%.*s' at %s is not a JSON number (no leading zeros, "
                 "digits on both sides of a '.')", n_tok > 24 ? 24 : (int)n_tok, body + at,
                 json_where(body, at, where, sizeof where));
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        srv_fail(e, 400, "invalid_request_error", NULL, "the request body must be a JSON object, got %s", json_kind(root));
        goto fail;
    }
    /* RFC 8259: JSON text is UTF-8; llama-server and vLLM refuse a body that is not (no text is
     * silently changed). Strings first, to name the field; then any other byte of the body. */
    char path[sizeof e->param] = "";
    if (!json_utf8_check(root, path, sizeof path, 0, e)) goto fail;
    const size_t bad = api_utf8_bad_at(body, len);
    if (bad < len) {   /* a NUL is valid UTF-8 (U+0000) but never raw in JSON text: said as such */
        char where[80];
        if (body[bad] == '\0')
            srv_fail(e, 400, "invalid_request_error", NULL,
                     "the request body has a raw NUL byte at %s: JSON text cannot hold one (in a string, write \\u0000)",
                     json_where(body, bad, where, sizeof where));
        else
            srv_fail(e, 400, "invalid_request_error", NULL, "the request body is not valid UTF-8: byte 0x%02x at %s",
                     (unsigned char)body[bad], json_where(body, bad, where, sizeof where));
        goto fail;
    }
    path[0] = '\0';
    if (!json_dup_check(root, path, sizeof path, 0, e)) goto fail;
    const size_t nul = json_nul_escape_at(body, len);
    if (nul < len) {
        char where[80];
        srv_fail(e, 400, "invalid_request_error", NULL,
                 "a string of the request holds \\u0000 (U+0000) at %s: NUL characters are not supported in text",
                 json_where(body, nul, where, sizeof where));
        goto fail;
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

bool api_body_model(const char *body, size_t len, char **model, srv_error *e) {
    *model = NULL;
    cJSON *root = api_parse_body(body, len, e);
    if (!root) return false;
    const cJSON *m = field(root, "model");
    bool ok = true;
    if (m && !cJSON_IsString(m)) ok = bad_type(e, "model", "a string", m);
    else if (m && !(*model = strdup(m->valuestring))) ok = srv_fail(e, 500, "server_error", NULL, "out of memory");
    cJSON_Delete(root);
    return ok;
}

bool api_parse_request_fmt(srv_kind kind, srv_tools_fmt fmt, const char *body, size_t len, srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->enable_thinking = true;
    r->think_budget = -1;
    r->cache_prompt = true;
    tern_sampler_params_default(&r->sp);
    bool ok = false;
    cJSON *root = api_parse_body(body, len, e);
    if (!root) goto done;
    const cJSON *model = field(root, "model");
    if (model && !cJSON_IsString(model)) { bad_type(e, "model", "a string", model); goto done; }
    if (model && !(r->model = api_utf8_dup(model->valuestring, strlen(model->valuestring)))) goto oom;

    double v = -1;
    const char *mt = field(root, "max_completion_tokens") ? "max_completion_tokens" : field(root, "max_tokens") ? "max_tokens" : "n_predict";
    if (!get_int(root, mt, -1, 2147483647.0, &v, e)) goto done;
    if (!strcmp(mt, "max_completion_tokens") && field(root, "max_tokens")) {   /* OpenAI's older name */
        double mx = -1;
        char a[32], b[32];
        if (!get_int(root, "max_tokens", -1, 2147483647.0, &mx, e)) goto done;
        if (mx != v) {
            srv_fail(e, 400, "invalid_request_error", "max_tokens",
                     "'max_tokens' (%s) and 'max_completion_tokens' (%s) differ: send one of them", num_text(mx, a),
                     num_text(v, b));
            goto done;
        }
    }
    if (strcmp(mt, "n_predict") && field(root, "n_predict")) {   /* llama-server's name for the same length */
        double np = -1;
        char a[32], b[32];
        if (!get_int(root, "n_predict", -1, 2147483647.0, &np, e)) goto done;
        if (np != v) {
            srv_fail(e, 400, "invalid_request_error", "n_predict", "'n_predict' (%s) and '%s' (%s) differ: send one of them",
                     num_text(np, a), mt, num_text(v, b));
            goto done;
        }
    }
    r->max_tokens = (int)v;
    double d;
    if (d = r->sp.temp, !get_number(root, "temperature", 0, 2, &d, e)) goto done;
    r->sp.temp = (float)d;
    if (d = r->sp.top_p, !get_number(root, "top_p", 0, 1, &d, e)) goto done;
    r->sp.top_p = (float)d;
    if (d = r->sp.min_p, !get_number(root, "min_p", 0, 1, &d, e)) goto done;
    r->sp.min_p = (float)d;
    /* top_k <= 0 disables the stage: 0 is llama-server's "off", -1 vLLM's */
    if (d = r->sp.top_k, !get_int(root, "top_k", -1, 1e9, &d, e)) goto done;
    r->sp.top_k = (int32_t)d;
    if (d = r->sp.repeat_penalty, !get_number(root, "repeat_penalty", 1e-3, 100, &d, e)) goto done;
    r->sp.repeat_penalty = (float)d;
    if (d = r->sp.repeat_last_n, !get_int(root, "repeat_last_n", 0, 1e6, &d, e)) goto done;
    r->sp.repeat_last_n = (int32_t)d;
    d = -1;
    /* +-(2^53 - 1): past it a JSON number does not hold every integer (2^53 + 1 parses as 2^53),
     * so two different seeds could give the same draws */
    if (!get_int(root, "seed", -9007199254740991.0, 9007199254740991.0, &d, e)) goto done;
    r->sp.seed = d < 0 ? TERN_SEED_RANDOM : (uint64_t)d;
    d = 0;
    if (!get_number(root, "presence_penalty", -2, 2, &d, e)) goto done;
    if (d != 0) { srv_fail(e, 400, "invalid_request_error", "presence_penalty", "'presence_penalty' is not supported (use repeat_penalty)"); goto done; }
    if (!get_number(root, "frequency_penalty", -2, 2, &d, e)) goto done;
    if (d != 0) { srv_fail(e, 400, "invalid_request_error", "frequency_penalty", "'frequency_penalty' is not supported (use repeat_penalty)"); goto done; }
    if (!refuse_unsupported(root, e)) goto done;
    if (!parse_logit_bias(root, r, e)) goto done;
    {                                                 /* checked by refuse_unsupported */
        const cJSON *rf = field(root, "response_format");
        const cJSON *rt = rf ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        r->json_object = cJSON_IsString(rt) && !strcmp(rt->valuestring, "json_object");
    }
    if (kind == SRV_CHAT) {                           /* logprobs: bool, top_logprobs: 0..20 */
        if (!get_bool(root, "logprobs", "logprobs", &r->logprobs, e)) goto done;
        d = 0;
        if (!get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &d, e)) goto done;
        if (field(root, "top_logprobs") && !r->logprobs) {
            srv_fail(e, 400, "invalid_request_error", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
            goto done;
        }
        r->top_logprobs = (int)d;
    } else {                                          /* legacy completions: logprobs N, 0..20 */
        d = -1;
        if (!get_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &d, e)) goto done;
        r->logprobs = d >= 0;
        r->top_logprobs = d >= 0 ? (int)d : 0;
    }
    if (!get_bool(root, "stream", "stream", &r->stream, e)) goto done;
    if (!get_bool(root, "ignore_eos", "ignore_eos", &r->ignore_eos, e)) goto done;
    if (!get_bool(root, "cache_prompt", "cache_prompt", &r->cache_prompt, e)) goto done;
    const cJSON *so = field(root, "stream_options");
    if (so && !cJSON_IsObject(so)) { bad_type(e, "stream_options", "an object", so); goto done; }
    if (so && !get_bool(so, "include_usage", "stream_options.include_usage", &r->include_usage, e)) goto done;
    if (so && !r->stream) {   /* as OpenAI and vLLM: the options of a stream need a stream */
        srv_fail(e, 400, "invalid_request_error", "stream_options", "'stream_options' is only allowed when 'stream' is true");
        goto done;
    }
    if (!parse_stop(root, r, e)) goto done;

    if (kind == SRV_CHAT) {
        const cJSON *kw = field(root, "chat_template_kwargs");
        if (kw && !cJSON_IsObject(kw)) { bad_type(e, "chat_template_kwargs", "an object", kw); goto done; }
        if (kw && !get_bool(kw, "enable_thinking", "chat_template_kwargs.enable_thinking", &r->enable_thinking, e)) goto done;
        /* a reasoning budget in tokens, under llama-server's name or vLLM's (both: they must agree) */
        double rb = -1, tb = -1;
        char a1[32], a2[32];
        if (!get_int(root, "reasoning_budget", -1, 1 << 24, &rb, e) || !get_int(root, "thinking_budget", -1, 1 << 24, &tb, e))
            goto done;
        if (field(root, "reasoning_budget") && field(root, "thinking_budget") && rb != tb) {
            srv_fail(e, 400, "invalid_request_error", "thinking_budget", "'reasoning_budget' (%s) and 'thinking_budget' (%s) "
                     "differ: send one of them", num_text(rb, a1), num_text(tb, a2));
            goto done;
        }
        r->think_budget = field(root, "reasoning_budget") ? (int)rb : (int)tb;
        if (!parse_messages(root, fmt, r, e)) goto done;
        if (!parse_tools(root, fmt, r, e)) goto done;
    } else {
        const cJSON *p = field(root, "prompt");
        const char *pname = "prompt";
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
            p = p->child, pname = "prompt[0]";   /* ["text"] and [[ids]]: one prompt */
        if (!p) {
            srv_fail(e, 400, "invalid_request_error", "prompt",
                     "'prompt' is required: a string or an array of token ids (or an array of one of those)");
            goto done;
        }
        if (cJSON_IsArray(p)) {
            if (!parse_prompt_ids(p, pname, r, e)) goto done;
            r->prompt_ids_nested = pname[6] == '[';
        } else if (!cJSON_IsString(p)) {
            bad_type(e, "prompt", "a string or an array of token ids (or an array of one of those)", p);
            goto done;
        } else if (!(r->prompt = strdup(p->valuestring))) goto oom;
        r->parse_special = true;
        if (!get_bool(root, "parse_special", "parse_special", &r->parse_special, e)) goto done;
    }
    ok = true;
    goto done;
oom:
    srv_fail(e, 500, "server_error", NULL, "out of memory");
done:
    cJSON_Delete(root);
    if (!ok) api_request_free(r);
    return ok;
}

void api_request_free(srv_request *r) {
    for (int i = 0; i < r->n_msgs; i++) {
        free((char *)r->msgs[i].role);
        free((char *)r->msgs[i].content);
    }
    free(r->msgs);
    free(r->trusted);
    free(r->prompt);
    free(r->prompt_ids);
    free(r->bias_ids);
    free(r->bias);
    free(r->model);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}

/* ---- responses ----------------------------------------------------------------------------- */

static char *print_free(cJSON *j) {
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
}

char *api_print_free(cJSON *root) { return print_free(root); }

bool api_model_not_found(srv_error *e, const char *id) {
    srv_fail(e, 404, "invalid_request_error", "model", "the model '%.200s' does not exist (GET /v1/models lists them)",
             id ? id : "");                           /* srv_fail repairs invalid UTF-8 */
    e->code = "model_not_found";
    return false;
}

static void add_text(cJSON *obj, const char *key, const char *s, size_t n) {
    char *t = api_utf8_dup(s ? s : "", s ? n : 0);
    cJSON_AddStringToObject(obj, key, t ? t : "");
    free(t);
}

char *api_error_json(const srv_error *e) {
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", e->type ? e->type : "server_error");
    if (e->param[0]) cJSON_AddStringToObject(err, "param", e->param);
    else cJSON_AddNullToObject(err, "param");
    if (e->code) cJSON_AddStringToObject(err, "code", e->code);
    else cJSON_AddNullToObject(err, "code");
    return print_free(root);
}

static cJSON *head(const char *id, long created, const char *model, const char *object) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)created);
    cJSON_AddStringToObject(root, "model", model);
    cJSON_AddStringToObject(root, "system_fingerprint", "tern-" TERN_VERSION);
    return root;
}

static void add_usage(cJSON *root, const srv_usage *u) {
    cJSON *us = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(us, "prompt_tokens", u->prompt_tokens);
    cJSON_AddNumberToObject(us, "completion_tokens", u->completion_tokens);
    cJSON_AddNumberToObject(us, "total_tokens", u->prompt_tokens + u->completion_tokens);
    cJSON *det = cJSON_AddObjectToObject(us, "prompt_tokens_details");
    cJSON_AddNumberToObject(det, "cached_tokens", u->cached_tokens);
}

static void add_logprobs(cJSON *choice, const char *logprobs_json) {
    cJSON *lp = logprobs_json ? cJSON_Parse(logprobs_json) : NULL;
    if (lp) cJSON_AddItemToObject(choice, "logprobs", lp);
    else cJSON_AddNullToObject(choice, "logprobs");
}

static void add_timings(cJSON *root, const srv_timings *t) {
    if (!t) return;
    cJSON *o = cJSON_AddObjectToObject(root, "timings");
    cJSON_AddNumberToObject(o, "ttft_ms", t->ttft_ms);
    cJSON_AddNumberToObject(o, "prompt_n", t->prompt_n);
    cJSON_AddNumberToObject(o, "prompt_ms", t->prompt_ms);
    cJSON_AddNumberToObject(o, "predicted_n", t->predicted_n);
    cJSON_AddNumberToObject(o, "predicted_ms", t->predicted_ms);
    cJSON_AddNumberToObject(o, "prefill_chunks", t->prefill_chunks);
    cJSON_AddNumberToObject(o, "decode_steps_in_prefill", t->decode_steps_in_prefill);
}

char *api_chat_response(const char *id, long created, const char *model, const char *content, size_t n_content,
                        const char *reasoning, size_t n_reasoning, const char *tool_calls_json, const char *finish,
                        const char *logprobs_json, const srv_usage *u, const srv_timings *t) {
    cJSON *root = head(id, created, model, "chat.completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *msg = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON *calls = tool_calls_json ? cJSON_Parse(tool_calls_json) : NULL;
    if (calls && n_content == 0) cJSON_AddNullToObject(msg, "content");
    else add_text(msg, "content", content, n_content);
    if (reasoning && n_reasoning) {                   /* llama-server's name and vLLM's, both filled */
        add_text(msg, "reasoning_content", reasoning, n_reasoning);
        add_text(msg, "reasoning", reasoning, n_reasoning);
    }
    if (calls) cJSON_AddItemToObject(msg, "tool_calls", calls);
    add_logprobs(c, logprobs_json);
    cJSON_AddStringToObject(c, "finish_reason", finish);
    add_usage(root, u);
    add_timings(root, t);
    return print_free(root);
}

char *api_completion_response(const char *id, long created, const char *model, const char *text, size_t n_text,
                              const char *finish, const char *logprobs_json, const srv_usage *u, const srv_timings *t) {
    cJSON *root = head(id, created, model, "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    add_text(c, "text", text, n_text);
    cJSON_AddNumberToObject(c, "index", 0);
    add_logprobs(c, logprobs_json);
    cJSON_AddStringToObject(c, "finish_reason", finish);
    add_usage(root, u);
    add_timings(root, t);
    return print_free(root);
}

/* A stream chunk's object and choices. The usage-only chunk (usage != NULL) is then complete and
 * *choice is NULL; otherwise *choice is the one choice to fill, then pass to chunk_end. */
static cJSON *chunk_begin(const char *id, long created, const char *model, const char *object, const srv_usage *usage,
                          cJSON **choice) {
    cJSON *root = head(id, created, model, object);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    *choice = NULL;
    if (usage) {
        add_usage(root, usage);
        return root;
    }
    *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, *choice);
    return root;
}

/* The choice's logprobs and finish_reason (null until the last chunk, which also carries the
 * timings); returns the chunk's text. */
static char *chunk_end(cJSON *root, cJSON *c, const char *logprobs_json, const char *finish, const srv_timings *t) {
    add_logprobs(c, logprobs_json);
    if (finish) {
        cJSON_AddStringToObject(c, "finish_reason", finish);
        add_timings(root, t);
    } else {
        cJSON_AddNullToObject(c, "finish_reason");
    }
    return print_free(root);
}

char *api_chat_chunk(const char *id, long created, const char *model, bool role, const char *content, size_t n_content,
                     const char *reasoning, size_t n_reasoning, const char *tool_calls_json, const char *finish,
                     const char *logprobs_json, const srv_usage *usage, const srv_timings *t) {
    cJSON *c;
    cJSON *root = chunk_begin(id, created, model, "chat.completion.chunk", usage, &c);
    if (!c) return print_free(root);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *delta = cJSON_AddObjectToObject(c, "delta");
    if (role) cJSON_AddStringToObject(delta, "role", "assistant");
    if (content && n_content) add_text(delta, "content", content, n_content);
    if (reasoning && n_reasoning) {
        add_text(delta, "reasoning_content", reasoning, n_reasoning);
        add_text(delta, "reasoning", reasoning, n_reasoning);
    }
    if (tool_calls_json) {
        cJSON *calls = cJSON_Parse(tool_calls_json);
        int i = 0;
        for (cJSON *tc = calls ? calls->child : NULL; tc; tc = tc->next) cJSON_AddNumberToObject(tc, "index", i++);
        if (calls) cJSON_AddItemToObject(delta, "tool_calls", calls);
    }
    return chunk_end(root, c, logprobs_json, finish, t);
}

char *api_completion_chunk(const char *id, long created, const char *model, const char *text, size_t n_text,
                           const char *finish, const char *logprobs_json, const srv_usage *usage, const srv_timings *t) {
    cJSON *c;
    cJSON *root = chunk_begin(id, created, model, "text_completion", usage, &c);
    if (!c) return print_free(root);
    add_text(c, "text", text, n_text);
    cJSON_AddNumberToObject(c, "index", 0);
    return chunk_end(root, c, logprobs_json, finish, t);
}

/* ---- logprobs ------------------------------------------------------------------------------ */

void api_logprob_compute(const float *logits, int32_t n_vocab, int32_t tok, int n_top, srv_logprob *e) {
    if (n_top < 0) n_top = 0;
    if (n_top > SRV_MAX_TOP_LOGPROBS) n_top = SRV_MAX_TOP_LOGPROBS;
    double mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];           /* NaN compares false: skipped */
    double sum = 0;
    if (isfinite(mx))
        for (int32_t i = 0; i < n_vocab; i++)
            if (logits[i] > -INFINITY) sum += exp((double)logits[i] - mx);   /* NaN: false, skipped */
    const double lse = isfinite(mx) ? mx + log(sum) : 0;
#define LP(i) (logits[i] > -INFINITY && isfinite(mx) ? (float)((double)logits[i] - lse) : -INFINITY)
    e->tok = tok;
    e->lp = tok >= 0 && tok < n_vocab ? LP(tok) : -INFINITY;
    /* the n_top largest, kept sorted (descending; on ties the lower id stays first): insertion */
    float topv[SRV_MAX_TOP_LOGPROBS];
    int k = 0;
    for (int32_t i = 0; i < n_vocab && n_top > 0; i++) {
        const float v = logits[i] == logits[i] ? logits[i] : -INFINITY;
        if (k == n_top && !(v > topv[k - 1])) continue;
        int at = k < n_top ? k++ : n_top - 1;
        while (at > 0 && topv[at - 1] < v) {
            topv[at] = topv[at - 1];
            e->top_tok[at] = e->top_tok[at - 1];
            at--;
        }
        topv[at] = v;
        e->top_tok[at] = i;
    }
    e->n_top = k;
    for (int i = 0; i < k; i++) e->top_lp[i] = LP(e->top_tok[i]);
#undef LP
}

/* The piece of a token (control tokens as their text), raw bytes in buf (cap 256); returns length. */
static int token_bytes(const tern_model *m, int32_t id, char *buf, int cap) {
    int n = tern_token_piece(m, id, true, buf, cap);
    return n < 0 || n > cap ? 0 : n;                  /* a piece over 256 bytes: shown empty */
}

static cJSON *lp_number(float v) {
    return cJSON_CreateNumber(isfinite(v) ? (double)v : -9999.0);   /* JSON has no -inf: OpenAI's floor */
}

static cJSON *chat_lp_entry(const tern_model *m, int32_t tok, float lp) {
    char buf[256];
    const int n = token_bytes(m, tok, buf, sizeof buf);
    cJSON *o = cJSON_CreateObject();
    add_text(o, "token", buf, (size_t)n);
    cJSON_AddItemToObject(o, "logprob", lp_number(lp));
    cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[i]));
    return o;
}

char *api_logprobs_json(const tern_model *m, srv_kind kind, const srv_logprob *e, int n, size_t *text_offset) {
    cJSON *root = cJSON_CreateObject();
    if (kind == SRV_CHAT) {
        cJSON *content = cJSON_AddArrayToObject(root, "content");
        for (int i = 0; i < n; i++) {
            cJSON *o = chat_lp_entry(m, e[i].tok, e[i].lp);
            cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
            for (int k = 0; k < e[i].n_top; k++) cJSON_AddItemToArray(top, chat_lp_entry(m, e[i].top_tok[k], e[i].top_lp[k]));
            cJSON_AddItemToArray(content, o);
        }
        cJSON_AddNullToObject(root, "refusal");
    } else {
        cJSON *tokens = cJSON_AddArrayToObject(root, "tokens"), *lps = cJSON_AddArrayToObject(root, "token_logprobs");
        cJSON *tops = cJSON_AddArrayToObject(root, "top_logprobs"), *offs = cJSON_AddArrayToObject(root, "text_offset");
        for (int i = 0; i < n; i++) {
            char buf[256];
            const int nb = token_bytes(m, e[i].tok, buf, sizeof buf);
            char *t = api_utf8_dup(buf, (size_t)nb);
            cJSON_AddItemToArray(tokens, cJSON_CreateString(t ? t : ""));
            free(t);
            cJSON_AddItemToArray(lps, lp_number(e[i].lp));
            cJSON *top = cJSON_CreateObject();
            for (int k = 0; k < e[i].n_top; k++) {   /* keyed by text: the first of equal texts wins */
                const int nk = token_bytes(m, e[i].top_tok[k], buf, sizeof buf);
                char *tk = api_utf8_dup(buf, (size_t)nk);
                if (tk && !cJSON_GetObjectItemCaseSensitive(top, tk)) cJSON_AddItemToObject(top, tk, lp_number(e[i].top_lp[k]));
                free(tk);
            }
            cJSON_AddItemToArray(tops, top);
            cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*text_offset));
            const int nv = tern_token_piece(m, e[i].tok, false, NULL, 0);   /* its bytes in the text: none for a control token */
            *text_offset += nv > 0 ? (size_t)nv : 0;
        }
    }
    return print_free(root);
}
