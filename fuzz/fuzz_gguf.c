/* fuzz_gguf.c: libFuzzer target for the GGUF reader (gguf_open_mem), every typed getter on every
 * key, array element access, the tokenizer validator and the block decoders on each tensor's
 * first row, and the per-token budget of `tern info` (gguf_budget_compute). Build and run: `make fuzz FUZZ_SECONDS=N` (fuzz/run.sh; clang
 * -fsanitize=fuzzer,address,undefined). Any crash, sanitizer report, leak or abort is a bug:
 * the reader must turn every input into TERN_OK or a TERN_E_* with a message. */
#include "format/budget.h"
#include "format/gguf.h"
#include "format/qtypes.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile double sink;   /* keeps the reads from being optimised away */

static void poke_kv(const gguf_ctx *g, const gguf_kv *kv) {
    tern_err err = {0};
    int64_t i;
    double f;
    bool b;
    gguf_str s;
    gguf_arr a;
    int32_t id;
    if (gguf_get_int(g, kv->key, true, 0, &i, &err) == TERN_OK) sink += (double)i;
    tern_err_clear(&err);
    if (gguf_get_float(g, kv->key, true, 0, &f, &err) == TERN_OK) sink += f;
    tern_err_clear(&err);
    if (gguf_get_bool(g, kv->key, true, false, &b, &err) == TERN_OK) sink += b;
    tern_err_clear(&err);
    if (gguf_get_str(g, kv->key, true, &s, &err) == TERN_OK && s.n) sink += (unsigned char)s.p[s.n - 1] + gguf_str_eq(s, "gpt2");
    tern_err_clear(&err);
    gguf_get_token_id(g, kv->key, 1000, &id, &err);
    tern_err_clear(&err);
    if (gguf_get_arr(g, kv->key, true, &a, &err) == TERN_OK) {
        for (uint64_t k = 0; k < a.n && k < 4096; k++) {
            if (a.type == GGUF_T_STRING) { if (a.strs[k].n) sink += (unsigned char)a.strs[k].p[0]; }
            else if (gguf_arr_is_int(&a)) sink += (double)gguf_arr_int(&a, k);
            else sink += gguf_arr_float(&a, k) + (double)gguf_arr_int(&a, k);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);         /* exact size: ASan sees any over-read */
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    gguf_ctx *g = NULL;
    tern_err err = {0};
    const int rc = gguf_open_mem(&g, buf, size, &err);
    if (rc != TERN_OK) {
        if (err.code != rc || err.msg[0] == '\0' || g) abort();      /* an error must be reported */
        free(buf);
        return 0;
    }
    for (uint64_t i = 0; i < g->n_kv; i++) poke_kv(g, &g->kv[i]);
    tern_err_clear(&err);
    gguf_check_tokenizer(g, &err);
    gguf_budget bud;                                 /* what `tern info` computes */
    tern_err_clear(&err);
    if (gguf_budget_compute(g, (int64_t)(size & 0xffff), &bud, &err) == TERN_OK) sink += (double)bud.total_bytes;
    float row[256];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (gguf_find_tensor(g, t->name) != t) abort();              /* names are unique */
        const qt_traits *tr = qt_get(t->type);
        if (!tr || !t->data || t->data < g->buf || t->data + t->nbytes > g->buf + g->size) abort();
        const int64_t n = tr->block <= 256 && t->ne[0] >= tr->block ? tr->block : 0;   /* one block */
        if (n && qt_dequant(t->type, t->data, row, n) != TERN_OK) abort();
        for (int64_t k = 0; k < n; k++) sink += row[k];
    }
    gguf_close(g);
    free(buf);
    return 0;
}
