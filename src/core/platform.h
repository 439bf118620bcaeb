/* platform.h — files and memory maps. Every reader works on a clb_map and bounds-checks
   against map->size before touching a byte. */
#ifndef CLB_PLATFORM_H
#define CLB_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A caller's byte source instead of a file (colibri_source of colibri_init_ex): read is
   required, map optional (a pointer to all size bytes, e.g. memory-mapped flash). */
typedef struct clb_io {
    int64_t (*read)(void *ctx, uint64_t offset, size_t len, void *dst);
    const void *(*map)(void *ctx, uint64_t size);
    void *ctx;
    uint64_t size;
    char name[64]; /* for messages */
} clb_io;

typedef struct clb_map {
    const uint8_t *data; /* read-only mapping of the whole file (NULL when size == 0) */
    uint64_t size;       /* file size in bytes */
    int fd;              /* kept open for pread-based loading; -1 when closed */
    char *path;
    /* a source's map (clb_map_open_io): io set, fd -1. data is the caller's mapping, or a
       copy read through io->read into buf — all size bytes, or the first `avail` only (the
       rest is read on demand: the bounded mode's experts) */
    const clb_io *io;
    uint8_t *buf;
    uint64_t avail;      /* bytes readable at data (== size but for a prefix copy) */
} clb_map;

/* Maps path read-only. Errors: COLIBRI_ERR_IO (missing, unreadable, a directory). */
int clb_map_open(const char *path, clb_map *out);
void clb_map_close(clb_map *m);
/* A map of a caller's source: its map callback's pointer when it gives one, else the first
   `prefix` bytes (all of them when prefix >= size) read into an aligned copy. */
int clb_map_open_io(const clb_io *io, uint64_t prefix, clb_map *out);
/* Reads exactly len bytes at off through io->read: COLIBRI_ERR_IO naming the source and
   offset on an error or a short read (the callback's count is checked, never trusted). */
int clb_io_read(const clb_io *io, uint64_t off, uint64_t len, void *dst);

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
/* Anonymous memory, page aligned, not touched (MAP_NORESERVE; the expert pool): from the
   installed heap's block when there is one (core/heap.h). NULL on failure; clb_unmap frees. */
void *clb_map_anon(uint64_t bytes, bool prot_none);
/* Asks for transparent huge pages on [p, p + bytes) of a mapping of clb_map_anon (best
   effort; nothing when the memory is a caller's block): a first write then faults 2 MiB at a
   time instead of 4 KiB, which matters where something other than the kernel fills the pages. */
void clb_advise_huge(void *p, uint64_t bytes);

#endif
