/* gguf.h: checked GGUF v3 (and v2) reader over a private mapping or a read() buffer, and a
 * streaming writer. Layer 2.
 * Source of truth: ../shared/spec/ternary-gguf.md section 1 (container), 3.3 (id-42 rule).
 * Every count, length, offset and size read from the file is checked (overflow-safe) against
 * the bytes that remain before it is used; a failure returns TERN_E_FORMAT with a message that
 * names the item, its byte offset, what was expected and what was found. */
#ifndef TERN_FORMAT_GGUF_H
#define TERN_FORMAT_GGUF_H

#include "core/core.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    GGUF_T_U8 = 0, GGUF_T_I8 = 1, GGUF_T_U16 = 2, GGUF_T_I16 = 3, GGUF_T_U32 = 4, GGUF_T_I32 = 5,
    GGUF_T_F32 = 6, GGUF_T_BOOL = 7, GGUF_T_STRING = 8, GGUF_T_ARRAY = 9, GGUF_T_U64 = 10,
    GGUF_T_I64 = 11, GGUF_T_F64 = 12,
} gguf_vtype;

/* A string inside the file buffer: not NUL-terminated; valid while the gguf_ctx is open. */
typedef struct { const char *p; uint64_t n; } gguf_str;

/* An array value. For GGUF_T_STRING elements, strs[i] indexes every element (built at open). */
typedef struct {
    gguf_vtype type;       /* element type (never ARRAY: nested arrays are rejected) */
    uint64_t n;            /* element count */
    const uint8_t *data;   /* first element in the file buffer (unaligned, little-endian) */
    const gguf_str *strs;  /* n entries when type == GGUF_T_STRING, else NULL */
} gguf_arr;

typedef struct {
    char *key;             /* NUL-terminated copy (owned by the ctx) */
    gguf_vtype type;
    union { uint64_t u; int64_t i; double f; bool b; gguf_str s; gguf_arr a; } v;
} gguf_kv;

typedef struct {
    char *name;            /* NUL-terminated copy (owned by the ctx) */
    int n_dims;            /* 1..4 */
    int64_t ne[4];         /* ne[0] = row length (K), ne[1] = rows (N); unused dims = 1 */
    int type;              /* ggml type id; a legacy group-128 id-42 tensor is reported as QT_PQ2_0.
                              Spec 3.3 rule: the size (group 64: n/64*18, group 128: n/128*34) that
                              fits the space to the next tensor (or file end) with less than one
                              alignment of slack wins; both or neither fitting refuses the file, so
                              an id-42 tensor needs n >= 64 * alignment elements (2048 at the default
                              32) to be unambiguous */
    int file_type;         /* the id exactly as stored in the file */
    uint64_t offset;       /* relative to the data section */
    uint64_t nbytes;
    uint8_t *data;         /* in the buffer; writable (private mapping or owned buffer) so the
                              loader can repack in place */
} gguf_tensor;

enum { GGUF_LOAD_READ = 0, GGUF_LOAD_MMAP = 1 };

typedef struct gguf_ctx {
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;    /* general.alignment or 32 */
    uint64_t data_offset;  /* start of the tensor data section in the file */
    uint8_t *buf;          /* whole file */
    uint64_t size;
    int mode;              /* GGUF_LOAD_READ (owned malloc'd buffer), GGUF_LOAD_MMAP, or -1 (borrowed) */
} gguf_ctx;

/* Open and validate a file. mode: GGUF_LOAD_READ reads the whole file into anonymous memory
 * (huge-page advised); GGUF_LOAD_MMAP maps it MAP_PRIVATE (copy-on-write, so in-place repack
 * never writes the file; on Windows it reads, as GGUF_LOAD_READ, and pub.mode says so). *out owned by the caller (gguf_close). Errors: TERN_E_IO, TERN_E_FORMAT,
 * TERN_E_UNSUPPORTED (unknown tensor type id), TERN_E_NOMEM. */
int gguf_open(gguf_ctx **out, const char *path, int mode, tern_err *err);
/* Same over a caller's buffer (borrowed, must outlive the ctx; tensor data pointers point into
 * it, so it must be writable if the caller repacks). Used by tests and the fuzzer. */
int gguf_open_mem(gguf_ctx **out, uint8_t *buf, uint64_t len, tern_err *err);
void gguf_close(gguf_ctx *g);

/* Lookups (hashed, O(1); NULL when absent or g is NULL). Pointers stay valid until gguf_close. */
const gguf_kv *gguf_find_kv(const gguf_ctx *g, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_ctx *g, const char *name);

/* Typed getters. When the key is absent: *out = def (or empty) and TERN_OK if !required, else
 * TERN_E_FORMAT "missing key 'k'". Present with the wrong type: TERN_E_FORMAT naming the key,
 * the expected and the found type.
 * gguf_get_int accepts every integer type and bool; gguf_get_float accepts f32/f64 and integers. */
int gguf_get_int(const gguf_ctx *g, const char *key, bool required, int64_t def, int64_t *out, tern_err *err);
int gguf_get_float(const gguf_ctx *g, const char *key, bool required, double def, double *out, tern_err *err);
int gguf_get_bool(const gguf_ctx *g, const char *key, bool required, bool def, bool *out, tern_err *err);
int gguf_get_str(const gguf_ctx *g, const char *key, bool required, gguf_str *out, tern_err *err);
int gguf_get_arr(const gguf_ctx *g, const char *key, bool required, gguf_arr *out, tern_err *err);
/* Array element access (i < a->n; caller checks the element type class first). */
bool gguf_arr_is_int(const gguf_arr *a);
int64_t gguf_arr_int(const gguf_arr *a, uint64_t i);    /* integer element types and bool (u64 above
                                                           INT64_MAX saturates; f32/f64 truncate, NaN -> 0) */
double gguf_arr_float(const gguf_arr *a, uint64_t i);   /* f32/f64 and integers */
/* Validate the tokenizer metadata, if any (the tokenizer loader calls this before reading the
 * arrays): tokenizer.ggml.tokens an array of strings (1..2^31-1 entries); scores (f32) and
 * token_type (any integer type) arrays, when present, with exactly one entry per token; merges
 * an array of strings; model, pre and tokenizer.chat_template strings; every
 * tokenizer.ggml.*_token_id an integer in [0, n_tokens). A file without tokenizer.ggml.tokens
 * passes if it has none of the per-token arrays or ids. Returns TERN_OK or TERN_E_FORMAT
 * naming the key, the expected and the found type/length/value. */
int gguf_check_tokenizer(const gguf_ctx *g, tern_err *err);
/* A special token id key (e.g. "tokenizer.ggml.eos_token_id"): *out = the id, or -1 when the key
 * is absent or holds the "none" marker (-1 in a signed type, 0xFFFFFFFF as u32, as llama.cpp
 * writes for absent tokens; stories260K has two). Any integer type is accepted. TERN_E_FORMAT
 * (naming key, value and the valid range) for another type or an id outside [0, n_vocab);
 * n_vocab = 0 means the file has no vocabulary, so any real id is an error. */
int gguf_get_token_id(const gguf_ctx *g, const char *key, uint64_t n_vocab, int32_t *out, tern_err *err);
/* Compare a gguf_str with a C string. */
bool gguf_str_eq(gguf_str s, const char *c);
const char *gguf_vtype_name(gguf_vtype t);

/* ---- writer ---------------------------------------------------------------------------------
 * Usage: gguf_w_init; gguf_w_set_* for metadata; gguf_w_add_tensor for each tensor (name, type,
 * shape; data pointer optional); then either gguf_w_write_file (all data pointers given), or
 * streaming: gguf_w_begin(path) writes header + tensor infos, gguf_w_tensor_data(w, i, ...)
 * appends tensor i's bytes in order (may be called several times per tensor; padding is added
 * when a tensor is complete, also after the last one, as llama.cpp's writer does), gguf_w_end
 * closes. Streaming keeps memory bounded (27B synth). Tensors are laid out in the order added,
 * each at an offset aligned to the alignment (default 32; gguf_w_set_alignment also writes the
 * general.alignment key). The set functions copy their arguments, replace an earlier value of
 * the same key, and return TERN_OK, TERN_E_ARG (bad argument, or called after begin) or
 * TERN_E_NOMEM; gguf_w_add_tensor refuses unknown types, n_dims outside 1..4, ne[0] not a
 * multiple of the block, overflowing sizes and duplicate names with TERN_E_ARG. The writer
 * writes GGUF v3, little-endian. */
typedef struct gguf_writer gguf_writer;
int gguf_w_init(gguf_writer **out, tern_err *err);
void gguf_w_free(gguf_writer *w);
int gguf_w_set_alignment(gguf_writer *w, uint32_t alignment);
int gguf_w_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_w_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_w_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_w_set_f32(gguf_writer *w, const char *key, float v);
int gguf_w_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_w_set_str(gguf_writer *w, const char *key, const char *v);
/* Numeric/bool array: n elements of elem_type, copied. */
int gguf_w_set_arr(gguf_writer *w, const char *key, gguf_vtype elem_type, const void *data, uint64_t n);
/* String array: n strings with explicit lengths (may contain NUL), copied. */
int gguf_w_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, const uint64_t *lens, uint64_t n);
/* Add a tensor info; data may be NULL for streaming. Returns its index (>= 0) or a TERN_E_*. */
int gguf_w_add_tensor(gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne, const void *data);
int gguf_w_write_file(gguf_writer *w, const char *path, tern_err *err);
int gguf_w_begin(gguf_writer *w, const char *path, tern_err *err);
int gguf_w_tensor_data(gguf_writer *w, int idx, const void *data, uint64_t nbytes, tern_err *err);
int gguf_w_end(gguf_writer *w, tern_err *err);
/* Ends a streamed file without writing the remaining tensor data: the file is extended with
 * ftruncate to its full size, so unwritten tensors read as zeros and take no disk space
 * (a sparse hole). For header-only fixtures (27B tensor table) and `synth --no-weights`. */
int gguf_w_end_sparse(gguf_writer *w, tern_err *err);

#endif /* TERN_FORMAT_GGUF_H */
