/* threadpool.h — a persistent pool of worker threads. clb_pool_run(fn, ctx) runs
   fn(ctx, ith, nth) for every ith in [0, nth) and returns when all are done: the caller runs
   ith 0, worker i runs ith i — unless the caller, done with its own, finds it not started
   yet and runs it itself, so a descheduled worker does not hold up the step. fn must
   therefore not wait for another ith (no barriers inside a task).
   Work is split by the callee (see clb_split). No allocation per run. */
#ifndef CLB_THREADPOOL_H
#define CLB_THREADPOOL_H

#include <stdint.h>

typedef struct clb_pool clb_pool;
typedef void (*clb_task_fn)(void *ctx, int ith, int nth);

/* How a thread waits for work (workers) or for the workers (the caller). */
typedef enum clb_wait_policy {
    CLB_WAIT_HYBRID = 0, /* spin up to spin_us, then sleep (the default) */
    CLB_WAIT_SPIN,       /* spin, never sleep (a dedicated core per thread) */
    CLB_WAIT_FUTEX,      /* sleep at once (on a condition variable: a futex on Linux) */
    CLB_WAIT_YIELD,      /* sched_yield() for spin_us, then sleep (cores shared) */
} clb_wait_policy;

typedef struct clb_pool_opts {
    int wait;        /* clb_wait_policy */
    int spin_us;     /* spin (or yield) limit of HYBRID and YIELD; < 0 = CLB_POOL_SPIN_US */
    const int *cpus; /* NULL, or thread i runs on cpus[i % n_cpus] (i = 0: the creating thread) */
    int n_cpus;
    int rt_priority; /* > 0: SCHED_FIFO at this priority for every thread of the pool */
} clb_pool_opts;
#define CLB_POOL_SPIN_US 3000

/* n_threads >= 1 (1 = no worker threads). NULL on failure. */
clb_pool *clb_pool_create(int n_threads);
/* With options (o may be NULL). What cannot be applied (a CPU not there, SCHED_FIFO not
   permitted) goes to warn (cap bytes, appended) and the pool runs without it. */
clb_pool *clb_pool_create_ex(int n_threads, const clb_pool_opts *o, char *warn, size_t cap);
void clb_pool_free(clb_pool *p);
int clb_pool_size(const clb_pool *p);
void clb_pool_run(clb_pool *p, clb_task_fn fn, void *ctx);

/* Rows [*lo, *hi) of n for thread ith of nth, in chunks that are multiples of `quantum`
   rows (except the last), so threads do not share cache lines of the output. */
void clb_split(int64_t n, int ith, int nth, int64_t quantum, int64_t *lo, int64_t *hi);

#endif
