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
typedef __m512i v512;
static inline v512 v512_loadu(const void *p) { return _mm512_loadu_si512(p); }
static inline v512 v512_and(v512 a, v512 b) { return _mm512_and_si512(a, b); }
#define v512_srli16(a, n) _mm512_srli_epi16((a), (n))
static inline v512 v512_set1_8(char c) { return _mm512_set1_epi8(c); }
static inline v512 v512_zero(void) { return _mm512_setzero_si512(); }
static inline v512 v512_dpbusd(v512 acc, v512 u, v512 s) { return _mm512_dpbusd_epi32(acc, u, s); }
static inline v512 v512_perm2_64(v512 a, v512 idx, v512 b) { return _mm512_permutex2var_epi64(a, idx, b); }
static inline v512 v512_idx64(long long i0, long long i1, long long i2, long long i3, long long i4, long long i5,
                              long long i6, long long i7) {
    return _mm512_setr_epi64(i0, i1, i2, i3, i4, i5, i6, i7);
}
static inline __m256i v512_lo256(v512 a) { return _mm512_castsi512_si256(a); }
static inline __m256i v512_hi256(v512 a) { return _mm512_extracti64x4_epi64(a, 1); }
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

static void mm_pq2_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout != KW_ROWPAIR) { kern_ref_mm_fast(m, r0, r1); return; }
    mm_rowpair_fast(m, (const kern_rp_block *)(const void *)m->w->data, r0, r1);
}

/* PTQ1_0: the transcoded layout runs the row-pair kernel above; the direct (base-3) form runs
 * the AVX2 kernel (same bits by the oracle tests; a zmm base-3 kernel is not written yet). */
static void mm_ptq1_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
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
};

#elif !defined(KERN_EMU512)
const kern_table kern_table_avx512vnni = {.name = "avx512vnni", .needs = KCPU_AVX2 | KCPU_AVX512VNNI};
#endif
