/* fuzz_hf_config.c — libFuzzer target: the input as an HF config.json, through
   clb_arch_from_hf and clb_hparams_from_hf; what is accepted must pass clb_hparams_validate
   again, be finite where it is real-valued, and survive the .colibri round trip
   (clb_hparams_to_json, clb_hparams_from_json). Failures explain themselves. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *c = cJSON_ParseWithLength((const char *)data, size);
    if (!c) return 0;
    const clb_arch_desc *d = clb_arch_from_hf(c);
    if (!d) {
        if (!clb_last_error()[0]) __builtin_trap();
        cJSON_Delete(c);
        return 0;
    }
    clb_hparams hp;
    if (clb_hparams_from_hf(d, c, &hp) != COLIBRI_OK) {
        if (!clb_last_error()[0]) __builtin_trap();
        clb_hparams_free(&hp);
        cJSON_Delete(c);
        return 0;
    }
    if (clb_hparams_validate(&hp) != COLIBRI_OK) __builtin_trap();
    if (!isfinite(hp.rope_theta) || !isfinite(hp.rope_factor) || !isfinite(hp.norm_eps) ||
        !isfinite(hp.embd_mult) || hp.max_pos <= 0)
        __builtin_trap();
    for (int l = 0; l < hp.n_layer; l++) (void)clb_hparams_layer_is_moe(&hp, l), (void)clb_hparams_attn_layer(&hp, l);
    cJSON *j = clb_hparams_to_json(&hp);
    if (j) {
        clb_hparams back;
        if (clb_hparams_from_json(j, &back) != COLIBRI_OK) __builtin_trap(); /* what we write we read */
        if (back.n_embd != hp.n_embd || back.n_layer != hp.n_layer || back.max_pos != hp.max_pos) __builtin_trap();
        clb_hparams_free(&back);
        cJSON_Delete(j);
    }
    clb_hparams_free(&hp);
    cJSON_Delete(c);
    return 0;
}
