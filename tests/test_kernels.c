/* test_kernels.c: the kernel oracle tests.
 * 1. ref itself is right: ref equals an independent naive decode (written here from the spec's
 *    tables, not from ref.c) times the dequantised activation, in double, within a derived
 *    rounding bound; the ggml order equals an independent transcription of spec 8.2 bit for bit;
 *    the activation quantisers follow their rounding rules (exact cases and ties).
 * 2. every ISA table the host can run equals ref EXACTLY: the int32 of every (row, unit) (test
 *    hook) and the float bits, for the shapes the model uses (batch widths 1..64, rows 4/8/12/13 and
 *    N % 4 == 1 tails incl. a 151669-row vocabulary, K = 128 .. 17408) and special values (zero
 *    weights/activations, constants, +-127, code 3, denormal and zero scales).
 * 3. column c of a matmul equals a matvec of column c; row splits do not change a bit.
 * 4. shapes a kernel does not accept are rejected with an error.
 * Seeds are fixed; the suite runs in a few seconds. */
#include "test.h"
#include "model_fx.h"

#include "core/core.h"
#include "core/fp16.h"
#include "kernels/kern_impl.h"
#include "runtime/pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- deterministic RNG --------------------------------------------------------------------- */
static uint64_t rng_s = 1;
static void rng_seed(uint64_t s) { rng_s = s * 0x9E3779B97F4A7C15ull + 1; }
static uint32_t rng_u32(void) {
    rng_s ^= rng_s << 13; rng_s ^= rng_s >> 7; rng_s ^= rng_s << 17;
    return (uint32_t)(rng_s >> 16);
}
static float rng_f(void) { return (float)(rng_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }   /* [-1, 1) */

/* ---- independent decoders (from spec/ternary-gguf.md 3, element by element) ----------------- */
static double fp16_val(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    const double v = e == 0 ? ldexp(m, -24) : ldexp(m + 1024, e - 25);
    return s ? -v : v;
}
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static int trit_digit(uint8_t b, int n) {            /* v_{n+1} = 3 v_n mod 256; u = 3v >> 8 */
    unsigned v = b;
    for (int i = 0; i < n; i++) v = (3 * v) & 255;
    return (int)((3 * v) >> 8);
}
/* w[0 .. K-1] of row r of a tensor in FILE layout, in double. */
static void naive_row(int type, const uint8_t *file, int64_t K, int64_t r, double *w) {
    switch (type) {
    case QT_F32: for (int64_t k = 0; k < K; k++) { float f; memcpy(&f, file + (r * K + k) * 4, 4); w[k] = f; } return;
    case QT_F16: for (int64_t k = 0; k < K; k++) w[k] = fp16_val(le16(file + (r * K + k) * 2)); return;
    case QT_BF16: for (int64_t k = 0; k < K; k++) { uint32_t u = (uint32_t)le16(file + (r * K + k) * 2) << 16; float f; memcpy(&f, &u, 4); w[k] = f; } return;
    default: break;
    }
    const int bs = kern_block_size(type), bb = kern_block_bytes(type);
    for (int64_t b = 0; b < K / bs; b++) {
        const uint8_t *blk = file + (r * (K / bs) + b) * bb;
        double *o = w + b * bs;
        for (int e = 0; e < bs; e++) {
            double d, t;
            switch (type) {
            case QT_PQ2_0: case QT_Q2_0:
                d = fp16_val(le16(blk)); t = ((blk[2 + e / 4] >> (2 * (e % 4))) & 3) - 1; break;
            case QT_PTQ1_0:
                d = fp16_val(le16(blk + 26));
                if (e < 80) t = trit_digit(blk[e % 16], e / 16) - 1;
                else if (e < 120) t = trit_digit(blk[16 + (e - 80) % 8], (e - 80) / 8) - 1;
                else t = trit_digit(blk[24 + (e - 120) % 2], (e - 120) / 2) - 1;
                break;
            case QT_TQ1_0:
                d = fp16_val(le16(blk + 52));
                if (e < 160) t = trit_digit(blk[e % 32], e / 32) - 1;
                else if (e < 240) t = trit_digit(blk[32 + (e - 160) % 16], (e - 160) / 16) - 1;
                else t = trit_digit(blk[48 + (e - 240) % 4], (e - 240) / 4) - 1;
                break;
            case QT_TQ2_0: {
                const int h = e / 128, l = (e % 128) / 32, m = e % 32;
                d = fp16_val(le16(blk + 64)); t = ((blk[32 * h + m] >> (2 * l)) & 3) - 1; break;
            }
            case QT_Q1_0: d = fp16_val(le16(blk)); t = ((blk[2 + e / 8] >> (e % 8)) & 1) ? 1 : -1; break;
            case QT_Q8_0: d = fp16_val(le16(blk)); t = (int8_t)blk[2 + e]; break;
            default: fail_msg("naive_row: type %d", type); return;
            }
            o[e] = d * t;
        }
    }
}

/* ---- fixtures -------------------------------------------------------------------------------- */
enum { WP_RANDOM, WP_CODE3, WP_ZERO_W, WP_CONST, WP_ALL3, WP_DENORM, WP_ZERO_SCALE };
enum { AP_RANDOM, AP_ZERO, AP_CONST, AP_PM127, AP_TINY };

static uint16_t gen_scale(int wp) {
    if (wp == WP_DENORM) return (uint16_t)(1 + rng_u32() % 1023);          /* fp16 subnormals */
    if (wp == WP_ZERO_SCALE && rng_u32() % 2) return (uint16_t)(rng_u32() % 2 ? 0x8000 : 0);
    return f32_to_fp16(0.001f + 0.05f * (rng_f() + 1.0f));
}

/* N rows x K values of `type` in file layout (malloc'd, caller frees). */
static uint8_t *gen_weights(int type, int64_t K, int64_t N, int wp, size_t *bytes_out) {
    const int bs = kern_block_size(type), bb = kern_block_bytes(type);
    const size_t bytes = (size_t)(K / bs) * bb * N;
    uint8_t *p = malloc(bytes);
    assert_non_null(p);
    if (bs == 1) {
        for (int64_t i = 0; i < K * N; i++) {
            float v = wp == WP_ZERO_W ? 0.0f : wp == WP_CONST ? 0.25f : rng_f();
            if (type == QT_F32) memcpy(p + 4 * i, &v, 4);
            else {
                uint16_t h = type == QT_F16 ? f32_to_fp16(v) : f32_to_bf16(v);
                p[2 * i] = (uint8_t)h; p[2 * i + 1] = (uint8_t)(h >> 8);
            }
        }
        *bytes_out = bytes;
        return p;
    }
    const int doff = (type == QT_PTQ1_0) ? 26 : (type == QT_TQ1_0) ? 52 : (type == QT_TQ2_0) ? 64 : 0;
    const int qoff = doff == 0 ? 2 : 0, qlen = bb - 2;
    for (size_t o = 0; o < bytes; o += bb) {
        uint8_t *q = p + o + qoff;
        for (int j = 0; j < qlen; j++) {
            uint8_t v = (uint8_t)rng_u32();
            const bool two_bit = type == QT_PQ2_0 || type == QT_Q2_0 || type == QT_TQ2_0;
            if (two_bit) {
                /* codes 0..2 (or 0..3 with code 3) */
                v = 0;
                for (int s = 0; s < 4; s++) {
                    int c = (int)(rng_u32() % (wp == WP_CODE3 ? 4 : 3));
                    if (wp == WP_ZERO_W) c = 1;
                    if (wp == WP_CONST) c = 2;
                    if (wp == WP_ALL3) c = 3;
                    v |= (uint8_t)(c << (2 * s));
                }
            } else if (wp == WP_ZERO_W) {
                v = type == QT_PTQ1_0 || type == QT_TQ1_0 ? (j < qlen - (type == QT_PTQ1_0 ? 2 : 4) ? 0x80 : 0x7f)
                    : type == QT_Q8_0 ? 0 : v;
            } else if (wp == WP_CONST || wp == WP_ALL3) {
                v = type == QT_Q8_0 ? (wp == WP_ALL3 ? 0x80 : 0x7f) : 0xff;   /* Q8_0: -128 / 127; trits all +1; Q1_0 all +1 */
            }
            q[j] = v;
        }
        const uint16_t d = gen_scale(wp);
        p[o + doff] = (uint8_t)d; p[o + doff + 1] = (uint8_t)(d >> 8);
    }
    *bytes_out = bytes;
    return p;
}

static float *gen_act(int64_t K, int ncols, int ap) {
    float *x = malloc(sizeof(float) * (size_t)(K * ncols));
    assert_non_null(x);
    for (int64_t i = 0; i < K * ncols; i++) {
        switch (ap) {
        case AP_ZERO: x[i] = 0.0f; break;
        case AP_CONST: x[i] = 0.75f; break;
        case AP_PM127: x[i] = (i % 3 == 0) ? -3.0f : 3.0f; break;            /* q = +-127 exactly */
        case AP_TINY: x[i] = rng_f() * 1e-39f; break;                        /* f32 subnormals */
        default: x[i] = rng_f() * (1.0f + (float)(i % 7)); break;
        }
    }
    return x;
}

typedef struct {
    int type; int64_t K, N; int ncols;
    uint8_t *file;          /* original file bytes (kept for the naive oracle) */
    uint8_t *data;          /* prepared (repacked) copy */
    kern_w w;
    float *x; void *q[3];
    kern_act act[3];
} fixture;

static void fx_make(fixture *f, int type, int64_t K, int64_t N, int ncols, int wp, int ap, unsigned flags) {
    memset(f, 0, sizeof *f);
    f->type = type; f->K = K; f->N = N; f->ncols = ncols;
    size_t bytes;
    f->file = gen_weights(type, K, N, wp, &bytes);
    f->data = malloc(bytes);
    assert_non_null(f->data);
    memcpy(f->data, f->file, bytes);
    tern_err err = {0};
    assert_int_equal(kern_w_init_ex(&f->w, "test", type, f->data, K, N, flags, &err), TERN_OK);
    f->x = gen_act(K, ncols, ap);
    for (int m = 0; m < 3; m++) {
        const size_t qb = kern_act_bytes((kern_numerics)m, K, ncols);
        f->q[m] = qb ? tern_alloc_aligned(qb) : NULL;
        f->act[m] = (kern_act){.x = f->x, .q = f->q[m], .K = K, .ncols = ncols, .mode = (kern_numerics)m};
        kern_quantize(&f->act[m]);
    }
}

static void fx_free(fixture *f) {
    kern_w_free(&f->w);
    for (int m = 0; m < 3; m++) tern_free_aligned(f->q[m]);
    free(f->x); free(f->file); free(f->data);
}

/* Dequantised activation value of column c, element k in mode m (double). */
static double act_val(const fixture *f, int m, int c, int64_t k) {
    if (m == KQ_F32 || kern_block_size(f->type) == 1) {   /* float weights read x in every mode */
        float v = f->x[c * f->K + k];
        if (f->type == QT_BF16) v = bf16_to_f32(f32_to_bf16(v));
        return v;
    }
    const uint8_t *col = (const uint8_t *)f->q[m] + kern_act_col_bytes((kern_numerics)m, f->K) * (size_t)c;
    if (m == KQ_FAST) {
        const kact_fast *b = (const kact_fast *)(const void *)col + k / 128;
        return (double)b->qs[k % 128] * b->d;
    }
    const kact_ggml *b = (const kact_ggml *)(const void *)col + k / 32;
    return (double)b->qs[k % 32] * fp16_val(b->d);
}

/* ---- 1. ref is right --------------------------------------------------------------------------- */

/* The rounding bound of ref against the exact sum: every unit's isum is exact; s = d_w * d_a
 * costs one rounding (rel. u = 2^-24), each of the n_units fused accumulations one more
 * rounding of at most u * |partial sum| <= u * S, S = sum_k |w_k a_k|. So
 * |ref - exact| <= (n_units + 2) * u * S (+ u * S for the ggml's nested block sums). Float
 * paths: each lane's fmaf chain and the 4-level tree: (K/16 + 4 + 1) * u * S. Subnormal
 * results add at most n_ops * 2^-149 absolute. */
static void check_ref_vs_naive(fixture *f) {
    double *w = malloc(sizeof(double) * (size_t)f->K);
    float *y = malloc(sizeof(float) * (size_t)(f->N * f->ncols));
    for (int m = 0; m < 3; m++) {
        kern_matmul_table(&kern_table_ref, &f->w, &f->act[m], y, f->N, 0, f->N, NULL);
        const int unit = kern_unit(&f->w, (kern_numerics)m);
        const double n_ops = unit ? (double)(f->K / unit) + 3 : (double)f->K / 16 + 5;
        for (int64_t r = 0; r < f->N; r++) {
            naive_row(f->type, f->file, f->K, r, w);
            for (int c = 0; c < f->ncols; c++) {
                double exact = 0, S = 0;
                for (int64_t k = 0; k < f->K; k++) {
                    const double p = w[k] * act_val(f, m, c, k);
                    exact += p; S += fabs(p);
                }
                /* subnormal products d_w * d_a lose relative precision: up to 2^-150 absolute,
                 * times |isum| < 2^21, per unit */
                const double bound = n_ops * ldexp(1, -24) * S + n_ops * ldexp(1, -149 + 21);
                const double got = y[c * f->N + r];
                if (!(fabs(got - exact) <= bound))
                    fail_msg("ref vs naive: type %d mode %d K=%lld r=%lld c=%d: got %.9g exact %.9g bound %.3g", f->type, m,
                             (long long)f->K, (long long)r, c, got, exact, bound);
            }
        }
    }
    free(w); free(y);
}

static void test_ref_vs_naive(void **state) {
    (void)state;
    static const int types[] = {QT_PQ2_0, QT_Q2_0, QT_PTQ1_0, QT_TQ1_0, QT_TQ2_0, QT_Q1_0, QT_Q8_0};
    rng_seed(11);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int wp = WP_RANDOM; wp <= WP_ZERO_SCALE; wp++) {
            fixture f;
            fx_make(&f, types[ti], 512, 13, 3, wp, wp % 5, 0);
            check_ref_vs_naive(&f);
            fx_free(&f);
        }
    /* float weights, including the stories260K shapes K = 64 and 172 (not a multiple of 16) */
    static const int ftypes[] = {QT_F32, QT_F16, QT_BF16};
    static const int64_t fK[] = {64, 172, 768, 5};
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ki = 0; ki < 4; ki++) {
            fixture f;
            fx_make(&f, ftypes[ti], fK[ki], 9, 2, WP_RANDOM, AP_RANDOM, 0);
            check_ref_vs_naive(&f);
            fx_free(&f);
        }
    /* PTQ1_0 transcoded and PQ2_0 kept in file layout decode the same */
    fixture f;
    fx_make(&f, QT_PTQ1_0, 256, 9, 2, WP_RANDOM, AP_RANDOM, KW_F_PTQ1_0_TRANSCODE);
    check_ref_vs_naive(&f);
    fx_free(&f);
    fx_make(&f, QT_PQ2_0, 256, 9, 2, WP_CODE3, AP_RANDOM, KW_F_KEEP_FILE);
    check_ref_vs_naive(&f);
    fx_free(&f);
}

/* spec 8.2 transcribed independently (file layout, fmaf as the x86 build contracts it) must
 * equal ref's ggml mode bit for bit. */
static void test_ggml_order(void **state) {
    (void)state;
    rng_seed(5);
    fixture f;
    fx_make(&f, QT_PQ2_0, 1024, 8, 2, WP_CODE3, AP_RANDOM, 0);
    float y[16];
    kern_matmul_table(&kern_table_ref, &f.w, &f.act[KQ_GGML], y, 8, 0, 8, NULL);
    for (int c = 0; c < 2; c++)
        for (int r = 0; r < 8; r++) {
            float total = 0.0f;
            for (int b = 0; b < 8; b++) {
                const uint8_t *blk = f.file + (r * 8 + b) * 34;
                float acc = 0.0f;
                for (int k = 0; k < 4; k++) {
                    const kact_ggml *yb = (const kact_ggml *)f.q[KQ_GGML] + c * 32 + b * 4 + k;
                    int32_t isum = 0;
                    for (int j = 0; j < 32; j++) {
                        const int e = 32 * k + j;
                        isum += (((blk[2 + e / 4] >> (2 * (e % 4))) & 3) - 1) * yb->qs[j];
                    }
                    acc = fmaf(fp16_to_f32(yb->d), (float)isum, acc);
                }
                total = fmaf(fp16_to_f32(le16(blk)), acc, total);
            }
            assert_true(tern_f32_bits(total) == tern_f32_bits(y[c * 8 + r]));
        }
    fx_free(&f);
}

static void test_quantize_rules(void **state) {
    (void)state;
    /* fast: integers with amax 127 are exact; ties round to even (x * 1.0 = k + 0.5) */
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = (float)((i % 255) - 127);
    x[3] = 2.5f; x[4] = 3.5f; x[5] = -2.5f; x[6] = -0.5f; x[7] = 126.5f;
    kact_fast fb[2];
    kern_act a = {.x = x, .q = fb, .K = 256, .ncols = 1, .mode = KQ_FAST};
    kern_quantize(&a);
    assert_true(fb[0].d == 1.0f);
    assert_int_equal(fb[0].qs[3], 2); assert_int_equal(fb[0].qs[4], 4); assert_int_equal(fb[0].qs[5], -2);
    assert_int_equal(fb[0].qs[6], 0); assert_int_equal(fb[0].qs[7], 126); assert_int_equal(fb[0].qs[0], -127);
    for (int b = 0; b < 2; b++) {
        int tot = 0;
        for (int g = 0; g < 8; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += fb[b].qs[16 * g + i];
            assert_int_equal(fb[b].bsums[g], s);
            tot += s;
        }
        assert_int_equal(fb[b].sum, tot);
        assert_int_equal(fb[b].nsum[0], -tot);
        assert_int_equal(fb[b].nsum[1], 0); assert_int_equal(fb[b].nsum[2], 0); assert_int_equal(fb[b].nsum[3], 0);
    }
    /* ggml: d = amax / 127 as fp16, id = 127 / amax, half to even; partial last block zero-padded */
    float g[40];
    for (int i = 0; i < 40; i++) g[i] = (float)(i - 20) * 0.01f;
    g[0] = -2.54f;                                                     /* amax of block 0 */
    kact_ggml gb[2];
    kern_act ag = {.x = g, .q = gb, .K = 40, .ncols = 1, .mode = KQ_GGML};
    kern_quantize(&ag);
    assert_int_equal(gb[0].d, f32_to_fp16(2.54f / 127.0f));
    const float id = 127.0f / 2.54f;
    for (int i = 0; i < 32; i++) assert_int_equal(gb[0].qs[i], (int)nearbyintf(g[i] * id));
    for (int i = 8; i < 32; i++) assert_int_equal(gb[1].qs[i], 0);
    /* all-zero block: d = 0 and q = 0 */
    float z[32] = {0};
    kern_act az = {.x = z, .q = gb, .K = 32, .ncols = 1, .mode = KQ_GGML};
    kern_quantize(&az);
    assert_int_equal(gb[0].d, 0);
    for (int i = 0; i < 32; i++) assert_int_equal(gb[0].qs[i], 0);
    /* non-finite activations quantise to something defined (no UB): inf -> amax inf, id 0 */
    float nf[32] = {0};
    nf[1] = INFINITY; nf[2] = -1.0f; nf[3] = NAN;
    kern_act an = {.x = nf, .q = gb, .K = 32, .ncols = 1, .mode = KQ_GGML};
    kern_quantize(&an);
    for (int i = 0; i < 32; i++) assert_int_equal(gb[0].qs[i], 0);
    /* every |x| <= amax quantises within half a step */
    rng_seed(3);
    float r[128];
    for (int i = 0; i < 128; i++) r[i] = rng_f() * 3.0f;
    kern_act ar = {.x = r, .q = fb, .K = 128, .ncols = 1, .mode = KQ_FAST};
    kern_quantize(&ar);
    for (int i = 0; i < 128; i++) assert_true(fabs((double)fb[0].qs[i] * fb[0].d - r[i]) <= 0.5 * fb[0].d * (1 + 1e-6));
}

/* The row-pair layout exactly as kern_impl.h states it (the ARM engineer's contract). */
static void test_rowpair_layout(void **state) {
    (void)state;
    rng_seed(9);
    fixture f;
    fx_make(&f, QT_PQ2_0, 256, 9, 1, WP_CODE3, AP_RANDOM, KW_F_ROWPAIR);
    assert_int_equal(f.w.layout, KW_ROWPAIR);
    assert_true(f.w.has_code3);
    for (int g = 0; g < 2; g++)
        for (int b = 0; b < 2; b++) {
            const kern_rp_block *rp = (const kern_rp_block *)(const void *)f.data + g * 2 + b;
            for (int rr = 0; rr < 4; rr++)
                assert_int_equal(rp->d[rr], le16(f.file + ((4 * g + rr) * 2 + b) * 34));
            for (int p = 0; p < 2; p++)
                for (int wd = 0; wd < 4; wd++)
                    for (int j = 0; j < 16; j++)
                        for (int s = 0; s < 4; s++) {
                            const int row = 4 * g + 2 * p + (j >= 8), k = 32 * wd + 8 * s + (j & 7);
                            const uint8_t *blk = f.file + (row * 2 + b) * 34;
                            assert_int_equal((rp->qs[p][wd][j] >> (2 * s)) & 3, (blk[2 + k / 4] >> (2 * (k % 4))) & 3);
                        }
        }
    /* the tail row (8) keeps its file bytes */
    assert_memory_equal(f.data + 8 * 68, f.file + 8 * 68, 68);
    /* kern_w_row_f32 on both kinds of rows */
    double w[256];
    float wf[256];
    for (int r = 0; r < 9; r++) {
        naive_row(QT_PQ2_0, f.file, 256, r, w);
        kern_w_row_f32(&f.w, r, wf);
        for (int k = 0; k < 256; k++) assert_true((double)wf[k] == w[k]);
    }
    fx_free(&f);
    assert_int_equal(kern_w_bytes(&f.w), 9 * 2 * 34);
    /* no code 3 -> has_code3 false */
    fx_make(&f, QT_PQ2_0, 128, 4, 1, WP_RANDOM, AP_RANDOM, 0);
    assert_false(f.w.has_code3);
    fx_free(&f);
}

/* The 16-row layout exactly as kern_impl.h states it: 2 groups, 3 blocks, 5 file-layout tail
 * rows; the PTQ1_0 transcode into it (the same trits) and the default layout per table. */
static void test_row16_layout(void **state) {
    (void)state;
    rng_seed(10);
    enum { K = 384, N = 37, NB = K / 128 };
    fixture f;
    fx_make(&f, QT_PQ2_0, K, N, 1, WP_CODE3, AP_RANDOM, KW_F_ROW16);
    assert_int_equal(f.w.layout, KW_ROW16);
    assert_int_equal(kern_w_grouped_rows(&f.w), 32);
    for (int g = 0; g < 2; g++)
        for (int b = 0; b < NB; b++) {
            const kern_r16_block *rb = (const kern_r16_block *)(const void *)f.data + g * NB + b;
            for (int i = 0; i < 16; i++) {
                const uint8_t *blk = f.file + ((16 * g + i) * NB + b) * 34;
                assert_int_equal(rb->d[i], le16(blk));
                for (int j = 0; j < 8; j++)
                    for (int t = 0; t < 4; t++)
                        for (int s = 0; s < 4; s++) {
                            const int k = 16 * j + 4 * s + t;
                            assert_int_equal((rb->qs[j][i][t] >> (2 * s)) & 3, (blk[2 + k / 4] >> (2 * (k % 4))) & 3);
                        }
            }
        }
    assert_memory_equal(f.data + 32 * NB * 34, f.file + 32 * NB * 34, 5 * NB * 34);   /* tail rows 32..36 */
    double w[K];
    float wf[K];
    for (int r = 0; r < N; r++) {
        naive_row(QT_PQ2_0, f.file, K, r, w);
        kern_w_row_f32(&f.w, r, wf);
        for (int k = 0; k < K; k++) assert_true((double)wf[k] == w[k]);
    }
    assert_int_equal(kern_w_bytes(&f.w), N * NB * 34);
    fx_free(&f);
    /* PTQ1_0 transcoded: rows 0..31 from aux (checked through kern_w_row_f32), 5 tail rows */
    fx_make(&f, QT_PTQ1_0, K, N, 1, WP_RANDOM, AP_RANDOM, KW_F_PTQ1_0_TRANSCODE | KW_F_ROW16);
    assert_int_equal(f.w.layout, KW_PTQ_ROW16);
    assert_int_equal(kern_w_bytes(&f.w), 2 * NB * 544 + 5 * NB * 28);
    for (int r = 0; r < N; r++) {
        naive_row(QT_PTQ1_0, f.file, K, r, w);
        kern_w_row_f32(&f.w, r, wf);
        for (int k = 0; k < K; k++) assert_true((double)wf[k] == w[k]);
    }
    fx_free(&f);
    /* PTQ1_0 direct: the base-3 bytes regrouped in place (kern_impl.h "PTQ1_0 base-3 16-row
     * layout"), tail rows 32..36 as in the file */
    fx_make(&f, QT_PTQ1_0, K, N, 1, WP_RANDOM, AP_RANDOM, KW_F_PTQ1_0_DIRECT | KW_F_ROW16);
    assert_int_equal(f.w.layout, KW_PTQ3_ROW16);
    assert_int_equal(kern_w_grouped_rows(&f.w), 32);
    for (int g = 0; g < 2; g++)
        for (int b = 0; b < NB; b++) {
            const kern_r16t_block *rb = (const kern_r16t_block *)(const void *)f.data + g * NB + b;
            for (int i = 0; i < 16; i++) {
                const uint8_t *blk = f.file + ((16 * g + i) * NB + b) * 28;
                assert_int_equal(rb->d[i], le16(blk + 26));
                for (int e = 0; e < 128; e++) {   /* element e's byte and digit, from the spec's table */
                    const int n = e < 80 ? e / 16 : e < 120 ? (e - 80) / 8 : (e - 120) / 2;
                    const uint8_t fb = e < 80 ? blk[e % 16] : e < 120 ? blk[16 + (e - 80) % 8] : blk[24 + (e - 120) % 2];
                    const uint8_t lb = e < 80 ? rb->qa[(e % 16) / 4][i][e % 4]
                                       : e < 120 ? rb->qb[((e - 80) % 8) / 4][i][(e - 80) % 4]
                                                 : rb->qh[i][(e - 120) % 2];
                    assert_int_equal(trit_digit(lb, n), trit_digit(fb, n));
                    assert_int_equal(lb, fb);
                }
            }
        }
    assert_memory_equal(f.data + 32 * NB * 28, f.file + 32 * NB * 28, 5 * NB * 28);
    for (int r = 0; r < N; r++) {
        naive_row(QT_PTQ1_0, f.file, K, r, w);
        kern_w_row_f32(&f.w, r, wf);
        for (int k = 0; k < K; k++) assert_true((double)wf[k] == w[k]);
    }
    fx_free(&f);
    /* no flag: the active table's layout */
    fx_make(&f, QT_PQ2_0, K, N, 1, WP_RANDOM, AP_RANDOM, 0);
    assert_int_equal(f.w.layout, kern_active()->row16 ? KW_ROW16 : KW_ROWPAIR);
    fx_free(&f);
}

/* ---- 2. every ISA table equals ref exactly ------------------------------------------------------ */


static int g_isa_cases;

static void compare_tables(fixture *f, const char *what) {
    for (int m = 0; m < 3; m++) {
        const int kt = kern_type_index(f->type);
        const int unit = kern_unit(&f->w, (kern_numerics)m);
        const int64_t nu = unit ? f->K / unit : 0;
        const size_t ny = (size_t)(f->N * f->ncols), ni = (size_t)(ny * (size_t)(nu ? nu : 1));
        float *y0 = malloc(ny * 4), *y1 = malloc(ny * 4);
        int32_t *i0 = unit ? malloc(ni * 4) : NULL, *i1 = unit ? malloc(ni * 4) : NULL;
        kern_matmul_table(&kern_table_ref, &f->w, &f->act[m], y0, f->N, 0, f->N, i0);
        for (int ti = 0; mfx_kern_table(ti); ti++) {
            const kern_table *const *t = &(const kern_table *){mfx_kern_table(ti)};
            if (*t == &kern_table_ref || !(*t)->mm[kt][m]) continue;
            if (((*t)->needs & kern_cpu_features()) != (*t)->needs) continue;   /* host cannot run it */
            memset(y1, 0xff, ny * 4);
            if (i1) memset(i1, 0xa5, ni * 4);
            kern_matmul_table(*t, &f->w, &f->act[m], y1, f->N, 0, f->N, i1);
            g_isa_cases++;
            if (i1) {
                for (size_t i = 0; i < ni; i++)
                    if (i0[i] != i1[i])
                        fail_msg("%s: %s type %d mode %d K=%lld N=%lld ncols=%d: isum[%zu] %d != ref %d", what, (*t)->name,
                                 f->type, m, (long long)f->K, (long long)f->N, f->ncols, i, i1[i], i0[i]);
            }
            for (size_t i = 0; i < ny; i++)
                if (tern_f32_bits(y0[i]) != tern_f32_bits(y1[i]))
                    fail_msg("%s: %s type %d mode %d K=%lld N=%lld ncols=%d: y[%zu] %.9g != ref %.9g", what, (*t)->name,
                             f->type, m, (long long)f->K, (long long)f->N, f->ncols, i, y1[i], y0[i]);
        }
        free(y0); free(y1); free(i0); free(i1);
    }
}

static void run_shapes(int type, unsigned flags) {
    static const int64_t Ks[] = {128, 256, 512, 1024, 5120, 17408};
    static const int cols[] = {1, 2, 3, 4, 5, 7, 8, 16, 64};
    static const int64_t rows_small[] = {4, 8, 12, 13, 17};
    static const int64_t rows_big[] = {4, 13};
    char what[64];
    for (size_t ki = 0; ki < 6; ki++) {
        const int64_t K = Ks[ki];
        if (K % kern_block_size(type) != 0) continue;
        const bool big = K >= 5120;
        const int64_t *rows = big ? rows_big : rows_small;
        const size_t nr = big ? 2 : 5;
        for (size_t ri = 0; ri < nr; ri++)
            for (size_t ci = 0; ci < 9; ci++) {
                if (big && cols[ci] > 16 && rows[ri] > 4) continue;    /* keep the suite fast */
                const int wp = (int)((ki + ri + ci) % 7), ap = (int)((ki * 3 + ci) % 5);
                fixture f;
                fx_make(&f, type, K, rows[ri], cols[ci], wp, ap, flags);
                snprintf(what, sizeof what, "shape wp=%d ap=%d", wp, ap);
                compare_tables(&f, what);
                fx_free(&f);
            }
    }
}

static void test_isa_pq2_0(void **state) {
    (void)state;
    rng_seed(21);
    run_shapes(QT_PQ2_0, KW_F_ROWPAIR);
    run_shapes(QT_PQ2_0, KW_F_ROW16);
}
/* The 16-row tiles of 2..16 columns (x86 AVX-512: a GFNI unpack where the CPU has it, and from
 * 9 columns their own column addressing), at widths the shapes above do not reach (9..15, and
 * 17 = 9 + 8, 31 = 16 + 15 in tiles) and some they do; where the host has GFNI, again with it
 * hidden, so the AVX-512 tiles that shift and mask run here too. */
static void test_isa_pq2_0_tile_widths(void **state) {
    (void)state;
    rng_seed(24);
    static const int64_t Ks[] = {256, 1024, 5120};
    static const int cols[] = {2, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 17, 31};
    enum { NCOLS = sizeof cols / sizeof cols[0] };
    char what[64];
    for (int hide = 0; hide < 2; hide++) {
        if (hide && !(kern_cpu_features() & KCPU_GFNI)) break;
        kern_cpu_hide(hide ? KCPU_GFNI : 0);
        for (size_t ki = 0; ki < 3; ki++)
            for (size_t ci = 0; ci < NCOLS; ci++) {
                const int64_t N = ki == 2 ? 20 : 33;   /* two groups and a tail row; one group and 4 rows */
                const int wp = (int)((ki + ci) % 7), ap = (int)((ki * 3 + ci) % 5);
                fixture f;
                fx_make(&f, QT_PQ2_0, Ks[ki], N, cols[ci], wp, ap, KW_F_ROW16);
                snprintf(what, sizeof what, "tile widths%s wp=%d ap=%d", hide ? " (GFNI hidden)" : "", wp, ap);
                compare_tables(&f, what);
                fx_free(&f);
            }
    }
    kern_cpu_hide(0);
}
static void test_isa_ptq1_0_direct(void **state) {
    (void)state;
    rng_seed(22);
    run_shapes(QT_PTQ1_0, KW_F_PTQ1_0_DIRECT | KW_F_ROWPAIR);   /* the file layout */
    run_shapes(QT_PTQ1_0, KW_F_PTQ1_0_DIRECT | KW_F_ROW16);     /* KW_PTQ3_ROW16 */
}
static void test_isa_ptq1_0_transcode(void **state) {
    (void)state;
    rng_seed(23);
    run_shapes(QT_PTQ1_0, KW_F_PTQ1_0_TRANSCODE | KW_F_ROWPAIR);
    run_shapes(QT_PTQ1_0, KW_F_PTQ1_0_TRANSCODE | KW_F_ROW16);
    fixture f;                      /* bytes streamed: 2 row-pair groups x 2 blocks + 1 tail row */
    fx_make(&f, QT_PTQ1_0, 256, 9, 1, WP_RANDOM, AP_RANDOM, KW_F_PTQ1_0_TRANSCODE | KW_F_ROWPAIR);
    assert_int_equal(f.w.layout, KW_PTQ_ROWPAIR);
    assert_int_equal(kern_w_bytes(&f.w), 2 * 2 * 136 + 2 * 28);
    fx_free(&f);
    fx_make(&f, QT_PTQ1_0, 256, 9, 1, WP_RANDOM, AP_RANDOM, KW_F_PTQ1_0_DIRECT | KW_F_ROWPAIR);
    assert_int_equal(f.w.layout, KW_FILE);
    assert_int_equal(kern_w_bytes(&f.w), 9 * 2 * 28);
    fx_free(&f);
    fx_make(&f, QT_PTQ1_0, 256, 21, 1, WP_RANDOM, AP_RANDOM, KW_F_PTQ1_0_DIRECT | KW_F_ROW16);
    assert_int_equal(f.w.layout, KW_PTQ3_ROW16);
    assert_null(f.w.aux);
    assert_int_equal(kern_w_bytes(&f.w), 21 * 2 * 28);   /* regrouped in place: the file's bytes */
    fx_free(&f);
}

/* The 16-row layouts (PQ2_0 KW_ROW16, the PTQ1_0 transcode KW_PTQ_ROW16 and direct KW_PTQ3_ROW16) on every table (the
 * AVX-512 VNNI kernel, its emulation, AVX2, AVX-VNNI and AMX): every column count 1..16 (each
 * tile width, and 9..16 split into two tiles), 17, 24, 64 and 137 (the AMX kernel's two column
 * passes, 128 + 9); N with 1..3 full groups and tails
 * of 0, 4, 5, 15 rows; codes 3 and activations at +-127 among the patterns. */
static void test_isa_row16(void **state) {
    (void)state;
    rng_seed(27);
    static const int64_t Ks[] = {128, 640, 5120};
    static const int64_t Ns[] = {16, 21, 32, 47, 52};
    static const int cols[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 24, 64, 137};
    static const unsigned flags[] = {KW_F_ROW16, KW_F_PTQ1_0_TRANSCODE | KW_F_ROW16, KW_F_PTQ1_0_DIRECT | KW_F_ROW16};
    static const int types[] = {QT_PQ2_0, QT_PTQ1_0, QT_PTQ1_0};
    static const int layouts[] = {KW_ROW16, KW_PTQ_ROW16, KW_PTQ3_ROW16};
    char what[64];
    for (int ty = 0; ty < 3; ty++)
        for (size_t ki = 0; ki < 3; ki++)
            for (size_t ni = 0; ni < 5; ni++)
                for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
                    if (Ks[ki] == 5120 && (ni % 2 == 0 || (cols[ci] != 1 && cols[ci] != 4 && cols[ci] != 8 && cols[ci] != 16)))
                        continue;   /* keep the suite fast */
                    const int wp = (int)((ki + ni + ci + (size_t)ty) % 7), ap = (int)((ki * 3 + ci + ni) % 5);
                    fixture f;
                    fx_make(&f, types[ty], Ks[ki], Ns[ni], cols[ci], wp, ap, flags[ty]);
                    assert_int_equal(f.w.layout, layouts[ty]);
                    snprintf(what, sizeof what, "row16 wp=%d ap=%d", wp, ap);
                    compare_tables(&f, what);
                    fx_free(&f);
                }
}

/* 16-row weights of K columns cut into row ranges at multiples of 4 that start and end inside
 * groups (the kernel computes such a group whole and keeps the rows in range), one range across
 * two groups, the file-layout tail, and ranges holding two whole groups beside a cut group or the
 * tail (the AVX-512 two-group tiles, which run without the hook): every int32 per (row, block)
 * through the hook and the float bits, for 1..nc_max columns, PQ2_0, PTQ1_0 transcoded and PTQ1_0
 * direct, with and without the hook. */
static void row16_splits(int64_t K, int nc_max) {
    enum { N = 53 };
    const int64_t NB = K / 128;
    static const int64_t rng[][2] = {{0, 4}, {4, 12}, {12, 20}, {20, 36}, {36, 40}, {40, 48}, {48, 53},
                                     {4, 53}, {12, 48}, {0, 32}, {16, 52}};
    enum { NR = sizeof rng / sizeof rng[0] };
    float *y0 = malloc(sizeof(float) * N * (size_t)nc_max), *y1 = malloc(sizeof(float) * N * (size_t)nc_max);
    int32_t *i0 = malloc(sizeof(int32_t) * N * (size_t)(nc_max * NB)), *i1 = malloc(sizeof(int32_t) * N * (size_t)(nc_max * NB));
    assert_non_null(y0); assert_non_null(y1); assert_non_null(i0); assert_non_null(i1);
    for (int ty = 0; ty < 3; ty++)
        for (int nc = 1; nc <= nc_max; nc++) {
            fixture f;
            fx_make(&f, ty ? QT_PTQ1_0 : QT_PQ2_0, K, N, nc, nc % 2 ? WP_CODE3 : WP_ALL3, nc % 3 ? AP_RANDOM : AP_PM127,
                    ty == 2 ? KW_F_PTQ1_0_DIRECT | KW_F_ROW16 : ty ? KW_F_PTQ1_0_TRANSCODE | KW_F_ROW16 : KW_F_ROW16);
            kern_matmul_table(&kern_table_ref, &f.w, &f.act[KQ_FAST], y0, N, 0, N, i0);
            for (int tj = 0; mfx_kern_table(tj); tj++) {
                const kern_table *t = mfx_kern_table(tj);
                if ((t->needs & kern_cpu_features()) != t->needs) continue;
                /* one range at a time: its rows equal ref, every other row is left as it was */
                for (int hook = 0; hook < 2; hook++)
                    for (int s = 0; s < NR; s++) {
                        memset(y1, 0xff, sizeof(float) * N * (size_t)nc);
                        memset(i1, 0xa5, sizeof(int32_t) * N * (size_t)(nc * NB));
                        kern_matmul_table(t, &f.w, &f.act[KQ_FAST], y1, N, rng[s][0], rng[s][1], hook ? i1 : NULL);
                        for (int64_t i = 0; i < N * nc; i++) {
                            const int64_t r = i % N;
                            const bool in = r >= rng[s][0] && r < rng[s][1];
                            if (tern_f32_bits(y1[i]) != (in ? tern_f32_bits(y0[i]) : 0xffffffffu))
                                fail_msg("%s K=%lld ncols=%d type %d hook=%d rows [%lld, %lld): y[%lld] %.9g, expected %s", t->name,
                                         (long long)K, nc, f.type, hook, (long long)rng[s][0], (long long)rng[s][1], (long long)i,
                                         y1[i], in ? "ref's" : "untouched");
                            for (int64_t b = 0; hook && b < NB; b++)
                                if (i1[i * NB + b] != (in ? i0[i * NB + b] : (int32_t)0xa5a5a5a5))
                                    fail_msg("%s K=%lld ncols=%d type %d rows [%lld, %lld): isum[%lld] %d, expected %s", t->name,
                                             (long long)K, nc, f.type, (long long)rng[s][0], (long long)rng[s][1],
                                             (long long)(i * NB + b), i1[i * NB + b], in ? "ref's" : "untouched");
                        }
                    }
            }
            fx_free(&f);
        }
    free(y0); free(y1); free(i0); free(i1);
}
/* K = 384 at every tile width 1..16; K = 4096 at 1 and 2 columns, where one column also runs the
 * AVX-512 two-group tile (x86/avx512vnni.c, mm_row16_fast). */
static void test_row16_splits(void **state) {
    (void)state;
    rng_seed(28);
    row16_splits(384, 16);
    row16_splits(4096, 2);
}

/* Q2_0 (avx2: file layout, slot-major activation copy per K chunk of 272 blocks): every shape of
 * run_shapes, and a K of 274 blocks (two K chunks: the float accumulator carried through y). */
static void test_isa_q2_0(void **state) {
    (void)state;
    rng_seed(26);
    run_shapes(QT_Q2_0, 0);
    for (int wp = 0; wp < 7; wp++) {
        fixture f;
        fx_make(&f, QT_Q2_0, 274 * 64, 13, wp % 2 ? 3 : 1, wp, wp % 5, 0);
        compare_tables(&f, "q2_0 two K chunks");
        fx_free(&f);
    }
}

/* Q8_0, TQ2_0, TQ1_0 and Q1_0 (avx2: mm_block8, 8 rows per pass, fast and ggml numerics): the avx2 table has
 * its own entries (not ref's), every shape of run_shapes, and Q8_0 at K not a
 * multiple of 128 (a zero-padded last activation block: K = 96, 160) with a 1-7 row tail group. */
static void test_isa_q8_0_tq2_0(void **state) {
    (void)state;
#if defined(__x86_64__)
    if (kern_cpu_features() & KCPU_AVX2)
        for (int m = 0; m < 2; m++) {
            assert_non_null(kern_table_avx2.mm[KT_Q8_0][m]);
            assert_non_null(kern_table_avx2.mm[KT_TQ2_0][m]);
            assert_non_null(kern_table_avx2.mm[KT_TQ1_0][m]);
            assert_non_null(kern_table_avx2.mm[KT_Q1_0][m]);
            assert_non_null(kern_table_avx2.mm[KT_Q2_0][m]);
        }
#endif
    rng_seed(27);
    run_shapes(QT_Q8_0, 0);
    run_shapes(QT_TQ2_0, 0);
    run_shapes(QT_TQ1_0, 0);
    run_shapes(QT_Q1_0, 0);
    static const int64_t Ks[] = {32, 96, 160};
    for (int ki = 0; ki < 3; ki++)
        for (int wp = 0; wp < 7; wp++) {
            fixture f;
            fx_make(&f, QT_Q8_0, Ks[ki], 1 + (wp * 5 + ki) % 19, 1 + wp % 4, wp, (wp + ki) % 5, 0);
            compare_tables(&f, "q8_0 short K");
            fx_free(&f);
        }
}

static void test_isa_other_types(void **state) {
    (void)state;
    rng_seed(24);
    static const int types[] = {QT_Q2_0, QT_TQ1_0, QT_TQ2_0, QT_Q1_0, QT_Q8_0, QT_F32, QT_F16, QT_BF16};
    /* 1, 2, 3, 4, 5, 8 and 16 columns: every tile shape of the F16/BF16 matmul (2 far-apart rows
     * x 1 or 2 columns, 1 row x 4 / 3 / 2 / 1 column groups; 8 and 13 rows: an odd last row) */
    static const int cols[] = {1, 2, 3, 4, 5, 8, 16};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int wp = 0; wp < 7; wp++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
                fixture f;
                const int64_t K = kern_block_size(types[ti]) == 1 ? (wp % 2 ? 172 : 64) : 512;
                fx_make(&f, types[ti], K, wp % 2 ? 13 : 8, cols[ci], wp, wp % 5, 0);
                compare_tables(&f, "other types");
                fx_free(&f);
            }
}

/* The special cases, each on every int mode: all-zero weights and activations, constants,
 * +-127 activations with all-code-3 weights (the int16 trap of vpmaddubsw), denormal scales. */
static void test_isa_special(void **state) {
    (void)state;
    rng_seed(25);
    static const int types[] = {QT_PQ2_0, QT_PTQ1_0, QT_Q2_0};
    for (int lay = 0; lay < 2; lay++)   /* row-pair and 16-row layouts: 13 rows, 37 rows */
        for (size_t ti = 0; ti < 3; ti++)
            for (int wp = 0; wp < 7; wp++)
                for (int ap = 0; ap < 5; ap++) {
                    fixture f;
                    fx_make(&f, types[ti], 256, lay ? 37 : 13, 5, wp, ap, lay ? KW_F_ROW16 : KW_F_ROWPAIR);
                    compare_tables(&f, "special");
                    fx_free(&f);
                }
    /* several matmul row chunks (8 groups each) with a padded column tile and a tail row */
    for (int m3 = 0; m3 < 4; m3++) {
        fixture fc;
        fx_make(&fc, QT_PQ2_0, 256, 4 * 8 * 2 + 5, 7, m3 % 2 ? WP_CODE3 : WP_RANDOM, AP_RANDOM, m3 < 2 ? KW_F_ROWPAIR : KW_F_ROW16);
        compare_tables(&fc, "row chunks");
        fx_free(&fc);
    }
    /* the worst case for int16 pair sums: every code 3 against q = +127 */
    fixture f;
    fx_make(&f, QT_PQ2_0, 1024, 8, 3, WP_ALL3, AP_CONST, 0);
    float y[24];
    int32_t is[24 * 8];
    kern_matmul_table(&kern_table_ref, &f.w, &f.act[KQ_FAST], y, 8, 0, 8, is);
    for (int i = 0; i < 24 * 8; i++) assert_int_equal(is[i], 2 * 127 * 128);
    compare_tables(&f, "all code 3");
    fx_free(&f);
}

/* A real vocabulary tail: 151669 rows (N % 4 == 1). */
static void test_isa_vocab_tail(void **state) {
    (void)state;
    rng_seed(26);
    fixture f;
    fx_make(&f, QT_PQ2_0, 128, 151669, 2, WP_RANDOM, AP_RANDOM, 0);
    compare_tables(&f, "151669 rows");
    fx_free(&f);
}

/* ---- 3. columns and row splits ------------------------------------------------------------------ */

static void test_columns_and_splits(void **state) {
    (void)state;
    rng_seed(31);
    static const int types[] = {QT_PQ2_0, QT_PTQ1_0, QT_F32, QT_Q8_0, QT_Q2_0};
    for (int tj = 0; mfx_kern_table(tj); tj++) {
        const kern_table *const *t = &(const kern_table *){mfx_kern_table(tj)};
        if (((*t)->needs & kern_cpu_features()) != (*t)->needs) continue;
        for (size_t ti = 0; ti < 5; ti++) {
            fixture f;
            const int64_t K = types[ti] == QT_F32 ? 172 : 1024;
            fx_make(&f, types[ti], K, 21, 7, WP_CODE3, AP_RANDOM, 0);
            for (int m = 0; m < 3; m++) {
                float y[21 * 7], yc[21], ys[21 * 7];
                kern_matmul_table(*t, &f.w, &f.act[m], y, 21, 0, 21, NULL);
                for (int c = 0; c < 7; c++) {
                    /* column c alone: an activation of one column pointing into the same data */
                    kern_act one = f.act[m];
                    one.ncols = 1;
                    one.x = f.x + c * K;
                    if (one.q) one.q = (uint8_t *)f.q[m] + kern_act_col_bytes((kern_numerics)m, K) * (size_t)c;
                    kern_matmul_table(*t, &f.w, &one, yc, 21, 0, 21, NULL);
                    for (int r = 0; r < 21; r++) assert_true(tern_f32_bits(yc[r]) == tern_f32_bits(y[c * 21 + r]));
                }
                /* odd splits: [0,4) [4,12) [12,16) [16,21) */
                const int64_t cut[] = {0, 4, 12, 16, 21};
                for (int s = 0; s < 4; s++) kern_matmul_table(*t, &f.w, &f.act[m], ys, 21, cut[s], cut[s + 1], NULL);
                assert_memory_equal(ys, y, sizeof y);
            }
            fx_free(&f);
        }
    }
}

/* The 2-4 column path (avx2: rp_mm_narrow, passes of 3 row groups at 2 columns and 2 at 3-4,
 * fewer at a range's end): every row range cut at multiples of 4 gives ref's int32 per (row,
 * block) and ref's float bits, whatever the groups left in the last pass (1, 2 or 3) and with a
 * file-layout tail row; weights with code 3 and activations at +-127 (the int16 bound). */
static void test_narrow_splits(void **state) {
    (void)state;
    rng_seed(37);
    static const int64_t cut[] = {0, 4, 12, 24, 28, 44, 45};   /* 1, 2, 3, 1, 4 groups, tail row */
    for (int wp = 0; wp < 4; wp++)   /* wp & 2: the 16-row layout (groups cut mid-way) */
        for (int nc = 2; nc <= 4; nc++)
            for (int ty = 0; ty < 2; ty++) {
                fixture f;
                const int64_t K = 640, N = 45, nb = K / 128;
                fx_make(&f, ty ? QT_PTQ1_0 : QT_PQ2_0, K, N, nc, wp % 2 ? WP_ALL3 : WP_CODE3, wp % 2 ? AP_PM127 : AP_RANDOM,
                        (ty ? KW_F_PTQ1_0_TRANSCODE : 0) | (wp & 2 ? KW_F_ROW16 : KW_F_ROWPAIR));
                float y0[45 * 4], y1[45 * 4];
                int32_t i0[45 * 4 * 5], i1[45 * 4 * 5];
                kern_matmul_table(&kern_table_ref, &f.w, &f.act[KQ_FAST], y0, N, 0, N, i0);
                for (int tj = 0; mfx_kern_table(tj); tj++) {
                    const kern_table *t = mfx_kern_table(tj);
                    if ((t->needs & kern_cpu_features()) != t->needs) continue;
                    memset(y1, 0xff, sizeof y1);
                    memset(i1, 0xa5, sizeof i1);
                    for (int s = 0; s < 6; s++) kern_matmul_table(t, &f.w, &f.act[KQ_FAST], y1, N, cut[s], cut[s + 1], i1);
                    for (int64_t i = 0; i < N * nc * nb; i++)
                        if (i0[i] != i1[i]) fail_msg("%s ncols=%d type %d: isum[%lld] %d != ref %d", t->name, nc, f.type, (long long)i, i1[i], i0[i]);
                    for (int64_t i = 0; i < N * nc; i++)
                        if (tern_f32_bits(y0[i]) != tern_f32_bits(y1[i]))
                            fail_msg("%s ncols=%d type %d: y[%lld] %.9g != ref %.9g", t->name, nc, f.type, (long long)i, y1[i], y0[i]);
                }
                fx_free(&f);
            }
}

typedef struct { const kern_w *w; const kern_act *a; float *y; int64_t ldy; } mm_job;
static void job_mm(void *ctx, int64_t r0, int64_t r1, int ith) {
    (void)ith;
    const mm_job *j = ctx;
    kern_matmul(j->w, j->a, j->y, j->ldy, r0, r1);
}

static void test_threads_bit_identical(void **state) {
    (void)state;
    rng_seed(32);
    fixture f;
    fx_make(&f, QT_PQ2_0, 512, 101, 3, WP_CODE3, AP_RANDOM, 0);
    float y1[303], y2[303];
    for (int m = 0; m < 3; m++) {
        tern_pool *p1, *p2;
        tern_err err = {0};
        assert_int_equal(pool_init(&p1, 1, &err), TERN_OK);
        assert_int_equal(pool_init(&p2, 2, &err), TERN_OK);
        mm_job j1 = {&f.w, &f.act[m], y1, 101}, j2 = {&f.w, &f.act[m], y2, 101};
        pool_for(p1, 101, KERN_ROW_ALIGN, job_mm, &j1);
        pool_for(p2, 101, KERN_ROW_ALIGN, job_mm, &j2);
        assert_memory_equal(y1, y2, sizeof y1);
        pool_free(p1); pool_free(p2);
    }
    fx_free(&f);
}

/* ---- 4. rejected shapes ------------------------------------------------------------------------- */

/* A non-finite fp16 block scale (a damaged file; the int8 activation path would turn it into finite
 * logits, hiding the damage) is refused by kern_w_init for every block type with a scale, naming
 * the tensor, row, block and bits: 4 rows x 2 blocks of zeros (scale 0: accepted), then one scale
 * at row 2, block 1 set to NaN / +Inf / -Inf. The scale's byte offset is qtypes.h's block_*. */
static void test_nonfinite_scale(void **state) {
    (void)state;
    static const struct { int type, d_off; } types[] = {
        {QT_PQ2_0, 0}, {QT_Q2_0, 0}, {QT_Q8_0, 0}, {QT_Q1_0, 0}, {QT_PTQ1_0, 26}, {QT_TQ1_0, 52}, {QT_TQ2_0, 64},
    };
    static const struct { uint16_t h; const char *what; } bad[] = {{0x7e00, "NaN"}, {0x7c00, "+Inf"}, {0xfc00, "-Inf"},
                                                                    {0xfd01, "NaN"}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int bs = kern_block_size(types[t].type), bb = kern_block_bytes(types[t].type);
        uint8_t *buf = calloc(8, (size_t)bb);
        assert_non_null(buf);
        kern_w w;
        tern_err err = {0};
        assert_int_equal(kern_w_init(&w, "blk.3.ffn_up.weight", types[t].type, buf, 2 * bs, 4, &err), TERN_OK);
        kern_w_free(&w);
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            memset(buf, 0, 8 * (size_t)bb);
            uint8_t *d = buf + (2 * 2 + 1) * bb + types[t].d_off;   /* row 2, block 1 */
            d[0] = (uint8_t)bad[b].h;
            d[1] = (uint8_t)(bad[b].h >> 8);
            char want[160];
            snprintf(want, sizeof want, "tensor 'blk.3.ffn_up.weight': row 2, block 1: scale 0x%04x is %s", bad[b].h,
                     bad[b].what);
            const int rc = kern_w_init(&w, "blk.3.ffn_up.weight", types[t].type, buf, 2 * bs, 4, &err);
            if (rc != TERN_E_FORMAT || !strstr(err.msg, want) || w.aux)
                fail_msg("type %d, scale 0x%04x: rc %d, '%s' (expected TERN_E_FORMAT, \"%s\")", types[t].type, bad[b].h, rc,
                         err.msg, want);
            tern_err_clear(&err);
        }
        free(buf);
    }
}

static void test_rejects(void **state) {
    (void)state;
    uint8_t buf[34 * 8] = {0};
    kern_w w;
    tern_err err = {0};
    assert_int_equal(kern_w_init(&w, "blk.0.ffn_up.weight", QT_PQ2_0, buf, 100, 2, &err), TERN_E_FORMAT);
    assert_non_null(strstr(err.msg, "blk.0.ffn_up.weight"));
    tern_err_clear(&err);
    assert_int_equal(kern_w_init(&w, "t", 12 /* Q4_K */, buf, 256, 1, &err), TERN_E_UNSUPPORTED);
    tern_err_clear(&err);
    assert_int_equal(kern_w_init(&w, "t", QT_PQ2_0, buf, 128, 0, &err), TERN_E_FORMAT);
    tern_err_clear(&err);
    assert_int_equal(kern_w_init(&w, "t", QT_PQ2_0, buf, -128, 1, &err), TERN_E_FORMAT);
    tern_err_clear(&err);
    assert_int_equal(kern_w_init(&w, "t", QT_Q2_0, buf, 96, 1, &err), TERN_E_FORMAT);
    tern_err_clear(&err);
    assert_int_equal(kern_w_init(&w, "t", QT_PQ2_0, buf, (int64_t)1 << 62, (int64_t)1 << 40, &err), TERN_E_FORMAT);
    tern_err_clear(&err);
    assert_int_equal(kern_w_init(&w, "t", QT_PQ2_0, NULL, 128, 1, &err), TERN_E_ARG);
    tern_err_clear(&err);

    assert_int_equal(kern_w_init(&w, "t", QT_PQ2_0, buf, 256, 4, &err), TERN_OK);
    float x[256] = {0};
    kact_fast q[2];
    kern_act a = {.x = x, .q = q, .K = 256, .ncols = 1, .mode = KQ_FAST};
    kern_quantize(&a);
    assert_int_equal(kern_matmul_check(&w, &a, 4, 0, 4, &err), TERN_OK);
    kern_act bad = a;
    bad.K = 128;
    assert_int_equal(kern_matmul_check(&w, &bad, 4, 0, 4, &err), TERN_E_ARG); tern_err_clear(&err);
    bad = a; bad.q = NULL;
    assert_int_equal(kern_matmul_check(&w, &bad, 4, 0, 4, &err), TERN_E_ARG); tern_err_clear(&err);
    bad = a; bad.ncols = 0;
    assert_int_equal(kern_matmul_check(&w, &bad, 4, 0, 4, &err), TERN_E_ARG); tern_err_clear(&err);
    bad = a; bad.mode = (kern_numerics)7;
    assert_int_equal(kern_matmul_check(&w, &bad, 4, 0, 4, &err), TERN_E_ARG); tern_err_clear(&err);
    bad = a; bad.ncols = 2;
    assert_int_equal(kern_matmul_check(&w, &bad, 3, 0, 4, &err), TERN_E_ARG); tern_err_clear(&err);
    assert_int_equal(kern_matmul_check(&w, &a, 4, 2, 4, &err), TERN_E_ARG); tern_err_clear(&err);
    assert_int_equal(kern_matmul_check(&w, &a, 4, 0, 5, &err), TERN_E_ARG); tern_err_clear(&err);
    assert_int_equal(kern_matmul_check(&w, &a, 4, 4, 0, &err), TERN_E_ARG); tern_err_clear(&err);
    kern_w_free(&w);
    /* forcing a path: unknown names (TERN_E_ARG, listing the names), another architecture's path
     * and (where absent) unsupported hosts (TERN_E_UNSUPPORTED) are errors */
    assert_int_equal(kern_force_isa("sse9", &err), TERN_E_ARG);
    assert_non_null(strstr(err.msg, "expected ref, avx2, avxvnni, avx512vnni, amx (x86-64), neon, dotprod or i8mm (ARM64), got 'sse9'"));
    tern_err_clear(&err);
#if defined(__x86_64__)
    assert_int_equal(kern_force_isa("neon", &err), TERN_E_UNSUPPORTED); tern_err_clear(&err);
#elif defined(__aarch64__)
    assert_int_equal(kern_force_isa("avx2", &err), TERN_E_UNSUPPORTED); tern_err_clear(&err);
#endif
    const char *prev = kern_isa();
    assert_int_equal(kern_force_isa("ref", &err), TERN_OK);
    assert_string_equal(kern_isa(), "ref");
    assert_int_equal(kern_force_isa(prev, &err), TERN_OK);
    if (!(kern_cpu_features() & KCPU_AVX512VNNI) && kern_tables[1]) {
        assert_int_equal(kern_force_isa("avx512vnni", &err), TERN_E_UNSUPPORTED);
        tern_err_clear(&err);
    }
#if defined(__x86_64__)
    if (!(kern_cpu_features() & KCPU_AVXVNNI)) {
        assert_int_equal(kern_force_isa("avxvnni", &err), TERN_E_UNSUPPORTED);
        tern_err_clear(&err);
    } else {   /* forcing it selects it (and its layout) */
        assert_int_equal(kern_force_isa("avxvnni", &err), TERN_OK);
        assert_string_equal(kern_isa(), "avxvnni");
        assert_true(kern_isa_row16());
        assert_int_equal(kern_force_isa(prev, &err), TERN_OK);
    }
#endif
}

/* A table that is wrong must be refused by the start-up self-check. */
static void mm_broken(const kern_mm_args *m, int64_t r0, int64_t r1) {
    kern_ref_mm_fast(m, r0, r1);
    if (r1 > r0) m->y[r0] = nextafterf(m->y[r0], INFINITY);   /* one ulp off in one output */
}
static int g_logged;
static void quiet_log(int level, const char *msg, void *user) { (void)level; (void)msg; (void)user; g_logged++; }
static void test_selfcheck(void **state) {
    (void)state;
    const kern_table broken = {.name = "broken", .needs = 0, .mm = {[KT_PQ2_0] = {mm_broken, NULL, NULL}}};
    tern_log_set(quiet_log, NULL, TERN_LOG_ERROR);          /* the refusal is logged: expected here */
    assert_false(kern_table_selfcheck(&broken));
    tern_log_set(NULL, NULL, TERN_LOG_WARN);
    assert_int_equal(g_logged, 1);
    for (int ti = 0; mfx_kern_table(ti); ti++) {
        const kern_table *t = mfx_kern_table(ti);
        if ((t->needs & kern_cpu_features()) == t->needs) assert_true(kern_table_selfcheck(t));
    }
}

/* The stream prefetch hint follows the CPU vendor (dispatch.c detect_stream_nta): prefetchnta on
 * AMD and Hygon, prefetcht1 on every other x86 vendor, and false off x86; the one-column
 * two-group threshold (kern_pair1_min_k) follows the same rule. The vendor is read here
 * independently, from /proc/cpuinfo's vendor_id line. */
static void test_stream_hint_vendor(void **state) {
    (void)state;
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) skip();
    char line[512], vendor[64] = "";
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "vendor_id : %63s", vendor) == 1) break;
    fclose(f);
    if (!vendor[0]) skip();
    const bool amd = strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0;
    if (kern_stream_nta() != amd)
        fail_msg("vendor_id %s: kern_stream_nta() is %d, expected %d", vendor, kern_stream_nta(), amd);
    /* the one-column two-group tiles: from K 4096 on AMD, from K 2048 elsewhere */
    if (kern_pair1_min_k() != (amd ? 4096 : 2048))
        fail_msg("vendor_id %s: kern_pair1_min_k() is %lld, expected %d", vendor, (long long)kern_pair1_min_k(),
                 amd ? 4096 : 2048);
#else
    assert_false(kern_stream_nta());
#endif
}

static void test_report_isas(void **state) {
    (void)state;
    /* informational: which tables ran (so a log shows what the oracle covered) */
    for (int ti = 0; mfx_kern_table(ti); ti++) {
        const kern_table *const *t = &(const kern_table *){mfx_kern_table(ti)};
        print_message("kernels: table %-14s %s\n", (*t)->name,
                      (((*t)->needs & kern_cpu_features()) == (*t)->needs) ? "runs on this host" : "NOT runnable here");
    }
    print_message("kernels: %d ISA-vs-ref comparisons so far\n", g_isa_cases);
}

int suite_kernels(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_rules),
        cmocka_unit_test(test_ref_vs_naive),
        cmocka_unit_test(test_ggml_order),
        cmocka_unit_test(test_rowpair_layout),
        cmocka_unit_test(test_row16_layout),
        cmocka_unit_test(test_isa_row16),
        cmocka_unit_test(test_row16_splits),
        cmocka_unit_test(test_isa_pq2_0),
        cmocka_unit_test(test_isa_pq2_0_tile_widths),
        cmocka_unit_test(test_isa_ptq1_0_direct),
        cmocka_unit_test(test_isa_ptq1_0_transcode),
        cmocka_unit_test(test_isa_q2_0),
        cmocka_unit_test(test_isa_q8_0_tq2_0),
        cmocka_unit_test(test_isa_other_types),
        cmocka_unit_test(test_isa_special),
        cmocka_unit_test(test_isa_vocab_tail),
        cmocka_unit_test(test_columns_and_splits),
        cmocka_unit_test(test_narrow_splits),
        cmocka_unit_test(test_threads_bit_identical),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_nonfinite_scale),
        cmocka_unit_test(test_selfcheck),
        cmocka_unit_test(test_stream_hint_vendor),
        cmocka_unit_test(test_report_isas),
    };
    TEST_RUN_SUITE("kernels", tests);
}
