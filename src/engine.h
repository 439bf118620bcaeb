/* engine.h — the per-token loop behind the public API (colibri.h). */
#ifndef CLB_ENGINE_H
#define CLB_ENGINE_H

#include "colibri.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "model/loader.h"
#include "moe/router.h"
#include "nn/attention.h"
#include "nn/ops.h"
#include "text/tokenizer.h"

struct colibri_engine {
    clb_model *model;
    /* colibri_init_ex (embed_api.c): from a caller's source (no file-system call), and with
       a block, every byte carved from it (heap lives at the block's start) */
    bool embedded;
    struct clb_heap *heap;
    const clb_hparams *hp;
    const clb_kernels *k;
    /* packed kernels (kernels.h): the table whose packed products weights take (NULL: none,
       COLIBRI_PACK=0) and whether interleaved copies may be made (not with COLIBRI_PACK=rows) */
    const clb_kernels *pack_k;
    bool pack_interleave;
    clb_pool *pool;
    char rt_warn[512];   /* colibri_rt_warning */
    int io_cpus[128], n_io_cpus; /* the expert I/O threads' CPUs (colibri_params.io_cpus) */
    clb_mm_ctx mm;
    clb_rope rope;
    clb_router_cfg router;
    int n_threads, max_seq, n_batch;
    int n_seq;       /* sequences held at once (colibri_params.n_seq) */
    int32_t *seq_past; /* [n_seq] tokens in each sequence's KV region (its next position) */
    int32_t *seq_tokens; /* [n_seq][max_seq] the ids each sequence holds (state files, prefix reuse) */
    int32_t *seq_keep;   /* [n_seq] tokens a context shift keeps at the start (colibri_seq_set_keep) */
    bool ctx_shift;      /* shift a sequence's context when it would pass max_seq (colibri_params.ctx_shift) */

    /* the attention blocks and their KV cache (src/nn/attention.c, src/nn/kv_cache.c) */
    clb_attn attn;

    /* activations, carved from one arena at init; B = n_batch */
    clb_arena arena;
    int32_t *b_seq;  /* [B] sequence of each token of the batch being evaluated */
    int32_t *b_pos;  /* [B] its position in that sequence */
    int32_t *b_rows; /* [B] batch rows whose logits colibri_decode returns */
    int32_t *b_tok;  /* [B] colibri_decode: the tokens of one step */
    int32_t *seq_cnt; /* [n_seq] scratch: tokens of each sequence in the batch */
    int32_t *seq_save; /* [n_seq] colibri_decode: positions before the call (restored on failure) */
    float *x;        /* [B][n_embd] residual stream */
    float *xn;       /* [B][n_embd] normed input of a block */
    float *ff_g, *ff_u; /* [B * k_cap][max ff width] */
    float *ffn_out;  /* [B][n_embd] */
    float *r_logits; /* [B][n_expert] */
    float *r_scratch; /* [2 * n_expert] */
    int k_cap;       /* most experts a token may use (top-k / top-p bound), fixed at init */
    int *tok_k;      /* [B] experts each token uses */
    int *sel;        /* [B][k_cap] selected experts per token, in selection order */
    float *sel_w;    /* [B][k_cap] their weights */
    int *e_asg;      /* [B][k_cap] assignment index of each (token, slot) */
    int *e_tok;      /* [B * k_cap] token of each assignment, grouped by expert */
    float *e_scale;  /* [B * k_cap] routing weight of each assignment, applied to the expert's
                        input (hp->moe_weight_on_input) */
    int *e_count;    /* [n_expert] */
    int *e_start;    /* [n_expert + 1] first assignment of each expert */
    const clb_expert_w **e_w; /* [n_expert] acquired weights */
    clb_mm_job *jobs;         /* [n_expert] gate/up (SwiGLU) jobs of the experts e_idx */
    clb_mm_job *jobs_d;       /* [n_expert] their down projections */
    int *e_idx;               /* [n_expert] */
    int *last_route;          /* [n_layer][n_expert] tokens of the last batch that chose each
                                 expert (colibri_expert_state) */
    struct { int fmt; const uint8_t *rows; uint64_t stride; } tq[4]; /* expert_input conversions */
    int n_tq;
    double *t_enter;          /* [n_threads] when each thread began an expert dispatch */
    float *xe;       /* [B * k_cap][n_embd] gathered expert inputs, then outputs */
    float *logits;   /* [B][n_vocab] */
    /* -- expert memory hierarchy: router lookahead (engine.c moe_lookahead) -- */
    float *la_logits; /* [B][n_expert] next layer's router on this layer's FFN input */
    int *la_sel;      /* [B][n_expert] predicted experts of layer la_layer per token (k used) */
    int *la_k;        /* [B] how many of la_sel each token uses */
    uint8_t *e_take;  /* [n_expert] moe() pass bookkeeping: 1 = this pass, 2 = done */
    uint8_t *e_low;   /* [n_expert] every selection of the expert is a stand-in candidate */
    int *e_key;       /* [n_expert] the store key each selected expert is computed from this layer
                         run: the layer's own, or its stand-ins' (CLB_SUB_STANDIN) */
    float *la_w;      /* [B][n_expert] */
    /* -- mixture of attention heads (hp->n_attn_exp, engine.c moa_attention) -- */
    clb_router_cfg moa_router;
    float *moa_logits; /* [B][n_attn_exp] */
    int *moa_sel;      /* [B][n_attn_exp_used] each token's attention experts, in selection order */
    float *moa_w;      /* [B][n_attn_exp_used] their weights */
    float *moa_in, *moa_y; /* [B][max(n_embd, n_head_kv * head_dim)] one expert's rows, its outputs */
    int la_layer;     /* layer la_sel predicts, -1 none */
    bool lookahead;   /* prefetch on and the store has a pool */
    uint64_t mem_accounted; /* dense + KV + arena bytes */
    uint64_t dense_locked;  /* dense weights mlock'ed inside a budget */
    float miss_drop;        /* colibri_params.moe_miss_drop (0 off) */
    uint64_t n_dropped;     /* selections it dropped */
    float standin;          /* colibri_params.moe_standin (0 off) */
    uint64_t n_standin;     /* selections computed with a stand-in */

    /* -- expert parallelism (src/moe/expert_exec.c, colibri_set_expert_exec) -- */
    bool xp_on;             /* this engine is one rank of several */
    colibri_expert_exec xp;
    int32_t *xp_owner;      /* [n_layer][n_expert] rank of each routed expert */
    float *xp_send, *xp_recv; /* [B * k_cap][n_embd] this rank's rows / every rank's rows */
    int *xp_pos;            /* [B * k_cap] row of each assignment in xp_recv */
    int64_t *xp_counts;     /* [n_ranks] floats from each rank */
    int *xp_rows;           /* [n_ranks] scratch: rows placed per rank */

    colibri_stats_t stats;

    clb_tokenizer *tok;      /* built on first use (text_api.c) */
    bool tok_failed;         /* ... and why it could not be */
    char tok_error[512];
    int32_t eog[8];          /* end-of-generation ids: EOS and end-of-turn tokens */
    int n_eog;
};

/* Evaluates tokens[0..n) (n <= n_batch) as one batch: token t goes to the next position of
   sequence seqs[t] (seqs NULL: all sequence 0); the tokens of one sequence are consecutive
   positions in batch order. When logits is non-NULL it receives [n_rows][n_vocab]: the rows
   of the batch indices rows[0..n_rows) (ascending), or with rows NULL the last n_rows tokens.
   On failure no sequence advances. */
int clb_engine_batch(colibri_engine_t *e, const int32_t *tokens, const int32_t *seqs, int n, float *logits,
                     const int32_t *rows, int n_rows);

/* Context shift of sequence s (state_api.c): keeps its first keep tokens, drops the next d
   and moves the rest down, re-rotating their cached keys. */
int clb_engine_shift(colibri_engine_t *e, int s, int32_t keep, int32_t d);
/* Shifts sequence s so that cnt more tokens fit: drops half of what follows its kept start,
   or more when the batch needs it (llama.cpp's context shift). */
int clb_engine_make_room(colibri_engine_t *e, int s, int32_t cnt);

/* Does this rank compute expert x of layer l? (always, with one process) */
static inline bool clb_xp_mine(const colibri_engine_t *e, int l, int x) {
    return !e->xp_on || e->xp_owner[(int64_t)l * e->hp->n_expert + x] == e->xp.rank;
}
/* Frees the expert-parallel buffers (colibri_free). */
void clb_xp_free(colibri_engine_t *e);
/* Applies colibri_set_default_expert_exec's executor to a new engine (colibri_init_params). */
int clb_xp_apply_default(colibri_engine_t *e);

/* Fills e->eog from the tokenizer (text_api.c). */
void clb_text_init_eog(colibri_engine_t *e);

/* colibri_init_params (io NULL) and colibri_init_ex (io: a caller's source; heap: the
   caller's block, installed on this thread by the caller; may be NULL) */
colibri_engine_t *clb_init_engine(const char *model_path, const clb_io *io, const colibri_params *params,
                                  struct clb_heap *heap);

#endif
