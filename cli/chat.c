/* chat.c — `colibri chat`: a multi-turn conversation with the model's chat template.
 *
 * Each turn re-renders the whole conversation with the template, tokenizes it, and
 * evaluates only what follows the longest prefix already in the KV cache. With a terminal,
 * lines are read with libedit (editing, history); otherwise one message per input line.
 * Ctrl-C stops the current answer; /reset starts over; /quit or end of input leaves. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli.h"
#include "colibri.h"
#include "attn_opts.h" /* KV cache, attention and context options */
#include "rt_opts.h"   /* real-time options */
#include "generate.h"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static void help(void) {
    printf("usage: colibri chat -m MODEL [--system TEXT] [options]\n"
           "\n"
           "An interactive chat using the model's own chat template (ChatML when it has none).\n"
           "Commands: /reset (forget the conversation), /quit. Ctrl-C stops the current answer.\n"
           "When standard input is not a terminal, each line is one user message.\n"
           "\n"
           "  -m, --model PATH      model file or directory\n"
           "  --system TEXT         a system message opening the conversation\n"
           "  --parse-special       special tokens you type (e.g. <|im_end|>) become control tokens;\n"
           "                        by default they stay text, so typed text cannot end a turn or\n"
           "                        open a new role (added tokens that are not special, e.g.\n"
           "                        <think>, are matched either way)\n"
           "  -t, --threads N       worker threads\n"
           "  --max-seq-len N       context length (default: min(model max, 4096))\n"
           ATTN_OPTS_HELP
           RT_OPTS_HELP
           "  --no-context-shift    refuse a conversation longer than the context, instead of\n"
           "                        dropping the older half of it after the kept start\n"
           "  --keep N              tokens a context shift keeps (default 0 besides BOS; -1 = all)\n"
           "  -h, --help            this help\n"
           "\nGeneration (per answer; -n defaults to 512):\n%s",
           gen_options_help());
}

typedef struct convo {
    colibri_chat_msg *m;
    size_t n, cap;
} convo;

static int convo_add(convo *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 8;
        colibri_chat_msg *nm = realloc(c->m, nc * sizeof *nm);
        if (!nm) return -1;
        c->m = nm;
        c->cap = nc;
    }
    char *r = strdup(role), *t = strdup(content);
    if (!r || !t) {
        free(r);
        free(t);
        return -1;
    }
    c->m[c->n].role = r;
    c->m[c->n].content = t;
    c->n++;
    return 0;
}

static void convo_clear(convo *c, size_t keep) {
    while (c->n > keep) {
        c->n--;
        free((char *)c->m[c->n].role);
        free((char *)c->m[c->n].content);
    }
}

/* the ids now in the KV cache, to reuse their shared prefix */
typedef struct cached {
    int32_t *ids;
    size_t n, cap;
} cached;

static char *read_line(bool tty) {
    if (tty) {
        char *l = readline("> ");
        if (l && *l) add_history(l);
        return l;
    }
    size_t cap = 256, n = 0;
    char *b = malloc(cap);
    int ch;
    while (b && (ch = getchar()) != EOF && ch != '\n') {
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
        }
        b[n++] = (char)ch;
    }
    if (!b || (ch == EOF && n == 0)) {
        free(b);
        return NULL;
    }
    b[n] = 0;
    return b;
}

int cmd_chat(int argc, char **argv) {
    const char *model = NULL, *system = NULL;
    int parse_special = 0;
    colibri_params p = colibri_params_default();
    p.ctx_shift = 1; /* a full context shifts (--no-context-shift refuses) */
    gen_opts go;
    gen_opts_default(&go);
    go.n_predict = 512;
    ctx_opts co = {0};
    long v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        int g = gen_parse_option(&go, argc, argv, &i);
        if (g < 0) return 2;
        if (g > 0) continue;
        if (!strcmp(a, "--parse-special")) {
            parse_special = 1;
            continue;
        }
        if ((g = attn_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
        if ((g = rt_opts_parse(&p, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
        if (strcmp(a, "--prompt-cache") && (g = ctx_opts_parse(&p, &co, argc, argv, &i)) < 0) return 2;
        if (g > 0) continue;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "--system")) system = val;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_int(val, 1, 1024, &v)) return cli_fail("--threads: '%s' is not in 1..1024", val), 2;
            p.n_threads = (int)v;
        } else if (!strcmp(a, "--max-seq-len")) {
            if (!cli_int(val, 16, 1 << 24, &v)) return cli_fail("--max-seq-len: '%s' is not a length", val), 2;
            p.max_seq_len = (int)v;
        } else {
            return cli_fail("chat: unknown option '%s' (see colibri chat --help)", a), 2;
        }
    }
    if (!model) return cli_fail("chat: no model given (-m MODEL)"), 2;
    go.ctx_shift = p.ctx_shift;
    colibri_engine_t *e = colibri_init_params(model, &p);
    if (!e) return cli_fail("%s", colibri_last_error());
    rt_opts_report(e);
    if (!colibri_has_tokenizer(e)) {
        colibri_free(e);
        return cli_fail("%s: the model has no tokenizer", model);
    }
    if (colibri_chat_template_is_default(e))
        fprintf(stderr, "colibri: the model has no chat template; using ChatML\n");
    bool tty = isatty(0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    colibri_sampler_t *s = colibri_sampler_new(&go.sampling, colibri_n_vocab(e));
    convo c = {0};
    cached kv = {0};
    size_t base = 0;
    int rc = 0;
    if (!s) {
        rc = cli_fail("%s", colibri_last_error());
        goto out;
    }
    if (system) {
        convo_add(&c, "system", system);
        base = 1;
    }
    if (tty) fprintf(stderr, "colibri chat: /reset to start over, /quit to leave, Ctrl-C stops an answer\n");
    for (;;) {
        interrupted = 0;
        char *line = read_line(tty);
        if (!line) {
            if (tty && interrupted) { /* Ctrl-C at the prompt: a fresh prompt */
                fputc('\n', stderr);
                continue;
            }
            break;
        }
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) {
            free(line);
            break;
        }
        if (!strcmp(line, "/reset")) {
            convo_clear(&c, base);
            colibri_reset(e);
            kv.n = 0;
            free(line);
            fprintf(stderr, "colibri: conversation reset\n");
            continue;
        }
        if (!*line) {
            free(line);
            continue;
        }
        if (convo_add(&c, "user", line)) {
            free(line);
            rc = cli_fail("out of memory");
            break;
        }
        free(line);
        /* the template's special tokens become ids; what the user typed stays text unless
           --parse-special (see help) */
        size_t need = 0;
        int32_t *ids = NULL;
        if (colibri_chat_tokenize(e, c.m, c.n, 1, 1, parse_special, NULL, 0, &need)) {
            rc = cli_fail("%s", colibri_last_error());
            break;
        }
        if (!(ids = malloc(sizeof(int32_t) * (need + 1)))) {
            rc = cli_fail("out of memory for %zu token ids", need);
            break;
        }
        if (colibri_chat_tokenize(e, c.m, c.n, 1, 1, parse_special, ids, need + 1, &need)) {
            free(ids);
            rc = cli_fail("%s", colibri_last_error());
            break;
        }
        if (need == 0) { /* nothing to evaluate: no answer can follow */
            free(ids);
            rc = cli_fail("chat: the chat template rendered an empty prompt (no tokens)");
            break;
        }
        /* keep the shared prefix of the cache (at least one token must be evaluated); what the
           cache holds comes from the engine, which knows about context shifts */
        size_t keep = 0, held = 0;
        colibri_seq_tokens(e, 0, NULL, 0, &held);
        if (held > kv.cap) {
            int32_t *nk = realloc(kv.ids, held * sizeof *nk);
            if (!nk) {
                free(ids);
                rc = cli_fail("out of memory");
                break;
            }
            kv.ids = nk;
            kv.cap = held;
        }
        kv.n = colibri_seq_tokens(e, 0, kv.ids, kv.cap, &held) ? 0 : held;
        while (keep < kv.n && keep + 1 < need && kv.ids[keep] == ids[keep]) keep++;
        ctx_opts_keep(e, &co, ids, need);
        if (!p.ctx_shift && need >= (size_t)colibri_max_seq_len(e)) {
            free(ids);
            fprintf(stderr, "colibri: the conversation no longer fits the context (%zu tokens); /reset\n", need);
            convo_clear(&c, c.n - 1);
            continue;
        }
        colibri_truncate(e, (int32_t)keep);
        keep = (size_t)colibri_n_past(e); /* fewer when a windowed layer no longer holds the prefix */
        colibri_sampler_reset(s);
        gen_result res;
        int grc = gen_run(e, ids + keep, need - keep, &go, stdout, &interrupted, s, &res);
        fputc('\n', stdout);
        fflush(stdout);
        free(ids); /* the next turn reads what the cache holds from the engine */
        if (grc) {
            free(res.text);
            rc = 1;
            break;
        }
        if (res.interrupted) fprintf(stderr, "colibri: [stopped]\n");
        convo_add(&c, "assistant", res.text ? res.text : "");
        free(res.text);
    }
out:
    convo_clear(&c, 0);
    free(c.m);
    free(kv.ids);
    colibri_sampler_free(s);
    colibri_free(e);
    return rc;
}
