/* test_synth.c: `tern synth` output re-read with the GGUF reader. Expected tensor names, shapes,
 * types, keys and parameter counts are derived here from the spec tables (sections 4.1, 4.6,
 * 5.1, 5.2, 6, 10), not from the generator; plus determinism, the weight recipe (lossless
 * ternary blocks), and the rotation equivalence of a folded qwen35-tiny with its --unrotated-f32
 * twin (spec 4.3, 4.4, 5.5) within a float tolerance derived below. The 27B is checked through
 * --no-weights (header only, sparse data region). */
#include "test_synth_util.h"

#include "core/fp16.h"
#include "model/hadamard.h"
#include "tern.h"

#include <math.h>
#include <sys/stat.h>

/* ---- checks against the expected table ---------------------------------------------------------- */

/* Every expected tensor present with its shape and type class, and nothing else. Returns the
 * parameter count. */
static int64_t check_tensors(const gguf_ctx *g, const st_hp *h, int tern_type, const char *what) {
    st_exp *e = calloc((size_t)(16 * h->L + 8), sizeof *e);
    assert_non_null(e);
    const int n = st_expected(h, e);
    if ((int64_t)g->n_tensors != n) fail_msg("%s: %" PRIu64 " tensors, expected %d", what, g->n_tensors, n);
    int64_t params = 0;
    for (int i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, e[i].name);
        if (!t) fail_msg("%s: missing tensor '%s'", what, e[i].name);
        if (t->n_dims != e[i].n_dims || t->ne[0] != e[i].ne0 || t->ne[1] != e[i].ne1)
            fail_msg("%s: '%s' n_dims %d ne [%" PRId64 ", %" PRId64 "], expected %d [%" PRId64 ", %" PRId64 "]", what,
                     e[i].name, t->n_dims, t->ne[0], t->ne[1], e[i].n_dims, e[i].ne0, e[i].ne1);
        const int want = e[i].cls == C_TERN ? tern_type : e[i].cls == C_BF16 ? QT_BF16 : QT_F32;
        if (t->type != want) fail_msg("%s: '%s' type %d, expected %d", what, e[i].name, t->type, want);
        params += t->ne[0] * t->ne[1];
    }
    free(e);
    return params;
}

static int64_t kv_int(const gguf_ctx *g, const char *key) {
    int64_t v = -1;
    tern_err err = {0};
    if (gguf_get_int(g, key, true, 0, &v, &err) != TERN_OK) fail_msg("%s", err.msg);
    return v;
}

/* The key set: general.*, the arch hyperparameters of spec 5.1 / 6, the tokenizer keys of spec 7,
 * and (rotated files) the 10 prism.hadamard.* keys of spec 4.1. */
static void check_keys(const gguf_ctx *g, const st_hp *h, bool file_type, bool hadamard) {
    const char *arch = h->q35 ? "qwen35" : "qwen3";
    static const char *const common[] = {"context_length", "embedding_length", "block_count", "feed_forward_length",
                                         "attention.head_count", "attention.head_count_kv", "attention.key_length",
                                         "attention.value_length", "rope.freq_base", "attention.layer_norm_rms_epsilon"};
    static const char *const q35[] = {"rope.dimension_count", "rope.dimension_sections", "ssm.conv_kernel", "ssm.state_size",
                                      "ssm.group_count", "ssm.time_step_rank", "ssm.inner_size", "full_attention_interval"};
    static const char *const tok[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                      "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id",
                                      "tokenizer.ggml.bos_token_id", "tokenizer.ggml.padding_token_id",
                                      "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"};
    static const char *const had[] = {"version", "block_size", "transform", "axis", "sign_mode", "sign_widths",
                                      "sign_values", "weight_names", "inverse_weight_names", "gdn_v_grouped"};
    char key[128];
    uint64_t n = 0;
    assert_non_null(gguf_find_kv(g, "general.architecture"));
    assert_non_null(gguf_find_kv(g, "general.name"));
    assert_non_null(gguf_find_kv(g, "general.quantization_version"));
    n += 3;
    if (file_type) { assert_non_null(gguf_find_kv(g, "general.file_type")); n++; }
    for (size_t i = 0; i < sizeof common / sizeof *common; i++, n++) {
        snprintf(key, sizeof key, "%s.%s", arch, common[i]);
        if (!gguf_find_kv(g, key)) fail_msg("missing key %s", key);
    }
    if (h->q35)
        for (size_t i = 0; i < sizeof q35 / sizeof *q35; i++, n++) {
            snprintf(key, sizeof key, "%s.%s", arch, q35[i]);
            if (!gguf_find_kv(g, key)) fail_msg("missing key %s", key);
        }
    for (size_t i = 0; i < sizeof tok / sizeof *tok; i++, n++)
        if (!gguf_find_kv(g, tok[i])) fail_msg("missing key %s", tok[i]);
    if (hadamard)
        for (size_t i = 0; i < sizeof had / sizeof *had; i++, n++) {
            snprintf(key, sizeof key, "prism.hadamard.%s", had[i]);
            if (!gguf_find_kv(g, key)) fail_msg("missing key %s", key);
        }
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strncmp(g->kv[i].key, "prism.", 6) == 0 && !hadamard) fail_msg("unexpected key %s", g->kv[i].key);
    if (g->n_kv != n) fail_msg("%" PRIu64 " keys, expected %" PRIu64, g->n_kv, n);

    gguf_str s;
    tern_err err = {0};
    assert_int_equal(gguf_get_str(g, "general.architecture", true, &s, &err), TERN_OK);
    assert_true(gguf_str_eq(s, arch));
#define HP(k, v) do { snprintf(key, sizeof key, "%s.%s", arch, k); assert_int_equal(kv_int(g, key), v); } while (0)
    HP("embedding_length", h->D);
    HP("block_count", h->L);
    HP("feed_forward_length", h->F);
    HP("attention.head_count", h->Hq);
    HP("attention.head_count_kv", h->Hkv);
    HP("attention.key_length", h->Dh);
    HP("attention.value_length", h->Dh);
    if (h->q35) {
        HP("ssm.conv_kernel", h->conv);
        HP("ssm.state_size", h->dstate);
        HP("ssm.group_count", h->Hk);
        HP("ssm.time_step_rank", h->Hv);
        HP("ssm.inner_size", h->inner);
        HP("full_attention_interval", h->interval);
    }
#undef HP
    /* a valid vocabulary: one token per embedding row, special ids inside it, gpt2 model */
    gguf_arr toks, types;
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", true, &toks, &err), TERN_OK);
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.token_type", true, &types, &err), TERN_OK);
    assert_int_equal(toks.type, GGUF_T_STRING);
    assert_true((int64_t)toks.n == h->V && types.n == toks.n);
    assert_int_equal(gguf_get_str(g, "tokenizer.ggml.model", true, &s, &err), TERN_OK);
    assert_true(gguf_str_eq(s, "gpt2"));
    const int64_t eos = kv_int(g, "tokenizer.ggml.eos_token_id"), bos = kv_int(g, "tokenizer.ggml.bos_token_id");
    assert_true(eos >= 0 && eos < h->V && bos >= 0 && bos < h->V);
    assert_true(gguf_str_eq(toks.strs[eos], "<|im_end|>"));
    assert_int_equal(gguf_arr_int(&types, (uint64_t)eos), 3);   /* CONTROL */
    if (gguf_check_tokenizer(g, &err) != TERN_OK) fail_msg("gguf_check_tokenizer: %s", err.msg);
}

/* Spec 4.1 load-time validation plus the 4.6 table: the folded names are exactly the projections
 * listed there; widths [D, inner, F] (27B: 5120, 6144, 17408). */
static void check_hadamard(const gguf_ctx *g, const st_hp *h, int64_t block, const int64_t widths[3], uint64_t n_names) {
    tern_err err = {0};
    gguf_str s;
    bool b = false;
    assert_int_equal(kv_int(g, "prism.hadamard.version"), 1);
    assert_int_equal(kv_int(g, "prism.hadamard.block_size"), block);
    assert_int_equal(gguf_get_str(g, "prism.hadamard.transform", true, &s, &err), TERN_OK);
    assert_true(gguf_str_eq(s, "normalized-sylvester-walsh-hadamard"));
    assert_int_equal(gguf_get_str(g, "prism.hadamard.axis", true, &s, &err), TERN_OK);
    assert_true(gguf_str_eq(s, "input-last-dimension"));
    assert_int_equal(gguf_get_str(g, "prism.hadamard.sign_mode", true, &s, &err), TERN_OK);
    assert_true(gguf_str_eq(s, "explicit"));
    assert_int_equal(gguf_get_bool(g, "prism.hadamard.gdn_v_grouped", true, false, &b, &err), TERN_OK);
    assert_true(b);
    gguf_arr w, v, names, inv;
    assert_int_equal(gguf_get_arr(g, "prism.hadamard.sign_widths", true, &w, &err), TERN_OK);
    assert_int_equal(gguf_get_arr(g, "prism.hadamard.sign_values", true, &v, &err), TERN_OK);
    assert_true(gguf_arr_is_int(&w) && gguf_arr_is_int(&v));
    assert_int_equal(w.n, 3);
    int64_t sum = 0;
    for (uint64_t i = 0; i < 3; i++) { assert_int_equal(gguf_arr_int(&w, i), widths[i]); sum += widths[i]; }
    assert_int_equal((int64_t)v.n, sum);
    int64_t n_plus = 0;
    for (uint64_t i = 0; i < v.n; i++) {
        const int64_t x = gguf_arr_int(&v, i);
        assert_true(x == 1 || x == -1);
        n_plus += x == 1;
    }
    assert_true(n_plus > sum / 4 && n_plus < 3 * sum / 4);   /* random signs, not all +1 */
    assert_int_equal(gguf_get_arr(g, "prism.hadamard.inverse_weight_names", true, &inv, &err), TERN_OK);
    assert_int_equal(inv.n, 1);
    assert_true(gguf_str_eq(inv.strs[0], "token_embd.weight"));
    assert_int_equal(gguf_get_arr(g, "prism.hadamard.weight_names", true, &names, &err), TERN_OK);
    assert_int_equal(names.type, GGUF_T_STRING);
    assert_int_equal(names.n, n_names);
    /* every listed name exists, is folded per the spec table, fits the block, has a sign vector;
     * and every table-folded tensor is listed (counts equal, names distinct) */
    st_exp *e = calloc((size_t)(16 * h->L + 8), sizeof *e);
    assert_non_null(e);
    const int n = st_expected(h, e);
    uint64_t n_folded = 0;
    for (int i = 0; i < n; i++) n_folded += e[i].rot == 1;
    assert_int_equal(n_folded, n_names);
    for (uint64_t i = 0; i < names.n; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)names.strs[i].n, names.strs[i].p);
        int k = -1;
        for (int j = 0; j < n; j++) if (strcmp(e[j].name, nm) == 0) k = j;
        if (k < 0 || e[k].rot != 1) fail_msg("weight_names lists '%s', not folded in spec 4.6", nm);
        for (uint64_t j = 0; j < i; j++) assert_false(gguf_str_eq(names.strs[j], nm));
        const gguf_tensor *t = gguf_find_tensor(g, nm);
        assert_non_null(t);
        assert_int_equal(t->ne[0] % block, 0);
        assert_true(t->ne[0] == widths[0] || t->ne[0] == widths[1] || t->ne[0] == widths[2]);
    }
    free(e);
    /* and the engine's own strict validator (src/model/hadamard_meta.c) accepts the keys */
    had_cfg hc;
    if (had_load(&hc, g, &err) != TERN_OK) fail_msg("had_load: %s", err.msg);
    assert_true(hc.active && hc.gdn_v_grouped && hc.block == block && hc.n_folded == n_names && hc.n_inverse == 1);
    assert_true(had_is_inverse(&hc, "token_embd.weight") && had_is_folded(&hc, "output.weight"));
    had_free(&hc);
}

/* ---- tests ------------------------------------------------------------------------------------- */

static void test_bonsai2_27b_header(void **state) {
    (void)state;
    char path[512];
    fx_tmp_path(path, sizeof path, "synth-27b.gguf");
    /* spec 10: tensor data bytes of the PQ2_0 and PTQ1_0 files */
    const struct { const char *type; int id; uint64_t data_bytes; } runs[] = {
        {"pq2_0", QT_PQ2_0, 7195047936ull}, {"ptq1_0", QT_PTQ1_0, 5935527936ull}};
    for (int r = 0; r < 2; r++) {
        ST_RUN_OK("synth --arch bonsai2-27b --type %s --no-weights -o '%s'", runs[r].type, path);
        gguf_ctx *g = st_open(path);
        assert_int_equal(g->n_tensors, 851);
        const int64_t params = check_tensors(g, &ST_HP_27B, runs[r].id, "bonsai2-27b");
        assert_int_equal(params, 26895998464ll);   /* spec 10 */
        int64_t by_type[3] = {0, 0, 0};            /* ternary, BF16, F32 */
        uint64_t data = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            by_type[t->type == QT_BF16 ? 1 : t->type == QT_F32 ? 2 : 0] += t->ne[0] * t->ne[1];
            data += t->nbytes;
        }
        assert_int_equal(by_type[0], 26869760000ll);
        assert_int_equal(by_type[1], 23592960ll);
        assert_int_equal(by_type[2], 2645504ll);
        assert_int_equal(data, runs[r].data_bytes);
        assert_int_equal(g->size, g->data_offset + runs[r].data_bytes);
        check_keys(g, &ST_HP_27B, true, true);
        const int64_t widths[3] = {5120, 6144, 17408};
        check_hadamard(g, &ST_HP_27B, 1024, widths, 401);
        assert_int_equal(kv_int(g, "general.file_type"), r == 0 ? 141 : 143);
        const uint64_t file_bytes = g->data_offset + runs[r].data_bytes;
        gguf_close(g);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal((uint64_t)sb.st_size, file_bytes);
        assert_true((uint64_t)sb.st_blocks * 512 < (uint64_t)64 << 20);   /* sparse: only the header is on disk */
        unlink(path);
    }
}

static void test_bonsai_1_7b_header(void **state) {
    (void)state;
    char path[512];
    fx_tmp_path(path, sizeof path, "synth-1.7b.gguf");
    ST_RUN_OK("synth --arch bonsai-1.7b --no-weights -o '%s'", path);
    gguf_ctx *g = st_open(path);
    assert_int_equal(g->n_tensors, 3 + 11 * 28 - 1);   /* spec 6: 11 per layer, embd + norm, tied */
    /* Qwen3-1.7B: 1.72e9 parameters with the tied embedding (1.41e9 without it) */
    const int64_t params = check_tensors(g, &ST_HP_1_7B, QT_PQ2_0, "bonsai-1.7b");
    assert_int_equal(params, 1720574976ll);
    assert_int_equal(params - 2048ll * 151936, 1409410048ll);
    check_keys(g, &ST_HP_1_7B, true, false);
    gguf_close(g);
    unlink(path);
}

static void test_tiny_tables_and_types(void **state) {
    (void)state;
    char path[512];
    fx_tmp_path(path, sizeof path, "synth-tiny.gguf");
    const struct { const char *type; int id; bool ftype; } types[] = {
        {"pq2_0", QT_PQ2_0, true}, {"ptq1_0", QT_PTQ1_0, true}, {"q2_0", QT_Q2_0, false}};
    for (int k = 0; k < 3; k++) {
        ST_RUN_OK("synth --arch qwen3-tiny --type %s --seed 3 -o '%s'", types[k].type, path);
        gguf_ctx *g = st_open(path);
        check_tensors(g, &ST_HP_Q3_TINY, types[k].id, "qwen3-tiny");
        check_keys(g, &ST_HP_Q3_TINY, types[k].ftype, false);
        gguf_close(g);
        ST_RUN_OK("synth --arch qwen35-tiny --type %s --seed 3 -o '%s'", types[k].type, path);
        g = st_open(path);
        check_tensors(g, &ST_HP_Q35_TINY, types[k].id, "qwen35-tiny");
        check_keys(g, &ST_HP_Q35_TINY, types[k].ftype, true);
        const int64_t widths[3] = {256, 1024, 768};
        check_hadamard(g, &ST_HP_Q35_TINY, 256, widths, 8 * 3 + 6 * 3 + 2 * 4 + 1);
        gguf_close(g);
    }
    unlink(path);
}

/* The weight recipe: per 128-block fp16 scale in its range, codes 0..2 only (no +2d), the first
 * weight of each 64-group nonzero (so max|w| = d: lossless), codes about uniform; norms near 1,
 * ssm_a < 0, dt bias in [-4, -1], alpha/beta BF16 and small. */
static void test_weight_recipe(void **state) {
    (void)state;
    char path[512];
    fx_tmp_path(path, sizeof path, "synth-recipe.gguf");
    ST_RUN_OK("synth --arch qwen35-tiny --seed 11 -o '%s'", path);
    gguf_ctx *g = st_open(path);
    int64_t count[4] = {0, 0, 0, 0};
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        const int64_t n = t->ne[0] * t->ne[1];
        if (t->type == QT_PQ2_0) {
            const bool embd = strstr(t->name, "token_embd") || strcmp(t->name, "output.weight") == 0;
            const bool ffn = strstr(t->name, "ffn_") != NULL;
            const float lo = embd ? 0.015f : ffn ? 0.035f : 0.01f, hi = embd ? 0.025f : 0.05f;
            const block_pq2_0 *b = (const block_pq2_0 *)t->data;
            for (int64_t k = 0; k < n / 128; k++) {
                uint16_t dh;
                memcpy(&dh, &b[k].d, 2);
                const float d = fp16_to_f32(dh);
                if (!(d >= lo * 0.999f && d <= hi * 1.001f)) fail_msg("%s block %" PRId64 ": scale %g outside [%g, %g]", t->name, k, d, lo, hi);
                for (int j = 0; j < 128; j++) count[qt_pq2_0_code(&b[k], j)]++;
                assert_true(qt_pq2_0_code(&b[k], 0) != 1 && qt_pq2_0_code(&b[k], 64) != 1);
            }
            continue;
        }
        if (t->type == QT_BF16) {
            const uint16_t *h = (const uint16_t *)t->data;
            double ss = 0;
            for (int64_t k = 0; k < n; k++) ss += (double)bf16_to_f32(h[k]) * bf16_to_f32(h[k]);
            assert_true(sqrt(ss / (double)n) > 0.01 && sqrt(ss / (double)n) < 0.1);
            continue;
        }
        assert_int_equal(t->type, QT_F32);
        const float *f = (const float *)t->data;
        double mean = 0;
        for (int64_t k = 0; k < n; k++) mean += f[k];
        mean /= (double)n;
        if (strstr(t->name, "ssm_a")) for (int64_t k = 0; k < n; k++) assert_true(f[k] <= -0.5f && f[k] >= -4.0f);
        else if (strstr(t->name, "ssm_dt.bias")) for (int64_t k = 0; k < n; k++) assert_true(f[k] >= -4.0f && f[k] <= -1.0f);
        else if (strcmp(t->name, "output_norm.weight") == 0) assert_true(fabs(mean - 16.0) < 0.5);
        else if (strstr(t->name, "norm")) assert_true(fabs(mean - 1.0) < 0.05);
        else if (strstr(t->name, "ssm_conv1d")) assert_true(fabs(mean) < 0.05);
        else fail_msg("unexpected F32 tensor %s", t->name);
    }
    assert_int_equal(count[3], 0);
    const double tot = (double)(count[0] + count[1] + count[2]);
    for (int c = 0; c < 3; c++) assert_true(fabs(count[c] / tot - 1.0 / 3) < 0.01);
    gguf_close(g);
    unlink(path);
}

static bool files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = fx_read_file(a, &na), *y = fx_read_file(b, &nb);
    const bool eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

static void test_determinism(void **state) {
    (void)state;
    char a[512], b[512];
    fx_tmp_path(a, sizeof a, "synth-det-a.gguf");
    fx_tmp_path(b, sizeof b, "synth-det-b.gguf");
    ST_RUN_OK("synth --arch qwen35-tiny --seed 7 -o '%s'", a);
    ST_RUN_OK("synth --arch qwen35-tiny --seed 7 -o '%s'", b);
    assert_true(files_equal(a, b));
    ST_RUN_OK("synth --arch qwen35-tiny --seed 8 -o '%s'", b);
    assert_false(files_equal(a, b));
    gguf_ctx *ga = st_open(a), *gb = st_open(b);   /* the weights differ, not only general.name */
    static const char *const names[] = {"blk.0.ffn_up.weight", "blk.0.ssm_a", "output_norm.weight", "blk.1.ssm_alpha.weight"};
    for (int i = 0; i < 4; i++) {
        const gguf_tensor *x = gguf_find_tensor(ga, names[i]), *y = gguf_find_tensor(gb, names[i]);
        assert_true(x && y && x->nbytes == y->nbytes);
        assert_true(memcmp(x->data, y->data, x->nbytes) != 0);
    }
    gguf_close(ga);
    gguf_close(gb);
    /* the same seed gives the same weights for every --type (only the encoding changes) */
    ST_RUN_OK("synth --arch qwen35-tiny --seed 7 --type q2_0 -o '%s'", b);
    ga = st_open(a);
    gb = st_open(b);
    for (uint64_t i = 0; i < ga->n_tensors; i++) {
        const gguf_tensor *x = &ga->tensors[i], *y = gguf_find_tensor(gb, x->name);
        assert_non_null(y);
        const int64_t n = x->ne[0] * x->ne[1];
        if (x->type != QT_PQ2_0) { assert_memory_equal(x->data, y->data, x->nbytes); continue; }
        float *fx = malloc((size_t)n * 4), *fy = malloc((size_t)n * 4);
        assert_int_equal(qt_dequant(x->type, x->data, fx, n), TERN_OK);
        assert_int_equal(qt_dequant(y->type, y->data, fy, n), TERN_OK);
        assert_memory_equal(fx, fy, (size_t)n * 4);
        free(fx);
        free(fy);
    }
    gguf_close(ga);
    gguf_close(gb);
    unlink(a);
    unlink(b);
}

/* ---- rotation equivalence ----------------------------------------------------------------------
 * Rotated file: W' (ternary); unrotated: W (F32). Claim (spec 4.3): W' rot(P x) = W x for every x,
 * P = the tiled -> grouped V-head permutation for ssm_out (spec 5.5), identity otherwise.
 * Both sides are summed in double, so only two float computations differ from exact math: the
 * test's rot(P x) and the generator's W = rot_inv(W' row) (then permuted). Each is a scale by
 * 1/sqrt(n) (n = 256: a power of two, exact), exact sign flips, and L = log2(n) butterfly
 * stages; one stage rounds each output once, |fl(a +- b) - (a +- b)| <= u |a +- b| <= u (|a|+|b|),
 * so an output of the transform is off by at most g_L S, g_L = L u / (1 - L u), u = 2^-24, S = the
 * sum of |inputs| of its block (scaled). Hence, per row n, in grouped (rotated-input) order:
 *   |W' rot(P x) - W x| <= g_L (sum_k |W'_k| Bx(k) + sum_k |(P x)_k| Bw(k)) (1 + 1e-6)
 * with Bx(k) = sum over k's Hadamard block of |(P x)_j| / sqrt(n), Bw(k) likewise of |W'_j|.
 * The (1 + 1e-6) covers the double sums (K u_double) and the second-order terms. */

static void perm_tiled_to_grouped(const float *x, float *y, int64_t Hk, int64_t Hv, int64_t dv) {
    const int64_t ratio = Hv / Hk;
    for (int64_t k = 0; k < Hk; k++)
        for (int64_t r = 0; r < ratio; r++)
            for (int64_t e = 0; e < dv; e++) y[dv * (ratio * k + r) + e] = x[dv * (k + Hk * r) + e];
}

static const int8_t *sign_vec(const gguf_ctx *g, int64_t K, int8_t *buf) {
    gguf_arr w, v;
    tern_err err = {0};
    assert_int_equal(gguf_get_arr(g, "prism.hadamard.sign_widths", true, &w, &err), TERN_OK);
    assert_int_equal(gguf_get_arr(g, "prism.hadamard.sign_values", true, &v, &err), TERN_OK);
    uint64_t off = 0;
    for (uint64_t i = 0; i < w.n; i++) {
        if (gguf_arr_int(&w, i) == K) {
            for (int64_t k = 0; k < K; k++) buf[k] = (int8_t)gguf_arr_int(&v, off + (uint64_t)k);
            return buf;
        }
        off += (uint64_t)gguf_arr_int(&w, i);
    }
    fail_msg("no sign vector of width %" PRId64, K);
    return NULL;
}

static void test_rotation_equivalence(void **state) {
    (void)state;
    char rp[512], up[512];
    fx_tmp_path(rp, sizeof rp, "synth-rot.gguf");
    fx_tmp_path(up, sizeof up, "synth-unrot.gguf");
    ST_RUN_OK("synth --arch qwen35-tiny --seed 5 -o '%s'", rp);
    ST_RUN_OK("synth --arch qwen35-tiny --seed 5 --unrotated-f32 -o '%s'", up);
    gguf_ctx *gr = st_open(rp), *gu = st_open(up);
    const st_hp *h = &ST_HP_Q35_TINY;
    const int64_t nblk = 256;
    const double gL = 8 * 0x1.0p-24 / (1 - 8 * 0x1.0p-24);
    assert_int_equal(gr->n_tensors, gu->n_tensors);
    for (uint64_t i = 0; i < gu->n_kv; i++) assert_true(strncmp(gu->kv[i].key, "prism.", 6) != 0);
    gguf_arr names;
    tern_err err = {0};
    assert_int_equal(gguf_get_arr(gr, "prism.hadamard.weight_names", true, &names, &err), TERN_OK);
    int n_checked = 0;
    uint64_t state_x = 0x243f6a8885a308d3ull;
    for (uint64_t ti = 0; ti < gr->n_tensors; ti++) {
        const gguf_tensor *tr = &gr->tensors[ti], *tu = gguf_find_tensor(gu, tr->name);
        assert_non_null(tu);
        bool folded = false;
        for (uint64_t j = 0; j < names.n; j++) folded |= gguf_str_eq(names.strs[j], tr->name);
        const bool embd = strcmp(tr->name, "token_embd.weight") == 0;
        if (!folded && !embd) {   /* not rotated: identical bytes and type */
            assert_int_equal(tr->type, tu->type);
            assert_int_equal(tr->nbytes, tu->nbytes);
            assert_memory_equal(tr->data, tu->data, tr->nbytes);
            continue;
        }
        assert_int_equal(tu->type, QT_F32);
        const int64_t K = tr->ne[0], N = tr->ne[1];
        const bool grouped = strstr(tr->name, "ssm_out") != NULL;
        int8_t *s = malloc((size_t)K);
        float *w = malloc((size_t)(K * N) * 4), *x = malloc((size_t)K * 4), *xp = malloc((size_t)K * 4);
        float *xr = malloc((size_t)K * 4), *row = malloc((size_t)K * 4);
        double *bx = malloc((size_t)K * 8);
        assert_true(s && w && x && xp && xr && row && bx);
        sign_vec(gr, K, s);
        assert_int_equal(qt_dequant(tr->type, tr->data, w, K * N), TERN_OK);
        const float *wu = (const float *)tu->data;
        for (int64_t k = 0; k < K; k++) {   /* x uniform in [-1, 1) */
            state_x = state_x * 6364136223846793005ull + 1442695040888963407ull;
            x[k] = (float)((double)(state_x >> 11) * 0x1.0p-53 * 2 - 1);
        }
        if (grouped) perm_tiled_to_grouped(x, xp, h->Hk, h->Hv, h->dstate);
        else memcpy(xp, x, (size_t)K * 4);
        memcpy(xr, xp, (size_t)K * 4);
        had_rot(xr, K, nblk, s);
        for (int64_t b = 0; b < K; b += nblk) {
            double sb = 0;
            for (int64_t j = b; j < b + nblk; j++) sb += fabs(xp[j]);
            for (int64_t j = b; j < b + nblk; j++) bx[j] = sb / 16.0;
        }
        for (int64_t n = 0; n < N; n++) {
            const float *wr = w + n * K, *wn = wu + n * K;
            double lhs = 0, rhs = 0, bound = 0;
            for (int64_t k = 0; k < K; k++) { lhs += (double)wr[k] * xr[k]; rhs += (double)wn[k] * x[k]; }
            for (int64_t b = 0; b < K; b += nblk) {
                double sw = 0;
                for (int64_t j = b; j < b + nblk; j++) sw += fabs(wr[j]);
                for (int64_t j = b; j < b + nblk; j++) bound += fabs(wr[j]) * bx[j] + fabs(xp[j]) * sw / 16.0;
            }
            bound *= gL * (1 + 1e-6);
            if (fabs(lhs - rhs) > bound)
                fail_msg("%s row %" PRId64 ": W' rot(x) = %.9g, W x = %.9g, |diff| %.3g > bound %.3g", tr->name, n, lhs, rhs,
                         fabs(lhs - rhs), bound);
            if (embd) {   /* spec 4.4: stored row = R e, so rot(e) must give the stored row back */
                memcpy(row, wn, (size_t)K * 4);
                had_rot(row, K, nblk, s);
                for (int64_t b = 0; b < K; b += nblk) {
                    double se = 0, sw = 0;
                    for (int64_t j = b; j < b + nblk; j++) { se += fabs(wn[j]); sw += fabs(wr[j]); }
                    const double bk = gL * (se / 16.0 + sw) * (1 + 1e-6);
                    for (int64_t j = b; j < b + nblk; j++)
                        if (fabs((double)row[j] - wr[j]) > bk)
                            fail_msg("token_embd row %" PRId64 " [%" PRId64 "]: rot(e) %.9g, stored %.9g", n, j, row[j], wr[j]);
                }
            }
        }
        n_checked++;
        free(s); free(w); free(x); free(xp); free(xr); free(row); free(bx);
    }
    assert_int_equal(n_checked, (int)names.n + 1);   /* every folded tensor and the embedding */
    gguf_close(gr);
    gguf_close(gu);
    unlink(rp);
    unlink(up);
}


/* ---- --tokenizer ------------------------------------------------------------------------------- */

static bool kv_equal(const gguf_kv *a, const gguf_kv *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case GGUF_T_STRING: return a->v.s.n == b->v.s.n && memcmp(a->v.s.p, b->v.s.p, a->v.s.n) == 0;
    case GGUF_T_ARRAY:
        if (a->v.a.type != b->v.a.type || a->v.a.n != b->v.a.n) return false;
        for (uint64_t j = 0; j < a->v.a.n; j++) {
            if (a->v.a.type == GGUF_T_STRING) {
                if (a->v.a.strs[j].n != b->v.a.strs[j].n || memcmp(a->v.a.strs[j].p, b->v.a.strs[j].p, a->v.a.strs[j].n)) return false;
            } else if (gguf_arr_int(&a->v.a, j) != gguf_arr_int(&b->v.a, j)) return false;
        }
        return true;
    case GGUF_T_BOOL: return a->v.b == b->v.b;
    default: return a->v.u == b->v.u;
    }
}

/* qwen3-tiny with the real Qwen3 tokenizer and 151,936 rows has the golden qwen3-tiny's layout:
 * every tokenizer key equal to the golden file's (made by the reference converter), and the
 * same tensor names, shapes and types. */
static void test_tokenizer_matches_golden(void **state) {
    (void)state;
    char tokp[512], goldp[512], path[512];
    fx_require(tokp, sizeof tokp, "data/qwen3-tokenizer/tokenizer.json");
    fx_require(goldp, sizeof goldp, "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf");
    fx_tmp_path(path, sizeof path, "synth-tok.gguf");
    ST_RUN_OK("synth --arch qwen3-tiny --tokenizer '%s' --n-vocab 151936 -o '%s'", tokp, path);
    gguf_ctx *g = st_open(path), *gold = st_open(goldp);
    int n_tok_keys = 0;
    for (uint64_t i = 0; i < gold->n_kv; i++) {
        const gguf_kv *b = &gold->kv[i];
        if (strncmp(b->key, "tokenizer.", 10) != 0) continue;
        const gguf_kv *a = gguf_find_kv(g, b->key);
        if (!a) fail_msg("missing %s", b->key);
        if (!kv_equal(a, b)) fail_msg("%s differs from the golden file", b->key);
        n_tok_keys++;
    }
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strncmp(g->kv[i].key, "tokenizer.", 10) == 0 && !gguf_find_kv(gold, g->kv[i].key)) fail_msg("extra key %s", g->kv[i].key);
    assert_true(n_tok_keys >= 9);
    assert_int_equal(g->n_tensors, gold->n_tensors);
    for (uint64_t i = 0; i < gold->n_tensors; i++) {   /* same tensors, in the converter's order */
        const gguf_tensor *b = &gold->tensors[i], *a = &g->tensors[i];
        if (strcmp(a->name, b->name) != 0) fail_msg("tensor %" PRIu64 ": '%s', golden '%s'", i, a->name, b->name);
        assert_true(a->type == b->type && a->n_dims == b->n_dims && memcmp(a->ne, b->ne, sizeof a->ne) == 0);
        assert_int_equal(a->offset, b->offset);
    }
    /* every golden key but the name and description: same type and value */
    for (uint64_t i = 0; i < gold->n_kv; i++) {
        const gguf_kv *b = &gold->kv[i], *a = gguf_find_kv(g, b->key);
        if (strcmp(b->key, "general.name") == 0 || strcmp(b->key, "general.description") == 0) continue;
        if (!a || !kv_equal(a, b)) fail_msg("key %s differs from the golden file", b->key);
    }
    check_tensors(g, &(st_hp){false, 256, 4, 768, 4, 2, 64, 151936, true, 0, 0, 0, 0, 0, 0}, QT_PQ2_0, "qwen3-tiny+tok");
    gguf_close(g);
    gguf_close(gold);
    unlink(path);
}

/* The 27B has 248,320 rows and the Qwen3 tokenizer 151,669 ids: the rest are [PADi] UNUSED rows.
 * --chat-template replaces the template; pre is qwen35. */
static void test_tokenizer_pad_rows(void **state) {
    (void)state;
    char tokp[512], tmplp[512], path[512];
    fx_require(tokp, sizeof tokp, "data/qwen3-tokenizer/tokenizer.json");
    fx_require(tmplp, sizeof tmplp, "data/qwen3-tokenizer/Qwen3.5-4B.jinja");
    fx_tmp_path(path, sizeof path, "synth-27b-tok.gguf");
    ST_RUN_OK("synth --arch bonsai2-27b --no-weights --tokenizer '%s' --chat-template '%s' -o '%s'", tokp, tmplp, path);
    gguf_ctx *g = st_open(path);
    assert_int_equal(check_tensors(g, &ST_HP_27B, QT_PQ2_0, "bonsai2-27b+tok"), 26895998464ll);
    check_keys(g, &ST_HP_27B, true, true);
    gguf_arr toks, types;
    gguf_str s;
    tern_err err = {0};
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", true, &toks, &err), TERN_OK);
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.token_type", true, &types, &err), TERN_OK);
    assert_int_equal(toks.n, 248320);
    assert_true(gguf_str_eq(toks.strs[151645], "<|im_end|>"));
    assert_true(gguf_str_eq(toks.strs[151669], "[PAD151669]"));
    assert_true(gguf_str_eq(toks.strs[248319], "[PAD248319]"));
    for (uint64_t i = 151669; i < 248320; i++) assert_int_equal(gguf_arr_int(&types, i), 5);   /* UNUSED */
    assert_int_equal(kv_int(g, "tokenizer.ggml.eos_token_id"), 151645);
    assert_int_equal(gguf_get_str(g, "tokenizer.ggml.pre", true, &s, &err), TERN_OK);
    assert_true(gguf_str_eq(s, "qwen35"));
    size_t len = 0;
    char *tmpl = fx_read_file(tmplp, &len);
    assert_non_null(tmpl);
    assert_int_equal(gguf_get_str(g, "tokenizer.chat_template", true, &s, &err), TERN_OK);
    assert_true(s.n == len && memcmp(s.p, tmpl, len) == 0);
    free(tmpl);
    gguf_close(g);
    unlink(path);
    /* a spec arch keeps its rows: a tokenizer with more ids than rows cannot fit, and --n-vocab
     * is refused there */
    char msg[2048];
    assert_int_equal(st_run(msg, sizeof msg, "synth --arch bonsai-1.7b --n-vocab 1000 --no-weights -o '%s'", path), 2);
}


/* Every tiny variant loads in the engine and runs: the built-in vocabulary is a working
 * byte-level BPE (its merges build " the" into one token, pieces give the text back), the
 * logits are finite. */
static void test_loadable(void **state) {
    (void)state;
    char path[512];
    fx_tmp_path(path, sizeof path, "synth-load.gguf");
    static const char *const archs[] = {"qwen3-tiny", "qwen35-tiny"};
    static const char *const variants[] = {"--type pq2_0", "--type ptq1_0", "--type q2_0", "--unrotated-f32"};
    for (int a = 0; a < 2; a++)
        for (int v = 0; v < 4; v++) {
            ST_RUN_OK("synth --arch %s %s --seed 6 -o '%s'", archs[a], variants[v], path);
            tern_model_opts o;
            tern_model_opts_default(&o);
            o.n_threads = 1;
            tern_model *m = NULL;
            tern_err err = {0};
            if (tern_model_load(&m, path, &o, &err) != TERN_OK) fail_msg("%s %s: load: %s", archs[a], variants[v], err.msg);
            tern_model_info info;
            tern_model_get_info(m, &info);
            assert_int_equal(info.n_vocab, 512);
            const char *text = "Once the cat sat.";
            int32_t ids[64];
            int n = 0;
            assert_int_equal(tern_tokenize(m, text, strlen(text), false, false, ids, 64, &n, &err), TERN_OK);
            char back[256] = "";
            for (int i = 0; i < n; i++) {
                char piece[64];
                const int k = tern_token_piece(m, ids[i], false, piece, (int)sizeof piece - 1);
                assert_true(k >= 0 && k < (int)sizeof piece);
                piece[k] = '\0';
                strcat(back, piece);
                if (strcmp(piece, " the") == 0) assert_int_equal(ids[i], 256 + 4);   /* merge 4: "Ġt" + "he" */
            }
            assert_string_equal(back, text);
            assert_true(n < (int)strlen(text));   /* merges applied */
            tern_session_opts so;
            tern_session_opts_default(&so);
            so.n_ctx = 64;
            tern_session *s = NULL;
            assert_int_equal(tern_session_init(&s, m, &so, &err), TERN_OK);
            const float *lg = tern_session_eval(s, ids, n, &err);
            if (!lg) fail_msg("%s %s: eval: %s", archs[a], variants[v], err.msg);
            for (int i = 0; i < info.n_vocab; i++) assert_true(isfinite(lg[i]));
            tern_session_free(s);
            tern_model_free(m);
        }
    unlink(path);
}

static void test_bad_arguments(void **state) {
    (void)state;
    char path[512], msg[2048];
    fx_tmp_path(path, sizeof path, "synth-bad.gguf");
    assert_int_equal(st_run(msg, sizeof msg, "synth --arch qwen9 -o '%s'", path), 2);
    assert_non_null(strstr(msg, "qwen9"));
    assert_int_equal(st_run(msg, sizeof msg, "synth --arch qwen3-tiny --type q4_0 -o '%s'", path), 2);
    assert_int_equal(st_run(msg, sizeof msg, "synth --arch bonsai2-27b --unrotated-f32 -o '%s'", path), 2);
    assert_int_equal(st_run(msg, sizeof msg, "synth --arch qwen3-tiny"), 2);
    assert_int_equal(st_run(msg, sizeof msg, "synth --arch qwen3-tiny --seed x -o '%s'", path), 2);
    assert_int_equal(access(path, F_OK), -1);
    /* an unwritable output path is a runtime error naming it */
    assert_int_equal(st_run(msg, sizeof msg, "synth --arch qwen3-tiny -o /nonexistent-dir/x.gguf"), 1);
    assert_non_null(strstr(msg, "/nonexistent-dir/x.gguf"));
}

int suite_synth(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bonsai2_27b_header),
        cmocka_unit_test(test_bonsai_1_7b_header),
        cmocka_unit_test(test_tiny_tables_and_types),
        cmocka_unit_test(test_weight_recipe),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_rotation_equivalence),
        cmocka_unit_test(test_loadable),
        cmocka_unit_test(test_tokenizer_matches_golden),
        cmocka_unit_test(test_tokenizer_pad_rows),
        cmocka_unit_test(test_bad_arguments),
    };
    TEST_RUN_SUITE("synth", tests);
}
