/* cli.h — shared helpers of the colibri subcommands (cli/ uses only include/colibri.h and
 * the internal headers it needs for inspection/conversion). */
#ifndef CLB_CLI_H
#define CLB_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Prints "colibri: <msg>" on stderr; returns 1 (the exit status for errors). */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Strict integer/float parsing: the whole string must be a number within [lo, hi]. */
bool cli_int(const char *s, long lo, long hi, long *out);
bool cli_float(const char *s, double lo, double hi, double *out);
/* Parses a size with an optional K/M/G/KiB/MiB/GiB suffix (powers of 1024). */
bool cli_size(const char *s, uint64_t *out);
/* Comma- or space-separated token ids; heap array. false on a malformed list. */
bool cli_token_list(const char *s, int32_t **out, size_t *n);
/* Takes the value of option argv[*i] (advancing *i); prints an error when missing. */
const char *cli_value(int argc, char **argv, int *i);
/* A progress bar on stderr, shown only once `delay` seconds have passed since start. */
typedef struct cli_progress {
    double start, delay, last;
    const char *label;
    bool shown;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *label, double delay);
void cli_progress_update(cli_progress *p, double fraction);
void cli_progress_done(cli_progress *p);
double cli_now(void);
/* The "prompt N tokens in T s ...; generated ..." line of `run --tokens` on stderr. */
void cli_run_timing(size_t n_tok, double t_prompt, long n_gen, double t_gen);

/* colibri-mpi serve (mpi/driver.c): the serve scheduler's two calls that change the engine's
   state go through decode and truncate, so that rank 0 can send each to the other ranks first;
   a rank other than 0 runs follow(ctx, e) instead of the HTTP server (it replays rank 0's
   calls until rank 0 stops; its status is serve's); rank 0 calls done(ctx) once its
   scheduler has stopped (no more calls). NULL ops or members: the plain calls, no follow. */
struct colibri_engine;
struct colibri_batch_tok;
typedef struct cli_serve_ops {
    int (*decode)(void *ctx, struct colibri_engine *e, const struct colibri_batch_tok *toks, size_t n, float *logits,
                  size_t logits_cap);
    int (*truncate)(void *ctx, struct colibri_engine *e, int32_t seq, int32_t n);
    int (*follow)(void *ctx, struct colibri_engine *e);
    void (*done)(void *ctx);
    void *ctx;
} cli_serve_ops;
void cli_set_serve_ops(const cli_serve_ops *ops);

/* The whole command line: `colibri COMMAND ...` (colibri.c). */
int cli_main(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_encrypt(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
