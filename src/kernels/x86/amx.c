/* amx.c: AMX-INT8 kernels (Intel Sapphire Rapids and later: tdpbsud on 16 x 64-byte tiles) for
 * the 16-row 2-bit layout (KW_ROW16, the PTQ1_0 transcode KW_PTQ_ROW16) in fast numerics, in
 * tiles of AMX_MIN_COLS to 16 columns: prefill and large server batches (amx_cols says how many
 * of a batch's columns). Fewer columns, every other layout, type and mode go to the AVX-512 VNNI
 * table. Exports only kern_table_amx;
 * integer and float order: kern_impl.h, reproduced exactly (tests compare every int32 and bit).
 *
 * Why: one tdpbsud multiplies a 16 x 64 int8 tile by a 64 x 16 one, 16384 multiply-adds, in
 * about 16 cycles, 7x the vpdpbusd zmm rate (bench-kernel measures both). The weights are 2-bit
 * codes in memory, so the kernel unpacks them into int8 tiles (32 stores of 64 bytes per block of
 * 16 rows), and the float epilogue runs per block and column on the vector units: those, and the
 * tile loads, set its rate. On bench/RESULTS.md host D, one thread, 17408 x 5120 (L3-resident),
 * against the AVX-512 VNNI tiles: 0.5x at 2 columns, 0.95x at 8, 1.0x at 9, 1.15x at 12, 1.3x at
 * 16, 1.4x at 32 and 64. Where a batch's weights stream from DRAM the tile path overlaps the
 * stream worse: bonsai-1.7b's forward over 9 columns cost 2.18-2.20 decode steps on it against
 * 1.92-2.12 on the VNNI tiles, 11 columns a tie, 12 columns 2.35-2.37 against 2.31-2.61, 13-15
 * columns 6-8% less (bench-spec --cost, alternating); hence AMX_MIN_COLS, and below it the VNNI
 * table.
 *
 * Mapping. The tile product is C[m][n] += sum_k A[m][k] * B[k / 4][4 n + k % 4] (A signed
 * bytes, B unsigned, C int32). Here m = a column (token), n = one of the group's 16 rows, k = 64
 * weights of the block: A is read in place from the quantised activations (row m = column m's
 * block qs, stride the column's bytes), and B is exactly the 16-row layout's slots: B row
 * 4 j + s of the block's first half is slot s of zmm j ((v >> 2s) & 3: in lane i the codes of
 * weights 16 j + 4 s .. + 3 of row i), j = 0..3; zmm 4..7 give the second half. So one block of
 * one group against up to 16 columns is two tdpbsud into one C tile: C[c][i] = sum u q over the
 * block, and isum = C - sum q (u = t + 1 <= 3, |isum| <= 128 * 2 * 127: exact in int32).
 * Epilogue per column c: acc[c] = fma(d_w * d_a, (float)isum, acc[c]) on 16 rows at once, the
 * float order of every path.
 *
 * Loop. The groups in chunks whose packed weights fit in ~256 KB of L2, each chunk against one
 * pass of up to AMX_CC columns at a time (the order of kern_r16_mm: with all of a prefill's
 * columns per group, the activations fell out of L2 at K 6144 and the kernel ran slower than the
 * VNNI one). Per group and pass, tiles of up to 16 columns; the blocks in chunks of AMX_KC, which
 * the pass's first tile unpacks AMX_AHEAD blocks ahead of its products and the later tiles reuse. Within a tile, block
 * b's A and C tiles alternate with block b + 1's (A 1, 2 / 6, 7; C 0 / 5; B 3, 4), and block b's
 * epilogue runs AMX_LAG blocks later, from the C tile stored to memory, so that the vector work
 * does not wait on the tile just stored.
 *
 * The same file compiled with -DKERN_EMUAMX and AVX2 flags is kern_table_amx_emu (tests only):
 * the tile operations then run on a scalar emulation of their SDM semantics and the zmm ones on
 * emu512.h, so hosts without AMX check the mapping, the loop and the epilogue against ref. */
#include "kernels/kern_impl.h"

#if (defined(__linux__) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) &&           \
     defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)) ||                            \
    (defined(KERN_EMUAMX) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#include <immintrin.h>
#include <string.h>

#define AMX_MIN_COLS 12  /* below: the AVX-512 VNNI tiles are as fast or faster (header) */
#define AMX_KC 16        /* blocks unpacked per pass: 16 x 2 KB */
#define AMX_CC 128       /* columns per pass: accumulators 128 x 16 floats (8 KB) */
#define AMX_PF 24        /* weight prefetch distance in blocks (13 KB), as the VNNI streaming tiles */
#define AMX_LAG 2        /* a block's epilogue runs this many blocks after its tile operations */
#define AMX_AHEAD 2      /* the first tile of a pass unpacks this many blocks ahead of its products */

/* The tile configuration (ldtilecfg's 64-byte operand, palette 1): per tile its bytes per row and rows. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
_Static_assert(sizeof(amx_cfg) == 64, "ldtilecfg operand");

#ifdef KERN_EMUAMX
#include "kernels/x86/emu512.h"
#define TABLE_NAME kern_table_amx_emu
#define TABLE_STR "amx_emu"
#define TABLE_NEEDS KCPU_AVX2
#define VNNI_TABLE kern_table_avx512vnni_emu
extern const kern_table kern_table_avx512vnni_emu;

/* The tile registers of this thread and their configuration (SDM: rows x colsb bytes each). */
static _Thread_local struct {
    amx_cfg cfg;
    uint8_t t[8][16][64];
} emu_amx;
static void amx_config(const amx_cfg *c) {
    emu_amx.cfg = *c;
    memset(emu_amx.t, 0, sizeof emu_amx.t);
}
static void amx_release(void) { memset(&emu_amx, 0, sizeof emu_amx); }
static void amx_zero(int t) { memset(emu_amx.t[t], 0, sizeof emu_amx.t[t]); }
static void amx_load(int t, const void *p, intptr_t stride) {
    for (int r = 0; r < emu_amx.cfg.rows[t]; r++) memcpy(emu_amx.t[t][r], (const uint8_t *)p + r * stride, emu_amx.cfg.colsb[t]);
}
static void amx_store(int t, void *p, intptr_t stride) {
    for (int r = 0; r < emu_amx.cfg.rows[t]; r++) memcpy((uint8_t *)p + r * stride, emu_amx.t[t][r], emu_amx.cfg.colsb[t]);
}
/* tdpbsud c, a, b: c[m][n] += sum over k < colsb(a) of (int8) a[m][k] * (uint8) b[k / 4][4 n + k % 4] */
static void amx_dpbsud(int c, int a, int b) {
    for (int m = 0; m < emu_amx.cfg.rows[c]; m++)
        for (int n = 0; n < emu_amx.cfg.colsb[c] / 4; n++) {
            int32_t acc;
            memcpy(&acc, &emu_amx.t[c][m][4 * n], 4);
            int64_t s = acc;
            for (int k = 0; k < emu_amx.cfg.colsb[a]; k++)
                s += (int32_t)(int8_t)emu_amx.t[a][m][k] * (int32_t)emu_amx.t[b][k / 4][4 * n + k % 4];
            acc = (int32_t)(uint32_t)s;   /* wraps like the instruction (never reached here) */
            memcpy(&emu_amx.t[c][m][4 * n], &acc, 4);
        }
}
#define AMX_TILE_ATTR static __attribute__((noinline))
#define AMX_UNROLL16
#define AMX_ZERO(t) amx_zero(t)
#define AMX_LOAD(t, p, s) amx_load((t), (p), (s))
#define AMX_STORE(t, p, s) amx_store((t), (p), (s))
#define AMX_DPBSUD(c, a, b) amx_dpbsud((c), (a), (b))
#else
#include "kernels/x86/v512.h"
#define TABLE_NAME kern_table_amx
#define TABLE_STR "amx"
#define TABLE_NEEDS (KCPU_AVX2 | KCPU_AVX512VNNI | KCPU_AMX)
#define VNNI_TABLE kern_table_avx512vnni
/* ldtilecfg and tileloadd are written here rather than through GCC's intrinsics, which declare
 * less memory than the instructions read: _tile_loadconfig's operand is an 8-byte object, so the
 * stores that fill the rest of the 64-byte configuration may be dropped as dead (a
 * ThreadSanitizer build drops them, and ldtilecfg then faults on the all-zero row counts), and
 * _tile_loadd names no memory at all, so the stores to a buffer it reads (the unpacked weights)
 * may be dropped or moved past it. Here ldtilecfg reads the whole configuration and a tile load
 * may read any memory. */
static void amx_config(const amx_cfg *c) { __asm__ volatile("ldtilecfg\t%X0" ::"m"(*c)); }
static void amx_release(void) { _tile_release(); }
#define AMX_TILE_ATTR static inline __attribute__((always_inline))
#define AMX_UNROLL16 _Pragma("GCC unroll 16")
/* the tile numbers reach the instructions as literal digits (they are pasted into register names) */
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_LOAD(t, p, s) AMX_LOADD(t, p, s)
#define AMX_LOADD(t, p, s)                                                                      \
    __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #t "|tileloadd\t%%tmm" #t ", [%0+%1*1]}"     \
                     :: "r"((const void *)(p)), "r"((long)(s)) : "memory")
#define AMX_STORE(t, p, s) _tile_stored(t, (p), (s))
#define AMX_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#endif

#define T_C0 0
#define T_A0 1
#define T_A1 2
#define T_B0 3
#define T_B1 4
#define T_C1 5
#define T_A2 6
#define T_A3 7

/* Configure the tiles for a column tile of nc columns: A and C nc rows, B 16 (k / 4). */
static void amx_setup(int nc) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64;
    c.rows[T_C0] = c.rows[T_C1] = c.rows[T_A0] = c.rows[T_A1] = c.rows[T_A2] = c.rows[T_A3] = (uint8_t)nc;
    c.rows[T_B0] = c.rows[T_B1] = 16;
    amx_config(&c);
}

/* Blocks [0, kn) of one group into B tiles: wq[b][h] holds half h (weights 64 h .. 64 h + 63) as
 * 16 rows of 64 bytes, row 4 j + s = slot s of zmm 4 h + j, one code per byte. Prefetches the
 * weight stream AMX_PF blocks ahead (hints only), with the hint of the VNNI streaming tiles
 * (kern_stream_nta). */
static inline __attribute__((always_inline)) void amx_unpack(const kern_r16_block *blk, int kn, uint8_t (*wq)[2][16][64], bool nta) {
    const v512 m3 = v512_set1_8(3);
    for (int b = 0; b < kn; b++) {
        const uintptr_t p = (uintptr_t)(blk + b) + AMX_PF * sizeof(kern_r16_block);   /* may pass the end: never faults */
        if (nta)
            for (int o = 0; o < (int)sizeof(kern_r16_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_NTA);
        else
            for (int o = 0; o < (int)sizeof(kern_r16_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_T1);
        for (int j = 0; j < 8; j++) {
            const v512 v = v512_loadu(blk[b].qs[j]);
            uint8_t (*const r)[64] = wq[b][j >> 2] + 4 * (j & 3);
            v512_store(r[0], v512_and(v, m3));
            v512_store(r[1], v512_and(v512_srli16(v, 2), m3));
            v512_store(r[2], v512_and(v512_srli16(v, 4), m3));
            v512_store(r[3], v512_and(v512_srli16(v, 6), m3));
        }
    }
}

/* One block against the tile's columns: A tiles TA0, TA1 from the activation block q (columns
 * col bytes apart) times B (T_B0, T_B1, loaded) into C tile TC, stored to cb (a macro: the tile
 * numbers must reach the instructions as literal digits). */
#define AMX_BLOCK(TC, TA0, TA1, q, col, cb)             \
    do {                                                \
        AMX_LOAD(TA0, (q)->qs, (intptr_t)(col));        \
        AMX_LOAD(TA1, (q)->qs + 64, (intptr_t)(col));   \
        AMX_ZERO(TC);                                   \
        AMX_DPBSUD(TC, TA0, T_B0);                      \
        AMX_DPBSUD(TC, TA1, T_B1);                      \
        AMX_STORE(TC, (cb), 64);                        \
    } while (0)

/* The test hook (kern_mm_args.isum) seen from one tile: entry (column c, row i, block b) at
 * p[c * col + i * row + b], p at the tile's column 0 and the group's row 0. */
typedef struct {
    int32_t *p;
    int64_t col, row;
} amx_hook;

/* The epilogue of block bb for the tile's NC columns: isum = C - sum q, then the float step. */
static inline __attribute__((always_inline)) void amx_epilogue(const int32_t (*cb)[16], const kern_r16_block *blk,
                                                               const uint8_t *ab, size_t col, int NC, v512f *acc,
                                                               const amx_hook *hk, int64_t bb, unsigned keep) {
    const v512f dw = v512f_ph(blk->d);
AMX_UNROLL16
    for (int c = 0; c < NC; c++) {
        const kact_fast *q = (const kact_fast *)(const void *)(ab + col * (size_t)c);
        const v512 t = v512_sub32(v512_loadu(cb[c]), v512_set1_32(q->sum));   /* isum = sum u q - sum q */
        if (hk) {
            int32_t ti[16];
            v512_store(ti, t);
            for (int i = 0; i < 16; i++)
                if ((keep >> i) & 1) hk->p[c * hk->col + i * hk->row + bb] = ti[i];
        }
        acc[c] = v512f_fmadd(v512f_mul(dw, v512f_set1(q->d)), v512f_cvt32(t), acc[c]);
    }
}

/* Blocks [kb, kb + kn) of group G (unpacked in wq, or unpacked here AMX_AHEAD blocks ahead when
 * unpack) against one tile of NC columns whose column c lies at ab + c * col, into the
 * accumulators facc[0 .. NC-1] (kept in memory between calls). Block b's products go to the C
 * tile and A tiles of parity b & 1, and its epilogue runs AMX_LAG blocks later, from the C tile
 * stored to memory then: the tile store's wait for the multiply overlaps the next blocks' work
 * instead of stalling it. hk: NULL, or the test hook at this tile's column 0. */
AMX_TILE_ATTR void amx_tile(const kern_r16_block *G, int64_t kb, int kn, const uint8_t *ab, size_t col, int NC,
                            uint8_t (*wq)[2][16][64], bool unpack, bool nta, float (*facc)[16], const amx_hook *hk,
                            unsigned keep) {
    int32_t cbuf[4][16][16] __attribute__((aligned(64)));
    v512f acc[16];
AMX_UNROLL16
    for (int c = 0; c < NC; c++) acc[c] = v512f_loadu(facc[c]);
    for (int b = 0; b < kn + AMX_LAG; b++) {
        if (b < kn) {
            if (unpack && b + AMX_AHEAD < kn) amx_unpack(G + kb + b + AMX_AHEAD, 1, wq + b + AMX_AHEAD, nta);
            const kact_fast *q = (const kact_fast *)(const void *)ab + kb + b;
            AMX_LOAD(T_B0, wq[b][0], 64);
            AMX_LOAD(T_B1, wq[b][1], 64);
            if (b & 1) AMX_BLOCK(T_C1, T_A2, T_A3, q, col, cbuf[b & 3]);
            else AMX_BLOCK(T_C0, T_A0, T_A1, q, col, cbuf[b & 3]);
        }
        if (b >= AMX_LAG) {
            const int64_t bb = kb + b - AMX_LAG;
            amx_epilogue((const int32_t (*)[16])cbuf[(b - AMX_LAG) & 3], G + bb, ab + (size_t)bb * sizeof(kact_fast), col, NC, acc,
                         hk, bb, keep);
        }
    }
AMX_UNROLL16
    for (int c = 0; c < NC; c++) v512f_storeu(facc[c], acc[c]);
}

#ifdef KERN_EMUAMX
static void amx_tile_n(const kern_r16_block *G, int64_t kb, int kn, const uint8_t *ab, size_t col, int nc,
                       uint8_t (*wq)[2][16][64], bool unpack, bool nta, float (*facc)[16], const amx_hook *hk,
                       unsigned keep) {
    amx_tile(G, kb, kn, ab, col, nc, wq, unpack, nta, facc, hk, keep);
}
#else
/* one copy of amx_tile per width, NC a constant (the accumulators stay in registers) */
typedef void (*amx_tile_fn)(const kern_r16_block *, int64_t, int, const uint8_t *, size_t, uint8_t (*)[2][16][64], bool,
                            bool, float (*)[16], const amx_hook *, unsigned);
#define AMX_WIDTH(NC)                                                                                                  \
    static void amx_tile_##NC(const kern_r16_block *G, int64_t kb, int kn, const uint8_t *ab, size_t col,               \
                              uint8_t (*wq)[2][16][64], bool unpack, bool nta, float (*facc)[16], const amx_hook *hk, \
                              unsigned keep) {                                                                          \
        amx_tile(G, kb, kn, ab, col, NC, wq, unpack, nta, facc, hk, keep);                                 \
    }
AMX_WIDTH(1) AMX_WIDTH(2) AMX_WIDTH(3) AMX_WIDTH(4) AMX_WIDTH(5) AMX_WIDTH(6) AMX_WIDTH(7) AMX_WIDTH(8)
AMX_WIDTH(9) AMX_WIDTH(10) AMX_WIDTH(11) AMX_WIDTH(12) AMX_WIDTH(13) AMX_WIDTH(14) AMX_WIDTH(15) AMX_WIDTH(16)
static const amx_tile_fn amx_tiles[17] = {NULL, amx_tile_1, amx_tile_2, amx_tile_3, amx_tile_4, amx_tile_5,
                                          amx_tile_6, amx_tile_7, amx_tile_8, amx_tile_9, amx_tile_10, amx_tile_11,
                                          amx_tile_12, amx_tile_13, amx_tile_14, amx_tile_15, amx_tile_16};
static void amx_tile_n(const kern_r16_block *G, int64_t kb, int kn, const uint8_t *ab, size_t col, int nc,
                       uint8_t (*wq)[2][16][64], bool unpack, bool nta, float (*facc)[16], const amx_hook *hk,
                       unsigned keep) {
    amx_tiles[nc](G, kb, kn, ab, col, wq, unpack, nta, facc, hk, keep);
}
#endif

/* One 16-row group (blocks at G) against the cn columns from c0 (cn <= AMX_CC): rows in keep of
 * out (out[c * ldy + i]), isum (NULL or the hook at column 0, row 0 of the group:
 * [(c * n_out + i) * nb + b]). The columns in tiles of near-equal widths <= 16 (17 -> 9 + 8); the
 * blocks in chunks of AMX_KC, which the first tile unpacks and the others reuse. */
static void amx_group(const kern_r16_block *G, int64_t nb, const kern_act *a, size_t col, int c0, int cn, float *out,
                      int64_t ldy, unsigned keep, int32_t *isum, int64_t n_out, int *cfg_nc, uint8_t (*wq)[2][16][64],
                      float (*facc)[16], bool nta) {
    const int nt = (cn + 15) / 16;
    memset(facc, 0, sizeof(float) * 16 * (size_t)cn);
    for (int64_t kb = 0; kb < nb; kb += AMX_KC) {
        const int kn = nb - kb < AMX_KC ? (int)(nb - kb) : AMX_KC;
        amx_unpack(G + kb, kn < AMX_AHEAD ? kn : AMX_AHEAD, wq, nta);
        for (int ti = 0, t0 = 0; ti < nt; ti++) {
            const int tn = (cn - t0) / (nt - ti);
            if (tn != *cfg_nc) {
                amx_setup(tn);
                *cfg_nc = tn;
            }
            const uint8_t *ab = (const uint8_t *)a->q + col * (size_t)(c0 + t0);
            const amx_hook hk = {isum ? isum + (int64_t)(c0 + t0) * n_out * nb : NULL, n_out * nb, nb};
            amx_tile_n(G, kb, kn, ab, col, tn, wq, ti == 0, nta, facc + t0, isum ? &hk : NULL, keep);
            t0 += tn;
        }
    }
    for (int c = 0; c < cn; c++) v512f_mask_storeu(out + (int64_t)(c0 + c) * ldy, keep, v512f_loadu(facc[c]));
}

/* Rows [r0, r1) of a 16-row 2-bit tensor (group g's blocks at base + g * nb): every group the
 * range touches is computed whole and only its rows in range are stored (kern_r16_mm's rule);
 * rows N & ~15 .. N-1 (file layout) by the reference. */
static void amx_row16(const kern_mm_args *m, const kern_r16_block *base, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const int64_t nb = w->n_in / 128, N = w->n_out, n16 = N & ~(int64_t)15;
    const int64_t g1 = r1 < n16 ? r1 : n16;
    const size_t col = kern_act_col_bytes(KQ_FAST, m->a->K);
    const bool nta = kern_stream_nta();
    uint8_t wq[AMX_KC][2][16][64] __attribute__((aligned(64)));
    float facc[AMX_CC][16] __attribute__((aligned(64)));
    int cfg_nc = 0;
    /* groups in chunks whose packed weights fit in ~256 KB of L2, each chunk against one pass of
     * columns at a time (kern_r16_mm's order): the chunk's weights and the pass's activations stay
     * in L2 while the other is swept, where a whole prefill's columns per group would not */
    int64_t cg = (int64_t)(256 * 1024) / (nb * (int64_t)sizeof(kern_r16_block));
    if (cg < 1) cg = 1;
    const int ncols = m->a->ncols, np = (ncols + AMX_CC - 1) / AMX_CC;
    for (int64_t gc = r0 / 16; 16 * gc < g1; gc += cg)
        for (int pi = 0, c0 = 0; pi < np; pi++) {
            const int cn = (ncols - c0) / (np - pi);   /* near-equal passes (129 -> 65 + 64) */
            for (int64_t g = gc; g < gc + cg && 16 * g < g1; g++) {
                const int64_t lo = (r0 > 16 * g ? r0 : 16 * g) - 16 * g, hi = (g1 < 16 * g + 16 ? g1 : 16 * g + 16) - 16 * g;
                const unsigned keep = ((1u << hi) - 1u) & ~((1u << lo) - 1u);
                amx_group(base + g * nb, nb, m->a, col, c0, cn, m->y + 16 * g, m->ldy, keep,
                          m->isum ? m->isum + 16 * g * nb : NULL, N, &cfg_nc, wq, facc, nta);
            }
            c0 += cn;
        }
    if (cfg_nc) amx_release();
    if (r1 > n16) kern_ref_mm_fast(m, r0 > n16 ? r0 : n16, r1);
}

/* How many of a batch's ncols columns the tiles take (the first ones): all where every tile of
 * amx_row16's split (passes of <= AMX_CC columns, each in tiles of <= 16, both near-equal) is at
 * least AMX_MIN_COLS wide; for 17..23 and 33..35 columns, whose tiles would be 8..11 wide, the
 * whole tiles of 16 (the rest go to the VNNI tiles); none below AMX_MIN_COLS. Passes over 64
 * columns always hold tiles of 13 or more. */
static int amx_cols(int ncols) {
    if (ncols < AMX_MIN_COLS) return 0;
    if (ncols > AMX_CC) return ncols;
    const int nt = (ncols + 15) / 16;
    return ncols / nt >= AMX_MIN_COLS ? ncols : ncols / 16 * 16;
}

/* Kernel type kt's weight, 16-row 2-bit data at base: the first amx_cols columns on the tiles,
 * the others on the VNNI table's entry as a matmul of their own (column c of a matmul is a
 * matvec of column c, bit for bit: kernels.h). */
static void amx_mm(const kern_mm_args *m, const kern_r16_block *base, int kt, int64_t r0, int64_t r1) {
    const kern_act *a = m->a;
    const int na = amx_cols(a->ncols);
    if (na == 0) {
        VNNI_TABLE.mm[kt][KQ_FAST](m, r0, r1);
        return;
    }
    kern_act head = *a;
    head.ncols = na;
    const kern_mm_args mh = {m->w, &head, m->y, m->ldy, m->isum};
    amx_row16(&mh, base, r0, r1);
    if (na < a->ncols) {
        const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
        kern_act tail = *a;
        tail.x = a->x + (size_t)na * (size_t)a->K;
        tail.q = (uint8_t *)a->q + col * (size_t)na;
        tail.ncols = a->ncols - na;
        const kern_mm_args mt = {m->w, &tail, m->y + (int64_t)na * m->ldy, m->ldy,
                                 m->isum ? m->isum + (int64_t)na * m->w->n_out * (m->w->n_in / 128) : NULL};
        VNNI_TABLE.mm[kt][KQ_FAST](&mt, r0, r1);
    }
}

static void mm_pq2_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_ROW16) amx_mm(m, (const kern_r16_block *)(const void *)m->w->data, KT_PQ2_0, r0, r1);
    else VNNI_TABLE.mm[KT_PQ2_0][KQ_FAST](m, r0, r1);
}

static void mm_ptq1_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_PTQ_ROW16) amx_mm(m, (const kern_r16_block *)m->w->aux, KT_PTQ1_0, r0, r1);
    else VNNI_TABLE.mm[KT_PTQ1_0][KQ_FAST](m, r0, r1);
}

const kern_table TABLE_NAME = {
    .name = TABLE_STR,
    .needs = TABLE_NEEDS,
    .mm = {
        [KT_PQ2_0] = {mm_pq2_0_fast, NULL, NULL},
        [KT_PTQ1_0] = {mm_ptq1_0_fast, NULL, NULL},
    },
    .fallback = &VNNI_TABLE,   /* every other entry: the AVX-512 VNNI table's, then AVX2's, then ref */
    .row16 = true,
};

#ifndef KERN_EMUAMX
int kern_amx_tile_cols(const kern_w *w, int ncols) {
    if (kern_active() != &kern_table_amx || (w->layout != KW_ROW16 && w->layout != KW_PTQ_ROW16)) return 0;
    return amx_cols(ncols);
}
#endif

#elif !defined(KERN_EMUAMX)
/* Not Linux (the only system where dispatch.c asks for the tile data), or a compiler without the
 * AMX or AVX-512 flags: the table exists with no entries, and KCPU_AMX is never set there. */
const kern_table kern_table_amx = {.name = "amx", .needs = KCPU_AVX2 | KCPU_AVX512VNNI | KCPU_AMX, .row16 = true};
int kern_amx_tile_cols(const kern_w *w, int ncols) {
    (void)w, (void)ncols;
    return 0;
}
#endif
