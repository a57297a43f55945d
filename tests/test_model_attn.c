/* test_model_attn.c: the query-tiled attention (blk_attn_tile, src/model/attn_impl.h).
 *  - against an independent float64 softmax attention over the same (fp16-rounded) K/V values:
 *    within 2e-6 of max |v| = 1 (the kernel's own exp is checked through it, also for
 *    score ranges where most weights underflow);
 *  - bit identity: every query of a tile of 1..8 queries with different lengths equals the same
 *    query computed alone (prefill tiles vs decode), for f16 and f32 K/V and head dims that are
 *    and are not multiples of 8;
 *  - the portable copy and the AVX2 and AVX-512 copies give the same bits (where the host runs
 *    them: the active kernel path), and every architecture gives the bits of x86-64 (a pinned
 *    hash of all outputs);
 *  - the KV cache's head-major layout and its views. */
#include "test.h"

#include "core/fp16.h"
#include "kernels/kernels.h"
#include "model/blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NCTX = 300, HDMAX = 304 };

typedef struct {
    int hd, n_head_kv;
    bool f32;
    float *kf, *vf;        /* (NCTX, n_head_kv * hd) values as stored (f16-rounded when f16) */
    void *k, *v;           /* the cache rows in their element type */
} attn_fx;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) {   /* uniform [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fx_init(attn_fx *f, int hd, int n_head_kv, bool f32, float kscale) {
    f->hd = hd;
    f->n_head_kv = n_head_kv;
    f->f32 = f32;
    const size_t n = (size_t)NCTX * n_head_kv * hd;
    f->kf = malloc(n * sizeof(float));
    f->vf = malloc(n * sizeof(float));
    f->k = malloc(n * (f32 ? 4 : 2));
    f->v = malloc(n * (f32 ? 4 : 2));
    for (size_t i = 0; i < n; i++) {
        float k = frand() * kscale, v = frand();
        if (!f32) {
            const uint16_t kh = f32_to_fp16(k), vh = f32_to_fp16(v);
            ((uint16_t *)f->k)[i] = kh;
            ((uint16_t *)f->v)[i] = vh;
            k = fp16_to_f32(kh);
            v = fp16_to_f32(vh);
        } else {
            ((float *)f->k)[i] = k;
            ((float *)f->v)[i] = v;
        }
        f->kf[i] = k;
        f->vf[i] = v;
    }
}

static void fx_free(attn_fx *f) {
    free(f->kf);
    free(f->vf);
    free(f->k);
    free(f->v);
}

static blk_kv_view fx_view(const attn_fx *f) {
    const size_t stride = (size_t)f->n_head_kv * f->hd;
    return (blk_kv_view){f->k, f->v, stride, stride, (size_t)f->hd, (size_t)f->hd, f->f32};
}

/* float64 softmax(q . K^T * scale) . V over rows [0, n) of kv head ikv. */
static void ref_attn(const attn_fx *f, const float *q, int ikv, int n, float scale, double *out) {
    const size_t stride = (size_t)f->n_head_kv * f->hd, off = (size_t)ikv * f->hd;
    double *s = malloc((size_t)n * sizeof(double)), mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) {
        double d = 0;
        for (int i = 0; i < f->hd; i++) d += (double)q[i] * f->kf[j * stride + off + i];
        s[j] = d * scale;
        mx = fmax(mx, s[j]);
    }
    for (int j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
    for (int i = 0; i < f->hd; i++) {
        double o = 0;
        for (int j = 0; j < n; j++) o += s[j] / sum * f->vf[j * stride + off + i];
        out[i] = o;
    }
    free(s);
}

typedef void (*tile_fn)(int, const float *const *, float *const *, const int *, const blk_kv_view *, int, int, int,
                        float, float *);

#if defined(__x86_64__)
static bool host_avx2(void) {
    const char *isa = kern_isa();
    return !strcmp(isa, "avx2") || !strcmp(isa, "avxvnni") || !strcmp(isa, "avx512vnni") || !strcmp(isa, "amx");
}
static bool host_avx512(void) { return !strcmp(kern_isa(), "avx512vnni") || !strcmp(kern_isa(), "amx"); }
#endif

/* FNV-1a over the output bits of every configuration: pinned below from an x86-64 run, so other
 * architectures (aarch64 under qemu) must reproduce the same bits. */
static uint64_t g_hash = 1469598103934665603ull;
static void hash_floats(const float *x, int n) {
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < (size_t)n * sizeof(float); i++) g_hash = (g_hash ^ b[i]) * 1099511628211ull;
}

/* One configuration: tiles of every size 1..8 with lengths spread over [1, NCTX]. */
static void check_config(int hd, bool f32, float kscale) {
    attn_fx f;
    fx_init(&f, hd, 2, f32, kscale);
    const blk_kv_view view = fx_view(&f);
    const float scale = 1.0f / sqrtf((float)hd);
    float q[8][HDMAX], out[8][HDMAX], alone[HDMAX], other[8][HDMAX];
    float *scores = malloc((size_t)BLK_ATTN_NQ * NCTX * sizeof(float));
    double ref[HDMAX];
    double worst = 0;
    tile_fn fns[3] = {blk_attn_tile_generic, NULL, NULL};
    static const char *const fn_name[3] = {"portable", "AVX2", "AVX-512"};
#if defined(__x86_64__)
    if (host_avx2()) fns[1] = blk_attn_tile_avx2;
    if (host_avx512()) fns[2] = blk_attn_tile_avx512;
#endif
    for (int nq = 1; nq <= 8; nq++) {
        const float *qp[8];
        float *op[8], *oo[8];
        int n_kv[8];
        for (int s = 0; s < nq; s++) {
            for (int i = 0; i < hd; i++) q[s][i] = frand() * 2.0f;
            qp[s] = q[s];
            op[s] = out[s];
            oo[s] = other[s];
            n_kv[s] = 1 + (int)((unsigned)(nq * 131 + s * 97 + hd) % NCTX);
        }
        const int ikv = nq & 1;
        fns[0](nq, qp, op, n_kv, &view, ikv, hd, hd, scale, scores);
        for (int c = 1; c < 3; c++) {
            if (!fns[c]) continue;
            memset(other, 0xff, sizeof other);
            fns[c](nq, qp, oo, n_kv, &view, ikv, hd, hd, scale, scores);
            for (int s = 0; s < nq; s++)
                if (memcmp(out[s], other[s], sizeof(float) * (size_t)hd) != 0)
                    fail_msg("hd %d f32 %d nq %d query %d: %s and %s copies differ", hd, f32, nq, s, fn_name[0], fn_name[c]);
        }
        for (int s = 0; s < nq; s++) hash_floats(out[s], hd);
        for (int s = 0; s < nq; s++) {
            const float *q1 = q[s];
            float *o1 = alone;
            blk_attn_tile(1, &q1, &o1, &n_kv[s], &view, ikv, hd, hd, scale, scores);
            if (memcmp(alone, out[s], (size_t)hd * sizeof(float)) != 0)
                fail_msg("hd %d f32 %d nq %d query %d (n_kv %d): tile and single query differ", hd, f32, nq, s, n_kv[s]);
            ref_attn(&f, q[s], ikv, n_kv[s], scale, ref);
            for (int i = 0; i < hd; i++) worst = fmax(worst, fabs(out[s][i] - ref[i]));
        }
    }
    print_message("attn hd %d kv %s kscale %g: max error vs float64 %.3g\n", hd, f32 ? "f32" : "f16", kscale, worst);
    /* |v| < 1; float scores carry ~|score| * 2^-23 of rounding, which the softmax turns into
     * relative error of the weights: the bound grows with the score range */
    assert_true(worst < 2e-6 * fmax(1.0, kscale / 2));
    free(scores);
    fx_free(&f);
}

static void test_attn_tile(void **st) {
    (void)st;
    blk_init();
    static const int hds[] = {128, 64, 8, 20};
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++) {
        check_config(hds[h], false, 1.0f);
        check_config(hds[h], true, 1.0f);
    }
    /* peaked softmax: scores spread over hundreds, most weights underflow to 0 */
    check_config(128, false, 40.0f);
    check_config(128, true, 40.0f);
    print_message("attention output hash %016llx\n", (unsigned long long)g_hash);
    assert_true(g_hash == 0xb27bfc908ea817e0ull);
    /* a head wider than a tile's packed queries hold for 7-8 queries (8 x 256 floats): those
     * tiles read the queries in place, the single queries packed; both give the same bits */
    check_config(300, false, 1.0f);
    check_config(300, true, 1.0f);
    /* widths whose softmax-weighted V sum mixes passes of 128, 64, 32 and 8 dims per query count
     * (160 = 128 + 32, 96 = 64 + 32, 304 = 2 x 128 + 32 + 16) */
    static const int mixed[] = {160, 96, 304};
    for (size_t h = 0; h < sizeof mixed / sizeof mixed[0]; h++) {
        check_config(mixed[h], false, 1.0f);
        check_config(mixed[h], true, 1.0f);
    }
}

/* blk_f16_from_f32 (the KV store's conversion: F16C on x86 with AVX2) equals f32_to_fp16 bit for
 * bit: random values over the whole exponent range, every float near the fp16 subnormal and
 * overflow boundaries (ties included), zeros, infinities and NaNs with payloads; lengths with
 * tails. */
static void test_f16_store(void **st) {
    (void)st;
    enum { N = 4096 + 5 };
    float *x = malloc(sizeof(float) * N);
    uint16_t *h = malloc(sizeof(uint16_t) * N), *h2 = malloc(sizeof(uint16_t) * N);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int rep = 0; rep < 8; rep++) {
        for (int i = 0; i < N; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t b = (uint32_t)(r >> 32);
            if (rep == 1) b = (b & 0x80000000u) | (0x33000000u + (b & 0x01ffffffu));   /* fp16 subnormal range */
            if (rep == 2) b = (b & 0x80000000u) | (0x477fe000u + (b & 0x3fffu));       /* around 65504 .. 65520 */
            if (rep == 3) b = (b & 0x80000000u) | (0x38000000u + (b & 0x00ffffffu));   /* around 2^-14 */
            if (rep == 4) b = (b & 0xffffe000u) | 0x1000u;                              /* exact ties */
            x[i] = tern_bits_f32(b);
        }
        if (rep == 5) {
            const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.99f, 65520.0f, 5.96e-8f,
                                2.98e-8f, 2.99e-8f, 6.1035e-5f};
            for (int i = 0; i < N; i++) x[i] = sp[i % (int)(sizeof sp / sizeof sp[0])];
            x[77] = tern_bits_f32(0x7fa00001u);   /* signalling NaN with payload */
            x[78] = tern_bits_f32(0xffc12345u);
        }
        for (int n = N - 5; n <= N; n += 5) {
            blk_f16_from_f32(h, x, n);
            for (int i = 0; i < n; i++)
                if (h[i] != f32_to_fp16(x[i])) fail_msg("x[%d] = %a (0x%08x): %04x, expected %04x", i, x[i], tern_f32_bits(x[i]), h[i], f32_to_fp16(x[i]));
#if defined(__x86_64__)
            if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
                blk_f16_from_f32_avx2(h2, x, n);
                assert_memory_equal(h, h2, sizeof(uint16_t) * (size_t)n);
            }
#endif
        }
    }
    free(x); free(h); free(h2);
}

/* The KV cache layout (runtime/kv.h): kv head h of layer il at position pos, element d, lies at
 * ((il * n_head_kv + h) * n_ctx + pos) * hd + d of k (v likewise with hd_v), whether a position
 * is stored whole or head by head; blk_kv_view_of's strides address the same elements; bad and
 * overflowing shapes are refused before anything is allocated. */
static void test_kv_layout(void **st) {
    (void)st;
    enum { L = 2, C = 5, H = 3, DK = 4, DV = 2 };
    for (int f32 = 0; f32 <= 1; f32++) {
        kv_cache kv;
        tern_err err = {0};
        assert_int_equal(kv_init(&kv, L, C, H, DK, DV, f32, &err), TERN_OK);
        assert_int_equal(kv_bytes(L, C, H, DK, DV, f32), (uint64_t)L * C * H * (DK + DV) * (f32 ? 4 : 2));
        for (int il = 0; il < L; il++)
            for (int pos = 0; pos < C; pos++) {
                float k[H * DK], v[H * DV];   /* integers below 2048: exact in fp16 */
                for (int h = 0; h < H; h++) {
                    for (int d = 0; d < DK; d++) k[h * DK + d] = (float)(il * 1000 + pos * 100 + h * 10 + d);
                    for (int d = 0; d < DV; d++) v[h * DV + d] = -(float)(il * 1000 + pos * 100 + h * 10 + d);
                }
                if (pos % 2) kv_store_heads(&kv, il, pos, 0, H, k, v);   /* whole, or head 0 then heads 1-2 */
                else {
                    kv_store_heads(&kv, il, pos, 0, 1, k, v);
                    kv_store_heads(&kv, il, pos, 1, H, k + DK, v + DV);
                }
            }
        for (int il = 0; il < L; il++) {
            const blk_kv_view w = blk_kv_view_of(&kv, il);
            assert_int_equal(w.k_stride, DK);
            assert_int_equal(w.v_stride, DV);
            assert_int_equal(w.k_head, C * DK);
            assert_int_equal(w.v_head, C * DV);
            for (int h = 0; h < H; h++)
                for (int pos = 0; pos < C; pos++) {
                    for (int d = 0; d < DK + DV; d++) {
                        const bool isk = d < DK;
                        const int e = isk ? d : d - DK, hd = isk ? DK : DV;
                        const float want = (isk ? 1.0f : -1.0f) * (float)(il * 1000 + pos * 100 + h * 10 + e);
                        const size_t at = (((size_t)il * H + h) * C + pos) * hd + e;   /* the layout */
                        const size_t vi = (size_t)h * (isk ? w.k_head : w.v_head) + (size_t)pos * hd + e;
                        const uint8_t *base = isk ? kv.k : kv.v;
                        const void *vbase = isk ? w.k : w.v;
                        float got, via;
                        if (f32) {
                            got = ((const float *)(const void *)base)[at];
                            via = ((const float *)vbase)[vi];
                        } else {
                            got = fp16_to_f32(((const uint16_t *)(const void *)base)[at]);
                            via = fp16_to_f32(((const uint16_t *)vbase)[vi]);
                        }
                        if (got != want || via != want)
                            fail_msg("f32 %d layer %d head %d pos %d %c[%d]: %g at the layout, %g via the view, expected %g",
                                     f32, il, h, pos, isk ? 'k' : 'v', e, got, via, want);
                    }
                }
        }
        kv_free(&kv);
    }
    kv_cache kv;
    tern_err err = {0};
    assert_int_equal(kv_init(&kv, 0, 4, 1, 8, 8, false, &err), TERN_E_ARG);
    assert_non_null(strstr(err.msg, "n_layer=0"));
    assert_int_equal(kv_bytes(1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 30, true), 0);   /* overflows u64 */
    /* 65536 heads x 65536 dims fits in 64 bits but not in an int row of n_embd_k */
    err = (tern_err){0};
    assert_int_equal(kv_init(&kv, 1, 1, 65536, 65536, 8, false, &err), TERN_E_ARG);
    assert_null(kv.k);
}

int suite_model_attn(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attn_tile),
        cmocka_unit_test(test_f16_store),
        cmocka_unit_test(test_kv_layout),
    };
    TEST_RUN_SUITE("model_attn", tests);
}
