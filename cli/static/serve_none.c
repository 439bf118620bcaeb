/* The fully static colibri (make static) has no HTTP server: Debian ships libmicrohttpd's
 * TLS dependencies (p11-kit, libunistring) as shared libraries only, so `serve` is left out
 * there and says so in one line instead of failing to link. */
#include <stdio.h>

#include "../cli.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "colibri: serve is not in the static build (no static HTTP library); use build/<arch>/colibri\n");
    return 2;
}
