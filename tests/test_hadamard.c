/* test_hadamard.c: the vector FWHT and the fused RMSNorm + rotation give the same bits as the
 * scalar reference (had_fwht / had_rot after a plain RMSNorm written here from spec 5.3), the
 * V-head permutation of spec 5.5 (its worked example), and every refusal of the prism.hadamard.*
 * validation (spec 4.1) on files built with the GGUF writer. */
#include "test.h"

#include "core/core.h"
#include "model/hadamard.h"
#include "model/ops.h"
#include "format/gguf.h"
#include "format/qtypes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t hrng = 12345;
static float hrand(void) {
    hrng = hrng * 1664525u + 1013904223u;
    return (float)((int32_t)(hrng >> 8) - (1 << 23)) / (float)(1 << 23) * 3.0f;
}

/* RMSNorm as spec 5.3 with the reference runtime's rounding points: squares summed in double,
 * mean rounded to float, r = 1/sqrtf(mean + eps), y = (x r) w. */
static void rmsnorm_ref(float *y, const float *x, const float *w, int64_t K, float eps) {
    double sum = 0;
    for (int64_t i = 0; i < K; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)K);
    const float r = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < K; i++) y[i] = (x[i] * r) * w[i];
}

static void test_fwht_blocks_bits(void **state) {
    (void)state;
    const int64_t ns[] = {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        const int64_t n = ns[t], K = 3 * n;
        float *a = malloc(sizeof(float) * K), *b = malloc(sizeof(float) * K);
        for (int64_t i = 0; i < K; i++) a[i] = b[i] = hrand();
        for (int64_t o = 0; o < K; o += n) had_fwht(a + o, n);
        had_fwht_blocks(b, K, n);
        assert_memory_equal(a, b, sizeof(float) * K);
        /* each ISA build of the vector code, against the scalar transform */
        const char *isas[2] = {"generic", "avx2"};
        for (int ii = 0; ii < 2; ii++) {
#if defined(__x86_64__) || defined(__i386__)
            if (ii == 1 && !__builtin_cpu_supports("avx2")) continue;
#else
            if (ii == 1) continue;
#endif
            hrng = 777u + (uint32_t)t;
            for (int64_t i = 0; i < K; i++) a[i] = b[i] = hrand();
            for (int64_t o = 0; o < K; o += n) had_fwht(a + o, n);
            had_fwht_blocks_isa(isas[ii], b, K, n);
            assert_memory_equal(a, b, sizeof(float) * K);
        }
        free(a); free(b);
    }
}

/* had_rot (the sign and scale step fused into the blocked FWHT's first pass) against its
 * definition computed here: x[k] = (s[k] x[k]) * (1 / sqrt(n)) in float, then had_fwht per block;
 * on each ISA build of the vector code, with signs and without. */
static void test_rot_fused_bits(void **state) {
    (void)state;
    const int64_t ns[] = {4, 8, 16, 32, 64, 128, 512, 1024, 4096};
    const char *isas[2] = {"generic", "avx2"};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        const int64_t n = ns[t], K = 3 * n;
        const float scale = (float)(1.0 / sqrt((double)n));
        float *a = malloc(sizeof(float) * K), *b = malloc(sizeof(float) * K);
        int8_t *sg = malloc((size_t)K);
        for (int with_s = 0; with_s < 2; with_s++)
            for (int ii = 0; ii < (n >= 8 ? 2 : 1); ii++) {
#if defined(__x86_64__) || defined(__i386__)
                if (ii == 1 && !__builtin_cpu_supports("avx2")) continue;
#else
                if (ii == 1) continue;
#endif
                hrng = 999u + (uint32_t)t;
                for (int64_t i = 0; i < K; i++) {
                    a[i] = b[i] = hrand();
                    sg[i] = (hrng >> 20) & 1 ? 1 : -1;
                }
                const int8_t *s = with_s ? sg : NULL;
                for (int64_t i = 0; i < K; i++) a[i] = (s ? (float)s[i] * a[i] : a[i]) * scale;
                for (int64_t o = 0; o < K; o += n) had_fwht(a + o, n);
                if (n >= 8) model_ops_find(isas[ii])->fwht_blocks(b, K, n, s, &scale);
                else had_rot(b, K, n, s);
                assert_memory_equal(a, b, sizeof(float) * K);
                if (ii == 0) {   /* and had_rot itself, on the active path */
                    hrng = 999u + (uint32_t)t;
                    for (int64_t i = 0; i < K; i++) b[i] = hrand();
                    had_rot(b, K, n, s);
                    assert_memory_equal(a, b, sizeof(float) * K);
                }
            }
        free(a); free(b); free(sg);
    }
}

static void test_rmsnorm_rot_fused_bits(void **state) {
    (void)state;
    const int64_t cases[][2] = {{5 * 1024, 1024}, {6 * 512, 512}, {4096, 4096}, {256, 64}, {256, 0}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int64_t K = cases[t][0], n = cases[t][1];
        float *x = malloc(sizeof(float) * K), *w = malloc(sizeof(float) * K);
        float *ref = malloc(sizeof(float) * K), *got = malloc(sizeof(float) * K);
        int8_t *s = malloc((size_t)K);
        for (int64_t i = 0; i < K; i++) {
            x[i] = hrand(); w[i] = 1.0f + 0.1f * hrand(); s[i] = (hrng >> 3) & 1 ? 1 : -1;
        }
        rmsnorm_ref(ref, x, w, K, 1e-6f);
        if (n) had_rot(ref, K, n, s);
        had_rmsnorm_rot(got, x, w, K, 1e-6f, n, n ? s : NULL);
        assert_memory_equal(ref, got, sizeof(float) * K);
        free(x); free(w); free(ref); free(got); free(s);
    }
}

/* RMSNorm + rotation + int8 quantisation in one pass (had_rmsnorm_rot_quant) against the unfused
 * steps (rmsnorm_ref, had_rot, kern_quantize of the whole column) in each numerics mode: the
 * same float column, the same quantised bytes, and the unrotated normed copy; block sizes below,
 * at and above the 128-value chunk, a partial last quantisation block (K = 96, 200), no weight,
 * identity signs, no rotation. */
static void test_rmsnorm_rot_quant_fused_bits(void **state) {
    (void)state;
    const int64_t cases[][2] = {{5120, 128}, {17408, 512}, {6 * 1024, 1024}, {256, 64}, {96, 32}, {136, 4},
                                {200, 0}, {5120, 0}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++)
        for (int mode = KQ_FAST; mode <= KQ_F32; mode++)
            for (int variant = 0; variant < 2; variant++) {   /* 1: no weight, identity signs */
                const int64_t K = cases[t][0], n = cases[t][1];
                float *x = malloc(sizeof(float) * K), *w = malloc(sizeof(float) * K);
                float *ref = malloc(sizeof(float) * K), *refn = malloc(sizeof(float) * K);
                float *got = malloc(sizeof(float) * K), *gotn = malloc(sizeof(float) * K);
                int8_t *s = malloc((size_t)K);
                for (int64_t i = 0; i < K; i++) {
                    x[i] = hrand(); w[i] = variant ? 1.0f : 1.0f + 0.1f * hrand(); s[i] = (hrng >> 3) & 1 ? 1 : -1;
                }
                const int8_t *sg = variant ? NULL : s;
                const size_t qb = kern_act_bytes((kern_numerics)mode, K, 1) + 1;
                uint8_t *qr = calloc(1, qb), *qg = calloc(1, qb);
                rmsnorm_ref(refn, x, w, K, 1e-6f);
                memcpy(ref, refn, sizeof(float) * K);
                if (n) had_rot(ref, K, n, sg);
                kern_act a = {.x = ref, .q = qr, .K = K, .ncols = 1, .mode = (kern_numerics)mode};
                kern_quantize(&a);
                had_rmsnorm_rot_quant(got, qg, (kern_numerics)mode, gotn, x, variant ? NULL : w, K, 1e-6f, n, sg);
                assert_memory_equal(ref, got, sizeof(float) * K);
                assert_memory_equal(refn, gotn, sizeof(float) * K);
                assert_memory_equal(qr, qg, qb);
                free(x); free(w); free(ref); free(refn); free(got); free(gotn); free(s); free(qr); free(qg);
            }
}

static void test_gdn_v_grouped_permutation(void **state) {
    (void)state;
    enum { HK = 16, HV = 48, D = 4 };
    float src[HV * D], dst[HV * D];
    for (int i = 0; i < HV * D; i++) src[i] = (float)i;
    had_gdn_v_grouped(dst, src, HK, HV, D);
    /* spec 5.5 example: tiled head 17 (k = 1, r = 1) moves to grouped head 4 */
    for (int e = 0; e < D; e++) assert_true(dst[4 * D + e] == src[17 * D + e]);
    /* in general grouped head 3k + r <- tiled head k + 16 r; it is a permutation */
    for (int k = 0; k < HK; k++)
        for (int r = 0; r < 3; r++)
            for (int e = 0; e < D; e++) assert_true(dst[(3 * k + r) * D + e] == src[(k + HK * r) * D + e]);
}


/* ---- prism.hadamard.* validation: one bad file per refusal ----------------------------------
 * A small valid file (block 8, sign widths 16 and 32, tensors a [16,4], b [32,4], token_embd
 * [16,8], all F32) and one mutation per case, written with the GGUF writer. */
typedef struct {
    int version;                 /* 0: key absent */
    int block;
    const char *transform, *axis, *mode;
    int widths[3], n_widths;
    int n_values_delta;          /* added to / removed from the sign value count */
    int bad_value_at;            /* -1 none; else that value is 0 */
    gguf_vtype values_type;
    const char *names[4]; int n_names;   /* n_names -1: key absent */
    const char *inv[2]; int n_inv;
    int tied;                    /* -1 absent, 0/1 */
    bool with_output, with_c24, extra_key;
} had_case;

static had_case had_ok(void) {
    had_case c = {.version = 1, .block = 8, .transform = "normalized-sylvester-walsh-hadamard",
                  .axis = "input-last-dimension", .mode = "explicit", .widths = {16, 32}, .n_widths = 2,
                  .bad_value_at = -1, .values_type = GGUF_T_I32, .names = {"a.weight", "b.weight"}, .n_names = 2,
                  .inv = {"token_embd.weight"}, .n_inv = 1, .tied = -1};
    return c;
}

/* Write the case, open it, run had_load; returns its code (err filled), h freed. */
static int had_try(const had_case *c, had_cfg *keep, tern_err *err) {
    gguf_writer *w = NULL;
    tern_err werr = {0};
    assert_int_equal(gguf_w_init(&w, &werr), TERN_OK);
    gguf_w_set_str(w, "general.architecture", "qwen35");
    if (c->version) gguf_w_set_u32(w, "prism.hadamard.version", (uint32_t)c->version);
    gguf_w_set_u32(w, "prism.hadamard.block_size", (uint32_t)c->block);
    gguf_w_set_str(w, "prism.hadamard.transform", c->transform);
    gguf_w_set_str(w, "prism.hadamard.axis", c->axis);
    gguf_w_set_str(w, "prism.hadamard.sign_mode", c->mode);
    int32_t widths[3];
    int total = 0;
    for (int i = 0; i < c->n_widths; i++) { widths[i] = c->widths[i]; total += c->widths[i]; }
    gguf_w_set_arr(w, "prism.hadamard.sign_widths", GGUF_T_I32, widths, (uint64_t)c->n_widths);
    const int nv = total + c->n_values_delta;
    int32_t v32[128];
    int8_t v8[128];
    for (int i = 0; i < nv; i++) {
        v32[i] = (i * 7 % 3) ? 1 : -1;
        if (i == c->bad_value_at) v32[i] = 0;
        v8[i] = (int8_t)v32[i];
    }
    if (c->values_type == GGUF_T_I8) gguf_w_set_arr(w, "prism.hadamard.sign_values", GGUF_T_I8, v8, (uint64_t)nv);
    else gguf_w_set_arr(w, "prism.hadamard.sign_values", GGUF_T_I32, v32, (uint64_t)nv);
    if (c->n_names >= 0) {
        uint64_t lens[4];
        for (int i = 0; i < c->n_names; i++) lens[i] = strlen(c->names[i]);
        gguf_w_set_arr_str(w, "prism.hadamard.weight_names", c->names, lens, (uint64_t)c->n_names);
    }
    if (c->n_inv > 0) {
        uint64_t lens[2];
        for (int i = 0; i < c->n_inv; i++) lens[i] = strlen(c->inv[i]);
        gguf_w_set_arr_str(w, "prism.hadamard.inverse_weight_names", c->inv, lens, (uint64_t)c->n_inv);
    }
    gguf_w_set_bool(w, "prism.hadamard.gdn_v_grouped", true);
    if (c->tied >= 0) gguf_w_set_bool(w, "prism.hadamard.tied_output", c->tied != 0);
    if (c->extra_key) gguf_w_set_u32(w, "prism.hadamard.seed", 7);
    static float zeros[32 * 8];
    const int64_t ne_a[2] = {16, 4}, ne_b[2] = {32, 4}, ne_e[2] = {16, 8}, ne_c[2] = {24, 4};
    gguf_w_add_tensor(w, "a.weight", QT_F32, 2, ne_a, zeros);
    gguf_w_add_tensor(w, "b.weight", QT_F32, 2, ne_b, zeros);
    gguf_w_add_tensor(w, "token_embd.weight", QT_F32, 2, ne_e, zeros);
    if (c->with_output) gguf_w_add_tensor(w, "output.weight", QT_F32, 2, ne_e, zeros);
    if (c->with_c24) gguf_w_add_tensor(w, "c.weight", QT_F32, 2, ne_c, zeros);
    char path[512];
    fx_tmp_path(path, sizeof path, "had-meta.gguf");
    assert_int_equal(gguf_w_write_file(w, path, &werr), TERN_OK);
    gguf_w_free(w);
    gguf_ctx *g = NULL;
    assert_int_equal(gguf_open(&g, path, GGUF_LOAD_READ, &werr), TERN_OK);
    unlink(path);
    had_cfg h;
    memset(err, 0, sizeof *err);
    const int rc = had_load(&h, g, err);
    if (keep && rc == TERN_OK) {
        /* check while g is open (names point into it) */
        assert_true(h.active);
        assert_int_equal(h.version, c->version);
        assert_int_equal(h.block, 8);
        assert_true(h.gdn_v_grouped);
        assert_true(had_is_folded(&h, "a.weight") && had_is_folded(&h, "b.weight"));
        assert_false(had_is_folded(&h, "token_embd.weight"));
        assert_true(had_is_inverse(&h, "token_embd.weight"));
        const int8_t *s16 = had_signs(&h, 16), *s32 = had_signs(&h, 32);
        assert_non_null(s16); assert_non_null(s32);
        assert_null(had_signs(&h, 24));
        for (int i = 0; i < 16; i++) assert_int_equal(s16[i], (i * 7 % 3) ? 1 : -1);
        for (int i = 0; i < 32; i++) assert_int_equal(s32[i], ((16 + i) * 7 % 3) ? 1 : -1);
        *keep = h;
        keep->folded = keep->inverse = NULL;   /* owned arrays freed below with h */
    }
    had_free(&h);
    gguf_close(g);
    return rc;
}

static void expect_refusal(const had_case *c, int code, const char *needle) {
    tern_err err;
    const int rc = had_try(c, NULL, &err);
    if (rc != code || !strstr(err.msg, needle))
        fail_msg("expected %d mentioning '%s', got %d: %s", code, needle, rc, err.msg);
}

static void test_had_meta_valid(void **state) {
    (void)state;
    tern_err err;
    had_cfg h;
    had_case c = had_ok();
    assert_int_equal(had_try(&c, &h, &err), TERN_OK);
    c.values_type = GGUF_T_I8;                       /* any integer type for sign_values */
    assert_int_equal(had_try(&c, &h, &err), TERN_OK);
    c = had_ok();
    c.version = 2; c.tied = 1;                       /* v2 tied head: embd inverse, no output */
    assert_int_equal(had_try(&c, &h, &err), TERN_OK);
    c = had_ok();
    c.mode = "identity";
    assert_int_equal(had_try(&c, NULL, &err), TERN_OK);
}

static void test_had_meta_refusals(void **state) {
    (void)state;
    had_case c;
    c = had_ok(); c.extra_key = true;            expect_refusal(&c, TERN_E_UNSUPPORTED, "prism.hadamard.seed");
    c = had_ok(); c.version = 3;                 expect_refusal(&c, TERN_E_UNSUPPORTED, "version");
    c = had_ok(); c.version = 0;                 expect_refusal(&c, TERN_E_FORMAT, "version missing");
    c = had_ok(); c.block = 12;                  expect_refusal(&c, TERN_E_FORMAT, "block_size");
    c = had_ok(); c.transform = "dct-ii";        expect_refusal(&c, TERN_E_UNSUPPORTED, "dct-ii");
    c = had_ok(); c.axis = "output-first-dimension"; expect_refusal(&c, TERN_E_UNSUPPORTED, "axis");
    c = had_ok(); c.mode = "random";             expect_refusal(&c, TERN_E_UNSUPPORTED, "sign_mode");
    c = had_ok(); c.widths[1] = 28;              expect_refusal(&c, TERN_E_FORMAT, "sign_widths");
    c = had_ok(); c.widths[1] = 16;              expect_refusal(&c, TERN_E_FORMAT, "listed twice");
    c = had_ok(); c.n_values_delta = -1;         expect_refusal(&c, TERN_E_FORMAT, "sum of sign_widths");
    c = had_ok(); c.n_values_delta = 1;          expect_refusal(&c, TERN_E_FORMAT, "sum of sign_widths");
    c = had_ok(); c.bad_value_at = 20;           expect_refusal(&c, TERN_E_FORMAT, "sign_values'[20]");
    c = had_ok(); c.names[2] = "z.weight"; c.n_names = 3; expect_refusal(&c, TERN_E_FORMAT, "z.weight");
    c = had_ok(); c.n_names = -1;                expect_refusal(&c, TERN_E_FORMAT, "weight_names");
    c = had_ok(); c.with_c24 = true; c.names[2] = "c.weight"; c.n_names = 3;
    expect_refusal(&c, TERN_E_FORMAT, "no sign vector");
    c = had_ok(); c.inv[0] = "nope.weight";      expect_refusal(&c, TERN_E_FORMAT, "nope.weight");
    c = had_ok(); c.tied = 1;                    expect_refusal(&c, TERN_E_FORMAT, "version 2");
    c = had_ok(); c.version = 2; c.tied = 1; c.n_inv = 0; expect_refusal(&c, TERN_E_FORMAT, "inverse_weight_names");
    c = had_ok(); c.version = 2; c.tied = 1; c.with_output = true; expect_refusal(&c, TERN_E_FORMAT, "output.weight");
}

int suite_hadamard(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fwht_blocks_bits),
        cmocka_unit_test(test_rot_fused_bits),
        cmocka_unit_test(test_rmsnorm_rot_fused_bits),
        cmocka_unit_test(test_rmsnorm_rot_quant_fused_bits),
        cmocka_unit_test(test_gdn_v_grouped_permutation),
        cmocka_unit_test(test_had_meta_valid),
        cmocka_unit_test(test_had_meta_refusals),
    };
    TEST_RUN_SUITE("hadamard", tests);
}
