/* test_sampler.c — sampler pipeline on hand-computed distributions, RNG reproducibility,
   frequency check, penalties, stop strings. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/common.h"
#include "text/sampler.h"

static clb_sampler_params plain(void) {
    clb_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    return p;
}

static void get_cands(clb_sampler *s, const float *logits, const int32_t **ids, const float **pr,
                      size_t *n) {
    assert_int_equal(clb_sampler_candidates(s, logits, ids, pr, n), COLIBRI_OK);
}

static void test_topk_temperature(void **st) {
    (void)st;
    const float logits[4] = {1, 2, 3, 4};
    clb_sampler_params p = plain();
    p.top_k = 2;
    p.temperature = 0.5f;
    clb_sampler *s = clb_sampler_create(&p, 4);
    assert_non_null(s);
    const int32_t *ids;
    const float *pr;
    size_t n;
    get_cands(s, logits, &ids, &pr, &n);
    /* kept: ids 3, 2; scaled logits 8, 6 -> p = 1/(1+e^-2), e^-2/(1+e^-2) */
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 2);
    assert_float_equal(pr[0], 0.8807971f, 1e-6);
    assert_float_equal(pr[1], 0.1192029f, 1e-6);
    clb_sampler_free(s);

    /* + top_p 0.8: 0.8808 >= 0.8 after the first -> only id 3 */
    p.top_p = 0.8f;
    s = clb_sampler_create(&p, 4);
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 3);
    assert_float_equal(pr[0], 1.0f, 1e-7);
    clb_sampler_free(s);

    /* top_p 0.9 keeps both; min_p 0.2 -> threshold 0.176 drops id 2 */
    p.top_p = 0.9f;
    p.min_p = 0.2f;
    s = clb_sampler_create(&p, 4);
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 3);
    clb_sampler_free(s);

    /* min_p 0.1 -> threshold 0.088 keeps both */
    p.min_p = 0.1f;
    s = clb_sampler_create(&p, 4);
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, 2);
    assert_float_equal(pr[1], 0.1192029f, 1e-6);
    clb_sampler_free(s);
}

static void test_softmax_top_p(void **st) {
    (void)st;
    const float logits[4] = {1, 2, 3, 4};
    clb_sampler_params p = plain();
    clb_sampler *s = clb_sampler_create(&p, 4);
    const int32_t *ids;
    const float *pr;
    size_t n;
    get_cands(s, logits, &ids, &pr, &n);
    /* e^0..e^3 / 31.19287 */
    assert_int_equal(n, 4);
    const int32_t want_ids[4] = {3, 2, 1, 0};
    const float want[4] = {0.6439142f, 0.2368828f, 0.0871443f, 0.0320586f};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ids[i], want_ids[i]);
        assert_float_equal(pr[i], want[i], 1e-6);
    }
    clb_sampler_free(s);

    /* top_p 0.85: cumulative 0.6439, 0.8808 -> {3, 2} renormalised by 0.880797 */
    p.top_p = 0.85f;
    s = clb_sampler_create(&p, 4);
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, 2);
    assert_float_equal(pr[0], 0.7310586f, 1e-6);
    assert_float_equal(pr[1], 0.2689414f, 1e-6);
    clb_sampler_free(s);

    /* min_p 0.3 with no top_p: threshold 0.19317 keeps {3, 2}, same renormalisation */
    p.top_p = 1.0f;
    p.min_p = 0.3f;
    s = clb_sampler_create(&p, 4);
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, 2);
    assert_float_equal(pr[0], 0.7310586f, 1e-6);
    clb_sampler_free(s);
}

static void test_greedy_ties(void **st) {
    (void)st;
    const float logits[5] = {1, 5, 5, 2, NAN};
    clb_sampler_params p = plain();
    p.temperature = 0.0f;
    clb_sampler *s = clb_sampler_create(&p, 5);
    int32_t t = -1;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(clb_sampler_sample(s, logits, &t), COLIBRI_OK);
        assert_int_equal(t, 1);
    }
    const float all_bad[2] = {NAN, -INFINITY};
    clb_sampler_free(s);
    s = clb_sampler_create(&p, 2);
    assert_int_equal(clb_sampler_sample(s, all_bad, &t), COLIBRI_ERR_ARG);
    clb_sampler_free(s);
    /* equal logits with top_k 1 keep the lowest id */
    p.temperature = 1.0f;
    p.top_k = 1;
    const float flat[3] = {7, 7, 7};
    s = clb_sampler_create(&p, 3);
    assert_int_equal(clb_sampler_sample(s, flat, &t), COLIBRI_OK);
    assert_int_equal(t, 0);
    clb_sampler_free(s);
}

static void test_penalties(void **st) {
    (void)st;
    const float logits[4] = {2.0f, -1.0f, 0.5f, 3.0f};
    clb_sampler_params p = plain();
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    clb_sampler *s = clb_sampler_create(&p, 4);
    clb_sampler_accept(s, 0);
    clb_sampler_accept(s, 1);
    clb_sampler_accept(s, 0);
    clb_sampler_accept(s, 99); /* out of vocabulary: ignored */
    /* token 0: 2/2 - 2*0.5 - 0.25 = -0.25; token 1: -1*2 - 0.5 - 0.25 = -2.75 */
    const double pen[4] = {-0.25, -2.75, 0.5, 3.0};
    double z = 0;
    for (int i = 0; i < 4; i++) z += exp(pen[i]);
    const int32_t *ids;
    const float *pr;
    size_t n;
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, 4);
    const int32_t order[4] = {3, 2, 0, 1};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ids[i], order[i]);
        assert_float_equal(pr[i], exp(pen[order[i]]) / z, 1e-6);
    }
    /* the caller's logits are untouched and a second call gives the same result */
    assert_true(logits[0] == 2.0f && logits[1] == -1.0f);
    get_cands(s, logits, &ids, &pr, &n);
    assert_float_equal(pr[2], exp(-0.25) / z, 1e-6);
    clb_sampler_free(s);

    /* window of 2: only the last two tokens (1, 0) count, each once */
    p.penalty_last_n = 2;
    p.frequency_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.repeat_penalty = 1.0f;
    p.temperature = 0.0f;
    s = clb_sampler_create(&p, 4);
    const float l2[4] = {3.5f, 0.0f, 0.0f, 3.0f};
    int32_t t;
    assert_int_equal(clb_sampler_sample(s, l2, &t), COLIBRI_OK);
    assert_int_equal(t, 0);
    clb_sampler_accept(s, 0);
    clb_sampler_accept(s, 0);
    clb_sampler_accept(s, 1); /* window now {0, 1}: token 0 -> 2.5 */
    assert_int_equal(clb_sampler_sample(s, l2, &t), COLIBRI_OK);
    assert_int_equal(t, 3);
    clb_sampler_reset(s); /* history cleared */
    assert_int_equal(clb_sampler_sample(s, l2, &t), COLIBRI_OK);
    assert_int_equal(t, 0);
    clb_sampler_free(s);
}

static void test_reproducible(void **st) {
    (void)st;
    float logits[50];
    for (int i = 0; i < 50; i++) logits[i] = (float)((i * 37) % 11) * 0.3f;
    clb_sampler_params p = clb_sampler_params_default();
    p.seed = 42;
    clb_sampler *a = clb_sampler_create(&p, 50), *b = clb_sampler_create(&p, 50);
    p.seed = 43;
    clb_sampler *c = clb_sampler_create(&p, 50);
    int32_t seq[200];
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t ta, tb, tc;
        assert_int_equal(clb_sampler_sample(a, logits, &ta), COLIBRI_OK);
        assert_int_equal(clb_sampler_sample(b, logits, &tb), COLIBRI_OK);
        assert_int_equal(clb_sampler_sample(c, logits, &tc), COLIBRI_OK);
        assert_int_equal(ta, tb);
        differ += ta != tc;
        seq[i] = ta;
    }
    assert_true(differ > 20); /* another seed gives another sequence */
    clb_sampler_reset(a);
    for (int i = 0; i < 200; i++) {
        int32_t t;
        clb_sampler_sample(a, logits, &t);
        assert_int_equal(t, seq[i]);
    }
    /* the generator itself: fixed outputs for seed 42 differ from seed 43 and stay in [0,1) */
    for (int i = 0; i < 1000; i++) {
        double u = clb_sampler_rand_double(c);
        assert_true(u >= 0.0 && u < 1.0);
    }
    clb_sampler_free(a);
    clb_sampler_free(b);
    clb_sampler_free(c);
}

static void test_frequencies(void **st) {
    (void)st;
    const float logits[4] = {logf(0.1f), logf(0.2f), logf(0.3f), logf(0.4f)};
    clb_sampler_params p = plain();
    p.seed = 1234;
    clb_sampler *s = clb_sampler_create(&p, 4);
    int counts[4] = {0};
    const int N = 100000;
    uint64_t allocs = clb_alloc_count();
    for (int i = 0; i < N; i++) {
        int32_t t;
        assert_int_equal(clb_sampler_sample(s, logits, &t), COLIBRI_OK);
        assert_true(t >= 0 && t < 4);
        counts[t]++;
    }
    assert_int_equal(clb_alloc_count(), allocs); /* no allocation per token */
    /* expected 10000/20000/30000/40000; sd <= 155, bound 1000 (> 6 sd) */
    for (int i = 0; i < 4; i++) {
        int want = (i + 1) * N / 10;
        assert_true(counts[i] > want - 1000 && counts[i] < want + 1000);
    }
    clb_sampler_free(s);

    /* top_k 2 at temperature 1: only ids 3, 2 in ratio 4:3 */
    p.top_k = 2;
    s = clb_sampler_create(&p, 4);
    int c2[4] = {0};
    for (int i = 0; i < 70000; i++) {
        int32_t t;
        clb_sampler_sample(s, logits, &t);
        c2[t]++;
    }
    assert_int_equal(c2[0] + c2[1], 0);
    assert_true(c2[3] > 39000 && c2[3] < 41000);
    clb_sampler_free(s);

    /* min_p 0.6 without top-k/top-p (the draw that walks the vocabulary unsorted): p >= 0.24
       keeps ids 2, 3 in ratio 3:4; sd ~131, bound 1000 */
    p.top_k = 0;
    p.min_p = 0.6f;
    s = clb_sampler_create(&p, 4);
    int c3[4] = {0};
    for (int i = 0; i < 70000; i++) {
        int32_t t;
        clb_sampler_sample(s, logits, &t);
        c3[t]++;
    }
    assert_int_equal(c3[0] + c3[1], 0);
    assert_true(c3[3] > 39000 && c3[3] < 41000);
    /* the same rule as the sorted path's: candidates (sorted) keep the same two */
    const int32_t *ids;
    const float *pr;
    size_t n;
    assert_int_equal(clb_sampler_candidates(s, logits, &ids, &pr, &n), COLIBRI_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 2);
    clb_sampler_free(s);
}

/* The unsorted draw (temperature > 0, no top-k, no top-p) on a vocabulary that is not a
   multiple of the vector width: NaN and -inf never drawn, +inf always wins, all non-finite is
   an error, a tiny temperature still draws the maximum, and a flat vocabulary is drawn
   uniformly (every id, including the last ones past the vector multiple). */
static void test_unsorted_draw(void **st) {
    (void)st;
    enum { NV = 1003 };
    static float lg[NV];
    for (int i = 0; i < NV; i++) lg[i] = (i % 3 == 0) ? NAN : (i % 3 == 1 ? -INFINITY : 0.0f);
    clb_sampler_params p = plain();
    clb_sampler *s = clb_sampler_create(&p, NV);
    int32_t t;
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(clb_sampler_sample(s, lg, &t), COLIBRI_OK);
        assert_int_equal(t % 3, 2);
    }
    lg[500] = INFINITY;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(clb_sampler_sample(s, lg, &t), COLIBRI_OK);
        assert_int_equal(t, 500);
    }
    for (int i = 0; i < NV; i++) lg[i] = i % 2 ? NAN : -INFINITY;
    assert_int_equal(clb_sampler_sample(s, lg, &t), COLIBRI_ERR_ARG);
    clb_sampler_free(s);
    p.temperature = 1e-30f;
    s = clb_sampler_create(&p, NV);
    for (int i = 0; i < NV; i++) lg[i] = (float)(i % 17);
    lg[1001] = 17.0f;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(clb_sampler_sample(s, lg, &t), COLIBRI_OK);
        assert_int_equal(t, 1001);
    }
    clb_sampler_free(s);
    p.temperature = 1.0f;
    s = clb_sampler_create(&p, NV);
    for (int i = 0; i < NV; i++) lg[i] = 3.0f;
    static int cnt[NV];
    for (int i = 0; i < 200 * NV; i++) {
        assert_int_equal(clb_sampler_sample(s, lg, &t), COLIBRI_OK);
        cnt[t]++;
    }
    for (int i = 0; i < NV; i++) assert_true(cnt[i] > 120 && cnt[i] < 280); /* mean 200, sd 14 */
    clb_sampler_free(s);
}

static void test_large_vocab_topk(void **st) {
    (void)st;
    enum { NV = 5000 };
    static float logits[NV];
    for (int i = 0; i < NV; i++) logits[i] = (float)((i * 7919) % NV) / 100.0f;
    clb_sampler_params p = plain();
    p.top_k = 5;
    clb_sampler *s = clb_sampler_create(&p, NV);
    const int32_t *ids;
    const float *pr;
    size_t n;
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++) {
        /* logits 49.99, 49.98, ... (values NV-1-i) */
        assert_float_equal(logits[ids[i]], (float)(NV - 1 - (int)i) / 100.0f, 1e-5);
    }
    clb_sampler_free(s);
}

/* The whole vocabulary (no top-k): candidates in descending logit, ties (and -0 = +0) by
   ascending id, exactly as a comparison sort orders them; negative, positive, huge, tiny
   and repeated logits, +inf clamped, NaN and -inf left out. */
static void test_large_vocab_order(void **st) {
    (void)st;
    enum { NV = 6007 };
    static float logits[NV];
    uint32_t x = 12345;
    for (int i = 0; i < NV; i++) {
        x = x * 1664525u + 1013904223u;
        const int r = (int)(x >> 20) % 400 - 200; /* many ties */
        logits[i] = (float)r * ((x & 0x100) ? 1e-3f : 37.0f);
    }
    logits[5] = -0.0f;
    logits[6] = 0.0f;
    logits[7] = 3.0e38f;
    logits[8] = INFINITY;
    logits[9] = NAN;
    logits[10] = -INFINITY;
    logits[11] = -3.0e38f;
    logits[12] = 1e-40f; /* subnormal */
    logits[13] = -1e-40f;
    clb_sampler_params p = plain();
    p.temperature = 1000.0f; /* keeps every probability above zero */
    clb_sampler *s = clb_sampler_create(&p, NV);
    const int32_t *ids;
    const float *pr;
    size_t n;
    get_cands(s, logits, &ids, &pr, &n);
    assert_int_equal(n, NV - 2);
    bool seen[NV] = {false};
    for (size_t i = 0; i < n; i++) {
        assert_true(ids[i] >= 0 && ids[i] < NV && ids[i] != 9 && ids[i] != 10 && !seen[ids[i]]);
        seen[ids[i]] = true;
        if (i == 0) continue;
        const float a = ids[i - 1] == 8 ? 3.0e38f : logits[ids[i - 1]], b = ids[i] == 8 ? 3.0e38f : logits[ids[i]];
        assert_true(a > b || (a == b && ids[i - 1] < ids[i]));
    }
    assert_true(ids[0] == 7 && ids[1] == 8); /* 3e38 and the clamped +inf tie */
    clb_sampler_free(s);
}

static void test_bad_params(void **st) {
    (void)st;
    clb_sampler_params p = plain();
    p.repeat_penalty = 0.0f;
    assert_null(clb_sampler_create(&p, 4));
    assert_non_null(strstr(clb_last_error(), "sampler"));
    p = plain();
    p.temperature = NAN;
    assert_null(clb_sampler_create(&p, 4));
    p = plain();
    assert_null(clb_sampler_create(&p, 0));
    assert_null(clb_sampler_create(NULL, 4));
    clb_sampler_free(NULL);
}

static void test_stop_strings(void **st) {
    (void)st;
    const char *stops[] = {"<|im_end|>", "", "\nUser:"};
    size_t pos, hold, which;
    const char *t1 = "Hello <|im_e";
    assert_false(clb_stop_check(t1, strlen(t1), 0, stops, 3, &pos, &hold, &which));
    assert_int_equal(hold, 6);
    const char *t2 = "Hello<|im_end|> world";
    assert_true(clb_stop_check(t2, strlen(t2), 0, stops, 3, &pos, &hold, &which));
    assert_int_equal(pos, 5);
    assert_int_equal(which, 0);
    assert_int_equal(hold, 0);
    /* earliest occurrence wins across stop strings */
    const char *t3 = "a\nUser: b<|im_end|>";
    assert_true(clb_stop_check(t3, strlen(t3), 0, stops, 3, &pos, &hold, &which));
    assert_int_equal(pos, 1);
    assert_int_equal(which, 2);
    /* a tail that is a prefix of two stops: the longer one counts */
    const char *t4 = "xyz\n";
    assert_false(clb_stop_check(t4, strlen(t4), 0, stops, 3, &pos, &hold, NULL));
    assert_int_equal(hold, 1);
    const char *t5 = "plain text";
    assert_false(clb_stop_check(t5, strlen(t5), 0, stops, 3, &pos, &hold, NULL));
    assert_int_equal(hold, 0);
    /* the whole stop string as text is a match, never a hold */
    assert_true(clb_stop_check("<|im_end|>", 10, 0, stops, 3, &pos, &hold, NULL));
    assert_int_equal(pos, 0);
    /* streaming simulation: emit len - hold each step, never a partial stop */
    const char *pieces[] = {"The ans", "wer <|im", "_en", "d|> trailing"};
    char buf[128] = {0};
    size_t len = 0, emitted = 0;
    bool stopped = false;
    for (int i = 0; i < 4 && !stopped; i++) {
        size_t pl = strlen(pieces[i]);
        memcpy(buf + len, pieces[i], pl);
        len += pl;
        stopped = clb_stop_check(buf, len, emitted, stops, 3, &pos, &hold, NULL);
        size_t upto = stopped ? pos : len - hold;
        assert_true(upto >= emitted);
        emitted = upto;
        assert_null(memchr(buf, '<', emitted)); /* nothing of the stop string shown */
    }
    assert_true(stopped);
    assert_int_equal(emitted, strlen("The answer "));
    /* UTF-8 tail */
    assert_int_equal(clb_utf8_incomplete_tail("ab\xE2\x82", 4), 2);
    assert_int_equal(clb_utf8_incomplete_tail("ab\xE2\x82\xAC", 5), 0);
    assert_int_equal(clb_utf8_incomplete_tail("\xF0", 1), 1);
    assert_int_equal(clb_utf8_incomplete_tail("abc", 3), 0);
    assert_int_equal(clb_utf8_incomplete_tail("", 0), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_temperature), cmocka_unit_test(test_softmax_top_p),
        cmocka_unit_test(test_greedy_ties),      cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_reproducible),     cmocka_unit_test(test_frequencies), cmocka_unit_test(test_unsorted_draw),
        cmocka_unit_test(test_large_vocab_topk), cmocka_unit_test(test_large_vocab_order),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_stop_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
