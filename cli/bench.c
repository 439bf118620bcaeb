/* bench.c — `colibri bench`: prefill and decode speed, latency percentiles, peak RSS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"
#include "attn_opts.h" /* KV cache and attention options */
#include "mem_opts.h" /* expert memory hierarchy options */
#include "rt_opts.h"  /* real-time options */

static void help(void) {
    puts("usage: colibri bench -m MODEL [-p 128] [-n 64] [-d 0] [--threads N] [--reps R] [--json]\n"
         "\n"
         "Evaluates a prompt of P pseudo-random token ids as one prefill, then decodes N tokens one\n"
         "at a time (greedy), R times; reports medians. With -d D, D tokens are in the KV cache\n"
         "before each prefill (evaluated once, untimed; each repetition cuts the cache back to them),\n"
         "so the prefill runs at depth D and the decode at depth D + P (llama-bench's -d).\n"
         "\n"
         "  -p N          prompt tokens (default 128; 0: decode only)\n"
         "  -n N          decoded tokens (default 64; 0: prefill only)\n"
         "  -d N          tokens already in the cache (default 0)\n"
         "  -t, --threads N\n"
         "  --reps R      repetitions (default 3)\n"
         "  --parallel N  N sequences at once (default 1): each gets its own prompt (and depth),\n"
         "                prefilled together; every decode step is one colibri_decode of one\n"
         "                token per sequence (what a server's step does with N streams):\n"
         "                tok/s are the aggregate over the N, latencies per step\n"
         "  --moe-top-k K experts per token\n"
         "  --depth-state FILE  with -d (one sequence): the depth's KV cache from FILE (colibri_state_load);\n"
         "                when FILE does not exist, filled as usual and then written to it: a deep -d\n"
         "                is evaluated once for many runs. An existing FILE that is not this model's\n"
         "                depth (another model, -d or -p, or not a state file) is an error, left as is\n"
         "  --random-decode  decode pseudo-random token ids (as llama-bench does) instead of\n"
         "                the greedy continuation: routing then varies from token to token\n"
         "  --json        one JSON object on stdout: prefill_tok_s, decode_tok_s, decode_p50_ms,\n"
         "                decode_p99_ms, decode_p999_ms, decode_max_ms, peak_rss_bytes, ... and for the decode phase the expert\n"
         "                hit_rate, bytes_read_per_token, lookahead_recall, stall_s_per_token, and\n"
         "                sched_us_per_moe_layer (mean) and _p50 (median over decoded tokens): the\n"
         "                time from a MoE layer's router output to its expert kernels running on\n"
         "                every thread, both expert dispatches, waits for expert reads excluded\n"
         ATTN_OPTS_HELP
         MEM_OPTS_HELP
         RT_OPTS_HELP);
}

/* The scheduler figures so far: its time less the waits for expert reads, MoE layer runs. */
static void sched_read(colibri_engine_t *e, colibri_stats_t *buf, double *sched, double *runs) {
    *buf = colibri_get_stats(e);
    *sched = buf->time_moe_sched_s - buf->expert_stall_s_total;
    *runs = (double)buf->moe_layer_runs;
}

/* --parallel: tokens [off, off + n) of every sequence's prompt (sequence s's at prompt + s *
   plen) as one batch, no logits. */
static int fill_seqs(colibri_engine_t *e, colibri_batch_tok *bt, const int32_t *prompt, size_t plen, long par, long off,
                     long n) {
    size_t k = 0;
    for (long q = 0; q < par; q++)
        for (long i = 0; i < n; i++)
            bt[k++] = (colibri_batch_tok){.seq = (int32_t)q, .token = prompt[(size_t)q * plen + (size_t)(off + i)]};
    return k ? colibri_decode(e, bt, k, NULL, 0) : COLIBRI_OK;
}

/* --parallel: one decode step, a token per sequence; with greedy, next[] becomes each
   sequence's argmax. */
static int step_seqs(colibri_engine_t *e, colibri_batch_tok *bt, int32_t *next, long par, float *logits, int V,
                     int greedy) {
    for (long q = 0; q < par; q++) bt[q] = (colibri_batch_tok){.seq = (int32_t)q, .token = next[q], .logits = 1};
    if (colibri_decode(e, bt, (size_t)par, logits, (size_t)par * (size_t)V)) return -1;
    for (long q = 0; greedy && q < par; q++) {
        const float *l = logits + (size_t)q * (size_t)V;
        int best = 0;
        for (int j = 1; j < V; j++)
            if (l[j] > l[best]) best = j;
        next[q] = best;
    }
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --depth-state: sequence 0 restored from path. 1: restored; 0: no such file (the caller
   fills the depth and writes it there); -1: the file exists but does not hold exactly these
   n token ids (not a state file, corrupt, another model or depth): an error, and the file is
   left as it is (it may be anything the user named by mistake) */
static int depth_state_load(colibri_engine_t *e, const char *path, const int32_t *ids, long n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    char why[256] = "";
    if (colibri_state_load(e, 0, path) != COLIBRI_OK) {
        snprintf(why, sizeof why, "%s", colibri_last_error());
    } else {
        int32_t *got = malloc(sizeof(int32_t) * (size_t)n);
        size_t cnt = 0;
        if (!got || colibri_n_past(e) != (int32_t)n || colibri_seq_tokens(e, 0, got, (size_t)n, &cnt) != COLIBRI_OK ||
            cnt != (size_t)n || memcmp(got, ids, sizeof(int32_t) * (size_t)n))
            snprintf(why, sizeof why, "it holds %d tokens, not bench's %ld of -d %ld", (int)colibri_n_past(e), n, n);
        free(got);
    }
    if (!why[0]) return 1;
    colibri_reset(e);
    cli_fail("bench: --depth-state %s is not this model's saved depth (%s); it is left as it is: remove it or "
             "name a new file",
             path, why);
    return -1;
}

static double pct(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL, *dstate = NULL;
    long np = 128, nn = 64, reps = 3, depth = 0, par = 1, v;
    int json = 0, rand_dec = 0;
    colibri_params p = colibri_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "--random-decode")) { /* like llama-bench: random ids, not greedy */
            rand_dec = 1;
            continue;
        }
        int mo = mem_opts_parse(&p, argc, argv, &i);
        if (mo < 0) return 2;
        if (mo > 0) continue;
        if ((mo = attn_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (mo > 0) continue;
        if ((mo = rt_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (mo > 0) continue;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "--depth-state")) dstate = val;
        else if (!strcmp(a, "-p")) {
            if (!cli_int(val, 0, 1 << 20, &np)) return cli_fail("-p: '%s' is not a count", val), 2;
        } else if (!strcmp(a, "-n")) {
            if (!cli_int(val, 0, 1 << 20, &nn)) return cli_fail("-n: '%s' is not a count", val), 2;
        } else if (!strcmp(a, "-d")) {
            if (!cli_int(val, 0, 1 << 24, &depth)) return cli_fail("-d: '%s' is not a count", val), 2;
        } else if (!strcmp(a, "--parallel")) {
            if (!cli_int(val, 1, COLIBRI_MAX_SEQ, &par))
                return cli_fail("--parallel: '%s' is not in 1..%d", val, COLIBRI_MAX_SEQ), 2;
        } else if (!strcmp(a, "--reps")) {
            if (!cli_int(val, 1, 1000, &reps)) return cli_fail("--reps: '%s' is not in 1..1000", val), 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_int(val, 1, 1024, &v)) return cli_fail("--threads: '%s' is not in 1..1024", val), 2;
            p.n_threads = (int)v;
        } else if (!strcmp(a, "--moe-top-k")) {
            if (!cli_int(val, 1, 1024, &v)) return cli_fail("--moe-top-k: '%s' is not in 1..1024", val), 2;
            p.moe_top_k = (int)v;
        } else {
            return cli_fail("bench: unknown option '%s' (see colibri bench --help)", a), 2;
        }
    }
    if (!model) return cli_fail("bench: no model given (-m MODEL)"), 2;
    if (np + nn == 0) return cli_fail("bench: nothing to measure (-p 0 and -n 0)"), 2;
    if (dstate && (depth == 0 || par > 1)) return cli_fail("bench: --depth-state needs -d N and one sequence"), 2;
    p.max_seq_len = (int)(depth + np + nn + 1);
    p.n_batch = (int)(depth > 0 || np * par >= 512 ? 512 : np > 0 ? np * par : par);
    p.n_seq = (int)par;
    colibri_engine_t *e = colibri_init_params(model, &p);
    if (!e) return cli_fail("%s", colibri_last_error());
    /* as run refuses a prompt longer than its context: what is measured must fit the
       positions the model was made for */
    if (depth + np + nn > colibri_n_ctx_train(e)) {
        const int ctx = colibri_n_ctx_train(e);
        colibri_free(e);
        return cli_fail("bench: -d %ld + -p %ld + -n %ld = %ld tokens do not fit the model's context (%d positions)",
                        depth, np, nn, depth + np + nn, ctx), 2;
    }
    rt_opts_report(e);
    const int V = colibri_n_vocab(e);
    /* sequence s's prompt is prompt + s * (np + depth + 1): its depth tokens after its np + 1 */
    const size_t plen = (size_t)(np + depth + 1);
    int32_t *prompt = malloc(sizeof(int32_t) * plen * (size_t)par);
    const long bmax = np > depth ? np : depth > 0 ? depth : 1; /* tokens per sequence in one batch */
    colibri_batch_tok *bt = malloc(sizeof *bt * (size_t)(par * bmax));
    float *blog = par > 1 ? malloc(sizeof(float) * (size_t)V * (size_t)par) : NULL;
    int32_t *nexts = malloc(sizeof(int32_t) * (size_t)par);
    double *lat = malloc(sizeof(double) * (size_t)(nn * reps));
    double *pre = malloc(sizeof(double) * (size_t)reps), *dec = malloc(sizeof(double) * (size_t)reps);
    double *sch = malloc(sizeof(double) * (size_t)(nn * reps)); /* scheduler us per MoE layer, per token */
    colibri_stats_t *sbuf = malloc(sizeof *sbuf);
    if (!prompt || !lat || !pre || !dec || !sch || !sbuf || !bt || !nexts || (par > 1 && !blog)) {
        free(prompt), free(lat), free(pre), free(dec), free(sch), free(sbuf), free(bt), free(blog), free(nexts);
        colibri_free(e);
        return cli_fail("out of memory");
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < plen * (size_t)par; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        prompt[i] = (int32_t)(x % (uint64_t)V);
    }
    int rc = 0, nl = 0, ns = 0;
    if (depth > 0) { /* the tokens already in the cache: once, untimed */
        double td = cli_now();
        const int loaded = dstate ? depth_state_load(e, dstate, prompt + np + 1, depth) : 0;
        if (loaded < 0) {
            rc = 1;
        } else if (loaded) {
            if (!json) fprintf(stderr, "colibri: depth %ld loaded from %s in %.1f s\n", depth, dstate, cli_now() - td);
        } else if (par > 1 ? fill_seqs(e, bt, prompt, plen, par, np + 1, depth) : colibri_eval(e, prompt + np + 1, (size_t)depth, NULL, 0)) {
            rc = cli_fail("%s", colibri_last_error());
        } else {
            if (!json) fprintf(stderr, "colibri: depth %ld filled in %.1f s\n", depth, cli_now() - td);
            if (dstate && colibri_state_save(e, 0, dstate))
                fprintf(stderr, "colibri: cannot write %s: %s\n", dstate, colibri_last_error());
        }
    }
    mem_acc macc = {0}; /* expert store figures of the decode phases */
    for (long r = 0; r < reps && !rc; r++) {
        if (depth > 0)
            for (long q = 0; q < par; q++) colibri_seq_truncate(e, (int32_t)q, (int32_t)depth);
        else colibri_reset(e);
        double t0 = cli_now();
        if (par > 1 ? fill_seqs(e, bt, prompt, plen, par, 0, np) : colibri_eval(e, prompt, (size_t)np, NULL, 0)) {
            rc = cli_fail("%s", colibri_last_error());
            break;
        }
        double t1 = cli_now();
        pre[r] = np > 0 ? (double)(np * par) / (t1 - t0) : 0;
        for (long q = 0; q < par; q++) nexts[q] = prompt[(size_t)q * plen + (size_t)(np > 0 ? np - 1 : np)];
        mem_acc_phase(e, &macc, -1);
        double s0, r0, s1, r1, dsum = 0;
        sched_read(e, sbuf, &s0, &r0);
        for (long i = 0; i < nn; i++) {
            if (rand_dec)
                for (long q = 0; q < par; q++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    nexts[q] = (int32_t)(x % (uint64_t)V);
                }
            double s = cli_now();
            if (par > 1 ? step_seqs(e, bt, nexts, par, blog, V, !rand_dec) : colibri_forward(e, nexts[0], NULL, &nexts[0])) {
                rc = cli_fail("%s", colibri_last_error());
                break;
            }
            const double dt = cli_now() - s;
            dsum += dt;
            lat[nl++] = dt * 1e3;
            sched_read(e, sbuf, &s1, &r1); /* outside the timed call */
            if (r1 > r0) sch[ns++] = (s1 - s0) / (r1 - r0) * 1e6;
            s0 = s1, r0 = r1;
        }
        dec[r] = nn > 0 ? (double)(nn * par) / dsum : 0;
        mem_acc_phase(e, &macc, +1);
    }
    if (!rc) {
        colibri_stats_t st = colibri_get_stats(e);
        double pre_m = pct(pre, (int)reps, 0.5), dec_m = pct(dec, (int)reps, 0.5);
        double p50 = nl ? pct(lat, nl, 0.5) : 0, p99 = nl ? pct(lat, nl, 0.99) : 0;
        const double p999 = nl ? pct(lat, nl, 0.999) : 0, lmax = nl ? pct(lat, nl, 1.0) : 0;
        const double ntok = nn > 0 ? (double)(nn * par) * (double)reps : 1.0, acq = macc.hits + macc.misses;
        const double sched_us = macc.moe_runs > 0 ? (macc.sched - macc.stall) / macc.moe_runs * 1e6 : 0;
        const double sched_p50 = ns > 0 ? pct(sch, ns, 0.5) : 0;
        const double hit = acq > 0 ? macc.hits / acq : 0, recall = macc.la_true > 0 ? macc.la_hit / macc.la_true : 0;
        if (json) {
            printf("{\"model\":\"%s\",\"parallel\":%ld,\"n_prompt\":%ld,\"n_decode\":%ld,\"depth\":%ld,\"reps\":%ld,"
                   "\"kv_bytes\":%llu,\"kv_bytes_per_token\":%llu,\"prefill_tok_s\":%.3f,"
                   "\"decode_tok_s\":%.3f,\"decode_p50_ms\":%.4f,\"decode_p99_ms\":%.4f,\"decode_p999_ms\":%.4f,\"decode_max_ms\":%.4f,\"peak_rss_bytes\":%llu,"
                   "\"expert_pool_slots\":%d,\"expert_pool_bytes\":%llu,\"mem_accounted_bytes\":%llu,"
                   "\"hit_rate\":%.4f,\"bytes_read_per_token\":%.0f,\"lookahead_recall\":%.4f,"
                   "\"stall_s_per_token\":%.5f,\"prefetch_issued\":%.0f,\"prefetch_used\":%.0f,"
                   "\"sched_us_per_moe_layer\":%.2f,\"sched_us_per_moe_layer_p50\":%.2f,"
                   "\"decode_ms_attention\":%.3f,\"decode_ms_ffn\":%.3f,\"decode_ms_head\":%.3f,"
                   "\"read_path\":\"%s\",\"dense_locked_bytes\":%llu,\"experts_dropped\":%llu}\n",
                   model, par, np, nn, depth, reps, (unsigned long long)st.kv_bytes, (unsigned long long)st.kv_bytes_per_token,
                   pre_m, dec_m, p50, p99, p999, lmax, (unsigned long long)st.peak_rss_bytes,
                   st.expert_pool_slots, (unsigned long long)st.expert_pool_bytes,
                   (unsigned long long)st.mem_accounted_bytes, hit, macc.bytes / ntok, recall, macc.stall / ntok,
                   macc.pf_issued, macc.pf_used, sched_us, sched_p50, macc.t_att / ntok * 1e3,
                   macc.t_moe / ntok * 1e3, macc.t_head / ntok * 1e3, colibri_read_path_name(st.expert_read_path),
                   (unsigned long long)st.dense_locked_bytes, (unsigned long long)st.moe_experts_dropped);
        } else {
            if (par > 1)
                printf("parallel: %ld sequences, each with its own prompt; tokens and tok/s below are their sums, "
                       "latencies per step (a token of each)\n",
                       par);
            printf("model:   %s\nprefill: %ld tokens at depth %ld, %.2f tok/s (median of %ld)\ndecode:  %ld tokens at depth "
                   "%ld, %.2f tok/s (median), per %s p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\npeak RSS: %.1f MiB; KV cache %.1f MiB, "
                   "%llu bytes per token\n",
                   model, np * par, depth, pre_m, reps, nn * par, depth + np, dec_m, par > 1 ? "step" : "token", p50, p99, p999, lmax, st.peak_rss_bytes / 1048576.0,
                   st.kv_bytes / 1048576.0, (unsigned long long)st.kv_bytes_per_token);
            printf("decode time per token: attention %.2f ms, feed-forward %.2f ms, head %.2f ms\n",
                   macc.t_att / ntok * 1e3, macc.t_moe / ntok * 1e3, macc.t_head / ntok * 1e3);
            if (macc.moe_runs > 0)
                printf("scheduler: %.1f us per MoE layer at decode, median over tokens %.1f us (router output "
                       "to expert kernels running)\n",
                       sched_us, sched_p50);
            if (st.expert_pool_slots > 0)
                printf("experts: pool %d slots (%.1f MiB); decode hit rate %.1f%%, %.1f MiB read/token, "
                       "stall %.1f ms/token, lookahead recall %.1f%%\nexpert reads: %s; dense weights locked: %.1f MiB\n",
                       st.expert_pool_slots, st.expert_pool_bytes / 1048576.0, hit * 100, macc.bytes / ntok / 1048576.0,
                       macc.stall / ntok * 1e3, recall * 100, colibri_read_path_name(st.expert_read_path),
                       st.dense_locked_bytes / 1048576.0);
            if (st.moe_experts_dropped)
                printf("moe-miss-drop: %llu expert selections dropped (not in the pool)\n",
                       (unsigned long long)st.moe_experts_dropped);
            if (st.moe_standins_used)
                printf("moe-standin: %llu expert selections computed with their stand-ins (not in the pool)\n",
                       (unsigned long long)st.moe_standins_used);
        }
    }
    free(prompt);
    free(bt);
    free(blog);
    free(nexts);
    free(sch);
    free(sbuf);
    free(lat);
    free(pre);
    free(dec);
    colibri_free(e);
    return rc;
}
