/* model.c: open a GGUF, dispatch on general.architecture, read hyperparameters, bind every tensor
 * by its GGUF name and validate its shape and type once (the forward checks nothing per token),
 * prepare weights for the kernels (in-place repack), load the vocabulary, start the thread pool,
 * and lay out the forward workspace.
 * Memory: the whole file lives in one buffer owned by the gguf_ctx (read() into anonymous memory
 * by default, or a private mapping); weights are repacked inside it, so there is no second copy.
 * Source of truth: spec/ternary-gguf.md sections 1 (container), 6 (qwen3 keys and tensors);
 * llama.cpp's llama hyperparameter defaults (rope.freq_base 10000, rope dims = head dim). */
#include "model/blocks.h"
#include "format/qtypes.h"
#include "core/os.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- keys ----------------------------------------------------------------------------------- */

const char *model_key(const model_t *m, char *buf, size_t n, const char *suffix) {
    snprintf(buf, n, "%s.%s", m->arch->name, suffix);
    return buf;
}

int model_get_i32(const model_t *m, const char *suffix, bool required, int32_t def, int32_t *out, tern_err *err) {
    char key[128];
    int64_t v;
    int rc = gguf_get_int(m->g, model_key(m, key, sizeof key, suffix), required, def, &v, err);
    if (rc) return rc;
    if (v < INT32_MIN || v > INT32_MAX)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': value %lld out of int32 range", key, (long long)v);
    *out = (int32_t)v;
    return TERN_OK;
}

int model_get_f32(const model_t *m, const char *suffix, bool required, float def, float *out, tern_err *err) {
    char key[128];
    double v;
    int rc = gguf_get_float(m->g, model_key(m, key, sizeof key, suffix), required, def, &v, err);
    if (rc) return rc;
    if (!isfinite(v)) return tern_err_set(err, TERN_E_FORMAT, "key '%s': value is not finite", key);
    *out = (float)v;
    return TERN_OK;
}

/* ---- tensor binding ------------------------------------------------------------------------- */

static void fmt_shape(char *buf, size_t n, const gguf_tensor *t) {
    int k = snprintf(buf, n, "[");
    for (int d = 0; d < t->n_dims && k > 0 && (size_t)k < n; d++)
        k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
}

static int check_shape(const gguf_tensor *t, int64_t ne0, int64_t ne1, tern_err *err) {
    if (t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1) return TERN_OK;
    char got[96];
    fmt_shape(got, sizeof got, t);
    if (ne1 == 1)
        return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': shape %s, expected [%lld]", t->name, got, (long long)ne0);
    return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': shape %s, expected [%lld, %lld]", t->name, got,
                        (long long)ne0, (long long)ne1);
}

static const char *type_name(int type) {
    const qt_traits *tr = qt_get(type);
    return tr ? tr->name : "unknown";
}

/* The file's tensor `name` (NULL when absent), marked as read by the model: the load refuses a
 * file with tensors no bind read (model_load). */
static const gguf_tensor *model_find_tensor(model_t *m, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(m->g, name);
    if (t && m->t_used) m->t_used[t - m->g->tensors] = 1;
    return t;
}

int model_bind_f32(model_t *m, const char *name, int64_t ne0, int64_t ne1, const float **out, tern_err *err) {
    const gguf_tensor *t = model_find_tensor(m, name);
    if (!t) return tern_err_set(err, TERN_E_FORMAT, "missing tensor '%s' (architecture %s)", name, m->arch->name);
    int rc = check_shape(t, ne0, ne1, err);
    if (rc) return rc;
    if (t->type != QT_F32)
        return tern_err_set(err, TERN_E_UNSUPPORTED, "tensor '%s': type %s, expected F32", name, type_name(t->type));
    if (((uintptr_t)t->data & 3u) != 0)
        return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': data not 4-byte aligned", name);
    /* norms, biases, conv taps, ssm_a: small, so read whole at load; a NaN/Inf here is a damaged
     * file (refused here: the int8 activation path can turn a NaN norm weight into finite logits,
     * hiding the damage) */
    const float *f = (const float *)(const void *)t->data;
    for (int64_t i = 0; i < ne0 * ne1; i++) {
        uint32_t bits;
        memcpy(&bits, &f[i], 4);
        if ((bits & 0x7f800000u) == 0x7f800000u)
            return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': element %lld (row %lld, column %lld) is %s (bits 0x%08x); "
                                "expected a finite value (the file is damaged)", name, (long long)i, (long long)(i / ne0),
                                (long long)(i % ne0), (bits & 0x7fffffu) ? "NaN" : (bits >> 31) ? "-Inf" : "+Inf",
                                (unsigned)bits);
    }
    *out = f;
    return TERN_OK;
}

static int register_w(model_t *m, kern_w *w, tern_err *err) {
    if (m->n_all_w == m->cap_all_w) {
        const int cap = m->cap_all_w ? m->cap_all_w * 2 : 64;
        kern_w **p = realloc(m->all_w, (size_t)cap * sizeof *p);
        if (!p) return tern_err_set(err, TERN_E_NOMEM, "out of memory binding weights");
        m->all_w = p;
        m->cap_all_w = cap;
    }
    m->all_w[m->n_all_w++] = w;
    return TERN_OK;
}

/* Progress: bytes of prepared weights against the total; drawn on stderr after 0.5 s. The state
 * lives in the model being loaded, so two loads on two threads keep separate counts. */
static void prog_draw(model_t *m, uint64_t add) {
    model_progress *prog = &m->prog;
    if (!prog->on) return;
    prog->done += add;
    const double dt = tern_time_s() - prog->t0;
    if (dt < 0.5) return;
    const int pct = prog->total ? (int)(100.0 * (double)prog->done / (double)prog->total) : 100;
    if (pct == prog->last) return;
    prog->last = pct;
    char bar[41];
    for (int i = 0; i < 40; i++) bar[i] = i < pct * 40 / 100 ? '#' : ' ';
    bar[40] = 0;
    fprintf(stderr, "\rloading [%s] %3d%% %.1fs", bar, pct, dt);
    prog->drawn = true;
}

/* A PTQ1_0 weight transcoded to a 2-bit side buffer (KW_PTQ_ROWPAIR, KW_PTQ_ROW16) is read from
 * aux for rows 0 .. NG-1 (kern_w_grouped_rows) by every path (kernels, kern_block_int: ref, f32
 * mode, embedding rows); only the tail rows NG .. N-1 are read from the file bytes. The whole
 * pages inside rows 0 .. NG-1 of the file buffer (private: read() into anonymous memory, or a private mapping) are released
 * after the transcode, so the file copy and the transcode are not both resident (this bounds
 * the 27B PTQ1_0 file's peak RSS). Returns the bytes released ([*lo, *hi) when lo is given). */
static uint64_t ptq_release_range(const kern_w *w, uint8_t **lo, uint8_t **hi) {
    if ((w->layout != KW_PTQ_ROWPAIR && w->layout != KW_PTQ_ROW16) || !w->aux) return 0;
    const uintptr_t ps = (uintptr_t)os_page_size();
    const uintptr_t a = (uintptr_t)w->data, e = a + (uintptr_t)(kern_w_grouped_rows(w) * (w->n_in / 128) * 28);
    const uintptr_t a1 = (a + ps - 1) & ~(ps - 1), e1 = e & ~(ps - 1);
    if (e1 <= a1) return 0;
    if (lo) { *lo = (uint8_t *)a1; *hi = (uint8_t *)e1; }
    return (uint64_t)(e1 - a1);
}

int model_bind_w(model_t *m, const char *name, int64_t ne0, int64_t ne1, kern_w *w, bool optional, bool *found,
                 tern_err *err) {
    memset(w, 0, sizeof *w);
    if (found) *found = false;
    const gguf_tensor *t = model_find_tensor(m, name);
    if (!t) {
        if (optional) return TERN_OK;
        return tern_err_set(err, TERN_E_FORMAT, "missing tensor '%s' (architecture %s)", name, m->arch->name);
    }
    int rc = check_shape(t, ne0, ne1, err);
    if (rc) return rc;
    if (!qt_get(t->type))                            /* every type of the table has a kernel path */
        return tern_err_set(err, TERN_E_UNSUPPORTED,
                            "tensor '%s': type %s, expected a ternary type (PQ2_0, PTQ1_0, Q2_0, TQ1_0, TQ2_0) or "
                            "F32/F16/BF16/Q8_0",
                            name, type_name(t->type));
    /* ggml numerics keep the row-pair layout: its AVX2 ggml-mode kernel runs it on every x86 host
     * (the 16-row tables have fast-mode kernels only, so a 16-row weight would run ggml on ref) */
    const unsigned flags = (m->numerics == KQ_GGML ? KW_F_ROWPAIR : 0u) |
                           (m->ptq1_0 == MODEL_PTQ1_0_DIRECT      ? KW_F_PTQ1_0_DIRECT
                            : m->ptq1_0 == MODEL_PTQ1_0_TRANSCODE ? KW_F_PTQ1_0_TRANSCODE
                                                                  : 0u);
    /* a PTQ1_0 transcode goes into the model's side buffer while it has room (a tensor bound
     * twice takes a second slice; past the end, kern_w_init allocates it) */
    const size_t sb = (kern_w_side_bytes(t->type, ne0, ne1) + 63) & ~(size_t)63;
    const bool in_side = m->side && sb && sb <= m->side_cap - m->side_used;
    rc = kern_w_init_in(w, t->name, t->type, t->data, ne0, ne1, flags, in_side ? m->side + m->side_used : NULL, sb, err);
    if (rc) return rc;
    if (in_side && w->aux) m->side_used += sb;
    rc = register_w(m, w, err);
    if (rc) { kern_w_free(w); return rc; }
    uint8_t *lo, *hi;
    if (ptq_release_range(w, &lo, &hi)) os_advise_dontneed(lo, (size_t)(hi - lo));   /* advisory */
    if (found) *found = true;
    prog_draw(m, t->nbytes);
    return TERN_OK;
}

/* ---- hyperparameters ------------------------------------------------------------------------ */

int model_load_hparams_common(model_t *m, tern_err *err) {
    model_hparams *hp = &m->hp;
    int rc;
    memset(hp, 0, sizeof *hp);
    if ((rc = model_get_i32(m, "embedding_length", true, 0, &hp->n_embd, err)) ||
        (rc = model_get_i32(m, "block_count", true, 0, &hp->n_layer, err)) ||
        (rc = model_get_i32(m, "feed_forward_length", true, 0, &hp->n_ff, err)) ||
        (rc = model_get_i32(m, "attention.head_count", true, 0, &hp->n_head, err)) ||
        (rc = model_get_i32(m, "context_length", false, 0, &hp->n_ctx_train, err)))
        return rc;
    /* n_layer's bound keeps the per-layer tables and the layer loops' int arithmetic small */
    const struct { const char *suffix; int32_t v, max; } hk[] = {
        {"embedding_length", hp->n_embd, INT32_MAX}, {"block_count", hp->n_layer, 4096},
        {"feed_forward_length", hp->n_ff, INT32_MAX}, {"attention.head_count", hp->n_head, INT32_MAX}};
    for (size_t i = 0; i < sizeof hk / sizeof hk[0]; i++)
        if (hk[i].v <= 0 || hk[i].v > hk[i].max) {
            char key[128];
            return tern_err_set(err, TERN_E_FORMAT, "%s: key '%s' is %d, expected %s", m->arch->name,
                                model_key(m, key, sizeof key, hk[i].suffix), hk[i].v,
                                hk[i].max == INT32_MAX ? "a positive integer" : "1..4096");
        }
    char ckey[128];
    if (hp->n_ctx_train <= 0 && gguf_find_kv(m->g, model_key(m, ckey, sizeof ckey, "context_length")))
        return tern_err_set(err, TERN_E_FORMAT, "%s: key '%s' is %d, expected a positive integer (the trained context)",
                            m->arch->name, ckey, hp->n_ctx_train);
    if ((rc = model_get_i32(m, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv, err)) ||
        (rc = model_get_i32(m, "attention.key_length", false, hp->n_embd / hp->n_head, &hp->n_embd_head_k, err)) ||
        (rc = model_get_i32(m, "attention.value_length", false, hp->n_embd_head_k, &hp->n_embd_head_v, err)) ||
        (rc = model_get_i32(m, "rope.dimension_count", false, hp->n_embd_head_k, &hp->n_rot, err)) ||
        (rc = model_get_f32(m, "rope.freq_base", false, 10000.0f, &hp->rope_freq_base, err)) ||
        (rc = model_get_f32(m, "attention.layer_norm_rms_epsilon", true, 0, &hp->f_norm_rms_eps, err)))
        return rc;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv != 0)
        return tern_err_set(err, TERN_E_FORMAT, "%s.attention.head_count_kv = %d: expected a divisor of head_count %d",
                            m->arch->name, hp->n_head_kv, hp->n_head);
    if (hp->n_embd_head_k <= 0 || hp->n_embd_head_v <= 0 || hp->n_embd_head_k > 1024 || hp->n_embd_head_v > 1024)
        return tern_err_set(err, TERN_E_FORMAT, "%s: head dims k=%d v=%d, expected 1..1024", m->arch->name,
                            hp->n_embd_head_k, hp->n_embd_head_v);
    if (hp->n_rot <= 0 || hp->n_rot > hp->n_embd_head_k || hp->n_rot % 2)
        return tern_err_set(err, TERN_E_FORMAT, "%s.rope.dimension_count = %d: expected even, 2..%d", m->arch->name,
                            hp->n_rot, hp->n_embd_head_k);
    if (!(hp->rope_freq_base > 0) || !(hp->f_norm_rms_eps >= 0))
        return tern_err_set(err, TERN_E_FORMAT, "%s: rope.freq_base %g / rms eps %g out of range", m->arch->name,
                            (double)hp->rope_freq_base, (double)hp->f_norm_rms_eps);
    hp->f_attn_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);
    hp->rope_freq_scale = 1.0f;
    hp->yarn_attn_factor = 1.0f;
    hp->yarn_ext_factor = 0.0f;

    /* RoPE scaling: none, linear, or yarn (spec 6, llama.cpp rope_yarn). */
    char key[128];
    const gguf_kv *kv = gguf_find_kv(m->g, model_key(m, key, sizeof key, "rope.scaling.type"));
    if (kv) {
        gguf_str st;
        if ((rc = gguf_get_str(m->g, key, true, &st, err))) return rc;
        const bool yarn = gguf_str_eq(st, "yarn"), linear = gguf_str_eq(st, "linear");
        if (yarn || linear) {
            float factor;
            if ((rc = model_get_f32(m, "rope.scaling.factor", true, 1.0f, &factor, err))) return rc;
            if (!(factor >= 1.0f))
                return tern_err_set(err, TERN_E_FORMAT, "%s.rope.scaling.factor = %g, expected >= 1", m->arch->name,
                                    (double)factor);
            hp->rope_freq_scale = 1.0f / factor;
        }
        if (yarn) {
            if ((rc = model_get_i32(m, "rope.scaling.original_context_length", true, 0, &hp->n_ctx_orig, err)))
                return rc;
            if (hp->n_ctx_orig <= 0)
                return tern_err_set(err, TERN_E_FORMAT, "%s.rope.scaling.original_context_length = %d, expected > 0",
                                    m->arch->name, hp->n_ctx_orig);
            hp->yarn = true;
            hp->yarn_ext_factor = 1.0f;
            /* ggml_rope_yarn_corr_dims with beta_fast 32, beta_slow 1 */
            const float nd = (float)hp->n_rot, L0 = (float)hp->n_ctx_orig, base = hp->rope_freq_base;
            const float pi = 3.14159265358979323846f;
            const float lo = floorf(nd * logf(L0 / (32.0f * 2 * pi)) / (2 * logf(base)));
            const float hi = ceilf(nd * logf(L0 / (1.0f * 2 * pi)) / (2 * logf(base)));
            hp->yarn_corr_lo = fmaxf(0.0f, lo);
            hp->yarn_corr_hi = fminf(nd - 1, hi);
        } else if (!linear && !gguf_str_eq(st, "none")) {
            return tern_err_set(err, TERN_E_UNSUPPORTED, "%s: rope scaling '%.*s', expected none, linear or yarn", key,
                                (int)st.n, st.p);
        }
    }
    const gguf_tensor *te = gguf_find_tensor(m->g, "token_embd.weight");
    if (!te) return tern_err_set(err, TERN_E_FORMAT, "missing tensor 'token_embd.weight' (architecture %s)", m->arch->name);
    if (te->ne[1] <= 0 || te->ne[1] > INT32_MAX)
        return tern_err_set(err, TERN_E_FORMAT, "tensor 'token_embd.weight': %lld rows", (long long)te->ne[1]);
    hp->n_vocab = (int32_t)te->ne[1];
    m->n_layer_kv = hp->n_layer;
    return TERN_OK;
}

int model_bind_dense(model_t *m, bool qk_norm, tern_err *err) {
    const model_hparams *hp = &m->hp;
    const int64_t D = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    const int64_t dq = (int64_t)hp->n_head * hp->n_embd_head_k, dk = (int64_t)hp->n_head_kv * hp->n_embd_head_k;
    const int64_t dv = (int64_t)hp->n_head_kv * hp->n_embd_head_v, da = (int64_t)hp->n_head * hp->n_embd_head_v;
    int rc;
    bool found;
    if ((rc = model_bind_w(m, "token_embd.weight", D, V, &m->tok_embd, false, NULL, err))) return rc;
    if ((rc = model_bind_f32(m, "output_norm.weight", D, 1, &m->output_norm, err))) return rc;
    if ((rc = model_bind_w(m, "output.weight", D, V, &m->output, true, &found, err))) return rc;
    m->tied_output = !found;
    if (m->tied_output) m->output = m->tok_embd;   /* descriptor copy: same repacked bytes */
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return tern_err_set(err, TERN_E_NOMEM, "out of memory (layers)");
    for (int il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        char nm[96];
#define NM(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", il), nm)
        if ((rc = model_bind_f32(m, NM("attn_norm"), D, 1, &L->attn_norm, err)) ||
            (rc = model_bind_f32(m, NM("ffn_norm"), D, 1, &L->ffn_norm, err)) ||
            (rc = model_bind_w(m, NM("attn_q"), D, dq, &L->attn_q, false, NULL, err)) ||
            (rc = model_bind_w(m, NM("attn_k"), D, dk, &L->attn_k, false, NULL, err)) ||
            (rc = model_bind_w(m, NM("attn_v"), D, dv, &L->attn_v, false, NULL, err)) ||
            (rc = model_bind_w(m, NM("attn_output"), da, D, &L->attn_output, false, NULL, err)) ||
            (rc = model_bind_w(m, NM("ffn_gate"), D, F, &L->ffn_gate, false, NULL, err)) ||
            (rc = model_bind_w(m, NM("ffn_up"), D, F, &L->ffn_up, false, NULL, err)) ||
            (rc = model_bind_w(m, NM("ffn_down"), F, D, &L->ffn_down, false, NULL, err)))
            return rc;
        if (qk_norm &&
            ((rc = model_bind_f32(m, NM("attn_q_norm"), hp->n_embd_head_k, 1, &L->attn_q_norm, err)) ||
             (rc = model_bind_f32(m, NM("attn_k_norm"), hp->n_embd_head_k, 1, &L->attn_k_norm, err))))
            return rc;
#undef NM
    }
    return TERN_OK;
}

/* ---- memory check --------------------------------------------------------------------------- */

/* One unsigned integer from a file (e.g. a cgroup limit); false if absent or not a number ("max"). */
static bool read_u64_file(const char *path, uint64_t *v) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    unsigned long long x;
    const bool ok = fscanf(f, "%llu", &x) == 1;
    fclose(f);
    if (ok) *v = x;
    return ok;
}

/* Memory this process may still allocate, in bytes; 0 if unknown (then no check): `given` when
 * the caller set one (tern_model_opts.mem_available), else MemAvailable of /proc/meminfo, lowered
 * to the room left under a cgroup v2 limit (memory.max - memory.current) when there is one. */
static uint64_t mem_available(uint64_t given) {
    if (given) return given;
    uint64_t avail = os_mem_available(), lim, cur;
    if (read_u64_file("/sys/fs/cgroup/memory.max", &lim) && read_u64_file("/sys/fs/cgroup/memory.current", &cur)) {
        const uint64_t room = lim > cur ? lim - cur : 1;
        if (!avail || room < avail) avail = room;
    }
    return avail;
}

/* The OS's figure already excludes this model's memory; a given figure is a budget the model's
 * own bytes (file buffer and side buffers, as the load checked them) take their share of. */
uint64_t model_mem_available(const model_t *m) {
    if (!m || !m->mem_given) return mem_available(0);
    return m->mem_given > m->mem_model ? m->mem_given - m->mem_model : 1;
}

/* ---- load / free ---------------------------------------------------------------------------- */

/* A message about the file's contents (a key, a tensor) with the file's path in front, when it is
 * not there already and fits. */
static void err_prefix_path(tern_err *err, const char *path) {
    if (!err) return;
    const size_t lp = strlen(path), lm = strlen(err->msg);
    if (strncmp(err->msg, path, lp) != 0 && lp + 2 + lm < sizeof err->msg) {
        memmove(err->msg + lp + 2, err->msg, lm + 1);
        memcpy(err->msg, path, lp);
        memcpy(err->msg + lp, ": ", 2);
    }
}

/* Every tensor of the file must be one the architecture read, as llama.cpp requires: a tensor
 * left over means the metadata and the tensors disagree (a block_count lowered by damage drops
 * the last layers; a stray tensor means some other model), and running it would quietly be a
 * different model. Frees the marks: they are needed only here. */
static int check_all_used(model_t *m, const char *path, tern_err *err) {
    uint64_t n_unused = 0, first = 0;
    for (uint64_t i = m->g->n_tensors; i-- > 0;)
        if (!m->t_used[i]) { n_unused++; first = i; }
    free(m->t_used);
    m->t_used = NULL;
    if (!n_unused) return TERN_OK;
    char more[48] = "";
    if (n_unused > 1) snprintf(more, sizeof more, " (and %llu more)", (unsigned long long)(n_unused - 1));
    return tern_err_set(err, TERN_E_FORMAT,
                        "%s: tensor '%s'%s is not read by a %s model with block_count %d; expected only the tensors "
                        "of the model the metadata describes (a damaged or mismatched file?)",
                        path, m->g->tensors[first].name, more, m->arch->name, m->hp.n_layer);
}

int model_load(model_t **out, const char *path, const model_load_opts *o, tern_err *err) {
    *out = NULL;
    if (!path || !o) return tern_err_set(err, TERN_E_ARG, "model_load: %s is NULL", !path ? "path" : "options");
    if (o->n_threads < 1 || o->n_threads > 1024)
        return tern_err_set(err, TERN_E_ARG, "model_load: %d threads, expected 1..1024", o->n_threads);
    const double t0 = tern_time_s();
    blk_init();
    struct stat st;
    if (stat(path, &st) != 0) return tern_err_set(err, TERN_E_IO, "cannot open '%s': %s", path, strerror(errno));
    const uint64_t avail = mem_available(o->mem_available);
    if (avail && (uint64_t)st.st_size > avail)
        return tern_err_set(err, TERN_E_NOMEM, "model '%s' needs %llu bytes (%.1f MB) of memory, only %llu bytes (%.1f MB) available",
                            path, (unsigned long long)st.st_size, (double)st.st_size / 1e6, (unsigned long long)avail,
                            (double)avail / 1e6);
    model_t *m = calloc(1, sizeof *m);
    if (!m) return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    int rc = gguf_open(&m->g, path, o->use_mmap ? GGUF_LOAD_MMAP : GGUF_LOAD_READ, err);
    if (rc) goto fail;
    /* The kernels' side buffers, allocated at bind time: each PTQ1_0 matrix is transcoded into
     * the 2-bit layout (34 bytes per 128 weights of its grouped rows) unless the options ask for
     * the direct kernel (kernels.h). File + side buffers must fit in what was available; in the
     * auto mode a file that fits only without them runs direct (the same bits, no side buffer). */
    int ptq1_0 = o->ptq1_0;
    const bool transcode = ptq1_0 == MODEL_PTQ1_0_DIRECT      ? false
                           : ptq1_0 == MODEL_PTQ1_0_TRANSCODE ? true
                                                              : KERN_PTQ1_0_TRANSCODE_DEFAULT;
    uint64_t side = 0, side_slices = 0;
    for (uint64_t i = 0; transcode && i < m->g->n_tensors; i++) {
        const gguf_tensor *t = &m->g->tensors[i];
        const uint64_t b = kern_w_side_bytes(t->type, t->ne[0], t->ne[1]);
        side += b;
        if (b) side_slices += (b + 63) & ~(uint64_t)63;
    }
    if (avail && side && (uint64_t)st.st_size + side > avail && ptq1_0 == MODEL_PTQ1_0_AUTO) {
        tern_log(TERN_LOG_WARN, "%s: the PTQ1_0 transcode (%llu bytes) does not fit beside the file (%llu bytes) in the "
                 "%llu bytes available: PTQ1_0 matrices run direct (the same outputs, slower)", path,
                 (unsigned long long)side, (unsigned long long)st.st_size, (unsigned long long)avail);
        ptq1_0 = MODEL_PTQ1_0_DIRECT;
        side = side_slices = 0;
    }
    if (avail && side && (uint64_t)st.st_size + side > avail) {
        rc = tern_err_set(err, TERN_E_NOMEM,
                          "model '%s' needs %.1f MB of memory (file %llu bytes + PTQ1_0 transcode %llu "
                          "bytes; the direct PTQ1_0 mode, TERN_PTQ1_0=direct in the programs, avoids it), only %.1f MB available",
                          path, (double)(st.st_size + side) / 1e6, (unsigned long long)st.st_size,
                          (unsigned long long)side, (double)avail / 1e6);
        goto fail;
    }
    /* One buffer for every transcode (tern_alloc_aligned advises huge pages from 4 MiB up): a
     * decode streams these bytes as it streams the file buffer, and separate allocations of
     * layer-sized tensors (0.5-4 MB) would get 4 KB pages, each page a TLB miss in the stream. */
    if (side_slices) {
        m->side = tern_alloc_aligned((size_t)side_slices);
        if (!m->side) {
            rc = tern_err_set(err, TERN_E_NOMEM, "model '%s': no memory for %llu bytes of PTQ1_0 transcodes", path,
                              (unsigned long long)side_slices);
            goto fail;
        }
        m->side_cap = (size_t)side_slices;
    }
    gguf_str as;
    if ((rc = gguf_get_str(m->g, "general.architecture", true, &as, err))) {
        err_prefix_path(err, path);
        goto fail;
    }
    char an[64];
    snprintf(an, sizeof an, "%.*s", (int)TERN_MIN(as.n, 63u), as.p);
    m->arch = model_arch_find(an);
    if (!m->arch) {
        rc = tern_err_set(err, TERN_E_UNSUPPORTED, "%s: architecture '%s', expected one of: %s", path, an,
                          model_arch_names());
        goto fail;
    }
    gguf_str nm;
    if (gguf_get_str(m->g, "general.name", false, &nm, NULL) == TERN_OK && nm.p)
        snprintf(m->name, sizeof m->name, "%.*s", (int)TERN_MIN(nm.n, 95u), nm.p);
    m->numerics = o->numerics;
    m->mem_given = o->mem_available;
    m->mem_model = (uint64_t)st.st_size + side_slices;
    m->ptq1_0 = ptq1_0;
    m->n_threads = o->n_threads;

    m->prog = (model_progress){.on = o->progress && isatty(2), .t0 = t0, .last = -1};
    for (uint64_t i = 0; i < m->g->n_tensors; i++) m->prog.total += m->g->tensors[i].nbytes;

    if (m->g->n_tensors == 0) {   /* a tokenizer-only file (ggml-vocab-*.gguf): say so, not "missing tensor" */
        rc = tern_err_set(err, TERN_E_FORMAT, "%s: no tensors (a vocabulary-only GGUF?), expected the weights of a %s model",
                          path, m->arch->name);
        goto fail;
    }
    m->t_used = calloc((size_t)m->g->n_tensors, 1);
    if (!m->t_used) {
        rc = tern_err_set(err, TERN_E_NOMEM, "%s: out of memory (%llu tensors)", path, (unsigned long long)m->g->n_tensors);
        goto fail;
    }
    rc = m->arch->load(m, err);
    if (m->prog.drawn) fprintf(stderr, "\r%60s\r", "");
    m->prog.on = false;
    if (rc) {   /* the hooks' messages name the tensor or key: put the file in front */
        err_prefix_path(err, path);
        goto fail;
    }
    if ((rc = check_all_used(m, path, err))) goto fail;
    if ((rc = tok_load(&m->vocab, m->g, err))) {
        err_prefix_path(err, path);
        goto fail;
    }
    if ((rc = pool_init(&m->pool, o->n_threads, err))) goto fail;
    if (pthread_mutex_init(&m->eval_lock, NULL) != 0) {
        pool_free(m->pool);
        m->pool = NULL;
        rc = tern_err_set(err, TERN_E_NOMEM, "pthread_mutex_init failed");
        goto fail;
    }
    /* Weight bytes and the decode byte budget (DESIGN.md "Performance model"): every tensor as
     * stored; a lookup-only (untied) embedding counts one row. In memory, a transcoded PTQ1_0
     * weight holds its side buffer instead of the released file pages. */
    for (int i = 0; i < m->n_all_w; i++) {
        const kern_w *w = m->all_w[i];
        const uint64_t rel = w ? ptq_release_range(w, NULL, NULL) : 0;
        if (rel) m->weight_bytes += (uint64_t)((w->n_out & ~(int64_t)3) * (w->n_in / 128) * 34) - rel;
        /* a decode streams the side buffer (kern_w_bytes), not the file bytes (the untied
         * embedding is a lookup: one row, counted below) */
        if (w && w->aux && w->type == QT_PTQ1_0 && !(w == &m->tok_embd && !m->tied_output))
            m->bytes_per_token += kern_w_bytes(w) - (uint64_t)(w->n_in / 128) * 28 * (uint64_t)w->n_out;
    }
    for (uint64_t i = 0; i < m->g->n_tensors; i++) {
        const gguf_tensor *t = &m->g->tensors[i];
        m->weight_bytes += t->nbytes;
        if (!m->tied_output && strcmp(t->name, "token_embd.weight") == 0 && t->ne[1] > 0)
            m->bytes_per_token += t->nbytes / (uint64_t)t->ne[1];
        else
            m->bytes_per_token += t->nbytes;
    }
    m->load_s = tern_time_s() - t0;
    *out = m;
    return TERN_OK;
fail:
    model_free(m);
    return rc;
}

void model_free(model_t *m) {
    if (!m) return;
    if (m->pool) {
        pool_free(m->pool);
        pthread_mutex_destroy(&m->eval_lock);
    }
    /* Weights first (all_w points into m->layers and the model), then the arch's own data. */
    for (int i = 0; i < m->n_all_w; i++) kern_w_free(m->all_w[i]);
    if (m->arch && m->arch->free) m->arch->free(m);
    tern_free_aligned(m->side);
    free(m->t_used);
    free(m->all_w);
    free(m->layers);
    tok_free(m->vocab);
    gguf_close(m->g);
    free(m);
}

/* ---- workspace ------------------------------------------------------------------------------ */

int model_ws_init(model_ws *ws, const model_t *m, int n_batch, int n_ctx, tern_err *err) {
    memset(ws, 0, sizeof *ws);
    const model_hparams *hp = &m->hp;
    if (n_batch < 1 || n_ctx < 1) return tern_err_set(err, TERN_E_ARG, "workspace: n_batch %d, n_ctx %d", n_batch, n_ctx);
    const size_t nb = (size_t)n_batch, nt = (size_t)pool_n_threads(m->pool);
    const size_t D = (size_t)hp->n_embd, dq = (size_t)hp->n_head * (size_t)hp->n_embd_head_k;
    const size_t dk = (size_t)hp->n_head_kv * (size_t)hp->n_embd_head_k;
    const size_t dv = (size_t)hp->n_head_kv * (size_t)hp->n_embd_head_v;
    const size_t da = (size_t)hp->n_head * (size_t)hp->n_embd_head_v, F = (size_t)hp->n_ff;
    const size_t hd = (size_t)TERN_MAX(hp->n_embd_head_k, hp->n_embd_head_v);
    const int64_t kmax = (int64_t)TERN_MAX(D, TERN_MAX(F, da));
    size_t aq = 0;
    for (int mode = 0; mode < 3; mode++) {   /* the largest quantised activation of any mode */
        const size_t b = kern_act_bytes((kern_numerics)mode, kmax, n_batch);
        if (b > aq) aq = b;
    }
    const size_t extra = m->arch->ws_extra_bytes ? m->arch->ws_extra_bytes(m, n_batch, n_ctx) : 0;
    /* float counts of each buffer, each rounded to 16 floats (64 bytes) */
#define R16(x) (((x) + 15) & ~(size_t)15)
    const size_t nf[] = {R16(nb * D), R16(nb * D), R16(nb * dq), R16(nb * dk), R16(nb * dv), R16(nb * da),
                         R16(nb * F), R16(nb * F), R16(nb * (size_t)hp->n_rot), R16(nt * BLK_ATTN_NQ * (size_t)n_ctx),
                         R16(nt * hd / 2 + 1), R16(nt * 2 * hd), R16((aq + 3) / 4), R16((aq + 3) / 4), R16(nb * D), R16((extra + 3) / 4),
                         R16(nb * (size_t)hp->n_head * 4)};
#undef R16
    size_t total = 0;
    for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) total += nf[i];
    /* fresh pages (zero-filled when first touched): the scores rows are n_ctx long per thread,
     * and a long context's rows cost memory only as far as attention reaches */
    float *p = os_pages_alloc(total * sizeof(float));
    if (!p) return tern_err_set(err, TERN_E_NOMEM, "workspace: cannot allocate %.1f MB", (double)total * 4 / 1e6);
    ws->mem = p;
    ws->mem_bytes = total * sizeof(float);
    ws->n_batch = n_batch;
    ws->n_ctx = n_ctx;
    float **dst[] = {&ws->x, &ws->xb, &ws->q, &ws->k, &ws->v, &ws->att, &ws->hg, &ws->hu, &ws->rope_cs, &ws->scores};
    size_t i = 0;
    for (; i < sizeof dst / sizeof dst[0]; i++) { *dst[i] = p; p += nf[i]; }
    ws->qh = (uint16_t *)p; p += nf[i++];
    ws->vacc = p; p += nf[i++];
    ws->aq = p; p += nf[i++];
    ws->aq2 = p; p += nf[i++];
    ws->lx = p; p += nf[i++];
    ws->arch_ws = extra ? (void *)p : NULL;
    p += nf[i++];
    ws->attn_tiles = (int32_t *)p;
    return TERN_OK;
}

void model_ws_free(model_ws *ws) {
    if (!ws) return;
    os_pages_free(ws->mem, ws->mem_bytes);
    memset(ws, 0, sizeof *ws);
}
