/* test_attn_long.c — flash attention at contexts of several key chunks (FA_KC = 256 keys),
 * through the public API: the prefill tiles that merge the partial softmaxes of 4 chunks,
 * and the decode steps whose few query tiles split their chunks over the threads and merge
 * them after (src/nn/attention.c). Against the plain path (f32 caches, -fa off: one score
 * buffer per row, one softmax): within float rounding. Results must not depend on the
 * thread count or the batch size (docs/ATTENTION.md): bit for bit. Quantized caches at that
 * length stay within bounds of the f32 plain path. Shorter prompts (the integration tests'
 * 64 positions) stay inside one chunk and never merge. */
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

enum { NP = 900, ND = 4, MAXSEQ = 1024 };
static char dense_path[256], win_path[256];
static int32_t toks[NP + ND];

static int setup(void **state) {
    (void)state;
    clb_hparams hp;
    tu_tiny_hparams(&hp, 0);
    hp.max_pos = 4096;
    hp.n_head = 8; /* a GQA group of 4 query heads per K/V head */
    tu_tmp_path(dense_path, sizeof dense_path, ".colibri");
    tu_tmp_path(win_path, sizeof win_path, ".colibri");
    if (tu_write_model(dense_path, &hp, CLB_DT_F32, 71)) return -1;
    /* a window wider than a chunk (its ring of window + batch - 1 positions wraps) and sinks */
    clb_attn_layer al[2] = {{.window = 300, .sinks = true}, {0}};
    hp.attn_layers = al;
    if (tu_write_model(win_path, &hp, CLB_DT_F32, 72)) return -1;
    uint64_t s = 0x51ED2701u;
    for (int i = 0; i < NP + ND; i++) toks[i] = 3 + (int32_t)(tu_rand_u64(&s) % 90);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(dense_path);
    unlink(win_path);
    return 0;
}

static colibri_engine_t *open_e(const char *path, int kv, int fa, int threads, int batch) {
    colibri_params p = colibri_params_default();
    p.n_threads = threads;
    p.max_seq_len = MAXSEQ;
    p.n_batch = batch;
    p.cache_type_k = p.cache_type_v = kv;
    p.flash_attn = fa;
    colibri_engine_t *e = colibri_init_params(path, &p);
    if (!e) fprintf(stderr, "init: %s\n", colibri_last_error());
    assert_non_null(e);
    return e;
}

/* logits of the last NR prompt positions (prefill) and of ND decode steps after it */
enum { NR = 8, NROWS = NR + ND };
static void run(colibri_engine_t *e, float *out, int V) {
    float *all = malloc(sizeof(float) * (size_t)NP * (size_t)V);
    assert_non_null(all);
    assert_int_equal(colibri_eval(e, toks, NP, all, (size_t)NP * (size_t)V), 0);
    memcpy(out, all + (size_t)(NP - NR) * (size_t)V, sizeof(float) * NR * (size_t)V);
    for (int i = 0; i < ND; i++)
        assert_int_equal(colibri_forward(e, toks[NP + i], out + (size_t)(NR + i) * (size_t)V, NULL), 0);
    free(all);
}

/* largest |a - b| of a row over the row's largest |b|, over all rows; and RMS over std */
static void diff(const float *a, const float *b, int V, double *max_rel, double *rms_std) {
    double mr = 0, se = 0, s = 0, s2 = 0;
    for (int r = 0; r < NROWS; r++) {
        double d = 0, m = 0;
        for (int k = 0; k < V; k++) {
            const double x = a[(size_t)r * V + k], y = b[(size_t)r * V + k];
            d = fmax(d, fabs(x - y));
            m = fmax(m, fabs(y));
            se += (x - y) * (x - y);
            s += y;
            s2 += y * y;
        }
        mr = fmax(mr, d / m);
    }
    const double n = (double)NROWS * V, var = s2 / n - (s / n) * (s / n);
    *max_rel = mr;
    *rms_std = sqrt(se / n) / sqrt(var);
}

static void test_long_context(void **state) {
    (void)state;
    const char *paths[] = {dense_path, win_path};
    const char *names[] = {"dense", "window 300 + sinks"};
    for (int m = 0; m < 2; m++) {
        colibri_engine_t *ref = open_e(paths[m], COLIBRI_KV_F32, -1, 2, 64);
        const int V = colibri_n_vocab(ref);
        const size_t bytes = sizeof(float) * NROWS * (size_t)V;
        float *lr = malloc(bytes), *lf = malloc(bytes), *lg = malloc(bytes), *lq = malloc(bytes);
        run(ref, lr, V);
        colibri_free(ref);
        /* flash attention, f32 caches, 2 threads, prefill batches of 64 */
        colibri_engine_t *e = open_e(paths[m], COLIBRI_KV_F32, 1, 2, 64);
        run(e, lf, V);
        colibri_free(e);
        double mr, rs;
        diff(lf, lr, V, &mr, &rs);
        fprintf(stderr, "%s, %d positions: flash vs plain max rel %.3g\n", names[m], NP + ND, mr);
        assert_true(mr <= 1e-5);
        /* the same bits with one thread (no key split), and with prefill batches of 7 */
        e = open_e(paths[m], COLIBRI_KV_F32, 1, 1, 64);
        run(e, lg, V);
        colibri_free(e);
        assert_memory_equal(lf, lg, bytes);
        e = open_e(paths[m], COLIBRI_KV_F32, 1, 2, 7);
        run(e, lg, V);
        colibri_free(e);
        assert_memory_equal(lf, lg, bytes);
        /* quantized caches at this length: bounded against the f32 plain path */
        const int kv[] = {COLIBRI_KV_F16, COLIBRI_KV_BF16, COLIBRI_KV_Q8_0, COLIBRI_KV_Q4_0};
        const double bound[] = {5e-4, 5e-3, 0.02, 0.1};
        for (int k = 0; k < 4; k++) {
            e = open_e(paths[m], kv[k], 0, 2, 64);
            run(e, lq, V);
            colibri_free(e);
            diff(lq, lr, V, &mr, &rs);
            fprintf(stderr, "%s, %s cache: rms/std %.3g, max rel %.3g vs f32 plain\n", names[m],
                    colibri_kv_type_name(kv[k]), rs, mr);
            assert_true(rs <= bound[k]);
            assert_true(rs > 0); /* the cache type was used */
        }
        free(lr);
        free(lf);
        free(lg);
        free(lq);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_context),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
