/* fuzz_safetensors.c — libFuzzer target: clb_safetensors_parse on the input bytes (header
   length, JSON header, per-tensor dtype/shape/offsets), then reads the first and last byte
   of every tensor it accepted. The input buffer is exactly size bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "core/common.h"
#include "format/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clb_map m = {.data = size ? data : NULL, .size = size, .fd = -1};
    clb_tensor *tensors = NULL;
    int n = 0;
    int rc = clb_safetensors_parse(&m, 0, &tensors, &n);
    if (rc != COLIBRI_OK) {
        if (n != 0 || !clb_last_error()[0]) __builtin_trap();
    } else {
        for (int i = 0; i < n; i++) {
            const clb_tensor *t = &tensors[i];
            if (!t->name || !clb_range_ok(t->offset, t->size, size)) __builtin_trap();
            if (t->size) {
                if (t->data != data + t->offset) __builtin_trap();
                sink += t->data[0] + t->data[t->size - 1];
            }
        }
    }
    for (int i = 0; i < n; i++) clb_free(tensors[i].name);
    clb_free(tensors);
    return 0;
}
