/* test_router.c — routing decisions and weights on hand-computed cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "model/model.h"
#include "moe/router.h"

static void route(const clb_router_cfg *c, const float *logits, int *sel, float *w) {
    float scratch[64];
    clb_route(c, logits, scratch, sel, w);
}

static void test_softmax_topk_renorm(void **state) {
    (void)state;
    /* logits 0, ln2, ln4, ln1 -> softmax = 1/8, 2/8, 4/8, 1/8; top-2 = {2, 1} with 4/6, 2/6 */
    const float lg[4] = {0.0f, logf(2.0f), logf(4.0f), 0.0f};
    clb_router_cfg c = {.n_expert = 4, .k = 2, .score = CLB_SCORE_SOFTMAX, .norm_topk = true, .scale = 1.0f};
    int sel[4];
    float w[4];
    route(&c, lg, sel, w);
    assert_int_equal(sel[0], 2);
    assert_int_equal(sel[1], 1);
    assert_float_equal(w[0], 4.0f / 6.0f, 1e-6);
    assert_float_equal(w[1], 2.0f / 6.0f, 1e-6);
    /* without renormalisation the weights are the softmax probabilities */
    c.norm_topk = false;
    route(&c, lg, sel, w);
    assert_float_equal(w[0], 0.5f, 1e-6);
    assert_float_equal(w[1], 0.25f, 1e-6);
    /* routed scaling multiplies them */
    c.scale = 2.5f;
    route(&c, lg, sel, w);
    assert_float_equal(w[0], 1.25f, 1e-6);
    /* ties go to the lower id: experts 0 and 3 tie for third place */
    c.k = 3;
    c.scale = 1.0f;
    route(&c, lg, sel, w);
    assert_int_equal(sel[2], 0);
}

static void test_temperature(void **state) {
    (void)state;
    /* T = 2 halves the logits: softmax(0, ln2) over 2 experts -> 1/(1+sqrt2), sqrt2/(1+sqrt2) */
    const float lg[2] = {0.0f, logf(2.0f)};
    clb_router_cfg c = {.n_expert = 2, .k = 1, .score = CLB_SCORE_SOFTMAX, .temperature = 2.0f};
    int sel[2];
    float w[2];
    route(&c, lg, sel, w);
    assert_int_equal(sel[0], 1);
    assert_float_equal(w[0], sqrtf(2.0f) / (1.0f + sqrtf(2.0f)), 1e-6);
}

static void test_sparsemixer(void **state) {
    (void)state;
    /* Phi-3.5-MoE: threshold 2 * jitter on (m - s) / max(|s|, m). jitter 0.38: step 1 keeps
       4, 3.9 and 1 (ratios 0, 0.025, 0.75), step 2 (expert 0 out, m = 3.9) keeps 3.9 and 1
       (0.744), not -2 (1.51) */
    const float lg[4] = {4.0f, 3.9f, 1.0f, -2.0f};
    clb_router_cfg c = {.n_expert = 4, .k = 2, .score = CLB_SCORE_SPARSEMIXER, .jitter = 0.38f};
    int sel[4];
    float w[4];
    route(&c, lg, sel, w);
    assert_int_equal(sel[0], 0);
    assert_int_equal(sel[1], 1);
    assert_float_equal(w[0], 1.0f / (1.0f + expf(-0.1f) + expf(-3.0f)), 1e-6);
    assert_float_equal(w[1], 1.0f / (1.0f + expf(-2.9f)), 1e-6);
    /* the published 0.01 masks all but the best of each step */
    c.jitter = 0.01f;
    route(&c, lg, sel, w);
    assert_float_equal(w[0], 1.0f, 1e-7);
    assert_float_equal(w[1], 1.0f, 1e-7);
    /* negative logits: the factor is |s| (m < 0) */
    const float ng[3] = {-1.0f, -1.005f, -3.0f};
    c.n_expert = 3;
    route(&c, ng, sel, w);
    assert_int_equal(sel[0], 0);
    assert_float_equal(w[0], 1.0f / (1.0f + expf(-0.005f)), 1e-6);
    assert_int_equal(sel[1], 1);
    assert_float_equal(w[1], 1.0f, 1e-7);
}

static void test_sigmoid_bias_groups(void **state) {
    (void)state;
    /* sigmoid scores; the bias changes the choice but not the weights */
    const float lg[4] = {0.0f, 1.0f, 2.0f, -1.0f};
    const float bias[4] = {0.0f, 0.0f, -0.5f, 2.0f};
    clb_router_cfg c = {.n_expert = 4, .k = 2, .score = CLB_SCORE_SIGMOID, .norm_topk = false, .bias = bias};
    int sel[4];
    float w[4];
    route(&c, lg, sel, w);
    /* choice = sig + bias = .5, .731, .381, 2.269 -> experts 3, 1 */
    assert_int_equal(sel[0], 3);
    assert_int_equal(sel[1], 1);
    assert_float_equal(w[0], 1.0f / (1.0f + expf(1.0f)), 1e-6);
    assert_float_equal(w[1], 1.0f / (1.0f + expf(-1.0f)), 1e-6);
    /* groups of 2: {0,1} and {2,3}; with topk_group 1 only one group may be used.
       No bias: group score = best score: group 0 max .731, group 1 max .881 -> group 1 */
    c.bias = NULL;
    c.n_group = 2;
    c.topk_group = 1;
    route(&c, lg, sel, w);
    assert_int_equal(sel[0], 2);
    assert_int_equal(sel[1], 3);
    /* with the bias, group score = sum of the two best choices: g0 1.231, g1 2.650;
       experts outside the kept groups get choice 0 (as DeepSeek-V3 masks them) */
    c.bias = bias;
    c.group_score = 1;
    route(&c, lg, sel, w);
    assert_int_equal(sel[0], 3);
    assert_int_equal(sel[1], 2);
}

static void test_top_p(void **state) {
    (void)state;
    /* probabilities .5, .25, .125, .125: p = .7 needs 2 experts, p = .8 needs 3 */
    const float lg[4] = {logf(4.0f), logf(2.0f), 0.0f, 0.0f};
    clb_router_cfg c = {.n_expert = 4, .k = 2, .score = CLB_SCORE_SOFTMAX, .norm_topk = false, .top_p = 0.7f};
    int sel[4];
    float w[4], scratch[8];
    assert_int_equal(clb_route(&c, lg, scratch, sel, w), 2);
    c.top_p = 0.8f;
    assert_int_equal(clb_route(&c, lg, scratch, sel, w), 3);
    assert_int_equal(sel[2], 2);
    c.k_max = 2; /* bounded above */
    assert_int_equal(clb_route(&c, lg, scratch, sel, w), 2);
    c.k_max = 0;
    c.top_p = 0.4f;
    c.k_min = 2; /* and below */
    assert_int_equal(clb_route(&c, lg, scratch, sel, w), 2);
    c.k_min = 0;
    assert_int_equal(clb_route(&c, lg, scratch, sel, w), 1);
    c.norm_topk = true; /* renormalised over the dynamic set */
    c.top_p = 0.7f;
    assert_int_equal(clb_route(&c, lg, scratch, sel, w), 2);
    assert_float_equal(w[0], 2.0f / 3.0f, 1e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_topk_renorm),
        cmocka_unit_test(test_temperature),
        cmocka_unit_test(test_sparsemixer),
        cmocka_unit_test(test_sigmoid_bias_groups),
        cmocka_unit_test(test_top_p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
