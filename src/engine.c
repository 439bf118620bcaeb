/* engine.c — the forward pass, read top to bottom:
 *
 *   embed -> for each layer: norm (RMSNorm or LayerNorm), attention (src/nn/attention.c: q/k/v,
 *            q/k norm, rope, KV cache, softmax), residual; norm, FFN: dense SwiGLU, or router -> acquire experts ->
 *            expert SwiGLUs -> release -> weighted sum (+ shared expert); residual
 *         -> final norm -> LM head
 *
 * A batch of B tokens goes through each layer together: projections are matrix products
 * over the batch, and routed experts run once per batch on the tokens that chose them.
 * Every buffer comes from the arena made at init; nothing here allocates. */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "engine.h"

/* ---- attention (src/nn/attention.c) ---- */

/* the layers' RMSNorm eps (the final norm's is hp->norm_eps) */
static float layer_eps(const clb_hparams *hp) { return hp->norm_eps_layer > 0 ? hp->norm_eps_layer : hp->norm_eps; }

static int moa_attention(colibri_engine_t *e, const clb_layer *L, int l, int n);

static int attention(colibri_engine_t *e, const clb_layer *L, int l, int n) {
    const clb_hparams *hp = e->hp;
    const int64_t E = hp->n_embd;
    for (int t = 0; t < n; t++)
        clb_norm(hp->norm_kind, e->xn + t * E, e->x + t * E, L->attn_norm.data, L->attn_norm_b.data, E, layer_eps(hp));
    if (hp->n_attn_exp > 0) {
        int rc = moa_attention(e, L, l, n);
        if (rc) return rc;
    } else {
        clb_attn_forward(&e->attn, L, l, e->xn, n, e->b_seq, e->b_pos, e->ffn_out);
    }
    const float rm = hp->resid_mult > 0 ? hp->resid_mult : 1.0f;
    clb_add_scaled(e->x, e->ffn_out, rm, n * E);
    return COLIBRI_OK;
}

/* ---- feed-forward ---- */

/* y[t] = down(act(gate x[t]) * up x[t]) for n rows of x (act: SiLU, or ReLU); widths from
   the weights. */
static void swiglu(colibri_engine_t *e, const clb_weight *g, const clb_weight *u, const clb_weight *d,
                   const float *x, int n, float *y) {
    const int64_t E = e->hp->n_embd;
    clb_ffn_glu(&e->mm, e->hp->ffn_act, e->hp->act_alpha, e->hp->act_limit, g, u, d, x, E, n, e->ff_g, e->ff_u, y, E);
}

/* y[t][i] += b[i] for n rows of w floats (b NULL: nothing) */
static void add_rows(float *y, int64_t w, int n, const float *b) {
    if (!b) return;
    for (int t = 0; t < n; t++)
        for (int64_t i = 0; i < w; i++) y[t * w + i] += b[i];
}

/* ---- mixture of attention heads (hp->n_attn_exp: JetMoE) ----
 * Every token picks n_attn_exp_used attention experts (top-k of the router logits, softmax
 * over those k). The expert in slot s projects the token's queries for the heads j * k + s
 * (K/V head j): the heads of one K/V head are adjacent, as grouped-query attention takes
 * them (HF orders them s * n_kv + j and repeats K/V per slot: the same (query, K/V) pairs).
 * After attention, slot s's heads go through that expert's output projection, weighted and
 * summed per token in expert order. The experts come from the expert store (sub-layer
 * CLB_SUB_ATTN), each held only for its product, so a bounded pool of two slots suffices. */

/* The (token, slot) pairs of the batch of n that chose attention expert x, in token order,
   into tok / slot; returns how many (at most n: a token picks an expert once). */
static int moa_pairs(const colibri_engine_t *e, int x, int n, int *tok, int *slot) {
    const int ka = e->hp->n_attn_exp_used;
    int c = 0;
    for (int t = 0; t < n; t++)
        for (int s = 0; s < ka; s++)
            if (e->moa_sel[t * ka + s] == x) tok[c] = t, slot[c++] = s;
    return c;
}

/* one expert's product on its c gathered rows (store key, the expert's gate = query or
   down = output projection): moa_in [c][cols] -> moa_y [c][rows] */
static int moa_product(colibri_engine_t *e, int key, int x, bool out, int64_t cols, int c) {
    const clb_expert_w *w;
    int rc = clb_store_acquire(e->model->store, key, x, &w);
    if (rc) return rc;
    const clb_weight *W = out ? &w->down : &w->gate;
    clb_matmul(&e->mm, W, e->moa_in, cols, c, e->moa_y, W->rows);
    clb_store_release(e->model->store, key, x);
    return COLIBRI_OK;
}

static int moa_attention(colibri_engine_t *e, const clb_layer *L, int l, int n) {
    const clb_hparams *hp = e->hp;
    const int64_t E = hp->n_embd, hd = hp->head_dim, H = hp->n_head, kvp = (int64_t)hp->n_head_kv * hd;
    const int na = hp->n_attn_exp, ka = hp->n_attn_exp_used, nkv = hp->n_head_kv;
    const int key = clb_store_key(hp->n_layer, l, CLB_SUB_ATTN);
    clb_attn *a = &e->attn;
    int *tok = e->e_tok, *slot = e->e_asg; /* the FFN's assignment scratch, free until ffn() */
    clb_matmul(&e->mm, &L->attn_router, e->xn, E, n, e->moa_logits, na);
    for (int t = 0; t < n; t++)
        clb_route(&e->moa_router, e->moa_logits + (int64_t)t * na, e->r_scratch, e->moa_sel + t * ka, e->moa_w + t * ka);
    if (e->lookahead) /* the batch union, read while the first products run */
        for (int x = 0; x < na; x++)
            if (moa_pairs(e, x, n, tok, slot)) clb_store_request(e->model->store, key, x, CLB_PRIO_DEMAND);
    /* queries: each expert on the tokens that chose it, into their slot's heads */
    for (int x = 0; x < na; x++) {
        const int c = moa_pairs(e, x, n, tok, slot);
        if (!c) continue;
        for (int i = 0; i < c; i++) memcpy(e->moa_in + i * E, e->xn + tok[i] * E, sizeof(float) * (size_t)E);
        int rc = moa_product(e, key, x, false, E, c);
        if (rc) return rc;
        for (int i = 0; i < c; i++)
            for (int j = 0; j < nkv; j++)
                memcpy(a->q + ((int64_t)tok[i] * H + (int64_t)j * ka + slot[i]) * hd, e->moa_y + i * kvp + j * hd,
                       sizeof(float) * (size_t)hd);
    }
    clb_attn_forward_heads(a, L, l, e->xn, n, e->b_seq, e->b_pos);
    /* outputs: each expert's projection of its slots' heads, weighted, summed per token */
    memset(e->ffn_out, 0, sizeof(float) * (size_t)(n * E));
    for (int x = 0; x < na; x++) {
        const int c = moa_pairs(e, x, n, tok, slot);
        if (!c) continue;
        for (int i = 0; i < c; i++)
            for (int j = 0; j < nkv; j++)
                memcpy(e->moa_in + i * kvp + j * hd, a->att + ((int64_t)tok[i] * H + (int64_t)j * ka + slot[i]) * hd,
                       sizeof(float) * (size_t)hd);
        int rc = moa_product(e, key, x, true, kvp, c);
        if (rc) return rc;
        for (int i = 0; i < c; i++)
            clb_add_scaled(e->ffn_out + tok[i] * E, e->moa_y + i * E, e->moa_w[tok[i] * ka + slot[i]], E);
    }
    if (e->lookahead) clb_store_layer_done(e->model->store, key);
    add_rows(e->ffn_out, E, n, L->bo.data);
    return COLIBRI_OK;
}

/* ---- expert memory hierarchy (docs/MEMORY.md): batch union + router lookahead ---- */

/* The batch union of layer l: every selected expert is asked for at once (its stand-in in
   its place where pick_standins chose one). */
static void demand_batch(colibri_engine_t *e, int l) {
    clb_expert_store *st = e->model->store;
    for (int x = 0; x < e->hp->n_expert; x++)
        if (e->e_count[x] && clb_xp_mine(e, l, x)) clb_store_request(st, e->e_key[x], x, CLB_PRIO_DEMAND);
}

/* After layer l routed its batch: scores the lookahead's prediction for l (recall), asks
   the store for every expert of the batch at once (the union: each loads once, reads in
   parallel), then applies layer l + 1's router to layer l's FFN input and asks for the
   predicted experts, which the I/O threads load while layer l computes. Hints only: the
   store may ignore them, and they never change what is computed. */
static void moe_prefetch(colibri_engine_t *e, int l, int n) {
    const clb_hparams *hp = e->hp;
    const int ne = hp->n_expert, kc = e->k_cap, nl = l + 1;
    clb_expert_store *st = e->model->store;
    if (e->la_layer == l) {
        uint64_t hit = 0, all = 0;
        for (int t = 0; t < n; t++) {
            all += (uint64_t)e->tok_k[t];
            for (int s = 0; s < e->tok_k[t]; s++)
                for (int j = 0; j < e->la_k[t]; j++)
                    if (e->sel[t * kc + s] == e->la_sel[t * ne + j]) {
                        hit++;
                        break;
                    }
        }
        clb_store_note_recall(st, l, hit, all);
    }
    e->la_layer = -1;
    demand_batch(e, l);
    if (nl >= hp->n_layer || !e->model->layers[nl].is_moe) return;
    const clb_layer *N = &e->model->layers[nl];
    clb_matmul(&e->mm, &N->router, e->xn, hp->n_embd, n, e->la_logits, ne);
    add_rows(e->la_logits, ne, n, N->router_b.data);
    clb_router_cfg rc = e->router;
    rc.bias = N->router_bias.data;
    for (int t = 0; t < n; t++) {
        e->la_k[t] = clb_route(&rc, e->la_logits + (int64_t)t * ne, e->r_scratch, e->la_sel + t * ne, e->la_w + t * ne);
        for (int s = 0; s < e->la_k[t]; s++)
            if (clb_xp_mine(e, nl, e->la_sel[t * ne + s]))
                clb_store_request(st, nl, e->la_sel[t * ne + s], CLB_PRIO_LOOKAHEAD);
    }
    e->la_layer = nl;
}

/* One expert dispatch, timed: adds to the scheduling time the span from *t_mark (router
   output, or the end of the previous dispatch) to the moment the last thread began its
   share, then moves *t_mark to the end of this dispatch. */
static void sched_dispatch(colibri_engine_t *e, double *t_mark, const clb_mm_job *jobs, int nj) {
    const int nt = clb_pool_size(e->pool);
    for (int i = 0; i < nt; i++) e->t_enter[i] = -1;
    clb_matmul_jobs(&e->mm, jobs, nj, e->t_enter);
    double last = -1;
    for (int i = 0; i < nt; i++) last = CLB_MAX(last, e->t_enter[i]);
    if (last > *t_mark) e->stats.time_moe_sched_s += last - *t_mark;
    *t_mark = clb_now();
}

/* The input rows of assignments [a0, a0 + cnt) of an expert whose weight has dtype `dtype`,
   in that weight's activation format. Each of the n tokens is converted once per format
   and group (e->tq), at *q; an expert with one token reads that row in place, one with
   several gets its rows gathered after it. Conversion is per row, so the bytes are the same
   whichever way a row is reached. */
static const uint8_t *expert_input(colibri_engine_t *e, int dtype, int n, int a0, int cnt, uint8_t **q,
                                   uint64_t *stride) {
    const int64_t E = e->hp->n_embd;
    if (clb_type(dtype)->vec_dot_type == CLB_DT_F32) {
        *stride = (uint64_t)E * sizeof(float);
        if (cnt == 1) return (const uint8_t *)(e->xn + (int64_t)e->e_tok[a0] * E);
        for (int i = 0; i < cnt; i++)
            memcpy(e->xe + (a0 + i) * E, e->xn + (int64_t)e->e_tok[a0 + i] * E, sizeof(float) * (size_t)E);
        return (const uint8_t *)(e->xe + a0 * E);
    }
    const int fmt = clb_mm_act_format(&e->mm, dtype);
    int f = 0;
    while (f < e->n_tq && e->tq[f].fmt != fmt) f++;
    if (f == e->n_tq) { /* at most one entry per activation format */
        e->tq[f].fmt = fmt;
        e->tq[f].rows = clb_mm_convert(&e->mm, *q, dtype, E, e->xn, E, n, &e->tq[f].stride);
        *q += e->tq[f].stride * (uint64_t)n;
        e->n_tq++;
    }
    const uint64_t rb = e->tq[f].stride;
    *stride = rb;
    if (cnt == 1) return e->tq[f].rows + rb * (uint64_t)e->e_tok[a0];
    uint8_t *dst = *q;
    for (int i = 0; i < cnt; i++) memcpy(dst + rb * (uint64_t)i, e->tq[f].rows + rb * (uint64_t)e->e_tok[a0 + i], rb);
    *q += rb * (uint64_t)cnt;
    return dst;
}

/* The shared expert(s) of layer L on the n rows of xn: outputs into xe, gate logits (when
   the layer has a gate) into r_logits, whose router logits are consumed by then. */
static void shared_expert(colibri_engine_t *e, const clb_layer *L, int n) {
    swiglu(e, &L->sh_gate, &L->sh_up, &L->sh_down, e->xn, n, e->xe);
    if (L->sh_gate_inp.data) clb_matmul(&e->mm, &L->sh_gate_inp, e->xn, e->hp->n_embd, n, e->r_logits, 1);
}

/* Expert parallelism: every rank knows the whole routing, so every rank lays out the same
   exchange — the rows of rank 0's experts first, then rank 1's, ..., each rank's in
   ascending assignment order (experts ascending, then their tokens). xp_pos[a] is the row of
   assignment a in xp_recv; this rank copies its own rows (computed into xe) to xp_send and
   starts the transport's exchange. Rows are copied, never summed: every rank then holds the
   bytes one process would have computed. */
static int xp_exchange_begin(colibri_engine_t *e, int l) {
    const int ne = e->hp->n_expert, nr = e->xp.n_ranks, me = e->xp.rank;
    const int64_t E = e->hp->n_embd;
    const int32_t *own = e->xp_owner + (int64_t)l * ne;
    memset(e->xp_rows, 0, sizeof(int) * (size_t)nr);
    for (int x = 0; x < ne; x++) e->xp_rows[own[x]] += e->e_count[x];
    int off = 0;
    for (int r = 0; r < nr; r++) {
        e->xp_counts[r] = (int64_t)e->xp_rows[r] * E;
        const int c = e->xp_rows[r];
        e->xp_rows[r] = off; /* next row of rank r */
        off += c;
    }
    const int my0 = e->xp_rows[me];
    for (int x = 0; x < ne; x++)
        for (int a = e->e_start[x]; a < e->e_start[x] + e->e_count[x]; a++) {
            const int p = e->xp_rows[own[x]]++;
            e->xp_pos[a] = p;
            if (own[x] == me)
                memcpy(e->xp_send + (int64_t)(p - my0) * E, e->xe + (int64_t)a * E, sizeof(float) * (size_t)E);
        }
    if (e->xp.begin(e->xp.ctx, e->xp_send, e->xp_counts[me], e->xp_recv, e->xp_counts))
        return clb_err(COLIBRI_ERR_IO, "expert exchange of layer %d failed (rank %d of %d)", l, me, nr);
    return COLIBRI_OK;
}

/* Residency-aware dynamic k (colibri_params.moe_miss_drop): token t's selections after its
   first whose weight (as a share of the token's selected weights) is below the threshold
   and whose expert is absent from the pool (not even being read) are dropped; the kept weights are scaled to the sum of all, as the
   routing's own normalisation would give them. Unbounded, nothing is ever absent. */
static void miss_drop(colibri_engine_t *e, int l, int t) {
    const int kc = e->k_cap, k = e->tok_k[t];
    int *sel = e->sel + t * kc;
    float *w = e->sel_w + t * kc;
    double all = 0, kept = 0;
    for (int s = 0; s < k; s++) all += w[s];
    int nk = 0;
    for (int s = 0; s < k; s++) {
        /* the threshold is on the share of the token's weight, whatever routed_scale is */
        if (s > 0 && w[s] < e->miss_drop * all && clb_xp_mine(e, l, sel[s]) &&
            clb_store_is_absent(e->model->store, l, sel[s])) {
            e->n_dropped++;
            continue;
        }
        kept += w[s];
        sel[nk] = sel[s];
        w[nk++] = w[s];
    }
    if (nk == k) return;
    e->tok_k[t] = nk;
    if (kept > 0)
        for (int s = 0; s < nk; s++) w[s] = (float)(w[s] * (all / kept));
}

/* Low-bit stand-ins (colibri_params.moe_standin): an expert none of whose selections in
   the batch is its token's top one or at least the threshold's share of its token's
   selected weight, and that is neither in the pool nor being read (one the lookahead is
   already reading is waited for), is computed with its stand-in (e_key). Decided per expert, not per selection: each expert's weights
   stream once per batch either way. Unbounded, every expert is resident. */
static void pick_standins(colibri_engine_t *e, int l, int n) {
    const int ne = e->hp->n_expert, kc = e->k_cap;
    clb_expert_store *st = e->model->store;
    const int key = clb_store_key(e->hp->n_layer, l, CLB_SUB_STANDIN);
    memset(e->e_low, 1, (size_t)ne);
    for (int t = 0; t < n; t++) {
        const int *sel = e->sel + t * kc;
        const float *w = e->sel_w + t * kc;
        double all = 0;
        int top = 0;
        for (int s = 0; s < e->tok_k[t]; s++) {
            all += w[s];
            if (w[s] > w[top]) top = s;
        }
        for (int s = 0; s < e->tok_k[t]; s++)
            if (s == top || w[s] >= e->standin * all) e->e_low[sel[s]] = 0;
    }
    for (int x = 0; x < ne; x++)
        if (e->e_count[x] && e->e_low[x] && clb_xp_mine(e, l, x) && clb_store_expert_bytes(st, key, x) &&
            clb_store_is_absent(st, l, x)) {
            e->e_key[x] = key;
            e->n_standin += (uint64_t)e->e_count[x];
        }
}

/* Expert x's row of a stacked [n_expert][rows] f32 bias, or NULL when the layer has none. */
static const float *expert_bias(const clb_weight *b, int x) {
    return b->data ? (const float *)b->data + (int64_t)x * b->cols : NULL;
}

/* Routed experts for a batch: route every token, group the (token, slot) assignments by
   expert, then run the gate and up projections of every selected expert in one parallel
   dispatch, SwiGLU, and every down projection in a second one. Each expert's weights
   stream once per batch (batch union); experts of any dtype mix share the dispatches. */
/* Routes every token of the batch from the n rows of in (the FFN input, or for a router
   placed before attention the layer's input): sel / sel_w / tok_k and each expert's count. */
static void route_batch(colibri_engine_t *e, const clb_layer *L, int l, int n, const float *in) {
    const clb_hparams *hp = e->hp;
    const int ne = hp->n_expert, kc = e->k_cap;
    clb_matmul(&e->mm, &L->router, in, hp->n_embd, n, e->r_logits, ne);
    add_rows(e->r_logits, ne, n, L->router_b.data);
    clb_router_cfg rc = e->router;
    rc.bias = L->router_bias.data;
    memset(e->e_count, 0, sizeof(int) * (size_t)ne);
    for (int t = 0; t < n; t++) {
        e->tok_k[t] = clb_route(&rc, e->r_logits + (int64_t)t * ne, e->r_scratch, e->sel + t * kc, e->sel_w + t * kc);
        if (e->miss_drop > 0) miss_drop(e, l, t);
        for (int s = 0; s < e->tok_k[t]; s++) e->e_count[e->sel[t * kc + s]]++;
    }
    for (int x = 0; x < ne; x++) e->e_key[x] = l;
    if (e->standin > 0 && e->model->standins) pick_standins(e, l, n);
    memcpy(e->last_route + (int64_t)l * ne, e->e_count, sizeof(int) * (size_t)ne); /* colibri_expert_state */
}

/* A router before attention (SmallThinker): the layer's routing is known before its
   attention runs, so every selected expert is asked for now and the store's I/O threads
   read them while attention computes (with lookahead on; a hint, as in moe_prefetch). */
static void route_early(colibri_engine_t *e, const clb_layer *L, int l, int n) {
    route_batch(e, L, l, n, e->x);
    if (e->lookahead) demand_batch(e, l);
}

static int moe(colibri_engine_t *e, const clb_layer *L, int l, int n) {
    const clb_hparams *hp = e->hp;
    const int64_t E = hp->n_embd, ff = hp->n_ff_exp;
    const int ne = hp->n_expert, kc = e->k_cap;
    /* 1. route every token (done before attention when the router reads the layer's input) */
    if (!hp->router_pre_attn) route_batch(e, L, l, n, e->xn);
    double t_mark = clb_now(); /* router output: scheduling time starts */
    e->stats.moe_layer_runs++;
    /* 2. assignments grouped by expert */
    e->e_start[0] = 0;
    for (int x = 0; x < ne; x++) e->e_start[x + 1] = e->e_start[x] + e->e_count[x];
    memset(e->e_count, 0, sizeof(int) * (size_t)ne);
    for (int t = 0; t < n; t++)
        for (int s = 0; s < e->tok_k[t]; s++) {
            int x = e->sel[t * kc + s], a = e->e_start[x] + e->e_count[x]++;
            e->e_tok[a] = t;
            e->e_asg[t * kc + s] = a;
            e->e_scale[a] = e->sel_w[t * kc + s];
        }
    /* expert memory hierarchy: hints to the store (batch union, lookahead); then, with a
       pool, pass 0 takes the experts already in memory and pass 1 the rest (compute
       overlaps the remaining reads), each in groups [g0, g1) the store can hold pinned at
       once. e_take[x]: 1 = this pass, 2 = done. Every output element is computed the same
       way whatever the pass or grouping. */
    if (e->lookahead) moe_prefetch(e, l, n);
    const int cap = clb_store_max_pinned(e->model->store);
    int st = COLIBRI_OK;
    memset(e->e_take, 0, (size_t)ne);
    for (int pass = e->lookahead ? 0 : 1; pass < 2 && !st; pass++) {
    for (int x = 0; x < ne; x++)
        if (e->e_count[x] && e->e_take[x] != 2 && clb_xp_mine(e, l, x))
            e->e_take[x] = (uint8_t)(pass == 1 || clb_store_is_resident(e->model->store, e->e_key[x], x));
    for (int g0 = 0, g1 = 0; g0 < ne && !st; g0 = g1) {
    for (int used = 0; g1 < ne && (e->e_take[g1] != 1 || used < cap); g1++) used += e->e_take[g1] == 1;
    /* 3. acquire the selected experts, gather and convert their inputs */
    int nj = 0;
    uint8_t *q = e->mm.qbuf;
    e->n_tq = 0;
    for (int x = g0; x < g1 && !st; x++) {
        const int cnt = e->e_count[x], a0 = e->e_start[x];
        if (e->e_take[x] != 1) continue;
        if (l < COLIBRI_STATS_MAX_LAYERS) e->stats.expert_counts[l][x] += (uint32_t)cnt;
        if ((st = clb_store_acquire(e->model->store, e->e_key[x], x, &e->e_w[x]))) break;
        e->stats.moe_experts_run++;
        e->stats.moe_expert_bytes_run += clb_store_expert_bytes(e->model->store, e->e_key[x], x);
        const clb_expert_w *w = e->e_w[x];
        uint64_t stride, stride_u;
        const uint8_t *xq = expert_input(e, w->gate.dtype, n, a0, cnt, &q, &stride), *xu = xq;
        stride_u = stride;
        if (clb_mm_act_format(&e->mm, w->up.dtype) != clb_mm_act_format(&e->mm, w->gate.dtype))
            xu = expert_input(e, w->up.dtype, n, a0, cnt, &q, &stride_u);
        e->e_idx[nj] = x;
        e->jobs[nj++] = (clb_mm_job){.w = &w->gate, .xq = xq, .xq_stride = stride, .n_tok = cnt,
                                     .y = e->ff_g + a0 * ff, .y_stride = ff, .up = &w->up, .xq_up = xu,
                                     .xq_up_stride = stride_u, .y_up = e->ff_u + a0 * ff,
                                     .bias = expert_bias(&L->exp_gate_b, x), .bias_up = expert_bias(&L->exp_up_b, x),
                                     .act = hp->ffn_act, .act_alpha = hp->act_alpha, .act_limit = hp->act_limit,
                                     .in_scale = hp->moe_weight_on_input ? e->e_scale + a0 : NULL};
    }
    if (!st) {
        /* the hidden rows' conversion for the down projections happens in the first dispatch,
           after the inputs in qbuf (f32 down weights read ff_g itself) */
        for (int i = 0; i < nj; i++) {
            const int x = e->e_idx[i];
            q = clb_mm_chain_down(&e->jobs[i], &e->e_w[x]->down, e->xe + (int64_t)e->e_start[x] * E, E, q, &e->jobs_d[i]);
            e->jobs_d[i].bias = expert_bias(&L->exp_down_b, x);
        }
        /* gate and up projections with SwiGLU fused, all experts in one dispatch; then every
           down projection, into xe (the inputs are consumed) */
        sched_dispatch(e, &t_mark, e->jobs, nj);
        sched_dispatch(e, &t_mark, e->jobs_d, nj);
    }
    for (int x = g0; x < g1; x++)
        if (e->e_take[x] == 1) {
            if (e->e_w[x]) clb_store_release(e->model->store, e->e_key[x], x);
            e->e_w[x] = NULL;
            e->e_take[x] = 2;
        }
    } /* expert groups */
    } /* passes */
    if (e->lookahead) clb_store_layer_done(e->model->store, l);
    if (e->lookahead && e->model->standins)
        clb_store_layer_done(e->model->store, clb_store_key(hp->n_layer, l, CLB_SUB_STANDIN));
    if (st) return st;
    /* 4. several ranks: this rank's rows go to every rank and every rank's rows come back
       (xp_exchange_begin); the shared expert runs while they travel */
    if (e->xp_on && (st = xp_exchange_begin(e, l))) return st;
    if (e->xp_on && L->sh_gate.data) shared_expert(e, L, n);
    if (e->xp_on && e->xp.end(e->xp.ctx))
        return clb_err(COLIBRI_ERR_IO, "expert exchange of layer %d failed (rank %d of %d)", l, e->xp.rank, e->xp.n_ranks);
    /* 5. weighted sum in selection order (fixed per token, whatever the batch or the ranks) */
    for (int t = 0; t < n; t++) {
        float *o = e->ffn_out + t * E;
        memset(o, 0, sizeof(float) * (size_t)E);
        for (int s = 0; s < e->tok_k[t]; s++) {
            const int a = e->e_asg[t * kc + s];
            const float wgt = hp->moe_weight_on_input ? 1.0f : e->sel_w[t * kc + s]; /* else on the input */
            const float *y = e->xp_on ? e->xp_recv + (int64_t)e->xp_pos[a] * E : e->xe + (int64_t)a * E;
            clb_add_scaled(o, y, wgt, E);
        }
    }
    /* 6. shared expert(s): added after the routed sum */
    if (L->sh_gate.data) {
        if (!e->xp_on) shared_expert(e, L, n); /* one process: xe held the routed rows until now */
        const float *g = e->r_logits;
        for (int t = 0; t < n; t++) {
            const float gate = L->sh_gate_inp.data ? clb_sigmoid(g[t]) : 1.0f;
            clb_add_scaled(e->ffn_out + t * E, e->xe + t * E, gate, E);
        }
    }
    return COLIBRI_OK;
}

static int ffn(colibri_engine_t *e, const clb_layer *L, int l, int n) {
    const clb_hparams *hp = e->hp;
    const int64_t E = hp->n_embd;
    for (int t = 0; t < n; t++)
        clb_norm(hp->norm_kind, e->xn + t * E, e->x + t * E, L->ffn_norm.data, L->ffn_norm_b.data, E, layer_eps(hp));
    if (L->is_moe) {
        int rc = moe(e, L, l, n);
        if (rc) return rc;
        add_rows(e->ffn_out, E, n, L->ffn_out_b.data);
    } else {
        swiglu(e, &L->ffn_gate, &L->ffn_up, &L->ffn_down, e->xn, n, e->ffn_out);
    }
    const float rm = hp->resid_mult > 0 ? hp->resid_mult : 1.0f;
    clb_add_scaled(e->x, e->ffn_out, rm, n * E);
    return COLIBRI_OK;
}

/* ---- the token loop ---- */

/* A NaN or an infinity in the hidden state (or the logits) is an error, named by where it
   first appeared: n rows of w floats, one pass over what the layer just wrote (a small
   fraction of the layer's own work). layer -1: the embeddings; -2: the output head. */
static int finite_check(const float *x, int n, int64_t w, const char *where, int layer, const int32_t *pos) {
    for (int t = 0; t < n; t++) {
        if (clb_all_finite(x + (int64_t)t * w, w)) continue;
        if (layer >= 0)
            return clb_err(COLIBRI_ERR_NUMERIC, "a NaN or infinity appeared in layer %d (%s) at position %d", layer,
                           where, pos[t]);
        return clb_err(COLIBRI_ERR_NUMERIC, "a NaN or infinity appeared in %s at position %d", where, pos[t]);
    }
    return COLIBRI_OK;
}

int clb_engine_batch(colibri_engine_t *e, const int32_t *tokens, const int32_t *seqs, int n, float *logits,
                     const int32_t *rows, int n_rows) {
    const clb_hparams *hp = e->hp;
    const clb_model *m = e->model;
    const int64_t E = hp->n_embd;
    if (n <= 0 || n > e->n_batch || n_rows < 0 || n_rows > n)
        return clb_err(COLIBRI_ERR_INTERNAL, "batch of %d tokens (%d rows of logits)", n, n_rows);
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= hp->n_vocab)
            return clb_err(COLIBRI_ERR_ARG, "token id %d out of range (vocabulary has %d tokens)", tokens[t],
                           hp->n_vocab);
    /* each token's sequence and position; nothing advances until the batch is done, except
       a context shift of a sequence that would pass max_seq_len (ctx_shift) */
    memset(e->seq_cnt, 0, sizeof(int32_t) * (size_t)e->n_seq);
    for (int t = 0; t < n; t++) {
        const int32_t s = seqs ? seqs[t] : 0;
        if (s < 0 || s >= e->n_seq)
            return clb_err(COLIBRI_ERR_ARG, "sequence %d out of range (the engine holds %d)", s, e->n_seq);
        e->seq_cnt[s]++;
    }
    for (int s = 0; s < e->n_seq; s++) {
        if (e->seq_past[s] + e->seq_cnt[s] <= e->max_seq) continue;
        if (!e->ctx_shift)
            return clb_err(COLIBRI_ERR_RANGE, "sequence %d would reach %d tokens, beyond max_seq_len %d", s,
                           e->seq_past[s] + e->seq_cnt[s], e->max_seq);
        int rc = clb_engine_make_room(e, s, e->seq_cnt[s]);
        if (rc) return rc;
    }
    memset(e->seq_cnt, 0, sizeof(int32_t) * (size_t)e->n_seq);
    for (int t = 0; t < n; t++) {
        const int32_t s = seqs ? seqs[t] : 0;
        const int pos = e->seq_past[s] + e->seq_cnt[s]++;
        e->b_seq[t] = s;
        e->b_pos[t] = pos;
        e->seq_tokens[(int64_t)s * e->max_seq + pos] = tokens[t];
    }
    for (int t = 0; t < n; t++) {
        const uint8_t *row = (const uint8_t *)m->tok_embd.data + (uint64_t)tokens[t] * m->tok_embd.row_bytes;
        e->k->dequantize[m->tok_embd.dtype](row, e->x + t * E, E);
        if (hp->embd_mult > 0)
            for (int64_t i = 0; i < E; i++) e->x[t * E + i] *= hp->embd_mult;
    }
    int rc = finite_check(e->x, n, E, "the token embeddings", -1, e->b_pos);
    if (rc) return rc;
    for (int l = 0; l < hp->n_layer; l++) {
        const clb_layer *L = &m->layers[l];
        double t0 = clb_now();
        if (L->is_moe && hp->router_pre_attn) route_early(e, L, l, n);
        if ((rc = attention(e, L, l, n))) return rc;
        double t1 = clb_now();
        if ((rc = finite_check(e->x, n, E, "attention", l, e->b_pos))) return rc;
        if ((rc = ffn(e, L, l, n))) return rc;
        if ((rc = finite_check(e->x, n, E, L->is_moe ? "MoE FFN" : "FFN", l, e->b_pos))) return rc;
        e->stats.time_attention_s += t1 - t0;
        e->stats.time_moe_s += clb_now() - t1;
    }
    double th = clb_now();
    if (logits && n_rows > 0) {
        /* the wanted rows, normed, gathered at the front of xn (row i from x[rows[i]]) */
        for (int i = 0; i < n_rows; i++) {
            const int t = rows ? rows[i] : n - n_rows + i;
            clb_norm(hp->norm_kind, e->xn + i * E, e->x + (int64_t)t * E, m->output_norm.data, m->output_norm_b.data, E,
                     hp->norm_eps);
        }
        clb_matmul(&e->mm, &m->output, e->xn, E, n_rows, logits, hp->n_vocab);
        add_rows(logits, hp->n_vocab, n_rows, m->output_b.data);
        if (hp->logit_div > 0)
            for (int64_t i = 0; i < (int64_t)n_rows * hp->n_vocab; i++) logits[i] /= hp->logit_div;
        for (int i = 0; i < n_rows; i++) {
            const int t = rows ? rows[i] : n - n_rows + i;
            if ((rc = finite_check(logits + (int64_t)i * hp->n_vocab, 1, hp->n_vocab, "the output head", -2,
                                   e->b_pos + t)))
                return rc;
        }
    }
    e->stats.time_head_s += clb_now() - th;
    for (int s = 0; s < e->n_seq; s++) e->seq_past[s] += e->seq_cnt[s];
    return COLIBRI_OK;
}
