/* platform.h — files and memory maps. Every reader works on a clb_map and bounds-checks
   against map->size before touching a byte. */
#ifndef CLB_PLATFORM_H
#define CLB_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct clb_map {
    const uint8_t *data; /* read-only mapping of the whole file (NULL when size == 0) */
    uint64_t size;       /* file size in bytes */
    int fd;              /* kept open for pread-based loading; -1 when closed */
    char *path;
} clb_map;

/* Maps path read-only. Errors: COLIBRI_ERR_IO (missing, unreadable, a directory). */
int clb_map_open(const char *path, clb_map *out);
void clb_map_close(clb_map *m);

/* Reads a whole (small) file into a NUL-terminated heap buffer; *len excludes the NUL.
   Refuses files larger than max_len. */
int clb_read_file(const char *path, size_t max_len, char **out, size_t *len);

int clb_is_dir(const char *path);
int clb_file_exists(const char *path);
/* Joins dir and name into a heap string. */
char *clb_path_join(const char *dir, const char *name);

/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
uint64_t clb_peak_rss(void);
/* Current resident set size (VmRSS), 0 if unknown. */
uint64_t clb_current_rss(void);
/* Online CPU count (>= 1). */
int clb_cpu_count(void);
/* MemAvailable of /proc/meminfo in bytes, 0 when unknown. */
uint64_t clb_mem_available(void);
/* true when a copy of bytes fits in MemAvailable with 512 MiB to spare (false when unknown) */
bool clb_copy_fits(uint64_t bytes);
/* Gives the whole pages inside [p, p + len) of a file mapping back (MADV_DONTNEED: they stay
   in the page cache and are read again if touched). */
void clb_release_pages(const void *p, uint64_t len);
/* Anonymous read-write memory for weights that stream every token, asking for transparent
   huge pages (best effort: fewer TLB misses). NULL on failure; clb_unmap frees it. */
void *clb_map_weights(uint64_t bytes);
void clb_unmap(void *p, uint64_t bytes);

#endif
