/* test_gen.c: the generation loop (tern_gen_*, src/gen/gen.c) that tern run, tern chat, tern
 * bench-spec and the server's scheduler share.
 * - plain greedy tern_gen_run gives the tokens of an independent argmax + one-token-eval loop
 *   written here (stories260K, llama; qwen35-tiny, hybrid);
 * - speculative (a tern_spec) gives the same tokens and the same session position as plain;
 * - driven step by step with the caller appending the pending token (the server's way) it gives
 *   the same tokens as tern_gen_run, and tern_gen_tokens reads back what on_token saw; so does a
 *   speculative tern_gen_step loop;
 * - the stop rules: n_predict 0 and 1, a callback stop with and without eval_last (what the
 *   session then holds), a full context, and the events' counts and the final flush. */
#include "model_fx.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

#define STORIES "data/stories260k/stories260K.gguf"
#define QWEN35 "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf"
#define MAXG 64

static tern_model *load_fx(const char *rel) {
    char path[1024];
    fx_require(path, sizeof path, rel);
    return mfx_load(path, TERN_NUMERICS_FAST, 1);
}

/* The events of a reply: token ids (the end event not included), how many end events, and a
 * stop request at token stop_at (1-based; 0: never). */
typedef struct rec {
    int32_t ids[MAXG + 8];
    int n, n_end, stop_at, last_n_gen;
} rec;

static int on_token(void *user, const tern_gen_token *t) {
    rec *r = user;
    if (t->id < 0) {
        r->n_end++;
        return 0;
    }
    assert_true(r->n < MAXG + 8);
    r->ids[r->n++] = t->id;
    assert_int_equal(t->n_gen, r->n);
    r->last_n_gen = t->n_gen;
    return r->stop_at > 0 && r->n == r->stop_at;
}

static tern_sampler *greedy(tern_model *m) {
    tern_sampler_params sp;
    tern_sampler_params_default(&sp);
    sp.temp = 0;
    tern_sampler *smp = NULL;
    tern_err err = {0};
    assert_int_equal(tern_sampler_init(&smp, m, &sp, &err), TERN_OK);
    return smp;
}

static int prompt_of(tern_model *m, int32_t *ids, int cap) {
    int n = 0;
    tern_err err = {0};
    assert_int_equal(tern_tokenize(m, "Once upon a time", 16, true, false, ids, cap, &n, &err), TERN_OK);
    return n;
}

/* Greedy reply parameters: n_predict tokens, end-of-generation ignored. */
static tern_gen_params reply_params(int n_predict) {
    tern_gen_params gp;
    tern_gen_params_default(&gp);
    gp.n_predict = n_predict;
    gp.ignore_eos = true;
    return gp;
}

/* A prompt-lookup drafter for m that ignores end-of-generation; draft_max 0 keeps the default. */
static tern_spec *drafter(tern_model *m, int draft_max) {
    tern_spec_params spp;
    tern_spec_params_default(&spp);
    if (draft_max > 0) spp.draft_max = draft_max;
    spp.ignore_eos = true;
    tern_spec *spec = NULL;
    tern_err err = {0};
    assert_int_equal(tern_spec_init(&spec, m, &spp, &err), TERN_OK);
    return spec;
}

/* One reply's loop and its greedy sampler (gen_fx_free releases both). */
typedef struct gen_fx {
    tern_gen *g;
    tern_sampler *smp;
} gen_fx;

/* A reply begun on s from position 0 (s and spec, when given, reset) with a greedy sampler. */
static gen_fx gen_start(tern_model *m, tern_session *s, tern_spec *spec, const tern_gen_params *gp) {
    tern_session_reset(s);
    if (spec) tern_spec_reset(spec);
    gen_fx f = {NULL, greedy(m)};
    tern_err err = {0};
    assert_int_equal(tern_gen_init(&f.g, m, &err), TERN_OK);
    tern_gen_begin(f.g, s, f.smp, spec, gp);
    return f;
}

static void gen_fx_free(gen_fx *f) {
    tern_gen_free(f->g);
    tern_sampler_free(f->smp);
}

/* tern_gen_run from a fresh session: the recorded tokens, the stop, the session's position. */
static tern_stop run_gen(tern_model *m, tern_session *s, tern_spec *spec, const tern_gen_params *base, rec *r,
                         int *pos) {
    int32_t p[32];
    const int np = prompt_of(m, p, 32);
    tern_gen_params gp = *base;
    gp.on_token = on_token;
    gp.user = r;
    gen_fx f = gen_start(m, s, spec, &gp);
    tern_gen *g = f.g;
    tern_err err = {0};
    const float *l = tern_gen_prompt(g, p, np, &err);
    assert_non_null(l);
    const tern_stop stop = tern_gen_run(g, l, &err);
    tern_gen_stats st;
    tern_gen_get_stats(g, &st);
    assert_int_equal(st.n_prompt, np);
    assert_int_equal(st.n_gen, r->n);
    assert_int_equal(st.bad_logits_pos, -1);
    assert_int_equal(r->n_end, 1);
    *pos = tern_session_pos(s) - np;
    gen_fx_free(&f);
    return stop;
}

/* Plain greedy against an argmax loop written here, then speculative against plain. */
static void check_model(const char *rel) {
    tern_model *m = load_fx(rel);
    tern_session *s = mfx_session(m, 256, 64, false);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const tern_gen_params gp = reply_params(40);
    rec a = {0};
    int pos_a = 0;
    assert_int_equal(run_gen(m, s, NULL, &gp, &a, &pos_a), TERN_STOP_LENGTH);
    assert_int_equal(a.n, 40);
    assert_int_equal(pos_a, 39);                      /* the 40th token is not appended */

    int32_t p[32], want[MAXG];
    const int np = prompt_of(m, p, 32);
    tern_err err = {0};
    tern_session_reset(s);
    const float *l = tern_session_eval(s, p, np, &err);
    for (int i = 0; i < 40; i++) {
        assert_non_null(l);
        want[i] = mfx_argmax(l, info.n_vocab);
        if (i + 1 < 40) l = tern_session_eval(s, &want[i], 1, &err);
    }
    assert_memory_equal(a.ids, want, 40 * sizeof *want);

    tern_spec *spec = drafter(m, 6);
    rec b = {0};
    int pos_b = 0;
    assert_int_equal(run_gen(m, s, spec, &gp, &b, &pos_b), TERN_STOP_LENGTH);
    assert_int_equal(b.n, a.n);
    assert_memory_equal(b.ids, a.ids, (size_t)a.n * sizeof *a.ids);
    assert_int_equal(pos_b, pos_a);
    tern_spec_free(spec);
    tern_session_free(s);
    tern_model_free(m);
}

static void test_plain_and_spec_stories(void **state) {
    (void)state;
    check_model(STORIES);
}

static void test_plain_and_spec_qwen35(void **state) {
    (void)state;
    check_model(QWEN35);
}

/* The server's way: tern_gen_sample on logits the caller computed, appending the pending token
 * itself; the same tokens as tern_gen_run. */
static void test_stepwise_equals_run(void **state) {
    (void)state;
    tern_model *m = load_fx(STORIES);
    tern_session *s = mfx_session(m, 256, 64, false);
    tern_gen_params gp = reply_params(30);
    rec a = {0};
    int pos = 0;
    run_gen(m, s, NULL, &gp, &a, &pos);

    int32_t p[32];
    const int np = prompt_of(m, p, 32);
    rec b = {0};
    gp.on_token = on_token;
    gp.user = &b;
    gen_fx f = gen_start(m, s, NULL, &gp);
    tern_gen *g = f.g;
    tern_err err = {0};
    const float *l = tern_session_eval(s, p, np, &err);
    tern_gen_prompt_seen(g, p, np);
    tern_stop stop;
    int32_t pulled[MAXG];
    int n_pulled = 0;
    while ((stop = tern_gen_sample(g, l)) == TERN_STOP_NONE) {
        const int32_t *tk = NULL;
        assert_int_equal(tern_gen_tokens(g, &tk), 1);   /* what the callback saw, read back */
        pulled[n_pulled++] = tk[0];
        const int32_t t = tern_gen_pending(g);
        assert_true(t >= 0);
        l = tern_session_eval(s, &t, 1, &err);
        assert_non_null(l);
    }
    const int32_t *tk = NULL;
    const int n_last = tern_gen_tokens(g, &tk);
    for (int i = 0; i < n_last; i++) pulled[n_pulled++] = tk[i];
    assert_int_equal(n_pulled, a.n);
    assert_memory_equal(pulled, a.ids, (size_t)a.n * sizeof *a.ids);
    assert_int_equal(stop, TERN_STOP_LENGTH);
    assert_int_equal(tern_gen_pending(g), -1);
    assert_int_equal(tern_gen_end(g, &err), TERN_STOP_LENGTH);
    assert_int_equal(b.n, a.n);
    assert_memory_equal(b.ids, a.ids, (size_t)a.n * sizeof *a.ids);
    assert_int_equal(tern_session_pos(s) - np, pos);
    gen_fx_free(&f);
    tern_session_free(s);
    tern_model_free(m);
}

/* Speculative steps read through tern_gen_tokens (the bindings' way, no callback): the same
 * tokens as plain tern_gen_run. */
static void test_pull_spec_steps(void **state) {
    (void)state;
    tern_model *m = load_fx(STORIES);
    tern_session *s = mfx_session(m, 256, 64, false);
    const tern_gen_params gp = reply_params(40);
    rec a = {0};
    int pos = 0;
    run_gen(m, s, NULL, &gp, &a, &pos);

    tern_err err = {0};
    tern_spec *spec = drafter(m, 0);
    int32_t p[32];
    const int np = prompt_of(m, p, 32);
    gen_fx f = gen_start(m, s, spec, &gp);             /* no on_token */
    tern_gen *g = f.g;
    const float *l = tern_gen_prompt(g, p, np, &err);
    assert_non_null(l);
    int32_t got[MAXG + 16];
    int n = 0;
    for (tern_stop stop = tern_gen_sample(g, l);; stop = tern_gen_step(g, NULL, NULL, &err)) {
        assert_int_not_equal(stop, TERN_STOP_ERROR);
        const int32_t *tk = NULL;
        const int k = tern_gen_tokens(g, &tk);
        assert_true(n + k <= MAXG + 16);
        memcpy(got + n, tk, (size_t)k * sizeof *tk);
        n += k;
        if (stop != TERN_STOP_NONE) break;
    }
    tern_gen_end(g, &err);
    assert_int_equal(n, a.n);
    assert_memory_equal(got, a.ids, (size_t)a.n * sizeof *a.ids);
    gen_fx_free(&f);
    tern_spec_free(spec);
    tern_session_free(s);
    tern_model_free(m);
}

/* n_predict 0 and 1, a callback stop (with and without eval_last, plain and speculative), and a
 * full context (also where eval_last would append past it). */
static void test_stop_rules(void **state) {
    (void)state;
    tern_model *m = load_fx(STORIES);
    tern_session *s = mfx_session(m, 256, 64, false);
    tern_gen_params gp = reply_params(0);
    int pos = 0;
    rec r0 = {0};
    assert_int_equal(run_gen(m, s, NULL, &gp, &r0, &pos), TERN_STOP_LENGTH);
    assert_int_equal(r0.n, 0);
    assert_int_equal(pos, 0);
    rec r1 = {0};
    gp.n_predict = 1;
    assert_int_equal(run_gen(m, s, NULL, &gp, &r1, &pos), TERN_STOP_LENGTH);
    assert_int_equal(r1.n, 1);
    assert_int_equal(pos, 0);

    tern_spec *spec = drafter(m, 0);
    gp.n_predict = 20;
    for (int sv = 0; sv < 2; sv++)
        for (int ev = 0; ev < 2; ev++) {
            rec r = {.stop_at = 5};
            gp.eval_last = ev;
            assert_int_equal(run_gen(m, s, sv ? spec : NULL, &gp, &r, &pos), TERN_STOP_CALLER);
            assert_int_equal(r.n, 5);
            /* eval_last: the session holds every reported token; a speculative step may have
             * appended tokens after the stopping one */
            if (ev) assert_true(sv ? pos >= 5 : pos == 5);
            else if (!sv) assert_int_equal(pos, 4);
            if (sv) assert_int_equal(tern_spec_n_history(spec), tern_session_pos(s));
        }
    tern_spec_free(spec);
    gp.eval_last = false;

    /* a context of prompt + 5: the 6th token cannot be appended */
    int32_t p[32];
    const int np = prompt_of(m, p, 32);
    tern_session *sc = mfx_session(m, np + 5, 64, false);
    rec rc = {0};
    gp.n_predict = -1;
    assert_int_equal(run_gen(m, sc, NULL, &gp, &rc, &pos), TERN_STOP_CTX);
    assert_int_equal(rc.n, 6);
    assert_int_equal(pos, 5);
    /* eval_last with n_predict ending there: 5 tokens fit (the 5th is appended at the end), the
     * 6th has no room, which is a full context (not a failed append) */
    gp.eval_last = true;
    gp.n_predict = 5;
    rec r5 = {0};
    assert_int_equal(run_gen(m, sc, NULL, &gp, &r5, &pos), TERN_STOP_LENGTH);
    assert_int_equal(r5.n, 5);
    assert_int_equal(pos, 5);
    gp.n_predict = 6;
    rec r6 = {0};
    assert_int_equal(run_gen(m, sc, NULL, &gp, &r6, &pos), TERN_STOP_CTX);
    assert_int_equal(r6.n, 6);
    assert_int_equal(pos, 5);
    tern_session_free(sc);
    tern_session_free(s);
    tern_model_free(m);
}


/* A think budget (qwen3-tiny: <think> and </think> are single tokens): the prompt opens a think
 * block, the reply's first n_open tokens are forced to <think> (a tag repeated inside the block:
 * it counts toward the budget and does not restart it), and with budget 3 the reply is
 * BUDGET tokens (those <think>s, then argmax tokens), then </think> in place of the next, then
 * argmax tokens again, as an argmax loop written here computes them (the forced tokens evaluated
 * like any other); with speculation (spec given) the same tokens (drafting pauses inside the block). */
static void check_think_budget(tern_model *m, int n_open, tern_spec *spec) {
    const char *text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n";
    int32_t p[64], open_id[4], close_id[4];
    int np = 0, no = 0, nc = 0;
    tern_err err = {0};
    assert_int_equal(tern_tokenize(m, text, strlen(text), false, true, p, 64, &np, &err), TERN_OK);
    assert_int_equal(tern_tokenize(m, "<think>", 7, false, true, open_id, 4, &no, &err), TERN_OK);
    assert_int_equal(tern_tokenize(m, "</think>", 8, false, true, close_id, 4, &nc, &err), TERN_OK);
    assert_int_equal(no, 1);
    assert_int_equal(nc, 1);
    enum { N = 8, BUDGET = 3 };
    int32_t want[N], forced[N];
    tern_session *s = mfx_session(m, 256, 64, false);
    tern_model_info info;
    tern_model_get_info(m, &info);
    const float *l = tern_session_eval(s, p, np, &err);
    for (int i = 0; i < N; i++) {
        assert_non_null(l);
        want[i] = i < n_open ? open_id[0] : i == BUDGET ? close_id[0] : mfx_argmax(l, info.n_vocab);
        forced[i] = open_id[0];
        if (i + 1 < N) l = tern_session_eval(s, &want[i], 1, &err);
    }
    rec r = {0};
    tern_gen_params gp = reply_params(N);
    gp.split_think = true;
    gp.think_budget = BUDGET;
    gp.forced = n_open ? forced : NULL;
    gp.n_forced = n_open;
    gp.on_token = on_token;
    gp.user = &r;
    gen_fx f = gen_start(m, s, spec, &gp);
    const float *lg = tern_gen_prompt(f.g, p, np, &err);
    assert_non_null(lg);
    assert_int_equal(tern_gen_run(f.g, lg, &err), TERN_STOP_LENGTH);
    assert_int_equal(r.n, N);
    assert_memory_equal(r.ids, want, sizeof want);
    gen_fx_free(&f);
    tern_session_free(s);
}

static void test_think_budget(void **state) {
    (void)state;
    tern_model *m = load_fx("golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf");
    tern_spec_params spp;
    tern_spec_params_default(&spp);
    tern_spec *spec = NULL;
    tern_err err = {0};
    assert_int_equal(tern_spec_init(&spec, m, &spp, &err), TERN_OK);
    check_think_budget(m, 0, NULL);
    check_think_budget(m, 0, spec);
    check_think_budget(m, 2, NULL);   /* <think> twice inside the block, then one argmax token */
    tern_spec_free(spec);
    tern_model_free(m);
}

/* A NULL generator is refused by every tern_gen_* call (TERN_STOP_ERROR, NULL or 0, err naming
 * it) instead of being dereferenced; tern_model_split_rule takes NULL out-pointers (qwen35-tiny,
 * recurrent: the block of the chunked delta rule where one is given). */
static void test_null_generator(void **state) {
    (void)state;
    float logits[4] = {0};
    int32_t tok[2] = {1, 2};
    const int32_t *tp = tok;
    int n_tok = 7;
    tern_err err = {0};
    assert_int_equal(tern_gen_sample(NULL, logits), TERN_STOP_ERROR);
    assert_int_equal(tern_gen_step(NULL, &tp, &n_tok, &err), TERN_STOP_ERROR);
    assert_null(tp);
    assert_int_equal(n_tok, 0);
    assert_int_equal(err.code, TERN_E_ARG);
    assert_string_equal(err.msg, "tern_gen_step: the generator is NULL, expected one from tern_gen_init");
    err = (tern_err){0};
    assert_int_equal(tern_gen_end(NULL, &err), TERN_STOP_ERROR);
    assert_string_equal(err.msg, "tern_gen_end: the generator is NULL, expected one from tern_gen_init");
    err = (tern_err){0};
    assert_null(tern_gen_prompt(NULL, tok, 2, &err));
    assert_string_equal(err.msg, "tern_gen_prompt: the generator is NULL, expected one from tern_gen_init");
    err = (tern_err){0};
    assert_int_equal(tern_gen_run(NULL, logits, &err), TERN_STOP_ERROR);
    assert_int_equal(err.code, TERN_E_ARG);
    tp = tok;
    assert_int_equal(tern_gen_tokens(NULL, &tp), 0);
    assert_null(tp);
    tern_gen_prompt_seen(NULL, tok, 2);
    assert_int_equal(tern_gen_pending(NULL), -1);
    tern_model *m = load_fx(QWEN35);
    tern_model_split_rule(m, NULL, NULL);
    int block = -1;
    tern_model_split_rule(m, &block, NULL);
    assert_true(block > 0);
    tern_model_free(m);
}

/* A token's whole text reaches on_token however long its piece: the real Qwen3 vocabulary (the
 * golden qwen3-tiny) has ASCII pieces far over 100 bytes (runs of spaces and of '-'); the longest
 * is forced as a one-token reply and its event must carry exactly the bytes tern_token_piece
 * gives for it. */
typedef struct long_rec {
    char text[2048];
    int n_text, n_tok;
} long_rec;
static int on_token_text(void *user, const tern_gen_token *t) {
    long_rec *r = user;
    if (t->id >= 0) r->n_tok++;
    assert_true(r->n_text + t->n_text <= (int)sizeof r->text);
    memcpy(r->text + r->n_text, t->text, (size_t)t->n_text);
    r->n_text += t->n_text;
    return 0;
}

static void test_long_piece_text(void **state) {
    (void)state;
    tern_model *m = load_fx("golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf");
    tern_model_info info;
    tern_model_get_info(m, &info);
    int32_t best = -1;
    int best_n = 0;
    char piece[2048];
    for (int32_t id = 0; id < info.n_vocab; id++) {   /* the longest piece of printable ASCII */
        const int n = tern_token_piece(m, id, false, piece, (int)sizeof piece);
        if (n <= best_n || n > (int)sizeof piece) continue;
        bool ascii = true;
        for (int i = 0; i < n && ascii; i++) ascii = piece[i] >= 0x20 && piece[i] < 0x7f;
        if (ascii) best = id, best_n = n;
    }
    assert_true(best >= 0 && best_n > 100);
    assert_int_equal(tern_token_piece(m, best, false, piece, (int)sizeof piece), best_n);
    tern_session *s = mfx_session(m, 64, 16, false);
    tern_gen_params gp = reply_params(1);
    long_rec r = {0};
    gp.forced = &best;
    gp.n_forced = 1;
    gp.on_token = on_token_text;
    gp.user = &r;
    gen_fx f = gen_start(m, s, NULL, &gp);
    tern_err err = {0};
    int32_t p[32];
    const int np = prompt_of(m, p, 32);
    const float *l = tern_gen_prompt(f.g, p, np, &err);
    assert_non_null(l);
    assert_int_equal(tern_gen_run(f.g, l, &err), TERN_STOP_LENGTH);
    assert_int_equal(r.n_tok, 1);
    if (r.n_text != best_n || memcmp(r.text, piece, (size_t)best_n) != 0)
        fail_msg("token %d: on_token gave %d bytes of text, its piece has %d", (int)best, r.n_text, best_n);
    print_message("token %d: %d bytes of text\n", (int)best, best_n);
    gen_fx_free(&f);
    tern_session_free(s);
    tern_model_free(m);
}

int suite_gen(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_spec_stories),
        cmocka_unit_test(test_plain_and_spec_qwen35),
        cmocka_unit_test(test_stepwise_equals_run),
        cmocka_unit_test(test_pull_spec_steps),
        cmocka_unit_test(test_stop_rules),
        cmocka_unit_test(test_think_budget),
        cmocka_unit_test(test_null_generator),
        cmocka_unit_test(test_long_piece_text),
    };
    TEST_RUN_SUITE("gen", tests);
}
