/* gen_container.c — writes the .colibri fuzz seeds with the library's own writer:
   gen_container OUT_DIR  ->  OUT_DIR/dense.colibri (dense tensors only, no tokenizer) and
   OUT_DIR/moe.colibri (dense + one layer of two experts, with a tokenizer object).
   Tensor bytes are a fixed pattern, so the seeds are deterministic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "format/container.h"

static int write_one(const char *path, const char *config_json, const char *tok_json,
                     const clb_cw_tensor *t, int n) {
    cJSON *config = cJSON_Parse(config_json);
    cJSON *tok = tok_json ? cJSON_Parse(tok_json) : NULL;
    int rc = 1;
    clb_cwriter *w = clb_cwriter_create(path, config, tok, t, n);
    if (!w) goto out;
    for (int i = 0; i < n; i++) {
        uint64_t rows = 1, rb;
        for (int d = 0; d < t[i].n_dims - 1; d++) rows *= (uint64_t)t[i].shape[d];
        if (!clb_row_bytes(t[i].dtype, t[i].shape[t[i].n_dims - 1], &rb)) goto out;
        uint64_t size = rows * rb;
        uint8_t *buf = malloc(size);
        if (!buf) goto out;
        for (uint64_t j = 0; j < size; j++) buf[j] = (uint8_t)(j * 7 + (uint64_t)i * 31);
        int wrc = clb_cwriter_write(w, i, buf, size);
        free(buf);
        if (wrc) goto out;
    }
    rc = clb_cwriter_finish(w) ? 1 : 0;
out:
    if (rc) fprintf(stderr, "gen_container: %s: %s\n", path, clb_last_error());
    clb_cwriter_free(w);
    cJSON_Delete(config);
    cJSON_Delete(tok);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen_container OUT_DIR\n");
        return 2;
    }
    char path[4096];
    const clb_cw_tensor dense[] = {
        {"token_embd.weight", CLB_DT_F32, 2, {4, 8}, -1, -1},
        {"output_norm.weight", CLB_DT_F32, 1, {8}, -1, -1},
        {"blk.0.attn_q.weight", CLB_DT_Q8_0, 2, {2, 32}, 0, -1},
    };
    snprintf(path, sizeof path, "%s/dense.colibri", argv[1]);
    if (write_one(path, "{\"architecture\":\"llama\",\"n_layer\":1,\"n_embd\":8}", NULL, dense,
                  (int)CLB_ARRAY_LEN(dense)))
        return 1;
    const clb_cw_tensor moe[] = {
        {"token_embd.weight", CLB_DT_F32, 2, {4, 8}, -1, -1},
        {"blk.0.ffn_gate_inp.weight", CLB_DT_F32, 2, {2, 8}, 0, -1},
        {"blk.0.ffn_gate.0.weight", CLB_DT_Q4_0, 2, {2, 32}, 0, 0},
        {"blk.0.ffn_down.0.weight", CLB_DT_F16, 2, {2, 4}, 0, 0},
        {"blk.0.ffn_gate.1.weight", CLB_DT_Q4_0, 2, {2, 32}, 0, 1},
        {"blk.0.ffn_down.1.weight", CLB_DT_F16, 2, {2, 4}, 0, 1},
    };
    snprintf(path, sizeof path, "%s/moe.colibri", argv[1]);
    if (write_one(path, "{\"architecture\":\"mixtral\",\"n_layer\":1,\"n_expert\":2}",
                  "{\"model\":\"gpt2\",\"tokens\":[\"a\",\"b\"],\"merges\":[\"a b\"]}", moe,
                  (int)CLB_ARRAY_LEN(moe)))
        return 1;
    return 0;
}
