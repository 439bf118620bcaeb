/* fuzz_gguf_vocab.c — libFuzzer target: a GGUF file parsed, its tokenizer.ggml.* keys built
   into a tokenizer (clb_tokenizer_from_gguf) and into the stored JSON form, then a fixed text
   encoded and decoded. Invariants: failures explain themselves; every id is in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clb_map m = {.data = size ? data : NULL, .size = size, .fd = -1};
    clb_gguf g;
    if (clb_gguf_parse(&m, &g) != COLIBRI_OK) return 0;
    cJSON *j = clb_tokenizer_gguf_to_json(&g);
    cJSON_Delete(j);
    clb_tokenizer *t = clb_tokenizer_from_gguf(&g);
    if (!t) {
        if (!clb_last_error()[0]) __builtin_trap();
        clb_gguf_close(&g);
        return 0;
    }
    static const char text[] = "Hello world\n  tabs\tand <s> 0x41 \xc3\xa9\xe2\x96\x81 \xff end";
    const int32_t nv = clb_tokenizer_n_vocab(t);
    static int32_t ids[4096];
    static char back[65536];
    for (int mode = 0; mode < 2; mode++) {
        size_t n = 0, bl = 0;
        if (clb_tokenize(t, text, sizeof text - 1, mode, mode, ids, CLB_ARRAY_LEN(ids), &n) != COLIBRI_OK) {
            if (!clb_last_error()[0]) __builtin_trap();
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= nv) __builtin_trap();
        int rc = clb_detokenize(t, ids, n, mode, back, sizeof back, &bl);
        if (rc != COLIBRI_OK && rc != COLIBRI_ERR_ARG) __builtin_trap();
    }
    for (int32_t id = 0; id < nv && id < 64; id++) {
        size_t pl;
        (void)clb_token_to_piece(t, id, &pl);
        (void)clb_token_text(t, id);
    }
    clb_tokenizer_free(t);
    clb_gguf_close(&g);
    return 0;
}
