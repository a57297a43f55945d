/* kernels.h: what the model layer sees of the kernels. Layer 3: pure functions over row
 * ranges, no threads here (the caller splits rows with pool_for, see runtime/pool.h).
 * Source of truth: ../shared/DESIGN.md "The one idea that matters" and "Numerics modes";
 * ../shared/spec/ternary-gguf.md section 8 (reference numerics).
 *
 * Contract for every path (ref, avx2, avxvnni, avx512vnni, amx, neon, dotprod, i8mm):
 * - A weight W (ne = [K, N]) is prepared once at load (kern_w_init, in place for PQ2_0) into the
 *   layout of the table that will run it: the 4-row x 128-weight row-pair block (136 bytes; rows
 *   N & ~3 .. N-1 stay in file layout) for ARM, the 16-row x 128-weight block (544 bytes; rows
 *   N & ~15 .. N-1 stay in file layout) for AVX2, AVX-VNNI and AVX-512 VNNI (kern_impl.h). Every path
 *   reads every layout (a table without a kernel for one runs the reference on it).
 * - An activation (ncols columns of K floats) is quantised ONCE by kern_quantize and shared by
 *   every weight that reads it.
 * - kern_matmul computes rows [r0, r1) of y for all ncols columns. r0 is a multiple of
 *   KERN_ROW_ALIGN (or r0 == r1); r1 is a multiple of it or N. Each (row, column) output is
 *   computed with a fixed integer/float order, so the bits do not depend on the ISA, on the
 *   row split, or on ncols (column c of a matmul equals a matvec of column c, bit for bit).
 */
#ifndef TERN_KERNELS_KERNELS_H
#define TERN_KERNELS_KERNELS_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KERN_ROW_ALIGN 4
/* Row ranges that start (and end, unless at N) on multiples of KERN_ROW_SPLIT never split a
 * 16-row group: callers that split rows between threads use it (a range aligned only to
 * KERN_ROW_ALIGN is correct, same bits, but a 16-row kernel computes the whole group at its
 * edges and keeps the rows in range). */
#define KERN_ROW_SPLIT 16

typedef enum {
    KQ_FAST = 0,  /* tern's int8 blocks of 128, f32 scale, 16-value sums (layout: kern_impl.h) */
    KQ_GGML = 1,  /* Q8_0 per 32 as the reference x86 build rounds (127/amax, half to even) */
    KQ_F32 = 2,   /* dequantised weights, f32 activations (the mathematical model) */
} kern_numerics;

/* A weight matrix prepared for the kernels. Owns nothing but `aux` when aux_owned (freed by
 * kern_w_free). */
typedef struct kern_w {
    int type;          /* QT_* of the tensor as loaded (legacy id-42 g128 already QT_PQ2_0) */
    int layout;        /* KW_* below: how `data` is laid out now */
    int64_t n_in;      /* K = ne[0] */
    int64_t n_out;     /* N = ne[1] */
    uint8_t *data;     /* the tensor bytes, repacked in place where the layout says so */
    void *aux;         /* optional side buffer (e.g. a PTQ1_0 -> 2-bit transcode) */
    bool aux_owned;    /* aux was allocated by kern_w_init (else it lies in the caller's buffer) */
    bool has_code3;    /* PQ2_0/Q2_0 tensor holds at least one code 3 (+2d) */
} kern_w;

enum {
    KW_FILE = 0,        /* the type's own file layout (all types; scalar/generic paths) */
    KW_ROWPAIR = 1,     /* PQ2_0 row-pair interleaved 136-byte blocks (+ tail rows in file layout) */
    KW_PTQ_ROWPAIR = 2, /* PTQ1_0: data in file layout, aux = rows 0..N4-1 transcoded to row-pair */
    KW_ROW16 = 3,       /* PQ2_0 16-row interleaved 544-byte blocks (+ tail rows N16.. in file layout) */
    KW_PTQ_ROW16 = 4,   /* PTQ1_0: data in file layout, aux = rows 0..N16-1 transcoded to KW_ROW16 */
    KW_PTQ3_ROW16 = 5,  /* PTQ1_0 direct: base-3 bytes regrouped in place into 16-row 448-byte blocks
                         * (+ tail rows N16.. in file layout); no side buffer */
};

/* kern_w_init_ex flags. */
enum {
    KW_F_KEEP_FILE = 1u << 0,         /* PQ2_0: do not repack (tests, tools that rewrite files) */
    KW_F_PTQ1_0_DIRECT = 1u << 1,     /* PTQ1_0: direct base-3 kernel, no side buffer (the 16-row
                                       * layout KW_PTQ3_ROW16 where the layout is 16-row, else the file's) */
    KW_F_PTQ1_0_TRANSCODE = 1u << 2,  /* PTQ1_0: transcode to the 2-bit layout (aux) */
    KW_F_ROWPAIR = 1u << 3,           /* PQ2_0 repack / PTQ1_0 transcode: the row-pair layout */
    KW_F_ROW16 = 1u << 4,             /* ... the 16-row layout. Neither: the active table's (row16) */
};
/* PTQ1_0 default when neither PTQ1_0 flag is given: chosen by measurement
 * (bench/RESULTS.md, "PTQ1_0"): the transcode (a decode streams it at the bus on every host
 * measured, where the direct base-3 kernel's digit extraction is compute-bound at one column). Memory: the side buffer holds 34/28 of the file
 * bytes of rows 0..NG-1 (NG = kern_w_grouped_rows: N & ~3 row-pair, N & ~15 16-row); every path
 * (kernels, kern_block_int: ref, f32 mode, kern_w_row_f32) reads those rows from it and only the
 * tail rows NG.. from data, so the owner of data may release the file bytes of rows 0..NG-1 (the
 * model loader does); a matvec streams only the side buffer and the tail rows (kern_w_bytes). */
#define KERN_PTQ1_0_TRANSCODE_DEFAULT true

/* Prepare a weight at load. Validates (errors name `name`): type has a kernel (else
 * TERN_E_UNSUPPORTED), n_in, n_out > 0 and n_in a multiple of the block size, byte size does
 * not overflow, every block's fp16 scale is finite (else TERN_E_FORMAT naming the row, block and
 * the scale's bits: a NaN/Inf scale is a damaged file, which the int8 activation path would turn
 * into finite logits; F32/F16/BF16 data is not scanned); TERN_E_NOMEM for the repack scratch or the PTQ1_0 side
 * buffer. PQ2_0 is repacked in place into KW_ROWPAIR or KW_ROW16 (flags KW_F_ROWPAIR /
 * KW_F_ROW16, else the layout of the active table: kern_impl.h; the tail rows stay in file layout);
 * PQ2_0/Q2_0 note code 3 in has_code3. data (N rows in file layout, n_out * row bytes) must stay
 * alive and writable for the life of w; w owns only aux. On error w holds no allocation. */
int kern_w_init(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out,
                tern_err *err);
int kern_w_init_ex(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out,
                   unsigned flags, tern_err *err);
/* kern_w_init_ex with the PTQ1_0 side buffer placed in the caller's memory: side (64-byte
 * aligned, side_cap >= kern_w_side_bytes(type, n_in, n_out) bytes, alive for the life of w)
 * instead of an allocation of its own, which kern_w_free then leaves. A model loader puts every
 * transcode in one buffer, so the side buffers are streamed from huge pages like the file buffer
 * (small separate allocations get 4 KB pages). side NULL: as kern_w_init_ex. */
int kern_w_init_in(kern_w *w, const char *name, int type, uint8_t *data, int64_t n_in, int64_t n_out,
                   unsigned flags, void *side, size_t side_cap, tern_err *err);
/* An upper bound of the side buffer bytes kern_w_init gives a weight of this type and shape when
 * it transcodes (PTQ1_0: 34 bytes per 128 weights of rows 0 .. (n_out & ~3) - 1); 0 for the
 * other types and for a row length that is not a multiple of 128. */
size_t kern_w_side_bytes(int type, int64_t n_in, int64_t n_out);
/* Rows 0 .. n-1 of w are in a grouped layout (row-pair: N & ~3, 16-row: N & ~15; file layout: 0). */
int64_t kern_w_grouped_rows(const kern_w *w);
/* Releases aux (NULL-safe; data is the caller's). */
void kern_w_free(kern_w *w);
/* Bytes a matvec streams from memory for w: the tensor as laid out now; with a PTQ1_0
 * transcode, the side buffer plus the tail rows (the figure for the decode byte budget). */
size_t kern_w_bytes(const kern_w *w);
/* Dequantise row r (0 <= r < n_out) of a prepared weight to f32 (any layout): dst holds n_in
 * floats, (code - 1) * d and the like exactly. Embedding lookups, f32 mode. */
void kern_w_row_f32(const kern_w *w, int64_t r, float *dst);

/* A quantised activation: ncols columns of K values. x stays valid (float paths read it). */
typedef struct kern_act {
    const float *x;    /* (ncols, K) row-major f32 */
    void *q;           /* kern_quantize output (kern_act_bytes), or NULL when no weight needs it */
    int64_t K;
    int ncols;
    kern_numerics mode;
} kern_act;

/* Bytes needed for the quantised form of ncols columns of K values in mode m (0 for KQ_F32). */
size_t kern_act_bytes(kern_numerics m, int64_t K, int ncols);
/* Quantise a->x into a->q (a->q must hold kern_act_bytes; any alignment). One pass per column;
 * no-op in KQ_F32. Scalar and ISA-independent, so every path reads the same bytes. Any K >= 1
 * (a partial last block is zero-padded). Trusts a (TERN_ASSERT on ncols < 1, K < 1, q NULL). */
void kern_quantize(kern_act *a);

/* y[c * ldy + r] = sum_k W[r, k] * x[c, k] for r in [r0, r1), c < a->ncols, with the fixed
 * integer/float order of kern_impl.h. Trusts its arguments (TERN_ASSERT on a shape that
 * kern_matmul_check rejects): check once at session set-up, not per token. Thread-safe for
 * disjoint row ranges; allocates nothing (its scratch is on the stack: on the AVX2 path ~274 KB
 * for 16 or more columns, x86/avx2.c "wide matmul", 68 KB for one column, mv_rowpair; up to
 * ~350 KB when a wide batch's 1 leftover column runs the matvec from inside the wide path). */
void kern_matmul(const kern_w *w, const kern_act *a, float *y, int64_t ldy, int64_t r0, int64_t r1);
/* TERN_OK, or TERN_E_ARG with a message if (w, a, ldy, r0, r1) is a shape kern_matmul does not
 * accept: K mismatch, ncols < 1, unknown mode, a->q missing when the weight needs integer
 * activations, ldy < n_out when ncols > 1, or a row range outside [0, N) or not aligned to
 * KERN_ROW_ALIGN (r1 may be N). */
int kern_matmul_check(const kern_w *w, const kern_act *a, int64_t ldy, int64_t r0, int64_t r1, tern_err *err);

/* The active ISA path: chosen once from CPUID+XGETBV (x86) or hwcaps (ARM); kern_force_isa forces
 * a path ("ref", "avx2", "avxvnni", "avx512vnni", "amx", "neon", "dotprod", "i8mm"). Returns its name. */
const char *kern_isa(void);
/* True if the active path runs PQ2_0/PTQ1_0 in the 16-row layout: kern_w_init without a layout
 * flag then prepares that layout (KW_ROW16, KW_PTQ_ROW16), else the row-pair one. */
bool kern_isa_row16(void);
/* Whether the active table runs on x86 AVX2 + FMA + F16C (avx2, avxvnni, avx512vnni): the model's
 * element-wise vector code (src/model/ops.h) then takes its AVX2 copy. */
bool kern_isa_avx2(void);
/* Whether the active table runs on AVX-512 F/BW/VL/DQ (avx512vnni): the model's vector code then
 * takes its copies compiled with AVX-512VL (the same 8-lane operations, 32 vector registers). */
bool kern_isa_avx512(void);
/* Whether this CPU has AMX-INT8 tiles and the OS lets this process use them (the amx path can run). */
bool kern_cpu_amx(void);
/* How many of ncols columns of a fast-numerics product with w the active table runs on AMX tiles
 * (the amx path, x86/amx.c: the first ones; the rest on the AVX-512 VNNI kernels); 0 on every
 * other table. bench-kernel measures those products against the tile rate. */
int kern_amx_tile_cols(const kern_w *w, int ncols);
/* Force a path by name (tern_set_isa; process-wide): TERN_E_UNSUPPORTED if it is not
 * compiled in, the host cannot run it, or it fails the start-up self-check against ref. */
int kern_force_isa(const char *name, tern_err *err);
/* Back to the automatic choice (the fastest path this CPU runs), after a kern_force_isa. */
void kern_auto_isa(void);

#endif /* TERN_KERNELS_KERNELS_H */
