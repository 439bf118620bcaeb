/* follow.c — colibri-mpi serve: rank 0 runs the HTTP server; the other ranks follow its engine.
 *
 * The serve scheduler changes the engine's state with two calls only, colibri_decode and
 * colibri_seq_truncate (cli_set_serve_ops). On rank 0 each is first broadcast (a header, then
 * the batch) on a communicator of its own, then run; every other rank runs the same call on
 * the same arguments, so every rank keeps identical KV caches and every MoE layer's
 * exchange (transport.c) meets the same layer on every rank. Sampling, tokenizing and HTTP
 * stay on rank 0: the next step's tokens reach the others in the next batch.
 *
 * A follower waits for the next call without a deadline (a server may idle for hours); it
 * polls, sleeping once nothing came for a while, so an idle job costs no CPU. A rank that
 * dies ends the job through mpirun, as in the other commands. */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "follow.h"

enum { OP_STOP = 0, OP_DECODE = 1, OP_TRUNCATE = 2 };

static void bcast(clb_mpi_follow *f, void *buf, int count, MPI_Datatype type, const char *what) {
    MPI_Request rq;
    clb_mpi_check(f->t, MPI_Ibcast(buf, count, type, 0, f->comm, &rq), what);
    clb_mpi_wait(f->t, &rq, what);
}

static int root_decode(void *ctx, colibri_engine_t *e, const colibri_batch_tok *toks, size_t n, float *logits,
                       size_t cap) {
    clb_mpi_follow *f = ctx;
    if (n > (size_t)INT_MAX / sizeof *toks) {
        fprintf(stderr, "colibri-mpi: a batch of %zu tokens is too large to send\n", n);
        return 1;
    }
    int64_t h[4] = {OP_DECODE, (int64_t)n, 0, 0};
    bcast(f, h, 4, MPI_INT64_T, "sending a decode step to the other ranks");
    if (n) bcast(f, (void *)toks, (int)(n * sizeof *toks), MPI_BYTE, "sending a decode batch to the other ranks");
    f->steps++;
    return colibri_decode(e, toks, n, logits, cap);
}

static int root_truncate(void *ctx, colibri_engine_t *e, int32_t seq, int32_t n) {
    clb_mpi_follow *f = ctx;
    int64_t h[4] = {OP_TRUNCATE, seq, n, 0};
    bcast(f, h, 4, MPI_INT64_T, "sending a sequence truncation to the other ranks");
    return colibri_seq_truncate(e, seq, n);
}

static void root_done(void *ctx) {
    clb_mpi_follow *f = ctx;
    int64_t h[4] = {OP_STOP, 0, 0, 0};
    bcast(f, h, 4, MPI_INT64_T, "stopping the other ranks");
}

/* the next header from rank 0, however long it takes */
static void wait_idle(clb_mpi_follow *f, MPI_Request *rq) {
    const double t0 = MPI_Wtime();
    for (long spin = 0;; spin++) {
        int done = 0;
        clb_mpi_check(f->t, MPI_Test(rq, &done, MPI_STATUS_IGNORE), "waiting for rank 0's next step");
        if (done) return;
        if (MPI_Wtime() - t0 < 0.05) {
            if (spin > 64) sched_yield();
        } else {
            const struct timespec ts = {0, 1000000}; /* idle: 1 ms naps */
            nanosleep(&ts, NULL);
        }
    }
}

static int follow(void *ctx, colibri_engine_t *e) {
    clb_mpi_follow *f = ctx;
    const size_t n_vocab = (size_t)colibri_n_vocab(e);
    for (;;) {
        int64_t h[4];
        MPI_Request rq;
        clb_mpi_check(f->t, MPI_Ibcast(h, 4, MPI_INT64_T, 0, f->comm, &rq), "waiting for rank 0's next step");
        wait_idle(f, &rq);
        if (h[0] == OP_STOP) return 0;
        if (h[0] == OP_TRUNCATE) {
            colibri_seq_truncate(e, (int32_t)h[1], (int32_t)h[2]); /* fails as on rank 0, if at all */
            continue;
        }
        if (h[0] != OP_DECODE || h[1] < 0 || (uint64_t)h[1] > (uint64_t)INT_MAX / sizeof(colibri_batch_tok)) {
            fprintf(stderr, "colibri-mpi: rank %d: unknown step %lld from rank 0\n", f->t->rank, (long long)h[0]);
            return 1;
        }
        const size_t n = (size_t)h[1];
        if (n > f->toks_cap) {
            colibri_batch_tok *p = realloc(f->toks, n * sizeof *p);
            if (!p) return fprintf(stderr, "colibri-mpi: rank %d: out of memory\n", f->t->rank), 1;
            f->toks = p;
            f->toks_cap = n;
        }
        if (n) bcast(f, f->toks, (int)(n * sizeof *f->toks), MPI_BYTE, "receiving rank 0's decode batch");
        size_t n_logits = 0;
        for (size_t i = 0; i < n; i++) n_logits += f->toks[i].logits != 0;
        if (n_logits * n_vocab > f->logits_cap) {
            float *p = realloc(f->logits, n_logits * n_vocab * sizeof *p);
            if (!p) return fprintf(stderr, "colibri-mpi: rank %d: out of memory\n", f->t->rank), 1;
            f->logits = p;
            f->logits_cap = n_logits * n_vocab;
        }
        f->steps++;
        colibri_decode(e, f->toks, n, f->logits, f->logits_cap); /* a failure: the same on rank 0 */
    }
}

int clb_mpi_follow_init(clb_mpi_follow *f, clb_mpi_xp *t) {
    *f = (clb_mpi_follow){.t = t, .comm = MPI_COMM_NULL};
    if (MPI_Comm_dup(t->comm, &f->comm) != MPI_SUCCESS) {
        fprintf(stderr, "colibri-mpi: MPI_Comm_dup failed\n");
        return 1;
    }
    MPI_Comm_set_errhandler(f->comm, MPI_ERRORS_RETURN);
    return 0;
}

void clb_mpi_follow_free(clb_mpi_follow *f) {
    free(f->toks);
    free(f->logits);
    f->toks = NULL;
    f->logits = NULL;
    if (f->comm != MPI_COMM_NULL) MPI_Comm_free(&f->comm);
}

cli_serve_ops clb_mpi_serve_ops(clb_mpi_follow *f) {
    if (f->t->rank == 0)
        return (cli_serve_ops){.decode = root_decode, .truncate = root_truncate, .done = root_done, .ctx = f};
    return (cli_serve_ops){.follow = follow, .ctx = f};
}
