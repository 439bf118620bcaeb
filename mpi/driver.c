/* driver.c — colibri-mpi: `mpirun -np N colibri-mpi COMMAND ...` runs the colibri command line
 * on N ranks with the model's routed experts spread over them (expert parallelism,
 * docs/SCALE.md). Every rank runs the same command on the same inputs through the public API;
 * the engine hands each MoE layer's expert rows to the MPI transport (transport.c), so every
 * rank holds identical state and rank 0's output is the output. Ranks other than 0 write
 * nothing (stdout and --dump-logits go to /dev/null).
 *
 * `colibri-mpi serve`: rank 0 runs the HTTP server, the other ranks follow its engine calls
 * (follow.c). Options of its own, taken out before the command sees the line:
 *   --expert-parallel   accepted for the form of issue 20 (the driver always shares experts)
 *   --mpi-timeout S     longest wait for the other ranks (default 60, env COLIBRI_MPI_TIMEOUT)
 *   --placement FILE    experts balanced by the heat a usage file measured (placement.c)
 * At the start the ranks compare their model file (size and a hash of its first and last
 * MiB); at the end rank 0 prints each rank's share of expert work, bytes and collectives,
 * time in MPI and peak resident memory on stderr. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli.h"
#include "colibri.h"
#include "follow.h"
#include "placement.h"
#include "transport.h"

/* Size and FNV-1a of the first and last MiB of a model file (a directory: its name only). */
static void fingerprint(const char *path, uint64_t out[2]) {
    out[0] = out[1] = 0;
    if (!path) return;
    uint64_t h = 1469598103934665603ull;
    struct stat sb;
    FILE *f = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? fopen(path, "rb") : NULL;
    if (!f) {
        for (const char *p = path; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
        out[1] = h;
        return;
    }
    out[0] = (uint64_t)sb.st_size;
    static unsigned char buf[1 << 20];
    for (int part = 0; part < 2; part++) {
        if (part == 1 && fseeko(f, sb.st_size > (off_t)sizeof buf ? sb.st_size - (off_t)sizeof buf : 0, SEEK_SET)) break;
        const size_t n = fread(buf, 1, sizeof buf, f);
        for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
    }
    fclose(f);
    out[1] = h;
}

static const char *model_arg(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) return argv[i + 1];
        if (!strncmp(argv[i], "--model=", 8)) return argv[i] + 8;
    }
    return NULL;
}

/* VmHWM and VmRSS of this process in bytes (/proc/self/status; getrusage's peak elsewhere) */
static void rss(double *hwm, double *now) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *hwm = (double)ru.ru_maxrss * 1024.0;
    *now = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) *hwm = (double)kb * 1024.0;
        else if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) *now = (double)kb * 1024.0;
    }
    fclose(f);
}

static char DEVNULL[] = "/dev/null", DEVNULL_OPT[] = "--dump-logits=/dev/null";

int main(int argc, char **argv) {
    /* serve calls MPI from its scheduler thread (one thread at a time): SERIALIZED */
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "colibri-mpi: MPI_Init failed\n");
        return 1;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double timeout = 60;
    const char *te = getenv("COLIBRI_MPI_TIMEOUT");
    if (te && atof(te) > 0) timeout = atof(te);
    /* the driver's own options; the rest is the command line */
    int o = 1;
    const char *placement = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--expert-parallel")) continue;
        if (!strcmp(argv[i], "--placement")) {
            if (i + 1 >= argc) {
                if (rank == 0) fprintf(stderr, "colibri-mpi: --placement needs a usage file (MODEL.usage)\n");
                MPI_Finalize();
                return 2;
            }
            placement = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--mpi-timeout")) {
            if (i + 1 >= argc || atof(argv[i + 1]) <= 0) {
                if (rank == 0) fprintf(stderr, "colibri-mpi: --mpi-timeout needs a number of seconds > 0\n");
                MPI_Finalize();
                return 2;
            }
            timeout = atof(argv[++i]);
            continue;
        }
        argv[o++] = argv[i];
    }
    argc = o;
    argv[argc] = NULL;
    clb_mpi_xp t;
    if (clb_mpi_xp_init(&t, MPI_COMM_WORLD, timeout)) MPI_Abort(MPI_COMM_WORLD, 1);
    /* the same model on every rank */
    uint64_t fp[2], *all = calloc((size_t)size * 2, sizeof(uint64_t));
    if (!all) MPI_Abort(MPI_COMM_WORLD, 1);
    fingerprint(model_arg(argc, argv), fp);
    MPI_Request rq;
    clb_mpi_check(&t, MPI_Iallgather(fp, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, t.comm, &rq), "comparing model files");
    clb_mpi_wait(&t, &rq, "comparing model files");
    for (int r = 1; r < size; r++)
        if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) {
            if (rank == 0)
                fprintf(stderr,
                        "colibri-mpi: rank %d's model file differs from rank 0's (%llu bytes, hash %016llx vs "
                        "%llu bytes, hash %016llx): every rank needs the same file\n",
                        r, (unsigned long long)all[2 * r], (unsigned long long)all[2 * r + 1],
                        (unsigned long long)all[0], (unsigned long long)all[1]);
            free(all);
            clb_mpi_xp_free(&t);
            MPI_Finalize();
            return 1;
        }
    free(all);
    clb_mpi_place pl = {0};
    if (placement) {
        if (clb_mpi_place_init(&pl, placement, &t)) {
            clb_mpi_place_free(&pl);
            clb_mpi_xp_free(&t);
            MPI_Finalize();
            return 2;
        }
        t.place = &pl;
    }
    if (rank > 0) {
        if (!freopen("/dev/null", "w", stdout)) MPI_Abort(MPI_COMM_WORLD, 1);
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--dump-logits") && i + 1 < argc) argv[++i] = DEVNULL;
            else if (!strncmp(argv[i], "--dump-logits=", 14)) argv[i] = DEVNULL_OPT;
        }
    }
    const colibri_expert_exec x = clb_mpi_xp_exec(&t);
    colibri_set_default_expert_exec(&x);
    /* serve: rank 0 runs the HTTP server, the other ranks replay its engine calls (follow.c) */
    clb_mpi_follow fl = {.comm = MPI_COMM_NULL};
    if (argc > 1 && !strcmp(argv[1], "serve")) {
        if (provided < MPI_THREAD_SERIALIZED) {
            if (rank == 0) fprintf(stderr, "colibri-mpi: serve needs an MPI with MPI_THREAD_SERIALIZED\n");
            clb_mpi_xp_free(&t);
            MPI_Finalize();
            return 1;
        }
        if (clb_mpi_follow_init(&fl, &t)) MPI_Abort(MPI_COMM_WORLD, 1);
        const cli_serve_ops ops = clb_mpi_serve_ops(&fl);
        cli_set_serve_ops(&ops);
    }
    int rc = cli_main(argc, argv);
    cli_set_serve_ops(NULL);
    clb_mpi_follow_free(&fl);
    fflush(stdout);
    /* each rank's figures to rank 0 */
    enum { NF = 9 };
    double mine[NF] = {(double)rc, (double)t.exchanges, (double)t.floats_mine, (double)t.floats_all,
                       (double)t.bytes_sent, t.time_mpi_s, t.time_wait_s, 0, 0};
    rss(&mine[7], &mine[8]);
    double *fig = rank == 0 ? calloc((size_t)size * NF, sizeof(double)) : NULL;
    if (rank == 0 && !fig) MPI_Abort(MPI_COMM_WORLD, 1);
    clb_mpi_check(&t, MPI_Igather(mine, NF, MPI_DOUBLE, fig, NF, MPI_DOUBLE, 0, t.comm, &rq), "gathering figures");
    clb_mpi_wait(&t, &rq, "the other ranks' end of the command");
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            const double *f = fig + NF * r;
            if ((int)f[0] != rc && r > 0) fprintf(stderr, "colibri-mpi: rank %d ended with status %d\n", r, (int)f[0]);
            if (f[0] != 0 && rc == 0) rc = (int)f[0];
            fprintf(stderr,
                    "colibri-mpi: rank %d/%d: %.1f%% of expert rows, %.0f exchanges, %.3f MiB sent, %.3f s in MPI "
                    "(%.3f s waiting), peak RSS %.1f MiB (at the end %.1f MiB)\n",
                    r, size, f[3] > 0 ? 100.0 * f[2] / f[3] : 0.0, f[1], f[4] / 1048576.0, f[5], f[6],
                    f[7] / 1048576.0, f[8] / 1048576.0);
        }
        free(fig);
        if (t.share_steps) { /* every rank's counts are known here: rank 0 has them all */
            fprintf(stderr, "colibri-mpi: expert work per exchange (%s placement), share of each rank:",
                    t.place ? "--placement" : "round-robin");
            for (int r = 0; r < size; r++) fprintf(stderr, " %.1f%%", 100.0 * t.share_sum[r] / (double)t.share_steps);
            fprintf(stderr, "; the busiest rank's %.1f%% on average (1/N = %.1f%%)\n",
                    100.0 * t.busiest_sum / (double)t.share_steps, 100.0 / size);
        }
    }
    clb_mpi_place_free(&pl);
    clb_mpi_xp_free(&t);
    MPI_Finalize();
    return rc;
}
