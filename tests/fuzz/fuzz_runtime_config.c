/* fuzz_runtime_config.c — libFuzzer target: the input as a run-time config file
   (colibri_params_read_config, the file of --config / colibri_init's config_path).
   Invariants: failures explain themselves; what is accepted holds values in the ranges the
   API documents (threads, max_seq_len, n_batch, n_seq non-negative). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    colibri_params p = colibri_params_default();
    if (colibri_params_read_config(path, &p) != COLIBRI_OK) {
        if (!colibri_last_error()[0]) __builtin_trap();
        return 0;
    }
    if (p.n_threads < 0 || p.max_seq_len < 0 || p.n_batch < 0 || p.n_seq < 0) __builtin_trap();
    return 0;
}
