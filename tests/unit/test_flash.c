/* test_flash.c — the flash-attention inner loops of every kernel table (kernels.h fa_scores,
 * fa_vacc, fa_exp_sum, fa_softmax): each SIMD table against the portable one on awkward sizes, and each
 * table invariant to how rows and keys are grouped (a row computed alone, or its keys in
 * two calls, gives the same bits as in a whole tile) — what lets attention results not
 * depend on batching. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kernels.h"
#include "testutil.h"

#define ALEN(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rnd_f(void) { return tu_rand(&rng); }

static const char *const isas[] = {"generic", "avx2", "avx2+vnni", "avx512", "neon", "neon+dotprod"};
static const int types[] = {CLB_DT_F32, CLB_DT_F16, CLB_DT_BF16, CLB_DT_Q8_0, CLB_DT_Q4_0};
static const int64_t dims_float[] = {8, 16, 24, 40, 64, 128, 200, 576};
static const int64_t dims_block[] = {32, 64, 96, 128, 576, 2080}; /* 2080: past the AVX-512 q8_0 kernel's 2048 */
static const int nqs[] = {1, 2, 3, 4, 5, 6, 7, 8, 13, 32};
static const int nks[] = {1, 2, 3, 5, 17, 32};

/* n rows of d values of type t (from random floats), row_bytes apart; the f32 originals too */
static uint8_t *make_rows(int t, int64_t d, int n, uint64_t *row_bytes, float *orig) {
    assert_true(clb_row_bytes(t, d, row_bytes));
    uint8_t *r = malloc(*row_bytes * (size_t)n + 64);
    for (int i = 0; i < n; i++) {
        for (int64_t c = 0; c < d; c++) orig[(int64_t)i * d + c] = rnd_f() * (c % 7 == 0 ? 3.0f : 1.0f);
        clb_quantize_row_ref((clb_dtype)t, orig + (int64_t)i * d, r + (uint64_t)i * *row_bytes, d);
    }
    return r;
}

static void test_scores(void **state) {
    (void)state;
    const clb_kernels *g = clb_kernels_generic();
    int checked = 0, vnni_checked = 0;
    for (size_t s = 0; s < ALEN(isas); s++) {
        const clb_kernels *k = clb_kernels_by_isa(isas[s]);
        if (!k) continue;
        for (size_t ti = 0; ti < ALEN(types); ti++) {
            const int t = types[ti], qt = clb_fa_query_type(t);
            const bool blocks = clb_type(t)->block_size > 1;
            const int64_t *dims = blocks ? dims_block : dims_float;
            const size_t nd = blocks ? ALEN(dims_block) : ALEN(dims_float);
            assert_non_null(k->fa_scores[t]);
            for (size_t di = 0; di < nd; di++) {
                const int64_t d = dims[di];
                float *kf = malloc(sizeof(float) * (size_t)(d * 32)), *qf = malloc(sizeof(float) * (size_t)(d * 32));
                uint64_t kb, qb;
                uint8_t *K = make_rows(t, d, 32, &kb, kf), *Q = make_rows(qt, d, 32, &qb, qf);
                float sc[32 * 32], ref[32 * 32], one;
                for (size_t a = 0; a < ALEN(nqs); a++)
                    for (size_t b = 0; b < ALEN(nks); b++) {
                        const int nq = nqs[a], nk = nks[b];
                        k->fa_scores[t](d, nq, nk, Q, qb, K, kb, sc, 32);
                        g->fa_scores[t](d, nq, nk, Q, qb, K, kb, ref, 32);
                        for (int i = 0; i < nq; i++)
                            for (int j = 0; j < nk; j++) {
                                double mag = 0;
                                for (int64_t c = 0; c < d; c++) mag += fabs((double)qf[i * d + c] * kf[j * d + c]);
                                if (fabs((double)sc[i * 32 + j] - ref[i * 32 + j]) > 1e-5 * mag + 1e-6)
                                    fail_msg("%s %s d=%lld nq=%d nk=%d (%d,%d): %g vs %g", isas[s], clb_dtype_name(t),
                                             (long long)d, nq, nk, i, j, (double)sc[i * 32 + j], (double)ref[i * 32 + j]);
                                /* the same pair alone: the same bits */
                                k->fa_scores[t](d, 1, 1, Q + (uint64_t)i * qb, qb, K + (uint64_t)j * kb, kb, &one, 1);
                                if (memcmp(&one, &sc[i * 32 + j], sizeof one))
                                    fail_msg("%s %s d=%lld nq=%d nk=%d: pair (%d,%d) differs alone", isas[s],
                                             clb_dtype_name(t), (long long)d, nq, nk, i, j);
                                checked++;
                            }
                        /* the AVX2 table with and without VPDPBUSD: exact integer block products,
                           so the same bits */
                        const clb_kernels *vn = clb_kernels_by_isa("avx2+vnni");
                        if (blocks && vn && !strcmp(isas[s], "avx2")) {
                            float sv[32 * 32];
                            vn->fa_scores[t](d, nq, nk, Q, qb, K, kb, sv, 32);
                            for (int i = 0; i < nq; i++)
                                if (memcmp(sv + i * 32, sc + i * 32, sizeof(float) * (size_t)nk))
                                    fail_msg("%s d=%lld nq=%d nk=%d row %d: avx2 and avx2+vnni differ", clb_dtype_name(t),
                                             (long long)d, nq, nk, i);
                            vnni_checked++;
                        }
                    }
                free(K);
                free(Q);
                free(kf);
                free(qf);
            }
        }
    }
    assert_true(checked > 10000);
    if (clb_kernels_by_isa("avx2+vnni") && clb_kernels_by_isa("avx2")) assert_true(vnni_checked > 100);
}

static void test_vacc(void **state) {
    (void)state;
    const clb_kernels *g = clb_kernels_generic();
    int checked = 0;
    for (size_t s = 0; s < ALEN(isas); s++) {
        const clb_kernels *k = clb_kernels_by_isa(isas[s]);
        if (!k) continue;
        for (size_t ti = 0; ti < ALEN(types); ti++) {
            const int t = types[ti];
            const bool blocks = clb_type(t)->block_size > 1;
            const int64_t *dims = blocks ? dims_block : dims_float;
            const size_t nd = blocks ? ALEN(dims_block) : ALEN(dims_float);
            assert_non_null(k->fa_vacc[t]);
            for (size_t di = 0; di < nd; di++) {
                const int64_t d = dims[di];
                float *vf = malloc(sizeof(float) * (size_t)(d * 32));
                uint64_t vb;
                uint8_t *V = make_rows(t, d, 32, &vb, vf);
                float *deq = malloc(sizeof(float) * (size_t)(d * 32));
                if (blocks)
                    for (int j = 0; j < 32; j++) clb_dequantize_row_ref((clb_dtype)t, V + (uint64_t)j * vb, deq + j * d, d);
                float p[32 * 32];
                for (int i = 0; i < 32 * 32; i++) p[i] = i % 5 == 0 ? 0.0f : fabsf(rnd_f());
                float alpha[32];
                for (int i = 0; i < 32; i++) alpha[i] = i % 3 == 0 ? 1.0f : fabsf(rnd_f());
                float *acc = malloc(sizeof(float) * (size_t)(32 * d)), *ref = malloc(sizeof(float) * (size_t)(32 * d));
                float *one = malloc(sizeof(float) * (size_t)d), *init = malloc(sizeof(float) * (size_t)(32 * d));
                for (int64_t i = 0; i < 32 * d; i++) init[i] = rnd_f();
                for (size_t a = 0; a < ALEN(nqs); a++)
                    for (size_t b = 0; b < ALEN(nks); b++) {
                        const int nq = nqs[a], nk = nks[b];
                        memcpy(acc, init, sizeof(float) * (size_t)(32 * d));
                        memcpy(ref, init, sizeof(float) * (size_t)(32 * d));
                        /* the rescale factors of the online softmax on every other call */
                        const float *al = (a + b) % 2 ? alpha : NULL;
                        k->fa_vacc[t](d, nq, nk, p, 32, V, vb, acc, d, al);
                        g->fa_vacc[t](d, nq, nk, p, 32, V, vb, ref, d, al);
                        for (int i = 0; i < nq; i++) {
                            for (int64_t c = 0; c < d; c++) {
                                double mag = fabs(init[i * d + c] * (al ? al[i] : 1.0f));
                                for (int j = 0; j < nk; j++) mag += fabs((double)p[i * 32 + j] * vf[j * d + c]);
                                if (fabs((double)acc[i * d + c] - ref[i * d + c]) > 2e-6 * mag + 1e-7)
                                    fail_msg("%s %s d=%lld nq=%d nk=%d (%d,%lld): %g vs %g", isas[s], clb_dtype_name(t),
                                             (long long)d, nq, nk, i, (long long)c, (double)acc[i * d + c],
                                             (double)ref[i * d + c]);
                            }
                            /* the row alone, its keys in two calls: the same bits */
                            memcpy(one, init + i * d, sizeof(float) * (size_t)d);
                            const int half = nk / 2;
                            if (half) k->fa_vacc[t](d, 1, half, p + i * 32, 32, V, vb, one, d, al ? al + i : NULL);
                            k->fa_vacc[t](d, 1, nk - half, p + i * 32 + half, 32, V + (uint64_t)half * vb, vb, one, d,
                                          al && !half ? al + i : NULL);
                            if (memcmp(one, acc + i * d, sizeof(float) * (size_t)d))
                                fail_msg("%s %s d=%lld nq=%d nk=%d: row %d differs alone", isas[s], clb_dtype_name(t),
                                         (long long)d, nq, nk, i);
                            checked++;
                        }
                        /* values of 32-value blocks are d * q exactly, each one FMA chain over the keys
                           (kernels.h): the same bits as the table's f32 loop on the dequantized rows,
                           however the kernel shares the dequantizing among query rows */
                        if (blocks) {
                            memcpy(ref, init, sizeof(float) * (size_t)(32 * d));
                            k->fa_vacc[CLB_DT_F32](d, nq, nk, p, 32, deq, sizeof(float) * (uint64_t)d, ref, d, al);
                            for (int i = 0; i < nq; i++)
                                if (memcmp(ref + i * d, acc + i * d, sizeof(float) * (size_t)d))
                                    fail_msg("%s %s d=%lld nq=%d nk=%d: row %d differs from f32 values on the dequantized rows",
                                             isas[s], clb_dtype_name(t), (long long)d, nq, nk, i);
                        }
                    }
                free(deq);
                free(V);
                free(vf);
                free(acc);
                free(ref);
                free(one);
                free(init);
            }
        }
    }
    assert_true(checked > 1000);
}

static void test_exp_sum(void **state) {
    (void)state;
    for (size_t s = 0; s < ALEN(isas); s++) {
        const clb_kernels *k = clb_kernels_by_isa(isas[s]);
        if (!k) continue;
        enum { N = 4096 };
        float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
        for (int i = 0; i < N; i++) x[i] = i % 97 == 0 ? -INFINITY : i % 89 == 0 ? -90.0f : -30.0f * fabsf(rnd_f()) + 3.0f;
        const float m = 3.0f;
        memcpy(y, x, sizeof(float) * N);
        const float sum = k->fa_exp_sum(N, y, m);
        double ref_sum = 0;
        for (int i = 0; i < N; i++) {
            const double e = x[i] - m < -87.3 ? 0.0 : exp((double)x[i] - m);
            ref_sum += e;
            if (isinf(x[i]) || x[i] == -90.0f) {
                if (y[i] != 0.0f) fail_msg("%s: exp(%g) = %g, not 0", isas[s], (double)(x[i] - m), (double)y[i]);
            } else if (fabs(y[i] - e) > 3e-7 * e) {
                fail_msg("%s: exp(%g) = %.9g vs %.9g", isas[s], (double)(x[i] - m), (double)y[i], e);
            }
        }
        assert_true(fabs(sum - ref_sum) <= 1e-5 * ref_sum);
        free(x);
        free(y);
    }
}

/* fa_softmax against the same table's steps one row at a time (bit for bit) and the
   portable table (to rounding), with running maxima below, inside and above the rows' */
static void test_softmax(void **state) {
    (void)state;
    const clb_kernels *g = clb_kernels_generic();
    int checked = 0;
    for (size_t s = 0; s < ALEN(isas); s++) {
        const clb_kernels *k = clb_kernels_by_isa(isas[s]);
        if (!k) continue;
        assert_non_null(k->fa_softmax);
        enum { R = 32, N = R * CLB_FA_TK };
        float x[N], y[N], z[N], m[R], mn[R], sum[R], gmn[R], gsum[R];
        const float scale = 0.0883883f;
        for (int nr = 1; nr <= R; nr += nr < 9 ? 1 : 7) {
            for (int i = 0; i < N; i++) x[i] = 40.0f * rnd_f();
            for (int r = 0; r < R; r++) m[r] = r % 4 == 0 ? -INFINITY : r % 4 == 1 ? -9.0f : r % 4 == 2 ? 1.0f : 6.0f;
            memcpy(y, x, sizeof x);
            memcpy(z, x, sizeof x);
            k->fa_softmax(nr, y, scale, m, mn, sum);
            g->fa_softmax(nr, z, scale, m, gmn, gsum);
            for (int r = 0; r < nr; r++) {
                float *row = x + r * CLB_FA_TK, mx = m[r];
                for (int j = 0; j < CLB_FA_TK; j++) {
                    row[j] *= scale;
                    mx = row[j] > mx ? row[j] : mx;
                }
                const float one = k->fa_exp_sum(CLB_FA_TK, row, mx);
                if (memcmp(&mx, &mn[r], sizeof mx) || memcmp(&one, &sum[r], sizeof one) ||
                    memcmp(row, y + r * CLB_FA_TK, sizeof(float) * CLB_FA_TK))
                    fail_msg("%s nr=%d row %d: not the rowwise steps' bits (max %g vs %g, sum %g vs %g)", isas[s], nr, r,
                             (double)mn[r], (double)mx, (double)sum[r], (double)one);
                if (gmn[r] != mn[r] || fabsf(gsum[r] - sum[r]) > 1e-5f * gsum[r])
                    fail_msg("%s nr=%d row %d: max %g vs %g, sum %g vs %g (generic)", isas[s], nr, r, (double)mn[r],
                             (double)gmn[r], (double)sum[r], (double)gsum[r]);
                checked++;
            }
            for (int i = nr * CLB_FA_TK; i < N; i++)
                if (memcmp(&y[i], &z[i], sizeof y[i]) || memcmp(&y[i], &x[i], sizeof y[i]))
                    fail_msg("%s nr=%d: score %d past the rows written", isas[s], nr, i);
        }
    }
    assert_true(checked > 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores),
        cmocka_unit_test(test_vacc),
        cmocka_unit_test(test_exp_sum),
        cmocka_unit_test(test_softmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
