/* expert_store.c — the mmap-backed expert store (see expert_store.h). */
#include <stdatomic.h>
#include <string.h>

#include "core/common.h"
#include "moe/expert_store.h"

typedef struct slot {
    clb_expert_w w;
    bool present;
    atomic_int pins; /* acquire/release balance, checked in debug builds and tests */
} slot;

struct clb_expert_store {
    int n_layer, n_expert;
    slot *slots; /* [n_layer][n_expert] */
};

clb_expert_store *clb_store_create(int n_layer, int n_expert) {
    clb_expert_store *s = clb_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_layer = n_layer;
    s->n_expert = n_expert;
    s->slots = clb_calloc((size_t)n_layer * (size_t)(n_expert > 0 ? n_expert : 1), sizeof *s->slots);
    if (!s->slots) {
        clb_free(s);
        return NULL;
    }
    return s;
}

void clb_store_free(clb_expert_store *s) {
    if (!s) return;
    clb_free(s->slots);
    clb_free(s);
}

static slot *get(clb_expert_store *s, int layer, int expert) {
    if (!s || layer < 0 || layer >= s->n_layer || expert < 0 || expert >= s->n_expert) return NULL;
    return &s->slots[(size_t)layer * (size_t)s->n_expert + (size_t)expert];
}

clb_expert_w *clb_store_slot(clb_expert_store *s, int layer, int expert) {
    slot *sl = get(s, layer, expert);
    if (!sl) return NULL;
    sl->present = true;
    return &sl->w;
}

int clb_store_acquire(clb_expert_store *s, int layer, int expert, const clb_expert_w **out) {
    slot *sl = get(s, layer, expert);
    if (!sl || !sl->present)
        return clb_err(COLIBRI_ERR_ARG, "expert %d of layer %d does not exist", expert, layer);
    atomic_fetch_add(&sl->pins, 1);
    *out = &sl->w;
    return COLIBRI_OK;
}

void clb_store_release(clb_expert_store *s, int layer, int expert) {
    slot *sl = get(s, layer, expert);
    if (sl) atomic_fetch_sub(&sl->pins, 1);
}

uint64_t clb_store_expert_bytes(const clb_expert_store *s, int layer, int expert) {
    const slot *sl = get((clb_expert_store *)s, layer, expert);
    if (!sl || !sl->present) return 0;
    return sl->w.gate.row_bytes * (uint64_t)sl->w.gate.rows + sl->w.up.row_bytes * (uint64_t)sl->w.up.rows +
           sl->w.down.row_bytes * (uint64_t)sl->w.down.rows;
}
