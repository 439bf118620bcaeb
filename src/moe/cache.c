/* cache.c — which expert leaves the pool when a slot is needed, and the usage file.
 *
 * Policies (switchable at run time, clb_store_set_policy):
 *   LRU     the least recently acquired expert leaves;
 *   LFU     the expert with the lowest heat leaves; heat += 1 per acquire and halves every
 *           CLB_LFU_HALF_LIFE_PER_SLOT * n_slots acquires (decay, so old favourites fade);
 *   PINNED  a hot set of the n_slots / 2 most used experts (live counts + the usage file)
 *           never leaves the pool (mlock'ed in the unbounded mode); LRU for the rest.
 * Victims are chosen in tiers: experts nobody asked for, then ones requested for the
 * current batch or the lookahead, then (demand only) hot ones. A lookahead request never
 * evicts anything requested or hot. Every function here runs with s->mu held. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/common.h"
#include "core/platform.h"
#include "moe/store_impl.h"

#define CLB_LFU_HALF_LIFE_PER_SLOT 4.0

static double heat_now(const clb_expert_store *s, const clb_st_expert *x) {
    double hl = CLB_LFU_HALF_LIFE_PER_SLOT * (s->n_slots > 0 ? s->n_slots : 64);
    return x->heat * exp2(-(double)(s->tick - x->heat_tick) / hl);
}

void clb_cache_touch(clb_expert_store *s, clb_st_expert *x) {
    s->tick++;
    x->heat = heat_now(s, x) + 1.0;
    x->heat_tick = s->tick;
    x->last_use = s->tick;
    x->uses++;
}

int clb_cache_pick_slot(clb_expert_store *s, int prio) {
    for (int i = 0; i < s->n_slots; i++)
        if (s->slot_owner[i] < 0) return i;
    int best = -1, best_tier = 0;
    double best_score = 0;
    const bool pinned = s->cfg.policy == CLB_POLICY_PINNED;
    for (int i = 0; i < s->n_slots; i++) {
        const clb_st_expert *x = &s->ex[s->slot_owner[i]];
        if (x->state != ES_RESIDENT || x->pins > 0) continue;
        bool hot = pinned && x->hot;
        if (prio < CLB_PRIO_DEMAND && (hot || x->need > 0)) continue;
        int tier = (hot ? 2 : 0) + (x->need > 0 ? 1 : 0);
        double score = s->cfg.policy == CLB_POLICY_LFU ? heat_now(s, x) : (double)x->last_use;
        if (best < 0 || tier < best_tier || (tier == best_tier && score < best_score)) {
            best = i;
            best_tier = tier;
            best_score = score;
        }
    }
    if (best < 0) return -1;
    int xi = s->slot_owner[best];
    clb_st_expert *v = &s->ex[xi];
    v->state = ES_ABSENT;
    v->slot = -1;
    v->prefetched = false;
    s->slot_owner[best] = -1;
    s->ls[xi / s->n_expert].evictions++;
    return best;
}

/* The hot set: the `want` most used experts (ties: lowest index), by repeated selection
   (allocation-free; runs at policy changes and every 1024 acquires only). */
void clb_cache_update_hot(clb_expert_store *s) {
    const int n = s->n_layer * s->n_expert;
    s->acquires_since_hot = 0;
    int want = 0;
    /* bounded: half the pool; unbounded: the top quarter of the experts is mlock'ed */
    int held = 0; /* the experts this rank computes (expert parallelism: its share) */
    for (int i = 0; i < n; i++) held += s->ex[i].present && !s->ex[i].away;
    if (s->cfg.policy == CLB_POLICY_PINNED) want = s->bounded ? s->n_slots / 2 : held / 4;
    for (int i = 0; i < n; i++) s->ex[i].hot = false;
    for (int k = 0; k < want; k++) {
        int bi = -1;
        for (int i = 0; i < n; i++) {
            const clb_st_expert *x = &s->ex[i];
            if (!x->present || x->away || x->hot || x->uses == 0) continue;
            if (bi < 0 || x->uses > s->ex[bi].uses) bi = i;
        }
        if (bi < 0) break;
        s->ex[bi].hot = true;
    }
    if (s->bounded) return;
    for (int i = 0; i < n; i++) {
        clb_st_expert *x = &s->ex[i];
        if (!x->present || x->hot == x->mlocked) continue;
        const clb_weight *ws[3] = {&x->w.gate, &x->w.up, &x->w.down};
        for (int k = 0; k < 3; k++) {
            uintptr_t a0 = (uintptr_t)ws[k]->data & ~(uintptr_t)(CLB_STORE_PAGE - 1);
            size_t len = (size_t)((uintptr_t)ws[k]->data + x->t[k].size - a0);
            /* mlock is best effort (RLIMIT_MEMLOCK); a failure only costs speed */
            if (x->hot) mlock((void *)a0, len);
            else munlock((void *)a0, len);
        }
        x->mlocked = x->hot;
    }
}

/* ---- usage file: "colibri-usage 1\n<n_layer> <n_expert>\n" then one line of counts per
   layer. Opt-in; a file for another shape is ignored (and rewritten at exit). ---- */

int clb_cache_load_usage(clb_expert_store *s) {
    if (!clb_file_exists(s->usage_path)) return COLIBRI_OK;
    char *text;
    int rc = clb_read_file(s->usage_path, (size_t)64 << 20, &text, NULL);
    if (rc) return rc;
    char *p = text, *end;
    rc = COLIBRI_OK;
    if (strncmp(p, "colibri-usage 1\n", 16) != 0) {
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: not a colibri usage file (first line 'colibri-usage 1')",
                     s->usage_path);
        goto out;
    }
    p += 16;
    errno = 0;
    unsigned long nl = strtoul(p, &end, 10);
    if (end == p) goto bad;
    p = end;
    unsigned long ne = strtoul(p, &end, 10);
    if (end == p || errno) goto bad;
    p = end;
    if (nl != (unsigned long)s->n_layer || ne != (unsigned long)s->n_expert) {
        clb_log(CLB_LOG_WARN, "%s: usage counts for %lu x %lu experts, the model has %d x %d; ignored",
                s->usage_path, nl, ne, s->n_layer, s->n_expert);
        goto out;
    }
    for (int i = 0; i < s->n_layer * s->n_expert; i++) {
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno || v > (1ull << 62)) goto bad;
        p = end;
        s->ex[i].uses = s->ex[i].present ? (uint64_t)v : 0;
    }
    goto out;
bad:
    rc = clb_err(COLIBRI_ERR_FORMAT, "%s: malformed usage counts", s->usage_path);
out:
    clb_free(text);
    return rc;
}

int clb_cache_save_usage(clb_expert_store *s) {
    size_t cap = strlen(s->usage_path) + 8;
    char *tmp = clb_malloc(cap);
    if (!tmp) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    snprintf(tmp, cap, "%s.tmp", s->usage_path);
    FILE *f = fopen(tmp, "w");
    int rc = COLIBRI_OK;
    if (!f) {
        rc = clb_err(COLIBRI_ERR_IO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    fprintf(f, "colibri-usage 1\n%d %d\n", s->n_layer, s->n_expert);
    for (int l = 0; l < s->n_layer; l++) {
        for (int e = 0; e < s->n_expert; e++)
            fprintf(f, e ? " %llu" : "%llu", (unsigned long long)clb_st_get(s, l, e)->uses);
        fputc('\n', f);
    }
    if (ferror(f) | (fclose(f) != 0)) {
        rc = clb_err(COLIBRI_ERR_IO, "%s: write failed", tmp);
        remove(tmp);
    } else if (rename(tmp, s->usage_path) != 0) {
        rc = clb_err(COLIBRI_ERR_IO, "%s: %s", s->usage_path, strerror(errno));
        remove(tmp);
    }
out:
    clb_free(tmp);
    return rc;
}
