/* perplexity.c — `colibri perplexity`: chunked perplexity of a text file.
 *
 * Definition (docs/MODEL.md): ids = [BOS] + tokenize(text, no special tokens); the ids are cut
 * into n = len / ctx chunks of ctx tokens (a trailing partial chunk is dropped); each chunk is
 * evaluated from position 0 with an empty cache and scores its tokens 1..ctx-1;
 * ppl = exp(total NLL / (n * (ctx - 1))).
 * A comparison evaluates every chunk with a second engine, the reference, and reports the
 * mean and the largest KL(P_ref || P) over the scored positions, the share of positions whose
 * argmax agrees, and the reference perplexity:
 *   --kl-divergence  the exact run: f32 caches on the plain attention path (the exact
 *                    reference of docs/ATTENTION.md), every expert in memory, none dropped —
 *                    what the options cost together (without memory options: what a cache
 *                    type, -ctk / -ctv, costs);
 *   --kl-memory      the same options with every expert in memory and none dropped — what
 *                    the expert memory options cost alone (with a pool, only --moe-miss-drop
 *                    changes the logits: docs/MEMORY.md).
 * With a pool the expert store's figures of the run follow (hit rate, bytes read per
 * evaluated token, lookahead recall, selections dropped). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine_opts.h" /* threads, batch, MoE, KV cache, attention and expert memory options */
#include "colibri.h"

static void help(void) {
    puts("usage: colibri perplexity -m MODEL -f FILE [--ctx N] [--chunks N] [options]\n"
         "\n"
         "  -f, --file PATH   text to score\n"
         "  --ctx N           chunk length in tokens (default 128; the KV cache length unless\n"
         "                    --max-seq-len asks for more)\n"
         "  --chunks N        score at most N chunks\n"
         "  --config FILE     JSON run-time settings (as colibri run)\n"
         "  --kl-divergence   also score with the exact run (f32 caches on the plain path, every\n"
         "                    expert in memory, none dropped): KL divergence of these options'\n"
         "                    distributions from it, argmax agreement, both perplexities\n"
         "  --kl-memory       the same against these options with every expert in memory and\n"
         "                    none dropped: what --mem-budget / --expert-pool / --moe-miss-drop / --moe-standin cost\n"
         "  (here --max-seq-len defaults to --ctx and --batch to min(ctx, 512); with a pool\n"
         "  the expert store's figures are printed: hit rate, bytes read per token, drops)\n"
         ENGINE_OPTS_HELP);
}

/* The reference run of a comparison. */
typedef enum kl_ref { KL_NONE, KL_EXACT, KL_MEMORY } kl_ref;

/* With a pool: the expert store's figures over the whole run, per evaluated token. */
static void print_expert_stats(colibri_engine_t *e, double n_tok) {
    colibri_stats_t *s = malloc(sizeof *s);
    if (!s) return;
    *s = colibri_get_stats(e);
    if (s->expert_pool_slots > 0) {
        double run = 0; /* selections computed (every token's kept experts, all layers) */
        for (int l = 0; l < s->n_layers && l < COLIBRI_STATS_MAX_LAYERS; l++)
            for (int x = 0; x < s->n_experts && x < COLIBRI_STATS_MAX_EXPERTS; x++) run += s->expert_counts[l][x];
        const double acq = (double)(s->expert_hits_total + s->expert_misses_total);
        const double sel = run + (double)s->moe_experts_dropped;
        printf("experts: pool %d slots (%llu bytes); hit rate %.2f %% (%llu hits, %llu misses); %.0f bytes read "
               "per token; lookahead recall %.2f %%; prefetch %llu issued, %llu used; dropped %llu of %.0f "
               "selections (%.2f %%, %.4f per token); stand-ins %llu (%.2f %%)\n",
               s->expert_pool_slots, (unsigned long long)s->expert_pool_bytes,
               acq > 0 ? 100.0 * (double)s->expert_hits_total / acq : 0.0, (unsigned long long)s->expert_hits_total,
               (unsigned long long)s->expert_misses_total, (double)s->expert_bytes_read_total / n_tok,
               s->lookahead_true ? 100.0 * (double)s->lookahead_hit / (double)s->lookahead_true : 0.0,
               (unsigned long long)s->prefetch_issued, (unsigned long long)s->prefetch_used,
               (unsigned long long)s->moe_experts_dropped, sel,
               sel > 0 ? 100.0 * (double)s->moe_experts_dropped / sel : 0.0, (double)s->moe_experts_dropped / n_tok,
               (unsigned long long)s->moe_standins_used, sel > 0 ? 100.0 * (double)s->moe_standins_used / sel : 0.0);
    }
    free(s);
}

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    long ctx = 128, max_chunks = -1;
    kl_ref kl = KL_NONE;
    colibri_params p = colibri_params_default();
    if (!engine_opts_config(&p, argc, argv)) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--kl-divergence") || !strcmp(a, "--kl-memory")) {
            const kl_ref k = a[5] == 'd' ? KL_EXACT : KL_MEMORY;
            if (kl != KL_NONE && kl != k)
                return cli_fail("perplexity: --kl-divergence and --kl-memory compare with different runs; give one"), 2;
            kl = k;
            continue;
        }
        int g = engine_opts_parse(&p, argc, argv, &i);
        if (g < 0) return 2;
        if (g > 0) continue;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = val;
        else if (!strcmp(a, "--config")) continue; /* read before the other options */
        else if (!strcmp(a, "--ctx")) {
            if (!cli_int(val, 2, 1 << 20, &ctx)) return cli_fail("--ctx: '%s' is not a length >= 2", val), 2;
        } else if (!strcmp(a, "--chunks")) {
            if (!cli_int(val, 1, 1L << 30, &max_chunks)) return cli_fail("--chunks: '%s' is not a count", val), 2;
        } else {
            return cli_fail("perplexity: unknown option '%s' (see colibri perplexity --help)", a), 2;
        }
    }
    if (!model || !file) return cli_fail("perplexity: need -m MODEL and -f FILE"), 2;
    if (p.max_seq_len > 0 && p.max_seq_len < ctx)
        return cli_fail("perplexity: --max-seq-len %d is shorter than a chunk (--ctx %ld)", p.max_seq_len, ctx), 2;
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
    if (p.max_seq_len == 0) p.max_seq_len = (int)ctx;
    if (p.n_batch == 0) p.n_batch = (int)(ctx < 512 ? ctx : 512);
    colibri_engine_t *e = colibri_init_params(model, &p), *r = NULL;
    if (!e) {
        free(text);
        return cli_fail("%s", colibri_last_error());
    }
    rt_opts_report(e);
    if (kl != KL_NONE) {
        colibri_params q = mem_opts_unbounded(&p);
        if (kl == KL_EXACT) {
            q.cache_type_k = q.cache_type_v = COLIBRI_KV_F32;
            q.flash_attn = -1;
        }
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
    float *ref = r ? malloc(sizeof(float) * V * (size_t)ctx) : NULL;
    if (!ids || !logits || (r && !ref)) {
        rc = cli_fail("out of memory");
        goto out;
    }
    int32_t bos = colibri_bos_id(e);
    size_t off = bos >= 0 ? 1 : 0;
    int st = colibri_tokenize(e, text, (size_t)fl, 0, 0, ids + off, cap - off, &n);
    if (st == COLIBRI_ERR_ARG && n > cap - off) { /* more ids than bytes (byte tokens, word markers) */
        int32_t *more = realloc(ids, sizeof(int32_t) * (n + off));
        if (!more) {
            rc = cli_fail("out of memory for %zu token ids", n + off);
            goto out;
        }
        ids = more;
        cap = n + off;
        st = colibri_tokenize(e, text, (size_t)fl, 0, 0, ids + off, cap - off, &n);
    }
    if (st) {
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
        printf("%s reference: perplexity %.4f (%+.4f %%); KL divergence mean %.6g max %.6g; "
               "argmax agreement %.4f %%\n",
               kl == KL_EXACT ? "f32" : "unbounded", rppl, 100.0 * (ppl / rppl - 1.0), kl_sum / ns, kl_max,
               100.0 * (double)agree / ns);
    }
    print_expert_stats(e, (double)chunks * (double)ctx);
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
