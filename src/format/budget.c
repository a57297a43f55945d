/* budget.c: parameter count, bytes by type and the per-token byte budget of DESIGN.md from a
 * GGUF header. Layer 2. Source of truth: ../shared/DESIGN.md "Performance model"; spec 5.1
 * (qwen35 layer schedule and state sizes), 5.6 (f16 KV cache). Every product is overflow
 * checked: the header values are untrusted. */
#include "format/budget.h"

#include "format/qtypes.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int hp(const gguf_ctx *g, const char *arch, const char *name, int64_t def, int64_t lo, int64_t *out, tern_err *err) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    const int rc = gguf_get_int(g, key, false, def, out, err);
    if (rc) return rc;
    if (*out < lo || *out > INT32_MAX)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': value %" PRId64 ", expected %" PRId64 "..2^31-1", key, *out, lo);
    return TERN_OK;
}

static bool mul3(uint64_t a, uint64_t b, uint64_t c, uint64_t *out) {
    uint64_t t;
    return ck_mul_u64(a, b, &t) && ck_mul_u64(t, c, out);
}

int gguf_budget_compute(const gguf_ctx *g, int64_t pos, gguf_budget *out, tern_err *err) {
    if (!g || !out || pos < 0) return tern_err_set(err, TERN_E_ARG, "gguf_budget_compute: bad arguments (pos %" PRId64 ")", pos);
    memset(out, 0, sizeof *out);
    out->pos = pos;
    out->n_tensors = g->n_tensors;
    out->data_bytes = g->size - g->data_offset;
    gguf_str a;
    int rc = gguf_get_str(g, "general.architecture", false, &a, err);
    if (rc) return rc;
    snprintf(out->arch, sizeof out->arch, "%.*s", (int)(a.n < 63 ? a.n : 63), a.p);

    const gguf_tensor *embd = gguf_find_tensor(g, "token_embd.weight");
    out->tied_embd = embd && !gguf_find_tensor(g, "output.weight");
    if (embd && embd->ne[1] > 0) out->embd_row_bytes = embd->nbytes / (uint64_t)(embd->ne[1] * embd->ne[2] * embd->ne[3]);

    const qt_traits *ptq = qt_get(QT_PTQ1_0), *pq2 = qt_get(QT_PQ2_0);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        uint64_t n = 1;
        for (int d = 0; d < 4; d++) n *= (uint64_t)t->ne[d];          /* checked at open */
        if (!ck_add_u64(out->n_params, n, &out->n_params) || !ck_add_u64(out->tensor_bytes, t->nbytes, &out->tensor_bytes))
            return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': totals overflow", t->name);
        int k = 0;
        while (k < out->n_types && out->by_type[k].type != t->type) k++;
        if (k == out->n_types && k < GGUF_BUDGET_MAX_TYPES) { out->by_type[k].type = t->type; out->n_types++; }
        if (k < out->n_types) {
            out->by_type[k].n_tensors++;
            out->by_type[k].n_params += n;
            out->by_type[k].bytes += t->nbytes;
        }
        const uint64_t read = (t == embd && !out->tied_embd) ? out->embd_row_bytes : t->nbytes;
        out->weight_bytes += read;
        if (t->type == QT_PTQ1_0)   /* a 28-byte block held as a 34-byte 2-bit one */
            out->ptq1_0_as_2bit_extra += read / (uint64_t)ptq->block_bytes * (uint64_t)(pq2->block_bytes - ptq->block_bytes);
    }
    if (!out->arch[0]) { out->total_bytes = out->weight_bytes; return TERN_OK; }

    const char *ar = out->arch;
    int64_t n_embd, n_head, n_head_kv, kl, vl, interval;
    if ((rc = hp(g, ar, "block_count", 0, 0, &out->n_layer, err)) || (rc = hp(g, ar, "embedding_length", 0, 0, &n_embd, err)) ||
        (rc = hp(g, ar, "attention.head_count", 0, 0, &n_head, err)) || (rc = hp(g, ar, "attention.head_count_kv", n_head, 0, &n_head_kv, err)))
        return rc;
    const int64_t hd = n_head > 0 ? n_embd / n_head : 0;
    if ((rc = hp(g, ar, "attention.key_length", hd, 0, &kl, err)) || (rc = hp(g, ar, "attention.value_length", hd, 0, &vl, err)) ||
        (rc = hp(g, ar, "full_attention_interval", 1, 1, &interval, err)))
        return rc;
    out->n_head_kv = n_head_kv; out->key_length = kl; out->value_length = vl;

    /* layer schedule: recurrent_layers (true = GDN) overrides the interval rule (spec 5.1) */
    char key[160];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", ar);
    gguf_arr rl;
    if ((rc = gguf_get_arr(g, key, false, &rl, err))) return rc;
    if (rl.n) {
        if (!gguf_arr_is_int(&rl) || rl.n != (uint64_t)out->n_layer)
            return tern_err_set(err, TERN_E_FORMAT, "key '%s': %" PRIu64 " entries of %s, expected %" PRId64 " bools or integers", key, rl.n, gguf_vtype_name(rl.type), out->n_layer);
        for (uint64_t il = 0; il < rl.n; il++) out->n_gdn_layers += gguf_arr_int(&rl, il) != 0;
    } else {                                    /* layer il is attention iff (il + 1) % interval == 0 */
        out->n_gdn_layers = out->n_layer - out->n_layer / interval;
    }
    out->n_attn_layers = out->n_layer - out->n_gdn_layers;

    /* f16 K and V for one position over all attention layers */
    uint64_t per_layer;
    if (!mul3((uint64_t)n_head_kv, (uint64_t)(kl + vl), 2, &per_layer) || !ck_mul_u64(per_layer, (uint64_t)out->n_attn_layers, &out->kv_bytes_per_pos) ||
        !ck_mul_u64(out->kv_bytes_per_pos, (uint64_t)pos + 1, &out->kv_bytes))
        return tern_err_set(err, TERN_E_FORMAT, "KV cache size overflows (n_head_kv %" PRId64 ", key/value length %" PRId64 "/%" PRId64 ", pos %" PRId64 ")", n_head_kv, kl, vl, pos);

    if (out->n_gdn_layers > 0) {
        int64_t d_inner, n_group;
        if ((rc = hp(g, ar, "ssm.time_step_rank", 0, 0, &out->ssm_n_heads, err)) || (rc = hp(g, ar, "ssm.state_size", 0, 0, &out->ssm_d_state, err)) ||
            (rc = hp(g, ar, "ssm.conv_kernel", 1, 1, &out->ssm_d_conv, err)) || (rc = hp(g, ar, "ssm.inner_size", 0, 0, &d_inner, err)) ||
            (rc = hp(g, ar, "ssm.group_count", 0, 0, &n_group, err)))
            return rc;
        /* conv channels: q, k (group_count heads of d_state each) and v (inner_size); the
         * ssm_conv1d tensor, when present, has them as ne[1] */
        out->ssm_conv_channels = d_inner + 2 * (n_group * out->ssm_d_state > INT32_MAX ? INT32_MAX : n_group * out->ssm_d_state);
        static const char suffix[] = ".ssm_conv1d.weight";   /* first one, in file order */
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const char *nm = g->tensors[i].name;
            const size_t nl = strlen(nm);
            if (strncmp(nm, "blk.", 4) == 0 && nl > sizeof suffix - 1 && strcmp(nm + nl - (sizeof suffix - 1), suffix) == 0) {
                out->ssm_conv_channels = g->tensors[i].ne[1];
                break;
            }
        }
        uint64_t st, cv, dkv;
        const uint64_t ds = (uint64_t)out->ssm_d_state;   /* <= 2^31 each: the products below are checked */
        if (!mul3(ds, ds, 4, &dkv) || !mul3(2 * (uint64_t)out->n_gdn_layers, (uint64_t)out->ssm_n_heads, dkv, &st) ||
            !mul3(2 * (uint64_t)out->n_gdn_layers, (uint64_t)(out->ssm_d_conv - 1), (uint64_t)out->ssm_conv_channels, &cv) ||
            !ck_mul_u64(cv, 4, &cv))
            return tern_err_set(err, TERN_E_FORMAT, "recurrent state size overflows (%" PRId64 " GDN layers, %" PRId64 " heads, state %" PRId64 ")",
                                out->n_gdn_layers, out->ssm_n_heads, out->ssm_d_state);
        out->rstate_bytes = st;
        out->conv_bytes = cv;
    }
    if (!ck_add_u64(out->weight_bytes, out->kv_bytes, &out->total_bytes) || !ck_add_u64(out->total_bytes, out->rstate_bytes, &out->total_bytes) ||
        !ck_add_u64(out->total_bytes, out->conv_bytes, &out->total_bytes))
        return tern_err_set(err, TERN_E_FORMAT, "per-token byte total overflows");
    return TERN_OK;
}
