/* attn_impl.h: the body of the standard-softmax attention tile (blk_attn_tile, blocks.h),
 * included once per instruction set: by attn.c (portable; fp16 widened through a table), by
 * x86/attn_avx2.c (compiled with -mavx2 -mf16c; fp16 widened by vcvtph2ps) and by
 * x86/attn_avx512.c (the same with AVX-512VL: 32 vector registers, the same 8-lane operations).
 * The widenings are exact and every float operation below is an element-wise IEEE multiply or add
 * on 8-lane GCC/clang vectors (no contraction: -ffp-contract=off), so every copy gives the same bits.
 *
 * The includer defines:
 *   ATTN_SUFFIX            name suffix of the exported function (blk_attn_tile_<suffix>)
 *   ATTN_LD_F16(p)         an expression: the 8 fp16 values at p widened to an attn_v8f
 *   ATTN_CG_WIDE           optional: output chunks per pass of the weighted V sum for 5-8
 *                          queries (default 1; 2 with 32 vector registers: 16 accumulators)
 *   ATTN_PV_HALVES         optional, 1 or 0 (default): with ATTN_CG_WIDE 1, the weighted V sum of
 *                          5-8 queries in two halves of 2 chunks per pass (attn_tile_body)
 *   ATTN_V16               optional: 16-lane vectors exist (AVX-512F), with ATTN_LD_F16_16(p)
 *                          the 16 fp16 values at p widened to an attn_v16f. The dot products
 *                          then take two keys per vector (key j in lanes 0-7, key j + 1 in
 *                          lanes 8-15, the query chunk in both halves) and the weighted V sum
 *                          16 output dims per accumulator: each lane does the same multiplies
 *                          and adds in the same order as in an 8-lane vector, so the same bits,
 *                          in half the instructions where the vector unit is 512 bits wide.
 *
 * Per query (slot s of a tile), the order of operations is fixed and does not depend on the tile:
 *   score_j = dot8(q, k_j) * scale, dot8 = 8 lane accumulators (lane l sums dims i = l mod 8 in
 *             increasing i, products rounded), then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7));
 *   e_j     = attn_exp(score_j - max) (below: Cody-Waite reduction + degree-7 Taylor polynomial,
 *             IEEE multiplies and adds only, within ~2 ulp of exp; 0 below -87);
 *   p_j     = e_j * (float)(1 / sum), sum in double: 8 lane sums (lane l: j = l mod 8, in
 *             increasing j), combined ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7));
 *   out[i]  = (((0 + p_0 v_0[i]) + p_1 v_1[i]) + ...) over j < n_kv in increasing order.
 * A tile shares the K/V row loads (and their fp16 widening) among its queries; a query's result is
 * bit-identical whether it is computed alone (decode) or in a tile (prefill). */
#ifndef ATTN_SUFFIX
#error "define ATTN_SUFFIX and ATTN_LD_F16 before including attn_impl.h"
#endif
#ifndef ATTN_CG_WIDE
#define ATTN_CG_WIDE 1
#endif
#ifndef ATTN_PV_HALVES
#define ATTN_PV_HALVES 0
#endif

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model/vexp.h"

#define ATTN_CAT2(a, b) a##_##b
#define ATTN_CAT(a, b) ATTN_CAT2(a, b)
#define ATTN_FN(name) ATTN_CAT(name, ATTN_SUFFIX)
#define ATTN_INLINE static inline __attribute__((always_inline))
#define ATTN_PF_ROWS 8   /* K rows prefetched ahead of the scores loop (attn_tile_body) */
#define ATTN_PV_ROWS 32  /* V rows per block of the softmax-weighted sum (attn_tile_body) */
#define ATTN_QP_MAX (8 * 256)   /* floats of a tile's packed queries on the stack (attn_scores) */

ATTN_INLINE attn_v8f ATTN_FN(attn_ld)(const float *p) {
    attn_v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* 8 values at p, or the first n (< 8) followed by zeros (a zero lane adds +0 or -0 to an
 * accumulator that is never -0, so padding is exact). */
ATTN_INLINE attn_v8f ATTN_FN(attn_ld_part)(const float *p, int n) {
    float t[8] = {0};
    memcpy(t, p, (size_t)n * sizeof(float));
    return ATTN_FN(attn_ld)(t);
}

ATTN_INLINE attn_v8f ATTN_FN(attn_ld_row)(const void *row, int i, int n, bool f32) {
    if (f32) return n == 8 ? ATTN_FN(attn_ld)((const float *)row + i) : ATTN_FN(attn_ld_part)((const float *)row + i, n);
    if (n == 8) return ATTN_LD_F16((const uint16_t *)row + i);
    uint16_t t[8] = {0};
    memcpy(t, (const uint16_t *)row + i, (size_t)n * sizeof(uint16_t));
    return ATTN_LD_F16(t);
}

#ifdef ATTN_V16
typedef float attn_v16f __attribute__((vector_size(64)));

ATTN_INLINE attn_v16f ATTN_FN(attn_ld16)(const float *p) {
    attn_v16f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Elements [i, i + 16) of a K/V row. */
ATTN_INLINE attn_v16f ATTN_FN(attn_ld_row16)(const void *row, int i, bool f32) {
    return f32 ? ATTN_FN(attn_ld16)((const float *)row + i) : ATTN_LD_F16_16((const uint16_t *)row + i);
}

/* Elements [i, i + 8) of two rows: row a in lanes 0-7, row b in lanes 8-15. */
ATTN_INLINE attn_v16f ATTN_FN(attn_ld_pair)(const void *a, const void *b, int i, bool f32) {
    const attn_v8f x = ATTN_FN(attn_ld_row)(a, i, 8, f32), y = ATTN_FN(attn_ld_row)(b, i, 8, f32);
    return __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

ATTN_INLINE attn_v8f ATTN_FN(attn_lo8)(attn_v16f v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); }
ATTN_INLINE attn_v8f ATTN_FN(attn_hi8)(attn_v16f v) {
    return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}
#endif

/* The K rows of keys j .. j + KG - 1 (past n_max: row n_max - 1 again) into kr, with the K row
 * ATTN_PF_ROWS ahead of each and its V row prefetched (attn_tile_body says why). */
ATTN_INLINE void ATTN_FN(attn_key_rows)(const int KG, int j, int n_max, const uint8_t *k0, size_t ks, const uint8_t *v0,
                                        size_t vs, size_t kb, size_t vb, const uint8_t **kr) {
#pragma GCC unroll 4
    for (int g = 0; g < KG; g++) {
        const int jg = j + g < n_max ? j + g : n_max - 1;
        kr[g] = k0 + (size_t)jg * ks;
        if (jg + ATTN_PF_ROWS < n_max)
            for (size_t o = 0; o < kb; o += 64) __builtin_prefetch(k0 + (size_t)(jg + ATTN_PF_ROWS) * ks + o, 0, 3);
        for (size_t o = 0; o < vb; o += 64) __builtin_prefetch(v0 + (size_t)jg * vs + o, 0, 3);
    }
}

/* The 8 dot8 reductions of a[0..7] at once: lane s of the result is
 * ((a[s]0 + a[s]4) + (a[s]2 + a[s]6)) + ((a[s]1 + a[s]5) + (a[s]3 + a[s]7)). */
ATTN_INLINE attn_v8f ATTN_FN(attn_reduce8)(const attn_v8f *a) {
#define SH(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
    const attn_v8f u01 = SH(a[0], a[1], 0, 1, 2, 3, 8, 9, 10, 11) + SH(a[0], a[1], 4, 5, 6, 7, 12, 13, 14, 15);
    const attn_v8f u23 = SH(a[2], a[3], 0, 1, 2, 3, 8, 9, 10, 11) + SH(a[2], a[3], 4, 5, 6, 7, 12, 13, 14, 15);
    const attn_v8f u45 = SH(a[4], a[5], 0, 1, 2, 3, 8, 9, 10, 11) + SH(a[4], a[5], 4, 5, 6, 7, 12, 13, 14, 15);
    const attn_v8f u67 = SH(a[6], a[7], 0, 1, 2, 3, 8, 9, 10, 11) + SH(a[6], a[7], 4, 5, 6, 7, 12, 13, 14, 15);
    const attn_v8f v03 = SH(u01, u23, 0, 1, 4, 5, 8, 9, 12, 13) + SH(u01, u23, 2, 3, 6, 7, 10, 11, 14, 15);
    const attn_v8f v47 = SH(u45, u67, 0, 1, 4, 5, 8, 9, 12, 13) + SH(u45, u67, 2, 3, 6, 7, 10, 11, 14, 15);
    return SH(v03, v47, 0, 2, 4, 6, 8, 10, 12, 14) + SH(v03, v47, 1, 3, 5, 7, 9, 11, 13, 15);
#undef SH
}

/* e^x for x <= 0 (scores minus their max), lane-wise; 0 for x < -87 and for NaN: vexp_le0
 * (vexp.h, method and error there), inlined here with this file's instruction set. Only IEEE
 * multiplies, adds, compares and integer ops: the same bits on every ISA. */
ATTN_INLINE attn_v8f ATTN_FN(attn_exp)(const attn_v8f *xp) {   /* by pointer: no vector argument ABI */
    return vexp_le0(xp);
}

/* Lanes 0-3 / 4-7 of *e widened to double (exact). */
ATTN_INLINE attn_v4d ATTN_FN(attn_cvt_lo)(const attn_v8f *e) {
    vexp_v4f h;
    memcpy(&h, e, sizeof h);
    return __builtin_convertvector(h, attn_v4d);
}
ATTN_INLINE attn_v4d ATTN_FN(attn_cvt_hi)(const attn_v8f *e) {
    vexp_v4f h;
    memcpy(&h, (const char *)e + sizeof h, sizeof h);
    return __builtin_convertvector(h, attn_v4d);
}

/* In place over S[0, n): scores -> softmax probabilities (order in the file comment). */
ATTN_INLINE void ATTN_FN(attn_softmax)(float *S, int n) {
    const attn_v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    attn_v8f m = ninf;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const attn_v8f v = ATTN_FN(attn_ld)(S + j);
        const attn_v8i gt = v > m;
        m = (attn_v8f)(((attn_v8i)v & gt) | ((attn_v8i)m & ~gt));
    }
    float mx = -INFINITY;
    for (int l = 0; l < 8; l++) mx = m[l] > mx ? m[l] : mx;
    for (int k = j; k < n; k++) mx = S[k] > mx ? S[k] : mx;
    const attn_v8f vmx = {mx, mx, mx, mx, mx, mx, mx, mx};
    attn_v4d lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
    /* two chunks per step while 16 are left: two independent exp chains in flight (the polynomial
     * is one long dependency chain); the lane sums still take the chunks in increasing order */
    for (j = 0; j + 16 <= n; j += 16) {
        const attn_v8f d0 = ATTN_FN(attn_ld)(S + j) - vmx, d1 = ATTN_FN(attn_ld)(S + j + 8) - vmx;
        const attn_v8f e0 = ATTN_FN(attn_exp)(&d0), e1 = ATTN_FN(attn_exp)(&d1);
        memcpy(S + j, &e0, sizeof e0);
        memcpy(S + j + 8, &e1, sizeof e1);
        lo += ATTN_FN(attn_cvt_lo)(&e0);
        hi += ATTN_FN(attn_cvt_hi)(&e0);
        lo += ATTN_FN(attn_cvt_lo)(&e1);
        hi += ATTN_FN(attn_cvt_hi)(&e1);
    }
    for (; j < n; j += 8) {
        attn_v8f v;
        if (j + 8 <= n) v = ATTN_FN(attn_ld)(S + j);
        else {   /* tail: padding lanes are -inf, e = 0, and add +0 to their lane sums (exact) */
            v = ninf;
            for (int l = 0; l < n - j; l++) v[l] = S[j + l];
        }
        const attn_v8f d = v - vmx;
        const attn_v8f e = ATTN_FN(attn_exp)(&d);
        if (j + 8 <= n) memcpy(S + j, &e, sizeof e);
        else for (int l = 0; l < n - j; l++) S[j + l] = e[l];
        lo += ATTN_FN(attn_cvt_lo)(&e);
        hi += ATTN_FN(attn_cvt_hi)(&e);
    }
    const double sum = ((lo[0] + hi[0]) + (lo[2] + hi[2])) + ((lo[1] + hi[1]) + (lo[3] + hi[3]));
    const float inv = (float)(1.0 / sum);
    const attn_v8f vinv = {inv, inv, inv, inv, inv, inv, inv, inv};
    for (j = 0; j + 8 <= n; j += 8) {
        const attn_v8f v = ATTN_FN(attn_ld)(S + j) * vinv;
        memcpy(S + j, &v, sizeof v);
    }
    for (; j < n; j++) S[j] *= inv;
}

#ifdef ATTN_V16
typedef int32_t attn_v16i __attribute__((vector_size(64)));
typedef double attn_v8d __attribute__((vector_size(64)));
#define ATTN_B16(c) ((attn_v16f){c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c})
ATTN_INLINE attn_v16f ATTN_FN(attn_exp16)(const attn_v16f *xp) { VEXP_LE0_BODY(attn_v16f, attn_v16i, ATTN_B16); }

/* attn_reduce8 on both halves of a[0..7] at once: lane 8 h + s of the result is attn_reduce8's
 * lane s for the 8-lane vectors made of lanes 8 h .. 8 h + 7 of each a[s], by the same adds in
 * the same tree (each shuffle picks, within each half, what attn_reduce8's picks). */
ATTN_INLINE attn_v16f ATTN_FN(attn_reduce16)(const attn_v16f *a) {
#define SH(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#define PAIR_LO 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define PAIR_HI 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define QUAD_LO 0, 1, 4, 5, 16, 17, 20, 21, 8, 9, 12, 13, 24, 25, 28, 29
#define QUAD_HI 2, 3, 6, 7, 18, 19, 22, 23, 10, 11, 14, 15, 26, 27, 30, 31
#define OCT_LO 0, 2, 4, 6, 16, 18, 20, 22, 8, 10, 12, 14, 24, 26, 28, 30
#define OCT_HI 1, 3, 5, 7, 17, 19, 21, 23, 9, 11, 13, 15, 25, 27, 29, 31
    const attn_v16f u01 = SH(a[0], a[1], PAIR_LO) + SH(a[0], a[1], PAIR_HI);
    const attn_v16f u23 = SH(a[2], a[3], PAIR_LO) + SH(a[2], a[3], PAIR_HI);
    const attn_v16f u45 = SH(a[4], a[5], PAIR_LO) + SH(a[4], a[5], PAIR_HI);
    const attn_v16f u67 = SH(a[6], a[7], PAIR_LO) + SH(a[6], a[7], PAIR_HI);
    const attn_v16f v03 = SH(u01, u23, QUAD_LO) + SH(u01, u23, QUAD_HI);
    const attn_v16f v47 = SH(u45, u67, QUAD_LO) + SH(u45, u67, QUAD_HI);
    return SH(v03, v47, OCT_LO) + SH(v03, v47, OCT_HI);
#undef PAIR_LO
#undef PAIR_HI
#undef QUAD_LO
#undef QUAD_HI
#undef OCT_LO
#undef OCT_HI
#undef SH
}

/* attn_softmax with 16 lanes: the max as there; the exps of 16 scores at once (vexp's operations
 * per lane); the double lane sums of lanes 0-3 and 4-7 (lo, hi there) held side by side in one
 * 8-double vector, chunk j + 8 added after chunk j as there; the same bits. */
ATTN_INLINE void ATTN_FN(attn_softmax16)(float *S, int n) {
    const attn_v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    attn_v8f m = ninf;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const attn_v8f v = ATTN_FN(attn_ld)(S + j);
        const attn_v8i gt = v > m;
        m = (attn_v8f)(((attn_v8i)v & gt) | ((attn_v8i)m & ~gt));
    }
    float mx = -INFINITY;
    for (int l = 0; l < 8; l++) mx = m[l] > mx ? m[l] : mx;
    for (int k = j; k < n; k++) mx = S[k] > mx ? S[k] : mx;
    const attn_v16f vmx = ATTN_B16(mx);
    attn_v8d sum8 = {0, 0, 0, 0, 0, 0, 0, 0};
    for (j = 0; j + 16 <= n; j += 16) {
        const attn_v16f d = ATTN_FN(attn_ld16)(S + j) - vmx;
        const attn_v16f e = ATTN_FN(attn_exp16)(&d);
        memcpy(S + j, &e, sizeof e);
        sum8 += __builtin_convertvector(ATTN_FN(attn_lo8)(e), attn_v8d);
        sum8 += __builtin_convertvector(ATTN_FN(attn_hi8)(e), attn_v8d);
    }
    for (; j < n; j += 8) {
        attn_v16f v = ATTN_B16(-INFINITY);   /* lanes 8-15 unused; padding lanes: e = 0, +0 to the sums */
        for (int l = 0; l < 8 && j + l < n; l++) v[l] = S[j + l];
        const attn_v16f d = v - vmx;
        const attn_v16f e = ATTN_FN(attn_exp16)(&d);
        for (int l = 0; l < 8 && j + l < n; l++) S[j + l] = e[l];
        sum8 += __builtin_convertvector(ATTN_FN(attn_lo8)(e), attn_v8d);
    }
    const double sum = ((sum8[0] + sum8[4]) + (sum8[2] + sum8[6])) + ((sum8[1] + sum8[5]) + (sum8[3] + sum8[7]));
    const float inv = (float)(1.0 / sum);
    const attn_v16f vinv = ATTN_B16(inv);
    for (j = 0; j + 16 <= n; j += 16) {
        const attn_v16f v = ATTN_FN(attn_ld16)(S + j) * vinv;
        memcpy(S + j, &v, sizeof v);
    }
    for (; j < n; j++) S[j] *= inv;
}
#undef ATTN_B16
#endif

/* Output dims [i, i + n) (n <= 8) of every query of a tile over rows [j0, j1): 8 accumulators per
 * query in registers, loaded from out and stored back (an f32 store and load keeps the bits, so
 * the row blocks of attn_tile_body add every row in increasing order as one pass would). P: the
 * block's probabilities, row j of query s at P[(j - j0) NQ + s] (one pointer, constant offsets). */
ATTN_INLINE void ATTN_FN(attn_pv)(const int NQ, const bool f32, float *const *out, const int *n_kv, int n_min, int j0,
                                  int j1, const uint8_t *v0, size_t vs, const float *P, int i, const int n) {
    attn_v8f o[8];
#pragma GCC unroll 8
    for (int s = 0; s < NQ; s++) o[s] = n == 8 ? ATTN_FN(attn_ld)(out[s] + i) : ATTN_FN(attn_ld_part)(out[s] + i, n);
    const int jm = j1 < n_min ? j1 : n_min;
    int j = j0;
    for (; j < jm; j++) {
        const attn_v8f vv = ATTN_FN(attn_ld_row)(v0 + (size_t)j * vs, i, n, f32);
#pragma GCC unroll 8
        for (int s = 0; s < NQ; s++) {
            const float p = P[(size_t)(j - j0) * NQ + s];
            const attn_v8f pv = {p, p, p, p, p, p, p, p};
            o[s] += pv * vv;
        }
    }
    for (; j < j1; j++) {
        const attn_v8f vv = ATTN_FN(attn_ld_row)(v0 + (size_t)j * vs, i, n, f32);
        for (int s = 0; s < NQ; s++) {
            if (j >= n_kv[s]) continue;
            const float p = P[(size_t)(j - j0) * NQ + s];
            const attn_v8f pv = {p, p, p, p, p, p, p, p};
            o[s] += pv * vv;
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < NQ; s++) memcpy(out[s] + i, &o[s], (size_t)n * sizeof(float));
}

/* Output dims [i, i + 8 CG) (CG whole chunks of 8) of every query of a tile over rows [j0, j1):
 * NQ x CG accumulators in registers, loaded from out and stored back, so that a tile of few
 * queries still has several independent add chains per row (one chain per query and chunk: the
 * add's latency, not its throughput, bounds a chain of one). Each accumulator adds the rows in
 * increasing order, as attn_pv: the same bits. PS: P's row stride (NQ, or the tile's query count
 * when these NQ queries are part of a tile: P and n_kv then start at the first of them). */
ATTN_INLINE void ATTN_FN(attn_pv_g)(const int NQ, const int PS, const int CG, const bool f32, float *const *out,
                                    const int *n_kv, int n_min, int j0, int j1, const uint8_t *v0, size_t vs, const float *P,
                                    int i) {
    attn_v8f o[8][4];
#pragma GCC unroll 8
    for (int s = 0; s < NQ; s++)
#pragma GCC unroll 4
        for (int c = 0; c < CG; c++) o[s][c] = ATTN_FN(attn_ld)(out[s] + i + 8 * c);
    /* rows every query sees (below n_min) with no test per query, then the rest tested */
    const int jm = j1 < n_min ? j1 : n_min;
    int j = j0;
    for (; j < jm; j++) {
        attn_v8f vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < CG; c++) vv[c] = ATTN_FN(attn_ld_row)(v0 + (size_t)j * vs, i + 8 * c, 8, f32);
#pragma GCC unroll 8
        for (int s = 0; s < NQ; s++) {
            const float p = P[(size_t)(j - j0) * PS + s];
            const attn_v8f pv = {p, p, p, p, p, p, p, p};
#pragma GCC unroll 4
            for (int c = 0; c < CG; c++) o[s][c] += pv * vv[c];
        }
    }
    for (; j < j1; j++) {
        attn_v8f vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < CG; c++) vv[c] = ATTN_FN(attn_ld_row)(v0 + (size_t)j * vs, i + 8 * c, 8, f32);
#pragma GCC unroll 8
        for (int s = 0; s < NQ; s++) {
            if (j >= n_kv[s]) continue;
            const float p = P[(size_t)(j - j0) * PS + s];
            const attn_v8f pv = {p, p, p, p, p, p, p, p};
#pragma GCC unroll 4
            for (int c = 0; c < CG; c++) o[s][c] += pv * vv[c];
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < NQ; s++)
#pragma GCC unroll 4
        for (int c = 0; c < CG; c++) memcpy(out[s] + i + 8 * c, &o[s][c], sizeof o[s][c]);
}

#ifdef ATTN_V16
/* Row j of attn_pv_g16: o[s][c] += p_js * V_j[i + 16 c ..], for the queries whose n_kv covers j
 * when tested (a compile-time constant after inlining). */
ATTN_INLINE void ATTN_FN(attn_pv_row16)(const int NQ, const int CG, const bool f32, attn_v16f o[8][8], const bool tested,
                                        const int *n_kv, int j, int j0, const uint8_t *v0, size_t vs, const float *P,
                                        int i) {
    attn_v16f vv[8];
#pragma GCC unroll 8
    for (int c = 0; c < CG; c++) vv[c] = ATTN_FN(attn_ld_row16)(v0 + (size_t)j * vs, i + 16 * c, f32);
#pragma GCC unroll 8
    for (int s = 0; s < NQ; s++) {
        if (tested && j >= n_kv[s]) continue;
        const float p = P[(size_t)(j - j0) * NQ + s];
        const attn_v16f pv = {p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p};
#pragma GCC unroll 8
        for (int c = 0; c < CG; c++) o[s][c] += pv * vv[c];
    }
}

/* attn_pv_g over dims [i, i + 16 CG) with 16-lane accumulators (CG = 1..8 chunks of 16, NQ CG of
 * them in registers): each lane adds the rows in increasing order as attn_pv_g's, so the same bits. */
ATTN_INLINE void ATTN_FN(attn_pv_g16)(const int NQ, const int CG, const bool f32, float *const *out, const int *n_kv,
                                      int n_min, int j0, int j1, const uint8_t *v0, size_t vs, const float *P, int i) {
    attn_v16f o[8][8];
#pragma GCC unroll 8
    for (int s = 0; s < NQ; s++)
#pragma GCC unroll 8
        for (int c = 0; c < CG; c++) o[s][c] = ATTN_FN(attn_ld16)(out[s] + i + 16 * c);
    /* rows every query sees (below n_min) with no test per query, then the rest tested */
    const int jm = j1 < n_min ? j1 : n_min;
    int j = j0;
    for (; j < jm; j++) ATTN_FN(attn_pv_row16)(NQ, CG, f32, o, false, n_kv, j, j0, v0, vs, P, i);
    for (; j < j1; j++) ATTN_FN(attn_pv_row16)(NQ, CG, f32, o, true, n_kv, j, j0, v0, vs, P, i);
#pragma GCC unroll 8
    for (int s = 0; s < NQ; s++)
#pragma GCC unroll 8
        for (int c = 0; c < CG; c++) memcpy(out[s] + i + 16 * c, &o[s][c], sizeof o[s][c]);
}

/* attn_scores with two keys per 16-lane accumulator (hd_k a multiple of 8): KP pairs of keys at
 * once (2 for 1-2 queries, else 1), accumulator s KP + g holding query s against keys
 * j + 2g (lanes 0-7) and j + 2g + 1 (lanes 8-15); the query chunk is read from qp2, each chunk
 * of 8 stored twice (chunk i / 8 of query s at qp2[(i / 8) NQ 16 + 16 s]). Each key's lane sums
 * take the products in the same order and go through attn_reduce8's tree, so the same bits as
 * attn_scores. Keys past n_max read row n_max - 1 again and are not stored. */
ATTN_INLINE void ATTN_FN(attn_scores16)(const int NQ, const bool f32, const float *qp2, const uint8_t *k0, size_t ks,
                                        const uint8_t *v0, size_t vs, int n_max, int hd_k, size_t kb, size_t vb,
                                        float scale, float *S, size_t ss) {
    const int KP = NQ <= 2 ? 2 : 1, KG = 2 * KP;
    const attn_v8f vscale = {scale, scale, scale, scale, scale, scale, scale, scale};
    for (int j = 0; j < n_max; j += KG) {
        const uint8_t *kr[4];
        ATTN_FN(attn_key_rows)(KG, j, n_max, k0, ks, v0, vs, kb, vb, kr);
        attn_v16f acc[8];
#pragma GCC unroll 8
        for (int a = 0; a < 8; a++) acc[a] = (attn_v16f){0};
        for (int i = 0; i < hd_k; i += 8) {
            attn_v16f kk[2];
#pragma GCC unroll 2
            for (int g = 0; g < KP; g++) kk[g] = ATTN_FN(attn_ld_pair)(kr[2 * g], kr[2 * g + 1], i, f32);
#pragma GCC unroll 8
            for (int s = 0; s < NQ; s++) {
                const attn_v16f qv = ATTN_FN(attn_ld16)(qp2 + (size_t)i * 2 * NQ + 16 * s);
#pragma GCC unroll 2
                for (int g = 0; g < KP; g++) acc[s * KP + g] += qv * kk[g];
            }
        }
        if (KP == 1) {   /* 3-8 queries: both keys' reductions at once, lane 8 h + s: key j + h, query s */
            const attn_v16f sc = ATTN_FN(attn_reduce16)(acc) * (attn_v16f){scale, scale, scale, scale, scale, scale,
                                                                            scale, scale, scale, scale, scale, scale,
                                                                            scale, scale, scale, scale};
#pragma GCC unroll 8
            for (int s = 0; s < NQ; s++) {
                S[(size_t)s * ss + j] = sc[s];
                if (j + 1 < n_max) S[(size_t)s * ss + j + 1] = sc[8 + s];
            }
            continue;
        }
        /* the 8-lane sums of each (query, key), in attn_scores' accumulator order a = s KG + g */
        attn_v8f a8[16];
#pragma GCC unroll 8
        for (int a = NQ * KG; a % 8; a++) a8[a] = (attn_v8f){0};   /* reduced, not stored (none for 8 queries) */
#pragma GCC unroll 8
        for (int s = 0; s < NQ; s++)
#pragma GCC unroll 2
            for (int g = 0; g < KP; g++) {
                a8[s * KG + 2 * g] = ATTN_FN(attn_lo8)(acc[s * KP + g]);
                a8[s * KG + 2 * g + 1] = ATTN_FN(attn_hi8)(acc[s * KP + g]);
            }
        for (int a0 = 0; a0 < NQ * KG; a0 += 8) {
            const attn_v8f sc = ATTN_FN(attn_reduce8)(a8 + a0) * vscale;
            for (int l = 0; l < 8 && a0 + l < NQ * KG; l++) {
                const int s = (a0 + l) / KG, g = (a0 + l) % KG;
                if (j + g < n_max) S[(size_t)s * ss + j + g] = sc[l];
            }
        }
    }
}
#endif

/* The scores of a tile (attn_tile_body: S[s ss + j] = dot8(q_s, k_j) * scale for j < n_max), KG
 * keys at once (4 for 1-2 queries, 2 for 3-4, else 1: at most 8 accumulators): accumulator
 * a = s KG + g holds query s against key j + g, so a tile of few queries still runs several
 * independent add chains; each dot is the same lane sums in the same order and attn_reduce8's
 * tree (lane a of its result), so the same bits as one key at a time. Keys past n_max in the last
 * group read row n_max - 1 again and are not stored. PK: the whole chunks of 8 dims are read from
 * qp, the queries packed chunk-major (chunk i / 8 of query s at qp[(i / 8) NQ 8 + 8 s]), so the
 * loop holds one query pointer with constant offsets instead of NQ pointers that compete for the
 * general registers; else from q[s] (the same values: the same bits). */
ATTN_INLINE void ATTN_FN(attn_scores)(const int NQ, const bool f32, const bool PK, const float *const *q,
                                      const float *qp, const uint8_t *k0, size_t ks, const uint8_t *v0, size_t vs,
                                      int n_max, int hd_k, size_t kb, size_t vb, float scale, float *S, size_t ss) {
    const int KG = NQ <= 2 ? 4 : NQ <= 4 ? 2 : 1;
    const attn_v8f vscale = {scale, scale, scale, scale, scale, scale, scale, scale};
    for (int j = 0; j < n_max; j += KG) {
        const uint8_t *kr[4];
        ATTN_FN(attn_key_rows)(KG, j, n_max, k0, ks, v0, vs, kb, vb, kr);
        attn_v8f acc[8];
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) acc[s] = (attn_v8f){0};
        int i = 0;
        for (; i + 8 <= hd_k; i += 8) {
            attn_v8f kk[4];
#pragma GCC unroll 4
            for (int g = 0; g < KG; g++) kk[g] = ATTN_FN(attn_ld_row)(kr[g], i, 8, f32);
#pragma GCC unroll 8
            for (int s = 0; s < NQ; s++) {
                const attn_v8f qv = ATTN_FN(attn_ld)(PK ? qp + (size_t)i * NQ + 8 * s : q[s] + i);
#pragma GCC unroll 4
                for (int g = 0; g < KG; g++) acc[s * KG + g] += qv * kk[g];
            }
        }
        if (i < hd_k) {
            for (int g = 0; g < KG; g++) {
                const attn_v8f kk = ATTN_FN(attn_ld_row)(kr[g], i, hd_k - i, f32);
                for (int s = 0; s < NQ; s++) acc[s * KG + g] += ATTN_FN(attn_ld_part)(q[s] + i, hd_k - i) * kk;
            }
        }
        const attn_v8f sc = ATTN_FN(attn_reduce8)(acc) * vscale;
#pragma GCC unroll 8
        for (int s = 0; s < NQ; s++)
#pragma GCC unroll 4
            for (int g = 0; g < KG; g++)
                if (j + g < n_max) S[(size_t)s * ss + j + g] = sc[s * KG + g];
    }
}

/* A tile of NQ (1..8, a compile-time constant after inlining) queries; f32: the K/V element type.
 * S: NQ * max(n_kv) floats, query s's scores then probabilities at S[s * max(n_kv) + j]. The
 * tile runs in two steps, each its own function per (NQ, f32) (ATTN_TILE_DEF below): the scores
 * and their softmax (attn_tile_scores), then the softmax-weighted V sum (attn_tile_pv). */
typedef struct {
    const uint8_t *k0, *v0;   /* the kv head's first K and V row */
    size_t ks, vs;            /* K and V row strides in bytes */
    int n_max, n_min;         /* the tile's longest and shortest n_kv */
} ATTN_FN(attn_rows);

ATTN_INLINE ATTN_FN(attn_rows) ATTN_FN(attn_rows_of)(const int NQ, const bool f32, const int *n_kv, const blk_kv_view *kv,
                                                     int ikv) {
    const size_t elt = f32 ? 4 : 2;
    ATTN_FN(attn_rows) r = {(const uint8_t *)kv->k + (size_t)ikv * kv->k_head * elt,
                            (const uint8_t *)kv->v + (size_t)ikv * kv->v_head * elt, kv->k_stride * elt, kv->v_stride * elt,
                            0, INT_MAX};
    for (int s = 0; s < NQ; s++) {
        r.n_max = n_kv[s] > r.n_max ? n_kv[s] : r.n_max;
        r.n_min = n_kv[s] < r.n_min ? n_kv[s] : r.n_min;
    }
    return r;
}

ATTN_INLINE void ATTN_FN(attn_tile_scores)(const int NQ, const bool f32, const float *const *q, const int *n_kv,
                                            const blk_kv_view *kv, int ikv, int hd_k, int hd_v, float scale, float *S) {
    const size_t elt = f32 ? 4 : 2;
    const ATTN_FN(attn_rows) r = ATTN_FN(attn_rows_of)(NQ, f32, n_kv, kv, ikv);
    const uint8_t *k0 = r.k0, *v0 = r.v0;
    const size_t ks = r.ks, vs = r.vs;
    const int n_max = r.n_max;
    const size_t ss = (size_t)n_max;   /* row stride of S */
    /* A forward's weight stream has evicted the K/V rows: unprefetched, the first multiply of each
     * K row waits on memory. So the K row ATTN_PF_ROWS ahead and the V row of the same index are
     * prefetched while row j's scores are computed (the V rows, hd_v * elt bytes each, are read
     * after the softmax: n_kv * hd_v * elt bytes, which stay in a 1 MB L2 beside the K rows up to
     * ~1k positions of hd 128 in fp16 and come back from L3 past that). The distance is the
     * fastest measured on Zen 5: further ahead, or the V rows into L2 only, is slower. Bound: in
     * decode this stream runs below the weights' (on Zen 5 at 1024 positions ~29 GB/s against
     * ~45, bench/RESULTS.md host A), one kv head's rows at a time per thread. Hints only: no bit
     * changes. */
    const size_t kb = (size_t)hd_k * elt, vb = (size_t)hd_v * elt;
    for (int j = 0; j < ATTN_PF_ROWS && j < n_max; j++)
        for (size_t o = 0; o < kb; o += 64) __builtin_prefetch(k0 + (size_t)j * ks + o, 0, 3);
#ifdef ATTN_V16
    if (hd_k % 8 == 0 && NQ * hd_k <= ATTN_QP_MAX) {
        float qp2[2 * ATTN_QP_MAX];
        for (int i = 0; i < hd_k; i += 8)
            for (int s = 0; s < NQ; s++) {
                memcpy(qp2 + (size_t)i * 2 * NQ + 16 * s, q[s] + i, 8 * sizeof(float));
                memcpy(qp2 + (size_t)i * 2 * NQ + 16 * s + 8, q[s] + i, 8 * sizeof(float));
            }
        ATTN_FN(attn_scores16)(NQ, f32, qp2, k0, ks, v0, vs, n_max, hd_k, kb, vb, scale, S, ss);
    } else
#endif
    if (NQ * (hd_k / 8 * 8) <= ATTN_QP_MAX) {
        float qp[ATTN_QP_MAX];
        for (int i = 0; i + 8 <= hd_k; i += 8)
            for (int s = 0; s < NQ; s++) memcpy(qp + (size_t)i * NQ + 8 * s, q[s] + i, 8 * sizeof(float));
        ATTN_FN(attn_scores)(NQ, f32, true, q, qp, k0, ks, v0, vs, n_max, hd_k, kb, vb, scale, S, ss);
    } else {
        ATTN_FN(attn_scores)(NQ, f32, false, q, NULL, k0, ks, v0, vs, n_max, hd_k, kb, vb, scale, S, ss);
    }
#ifdef ATTN_V16
    for (int s = 0; s < NQ; s++) ATTN_FN(attn_softmax16)(S + (size_t)s * ss, n_kv[s]);
#else
    for (int s = 0; s < NQ; s++) ATTN_FN(attn_softmax)(S + (size_t)s * ss, n_kv[s]);
#endif
}

ATTN_INLINE void ATTN_FN(attn_tile_pv)(const int NQ, const bool f32, float *const *out, const int *n_kv,
                                        const blk_kv_view *kv, int ikv, int hd_v, const float *S) {
    const ATTN_FN(attn_rows) r = ATTN_FN(attn_rows_of)(NQ, f32, n_kv, kv, ikv);
    const uint8_t *v0 = r.v0;
    const size_t vs = r.vs;
    const int n_max = r.n_max, n_min = r.n_min;
    const size_t ss = (size_t)n_max;
    /* softmax-weighted V in blocks of ATTN_PV_ROWS rows (ATTN_PV_ROWS * hd_v * elt bytes, 8 KB
     * for hd_v 128 in fp16: held in L1 across the block's passes, so each V row is read from
     * memory once however many passes cover hd_v); per block, CG chunks of 8 output dims of every
     * query in registers (CG = 4 for 1-2 queries, 2 for 3-4, ATTN_CG_WIDE for 5-8), then the
     * chunks left one at a time. The outputs are the accumulators between blocks. Each block's
     * probabilities are first copied row-major (P), so the passes read them from one pointer. */
    const int CG = NQ <= 2 ? 4 : NQ <= 4 ? 2 : ATTN_CG_WIDE;
    for (int s = 0; s < NQ; s++) memset(out[s], 0, (size_t)hd_v * sizeof(float));
    for (int jb = 0; jb < n_max; jb += ATTN_PV_ROWS) {
        const int je = jb + ATTN_PV_ROWS < n_max ? jb + ATTN_PV_ROWS : n_max;
        /* the block's probabilities row-major, P[(j - jb) NQ + s]: for one query, S itself */
        float Pb[ATTN_PV_ROWS * 8];
        const float *P = S + jb;
        if (NQ > 1) {
            for (int j = jb; j < je; j++)
#pragma GCC unroll 8
                for (int s = 0; s < NQ; s++) Pb[(j - jb) * NQ + s] = S[(size_t)s * ss + j];
            P = Pb;
        }
        int i0 = 0;
#ifdef ATTN_V16
        /* as many chunks of 16 dims per pass as 16 accumulators allow (8 for 1-2 queries, 4 for
         * 3-4, 2 for 5-8, in the 32 registers): fewer passes over the block's V rows, each of
         * which widens them again (for hd_v 128 and 1-2 queries: one pass) */
        if (NQ <= 2)
            for (; i0 + 128 <= hd_v; i0 += 128) ATTN_FN(attn_pv_g16)(NQ, 8, f32, out, n_kv, n_min, jb, je, v0, vs, P, i0);
        if (NQ <= 4)
            for (; i0 + 64 <= hd_v; i0 += 64) ATTN_FN(attn_pv_g16)(NQ, 4, f32, out, n_kv, n_min, jb, je, v0, vs, P, i0);
        for (; i0 + 32 <= hd_v; i0 += 32) ATTN_FN(attn_pv_g16)(NQ, 2, f32, out, n_kv, n_min, jb, je, v0, vs, P, i0);
#endif
        if (CG > 1)
            for (; i0 + 8 * CG <= hd_v; i0 += 8 * CG)
                ATTN_FN(attn_pv_g)(NQ, NQ, CG, f32, out, n_kv, n_min, jb, je, v0, vs, P, i0);
        /* ATTN_PV_HALVES, 5-8 queries: the queries in two halves of at most 4, each with 2 chunks
         * in registers (8 accumulators beside 2 V chunks and a broadcast): every broadcast
         * probability serves 2 chunks instead of 1; the same adds per accumulator */
        if (ATTN_PV_HALVES && CG == 1 && NQ > 4) {
            const int NA = (NQ + 1) / 2;
            for (; i0 + 16 <= hd_v; i0 += 16) {
                ATTN_FN(attn_pv_g)(NA, NQ, 2, f32, out, n_kv, n_min, jb, je, v0, vs, P, i0);
                ATTN_FN(attn_pv_g)(NQ - NA, NQ, 2, f32, out + NA, n_kv + NA, n_min, jb, je, v0, vs, P + NA, i0);
            }
        }
        for (int i = i0; i < hd_v; i += 8) {
            if (i + 8 <= hd_v) ATTN_FN(attn_pv)(NQ, f32, out, n_kv, n_min, jb, je, v0, vs, P, i, 8);
            else ATTN_FN(attn_pv)(NQ, f32, out, n_kv, n_min, jb, je, v0, vs, P, i, hd_v - i);
        }
    }
}

/* Per tile width and element type, the two steps each as a function of its own (kept out of line),
 * so the compiler's passes that grow faster than linearly with a function's size (GCC's RTL GCSE
 * above all) see one step of one tile at a time rather than all sixteen tiles inlined into
 * blk_attn_tile; two calls cost nothing beside a tile's work. */
#define ATTN_TILE_DEF(N, F32, T)                                                                                       \
    static __attribute__((noinline)) void ATTN_FN(attn_sc_##N##T)(const float *const *q, const int *n_kv,             \
                                                                   const blk_kv_view *kv, int ikv, int hd_k, int hd_v, \
                                                                   float scale, float *S) {                            \
        ATTN_FN(attn_tile_scores)(N, F32, q, n_kv, kv, ikv, hd_k, hd_v, scale, S);                                     \
    }                                                                                                                  \
    static __attribute__((noinline)) void ATTN_FN(attn_pv_##N##T)(float *const *out, const int *n_kv,                 \
                                                                   const blk_kv_view *kv, int ikv, int hd_v,           \
                                                                   const float *S) {                                   \
        ATTN_FN(attn_tile_pv)(N, F32, out, n_kv, kv, ikv, hd_v, S);                                                    \
    }                                                                                                                  \
    static void ATTN_FN(attn_tile_##N##T)(const float *const *q, float *const *out, const int *n_kv,                  \
                                          const blk_kv_view *kv, int ikv, int hd_k, int hd_v, float scale, float *S) { \
        ATTN_FN(attn_sc_##N##T)(q, n_kv, kv, ikv, hd_k, hd_v, scale, S);                                               \
        ATTN_FN(attn_pv_##N##T)(out, n_kv, kv, ikv, hd_v, S);                                                          \
    }
#define ATTN_TILE_DEFS(N) ATTN_TILE_DEF(N, true, _f32) ATTN_TILE_DEF(N, false, _f16)
ATTN_TILE_DEFS(1)
ATTN_TILE_DEFS(2)
ATTN_TILE_DEFS(3)
ATTN_TILE_DEFS(4)
ATTN_TILE_DEFS(5)
ATTN_TILE_DEFS(6)
ATTN_TILE_DEFS(7)
ATTN_TILE_DEFS(8)

#define ATTN_CASE(N)                                                                                 \
    case N:                                                                                          \
        if (kv->f32) ATTN_FN(attn_tile_##N##_f32)(q, out, n_kv, kv, ikv, hd_k, hd_v, scale, scores); \
        else ATTN_FN(attn_tile_##N##_f16)(q, out, n_kv, kv, ikv, hd_k, hd_v, scale, scores);         \
        break;

void ATTN_FN(blk_attn_tile)(int nq, const float *const *q, float *const *out, const int *n_kv, const blk_kv_view *kv,
                            int ikv, int hd_k, int hd_v, float scale, float *scores) {
    switch (nq) {
        ATTN_CASE(1)
        ATTN_CASE(2)
        ATTN_CASE(3)
        ATTN_CASE(4)
        ATTN_CASE(5)
        ATTN_CASE(6)
        ATTN_CASE(7)
        ATTN_CASE(8)
    default: TERN_ASSERT(nq >= 1 && nq <= BLK_ATTN_NQ);
    }
}

#undef ATTN_CASE
#undef ATTN_TILE_DEF
#undef ATTN_TILE_DEFS
#undef ATTN_INLINE
#undef ATTN_PF_ROWS
#undef ATTN_PV_ROWS
#undef ATTN_CG_WIDE
#undef ATTN_PV_HALVES
#undef ATTN_QP_MAX
#undef ATTN_FN
#undef ATTN_CAT
#undef ATTN_CAT2
