/* info.c: the endpoints that run no generation (see info.h). */
#include "info.h"
#include "prompt.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An optional boolean field: false with e set (400 naming it) when it is not a boolean. */
static bool opt_bool(const cJSON *root, const char *name, bool *out, srv_error *e) {
    const cJSON *f = api_field(root, name);
    if (!f) return true;
    char g[32];
    if (!cJSON_IsBool(f))
        return srv_fail(e, 400, "invalid_request_error", name, "'%s' must be true or false, got %s", name, api_got(f, g));
    *out = cJSON_IsTrue(f);
    return true;
}

/* True if b[0..n) is valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF). */
static bool utf8_valid(const unsigned char *b, size_t n) {
    size_t i = 0;
    while (i < n) {
        const unsigned c = b[i];
        size_t k;
        unsigned cp;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return false;
        if (i + k >= n) return false;                /* the sequence runs past the end */
        for (size_t j = 1; j <= k; j++) {
            if ((b[i + j] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (b[i + j] & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
        i += k + 1;
    }
    return true;
}

/* The bytes of token id (control tokens as their text) into a fresh buffer; *n its length. */
static char *piece_dup(const tern_model *m, int32_t id, int *n) {
    char small[256];
    int k = tern_token_piece(m, id, true, small, sizeof small);
    if (k < 0) return NULL;
    char *p = malloc((size_t)k + 1);
    if (!p) return NULL;
    if (k <= (int)sizeof small) memcpy(p, small, (size_t)k);
    else if (tern_token_piece(m, id, true, p, k) != k) { free(p); return NULL; }
    p[k] = '\0';
    *n = k;
    return p;
}

char *info_tokenize(const tern_model *m, const char *body, size_t len, srv_error *e) {
    cJSON *root = api_parse_body(body, len, e);
    if (!root) return NULL;
    char *out = NULL;
    int32_t *ids = NULL;
    cJSON *res = NULL;
    bool add_special = false, parse_special = true, with_pieces = false;
    const cJSON *content = api_field(root, "content");
    if (!content) { srv_fail(e, 400, "invalid_request_error", "content", "'content' is required: a string"); goto done; }
    if (!cJSON_IsString(content)) {
        char g[32];
        srv_fail(e, 400, "invalid_request_error", "content", "'content' must be a string, got %s", api_got(content, g));
        goto done;
    }
    if (!opt_bool(root, "add_special", &add_special, e) || !opt_bool(root, "parse_special", &parse_special, e) ||
        !opt_bool(root, "with_pieces", &with_pieces, e))
        goto done;
    const char *text = content->valuestring;
    const size_t n_text = strlen(text);
    tern_err err = {0};
    int n = 0;
    int rc = tern_tokenize(m, text, n_text, add_special, parse_special, NULL, 0, &n, &err);
    if (rc != TERN_OK && rc != TERN_E_RANGE) { srv_fail(e, 400, "invalid_request_error", "content", "%s", err.msg); goto done; }
    ids = malloc(sizeof *ids * (size_t)(n > 0 ? n : 1));
    if (!ids) { srv_fail(e, 500, "server_error", NULL, "out of memory"); goto done; }
    if (n > 0 && (rc = tern_tokenize(m, text, n_text, add_special, parse_special, ids, n, &n, &err)) != TERN_OK) {
        srv_fail(e, 400, "invalid_request_error", "content", "%s", err.msg);
        goto done;
    }
    res = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(res, "tokens");
    for (int i = 0; i < n; i++) {
        if (!with_pieces) { cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i])); continue; }
        int k = 0;
        char *p = piece_dup(m, ids[i], &k);
        if (!p) { srv_fail(e, 500, "server_error", NULL, "out of memory"); goto done; }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", ids[i]);
        if (utf8_valid((const unsigned char *)p, (size_t)k)) cJSON_AddStringToObject(o, "piece", p);
        else {
            cJSON *bytes = cJSON_AddArrayToObject(o, "piece");
            for (int b = 0; b < k; b++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)p[b]));
        }
        free(p);
        cJSON_AddItemToArray(arr, o);
    }
    out = api_print_free(res);
    res = NULL;
    if (!out) srv_fail(e, 500, "server_error", NULL, "out of memory");
done:
    cJSON_Delete(res);
    free(ids);
    cJSON_Delete(root);
    return out;
}

char *info_detokenize(const tern_model *m, const char *body, size_t len, srv_error *e) {
    cJSON *root = api_parse_body(body, len, e);
    if (!root) return NULL;
    char *out = NULL, *text = NULL;
    size_t n_text = 0, cap = 0;
    tern_model_info info;
    tern_model_get_info(m, &info);
    const cJSON *toks = api_field(root, "tokens");
    if (!toks) { srv_fail(e, 400, "invalid_request_error", "tokens", "'tokens' is required: an array of token ids"); goto done; }
    if (!cJSON_IsArray(toks)) {
        char g[32];
        srv_fail(e, 400, "invalid_request_error", "tokens", "'tokens' must be an array of token ids, got %s", api_got(toks, g));
        goto done;
    }
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, toks) {
        const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (!(d >= 0 && d < info.n_vocab && d == floor(d))) {
            char g[32], param[32];   /* the element, as other fields name theirs (messages[1].role, stop[2]) */
            snprintf(param, sizeof param, "tokens[%d]", i);
            srv_fail(e, 400, "invalid_request_error", param, "'%s' must be a token id in 0..%d, got %s", param,
                     info.n_vocab - 1, api_got(v, g));
            goto done;
        }
        int k = 0;
        char *p = piece_dup(m, (int32_t)d, &k);
        if (!p) { srv_fail(e, 500, "server_error", NULL, "out of memory"); goto done; }
        if (n_text + (size_t)k + 1 > cap) {
            const size_t nc = (n_text + (size_t)k + 1) * 2;
            char *t = realloc(text, nc);
            if (!t) { free(p); srv_fail(e, 500, "server_error", NULL, "out of memory"); goto done; }
            text = t;
            cap = nc;
        }
        memcpy(text + n_text, p, (size_t)k);
        n_text += (size_t)k;
        free(p);
        i++;
    }
    char *fixed = api_utf8_dup(text ? text : "", n_text);
    cJSON *res = cJSON_CreateObject();
    if (!fixed || !res || !cJSON_AddStringToObject(res, "content", fixed)) {
        cJSON_Delete(res);
        free(fixed);
        srv_fail(e, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    free(fixed);
    out = api_print_free(res);
    if (!out) srv_fail(e, 500, "server_error", NULL, "out of memory");
done:
    free(text);
    cJSON_Delete(root);
    return out;
}

char *info_apply_template(const tern_model *m, const char *tmpl, srv_tools_fmt fmt, const char *body, size_t len,
                          srv_error *e) {
    srv_request r;
    if (!api_parse_request_fmt(SRV_CHAT, fmt, body, len, &r, e)) return NULL;
    prompt_ids ids = {0};
    char *text = NULL, *out = NULL;
    tern_err err = {0};
    if (prompt_chat_append_ex(m, tmpl, r.msgs, r.trusted, r.n_msgs, true, r.enable_thinking, true, &ids, &text, &err) !=
        TERN_OK) {
        srv_fail(e, 400, "invalid_request_error", "messages", "%s", err.msg);
        goto done;
    }
    char *fixed = api_utf8_dup(text, strlen(text));
    cJSON *res = cJSON_CreateObject();
    if (fixed && res && cJSON_AddStringToObject(res, "prompt", fixed)) out = api_print_free(res);
    else cJSON_Delete(res);
    free(fixed);
    if (!out) srv_fail(e, 500, "server_error", NULL, "out of memory");
done:
    free(text);
    prompt_ids_free(&ids);
    api_request_free(&r);
    return out;
}

char *info_props(const tern_model *m, const info_props_in *in) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model_alias", in->model_name);
    if (in->model_path) {
        char *p = api_utf8_dup(in->model_path, strlen(in->model_path));
        if (p) cJSON_AddStringToObject(root, "model_path", p);
        free(p);
    }
    cJSON_AddNumberToObject(root, "total_slots", in->n_slots);
    /* the template in force: the name given with --chat-template, else the file's Jinja text
     * (tern renders it by its detected family), else "chatml" (the fallback, by its name) */
    const int n_t = tern_model_meta_str(m, "tokenizer.chat_template", NULL, 0);
    char *t = NULL;
    if (in->tmpl) t = api_utf8_dup(in->tmpl, strlen(in->tmpl));
    else if (n_t >= 0 && (t = malloc((size_t)n_t + 1))) {
        tern_model_meta_str(m, "tokenizer.chat_template", t, (size_t)n_t + 1);
        char *fixed = api_utf8_dup(t, (size_t)n_t);
        free(t);
        t = fixed;
    }
    cJSON_AddStringToObject(root, "chat_template", t ? t : "chatml");
    free(t);
    cJSON_AddStringToObject(root, "build_info", "tern " TERN_VERSION);
    tern_model_info info;
    tern_model_get_info(m, &info);
    cJSON *dg = cJSON_AddObjectToObject(root, "default_generation_settings");
    cJSON_AddNumberToObject(dg, "n_ctx", in->n_ctx);
    cJSON *params = cJSON_AddObjectToObject(dg, "params");
    tern_sampler_params sp;
    tern_sampler_params_default(&sp);
    cJSON_AddNumberToObject(params, "temperature", sp.temp);
    cJSON_AddNumberToObject(params, "top_k", sp.top_k);
    cJSON_AddNumberToObject(params, "top_p", sp.top_p);
    cJSON_AddNumberToObject(params, "min_p", sp.min_p);
    cJSON_AddNumberToObject(params, "repeat_penalty", sp.repeat_penalty);
    cJSON_AddNumberToObject(params, "repeat_last_n", sp.repeat_last_n);
    cJSON_AddNumberToObject(params, "n_predict", -1);
    cJSON *mod = cJSON_AddObjectToObject(root, "modalities");
    cJSON_AddBoolToObject(mod, "vision", false);
    cJSON_AddBoolToObject(mod, "audio", false);
    cJSON_AddNumberToObject(root, "n_vocab", info.n_vocab);
    cJSON_AddNumberToObject(root, "n_ctx_train", info.n_ctx_train);
    cJSON_AddStringToObject(root, "arch", info.arch);
    return api_print_free(root);
}

char *info_slots(const srv_slot_info *si, int n) {
    cJSON *root = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", si[i].id);
        cJSON_AddNumberToObject(o, "n_ctx", si[i].n_ctx);
        cJSON_AddBoolToObject(o, "is_processing", si[i].busy);
        cJSON_AddStringToObject(o, "id_task", si[i].job_id);
        cJSON_AddNumberToObject(o, "n_prompt_tokens", si[i].n_prompt);
        cJSON_AddNumberToObject(o, "n_prompt_tokens_processed", si[i].n_prefilled);
        cJSON_AddNumberToObject(o, "n_decoded", si[i].n_decoded);
        cJSON_AddNumberToObject(o, "n_cached_tokens", si[i].n_cached);
        cJSON_AddItemToArray(root, o);
    }
    return api_print_free(root);
}

char *info_model(const char *list_json, const char *id, srv_error *e) {
    cJSON *list = list_json ? cJSON_Parse(list_json) : NULL;
    const cJSON *m;
    cJSON *found = NULL;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(list, "data")) {
        const cJSON *mid = cJSON_GetObjectItem(m, "id");
        if (!found && cJSON_IsString(mid) && !strcmp(mid->valuestring, id)) found = cJSON_Duplicate(m, true);
    }
    cJSON_Delete(list);
    if (!found) return api_model_not_found(e, id), NULL;
    return api_print_free(found);
}
