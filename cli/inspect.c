/* inspect.c — `colibri inspect` and `colibri verify`. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
                      "section and every tensor.\nA compressed file: every chunk is decoded too. An encrypted file: with "
                      "its key (--key-file)\nevery chunk is authenticated and decoded; without, only the stored bytes' "
                      "CRC32s are checked.\nExit status 0 when intact; otherwise names the first corrupt tensor or chunk.",
                      &path);
    if (rc >= 0) return rc;
    uint64_t bytes = 0;
    int auth = 1;
    double t0 = cli_now();
    if (colibri_verify_ex(path, &bytes, &auth)) return cli_fail("%s", colibri_last_error());
    double dt = cli_now() - t0;
    if (auth) printf("%s: OK\n", path);
    else printf("%s: OK as stored (encrypted: give its key with --key-file to authenticate every chunk)\n", path);
    fprintf(stderr, "colibri: verified %.2f MiB in %.3f s (%.2f GB/s; AES-256-GCM by %s)\n", bytes / 1048576.0, dt,
            dt > 0 ? bytes / 1e9 / dt : 0.0, colibri_aes_name());
    return 0;
}

/* `colibri keygen FILE`: 32 random bytes from the kernel, as 64 hex digits, in a new file
   readable by its owner only. */
int cmd_keygen(int argc, char **argv) {
    const char *path;
    int rc = one_path(argc, argv,
                      "usage: colibri keygen KEYFILE\n\nWrites a new random AES-256 key (64 hex digits) to KEYFILE, "
                      "created with mode 0600;\nan existing file is never overwritten. Use it with --key-file KEYFILE.",
                      &path);
    if (rc >= 0) return rc;
    uint8_t key[32];
    int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (r < 0 || read(r, key, sizeof key) != (ssize_t)sizeof key) {
        if (r >= 0) close(r);
        return cli_fail("keygen: no random bytes from /dev/urandom");
    }
    close(r);
    char hex[66];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
    hex[64] = '\n';
    memset(key, 0, sizeof key);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return cli_fail("keygen: %s: %s", path, strerror(errno));
    bool ok = write(fd, hex, 65) == 65;
    ok = close(fd) == 0 && ok;
    memset(hex, 0, sizeof hex);
    if (!ok) {
        unlink(path);
        return cli_fail("keygen: %s: could not write the key", path);
    }
    fprintf(stderr, "colibri: wrote a new key to %s (keep it secret; without it the models it encrypts cannot be read)\n",
            path);
    return 0;
}
