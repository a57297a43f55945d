/* test_arch.c: the architecture table (src/model/arch.c) is complete. Adding an architecture is a
 * short list of steps (docs/ARCHITECTURE.md); each missed step fails a test here:
 * - every entry of the table has a name, load and forward hooks, and its recurrent
 *   state hooks are all set or all absent (a hybrid arch that forgot one would crash in a session);
 * - model_arch_names() lists exactly the table's names, in order (error messages name them);
 * - every arch in the table has a fixture below, which loads as that arch, evaluates a prompt to
 *   finite logits and generates greedily through tern_gen; a fixture for an arch missing from the
 *   table fails too. */
#include "model_fx.h"
#include "test.h"

#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* One model file per architecture (fixture-relative; the goldens hold its reference outputs). */
static const struct { const char *arch, *path; } fixtures[] = {
    {"llama", "data/stories260k/stories260K.gguf"},
    {"qwen3", "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"},
    {"qwen35", "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf"},
};
#define N_FIXTURES (int)(sizeof fixtures / sizeof fixtures[0])

static void test_table_hooks(void **state) {
    (void)state;
    const int n = model_arch_count();
    assert_true(n >= 1);
    assert_null(model_arch_at(-1));
    assert_null(model_arch_at(n));
    char names[256] = "";
    for (int i = 0; i < n; i++) {
        const model_arch *a = model_arch_at(i);
        assert_non_null(a);
        if (!a->name || !*a->name) fail_msg("arch %d has no name", i);
        if (!a->load || !a->forward) fail_msg("arch '%s': load or forward hook missing", a->name);
        const bool st[7] = {a->state_init != NULL,       a->state_bytes != NULL,    a->state_free != NULL,
                            a->state_reset != NULL,      a->state_checkpoint != NULL, a->state_truncate != NULL,
                            a->state_restorable != NULL};
        for (int k = 1; k < 7; k++)
            if (st[k] != st[0]) fail_msg("arch '%s': recurrent state hooks partly set (hook %d)", a->name, k);
        assert_ptr_equal(model_arch_find(a->name), a);
        for (int j = 0; j < i; j++)
            if (!strcmp(model_arch_at(j)->name, a->name)) fail_msg("arch '%s' listed twice", a->name);
        if (i) strcat(names, ", ");
        strcat(names, a->name);
    }
    assert_string_equal(model_arch_names(), names);
    assert_null(model_arch_find("no-such-arch"));
}

static void test_every_arch_has_a_fixture(void **state) {
    (void)state;
    for (int i = 0; i < model_arch_count(); i++) {
        bool found = false;
        for (int f = 0; f < N_FIXTURES; f++) found |= !strcmp(fixtures[f].arch, model_arch_at(i)->name);
        if (!found) fail_msg("arch '%s' has no fixture in tests/test_arch.c (and no golden test)", model_arch_at(i)->name);
    }
    for (int f = 0; f < N_FIXTURES; f++)
        if (!model_arch_find(fixtures[f].arch)) fail_msg("fixture for '%s', which the arch table lacks", fixtures[f].arch);
}

static int count_token(void *user, const tern_gen_token *t) {
    if (t->id >= 0) ++*(int *)user;
    return 0;
}

static void test_every_arch_runs(void **state) {
    (void)state;
    for (int f = 0; f < N_FIXTURES; f++) {
        char path[1024];
        fx_require(path, sizeof path, fixtures[f].path);
        tern_model *m = mfx_load(path, TERN_NUMERICS_FAST, 1);
        tern_model_info info;
        tern_model_get_info(m, &info);
        assert_string_equal(info.arch, fixtures[f].arch);
        tern_session *s = mfx_session(m, 128, 32, false);
        int32_t p[32];
        int np = 0;
        tern_err err = {0};
        assert_int_equal(tern_tokenize(m, "Hello world", 11, true, false, p, 32, &np, &err), TERN_OK);
        tern_sampler_params sp;
        tern_sampler_params_default(&sp);
        sp.temp = 0;
        tern_sampler *smp = NULL;
        tern_gen *g = NULL;
        assert_int_equal(tern_sampler_init(&smp, m, &sp, &err), TERN_OK);
        assert_int_equal(tern_gen_init(&g, m, &err), TERN_OK);
        int n_tok = 0;
        tern_gen_params gp;
        tern_gen_params_default(&gp);
        gp.n_predict = 8;
        gp.ignore_eos = true;
        gp.on_token = count_token;
        gp.user = &n_tok;
        tern_gen_begin(g, s, smp, NULL, &gp);
        const float *l = tern_gen_prompt(g, p, np, &err);
        if (!l) fail_msg("%s: %s", fixtures[f].arch, err.msg);
        for (int i = 0; i < info.n_vocab; i++)
            if (!isfinite(l[i])) fail_msg("%s: logit %d is not finite", fixtures[f].arch, i);
        assert_int_equal(tern_gen_run(g, l, &err), TERN_STOP_LENGTH);
        assert_int_equal(n_tok, 8);
        tern_gen_free(g);
        tern_sampler_free(smp);
        tern_session_free(s);
        tern_model_free(m);
    }
}

int suite_arch(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_hooks),
        cmocka_unit_test(test_every_arch_has_a_fixture),
        cmocka_unit_test(test_every_arch_runs),
    };
    TEST_RUN_SUITE("arch", tests);
}
