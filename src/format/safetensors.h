/* safetensors.h — Hugging Face model directories: config.json + model.safetensors, or
   sharded model-XXXXX-of-YYYYY.safetensors with model.safetensors.index.json. */
#ifndef CLB_SAFETENSORS_H
#define CLB_SAFETENSORS_H

#include <cjson/cJSON.h>

#include "core/platform.h"
#include "format/tensor.h"

/* The dtype of a U8 safetensors tensor: raw bytes (gpt-oss's MXFP4 *_blocks / *_scales),
   which only the source's MXFP4 repacking reads; no kernel type has this id. */
enum { CLB_ST_U8 = 1000 };

typedef struct clb_hf_dir {
    cJSON *config;            /* parsed config.json */
    char *tokenizer_json;     /* tokenizer.json contents, NULL when absent */
    char *tokenizer_config;   /* tokenizer_config.json contents, NULL when absent */
    clb_map *maps;            /* one per safetensors file */
    int n_maps;
    clb_tensor *tensors;      /* every tensor of every shard; dtype F32/F16/BF16/CLB_ST_U8 */
    int n_tensors;
    clb_tensor_index index;   /* name lookup (private to safetensors.c) */
} clb_hf_dir;

/* Opens a HF directory. Errors name the file: no config.json, malformed JSON, a header
   whose offsets leave the file, an unsupported dtype (named), a missing shard. */
int clb_hf_open(const char *dir, clb_hf_dir *out);
void clb_hf_close(clb_hf_dir *d);
/* Parses one safetensors file from a map, appending its tensors (file_index = idx). */
int clb_safetensors_parse(const clb_map *m, int idx, clb_tensor **tensors, int *n_tensors);
const clb_tensor *clb_hf_find(const clb_hf_dir *d, const char *name);

#endif
