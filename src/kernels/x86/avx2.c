/* avx2.c: AVX2 kernels (vpmaddubsw). Built with -mavx2 -mfma -mf16c only; exports only
 * kern_table_avx2; every helper is static. Entries left NULL use the reference (ref.c).
 * Integer and float order: kern_impl.h; every entry here reproduces it exactly (tested ==).
 *
 * PQ2_0 (and the PTQ1_0 transcode) in fast numerics are prepared for this table in the 16-row
 * layout (row16): x86/r16_ymm.h, rows interleaved per 32-bit lane, vpmaddubsw summed in int16 for
 * a whole block, no reduction in the K loop. The row-pair kernels below run ggml numerics (the
 * model keeps the row-pair layout there) and a row-pair weight prepared under KW_F_ROWPAIR.
 *
 * PQ2_0 row-pair layout (fast numerics: matvec and matmul; ggml numerics). One ymm = word wd of
 * pair 0 (lane 0) and of pair 1 (lane 1), i.e. 4 rows x 32 weights; both lanes need the same
 * activation bytes, so slot s's activation is one vpbroadcastq of q[32 wd + 8 s .. +8] from
 * memory (no shuffles, no scratch). vpmaddubsw pair sums must stay in int16: code 3 in slot 3
 * masked in place would be 192 * 127 * 2 = 48768 > 32767 (DESIGN.md), so slots are brought down
 * to u or 4u (u <= 3) and every int16 bound is written next to the code that relies on it.
 * Fast matvec: the activation expanded once per call (every vpmaddubsw takes it as a memory
 * operand), 8 rows per pass (a row group from each half of the thread's range: two streams far
 * apart), nibble extraction, prefetch (mv_rowpair, rp_mv_pass8). Fast matmul at 2-4
 * columns (speculative verification, batched decode): 8-12 rows x all columns per pass, each
 * activation broadcast shared by the pass's row groups (rp_mm_narrow). Fast matmul at 5+: column
 * tiles of 8 with pre-extracted weight slots and pre-expanded activations, blocked over rows and
 * K (mm_rowpair_wide); 5-15 columns, and the 1-7 columns a wider batch leaves after its full
 * tiles, run as passes of at most 4 columns over row chunks that stay in L2 (mm_rowpair_split),
 * so the weights are streamed from memory once per batch, never once per leftover column. ggml matvec/matmul: the original 4-row kernel (pq2_rp_ggml_group), a word's
 * int32 per Q8_0 block. */
#include "kernels/kern_impl.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <string.h>

#include "core/fp16.h"

static inline __m256i bcast8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

/* PQ2_0 row-pair, ggml mode: the same slot extraction; a word (32 weights of 4 rows) is exactly
 * one Q8_0 activation block, so each word's int32 per row is reduced at once and folded in the
 * spec 8.2 order: blk = fmaf(d_y, isum, blk) per word, then sum = fmaf(d_w, blk, sum). */
static inline __attribute__((always_inline)) void pq2_rp_ggml_group(const kern_rp_block *B, int64_t nb,
                                                                    const kact_ggml *const *ac, int NC, int nstore,
                                                                    float *const *out, int32_t *const *isum,
                                                                    int64_t isum_stride) {
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m128 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const kern_rp_block *blk = B + b;
        __m128 bs[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) bs[c] = _mm_setzero_ps();
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++) {
            const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)blk->qs[0][wd])),
                                                      _mm_loadu_si128((const __m128i *)(const void *)blk->qs[1][wd]), 1);
            const __m256i s0 = _mm256_and_si256(v, m3);
            const __m256i s1 = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
            const __m256i s2 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
            const __m256i s3 = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const kact_ggml *ab = &ac[c][4 * b + wd];
                const int8_t *q = ab->qs;
                const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(s0, bcast8(q)), _mm256_maddubs_epi16(s1, bcast8(q + 8)));
                const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(s2, bcast8(q + 16)), _mm256_maddubs_epi16(s3, bcast8(q + 24)));
                const __m256i i32 = _mm256_madd_epi16(_mm256_add_epi16(p01, p23), ones);
                const __m256i h = _mm256_hadd_epi32(i32, i32);
                __m128i r4 = _mm256_castsi256_si128(_mm256_permute4x64_epi64(h, 0x08));
                r4 = _mm_sub_epi32(r4, _mm_set1_epi32(ab->sum));
                if (isum && c < nstore) {
                    int32_t t[4];
                    _mm_storeu_si128((__m128i *)(void *)t, r4);
                    for (int i = 0; i < 4; i++) isum[c][i * isum_stride + 4 * b + wd] = t[i];
                }
                bs[c] = _mm_fmadd_ps(_mm_set1_ps(fp16_to_f32(ab->d)), _mm_cvtepi32_ps(r4), bs[c]);
            }
        }
        const __m128 dw = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)blk->d));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) acc[c] = _mm_fmadd_ps(dw, bs[c], acc[c]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < nstore; c++) _mm_storeu_ps(out[c], acc[c]);
}

static void mm_rowpair_ggml(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t nb = w->n_in / 128, n4 = w->n_out & ~(int64_t)3, N = w->n_out, nu = w->n_in / 32;
    const size_t col = kern_act_col_bytes(KQ_GGML, a->K);
    const int64_t g1 = TERN_MIN(r1, n4);
    const kact_ggml *ac[4];
    float *out[4];
    int32_t *is[4];
    for (int64_t r = r0; r < g1; r += 4) {
        const kern_rp_block *B = rp + (r / 4) * nb;
        if (a->ncols == 1) {
            ac[0] = (const kact_ggml *)a->q;
            out[0] = m->y + r;
            is[0] = m->isum ? m->isum + r * nu : NULL;
            pq2_rp_ggml_group(B, nb, ac, 1, 1, out, m->isum ? is : NULL, nu);
            continue;
        }
        for (int c0 = 0; c0 < a->ncols; c0 += 4) {
            const int nst = TERN_MIN(4, a->ncols - c0);
            for (int c = 0; c < 4; c++) {
                const int cc = c0 + TERN_MIN(c, nst - 1);        /* pad: repeat the last column */
                ac[c] = (const kact_ggml *)(const void *)((const uint8_t *)a->q + col * (size_t)cc);
                out[c] = m->y + cc * m->ldy + r;
                is[c] = m->isum ? m->isum + ((int64_t)cc * N + r) * nu : NULL;
            }
            pq2_rp_ggml_group(B, nb, ac, 4, nst, out, m->isum ? is : NULL, nu);
        }
    }
    if (r1 > n4) kern_ref_mm_ggml(m, TERN_MAX(r0, n4), r1);
}

static void mm_pq2_0_ggml(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout != KW_ROWPAIR) { kern_ref_mm_ggml(m, r0, r1); return; }
    mm_rowpair_ggml(m, (const kern_rp_block *)(const void *)m->w->data, r0, r1);
}

static void mm_ptq1_0_ggml(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout != KW_PTQ_ROWPAIR) { kern_ref_mm_ggml(m, r0, r1); return; }
    mm_rowpair_ggml(m, (const kern_rp_block *)m->w->aux, r0, r1);
}

/* ---- PTQ1_0 direct (base-3, 5 trits per byte), fast mode --------------------------------------
 * Digit n of byte b is u = (3 v) >> 8 with v = b * 3^n mod 256, i.e. u = [v >= 86] + [v >= 171]
 * (spec 3.4). v * 3 mod 256 is two byte adds; the two thresholds are signed compares after
 * flipping the sign bit; u = -(gt86 + gt171) in 0..2. Two rows per ymm (one per lane).
 * Part A: qs[0..15], digit n = elements 16 n + m: activation q[16 n .. 16 n + 15], contiguous.
 * Part B: [qs[16..23], qh[0..1], 0 x 6], digit n = elements 80 + 8 n + m (m < 8) and 120 + 2 n + m
 *   (m < 2, n < 4): its activation is gathered once per activation block into actB[n] (zeros
 *   where no element is, so the padding digits contribute nothing).
 * int16 bound: 10 maddubs results of u <= 2 and |q| <= 127 per pair: 10 * 2 * 2 * 127 = 5080.
 * Then isum = sum(u * q) - sum(q) per row and block, exact. */
#define PTQ_CH 32    /* activation blocks per chunk (stack scratch: 4 columns x 32 x 80 bytes) */

static inline __m256i ptq_digit(__m256i v) {       /* u of every byte of v (v already * 3^n) */
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    const __m256i t1 = _mm256_set1_epi8((char)(85 ^ 0x80)), t2 = _mm256_set1_epi8((char)(170 ^ 0x80));
    const __m256i vx = _mm256_xor_si256(v, flip);
    const __m256i neg = _mm256_add_epi8(_mm256_cmpgt_epi8(vx, t1), _mm256_cmpgt_epi8(vx, t2));
    return _mm256_sub_epi8(_mm256_setzero_si256(), neg);
}
static inline __m256i mul3(__m256i v) { return _mm256_add_epi8(_mm256_add_epi8(v, v), v); }

static inline __m256i load2rows(const uint8_t *a, const uint8_t *b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a)),
                                   _mm_loadu_si128((const __m128i *)(const void *)b), 1);
}
static inline __m128i load_partB(const uint8_t *blk) {   /* bytes 16..25 of a block, zero-extended */
    uint16_t h;
    memcpy(&h, blk + 24, 2);
    return _mm_insert_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(blk + 16)), h, 4);
}

/* Two rows (ra, rb; rb may equal ra for a padded pair) x NC columns, blocks [b0, b0 + nbc). */
static inline __attribute__((always_inline)) void ptq_pair(const uint8_t *ra, const uint8_t *rbw, int64_t b0, int nbc,
                                                           const kact_fast *const *ac, const int8_t (*actB)[PTQ_CH][5][16],
                                                           int NC, __m128 *acc2, int32_t *const *isA, int32_t *const *isB) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int bi = 0; bi < nbc; bi++) {
        const int64_t b = b0 + bi;
        const uint8_t *xa = ra + b * 28, *xb = rbw + b * 28;
        __m256i vA = load2rows(xa, xb);
        __m256i vB = _mm256_inserti128_si256(_mm256_castsi128_si256(load_partB(xa)), load_partB(xb), 1);
        __m256i p[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) p[c] = _mm256_setzero_si256();
#pragma GCC unroll 5
        for (int n = 0; n < 5; n++) {
            if (n) { vA = mul3(vA); vB = mul3(vB); }
            const __m256i uA = ptq_digit(vA), uB = ptq_digit(vB);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m256i yA = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(ac[c][b].qs + 16 * n)));
                const __m256i yB = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)actB[c][bi][n]));
                p[c] = _mm256_add_epi16(p[c], _mm256_add_epi16(_mm256_maddubs_epi16(uA, yA), _mm256_maddubs_epi16(uB, yB)));
            }
        }
        const __m128 dw = _mm_setr_ps(fp16_to_f32((uint16_t)(xa[26] | xa[27] << 8)), fp16_to_f32((uint16_t)(xb[26] | xb[27] << 8)), 0, 0);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const __m256i s32 = _mm256_madd_epi16(p[c], ones);                      /* [a a a a | b b b b] */
            const __m256i h = _mm256_hadd_epi32(s32, s32);                          /* [a a . . | b b . .] */
            const __m128i lo = _mm256_castsi256_si128(h), hi = _mm256_extracti128_si256(h, 1);
            __m128i r2 = _mm_hadd_epi32(_mm_unpacklo_epi64(lo, hi), _mm_setzero_si128());   /* [a b 0 0] */
            r2 = _mm_sub_epi32(r2, _mm_set1_epi32(ac[c][b].sum));
            if (isA && isA[c]) isA[c][b] = _mm_cvtsi128_si32(r2);
            if (isB && isB[c]) isB[c][b] = _mm_extract_epi32(r2, 1);
            const __m128 sc = _mm_mul_ps(dw, _mm_set1_ps(ac[c][b].d));
            acc2[c] = _mm_fmadd_ps(sc, _mm_cvtepi32_ps(r2), acc2[c]);
        }
    }
}

static void build_actB(const kact_fast *ac, int64_t b0, int nbc, int8_t (*dst)[5][16]) {
    for (int bi = 0; bi < nbc; bi++) {
        const int8_t *q = ac[b0 + bi].qs;
#pragma GCC unroll 5
        for (int n = 0; n < 5; n++) {
            memset(dst[bi][n], 0, 16);
            memcpy(dst[bi][n], q + 80 + 8 * n, 8);
            if (n < 4) { dst[bi][n][8] = q[120 + 2 * n]; dst[bi][n][9] = q[121 + 2 * n]; }
        }
    }
}

static void mm_ptq1_0_direct(const kern_mm_args *m, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t nb = w->n_in / 128, N = w->n_out, rb = nb * 28;
    const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
    const int64_t rp1 = r0 + ((r1 - r0) & ~(int64_t)1);     /* rows in pairs; an odd last row: ref */
    int8_t actB[4][PTQ_CH][5][16];
    const int NCt = a->ncols == 1 ? 1 : 4;
    for (int c0 = 0; c0 < a->ncols; c0 += NCt) {
        const int nst = TERN_MIN(NCt, a->ncols - c0);
        const kact_fast *ac[4];
        for (int c = 0; c < NCt; c++)
            ac[c] = (const kact_fast *)(const void *)((const uint8_t *)a->q + col * (size_t)(c0 + TERN_MIN(c, nst - 1)));
        for (int64_t b0 = 0; b0 < nb; b0 += PTQ_CH) {
            const int nbc = (int)TERN_MIN((int64_t)PTQ_CH, nb - b0);
            for (int c = 0; c < NCt; c++) build_actB(ac[c], b0, nbc, actB[c]);
            for (int64_t r = r0; r < rp1; r += 2) {
                __m128 acc2[4];
                int32_t *isA[4] = {0}, *isB[4] = {0};
                for (int c = 0; c < NCt; c++) {
                    acc2[c] = _mm_setzero_ps();
                    if (c < nst && b0 > 0) {             /* carry the running sum through y (lossless) */
                        float *yc = m->y + (c0 + c) * m->ldy + r;
                        acc2[c] = _mm_setr_ps(yc[0], yc[1], 0, 0);
                    }
                    if (m->isum && c < nst) {
                        isA[c] = m->isum + ((int64_t)(c0 + c) * N + r) * nb;
                        isB[c] = isA[c] + nb;
                    }
                }
                if (NCt == 1) ptq_pair(w->data + r * rb, w->data + (r + 1) * rb, b0, nbc, ac, (const int8_t(*)[PTQ_CH][5][16])actB, 1, acc2,
                                       m->isum ? isA : NULL, m->isum ? isB : NULL);
                else ptq_pair(w->data + r * rb, w->data + (r + 1) * rb, b0, nbc, ac, (const int8_t(*)[PTQ_CH][5][16])actB, 4, acc2,
                              m->isum ? isA : NULL, m->isum ? isB : NULL);
                for (int c = 0; c < nst; c++) {
                    float *yc = m->y + (c0 + c) * m->ldy + r;
                    yc[0] = _mm_cvtss_f32(acc2[c]);
                    yc[1] = _mm_cvtss_f32(_mm_shuffle_ps(acc2[c], acc2[c], 1));
                }
            }
        }
    }
    if (rp1 < r1) kern_ref_mm_fast(m, rp1, r1);
}

/* ---- PQ2_0 row-pair, fast mode: matvec (one column) ---------------------------------------
 * One ymm = word wd of pair 0 (lane 0) and of pair 1 (lane 1): 4 rows x 32 weights; slot s's
 * activation is q[32 wd + 8 s .. +8] in both lanes, read as a memory operand of vpmaddubsw from
 * the activation expanded once per call (mv_expand below).
 * Nibble extraction (1 shift + 4 ands per ymm): lo = v, hi = v >> 4 (16-bit shift; the masks keep
 * bits 0-3 of each byte, which come from the same byte):
 *   lo & 0x03 = u0, lo & 0x0C = 4 u1, hi & 0x03 = u2, hi & 0x0C = 4 u3 (u = code 0..3).
 * vpmaddubsw pair sums: slots 0, 2 <= 2 * 3 * 127 = 762; slots 1, 3 <= 2 * 12 * 127 = 3048 (code 3
 * included). Per block (4 words) in int16: a1 = the slot 0 + slot 2 products (<= 4 * 2 * 762 =
 * 6096 in magnitude) started at nsum_init, i.e. -sum(q) once per row (|sum| <= 16256): |a1| <=
 * 22352; a4 = slots 1 + 3, |a4| <= 4 * 2 * 3048 = 24384 < 32767 and exactly 4x an integer, so
 * a1 + (a4 >> 2) (|.| <= 28448) summed over a row's 4 lanes is exactly isum = sum(u * q) - sum(q)
 * (the +1 of u = t + 1 removed by the start value), widened once per block by one vpmaddwd.
 * Two row groups (8 rows) per pass share the expanded activation; their int32 are reduced by
 * one vphaddd into [A0 A1 B0 B1 | A2 A3 B2 B3] and the fp16 weight scales are converted in the
 * same order, so one 8-lane fma per block does the float order of kern_impl.h for 8 rows.
 * Software prefetch RP_PF blocks ahead in each of the two streams (the hardware prefetcher alone
 * left the 2-thread matvec at ~55% of the read bandwidth; bench/RESULTS.md "kern"). */
#define RP_PF 16   /* blocks ahead (2176 bytes) */


static inline __attribute__((always_inline)) __m256i rp_load_word(const kern_rp_block *blk, int wd) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)blk->qs[0][wd])),
                                   _mm_loadu_si128((const __m128i *)(const void *)blk->qs[1][wd]), 1);
}

/* An int16 accumulator holding -sum(q) once per row (lanes 0, 4, 8, 12: each row owns 4 lanes)
 * and 0 elsewhere: the "- sum(q)" of isum done by the accumulator's start value, exact in int16
 * (bounds at each use). */
static inline __m256i nsum_init(const kact_fast *x) {
    int64_t v;
    memcpy(&v, x->nsum, 8);
    return _mm256_set1_epi64x(v);
}

/* int32 [r0 r0 r1 r1 | r2 r2 r3 r3] (pairs of partial sums per row) of one group's block. */
static inline __attribute__((always_inline)) __m256i rp_nibble_fold(__m256i a1, __m256i a4) {
    return _mm256_madd_epi16(_mm256_add_epi16(a1, _mm256_srai_epi16(a4, 2)), _mm256_set1_epi16(1));
}

/* Prefetch block i of the blocks at `base` (3 lines cover any 136-byte block). The address may
 * lie past the tensor (a prefetch never faults), so it is formed as an integer, not by pointer
 * arithmetic outside the object. always_inline: GCC 12 left it out of line in the narrow matmul
 * (rp_mm_narrow), found it free of side effects and deleted the calls (no prefetch in the asm). */
static inline __attribute__((always_inline)) void rp_prefetch(const kern_rp_block *base, int64_t i) {
    const uintptr_t p = (uintptr_t)base + (uintptr_t)i * sizeof(kern_rp_block);
    _mm_prefetch((const char *)p, _MM_HINT_T0);
    _mm_prefetch((const char *)(p + 64), _MM_HINT_T0);
    _mm_prefetch((const char *)(p + 128), _MM_HINT_T0);
}

/* The activation of a matvec, expanded once per call and K chunk: for each block, word wd and
 * slot s, the slot's 8 bytes q[32 wd + 8 s .. +8] replicated to 32 (both lanes of a word meet the
 * same activation bytes), so every vpmaddubsw of the pass takes its activation as a memory
 * operand instead of a vpbroadcastq per slot. Per word of two row groups: 2 x (2 loads + 1 shift
 * + 4 ands) + 8 madds + 8 adds (30 ops for 8 madds, 34 with the broadcasts); with the word loop
 * unrolled (no activation registers left to spill) and each add pinned into its accumulator,
 * 1.05-1.09x as fast in L2 and 1.01-1.11x from memory as the same loop with a vpbroadcastq per
 * slot and unpinned adds (1 thread, in-process A/B). The expansion costs 32 ops per block per call (68 KB for
 * K = 17408), i.e. < 1% of a call with 100+ rows per thread.
 * MV_KB blocks per chunk (68 KB of stack: K <= 17408 is one chunk, in L2; chunks of 32 blocks,
 * in L1, were 4% slower in L2 and 18-30% slower from memory, the weight stream being cut into
 * short runs); a longer K is done in chunks with the float accumulators carried in y (stored and
 * reloaded unchanged, so each row still sums b = 0 .. nb-1 in order). */
#define MV_KB 136
typedef struct {
    __m256i q[4][4];   /* [word][slot] */
} mv_xblk;             /* 512 bytes */

static void mv_expand(mv_xblk *x, const kact_fast *ac, int n) {
    for (int b = 0; b < n; b++)
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++)
#pragma GCC unroll 4
            for (int s = 0; s < 4; s++) x[b].q[wd][s] = bcast8(ac[b].qs + 32 * wd + 8 * s);
}

/* a1 += slot0 + slot2 products, a4 += slot1 + slot3 products of word v against the expanded
 * slots xq[0..3] (memory operands). One add per product straight into the accumulator, the order
 * pinned by MV_PIN (int16 sums are exact in any order, bounds above; unpinned, GCC 12 added the
 * two products first and then copied the sum into the accumulator: 4 extra vmovdqa per word). */
#define MV_PIN(x) __asm__ volatile("" : "+x"(x))
static inline __attribute__((always_inline)) void rp_nibble_acc_x(__m256i v, const __m256i *xq, __m256i *a1, __m256i *a4) {
    const __m256i m3 = _mm256_set1_epi8(3), mC = _mm256_set1_epi8(12);
    const __m256i h = _mm256_srli_epi16(v, 4);
    __m256i s1 = *a1, s4 = *a4;
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(_mm256_and_si256(v, m3), xq[0]));
    MV_PIN(s1);
    s4 = _mm256_add_epi16(s4, _mm256_maddubs_epi16(_mm256_and_si256(v, mC), xq[1]));
    MV_PIN(s4);
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(_mm256_and_si256(h, m3), xq[2]));
    MV_PIN(s1);
    s4 = _mm256_add_epi16(s4, _mm256_maddubs_epi16(_mm256_and_si256(h, mC), xq[3]));
    MV_PIN(s4);
    *a1 = s1;
    *a4 = s4;
}

/* Float accumulator order of a pass8: [A0 A1 B0 B1 | A2 A3 B2 B3] <-> rows 0..7 (its own inverse). */
static inline __m256i mv_perm8(void) { return _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7); }

/* Rows of two groups (4 rows each): group A at A (output yA, isum iA) and group B at B (yB, iB),
 * blocks [b0, b1) of nb; x holds the expanded activation of those blocks. `step`: blocks from a
 * group to the next pass's group of the same stream (the prefetch runs on into it past the end of
 * the chunk). first: the accumulators start at +0, else they are reloaded from y (the previous
 * chunk's). */
static void rp_mv_pass8(const kern_rp_block *A, const kern_rp_block *B, int64_t nb, int64_t step, int64_t b0, int64_t b1,
                        const kact_fast *ac, const mv_xblk *x, float *yA, float *yB, int32_t *iA, int32_t *iB, bool first) {
    __m256 acc = first ? _mm256_setzero_ps()
                       : _mm256_permutevar8x32_ps(_mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(yA)), _mm_loadu_ps(yB), 1),
                                                  mv_perm8());
    for (int64_t b = b0; b < b1; b++) {
        /* prefetch: RP_PF blocks ahead in each stream; past the end of the chunk, the same chunk
         * of the next pass's group of that stream (step blocks further) */
        const int64_t pf = b + RP_PF < b1 ? b + RP_PF : b + RP_PF - (b1 - b0) + step;
        rp_prefetch(A, pf);
        rp_prefetch(B, pf);
        const kern_rp_block *ba = A + b, *bb = B + b;
        const mv_xblk *xb = x + (b - b0);
        __m256i a1 = nsum_init(&ac[b]), b1s = a1, a4 = _mm256_setzero_si256(), b4 = a4;
#pragma GCC unroll 4   /* unrolled x1 or x2: ~5% slower in L2; vpbroadcastq instead of the expansion (pinned,
                        * unrolled): 5-6% slower; the adds unpinned: 15% slower (in-process A/B) */
        for (int wd = 0; wd < 4; wd++) {
            rp_nibble_acc_x(rp_load_word(ba, wd), xb->q[wd], &a1, &a4);
            rp_nibble_acc_x(rp_load_word(bb, wd), xb->q[wd], &b1s, &b4);
        }
        const __m256i h = _mm256_hadd_epi32(rp_nibble_fold(a1, a4), rp_nibble_fold(b1s, b4));   /* [A0 A1 B0 B1 | A2 A3 B2 B3] */
        if (iA) {
            int32_t t[8];
            static const int row[8] = {0, 1, 4, 5, 2, 3, 6, 7};
            _mm256_storeu_si256((__m256i *)(void *)t, h);
            for (int i = 0; i < 8; i++) (row[i] < 4 ? iA : iB)[(row[i] & 3) * nb + b] = t[i];
        }
        const __m128i da = _mm_loadl_epi64((const __m128i *)(const void *)ba->d), db = _mm_loadl_epi64((const __m128i *)(const void *)bb->d);
        const __m256 dw = _mm256_cvtph_ps(_mm_unpacklo_epi32(da, db));                   /* same order */
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ac[b].d)), _mm256_cvtepi32_ps(h), acc);
    }
    const __m256 r = _mm256_permutevar8x32_ps(acc, mv_perm8());   /* rows A0..A3 B0..B3 */
    _mm_storeu_ps(yA, _mm256_castps256_ps128(r));
    _mm_storeu_ps(yB, _mm256_extractf128_ps(r, 1));
}

/* Rows 4g .. 4g + 3 (one group: the odd last group of a range), blocks [b0, b1) as pass8. */
static void rp_mv_pass4(const kern_rp_block *A, int64_t nb, int64_t b0, int64_t b1, const kact_fast *ac,
                        const mv_xblk *x, float *y, int32_t *isum, bool first) {
    __m128 acc = first ? _mm_setzero_ps() : _mm_loadu_ps(y);
    for (int64_t b = b0; b < b1; b++) {
        rp_prefetch(A, b + RP_PF);
        const kern_rp_block *ba = A + b;
        const mv_xblk *xb = x + (b - b0);
        __m256i a1 = nsum_init(&ac[b]), a4 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++) rp_nibble_acc_x(rp_load_word(ba, wd), xb->q[wd], &a1, &a4);
        const __m256i t = rp_nibble_fold(a1, a4);
        const __m256i h = _mm256_hadd_epi32(t, t);                                   /* [a b a b | c d c d] */
        const __m128i r4 = _mm256_castsi256_si128(_mm256_permute4x64_epi64(h, 0x08));     /* [a b c d] */
        if (isum) {
            int32_t t4[4];
            _mm_storeu_si128((__m128i *)(void *)t4, r4);
            for (int i = 0; i < 4; i++) isum[i * nb + b] = t4[i];
        }
        const __m128 dw = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)ba->d));
        acc = _mm_fmadd_ps(_mm_mul_ps(dw, _mm_set1_ps(ac[b].d)), _mm_cvtepi32_ps(r4), acc);
    }
    _mm_storeu_ps(y, acc);
}

/* Rows [r0, g1) (whole groups) x one column: K chunks of MV_KB blocks (one for K <= 17408), each
 * expanded once into a 68 KB stack buffer, then 8-row passes and an odd last group. noinline: the
 * buffer lives only while a matvec runs (not in the frames of the matmul paths that call
 * mm_rowpair_fast for leftover columns unless they reach here). */
static __attribute__((noinline)) void mv_rowpair(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t g1) {
    const int64_t nb = m->w->n_in / 128;
    const kact_fast *ac = (const kact_fast *)m->a->q;
    mv_xblk x[MV_KB];
    for (int64_t b0 = 0; b0 < nb; b0 += MV_KB) {
        const int64_t b1 = TERN_MIN(nb, b0 + MV_KB);
        mv_expand(x, ac + b0, (int)(b1 - b0));
        /* two streams far apart: group i of the range's first half with group i of its second
         * half (an odd last group: pass4). Pairing adjacent groups (one stream) streamed the
         * K = 2048 matrices of bonsai-1.7b 14-18% slower from memory at 2 threads (interleaved
         * in-process A/B); the rows' sums are the same. */
        const int64_t ng = (g1 - r0) / 4, h = ng / 2;
        for (int64_t i = 0; i < h; i++) {
            const int64_t ra = r0 + 4 * i, rb = r0 + 4 * (h + i);
            rp_mv_pass8(rp + (ra / 4) * nb, rp + (rb / 4) * nb, nb, nb, b0, b1, ac, x, m->y + ra, m->y + rb,
                        m->isum ? m->isum + ra * nb : NULL, m->isum ? m->isum + rb * nb : NULL, b0 == 0);
        }
        const int64_t r = r0 + 8 * h;
        if (r < g1) rp_mv_pass4(rp + (r / 4) * nb, nb, b0, b1, ac, x, m->y + r, m->isum ? m->isum + r * nb : NULL, b0 == 0);
    }
}

/* ---- PQ2_0 row-pair, fast mode: narrow matmul, 2-4 columns (speculative verification, batched
 * decode) -------------------------------------------------------------------------------------
 * G row groups (4G rows, consecutive groups at A + g * nb) x NC columns per pass, all nb blocks:
 * G = 3 at NC = 2, G = 2 at NC = 3 and 4 (fewer groups at the end of a row range). Per word and
 * slot s, each group's codes are extracted once (u = (v >> 2s) & 3: one shift + one and) and each
 * column's activation broadcast (vpbroadcastq of q[32 wd + 8 s .. +8]) is loaded once and used by
 * all G groups: a word costs 2G loads + 7G extraction ops + 4 NC broadcasts + 8 G NC madd/add for
 * 4 G NC vpmaddubsw. On Zen 3 each vector op (loads and broadcasts included) takes about one of
 * ~3.4 issue slots per cycle, so this count, not the int8 peak, sets the speed: a tile of one
 * group with a column's 4 broadcasts per group spends 3.6 ops per madd at NC = 2 and 4; this
 * pass 3.46 (NC = 2), 3.25 (3), 3.06 (4).
 * One int16 accumulator per (group, column), started at nsum_init (-sum(q) once per row, |sum| <=
 * 16256); per lane and block 16 vpmaddubsw pair sums of u <= 3 and |q| <= 127: <= 16 * 2 * 3 *
 * 127 = 12192, so |lane| <= 28448 < 32767 (code 3 included); widened once per block by vpmaddwd.
 * RP_PIN after each add pins the accumulation order (it emits no instruction): without it GCC 12
 * reassociates the adds into trees of products and spills (measured in L2: 42% -> 55% of the
 * int8 peak at NC = 4). Groups are reduced in pairs (ga, gb; gb = ga for an odd last group) by one
 * vphaddd per column into [ga r0 r1, gb r0 r1 | ga r2 r3, gb r2 r3] and the fp16 weight scales are
 * converted in that order, so one 8-lane fma per block and column does the float order of
 * kern_impl.h (acc = fmaf(d_w * d_a, isum, acc) from +0); the float accumulators live in a small
 * stack array (one load + store per group pair, column and block). Prefetch as in rp_mv_pass8:
 * RP_PF blocks ahead in each group's stream, past a row's end into the next pass's groups.
 * Word loads: rp_load_word_blend, two 32-byte loads and a vpblendd instead of a 16-byte load and a
 * vinserti128 from memory (the same bytes; vpblendd runs on any vector pipe, the insert needs a
 * shuffle slot; ~4% faster at 3-4 columns with the weights in L2). What sets the speed is the ~350
 * vector ALU ops per 128 madds at G = 2, NC = 4 (70% of the int8 peak would need ~300; madd + add
 * alone would reach 77.5%); the broadcasts are a small part of them. */
#define RP_PIN(x) __asm__ volatile("" : "+x"(x))

/* Word wd of block blk as rp_load_word gives it ([pair 0 word wd | pair 1 word wd]): bytes
 * 8 + 16 wd .. +32 of the block hold pair 0's word wd in their low half, bytes 56 + 16 wd .. +32
 * hold pair 1's word wd (at 72 + 16 wd) in their high half; both ranges lie inside the 136-byte
 * block for wd = 0..3 (the first starts after d[4] at byte 8, the last, 104 .. 135 at wd = 3,
 * ends with the block). */
static inline __attribute__((always_inline)) __m256i rp_load_word_blend(const kern_rp_block *blk, int wd) {
    const uint8_t *p = (const uint8_t *)(const void *)blk;
    return _mm256_blend_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + 8 + 16 * wd)),
                              _mm256_loadu_si256((const __m256i *)(const void *)(p + 56 + 16 * wd)), 0xF0);
}
_Static_assert(offsetof(kern_rp_block, qs) == 8 && offsetof(kern_rp_block, qs[1][0]) == 72, "rp_load_word_blend offsets");
static inline __attribute__((always_inline)) void rp_mm_narrow(const kern_rp_block *A, int64_t nb, int G, int NC,
                                                               const kact_fast *const *x, float *const *y,
                                                               int32_t *const *isum, int64_t isum_stride) {
    float facc[2][4][8] __attribute__((aligned(32)));   /* [group pair][column][lane] */
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
#pragma GCC unroll 2
    for (int gp = 0; gp < (G + 1) / 2; gp++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) _mm256_store_ps(facc[gp][c], _mm256_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        const int64_t pf = b + RP_PF < nb ? b + RP_PF : b + RP_PF + (G - 1) * nb;
#pragma GCC unroll 3
        for (int g = 0; g < G; g++) rp_prefetch(A + g * nb, pf);
        __m256i acc[3][4];
#pragma GCC unroll 3
        for (int g = 0; g < G; g++)
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) acc[g][c] = nsum_init(&x[c][b]);
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++) {
            __m256i v[3];
#pragma GCC unroll 3
            for (int g = 0; g < G; g++) {
                v[g] = rp_load_word_blend(A + g * nb + b, wd);
                RP_PIN(v[g]);
            }
#pragma GCC unroll 4
            for (int sl = 0; sl < 4; sl++) {
                __m256i u[3];
#pragma GCC unroll 3
                for (int g = 0; g < G; g++) u[g] = _mm256_and_si256(sl ? _mm256_srli_epi16(v[g], 2 * sl) : v[g], m3);
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) {
                    const __m256i q = bcast8(x[c][b].qs + 32 * wd + 8 * sl);
#pragma GCC unroll 3
                    for (int g = 0; g < G; g++) {
                        acc[g][c] = _mm256_add_epi16(acc[g][c], _mm256_maddubs_epi16(u[g], q));
                        RP_PIN(acc[g][c]);
                    }
                }
            }
        }
#pragma GCC unroll 2
        for (int gp = 0; gp < (G + 1) / 2; gp++) {
            const int ga = 2 * gp, gb = 2 * gp + 1 < G ? 2 * gp + 1 : 2 * gp;
            const __m128i da = _mm_loadl_epi64((const __m128i *)(const void *)A[ga * nb + b].d);
            const __m128i db = _mm_loadl_epi64((const __m128i *)(const void *)A[gb * nb + b].d);
            const __m256 dw = _mm256_cvtph_ps(_mm_unpacklo_epi32(da, db));       /* [ga d0 d1, gb d0 d1 | ga d2 d3, gb d2 d3] */
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(acc[ga][c], ones), _mm256_madd_epi16(acc[gb][c], ones));
                if (isum) {
                    int32_t t[8];
                    static const int row[8] = {0, 1, 4, 5, 2, 3, 6, 7};
                    _mm256_storeu_si256((__m256i *)(void *)t, h);
                    for (int i = 0; i < 8; i++)
                        if (row[i] < 4 || gb != ga) isum[c][(4 * ga + row[i]) * isum_stride + b] = t[i];
                }
                const __m256 s = _mm256_mul_ps(dw, _mm256_set1_ps(x[c][b].d));
                _mm256_store_ps(facc[gp][c], _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(h), _mm256_load_ps(facc[gp][c])));
            }
        }
    }
    for (int gp = 0; gp < (G + 1) / 2; gp++)
        for (int c = 0; c < NC; c++) {
            const __m256 o = _mm256_permutevar8x32_ps(_mm256_load_ps(facc[gp][c]), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
            if (2 * gp + 1 < G) _mm256_storeu_ps(y[c] + 8 * gp, o);
            else _mm_storeu_ps(y[c] + 8 * gp, _mm256_castps256_ps128(o));
        }
}

/* Rows [r0, g1) (whole groups) of a 2-4 column batch: passes of G groups (G = 3 at 2 columns, 2
 * at 3 and 4), fewer at the end; each pass streams its groups' weights once for all columns. */
static void mm_rowpair_narrow(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t g1) {
    const kern_act *a = m->a;
    const int64_t nb = m->w->n_in / 128, N = m->w->n_out;
    const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
    const int NC = a->ncols, G = NC == 2 ? 3 : 2;
    const kact_fast *x[4];
    float *y[4];
    int32_t *is[4];
    for (int64_t r = r0; r < g1;) {
        const int gg = (int)TERN_MIN((int64_t)G, (g1 - r) / 4);
        for (int c = 0; c < NC; c++) {
            x[c] = (const kact_fast *)(const void *)((const uint8_t *)a->q + col * (size_t)c);
            y[c] = m->y + c * m->ldy + r;
            is[c] = m->isum ? m->isum + ((int64_t)c * N + r) * nb : NULL;
        }
        const kern_rp_block *A = rp + (r / 4) * nb;
        int32_t *const *isp = m->isum ? is : NULL;
        if (NC == 2) {
            if (gg == 3) rp_mm_narrow(A, nb, 3, 2, x, y, isp, nb);
            else if (gg == 2) rp_mm_narrow(A, nb, 2, 2, x, y, isp, nb);
            else rp_mm_narrow(A, nb, 1, 2, x, y, isp, nb);
        } else if (NC == 3) {
            if (gg == 2) rp_mm_narrow(A, nb, 2, 3, x, y, isp, nb);
            else rp_mm_narrow(A, nb, 1, 3, x, y, isp, nb);
        } else {
            if (gg == 2) rp_mm_narrow(A, nb, 2, 4, x, y, isp, nb);
            else rp_mm_narrow(A, nb, 1, 4, x, y, isp, nb);
        }
        r += 4 * gg;
    }
}

/* ---- PQ2_0 row-pair, fast mode: wide matmul (>= 5 columns: prefill) ------------------------------
 * A tile of WT_NC = 8 columns against one row group (4 rows) at a time. Both operands of every
 * vpmaddubsw are prepared once per K chunk (WT_KB blocks), so the inner loop is only loads,
 * vpmaddubsw and vpaddw (per block and column 16 + 16, plus 2 slot loads shared by 8 columns):
 *   - weight slots (wt_extract): per row chunk (WT_RG groups), K chunk and tile group (up to
 *     WT_TG tiles), each word's four slots u = (v >> 2s) & 3 (codes 0..3) are extracted once into
 *     ws[g].u[b][wd][s] and reused by every tile of the group (extracting them in each tile
 *     costs 1 load + 1 vinserti128 + 3 shifts + 4 ands per word and tile, and broadcasting every
 *     activation there spills 5 of the 8 accumulators);
 *   - activations (wt_expand): per K chunk and tile, x.q[b][wd][s][c] = column c's
 *     q[32 wd + 8 s .. + 8] in all four 64-bit lanes (the bytes that slot s of word wd meets in
 *     both row pairs), so every vpmaddubsw takes it as a 32-byte memory operand: no broadcast uop
 *     and no register (8 int16 accumulators + 1 slot fit the 16 ymm without a spill); x.n16 =
 *     nsum_init starts each accumulator at -sum(q) once per row. A repack of the quantised
 *     column, not a second quantisation; 4 blocks x 8 columns = 17 KB, in L1 while the WT_RG
 *     groups of the row chunk read it (that reuse is what pays for the expansion).
 *   - int16 bound: codes u <= 3 (code 3 included), |q| <= 127: pair sums <= 2 * 3 * 127 = 762;
 *     16 vpmaddubsw per lane and block: 12192; plus the start value -sum(q), |sum| <= 16256:
 *     |lane| <= 28448 < 32767. A row's lane sum is exactly isum = sum(u q) - sum(q) = sum(t q).
 *   - per block and column pair: vpmaddwd x2 (one widening per block), vphaddd -> [c r0, c r1,
 *     c+1 r0, c+1 r1 | c r2, c r3, c+1 r2, c+1 r3], vcvtdq2ps, vmulps (weight x activation scale:
 *     the one f32 multiply of kern_impl.h), vfmadd: the float order of kern_impl.h per (row, col).
 *   - loops: row chunk -> tile group -> K chunk (extract the chunk's slots) -> tile (expand) ->
 *     group. The float accumulators of every (group, tile) of the row chunk are carried between
 *     K chunks in `carry` (f32, stored and reloaded unchanged, so each (row, column) still sums
 *     b = 0 .. nb-1 in order). Carrying them through y instead cost ~6%: y's columns are ldy
 *     floats apart, often a multiple of 4 KB, so 8 columns fight over one L1 set.
 *   - stack: ws 128 KB + carry 128 KB + x 18 KB = 274 KB (kernels.h: kern_matmul's stack use).
 *   - columns: tiles of 8; the 1-7 leftover columns go to mm_rowpair_split (passes of <= 4
 *     columns, the matvec or the narrow path) per row chunk while it is in L2.
 * Measured: the word loop alone runs at ~80% of the int8
 * peak (one vpaddw per vpmaddubsw competes for the vector pipes); the per-block epilogue, the
 * expansion and the extraction take it to ~60-64%. */
#define WT_NC 8    /* columns per tile */
#define WT_KB 4    /* blocks per K chunk: a tile's expanded activations are 4 x 4.4 KB (L1) */
/* Row chunk and tile group: larger is faster while the slots stay in L2 (each tile's expansion
 * serves more groups, each extraction more tiles). Measured (in-process A/B, 1 thread, same
 * bits): RG 16 is 5% slower than 32, TG 4 4% slower than 8; RG 64 + TG 16 is 3-5% faster than
 * 32 + 8 at 16-512 columns, 64 + 8 3-4%, 32 + 16 1-3%. */
#define WT_RG 64   /* row groups per row chunk: their slots are 64 x 2 KB per K chunk (L2) */
#define WT_TG 16   /* tiles per tile group (128 columns share one slot extraction) */

typedef struct {
    __m256i q[WT_KB][4][4][WT_NC];   /* [block][word][slot][column] */
    __m256i n16[WT_KB][WT_NC];        /* nsum_init of [block][column] */
    __m256 d[WT_KB][WT_NC / 2];       /* f32 [d_c d_c d_c+1 d_c+1 | same] of [block][column pair] */
} wt_act;

typedef struct {
    __m256i u[WT_KB][4][4];           /* [block][word][slot]: codes of 4 rows x 8 weights */
} wt_slots;

/* Blocks [b0, b0 + nbc) of the tile's columns ac[0 .. WT_NC-1] into x. */
static void wt_expand(wt_act *x, const kact_fast *const *ac, int64_t b0, int nbc) {
    for (int b = 0; b < nbc; b++) {
#pragma GCC unroll 8
        for (int c = 0; c < WT_NC; c++) {
            const kact_fast *xc = &ac[c][b0 + b];
#pragma GCC unroll 4
            for (int wd = 0; wd < 4; wd++)
#pragma GCC unroll 4
                for (int s = 0; s < 4; s++) x->q[b][wd][s][c] = bcast8(xc->qs + 32 * wd + 8 * s);
            x->n16[b][c] = nsum_init(xc);
        }
#pragma GCC unroll 4
        for (int p = 0; p < WT_NC / 2; p++) {
            const float d0 = ac[2 * p][b0 + b].d, d1 = ac[2 * p + 1][b0 + b].d;
            x->d[b][p] = _mm256_setr_ps(d0, d0, d1, d1, d0, d0, d1, d1);
        }
    }
}

/* The slots of blocks B[0 .. nbc-1] of one group into ws. */
static void wt_extract(wt_slots *ws, const kern_rp_block *B, int nbc) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int b = 0; b < nbc; b++)
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++) {
            const __m256i v = rp_load_word(B + b, wd);
            ws->u[b][wd][0] = _mm256_and_si256(v, m3);
            ws->u[b][wd][1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
            ws->u[b][wd][2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
            ws->u[b][wd][3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
        }
}

/* One row group (its chunk's slots ws, weight blocks B for the scales) x the tile: facc[p] +=
 * the chunk's terms. isum: NULL, or per column the test hook's pointer to (row 0, block b0). */
static inline __attribute__((always_inline)) void wt_group(const wt_slots *ws, const kern_rp_block *B, int nbc,
                                                           const wt_act *x, __m256 *facc, int32_t *const *isum, int nstore,
                                                           int64_t isum_stride) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int b = 0; b < nbc; b++) {
        __m256i acc[WT_NC];
#pragma GCC unroll 8
        for (int c = 0; c < WT_NC; c++) acc[c] = x->n16[b][c];
#pragma GCC unroll 1   /* unrolled x2 or x4: 1-5% slower (measured) */
        for (int wd = 0; wd < 4; wd++) {
#pragma GCC unroll 4
            for (int s = 0; s < 4; s++) {
                const __m256i u = ws->u[b][wd][s];
#pragma GCC unroll 8
                for (int c = 0; c < WT_NC; c++) {
                    acc[c] = _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(u, x->q[b][wd][s][c]));
                    /* keep the chain: without this GCC reassociates the adds into trees of
                     * products, computes a word's 32 products first and spills them (seen) */
                    __asm__("" : "+x"(acc[c]));
                }
            }
        }
        const __m128i d4 = _mm_loadl_epi64((const __m128i *)(const void *)B[b].d);
        const __m256 dw = _mm256_cvtph_ps(_mm_unpacklo_epi32(d4, d4));        /* [d0 d1 d0 d1 | d2 d3 d2 d3] */
#pragma GCC unroll 4
        for (int p = 0; p < WT_NC / 2; p++) {
            const __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(acc[2 * p], ones), _mm256_madd_epi16(acc[2 * p + 1], ones));
            if (isum) {
                int32_t t[8];
                static const int col[8] = {0, 0, 1, 1, 0, 0, 1, 1}, row[8] = {0, 1, 0, 1, 2, 3, 2, 3};
                _mm256_storeu_si256((__m256i *)(void *)t, h);
                for (int i = 0; i < 8; i++)
                    if (2 * p + col[i] < nstore) isum[2 * p + col[i]][row[i] * isum_stride + b] = t[i];
            }
            facc[p] = _mm256_fmadd_ps(_mm256_mul_ps(dw, x->d[b][p]), _mm256_cvtepi32_ps(h), facc[p]);
        }
    }
}

static void mm_rowpair_fast(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t r1);

/* Rows [r0, g1) (whole groups) x columns [c0, c0 + n) of the batch (n >= 1) as ceil(n / 4)
 * balanced passes of at most 4 columns (the matvec or the narrow path; 5 -> 2 + 3, 9 -> 3 + 3 +
 * 3), per row chunk of at most ~128 KB of weights, so every pass after the first reads the chunk
 * from L2, not from memory. Used for batches of 5-15 columns and for the 1-7 columns a batch of
 * 16+ leaves after its full tiles of 8: a tile padded from 5-7 columns, or a single tile that
 * has no other tile to share its slot extraction with, costs more per column than narrow
 * passes (verification of 5-8 columns on the 27B shapes: 3.2-4.4 decode steps this way, 5.9-7.1
 * with padded tiles). Same bits: every path is exact. */
static void mm_rowpair_split(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t g1, int c0, int n) {
    const kern_act *a = m->a;
    const int64_t nb = m->w->n_in / 128, N = m->w->n_out;
    const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
    const int64_t ng = TERN_MAX((int64_t)2, (int64_t)(128 * 1024) / (nb * (int64_t)sizeof(kern_rp_block)));
    const int npass = (n + 3) / 4;
    for (int64_t rc = r0; rc < g1; rc += 4 * ng) {
        const int64_t rc1 = TERN_MIN(g1, rc + 4 * ng);
        for (int p = 0, cp = c0; p < npass; p++) {
            const int k = (n - (cp - c0)) / (npass - p);   /* balanced: 5 -> 2 + 3 ... */
            kern_act a2 = *a;
            a2.q = (uint8_t *)a->q + col * (size_t)cp;
            a2.ncols = k;
            const kern_mm_args m2 = {.w = m->w, .a = &a2, .y = m->y + cp * m->ldy, .ldy = m->ldy,
                                     .isum = m->isum ? m->isum + (int64_t)cp * N * nb : NULL};
            mm_rowpair_fast(&m2, rp, rc, rc1);
            cp += k;
        }
    }
}

/* Rows [r0, g1) (whole groups) x every column of a batch of >= 16 columns. */
static void mm_rowpair_wide(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t g1) {
    const kern_act *a = m->a;
    const int64_t nb = m->w->n_in / 128, N = m->w->n_out;
    const size_t col = kern_act_col_bytes(KQ_FAST, a->K);
    const int nfull = a->ncols / WT_NC, nleft = a->ncols % WT_NC;
    const int ntile = nfull;              /* >= 2 full tiles; 1-7 leftover columns: mm_rowpair_split */
    wt_act x;
    wt_slots ws[WT_RG];
    __m256 carry[WT_TG][WT_RG][WT_NC / 2];
    for (int64_t rc = r0; rc < g1; rc += 4 * WT_RG) {
        const int ng = (int)TERN_MIN((int64_t)WT_RG, (g1 - rc) / 4);
        const kern_rp_block *G = rp + (rc / 4) * nb;
        for (int t0 = 0; t0 < ntile; t0 += WT_TG) {
            const int t1 = TERN_MIN(ntile, t0 + WT_TG);
            for (int64_t b0 = 0; b0 < nb; b0 += WT_KB) {
                const int nbc = (int)TERN_MIN((int64_t)WT_KB, nb - b0);
                const bool first = b0 == 0, last = b0 + nbc == nb;
                for (int g = 0; g < ng; g++) {
                    /* the weights are read from memory here, once: prefetch this group's next chunk */
                    for (int64_t i = b0 + WT_KB; i < TERN_MIN(nb, b0 + 2 * WT_KB); i++) rp_prefetch(G + g * nb, i);
                    wt_extract(&ws[g], G + g * nb + b0, nbc);
                }
                for (int t = t0; t < t1; t++) {
                    const int c0 = t * WT_NC, nst = WT_NC;
                    const kact_fast *ac[WT_NC];
                    for (int c = 0; c < WT_NC; c++)
                        ac[c] = (const kact_fast *)(const void *)((const uint8_t *)a->q + col * (size_t)(c0 + c));
                    wt_expand(&x, ac, b0, nbc);
                    for (int g = 0; g < ng; g++) {
                        const int64_t r = rc + 4 * g;
                        __m256 *facc = carry[t - t0][g];
                        if (first)
                            for (int p = 0; p < WT_NC / 2; p++) facc[p] = _mm256_setzero_ps();
                        if (m->isum) {
                            int32_t *is[WT_NC];
                            for (int c = 0; c < nst; c++) is[c] = m->isum + ((int64_t)(c0 + c) * N + r) * nb + b0;
                            wt_group(&ws[g], G + g * nb + b0, nbc, &x, facc, is, nst, nb);
                        } else {
                            wt_group(&ws[g], G + g * nb + b0, nbc, &x, facc, NULL, 0, 0);
                        }
                        if (!last) continue;
                        for (int p = 0; p < WT_NC / 2; p++) {
                            /* [c r0 r1, c+1 r0 r1 | c r2 r3, c+1 r2 r3] -> [c r0..r3 | c+1 r0..r3] */
                            const __m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(facc[p]), 0xD8));
                            if (2 * p < nst) _mm_storeu_ps(m->y + (c0 + 2 * p) * m->ldy + r, _mm256_castps256_ps128(o));
                            if (2 * p + 1 < nst) _mm_storeu_ps(m->y + (c0 + 2 * p + 1) * m->ldy + r, _mm256_extractf128_ps(o, 1));
                        }
                    }
                }
            }
        }
        if (nleft) mm_rowpair_split(m, rp, rc, rc + 4 * ng, nfull * WT_NC, nleft);   /* while the chunk is in L2 */
    }
}

/* Rows [r0, r1) of a row-pair tensor whose groups start at rp (PQ2_0 data, or the PTQ1_0
 * transcode in aux); rows from N & ~3 on are file-layout tail rows: the reference does them. */
static void mm_rowpair_fast(const kern_mm_args *m, const kern_rp_block *rp, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t n4 = w->n_out & ~(int64_t)3;
    const int64_t g1 = TERN_MIN(r1, n4);
    if (a->ncols == 1) {
        mv_rowpair(m, rp, r0, g1);   /* decode */
    } else if (a->ncols <= 4) {
        mm_rowpair_narrow(m, rp, r0, g1);   /* 2-4 columns: speculative verification, batched decode */
    } else if (a->ncols < 2 * WT_NC) {
        mm_rowpair_split(m, rp, r0, g1, 0, a->ncols);   /* 5-15 columns: narrow passes */
    } else {
        mm_rowpair_wide(m, rp, r0, g1);       /* 16+ columns: prefill */
    }
    if (r1 > n4) kern_ref_mm_fast(m, TERN_MAX(r0, n4), r1);   /* N % 4 tail rows: file layout */
}

/* ---- PQ2_0 16-row layout (KW_ROW16), fast mode: the layout this table prepares -------------------
 * Rows interleaved per 32-bit lane, vpmaddubsw pairs summed in int16 for a whole block, one
 * vpmaddwd per block and row half, no reduction in the K loop: x86/r16_ymm.h (the bound is
 * written there). What bounds the 16-row x 4-column tile is its vector operations: per block
 * 256 vpmaddubsw, 248 vpaddw, 112 unpack (vpsrlw, vpand) and ~40 of epilogue: ~656 for the four
 * vector pipes of Zen 3 to 5, 164 cycles, where the multiplies alone, two per cycle, would take
 * 128: it runs at ~61-66% of vpmaddubsw's own rate (bench-kernel, 1 thread, on Zen 3 and Zen 5:
 * bench/RESULTS.md hosts A and B). llvm-mca-16 -mcpu=znver3 on the compiled loop also gives each
 * of the 128 vpbroadcastd a vector pipe: ~785 operations, ~196 cycles per block. The broadcast
 * stays a register operand: read as vpmaddubsw's 32-byte memory operand instead (activations
 * expanded 8-fold), the tile is slower on both, the expanded rows' L1 loads costing more than the
 * broadcasts they replace. */
#define R16Y_VNNI 0
#ifndef R16Y_TH
#define R16Y_TH 2       /* 16 rows x up to 4 columns: 8 int16 accumulators */
#define R16Y_TW 4
#define R16Y_TW_ONE 5   /* a batch of 5 columns in one tile: 10 accumulators (r16_ymm.h) */
#endif
#include "kernels/x86/r16_ymm.h"

/* ---- PTQ1_0 base-3 16-row layout (KW_PTQ3_ROW16, kern_impl.h), fast mode ---------------------
 * The direct form on the 16-row layout: each zmm of a block read as two ymm (rows 0-7, 8-15; one
 * 32-bit lane per row). The bytes are flipped once per load (v ^ 0x80) and stay flipped through
 * the digit steps, because 3 (v + 128) = 3 v + 128 (mod 256): each step is two vpaddb, and the
 * digit u = [v >= 86] + [v >= 171] two signed compares against the flipped thresholds, added
 * (0, -1, -2) and made positive (vpabsb). u meets the 4 activation bytes of its elements
 * broadcast in one vpmaddubsw per column, summed in int16 for the whole block: 34 digit vectors
 * of 2 products of u <= 2 and |q| <= 127 per int16 lane, <= 34 * 508 = 17272 <= 32767; one
 * vpmaddwd per block and half widens a row's two int16 into its int32. isum = sum u q - sum q,
 * exact; epilogue and float order as the 16-row PQ2_0 tiles (r16_ymm.h). Tiles: 16 rows x 1..4
 * columns. */
#define R16T_TW 4

static inline __attribute__((always_inline)) void r16t_ymm_digits(__m256i (*acc)[R16T_TW], int NC, const __m256i *vin,
                                                                int nd, int o0, int step, const kact_fast *const *ac,
                                                                int64_t b) {
    __m256i t1 = _mm256_set1_epi8((char)(85 ^ 0x80)), t2 = _mm256_set1_epi8((char)(170 ^ 0x80));
    __asm__("" : "+x"(t1), "+x"(t2));   /* opaque: GCC otherwise turns one compare into vpminsb + vpcmpeqb */
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256i v[2] = {_mm256_xor_si256(vin[0], flip), _mm256_xor_si256(vin[1], flip)};
#pragma GCC unroll 5
    for (int n = 0; n < nd; n++) {
        __m256i u[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            if (n) v[h] = _mm256_add_epi8(_mm256_add_epi8(v[h], v[h]), v[h]);
            u[h] = _mm256_abs_epi8(_mm256_add_epi8(_mm256_cmpgt_epi8(v[h], t1), _mm256_cmpgt_epi8(v[h], t2)));
        }
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            int32_t x;
            memcpy(&x, ac[c][b].qs + o0 + n * step, 4);
            const __m256i q4 = _mm256_set1_epi32(x);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                acc[h][c] = _mm256_add_epi16(acc[h][c], _mm256_maddubs_epi16(u[h], q4));
                __asm__("" : "+x"(acc[h][c]));   /* one chain per register (as r16_ymm.h r16y_step) */
            }
        }
    }
}

static inline __attribute__((always_inline)) void r16t_ymm_tile(const kern_r16t_block *B, int64_t nb, const kact_fast *const *ac,
                                                              int NC, float *const *out, unsigned keep,
                                                              int32_t *const *isum, int64_t isum_stride) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256 facc[2][R16T_TW];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) facc[h][c] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const kern_r16t_block *blk = B + b;
        {   /* prefetch 4 blocks ahead, every line (as r16_ymm.h) */
            const uintptr_t p = (uintptr_t)blk + 4 * sizeof(kern_r16t_block);   /* may pass the end: never faults */
#pragma GCC unroll 7
            for (int o = 0; o < (int)sizeof(kern_r16t_block); o += 64) _mm_prefetch((const char *)(p + (uintptr_t)o), _MM_HINT_T0);
        }
        __m256i acc[2][R16T_TW];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) acc[h][c] = _mm256_setzero_si256();
        }
        __m256i v[2];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            v[0] = _mm256_loadu_si256((const __m256i *)(const void *)blk->qa[j][0]);
            v[1] = _mm256_loadu_si256((const __m256i *)(const void *)blk->qa[j][8]);
            r16t_ymm_digits(acc, NC, v, 5, 4 * j, 16, ac, b);
        }
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            v[0] = _mm256_loadu_si256((const __m256i *)(const void *)blk->qb[j][0]);
            v[1] = _mm256_loadu_si256((const __m256i *)(const void *)blk->qb[j][8]);
            r16t_ymm_digits(acc, NC, v, 5, 80 + 4 * j, 8, ac, b);
        }
        /* qh as [qh0, qh1, 0, 0] per row; n = 3 reads q[126 .. 129] (128, 129: the block's d, met by zero digits) */
        v[0] = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)blk->qh[0]));
        v[1] = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)blk->qh[8]));
        r16t_ymm_digits(acc, NC, v, 4, 120, 2, ac, b);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk->d + 8 * h)));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                __m256i t = _mm256_madd_epi16(acc[h][c], one);
                t = _mm256_sub_epi32(t, _mm256_set1_epi32(ac[c][b].sum));   /* isum = sum u q - sum q */
                if (isum) {
                    int32_t ti[8];
                    _mm256_storeu_si256((__m256i *)(void *)ti, t);
                    for (int i = 0; i < 8; i++)
                        if ((keep >> (8 * h + i)) & 1) isum[c][(8 * h + i) * isum_stride + b] = ti[i];
                }
                facc[h][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ac[c][b].d)), _mm256_cvtepi32_ps(t), facc[h][c]);
            }
        }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            float t[8];
            _mm256_storeu_ps(t, facc[h][c]);
            for (int i = 0; i < 8; i++)
                if ((keep >> (8 * h + i)) & 1) out[c][8 * h + i] = t[i];
        }
    }
}

static void r16t_ymm_group(const void *B, int64_t nb, int nc, int n_cols, const kact_fast *const *ac, float *const *out,
                           unsigned keep, int32_t *const *isum, int64_t isum_stride) {
    (void)n_cols;
    switch (nc) {
    case 1: r16t_ymm_tile(B, nb, ac, 1, out, keep, isum, isum_stride); break;
    case 2: r16t_ymm_tile(B, nb, ac, 2, out, keep, isum, isum_stride); break;
    case 3: r16t_ymm_tile(B, nb, ac, 3, out, keep, isum, isum_stride); break;
    default: r16t_ymm_tile(B, nb, ac, 4, out, keep, isum, isum_stride); break;
    }
}

static void mm_pq2_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_ROW16) { r16y_mm_fast(m, (const kern_r16_block *)(const void *)m->w->data, r0, r1); return; }
    if (m->w->layout != KW_ROWPAIR) { kern_ref_mm_fast(m, r0, r1); return; }
    mm_rowpair_fast(m, (const kern_rp_block *)(const void *)m->w->data, r0, r1);
}

static void mm_ptq1_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_PTQ_ROW16) { r16y_mm_fast(m, (const kern_r16_block *)m->w->aux, r0, r1); return; }
    if (m->w->layout == KW_PTQ_ROWPAIR) { mm_rowpair_fast(m, (const kern_rp_block *)m->w->aux, r0, r1); return; }
    if (m->w->layout == KW_PTQ3_ROW16) { kern_r16_mm(m, m->w->data, sizeof(kern_r16t_block), r0, r1, R16T_TW, r16t_ymm_group); return; }
    /* the direct kernel reads the file bytes, which the loader may have released under a 16-row
     * transcode (kernels.h): that layout runs the reference, which reads aux */
    if (m->w->layout != KW_FILE) { kern_ref_mm_fast(m, r0, r1); return; }
    mm_ptq1_0_direct(m, r0, r1);
}

/* The 16-lane order of kern_impl.h in two ymm accumulators (lanes 0-7, 8-15): the pairwise tree
 * (mm_block_f32mode; the float weight types' tiles below do it in registers, half_finish). */
static inline float lanes_reduce(__m256 lo, __m256 hi) {
    float acc[16];
    _mm256_storeu_ps(acc, lo);
    _mm256_storeu_ps(acc + 8, hi);
    return kern_lane_reduce(acc);
}

/* F16 and BF16 weights (every mode: the float path), the reference's math (ref.c ref_row_float):
 * acc[k % 16] = fmaf(w_k, x_k, acc[k % 16]) with x_k rounded to bf16 first for BF16 weights
 * (f32_to_bf16: nearest-even, NaN quieted), then kern_lane_reduce. Lanes 0-7 and 8-15 of each
 * 16-chunk are the two ymm accumulators (vfmadd is the fused fmaf); a K % 16 tail is done lane by
 * lane with fmaf (-mfma: one vfmadd), so the result is bit-identical to ref. Without this path the
 * Qwen3.5 GDN alpha/beta projections (2 x 48 x 5120 BF16 per layer) would run ref's scalar loop,
 * one libm fmaf call per weight: ~2 ms of each decode layer on one thread (bench/RESULTS.md
 * "q35"). */
static inline __m256 bf16_round8(__m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    const __m256i rn = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), hi);
    const __m256i qn = _mm256_or_si256(_mm256_and_si256(u, hi), _mm256_set1_epi32(0x400000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(rn, qn, nan));
}

/* The float weight types of the tiles below (compile-time constants at every call). */
enum { FW_F16 = 0, FW_BF16 = 1, FW_F32 = 2 };
#define FW_SIZE(wt) ((wt) == FW_F32 ? 4 : 2)

/* 8 weights from p (bytes) as f32. */
static inline __m256 fw_load8(const uint8_t *p, const int wt) {
    if (wt == FW_F32) return _mm256_loadu_ps((const float *)(const void *)p);
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (wt == FW_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}
/* Weight k of a row as f32 (the tail). */
static inline float fw_one(const uint8_t *row, int64_t k, const int wt) {
    if (wt == FW_F32) return ((const float *)(const void *)row)[k];
    const uint16_t h = ((const uint16_t *)(const void *)row)[k];
    return wt == FW_BF16 ? bf16_to_f32(h) : fp16_to_f32(h);
}

/* One (row, column) output of the float matmul (half_tile) from its two 16-lane accumulators
 * (lanes 0-7, 8-15): the K % 16 tail lane by lane with fmaf, then kern_lane_reduce (ref.c
 * ref_row_float's order). */
static inline float half_finish(__m256 lo, __m256 hi, const uint8_t *wr, const float *x, int64_t K16,
                                int64_t K, const int wt) {
    if (K16 == K) {   /* no tail: kern_lane_reduce's tree in registers, the same adds in the same order */
        const __m256 s8 = _mm256_add_ps(lo, hi);                                  /* acc[i] + acc[i + 8] */
        const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));   /* + [i + 4] */
        const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                 /* + [i + 2] */
        return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));                /* [0] + [1] */
    }
    float acc[16];
    _mm256_storeu_ps(acc, lo);
    _mm256_storeu_ps(acc + 8, hi);
    for (int64_t k = K16; k < K; k++) {
        const float xv = wt == FW_BF16 ? bf16_to_f32(f32_to_bf16(x[k])) : x[k];
        acc[k & 15] = fmaf(fw_one(wr, k, wt), xv, acc[k & 15]);
    }
    return kern_lane_reduce(acc);
}

/* An R-row x C-column tile of the float (F16, BF16, F32) matmul: rows ra (and rb when R == 2; any two rows)
 * and columns [c, c + C): 2*R*C accumulators (lanes 0-7, 8-15 of the 16-lane order), each weight
 * vector converted once and fed to C FMAs, each activation vector loaded (and, for BF16, rounded)
 * once for the R rows. R and C are compile-time constants at every call, so the loops unroll and
 * the accumulators stay in registers (R, C <= 2: 8 accumulators + 2R weights + 2 activations).
 * Each row stream is prefetched HALF_PF bytes ahead (rows are consecutive in memory, so past a
 * row's end this is the start of the next row the stream reads). */
#define HALF_PF 2048   /* bytes ahead */
static inline __attribute__((always_inline)) void half_tile_k(const kern_mm_args *m, int64_t ra, int64_t rb, int c,
                                                              const int R, const int C, const int wt, int64_t k0,
                                                              int64_t k1, bool pf, __m256 acc[2][2][2]) {
    const int64_t K = m->w->n_in;
    const int64_t es = FW_SIZE(wt);
    const uint8_t *base = m->w->data;
    const uint8_t *wr[2] = {base + ra * K * es, base + rb * K * es};
    const int64_t pf_end[2] = {(m->w->n_out - ra) * K * es - HALF_PF, (m->w->n_out - rb) * K * es - HALF_PF};
    const float *x = m->a->x + (int64_t)c * K;
    __m256 lo[2][2], hi[2][2];
#pragma GCC unroll 2
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int j = 0; j < C; j++) { lo[i][j] = acc[i][j][0]; hi[i][j] = acc[i][j][1]; }
    for (int64_t k = k0; k < k1; k += 16) {
        if (pf && (wt == FW_F32 || (k & 31) == 0))   /* one prefetch per 64-byte line of each row */
#pragma GCC unroll 2
            for (int i = 0; i < R; i++)
                if (k * es < pf_end[i]) _mm_prefetch((const char *)(wr[i] + k * es + HALF_PF), _MM_HINT_T0);
        __m256 wl[2], wh[2];
#pragma GCC unroll 2
        for (int i = 0; i < R; i++) {
            wl[i] = fw_load8(wr[i] + k * es, wt);
            wh[i] = fw_load8(wr[i] + (k + 8) * es, wt);
        }
#pragma GCC unroll 2
        for (int j = 0; j < C; j++) {
            __m256 xl = _mm256_loadu_ps(x + j * K + k), xh = _mm256_loadu_ps(x + j * K + k + 8);
            if (wt == FW_BF16) { xl = bf16_round8(xl); xh = bf16_round8(xh); }
#pragma GCC unroll 2
            for (int i = 0; i < R; i++) {
                lo[i][j] = _mm256_fmadd_ps(wl[i], xl, lo[i][j]);
                hi[i][j] = _mm256_fmadd_ps(wh[i], xh, hi[i][j]);
            }
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int j = 0; j < C; j++) { acc[i][j][0] = lo[i][j]; acc[i][j][1] = hi[i][j]; }
}

/* The (row, column) outputs of a tile from its accumulators (half_finish: the K % 16 tail, the
 * reduction). */
static inline __attribute__((always_inline)) void half_tile_store(const kern_mm_args *m, int64_t ra, int64_t rb, int c,
                                                                  const int R, const int C, const int wt,
                                                                  __m256 acc[2][2][2]) {
    const int64_t K = m->w->n_in, K16 = K & ~(int64_t)15;
    const uint8_t *base = m->w->data;
    const float *x = m->a->x + (int64_t)c * K;
#pragma GCC unroll 2
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int j = 0; j < C; j++)
            m->y[(c + j) * m->ldy + (i ? rb : ra)] =
                half_finish(acc[i][j][0], acc[i][j][1], base + (i ? rb : ra) * K * FW_SIZE(wt), x + j * K, K16, K, wt);
}

/* A whole tile over all of K. */
static inline __attribute__((always_inline)) void half_tile(const kern_mm_args *m, int64_t ra, int64_t rb, int c,
                                                            const int R, const int C, const int wt) {
    __m256 acc[2][2][2];
#pragma GCC unroll 2
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int j = 0; j < C; j++) { acc[i][j][0] = _mm256_setzero_ps(); acc[i][j][1] = acc[i][j][0]; }
    half_tile_k(m, ra, rb, c, R, C, wt, 0, m->w->n_in & ~(int64_t)15, true, acc);
    half_tile_store(m, ra, rb, c, R, C, wt, acc);
}

/* 3 to 8 columns of the row pair (ra, rb): K in chunks of HALF_KC, each chunk through every column
 * pair's tile in turn, the accumulators kept in a small array between chunks. The first pair of a
 * chunk streams the two rows from memory (and prefetches), the others re-read the chunk (2 x 1 KB)
 * from L1, so the rows stream steadily for the whole of the row pair's work; with whole-K passes per
 * column pair only the first pass read memory and the others left it idle (4 columns from DRAM at
 * 1.6-1.7x the 1-column time while the same work in cache ran at 1.2x). */
#define HALF_KC 512   /* halves per chunk */
static inline __attribute__((always_inline)) void half_rowpair_cols(const kern_mm_args *m, int64_t ra, int64_t rb,
                                                                    int c0, int nc, const int wt) {
    const int64_t K16 = m->w->n_in & ~(int64_t)15;
    __m256 acc[4][2][2][2];
    const int np = nc / 2;
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) { acc[p][i][j][0] = _mm256_setzero_ps(); acc[p][i][j][1] = acc[p][i][j][0]; }
    for (int64_t k0 = 0; k0 < K16; k0 += HALF_KC) {
        const int64_t k1 = TERN_MIN(K16, k0 + HALF_KC);
        for (int p = 0; p < np; p++) half_tile_k(m, ra, rb, c0 + 2 * p, 2, 2, wt, k0, k1, p == 0, acc[p]);
        if (nc & 1) half_tile_k(m, ra, rb, c0 + 2 * np, 2, 1, wt, k0, k1, np == 0, acc[np]);
    }
    for (int p = 0; p < np; p++) half_tile_store(m, ra, rb, c0 + 2 * p, 2, 2, wt, acc[p]);
    if (nc & 1) half_tile_store(m, ra, rb, c0 + 2 * np, 2, 1, wt, acc[np]);
}

/* Rows [r0, r1) of every column: row i of the range's first half with row i of its second half
 * (two streams far apart, as mv_rowpair does for PQ2_0: 4 adjacent rows of K = 2048, 4 KB each,
 * a page, streamed well below the read bandwidth), in 2-row x 2-column tiles over the column
 * pairs (an odd last column: 2 x 1; the second and later pairs re-read the two rows, 4 K bytes,
 * from L1/L2); an odd last row alone. Per 16 weights of each row a 2 x 2 tile does 2 conversions
 * and 4 activation loads for 8 FMAs, where a 1-row x 4-column tile (one conversion per 4
 * columns) is bound by its 8 activation loads per 8 FMAs. Each (row, column) output is the same
 * fmaf sequence in any tile, so the bits do not depend on the tiling (test_isa_other_types).
 * F16 and BF16 each get their own copy (wt a compile-time constant): with a runtime type flag
 * GCC keeps the accumulators on the stack. */
static inline __attribute__((always_inline)) void half_rows(const kern_mm_args *m, int64_t r0, int64_t r1,
                                                            const int wt) {
    const int nc = m->a->ncols;
    const int64_t h = (r1 - r0) / 2;
    for (int64_t i = 0; i < h; i++) {
        const int64_t ra = r0 + i, rb = r0 + h + i;
        if (nc == 1) half_tile(m, ra, rb, 0, 2, 1, wt);
        else if (nc == 2) half_tile(m, ra, rb, 0, 2, 2, wt);
        else
            for (int c = 0; c < nc; c += 8) half_rowpair_cols(m, ra, rb, c, TERN_MIN(8, nc - c), wt);
    }
    if (r0 + 2 * h < r1) {   /* an odd row count: the last row alone */
        int c = 0;
        for (; c + 2 <= nc; c += 2) half_tile(m, r1 - 1, r1 - 1, c, 1, 2, wt);
        if (c < nc) half_tile(m, r1 - 1, r1 - 1, c, 1, 1, wt);
    }
}

/* F16, BF16 and F32 weights: one copy of the loops per type, so the weight conversion and the
 * BF16 activation rounding are not a runtime branch (such a branch makes GCC spill the
 * accumulators). F32 shares the tiles rather than run a loop of its own (one row, each column's
 * two accumulators alone: a 4-cycle FMA latency chain per 8 weights). */
static void mm_f16_float(const kern_mm_args *m, int64_t r0, int64_t r1) { half_rows(m, r0, r1, FW_F16); }
static void mm_bf16_float(const kern_mm_args *m, int64_t r0, int64_t r1) { half_rows(m, r0, r1, FW_BF16); }
static void mm_f32_tiles(const kern_mm_args *m, int64_t r0, int64_t r1) { half_rows(m, r0, r1, FW_F32); }

/* Block types in f32 mode (the reference math): each block is decoded once per (row, column
 * tile) by the shared scalar decoder (kern_block_int, any layout), w_k = (float)t_k * d exactly as
 * ref, then the 16-lane fmaf order with two ymm accumulators per column (lanes 0-7 and 8-15:
 * every block size is a multiple of 16, so lane = k % 16 = the position within a 16-chunk). */
static void mm_block_f32mode(const kern_mm_args *m, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int bs = kern_block_size(w->type);
    const int64_t K = w->n_in, nb = K / bs;
    int8_t t[256];
    for (int64_t r = r0; r < r1; r++)
        for (int c0 = 0; c0 < a->ncols; c0 += 4) {
            const int nc = TERN_MIN(4, a->ncols - c0);
            __m256 lo[4], hi[4];
            for (int c = 0; c < 4; c++) { lo[c] = _mm256_setzero_ps(); hi[c] = _mm256_setzero_ps(); }
            for (int64_t b = 0; b < nb; b++) {
                float d;
                kern_block_int(w, r, b, t, &d);
                const __m256 dv = _mm256_set1_ps(d);
                for (int i = 0; i < bs; i += 16) {
                    const __m128i t16 = _mm_loadu_si128((const __m128i *)(const void *)(t + i));
                    const __m256 wl = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(t16)), dv);
                    const __m256 wh = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(t16, 8))), dv);
                    const int64_t k = b * bs + i;
                    for (int c = 0; c < nc; c++) {
                        const float *x = a->x + (int64_t)(c0 + c) * K + k;
                        lo[c] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x), lo[c]);
                        hi[c] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x + 8), hi[c]);
                    }
                }
            }
            for (int c = 0; c < nc; c++) m->y[(c0 + c) * m->ldy + r] = lanes_reduce(lo[c], hi[c]);
        }
}

/* ---- Q8_0, TQ2_0, TQ1_0 and Q1_0 (file layout), fast and ggml numerics, and Q2_0 in ggml numerics: 8 rows per pass
 * One ymm per row holds 8 int32 partial sums of one unit; rows8_isum folds the 8 rows' vectors
 * into one vector of their 8 unit sums (vphaddd and a lane add: integer, so exact and in any
 * order), and the float update is one vector op for the 8 rows, each lane doing exactly the scalar
 * fmaf of kern_impl.h's float order (fast: acc = fmaf(d_w * d_a, isum, acc) per unit; ggml: blk =
 * fmaf(d_y, isum, blk) per 32-unit, sum = fmaf(d_w, blk, sum) per weight block). A last group of
 * fewer than 8 rows repeats its last row in the missing lanes and stores only its own rows.
 * Rows in chunks whose weights stay in L2 while every column of a matmul passes. */
#define BK_CHUNK_BYTES (96 * 1024)
#define R8_PF 16                     /* prefetch distance in blocks of each row's stream */

/* Prefetch block b + R8_PF of each of the 8 row streams (bb bytes per block, row_bytes per row),
 * or, past a row's end, the same row of the next group of 8 (rows r + 8 ..: the next pass of a
 * range walked in order), so each pass starts on lines already on their way. Left to the
 * hardware prefetcher, 8 interleaved streams of 18-66 byte blocks keep the loop waiting on its
 * weight loads (decode of Q2_0 and Q8_0 files: bench/RESULTS.md). The address may lie past the
 * tensor (a prefetch never faults), so it is formed as an integer. */
static inline __attribute__((always_inline)) void rows8_prefetch(const uint8_t *const row[8], int64_t b, int64_t nb,
                                                                size_t bb, size_t row_bytes) {
    const int64_t t = b + R8_PF;
    const uintptr_t off = t < nb ? (uintptr_t)t * bb : 8 * row_bytes + (uintptr_t)(t - nb) * bb;
    for (int i = 0; i < 8; i++) _mm_prefetch((const char *)((uintptr_t)row[i] + off), _MM_HINT_T0);
}

static inline __m256i rows8_isum(const __m256i v[8]) {
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

/* The fp16 scales at byte offset off of 8 rows' blocks, as f32 (vcvtph2ps: exact, as fp16_to_f32). */
static inline __m256 rows8_scale(const uint8_t *const row[8], size_t off) {
    __m128i h = _mm_setzero_si128();                 /* vpinsrw from memory: little-endian fp16 */
#define R8_INS(i) do { uint16_t v_; memcpy(&v_, row[i] + off, 2); h = _mm_insert_epi16(h, v_, i); } while (0)
    R8_INS(0); R8_INS(1); R8_INS(2); R8_INS(3); R8_INS(4); R8_INS(5); R8_INS(6); R8_INS(7);
#undef R8_INS
    return _mm256_cvtph_ps(h);
}

/* Q8_0: 32 int8 weights x 32 int8 activations -> 8 int32 (each the sum of 4 products). vpsignb
 * moves the weight's sign onto the activation; |w| <= 128 as unsigned bytes and |q| <= 127, so a
 * vpmaddubsw pair sum is <= 2 * 128 * 127 = 32512 (no int16 saturation). */
static inline __m256i q8_dot32(const uint8_t *wq, const int8_t *aq) {
    const __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)wq);
    const __m256i av = _mm256_loadu_si256((const __m256i *)(const void *)aq);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* TQ2_0: 32 bytes of 2-bit codes (u = t + 1, 0..2; 3 tolerated), slot s = bits 2s..2s+1 of every
 * byte = 32 consecutive weights meeting 32 consecutive activation bytes. Returns the 8 int32
 * partial sums of sum(u * q) over the slots in [s0, s1); pair sums <= 2 * 3 * 127 = 762 and four
 * slots' sum <= 3048 stay in int16. */
static inline __m256i tq2_dot(__m256i v, const int8_t *aq, int s0, int s1) {
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i p = _mm256_setzero_si256();
    for (int s = s0; s < s1; s++) {
        const __m256i u = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m3);
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(const void *)(aq + 32 * (s - s0)))));
    }
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* TQ1_0: the 8 chunks of 32 digits u = t + 1 of a 256-block (spec 3.6), chunk k against the
 * activation bytes 32k .. 32k + 31 of the block: bytes 0..31 hold elements 0..159 (digit n of byte
 * i: element 32n + i: chunks 0-4), bytes 32..47 elements 160..239 (digit n of byte j: 160 + 16n +
 * j: chunk 5 = digits 0|1, chunk 6 = 2|3, chunk 7's low lane = digit 4), bytes 48..51 elements
 * 240..255 (digit n of byte j: 240 + 4n + j: chunk 7's high lane). Digits by ptq_digit after
 * mul3 steps (x 3^n mod 256), as the PTQ1_0 kernel. p[k] = vpmaddubsw(u, q) of chunk k (int16:
 * 2 * 2 * 127 per pair; four chunks summed stay <= 2032). */
static inline void tq1_chunks(const uint8_t *blk, const int8_t *const aq[8], __m256i p[8]) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)blk);
    for (int n = 0; n < 5; n++) {
        p[n] = _mm256_maddubs_epi16(ptq_digit(x), _mm256_loadu_si256((const __m256i *)(const void *)aq[n]));
        x = mul3(x);
    }
    const __m256i y0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(blk + 32)));
    const __m256i y1 = mul3(y0), y2 = mul3(y1), y3 = mul3(y2), y4 = mul3(y3);
    int32_t w4;
    memcpy(&w4, blk + 48, 4);
    const __m128i t0 = _mm_set1_epi32(w4), t1 = _mm_add_epi8(_mm_add_epi8(t0, t0), t0);
    const __m128i t2 = _mm_add_epi8(_mm_add_epi8(t1, t1), t1), t3 = _mm_add_epi8(_mm_add_epi8(t2, t2), t2);
    const __m128i tail = _mm_blend_epi32(_mm_blend_epi32(t0, t1, 0x2), _mm_blend_epi32(t2, t3, 0x8), 0xC);
    const __m256i c[3] = {_mm256_blend_epi32(y0, y1, 0xF0), _mm256_blend_epi32(y2, y3, 0xF0),
                          _mm256_inserti128_si256(y4, tail, 1)};
    for (int k = 0; k < 3; k++)
        p[5 + k] = _mm256_maddubs_epi16(ptq_digit(c[k]), _mm256_loadu_si256((const __m256i *)(const void *)aq[5 + k]));
}

/* Q1_0: 32 weights (4 bytes of bits, weight j = bit j % 8 of byte j / 8, set = +1, clear = -1)
 * against 32 activation bytes: u = the bit (0/1) of each weight byte-wise (vpshufb spreads each
 * byte over 8 lanes, a bit mask and vpcmpeqb pick its bit), p = vpmaddubsw(u, q) (int16: pair
 * sums <= 254; four chunks summed <= 1016). t = 2u - 1, so sum(t q) = 2 sum(u q) - sum(q). */
static inline __m256i q1_chunk(const uint8_t *bits, const int8_t *aq) {
    int32_t w;
    memcpy(&w, bits, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ull);
    const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(w), spread), bit);
    const __m256i u = _mm256_and_si256(_mm256_cmpeq_epi8(x, bit), _mm256_set1_epi8(1));
    return _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(const void *)aq));
}

/* Q2_0 (ggml numerics): 32 weights = 8 bytes of 2-bit codes (weight j = bits 2 (j & 3) of byte
 * j >> 2, u = t + 1) against 32 activation bytes: vpshufb spreads each byte over 4 lanes, and the
 * two bits of lane k's slot are picked by masks (1 | 2) << 2 (k & 3) and vpcmpeqb, so u = 0..3
 * lands in weight order; p = vpmaddubsw(u, q) (pair sums <= 2 * 3 * 127). */
static inline __m256i q2_chunk(const uint8_t *codes, const int8_t *aq) {
    int64_t w;
    memcpy(&w, codes, 8);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                            4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
    const __m256i mlo = _mm256_set1_epi32(0x40100401), mhi = _mm256_set1_epi32((int)0x80200802u);
    const __m256i y = _mm256_shuffle_epi8(_mm256_set1_epi64x(w), spread);
    const __m256i blo = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(y, mlo), mlo), _mm256_set1_epi8(1));
    const __m256i bhi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(y, mhi), mhi), _mm256_set1_epi8(2));
    return _mm256_maddubs_epi16(_mm256_or_si256(blo, bhi), _mm256_loadu_si256((const __m256i *)(const void *)aq));
}

static inline void rows8_store(const kern_mm_args *m, int c, int64_t r, int nr, __m256 acc) {
    float out[8];
    _mm256_storeu_ps(out, acc);
    for (int i = 0; i < nr; i++) m->y[c * m->ldy + r + i] = out[i];
}

static inline void rows8_isum_hook(const kern_mm_args *m, int c, int64_t r, int nr, int64_t nu, int64_t u, __m256i is) {
    if (!m->isum) return;
    int32_t v[8];
    _mm256_storeu_si256((__m256i *)(void *)v, is);
    for (int i = 0; i < nr; i++) m->isum[((int64_t)c * m->w->n_out + r + i) * nu + u] = v[i];
}

/* ---- Q2_0 (group 64, file layout), fast numerics ------------------------------------------------
 * A block is fp16 d then 16 bytes; weight j of the block is the code in bits 2 (j & 3) of byte
 * j >> 2, so slot s of byte i holds weight 4 i + s. The activation is copied once per column and
 * row chunk into slot-major order (pm[b][16 s + i] = q[64 b + 4 i + s]: q2_slot_major), so
 * [slot 0 | slot 1] and [slot 2 | slot 3] of a block's 16 bytes meet 32 contiguous activation
 * bytes each. A row's 16 code bytes are loaded into both 128-bit lanes and shifted per 32-bit
 * element by 0 | 2 and 4 | 6 (vpsrlvd; the mask 3 keeps bits 0-1 of each byte, which come from
 * the same byte), so two vpmaddubsw (codes u <= 3, |q| <= 127: pair sums <= 762, their sum <=
 * 1524 in int16) and one vpmaddwd per row and block; rows8_isum folds 8 rows' vectors into their 8
 * block sums at once, minus the unit's sum(q) (bsums) = isum = sum((u - 1) q) exactly. Float order
 * of kern_impl.h: acc = fmaf(d_w * d_a, (float)isum, acc) per 64-unit in order, one lane per row
 * (vfmadd: the same single rounding). Rows in chunks whose weights stay in L2 while the columns
 * pass, two at a time (q2_group: the codes unpacked once for both; tiles of 4 columns spill and
 * were slower); a last group of fewer than 8 rows repeats its last row and stores only its own. */
#define Q2_CHUNK_BYTES (96 * 1024)   /* rows per chunk: their weights stay in L2 while every column passes */
#define Q2_KB 272                    /* blocks per K chunk (K = 17408): a 17 KB slot-major copy on the stack */

/* dst[16 s + i] = q[4 i + s] (s < 4, i < 16) for n blocks of 64: each 16-byte quarter of q (i =
 * 4 c .. 4 c + 3) to slot-major dwords by one vpshufb, then the 4 x 4 dword transpose. */
static inline void q2_slot_major(int8_t *dst, const int8_t *q, int n) {
    const __m128i tr = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int b = 0; b < n; b++, q += 64, dst += 64) {
        __m128i c[4];
        for (int k = 0; k < 4; k++) c[k] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(q + 16 * k)), tr);
        const __m128i t0 = _mm_unpacklo_epi32(c[0], c[1]), t1 = _mm_unpackhi_epi32(c[0], c[1]);
        const __m128i t2 = _mm_unpacklo_epi32(c[2], c[3]), t3 = _mm_unpackhi_epi32(c[2], c[3]);
        _mm_store_si128((__m128i *)(void *)dst, _mm_unpacklo_epi64(t0, t2));
        _mm_store_si128((__m128i *)(void *)(dst + 16), _mm_unpackhi_epi64(t0, t2));
        _mm_store_si128((__m128i *)(void *)(dst + 32), _mm_unpacklo_epi64(t1, t3));
        _mm_store_si128((__m128i *)(void *)(dst + 48), _mm_unpackhi_epi64(t1, t3));
    }
}

/* Rows r .. r + nr - 1 (one group of 8) x NC (1 or 2) consecutive columns c0 .. over blocks
 * [b0, b0 + nbc) of the K chunk whose slot-major copies are pm[c]: each row's codes are loaded
 * and unpacked once for the NC columns, and the rows' scales converted once. Each column keeps
 * its own float accumulator in the order above, so the result is that of one column at a time. */
static inline __attribute__((always_inline)) void q2_group(const kern_mm_args *m, const int NC, const kact_fast *const *ac,
                                                          const int8_t *const *pm, int c0, int64_t r, int nr, int64_t b0,
                                                          int nbc, int64_t nb, size_t row_bytes) {
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    const __m256i sh01 = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2), sh23 = _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6);
    const uint8_t *row[8];
    for (int i = 0; i < 8; i++) row[i] = m->w->data + (size_t)(r + (i < nr ? i : nr - 1)) * row_bytes;
    __m256 acc[2];
    for (int c = 0; c < NC; c++) {
        float acc0[8] = {0};                          /* carried between K chunks unchanged */
        if (b0 > 0)
            for (int i = 0; i < nr; i++) acc0[i] = m->y[(c0 + c) * m->ldy + r + i];
        acc[c] = _mm256_loadu_ps(acc0);
    }
    for (int b = 0; b < nbc; b++) {
        const int64_t bb = b0 + b;
        rows8_prefetch(row, bb, nb, 18, row_bytes);
        __m256i a01[2], a23[2], p[2][4];
        for (int c = 0; c < NC; c++) {
            a01[c] = _mm256_load_si256((const __m256i *)(const void *)(pm[c] + b * 64));
            a23[c] = _mm256_load_si256((const __m256i *)(const void *)(pm[c] + b * 64 + 32));
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {                 /* rows 2k, 2k + 1, paired by vphaddd at once */
            __m256i v[2][2];
#pragma GCC unroll 2
            for (int e = 0; e < 2; e++) {
                const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(row[2 * k + e] + bb * 18 + 2)));
                const __m256i c01 = _mm256_and_si256(_mm256_srlv_epi32(x, sh01), m3);
                const __m256i c23 = _mm256_and_si256(_mm256_srlv_epi32(x, sh23), m3);
                for (int c = 0; c < NC; c++)
                    v[c][e] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(c01, a01[c]), _mm256_maddubs_epi16(c23, a23[c])),
                                                ones);
            }
            for (int c = 0; c < NC; c++) p[c][k] = _mm256_hadd_epi32(v[c][0], v[c][1]);
        }
        const __m256 dw = rows8_scale(row, (size_t)bb * 18);
        for (int c = 0; c < NC; c++) {                /* rows8_isum's tree on the pairs */
            const __m256i h0 = _mm256_hadd_epi32(p[c][0], p[c][1]), h1 = _mm256_hadd_epi32(p[c][2], p[c][3]);
            const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
            const kact_fast *ab = &ac[c][bb / 2];
            const int16_t *bs = ab->bsums + (bb % 2) * 4;
            const __m256i is = _mm256_sub_epi32(sum, _mm256_set1_epi32((int32_t)bs[0] + bs[1] + bs[2] + bs[3]));
            rows8_isum_hook(m, c0 + c, r, nr, nb, bb, is);
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), _mm256_cvtepi32_ps(is), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) rows8_store(m, c0 + c, r, nr, acc[c]);
}

static void mm_q2_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t K = w->n_in, nb = K / 64;
    const size_t col = kern_act_col_bytes(KQ_FAST, K), row_bytes = (size_t)nb * 18;
    const int64_t rows_per = TERN_MAX((int64_t)8, (int64_t)(Q2_CHUNK_BYTES / row_bytes) / 8 * 8);
    int8_t pm[2][Q2_KB * 64] __attribute__((aligned(32)));
    for (int64_t rc = r0; rc < r1; rc += rows_per) {
        const int64_t rc1 = TERN_MIN(r1, rc + rows_per);
        for (int c0 = 0; c0 < a->ncols; c0 += 2) {   /* columns in pairs (a last one alone) */
            const int nc = TERN_MIN(2, a->ncols - c0);
            const kact_fast *ac[2];
            const int8_t *pmc[2] = {pm[0], pm[1]};
            for (int c = 0; c < nc; c++) ac[c] = (const kact_fast *)(const void *)((const uint8_t *)a->q + col * (size_t)(c0 + c));
            for (int64_t b0 = 0; b0 < nb; b0 += Q2_KB) {
                const int nbc = (int)TERN_MIN((int64_t)Q2_KB, nb - b0);
                for (int c = 0; c < nc; c++)
                    for (int b = 0; b < nbc;) {              /* the chunk's slot-major copy, an activation block at a time */
                        const int h = (int)((b0 + b) % 2), n = TERN_MIN(2 - h, nbc - b);
                        q2_slot_major(pm[c] + b * 64, ac[c][(b0 + b) / 2].qs + h * 64, n);
                        b += n;
                    }
                for (int64_t r = rc; r < rc1; r += 8) {
                    const int nr = (int)TERN_MIN((int64_t)8, rc1 - r);
                    if (nc == 2) q2_group(m, 2, ac, pmc, c0, r, nr, b0, nbc, nb, row_bytes);
                    else q2_group(m, 1, ac, pmc, c0, r, nr, b0, nbc, nb, row_bytes);
                }
            }
        }
    }
}

/* bk_rows8 has one kernel per block type, each with its layout's block bytes and scale offset
 * written into its loops: those of the block structs (format/qtypes.h) that the type table
 * states too, checked here. */
_Static_assert(sizeof(block_q8_0) == 34 && offsetof(block_q8_0, d) == 0, "bk_rows8: Q8_0 layout");
_Static_assert(sizeof(block_q2_0) == 18 && offsetof(block_q2_0, d) == 0, "bk_rows8: Q2_0 layout");
_Static_assert(sizeof(block_q1_0) == 18 && offsetof(block_q1_0, d) == 0, "bk_rows8: Q1_0 layout");
_Static_assert(sizeof(block_tq1_0) == 54 && offsetof(block_tq1_0, d) == 52, "bk_rows8: TQ1_0 layout");
_Static_assert(sizeof(block_tq2_0) == 66 && offsetof(block_tq2_0, d) == 64, "bk_rows8: TQ2_0 layout");

/* Rows [r, r + nr) (nr <= 8) of column c. */
static void bk_rows8(const kern_mm_args *m, int c, int64_t r, int nr) {
    const kern_w *w = m->w;
    const kern_act *a = m->a;
    const int64_t K = w->n_in;
    const int bs = kern_block_size(w->type), bb = kern_block_bytes(w->type);
    const int64_t nb = K / bs;
    const size_t row_bytes = (size_t)nb * (size_t)bb;
    const uint8_t *row[8];
    for (int i = 0; i < 8; i++) row[i] = w->data + (size_t)(r + (i < nr ? i : nr - 1)) * row_bytes;
    const size_t col = kern_act_col_bytes(a->mode, K);
    const void *aq = (const uint8_t *)a->q + col * (size_t)c;
    __m256 acc = _mm256_setzero_ps();
    __m256i v[8];
    if (w->type == QT_Q8_0 && a->mode == KQ_FAST) {
        const kact_fast *ac = aq;
        for (int64_t b = 0; b < nb; b++) {               /* unit = block = 32 */
            rows8_prefetch(row, b, nb, (size_t)bb, row_bytes);
            const kact_fast *ab = &ac[(uint64_t)b / 4];   /* unsigned: b >= 0, a shift */
            const int8_t *q = ab->qs + 32 * ((uint64_t)b % 4);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) v[i] = q8_dot32(row[i] + b * 34 + 2, q);
            const __m256i is = rows8_isum(v);
            rows8_isum_hook(m, c, r, nr, nb, b, is);
            const __m256 s = _mm256_mul_ps(rows8_scale(row, (size_t)b * 34), _mm256_set1_ps(ab->d));
            acc = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(is), acc);
        }
    } else if (w->type == QT_Q8_0) {                     /* ggml: unit = weight block = activation block */
        const kact_ggml *ag = aq;
        for (int64_t b = 0; b < nb; b++) {
            rows8_prefetch(row, b, nb, (size_t)bb, row_bytes);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) v[i] = q8_dot32(row[i] + b * 34 + 2, ag[b].qs);
            const __m256i is = rows8_isum(v);
            rows8_isum_hook(m, c, r, nr, nb, b, is);
            const __m256 blk = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_f32(ag[b].d)), _mm256_cvtepi32_ps(is), _mm256_setzero_ps());
            acc = _mm256_fmadd_ps(rows8_scale(row, (size_t)b * 34), blk, acc);
        }
    } else if (w->type == QT_Q2_0) {                     /* ggml only (fast: mm_q2_0_fast): 18-byte blocks of 64 */
        const __m256i ones = _mm256_set1_epi16(1);
        const kact_ggml *ag = aq;
        for (int64_t b = 0; b < nb; b++) {
            rows8_prefetch(row, b, nb, (size_t)bb, row_bytes);
            __m256 blk = _mm256_setzero_ps();
            for (int h = 0; h < 2; h++) {
                for (int i = 0; i < 8; i++) v[i] = _mm256_madd_epi16(q2_chunk(row[i] + b * 18 + 2 + 8 * h, ag[2 * b + h].qs), ones);
                const __m256i is = _mm256_sub_epi32(rows8_isum(v), _mm256_set1_epi32(ag[2 * b + h].sum));
                rows8_isum_hook(m, c, r, nr, 2 * nb, 2 * b + h, is);
                blk = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_f32(ag[2 * b + h].d)), _mm256_cvtepi32_ps(is), blk);
            }
            acc = _mm256_fmadd_ps(rows8_scale(row, (size_t)b * 18), blk, acc);
        }
    } else if (w->type == QT_Q1_0) {                     /* 18-byte blocks of 128: d, then 16 bytes of bits */
        const __m256i ones = _mm256_set1_epi16(1);
        for (int64_t b = 0; b < nb; b++) {
            rows8_prefetch(row, b, nb, (size_t)bb, row_bytes);
            const __m256 dw = rows8_scale(row, (size_t)b * 18);
            if (a->mode == KQ_FAST) {                    /* unit = block = one activation block */
                const kact_fast *ab = (const kact_fast *)aq + b;
                for (int i = 0; i < 8; i++) {
                    const uint8_t *bits = row[i] + b * 18 + 2;
                    const __m256i p = _mm256_add_epi16(_mm256_add_epi16(q1_chunk(bits, ab->qs), q1_chunk(bits + 4, ab->qs + 32)),
                                                       _mm256_add_epi16(q1_chunk(bits + 8, ab->qs + 64), q1_chunk(bits + 12, ab->qs + 96)));
                    v[i] = _mm256_madd_epi16(p, ones);
                }
                const __m256i is = _mm256_sub_epi32(_mm256_slli_epi32(rows8_isum(v), 1), _mm256_set1_epi32(ab->sum));
                rows8_isum_hook(m, c, r, nr, nb, b, is);
                acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), _mm256_cvtepi32_ps(is), acc);
            } else {                                     /* ggml: 4 units of 32 */
                const kact_ggml *ag = (const kact_ggml *)aq + 4 * b;
                __m256 blk = _mm256_setzero_ps();
                for (int k = 0; k < 4; k++) {
                    for (int i = 0; i < 8; i++) v[i] = _mm256_madd_epi16(q1_chunk(row[i] + b * 18 + 2 + 4 * k, ag[k].qs), ones);
                    const __m256i is = _mm256_sub_epi32(_mm256_slli_epi32(rows8_isum(v), 1), _mm256_set1_epi32(ag[k].sum));
                    rows8_isum_hook(m, c, r, nr, 4 * nb, 4 * b + k, is);
                    blk = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_f32(ag[k].d)), _mm256_cvtepi32_ps(is), blk);
                }
                acc = _mm256_fmadd_ps(dw, blk, acc);
            }
        }
    } else if (w->type == QT_TQ1_0) {                    /* 54-byte blocks of 256, d at byte 52 */
        const __m256i ones = _mm256_set1_epi16(1);
        for (int64_t b = 0; b < nb; b++) {
            rows8_prefetch(row, b, nb, (size_t)bb, row_bytes);
            const int8_t *aqk[8];
            const kact_fast *af = a->mode == KQ_FAST ? (const kact_fast *)aq + 2 * b : NULL;
            const kact_ggml *ag = a->mode == KQ_FAST ? NULL : (const kact_ggml *)aq + 8 * b;
            for (int k = 0; k < 8; k++) aqk[k] = af ? af[k / 4].qs + 32 * (k % 4) : ag[k].qs;
            __m256i pv[8][8];                            /* [chunk][row] */
            for (int i = 0; i < 8; i++) {
                __m256i p[8];
                tq1_chunks(row[i] + b * 54, aqk, p);
                for (int k = 0; k < 8; k++) pv[k][i] = p[k];
            }
            const __m256 dw = rows8_scale(row, (size_t)b * 54 + 52);
            if (af) {                                    /* fast: unit = half a block = one activation block */
                for (int h = 0; h < 2; h++) {
                    for (int i = 0; i < 8; i++)
                        v[i] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_add_epi16(pv[4 * h][i], pv[4 * h + 1][i]),
                                                                  _mm256_add_epi16(pv[4 * h + 2][i], pv[4 * h + 3][i])), ones);
                    const __m256i is = _mm256_sub_epi32(rows8_isum(v), _mm256_set1_epi32(af[h].sum));
                    rows8_isum_hook(m, c, r, nr, 2 * nb, 2 * b + h, is);
                    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(af[h].d)), _mm256_cvtepi32_ps(is), acc);
                }
            } else {                                     /* ggml: 8 units of 32 */
                __m256 blk = _mm256_setzero_ps();
                for (int k = 0; k < 8; k++) {
                    for (int i = 0; i < 8; i++) v[i] = _mm256_madd_epi16(pv[k][i], ones);
                    const __m256i is = _mm256_sub_epi32(rows8_isum(v), _mm256_set1_epi32(ag[k].sum));
                    rows8_isum_hook(m, c, r, nr, 8 * nb, 8 * b + k, is);
                    blk = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_f32(ag[k].d)), _mm256_cvtepi32_ps(is), blk);
                }
                acc = _mm256_fmadd_ps(dw, blk, acc);
            }
        }
    } else if (a->mode == KQ_FAST) {                     /* TQ2_0: unit = half a block = one activation block */
        const kact_fast *ac = aq;
        for (int64_t b = 0; b < nb; b++) {
            rows8_prefetch(row, b, nb, (size_t)bb, row_bytes);
            const __m256 dw = rows8_scale(row, (size_t)b * 66 + 64);
            for (int h = 0; h < 2; h++) {
                const kact_fast *ab = &ac[2 * b + h];
                for (int i = 0; i < 8; i++)
                    v[i] = tq2_dot(_mm256_loadu_si256((const __m256i *)(const void *)(row[i] + b * 66 + 32 * h)), ab->qs, 0, 4);
                const __m256i is = _mm256_sub_epi32(rows8_isum(v), _mm256_set1_epi32(ab->sum));   /* sum((u - 1) q) */
                rows8_isum_hook(m, c, r, nr, 2 * nb, 2 * b + h, is);
                acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), _mm256_cvtepi32_ps(is), acc);
            }
        }
    } else {                                             /* TQ2_0, ggml: 8 units of 32 per block */
        const kact_ggml *ag = aq;
        for (int64_t b = 0; b < nb; b++) {
            rows8_prefetch(row, b, nb, (size_t)bb, row_bytes);
            __m256 blk = _mm256_setzero_ps();
            __m256i wv[8];
            for (int i = 0; i < 8; i++) wv[i] = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) {                /* unit k: half k / 4, slot k % 4 */
                const int h = k / 4, s = k % 4;
                if (s == 0)
                    for (int i = 0; i < 8; i++) wv[i] = _mm256_loadu_si256((const __m256i *)(const void *)(row[i] + b * 66 + 32 * h));
                const kact_ggml *ab = &ag[8 * b + k];
                for (int i = 0; i < 8; i++) v[i] = tq2_dot(_mm256_srli_epi16(wv[i], 2 * s), ab->qs, 0, 1);
                const __m256i is = _mm256_sub_epi32(rows8_isum(v), _mm256_set1_epi32(ab->sum));
                rows8_isum_hook(m, c, r, nr, 8 * nb, 8 * b + k, is);
                blk = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_f32(ab->d)), _mm256_cvtepi32_ps(is), blk);
            }
            acc = _mm256_fmadd_ps(rows8_scale(row, (size_t)b * 66 + 64), blk, acc);
        }
    }
    rows8_store(m, c, r, nr, acc);
}

static void mm_block8(const kern_mm_args *m, int64_t r0, int64_t r1) {
    const kern_w *w = m->w;
    const size_t row_bytes = (size_t)(w->n_in / kern_block_size(w->type)) * (size_t)kern_block_bytes(w->type);
    const int64_t rows_per = TERN_MAX((int64_t)8, (int64_t)(BK_CHUNK_BYTES / row_bytes) & ~(int64_t)7);
    for (int64_t rc = r0; rc < r1; rc += rows_per) {
        const int64_t rc1 = TERN_MIN(r1, rc + rows_per);
        for (int c = 0; c < m->a->ncols; c++)
            for (int64_t r = rc; r < rc1; r += 8) bk_rows8(m, c, r, (int)TERN_MIN((int64_t)8, rc1 - r));
    }
}

const kern_table kern_table_avx2 = {
    .name = "avx2",
    .needs = KCPU_AVX2,
    .mm = {
        [KT_PQ2_0] = {mm_pq2_0_fast, mm_pq2_0_ggml, mm_block_f32mode},
        [KT_PTQ1_0] = {mm_ptq1_0_fast, mm_ptq1_0_ggml, mm_block_f32mode},
        [KT_Q2_0] = {mm_q2_0_fast, mm_block8, mm_block_f32mode},
        [KT_TQ1_0] = {mm_block8, mm_block8, mm_block_f32mode},
        [KT_TQ2_0] = {mm_block8, mm_block8, mm_block_f32mode},
        [KT_Q1_0] = {mm_block8, mm_block8, mm_block_f32mode},
        [KT_Q8_0] = {mm_block8, mm_block8, mm_block_f32mode},
        [KT_F32] = {mm_f32_tiles, mm_f32_tiles, mm_f32_tiles},
        [KT_F16] = {mm_f16_float, mm_f16_float, mm_f16_float},
        [KT_BF16] = {mm_bf16_float, mm_bf16_float, mm_bf16_float},
    },
    .row16 = true,   /* PQ2_0 / PTQ1_0 transcode in fast numerics: the 16-row kernels above */
};

#else
const kern_table kern_table_avx2 = {.name = "avx2", .needs = KCPU_AVX2};   /* not built with AVX2: ref everywhere */
#endif
