/* test_engine.c — the forward pass through the public API on tiny generated models:
 * batch == token-by-token, thread-count invariance, no allocation per token, reset,
 * run-time top-k, and every error the API promises (bad ids, short buffers, overflow). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colibri.h"
#include "core/common.h"
#include "testutil.h"

static char moe_path[256], dense_path[256], q8_path[256];
enum { NT = 12 };
static const int32_t PROMPT[NT] = {1, 5, 9, 33, 70, 2, 11, 95, 40, 41, 3, 60};

static int setup(void **state) {
    (void)state;
    clb_hparams hp;
    tu_tmp_path(moe_path, sizeof moe_path, ".colibri");
    tu_tmp_path(dense_path, sizeof dense_path, ".colibri");
    tu_tmp_path(q8_path, sizeof q8_path, ".colibri");
    tu_tiny_hparams(&hp, 6);
    if (tu_write_model(moe_path, &hp, CLB_DT_F32, 42)) return -1;
    if (tu_write_model(q8_path, &hp, CLB_DT_Q8_0, 43)) return -1;
    tu_tiny_hparams(&hp, 0);
    if (tu_write_model(dense_path, &hp, CLB_DT_F32, 44)) return -1;
    return 0;
}

static char win_path[256];

static int teardown(void **state) {
    (void)state;
    unlink(moe_path);
    unlink(dense_path);
    unlink(q8_path);
    unlink(win_path);
    return 0;
}

static colibri_engine_t *open_engine(const char *path, int threads, int batch) {
    colibri_params p = colibri_params_default();
    p.n_threads = threads;
    p.n_batch = batch;
    p.max_seq_len = 32;
    colibri_engine_t *e = colibri_init_params(path, &p);
    if (!e) fprintf(stderr, "init: %s\n", colibri_last_error());
    assert_non_null(e);
    return e;
}

/* logits of every prompt position, token by token */
static void logits_stepwise(colibri_engine_t *e, float *out) {
    const int V = colibri_n_vocab(e);
    for (int i = 0; i < NT; i++) assert_int_equal(colibri_forward_ex(e, PROMPT[i], out + i * V, (size_t)V, NULL), 0);
}

static void test_batch_equals_stepwise(void **state) {
    (void)state;
    const char *paths[] = {moe_path, dense_path, q8_path};
    for (int m = 0; m < 3; m++) {
        colibri_engine_t *a = open_engine(paths[m], 1, 64), *b = open_engine(paths[m], 1, 5);
        const int V = colibri_n_vocab(a);
        float *la = malloc(sizeof(float) * NT * V), *lb = malloc(sizeof(float) * NT * V);
        logits_stepwise(a, la);
        /* batches of 5, 5, 2 */
        assert_int_equal(colibri_eval(b, PROMPT, NT, lb, (size_t)NT * V), 0);
        assert_memory_equal(la, lb, sizeof(float) * NT * V);
        /* the logits are not degenerate */
        float mx = 0;
        for (int i = 0; i < NT * V; i++) mx = fmaxf(mx, fabsf(la[i]));
        assert_true(mx > 0.1f && isfinite(mx));
        free(la);
        free(lb);
        colibri_free(a);
        colibri_free(b);
    }
}

static void test_threads_invariant(void **state) {
    (void)state;
    colibri_engine_t *a = open_engine(moe_path, 1, 64), *b = open_engine(moe_path, 2, 64),
                     *c = open_engine(moe_path, 3, 64);
    const int V = colibri_n_vocab(a);
    float *la = malloc(sizeof(float) * NT * V), *lb = malloc(sizeof(float) * NT * V),
          *lc = malloc(sizeof(float) * NT * V);
    assert_int_equal(colibri_eval(a, PROMPT, NT, la, (size_t)NT * V), 0);
    assert_int_equal(colibri_eval(b, PROMPT, NT, lb, (size_t)NT * V), 0);
    assert_int_equal(colibri_eval(c, PROMPT, NT, lc, (size_t)NT * V), 0);
    assert_memory_equal(la, lb, sizeof(float) * NT * V);
    assert_memory_equal(la, lc, sizeof(float) * NT * V);
    free(la);
    free(lb);
    free(lc);
    colibri_free(a);
    colibri_free(b);
    colibri_free(c);
}

static void test_no_alloc_per_token(void **state) {
    (void)state;
    colibri_engine_t *e = open_engine(moe_path, 2, 8);
    const int V = colibri_n_vocab(e);
    float *l = malloc(sizeof(float) * NT * V);
    int32_t next = 0;
    assert_int_equal(colibri_forward(e, 1, l, &next), 0); /* warm-up */
    uint64_t before = clb_alloc_count();
    for (int i = 0; i < 10; i++) assert_int_equal(colibri_forward(e, next, l, &next), 0);
    assert_int_equal(colibri_eval(e, PROMPT, 8, l, (size_t)NT * V), 0);
    assert_int_equal(clb_alloc_count(), before);
    free(l);
    colibri_free(e);
}

static void test_reset_and_topk(void **state) {
    (void)state;
    colibri_engine_t *e = open_engine(moe_path, 1, 64);
    const int V = colibri_n_vocab(e);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V), *c = malloc(sizeof(float) * V);
    assert_int_equal(colibri_eval(e, PROMPT, 4, NULL, 0), 0);
    assert_int_equal(colibri_n_past(e), 4);
    assert_int_equal(colibri_forward(e, 7, a, NULL), 0);
    colibri_reset(e);
    assert_int_equal(colibri_n_past(e), 0);
    assert_int_equal(colibri_eval(e, PROMPT, 4, NULL, 0), 0);
    assert_int_equal(colibri_forward(e, 7, b, NULL), 0);
    assert_memory_equal(a, b, sizeof(float) * V);
    /* top-k = 3 changes the result from the next token on, no reload */
    colibri_reset(e);
    assert_int_equal(colibri_set_moe_top_k(e, 3), 0);
    assert_int_equal(colibri_eval(e, PROMPT, 4, NULL, 0), 0);
    assert_int_equal(colibri_forward(e, 7, c, NULL), 0);
    assert_memory_not_equal(a, c, sizeof(float) * V);
    assert_int_equal(colibri_set_moe_top_k(e, 0), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_set_moe_top_k(e, 7), COLIBRI_ERR_ARG);
    /* expert statistics: layer 0 saw 9 tokens x 2 experts + ... */
    colibri_stats_t st = colibri_get_stats(e);
    uint32_t sum = 0;
    for (int x = 0; x < st.n_experts; x++) sum += st.expert_counts[0][x];
    assert_int_equal(st.n_layers, 2);
    assert_int_equal(st.n_experts, 6);
    assert_int_equal(sum, 5 * 2 + 5 * 2 + 5 * 3);
    assert_true(st.tokens_prompt == 12 && st.tokens_generated == 3);
    free(a);
    free(b);
    free(c);
    colibri_free(e);
}

/* Several sequences in one engine, their tokens interleaved in shared steps, give each
   sequence exactly the logits it gets alone (same arithmetic per token: its own KV region,
   every output element one dot product). Failures leave every sequence where it was. */
static void test_sequences(void **state) {
    (void)state;
    enum { NS = 3 };
    static const int LEN[NS] = {12, 5, 9}, OFF[NS] = {0, 3, 1}; /* prompt s: PROMPT[OFF..OFF+LEN) wrapped */
    const char *paths[] = {moe_path, q8_path, dense_path};
    for (int m = 0; m < 3; m++) {
        colibri_params p = colibri_params_default();
        p.n_threads = 2;
        p.n_batch = 7; /* steps split the interleaved prompts */
        p.max_seq_len = 32;
        p.n_seq = NS;
        colibri_engine_t *e = colibri_init_params(paths[m], &p), *alone = open_engine(paths[m], 1, 64);
        assert_non_null(e);
        assert_int_equal(colibri_n_seq(e), NS);
        const int V = colibri_n_vocab(e);
        float *ref = malloc(sizeof(float) * NS * (NT + 4) * V), *got = malloc(sizeof(float) * NS * (NT + 4) * V);
        int32_t gen[NS][4];
        /* alone: each prompt, then 4 greedy tokens */
        for (int s = 0; s < NS; s++) {
            colibri_reset(alone);
            int32_t pr[NT];
            for (int i = 0; i < LEN[s]; i++) pr[i] = PROMPT[(OFF[s] + i) % NT];
            assert_int_equal(colibri_eval(alone, pr, (size_t)LEN[s], ref + (size_t)s * (NT + 4) * V, (size_t)NT * V), 0);
            int32_t next = 0;
            const float *last = ref + ((size_t)s * (NT + 4) + (size_t)LEN[s] - 1) * V;
            for (int i = 1; i < V; i++) next = last[i] > last[next] ? i : next;
            for (int g = 0; g < 4; g++) {
                gen[s][g] = next;
                assert_int_equal(colibri_forward_ex(alone, next, ref + ((size_t)s * (NT + 4) + (size_t)LEN[s] + g) * V,
                                                    (size_t)V, &next), 0);
            }
        }
        /* together: the prompts interleaved token by token (logits of every position) */
        colibri_batch_tok bt[3 * NT];
        int n = 0, idx[NS] = {0};
        for (int r = 0; r < NT; r++)
            for (int s = 0; s < NS; s++)
                if (r < LEN[s]) bt[n++] = (colibri_batch_tok){.seq = s, .token = PROMPT[(OFF[s] + r) % NT], .logits = 1};
        float *out = malloc(sizeof(float) * (size_t)n * V);
        assert_int_equal(colibri_decode(e, bt, (size_t)n, out, (size_t)n * V), 0);
        for (int i = 0; i < n; i++) {
            const int s = bt[i].seq;
            memcpy(got + ((size_t)s * (NT + 4) + (size_t)idx[s]++) * V, out + (size_t)i * V, sizeof(float) * V);
        }
        for (int s = 0; s < NS; s++) assert_int_equal(colibri_seq_n_past(e, s), LEN[s]);
        /* then one token per sequence per step, only some asking for logits */
        for (int g = 0; g < 4; g++) {
            for (int s = 0; s < NS; s++) bt[s] = (colibri_batch_tok){.seq = s, .token = gen[s][g], .logits = 1};
            assert_int_equal(colibri_decode(e, bt, NS, out, (size_t)NS * V), 0);
            for (int s = 0; s < NS; s++)
                memcpy(got + ((size_t)s * (NT + 4) + (size_t)LEN[s] + g) * V, out + (size_t)s * V, sizeof(float) * V);
        }
        for (int s = 0; s < NS; s++)
            assert_memory_equal(ref + (size_t)s * (NT + 4) * V, got + (size_t)s * (NT + 4) * V,
                                sizeof(float) * (size_t)(LEN[s] + 4) * V);
        /* logits only where asked, in order */
        bt[0] = (colibri_batch_tok){.seq = 2, .token = 5, .logits = 0};
        bt[1] = (colibri_batch_tok){.seq = 1, .token = 6, .logits = 1};
        assert_int_equal(colibri_decode(e, bt, 2, out, (size_t)V), 0);
        assert_int_equal(colibri_decode(e, bt, 2, out, (size_t)V - 1), COLIBRI_ERR_ARG); /* short buffer */
        /* failures change nothing: a bad sequence, a bad id, one sequence past max_seq_len */
        const int32_t before[NS] = {colibri_seq_n_past(e, 0), colibri_seq_n_past(e, 1), colibri_seq_n_past(e, 2)};
        bt[0] = (colibri_batch_tok){.seq = NS, .token = 1};
        assert_int_equal(colibri_decode(e, bt, 1, NULL, 0), COLIBRI_ERR_ARG);
        assert_non_null(strstr(colibri_last_error(), "sequence"));
        bt[0] = (colibri_batch_tok){.seq = 0, .token = 1};
        bt[1] = (colibri_batch_tok){.seq = 1, .token = V};
        assert_int_equal(colibri_decode(e, bt, 2, NULL, 0), COLIBRI_ERR_ARG);
        colibri_batch_tok many[40];
        for (int i = 0; i < 40; i++) many[i] = (colibri_batch_tok){.seq = i % 2 ? 0 : 1, .token = 3};
        assert_int_equal(colibri_decode(e, many, 40, NULL, 0), COLIBRI_ERR_RANGE);
        for (int s = 0; s < NS; s++) assert_int_equal(colibri_seq_n_past(e, s), before[s]);
        /* truncating one sequence leaves the others; it then continues as if new */
        assert_int_equal(colibri_seq_truncate(e, 1, 0), 0);
        assert_int_equal(colibri_seq_truncate(e, 0, before[0] + 1), COLIBRI_ERR_ARG);
        assert_int_equal(colibri_seq_truncate(e, -1, 0), COLIBRI_ERR_ARG);
        assert_int_equal(colibri_seq_n_past(e, 1), 0);
        assert_int_equal(colibri_seq_n_past(e, 0), before[0]);
        assert_int_equal(colibri_seq_n_past(e, NS), -1);
        for (int i = 0; i < LEN[1]; i++) bt[i] = (colibri_batch_tok){.seq = 1, .token = PROMPT[(OFF[1] + i) % NT], .logits = 1};
        assert_int_equal(colibri_decode(e, bt, (size_t)LEN[1], out, (size_t)n * V), 0);
        assert_memory_equal(out, ref + (size_t)1 * (NT + 4) * V, sizeof(float) * (size_t)LEN[1] * V);
        /* no allocation per step */
        uint64_t allocs = clb_alloc_count();
        for (int s = 0; s < NS; s++) bt[s] = (colibri_batch_tok){.seq = s, .token = 4, .logits = 1};
        assert_int_equal(colibri_decode(e, bt, NS, out, (size_t)NS * V), 0);
        assert_int_equal(clb_alloc_count(), allocs);
        colibri_reset(e);
        for (int s = 0; s < NS; s++) assert_int_equal(colibri_seq_n_past(e, s), 0);
        free(out);
        free(ref);
        free(got);
        colibri_free(e);
        colibri_free(alone);
    }
    colibri_params p = colibri_params_default();
    p.n_seq = COLIBRI_MAX_SEQ + 1;
    assert_null(colibri_init_params(moe_path, &p));
}

/* colibri_expert_state: per MoE layer, the last batch's choices add up to k per token, every
   expert is resident without a budget, and the distinct-experts counter grows by the experts
   that batch ran; dense layers report 0; bad layers and short buffers are errors. */
static void test_expert_state(void **state) {
    (void)state;
    colibri_engine_t *e = open_engine(moe_path, 1, 64);
    uint32_t last[8];
    uint8_t res[8];
    for (int l = 0; l < 2; l++) assert_int_equal(colibri_expert_state(e, l, last, res, 8), 6);
    colibri_stats_t *before = malloc(sizeof *before), *after = malloc(sizeof *after);
    *before = colibri_get_stats(e);
    assert_int_equal(colibri_eval(e, PROMPT, 5, NULL, 0), 0);
    *after = colibri_get_stats(e);
    uint64_t distinct = 0;
    for (int l = 0; l < 2; l++) {
        memset(res, 0, sizeof res);
        assert_int_equal(colibri_expert_state(e, l, last, res, 8), 6);
        uint32_t sum = 0;
        for (int x = 0; x < 6; x++) {
            sum += last[x];
            distinct += last[x] > 0;
            assert_int_equal(res[x], 1);
        }
        assert_int_equal(sum, 5 * 2); /* 5 tokens, top-2 */
    }
    assert_int_equal(after->moe_experts_run - before->moe_experts_run, distinct);
    assert_true(after->moe_expert_bytes_run > before->moe_expert_bytes_run);
    assert_int_equal(after->moe_layer_runs - before->moe_layer_runs, 2);
    assert_int_equal(colibri_expert_state(e, 0, NULL, res, 8), 6);
    assert_int_equal(colibri_expert_state(e, 0, last, NULL, 5), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_expert_state(e, 2, last, res, 8), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_expert_state(e, -1, last, res, 8), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_expert_state(NULL, 0, last, res, 8), COLIBRI_ERR_ARG);
    colibri_free(e);
    e = open_engine(dense_path, 1, 4);
    assert_int_equal(colibri_expert_state(e, 0, last, res, 8), 0);
    colibri_free(e);
    free(before);
    free(after);
}

static void test_errors(void **state) {
    (void)state;
    colibri_engine_t *e = open_engine(dense_path, 1, 4);
    const int V = colibri_n_vocab(e);
    float *l = malloc(sizeof(float) * V * 40);
    assert_int_equal(colibri_forward(e, V, l, NULL), COLIBRI_ERR_ARG);
    assert_non_null(strstr(colibri_last_error(), "out of range"));
    assert_int_equal(colibri_forward(e, -1, l, NULL), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_forward_ex(e, 3, l, (size_t)V - 1, NULL), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_n_past(e), 0); /* nothing was evaluated */
    assert_int_equal(colibri_eval(e, PROMPT, 2, l, (size_t)V), COLIBRI_ERR_ARG);
    int32_t bad[3] = {1, 2, 1000};
    assert_int_equal(colibri_eval(e, bad, 3, NULL, 0), COLIBRI_ERR_ARG);
    /* max_seq_len 32: the 33rd token fails cleanly, the engine stays usable */
    int32_t many[33];
    for (int i = 0; i < 33; i++) many[i] = 3 + i;
    assert_int_equal(colibri_eval(e, many, 33, NULL, 0), COLIBRI_ERR_RANGE);
    assert_int_equal(colibri_eval(e, many, 32, NULL, 0), 0);
    assert_int_equal(colibri_forward(e, 3, l, NULL), COLIBRI_ERR_RANGE);
    assert_non_null(strstr(colibri_last_error(), "max_seq_len"));
    colibri_reset(e);
    assert_int_equal(colibri_forward(e, 3, l, NULL), 0);
    assert_int_equal(colibri_set_moe_top_k(e, 1), COLIBRI_ERR_ARG); /* dense model */
    free(l);
    colibri_free(e);
    /* NULL handles */
    colibri_free(NULL);
    assert_int_equal(colibri_forward(NULL, 1, NULL, NULL), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_n_vocab(NULL), 0);
    colibri_stats_t st = colibri_get_stats(NULL);
    assert_int_equal(st.tokens_prompt, 0);
    /* init failures */
    assert_null(colibri_init("/nonexistent/model.colibri", NULL));
    assert_non_null(strstr(colibri_last_error(), "No such file"));
    assert_null(colibri_init(moe_path, "/nonexistent/config.json"));
    char cfg[256];
    tu_tmp_path(cfg, sizeof cfg, ".json");
    FILE *f = fopen(cfg, "w");
    fputs("{\"threads\": 2, \"moe_top_kk\": 3}", f);
    fclose(f);
    assert_null(colibri_init(moe_path, cfg));
    assert_non_null(strstr(colibri_last_error(), "moe_top_kk"));
    f = fopen(cfg, "w");
    fputs("{\"threads\": 2, \"moe_top_k\": 3, \"max_seq_len\": 16}", f);
    fclose(f);
    e = colibri_init(moe_path, cfg);
    assert_non_null(e);
    assert_int_equal(colibri_max_seq_len(e), 16);
    colibri_free(e);
    f = fopen(cfg, "w");
    fputs("{\"moe_top_k\": 99}", f);
    fclose(f);
    assert_null(colibri_init(moe_path, cfg));
    unlink(cfg);
}

/* Windowed layers whose caches keep only the window (rings that wrap), a chunked layer and
   sinks: batching, interleaved sequences and truncation give exactly what a fresh
   evaluation gives, and a cut further back than a ring holds starts the sequence over. */
static void test_windows(void **state) {
    (void)state;
    clb_hparams hp;
    tu_tiny_hparams(&hp, 4);
    clb_attn_layer al[2] = {{.window = 5, .sinks = true}, {.chunk = 7}};
    hp.attn_layers = al;
    tu_tmp_path(win_path, sizeof win_path, ".colibri");
    assert_int_equal(tu_write_model(win_path, &hp, CLB_DT_F32, 45), 0);
    enum { N = 44 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (PROMPT[i % NT] + i % 3) % 96;
    colibri_params p = colibri_params_default();
    p.n_threads = 2;
    p.max_seq_len = 64; /* rings of 32 positions (window 5 / chunk 7 + batch 3 - 1, rounded up) */
    p.n_batch = 3;
    p.n_seq = 2;
    colibri_engine_t *a = colibri_init_params(win_path, &p), *b = open_engine(win_path, 1, 64);
    assert_non_null(a);
    const int V = colibri_n_vocab(a);
    float *la = malloc(sizeof(float) * N * V), *lb = malloc(sizeof(float) * N * V), *lc = malloc(sizeof(float) * V);
    colibri_free(b);
    p.n_batch = 64;
    p.n_seq = 1;
    b = colibri_init_params(win_path, &p); /* no ring: max_seq 64 < window + batch */
    assert_int_equal(colibri_eval(a, toks, N, la, (size_t)N * V), 0);
    assert_int_equal(colibri_eval(b, toks, N, lb, (size_t)N * V), 0);
    assert_memory_equal(la, lb, sizeof(float) * N * V);
    /* sequence 1 interleaved with sequence 0's continuation */
    colibri_batch_tok bt[2 * N];
    for (int i = 0; i < N; i++) bt[i] = (colibri_batch_tok){.seq = 1, .token = toks[i], .logits = i == N - 1};
    assert_int_equal(colibri_decode(a, bt, N, lc, (size_t)V), 0);
    assert_memory_equal(lc, la + (size_t)(N - 1) * V, sizeof(float) * V);
    /* cut to 38: the rings (positions 12..43) still hold what position 38 sees */
    assert_int_equal(colibri_seq_truncate(a, 1, 38), 0);
    assert_int_equal(colibri_seq_n_past(a, 1), 38);
    bt[0] = (colibri_batch_tok){.seq = 1, .token = toks[38], .logits = 1};
    assert_int_equal(colibri_decode(a, bt, 1, lc, (size_t)V), 0);
    assert_memory_equal(lc, la + (size_t)38 * V, sizeof(float) * V);
    /* cut to 10: the window of position 10 was overwritten, so the sequence starts over */
    assert_int_equal(colibri_seq_truncate(a, 1, 10), 0);
    assert_int_equal(colibri_seq_n_past(a, 1), 0);
    assert_int_equal(colibri_seq_n_past(a, 0), N);
    for (int i = 0; i < 11; i++) bt[i] = (colibri_batch_tok){.seq = 1, .token = toks[i], .logits = i == 10};
    assert_int_equal(colibri_decode(a, bt, 11, lc, (size_t)V), 0);
    assert_memory_equal(lc, la + (size_t)10 * V, sizeof(float) * V);
    /* the windows change the result (the test would pass trivially otherwise) */
    clb_attn_layer sinks_only[2] = {{.sinks = true}, {0}};
    hp.attn_layers = sinks_only;
    char plain_path[256];
    tu_tmp_path(plain_path, sizeof plain_path, ".colibri");
    assert_int_equal(tu_write_model(plain_path, &hp, CLB_DT_F32, 45), 0);
    colibri_engine_t *plain = colibri_init_params(plain_path, &p);
    assert_non_null(plain);
    float *lp = malloc(sizeof(float) * N * V);
    assert_int_equal(colibri_eval(plain, toks, N, lp, (size_t)N * V), 0);
    assert_memory_equal(lp, la, sizeof(float) * 5 * V); /* window 5 and chunk 7: same up to position 4 */
    assert_memory_not_equal(lp + (size_t)(N - 1) * V, la + (size_t)(N - 1) * V, sizeof(float) * V);
    unlink(plain_path);
    free(lp);
    colibri_free(plain);
    free(la);
    free(lb);
    free(lc);
    colibri_free(a);
    colibri_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_equals_stepwise), cmocka_unit_test(test_threads_invariant),
        cmocka_unit_test(test_no_alloc_per_token), cmocka_unit_test(test_reset_and_topk),
        cmocka_unit_test(test_sequences), cmocka_unit_test(test_expert_state), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_windows),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
