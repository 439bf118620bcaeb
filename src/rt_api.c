/* rt_api.c — the real-time settings (rt_api.h, docs/REALTIME.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "core/common.h"
#include "core/rt.h"
#include "rt_api.h"

static const char *const WAIT_NAMES[] = {"hybrid", "spin", "futex", "yield"};

int colibri_wait_policy_from_name(const char *name) {
    for (int i = 0; name && i < (int)CLB_ARRAY_LEN(WAIT_NAMES); i++)
        if (!strcmp(name, WAIT_NAMES[i])) return i;
    return -1;
}

const char *colibri_rt_warning(const colibri_engine_t *e) { return e ? e->rt_warn : ""; }

static bool int_in(const cJSON *it, double lo, double hi) {
    /* the range first: converting an out-of-range double to an integer type is undefined */
    return cJSON_IsNumber(it) && it->valuedouble >= lo && it->valuedouble <= hi &&
           it->valuedouble == (double)(long)it->valuedouble;
}

int clb_rt_config_key(const char *path, const cJSON *it, colibri_params *p, bool *handled) {
    const char *k = it->string;
    *handled = true;
    if (!strcmp(k, "cpus") || !strcmp(k, "io_cpus")) {
        char *dst = k[0] == 'c' ? p->cpus : p->io_cpus;
        int tmp[CLB_MAX_CPUS];
        if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof p->cpus ||
            clb_parse_cpus(it->valuestring, tmp, CLB_MAX_CPUS) < 0)
            return clb_err(COLIBRI_ERR_ARG, "%s: '%s' must be a CPU list string such as \"0-3,6\"", path, k);
        memcpy(dst, it->valuestring, strlen(it->valuestring) + 1);
        return COLIBRI_OK;
    }
    if (!strcmp(k, "rt_priority")) {
        if (!int_in(it, 0, 99)) return clb_err(COLIBRI_ERR_ARG, "%s: 'rt_priority' must be an integer in 0..99", path);
        p->rt_priority = (int)it->valuedouble;
        return COLIBRI_OK;
    }
    if (!strcmp(k, "mlock")) {
        if (!cJSON_IsBool(it)) return clb_err(COLIBRI_ERR_ARG, "%s: 'mlock' must be true or false", path);
        p->mlock = cJSON_IsTrue(it);
        return COLIBRI_OK;
    }
    if (!strcmp(k, "wait_policy")) {
        const int w = cJSON_IsString(it) ? colibri_wait_policy_from_name(it->valuestring) : -1;
        if (w < 0)
            return clb_err(COLIBRI_ERR_ARG, "%s: 'wait_policy' must be \"hybrid\", \"spin\", \"futex\" or \"yield\"", path);
        p->wait_policy = w;
        return COLIBRI_OK;
    }
    if (!strcmp(k, "spin_us")) {
        if (!int_in(it, -1, 1e7)) return clb_err(COLIBRI_ERR_ARG, "%s: 'spin_us' must be an integer in -1..10000000", path);
        p->spin_us = (int)it->valuedouble;
        return COLIBRI_OK;
    }
    *handled = false;
    return COLIBRI_OK;
}

/* a CPU list field of the params: NUL-terminated within its array, "" = none */
static int cpu_field(const char *name, const char *f, size_t cap, int *out, int ocap, int *n) {
    *n = 0;
    if (!memchr(f, 0, cap)) return clb_err(COLIBRI_ERR_ARG, "%s: not a terminated string", name);
    if (!*f) return COLIBRI_OK;
    const int k = clb_parse_cpus(f, out, ocap);
    if (k < 0) return clb_err_prefix("%s", name), COLIBRI_ERR_ARG;
    *n = k;
    return COLIBRI_OK;
}

int clb_rt_prepare(colibri_engine_t *e, const colibri_params *p, int *cpus, int cap, int *n_cpus, clb_pool_opts *o) {
    if (p->rt_priority < 0 || p->rt_priority > 99 || p->mlock < 0 || p->mlock > 1 || p->wait_policy < 0 ||
        p->wait_policy >= (int)CLB_ARRAY_LEN(WAIT_NAMES) || p->spin_us < -1 || p->spin_us > 10000000)
        return clb_err(COLIBRI_ERR_ARG, "rt_priority %d (0..99) / mlock %d / wait_policy %d / spin_us %d (-1..1e7) out of range",
                       p->rt_priority, p->mlock, p->wait_policy, p->spin_us);
    int rc = cpu_field("cpus", p->cpus, sizeof p->cpus, cpus, cap, n_cpus);
    if (!rc) rc = cpu_field("io_cpus", p->io_cpus, sizeof p->io_cpus, e->io_cpus, (int)CLB_ARRAY_LEN(e->io_cpus), &e->n_io_cpus);
    if (rc) return rc;
    *o = (clb_pool_opts){.wait = p->wait_policy,
                         .spin_us = p->spin_us == 0 ? -1 : p->spin_us < 0 ? 0 : p->spin_us,
                         .cpus = *n_cpus > 0 ? cpus : NULL,
                         .n_cpus = *n_cpus,
                         .rt_priority = p->rt_priority};
    return COLIBRI_OK;
}

void clb_rt_lock(colibri_engine_t *e) {
    const clb_model *m = e->model;
    uint64_t bytes = 0;
    int err = 0, r;
    for (int i = 0; i < m->src.n_tensors; i++) {
        const clb_src_tensor *t = &m->src.tensors[i];
        if (t->expert >= 0 || !t->data || t->copied) continue; /* a copy's pages are locked below */
        bytes += t->size;
        if ((r = clb_lock_range(t->data, t->size)) && !err) err = r;
    }
    bytes += m->pack_copy_bytes + e->attn.kv.seq_bytes * (uint64_t)e->n_seq + e->arena.size;
    if ((r = clb_lock_range(m->pack_copy, m->pack_copy_bytes)) && !err) err = r;
    if ((r = clb_lock_range(e->attn.kv.data, e->attn.kv.seq_bytes * (uint64_t)e->n_seq)) && !err) err = r;
    if ((r = clb_lock_range(e->arena.base, e->arena.size)) && !err) err = r;
    if ((r = clb_store_lock(m->store, &bytes)) && !err) err = r;
    if (err) {
        struct rlimit rl = {0};
        getrlimit(RLIMIT_MEMLOCK, &rl);
        char lim[32] = "unlimited";
        if (rl.rlim_cur != RLIM_INFINITY) snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)rl.rlim_cur);
        clb_warn_add(e->rt_warn, sizeof e->rt_warn, "mlock of %llu bytes refused in part (%s; RLIMIT_MEMLOCK %s)",
                     (unsigned long long)bytes, strerror(err), lim);
    }
}
