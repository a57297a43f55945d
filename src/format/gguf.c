/* gguf.c: checked GGUF v3 (v2 accepted) reader over a read() buffer or a private mapping, the
 * tokenizer-array validator, and the streaming writer. Layer 2.
 * Source of truth: ../shared/spec/ternary-gguf.md section 1 (container) and 3.3 (id-42 rule).
 * Invariants of the reader: every count, length, offset and size from the file is checked
 * against the bytes that remain before it is used (with overflow-safe arithmetic), so every
 * allocation is bounded by a small multiple of the file size; the first error wins and names
 * the item, its byte offset, what was expected and what was found. After a successful open:
 * keys and tensor names are unique, NUL-free and NUL-terminated copies; every tensor's bytes
 * [data, data + nbytes) lie inside the buffer, are aligned to general.alignment relative to
 * the data section, and do not overlap. */
#include "format/gguf.h"

#include "format/qtypes.h"
#include "core/os.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Internal context: the public struct first, then the name indexes. */
typedef struct {
    gguf_ctx pub;
    uint32_t *kv_hash;      /* open addressing, index + 1 (0 = empty); capacity kv_cap (pow2) */
    uint64_t kv_cap;
    uint32_t *t_hash;
    uint64_t t_cap;
} ctx_impl;

static const uint8_t MAGIC[4] = {'G', 'G', 'U', 'F'};

const char *gguf_vtype_name(gguf_vtype t) {
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                        "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "invalid";
}

static int vtype_size(uint32_t t) {          /* bytes of a scalar value; 0 for string/array/bad */
    switch (t) {
    case GGUF_T_U8: case GGUF_T_I8: case GGUF_T_BOOL: return 1;
    case GGUF_T_U16: case GGUF_T_I16: return 2;
    case GGUF_T_U32: case GGUF_T_I32: case GGUF_T_F32: return 4;
    case GGUF_T_U64: case GGUF_T_I64: case GGUF_T_F64: return 8;
    default: return 0;
    }
}

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24); }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32); }

/* ---- name index ------------------------------------------------------------------------------ */

static uint64_t hash_name(const char *s) {               /* FNV-1a 64 */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Build an index over n names; *dup = index of the first name equal to an earlier one, or -1. */
static uint32_t *index_build(uint64_t n, const char *(*name_of)(const void *, uint64_t), const void *arr,
                             uint64_t *cap_out, int64_t *dup, int64_t *dup_first) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint32_t *h = calloc(cap, sizeof *h);
    *dup = -1;
    if (!h) return NULL;
    for (uint64_t i = 0; i < n; i++) {
        const char *nm = name_of(arr, i);
        uint64_t s = hash_name(nm) & (cap - 1);
        while (h[s]) {
            if (strcmp(name_of(arr, h[s] - 1), nm) == 0) {
                if (*dup < 0) { *dup = (int64_t)i; *dup_first = (int64_t)h[s] - 1; }
                goto next;
            }
            s = (s + 1) & (cap - 1);
        }
        h[s] = (uint32_t)(i + 1);
    next:;
    }
    *cap_out = cap;
    return h;
}

static int64_t index_find(const uint32_t *h, uint64_t cap, const char *(*name_of)(const void *, uint64_t),
                          const void *arr, const char *nm) {
    if (!h || !nm) return -1;
    uint64_t s = hash_name(nm) & (cap - 1);
    while (h[s]) {
        if (strcmp(name_of(arr, h[s] - 1), nm) == 0) return (int64_t)h[s] - 1;
        s = (s + 1) & (cap - 1);
    }
    return -1;
}

static const char *kv_name(const void *a, uint64_t i) { return ((const gguf_kv *)a)[i].key; }
static const char *t_name(const void *a, uint64_t i) { return ((const gguf_tensor *)a)[i].name; }

/* ---- checked byte reader --------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    uint64_t len, off;     /* invariant: off <= len */
    tern_err *err;
    int code;              /* sticky: first error */
} rd;

#if defined(__GNUC__)
__attribute__((format(TERN_PRINTF_FMT, 3, 4)))
#endif
static bool rd_fail(rd *r, int code, const char *fmt, ...) {
    if (r->code < 0) return false;
    r->code = code;
    if (r->err && r->err->code >= 0) {
        char msg[sizeof r->err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        tern_err_set(r->err, code, "%s", msg);
    }
    return false;
}

static bool rd_need(rd *r, uint64_t n, const char *what) {
    if (r->code < 0) return false;
    if (n > r->len - r->off)
        return rd_fail(r, TERN_E_FORMAT, "GGUF truncated: %s at byte %" PRIu64 " needs %" PRIu64 " bytes, expected them in the file, got %" PRIu64 " (file size %" PRIu64 ")",
                       what, r->off, n, r->len - r->off, r->len);
    return true;
}

static bool rd_u32(rd *r, uint32_t *v, const char *what) {
    if (!rd_need(r, 4, what)) return false;
    *v = le32(r->p + r->off);
    r->off += 4;
    return true;
}

static bool rd_u64(rd *r, uint64_t *v, const char *what) {
    if (!rd_need(r, 8, what)) return false;
    *v = le64(r->p + r->off);
    r->off += 8;
    return true;
}

/* A GGUF string (u64 length + bytes), kept as a pointer into the buffer. */
static bool rd_str(rd *r, gguf_str *s, const char *what) {
    uint64_t n;
    const uint64_t at = r->off;
    if (!rd_u64(r, &n, what)) return false;
    if (n > r->len - r->off)
        return rd_fail(r, TERN_E_FORMAT, "GGUF: %s at byte %" PRIu64 ": string length %" PRIu64 ", expected at most the %" PRIu64 " bytes that remain "
                       "of this %" PRIu64 "-byte file (truncated, or the length is damaged)", what, at, n, r->len - r->off, r->len);
    s->p = (const char *)r->p + r->off;
    s->n = n;
    r->off += n;
    return true;
}

/* A name (key or tensor name): non-empty, no NUL, UTF-8 (GGUF strings are; a name is printed in
 * messages); returns a NUL-terminated copy or NULL. Messages name entry idx of the count the header
 * declares at byte count_at: a damaged count that still fits the file is found only here, where
 * the entries past the real ones read other bytes as names. */
static char *rd_name(rd *r, const char *what, uint64_t idx, uint64_t count, int count_at) {
    gguf_str s;
    const uint64_t at = r->off;
    char whatbuf[128];
    snprintf(whatbuf, sizeof whatbuf, "%s %" PRIu64 " (counting from 0, of the %" PRIu64 " the count at byte %d declares)",
             what, idx, count, count_at);
    if (!rd_str(r, &s, whatbuf)) return NULL;
    if (s.n == 0) { rd_fail(r, TERN_E_FORMAT, "GGUF: %s at byte %" PRIu64 ": empty name, expected at least 1 byte", whatbuf, at); return NULL; }
    if (memchr(s.p, 0, s.n)) {
        rd_fail(r, TERN_E_FORMAT, "GGUF: %s at byte %" PRIu64 ": name contains a NUL byte, expected none", whatbuf, at);
        return NULL;
    }
    const uint64_t ok = tern_utf8_valid_len(s.p, (size_t)s.n);   /* s.n <= the file size */
    if (ok < s.n) {
        const int shown = (int)(ok < 48 ? ok : 48);
        rd_fail(r, TERN_E_FORMAT, "GGUF: %s at byte %" PRIu64 ": name is not valid UTF-8 (byte 0x%02x at offset %" PRIu64
                " of %" PRIu64 ", after '%.*s'), expected UTF-8 text", whatbuf, at, (unsigned)(uint8_t)s.p[ok], ok, s.n, shown,
                s.p + (ok - (uint64_t)shown));
        return NULL;
    }
    char *c = malloc(s.n + 1);
    if (!c) { rd_fail(r, TERN_E_NOMEM, "GGUF: %s: out of memory copying a %" PRIu64 "-byte name", whatbuf, s.n); return NULL; }
    memcpy(c, s.p, s.n);
    c[s.n] = '\0';
    return c;
}

/* One metadata value of type t for key (already read). */
static bool rd_value(rd *r, gguf_kv *kv, uint64_t type_at) {
    const uint32_t t = kv->type;
    const uint8_t *p;
    switch (t) {
    case GGUF_T_STRING: return rd_str(r, &kv->v.s, kv->key);
    case GGUF_T_ARRAY: {
        uint32_t et;
        uint64_t n;
        const uint64_t at = r->off;
        if (!rd_u32(r, &et, kv->key) || !rd_u64(r, &n, kv->key)) return false;
        if (et == GGUF_T_ARRAY)
            return rd_fail(r, TERN_E_FORMAT, "GGUF key '%s' at byte %" PRIu64 ": array of arrays, expected an array of scalars or strings", kv->key, at);
        if (et != GGUF_T_STRING && vtype_size(et) == 0)
            return rd_fail(r, TERN_E_FORMAT, "GGUF key '%s' at byte %" PRIu64 ": array element type %" PRIu32 ", expected 0..12", kv->key, at, et);
        kv->v.a.type = (gguf_vtype)et;
        kv->v.a.n = n;
        kv->v.a.data = r->p + r->off;
        if (et == GGUF_T_STRING) {
            if (n > (r->len - r->off) / 8)
                return rd_fail(r, TERN_E_FORMAT, "GGUF key '%s' at byte %" PRIu64 ": array of %" PRIu64 " strings needs at least %" PRIu64 " bytes, expected at most the %" PRIu64 " that remain "
                               "of this %" PRIu64 "-byte file (truncated, or the count is damaged)",
                               kv->key, at, n, n > UINT64_MAX / 8 ? UINT64_MAX : n * 8, r->len - r->off, r->len);
            gguf_str *strs = n ? calloc(n, sizeof *strs) : NULL;
            if (n && !strs) return rd_fail(r, TERN_E_NOMEM, "GGUF key '%s': out of memory for %" PRIu64 " string entries", kv->key, n);
            kv->v.a.strs = strs;
            for (uint64_t i = 0; i < n; i++)
                if (!rd_str(r, &strs[i], kv->key)) return false;
            return true;
        }
        const uint64_t es = (uint64_t)vtype_size(et);
        if (n > (r->len - r->off) / es)
            return rd_fail(r, TERN_E_FORMAT, "GGUF key '%s' at byte %" PRIu64 ": array of %" PRIu64 " %s needs %" PRIu64 "%s bytes, expected at most the %" PRIu64 " bytes that remain "
                           "of this %" PRIu64 "-byte file (truncated, or the count is damaged)",
                           kv->key, at, n, gguf_vtype_name((gguf_vtype)et), n > UINT64_MAX / es ? UINT64_MAX : n * es,
                           n > UINT64_MAX / es ? "+" : "", r->len - r->off, r->len);
        r->off += n * es;
        return true;
    }
    default: break;
    }
    const int sz = vtype_size(t);
    if (sz == 0)
        return rd_fail(r, TERN_E_FORMAT, "GGUF key '%s' at byte %" PRIu64 ": value type %" PRIu32 ", expected 0..12", kv->key, type_at, t);
    if (!rd_need(r, (uint64_t)sz, kv->key)) return false;
    p = r->p + r->off;
    r->off += (uint64_t)sz;
    switch (t) {
    case GGUF_T_U8: kv->v.u = p[0]; break;
    case GGUF_T_I8: kv->v.i = (int8_t)p[0]; break;
    case GGUF_T_U16: kv->v.u = le16(p); break;
    case GGUF_T_I16: kv->v.i = (int16_t)le16(p); break;
    case GGUF_T_U32: kv->v.u = le32(p); break;
    case GGUF_T_I32: kv->v.i = (int32_t)le32(p); break;
    case GGUF_T_U64: kv->v.u = le64(p); break;
    case GGUF_T_I64: kv->v.i = (int64_t)le64(p); break;
    case GGUF_T_BOOL: kv->v.b = p[0] != 0; break;
    case GGUF_T_F32: { uint32_t u = le32(p); float f; memcpy(&f, &u, 4); kv->v.f = f; break; }
    case GGUF_T_F64: { uint64_t u = le64(p); memcpy(&kv->v.f, &u, 8); break; }
    default: break;
    }
    return true;
}

static const char *type_list(void) {
    return "F32, F16, BF16, Q8_0, Q1_0, Q2_0, PQ2_0, PTQ1_0, TQ1_0 or TQ2_0";
}

/* Tensor info i (starting at byte `at`). */
static bool rd_tensor(rd *r, gguf_tensor *t, uint64_t i, uint64_t n_tensors, uint64_t alignment) {
    const uint64_t at = r->off;
    t->name = rd_name(r, "tensor name", i, n_tensors, 8);
    if (!t->name) return false;
    uint32_t nd;
    if (!rd_u32(r, &nd, t->name)) return false;
    if (nd < 1 || nd > 4)
        return rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s' (info %" PRIu64 " at byte %" PRIu64 "): n_dims %" PRIu32 ", expected 1..4", t->name, i, at, nd);
    t->n_dims = (int)nd;
    uint64_t n_el = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t ne;
        if (!rd_u64(r, &ne, t->name)) return false;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s' (info %" PRIu64 " at byte %" PRIu64 "): ne[%" PRIu32 "] = %" PRIu64 ", expected 1..2^63-1", t->name, i, at, d, ne);
        if (!ck_mul_u64(n_el, ne, &n_el) || n_el > (uint64_t)INT64_MAX)
            return rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s' (info %" PRIu64 " at byte %" PRIu64 "): element count overflows at ne[%" PRIu32 "] = %" PRIu64 ", expected a product below 2^63", t->name, i, at, d, ne);
        t->ne[d] = (int64_t)ne;
    }
    uint32_t ty;
    if (!rd_u32(r, &ty, t->name)) return false;
    const qt_traits *tr = qt_get((int)ty);
    if (ty > 0xffff || !tr)
        return rd_fail(r, TERN_E_UNSUPPORTED, "GGUF tensor '%s' (info %" PRIu64 " at byte %" PRIu64 "): type id %" PRIu32 " unknown, expected %s", t->name, i, at, ty, type_list());
    t->type = t->file_type = (int)ty;
    uint64_t row;
    if ((uint64_t)t->ne[0] % (uint64_t)tr->block != 0)
        return rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s' (info %" PRIu64 " at byte %" PRIu64 "): ne[0] = %" PRId64 " is not a multiple of the %s block size %d", t->name, i, at, t->ne[0], tr->name, tr->block);
    if (!qt_row_bytes((int)ty, (uint64_t)t->ne[0], &row) || !ck_mul_u64(row, n_el / (uint64_t)t->ne[0], &t->nbytes))
        return rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s' (info %" PRIu64 " at byte %" PRIu64 "): byte size overflows (%" PRIu64 " elements of %s), expected below 2^64", t->name, i, at, n_el, tr->name);
    if (!rd_u64(r, &t->offset, t->name)) return false;
    if (t->offset % alignment != 0)
        return rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s' (info %" PRIu64 " at byte %" PRIu64 "): data offset %" PRIu64 " is misaligned, expected a multiple of general.alignment %" PRIu64, t->name, i, at, t->offset, alignment);
    return true;
}

/* A tensor's data offset and index, sorted by offset then index: the sort key travels with the
 * element, so the comparison needs no shared state (qsort has no context argument in C11, and a
 * file-scope pointer would be shared by threads opening files at once). */
typedef struct {
    uint64_t offset;
    uint32_t index;
} tensor_at;
static int cmp_offset(const void *a, const void *b) {
    const tensor_at *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Place tensors in the data section: resolve id-42 group size (spec 3.3), then check bounds and
 * overlaps in offset order. */
static bool place_tensors(rd *r, gguf_ctx *g) {
    const uint64_t n = g->n_tensors, data_size = g->size - g->data_offset;
    if (n == 0) return true;
    tensor_at *ord = malloc(n * sizeof *ord);
    if (!ord) return rd_fail(r, TERN_E_NOMEM, "GGUF: out of memory sorting %" PRIu64 " tensors", n);
    for (uint64_t i = 0; i < n; i++) ord[i] = (tensor_at){g->tensors[i].offset, (uint32_t)i};
    qsort(ord, n, sizeof *ord, cmp_offset);
    bool ok = true;
    for (uint64_t k = 0; k < n && ok; k++) {
        gguf_tensor *t = &g->tensors[ord[k].index];
        const uint64_t end_avail = k + 1 < n ? g->tensors[ord[k + 1].index].offset : data_size;
        if (t->offset > data_size) {
            ok = rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s': data offset %" PRIu64 " is past the end of the data section, expected at most %" PRIu64 " (file size %" PRIu64 ", data starts at byte %" PRIu64 ")",
                         t->name, t->offset, data_size, g->size, g->data_offset);
            break;
        }
        if (t->file_type == QT_Q2_0) {
            const uint64_t gap = (end_avail < t->offset ? 0 : end_avail - t->offset);
            const uint64_t s64 = t->nbytes;
            uint64_t n_el = 1, s128 = 0;
            for (int d = 0; d < 4; d++) n_el *= (uint64_t)t->ne[d];        /* checked at read */
            const bool can128 = (uint64_t)t->ne[0] % 128 == 0 && qt_row_bytes(QT_PQ2_0, (uint64_t)t->ne[0], &s128) &&
                                ck_mul_u64(s128, n_el / (uint64_t)t->ne[0], &s128);
            const bool fit64 = s64 <= gap && gap - s64 < g->alignment;
            const bool fit128 = can128 && s128 <= gap && gap - s128 < g->alignment;
            if (fit64 == fit128) {
                ok = rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s': type Q2_0 (id 42) with %" PRIu64 " elements is %" PRIu64 " bytes in group-64 blocks or %" PRIu64 " bytes in group-128 blocks; "
                             "%" PRIu64 " bytes are available to the %s (alignment %" PRIu64 "): expected exactly one to fit, got %s",
                             t->name, n_el, s64, can128 ? s128 : 0, gap, k + 1 < n ? "next tensor" : "end of file", g->alignment, fit64 ? "both" : "neither");
                break;
            }
            if (fit128) { t->type = QT_PQ2_0; t->nbytes = s128; }
        }
        uint64_t end = 0, fend = 0;
        const bool sum_ok = ck_add_u64(t->offset, t->nbytes, &end);
        if (!sum_ok || end > data_size) {
            /* in file bytes (the data section starts at data_offset), unless the sum wraps */
            if (sum_ok && ck_add_u64(end, g->data_offset, &fend))
                ok = rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s': its %" PRIu64 " bytes of data end at byte %" PRIu64 " of the file, "
                             "expected them within its %" PRIu64 " bytes: the file is truncated (or the tensor's offset is damaged)",
                             t->name, t->nbytes, fend, g->size);
            else
                ok = rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s': data offset %" PRIu64 " + %" PRIu64 " bytes overflows, expected "
                             "it within the file's %" PRIu64 " bytes", t->name, t->offset, t->nbytes, g->size);
            break;
        }
        if (k + 1 < n && end > g->tensors[ord[k + 1].index].offset) {
            const gguf_tensor *u = &g->tensors[ord[k + 1].index];
            ok = rd_fail(r, TERN_E_FORMAT, "GGUF tensor '%s': data [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' at offset %" PRIu64 ", expected disjoint ranges",
                         t->name, t->offset, end, u->name, u->offset);
            break;
        }
        t->data = g->buf + g->data_offset + t->offset;
    }
    free(ord);
    return ok;
}

static int parse(ctx_impl *c, tern_err *err) {
    gguf_ctx *g = &c->pub;
    rd r = {g->buf, g->size, 0, err, 0};
    rd *R = &r;
    if (!rd_need(R, 4, "magic")) return r.code;
    if (memcmp(g->buf, MAGIC, 4) != 0)
        return rd_fail(R, TERN_E_FORMAT, "GGUF magic at byte 0: got %02x %02x %02x %02x, expected 47 47 55 46 (\"GGUF\")",
                       g->buf[0], g->buf[1], g->buf[2], g->buf[3]), r.code;
    r.off = 4;
    if (!rd_u32(R, &g->version, "version")) return r.code;
    if (g->version != 2 && g->version != 3) {
        const bool be = g->version == 0x02000000u || g->version == 0x03000000u;
        return rd_fail(R, TERN_E_UNSUPPORTED, "GGUF version at byte 4: got %" PRIu32 "%s, expected 2 or 3", g->version,
                       be ? " (a big-endian file)" : ""), r.code;
    }
    if (!rd_u64(R, &g->n_tensors, "tensor count") || !rd_u64(R, &g->n_kv, "metadata count")) return r.code;
    /* Smallest possible entries: kv = 8 (key len) + 1 (key) + 4 (type) + 1 (u8);
     * tensor info = 8 + 1 + 4 (n_dims) + 8 (ne[0]) + 4 (type) + 8 (offset). */
    const uint64_t left = r.len - r.off;
    if (g->n_kv > left / 14)
        return rd_fail(R, TERN_E_FORMAT, "GGUF metadata count at byte 16: %" PRIu64 " pairs, expected at most %" PRIu64 ": at 14+ bytes each they do not fit in the %" PRIu64 "-byte file (truncated, or the count is damaged)",
                       g->n_kv, left / 14, (uint64_t)r.len), r.code;
    if (g->n_tensors > (left - g->n_kv * 14) / 33 || g->n_tensors > UINT32_MAX - 1)
        return rd_fail(R, TERN_E_FORMAT, "GGUF tensor count at byte 8: %" PRIu64 " tensors, expected at most %" PRIu64 ": their infos (33+ bytes each) and the %" PRIu64 " metadata pairs do not fit in the %" PRIu64 "-byte file (truncated, or the count is damaged)",
                       g->n_tensors, (left - g->n_kv * 14) / 33, g->n_kv, (uint64_t)r.len), r.code;
    if (g->n_kv > UINT32_MAX - 1)
        return rd_fail(R, TERN_E_FORMAT, "GGUF metadata count: %" PRIu64 ", expected fewer than 2^32", g->n_kv), r.code;
    g->kv = g->n_kv ? calloc(g->n_kv, sizeof *g->kv) : NULL;
    g->tensors = g->n_tensors ? calloc(g->n_tensors, sizeof *g->tensors) : NULL;
    if ((g->n_kv && !g->kv) || (g->n_tensors && !g->tensors))
        return rd_fail(R, TERN_E_NOMEM, "GGUF: out of memory for %" PRIu64 " metadata pairs and %" PRIu64 " tensor infos", g->n_kv, g->n_tensors), r.code;

    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        kv->key = rd_name(R, "metadata key", i, g->n_kv, 16);
        if (!kv->key) return r.code;
        const uint64_t type_at = r.off;
        uint32_t t;
        if (!rd_u32(R, &t, kv->key)) return r.code;
        kv->type = (gguf_vtype)t;
        if (!rd_value(R, kv, type_at)) return r.code;
    }
    int64_t dup, first = -1;
    c->kv_hash = index_build(g->n_kv, kv_name, g->kv, &c->kv_cap, &dup, &first);
    if (!c->kv_hash) return rd_fail(R, TERN_E_NOMEM, "GGUF: out of memory indexing %" PRIu64 " keys", g->n_kv), r.code;
    if (dup >= 0)
        return rd_fail(R, TERN_E_FORMAT, "GGUF metadata key '%s' appears twice (pairs %" PRId64 " and %" PRId64 "), expected unique keys", g->kv[dup].key, first, dup), r.code;

    g->alignment = 32;
    const gguf_kv *al = gguf_find_kv(g, "general.alignment");
    if (al) {
        if (al->type != GGUF_T_U32)
            return rd_fail(R, TERN_E_FORMAT, "GGUF key 'general.alignment': type %s, expected u32", gguf_vtype_name(al->type)), r.code;
        if (al->v.u == 0 || (al->v.u & (al->v.u - 1)) != 0)
            return rd_fail(R, TERN_E_FORMAT, "GGUF key 'general.alignment': value %" PRIu64 ", expected a power of two", al->v.u), r.code;
        g->alignment = al->v.u;
    }

    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!rd_tensor(R, &g->tensors[i], i, g->n_tensors, g->alignment)) return r.code;
    c->t_hash = index_build(g->n_tensors, t_name, g->tensors, &c->t_cap, &dup, &first);
    if (!c->t_hash) return rd_fail(R, TERN_E_NOMEM, "GGUF: out of memory indexing %" PRIu64 " tensors", g->n_tensors), r.code;
    if (dup >= 0)
        return rd_fail(R, TERN_E_FORMAT, "GGUF tensor name '%s' appears twice (infos %" PRId64 " and %" PRId64 "), expected unique names", g->tensors[dup].name, first, dup), r.code;

    /* data section: header end padded to the alignment */
    const uint64_t pad = (g->alignment - r.off % g->alignment) % g->alignment;
    if (pad > r.len - r.off) {
        if (g->n_tensors > 0)
            return rd_fail(R, TERN_E_FORMAT, "GGUF truncated: padding to alignment %" PRIu64 " after the header (byte %" PRIu64 ") needs %" PRIu64 " bytes, got %" PRIu64,
                           g->alignment, r.off, pad, r.len - r.off), r.code;
        g->data_offset = r.len;
    } else {
        g->data_offset = r.off + pad;
    }
    if (!place_tensors(R, g)) return r.code;
    return TERN_OK;
}

void gguf_close(gguf_ctx *g) {
    if (!g) return;
    ctx_impl *c = (ctx_impl *)g;
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        if (g->kv[i].type == GGUF_T_ARRAY) free((void *)g->kv[i].v.a.strs);
    }
    free(g->kv);
    for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    free(c->kv_hash);
    free(c->t_hash);
    if (g->buf && g->size > 0 && g->mode == GGUF_LOAD_MMAP) os_file_unmap(g->buf, g->size);
    else if (g->buf && g->size > 0 && g->mode == GGUF_LOAD_READ) os_pages_free(g->buf, g->size);
    free(c);
}

static int open_common(ctx_impl *c, gguf_ctx **out, tern_err *err) {
    const int rc = parse(c, err);
    if (rc != TERN_OK) {
        gguf_close(&c->pub);
        return rc;
    }
    *out = &c->pub;
    return TERN_OK;
}

int gguf_open_mem(gguf_ctx **out, uint8_t *buf, uint64_t len, tern_err *err) {
    if (!out || (!buf && len)) return tern_err_set(err, TERN_E_ARG, "gguf_open_mem: NULL argument");
    *out = NULL;
    ctx_impl *c = calloc(1, sizeof *c);
    if (!c) return tern_err_set(err, TERN_E_NOMEM, "gguf_open_mem: out of memory");
    c->pub.buf = buf;
    c->pub.size = len;
    c->pub.mode = -1;
    return open_common(c, out, err);
}

int gguf_open(gguf_ctx **out, const char *path, int mode, tern_err *err) {
    if (!out || !path || (mode != GGUF_LOAD_READ && mode != GGUF_LOAD_MMAP))
        return tern_err_set(err, TERN_E_ARG, "gguf_open: bad arguments (mode %d)", mode);
    *out = NULL;
    /* stat before open: opening a FIFO blocks until a writer comes, and a device or socket is
     * no GGUF file; fstat below checks the file actually opened again */
    struct stat pst;
    if (stat(path, &pst) != 0) return tern_err_set(err, TERN_E_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!S_ISREG(pst.st_mode)) {
        const char *kind = S_ISFIFO(pst.st_mode) ? "a FIFO" : S_ISSOCK(pst.st_mode) ? "a socket"
                           : S_ISCHR(pst.st_mode) ? "a character device" : S_ISBLK(pst.st_mode) ? "a block device"
                           : S_ISDIR(pst.st_mode) ? "a directory" : "not a regular file";
        return tern_err_set(err, TERN_E_IO, "'%s' is %s, expected a regular file", path, kind);
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_BINARY | O_NONBLOCK);   /* never blocks (a file swapped for a FIFO) */
    if (fd < 0) return tern_err_set(err, TERN_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        close(fd);
        return tern_err_set(err, TERN_E_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tern_err_set(err, TERN_E_IO, "'%s': not a regular file, expected a GGUF file", path);
    }
    const uint64_t size = (uint64_t)st.st_size;
    if (size < 24 || size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return tern_err_set(err, TERN_E_FORMAT, "%s: file size %" PRIu64 " byte%s, expected at least the 24-byte GGUF header", path, size,
                            size == 1 ? "" : "s");
    }
    ctx_impl *c = calloc(1, sizeof *c);
    if (!c) { close(fd); return tern_err_set(err, TERN_E_NOMEM, "gguf_open: out of memory"); }
    void *p;
    if (mode == GGUF_LOAD_MMAP) {
        /* private: in-place repack writes copy-on-write pages, never the file */
        p = os_file_map(fd, (size_t)size);
        if (!p && errno == ENOSYS) {
            mode = GGUF_LOAD_READ;                   /* no private file mappings here: read() it */
        } else if (!p) {
            const int e = errno;
            close(fd); free(c);
            return tern_err_set(err, e == ENOMEM ? TERN_E_NOMEM : TERN_E_IO, "cannot map '%s' (%" PRIu64 " bytes): %s", path, size, strerror(e));
        }
    }
    if (mode == GGUF_LOAD_READ) {
        p = os_pages_alloc((size_t)size);
        if (!p) {
            close(fd); free(c);
            return tern_err_set(err, TERN_E_NOMEM, "cannot allocate %" PRIu64 " bytes to read '%s'", size, path);
        }
        os_advise_huge(p, (size_t)size);             /* advisory: fewer TLB misses in the token loop */
        uint64_t got = 0;
        while (got < size) {
            const size_t chunk = (size_t)TERN_MIN(size - got, (uint64_t)1 << 30);
            const ssize_t k = read(fd, (uint8_t *)p + got, chunk);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                const int e = errno;
                os_pages_free(p, (size_t)size); close(fd); free(c);
                return tern_err_set(err, TERN_E_IO, "read '%s' failed at byte %" PRIu64 " of %" PRIu64 ": %s", path, got, size,
                                    k == 0 ? "unexpected end of file" : strerror(e));
            }
            got += (uint64_t)k;
        }
    }
    close(fd);
    c->pub.buf = p;
    c->pub.size = size;
    c->pub.mode = mode;
    const int rc = open_common(c, out, err);
    if (rc != TERN_OK && err && strncmp(err->msg, path, strlen(path)) != 0) {
        char msg[2 * sizeof err->msg];                     /* "path: message", cut to fit */
        snprintf(msg, sizeof msg, "%s: %s", path, err->msg);
        memcpy(err->msg, msg, sizeof err->msg - 1);
        err->msg[sizeof err->msg - 1] = '\0';
    }
    return rc;
}

/* ---- lookups and typed getters --------------------------------------------------------------- */

const gguf_kv *gguf_find_kv(const gguf_ctx *g, const char *key) {
    if (!g) return NULL;
    const ctx_impl *c = (const ctx_impl *)g;
    const int64_t i = index_find(c->kv_hash, c->kv_cap, kv_name, g->kv, key);
    return i < 0 ? NULL : &g->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *g, const char *name) {
    if (!g) return NULL;
    const ctx_impl *c = (const ctx_impl *)g;
    const int64_t i = index_find(c->t_hash, c->t_cap, t_name, g->tensors, name);
    return i < 0 ? NULL : &g->tensors[i];
}

static bool vtype_is_int(gguf_vtype t) {
    return t == GGUF_T_U8 || t == GGUF_T_I8 || t == GGUF_T_U16 || t == GGUF_T_I16 || t == GGUF_T_U32 ||
           t == GGUF_T_I32 || t == GGUF_T_U64 || t == GGUF_T_I64 || t == GGUF_T_BOOL;
}
static bool vtype_unsigned(gguf_vtype t) {
    return t == GGUF_T_U8 || t == GGUF_T_U16 || t == GGUF_T_U32 || t == GGUF_T_U64;
}

static int missing(const char *key, bool required, tern_err *err) {
    if (required) return tern_err_set(err, TERN_E_FORMAT, "missing key '%s'", key ? key : "(null)");
    return TERN_OK;
}

static int wrong_type(const gguf_kv *kv, const char *expected, tern_err *err) {
    if (kv->type == GGUF_T_ARRAY)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': type array of %s, expected %s", kv->key, gguf_vtype_name(kv->v.a.type), expected);
    return tern_err_set(err, TERN_E_FORMAT, "key '%s': type %s, expected %s", kv->key, gguf_vtype_name(kv->type), expected);
}

int gguf_get_int(const gguf_ctx *g, const char *key, bool required, int64_t def, int64_t *out, tern_err *err) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    *out = def;
    if (!kv) return missing(key, required, err);
    if (!vtype_is_int(kv->type)) return wrong_type(kv, "an integer", err);
    if (kv->type == GGUF_T_BOOL) { *out = kv->v.b; return TERN_OK; }
    if (vtype_unsigned(kv->type)) {
        if (kv->v.u > (uint64_t)INT64_MAX)
            return tern_err_set(err, TERN_E_FORMAT, "key '%s': value %" PRIu64 ", expected at most 2^63-1", key, kv->v.u);
        *out = (int64_t)kv->v.u;
    } else {
        *out = kv->v.i;
    }
    return TERN_OK;
}

int gguf_get_float(const gguf_ctx *g, const char *key, bool required, double def, double *out, tern_err *err) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    *out = def;
    if (!kv) return missing(key, required, err);
    if (kv->type == GGUF_T_F32 || kv->type == GGUF_T_F64) { *out = kv->v.f; return TERN_OK; }
    if (kv->type == GGUF_T_BOOL || !vtype_is_int(kv->type)) return wrong_type(kv, "a number", err);
    *out = vtype_unsigned(kv->type) ? (double)kv->v.u : (double)kv->v.i;
    return TERN_OK;
}

int gguf_get_bool(const gguf_ctx *g, const char *key, bool required, bool def, bool *out, tern_err *err) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    *out = def;
    if (!kv) return missing(key, required, err);
    if (kv->type != GGUF_T_BOOL) return wrong_type(kv, "bool", err);
    *out = kv->v.b;
    return TERN_OK;
}

int gguf_get_str(const gguf_ctx *g, const char *key, bool required, gguf_str *out, tern_err *err) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    out->p = "";
    out->n = 0;
    if (!kv) return missing(key, required, err);
    if (kv->type != GGUF_T_STRING) return wrong_type(kv, "string", err);
    *out = kv->v.s;
    return TERN_OK;
}

int gguf_get_arr(const gguf_ctx *g, const char *key, bool required, gguf_arr *out, tern_err *err) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    memset(out, 0, sizeof *out);
    if (!kv) return missing(key, required, err);
    if (kv->type != GGUF_T_ARRAY) return wrong_type(kv, "array", err);
    *out = kv->v.a;
    return TERN_OK;
}

bool gguf_arr_is_int(const gguf_arr *a) { return a && vtype_is_int(a->type); }

int64_t gguf_arr_int(const gguf_arr *a, uint64_t i) {
    TERN_ASSERT(a && i < a->n);
    const uint8_t *p = a->data;
    switch (a->type) {
    case GGUF_T_U8: return p[i];
    case GGUF_T_I8: return (int8_t)p[i];
    case GGUF_T_BOOL: return p[i] != 0;
    case GGUF_T_U16: return le16(p + 2 * i);
    case GGUF_T_I16: return (int16_t)le16(p + 2 * i);
    case GGUF_T_U32: return le32(p + 4 * i);
    case GGUF_T_I32: return (int32_t)le32(p + 4 * i);
    case GGUF_T_U64: { const uint64_t u = le64(p + 8 * i); return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u; }
    case GGUF_T_I64: return (int64_t)le64(p + 8 * i);
    case GGUF_T_F32: case GGUF_T_F64: {           /* truncated toward zero; NaN -> 0; saturates */
        const double f = gguf_arr_float(a, i);
        if (!(f == f)) return 0;
        if (f >= 9223372036854775807.0) return INT64_MAX;
        if (f <= -9223372036854775808.0) return INT64_MIN;
        return (int64_t)f;
    }
    default: return 0;
    }
}

double gguf_arr_float(const gguf_arr *a, uint64_t i) {
    TERN_ASSERT(a && i < a->n);
    if (a->type == GGUF_T_F32) { const uint32_t u = le32(a->data + 4 * i); float f; memcpy(&f, &u, 4); return f; }
    if (a->type == GGUF_T_F64) { const uint64_t u = le64(a->data + 8 * i); double f; memcpy(&f, &u, 8); return f; }
    if (vtype_is_int(a->type)) return (double)gguf_arr_int(a, i);
    return 0.0;
}

bool gguf_str_eq(gguf_str s, const char *c) {
    const size_t n = strlen(c);
    return s.n == n && memcmp(s.p, c, n) == 0;
}

int gguf_get_token_id(const gguf_ctx *g, const char *key, uint64_t n_vocab, int32_t *out, tern_err *err) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    *out = -1;
    if (!kv) return TERN_OK;
    if (!vtype_is_int(kv->type) || kv->type == GGUF_T_BOOL) return wrong_type(kv, "an integer token id", err);
    const bool none = vtype_unsigned(kv->type) ? (kv->type == GGUF_T_U32 && kv->v.u == 0xFFFFFFFFu) || kv->v.u == UINT64_MAX
                                               : kv->v.i == -1;
    if (none) return TERN_OK;
    if (n_vocab == 0)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s' names a token but the file has no tokenizer.ggml.tokens, expected a vocabulary", key);
    const bool neg = !vtype_unsigned(kv->type) && kv->v.i < 0;
    if (neg || kv->v.u >= n_vocab) {
        if (neg)
            return tern_err_set(err, TERN_E_FORMAT, "key '%s': token id %" PRId64 " is outside the vocabulary, expected 0..%" PRIu64 " or -1 (none)", key, kv->v.i, n_vocab - 1);
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': token id %" PRIu64 " is outside the vocabulary, expected 0..%" PRIu64 " or -1 (none)", key, kv->v.u, n_vocab - 1);
    }
    *out = (int32_t)kv->v.u;
    return TERN_OK;
}

/* ---- tokenizer arrays ------------------------------------------------------------------------ */

static int tok_arr(const gguf_ctx *g, const char *key, uint64_t n_vocab, int want, gguf_arr *a, bool *present, tern_err *err) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    *present = kv != NULL;
    if (!kv) return TERN_OK;
    const char *wname = want == -1 ? "an integer" : gguf_vtype_name((gguf_vtype)want);
    if (kv->type != GGUF_T_ARRAY)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': type %s, expected an array of %s", key, gguf_vtype_name(kv->type), wname);
    *a = kv->v.a;
    const bool ok = want == -1 ? (vtype_is_int(a->type) && a->type != GGUF_T_BOOL) : a->type == (gguf_vtype)want;
    if (!ok)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': array of %s, expected an array of %s", key, gguf_vtype_name(a->type), wname);
    if (n_vocab && a->n != n_vocab)
        return tern_err_set(err, TERN_E_FORMAT, "key '%s': %" PRIu64 " entries, expected %" PRIu64 " (one per token of tokenizer.ggml.tokens)", key, a->n, n_vocab);
    return TERN_OK;
}

int gguf_check_tokenizer(const gguf_ctx *g, tern_err *err) {
    if (!g) return tern_err_set(err, TERN_E_ARG, "gguf_check_tokenizer: NULL context");
    gguf_arr tokens = {0}, a;
    bool has_tokens, present;
    int rc = tok_arr(g, "tokenizer.ggml.tokens", 0, GGUF_T_STRING, &tokens, &has_tokens, err);
    if (rc) return rc;
    if (has_tokens && (tokens.n == 0 || tokens.n > INT32_MAX))
        return tern_err_set(err, TERN_E_FORMAT, "key 'tokenizer.ggml.tokens': %" PRIu64 " tokens, expected 1..2^31-1", tokens.n);
    const uint64_t n_vocab = tokens.n;
    if (!has_tokens) {
        /* arrays that only make sense with a vocabulary */
        static const char *const dep[] = {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"};
        for (size_t i = 0; i < sizeof dep / sizeof dep[0]; i++)
            if (gguf_find_kv(g, dep[i]))
                return tern_err_set(err, TERN_E_FORMAT, "key '%s' present without tokenizer.ggml.tokens, expected both", dep[i]);
    }
    if ((rc = tok_arr(g, "tokenizer.ggml.scores", n_vocab, GGUF_T_F32, &a, &present, err))) return rc;
    if ((rc = tok_arr(g, "tokenizer.ggml.token_type", n_vocab, -1, &a, &present, err))) return rc;
    if ((rc = tok_arr(g, "tokenizer.ggml.merges", 0, GGUF_T_STRING, &a, &present, err))) return rc;
    static const char *const strs[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        const gguf_kv *kv = gguf_find_kv(g, strs[i]);
        if (kv && kv->type != GGUF_T_STRING) return wrong_type(kv, "string", err);
    }
    /* special token ids: every tokenizer.ggml.*_token_id must be an integer inside the vocabulary,
     * or the "none" marker (-1, or 0xFFFFFFFF as u32: llama.cpp writes it for absent tokens) */
    static const char pre[] = "tokenizer.ggml.", suf[] = "_token_id";
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        const size_t kl = strlen(kv->key);
        if (kl <= sizeof pre - 1 + sizeof suf - 1 || strncmp(kv->key, pre, sizeof pre - 1) != 0 ||
            strcmp(kv->key + kl - (sizeof suf - 1), suf) != 0)
            continue;
        int32_t id;
        if ((rc = gguf_get_token_id(g, kv->key, has_tokens ? n_vocab : 0, &id, err))) return rc;
    }
    return TERN_OK;
}

/* ---- writer ---------------------------------------------------------------------------------- */

typedef struct { char *key; uint32_t type; uint8_t *val; size_t n; } w_kv;      /* val: bytes after the type */
typedef struct { char *name; int type, n_dims; int64_t ne[4]; const void *data; uint64_t nbytes, offset; } w_tensor;

struct gguf_writer {
    w_kv *kv; size_t n_kv, cap_kv;
    w_tensor *t; size_t n_t, cap_t;
    uint32_t alignment;
    FILE *f; char *path;
    size_t cur;             /* streaming: tensor being written */
    uint64_t cur_written;   /* bytes of tensor cur written so far */
    uint64_t data_offset;   /* file offset of the data section */
    uint64_t pos;           /* bytes written to the file */
};

int gguf_w_init(gguf_writer **out, tern_err *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return tern_err_set(err, TERN_E_NOMEM, "gguf_w_init: out of memory");
    (*out)->alignment = 32;
    return TERN_OK;
}

void gguf_w_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].val); }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv); free(w->t);
    if (w->f) fclose(w->f);
    free(w->path);
    free(w);
}

/* Set key to (type, value bytes), replacing an earlier value of the same key. Takes val. */
static int w_put(gguf_writer *w, const char *key, uint32_t type, uint8_t *val, size_t n) {
    if (!w || !key || !*key || w->f) { free(val); return TERN_E_ARG; }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val);
            w->kv[i].type = type; w->kv[i].val = val; w->kv[i].n = n;
            return TERN_OK;
        }
    if (w->n_kv == w->cap_kv) {
        const size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        w_kv *k = realloc(w->kv, cap * sizeof *k);
        if (!k) { free(val); return TERN_E_NOMEM; }
        w->kv = k; w->cap_kv = cap;
    }
    char *kc = strdup(key);
    if (!kc) { free(val); return TERN_E_NOMEM; }
    w->kv[w->n_kv++] = (w_kv){kc, type, val, n};
    return TERN_OK;
}

static void put_le(uint8_t *p, uint64_t v, int n) { for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i)); }

static int w_scalar(gguf_writer *w, const char *key, uint32_t type, uint64_t bits, int n) {
    uint8_t *v = malloc((size_t)n);
    if (!v) return TERN_E_NOMEM;
    put_le(v, bits, n);
    return w_put(w, key, type, v, (size_t)n);
}

int gguf_w_set_alignment(gguf_writer *w, uint32_t alignment) {
    if (!w || alignment == 0 || (alignment & (alignment - 1))) return TERN_E_ARG;
    const int rc = w_scalar(w, "general.alignment", GGUF_T_U32, alignment, 4);
    if (rc == TERN_OK) w->alignment = alignment;
    return rc;
}
int gguf_w_set_u32(gguf_writer *w, const char *key, uint32_t v) { return w_scalar(w, key, GGUF_T_U32, v, 4); }
int gguf_w_set_i32(gguf_writer *w, const char *key, int32_t v) { return w_scalar(w, key, GGUF_T_I32, (uint32_t)v, 4); }
int gguf_w_set_u64(gguf_writer *w, const char *key, uint64_t v) { return w_scalar(w, key, GGUF_T_U64, v, 8); }
int gguf_w_set_f32(gguf_writer *w, const char *key, float v) { uint32_t u; memcpy(&u, &v, 4); return w_scalar(w, key, GGUF_T_F32, u, 4); }
int gguf_w_set_bool(gguf_writer *w, const char *key, bool v) { return w_scalar(w, key, GGUF_T_BOOL, v ? 1 : 0, 1); }

int gguf_w_set_str(gguf_writer *w, const char *key, const char *s) {
    if (!s) return TERN_E_ARG;
    const size_t n = strlen(s);
    uint8_t *v = malloc(8 + n);
    if (!v) return TERN_E_NOMEM;
    put_le(v, n, 8);
    memcpy(v + 8, s, n);
    return w_put(w, key, GGUF_T_STRING, v, 8 + n);
}

int gguf_w_set_arr(gguf_writer *w, const char *key, gguf_vtype elem_type, const void *data, uint64_t n) {
    const int es = vtype_size(elem_type);
    uint64_t bytes;
    if (es == 0 || (n && !data) || !ck_mul_u64(n, (uint64_t)es, &bytes) || bytes > SIZE_MAX - 12) return TERN_E_ARG;
    uint8_t *v = malloc((size_t)bytes + 12);
    if (!v) return TERN_E_NOMEM;
    put_le(v, elem_type, 4);
    put_le(v + 4, n, 8);
    /* elements are given in host order: write each little-endian */
    const uint8_t *src = data;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = 0;
        switch (es) {
        case 1: x = src[i]; break;
        case 2: { uint16_t y; memcpy(&y, src + 2 * i, 2); x = y; break; }
        case 4: { uint32_t y; memcpy(&y, src + 4 * i, 4); x = y; break; }
        default: memcpy(&x, src + 8 * i, 8); break;
        }
        put_le(v + 12 + i * (uint64_t)es, x, es);
    }
    return w_put(w, key, GGUF_T_ARRAY, v, (size_t)bytes + 12);
}

int gguf_w_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, const uint64_t *lens, uint64_t n) {
    if (n && (!strs || !lens)) return TERN_E_ARG;
    uint64_t bytes = 12;
    for (uint64_t i = 0; i < n; i++)
        if (!strs[i] && lens[i]) return TERN_E_ARG;
        else if (!ck_add_u64(bytes, 8, &bytes) || !ck_add_u64(bytes, lens[i], &bytes)) return TERN_E_ARG;
    if (bytes > SIZE_MAX) return TERN_E_NOMEM;
    uint8_t *v = malloc((size_t)bytes), *p = v;
    if (!v) return TERN_E_NOMEM;
    put_le(p, GGUF_T_STRING, 4);
    put_le(p + 4, n, 8);
    p += 12;
    for (uint64_t i = 0; i < n; i++) {
        put_le(p, lens[i], 8);
        if (lens[i]) memcpy(p + 8, strs[i], (size_t)lens[i]);
        p += 8 + lens[i];
    }
    return w_put(w, key, GGUF_T_ARRAY, v, (size_t)bytes);
}

int gguf_w_add_tensor(gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne, const void *data) {
    if (!w || !name || !*name || !ne || n_dims < 1 || n_dims > 4 || w->f) return TERN_E_ARG;
    const qt_traits *tr = qt_get(type);
    if (!tr) return TERN_E_ARG;
    uint64_t n_el = 1, row, nbytes;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 1 || !ck_mul_u64(n_el, (uint64_t)ne[d], &n_el)) return TERN_E_ARG;
    if (n_el > (uint64_t)INT64_MAX || !qt_row_bytes(type, (uint64_t)ne[0], &row) || !ck_mul_u64(row, n_el / (uint64_t)ne[0], &nbytes))
        return TERN_E_ARG;
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return TERN_E_ARG;
    if (w->n_t >= INT32_MAX) return TERN_E_ARG;
    if (w->n_t == w->cap_t) {
        const size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        w_tensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) return TERN_E_NOMEM;
        w->t = t; w->cap_t = cap;
    }
    w_tensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return TERN_E_NOMEM;
    t->type = type; t->n_dims = n_dims; t->data = data; t->nbytes = nbytes;
    for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    return (int)w->n_t++;
}

static int w_write(gguf_writer *w, const void *p, uint64_t n, tern_err *err) {
    if (n && fwrite(p, 1, (size_t)n, w->f) != (size_t)n)
        return tern_err_set(err, TERN_E_IO, "write '%s' failed at byte %" PRIu64 ": %s", w->path, w->pos, strerror(errno));
    w->pos += n;
    return TERN_OK;
}

static int w_pad(gguf_writer *w, tern_err *err) {
    static const uint8_t zeros[256];
    uint64_t pad = (w->alignment - w->pos % w->alignment) % w->alignment;
    while (pad) {
        const uint64_t k = TERN_MIN(pad, (uint64_t)sizeof zeros);
        const int rc = w_write(w, zeros, k, err);
        if (rc) return rc;
        pad -= k;
    }
    return TERN_OK;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

int gguf_w_begin(gguf_writer *w, const char *path, tern_err *err) {
    if (!w || !path || w->f) return tern_err_set(err, TERN_E_ARG, "gguf_w_begin: bad arguments or already begun");
    /* offsets: each tensor starts aligned, in the order added */
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        if (!ck_add_u64(off, w->t[i].nbytes, &off) || off > UINT64_MAX - w->alignment)
            return tern_err_set(err, TERN_E_ARG, "gguf writer: data section overflows at tensor '%s'", w->t[i].name);
        off = align_up(off, w->alignment);
    }
    w->path = strdup(path);
    if (!w->path) return tern_err_set(err, TERN_E_NOMEM, "gguf writer: out of memory");
    const size_t pn = strlen(path);
    if (pn > 0 && path[pn - 1] == '/')   /* fopen would say "Is a directory" even where none exists */
        return tern_err_set(err, TERN_E_IO, "cannot create '%s': the name ends with '/', expected a file name", path);
    w->f = fopen(path, "wb");
    if (!w->f) return tern_err_set(err, TERN_E_IO, "cannot create '%s': %s", path, strerror(errno));
    uint8_t hdr[24];
    memcpy(hdr, MAGIC, 4);
    put_le(hdr + 4, 3, 4);
    put_le(hdr + 8, w->n_t, 8);
    put_le(hdr + 16, w->n_kv, 8);
    int rc = w_write(w, hdr, 24, err);
    for (size_t i = 0; !rc && i < w->n_kv; i++) {
        uint8_t b[12];
        const size_t kl = strlen(w->kv[i].key);
        put_le(b, kl, 8);
        rc = w_write(w, b, 8, err);
        if (!rc) rc = w_write(w, w->kv[i].key, kl, err);
        put_le(b, w->kv[i].type, 4);
        if (!rc) rc = w_write(w, b, 4, err);
        if (!rc) rc = w_write(w, w->kv[i].val, w->kv[i].n, err);
    }
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        const w_tensor *t = &w->t[i];
        uint8_t b[8 + 4 + 32 + 4 + 8];
        const size_t nl = strlen(t->name);
        put_le(b, nl, 8);
        rc = w_write(w, b, 8, err);
        if (!rc) rc = w_write(w, t->name, nl, err);
        size_t k = 0;
        put_le(b + k, (uint64_t)t->n_dims, 4); k += 4;
        for (int d = 0; d < t->n_dims; d++) { put_le(b + k, (uint64_t)t->ne[d], 8); k += 8; }
        put_le(b + k, (uint64_t)t->type, 4); k += 4;
        put_le(b + k, t->offset, 8); k += 8;
        if (!rc) rc = w_write(w, b, k, err);
    }
    if (!rc) rc = w_pad(w, err);
    w->data_offset = w->pos;
    w->cur = 0;
    w->cur_written = 0;
    return rc;
}

int gguf_w_tensor_data(gguf_writer *w, int idx, const void *data, uint64_t nbytes, tern_err *err) {
    if (!w || !w->f) return tern_err_set(err, TERN_E_ARG, "gguf_w_tensor_data: writer not begun");
    if (idx < 0 || (size_t)idx != w->cur || w->cur >= w->n_t)
        return tern_err_set(err, TERN_E_ARG, "gguf_w_tensor_data: tensor %d given, expected tensor %zu (tensors are written in order)", idx, w->cur);
    w_tensor *t = &w->t[w->cur];
    if (nbytes > t->nbytes - w->cur_written)
        return tern_err_set(err, TERN_E_ARG, "gguf_w_tensor_data: tensor '%s' is %" PRIu64 " bytes, got %" PRIu64 " more after %" PRIu64,
                            t->name, t->nbytes, nbytes, w->cur_written);
    int rc = w_write(w, data, nbytes, err);
    if (rc) return rc;
    w->cur_written += nbytes;
    if (w->cur_written == t->nbytes) {
        rc = w_pad(w, err);
        w->cur++;
        w->cur_written = 0;
    }
    return rc;
}

static int w_close(gguf_writer *w, tern_err *err) {
    int rc = TERN_OK;
    if (fflush(w->f) != 0) rc = tern_err_set(err, TERN_E_IO, "write '%s' failed: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && !rc) rc = tern_err_set(err, TERN_E_IO, "close '%s' failed: %s", w->path, strerror(errno));
    w->f = NULL;
    return rc;
}

int gguf_w_end(gguf_writer *w, tern_err *err) {
    if (!w || !w->f) return tern_err_set(err, TERN_E_ARG, "gguf_w_end: writer not begun");
    if (w->cur != w->n_t) {
        const w_tensor *t = &w->t[w->cur];
        const int rc = tern_err_set(err, TERN_E_ARG, "gguf_w_end: tensor '%s' has %" PRIu64 " of %" PRIu64 " bytes, expected all tensors complete",
                                    t->name, w->cur_written, t->nbytes);
        w_close(w, NULL);
        return rc;
    }
    return w_close(w, err);
}

int gguf_w_end_sparse(gguf_writer *w, tern_err *err) {
    if (!w || !w->f) return tern_err_set(err, TERN_E_ARG, "gguf_w_end_sparse: writer not begun");
    uint64_t end = w->data_offset;
    if (w->n_t) end += align_up(w->t[w->n_t - 1].offset + w->t[w->n_t - 1].nbytes, w->alignment);
    if (fflush(w->f) != 0 || ftruncate(fileno(w->f), (off_t)end) != 0) {
        const int rc = tern_err_set(err, TERN_E_IO, "extend '%s' to %" PRIu64 " bytes failed: %s", w->path, end, strerror(errno));
        w_close(w, NULL);
        return rc;
    }
    return w_close(w, err);
}


int gguf_w_write_file(gguf_writer *w, const char *path, tern_err *err) {
    int rc = gguf_w_begin(w, path, err);
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        if (!w->t[i].data && w->t[i].nbytes) {
            rc = tern_err_set(err, TERN_E_ARG, "gguf_w_write_file: tensor '%s' has no data", w->t[i].name);
            break;
        }
        rc = gguf_w_tensor_data(w, (int)i, w->t[i].data, w->t[i].nbytes, err);
    }
    if (rc) {
        if (w->f) w_close(w, NULL);
        return rc;
    }
    return gguf_w_end(w, err);
}
