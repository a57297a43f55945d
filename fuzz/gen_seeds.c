/* gen_seeds.c: writes the fuzzer's seed corpus with our writer (so no binary seeds are committed):
 * small valid files covering every value type, arrays, tokenizer keys, every block type and an
 * id-42 tensor, plus the stories260K metadata with tiny tensors when ../shared is present.
 * usage: gen_seeds OUTDIR [stories260K.gguf] */
#include "format/gguf.h"
#include "format/qtypes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const tern_err *e) {
    fprintf(stderr, "gen_seeds: %s: %s\n", what, e->msg);
    return 1;
}

static void add_meta(gguf_writer *w) {
    gguf_w_set_str(w, "general.architecture", "qwen35");
    gguf_w_set_u32(w, "qwen35.block_count", 2);
    gguf_w_set_i32(w, "qwen35.x", -3);
    gguf_w_set_u64(w, "qwen35.context_length", 262144);
    gguf_w_set_f32(w, "qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_w_set_bool(w, "prism.hadamard.gdn_v_grouped", true);
    const int32_t sec[4] = {11, 11, 10, 0};
    gguf_w_set_arr(w, "qwen35.rope.dimension_sections", GGUF_T_I32, sec, 4);
    const int8_t sg[4] = {1, -1, 1, -1};
    gguf_w_set_arr(w, "prism.hadamard.sign_values", GGUF_T_I8, sg, 4);
    const char *tok[4] = {"a", "b", "ab", "<|im_end|>"};
    const uint64_t len[4] = {1, 1, 2, 10};
    gguf_w_set_arr_str(w, "tokenizer.ggml.tokens", tok, len, 4);
    const char *mer[1] = {"a b"};
    const uint64_t mlen[1] = {3};
    gguf_w_set_arr_str(w, "tokenizer.ggml.merges", mer, mlen, 1);
    const float sc[4] = {0, -1, -2, 0};
    gguf_w_set_arr(w, "tokenizer.ggml.scores", GGUF_T_F32, sc, 4);
    const int32_t tt[4] = {1, 1, 1, 3};
    gguf_w_set_arr(w, "tokenizer.ggml.token_type", GGUF_T_I32, tt, 4);
    gguf_w_set_u32(w, "tokenizer.ggml.eos_token_id", 3);
    gguf_w_set_str(w, "tokenizer.chat_template", "{{ x }}");
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: gen_seeds OUTDIR [stories260K.gguf]\n"); return 2; }
    char path[4096];
    tern_err err = {0};
    static uint8_t data[1 << 16];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 131 + 7);
    const int types[] = {QT_F32, QT_F16, QT_BF16, QT_Q8_0, QT_Q1_0, QT_Q2_0, QT_PQ2_0, QT_PTQ1_0, QT_TQ1_0, QT_TQ2_0};
    /* one file per block type, and one with all of them */
    for (size_t k = 0; k <= sizeof types / sizeof types[0]; k++) {
        gguf_writer *w;
        if (gguf_w_init(&w, &err)) return fail("init", &err);
        add_meta(w);
        for (size_t j = 0; j < sizeof types / sizeof types[0]; j++) {
            if (k < sizeof types / sizeof types[0] && j != k) continue;
            const qt_traits *t = qt_get(types[j]);
            const int64_t ne[2] = {t->block == 1 ? 8 : t->block * 2, 2};
            char name[64];
            snprintf(name, sizeof name, "blk.0.t%d.weight", types[j]);
            if (gguf_w_add_tensor(w, name, types[j], 2, ne, data) < 0) { fprintf(stderr, "gen_seeds: add_tensor\n"); return 1; }
        }
        snprintf(path, sizeof path, "%s/seed_%02zu.gguf", argv[1], k);
        if (gguf_w_write_file(w, path, &err)) return fail(path, &err);
        gguf_w_free(w);
    }
    /* stories260K's metadata (every key: u32, f32, strings, string/f32/i32 arrays) + tiny tensors */
    if (argc > 2) {
        gguf_ctx *g;
        if (gguf_open(&g, argv[2], GGUF_LOAD_MMAP, &err)) return fail(argv[2], &err);
        gguf_writer *w;
        if (gguf_w_init(&w, &err)) return fail("init", &err);
        for (uint64_t i = 0; i < g->n_kv; i++) {
            const gguf_kv *kv = &g->kv[i];
            char s[4096];
            switch (kv->type) {
            case GGUF_T_U32: gguf_w_set_u32(w, kv->key, (uint32_t)kv->v.u); break;
            case GGUF_T_F32: gguf_w_set_f32(w, kv->key, (float)kv->v.f); break;
            case GGUF_T_STRING:
                snprintf(s, sizeof s, "%.*s", (int)(kv->v.s.n < 4000 ? kv->v.s.n : 4000), kv->v.s.p);
                gguf_w_set_str(w, kv->key, s);
                break;
            case GGUF_T_ARRAY:
                if (kv->v.a.type == GGUF_T_STRING) {
                    const char **p = malloc(kv->v.a.n * sizeof *p);
                    uint64_t *l = malloc(kv->v.a.n * sizeof *l);
                    for (uint64_t j = 0; p && l && j < kv->v.a.n; j++) { p[j] = kv->v.a.strs[j].p; l[j] = kv->v.a.strs[j].n; }
                    if (p && l) gguf_w_set_arr_str(w, kv->key, p, l, kv->v.a.n);
                    free(p); free(l);
                } else {
                    gguf_w_set_arr(w, kv->key, kv->v.a.type, kv->v.a.data, kv->v.a.n);
                }
                break;
            default: break;
            }
        }
        const int64_t ne1[1] = {64}, ne2[2] = {64, 4};
        gguf_w_add_tensor(w, "output_norm.weight", QT_F32, 1, ne1, data);
        gguf_w_add_tensor(w, "token_embd.weight", QT_F32, 2, ne2, data);
        snprintf(path, sizeof path, "%s/seed_stories_meta.gguf", argv[1]);
        if (gguf_w_write_file(w, path, &err)) return fail(path, &err);
        gguf_w_free(w);
        gguf_close(g);
    }
    return 0;
}
