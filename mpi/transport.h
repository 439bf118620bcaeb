/* transport.h — the MPI transport behind colibri_expert_exec (include/colibri.h). */
#ifndef CLB_MPI_TRANSPORT_H
#define CLB_MPI_TRANSPORT_H

#include <mpi.h>
#include <stdint.h>

#include "colibri.h"

typedef struct {
    MPI_Comm comm;
    int rank, n_ranks;
    double timeout_s;        /* longest wait for the other ranks before ending the job */
    MPI_Request req;
    int active;              /* an exchange is in flight */
    int *counts, *displs;    /* [n_ranks] for MPI_Iallgatherv */
    /* figures of this rank (mpi/driver.c prints them) */
    uint64_t exchanges;      /* collectives (one per MoE layer per batch) */
    uint64_t floats_mine;    /* floats of the expert rows this rank computed */
    uint64_t floats_all;     /* ... and of every rank's (the share of expert work: mine / all) */
    uint64_t bytes_sent;     /* payload bytes this rank's rows take to the other ranks */
    uint64_t bytes_recv;     /* payload bytes of the other ranks' rows */
    double time_mpi_s;       /* inside MPI calls (start and completion of the exchanges) */
    double time_wait_s;      /* of it: waiting for completion after the shared expert */
    /* each rank's share of the expert rows per exchange (every rank sees every rank's
       counts): summed over the exchanges, and the busiest rank's share summed */
    double *share_sum;       /* [n_ranks] */
    double busiest_sum;
    uint64_t share_steps;    /* exchanges with rows */
    struct clb_mpi_place *place; /* --placement (placement.c), or NULL: round robin */
} clb_mpi_xp;

/* comm is duplicated; errors on it return (and end the job with a message) instead of
   aborting inside MPI. Returns 0 or nonzero with a message on stderr. */
int clb_mpi_xp_init(clb_mpi_xp *t, MPI_Comm comm, double timeout_s);
void clb_mpi_xp_free(clb_mpi_xp *t);
/* The executor that runs over t (t->place's owner, else round robin). */
colibri_expert_exec clb_mpi_xp_exec(clb_mpi_xp *t);
/* Waits for *req until done or t->timeout_s passes; then rank t->rank prints what it waited
   for and ends the whole job (MPI_Abort). Returns only on success. */
void clb_mpi_wait(clb_mpi_xp *t, MPI_Request *req, const char *what);
/* Checks an MPI return code: on failure prints the MPI error and ends the job. */
void clb_mpi_check(clb_mpi_xp *t, int rc, const char *what);

#endif
