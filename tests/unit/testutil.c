/* testutil.c — see testutil.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "format/container.h"
#include "testutil.h"

uint64_t tu_rand_u64(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

float tu_rand(uint64_t *s) {
    return (float)((tu_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

void tu_tmp_path(char *buf, size_t cap, const char *suffix) {
    static int counter;
    snprintf(buf, cap, "/tmp/colibri-test-%d-%d%s", (int)getpid(), counter++, suffix);
}

void tu_tiny_hparams(clb_hparams *hp, int n_expert) {
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", n_expert ? "mixtral" : "llama");
    hp->n_vocab = 96;
    hp->n_embd = 64;
    hp->n_layer = 2;
    hp->n_head = 4;
    hp->n_head_kv = 2;
    hp->head_dim = 16;
    hp->head_dim_v = 16;
    hp->n_rot = 16;
    hp->n_ff = n_expert ? 0 : 96;
    hp->n_expert = n_expert;
    hp->n_expert_used = n_expert ? 2 : 0;
    hp->n_ff_exp = n_expert ? 64 : 0;
    hp->moe_step = 1;
    hp->norm_eps = 1e-5f;
    hp->rope_theta = 10000.0f;
    hp->max_pos = 256;
    hp->routed_scale = 1.0f;
    hp->norm_topk = true;
    hp->bos_id = 1;
    hp->eos_id = 2;
}

typedef struct spec {
    char name[64];
    int64_t rows, cols;
    int layer, expert;
    bool vec, router;
} spec;

int tu_write_model(const char *path, const clb_hparams *hp, int dtype, uint64_t seed) {
    spec sp[512];
    int n = 0;
    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kd = (int64_t)hp->n_head_kv * hp->head_dim;
#define ADD(r, c, l, e, v, ro, ...)                                        \
    do {                                                                  \
        snprintf(sp[n].name, sizeof sp[n].name, __VA_ARGS__);             \
        sp[n].rows = r, sp[n].cols = c, sp[n].layer = l, sp[n].expert = e; \
        sp[n].vec = v, sp[n].router = ro;                                 \
        n++;                                                              \
    } while (0)
    ADD(hp->n_vocab, E, -1, -1, false, false, "token_embd.weight");
    ADD(1, E, -1, -1, true, false, "output_norm.weight");
    if (!hp->tie_embd) ADD(hp->n_vocab, E, -1, -1, false, false, "output.weight");
    for (int l = 0; l < hp->n_layer; l++) {
        ADD(1, E, l, -1, true, false, "blk.%d.attn_norm.weight", l);
        ADD(qd, E, l, -1, false, false, "blk.%d.attn_q.weight", l);
        ADD(kd, E, l, -1, false, false, "blk.%d.attn_k.weight", l);
        ADD(kd, E, l, -1, false, false, "blk.%d.attn_v.weight", l);
        ADD(E, qd, l, -1, false, false, "blk.%d.attn_output.weight", l);
        if (clb_hparams_attn_layer(hp, l).sinks) ADD(1, hp->n_head, l, -1, true, false, "blk.%d.attn_sinks.weight", l);
        ADD(1, E, l, -1, true, false, "blk.%d.ffn_norm.weight", l);
        if (hp->n_expert == 0) {
            ADD(hp->n_ff, E, l, -1, false, false, "blk.%d.ffn_gate.weight", l);
            ADD(hp->n_ff, E, l, -1, false, false, "blk.%d.ffn_up.weight", l);
            ADD(E, hp->n_ff, l, -1, false, false, "blk.%d.ffn_down.weight", l);
        } else {
            ADD(hp->n_expert, E, l, -1, false, true, "blk.%d.ffn_gate_inp.weight", l);
            for (int e = 0; e < hp->n_expert; e++) {
                ADD(hp->n_ff_exp, E, l, e, false, false, "blk.%d.ffn_gate.%d.weight", l, e);
                ADD(hp->n_ff_exp, E, l, e, false, false, "blk.%d.ffn_up.%d.weight", l, e);
                ADD(E, hp->n_ff_exp, l, e, false, false, "blk.%d.ffn_down.%d.weight", l, e);
            }
        }
    }
#undef ADD
    clb_cw_tensor desc[512];
    int dt[512];
    for (int i = 0; i < n; i++) {
        dt[i] = (sp[i].vec || sp[i].router) ? CLB_DT_F32 : dtype;
        desc[i] = (clb_cw_tensor){.name = sp[i].name, .dtype = dt[i], .layer = sp[i].layer, .expert = sp[i].expert};
        if (sp[i].vec) {
            desc[i].n_dims = 1;
            desc[i].shape[0] = sp[i].cols;
        } else {
            desc[i].n_dims = 2;
            desc[i].shape[0] = sp[i].rows;
            desc[i].shape[1] = sp[i].cols;
        }
    }
    cJSON *cfg = clb_hparams_to_json(hp);
    clb_cwriter *w = clb_cwriter_create(path, cfg, NULL, desc, n);
    cJSON_Delete(cfg);
    if (!w) return -1;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        uint64_t rb;
        clb_row_bytes(dt[i], sp[i].cols, &rb);
        float *row = malloc(sizeof(float) * (size_t)sp[i].cols);
        uint8_t *q = malloc((size_t)rb);
        /* embeddings ~U(-1,1); matrices ~U(-1,1)/sqrt(fan_in) (routers twice that, so
           routing is decisive); norms 1 +- 0.1 */
        const float scale = sp[i].vec ? 0.1f : i == 0 ? 1.0f : (sp[i].router ? 2.0f : 1.7f) / sqrtf((float)sp[i].cols);
        for (int64_t r = 0; r < sp[i].rows && !rc; r++) {
            for (int64_t c = 0; c < sp[i].cols; c++)
                row[c] = sp[i].vec ? 1.0f + scale * tu_rand(&seed) : scale * tu_rand(&seed);
            clb_quantize_row_ref(dt[i], row, q, sp[i].cols);
            rc = clb_cwriter_write(w, i, q, rb);
        }
        free(row);
        free(q);
    }
    if (!rc) rc = clb_cwriter_finish(w);
    clb_cwriter_free(w);
    return rc;
}
