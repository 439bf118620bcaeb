/* router.c — scoring (softmax / sigmoid), optional correction bias and group limit,
 * top-k, renormalisation and scaling, in the order the Hugging Face modeling code uses. */
#include <float.h>
#include <math.h>

#include "moe/router.h"
#include "core/common.h"
#include "model/model.h"

/* Phi-3.5-MoE's sparsemixer at inference (modeling_phimoe.sparsemixer, eval mode): step j
   takes the best logit m among the experts not chosen yet, masks every logit s of those
   with (m - s) / max(|s|, m) > 2 * jitter, and gives the chosen expert its probability in
   the softmax over the rest. HF defines k = 2; a run-time k repeats the step. */
static int route_sparsemixer(const clb_router_cfg *c, const float *lg, float *p, int *sel, float *w) {
    const int n = c->n_expert, k = CLB_MIN(c->k, n);
    const float thr = 2.0f * c->jitter;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int q = 0; q < j; q++) taken |= sel[q] == i;
            p[i] = taken ? -INFINITY : lg[i];
            if (!taken && (best < 0 || lg[i] > lg[best])) best = i;
        }
        const float m = lg[best];
        double sum = 0;
        for (int i = 0; i < n; i++) {
            if (p[i] == -INFINITY || (m - lg[i]) / fmaxf(fabsf(lg[i]), m) > thr) {
                p[i] = 0;
                continue;
            }
            p[i] = expf(lg[i] - m);
            sum += p[i];
        }
        sel[j] = best;
        w[j] = (float)(p[best] / sum);
    }
    return k;
}

int clb_route(const clb_router_cfg *c, const float *logits, float *scratch, int *sel, float *w) {
    const int n = c->n_expert;
    if (c->score == CLB_SCORE_SPARSEMIXER) {
        const float inv_t = (c->temperature > 0 && c->temperature != 1.0f) ? 1.0f / c->temperature : 1.0f;
        float *lg = scratch + n;
        for (int i = 0; i < n; i++) lg[i] = logits[i] * inv_t;
        return route_sparsemixer(c, lg, scratch, sel, w);
    }
    float *score = scratch;      /* [n] routing probabilities */
    float *choice = scratch + n; /* [n] scores used for selection */
    const float inv_t = (c->temperature > 0 && c->temperature != 1.0f) ? 1.0f / c->temperature : 1.0f;
    if (c->score == CLB_SCORE_SIGMOID) {
        for (int i = 0; i < n; i++) score[i] = 1.0f / (1.0f + expf(-logits[i] * inv_t));
    } else {
        float mx = -FLT_MAX;
        for (int i = 0; i < n; i++) mx = fmaxf(mx, logits[i] * inv_t);
        double sum = 0;
        for (int i = 0; i < n; i++) {
            score[i] = expf(logits[i] * inv_t - mx);
            sum += score[i];
        }
        for (int i = 0; i < n; i++) score[i] = (float)(score[i] / sum);
    }
    for (int i = 0; i < n; i++) choice[i] = score[i] + (c->bias ? c->bias[i] : 0.0f);

    if (c->n_group > 1 && c->topk_group > 0 && c->topk_group < c->n_group && n % c->n_group == 0) {
        /* group score: the sum of its two best choice scores (DeepSeek-V3's noaux_tc) or its
           best one (DeepSeek-V2's group_limited_greedy) */
        const int per = n / c->n_group;
        float gscore[256];
        bool keep[256] = {false};
        for (int g = 0; g < c->n_group && g < 256; g++) {
            float b1 = -FLT_MAX, b2 = -FLT_MAX;
            for (int i = g * per; i < (g + 1) * per; i++) {
                if (choice[i] > b1) {
                    b2 = b1;
                    b1 = choice[i];
                } else if (choice[i] > b2) {
                    b2 = choice[i];
                }
            }
            gscore[g] = c->group_score ? b1 + (per > 1 ? b2 : 0) : b1;
        }
        for (int k = 0; k < c->topk_group; k++) {
            int best = -1;
            for (int g = 0; g < c->n_group; g++)
                if (!keep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
            keep[best] = true;
        }
        for (int i = 0; i < n; i++)
            if (!keep[i / per]) choice[i] = 0.0f; /* as the HF code masks them */
    }

    /* top-k by selection score: k is small, a partial selection sort is fastest */
    int k_sel = c->k;
    if (c->top_p > 0) k_sel = c->k_max > 0 ? CLB_MIN(c->k_max, n) : n;
    for (int k = 0; k < k_sel; k++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int j = 0; j < k; j++)
                if (sel[j] == i) taken = true;
            if (!taken && (best < 0 || choice[i] > choice[best])) best = i;
        }
        sel[k] = best;
        w[k] = score[best];
    }
    int k_used = k_sel;
    if (c->top_p > 0) {
        /* the routing probabilities: softmax scores as they are, sigmoid scores normalised */
        double total = 0, acc = 0;
        for (int i = 0; i < n; i++) total += score[i];
        int kmin = c->k_min > 0 ? CLB_MIN(c->k_min, k_sel) : 1;
        k_used = k_sel;
        for (int k = 0; k < k_sel; k++) {
            acc += w[k];
            if (k + 1 >= kmin && acc >= c->top_p * total) {
                k_used = k + 1;
                break;
            }
        }
    }
    if (c->norm_topk) {
        double sum = 0;
        for (int k = 0; k < k_used; k++) sum += w[k];
        if (sum < c->norm_min) sum = c->norm_min; /* torch.clamp(sum, min=norm_min) */
        if (sum > 0)
            for (int k = 0; k < k_used; k++) w[k] = (float)(w[k] / sum);
    }
    if (c->scale != 0 && c->scale != 1.0f)
        for (int k = 0; k < k_used; k++) w[k] *= c->scale;
    return k_used;
}
