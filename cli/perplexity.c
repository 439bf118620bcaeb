/* perplexity.c — `colibri perplexity`: chunked perplexity of a text file.
 *
 * Definition (docs/MODEL.md): ids = [BOS] + tokenize(text, no special tokens); the ids are cut
 * into n = len / ctx chunks of ctx tokens (a trailing partial chunk is dropped); each chunk is
 * evaluated from position 0 with an empty cache and scores its tokens 1..ctx-1;
 * ppl = exp(total NLL / (n * (ctx - 1))).
 * --kl-divergence also evaluates every chunk with a second engine holding f32 caches on the
 * plain attention path (the exact reference of docs/ATTENTION.md) and reports the mean and
 * the largest KL(P_f32 || P) over the scored positions, the share of positions whose argmax
 * agrees, and the reference perplexity — what a cache type (-ctk / -ctv) costs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "attn_opts.h" /* KV cache and attention options */
#include "colibri.h"

static void help(void) {
    puts("usage: colibri perplexity -m MODEL -f FILE [--ctx N] [--threads N]\n"
         "\n"
         "  -f, --file PATH   text to score\n"
         "  --ctx N           chunk length in tokens (default 128)\n"
         "  --chunks N        score at most N chunks\n"
         "  -t, --threads N   worker threads\n"
         "  --kl-divergence   also score with f32 caches (plain path): KL divergence of these\n"
         "                    options' distributions from it, argmax agreement, both perplexities\n"
         ATTN_OPTS_HELP);
}

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    long ctx = 128, max_chunks = -1, v;
    bool kl = false;
    colibri_params p = colibri_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--kl-divergence")) {
            kl = true;
            continue;
        }
        int g = attn_opts_parse(&p, argc, argv, &i);
        if (g < 0) return 2;
        if (g > 0) continue;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = val;
        else if (!strcmp(a, "--ctx")) {
            if (!cli_int(val, 2, 1 << 20, &ctx)) return cli_fail("--ctx: '%s' is not a length >= 2", val), 2;
        } else if (!strcmp(a, "--chunks")) {
            if (!cli_int(val, 1, 1L << 30, &max_chunks)) return cli_fail("--chunks: '%s' is not a count", val), 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_int(val, 1, 1024, &v)) return cli_fail("--threads: '%s' is not in 1..1024", val), 2;
            p.n_threads = (int)v;
        } else {
            return cli_fail("perplexity: unknown option '%s'", a), 2;
        }
    }
    if (!model || !file) return cli_fail("perplexity: need -m MODEL and -f FILE"), 2;
    FILE *f = fopen(file, "rb");
    if (!f) return cli_fail("%s: cannot open", file);
    fseek(f, 0, SEEK_END);
    long fl = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = fl >= 0 ? malloc((size_t)fl + 1) : NULL;
    if (!text || fread(text, 1, (size_t)fl, f) != (size_t)fl) {
        fclose(f);
        free(text);
        return cli_fail("%s: cannot read", file);
    }
    fclose(f);
    text[fl] = 0;
    p.max_seq_len = (int)ctx;
    p.n_batch = (int)(ctx < 512 ? ctx : 512);
    colibri_engine_t *e = colibri_init_params(model, &p), *r = NULL;
    if (!e) {
        free(text);
        return cli_fail("%s", colibri_last_error());
    }
    if (kl) {
        colibri_params q = p;
        q.cache_type_k = q.cache_type_v = COLIBRI_KV_F32;
        q.flash_attn = -1;
        if (!(r = colibri_init_params(model, &q))) {
            colibri_free(e);
            free(text);
            return cli_fail("%s", colibri_last_error());
        }
    }
    int rc = 0;
    size_t n = 0, cap = (size_t)fl + 2;
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    const size_t V = (size_t)colibri_n_vocab(e);
    float *logits = malloc(sizeof(float) * V * (size_t)ctx);
    float *ref = kl ? malloc(sizeof(float) * V * (size_t)ctx) : NULL;
    if (!ids || !logits || (kl && !ref)) {
        rc = cli_fail("out of memory");
        goto out;
    }
    int32_t bos = colibri_bos_id(e);
    size_t off = bos >= 0 ? 1 : 0;
    if (colibri_tokenize(e, text, (size_t)fl, 0, 0, ids + off, cap - off, &n)) {
        rc = cli_fail("%s", colibri_last_error());
        goto out;
    }
    if (bos >= 0) ids[0] = bos;
    n += off;
    long chunks = (long)(n / (size_t)ctx);
    if (max_chunks > 0 && chunks > max_chunks) chunks = max_chunks;
    if (chunks == 0) {
        rc = cli_fail("%s: %zu tokens, fewer than one chunk of %ld", file, n, ctx);
        goto out;
    }
    double nll = 0, t0 = cli_now(), ref_nll = 0, kl_sum = 0, kl_max = 0;
    long agree = 0;
    cli_progress pr;
    cli_progress_init(&pr, "perplexity", 0.0);
    for (long c = 0; c < chunks; c++) {
        const int32_t *chunk = ids + (size_t)c * (size_t)ctx;
        colibri_reset(e);
        if (colibri_eval(e, chunk, (size_t)ctx, logits, V * (size_t)ctx)) {
            rc = cli_fail("%s", colibri_last_error());
            goto out;
        }
        if (r) {
            colibri_reset(r);
            if (colibri_eval(r, chunk, (size_t)ctx, ref, V * (size_t)ctx)) {
                rc = cli_fail("%s", colibri_last_error());
                goto out;
            }
        }
        for (long j = 1; j < ctx; j++) {
            const float *l = logits + (size_t)(j - 1) * V;
            double mx = l[0], sum = 0;
            size_t am = 0;
            for (size_t k = 1; k < V; k++)
                if (l[k] > mx) mx = l[k], am = k;
            for (size_t k = 0; k < V; k++) sum += exp((double)l[k] - mx);
            const double lse = log(sum) + mx;
            nll += lse - (double)l[chunk[j]];
            if (!r) continue;
            /* KL(P_ref || P) = sum_k p_ref(k) (log p_ref(k) - log p(k)) */
            const float *q = ref + (size_t)(j - 1) * V;
            double rmx = q[0], rsum = 0, d = 0;
            size_t ram = 0;
            for (size_t k = 1; k < V; k++)
                if (q[k] > rmx) rmx = q[k], ram = k;
            for (size_t k = 0; k < V; k++) rsum += exp((double)q[k] - rmx);
            const double rlse = log(rsum) + rmx;
            for (size_t k = 0; k < V; k++) {
                const double lr = (double)q[k] - rlse;
                d += exp(lr) * (lr - ((double)l[k] - lse));
            }
            d = d > 0 ? d : 0; /* rounding of two equal distributions */
            kl_sum += d;
            kl_max = d > kl_max ? d : kl_max;
            agree += am == ram;
            ref_nll += rlse - (double)q[chunk[j]];
        }
        cli_progress_update(&pr, (double)(c + 1) / (double)chunks);
        if (c + 1 < chunks && !pr.shown) continue;
        fprintf(stderr, " ppl so far %.4f", exp(nll / ((double)(c + 1) * (double)(ctx - 1))));
    }
    cli_progress_done(&pr);
    double ppl = exp(nll / ((double)chunks * (double)(ctx - 1)));
    printf("perplexity: %.4f (%ld chunks of %ld tokens, %ld scored)\n", ppl, chunks, ctx, chunks * (ctx - 1));
    if (r) {
        const double ns = (double)chunks * (double)(ctx - 1), rppl = exp(ref_nll / ns);
        printf("f32 reference: perplexity %.4f (%+.4f %%); KL divergence mean %.6g max %.6g; "
               "argmax agreement %.4f %%\n",
               rppl, 100.0 * (ppl / rppl - 1.0), kl_sum / ns, kl_max, 100.0 * (double)agree / ns);
    }
    fprintf(stderr, "colibri: %.1f tokens/s\n", (double)chunks * (double)ctx / (cli_now() - t0));
out:
    free(ids);
    free(logits);
    free(ref);
    free(text);
    colibri_free(r);
    colibri_free(e);
    return rc;
}
