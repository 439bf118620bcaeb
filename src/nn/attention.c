/* attention.c — the attention block (attention.h): projections, norms, rope, KV cache,
 * attention, output projection. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/common.h"
#include "nn/attention.h"

/* flash attention: query tiles of up to FA_MAXM rows, key chunks of FA_KC positions */
enum { FA_MAXM = 32, FA_KC = 256 };
typedef struct fa_tile fa_tile;
struct fa_tile {
    int32_t seq, g, h0, nh; /* sequence, K/V head, query heads g * group + [h0, h0 + nh) */
    int32_t t0, nt;         /* tokens order[t0 .. t0 + nt) (one sequence, in order) */
    int64_t kfirst, klast;  /* the keys any of its rows sees */
    int64_t c0, nc, cbase;  /* its chunks; split mode: first partial state */
};

static int mla_weights(clb_attn *a, const clb_layer *layers, bool latent);

int clb_attn_init(clb_attn *a, const clb_hparams *hp, const clb_layer *layers, const clb_kernels *k,
                  const clb_mm_ctx *mm, const clb_rope *rope, clb_pool *pool, int n_threads, int n_batch,
                  const clb_attn_params *ap) {
    const clb_kv_params *kp = &ap->kv;
    memset(a, 0, sizeof *a);
    a->hp = hp;
    a->k = k;
    a->mm = mm;
    a->rope = rope;
    a->pool = pool;
    a->n_threads = n_threads;
    a->n_batch = n_batch;
    a->max_seq = kp->max_seq;
    const bool f32 = kp->k_type == CLB_DT_F32 && kp->v_type == CLB_DT_F32;
    if (ap->flash < 0 && !f32)
        return clb_err(COLIBRI_ERR_ARG, "flash attention off needs f32 K and V caches (they are %s and %s)",
                       clb_dtype_name(kp->k_type), clb_dtype_name(kp->v_type));
    a->flash = ap->flash > 0 || (ap->flash == 0 && !f32);
    clb_kv_params kvp = *kp;
    kvp.k = k; /* the rows are written with this table's quantizers */
    int rc = clb_kv_init(&a->kv, hp, &kvp);
    if (rc) return rc;
    int64_t kdim = 0, vdim = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        kdim = CLB_MAX(kdim, a->kv.layers[l].k_pad);
        vdim = CLB_MAX(vdim, a->kv.layers[l].v_pad);
    }
    /* per thread: the tile's queries, scores, row bounds, a chunk's and the running states */
    a->work_floats = clb_align_up((uint64_t)(FA_MAXM * kdim + kdim + 1 + FA_MAXM * CLB_FA_TK + 4 * FA_MAXM +
                                             2 * FA_MAXM * (vdim + 2)), 16);
    /* key-split partial states: enough for 2 query tiles per thread over the whole context */
    const size_t chunks = (size_t)(kp->max_seq + FA_KC - 1) / FA_KC + 1;
    a->part_floats = CLB_MIN((size_t)2 * (size_t)n_threads * chunks * FA_MAXM * (size_t)(vdim + 2), (size_t)8 << 20);
    return hp->attn_kind == CLB_ATTN_MLA ? mla_weights(a, layers, kp->mla_latent) : COLIBRI_OK;
}

uint64_t clb_attn_qbuf_bytes(const clb_attn *a) {
    /* MLA latent: the latent outputs of every head converted for W_uv */
    /* (and the queries converted for a split file's quantized W_uk^T, before them) */
    if (!a->wuv) return 0;
    const int64_t cols = CLB_MAX(a->hp->kv_lora_rank, a->hp->head_dim - a->hp->n_rot);
    return clb_matmul_qbuf_bytes(cols, (int64_t)a->n_batch * a->hp->n_head);
}

/* The row-major bytes of row r of w (w may be packed: rows interleaved in groups). */
static const uint8_t *weight_row(const clb_weight *w, int64_t r, uint8_t *group, uint8_t *scratch) {
    if (!(w->interleaved && r < w->packed_rows)) return (const uint8_t *)w->data + (uint64_t)r * w->row_bytes;
    const int64_t g0 = r / CLB_PACK_ROWS * CLB_PACK_ROWS;
    memcpy(group, (const uint8_t *)w->data + (uint64_t)g0 * w->row_bytes, w->row_bytes * CLB_PACK_ROWS);
    clb_unpack_rows(w->dtype, w->cols, CLB_PACK_ROWS, group, scratch);
    return group + (uint64_t)(r - g0) * w->row_bytes;
}

/* Rows [row0, row0 + n) of w transposed into cols rows of n values of dtype dt at dst (rb
   bytes each). row: [w->cols] floats, col: [w->cols * n] floats, group / scratch: one packed
   group of w. */
static void transpose_rows(const clb_weight *w, int64_t row0, int64_t n, int dt, uint8_t *dst, uint64_t rb,
                           float *row, float *col, uint8_t *group, uint8_t *scratch) {
    for (int64_t i = 0; i < n; i++) {
        clb_dequantize_row_ref((clb_dtype)w->dtype, weight_row(w, row0 + i, group, scratch), row, w->cols);
        for (int64_t c = 0; c < w->cols; c++) col[c * n + i] = row[c];
    }
    for (int64_t c = 0; c < w->cols; c++) clb_quantize_row_ref((clb_dtype)dt, col + c * n, dst + (uint64_t)c * rb, n);
}

/* What mla_weights builds for layer L (NULL: nothing, the file's tensors serve): from what,
   in which type kt, rb bytes a row. */
static const clb_weight *mla_built(const clb_layer *L, bool latent, int nope, int r, int *kt, uint64_t *rb) {
    const clb_weight *src = latent ? (L->wk_b.data ? NULL : &L->wkv_b) : (L->wkv_b.data ? NULL : &L->wk_b);
    if (latent) *kt = src && src->dtype == CLB_DT_F32 ? CLB_DT_F32 : CLB_DT_F16;
    else *kt = src && src->dtype == CLB_DT_F16 ? CLB_DT_F16 : CLB_DT_F32;
    *rb = 0;
    clb_row_bytes(*kt, latent ? nope : r, rb);
    return src;
}

/* mla_weights' matrices built from the fused kv_b or transposed from k_b: bytes in all,
   max_rb the longest source row. */
static int mla_build(clb_attn *a, const clb_layer *layers, bool latent, uint64_t bytes, uint64_t max_rb) {
    const clb_hparams *hp = a->hp;
    const int H = hp->n_head, nope = hp->head_dim - hp->n_rot, hdv = hp->head_dim_v, r = hp->kv_lora_rank;
    a->mla_w = clb_alloc_aligned((size_t)bytes);
    float *row = clb_malloc(sizeof(float) * (size_t)CLB_MAX(r, nope));
    float *col = clb_malloc(sizeof(float) * (size_t)nope * (size_t)r);
    uint8_t *group = clb_malloc((size_t)max_rb * CLB_PACK_ROWS + 64);
    uint8_t *scratch = clb_malloc((size_t)max_rb * CLB_PACK_ROWS + 64); /* clb_pack_scratch_bytes: one group */
    int rc = COLIBRI_OK;
    if (!a->mla_w || !row || !col || !group || !scratch) rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory for the MLA weights");
    uint8_t *p = a->mla_w;
    for (int l = 0; l < hp->n_layer && !rc; l++) {
        int kt;
        uint64_t rb;
        const clb_weight *src = mla_built(&layers[l], latent, nope, r, &kt, &rb);
        if (!src) continue;
        if (!latent) { /* W_uk: head h's nope rows from k_b's rank rows of head h */
            a->wkb[l] = (clb_weight){.data = p, .dtype = kt, .rows = (int64_t)H * nope, .cols = r, .row_bytes = rb};
            for (int h = 0; h < H; h++)
                transpose_rows(src, (int64_t)h * r, r, kt, p + (uint64_t)h * nope * rb, rb, row, col, group, scratch);
            p = a->mla_w + clb_align_up((uint64_t)(p - a->mla_w) + rb * (uint64_t)nope * H, 64);
            continue;
        }
        for (int h = 0; h < H; h++) {
            clb_weight *wk = &a->wuk[(int64_t)l * H + h];
            *wk = (clb_weight){.data = p, .dtype = kt, .rows = r, .cols = nope, .row_bytes = rb};
            transpose_rows(src, (int64_t)h * (nope + hdv), nope, kt, p, rb, row, col, group, scratch);
            p += rb * (uint64_t)r;
        }
        p = a->mla_w + clb_align_up((uint64_t)(p - a->mla_w), 64);
        for (int h = 0; h < H; h++) {
            clb_weight *wv = &a->wuv[(int64_t)l * H + h];
            *wv = (clb_weight){.data = p, .dtype = src->dtype, .rows = hdv, .cols = r, .row_bytes = src->row_bytes};
            for (int j = 0; j < hdv; j++)
                memcpy(p + (uint64_t)j * src->row_bytes,
                       weight_row(src, (int64_t)h * (nope + hdv) + nope + j, group, scratch), src->row_bytes);
            p += src->row_bytes * (uint64_t)hdv;
        }
        p = a->mla_w + clb_align_up((uint64_t)(p - a->mla_w), 64);
    }
    clb_free(row);
    clb_free(col);
    clb_free(group);
    clb_free(scratch);
    return rc;
}

/* The MLA matrices a layer's tensors do not hold as such. Latent cache: W_uk^T and W_uv of
   every head (a->wuk, a->wuv), a split file's k_b / v_b slices as they are (their type);
   from the fused kv_b ([n_head][nope + hdv][rank]) W_uk^T transposed, exactly in f32 from
   an f32 file, else in f16, and W_uv its rows as they are. Decompressed K/V with k_b / v_b
   but no kv_b: W_uk [n_head * nope][rank] (a->wkb[l]), k_b transposed exactly (f16 from
   f16, else f32); V comes from v_b itself. */
static int mla_weights(clb_attn *a, const clb_layer *layers, bool latent) {
    const clb_hparams *hp = a->hp;
    const int H = hp->n_head, nope = hp->head_dim - hp->n_rot, hdv = hp->head_dim_v, r = hp->kv_lora_rank;
    const int64_t nw = (int64_t)hp->n_layer * H;
    if (latent) {
        a->wuk = clb_calloc((size_t)nw, sizeof *a->wuk);
        a->wuv = clb_calloc((size_t)nw, sizeof *a->wuv);
        if (!a->wuk || !a->wuv) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    } else if (!(a->wkb = clb_calloc((size_t)hp->n_layer, sizeof *a->wkb))) {
        return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    }
    uint64_t bytes = 0, max_rb = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        int kt;
        uint64_t rb;
        const clb_weight *src = mla_built(&layers[l], latent, nope, r, &kt, &rb);
        if (!src) continue;
        if (latent) bytes += clb_align_up(rb * (uint64_t)r * H, 64) + clb_align_up(src->row_bytes * (uint64_t)hdv * H, 64);
        else bytes += clb_align_up(rb * (uint64_t)nope * H, 64);
        max_rb = CLB_MAX(max_rb, src->row_bytes);
    }
    int rc = bytes ? mla_build(a, layers, latent, bytes, max_rb) : COLIBRI_OK;
    if (rc) return rc;
    /* the split file's own per-head matrices */
    for (int l = 0; l < hp->n_layer && latent; l++) {
        const clb_weight *kb = &layers[l].wk_b, *vb = &layers[l].wv_b;
        if (!kb->data) continue;
        for (int h = 0; h < H; h++) {
            a->wuk[(int64_t)l * H + h] = (clb_weight){.data = (const uint8_t *)kb->data + (uint64_t)h * r * kb->row_bytes,
                                                      .dtype = kb->dtype, .rows = r, .cols = nope, .row_bytes = kb->row_bytes};
            a->wuv[(int64_t)l * H + h] = (clb_weight){.data = (const uint8_t *)vb->data + (uint64_t)h * hdv * vb->row_bytes,
                                                      .dtype = vb->dtype, .rows = hdv, .cols = r, .row_bytes = vb->row_bytes};
        }
    }
    return COLIBRI_OK;
}

void clb_attn_free(clb_attn *a) {
    if (!a) return;
    clb_kv_free(&a->kv);
    clb_free(a->wuk);
    clb_free(a->wuv);
    clb_free(a->wkb);
    clb_free_aligned(a->mla_w);
}

void clb_attn_carve(clb_attn *a, clb_arena *ar) {
    const clb_hparams *hp = a->hp;
    const size_t B = (size_t)a->n_batch, F = sizeof(float);
    const size_t qd = (size_t)hp->n_head * hp->head_dim, kd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t vd = (size_t)hp->n_head_kv * hp->head_dim_v, od = (size_t)hp->n_head * hp->head_dim_v;
    a->q = clb_arena_take(ar, B * qd * F);
    a->kv_k = clb_arena_take(ar, B * kd * F);
    a->kv_v = clb_arena_take(ar, B * vd * F);
    a->att = clb_arena_take(ar, B * od * F);
    if (hp->attn_kind == CLB_ATTN_MLA) {
        const size_t nope = (size_t)(hp->head_dim - hp->n_rot);
        a->mla_qa = clb_arena_take(ar, B * (size_t)CLB_MAX(hp->q_lora_rank, 1) * F);
        a->mla_ckv = clb_arena_take(ar, B * (size_t)(hp->kv_lora_rank + hp->n_rot) * F);
        a->mla_kvb = clb_arena_take(ar, B * (size_t)hp->n_head * (nope + (size_t)hp->head_dim_v) * F);
    }
    if (a->wuk) {
        const size_t kp = (size_t)a->kv.layers[0].k_pad;
        a->q_abs = clb_arena_take(ar, B * (size_t)hp->n_head * kp * F);
        a->o_lat = clb_arena_take(ar, B * (size_t)hp->n_head * (size_t)hp->kv_lora_rank * F);
        a->jobs = clb_arena_take(ar, (size_t)hp->n_head * sizeof(clb_mm_job));
    }
    if (!a->flash) {
        /* the query heads per cached K/V head, as plain_run takes them: the cache's own
           head count per layer (1 for an MLA latent cache, whatever n_head_kv says) */
        size_t group = 1;
        for (int l = 0; l < a->kv.n_layer; l++)
            if (a->kv.layers[l].n_head > 0)
                group = CLB_MAX(group, (size_t)(hp->n_head / a->kv.layers[l].n_head));
        a->scores = clb_arena_take(ar, (size_t)a->n_threads * group * (size_t)a->max_seq * F);
        return;
    }
    a->order = clb_arena_take(ar, (B + (size_t)a->kv.n_seq + 1) * sizeof(int32_t));
    a->tiles = clb_arena_take(ar, B * (size_t)hp->n_head * sizeof(fa_tile));
    a->work = clb_arena_take(ar, (size_t)a->n_threads * a->work_floats * F);
    a->part = clb_arena_take(ar, a->part_floats * F);
}

/* ---- plain attention: every score of a (token, K/V head), softmax, weighted sum ---- */

typedef struct plain_task {
    const clb_attn *a;
    const clb_layer *L;
    int layer, n_tok;
    const int32_t *seq, *pos;
    const float *qf; /* queries [n_tok][n_head][qstride] */
    int64_t qstride;
    float *out;      /* [n_tok][n_head][v_dim] */
    atomic_llong next; /* the next (token, K/V head) unit to take */
} plain_task;

/* softmax over x[0..n) with one more logit `sink` in the denominator (no value) */
static void softmax_sink(float *x, int64_t n, float sink) {
    float mx = sink;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = expf(sink - mx);
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* One (token, K/V head) unit at a time, for the query heads that share that K/V head
   (grouped-query attention): scores over the positions the layer lets the token see,
   softmax, weighted sum of values. Each cached key and value row is loaded once for the
   whole group and reused from L1 by its query heads. Threads take units from a shared
   counter (in a causal batch the later tokens cost more). f32 rows only. */
static void plain_run(void *arg, int ith, int nth) {
    plain_task *t = arg;
    (void)nth;
    const clb_attn *a = t->a;
    const clb_hparams *hp = a->hp;
    const clb_kv_cache *kv = &a->kv;
    const int l = t->layer;
    const clb_kv_layer *KL = &kv->layers[l];
    const int hd = KL->k_dim, hdv = KL->v_dim, nkv = KL->n_head, group = hp->n_head / nkv;
    const float scale = hp->attn_mult > 0 ? hp->attn_mult : 1.0f / sqrtf((float)hp->head_dim);
    const float *sinks = t->L->sinks.data;
    const int64_t ms = a->max_seq;
    float *sc = a->scores + (int64_t)ith * group * ms; /* [group][max_seq] */
    const clb_vec_dot_fn dot = a->k->vec_dot[CLB_DT_F32];
    const int64_t n_units = (int64_t)t->n_tok * nkv;
    for (int64_t u; (u = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed)) < n_units;) {
        const int tok = (int)(u / nkv), g = (int)(u % nkv), h0 = g * group, s = t->seq[tok];
        const int64_t pos = t->pos[tok], first = clb_kv_first(kv, s, l, pos), m = pos - first + 1;
        const float *q0 = t->qf + ((int64_t)tok * hp->n_head + h0) * t->qstride;
        for (int64_t j = first; j <= pos; j++) {
            const float *kj = (const float *)clb_kv_krow(kv, s, l, g, j);
            for (int i = 0; i < group; i++) {
                float v;
                dot(hd, &v, kj, q0 + (int64_t)i * t->qstride);
                sc[(int64_t)i * ms + (j - first)] = v * scale;
            }
        }
        float *out0 = t->out + ((int64_t)tok * hp->n_head + h0) * hdv;
        for (int i = 0; i < group; i++) {
            if (sinks) softmax_sink(sc + (int64_t)i * ms, m, sinks[h0 + i]);
            else clb_softmax(sc + (int64_t)i * ms, m);
            memset(out0 + (int64_t)i * hdv, 0, sizeof(float) * (size_t)hdv);
        }
        for (int64_t j = first; j <= pos; j++) {
            const float *vj = (const float *)clb_kv_vrow(kv, s, l, g, j);
            for (int i = 0; i < group; i++) a->k->axpy_f32(hdv, sc[(int64_t)i * ms + (j - first)], vj, out0 + (int64_t)i * hdv);
        }
    }
}

/* ---- flash attention: one pass over K/V tiles with an online softmax ----
 *
 * A query tile is up to FA_MAXM rows — query heads of one K/V group times consecutive tokens
 * of one sequence — that share every key and value row they read. Keys come in tiles of
 * CLB_FA_TK positions aligned at multiples of CLB_FA_TK, grouped in chunks of FA_KC
 * positions. Each chunk gives every row a partial softmax state (its maximum m, sum l and
 * unnormalised value sum acc) computed from scratch, and the chunks' states are merged left
 * to right. Few query tiles over a long context (decoding) spread their chunks over the
 * threads and merge afterwards; otherwise a thread takes whole tiles. Either way a row goes
 * through the same operations — its scores padded to whole aligned key tiles (masked keys
 * are -inf, exactly 0 after the exp), the same chunks, the same merge order — whatever
 * shares its tile and whatever the thread count, so results do not depend on batching.
 * No score buffer grows with the context. */


typedef struct fa_task {
    const clb_attn *a;
    const clb_layer *L;
    int layer, n_tiles, phase; /* phase 0: whole tiles; 1: (tile, chunk) units; 2: merge them */
    int64_t n_units;
    const int32_t *pos;
    const float *qf; /* f32 queries [B][n_head][qstride], qvalid values each (the rest: zeros) */
    int64_t qstride, qvalid;
    float *out;      /* [B][n_head][v_dim] */
    atomic_llong next;
} fa_task;

typedef struct fa_work { /* one thread's slice of a->work */
    uint8_t *qt;          /* [FA_MAXM] query rows in the key type's query format */
    float *qpad;          /* [k_pad] one query row padded with zeros */
    float *s;             /* [FA_MAXM][CLB_FA_TK] */
    int64_t *first, *pos; /* [FA_MAXM] each row's key range */
    float *pm, *pl, *pacc, *rm, *rl, *racc; /* a chunk's and the running states */
} fa_work;

static fa_work fa_work_of(const clb_attn *a, int ith, int hdv) {
    float *w = a->work + (size_t)ith * a->work_floats;
    int64_t kdim = 0;
    for (int l = 0; l < a->kv.n_layer; l++) kdim = CLB_MAX(kdim, a->kv.layers[l].k_pad);
    fa_work f;
    f.qt = (uint8_t *)w;
    w += FA_MAXM * kdim;
    f.qpad = w;
    w += kdim + (kdim & 1);
    f.s = w;
    w += FA_MAXM * CLB_FA_TK;
    f.first = (int64_t *)w;
    f.pos = f.first + FA_MAXM;
    w += 4 * FA_MAXM;
    f.pm = w, f.pl = w + FA_MAXM, f.pacc = w + 2 * FA_MAXM;
    w += 2 * FA_MAXM + FA_MAXM * hdv;
    f.rm = w, f.rl = w + FA_MAXM, f.racc = w + 2 * FA_MAXM;
    return f;
}

/* The tile's query rows (token-major, then head) in the key type's query format, and
   each row's key range. */
static void fa_gather(const fa_task *t, const fa_tile *tl, fa_work *w) {
    const clb_attn *a = t->a;
    const clb_kv_layer *KL = &a->kv.layers[t->layer];
    const int H = a->hp->n_head, group = H / KL->n_head, qt = clb_fa_query_type(a->kv.k_type);
    uint64_t qrow;
    clb_row_bytes(qt, KL->k_pad, &qrow);
    for (int ti = 0; ti < tl->nt; ti++) {
        const int b = a->order[tl->t0 + ti];
        const int64_t p = t->pos[b], first = clb_kv_first(&a->kv, tl->seq, t->layer, p);
        for (int hi = 0; hi < tl->nh; hi++) {
            const int r = ti * tl->nh + hi, h = tl->g * group + tl->h0 + hi;
            const float *src = t->qf + ((int64_t)b * H + h) * t->qstride;
            if (t->qvalid < KL->k_pad) { /* zeros where the cached rows are padded */
                memcpy(w->qpad, src, sizeof(float) * (size_t)t->qvalid);
                memset(w->qpad + t->qvalid, 0, sizeof(float) * (size_t)(KL->k_pad - t->qvalid));
                src = w->qpad;
            }
            a->k->quantize[qt](src, w->qt + (uint64_t)r * qrow, KL->k_pad);
            w->first[r] = first;
            w->pos[r] = p;
        }
    }
}

/* the factor of a row's running sum and value sums when its maximum grows from m to mn
   (1: they stay as they are) */
static float fa_alpha(float m, float mn) { return m == -INFINITY || m == mn ? 1.0f : expf(m - mn); }

/* Chunk c of the tile from scratch: (m, l, acc) per row into pm, pl, pacc. */
static void fa_chunk(const fa_task *t, const fa_tile *tl, int64_t c, const fa_work *w, float *pm, float *pl,
                     float *pacc) {
    const clb_attn *a = t->a;
    const clb_kv_cache *kv = &a->kv;
    const int l = t->layer, M = tl->nh * tl->nt;
    const clb_kv_layer *KL = &kv->layers[l];
    const int hdv = KL->v_pad, kt = kv->k_type, vt = KL->v_in_k ? kv->k_type : kv->v_type;
    const float scale = a->hp->attn_mult > 0 ? a->hp->attn_mult : 1.0f / sqrtf((float)a->hp->head_dim);
    uint64_t qrow;
    clb_row_bytes(clb_fa_query_type(kt), KL->k_pad, &qrow);
    for (int r = 0; r < M; r++) pm[r] = -INFINITY, pl[r] = 0.0f;
    memset(pacc, 0, sizeof(float) * (size_t)M * (size_t)hdv);
    const int64_t lo = CLB_MAX(c * FA_KC, tl->kfirst), hi = CLB_MIN(c * FA_KC + FA_KC - 1, tl->klast);
    for (int64_t k0 = lo / CLB_FA_TK * CLB_FA_TK; k0 <= hi; k0 += CLB_FA_TK) {
        const int64_t ks = CLB_MAX(k0, lo), ke = CLB_MIN(k0 + CLB_FA_TK - 1, hi);
        const int nk = (int)(ke - ks + 1);
        float *s0 = w->s + (ks - k0);
        a->k->fa_scores[kt](KL->k_pad, M, nk, w->qt, qrow, clb_kv_krow(kv, tl->seq, l, tl->g, ks), KL->k_row, s0,
                            CLB_FA_TK);
        bool any = true, full = nk == CLB_FA_TK;
        for (int r = 0; r < M && full; r++) full = w->first[r] <= ks && w->pos[r] >= ke;
        float mn[FA_MAXM], sum[FA_MAXM]; /* each row's new maximum and its exp sum */
        if (full) { /* every row sees every key (decoding at depth): the rows' softmax steps at once */
            a->k->fa_softmax(M, w->s, scale, pm, mn, sum);
        } else {
            any = false;
            for (int r = 0; r < M; r++) {
                float *sr = w->s + (int64_t)r * CLB_FA_TK, mx = -INFINITY;
                const int64_t from = CLB_MAX(ks, w->first[r]) - k0, to = CLB_MIN(ke, w->pos[r]) - k0;
                if (from == 0 && to == CLB_FA_TK - 1) { /* every key seen */
                    a->k->fa_softmax(1, sr, scale, pm + r, mn + r, sum + r);
                    any = true;
                    continue;
                }
                for (int64_t j = 0; j < CLB_FA_TK; j++) {
                    if (j < from || j > to) {
                        sr[j] = -INFINITY;
                    } else {
                        sr[j] *= scale;
                        mx = sr[j] > mx ? sr[j] : mx;
                    }
                }
                mn[r] = pm[r], sum[r] = 0.0f;
                if (mx == -INFINITY) { /* no key of this tile for this row: it adds nothing */
                    memset(sr, 0, sizeof(float) * CLB_FA_TK);
                    continue;
                }
                any = true;
                mn[r] = pm[r] > mx ? pm[r] : mx;
                sum[r] = a->k->fa_exp_sum(CLB_FA_TK, sr, mn[r]);
            }
        }
        float alpha[FA_MAXM]; /* applied to the value sums by fa_vacc as it loads them */
        for (int r = 0; r < M; r++) {
            alpha[r] = fa_alpha(pm[r], mn[r]);
            pl[r] *= alpha[r];
            pl[r] += sum[r];
            pm[r] = mn[r];
        }
        /* when no row sees a key of the tile, every maximum stayed and every factor is 1 */
        if (any)
            a->k->fa_vacc[vt](hdv, M, nk, s0, CLB_FA_TK, clb_kv_vrow(kv, tl->seq, l, tl->g, ks), clb_kv_vstride(kv, l),
                              pacc, hdv, alpha);
    }
}

/* ra[i] = ra[i] * x + pa[i] * y, 4 lanes at a time (GNU vectors: SSE2 / NEON at the base
   ISA this file is built for), each lane the scalar loop's two products and their sum,
   unfused: the same bits. The scalar loop, once per row and 256-key chunk, was 4 % of
   decode's attention time at depth. */
typedef float fa_v4 __attribute__((vector_size(16)));
static void fa_axby(int n, float *ra, float x, const float *pa, float y) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        fa_v4 u, v;
        memcpy(&u, ra + i, sizeof u);
        memcpy(&v, pa + i, sizeof v);
        u = u * x + v * y;
        memcpy(ra + i, &u, sizeof u);
    }
    for (; i < n; i++) ra[i] = ra[i] * x + pa[i] * y;
}

/* running state R <- R merged with a chunk's P (rows of M) */
static void fa_merge(int M, int hdv, float *rm, float *rl, float *racc, const float *pm, const float *pl,
                     const float *pacc) {
    for (int r = 0; r < M; r++) {
        if (pm[r] == -INFINITY) continue;
        float *ra = racc + (int64_t)r * hdv;
        const float *pa = pacc + (int64_t)r * hdv;
        if (rm[r] == -INFINITY) {
            rm[r] = pm[r], rl[r] = pl[r];
            memcpy(ra, pa, sizeof(float) * (size_t)hdv);
            continue;
        }
        const float m = rm[r] > pm[r] ? rm[r] : pm[r], x = expf(rm[r] - m), y = expf(pm[r] - m);
        rl[r] = rl[r] * x + pl[r] * y;
        rm[r] = m;
        fa_axby(hdv, ra, x, pa, y);
    }
}

/* the softmax-normalised rows (with the sink logits, when the layer has them) into out */
static void fa_final(const fa_task *t, const fa_tile *tl, const float *rm, const float *rl, const float *racc) {
    const clb_attn *a = t->a;
    const clb_kv_layer *KL = &a->kv.layers[t->layer];
    const int H = a->hp->n_head, group = H / KL->n_head, hdv = KL->v_pad, dv = KL->v_dim;
    const float *sinks = t->L->sinks.data;
    for (int ti = 0; ti < tl->nt; ti++)
        for (int hi = 0; hi < tl->nh; hi++) {
            const int r = ti * tl->nh + hi, h = tl->g * group + tl->h0 + hi, b = a->order[tl->t0 + ti];
            float *o = t->out + ((int64_t)b * H + h) * dv;
            float sc = 1.0f / rl[r];
            if (sinks) {
                const float m = rm[r] > sinks[h] ? rm[r] : sinks[h], x = expf(rm[r] - m);
                sc = x / (rl[r] * x + expf(sinks[h] - m));
            }
            for (int i = 0; i < dv; i++) o[i] = racc[(int64_t)r * hdv + i] * sc;
        }
}

static void fa_run(void *arg, int ith, int nth) {
    fa_task *t = arg;
    (void)nth;
    const clb_attn *a = t->a;
    const int hdv = a->kv.layers[t->layer].v_pad;
    const fa_tile *tiles = a->tiles;
    fa_work w = fa_work_of(a, ith, hdv);
    const size_t pstride = FA_MAXM * (size_t)(hdv + 2);
    for (int64_t u; (u = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed)) < t->n_units;) {
        if (t->phase == 1) { /* unit = (tile, chunk); tiles in order, their chunks after one another */
            int ti = 0;
            while (ti + 1 < t->n_tiles && tiles[ti + 1].cbase <= u) ti++;
            const fa_tile *tl = &tiles[ti];
            float *p = a->part + (size_t)u * pstride;
            fa_gather(t, tl, &w);
            fa_chunk(t, tl, tl->c0 + (u - tl->cbase), &w, p, p + FA_MAXM, p + 2 * FA_MAXM);
            continue;
        }
        const fa_tile *tl = &tiles[t->n_tiles - 1 - u]; /* the costliest (latest) tiles first */
        const int M = tl->nh * tl->nt;
        for (int r = 0; r < M; r++) w.rm[r] = -INFINITY, w.rl[r] = 0.0f;
        if (t->phase == 0) fa_gather(t, tl, &w);
        for (int64_t c = 0; c < tl->nc; c++) {
            const float *p = a->part + (size_t)(tl->cbase + c) * pstride;
            if (t->phase == 0) {
                fa_chunk(t, tl, tl->c0 + c, &w, w.pm, w.pl, w.pacc);
                fa_merge(M, hdv, w.rm, w.rl, w.racc, w.pm, w.pl, w.pacc);
            } else {
                fa_merge(M, hdv, w.rm, w.rl, w.racc, p, p + FA_MAXM, p + 2 * FA_MAXM);
            }
        }
        fa_final(t, tl, w.rm, w.rl, w.racc);
    }
}

/* Attention of layer l for the batch: queries qf [n][n_head][qstride] (f32, rotated, qvalid
   values then zeros), output out [n][n_head][v_dim]. */
static void flash_attention(clb_attn *a, const clb_layer *L, int l, int n, const int32_t *seq, const int32_t *pos,
                            const float *qf, int64_t qstride, int64_t qvalid, float *out) {
    const clb_kv_cache *kv = &a->kv;
    const clb_kv_layer *KL = &kv->layers[l];
    const int group = a->hp->n_head / KL->n_head, nh = CLB_MIN(group, FA_MAXM), nt = CLB_MAX(1, FA_MAXM / nh);
    /* the tokens by sequence, each sequence's in batch order (= position order) */
    int32_t *cnt = a->order + a->n_batch;
    memset(cnt, 0, sizeof(int32_t) * (size_t)(kv->n_seq + 1));
    for (int t = 0; t < n; t++) cnt[seq[t] + 1]++;
    for (int s = 0; s < kv->n_seq; s++) cnt[s + 1] += cnt[s];
    for (int t = 0; t < n; t++) a->order[cnt[seq[t]]++] = t;
    fa_tile *tiles = a->tiles;
    int n_tiles = 0;
    int64_t chunks = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && seq[a->order[j]] == seq[a->order[i]]) j++;
        for (int g = 0; g < KL->n_head; g++)
            for (int h0 = 0; h0 < group; h0 += nh)
                for (int t0 = i; t0 < j; t0 += nt) {
                    fa_tile *tl = &tiles[n_tiles++];
                    tl->seq = seq[a->order[i]], tl->g = g, tl->h0 = h0, tl->nh = CLB_MIN(nh, group - h0);
                    tl->t0 = t0, tl->nt = CLB_MIN(nt, j - t0);
                    tl->kfirst = clb_kv_first(kv, tl->seq, l, pos[a->order[t0]]);
                    tl->klast = pos[a->order[t0 + tl->nt - 1]];
                    tl->c0 = tl->kfirst / FA_KC;
                    tl->nc = tl->klast / FA_KC - tl->c0 + 1;
                    tl->cbase = chunks;
                    chunks += tl->nc;
                }
        i = j;
    }
    fa_task t = {.a = a, .L = L, .layer = l, .n_tiles = n_tiles, .pos = pos, .qf = qf, .qstride = qstride,
                 .qvalid = qvalid, .out = out};
    const int nth = clb_pool_size(a->pool);
    const bool split = n_tiles < 2 * nth && chunks > n_tiles &&
                       (size_t)chunks * FA_MAXM * (size_t)(KL->v_pad + 2) <= a->part_floats;
    t.phase = split ? 1 : 0;
    t.n_units = split ? chunks : n_tiles;
    atomic_init(&t.next, 0);
    clb_pool_run(a->pool, fa_run, &t);
    if (!split) return;
    t.phase = 2;
    t.n_units = n_tiles;
    atomic_init(&t.next, 0);
    clb_pool_run(a->pool, fa_run, &t);
}

/* ---- projections ---- */

static void add_bias(float *y, const clb_weight *b, int n_tok, int64_t stride) {
    if (!b->data) return;
    const float *bv = b->data;
    for (int t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < b->cols; i++) y[(int64_t)t * stride + i] += bv[i];
}

static void clamp(float *x, int64_t n, float c) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] > c ? c : x[i] < -c ? -c : x[i];
}

/* q [n][n_head*hd] (unless the caller gave the queries: with_q false), k [n][n_kv*hd],
   v [n][n_kv*hdv] from the normed input; k rotated. */
static void project_gqa(clb_attn *a, const clb_layer *L, const float *xn, int n, const int32_t *pos, bool rope,
                        bool with_q) {
    const clb_hparams *hp = a->hp;
    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim, vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
    if (with_q) clb_matmul(a->mm, &L->wq, xn, E, n, a->q, qd);
    if (kd == vd) {
        clb_matmul2(a->mm, &L->wk, &L->wv, xn, E, n, a->kv_k, a->kv_v, kd);
    } else {
        clb_matmul(a->mm, &L->wk, xn, E, n, a->kv_k, kd);
        clb_matmul(a->mm, &L->wv, xn, E, n, a->kv_v, vd);
    }
    add_bias(a->q, &L->bq, n, qd);
    add_bias(a->kv_k, &L->bk, n, kd);
    add_bias(a->kv_v, &L->bv, n, vd);
    for (int t = 0; t < n; t++) {
        float *qt = a->q + t * qd, *kt = a->kv_k + t * kd;
        if (hp->qk_norm == CLB_QKNORM_FULL) {
            clb_rmsnorm(qt, qt, L->q_norm.data, qd, hp->norm_eps);
            clb_rmsnorm(kt, kt, L->k_norm.data, kd, hp->norm_eps);
        } else if (hp->qk_norm == CLB_QKNORM_HEAD) {
            for (int h = 0; h < hp->n_head; h++)
                clb_rmsnorm(qt + h * hp->head_dim, qt + h * hp->head_dim, L->q_norm.data, hp->head_dim, hp->norm_eps);
            for (int h = 0; h < hp->n_head_kv; h++)
                clb_rmsnorm(kt + h * hp->head_dim, kt + h * hp->head_dim, L->k_norm.data, hp->head_dim, hp->norm_eps);
        }
        if (hp->clip_qkv > 0) { /* OLMoE: after the q/k norms, before rope */
            clamp(qt, qd, hp->clip_qkv);
            clamp(kt, kd, hp->clip_qkv);
            clamp(a->kv_v + t * vd, vd, hp->clip_qkv);
        }
        if (rope) clb_rope_apply(a->rope, kt, hp->n_head_kv, hp->head_dim, 0, pos[t]);
    }
}

/* Multi-head latent attention (DeepSeek-V2/V3): q from a low-rank projection (or directly),
   the kv_lora_rank latent and the rope part of K (one vector shared by all heads); with
   decompress, K/V per head from the latent (the cache then holds those). */
static void project_mla(clb_attn *a, const clb_layer *L, int l, const float *xn, int n, const int32_t *pos,
                        bool decompress) {
    const clb_hparams *hp = a->hp;
    const int64_t E = hp->n_embd, H = hp->n_head, hd = hp->head_dim, hdv = hp->head_dim_v, rot = hp->n_rot;
    const int64_t nope = hd - rot, r = hp->kv_lora_rank, qd = H * hd, ckv_w = r + rot, kvb_w = H * (nope + hdv);
    const float eps = 1e-6f; /* q_a_layernorm / kv_a_layernorm: RMSNorm's default eps in the HF code */
    if (hp->q_lora_rank > 0) {
        const int64_t qr = hp->q_lora_rank;
        clb_matmul(a->mm, &L->wq_a, xn, E, n, a->mla_qa, qr);
        for (int t = 0; t < n; t++) clb_rmsnorm(a->mla_qa + t * qr, a->mla_qa + t * qr, L->q_a_norm.data, qr, eps);
        clb_matmul(a->mm, &L->wq_b, a->mla_qa, qr, n, a->q, qd);
    } else {
        clb_matmul(a->mm, &L->wq, xn, E, n, a->q, qd);
    }
    clb_matmul(a->mm, &L->wkv_a, xn, E, n, a->mla_ckv, ckv_w);
    for (int t = 0; t < n; t++) {
        float *c = a->mla_ckv + t * ckv_w;
        clb_rmsnorm(c, c, L->kv_a_norm.data, r, eps);              /* the latent */
        clb_rope_apply(a->rope, c + r, 1, (int)rot, 0, pos[t]); /* the shared rope key */
    }
    if (!decompress) return; /* the latent is cached as it is (forward_latent) */
    /* per head [k_nope | v] from the fused kv_b; from a split file all the k_nope, then v_b's
       values (straight into the new values) */
    const bool fused = L->wkv_b.data != NULL;
    const int64_t kstride = fused ? kvb_w : H * nope, kstep = fused ? nope + hdv : nope;
    clb_matmul(a->mm, fused ? &L->wkv_b : &a->wkb[l], a->mla_ckv, ckv_w, n, a->mla_kvb, fused ? kvb_w : H * nope);
    if (!fused) clb_matmul(a->mm, &L->wv_b, a->mla_ckv, ckv_w, n, a->kv_v, H * hdv);
    for (int t = 0; t < n; t++) {
        const float *kvb = a->mla_kvb + t * kstride, *kpe = a->mla_ckv + t * ckv_w + r;
        for (int64_t h = 0; h < H; h++) {
            float *k = a->kv_k + t * H * hd + h * hd, *v = a->kv_v + t * H * hdv + h * hdv;
            memcpy(k, kvb + h * kstep, sizeof(float) * (size_t)nope);
            memcpy(k + nope, kpe, sizeof(float) * (size_t)rot);
            if (fused) memcpy(v, kvb + h * kstep + nope, sizeof(float) * (size_t)hdv);
        }
    }
}

/* attention of the batch's queries qf [n][n_head][qstride] (qvalid values) into out
   [n][n_head][v_dim], by the flash or the plain path */
static void attend(clb_attn *a, const clb_layer *L, int l, int n, const int32_t *seq, const int32_t *pos,
                   const float *qf, int64_t qstride, int64_t qvalid, float *out) {
    if (a->flash) {
        flash_attention(a, L, l, n, seq, pos, qf, qstride, qvalid, out);
        return;
    }
    plain_task pt = {.a = a, .L = L, .layer = l, .n_tok = n, .seq = seq, .pos = pos, .qf = qf, .qstride = qstride,
                     .out = out};
    atomic_init(&pt.next, 0);
    clb_pool_run(a->pool, plain_run, &pt);
}

/* MLA with the latent cached (DeepSeek-V2 section 2.1): the score of head h is
   q_nope . (W_uk c) + q_pe . k_pe = (W_uk^T q_nope) . c + q_pe . k_pe, so the queries are
   absorbed into the latent space once per token and attend to the cached [c | k_pe] rows
   directly (one K/V head for all query heads); the weighted sum of latents then goes through
   W_uv per head. */
static void forward_latent(clb_attn *a, const clb_layer *L, int l, int n, const int32_t *seq, const int32_t *pos) {
    const clb_hparams *hp = a->hp;
    const clb_kv_layer *KL = &a->kv.layers[l];
    const int H = hp->n_head, hd = hp->head_dim, hdv = hp->head_dim_v, rot = hp->n_rot, nope = hd - rot;
    const int r = hp->kv_lora_rank, kp = KL->k_pad, vp = KL->v_pad;
    uint8_t *q = a->mm->qbuf;
    for (int h = 0; h < H; h++) {
        clb_mm_job *j = &a->jobs[h];
        *j = (clb_mm_job){.w = &a->wuk[(int64_t)l * H + h], .n_tok = n, .y = a->q_abs + (int64_t)h * kp,
                          .y_stride = (int64_t)H * kp};
        j->xq = clb_mm_convert(a->mm, q, j->w->dtype, nope, a->q + (int64_t)h * hd, (int64_t)H * hd, n, &j->xq_stride);
        if (j->xq == q) q += j->xq_stride * (uint64_t)n;
    }
    clb_matmul_jobs(a->mm, a->jobs, H, NULL);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < H; h++) {
            float *qa = a->q_abs + ((int64_t)t * H + h) * kp;
            memset(qa + r, 0, sizeof(float) * (size_t)(kp - r));
            memcpy(qa + vp, a->q + ((int64_t)t * H + h) * hd + nope, sizeof(float) * (size_t)rot);
        }
    attend(a, L, l, n, seq, pos, a->q_abs, kp, kp, a->o_lat);
    q = a->mm->qbuf;
    for (int h = 0; h < H; h++) {
        clb_mm_job *j = &a->jobs[h];
        *j = (clb_mm_job){.w = &a->wuv[(int64_t)l * H + h], .n_tok = n, .y = a->att + (int64_t)h * hdv,
                          .y_stride = (int64_t)H * hdv};
        j->xq = clb_mm_convert(a->mm, q, j->w->dtype, r, a->o_lat + (int64_t)h * r, (int64_t)H * r, n, &j->xq_stride);
        if (j->xq == q) q += j->xq_stride * (uint64_t)n;
    }
    clb_matmul_jobs(a->mm, a->jobs, H, NULL);
}

/* Llama-4's per-layer q/k adjustments, after rope (clb_attn_layer): the L2 norm of every
   head of q and k (no weight), and the temperature of q at position pos. */
static void l2_heads(float *x, int n_head, int hd, float eps) {
    for (int h = 0; h < n_head; h++) {
        float *v = x + (int64_t)h * hd;
        double ss = 0;
        for (int i = 0; i < hd; i++) ss += (double)v[i] * v[i];
        const float s = (float)(1.0 / sqrt(ss / hd + (double)eps));
        for (int i = 0; i < hd; i++) v[i] *= s;
    }
}

static float temp_scale(const clb_hparams *hp, int32_t pos) {
    return (float)log1p((double)floorf(((float)pos + 1.0f) / hp->attn_temp_floor)) * hp->attn_temp_scale + 1.0f;
}

/* Everything up to the output projection: a->att [n][n_head * head_dim_v]; with_q false:
   the queries are already in a->q (unrotated). */
static void attn_heads(clb_attn *a, const clb_layer *L, int l, const float *xn, int n, const int32_t *seq,
                       const int32_t *pos, bool with_q) {
    const clb_hparams *hp = a->hp;
    const clb_attn_layer al = clb_hparams_attn_layer(hp, l);
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim, vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const bool latent = a->kv.layers[l].v_in_k;
    if (hp->attn_kind == CLB_ATTN_MLA) project_mla(a, L, l, xn, n, pos, !latent);
    else project_gqa(a, L, xn, n, pos, !al.no_rope, with_q);
    const int64_t ckv_w = hp->kv_lora_rank + hp->n_rot;
    for (int t = 0; t < n; t++) {
        if (!al.no_rope) clb_rope_apply(a->rope, a->q + t * qd, hp->n_head, hp->head_dim, hp->rope_offset, pos[t]);
        if (al.qk_l2) {
            l2_heads(a->q + t * qd, hp->n_head, hp->head_dim, hp->norm_eps);
            l2_heads(a->kv_k + t * kd, hp->n_head_kv, hp->head_dim, hp->norm_eps);
        }
        if (al.temp_tune) {
            const float ts = temp_scale(hp, pos[t]);
            for (int64_t i = 0; i < qd; i++) a->q[t * qd + i] *= ts;
        }
        if (latent) clb_kv_write(&a->kv, seq[t], l, pos[t], a->mla_ckv + t * ckv_w, NULL);
        else clb_kv_write(&a->kv, seq[t], l, pos[t], a->kv_k + t * kd, a->kv_v + t * vd);
    }
    if (latent) forward_latent(a, L, l, n, seq, pos);
    else attend(a, L, l, n, seq, pos, a->q, hp->head_dim, hp->head_dim, a->att);
}

void clb_attn_forward_heads(clb_attn *a, const clb_layer *L, int l, const float *xn, int n, const int32_t *seq,
                            const int32_t *pos) {
    attn_heads(a, L, l, xn, n, seq, pos, false);
}

void clb_attn_forward(clb_attn *a, const clb_layer *L, int l, const float *xn, int n, const int32_t *seq,
                      const int32_t *pos, float *y) {
    const clb_hparams *hp = a->hp;
    attn_heads(a, L, l, xn, n, seq, pos, true);
    const int64_t E = hp->n_embd, od = (int64_t)hp->n_head * hp->head_dim_v;
    clb_matmul(a->mm, &L->wo, a->att, od, n, y, E);
    add_bias(y, &L->bo, n, E);
}
