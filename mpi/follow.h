/* follow.h — colibri-mpi serve: rank 0 serves HTTP, the other ranks replay its engine calls. */
#ifndef CLB_MPI_FOLLOW_H
#define CLB_MPI_FOLLOW_H

#include <stddef.h>

#include "cli.h"
#include "colibri.h"
#include "transport.h"

typedef struct {
    clb_mpi_xp *t;
    MPI_Comm comm;            /* the serve calls' own channel (a duplicate of t->comm) */
    colibri_batch_tok *toks;  /* [toks_cap] a follower's copy of rank 0's batch */
    size_t toks_cap;
    float *logits;            /* [logits_cap] a follower's logits (unused, the engine writes them) */
    size_t logits_cap;
    uint64_t steps;           /* decode steps sent (rank 0) or replayed */
} clb_mpi_follow;

int clb_mpi_follow_init(clb_mpi_follow *f, clb_mpi_xp *t);
void clb_mpi_follow_free(clb_mpi_follow *f);
/* rank 0: decode/truncate/done that broadcast first; other ranks: follow */
cli_serve_ops clb_mpi_serve_ops(clb_mpi_follow *f);

#endif
