/* test_model_yarn.c: YaRN RoPE scaling for qwen3 when the GGUF keys say so (spec section 6;
 * YaRN paper, Peng et al. 2023, as llama.cpp applies it: ext_factor 1, beta_fast 32, beta_slow 1).
 *  - correction dims from the keys: the spec's worked values [20, 37] (8B: original context 16384)
 *    and [17, 34] (4B: 8192) for d = 128, base 1e6, and the closed formula in double for others;
 *  - the RoPE cache (cos, sin per pair) of blk_rope_cache against the formula evaluated here in
 *    double: theta_extrap = p base^(-2i/d), theta_interp = theta_extrap / factor,
 *    ramp = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1), theta = interp (1 - ramp) +
 *    extrap ramp, cos/sin times 1 + 0.1 ln(factor);
 *  - without the keys: no scaling (plain theta, magnitude 1);
 *  - a hyperparameter out of its range is refused naming its key, its value and the range. */
#include "test.h"

#include "format/gguf.h"
#include "model/blocks.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A qwen3 header (one head of 128, one layer) with optional YaRN keys; hparams loaded from it. */
static void load_hp(const char *scaling, float factor, int n_ctx_orig, model_hparams *hp) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/tern-test-yarn-%ld.gguf", (long)getpid());
    gguf_writer *w = NULL;
    tern_err err = {0};
    assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
    gguf_w_set_str(w, "general.architecture", "qwen3");
    gguf_w_set_u32(w, "qwen3.embedding_length", 128);
    gguf_w_set_u32(w, "qwen3.block_count", 1);
    gguf_w_set_u32(w, "qwen3.feed_forward_length", 256);
    gguf_w_set_u32(w, "qwen3.attention.head_count", 1);
    gguf_w_set_u32(w, "qwen3.attention.head_count_kv", 1);
    gguf_w_set_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_w_set_f32(w, "qwen3.rope.freq_base", 1e6f);
    if (scaling) {
        gguf_w_set_str(w, "qwen3.rope.scaling.type", scaling);
        gguf_w_set_f32(w, "qwen3.rope.scaling.factor", factor);
        gguf_w_set_u32(w, "qwen3.rope.scaling.original_context_length", (uint32_t)n_ctx_orig);
    }
    static float embd[128 * 4];
    const int64_t ne[2] = {128, 4};
    assert_true(gguf_w_add_tensor(w, "token_embd.weight", 0 /* F32 */, 2, ne, embd) >= 0);
    assert_int_equal(gguf_w_write_file(w, path, &err), TERN_OK);
    gguf_w_free(w);
    model_t m;
    memset(&m, 0, sizeof m);
    assert_int_equal(gguf_open(&m.g, path, GGUF_LOAD_READ, &err), TERN_OK);
    m.arch = model_arch_find("qwen3");
    assert_non_null(m.arch);
    if (model_load_hparams_common(&m, &err) != TERN_OK) fail_msg("%s", err.msg);
    *hp = m.hp;
    gguf_close(m.g);
    unlink(path);
}

static void check_cache(const model_hparams *hp, double factor, double lo, double hi) {
    float cs[128];
    const int d = hp->n_rot;
    const double mscale = factor > 1 ? 1.0 + 0.1 * log(factor) : 1.0;
    static const int poss[] = {0, 1, 7, 33, 64};
    double worst = 0;
    for (size_t k = 0; k < sizeof poss / sizeof poss[0]; k++) {
        const int p = poss[k];
        blk_rope_cache(cs, p, hp);
        for (int i = 0; i < d / 2; i++) {
            const double extrap = p * pow(1e6, -2.0 * i / d), interp = extrap / factor;
            double ramp = 1.0;
            if (factor > 1) ramp = 1.0 - fmin(1.0, fmax(0.0, (i - lo) / fmax(0.001, hi - lo)));
            const double th = interp * (1 - ramp) + extrap * ramp;
            const double ec = cos(th) * mscale, es = sin(th) * mscale;
            /* float angles by repeated multiplication (as ggml): ~1e-5 relative at p = 64 */
            const double e = fmax(fabs(cs[2 * i] - ec), fabs(cs[2 * i + 1] - es));
            if (e > 5e-5) fail_msg("pos %d pair %d: cos/sin %g %g, expected %g %g", p, i, cs[2 * i], cs[2 * i + 1], ec, es);
            worst = fmax(worst, e);
        }
    }
    print_message("rope cache factor %g: max error %.3g\n", factor, worst);
}

static void test_yarn(void **st) {
    (void)st;
    model_hparams hp;
    /* the spec's worked correction ranges */
    load_hp("yarn", 4.0f, 16384, &hp);
    assert_true(hp.yarn);
    assert_true(hp.rope_freq_scale == 0.25f);
    assert_true(hp.yarn_corr_lo == 20.0f && hp.yarn_corr_hi == 37.0f);
    check_cache(&hp, 4.0, 20, 37);
    load_hp("yarn", 4.0f, 8192, &hp);
    assert_true(hp.yarn_corr_lo == 17.0f && hp.yarn_corr_hi == 34.0f);
    check_cache(&hp, 4.0, 17, 34);
    /* the closed formula for another context and factor */
    load_hp("yarn", 2.0f, 4096, &hp);
    const double lo = fmax(0.0, floor(128 * log(4096 / (32 * 2 * M_PI)) / (2 * log(1e6))));
    const double hi = fmin(127.0, ceil(128 * log(4096 / (2 * M_PI)) / (2 * log(1e6))));
    assert_true(hp.yarn_corr_lo == (float)lo && hp.yarn_corr_hi == (float)hi);
    check_cache(&hp, 2.0, lo, hi);
    /* no keys: plain RoPE */
    load_hp(NULL, 1.0f, 0, &hp);
    assert_false(hp.yarn);
    check_cache(&hp, 1.0, 0, 0);
}

/* The qwen3 header of load_hp with one key set to v: model_load_hparams_common's error. */
static int load_bad(const char *key, uint32_t v, tern_err *err) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/tern-test-hp-%ld.gguf", (long)getpid());
    gguf_writer *w = NULL;
    assert_int_equal(gguf_w_init(&w, err), TERN_OK);
    gguf_w_set_str(w, "general.architecture", "qwen3");
    static const char *keys[] = {"qwen3.embedding_length", "qwen3.block_count", "qwen3.feed_forward_length",
                                 "qwen3.attention.head_count"};
    static const uint32_t vals[] = {128, 1, 256, 1};
    bool listed = false;
    for (int i = 0; i < 4; i++) {
        gguf_w_set_u32(w, keys[i], strcmp(keys[i], key) ? vals[i] : v);
        listed |= strcmp(keys[i], key) == 0;
    }
    if (!listed) gguf_w_set_i32(w, key, (int32_t)v);   /* an optional key, stored as i32 (v may be negative) */
    gguf_w_set_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    static float embd[128 * 4];
    const int64_t ne[2] = {128, 4};
    assert_true(gguf_w_add_tensor(w, "token_embd.weight", 0 /* F32 */, 2, ne, embd) >= 0);
    assert_int_equal(gguf_w_write_file(w, path, err), TERN_OK);
    gguf_w_free(w);
    model_t m;
    memset(&m, 0, sizeof m);
    assert_int_equal(gguf_open(&m.g, path, GGUF_LOAD_READ, err), TERN_OK);
    m.arch = model_arch_find("qwen3");
    assert_non_null(m.arch);
    const int rc = model_load_hparams_common(&m, err);
    gguf_close(m.g);
    unlink(path);
    return rc;
}

static void test_hparams_range(void **state) {
    (void)state;
    static const struct { const char *key; uint32_t v; const char *want; } c[] = {
        {"qwen3.block_count", 100000, "key 'qwen3.block_count' is 100000, expected 1..4096"},
        {"qwen3.block_count", 0, "key 'qwen3.block_count' is 0, expected 1..4096"},
        {"qwen3.embedding_length", 0, "key 'qwen3.embedding_length' is 0, expected a positive integer"},
        {"qwen3.feed_forward_length", 0, "key 'qwen3.feed_forward_length' is 0, expected a positive integer"},
        {"qwen3.attention.head_count", 0, "key 'qwen3.attention.head_count' is 0, expected a positive integer"},
        {"qwen3.context_length", (uint32_t)-5, "key 'qwen3.context_length' is -5, expected a positive integer"},
        {"qwen3.context_length", 0, "key 'qwen3.context_length' is 0, expected a positive integer"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        tern_err err = {0};
        assert_int_equal(load_bad(c[i].key, c[i].v, &err), TERN_E_FORMAT);
        if (!strstr(err.msg, c[i].want)) fail_msg("%s = %u: '%s', expected '%s'", c[i].key, c[i].v, err.msg, c[i].want);
    }
    tern_err err = {0};
    if (load_bad("qwen3.block_count", 4096, &err) != TERN_OK) fail_msg("block_count 4096: %s", err.msg);   /* the bound itself loads */
    if (load_bad("qwen3.context_length", 1, &err) != TERN_OK) fail_msg("context_length 1: %s", err.msg);
}

int suite_model_yarn(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yarn),
        cmocka_unit_test(test_hparams_range),
    };
    TEST_RUN_SUITE("model_yarn", tests);
}
