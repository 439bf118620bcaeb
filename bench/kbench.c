/* kbench.c — micro-benchmarks of the compute kernels and the thread pool (internal API).
 *
 *   bench/kbench [--isa NAME] [--cols 4096] [--rows 1024] [--tok 1] [--threads 2] [--packed]
 *
 * For each weight type: the single-row dot product (vec_dot) on a cache-resident matrix
 * (compute bound: ns per 32-weight block) and on a matrix much larger than the caches
 * (memory bound: GB/s of weights), and the parallel matrix product clb_matmul at n_tok
 * tokens. With --packed the matrix products run on weights interleaved as the loader places
 * them for the table's packed kernels (the types it packs; others as they are). Then the
 * pool's cost per dispatch of an empty task (µs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/threadpool.h"
#include "kernels/kernels.h"
#include "nn/ops.h"
#include "bench_util.h"

static void fill_weights(int dt, int64_t cols, int64_t rows, uint8_t *w) {
    float *f = malloc(sizeof(float) * (size_t)cols);
    uint64_t rb;
    clb_row_bytes(dt, cols, &rb);
    if (clb_dtype_can_quantize(dt)) {
        for (int64_t c = 0; c < cols; c++) f[c] = bench_rndf() * 0.05f;
        clb_quantize_row_ref(dt, f, w, cols); /* one quantized row, then random copies */
        for (int64_t r = 1; r < rows; r++) memcpy(w + r * rb, w, rb);
        for (uint64_t i = 0; i < rb * (uint64_t)rows; i += 7) w[i] ^= (uint8_t)(bench_rnd() & 0x0f) << 4;
    } else {
        for (uint64_t i = 0; i < rb * (uint64_t)rows; i++) w[i] = (uint8_t)bench_rnd();
    }
    /* sane fp16 scales for the K-quant super-block header (Q4_K: d, dmin first) */
    if (dt == CLB_DT_Q4_K)
        for (uint64_t b = 0; b < rb * (uint64_t)rows; b += 144) {
            uint16_t h = clb_fp32_to_fp16(0.01f);
            memcpy(w + b, &h, 2);
            memcpy(w + b + 2, &h, 2);
        }
    free(f);
}

static void noop(void *ctx, int ith, int nth) {
    (void)ctx, (void)ith, (void)nth;
}

int main(int argc, char **argv) {
    const char *isa = NULL;
    int64_t cols = 4096, rows = 1024;
    int threads = 2, tok = 1, packed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atol(argv[++i]);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tok") && i + 1 < argc) tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--packed")) packed = 1;
        else {
            fprintf(stderr, "usage: kbench [--isa NAME] [--cols N] [--rows N] [--tok N] [--threads N] [--packed]\n");
            return 2;
        }
    }
    const clb_kernels *k = isa ? clb_kernels_by_isa(isa) : clb_kernels_get();
    if (!k || cols % 256 || rows < 16 || tok < 1 || tok > 512 || threads < 1) {
        fprintf(stderr, "kbench: bad arguments or ISA not available\n");
        return 2;
    }
    printf("isa %s, cols %lld, threads %d%s\n", k->isa, (long long)cols, threads, packed ? ", packed weights" : "");
    clb_pool *pool = clb_pool_create(threads);
    const int dts[] = {CLB_DT_Q4_0, CLB_DT_Q8_0, CLB_DT_Q4_K, CLB_DT_Q5_K, CLB_DT_Q6_K, CLB_DT_IQ4_NL, CLB_DT_MXFP4};
    float *x = malloc(sizeof(float) * (size_t)(cols * tok));
    for (int64_t i = 0; i < cols * tok; i++) x[i] = bench_rndf();
    float *y = malloc(sizeof(float) * (size_t)(rows * tok) * 64);
    for (size_t d = 0; d < CLB_ARRAY_LEN(dts); d++) {
        const int dt = dts[d];
        const clb_type_info *ti = clb_type(dt);
        uint64_t rb, xb;
        clb_row_bytes(dt, cols, &rb);
        clb_row_bytes(ti->vec_dot_type, cols, &xb);
        const int64_t big_rows = (int64_t)((512ull << 20) / rb); /* 512 MiB of weights */
        uint8_t *w = malloc(rb * (uint64_t)big_rows);
        fill_weights(dt, cols, big_rows, w);
        uint8_t *xq = malloc(xb + 64);
        k->quantize[ti->vec_dot_type](x, xq, cols);
        /* 1. compute bound: 64 rows (L2-resident) many times */
        const int64_t small = 64, nb32 = cols / 32;
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = bench_now();
            for (int it = 0; it < 200; it++)
                for (int64_t r = 0; r < small; r++) k->vec_dot[dt](cols, &y[r], w + r * rb, xq);
            double dtm = (bench_now() - t0) / (200.0 * (double)small * (double)nb32);
            if (dtm < best) best = dtm;
        }
        /* 2. memory bound: matmul over the whole 512 MiB, n_tok = 1 and tok */
        clb_weight W = {0};
        W.dtype = dt;
        W.rows = big_rows;
        W.cols = cols;
        W.row_bytes = rb;
        W.data = w;
        if (packed && clb_kernels_pack_rows(k, dt, cols, big_rows) > 0) {
            void *scratch = malloc(clb_pack_scratch_bytes(dt, cols));
            W.packed_rows = clb_pack_rows(dt, cols, big_rows, w, scratch);
            W.interleaved = true;
            free(scratch);
        }
        clb_mm_ctx mm = {.pool = pool, .k = k};
        mm.qbuf_bytes = clb_matmul_qbuf_bytes(cols, tok);
        mm.qbuf = clb_malloc(mm.qbuf_bytes);
        float *yb = malloc(sizeof(float) * (size_t)big_rows * (size_t)tok);
        double mm1 = 1e9, mmt = 1e9;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = bench_now();
            clb_matmul(&mm, &W, x, cols, 1, yb, big_rows);
            double t = bench_now() - t0;
            if (t < mm1) mm1 = t;
        }
        const int64_t trows = big_rows / 16; /* batch: 32 MiB of weights */
        W.rows = trows;
        W.packed_rows = W.packed_rows < trows ? W.packed_rows : trows;
        for (int rep = 0; rep < 3 && tok > 1; rep++) {
            double t0 = bench_now();
            clb_matmul(&mm, &W, x, cols, tok, yb, trows);
            double t = bench_now() - t0;
            if (t < mmt) mmt = t;
        }
        printf("%-5s%s vec_dot %.2f ns/32 weights (%.1f GB/s/thread in cache) | matmul n_tok=1 %.1f GB/s",
               ti->name, W.interleaved ? " (packed)" : "", best * 1e9, (double)rb / (double)nb32 / best / 1e9, (double)rb * (double)big_rows / mm1 / 1e9);
        if (tok > 1)
            printf(" | n_tok=%d %.1f tok/s per 1 GiB of weights (%.1f GMAC/s)", tok,
                   (double)tok / (mmt * (1073741824.0 / ((double)rb * (double)trows))),
                   (double)tok * (double)trows * (double)cols / mmt / 1e9);
        printf("\n");
        clb_free(mm.qbuf);
        free(yb);
        free(xq);
        free(w);
    }
    /* 3. dispatch overhead */
    for (int rep = 0; rep < 3; rep++) {
        const int n = 20000;
        double t0 = bench_now();
        for (int i = 0; i < n; i++) clb_pool_run(pool, noop, NULL);
        printf("pool dispatch (empty task, %d threads): %.2f us\n", threads, (bench_now() - t0) / n * 1e6);
    }
    clb_pool_free(pool);
    free(x);
    free(y);
    return 0;
}
