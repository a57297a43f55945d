/* fuzz_hf.c: libFuzzer target for the Hugging Face tokenizer import (`tern synth --tokenizer`):
 * the input bytes are written as tokenizer.json into a folder of their own and read with
 * tok_hf_load (no tokenizer_config.json beside it, or, when the first byte is odd, the part of
 * the input after its first NUL byte as tokenizer_config.json); an import that succeeds is built
 * into a vocabulary (tok_build) and written with the GGUF writer (tok_hf_write). Build and run:
 * `make fuzz` (fuzz/run.sh; clang -fsanitize=fuzzer,address,undefined).
 *
 * Checked besides crashes, sanitizer reports and leaks: an error comes with a message and leaves
 * *out NULL; an imported vocabulary has n_vocab > 0 rows, every token type in 0..6 and its
 * special ids inside the rows, and tok_build accepts it (the importer validates what the
 * tokenizer needs). A broken check aborts, which the fuzzer reports. */
#include "format/gguf.h"
#include "hf_vocab.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64];   /* a folder of this process's own, removed at exit */

static void drop(const char *name);

static void remove_dir(void) {
    drop("tokenizer.json");
    drop("tokenizer_config.json");
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_hf.XXXXXX");   /* mkdtemp's template */
    if (!mkdtemp(g_dir)) {
        perror("fuzz_hf: mkdtemp");
        exit(1);
    }
    atexit(remove_dir);
    return 0;
}

static void put(const char *name, const uint8_t *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) abort();
}

static void drop(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const bool with_config = data[0] & 1;
    const uint8_t *json = data + 1;
    size_t n_json = size - 1;
    const uint8_t *nul = memchr(json, 0, n_json);
    if (with_config && nul) {
        put("tokenizer_config.json", nul + 1, (size_t)(json + n_json - (nul + 1)));
        n_json = (size_t)(nul - json);
    } else {
        drop("tokenizer_config.json");
    }
    put("tokenizer.json", json, n_json);
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", g_dir);
    tok_hf *h = (tok_hf *)(uintptr_t)1;   /* must come back NULL on an error */
    tern_err e = {0};
    const tok_hf_opts o = {.pre = (data[0] & 2) ? "qwen35" : NULL, .n_rows = (data[0] & 4) ? 0 : 4096};
    if (tok_hf_load(&h, path, &o, &e) != TERN_OK) {
        if (e.msg[0] == '\0' || h) abort();
        return 0;
    }
    if (h->n_vocab <= 0) abort();
    for (int32_t i = 0; i < h->n_vocab; i++)
        if (h->types[i] < 0 || h->types[i] > 6) abort();
    if (h->bos >= h->n_vocab || h->eos >= h->n_vocab || h->pad >= h->n_vocab) abort();
    tok_vocab *v = NULL;
    if (hf_vocab_build(&v, h, NULL, &e) != TERN_OK) {
        fprintf(stderr, "fuzz_hf: the import passed but tok_build refused it: %s\n", e.msg);
        abort();
    }
    tok_free(v);
    gguf_writer *w = NULL;
    if (gguf_w_init(&w, &e) != TERN_OK) abort();
    if (tok_hf_write(h, w, &e) != TERN_OK && e.msg[0] == '\0') abort();
    gguf_w_free(w);
    tok_hf_free(h);
    return 0;
}
