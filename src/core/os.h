/* os.h: the operating-system calls the library needs, one function per concern, so that the POSIX
 * and the Windows (mingw-w64) versions live side by side in os.c and nowhere else in src/.
 * Layer 1 (libc, POSIX or Win32 only). */
#ifndef TERN_CORE_OS_H
#define TERN_CORE_OS_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <stdint.h>

/* open() flags that only one side has: Windows opens files in text mode (CR LF translation)
 * unless O_BINARY is given, and has no O_CLOEXEC (its CRT descriptors are not inherited by
 * programs we start, since we start none). */
#ifndef O_BINARY
#define O_BINARY 0
#endif
#ifndef O_NONBLOCK
#define O_NONBLOCK 0   /* Windows: no FIFOs to block on */
#endif
#ifndef S_ISSOCK
#define S_ISSOCK(m) 0
#endif
#ifndef S_ISBLK
#define S_ISBLK(m) 0
#endif
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* The VM page size in bytes (4096 when the system does not say). */
size_t os_page_size(void);

/* n bytes of zeroed, page-aligned, read-write private memory (anonymous mmap; VirtualAlloc on
 * Windows), or NULL. Released only by os_pages_free(p, n) with the same n. */
void *os_pages_alloc(size_t n);
void os_pages_free(void *p, size_t n);

/* A private (copy-on-write) read-write mapping of the first n bytes of the open file fd, or NULL
 * with errno set. Writes never reach the file. Released only by os_file_unmap(p, n). Windows:
 * not provided (NULL, errno ENOSYS): callers read the file into os_pages_alloc memory instead. */
void *os_file_map(int fd, size_t n);
void os_file_unmap(void *p, size_t n);

/* Advice, never required for correctness: back [p, p+n) with transparent huge pages; or give
 * back the physical pages of [p, p+n) of private memory (later reads see zeros for anonymous
 * memory, the file's bytes for a private file mapping). No-ops on Windows. */
void os_advise_huge(void *p, size_t n);
void os_advise_dontneed(void *p, size_t n);

/* align-aligned memory (align a power of two, a multiple of sizeof(void *)); n any size. Freed
 * only by os_aligned_free (free() is not valid on Windows, where this is _aligned_malloc). */
void *os_aligned_alloc(size_t align, size_t n);
void os_aligned_free(void *p);

/* The CPUs this process may run on: the affinity mask (sched_getaffinity on Linux,
 * GetProcessAffinityMask on Windows, which sees at most the 64 CPUs of its processor group),
 * else the online count; 1..1024. */
int os_cpus_available(void);
/* The CPU the calling thread runs on now (it may move at any time after), or -1 where the OS
 * does not say. A hint for spin-or-sleep choices; never needed for correctness. */
int os_current_cpu(void);
/* The time the calling thread has spent ready to run but waiting for a CPU (run delay, ns): a
 * handle opened by that thread (Linux: /proc/thread-self/schedstat, kept open; -1 where the OS
 * does not say), read by one pread from any thread, closed once. */
int os_run_delay_open(void);
int64_t os_run_delay_read(int h);    /* ns, or -1 */
void os_run_delay_close(int h);      /* h = -1: nothing */

/* Fills buf with n bytes from the OS's random source; 0 on success, -1 when it is unavailable. */
int os_random_bytes(void *buf, size_t n);

/* Physical memory still available to this process in bytes (MemAvailable of /proc/meminfo on
 * Linux, ullAvailPhys of GlobalMemoryStatusEx on Windows); 0 when unknown. */
uint64_t os_mem_available(void);

/* The first occurrence of needle[0..m) in hay[0..n), or NULL (glibc memmem; a plain search on
 * Windows, whose CRT has none). */
const void *os_memmem(const void *hay, size_t n, const void *needle, size_t m);

/* qsort with a context argument (glibc qsort_r's argument order; qsort_s on Windows). */
void os_qsort_r(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *), void *ctx);

#endif
