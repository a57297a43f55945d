/* repack.c: load-time preparation of weights (kern_w_init): shape checks, the in-place PQ2_0
 * row-pair repack, code-3 detection and the optional PTQ1_0 -> row-pair transcode into an owned
 * side buffer. Layout: kern_impl.h "PQ2_0 row-pair layout". Runs once per tensor at load, so
 * it may allocate (a 4-row scratch, at most 4 * K / 128 * 34 bytes).
 * Source: DESIGN.md "Row-pair interleaved block"; spec/ternary-gguf.md 3.1 and 3.4. */
#include "kernels/kern_impl.h"

#include <stdlib.h>
#include <string.h>

int kern_type_index(int qt_type) {
    switch (qt_type) {
    case QT_PQ2_0: return KT_PQ2_0;
    case QT_Q2_0: return KT_Q2_0;
    case QT_PTQ1_0: return KT_PTQ1_0;
    case QT_TQ1_0: return KT_TQ1_0;
    case QT_TQ2_0: return KT_TQ2_0;
    case QT_Q1_0: return KT_Q1_0;
    case QT_Q8_0: return KT_Q8_0;
    case QT_F32: return KT_F32;
    case QT_F16: return KT_F16;
    case QT_BF16: return KT_BF16;
    default: return -1;
    }
}

int kern_unit(const kern_w *w, kern_numerics m) {
    const int bs = kern_block_size(w->type);
    if (bs <= 1 || m == KQ_F32) return 0;
    if (m == KQ_GGML) return KA_GGML_BLOCK;
    return bs < KA_FAST_BLOCK ? bs : KA_FAST_BLOCK;
}

/* Pack 4 rows of 128 codes (u = 0..3) and their fp16 scales into one row-pair block. */
static void rp_pack(const uint8_t u[4][128], const uint16_t d[4], kern_rp_block *out) {
    for (int r = 0; r < 4; r++) out->d[r] = d[r];
    for (int p = 0; p < 2; p++)
        for (int wd = 0; wd < 4; wd++)
            for (int j = 0; j < 16; j++) {
                const int row = 2 * p + (j >= 8);
                uint8_t byte = 0;
                for (int s = 0; s < 4; s++) byte |= (uint8_t)(u[row][32 * wd + 8 * s + (j & 7)] << (2 * s));
                out->qs[p][wd][j] = byte;
            }
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* In place: rows 0 .. N4-1 of a PQ2_0 tensor in file layout -> row-pair blocks. */
static int repack_pq2_0(kern_w *w, const char *name, tern_err *err) {
    const int64_t nb = w->n_in / 128, n4 = w->n_out & ~(int64_t)3;
    const size_t group_bytes = (size_t)(4 * nb * 34);
    uint8_t *tmp = malloc(group_bytes);
    if (!tmp) return tern_err_set(err, TERN_E_NOMEM, "tensor '%s': no memory for a %zu-byte repack scratch", name, group_bytes);
    uint8_t u[4][128];
    uint16_t d[4];
    for (int64_t g = 0; g < n4 / 4; g++) {
        uint8_t *region = w->data + (size_t)g * group_bytes;
        memcpy(tmp, region, group_bytes);
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < 4; r++) {
                const uint8_t *blk = tmp + ((int64_t)r * nb + b) * 34;
                d[r] = rd16(blk);
                for (int j = 0; j < 128; j++) u[r][j] = (uint8_t)kern_pq2_code(blk + 2, j);
            }
            rp_pack((const uint8_t(*)[128])u, d, (kern_rp_block *)(void *)(region + b * 136));
        }
    }
    free(tmp);
    w->layout = KW_ROWPAIR;
    return TERN_OK;
}

/* PTQ1_0 rows 0 .. N4-1 -> row-pair 2-bit blocks in an owned buffer (w->aux). */
static int transcode_ptq1_0(kern_w *w, const char *name, tern_err *err) {
    const int64_t nb = w->n_in / 128, n4 = w->n_out & ~(int64_t)3;
    if (n4 == 0) return TERN_OK;
    const size_t bytes = (size_t)(n4 / 4) * (size_t)nb * sizeof(kern_rp_block);
    kern_rp_block *out = tern_alloc_aligned(bytes);
    if (!out) return tern_err_set(err, TERN_E_NOMEM, "tensor '%s': no memory for a %zu-byte PTQ1_0 transcode", name, bytes);
    int8_t t[128];
    uint8_t u[4][128];
    uint16_t d[4];
    for (int64_t g = 0; g < n4 / 4; g++)
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < 4; r++) {
                float df;
                kern_block_int(w, 4 * g + r, b, t, &df);
                d[r] = rd16(w->data + ((4 * g + r) * nb + b) * 28 + 26);   /* keep the fp16 bits */
                for (int j = 0; j < 128; j++) u[r][j] = (uint8_t)(t[j] + 1);
            }
            rp_pack((const uint8_t(*)[128])u, d, &out[g * nb + b]);
        }
    w->aux = out;
    w->layout = KW_PTQ_ROWPAIR;
    return TERN_OK;
}

static bool scan_code3(const uint8_t *data, int64_t n_blocks, int bb) {
    for (int64_t i = 0; i < n_blocks; i++) {
        const uint8_t *q = data + i * bb + 2;
        for (int j = 0; j < bb - 2; j++) {
            const uint8_t v = q[j];
            /* a 2-bit field is 3 iff both its bits are set */
            if ((v & (v >> 1)) & 0x55) return true;
        }
    }
    return false;
}

static bool ptq_default_transcode(void) {
    const char *e = getenv("TERN_PTQ1_0");
    if (e && strcmp(e, "transcode") == 0) return true;
    if (e && strcmp(e, "direct") == 0) return false;
    return KERN_PTQ1_0_TRANSCODE_DEFAULT;
}

int kern_w_init_ex(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out,
                   unsigned flags, tern_err *err) {
    if (!name) name = "?";
    if (!w) return tern_err_set(err, TERN_E_ARG, "kern_w_init: NULL weight for tensor '%s'", name);
    memset(w, 0, sizeof *w);
    if (!data) return tern_err_set(err, TERN_E_ARG, "tensor '%s': NULL data", name);
    if (n_in <= 0 || n_out <= 0)
        return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': shape [%lld, %lld], expected positive dimensions",
                            name, (long long)n_in, (long long)n_out);
    const int bs = kern_block_size(type), bb = kern_block_bytes(type);
    if (bs == 0 || kern_type_index(type) < 0)
        return tern_err_set(err, TERN_E_UNSUPPORTED, "tensor '%s': ggml type %d has no kernel (expected PQ2_0, PTQ1_0, "
                            "Q2_0, TQ1_0, TQ2_0, Q1_0, Q8_0, F32, F16 or BF16)", name, type);
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
    if (type == QT_PQ2_0 || type == QT_Q2_0) w->has_code3 = scan_code3(data, (int64_t)(bytes / (uint64_t)bb), bb);
    int rc = TERN_OK;
    if (type == QT_PQ2_0 && !(flags & KW_F_KEEP_FILE)) rc = repack_pq2_0(w, name, err);
    if (type == QT_PTQ1_0) {
        bool tc = (flags & KW_F_PTQ1_0_TRANSCODE) ? true : (flags & KW_F_PTQ1_0_DIRECT) ? false : ptq_default_transcode();
        if (tc) rc = transcode_ptq1_0(w, name, err);
    }
    return rc;
}

int kern_w_init(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out, tern_err *err) {
    return kern_w_init_ex(w, name, type, data, n_in, n_out, 0, err);
}

void kern_w_free(kern_w *w) {
    if (!w) return;
    tern_free_aligned(w->aux);
    w->aux = NULL;
}

size_t kern_w_bytes(const kern_w *w) {
    const int bs = kern_block_size(w->type), bb = kern_block_bytes(w->type);
    size_t n = (size_t)(w->n_in / bs) * (size_t)bb * (size_t)w->n_out;
    if (w->aux) n += (size_t)(w->n_out / 4) * (size_t)(w->n_in / 128) * sizeof(kern_rp_block);
    return n;
}
