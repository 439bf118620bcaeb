/* generate.h — the text generation loop shared by `run -p` and `chat`. */
#ifndef CLB_CLI_GENERATE_H
#define CLB_CLI_GENERATE_H

#include <signal.h>
#include <stdio.h>

#include "colibri.h"

#define GEN_MAX_STOPS 16

typedef struct gen_opts {
    long n_predict;             /* tokens to generate at most (< 0: until EOG or max_seq_len) */
    colibri_sampling sampling;
    const char *stops[GEN_MAX_STOPS];
    int n_stops;
    bool ignore_eos;
    int prompt_echo;            /* GEN_ECHO_*: what the prompt does to the output */
    bool ctx_shift;             /* a full context shifts (the engine's ctx_shift); else generation stops */
    size_t prompt_cached;       /* the first ones of the prompt are in the KV cache already (run
                                   --prompt-cache): shown and given to the sampler, not evaluated */
    const char *save_state;     /* non-NULL: colibri_state_save of sequence 0 there once the prompt
                                   but its last token is evaluated */
} gen_opts;

/* GEN_ECHO_NONE: the continuation starts the text (its leading space is dropped, as at the
   start of any decode); GEN_ECHO_PRINT: the prompt is printed first (detokenized, special
   tokens hidden), then the continuation, as llama.cpp does; GEN_ECHO_QUIET: the same text as
   PRINT would give after the prompt, without the prompt. */
enum { GEN_ECHO_NONE = 0, GEN_ECHO_PRINT, GEN_ECHO_QUIET };

typedef struct gen_result {
    size_t n_prompt, n_gen;
    double t_prompt, t_gen;
    char *text;       /* the generated text (heap), up to a stop string if one matched */
    bool stopped_eog, stopped_stop, interrupted, hit_limit;
    bool ends_line;   /* what was written to the output ends with a newline (or is empty) */
} gen_result;

/* Parses a sampling/generation option at argv[*i]; returns 1 when consumed, 0 when not a
   generation option, -1 on a bad value (message printed). */
int gen_parse_option(gen_opts *o, int argc, char **argv, int *i);
void gen_opts_default(gen_opts *o);
const char *gen_options_help(void);

/* Evaluates prompt[0..n) on top of what e already holds and generates, streaming the text
   to out. *interrupt (may be NULL) stops generation when it becomes non-zero. */
int gen_run(colibri_engine_t *e, const int32_t *prompt, size_t n, const gen_opts *o, FILE *out,
            volatile sig_atomic_t *interrupt, colibri_sampler_t *sampler, gen_result *res);

#endif
