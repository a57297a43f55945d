/* dispatch.c: CPU feature detection (CPUID + XGETBV on x86: the CPU must have the instructions
 * AND the OS must save the registers), the list of compiled tables, the choice of the active
 * table (once; kern_force_isa forces one), and kern_matmul, which routes each (type, mode) to the
 * active table's entry or, where that entry is NULL, to the reference.
 * Source: Intel SDM vol. 2 (CPUID leaf 7 subleaves 0 and 1, XGETBV XCR0 bits 1-2 SSE/AVX, 5-7
 * opmask/zmm, 17-18 AMX tiles). */
#include "kernels/kern_impl.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__)
#include "kernels/arm/arm.h"   /* arm_cpu_features (hwcaps / sysctl), the three ARM tables */
#endif

const kern_table *const kern_tables[] = {
    &kern_table_ref,
#if defined(__x86_64__)
    &kern_table_avx2,
    &kern_table_avxvnni,
    &kern_table_avx512vnni,
    &kern_table_amx,
#endif
#if defined(__aarch64__)
    &kern_table_neon,
    &kern_table_dotprod,
    &kern_table_i8mm,
#endif
    NULL,
};

#if defined(__x86_64__)
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* The prefetch hint for weight streams read once per forward (kern_stream_nta): AMD cores
 * (vendor "AuthenticAMD", and Hygon's derivative "HygonGenuine") take prefetchnta, every other
 * x86 vendor prefetcht1. Measured on bench/RESULTS.md hosts A (Zen 5) and D (Intel Xeon):
 * prefetchnta ran bonsai-1.7b tg128 13% faster than an L1 prefetch on Zen 5, and held a
 * DRAM-streamed decode to 34% of the bandwidth probe on the Xeon, where prefetcht1 reached 87%
 * (the 27B shape). */
static bool detect_stream_nta(void) {
    unsigned a, v[3];
    if (!__get_cpuid(0, &a, &v[0], &v[2], &v[1])) return false;   /* EBX, EDX, ECX: the vendor string */
    char name[13];
    memcpy(name, v, 12);
    name[12] = 0;
    return strcmp(name, "AuthenticAMD") == 0 || strcmp(name, "HygonGenuine") == 0;
}

/* Whether this process may use the AMX tile data: Linux keeps it off (XFD) until the process asks
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 and later); a refusal (older
 * kernel, a sigaltstack too small for the larger signal frame) leaves the AMX table unused. Other
 * systems: not used. */
static bool amx_permitted(void) {
#if defined(__linux__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static uint32_t detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    const uint64_t xcr0 = xgetbv0();
    const bool os_ymm = (xcr0 & 0x6) == 0x6, os_zmm = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = (b >> 5) & 1, f512 = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1,
               vl = (b >> 31) & 1, vnni = (c >> 11) & 1, gfni = (c >> 8) & 1, amx = ((d >> 24) & 3) == 3;
    unsigned a1 = 0, b1, c1, d1;
    if (a >= 1) __cpuid_count(7, 1, a1, b1, c1, d1);   /* leaf 7 subleaf 1: EAX[4] = AVX-VNNI */
    const bool avxvnni = (a1 >> 4) & 1;
    uint32_t f = 0;
    if (os_ymm && avx2 && fma && f16c) f |= KCPU_AVX2;
    if ((f & KCPU_AVX2) && avxvnni) f |= KCPU_AVXVNNI;   /* ymm only: os_ymm is enough */
    if ((f & KCPU_AVX2) && os_zmm && f512 && dq && bw && vl && vnni) f |= KCPU_AVX512VNNI;
    if ((f & KCPU_AVX512VNNI) && gfni) f |= KCPU_GFNI;
    /* XCR0 bits 17, 18: the OS manages the tile configuration and tile data */
    if ((f & KCPU_AVX512VNNI) && amx && ((xcr0 >> 17) & 3) == 3 && amx_permitted()) f |= KCPU_AMX;
    return f;
}
#elif defined(__aarch64__)
static uint32_t detect(void) { return arm_cpu_features(); }
static bool detect_stream_nta(void) { return false; }
#else
static uint32_t detect(void) { return 0; }
static bool detect_stream_nta(void) { return false; }
#endif

static uint32_t g_cpu;
static bool g_stream_nta;
static bool g_cpu_done;
static uint32_t g_cpu_hidden;   /* kern_cpu_hide */
static const kern_table *g_active;

uint32_t kern_cpu_features(void) {
    if (!__atomic_load_n(&g_cpu_done, __ATOMIC_ACQUIRE)) {      /* idempotent: a race writes the same */
        __atomic_store_n(&g_cpu, detect(), __ATOMIC_RELAXED);
        __atomic_store_n(&g_stream_nta, detect_stream_nta(), __ATOMIC_RELAXED);
        __atomic_store_n(&g_cpu_done, true, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&g_cpu, __ATOMIC_RELAXED) & ~__atomic_load_n(&g_cpu_hidden, __ATOMIC_RELAXED);
}

bool kern_stream_nta(void) {
    (void)kern_cpu_features();
    return __atomic_load_n(&g_stream_nta, __ATOMIC_RELAXED);
}

/* The shortest rows that the one-column matvec streams as two groups at once (mm_row16_fast,
 * avx512vnni.c). On AMD (the non-temporal stream hint) from K 4096: on Zen 5 bonsai-1.7b's K 2048
 * rows decode slower in two groups than in one, the 27B's K 5120 and longer faster. Elsewhere
 * from K 2048: on an Intel Xeon the 1.7B's rows already decode faster in two groups
 * (bench/RESULTS.md hosts A and D). */
int64_t kern_pair1_min_k(void) { return kern_stream_nta() ? 4096 : 2048; }

bool kern_cpu_amx(void) { return (kern_cpu_features() & KCPU_AMX) != 0; }

#if !defined(__x86_64__)
/* x86/amx.c defines it on x86-64; there are no tiles elsewhere */
int kern_amx_tile_cols(const kern_w *w, int ncols) {
    (void)w, (void)ncols;
    return 0;
}
#endif

void kern_cpu_hide(uint32_t bits) { __atomic_store_n(&g_cpu_hidden, bits, __ATOMIC_RELAXED); }

static bool runnable(const kern_table *t) { return (t->needs & kern_cpu_features()) == t->needs; }

static const kern_table *find(const char *name) {
    for (const kern_table *const *t = kern_tables; *t; t++)
        if (strcmp((*t)->name, name) == 0) return *t;
    return NULL;
}

/* Start-up self-check of a table against ref on a small fixed case (21 rows: PQ2_0 in the
 * table's layout with code 3, a full 16-row group and tail rows, PTQ1_0 direct and transcoded,
 * F32/F16/BF16 with a K % 16 tail; 1, 5 and 16 columns for the ternary types, whose x86 tiles of
 * 9..16 columns have code of their own, 1 and 5 for the float ones): a table that differs is
 * refused with an error in the log. It guards the one thing the unit tests cannot cover on every
 * machine: an ISA path that the test host could not execute. ~25 KB of stack, once. */
bool kern_table_selfcheck(const kern_table *t) {
    if (t == &kern_table_ref) return true;
    enum { K = 256, N = 21, NC = 16 };
    static const int ncs[] = {1, 5, 16};
    static const int types[] = {QT_PQ2_0, QT_PTQ1_0, QT_PTQ1_0};
    static const unsigned flags[] = {0, KW_F_PTQ1_0_DIRECT, KW_F_PTQ1_0_TRANSCODE};
    const unsigned layout = t->row16 ? KW_F_ROW16 : KW_F_ROWPAIR;   /* the table's own (no table is active yet) */
    uint64_t st = 0x2545F4914F6CDD1Dull;
    float x[K * NC], y0[N * NC], y1[N * NC];
    for (int i = 0; i < K * NC; i++) {
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        x[i] = (float)((int)(st % 2001) - 1000) / 1000.0f;
    }
    kact_fast q[NC * (K / KA_FAST_BLOCK)];
    bool ok = true;
    for (int ti = 0; ti < 3 && ok; ti++) {
        const int bb = kern_block_bytes(types[ti]);
        uint8_t data[N * (K / 128) * 34];
        for (int i = 0; i < N * (K / 128) * bb; i++) {
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            data[i] = (uint8_t)st;
        }
        for (int b = 0; b < N * (K / 128); b++) {   /* sane scales (fp16 ~0.01..0.02) */
            const int off = b * bb + qt_get(types[ti])->d_offset;
            data[off] = (uint8_t)(b * 37);
            data[off + 1] = 0x20;
        }
        kern_w w;
        if (kern_w_init_ex(&w, "selfcheck", types[ti], data, K, N, flags[ti] | layout, NULL) != TERN_OK) return false;
        for (int ci = 0; ci < 3 && ok; ci++) {
            const int nc = ncs[ci];
            kern_act a = {.x = x, .q = q, .K = K, .ncols = nc, .mode = KQ_FAST};
            kern_quantize(&a);
            kern_matmul_table(&kern_table_ref, &w, &a, y0, N, 0, N, NULL);
            kern_matmul_table(t, &w, &a, y1, N, 0, N, NULL);
            ok = memcmp(y0, y1, sizeof(float) * (size_t)(N * nc)) == 0;
        }
        kern_w_free(&w);
    }
    /* float weights (F32, F16, BF16: one path per type in every mode), 21 rows of K - 3 = 253
     * values (a K % 16 tail), 1 and 5 columns */
    static const int ftypes[] = {QT_F32, QT_F16, QT_BF16};
    for (int ti = 0; ti < 3 && ok; ti++) {
        enum { KF = K - 3 };
        uint8_t data[N * KF * 4] __attribute__((aligned(16)));
        const int fb = kern_block_bytes(ftypes[ti]);
        for (int i = 0; i < N * KF; i++) {
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            const float v = (float)((int)(st % 2001) - 1000) / 1024.0f;
            qt_quantize(ftypes[ti], &v, data + (size_t)i * (size_t)fb, 1);   /* exact (v = n / 1024) or RNE */
        }
        kern_w w;
        if (kern_w_init_ex(&w, "selfcheck", ftypes[ti], data, KF, N, layout, NULL) != TERN_OK) return false;
        for (int ci = 0; ci < 2 && ok; ci++) {
            const int nc = ncs[ci];
            const kern_act a = {.x = x, .q = NULL, .K = KF, .ncols = nc, .mode = KQ_F32};
            kern_matmul_table(&kern_table_ref, &w, &a, y0, N, 0, N, NULL);
            kern_matmul_table(t, &w, &a, y1, N, 0, N, NULL);
            ok = memcmp(y0, y1, sizeof(float) * (size_t)(N * nc)) == 0;
        }
        kern_w_free(&w);
    }
    if (!ok) tern_log(TERN_LOG_ERROR, "kernels: the %s path disagrees with the reference on this CPU; not using it", t->name);
    return ok;
}

/* The fastest table this CPU runs that agrees with the reference (tables are listed slowest first). */
static const kern_table *choose(void) {
    const kern_table *best = &kern_table_ref;
    for (const kern_table *const *t = kern_tables; *t; t++)
        if (runnable(*t) && kern_table_selfcheck(*t)) best = *t;
    return best;
}

const kern_table *kern_active(void) {
    /* first use may race between threads: each computes the same choice; atomics keep it defined */
    const kern_table *t = __atomic_load_n(&g_active, __ATOMIC_ACQUIRE);
    if (!t) {
        t = choose();
        __atomic_store_n(&g_active, t, __ATOMIC_RELEASE);
    }
    return t;
}

const char *kern_isa(void) { return kern_active()->name; }

bool kern_isa_row16(void) { return kern_active()->row16; }

bool kern_isa_avx2(void) { return (kern_active()->needs & KCPU_AVX2) != 0; }
bool kern_isa_avx512(void) { return (kern_active()->needs & KCPU_AVX512VNNI) != 0; }

kact_path kern_act_path(void) {
    const kern_table *t = __atomic_load_n(&g_active, __ATOMIC_ACQUIRE);
    if (t && (t->needs & KCPU_AVX512VNNI)) return KACT_AVX512;
    return (kern_cpu_features() & KCPU_AVX2) ? KACT_AVX2 : KACT_PORTABLE;
}

void kern_auto_isa(void) { __atomic_store_n(&g_active, choose(), __ATOMIC_RELEASE); }

int kern_force_isa(const char *name, tern_err *err) {
    /* every path of every architecture: a name outside these is a misspelling (TERN_E_ARG), one of
     * them that this build lacks is another architecture's (TERN_E_UNSUPPORTED) */
    static const char *const known[] = {"ref", "avx2", "avxvnni", "avx512vnni", "amx", "neon", "dotprod", "i8mm"};
    bool is_known = false;
    for (size_t i = 0; name && i < sizeof known / sizeof known[0]; i++) is_known = is_known || !strcmp(name, known[i]);
    if (!is_known)
        return tern_err_set(err, TERN_E_ARG,
                            "expected ref, avx2, avxvnni, avx512vnni, amx (x86-64), neon, dotprod or i8mm (ARM64), got '%s'",
                            name ? name : "(null)");
    const kern_table *t = find(name);
    if (!t) return tern_err_set(err, TERN_E_UNSUPPORTED, "ISA path '%s' is not compiled in", name);
    if (!runnable(t)) return tern_err_set(err, TERN_E_UNSUPPORTED, "ISA path '%s': this CPU cannot run it", name);
    if (!kern_table_selfcheck(t))
        return tern_err_set(err, TERN_E_UNSUPPORTED, "ISA path '%s' disagrees with the reference on this CPU", name);
    __atomic_store_n(&g_active, t, __ATOMIC_RELEASE);
    return TERN_OK;
}

int kern_matmul_check(const kern_w *w, const kern_act *a, int64_t ldy, int64_t r0, int64_t r1, tern_err *err) {
    if (!w || !a || !w->data) return tern_err_set(err, TERN_E_ARG, "kern_matmul: NULL weight or activation");
    if (kern_type_index(w->type) < 0) return tern_err_set(err, TERN_E_ARG, "kern_matmul: weight type %d not prepared", w->type);
    if (a->K != w->n_in)
        return tern_err_set(err, TERN_E_ARG, "kern_matmul: activation K = %lld, weight expects %lld", (long long)a->K,
                            (long long)w->n_in);
    if (a->ncols < 1) return tern_err_set(err, TERN_E_ARG, "kern_matmul: ncols = %d, expected >= 1", a->ncols);
    if (a->mode != KQ_FAST && a->mode != KQ_GGML && a->mode != KQ_F32)
        return tern_err_set(err, TERN_E_ARG, "kern_matmul: unknown numerics mode %d", (int)a->mode);
    if (!a->x) return tern_err_set(err, TERN_E_ARG, "kern_matmul: activation has no f32 data");
    if (kern_unit(w, a->mode) > 0 && !a->q)
        return tern_err_set(err, TERN_E_ARG, "kern_matmul: type %d needs quantised activations (kern_quantize)", w->type);
    if (a->ncols > 1 && ldy < w->n_out)
        return tern_err_set(err, TERN_E_ARG, "kern_matmul: ldy = %lld < n_out = %lld", (long long)ldy, (long long)w->n_out);
    if (r0 < 0 || r1 < r0 || r1 > w->n_out)
        return tern_err_set(err, TERN_E_ARG, "kern_matmul: rows [%lld, %lld) outside [0, %lld)", (long long)r0,
                            (long long)r1, (long long)w->n_out);
    if (r0 % KERN_ROW_ALIGN != 0 || (r1 % KERN_ROW_ALIGN != 0 && r1 != w->n_out))
        return tern_err_set(err, TERN_E_ARG, "kern_matmul: rows [%lld, %lld) not aligned to %d", (long long)r0,
                            (long long)r1, KERN_ROW_ALIGN);
    return TERN_OK;
}

void kern_matmul_table(const kern_table *t, const kern_w *w, const kern_act *a, float *y, int64_t ldy, int64_t r0,
                       int64_t r1, int32_t *isum) {
#ifdef TERN_DEBUG
    TERN_ASSERT(kern_matmul_check(w, a, ldy, r0, r1, NULL) == TERN_OK);
#else
    TERN_ASSERT(a->K == w->n_in && r0 >= 0 && r1 <= w->n_out);   /* the cheap part of the check */
#endif
    if (r0 >= r1) return;
    const int kt = kern_type_index(w->type);
    TERN_ASSERT(kt >= 0 && (unsigned)a->mode <= KQ_F32);
    kern_mm_fn fn = t->mm[kt][a->mode];
    for (const kern_table *f = t->fallback; !fn && f; f = f->fallback) fn = f->mm[kt][a->mode];
    if (!fn) fn = kern_table_ref.mm[kt][a->mode];
    const kern_mm_args m = {w, a, y, ldy, isum};
    fn(&m, r0, r1);
}

void kern_matmul(const kern_w *w, const kern_act *a, float *y, int64_t ldy, int64_t r0, int64_t r1) {
    kern_matmul_table(kern_active(), w, a, y, ldy, r0, r1, NULL);
}
