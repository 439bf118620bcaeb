/* convert.h — writes a .colibri container from any source (HF directory, GGUF, .colibri),
 * streaming one tensor row-chunk at a time. */
#ifndef CLB_CONVERT_H
#define CLB_CONVERT_H

#include <stdint.h>

typedef struct clb_convert_opts {
    int dtype;        /* dense weights: a clb_dtype, or -1 to keep the source's (bit-exact) */
    int expert_dtype; /* routed experts: a clb_dtype, or -1 for "as dtype" */
    /* llama.cpp mixes (mix.h, CLB_MIX_NONE = -1 for none): mix picks every tensor's type as
       llama-quantize does (dtype must then be -1); expert_mix the routed experts' alone
       (expert_dtype must then be -1) */
    int mix, expert_mix;
    int n_threads; /* quantizing threads; 0 = every CPU */
    /* encoding of the output (container v2): codec -1 = as the source's (a .colibri source's
       codec, else none), CLB_CODEC_* otherwise; encrypt 1 = with the key asked for dst,
       -1 = in the clear, 0 = as the source (an encrypted source then fails: say which) */
    int codec, level;
    bool no_split;
    int encrypt;
    uint32_t seg_size; /* plain bytes per segment of an encoded output; 0 = the writer's default */
    /* per-expert dtypes (heterogeneous experts), overriding expert_dtype where given:
       "0-3:q8_0,4-7:q4_0" for every layer, or a JSON object {"LAYERS": "EXPERTS:dtype,...", ...}
       whose keys are "*", "L" or "L0-L1" (later keys win), inline or in a .json file */
    const char *expert_dtype_map;
    /* a clb_dtype: every routed FFN expert tensor blk.L.ffn_X.E.weight also gets a stand-in
       blk.L.ffn_X_standin.E.weight of this type (layer L, expert n_expert + E in the tensor
       table, so it lies after the layer's experts and is a chunk of its own), quantized from
       the same source values; -1 = none (a source's stand-ins are kept bit for bit) */
    int standin_dtype;
    /* called now and then with bytes written so far and the total (may be NULL) */
    void (*progress)(uint64_t done, uint64_t total, void *user);
    void *user;
} clb_convert_opts;

typedef struct clb_convert_report {
    uint64_t bytes_in, bytes_out;
    int n_tensors, n_fallback; /* tensors whose shape did not fit the block size (f16, or a
                                  mix's fallback type) */
    double seconds;            /* wall time of the conversion proper (after the checks) */
} clb_convert_report;

/* Parses an expert dtype map for n_layer x n_expert experts into out[l * n_expert + e]
   (-1 where the map says nothing). Errors name the bad part. */
int clb_expert_dtype_map_parse(const char *spec, int n_layer, int n_expert, int *out);

int clb_convert(const char *src_path, const char *dst_path, const clb_convert_opts *o, clb_convert_report *rep);

#endif
