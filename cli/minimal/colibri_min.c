/* colibri_min.c — the command-line tool of the minimal build (make static MINIMAL=1): the
 * engine and `colibri run --tokens` only, for devices where every kilobyte counts. Same
 * options and output as the full tool's `run --tokens`: the ids of the greedy continuation
 * on stdout, the timing line on stderr. Uses include/colibri.h only, like cli/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli.h"
#include "../attn_opts.h"
#include "../mem_opts.h"
#include "../rt_opts.h"
#include "colibri.h"

static void help(void) {
    puts("usage: colibri run -m MODEL --tokens IDS [-n N] [options]   (minimal build)\n"
         "\n"
         "Evaluates the prompt ids and prints the ids of the N most likely next tokens (greedy).\n"
         "This build has no tokenizer, chat, converter, compression or encryption.\n"
         "\n"
         "  -m, --model FILE      .colibri (uncompressed) or .gguf model\n"
         "  --tokens IDS          prompt token ids, comma- or space-separated\n"
         "  -n N                  tokens to generate (default 32)\n"
         "  -t, --threads N       worker threads (default: every CPU)\n"
         "  --max-seq-len N       KV cache length (default: min(model max, 4096))\n"
         "  --batch N             prompt tokens evaluated per batch (default 64)\n"
         "  --config FILE         JSON run-time settings\n"
         ATTN_OPTS_HELP
         MEM_OPTS_HELP
         RT_OPTS_HELP);
}

static int run(int argc, char **argv) {
    const char *model = NULL, *tokens_s = NULL;
    long n_predict = 32, v;
    colibri_params p = colibri_params_default();
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config") && colibri_params_read_config(argv[i + 1], &p))
            return cli_fail("%s", colibri_last_error()), 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return help(), 0;
        int g;
        if ((g = mem_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
        if ((g = attn_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
        if ((g = rt_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "--tokens")) tokens_s = val;
        else if (!strcmp(a, "--config")) continue; /* read above, so that the options win */
        else if (!strcmp(a, "-n")) {
            if (!cli_int(val, 0, 1 << 24, &n_predict)) return cli_fail("-n: '%s' is not a count", val), 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_int(val, 1, 1024, &v)) return cli_fail("--threads: '%s' is not in 1..1024", val), 2;
            p.n_threads = (int)v;
        } else if (!strcmp(a, "--max-seq-len")) {
            if (!cli_int(val, 1, 1 << 24, &v)) return cli_fail("--max-seq-len: '%s' is not a length", val), 2;
            p.max_seq_len = (int)v;
        } else if (!strcmp(a, "--batch")) {
            if (!cli_int(val, 1, 4096, &v)) return cli_fail("--batch: '%s' is not in 1..4096", val), 2;
            p.n_batch = (int)v;
        } else {
            return cli_fail("run: unknown option '%s' (this minimal build runs --tokens only; see --help)", a), 2;
        }
    }
    if (!model) return cli_fail("run: no model given (-m MODEL)"), 2;
    if (!tokens_s) return cli_fail("run: this minimal build needs --tokens IDS (it has no tokenizer)"), 2;
    int32_t *toks;
    size_t n_tok;
    if (!cli_token_list(tokens_s, &toks, &n_tok)) return cli_fail("--tokens: '%s' is not a list of ids", tokens_s), 2;
    if (n_tok == 0) {
        free(toks);
        return cli_fail("--tokens: the prompt is empty"), 2;
    }
    p.ctx_shift = 1;
    colibri_engine_t *e = colibri_init_params(model, &p);
    if (!e) {
        free(toks);
        return cli_fail("%s", colibri_last_error());
    }
    rt_opts_report(e);
    int rc = 0;
    int32_t next = -1;
    double t0 = cli_now();
    if (n_tok > (size_t)colibri_max_seq_len(e)) {
        rc = cli_fail("run: the prompt (%zu tokens) does not fit the context (max_seq_len %d)", n_tok, colibri_max_seq_len(e));
    } else if (colibri_eval(e, toks, n_tok - 1, NULL, 0) || colibri_forward(e, toks[n_tok - 1], NULL, &next)) {
        rc = cli_fail("%s", colibri_last_error());
    }
    double t1 = cli_now();
    for (long i = 0; !rc && i < n_predict; i++) {
        printf(i ? " %d" : "%d", next);
        if (i + 1 < n_predict && colibri_forward(e, next, NULL, &next)) {
            putchar('\n');
            rc = cli_fail("%s", colibri_last_error());
        }
    }
    if (!rc) {
        if (n_predict > 0) putchar('\n');
        fflush(stdout);
        double t2 = cli_now();
        cli_run_timing(n_tok, t1 - t0, n_predict, t2 - t1);
        mem_opts_report(e); /* expert pool figures, when a pool is in use */
    }
    free(toks);
    colibri_free(e);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "run")) return run(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "--version")) return printf("colibri %s (minimal)\n", colibri_version()), 0;
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return help(), 0;
    return cli_fail("usage: colibri run -m MODEL --tokens IDS [-n N] (this minimal build has only run --tokens)"), 2;
}
