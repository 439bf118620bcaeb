/* testutil.h — helpers shared by the unit tests: tiny random models written as .colibri. */
#ifndef CLB_TESTUTIL_H
#define CLB_TESTUTIL_H

#include <stdint.h>

#include "model/model.h"

/* A tiny Mixtral-like (n_expert > 0) or Llama-like (n_expert == 0) hparams. */
void tu_tiny_hparams(clb_hparams *hp, int n_expert);
/* Writes a .colibri file with random weights (seeded) for hp; dtype for matrices
   (CLB_DT_F32, CLB_DT_Q8_0, ...). Returns 0 on success. */
int tu_write_model(const char *path, const clb_hparams *hp, int dtype, uint64_t seed);
/* A fresh temporary path (in /tmp) with the given suffix; static buffer per call site. */
void tu_tmp_path(char *buf, size_t cap, const char *suffix);
uint64_t tu_rand_u64(uint64_t *s); /* xorshift64: the next state */
float tu_rand(uint64_t *s);        /* uniform in [-1, 1) */

#endif
