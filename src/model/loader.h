/* loader.h — binds a source's tensors to the layers of a model, checking every shape
 * against the hyper-parameters. */
#ifndef CLB_LOADER_H
#define CLB_LOADER_H

#include "model/model.h"
#include "model/source.h"
#include <string.h>

#include "moe/expert_store.h"

typedef struct clb_model {
    clb_source src;
    const clb_hparams *hp;  /* &src.hp */
    clb_weight tok_embd;    /* [n_vocab][n_embd] */
    clb_weight output_norm, output_norm_b; /* [n_embd] f32; the bias with CLB_NORM_LAYER */
    clb_weight output;      /* [n_vocab][n_embd] (tok_embd when tied) */
    clb_weight output_b;    /* [n_vocab] f32 when hp->out_bias */
    clb_weight rope_freqs;  /* [n_rot / 2] f32 frequency divisors (CLB_ROPE_SCALING_FREQS) */
    clb_layer *layers;      /* [n_layer] */
    clb_expert_store *store;
    bool standins;          /* the FFN experts have low-bit stand-ins (store sub-layer CLB_SUB_STANDIN) */
    struct clb_owned *owned; /* buffers the model owns (f32 copies of f16/bf16 vectors, ...) */
    uint64_t dense_bytes, expert_bytes;
    uint8_t *pack_copy; /* interleaved copies of the dense matrix-product weights (clb_model_pack) */
    uint64_t pack_copy_bytes;
} clb_model;

/* A routed expert's stand-in tensor (blk.L.ffn_X_standin.E.weight, colibri convert --standin-dtype). */
static inline bool clb_is_standin_name(const char *name) { return strstr(name, "_standin.") != NULL; }

int clb_model_load(const char *path, clb_model **out);
/* The same from a caller's source (model/source.h: clb_source_open_io). */
int clb_model_load_io(const char *path, const clb_io *io, bool stream, clb_model **out);
void clb_model_free(clb_model *m);
/* Gives the dense matrix-product weights that table k computes 16 rows at a time their
   packed_rows, and, with interleave and room in MemAvailable, interleaved copies
   (kernels.h). Embedding rows (and a head tied to them) are never packed. */
struct clb_kernels;
int clb_model_pack(clb_model *m, const struct clb_kernels *k, bool interleave);

#endif
