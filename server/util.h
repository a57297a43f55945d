/* util.h: small helpers for server/ and the tools that share it (only tern.h underneath). */
#ifndef TERN_SERVER_UTIL_H
#define TERN_SERVER_UTIL_H

#include "tern.h"

#include <stdio.h>

/* As the library's tern_err_set: fill err (if not NULL and not already set) with code and a
 * printf-style message; returns code. */
int srv_err_set(tern_err *err, int code, const char *fmt, ...)
#if defined(__MINGW_PRINTF_FORMAT)
    __attribute__((format(__MINGW_PRINTF_FORMAT, 3, 4)))   /* mingw-w64's C99 printf (see core.h) */
#elif defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Monotonic clock in seconds. */
double srv_now(void);

#endif /* TERN_SERVER_UTIL_H */
