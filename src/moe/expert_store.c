/* expert_store.c — the two-level expert table and acquire/release (expert_store.h).
 *
 * L1 (clb_st_expert): per (layer, expert) residency, pool slot, pin count, heat, uses.
 * L2 (clb_st_tensor): per tensor of the expert: descriptor, file offset/size, the aligned
 * range a load reads and where it lands in the slot.
 *
 * Bounded mode invariants (all under mu):
 *   state RESIDENT <=> slot >= 0 && slot_owner[slot] == index && job idle
 *   state LOADING  <=> slot >= 0 && jobs[slot].expert == index
 *   pins > 0       =>  state RESIDENT (never evicted; guard mode: pages readable)
 * A slot is chosen for a load only when it is free or its expert is RESIDENT and unpinned,
 * so a load never overwrites bytes a kernel may be reading. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/platform.h"
#include "format/container.h"
#include "format/container_impl.h"
#include "kernels/kernels.h"
#include "model/source.h"
#include "core/rt.h"
#include "moe/store_impl.h"

clb_expert_store *clb_store_create(int n_layer, int n_sub, int n_expert) {
    if (n_layer < 0 || n_expert < 0 || n_sub < 1 || n_sub > 3) return NULL;
    clb_expert_store *s = clb_calloc(1, sizeof *s);
    if (!s) return NULL;
    n_layer *= n_sub;
    s->n_sub = n_sub;
    s->n_layer = n_layer;
    s->n_expert = n_expert;
    size_t n = (size_t)n_layer * (size_t)(n_expert > 0 ? n_expert : 1);
    s->ex = clb_calloc(n ? n : 1, sizeof *s->ex);
    s->ls = clb_calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof *s->ls);
    if (!s->ex || !s->ls || pthread_mutex_init(&s->mu, NULL)) goto fail;
    if (pthread_cond_init(&s->cv_done, NULL)) {
        pthread_mutex_destroy(&s->mu);
        goto fail;
    }
    if (pthread_cond_init(&s->cv_work, NULL)) {
        pthread_cond_destroy(&s->cv_done);
        pthread_mutex_destroy(&s->mu);
        goto fail;
    }
    s->locks_ok = true;
    for (size_t i = 0; i < n; i++) {
        s->ex[i].slot = -1;
        s->ex[i].chunk = -1;
        for (int k = 0; k < 3; k++) s->ex[i].t[k].fd = s->ex[i].t[k].dfd = s->ex[i].t[k].rfd = -1;
    }
    return s;
fail:
    clb_free(s->ex);
    clb_free(s->ls);
    clb_free(s);
    return NULL;
}

void clb_store_free(clb_expert_store *s) {
    if (!s) return;
    if (s->configured) {
        if (s->usage_path) clb_cache_save_usage(s); /* best effort: the model is going away */
        clb_io_stop(s);
        if (s->cfg.guard) clb_guard_remove(s);
        clb_pool_unmap(s);
        if (!s->bounded) {
            for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++)
                if (s->ex[i].mlocked) {
                    const clb_expert_w *w = &s->ex[i].w;
                    const clb_weight *ws[3] = {&w->gate, &w->up, &w->down};
                    for (int k = 0; k < 3; k++) {
                        uintptr_t a0 = (uintptr_t)ws[k]->data & ~(uintptr_t)(CLB_STORE_PAGE - 1);
                        munlock((void *)a0, (size_t)((uintptr_t)ws[k]->data + s->ex[i].t[k].size - a0));
                    }
                }
        }
    }
    clb_store_free_encoded(s);
    for (int i = 0; i < s->n_dfds; i++) close(s->dfds[2 * i + 1]);
    clb_free(s->dfds);
    clb_unmap(s->pack_copy, s->pack_copy_bytes);
    if (s->locks_ok) {
        pthread_cond_destroy(&s->cv_work);
        pthread_cond_destroy(&s->cv_done);
        pthread_mutex_destroy(&s->mu);
    }
    clb_free(s->slot_owner);
    clb_free(s->jobs);
    clb_free(s->usage_path);
    clb_free(s->ls);
    clb_free(s->ex);
    clb_free(s);
}

clb_expert_w *clb_store_slot(clb_expert_store *s, int layer, int expert) {
    clb_st_expert *x = clb_st_get(s, layer, expert);
    if (!x || s->configured) return NULL;
    x->present = true;
    return &x->w;
}

static uint64_t w_bytes(const clb_weight *w) { return w->row_bytes * (uint64_t)w->rows; }

uint64_t clb_store_expert_bytes(const clb_expert_store *s, int layer, int expert) {
    const clb_st_expert *x = clb_st_get((clb_expert_store *)s, layer, expert);
    if (!x || !x->present) return 0;
    return w_bytes(&x->w.gate) + w_bytes(&x->w.up) + w_bytes(&x->w.down);
}

uint64_t clb_store_total_bytes(const clb_expert_store *s) {
    uint64_t t = 0;
    if (!s) return 0;
    for (int l = 0; l < s->n_layer; l++)
        for (int e = 0; e < s->n_expert; e++) t += clb_store_expert_bytes(s, l, e);
    return t;
}

/* ---- configure ---- */

/* Fills the L2 entries of x from the source and lays the tensors out in a slot; returns
   the slot bytes this expert needs. */
static int layout_expert(clb_expert_store *s, const clb_source *src, int key, int e, clb_st_expert *x,
                         uint64_t *slot_need) {
    /* the tensors of an expert of each sub-layer (clb_store_key); NULL: none (left empty) */
    static const char *const kinds[3][3] = {
        {"ffn_gate", "ffn_up", "ffn_down"}, {"attn_q", NULL, "attn_output"},
        {"ffn_gate_standin", "ffn_up_standin", "ffn_down_standin"}};
    const int n_model = s->n_layer / s->n_sub, l = key % n_model, sub = key / n_model;
    const clb_weight *ws[3] = {&x->w.gate, &x->w.up, &x->w.down};
    uint64_t off = 0;
    x->bytes = 0;
    for (int k = 0; k < 3; k++) {
        char name[96];
        if (!kinds[sub][k]) {
            x->t[k] = (clb_st_tensor){.fd = -1, .dfd = -1, .rfd = -1, .slot_off = off, .data_off = off, .direct_ok = true};
            continue;
        }
        snprintf(name, sizeof name, "blk.%d.%s.%d.weight", l, kinds[sub][k], e);
        const clb_src_tensor *st = clb_source_find(src, name);
        if (!st) return clb_err(COLIBRI_ERR_INTERNAL, "%s: expert tensor '%s' vanished", src->path, name);
        if (st->size != w_bytes(ws[k]))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' holds %llu bytes, the layer needs %llu", src->path,
                           name, (unsigned long long)st->size, (unsigned long long)w_bytes(ws[k]));
        clb_st_tensor *t = &x->t[k];
        t->fd = st->fd;
        t->io = st->io;
        t->file_offset = st->file_offset;
        t->size = st->size;
        if (st->deferred) { /* encoded: the expert's chunk is decoded into the slot as a whole */
            const clb_container *ct = clb_source_container(src);
            if (!ct || (k > 0 && st->chunk != x->chunk) || (k == 0 && x->chunk >= 0))
                return clb_err(COLIBRI_ERR_FORMAT, "%s: expert %d of layer %d is not one chunk", src->path, e, l);
            x->chunk = st->chunk;
            t->direct_ok = true;
            t->slot_off = 0;
            t->data_off = st->chunk_off;
            t->read_off = t->read_len = 0;
            x->bytes += st->size;
            if (k == 2) off = clb_align_up(ct->chunks[x->chunk].plain, CLB_STORE_PAGE);
            continue;
        }
        if (x->chunk >= 0) return clb_err(COLIBRI_ERR_FORMAT, "%s: expert %d of layer %d is not one chunk", src->path, e, l);
        if (!s->bounded && st->streamed)
            return clb_err(COLIBRI_ERR_INTERNAL, "%s: tensor '%s' is only in the source but the store has no pool",
                           src->path, name);
        if (s->bounded && st->io) {
            if (!clb_range_ok(st->file_offset, st->size, st->io->size))
                return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' at %llu + %llu lies beyond the source (%llu bytes)",
                               src->path, name, (unsigned long long)st->file_offset, (unsigned long long)st->size,
                               (unsigned long long)st->io->size);
        } else if (s->bounded) {
            struct stat sb;
            if (st->fd < 0 || fstat(st->fd, &sb) != 0)
                return clb_err(COLIBRI_ERR_IO, "%s: tensor '%s': its file is not open for reading", src->path, name);
            if (!clb_range_ok(st->file_offset, st->size, (uint64_t)sb.st_size))
                return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' at %llu + %llu lies beyond the file (%llu bytes)",
                               src->path, name, (unsigned long long)st->file_offset, (unsigned long long)st->size,
                               (unsigned long long)sb.st_size);
        }
        /* keep the mapping's alignment (offset mod page) so kernels see the same addresses
           mod 4096 as with mmap; an offset not 4-aligned is placed page aligned instead
           (what the loader's copy does) and read with buffered I/O only */
        uint64_t mis = st->file_offset % CLB_STORE_PAGE;
        t->direct_ok = st->file_offset % 4 == 0;
        t->slot_off = off;
        if (t->direct_ok) {
            t->read_off = st->file_offset - mis;
            t->read_len = clb_align_up(mis + st->size, CLB_STORE_PAGE);
            t->data_off = off + mis;
        } else {
            t->read_off = st->file_offset;
            t->read_len = st->size;
            t->data_off = off;
        }
        if (t->read_len < st->size) return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' too large", src->path, name);
        off += clb_align_up(t->read_len, CLB_STORE_PAGE);
        x->bytes += st->size;
    }
    *slot_need = off;
    return COLIBRI_OK;
}

static void set_pool_pointers(clb_expert_store *s, clb_st_expert *x) {
    uint8_t *base = clb_pool_slot(s, x->slot);
    x->pw = x->w;
    clb_weight *ws[3] = {&x->pw.gate, &x->pw.up, &x->pw.down};
    for (int k = 0; k < 3; k++) {
        ws[k]->data = base + x->t[k].data_off;
        ws[k]->packed_rows = x->t[k].packed_rows;
        ws[k]->interleaved = false;
    }
}

/* ---- packing (kernels.h) and resident copies ---- *
 * With cfg.pack, every expert tensor of a dtype the table computes 16 rows at a time gets
 * packed_rows: the same arithmetic whatever the mode, so the logits stay bit-identical.
 * Bounded, the slots hold the file's row-major bytes (the kernels transpose them in
 * registers; reading stays a plain pread). Unbounded, the experts are copied once into an
 * interleaved layout when the copies fit in the available memory, else served row-major
 * from the mapping. One rank of several (cfg.owner) copies its own experts (interleaved,
 * or row-major without packed kernels) and no other: the copies are read with pread, never
 * through the mapping, because a fault on the mapping maps the page cache's whole folio
 * (large folios reach across tensors), which would make the neighbouring experts — another
 * rank's — resident too. */

/* Does the unbounded mode copy expert x (interleave: the packed kernels' layout)? */
static bool copies(const clb_expert_store *s, const clb_st_expert *x, bool interleave) {
    if (!x->present || x->away) return false;
    if (interleave && clb_st_packs(x)) return true;
    return s->cfg.owner && x->chunk < 0;
}

typedef struct pack_ctx {
    clb_expert_store *s;
    int ith, nth;
    bool interleave;
    uint64_t max_tensor; /* largest tensor read, for the staging buffer */
    int rc;
    char err[320];
} pack_ctx;

/* unbounded: the copies of every nth copied expert (from ith), from the file (pread) or
   from memory (a decoded expert, or a source without a descriptor) */
static void *pack_copies(void *arg) {
    pack_ctx *c = arg;
    clb_expert_store *s = c->s;
    uint8_t *stage = NULL;
    int n = 0;
    for (size_t i = 0; !c->rc && i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        clb_st_expert *x = &s->ex[i];
        if (!copies(s, x, c->interleave) || n++ % c->nth != c->ith) continue;
        clb_weight *ws[3] = {&x->w.gate, &x->w.up, &x->w.down};
        for (int t = 0; t < 3 && !c->rc; t++) {
            if (!x->t[t].size) continue; /* an attention expert's empty up projection */
            uint8_t *dst = s->pack_copy + x->t[t].copy_off;
            const bool pack = c->interleave && x->t[t].packed_rows > 0;
            const uint8_t *src = ws[t]->data;
            const bool from_file = x->chunk < 0 && x->t[t].fd >= 0;
            if (from_file) {
                if (pack && !stage && !(stage = clb_alloc_aligned((size_t)c->max_tensor))) {
                    c->rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory (staging an expert to pack)");
                    break;
                }
                if ((c->rc = clb_ct_pread(x->t[t].fd, pack ? stage : dst, (size_t)x->t[t].size, x->t[t].file_offset,
                                          "the model file")))
                    break;
                src = pack ? stage : dst;
            }
            if (pack) clb_pack_rows_to(ws[t]->dtype, ws[t]->cols, ws[t]->rows, src, dst);
            else if (!from_file) memcpy(dst, src, (size_t)x->t[t].size);
            if (!from_file) clb_release_pages(ws[t]->data, x->t[t].size); /* not needed any more */
            ws[t]->data = dst;
            ws[t]->packed_rows = x->t[t].packed_rows;
            ws[t]->interleaved = pack;
        }
    }
    if (c->rc) snprintf(c->err, sizeof c->err, "%s", clb_last_error());
    clb_free_aligned(stage);
    return NULL;
}

/* Decides which tensors are packed and, unbounded, makes the copies (see above). */
static int setup_copies(clb_expert_store *s, const clb_kernels *k, bool interleave) {
    uint64_t copy = 0, max_tensor = 0;
    bool any = false;
    for (size_t i = 0; k && i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        clb_st_expert *x = &s->ex[i];
        if (!x->present) continue;
        const clb_weight *ws[3] = {&x->w.gate, &x->w.up, &x->w.down};
        for (int t = 0; t < 3; t++) {
            x->t[t].packed_rows = clb_kernels_pack_rows(k, ws[t]->dtype, ws[t]->cols, ws[t]->rows);
            any |= x->t[t].packed_rows > 0;
        }
    }
    s->packed = any;
    if (s->bounded) return COLIBRI_OK; /* set_pool_pointers passes packed_rows on */
    /* by default the kernels read the mapping's row-major bytes */
    for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        clb_st_expert *x = &s->ex[i];
        clb_weight *ws[3] = {&x->w.gate, &x->w.up, &x->w.down};
        for (int t = 0; t < 3; t++) ws[t]->packed_rows = x->t[t].packed_rows;
    }
    interleave = interleave && any;
    for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        const clb_st_expert *x = &s->ex[i];
        if (!copies(s, x, interleave)) continue;
        for (int t = 0; t < 3; t++) {
            copy += clb_align_up(x->t[t].size, 64);
            max_tensor = CLB_MAX(max_tensor, x->t[t].size);
        }
    }
    if (copy == 0 || !clb_copy_fits(copy)) return COLIBRI_OK;
    void *m = clb_map_weights(copy);
    if (!m) return clb_err(COLIBRI_ERR_NOMEM, "cannot map %llu bytes for packed experts", (unsigned long long)copy);
    s->pack_copy = m;
    s->pack_copy_bytes = copy;
    /* hand out the copies in expert order, then fill them on a few threads */
    uint64_t off = 0;
    for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        clb_st_expert *x = &s->ex[i];
        if (!copies(s, x, interleave)) continue;
        for (int t = 0; t < 3; t++) {
            x->t[t].copy_off = off;
            off += clb_align_up(x->t[t].size, 64);
        }
    }
    pack_ctx ctx[8];
    pthread_t th[8];
    const int n_th = CLB_MAX(1, CLB_MIN(8, clb_cpu_count()));
    int started = 0;
    for (int i = 0; i < n_th; i++) {
        ctx[i] = (pack_ctx){.s = s, .ith = i, .nth = n_th, .interleave = interleave, .max_tensor = max_tensor};
        if (i > 0 && pthread_create(&th[i], NULL, pack_copies, &ctx[i]) == 0) started |= 1 << i;
    }
    pack_copies(&ctx[0]);
    for (int i = 1; i < n_th; i++) {
        if (started & (1 << i)) pthread_join(th[i], NULL);
        else pack_copies(&ctx[i]); /* a thread that could not start: its share here */
    }
    for (int i = 0; i < n_th; i++)
        if (ctx[i].rc) return clb_err(ctx[i].rc, "%s", ctx[i].err);
    s->interleaved = interleave;
    return COLIBRI_OK;
}

int clb_store_configure(clb_expert_store *s, const clb_source *src, const clb_store_cfg *cfg) {
    if (!s || !src || !cfg) return clb_err(COLIBRI_ERR_ARG, "expert store: NULL argument");
    if (s->configured) return clb_err(COLIBRI_ERR_INTERNAL, "expert store configured twice");
    if (cfg->policy < 0 || cfg->policy >= CLB_POLICY_COUNT)
        return clb_err(COLIBRI_ERR_ARG, "unknown cache policy %d", cfg->policy);
    s->cfg = *cfg;
    s->cfg.usage_path = NULL;
    s->bounded = cfg->pool_bytes > 0 && s->n_expert > 0;
    int n_present = 0, n_held = 0, rc;
    uint64_t slot_need = 0;
    /* unbounded, every expert is at hand: the stand-ins are never computed, so they are
       neither mapped in, copied nor decoded */
    for (int l = CLB_SUB_STANDIN * (s->n_layer / s->n_sub); !s->bounded && s->n_sub > CLB_SUB_STANDIN && l < s->n_layer; l++)
        for (int e = 0; e < s->n_expert; e++) clb_st_get(s, l, e)->present = false;
    for (int l = 0; l < s->n_layer; l++)
        for (int e = 0; e < s->n_expert; e++) {
            clb_st_expert *x = clb_st_get(s, l, e);
            if (!x->present) continue;
            n_present++;
            /* expert parallelism places the FFN experts (sub-layer 0) and their stand-ins with them */
            const int n_model = s->n_layer / s->n_sub, sub = l / n_model;
            x->away = cfg->owner && (sub == CLB_SUB_FFN || sub == CLB_SUB_STANDIN) &&
                      cfg->owner[(int64_t)(l % n_model) * s->n_expert + e] != cfg->rank;
            n_held += !x->away;
            uint64_t need = 0;
            if ((rc = layout_expert(s, src, l, e, x, &need))) return rc;
            slot_need = CLB_MAX(slot_need, need);
            s->max_expert_bytes = CLB_MAX(s->max_expert_bytes, x->bytes);
        }
    if (n_present == 0) s->bounded = false;
    if (!s->bounded && (rc = clb_store_setup_encoded(s, src))) return rc; /* the resident copy */
    if ((cfg->pack || cfg->owner) && (rc = setup_copies(s, cfg->pack, cfg->interleave))) return rc;
    if (cfg->usage_path) {
        s->usage_path = clb_strdup(cfg->usage_path);
        if (!s->usage_path) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        if ((rc = clb_cache_load_usage(s))) return rc;
    }
    if (s->bounded) {
        s->slot_bytes = slot_need;
        uint64_t n = cfg->pool_bytes / slot_need;
        /* no more slots than experts this rank computes (2 at least: see below) */
        if (n > (uint64_t)CLB_MAX(n_held, 2)) n = (uint64_t)CLB_MAX(n_held, 2);
        if (n < 2)
            return clb_err(COLIBRI_ERR_ARG,
                           "%s: an expert pool of %llu bytes holds fewer than 2 experts of %llu bytes (raise "
                           "the memory budget or COLIBRI_PAGE_POOL_SIZE)",
                           src->path, (unsigned long long)cfg->pool_bytes, (unsigned long long)slot_need);
        s->n_slots = (int)n;
        s->slot_owner = clb_calloc((size_t)n, sizeof *s->slot_owner);
        s->jobs = clb_calloc((size_t)n, sizeof *s->jobs);
        if (!s->slot_owner || !s->jobs) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        for (int i = 0; i < s->n_slots; i++) s->slot_owner[i] = s->jobs[i].expert = -1;
        if ((rc = clb_pool_map(s))) return rc;
        int n_direct = 0, n_other = 0, n_source = 0;
        for (int l = 0; l < s->n_layer; l++)
            for (int e = 0; e < s->n_expert; e++) {
                clb_st_expert *x = clb_st_get(s, l, e);
                if (!x->present || x->away) continue;
                for (int k = 0; k < 3; k++) {
                    if (!x->t[k].size) continue; /* an attention expert has no up projection */
                    if (cfg->direct_io) x->t[k].dfd = clb_io_open_direct(s, x->t[k].fd);
                    if (cfg->drop_cache) x->t[k].rfd = clb_io_open_random(s, x->t[k].fd);
                    /* an encoded expert is read through its first tensor's descriptors */
                    const clb_st_tensor *t = &x->t[x->chunk >= 0 ? 0 : k];
                    if (t->io) n_source++;
                    else if (t->dfd >= 0 && t->direct_ok) n_direct++;
                    else n_other++;
                }
            }
        /* what loading the model brought into the page cache around the dense tensors (the
           mapping's read-around reaches read_ahead_kb into the experts next to them; an
           encoded file's open touches the padding before every chunk) goes */
        for (int l = 0; cfg->drop_cache && l < s->n_layer; l++)
            for (int e = 0; e < s->n_expert; e++) {
                const clb_st_expert *x = clb_st_get(s, l, e);
                if (!x->present || x->away) continue;
                if (x->chunk >= 0) {
                    clb_container_release_chunk(clb_source_container(src), x->chunk);
                    continue;
                }
                for (int k = 0; k < 3; k++)
                    if (x->t[k].fd >= 0 && !x->t[k].io)
                        (void)posix_fadvise(x->t[k].fd, (off_t)x->t[k].file_offset, (off_t)x->t[k].size,
                                            POSIX_FADV_DONTNEED);
            }
        s->read_path = n_source ? COLIBRI_PATH_SOURCE
                       : !cfg->direct_io && !cfg->drop_cache ? COLIBRI_PATH_BUFFERED
                       : n_other == 0 ? COLIBRI_PATH_DIRECT
                       : n_direct == 0 ? COLIBRI_PATH_DONTNEED
                                       : COLIBRI_PATH_MIXED;
        if ((rc = clb_store_setup_encoded(s, src))) return rc; /* the decoders */
        s->cfg.guard = cfg->guard;
        if (cfg->guard && (rc = clb_guard_install(s))) return rc;
        if (cfg->io_threads > 0 && (rc = clb_io_start(s))) return rc;
    } else {
        s->cfg.guard = false;
        s->cfg.direct_io = s->cfg.drop_cache = false;
        s->read_path = COLIBRI_PATH_MMAP;
    }
    s->configured = true;
    pthread_mutex_lock(&s->mu);
    clb_cache_update_hot(s);
    pthread_mutex_unlock(&s->mu);
    return COLIBRI_OK;
}

/* ---- acquire / release ---- */

static int acquire_bounded(clb_expert_store *s, clb_st_expert *x, int layer, int expert, const clb_expert_w **out) {
    const int xi = (int)(x - s->ex);
    clb_store_layer_stats *ls = &s->ls[layer];
    double t0 = 0;
    bool missed = false, loaded_by_me = false;
    int rc = COLIBRI_OK;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (x->state == ES_RESIDENT) break;
        if (!missed) {
            missed = true;
            t0 = clb_now();
        }
        if (x->state == ES_LOADING) {
            clb_st_job *j = &s->jobs[x->slot];
            j->prio = CLB_PRIO_DEMAND;
            if (!clb_io_help(s, x->slot)) pthread_cond_wait(&s->cv_done, &s->mu);
            continue;
        }
        /* ABSENT */
        if (loaded_by_me && x->err) {
            rc = x->err;
            break;
        }
        int slot = clb_cache_pick_slot(s, CLB_PRIO_DEMAND);
        if (slot < 0) {
            if (s->n_loading > 0 || s->n_pinned_slots < s->n_slots) {
                /* every slot is loading or pinned: wait for a load or a release */
                pthread_cond_wait(&s->cv_done, &s->mu);
                continue;
            }
            rc = clb_err(COLIBRI_ERR_NOMEM, "expert pool: all %d slots are pinned; cannot load expert %d of layer %d",
                         s->n_slots, expert, layer);
            break;
        }
        clb_io_begin_load(s, xi, slot, CLB_PRIO_DEMAND);
        loaded_by_me = true;
    }
    if (!rc) {
        if (x->pins++ == 0) {
            s->n_pinned_slots++;
            if (s->cfg.guard) clb_pool_protect(s, x->slot, 1);
        }
        if (x->prefetched) {
            x->prefetched = false;
            ls->prefetch_used++;
        }
        clb_cache_touch(s, x);
        if (missed) {
            ls->misses++;
            ls->stall_s += clb_now() - t0;
        } else {
            ls->hits++;
        }
        if (s->cfg.policy == CLB_POLICY_PINNED && ++s->acquires_since_hot >= 1024) clb_cache_update_hot(s);
        *out = &x->pw;
    } else if (rc == x->err) {
        x->err = 0;
        if (s->load_err[0]) clb_err(rc, "expert %d of layer %d could not be read: %s", expert, layer, s->load_err);
        else clb_err(rc, "expert %d of layer %d could not be read", expert, layer);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int clb_store_acquire(clb_expert_store *s, int layer, int expert, const clb_expert_w **out) {
    clb_st_expert *x = clb_st_get(s, layer, expert);
    if (!x || !x->present) return clb_err(COLIBRI_ERR_ARG, "expert %d of layer %d does not exist", expert, layer);
    if (s->bounded) return acquire_bounded(s, x, layer, expert, out);
    if (x->away && x->chunk >= 0) /* never decoded here */
        return clb_err(COLIBRI_ERR_ARG,
                       "expert %d of layer %d of this encoded file was left to another rank at open; open the "
                       "model with the placement that computes it here",
                       expert, layer);
    pthread_mutex_lock(&s->mu);
    x->pins++;
    x->uses++;
    pthread_mutex_unlock(&s->mu);
    *out = &x->w;
    return COLIBRI_OK;
}

void clb_store_release(clb_expert_store *s, int layer, int expert) {
    clb_st_expert *x = clb_st_get(s, layer, expert);
    if (!x || !x->present) return;
    pthread_mutex_lock(&s->mu);
    if (x->pins > 0 && --x->pins == 0 && s->bounded) {
        s->n_pinned_slots--;
        if (s->cfg.guard) clb_pool_protect(s, x->slot, 0);
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- hints ---- */

static void advise_map(const clb_st_expert *x, int advice) {
    const clb_weight *ws[3] = {&x->w.gate, &x->w.up, &x->w.down};
    for (int k = 0; k < 3; k++) {
        if (!ws[k]->data || !x->t[k].size) continue;
        uintptr_t a0 = (uintptr_t)ws[k]->data & ~(uintptr_t)(CLB_STORE_PAGE - 1);
        madvise((void *)a0, (size_t)((uintptr_t)ws[k]->data + x->t[k].size - a0), advice);
    }
}

void clb_store_request(clb_expert_store *s, int layer, int expert, int prio) {
    clb_st_expert *x = clb_st_get(s, layer, expert);
    if (!x || !x->present || !s->configured || !s->cfg.prefetch) return;
    if (!s->bounded) {
        advise_map(x, MADV_WILLNEED);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (prio > x->need) x->need = prio;
    if (x->state == ES_LOADING) {
        if (prio > s->jobs[x->slot].prio) s->jobs[x->slot].prio = prio;
    } else if (x->state == ES_ABSENT && s->n_threads > 0 && s->n_loading + s->n_pinned_slots < s->n_slots - 1) {
        /* one slot always stays available to a demand load */
        int slot = clb_cache_pick_slot(s, prio);
        if (slot >= 0) {
            clb_io_begin_load(s, (int)(x - s->ex), slot, prio);
            if (prio == CLB_PRIO_LOOKAHEAD) {
                x->prefetched = true;
                s->ls[layer].prefetch_issued++;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void clb_store_layer_done(clb_expert_store *s, int layer) {
    if (!s || layer < 0 || layer >= s->n_layer || !s->bounded) return;
    pthread_mutex_lock(&s->mu);
    for (int e = 0; e < s->n_expert; e++) clb_st_get(s, layer, e)->need = 0;
    pthread_mutex_unlock(&s->mu);
}

int clb_store_set_policy(clb_expert_store *s, int policy) {
    if (!s) return clb_err(COLIBRI_ERR_ARG, "NULL expert store");
    if (policy < 0 || policy >= CLB_POLICY_COUNT) return clb_err(COLIBRI_ERR_ARG, "unknown cache policy %d", policy);
    pthread_mutex_lock(&s->mu);
    s->cfg.policy = policy;
    if (s->configured) clb_cache_update_hot(s);
    pthread_mutex_unlock(&s->mu);
    return COLIBRI_OK;
}

int clb_store_max_pinned(const clb_expert_store *s) { return s && s->bounded ? s->n_slots : INT_MAX; }

void clb_store_note_recall(clb_expert_store *s, int layer, uint64_t n_hit, uint64_t n_true) {
    if (!s || layer < 0 || layer >= s->n_layer) return;
    pthread_mutex_lock(&s->mu);
    s->ls[layer].la_hit += n_hit;
    s->ls[layer].la_true += n_true;
    pthread_mutex_unlock(&s->mu);
}

void clb_store_evict_all(clb_expert_store *s) {
    if (!s || !s->bounded) return;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) {
        int xi = s->slot_owner[i];
        if (xi < 0) continue;
        clb_st_expert *x = &s->ex[xi];
        if (x->state != ES_RESIDENT || x->pins > 0) continue;
        x->state = ES_ABSENT;
        x->slot = -1;
        x->prefetched = false;
        s->slot_owner[i] = -1;
        s->ls[xi / s->n_expert].evictions++;
        /* the pages go back to the system; the slot is refilled on demand */
        madvise(clb_pool_slot(s, i), (size_t)s->slot_bytes, MADV_DONTNEED);
    }
    pthread_mutex_unlock(&s->mu);
}

bool clb_store_is_absent(clb_expert_store *s, int layer, int expert) {
    clb_st_expert *x = clb_st_get(s, layer, expert);
    if (!x || !x->present || !s->bounded) return false;
    pthread_mutex_lock(&s->mu);
    bool r = x->state == ES_ABSENT;
    pthread_mutex_unlock(&s->mu);
    return r;
}

bool clb_store_is_resident(clb_expert_store *s, int layer, int expert) {
    clb_st_expert *x = clb_st_get(s, layer, expert);
    if (!x || !x->present) return false;
    if (!s->bounded) return true;
    pthread_mutex_lock(&s->mu);
    bool r = x->state == ES_RESIDENT;
    pthread_mutex_unlock(&s->mu);
    return r;
}

int clb_store_save_usage(clb_expert_store *s) {
    if (!s || !s->usage_path) return COLIBRI_OK;
    pthread_mutex_lock(&s->mu);
    int rc = clb_cache_save_usage(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void clb_store_get_info(clb_expert_store *s, clb_store_info *o) {
    memset(o, 0, sizeof *o);
    if (!s) return;
    o->bounded = s->bounded;
    o->direct_io = s->cfg.direct_io;
    o->read_path = s->read_path;
    o->guard = s->cfg.guard;
    o->prefetch = s->cfg.prefetch;
    o->packed = s->packed;
    o->interleaved = s->interleaved;
    o->policy = s->cfg.policy;
    o->n_slots = s->n_slots;
    o->io_threads = s->n_threads;
    o->pool_bytes = s->pool_map_bytes;
    o->slot_bytes = s->slot_bytes;
    o->max_expert_bytes = s->max_expert_bytes;
}

void clb_store_layer_stats_get(clb_expert_store *s, int layer, clb_store_layer_stats *out) {
    memset(out, 0, sizeof *out);
    if (!s || layer < 0 || layer >= s->n_layer) return;
    pthread_mutex_lock(&s->mu);
    *out = s->ls[layer];
    pthread_mutex_unlock(&s->mu);
}

void clb_store_loaded(clb_expert_store *s, int xi) { set_pool_pointers(s, &s->ex[xi]); }

int clb_store_lock(clb_expert_store *s, uint64_t *bytes) {
    if (!s || !s->pool) return 0;
    *bytes += s->pool_map_bytes;
    return clb_lock_range(s->pool, s->pool_map_bytes);
}

int clb_store_io_pin_error(const clb_expert_store *s) { return s ? s->io_pin_err : 0; }
