/* test_store.c — the expert memory hierarchy (docs/MEMORY.md):
 *   - logits bit-identical across no budget, a pool of 2 experts per layer, every cache
 *     policy, prefetch on/off, O_DIRECT on/off, 1 and 2 threads, batched and stepwise, for
 *     a generated model and the Mixtral fixtures (GGUF q4_0 and the HF directory);
 *   - budget accounting and its errors, config keys, the environment override;
 *   - hit/miss/eviction/bytes-read statistics and lookahead recall;
 *   - residency-aware dynamic k and low-bit stand-ins: off, nothing changes; on, counted;
 *   - the usage file and the pinned hot set; run-time policy switches;
 *   - guard mode reports an access to an expert that is not acquired (in a child process);
 *   - peak RSS (VmHWM) of a budgeted run stays within budget + overhead, while the
 *     unbounded run of the same model maps every expert (in child processes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "colibri.h"
#include "core/common.h"
#include "core/platform.h"
#include "engine.h"
#include "moe/mem_api.h"
#include "moe/store_impl.h"
#include "testutil.h"

#define FX_GGUF "tests/fixtures/mixtral/model-q4_0.gguf"
#define FX_HF "tests/fixtures/mixtral/hf"

static char tiny_path[256], big_path[256], standin_path[256];
enum { NT = 10, ND = 4 };
static const int32_t PROMPT[NT] = {1, 5, 9, 33, 70, 2, 11, 95, 40, 41};

static int setup(void **state) {
    (void)state;
    clb_hparams hp;
    tu_tmp_path(tiny_path, sizeof tiny_path, ".colibri");
    tu_tmp_path(big_path, sizeof big_path, ".colibri");
    tu_tiny_hparams(&hp, 8);
    hp.n_layer = 3;
    if (tu_write_model(tiny_path, &hp, CLB_DT_Q8_0, 7)) return -1;
    /* the "larger" model: 4 layers x 8 experts of 1.5 MiB (f32) = 48 MiB of experts */
    tu_tiny_hparams(&hp, 8);
    hp.n_layer = 4;
    hp.n_embd = 256;
    hp.n_ff_exp = 512;
    hp.n_head = 4;
    hp.head_dim = hp.head_dim_v = hp.n_rot = 64;
    if (tu_write_model(big_path, &hp, CLB_DT_F32, 8)) return -1;
    /* the tiny model again with a q4_0 stand-in for every expert (colibri convert --standin-dtype) */
    tu_tmp_path(standin_path, sizeof standin_path, ".colibri");
    colibri_convert_params cp = {.standin_dtype = "q4_0", .n_threads = 1};
    if (colibri_convert(tiny_path, standin_path, &cp, NULL, NULL)) {
        fprintf(stderr, "convert --standin-dtype: %s\n", colibri_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(tiny_path);
    unlink(big_path);
    unlink(standin_path);
    return 0;
}

typedef struct run_cfg {
    uint64_t pool, budget;
    int policy, prefetch, direct, threads, batch, io_threads;
    float miss_drop, standin;
} run_cfg;

static colibri_engine_t *open_cfg(const char *path, const run_cfg *c) {
    colibri_params p = colibri_params_default();
    p.n_threads = c->threads ? c->threads : 1;
    p.n_batch = c->batch ? c->batch : 64;
    p.max_seq_len = 64;
    p.expert_pool_bytes = c->pool;
    p.mem_budget = c->budget;
    p.cache_policy = c->policy;
    p.prefetch = c->prefetch;
    p.direct_io = c->direct;
    p.io_threads = c->io_threads;
    p.moe_miss_drop = c->miss_drop;
    p.moe_standin = c->standin;
    colibri_engine_t *e = colibri_init_params(path, &p);
    if (!e) fprintf(stderr, "init %s: %s\n", path, colibri_last_error());
    return e;
}

/* prompt logits [NT][V] (batched) then ND decode steps [ND][V] */
static float *run_logits(colibri_engine_t *e) {
    const size_t V = (size_t)colibri_n_vocab(e);
    float *out = calloc((NT + ND) * V, sizeof(float));
    assert_non_null(out);
    assert_int_equal(colibri_eval(e, PROMPT, NT, out, NT * V), 0);
    int32_t next = 3;
    for (int i = 0; i < ND; i++)
        assert_int_equal(colibri_forward_ex(e, next, out + (NT + i) * V, V, &next), 0);
    return out;
}

static uint64_t slot_bytes_of(const char *path) {
    run_cfg c = {.pool = (uint64_t)1 << 40};
    colibri_engine_t *e = open_cfg(path, &c);
    assert_non_null(e);
    clb_store_info info;
    clb_store_get_info(e->model->store, &info);
    assert_true(info.bounded);
    colibri_free(e);
    return info.slot_bytes;
}

/* the unbounded run's logits (the reference), the vocabulary, the layers and the bytes of a
   pool of 2 experts per layer */
static float *reference(const char *path, size_t *V, int *n_layers, uint64_t *two) {
    run_cfg ref = {0};
    colibri_engine_t *e = open_cfg(path, &ref);
    assert_non_null(e);
    *V = (size_t)colibri_n_vocab(e);
    *n_layers = e->hp->n_layer;
    float *want = run_logits(e);
    colibri_free(e);
    *two = 2 * (uint64_t)*n_layers * slot_bytes_of(path);
    return want;
}

static void check_invariance(const char *path) {
    size_t V;
    uint64_t two;
    int n_layer;
    float *want = reference(path, &V, &n_layer, &two);
    colibri_engine_t *e;
    const run_cfg cfgs[] = {
        {.pool = two, .policy = COLIBRI_CACHE_LRU},
        {.pool = two, .policy = COLIBRI_CACHE_LFU},
        {.pool = two, .policy = COLIBRI_CACHE_PINNED},
        {.pool = two, .prefetch = -1},
        {.pool = two, .direct = 1},
        {.pool = two, .direct = 1, .prefetch = -1, .policy = COLIBRI_CACHE_LFU},
        {.pool = two, .threads = 2},
        {.pool = two, .threads = 2, .direct = 1, .policy = COLIBRI_CACHE_PINNED},
        {.pool = two, .direct = COLIBRI_READ_BUFFERED},              /* the page cache kept */
        {.pool = two, .threads = 2, .direct = COLIBRI_READ_DONTNEED}, /* pread + DONTNEED */
        {.miss_drop = 1.0f, .threads = 2},             /* unbounded: nothing is ever absent */
        {.standin = 1.0f, .miss_drop = 1.0f},          /* ... nor computed with a stand-in */
        {.pool = two, .batch = 3, .io_threads = 1},
        {.pool = two, .prefetch = 1, .io_threads = 2, .threads = 2, .batch = 1},
        {.pool = (uint64_t)1 << 40},                   /* everything fits */
        {.prefetch = 1, .threads = 2},                 /* unbounded with madvise hints */
        {.budget = (uint64_t)1 << 40, .threads = 2},   /* pool derived from a budget */
    };
    for (size_t i = 0; i < CLB_ARRAY_LEN(cfgs); i++) {
        e = open_cfg(path, &cfgs[i]);
        assert_non_null(e);
        if (cfgs[i].pool == two) {
            colibri_stats_t st = colibri_get_stats(e);
            assert_int_equal(st.expert_pool_slots, 2 * n_layer);
        }
        float *got = run_logits(e);
        if (memcmp(got, want, sizeof(float) * (NT + ND) * V) != 0) {
            fprintf(stderr, "%s: config %zu changed the logits\n", path, i);
            fail();
        }
        colibri_stats_t st = colibri_get_stats(e);
        if (st.expert_pool_slots > 0) {
            assert_true(st.expert_hits_total + st.expert_misses_total > 0);
            assert_true(st.expert_bytes_read_total > 0);
        }
        /* the read path each setting asks for (O_DIRECT may be refused: then DONTNEED) */
        const int path_got = st.expert_read_path;
        if (st.expert_pool_slots == 0) assert_int_equal(path_got, COLIBRI_PATH_MMAP);
        else if (cfgs[i].direct == COLIBRI_READ_BUFFERED) assert_int_equal(path_got, COLIBRI_PATH_BUFFERED);
        else if (cfgs[i].direct == COLIBRI_READ_DONTNEED) assert_int_equal(path_got, COLIBRI_PATH_DONTNEED);
        else assert_true(path_got == COLIBRI_PATH_DIRECT || path_got == COLIBRI_PATH_MIXED ||
                         path_got == COLIBRI_PATH_DONTNEED);
        assert_int_equal(st.moe_experts_dropped, 0); /* off, or nothing absent */
        assert_int_equal(st.moe_standins_used, 0);
        free(got);
        colibri_free(e);
    }
    free(want);
}

/* got differs from want (an option changed the logits), every value finite */
static void assert_changed(const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++) assert_true(isfinite(got[i]));
    assert_true(memcmp(got, want, sizeof(float) * n) != 0);
}

static void set_miss_drop(colibri_params *p, float v) { p->moe_miss_drop = v; }
static void set_standin(colibri_params *p, float v) { p->moe_standin = v; }

/* an option outside 0..1 (1.5, NaN) is refused, naming it */
static void assert_refused(const char *path, void (*set)(colibri_params *, float), const char *name) {
    colibri_params p = colibri_params_default();
    set(&p, 1.5f);
    assert_null(colibri_init_params(path, &p));
    assert_non_null(strstr(colibri_last_error(), name));
    set(&p, NAN);
    assert_null(colibri_init_params(path, &p));
}

/* Residency-aware dynamic k (moe_miss_drop): off by default (check_invariance: the logits
   never depend on the pool, and nothing is dropped with it on in the unbounded mode). On,
   with a pool of 2 experts per layer and no prefetch, the experts it drops change the logits
   (finite, counted); out-of-range values are refused. */
static void test_miss_drop(void **state) {
    (void)state;
    size_t V;
    uint64_t two;
    int n_layer;
    float *want = reference(tiny_path, &V, &n_layer, &two);
    colibri_engine_t *e;
    run_cfg on = {.pool = two, .prefetch = -1, .miss_drop = 1.0f};
    assert_non_null(e = open_cfg(tiny_path, &on));
    float *got = run_logits(e);
    colibri_stats_t st = colibri_get_stats(e);
    fprintf(stderr, "moe_miss_drop 1.0, pool of 2 per layer: %llu selections dropped, %llu hits, %llu misses\n",
            (unsigned long long)st.moe_experts_dropped, (unsigned long long)st.expert_hits_total,
            (unsigned long long)st.expert_misses_total);
    assert_true(st.moe_experts_dropped > 0);
    assert_changed(got, want, (NT + ND) * V);
    free(got);
    colibri_free(e);
    assert_refused(tiny_path, set_miss_drop, "moe_miss_drop");
    free(want);
}

/* Low-bit stand-ins (moe_standin, colibri convert --standin-dtype). A file with stand-ins
   gives the logits of the file without them in every mode unless asked (check_invariance on
   it, and its reference equals the plain file's bit for bit); asked, with a pool of 2 experts
   per layer and no prefetch, experts absent from the pool are computed with their stand-ins
   (counted, finite, the logits change), while on a file without stand-ins the option changes
   nothing; out-of-range values are refused. */
static void test_standin(void **state) {
    (void)state;
    size_t V;
    uint64_t two;
    int n_layer;
    float *want = reference(tiny_path, &V, &n_layer, &two);
    float *want_st = reference(standin_path, &V, &n_layer, &two);
    assert_memory_equal(want, want_st, sizeof(float) * (NT + ND) * V);
    free(want_st);
    check_invariance(standin_path);
    colibri_engine_t *e;
    run_cfg on = {.pool = two, .prefetch = -1, .standin = 1.0f};
    assert_non_null(e = open_cfg(standin_path, &on));
    float *got = run_logits(e);
    colibri_stats_t st = colibri_get_stats(e);
    fprintf(stderr, "moe_standin 1.0, pool of 2 per layer: %llu selections with a stand-in, %llu hits, %llu misses\n",
            (unsigned long long)st.moe_standins_used, (unsigned long long)st.expert_hits_total,
            (unsigned long long)st.expert_misses_total);
    assert_true(st.moe_standins_used > 0);
    assert_int_equal(st.moe_experts_dropped, 0);
    assert_changed(got, want, (NT + ND) * V);
    free(got);
    colibri_free(e);
    /* no stand-ins in the file: the option is a no-op */
    assert_non_null(e = open_cfg(tiny_path, &on));
    got = run_logits(e);
    assert_int_equal(colibri_get_stats(e).moe_standins_used, 0);
    assert_memory_equal(got, want, sizeof(float) * (NT + ND) * V);
    free(got);
    colibri_free(e);
    assert_refused(standin_path, set_standin, "moe_standin");
    free(want);
}

static void test_invariance_generated(void **state) {
    (void)state;
    check_invariance(tiny_path);
    check_invariance(big_path);
}

static void test_invariance_fixtures(void **state) {
    (void)state;
    check_invariance(FX_GGUF);
    check_invariance(FX_HF);
}

/* switching policies while running never changes the logits either */
static void test_policy_switch(void **state) {
    (void)state;
    run_cfg ref = {0};
    colibri_engine_t *e = open_cfg(tiny_path, &ref);
    float *want = run_logits(e);
    const size_t V = (size_t)colibri_n_vocab(e);
    colibri_free(e);
    run_cfg c = {.pool = 2 * 3 * slot_bytes_of(tiny_path)};
    e = open_cfg(tiny_path, &c);
    float *got = calloc((NT + ND) * V, sizeof(float));
    assert_int_equal(colibri_eval(e, PROMPT, NT, got, NT * V), 0);
    int32_t next = 3;
    for (int i = 0; i < ND; i++) {
        assert_int_equal(colibri_set_cache_policy(e, (i + 1) % 3), 0);
        assert_int_equal(colibri_forward_ex(e, next, got + (NT + i) * V, V, &next), 0);
        assert_int_equal(colibri_get_stats(e).cache_policy, (i + 1) % 3);
    }
    assert_memory_equal(got, want, sizeof(float) * (NT + ND) * V);
    assert_int_equal(colibri_set_cache_policy(e, 7), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_set_cache_policy(NULL, 0), COLIBRI_ERR_ARG);
    free(got);
    free(want);
    colibri_free(e);
}

static void test_stats(void **state) {
    (void)state;
    const uint64_t sb = slot_bytes_of(big_path);
    /* a pool of every expert: after one pass everything hits */
    run_cfg c = {.pool = (uint64_t)1 << 40, .prefetch = -1};
    colibri_engine_t *e = open_cfg(big_path, &c);
    free(run_logits(e));
    colibri_stats_t a = colibri_get_stats(e);
    assert_int_equal(a.expert_pool_slots, 32);
    assert_int_equal(a.expert_evictions_total, 0);
    assert_true(a.expert_misses_total <= 32);
    assert_true(a.expert_bytes_read_total >= a.expert_misses_total * (sb - 3 * 2 * CLB_STORE_PAGE));
    free(run_logits(e)); /* continues the sequence */
    colibri_stats_t b = colibri_get_stats(e);
    assert_true(b.expert_hits_total > a.expert_hits_total);
    /* nothing is evicted: each expert ever used missed exactly once */
    uint64_t used = 0;
    for (int l = 0; l < 4; l++)
        for (int x = 0; x < 8; x++) used += b.expert_counts[l][x] ? 1 : 0;
    assert_int_equal(b.expert_misses_total, used);
    colibri_free(e);
    /* 2 per layer: evictions happen, the lookahead is scored */
    c = (run_cfg){.pool = 8 * sb};
    e = open_cfg(big_path, &c);
    free(run_logits(e));
    b = colibri_get_stats(e);
    assert_int_equal(b.expert_pool_slots, 8);
    assert_true(b.expert_evictions_total > 0);
    assert_true(b.lookahead_true > 0);
    assert_true(b.lookahead_hit <= b.lookahead_true);
    assert_true(b.expert_stall_s_total >= 0);
    uint64_t h = 0, m = 0;
    for (int l = 0; l < 4; l++) h += b.expert_hits[l], m += b.expert_misses[l];
    assert_int_equal(h, b.expert_hits_total);
    assert_int_equal(m, b.expert_misses_total);
    assert_true(b.mem_accounted_bytes > 0);
    colibri_free(e);
}

static void test_budget_errors(void **state) {
    (void)state;
    run_cfg c = {.budget = 4096};
    assert_null(open_cfg(big_path, &c));
    assert_non_null(strstr(colibri_last_error(), "does not cover"));
    /* a budget leaving room for one expert only */
    run_cfg ok = {.pool = (uint64_t)1 << 40};
    colibri_engine_t *e = open_cfg(big_path, &ok);
    uint64_t acc = colibri_get_stats(e).mem_accounted_bytes;
    colibri_free(e);
    c.budget = acc + slot_bytes_of(big_path) + 100;
    assert_null(open_cfg(big_path, &c));
    assert_non_null(strstr(colibri_last_error(), "fewer than 2 experts"));
    c.budget = acc + 4 * slot_bytes_of(big_path);
    e = open_cfg(big_path, &c);
    assert_non_null(e);
    assert_int_equal(colibri_get_stats(e).expert_pool_slots, 4);
    colibri_free(e);
    /* explicit pool beyond the budget */
    c.pool = 8 * slot_bytes_of(big_path);
    assert_null(open_cfg(big_path, &c));
    assert_non_null(strstr(colibri_last_error(), "exceeds the memory budget"));
    /* environment override */
    setenv("COLIBRI_PAGE_POOL_SIZE", "3MiB", 1);
    c = (run_cfg){0};
    e = open_cfg(big_path, &c);
    assert_non_null(e);
    assert_int_equal(colibri_get_stats(e).expert_pool_slots, (int)((3u << 20) / slot_bytes_of(big_path)));
    colibri_free(e);
    setenv("COLIBRI_PAGE_POOL_SIZE", "lots", 1);
    assert_null(open_cfg(big_path, &c));
    assert_non_null(strstr(colibri_last_error(), "COLIBRI_PAGE_POOL_SIZE"));
    unsetenv("COLIBRI_PAGE_POOL_SIZE");
    uint64_t v;
    assert_true(clb_mem_parse_size("1.5GiB", &v) && v == 1610612736ull);
    assert_true(clb_mem_parse_size("512M", &v) && v == 512ull << 20);
    assert_true(clb_mem_parse_size("4096", &v) && v == 4096);
    assert_false(clb_mem_parse_size("12Q", &v));
    assert_false(clb_mem_parse_size("-1", &v));
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_config_keys(void **state) {
    (void)state;
    char cfg[256];
    tu_tmp_path(cfg, sizeof cfg, ".json");
    write_text(cfg, "{\"threads\": 1, \"max_seq_len\": 64, \"expert_pool\": \"4MiB\", \"cache_policy\": \"lfu\","
                    " \"prefetch\": false, \"direct_io\": true, \"io_threads\": 2}");
    colibri_engine_t *e = colibri_init(big_path, cfg);
    assert_non_null(e);
    colibri_stats_t st = colibri_get_stats(e);
    assert_int_equal(st.cache_policy, COLIBRI_CACHE_LFU);
    assert_int_equal(st.expert_pool_slots, (int)((4u << 20) / slot_bytes_of(big_path)));
    clb_store_info info;
    clb_store_get_info(e->model->store, &info);
    assert_true(info.direct_io);
    assert_false(info.prefetch);
    assert_int_equal(info.io_threads, 2);
    colibri_free(e);
    /* direct_io: false is the buffered path, a string names a mode, anything else is refused */
    write_text(cfg, "{\"expert_pool\": \"4MiB\", \"direct_io\": false}");
    assert_non_null(e = colibri_init(big_path, cfg));
    assert_int_equal(colibri_get_stats(e).expert_read_path, COLIBRI_PATH_BUFFERED);
    colibri_free(e);
    write_text(cfg, "{\"expert_pool\": \"4MiB\", \"direct_io\": \"dontneed\"}");
    assert_non_null(e = colibri_init(big_path, cfg));
    assert_int_equal(colibri_get_stats(e).expert_read_path, COLIBRI_PATH_DONTNEED);
    colibri_free(e);
    write_text(cfg, "{\"direct_io\": \"sometimes\"}");
    assert_null(colibri_init(big_path, cfg));
    assert_non_null(strstr(colibri_last_error(), "direct_io"));
    colibri_params bad = colibri_params_default();
    bad.expert_pool_bytes = 4u << 20;
    bad.direct_io = 3;
    assert_null(colibri_init_params(big_path, &bad));
    assert_non_null(strstr(colibri_last_error(), "direct_io"));
    write_text(cfg, "{\"cache_policy\": \"random\"}");
    assert_null(colibri_init(big_path, cfg));
    assert_non_null(strstr(colibri_last_error(), "cache_policy"));
    write_text(cfg, "{\"mem_budget\": \"much\"}");
    assert_null(colibri_init(big_path, cfg));
    assert_non_null(strstr(colibri_last_error(), "mem_budget"));
    unlink(cfg);
}

static void test_usage_file(void **state) {
    (void)state;
    char usage[300];
    snprintf(usage, sizeof usage, "%s.usage", tiny_path);
    unlink(usage);
    colibri_params p = colibri_params_default();
    p.n_threads = 1;
    p.max_seq_len = 64;
    p.usage_stats = 1;
    p.expert_pool_bytes = 4 * slot_bytes_of(tiny_path);
    colibri_engine_t *e = colibri_init_params(tiny_path, &p);
    assert_non_null(e);
    free(run_logits(e));
    colibri_stats_t st = colibri_get_stats(e);
    colibri_free(e); /* writes the file */
    char *text;
    assert_int_equal(clb_read_file(usage, 1 << 20, &text, NULL), 0);
    assert_memory_equal(text, "colibri-usage 1\n3 8\n", 20);
    /* the counts are acquires: one per (batch, expert) */
    uint64_t sum = 0;
    char *q = text + 20, *end;
    for (int i = 0; i < 24; i++) {
        sum += strtoull(q, &end, 10);
        assert_true(end != q);
        q = end;
    }
    uint64_t acq = st.expert_hits_total + st.expert_misses_total;
    assert_int_equal(sum, acq);
    clb_free(text);
    /* the pinned policy learns its hot set from the file: the most used experts are hot */
    p.cache_policy = COLIBRI_CACHE_PINNED;
    e = colibri_init_params(tiny_path, &p);
    assert_non_null(e);
    clb_expert_store *s = e->model->store;
    int n_hot = 0;
    uint64_t min_hot = UINT64_MAX, max_cold = 0;
    for (int i = 0; i < 24; i++) {
        if (s->ex[i].hot) n_hot++, min_hot = CLB_MIN(min_hot, s->ex[i].uses);
        else max_cold = CLB_MAX(max_cold, s->ex[i].uses);
    }
    assert_int_equal(n_hot, 2); /* half of the 4 slots */
    assert_true(min_hot >= max_cold);
    colibri_free(e);
    write_text(usage, "colibri-usage 1\n3 8\n1 2 x\n");
    assert_null(colibri_init_params(tiny_path, &p));
    assert_non_null(strstr(colibri_last_error(), "malformed"));
    write_text(usage, "colibri-usage 1\n5 8\n1 2\n"); /* another model's shape: ignored */
    e = colibri_init_params(tiny_path, &p);
    assert_non_null(e);
    colibri_free(e);
    unlink(usage);
}

/* Runs fn in a child; returns its exit status (or 128 + signal) and its stderr in buf. */
static int in_child(void (*fn)(void), char *buf, size_t cap) {
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        fn();
        _exit(0);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(pfd[0], buf + n, cap - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(pfd[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static colibri_engine_t *guarded_engine(void) {
    setenv("COLIBRI_GUARD", "1", 1);
    run_cfg c = {.pool = 6 * slot_bytes_of(tiny_path)};
    colibri_engine_t *e = open_cfg(tiny_path, &c);
    if (!e) _exit(10);
    return e;
}

static void child_guard_ok(void) {
    colibri_engine_t *e = guarded_engine();
    float *l = run_logits(e); /* the whole forward pass under guard: every access acquired */
    free(l);
    const clb_expert_w *w;
    if (clb_store_acquire(e->model->store, 1, 3, &w)) _exit(11);
    volatile uint8_t f = (uint8_t)(((const uint8_t *)w->down.data)[0] + ((const uint8_t *)w->gate.data)[0]);
    (void)f;
    clb_store_release(e->model->store, 1, 3);
    colibri_free(e);
    _exit(0);
}

static void child_guard_stale(void) {
    colibri_engine_t *e = guarded_engine();
    const clb_expert_w *w;
    if (clb_store_acquire(e->model->store, 1, 3, &w)) _exit(11);
    const uint8_t *p = w->up.data;
    clb_store_release(e->model->store, 1, 3);
    volatile uint8_t b = p[100]; /* resident, but no longer acquired: the guard must fire */
    (void)b;
    _exit(0);
}

static void child_guard_evicted(void) {
    colibri_engine_t *e = guarded_engine();
    const clb_expert_w *w;
    if (clb_store_acquire(e->model->store, 2, 5, &w)) _exit(11);
    const uint8_t *p = w->gate.data;
    clb_store_release(e->model->store, 2, 5);
    clb_store_evict_all(e->model->store);
    volatile uint8_t b = p[0];
    (void)b;
    _exit(0);
}

static void test_guard(void **state) {
    (void)state;
    char buf[2048];
    int st = in_child(child_guard_ok, buf, sizeof buf);
    if (st) fprintf(stderr, "guard ok child: status %d: %s\n", st, buf);
    assert_int_equal(st, 0);
    st = in_child(child_guard_stale, buf, sizeof buf);
    assert_int_equal(st, CLB_GUARD_EXIT);
    assert_non_null(strstr(buf, "layer 1 expert 3"));
    assert_non_null(strstr(buf, "not acquired"));
    st = in_child(child_guard_evicted, buf, sizeof buf);
    assert_int_equal(st, CLB_GUARD_EXIT);
    assert_non_null(strstr(buf, "holding no expert"));
}

/* VmHWM of the child, measured after resetting the high-water mark */
static uint64_t g_budget;
static void child_rss(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) {
        if (write(fd, "5", 1) != 1) _exit(20);
        close(fd);
    }
    uint64_t base = clb_current_rss();
    colibri_params p = colibri_params_default();
    p.n_threads = 2;
    p.max_seq_len = 64;
    p.mem_budget = g_budget;
    colibri_engine_t *e = colibri_init_params(big_path, &p);
    if (!e) _exit(21);
    for (int r = 0; r < 3; r++) free(run_logits(e));
    colibri_stats_t st = colibri_get_stats(e);
    fprintf(stderr, "base %llu hwm %llu accounted %llu pool %llu slots %d\n", (unsigned long long)base,
            (unsigned long long)st.peak_rss_bytes, (unsigned long long)st.mem_accounted_bytes,
            (unsigned long long)st.expert_pool_bytes, st.expert_pool_slots);
    colibri_free(e);
    _exit(0);
}

static void parse_rss(const char *buf, uint64_t *base, uint64_t *hwm) {
    const char *s = strstr(buf, "base ");
    assert_non_null(s);
    unsigned long long b, h;
    assert_int_equal(sscanf(s, "base %llu hwm %llu", &b, &h), 2);
    *base = b;
    *hwm = h;
}

static void test_peak_rss(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* shadow memory and quarantine make RSS meaningless under ASan */
#endif
    const uint64_t experts = 32 * 3 * 256 * 512 * 4ull; /* 48 MiB */
    char buf[1024];
    uint64_t base, hwm;
    /* unbounded: every expert gets mapped in */
    g_budget = 0;
    int st = in_child(child_rss, buf, sizeof buf);
    if (st) fprintf(stderr, "child status %d: %s\n", st, buf);
    assert_int_equal(st, 0);
    parse_rss(buf, &base, &hwm);
    assert_true(hwm >= base + experts * 9 / 10);
    /* a budget of 16 MiB: dense (~1 MiB) + KV + arena, the rest is the pool */
    g_budget = (uint64_t)16 << 20;
    assert_int_equal(in_child(child_rss, buf, sizeof buf), 0);
    parse_rss(buf, &base, &hwm);
    fprintf(stderr, "budgeted run: %s", buf);
    /* documented fixed overhead (docs/MEMORY.md): thread stacks, libc, tensor table */
    const uint64_t overhead = (uint64_t)8 << 20;
    assert_true(hwm <= base + g_budget + overhead);
    assert_true(hwm < base + experts / 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariance_generated),
        cmocka_unit_test(test_invariance_fixtures),
        cmocka_unit_test(test_policy_switch),
        cmocka_unit_test(test_miss_drop),
        cmocka_unit_test(test_standin),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_budget_errors),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_usage_file),
        cmocka_unit_test(test_guard),
        cmocka_unit_test(test_peak_rss),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
