/* test_gguf.c: the GGUF reader and writer. A write + read-back round trip (both load modes, v2
 * accepted, streaming), typed getters, the id-42 group rule (spec 3.3), and one test per
 * malformed-input case: each asserts the error code AND that the message names the
 * item and what was expected. Bad files are built byte by byte here (bb_*), independently of
 * the writer, so the writer cannot hide a reader bug. Buffers handed to the reader are heap
 * allocations of exactly the file size, so ASan (make test-debug) catches any over-read. */
#include "test.h"

#include "format/gguf.h"
#include "format/qtypes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- byte builder ---------------------------------------------------------------------------- */

typedef struct { uint8_t *p; size_t n, cap; } bb;

static void bb_put(bb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void bb_le(bb *b, uint64_t v, int n) {
    uint8_t t[8];
    for (int i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    bb_put(b, t, (size_t)n);
}
static void bb_u32(bb *b, uint32_t v) { bb_le(b, v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_le(b, v, 8); }
static void bb_str(bb *b, const char *s) { bb_u64(b, strlen(s)); bb_put(b, s, strlen(s)); }
static void bb_hdr(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bb_put(b, "GGUF", 4); bb_u32(b, version); bb_u64(b, n_tensors); bb_u64(b, n_kv);
}
static void bb_kv_u32(bb *b, const char *k, uint32_t v) { bb_str(b, k); bb_u32(b, GGUF_T_U32); bb_u32(b, v); }
static void bb_kv_i32(bb *b, const char *k, int32_t v) { bb_str(b, k); bb_u32(b, GGUF_T_I32); bb_u32(b, (uint32_t)v); }
static void bb_kv_str(bb *b, const char *k, const char *v) { bb_str(b, k); bb_u32(b, GGUF_T_STRING); bb_str(b, v); }
static void bb_tinfo(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset) {
    bb_str(b, name); bb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) bb_u64(b, ne[d]);
    bb_u32(b, type); bb_u64(b, offset);
}
/* pad to the alignment, then n zero bytes of tensor data */
static void bb_data(bb *b, size_t align, size_t n) {
    while (b->n % align) bb_put(b, "", 1);
    for (size_t i = 0; i < n; i++) bb_put(b, "", 1);
}

/* Open a copy of exactly len bytes; the copy is freed with the context. */
typedef struct { gguf_ctx *g; uint8_t *buf; } opened;
static int open_bytes(opened *o, const uint8_t *p, size_t len, tern_err *err) {
    o->buf = malloc(len ? len : 1);
    assert_non_null(o->buf);
    if (len) memcpy(o->buf, p, len);
    return gguf_open_mem(&o->g, o->buf, len, err);
}
static void close_bytes(opened *o) { gguf_close(o->g); free(o->buf); o->g = NULL; o->buf = NULL; }

/* The file must be refused with `code`, and the message must contain every given substring. */
static void expect_fail_v(const bb *b, int code, const char *const *subs) {
    opened o;
    tern_err err = {0};
    const int rc = open_bytes(&o, b->p, b->n, &err);
    if (rc != code) fail_msg("expected %s, got %s: %s", tern_strerror(code), tern_strerror(rc), err.msg);
    assert_int_equal(err.code, code);
    assert_null(o.g);
    for (; *subs; subs++)
        if (!strstr(err.msg, *subs)) fail_msg("message \"%s\" does not contain \"%s\"", err.msg, *subs);
    close_bytes(&o);
}
#define EXPECT_FAIL(b, code, ...) do { const char *const subs_[] = {__VA_ARGS__, NULL}; expect_fail_v((b), (code), subs_); } while (0)

/* A valid little file: 2 kvs, tensors 'a' (F32 [8, 2]) and 'b' (PQ2_0 [128, 4]). */
static void bb_valid(bb *b) {
    const uint64_t ne_a[2] = {8, 2}, ne_b[2] = {128, 4};
    bb_hdr(b, 3, 2, 2);
    bb_kv_str(b, "general.architecture", "llama");
    bb_kv_u32(b, "llama.block_count", 5);
    bb_tinfo(b, "a", 2, ne_a, QT_F32, 0);
    bb_tinfo(b, "b", 2, ne_b, QT_PQ2_0, 64);
    bb_data(b, 32, 64 + 4 * 34);
}

/* ---- valid files ----------------------------------------------------------------------------- */

static void test_bytes_valid(void **state) {
    (void)state;
    bb b = {0};
    bb_valid(&b);
    opened o;
    tern_err err = {0};
    assert_int_equal(open_bytes(&o, b.p, b.n, &err), TERN_OK);
    assert_int_equal(o.g->version, 3);
    assert_int_equal(o.g->n_tensors, 2);
    assert_int_equal(o.g->alignment, 32);
    const gguf_tensor *t = gguf_find_tensor(o.g, "b");
    assert_non_null(t);
    assert_int_equal(t->nbytes, 136);
    assert_int_equal(t->ne[1], 4);
    assert_int_equal(t->ne[2], 1);
    assert_ptr_equal(t->data, o.buf + o.g->data_offset + 64);
    assert_null(gguf_find_tensor(o.g, "c"));
    close_bytes(&o);
    /* version 2 is accepted (same layout) */
    b.p[4] = 2;
    assert_int_equal(open_bytes(&o, b.p, b.n, &err), TERN_OK);
    assert_int_equal(o.g->version, 2);
    close_bytes(&o);
    free(b.p);
}

static void write_all_types(gguf_writer *w, float *f32data, uint8_t *pq) {
    assert_int_equal(gguf_w_set_str(w, "general.architecture", "qwen35"), TERN_OK);
    assert_int_equal(gguf_w_set_u32(w, "u32", 4000000000u), TERN_OK);
    assert_int_equal(gguf_w_set_i32(w, "i32", -7), TERN_OK);
    assert_int_equal(gguf_w_set_u64(w, "u64", 1ull << 40), TERN_OK);
    assert_int_equal(gguf_w_set_f32(w, "f32", 1e-6f), TERN_OK);
    assert_int_equal(gguf_w_set_bool(w, "bool", true), TERN_OK);
    assert_int_equal(gguf_w_set_u32(w, "replaced", 1), TERN_OK);
    assert_int_equal(gguf_w_set_u32(w, "replaced", 2), TERN_OK);
    const int32_t sec[4] = {11, 11, 10, 0};
    assert_int_equal(gguf_w_set_arr(w, "arr.i32", GGUF_T_I32, sec, 4), TERN_OK);
    const int8_t signs[5] = {1, -1, 1, 1, -1};
    assert_int_equal(gguf_w_set_arr(w, "arr.i8", GGUF_T_I8, signs, 5), TERN_OK);
    const float sc[3] = {0.5f, -1.0f, 3.25f};
    assert_int_equal(gguf_w_set_arr(w, "arr.f32", GGUF_T_F32, sc, 3), TERN_OK);
    const double f64[2] = {1e300, -2.5};
    assert_int_equal(gguf_w_set_arr(w, "arr.f64", GGUF_T_F64, f64, 2), TERN_OK);
    const uint16_t u16[2] = {65535, 7};
    assert_int_equal(gguf_w_set_arr(w, "arr.u16", GGUF_T_U16, u16, 2), TERN_OK);
    const uint8_t bools[3] = {1, 0, 1};
    assert_int_equal(gguf_w_set_arr(w, "arr.bool", GGUF_T_BOOL, bools, 3), TERN_OK);
    const char *strs[3] = {"<|im_end|>", "a\0b", ""};
    const uint64_t lens[3] = {10, 3, 0};
    assert_int_equal(gguf_w_set_arr_str(w, "arr.str", strs, lens, 3), TERN_OK);
    assert_int_equal(gguf_w_set_arr_str(w, "arr.empty", NULL, NULL, 0), TERN_OK);
    assert_int_equal(gguf_w_set_alignment(w, 64), TERN_OK);
    assert_int_equal(gguf_w_set_alignment(w, 48), TERN_E_ARG);
    for (int i = 0; i < 3 * 5; i++) f32data[i] = (float)i - 0.25f;
    const int64_t ne_f[2] = {3, 5}, ne_p[3] = {256, 2, 3}, ne_bad[2] = {100, 2};
    assert_int_equal(gguf_w_add_tensor(w, "blk.0.attn_norm.weight", QT_F32, 2, ne_f, f32data), 0);
    for (int i = 0; i < 12 * 34; i++) pq[i] = (uint8_t)(i * 37 + 1);
    assert_int_equal(gguf_w_add_tensor(w, "blk.0.ffn_up.weight", QT_PQ2_0, 3, ne_p, pq), 1);
    assert_int_equal(gguf_w_add_tensor(w, "blk.0.ffn_up.weight", QT_F32, 2, ne_f, f32data), TERN_E_ARG);
    assert_int_equal(gguf_w_add_tensor(w, "bad", QT_PQ2_0, 2, ne_bad, pq), TERN_E_ARG);
    assert_int_equal(gguf_w_add_tensor(w, "bad", 77, 2, ne_f, pq), TERN_E_ARG);
    assert_int_equal(gguf_w_add_tensor(w, "bad", QT_F32, 5, ne_f, pq), TERN_E_ARG);
}

static void check_all_types(const gguf_ctx *g, const float *f32data, const uint8_t *pq) {
    tern_err err = {0};
    int64_t iv;
    double fv;
    bool bv;
    gguf_str s;
    gguf_arr a;
    assert_int_equal(g->version, 3);
    assert_int_equal(g->alignment, 64);
    assert_int_equal(g->data_offset % 64, 0);
    assert_int_equal(gguf_get_str(g, "general.architecture", true, &s, &err), TERN_OK);
    assert_true(gguf_str_eq(s, "qwen35"));
    assert_false(gguf_str_eq(s, "qwen3"));
    assert_int_equal(gguf_get_int(g, "u32", true, 0, &iv, &err), TERN_OK);
    assert_true(iv == 4000000000ll);
    assert_int_equal(gguf_get_int(g, "i32", true, 0, &iv, &err), TERN_OK);
    assert_true(iv == -7);
    assert_int_equal(gguf_get_int(g, "u64", true, 0, &iv, &err), TERN_OK);
    assert_true(iv == 1ll << 40);
    assert_int_equal(gguf_get_int(g, "bool", true, 0, &iv, &err), TERN_OK);
    assert_true(iv == 1);
    assert_int_equal(gguf_get_int(g, "replaced", true, 0, &iv, &err), TERN_OK);
    assert_true(iv == 2);
    assert_int_equal(gguf_get_float(g, "f32", true, 0, &fv, &err), TERN_OK);
    assert_true(fv == (double)1e-6f);
    assert_int_equal(gguf_get_float(g, "i32", true, 0, &fv, &err), TERN_OK);
    assert_true(fv == -7.0);
    assert_int_equal(gguf_get_bool(g, "bool", true, false, &bv, &err), TERN_OK);
    assert_true(bv);
    /* absent: default when optional, an error naming the key when required */
    assert_int_equal(gguf_get_int(g, "nope", false, 42, &iv, &err), TERN_OK);
    assert_true(iv == 42);
    assert_int_equal(gguf_get_float(g, "nope", false, 1e6, &fv, &err), TERN_OK);
    assert_true(fv == 1e6);
    assert_int_equal(gguf_get_int(g, "nope", true, 0, &iv, &err), TERN_E_FORMAT);
    assert_non_null(strstr(err.msg, "missing key 'nope'"));
    tern_err_clear(&err);
    /* wrong types name key, expected and found */
    assert_int_equal(gguf_get_int(g, "f32", true, 0, &iv, &err), TERN_E_FORMAT);
    assert_non_null(strstr(err.msg, "'f32'"));
    assert_non_null(strstr(err.msg, "expected an integer"));
    tern_err_clear(&err);
    assert_int_equal(gguf_get_str(g, "u32", true, &s, &err), TERN_E_FORMAT);
    assert_non_null(strstr(err.msg, "type u32, expected string"));
    tern_err_clear(&err);
    assert_int_equal(gguf_get_float(g, "arr.f32", true, 0, &fv, &err), TERN_E_FORMAT);
    assert_non_null(strstr(err.msg, "array of f32"));
    tern_err_clear(&err);
    assert_int_equal(gguf_get_bool(g, "u32", true, false, &bv, &err), TERN_E_FORMAT);
    tern_err_clear(&err);
    /* arrays */
    assert_int_equal(gguf_get_arr(g, "arr.i32", true, &a, &err), TERN_OK);
    assert_int_equal(a.type, GGUF_T_I32);
    assert_int_equal(a.n, 4);
    assert_true(gguf_arr_is_int(&a));
    assert_true(gguf_arr_int(&a, 0) == 11 && gguf_arr_int(&a, 2) == 10 && gguf_arr_int(&a, 3) == 0);
    assert_int_equal(gguf_get_arr(g, "arr.i8", true, &a, &err), TERN_OK);
    assert_true(gguf_arr_int(&a, 1) == -1 && gguf_arr_int(&a, 4) == -1 && gguf_arr_int(&a, 3) == 1);
    assert_int_equal(gguf_get_arr(g, "arr.f32", true, &a, &err), TERN_OK);
    assert_false(gguf_arr_is_int(&a));
    assert_true(gguf_arr_float(&a, 2) == 3.25);
    assert_int_equal(gguf_get_arr(g, "arr.f64", true, &a, &err), TERN_OK);
    assert_true(gguf_arr_float(&a, 0) == 1e300 && gguf_arr_float(&a, 1) == -2.5);
    assert_int_equal(gguf_get_arr(g, "arr.u16", true, &a, &err), TERN_OK);
    assert_true(gguf_arr_int(&a, 0) == 65535 && gguf_arr_float(&a, 1) == 7.0);
    assert_int_equal(gguf_get_arr(g, "arr.bool", true, &a, &err), TERN_OK);
    assert_true(gguf_arr_int(&a, 0) == 1 && gguf_arr_int(&a, 1) == 0);
    assert_int_equal(gguf_get_arr(g, "arr.str", true, &a, &err), TERN_OK);
    assert_int_equal(a.type, GGUF_T_STRING);
    assert_int_equal(a.n, 3);
    assert_non_null(a.strs);
    assert_true(gguf_str_eq(a.strs[0], "<|im_end|>"));
    assert_int_equal(a.strs[1].n, 3);
    assert_memory_equal(a.strs[1].p, "a\0b", 3);
    assert_int_equal(a.strs[2].n, 0);
    assert_int_equal(gguf_get_arr(g, "arr.empty", true, &a, &err), TERN_OK);
    assert_int_equal(a.n, 0);
    assert_int_equal(gguf_get_arr(g, "u32", true, &a, &err), TERN_E_FORMAT);
    tern_err_clear(&err);
    /* tensors */
    assert_int_equal(g->n_tensors, 2);
    const gguf_tensor *t = gguf_find_tensor(g, "blk.0.attn_norm.weight");
    assert_non_null(t);
    assert_int_equal(t->type, QT_F32);
    assert_int_equal(t->n_dims, 2);
    assert_true(t->ne[0] == 3 && t->ne[1] == 5 && t->ne[2] == 1 && t->ne[3] == 1);
    assert_int_equal(t->offset, 0);
    assert_int_equal(t->nbytes, 60);
    assert_memory_equal(t->data, f32data, 60);
    t = gguf_find_tensor(g, "blk.0.ffn_up.weight");
    assert_non_null(t);
    assert_int_equal(t->type, QT_PQ2_0);
    assert_int_equal(t->file_type, QT_PQ2_0);
    assert_int_equal(t->n_dims, 3);
    assert_true(t->ne[0] == 256 && t->ne[1] == 2 && t->ne[2] == 3);
    assert_int_equal(t->offset, 64);                /* 60 bytes padded to 64 */
    assert_int_equal(t->nbytes, 12 * 34);
    assert_memory_equal(t->data, pq, 12 * 34);
    assert_true((uint64_t)(t->data - g->buf) == g->data_offset + 64);
}

static void test_writer_roundtrip(void **state) {
    (void)state;
    char path[256];
    fx_tmp_path(path, sizeof path, "rt.gguf");
    float f32data[15];
    uint8_t pq[12 * 34];
    gguf_writer *w;
    tern_err err = {0};
    assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
    write_all_types(w, f32data, pq);
    assert_int_equal(gguf_w_write_file(w, path, &err), TERN_OK);
    gguf_w_free(w);
    for (int mode = 0; mode < 2; mode++) {
        gguf_ctx *g;
        if (gguf_open(&g, path, mode, &err) != TERN_OK) fail_msg("mode %d: %s", mode, err.msg);
#ifdef _WIN32
        assert_int_equal(g->mode, GGUF_LOAD_READ);   /* no private file maps there: both modes read */
#else
        assert_int_equal(g->mode, mode);
#endif
        check_all_types(g, f32data, pq);
        /* writable buffer (in-place repack) never changes the file */
        gguf_tensor *t = (gguf_tensor *)gguf_find_tensor(g, "blk.0.ffn_up.weight");
        t->data[0] ^= 0xff;
        gguf_close(g);
    }
    gguf_ctx *g;
    assert_int_equal(gguf_open(&g, path, GGUF_LOAD_MMAP, &err), TERN_OK);
    check_all_types(g, f32data, pq);
    gguf_close(g);
    /* the same bytes via gguf_open_mem */
    size_t len;
    uint8_t *bytes = (uint8_t *)fx_read_file(path, &len);
    assert_non_null(bytes);
    assert_int_equal(gguf_open_mem(&g, bytes, len, &err), TERN_OK);
    check_all_types(g, f32data, pq);
    gguf_close(g);
    free(bytes);

    /* streaming, in pieces: the same file byte for byte */
    char path2[256];
    fx_tmp_path(path2, sizeof path2, "rt2.gguf");
    assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
    write_all_types(w, f32data, pq);
    assert_int_equal(gguf_w_begin(w, path2, &err), TERN_OK);
    assert_int_equal(gguf_w_tensor_data(w, 1, pq, 10, &err), TERN_E_ARG);       /* out of order */
    tern_err_clear(&err);
    assert_int_equal(gguf_w_tensor_data(w, 0, f32data, 60, &err), TERN_OK);
    assert_int_equal(gguf_w_tensor_data(w, 1, pq, 100, &err), TERN_OK);
    assert_int_equal(gguf_w_tensor_data(w, 1, pq + 100, 1000, &err), TERN_E_ARG); /* too many bytes */
    tern_err_clear(&err);
    assert_int_equal(gguf_w_tensor_data(w, 1, pq + 100, 12 * 34 - 100, &err), TERN_OK);
    assert_int_equal(gguf_w_end(w, &err), TERN_OK);
    gguf_w_free(w);
    size_t len2;
    bytes = (uint8_t *)fx_read_file(path, &len);
    uint8_t *bytes2 = (uint8_t *)fx_read_file(path2, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(bytes, bytes2, len);
    free(bytes); free(bytes2);
    unlink(path);
    unlink(path2);
    /* gguf_open errors: missing file, not a GGUF */
    assert_int_equal(gguf_open(&g, "/nonexistent/x.gguf", GGUF_LOAD_READ, &err), TERN_E_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/x.gguf"));
    tern_err_clear(&err);
    assert_int_equal(gguf_open(&g, "/tmp", GGUF_LOAD_MMAP, &err), TERN_E_IO);
    assert_non_null(strstr(err.msg, "'/tmp' is a directory, expected a regular file"));   /* stat, before open */
    tern_err_clear(&err);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("GGUF\3\0\0\0", 1, 8, f);
    fclose(f);
    for (int mode = 0; mode < 2; mode++) {
        tern_err_clear(&err);
        assert_int_equal(gguf_open(&g, path, mode, &err), TERN_E_FORMAT);
        assert_non_null(strstr(err.msg, "file size 8 bytes, expected at least"));
        assert_null(g);
    }
    f = fopen(path, "wb");                            /* one byte: the unit in the singular */
    assert_non_null(f);
    fwrite("G", 1, 1, f);
    fclose(f);
    tern_err_clear(&err);
    assert_int_equal(gguf_open(&g, path, GGUF_LOAD_READ, &err), TERN_E_FORMAT);
    assert_non_null(strstr(err.msg, "file size 1 byte, expected at least the 24-byte GGUF header"));
    unlink(path);
    /* a format error from a file names the path */
    f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("GGUF\7\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 1, 24, f);
    fclose(f);
    tern_err_clear(&err);
    assert_int_equal(gguf_open(&g, path, GGUF_LOAD_READ, &err), TERN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "got 7, expected 2 or 3"));
    unlink(path);
}

/* ---- the id-42 rule (spec 3.3) --------------------------------------------------------------- */

static void test_q2_0_group_rule(void **state) {
    (void)state;
    /* [1024, 4]: group 64 = 16 blocks * 18 * 4 = 1152 bytes; group 128 = 8 * 34 * 4 = 1088 */
    const uint64_t ne[2] = {1024, 4};
    for (int legacy = 0; legacy < 2; legacy++) {
        const size_t sz = legacy ? 1088 : 1152;
        bb b = {0};
        bb_hdr(&b, 3, 2, 0);
        bb_tinfo(&b, "w", 2, ne, QT_Q2_0, 0);
        const uint64_t ne2[1] = {8};
        bb_tinfo(&b, "n", 1, ne2, QT_F32, sz);               /* sz is a multiple of 32 */
        bb_data(&b, 32, sz + 32);
        opened o;
        tern_err err = {0};
        if (open_bytes(&o, b.p, b.n, &err) != TERN_OK) fail_msg("%s", err.msg);
        const gguf_tensor *t = gguf_find_tensor(o.g, "w");
        assert_int_equal(t->file_type, 42);
        assert_int_equal(t->type, legacy ? QT_PQ2_0 : QT_Q2_0);
        assert_int_equal(t->nbytes, sz);
        close_bytes(&o);
        free(b.p);
    }
    /* as the last tensor: the gap is to the end of the file */
    for (int legacy = 0; legacy < 2; legacy++) {
        bb b = {0};
        bb_hdr(&b, 3, 1, 0);
        bb_tinfo(&b, "w", 2, ne, QT_Q2_0, 0);
        bb_data(&b, 32, legacy ? 1088 : 1152);
        opened o;
        tern_err err = {0};
        assert_int_equal(open_bytes(&o, b.p, b.n, &err), TERN_OK);
        assert_int_equal(gguf_find_tensor(o.g, "w")->type, legacy ? QT_PQ2_0 : QT_Q2_0);
        close_bytes(&o);
        free(b.p);
    }
    /* neither fits: a 1120-byte gap */
    bb b = {0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "w", 2, ne, QT_Q2_0, 0);
    bb_data(&b, 32, 1120);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'w'", "Q2_0 (id 42)", "expected exactly one to fit", "neither");
    free(b.p);
    /* both fit: [128, 1] is 36 or 34 bytes, both padded to 64 with alignment 32 */
    const uint64_t ne1[2] = {128, 1};
    b = (bb){0};
    bb_hdr(&b, 3, 2, 0);
    bb_tinfo(&b, "w", 2, ne1, QT_Q2_0, 0);
    const uint64_t ne2[1] = {8};
    bb_tinfo(&b, "n", 1, ne2, QT_F32, 64);
    bb_data(&b, 32, 64 + 32);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'w'", "both");
    free(b.p);
}

/* ---- malformed files: one test per case ------------------------------------------------------ */

static void test_bad_magic(void **state) {
    (void)state;
    bb b = {0};
    bb_valid(&b);
    b.p[0] = 'g';
    EXPECT_FAIL(&b, TERN_E_FORMAT, "magic", "expected 47 47 55 46");
    b.n = 2;
    EXPECT_FAIL(&b, TERN_E_FORMAT, "truncated", "magic");
    free(b.p);
}

static void test_bad_version(void **state) {
    (void)state;
    bb b = {0};
    bb_valid(&b);
    const uint32_t bad[] = {0, 1, 4, 0x03000000u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int k = 0; k < 4; k++) b.p[4 + k] = (uint8_t)(bad[i] >> (8 * k));
        EXPECT_FAIL(&b, TERN_E_UNSUPPORTED, "version", "expected 2 or 3");
    }
    EXPECT_FAIL(&b, TERN_E_UNSUPPORTED, "big-endian");
    free(b.p);
}

/* Every cut of a small valid file written by our writer is refused with TERN_E_FORMAT. */
static void test_truncated_small_file(void **state) {
    (void)state;
    char path[256];
    fx_tmp_path(path, sizeof path, "trunc.gguf");
    gguf_writer *w;
    tern_err err = {0};
    assert_int_equal(gguf_w_init(&w, &err), TERN_OK);
    gguf_w_set_str(w, "general.architecture", "qwen3");
    gguf_w_set_u32(w, "qwen3.block_count", 1);
    gguf_w_set_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    const char *toks[4] = {"a", "b", "ab", "<|im_end|>"};
    const uint64_t lens[4] = {1, 1, 2, 10};
    gguf_w_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 4);
    const int32_t tt[4] = {1, 1, 1, 3};
    gguf_w_set_arr(w, "tokenizer.ggml.token_type", GGUF_T_I32, tt, 4);
    gguf_w_set_u32(w, "tokenizer.ggml.eos_token_id", 3);
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t pq[34 * 2];
    memset(pq, 0x55, sizeof pq);
    const int64_t ne_n[1] = {8}, ne_w[2] = {128, 2};
    gguf_w_add_tensor(w, "output_norm.weight", QT_F32, 1, ne_n, f);
    gguf_w_add_tensor(w, "token_embd.weight", QT_PQ2_0, 2, ne_w, pq);  /* 68 bytes: no trailing pad */
    const int64_t ne_l[1] = {32};
    float g32[32] = {0};
    gguf_w_add_tensor(w, "last", QT_F32, 1, ne_l, g32);                 /* 128 bytes: ends aligned */
    assert_int_equal(gguf_w_write_file(w, path, &err), TERN_OK);
    gguf_w_free(w);
    size_t len;
    uint8_t *bytes = (uint8_t *)fx_read_file(path, &len);
    unlink(path);
    assert_non_null(bytes);
    opened o;
    assert_int_equal(open_bytes(&o, bytes, len, &err), TERN_OK);
    assert_int_equal(gguf_check_tokenizer(o.g, &err), TERN_OK);
    close_bytes(&o);
    for (size_t cut = 0; cut < len; cut++) {
        tern_err e = {0};
        const int rc = open_bytes(&o, bytes, cut, &e);
        if (rc != TERN_E_FORMAT) fail_msg("cut at %zu of %zu: got %s (%s), expected TERN_E_FORMAT", cut, len, tern_strerror(rc), e.msg);
        if (!strstr(e.msg, "truncated") && !strstr(e.msg, "past the end") && !strstr(e.msg, "remain"))
            fail_msg("cut at %zu: message does not say truncated: %s", cut, e.msg);
        close_bytes(&o);
    }
    free(bytes);
}

/* The real stories260K file cut at every byte of its header region and at sampled offsets in
 * the data: refused while any tensor is cut, accepted once the last tensor is whole. */
static void test_truncated_stories(void **state) {
    (void)state;
    char path[512];
    fx_require(path, sizeof path, "data/stories260k/stories260K.gguf");
    size_t len;
    uint8_t *bytes = (uint8_t *)fx_read_file(path, &len);
    assert_non_null(bytes);
    opened o;
    tern_err err = {0};
    assert_int_equal(open_bytes(&o, bytes, len, &err), TERN_OK);
    uint64_t data_end = 0;
    const uint64_t hdr = o.g->data_offset;
    for (uint64_t i = 0; i < o.g->n_tensors; i++)
        if (o.g->tensors[i].offset + o.g->tensors[i].nbytes > data_end) data_end = o.g->tensors[i].offset + o.g->tensors[i].nbytes;
    data_end += hdr;
    close_bytes(&o);
    assert_true(hdr > 1000 && data_end <= len);
    {   /* a cut inside the tables: the counts of the intact header against the file's size (the
         * stories file has 48 tensors and 19 metadata pairs: facts of the file, tern info) */
        tern_err e = {0};
        assert_int_equal(open_bytes(&o, bytes, 1000, &e), TERN_E_FORMAT);
        if (!strstr(e.msg, "48 tensors, expected at most 21: their infos (33+ bytes each) and the 19 metadata pairs do not "
                           "fit in the 1000-byte file (truncated"))
            fail_msg("cut at 1000: %s", e.msg);
        close_bytes(&o);
        e = (tern_err){0};   /* the first error wins: a fresh one for the second open */
        assert_int_equal(open_bytes(&o, bytes, 24, &e), TERN_E_FORMAT);
        if (!strstr(e.msg, "19 pairs, expected at most 0: at 14+ bytes each they do not fit in the 24-byte file (truncated"))
            fail_msg("cut at 24: %s", e.msg);
        close_bytes(&o);
    }
    for (size_t cut = 0; cut < len; cut += cut < hdr + 64 ? 1 : 4093) {
        tern_err e = {0};
        const int rc = open_bytes(&o, bytes, cut, &e);
        if (cut < data_end) {
            if (rc != TERN_E_FORMAT) fail_msg("cut at %zu: got %s, expected TERN_E_FORMAT", cut, tern_strerror(rc));
            assert_true(e.msg[0] != '\0');
        } else {
            assert_int_equal(rc, TERN_OK);
        }
        close_bytes(&o);
    }
    free(bytes);
}

static void test_kv_count_too_large(void **state) {
    (void)state;
    bb b = {0};
    bb_hdr(&b, 3, 0, 1000000);
    bb_kv_u32(&b, "k", 1);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "metadata count", "1000000", "expected at most");
    free(b.p);
    b = (bb){0};
    bb_hdr(&b, 3, 0, UINT64_MAX);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "metadata count", "expected at most");
    free(b.p);
}

static void test_tensor_count_too_large(void **state) {
    (void)state;
    bb b = {0};
    bb_hdr(&b, 3, 1ull << 40, 0);
    bb_data(&b, 1, 100);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "tensor count", "1099511627776", "expected at most");
    free(b.p);
    b = (bb){0};
    bb_hdr(&b, 3, UINT64_MAX, 1);
    bb_kv_u32(&b, "k", 1);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "tensor count", "expected at most");
    free(b.p);
    /* a count one too large that still fits the file: the entry past the real ones reads the
     * data's zeros as an empty name, and the message names the count the header declared */
    b = (bb){0};
    bb_hdr(&b, 3, 2, 0);
    const uint64_t ne[1] = {32};
    bb_tinfo(&b, "w", 1, ne, 0, 0);
    bb_data(&b, 32, 128);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "tensor name 1 (counting from 0, of the 2 the count at byte 8 declares)", "empty name");
    free(b.p);
    /* the same for the metadata count */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 2);
    bb_kv_u32(&b, "k", 1);
    bb_data(&b, 1, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "metadata key 1 (counting from 0, of the 2 the count at byte 16 declares)", "empty name");
    free(b.p);
}

static void test_string_length_too_large(void **state) {
    (void)state;
    /* key length */
    bb b = {0};
    bb_hdr(&b, 3, 0, 1);
    bb_u64(&b, 1ull << 50); bb_put(&b, "general.name", 12); bb_u32(&b, GGUF_T_U8); bb_put(&b, "x", 1);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "metadata key 0 (counting from 0, of the 1 the count at byte 16 declares)", "string length 1125899906842624", "expected at most");
    free(b.p);
    /* string value length */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "general.name"); bb_u32(&b, GGUF_T_STRING); bb_u64(&b, UINT64_MAX); bb_put(&b, "abc", 3);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "general.name", "string length", "expected at most");
    free(b.p);
    /* tensor name length */
    b = (bb){0};
    bb_hdr(&b, 3, 1, 0);
    bb_u64(&b, 1000); bb_put(&b, "w", 1); bb_u32(&b, 1); bb_u64(&b, 8); bb_u32(&b, 0); bb_u64(&b, 0);
    bb_data(&b, 32, 32);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "tensor name 0 (counting from 0, of the 1 the count at byte 8 declares)", "string length 1000", "expected at most");
    free(b.p);
}

static void test_array_length_too_large(void **state) {
    (void)state;
    bb b = {0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.scores"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_F32); bb_u64(&b, 1ull << 62);
    bb_data(&b, 1, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'tokenizer.ggml.scores'", "array of 4611686018427387904 f32", "remain");
    free(b.p);
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.tokens"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_STRING); bb_u64(&b, UINT64_MAX);
    bb_data(&b, 1, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'tokenizer.ggml.tokens'", "strings", "expected at most");
    free(b.p);
    /* a string inside an array longer than the file */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.merges"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_STRING); bb_u64(&b, 2);
    bb_str(&b, "a b"); bb_u64(&b, 99); bb_put(&b, "c d", 3);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "tokenizer.ggml.merges", "string length 99");
    free(b.p);
}

static void test_bad_value_types(void **state) {
    (void)state;
    bb b = {0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "general.x"); bb_u32(&b, 13); bb_u32(&b, 0);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'general.x'", "value type 13", "expected 0..12");
    free(b.p);
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "general.x"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_ARRAY); bb_u64(&b, 1);
    bb_u32(&b, GGUF_T_U8); bb_u64(&b, 1); bb_put(&b, "x", 1);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'general.x'", "array of arrays");
    free(b.p);
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "general.x"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, 200); bb_u64(&b, 0);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'general.x'", "array element type 200");
    free(b.p);
    /* empty key, key with a NUL */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_u64(&b, 0); bb_u32(&b, GGUF_T_U8); bb_put(&b, "x", 1);
    bb_data(&b, 1, 8);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "metadata key 0 (counting from 0, of the 1 the count at byte 16 declares)", "empty name");
    free(b.p);
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_u64(&b, 3); bb_put(&b, "a\0b", 3); bb_u32(&b, GGUF_T_U8); bb_put(&b, "x", 1);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "metadata key 0 (counting from 0, of the 1 the count at byte 16 declares)", "NUL");
    free(b.p);
    /* names that are not UTF-8 (GGUF strings are; a name is printed in messages): a stray byte,
     * a truncated sequence, an overlong form, a surrogate; the message shows the valid part only */
    static const struct { const char *name; size_t n; const char *want; } bad_names[] = {
        {"general.\xeb" "x", 10, "byte 0xeb at offset 8 of 10, after 'general.'"},
        {"ab\xc3", 3, "byte 0xc3 at offset 2 of 3, after 'ab'"},
        {"a\xc0\xaf" "b", 4, "byte 0xc0 at offset 1 of 4, after 'a'"},
        {"\xed\xa0\x80", 3, "byte 0xed at offset 0 of 3, after ''"},
    };
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        b = (bb){0};
        bb_hdr(&b, 3, 0, 1);
        bb_u64(&b, bad_names[i].n); bb_put(&b, bad_names[i].name, bad_names[i].n); bb_u32(&b, GGUF_T_U8); bb_put(&b, "x", 1);
        EXPECT_FAIL(&b, TERN_E_FORMAT, "metadata key 0 (counting from 0, of the 1 the count at byte 16 declares)", "not valid UTF-8", bad_names[i].want);
        free(b.p);
    }
    b = (bb){0};                                       /* valid multi-byte UTF-8 is a name like any */
    bb_hdr(&b, 3, 0, 1);
    bb_u64(&b, 10); bb_put(&b, "general.\xc3\xa9", 10); bb_u32(&b, GGUF_T_U8); bb_put(&b, "x", 1);
    bb_data(&b, 1, 8);
    opened o;
    tern_err err = {0};
    if (open_bytes(&o, b.p, b.n, &err) != TERN_OK) fail_msg("a UTF-8 name refused: %s", err.msg);
    close_bytes(&o);
    free(b.p);
}

static void test_duplicate_key(void **state) {
    (void)state;
    bb b = {0};
    bb_hdr(&b, 3, 0, 3);
    bb_kv_u32(&b, "qwen3.block_count", 28);
    bb_kv_u32(&b, "other", 1);
    bb_kv_u32(&b, "qwen3.block_count", 29);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'qwen3.block_count'", "twice", "expected unique keys");
    free(b.p);
}

static void test_n_dims(void **state) {
    (void)state;
    const uint64_t ne[5] = {2, 2, 2, 2, 2};
    for (uint32_t nd = 0; nd <= 5; nd += 5) {
        bb b = {0};
        bb_hdr(&b, 3, 1, 0);
        bb_tinfo(&b, "blk.0.x", nd, ne, QT_F32, 0);
        bb_data(&b, 32, 256);
        char got[32];
        snprintf(got, sizeof got, "n_dims %u", nd);
        EXPECT_FAIL(&b, TERN_E_FORMAT, "'blk.0.x'", got, "expected 1..4");
        free(b.p);
    }
}

static void test_element_count_overflow(void **state) {
    (void)state;
    const uint64_t ne[4] = {1ull << 32, 1ull << 32, 1, 1};
    bb b = {0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "big", 2, ne, QT_F32, 0);
    bb_data(&b, 32, 32);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'big'", "element count overflows", "expected");
    free(b.p);
    const uint64_t ne0[1] = {0};
    b = (bb){0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "zero", 1, ne0, QT_F32, 0);
    bb_data(&b, 32, 32);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'zero'", "ne[0] = 0", "expected 1..");
    free(b.p);
    const uint64_t neg[1] = {1ull << 63};
    b = (bb){0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "neg", 1, neg, QT_F32, 0);
    bb_data(&b, 32, 32);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'neg'", "ne[0]");
    free(b.p);
}

static void test_byte_size_overflow(void **state) {
    (void)state;
    /* 2^62 elements fit int64, but 4 bytes each overflow 2^64 */
    const uint64_t ne[2] = {1ull << 31, 1ull << 31};
    bb b = {0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "huge", 2, ne, QT_F32, 0);
    bb_data(&b, 32, 32);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'huge'", "byte size overflows");
    free(b.p);
    /* fits in 64 bits but not in the file */
    const uint64_t ne2[2] = {1ull << 20, 1ull << 20};
    b = (bb){0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "large", 2, ne2, QT_F32, 0);
    bb_data(&b, 32, 32);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'large'", "the file is truncated", "bytes of data end at byte");
    free(b.p);
    /* row not a multiple of the block */
    const uint64_t ne3[2] = {100, 2};
    b = (bb){0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "rows", 2, ne3, QT_PQ2_0, 0);
    bb_data(&b, 32, 128);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'rows'", "not a multiple of the PQ2_0 block size 128");
    free(b.p);
}

static void test_unknown_type(void **state) {
    (void)state;
    const uint64_t ne[1] = {32};
    const uint32_t bad[] = {2, 12, 39, 144, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bb b = {0};
        bb_hdr(&b, 3, 1, 0);
        bb_tinfo(&b, "blk.1.ffn_up.weight", 1, ne, bad[i], 0);
        bb_data(&b, 32, 256);
        char got[32];
        snprintf(got, sizeof got, "type id %u unknown", bad[i]);
        EXPECT_FAIL(&b, TERN_E_UNSUPPORTED, "'blk.1.ffn_up.weight'", got, "expected F32");
        free(b.p);
    }
}

static void test_offset_misaligned(void **state) {
    (void)state;
    const uint64_t ne[1] = {8};
    bb b = {0};
    bb_hdr(&b, 3, 2, 0);
    bb_tinfo(&b, "a", 1, ne, QT_F32, 0);
    bb_tinfo(&b, "b", 1, ne, QT_F32, 48);
    bb_data(&b, 32, 128);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'b'", "offset 48 is misaligned", "expected a multiple of general.alignment 32");
    free(b.p);
}

static void test_offset_past_end(void **state) {
    (void)state;
    const uint64_t ne[1] = {8};
    bb b = {0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "w", 1, ne, QT_F32, 1ull << 40);
    bb_data(&b, 32, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'w'", "offset 1099511627776 is past the end", "expected at most 64");
    free(b.p);
    /* offset + size overflows u64 */
    b = (bb){0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "w", 1, ne, QT_F32, UINT64_MAX - 31);
    bb_data(&b, 32, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'w'", "past the end");
    free(b.p);
    /* starts inside, ends outside */
    b = (bb){0};
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "w", 1, ne, QT_F32, 32);
    bb_data(&b, 32, 48);
    {   /* 8 floats at data offset 32 end 16 bytes past the 48 of the data section, the file's last 48 */
        char e1[96], e2[96];
        snprintf(e1, sizeof e1, "its 32 bytes of data end at byte %zu of the file", b.n + 16);
        snprintf(e2, sizeof e2, "expected them within its %zu bytes: the file is truncated", b.n);
        EXPECT_FAIL(&b, TERN_E_FORMAT, "'w'", e1, e2);
    }
    free(b.p);
}

static void test_offset_overlap(void **state) {
    (void)state;
    const uint64_t ne16[1] = {16}, ne8[1] = {8};
    bb b = {0};
    bb_hdr(&b, 3, 3, 0);
    bb_tinfo(&b, "c", 1, ne8, QT_F32, 128);
    bb_tinfo(&b, "a", 1, ne16, QT_F32, 0);       /* [0, 64) */
    bb_tinfo(&b, "b", 1, ne16, QT_F32, 32);      /* [32, 96) overlaps a */
    bb_data(&b, 32, 160);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'a'", "overlaps tensor 'b'", "expected disjoint");
    free(b.p);
    /* the same offset twice */
    b = (bb){0};
    bb_hdr(&b, 3, 2, 0);
    bb_tinfo(&b, "a", 1, ne8, QT_F32, 0);
    bb_tinfo(&b, "b", 1, ne8, QT_F32, 0);
    bb_data(&b, 32, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "overlaps", "expected disjoint");
    free(b.p);
}

static void test_duplicate_tensor_name(void **state) {
    (void)state;
    const uint64_t ne[1] = {8};
    bb b = {0};
    bb_hdr(&b, 3, 3, 0);
    bb_tinfo(&b, "blk.0.attn_q.weight", 1, ne, QT_F32, 0);
    bb_tinfo(&b, "blk.0.attn_k.weight", 1, ne, QT_F32, 32);
    bb_tinfo(&b, "blk.0.attn_q.weight", 1, ne, QT_F32, 64);
    bb_data(&b, 32, 96);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'blk.0.attn_q.weight'", "twice", "infos 0 and 2", "expected unique names");
    free(b.p);
}

static void test_alignment_key(void **state) {
    (void)state;
    const uint64_t ne[1] = {8};
    const uint32_t vals[] = {0, 3, 48};
    for (size_t i = 0; i < 3; i++) {
        bb b = {0};
        bb_hdr(&b, 3, 1, 1);
        bb_kv_u32(&b, "general.alignment", vals[i]);
        bb_tinfo(&b, "w", 1, ne, QT_F32, 0);
        bb_data(&b, 64, 64);
        char got[32];
        snprintf(got, sizeof got, "value %u", vals[i]);
        EXPECT_FAIL(&b, TERN_E_FORMAT, "'general.alignment'", got, "expected a power of two");
        free(b.p);
    }
    bb b = {0};
    bb_hdr(&b, 3, 1, 1);
    bb_kv_i32(&b, "general.alignment", 64);
    bb_tinfo(&b, "w", 1, ne, QT_F32, 0);
    bb_data(&b, 64, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'general.alignment'", "type i32, expected u32");
    free(b.p);
    b = (bb){0};
    bb_hdr(&b, 3, 1, 1);
    bb_kv_str(&b, "general.alignment", "64");
    bb_tinfo(&b, "w", 1, ne, QT_F32, 0);
    bb_data(&b, 64, 64);
    EXPECT_FAIL(&b, TERN_E_FORMAT, "'general.alignment'", "type string, expected u32");
    free(b.p);
    /* a valid non-default alignment moves the data section */
    b = (bb){0};
    bb_hdr(&b, 3, 1, 1);
    bb_kv_u32(&b, "general.alignment", 256);
    bb_tinfo(&b, "w", 1, ne, QT_F32, 0);
    bb_data(&b, 256, 32);
    opened o;
    tern_err err = {0};
    assert_int_equal(open_bytes(&o, b.p, b.n, &err), TERN_OK);
    assert_int_equal(o.g->alignment, 256);
    assert_int_equal(o.g->data_offset, 256);
    close_bytes(&o);
    free(b.p);
}

/* A tokenizer file: n tokens (strings) plus extra kvs appended by the caller. */
static void bb_tok_header(bb *b, uint64_t n_extra_kv) {
    bb_hdr(b, 3, 0, 2 + n_extra_kv);
    bb_kv_str(b, "tokenizer.ggml.model", "gpt2");
    bb_str(b, "tokenizer.ggml.tokens"); bb_u32(b, GGUF_T_ARRAY); bb_u32(b, GGUF_T_STRING); bb_u64(b, 3);
    bb_str(b, "a"); bb_str(b, "b"); bb_str(b, "ab");
}

static void expect_tok_fail(const bb *b, const char *s1, const char *s2) {
    opened o;
    tern_err err = {0};
    assert_int_equal(open_bytes(&o, b->p, b->n, &err), TERN_OK);      /* container is fine */
    assert_int_equal(gguf_check_tokenizer(o.g, &err), TERN_E_FORMAT);
    if (!strstr(err.msg, s1) || !strstr(err.msg, s2)) fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", err.msg, s1, s2);
    close_bytes(&o);
}

static void test_tokenizer_arrays(void **state) {
    (void)state;
    /* valid */
    bb b = {0};
    bb_tok_header(&b, 1);
    bb_str(&b, "tokenizer.ggml.scores"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_F32); bb_u64(&b, 3);
    bb_u32(&b, 0); bb_u32(&b, 0); bb_u32(&b, 0);
    opened o;
    tern_err err = {0};
    assert_int_equal(open_bytes(&o, b.p, b.n, &err), TERN_OK);
    assert_int_equal(gguf_check_tokenizer(o.g, &err), TERN_OK);
    close_bytes(&o);
    free(b.p);
    /* tokens of the wrong element type */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.tokens"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_I32); bb_u64(&b, 2); bb_u32(&b, 1); bb_u32(&b, 2);
    expect_tok_fail(&b, "'tokenizer.ggml.tokens'", "array of i32, expected an array of string");
    free(b.p);
    /* tokens not an array */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_kv_str(&b, "tokenizer.ggml.tokens", "abc");
    expect_tok_fail(&b, "'tokenizer.ggml.tokens'", "type string, expected an array of string");
    free(b.p);
    /* scores: wrong length, wrong element type */
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_str(&b, "tokenizer.ggml.scores"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_F32); bb_u64(&b, 2); bb_u32(&b, 0); bb_u32(&b, 0);
    expect_tok_fail(&b, "'tokenizer.ggml.scores'", "2 entries, expected 3");
    free(b.p);
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_str(&b, "tokenizer.ggml.scores"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_I32); bb_u64(&b, 3); bb_u32(&b, 0); bb_u32(&b, 0); bb_u32(&b, 0);
    expect_tok_fail(&b, "'tokenizer.ggml.scores'", "array of i32, expected an array of f32");
    free(b.p);
    /* token_type: wrong length, wrong element type */
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_str(&b, "tokenizer.ggml.token_type"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_I32); bb_u64(&b, 4);
    for (int i = 0; i < 4; i++) bb_u32(&b, 1);
    expect_tok_fail(&b, "'tokenizer.ggml.token_type'", "4 entries, expected 3");
    free(b.p);
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_str(&b, "tokenizer.ggml.token_type"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_STRING); bb_u64(&b, 3);
    bb_str(&b, "1"); bb_str(&b, "1"); bb_str(&b, "1");
    expect_tok_fail(&b, "'tokenizer.ggml.token_type'", "expected an array of an integer");
    free(b.p);
    /* merges of the wrong element type */
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_str(&b, "tokenizer.ggml.merges"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_U8); bb_u64(&b, 1); bb_put(&b, "x", 1);
    expect_tok_fail(&b, "'tokenizer.ggml.merges'", "expected an array of string");
    free(b.p);
    /* pre of the wrong type */
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_kv_u32(&b, "tokenizer.ggml.pre", 2);
    expect_tok_fail(&b, "'tokenizer.ggml.pre'", "expected string");
    free(b.p);
    /* empty vocabulary */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.tokens"); bb_u32(&b, GGUF_T_ARRAY); bb_u32(&b, GGUF_T_STRING); bb_u64(&b, 0);
    expect_tok_fail(&b, "'tokenizer.ggml.tokens'", "0 tokens, expected 1..");
    free(b.p);
}

static void test_special_token_ids(void **state) {
    (void)state;
    bb b = {0};
    bb_tok_header(&b, 2);
    bb_kv_u32(&b, "tokenizer.ggml.bos_token_id", 2);
    bb_kv_u32(&b, "tokenizer.ggml.eos_token_id", 3);        /* n_tokens = 3: out of range */
    expect_tok_fail(&b, "'tokenizer.ggml.eos_token_id'", "token id 3 is outside the vocabulary, expected 0..2");
    free(b.p);
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_kv_i32(&b, "tokenizer.ggml.padding_token_id", -2);
    expect_tok_fail(&b, "'tokenizer.ggml.padding_token_id'", "token id -2 is outside the vocabulary");
    free(b.p);
    /* -1 and 0xFFFFFFFF mean "no such token" (llama.cpp convention; stories260K uses it) */
    b = (bb){0};
    bb_tok_header(&b, 3);
    bb_kv_i32(&b, "tokenizer.ggml.padding_token_id", -1);
    bb_kv_u32(&b, "tokenizer.ggml.seperator_token_id", 0xFFFFFFFFu);
    bb_kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    {
        opened o;
        tern_err err = {0};
        int32_t id;
        assert_int_equal(open_bytes(&o, b.p, b.n, &err), TERN_OK);
        assert_int_equal(gguf_check_tokenizer(o.g, &err), TERN_OK);
        assert_int_equal(gguf_get_token_id(o.g, "tokenizer.ggml.padding_token_id", 3, &id, &err), TERN_OK);
        assert_int_equal(id, -1);
        assert_int_equal(gguf_get_token_id(o.g, "tokenizer.ggml.seperator_token_id", 3, &id, &err), TERN_OK);
        assert_int_equal(id, -1);
        assert_int_equal(gguf_get_token_id(o.g, "tokenizer.ggml.eos_token_id", 3, &id, &err), TERN_OK);
        assert_int_equal(id, 2);
        assert_int_equal(gguf_get_token_id(o.g, "tokenizer.ggml.bos_token_id", 3, &id, &err), TERN_OK);
        assert_int_equal(id, -1);
        assert_int_equal(gguf_get_token_id(o.g, "tokenizer.ggml.eos_token_id", 2, &id, &err), TERN_E_FORMAT);
        close_bytes(&o);
    }
    free(b.p);
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_kv_str(&b, "tokenizer.ggml.eos_token_id", "2");
    expect_tok_fail(&b, "'tokenizer.ggml.eos_token_id'", "type string, expected an integer");
    free(b.p);
    /* an id without any vocabulary */
    b = (bb){0};
    bb_hdr(&b, 3, 0, 1);
    bb_kv_u32(&b, "tokenizer.ggml.eos_token_id", 0);
    expect_tok_fail(&b, "'tokenizer.ggml.eos_token_id'", "no tokenizer.ggml.tokens");
    free(b.p);
    b = (bb){0};
    bb_tok_header(&b, 1);
    bb_str(&b, "tokenizer.ggml.eos_token_id"); bb_u32(&b, GGUF_T_BOOL); bb_put(&b, "\1", 1);
    expect_tok_fail(&b, "'tokenizer.ggml.eos_token_id'", "type bool, expected an integer token id");
    free(b.p);
    /* the real stories260K vocabulary passes */
    char path[512];
    fx_require(path, sizeof path, "data/stories260k/stories260K.gguf");
    gguf_ctx *g;
    tern_err err = {0};
    assert_int_equal(gguf_open(&g, path, GGUF_LOAD_MMAP, &err), TERN_OK);
    assert_int_equal(gguf_check_tokenizer(g, &err), TERN_OK);
    gguf_close(g);
}

/* The real stories260K file: header facts from its PROVENANCE.md, both load modes. */
static void test_stories260k(void **state) {
    (void)state;
    char path[512];
    fx_require(path, sizeof path, "data/stories260k/stories260K.gguf");
    for (int mode = 0; mode < 2; mode++) {
        gguf_ctx *g;
        tern_err err = {0};
        if (gguf_open(&g, path, mode, &err) != TERN_OK) fail_msg("%s", err.msg);
        assert_int_equal(g->version, 3);
        assert_int_equal(g->n_kv, 19);
        assert_int_equal(g->n_tensors, 48);
        assert_int_equal(g->alignment, 32);
        assert_int_equal(g->size, 1185376);
        gguf_str s;
        assert_int_equal(gguf_get_str(g, "general.architecture", true, &s, &err), TERN_OK);
        assert_true(gguf_str_eq(s, "llama"));
        int64_t v;
        assert_int_equal(gguf_get_int(g, "llama.block_count", true, 0, &v, &err), TERN_OK);
        assert_true(v == 5);
        gguf_arr a;
        assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", true, &a, &err), TERN_OK);
        assert_int_equal(a.n, 512);
        assert_true(gguf_str_eq(a.strs[0], "<unk>") && gguf_str_eq(a.strs[1], "<s>") && gguf_str_eq(a.strs[3], "<0x00>"));
        const gguf_tensor *t = gguf_find_tensor(g, "blk.4.ffn_down.weight");
        assert_non_null(t);
        assert_true(t->ne[0] == 172 && t->ne[1] == 64 && t->type == QT_F32 && t->nbytes == 172 * 64 * 4);
        t = gguf_find_tensor(g, "token_embd.weight");
        assert_true(t->ne[0] == 64 && t->ne[1] == 512);
        uint64_t sum = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++) sum += g->tensors[i].nbytes;
        /* dim 64, 5 layers, kv 32, ff 172, vocab 512: 2*64*512 + 64 + 5*(64*64*2 + 64*32*2 + 3*64*172 + 2*64) */
        assert_int_equal(sum, 4 * (2 * 64 * 512 + 64 + 5 * (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 172 + 2 * 64)));
        gguf_close(g);
    }
}

int suite_gguf(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_valid),
        cmocka_unit_test(test_writer_roundtrip),
        cmocka_unit_test(test_q2_0_group_rule),
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_truncated_small_file),
        cmocka_unit_test(test_truncated_stories),
        cmocka_unit_test(test_kv_count_too_large),
        cmocka_unit_test(test_tensor_count_too_large),
        cmocka_unit_test(test_string_length_too_large),
        cmocka_unit_test(test_array_length_too_large),
        cmocka_unit_test(test_bad_value_types),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_n_dims),
        cmocka_unit_test(test_element_count_overflow),
        cmocka_unit_test(test_byte_size_overflow),
        cmocka_unit_test(test_unknown_type),
        cmocka_unit_test(test_offset_misaligned),
        cmocka_unit_test(test_offset_past_end),
        cmocka_unit_test(test_offset_overlap),
        cmocka_unit_test(test_duplicate_tensor_name),
        cmocka_unit_test(test_alignment_key),
        cmocka_unit_test(test_tokenizer_arrays),
        cmocka_unit_test(test_special_token_ids),
    };
    TEST_RUN_SUITE("gguf", tests);
}
