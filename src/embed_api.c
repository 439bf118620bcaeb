/* embed_api.c — colibri_init_ex and colibri_embed_size (docs/EMBEDDING.md).
 *
 * Two layers below do the work, so the forward pass knows nothing of it:
 *  - the source: model/source.c opens a clb_io (core/platform.h) instead of a path; the
 *    container reads the header, metadata and dense tensors through it, the expert store's
 *    I/O threads the experts (moe/prefetch.c read_range);
 *  - the block: core/heap.h, installed on this thread for the init, serves every allocation
 *    of the allocation layer (clb_malloc..., clb_map_weights, clb_map_anon) and cJSON's. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "core/heap.h"
#include "core/platform.h"
#include "engine.h"

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

/* cJSON's nodes through the allocation layer (the plain C heap unless a block is installed
   on the allocating thread; frees are recognised by address) */
static void install_json_hooks(void) {
    cJSON_Hooks h = {.malloc_fn = clb_malloc, .free_fn = clb_free};
    cJSON_InitHooks(&h);
}

static int io_from_source(const colibri_source *src, clb_io *io) {
    memset(io, 0, sizeof *io);
    if (!src || !src->read) return clb_err(COLIBRI_ERR_ARG, "colibri_init_ex: a source with a read callback is needed");
    snprintf(io->name, sizeof io->name, "%s", src->name && *src->name ? src->name : "source");
    io->read = src->read;
    io->map = src->map;
    io->ctx = src->ctx;
    io->size = src->length;
    if (src->size) {
        int rc = src->size(src->ctx, &io->size);
        if (rc) return clb_err(COLIBRI_ERR_IO, "%s: the size callback failed (%d)", io->name, rc);
    }
    if (io->size == 0) return clb_err(COLIBRI_ERR_ARG, "%s: the source is empty (size 0)", io->name);
    return COLIBRI_OK;
}

int colibri_embed_size(const colibri_source *src, const colibri_params *params, uint64_t *bytes) {
    if (!bytes) return clb_err(COLIBRI_ERR_ARG, "colibri_embed_size: NULL result");
    *bytes = 0;
    clb_io io;
    int rc = io_from_source(src, &io);
    if (rc) return rc;
    pthread_once(&hooks_once, install_json_hooks);
    clb_heap h;
    clb_heap_init(&h, NULL, 0); /* measuring */
    clb_heap_install(&h);
    colibri_engine_t *e = clb_init_engine(NULL, &io, params, NULL);
    clb_heap_install(NULL);
    if (!e) return clb_last_status();
    *bytes = clb_heap_need(&h) + sizeof(clb_heap) + 64;
    colibri_free(e);
    return COLIBRI_OK;
}

colibri_engine_t *colibri_init_ex(const colibri_source *src, const colibri_params *params, void *mem,
                                  size_t mem_size) {
    clb_io io;
    if (io_from_source(src, &io)) return NULL;
    if (!mem) return clb_init_engine(NULL, &io, params, NULL);
    pthread_once(&hooks_once, install_json_hooks);
    /* the heap's own state at the block's start, the pieces after it */
    const uintptr_t a = (uintptr_t)mem, h0 = (uintptr_t)clb_align_up(a, 64);
    clb_heap *h = NULL;
    if (h0 - a + sizeof *h < mem_size) {
        h = (clb_heap *)h0;
        clb_heap_init(h, (void *)(h0 + sizeof *h), mem_size - (h0 - a) - sizeof *h);
    }
    colibri_engine_t *e = NULL;
    if (h && h->base) {
        if (clb_heap_install(h)) return NULL;
        e = clb_init_engine(NULL, &io, params, h);
        clb_heap_install(NULL);
        if (e) return e;
        const bool full = h->short_req != 0;
        clb_heap_unregister(h);
        if (!full) return NULL; /* another error: its message stands */
    }
    /* too small: measure what it takes (on the C heap) and say so in one line */
    char why[256];
    snprintf(why, sizeof why, "%s", colibri_last_error());
    uint64_t need = 0;
    if (colibri_embed_size(src, params, &need) == COLIBRI_OK)
        clb_err(COLIBRI_ERR_NOMEM,
                "%s: the memory block of %zu bytes is too small: this model with these parameters needs %llu bytes "
                "(colibri_embed_size)",
                io.name, mem_size, (unsigned long long)need);
    else
        clb_err(COLIBRI_ERR_NOMEM, "%s: the memory block of %zu bytes is too small (%s)", io.name, mem_size, why);
    return NULL;
}
