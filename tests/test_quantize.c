/* test_quantize.c: `tern quantize` round trips and rules. Lossless claims are checked byte for
 * byte against files written independently by `tern synth` (whose weights are exactly ternary
 * with max|w| = d per block, so every spec encoder reproduces them): PQ2_0 -> PTQ1_0 equals the
 * synth PTQ1_0 file, -> PQ2_0 again equals the original; F32 -> PQ2_0 of ternary data equals the
 * synth PQ2_0 file. A PQ2_0 block holding code 3 is refused for PTQ1_0 with the tensor, row and
 * block named. Which tensors convert follows the rule stated in tools/quantize.c. */
#include "test_synth_util.h"

#include <math.h>
#include <sys/stat.h>

static bool files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = fx_read_file(a, &na), *y = fx_read_file(b, &nb);
    const bool eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

/* Same tensors (names, types, shapes, bytes) in the same order; metadata not compared. */
static bool tensors_equal(const char *a, const char *b) {
    gguf_ctx *x = st_open(a), *y = st_open(b);
    bool eq = x->n_tensors == y->n_tensors;
    for (uint64_t i = 0; eq && i < x->n_tensors; i++) {
        const gguf_tensor *s = &x->tensors[i], *t = &y->tensors[i];
        eq = strcmp(s->name, t->name) == 0 && s->type == t->type && memcmp(s->ne, t->ne, sizeof s->ne) == 0 &&
             s->nbytes == t->nbytes && memcmp(s->data, t->data, s->nbytes) == 0;
    }
    gguf_close(x);
    gguf_close(y);
    return eq;
}

static void test_pq2_ptq1_round_trip(void **state) {
    (void)state;
    char pq[512], ptq[512], back[512], ref[512];
    fx_tmp_path(pq, sizeof pq, "q-pq2.gguf");
    fx_tmp_path(ptq, sizeof ptq, "q-ptq1.gguf");
    fx_tmp_path(back, sizeof back, "q-back.gguf");
    fx_tmp_path(ref, sizeof ref, "q-ref.gguf");
    static const char *const archs[] = {"qwen35-tiny", "qwen3-tiny"};
    for (int a = 0; a < 2; a++) {
        ST_RUN_OK("synth --arch %s --seed 21 -o '%s'", archs[a], pq);
        ST_RUN_OK("quantize '%s' '%s' --type ptq1_0", pq, ptq);
        ST_RUN_OK("synth --arch %s --seed 21 --type ptq1_0 -o '%s'", archs[a], ref);
        assert_true(files_equal(ptq, ref));    /* transcoding == synth's own PTQ1_0 encoding */
        ST_RUN_OK("quantize '%s' '%s' --type pq2_0", ptq, back);
        assert_true(files_equal(pq, back));    /* PQ2_0 -> PTQ1_0 -> PQ2_0: byte-identical */
        /* PQ2_0 -> Q2_0 (group 64) -> PQ2_0 through f32: lossless for these blocks. Q2_0 files carry
         * no general.file_type, so the way back appends it: compare the tensors only. */
        ST_RUN_OK("quantize '%s' '%s' --type q2_0", pq, ptq);
        ST_RUN_OK("synth --arch %s --seed 21 --type q2_0 -o '%s'", archs[a], ref);
        assert_true(files_equal(ptq, ref));
        ST_RUN_OK("quantize '%s' '%s' --type pq2_0", ptq, back);
        assert_true(tensors_equal(pq, back));
    }
    unlink(pq); unlink(ptq); unlink(back); unlink(ref);
}

/* F32 -> PQ2_0 of exactly ternary data is lossless: the unrotated qwen3-tiny (qwen3 has no
 * rotation, so it is the plain F32 copy) quantises to the synth PQ2_0 file byte for byte; and a
 * rotated qwen35-tiny survives PQ2_0 -> F32 -> PQ2_0. */
static void test_f32_to_pq2_lossless(void **state) {
    (void)state;
    char f32[512], out[512], ref[512];
    fx_tmp_path(f32, sizeof f32, "q-f32.gguf");
    fx_tmp_path(out, sizeof out, "q-out.gguf");
    fx_tmp_path(ref, sizeof ref, "q-ref.gguf");
    ST_RUN_OK("synth --arch qwen3-tiny --seed 4 --unrotated-f32 -o '%s'", f32);
    ST_RUN_OK("synth --arch qwen3-tiny --seed 4 -o '%s'", ref);
    ST_RUN_OK("quantize '%s' '%s' --type pq2_0", f32, out);
    gguf_ctx *gf = st_open(f32), *go = st_open(out), *gr = st_open(ref);
    assert_int_equal(go->n_tensors, gr->n_tensors);
    for (uint64_t i = 0; i < gr->n_tensors; i++) {   /* tensor data first: the informative part */
        const gguf_tensor *a = &go->tensors[i], *b = &gr->tensors[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->type, b->type);
        assert_int_equal(a->nbytes, b->nbytes);
        assert_memory_equal(a->data, b->data, a->nbytes);
    }
    gguf_close(gf); gguf_close(go); gguf_close(gr);
    /* general.name says "unrotated-f32" in the source: everything else is the same bytes */
    ST_RUN_OK("synth --arch qwen35-tiny --seed 4 -o '%s'", ref);
    ST_RUN_OK("quantize '%s' '%s' --type f32", ref, f32);
    ST_RUN_OK("quantize '%s' '%s' --type pq2_0", f32, out);
    assert_true(files_equal(out, ref));
    unlink(f32); unlink(out); unlink(ref);
}

/* Which tensors convert, and that metadata is copied. */
static void test_rule_and_metadata(void **state) {
    (void)state;
    char in[512], out[512];
    fx_tmp_path(in, sizeof in, "q-in.gguf");
    fx_tmp_path(out, sizeof out, "q-out.gguf");
    ST_RUN_OK("synth --arch qwen35-tiny --seed 9 -o '%s'", in);
    ST_RUN_OK("quantize '%s' '%s' --type q8_0", in, out);
    gguf_ctx *gi = st_open(in), *go = st_open(out);
    assert_int_equal(gi->n_tensors, go->n_tensors);
    int n_q8 = 0;
    for (uint64_t i = 0; i < gi->n_tensors; i++) {
        const gguf_tensor *a = &gi->tensors[i], *b = &go->tensors[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->n_dims, b->n_dims);
        assert_memory_equal(a->ne, b->ne, sizeof a->ne);
        const bool projection = a->n_dims == 2 && !strstr(a->name, "ssm_conv1d") && !strstr(a->name, "ssm_alpha") &&
                                !strstr(a->name, "ssm_beta");
        if (projection) {
            assert_int_equal(b->type, QT_Q8_0);
            n_q8++;
            /* ternary t*d in Q8_0: d8 = fp16(amax/127) (normal for d >= 0.01), q = +-127 or 0, so
             * the value is off by the fp16 rounding of d8 only: relative 2^-11 (2^-10 allowed) */
            const int64_t n = a->ne[0] * a->ne[1];
            float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
            assert_int_equal(qt_dequant(a->type, a->data, x, n), TERN_OK);
            assert_int_equal(qt_dequant(b->type, b->data, y, n), TERN_OK);
            for (int64_t k = 0; k < n; k++) assert_true(fabsf(x[k] - y[k]) <= fabsf(x[k]) * 0x1.0p-10f);
            free(x);
            free(y);
        } else {
            assert_int_equal(b->type, a->type);          /* norms, 1-D, conv taps, BF16 alpha/beta: copied */
            assert_memory_equal(a->data, b->data, a->nbytes);
        }
    }
    assert_int_equal(n_q8, 8 * 3 + 6 * 3 + 2 * 4 + 2);   /* every ffn, GDN, attention projection + embd + output */
    assert_int_equal(gi->n_kv, go->n_kv);
    for (uint64_t i = 0; i < gi->n_kv; i++) {
        const gguf_kv *a = &gi->kv[i], *b = &go->kv[i];
        assert_string_equal(a->key, b->key);
        assert_int_equal(a->type, b->type);
        if (strcmp(a->key, "general.file_type") == 0) { assert_int_equal(b->v.u, 7); continue; }
        if (a->type == GGUF_T_STRING) assert_true(a->v.s.n == b->v.s.n && memcmp(a->v.s.p, b->v.s.p, a->v.s.n) == 0);
        else if (a->type == GGUF_T_ARRAY) {
            assert_int_equal(a->v.a.n, b->v.a.n);
            for (uint64_t j = 0; j < a->v.a.n; j++) {
                if (a->v.a.type == GGUF_T_STRING)
                    assert_true(a->v.a.strs[j].n == b->v.a.strs[j].n && memcmp(a->v.a.strs[j].p, b->v.a.strs[j].p, a->v.a.strs[j].n) == 0);
                else assert_true(gguf_arr_int(&a->v.a, j) == gguf_arr_int(&b->v.a, j));
            }
        } else assert_memory_equal(&a->v, &b->v, sizeof a->v.u);
    }
    gguf_close(gi);
    gguf_close(go);
    unlink(in);
    unlink(out);
}

/* A PQ2_0 block holding code 3 (+2d) has no PTQ1_0 encoding: refused, naming tensor, row, block;
 * no output file is left behind. */
static void test_code3_refused(void **state) {
    (void)state;
    char in[512], out[512], msg[2048];
    fx_tmp_path(in, sizeof in, "q-code3.gguf");
    fx_tmp_path(out, sizeof out, "q-code3-out.gguf");
    ST_RUN_OK("synth --arch qwen3-tiny --seed 2 -o '%s'", in);
    size_t len = 0;
    char *buf = fx_read_file(in, &len);
    assert_non_null(buf);
    gguf_ctx *g = NULL;
    tern_err err = {0};
    assert_int_equal(gguf_open_mem(&g, (uint8_t *)buf, len, &err), TERN_OK);
    const gguf_tensor *t = gguf_find_tensor(g, "blk.1.ffn_up.weight");
    assert_non_null(t);
    assert_int_equal(t->type, QT_PQ2_0);
    /* row 5, block 1, byte 7 of qs: weights 28..31 get codes 3, 1, 1, 1 (0x57) */
    const int64_t nb = t->ne[0] / 128;
    block_pq2_0 *b = (block_pq2_0 *)t->data + 5 * nb + 1;
    b->qs[7] = 0x57;
    assert_int_equal(qt_pq2_0_code(b, 28), 3);
    gguf_close(g);
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
    assert_int_equal(st_run(msg, sizeof msg, "quantize '%s' '%s' --type ptq1_0", in, out), 1);
    if (!strstr(msg, "blk.1.ffn_up.weight") || !strstr(msg, "row 5") || !strstr(msg, "block 1"))
        fail_msg("message does not name tensor, row and block: %s", msg);
    assert_int_equal(access(out, F_OK), -1);
    /* the other direction and other types still work: the block decodes as +2d */
    ST_RUN_OK("quantize '%s' '%s' --type f32", in, out);
    unlink(in);
    unlink(out);
}


/* The rule on a real trained model (stories260K, llama, F32, dims 64 and 172): the projections
 * whose rows fit Q8_0's block of 32 convert, ffn_down (rows of 172) keeps F32 with a note. */
static void test_rule_stories260k(void **state) {
    (void)state;
    char in[512], out[512], msg[2048];
    fx_require(in, sizeof in, "data/stories260k/stories260K.gguf");
    fx_tmp_path(out, sizeof out, "q-s260k.gguf");
    assert_int_equal(st_run(msg, sizeof msg, "quantize '%s' '%s' --type q8_0", in, out), 0);
    if (!strstr(msg, "32 of 48 tensors converted") || !strstr(msg, "5 weight matrices kept their type"))
        fail_msg("unexpected report: %s", msg);
    gguf_ctx *gi = st_open(in), *go = st_open(out);
    for (uint64_t i = 0; i < gi->n_tensors; i++) {
        const gguf_tensor *a = &gi->tensors[i], *b = &go->tensors[i];
        const bool conv = a->n_dims == 2 && a->ne[0] % 32 == 0;
        assert_int_equal(b->type, conv ? QT_Q8_0 : QT_F32);
        if (strstr(a->name, "ffn_down")) assert_int_equal(b->type, QT_F32);
    }
    gguf_close(gi);
    gguf_close(go);
    unlink(out);
}

static void test_bad_arguments(void **state) {
    (void)state;
    char msg[2048], out[512];
    fx_tmp_path(out, sizeof out, "q-bad.gguf");
    assert_int_equal(st_run(msg, sizeof msg, "quantize a.gguf"), 2);
    assert_int_equal(st_run(msg, sizeof msg, "quantize a.gguf b.gguf"), 2);
    assert_int_equal(st_run(msg, sizeof msg, "quantize a.gguf b.gguf --type q4_k"), 2);
    assert_int_equal(st_run(msg, sizeof msg, "quantize /nonexistent/in.gguf '%s' --type f32", out), 1);
    assert_non_null(strstr(msg, "/nonexistent/in.gguf"));
    assert_int_equal(access(out, F_OK), -1);
}

int suite_quantize(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pq2_ptq1_round_trip),
        cmocka_unit_test(test_f32_to_pq2_lossless),
        cmocka_unit_test(test_rule_and_metadata),
        cmocka_unit_test(test_code3_refused),
        cmocka_unit_test(test_rule_stories260k),
        cmocka_unit_test(test_bad_arguments),
    };
    TEST_RUN_SUITE("quantize", tests);
}
