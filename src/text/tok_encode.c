/* tok_encode.c — text -> ids: the pipeline, the pre-tokenizers, and the two merge models
 * (BPE over merge ranks, SentencePiece merge-by-score). Normalizers are in tok_normalize.c,
 * added-token matching in tok_added.c, WordPiece/WordLevel/Unigram in tok_models.c.
 *
 * Pipeline per call:  text -> split around added tokens -> for each plain segment:
 *   normalize -> pre-tokenize into pieces -> model(piece) -> ids;  post-processor template
 *   around it when add_special.
 * Both models merge adjacent symbols through a binary heap with lazy invalidation, so a long
 * piece costs O(n log n). BPE results of short pieces are cached for the duration of a call. */
#include <string.h>

#include "text/tok_session.h"

typedef clb_session session;
typedef clb_span span;
typedef clb_seg seg;
typedef clb_sym sym;
typedef clb_heap_ent heap_ent;
typedef clb_cache_ent cache_ent;
#define emit clb_emit
#define grow clb_grow

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
    int rc;
    switch (t->model) {
    case CLB_MODEL_SPM: rc = spm_word(s, w, n); break;
    case CLB_MODEL_WORDPIECE: rc = clb_wordpiece_word(s, w, n); break;
    case CLB_MODEL_WORDLEVEL: rc = clb_wordlevel_word(s, w, n); break;
    case CLB_MODEL_UNIGRAM: rc = clb_unigram_word(s, w, n); break;
    default: rc = bpe_core(s, w, n); break;
    }
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
            if (pre && s->work.p[p.off] != ' ' &&
                !(p.len >= op->repl_len && memcmp(s->work.p + p.off, op->repl, op->repl_len) == 0))
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

/* Pre-tokenizes work[off, off + len) and runs the model over the pieces. */
static int encode_normalized(session *s, size_t off, size_t len) {
    const clb_tokenizer *t = s->tok;
    int rc;
    if (len == 0) return COLIBRI_OK;
    if (t->model == CLB_MODEL_SPM) return model_piece(s, s->work.p + off, len);
    if (grow((void **)&s->pieces, &s->pcap, 1, sizeof *s->pieces) != COLIBRI_OK) return COLIBRI_ERR_NOMEM;
    s->pieces[0].off = off;
    s->pieces[0].len = len;
    s->np = 1;
    for (int i = 0; i < t->n_pre; i++)
        if ((rc = pre_op(s, &t->pre[i])) != COLIBRI_OK) return rc;
    for (size_t i = 0; i < s->np; i++)
        if ((rc = model_piece(s, s->work.p + s->pieces[i].off, s->pieces[i].len)) != COLIBRI_OK) return rc;
    return COLIBRI_OK;
}

/* text[0, len) holds no raw-matched added token: normalize it, split it on the added tokens
   matched after normalization, encode the rest. */
static int encode_segment(session *s, const char *text, size_t len) {
    const clb_tokenizer *t = s->tok;
    int rc;
    if (len == 0) return COLIBRI_OK;
    if (t->model == CLB_MODEL_WPM) return clb_wpm_segment(s, text, len);
    if (t->model == CLB_MODEL_UGM) return clb_ugm_segment(s, text, len);
    s->work.n = 0;
    if ((rc = clb_buf_put(&s->work, text, len)) != COLIBRI_OK) return rc;
    if (t->n_norm && (rc = clb_tok_normalize(s)) != COLIBRI_OK) return rc;
    size_t n = s->work.n, pos = 0;
    while (t->n_norm_added && pos < n) {
        size_t st, en;
        int k = clb_find_added(s, s->work.p, n, pos, true, &st, &en);
        if (k < 0) break;
        if ((rc = encode_normalized(s, pos, st - pos)) != COLIBRI_OK) return rc;
        emit(s, t->added[k].id);
        s->at_text_start = false;
        pos = en;
    }
    return encode_normalized(s, pos, n - pos);
}

static void session_free(session *s) {
    clb_buf_free(&s->work);
    clb_buf_free(&s->norm_tmp);
    clb_buf_free(&s->key);
    clb_free(s->pieces);
    clb_free(s->next);
    clb_free(s->segs);
    clb_free(s->syms);
    clb_free(s->heap);
    clb_free(s->vit);
    clb_free(s->cache);
    clb_buf_free(&s->cache_keys);
    clb_free(s->cache_ids);
    if (s->md) pcre2_match_data_free(s->md);
}

int clb_tok_encode(const clb_tokenizer *t, const char *text, size_t len, bool add_special,
                   bool parse_special, const size_t *plain, size_t n_plain, int32_t *out, size_t cap,
                   size_t *n_out) {
    session s;
    memset(&s, 0, sizeof s);
    s.tok = t;
    s.out = out;
    s.cap = out ? cap : 0;
    s.parse_special = parse_special;
    s.plain = plain;
    s.n_plain = n_plain;
    s.md = pcre2_match_data_create(4, NULL);
    if (!s.md) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    int rc = COLIBRI_OK;
    int n_t = add_special ? t->n_tmpl : 1;
    for (int ti = 0; ti < n_t && rc == COLIBRI_OK; ti++) {
        if (add_special && t->tmpl[ti] != CLB_TMPL_SEQ) { emit(&s, t->tmpl[ti]); continue; }
        size_t pos = 0;
        while (pos < len && rc == COLIBRI_OK) {
            size_t st = len, en = len;
            int k = t->n_raw_added ? clb_find_added(&s, text, len, pos, false, &st, &en) : -1;
            s.at_text_start = pos == 0;
            s.seg_off = pos;
            s.seg_len = (k >= 0 ? st : len) - pos;
            rc = encode_segment(&s, text + pos, s.seg_len);
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
    return clb_tokenize_plain(tok, text, len, add_special, parse_special, NULL, 0, out, cap, n_out);
}

int clb_tokenize_plain(const clb_tokenizer *tok, const char *text, size_t len, bool add_special,
                       bool parse_special, const size_t *plain, size_t n_plain, int32_t *out, size_t cap,
                       size_t *n_out) {
    if (!tok || (!text && len) || !n_out || (!plain && n_plain))
        return clb_err(COLIBRI_ERR_ARG, "tokenize: NULL tokenizer, text, spans or n_out");
    return clb_tok_encode(tok, text ? text : "", len, add_special, parse_special, plain, n_plain, out, cap, n_out);
}
