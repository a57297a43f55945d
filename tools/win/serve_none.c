/* serve_none.c: `tern serve` in builds without the HTTP server (the Windows build, which has no
 * libmicrohttpd): says so on stderr and fails. */
#include "cli.h"

#include <stdio.h>

int cmd_serve(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "tern: serve is not available in this build (no HTTP server library for Windows)\n");
    return 1;
}
