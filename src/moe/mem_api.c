/* mem_api.c — settings, budget accounting and statistics of the expert memory hierarchy
 * (docs/MEMORY.md). The budget covers what Colibri allocates or maps per model:
 *     dense weights (read through the file mapping) + KV cache + activation arena + pool
 * and the pool gets the rest. Code, libraries, thread stacks and the tensor table are the
 * fixed overhead documented next to the measurements. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/common.h"
#include "core/platform.h"
#include "core/rt.h"
#include "engine.h"
#include "moe/mem_api.h"

bool clb_mem_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || v > 1e18) return false;
    double mul = 1;
    if (*end) {
        const char c = (char)(*end | 0x20);
        mul = c == 'k' ? 1024.0 : c == 'm' ? 1048576.0 : c == 'g' ? 1073741824.0 : c == 't' ? 1099511627776.0 : 0;
        if (mul == 0 && c != 'b') return false;
        if (c == 'b') mul = 1;
        end++;
        if (mul > 1 && (!strcmp(end, "iB") || !strcmp(end, "ib") || !strcmp(end, "B") || !strcmp(end, "b")))
            end += strlen(end);
        if (*end) return false;
    }
    double b = v * mul;
    if (b > 1.8e19) return false;
    *out = (uint64_t)b;
    return true;
}

int clb_mem_parse_read_path(const char *s) {
    if (!strcmp(s, "auto")) return COLIBRI_READ_AUTO;
    if (!strcmp(s, "on") || !strcmp(s, "direct")) return COLIBRI_READ_DIRECT;
    if (!strcmp(s, "off") || !strcmp(s, "buffered")) return COLIBRI_READ_BUFFERED;
    if (!strcmp(s, "dontneed")) return COLIBRI_READ_DONTNEED;
    return -2;
}

const char *colibri_read_path_name(int path) {
    switch (path) {
    case COLIBRI_PATH_MMAP: return "mmap (no pool)";
    case COLIBRI_PATH_DIRECT: return "O_DIRECT";
    case COLIBRI_PATH_DONTNEED: return "pread + POSIX_FADV_DONTNEED";
    case COLIBRI_PATH_MIXED: return "O_DIRECT (pread + POSIX_FADV_DONTNEED where refused)";
    case COLIBRI_PATH_BUFFERED: return "buffered pread (page cache kept)";
    case COLIBRI_PATH_SOURCE: return "the caller's read callback";
    default: return "?";
    }
}

/* With a pool: mlock of the dense weights the engine reads from the file mapping (the part
   of a budget that is not the pool): a cgroup that counts the page cache reclaims those
   pages first otherwise, and every token would fault them back in. Best effort:
   RLIMIT_MEMLOCK may refuse it, which only costs speed. The file pages of dense weights the
   loader packed into its own copy are handed back (they would only count against a cap).
   Returns the bytes locked. */
static uint64_t lock_dense(colibri_engine_t *e) {
    const clb_model *m = e->model;
    uint64_t bytes = 0, refused = 0;
    int err = 0;
    for (int i = 0; i < m->src.n_tensors; i++) {
        const clb_src_tensor *t = &m->src.tensors[i];
        if (t->expert >= 0 || !t->data || !t->size || t->fd < 0) continue;
        if (t->copied) { /* packed into the loader's copy: the file's pages are not needed again */
            (void)posix_fadvise(t->fd, (off_t)t->file_offset, (off_t)t->size, POSIX_FADV_DONTNEED);
            continue;
        }
        /* exactly these bytes read ahead (a fault's read-around would bring experts in with
           them), and no read-around for later faults on them either */
        (void)posix_fadvise(t->fd, (off_t)t->file_offset, (off_t)t->size, POSIX_FADV_WILLNEED);
        const uintptr_t a0 = (uintptr_t)t->data & ~(uintptr_t)4095;
        (void)madvise((void *)a0, (size_t)((uintptr_t)t->data + t->size - a0), MADV_RANDOM);
    }
    for (int i = 0; i < m->src.n_tensors; i++) {
        const clb_src_tensor *t = &m->src.tensors[i];
        if (t->expert >= 0 || !t->data || t->copied || !t->size || t->fd < 0) continue;
        const int r = clb_lock_range(t->data, t->size);
        if (r) {
            refused += t->size;
            if (!err) err = r;
        } else {
            bytes += t->size;
        }
    }
    if (err)
        clb_log(CLB_LOG_INFO, "dense weights: mlock of %llu bytes refused (%s); they stay unlocked",
                (unsigned long long)refused, strerror(err));
    return bytes;
}

static int parse_policy(const char *s) {
    if (!strcmp(s, "lru")) return COLIBRI_CACHE_LRU;
    if (!strcmp(s, "lfu")) return COLIBRI_CACHE_LFU;
    if (!strcmp(s, "pinned")) return COLIBRI_CACHE_PINNED;
    return -1;
}

int clb_mem_config_key(const char *path, const cJSON *it, colibri_params *p, bool *handled) {
    const char *k = it->string;
    *handled = true;
    if (!strcmp(k, "mem_budget") || !strcmp(k, "expert_pool")) {
        uint64_t v = 0;
        bool ok = cJSON_IsString(it) ? clb_mem_parse_size(it->valuestring, &v)
                                     : cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble < 1.8e19;
        if (cJSON_IsNumber(it) && ok) v = (uint64_t)it->valuedouble;
        if (!ok) return clb_err(COLIBRI_ERR_ARG, "%s: '%s' must be a size in bytes (e.g. 1610612736 or \"1.5GiB\")", path, k);
        if (k[0] == 'm') p->mem_budget = v;
        else p->expert_pool_bytes = v;
        return COLIBRI_OK;
    }
    if (!strcmp(k, "cache_policy")) {
        int pol = cJSON_IsString(it) ? parse_policy(it->valuestring) : -1;
        if (pol < 0) return clb_err(COLIBRI_ERR_ARG, "%s: 'cache_policy' must be \"lru\", \"lfu\" or \"pinned\"", path);
        p->cache_policy = pol;
        return COLIBRI_OK;
    }
    if (!strcmp(k, "direct_io") && cJSON_IsString(it)) {
        const int m = clb_mem_parse_read_path(it->valuestring);
        if (m < -1) return clb_err(COLIBRI_ERR_ARG, "%s: 'direct_io' must be true, false, \"auto\" or \"dontneed\"", path);
        p->direct_io = m;
        return COLIBRI_OK;
    }
    if (!strcmp(k, "prefetch") || !strcmp(k, "direct_io") || !strcmp(k, "usage_stats")) {
        if (!cJSON_IsBool(it) && !(cJSON_IsNumber(it) && (it->valuedouble == 0 || it->valuedouble == 1)))
            return clb_err(COLIBRI_ERR_ARG, "%s: '%s' must be true or false", path, k);
        bool on = cJSON_IsTrue(it) || (cJSON_IsNumber(it) && it->valuedouble == 1);
        if (k[0] == 'p') p->prefetch = on ? 1 : -1;
        else if (k[0] == 'd') p->direct_io = on ? COLIBRI_READ_DIRECT : COLIBRI_READ_BUFFERED;
        else p->usage_stats = on;
        return COLIBRI_OK;
    }
    if (!strcmp(k, "io_threads")) {
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble <= 64) ||
            it->valuedouble != (double)(int)it->valuedouble)
            return clb_err(COLIBRI_ERR_ARG, "%s: 'io_threads' must be an integer in 0..64", path);
        p->io_threads = (int)it->valuedouble;
        return COLIBRI_OK;
    }
    *handled = false;
    return COLIBRI_OK;
}

static char *usage_path_for(const char *model_path) {
    size_t n = strlen(model_path);
    char *out;
    if (clb_is_dir(model_path)) return clb_path_join(model_path, "colibri.usage");
    out = clb_malloc(n + 8);
    if (out) snprintf(out, n + 8, "%s.usage", model_path);
    return out;
}

int clb_mem_init(colibri_engine_t *e, const char *model_path, const colibri_params *p, uint64_t kv_bytes) {
    clb_model *m = e->model;
    if (p->cache_policy < 0 || p->cache_policy > COLIBRI_CACHE_PINNED)
        return clb_err(COLIBRI_ERR_ARG, "unknown cache policy %d", p->cache_policy);
    if (p->io_threads < 0 || p->io_threads > 64) return clb_err(COLIBRI_ERR_ARG, "io_threads %d not in 0..64", p->io_threads);
    if (p->direct_io < COLIBRI_READ_BUFFERED || p->direct_io > COLIBRI_READ_DONTNEED)
        return clb_err(COLIBRI_ERR_ARG, "direct_io %d not in -1..2 (buffered, auto, O_DIRECT, dontneed)", p->direct_io);
    uint64_t pool = p->expert_pool_bytes;
    const char *env = getenv("COLIBRI_PAGE_POOL_SIZE");
    if (env && *env && !clb_mem_parse_size(env, &pool))
        return clb_err(COLIBRI_ERR_ARG, "COLIBRI_PAGE_POOL_SIZE='%s' is not a size (e.g. 512MiB)", env);
    const int io_threads = p->io_threads > 0 ? p->io_threads : CLB_DEFAULT_IO_THREADS;
    e->mem_accounted = m->dense_bytes + kv_bytes + e->arena.size;
    /* an encoded file's experts pass through the decoders' buffers on their way to the pool */
    if (p->mem_budget > 0) e->mem_accounted += clb_store_decoder_bytes(&m->src, io_threads);
    if (p->mem_budget > 0 && pool == 0) {
        if (p->mem_budget <= e->mem_accounted)
            return clb_err(COLIBRI_ERR_ARG,
                           "%s: a memory budget of %llu bytes does not cover the dense weights, KV cache, "
                           "arena and decoder buffers (%llu bytes)",
                           model_path, (unsigned long long)p->mem_budget, (unsigned long long)e->mem_accounted);
        pool = p->mem_budget - e->mem_accounted;
    } else if (p->mem_budget > 0 && pool + e->mem_accounted > p->mem_budget) {
        return clb_err(COLIBRI_ERR_ARG,
                       "%s: an expert pool of %llu bytes plus %llu bytes of dense weights, KV cache, arena and "
                       "decoder buffers exceeds the memory budget of %llu bytes",
                       model_path, (unsigned long long)pool, (unsigned long long)e->mem_accounted,
                       (unsigned long long)p->mem_budget);
    }
    if (pool == 0 && p->direct_io > 0) pool = CLB_DEFAULT_POOL_BYTES; /* an explicit read path needs a pool */
    const char *g = getenv("COLIBRI_GUARD");
    clb_store_cfg cfg = {
        .pool_bytes = pool,
        .policy = p->cache_policy,
        .prefetch = p->prefetch >= 0,
        /* auto: a pool keeps the page cache out of the way (a cap that counts it would
           otherwise take from the pool what the reads leave there) */
        .direct_io = p->direct_io == COLIBRI_READ_AUTO || p->direct_io == COLIBRI_READ_DIRECT,
        .drop_cache = p->direct_io != COLIBRI_READ_BUFFERED,
        .direct_quiet = p->direct_io == COLIBRI_READ_AUTO,
        .io_threads = io_threads,
        .guard = g && *g && strcmp(g, "0") != 0 && !e->embedded, /* no mprotect on a caller's memory */
        .pack = e->pack_k,
        .interleave = e->pack_interleave,
        .io_cpus = e->n_io_cpus > 0 ? e->io_cpus : NULL,
        .n_io_cpus = e->n_io_cpus,
        .owner = e->xp_on ? e->xp_owner : NULL, /* expert parallelism: this rank's share only */
        .rank = e->xp_on ? e->xp.rank : 0,
    };
    char *usage = NULL;
    if (p->usage_stats) {
        usage = usage_path_for(model_path);
        if (!usage) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        cfg.usage_path = usage;
    }
    int rc = clb_store_configure(m->store, &m->src, &cfg);
    clb_free(usage);
    if (rc) return rc;
    clb_store_info info;
    clb_store_get_info(m->store, &info);
    /* lookahead: always with a pool (unless off), in the mapping mode only when asked */
    e->lookahead = m->hp->n_expert > 0 && (info.bounded ? p->prefetch >= 0 : p->prefetch > 0);
    e->la_layer = -1;
    /* a caller's memory (colibri_init_ex) is the caller's to lock */
    e->dense_locked = info.bounded && !e->embedded ? lock_dense(e) : 0;
    if (info.bounded)
        clb_log(CLB_LOG_INFO, "expert pool: %d slots of %llu bytes, reads: %s; dense weights: %llu bytes locked",
                info.n_slots, (unsigned long long)info.slot_bytes, colibri_read_path_name(info.read_path),
                (unsigned long long)e->dense_locked);
    return COLIBRI_OK;
}

/* Layer l's store statistics: its FFN experts' and, with attention experts or stand-ins,
   theirs too (a sub-layer the model lacks has zeros). */
static void layer_stats(clb_expert_store *st, const clb_hparams *hp, int l, clb_store_layer_stats *out) {
    clb_store_layer_stats_get(st, l, out);
    for (int sub = CLB_SUB_ATTN; sub <= CLB_SUB_STANDIN; sub++) {
        clb_store_layer_stats a;
        clb_store_layer_stats_get(st, clb_store_key(hp->n_layer, l, sub), &a);
        out->hits += a.hits, out->misses += a.misses, out->bytes_read += a.bytes_read, out->evictions += a.evictions;
        out->prefetch_issued += a.prefetch_issued, out->prefetch_used += a.prefetch_used, out->stall_s += a.stall_s;
    }
}

void clb_mem_stats(colibri_engine_t *e, colibri_stats_t *s) {
    clb_expert_store *st = e->model->store;
    clb_store_info info;
    clb_store_get_info(st, &info);
    s->cache_policy = info.policy;
    s->expert_pool_slots = info.bounded ? info.n_slots : 0;
    s->expert_pool_bytes = info.bounded ? info.pool_bytes : 0;
    s->mem_accounted_bytes = e->mem_accounted;
    s->expert_read_path = info.read_path;
    s->dense_locked_bytes = e->dense_locked;
    s->moe_experts_dropped = e->n_dropped;
    s->moe_standins_used = e->n_standin;
    s->prefetch_issued = s->prefetch_used = s->lookahead_true = s->lookahead_hit = 0;
    s->expert_hits_total = s->expert_misses_total = s->expert_bytes_read_total = s->expert_evictions_total = 0;
    s->expert_stall_s_total = 0;
    for (int l = 0; l < e->hp->n_layer; l++) {
        clb_store_layer_stats ls;
        layer_stats(st, e->hp, l, &ls);
        if (l < COLIBRI_STATS_MAX_LAYERS) {
            s->expert_hits[l] = ls.hits;
            s->expert_misses[l] = ls.misses;
            s->expert_bytes_read[l] = ls.bytes_read;
            s->expert_evictions[l] = ls.evictions;
            s->expert_stall_s[l] = ls.stall_s;
        }
        s->expert_hits_total += ls.hits;
        s->expert_misses_total += ls.misses;
        s->expert_bytes_read_total += ls.bytes_read;
        s->expert_evictions_total += ls.evictions;
        s->expert_stall_s_total += ls.stall_s;
        s->prefetch_issued += ls.prefetch_issued;
        s->prefetch_used += ls.prefetch_used;
        s->lookahead_true += ls.la_true;
        s->lookahead_hit += ls.la_hit;
    }
}

int colibri_set_cache_policy(colibri_engine_t *e, int32_t policy) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (policy < 0 || policy > COLIBRI_CACHE_PINNED) return clb_err(COLIBRI_ERR_ARG, "unknown cache policy %d", policy);
    return clb_store_set_policy(e->model->store, policy);
}
