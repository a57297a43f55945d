/* os.c: the POSIX and Windows versions of the calls in os.h. Every #ifdef _WIN32 of src/ is here. */
#include "core/os.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef _WIN32
#include <windows.h>
#include <malloc.h>
#include <math.h>
#include <string.h>

/* fmaf with one rounding, as C11 requires and the kernels' reference order assumes (glibc's is
 * exact, and -mfma files inline vfmadd): mingw-w64's libmingwex fmaf rounds more than once, so
 * the scalar oracle disagreed with the AVX2 tables in the last bit. Being defined here, in an
 * object of the program, it is the one the static link uses. Method: a*b is exact in double
 * (24 + 24 significant bits <= 53); s = a*b + c rounded to double, and its error e (TwoSum,
 * exact); when e != 0 the last bit of s is forced odd toward e (round-to-odd), and a
 * round-to-odd result with 53 >= 24 + 2 bits rounds to the correct float. Finite inputs cannot
 * overflow or underflow in double; NaN and infinity pass through the plain sum. */
float fmaf(float a, float b, float c) {
    const double p = (double)a * (double)b, cd = (double)c;
    double s = p + cd;
    if (!isfinite(s)) return (float)s;
    const double t = s - p, e = (p - (s - t)) + (cd - t);
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    if (e != 0 && !(u & 1)) {
        u = (e > 0) == (s > 0) ? u + 1 : u - 1;   /* one ulp of s toward the exact sum */
        memcpy(&s, &u, sizeof s);
    }
    return (float)s;
}

size_t os_page_size(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize ? (size_t)si.dwPageSize : 4096;
}

void *os_pages_alloc(size_t n) { return VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE); }
void os_pages_free(void *p, size_t n) { (void)n; if (p) VirtualFree(p, 0, MEM_RELEASE); }

void *os_file_map(int fd, size_t n) { (void)fd; (void)n; errno = ENOSYS; return NULL; }
void os_file_unmap(void *p, size_t n) { (void)p; (void)n; }

void os_advise_huge(void *p, size_t n) { (void)p; (void)n; }
void os_advise_dontneed(void *p, size_t n) { (void)p; (void)n; }

void *os_aligned_alloc(size_t align, size_t n) { return _aligned_malloc(n ? n : 1, align); }
void os_aligned_free(void *p) { _aligned_free(p); }

int os_cpus_available(void) {
    DWORD_PTR proc = 0, sys = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys) && proc) {
        int c = 0;
        for (; proc; proc &= proc - 1) c++;
        return c;
    }
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)(si.dwNumberOfProcessors > 1024 ? 1024 : si.dwNumberOfProcessors) : 1;
}

int os_current_cpu(void) { return (int)GetCurrentProcessorNumber(); }
int os_run_delay_open(void) { return -1; }
int64_t os_run_delay_read(int h) { (void)h; return -1; }
void os_run_delay_close(int h) { (void)h; }

/* RtlGenRandom (advapi32's SystemFunction036): the CSPRNG behind rand_s. */
BOOLEAN NTAPI SystemFunction036(PVOID buf, ULONG n);
int os_random_bytes(void *buf, size_t n) {
    return n <= 0xffffffffu && SystemFunction036(buf, (ULONG)n) ? 0 : -1;
}

uint64_t os_mem_available(void) {
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    return GlobalMemoryStatusEx(&ms) ? (uint64_t)ms.ullAvailPhys : 0;
}

const void *os_memmem(const void *hay, size_t n, const void *needle, size_t m) {
    if (m == 0) return hay;
    const unsigned char *h = hay, *x = needle;
    for (size_t i = 0; m <= n && i <= n - m; i++)
        if (h[i] == x[0] && memcmp(h + i, x, m) == 0) return h + i;
    return NULL;
}

/* qsort_s passes the context first: a per-thread trampoline restores glibc's order. */
static _Thread_local int (*qs_cmp)(const void *, const void *, void *);
static int qs_tramp(void *ctx, const void *a, const void *b) { return qs_cmp(a, b, ctx); }
void os_qsort_r(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *), void *ctx) {
    int (*prev)(const void *, const void *, void *) = qs_cmp;
    qs_cmp = cmp;
    qsort_s(base, n, size, qs_tramp, ctx);
    qs_cmp = prev;
}

#else
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

size_t os_page_size(void) {
    const long pg = sysconf(_SC_PAGESIZE);
    return pg > 0 ? (size_t)pg : 4096;
}

void *os_pages_alloc(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
void os_pages_free(void *p, size_t n) { if (p) munmap(p, n); }

void *os_file_map(int fd, size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}
void os_file_unmap(void *p, size_t n) { if (p) munmap(p, n); }

void os_advise_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE);
#else
    (void)p; (void)n;
#endif
}
void os_advise_dontneed(void *p, size_t n) { (void)madvise(p, n, MADV_DONTNEED); }

void *os_aligned_alloc(size_t align, size_t n) {
    const size_t rounded = (n + align - 1) & ~(align - 1);   /* aligned_alloc wants a multiple */
    return aligned_alloc(align, rounded ? rounded : align);
}
void os_aligned_free(void *p) { free(p); }

int os_cpus_available(void) {
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    const long nc = sysconf(_SC_NPROCESSORS_ONLN);
    return nc > 0 ? (int)(nc > 1024 ? 1024 : nc) : 1;
}

int os_current_cpu(void) {
#ifdef __linux__
    return sched_getcpu();   /* glibc: the rseq area's cpu_id, no system call */
#else
    return -1;
#endif
}

int os_run_delay_open(void) {
#ifdef __linux__
    return open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
#else
    return -1;
#endif
}
/* schedstat: "<ns on the CPU> <ns waiting on a run queue> <time slices>\n" */
int64_t os_run_delay_read(int h) {
    if (h < 0) return -1;
    char buf[96];
    const ssize_t n = pread(h, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *e;
    (void)strtoull(buf, &e, 10);
    if (e == buf) return -1;
    const char *f = e;
    const unsigned long long d = strtoull(f, &e, 10);
    return e == f ? -1 : (int64_t)d;
}
void os_run_delay_close(int h) { if (h >= 0) close(h); }

int os_random_bytes(void *buf, size_t n) {
    return getrandom(buf, n, GRND_NONBLOCK) == (ssize_t)n ? 0 : -1;
}

uint64_t os_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
        fclose(f);
    }
    return (uint64_t)kb * 1024;
}

const void *os_memmem(const void *hay, size_t n, const void *needle, size_t m) {
    return memmem(hay, n, needle, m);
}

void os_qsort_r(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *), void *ctx) {
    qsort_r(base, n, size, cmp, ctx);
}
#endif
