/* mem_api.h — the public side of the expert memory hierarchy: run-time settings (config
 * keys, environment), budget accounting at init, statistics (called from api.c). */
#ifndef CLB_MEM_API_H
#define CLB_MEM_API_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "colibri.h"

#define CLB_DEFAULT_POOL_BYTES ((uint64_t)512 << 20)
#define CLB_DEFAULT_IO_THREADS 4

/* A config-file entry: sets *handled when the key is one of the memory settings
   (mem_budget, expert_pool, cache_policy, prefetch, direct_io, io_threads, usage_stats);
   errors name the file and key. */
int clb_mem_config_key(const char *path, const cJSON *it, colibri_params *p, bool *handled);
/* "auto", "on"/"direct", "off"/"buffered", "dontneed" -> colibri_read_path_mode; -2 otherwise. */
int clb_mem_parse_read_path(const char *s);
/* Parses "123", "512MiB", "1.5G", "64k" (powers of 1024) into bytes. */
bool clb_mem_parse_size(const char *s, uint64_t *out);
/* Sizes the expert pool from the budget (what dense weights, KV cache and arena leave) or
   COLIBRI_PAGE_POOL_SIZE, and configures the model's expert store. kv_bytes: both caches. */
int clb_mem_init(colibri_engine_t *e, const char *model_path, const colibri_params *p, uint64_t kv_bytes);
/* Fills the memory-hierarchy fields of s. */
void clb_mem_stats(colibri_engine_t *e, colibri_stats_t *s);

#endif
