/* engine_opts.h — the run-time options of the engine shared by `colibri run`, `serve` and
 * `perplexity`: threads, context length, batch, MoE options, and through mem_opts.h /
 * attn_opts.h the expert memory hierarchy, the KV cache and the real-time options
 * (rt_opts.h). Header-only, like those two. */
#ifndef CLB_CLI_ENGINE_OPTS_H
#define CLB_CLI_ENGINE_OPTS_H

#include <string.h>

#include "attn_opts.h"
#include "cli.h"
#include "colibri.h"
#include "mem_opts.h"
#include "rt_opts.h"

#define ENGINE_OPTS_HELP                                                                           \
    "  -t, --threads N       worker threads (default: online CPUs)\n"                            \
    "  --max-seq-len N       KV cache length (default: min(model max, 4096))\n"                  \
    "  --batch N             prompt tokens evaluated per batch (default 64)\n"                   \
    "  --moe-top-k K         experts per token (default: the model's)\n"                         \
    "  --moe-top-p P         dynamic k: the fewest experts whose routing probability reaches P\n" \
    "  --moe-k-min K, --moe-k-max K   bounds of the dynamic k\n"                                 \
    "  --router-temperature T  divide router logits by T before scoring\n"                       \
    ATTN_OPTS_HELP MEM_OPTS_HELP RT_OPTS_HELP

/* --config FILE read before the other options, so that the command line's settings win over
   the file's. false after an error message. */
static inline bool engine_opts_config(colibri_params *p, int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config") && colibri_params_read_config(argv[i + 1], p))
            return cli_fail("%s", colibri_last_error()), false;
    return true;
}

/* Returns 1 when argv[*i] was an engine option (consumed), 0 when not, -1 on a bad value
   (message printed). */
static inline int engine_opts_parse(colibri_params *p, int argc, char **argv, int *i) {
    int g;
    if ((g = mem_opts_parse(p, argc, argv, i)) != 0) return g;
    if ((g = attn_opts_parse(p, argc, argv, i)) != 0) return g;
    if ((g = rt_opts_parse(p, argc, argv, i)) != 0) return g;
    const char *a = argv[*i], *val;
    static const char *const opts[] = {"-t", "--threads", "--max-seq-len", "--batch", "--moe-top-k", "--moe-top-p",
                                       "--moe-k-min", "--moe-k-max", "--router-temperature"};
    bool known = false;
    for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) known |= !strcmp(a, opts[k]);
    if (!known) return 0;
    if (!(val = cli_value(argc, argv, i))) return -1;
    long v;
    double d;
    if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (!cli_int(val, 1, 1024, &v)) return cli_fail("--threads: '%s' is not in 1..1024", val), -1;
        p->n_threads = (int)v;
    } else if (!strcmp(a, "--max-seq-len")) {
        if (!cli_int(val, 1, 1 << 24, &v)) return cli_fail("--max-seq-len: '%s' is not a length", val), -1;
        p->max_seq_len = (int)v;
    } else if (!strcmp(a, "--batch")) {
        if (!cli_int(val, 1, 4096, &v)) return cli_fail("--batch: '%s' is not in 1..4096", val), -1;
        p->n_batch = (int)v;
    } else if (!strcmp(a, "--moe-top-k")) {
        if (!cli_int(val, 1, 1024, &v)) return cli_fail("--moe-top-k: '%s' is not in 1..1024", val), -1;
        p->moe_top_k = (int)v;
    } else if (!strcmp(a, "--moe-top-p")) {
        if (!cli_float(val, 0, 1, &d)) return cli_fail("--moe-top-p: '%s' is not in 0..1", val), -1;
        p->moe_top_p = (float)d;
    } else if (!strcmp(a, "--moe-k-min") || !strcmp(a, "--moe-k-max")) {
        if (!cli_int(val, 1, 1024, &v)) return cli_fail("%s: '%s' is not in 1..1024", a, val), -1;
        if (!strcmp(a, "--moe-k-min")) p->moe_k_min = (int)v;
        else p->moe_k_max = (int)v;
    } else {
        if (!cli_float(val, 1e-3, 1e3, &d)) return cli_fail("--router-temperature: '%s' is not in 0.001..1000", val), -1;
        p->router_temperature = (float)d;
    }
    return 1;
}

#endif
