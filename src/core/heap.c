/* heap.c — see heap.h. */
#include <pthread.h>
#include <string.h>

#include "core/common.h"
#include "core/heap.h"

/* Under AddressSanitizer the block's bytes outside the pieces handed out are poisoned, so an
   overrun of a piece (into a header, the next piece or the unused rest) is reported as it
   would be on the C heap. */
#if defined(__SANITIZE_ADDRESS__)
#define CLB_HEAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLB_HEAP_ASAN 1
#endif
#endif
#ifdef CLB_HEAP_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HDR 16              /* piece header: u64 size, u64 magic */
#define MAGIC 0x636c6268656170ULL /* "clbheap" */
#define MAX_HEAPS 64

static _Thread_local clb_heap *tl_heap;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static clb_heap *registry[MAX_HEAPS];
static _Atomic int n_registered;

void clb_heap_init(clb_heap *h, void *mem, size_t size) {
    memset(h, 0, sizeof *h);
    if (!mem) return;
    const uintptr_t a = (uintptr_t)mem, b = (uintptr_t)clb_align_up(a, CLB_HEAP_ALIGN);
    if (b - a >= size) return; /* nothing usable: base stays NULL, size 0 (every take fails) */
    h->base = (uint8_t *)b;
    h->size = size - (b - a);
}

clb_heap *clb_heap_current(void) { return tl_heap; }

int clb_heap_install(clb_heap *h) {
    if (h && h->base && !h->registered) {
        pthread_mutex_lock(&mu);
        for (int i = 0; i < MAX_HEAPS; i++)
            if (!registry[i]) {
                registry[i] = h;
                h->registered = true;
                n_registered++;
                break;
            }
        pthread_mutex_unlock(&mu);
        /* frees are told apart by address: an unregistered block cannot be used */
        if (!h->registered) return clb_err(COLIBRI_ERR_ARG, "at most %d engines in callers' blocks at once", MAX_HEAPS);
        POISON(h->base, h->size);
    }
    tl_heap = h;
    return COLIBRI_OK;
}

void clb_heap_unregister(clb_heap *h) {
    if (!h || !h->registered) return;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_HEAPS; i++)
        if (registry[i] == h) {
            registry[i] = NULL;
            n_registered--;
        }
    h->registered = false;
    pthread_mutex_unlock(&mu);
    UNPOISON(h->base, h->size); /* the caller's memory again */
    if (tl_heap == h) tl_heap = NULL;
}

/* the offset arithmetic shared by real and measuring heaps: false when it does not fit */
static bool take(clb_heap *h, size_t n, size_t align, uint64_t *off) {
    uint64_t o = clb_align_up(h->used + HDR, align), end;
    if (!clb_add_u64(o, n, &end)) return false;
    if (h->base && end > h->size) return false;
    *off = o;
    h->last_prev = h->used;
    h->last_off = o;
    h->used = end;
    if (end > h->peak) h->peak = end;
    return true;
}

void *clb_heap_alloc(clb_heap *h, size_t n, size_t align) {
    if (!h->base) {
        if (!h->short_req) h->short_req = n ? n : 1;
        return NULL;
    }
    pthread_mutex_lock(&mu);
    uint64_t off;
    void *p = NULL;
    if (take(h, n, align, &off)) {
        p = h->base + off;
        uint64_t hdr[2] = {n, MAGIC};
        UNPOISON(h->base + off - HDR, HDR);
        memcpy(h->base + off - HDR, hdr, HDR);
        POISON(h->base + off - HDR, HDR);
        UNPOISON(p, n);
        h->last = p;
    } else if (!h->short_req) {
        h->short_req = n ? n : 1;
    }
    pthread_mutex_unlock(&mu);
    return p;
}

void clb_heap_note(clb_heap *h, const void *real, size_t n, size_t align) {
    uint64_t off;
    if (real && take(h, n, align, &off)) h->last = real;
}

void clb_heap_note_free(clb_heap *h, const void *real) {
    if (real && real == h->last) {
        h->used = h->last_prev;
        h->last = NULL;
    }
}

static clb_heap *owner_of(const void *p) {
    if (!p || n_registered == 0) return NULL;
    for (int i = 0; i < MAX_HEAPS; i++) {
        clb_heap *h = registry[i];
        if (h && (const uint8_t *)p >= h->base && (const uint8_t *)p < h->base + h->size) return h;
    }
    return NULL;
}

bool clb_heap_free_owned(void *p) {
    if (!p || n_registered == 0) return false;
    pthread_mutex_lock(&mu);
    clb_heap *h = owner_of(p);
    if (h) {
        uint64_t n;
        UNPOISON((uint8_t *)p - HDR, HDR);
        memcpy(&n, (uint8_t *)p - HDR, sizeof n);
        POISON((uint8_t *)p - HDR, HDR);
        POISON(p, n); /* a use after free is reported */
        if (p == h->last) {
            h->used = h->last_prev;
            h->last = NULL;
        }
    }
    pthread_mutex_unlock(&mu);
    return h != NULL;
}

void *clb_heap_realloc_owned(void *p, size_t n, bool *owned) {
    *owned = false;
    if (!p || n_registered == 0) return NULL;
    pthread_mutex_lock(&mu);
    clb_heap *h = owner_of(p);
    if (!h) {
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    *owned = true;
    uint64_t hdr[2];
    UNPOISON((uint8_t *)p - HDR, HDR);
    memcpy(hdr, (uint8_t *)p - HDR, HDR);
    POISON((uint8_t *)p - HDR, HDR);
    void *out = NULL;
    if (p == h->last) { /* the newest piece grows or shrinks where it is */
        uint64_t end;
        if (clb_add_u64(h->last_off, n, &end) && end <= h->size) {
            h->used = end;
            if (end > h->peak) h->peak = end;
            POISON(p, hdr[0]);
            hdr[0] = n;
            UNPOISON((uint8_t *)p - HDR, HDR);
            memcpy((uint8_t *)p - HDR, hdr, HDR);
            POISON((uint8_t *)p - HDR, HDR);
            UNPOISON(p, n);
            out = p;
        } else if (!h->short_req) {
            h->short_req = n;
        }
        pthread_mutex_unlock(&mu);
        return out;
    }
    pthread_mutex_unlock(&mu);
    out = clb_heap_alloc(h, n, 16);
    if (out) memcpy(out, p, (size_t)CLB_MIN(hdr[0], (uint64_t)n));
    return out;
}

uint64_t clb_heap_need(const clb_heap *h) { return h->peak + CLB_HEAP_ALIGN; }

void clb_heap_note_realloc(clb_heap *h, const void *old, const void *real, size_t n) {
    if (!real) return;
    if (old && old == h->last) { /* the block grows its newest piece in place */
        h->used = h->last_off + n;
        if (h->used > h->peak) h->peak = h->used;
        h->last = real;
        return;
    }
    clb_heap_note(h, real, n, 16);
}
