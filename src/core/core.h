/* core.h: errors, assertions, checked size arithmetic, aligned allocation, logging.
 * Layer 1: includes only libc and tern.h. Source of truth: ../shared/STYLE.md "Errors". */
#ifndef TERN_CORE_CORE_H
#define TERN_CORE_CORE_H

#include "tern.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The printf format archetype of our formatting functions: mingw-w64 builds with its C99 printf
 * (__USE_MINGW_ANSI_STDIO, which knows %zu and %lld) and names that archetype here. */
#ifdef __MINGW_PRINTF_FORMAT
#define TERN_PRINTF_FMT __MINGW_PRINTF_FORMAT
#else
#define TERN_PRINTF_FMT printf
#endif

/* tern_err_set, tern_err_clear and tern_time_s are public (tern.h). */

/* Programming-error checks (never for input). TERN_ASSERT is always on and aborts with
 * file:line; TERN_DASSERT only in debug builds (TERN_DEBUG defined). */
void tern_assert_fail(const char *expr, const char *file, int line);
#define TERN_ASSERT(x) do { if (!(x)) tern_assert_fail(#x, __FILE__, __LINE__); } while (0)
#ifdef TERN_DEBUG
#define TERN_DASSERT(x) TERN_ASSERT(x)
#else
#define TERN_DASSERT(x) do { (void)sizeof(x); } while (0)
#endif

/* Checked arithmetic on sizes read from files: return false on overflow, *out untouched. */
static inline bool ck_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}
static inline bool ck_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (b > UINT64_MAX - a) return false;
    *out = a + b;
    return true;
}

/* 64-byte aligned allocation (activations, KV, scratch). Returns NULL on failure or n == 0
 * overflow; free with tern_free_aligned (NULL safe). In debug builds, allocations while the
 * no-alloc guard is armed (the token loop) abort: see tern_noalloc_enter/leave. */
void *tern_alloc_aligned(size_t n);
void *tern_calloc_aligned(size_t n);
void tern_free_aligned(void *p);
void tern_noalloc_enter(void);
void tern_noalloc_leave(void);

/* UTF-8 (Unicode 15 section 3.9, D92: no overlong forms, no surrogates, nothing above U+10FFFF),
 * for the GGUF reader's names, the tokenizer's byte streams and the programs' text checks.
 * tern_utf8_seq: at p[0..n) (n >= 1), the length of a complete valid sequence (> 0); 0 for a
 * valid but incomplete prefix (it needs more bytes); -(length of the maximal invalid subpart,
 * the bytes one U+FFFD replaces) otherwise. tern_utf8_valid_len: n when s[0..n) is valid, else
 * the offset of the first byte of the first invalid or truncated sequence. */
int tern_utf8_seq(const unsigned char *p, int n);
size_t tern_utf8_valid_len(const char *s, size_t n);

/* Logging: the library reports progress/warnings through a callback (default: stderr for
 * levels >= TERN_LOG_WARN, silent otherwise). Never stdout. */
enum { TERN_LOG_DEBUG = 0, TERN_LOG_INFO = 1, TERN_LOG_WARN = 2, TERN_LOG_ERROR = 3 };
typedef void (*tern_log_fn)(int level, const char *msg, void *user);
void tern_log_set(tern_log_fn fn, void *user, int min_level);
void tern_log(int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(TERN_PRINTF_FMT, 2, 3)))
#endif
    ;

/* Minimum and maximum. */
#define TERN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TERN_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* TERN_CORE_CORE_H */
