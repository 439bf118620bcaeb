/* rt_api.h — the real-time settings of colibri_params (docs/REALTIME.md): config keys,
 * checks and the thread pool they describe at init, memory locking after it. */
#ifndef CLB_RT_API_H
#define CLB_RT_API_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "core/rt.h"
#include "core/threadpool.h"
#include "engine.h"

/* A config-file entry: sets *handled when the key is one of cpus, io_cpus, rt_priority,
   mlock, wait_policy, spin_us; errors name the file and key. */
int clb_rt_config_key(const char *path, const cJSON *it, colibri_params *p, bool *handled);
/* Checks the settings, parses the CPU lists (the workers' into cpus[cap], their count in
   *n_cpus; the I/O threads' into e->io_cpus) and fills the pool options. */
int clb_rt_prepare(colibri_engine_t *e, const colibri_params *p, int *cpus, int cap, int *n_cpus, clb_pool_opts *o);
/* mlock of the dense weights, packed copies, KV cache, arena and expert pool (warning when refused). */
void clb_rt_lock(colibri_engine_t *e);

#endif
