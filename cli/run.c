/* run.c — `colibri run`: greedy continuation of a prompt given as token ids. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"
#include "generate.h"
#include "engine_opts.h" /* threads, MoE, KV cache and expert memory options */

static void help(void) {
    printf("usage: colibri run -m MODEL (-p TEXT | --tokens IDS) [-n N] [options]\n"
         "\n"
         "With -p: tokenizes TEXT with the model's tokenizer, samples a continuation and streams\n"
         "the prompt and its continuation to stdout as text. With --tokens: evaluates the token\n"
         "ids and prints the greedy continuation's ids on stdout, separated by spaces. Timings go\n"
         "to stderr, on a line of their own.\n"
         "\n"
         "  -m, --model PATH      .colibri file, .gguf file or Hugging Face directory\n"
         "  -p, --prompt TEXT     prompt text (BOS added as the tokenizer says; added and special\n"
         "                        tokens written in it are parsed, as Hugging Face does)\n"
         "  -f, --file PATH       read the prompt text from a file\n"
         "  --no-display-prompt   print only the continuation, not the prompt before it\n"
         "  --no-parse-special    special tokens written in the prompt stay text\n"
         "  --tokens IDS          prompt token ids, comma or space separated (e.g. 1,300,447)\n"
         "  -n, --n-predict N     tokens to generate (default 32 with --tokens, 128 with -p)\n"
         "  --config FILE         JSON run-time settings (threads, max_seq_len, moe_top_k, ...)\n"
         "  --dump-logits FILE    write the logits of every prompt position as raw little-endian\n"
         "                        float32 [n_tokens][n_vocab]\n");
    /* (three strings: one would pass the 4095 characters C99 promises to hold) */
    fputs(ENGINE_OPTS_HELP, stdout);
    printf(CTX_OPTS_HELP
         "  -h, --help            this help\n"
         "\nSampling (with -p; --tokens is always greedy):\n%s", gen_options_help());
}

static colibri_engine_t *open_engine(const char *model, const char *config, const colibri_params *p) {
    (void)config; /* read into p before the other options (cmd_run), so that they win */
    colibri_engine_t *e = colibri_init_params(model, p);
    if (e) rt_opts_report(e);
    return e;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *b = malloc(cap + 1);
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) b[n] = 0;
    return b;
}

/* --prompt-cache FILE: restores FILE when it exists and keeps the longest prefix of ids[0..n)
   it holds, leaving at least the last id to evaluate. Returns how many ids the cache already
   holds (0 without a file), -1 after an error message. *held: the file held exactly ids[0..n-1). */
static long prompt_cache_load(colibri_engine_t *e, const char *path, const int32_t *ids, size_t n, bool *held) {
    *held = false;
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return 0; /* no file yet: it is written after the prompt */
    fclose(f);
    size_t have = 0, k = 0;
    if (colibri_state_load(e, 0, path)) return cli_fail("--prompt-cache %s", colibri_last_error()), -1;
    colibri_seq_tokens(e, 0, NULL, 0, &have);
    int32_t *h = malloc(sizeof(int32_t) * (have + 1));
    if (!h || colibri_seq_tokens(e, 0, h, have, &have)) {
        free(h);
        return cli_fail("out of memory"), -1;
    }
    while (k < have && k + 1 < n && h[k] == ids[k]) k++;
    *held = have == n - 1 && k == n - 1;
    free(h);
    colibri_truncate(e, (int32_t)k);
    k = (size_t)colibri_n_past(e);
    fprintf(stderr, "colibri: prompt cache %s: %zu of the prompt's %zu tokens reused\n", path, k, n);
    return (long)k;
}

/* Evaluates ids[start .. n - 1) (the prompt but its last id) and saves that state to path,
   unless the file held exactly it already. */
static int prompt_cache_fill(colibri_engine_t *e, const char *path, const int32_t *ids, size_t n, long start, bool held) {
    if (colibri_eval(e, ids + start, n - 1 - (size_t)start, NULL, 0)) return cli_fail("%s", colibri_last_error());
    if (held) return 0;
    if (colibri_state_save(e, 0, path)) return cli_fail("--prompt-cache %s", colibri_last_error());
    fprintf(stderr, "colibri: prompt cache %s: saved %d tokens\n", path, colibri_n_past(e));
    return 0;
}

/* --dump-logits FILE: evaluates ids[0..n) with the logits of every position and writes them
   to path (n x n_vocab little-endian f32); *next: the argmax of the last row (may be NULL).
   The file is opened first, so an unwritable path fails before any work. */
static int dump_logits(colibri_engine_t *e, const int32_t *ids, size_t n, const char *path, int32_t *next) {
    const size_t V = (size_t)colibri_n_vocab(e);
    FILE *f = fopen(path, "wb");
    if (!f) return cli_fail("--dump-logits %s: %s", path, strerror(errno));
    float *logits = malloc(sizeof(float) * V * n);
    int rc = 0;
    if (!logits) rc = cli_fail("out of memory for %zu x %zu logits", n, V);
    else if (colibri_eval(e, ids, n, logits, V * n)) rc = cli_fail("%s", colibri_last_error());
    else if (fwrite(logits, sizeof(float), V * n, f) != V * n) rc = cli_fail("--dump-logits %s: %s", path, strerror(errno));
    if (fclose(f) && !rc) rc = cli_fail("--dump-logits %s: %s", path, strerror(errno));
    if (!rc && next) {
        const float *last = logits + (n - 1) * V;
        *next = 0;
        for (size_t i = 1; i < V; i++)
            if (last[i] > last[*next]) *next = (int32_t)i;
    }
    free(logits);
    return rc;
}

static int run_text(const char *model, const char *prompt, const char *pfile, const char *config,
                    const colibri_params *p, gen_opts *go, const ctx_opts *co, bool parse_special, const char *dump) {
    char *owned = NULL;
    if (pfile && !(prompt = owned = read_text(pfile))) return cli_fail("%s: cannot read the prompt file", pfile);
    if (go->n_predict == -2) go->n_predict = 128;
    colibri_engine_t *e = open_engine(model, config, p);
    if (!e) {
        free(owned);
        return cli_fail("%s", colibri_last_error());
    }
    int rc = 0;
    size_t len = strlen(prompt), n = 0, cap = len + 16;
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    colibri_sampler_t *s = colibri_sampler_new(&go->sampling, colibri_n_vocab(e));
    gen_result res = {0};
    if (!ids || !s) {
        rc = cli_fail("%s", s ? "out of memory" : colibri_last_error());
    } else if (colibri_tokenize(e, prompt, len, 1, parse_special, ids, cap, &n)) {
        rc = cli_fail("%s", colibri_last_error());
    } else if (n == 0) {
        rc = cli_fail("run: the prompt has no tokens");
    } else if (n > (size_t)colibri_max_seq_len(e)) {
        rc = cli_fail("run: the prompt (%zu tokens) does not fit the context (max_seq_len %d)", n, colibri_max_seq_len(e));
    } else if (dump && (rc = dump_logits(e, ids, n, dump, NULL))) {
        /* reported */
    } else {
        if (dump) colibri_reset(e); /* the generation below evaluates the prompt its own way */
        bool held;
        const long start = prompt_cache_load(e, co->prompt_cache, ids, n, &held);
        ctx_opts_keep(e, co, ids, n);
        go->prompt_cached = start > 0 ? (size_t)start : 0;
        go->save_state = co->prompt_cache && !held ? co->prompt_cache : NULL;
        if (start < 0) {
            rc = 1;
        } else if (!(rc = gen_run(e, ids, n, go, stdout, NULL, s, &res))) {
            if (!res.ends_line) fputc('\n', stdout);
            fflush(stdout); /* the text first: the timings then start a line of their own */
            if (go->save_state) fprintf(stderr, "colibri: prompt cache %s: saved %zu tokens\n", go->save_state, n - 1);
            fprintf(stderr, "colibri: prompt %zu tokens, %.1f tok/s; generated %zu tokens, %.1f tok/s%s\n", res.n_prompt,
                    res.t_prompt > 0 ? res.n_prompt / res.t_prompt : 0.0, res.n_gen,
                    res.t_gen > 0 ? res.n_gen / res.t_gen : 0.0,
                    res.stopped_eog ? " (end of text)" : res.stopped_stop ? " (stop string)"
                    : res.hit_limit ? " (the context is full: max_seq_len, --no-context-shift)" : "");
        }
    }
    free(res.text);
    free(ids);
    free(owned);
    colibri_sampler_free(s);
    colibri_free(e);
    return rc;
}

int cmd_run(int argc, char **argv) {
    const char *model = NULL, *tokens_s = NULL, *dump = NULL, *config = NULL, *prompt = NULL, *pfile = NULL;
    colibri_params p = colibri_params_default();
    p.ctx_shift = 1; /* a full context shifts (--no-context-shift stops) */
    gen_opts go;
    gen_opts_default(&go);
    go.n_predict = -2; /* unset */
    ctx_opts co = {0};
    bool parse_special = true;
    go.prompt_echo = GEN_ECHO_PRINT;
    if (!engine_opts_config(&p, argc, argv)) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        int g = gen_parse_option(&go, argc, argv, &i);
        if (g < 0) return 2;
        if (g > 0) continue;
        if ((g = engine_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
        if ((g = ctx_opts_parse(&p, &co, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
#define VAL()                                          \
    do {                                               \
        if (!(val = cli_value(argc, argv, &i))) return 2; \
    } while (0)
        if (!strcmp(a, "--no-display-prompt")) { go.prompt_echo = GEN_ECHO_QUIET; continue; }
        if (!strcmp(a, "--no-parse-special")) { parse_special = false; continue; }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); model = val; }
        else if (!strcmp(a, "--tokens")) { VAL(); tokens_s = val; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); prompt = val; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VAL(); pfile = val; }
        else if (!strcmp(a, "--dump-logits")) { VAL(); dump = val; }
        else if (!strcmp(a, "--config")) { VAL(); config = val; }
        else {
            return cli_fail("run: unknown option '%s' (see colibri run --help)", a), 2;
        }
#undef VAL
    }
    if (!model) return cli_fail("run: no model given (-m MODEL)"), 2;
    if (!!tokens_s + !!prompt + !!pfile != 1)
        return cli_fail("run: give exactly one prompt: -p TEXT, -f FILE or --tokens IDS"), 2;
    go.ctx_shift = p.ctx_shift;
    if (dump && co.prompt_cache) return cli_fail("run: --dump-logits evaluates the whole prompt; no --prompt-cache with it"), 2;
    if (!tokens_s) return run_text(model, prompt, pfile, config, &p, &go, &co, parse_special, dump);
    long n_predict = go.n_predict == -2 ? 32 : go.n_predict;
    if (n_predict < 0) return cli_fail("run: --tokens needs -n >= 0"), 2;
    int32_t *toks;
    size_t n_tok;
    if (!cli_token_list(tokens_s, &toks, &n_tok)) return cli_fail("--tokens: '%s' is not a list of ids", tokens_s), 2;
    if (n_tok == 0) {
        free(toks);
        return cli_fail("--tokens: the prompt is empty"), 2;
    }
    colibri_engine_t *e = open_engine(model, config, &p);
    if (!e) {
        free(toks);
        return cli_fail("%s", colibri_last_error());
    }
    int rc = 0;
    int32_t next = -1;
    if (n_tok > (size_t)colibri_max_seq_len(e)) {
        rc = cli_fail("run: the prompt (%zu tokens) does not fit the context (max_seq_len %d)", n_tok,
                      colibri_max_seq_len(e));
        goto out;
    }
    double t0 = cli_now();
    if (dump) {
        if ((rc = dump_logits(e, toks, n_tok, dump, &next))) goto out;
    } else {
        bool held;
        const long start = prompt_cache_load(e, co.prompt_cache, toks, n_tok, &held);
        ctx_opts_keep(e, &co, toks, n_tok);
        if (start < 0 || (co.prompt_cache && prompt_cache_fill(e, co.prompt_cache, toks, n_tok, start, held))) {
            rc = 1;
            goto out;
        }
        const size_t from = co.prompt_cache ? n_tok - 1 : 0;
        if (colibri_eval(e, toks + from, n_tok - 1 - from, NULL, 0) || colibri_forward(e, toks[n_tok - 1], NULL, &next)) {
            rc = cli_fail("%s", colibri_last_error());
            goto out;
        }
    }
    double t1 = cli_now();
    for (long i = 0; i < n_predict; i++) {
        printf(i ? " %d" : "%d", next);
        fflush(stdout);
        if (i + 1 == n_predict) break;
        if (!p.ctx_shift && colibri_n_past(e) >= colibri_max_seq_len(e)) {
            fprintf(stderr, "colibri: the context is full (max_seq_len %d): stopped after %ld tokens (--no-context-shift)\n",
                    colibri_max_seq_len(e), i + 1);
            n_predict = i + 1;
            break;
        }
        if (colibri_forward(e, next, NULL, &next)) {
            putchar('\n');
            rc = cli_fail("%s", colibri_last_error());
            goto out;
        }
    }
    if (n_predict > 0) putchar('\n');
    fflush(stdout);
    double t2 = cli_now();
    cli_run_timing(n_tok, t1 - t0, n_predict, t2 - t1);
    mem_opts_report(e); /* expert pool figures, when a pool is in use */
out:
    free(toks);
    colibri_free(e);
    return rc;
}
