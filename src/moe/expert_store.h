/* expert_store.h — where each routed expert's bytes are. The forward pass reaches expert
 * weights only through acquire/release: acquire(layer, expert) returns weights that stay
 * valid until the matching release. This implementation serves them straight from the
 * model file's mapping; the memory-hierarchy store (budgeted pool, cache, prefetch)
 * replaces it behind the same calls. */
#ifndef CLB_EXPERT_STORE_H
#define CLB_EXPERT_STORE_H

#include "model/model.h"

typedef struct clb_expert_store clb_expert_store;

clb_expert_store *clb_store_create(int n_layer, int n_expert);
void clb_store_free(clb_expert_store *s);
/* The loader fills each (layer, expert) slot once at load time. */
clb_expert_w *clb_store_slot(clb_expert_store *s, int layer, int expert);
/* Weights of (layer, expert), valid until clb_store_release. Errors: out-of-range ids,
   or a slot the model does not have. */
int clb_store_acquire(clb_expert_store *s, int layer, int expert, const clb_expert_w **out);
void clb_store_release(clb_expert_store *s, int layer, int expert);
/* Bytes of one expert (gate + up + down) of a layer. */
uint64_t clb_store_expert_bytes(const clb_expert_store *s, int layer, int expert);

#endif
