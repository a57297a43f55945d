/* test_qtypes.c: block type table, worked examples of spec sections 3.1 and 3.4, exhaustive
 * byte-value decoding against independent oracles, encode/decode round trips, encoder rules,
 * subnormal scales, the PQ2_0 <-> PTQ1_0 transcode, and the steps of adding a type
 * (test_type_rows: every row against the codecs, the kernel tables and kern_impl.h's orders).
 * Oracles: the base-3 digits of a packed byte b are the first digits of the base-3 expansion of
 * b/256, i.e. the digits of floor(b * 243 / 256) (5 digits) or floor(b * 81 / 256) (4 digits);
 * 2-bit codes come straight from the spec's bit-position tables. */
#include "test.h"
#include "model_fx.h"

#include "core/fp16.h"
#include "format/qtypes.h"
#include "kernels/kern_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng_state = 12345;
static uint32_t rng(void) {                     /* xorshift32: fixed sequence */
    uint32_t x = rng_state;
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    return rng_state = x;
}

/* digit n (0 = most significant) of the k-digit base-3 number floor(b * 3^k / 256) */
static int oracle_digit(int b, int k, int n) {
    int q = (b * (k == 5 ? 243 : 81)) / 256;
    for (int i = n + 1; i < k; i++) q /= 3;
    return q % 3;
}

static void test_traits(void **state) {
    (void)state;
    const struct { int id; const char *name; int block, bytes; } want[] = {
        {0, "F32", 1, 4}, {1, "F16", 1, 2}, {8, "Q8_0", 32, 34}, {30, "BF16", 1, 2},
        {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66}, {41, "Q1_0", 128, 18}, {42, "Q2_0", 64, 18},
        {142, "PQ2_0", 128, 34}, {143, "PTQ1_0", 128, 28},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const qt_traits *t = qt_get(want[i].id);
        assert_non_null(t);
        assert_string_equal(t->name, want[i].name);
        assert_int_equal(t->block, want[i].block);
        assert_int_equal(t->block_bytes, want[i].bytes);
        assert_int_equal(qt_from_name(want[i].name), want[i].id);
    }
    assert_int_equal(qt_from_name("pq2_0"), QT_PQ2_0);
    assert_int_equal(qt_from_name("ptq1_0"), QT_PTQ1_0);
    assert_int_equal(qt_from_name("q4_0"), -1);
    assert_int_equal(qt_from_name("pq2_"), -1);
    assert_null(qt_get(2));      /* Q4_0: not supported */
    assert_null(qt_get(999));
    assert_true(qt_get(QT_PTQ1_0)->ternary && qt_get(QT_PQ2_0)->ternary && !qt_get(QT_F32)->ternary);
    assert_int_equal(qt_get(QT_PQ2_0)->file_type, 141);
    assert_int_equal(qt_get(QT_Q2_0)->file_type, -1);
    /* the table is complete: exactly the rows above (a type added without a row here fails),
     * each with its codecs (test_type_rows checks them) */
    assert_int_equal(qt_count(), (int)(sizeof want / sizeof want[0]));
    assert_null(qt_at(-1));
    assert_null(qt_at(qt_count()));
    for (int i = 0; i < qt_count(); i++) {
        const qt_traits *t = qt_at(i);
        assert_ptr_equal(qt_get(t->type), t);
        float x[256], y[256];
        uint8_t b[4 * 256];
        for (int k = 0; k < 256; k++) x[k] = (float)((k * 7) % 5) - 2.0f;   /* ternary-friendly values */
        assert_int_equal(qt_quantize(t->type, x, b, 256), TERN_OK);
        assert_int_equal(qt_dequant(t->type, b, y, 256), TERN_OK);
        for (int k = 0; k < 256; k++)
            if (!isfinite(y[k])) fail_msg("type %s: value %d decodes to %g", t->name, k, (double)y[k]);
    }
}

static void test_row_bytes(void **state) {
    (void)state;
    uint64_t b = 0;
    assert_true(qt_row_bytes(QT_PQ2_0, 5120, &b) && b == 40 * 34);
    assert_true(qt_row_bytes(QT_PTQ1_0, 17408, &b) && b == 136 * 28);
    assert_true(qt_row_bytes(QT_Q2_0, 64, &b) && b == 18);
    assert_true(qt_row_bytes(QT_F32, 3, &b) && b == 12);
    assert_true(qt_row_bytes(QT_BF16, 5120, &b) && b == 10240);
    b = 7;
    assert_false(qt_row_bytes(QT_PQ2_0, 100, &b));           /* not a multiple of 128 */
    assert_false(qt_row_bytes(QT_F32, UINT64_MAX / 2, &b));  /* overflows */
    assert_false(qt_row_bytes(2, 64, &b));                   /* unknown type */
    assert_int_equal(b, 7);
    assert_true(qt_row_bytes(QT_Q8_0, UINT64_MAX / 34 / 32 * 32, &b));  /* largest fitting */
}

/* Spec 3.1 worked example: d = 0x2E66, qs[5] = 0x86 -> w20..23 = (+d, 0, -d, +d). */
static void test_pq2_0_worked_example(void **state) {
    (void)state;
    uint8_t blk[34];
    memset(blk, 0x55, sizeof blk);
    blk[0] = 0x66; blk[1] = 0x2E;
    blk[2 + 5] = 0x86;
    blk[2 + 0] = 0x9C;      /* (-1, +2, 0, +1) d */
    blk[2 + 1] = 0xAA;      /* all +d */
    blk[2 + 2] = 0x00;      /* all -d */
    float y[128];
    assert_int_equal(qt_dequant(QT_PQ2_0, blk, y, 128), TERN_OK);
    const float d = 0.0999755859375f;
    assert_true(y[20] == d && y[21] == 0.0f && y[22] == -d && y[23] == d);
    assert_true(y[0] == -d && y[1] == 2 * d && y[2] == 0.0f && y[3] == d);
    for (int j = 4; j < 8; j++) assert_true(y[j] == d);
    for (int j = 8; j < 12; j++) assert_true(y[j] == -d);
    for (int j = 12; j < 128; j++) if (j < 20 || j > 23) assert_true(y[j] == 0.0f);
    block_pq2_0 b;
    memcpy(&b, blk, sizeof b);
    assert_int_equal(qt_pq2_0_code(&b, 1), 3);
    assert_int_equal(qt_pq2_0_code(&b, 22), 0);
}

/* Spec 3.4 worked examples 1-3. */
static void test_ptq1_0_worked_examples(void **state) {
    (void)state;
    uint8_t blk[28];
    memset(blk, 0x80, 24);                 /* all-zero trits */
    blk[24] = blk[25] = 0x7F;
    blk[3] = 0xCA;                         /* elements 3, 19, 35, 51, 67 = (+1, 0, -1, -1, +1) */
    blk[25] = 0xBB;                        /* qh[1]: elements 121, 123, 125, 127 = (+1, -1, 0, +1) */
    blk[26] = 0x00; blk[27] = 0x2C;        /* d = 0.0625 */
    float y[128];
    assert_int_equal(qt_dequant(QT_PTQ1_0, blk, y, 128), TERN_OK);
    const float d = 0.0625f;
    float want[128] = {0};
    want[3] = d; want[19] = 0; want[35] = -d; want[51] = -d; want[67] = d;
    want[121] = d; want[123] = -d; want[125] = 0; want[127] = d;
    for (int e = 0; e < 128; e++) assert_true(y[e] == want[e]);
    block_ptq1_0 b;
    memcpy(&b, blk, sizeof b);
    assert_int_equal(qt_ptq1_0_trit(&b, 35), -1);
    assert_int_equal(qt_ptq1_0_trit(&b, 121), 1);

    /* re-encode: the encoder reproduces the example bytes and the reference bytes */
    float x[128];
    memcpy(x, want, sizeof x);
    uint8_t enc[28];
    assert_int_equal(qt_quantize(QT_PTQ1_0, x, enc, 128), TERN_OK);
    assert_memory_equal(enc, blk, 28);
    for (int e = 0; e < 128; e++) x[e] = 0;
    assert_int_equal(qt_quantize(QT_PTQ1_0, x, enc, 128), TERN_OK);
    for (int i = 0; i < 24; i++) assert_int_equal(enc[i], 0x80);
    assert_int_equal(enc[24], 0x7F);
    assert_int_equal(enc[25], 0x7F);
    assert_int_equal(enc[26] | enc[27], 0);
    for (int e = 0; e < 128; e++) x[e] = -0.0625f;
    assert_int_equal(qt_quantize(QT_PTQ1_0, x, enc, 128), TERN_OK);
    for (int i = 0; i < 24; i++) assert_int_equal(enc[i], 0x00);
    assert_int_equal(enc[26], 0x00);
    assert_int_equal(enc[27], 0x2C);
    for (int e = 0; e < 128; e++) x[e] = 0.0625f;
    assert_int_equal(qt_quantize(QT_PTQ1_0, x, enc, 128), TERN_OK);
    for (int i = 0; i < 24; i++) assert_int_equal(enc[i], 0xFF);
}

/* Every byte value at every qs/qh position of PTQ1_0 and TQ1_0 decodes to the oracle digits,
 * at exactly the elements the spec's tables name, and nowhere else. */
typedef struct { int type, block, nbytes, dpos; } tri_layout;

static int tri_byte_of(int type, int e, int *digit, int *k) {
    if (type == QT_PTQ1_0) {
        if (e < 80) { *digit = e / 16; *k = 5; return e % 16; }
        if (e < 120) { *digit = (e - 80) / 8; *k = 5; return 16 + (e - 80) % 8; }
        *digit = (e - 120) / 2; *k = 4; return 24 + (e - 120) % 2;
    }
    if (e < 160) { *digit = e / 32; *k = 5; return e % 32; }
    if (e < 240) { *digit = (e - 160) / 16; *k = 5; return 32 + (e - 160) % 16; }
    *digit = (e - 240) / 4; *k = 4; return 48 + (e - 240) % 4;
}

static void check_trit_all_bytes(const tri_layout *L) {
    uint8_t blk[64];
    float y[256];
    const uint16_t dbits = 0x3C00;         /* d = 1 */
    for (int pos = 0; pos < L->nbytes; pos++) {
        for (int b = 0; b < 256; b++) {
            for (int i = 0; i < L->nbytes; i++) blk[i] = (uint8_t)(i < L->nbytes - (L->type == QT_PTQ1_0 ? 2 : 4) ? 0x80 : 0x7F);
            blk[pos] = (uint8_t)b;
            blk[L->dpos] = (uint8_t)dbits; blk[L->dpos + 1] = (uint8_t)(dbits >> 8);
            assert_int_equal(qt_dequant(L->type, blk, y, L->block), TERN_OK);
            for (int e = 0; e < L->block; e++) {
                int digit, k;
                const int byte = tri_byte_of(L->type, e, &digit, &k);
                const float want = byte == pos ? (float)(oracle_digit(b, k, digit) - 1) : 0.0f;
                if (y[e] != want) fail_msg("type %d byte %d value 0x%02x element %d: got %g want %g", L->type, pos, b, e, y[e], want);
            }
        }
    }
}

static void test_trit_bytes_exhaustive(void **state) {
    (void)state;
    const tri_layout ptq = {QT_PTQ1_0, 128, 26, 26}, tq = {QT_TQ1_0, 256, 52, 52};
    check_trit_all_bytes(&ptq);
    check_trit_all_bytes(&tq);
}

/* Every digit combination encodes to the byte ceil(q*256/243) and decodes back (encoder
 * exhaustive for both 5-digit and 4-digit bytes, via whole-block round trips). */
static void test_trit_encode_exhaustive(void **state) {
    (void)state;
    for (int type = 0; type < 2; type++) {
        const int qt = type ? QT_TQ1_0 : QT_PTQ1_0, n = type ? 256 : 128;
        for (int q = 0; q < 243; q++) {
            float x[256], y[256];
            for (int e = 0; e < n; e++) {
                int digit, k;
                tri_byte_of(qt, e, &digit, &k);
                int qq = k == 5 ? q : q % 81;           /* 4-digit bytes take the low 4 digits */
                int dd = qq;
                for (int i = digit + 1; i < k; i++) dd /= 3;
                x[e] = (float)(dd % 3 - 1);
            }
            x[0] = 1.0f;  /* d = 1 for every block: pin max|x| */
            uint8_t blk[54];
            assert_int_equal(qt_quantize(qt, x, blk, n), TERN_OK);
            assert_int_equal(qt_dequant(qt, blk, y, n), TERN_OK);
            for (int e = 0; e < n; e++) assert_true(y[e] == x[e]);
            /* a byte at a non-first position holds exactly digits of q: check the formula */
            const int pos = qt == QT_PTQ1_0 ? 1 : 1;
            int q5 = 0;
            for (int dgt = 0; dgt < 5; dgt++) {
                int e = qt == QT_PTQ1_0 ? pos + 16 * dgt : pos + 32 * dgt;
                q5 = q5 * 3 + (int)(x[e] + 1);
            }
            assert_int_equal(blk[pos], (q5 * 256 + 242) / 243);
        }
    }
}

/* Every code byte value at every byte position of PQ2_0, Q2_0 and TQ2_0 decodes per the spec
 * tables: only the four elements of that byte change, to (code - 1) * d. */
static void check_2bit_all_bytes(int type, int n, int nq, int qs_off, int d_off) {
    uint8_t blk[66];
    float y[256];
    for (int pos = 0; pos < nq; pos++) {
        for (int b = 0; b < 256; b++) {
            memset(blk, 0x55, sizeof blk);
            blk[d_off] = 0x00; blk[d_off + 1] = 0x40;    /* d = 2 */
            blk[qs_off + pos] = (uint8_t)b;
            assert_int_equal(qt_dequant(type, blk, y, n), TERN_OK);
            for (int e = 0; e < n; e++) {
                int byte, slot;
                if (type == QT_TQ2_0) { byte = 32 * (e / 128) + e % 32; slot = (e / 32) % 4; }
                else { byte = e / 4; slot = e % 4; }
                const float want = byte == pos ? 2.0f * (float)(((b >> (2 * slot)) & 3) - 1) : 0.0f;
                if (y[e] != want) fail_msg("type %d byte %d value 0x%02x element %d: got %g want %g", type, pos, b, e, y[e], want);
            }
        }
    }
}

static void test_2bit_bytes_exhaustive(void **state) {
    (void)state;
    check_2bit_all_bytes(QT_PQ2_0, 128, 32, 2, 0);
    check_2bit_all_bytes(QT_Q2_0, 64, 16, 2, 0);
    check_2bit_all_bytes(QT_TQ2_0, 256, 64, 0, 64);
}

static void test_q1_0_bits(void **state) {
    (void)state;
    uint8_t blk[18];
    float y[128];
    for (int pos = 0; pos < 16; pos++) {
        for (int b = 0; b < 256; b++) {
            memset(blk, 0, sizeof blk);
            blk[0] = 0x00; blk[1] = 0x3C;        /* d = 1 */
            blk[2 + pos] = (uint8_t)b;
            assert_int_equal(qt_dequant(QT_Q1_0, blk, y, 128), TERN_OK);
            for (int j = 0; j < 128; j++) {
                const float want = (j / 8 == pos && ((b >> (j % 8)) & 1)) ? 1.0f : -1.0f;
                assert_true(y[j] == want);
            }
            /* encoder: sign bits survive, d = mean |x| = 1 */
            uint8_t enc[18];
            assert_int_equal(qt_quantize(QT_Q1_0, y, enc, 128), TERN_OK);
            assert_memory_equal(enc, blk, 18);
        }
    }
}

/* Random ternary blocks with an fp16-exact scale round-trip exactly through every ternary type
 * (including subnormal scales), and the encoder sets d = max|x| and never emits code 3. */
static void test_ternary_roundtrip(void **state) {
    (void)state;
    const int types[] = {QT_PQ2_0, QT_Q2_0, QT_PTQ1_0, QT_TQ1_0, QT_TQ2_0};
    const uint16_t scales[] = {0x2E66, 0x3C00, 0x0001, 0x0155, 0x03FF, 0x0400, 0x7BFF, 0x1A3F};
    enum { N = 1024 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *q = malloc(N * 2);
    assert_non_null(x); assert_non_null(y); assert_non_null(q);
    for (size_t it = 0; it < 40; it++) {
        const uint16_t dh = scales[it % (sizeof scales / sizeof scales[0])];
        const float d = fp16_to_f32(dh);
        for (int i = 0; i < N; i++) x[i] = (float)((int)(rng() % 3) - 1) * d;
        for (int i = 0; i < N; i += 64) x[i + (int)(rng() % 64)] = (rng() & 1) ? d : -d;   /* max|x| = d in every block */
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            const qt_traits *tr = qt_get(types[t]);
            assert_int_equal(qt_quantize(types[t], x, q, N), TERN_OK);
            assert_int_equal(qt_dequant(types[t], q, y, N), TERN_OK);
            for (int i = 0; i < N; i++)
                if (y[i] != x[i]) fail_msg("%s scale 0x%04x element %d: got %g want %g", tr->name, dh, i, y[i], x[i]);
            /* stored scale bits equal fp16(max|x|) */
            const int dpos = (types[t] == QT_PQ2_0 || types[t] == QT_Q2_0) ? 0 : tr->block_bytes - 2;
            for (int ib = 0; ib < N / tr->block; ib++) {
                const uint8_t *p = q + (size_t)ib * (size_t)tr->block_bytes + dpos;
                assert_int_equal(p[0] | (p[1] << 8), dh);
            }
        }
    }
    /* encoder rules on random real values: d = fp16(max|x|); code 3 never appears; zero blocks */
    for (int it = 0; it < 200; it++) {
        for (int i = 0; i < 128; i++) x[i] = ((float)(rng() % 20001) - 10000.0f) * 1e-4f * (float)(1 + it % 7);
        if (it % 10 == 0) x[it % 128] = 0.5f * (float)(1 + it % 7);                 /* exact half-way ties */
        assert_int_equal(qt_quantize(QT_PQ2_0, x, q, 128), TERN_OK);
        float amax = 0;
        for (int i = 0; i < 128; i++) amax = fmaxf(amax, fabsf(x[i]));
        assert_int_equal(q[0] | (q[1] << 8), f32_to_fp16(amax));
        block_pq2_0 b;
        memcpy(&b, q, sizeof b);
        const float dd = fp16_to_f32(b.d);
        for (int j = 0; j < 128; j++) {
            const int c = qt_pq2_0_code(&b, j);
            assert_true(c <= 2);
            const float want = roundf(x[j] / dd) + 1.0f;
            assert_int_equal(c, (int)want);
        }
    }
    memset(x, 0, 128 * sizeof *x);
    assert_int_equal(qt_quantize(QT_PQ2_0, x, q, 128), TERN_OK);
    assert_int_equal(q[0] | q[1], 0);
    for (int i = 2; i < 34; i++) assert_int_equal(q[i], 0x55);
    assert_int_equal(qt_quantize(QT_Q2_0, x, q, 64), TERN_OK);
    for (int i = 2; i < 18; i++) assert_int_equal(q[i], 0x55);
    /* a block whose max is +2 times the others' scale keeps d = max: codes stay ternary; only
     * a decoded code 3 means +2d */
    for (int i = 0; i < 128; i++) x[i] = (i & 1) ? 1.0f : -1.0f;
    x[5] = 2.0f;
    assert_int_equal(qt_quantize(QT_PQ2_0, x, q, 128), TERN_OK);
    assert_int_equal(q[0] | (q[1] << 8), 0x4000);                  /* d = 2 */
    assert_int_equal((q[2 + 1] >> 2) & 3, 2);                      /* x[5] = +d: code 2 */
    free(x); free(y); free(q);
}

static void test_q8_0_and_floats(void **state) {
    (void)state;
    float x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 20) * 0.37f;
    uint8_t q[68];
    assert_int_equal(qt_quantize(QT_Q8_0, x, q, 64), TERN_OK);
    assert_int_equal(qt_dequant(QT_Q8_0, q, y, 64), TERN_OK);
    for (int ib = 0; ib < 2; ib++) {
        double amax = 0;
        for (int j = 0; j < 32; j++) {          /* not fmax(): aarch64 gcc 12 -O2 ICEs vectorising it */
            const double v = fabs((double)x[ib * 32 + j]);
            if (v > amax) amax = v;
        }
        const float d = (float)amax / 127.0f;
        const uint16_t dh = f32_to_fp16(d);
        assert_int_equal(q[ib * 34] | (q[ib * 34 + 1] << 8), dh);
        for (int j = 0; j < 32; j++) {
            const long want = lround((double)(x[ib * 32 + j] * (1.0f / d)));
            assert_int_equal((int8_t)q[ib * 34 + 2 + j], want);
            assert_true(y[ib * 32 + j] == (float)want * fp16_to_f32(dh));
        }
    }
    /* F16, BF16, F32 */
    const float v[4] = {1.0f, -2.5f, 0.0999755859375f, 65504.0f};
    uint8_t h[16];
    assert_int_equal(qt_quantize(QT_F16, v, h, 4), TERN_OK);
    assert_int_equal(h[4] | (h[5] << 8), 0x2E66);
    assert_int_equal(qt_dequant(QT_F16, h, y, 4), TERN_OK);
    assert_memory_equal(y, v, sizeof v);
    assert_int_equal(qt_quantize(QT_BF16, v, h, 4), TERN_OK);
    assert_int_equal(h[0] | (h[1] << 8), 0x3F80);
    assert_int_equal(h[2] | (h[3] << 8), 0xC020);
    assert_int_equal(qt_dequant(QT_BF16, h, y, 2), TERN_OK);
    assert_true(y[0] == 1.0f && y[1] == -2.5f);
    assert_int_equal(qt_quantize(QT_F32, v, h, 4), TERN_OK);
    assert_int_equal(qt_dequant(QT_F32, h, y, 4), TERN_OK);
    assert_memory_equal(y, v, sizeof v);
    /* bad arguments */
    assert_int_equal(qt_dequant(QT_PQ2_0, h, y, 64), TERN_E_ARG);
    assert_int_equal(qt_dequant(77, h, y, 1), TERN_E_ARG);
    assert_int_equal(qt_quantize(QT_Q8_0, x, q, 31), TERN_E_ARG);
}

static void test_transcode(void **state) {
    (void)state;
    enum { NB = 64 };
    block_pq2_0 *p = malloc(NB * sizeof *p), *back = malloc(NB * sizeof *back);
    block_ptq1_0 *t = malloc(NB * sizeof *t);
    float *yp = malloc(NB * 128 * sizeof(float)), *yt = malloc(NB * 128 * sizeof(float));
    assert_non_null(p); assert_non_null(t); assert_non_null(back); assert_non_null(yp); assert_non_null(yt);
    for (int ib = 0; ib < NB; ib++) {
        p[ib].d = (uint16_t)(rng() & 0x7bff);                    /* includes subnormals */
        for (int j = 0; j < 32; j++) {
            uint8_t b = 0;
            for (int s = 0; s < 4; s++) b |= (uint8_t)((rng() % 3) << (2 * s));
            p[ib].qs[j] = b;
        }
    }
    tern_err err = {0};
    assert_int_equal(qt_pq2_0_to_ptq1_0(p, t, NB, &err), TERN_OK);
    assert_int_equal(qt_dequant(QT_PQ2_0, p, yp, NB * 128), TERN_OK);
    assert_int_equal(qt_dequant(QT_PTQ1_0, t, yt, NB * 128), TERN_OK);
    assert_memory_equal(yp, yt, NB * 128 * sizeof(float));
    qt_ptq1_0_to_pq2_0(t, back, NB);
    assert_memory_equal(back, p, NB * sizeof *p);
    /* every PTQ1_0 byte pattern (non-canonical bytes included) transcodes to PQ2_0 losslessly */
    for (int b = 0; b < 256; b++) {
        memset(&t[0], b, sizeof t[0]);
        t[0].d = 0x3C00;
        qt_ptq1_0_to_pq2_0(&t[0], &back[0], 1);
        assert_int_equal(qt_dequant(QT_PTQ1_0, &t[0], yt, 128), TERN_OK);
        assert_int_equal(qt_dequant(QT_PQ2_0, &back[0], yp, 128), TERN_OK);
        assert_memory_equal(yp, yt, 128 * sizeof(float));
    }
    /* a code 3 is refused, naming the block and element */
    p[37].qs[9] = (uint8_t)((p[37].qs[9] & ~0x30) | 0x30);   /* element 38 = code 3 */
    assert_int_equal(qt_pq2_0_to_ptq1_0(p, t, NB, &err), TERN_E_FORMAT);
    assert_int_equal(err.code, TERN_E_FORMAT);
    assert_non_null(strstr(err.msg, "block 37"));
    assert_non_null(strstr(err.msg, "element 38"));
    assert_non_null(strstr(err.msg, "code 3"));
    free(p); free(t); free(back); free(yp); free(yt);
}

/* ---- the steps of adding a type ------------------------------------------------------------------ */

static uint64_t row_rng = 0x9E3779B97F4A7C15ull;
static float row_rand(void) {                   /* xorshift64: a fixed sequence in [-1, 1) */
    row_rng ^= row_rng << 13; row_rng ^= row_rng >> 7; row_rng ^= row_rng << 17;
    return (float)((int)(row_rng % 2001) - 1000) / 1000.0f;
}


/* kern_impl.h "Float order" written out here: 16 fmaf lanes, then the pairwise tree; BF16
 * weights meet x rounded to bf16 (spec 8.4). w: the codec's f32 values of one row. */
static float want_float(int type, const float *w, const float *x, int K) {
    float acc[16] = {0};
    for (int k = 0; k < K; k++) {
        const float xv = type == QT_BF16 ? bf16_to_f32(f32_to_bf16(x[k])) : x[k];
        acc[k % 16] = fmaf(w[k], xv, acc[k % 16]);
    }
    for (int s = 8; s >= 1; s >>= 1)
        for (int i = 0; i < s; i++) acc[i] = acc[i] + acc[i + s];
    return acc[0];
}

/* kern_impl.h "Integer order" and "Float order" of the block types written out here from the
 * codec's values: t_k = w_k / d (d = the block's fp16 scale), units of min(block, 128) weights
 * against 128-value activation blocks (fast), or of 32 against Q8_0 blocks, folded per weight
 * block (ggml). Fills isum[n_units] and returns y. */
static float want_int(const qt_traits *q, const uint8_t *row, const float *w, const void *aq, kern_numerics m, int K,
                      int32_t *isum) {
    const int bs = q->block, unit = m == KQ_FAST ? (bs < 128 ? bs : 128) : 32;
    float acc = 0.0f;
    for (int b = 0; b < K / bs; b++) {
        const uint8_t *dp = row + (size_t)b * (size_t)q->block_bytes + q->d_offset;
        const float dw = fp16_to_f32((uint16_t)(dp[0] | dp[1] << 8));
        float blk = 0.0f;
        for (int u0 = 0; u0 < bs; u0 += unit) {
            const int k0 = b * bs + u0;
            int32_t s = 0;
            for (int j = 0; j < unit; j++) {
                const float tf = dw != 0.0f ? w[k0 + j] / dw : 0.0f;
                const int t = (int)tf;
                if ((float)t != tf || t < -128 || t > 127) fail_msg("%s: weight %d is %g, not an integer times d = %g", q->name, k0 + j, (double)w[k0 + j], (double)dw);
                const int8_t qa = m == KQ_FAST ? ((const kact_fast *)aq)[k0 / 128].qs[k0 % 128 + j]
                                               : ((const kact_ggml *)aq)[k0 / 32].qs[j];
                s += t * qa;
            }
            isum[k0 / unit] = s;
            if (m == KQ_FAST) acc = fmaf(dw * ((const kact_fast *)aq)[k0 / 128].d, (float)s, acc);
            else blk = fmaf(fp16_to_f32(((const kact_ggml *)aq)[k0 / 32].d), (float)s, blk);
        }
        if (m == KQ_GGML) acc = fmaf(dw, blk, acc);
    }
    return acc;
}

/* Adding a type (ARCHITECTURE.md "Adding a type") is one row of the type table plus its codecs
 * and kernels; this fails when a step is missed. For every row: the id and the name find the
 * row (case-insensitive, unique); the row bytes agree with block and block_bytes; a block type
 * has a decoder, an f32 scale at byte 0 or block_bytes - 2 and the fast unit min(block, 128), an
 * element type a dequantiser; the encoder and the decoder agree (quantise, dequantise,
 * quantise again gives the same bytes) and a ternary type decodes to -1, 0, +1; the kernel
 * slots are a one-to-one map onto [0, KT_N); ref has an entry in every numerics mode; and every
 * table this host runs (the emulated ones too) gives, for 21 rows and 1 and 5 columns in every
 * mode, ref's bits, which equal the orders of kern_impl.h computed here from the codec. */
static void test_type_rows(void **state) {
    (void)state;
    enum { K = 512, N = 21, NC = 5 };
    int slot_rows[KT_N];
    for (int i = 0; i < KT_N; i++) slot_rows[i] = 0;
    float *x = malloc(sizeof(float) * K * NC), *wf = malloc(sizeof(float) * K * N), *w2 = malloc(sizeof(float) * K * N);
    uint8_t *wb = malloc((size_t)K * N * 4), *wb2 = malloc((size_t)K * N * 4), *wk = malloc((size_t)K * N * 4);
    void *aq = malloc(kern_act_bytes(KQ_FAST, K, NC) + kern_act_bytes(KQ_GGML, K, NC));
    float y0[N * NC], y1[N * NC];
    int32_t *is0 = malloc(sizeof(int32_t) * N * NC * (K / 32)), *is1 = malloc(sizeof(int32_t) * N * NC * (K / 32));
    assert_true(x && wf && w2 && wb && wb2 && wk && aq && is0 && is1);
    for (int i = 0; i < K * NC; i++) x[i] = row_rand();
    for (int i = 0; i < qt_count(); i++) {
        const qt_traits *q = qt_at(i);
        char lower[16];
        size_t n = strlen(q->name);
        assert_true(n < sizeof lower);
        for (size_t c = 0; c <= n; c++) lower[c] = (char)tolower((unsigned char)q->name[c]);
        if (qt_get(q->type) != q || qt_from_name(q->name) != q->type || qt_from_name(lower) != q->type)
            fail_msg("type %s (%d): the id or the name does not find its row", q->name, q->type);
        for (int j = 0; j < i; j++)
            if (qt_at(j)->file_type >= 0 && qt_at(j)->file_type == q->file_type)
                fail_msg("types %s and %s: the same general.file_type %d", qt_at(j)->name, q->name, q->file_type);
        /* layout */
        uint64_t rb = 0;
        if (q->block < 1 || q->block > QT_BLOCK_MAX || K % q->block != 0 || !qt_row_bytes(q->type, 3 * (uint64_t)q->block, &rb) ||
            rb != 3 * (uint64_t)q->block_bytes || (q->block > 1 && qt_row_bytes(q->type, (uint64_t)q->block + 1, &rb)))
            fail_msg("type %s: block %d, %d bytes: the row bytes disagree", q->name, q->block, q->block_bytes);
        if (q->block == 1) {
            if (q->decode || !q->dequant || q->d_offset != -1 || q->unit != 0 || q->ternary)
                fail_msg("type %s: an element type has dequant, no decode, d_offset -1, unit 0", q->name);
        } else {
            const int want_unit = q->block < 128 ? q->block : 128;
            if (!q->decode || q->dequant || (q->d_offset != 0 && q->d_offset != q->block_bytes - 2) || q->unit != want_unit)
                fail_msg("type %s: a block type has decode, no dequant, d at 0 or %d (got %d), unit %d (got %d)", q->name,
                         q->block_bytes - 2, q->d_offset, want_unit, q->unit);
        }
        if (!q->quantize) fail_msg("type %s: no encoder", q->name);
        /* codecs: quantise, dequantise, quantise again */
        for (int k = 0; k < K * N; k++) wf[k] = row_rand() * (float)(1 + k % 3);
        const size_t row_bytes = (size_t)(K / q->block) * (size_t)q->block_bytes;
        assert_int_equal(qt_quantize(q->type, wf, wb, K * N), TERN_OK);
        assert_int_equal(qt_dequant(q->type, wb, wf, K * N), TERN_OK);
        assert_int_equal(qt_quantize(q->type, wf, wb2, K * N), TERN_OK);
        assert_int_equal(qt_dequant(q->type, wb2, w2, K * N), TERN_OK);
        if (memcmp(wb, wb2, row_bytes * N) != 0 || memcmp(wf, w2, sizeof(float) * K * N) != 0)
            fail_msg("type %s: the encoder and the decoder disagree", q->name);
        if (q->ternary) {
            int8_t t[QT_BLOCK_MAX];
            for (int b = 0; b < K * N / q->block; b++) {
                q->decode(wb + (size_t)b * (size_t)q->block_bytes, t);
                for (int j = 0; j < q->block; j++)
                    if (t[j] < -1 || t[j] > 1) fail_msg("type %s: block %d value %d decodes to %d", q->name, b, j, t[j]);
            }
        }
        /* kernels */
        if (q->kt < 0 || q->kt >= KT_N) fail_msg("type %s: kernel slot %d outside [0, %d)", q->name, q->kt, KT_N);
        slot_rows[q->kt]++;
        assert_int_equal(kern_type_index(q->type), q->kt);
        for (int m = 0; m < 3; m++)
            if (!kern_table_ref.mm[q->kt][m]) fail_msg("type %s: ref has no matmul in mode %d", q->name, m);
        for (int ti = 0; mfx_kern_table(ti); ti++) {
            const kern_table *t = mfx_kern_table(ti);
            if ((t->needs & kern_cpu_features()) != t->needs) continue;   /* the host cannot run it */
            memcpy(wk, wb, row_bytes * N);                              /* repacked in place */
            kern_w w;
            assert_int_equal(kern_w_init_ex(&w, q->name, q->type, wk, K, N, t->row16 ? KW_F_ROW16 : KW_F_ROWPAIR, NULL), TERN_OK);
            for (int m = 0; m < 3; m++)
                for (int nc = 1; nc <= NC; nc += NC - 1) {
                    kern_act a = {.x = x, .q = m == KQ_F32 ? NULL : aq, .K = K, .ncols = nc, .mode = (kern_numerics)m};
                    if (m != KQ_F32) kern_quantize(&a);
                    const bool ints = q->block > 1 && m != KQ_F32;
                    const int nu = ints ? K / kern_unit(&w, (kern_numerics)m) : 0;
                    kern_matmul_table(&kern_table_ref, &w, &a, y0, N, 0, N, ints ? is0 : NULL);
                    kern_matmul_table(t, &w, &a, y1, N, 0, N, NULL);
                    if (memcmp(y0, y1, sizeof(float) * (size_t)(N * nc)) != 0)
                        fail_msg("type %s, table %s, mode %d, %d columns: not ref's bits", q->name, t->name, m, nc);
                    if (t != &kern_table_ref) continue;
                    for (int c = 0; c < nc; c++)
                        for (int r = 0; r < N; r++) {
                            const float *wr = wf + (size_t)r * K, *xc = x + (size_t)c * K;
                            float want;
                            if (ints) {
                                const size_t col = kern_act_col_bytes((kern_numerics)m, K) * (size_t)c;
                                want = want_int(q, wb + (size_t)r * row_bytes, wr, (const uint8_t *)aq + col, (kern_numerics)m, K, is1);
                                if (memcmp(is1, is0 + ((size_t)c * N + (size_t)r) * (size_t)nu, sizeof(int32_t) * (size_t)nu) != 0)
                                    fail_msg("type %s, mode %d: row %d column %d: ref's unit sums differ", q->name, m, r, c);
                            } else {
                                want = want_float(q->type, wr, xc, K);
                            }
                            if (memcmp(&want, &y0[c * N + r], sizeof want) != 0)
                                fail_msg("type %s, mode %d: row %d column %d: ref %a, the order gives %a", q->name, m, r, c,
                                         (double)y0[c * N + r], (double)want);
                        }
                }
            kern_w_free(&w);
        }
    }
    for (int i = 0; i < KT_N; i++)
        if (slot_rows[i] != 1) fail_msg("kernel slot %d belongs to %d types, expected 1", i, slot_rows[i]);
    free(x); free(wf); free(w2); free(wb); free(wb2); free(wk); free(aq); free(is0); free(is1);
}

int suite_qtypes(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traits),
        cmocka_unit_test(test_row_bytes),
        cmocka_unit_test(test_pq2_0_worked_example),
        cmocka_unit_test(test_ptq1_0_worked_examples),
        cmocka_unit_test(test_trit_bytes_exhaustive),
        cmocka_unit_test(test_trit_encode_exhaustive),
        cmocka_unit_test(test_2bit_bytes_exhaustive),
        cmocka_unit_test(test_q1_0_bits),
        cmocka_unit_test(test_ternary_roundtrip),
        cmocka_unit_test(test_q8_0_and_floats),
        cmocka_unit_test(test_transcode),
        cmocka_unit_test(test_type_rows),
    };
    TEST_RUN_SUITE("qtypes", tests);
}
