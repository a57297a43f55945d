/* repack.c: load-time preparation of weights (kern_w_init): shape checks, the in-place PQ2_0
 * repack (row-pair or 16-row, the layout of the table that will run it), code-3 detection, and
 * for PTQ1_0 either the 2-bit transcode into a side buffer or, direct, the in-place regrouping of
 * its base-3 bytes into 16-row blocks (16-row tables; the file layout otherwise). Layouts: kern_impl.h "PQ2_0
 * row-pair layout" and "PQ2_0 16-row layout". Runs once per tensor at load, so it may allocate
 * (a group scratch, at most 16 * K / 128 * 34 bytes).
 * Source: DESIGN.md "Row-pair interleaved block"; spec/ternary-gguf.md 3.1 and 3.4. */
#include "kernels/kern_impl.h"

#include <stdlib.h>
#include <string.h>

int kern_type_index(int qt_type) {
    const qt_traits *q = qt_get(qt_type);
    return q ? q->kt : -1;
}

int kern_unit(const kern_w *w, kern_numerics m) {
    const qt_traits *q = qt_get(w->type);
    if (!q->unit || m == KQ_F32) return 0;
    return m == KQ_GGML ? KA_GGML_BLOCK : q->unit;
}

/* Row-pair packing from 4 blocks in PQ2_0 file layout (fp16 d + 32 code bytes each).
 * Output byte j of word wd of pair p holds, in slot s, the code of weight 32 wd + 8 s + m
 * (m = j & 7) of row 2p + (j >= 8). In the file that code is field m & 3 of byte
 * 8 wd + 2 s + (m >> 2) of the row's block. So for the 8 file bytes X of a word: output bytes
 * m = 0..3 take field m of bytes 0, 2, 4, 6 and m = 4..7 field m - 4 of bytes 1, 3, 5, 7. With
 * y = those 4 bytes in a u32 and z = (y >> 2f) & 0x03030303 (code c_s in byte s of z), one
 * multiply by 2^24 + 2^18 + 2^12 + 2^6 = 0x01041040 moves c_s to bit 24 + 2s: every other
 * partial product lands either above bit 31 (dropped by the u32 wrap) or below bit 24 with a
 * total < 3 * (2^22 + 2^20 + 2^18 + 2^14 + 2^12 + 2^6) < 2^24 (no carry), so
 * (z * 0x01041040) >> 24 is exactly c0 | c1 << 2 | c2 << 4 | c3 << 6. */
static inline uint32_t bytes_0246(uint64_t x) {
    x &= 0x00FF00FF00FF00FFull;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
    return (uint32_t)(x | (x >> 16));
}

static inline uint8_t slots_of(uint32_t y, int f) {
    return (uint8_t)((((y >> (2 * f)) & 0x03030303u) * 0x01041040u) >> 24);
}

static void rp_pack_file(const uint8_t *const blk[4], kern_rp_block *out) {
    for (int r = 0; r < 4; r++) out->d[r] = (uint16_t)(blk[r][0] | blk[r][1] << 8);
    for (int r = 0; r < 4; r++) {
        const int p = r >> 1, half = (r & 1) * 8;
        for (int wd = 0; wd < 4; wd++) {
            uint64_t x;
            memcpy(&x, blk[r] + 2 + 8 * wd, 8);
            const uint32_t ye = bytes_0246(x), yo = bytes_0246(x >> 8);
            uint8_t *o = out->qs[p][wd] + half;
            for (int f = 0; f < 4; f++) { o[f] = slots_of(ye, f); o[4 + f] = slots_of(yo, f); }
        }
    }
}

/* 16-row packing from 16 blocks in PQ2_0 file layout. Output byte t of lane i of zmm j holds, in
 * slot s, the code of weight 16 j + 4 s + t of row i; in the file that is field t of byte
 * 4 j + s of the row's codes. So with y = the 4 file bytes 4 j .. 4 j + 3 as a u32, output byte t
 * is slots_of(y, t) (field t of each byte s moved to slot s, as above). */
static void r16_pack_file(const uint8_t *const blk[16], kern_r16_block *out) {
    for (int i = 0; i < 16; i++) {
        out->d[i] = (uint16_t)(blk[i][0] | blk[i][1] << 8);
        for (int j = 0; j < 8; j++) {
            uint32_t y;
            memcpy(&y, blk[i] + 2 + 4 * j, 4);
            for (int t = 0; t < 4; t++) out->qs[j][i][t] = slots_of(y, t);
        }
    }
}

/* Packs the G (4 or 16) PQ2_0 file blocks blk[0 .. G-1] into one grouped block at out. */
static void pack_group_block(bool row16, const uint8_t *const *blk, void *out) {
    if (row16) r16_pack_file(blk, out);
    else rp_pack_file(blk, out);
}

static int64_t group_rows(bool row16) { return row16 ? 16 : 4; }

/* In place: rows 0 .. NG-1 (NG = N rounded down to the group size) of a PQ2_0 tensor in file
 * layout -> row-pair or 16-row blocks (each group's blocks fill exactly its rows' file bytes). */
static int repack_pq2_0(kern_w *w, const char *name, bool row16, tern_err *err) {
    const int64_t G = group_rows(row16), nb = w->n_in / 128, ng = w->n_out / G;
    const size_t group_bytes = (size_t)(G * nb * 34);
    uint8_t *tmp = malloc(group_bytes);
    if (!tmp) return tern_err_set(err, TERN_E_NOMEM, "tensor '%s': no memory for a %zu-byte repack scratch", name, group_bytes);
    for (int64_t g = 0; g < ng; g++) {
        uint8_t *region = w->data + (size_t)g * group_bytes;
        memcpy(tmp, region, group_bytes);
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk[16];
            for (int r = 0; r < G; r++) blk[r] = tmp + ((int64_t)r * nb + b) * 34;
            pack_group_block(row16, blk, region + b * G * 34);
        }
    }
    free(tmp);
    w->layout = row16 ? KW_ROW16 : KW_ROWPAIR;
    return TERN_OK;
}

/* In place: rows 0 .. N16-1 of a PTQ1_0 tensor in file layout -> kern_r16t_block (kern_impl.h
 * "PTQ1_0 base-3 16-row layout"): the same 28 bytes of every row and block, regrouped. */
static int regroup_ptq1_0(kern_w *w, const char *name, tern_err *err) {
    const int64_t nb = w->n_in / 128, ng = w->n_out / 16;
    const size_t group_bytes = (size_t)(16 * nb * 28);
    uint8_t *tmp = ng ? malloc(group_bytes) : NULL;
    if (ng && !tmp)
        return tern_err_set(err, TERN_E_NOMEM, "tensor '%s': no memory for a %zu-byte repack scratch", name, group_bytes);
    for (int64_t g = 0; g < ng; g++) {
        uint8_t *region = w->data + (size_t)g * group_bytes;
        memcpy(tmp, region, group_bytes);
        for (int64_t b = 0; b < nb; b++) {
            kern_r16t_block *o = (kern_r16t_block *)(void *)(region + (size_t)b * sizeof(kern_r16t_block));
            for (int i = 0; i < 16; i++) {
                const uint8_t *src = tmp + ((int64_t)i * nb + b) * 28;
                for (int j = 0; j < 4; j++) memcpy(o->qa[j][i], src + 4 * j, 4);
                for (int j = 0; j < 2; j++) memcpy(o->qb[j][i], src + 16 + 4 * j, 4);
                memcpy(o->qh[i], src + 24, 2);
                o->d[i] = (uint16_t)(src[26] | src[27] << 8);
            }
        }
    }
    free(tmp);
    w->layout = KW_PTQ3_ROW16;
    return TERN_OK;
}

/* PTQ1_0 rows 0 .. NG-1 -> row-pair or 16-row 2-bit blocks in an owned buffer (w->aux): each block is
 * first rewritten as a PQ2_0 file block (codes u = t + 1, the same fp16 d: lossless), then
 * packed as above. Spec 3.4: qs[m] (m < 16) holds elements 16 n + m (digits n = 0..4), which in
 * PQ2_0 are field m & 3 of byte 4 n + (m >> 2): so with T[v] = the 5 digits of v in bytes 0..4,
 * sum_f T[qs[4 i + f]] << 2f has PQ2_0 byte 4 n + i in its byte n. Likewise qs[16 + m] (m < 8),
 * elements 80 + 8 n + m -> byte 20 + 2 n + (m >> 2); qh[m] (m < 2), elements 120 + 2 n + m. */
static int transcode_ptq1_0(kern_w *w, const char *name, bool row16, void *side, size_t side_cap, tern_err *err) {
    const int64_t G = group_rows(row16), nb = w->n_in / 128, ng = w->n_out / G;
    if (ng == 0) return TERN_OK;
    const size_t bytes = (size_t)ng * (size_t)nb * (size_t)(G * 34);
    TERN_ASSERT(!side || bytes <= side_cap);   /* the caller sized it with kern_w_side_bytes */
    uint8_t *out = side ? side : tern_alloc_aligned(bytes);
    if (!out) return tern_err_set(err, TERN_E_NOMEM, "tensor '%s': no memory for a %zu-byte PTQ1_0 transcode", name, bytes);
    w->aux_owned = !side;
    uint64_t T[256];
    for (int v = 0; v < 256; v++) {
        T[v] = 0;
        for (int n = 0; n < 5; n++) T[v] |= (uint64_t)kern_b3_digit((uint8_t)v, n) << (8 * n);
    }
    uint8_t pq[16][34];
    const uint8_t *blk[16];
    for (int r = 0; r < 16; r++) blk[r] = pq[r];
    for (int64_t g = 0; g < ng; g++)
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < G; r++) {
                const uint8_t *src = w->data + ((G * g + r) * nb + b) * 28;
                uint8_t *q = pq[r] + 2;
                for (int i = 0; i < 4; i++) {            /* elements 0..79 */
                    const uint64_t a = T[src[4 * i]] | T[src[4 * i + 1]] << 2 | T[src[4 * i + 2]] << 4 | T[src[4 * i + 3]] << 6;
                    for (int n = 0; n < 5; n++) q[4 * n + i] = (uint8_t)(a >> (8 * n));
                }
                for (int i = 0; i < 2; i++) {            /* elements 80..119 */
                    const uint8_t *s4 = src + 16 + 4 * i;
                    const uint64_t a = T[s4[0]] | T[s4[1]] << 2 | T[s4[2]] << 4 | T[s4[3]] << 6;
                    for (int n = 0; n < 5; n++) q[20 + 2 * n + i] = (uint8_t)(a >> (8 * n));
                }
                q[30] = q[31] = 0;                       /* elements 120..127 */
                for (int m = 0; m < 2; m++)
                    for (int n = 0; n < 4; n++) {
                        const int e = 2 * n + m;         /* element 120 + e: byte 30 + e / 4, field e % 4 */
                        q[30 + e / 4] |= (uint8_t)(((T[src[24 + m]] >> (8 * n)) & 3) << (2 * (e % 4)));
                    }
                pq[r][0] = src[26];
                pq[r][1] = src[27];
            }
            pack_group_block(row16, blk, out + (size_t)(g * nb + b) * (size_t)(G * 34));
        }
    w->aux = out;
    w->layout = row16 ? KW_PTQ_ROW16 : KW_PTQ_ROWPAIR;
    return TERN_OK;
}

/* One pass over n_blocks blocks of bb bytes: returns the index of the first block whose fp16
 * scale (at byte d_off; exponent all ones = Inf or NaN) is not finite, or -1. With code3 given
 * (PQ2_0/Q2_0) also sets *code3: whether any 2-bit code is 3 (a field is 3 iff both its bits are
 * set: (v & (v >> 1)) & 0x55.. per 8 code bytes); once one is found only the scales are read.
 * The scale test is branch-free ((hi & 0x7c) + 4 sets bit 7 iff the five exponent bits are all
 * ones), so a good file costs 3 instructions a block; only a bad one is searched again. */
static int64_t scan_blocks(const uint8_t *data, int64_t n_blocks, int bb, int d_off, bool *code3) {
    uint64_t any = 0;
    unsigned bad = 0;
    const uint8_t *hi = data + d_off + 1;   /* the high byte of the little-endian fp16 */
    if (code3) {
        for (int64_t i = 0; i < n_blocks; i++) {
            bad |= (hi[i * bb] & 0x7cu) + 4u;
            if (any) continue;
            const uint8_t *q = data + i * bb + 2;
            for (int j = 0; j < bb - 2; j += 8) {
                uint64_t v;
                memcpy(&v, q + j, 8);
                any |= v & (v >> 1) & 0x5555555555555555ull;
            }
        }
        *code3 = any != 0;
    } else {
        for (int64_t i = 0; i < n_blocks; i++) bad |= (hi[i * bb] & 0x7cu) + 4u;
    }
    if (!(bad & 0x80u)) return -1;
    for (int64_t i = 0; i < n_blocks; i++)
        if ((hi[i * bb] & 0x7c) == 0x7c) return i;
    return -1;
}

size_t kern_w_side_bytes(int type, int64_t n_in, int64_t n_out) {
    if (type != QT_PTQ1_0 || n_in <= 0 || n_out <= 0 || n_in % 128 != 0) return 0;
    return (size_t)(n_out & ~(int64_t)3) * (size_t)(n_in / 128) * 34u;
}

int kern_w_init_in(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out,
                   unsigned flags, void *side, size_t side_cap, tern_err *err) {
    if (!name) name = "?";
    if (!w) return tern_err_set(err, TERN_E_ARG, "kern_w_init: NULL weight for tensor '%s'", name);
    memset(w, 0, sizeof *w);
    if (!data) return tern_err_set(err, TERN_E_ARG, "tensor '%s': NULL data", name);
    if (n_in <= 0 || n_out <= 0)
        return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': shape [%lld, %lld], expected positive dimensions",
                            name, (long long)n_in, (long long)n_out);
    const qt_traits *q = qt_get(type);
    if (!q)
        return tern_err_set(err, TERN_E_UNSUPPORTED, "tensor '%s': ggml type %d has no kernel (expected PQ2_0, PTQ1_0, "
                            "Q2_0, TQ1_0, TQ2_0, Q1_0, Q8_0, F32, F16 or BF16)", name, type);
    const int bs = q->block, bb = q->block_bytes;
    if (n_in % bs != 0)
        return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': row length %lld is not a multiple of the block size %d of type %d",
                            name, (long long)n_in, bs, type);
    uint64_t bytes;
    if (!ck_mul_u64((uint64_t)(n_in / bs), (uint64_t)bb, &bytes) || !ck_mul_u64(bytes, (uint64_t)n_out, &bytes) ||
        bytes > (uint64_t)INT64_MAX)
        return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': shape [%lld, %lld] overflows the byte size", name,
                            (long long)n_in, (long long)n_out);
    w->type = type;
    w->layout = KW_FILE;
    w->n_in = n_in;
    w->n_out = n_out;
    w->data = data;
    /* a damaged file's NaN/Inf scale would be laundered into finite logits by the int8 activation
     * path (a NaN product quantises to 0): refuse it here, where every block is read anyway */
    const int d_off = q->d_offset;
    if (d_off >= 0) {
        const int64_t nb_row = n_in / bs;
        const int64_t bad = scan_blocks(data, (int64_t)(bytes / (uint64_t)bb), bb, d_off,
                                        type == QT_PQ2_0 || type == QT_Q2_0 ? &w->has_code3 : NULL);
        if (bad >= 0) {
            const uint8_t *d = data + bad * bb + d_off;
            const unsigned h = (unsigned)(d[0] | d[1] << 8);
            memset(w, 0, sizeof *w);
            return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': row %lld, block %lld: scale 0x%04x is %s; expected a "
                                "finite fp16 scale (the file is damaged)", name, (long long)(bad / nb_row),
                                (long long)(bad % nb_row), h, (h & 0x3ff) ? "NaN" : (h & 0x8000) ? "-Inf" : "+Inf");
        }
    }
    int rc = TERN_OK;
    /* the layout of the table that will run it, unless a flag says (the dispatcher's self-check
     * passes one: it runs before a table is active) */
    const bool row16 = (flags & KW_F_ROW16) ? true : (flags & KW_F_ROWPAIR) ? false : kern_isa_row16();
    if (type == QT_PQ2_0 && !(flags & KW_F_KEEP_FILE)) rc = repack_pq2_0(w, name, row16, err);
    if (type == QT_PTQ1_0) {
        bool tc = (flags & KW_F_PTQ1_0_TRANSCODE) ? true : (flags & KW_F_PTQ1_0_DIRECT) ? false : KERN_PTQ1_0_TRANSCODE_DEFAULT;
        if (tc) rc = transcode_ptq1_0(w, name, row16, side, side_cap, err);
        else if (row16) rc = regroup_ptq1_0(w, name, err);
    }
    return rc;
}

int kern_w_init_ex(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out,
                   unsigned flags, tern_err *err) {
    return kern_w_init_in(w, name, type, data, n_in, n_out, flags, NULL, 0, err);
}

int kern_w_init(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out, tern_err *err) {
    return kern_w_init_ex(w, name, type, data, n_in, n_out, 0, err);
}

void kern_w_free(kern_w *w) {
    if (!w) return;
    if (w->aux_owned) tern_free_aligned(w->aux);
    w->aux = NULL;
    w->aux_owned = false;
}

int64_t kern_w_grouped_rows(const kern_w *w) {
    switch (w->layout) {
    case KW_ROWPAIR: case KW_PTQ_ROWPAIR: return w->n_out & ~(int64_t)3;
    case KW_ROW16: case KW_PTQ_ROW16: case KW_PTQ3_ROW16: return w->n_out & ~(int64_t)15;
    default: return 0;
    }
}

size_t kern_w_bytes(const kern_w *w) {
    const int bs = kern_block_size(w->type), bb = kern_block_bytes(w->type);
    const size_t row = (size_t)(w->n_in / bs) * (size_t)bb;
    if (!w->aux) return row * (size_t)w->n_out;
    /* PTQ1_0 transcode: the kernels stream the side buffer (34 bytes per 128 weights) and the
     * file-layout tail rows */
    const int64_t ng = kern_w_grouped_rows(w);
    return (size_t)ng * (size_t)(w->n_in / 128) * 34 + row * (size_t)(w->n_out - ng);
}
