/* rt_opts.h — the real-time options shared by `colibri run`, `chat` and `bench`
 * (docs/REALTIME.md). Header-only, like mem_opts.h. */
#ifndef CLB_CLI_RT_OPTS_H
#define CLB_CLI_RT_OPTS_H

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"

#define RT_OPTS_HELP                                                                               \
    "  --cpus LIST           pin the worker threads to these CPUs (e.g. 0-3,6; the main thread\n"  \
    "                        takes the first); --threads defaults to the list's length\n"         \
    "  --io-cpus LIST        pin the expert I/O threads to these CPUs\n"                          \
    "  --rt-priority N       SCHED_FIFO priority 1..99 for the threads (warns when refused)\n"    \
    "  --mlock               lock dense weights, expert pool, KV cache and arena in RAM\n"        \
    "  --wait-policy P       hybrid (spin, then sleep; default), spin, futex (sleep at once),\n"  \
    "                        yield (sched_yield, then sleep: best when the cores are shared)\n"   \
    "  --spin-us N           how long hybrid / yield spin before sleeping (default 3000)\n"

/* Returns 1 when argv[*i] was a real-time option (consumed), 0 when not, -1 on a bad value. */
static inline int rt_opts_parse(colibri_params *p, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val;
    long v;
    if (!strcmp(a, "--mlock")) return p->mlock = 1, 1;
    if (strcmp(a, "--cpus") && strcmp(a, "--io-cpus") && strcmp(a, "--rt-priority") && strcmp(a, "--wait-policy") &&
        strcmp(a, "--spin-us"))
        return 0;
    if (!(val = cli_value(argc, argv, i))) return -1;
    if (!strcmp(a, "--cpus") || !strcmp(a, "--io-cpus")) {
        char *dst = a[2] == 'c' ? p->cpus : p->io_cpus;
        size_t n = strlen(val);
        if (n == 0 || n >= sizeof p->cpus || strspn(val, "0123456789,-") != n)
            return cli_fail("%s: '%s' is not a CPU list (e.g. 0-3,6)", a, val), -1;
        memcpy(dst, val, n + 1); /* init checks the list itself */
    } else if (!strcmp(a, "--rt-priority")) {
        if (!cli_int(val, 1, 99, &v)) return cli_fail("--rt-priority: '%s' is not in 1..99", val), -1;
        p->rt_priority = (int)v;
    } else if (!strcmp(a, "--wait-policy")) {
        const int w = colibri_wait_policy_from_name(val);
        if (w < 0) return cli_fail("--wait-policy: '%s' is not hybrid, spin, futex or yield", val), -1;
        p->wait_policy = w;
    } else {
        if (!cli_int(val, 0, 10000000, &v)) return cli_fail("--spin-us: '%s' is not in 0..10000000", val), -1;
        p->spin_us = v == 0 ? -1 : (int)v;
    }
    return 1;
}

/* The one-line warning about what init could not apply (nothing when all was). */
static inline void rt_opts_report(const colibri_engine_t *e) {
    const char *w = colibri_rt_warning(e);
    if (w && *w) fprintf(stderr, "colibri: warning: %s\n", w);
}

#endif
