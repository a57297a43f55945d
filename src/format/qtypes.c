/* qtypes.c: the block type table (ids, block sizes, byte sizes), scalar dequantisation to f32,
 * the reference encoders and the lossless PQ2_0 <-> PTQ1_0 transcode. Layer 2.
 * Source of truth: ../shared/spec/ternary-gguf.md sections 2 and 3 (bit layouts, encoders,
 * worked examples). All decoders read blocks through byte pointers and memcpy the fp16 scale,
 * so block data need not be aligned (GGUF tensor data is only aligned to general.alignment).
 * Invariants: every byte value of every block decodes to a finite value times d (no invalid
 * encodings exist); encoders never produce PQ2_0/Q2_0/TQ2_0 code 3 unless a value rounds to +2d,
 * which cannot happen with d = max|x|. */
#include "format/qtypes.h"

#include "core/fp16.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

_Static_assert(sizeof(block_pq2_0) == 34, "PQ2_0 block is 34 bytes");
_Static_assert(sizeof(block_q2_0) == 18, "Q2_0 block is 18 bytes");
_Static_assert(sizeof(block_ptq1_0) == 28, "PTQ1_0 block is 28 bytes");
_Static_assert(sizeof(block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(block_q1_0) == 18, "Q1_0 block is 18 bytes");
_Static_assert(sizeof(block_tq2_0) == 66, "TQ2_0 block is 66 bytes");
_Static_assert(sizeof(block_tq1_0) == 54, "TQ1_0 block is 54 bytes");

/* ---- element decoders ------------------------------------------------------------------------ */

static inline uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void wr_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* Base-3 digit n (0 = most significant) of a packed byte b (spec 3.4): multiply by 3^n mod 256,
 * then the top trit of the 8-bit fixed-point fraction is (3*v) >> 8. */
static inline int trit_digit(uint8_t b, int n) {
    uint8_t v = b;
    for (int i = 0; i < n; i++) v = (uint8_t)(v * 3u);
    return (int)((3u * v) >> 8);                        /* 0, 1 or 2 */
}

/* Pack base-3 digits u[0..k-1] (u[0] most significant) into one byte; qh bytes (k = 4) get a
 * trailing zero digit so the first digit still sits at 3^4 (spec 3.4 encoder). */
static inline uint8_t trit_pack(const uint8_t *u, int k) {
    unsigned q = 0;
    for (int i = 0; i < k; i++) q = q * 3u + u[i];
    for (int i = k; i < 5; i++) q *= 3u;
    return (uint8_t)((q * 256u + 242u) / 243u);         /* ceil(q * 256 / 243) */
}

int qt_pq2_0_code(const block_pq2_0 *b, int j) { return (b->qs[j >> 2] >> (2 * (j & 3))) & 3; }

/* PTQ1_0 element e -> (byte index in the 26-byte qs|qh area, digit index). Spec 3.4 table. */
static inline void ptq1_0_pos(int e, int *byte, int *digit) {
    if (e < 80) { *byte = e % 16; *digit = e / 16; }
    else if (e < 120) { *byte = 16 + (e - 80) % 8; *digit = (e - 80) / 8; }
    else { *byte = 24 + (e - 120) % 2; *digit = (e - 120) / 2; }
}

/* TQ1_0 element e (0..255) -> (byte index in the 52-byte qs|qh area, digit). Spec 3.6. */
static inline void tq1_0_pos(int e, int *byte, int *digit) {
    if (e < 160) { *byte = e % 32; *digit = e / 32; }
    else if (e < 240) { *byte = 32 + (e - 160) % 16; *digit = (e - 160) / 16; }
    else { *byte = 48 + (e - 240) % 4; *digit = (e - 240) / 4; }
}

int qt_ptq1_0_trit(const block_ptq1_0 *b, int j) {
    int byte, digit;
    ptq1_0_pos(j, &byte, &digit);
    const uint8_t v = byte < 24 ? b->qs[byte] : b->qh[byte - 24];
    return trit_digit(v, digit) - 1;
}

/* ---- dequantisation -------------------------------------------------------------------------- */

/* 2-bit codes, scale first: PQ2_0 (nq = 32) and Q2_0 (nq = 16). w = (code - 1) * d. */
static void dq_2bit(const uint8_t *p, float *y, int64_t nb, int nq) {
    for (int64_t ib = 0; ib < nb; ib++, p += 2 + nq, y += 4 * nq) {
        const float d = fp16_to_f32(rd_u16(p));
        for (int j = 0; j < 4 * nq; j++) y[j] = (float)(((p[2 + (j >> 2)] >> (2 * (j & 3))) & 3) - 1) * d;
    }
}

static void dq_ptq1_0(const uint8_t *p, float *y, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 28, y += 128) {
        const float d = fp16_to_f32(rd_u16(p + 26));
        for (int e = 0; e < 128; e++) {
            int byte, digit;
            ptq1_0_pos(e, &byte, &digit);
            y[e] = (float)(trit_digit(p[byte], digit) - 1) * d;
        }
    }
}

static void dq_tq1_0(const uint8_t *p, float *y, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 54, y += 256) {
        const float d = fp16_to_f32(rd_u16(p + 52));
        for (int e = 0; e < 256; e++) {
            int byte, digit;
            tq1_0_pos(e, &byte, &digit);
            y[e] = (float)(trit_digit(p[byte], digit) - 1) * d;
        }
    }
}

/* TQ2_0: element 128h + 32l + m = bits 2l..2l+1 of qs[32h + m]. */
static void dq_tq2_0(const uint8_t *p, float *y, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 66, y += 256) {
        const float d = fp16_to_f32(rd_u16(p + 64));
        for (int e = 0; e < 256; e++) {
            const int h = e >> 7, l = (e >> 5) & 3, m = e & 31;
            y[e] = (float)(((p[32 * h + m] >> (2 * l)) & 3) - 1) * d;
        }
    }
}

/* Whole-block decoders for the type table: nb blocks at p to f32 (F32/F16/BF16: nb values). */
static void dq_f32(const uint8_t *p, float *y, int64_t nb) { if (nb) memcpy(y, p, (size_t)nb * 4); }
static void dq_f16(const uint8_t *p, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) y[i] = fp16_to_f32(rd_u16(p + 2 * i));
}
static void dq_bf16(const uint8_t *p, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) y[i] = bf16_to_f32(rd_u16(p + 2 * i));
}
static void dq_q8_0(const uint8_t *p, float *y, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 34) {
        const float d = fp16_to_f32(rd_u16(p));
        for (int j = 0; j < 32; j++) y[ib * 32 + j] = (float)(int8_t)p[2 + j] * d;
    }
}
static void dq_q1_0(const uint8_t *p, float *y, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 18) {
        const float d = fp16_to_f32(rd_u16(p));
        for (int j = 0; j < 128; j++) y[ib * 128 + j] = ((p[2 + (j >> 3)] >> (j & 7)) & 1) ? d : -d;
    }
}
static void dq_q2_0(const uint8_t *p, float *y, int64_t nb) { dq_2bit(p, y, nb, 16); }
static void dq_pq2_0(const uint8_t *p, float *y, int64_t nb) { dq_2bit(p, y, nb, 32); }

/* ---- reference encoders ---------------------------------------------------------------------- */

/* Block scale d = max|x| stored as fp16 (clamped to the largest finite fp16 so the scale is
 * never infinite). Returns the stored bits; *df = the decoded scale the codes are computed
 * against, so dequant(quant(x)) uses the same d the codes were chosen for. */
static uint16_t absmax_scale(const float *x, int n, float *df) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    if (amax > 65504.0f) amax = 65504.0f;
    const uint16_t h = f32_to_fp16(amax);
    *df = fp16_to_f32(h);
    return h;
}

/* code = clamp(round(x/d) + 1, lo..hi); d == 0 (zero block, or a scale below the smallest fp16
 * subnormal) gives code 1 (value 0). round() is half away from zero. */
static inline int code_of(float x, float d, int hi) {
    if (d == 0.0f) return 1;
    const float r = roundf(x / d) + 1.0f;
    if (!(r >= 0.0f)) return 0;                           /* also maps NaN to 0 */
    return r > (float)hi ? hi : (int)r;
}

static void q_2bit(const float *x, uint8_t *p, int64_t nb, int nq) {
    for (int64_t ib = 0; ib < nb; ib++, p += 2 + nq, x += 4 * nq) {
        float d;
        wr_u16(p, absmax_scale(x, 4 * nq, &d));
        memset(p + 2, 0, (size_t)nq);
        for (int j = 0; j < 4 * nq; j++) p[2 + (j >> 2)] |= (uint8_t)(code_of(x[j], d, 3) << (2 * (j & 3)));
    }
}

/* PTQ1_0 bytes from 128 digits u (0..2) per element. out: 26 bytes (qs[24] | qh[2]). */
static void ptq1_0_pack(const uint8_t *u, uint8_t *out) {
    uint8_t dg[5];
    for (int m = 0; m < 16; m++) {
        for (int n = 0; n < 5; n++) dg[n] = u[m + 16 * n];
        out[m] = trit_pack(dg, 5);
    }
    for (int m = 0; m < 8; m++) {
        for (int n = 0; n < 5; n++) dg[n] = u[80 + m + 8 * n];
        out[16 + m] = trit_pack(dg, 5);
    }
    for (int m = 0; m < 2; m++) {
        for (int n = 0; n < 4; n++) dg[n] = u[120 + m + 2 * n];
        out[24 + m] = trit_pack(dg, 4);
    }
}

static void q_ptq1_0(const float *x, uint8_t *p, int64_t nb) {
    uint8_t u[128];
    for (int64_t ib = 0; ib < nb; ib++, p += 28, x += 128) {
        float d;
        const uint16_t h = absmax_scale(x, 128, &d);
        for (int e = 0; e < 128; e++) u[e] = (uint8_t)code_of(x[e], d, 2);
        ptq1_0_pack(u, p);
        wr_u16(p + 26, h);
    }
}

static void q_tq1_0(const float *x, uint8_t *p, int64_t nb) {
    uint8_t dg[5];
    for (int64_t ib = 0; ib < nb; ib++, p += 54, x += 256) {
        float d;
        const uint16_t h = absmax_scale(x, 256, &d);
        for (int m = 0; m < 32; m++) {
            for (int n = 0; n < 5; n++) dg[n] = (uint8_t)code_of(x[m + 32 * n], d, 2);
            p[m] = trit_pack(dg, 5);
        }
        for (int m = 0; m < 16; m++) {
            for (int n = 0; n < 5; n++) dg[n] = (uint8_t)code_of(x[160 + m + 16 * n], d, 2);
            p[32 + m] = trit_pack(dg, 5);
        }
        for (int m = 0; m < 4; m++) {
            for (int n = 0; n < 4; n++) dg[n] = (uint8_t)code_of(x[240 + m + 4 * n], d, 2);
            p[48 + m] = trit_pack(dg, 4);
        }
        wr_u16(p + 52, h);
    }
}

static void q_tq2_0(const float *x, uint8_t *p, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 66, x += 256) {
        float d;
        const uint16_t h = absmax_scale(x, 256, &d);
        memset(p, 0, 64);
        for (int e = 0; e < 256; e++) {
            const int hh = e >> 7, l = (e >> 5) & 3, m = e & 31;
            p[32 * hh + m] |= (uint8_t)(code_of(x[e], d, 3) << (2 * l));
        }
        wr_u16(p + 64, h);
    }
}

/* Q8_0 (ggml reference): d = amax/127 (f32), id = 1/d, q = round half away from zero (x*id),
 * d stored as fp16. */
static void q_q8_0(const float *x, uint8_t *p, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 34, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        wr_u16(p, f32_to_fp16(d));
        for (int j = 0; j < 32; j++) {
            float r = roundf(x[j] * id);
            r = r > 127.0f ? 127.0f : r < -128.0f ? -128.0f : r;
            p[2 + j] = (uint8_t)(int8_t)r;
        }
    }
}

/* Q1_0: sign bits with d = mean|x| (the least-squares scale for fixed signs); x >= 0 -> bit 1. */
static void q_q1_0(const float *x, uint8_t *p, int64_t nb) {
    for (int64_t ib = 0; ib < nb; ib++, p += 18, x += 128) {
        double s = 0.0;
        for (int j = 0; j < 128; j++) s += fabs((double)x[j]);
        float d = (float)(s / 128.0);
        if (d > 65504.0f) d = 65504.0f;
        wr_u16(p, f32_to_fp16(d));
        memset(p + 2, 0, 16);
        for (int j = 0; j < 128; j++)
            if (x[j] >= 0.0f) p[2 + (j >> 3)] |= (uint8_t)(1u << (j & 7));
    }
}

/* Whole-block encoders for the type table (F32/F16/BF16: nb values). */
static void q_f32(const float *x, uint8_t *p, int64_t nb) { if (nb) memcpy(p, x, (size_t)nb * 4); }
static void q_f16(const float *x, uint8_t *p, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) wr_u16(p + 2 * i, f32_to_fp16(x[i]));
}
static void q_bf16(const float *x, uint8_t *p, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) wr_u16(p + 2 * i, f32_to_bf16(x[i]));
}
static void q_q2_0(const float *x, uint8_t *p, int64_t nb) { q_2bit(x, p, nb, 16); }
static void q_pq2_0(const float *x, uint8_t *p, int64_t nb) { q_2bit(x, p, nb, 32); }

/* ---- the type table -------------------------------------------------------------------------- */

/* One row per supported type: every fact about a block type that the format layer, the loader
 * and the tools look up. file_type: llama.cpp's general.file_type for a file of these weights
 * (-1: none is defined). */
static const qt_traits traits[] = {
    {QT_F32, "F32", 1, 4, false, 0, dq_f32, q_f32},
    {QT_F16, "F16", 1, 2, false, 1, dq_f16, q_f16},
    {QT_Q8_0, "Q8_0", QK_Q8_0, 34, false, 7, dq_q8_0, q_q8_0},
    {QT_BF16, "BF16", 1, 2, false, -1, dq_bf16, q_bf16},
    {QT_TQ1_0, "TQ1_0", QK_TQ, 54, true, -1, dq_tq1_0, q_tq1_0},
    {QT_TQ2_0, "TQ2_0", QK_TQ, 66, true, -1, dq_tq2_0, q_tq2_0},
    {QT_Q1_0, "Q1_0", QK_Q1_0, 18, false, -1, dq_q1_0, q_q1_0},
    {QT_Q2_0, "Q2_0", QK_Q2_0, 18, true, -1, dq_q2_0, q_q2_0},
    {QT_PQ2_0, "PQ2_0", QK_PQ2_0, 34, true, 141, dq_pq2_0, q_pq2_0},
    {QT_PTQ1_0, "PTQ1_0", QK_PTQ1_0, 28, true, 143, dq_ptq1_0, q_ptq1_0},
};
enum { N_TRAITS = (int)(sizeof traits / sizeof traits[0]) };

const qt_traits *qt_get(int type) {
    for (int i = 0; i < N_TRAITS; i++)
        if (traits[i].type == type) return &traits[i];
    return NULL;
}

int qt_count(void) { return N_TRAITS; }

const qt_traits *qt_at(int i) { return i >= 0 && i < N_TRAITS ? &traits[i] : NULL; }

int qt_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < N_TRAITS; i++) {
        const char *a = traits[i].name, *b = name;
        while (*a && *b && toupper((unsigned char)*a) == toupper((unsigned char)*b)) { a++; b++; }
        if (!*a && !*b) return traits[i].type;
    }
    return -1;
}

bool qt_row_bytes(int type, uint64_t n_per_row, uint64_t *out) {
    const qt_traits *t = qt_get(type);
    if (!t || n_per_row % (uint64_t)t->block != 0) return false;
    return ck_mul_u64(n_per_row / (uint64_t)t->block, (uint64_t)t->block_bytes, out);
}

int qt_dequant(int type, const void *src, float *dst, int64_t n) {
    const qt_traits *t = qt_get(type);
    if (!t || n < 0 || n % t->block != 0 || (n > 0 && (!src || !dst))) return TERN_E_ARG;
    t->dequant(src, dst, n / t->block);
    return TERN_OK;
}

int qt_quantize(int type, const float *src, void *dst, int64_t n) {
    const qt_traits *t = qt_get(type);
    if (!t || n < 0 || n % t->block != 0 || (n > 0 && (!src || !dst))) return TERN_E_ARG;
    t->quantize(src, dst, n / t->block);
    return TERN_OK;
}

/* ---- transcoding ----------------------------------------------------------------------------- */

int qt_pq2_0_to_ptq1_0(const block_pq2_0 *src, block_ptq1_0 *dst, int64_t n_blocks, tern_err *err) {
    if (n_blocks < 0 || (n_blocks > 0 && (!src || !dst)))
        return tern_err_set(err, TERN_E_ARG, "qt_pq2_0_to_ptq1_0: bad arguments (n_blocks %lld)", (long long)n_blocks);
    uint8_t u[128], packed[26];
    for (int64_t ib = 0; ib < n_blocks; ib++) {
        const block_pq2_0 *b = &src[ib];
        for (int j = 0; j < 128; j++) {
            const int c = qt_pq2_0_code(b, j);
            if (c == 3)
                return tern_err_set(err, TERN_E_FORMAT,
                                    "PQ2_0 block %lld element %d: code 3 (+2d) has no PTQ1_0 encoding, expected codes 0..2",
                                    (long long)ib, j);
            u[j] = (uint8_t)c;
        }
        const uint16_t d = b->d;          /* copy first: src and dst may not alias, but be safe */
        ptq1_0_pack(u, packed);
        memcpy(dst[ib].qs, packed, 24);
        memcpy(dst[ib].qh, packed + 24, 2);
        dst[ib].d = d;
    }
    return TERN_OK;
}

void qt_ptq1_0_to_pq2_0(const block_ptq1_0 *src, block_pq2_0 *dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ib++) {
        block_pq2_0 o;
        o.d = src[ib].d;
        memset(o.qs, 0, sizeof o.qs);
        for (int j = 0; j < 128; j++) o.qs[j >> 2] |= (uint8_t)((qt_ptq1_0_trit(&src[ib], j) + 1) << (2 * (j & 3)));
        dst[ib] = o;
    }
}
