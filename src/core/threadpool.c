/* threadpool.c — persistent workers woken by a generation counter.
 *
 * A run publishes (fn, ctx), bumps `gen` and wakes the workers; each worker runs its share
 * and decrements `pending`. Waiting spins for a bounded time first, SPIN_NS (the next
 * layer's work usually arrives within microseconds during decoding; on a virtual machine
 * whose vCPUs the host deschedules for a millisecond at a time, a shorter spin put workers
 * to sleep mid-token and the wake-up then cost 50-400 us), then sleeps on a condition
 * variable, so idle engines do not burn CPU.
 *
 * The mutex and the condition variables are only touched when somebody actually sleeps:
 * a sleeper announces itself in `sleepers` (or `main_sleeping`) before its final check,
 * and the waker bumps `gen` (or `pending`) before looking at that count — both sequentially
 * consistent, so at least one of the two sees the other and no wake-up is lost. A dispatch
 * to spinning workers is then one atomic add plus the workers' atomic decrements.
 *
 * Take-over: item i of run g is claimed by moving claim[i] from g - 1 to g (a CAS), by
 * worker i when it wakes or by the caller once its own item is done. Every item of every
 * run gets claimed by someone (the caller tries them all), so claim[i] is g - 1 or g while
 * run g is in flight and a worker that saw an older generation can never claim. On a
 * machine whose cores other processes share, a worker that was descheduled before it
 * started costs the step nothing: the caller computes that share (docs/REALTIME.md). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "core/common.h"
#include "core/rt.h"
#include "core/threadpool.h"

#if defined(__x86_64__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* spin at most spin_ns, reading the clock every SPIN_CHECK pauses */
enum { SPIN_CHECK = 64 };

struct clb_pool;
static inline bool spin_on(const struct clb_pool *p, int *spins, double *t0);

struct worker {
    struct clb_pool *pool;
    int ith;
    pthread_t tid;
};

struct clb_pool {
    int n;
    struct worker *workers;
    clb_task_fn fn;
    void *ctx;
    atomic_uint gen;
    atomic_int pending;
    atomic_int stop;
    atomic_int sleepers;      /* workers blocked (or about to block) on `wake` */
    atomic_int main_sleeping; /* the caller blocked (or about to block) on `done` */
    atomic_uint *claim;       /* [n] generation whose item i was claimed (see the top) */
    int wait;                 /* clb_wait_policy */
    double spin_ns;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
};

/* true while a wait that began at *t0 (0: not begun) may go on spinning (or yielding) */
static inline bool spin_on(const struct clb_pool *p, int *spins, double *t0) {
    if (p->wait == CLB_WAIT_FUTEX) return false;
    if (p->wait == CLB_WAIT_YIELD) sched_yield();
    else CPU_RELAX();
    if (p->wait == CLB_WAIT_SPIN) return true;
    if (++*spins % (p->wait == CLB_WAIT_YIELD ? 1 : SPIN_CHECK)) return true;
    const double t = clb_now();
    if (*t0 == 0) *t0 = t;
    return (t - *t0) * 1e9 < p->spin_ns;
}

/* claims item i of run g; true when the caller of this is to run it */
static inline bool claim(struct clb_pool *p, int i, unsigned g) {
    unsigned want = g - 1;
    return atomic_compare_exchange_strong(&p->claim[i], &want, g);
}

static void finish_item(struct clb_pool *p) {
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->main_sleeping)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct clb_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        double t0 = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (spin_on(p, &spins, &t0)) continue;
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
            t0 = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        if (!claim(p, w->ith, g)) continue; /* the caller took it over */
        p->fn(p->ctx, w->ith, p->n);
        finish_item(p);
    }
}

static void warn_errno(char *warn, size_t cap, const char *what, int err) {
    if (warn && cap) clb_warn_add(warn, cap, "%s: %s", what, strerror(err));
}

clb_pool *clb_pool_create(int n_threads) { return clb_pool_create_ex(n_threads, NULL, NULL, 0); }

clb_pool *clb_pool_create_ex(int n_threads, const clb_pool_opts *o, char *warn, size_t cap) {
    if (n_threads < 1) n_threads = 1;
    clb_pool *p = clb_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    p->wait = o ? o->wait : CLB_WAIT_HYBRID;
    p->spin_ns = (o && o->spin_us >= 0 ? o->spin_us : CLB_POOL_SPIN_US) * 1e3;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->workers = clb_calloc((size_t)n_threads, sizeof *p->workers);
    p->claim = clb_calloc((size_t)n_threads, sizeof *p->claim);
    if (!p->workers || !p->claim) {
        p->n = 1;
        clb_pool_free(p);
        return NULL;
    }
    const bool pin = o && o->cpus && o->n_cpus > 0;
    int pin_err = 0, rt_err = 0;
    if (pin) pin_err = clb_pin_self(o->cpus[0]);
    if (o && o->rt_priority > 0) rt_err = clb_fifo_self(o->rt_priority);
    for (int i = 1; i < n_threads; i++) {
        p->workers[i].pool = p;
        p->workers[i].ith = i;
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]) != 0) {
            p->n = i; /* run with the threads we got */
            break;
        }
#if defined(__linux__)
        if (pin) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(o->cpus[i % o->n_cpus], &set);
            int r = pthread_setaffinity_np(p->workers[i].tid, sizeof set, &set);
            if (r && !pin_err) pin_err = r;
        }
#endif
        if (o && o->rt_priority > 0 && !rt_err) {
            struct sched_param sp = {.sched_priority = o->rt_priority};
            rt_err = pthread_setschedparam(p->workers[i].tid, SCHED_FIFO, &sp);
        }
    }
    if (pin_err) warn_errno(warn, cap, "cannot pin the threads to the CPU list", pin_err);
    if (rt_err && warn && cap)
        clb_warn_add(warn, cap, "SCHED_FIFO priority %d refused (%s; needs CAP_SYS_NICE or RLIMIT_RTPRIO >= %d): normal scheduling",
                     o->rt_priority, strerror(rt_err), o->rt_priority);
    if (rt_err) { /* all or none: the threads already switched go back */
        struct sched_param sp = {.sched_priority = 0};
        pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
        for (int i = 1; i < p->n; i++) pthread_setschedparam(p->workers[i].tid, SCHED_OTHER, &sp);
    }
    return p;
}

void clb_pool_free(clb_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    if (p->workers)
        for (int i = 1; i < p->n; i++) pthread_join(p->workers[i].tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    clb_free(p->workers);
    clb_free(p->claim);
    clb_free(p);
}

int clb_pool_size(const clb_pool *p) { return p ? p->n : 1; }

void clb_pool_run(clb_pool *p, clb_task_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    const unsigned g = atomic_fetch_add(&p->gen, 1) + 1;
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    for (int i = 1; i < p->n; i++) /* the items no worker has started */
        if (claim(p, i, g)) {
            fn(ctx, i, p->n);
            atomic_fetch_sub(&p->pending, 1);
        }
    int spins = 0;
    double t0 = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        if (spin_on(p, &spins, &t0)) continue;
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->main_sleeping, 1);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->main_sleeping, 0);
        pthread_mutex_unlock(&p->mu);
    }
}

void clb_split(int64_t n, int ith, int nth, int64_t quantum, int64_t *lo, int64_t *hi) {
    if (quantum < 1) quantum = 1;
    int64_t chunks = (n + quantum - 1) / quantum;
    int64_t per = chunks / nth, rem = chunks % nth;
    int64_t c0 = ith * per + (ith < rem ? ith : rem);
    int64_t c1 = c0 + per + (ith < rem ? 1 : 0);
    *lo = c0 * quantum;
    *hi = c1 * quantum;
    if (*lo > n) *lo = n;
    if (*hi > n) *hi = n;
}
