/* qtypes.c: the type table (every fact about a type: qtypes.h qt_traits), the block decoders
 * (integer values, w = t * d) and element dequantisers, the reference encoders and the lossless
 * PQ2_0 <-> PTQ1_0 transcode. Layer 2.
 * Source of truth: ../shared/spec/ternary-gguf.md sections 2 and 3 (bit layouts, encoders,
 * worked examples). All decoders read blocks through byte pointers and memcpy the fp16 scale,
 * so block data need not be aligned (GGUF tensor data is only aligned to general.alignment).
 * Invariants: every byte value of every block decodes to a finite value times d (no invalid
 * encodings exist); encoders never produce PQ2_0/Q2_0/TQ2_0 code 3 unless a value rounds to +2d,
 * which cannot happen with d = max|x|. */
#include "format/qtypes.h"

#include "core/fp16.h"

#include <ctype.h>
#include <stddef.h>
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

/* Base-3 blocks (spec 3.4 PTQ1_0, 3.6 TQ1_0) share one shape, with W = 16 (PTQ1_0, 128 elements)
 * or W = 32 (TQ1_0, 256): W bytes of 5 digits hold elements [0, 5W) (byte e % W, digit e / W),
 * W/2 bytes of 5 digits elements [5W, 7.5W), W/8 bytes of 4 digits the last W/2 elements. Element
 * e -> (byte index in the qs|qh area, digit index). */
static inline void b3_pos(int e, int W, int *byte, int *digit) {
    const int e2 = 5 * W, e3 = e2 + W * 5 / 2;
    if (e < e2) { *byte = e % W; *digit = e / W; }
    else if (e < e3) { *byte = W + (e - e2) % (W / 2); *digit = (e - e2) / (W / 2); }
    else { *byte = W + W / 2 + (e - e3) % (W / 8); *digit = (e - e3) / (W / 8); }
}

int qt_ptq1_0_trit(const block_ptq1_0 *b, int j) {
    int byte, digit;
    b3_pos(j, 16, &byte, &digit);
    const uint8_t v = byte < 24 ? b->qs[byte] : b->qh[byte - 24];
    return trit_digit(v, digit) - 1;
}

/* ---- block decoders (the table's `decode`: integer values t, w = t * d) ---------------------- */

/* 2-bit codes after the fp16 d: PQ2_0 (128 weights) and Q2_0 (64). t = code - 1. */
static void dec_2bit(const uint8_t *p, int8_t *t, int n) {
    for (int j = 0; j < n; j++) t[j] = (int8_t)(((p[2 + (j >> 2)] >> (2 * (j & 3))) & 3) - 1);
}
static void dec_pq2_0(const uint8_t *p, int8_t *t) { dec_2bit(p, t, 128); }
static void dec_q2_0(const uint8_t *p, int8_t *t) { dec_2bit(p, t, 64); }

/* Base-3 digits from the block's first byte (d last). */
static void dec_b3(const uint8_t *p, int8_t *t, int W) {
    for (int e = 0; e < 8 * W; e++) {
        int byte, digit;
        b3_pos(e, W, &byte, &digit);
        t[e] = (int8_t)(trit_digit(p[byte], digit) - 1);
    }
}
static void dec_ptq1_0(const uint8_t *p, int8_t *t) { dec_b3(p, t, 16); }
static void dec_tq1_0(const uint8_t *p, int8_t *t) { dec_b3(p, t, 32); }

/* TQ2_0: element 128h + 32l + m = bits 2l..2l+1 of qs[32h + m] (d last). */
static void dec_tq2_0(const uint8_t *p, int8_t *t) {
    for (int e = 0; e < 256; e++) {
        const int h = e >> 7, l = (e >> 5) & 3, m = e & 31;
        t[e] = (int8_t)(((p[32 * h + m] >> (2 * l)) & 3) - 1);
    }
}

/* Q1_0: bit (j & 7) of qs[j >> 3] after d: 1 -> +1, 0 -> -1. */
static void dec_q1_0(const uint8_t *p, int8_t *t) {
    for (int j = 0; j < 128; j++) t[j] = (int8_t)(((p[2 + (j >> 3)] >> (j & 7)) & 1) ? 1 : -1);
}

/* Q8_0: int8 qs[32] after d. */
static void dec_q8_0(const uint8_t *p, int8_t *t) { memcpy(t, p + 2, 32); }

/* ---- element dequantisation (the table's `dequant`) ------------------------------------------ */

static void dq_f32(const uint8_t *p, float *y, int64_t n) { if (n) memcpy(y, p, (size_t)n * 4); }
static void dq_f16(const uint8_t *p, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = fp16_to_f32(rd_u16(p + 2 * i));
}
static void dq_bf16(const uint8_t *p, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(rd_u16(p + 2 * i));
}

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

/* Base-3 bytes (b3_pos's shape, W = 16 or 32) from 8W digits u (0..2): byte m of each region
 * packs the digits of its elements m, m + stride, ... (most significant first). out: W + W/2 + W/8 bytes
 * (PTQ1_0: qs[24] | qh[2]; TQ1_0: qs[48] | qh[4]). */
static void b3_pack(const uint8_t *u, int W, uint8_t *out) {
    uint8_t dg[5];
    const int e2 = 5 * W, e3 = e2 + W * 5 / 2;
    for (int m = 0; m < W; m++) {
        for (int n = 0; n < 5; n++) dg[n] = u[m + W * n];
        out[m] = trit_pack(dg, 5);
    }
    for (int m = 0; m < W / 2; m++) {
        for (int n = 0; n < 5; n++) dg[n] = u[e2 + m + W / 2 * n];
        out[W + m] = trit_pack(dg, 5);
    }
    for (int m = 0; m < W / 8; m++) {
        for (int n = 0; n < 4; n++) dg[n] = u[e3 + m + W / 8 * n];
        out[W + W / 2 + m] = trit_pack(dg, 4);
    }
}

/* PTQ1_0 (W = 16) and TQ1_0 (W = 32): d = max|x|, base-3 digits, d last. */
static void q_b3(const float *x, uint8_t *p, int64_t nb, int W) {
    uint8_t u[256];
    const int n = 8 * W, nbytes = W + W / 2 + W / 8 + 2;   /* 28 or 54 */
    for (int64_t ib = 0; ib < nb; ib++, p += nbytes, x += n) {
        float d;
        const uint16_t h = absmax_scale(x, n, &d);
        for (int e = 0; e < n; e++) u[e] = (uint8_t)code_of(x[e], d, 2);
        b3_pack(u, W, p);
        wr_u16(p + nbytes - 2, h);
    }
}
static void q_ptq1_0(const float *x, uint8_t *p, int64_t nb) { q_b3(x, p, nb, 16); }
static void q_tq1_0(const float *x, uint8_t *p, int64_t nb) { q_b3(x, p, nb, 32); }

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

/* One row per supported type: every fact about a type that the format layer, the kernels, the
 * loader and the tools look up (qtypes.h qt_traits). file_type: llama.cpp's general.file_type for
 * a file of these weights (-1: none is defined). The test suite `qtypes` checks every row against
 * the block structs, the kernel tables and the codecs (test_type_rows). */
#define ELEM(id, name, bytes, ft, kt, dq, q) {id, name, 1, bytes, false, ft, kt, -1, 0, NULL, dq, q}
#define BLOCK(id, name, bs, bytes, tern, ft, kt, doff, dec, q) \
    {id, name, bs, bytes, tern, ft, kt, doff, (bs) < QT_FAST_ACT_BLOCK ? (bs) : QT_FAST_ACT_BLOCK, dec, NULL, q}
static const qt_traits traits[] = {
    ELEM(QT_F32, "F32", 4, 0, KT_F32, dq_f32, q_f32),
    ELEM(QT_F16, "F16", 2, 1, KT_F16, dq_f16, q_f16),
    BLOCK(QT_Q8_0, "Q8_0", QK_Q8_0, sizeof(block_q8_0), false, 7, KT_Q8_0, offsetof(block_q8_0, d), dec_q8_0, q_q8_0),
    ELEM(QT_BF16, "BF16", 2, -1, KT_BF16, dq_bf16, q_bf16),
    BLOCK(QT_TQ1_0, "TQ1_0", QK_TQ, sizeof(block_tq1_0), true, -1, KT_TQ1_0, offsetof(block_tq1_0, d), dec_tq1_0, q_tq1_0),
    BLOCK(QT_TQ2_0, "TQ2_0", QK_TQ, sizeof(block_tq2_0), true, -1, KT_TQ2_0, offsetof(block_tq2_0, d), dec_tq2_0, q_tq2_0),
    BLOCK(QT_Q1_0, "Q1_0", QK_Q1_0, sizeof(block_q1_0), false, -1, KT_Q1_0, offsetof(block_q1_0, d), dec_q1_0, q_q1_0),
    BLOCK(QT_Q2_0, "Q2_0", QK_Q2_0, sizeof(block_q2_0), true, -1, KT_Q2_0, offsetof(block_q2_0, d), dec_q2_0, q_q2_0),
    BLOCK(QT_PQ2_0, "PQ2_0", QK_PQ2_0, sizeof(block_pq2_0), true, 141, KT_PQ2_0, offsetof(block_pq2_0, d), dec_pq2_0, q_pq2_0),
    BLOCK(QT_PTQ1_0, "PTQ1_0", QK_PTQ1_0, sizeof(block_ptq1_0), true, 143, KT_PTQ1_0, offsetof(block_ptq1_0, d), dec_ptq1_0, q_ptq1_0),
};
#undef ELEM
#undef BLOCK
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
    if (!t->decode) { t->dequant(src, dst, n); return TERN_OK; }
    /* block types: w = t * d, exact (|t| <= 128 and d an fp16 value) */
    const uint8_t *p = src;
    int8_t v[QT_BLOCK_MAX];
    for (int64_t ib = 0; ib < n / t->block; ib++, p += t->block_bytes, dst += t->block) {
        const float d = fp16_to_f32(rd_u16(p + t->d_offset));
        t->decode(p, v);
        for (int j = 0; j < t->block; j++) dst[j] = (float)v[j] * d;
    }
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
        b3_pack(u, 16, packed);
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
