/* stream.c — STREAM-like read bandwidth probe: sums a buffer much larger than the caches
 * (default 1 GiB) with 1..T threads, each thread reading its own contiguous slice, and
 * prints the median GB/s over repeats (1 GB = 1e9 bytes).
 *
 *   bench/stream [--mib 1024] [--threads 2] [--reps 7] [--json]
 *
 * The read-only sum is what decode does with weights (every byte read once per token),
 * so this is the bound that "achieved GB/s" at decode is compared with. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

typedef struct {
    const uint64_t *p;
    size_t n; /* uint64 words */
    uint64_t sum;
    pthread_barrier_t *bar;
    double t0, t1;
} slice;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t sum_words(const uint64_t *p, size_t n) {
#if defined(__AVX2__)
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 12)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, a0);
    uint64_t s = t[0] + t[1] + t[2] + t[3];
    for (; i < n; i++) s += p[i];
    return s;
#else
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; i++) s0 += p[i];
    return s0 + s1 + s2 + s3;
#endif
}

static void *run(void *arg) {
    slice *s = arg;
    pthread_barrier_wait(s->bar);
    s->t0 = now();
    s->sum = sum_words(s->p, s->n);
    s->t1 = now();
    return NULL;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t mib = 1024;
    int max_threads = 2, reps = 7, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: stream [--mib N] [--threads T] [--reps R] [--json]\n");
            return 2;
        }
    }
    if (mib < 1 || max_threads < 1 || max_threads > 256 || reps < 1 || reps > 1000) {
        fprintf(stderr, "stream: bad arguments\n");
        return 2;
    }
    const size_t bytes = mib << 20, words = bytes / 8;
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf) {
        fprintf(stderr, "stream: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < words; i++) buf[i] = i * 0x9e3779b97f4a7c15ull; /* touch every page */
    double *gbs = malloc(sizeof(double) * (size_t)reps);
    uint64_t check = 0;
    if (json) printf("{\"buffer_mib\":%zu,\"results\":[", mib);
    for (int t = 1; t <= max_threads; t++) {
        pthread_t tid[256];
        slice sl[256];
        pthread_barrier_t bar;
        for (int r = 0; r < reps; r++) {
            pthread_barrier_init(&bar, NULL, (unsigned)t);
            size_t per = (words / (size_t)t) & ~(size_t)15;
            for (int k = 0; k < t; k++) {
                sl[k] = (slice){.p = buf + per * (size_t)k, .n = k == t - 1 ? words - per * (size_t)k : per, .bar = &bar};
                if (k) pthread_create(&tid[k], NULL, run, &sl[k]);
            }
            run(&sl[0]);
            for (int k = 1; k < t; k++) pthread_join(tid[k], NULL);
            pthread_barrier_destroy(&bar);
            double t0 = sl[0].t0, t1 = sl[0].t1;
            for (int k = 0; k < t; k++) {
                if (sl[k].t0 < t0) t0 = sl[k].t0;
                if (sl[k].t1 > t1) t1 = sl[k].t1;
                check += sl[k].sum;
            }
            gbs[r] = (double)bytes / (t1 - t0) / 1e9;
        }
        qsort(gbs, (size_t)reps, sizeof *gbs, cmp_d);
        double med = gbs[reps / 2];
        if (json) printf("%s{\"threads\":%d,\"gb_s\":%.2f,\"min\":%.2f,\"max\":%.2f}", t > 1 ? "," : "", t, med, gbs[0], gbs[reps - 1]);
        else printf("threads %d: %.2f GB/s read (median of %d; min %.2f, max %.2f; %zu MiB buffer)\n", t, med, reps, gbs[0], gbs[reps - 1], mib);
    }
    if (json) printf("],\"check\":%llu}\n", (unsigned long long)(check & 0xff));
    free(gbs);
    free(buf);
    return 0;
}
