/* hadamard_meta.c: reading and strict validation of the prism.hadamard.* keys (spec 4.1), kept
 * apart from the math in hadamard.c so the transform itself does not depend on the GGUF reader.
 * Every refusal names the key, what was expected and what was found. */
#include "model/hadamard.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

/* ---- prism.hadamard.* validation ---------------------------------------------------------- */

#define HP "prism.hadamard."

void had_free(had_cfg *h) {
    if (!h) return;
    for (int i = 0; i < h->n_widths; i++) free(h->signs[i]);
    free(h->folded);
    free(h->inverse);
    memset(h, 0, sizeof *h);
}

static bool str_is(gguf_str s, const char *c) { return gguf_str_eq(s, c); }

static bool name_in(const gguf_str *list, uint64_t n, const char *name) {
    for (uint64_t i = 0; i < n; i++)
        if (str_is(list[i], name)) return true;
    return false;
}

const int8_t *had_signs(const had_cfg *h, int64_t K) {
    for (int i = 0; i < h->n_widths; i++)
        if (h->widths[i] == K) return h->signs[i];
    return NULL;
}

bool had_is_folded(const had_cfg *h, const char *name) { return h->active && name_in(h->folded, h->n_folded, name); }
bool had_is_inverse(const had_cfg *h, const char *name) { return h->active && name_in(h->inverse, h->n_inverse, name); }

static bool has_width(const had_cfg *h, int64_t K) {
    for (int i = 0; i < h->n_widths; i++)
        if (h->widths[i] == K) return true;
    return false;
}

/* Read a string-array key into an owned list; every name must be a tensor whose ne[0] is a
 * multiple of n and (explicit mode) has a sign vector of that width. */
static int load_names(had_cfg *h, const gguf_ctx *g, const char *key, bool required, gguf_str **out,
                      uint64_t *n_out, tern_err *err) {
    gguf_arr a;
    int rc = gguf_get_arr(g, key, required, &a, err);
    if (rc != TERN_OK) return rc;
    if (!gguf_find_kv(g, key)) { *out = NULL; *n_out = 0; return TERN_OK; }
    if (a.type != GGUF_T_STRING)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': expected an array of strings, got an array of %s", key,
                            gguf_vtype_name(a.type));
    *out = a.n ? calloc(a.n, sizeof(gguf_str)) : NULL;
    if (a.n && !*out) return tern_err_set(err, TERN_E_NOMEM, "key '%s': out of memory", key);
    *n_out = a.n;
    for (uint64_t i = 0; i < a.n; i++) {
        const gguf_str s = a.strs[i];
        (*out)[i] = s;
        char name[256];
        if (s.n >= sizeof name || memchr(s.p, 0, s.n))
            return tern_err_set(err, TERN_E_FORMAT, "key '%s'[%llu]: not a tensor name (length %llu)", key,
                                (unsigned long long)i, (unsigned long long)s.n);
        memcpy(name, s.p, s.n);
        name[s.n] = 0;
        for (uint64_t j = 0; j < i; j++)
            if ((*out)[j].n == s.n && memcmp((*out)[j].p, s.p, s.n) == 0)
                return tern_err_set(err, TERN_E_FORMAT, "key '%s': tensor '%s' listed twice", key, name);
        const gguf_tensor *t = gguf_find_tensor(g, name);
        if (!t)
            return tern_err_set(err, TERN_E_FORMAT, "key '%s'[%llu]: tensor '%s' is not in the file", key,
                                (unsigned long long)i, name);
        if (t->ne[0] % h->block != 0)
            return tern_err_set(err, TERN_E_FORMAT,
                                "key '%s': tensor '%s' input width %lld is not a multiple of block_size %lld", key,
                                name, (long long)t->ne[0], (long long)h->block);
        if (!h->identity && !has_width(h, t->ne[0]))
            return tern_err_set(err, TERN_E_FORMAT,
                                "key '%s': tensor '%s' input width %lld has no sign vector (sign_widths has %d entries)",
                                key, name, (long long)t->ne[0], h->n_widths);
    }
    return TERN_OK;
}

int had_load(had_cfg *h, const gguf_ctx *g, tern_err *err) {
    static const char *const known[] = {
        HP "version", HP "block_size", HP "transform", HP "axis", HP "sign_mode", HP "sign_widths",
        HP "sign_values", HP "weight_names", HP "inverse_weight_names", HP "gdn_v_grouped", HP "tied_output",
    };
    memset(h, 0, sizeof *h);
    bool any = false;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const char *k = g->kv[i].key;
        if (strncmp(k, HP, strlen(HP)) != 0) continue;
        any = true;
        bool ok = false;
        for (size_t j = 0; j < sizeof known / sizeof known[0]; j++) ok = ok || strcmp(k, known[j]) == 0;
        if (!ok) return tern_err_set(err, TERN_E_UNSUPPORTED, "unknown rotation key '%s' (this engine knows the 11 keys of spec 4.1)", k);
    }
    if (!gguf_find_kv(g, HP "version")) {
        if (any) return tern_err_set(err, TERN_E_FORMAT, "prism.hadamard.* keys present but prism.hadamard.version missing");
        return TERN_OK;
    }
    int64_t v;
    gguf_str s;
    int rc;
    if ((rc = gguf_get_int(g, HP "version", true, 0, &v, err)) != TERN_OK) return rc;
    if (v != 1 && v != 2) return tern_err_set(err, TERN_E_UNSUPPORTED, "key '" HP "version': expected 1 or 2, got %lld", (long long)v);
    h->version = (int)v;
    if ((rc = gguf_get_int(g, HP "block_size", true, 0, &v, err)) != TERN_OK) return rc;
    if (v < 2 || v > (1 << 20) || (v & (v - 1)) != 0)
        return tern_err_set(err, TERN_E_FORMAT, "key '" HP "block_size': expected a power of two in [2, 2^20], got %lld", (long long)v);
    h->block = v;
    if ((rc = gguf_get_str(g, HP "transform", true, &s, err)) != TERN_OK) return rc;
    if (!str_is(s, "normalized-sylvester-walsh-hadamard"))
        return tern_err_set(err, TERN_E_UNSUPPORTED, "key '" HP "transform': expected \"normalized-sylvester-walsh-hadamard\", got \"%.*s\"",
                            (int)TERN_MIN(s.n, 64), s.p);
    if ((rc = gguf_get_str(g, HP "axis", true, &s, err)) != TERN_OK) return rc;
    if (!str_is(s, "input-last-dimension"))
        return tern_err_set(err, TERN_E_UNSUPPORTED, "key '" HP "axis': expected \"input-last-dimension\", got \"%.*s\"",
                            (int)TERN_MIN(s.n, 64), s.p);
    if ((rc = gguf_get_str(g, HP "sign_mode", true, &s, err)) != TERN_OK) return rc;
    if (str_is(s, "identity")) h->identity = true;
    else if (!str_is(s, "explicit"))
        return tern_err_set(err, TERN_E_UNSUPPORTED, "key '" HP "sign_mode': expected \"explicit\" or \"identity\", got \"%.*s\"",
                            (int)TERN_MIN(s.n, 64), s.p);

    if (!h->identity) {
        gguf_arr wa, sa;
        if ((rc = gguf_get_arr(g, HP "sign_widths", true, &wa, err)) != TERN_OK) return rc;
        if ((rc = gguf_get_arr(g, HP "sign_values", true, &sa, err)) != TERN_OK) return rc;
        if (!gguf_arr_is_int(&wa) || wa.type == GGUF_T_BOOL)
            return tern_err_set(err, TERN_E_FORMAT, "key '" HP "sign_widths': expected an integer array, got %s", gguf_vtype_name(wa.type));
        if (!gguf_arr_is_int(&sa) || sa.type == GGUF_T_BOOL)
            return tern_err_set(err, TERN_E_FORMAT, "key '" HP "sign_values': expected an integer array, got %s", gguf_vtype_name(sa.type));
        if (wa.n == 0 || wa.n > HAD_MAX_WIDTHS)
            return tern_err_set(err, TERN_E_FORMAT, "key '" HP "sign_widths': expected 1..%d widths, got %llu", HAD_MAX_WIDTHS,
                                (unsigned long long)wa.n);
        uint64_t total = 0;
        for (uint64_t i = 0; i < wa.n; i++) {
            const int64_t wd = gguf_arr_int(&wa, i);
            if (wd <= 0 || wd > ((int64_t)1 << 32) || wd % h->block != 0)
                return tern_err_set(err, TERN_E_FORMAT, "key '" HP "sign_widths'[%llu]: expected a positive multiple of block_size %lld, got %lld",
                                    (unsigned long long)i, (long long)h->block, (long long)wd);
            for (uint64_t j = 0; j < i; j++)
                if (gguf_arr_int(&wa, j) == wd)
                    return tern_err_set(err, TERN_E_FORMAT, "key '" HP "sign_widths': width %lld listed twice", (long long)wd);
            total += (uint64_t)wd;
        }
        if (total != sa.n)
            return tern_err_set(err, TERN_E_FORMAT, "key '" HP "sign_values': expected %llu values (the sum of sign_widths), got %llu",
                                (unsigned long long)total, (unsigned long long)sa.n);
        uint64_t off = 0;
        for (uint64_t i = 0; i < wa.n; i++) {
            const int64_t wd = gguf_arr_int(&wa, i);
            h->widths[h->n_widths] = wd;
            h->signs[h->n_widths] = malloc((size_t)wd);
            if (!h->signs[h->n_widths]) return tern_err_set(err, TERN_E_NOMEM, "rotation signs: out of memory");
            h->n_widths++;
            for (int64_t e = 0; e < wd; e++) {
                const int64_t sv = gguf_arr_int(&sa, off + (uint64_t)e);
                if (sv != 1 && sv != -1)
                    return tern_err_set(err, TERN_E_FORMAT, "key '" HP "sign_values'[%llu]: expected +1 or -1, got %lld",
                                        (unsigned long long)(off + (uint64_t)e), (long long)sv);
                h->signs[h->n_widths - 1][e] = (int8_t)sv;
            }
            off += (uint64_t)wd;
        }
    }
    if ((rc = load_names(h, g, HP "weight_names", true, &h->folded, &h->n_folded, err)) != TERN_OK) return rc;
    if ((rc = load_names(h, g, HP "inverse_weight_names", false, &h->inverse, &h->n_inverse, err)) != TERN_OK) return rc;
    if ((rc = gguf_get_bool(g, HP "gdn_v_grouped", false, false, &h->gdn_v_grouped, err)) != TERN_OK) return rc;
    if ((rc = gguf_get_bool(g, HP "tied_output", false, false, &h->tied_output, err)) != TERN_OK) return rc;
    if (h->tied_output) {
        if (h->version < 2)
            return tern_err_set(err, TERN_E_FORMAT, "key '" HP "tied_output': needs version 2, the file says version %d", h->version);
        if (!name_in(h->inverse, h->n_inverse, "token_embd.weight"))
            return tern_err_set(err, TERN_E_FORMAT, "key '" HP "tied_output' is true but token_embd.weight is not in " HP "inverse_weight_names");
        if (gguf_find_tensor(g, "output.weight"))
            return tern_err_set(err, TERN_E_FORMAT, "key '" HP "tied_output' is true but the file has output.weight (expected absent)");
    }
    h->active = true;
    return TERN_OK;
}
