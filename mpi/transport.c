/* transport.c — expert rows over MPI: one MPI_Iallgatherv per MoE layer and batch.
 *
 * Why all-gather of rows, not an all-reduce of partial layer outputs: an all-reduce sums
 * each rank's partial weighted sum, which changes the order of the float additions (and MPI
 * may pick any reduction tree), so logits would differ from one process in the last bits.
 * Gathering the rows themselves copies bytes and leaves the weighted sums to every rank, in
 * selection order, exactly as one process computes them. It also moves fewer bytes: per
 * token k rows of n_embd floats leave their owners once (each rank receives the rows it did
 * not compute), where a ring all-reduce of the [n_embd] output sends 2 (N-1)/N of it per rank
 * per token whatever k, and the gather needs no arithmetic.
 *
 * The exchange starts non-blocking (engine.c computes the shared expert meanwhile); its
 * completion polls MPI_Test with a deadline, so a rank that died or hangs ends the job with a
 * message instead of a hang. */
#include "transport.h"

#include "placement.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

void clb_mpi_check(clb_mpi_xp *t, int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "colibri-mpi: rank %d of %d: %s failed: %s; ending the job\n", t->rank, t->n_ranks, what, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

void clb_mpi_wait(clb_mpi_xp *t, MPI_Request *req, const char *what) {
    const double t0 = MPI_Wtime();
    for (long spin = 0;; spin++) {
        int done = 0;
        clb_mpi_check(t, MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
        if (done) return;
        if (MPI_Wtime() - t0 > t->timeout_s) {
            fprintf(stderr,
                    "colibri-mpi: rank %d of %d: no answer from the other ranks within %.0f s (%s): a rank died "
                    "or hangs; ending the job\n",
                    t->rank, t->n_ranks, t->timeout_s, what);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        if (spin > 64) sched_yield(); /* ranks may share cores (--oversubscribe) */
    }
}

static int xp_begin(void *ctx, const float *send, int64_t send_floats, float *recv, const int64_t *counts) {
    clb_mpi_xp *t = ctx;
    if (t->exchanges == 0 && t->place && clb_mpi_place_check(t->place)) return 1;
    const double t0 = MPI_Wtime();
    int64_t off = 0;
    for (int r = 0; r < t->n_ranks; r++) {
        if (counts[r] < 0 || counts[r] > INT_MAX || off > INT_MAX) {
            fprintf(stderr, "colibri-mpi: rank %d: an exchange of %lld floats exceeds MPI's int counts\n", t->rank,
                    (long long)(off + counts[r]));
            return 1;
        }
        t->counts[r] = (int)counts[r];
        t->displs[r] = (int)off;
        off += counts[r];
    }
    clb_mpi_check(t, MPI_Iallgatherv(send, (int)send_floats, MPI_FLOAT, recv, t->counts, t->displs, MPI_FLOAT,
                                     t->comm, &t->req),
                  "MPI_Iallgatherv of expert rows");
    t->active = 1;
    t->exchanges++;
    if (off > 0) {
        double busiest = 0;
        for (int r = 0; r < t->n_ranks; r++) {
            const double sh = (double)counts[r] / (double)off;
            t->share_sum[r] += sh;
            if (sh > busiest) busiest = sh;
        }
        t->busiest_sum += busiest;
        t->share_steps++;
    }
    t->floats_mine += (uint64_t)send_floats;
    t->floats_all += (uint64_t)off;
    t->bytes_sent += (uint64_t)send_floats * sizeof(float) * (uint64_t)(t->n_ranks - 1);
    t->bytes_recv += (uint64_t)(off - send_floats) * sizeof(float);
    t->time_mpi_s += MPI_Wtime() - t0;
    return 0;
}

static int xp_end(void *ctx) {
    clb_mpi_xp *t = ctx;
    if (!t->active) return 1;
    const double t0 = MPI_Wtime();
    clb_mpi_wait(t, &t->req, "the expert rows of a MoE layer");
    t->active = 0;
    const double dt = MPI_Wtime() - t0;
    t->time_mpi_s += dt;
    t->time_wait_s += dt;
    return 0;
}

int clb_mpi_xp_init(clb_mpi_xp *t, MPI_Comm comm, double timeout_s) {
    *t = (clb_mpi_xp){.timeout_s = timeout_s, .req = MPI_REQUEST_NULL};
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(comm, &t->comm) != MPI_SUCCESS) {
        fprintf(stderr, "colibri-mpi: MPI_Comm_dup failed\n");
        return 1;
    }
    MPI_Comm_set_errhandler(t->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(t->comm, &t->rank);
    MPI_Comm_size(t->comm, &t->n_ranks);
    t->counts = calloc((size_t)t->n_ranks, sizeof(int));
    t->displs = calloc((size_t)t->n_ranks, sizeof(int));
    t->share_sum = calloc((size_t)t->n_ranks, sizeof(double));
    if (!t->counts || !t->displs || !t->share_sum) {
        fprintf(stderr, "colibri-mpi: out of memory\n");
        return 1;
    }
    return 0;
}

void clb_mpi_xp_free(clb_mpi_xp *t) {
    free(t->counts);
    free(t->displs);
    free(t->share_sum);
    t->counts = t->displs = NULL;
    t->share_sum = NULL;
    if (t->comm != MPI_COMM_NULL) MPI_Comm_free(&t->comm);
}

colibri_expert_exec clb_mpi_xp_exec(clb_mpi_xp *t) {
    return (colibri_expert_exec){
        .rank = t->rank, .n_ranks = t->n_ranks, .begin = xp_begin, .end = xp_end,
                                 .owner = t->place ? clb_mpi_place_owner : NULL, .ctx = t};
}
