/* fabench.c — the flash-attention decode loop of one K/V head in isolation (kernels.h
 * fa_scores, fa_exp_sum, fa_vacc): a GQA group of query rows against the cached K and V
 * rows of many heads in turn (so the rows come from DRAM, as at long context), one thread.
 *
 *   bench/build/fabench [--isa NAME] [--type q8_0] [--rows 8] [--keys 16384] [--dim 128]
 *                       [--heads 24] [--reps 7] [--threads 1]
 *
 * Prints ns per (query row, key) pair, best of --reps passes over all heads, for the
 * scores alone, the softmax step alone (scale, max, exp and sum of a 32-key tile: what
 * attention.c's fa_chunk does between the two kernels; the softmax-alone pass restarts each
 * tile), the value sum alone, the three in turn as fa_chunk runs them, and the softmax step
 * alone as fa_chunk ran it row by row before fa_softmax. With --threads N, N threads each take
 * a slice of the heads at once (as decode's tiles run on every core): the figures are then
 * wall time per (pairs / N), what a pair costs one thread while the others stream too. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "bench_util.h"

enum { TK = CLB_FA_TK, MAXR = 32, MAXT = 64 };

/* one 32-key tile's softmax step when every row sees every key: the new maxima and exp
   sums, by the table's fa_softmax (as attention.c's fa_chunk runs it) or, rowwise, by the
   loop fa_chunk ran before it (scale and max in 8 lanes, then fa_exp_sum per row); then the
   running sums (and value sums) rescaled where the maximum grew */
static float softmax_tile(const clb_kernels *k, bool rowwise, int nr, int64_t d, float *s, float scale, float *m,
                          float *l, float *acc) {
    float mn[MAXR], sum[MAXR], total = 0;
    if (!rowwise) k->fa_softmax(nr, s, scale, m, mn, sum);
    for (int r = 0; r < nr && rowwise; r++) {
        float *sr = s + r * TK, mx = -INFINITY, m8[8];
        for (int u = 0; u < 8; u++) m8[u] = -INFINITY;
        for (int j = 0; j < TK; j += 8)
            for (int u = 0; u < 8; u++) {
                const float v = sr[j + u] * scale;
                sr[j + u] = v;
                m8[u] = v > m8[u] ? v : m8[u];
            }
        for (int u = 0; u < 8; u++) mx = m8[u] > mx ? m8[u] : mx;
        mn[r] = m[r] > mx ? m[r] : mx;
        sum[r] = k->fa_exp_sum(TK, sr, mn[r]);
    }
    for (int r = 0; r < nr; r++) {
        if (m[r] != -INFINITY && m[r] != mn[r]) {
            const float alpha = expf(m[r] - mn[r]);
            l[r] *= alpha;
            for (int64_t i = 0; i < d; i++) acc[r * d + i] *= alpha;
        }
        l[r] += sum[r];
        m[r] = mn[r];
        total += l[r];
    }
    return total;
}

/* one thread's share: heads [h0, h1) of every pass, the passes in step with the others */
typedef struct job {
    const clb_kernels *k;
    clb_dtype t;
    int nr, nkeys, reps;
    int64_t d;
    uint64_t krow, qrow;
    const uint8_t *K, *V, *Q;
    int h0, h1;
    float scale, sink;
    pthread_barrier_t *bar;
    double best[5]; /* wall seconds, from the barrier before a pass to the one after it */
} job;

static void *run_job(void *arg) {
    job *jb = arg;
    const clb_kernels *k = jb->k;
    const int nr = jb->nr;
    const int64_t d = jb->d;
    const uint64_t hbytes = jb->krow * (uint64_t)jb->nkeys;
    float *s = malloc(sizeof(float) * MAXR * TK), *acc = malloc(sizeof(float) * (size_t)(MAXR * d)), m[MAXR], l[MAXR];
    for (int w = 0; w < 5; w++) {
        jb->best[w] = 1e30;
        for (int rep = 0; rep < jb->reps; rep++) {
            memset(acc, 0, sizeof(float) * (size_t)(nr * d));
            for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0;
            for (int i = 0; i < nr * TK; i++) s[i] = (float)((i * 37) % 64) / 32.0f - 1.0f; /* no shared rng */
            pthread_barrier_wait(jb->bar);
            const double t0 = bench_now();
            for (int h = jb->h0; h < jb->h1; h++) {
                const uint8_t *kh = jb->K + (uint64_t)h * hbytes, *vh = jb->V + (uint64_t)h * hbytes;
                for (int j = 0; j < jb->nkeys; j += TK) {
                    if (w == 0 || w == 3) k->fa_scores[jb->t](d, nr, TK, jb->Q, jb->qrow, kh + (uint64_t)j * jb->krow, jb->krow, s, TK);
                    if (w == 1 || w == 3 || w == 4)
                        jb->sink += softmax_tile(k, w == 4, nr, d, s, w == 3 ? jb->scale : 1.0f, m, l, acc);
                    if (w == 1 || w == 4) /* keep the inputs bounded */
                        for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0;
                    if (w == 2 || w == 3) k->fa_vacc[jb->t](d, nr, TK, s, TK, vh + (uint64_t)j * jb->krow, jb->krow, acc, d, NULL);
                }
            }
            pthread_barrier_wait(jb->bar);
            const double dt = bench_now() - t0;
            jb->best[w] = dt < jb->best[w] ? dt : jb->best[w];
            jb->sink += s[0] + acc[0];
        }
    }
    free(s), free(acc);
    return NULL;
}

int main(int argc, char **argv) {
    const char *isa = NULL, *tname = "q8_0";
    int nr = 8, nkeys = 16384, reps = 7, heads = 24, nth = 1;
    int64_t d = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--isa")) isa = argv[i + 1];
        else if (!strcmp(argv[i], "--type")) tname = argv[i + 1];
        else if (!strcmp(argv[i], "--rows")) nr = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--keys")) nkeys = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim")) d = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--heads")) heads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) nth = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    clb_dtype t;
    const clb_kernels *k = isa ? clb_kernels_by_isa(isa) : clb_kernels_get();
    if (!k || clb_dtype_from_name(tname, &t) || !k->fa_scores[t] || nr < 1 || nr > MAXR || nkeys % TK || nth < 1 ||
        nth > MAXT || nth > heads) {
        fprintf(stderr, "bad --isa, --type, --rows (1..%d), --keys (a multiple of %d) or --threads (1..%d, <= heads)\n",
                MAXR, TK, MAXT);
        return 2;
    }
    const int qt = clb_fa_query_type(t);
    uint64_t krow, qrow;
    if (!clb_row_bytes(t, d, &krow) || !clb_row_bytes(qt, d, &qrow)) return 2;
    const uint64_t hbytes = krow * (uint64_t)nkeys;
    uint8_t *K = malloc(hbytes * (uint64_t)heads), *V = malloc(hbytes * (uint64_t)heads), *Q = malloc(qrow * MAXR);
    float *f = malloc(sizeof(float) * (size_t)d);
    for (int64_t c = 0; c < d; c++) f[c] = bench_rndf();
    for (int64_t j = 0; j < (int64_t)nkeys * heads; j++) { /* varied rows, cheaply */
        f[j % d] = bench_rndf();
        clb_quantize_row_ref(t, f, K + (uint64_t)j * krow, d);
        f[(j * 7) % d] = bench_rndf();
        clb_quantize_row_ref(t, f, V + (uint64_t)j * krow, d);
    }
    for (int r = 0; r < nr; r++) {
        for (int64_t c = 0; c < d; c++) f[c] = bench_rndf();
        clb_quantize_row_ref(qt, f, Q + (uint64_t)r * qrow, d);
    }
    const float scale = 1.0f / sqrtf((float)d);
    const char *what[5] = {"scores", "softmax", "values", "all", "softmax-rowwise"};
    double best[5];
    float sink = 0;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nth);
    job jobs[MAXT];
    pthread_t tid[MAXT];
    for (int i = 0; i < nth; i++) {
        jobs[i] = (job){.k = k, .t = t, .nr = nr, .nkeys = nkeys, .reps = reps, .d = d, .krow = krow, .qrow = qrow,
                        .K = K, .V = V, .Q = Q, .h0 = heads * i / nth, .h1 = heads * (i + 1) / nth, .scale = scale,
                        .bar = &bar};
        if (i && pthread_create(&tid[i], NULL, run_job, &jobs[i])) return 1;
    }
    run_job(&jobs[0]);
    for (int i = 1; i < nth; i++) pthread_join(tid[i], NULL);
    for (int w = 0; w < 5; w++) best[w] = jobs[0].best[w];
    for (int i = 0; i < nth; i++) sink += jobs[i].sink;
    pthread_barrier_destroy(&bar);
    const double pairs = (double)nr * nkeys * heads / nth;
    printf("%s %s d=%lld rows=%d keys=%d heads=%d threads=%d (%.1f MB of K+V):", k->isa, tname, (long long)d, nr, nkeys, heads, nth,
           2.0 * (double)hbytes * heads / 1e6);
    for (int w = 0; w < 5; w++) printf(" %s %.2f", what[w], 1e9 * best[w] / pairs);
    printf(" ns/pair (best of %d)%s\n", reps, sink == 12345.0f ? " " : "");
    free(K), free(V), free(Q), free(f);
    return 0;
}
