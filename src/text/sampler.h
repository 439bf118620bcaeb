/* sampler.h — turns a logits vector into the next token, plus stop-string handling.
 *
 * One fixed order of operations (documented so results are reproducible across front ends):
 *   1. penalties over the last penalty_last_n accepted tokens:
 *        repetition (CTRL / llama.cpp style): logit > 0 ? logit / repeat_penalty
 *                                                     : logit * repeat_penalty
 *        frequency/presence (OpenAI style):   logit -= count * frequency_penalty
 *                                                       + (count > 0) * presence_penalty
 *   2. temperature <= 0: greedy — argmax of the penalised logits (ties: lowest id); stop here.
 *   3. top-k            (keep the k largest logits; k <= 0 or k >= n_vocab: keep all)
 *   4. temperature      (logit / temperature)
 *   5. softmax          (over the kept candidates)
 *   6. top-p            (smallest prefix of the descending candidates whose cumulative
 *                        probability reaches top_p; top_p >= 1: off), renormalise
 *   7. min-p            (drop candidates with p < min_p * p_max; min_p <= 0: off), renormalise
 *   8. sample           (one draw u in [0,1) from the seeded xoshiro256** generator, walking
 *                        the candidates' cumulative probability)
 * Where a step needs an order (top-k, top-p, clb_sampler_candidates) candidates are ordered by
 * descending logit, ties by ascending id; with neither top-k nor top-p (OpenAI's defaults) the
 * draw walks them in vocabulary order instead, the same distribution without a sort. Either
 * way every step is deterministic. All scratch is allocated by clb_sampler_create for n_vocab entries: sampling
 * a token never allocates.
 *
 * Usage:
 *     clb_sampler_params sp = clb_sampler_params_default();
 *     sp.seed = 42;
 *     clb_sampler *s = clb_sampler_create(&sp, n_vocab);
 *     for (each prompt token t) clb_sampler_accept(s, t);   // optional: penalise the prompt too
 *     int32_t tok;
 *     if (clb_sampler_sample(s, logits, &tok) != COLIBRI_OK) ...
 *     clb_sampler_accept(s, tok);
 *     clb_sampler_free(s);
 */
#ifndef CLB_SAMPLER_H
#define CLB_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct clb_sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off; must be > 0 */
    float frequency_penalty; /* 0: off */
    float presence_penalty;  /* 0: off */
    int32_t penalty_last_n;  /* window of accepted tokens the penalties look at; 0: off */
    uint64_t seed;           /* RNG seed: same seed + same logits -> same tokens */
} clb_sampler_params;

typedef struct clb_sampler clb_sampler;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalties (repeat 1.0, window 64),
   seed 0. */
clb_sampler_params clb_sampler_params_default(void);

/* Validates the parameters (NaN, negative penalty, ...) and allocates all scratch.
   NULL on error (reason in clb_last_error). */
clb_sampler *clb_sampler_create(const clb_sampler_params *p, int32_t n_vocab);
void clb_sampler_free(clb_sampler *s); /* NULL is fine */

/* Forgets the token history and restarts the RNG from the seed. */
void clb_sampler_reset(clb_sampler *s);

/* Appends a token to the history the penalties look at (ids outside the vocabulary are
   ignored). */
void clb_sampler_accept(clb_sampler *s, int32_t token);

/* Picks the next token from logits[n_vocab] (not modified). COLIBRI_ERR_ARG on NULL
   arguments or if no logit is finite. */
int clb_sampler_sample(clb_sampler *s, const float *logits, int32_t *out_token);

/* Runs steps 1-7 and exposes the surviving candidates (ids and probabilities, descending,
   summing to 1) without drawing; the pointers stay valid until the next call on s.
   With temperature <= 0 the single greedy candidate has probability 1. */
int clb_sampler_candidates(clb_sampler *s, const float *logits, const int32_t **ids,
                           const float **probs, size_t *n);

/* The sampler's generator: uniform 64-bit values and doubles in [0, 1). */
uint64_t clb_sampler_rand_u64(clb_sampler *s);
double clb_sampler_rand_double(clb_sampler *s);

/* ---- stop strings ----
   Given the text generated so far, text[0..len), and n_stops stop strings (empty strings are
   ignored): returns true if one occurs at a position >= from (pass the number of bytes already
   emitted: earlier positions were ruled out by previous calls), with *match_pos the earliest
   start of an occurrence — text[0..match_pos) is the final output, *hold_back = 0.
   Otherwise returns false and *hold_back is the length of the longest tail of the text that
   is a proper prefix of some stop string: text[0..len - hold_back) can be shown now, the tail
   must wait for more tokens. *which (may be NULL) receives the index of the matched stop. */
bool clb_stop_check(const char *text, size_t len, size_t from, const char *const *stops,
                    size_t n_stops, size_t *match_pos, size_t *hold_back, size_t *which);

/* Number of bytes at the end of text[0..len) that form an incomplete UTF-8 sequence (0..3):
   a streaming front end holds those back too so it never prints half a character. */
size_t clb_utf8_incomplete_tail(const char *text, size_t len);

#endif
