/* test_ops.c: the per-ISA tables of the forward's element-wise vector operations (src/model/ops.h).
 * Adding an ISA is a short list of steps; each missed step fails here:
 * - every table of model_ops_all has a unique name, every entry filled, and model_ops_find finds it;
 * - model_ops_active follows the kernel path (kern_force_isa): ref -> generic, avx2 and
 *   avx512vnni -> avx2, where the host runs them;
 * - every table the host can run gives the portable table's bits for SwiGLU (dense and GDN), the
 *   f16 store, the Walsh-Hadamard transform, the gated RMSNorm and one delta-rule step (inputs
 *   with NaN and subnormals included where they matter); the conv blocks give the scalar loop's. */
#include "test.h"

#include "kernels/kernels.h"
#include "model/gdn.h"
#include "model/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_tables_complete(void **state) {
    (void)state;
    int n = 0;
    for (int i = 0; model_ops_all[i]; i++, n++) {
        const model_ops *o = model_ops_all[i];
        if (!o->name || !o->attn_tile || !o->swiglu_fast || !o->f16_from_f32 ||
            !o->gdn_conv_blocks || !o->norm_gate || !o->delta_tokens || !o->delta_chunk || !o->fwht_blocks)
            fail_msg("ops table %d ('%s') has an empty entry", i, o->name ? o->name : "?");
        assert_ptr_equal(model_ops_find(o->name), o);
        for (int j = 0; j < i; j++)
            if (!strcmp(model_ops_all[j]->name, o->name)) fail_msg("ops table '%s' listed twice", o->name);
    }
    assert_true(n >= 1);
    assert_string_equal(model_ops_all[0]->name, "generic");
    assert_null(model_ops_find("no-such-isa"));
}

/* The tables the host can run, through the kernel paths that select them. */
static const char *const paths[] = {"ref", "avx2", "avx512vnni"};

static void test_active_follows_kernel_path(void **state) {
    (void)state;
    const char *before = kern_isa();
    tern_err err = {0};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        if (kern_force_isa(paths[i], &err) != TERN_OK) continue;   /* not compiled in or not runnable */
        const model_ops *want = model_ops_find(i == 0 ? "generic" : paths[i]);
        assert_non_null(want);
        assert_ptr_equal(model_ops_active(), want);
    }
    assert_int_equal(kern_force_isa(before, &err), TERN_OK);
}

static void fill(float *x, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 16.0f;
    }
}

static void test_same_bits_as_generic(void **state) {
    (void)state;
    const model_ops *g = model_ops_find("generic");
    const char *before = kern_isa();
    tern_err err = {0};
    enum { N = 1024, D = 64 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *y0 = malloc(N * sizeof *y0),
          *y1 = malloc(N * sizeof *y1);
    uint16_t *h0 = malloc(N * sizeof *h0), *h1 = malloc(N * sizeof *h1);
    float *S0 = malloc(D * D * sizeof *S0), *S1 = malloc(D * D * sizeof *S1), q[3 * D], k[3 * D], v[3 * D], o0[3 * D], o1[3 * D];
    for (size_t i = 1; i < sizeof paths / sizeof paths[0]; i++) {
        if (kern_force_isa(paths[i], &err) != TERN_OK) continue;
        const model_ops *o = model_ops_active();
        fill(a, N, 1);
        fill(b, N, 2);
        a[5] = NAN;
        a[6] = 1e-40f;                                /* subnormal */
        a[7] = -INFINITY;
        for (int n = N - 13; n <= N; n += 13) {   /* a tail of 3 after 16-lane chunks, and none */
            memset(y0, 0, N * sizeof *y0);
            memset(y1, 0, N * sizeof *y1);
            g->swiglu_fast(y0, a, b, n);
            o->swiglu_fast(y1, a, b, n);
            assert_memory_equal(y0, y1, N * sizeof *y0);
        }
        g->f16_from_f32(h0, a, N);
        o->f16_from_f32(h1, a, N);
        assert_memory_equal(h0, h1, N * sizeof *h0);
        fill(y0, N, 3);
        memcpy(y1, y0, N * sizeof *y0);
        g->fwht_blocks(y0, N, 128, NULL, NULL);
        o->fwht_blocks(y1, N, 128, NULL, NULL);
        assert_memory_equal(y0, y1, N * sizeof *y0);
        for (int d = 128; d >= 125; d -= 3) {        /* the gated RMSNorm of one head, and a tail of 5 */
            fill(y0, N, 8);
            memcpy(y1, y0, N * sizeof *y0);
            g->norm_gate(y0, y0, a + 8, b, d, 1e-6f);
            o->norm_gate(y1, y1, a + 8, b, d, 1e-6f);
            assert_memory_equal(y0, y1, N * sizeof *y0);
        }
        fill(S0, D * D, 4);
        memcpy(S1, S0, D * D * sizeof *S0);
        fill(q, 3 * D, 5);   /* three tokens in one call, inputs and outputs at a stride of D */
        fill(k, 3 * D, 6);
        fill(v, 3 * D, 7);
        const float beta[3] = {0.3f, 0.5f, 0.2f}, gam[3] = {-0.1f, -0.02f, -0.3f};
        g->delta_tokens(S0, D, 3, q, D, k, D, v, D, beta, gam, 1, o0, D, NULL);
        o->delta_tokens(S1, D, 3, q, D, k, D, v, D, beta, gam, 1, o1, D, NULL);
        assert_memory_equal(S0, S1, D * D * sizeof *S0);
        assert_memory_equal(o0, o1, sizeof o0);
    }
    assert_int_equal(kern_force_isa(before, &err), TERN_OK);
    free(a); free(b); free(y0); free(y1); free(h0); free(h1); free(S0); free(S1);
}

/* gdn_conv_blocks of every table the host runs, through 1 and 5 tokens, kernel widths 4 (the
 * shuffled transpose) and 3 (the general copy): the channels it takes (whole blocks of 8 from
 * c0) equal the scalar loop token by token (sum from 0 oldest tap first, the shift, SiLU), state
 * included; the channels past the last block are left untouched for the caller. */
static void test_conv_blocks_scalar_bits(void **state) {
    (void)state;
    const char *before = kern_isa();
    tern_err err = {0};
    enum { NCH = 43, NT = 5, C0 = 2 };
    float w[NCH * 4], st0[3 * NCH], st1[3 * NCH], x[NT * NCH], y0[NT * NCH], y1[NT * NCH];
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (kern_force_isa(paths[p], &err) != TERN_OK) continue;
        const model_ops *o = model_ops_active();
        for (int dc = 3; dc <= 4; dc++)
            for (int n = 1; n <= NT; n += NT - 1) {
                const int ns = dc - 1;
                fill(w, NCH * dc, 11);
                fill(st0, ns * NCH, 12);
                fill(x, n * NCH, 13);
                x[3] = NAN;
                memcpy(st1, st0, sizeof st0);
                for (int i = 0; i < NT * NCH; i++) y0[i] = y1[i] = -7.0f;
                const int64_t cb = o->gdn_conv_blocks(w, st1, x, y1, NCH, dc, C0, NCH, n);
                assert_int_equal(cb, C0 + (NCH - C0) / 8 * 8);
                for (int i = 0; i < n; i++)
                    for (int64_t c = C0; c < cb; c++) {
                        float sum = 0.0f;
                        for (int j = 0; j < ns; j++) sum += w[c * dc + j] * st0[j * NCH + c];
                        sum += w[c * dc + ns] * x[i * NCH + c];
                        for (int j = 0; j + 1 < ns; j++) st0[j * NCH + c] = st0[(j + 1) * NCH + c];
                        st0[(ns - 1) * NCH + c] = x[i * NCH + c];
                        y0[i * NCH + c] = gdn_silu_fast(sum);
                    }
                if (memcmp(y0, y1, sizeof y0) || memcmp(st0, st1, sizeof(float) * (size_t)(ns * NCH)))
                    fail_msg("%s: conv blocks, d_conv %d, %d tokens: not the scalar loop's bits", o->name, dc, n);
            }
    }
    assert_int_equal(kern_force_isa(before, &err), TERN_OK);
}

int suite_ops(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_complete),
        cmocka_unit_test(test_active_follows_kernel_path),
        cmocka_unit_test(test_same_bits_as_generic),
        cmocka_unit_test(test_conv_blocks_scalar_bits),
    };
    TEST_RUN_SUITE("ops", tests);
}
