/* tern.h: the public API of tern, a C11 inference engine for ternary LLMs in GGUF.
 *
 * Conventions (stated once): row-major; a weight W has GGUF shape ne = [n_in, n_out], so
 * y[o] = dot(W[o, :], x). Every function returns TERN_OK (0) or a negative TERN_E_* code and,
 * when given a tern_err, fills it with a message naming what, where, expected and got.
 * The library never exits, never prints to stdout and never aborts on bad input.
 * Memory: objects returned through an out-pointer are owned by the caller and released with
 * the matching *_free(); *_free(NULL) is always safe. */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_VERSION "0.1.0"

enum {
    TERN_OK = 0,
    TERN_E_IO = -1,          /* open/read/write/mmap failed */
    TERN_E_FORMAT = -2,      /* malformed input file or data */
    TERN_E_UNSUPPORTED = -3, /* well-formed but not supported (type, architecture, transform) */
    TERN_E_NOMEM = -4,       /* allocation failed, or the request does not fit in memory */
    TERN_E_ARG = -5,         /* invalid argument from the caller */
    TERN_E_RANGE = -6,       /* value out of range (token id, position, context full) */
};

/* Error report. code: TERN_OK or a TERN_E_*; msg: NUL-terminated text, owned by the caller. */
typedef struct tern_err {
    int code;
    char msg[256];
} tern_err;

/* Name of an error code ("TERN_E_FORMAT"); static string. */
const char *tern_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif /* TERN_TERN_H */
