/* placement.h — colibri-mpi --placement FILE: experts balanced over the ranks by measured heat. */
#ifndef CLB_MPI_PLACEMENT_H
#define CLB_MPI_PLACEMENT_H

#include <stdint.h>

#include "transport.h"

typedef struct clb_mpi_place {
    const char *path;
    int n_layer, n_expert;   /* the usage file's shape */
    uint64_t *count;         /* [n_layer][n_expert] routing counts from the file */
    int32_t *owner;          /* [n_layer][n_expert] rank of each expert */
    int max_layer, max_expert; /* the largest indices the engine asked about */
    int rank, reported;
} clb_mpi_place;

/* Rank 0 reads path and sends its counts; every rank computes the same table. 0, or 1 on
   every rank after rank 0 printed why (unreadable, malformed). */
int clb_mpi_place_init(clb_mpi_place *p, const char *path, clb_mpi_xp *t);
void clb_mpi_place_free(clb_mpi_place *p);
/* colibri_expert_exec.owner (ctx: the clb_mpi_xp whose place is set); -1 beyond the file */
int32_t clb_mpi_place_owner(void *ctx, int32_t layer, int32_t expert);
/* After the engine asked about every expert: 0 when the file's shape is the model's, else
   1 (rank 0 says so). */
int clb_mpi_place_check(clb_mpi_place *p);

#endif
