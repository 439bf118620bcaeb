/* threadpool.h — a persistent pool of worker threads. clb_pool_run(fn, ctx) runs
   fn(ctx, ith, nth) on every thread (the caller is thread 0) and returns when all are done.
   Work is split by the callee (see clb_split). No allocation per run. */
#ifndef CLB_THREADPOOL_H
#define CLB_THREADPOOL_H

#include <stdint.h>

typedef struct clb_pool clb_pool;
typedef void (*clb_task_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (1 = no worker threads). NULL on failure. */
clb_pool *clb_pool_create(int n_threads);
void clb_pool_free(clb_pool *p);
int clb_pool_size(const clb_pool *p);
void clb_pool_run(clb_pool *p, clb_task_fn fn, void *ctx);

/* Rows [*lo, *hi) of n for thread ith of nth, in chunks that are multiples of `quantum`
   rows (except the last), so threads do not share cache lines of the output. */
void clb_split(int64_t n, int ith, int nth, int64_t quantum, int64_t *lo, int64_t *hi);

#endif
