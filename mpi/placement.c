/* placement.c — colibri-mpi --placement FILE: the routed experts placed by measured heat.
 *
 * FILE is the usage file the pinned cache policy writes (`--usage-stats`, docs/MEMORY.md):
 * "colibri-usage 1", "n_layer n_expert", then per layer the routing count of each expert.
 * Rank 0 reads it and sends the counts to every rank, which all compute the same table: per
 * layer (each MoE layer's exchange waits for its busiest rank), the experts in decreasing
 * count (ties: lower index first) each go to the rank with the least count so far among the
 * ranks that hold fewer than ceil(n_expert / N) of the layer's experts (ties: lower rank).
 * The cap keeps memory balanced — every rank still holds dense + 1/N of the experts — while
 * the greedy order balances the work. Placement changes who computes, never what: the
 * logits stay identical. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

/* Parses FILE into p->count (rank 0); returns 0 or 1 with a one-line message on stderr. */
static int parse(clb_mpi_place *p, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return fprintf(stderr, "colibri-mpi: --placement %s: %s\n", path, strerror(errno)), 1;
    int nl = 0, ne = 0, rc = 1;
    char magic[32] = "";
    if (fscanf(f, "%31s %d", magic, &rc) != 2 || strcmp(magic, "colibri-usage") || rc != 1 ||
        fscanf(f, "%d %d", &nl, &ne) != 2 || nl < 1 || ne < 1 || nl > (1 << 16) || ne > (1 << 16)) {
        fprintf(stderr, "colibri-mpi: --placement %s: not a usage file (\"colibri-usage 1\", then n_layer n_expert)\n",
                path);
        fclose(f);
        return 1;
    }
    p->n_layer = nl;
    p->n_expert = ne;
    p->count = calloc((size_t)nl * (size_t)ne, sizeof *p->count);
    if (!p->count) return fclose(f), fprintf(stderr, "colibri-mpi: out of memory\n"), 1;
    for (size_t i = 0; i < (size_t)nl * (size_t)ne; i++) {
        unsigned long long v;
        if (fscanf(f, "%llu", &v) != 1 || v > (1ull << 62)) {
            fprintf(stderr, "colibri-mpi: --placement %s: %zu counts for %d x %d experts, or one out of range\n", path,
                    i, nl, ne);
            fclose(f);
            return 1;
        }
        p->count[i] = v;
    }
    fclose(f);
    return 0;
}

typedef struct {
    uint64_t count;
    int expert;
} heat;

static int hotter(const void *a, const void *b) {
    const heat *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->expert - y->expert;
}

int clb_mpi_place_init(clb_mpi_place *p, const char *path, clb_mpi_xp *t) {
    *p = (clb_mpi_place){.path = path, .max_layer = -1, .max_expert = -1};
    int64_t h[3] = {0, 0, 0};
    if (t->rank == 0) {
        h[0] = parse(p, path);
        h[1] = p->n_layer;
        h[2] = p->n_expert;
    }
    MPI_Request rq;
    clb_mpi_check(t, MPI_Ibcast(h, 3, MPI_INT64_T, 0, t->comm, &rq), "sending the placement");
    clb_mpi_wait(t, &rq, "the placement from rank 0");
    if (h[0]) return 1;
    p->n_layer = (int)h[1];
    p->n_expert = (int)h[2];
    const size_t n = (size_t)p->n_layer * (size_t)p->n_expert;
    if (t->rank > 0 && !(p->count = calloc(n, sizeof *p->count))) MPI_Abort(MPI_COMM_WORLD, 1);
    clb_mpi_check(t, MPI_Ibcast(p->count, (int)n, MPI_UINT64_T, 0, t->comm, &rq), "sending the placement");
    clb_mpi_wait(t, &rq, "the placement from rank 0");
    p->owner = calloc(n, sizeof *p->owner);
    heat *order = calloc((size_t)p->n_expert, sizeof *order);
    uint64_t *load = calloc((size_t)t->n_ranks, sizeof *load);
    int *held = calloc((size_t)t->n_ranks, sizeof *held);
    if (!p->owner || !order || !load || !held) MPI_Abort(MPI_COMM_WORLD, 1);
    const int cap = (p->n_expert + t->n_ranks - 1) / t->n_ranks;
    for (int l = 0; l < p->n_layer; l++) {
        for (int x = 0; x < p->n_expert; x++) order[x] = (heat){p->count[(size_t)l * p->n_expert + x], x};
        qsort(order, (size_t)p->n_expert, sizeof *order, hotter);
        memset(load, 0, sizeof *load * (size_t)t->n_ranks);
        memset(held, 0, sizeof *held * (size_t)t->n_ranks);
        for (int i = 0; i < p->n_expert; i++) {
            int best = -1;
            for (int r = 0; r < t->n_ranks; r++)
                if (held[r] < cap && (best < 0 || load[r] < load[best])) best = r;
            p->owner[(size_t)l * p->n_expert + order[i].expert] = best;
            load[best] += order[i].count;
            held[best]++;
        }
    }
    free(order);
    free(load);
    free(held);
    p->rank = t->rank;
    return 0;
}

void clb_mpi_place_free(clb_mpi_place *p) {
    free(p->count);
    free(p->owner);
    p->count = NULL;
    p->owner = NULL;
}

int32_t clb_mpi_place_owner(void *ctx, int32_t layer, int32_t expert) {
    clb_mpi_xp *t = ctx;
    clb_mpi_place *p = t->place;
    if (layer > p->max_layer) p->max_layer = layer;
    if (expert > p->max_expert) p->max_expert = expert;
    if (layer < 0 || expert < 0 || layer >= p->n_layer || expert >= p->n_expert) {
        if (!p->reported && p->rank == 0)
            fprintf(stderr, "colibri-mpi: --placement %s holds counts for %d layers x %d experts; the model has more\n",
                    p->path, p->n_layer, p->n_expert);
        p->reported = 1;
        return -1;
    }
    return p->owner[(size_t)layer * p->n_expert + expert];
}

int clb_mpi_place_check(clb_mpi_place *p) {
    if (p->max_layer + 1 == p->n_layer && p->max_expert + 1 == p->n_expert) return 0;
    if (!p->reported && p->rank == 0)
        fprintf(stderr, "colibri-mpi: --placement %s holds counts for %d layers x %d experts; the model has %d x %d\n",
                p->path, p->n_layer, p->n_expert, p->max_layer + 1, p->max_expert + 1);
    p->reported = 1;
    return 1;
}
