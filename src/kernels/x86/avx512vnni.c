/* avx512vnni.c: AVX-512 VNNI kernels (vpdpbusd). Built with the AVX-512 flags only; exports
 * only kern_table_avx512vnni; every helper is static. Entries left NULL use the reference.
 * Integer and float order: kern_impl.h; reproduced exactly (tests compare every int32 and bit).
 *
 * The same file is also compiled with -DKERN_EMU512 and only AVX2 flags into
 * kern_table_avx512vnni_emu (tests only): the zmm operations below then run on a portable
 * emulation (x86/emu512.h), so the kernel's data movement, lane bookkeeping and reductions are
 * checked against ref on hosts without AVX-512. The real table still runs on the real
 * instructions wherever the host has them (the oracle tests walk every runnable table).
 *
 * PQ2_0 row-pair, fast mode. One zmm = the 4 words (64 bytes) of one row pair: 128-bit lane L
 * holds word L = [row a: bytes 0-7 | row b: bytes 8-15], each byte 4 slots (kern_impl.h).
 * Slot s is extracted as u = (v >> 2s) & 3 (0..3): vpdpbusd takes u unsigned and the int8
 * activation signed and sums 4 products into int32 with no int16 stage, so code 3 is exact
 * (|sum| <= 128 * 3 * 127 per row and block). All 4 slots accumulate into one register per pair,
 * so the per-block epilogue is one reduction, not four. Slot s of word L needs the activation
 * bytes q[32 L + 8 s .. + 8] in both halves of lane L: qword 4 L + s of the 128-byte block,
 * one vpermt2q of the block's two zmm per slot (shared by both pairs and, in a matmul tile, by
 * nothing else: each column has its own). Then isum = sum(u * q) - sum(q), exact.
 * Matmul: tiles of 4 columns, leftovers padded by repeating the last column (never stored). */
#include "kernels/kern_impl.h"

#if (defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)) || \
    (defined(KERN_EMU512) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#include <immintrin.h>
#include <string.h>

#ifdef KERN_EMU512
#include "kernels/x86/emu512.h"
#define TABLE_NAME kern_table_avx512vnni_emu
#define TABLE_STR "avx512vnni_emu"
#define TABLE_NEEDS KCPU_AVX2
#else
#include "kernels/x86/v512.h"
#define TABLE_NAME kern_table_avx512vnni
#define TABLE_STR "avx512vnni"
#define TABLE_NEEDS (KCPU_AVX2 | KCPU_AVX512VNNI)
#endif

/* One row group (4 rows) x NC columns over all nb blocks. */
static inline __attribute__((always_inline)) void rp_fast_group(const kern_rp_block *B, int64_t nb, const kact_fast *const *ac,
                                                                int NC, int nstore, float *const *out, int32_t *const *isum,
                                                                int64_t isum_stride) {
    const v512 m3 = v512_set1_8(3);
    const v512 idx0 = v512_idx64(0, 0, 4, 4, 8, 8, 12, 12), idx1 = v512_idx64(1, 1, 5, 5, 9, 9, 13, 13);
    const v512 idx2 = v512_idx64(2, 2, 6, 6, 10, 10, 14, 14), idx3 = v512_idx64(3, 3, 7, 7, 11, 11, 15, 15);
    __m128 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const kern_rp_block *blk = B + b;
        if (NC == 1) {   /* matvec: prefetch 16 blocks ahead, as the AVX2 matvec (measured there:
                          * the hardware prefetcher alone left 2 threads at ~55% of the bus) */
            const uintptr_t p = (uintptr_t)blk + 16 * sizeof(kern_rp_block);   /* may pass the end: never faults */
            _mm_prefetch((const char *)p, _MM_HINT_T0);
            _mm_prefetch((const char *)(p + 64), _MM_HINT_T0);
            _mm_prefetch((const char *)(p + 128), _MM_HINT_T0);
        }
        const v512 v0 = v512_loadu(blk->qs[0]), v1 = v512_loadu(blk->qs[1]);
        const v512 u00 = v512_and(v0, m3), u01 = v512_and(v512_srli16(v0, 2), m3);
        const v512 u02 = v512_and(v512_srli16(v0, 4), m3), u03 = v512_and(v512_srli16(v0, 6), m3);
        const v512 u10 = v512_and(v1, m3), u11 = v512_and(v512_srli16(v1, 2), m3);
        const v512 u12 = v512_and(v512_srli16(v1, 4), m3), u13 = v512_and(v512_srli16(v1, 6), m3);
        const __m128 dw = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)blk->d));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const int8_t *q = ac[c][b].qs;
            const v512 Y0 = v512_loadu(q), Y1 = v512_loadu(q + 64);
            const v512 y0 = v512_perm2_64(Y0, idx0, Y1), y1 = v512_perm2_64(Y0, idx1, Y1);
            const v512 y2 = v512_perm2_64(Y0, idx2, Y1), y3 = v512_perm2_64(Y0, idx3, Y1);
            v512 t0 = v512_dpbusd(v512_dpbusd(v512_zero(), u00, y0), u01, y1);
            v512 t1 = v512_dpbusd(v512_dpbusd(v512_zero(), u10, y0), u11, y1);
            t0 = v512_dpbusd(v512_dpbusd(t0, u02, y2), u03, y3);
            t1 = v512_dpbusd(v512_dpbusd(t1, u12, y2), u13, y3);
            /* lanes of t_p: 128-bit lane L = [a a b b] (word L); sum over L, then pairs */
            const __m256i r0 = _mm256_add_epi32(v512_lo256(t0), v512_hi256(t0));
            const __m256i r1 = _mm256_add_epi32(v512_lo256(t1), v512_hi256(t1));
            const __m256i h = _mm256_hadd_epi32(r0, r1);            /* per 128: [a b c d] partial */
            __m128i r4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            r4 = _mm_sub_epi32(r4, _mm_set1_epi32(ac[c][b].sum));
            if (isum && c < nstore) {
                int32_t t[4];
                _mm_storeu_si128((__m128i *)(void *)t, r4);
                for (int i = 0; i < 4; i++) isum[c][i * isum_stride + b] = t[i];
            }
            const __m128 s = _mm_mul_ps(dw, _mm_set1_ps(ac[c][b].d));
            acc[c] = _mm_fmadd_ps(s, _mm_cvtepi32_ps(r4), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < nstore; c++) _mm_storeu_ps(out[c], acc[c]);
}

#define RP_CHUNK 8   /* row groups per matmul chunk (as avx2.c) */
static void mm_rowpair_fast(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t nb = w->n_in / 128, n4 = w->n_out & ~(int64_t)3, N = w->n_out;
    const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
    const int64_t g1 = TERN_MIN(r1, n4);
    const kact_fast *ac[4];
    float *out[4];
    int32_t *is[4];
    for (int64_t r = r0; r < g1; r += 4) {
        const kern_rp_block *B = rp + (r / 4) * nb;
        if (a->ncols == 1) {
            ac[0] = (const kact_fast *)a->q;
            out[0] = m->y + r;
            is[0] = m->isum ? m->isum + r * nb : NULL;
            rp_fast_group(B, nb, ac, 1, 1, out, m->isum ? is : NULL, nb);
            continue;
        }
        /* matmul: a chunk of up to RP_CHUNK groups (weights in L2) against one 4-column tile at a
         * time (its activations in L1 across the chunk) */
        const int64_t rc1 = TERN_MIN(g1, r + 4 * RP_CHUNK);
        for (int c0 = 0; c0 < a->ncols; c0 += 4) {
            const int nst = TERN_MIN(4, a->ncols - c0);
            for (int64_t rr = r; rr < rc1; rr += 4) {
                for (int c = 0; c < 4; c++) {
                    const int cc = c0 + TERN_MIN(c, nst - 1);    /* pad: repeat the last column */
                    ac[c] = (const kact_fast *)(const void *)((const uint8_t *)a->q + col * (size_t)cc);
                    out[c] = m->y + cc * m->ldy + rr;
                    is[c] = m->isum ? m->isum + ((int64_t)cc * N + rr) * nb : NULL;
                }
                rp_fast_group(rp + (rr / 4) * nb, nb, ac, 4, nst, out, m->isum ? is : NULL, nb);
            }
        }
        r = rc1 - 4;                                             /* the loop adds 4 */
    }
    if (r1 > n4) kern_ref_mm_fast(m, TERN_MAX(r0, n4), r1);   /* N % 4 tail rows: file layout */
}

/* ---- PQ2_0 16-row layout (KW_ROW16, kern_impl.h), fast mode ----------------------------------
 * Zmm j of a block holds 16 rows x 4 bytes (lane i = row i); slot s of it, u = (v >> 2s) & 3 per
 * byte (vpsrlw + vpandd: the 16-bit shift moves bits across bytes, the mask drops them), holds in
 * lane i the codes of weights 16 j + 4 s .. + 3 of row i. One vpdpbusd against those 4
 * activation bytes broadcast ({1to16}) adds 4 products per row for all 16 rows: 32 per block and
 * column, no reduction. u is unsigned 0..3 and q signed, summed into int32 with no int16 stage, so
 * code 3 is exact; |sum u q| <= 128 * 3 * 127 per block. The accumulators start at 0 and the
 * block's activation sum is subtracted once (isum = sum (u - 1) q = sum u q - sum q, exact), then
 * the epilogue runs across the 16 rows as one vector: s = d_w * d_a (vcvtph2ps of the 16 fp16
 * scales, one f32 multiply), acc = fma(s, (float)isum, acc): the float order of kern_impl.h.
 * A tile is one 16-row group x NC columns (NC = 1..16, compile-time), so each unpacked slot
 * serves NC vpdpbusd; each column spreads its 32 vpdpbusd over NA accumulators (NA = 4, 2, 1 for
 * NC <= 3, 8, 16: at least 8 independent chains per tile up to 8 columns, which covers the
 * vpdpbusd latency, and no more, since each extra accumulator costs an add per block and column)
 * added in a fixed tree, exact in int32. Registers: NC * NA int32 accumulators, one slot and one block word live,
 * the f32 accumulators (past ~8 columns some live in memory: an fma from memory and a store per
 * block, off the vector ports). Per block and column the vector ports see 32 vpdpbusd + 56 / NC
 * unpack ops (40 / NC up to 8 columns, below) + ~4 epilogue ops (vpsubd, vcvtdq2ps, vmulps, vfmadd): ~80% vpdpbusd at 16
 * columns. Tiles of up to 8 columns (decode and verification), where the unpack is a large share,
 * unpack with fewer operations:
 *   NC = 1 (decode): masks only, no shift. Slot s of word v is v & (3 << 2s) = 4^s u (<= 192:
 *   still an unsigned byte), accumulated into accumulator s (one per power of 4; words j even and
 *   odd into two sets of four, rows 0 and 1 of acc: 8 chains of 4 per block), and isum = a0 +
 *   (a1 >> 2) + (a2 >> 4) + (a3 >> 6) - sum q: accumulator s holds 4^s x an integer of at most
 *   32 * 3 * 127 per block (|.| < 2^20), so the arithmetic shifts are exact and isum is the same
 *   int32. At one column the word shifts, not the chains' latency, bound the tile: without them
 *   it runs ~1.3x as fast on Zen 5 with its weights in cache (bench-kernel --decode-seq "hot").
 *   With more columns the three epilogue shifts per column cost what the word shifts save, so:
 *   NC 2..8: one shift per word: with h = v >> 4, slots 0 and 2 are v & 3 and h & 3, slots 1 and
 *   3 are v & 12 and h & 12 (4 u, <= 12). Slots 0 and 2 go to the even accumulators, the scaled
 *   slots 1 and 3 to the odd ones (NA = 4: words j even / odd in 0, 1 / 2, 3; NA = 2: 0 / 1), and
 *   isum = even sum + (odd sum >> 2) - sum q: the odd sum is 4 x an integer of at most 64 * 3 *
 *   127 per block, so the shift is exact. Where the CPU has GFNI, slot 0 is v & 3 and slots 1..3
 *   one vgf2p8affineqb each (r16_gf_slot), all as u: no shift per word nor in the epilogue.
 *   NC 9..16: one accumulator; slot 0 is v & 3 and slots 1..3 are either a shift and a mask each
 *   or, where the CPU has GFNI, one vgf2p8affineqb each (r16_gf_slot): 32 / NC unpack ops per
 *   block and column instead of 56 / NC. These widths also address their columns through six
 *   registers (r16_cols), not one pointer each.
 * The broadcast is written as vpdpbusd's {1to16} memory operand (inline asm) because GCC emits a
 * separate vpbroadcastd for the intrinsic form. */
#define R16_NC 16
#define R16_PF 4        /* tiles of 9+ columns: prefetch distance in blocks (2.2 KB), into L1 */
#define R16_PF_STREAM1 16  /* the one-group tile at one column: stream prefetch 16 blocks (8.7 KB) ahead */
#define R16_PF_STREAM 24   /* the one-group tiles of 2..8 columns and the two-group tiles: stream prefetch 24 blocks (13 KB) ahead */

/* The emulated build (tests on hosts without AVX-512) compiles one r16_tile with NC at run time
 * and no unrolling: the same operations in the same order, so the same bits and the same data
 * movement, but one copy instead of sixteen unrolled ones (the emulated zmm are pairs of ymm, and
 * sixteen unrolled copies took GCC minutes). The real table keeps one unrolled tile per width. */
#ifdef KERN_EMU512
#define R16_TILE_ATTR static __attribute__((noinline))
#define R16_UNROLL16
#define R16_UNROLL9
#define R16_UNROLL8
#define R16_UNROLL4
#else
#define R16_TILE_ATTR static inline __attribute__((always_inline))
#define R16_UNROLL16 _Pragma("GCC unroll 16")
#define R16_UNROLL9 _Pragma("GCC unroll 9")
#define R16_UNROLL8 _Pragma("GCC unroll 8")
#define R16_UNROLL4 _Pragma("GCC unroll 4")
#endif

#ifndef KERN_EMU512
/* Tiles of 9..16 columns address their columns through six registers instead of one pointer
 * each: kern_r16_mm's tile columns lie at one stride s (ac[c] = ac[0] + c s), and column c's
 * bytes are one x86 address, base + index * scale + offset, with base p0 (column 0 at block
 * b) or p1 = p0 + 9 s, index s, 3 s, 5 s or 7 s and scale 1, 2, 4 or 8 (R16_COLS below). With one
 * pointer per column the compiler keeps 16 pointers in 15 registers and reloads the spilled ones
 * beside the vpdpbusd (measured on Zen 5: ~4% of the 16-column tile's rate, with the epilogue's
 * loads addressed the same way). The instructions are written out (inline asm, operand "i" for
 * the constant offset) because the compiler turns base + c s back into one pointer per column. */
typedef struct { const uint8_t *p0, *p1; intptr_t s, s3, s5, s7; } r16_cols;
#define R16_ASM0(INS, OUT, off, B) __asm__(INS " %c[o](%[b])%{1to16%}, %[u], %[a]" : [a] OUT(acc) : [u] "v"(u), [b] "r"(B), [o] "i"(off))
#define R16_ASM(INS, OUT, off, B, I, SC) \
    __asm__(INS " %c[o](%[b],%[i]," #SC ")%{1to16%}, %[u], %[a]" : [a] OUT(acc) : [u] "v"(u), [b] "r"(B), [i] "r"(I), [o] "i"(off))
/* acc = INS(broadcast 4 bytes at column c + off, u[, acc]); OUT "+v" (accumulate) or "=v" */
#define R16_COLS(INS, OUT, off)                                          \
    switch (c) {                                                         \
    case 0: R16_ASM0(INS, OUT, off, k->p0); break;                       \
    case 1: R16_ASM(INS, OUT, off, k->p0, k->s, 1); break;               \
    case 2: R16_ASM(INS, OUT, off, k->p0, k->s, 2); break;               \
    case 3: R16_ASM(INS, OUT, off, k->p0, k->s3, 1); break;              \
    case 4: R16_ASM(INS, OUT, off, k->p0, k->s, 4); break;               \
    case 5: R16_ASM(INS, OUT, off, k->p0, k->s5, 1); break;              \
    case 6: R16_ASM(INS, OUT, off, k->p0, k->s3, 2); break;              \
    case 7: R16_ASM(INS, OUT, off, k->p0, k->s7, 1); break;              \
    case 8: R16_ASM(INS, OUT, off, k->p0, k->s, 8); break;               \
    case 9: R16_ASM0(INS, OUT, off, k->p1); break;                       \
    case 10: R16_ASM(INS, OUT, off, k->p0, k->s5, 2); break;             \
    case 11: R16_ASM(INS, OUT, off, k->p1, k->s, 2); break;              \
    case 12: R16_ASM(INS, OUT, off, k->p0, k->s3, 4); break;             \
    case 13: R16_ASM(INS, OUT, off, k->p1, k->s, 4); break;              \
    case 14: R16_ASM(INS, OUT, off, k->p0, k->s7, 2); break;             \
    default: R16_ASM(INS, OUT, off, k->p1, k->s3, 2); break;             \
    }
/* The asm needs the offset folded to a constant, which takes the unrolling of an optimised build;
 * where it is not (-O0/-O1 builds) the same operations go through one computed pointer. */
static inline const uint8_t *r16c_at(const r16_cols *k, int c, int off) { return k->p0 + (intptr_t)c * k->s + off; }
/* vpdpbusd of u against the 4 bytes at offset off of column c's block */
static inline __attribute__((always_inline)) v512 r16c_dpbusd(v512 acc, v512 u, const r16_cols *k, int c, int off) {
    if (!__builtin_constant_p(off) || !__builtin_constant_p(c)) return v512_dpbusd_b32(acc, u, r16c_at(k, c, off));
    R16_COLS("vpdpbusd", "+v", off)
    return acc;
}
/* t - the column's block sum (kact_fast.sum), broadcast */
static inline __attribute__((always_inline)) v512 r16c_sub_sum(v512 t, const r16_cols *k, int c) {
    if (!__builtin_constant_p(c)) return v512_sub32(t, v512_bcast32(r16c_at(k, c, (int)offsetof(kact_fast, sum))));
    v512 acc;
    const v512 u = t;
    R16_COLS("vpsubd", "=v", (int)offsetof(kact_fast, sum))
    return acc;
}
/* dw * the column's block scale (kact_fast.d), broadcast */
static inline __attribute__((always_inline)) v512f r16c_mul_d(v512f dw, const r16_cols *k, int c) {
    if (!__builtin_constant_p(c)) {
        float d;
        memcpy(&d, r16c_at(k, c, (int)offsetof(kact_fast, d)), sizeof d);
        return v512f_mul(dw, v512f_set1(d));
    }
    v512f acc;
    const v512f u = dw;
    R16_COLS("vmulps", "=v", (int)offsetof(kact_fast, d))
    return acc;
}
#define R16_WIDE(NC) ((NC) > 8)   /* tiles addressed through r16_cols */
/* Slot n (1..3) of every byte of v, (v >> 2n) & 3, in one vgf2p8affineqb (GFNI): result bit i
 * of a byte is the parity of (matrix byte 7 - i) & (the byte), so bytes 7 and 6 of the matrix
 * qword select bits 2n and 2n + 1 into bits 0 and 1 and every other bit is 0. A shift and a mask
 * in one operation: 3 vector operations fewer per zmm of weights, ~4% of the 16-column tile's
 * rate on Zen 5. Written as asm so that only the GFNI tiles (run where CPUID has GFNI) hold it. */
static inline __attribute__((always_inline)) v512 r16_gf_slot(v512 v, v512 g) {
    v512 r;
    __asm__("vgf2p8affineqb $0, %[g], %[v], %[r]" : [r] "=v"(r) : [v] "v"(v), [g] "v"(g));
    return r;
}
static inline v512 r16_gf_matrix(int n) {
    return _mm512_set1_epi64((long long)((1ull << (2 * n)) << 56 | (1ull << (2 * n + 1)) << 48));
}
#else
typedef struct { const uint8_t *p0; } r16_cols;   /* unused: the emulated build keeps one pointer per column */
#define R16_WIDE(NC) 0
#endif

/* Slot k (= 4 j + s: weights 4 k .. 4 k + 3 of each row) of block b, unpacked in u, for the NC
 * columns of the tile: 4 activation bytes q[4 k ..] broadcast per column, into accumulator ia. */
static inline __attribute__((always_inline)) void r16_slot(v512 (*acc)[4], int NC, int ia, int k, v512 u,
                                                          const kact_fast *const *ac, int64_t b, const r16_cols *kc) {
#ifndef KERN_EMU512
    if (R16_WIDE(NC)) {
R16_UNROLL16
        for (int c = 0; c < NC; c++) acc[c][ia] = r16c_dpbusd(acc[c][ia], u, kc, c, 4 * k);
        return;
    }
#endif
    (void)kc;
R16_UNROLL16
    for (int c = 0; c < NC; c++) acc[c][ia] = v512_dpbusd_b32(acc[c][ia], u, ac[c][b].qs + 4 * k);
}

/* Every line of the block at p, with the hint kern_stream_nta chose for this CPU: prefetchnta or
 * prefetcht1. */
static inline __attribute__((always_inline)) void r16_stream_prefetch(uintptr_t p, bool nta) {
    if (nta) {
R16_UNROLL9
        for (int o = 0; o < (int)sizeof(kern_r16_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_NTA);
    } else {
R16_UNROLL9
        for (int o = 0; o < (int)sizeof(kern_r16_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_T1);
    }
}

R16_TILE_ATTR void r16_tile(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac,
                                                          int NC, int GF, float *const *out, unsigned keep, int32_t *const *isum,
                                                          int64_t isum_stride) {
    const int NA = NC <= 3 ? 4 : NC <= 8 ? 2 : 1;   /* accumulators per column (NC = 1: two sets of 4) */
    const bool nta = NC <= 8 && kern_stream_nta();
    const v512 m3 = v512_set1_8(3), m12 = v512_set1_8(12), m48 = v512_set1_8(48), m192 = v512_set1_8((char)192);
    r16_cols kc;
    const intptr_t cs = NC > 1 ? (const uint8_t *)ac[1] - (const uint8_t *)ac[0] : 0;   /* the columns' stride */
#ifndef KERN_EMU512
    kc.s = cs, kc.s3 = 3 * cs, kc.s5 = 5 * cs, kc.s7 = 7 * cs;
    const v512 g1 = r16_gf_matrix(1), g2 = r16_gf_matrix(2), g3 = r16_gf_matrix(3);
    (void)g1, (void)g2, (void)g3;
#else
    (void)GF;
    (void)cs;
#endif
    v512f facc[R16_NC];   /* past ~8 columns the compiler keeps some in memory (fma from memory + store) */
R16_UNROLL16
    for (int c = 0; c < NC; c++) facc[c] = v512f_zero();
    for (int64_t b = 0; b < nb; b++) {
        const kern_r16_block *blk = B + b;
        /* Prefetches (hints only: no bit depends on them), every line of a block. Tiles of up
         * to 8 columns (decode, speculative verification, small server batches) read their
         * weights from DRAM once per forward. Left to the hardware prefetcher that stream
         * stalls, and the tile's vpdpbusd add to the stall instead of running under it (a
         * streamed 4-column matmul takes ~2x the 1-column time). So they prefetch R16_PF_STREAM1
         * (one column) or R16_PF_STREAM blocks ahead and nothing into L1, with the hint
         * kern_stream_nta chooses: the non-temporal one on AMD, where it keeps the stream at the
         * bus, prefetcht1 elsewhere (on an Intel Xeon prefetchnta held the stream to a third of
         * the bus). The distances are the fastest measured on Zen 5 (bench/RESULTS.md host A).
         * Tiles of 9+ columns (prefill) are compute-bound: an L1 prefetch R16_PF blocks ahead. */
        if (NC <= 8) {
            const uintptr_t p = (uintptr_t)blk + (NC == 1 ? R16_PF_STREAM1 : R16_PF_STREAM) * sizeof(kern_r16_block);   /* may pass the end: never faults */
            r16_stream_prefetch(p, nta);
        } else {
            const uintptr_t p = (uintptr_t)blk + R16_PF * sizeof(kern_r16_block);
R16_UNROLL9
            for (int o = 0; o < (int)sizeof(kern_r16_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_T0);
        }
#ifndef KERN_EMU512
        if (R16_WIDE(NC)) {   /* column 0 and column 9 at block b; kept in two registers */
            kc.p0 = (const uint8_t *)(ac[0] + b);
            kc.p1 = kc.p0 + 9 * cs;
        }
#endif
        v512 acc[R16_NC][4];
        const int NS = NC == 1 ? 2 : NC;   /* accumulator rows: at one column, two sets */
R16_UNROLL16
        for (int c = 0; c < NS; c++) {
R16_UNROLL4
            for (int k = 0; k < NA; k++) acc[c][k] = v512_zero();
        }
        if (NC == 1) {
R16_UNROLL8
            for (int j = 0; j < 8; j++) {   /* slot s (4^s u) -> accumulator s of set j & 1 */
                const v512 v = v512_loadu(blk->qs[j]);
                v512 (*const as)[4] = acc + (j & 1);
                r16_slot(as, 1, 0, 4 * j + 0, v512_and(v, m3), ac, b, &kc);
                r16_slot(as, 1, 1, 4 * j + 1, v512_and(v, m12), ac, b, &kc);
                r16_slot(as, 1, 2, 4 * j + 2, v512_and(v, m48), ac, b, &kc);
                r16_slot(as, 1, 3, 4 * j + 3, v512_and(v, m192), ac, b, &kc);
            }
R16_UNROLL4
            for (int k = 0; k < 4; k++) acc[0][k] = v512_add32(acc[0][k], acc[1][k]);
        } else if (NA > 1) {
R16_UNROLL8
            for (int j = 0; j < 8; j++) {   /* slots 0, 2 -> accumulators 0 (, 2); slots 1, 3 (4 u) -> 1 (, 3) */
                const v512 v = v512_loadu(blk->qs[j]);
                const int o = NA == 4 ? (j & 1) * 2 : 0;
#ifndef KERN_EMU512
                if (GF) {   /* every slot as u (no 4 u): slot 0 by the mask, 1..3 by vgf2p8affineqb */
                    r16_slot(acc, NC, o, 4 * j + 0, v512_and(v, m3), ac, b, &kc);
                    r16_slot(acc, NC, o + 1, 4 * j + 1, r16_gf_slot(v, g1), ac, b, &kc);
                    r16_slot(acc, NC, o, 4 * j + 2, r16_gf_slot(v, g2), ac, b, &kc);
                    r16_slot(acc, NC, o + 1, 4 * j + 3, r16_gf_slot(v, g3), ac, b, &kc);
                    continue;
                }
#endif
                const v512 h = v512_srli16(v, 4);
                r16_slot(acc, NC, o, 4 * j + 0, v512_and(v, m3), ac, b, &kc);
                r16_slot(acc, NC, o + 1, 4 * j + 1, v512_and(v, m12), ac, b, &kc);
                r16_slot(acc, NC, o, 4 * j + 2, v512_and(h, m3), ac, b, &kc);
                r16_slot(acc, NC, o + 1, 4 * j + 3, v512_and(h, m12), ac, b, &kc);
            }
        } else {
R16_UNROLL8
            for (int j = 0; j < 8; j++) {   /* slot s of zmm j, (v >> 2s) & 3: one accumulator, one slot live at a time */
                const v512 v = v512_loadu(blk->qs[j]);
                r16_slot(acc, NC, 0, 4 * j + 0, v512_and(v, m3), ac, b, &kc);
#ifndef KERN_EMU512
                if (GF) {   /* one vgf2p8affineqb per slot instead of a shift and a mask */
                    r16_slot(acc, NC, 0, 4 * j + 1, r16_gf_slot(v, g1), ac, b, &kc);
                    r16_slot(acc, NC, 0, 4 * j + 2, r16_gf_slot(v, g2), ac, b, &kc);
                    r16_slot(acc, NC, 0, 4 * j + 3, r16_gf_slot(v, g3), ac, b, &kc);
                    continue;
                }
#endif
                r16_slot(acc, NC, 0, 4 * j + 1, v512_and(v512_srli16(v, 2), m3), ac, b, &kc);
                r16_slot(acc, NC, 0, 4 * j + 2, v512_and(v512_srli16(v, 4), m3), ac, b, &kc);
                r16_slot(acc, NC, 0, 4 * j + 3, v512_and(v512_srli16(v, 6), m3), ac, b, &kc);
            }
        }
        const v512f dw = v512f_ph(blk->d);
R16_UNROLL16
        for (int c = 0; c < NC; c++) {
            /* exact in int32: the order is free, a fixed tree is chosen; the shifts divide exactly
             * (NC = 1: accumulator s holds 4^s x its sum; NC 2..8: the odd ones 4 x theirs) */
            v512 t = acc[c][0];
            if (NC == 1)
                t = v512_add32(v512_add32(t, v512_srai32(acc[c][1], 2)),
                               v512_add32(v512_srai32(acc[c][2], 4), v512_srai32(acc[c][3], 6)));
            else if (NA == 4 && GF) t = v512_add32(v512_add32(t, acc[c][2]), v512_add32(acc[c][1], acc[c][3]));
            else if (NA == 4) t = v512_add32(v512_add32(t, acc[c][2]), v512_srai32(v512_add32(acc[c][1], acc[c][3]), 2));
            if (NA == 2 && GF) t = v512_add32(t, acc[c][1]);
            else if (NA == 2) t = v512_add32(t, v512_srai32(acc[c][1], 2));
            v512f s;
#ifndef KERN_EMU512
            if (R16_WIDE(NC)) {
                t = r16c_sub_sum(t, &kc, c);   /* isum = sum u q - sum q */
                s = r16c_mul_d(dw, &kc, c);
            } else
#endif
            {
                t = v512_sub32(t, v512_set1_32(ac[c][b].sum));   /* isum = sum u q - sum q */
                s = v512f_mul(dw, v512f_set1(ac[c][b].d));
            }
            if (isum) {   /* test hook: row i of the group at isum[c][i * stride + b] */
                int32_t ti[16];
                v512_store(ti, t);
                for (int i = 0; i < 16; i++)
                    if ((keep >> i) & 1) isum[c][i * isum_stride + b] = ti[i];
            }
            facc[c] = v512f_fmadd(s, v512f_cvt32(t), facc[c]);
        }
    }
R16_UNROLL16
    for (int c = 0; c < NC; c++) v512f_mask_storeu(out[c], keep, facc[c]);
}

/* The kern_r16_mm callback TILE##_group: TILE (one of the tiles of this file, block type BT)
 * compiled once per column width 1..16 (NC a constant in each copy), chosen by nc. */
typedef void (*r16_width_fn)(const void *B, int64_t nb, const kact_fast *const *ac, float *const *out, unsigned keep,
                             int32_t *const *isum, int64_t isum_stride);
#define R16_WIDTH(TILE, BT, NC) R16_WIDTH_GF(TILE, BT, NC, 0, )
#define R16_WIDTH_GF(TILE, BT, NC, GF, SUF)                                                                         \
    static void TILE##SUF##_##NC(const void *B, int64_t nb, const kact_fast *const *ac, float *const *out,          \
                                 unsigned keep, int32_t *const *isum, int64_t isum_stride) {                       \
        TILE((const BT *)B, nb, ac, NC, GF, out, keep, isum, isum_stride);                                         \
    }
#define R16_GROUP(TILE, BT)                                                                                        \
    R16_WIDTH(TILE, BT, 1) R16_WIDTH(TILE, BT, 2) R16_WIDTH(TILE, BT, 3) R16_WIDTH(TILE, BT, 4)                    \
    R16_WIDTH(TILE, BT, 5) R16_WIDTH(TILE, BT, 6) R16_WIDTH(TILE, BT, 7) R16_WIDTH(TILE, BT, 8)                    \
    R16_WIDTH(TILE, BT, 9) R16_WIDTH(TILE, BT, 10) R16_WIDTH(TILE, BT, 11) R16_WIDTH(TILE, BT, 12)                 \
    R16_WIDTH(TILE, BT, 13) R16_WIDTH(TILE, BT, 14) R16_WIDTH(TILE, BT, 15) R16_WIDTH(TILE, BT, 16)                \
    static const r16_width_fn TILE##_widths[R16_NC + 1] = {                                                        \
        NULL,      TILE##_1,  TILE##_2,  TILE##_3,  TILE##_4,  TILE##_5,  TILE##_6,  TILE##_7, TILE##_8,           \
        TILE##_9,  TILE##_10, TILE##_11, TILE##_12, TILE##_13, TILE##_14, TILE##_15, TILE##_16};                   \
    static void TILE##_group(const void *B, int64_t nb, int nc, int n_cols, const kact_fast *const *ac,            \
                             float *const *out, unsigned keep, int32_t *const *isum, int64_t isum_stride) {        \
        (void)n_cols;                                                                                              \
        TILE##_widths[nc](B, nb, ac, out, keep, isum, isum_stride);                                                \
    }
R16_GROUP(r16_tile, kern_r16_block)
#ifndef KERN_EMU512
/* The same tiles with the GFNI slot unpack at 2..16 columns (one column unpacks by masks alone). */
R16_WIDTH_GF(r16_tile, kern_r16_block, 2, 1, _gf) R16_WIDTH_GF(r16_tile, kern_r16_block, 3, 1, _gf)
R16_WIDTH_GF(r16_tile, kern_r16_block, 4, 1, _gf) R16_WIDTH_GF(r16_tile, kern_r16_block, 5, 1, _gf)
R16_WIDTH_GF(r16_tile, kern_r16_block, 6, 1, _gf) R16_WIDTH_GF(r16_tile, kern_r16_block, 7, 1, _gf)
R16_WIDTH_GF(r16_tile, kern_r16_block, 8, 1, _gf)
R16_WIDTH_GF(r16_tile, kern_r16_block, 9, 1, _gf) R16_WIDTH_GF(r16_tile, kern_r16_block, 10, 1, _gf)
R16_WIDTH_GF(r16_tile, kern_r16_block, 11, 1, _gf) R16_WIDTH_GF(r16_tile, kern_r16_block, 12, 1, _gf)
R16_WIDTH_GF(r16_tile, kern_r16_block, 13, 1, _gf) R16_WIDTH_GF(r16_tile, kern_r16_block, 14, 1, _gf)
R16_WIDTH_GF(r16_tile, kern_r16_block, 15, 1, _gf) R16_WIDTH_GF(r16_tile, kern_r16_block, 16, 1, _gf)
static const r16_width_fn r16_tile_gf_widths[R16_NC + 1] = {
    NULL,         r16_tile_1,     r16_tile_gf_2,  r16_tile_gf_3,  r16_tile_gf_4,  r16_tile_gf_5,
    r16_tile_gf_6, r16_tile_gf_7, r16_tile_gf_8,  r16_tile_gf_9,  r16_tile_gf_10, r16_tile_gf_11,
    r16_tile_gf_12, r16_tile_gf_13, r16_tile_gf_14, r16_tile_gf_15, r16_tile_gf_16};
static void r16_tile_gf_group(const void *B, int64_t nb, int nc, int n_cols, const kact_fast *const *ac, float *const *out,
                              unsigned keep, int32_t *const *isum, int64_t isum_stride) {
    (void)n_cols;
    r16_tile_gf_widths[nc](B, nb, ac, out, keep, isum, isum_stride);
}
#endif

#ifndef KERN_EMU512
/* ---- Two-group tiles: 1..8 columns over 32 rows (GFNI) --------------------------------------
 * The one-group tile above reads its activation as vpdpbusd's broadcast memory operand: 4 NC
 * loads per zmm of weights, one per vpdpbusd. At 2..8 columns the weights stream from DRAM and
 * the tile's compute nearly matches the bus, and these L1 loads slow the stream: their L1
 * accesses compete with the line fills of the weights (a loop outside the repository's
 * benchmarks, 16 vpdpbusd per 64 bytes streamed, runs ~15% slower with a broadcast memory operand
 * on each than with one broadcast register per four). r16_pair reads two consecutive groups
 * (rows 16 g .. 16 g + 31, two streams nb blocks apart) and broadcasts each 4 activation bytes
 * once into a register for both: 2 NC loads per zmm of weights. Every slot is unpacked to 0..3
 * (the mask or vgf2p8affineqb), so any accumulator may take any slot: NAP int32 accumulators per
 * group and column, slot sl into accumulator sl % NAP, summed in a fixed tree at the block's end
 * (exact in int32). NAP = 4 at one column, 2 at 2..4 columns (2 NC NAP = 8 to 16 independent
 * vpdpbusd chains per tile), 1 at 5..8 (10 to 16 chains; NC NAP <= 8 accumulators per group).
 * Why these counts: one accumulator per group and column leaves 2 and 3 columns with 4 and 6
 * chains of 32 vpdpbusd per block, bound by the instruction's latency; a second one costs an
 * add per block and column and, past 4 columns, spills accumulators, which costs more than the
 * chains gain (bonsai-1.7b's forwards at 2..5 columns, bench-spec --cost, on Zen 5). The
 * epilogue and the float order per row are the one-group tile's, so the same bits. Two groups,
 * not more: at 4 columns, 4 groups would need 32 accumulators (16 int32, 16 float), every zmm
 * register. */
#define R16_PAIR 2
R16_TILE_ATTR void r16_pair(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, int NC, float *const *out) {
    const int NAP = NC == 1 ? 4 : NC <= 4 ? 2 : 1;   /* accumulators per group and column (NC NAP <= 8) */
    const bool nta = kern_stream_nta();
    const v512 m3 = v512_set1_8(3), g1 = r16_gf_matrix(1), g2 = r16_gf_matrix(2), g3 = r16_gf_matrix(3);
    v512f facc[R16_PAIR][8];
R16_UNROLL4
    for (int gi = 0; gi < R16_PAIR; gi++)
R16_UNROLL8
        for (int c = 0; c < NC; c++) facc[gi][c] = v512f_zero();
    for (int64_t b = 0; b < nb; b++) {
        /* each group's stream R16_PF_STREAM blocks ahead (as the one-group tile); within the last
         * R16_PF_STREAM blocks, the same group of the next pair (R16_PAIR - 1 groups further) */
        const int64_t ahead = b + R16_PF_STREAM < nb ? R16_PF_STREAM : R16_PF_STREAM + (R16_PAIR - 1) * nb;
R16_UNROLL4
        for (int gi = 0; gi < R16_PAIR; gi++) {
            const uintptr_t p = (uintptr_t)(B + gi * nb + b + ahead);   /* may pass the end: never faults */
            r16_stream_prefetch(p, nta);
        }
        v512 acc[R16_PAIR][8];
R16_UNROLL4
        for (int gi = 0; gi < R16_PAIR; gi++)
R16_UNROLL8
            for (int c = 0; c < 8; c++) acc[gi][c] = v512_zero();   /* the unused ones are dead code */
R16_UNROLL8
        for (int j = 0; j < 8; j++) {
            v512 v[R16_PAIR];
R16_UNROLL4
            for (int gi = 0; gi < R16_PAIR; gi++) v[gi] = v512_loadu(B[gi * nb + b].qs[j]);
R16_UNROLL4
            for (int sl = 0; sl < 4; sl++) {   /* slot sl: weights 16 j + 4 sl .. + 3 of each row */
                v512 bc[8];
R16_UNROLL8
                for (int c = 0; c < NC; c++) bc[c] = v512_bcast32(ac[c][b].qs + 16 * j + 4 * sl);
R16_UNROLL4
                for (int gi = 0; gi < R16_PAIR; gi++) {
                    const v512 u = sl == 0 ? v512_and(v[gi], m3) : r16_gf_slot(v[gi], sl == 1 ? g1 : sl == 2 ? g2 : g3);
R16_UNROLL8
                    for (int c = 0; c < NC; c++) {
                        const int ia = c * NAP + sl % NAP;
                        acc[gi][ia] = v512_dpbusd(acc[gi][ia], u, bc[c]);
                    }
                }
            }
        }
R16_UNROLL4
        for (int gi = 0; gi < R16_PAIR; gi++) {
            const v512f dw = v512f_ph(B[gi * nb + b].d);
R16_UNROLL8
            for (int c = 0; c < NC; c++) {
                const v512 *a = acc[gi] + c * NAP;
                const v512 sum = NAP == 4   ? v512_add32(v512_add32(a[0], a[1]), v512_add32(a[2], a[3]))
                                 : NAP == 2 ? v512_add32(a[0], a[1])
                                            : a[0];
                const v512 t = v512_sub32(sum, v512_set1_32(ac[c][b].sum));   /* isum = sum u q - sum q */
                facc[gi][c] = v512f_fmadd(v512f_mul(dw, v512f_set1(ac[c][b].d)), v512f_cvt32(t), facc[gi][c]);
            }
        }
    }
R16_UNROLL4
    for (int gi = 0; gi < R16_PAIR; gi++)
R16_UNROLL8
        for (int c = 0; c < NC; c++) v512f_mask_storeu(out[c] + 16 * gi, 0xffffu, facc[gi][c]);
}

typedef void (*r16_pair_fn)(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, float *const *out);
#define R16_PAIR_WIDTH(NC)                                                                                          \
    static void r16_pair_##NC(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, float *const *out) { \
        r16_pair(B, nb, ac, NC, out);                                                                               \
    }
R16_PAIR_WIDTH(1) R16_PAIR_WIDTH(2) R16_PAIR_WIDTH(3) R16_PAIR_WIDTH(4) R16_PAIR_WIDTH(5)
R16_PAIR_WIDTH(6) R16_PAIR_WIDTH(7) R16_PAIR_WIDTH(8)
static const r16_pair_fn r16_pair_widths[9] = {NULL, r16_pair_1, r16_pair_2, r16_pair_3, r16_pair_4,
                                               r16_pair_5, r16_pair_6, r16_pair_7, r16_pair_8};

/* Rows [r0, r1) at 1..8 columns: the whole groups inside the range in pairs; a group the range
 * cuts, a last unpaired group and the file-layout tail rows through kern_r16_mm's one-group tiles. */
static void mm_row16_pairs(const kern_mm_args *m, const kern_r16_block *base, int64_t r0, int64_t r1) {
    const kern_act *a = m->a;
    const int nc = a->ncols;
    const int64_t nb = m->w->n_in / 128, n16 = m->w->n_out & ~(int64_t)15;
    const int64_t ga = (r0 + 15) / 16, ge = (r1 < n16 ? r1 : n16) / 16;   /* the whole groups [ga, ge) */
    if (ge - ga < R16_PAIR) {
        kern_r16_mm(m, base, sizeof(kern_r16_block), r0, r1, R16_NC, r16_tile_gf_group);
        return;
    }
    if (r0 < 16 * ga) kern_r16_mm(m, base, sizeof(kern_r16_block), r0, 16 * ga, R16_NC, r16_tile_gf_group);
    const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
    const kact_fast *ac[8];
    float *out[8];
    for (int c = 0; c < nc; c++) ac[c] = (const kact_fast *)(const void *)((const uint8_t *)a->q + col * (size_t)c);
    int64_t g = ga;
    for (; g + R16_PAIR <= ge; g += R16_PAIR) {
        for (int c = 0; c < nc; c++) out[c] = m->y + c * m->ldy + 16 * g;
        r16_pair_widths[nc](base + g * nb, nb, ac, out);
    }
    if (16 * g < r1) kern_r16_mm(m, base, sizeof(kern_r16_block), 16 * g, r1, R16_NC, r16_tile_gf_group);
}
#endif

/* Rows [r0, r1) in the 16-row layout: kern_r16_mm (kern_impl.h) with tiles of up to 16 columns,
 * or the two-group tiles (GFNI, no hook): at 2..8 columns always; at one column (decode) for
 * rows of kern_pair1_min_k() weights or more, whose groups (nb * 544 bytes each, 8.7 KB at K 2048)
 * the one-group tile would stream one at a time: two streams per thread keep more of the bus
 * busy. Where that pays depends on the row length and the CPU (on Zen 5 at the 27B's K 5120
 * and longer, not at bonsai-1.7b's K 2048; on an Intel Xeon at K 2048 already): the threshold is
 * a rule by vendor (kern_pair1_min_k, dispatch.c). */
static void mm_row16_fast(const kern_mm_args *m, const kern_r16_block *base, int64_t r0, int64_t r1) {
#ifndef KERN_EMU512
    if (kern_cpu_features() & KCPU_GFNI) {
        const int nc = m->a->ncols;
        if (nc <= 8 && (nc >= 2 || m->w->n_in >= kern_pair1_min_k()) && !m->isum) mm_row16_pairs(m, base, r0, r1);   /* the hook: one-group tiles */
        else kern_r16_mm(m, base, sizeof(kern_r16_block), r0, r1, R16_NC, r16_tile_gf_group);
        return;
    }
#endif
    kern_r16_mm(m, base, sizeof(kern_r16_block), r0, r1, R16_NC, r16_tile_group);
}

/* ---- PTQ1_0 base-3 16-row layout (KW_PTQ3_ROW16, kern_impl.h), fast mode ---------------------
 * The direct form: the file's trit bytes, 16 rows per zmm (lane i = row i, 4 bytes). Digit n of
 * a zmm is v * 3^n mod 256 per byte (each step two vpaddb on the previous digit's v), turned into
 * u = t + 1 in 0..2 by two unsigned compares (v512_b3digit); u meets the 4 activation bytes of
 * its elements broadcast ({1to16}) in one vpdpbusd per column: 34 per block and column (20 for
 * qs[0..15], 10 for qs[16..23], 4 for qh, whose lanes are [qh0, qh1, 0, 0]: the zero bytes'
 * digits are 0). u <= 2 and |q| <= 127 sum into int32 with no int16 stage; isum = sum u q - sum q,
 * exact; the epilogue and the float order are the PQ2_0 tile's (above). Per block and column the
 * vector ports see 34 vpdpbusd + 204 / NC digit ops (6 per zmm: 2 adds, 2 compares, 2 masked
 * moves) + ~4 epilogue ops: the digits cost 3.3x the PQ2_0 tile's unpack at one column, so this
 * form is for memory (1.75 bits a weight, no side buffer), not for speed where the bus is fast
 * (kernels.h KERN_PTQ1_0_TRANSCODE_DEFAULT). Accumulator chains as the PQ2_0 tile: NA = 4, 2, 1
 * for NC <= 4, 8, 16, digit vector k into chain k % NA. */

/* Digits 0 .. nd-1 of v (already loaded), each against the 4 activation bytes at
 * qs + o0 + n * step of every column, into the chains from *k on. */
static inline __attribute__((always_inline)) void r16t_digits(v512 (*acc)[4], int NC, int NA, int *k, v512 v, int nd,
                                                            int o0, int step, const kact_fast *const *ac, int64_t b) {
R16_UNROLL4
    for (int n = 0; n < nd; n++) {
        if (n) v = v512_add8(v512_add8(v, v), v);
        const v512 u = v512_b3digit(v);
        const int ia = *k % NA;
R16_UNROLL16
        for (int c = 0; c < NC; c++) acc[c][ia] = v512_dpbusd_b32(acc[c][ia], u, ac[c][b].qs + o0 + n * step);
        (*k)++;
    }
}

R16_TILE_ATTR void r16t_tile(const kern_r16t_block *B, int64_t nb, const kact_fast *const *ac, int NC, int GF,
                             float *const *out, unsigned keep, int32_t *const *isum, int64_t isum_stride) {
    (void)GF;   /* one unpack (the base-3 digits) */
    const int NA = NC <= 4 ? 4 : NC <= 8 ? 2 : 1;
    v512f facc[R16_NC];
R16_UNROLL16
    for (int c = 0; c < NC; c++) facc[c] = v512f_zero();
    for (int64_t b = 0; b < nb; b++) {
        const kern_r16t_block *blk = B + b;
        {   /* prefetch R16_PF blocks ahead into L1, every line, at every width: the base-3
             * unpack, not the stream, sets this tile's rate */
            const uintptr_t p = (uintptr_t)blk + R16_PF * sizeof(kern_r16t_block);   /* may pass the end: never faults */
R16_UNROLL8
            for (int o = 0; o < (int)sizeof(kern_r16t_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_T0);
        }
        v512 acc[R16_NC][4];
R16_UNROLL16
        for (int c = 0; c < NC; c++) {
R16_UNROLL4
            for (int k = 0; k < NA; k++) acc[c][k] = v512_zero();
        }
        int k = 0;
R16_UNROLL4
        for (int j = 0; j < 4; j++) r16t_digits(acc, NC, NA, &k, v512_loadu(blk->qa[j]), 5, 4 * j, 16, ac, b);
R16_UNROLL4
        for (int j = 0; j < 2; j++) r16t_digits(acc, NC, NA, &k, v512_loadu(blk->qb[j]), 5, 80 + 4 * j, 8, ac, b);
        /* n = 3 reads q[126 .. 129]: bytes 128, 129 lie in the block's d, met by zero digits */
        r16t_digits(acc, NC, NA, &k, v512_zext16_32(blk->qh), 4, 120, 2, ac, b);
        const v512f dw = v512f_ph(blk->d);
R16_UNROLL16
        for (int c = 0; c < NC; c++) {
            v512 t = acc[c][0];   /* exact in int32: a fixed tree */
            if (NA == 4) t = v512_add32(v512_add32(t, acc[c][1]), v512_add32(acc[c][2], acc[c][3]));
            if (NA == 2) t = v512_add32(t, acc[c][1]);
            t = v512_sub32(t, v512_set1_32(ac[c][b].sum));   /* isum = sum u q - sum q */
            if (isum) {
                int32_t ti[16];
                v512_store(ti, t);
                for (int i = 0; i < 16; i++)
                    if ((keep >> i) & 1) isum[c][i * isum_stride + b] = ti[i];
            }
            facc[c] = v512f_fmadd(v512f_mul(dw, v512f_set1(ac[c][b].d)), v512f_cvt32(t), facc[c]);
        }
    }
R16_UNROLL16
    for (int c = 0; c < NC; c++) v512f_mask_storeu(out[c], keep, facc[c]);
}

R16_GROUP(r16t_tile, kern_r16t_block)

static void mm_pq2_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_ROW16) { mm_row16_fast(m, (const kern_r16_block *)(const void *)m->w->data, r0, r1); return; }
    if (m->w->layout != KW_ROWPAIR) { kern_ref_mm_fast(m, r0, r1); return; }
    mm_rowpair_fast(m, (const kern_rp_block *)(const void *)m->w->data, r0, r1);
}

/* PTQ1_0: the transcoded layouts and the base-3 16-row one run the kernels above; the file
 * layout (a direct weight prepared for a row-pair table) runs the AVX2 kernel. */
static void mm_ptq1_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_PTQ_ROW16) { mm_row16_fast(m, (const kern_r16_block *)m->w->aux, r0, r1); return; }
    if (m->w->layout == KW_PTQ3_ROW16) {
        kern_r16_mm(m, m->w->data, sizeof(kern_r16t_block), r0, r1, R16_NC, r16t_tile_group);
        return;
    }
    if (m->w->layout == KW_PTQ_ROWPAIR) { mm_rowpair_fast(m, (const kern_rp_block *)m->w->aux, r0, r1); return; }
    kern_table_avx2.mm[KT_PTQ1_0][KQ_FAST](m, r0, r1);
}

const kern_table TABLE_NAME = {
    .name = TABLE_STR,
    .needs = TABLE_NEEDS,
    .mm = {
        [KT_PQ2_0] = {mm_pq2_0_fast, NULL, NULL},
        [KT_PTQ1_0] = {mm_ptq1_0_fast, NULL, NULL},
    },
    .fallback = &kern_table_avx2,     /* every other entry: the AVX2 kernel, then ref */
    .row16 = true,
};

#elif !defined(KERN_EMU512)
const kern_table kern_table_avx512vnni = {.name = "avx512vnni", .needs = KCPU_AVX2 | KCPU_AVX512VNNI, .row16 = true};
#endif
