/* bench_kernel.c: `tern bench-kernel`: kernel speed as a fraction of ceilings measured in the
 * same run (a program, never a timed test).
 *   - read bandwidth: a 1 GiB buffer streamed by 1..T threads on the persistent pool (GB/s);
 *   - int8 peak: a register-only micro-benchmark of the best int8 multiply-accumulate this host
 *     has (vpdpbusd zmm with AVX-512 VNNI, else vpmaddubsw+vpmaddwd ymm) in GMAC/s; where the
 *     process may use AMX, also the tile rate (tdpbsud), the ceiling of the amx path's rows;
 *   - the empty pool_for job (ns);
 *   - matvec 32768 x 8192 PQ2_0 (71 MB) and PTQ1_0 (direct and transcoded) in Gweights/s and
 *     GB/s as a fraction of the bandwidth; matmul 17408 x 5120 (PQ2_0, PTQ1_0 direct) at 4, 16, 64 columns in GMAC/s as
 *     a fraction of the int8 peak; per ISA path, per thread count; median, min and max over
 *     repeats. The ref path is timed on a 1/16 row slice (it is compute-bound; the rate per
 *     weight is what matters) and says so in `rows`;
 *   - each of these modes instead of the above (after the probes where it needs them):
 *     --decode-seq: bonsai-1.7b's decode matvecs as pool jobs, busy GB/s against the probe;
 *     --f16: the F16 and F32 matmuls at 1, 2, 4, 8 columns (bench_f16);
 *     --sampler: the sampler's ms per token at 151936 and 248320 logits;
 *     --attn: the prefill attention tile per ops table against the f32 multiply + add peak
 *     (bench_attn);
 *     --gdn: the Gated DeltaNet delta rule over bonsai2-27b's recurrent state at 1..16 tokens
 *     per call (bench_gdn).
 * Threads are never created inside a timed loop, and every job takes all of a pool's threads
 * (pool_set_fixed): a kernel's tN figure is N threads' rate. The model's pool chooses per job kind
 * between all threads and one less; left to choose on a few repeats, it can run a kind (such as the
 * streamed 4-column matmul) on the caller alone, and t2 would print one thread's rate. */
#include "cli.h"
#include "opts.h"

#include "core/core.h"
#include "core/fp16.h"
#include "kernels/kernels.h"
#include "model/gdn.h"
#include "model/ops.h"
#include "runtime/membw.h"
#include "runtime/pool.h"
#include "tern.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

/* ---- options and output ------------------------------------------------------------------- */
typedef struct {
    bool json, quick;
    bool decode_seq;     /* --decode-seq: only bench_decode_seq */
    bool f16;            /* --f16: the probes, then only bench_f16 (F16 and F32 weights) */
    bool sampler;        /* --sampler: only bench_sampler */
    bool attn;           /* --attn: only bench_attn */
    bool gdn;            /* --gdn: only bench_gdn */
    char isa[128];       /* comma list or "" = every runnable path */
    bool threads_set;    /* --threads given */
    int threads[8];
    int n_threads;
} bk_opts;

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
typedef struct { double med, min, max; } stat3;
static stat3 stats(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return (stat3){t[n / 2], t[0], t[n - 1]};
}

static void emit(const bk_opts *o, cJSON *j, const char *text) {
    if (o->json) {
        char *s = cJSON_PrintUnformatted(j);
        printf("%s\n", s);
        free(s);
    } else {
        printf("%s\n", text);
    }
    cJSON_Delete(j);
}

/* ---- bandwidth ------------------------------------------------------------------------------ */
typedef struct { const uint64_t *buf; uint64_t sink[64 * 8]; } bw_ctx;

/* Busy time: each job records its own thread's CPU time (CLOCK_THREAD_CPUTIME_ID; busy_clock_s); a job's busy
 * time is the slowest thread's. On a shared, oversubscribed machine this removes the time a
 * thread sat preempted (it keeps the slowdown from other programs' memory traffic). */
static double g_busy[64];
/* --decode-seq times jobs of tens of microseconds, each thread running several claims of one
 * job, and reads a clock around every claim: there the thread CPU clock (a system call, ~1.3 us
 * on a KVM guest against ~26 ns for CLOCK_MONOTONIC) would add a fifth of a claim's time to the
 * figure it measures. Its busy time is the wall time inside each thread's calls instead: the
 * same as CPU time on a quiet machine, where it is meant to run. */
static bool g_busy_wall;
static double busy_clock_s(void) {
    if (g_busy_wall) return tern_time_s();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double busy_take(int n_threads) {
    double m = 0;
    for (int i = 0; i < n_threads && i < 64; i++) { m = TERN_MAX(m, g_busy[i]); g_busy[i] = 0; }
    return m;
}

static bool g_avx2;
static void job_bw(void *ctx, int64_t i0, int64_t i1, int ith) {
    const double c0 = busy_clock_s();
    bw_ctx *c = ctx;
    c->sink[ith * 8] += membw_sum(c->buf + i0, i1 - i0, g_avx2);
    g_busy[ith] += busy_clock_s() - c0;   /* a thread may run several chunks of one job */
}

/* The read bandwidth of `nt` threads over buf[0, n): the best busy-time rate of `reps` passes
 * (GB/s), as tern bench's decode ceiling; bench-kernel probes it again around every matvec. */
static double bw_probe(tern_pool *pool, int nt, const uint64_t *buf, int64_t n, int reps) {
    bw_ctx c = {.buf = buf};
    double best = 0;
    busy_take(nt);
    for (int r = 0; r < reps; r++) {
        pool_for(pool, n, 4096, job_bw, &c);
        const double t = busy_take(nt);
        if (t > 0 && (double)n * 8 / t / 1e9 > best) best = (double)n * 8 / t / 1e9;
    }
    return best;
}

/* ---- int8 peak ------------------------------------------------------------------------------ */
#define PEAK_ITERS 500000   /* ~1 ms per repeat: short runs, best of many (the host is shared) */
#if defined(__x86_64__)
/* 16 independent vpdpbusd chains, each on its own input pair (4 weights x 4 activations), written
 * as asm so that the compiler neither merges chains (with intrinsics and repeated pairs GCC kept one
 * chain per distinct pair, and the loop did half the multiply-adds it counted) nor copies the
 * accumulators around; 16 chains cover the latency of a core that issues two per cycle. The empty
 * asm makes the inputs unknown on every iteration. 16 accumulators + 8 inputs: 24 of the 32 zmm. */
#define PEAK_DP(acc, w, y) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(y))
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int64_t peak_vnni(void) {
    __m512i w0 = _mm512_set1_epi8(1), w1 = _mm512_set1_epi8(2), w2 = _mm512_set1_epi8(3), w3 = _mm512_set1_epi8(4);
    __m512i y0 = _mm512_set1_epi8(-5), y1 = _mm512_set1_epi8(-6), y2 = _mm512_set1_epi8(-7), y3 = _mm512_set1_epi8(-8);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512i a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    for (int it = 0; it < PEAK_ITERS / 2; it++) {
        __asm__ volatile("" : "+v"(w0), "+v"(w1), "+v"(w2), "+v"(w3), "+v"(y0), "+v"(y1), "+v"(y2), "+v"(y3));
        PEAK_DP(a0, w0, y0); PEAK_DP(a1, w0, y1); PEAK_DP(a2, w0, y2); PEAK_DP(a3, w0, y3);
        PEAK_DP(a4, w1, y0); PEAK_DP(a5, w1, y1); PEAK_DP(a6, w1, y2); PEAK_DP(a7, w1, y3);
        PEAK_DP(a8, w2, y0); PEAK_DP(a9, w2, y1); PEAK_DP(a10, w2, y2); PEAK_DP(a11, w2, y3);
        PEAK_DP(a12, w3, y0); PEAK_DP(a13, w3, y1); PEAK_DP(a14, w3, y2); PEAK_DP(a15, w3, y3);
    }
    /* the accumulators are only kept alive: XOR them (lane-wise, no integer overflow) */
    const __m512i s0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    const __m512i s1 = _mm512_xor_si512(_mm512_xor_si512(a4, a5), _mm512_xor_si512(a6, a7));
    const __m512i s2 = _mm512_xor_si512(_mm512_xor_si512(a8, a9), _mm512_xor_si512(a10, a11));
    const __m512i s3 = _mm512_xor_si512(_mm512_xor_si512(a12, a13), _mm512_xor_si512(a14, a15));
    volatile int r = _mm_cvtsi128_si32(_mm512_castsi512_si128(_mm512_xor_si512(_mm512_xor_si512(s0, s1), _mm512_xor_si512(s2, s3))));
    (void)r;
    return (int64_t)(PEAK_ITERS / 2) * 16 * 64;   /* MACs: 64 byte products per vpdpbusd zmm */
}
__attribute__((target("avx2"))) static int64_t peak_avx2(void) {
    /* 8 independent chains a = vpmaddubsw(a, y) (the AVX2 int8 multiply rate; each result feeds
     * the next, so nothing can be hoisted, and 9 registers leave no spills). */
    __m256i y = _mm256_set1_epi8(3);
    __m256i a0 = _mm256_set1_epi8(1), a1 = _mm256_set1_epi8(2), a2 = _mm256_set1_epi8(3), a3 = _mm256_set1_epi8(4);
    __m256i a4 = _mm256_set1_epi8(5), a5 = _mm256_set1_epi8(6), a6 = _mm256_set1_epi8(7), a7 = _mm256_set1_epi8(8);
    __asm__ volatile("" : "+x"(y));
    for (int it = 0; it < PEAK_ITERS; it++) {
        a0 = _mm256_maddubs_epi16(a0, y); a1 = _mm256_maddubs_epi16(a1, y);
        a2 = _mm256_maddubs_epi16(a2, y); a3 = _mm256_maddubs_epi16(a3, y);
        a4 = _mm256_maddubs_epi16(a4, y); a5 = _mm256_maddubs_epi16(a5, y);
        a6 = _mm256_maddubs_epi16(a6, y); a7 = _mm256_maddubs_epi16(a7, y);
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)),
                          _mm256_xor_si256(_mm256_xor_si256(a4, a5), _mm256_xor_si256(a6, a7)));
    volatile int s = _mm256_extract_epi32(a0, 0);
    (void)s;
    return (int64_t)PEAK_ITERS * 8 * 32;
}
#endif
#if defined(__x86_64__) && defined(__linux__)   /* where the amx path runs (dispatch.c amx_permitted) */
/* The AMX tile rate: 4 independent tdpbsud chains (C tiles 0-3) on 2 A and 2 B tiles loaded
 * once (tiles 4-7), so the loop is the tile multiplier alone: 16 x 16 x 64 multiply-adds each. */
#define AMX_PEAK_ITERS 20000
__attribute__((target("amx-tile,amx-int8"))) static int64_t peak_amx(void) {
    struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    static int8_t src[2][16 * 64];
    for (int i = 0; i < 16 * 64; i++) src[0][i] = (int8_t)(i % 7 - 3), src[1][i] = (int8_t)(i % 5);
    _tile_loadconfig(&cfg);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, src[0], 64); _tile_loadd(5, src[1], 64); _tile_loadd(6, src[1], 64); _tile_loadd(7, src[0], 64);
    for (int it = 0; it < AMX_PEAK_ITERS; it++) {
        _tile_dpbsud(0, 4, 6); _tile_dpbsud(1, 4, 7); _tile_dpbsud(2, 5, 6); _tile_dpbsud(3, 5, 7);
    }
    int32_t out[16 * 16];
    _tile_stored(0, out, 64);
    _tile_release();
    volatile int32_t r = out[0];
    (void)r;
    return (int64_t)AMX_PEAK_ITERS * 4 * 16 * 16 * 64;
}
#endif
static bool g_vnni;
static bool g_peak_amx;   /* job_peak measures the AMX tile rate instead of the vector int8 rate */
typedef struct { double macs[8]; } peak_ctx;
static void job_peak(void *ctx, int64_t i0, int64_t i1, int ith) {
    (void)i0; (void)i1;
    const double c0 = busy_clock_s();
    peak_ctx *c = ctx;
#if defined(__x86_64__)
#if defined(__x86_64__) && defined(__linux__)
    if (g_peak_amx) {
        c->macs[ith] = (double)peak_amx();
        g_busy[ith] = busy_clock_s() - c0;
        return;
    }
#endif
    c->macs[ith] = (double)(g_vnni ? peak_vnni() : g_avx2 ? peak_avx2() : 0);
#else
    c->macs[ith] = 0;
#endif
    g_busy[ith] = busy_clock_s() - c0;
}
/* The int8 peak of `nt` threads: MACs over the slowest thread's busy time, the best of `reps`
 * short runs (GMAC/s). A shared VM's vCPUs can sit on one core's two hardware threads for a
 * while, which halves each thread's rate with no preemption to see, so bench-kernel probes it
 * again around every matmul it times and keeps the best reading of the run. */
static double peak_probe(tern_pool *pool, int nt, int reps) {
    double best = 0;
    busy_take(nt);
    for (int r = 0; r < reps; r++) {
        peak_ctx pc = {0};
        pool_run_all(pool, job_peak, &pc);
        const double t = busy_take(nt);
        double macs = 0;
        for (int i = 0; i < nt; i++) macs += pc.macs[i];
        if (t > 0 && macs / t / 1e9 > best) best = macs / t / 1e9;
    }
    return best;
}

static void job_empty(void *ctx, int64_t i0, int64_t i1, int ith) { (void)ctx; (void)i0; (void)i1; (void)ith; }

/* ---- kernels -------------------------------------------------------------------------------- */
typedef struct { const kern_w *w; const kern_act *a; float *y; int64_t ldy; } mm_ctx;
static void job_mm(void *ctx, int64_t r0, int64_t r1, int ith) {
    const double c0 = busy_clock_s();
    const mm_ctx *c = ctx;
    kern_matmul(c->w, c->a, c->y, c->ldy, r0, r1);
    g_busy[ith] += busy_clock_s() - c0;   /* a thread may run several chunks of one job */
}

static uint64_t g_rng = 88172645463325252ull;
static inline uint64_t rnd(void) { g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17; return g_rng; }

/* Random ternary weights (codes 0..2; scales ~0.01..0.05) in file layout. */
static uint8_t *make_weights(int type, int64_t K, int64_t N, size_t *bytes) {
    const int bb = type == 142 ? 34 : 28;
    *bytes = (size_t)(K / 128) * (size_t)bb * (size_t)N;
    uint8_t *p = tern_alloc_aligned(*bytes);
    if (!p) return NULL;
    uint8_t ok[81];
    for (int i = 0; i < 81; i++) ok[i] = (uint8_t)((i % 3) | (i / 3 % 3) << 2 | (i / 9 % 3) << 4 | (i / 27 % 3) << 6);
    for (size_t o = 0; o < *bytes; o += (size_t)bb) {
        const uint64_t r = rnd();
        const uint16_t d = (uint16_t)(0x2000 + (r & 0x7ff));      /* fp16 ~0.008 .. 0.016 */
        if (type == 142) {
            p[o] = (uint8_t)d; p[o + 1] = (uint8_t)(d >> 8);
            for (int j = 0; j < 32; j++) p[o + 2 + j] = ok[(rnd() >> 20) % 81];
        } else {
            for (int j = 0; j < 26; j++) p[o + j] = (uint8_t)(rnd() >> 24);
            p[o + 26] = (uint8_t)d; p[o + 27] = (uint8_t)(d >> 8);
        }
    }
    return p;
}

#define BK_ISA_NAMES "ref, avx2, avxvnni, avx512vnni, amx, neon, dotprod, i8mm"
/* The 1-based place of the --isa item that starts at p in list (items separated by one ',', or by
 * the NUL that strtok wrote over it). */
static size_t bk_count_items(const char *list, const char *p) {
    size_t k = 1;
    for (const char *q = list; q < p; q++) k += *q == ',' || *q == '\0';
    return k;
}

static bool isa_wanted(const bk_opts *o, const char *name) {
    if (!o->isa[0]) return true;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", o->isa);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (strcmp(t, name) == 0) return true;
    return false;
}

/* Time one (weight, activation) on the pool: busy and wall seconds, median/min/max over reps. */
static stat3 time_mm(tern_pool *pool, const kern_w *w, const kern_act *a, float *y, int64_t rows, int reps, bool warm,
                     stat3 *wall) {
    mm_ctx c = {w, a, y, w->n_out};
    double t[64], tb[64];
    if (warm) pool_for(pool, rows, KERN_ROW_SPLIT, job_mm, &c);   /* warm-up (also faults pages in) */
    busy_take(pool_n_threads(pool));
    for (int i = 0; i < reps; i++) {
        const double t0 = tern_time_s();
        pool_for(pool, rows, KERN_ROW_SPLIT, job_mm, &c);
        t[i] = tern_time_s() - t0;
        tb[i] = busy_take(pool_n_threads(pool));
    }
    *wall = stats(t, reps);
    return stats(tb, reps);
}

/* ---- decode sequence: the per-layer matvecs of bonsai-1.7b ------------------------------------
 * L distinct layers (more bytes than the L3) of q/k/v (one job over the row-concatenated 2048 +
 * 1024 + 1024 rows), o (2048x2048), gate + up (one job, 2 x 6144x2048, rows split by 128 as
 * blk_ffn_up), down (2048x6144), each a pool job as in the model's decode (no norm/attention
 * work between them). Rows split on 16-row boundaries (KERN_ROW_SPLIT, as blk_project_job): a
 * range edge inside a 16-row group makes both threads compute the whole group. Variants,
 * interleaved per repeat, each but hot after an untimed read of the probe's 512 MiB buffer, so
 * none starts with the weights the one before it left in the L3 (jobs, fixed and nobar read the
 * same 107 MB: without that read, nobar, run after fixed, read above the probe in some repeats
 * on a 32 MB L3):
 *   jobs     one pool job per projection (the model's barriers; rows claimed as the model's
 *            one-column projections claim them, pool_for_dyn down to 64 rows);
 *   fixed    one pool job per projection, each thread its fixed share of the rows (pool_split):
 *            beside jobs, the cost of the claims alone;
 *   nobar    one job: each thread runs its share of every projection of every layer with no
 *            barrier between them (not a valid forward: the cost of the barriers alone);
 *   lm_head  151936x2048 alone (83 MB);
 *   71MB     the 32768x8192 matvec of the main table;
 *   hot      layer 0's attn_output (2048x2048, 1.1 MB) 64 times in fixed shares: the weights
 *            stay in cache, so this is the kernel's own rate (decode is compute-bound wherever
 *            it is below the probe).
 * GB/s of weights over the busy time (per job, the slowest thread's wall time inside its calls:
 * g_busy_wall), against the 2-thread read bandwidth measured the same way (512 MiB) in the same repeat; wall
 * GB/s beside it. */
enum { DS_QKV, DS_O, DS_GU, DS_DOWN, DS_N };
typedef struct {
    const kern_w *w[DS_N][2];      /* per projection of one layer (gate + up: 2) */
    const kern_act *a[DS_N];
    float *y[2];
    int nt;
    int kind;                      /* DS_* of this job, or -1: the whole sweep (nobar) */
    bool fixed;                    /* the job's rows in fixed shares (pool_run_all), not claimed */
    const kern_w *(*layers)[DS_N][2];
    int n_layer;
} ds_ctx;

static void ds_range(int kind, const kern_w *w, int nt, int ith, int64_t *i0, int64_t *i1) {
    pool_split(w->n_out, kind == DS_GU ? 128 : KERN_ROW_SPLIT, nt, ith, i0, i1);
}
static void job_ds_body(void *ctx, int64_t r0, int64_t r1, int ith);
static void ds_run(const kern_w *const *w, int kind, const kern_act *a, float *const *y, int64_t r0, int64_t r1) {
    kern_matmul(w[0], a, y[0], w[0]->n_out, r0, r1);
    if (kind == DS_GU) kern_matmul(w[1], a, y[1], w[1]->n_out, r0, r1);
}
static void job_ds(void *ctx, int64_t r0, int64_t r1, int ith) {
    const double c0 = busy_clock_s();
    job_ds_body(ctx, r0, r1, ith);
    g_busy[ith] += busy_clock_s() - c0;
}
static void job_ds_body(void *ctx, int64_t r0, int64_t r1, int ith) {
    const ds_ctx *c = ctx;
    if (c->kind >= 0 && c->fixed) {
        ds_range(c->kind, c->w[c->kind][0], c->nt, ith, &r0, &r1);
        if (r0 < r1) ds_run(c->w[c->kind], c->kind, c->a[c->kind], c->y, r0, r1);
        return;
    }
    if (c->kind >= 0) {
        ds_run(c->w[c->kind], c->kind, c->a[c->kind], c->y, r0, r1);
        return;
    }
    (void)r0; (void)r1;
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < DS_N; k++) {
            int64_t i0, i1;
            ds_range(k, c->layers[l][k][0], c->nt, ith, &i0, &i1);
            if (i0 < i1) ds_run(c->layers[l][k], k, c->a[k], c->y, i0, i1);
        }
}

static int bench_decode_seq(const bk_opts *o, tern_pool *pool, int nt, int reps) {
    enum { L = 8 };
    const int64_t D = 2048, F = 6144, V = 151936;
    const int64_t shp[DS_N][2] = {{4096, D}, {D, D}, {F, D}, {D, F}};   /* (N, K) */
    kern_w ws[L][DS_N][2], out;
    uint8_t *data[L][DS_N][2], *out_data = NULL;
    const kern_w *layers[L][DS_N][2];
    memset(data, 0, sizeof data);
    tern_err err = {0};
    double bytes = 0;
    int rc = 0;
    /* one buffer for all layers (huge pages, as the model's weights in the file buffer) */
    size_t total = 0;
    for (int k = 0; k < DS_N; k++) total += (size_t)(shp[k][1] / 128) * 34 * (size_t)shp[k][0] * (k == DS_GU ? 2 : 1);
    uint8_t *all = tern_alloc_aligned(total * L);
    if (!all) return 1;
    size_t at = 0;
    for (int l = 0; l < L && !rc; l++)
        for (int k = 0; k < DS_N && !rc; k++)
            for (int h = 0; h < (k == DS_GU ? 2 : 1); h++) {
                size_t b;
                uint8_t *tmp = make_weights(142, shp[k][1], shp[k][0], &b);
                if (!tmp) { rc = 1; break; }
                memcpy(all + at, tmp, b);
                tern_free_aligned(tmp);
                data[l][k][h] = all + at;
                at += b;
                if (kern_w_init_ex(&ws[l][k][h], "w", 142, data[l][k][h], shp[k][1], shp[k][0], 0, &err)) {
                    rc = 1;
                    break;
                }
                layers[l][k][h] = &ws[l][k][h];
                if (h == 0) layers[l][k][1] = NULL;
                bytes += (double)kern_w_bytes(&ws[l][k][h]);
            }
    size_t ob = 0, bgb = 0;
    kern_w big;
    uint8_t *big_data = NULL;
    if (!rc) {
        out_data = make_weights(142, D, V, &ob);
        if (!out_data || kern_w_init_ex(&out, "out", 142, out_data, D, V, 0, &err)) rc = 1;
    }
    if (!rc) {
        big_data = make_weights(142, 8192, 32768, &bgb);
        if (!big_data || kern_w_init_ex(&big, "big", 142, big_data, 8192, 32768, 0, &err)) rc = 1;
    }
    if (rc) { fprintf(stderr, "bench-kernel: %s\n", err.msg[0] ? err.msg : "out of memory"); return 1; }
    float *x = tern_alloc_aligned(sizeof(float) * (size_t)F), *y0 = tern_alloc_aligned(sizeof(float) * (size_t)V),
          *y1 = tern_alloc_aligned(sizeof(float) * (size_t)F);
    void *qd = tern_alloc_aligned(kern_act_bytes(KQ_FAST, D, 1)), *qf = tern_alloc_aligned(kern_act_bytes(KQ_FAST, F, 1));
    float *xb = tern_alloc_aligned(sizeof(float) * 8192), *yb = tern_alloc_aligned(sizeof(float) * 32768);
    void *qb = tern_alloc_aligned(kern_act_bytes(KQ_FAST, 8192, 1));
    for (int i = 0; i < 8192; i++) xb[i] = (float)((rnd() >> 40) % 2001) / 1000.0f - 1.0f;
    kern_act abig = {.x = xb, .q = qb, .K = 8192, .ncols = 1, .mode = KQ_FAST};
    kern_quantize(&abig);
    for (int64_t i = 0; i < F; i++) x[i] = (float)((rnd() >> 40) % 2001) / 1000.0f - 1.0f;
    kern_act ad = {.x = x, .q = qd, .K = D, .ncols = 1, .mode = KQ_FAST}, af = {.x = x, .q = qf, .K = F, .ncols = 1, .mode = KQ_FAST};
    kern_quantize(&ad);
    kern_quantize(&af);
    ds_ctx c = {.a = {&ad, &ad, &ad, &af}, .y = {y0, y1}, .nt = nt, .layers = layers, .n_layer = L};
    enum { V_JOBS, V_FIXED, V_NOBAR, V_LMHEAD, V_BIG, V_HOT, V_N };
    const char *names[V_N] = {"jobs", "fixed", "nobar", "lm_head", "71MB", "hot"};
    enum { HOT_REPS = 64 };
    double t[V_N][64], tw[V_N][64];
    double bwv[64];
    const int64_t n_bw = ((int64_t)512 << 20) / 8;
    uint64_t *bw_buf = tern_alloc_aligned((size_t)n_bw * 8);
    if (!bw_buf) return 1;
    memset(bw_buf, 1, (size_t)n_bw * 8);
    for (int r = -1; r < reps; r++) {
        double b = 0;
        {
            bw_ctx bc = {.buf = bw_buf};
            busy_take(nt);
            pool_for(pool, n_bw, 4096, job_bw, &bc);
            b = (double)n_bw * 8 / busy_take(nt) / 1e9;
        }
        for (int v = 0; v < V_N; v++) {
            double busy = 0;
            if (v != V_HOT) {   /* the cache holds none of this variant's weights (above) */
                bw_ctx fc = {.buf = bw_buf};
                pool_for(pool, n_bw, 4096, job_bw, &fc);
            }
            busy_take(nt);
            const double t0 = tern_time_s();
            c.fixed = v == V_FIXED || v == V_HOT;
            if (v == V_BIG) {
                mm_ctx mc = {&big, &abig, yb, 32768};
                pool_for(pool, 32768, KERN_ROW_SPLIT, job_mm, &mc);
                busy = busy_take(nt);
            } else if (v == V_NOBAR) {
                c.kind = -1;
                pool_run_all(pool, job_ds, &c);
            } else if (v == V_LMHEAD) {
                c.kind = DS_O;   /* one projection: lm_head */
                const kern_w *wo[2] = {&out, NULL};
                memcpy(c.w[DS_O], wo, sizeof wo);
                pool_for(pool, V, KERN_ROW_SPLIT, job_ds, &c);
                busy += busy_take(nt);
            } else if (v == V_HOT) {
                memcpy(c.w, layers[0], sizeof c.w);
                c.kind = DS_O;
                for (int i = 0; i < HOT_REPS; i++) {
                    pool_run_all(pool, job_ds, &c);
                    busy += busy_take(nt);
                }
            } else {   /* V_JOBS, V_FIXED */
                for (int l = 0; l < L; l++)
                    for (int k = 0; k < DS_N; k++) {
                        memcpy(c.w, layers[l], sizeof c.w);
                        c.kind = k;
                        if (c.fixed) pool_run_all(pool, job_ds, &c);
                        else pool_for_dyn(pool, shp[k][0], k == DS_GU ? 128 : KERN_ROW_SPLIT, k == DS_GU ? 128 : 64, INT64_MAX,
                                          job_ds, &c);   /* claims as blk_project_job / blk_ffn_up */
                        busy += busy_take(nt);
                    }
            }
            if (v == V_NOBAR) busy = busy_take(nt);
            if (r >= 0) { t[v][r] = busy; tw[v][r] = tern_time_s() - t0; }
        }
        if (r >= 0) bwv[r] = b;
    }
    const stat3 sb = stats(bwv, reps);
    char line[512];
    for (int v = 0; v < V_N; v++) {
        const double by = v == V_LMHEAD ? (double)kern_w_bytes(&out)
                        : v == V_BIG    ? (double)kern_w_bytes(&big)
                        : v == V_HOT    ? HOT_REPS * (double)kern_w_bytes(layers[0][DS_O][0])
                                        : bytes;
        double g[64], gw[64];
        for (int r = 0; r < reps; r++) { g[r] = by / t[v][r] / 1e9; gw[r] = by / tw[v][r] / 1e9; }
        const stat3 s = stats(g, reps), swl = stats(gw, reps);
        char what[48];   /* the bytes read: hot reads one matrix HOT_REPS times */
        if (v == V_HOT) snprintf(what, sizeof what, "%.1f MB x %d", by / HOT_REPS / 1e6, HOT_REPS);
        else snprintf(what, sizeof what, "%.0f MB", by / 1e6);
        /* every variant but hot reads DRAM: above the probe, its threads did not run at once
         * (another process held a CPU: each thread's calls took a part of the wall time), or
         * the bus moved between the probe and the variant; either way not a result */
        const bool over = v != V_HOT && s.med > sb.max;
        snprintf(line, sizeof line, "decode-seq %-8s t%d: %6.2f GB/s [%.2f, %.2f] busy = %5.1f%% of the best probe pass %.1f GB/s; wall %.2f GB/s (%s)%s",
                 names[v], nt, s.med, s.min, s.max, 100 * s.med / sb.max, sb.max, swl.med, what,
                 over ? " [above the probe: the threads did not run at once, or the bus moved; not a result]" : "");
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "op", "decode_seq");
        cJSON_AddStringToObject(j, "variant", names[v]);
        cJSON_AddNumberToObject(j, "threads", nt);
        cJSON_AddNumberToObject(j, "gbytes_per_s", s.med);
        cJSON_AddNumberToObject(j, "gbytes_per_s_wall", swl.med);
        cJSON_AddNumberToObject(j, "bw_gbytes_per_s", sb.max);
        cJSON_AddNumberToObject(j, "frac_of_ceiling", s.med / sb.max);
        cJSON_AddBoolToObject(j, "above_ceiling", over);
        emit(o, j, line);
    }
    for (int l = 0; l < L; l++)
        for (int k = 0; k < DS_N; k++)
            for (int h = 0; h < (k == DS_GU ? 2 : 1); h++) kern_w_free(&ws[l][k][h]);
    tern_free_aligned(all);
    kern_w_free(&out);
    tern_free_aligned(out_data);
    kern_w_free(&big);
    tern_free_aligned(big_data); tern_free_aligned(xb); tern_free_aligned(yb); tern_free_aligned(qb);
    tern_free_aligned(x); tern_free_aligned(y0); tern_free_aligned(y1); tern_free_aligned(qd); tern_free_aligned(qf);
    tern_free_aligned(bw_buf);
    return 0;
}

/* ---- float weights at 1-8 columns (the float path of a batched decode on an F16 / F32 model) ---
 * 128 MiB each (far above the L3): F16 32768 x 2048 and F32 16384 x 2048, on the best path, 1, 2,
 * 4 and 8 columns in one call each: weight GB/s over the busy time against the read bandwidth of
 * the same thread count (the probe above; a batch streams the weights once, so a memory-bound
 * kernel keeps the same GB/s at every column count), and each column count's time over the
 * 1-column time (what `tern bench-spec --cost` calls the cost of P columns in single steps, for
 * this matrix alone). */
static int bench_f16(const bk_opts *o, tern_pool **pools, const double *bw, int reps) {
    const int64_t K = 2048;
    const int cols[] = {1, 2, 4, 8};
    const struct { const char *label; int type; int64_t N; size_t es; } types[] = {
        {"f16", 1, 32768, 2},
        {"f32", 0, 16384, 4},
    };
    float *x = tern_alloc_aligned(sizeof(float) * (size_t)(K * 8));
    float *y = tern_alloc_aligned(sizeof(float) * (size_t)(32768 * 8));
    int rc = 0;
    if (!x || !y) {
        fprintf(stderr, "bench-kernel: out of memory\n");
        rc = 1;
    }
    for (int64_t i = 0; x && i < K * 8; i++) x[i] = (float)((rnd() >> 40) % 2001) / 1000.0f - 1.0f;
    for (size_t ty = 0; ty < sizeof types / sizeof types[0] && !rc; ty++) {
        const int64_t N = types[ty].N;
        uint8_t *data = tern_alloc_aligned(types[ty].es * (size_t)(K * N));
        tern_err err = {0};
        kern_w w;
        if (!data) {
            fprintf(stderr, "bench-kernel: out of memory\n");
            rc = 1;
            break;
        }
        for (int64_t i = 0; i < K * N; i++) {   /* finite weights of either sign, |w| in [2^-8, 2^-6) */
            const uint16_t h = (uint16_t)(((rnd() >> 30) & 0x83ffu) | 0x1c00u);
            if (types[ty].es == 2) ((uint16_t *)(void *)data)[i] = h;
            else ((float *)(void *)data)[i] = fp16_to_f32(h);
        }
        if (kern_w_init(&w, types[ty].label, types[ty].type, data, K, N, &err) != TERN_OK) {
            fprintf(stderr, "bench-kernel: %s\n", err.msg);
            tern_free_aligned(data);
            rc = 1;
            break;
        }
        for (int ti = 0; ti < o->n_threads; ti++) {
            double t1 = 0;
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
                kern_act a = {.x = x, .q = NULL, .K = K, .ncols = cols[ci], .mode = KQ_FAST};
                stat3 sw;
                const stat3 s = time_mm(pools[ti], &w, &a, y, N, reps, true, &sw);
                if (ci == 0) t1 = s.med;
                const double by = (double)kern_w_bytes(&w), gb = by / s.med / 1e9;
                char line[256];
                snprintf(line, sizeof line,
                         "%s matmul %-10s t%d %5lldx%lld x%d: %6.2f GB/s [%.2f, %.2f] = %5.1f%% of bandwidth; %.2fx the 1-column time",
                         types[ty].label, kern_isa(), o->threads[ti], (long long)N, (long long)K, cols[ci], gb,
                         by / s.max / 1e9, by / s.min / 1e9, 100 * gb / bw[ti], s.med / t1);
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "isa", kern_isa());
                cJSON_AddStringToObject(j, "op", "matmul");
                cJSON_AddStringToObject(j, "type", types[ty].es == 2 ? "F16" : "F32");
                cJSON_AddNumberToObject(j, "threads", o->threads[ti]);
                cJSON_AddNumberToObject(j, "rows", (double)N);
                cJSON_AddNumberToObject(j, "cols", (double)K);
                cJSON_AddNumberToObject(j, "ncols", cols[ci]);
                cJSON_AddNumberToObject(j, "seconds", s.med);
                cJSON_AddNumberToObject(j, "seconds_min", s.min);
                cJSON_AddNumberToObject(j, "seconds_max", s.max);
                cJSON_AddNumberToObject(j, "gbytes_per_s", gb);
                cJSON_AddNumberToObject(j, "bw_gbytes_per_s", bw[ti]);
                cJSON_AddNumberToObject(j, "frac_of_ceiling", gb / bw[ti]);
                cJSON_AddNumberToObject(j, "x_one_column", s.med / t1);
                emit(o, j, line);
            }
        }
        kern_w_free(&w);
        tern_free_aligned(data);
    }
    tern_free_aligned(x);
    tern_free_aligned(y);
    return rc;
}

enum { BK_JSON = 1, BK_QUICK, BK_ISA, BK_THREADS, BK_DECODE, BK_F16, BK_SAMPLER, BK_ATTN, BK_GDN };
static const opt_def bk_defs[] = {
    {BK_JSON, "--json", OPT_FLAG, NULL, 0, 0, NULL, "one JSON object per line"},
    {BK_QUICK, "--quick", OPT_FLAG, NULL, 0, 0, NULL, "3 repeats instead of 15"},
    {BK_ISA, "--isa", OPT_TEXT, "LIST", 0, 0, NULL, "ISA paths to measure: ref and, on x86, avx2,avxvnni,avx512vnni,amx, on ARM, neon,dotprod,i8mm (default: all this CPU runs)"},
    {BK_THREADS, "--threads, -t", OPT_LIST, "LIST", 1, OPT_HI_THREADS, NULL, "thread counts (default 1,2)"},
    {BK_DECODE, "--decode-seq", OPT_FLAG, NULL, 0, 0, NULL,
     "only bonsai-1.7b's decode matvecs, busy GB/s against the probe: 8 layers as pool jobs (rows claimed, fixed shares), the same as one job without barriers, the LM head, and one 2048x2048 matrix with its weights in cache"},
    {BK_F16, "--f16", OPT_FLAG, NULL, 0, 0, NULL,
     "after the probes, only the F16 and F32 matmuls (128 MiB each, K 2048) at 1, 2, 4, 8 columns: weight GB/s vs the bandwidth and time vs 1 column"},
    {BK_SAMPLER, "--sampler", OPT_FLAG, NULL, 0, 0, NULL,
     "only the sampler: ms per token at 151936 and 248320 logits, flat and peaked, for the llama.cpp defaults and with top-k off"},
    {BK_ATTN, "--attn", OPT_FLAG, NULL, 0, 0, NULL,
     "only the prefill attention tile: one bonsai-1.7b layer at 512 positions per ops table this CPU runs, 1 thread, against the f32 multiply + add peak"},
    {BK_GDN, "--gdn", OPT_FLAG, NULL, 0, 0, NULL,
     "only the Gated DeltaNet delta rule: bonsai2-27b's 48 layers of recurrent state (151 MB, in copies past twice the last-level cache: up to ~1 GB here and there) at 1, 2, 3, 5, 8, 16 tokens per call: ms per forward, time vs 1 token, and the 1-token pass against the read bandwidth"},
};

/* ---- sampler -------------------------------------------------------------------------------- */
/* tern_sampler_sample on vocabulary-sized logits (one thread; the sampler is serial): flat
 * (every logit within 0.01 of the others: top-p keeps ~95% of the vocabulary) and peaked (a
 * Zipf-like fall-off), per setting; median, min and max ms per token over the repeats. */
static int bench_sampler(const bk_opts *o) {
    static const int32_t vocabs[] = {151936, 248320};
    static const struct { const char *name; float temp; int32_t top_k; float top_p, min_p; } set[] = {
        {"default(k40,p0.95,minp0.05)", 0.8f, 40, 0.95f, 0.05f},
        {"top_p0.95", 1.0f, 0, 0.95f, 0.0f},
        {"top_p0.95,min_p0.05", 1.0f, 0, 0.95f, 0.05f},
        {"full_softmax", 1.0f, 0, 1.0f, 0.0f},
        {"greedy", 0.0f, 0, 1.0f, 0.0f},
    };
    const int reps = o->quick ? 9 : 41;
    char line[512];
    if (!o->json) printf("| vocab | logits | setting | ms/token (median) | min | max |\n|---:|---|---|---:|---:|---:|\n");
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        const int32_t V = vocabs[vi];
        float *l = malloc((size_t)V * sizeof *l);
        if (!l) { fprintf(stderr, "tern bench-kernel: no memory for %d logits\n", V); return 1; }
        for (int shape = 0; shape < 2; shape++) {
            for (int32_t i = 0; i < V; i++) {
                const double u = (double)(rnd() >> 11) / 9007199254740992.0;
                l[i] = shape == 0 ? (float)(0.01 * u) : (float)(-3.0 * log1p((double)i) + u);
            }
            for (size_t si = 0; si < sizeof set / sizeof set[0]; si++) {
                tern_sampler_params p;
                tern_sampler_params_default(&p);
                p.temp = set[si].temp;
                p.top_k = set[si].top_k;
                p.top_p = set[si].top_p;
                p.min_p = set[si].min_p;
                p.seed = 1;
                tern_sampler *s = NULL;
                tern_err err = {0};
                if (tern_sampler_init_vocab(&s, V, &p, &err) != TERN_OK) {
                    fprintf(stderr, "tern bench-kernel: %s\n", err.msg);
                    free(l);
                    return 1;
                }
                double t[64];
                int32_t sink = 0;
                for (int r = 0; r < reps + 1; r++) {
                    const double t0 = tern_time_s();
                    sink += tern_sampler_sample(s, l);
                    if (r > 0) t[r - 1] = (tern_time_s() - t0) * 1e3;
                }
                tern_sampler_free(s);
                const stat3 st = stats(t, reps);
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "test", "sampler");
                cJSON_AddNumberToObject(j, "n_vocab", V);
                cJSON_AddStringToObject(j, "logits", shape == 0 ? "flat" : "peaked");
                cJSON_AddStringToObject(j, "setting", set[si].name);
                cJSON_AddNumberToObject(j, "ms_median", st.med);
                cJSON_AddNumberToObject(j, "ms_min", st.min);
                cJSON_AddNumberToObject(j, "ms_max", st.max);
                cJSON_AddNumberToObject(j, "sink", sink);
                snprintf(line, sizeof line, "| %d | %s | %s | %.3f | %.3f | %.3f |", V, shape == 0 ? "flat" : "peaked",
                         set[si].name, st.med, st.min, st.max);
                emit(o, j, line);
            }
        }
        free(l);
    }
    return 0;
}

/* ---- prefill attention tile ----------------------------------------------------------------- */
#if defined(__x86_64__)
/* The f32 rate of the attention's float order (a multiply, then an add: no fused multiply-add) on
 * 8-lane ymm (the best of 25 runs of ~5 ms: the neighbours of a shared host slow single runs
 * by up to 2x): 7 independent multiply chains and 7 independent add chains per iteration (14
 * accumulators + the 2 constants fill the 16 ymm registers; the multiplier 1 and the addend 0
 * keep every value at 1, never subnormal); 56 multiply-adds per iteration. */
#define FPEAK_ITERS (1 << 22)
#define FPEAK_MUL(a, c) __asm__("vmulps %1, %0, %0" : "+x"(a) : "x"(c))
#define FPEAK_ADD(a, c) __asm__("vaddps %1, %0, %0" : "+x"(a) : "x"(c))
/* The timed loop of both widths: 7 multiply chains m0..m6 by one, 7 add chains a0..a6 of zero. */
#define FPEAK_LOOP(MUL, ADD)                                                                     \
    for (int it = 0; it < FPEAK_ITERS; it++) {                                                   \
        MUL(m0, one); ADD(a0, zero); MUL(m1, one); ADD(a1, zero); MUL(m2, one); ADD(a2, zero);   \
        MUL(m3, one); ADD(a3, zero); MUL(m4, one); ADD(a4, zero); MUL(m5, one); ADD(a5, zero);   \
        MUL(m6, one); ADD(a6, zero);                                                             \
    }
__attribute__((target("avx2"))) static int64_t fpeak_avx2(void) {
    __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    __m256 m0 = one, m1 = one, m2 = one, m3 = one, m4 = one, m5 = one, m6 = one;
    __m256 a0 = one, a1 = one, a2 = one, a3 = one, a4 = one, a5 = one, a6 = one;
    __asm__ volatile("" : "+x"(one), "+x"(zero));
    FPEAK_LOOP(FPEAK_MUL, FPEAK_ADD);
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(m0, m1), _mm256_add_ps(m2, m3)),
                                   _mm256_add_ps(_mm256_add_ps(m4, m5), m6));
    const __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(a4, a5), a6));
    volatile float r = _mm256_cvtss_f32(_mm256_add_ps(s, t));
    (void)r;
    return (int64_t)FPEAK_ITERS * 7 * 8;
}

/* The same on 16-lane zmm: the ceiling of the AVX-512 table, whose vectors hold two 8-lane ones
 * side by side (the same rate as ymm where the unit is 256 bits wide, twice it where 512). */
#define FPEAK_MUL512(a, c) __asm__("vmulps %1, %0, %0" : "+v"(a) : "v"(c))
#define FPEAK_ADD512(a, c) __asm__("vaddps %1, %0, %0" : "+v"(a) : "v"(c))
__attribute__((target("avx512f"))) static int64_t fpeak_avx512(void) {
    __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    __m512 m0 = one, m1 = one, m2 = one, m3 = one, m4 = one, m5 = one, m6 = one;
    __m512 a0 = one, a1 = one, a2 = one, a3 = one, a4 = one, a5 = one, a6 = one;
    __asm__ volatile("" : "+v"(one), "+v"(zero));
    FPEAK_LOOP(FPEAK_MUL512, FPEAK_ADD512);
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(m0, m1), _mm512_add_ps(m2, m3)),
                                   _mm512_add_ps(_mm512_add_ps(m4, m5), m6));
    const __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                   _mm512_add_ps(_mm512_add_ps(a4, a5), a6));
    volatile float r = _mm512_reduce_add_ps(_mm512_add_ps(s, t));
    (void)r;
    return (int64_t)FPEAK_ITERS * 7 * 16;
}
#endif

/* blk_attn_tile of every ops table this CPU runs on one layer of bonsai-1.7b's attention shape
 * (512 positions, 8 KV heads and 16 query heads of 128, fp16 K/V, causal) in the tiles prefill
 * uses (4 positions x the 2 query heads of a KV head, longest first), one thread: ms per layer
 * (median, min, max of the repeats), GMAC/s (score and weighted-V multiply-adds) and the fraction
 * of the f32 multiply + add peak measured right before (x86 with AVX2; elsewhere GMAC/s only).
 * Every table's outputs are compared bit for bit with the portable one's (they must agree). */
static int bench_attn(const bk_opts *o) {
    enum { P = 512, HKV = 8, NH = 16, HD = 128, TQ = 4 };
    const size_t nkv = (size_t)P * HKV * HD, nq = (size_t)P * NH * HD;
    uint16_t *k = malloc(nkv * sizeof *k), *v = malloc(nkv * sizeof *v);
    float *q = malloc(nq * sizeof *q), *out = malloc(nq * sizeof *out), *ref = malloc(nq * sizeof *ref);
    float *S = malloc((size_t)BLK_ATTN_NQ * P * sizeof *S);
    if (!k || !v || !q || !out || !ref || !S) {
        fprintf(stderr, "tern bench-kernel: no memory for the attention buffers\n");
        free(k); free(v); free(q); free(out); free(ref); free(S);
        return 1;
    }
    for (size_t i = 0; i < nkv; i++) {
        k[i] = f32_to_fp16((float)((double)(rnd() >> 11) / 4503599627370496.0 - 1.0));
        v[i] = f32_to_fp16((float)((double)(rnd() >> 11) / 4503599627370496.0 - 1.0));
    }
    for (size_t i = 0; i < nq; i++) q[i] = (float)(((double)(rnd() >> 11) / 4503599627370496.0 - 1.0) * 3.0);
    blk_init();   /* the portable table's fp16 widening table */
    const blk_kv_view kv = {.k = k, .v = v, .k_stride = HD, .v_stride = HD, .k_head = (size_t)P * HD,
                            .v_head = (size_t)P * HD, .f32 = false};
    const float scale = 1.0f / sqrtf((float)HD);
    double macs = 0;
    for (int c = 0; c < P; c++) macs += (double)NH * (c + 1) * (2.0 * HD);
    double fpeak8 = 0, fpeak16 = 0;   /* ymm, zmm */
#if defined(__x86_64__)
    const bool avx512 = g_vnni && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
    for (int r = 0; g_avx2 && r < 25; r++) {   /* the best of short runs, as the int8 peak */
        double t0 = tern_time_s();
        int64_t n = fpeak_avx2();
        double rate = (double)n / (tern_time_s() - t0) / 1e9;
        fpeak8 = rate > fpeak8 ? rate : fpeak8;
        if (!avx512) continue;
        t0 = tern_time_s();
        n = fpeak_avx512();
        rate = (double)n / (tern_time_s() - t0) / 1e9;
        fpeak16 = rate > fpeak16 ? rate : fpeak16;
    }
#endif
    const int reps = o->quick ? 3 : 15;
    char line[512];
    int rc = 0;
    for (int ti = 0; model_ops_all[ti]; ti++) {
        const model_ops *ops = model_ops_all[ti];
#if defined(__x86_64__)
        if (!strcmp(ops->name, "avx2") && !(g_avx2 && __builtin_cpu_supports("f16c"))) continue;
        if (!strcmp(ops->name, "avx512") && !avx512) continue;
#endif
        const bool zmm = !strcmp(ops->name, "avx512");
        const double fpeak = zmm ? fpeak16 : fpeak8;
        double t[16];
        for (int r = 0; r < reps + 1; r++) {   /* the first run warms the caches and is not counted */
            const double t0 = tern_time_s();
            for (int g = 0; g < HKV; g++)
                for (int kt = P / TQ - 1; kt >= 0; kt--) {
                    const float *qq[BLK_ATTN_NQ];
                    float *oo[BLK_ATTN_NQ];
                    int n_kv[BLK_ATTN_NQ], m = 0;
                    for (int c = kt * TQ; c < kt * TQ + TQ; c++)
                        for (int h = 2 * g; h < 2 * g + 2; h++) {
                            qq[m] = q + ((size_t)c * NH + h) * HD;
                            oo[m] = out + ((size_t)c * NH + h) * HD;
                            n_kv[m++] = c + 1;
                        }
                    ops->attn_tile(m, qq, oo, n_kv, &kv, g, HD, HD, scale, S);
                }
            if (r > 0) t[r - 1] = (tern_time_s() - t0) * 1e3;
        }
        if (ti == 0) memcpy(ref, out, nq * sizeof *out);
        else if (memcmp(ref, out, nq * sizeof *out) != 0) {
            fprintf(stderr, "tern bench-kernel: the %s attention tile differs from the portable one\n", ops->name);
            rc = 1;
        }
        const stat3 st = stats(t, reps);
        const double gmacs = macs / (st.med * 1e-3) / 1e9;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "test", "attn_tile");
        cJSON_AddStringToObject(j, "ops", ops->name);
        cJSON_AddNumberToObject(j, "threads", 1);
        cJSON_AddNumberToObject(j, "positions", P);
        cJSON_AddNumberToObject(j, "ms_median", st.med);
        cJSON_AddNumberToObject(j, "ms_min", st.min);
        cJSON_AddNumberToObject(j, "ms_max", st.max);
        cJSON_AddNumberToObject(j, "gmacs", gmacs);
        if (fpeak > 0) cJSON_AddNumberToObject(j, "f32_peak_gmacs", fpeak);
        if (fpeak > 0)
            snprintf(line, sizeof line,
                     "attn tile %-8s t1 bonsai-1.7b layer, %d positions: %7.2f ms [%.2f, %.2f] %6.2f GMAC/s = %5.1f%% of the f32 mul+add peak %.1f (%s)",
                     ops->name, P, st.med, st.min, st.max, gmacs, 100.0 * gmacs / fpeak, fpeak, zmm ? "zmm" : "ymm");
        else
            snprintf(line, sizeof line, "attn tile %-8s t1 bonsai-1.7b layer, %d positions: %7.2f ms [%.2f, %.2f] %6.2f GMAC/s",
                     ops->name, P, st.med, st.min, st.max, gmacs);
        emit(o, j, line);
    }
    free(k); free(v); free(q); free(out); free(ref); free(S);
    return rc;
}

/* ---- Gated DeltaNet recurrence --------------------------------------------------------------- */
/* gdn_layer_heads (the token-by-token delta rule with the gated norm, fast numerics: what a
 * verification or a batch of up to 16 tokens runs) over bonsai2-27b's shape: 48 GDN layers of 48
 * v-heads x 128 x 128 f32 state, 151 MB. In the model the 7 GB of weights streamed between two
 * layers push the state out of the caches; here copies of the 48 layers, at least twice the
 * last-level cache in all, are run in turn, so the state streams from memory and back as there.
 * One pool job per layer, the heads split over the threads. Per token count: ms per 48 layers
 * (median, min, max), the time over the 1-token time, and for 1 token the state's read + write
 * traffic over the time against the read bandwidth of the same threads probed right before (one
 * token is bound by that traffic; more tokens add arithmetic on the same bytes; the writes stream
 * beside the reads, so the share of a read-only probe can pass 100%). */
enum { GDN_BK_LAYERS = 48 };
typedef struct {
    const gdn_dims *g;
    int n;
    const float *u, *gam, *beta, *z, *nw;
    float *S, *y;
} gdn_bk_job;
static void job_gdn_bk(void *ctx, int64_t h0, int64_t h1, int ith) {
    (void)ith;
    const gdn_bk_job *j = ctx;
    gdn_layer_heads(j->g, j->n, j->u, j->gam, j->beta, j->z, j->nw, j->S, j->y, (int)h0, (int)h1, false, NULL);
}
static int bench_gdn(const bk_opts *o, tern_pool *pool, int nt, int reps) {
    static const gdn_dims g = {.n_k_head = 16, .n_v_head = 48, .d_head = 128, .d_conv = 4, .eps = 1e-6f, .ggml = false};
    const int64_t nch = gdn_n_ch(&g), dz = (int64_t)g.n_v_head * g.d_head;
    const int64_t per_layer = dz * g.d_head, nmax = 16;
    const size_t state = sizeof(float) * (size_t)per_layer * GDN_BK_LAYERS;
    const unsigned long long llc = opts_llc_bytes();
    const int copies = (int)TERN_MAX(1ull, (2 * llc + state - 1) / state);
    const int n_layers = GDN_BK_LAYERS * copies;
    float *S = tern_alloc_aligned(state * (size_t)copies);
    float *u = malloc(sizeof(float) * (size_t)(nch * nmax)), *z = malloc(sizeof(float) * (size_t)(dz * nmax));
    float *y = malloc(sizeof(float) * (size_t)(dz * nmax)), *gam = malloc(sizeof(float) * (size_t)(g.n_v_head * nmax));
    float *beta = malloc(sizeof(float) * (size_t)(g.n_v_head * nmax)), *nw = malloc(sizeof(float) * (size_t)g.d_head);
    const int64_t n_bw = ((int64_t)512 << 20) / 8;
    uint64_t *bw_buf = tern_alloc_aligned((size_t)n_bw * 8);
    int rc = 0;
    if (!S || !u || !z || !y || !gam || !beta || !nw || !bw_buf) {
        fprintf(stderr, "tern bench-kernel: no memory for %d copies of the recurrent state (%zu bytes each) and its inputs\n",
                copies, state);
        rc = 1;
        goto out;
    }
    memset(bw_buf, 1, (size_t)n_bw * 8);
    for (int64_t i = 0; i < per_layer * n_layers; i++) S[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
    /* q and k L2-normalised per head (as the conv step leaves them), v, z in [-1, 1); decays and
     * betas of a trained model's range */
    for (int64_t i = 0; i < nch * nmax; i++) u[i] = (float)((double)(rnd() >> 11) / 4503599627370496.0 - 1.0);
    for (int t = 0; t < nmax; t++) gdn_l2norm_heads(u + t * nch, 2 * g.n_k_head, g.d_head, g.eps);
    for (int64_t i = 0; i < dz * nmax; i++) z[i] = (float)((double)(rnd() >> 11) / 4503599627370496.0 - 1.0);
    for (int64_t i = 0; i < g.n_v_head * nmax; i++) {
        gam[i] = -0.05f - 0.5f * (float)((double)(rnd() >> 11) / 9007199254740992.0);
        beta[i] = 0.2f + 0.6f * (float)((double)(rnd() >> 11) / 9007199254740992.0);
    }
    for (int i = 0; i < g.d_head; i++) nw[i] = 1.0f;
    static const int ns[] = {1, 2, 3, 5, 8, 16};
    const double bw = bw_probe(pool, nt, bw_buf, n_bw, 5);
    if (!o->json)
        printf("# %d thread%s: %d copies of the 48 layers (%.0f MB; last-level cache %.0f MB)\n", nt, nt == 1 ? "" : "s", copies,
               (double)state * copies / 1e6, (double)llc / 1e6);
    double t1 = 0;
    char line[512];
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        gdn_bk_job j = {.g = &g, .n = ns[k], .u = u, .gam = gam, .beta = beta, .z = z, .nw = nw, .y = y};
        double t[16];
        for (int r = 0; r < reps + 1; r++) {   /* the first forward is not counted */
            const double t0 = tern_time_s();
            for (int l = 0; l < n_layers; l++) {
                j.S = S + (int64_t)l * per_layer;
                pool_for(pool, g.n_v_head, 1, job_gdn_bk, &j);
            }
            if (r > 0) t[r - 1] = (tern_time_s() - t0) * 1e3 / copies;
        }
        const stat3 st = stats(t, reps);
        if (ns[k] == 1) t1 = st.med;
        const double gbs = 2.0 * (double)state / (st.med * 1e-3) / 1e9;
        cJSON *jo = cJSON_CreateObject();
        cJSON_AddStringToObject(jo, "test", "gdn_delta_rule");
        cJSON_AddStringToObject(jo, "ops", model_ops_active()->name);
        cJSON_AddNumberToObject(jo, "threads", nt);
        cJSON_AddNumberToObject(jo, "tokens", ns[k]);
        cJSON_AddNumberToObject(jo, "state_bytes", (double)state);
        cJSON_AddNumberToObject(jo, "ms_median", st.med);
        cJSON_AddNumberToObject(jo, "ms_min", st.min);
        cJSON_AddNumberToObject(jo, "ms_max", st.max);
        cJSON_AddNumberToObject(jo, "vs_one_token", st.med / t1);
        if (ns[k] == 1) {
            cJSON_AddNumberToObject(jo, "state_gbytes_per_s", gbs);
            cJSON_AddNumberToObject(jo, "bw_gbytes_per_s", bw);
            snprintf(line, sizeof line,
                     "gdn %-6s t%d bonsai2-27b, %2d token%s: %7.2f ms [%.2f, %.2f] = 1.00 x 1 token; state read + written "
                     "%.1f GB/s = %5.1f%% of the read-only probe %.1f GB/s (writes stream beside reads: above 100%% is no error)",
                     model_ops_active()->name, nt, ns[k], ns[k] == 1 ? " " : "s", st.med, st.min, st.max, gbs, 100.0 * gbs / bw, bw);
        } else {
            snprintf(line, sizeof line, "gdn %-6s t%d bonsai2-27b, %2d tokens: %7.2f ms [%.2f, %.2f] = %.2f x 1 token",
                     model_ops_active()->name, nt, ns[k], st.med, st.min, st.max, st.med / t1);
        }
        emit(o, jo, line);
    }
    for (int64_t i = 0; i < per_layer * n_layers; i += 4099)   /* gates below 1 keep the state bounded */
        if (!isfinite(S[i])) {
            fprintf(stderr, "tern bench-kernel: the recurrent state became non-finite at %lld\n", (long long)i);
            rc = 1;
            break;
        }
out:
    tern_free_aligned(S);
    tern_free_aligned(bw_buf);
    free(u); free(z); free(y); free(gam); free(beta); free(nw);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: tern bench-kernel [--json] [--quick] [--isa ref,avx2,avxvnni,avx512vnni,amx] [--threads 1,2]\n"
               "  measures read bandwidth, int8 peak, empty pool job, PQ2_0/PTQ1_0 matvec 32768x8192 and\n"
               "  matmul 17408x5120 (PQ2_0, PTQ1_0 direct) at 4/16/64 columns per ISA path and thread count (median of repeats)\n");
    opts_help(f, &OPT_TABLE(bk_defs), 1);
}

int cmd_bench_kernel(int argc, char **argv) {
    bk_opts o = {0};
    o.threads[0] = 1; o.threads[1] = 2; o.n_threads = 2;
    const opt_table tab = OPT_TABLE(bk_defs);
    const int max_threads = (int)(sizeof o.threads / sizeof o.threads[0]);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        switch (opts_next("bench-kernel", &tab, 1, argc, argv, &i, &v)) {
        case OPT_HELP: usage(stdout); return 0;
        case OPT_ERR: return 2;
        case OPT_POSITIONAL: return opts_unexpected("bench-kernel", v.str);
        case BK_JSON: o.json = true; break;
        case BK_QUICK: o.quick = true; break;
        case BK_DECODE: o.decode_seq = true; break;
        case BK_F16: o.f16 = true; break;
        case BK_SAMPLER: o.sampler = true; break;
        case BK_ATTN: o.attn = true; break;
        case BK_GDN: o.gdn = true; break;
        case BK_ISA:
            for (const char *p = v.str, *e;; p = e + 1) {   /* no empty item: named by its place */
                e = strchr(p, ',');
                if (e == p || !*p) {
                    char exp[160];
                    const int k = (int)bk_count_items(v.str, p);
                    snprintf(exp, sizeof exp, "a comma-separated list of %s (item %d is empty)", BK_ISA_NAMES, k);
                    opts_bad_value("bench-kernel", "--isa", exp, v.str);
                    return 2;
                }
                if (!e) break;
            }
            snprintf(o.isa, sizeof o.isa, "%s", v.str);
            break;
        case BK_THREADS:
            if (v.n_list < 1 || v.n_list > max_threads) {
                opts_bad_value("bench-kernel", "--threads", "1 to 8 thread counts", v.str);
                return 2;
            }
            o.n_threads = v.n_list;
            o.threads_set = true;
            for (int k = 0; k < v.n_list; k++) o.threads[k] = v.list[k];
            break;
        default: break;
        }
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    g_avx2 = __builtin_cpu_supports("avx2");
    g_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#endif
    const int reps = o.quick ? 3 : 15;
    if (o.attn + o.sampler + o.decode_seq + o.f16 + o.gdn > 1) {   /* one set per run */
        fprintf(stderr, "tern bench-kernel: --attn, --sampler, --decode-seq, --f16 and --gdn each select one set of "
                        "benchmarks; expected one of them, got%s%s%s%s%s\n",
                o.attn ? " --attn" : "", o.sampler ? " --sampler" : "", o.decode_seq ? " --decode-seq" : "",
                o.f16 ? " --f16" : "", o.gdn ? " --gdn" : "");
        return 2;
    }
    if ((o.attn || o.sampler || o.decode_seq || o.f16 || o.gdn) && o.isa[0])   /* those sets run their own paths */
        fprintf(stderr, "tern bench-kernel: warning: --isa has no effect with %s%s\n",
                o.attn ? "--attn" : o.sampler ? "--sampler" : o.decode_seq ? "--decode-seq" : o.f16 ? "--f16" : "--gdn",
                o.gdn ? " (TERN_ISA chooses its ops table: generic, avx2 or avx512)" : "");
    if (o.attn && o.threads_set)
        fprintf(stderr, "tern bench-kernel: warning: --threads has no effect with --attn (one thread: the tile's own rate)\n");
    if (o.sampler && o.threads_set)
        fprintf(stderr, "tern bench-kernel: warning: --threads has no effect with --sampler (one thread: the sampler is serial)\n");
    if (o.attn) return bench_attn(&o);
    if (o.sampler) return bench_sampler(&o);
    const char *const isas[] = {"ref", "avx2", "avxvnni", "avx512vnni", "amx", "neon", "dotprod", "i8mm"};
    const int n_isas = (int)(sizeof isas / sizeof isas[0]);
    const char *best = kern_isa();
    if (o.isa[0] && !o.decode_seq && !o.f16 && !o.gdn) {   /* every name known (else a usage error); a path this
                                                           * build or CPU cannot run: said, skipped; the sets
                                                           * warned of above ignore --isa */
        char buf[128];
        snprintf(buf, sizeof buf, "%s", o.isa);
        int n_ok = 0;
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
            int k = 0;
            while (k < n_isas && strcmp(t, isas[k]) != 0) k++;
            if (k == n_isas) {
                char exp[192];
                snprintf(exp, sizeof exp, "a comma-separated list of %s (item %d, '%.24s', is none of them)", BK_ISA_NAMES,
                         (int)bk_count_items(buf, t), t);
                opts_bad_value("bench-kernel", "--isa", exp, o.isa);
                return 2;
            }
            tern_err e = {0};
            if (kern_force_isa(t, &e) != TERN_OK) fprintf(stderr, "tern bench-kernel: --isa: %s; skipped\n", e.msg);
            else n_ok++;
        }
        kern_force_isa(best, NULL);
        if (n_ok == 0) {
            fprintf(stderr, "tern bench-kernel: --isa %s: none of these paths runs here (best path: %s)\n", o.isa, best);
            return 1;
        }
    }
    char line[512];
    tern_err err = {0};
    int max_t = 1;
    for (int i = 0; i < o.n_threads; i++) max_t = TERN_MAX(max_t, o.threads[i]);
    tern_pool *pools[8] = {0};
    for (int i = 0; i < o.n_threads; i++) {
        if (pool_init(&pools[i], o.threads[i], &err) != TERN_OK) { fprintf(stderr, "bench-kernel: %s\n", err.msg); return 1; }
        pool_set_fixed(pools[i], true);   /* tN is N threads in every job (the model's pool may run a kind on fewer) */
    }
    if (o.gdn) {
        if (!o.json)
            printf("# tern bench-kernel --gdn: ops table %s; %d repeats, median [min, max] of wall time per forward\n",
                   model_ops_active()->name, reps);
        int rc = 0;
        for (int ti = 0; ti < o.n_threads && !rc; ti++) rc = bench_gdn(&o, pools[ti], o.threads[ti], reps);
        for (int i = 0; i < o.n_threads; i++) pool_free(pools[i]);
        return rc;
    }
    if (!o.json && o.decode_seq)
        printf("# tern bench-kernel --decode-seq: path %s; %d repeats, median [min, max] of busy time (the\n"
               "# slowest thread's wall time inside its calls of each job: run it on a quiet machine)\n", best, reps);
    else if (!o.json)
        printf("# tern bench-kernel: best path %s; %d repeats, median [min, max] of busy time (per-thread CPU\n"
               "# time of the slowest thread: preemption removed); int8 peak = best of short runs;\n"
               "# ratio = median / ceiling (best = best repeat / ceiling)\n", best, reps);

    if (o.decode_seq) {
        int rc = 0;
        g_busy_wall = true;
        for (int ti = 0; ti < o.n_threads && !rc; ti++) rc = bench_decode_seq(&o, pools[ti], o.threads[ti], reps);
        for (int i = 0; i < o.n_threads; i++) pool_free(pools[i]);
        return rc;
    }
    /* 1. read bandwidth and int8 peak and the empty job, per thread count */
    double bw[8] = {0}, peak[8] = {0}, amx_peak[8] = {0};
    const unsigned long long llc = opts_llc_bytes();
    const int64_t n_bw = ((int64_t)1 << 30) / 8;
    uint64_t *bw_buf = tern_alloc_aligned((size_t)n_bw * 8);   /* kept for the probes around each matvec */
    if (!bw_buf) { fprintf(stderr, "bench-kernel: cannot allocate 1 GiB\n"); return 1; }
    memset(bw_buf, 1, (size_t)n_bw * 8);                       /* touch every page before timing */
    {
        const int64_t n = n_bw;
        const uint64_t *buf = bw_buf;
        for (int ti = 0; ti < o.n_threads; ti++) {
            bw_ctx c = {.buf = buf};
            double t[64], tb[64];
            pool_for(pools[ti], n, 4096, job_bw, &c);
            busy_take(o.threads[ti]);
            for (int r = 0; r < reps; r++) {
                const double t0 = tern_time_s();
                pool_for(pools[ti], n, 4096, job_bw, &c);
                t[r] = tern_time_s() - t0;
                tb[r] = busy_take(o.threads[ti]);
            }
            const stat3 sw = stats(t, reps), s = stats(tb, reps);
            bw[ti] = (double)n * 8 / s.min / 1e9;   /* ceiling: the best busy-time pass */
            snprintf(line, sizeof line, "bandwidth    threads %d: %6.1f GB/s best [%.1f, median %.1f] busy; wall median %.1f (1 GiB read)",
                     o.threads[ti], bw[ti], (double)n * 8 / s.max / 1e9, (double)n * 8 / s.med / 1e9, (double)n * 8 / sw.med / 1e9);
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "op", "bandwidth");
            cJSON_AddNumberToObject(j, "threads", o.threads[ti]);
            cJSON_AddNumberToObject(j, "bytes", (double)n * 8);
            cJSON_AddNumberToObject(j, "gbytes_per_s", bw[ti]);
            cJSON_AddNumberToObject(j, "gbytes_per_s_min", (double)n * 8 / s.max / 1e9);
            cJSON_AddNumberToObject(j, "gbytes_per_s_median", (double)n * 8 / s.med / 1e9);
            cJSON_AddNumberToObject(j, "gbytes_per_s_wall", (double)n * 8 / sw.med / 1e9);
            emit(&o, j, line);
        }
        for (int ti = 0; ti < o.n_threads; ti++) {
            peak[ti] = peak_probe(pools[ti], o.threads[ti], o.quick ? 11 : 41);   /* ceiling = the best run */
            snprintf(line, sizeof line, "int8 peak    threads %d: %6.1f GMAC/s best (%s)", o.threads[ti], peak[ti],
                     g_vnni ? "vpdpbusd zmm" : g_avx2 ? "vpmaddubsw ymm: no VNNI on this host" : "none");
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "op", "int8_peak");
            cJSON_AddStringToObject(j, "instr", g_vnni ? "vpdpbusd_zmm" : g_avx2 ? "vpmaddubsw_ymm" : "none");
            cJSON_AddNumberToObject(j, "threads", o.threads[ti]);
            cJSON_AddNumberToObject(j, "gmac_per_s", peak[ti]);
            emit(&o, j, line);
            if (kern_cpu_amx()) {   /* the amx path's own ceiling, beside the vector one */
                g_peak_amx = true;
                amx_peak[ti] = peak_probe(pools[ti], o.threads[ti], o.quick ? 11 : 41);
                g_peak_amx = false;
                snprintf(line, sizeof line, "amx peak     threads %d: %6.1f GMAC/s best (tdpbsud tiles)", o.threads[ti], amx_peak[ti]);
                j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "op", "amx_peak");
                cJSON_AddStringToObject(j, "instr", "tdpbsud");
                cJSON_AddNumberToObject(j, "threads", o.threads[ti]);
                cJSON_AddNumberToObject(j, "gmac_per_s", amx_peak[ti]);
                emit(&o, j, line);
            }
        }
        for (int ti = 0; ti < o.n_threads; ti++) {
            const int n_jobs = o.quick ? 5000 : 100000;
            double t[5];
            for (int r = 0; r < 5; r++) {
                const double t0 = tern_time_s();
                for (int i = 0; i < n_jobs; i++) pool_for(pools[ti], 64, 4, job_empty, NULL);
                t[r] = (tern_time_s() - t0) / n_jobs;
            }
            const stat3 s = stats(t, 5);
            snprintf(line, sizeof line, "empty job    threads %d: %6.0f ns [%.0f, %.0f]", o.threads[ti], s.med * 1e9,
                     s.min * 1e9, s.max * 1e9);
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "op", "empty_job");
            cJSON_AddNumberToObject(j, "threads", o.threads[ti]);
            cJSON_AddNumberToObject(j, "ns", s.med * 1e9);
            cJSON_AddNumberToObject(j, "ns_min", s.min * 1e9);
            cJSON_AddNumberToObject(j, "ns_max", s.max * 1e9);
            emit(&o, j, line);
        }
    }

    if (o.f16) {
        tern_free_aligned(bw_buf);
        const int rc = bench_f16(&o, pools, bw, reps);
        for (int i = 0; i < o.n_threads; i++) pool_free(pools[i]);
        return rc;
    }
    /* 2. matvec and matmul */
    typedef struct { const char *label; int type; unsigned flags; int64_t N, K; bool mm; } wspec;
    const wspec specs[] = {
        {"PQ2_0", 142, 0, 32768, 8192, false},
        {"PTQ1_0_direct", 143, KW_F_PTQ1_0_DIRECT, 32768, 8192, false},
        {"PTQ1_0_transcode", 143, KW_F_PTQ1_0_TRANSCODE, 32768, 8192, false},
        {"PQ2_0", 142, 0, 17408, 5120, true},
        {"PTQ1_0_direct", 143, KW_F_PTQ1_0_DIRECT, 17408, 5120, true},
    };
    const int mm_cols[] = {4, 16, 64};
    int rc = 0;
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        const wspec *sp = &specs[si];
        const bool is_mm = sp->mm;
        size_t bytes;
        uint8_t *data = make_weights(sp->type, sp->K, sp->N, &bytes);
        kern_w w;
        /* the file bytes, to prepare w again in the layout of each ISA path measured (the 16-row
         * layouts for the x86 SIMD tables, row-pair / file for ref: kern_impl.h) */
        uint8_t *file = data ? tern_alloc_aligned(bytes) : NULL;
        if (file) memcpy(file, data, bytes);
        const double tp0 = tern_time_s();
        if (!file || kern_w_init_ex(&w, sp->label, sp->type, data, sp->K, sp->N, sp->flags, &err) != TERN_OK) {
            fprintf(stderr, "bench-kernel: %s\n", file ? err.msg : "out of memory");
            tern_free_aligned(data);
            tern_free_aligned(file);
            rc = 1;
            break;
        }
        {   /* load-time preparation (repack / transcode), one thread */
            const double tp = tern_time_s() - tp0;
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "op", "prepare");
            cJSON_AddStringToObject(j, "type", sp->label);
            cJSON_AddNumberToObject(j, "rows", (double)sp->N);
            cJSON_AddNumberToObject(j, "cols", (double)sp->K);
            cJSON_AddNumberToObject(j, "seconds", tp);
            cJSON_AddNumberToObject(j, "ns_per_weight", tp * 1e9 / ((double)sp->N * (double)sp->K));
            snprintf(line, sizeof line, "prepare %-16s %5lldx%lld: %.3f s (%.2f ns/weight, kern_w_init, 1 thread)", sp->label,
                     (long long)sp->N, (long long)sp->K, tp, tp * 1e9 / ((double)sp->N * (double)sp->K));
            emit(&o, j, line);
        }
        /* the file bytes, to prepare w again in the layout of each ISA path measured (the 16-row
         * layouts for the x86 SIMD tables, row-pair / file for ref: kern_impl.h) */
        const int max_cols = is_mm ? 64 : 1;
        float *x = tern_alloc_aligned(sizeof(float) * (size_t)(sp->K * max_cols));
        void *q = tern_alloc_aligned(kern_act_bytes(KQ_FAST, sp->K, max_cols));
        float *y = tern_alloc_aligned(sizeof(float) * (size_t)(sp->N * max_cols));
        for (int64_t i = 0; i < sp->K * max_cols; i++) x[i] = (float)((rnd() >> 40) % 2001) / 1000.0f - 1.0f;
        for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
            if (!isa_wanted(&o, isas[ii])) continue;
            tern_err e2 = {0};
            if (kern_force_isa(isas[ii], &e2) != TERN_OK) continue;   /* not compiled in / not runnable */
            const bool row16 = kern_isa_row16(),
                       is16 = w.layout == KW_ROW16 || w.layout == KW_PTQ_ROW16 || w.layout == KW_PTQ3_ROW16;
            if (row16 != is16) {   /* every spec here is prepared per layout (PTQ1_0 direct: file or 16-row) */
                kern_w_free(&w);
                memcpy(data, file, bytes);
                if (kern_w_init_ex(&w, sp->label, sp->type, data, sp->K, sp->N, sp->flags | (row16 ? KW_F_ROW16 : KW_F_ROWPAIR),
                                   &e2) != TERN_OK) {
                    fprintf(stderr, "bench-kernel: %s\n", e2.msg);
                    rc = 1;
                    break;
                }
            }
            for (int ti = 0; ti < o.n_threads; ti++) {
                const int nc_n = is_mm ? 3 : 1;
                for (int ci = 0; ci < nc_n; ci++) {
                    const int ncols = is_mm ? mm_cols[ci] : 1;
                    kern_act a = {.x = x, .q = q, .K = sp->K, .ncols = ncols, .mode = KQ_FAST};
                    kern_quantize(&a);
                    const bool slice = strcmp(isas[ii], "ref") == 0;
                    const int64_t rows = slice ? sp->N / (is_mm ? 256 : 16) : sp->N;
                    stat3 sw;
                    /* the int8 peak probed right before and after each timed matmul, the best of
                     * the run kept as its ceiling (peak_probe: the host's rate can move mid-run) */
                    if (is_mm) peak[ti] = fmax(peak[ti], peak_probe(pools[ti], o.threads[ti], 5));
                    else bw[ti] = fmax(bw[ti], bw_probe(pools[ti], o.threads[ti], bw_buf, n_bw, 2));   /* as the peak */
                    const stat3 s = time_mm(pools[ti], &w, &a, y, rows, slice ? (o.quick ? 1 : 3) : reps, !slice, &sw);
                    if (is_mm) peak[ti] = fmax(peak[ti], peak_probe(pools[ti], o.threads[ti], 5));
                    else bw[ti] = fmax(bw[ti], bw_probe(pools[ti], o.threads[ti], bw_buf, n_bw, 2));
                    const double wts = (double)rows * (double)sp->K;
                    const double gbytes = (double)kern_w_bytes(&w) * ((double)rows / (double)sp->N);
                    cJSON *j = cJSON_CreateObject();
                    cJSON_AddStringToObject(j, "isa", isas[ii]);
                    cJSON_AddStringToObject(j, "op", is_mm ? "matmul" : "matvec");
                    cJSON_AddStringToObject(j, "type", sp->label);
                    cJSON_AddNumberToObject(j, "threads", o.threads[ti]);
                    cJSON_AddNumberToObject(j, "rows", (double)rows);
                    cJSON_AddNumberToObject(j, "cols", (double)sp->K);
                    cJSON_AddNumberToObject(j, "ncols", ncols);
                    cJSON_AddNumberToObject(j, "seconds", s.med);
                    cJSON_AddNumberToObject(j, "seconds_min", s.min);
                    cJSON_AddNumberToObject(j, "seconds_max", s.max);
                    cJSON_AddNumberToObject(j, "seconds_wall", sw.med);
                    cJSON_AddNumberToObject(j, "seconds_wall_min", sw.min);
                    cJSON_AddNumberToObject(j, "gbytes_per_s", gbytes / s.med / 1e9);
                    cJSON_AddNumberToObject(j, "bw_gbytes_per_s", bw[ti]);
                    if (is_mm) {
                        const double g = wts * ncols / s.med / 1e9;
                        cJSON_AddNumberToObject(j, "gmac_per_s", g);
                        cJSON_AddNumberToObject(j, "gmac_per_s_min", wts * ncols / s.max / 1e9);
                        cJSON_AddNumberToObject(j, "gmac_per_s_max", wts * ncols / s.min / 1e9);
                        cJSON_AddNumberToObject(j, "int8_peak_gmac_per_s", peak[ti]);
                        cJSON_AddNumberToObject(j, "frac_of_ceiling", peak[ti] > 0 ? g / peak[ti] : 0);
                        cJSON_AddNumberToObject(j, "frac_of_ceiling_best", peak[ti] > 0 ? wts * ncols / s.min / 1e9 / peak[ti] : 0);
                        /* the median or the best repeat above the best peak reading of the run: the
                         * host's rate moved between the probes and the matmul, so the fraction is
                         * not a result */
                        /* a product the amx path runs on its tiles has the tile rate as its ceiling (the
                         * vector peak does not bound it); its other products (below its columns, other
                         * layouts) run the VNNI kernels, against the vector peak like theirs */
                        const bool tiles = !strcmp(isas[ii], "amx") && amx_peak[ti] > 0 && kern_amx_tile_cols(&w, ncols) == ncols;
                        const double ceil_g = tiles ? amx_peak[ti] : peak[ti];
                        const bool over = ceil_g > 0 && wts * ncols / s.min / 1e9 > ceil_g;
                        cJSON_AddBoolToObject(j, "above_ceiling", over);
                        cJSON_AddBoolToObject(j, "amx_tiles", tiles);
                        if (tiles) {
                            cJSON_AddNumberToObject(j, "amx_peak_gmac_per_s", amx_peak[ti]);
                            cJSON_AddNumberToObject(j, "frac_of_amx_peak", g / amx_peak[ti]);
                        }
                        const char *over_note = over ? " [above the peak probed in this run: the host's rate moved; not a result]" : "";
                        if (tiles)
                            snprintf(line, sizeof line,
                                     "matmul %-17s %-10s t%d %5lldx%lld x%2d: %7.1f GMAC/s [%.1f, %.1f] = %5.1f%% of the AMX peak %.1f (best %.1f%%); %.1f%% of int8 peak %.1f, which does not bound the tiles%s",
                                     sp->label, isas[ii], o.threads[ti], (long long)rows, (long long)sp->K, ncols, g,
                                     wts * ncols / s.max / 1e9, wts * ncols / s.min / 1e9, 100 * g / amx_peak[ti], amx_peak[ti],
                                     100 * wts * ncols / s.min / 1e9 / amx_peak[ti], peak[ti] > 0 ? 100 * g / peak[ti] : 0, peak[ti],
                                     over_note);
                        else
                            snprintf(line, sizeof line,
                                     "matmul %-17s %-10s t%d %5lldx%lld x%2d: %7.1f GMAC/s [%.1f, %.1f] = %5.1f%% of int8 peak %.1f (best %.1f%%)%s%s",
                                     sp->label, isas[ii], o.threads[ti], (long long)rows, (long long)sp->K, ncols, g,
                                     wts * ncols / s.max / 1e9, wts * ncols / s.min / 1e9, peak[ti] > 0 ? 100 * g / peak[ti] : 0,
                                     peak[ti], peak[ti] > 0 ? 100 * wts * ncols / s.min / 1e9 / peak[ti] : 0,
                                     !strcmp(isas[ii], "amx") ? " (on the avx512vnni kernels: not a tile-path product)" : "", over_note);
                    } else {
                        const double gw = wts / s.med / 1e9, gb = gbytes / s.med / 1e9;
                        cJSON_AddNumberToObject(j, "gweights_per_s", gw);
                        cJSON_AddNumberToObject(j, "gweights_per_s_min", wts / s.max / 1e9);
                        cJSON_AddNumberToObject(j, "gweights_per_s_max", wts / s.min / 1e9);
                        cJSON_AddNumberToObject(j, "frac_of_ceiling", gb / bw[ti]);
                        cJSON_AddNumberToObject(j, "frac_of_ceiling_best", gbytes / s.min / 1e9 / bw[ti]);
                        /* a matrix that fits in the last-level cache is re-read from it, not DRAM: its
                         * rate may pass the DRAM probe, so the line gives its rate over the probe and
                         * no share (the JSON keeps frac_of_ceiling beside "cache_resident": true) */
                        const bool in_cache = gbytes <= (double)llc;
                        cJSON_AddBoolToObject(j, "cache_resident", in_cache);
                        /* a streamed matrix whose median or best repeat reads above the probe: part
                         * of it stayed in the last-level cache between repeats (it is only a few
                         * times its size), or the bus moved between the probe and the matvec;
                         * either way the fraction is not a result */
                        const bool over = !in_cache && gbytes / s.min / 1e9 > bw[ti];
                        cJSON_AddBoolToObject(j, "above_ceiling", over);
                        if (in_cache)   /* no share: the DRAM probe does not bound it (the table's "-" in tern bench) */
                            snprintf(line, sizeof line,
                                     "matvec %-17s %-10s t%d %5lldx%lld: %6.2f GW/s [%.2f, %.2f] %6.2f GB/s = - [cache-resident: "
                                     "%.2fx the DRAM probe, which does not bound it]",
                                     sp->label, isas[ii], o.threads[ti], (long long)rows, (long long)sp->K, gw,
                                     wts / s.max / 1e9, wts / s.min / 1e9, gb, gb / bw[ti]);
                        else
                            snprintf(line, sizeof line,
                                     "matvec %-17s %-10s t%d %5lldx%lld: %6.2f GW/s [%.2f, %.2f] %6.2f GB/s = %5.1f%% of bandwidth (best %.1f%%)%s",
                                     sp->label, isas[ii], o.threads[ti], (long long)rows, (long long)sp->K, gw, wts / s.max / 1e9,
                                     wts / s.min / 1e9, gb, 100 * gb / bw[ti], 100 * gbytes / s.min / 1e9 / bw[ti],
                                     over ? " [above the bandwidth probe: cached between repeats, or the bus moved; not a result]" : "");
                    }
                    emit(&o, j, line);
                }
            }
        }
        kern_force_isa(best, NULL);
        kern_w_free(&w);
        tern_free_aligned(data); tern_free_aligned(file); tern_free_aligned(x); tern_free_aligned(q); tern_free_aligned(y);
        if (rc) break;
    }
    for (int i = 0; i < o.n_threads; i++) pool_free(pools[i]);
    tern_free_aligned(bw_buf);
    (void)max_t;
    return rc;
}
