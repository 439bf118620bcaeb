/* arena.c — see arena.h. */
#include <string.h>

#include "core/arena.h"
#include "core/common.h"

void *clb_arena_take(clb_arena *a, size_t bytes) {
    size_t off = (size_t)clb_align_up(a->used, 64);
    size_t need = (size_t)clb_align_up(bytes, 64);
    if (!a->base) { /* counting pass */
        a->used = off + need;
        return NULL;
    }
    if (off + need > a->size) return NULL;
    a->used = off + need;
    return a->base + off;
}

int clb_arena_alloc_block(clb_arena *a) {
    a->size = a->used ? a->used : 64;
    a->base = clb_alloc_aligned(a->size);
    a->used = 0;
    if (!a->base) return clb_err(COLIBRI_ERR_NOMEM, "cannot allocate %zu bytes of activations", a->size);
    memset(a->base, 0, a->size);
    return COLIBRI_OK;
}

void clb_arena_release(clb_arena *a) {
    if (!a) return;
    clb_free_aligned(a->base);
    memset(a, 0, sizeof *a);
}
