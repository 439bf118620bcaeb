/* expert_exec.c — expert parallelism's side in the library (colibri_set_expert_exec): the
   placement table and the exchange buffers. The engine (engine.c moe) skips the experts
   another rank owns and hands its rows to the caller's transport; no transport here. */
#include <string.h>

#include "core/common.h"
#include "engine.h"

static colibri_expert_exec g_default;
static bool g_default_on;

void colibri_set_default_expert_exec(const colibri_expert_exec *x) {
    g_default_on = x != NULL;
    if (x) g_default = *x;
}

void clb_xp_free(colibri_engine_t *e) {
    clb_free(e->xp_owner);
    clb_free(e->xp_send);
    clb_free(e->xp_recv);
    clb_free(e->xp_pos);
    clb_free(e->xp_counts);
    clb_free(e->xp_rows);
    e->xp_owner = NULL;
    e->xp_send = e->xp_recv = NULL;
    e->xp_pos = e->xp_rows = NULL;
    e->xp_counts = NULL;
    e->xp_on = false;
}

int colibri_set_expert_exec(colibri_engine_t *e, const colibri_expert_exec *x) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    clb_xp_free(e);
    if (!x) return COLIBRI_OK;
    if (x->n_ranks < 1 || x->rank < 0 || x->rank >= x->n_ranks || !x->begin || !x->end)
        return clb_err(COLIBRI_ERR_ARG, "expert executor: rank %d of %d, or no begin/end", x->rank, x->n_ranks);
    const clb_hparams *hp = e->hp;
    const int ne = hp->n_expert;
    if (ne <= 0) return COLIBRI_OK; /* a dense model: nothing to share, every rank computes all */
    /* attention experts stay on every rank (the store places FFN experts only, by a table of
       hp->n_expert per layer, which must then be its row width) */
    if (hp->n_attn_exp > ne)
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "expert parallelism with more attention experts (%d) than FFN experts (%d)",
                       hp->n_attn_exp, ne);
    const size_t rows = (size_t)e->n_batch * (size_t)e->k_cap;
    e->xp_owner = clb_calloc((size_t)hp->n_layer * (size_t)ne, sizeof(int32_t));
    e->xp_send = clb_calloc(rows * (size_t)hp->n_embd, sizeof(float));
    e->xp_recv = clb_calloc(rows * (size_t)hp->n_embd, sizeof(float));
    e->xp_pos = clb_calloc(rows, sizeof(int));
    e->xp_counts = clb_calloc((size_t)x->n_ranks, sizeof(int64_t));
    e->xp_rows = clb_calloc((size_t)x->n_ranks, sizeof(int));
    if (!e->xp_owner || !e->xp_send || !e->xp_recv || !e->xp_pos || !e->xp_counts || !e->xp_rows) {
        clb_xp_free(e);
        return clb_err(COLIBRI_ERR_NOMEM, "out of memory (expert-parallel buffers)");
    }
    for (int l = 0; l < hp->n_layer; l++)
        for (int k = 0; k < ne; k++) {
            const int32_t r = x->owner ? x->owner(x->ctx, l, k) : k % x->n_ranks;
            if (r < 0 || r >= x->n_ranks) {
                clb_xp_free(e);
                return clb_err(COLIBRI_ERR_ARG, "expert %d of layer %d placed on rank %d of %d", k, l, r, x->n_ranks);
            }
            e->xp_owner[(int64_t)l * ne + k] = r;
        }
    e->xp = *x;
    e->xp_on = true;
    return COLIBRI_OK;
}

int clb_xp_apply_default(colibri_engine_t *e) {
    return g_default_on ? colibri_set_expert_exec(e, &g_default) : COLIBRI_OK;
}
