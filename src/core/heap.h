/* heap.h — a caller's memory block as the library's only memory (colibri_init_ex).
 *
 * While a heap is installed on a thread (clb_heap_install), every allocation that thread
 * makes through the allocation layer — clb_malloc/calloc/realloc/strdup, clb_alloc_aligned,
 * clb_map_weights, clb_map_anon (the expert pool), and cJSON's nodes (its hooks are the
 * library's) — is carved from the block: a bump allocator, 64-byte aligned (4096 for
 * mappings), each piece behind a 16-byte header that keeps its size. Freeing the last piece
 * gives its bytes back (the temporary-buffer pattern of a loader); any other free leaves
 * them in the block until the engine goes. So the bytes a block needs are a function of the
 * sequence of requests, which a model and its parameters fix: a measuring heap (no block)
 * runs the same arithmetic on offsets while the C heap serves the requests, and its peak is
 * what colibri_embed_size reports.
 *
 * Frees are recognised by address (clb_heap_free_owned), whatever thread makes them, as
 * long as the heap is registered (from install to clb_heap_unregister at engine free). */
#ifndef CLB_HEAP_H
#define CLB_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLB_HEAP_ALIGN 4096 /* the block's start is rounded up to this */

typedef struct clb_heap {
    uint8_t *base;     /* CLB_HEAP_ALIGN-aligned start of the usable bytes; NULL = measuring */
    uint64_t size;     /* usable bytes (0 when measuring) */
    uint64_t used;     /* bump offset */
    uint64_t peak;     /* largest `used` so far = the block's need, less the alignment slack */
    const void *last;  /* the newest piece (freeing it rolls `used` back) */
    uint64_t last_off; /* its offset */
    uint64_t last_prev;/* `used` before it */
    uint64_t short_req;/* the first request the block could not hold (0 = none) */
    bool registered;
} clb_heap;

/* mem NULL: a measuring heap. The usable size is what is left after rounding mem up. */
void clb_heap_init(clb_heap *h, void *mem, size_t size);
/* This thread's allocations go to h (NULL: back to the C heap). A real heap is registered
   for frees by address on the first install: COLIBRI_ERR_ARG when 64 already are. */
int clb_heap_install(clb_heap *h);
clb_heap *clb_heap_current(void);
void clb_heap_unregister(clb_heap *h);
/* A piece of n bytes at `align` (a power of two, >= 16): the block's bytes, or NULL when
   the block is full (short_req records it). Real heaps only. */
void *clb_heap_alloc(clb_heap *h, size_t n, size_t align);
/* Measuring: records a piece the C heap gave (real) as the block would have placed it. */
void clb_heap_note(clb_heap *h, const void *real, size_t n, size_t align);
/* Measuring: a piece the C heap is about to free / has resized (rolls back when last). */
void clb_heap_note_free(clb_heap *h, const void *real);
void clb_heap_note_realloc(clb_heap *h, const void *old, const void *real, size_t n);
/* true when p lies in a registered block; then the piece is released (rolled back when it
   is the newest) and the caller must not free it. */
bool clb_heap_free_owned(void *p);
/* p's piece grown or shrunk to n bytes in its block (in place when newest); NULL when the
   block is full. *owned = false when p is not a block's (then nothing was done). */
void *clb_heap_realloc_owned(void *p, size_t n, bool *owned);
/* The bytes a block needs for what this heap has served: peak + the alignment slack. */
uint64_t clb_heap_need(const clb_heap *h);

#endif
