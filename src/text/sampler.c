/* sampler.c — penalties, top-k, temperature, top-p, min-p and a seeded draw (order and
   conventions in sampler.h), plus the stop-string helper. */
#include "text/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"

typedef struct clb_cand {
    float logit;
    int32_t id;
} clb_cand;

struct clb_sampler {
    clb_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];   /* xoshiro256** state */
    float *work;       /* [n_vocab] penalised logits */
    int32_t *counts;   /* [n_vocab] occurrences in the window; all zero between calls */
    clb_cand *cand;    /* [n_vocab] candidates, descending logit, ties ascending id */
    double *pd;        /* [n_vocab] candidate probabilities (double for the running sums) */
    float *probs;      /* [n_vocab rounded up to 16] the same as float, for clb_sampler_candidates;
                          the unsorted draw's weights */
    int32_t *ids;      /* [n_vocab] candidate ids, for clb_sampler_candidates */
    size_t n_cand;
    int32_t *hist;     /* [penalty_last_n] ring of accepted tokens */
    size_t hist_n, hist_pos;
};

/* ---- RNG: splitmix64 expands the seed, xoshiro256** generates ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t clb_sampler_rand_u64(clb_sampler *s) {
    uint64_t *st = s->rng;
    uint64_t result = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return result;
}

double clb_sampler_rand_double(clb_sampler *s) {
    return (double)(clb_sampler_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */
}

static void seed_rng(clb_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

/* ---- lifecycle ---- */

clb_sampler_params clb_sampler_params_default(void) {
    clb_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    return p;
}

void clb_sampler_free(clb_sampler *s) {
    if (!s) return;
    clb_free(s->work);
    clb_free(s->counts);
    clb_free(s->cand);
    clb_free(s->pd);
    clb_free(s->probs);
    clb_free(s->ids);
    clb_free(s->hist);
    clb_free(s);
}

clb_sampler *clb_sampler_create(const clb_sampler_params *p, int32_t n_vocab) {
    if (!p || n_vocab <= 0) {
        clb_err(COLIBRI_ERR_ARG, "sampler: bad arguments (params %p, n_vocab %d)", (const void *)p,
                (int)n_vocab);
        return NULL;
    }
    if (isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p) || !isfinite(p->repeat_penalty) ||
        p->repeat_penalty <= 0.0f || !isfinite(p->frequency_penalty) ||
        !isfinite(p->presence_penalty) || p->penalty_last_n < 0 || p->min_p > 1.0f) {
        clb_err(COLIBRI_ERR_ARG,
                "sampler: invalid parameters (temperature %g, top_p %g, min_p %g, repeat_penalty "
                "%g, frequency %g, presence %g, last_n %d)",
                (double)p->temperature, (double)p->top_p, (double)p->min_p,
                (double)p->repeat_penalty, (double)p->frequency_penalty,
                (double)p->presence_penalty, (int)p->penalty_last_n);
        return NULL;
    }
    clb_sampler *s = clb_calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->p = *p;
    s->n_vocab = n_vocab;
    size_t nv = (size_t)n_vocab;
    s->work = clb_malloc(nv * sizeof *s->work);
    s->counts = clb_calloc(nv, sizeof *s->counts);
    s->cand = clb_malloc(nv * sizeof *s->cand);
    s->pd = clb_malloc(nv * sizeof *s->pd);
    s->probs = clb_malloc(((nv + 15) & ~(size_t)15) * sizeof *s->probs);
    s->ids = clb_malloc(nv * sizeof *s->ids);
    s->hist = clb_malloc((p->penalty_last_n ? (size_t)p->penalty_last_n : 1) * sizeof *s->hist);
    if (!s->work || !s->counts || !s->cand || !s->pd || !s->probs || !s->ids || !s->hist) goto nomem;
    seed_rng(s);
    return s;
nomem:
    clb_sampler_free(s);
    clb_err(COLIBRI_ERR_NOMEM, "sampler: out of memory for n_vocab %d", (int)n_vocab);
    return NULL;
}

void clb_sampler_reset(clb_sampler *s) {
    if (!s) return;
    s->hist_n = s->hist_pos = 0;
    seed_rng(s);
}

void clb_sampler_accept(clb_sampler *s, int32_t token) {
    if (!s || token < 0 || token >= s->n_vocab || s->p.penalty_last_n == 0) return;
    size_t cap = (size_t)s->p.penalty_last_n;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % cap;
    if (s->hist_n < cap) s->hist_n++;
}

/* ---- the pipeline ---- */

/* a ranks before b: larger logit, then smaller id */
static inline bool cand_before(clb_cand a, clb_cand b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static int cand_cmp(const void *pa, const void *pb) {
    const clb_cand *a = pa, *b = pb;
    if (cand_before(*a, *b)) return -1;
    if (cand_before(*b, *a)) return 1;
    return 0;
}

static void apply_penalties(clb_sampler *s) {
    const clb_sampler_params *p = &s->p;
    if (s->hist_n == 0) return;
    bool any = p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f;
    if (!any) return;
    for (size_t i = 0; i < s->hist_n; i++) s->counts[s->hist[i]]++;
    for (size_t i = 0; i < s->hist_n; i++) {
        int32_t t = s->hist[i];
        int32_t c = s->counts[t];
        if (c == 0) continue; /* already applied for this id */
        float l = s->work[t];
        if (l > 0.0f) l /= p->repeat_penalty;
        else l *= p->repeat_penalty;
        l -= (float)c * p->frequency_penalty + p->presence_penalty;
        s->work[t] = l;
        s->counts[t] = 0; /* also restores the all-zero invariant */
    }
}

/* Step 1 for both pipelines: work = logits with the penalties applied. */
static void load_penalised(clb_sampler *s, const float *logits) {
    memcpy(s->work, logits, (size_t)s->n_vocab * sizeof *s->work);
    apply_penalties(s);
}

/* The sort key of a logit: ascending key = cand_before order (larger logit first; -0 and
   +0 tie, as they compare equal), and its inverse (giving +0 for both zeros). */
static inline uint32_t cand_key(float l) {
    uint32_t u;
    memcpy(&u, &l, sizeof u);
    if (l == 0.0f) u = 0;
    const uint32_t asc = (u & 0x80000000u) ? ~u : u | 0x80000000u; /* ascending in the float's order */
    return ~asc;
}
static inline float cand_logit(uint32_t key) {
    const uint32_t asc = ~key, u = (asc & 0x80000000u) ? asc & 0x7fffffffu : ~asc;
    float l;
    memcpy(&l, &u, sizeof l);
    return l;
}

/* Sorts c[0..n) into cand_before order when the ids ascend: a stable LSD radix sort of
   (key << 32 | id) on the key, a pass per byte (skipped when all keys share it) between
   tmp[n] and c (as 64-bit words). The order is exactly qsort's with cand_cmp (a total
   order), in O(n): a 152k vocabulary sampled with no top-k (OpenAI's defaults) costs about
   2 ms instead of a comparison sort's 20 per token. */
static void cand_radix_sort(clb_cand *c, uint64_t *tmp, size_t n) {
    uint64_t *w = (uint64_t *)(void *)c; /* clb_cand is 8 bytes: reused as words */
    uint32_t cnt[4][256];
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++) {
        const uint32_t k = cand_key(c[i].logit);
        tmp[i] = (uint64_t)k << 32 | (uint32_t)c[i].id;
        for (int p = 0; p < 4; p++) cnt[p][(k >> (8 * p)) & 255]++;
    }
    uint64_t *src = tmp, *dst = w;
    for (int p = 0; p < 4; p++) {
        uint32_t sum = 0, *cp = cnt[p];
        if (cp[(src[0] >> (32 + 8 * p)) & 255] == n) continue; /* every key has this digit */
        for (int b = 0; b < 256; b++) {
            const uint32_t v = cp[b];
            cp[b] = sum;
            sum += v;
        }
        const int sh = 32 + 8 * p;
        for (size_t i = 0; i < n; i++) {
            const uint64_t v = src[i];
            dst[cp[(v >> sh) & 255]++] = v;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src == w) { /* an odd number of passes ran: the words go back through tmp */
        memcpy(tmp, w, n * sizeof *tmp);
        src = tmp;
    }
    for (size_t i = 0; i < n; i++) {
        const uint64_t v = src[i];
        c[i].logit = cand_logit((uint32_t)(v >> 32));
        c[i].id = (int32_t)(uint32_t)v;
    }
}

/* min-heap on "rank" (the worst kept candidate at the root) for top-k selection */
static void heap_sift_down(clb_cand *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_before(h[w], h[l])) w = l;
        if (r < n && cand_before(h[w], h[r])) w = r;
        if (w == i) return;
        clb_cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static int prepare(clb_sampler *s, const float *logits) {
    const clb_sampler_params *p = &s->p;
    size_t nv = (size_t)s->n_vocab;
    load_penalised(s, logits);

    /* collect the usable candidates (NaN and -inf never win; +inf is clamped) */
    size_t n = 0;
    for (size_t i = 0; i < nv; i++) {
        float l = s->work[i];
        if (isnan(l) || l == -INFINITY) continue;
        if (l == INFINITY) l = 3.0e38f;
        s->cand[n].logit = l;
        s->cand[n].id = (int32_t)i;
        n++;
    }
    if (n == 0) return clb_err(COLIBRI_ERR_ARG, "sampler: no finite logit among %zu", nv);

    if (p->temperature <= 0.0f) {
        clb_cand best = s->cand[0];
        for (size_t i = 1; i < n; i++)
            if (cand_before(s->cand[i], best)) best = s->cand[i];
        s->cand[0] = best;
        s->pd[0] = 1.0;
        s->n_cand = 1;
        return COLIBRI_OK;
    }

    /* top-k: keep the k best in a heap, then sort them; otherwise sort everything */
    if (p->top_k > 0 && (size_t)p->top_k < n) {
        size_t k = (size_t)p->top_k;
        for (size_t i = k / 2; i-- > 0;) heap_sift_down(s->cand, k, i);
        for (size_t i = k; i < n; i++) {
            if (cand_before(s->cand[i], s->cand[0])) {
                s->cand[0] = s->cand[i];
                heap_sift_down(s->cand, k, 0);
            }
        }
        n = k;
        qsort(s->cand, n, sizeof *s->cand, cand_cmp);
    } else if (n > 256) { /* ids ascending: collected in vocabulary order */
        cand_radix_sort(s->cand, (uint64_t *)(void *)s->pd, n); /* pd is written only after the sort */
    } else {
        qsort(s->cand, n, sizeof *s->cand, cand_cmp);
    }

    /* temperature + softmax; subtracting the max first keeps exp() in range */
    double inv_t = 1.0 / (double)p->temperature, max = s->cand[0].logit, sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        s->pd[i] = exp(((double)s->cand[i].logit - max) * inv_t);
        sum += s->pd[i];
    }
    for (size_t i = 0; i < n; i++) s->pd[i] /= sum;

    /* top-p */
    if (p->top_p < 1.0f) {
        double cum = 0.0;
        size_t keep = n;
        for (size_t i = 0; i < n; i++) {
            cum += s->pd[i];
            if (cum >= (double)p->top_p) {
                keep = i + 1;
                break;
            }
        }
        if (keep < n) {
            n = keep;
            double z = 0.0;
            for (size_t i = 0; i < n; i++) z += s->pd[i];
            for (size_t i = 0; i < n; i++) s->pd[i] /= z;
        }
    }

    /* min-p: relative to the most likely survivor (pd[0]) */
    if (p->min_p > 0.0f) {
        double thr = (double)p->min_p * s->pd[0];
        size_t keep = 1;
        while (keep < n && s->pd[keep] >= thr) keep++;
        if (keep < n) {
            n = keep;
            double z = 0.0;
            for (size_t i = 0; i < n; i++) z += s->pd[i];
            for (size_t i = 0; i < n; i++) s->pd[i] /= z;
        }
    }
    s->n_cand = n;
    return COLIBRI_OK;
}

int clb_sampler_candidates(clb_sampler *s, const float *logits, const int32_t **ids,
                           const float **probs, size_t *n) {
    if (!s || !logits || !ids || !probs || !n)
        return clb_err(COLIBRI_ERR_ARG, "sampler: NULL argument to clb_sampler_candidates");
    int rc = prepare(s, logits);
    if (rc != COLIBRI_OK) return rc;
    for (size_t i = 0; i < s->n_cand; i++) {
        s->ids[i] = s->cand[i].id;
        s->probs[i] = (float)s->pd[i];
    }
    *ids = s->ids;
    *probs = s->probs;
    *n = s->n_cand;
    return COLIBRI_OK;
}

/* Steps 1, 4, 5, 7 and 8 when no step needs an order (temperature > 0, no top-k, no top-p:
   OpenAI's defaults): the weights exp(l / T - max / T) in vocabulary order through the
   kernels' vector exp, min-p as e >= min_p (e_max = 1), and the draw walks the vocabulary.
   The same distribution as the sorted pipeline without its sort: one pass over a 152k
   vocabulary instead of a sort and a scalar exp per entry. */
static int draw_unsorted(clb_sampler *s, int32_t *out_token) {
    const size_t nv = (size_t)s->n_vocab, n16 = (nv + 15) & ~(size_t)15;
    const float inv_t = 1.0f / s->p.temperature;
    float *x = s->probs, max = -INFINITY;
    for (size_t i = 0; i < nv; i++) {
        float l = s->work[i];
        if (isnan(l) || l == -INFINITY) {
            x[i] = -INFINITY;
            continue;
        }
        l *= inv_t;
        if (!(l <= 3.0e38f)) l = 3.0e38f; /* +inf (clamped, as the sorted path does) and overflow */
        if (l < -3.0e38f) l = -3.0e38f;
        x[i] = l;
        if (l > max) max = l;
    }
    if (max == -INFINITY) return clb_err(COLIBRI_ERR_ARG, "sampler: no finite logit among %zu", nv);
    for (size_t i = nv; i < n16; i++) x[i] = -INFINITY;
    double sum = (double)clb_kernels_get()->fa_exp_sum((int64_t)n16, x, max);
    if (s->p.min_p > 0.0f) {
        const float thr = s->p.min_p;
        sum = 0.0;
        for (size_t i = 0; i < nv; i++) {
            if (x[i] < thr) x[i] = 0.0f;
            sum += (double)x[i];
        }
    }
    const double u = clb_sampler_rand_double(s) * sum;
    double cum = 0.0;
    int32_t last = -1;
    for (size_t i = 0; i < nv; i++) {
        if (x[i] == 0.0f) continue;
        cum += (double)x[i];
        last = (int32_t)i;
        if (u < cum) {
            *out_token = last;
            return COLIBRI_OK;
        }
    }
    *out_token = last; /* rounding left u >= the final sum; the maximum has weight 1, so last >= 0 */
    return COLIBRI_OK;
}

int clb_sampler_sample(clb_sampler *s, const float *logits, int32_t *out_token) {
    if (!s || !logits || !out_token)
        return clb_err(COLIBRI_ERR_ARG, "sampler: NULL argument to clb_sampler_sample");
    if (s->p.temperature > 0.0f && !(s->p.top_k > 0 && s->p.top_k < s->n_vocab) && !(s->p.top_p < 1.0f)) {
        load_penalised(s, logits);
        return draw_unsorted(s, out_token);
    }
    int rc = prepare(s, logits);
    if (rc != COLIBRI_OK) return rc;
    if (s->n_cand == 1) {
        *out_token = s->cand[0].id;
        return COLIBRI_OK;
    }
    double u = clb_sampler_rand_double(s), cum = 0.0;
    for (size_t i = 0; i < s->n_cand; i++) {
        cum += s->pd[i];
        if (u < cum) {
            *out_token = s->cand[i].id;
            return COLIBRI_OK;
        }
    }
    *out_token = s->cand[s->n_cand - 1].id; /* rounding left u >= the final sum */
    return COLIBRI_OK;
}

/* ---- stop strings ---- */

bool clb_stop_check(const char *text, size_t len, size_t from, const char *const *stops,
                    size_t n_stops, size_t *match_pos, size_t *hold_back, size_t *which) {
    size_t best = SIZE_MAX, best_i = 0, hold = 0;
    if (match_pos) *match_pos = len;
    if (hold_back) *hold_back = 0;
    if (!text || !stops) return false;
    for (size_t i = 0; i < n_stops; i++) {
        const char *st = stops[i];
        size_t sl = st ? strlen(st) : 0;
        if (sl == 0) continue;
        /* complete occurrence starting at >= from */
        if (len >= sl) {
            size_t start = from;
            if (start + sl <= len) {
                const char *hit = memmem(text + start, len - start, st, sl);
                if (hit) {
                    size_t pos = (size_t)(hit - text);
                    if (pos < best) {
                        best = pos;
                        best_i = i;
                    }
                }
            }
        }
        /* longest tail that is a proper prefix of st */
        size_t maxk = CLB_MIN(sl - 1, len);
        for (size_t k = maxk; k > hold; k--) {
            if (memcmp(text + len - k, st, k) == 0) {
                hold = k;
                break;
            }
        }
    }
    if (best != SIZE_MAX) {
        if (match_pos) *match_pos = best;
        if (which) *which = best_i;
        return true;
    }
    if (hold_back) *hold_back = hold;
    return false;
}

size_t clb_utf8_incomplete_tail(const char *text, size_t len) {
    /* walk back over at most 3 continuation bytes to the lead byte */
    size_t k = 0;
    while (k < len && k < 3 && ((unsigned char)text[len - 1 - k] & 0xC0) == 0x80) k++;
    if (k == len) return 0;
    unsigned char lead = (unsigned char)text[len - 1 - k];
    size_t need;
    if (lead < 0x80) return 0;
    else if ((lead & 0xE0) == 0xC0) need = 2;
    else if ((lead & 0xF0) == 0xE0) need = 3;
    else if ((lead & 0xF8) == 0xF0) need = 4;
    else return 0; /* invalid lead: nothing to wait for */
    return (k + 1 < need) ? k + 1 : 0;
}
