/* test_gguf_info.c: the per-token byte budget and parameter figures behind `tern info`
 * (src/format/budget.c), on the real stories260K file and on a header-only 27B file built here
 * from the spec 5.2 tensor table with the streaming writer (the data region is a sparse hole:
 * no disk use). Expected numbers are computed independently in the test from the
 * PROVENANCE.md shapes and the spec's published figures (section 10: 26,895,998,464
 * parameters, 851 tensors, 7,195,047,936 / 5,935,527,936 tensor data bytes; 5.6: 65,536 KV
 * bytes per position; DESIGN.md: ~2 x 151 MB recurrent state). Also runs `tern info` itself. */
#include "test.h"
#include "run_util.h"

#include "format/budget.h"
#include "format/gguf.h"
#include "format/qtypes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_budget_stories260k(void **state) {
    (void)state;
    char path[512];
    fx_require(path, sizeof path, "data/stories260k/stories260K.gguf");
    gguf_ctx *g;
    tern_err err = {0};
    assert_int_equal(gguf_open(&g, path, GGUF_LOAD_MMAP, &err), TERN_OK);
    gguf_budget b;
    assert_int_equal(gguf_budget_compute(g, 99, &b, &err), TERN_OK);
    /* PROVENANCE.md shapes: dim 64, 5 layers, q 64x64, k/v 64x32, ffn 64x172 (x3), norms 64,
     * token_embd and output 64x512 */
    const uint64_t per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 172 + 2 * 64;
    const uint64_t params = 2 * 64 * 512 + 64 + 5 * per_layer;
    assert_string_equal(b.arch, "llama");
    assert_int_equal(b.n_tensors, 48);
    assert_int_equal(b.n_params, params);
    assert_int_equal(params, 292800);
    assert_int_equal(b.tensor_bytes, params * 4);
    assert_int_equal(b.n_types, 1);
    assert_int_equal(b.by_type[0].type, QT_F32);
    /* untied: token_embd is lookup-only (one 64-float row), output.weight read in full */
    assert_false(b.tied_embd);
    assert_int_equal(b.embd_row_bytes, 64 * 4);
    assert_int_equal(b.weight_bytes, (params - 64 * 512) * 4 + 64 * 4);
    /* KV: 5 layers x 4 kv heads x (8 + 8) x 2 bytes, 100 positions (pos 99) */
    assert_int_equal(b.n_attn_layers, 5);
    assert_int_equal(b.n_gdn_layers, 0);
    assert_int_equal(b.kv_bytes_per_pos, 5 * 4 * 16 * 2);
    assert_int_equal(b.kv_bytes, 100 * 640);
    assert_int_equal(b.rstate_bytes + b.conv_bytes, 0);
    assert_int_equal(b.total_bytes, b.weight_bytes + 64000);
    assert_int_equal(gguf_budget_compute(g, -1, &b, &err), TERN_E_ARG);
    gguf_close(g);
}

/* Hostile hyperparameters: work does not grow with block_count, products are overflow-checked
 * (found by the fuzzer: a 2^31-layer loop). */
static void test_budget_hostile_header(void **state) {
    (void)state;
    char path[256];
    fx_tmp_path(path, sizeof path, "hostile.gguf");
    for (int variant = 0; variant < 2; variant++) {
        gguf_writer *w;
        tern_err err = {0};
        assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
        gguf_w_set_str(w, "general.architecture", "qwen35");
        gguf_w_set_u32(w, "qwen35.block_count", 2147483647u);
        gguf_w_set_u32(w, "qwen35.embedding_length", 64);
        gguf_w_set_u32(w, "qwen35.attention.head_count", 1);
        gguf_w_set_u32(w, "qwen35.full_attention_interval", 4);
        gguf_w_set_u32(w, "qwen35.ssm.state_size", variant ? 2147483647u : 2);
        gguf_w_set_u32(w, "qwen35.ssm.time_step_rank", variant ? 2147483647u : 3);
        gguf_w_set_u32(w, "qwen35.ssm.conv_kernel", 4);
        gguf_w_set_u32(w, "qwen35.ssm.inner_size", 8);
        gguf_w_set_u32(w, "qwen35.ssm.group_count", 1);
        assert_int_equal(gguf_w_write_file(w, path, &err), TERN_OK);
        gguf_w_free(w);
        gguf_ctx *g;
        assert_int_equal(gguf_open(&g, path, GGUF_LOAD_READ, &err), TERN_OK);
        gguf_budget b;
        const int rc = gguf_budget_compute(g, 0, &b, &err);
        if (variant == 0) {
            assert_int_equal(rc, TERN_OK);
            assert_int_equal(b.n_attn_layers, 2147483647 / 4);
            assert_int_equal(b.n_gdn_layers, 2147483647 - 2147483647 / 4);
            /* KV: 1 kv head x (64 + 64) x 2 bytes per attention layer */
            assert_int_equal(b.kv_bytes_per_pos, (uint64_t)(2147483647 / 4) * 256);
            assert_int_equal(b.rstate_bytes, 2ull * b.n_gdn_layers * 3 * 2 * 2 * 4);
            assert_int_equal(b.conv_bytes, 2ull * b.n_gdn_layers * 3 * (8 + 2 * 1 * 2) * 4);
        } else {
            assert_int_equal(rc, TERN_E_FORMAT);
            assert_non_null(strstr(err.msg, "overflows"));
        }
        gguf_close(g);
    }
    unlink(path);
}

/* ---- the 27B header (spec 5.1, 5.2, 4.1) ----------------------------------------------------- */

enum { D = 5120, FF = 17408, NV = 248320, NL = 64 };

static int add(gguf_writer *w, const char *name, int type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    const int rc = gguf_w_add_tensor(w, name, type, ne1 ? 2 : 1, ne, NULL);
    assert_true(rc >= 0);
    return rc;
}

/* Writes the 27B tensor table with ternary type tt; returns the number of folded weight names. */
static void write_27b(const char *path, int tt) {
    gguf_writer *w;
    tern_err err = {0};
    assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
    gguf_w_set_str(w, "general.architecture", "qwen35");
    gguf_w_set_str(w, "general.name", "bonsai2-27b header fixture");
    gguf_w_set_u32(w, "qwen35.block_count", NL);
    gguf_w_set_u32(w, "qwen35.context_length", 262144);
    gguf_w_set_u32(w, "qwen35.embedding_length", D);
    gguf_w_set_u32(w, "qwen35.feed_forward_length", FF);
    gguf_w_set_u32(w, "qwen35.attention.head_count", 24);
    gguf_w_set_u32(w, "qwen35.attention.head_count_kv", 4);
    gguf_w_set_u32(w, "qwen35.attention.key_length", 256);
    gguf_w_set_u32(w, "qwen35.attention.value_length", 256);
    gguf_w_set_f32(w, "qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_w_set_f32(w, "qwen35.rope.freq_base", 1e7f);
    gguf_w_set_u32(w, "qwen35.rope.dimension_count", 64);
    const int32_t sec[4] = {11, 11, 10, 0};
    gguf_w_set_arr(w, "qwen35.rope.dimension_sections", GGUF_T_I32, sec, 4);
    gguf_w_set_u32(w, "qwen35.ssm.conv_kernel", 4);
    gguf_w_set_u32(w, "qwen35.ssm.state_size", 128);
    gguf_w_set_u32(w, "qwen35.ssm.group_count", 16);
    gguf_w_set_u32(w, "qwen35.ssm.time_step_rank", 48);
    gguf_w_set_u32(w, "qwen35.ssm.inner_size", 6144);
    gguf_w_set_u32(w, "qwen35.full_attention_interval", 4);
    gguf_w_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_set_str(w, "tokenizer.ggml.pre", "qwen35");
    gguf_w_set_u32(w, "tokenizer.ggml.eos_token_id", 248046);
    /* Hadamard metadata (spec 4.1): 10 keys */
    gguf_w_set_u32(w, "prism.hadamard.version", 1);
    gguf_w_set_u32(w, "prism.hadamard.block_size", 1024);
    gguf_w_set_str(w, "prism.hadamard.transform", "normalized-sylvester-walsh-hadamard");
    gguf_w_set_str(w, "prism.hadamard.axis", "input-last-dimension");
    gguf_w_set_str(w, "prism.hadamard.sign_mode", "explicit");
    const int32_t widths[3] = {5120, 6144, 17408};
    gguf_w_set_arr(w, "prism.hadamard.sign_widths", GGUF_T_I32, widths, 3);
    int8_t *signs = malloc(28672);
    assert_non_null(signs);
    for (int i = 0; i < 28672; i++) signs[i] = (int8_t)((i * 2654435761u >> 7) & 1 ? 1 : -1);
    gguf_w_set_arr(w, "prism.hadamard.sign_values", GGUF_T_I8, signs, 28672);
    free(signs);
    gguf_w_set_bool(w, "prism.hadamard.gdn_v_grouped", true);

    char (*folded)[64] = malloc(401 * sizeof *folded);
    assert_non_null(folded);
    int nf = 0;
    add(w, "token_embd.weight", tt, D, NV);
    add(w, "output_norm.weight", QT_F32, D, 0);
    add(w, "output.weight", tt, D, NV);
    snprintf(folded[nf++], 64, "output.weight");
    for (int il = 0; il < NL; il++) {
        char n[64];
#define T2(suffix, type, a, b, fold) do { snprintf(n, sizeof n, "blk.%d.%s", il, suffix); add(w, n, type, a, b); \
                                          if (fold) snprintf(folded[nf++], 64, "%s", n); } while (0)
        T2("attn_norm.weight", QT_F32, D, 0, 0);
        T2("post_attention_norm.weight", QT_F32, D, 0, 0);
        T2("ffn_gate.weight", tt, D, FF, 1);
        T2("ffn_up.weight", tt, D, FF, 1);
        T2("ffn_down.weight", tt, FF, D, 1);
        if ((il + 1) % 4 != 0) {                       /* Gated DeltaNet layer */
            T2("attn_qkv.weight", tt, D, 10240, 1);
            T2("attn_gate.weight", tt, D, 6144, 1);
            T2("ssm_alpha.weight", QT_BF16, D, 48, 0);
            T2("ssm_beta.weight", QT_BF16, D, 48, 0);
            T2("ssm_conv1d.weight", QT_F32, 4, 10240, 0);
            T2("ssm_dt.bias", QT_F32, 48, 0, 0);
            T2("ssm_a", QT_F32, 48, 0, 0);
            T2("ssm_norm.weight", QT_F32, 128, 0, 0);
            T2("ssm_out.weight", tt, 6144, D, 1);
        } else {                                      /* full attention */
            T2("attn_q.weight", tt, D, 12288, 1);
            T2("attn_k.weight", tt, D, 1024, 1);
            T2("attn_v.weight", tt, D, 1024, 1);
            T2("attn_output.weight", tt, 6144, D, 1);
            T2("attn_q_norm.weight", QT_F32, 256, 0, 0);
            T2("attn_k_norm.weight", QT_F32, 256, 0, 0);
        }
#undef T2
    }
    assert_int_equal(nf, 401);
    const char *names[401];
    uint64_t lens[401];
    for (int i = 0; i < nf; i++) { names[i] = folded[i]; lens[i] = strlen(folded[i]); }
    gguf_w_set_arr_str(w, "prism.hadamard.weight_names", names, lens, 401);
    const char *inv[1] = {"token_embd.weight"};
    const uint64_t inv_len[1] = {17};
    gguf_w_set_arr_str(w, "prism.hadamard.inverse_weight_names", inv, inv_len, 1);
    free(folded);
    /* header only; the data region becomes a sparse hole */
    assert_int_equal(gguf_w_begin(w, path, &err), TERN_OK);
    assert_int_equal(gguf_w_end_sparse(w, &err), TERN_OK);
    gguf_w_free(w);
}

static void check_27b(int tt, uint64_t want_data_bytes) {
    char path[256];
    fx_tmp_path(path, sizeof path, tt == QT_PQ2_0 ? "27b-pq2_0.gguf" : "27b-ptq1_0.gguf");
    write_27b(path, tt);
    gguf_ctx *g;
    tern_err err = {0};
    if (gguf_open(&g, path, GGUF_LOAD_MMAP, &err) != TERN_OK) { unlink(path); fail_msg("%s", err.msg); }
    gguf_budget b;
    const int rc = gguf_budget_compute(g, 0, &b, &err);
    unlink(path);                                  /* the mapping stays valid */
    assert_int_equal(rc, TERN_OK);
    /* spec section 10 */
    assert_int_equal(g->n_tensors, 851);
    assert_int_equal(b.n_params, 26895998464ull);
    assert_int_equal(b.data_bytes, want_data_bytes);
    assert_int_equal(g->size, g->data_offset + want_data_bytes);
    uint64_t tern = 0, bf16 = 0, f32 = 0;
    for (int k = 0; k < b.n_types; k++) {
        if (b.by_type[k].type == tt) tern = b.by_type[k].n_params;
        else if (b.by_type[k].type == QT_BF16) bf16 = b.by_type[k].n_params;
        else if (b.by_type[k].type == QT_F32) f32 = b.by_type[k].n_params;
    }
    assert_int_equal(tern, 26869760000ull);        /* 209,920,000 blocks of 128 */
    assert_int_equal(bf16, 23592960ull);
    assert_int_equal(f32, 2645504ull);
    /* per-token budget: embedding lookup-only (output.weight present): one row of 40 blocks */
    const uint64_t blk = tt == QT_PQ2_0 ? 34 : 28;
    assert_false(b.tied_embd);
    assert_int_equal(b.embd_row_bytes, 40 * blk);
    const uint64_t embd_bytes = (uint64_t)NV * 40 * blk;
    /* every tensor size here is a multiple of 32, so data bytes = tensor bytes (no padding) */
    assert_int_equal(b.tensor_bytes, want_data_bytes);
    assert_int_equal(b.weight_bytes, want_data_bytes - embd_bytes + 40 * blk);
    if (tt == QT_PQ2_0) assert_true(b.weight_bytes > 6.8e9 && b.weight_bytes < 6.95e9);   /* DESIGN: ~6.9 GB */
    /* layer schedule 48 GDN + 16 attention; KV 65,536 bytes per position (spec 5.6) */
    assert_int_equal(b.n_gdn_layers, 48);
    assert_int_equal(b.n_attn_layers, 16);
    assert_int_equal(b.kv_bytes_per_pos, 65536);
    /* recurrent state 2 x 48 x 48 x 128 x 128 x 4 (DESIGN: about 2 x 151 MB); conv 2 x 48 x 3 x 10240 x 4 */
    assert_int_equal(b.rstate_bytes, 301989888ull);
    assert_int_equal(b.conv_bytes, 11796480ull);
    assert_int_equal(b.total_bytes, b.weight_bytes + 65536 + 301989888ull + 11796480ull);
    /* the Hadamard metadata is readable */
    gguf_arr a;
    assert_int_equal(gguf_get_arr(g, "prism.hadamard.weight_names", true, &a, &err), TERN_OK);
    assert_int_equal(a.n, 401);
    assert_non_null(gguf_find_tensor(g, "blk.63.attn_output.weight"));
    assert_non_null(gguf_find_tensor(g, "blk.62.ssm_out.weight"));
    assert_null(gguf_find_tensor(g, "blk.63.ssm_out.weight"));
    gguf_close(g);
}

static void test_budget_27b_pq2_0(void **state) { (void)state; check_27b(QT_PQ2_0, 7195047936ull); }
static void test_budget_27b_ptq1_0(void **state) { (void)state; check_27b(QT_PTQ1_0, 5935527936ull); }

/* `tern info` itself: the figures appear in its output. */
/* Run cmd: its stdout (caller frees); the command must succeed. */
static char *run_ok(const char *cmd) {
    int st;
    char *out = ru_capture(cmd, &st);
    assert_non_null(out);
    if (st != 0) fail_msg("'%s' exited %d:\n%s", cmd, st, out);
    return out;
}

static void test_info_cli(void **state) {
    (void)state;
    char bin[4096], path[512], cmd[16384];
    ru_need_tern(bin, sizeof bin);
    fx_require(path, sizeof path, "data/stories260k/stories260K.gguf");
    snprintf(cmd, sizeof cmd, "%s info '%s' --pos 99 --bw 20", bin, path);
    char *out = run_ok(cmd);
    const char *want[] = {"architecture    llama", "48 tensors", "292,800", "1,171,200", "token_embd.weight", "[64, 512]",
                          "blk.4.ffn_down.weight", "[172, 64]", "tokens          512", "bos             1 \"<s>\"",
                          "64,000", "lookup-only", "at 20 GB/s"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i])) fail_msg("tern info output lacks \"%s\":\n%s", want[i], out);
    /* 1,040,384 weight bytes + 64,000 KV bytes per token at 20 GB/s */
    char ceil[64];
    snprintf(ceil, sizeof ceil, "%.2f tokens/s", 20e9 / (1040384.0 + 64000.0));
    if (!strstr(out, ceil)) fail_msg("tern info output lacks \"%s\"", ceil);
    free(out);

    /* a vocabulary-only file: no weights, so no per-token budget and no decode ceiling */
    char vocab[512];
    if (access(fx_path(vocab, sizeof vocab, "data/llama2-spm-vocab/ggml-vocab-llama-spm.gguf"), R_OK) == 0) {
        snprintf(cmd, sizeof cmd, "%s info '%s'", bin, vocab);
        out = run_ok(cmd);
        if (!strstr(out, "0 tensors") || !strstr(out, "per-token bytes: none (no tensors: a vocabulary-only GGUF"))
            fail_msg("tern info (vocabulary-only) lacks its 0 tensors / no budget lines:\n%s", out);
        if (strstr(out, "decode ceiling") || strstr(out, "token_embd")) fail_msg("tern info (vocabulary-only) describes weights it lacks:\n%s", out);
        free(out);
    }

    fx_tmp_path(path, sizeof path, "27b-cli.gguf");
    write_27b(path, QT_PQ2_0);
    snprintf(cmd, sizeof cmd, "%s info '%s' --no-tensors", bin, path);
    out = run_ok(cmd);
    unlink(path);
    const char *want27[] = {"851 tensors", "26,895,998,464", "7,195,047,936", "26,869,760,000", "301,989,888",
                            "block_size" "            " "1024", "weight_names" "          " "401 x string", "example bandwidth"};
    for (size_t i = 0; i < sizeof want27 / sizeof want27[0]; i++)
        if (!strstr(out, want27[i])) fail_msg("tern info (27B) output lacks \"%s\":\n%s", want27[i], out);
    free(out);
    /* the file `tern synth --arch bonsai2-27b --no-weights` writes (synth's own header, real
     * placeholder vocabulary): the same spec figures */
    fx_tmp_path(path, sizeof path, "27b-synth.gguf");
    snprintf(cmd, sizeof cmd, "%s synth --arch bonsai2-27b --no-weights -o '%s' >/dev/null 2>&1 && %s info '%s' --no-tensors --bw 30; rm -f '%s'",
             bin, path, bin, path, path);
    out = run_ok(cmd);
    const char *want_s[] = {"851 tensors", "26,895,998,464 params", "7,195,047,936 bytes", "26,869,760,000 params",
                            "23,592,960 params", "2,645,504 params", "6,857,334,096", "65,536", "301,989,888", "11,796,480",
                            "26.90 B", "architecture    qwen35"};
    for (size_t i = 0; i < sizeof want_s / sizeof want_s[0]; i++)
        if (!strstr(out, want_s[i])) fail_msg("tern info (synth 27B) output lacks \"%s\"", want_s[i]);
    /* 6,857,334,096 + 65,536 + 301,989,888 + 11,796,480 bytes per token at 30 GB/s */
    snprintf(ceil, sizeof ceil, "%.2f tokens/s at 30 GB/s", 30e9 / (6857334096.0 + 65536.0 + 301989888.0 + 11796480.0));
    if (!strstr(out, ceil)) fail_msg("tern info (synth 27B) output lacks \"%s\"", ceil);
    free(out);
    /* a string value that is not UTF-8 (general.name "llama" with its second byte 0xEB) is shown
     * with that byte as \xeb: a damaged file sends no raw byte to the terminal */
    {
        char src[512], bad[512];
        fx_require(src, sizeof src, "data/stories260k/stories260K.gguf");
        size_t n = 0;
        char *b = fx_read_file(src, &n);
        assert_non_null(b);
        char *k = memmem(b, n, "general.name", 12);
        assert_non_null(k);
        char *v = memmem(k, n - (size_t)(k - b), "llama", 5);
        assert_non_null(v);
        v[1] = (char)0xeb;
        fx_tmp_path(bad, sizeof bad, "info-bad-utf8.gguf");
        FILE *f = fopen(bad, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, n, f), n);
        fclose(f);
        free(b);
        snprintf(cmd, sizeof cmd, "%s info '%s' --no-tensors", bin, bad);
        out = run_ok(cmd);
        unlink(bad);
        if (!strstr(out, "\"l\\xebama\"") || strchr(out, (char)0xeb)) fail_msg("tern info shows the bad byte raw:\n%s", out);
        free(out);
    }
    /* errors: a missing file exits 1 with a message */
    snprintf(cmd, sizeof cmd, "%s info /nonexistent.gguf 2>&1; echo rc=$?", bin);
    out = run_ok(cmd);
    assert_non_null(strstr(out, "rc=1"));
    assert_non_null(strstr(out, "/nonexistent.gguf"));
    free(out);
}

int suite_gguf_info(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_stories260k),
        cmocka_unit_test(test_budget_hostile_header),
        cmocka_unit_test(test_budget_27b_pq2_0),
        cmocka_unit_test(test_budget_27b_ptq1_0),
        cmocka_unit_test(test_info_cli),
    };
    TEST_RUN_SUITE("gguf_info", tests);
}
