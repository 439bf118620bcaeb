/* error.c — the per-thread last-error message, the log callback and the allocation hook. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "core/heap.h"

static _Thread_local char err_msg[1024];
static _Thread_local int err_status;
static colibri_log_fn log_fn;
static void *log_user;
static atomic_uint_fast64_t n_allocs;

int clb_err(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    err_status = status;
    /* one line: newlines in user-provided strings must not break the message */
    for (char *p = err_msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return status;
}

void clb_err_prefix(const char *fmt, ...) {
    char pre[512], old[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err_msg, sizeof old);
    /* "pre: old", cut to the buffer (spelled out: snprintf would warn about truncation) */
    size_t np = strlen(pre), no = strlen(old), cap = sizeof err_msg - 1;
    if (np > cap) np = cap;
    memcpy(err_msg, pre, np);
    size_t k = np;
    for (const char *sep = ": "; *sep && k < cap; sep++) err_msg[k++] = *sep;
    if (no > cap - k) no = cap - k;
    memcpy(err_msg + k, old, no);
    err_msg[k + no] = 0;
}

const char *clb_last_error(void) { return err_msg; }
int clb_last_status(void) { return err_status ? err_status : COLIBRI_ERR_INTERNAL; }
void clb_clear_error(void) { err_msg[0] = 0; }
const char *colibri_last_error(void) { return err_msg; }

void colibri_set_log(colibri_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

void clb_log(int level, const char *fmt, ...) {
    if (!log_fn) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(level, buf, log_user);
}

const char *colibri_version(void) { return "0.1.0"; }

/* With a heap installed on this thread (core/heap.h: colibri_init_ex's block), pieces come
   from the block; a measuring heap notes what the C heap gives. */
void *clb_malloc(size_t n) {
    atomic_fetch_add(&n_allocs, 1);
    clb_heap *h = clb_heap_current();
    if (h && h->base) return clb_heap_alloc(h, n ? n : 1, 16);
    void *p = malloc(n ? n : 1);
    if (h) clb_heap_note(h, p, n ? n : 1, 16);
    return p;
}
void *clb_calloc(size_t n, size_t size) {
    atomic_fetch_add(&n_allocs, 1);
    clb_heap *h = clb_heap_current();
    if (h) {
        size_t bytes;
        if (__builtin_mul_overflow(n ? n : 1, size ? size : 1, &bytes)) return NULL;
        if (h->base) {
            void *p = clb_heap_alloc(h, bytes, 16);
            if (p) memset(p, 0, bytes);
            return p;
        }
        void *p = calloc(n ? n : 1, size ? size : 1);
        clb_heap_note(h, p, bytes, 16);
        return p;
    }
    return calloc(n ? n : 1, size ? size : 1);
}
void *clb_realloc(void *p, size_t n) {
    atomic_fetch_add(&n_allocs, 1);
    bool owned;
    void *q = clb_heap_realloc_owned(p, n ? n : 1, &owned);
    if (owned) return q;
    clb_heap *h = clb_heap_current();
    if (h && h->base && !p) return clb_heap_alloc(h, n ? n : 1, 16);
    q = realloc(p, n ? n : 1);
    if (h && !h->base) clb_heap_note_realloc(h, p, q, n ? n : 1);
    return q;
}
void clb_free(void *p) {
    if (!p || clb_heap_free_owned(p)) return;
    clb_heap *h = clb_heap_current();
    if (h && !h->base) clb_heap_note_free(h, p);
    free(p);
}
char *clb_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = clb_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}
uint64_t clb_alloc_count(void) { return atomic_load(&n_allocs); }

void *clb_alloc_aligned(size_t size) {
    void *p = NULL;
    atomic_fetch_add(&n_allocs, 1);
    const size_t bytes = clb_align_up(size ? size : 1, 64);
    clb_heap *h = clb_heap_current();
    if (h && h->base) return clb_heap_alloc(h, bytes, 64);
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    if (h) clb_heap_note(h, p, bytes, 64);
    return p;
}
void clb_free_aligned(void *p) { clb_free(p); }

double clb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
