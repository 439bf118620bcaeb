/* fuzz_file.h — the input of a file-reading fuzz target as a file: one memfd per process,
   rewritten for every input and reached through /proc/self/fd. */
#ifndef CLB_FUZZ_FILE_H
#define CLB_FUZZ_FILE_H
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_input", 0);
        if (fd < 0) __builtin_trap();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) __builtin_trap();
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) __builtin_trap();
        done += (size_t)w;
    }
    return path;
}
#endif
