/* rt.h — real-time settings of the threads the engine starts: CPU lists, SCHED_FIFO,
 * memory locking. What cannot be applied (no permission, a CPU that is not there) is not
 * an error: it is described in a one-line warning the caller can show (colibri_rt_warning). */
#ifndef CLB_RT_H
#define CLB_RT_H

#include <stddef.h>
#include <stdint.h>

enum { CLB_MAX_CPUS = 1024 };

/* "0-3,6,8-9" -> cpus[0..n); returns n (>= 1) or -1 (message in clb_last_error) for an
   empty, malformed or out-of-range list (CPU ids below CLB_MAX_CPUS). */
int clb_parse_cpus(const char *list, int *cpus, int cap);
/* Pins the calling thread to cpu / the given thread; returns 0 or an errno value. */
int clb_pin_self(int cpu);
/* SCHED_FIFO at prio for the calling thread; 0 or an errno value. */
int clb_fifo_self(int prio);
/* Appends "; msg" (or msg when empty) to a warning buffer. */
void clb_warn_add(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* mlock of [p, p + n) widened to whole pages; 0 or an errno value. n = 0 is fine. */
int clb_lock_range(const void *p, uint64_t n);

#endif
