/* rt.c — CPU lists, pinning, SCHED_FIFO and memory locking (rt.h). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/common.h"
#include "core/rt.h"

static int parse_id(const char **s, long *out) {
    char *end;
    if (**s < '0' || **s > '9') return -1;
    errno = 0;
    *out = strtol(*s, &end, 10);
    if (errno || *out >= CLB_MAX_CPUS) return -1;
    *s = end;
    return 0;
}

int clb_parse_cpus(const char *list, int *cpus, int cap) {
    const char *s = list;
    int n = 0;
    if (!s || !*s) return clb_err(COLIBRI_ERR_ARG, "empty CPU list"), -1;
    for (;;) {
        long a, b;
        if (parse_id(&s, &a)) break;
        b = a;
        if (*s == '-') {
            s++;
            if (parse_id(&s, &b) || b < a) break;
        }
        for (long c = a; c <= b; c++) {
            if (n >= cap) return clb_err(COLIBRI_ERR_ARG, "CPU list '%s' has more than %d CPUs", list, cap), -1;
            cpus[n++] = (int)c;
        }
        if (*s == 0) return n;
        if (*s++ != ',') break;
    }
    clb_err(COLIBRI_ERR_ARG, "CPU list '%s' is not like 0-3,6 (CPU ids below %d)", list, CLB_MAX_CPUS);
    return -1;
}

int clb_pin_self(int cpu) {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#else
    (void)cpu;
    return ENOSYS;
#endif
}

int clb_fifo_self(int prio) {
    struct sched_param sp = {.sched_priority = prio};
    return pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}

void clb_warn_add(char *buf, size_t cap, const char *fmt, ...) {
    size_t k = strlen(buf);
    if (k + 3 >= cap) return;
    if (k) memcpy(buf + k, "; ", 3), k += 2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, cap - k, fmt, ap);
    va_end(ap);
}

int clb_lock_range(const void *p, uint64_t n) {
    if (!p || n == 0) return 0;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)p & ~(pg - 1), b = ((uintptr_t)p + (uintptr_t)n + pg - 1) & ~(pg - 1);
    return mlock((const void *)a, (size_t)(b - a)) ? errno : 0;
}
