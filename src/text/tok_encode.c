/* tok_encode.c — text -> ids: added-token matching, normalizers, pre-tokenizers, and the two
 * models (BPE over merge ranks, SentencePiece merge-by-score).
 *
 * Pipeline per call:  text -> split around added tokens -> for each plain segment:
 *   normalize -> pre-tokenize into pieces -> model(piece) -> ids;  post-processor template
 *   around it when add_special.
 * Both models merge adjacent symbols through a binary heap with lazy invalidation, so a long
 * piece costs O(n log n). BPE results of short pieces are cached for the duration of a call. */
#include <string.h>

#include "text/tok_internal.h"

typedef struct span {
    size_t off, len; /* into session.work */
} span;

typedef struct seg {
    size_t a, b; /* [a, b) within the piece */
    bool m;      /* a match (after invert) */
} seg;

typedef struct sym {
    int32_t id;
    int32_t prev, next;
    uint32_t start, len; /* bytes of the piece this symbol covers */
} sym;

typedef struct heap_ent {
    double prio; /* lower first: BPE rank, or -score for SPM */
    int32_t pos;
    int32_t a, b;    /* BPE: expected ids; SPM: b = right symbol index */
    uint32_t size;   /* SPM: expected byte length of the merge */
} heap_ent;

typedef struct cache_ent {
    uint64_t hash;
    size_t key_off;  /* into cache_keys */
    uint32_t key_len;
    uint32_t ids_off, n_ids; /* into cache_ids */
} cache_ent;

typedef struct session {
    const clb_tokenizer *tok;
    int32_t *out;
    size_t cap, n;
    clb_buf work;            /* normalized text and piece contents */
    span *pieces, *next;     /* current and next piece lists */
    seg *segs;               /* split scratch */
    size_t nseg, segcap;
    size_t np, nn, pcap, ncap;
    sym *syms;
    size_t scap;
    heap_ent *heap;
    size_t hn, hcap;
    cache_ent *cache;        /* open addressing, cache_cap slots (hash 0 = empty) */
    size_t cache_cap, cache_n;
    clb_buf cache_keys;
    int32_t *cache_ids;
    size_t cache_ids_n, cache_ids_cap;
    pcre2_match_data *md;
    bool at_text_start;      /* the current segment starts the text (Metaspace "first") */
    int err;
} session;

static void emit(session *s, int32_t id) {
    if (s->n < s->cap) s->out[s->n] = id;
    s->n++;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return COLIBRI_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = clb_realloc(*p, nc * elem);
    if (!q) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    *p = q;
    *cap = nc;
    return COLIBRI_OK;
}

/* ---------------- heap ---------------- */

static bool ent_less(const heap_ent *x, const heap_ent *y) {
    if (x->prio != y->prio) return x->prio < y->prio;
    return x->pos < y->pos;
}

static int heap_push(session *s, heap_ent e) {
    if (grow((void **)&s->heap, &s->hcap, s->hn + 1, sizeof *s->heap) != COLIBRI_OK)
        return COLIBRI_ERR_NOMEM;
    size_t i = s->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ent_less(&e, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = e;
    return COLIBRI_OK;
}

static heap_ent heap_pop(session *s) {
    heap_ent top = s->heap[0], last = s->heap[--s->hn];
    size_t i = 0, n = s->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ent_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!ent_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

/* ---------------- BPE ---------------- */

static int bpe_add_pair(session *s, int32_t left) {
    if (left < 0) return COLIBRI_OK;
    int32_t right = s->syms[left].next;
    if (right < 0) return COLIBRI_OK;
    int32_t a = s->syms[left].id, b = s->syms[right].id, rank, res;
    if (a < 0 || b < 0 || !clb_pairmap_get(&s->tok->merges, a, b, &rank, &res)) return COLIBRI_OK;
    heap_ent e = {(double)rank, left, a, b, 0};
    return heap_push(s, e);
}

/* Initial symbols of a BPE word: bytes (byte-level) or UTF-8 characters, with byte fallback
   or <unk> for characters missing from the vocabulary. Returns the symbol count. */
static long bpe_init_symbols(session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    size_t ns = 0;
    if (grow((void **)&s->syms, &s->scap, n + 1, sizeof *s->syms) != COLIBRI_OK) return -1;
    char tmp[64];
    size_t pl = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    size_t sl = t->eow_suffix ? strlen(t->eow_suffix) : 0;
    for (size_t i = 0; i < n;) {
        size_t l = t->byte_level ? 1 : clb_utf8_len((unsigned char)w[i]);
        if (l > n - i) l = n - i;
        int32_t id;
        if (t->byte_level) {
            id = t->byte_id[(unsigned char)w[i]];
        } else if ((pl && i > 0) || (sl && i + l == n)) {
            size_t k = 0;
            if (pl && i > 0) { memcpy(tmp, t->cont_prefix, CLB_MIN(pl, 24)); k = CLB_MIN(pl, 24); }
            memcpy(tmp + k, w + i, l);
            k += l;
            if (sl && i + l == n) { memcpy(tmp + k, t->eow_suffix, CLB_MIN(sl, 24)); k += CLB_MIN(sl, 24); }
            id = clb_strmap_get(&t->vocab, t, tmp, k);
        } else if (l == 1 && (unsigned char)w[i] < 128) {
            id = t->ascii_id[(unsigned char)w[i]];
        } else {
            id = clb_strmap_get(&t->vocab, t, w + i, l);
        }
        if (id < 0 && t->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < l; k++) all = all && t->byte_id[(unsigned char)w[i + k]] >= 0;
            if (all) {
                for (size_t k = 0; k < l; k++) {
                    sym *y = &s->syms[ns];
                    y->id = t->byte_id[(unsigned char)w[i + k]];
                    y->start = (uint32_t)(i + k);
                    y->len = 1;
                    ns++;
                }
                i += l;
                continue;
            }
        }
        if (id < 0) {
            id = t->unk_id;
            if (id < 0) { i += l; continue; } /* no <unk>: the character is dropped */
            if (t->fuse_unk && ns > 0 && s->syms[ns - 1].id == id) {
                s->syms[ns - 1].len += (uint32_t)l;
                i += l;
                continue;
            }
        }
        sym *y = &s->syms[ns++];
        y->id = id;
        y->start = (uint32_t)i;
        y->len = (uint32_t)l;
        i += l;
    }
    for (size_t k = 0; k < ns; k++) {
        s->syms[k].prev = (int32_t)k - 1;
        s->syms[k].next = k + 1 < ns ? (int32_t)k + 1 : -1;
    }
    return (long)ns;
}

static cache_ent *cache_find(session *s, const char *w, size_t n, uint64_t h, bool *found) {
    size_t mask = s->cache_cap - 1, i = (size_t)h & mask;
    for (;;) {
        cache_ent *e = &s->cache[i];
        if (e->hash == 0) { *found = false; return e; }
        if (e->hash == h && e->key_len == n && memcmp(s->cache_keys.p + e->key_off, w, n) == 0) {
            *found = true;
            return e;
        }
        i = (i + 1) & mask;
    }
}

#define CACHE_MAX_WORD 128
#define CACHE_SLOTS 65536

static int bpe_core(session *s, const char *w, size_t n);
static int spm_word(session *s, const char *w, size_t n);

/* Runs the model on one word through the per-call cache of short words. */
static int cached_word(session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    if (n == 0) return COLIBRI_OK;
    if (t->ignore_merges) {
        int32_t id = clb_strmap_get(&t->vocab, t, w, n);
        if (id >= 0) { emit(s, id); return COLIBRI_OK; }
    }
    cache_ent *ce = NULL;
    uint64_t h = 0;
    if (n <= CACHE_MAX_WORD) {
        if (!s->cache) {
            s->cache = clb_calloc(CACHE_SLOTS, sizeof *s->cache);
            if (!s->cache) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
            s->cache_cap = CACHE_SLOTS;
        }
        h = clb_tok_hash(w, n) | 1;
        bool found;
        ce = cache_find(s, w, n, h, &found);
        if (found) {
            for (uint32_t k = 0; k < ce->n_ids; k++) emit(s, s->cache_ids[ce->ids_off + k]);
            return COLIBRI_OK;
        }
        if (s->cache_n * 2 >= s->cache_cap) ce = NULL; /* full: stop caching */
    }
    size_t first = s->n;
    int rc = t->model == CLB_MODEL_SPM ? spm_word(s, w, n) : bpe_core(s, w, n);
    if (rc != COLIBRI_OK) return rc;
    if (ce && s->n <= s->cap) {
        size_t cnt = s->n - first;
        if (grow((void **)&s->cache_ids, &s->cache_ids_cap, s->cache_ids_n + cnt,
                 sizeof *s->cache_ids) != COLIBRI_OK)
            return COLIBRI_ERR_NOMEM;
        size_t ko = s->cache_keys.n;
        if (clb_buf_put(&s->cache_keys, w, n) != COLIBRI_OK) return COLIBRI_ERR_NOMEM;
        if (cnt) memcpy(s->cache_ids + s->cache_ids_n, s->out + first, cnt * sizeof(int32_t));
        ce->hash = h;
        ce->key_off = ko;
        ce->key_len = (uint32_t)n;
        ce->ids_off = (uint32_t)s->cache_ids_n;
        ce->n_ids = (uint32_t)cnt;
        s->cache_ids_n += cnt;
        s->cache_n++;
    }
    return COLIBRI_OK;
}

static int bpe_core(session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    long ns = bpe_init_symbols(s, w, n);
    if (ns < 0) return COLIBRI_ERR_NOMEM;
    s->hn = 0;
    for (long k = 0; k + 1 < ns; k++)
        if (bpe_add_pair(s, (int32_t)k) != COLIBRI_OK) return COLIBRI_ERR_NOMEM;
    while (s->hn) {
        heap_ent e = heap_pop(s);
        sym *l = &s->syms[e.pos];
        if (l->len == 0 || l->id != e.a || l->next < 0) continue;
        sym *r = &s->syms[l->next];
        if (r->id != e.b) continue;
        int32_t rank, res;
        clb_pairmap_get(&t->merges, e.a, e.b, &rank, &res);
        l->id = res;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = e.pos;
        if (bpe_add_pair(s, l->prev) != COLIBRI_OK || bpe_add_pair(s, e.pos) != COLIBRI_OK)
            return COLIBRI_ERR_NOMEM;
    }
    for (int32_t k = ns ? 0 : -1; k >= 0; k = s->syms[k].next) emit(s, s->syms[k].id);
    return COLIBRI_OK;
}

/* ---------------- SentencePiece (merge by score, llama.cpp "llama" vocab) ---------------- */

static int spm_add_pair(session *s, const char *w, int32_t left) {
    if (left < 0) return COLIBRI_OK;
    int32_t right = s->syms[left].next;
    if (right < 0) return COLIBRI_OK;
    const sym *l = &s->syms[left], *r = &s->syms[right];
    uint32_t size = l->len + r->len;
    int32_t id = clb_strmap_get(&s->tok->vocab, s->tok, w + l->start, size);
    if (id < 0) return COLIBRI_OK;
    heap_ent e = {-(double)s->tok->scores[id], left, 0, right, size};
    return heap_push(s, e);
}

static int spm_word(session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    if (n == 0) return COLIBRI_OK;
    if (grow((void **)&s->syms, &s->scap, n + 1, sizeof *s->syms) != COLIBRI_OK)
        return COLIBRI_ERR_NOMEM;
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l = clb_utf8_len((unsigned char)w[i]);
        if (l > n - i) l = n - i;
        sym *y = &s->syms[ns];
        y->start = (uint32_t)i;
        y->len = (uint32_t)l;
        y->prev = ns - 1;
        y->next = i + l < n ? ns + 1 : -1;
        y->id = 0;
        ns++;
        i += l;
    }
    s->hn = 0;
    for (int32_t k = 0; k + 1 < ns; k++)
        if (spm_add_pair(s, w, k) != COLIBRI_OK) return COLIBRI_ERR_NOMEM;
    while (s->hn) {
        heap_ent e = heap_pop(s);
        sym *l = &s->syms[e.pos], *r = &s->syms[e.b];
        if (l->len == 0 || r->len == 0 || l->len + r->len != e.size) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = e.pos;
        if (spm_add_pair(s, w, l->prev) != COLIBRI_OK || spm_add_pair(s, w, e.pos) != COLIBRI_OK)
            return COLIBRI_ERR_NOMEM;
    }
    for (int32_t k = 0; k >= 0; k = s->syms[k].next) {
        const sym *y = &s->syms[k];
        int32_t id = clb_strmap_get(&t->vocab, t, w + y->start, y->len);
        if (id >= 0) { emit(s, id); continue; }
        for (uint32_t b = 0; b < y->len; b++) { /* byte fallback */
            int32_t bid = t->byte_id[(unsigned char)w[y->start + b]];
            emit(s, bid >= 0 ? bid : t->unk_id >= 0 ? t->unk_id : 0);
        }
    }
    return COLIBRI_OK;
}

/* ---------------- normalizers ---------------- */

#define NORM_TOO_BIG 1 /* internal status of normalize_op */

/* Writes the result of op on in to out. The output may not pass limit bytes (checked as it
   grows, so a runaway replacement stops early): returns NORM_TOO_BIG then. */
static int normalize_op(session *s, const clb_norm_op *op, const clb_buf *in, clb_buf *out,
                        size_t limit) {
    out->n = 0;
    int rc = COLIBRI_OK;
#define PUT(src_, len_)                                                                  \
    do {                                                                                 \
        if ((len_) > limit - CLB_MIN(out->n, limit)) return NORM_TOO_BIG;               \
        if ((rc = clb_buf_put(out, (src_), (len_))) != COLIBRI_OK) return rc;            \
    } while (0)
    switch (op->kind) {
    case CLB_N_NFC: case CLB_N_NFKC: case CLB_N_NFD: case CLB_N_NFKD: case CLB_N_LOWER: {
        char *r;
        size_t rl;
        if ((rc = clb_unicode_normalize(op->kind, in->p, in->n, &r, &rl)) != COLIBRI_OK) return rc;
        if (rl > limit) rc = NORM_TOO_BIG;
        else rc = clb_buf_put(out, r, rl);
        clb_free(r);
        return rc;
    }
    case CLB_N_PREPEND:
        if (in->n) PUT(op->a, op->alen);
        PUT(in->p, in->n);
        return COLIBRI_OK;
    case CLB_N_REPLACE: {
        size_t i = 0, last = 0;
        if (!op->alen) { PUT(in->p, in->n); return COLIBRI_OK; }
        while (i + op->alen <= in->n) {
            if (memcmp(in->p + i, op->a, op->alen) == 0) {
                PUT(in->p + last, i - last);
                PUT(op->b, op->blen);
                i += op->alen;
                last = i;
            } else {
                i++;
            }
        }
        PUT(in->p + last, in->n - last);
        return COLIBRI_OK;
    }
    case CLB_N_REPLACE_RE: {
        size_t pos = 0, last = 0;
        while (pos <= in->n) {
            int m = pcre2_match(op->re, (PCRE2_SPTR)in->p, in->n, pos, 0, s->md, NULL);
            if (m < 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            if (ov[1] == ov[0]) { pos = ov[0] + 1; continue; }
            PUT(in->p + last, ov[0] - last);
            PUT(op->b, op->blen);
            last = pos = ov[1];
        }
        PUT(in->p + last, in->n - last);
        return COLIBRI_OK;
    }
    case CLB_N_STRIP: {
        size_t a = 0, b = in->n;
        if (op->left) while (a < b && (in->p[a] == ' ' || (in->p[a] >= '\t' && in->p[a] <= '\r'))) a++;
        if (op->right) while (b > a && (in->p[b - 1] == ' ' || (in->p[b - 1] >= '\t' && in->p[b - 1] <= '\r'))) b--;
        PUT(in->p + a, b - a);
        return COLIBRI_OK;
    }
    default:
        return clb_err(COLIBRI_ERR_INTERNAL, "tokenizer: unknown normalizer %d", op->kind);
    }
#undef PUT
}

static const char *norm_name(int kind) {
    static const char *const names[] = {"?", "NFC", "NFKC", "NFD", "NFKD", "Lowercase", "Prepend",
                                        "Replace", "Replace", "Strip"};
    return kind > 0 && kind < (int)CLB_ARRAY_LEN(names) ? names[kind] : "?";
}

/* Runs the normalizers over s->work. Normalizers can grow text (NFKD turns one character into
   up to 18, a Replace can map one byte to many), and a chain of them multiplies: each one may
   give at most CLB_NORM_GROWTH x its input + CLB_NORM_EXTRA bytes, and the chain at most
   that much of the original text. */
static int normalize(session *s) {
    const clb_tokenizer *t = s->tok;
    size_t orig = s->work.n;
    size_t total_limit = orig > (SIZE_MAX - CLB_NORM_EXTRA) / CLB_NORM_GROWTH
                             ? SIZE_MAX : orig * CLB_NORM_GROWTH + CLB_NORM_EXTRA;
    clb_buf tmp = {0};
    int rc = COLIBRI_OK;
    for (int i = 0; i < t->n_norm && rc == COLIBRI_OK; i++) {
        size_t in = s->work.n;
        size_t step_limit = in > (SIZE_MAX - CLB_NORM_EXTRA) / CLB_NORM_GROWTH
                                ? SIZE_MAX : in * CLB_NORM_GROWTH + CLB_NORM_EXTRA;
        bool total = total_limit < step_limit;
        rc = normalize_op(s, &t->norm[i], &s->work, &tmp, total ? total_limit : step_limit);
        if (rc == NORM_TOO_BIG && total)
            rc = clb_err(COLIBRI_ERR_FORMAT, "tokenizer: the normalizers grow %zu bytes of text past "
                         "%zu bytes (at normalizer %d, %s): the limit for the chain is %d x the text + %d",
                         orig, total_limit, i + 1, norm_name(t->norm[i].kind), CLB_NORM_GROWTH,
                         CLB_NORM_EXTRA);
        else if (rc == NORM_TOO_BIG)
            rc = clb_err(COLIBRI_ERR_FORMAT, "tokenizer: normalizer %d (%s) grows %zu bytes of text "
                         "past %zu bytes: the limit for one normalizer is %d x its input + %d", i + 1,
                         norm_name(t->norm[i].kind), in, step_limit, CLB_NORM_GROWTH, CLB_NORM_EXTRA);
        clb_buf x = s->work;
        s->work = tmp;
        tmp = x;
    }
    clb_buf_free(&tmp);
    return rc;
}

/* ---------------- pre-tokenizers ---------------- */

static int push_next(session *s, size_t off, size_t len) {
    if (len == 0) return COLIBRI_OK;
    if (grow((void **)&s->next, &s->ncap, s->nn + 1, sizeof *s->next) != COLIBRI_OK)
        return COLIBRI_ERR_NOMEM;
    s->next[s->nn].off = off;
    s->next[s->nn].len = len;
    s->nn++;
    return COLIBRI_OK;
}

static void swap_lists(session *s) {
    span *p = s->pieces;
    size_t c = s->pcap;
    s->pieces = s->next;
    s->pcap = s->ncap;
    s->np = s->nn;
    s->next = p;
    s->ncap = c;
    s->nn = 0;
}

/* Splits one piece by a regex following Hugging Face's SplitDelimiterBehavior: the piece is cut
   into (gap, match) segments, then the behavior decides what becomes a piece. */
static int split_piece(session *s, const clb_pre_op *op, span p) {
    const char *base = s->work.p + p.off;
    size_t pos = 0, gap = 0;
    s->nseg = 0;
    for (;;) {
        size_t ms = p.len, me = p.len;
        bool found = false;
        while (pos < p.len) {
            int m = pcre2_match(op->re, (PCRE2_SPTR)base, p.len, pos, 0, s->md, NULL);
            if (m < 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            if (ov[1] == ov[0]) { /* skip empty matches */
                pos = ov[0] + clb_utf8_len((unsigned char)base[ov[0]]);
                continue;
            }
            ms = ov[0];
            me = ov[1];
            found = true;
            break;
        }
        if (grow((void **)&s->segs, &s->segcap, s->nseg + 2, sizeof *s->segs) != COLIBRI_OK)
            return COLIBRI_ERR_NOMEM;
        if (ms > gap) s->segs[s->nseg++] = (seg){gap, ms, op->invert};
        if (!found) break;
        s->segs[s->nseg++] = (seg){ms, me, !op->invert};
        gap = pos = me;
    }
    size_t first = s->nn;
    bool prev = false;
    int rc = COLIBRI_OK;
    switch (op->behavior) {
    case CLB_SPLIT_REMOVED:
        for (size_t i = 0; i < s->nseg && rc == COLIBRI_OK; i++)
            if (!s->segs[i].m) rc = push_next(s, p.off + s->segs[i].a, s->segs[i].b - s->segs[i].a);
        break;
    case CLB_SPLIT_ISOLATED:
        for (size_t i = 0; i < s->nseg && rc == COLIBRI_OK; i++)
            rc = push_next(s, p.off + s->segs[i].a, s->segs[i].b - s->segs[i].a);
        break;
    case CLB_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < s->nseg && rc == COLIBRI_OK; i++) {
            const seg *g = &s->segs[i];
            if (g->m && !prev && s->nn > first) s->next[s->nn - 1].len += g->b - g->a;
            else rc = push_next(s, p.off + g->a, g->b - g->a);
            prev = g->m;
        }
        break;
    case CLB_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < s->nseg && rc == COLIBRI_OK; i++) {
            const seg *g = &s->segs[i];
            if (g->m == prev && s->nn > first) s->next[s->nn - 1].len += g->b - g->a;
            else rc = push_next(s, p.off + g->a, g->b - g->a);
            prev = g->m;
        }
        break;
    case CLB_SPLIT_MERGED_NEXT: /* walk backwards: a delimiter joins the text after it */
        for (size_t i = s->nseg; i-- > 0 && rc == COLIBRI_OK;) {
            const seg *g = &s->segs[i];
            if (g->m && !prev && s->nn > first) {
                s->next[s->nn - 1].off = p.off + g->a;
                s->next[s->nn - 1].len += g->b - g->a;
            } else {
                rc = push_next(s, p.off + g->a, g->b - g->a);
            }
            prev = g->m;
        }
        for (size_t i = first, j = s->nn; i + 1 < j; i++, j--) { /* restore the order */
            span x = s->next[i];
            s->next[i] = s->next[j - 1];
            s->next[j - 1] = x;
        }
        break;
    }
    return rc;
}

static int pre_op(session *s, const clb_pre_op *op) {
    s->nn = 0;
    int rc = COLIBRI_OK;
    for (size_t i = 0; i < s->np && rc == COLIBRI_OK; i++) {
        span p = s->pieces[i];
        if (op->kind == CLB_P_SPLIT) {
            rc = split_piece(s, op, p);
        } else if (op->kind == CLB_P_PREFIX_SPACE) {
            if (s->work.p[p.off] == ' ') { rc = push_next(s, p.off, p.len); continue; }
            size_t o = s->work.n;
            if ((rc = clb_buf_put(&s->work, NULL, p.len + 1)) != COLIBRI_OK) break;
            s->work.p[o] = ' ';
            memcpy(s->work.p + o + 1, s->work.p + p.off, p.len); /* after the grow */
            rc = push_next(s, o, p.len + 1);
        } else { /* METASPACE: spaces -> replacement, optional prefix, split before each */
            size_t o = s->work.n;
            bool pre = op->prepend == 1 || (op->prepend == 2 && i == 0 && s->at_text_start);
            if (pre && !(p.len >= op->repl_len &&
                         memcmp(s->work.p + p.off, op->repl, op->repl_len) == 0))
                if ((rc = clb_buf_put(&s->work, op->repl, op->repl_len)) != COLIBRI_OK) break;
            for (size_t k = 0; k < p.len && rc == COLIBRI_OK; k++) {
                char c = s->work.p[p.off + k];
                rc = c == ' ' ? clb_buf_put(&s->work, op->repl, op->repl_len)
                              : clb_buf_put(&s->work, &c, 1);
            }
            if (rc != COLIBRI_OK) break;
            size_t end = s->work.n, start = o;
            if (op->split) { /* MergedWithNext on the replacement */
                for (size_t k = o + 1; k + op->repl_len <= end; k++)
                    if (memcmp(s->work.p + k, op->repl, op->repl_len) == 0) {
                        if ((rc = push_next(s, start, k - start)) != COLIBRI_OK) break;
                        start = k;
                    }
            }
            if (rc == COLIBRI_OK) rc = push_next(s, start, end - start);
        }
    }
    if (rc == COLIBRI_OK) swap_lists(s);
    return rc;
}

/* Runs the model over a piece; a long piece of a non-byte-level model is first cut between
   characters no token contains together (exact: no merge can span such a cut). */
#define LONG_PIECE 256
static int model_piece(session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    bool spm = t->model == CLB_MODEL_SPM;
    if (n <= LONG_PIECE || !t->char_pairs.keys) return cached_word(s, w, n);
    size_t start = 0, i = 0;
    uint32_t prev = 0;
    bool prev_ok = false;
    while (i < n) {
        size_t l = clb_utf8_len((unsigned char)w[i]);
        if (l > n - i) l = n - i;
        uint32_t c = clb_char_code(w + i, l);
        /* BPE: both characters must be plain vocabulary symbols (no byte fallback / unk) */
        bool ok = spm || (c < 128 ? t->ascii_id[c] >= 0 : clb_strmap_get(&t->vocab, t, w + i, l) >= 0);
        int32_t r0, r1;
        bool joined = c < 128 && prev < 128
                          ? (t->ascii_pairs[(prev * 128 + c) / 8] >> (c % 8)) & 1
                          : clb_pairmap_get(&t->char_pairs, (int32_t)prev, (int32_t)c, &r0, &r1);
        if (i > start && prev_ok && ok && !joined) {
            int rc = cached_word(s, w + start, i - start);
            if (rc != COLIBRI_OK) return rc;
            start = i;
        }
        prev = c;
        prev_ok = ok;
        i += l;
    }
    return cached_word(s, w + start, n - start);
}

static int encode_segment(session *s, const char *text, size_t len) {
    const clb_tokenizer *t = s->tok;
    int rc;
    if (len == 0) return COLIBRI_OK;
    s->work.n = 0;
    if ((rc = clb_buf_put(&s->work, text, len)) != COLIBRI_OK) return rc;
    if (t->n_norm && (rc = normalize(s)) != COLIBRI_OK) return rc;
    if (s->work.n == 0) return COLIBRI_OK;
    if (t->model == CLB_MODEL_SPM) return model_piece(s, s->work.p, s->work.n);
    s->np = 0;
    if (grow((void **)&s->pieces, &s->pcap, 1, sizeof *s->pieces) != COLIBRI_OK)
        return COLIBRI_ERR_NOMEM;
    s->pieces[0].off = 0;
    s->pieces[0].len = s->work.n;
    s->np = 1;
    for (int i = 0; i < t->n_pre; i++)
        if ((rc = pre_op(s, &t->pre[i])) != COLIBRI_OK) return rc;
    for (size_t i = 0; i < s->np; i++)
        if ((rc = model_piece(s, s->work.p + s->pieces[i].off, s->pieces[i].len)) != COLIBRI_OK)
            return rc;
    return COLIBRI_OK;
}

/* ---------------- added tokens ---------------- */

static bool is_word_byte(unsigned char c) {
    return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

static bool is_space_byte(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Finds the leftmost-longest enabled added token in text[from, len). Returns its index into
   tok->added or -1; *start and *end receive the span including lstrip/rstrip whitespace. */
static int find_added(const clb_tokenizer *t, const char *text, size_t len, size_t from,
                      bool parse_special, size_t *start, size_t *end) {
    for (size_t i = from; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!t->added_first[c]) continue;
        for (int k = 0; k < t->n_added; k++) {
            const clb_added_tok *a = &t->added[k];
            if ((unsigned char)a->content[0] != c) continue;
            if (a->special && !parse_special) continue;
            if (a->len > len - i || memcmp(text + i, a->content, a->len) != 0) continue;
            size_t e = i + a->len;
            if (a->single_word && ((i > 0 && is_word_byte((unsigned char)text[i - 1])) ||
                                   (e < len && is_word_byte((unsigned char)text[e]))))
                continue;
            size_t st = i;
            if (a->lstrip) while (st > from && is_space_byte(text[st - 1])) st--;
            if (a->rstrip) while (e < len && is_space_byte(text[e])) e++;
            *start = st;
            *end = e;
            return k; /* sorted longest first within a first byte */
        }
    }
    return -1;
}

static void session_free(session *s) {
    clb_buf_free(&s->work);
    clb_free(s->pieces);
    clb_free(s->next);
    clb_free(s->segs);
    clb_free(s->syms);
    clb_free(s->heap);
    clb_free(s->cache);
    clb_buf_free(&s->cache_keys);
    clb_free(s->cache_ids);
    if (s->md) pcre2_match_data_free(s->md);
}

int clb_tok_encode(const clb_tokenizer *t, const char *text, size_t len, bool add_special,
                   bool parse_special, int32_t *out, size_t cap, size_t *n_out) {
    session s;
    memset(&s, 0, sizeof s);
    s.tok = t;
    s.out = out;
    s.cap = out ? cap : 0;
    s.md = pcre2_match_data_create(4, NULL);
    if (!s.md) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    int rc = COLIBRI_OK;
    int n_t = add_special ? t->n_tmpl : 1;
    for (int ti = 0; ti < n_t && rc == COLIBRI_OK; ti++) {
        if (add_special && t->tmpl[ti] != CLB_TMPL_SEQ) { emit(&s, t->tmpl[ti]); continue; }
        size_t pos = 0;
        while (pos < len && rc == COLIBRI_OK) {
            size_t st = len, en = len;
            int k = t->n_added ? find_added(t, text, len, pos, parse_special, &st, &en) : -1;
            s.at_text_start = pos == 0;
            rc = encode_segment(&s, text + pos, (k >= 0 ? st : len) - pos);
            if (k < 0 || rc != COLIBRI_OK) break;
            emit(&s, t->added[k].id);
            pos = en;
        }
    }
    if (n_out) *n_out = s.n;
    if (rc == COLIBRI_OK && out && s.n > cap)
        rc = clb_err(COLIBRI_ERR_ARG, "tokenize: %zu ids do not fit in a buffer of %zu", s.n, cap);
    session_free(&s);
    return rc;
}

int clb_tokenize(const clb_tokenizer *tok, const char *text, size_t len, bool add_special,
                 bool parse_special, int32_t *out, size_t cap, size_t *n_out) {
    if (!tok || (!text && len) || !n_out)
        return clb_err(COLIBRI_ERR_ARG, "tokenize: NULL tokenizer, text or n_out");
    return clb_tok_encode(tok, text ? text : "", len, add_special, parse_special, out, cap, n_out);
}
