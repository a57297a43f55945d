/* qtypes.h: GGUF tensor types (ggml type ids), their block layouts and byte sizes, scalar
 * dequantisation to f32 and the reference encoders. Layer 2.
 * Source of truth: ../shared/spec/ternary-gguf.md sections 2 and 3 (bit layouts, worked
 * examples). Every block struct is packed exactly as on disk (all fields are byte arrays or
 * uint16_t at even offsets, so no padding is introduced). */
#ifndef TERN_FORMAT_QTYPES_H
#define TERN_FORMAT_QTYPES_H

#include "core/core.h"

#include <stdbool.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF tensor infos. */
enum {
    QT_F32 = 0,
    QT_F16 = 1,
    QT_Q8_0 = 8,
    QT_BF16 = 30,
    QT_TQ1_0 = 34,
    QT_TQ2_0 = 35,
    QT_Q1_0 = 41,
    QT_Q2_0 = 42,    /* group 64 (mainline). A legacy group-128 id-42 tensor is reported as QT_PQ2_0 */
    QT_PQ2_0 = 142,
    QT_PTQ1_0 = 143,
};

/* PQ2_0: 128 weights, fp16 scale first; weight j = bits 2(j&3).. of qs[j>>2]; w = (code-1)*d. */
#define QK_PQ2_0 128
typedef struct { uint16_t d; uint8_t qs[32]; } block_pq2_0;                 /* 34 bytes */
/* Q2_0 (group 64): same coding, 64 weights. */
#define QK_Q2_0 64
typedef struct { uint16_t d; uint8_t qs[16]; } block_q2_0;                  /* 18 bytes */
/* PTQ1_0: 5 trits/byte in qs[24] (elements 0..119), 4 trits/byte in qh[2] (120..127), d LAST. */
#define QK_PTQ1_0 128
typedef struct { uint8_t qs[24]; uint8_t qh[2]; uint16_t d; } block_ptq1_0;  /* 28 bytes */
/* Q8_0: fp16 d then int8 qs[32]. */
#define QK_Q8_0 32
typedef struct { uint16_t d; int8_t qs[32]; } block_q8_0;                   /* 34 bytes */
/* Q1_0: fp16 d, bit (j&7) of qs[j>>3]: 1 -> +d, 0 -> -d. */
#define QK_Q1_0 128
typedef struct { uint16_t d; uint8_t qs[16]; } block_q1_0;                  /* 18 bytes */
/* TQ2_0 / TQ1_0: 256 weights, scale last. */
#define QK_TQ 256
typedef struct { uint8_t qs[64]; uint16_t d; } block_tq2_0;                 /* 66 bytes */
typedef struct { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; } block_tq1_0;  /* 54 bytes */

/* Kernel slot of a type: its row in a kern_table's mm[KT_N][3] (kernels/kern_impl.h). Declared
 * here, beside the type table, so that one row of the table states every fact about a type; the
 * format layer itself never reads it (the kernels, layer 3, do). */
enum { KT_PQ2_0, KT_Q2_0, KT_PTQ1_0, KT_TQ1_0, KT_TQ2_0, KT_Q1_0, KT_Q8_0, KT_F32, KT_F16, KT_BF16, KT_N };

/* The activation block of the kernels' fast numerics (kernels/kern_impl.h KA_FAST_BLOCK): a
 * type's fast unit is its intersection with one weight block. */
#define QT_FAST_ACT_BLOCK 128
/* The largest block (TQ1_0, TQ2_0): a buffer of QT_BLOCK_MAX values holds any decoded block. */
#define QT_BLOCK_MAX 256

/* Everything the format layer, the kernels, the loader and the tools need to know about one block
 * type: one row per type in qtypes.c's table, read instead of switching over type ids. A block
 * type (block > 1) is an fp16 scale d and integer values t (w = t * d): `decode` gives t, d is at
 * d_offset. An element type (block == 1: F32, F16, BF16) has `dequant` instead. */
typedef struct qt_traits {
    int type;              /* ggml type id */
    const char *name;      /* "PQ2_0" */
    int block;             /* weights per block (1: an element type) */
    int block_bytes;       /* bytes per block */
    bool ternary;          /* a ternary weight type the integer kernels take */
    int file_type;         /* general.file_type of a file of these weights (llama.cpp's ids); -1 none */
    int kt;                /* KT_* kernel slot */
    int d_offset;          /* byte offset of the fp16 scale in a block: 0 (d first) or block_bytes - 2
                            * (d last); -1 for element types */
    int unit;              /* weights one int32 sum covers in the kernels' fast numerics:
                            * min(block, QT_FAST_ACT_BLOCK); 0 for element types (float paths) */
    /* Block types: the integer values t[0 .. block-1] of the block at p (unaligned bytes; |t| <=
     * 128, exactly the stored values: code - 1 for 2-bit codes including code 3 = +2, the trit
     * for base-3, +-1 for Q1_0, the int8 for Q8_0). NULL for element types. */
    void (*decode)(const uint8_t *p, int8_t *t);
    /* Element types: n values at p to f32. NULL for block types (qt_dequant decodes them). */
    void (*dequant)(const uint8_t *p, float *y, int64_t n);
    /* The spec's encoder over nb whole blocks (see qt_quantize). */
    void (*quantize)(const float *x, uint8_t *p, int64_t nb);
} qt_traits;

/* Traits of a type id, or NULL if the id is not supported. */
const qt_traits *qt_get(int type);
/* The table itself: qt_count() rows, qt_at(i) for i in [0, count) (NULL outside). */
int qt_count(void);
const qt_traits *qt_at(int i);
/* Lower-case or upper-case name ("pq2_0", "PQ2_0") -> type id; -1 if unknown. */
int qt_from_name(const char *name);

/* Bytes of one row of n_per_row values. Returns false if the type is unknown, n_per_row is not
 * a multiple of the block size, or the size overflows. */
bool qt_row_bytes(int type, uint64_t n_per_row, uint64_t *out);

/* Dequantise n values (n a multiple of the block size) from src to dst (f32). Scalar reference;
 * for every supported type. Returns TERN_E_ARG on an unknown type or a bad n. */
int qt_dequant(int type, const void *src, float *dst, int64_t n);

/* Quantise n f32 values to type with the spec's reference encoders (PQ2_0/Q2_0: d = max|x|,
 * code = clamp(round(x/d)+1, 0, 3); PTQ1_0/TQ1_0: base-3 with the ceil rule; Q8_0: d = amax/127,
 * round half away from zero; F16/BF16: round to nearest even; F32: copy). */
int qt_quantize(int type, const float *src, void *dst, int64_t n);

/* Single-element decoders used by tests and the scalar oracle. */
int qt_pq2_0_code(const block_pq2_0 *b, int j);      /* 0..3 */
int qt_ptq1_0_trit(const block_ptq1_0 *b, int j);    /* -1, 0, +1 */

/* Lossless PQ2_0 -> PTQ1_0 transcode of n_blocks blocks. Returns TERN_E_FORMAT (naming the
 * first offending block index) if any block holds code 3. */
int qt_pq2_0_to_ptq1_0(const block_pq2_0 *src, block_ptq1_0 *dst, int64_t n_blocks, tern_err *err);
/* PTQ1_0 -> PQ2_0 (always lossless). */
void qt_ptq1_0_to_pq2_0(const block_ptq1_0 *src, block_pq2_0 *dst, int64_t n_blocks);

#endif /* TERN_FORMAT_QTYPES_H */
