/* mem_opts.h — the expert-memory-hierarchy options shared by `colibri run`, `bench` and
 * `perplexity` (docs/MEMORY.md). Header-only so each subcommand stays self-contained. */
#ifndef CLB_CLI_MEM_OPTS_H
#define CLB_CLI_MEM_OPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"

#define MEM_OPTS_HELP                                                                              \
    "  --mem-budget SIZE     memory budget (e.g. 1.5GiB): dense weights + KV cache + arena +\n"    \
    "                        expert pool; experts are read into the pool, never mapped\n"          \
    "  --expert-pool SIZE    expert pool alone (env COLIBRI_PAGE_POOL_SIZE)\n"                     \
    "  --cache-policy P      lru (default), lfu or pinned\n"                                       \
    "  --prefetch on|off     batch union + router lookahead prefetch (default on)\n"               \
    "  --direct-io [M]       pool reads: auto (default), on, dontneed, off (= --buffered-io)\n"  \
    "  --io-threads N        expert I/O threads (default 4)\n"                                     \
    "  --moe-miss-drop W     drop absent experts of weight < W\n"                                  \
    "  --moe-standin W       compute absent experts of weight < W with their stand-ins\n"         \
    "  --usage-stats         keep routing counts in MODEL.usage (teaches the pinned policy)\n"

/* Returns 1 when argv[*i] was a memory option (consumed), 0 when not, -1 on a bad value. */
static inline int mem_opts_parse(colibri_params *p, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val;
    uint64_t sz;
    long v;
    if (!strcmp(a, "--buffered-io")) return p->direct_io = COLIBRI_READ_BUFFERED, 1;
    if (!strcmp(a, "--direct-io")) { /* the bare flag (O_DIRECT) or one of the modes */
        const char *m = *i + 1 < argc ? argv[*i + 1] : "";
        p->direct_io = COLIBRI_READ_DIRECT;
        if (!strcmp(m, "auto")) p->direct_io = COLIBRI_READ_AUTO;
        else if (!strcmp(m, "off")) p->direct_io = COLIBRI_READ_BUFFERED;
        else if (!strcmp(m, "dontneed")) p->direct_io = COLIBRI_READ_DONTNEED;
        else if (strcmp(m, "on")) return 1;
        ++*i;
        return 1;
    }
    if (!strcmp(a, "--usage-stats")) return p->usage_stats = 1, 1;
    if (strcmp(a, "--mem-budget") && strcmp(a, "--expert-pool") && strcmp(a, "--cache-policy") &&
        strcmp(a, "--prefetch") && strcmp(a, "--io-threads") && strcmp(a, "--moe-miss-drop") &&
        strcmp(a, "--moe-standin"))
        return 0;
    if (!(val = cli_value(argc, argv, i))) return -1;
    if (!strcmp(a, "--mem-budget") || !strcmp(a, "--expert-pool")) {
        if (!cli_size(val, &sz) || sz == 0) return cli_fail("%s: '%s' is not a size (e.g. 1.5GiB)", a, val), -1;
        if (a[2] == 'm') p->mem_budget = sz;
        else p->expert_pool_bytes = sz;
    } else if (!strcmp(a, "--cache-policy")) {
        if (!strcmp(val, "lru")) p->cache_policy = COLIBRI_CACHE_LRU;
        else if (!strcmp(val, "lfu")) p->cache_policy = COLIBRI_CACHE_LFU;
        else if (!strcmp(val, "pinned")) p->cache_policy = COLIBRI_CACHE_PINNED;
        else return cli_fail("--cache-policy: '%s' is not lru, lfu or pinned", val), -1;
    } else if (!strcmp(a, "--prefetch")) {
        if (!strcmp(val, "on")) p->prefetch = 1;
        else if (!strcmp(val, "off")) p->prefetch = -1;
        else return cli_fail("--prefetch: '%s' is not on or off", val), -1;
    } else if (!strcmp(a, "--moe-miss-drop") || !strcmp(a, "--moe-standin")) {
        double d;
        if (!cli_float(val, 0, 1, &d)) return cli_fail("%s: '%s' is not in 0..1", a, val), -1;
        if (!strcmp(a, "--moe-miss-drop")) p->moe_miss_drop = (float)d;
        else p->moe_standin = (float)d;
    } else {
        if (!cli_int(val, 0, 64, &v)) return cli_fail("--io-threads: '%s' is not in 0..64", val), -1;
        p->io_threads = (int)v;
    }
    return 1;
}

/* The settings of p with every expert in memory, none dropped and no stand-in: the exact run
   a bounded one is compared against (without moe_miss_drop and moe_standin their logits are
   the same bits). The
   reference writes no usage file (the measured run keeps MODEL.usage). */
static inline colibri_params mem_opts_unbounded(const colibri_params *p) {
    colibri_params q = *p;
    q.mem_budget = q.expert_pool_bytes = 0;
    q.direct_io = COLIBRI_READ_AUTO; /* on and dontneed would make a pool of their own */
    q.moe_miss_drop = q.moe_standin = 0;
    q.usage_stats = 0;
    return q;
}

/* Expert-store figures over a phase: call with sign -1 before it and +1 after. */
typedef struct mem_acc {
    double hits, misses, bytes, stall, la_hit, la_true, pf_issued, pf_used;
    double sched, moe_runs; /* scheduler time (incl. stalls) and MoE layer evaluations */
    double t_att, t_moe, t_head; /* time in attention, feed-forward (router + experts), head */
} mem_acc;

static inline void mem_acc_phase(colibri_engine_t *e, mem_acc *a, double sign) {
    colibri_stats_t *s = malloc(sizeof *s);
    if (!s) return;
    *s = colibri_get_stats(e);
    a->hits += sign * (double)s->expert_hits_total;
    a->misses += sign * (double)s->expert_misses_total;
    a->bytes += sign * (double)s->expert_bytes_read_total;
    a->stall += sign * s->expert_stall_s_total;
    a->la_hit += sign * (double)s->lookahead_hit;
    a->la_true += sign * (double)s->lookahead_true;
    a->pf_issued += sign * (double)s->prefetch_issued;
    a->pf_used += sign * (double)s->prefetch_used;
    a->sched += sign * s->time_moe_sched_s;
    a->moe_runs += sign * (double)s->moe_layer_runs;
    a->t_att += sign * s->time_attention_s;
    a->t_moe += sign * s->time_moe_s;
    a->t_head += sign * s->time_head_s;
    free(s);
}

/* One line on stderr about the expert pool (nothing in the unbounded mode). */
static inline void mem_opts_report(colibri_engine_t *e) {
    colibri_stats_t *s = malloc(sizeof *s);
    if (!s) return;
    *s = colibri_get_stats(e);
    if (s->expert_pool_slots > 0) {
        const double acq = (double)(s->expert_hits_total + s->expert_misses_total);
        fprintf(stderr,
                "colibri: expert pool %d slots (%.1f MiB), %llu hits / %llu misses (%.1f%%), %.1f MiB read, "
                "%llu evictions, stall %.3f s, lookahead recall %.1f%%; reads: %s; dense weights locked: %.1f MiB\n",
                s->expert_pool_slots, s->expert_pool_bytes / 1048576.0, (unsigned long long)s->expert_hits_total,
                (unsigned long long)s->expert_misses_total, acq > 0 ? 100.0 * (double)s->expert_hits_total / acq : 0.0,
                s->expert_bytes_read_total / 1048576.0, (unsigned long long)s->expert_evictions_total,
                s->expert_stall_s_total,
                s->lookahead_true ? 100.0 * (double)s->lookahead_hit / (double)s->lookahead_true : 0.0,
                colibri_read_path_name(s->expert_read_path), s->dense_locked_bytes / 1048576.0);
    }
    free(s);
}

#endif
