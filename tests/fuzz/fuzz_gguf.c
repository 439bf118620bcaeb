/* fuzz_gguf.c — libFuzzer target: clb_gguf_parse on the input bytes, then every getter on
   every key and tensor, checking the reader's invariants (a known-type tensor lies inside
   the input and has a consistent size; an unknown-type tensor has no data). The input
   buffer is exactly size bytes, so ASan reports any read past it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void touch_value(const clb_gguf_value *v, int depth) {
    if (v->type == CLB_GGUF_STRING) {
        if (v->v.s.len) sink += (uint8_t)v->v.s.ptr[0] + (uint8_t)v->v.s.ptr[v->v.s.len - 1];
        return;
    }
    if (v->type != CLB_GGUF_ARRAY) return;
    if (depth > 8) __builtin_trap(); /* the reader promises a nesting limit */
    for (uint64_t i = 0; i < v->v.arr.n && i < 64; i++) {
        if (v->v.arr.type == CLB_GGUF_STRING) {
            const clb_gguf_str *s = &v->v.arr.strs[i];
            if (s->len) sink += (uint8_t)s->ptr[s->len - 1];
        } else if (v->v.arr.type == CLB_GGUF_ARRAY) {
            touch_value(&v->v.arr.items[i], depth + 1);
        }
    }
    if (v->v.arr.n && v->v.arr.data) sink += v->v.arr.data[0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clb_map m = {.data = size ? data : NULL, .size = size, .fd = -1};
    clb_gguf g;
    if (clb_gguf_parse(&m, &g) != COLIBRI_OK) {
        if (!clb_last_error()[0]) __builtin_trap(); /* failures always explain themselves */
        return 0;
    }
    for (int64_t k = 0; k < g.n_kv; k++) {
        const clb_gguf_kv *kv = &g.kv[k];
        if (clb_gguf_find(&g, kv->key) != kv) __builtin_trap(); /* keys are unique */
        int64_t i;
        double f;
        bool b;
        int et;
        (void)clb_gguf_get_i64(&g, kv->key, &i);
        (void)clb_gguf_get_f64(&g, kv->key, &f);
        (void)clb_gguf_get_bool(&g, kv->key, &b);
        char *s = clb_gguf_get_str(&g, kv->key);
        if (s) sink += strlen(s);
        clb_free(s);
        uint64_t n = clb_gguf_arr_n(&g, kv->key, &et);
        if (n) {
            (void)clb_gguf_arr_i64(kv, n - 1, &i);
            (void)clb_gguf_arr_f64(kv, n - 1, &f);
            (void)clb_gguf_arr_i64(kv, n, &i);
        }
        touch_value(&kv->val, 0);
    }
    if (g.alignment == 0 || (g.alignment & (g.alignment - 1))) __builtin_trap();
    for (int t = 0; t < g.n_tensors; t++) {
        const clb_tensor *ts = &g.tensors[t];
        if (clb_gguf_find_tensor(&g, ts->name) != ts) __builtin_trap();
        if (ts->n_dims < 1 || ts->n_dims > CLB_MAX_DIMS) __builtin_trap();
        if (!clb_type(ts->dtype)) {
            if (ts->data || ts->size) __builtin_trap();
            continue;
        }
        if (!clb_tensor_size_consistent(ts) || !clb_range_ok(ts->offset, ts->size, size) ||
            ts->data != data + ts->offset || ts->offset % g.alignment)
            __builtin_trap();
        sink += ts->data[0] + ts->data[ts->size - 1];
    }
    clb_gguf_close(&g);
    return 0;
}
