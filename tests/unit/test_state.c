/* test_state.c — context shifts and saved states through the public API (colibri.h):
 * a shift re-rotates cached keys to their new positions (on a one-layer model, where a
 * key depends only on its token and position, the shifted cache equals a fresh evaluation
 * of the remaining tokens); the automatic shift never fails mid-stream; a saved state
 * restored into another engine (or another sequence, another batch size) gives the same
 * next logits bit for bit; a state of another model, cache type, or a damaged file is
 * refused naming why, leaving the sequence as it was. */
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

static char one_path[256], moe_path[256], win_path[256], other_path[256], state_path[256];
static const int32_t PROMPT[] = {1, 5, 9, 33, 70, 2, 11, 95, 40, 41, 3, 60, 7, 8, 12, 90, 44, 45, 46, 47};
enum { NP = (int)(sizeof PROMPT / sizeof PROMPT[0]) };

static int setup(void **state) {
    (void)state;
    clb_hparams hp;
    tu_tmp_path(one_path, sizeof one_path, ".colibri");
    tu_tmp_path(moe_path, sizeof moe_path, ".colibri");
    tu_tmp_path(win_path, sizeof win_path, ".colibri");
    tu_tmp_path(other_path, sizeof other_path, ".colibri");
    tu_tmp_path(state_path, sizeof state_path, ".state");
    tu_tiny_hparams(&hp, 0);
    hp.n_layer = 1;
    if (tu_write_model(one_path, &hp, CLB_DT_F32, 51)) return -1;
    tu_tiny_hparams(&hp, 6);
    if (tu_write_model(moe_path, &hp, CLB_DT_Q8_0, 52)) return -1;
    if (tu_write_model(other_path, &hp, CLB_DT_Q8_0, 53)) return -1; /* same shapes, other weights */
    clb_attn_layer al[2] = {{.window = 5, .sinks = true}, {0}};
    hp.attn_layers = al;
    if (tu_write_model(win_path, &hp, CLB_DT_F32, 54)) return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(one_path);
    unlink(moe_path);
    unlink(win_path);
    unlink(other_path);
    unlink(state_path);
    return 0;
}

static colibri_engine_t *open_e(const char *path, int kv, int batch, int n_seq, int shift) {
    colibri_params p = colibri_params_default();
    p.n_threads = 2;
    p.max_seq_len = 32;
    p.n_batch = batch;
    p.n_seq = n_seq;
    p.cache_type_k = p.cache_type_v = kv;
    p.ctx_shift = shift;
    colibri_engine_t *e = colibri_init_params(path, &p);
    if (!e) fprintf(stderr, "init: %s\n", colibri_last_error());
    assert_non_null(e);
    return e;
}

static double max_rel(const float *a, const float *b, int n) {
    double d = 0, m = 0;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

/* one layer: K and V of a token depend on it and its position only, so after dropping
   [keep, keep + d) the re-rotated cache is what evaluating the rest afresh gives */
static void test_shift_rerotates(void **state) {
    (void)state;
    const int kv_types[] = {COLIBRI_KV_F32, COLIBRI_KV_F16, COLIBRI_KV_Q8_0};
    const double tol[] = {2e-6, 2e-3, 3e-2}; /* f16 / q8_0: the rotated keys are rounded again */
    for (int k = 0; k < 3; k++) {
        colibri_engine_t *a = open_e(one_path, kv_types[k], 7, 1, 0), *b = open_e(one_path, kv_types[k], 7, 1, 0);
        const int V = colibri_n_vocab(a), keep = 3, d = 6;
        float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V), *lc = malloc(sizeof(float) * V);
        assert_int_equal(colibri_eval(a, PROMPT, NP, NULL, 0), 0);
        assert_int_equal(colibri_forward(a, 4, lc, NULL), 0); /* before the shift */
        assert_int_equal(colibri_seq_truncate(a, 0, NP), 0);
        assert_int_equal(colibri_seq_shift(a, 0, keep, d), 0);
        assert_int_equal(colibri_n_past(a), NP - d);
        assert_int_equal(colibri_forward(a, 4, la, NULL), 0);
        int32_t rest[NP];
        size_t n = 0;
        for (int i = 0; i < NP; i++)
            if (i < keep || i >= keep + d) rest[n++] = PROMPT[i];
        assert_int_equal(colibri_eval(b, rest, n, NULL, 0), 0);
        assert_int_equal(colibri_forward(b, 4, lb, NULL), 0);
        const double r = max_rel(la, lb, V);
        fprintf(stderr, "shift, %s cache: max rel %.3g vs a fresh evaluation\n", colibri_kv_type_name(kv_types[k]), r);
        assert_true(r <= tol[k]);
        assert_true(max_rel(lc, lb, V) > 1e-3); /* the shift changed the context */
        /* the tokens the sequence holds */
        int32_t held[NP + 1];
        assert_int_equal(colibri_seq_tokens(a, 0, held, NP, &n), 0);
        assert_int_equal(n, NP - d + 1);
        for (int i = 0; i < (int)n - 1; i++) assert_int_equal(held[i], rest[i]);
        assert_int_equal(colibri_seq_tokens(a, 0, held, 2, &n), COLIBRI_ERR_ARG);
        assert_int_equal(colibri_seq_shift(a, 0, 10, 100), COLIBRI_ERR_ARG);
        assert_int_equal(colibri_seq_shift(a, 1, 0, 1), COLIBRI_ERR_ARG);
        free(la);
        free(lb);
        free(lc);
        colibri_free(a);
        colibri_free(b);
    }
}

/* the automatic shift: decoding far past max_seq_len never fails; the kept start stays */
static void test_auto_shift(void **state) {
    (void)state;
    const char *paths[] = {moe_path, win_path};
    for (int m = 0; m < 2; m++) {
        colibri_engine_t *e = open_e(paths[m], COLIBRI_KV_DEFAULT, 8, 2, 1);
        assert_int_equal(colibri_seq_set_keep(e, 0, 4), 0);
        assert_int_equal(colibri_eval(e, PROMPT, NP, NULL, 0), 0);
        int32_t next = 7;
        for (int i = 0; i < 100; i++) {
            assert_int_equal(colibri_forward(e, next, NULL, &next), 0);
            assert_true(colibri_n_past(e) <= 32);
        }
        /* a prompt longer than the context, in one call */
        int32_t longp[80];
        for (int i = 0; i < 80; i++) longp[i] = PROMPT[i % NP];
        colibri_batch_tok bt[80];
        for (int i = 0; i < 80; i++) bt[i] = (colibri_batch_tok){.seq = 1, .token = longp[i]};
        assert_int_equal(colibri_decode(e, bt, 80, NULL, 0), 0);
        assert_true(colibri_seq_n_past(e, 1) <= 32);
        int32_t held[32];
        size_t n;
        assert_int_equal(colibri_seq_tokens(e, 0, held, 32, &n), 0);
        for (int i = 0; i < 4; i++) assert_int_equal(held[i], PROMPT[i]);
        colibri_stats_t st = colibri_get_stats(e);
        assert_true(st.ctx_shifts >= 4);
        assert_int_equal(colibri_seq_set_keep(e, 0, 32), COLIBRI_ERR_ARG);
        colibri_free(e);
    }
    /* without it, the 33rd token is COLIBRI_ERR_RANGE */
    colibri_engine_t *e = open_e(moe_path, COLIBRI_KV_DEFAULT, 8, 1, 0);
    int32_t many[33];
    for (int i = 0; i < 33; i++) many[i] = PROMPT[i % NP];
    assert_int_equal(colibri_eval(e, many, 33, NULL, 0), COLIBRI_ERR_RANGE);
    colibri_free(e);
}

/* save after a prompt, restore elsewhere: the next logits are the same bits */
static void test_state_round_trip(void **state) {
    (void)state;
    const char *paths[] = {moe_path, win_path};
    const int kv[] = {COLIBRI_KV_DEFAULT, COLIBRI_KV_Q8_0, COLIBRI_KV_F32};
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 3; k++) {
            colibri_engine_t *a = open_e(paths[m], kv[k], 8, 1, 0), *b = open_e(paths[m], kv[k], 3, 3, 0);
            const int V = colibri_n_vocab(a);
            float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
            assert_int_equal(colibri_eval(a, PROMPT, NP, NULL, 0), 0);
            assert_int_equal(colibri_state_save(a, 0, state_path), 0);
            assert_int_equal(colibri_forward(a, 9, la, NULL), 0);
            /* into sequence 2 of an engine with smaller batches (other ring sizes) */
            assert_int_equal(colibri_eval(b, PROMPT + 3, 5, NULL, 0), 0);
            assert_int_equal(colibri_state_load(b, 2, state_path), 0);
            assert_int_equal(colibri_seq_n_past(b, 2), NP);
            assert_int_equal(colibri_seq_n_past(b, 0), 5);
            colibri_batch_tok t = {.seq = 2, .token = 9, .logits = 1};
            assert_int_equal(colibri_decode(b, &t, 1, lb, (size_t)V), 0);
            assert_memory_equal(la, lb, sizeof(float) * V);
            free(la);
            free(lb);
            colibri_free(a);
            colibri_free(b);
        }
}

static void test_state_refused(void **state) {
    (void)state;
    colibri_engine_t *a = open_e(moe_path, COLIBRI_KV_DEFAULT, 8, 1, 0);
    assert_int_equal(colibri_eval(a, PROMPT, NP, NULL, 0), 0);
    assert_int_equal(colibri_state_save(a, 0, state_path), 0);
    const int V = colibri_n_vocab(a);
    float *l0 = malloc(sizeof(float) * V), *l1 = malloc(sizeof(float) * V);
    /* another model of the same shapes; another cache type; another max_seq_len too short */
    colibri_engine_t *o = open_e(other_path, COLIBRI_KV_DEFAULT, 8, 1, 0);
    assert_int_equal(colibri_state_load(o, 0, state_path), COLIBRI_ERR_ARG);
    assert_non_null(strstr(colibri_last_error(), "another model"));
    colibri_free(o);
    o = open_e(moe_path, COLIBRI_KV_Q8_0, 8, 1, 0);
    assert_int_equal(colibri_state_load(o, 0, state_path), COLIBRI_ERR_ARG);
    assert_non_null(strstr(colibri_last_error(), "q8_0"));
    colibri_free(o);
    colibri_params p = colibri_params_default();
    p.max_seq_len = 8;
    o = colibri_init_params(moe_path, &p);
    assert_int_equal(colibri_state_load(o, 0, state_path), COLIBRI_ERR_ARG);
    assert_non_null(strstr(colibri_last_error(), "max_seq_len"));
    colibri_free(o);
    /* damaged files leave the sequence as it was: b holds 5 tokens and gives the same logits */
    colibri_engine_t *b = open_e(moe_path, COLIBRI_KV_DEFAULT, 8, 1, 0);
    assert_int_equal(colibri_eval(b, PROMPT, 5, NULL, 0), 0);
    FILE *f = fopen(state_path, "rb");
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *bytes = malloc((size_t)size);
    assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    char bad[256];
    tu_tmp_path(bad, sizeof bad, ".state");
    const struct { long len; long flip; int rc; const char *msg; } cases[] = {
        {size / 2, -1, COLIBRI_ERR_FORMAT, "truncated"},
        {size, size / 2, COLIBRI_ERR_CORRUPT, "checksum"},
        {size, 3, COLIBRI_ERR_FORMAT, "not a colibri state"},
        {size, 9, COLIBRI_ERR_FORMAT, "version"},
        {7, -1, COLIBRI_ERR_FORMAT, "truncated"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        f = fopen(bad, "wb");
        if (cases[c].flip >= 0) bytes[cases[c].flip] ^= 0x5a;
        fwrite(bytes, 1, (size_t)cases[c].len, f);
        if (cases[c].flip >= 0) bytes[cases[c].flip] ^= 0x5a;
        fclose(f);
        assert_int_equal(colibri_state_load(b, 0, bad), cases[c].rc);
        assert_non_null(strstr(colibri_last_error(), cases[c].msg));
        assert_int_equal(colibri_n_past(b), 5);
    }
    f = fopen(bad, "wb"); /* trailing garbage */
    fwrite(bytes, 1, (size_t)size, f);
    fputc(0, f);
    fclose(f);
    assert_int_equal(colibri_state_load(b, 0, bad), COLIBRI_ERR_FORMAT);
    assert_int_equal(colibri_state_load(b, 0, "/nonexistent/x.state"), COLIBRI_ERR_IO);
    assert_int_equal(colibri_state_save(b, 0, "/nonexistent/x.state"), COLIBRI_ERR_IO);
    assert_int_equal(colibri_state_load(b, 1, state_path), COLIBRI_ERR_ARG);
    assert_int_equal(colibri_forward(b, 9, l0, NULL), 0);
    colibri_engine_t *c2 = open_e(moe_path, COLIBRI_KV_DEFAULT, 8, 1, 0);
    assert_int_equal(colibri_eval(c2, PROMPT, 5, NULL, 0), 0);
    assert_int_equal(colibri_forward(c2, 9, l1, NULL), 0);
    assert_memory_equal(l0, l1, sizeof(float) * V);
    unlink(bad);
    free(bytes);
    free(l0);
    free(l1);
    colibri_free(c2);
    colibri_free(b);
    colibri_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shift_rerotates),
        cmocka_unit_test(test_auto_shift),
        cmocka_unit_test(test_state_round_trip),
        cmocka_unit_test(test_state_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
