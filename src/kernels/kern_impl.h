/* kern_impl.h: kernels-internal contract shared by ref.c, the ISA files (x86/, arm/), act.c,
 * repack.c and dispatch.c. Not for the model layer (it uses kernels.h only).
 * Owns: the activation block layouts, the PQ2_0 row-pair layout, the exact integer and float
 * order every path must reproduce, and the per-ISA function table.
 * Source of truth: ../shared/DESIGN.md "The one idea that matters", spec/ternary-gguf.md 3 and 8.
 *
 * ==== Activation layouts (kern_quantize output; column c starts at c * kern_act_col_bytes) ====
 * KQ_FAST: blocks of KA_FAST_BLOCK = 128 values (the PQ2_0/PTQ1_0 weight block, so one
 *   activation scale meets one weight scale per block; one scale per 128 keeps 8-bit accuracy
 *   while the per-block float epilogue stays rare). ceil(K / 128) blocks; a partial last block
 *   (K % 128 != 0, only Q8_0/Q2_0/float weights) is zero-padded. Per block:
 *     amax = max |x|; d = amax / 127 (f32); id = 127 / amax (0 if amax == 0);
 *     q = round-half-even(x * id) clamped to [-127, 127]; bsums[g] = sum of q[16g .. 16g+15]
 *     (|bsums| <= 16 * 127 = 2032, int16); sum = sum of all 128 q (int32); nsum = {-sum, 0, 0, 0}.
 * KQ_GGML: Q8_0 blocks of 32 as the reference x86 build rounds (spec 8.1, AVX2 variant):
 *   d = amax / 127 stored as fp16 (RNE); id = 127 / amax (0 if amax == 0); q = round-half-even
 *   (x * id); sum = sum of the 32 q (int16, |sum| <= 4064). ceil(K / 32) blocks, last zero-padded.
 * KQ_F32: no quantised form; float paths read a->x.
 *
 * ==== Integer order (every ISA must produce exactly these int32) ==============================
 * A "unit" is the intersection of one weight block and one activation block:
 *   fast: unit = min(weight block, 128) weights (Q8_0: 32, Q2_0: 64, PQ2_0/PTQ1_0/Q1_0: 128,
 *         TQ1_0/TQ2_0: 128 = half a weight block); ggml: unit = 32 (one Q8_0 block).
 *   isum(r, u) = sum over the unit of t_k * q_k, t = the weight's integer value (code - 1 for
 *   2-bit codes incl. code 3 = +2, trit for base-3, +-1 for Q1_0, int8 for Q8_0). Exact in int32:
 *   |isum| <= 128 * 127 * 127 for Q8_0, <= 128 * 2 * 127 for the ternary types.
 *
 * ==== Float order (fixed per (row, column); no other order is allowed) ========================
 * fast:  acc = 0.0f; for each unit u in order: s = d_w(u) * d_a(u) (one f32 multiply, d_w
 *        converted from fp16 exactly); acc = fmaf(s, (float)isum(u), acc). y = acc.
 * ggml:  sum = 0.0f; for each weight block b in order: blk = 0.0f; for each 32-unit k of b in
 *        order: blk = fmaf(d_y(k), (float)isum(k), blk); then sum = fmaf(d_w(b), blk, sum).
 *        (spec 8.2 with the multiply-adds fused as the reference x86 build compiles them.)
 * float (F32/F16/BF16 weights in every mode; every weight type in KQ_F32 mode):
 *        lanes acc[16] = 0.0f; for k in 0..K-1: acc[k % 16] = fmaf(w_k, x_k, acc[k % 16]);
 *        then for s = 8, 4, 2, 1: acc[i] = acc[i] + acc[i + s] for i < s. y = acc[0].
 *        w_k = the dequantised weight as f32 ((code - 1) * d and the like are exact products).
 *        BF16 weights: x_k is first rounded to bf16 (spec 8.4; the product is then exact).
 *        Zero padding past K is NOT exact: a lane whose products all underflowed to -0 holds
 *        -0, and fmaf(0, 0, -0) = +0; a SIMD path does the K % 16 tail lane by lane with fmaf
 *        (test_arm test_arm_float_edges checks the -0 case on every table).
 * Column c of a matmul is computed exactly as a matvec of column c.
 *
 * ==== PQ2_0 row-pair layout (KW_ROWPAIR) ======================================================
 * Rows 0 .. N4-1 (N4 = N & ~3) are grouped by 4; group g, block b (nb = K / 128 per row) is the
 * kern_rp_block at byte offset (g * nb + b) * 136: exactly the bytes the 4 file rows of group g
 * occupied, so the repack is in place. Rows N4 .. N-1 keep the file layout at their file
 * offsets (r * nb * 34). In a kern_rp_block:
 *   d[r]          fp16 scale of row 4g + r, block b
 *   qs[p][wd][j]  p = row pair (rows 4g + 2p + (j >= 8)), wd = 16-byte word 0..3, j = byte;
 *                 bits 2s..2s+1 ("slot" s = 0..3) hold the 2-bit code of weight
 *                 k = 32 wd + 8 s + (j & 7) of that row (codes as in the file: u = t + 1, 0..3).
 * So a word holds 32 consecutive weights of two rows; slot s of a word is [row a: 8 weights |
 * row b: the same 8], and `byte & (3 << 2s)` = u * 4^s.
 *
 * ==== PQ2_0 16-row layout (KW_ROW16; PTQ1_0 transcode KW_PTQ_ROW16) ===========================
 * The layout of the tables with `row16` set (AVX-512 VNNI; AVX-VNNI and AVX2, which read each zmm j
 * as two ymm: bytes 0-31 = rows 0-7, bytes 32-63 = rows 8-15, x86/r16_ymm.h): rows 0 .. N16-1 (N16 = N & ~15) are
 * grouped by 16; group g, block b is the kern_r16_block at byte offset (g * nb + b) * 544: the
 * bytes the 16 file rows of group g occupied (16 * 34 = 544), so the repack is in place. Rows
 * N16 .. N-1 keep the file layout at their file offsets. In a kern_r16_block:
 *   qs[j][i][t]   j = 0..7 (one 64-byte zmm), i = row 16 g + i (one 32-bit lane), t = byte 0..3;
 *                 bits 2s..2s+1 (slot s = 0..3) hold the code of weight k = 16 j + 4 s + t.
 *   d[i]          fp16 scale of row 16 g + i, block b (after the codes: the zmm loads start at
 *                 the block's first byte).
 * So slot s of zmm j, (v >> 2s) & 3 per byte, holds in lane i the codes of the 4 consecutive
 * weights 16 j + 4 s .. + 3 of row i: one vpdpbusd against the activation's 4 bytes
 * q[16 j + 4 s .. + 3] broadcast to all 16 lanes sums them for 16 rows at once.
 *
 * ==== PTQ1_0 base-3 16-row layout (KW_PTQ3_ROW16: the direct form on the 16-row tables) ========
 * The file's trit bytes (spec 3.4), regrouped so that each 32-bit lane is one row: rows
 * 0 .. N16-1 grouped by 16, group g, block b the kern_r16t_block at (g * nb + b) * 448 (the bytes
 * of the 16 file rows: in place); rows N16 .. N-1 in file layout. In a kern_r16t_block, for row i:
 *   qa[j][i][t]  (j = 0..3) file byte qs[4 j + t]: digit n (0..4) is element 16 n + 4 j + t;
 *   qb[j][i][t]  (j = 0..1) file byte qs[16 + 4 j + t]: digit n is element 80 + 8 n + 4 j + t;
 *   qh[i][m]     file byte qh[m]: digit n (0..3) is element 120 + 2 n + m;
 *   d[i]         the fp16 scale.
 * So digit n of zmm qa[j] holds in lane i the trits (as u = t + 1) of 4 consecutive elements of
 * row i, against the 4 activation bytes q[16 n + 4 j ..] broadcast; qb[j]: q[80 + 8 n + 4 j ..];
 * qh widened to one 32-bit lane per row ([qh0, qh1, 0, 0]) against q[120 + 2 n ..], where the
 * two zero bytes have digit 0 at every n, so the two activation bytes they meet add nothing. Digit
 * n of a byte b is u = [v >= 86] + [v >= 171] with v = b * 3^n mod 256, i.e. v multiplied by 3 (two
 * byte adds) once per digit: 34 digit vectors per block for 128 weights, each used as-is.
 */
#ifndef TERN_KERNELS_KERN_IMPL_H
#define TERN_KERNELS_KERN_IMPL_H

#include "format/qtypes.h"
#include "kernels/kernels.h"

#include <stddef.h>
#include <stdint.h>

#define KA_FAST_BLOCK 128
#define KA_GGML_BLOCK 32

typedef struct {
    int8_t qs[KA_FAST_BLOCK];
    float d;           /* amax / 127 */
    int32_t sum;       /* sum of qs[0..127] */
    int16_t bsums[8];  /* sums of qs[16 g .. 16 g + 15] */
    int16_t nsum[4];   /* {-sum, 0, 0, 0} (|sum| <= 128 * 127 = 16256 fits int16): one vpbroadcastq of
                        * it starts an AVX2 int16 accumulator with -sum once per row (x86/avx2.c) */
} kact_fast;           /* 160 bytes */

typedef struct {
    int8_t qs[KA_GGML_BLOCK];
    uint16_t d;        /* fp16 of amax / 127 */
    int16_t sum;       /* sum of qs */
} kact_ggml;           /* 36 bytes */

_Static_assert(sizeof(kact_fast) == 160, "kact_fast layout");
_Static_assert(offsetof(kact_fast, sum) == offsetof(kact_fast, d) + 4, "d, sum adjacent (avx2.c loads them as one 64-bit word)");
_Static_assert(sizeof(kact_ggml) == 36, "kact_ggml layout");

/* PQ2_0 row-pair block: 4 rows x 128 weights. */
typedef struct {
    uint16_t d[4];
    uint8_t qs[2][4][16];
} kern_rp_block;       /* 136 bytes */
_Static_assert(sizeof(kern_rp_block) == 136, "row-pair block layout");

/* PQ2_0 16-row block: 16 rows x 128 weights (KW_ROW16). */
typedef struct {
    uint8_t qs[8][16][4];
    uint16_t d[16];
} kern_r16_block;      /* 544 bytes */
_Static_assert(sizeof(kern_r16_block) == 544, "16-row block layout");

/* PTQ1_0 base-3 16-row block: 16 rows x 128 weights (KW_PTQ3_ROW16). */
typedef struct {
    uint8_t qa[4][16][4];
    uint8_t qb[2][16][4];
    uint8_t qh[16][2];
    uint16_t d[16];
} kern_r16t_block;     /* 448 bytes = 16 x 28 */
_Static_assert(sizeof(kern_r16t_block) == 448, "base-3 16-row block layout");

/* A weight's type as the tables see it is its KT_* slot, declared with the type table
 * (format/qtypes.h qt_traits.kt); the fast unit there is the intersection with this block. */
_Static_assert(KA_FAST_BLOCK == QT_FAST_ACT_BLOCK, "qtypes.h states the fast activation block");

/* Everything one matmul call needs. isum: NULL, or the test hook that receives every unit's
 * int32 (index (c * n_out + r) * n_units + u, n_units = kern_n_units(w, mode)); float-only
 * paths never write it. */
typedef struct kern_mm_args {
    const kern_w *w;
    const kern_act *a;
    float *y;          /* y[c * ldy + r] */
    int64_t ldy;
    int32_t *isum;
} kern_mm_args;

/* Rows [r0, r1) of y for every column. r0 % 4 == 0; r1 % 4 == 0 or r1 == n_out (a 16-row
 * kernel handles a range that starts or ends inside a group: kernels.h KERN_ROW_SPLIT). */
typedef void (*kern_mm_fn)(const kern_mm_args *m, int64_t r0, int64_t r1);

/* CPU feature bits (dispatch.c fills them from CPUID + XGETBV). */
enum {
    KCPU_AVX2 = 1u << 0,       /* AVX2 + FMA + F16C, OS saves ymm */
    KCPU_AVX512VNNI = 1u << 1, /* AVX-512 F/BW/VL/DQ/VNNI, OS saves zmm + opmask */
    KCPU_AVXVNNI = 1u << 2,    /* AVX-VNNI (VEX vpdpbusd on ymm: CPUID.(7,1):EAX[4]), OS saves ymm */
    KCPU_GFNI = 1u << 3,       /* GFNI (CPUID.(7,0):ECX[8]); set only beside KCPU_AVX512VNNI, for the zmm form */
    KCPU_AMX = 1u << 4,        /* AMX-TILE + AMX-INT8 (CPUID.(7,0):EDX[24,25]), XCR0 tile state on, and the OS
                                * granted this process the tile data (Linux arch_prctl); set only beside
                                * KCPU_AVX512VNNI */
    KCPU_NEON = 1u << 8,
    KCPU_DOTPROD = 1u << 9,
    KCPU_I8MM = 1u << 10,
};

/* One ISA path. mm[kt][mode] may be NULL: dispatch then tries `fallback` (a lower table the
 * same host can run), then the ref entry, which is always complete. Tables are const and exported only by name from their own file. */
typedef struct kern_table {
    const char *name;          /* "ref", "avx2", "avxvnni", "avx512vnni", "amx", "neon", "dotprod", "i8mm" */
    uint32_t needs;            /* KCPU_* bits required */
    kern_mm_fn mm[KT_N][3];    /* [kernel type][kern_numerics] */
    const struct kern_table *fallback;   /* where a NULL entry goes first (then ref); may be NULL */
    bool row16;                /* kern_w_init repacks PQ2_0 (and transcodes PTQ1_0) for this table into the
                                * 16-row layout (KW_ROW16 / KW_PTQ_ROW16) instead of the row-pair one */
} kern_table;

extern const kern_table kern_table_ref;
#if defined(__x86_64__) || defined(_M_X64)
extern const kern_table kern_table_avx2;
extern const kern_table kern_table_avxvnni;
extern const kern_table kern_table_avx512vnni;
extern const kern_table kern_table_amx;
#endif

/* NULL-terminated list of the tables compiled in, worst -> best (tests walk all of them). */
extern const kern_table *const kern_tables[];
/* KCPU_* bits of this host (computed once), less those hidden by kern_cpu_hide. */
uint32_t kern_cpu_features(void);
/* The prefetch hint of a weight stream that a tile reads once per forward (x86 tiles of up to 8
 * columns): true for prefetchnta, false for prefetcht1. A rule by CPU vendor (dispatch.c
 * detect_stream_nta): it moves no bit of any result, only how fast the stream arrives. */
bool kern_stream_nta(void);
/* The K (weights per row) from which a one-column product reads its 16-row groups two at a time
 * (two weight streams per thread: avx512vnni.c r16_pair) rather than one: 4096 where
 * kern_stream_nta holds (AMD), 2048 elsewhere. Like the hint, a rule by vendor that moves no bit. */
int64_t kern_pair1_min_k(void);
/* Tests: report the KCPU_* bits given as absent from now on (0: none), so that the code a table
 * chooses by a feature bit inside it (the AVX-512 tiles without GFNI) runs on a host that has it. */
void kern_cpu_hide(uint32_t bits);
/* The table kern_matmul uses now. */
const kern_table *kern_active(void);
/* x86/act_avx2.c (AVX2 only): max |x| of a full 128-value block, and its rounding into qs with the
 * 16-value sums (returns their total): the same bytes as act.c's portable path. */
float kern_act_amax128_avx2(const float *x);
int32_t kern_act_round128_avx2(const float *x, float id, int8_t *qs, int16_t *bsums);
/* x86/act_avx512.c (AVX-512 F/BW/VL/DQ): the same two steps on 16 lanes, the same bytes. */
float kern_act_amax128_avx512(const float *x);
int32_t kern_act_round128_avx512(const float *x, float id, int8_t *qs, int16_t *bsums);
/* The block paths of the fast-numerics quantisation; every one writes the same bytes. */
typedef enum { KACT_PORTABLE, KACT_AVX2, KACT_AVX512 } kact_path;
/* The path kern_quantize takes: AVX-512 while the active table is the AVX-512 one (so a forced
 * AVX2 table runs AVX2 code only), else AVX2 on a host with it, else portable. It does not
 * choose a table itself: the dispatcher's self-check quantises before any table is active. */
kact_path kern_act_path(void);
/* kern_quantize with the block path chosen by the caller (only one the host runs). Tests run
 * every one. */
void kern_quantize_path(kern_act *a, kact_path path);

/* kern_matmul through table t (NULL entries fall back to ref), with the isum test hook. */
void kern_matmul_table(const kern_table *t, const kern_w *w, const kern_act *a, float *y, int64_t ldy, int64_t r0,
                       int64_t r1, int32_t *isum);

/* True if table t gives ref's bits on a small fixed case (run once before a table is used). */
bool kern_table_selfcheck(const kern_table *t);

/* KT_* of a type (the type table's kt), or -1 for a type the table does not have. */
int kern_type_index(int qt_type);
/* Size in weights of the integer unit for w in mode m (0 for float paths): fast, the type
 * table's unit; ggml, KA_GGML_BLOCK. */
int kern_unit(const kern_w *w, kern_numerics m);
/* Bytes of one quantised activation column of K values in mode m. */
size_t kern_act_col_bytes(kern_numerics m, int64_t K);

/* Weights per block and bytes per block of a QT_* type (the type table's; 0 for an unknown type). */
int kern_block_size(int qt_type);
int kern_block_bytes(int qt_type);
/* Integer values t[0 .. block-1] and scale d (fp16 -> f32) of block b of row r, any layout. */
void kern_block_int(const kern_w *w, int64_t r, int64_t b, int8_t *t, float *d);
/* The reference entries (ref.c): complete for every type. */
void kern_ref_mm_fast(const kern_mm_args *m, int64_t r0, int64_t r1);
void kern_ref_mm_ggml(const kern_mm_args *m, int64_t r0, int64_t r1);
void kern_ref_mm_float(const kern_mm_args *m, int64_t r0, int64_t r1);

/* Shared scalar helpers. */
static inline int kern_pq2_code(const uint8_t *qs, int j) { return (qs[j >> 2] >> (2 * (j & 3))) & 3; }
/* Digit n (0..4) of a base-3 byte: (3 * ((b * 3^n) mod 256)) >> 8 (spec 3.4). */
static inline int kern_b3_digit(uint8_t b, int n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t v = (uint8_t)(b * pow3[n]);
    return (3 * v) >> 8;
}

/* Float lane order helper (see "Float order"): the final pairwise tree. */
static inline float kern_lane_reduce(float acc[16]) {
    for (int s = 8; s >= 1; s >>= 1)
        for (int i = 0; i < s; i++) acc[i] = acc[i] + acc[i + s];
    return acc[0];
}

/* One 16-row group against nc columns (the tile of a kern_r16_mm pass): ac[c] the columns'
 * activations, consecutive columns of one kern_act (ac[c] = ac[0] + c x the column stride: the
 * x86 tiles rely on it), out[c] where their 16 outputs go (rows in keep only), isum[c] their
 * per-block sums (NULL: none; stride isum_stride). n_cols: the whole matmul's column count. */
typedef void (*kern_r16_group_fn)(const void *B, int64_t nb, int nc, int n_cols, const kact_fast *const *ac,
                                  float *const *out, unsigned keep, int32_t *const *isum, int64_t isum_stride);

/* Rows [r0, r1) of a 16-row tensor (KW_ROW16 data, a PTQ1_0 transcode in aux, or KW_PTQ3_ROW16
 * data; group g's blocks start at base + g * nb * blk_bytes) in fast numerics, the driver every
 * ISA's 16-row kernel shares. A group the range covers only in part
 * (r0 or r1 inside it: multiples of 4, KERN_ROW_SPLIT) is computed whole and only its rows in
 * range are stored (keep): every row is the same computation in any range. The columns go in
 * ceil(ncols / tile_max) tiles of near-equal width (17 -> 9 + 8 at 16, 64 -> 8 x 8 at 8); the
 * groups in chunks whose weights fit in L2 (~256 KB), each chunk against one tile at a time (that
 * tile's activations stay in L1/L2 across the chunk). Rows N & ~15 .. N-1: file layout, the
 * reference. tile_max <= 16. */
static inline void kern_r16_mm(const kern_mm_args *m, const void *base, size_t blk_bytes, int64_t r0, int64_t r1,
                               int tile_max, kern_r16_group_fn group) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t nb = w->n_in / 128, N = w->n_out, n16 = N & ~(int64_t)15;
    const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
    const int64_t g1 = r1 < n16 ? r1 : n16;
    const int nt = (a->ncols + tile_max - 1) / tile_max;
    const kact_fast *ac[16];
    float *out[16];
    int32_t *is[16];
    int64_t cg = (int64_t)(256 * 1024) / (nb * (int64_t)blk_bytes);
    if (cg < 1) cg = 1;
    for (int64_t gc = r0 / 16; gc * 16 < g1; gc += cg) {
        for (int ti = 0, c0 = 0; ti < nt; ti++) {
            const int nc = (a->ncols - c0) / (nt - ti);   /* the widths differ by at most 1 */
            const int64_t ge = gc + cg < (g1 + 15) / 16 ? gc + cg : (g1 + 15) / 16;
            /* the tile's pointers at group gc, then one step per group (16 rows) */
            for (int c = 0; c < nc; c++) {
                const int cc = c0 + c;
                ac[c] = (const kact_fast *)(const void *)((const uint8_t *)a->q + col * (size_t)cc);
                out[c] = m->y + cc * m->ldy + 16 * gc;
                if (m->isum) is[c] = m->isum + ((int64_t)cc * N + 16 * gc) * nb;
            }
            for (int64_t g = gc; g < ge; g++) {
                const int64_t lo = (r0 > 16 * g ? r0 : 16 * g) - 16 * g, hi = (g1 < 16 * g + 16 ? g1 : 16 * g + 16) - 16 * g;
                const unsigned keep = ((1u << hi) - 1u) & ~((1u << lo) - 1u);
                if (g > gc) {
                    for (int c = 0; c < nc; c++) out[c] += 16;
                    if (m->isum)
                        for (int c = 0; c < nc; c++) is[c] += 16 * nb;
                }
                group((const uint8_t *)base + (size_t)(g * nb) * blk_bytes, nb, nc, a->ncols, ac, out, keep, m->isum ? is : NULL, nb);
            }
            c0 += nc;
        }
    }
    if (r1 > n16) kern_ref_mm_fast(m, r0 > n16 ? r0 : n16, r1);   /* N % 16 tail rows: file layout */
}

#endif /* TERN_KERNELS_KERN_IMPL_H */
