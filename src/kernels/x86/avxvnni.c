/* avxvnni.c: AVX-VNNI kernels (vpdpbusd on ymm, VEX encoded: Alder Lake and later, Zen 5 client,
 * CPUs with these but no AVX-512). Built with -mavx2 -mfma -mf16c -mavxvnni only; exports only
 * kern_table_avxvnni; every helper is static. Integer and float order: kern_impl.h; reproduced
 * exactly (tests compare every int32 and bit).
 *
 * PQ2_0 (and PTQ1_0 transcoded) in the 16-row layout, fast numerics: x86/r16_ymm.h, each ymm an
 * 8-row interleave (one 32-bit lane per row), the activation broadcast 4 bytes at a time, no
 * reduction in the K loop, tiles of 16 rows x 1-6 columns. A row-pair weight (ggml numerics keeps
 * that layout; a layout forced by a flag) and every other entry run the AVX2 table, then ref.
 *
 * The same file is also compiled with -DKERN_EMUVNNI and only AVX2 flags into
 * kern_table_avxvnni_emu (tests only): vpdpbusd is then a scalar loop with the instruction's
 * semantics (Intel SDM: each int32 lane += the sum of the 4 products of an unsigned byte of the
 * first source and the signed byte of the second, wrapping), so the kernel is checked against
 * ref on hosts without AVX-VNNI. The real table still runs wherever the host has it. */
#include "kernels/kern_impl.h"

#if (defined(__AVXVNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)) || \
    (defined(KERN_EMUVNNI) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#include <immintrin.h>
#include <string.h>

#define R16Y_VNNI 1
#ifdef KERN_EMUVNNI
#define R16Y_ONE_COPY
#define TABLE_NAME kern_table_avxvnni_emu
#define TABLE_STR "avxvnni_emu"
#define TABLE_NEEDS KCPU_AVX2
static inline __m256i r16y_dpbusd(__m256i acc, __m256i u, __m256i s) {
    int32_t a[8];
    uint8_t ub[32];
    int8_t sb[32];
    _mm256_storeu_si256((__m256i *)(void *)a, acc);
    _mm256_storeu_si256((__m256i *)(void *)ub, u);
    _mm256_storeu_si256((__m256i *)(void *)sb, s);
    for (int i = 0; i < 8; i++) {
        int64_t t = a[i];
        for (int j = 0; j < 4; j++) t += (int32_t)ub[4 * i + j] * (int32_t)sb[4 * i + j];
        a[i] = (int32_t)(uint32_t)t;   /* wraps like the instruction (never reached here) */
    }
    return _mm256_loadu_si256((const __m256i *)(const void *)a);
}
#else
#define TABLE_NAME kern_table_avxvnni
#define TABLE_STR "avxvnni"
#define TABLE_NEEDS (KCPU_AVX2 | KCPU_AVXVNNI)
static inline __m256i r16y_dpbusd(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#endif

#ifndef R16Y_TH
#define R16Y_TH 2   /* 16 rows x up to 6 columns: 12 accumulators at most (r16y_chains) */
#define R16Y_TW 6
#endif
#include "kernels/x86/r16_ymm.h"

static void mm_pq2_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_ROW16) { r16y_mm_fast(m, (const kern_r16_block *)(const void *)m->w->data, r0, r1); return; }
    kern_table_avx2.mm[KT_PQ2_0][KQ_FAST](m, r0, r1);   /* row-pair or file layout */
}

static void mm_ptq1_0_fast(const kern_mm_args *m, int64_t r0, int64_t r1) {
    if (m->w->layout == KW_PTQ_ROW16) { r16y_mm_fast(m, (const kern_r16_block *)m->w->aux, r0, r1); return; }
    kern_table_avx2.mm[KT_PTQ1_0][KQ_FAST](m, r0, r1);   /* row-pair transcode or the direct kernel */
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

#elif !defined(KERN_EMUVNNI)
const kern_table kern_table_avxvnni = {.name = "avxvnni", .needs = KCPU_AVX2 | KCPU_AVXVNNI, .row16 = true};
#endif
