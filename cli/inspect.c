/* inspect.c — `colibri inspect` and `colibri verify`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"

static int one_path(int argc, char **argv, const char *usage, const char **path) {
    *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts(usage);
            return 0;
        }
        if (argv[i][0] == '-') return cli_fail("unknown option '%s'", argv[i]), 2;
        if (*path) return cli_fail("only one model may be given"), 2;
        *path = argv[i];
    }
    if (!*path) return cli_fail("no model given"), 2;
    return -1;
}

int cmd_inspect(int argc, char **argv) {
    const char *path;
    int rc = one_path(argc, argv,
                      "usage: colibri inspect MODEL\n\nPrints the header, configuration, tensor table summary and "
                      "bytes per expert of a .colibri file, .gguf file or Hugging Face directory.",
                      &path);
    if (rc >= 0) return rc;
    char *s = colibri_inspect(path);
    if (!s) return cli_fail("%s", colibri_last_error());
    fputs(s, stdout);
    colibri_string_free(s);
    return 0;
}

int cmd_verify(int argc, char **argv) {
    const char *path;
    int rc = one_path(argc, argv,
                      "usage: colibri verify MODEL.colibri\n\nChecks the CRC32 of the header, the metadata, the data "
                      "section and every tensor.\nExit status 0 when intact; otherwise names the first corrupt tensor.",
                      &path);
    if (rc >= 0) return rc;
    uint64_t bytes = 0;
    double t0 = cli_now();
    if (colibri_verify(path, &bytes)) return cli_fail("%s", colibri_last_error());
    double dt = cli_now() - t0;
    printf("%s: OK\n", path);
    fprintf(stderr, "colibri: verified %.2f MiB in %.3f s (%.2f GB/s)\n", bytes / 1048576.0, dt,
            dt > 0 ? bytes / 1e9 / dt : 0.0);
    return 0;
}
