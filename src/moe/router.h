/* router.h — turns one token's router logits into the experts it uses and their weights. */
#ifndef CLB_ROUTER_H
#define CLB_ROUTER_H

#include <stdbool.h>

typedef struct clb_router_cfg {
    int n_expert;
    int k;              /* experts per token (run-time adjustable) */
    int score;          /* clb_router_score: softmax over all experts, or sigmoid */
    bool norm_topk;     /* renormalise the selected weights to sum 1 */
    float scale;        /* routed_scaling_factor (1 = none) */
    int n_group, topk_group; /* group-limited selection; 0 = off */
    float temperature;  /* router logits are divided by it (1 = off) */
    const float *bias;  /* [n_expert] added to scores for selection only, or NULL */
} clb_router_cfg;

/* Selects c->k experts for one token. logits [n_expert] (not modified), scratch
   [2 * n_expert] floats. sel[k] receives expert ids in selection order (descending
   selection score, ties to the lower id), w[k] their weights. */
void clb_route(const clb_router_cfg *c, const float *logits, float *scratch, int *sel, float *w);

#endif
