/* fuzz_tokenizer.c — libFuzzer target: a tokenizer.json (the input up to the first NUL
   byte) built with clb_tokenizer_from_hf, then the rest of the input (after the NUL, or a
   fixed text) encoded with and without special tokens and decoded back. Invariants: a
   failure explains itself; every id produced is below clb_tokenizer_n_vocab; decoding what
   was encoded succeeds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t jl = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "Hello world, 12 34! \xe2\x96\x81x <s>";
    size_t tl = nul ? size - jl - 1 : strlen(text);
    if (tl > 4096) tl = 4096;
    clb_tokenizer *t = clb_tokenizer_from_hf((const char *)data, jl, NULL);
    if (!t) {
        if (!clb_last_error()[0]) __builtin_trap();
        return 0;
    }
    const int32_t nv = clb_tokenizer_n_vocab(t);
    static int32_t ids[16384];
    static char back[65536];
    for (int mode = 0; mode < 2; mode++) {
        size_t n = 0;
        int rc = clb_tokenize(t, text, tl, mode, mode, ids, CLB_ARRAY_LEN(ids), &n);
        if (rc != COLIBRI_OK) {
            if (!clb_last_error()[0]) __builtin_trap();
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= nv) __builtin_trap();
        size_t bl = 0;
        rc = clb_detokenize(t, ids, n, mode, back, sizeof back, &bl);
        if (rc != COLIBRI_OK && rc != COLIBRI_ERR_ARG) __builtin_trap(); /* ARG: the buffer is short */
    }
    clb_tokenizer_free(t);
    return 0;
}
