/* router.h — turns one token's router logits into the experts it uses and their weights. */
#ifndef CLB_ROUTER_H
#define CLB_ROUTER_H

#include <stdbool.h>

typedef struct clb_router_cfg {
    int n_expert;
    int k;              /* experts per token (run-time adjustable) */
    int score;          /* clb_router_score: softmax over all experts, or sigmoid */
    bool norm_topk;     /* renormalise the selected weights to sum 1 */
    float norm_min;     /* the renormalising sum is at least this (ERNIE's moe_norm_min; 0 = off) */
    float scale;        /* routed_scaling_factor (1 = none) */
    int n_group, topk_group; /* group-limited selection; 0 = off */
    int group_score;    /* a group's score: 0 = its best choice, 1 = the sum of its best two */
    float temperature;  /* router logits are divided by it (1 = off) */
    float jitter;       /* CLB_SCORE_SPARSEMIXER's threshold (router_jitter_noise) */
    const float *bias;  /* [n_expert] added to scores for selection only, or NULL */
    /* dynamic k: the smallest number of experts whose routing probability reaches top_p,
       within [k_min, k_max]; top_p <= 0 uses k */
    float top_p;
    int k_min, k_max;
} clb_router_cfg;

/* Selects the experts of one token and returns how many (c->k, or with top_p the dynamic
   count). logits [n_expert] (not modified), scratch [2 * n_expert] floats. sel[] receives
   expert ids in selection order (descending selection score, ties to the lower id), w[]
   their weights; both need room for max(k, k_max) entries. */
int clb_route(const clb_router_cfg *c, const float *logits, float *scratch, int *sel, float *w);

#endif
