/* hf_import.c: Hugging Face tokenizer.json (+ tokenizer_config.json, config.json) ->
 * tokenizer.ggml.* keys, following llama.cpp's convert_hf_to_gguf.py for Qwen3 (rules in
 * hf_import.h). JSON is parsed by cJSON; nothing here is on a hot path. */
#include "tokenizer/hf_import.h"
#include "tokenizer/tok_impl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz + 1))) {
            if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) { free(buf); buf = NULL; }
            else { buf[sz] = 0; *len = (size_t)sz; }
        }
    }
    fclose(f);
    return buf;
}

/* Parse a JSON file; *root NULL and TERN_OK when the file is absent and !required. */
static int parse_json(const char *path, bool required, cJSON **root, tern_err *err) {
    *root = NULL;
    size_t len = 0;
    char *buf = read_file(path, &len);
    if (!buf) return required ? tern_err_set(err, TERN_E_IO, "cannot read '%s'", path) : TERN_OK;
    *root = cJSON_ParseWithLength(buf, len);
    if (!*root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= buf && at <= buf + len ? (long)(at - buf) : -1;
        free(buf);
        return tern_err_set(err, TERN_E_FORMAT, "'%s': invalid JSON near byte %ld", path, off);
    }
    free(buf);
    return TERN_OK;
}

static bool json_id(const cJSON *j, int64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (d < 0 || d > 2147483647.0 || d != (double)(int64_t)d) return false;
    *out = (int64_t)d;
    return true;
}

/* What v is, for "got ..." in messages: a number as written back, else its JSON kind. */
static const char *json_got(const cJSON *v, char buf[48]) {
    if (!v) return "nothing";
    if (cJSON_IsNumber(v)) { snprintf(buf, 48, "%.17g", v->valuedouble); return buf; }
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
    return cJSON_IsArray(v) ? "an array" : "an object";
}

/* convert_hf_to_gguf.py does_token_look_special */
static bool looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    if (n >= 8 && !strncmp(t, "<\xEF\xBD\x9C", 4) && !strcmp(t + n - 4, "\xEF\xBD\x9C>")) return true;   /* <｜...｜> */
    if (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>') return true;
    return false;
}

void tok_hf_free(tok_hf *h) {
    if (!h) return;
    free(h->tokens); free(h->types); free(h->merges); free(h->chat_template); free(h->arena);
    free(h);
}

typedef struct { const char *s; int kind; } row_src;   /* kind: 0 none, 1 vocab, 2 added special, 3 added user */

/* A token name from the config (string or {"content": s}) -> id, or -1. */
static int32_t config_token_id(const cJSON *cfg, const char *key, const row_src *rows, int32_t n_rows,
                               const cJSON *vocab, const cJSON *added) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(t)) t = cJSON_GetObjectItemCaseSensitive(t, "content");
    if (!cJSON_IsString(t)) return -1;
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "content");
        int64_t id;
        if (cJSON_IsString(c) && !strcmp(c->valuestring, t->valuestring) && json_id(cJSON_GetObjectItemCaseSensitive(a, "id"), &id)) return (int32_t)id;
    }
    int64_t id;
    if (json_id(cJSON_GetObjectItemCaseSensitive(vocab, t->valuestring), &id) && id < n_rows && rows[id].kind) return (int32_t)id;
    return -2;                                                   /* named but unknown */
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Whether s is one of the n sorted texts (strcmp order). */
static bool in_sorted(const char *const *sorted, size_t n, const char *s) {
    return bsearch(&s, sorted, n, sizeof *sorted, cmp_str) != NULL;
}

/* The part of merge it (a "a b" string whose left part has been checked, or an [a, b] pair)
 * that is not a token of model.vocab (sorted, n texts): left, right, or their join, written to
 * buf (capacity cap: the merge's length + 2); NULL when all three are tokens. */
static const char *merge_missing(const cJSON *it, size_t na, const char *const *sorted, size_t n, char *buf, size_t cap) {
    const char *a, *b;
    size_t la, lb;
    if (cJSON_IsString(it)) {
        a = it->valuestring;
        la = na;
        b = it->valuestring + na + 1;
    } else {
        a = cJSON_GetArrayItem(it, 0)->valuestring;
        la = strlen(a);
        b = cJSON_GetArrayItem(it, 1)->valuestring;
    }
    lb = strlen(b);
    TERN_DASSERT(la + lb + 2 <= cap);
    (void)cap;
    memcpy(buf, a, la);
    buf[la] = 0;
    if (!in_sorted(sorted, n, buf)) return buf;
    if (!in_sorted(sorted, n, b)) return b;
    memcpy(buf + la, b, lb + 1);
    return in_sorted(sorted, n, buf) ? NULL : buf;
}

int tok_hf_load(tok_hf **out, const char *path, const tok_hf_opts *opts, tern_err *err) {
    *out = NULL;
    tok_hf_opts def = {0};
    if (!opts) opts = &def;
    cJSON *root = NULL, *cfg = NULL, *mcfg = NULL;
    row_src *rows = NULL;
    tok_hf *h = NULL;
    char *dir = NULL, *mbuf = NULL;
    const char **sorted = NULL;
    int rc = parse_json(path, true, &root, err);
    if (rc) return rc;

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(model) || (mtype && (!cJSON_IsString(mtype) || strcmp(mtype->valuestring, "BPE")))) {
        rc = tern_err_set(err, TERN_E_FORMAT, "'%s': model.type: expected \"BPE\", got %s", path, cJSON_IsString(mtype) ? mtype->valuestring : "(none)");
        goto fail;
    }
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        rc = tern_err_set(err, TERN_E_FORMAT, "'%s': expected model.vocab (object) and model.merges (array)", path);
        goto fail;
    }
    if (added && !cJSON_IsArray(added)) { rc = tern_err_set(err, TERN_E_FORMAT, "'%s': added_tokens: expected an array", path); goto fail; }

    /* tokenizer_config.json and config.json beside tokenizer.json */
    {
        const char *slash = strrchr(path, '/');
        size_t dn = slash ? (size_t)(slash - path) + 1 : 0;
        dir = malloc(dn + 32);
        if (!dir) { rc = tern_err_set(err, TERN_E_NOMEM, "out of memory"); goto fail; }
        memcpy(dir, path, dn);
        strcpy(dir + dn, "tokenizer_config.json");
        if ((rc = parse_json(dir, false, &cfg, err))) goto fail;
        strcpy(dir + dn, "config.json");
        if ((rc = parse_json(dir, false, &mcfg, err))) goto fail;
    }

    /* rows */
    int64_t max_id = -1;
    const cJSON *it;
    char got[48];
    cJSON_ArrayForEach(it, vocab) {
        int64_t id;
        if (!json_id(it, &id)) {
            rc = tern_err_set(err, TERN_E_FORMAT, "'%s': model.vocab[\"%s\"]: expected an integer id in 0..%d, got %s", path,
                              it->string, TOK_HF_MAX_ROWS - 1, json_got(it, got));
            goto fail;
        }
        if (id > max_id) max_id = id;
    }
    int ia = 0;
    cJSON_ArrayForEach(it, added) {
        int64_t id;
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(it, "id"), *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!json_id(jid, &id)) {
            rc = tern_err_set(err, TERN_E_FORMAT, "'%s': added_tokens[%d].id: expected an integer in 0..%d, got %s", path, ia,
                              TOK_HF_MAX_ROWS - 1, json_got(jid, got));
            goto fail;
        }
        if (!cJSON_IsString(c) || !c->valuestring[0]) {
            rc = tern_err_set(err, TERN_E_FORMAT, "'%s': added_tokens[%d].content: expected a non-empty string, got %s", path,
                              ia, cJSON_IsString(c) ? "\"\"" : json_got(c, got));
            goto fail;
        }
        if (id > max_id) max_id = id;
        ia++;
    }
    if (max_id < 0) { rc = tern_err_set(err, TERN_E_FORMAT, "'%s': empty vocabulary", path); goto fail; }
    /* the rows are max id + 1 (the gaps become [PAD<id>] tokens): an id far past the vocabulary
     * would turn a few bytes of JSON into a model of millions of rows */
    if (max_id >= TOK_HF_MAX_ROWS) {
        rc = tern_err_set(err, TERN_E_FORMAT, "'%s': token id %lld: expected ids below %d (the largest vocabulary tern writes), got %lld",
                          path, (long long)max_id, TOK_HF_MAX_ROWS, (long long)max_id);
        goto fail;
    }
    /* byte-level BPE: every byte has its token (the loader refuses a vocabulary without one) */
    for (int b = 0; b < 256; b++) {
        const uint32_t cp = tok_byte_cp(b);
        char u[3];
        const size_t un = cp < 0x80 ? 1 : 2;   /* the alphabet stops at U+0143 */
        if (un == 1) u[0] = (char)cp;
        else { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); }
        u[un] = 0;
        if (!cJSON_GetObjectItemCaseSensitive(vocab, u)) {
            rc = tern_err_set(err, TERN_E_FORMAT,
                              "'%s': model.vocab: byte-level BPE needs a token for each of the 256 bytes; byte 0x%02X (\"%s\") has none",
                              path, b, u);
            goto fail;
        }
    }
    int32_t n_rows = opts->n_rows > 0 ? opts->n_rows : (int32_t)(max_id + 1);
    if (max_id >= n_rows) { rc = tern_err_set(err, TERN_E_FORMAT, "'%s': token id %lld does not fit in %d embedding rows", path, (long long)max_id, n_rows); goto fail; }
    rows = calloc((size_t)n_rows, sizeof *rows);
    h = calloc(1, sizeof *h);
    if (!rows || !h) { rc = tern_err_set(err, TERN_E_NOMEM, "out of memory for %d rows", n_rows); goto fail; }
    cJSON_ArrayForEach(it, vocab) {
        int64_t id = 0;
        json_id(it, &id);
        if (rows[id].kind) { rc = tern_err_set(err, TERN_E_FORMAT, "'%s': model.vocab: id %lld used twice (\"%s\")", path, (long long)id, it->string); goto fail; }
        rows[id] = (row_src){it->string, 1};
    }
    ia = 0;
    cJSON_ArrayForEach(it, added) {
        int64_t id = 0;
        json_id(cJSON_GetObjectItemCaseSensitive(it, "id"), &id);
        const char *c = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
        bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special"));
        /* an added token may repeat its id's vocabulary text (or an earlier added token's), never
         * replace it: the vocabulary's byte tokens and merges refer to those texts */
        if (rows[id].kind && strcmp(rows[id].s, c) != 0) {
            rc = tern_err_set(err, TERN_E_FORMAT, "'%s': added_tokens[%d]: id %lld is %s \"%.64s\" already, got content \"%.64s\"",
                              path, ia, (long long)id, rows[id].kind == 1 ? "model.vocab's" : "an earlier added token's",
                              rows[id].s, c);
            goto fail;
        }
        rows[id] = (row_src){c, special || looks_special(c) ? 2 : 3};
        ia++;
    }

    /* arena: tokens (USER_DEFINED: U+2581 -> ' ' only shrinks), "[PAD<id>]", merges */
    size_t total = 0;
    for (int32_t i = 0; i < n_rows; i++) total += rows[i].kind ? strlen(rows[i].s) : 24;
    /* A merge is stored as "left right" and read back by splitting at the first space after its
     * first byte (tok_build, as llama.cpp): so the left part must be non-empty and hold no space,
     * or the file would not load (or would split elsewhere). Byte-level tokens never hold a
     * space (it is written U+0120), so real tokenizers always pass. Its two parts and their join
     * must be tokens of model.vocab, as Hugging Face's tokenizers require (a merge naming
     * anything else could never apply: tok_build would drop it without a word). */
    const size_t n_sorted = (size_t)cJSON_GetArraySize(vocab);
    sorted = malloc((n_sorted ? n_sorted : 1) * sizeof *sorted);
    if (!sorted) { rc = tern_err_set(err, TERN_E_NOMEM, "out of memory for %zu vocabulary texts", n_sorted); goto fail; }
    size_t ks = 0;
    cJSON_ArrayForEach(it, vocab) sorted[ks++] = it->string;
    qsort(sorted, n_sorted, sizeof *sorted, cmp_str);
    size_t mcap = 0;
    int n_merges = cJSON_GetArraySize(merges), im = 0;
    cJSON_ArrayForEach(it, merges) {
        const char *a = NULL;
        size_t na = 0;
        if (cJSON_IsString(it)) {
            const char *sp = it->valuestring[0] ? strchr(it->valuestring + 1, ' ') : NULL;
            total += strlen(it->valuestring);
            a = it->valuestring;
            na = sp ? (size_t)(sp - a) : 0;
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring;
            na = strlen(a);
            total += na + 1 + strlen(cJSON_GetArrayItem(it, 1)->valuestring);
        } else {
            rc = tern_err_set(err, TERN_E_FORMAT, "'%s': model.merges[%d]: expected \"a b\" or [\"a\", \"b\"], got %s", path, im,
                              json_got(it, (char[48]){0}));
            goto fail;
        }
        if (na == 0 || memchr(a, ' ', na)) {
            const size_t la = strlen(a);
            int cut = la > 40 ? 40 : (int)la;   /* quoted up to 40 bytes, cut before a UTF-8 continuation byte */
            while (cut > 0 && (size_t)cut < la && ((unsigned char)a[cut] & 0xC0) == 0x80) cut--;
            rc = tern_err_set(err, TERN_E_FORMAT, "'%s': model.merges[%d]: expected a non-empty left token without spaces and "
                              "a right token (\"a b\" or [\"a\", \"b\"]), got \"%.*s\"%s", path, im, cut, a,
                              (size_t)cut < la ? "..." : "");
            goto fail;
        }
        const size_t need = (cJSON_IsString(it) ? strlen(a) : na + strlen(cJSON_GetArrayItem(it, 1)->valuestring)) + 2;
        if (need > mcap) {
            char *nb = realloc(mbuf, need);
            if (!nb) { rc = tern_err_set(err, TERN_E_NOMEM, "out of memory"); goto fail; }
            mbuf = nb;
            mcap = need;
        }
        const char *missing = merge_missing(it, na, sorted, n_sorted, mbuf, mcap);
        if (missing) {
            const size_t lm = strlen(missing);
            int cut = lm > 40 ? 40 : (int)lm;
            while (cut > 0 && (size_t)cut < lm && ((unsigned char)missing[cut] & 0xC0) == 0x80) cut--;
            rc = tern_err_set(err, TERN_E_FORMAT, "'%s': model.merges[%d]: expected two tokens of model.vocab whose join is a "
                              "token too, got \"%.*s\"%s, which is not in model.vocab", path, im, cut, missing,
                              (size_t)cut < lm ? "..." : "");
            goto fail;
        }
        im++;
    }
    h->arena = malloc(total + 1);
    h->tokens = malloc((size_t)n_rows * sizeof *h->tokens);
    h->types = malloc((size_t)n_rows * sizeof *h->types);
    h->merges = malloc(((size_t)n_merges + 1) * sizeof *h->merges);
    if (!h->arena || !h->tokens || !h->types || !h->merges) { rc = tern_err_set(err, TERN_E_NOMEM, "out of memory"); goto fail; }
    size_t o = 0;
    for (int32_t i = 0; i < n_rows; i++) {
        char *dst = h->arena + o;
        size_t n;
        if (!rows[i].kind) { n = (size_t)sprintf(dst, "[PAD%d]", i); h->types[i] = TOK_TYPE_UNUSED; }
        else if (rows[i].kind == 3) {                            /* pre-normalise user-defined spaces */
            n = 0;
            for (const char *s = rows[i].s; *s;) {
                if (!strncmp(s, "\xE2\x96\x81", 3)) { dst[n++] = ' '; s += 3; }
                else dst[n++] = *s++;
            }
            h->types[i] = TOK_TYPE_USER_DEFINED;
        } else {
            n = strlen(rows[i].s);
            memcpy(dst, rows[i].s, n);
            h->types[i] = rows[i].kind == 1 ? TOK_TYPE_NORMAL : TOK_TYPE_CONTROL;
        }
        h->tokens[i] = (gguf_str){dst, n};
        o += n;
    }
    int32_t nm = 0;
    cJSON_ArrayForEach(it, merges) {
        char *dst = h->arena + o;
        size_t n;
        if (cJSON_IsString(it)) { n = strlen(it->valuestring); memcpy(dst, it->valuestring, n); }
        else {
            const char *a = cJSON_GetArrayItem(it, 0)->valuestring, *b = cJSON_GetArrayItem(it, 1)->valuestring;
            size_t na = strlen(a), nb = strlen(b);
            memcpy(dst, a, na); dst[na] = ' '; memcpy(dst + na + 1, b, nb);
            n = na + 1 + nb;
        }
        h->merges[nm++] = (gguf_str){dst, n};
        o += n;
    }
    h->n_vocab = n_rows;
    h->n_merges = nm;
    snprintf(h->pre, sizeof h->pre, "%s", opts->pre ? opts->pre : "qwen2");

    /* special ids, add_bos, chat template */
    h->bos = h->eos = h->pad = -1;
    h->add_bos = -1;
    int32_t *ids[3] = {&h->bos, &h->eos, &h->pad};
    static const char *const names[3] = {"bos_token", "eos_token", "pad_token"};
    static const char *const cfg_names[3] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    for (int k = 0; k < 3; k++) {
        int32_t id = cfg ? config_token_id(cfg, names[k], rows, n_rows, vocab, added) : -1;
        if (id == -2) {
            rc = tern_err_set(err, TERN_E_FORMAT, "tokenizer_config.json: %s names a token that is not in the vocabulary", names[k]);
            goto fail;
        }
        if (id < 0 && mcfg) {                                    /* SpecialVocab: config.json fallback */
            int64_t x;
            if (json_id(cJSON_GetObjectItemCaseSensitive(mcfg, cfg_names[k]), &x) && x < n_rows) id = (int32_t)x;
        }
        *ids[k] = id;
    }
    if (h->bos < 0 && !mcfg && cfg) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class");
        if (cJSON_IsString(cls) && !strcmp(cls->valuestring, "Qwen2Tokenizer"))
            for (int32_t i = 0; i < n_rows; i++)
                if (rows[i].kind >= 2 && !strcmp(rows[i].s, "<|endoftext|>")) { h->bos = i; break; }
    }
    if (cfg) {
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        if (cJSON_IsBool(ab)) h->add_bos = cJSON_IsTrue(ab);
    }
    const char *tmpl = opts->chat_template;
    if (!tmpl && cfg) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        if (cJSON_IsString(ct)) tmpl = ct->valuestring;
        else if (cJSON_IsArray(ct)) {                            /* [{name, template}]: the default one */
            cJSON_ArrayForEach(it, ct) {
                const cJSON *nm_ = cJSON_GetObjectItemCaseSensitive(it, "name"), *tt = cJSON_GetObjectItemCaseSensitive(it, "template");
                if (cJSON_IsString(nm_) && !strcmp(nm_->valuestring, "default") && cJSON_IsString(tt)) tmpl = tt->valuestring;
            }
        }
    }
    if (tmpl && !(h->chat_template = strdup(tmpl))) { rc = tern_err_set(err, TERN_E_NOMEM, "out of memory"); goto fail; }

    cJSON_Delete(root); cJSON_Delete(cfg); cJSON_Delete(mcfg);
    free(rows); free(dir); free(mbuf); free(sorted);
    *out = h;
    return TERN_OK;
fail:
    cJSON_Delete(root); cJSON_Delete(cfg); cJSON_Delete(mcfg);
    free(rows); free(dir); free(mbuf); free(sorted);
    tok_hf_free(h);
    return rc;
}

int tok_hf_write(const tok_hf *h, gguf_writer *w, tern_err *err) {
    int rc = TERN_OK;
    const char **strs = malloc(((size_t)h->n_vocab + (size_t)h->n_merges + 1) * sizeof *strs);
    uint64_t *lens = malloc(((size_t)h->n_vocab + (size_t)h->n_merges + 1) * sizeof *lens);
    if (!strs || !lens) { free(strs); free(lens); return tern_err_set(err, TERN_E_NOMEM, "out of memory"); }
    for (int32_t i = 0; i < h->n_vocab; i++) { strs[i] = h->tokens[i].p; lens[i] = h->tokens[i].n; }
#define W(call, what) do { if (!rc && (rc = (call)) != TERN_OK) tern_err_set(err, rc, "gguf writer: cannot set %s", what); } while (0)
    W(gguf_w_set_str(w, "tokenizer.ggml.model", "gpt2"), "tokenizer.ggml.model");
    W(gguf_w_set_str(w, "tokenizer.ggml.pre", h->pre), "tokenizer.ggml.pre");
    W(gguf_w_set_arr_str(w, "tokenizer.ggml.tokens", strs, lens, (uint64_t)h->n_vocab), "tokenizer.ggml.tokens");
    W(gguf_w_set_arr(w, "tokenizer.ggml.token_type", GGUF_T_I32, h->types, (uint64_t)h->n_vocab), "tokenizer.ggml.token_type");
    for (int32_t i = 0; i < h->n_merges; i++) { strs[i] = h->merges[i].p; lens[i] = h->merges[i].n; }
    W(gguf_w_set_arr_str(w, "tokenizer.ggml.merges", strs, lens, (uint64_t)h->n_merges), "tokenizer.ggml.merges");
    if (h->bos >= 0) W(gguf_w_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)h->bos), "tokenizer.ggml.bos_token_id");
    if (h->pad >= 0) W(gguf_w_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)h->pad), "tokenizer.ggml.padding_token_id");
    if (h->eos >= 0) W(gguf_w_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)h->eos), "tokenizer.ggml.eos_token_id");
    if (h->add_bos >= 0) W(gguf_w_set_bool(w, "tokenizer.ggml.add_bos_token", h->add_bos != 0), "tokenizer.ggml.add_bos_token");
    if (h->chat_template) W(gguf_w_set_str(w, "tokenizer.chat_template", h->chat_template), "tokenizer.chat_template");
#undef W
    free(strs);
    free(lens);
    return rc;
}

