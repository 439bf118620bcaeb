/* api.c — the public calls of colibri.h over the engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "core/heap.h"
#include "core/platform.h"
#include "engine.h"
#include "moe/mem_api.h" /* expert memory hierarchy */
#include "rt_api.h"         /* real-time settings */

colibri_params colibri_params_default(void) {
    colibri_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static const char *const KV_NAMES[] = {"f16", "f32", "f16", "bf16", "q8_0", "q4_0"};
static const int KV_DTYPES[] = {CLB_DT_F16, CLB_DT_F32, CLB_DT_F16, CLB_DT_BF16, CLB_DT_Q8_0, CLB_DT_Q4_0};

int colibri_kv_type_from_name(const char *name) {
    for (int i = 1; name && i < (int)CLB_ARRAY_LEN(KV_NAMES); i++)
        if (!strcmp(name, KV_NAMES[i])) return i;
    return -1;
}

const char *colibri_kv_type_name(int type) {
    return type >= 0 && type < (int)CLB_ARRAY_LEN(KV_NAMES) ? KV_NAMES[type] : "?";
}

/* attention settings from a config file: returns 1 when k was one of them */
static int attn_config_key(const char *path, const cJSON *it, colibri_params *p, int *rc) {
    const char *k = it->string;
    if (!strcmp(k, "cache_type_k") || !strcmp(k, "cache_type_v")) {
        const int t = cJSON_IsString(it) ? colibri_kv_type_from_name(it->valuestring) : -1;
        if (t < 0) *rc = clb_err(COLIBRI_ERR_ARG, "%s: '%s' must be one of \"f32\", \"f16\", \"bf16\", \"q8_0\", \"q4_0\"", path, k);
        else if (k[11] == 'k') p->cache_type_k = t;
        else p->cache_type_v = t;
        return 1;
    }
    if (!strcmp(k, "ctx_shift")) {
        if (cJSON_IsBool(it)) p->ctx_shift = cJSON_IsTrue(it);
        else *rc = clb_err(COLIBRI_ERR_ARG, "%s: 'ctx_shift' must be true or false", path);
        return 1;
    }
    if (!strcmp(k, "mla")) {
        if (cJSON_IsString(it) && !strcmp(it->valuestring, "latent")) p->mla = 1;
        else if (cJSON_IsString(it) && !strcmp(it->valuestring, "decompressed")) p->mla = -1;
        else *rc = clb_err(COLIBRI_ERR_ARG, "%s: 'mla' must be \"latent\" or \"decompressed\"", path);
        return 1;
    }
    if (!strcmp(k, "flash_attn")) {
        if (cJSON_IsBool(it)) p->flash_attn = cJSON_IsTrue(it) ? 1 : -1;
        else if (cJSON_IsString(it) && !strcmp(it->valuestring, "auto")) p->flash_attn = 0;
        else *rc = clb_err(COLIBRI_ERR_ARG, "%s: 'flash_attn' must be true, false or \"auto\"", path);
        return 1;
    }
    return 0;
}

/* Reads a run-time settings file; unknown keys are errors (a typo must not be ignored). */
static int read_config(const char *path, colibri_params *p) {
    char *text;
    int rc = clb_read_file(path, 1 << 20, &text, NULL);
    if (rc) return rc;
    cJSON *j = cJSON_Parse(text);
    clb_free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return clb_err(COLIBRI_ERR_FORMAT, "%s: not a JSON object", path);
    }
    const cJSON *it;
    rc = COLIBRI_OK;
    cJSON_ArrayForEach(it, j) {
        const char *k = it->string;
        bool mem_key; /* expert memory hierarchy settings (moe/mem_api.c) */
        if ((rc = clb_mem_config_key(path, it, p, &mem_key)) || mem_key) {
            if (rc) break;
            continue;
        }
        if ((rc = clb_rt_config_key(path, it, p, &mem_key)) || mem_key) {
            if (rc) break;
            continue;
        }
        if (attn_config_key(path, it, p, &rc)) {
            if (rc) break;
            continue;
        }
        if (!cJSON_IsNumber(it)) {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: '%s' must be a number", path, k);
            break;
        }
        double v = it->valuedouble;
        bool is_int = v >= -1e9 && v <= 1e9 && v == (double)(int)v; /* (int) of 1e20 is undefined */
        if (strcmp(k, "threads") == 0 && is_int && v >= 0 && v <= 1024) p->n_threads = (int)v;
        else if (strcmp(k, "max_seq_len") == 0 && is_int && v >= 0 && v <= (1 << 24)) p->max_seq_len = (int)v;
        else if (strcmp(k, "n_batch") == 0 && is_int && v >= 0 && v <= 4096) p->n_batch = (int)v;
        else if (strcmp(k, "moe_top_k") == 0 && is_int && v >= 0 && v <= 1024) p->moe_top_k = (int)v;
        else if (strcmp(k, "router_temperature") == 0 && v >= 0 && v <= 1e6) p->router_temperature = (float)v;
        else if (strcmp(k, "moe_top_p") == 0 && v >= 0 && v <= 1) p->moe_top_p = (float)v;
        else if (strcmp(k, "moe_k_min") == 0 && is_int && v >= 0 && v <= 1024) p->moe_k_min = (int)v;
        else if (strcmp(k, "moe_k_max") == 0 && is_int && v >= 0 && v <= 1024) p->moe_k_max = (int)v;
        else if (strcmp(k, "n_seq") == 0 && is_int && v >= 0 && v <= COLIBRI_MAX_SEQ) p->n_seq = (int)v;
        else if (strcmp(k, "n_keep") == 0 && is_int && v >= 0 && v <= (1 << 24)) p->n_keep = (int)v;
        else if (strcmp(k, "moe_miss_drop") == 0 && v >= 0 && v <= 1) p->moe_miss_drop = (float)v;
        else if (strcmp(k, "moe_standin") == 0 && v >= 0 && v <= 1) p->moe_standin = (float)v;
        else {
            bool known = !strcmp(k, "threads") || !strcmp(k, "max_seq_len") || !strcmp(k, "n_batch") ||
                         !strcmp(k, "moe_top_k") || !strcmp(k, "router_temperature") || !strcmp(k, "moe_top_p") ||
                         !strcmp(k, "moe_k_min") || !strcmp(k, "moe_k_max") || !strcmp(k, "n_seq") || !strcmp(k, "n_keep") ||
                         !strcmp(k, "moe_miss_drop") || !strcmp(k, "moe_standin");
            rc = known ? clb_err(COLIBRI_ERR_ARG, "%s: '%s' = %g is out of range", path, k, v)
                       : clb_err(COLIBRI_ERR_ARG, "%s: unknown setting '%s'", path, k);
            break;
        }
    }
    cJSON_Delete(j);
    return rc;
}

int colibri_params_read_config(const char *config_path, colibri_params *p) {
    if (!config_path || !p) return clb_err(COLIBRI_ERR_ARG, "NULL config path or parameters");
    return read_config(config_path, p);
}

colibri_engine_t *colibri_init(const char *model_path, const char *config_path) {
    colibri_params p = colibri_params_default();
    if (config_path && read_config(config_path, &p)) return NULL;
    return colibri_init_params(model_path, &p);
}

/* Carves every activation buffer; called twice (count, then hand out). */
static void carve(colibri_engine_t *e) {
    const clb_hparams *hp = e->hp;
    clb_arena *a = &e->arena;
    const size_t B = (size_t)e->n_batch, E = (size_t)hp->n_embd, F = sizeof(float);
    const size_t od = (size_t)hp->n_head * hp->head_dim_v;
    size_t ff = (size_t)CLB_MAX(hp->n_ff, CLB_MAX(hp->n_ff_exp, hp->n_ff_shexp));
    size_t ne = (size_t)CLB_MAX(1, CLB_MAX(hp->n_expert, hp->n_attn_exp));
    e->b_seq = clb_arena_take(a, B * sizeof(int32_t));
    e->b_pos = clb_arena_take(a, B * sizeof(int32_t));
    e->b_rows = clb_arena_take(a, B * sizeof(int32_t));
    e->b_tok = clb_arena_take(a, B * sizeof(int32_t));
    e->seq_cnt = clb_arena_take(a, (size_t)e->n_seq * sizeof(int32_t));
    e->seq_save = clb_arena_take(a, (size_t)e->n_seq * sizeof(int32_t));
    e->x = clb_arena_take(a, B * E * F);
    e->xn = clb_arena_take(a, B * E * F);
    clb_attn_carve(&e->attn, a);
    const size_t kc = (size_t)(e->k_cap > 0 ? e->k_cap : 1), BK = B * kc;
    e->ff_g = clb_arena_take(a, BK * ff * F);
    e->ff_u = clb_arena_take(a, BK * ff * F);
    e->ffn_out = clb_arena_take(a, B * E * F);
    e->r_logits = clb_arena_take(a, B * ne * F);
    e->r_scratch = clb_arena_take(a, 2 * ne * F);
    e->tok_k = clb_arena_take(a, B * sizeof(int));
    e->sel = clb_arena_take(a, BK * sizeof(int));
    e->sel_w = clb_arena_take(a, BK * F);
    e->e_asg = clb_arena_take(a, BK * sizeof(int));
    e->e_tok = clb_arena_take(a, BK * sizeof(int));
    e->e_scale = clb_arena_take(a, BK * F);
    e->e_count = clb_arena_take(a, ne * sizeof(int));
    e->e_start = clb_arena_take(a, (ne + 1) * sizeof(int));
    e->e_w = clb_arena_take(a, ne * sizeof(*e->e_w));
    e->jobs = clb_arena_take(a, ne * sizeof(*e->jobs));
    e->jobs_d = clb_arena_take(a, ne * sizeof(*e->jobs_d));
    e->e_idx = clb_arena_take(a, ne * sizeof(int));
    e->last_route = clb_arena_take(a, (size_t)hp->n_layer * ne * sizeof(int));
    e->t_enter = clb_arena_take(a, (size_t)CLB_MAX(e->n_threads, 1) * sizeof(double));
    e->xe = clb_arena_take(a, CLB_MAX(BK, B) * E * F);
    e->logits = clb_arena_take(a, B * (size_t)hp->n_vocab * F);
    e->la_logits = clb_arena_take(a, B * ne * F); /* router lookahead */
    e->la_sel = clb_arena_take(a, B * ne * sizeof(int));
    e->la_k = clb_arena_take(a, B * sizeof(int));
    e->e_take = clb_arena_take(a, ne);
    e->e_low = clb_arena_take(a, ne);
    e->e_key = clb_arena_take(a, sizeof(int) * (size_t)ne);
    e->la_w = clb_arena_take(a, B * ne * F);
    if (hp->n_attn_exp > 0) {
        const size_t w = CLB_MAX(E, (size_t)hp->n_head_kv * hp->head_dim);
        e->moa_logits = clb_arena_take(a, B * (size_t)hp->n_attn_exp * F);
        e->moa_sel = clb_arena_take(a, B * (size_t)hp->n_attn_exp_used * sizeof(int));
        e->moa_w = clb_arena_take(a, B * (size_t)hp->n_attn_exp_used * F);
        e->moa_in = clb_arena_take(a, B * w * F);
        e->moa_y = clb_arena_take(a, B * w * F);
    }
    size_t maxc = CLB_MAX(CLB_MAX(E, od), CLB_MAX(ff, (size_t)CLB_MAX(hp->q_lora_rank, hp->kv_lora_rank)));
    /* qbuf: any single product (B or BK rows); a SwiGLU feed-forward (clb_ffn_swiglu); the
       routed experts (engine.c moe): every token once per activation format (at most 4: Q8_0
       with and without the packed kernels' extras, Q8_1, Q8_K), each expert's gathered rows
       (twice when a gate and its up projection differ in format), then their hidden rows */
    const uint64_t q_moe = clb_matmul_qbuf_bytes((int64_t)E, 4 * (int64_t)B + 2 * (int64_t)BK) +
                           clb_matmul_qbuf_bytes((int64_t)ff, (int64_t)BK);
    e->mm.qbuf_bytes = CLB_MAX(CLB_MAX(clb_matmul_qbuf_bytes((int64_t)maxc, (int64_t)CLB_MAX(BK, B)), q_moe),
                               CLB_MAX(clb_ffn_swiglu_qbuf_bytes((int64_t)E, (int64_t)ff, (int64_t)B),
                                       clb_attn_qbuf_bytes(&e->attn)));
    e->mm.qbuf = clb_arena_take(a, e->mm.qbuf_bytes);
}

colibri_engine_t *colibri_init_params(const char *model_path, const colibri_params *params) {
    return clb_init_engine(model_path, NULL, params, NULL);
}

colibri_engine_t *clb_init_engine(const char *model_path, const clb_io *io, const colibri_params *params,
                                  struct clb_heap *heap) {
    colibri_params p = params ? *params : colibri_params_default();
    if (p.n_threads < 0 || p.max_seq_len < 0 || p.n_batch < 0 || p.moe_top_k < 0 || p.router_temperature < 0 ||
        p.n_seq < 0 || p.n_seq > COLIBRI_MAX_SEQ) {
        clb_err(COLIBRI_ERR_ARG, "negative run-time setting");
        return NULL;
    }
    if (p.cache_type_k < 0 || p.cache_type_k >= (int)CLB_ARRAY_LEN(KV_NAMES) || p.cache_type_v < 0 ||
        p.cache_type_v >= (int)CLB_ARRAY_LEN(KV_NAMES) || p.flash_attn < -1 || p.flash_attn > 1 || p.mla < -1 ||
        p.mla > 1 || p.ctx_shift < 0 || p.ctx_shift > 1 || p.n_keep < 0) {
        clb_err(COLIBRI_ERR_ARG, "cache_type_k %d / cache_type_v %d / flash_attn %d / mla %d / ctx_shift %d / n_keep %d out of range",
                p.cache_type_k, p.cache_type_v, p.flash_attn, p.mla, p.ctx_shift, p.n_keep);
        return NULL;
    }
    if (io && (p.usage_stats || p.direct_io > 0)) {
        clb_err(COLIBRI_ERR_ARG, "%s: usage_stats and direct_io need a model file, not a source callback", io->name);
        return NULL;
    }
    colibri_engine_t *e = clb_calloc(1, sizeof *e);
    if (!e) {
        clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        return NULL;
    }
    e->embedded = io != NULL;
    e->heap = heap;
    if (io) {
        /* without a map, a bounded store reads the experts through the source on demand */
        /* (the test clb_mem_init makes: COLIBRI_PAGE_POOL_SIZE replaces expert_pool_bytes) */
        const char *pe = getenv("COLIBRI_PAGE_POOL_SIZE");
        uint64_t pool = p.expert_pool_bytes;
        if (pe && *pe && !clb_mem_parse_size(pe, &pool)) pool = 0; /* clb_mem_init reports it */
        const bool stream = p.mem_budget > 0 || pool > 0;
        if (clb_model_load_io(NULL, io, stream, &e->model)) goto fail;
        model_path = e->model->src.path;
    } else if (clb_model_load(model_path, &e->model)) {
        goto fail;
    }
    e->hp = e->model->hp;
    const clb_hparams *hp = e->hp;
    e->k = clb_kernels_get();
    {
        /* COLIBRI_PACK=0: per-row kernels only; =rows: packed kernels on row-major bytes */
        const char *pk = getenv("COLIBRI_PACK");
        e->pack_k = pk && strcmp(pk, "0") == 0 ? NULL : e->k;
        e->pack_interleave = !(pk && strcmp(pk, "rows") == 0);
        if (e->pack_k && clb_model_pack(e->model, e->pack_k, e->pack_interleave)) goto fail;
    }
    int cpus[CLB_MAX_CPUS], n_cpus = 0;
    clb_pool_opts po;
    if (clb_rt_prepare(e, &p, cpus, CLB_MAX_CPUS, &n_cpus, &po)) goto fail;
    e->n_threads = p.n_threads > 0 ? p.n_threads : n_cpus > 0 ? n_cpus : clb_cpu_count();
    e->max_seq = p.max_seq_len > 0 ? p.max_seq_len : CLB_MIN(hp->max_pos, 4096);
    e->n_batch = p.n_batch > 0 ? p.n_batch : 64;
    e->n_seq = p.n_seq > 0 ? p.n_seq : 1;
    e->seq_past = clb_calloc((size_t)e->n_seq, sizeof(int32_t));
    e->seq_keep = clb_calloc((size_t)e->n_seq, sizeof(int32_t));
    e->seq_tokens = clb_calloc((size_t)e->n_seq * (size_t)e->max_seq, sizeof(int32_t));
    e->ctx_shift = p.ctx_shift > 0;
    for (int s = 0; e->seq_keep && s < e->n_seq; s++) e->seq_keep[s] = p.n_keep;
    if (!e->seq_past || !e->seq_keep || !e->seq_tokens) {
        clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* attention experts: the model's routing, whatever the FFN router's run-time settings */
    e->moa_router = (clb_router_cfg){.n_expert = hp->n_attn_exp, .k = hp->n_attn_exp_used, .score = CLB_SCORE_SOFTMAX,
                                     .norm_topk = true, .scale = 1.0f, .temperature = 1.0f};
    if (hp->n_expert > 0) {
        if (p.moe_top_k > hp->n_expert) {
            clb_err(COLIBRI_ERR_ARG, "moe_top_k %d exceeds the model's %d experts", p.moe_top_k, hp->n_expert);
            goto fail;
        }
        e->router = (clb_router_cfg){
            .n_expert = hp->n_expert,
            .k = p.moe_top_k > 0 ? p.moe_top_k : hp->n_expert_used,
            .score = hp->router_score,
            .norm_topk = hp->norm_topk,
            .norm_min = hp->norm_min,
            .scale = hp->routed_scale,
            .n_group = hp->n_group,
            .topk_group = hp->topk_group,
            .group_score = hp->group_score,
            .jitter = hp->router_jitter,
            .temperature = p.router_temperature > 0 ? p.router_temperature : 1.0f,
            .top_p = p.moe_top_p,
            .k_min = p.moe_k_min,
            .k_max = p.moe_k_max,
        };
        if (!(p.moe_miss_drop >= 0 && p.moe_miss_drop <= 1)) {
            clb_err(COLIBRI_ERR_ARG, "moe_miss_drop %g is not in 0..1", (double)p.moe_miss_drop);
            goto fail;
        }
        e->miss_drop = p.moe_miss_drop;
        if (!(p.moe_standin >= 0 && p.moe_standin <= 1)) {
            clb_err(COLIBRI_ERR_ARG, "moe_standin %g is not in 0..1", (double)p.moe_standin);
            goto fail;
        }
        e->standin = p.moe_standin;
        if (p.moe_top_p < 0 || p.moe_top_p > 1 || p.moe_k_min < 0 || p.moe_k_max < 0 ||
            p.moe_k_max > hp->n_expert || (p.moe_k_max && p.moe_k_min > p.moe_k_max)) {
            clb_err(COLIBRI_ERR_ARG, "moe_top_p %g / k_min %d / k_max %d out of range (1..%d experts)",
                    (double)p.moe_top_p, p.moe_k_min, p.moe_k_max, hp->n_expert);
            goto fail;
        }
        if (p.moe_top_p > 0 && hp->router_score == CLB_SCORE_SPARSEMIXER) {
            clb_err(COLIBRI_ERR_UNSUPPORTED, "moe_top_p is not supported with sparsemixer routing (%s)", hp->arch);
            goto fail;
        }
        /* buffers hold k_cap experts per token: room to raise top-k at run time */
        int kc = CLB_MAX(2 * hp->n_expert_used, e->router.k);
        if (p.moe_top_p > 0) kc = CLB_MAX(kc, p.moe_k_max > 0 ? p.moe_k_max : hp->n_expert);
        e->k_cap = CLB_MIN(kc, hp->n_expert);
    }
    if (clb_rope_init(&e->rope, hp, e->model->rope_freqs.data, e->max_seq)) goto fail;
    e->pool = clb_pool_create_ex(e->n_threads, &po, e->rt_warn, sizeof e->rt_warn);
    if (!e->pool) {
        clb_err(COLIBRI_ERR_NOMEM, "cannot start %d threads", e->n_threads);
        goto fail;
    }
    e->mm.pool = e->pool;
    e->mm.k = e->k;
    const clb_attn_params ap = {.kv = {.n_seq = e->n_seq, .max_seq = e->max_seq, .n_batch = e->n_batch,
                                       .k_type = KV_DTYPES[p.cache_type_k], .v_type = KV_DTYPES[p.cache_type_v],
                                       .mla_latent = p.mla >= 0},
                                .flash = p.flash_attn};
    if (clb_attn_init(&e->attn, hp, e->model->layers, e->k, &e->mm, &e->rope, e->pool, e->n_threads, e->n_batch, &ap))
        goto fail;
    const uint64_t kv_bytes = e->attn.kv.seq_bytes * (uint64_t)e->n_seq;
    carve(e);
    if (clb_arena_alloc_block(&e->arena)) goto fail;
    carve(e);
    /* expert parallelism (colibri_set_default_expert_exec) before the expert store is set up,
       so that it holds only this rank's experts */
    if (clb_xp_apply_default(e)) goto fail;
    if (clb_mem_init(e, model_path, &p, kv_bytes)) goto fail; /* budget, expert pool */
    if (clb_store_io_pin_error(e->model->store))
        clb_warn_add(e->rt_warn, sizeof e->rt_warn, "cannot pin the I/O threads to '%s': %s", p.io_cpus,
                     strerror(clb_store_io_pin_error(e->model->store)));
    if (p.mlock) clb_rt_lock(e);
    e->stats.n_layers = CLB_MIN(hp->n_layer, COLIBRI_STATS_MAX_LAYERS);
    e->stats.n_experts = CLB_MIN(hp->n_expert, COLIBRI_STATS_MAX_EXPERTS);
    return e;
fail:
    colibri_free(e);
    return NULL;
}

void colibri_free(colibri_engine_t *e) {
    if (!e) return;
    struct clb_heap *heap = e->heap;
    clb_pool_free(e->pool);
    clb_xp_free(e);
    clb_arena_release(&e->arena);
    clb_attn_free(&e->attn);
    clb_free(e->seq_past);
    clb_free(e->seq_keep);
    clb_free(e->seq_tokens);
    clb_rope_free(&e->rope);
    clb_model_free(e->model);
    clb_tokenizer_free(e->tok);
    clb_free(e);
    clb_heap_unregister(heap); /* the block is the caller's again */
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int colibri_forward_ex(colibri_engine_t *e, int32_t token_id, float *logits, size_t logits_cap,
                       int32_t *next_token) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    const int V = e->hp->n_vocab;
    if (logits && logits_cap < (size_t)V)
        return clb_err(COLIBRI_ERR_ARG, "logits buffer holds %zu floats, the vocabulary needs %d", logits_cap, V);
    double t0 = clb_now();
    int rc = clb_engine_batch(e, &token_id, NULL, 1, e->logits, NULL, 1);
    if (rc) return rc;
    if (logits) memcpy(logits, e->logits, sizeof(float) * (size_t)V);
    if (next_token) *next_token = argmax(e->logits, V);
    e->stats.tokens_generated++;
    e->stats.time_generate_s += clb_now() - t0;
    return COLIBRI_OK;
}

int colibri_forward(colibri_engine_t *e, int32_t token_id, float *logits, int32_t *next_token) {
    return colibri_forward_ex(e, token_id, logits, logits ? (size_t)-1 : 0, next_token);
}

int colibri_eval(colibri_engine_t *e, const int32_t *tokens, size_t n, float *logits, size_t logits_cap) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (n == 0) return COLIBRI_OK;
    if (!tokens) return clb_err(COLIBRI_ERR_ARG, "NULL tokens");
    const size_t V = (size_t)e->hp->n_vocab;
    if (logits && (n > SIZE_MAX / V || logits_cap < n * V))
        return clb_err(COLIBRI_ERR_ARG, "logits buffer holds %zu floats, %zu positions need %zu", logits_cap, n,
                       n * V);
    if (!e->ctx_shift && (uint64_t)e->seq_past[0] + n > (uint64_t)e->max_seq)
        return clb_err(COLIBRI_ERR_RANGE, "%zu tokens after %d would exceed max_seq_len %d", n, e->seq_past[0],
                       e->max_seq);
    /* with context shifts, steps small enough that one fits after the kept start */
    const int step = e->ctx_shift ? CLB_MAX(1, CLB_MIN(e->n_batch, (e->max_seq - e->seq_keep[0]) / 2)) : e->n_batch;
    double t0 = clb_now();
    for (size_t i = 0; i < n; i += (size_t)step) {
        int cnt = (int)CLB_MIN((size_t)step, n - i);
        int rc = clb_engine_batch(e, tokens + i, NULL, cnt, logits ? e->logits : NULL, NULL, logits ? cnt : 0);
        if (rc) return rc;
        if (logits) memcpy(logits + i * V, e->logits, sizeof(float) * V * (size_t)cnt);
    }
    e->stats.tokens_prompt += n;
    e->stats.time_prompt_s += clb_now() - t0;
    return COLIBRI_OK;
}

void colibri_reset(colibri_engine_t *e) {
    if (!e) return;
    for (int s = 0; s < e->n_seq; s++) {
        e->seq_past[s] = 0;
        clb_kv_clear(&e->attn.kv, s);
    }
}

int colibri_truncate(colibri_engine_t *e, int32_t n) {
    return colibri_seq_truncate(e, 0, n);
}

int colibri_seq_truncate(colibri_engine_t *e, int32_t seq, int32_t n) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (seq < 0 || seq >= e->n_seq) return clb_err(COLIBRI_ERR_ARG, "sequence %d out of range (the engine holds %d)", seq, e->n_seq);
    if (n < 0 || n > e->seq_past[seq])
        return clb_err(COLIBRI_ERR_ARG, "cannot truncate sequence %d of %d tokens to %d", seq, e->seq_past[seq], n);
    /* a layer that keeps only its window may already have dropped what the next token
       would see: then the sequence starts over */
    e->seq_past[seq] = clb_kv_keepable(&e->attn.kv, seq, n);
    if (e->seq_past[seq] == 0) clb_kv_clear(&e->attn.kv, seq);
    return COLIBRI_OK;
}

int32_t colibri_seq_n_past(const colibri_engine_t *e, int32_t seq) {
    return e && seq >= 0 && seq < e->n_seq ? e->seq_past[seq] : -1;
}

int32_t colibri_n_seq(const colibri_engine_t *e) { return e ? e->n_seq : 0; }

/* Splits the tokens into steps of at most n_batch; each step is one clb_engine_batch. */
int colibri_decode(colibri_engine_t *e, const colibri_batch_tok *toks, size_t n, float *logits, size_t logits_cap) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (n == 0) return COLIBRI_OK;
    if (!toks) return clb_err(COLIBRI_ERR_ARG, "NULL tokens");
    const size_t V = (size_t)e->hp->n_vocab;
    size_t want = 0;
    for (size_t i = 0; i < n; i++) want += toks[i].logits != 0;
    if (want && (!logits || want > SIZE_MAX / V || logits_cap < want * V))
        return clb_err(COLIBRI_ERR_ARG, "logits buffer holds %zu floats, %zu rows need %zu", logits ? logits_cap : 0,
                       want, want * V);
    /* every step must fit; checked up front so that a failure leaves every sequence as it was */
    for (int s = 0; s < e->n_seq; s++) e->seq_cnt[s] = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t s = toks[i].seq;
        if (s < 0 || s >= e->n_seq)
            return clb_err(COLIBRI_ERR_ARG, "sequence %d out of range (the engine holds %d)", s, e->n_seq);
        if (e->seq_past[s] + ++e->seq_cnt[s] > e->max_seq && !e->ctx_shift)
            return clb_err(COLIBRI_ERR_RANGE, "sequence %d would reach %d tokens, beyond max_seq_len %d", s,
                           e->seq_past[s] + e->seq_cnt[s], e->max_seq);
    }
    memcpy(e->seq_save, e->seq_past, sizeof(int32_t) * (size_t)e->n_seq);
    double t0 = clb_now();
    size_t out = 0;
    int rc = COLIBRI_OK;
    for (size_t i = 0; i < n && !rc; i += (size_t)e->n_batch) {
        const int cnt = (int)CLB_MIN((size_t)e->n_batch, n - i);
        int nr = 0;
        for (int t = 0; t < cnt; t++) {
            e->b_tok[t] = toks[i + (size_t)t].token;
            e->b_seq[t] = toks[i + (size_t)t].seq; /* clb_engine_batch rewrites it with the same values */
            if (toks[i + (size_t)t].logits) e->b_rows[nr++] = t;
        }
        /* straight into the caller's rows (checked to fit above): a copy of 4 x 152k floats
           was 0.4 % of a 4-stream server step, on the evaluating thread alone */
        rc = clb_engine_batch(e, e->b_tok, e->b_seq, cnt, nr ? logits + out * V : NULL, e->b_rows, nr);
        out += (size_t)nr;
    }
    if (rc) { /* all or nothing: earlier steps' KV rows stay but are beyond the positions */
        memcpy(e->seq_past, e->seq_save, sizeof(int32_t) * (size_t)e->n_seq);
        return rc;
    }
    e->stats.tokens_decoded += n;
    e->stats.time_decode_s += clb_now() - t0;
    return rc;
}

int32_t colibri_n_vocab(const colibri_engine_t *e) { return e ? e->hp->n_vocab : 0; }
int32_t colibri_n_past(const colibri_engine_t *e) { return e ? e->seq_past[0] : 0; }
int32_t colibri_max_seq_len(const colibri_engine_t *e) { return e ? e->max_seq : 0; }
int32_t colibri_n_ctx_train(const colibri_engine_t *e) { return e ? e->hp->max_pos : 0; }
int32_t colibri_bos_id(const colibri_engine_t *e) { return e ? e->hp->bos_id : -1; }
int32_t colibri_eos_id(const colibri_engine_t *e) { return e ? e->hp->eos_id : -1; }

int colibri_set_moe_top_k(colibri_engine_t *e, int32_t k) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (e->hp->n_expert <= 0) return clb_err(COLIBRI_ERR_ARG, "the model has no routed experts");
    if (k < 1 || k > e->k_cap)
        return clb_err(COLIBRI_ERR_ARG, "top-k %d out of range 1..%d (the bound set at init: pass moe_top_k %d or more "
                       "to colibri_init to go higher)", k, e->k_cap, k);
    e->router.k = k;
    return COLIBRI_OK;
}

colibri_stats_t colibri_get_stats(colibri_engine_t *e) {
    colibri_stats_t s;
    if (!e) {
        memset(&s, 0, sizeof s);
        return s;
    }
    e->stats.peak_rss_bytes = e->embedded ? 0 : clb_peak_rss(); /* no /proc read for an embedder */
    clb_mem_stats(e, &e->stats);
    e->stats.kv_bytes = e->attn.kv.seq_bytes * (uint64_t)e->n_seq;
    e->stats.kv_bytes_per_token = clb_kv_bytes_per_pos(&e->attn.kv);
    return e->stats;
}

int colibri_expert_state(colibri_engine_t *e, int32_t layer, uint32_t *last, uint8_t *resident, size_t cap) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (layer < 0 || layer >= e->hp->n_layer)
        return clb_err(COLIBRI_ERR_ARG, "layer %d out of range (the model has %d)", layer, e->hp->n_layer);
    const int ne = e->hp->n_expert;
    if (ne <= 0 || !e->model->layers[layer].is_moe) return 0;
    if ((last || resident) && cap < (size_t)ne)
        return clb_err(COLIBRI_ERR_ARG, "buffer of %zu entries, layer %d has %d experts", cap, layer, ne);
    for (int x = 0; x < ne; x++) {
        if (last) last[x] = (uint32_t)e->last_route[(size_t)layer * (size_t)ne + (size_t)x];
        if (resident) resident[x] = clb_store_is_resident(e->model->store, layer, x);
    }
    return ne;
}
