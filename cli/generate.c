/* generate.c — prompt evaluation, sampling, streaming detokenization and stop strings. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "generate.h"

void gen_opts_default(gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->sampling = colibri_sampling_default();
}

const char *gen_options_help(void) {
    return "  -n, --n-predict N     tokens to generate (default 128; -1 = until end of text)\n"
           "  --temp T              temperature (default 0.8; 0 = greedy)\n"
           "  --top-k K             keep the K most likely tokens (default 40; 0 = off)\n"
           "  --top-p P             nucleus sampling (default 0.95; 1 = off)\n"
           "  --min-p P             drop tokens below P x the best (default 0.05; 0 = off)\n"
           "  --repeat-penalty R    CTRL-style repetition penalty (default 1 = off)\n"
           "  --frequency-penalty F, --presence-penalty P   OpenAI-style penalties (default 0)\n"
           "  --penalty-last-n N    tokens the penalties look back over (default 64)\n"
           "  --seed S              sampling seed (default 0): same seed, same text\n"
           "  --stop STR            stop when STR is generated (repeatable, not printed)\n"
           "  --ignore-eos          keep generating after an end-of-text token\n"
           "  Order: penalties, top-k, temperature, softmax, top-p, min-p, draw.\n";
}

int gen_parse_option(gen_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    long l;
    double d;
    colibri_sampling *s = &o->sampling;
    if (!strcmp(a, "--ignore-eos")) {
        o->ignore_eos = true;
        return 1;
    }
    static const char *const opts[] = {"-n", "--n-predict", "--temp", "--top-k", "--top-p", "--min-p",
                                       "--repeat-penalty", "--frequency-penalty", "--presence-penalty",
                                       "--penalty-last-n", "--seed", "--stop"};
    bool known = false;
    for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) known |= !strcmp(a, opts[k]);
    if (!known) return 0;
    if (!(v = cli_value(argc, argv, i))) return -1;
    if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        if (!cli_int(v, -1, 1 << 24, &l)) return cli_fail("%s: '%s' is not a count", a, v), -1;
        o->n_predict = l;
    } else if (!strcmp(a, "--temp")) {
        if (!cli_float(v, 0, 100, &d)) return cli_fail("--temp: '%s' is not in 0..100", v), -1;
        s->temperature = (float)d;
    } else if (!strcmp(a, "--top-k")) {
        if (!cli_int(v, 0, 1 << 24, &l)) return cli_fail("--top-k: '%s' is not a count", v), -1;
        s->top_k = (int32_t)l;
    } else if (!strcmp(a, "--top-p")) {
        if (!cli_float(v, 0, 1, &d)) return cli_fail("--top-p: '%s' is not in 0..1", v), -1;
        s->top_p = (float)d;
    } else if (!strcmp(a, "--min-p")) {
        if (!cli_float(v, 0, 1, &d)) return cli_fail("--min-p: '%s' is not in 0..1", v), -1;
        s->min_p = (float)d;
    } else if (!strcmp(a, "--repeat-penalty")) {
        if (!cli_float(v, 1e-3, 100, &d)) return cli_fail("--repeat-penalty: '%s' is not in 0.001..100", v), -1;
        s->repeat_penalty = (float)d;
    } else if (!strcmp(a, "--frequency-penalty")) {
        if (!cli_float(v, -10, 10, &d)) return cli_fail("--frequency-penalty: '%s' is not in -10..10", v), -1;
        s->frequency_penalty = (float)d;
    } else if (!strcmp(a, "--presence-penalty")) {
        if (!cli_float(v, -10, 10, &d)) return cli_fail("--presence-penalty: '%s' is not in -10..10", v), -1;
        s->presence_penalty = (float)d;
    } else if (!strcmp(a, "--penalty-last-n")) {
        if (!cli_int(v, 0, 1 << 20, &l)) return cli_fail("--penalty-last-n: '%s' is not a count", v), -1;
        s->penalty_last_n = (int32_t)l;
    } else if (!strcmp(a, "--seed")) {
        if (!cli_int(v, 0, 0x7fffffffL, &l)) {
            char *end;
            unsigned long long u = strtoull(v, &end, 10);
            if (*end || !*v) return cli_fail("--seed: '%s' is not a number", v), -1;
            s->seed = u;
        } else {
            s->seed = (uint64_t)l;
        }
    } else if (!strcmp(a, "--stop")) {
        if (o->n_stops == GEN_MAX_STOPS) return cli_fail("--stop: at most %d stop strings", GEN_MAX_STOPS), -1;
        if (!*v) return cli_fail("--stop: the stop string is empty"), -1;
        o->stops[o->n_stops++] = v;
    }
    return 1;
}

int gen_run(colibri_engine_t *e, const int32_t *prompt, size_t n, const gen_opts *o, FILE *out,
            volatile sig_atomic_t *interrupt, colibri_sampler_t *sampler, gen_result *res) {
    memset(res, 0, sizeof *res);
    const int V = colibri_n_vocab(e);
    float *logits = malloc(sizeof(float) * (size_t)V);
    size_t cap = 4096, len = 0, shown = 0;
    char *text = malloc(cap);
    colibri_detok_t *dt = colibri_detok_new(e, 1);
    int rc = 0;
    if (!logits || !text || !dt) {
        rc = cli_fail("%s", dt ? "out of memory" : colibri_last_error());
        goto out;
    }
    if (n == 0) {
        rc = cli_fail("the prompt is empty");
        goto out;
    }
    res->ends_line = true;
    if (o->prompt_echo != GEN_ECHO_NONE) { /* the prompt through the same stream */
        for (size_t i = 0; i < n; i++) {
            char piece[512];
            size_t pn = 0;
            if (colibri_detok_push(dt, prompt[i], piece, sizeof piece, &pn)) {
                rc = cli_fail("%s", colibri_last_error());
                goto out;
            }
            if (o->prompt_echo == GEN_ECHO_PRINT && pn) {
                fwrite(piece, 1, pn, out);
                res->ends_line = piece[pn - 1] == '\n';
            }
        }
        fflush(out);
    }
    double t0 = cli_now();
    const size_t from = o->prompt_cached < n ? o->prompt_cached : n - 1;
    if (colibri_eval(e, prompt + from, n - 1 - from, NULL, 0) || (o->save_state && colibri_state_save(e, 0, o->save_state)) ||
        colibri_forward(e, prompt[n - 1], logits, NULL)) {
        rc = cli_fail("%s", colibri_last_error());
        goto out;
    }
    for (size_t i = 0; i < n; i++) colibri_sampler_accept(sampler, prompt[i]);
    res->n_prompt = n - from;
    res->t_prompt = cli_now() - t0;
    double t1 = cli_now();
    for (long g = 0; o->n_predict < 0 || g < o->n_predict; g++) {
        if (interrupt && *interrupt) {
            res->interrupted = true;
            break;
        }
        int32_t tok;
        if (colibri_sampler_sample(sampler, logits, &tok)) {
            rc = cli_fail("%s", colibri_last_error());
            goto out;
        }
        colibri_sampler_accept(sampler, tok);
        res->n_gen++;
        if (!o->ignore_eos && colibri_is_eog(e, tok)) {
            res->stopped_eog = true;
            break;
        }
        char piece[512];
        size_t pn = 0;
        if (colibri_detok_push(dt, tok, piece, sizeof piece, &pn)) {
            rc = cli_fail("%s", colibri_last_error());
            goto out;
        }
        if (len + pn + 1 > cap) {
            while (len + pn + 1 > cap) cap *= 2;
            char *nt = realloc(text, cap);
            if (!nt) {
                rc = cli_fail("out of memory");
                goto out;
            }
            text = nt;
        }
        memcpy(text + len, piece, pn);
        len += pn;
        size_t pos, hold;
        if (colibri_stop_check(text, len, shown, o->stops, (size_t)o->n_stops, &pos, &hold)) {
            if (pos > shown) {
                fwrite(text + shown, 1, pos - shown, out);
                res->ends_line = text[pos - 1] == '\n';
            }
            len = pos;
            shown = pos;
            res->stopped_stop = true;
            break;
        }
        if (len - hold > shown) {
            fwrite(text + shown, 1, len - hold - shown, out);
            fflush(out);
            shown = len - hold;
            res->ends_line = text[shown - 1] == '\n';
        }
        if (!o->ctx_shift && colibri_n_past(e) >= colibri_max_seq_len(e)) {
            res->hit_limit = true;
            break;
        }
        if (o->n_predict >= 0 && g + 1 == o->n_predict) break;
        if (colibri_forward(e, tok, logits, NULL)) {
            rc = cli_fail("%s", colibri_last_error());
            goto out;
        }
    }
    if (!res->stopped_stop) {
        char piece[512];
        size_t pn = 0;
        if (colibri_detok_flush(dt, piece, sizeof piece, &pn) == 0 && len + pn + 1 <= cap) {
            memcpy(text + len, piece, pn);
            len += pn;
        }
        if (len > shown) {
            fwrite(text + shown, 1, len - shown, out);
            res->ends_line = text[len - 1] == '\n';
        }
    }
    fflush(out);
    res->t_gen = cli_now() - t1;
    text[len] = 0;
    res->text = text;
    text = NULL;
out:
    free(text);
    free(logits);
    colibri_detok_free(dt);
    return rc;
}
