/* serve.c — `colibri serve`: options, start-up, signals and graceful shutdown. The HTTP side
 * is serve_http.c, the model's thread serve_sched.c, the OpenAI shapes serve_openai.c. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "engine_opts.h"
#include "serve.h"

static void help(void) {
    printf("usage: colibri serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [options]\n"
           "\n"
           "An OpenAI-compatible HTTP server (docs/SERVER.md): POST /v1/chat/completions,\n"
           "/v1/completions, /tokenize, /detokenize; GET /v1/models, /health, /metrics, /v1/experts,\n"
           "and a chat page with a live view of the experts at /. N slots decode together: each\n"
           "step evaluates one token of every running request (and the next chunk of a new\n"
           "prompt) as one batch, so each MoE layer reads each selected expert once for all.\n"
           "\n"
           "  -m, --model PATH      .colibri file, .gguf file or Hugging Face directory\n"
           "  --host ADDR           address to listen on (default 127.0.0.1); another than loopback\n"
           "                        needs --api-key or --api-key-file, or --no-api-key-ok\n"
           "  --port N              port (default 8080; 0 = any free port, printed on stderr)\n"
           "  --parallel N          slots: requests decoded at once (default 4)\n"
           "  --ctx-size N          context of each slot in tokens, prompt + output (default:\n"
           "                        min(model max, 4096)); same as --max-seq-len\n"
           "  --queue N             requests waiting beyond the slots before 503 (default 16)\n"
           "  --api-key KEY         require Authorization: Bearer KEY on every route but /health\n"
           "                        and the page (env COLIBRI_API_KEY)\n"
           "  --api-key-file FILE   ... the key read from FILE's first line\n"
           "  --no-api-key-ok       allow a non-loopback --host without a key\n"
           "  --no-cache-prompt     start every request from an empty KV cache (default: a slot keeps\n"
           "                        its cache, and a request that begins with the tokens it holds, such\n"
           "                        as a chat's next turn, evaluates only the rest; per request:\n"
           "                        \"cache_prompt\": false)\n"
           "  --alias NAME          the model id of /v1/models (default: the file's name)\n"
           "  --max-body SIZE       request body limit (default 8MiB; 413 beyond)\n"
           "  --max-tokens N        tokens one request may generate (default: the context)\n"
           "  --max-connections N   open connections at once (default 64)\n"
           "  --timeout S           idle connection timeout in seconds (default 30)\n"
           "  --config FILE         JSON run-time settings (threads, mem_budget, ...)\n");
    fputs(ENGINE_OPTS_HELP, stdout);
    printf("  -h, --help            this help\n"
           "\nSIGINT / SIGTERM: stop accepting, cancel running requests, exit 0.\n");
}

static cli_serve_ops g_ops;

void cli_set_serve_ops(const cli_serve_ops *ops) {
    if (ops) g_ops = *ops;
    else memset(&g_ops, 0, sizeof g_ops);
}

int srv_decode(colibri_engine_t *e, const colibri_batch_tok *toks, size_t n, float *logits, size_t logits_cap) {
    return g_ops.decode ? g_ops.decode(g_ops.ctx, e, toks, n, logits, logits_cap)
                        : colibri_decode(e, toks, n, logits, logits_cap);
}

int srv_truncate(colibri_engine_t *e, int32_t seq, int32_t n) {
    return g_ops.truncate ? g_ops.truncate(g_ops.ctx, e, seq, n) : colibri_seq_truncate(e, seq, n);
}

static bool is_loopback(const char *h) {
    return !strcmp(h, "127.0.0.1") || !strcmp(h, "::1") || !strcmp(h, "localhost") || !strncmp(h, "127.", 4);
}

static char *read_key_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char buf[4096];
    char *k = fgets(buf, sizeof buf, f) ? strdup(buf) : strdup("");
    fclose(f);
    if (k) k[strcspn(k, "\r\n")] = 0;
    return k;
}

int cmd_serve(int argc, char **argv) {
    const char *model = NULL, *host = "127.0.0.1", *alias = NULL, *key = getenv("COLIBRI_API_KEY"), *key_file = NULL;
    long port = 8080, parallel = 4, ctx = 0, queue = 16, max_conns = 64, timeout = 30, max_tokens = 0;
    uint64_t max_body = 8u << 20;
    bool no_key_ok = false, reuse = true;
    colibri_params p = colibri_params_default();
    if (!engine_opts_config(&p, argc, argv)) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        int g = engine_opts_parse(&p, argc, argv, &i);
        if (g < 0) return 2;
        if (g > 0) continue;
        if (!strcmp(a, "--no-api-key-ok")) {
            no_key_ok = true;
            continue;
        }
        if (!strcmp(a, "--no-cache-prompt")) {
            reuse = false;
            continue;
        }
        static const char *const opts[] = {"-m", "--model", "--host", "--port", "--parallel", "-np", "--ctx-size", "-c",
                                           "--queue", "--api-key", "--api-key-file", "--alias", "--max-body",
                                           "--max-tokens", "--max-connections", "--timeout", "--config"};
        bool known = false;
        for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) known |= !strcmp(a, opts[k]);
        if (!known) return cli_fail("serve: unknown option '%s' (see colibri serve --help)", a), 2;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "--host")) host = val;
        else if (!strcmp(a, "--alias")) alias = val;
        else if (!strcmp(a, "--api-key")) key = val;
        else if (!strcmp(a, "--api-key-file")) key_file = val;
        else if (!strcmp(a, "--config")) continue;
        else if (!strcmp(a, "--port") && !cli_int(val, 0, 65535, &port)) return cli_fail("--port: '%s' is not in 0..65535", val), 2;
        else if ((!strcmp(a, "--parallel") || !strcmp(a, "-np")) && !cli_int(val, 1, COLIBRI_MAX_SEQ, &parallel))
            return cli_fail("--parallel: '%s' is not in 1..%d", val, COLIBRI_MAX_SEQ), 2;
        else if ((!strcmp(a, "--ctx-size") || !strcmp(a, "-c")) && !cli_int(val, 2, 1 << 24, &ctx))
            return cli_fail("--ctx-size: '%s' is not a length", val), 2;
        else if (!strcmp(a, "--queue") && !cli_int(val, 0, 1 << 16, &queue)) return cli_fail("--queue: '%s' is not a count", val), 2;
        else if (!strcmp(a, "--max-connections") && !cli_int(val, 1, 1 << 16, &max_conns))
            return cli_fail("--max-connections: '%s' is not a count", val), 2;
        else if (!strcmp(a, "--timeout") && !cli_int(val, 1, 86400, &timeout)) return cli_fail("--timeout: '%s' is not in 1..86400 s", val), 2;
        else if (!strcmp(a, "--max-tokens") && !cli_int(val, 1, 1 << 24, &max_tokens))
            return cli_fail("--max-tokens: '%s' is not a count", val), 2;
        else if (!strcmp(a, "--max-body") && (!cli_size(val, &max_body) || max_body < 16 || max_body > (1ull << 32)))
            return cli_fail("--max-body: '%s' is not a size in 16 B..4 GiB", val), 2;
    }
    if (!model) return cli_fail("serve: no model given (-m MODEL)"), 2;
    srv *S = calloc(1, sizeof *S);
    if (!S) return cli_fail("out of memory");
    if (key_file) {
        if (!(S->api_key = read_key_file(key_file))) return free(S), cli_fail("--api-key-file %s: cannot read it", key_file), 2;
    } else if (key) {
        S->api_key = strdup(key);
    }
    if (S->api_key && !*S->api_key) return free(S->api_key), free(S), cli_fail("serve: the API key is empty"), 2;
    S->api_key_len = S->api_key ? strlen(S->api_key) : 0;
    if (!S->api_key && !is_loopback(host) && !no_key_ok)
        return free(S), cli_fail("serve: --host %s is not loopback: give --api-key or --api-key-file (or --no-api-key-ok)", host), 2;
    if (ctx) p.max_seq_len = (int32_t)ctx;
    p.n_seq = (int32_t)parallel;
    p.ctx_shift = 0; /* a full slot ends its request (finish_reason "length") */
    /* signals go to the main thread's sigwait alone: block them before any thread starts */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    colibri_engine_t *e = colibri_init_params(model, &p);
    if (!e) return free(S->api_key), free(S), cli_fail("%s", colibri_last_error());
    int rc = 0;
    struct MHD_Daemon *d = NULL;
    if (g_ops.follow) { /* a rank of colibri-mpi serve other than 0: rank 0 serves */
        rc = g_ops.follow(g_ops.ctx, e);
        goto out;
    }
    if (!colibri_has_tokenizer(e)) {
        rc = cli_fail("serve: %s has no tokenizer this build can use", model);
        goto out;
    }
    const char *base = strrchr(model, '/');
    base = base && base[1] ? base + 1 : model;
    S->e = e;
    S->model_id = alias ? alias : base;
    S->max_body = (size_t)max_body;
    S->n_ctx = colibri_max_seq_len(e);
    S->max_tokens = max_tokens ? max_tokens : S->n_ctx;
    S->t_start = (double)time(NULL);
    if (srv_sched_start(&S->sched, e, (int)parallel, (int)queue, p.n_batch, reuse)) {
        rc = cli_fail("serve: out of memory for %ld slots", parallel);
        goto out;
    }
    int bound = 0;
    if (!(d = srv_http_start(S, host, (int)port, (int)max_conns, (int)timeout, &bound))) {
        rc = 1;
        goto out;
    }
    fprintf(stderr, "colibri: serving %s on http://%s%s%s:%d/ (%ld slots of %d tokens%s)\n", S->model_id,
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", bound, parallel, S->n_ctx,
            S->api_key ? ", API key required" : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "colibri: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    atomic_store(&S->shutting_down, true);
out:
    srv_sched_stop(&S->sched); /* cancels running and queued requests: their streams end */
    if (g_ops.done && !g_ops.follow) g_ops.done(g_ops.ctx); /* colibri-mpi: the other ranks stop */
    /* the cancelled streams write their last chunks and data: [DONE] before the daemon closes
       their connections (a connection thread may not have run since the cancel) */
    for (int i = 0; d && i < 1000 && atomic_load(&S->live_streams) > 0; i++) {
        const struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    srv_http_stop(d);           /* waits for the connection threads */
    colibri_free(e);
    free(S->api_key);
    free(S);
    return rc;
}
