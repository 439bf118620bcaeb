/* platform.c — file mapping and process information (Linux/POSIX). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/heap.h"
#include "core/platform.h"

int clb_map_open(const char *path, clb_map *out) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (!path || !*path) return clb_err(COLIBRI_ERR_ARG, "no file name given");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return clb_err(COLIBRI_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return clb_err(COLIBRI_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return clb_err(COLIBRI_ERR_IO, "%s: is a directory", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return clb_err(COLIBRI_ERR_IO, "%s: not a regular file", path);
    }
    out->size = (uint64_t)st.st_size;
    if (out->size > 0) {
        void *p = mmap(NULL, (size_t)out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return clb_err(COLIBRI_ERR_IO, "%s: mmap: %s", path, strerror(e));
        }
        out->data = p;
    }
    out->fd = fd;
    out->avail = out->size;
    out->path = clb_strdup(path);
    return COLIBRI_OK;
}

int clb_io_read(const clb_io *io, uint64_t off, uint64_t len, void *dst) {
    uint8_t *d = dst;
    while (len > 0) { /* pieces of at most 1 GiB: a callback's size_t and int64_t both hold them */
        const size_t n = (size_t)CLB_MIN(len, (uint64_t)1 << 30);
        const int64_t r = io->read(io->ctx, off, n, d);
        if (r < 0)
            return clb_err(COLIBRI_ERR_IO, "%s: the read callback failed (%lld) at offset %llu (%zu bytes)", io->name,
                           (long long)r, (unsigned long long)off, n);
        if ((uint64_t)r != n)
            return clb_err(COLIBRI_ERR_IO, "%s: short read at offset %llu: %lld of %zu bytes", io->name,
                           (unsigned long long)off, (long long)r, n);
        off += n;
        d += n;
        len -= n;
    }
    return COLIBRI_OK;
}

int clb_map_open_io(const clb_io *io, uint64_t prefix, clb_map *out) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->io = io;
    out->size = io->size;
    if (!(out->path = clb_strdup(io->name))) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    if (io->size == 0) return COLIBRI_OK;
    if (io->map) {
        out->data = io->map(io->ctx, io->size);
        if (out->data) {
            out->avail = io->size;
            return COLIBRI_OK;
        }
    }
    out->avail = CLB_MIN(prefix, io->size);
    if (out->avail > SIZE_MAX - 64 || !(out->buf = clb_alloc_aligned((size_t)out->avail))) {
        int rc = clb_err(COLIBRI_ERR_NOMEM, "%s: cannot hold %llu bytes of the model", io->name,
                         (unsigned long long)out->avail);
        clb_map_close(out);
        return rc;
    }
    int rc = clb_io_read(io, 0, out->avail, out->buf);
    if (rc) {
        clb_map_close(out);
        return rc;
    }
    out->data = out->buf;
    return COLIBRI_OK;
}

void clb_map_close(clb_map *m) {
    if (!m) return;
    if (m->io) clb_free_aligned(m->buf);
    else if (m->data) munmap((void *)m->data, (size_t)m->size);
    if (m->fd >= 0) close(m->fd);
    clb_free(m->path);
    memset(m, 0, sizeof *m);
    m->fd = -1;
}

int clb_read_file(const char *path, size_t max_len, char **out, size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return clb_err(COLIBRI_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return clb_err(COLIBRI_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_len) {
        fclose(f);
        return clb_err(COLIBRI_ERR_FORMAT, "%s: too large (%lld bytes, limit %zu)", path,
                       (long long)st.st_size, max_len);
    }
    size_t n = (size_t)st.st_size;
    char *buf = clb_malloc(n + 1);
    if (!buf) {
        fclose(f);
        return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    }
    if (n && fread(buf, 1, n, f) != n) {
        fclose(f);
        clb_free(buf);
        return clb_err(COLIBRI_ERR_IO, "%s: short read", path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return COLIBRI_OK;
}

int clb_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int clb_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *clb_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = clb_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

static uint64_t status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10) * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

uint64_t clb_peak_rss(void) { return status_kb("VmHWM"); }
uint64_t clb_current_rss(void) { return status_kb("VmRSS"); }

int clb_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

uint64_t clb_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "MemAvailable:", 13)) { /* strtoull, not sscanf (35 KB of a static glibc) */
            kb = strtoull(line + 13, NULL, 10);
            break;
        }
    fclose(f);
    return (uint64_t)kb * 1024;
}

bool clb_copy_fits(uint64_t bytes) {
    if (clb_heap_current()) return false; /* a caller's block holds no optional copies */
    const uint64_t avail = clb_mem_available();
    return bytes < avail && avail - bytes >= ((uint64_t)512 << 20);
}

void *clb_map_weights(uint64_t bytes) {
    if (!bytes) return NULL;
    clb_heap *h = clb_heap_current();
    if (h && h->base) {
        void *p = clb_heap_alloc(h, (size_t)bytes, CLB_HEAP_ALIGN);
        if (p) memset(p, 0, (size_t)bytes);
        return p;
    }
    void *m = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(m, (size_t)bytes, MADV_HUGEPAGE);
#endif
    if (h) clb_heap_note(h, m, (size_t)bytes, CLB_HEAP_ALIGN);
    return m;
}

void *clb_map_anon(uint64_t bytes, bool prot_none) {
    if (!bytes || bytes > SIZE_MAX) return NULL;
    clb_heap *h = clb_heap_current();
    if (h && h->base) return clb_heap_alloc(h, (size_t)bytes, CLB_HEAP_ALIGN);
    void *m = mmap(NULL, (size_t)bytes, prot_none ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (h) clb_heap_note(h, m, (size_t)bytes, CLB_HEAP_ALIGN);
    return m;
}

void clb_advise_huge(void *p, uint64_t bytes) {
    const clb_heap *h = clb_heap_current();
    if (!p || !bytes || (h && h->base)) return;
#ifdef MADV_HUGEPAGE
    madvise(p, (size_t)bytes, MADV_HUGEPAGE);
#endif
}

void clb_unmap(void *p, uint64_t bytes) {
    if (!p || clb_heap_free_owned(p)) return;
    clb_heap *h = clb_heap_current();
    if (h && !h->base) clb_heap_note_free(h, p);
    munmap(p, (size_t)bytes);
}

void clb_release_pages(const void *p, uint64_t len) {
    const uintptr_t a0 = clb_align_up((uintptr_t)p, 4096), a1 = ((uintptr_t)p + len) & ~(uintptr_t)4095;
    if (a1 > a0) madvise((void *)a0, a1 - a0, MADV_DONTNEED);
}
