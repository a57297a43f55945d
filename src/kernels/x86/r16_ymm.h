/* r16_ymm.h: the PQ2_0 16-row layout (KW_ROW16, kern_impl.h) in fast numerics on ymm registers,
 * one body for two tables: included by x86/avxvnni.c (R16Y_VNNI 1: vpdpbusd ymm, VEX) and by
 * x86/avx2.c (R16Y_VNNI 0: vpmaddubsw + vpaddw, one vpmaddwd per block). Every function here is
 * static, so each including file gets its own copy compiled with its own -m flags (no instruction
 * of one table leaks into the other). The includer defines R16Y_VNNI and, for R16Y_VNNI 1,
 * r16y_dpbusd(acc, u, s) (vpdpbusd: each int32 lane += the 4 products of its unsigned bytes of u
 * and signed bytes of s).
 *
 * Layout seen by a ymm: zmm j of a 16-row block (64 bytes, 16 rows x 4 bytes) is two ymm: bytes
 * 0-31 hold rows 0-7 (one 32-bit lane per row), bytes 32-63 rows 8-15. So one half h of a
 * 16-row group is an 8-row interleave: ymm j of half h = blk->qs[j] + 32 h, lane i = row
 * 16 g + 8 h + i, and slot s of it, u = (v >> 2s) & 3 per byte (vpsrlw + vpand: the 16-bit shift
 * moves bits across bytes, the mask drops them), holds in lane i the codes of weights
 * 16 j + 4 s .. + 3 of that row. The 4 activation bytes q[16 j + 4 s .. + 3] broadcast to the 8
 * lanes (vpbroadcastd from memory; VEX has no embedded broadcast) meet them: no reduction across
 * lanes anywhere in the K loop; lanes are rows.
 *
 * Integer step per slot and column:
 *   VNNI: acc (int32) = vpdpbusd(acc, u, q4): 4 products per row, no int16 stage, exact.
 *   AVX2: acc (int16 pairs) += vpmaddubsw(u, q4): int16 lane 2 i + e of row i gets
 *         u_{4k+2e} q_{4k+2e} + u_{4k+2e+1} q_{4k+2e+1}. Bound: u <= 3 (code 3 included) and
 *         |q| <= 127 (kern_impl.h: q is clamped to [-127, 127]), so a pair is <= 2 * 381 = 762
 *         (vpmaddubsw's saturation never engages) and one int16 lane collects 2 products of each
 *         of the block's 32 slots: <= 64 * 381 = 24384 <= 32767. So the whole 128-weight block
 *         sums in int16 (any subset of it too: each of the NA chains), with no wrap; one
 *         vpmaddwd by 1s per block and row half widens the two int16 of a row into its int32.
 *         A second block would not fit (48768), so the widening is per block, as the float
 *         order needs anyway.
 * Then isum = sum u q - sum q (the codes are u = t + 1), exact in int32, and the epilogue runs
 * across the 8 rows as one vector: s = d_w * d_a (vcvtph2ps of the 8 fp16 scales, one f32
 * multiply), acc = fma(s, (float)isum, acc): the float order of kern_impl.h.
 *
 * Tiles: R16Y_TH row halves (2: 16 rows, so one broadcast feeds two steps; 1: 8 rows) x NC
 * columns (NC = 1..R16Y_TW compile-time, one copy per width; the includer sets both: measured,
 * 16 rows x up to 6 columns for VNNI and x up to 4 for AVX2 beat 8 rows x up to 8). A batch of
 * at most R16Y_TW_ONE columns (default R16Y_TW) runs as one tile, so it streams the weights once
 * (AVX2: 5, the verification of 4 drafted tokens; its 5-column tile is slower per multiply-add
 * than the 4-column one in a wide prefill, so wider batches keep tiles of up to 4); each unpacked
 * slot serves NC columns. The matvec (NC = 1) takes both halves of a group in one pass and streams
 * whole cache lines in order; every width prefetches ahead. VNNI accumulates in NA chains per column
 * (vpdpbusd's add is in its latency: ~8 independent chains cover it at two per cycle), added in a
 * fixed tree (exact in int32); AVX2's chain is only the 1-cycle vpaddw, so NA = 1. Registers
 * (16 ymm): H * NC * NA accumulators + the slots + the mask + the broadcast; the f32
 * accumulators mostly live in memory (an fma from memory and a store per block). Wider batches:
 * ceil(ncols / R16Y_TW) column tiles of near-equal width over chunks of groups whose weights
 * stay in L2. */
#ifndef TERN_KERNELS_X86_R16_YMM_H
#define TERN_KERNELS_X86_R16_YMM_H

#include <immintrin.h>
#include <string.h>

#define R16Y_NC 8   /* widest column tile any includer may ask for (R16Y_TW, R16Y_TW_ONE <= 8) */
#define R16Y_PF 4   /* prefetch distance in blocks, into L1 */

/* The emulated VNNI build (tests only) keeps one tile copy with NC at run time: same operations
 * in the same order, a fraction of the compile time. */
#ifdef R16Y_ONE_COPY
#define R16Y_TILE_ATTR static __attribute__((noinline))
#define R16Y_UNROLL8
#define R16Y_UNROLL4
#define R16Y_UNROLL2
#else
#define R16Y_TILE_ATTR static inline __attribute__((always_inline))
#define R16Y_UNROLL8 _Pragma("GCC unroll 8")
#define R16Y_UNROLL4 _Pragma("GCC unroll 4")
#define R16Y_UNROLL2 _Pragma("GCC unroll 2")
#endif

/* The 4 bytes at p in every int32 lane (vpbroadcastd from memory). */
static inline __m256i r16y_bcast(const int8_t *p) {
    int32_t x;
    memcpy(&x, p, 4);
    return _mm256_set1_epi32(x);
}

/* One slot-step: acc += the products of u and the 4 activation bytes at p (see the top). */
static inline __attribute__((always_inline)) __m256i r16y_step(__m256i acc, __m256i u, __m256i q4) {
#if R16Y_VNNI
    return r16y_dpbusd(acc, u, q4);
#else
    acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, q4));
    __asm__("" : "+x"(acc));   /* keeps the sum a chain in one register: GCC otherwise reassociates the
                                * integer adds into a tree of all 32 products and spills them */
    return acc;
#endif
}

/* Chains per column: VNNI ~8 independent vpdpbusd chains in all (at most 12 registers);
 * AVX2 one (the chain is vpaddw). */
static inline int r16y_chains(int H, int NC) {
#if R16Y_VNNI
    const int na = (8 + H * NC - 1) / (H * NC);
    return H * NC * na > 12 ? TERN_MAX(1, 12 / (H * NC)) : na;
#else
    (void)H; (void)NC;
    return 1;
#endif
}

/* Tile: halves h0 .. h0 + H - 1 of one 16-row group (blocks B[0 .. nb-1]) x NC columns.
 * out[c] / isum[c] point at row 16 g of column c; keep: bit i = row 16 g + i is in range (the
 * other rows are computed, never stored). */
R16Y_TILE_ATTR void r16y_tile(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, int H, int h0, int NC,
                              float *const *out, unsigned keep, int32_t *const *isum, int64_t isum_stride) {
    const int NA = r16y_chains(H, NC);
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 facc[2][R16Y_NC];
R16Y_UNROLL2
    for (int h = 0; h < H; h++) {
R16Y_UNROLL8
        for (int c = 0; c < NC; c++) facc[h][c] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const kern_r16_block *blk = B + b;
        {   /* prefetch R16Y_PF blocks ahead, every line of the block, at every width: a tile of
             * 2+ columns left to the hardware prefetcher stalls on the stream (avx512vnni.c's tiles
             * of up to 8 columns prefetch further ahead with the non-temporal hint instead: that
             * was measured on Zen 5, not on the AVX2-only CPUs these tiles are for) */
            const uintptr_t p = (uintptr_t)blk + R16Y_PF * sizeof(kern_r16_block);   /* may pass the end: never faults */
R16Y_UNROLL8
            for (int o = 0; o < (int)sizeof(kern_r16_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_T0);
        }
        __m256i acc[2][R16Y_NC][8];
R16Y_UNROLL2
        for (int h = 0; h < H; h++) {
R16Y_UNROLL8
            for (int c = 0; c < NC; c++) {
R16Y_UNROLL8
                for (int k = 0; k < NA; k++) acc[h][c][k] = _mm256_setzero_si256();
            }
        }
R16Y_UNROLL8
        for (int j = 0; j < 8; j++) {
R16Y_UNROLL4
            for (int s = 0; s < 4; s++) {   /* slot k = 4 j + s: weights 4 k .. 4 k + 3 of each row */
                const int k = 4 * j + s;
                __m256i u[2];
R16Y_UNROLL2
                for (int h = 0; h < H; h++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(blk->qs[j][8 * (h0 + h)]));
                    u[h] = _mm256_and_si256(s ? _mm256_srli_epi16(v, 2 * s) : v, m3);
                }
R16Y_UNROLL8
                for (int c = 0; c < NC; c++) {
                    const __m256i q4 = r16y_bcast(ac[c][b].qs + 4 * k);
R16Y_UNROLL2
                    for (int h = 0; h < H; h++) acc[h][c][k % NA] = r16y_step(acc[h][c][k % NA], u[h], q4);
                }
            }
        }
R16Y_UNROLL2
        for (int h = 0; h < H; h++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk->d + 8 * (h0 + h))));
R16Y_UNROLL8
            for (int c = 0; c < NC; c++) {
                __m256i t = acc[h][c][0];   /* exact (int32; int16 by the bound above): a fixed tree */
R16Y_UNROLL8
                for (int k = 1; k < NA; k++) t = R16Y_VNNI ? _mm256_add_epi32(t, acc[h][c][k]) : _mm256_add_epi16(t, acc[h][c][k]);
#if !R16Y_VNNI
                t = _mm256_madd_epi16(t, _mm256_set1_epi16(1));   /* the row's two int16 -> its int32 */
#endif
                t = _mm256_sub_epi32(t, _mm256_set1_epi32(ac[c][b].sum));   /* isum = sum u q - sum q */
                if (isum) {   /* test hook: row 8 (h0 + h) + i of the group at isum[c][(8 (h0 + h) + i) * stride + b] */
                    int32_t ti[8];
                    _mm256_storeu_si256((__m256i *)(void *)ti, t);
                    for (int i = 0; i < 8; i++) {
                        const int r = 8 * (h0 + h) + i;
                        if ((keep >> r) & 1) isum[c][r * isum_stride + b] = ti[i];
                    }
                }
                facc[h][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ac[c][b].d)), _mm256_cvtepi32_ps(t), facc[h][c]);
            }
        }
    }
R16Y_UNROLL2
    for (int h = 0; h < H; h++) {
        const unsigned k8 = (keep >> (8 * (h0 + h))) & 0xffu;
R16Y_UNROLL8
        for (int c = 0; c < NC; c++) {
            float *o = out[c] + 8 * (h0 + h);
            if (k8 == 0xffu) {
                _mm256_storeu_ps(o, facc[h][c]);
            } else {   /* a range edge inside the group: only its rows (the others' memory untouched) */
                float t[8];
                _mm256_storeu_ps(t, facc[h][c]);
                for (int i = 0; i < 8; i++)
                    if ((k8 >> i) & 1) o[i] = t[i];
            }
        }
    }
}

/* Tile shape: R16Y_TH row halves (1: 8 rows, 2: 16 rows) x up to R16Y_TW columns (the includer's
 * choice; default 8 rows x 8). */
#ifndef R16Y_TH
#define R16Y_TH 1
#define R16Y_TW 8
#endif
#ifndef R16Y_TW_ONE
#define R16Y_TW_ONE R16Y_TW
#endif
#define R16Y_TW_MAX (R16Y_TW_ONE > R16Y_TW ? R16Y_TW_ONE : R16Y_TW)
typedef void (*r16y_tile_fn)(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, int h0, float *const *out,
                             unsigned keep, int32_t *const *isum, int64_t isum_stride);
#define R16Y_TILE(NC)                                                                                                  \
    static void r16y_tile_##NC(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, int h0,                 \
                               float *const *out, unsigned keep, int32_t *const *isum, int64_t isum_stride) {          \
        r16y_tile(B, nb, ac, R16Y_TH, h0, NC, out, keep, isum, isum_stride);                                           \
    }
R16Y_TILE(1)
R16Y_TILE(2)
R16Y_TILE(3)
R16Y_TILE(4)
#if R16Y_TW_MAX > 4
R16Y_TILE(5)
#endif
#if R16Y_TW_MAX > 5
R16Y_TILE(6)
#endif
#if R16Y_TW_MAX > 6
R16Y_TILE(7)
R16Y_TILE(8)
#endif
static const r16y_tile_fn r16y_tiles[R16Y_TW_MAX + 1] = {NULL, r16y_tile_1, r16y_tile_2, r16y_tile_3, r16y_tile_4,
#if R16Y_TW_MAX > 4
                                                         r16y_tile_5,
#endif
#if R16Y_TW_MAX > 5
                                                         r16y_tile_6,
#endif
#if R16Y_TW_MAX > 6
                                                         r16y_tile_7, r16y_tile_8,
#endif
};

#if R16Y_VNNI
/* The matvec tile: both halves of a group, one column. */
static void r16y_tile_mv(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, float *const *out, unsigned keep,
                         int32_t *const *isum, int64_t isum_stride) {
    r16y_tile(B, nb, ac, 2, 0, 1, out, keep, isum, isum_stride);
}
#else
/* The AVX2 matvec tile (both halves of a group, one column), where no other column shares the
 * unpacking: slots by nibble, t = v >> 4 (vpsrlw) and v & 3, v & 12, t & 3, t & 12 (1 shift + 4
 * ands per 32 bytes instead of 3 + 4). v & 12 and t & 12 are 4 u of slots 1 and 3, so they sum
 * into their own int16 accumulators: a lane gets 2 products of 4 u <= 12 with |q| <= 127 from
 * each of the block's 8 words, <= 16 * 12 * 127 = 24384 <= 32767; the accumulator of slots 0
 * and 2 (u <= 3) gets <= 32 * 3 * 127 = 12192. Per block and half: isum = vpmaddwd(A) +
 * (vpmaddwd(B) + vpmaddwd(C)) >> 2 - sum(q), exact (B and C hold multiples of 4). */
static void r16y_tile_mv(const kern_r16_block *B, int64_t nb, const kact_fast *const *ac, float *const *out, unsigned keep,
                         int32_t *const *isum, int64_t isum_stride) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12), one = _mm256_set1_epi16(1);
    __m256 facc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const kern_r16_block *blk = B + b;
        const uintptr_t p = (uintptr_t)blk + R16Y_PF * sizeof(kern_r16_block);   /* may pass the end: never faults */
        _Pragma("GCC unroll 9")   /* the block's 9 lines; as a loop, its branch costs ~3% of the matvec */
        for (int o = 0; o < (int)sizeof(kern_r16_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_T0);
        const int8_t *q = ac[0][b].qs;
        __m256i A[2], Bq[2], C[2];
        for (int h = 0; h < 2; h++) A[h] = Bq[h] = C[h] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int j = 0; j < 8; j++) {
            const __m256i q0 = r16y_bcast(q + 16 * j), q1 = r16y_bcast(q + 16 * j + 4);
            const __m256i q2 = r16y_bcast(q + 16 * j + 8), q3 = r16y_bcast(q + 16 * j + 12);
            _Pragma("GCC unroll 2")
            for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(blk->qs[j][8 * h]));
                const __m256i t = _mm256_srli_epi16(v, 4);
                A[h] = r16y_step(A[h], _mm256_and_si256(v, m3), q0);
                Bq[h] = r16y_step(Bq[h], _mm256_and_si256(v, m12), q1);
                A[h] = r16y_step(A[h], _mm256_and_si256(t, m3), q2);
                C[h] = r16y_step(C[h], _mm256_and_si256(t, m12), q3);
            }
        }
        _Pragma("GCC unroll 2")   /* as a loop, GCC keeps the six accumulators on the stack: ~15% slower */
        for (int h = 0; h < 2; h++) {
            const __m256i b4 = _mm256_add_epi32(_mm256_madd_epi16(Bq[h], one), _mm256_madd_epi16(C[h], one));
            __m256i t = _mm256_add_epi32(_mm256_madd_epi16(A[h], one), _mm256_srai_epi32(b4, 2));
            t = _mm256_sub_epi32(t, _mm256_set1_epi32(ac[0][b].sum));
            if (isum) {
                int32_t ti[8];
                _mm256_storeu_si256((__m256i *)(void *)ti, t);
                for (int i = 0; i < 8; i++)
                    if ((keep >> (8 * h + i)) & 1) isum[0][(8 * h + i) * isum_stride + b] = ti[i];
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk->d + 8 * h)));
            facc[h] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ac[0][b].d)), _mm256_cvtepi32_ps(t), facc[h]);
        }
    }
    for (int h = 0; h < 2; h++) {
        float t[8];
        _mm256_storeu_ps(t, facc[h]);
        for (int i = 0; i < 8; i++)
            if ((keep >> (8 * h + i)) & 1) out[0][8 * h + i] = t[i];
    }
}
#endif

/* One 16-row group against nc columns (kern_r16_mm's callback): the matvec tile when the whole
 * matmul is one column (both halves in one pass), else the tile of width nc over each 8-row half
 * (or both at once when R16Y_TH is 2) that holds a row in range. */
static void r16y_group(const void *Bv, int64_t nb, int nc, int n_cols, const kact_fast *const *ac,
                       float *const *out, unsigned keep, int32_t *const *isum, int64_t isum_stride) {
    const kern_r16_block *B = Bv;
    if (nc == 1 && n_cols == 1) {
        r16y_tile_mv(B, nb, ac, out, keep, isum, isum_stride);
        return;
    }
    for (int h = 0; h < 2; h += R16Y_TH)
        if ((keep >> (8 * h)) & (R16Y_TH == 2 ? 0xffffu : 0xffu)) r16y_tiles[nc](B, nb, ac, h, out, keep, isum, isum_stride);
}

/* Rows [r0, r1) in the 16-row layout: kern_r16_mm (kern_impl.h) with tiles of up to R16Y_TW
 * columns, or the whole batch as one tile when it has at most R16Y_TW_ONE. */
static void r16y_mm_fast(const kern_mm_args *m, const kern_r16_block *base, int64_t r0, int64_t r1) {
    const int tile_max = m->a->ncols <= R16Y_TW_ONE ? R16Y_TW_ONE : R16Y_TW;
    kern_r16_mm(m, base, sizeof(kern_r16_block), r0, r1, tile_max, r16y_group);
}

#endif /* TERN_KERNELS_X86_R16_YMM_H */
