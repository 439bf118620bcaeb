/* common.h — errors, logging, checked arithmetic and small helpers shared by every layer. */
#ifndef CLB_COMMON_H
#define CLB_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

/* Sets this thread's last error (printf-style, one line) and returns status. Usage:
   return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated header", path); */
int clb_err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current error message (for context as errors propagate). */
void clb_err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *clb_last_error(void);
int clb_last_status(void); /* the status of this thread's last clb_err (INTERNAL when none) */
void clb_clear_error(void);

/* Diagnostics through the user's log callback (silent by default). */
enum { CLB_LOG_ERROR = 0, CLB_LOG_WARN = 1, CLB_LOG_INFO = 2, CLB_LOG_DEBUG = 3 };
void clb_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Overflow-checked arithmetic: return false on overflow. */
static inline bool clb_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool clb_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
/* true when [off, off+len) lies inside [0, size) without overflow. */
static inline bool clb_range_ok(uint64_t off, uint64_t len, uint64_t size) {
    return off <= size && len <= size - off;
}
static inline uint64_t clb_align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* 64-byte aligned allocation (SIMD-touched buffers); free with clb_free_aligned. */
void *clb_alloc_aligned(size_t size);
void clb_free_aligned(void *p);

/* Allocation hook counting calls, so tests can prove the per-token path does not allocate.
   Every allocation in the library goes through clb_malloc/clb_calloc/clb_realloc/clb_free. */
void *clb_malloc(size_t n);
void *clb_calloc(size_t n, size_t size);
void *clb_realloc(void *p, size_t n);
void clb_free(void *p);
char *clb_strdup(const char *s);
uint64_t clb_alloc_count(void); /* number of allocations so far (process-wide) */

/* Little-endian loads/stores (files are little-endian on every host). */
static inline uint16_t clb_rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t clb_rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t clb_rd_u64(const uint8_t *p) {
    return (uint64_t)clb_rd_u32(p) | ((uint64_t)clb_rd_u32(p + 4) << 32);
}
static inline void clb_wr_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void clb_wr_u64(uint8_t *p, uint64_t v) {
    clb_wr_u32(p, (uint32_t)v); clb_wr_u32(p + 4, (uint32_t)(v >> 32));
}

/* Monotonic time in seconds. */
double clb_now(void);

#define CLB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CLB_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CLB_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
