/* util.c: error reports and the clock for server/ code (which sees only tern.h). */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int srv_err_set(tern_err *err, int code, const char *fmt, ...) {
    if (!err || err->code < 0) return code;          /* sticky: the first error wins */
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
