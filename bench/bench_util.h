/* bench_util.h — what the benchmark drivers share: a monotonic clock and a fixed-seed
 * xorshift (each driver its own stream, the same numbers from run to run). */
#ifndef CLB_BENCH_UTIL_H
#define CLB_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t bench_rs = 88172645463325252ull;
static inline uint64_t bench_rnd(void) {
    bench_rs ^= bench_rs << 13;
    bench_rs ^= bench_rs >> 7;
    bench_rs ^= bench_rs << 17;
    return bench_rs;
}
/* uniform in [-1, 1) */
static inline float bench_rndf(void) { return (float)((double)(bench_rnd() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

#endif
