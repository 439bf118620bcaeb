/* test_core.c — thread pool, work split, arena, rmsnorm/softmax/rope on hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/rt.h"
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include "nn/ops.h"

typedef struct {
    atomic_int hits[8];
    int nth_seen;
    int64_t covered[1000];
} pool_ctx;

static void task(void *arg, int ith, int nth) {
    pool_ctx *c = arg;
    atomic_fetch_add(&c->hits[ith], 1);
    c->nth_seen = nth;
    int64_t lo, hi;
    clb_split(1000, ith, nth, 16, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) c->covered[i]++;
}

static void test_pool(void **state) {
    (void)state;
    for (int n = 1; n <= 4; n++) {
        clb_pool *p = clb_pool_create(n);
        assert_non_null(p);
        assert_int_equal(clb_pool_size(p), n);
        pool_ctx c;
        memset(&c, 0, sizeof c);
        for (int r = 0; r < 200; r++) clb_pool_run(p, task, &c);
        for (int i = 0; i < n; i++) assert_int_equal(atomic_load(&c.hits[i]), 200);
        for (int i = 0; i < 1000; i++) assert_int_equal(c.covered[i], 200); /* every row exactly once */
        assert_int_equal(c.nth_seen, n);
        clb_pool_free(p);
    }
    clb_pool_free(NULL);
}

/* which thread ran each item: the take-over (threadpool.h) must run every item exactly once */
typedef struct {
    atomic_int hits[4];
    atomic_int by_caller;
    pthread_t caller;
} own_ctx;

static void own_task(void *arg, int ith, int nth) {
    own_ctx *c = arg;
    (void)nth;
    atomic_fetch_add(&c->hits[ith], 1);
    if (ith > 0 && pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->by_caller, 1);
}

static void test_pool_policies(void **state) {
    (void)state;
    cpu_set_t saved;
    assert_int_equal(sched_getaffinity(0, sizeof saved, &saved), 0);
    int cpu0 = 0;
    while (cpu0 < CPU_SETSIZE && !CPU_ISSET(cpu0, &saved)) cpu0++;
    const int one[1] = {cpu0};
    for (int w = CLB_WAIT_HYBRID; w <= CLB_WAIT_YIELD; w++)
        for (int pin = 0; pin < 2; pin++) {
            char warn[256] = "";
            /* pinned: every thread on one CPU, so the caller often finds items not started */
            clb_pool_opts o = {.wait = w, .spin_us = w == CLB_WAIT_SPIN ? -1 : 50, .cpus = pin ? one : NULL, .n_cpus = pin};
            clb_pool *p = clb_pool_create_ex(4, &o, warn, sizeof warn);
            assert_non_null(p);
            assert_string_equal(warn, "");
            own_ctx c;
            memset(&c, 0, sizeof c);
            c.caller = pthread_self();
            const int runs = w == CLB_WAIT_SPIN && pin ? 20 : 500; /* spinners on one CPU: slow */
            for (int r = 0; r < runs; r++) clb_pool_run(p, own_task, &c);
            for (int i = 0; i < 4; i++) assert_int_equal(atomic_load(&c.hits[i]), runs);
            if (pin && w == CLB_WAIT_FUTEX) assert_true(atomic_load(&c.by_caller) > 0);
            clb_pool_free(p);
            sched_setaffinity(0, sizeof saved, &saved); /* the pool pinned this thread */
        }
    /* SCHED_FIFO: applied, or refused with a warning naming it; the pool runs either way */
    char warn[256] = "";
    clb_pool_opts o = {.rt_priority = 1};
    clb_pool *p = clb_pool_create_ex(2, &o, warn, sizeof warn);
    assert_non_null(p);
    if (warn[0]) assert_non_null(strstr(warn, "SCHED_FIFO priority 1 refused"));
    own_ctx c;
    memset(&c, 0, sizeof c);
    c.caller = pthread_self();
    clb_pool_run(p, own_task, &c);
    assert_int_equal(atomic_load(&c.hits[1]), 1);
    clb_pool_free(p);
    struct sched_param sp = {.sched_priority = 0};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
}

static void test_cpu_list(void **state) {
    (void)state;
    int c[16];
    assert_int_equal(clb_parse_cpus("0-3,6", c, 16), 5);
    assert_int_equal(c[3], 3);
    assert_int_equal(c[4], 6);
    assert_int_equal(clb_parse_cpus("7", c, 16), 1);
    assert_int_equal(c[0], 7);
    const char *bad[] = {"", "-1", "3-1", "1,", "a", "1-", "0-99999", "1,,2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(clb_parse_cpus(bad[i], c, 16), -1);
    assert_int_equal(clb_parse_cpus("0-31", c, 16), -1); /* more than the room */
    assert_int_equal(clb_parse_cpus(NULL, c, 16), -1);
}

static void test_split(void **state) {
    (void)state;
    int64_t lo, hi;
    /* 100 rows, quantum 16 -> 7 chunks over 3 threads: 3, 2, 2 chunks */
    clb_split(100, 0, 3, 16, &lo, &hi);
    assert_true(lo == 0 && hi == 48);
    clb_split(100, 1, 3, 16, &lo, &hi);
    assert_true(lo == 48 && hi == 80);
    clb_split(100, 2, 3, 16, &lo, &hi);
    assert_true(lo == 80 && hi == 100);
    clb_split(5, 3, 4, 16, &lo, &hi); /* more threads than chunks: empty ranges */
    assert_true(lo == hi);
}

static void test_arena(void **state) {
    (void)state;
    clb_arena a = {0};
    assert_null(clb_arena_take(&a, 10));
    assert_null(clb_arena_take(&a, 100));
    assert_int_equal(a.used, 64 + 128);
    assert_int_equal(clb_arena_alloc_block(&a), 0);
    char *p = clb_arena_take(&a, 10), *q = clb_arena_take(&a, 100);
    assert_true(((uintptr_t)p % 64) == 0 && ((uintptr_t)q % 64) == 0 && q - p == 64);
    assert_null(clb_arena_take(&a, 1)); /* full */
    clb_arena_release(&a);
}

static void test_ops(void **state) {
    (void)state;
    /* rmsnorm of (1,2,3,4): mean square 7.5 */
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 0.5f}, y[4];
    clb_rmsnorm(y, x, w, 4, 0.0f);
    float r = 1.0f / sqrtf(7.5f);
    assert_float_equal(y[0], r, 1e-6);
    assert_float_equal(y[2], 6 * r, 1e-6);
    assert_float_equal(y[3], 2 * r, 1e-6);
    /* layernorm of (1,2,3,4): mean 2.5, variance 1.25 */
    const float b[4] = {0.5f, 0, 0, -1};
    clb_layernorm(y, x, w, b, 4, 0.0f);
    const float ri = 1.0f / sqrtf(1.25f);
    assert_float_equal(y[0], -1.5f * ri + 0.5f, 1e-6);
    assert_float_equal(y[2], 2 * 0.5f * ri, 1e-6);
    assert_float_equal(y[3], 0.5f * 1.5f * ri - 1, 1e-6);
    float s[3] = {0, logf(2), logf(5)};
    clb_softmax(s, 3);
    assert_float_equal(s[0], 0.125f, 1e-6);
    assert_float_equal(s[2], 0.625f, 1e-6);
    float g[2] = {0.0f, 1.0f}, u[2] = {3.0f, 2.0f};
    clb_silu_mul(g, u, 2);
    assert_float_equal(g[0], 0.0f, 1e-7);
    assert_float_equal(g[1], 2.0f / (1.0f + expf(-1.0f)), 1e-6);
}

static void test_rope(void **state) {
    (void)state;
    clb_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_rot = 4;
    hp.rope_theta = 100.0f;
    clb_rope r;
    assert_int_equal(clb_rope_init(&r, &hp, NULL, 0), 0);
    /* NEOX pairs (0,2),(1,3) with frequencies 1 and 1/10 */
    float v[4] = {1, 1, 0, 0};
    clb_rope_apply(&r, v, 1, 4, 0, 3);
    assert_float_equal(v[0], cosf(3.0f), 1e-6);
    assert_float_equal(v[2], sinf(3.0f), 1e-6);
    assert_float_equal(v[1], cosf(0.3f), 1e-6);
    assert_float_equal(v[3], sinf(0.3f), 1e-6);
    /* adjacent pairs (0,1),(2,3) */
    r.style = CLB_ROPE_NORM;
    float u[4] = {1, 0, 1, 0};
    clb_rope_apply(&r, u, 1, 4, 0, 3);
    assert_float_equal(u[0], cosf(3.0f), 1e-6);
    assert_float_equal(u[1], sinf(3.0f), 1e-6);
    assert_float_equal(u[2], cosf(0.3f), 1e-6);
    clb_rope_free(&r);
    /* linear scaling divides the frequencies */
    hp.rope_scaling = CLB_ROPE_SCALING_LINEAR;
    hp.rope_factor = 4.0f;
    assert_int_equal(clb_rope_init(&r, &hp, NULL, 0), 0);
    float z[4] = {1, 1, 0, 0};
    clb_rope_apply(&r, z, 1, 4, 0, 4);
    assert_float_equal(z[0], cosf(1.0f), 1e-6);
    clb_rope_free(&r);
}

static void test_checked_math(void **state) {
    (void)state;
    uint64_t o;
    assert_false(clb_mul_u64(UINT64_MAX / 2, 3, &o));
    assert_true(clb_mul_u64(1u << 20, 1u << 20, &o) && o == (1ull << 40));
    assert_false(clb_add_u64(UINT64_MAX, 1, &o));
    assert_true(clb_range_ok(10, 5, 15));
    assert_false(clb_range_ok(10, 6, 15));
    assert_false(clb_range_ok(UINT64_MAX, 2, 15));
    assert_int_equal(clb_err(COLIBRI_ERR_FORMAT, "line1\nline2"), COLIBRI_ERR_FORMAT);
    assert_string_equal(colibri_last_error(), "line1 line2");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool), cmocka_unit_test(test_pool_policies), cmocka_unit_test(test_cpu_list),
        cmocka_unit_test(test_split), cmocka_unit_test(test_arena),
        cmocka_unit_test(test_ops), cmocka_unit_test(test_rope), cmocka_unit_test(test_checked_math),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
