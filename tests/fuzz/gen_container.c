/* gen_container.c — writes the .colibri fuzz seeds with the library's own writer:
   gen_container OUT_DIR [OUT_DIR_V2]  ->  OUT_DIR/dense.colibri (dense tensors only, no
   tokenizer) and OUT_DIR/moe.colibri (dense + one layer of two experts, with a tokenizer
   object); and the encoded (version 2) seeds of fuzz_container_v2 in OUT_DIR_V2:
   zstd.colibri and zlib.colibri (dense + two experts, bf16 and q4_0, 64 KiB segments so the
   embedding spans two), enc.colibri (small tensors: it does not compress) and
   zstd-enc.colibri, the encrypted ones with FUZZ_KEY (fuzz_key.h).
   Tensor bytes are a fixed pattern and the salt is fixed, so the seeds are deterministic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "format/codec.h"
#include "format/container.h"
#include "fuzz_key.h"

static int write_one(const char *path, const char *config_json, const char *tok_json,
                     const clb_cw_tensor *t, int n, const clb_cw_encoding *enc) {
    cJSON *config = cJSON_Parse(config_json);
    cJSON *tok = tok_json ? cJSON_Parse(tok_json) : NULL;
    int rc = 1;
    clb_cwriter *w = clb_cwriter_create_ex(path, config, tok, t, n, enc);
    if (!w) goto out;
    for (int i = 0; i < n; i++) {
        uint64_t rows = 1, rb;
        for (int d = 0; d < t[i].n_dims - 1; d++) rows *= (uint64_t)t[i].shape[d];
        if (!clb_row_bytes(t[i].dtype, t[i].shape[t[i].n_dims - 1], &rb)) goto out;
        uint64_t size = rows * rb;
        uint8_t *buf = malloc(size);
        if (!buf) goto out;
        for (uint64_t j = 0; j < size; j++) /* encoded 16-bit tensors: a constant high byte, as exponents */
            buf[j] = (uint8_t)(enc && (j & 1) && clb_type(t[i].dtype)->block_bytes == 2 ? 0x3f : j * 7 + (uint64_t)i * 31);
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
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: gen_container OUT_DIR [OUT_DIR_V2]\n");
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
                  (int)CLB_ARRAY_LEN(dense), NULL))
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
                  (int)CLB_ARRAY_LEN(moe), NULL))
        return 1;
    if (argc < 3) return 0;
    /* encoded seeds; vocab 300: the embedding spans two 64 KiB segments */
    static const struct { const char *name; int codec; bool enc; int64_t vocab; } v2[] = {
        {"zstd.colibri", CLB_CODEC_ZSTD, false, 300},
        {"zlib.colibri", CLB_CODEC_ZLIB, false, 300},
        {"enc.colibri", CLB_CODEC_NONE, true, 4},
        {"zstd-enc.colibri", CLB_CODEC_ZSTD, true, 300},
    };
    static const uint8_t salt[32] = {42};
    for (size_t i = 0; i < CLB_ARRAY_LEN(v2); i++) {
        const clb_cw_tensor t[] = {
            {"token_embd.weight", CLB_DT_BF16, 2, {v2[i].vocab, 128}, -1, -1},
            {"output_norm.weight", CLB_DT_F32, 1, {128}, -1, -1},
            {"blk.0.ffn_gate_inp.weight", CLB_DT_F32, 2, {2, 128}, 0, -1},
            {"blk.0.ffn_gate.0.weight", CLB_DT_Q4_0, 2, {4, 128}, 0, 0},
            {"blk.0.ffn_down.0.weight", CLB_DT_Q4_0, 2, {128, 32}, 0, 0},
            {"blk.0.ffn_gate.1.weight", CLB_DT_Q4_0, 2, {4, 128}, 0, 1},
            {"blk.0.ffn_down.1.weight", CLB_DT_Q4_0, 2, {128, 32}, 0, 1},
        };
        clb_cw_encoding enc = {.codec = v2[i].codec, .encrypt = v2[i].enc, .seg_size = 1 << 16, .test_salt = salt};
        memcpy(enc.key, FUZZ_KEY, 32);
        snprintf(path, sizeof path, "%s/%s", argv[2], v2[i].name);
        if (write_one(path, "{\"architecture\":\"mixtral\",\"n_layer\":1,\"n_expert\":2}",
                      "{\"model\":\"gpt2\",\"tokens\":[\"a\",\"b\"],\"merges\":[\"a b\"]}", t, (int)CLB_ARRAY_LEN(t),
                      &enc))
            return 1;
    }
    return 0;
}
