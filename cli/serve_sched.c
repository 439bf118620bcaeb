/* serve_sched.c — the scheduler of `colibri serve`: one thread runs the model for every slot.
 * Each step takes one token of each decoding slot and the next chunk of each pending prompt
 * and evaluates them as one colibri_decode batch, so a MoE layer reads each selected expert
 * once for all slots. Requests beyond the slots wait in a bounded queue. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

srv_req *srv_req_new(void) {
    srv_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->sampling = colibri_sampling_default();
    r->cache_prompt = true;
    return r;
}

static void req_free(srv_req *r) {
    free(r->prompt);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->text);
    free(r->lps);
    pthread_cond_destroy(&r->cv);
    free(r);
}

void srv_release(srv_sched *s, srv_req *r) {
    if (!r) return;
    pthread_mutex_lock(&s->mu);
    const int left = --r->refs;
    pthread_mutex_unlock(&s->mu);
    if (left == 0) req_free(r);
}

/* Under mu: the request is over; wakes its HTTP thread and drops the scheduler's reference. */
static void req_finish(srv_sched *s, srv_req *r, srv_finish f, const char *err) {
    r->done = true;
    r->finish = f;
    r->shown = r->len;
    r->t_done = cli_now();
    if (err) snprintf(r->err, sizeof r->err, "%s", err);
    if (f == SRV_FINISH_CANCEL) s->requests_cancelled++;
    else s->requests_done++;
    pthread_cond_broadcast(&r->cv);
    if (--r->refs == 0) req_free(r);
}

static void slot_free(srv_sched *s, int i, srv_finish f, const char *err) {
    srv_slot *sl = &s->slots[i];
    if (!sl->req) return;
    srv_req *r = sl->req;
    if (f != SRV_FINISH_STOP && f != SRV_FINISH_CANCEL && sl->dt) { /* the detokenizer's held bytes */
        char piece[512];
        size_t pn = 0;
        if (!colibri_detok_flush(sl->dt, piece, sizeof piece, &pn) && pn && r->len + pn + 1 <= r->cap) {
            memcpy(r->text + r->len, piece, pn);
            r->len += pn;
        }
    }
    req_finish(s, r, f, err);
    colibri_sampler_free(sl->smp);
    colibri_detok_free(sl->dt);
    int32_t *hist = sl->hist;
    size_t n_hist = sl->n_hist;
    memset(sl, 0, sizeof *sl);
    sl->hist = hist; /* the KV cache stays for the next request's common prefix */
    sl->n_hist = n_hist;
    sl->t_used = cli_now();
    if (!s->reuse || colibri_seq_n_past(s->e, i) != (int32_t)n_hist) { /* never a stale history */
        srv_truncate(s->e, i, 0);
        sl->n_hist = 0;
    }
}

/* Tokens at the start of the prompt that slot i's KV cache already holds. */
static size_t common_prefix(const srv_slot *sl, const srv_req *r) {
    size_t n = 0;
    while (n < sl->n_hist && n < r->n_prompt && sl->hist[n] == r->prompt[n]) n++;
    return n;
}

/* Under mu: the free slot for r — the one holding the longest start of its prompt when that
   is at least half the prompt (llama-server's rule), else the one unused the longest: a few
   shared tokens (BOS, a template's header) are not worth another conversation's cache. -1 if
   none is free. */
static int pick_slot(const srv_sched *s, const srv_req *r) {
    int best = -1, lru = -1;
    size_t best_n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        const srv_slot *sl = &s->slots[i];
        if (sl->req) continue;
        if (lru < 0 || sl->t_used < s->slots[lru].t_used) lru = i;
        const size_t n = s->reuse && r->cache_prompt ? common_prefix(sl, r) : 0;
        if (n > best_n) best = i, best_n = n;
    }
    return best >= 0 && 2 * best_n >= r->n_prompt ? best : lru;
}

static bool text_reserve(srv_req *r, size_t more) {
    if (r->len + more + 1 <= r->cap) return true;
    size_t nc = r->cap ? r->cap : 256;
    while (r->len + more + 1 > nc) nc *= 2;
    char *t = realloc(r->text, nc);
    if (!t) return false;
    r->text = t;
    r->cap = nc;
    return true;
}

static void record_logprobs(srv_sched *s, srv_req *r, const float *lg, int32_t tok) {
    if (r->n_lp == r->cap_lp) {
        size_t nc = r->cap_lp ? r->cap_lp * 2 : 32;
        srv_lp *n = realloc(r->lps, nc * sizeof *n);
        if (!n) return;
        r->lps = n;
        r->cap_lp = nc;
    }
    const int V = s->n_vocab;
    float mx = lg[0];
    for (int i = 1; i < V; i++) mx = lg[i] > mx ? lg[i] : mx;
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)(lg[i] - mx));
    const float lse = mx + (float)log(sum);
    srv_lp *p = &r->lps[r->n_lp++];
    memset(p, 0, sizeof *p);
    p->id = tok;
    p->lp = lg[tok] - lse;
    const int k = r->top_logprobs;
    for (int i = 0; i < V; i++) { /* insertion into the k best */
        int n = p->n_top;
        if (n == k && (k == 0 || lg[i] <= lg[p->top_id[n - 1]])) continue;
        int j = n < k ? n++ : n - 1;
        while (j > 0 && lg[p->top_id[j - 1]] < lg[i]) {
            p->top_id[j] = p->top_id[j - 1];
            j--;
        }
        p->top_id[j] = i;
        p->n_top = n;
    }
    for (int j = 0; j < p->n_top; j++) p->top_lp[j] = lg[p->top_id[j]] - lse;
}

/* Under mu: slot i's token tok drawn (status rc) from the logits lg of its last token:
   append, check the ends. */
static void slot_step(srv_sched *s, int i, const float *lg, int32_t tok, int rc) {
    srv_slot *sl = &s->slots[i];
    srv_req *r = sl->req;
    if (rc && colibri_sampler_sample(sl->smp, lg, &tok)) { /* again here, for this thread's message */
        slot_free(s, i, SRV_FINISH_ERROR, colibri_last_error());
        return;
    }
    colibri_sampler_accept(sl->smp, tok);
    if (r->n_gen == 0) r->t_first = cli_now();
    r->n_gen++;
    s->tokens_gen++;
    if (r->logprobs) record_logprobs(s, r, lg, tok);
    if (!r->ignore_eos && colibri_is_eog(s->e, tok)) {
        if (r->logprobs && r->n_lp) r->n_lp--; /* the end token is not part of the text */
        { slot_free(s, i, SRV_FINISH_STOP, NULL); return; }
    }
    char piece[512];
    size_t pn = 0;
    if (colibri_detok_push(sl->dt, tok, piece, sizeof piece, &pn)) { slot_free(s, i, SRV_FINISH_ERROR, colibri_last_error()); return; }
    if (!text_reserve(r, pn)) { slot_free(s, i, SRV_FINISH_ERROR, "out of memory"); return; }
    memcpy(r->text + r->len, piece, pn);
    r->len += pn;
    r->text[r->len] = 0;
    size_t pos = 0, hold = 0;
    if (r->n_stops && colibri_stop_check(r->text, r->len, r->shown, (const char *const *)r->stops, (size_t)r->n_stops, &pos, &hold)) {
        r->len = pos;
        r->text[pos] = 0;
        { slot_free(s, i, SRV_FINISH_STOP, NULL); return; }
    }
    if (r->len - hold > r->shown) r->shown = r->len - hold;
    pthread_cond_broadcast(&r->cv);
    if ((long)r->n_gen >= r->max_tokens || colibri_seq_n_past(s->e, i) + 1 > s->n_ctx)
        { slot_free(s, i, SRV_FINISH_LENGTH, NULL); return; }
    sl->last = tok;
    sl->phase = 2;
}

/* The draws of logits rows first, first + 2, ... of the current step. Each slot has its
   own sampler, touched by this step's draw only, so which thread draws a row changes
   nothing. */
static void draw_rows(srv_sched *s, int first) {
    for (int j = first; j < s->n_draw; j += 2) {
        srv_slot *sl = &s->slots[s->batch_slot[j]];
        s->draw_rc[j] = colibri_sampler_sample(sl->smp, s->logits + (size_t)j * (size_t)s->n_vocab, &s->drawn[j]);
    }
}

static void *helper_main(void *arg) {
    srv_sched *s = arg;
    pthread_mutex_lock(&s->hmu);
    for (;;) {
        while (s->hdone == s->hgen && !s->hstop) pthread_cond_wait(&s->hcv, &s->hmu);
        if (s->hstop) break;
        const uint64_t g = s->hgen;
        pthread_mutex_unlock(&s->hmu);
        draw_rows(s, 1);
        pthread_mutex_lock(&s->hmu);
        s->hdone = g;
        pthread_cond_broadcast(&s->hcv);
    }
    pthread_mutex_unlock(&s->hmu);
    return NULL;
}

/* Outside mu, after a step: every logits row's token. */
static void draw_all(srv_sched *s, int n_rows) {
    s->n_draw = n_rows;
    if (n_rows < 2 || !s->helper_on) {
        draw_rows(s, 0);
        if (n_rows >= 2) draw_rows(s, 1);
        return;
    }
    pthread_mutex_lock(&s->hmu);
    const uint64_t g = ++s->hgen;
    pthread_cond_broadcast(&s->hcv);
    pthread_mutex_unlock(&s->hmu);
    draw_rows(s, 0);
    pthread_mutex_lock(&s->hmu);
    while (s->hdone != g) pthread_cond_wait(&s->hcv, &s->hmu);
    pthread_mutex_unlock(&s->hmu);
}

static void take_snapshot(srv_sched *s) {
    srv_snapshot *sn = &s->snap;
    *sn->stats = colibri_get_stats(s->e);
    for (int l = 0; l < sn->n_layers; l++) {
        const size_t o = (size_t)l * (size_t)sn->n_experts;
        sn->is_moe[l] = colibri_expert_state(s->e, l, sn->last + o, sn->resident + o, (size_t)sn->n_experts) > 0;
        if (!sn->is_moe[l]) {
            memset(sn->last + o, 0, sizeof(uint32_t) * (size_t)sn->n_experts);
            memset(sn->resident + o, 0, (size_t)sn->n_experts);
        }
    }
    sn->seq++;
    pthread_cond_broadcast(&s->snap_cv);
}

static void *sched_main(void *arg) {
    srv_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (atomic_exchange(&s->snap_want, 0)) take_snapshot(s);
        if (s->stop) break;
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].req && s->slots[i].req->cancel) slot_free(s, i, SRV_FINISH_CANCEL, NULL);
        while (s->qhead) { /* admit queued requests while a slot is free */
            srv_req *r = s->qhead;
            const int i = r->cancel ? -2 : pick_slot(s, r);
            if (i == -1) break;
            s->qhead = r->next;
            if (!s->qhead) s->qtail = NULL;
            s->qlen--;
            r->next = NULL;
            if (i < 0) {
                req_finish(s, r, SRV_FINISH_CANCEL, NULL);
                continue;
            }
            srv_slot *sl = &s->slots[i];
            sl->smp = colibri_sampler_new(&r->sampling, s->n_vocab);
            sl->dt = colibri_detok_new(s->e, 1);
            sl->req = r;
            if (!sl->smp || !sl->dt) {
                slot_free(s, i, SRV_FINISH_ERROR, colibri_last_error());
                continue;
            }
            /* keep the cached start of the prompt, but evaluate at least its last token (its
               logits give the first draw); windowed layers may keep less (n_past says) */
            size_t keep = r->cache_prompt ? common_prefix(sl, r) : 0;
            if (keep >= r->n_prompt) keep = r->n_prompt ? r->n_prompt - 1 : 0;
            int32_t past = srv_truncate(s->e, i, (int32_t)keep) ? -1 : colibri_seq_n_past(s->e, i);
            if (past < 0 || (size_t)past > keep) { /* cannot happen; start over rather than guess */
                srv_truncate(s->e, i, 0);
                past = 0;
            }
            sl->n_hist = (size_t)past;
            sl->phase = 1;
            sl->n_fed = (size_t)past;
            r->n_cached = (size_t)past;
            s->tokens_cached += (uint64_t)past;
            r->running = true;
            r->t_start = cli_now();
        }
        int active = 0;
        for (int i = 0; i < s->n_slots; i++) active += s->slots[i].req != NULL;
        if (!active) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        /* the batch: one token per decoding slot, then prompt chunks in the room left */
        size_t n = 0;
        int n_logits = 0;
        for (int i = 0; i < s->n_slots; i++) {
            srv_slot *sl = &s->slots[i];
            if (sl->req && sl->phase == 2) {
                s->batch[n] = (colibri_batch_tok){i, sl->last, 1};
                s->batch_slot[n_logits++] = i;
                n++;
            }
        }
        size_t room = n < (size_t)s->n_batch ? (size_t)s->n_batch - n : 1;
        for (int k = 0; k < s->n_slots && room; k++) {
            const int i = (s->rr + k) % s->n_slots;
            srv_slot *sl = &s->slots[i];
            if (!sl->req || sl->phase != 1) continue;
            srv_req *r = sl->req;
            size_t take = r->n_prompt - sl->n_fed;
            if (take > room) take = room;
            for (size_t j = 0; j < take; j++) {
                const bool last = sl->n_fed + j + 1 == r->n_prompt;
                s->batch[n++] = (colibri_batch_tok){i, r->prompt[sl->n_fed + j], last};
                if (last) s->batch_slot[n_logits++] = i;
            }
            sl->n_fed += take;
            room -= take;
        }
        s->rr = (s->rr + 1) % s->n_slots;
        pthread_mutex_unlock(&s->mu);
        const double t0 = cli_now();
        const int rc = srv_decode(s->e, s->batch, n, s->logits, s->logits_cap);
        const double t1 = cli_now();
        if (!rc) draw_all(s, n_logits);
        pthread_mutex_lock(&s->mu);
        s->busy_s += t1 - t0;
        s->steps++;
        s->step_tokens += n;
        if (rc) { /* all or nothing: the requests of this batch fail */
            char why[200];
            snprintf(why, sizeof why, "%s", colibri_last_error());
            s->decode_errors++;
            for (size_t j = 0; j < n; j++)
                if (s->slots[s->batch[j].seq].req) slot_free(s, s->batch[j].seq, SRV_FINISH_ERROR, why);
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            srv_slot *sl = &s->slots[s->batch[j].seq];
            if (sl->phase == 1) s->tokens_prompt++;
            if (sl->n_hist < (size_t)s->n_ctx) sl->hist[sl->n_hist++] = s->batch[j].token;
        }
        for (int j = 0; j < n_logits; j++) {
            const int i = s->batch_slot[j];
            if (s->slots[i].req) slot_step(s, i, s->logits + (size_t)j * (size_t)s->n_vocab, s->drawn[j], s->draw_rc[j]);
        }
        if (t1 - s->win_t0 >= 2.0) { /* generation tokens/s over the last ~2 s */
            s->tok_per_s = (double)(s->tokens_gen - s->win_tok0) / (t1 - s->win_t0);
            s->win_t0 = t1;
            s->win_tok0 = s->tokens_gen;
        }
    }
    for (int i = 0; i < s->n_slots; i++) slot_free(s, i, SRV_FINISH_CANCEL, NULL);
    while (s->qhead) {
        srv_req *r = s->qhead;
        s->qhead = r->next;
        s->qlen--;
        req_finish(s, r, SRV_FINISH_CANCEL, NULL);
    }
    s->qtail = NULL;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int srv_sched_start(srv_sched *s, colibri_engine_t *e, int n_slots, int qmax, int n_batch, bool reuse) {
    memset(s, 0, sizeof *s);
    s->reuse = reuse;
    s->e = e;
    s->n_slots = n_slots;
    s->qmax = qmax;
    s->n_vocab = colibri_n_vocab(e);
    s->n_ctx = colibri_max_seq_len(e);
    s->n_batch = n_batch > 0 ? n_batch : 64;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->snap_cv, NULL);
    s->slots = calloc((size_t)n_slots, sizeof *s->slots);
    const size_t max_batch = (size_t)s->n_batch + (size_t)n_slots;
    s->batch = calloc(max_batch, sizeof *s->batch);
    s->batch_slot = calloc((size_t)n_slots, sizeof *s->batch_slot);
    s->drawn = calloc((size_t)n_slots, sizeof *s->drawn);
    s->draw_rc = calloc((size_t)n_slots, sizeof *s->draw_rc);
    s->logits_cap = (size_t)n_slots * (size_t)s->n_vocab;
    s->logits = malloc(sizeof(float) * s->logits_cap);
    s->snap.stats = calloc(1, sizeof *s->snap.stats);
    if (s->slots)
        for (int i = 0; i < n_slots; i++)
            if (!(s->slots[i].hist = malloc(sizeof(int32_t) * (size_t)s->n_ctx))) return -1;
    if (!s->slots || !s->batch || !s->batch_slot || !s->drawn || !s->draw_rc || !s->logits || !s->snap.stats) return -1;
    *s->snap.stats = colibri_get_stats(e);
    s->snap.n_layers = s->snap.stats->n_layers;
    s->snap.n_experts = s->snap.stats->n_experts;
    const size_t cells = (size_t)s->snap.n_layers * (size_t)(s->snap.n_experts > 0 ? s->snap.n_experts : 1);
    s->snap.last = calloc(cells, sizeof *s->snap.last);
    s->snap.resident = calloc(cells, 1);
    s->snap.is_moe = calloc((size_t)s->snap.n_layers + 1, 1);
    if (!s->snap.last || !s->snap.resident || !s->snap.is_moe) return -1;
    take_snapshot(s);
    s->win_t0 = cli_now();
    pthread_mutex_init(&s->hmu, NULL);
    pthread_cond_init(&s->hcv, NULL);
    s->helper_on = n_slots > 1 && !pthread_create(&s->helper, NULL, helper_main, s); /* else one thread draws */
    if (pthread_create(&s->th, NULL, sched_main, s)) return -1;
    s->started = true;
    return 0;
}

int srv_submit(srv_sched *s, srv_req *r) {
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    int busy = 0;
    for (int i = 0; i < s->n_slots; i++) busy += s->slots[i].req != NULL;
    if (s->stop) rc = -2;
    else if (busy + s->qlen >= s->n_slots + s->qmax) rc = -1;
    if (!rc) {
        r->refs++;
        r->t_submit = cli_now();
        if (s->qtail) s->qtail->next = r;
        else s->qhead = r;
        s->qtail = r;
        s->qlen++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void srv_cancel(srv_sched *s, srv_req *r) {
    pthread_mutex_lock(&s->mu);
    if (!r->done) {
        r->cancel = true;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

void srv_with_snapshot(srv_sched *s, int ms, void (*fn)(const srv_snapshot *, void *), void *user) {
    pthread_mutex_lock(&s->mu);
    const uint64_t seq = s->snap.seq;
    atomic_store(&s->snap_want, 1);
    pthread_cond_signal(&s->cv);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    while (s->snap.seq == seq && !s->stop)
        if (pthread_cond_timedwait(&s->snap_cv, &s->mu, &ts)) break;
    fn(&s->snap, user);
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_stop(srv_sched *s) {
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->th, NULL);
        s->started = false;
    }
    if (s->helper_on) {
        pthread_mutex_lock(&s->hmu);
        s->hstop = true;
        pthread_cond_broadcast(&s->hcv);
        pthread_mutex_unlock(&s->hmu);
        pthread_join(s->helper, NULL);
        s->helper_on = false;
    }
    free(s->drawn);
    free(s->draw_rc);
    s->drawn = NULL;
    s->draw_rc = NULL;
    if (s->slots)
        for (int i = 0; i < s->n_slots; i++) free(s->slots[i].hist);
    free(s->slots);
    free(s->batch);
    free(s->batch_slot);
    free(s->logits);
    free(s->snap.stats);
    free(s->snap.last);
    free(s->snap.resident);
    free(s->snap.is_moe);
    s->slots = NULL;
}
