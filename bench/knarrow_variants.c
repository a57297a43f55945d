/* knarrow_variants.c: the 2-4 column PQ2_0 pass of src/kernels/x86/avx2.c (rp_mm_narrow) and the
 * variants tried against it in session 4, timed in one process on the same L2-resident weights,
 * each as a fraction of the vpmaddubsw peak measured in the same run (bench/RESULTS.md "Session 4
 * narrow"). A frozen copy for the A/B, not the kernel: the kernel itself is timed by
 * `tern bench-kernel` and by bench/kmv_ab.sh (an older commit against this tree, same inputs).
 * Every variant's output is compared bit for bit with the first one of its column count.
 *
 *   cc -std=c11 -O2 -mavx2 -mfma -mf16c -ffp-contract=off -Iinclude -Isrc bench/knarrow_variants.c -lm \
 *      -o /tmp/knv && /tmp/knv
 *
 * Timing: rdtsc, the best of REPS calls of each variant interleaved with the peak loop (short
 * calls, so the best of many is free of preemption on a shared host). 1 thread, 64 row groups x
 * 32 blocks (278 KB of weights: L2), 4 columns of activations.
 * Variants (G = row groups per pass, NC = columns):
 *   insert  session 3's pass: a word = 16-byte load + vinserti128 from memory (G = 3 at NC = 2,
 *           G = 2 at 3-4)
 *   blend   session 4's: a word = two 32-byte loads + vpblendd (rp_load_word_blend), same G
 *   expand  activations expanded per K chunk of 8 blocks (each slot's 8 bytes in all four 64-bit
 *           lanes, as the matvec does) and read as vpmaddubsw memory operands instead of
 *           vpbroadcastq; blend loads
 *   nibble  one shift per word (slots 0/2 as u, 1/3 as 4u from v & 12 and (v >> 4) & 12) with two
 *           int16 accumulators per (group, column), folded a1 + (a4 >> 2) once per block: 16
 *           accumulators do not fit at G = 2, NC = 4, so G = 1 (and G = 2 at NC = 2)
 *   madd+add  the ceiling of the structure: 8 accumulators, each acc += vpmaddubsw(w, bcast) with
 *           the same broadcasts per word and no extraction, loads or epilogue (not a kernel) */
#include "core/fp16.h"
#include "kernels/kern_impl.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#define PIN(x) __asm__ volatile("" : "+x"(x))
#define NB 32       /* blocks per row (K = 4096) */
#define NG 64       /* row groups (256 rows) */
#define XKB 8       /* expand: blocks per K chunk */
#define REPS 300

enum { L_INSERT, L_BLEND };

static inline __m256i bcast8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}
static inline __m256i nsum16(const kact_fast *a) {
    int64_t v;
    memcpy(&v, a->nsum, 8);
    return _mm256_set1_epi64x(v);
}
static inline __attribute__((always_inline)) __m256i load_word(const kern_rp_block *blk, int wd, int how) {
    const uint8_t *p = (const uint8_t *)(const void *)blk;
    if (how == L_BLEND)
        return _mm256_blend_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + 8 + 16 * wd)),
                                  _mm256_loadu_si256((const __m256i *)(const void *)(p + 56 + 16 * wd)), 0xF0);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)blk->qs[0][wd])),
                                   _mm_loadu_si128((const __m128i *)(const void *)blk->qs[1][wd]), 1);
}

/* The per-block float epilogue of rp_mm_narrow for one pair of groups (ga, gb) and one column:
 * isum in [ga r0 r1, gb r0 r1 | ga r2 r3, gb r2 r3], facc += (d_w * d_a) * isum; dw from wscale. */
static inline __attribute__((always_inline)) __m256 wscale(const kern_rp_block *A, int64_t nb, int64_t b, int ga, int gb) {
    const __m128i wa = _mm_loadl_epi64((const __m128i *)(const void *)A[ga * nb + b].d);
    const __m128i wb = _mm_loadl_epi64((const __m128i *)(const void *)A[gb * nb + b].d);
    return _mm256_cvtph_ps(_mm_unpacklo_epi32(wa, wb));
}
static inline __attribute__((always_inline)) void epilogue(__m256 dw, __m256i acc_a, __m256i acc_b, float da, float *facc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(acc_a, ones), _mm256_madd_epi16(acc_b, ones));
    const __m256 s = _mm256_mul_ps(dw, _mm256_set1_ps(da));
    _mm256_store_ps(facc, _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(h), _mm256_load_ps(facc)));
}

static inline __attribute__((always_inline)) void store_out(int G, int NC, float (*facc)[4][8], float *const *y) {
    for (int gp = 0; gp < (G + 1) / 2; gp++)
        for (int c = 0; c < NC; c++) {
            const __m256 o = _mm256_permutevar8x32_ps(_mm256_load_ps(facc[gp][c]), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
            if (2 * gp + 1 < G) _mm256_storeu_ps(y[c] + 8 * gp, o);
            else _mm_storeu_ps(y[c] + 8 * gp, _mm256_castps256_ps128(o));
        }
}

/* rp_mm_narrow (without prefetch and the isum hook): G groups x NC columns, all nb blocks. */
static inline __attribute__((always_inline)) void pass_std(const kern_rp_block *A, int64_t nb, int G, int NC, int how,
                                                           const kact_fast *const *x, float *const *y) {
    float facc[2][4][8] __attribute__((aligned(32))) = {{{0}}};
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < nb; b++) {
        __m256i acc[3][4];
#pragma GCC unroll 3
        for (int g = 0; g < G; g++)
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) acc[g][c] = nsum16(&x[c][b]);
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++) {
            __m256i v[3];
#pragma GCC unroll 3
            for (int g = 0; g < G; g++) { v[g] = load_word(A + g * nb + b, wd, how); PIN(v[g]); }
#pragma GCC unroll 4
            for (int sl = 0; sl < 4; sl++) {
                __m256i u[3];
#pragma GCC unroll 3
                for (int g = 0; g < G; g++) u[g] = _mm256_and_si256(sl ? _mm256_srli_epi16(v[g], 2 * sl) : v[g], m3);
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) {
                    const __m256i q = bcast8(x[c][b].qs + 32 * wd + 8 * sl);
#pragma GCC unroll 3
                    for (int g = 0; g < G; g++) { acc[g][c] = _mm256_add_epi16(acc[g][c], _mm256_maddubs_epi16(u[g], q)); PIN(acc[g][c]); }
                }
            }
        }
#pragma GCC unroll 2
        for (int gp = 0; gp < (G + 1) / 2; gp++) {
            const int ga = 2 * gp, gb = 2 * gp + 1 < G ? 2 * gp + 1 : 2 * gp;
            const __m256 dw = wscale(A, nb, b, ga, gb);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) epilogue(dw, acc[ga][c], acc[gb][c], x[c][b].d, facc[gp][c]);
        }
    }
    store_out(G, NC, facc, y);
}

/* expand: blocks [b0, b0 + XKB) of NC columns, each slot's 8 bytes in all four 64-bit lanes. */
typedef struct {
    __m256i q[XKB][4][4][4];   /* [block][word][slot][column] */
    __m256i n16[XKB][4];
    float d[XKB][4];
} xact;
static void expand(xact *X, const kact_fast *const *x, int64_t b0, int NC) {
    for (int b = 0; b < XKB; b++)
        for (int c = 0; c < NC; c++) {
            const kact_fast *a = &x[c][b0 + b];
            for (int wd = 0; wd < 4; wd++)
                for (int s = 0; s < 4; s++) X->q[b][wd][s][c] = bcast8(a->qs + 32 * wd + 8 * s);
            X->n16[b][c] = nsum16(a);
            X->d[b][c] = a->d;
        }
}
/* 2 groups x 4 columns, blocks [b0, b0 + XKB), activations from X, facc carried by the caller. */
static void pass_expand(const kern_rp_block *A, int64_t nb, int64_t b0, const xact *X, float (*facc)[8]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int bi = 0; bi < XKB; bi++) {
        const int64_t b = b0 + bi;
        __m256i acc[2][4];
#pragma GCC unroll 2
        for (int g = 0; g < 2; g++)
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) acc[g][c] = X->n16[bi][c];
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++) {
            __m256i v[2];
#pragma GCC unroll 2
            for (int g = 0; g < 2; g++) { v[g] = load_word(A + g * nb + b, wd, L_BLEND); PIN(v[g]); }
#pragma GCC unroll 4
            for (int sl = 0; sl < 4; sl++) {
                __m256i u[2];
#pragma GCC unroll 2
                for (int g = 0; g < 2; g++) u[g] = _mm256_and_si256(sl ? _mm256_srli_epi16(v[g], 2 * sl) : v[g], m3);
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++)
#pragma GCC unroll 2
                    for (int g = 0; g < 2; g++) {
                        acc[g][c] = _mm256_add_epi16(acc[g][c], _mm256_maddubs_epi16(u[g], X->q[bi][wd][sl][c]));
                        PIN(acc[g][c]);
                    }
            }
        }
        const __m256 dw = wscale(A, nb, b, 0, 1);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) epilogue(dw, acc[0][c], acc[1][c], X->d[bi][c], facc[c]);
    }
}

/* nibble: G groups x NC columns (G * NC <= 4), a1 (slots 0, 2 as u) and a4 (slots 1, 3 as 4u);
 * |a4 lane| <= 8 * 2 * 12 * 127 = 24384, a1 as rp_mm_narrow's bound. */
static inline __attribute__((always_inline)) void pass_nibble(const kern_rp_block *A, int64_t nb, int G, int NC,
                                                              const kact_fast *const *x, float *const *y) {
    float facc[2][4][8] __attribute__((aligned(32))) = {{{0}}};
    const __m256i m3 = _mm256_set1_epi8(3), mC = _mm256_set1_epi8(12);
    for (int64_t b = 0; b < nb; b++) {
        __m256i a1[2][4], a4[2][4];
#pragma GCC unroll 2
        for (int g = 0; g < G; g++)
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) { a1[g][c] = nsum16(&x[c][b]); a4[g][c] = _mm256_setzero_si256(); }
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++)
#pragma GCC unroll 2
            for (int g = 0; g < G; g++) {
                const __m256i v = load_word(A + g * nb + b, wd, L_BLEND), h = _mm256_srli_epi16(v, 4);
#pragma GCC unroll 4
                for (int sl = 0; sl < 4; sl++) {
                    const __m256i u = _mm256_and_si256(sl >= 2 ? h : v, (sl & 1) ? mC : m3);
#pragma GCC unroll 4
                    for (int c = 0; c < NC; c++) {
                        const __m256i q = bcast8(x[c][b].qs + 32 * wd + 8 * sl);
                        if (sl & 1) { a4[g][c] = _mm256_add_epi16(a4[g][c], _mm256_maddubs_epi16(u, q)); PIN(a4[g][c]); }
                        else { a1[g][c] = _mm256_add_epi16(a1[g][c], _mm256_maddubs_epi16(u, q)); PIN(a1[g][c]); }
                    }
                }
            }
        const __m256 dw = wscale(A, nb, b, 0, G - 1);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            epilogue(dw, _mm256_add_epi16(a1[0][c], _mm256_srai_epi16(a4[0][c], 2)),
                     _mm256_add_epi16(a1[G - 1][c], _mm256_srai_epi16(a4[G - 1][c], 2)), x[c][b].d, facc[0][c]);
    }
    store_out(G, NC, facc, y);
}

/* ---- fixture and drivers -------------------------------------------------------------------- */
static kern_rp_block W[NG * NB];
static kact_fast ACT[4][NB];
static float Y[4][NG * 4];
static xact XA;

static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }

typedef struct { const char *name; int kind, G, NC, how; } variant;
enum { K_STD, K_EXPAND, K_NIBBLE };

#define VFN(name, call) static __attribute__((noinline)) void name(const kern_rp_block *A, const kact_fast *const *x, float *const *y) { call; }
VFN(f_ins4, pass_std(A, NB, 2, 4, L_INSERT, x, y))
VFN(f_bl4, pass_std(A, NB, 2, 4, L_BLEND, x, y))
VFN(f_bl4g1, pass_std(A, NB, 1, 4, L_BLEND, x, y))
VFN(f_nib4, pass_nibble(A, NB, 1, 4, x, y))
VFN(f_ins3, pass_std(A, NB, 2, 3, L_INSERT, x, y))
VFN(f_bl3, pass_std(A, NB, 2, 3, L_BLEND, x, y))
VFN(f_ins2, pass_std(A, NB, 3, 2, L_INSERT, x, y))
VFN(f_bl2g3, pass_std(A, NB, 3, 2, L_BLEND, x, y))
VFN(f_bl2g2, pass_std(A, NB, 2, 2, L_BLEND, x, y))
VFN(f_nib2, pass_nibble(A, NB, 2, 2, x, y))

static void run(const variant *v) {
    const kact_fast *x[4] = {ACT[0], ACT[1], ACT[2], ACT[3]};
    const int G = v->G, NC = v->NC, n = (NG / G) * G;
    if (v->kind == K_EXPAND) {
        static float F[NG / 2][4][8] __attribute__((aligned(32)));
        memset(F, 0, sizeof F);
        for (int64_t b0 = 0; b0 < NB; b0 += XKB) {
            expand(&XA, x, b0, 4);
            for (int g = 0; g < NG; g += 2) pass_expand(W + g * NB, NB, b0, &XA, F[g / 2]);
        }
        for (int g = 0; g < NG; g += 2) {
            float *y[4] = {Y[0] + 4 * g, Y[1] + 4 * g, Y[2] + 4 * g, Y[3] + 4 * g};
            store_out(2, 4, &F[g / 2], y);
        }
        return;
    }
    for (int g = 0; g < n; g += G) {
        float *y[4] = {Y[0] + 4 * g, Y[1] + 4 * g, Y[2] + 4 * g, Y[3] + 4 * g};
        const kern_rp_block *A = W + g * NB;
        void (*fn)(const kern_rp_block *, const kact_fast *const *, float *const *);
        if (v->kind == K_NIBBLE) fn = NC == 4 ? f_nib4 : f_nib2;
        else if (v->how == L_BLEND) fn = NC == 4 ? (G == 1 ? f_bl4g1 : f_bl4) : NC == 3 ? f_bl3 : G == 3 ? f_bl2g3 : f_bl2g2;
        else fn = NC == 4 ? f_ins4 : NC == 3 ? f_ins3 : f_ins2;
        fn(A, x, y);
    }
}

static void run_ceiling(void) {   /* madd+add only: same broadcasts, fixed weight registers */
    __m256i acc[8], w0 = _mm256_set1_epi8(1), w1 = _mm256_set1_epi8(2);
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
    PIN(w0); PIN(w1);
    for (int64_t b = 0; b < (int64_t)NG / 2 * NB; b++) {
        const kact_fast *a = &ACT[0][b % NB];
#pragma GCC unroll 4
        for (int wd = 0; wd < 4; wd++)
#pragma GCC unroll 4
            for (int sl = 0; sl < 4; sl++)
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const __m256i q = bcast8(ACT[c][b % NB].qs + 32 * wd + 8 * sl);
                    acc[2 * c] = _mm256_add_epi16(acc[2 * c], _mm256_maddubs_epi16(w0, q)); PIN(acc[2 * c]);
                    acc[2 * c + 1] = _mm256_add_epi16(acc[2 * c + 1], _mm256_maddubs_epi16(w1, q)); PIN(acc[2 * c + 1]);
                }
        (void)a;
    }
    for (int i = 1; i < 8; i++) acc[0] = _mm256_xor_si256(acc[0], acc[i]);
    _mm256_storeu_si256((__m256i *)(void *)Y[0], acc[0]);
}

static double peak_tsc_per_madd(void) {   /* 8 independent vpmaddubsw chains (bench_kernel.c's loop) */
    __m256i y = _mm256_set1_epi8(3), a[8];
    for (int i = 0; i < 8; i++) a[i] = _mm256_set1_epi8((char)(i + 1));
    PIN(y);
    const uint64_t t0 = __rdtsc();
    for (int it = 0; it < 20000; it++) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) a[i] = _mm256_maddubs_epi16(a[i], y);
    }
    const uint64_t t1 = __rdtsc();
    for (int i = 1; i < 8; i++) a[0] = _mm256_xor_si256(a[0], a[i]);
    volatile int s = _mm256_extract_epi32(a[0], 0);
    (void)s;
    return (double)(t1 - t0) / (20000.0 * 8);
}

int main(void) {
    for (int i = 0; i < NG * NB; i++) {   /* fp16 scales 0.06 .. 0.12, random codes (code 3 included) */
        for (int r = 0; r < 4; r++) W[i].d[r] = (uint16_t)(0x2c00 + rnd() % 512);
        for (int j = 0; j < 128; j++) ((uint8_t *)W[i].qs)[j] = (uint8_t)rnd();
    }
    for (int c = 0; c < 4; c++)
        for (int b = 0; b < NB; b++) {
            kact_fast *a = &ACT[c][b];
            int s = 0;
            for (int j = 0; j < 128; j++) { a->qs[j] = (int8_t)((int)(rnd() % 255) - 127); s += a->qs[j]; }
            a->sum = s;
            a->d = 0.001f * (float)(1 + rnd() % 50);
            memset(a->bsums, 0, sizeof a->bsums);
            a->nsum[0] = (int16_t)-s;
            a->nsum[1] = a->nsum[2] = a->nsum[3] = 0;
        }
    static const variant vs[] = {
        {"insert (session 3)", K_STD, 2, 4, L_INSERT}, {"blend (session 4)", K_STD, 2, 4, L_BLEND},
        {"expand + blend", K_EXPAND, 2, 4, L_BLEND},   {"blend, G = 1", K_STD, 1, 4, L_BLEND},
        {"nibble, G = 1", K_NIBBLE, 1, 4, L_BLEND},
        {"insert (session 3)", K_STD, 2, 3, L_INSERT}, {"blend (session 4)", K_STD, 2, 3, L_BLEND},
        {"insert (session 3)", K_STD, 3, 2, L_INSERT}, {"blend (session 4)", K_STD, 3, 2, L_BLEND},
        {"blend, G = 2", K_STD, 2, 2, L_BLEND},        {"nibble, G = 2", K_NIBBLE, 2, 2, L_BLEND},
    };
    enum { NV = sizeof vs / sizeof vs[0] };
    static float ref[3][4][NG * 4];
    bool same[NV];
    for (int i = 0; i < NV; i++) {
        memset(Y, 0, sizeof Y);
        run(&vs[i]);
        const int k = 4 - vs[i].NC, n = (NG / vs[i].G) * vs[i].G * 4;
        if (i == 0 || vs[i].NC != vs[i - 1].NC) memcpy(ref[k], Y, sizeof Y);
        /* compare the rows every variant of this column count covers (G = 3 leaves the last group) */
        same[i] = true;
        for (int c = 0; c < vs[i].NC; c++) same[i] &= memcmp(Y[c], ref[k][c], 4 * (size_t)(n < 252 ? n : 252)) == 0;
    }
    double best[NV], best_ceil = 1e30, pk = 1e30;
    for (int i = 0; i < NV; i++) best[i] = 1e30;
    for (int r = 0; r < REPS; r++) {
        const double p = peak_tsc_per_madd();
        if (p < pk) pk = p;
        for (int i = 0; i < NV; i++) {
            const uint64_t t0 = __rdtsc();
            run(&vs[i]);
            const double t = (double)(__rdtsc() - t0) / ((double)((NG / vs[i].G) * vs[i].G) * NB * 16 * vs[i].NC);
            if (t < best[i]) best[i] = t;
        }
        const uint64_t t0 = __rdtsc();
        run_ceiling();
        const double t = (double)(__rdtsc() - t0) / ((double)NG / 2 * NB * 128);
        if (t < best_ceil) best_ceil = t;
    }
    printf("knarrow_variants: %d rows x K %d (%zu KB of PQ2_0 row-pair weights), 1 thread, best of %d; "
           "peak %.3f TSC ticks per vpmaddubsw\n", NG * 4, NB * 128, sizeof W / 1024, REPS, pk);
    printf("%-22s %2s %2s %13s %s\n", "variant", "NC", "G", "% int8 peak", "bits == first of its NC");
    for (int i = 0; i < NV; i++)
        printf("%-22s %2d %2d %12.1f%% %s\n", vs[i].name, vs[i].NC, vs[i].G, 100 * pk / best[i], same[i] ? "yes" : "NO");
    printf("%-22s %2d %2d %12.1f%% (not a kernel: no extraction, loads or epilogue)\n", "madd+add only", 4, 2, 100 * pk / best_ceil);
    for (int i = 0; i < NV; i++)
        if (!same[i]) return 1;
    return 0;
}
