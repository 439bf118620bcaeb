/* tok_models.c — the vocabulary models beside BPE: WordPiece, WordLevel and Unigram as
 * Hugging Face `tokenizers` runs them, and the two llama.cpp GGUF vocabularies built on them,
 * "bert" (WPM: its own lowercasing/splitting, then greedy longest match on "▁"-prefixed
 * words) and "t5" (UGM: SentencePiece normalization with the precompiled charsmap, then the
 * Unigram best path over the whole segment). The facts follow tokenizers' models/ (Rust) and
 * llama.cpp's llama-vocab.cpp; the code is ours.
 *
 * Unigram needs every vocabulary token that is a prefix of the text at a position: tokens
 * are kept sorted by their bytes (tok->sorted), and the range of tokens sharing the prefix
 * read so far narrows by two binary searches per byte. */
#include <string.h>

#include <utf8proc.h>

#include "text/tok_session.h"

static const char *tok_str(const clb_tokenizer *t, int32_t id) { return t->pool.p + t->off[id]; }

static int no_unk(const clb_tokenizer *t, const char *w, size_t n) {
    (void)t;
    return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: \"%.*s\" is not in the vocabulary and the model has no "
                   "unk_token", (int)CLB_MIN(n, 40), w);
}

/* ---------------- WordPiece ---------------- */

int clb_wordpiece_word(clb_session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    size_t chars = 0;
    for (size_t i = 0; i < n; i += clb_utf8_len((unsigned char)w[i])) chars++;
    size_t first = s->n;
    size_t pl = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    bool bad = chars > (size_t)t->max_chars;
    for (size_t start = 0; start < n && !bad;) {
        size_t end = n;
        int32_t found = -1;
        while (start < end) {
            s->key.n = 0;
            if ((start && pl && clb_buf_put(&s->key, t->cont_prefix, pl) != COLIBRI_OK) ||
                clb_buf_put(&s->key, w + start, end - start) != COLIBRI_OK)
                return COLIBRI_ERR_NOMEM;
            if ((found = clb_strmap_get(&t->vocab, t, s->key.p, s->key.n)) >= 0) break;
            do end--; while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80); /* one char back */
        }
        if (found < 0) bad = true;
        else clb_emit(s, found);
        start = end;
    }
    if (bad) {
        s->n = first;
        if (t->unk_id < 0) return no_unk(t, w, n);
        clb_emit(s, t->unk_id);
    }
    return COLIBRI_OK;
}

/* ---------------- WordLevel ---------------- */

int clb_wordlevel_word(clb_session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    int32_t id = clb_strmap_get(&t->vocab, t, w, n);
    if (id < 0) id = t->unk_id;
    if (id < 0) return no_unk(t, w, n);
    clb_emit(s, id);
    return COLIBRI_OK;
}

/* ---------------- Unigram ---------------- */

/* [lo, hi) of tok->sorted: the tokens whose byte at depth d is c (all are longer than d). */
static void narrow(const clb_tokenizer *t, size_t *lo, size_t *hi, size_t d, unsigned char c) {
    size_t a = *lo, b = *hi;
    while (a < b) { /* first with byte >= c */
        size_t m = a + (b - a) / 2;
        if ((unsigned char)tok_str(t, t->sorted[m])[d] < c) a = m + 1;
        else b = m;
    }
    size_t e = a, f = *hi;
    while (e < f) { /* first with byte > c */
        size_t m = e + (f - e) / 2;
        if ((unsigned char)tok_str(t, t->sorted[m])[d] <= c) e = m + 1;
        else f = m;
    }
    *lo = a;
    *hi = e;
}

static double score_of(const clb_tokenizer *t, int32_t id) {
    if (t->model == CLB_MODEL_UGM && (t->attr[id] & CLB_TA_USER_DEFINED)) return 0.0;
    return t->dscores[id];
}

/* The best segmentation of w[0, n) into tokens (and unknown characters); ids emitted in
   order, consecutive unknowns fused into one (both implementations do). */
static int unigram_path(clb_session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    bool llama = t->model == CLB_MODEL_UGM;
    if (n == 0) return COLIBRI_OK;
    if (n >= INT32_MAX) return clb_err(COLIBRI_ERR_ARG, "tokenizer: a word of %zu bytes is too long", n);
    if (clb_grow((void **)&s->vit, &s->vitcap, n + 1, sizeof *s->vit) != COLIBRI_OK) return COLIBRI_ERR_NOMEM;
    clb_vit *v = s->vit;
    for (size_t i = 0; i <= n; i++) v[i] = (clb_vit){0.0, -1, -1};
    v[0].start = 0;
    v[0].score = 0;
    for (size_t pos = 0; pos < n;) {
        size_t mb = clb_utf8_len((unsigned char)w[pos]);
        if (mb > n - pos) mb = n - pos;
        double base = v[pos].score;
        bool single = false;
        size_t lo = 0, hi = (size_t)t->n_sorted;
        for (size_t d = 0; pos + d < n && lo < hi; d++) {
            if (lo < hi && t->len[t->sorted[lo]] == d) lo++; /* the token equal to the prefix so far */
            narrow(t, &lo, &hi, d, (unsigned char)w[pos + d]);
            if (lo >= hi) break;
            int32_t id = t->sorted[lo];
            if (t->len[id] != d + 1) continue;
            double cand = base + score_of(t, id);
            clb_vit *tg = &v[pos + d + 1];
            if (tg->start < 0 || cand > tg->score) /* llama.cpp: the path sums are floats */
                *tg = (clb_vit){llama ? (double)(float)cand : cand, (int32_t)pos, id};
            if (d + 1 == mb) single = true;
        }
        if (!single) {
            double cand = base + t->unk_score;
            clb_vit *tg = &v[pos + mb];
            if (tg->start < 0 || cand > tg->score) {
                if (t->unk_id < 0) return no_unk(t, w + pos, mb);
                *tg = (clb_vit){llama ? (double)(float)cand : cand, (int32_t)pos, t->unk_id};
            }
        }
        pos += mb;
    }
    /* the path, from the end back (syms as scratch: start, len, id) */
    size_t cnt = 0;
    for (size_t end = n; end > 0;) {
        size_t st = (size_t)v[end].start;
        if (v[end].start < 0 || st >= end) return clb_err(COLIBRI_ERR_INTERNAL, "tokenizer: broken Unigram path");
        if (clb_grow((void **)&s->syms, &s->scap, cnt + 1, sizeof *s->syms) != COLIBRI_OK) return COLIBRI_ERR_NOMEM;
        s->syms[cnt++] = (clb_sym){v[end].id, 0, 0, (uint32_t)st, (uint32_t)(end - st)};
        end = st;
    }
    for (size_t i = cnt; i-- > 0;) {
        const clb_sym *y = &s->syms[i];
        if (y->id != t->unk_id || t->unk_id < 0) { clb_emit(s, y->id); continue; }
        size_t st = y->start, end = (size_t)y->start + y->len; /* fuse a run of unknowns */
        while (i > 0 && s->syms[i - 1].id == t->unk_id) {
            i--;
            end = (size_t)s->syms[i].start + s->syms[i].len;
        }
        if (!llama) { /* tokenizers looks the fused text up, then byte fallback, then <unk> */
            int32_t fid = clb_strmap_get(&t->vocab, t, w + st, end - st);
            if (fid >= 0) { clb_emit(s, fid); continue; }
            if (t->byte_fallback) {
                bool all = true;
                for (size_t k = st; k < end; k++) all = all && t->byte_id[(unsigned char)w[k]] >= 0;
                if (all) {
                    for (size_t k = st; k < end; k++) clb_emit(s, t->byte_id[(unsigned char)w[k]]);
                    continue;
                }
            }
        }
        clb_emit(s, t->unk_id);
    }
    return COLIBRI_OK;
}

int clb_unigram_word(clb_session *s, const char *w, size_t n) { return unigram_path(s, w, n); }

/* ---------------- llama.cpp "t5" (UGM) ---------------- */

/* The longest user-defined token at s[0, n), 0 if none (kept as it is by the normalizer). */
static size_t user_defined_prefix(const clb_tokenizer *t, const char *s, size_t n) {
    size_t best = 0;
    for (int k = 0; k < t->n_added; k++) {
        const clb_added_tok *a = &t->added[k];
        if (!(t->attr[a->id] & CLB_TA_USER_DEFINED) || a->len > n || a->len <= best) continue;
        if (memcmp(s, a->content, a->len) == 0) best = a->len;
    }
    return best;
}

int clb_ugm_segment(clb_session *s, const char *in, size_t len) {
    const clb_tokenizer *t = s->tok;
    const char *space = t->ugm_escape_ws ? "\xe2\x96\x81" : " ";
    size_t sl = strlen(space);
    bool prepend = !t->ugm_ws_suffix && t->ugm_add_prefix, append = t->ugm_ws_suffix && t->ugm_add_prefix;
    bool merge = t->ugm_merge_spaces, prepended = false, in_word = false;
    clb_buf *o = &s->work;
    o->n = 0;
    int rc = COLIBRI_OK;
    for (size_t i = 0; i < len && rc == COLIBRI_OK;) {
        const char *r;
        size_t rl, used = user_defined_prefix(t, in + i, len - i);
        if (used) {
            r = in + i;
            rl = used;
        } else if ((used = clb_charsmap_spm_prefix(&t->charsmap, in + i, len - i, &r, &rl)) == 0) {
            used = rl = clb_utf8_valid_char((const unsigned char *)in + i, len - i);
            r = in + i;
            if (!used) { r = "\xef\xbf\xbd"; rl = 3; used = 1; }
        }
        for (size_t k = 0; k < rl && rc == COLIBRI_OK; k++) {
            if (r[k] != ' ') {
                if (!in_word) {
                    in_word = true;
                    if ((prepend && !prepended) || merge) {
                        rc = clb_buf_put(o, space, sl);
                        prepended = true;
                    }
                }
                if (rc == COLIBRI_OK) rc = clb_buf_put(o, r + k, 1);
            } else {
                in_word = false;
                if (!merge) rc = clb_buf_put(o, space, sl);
            }
        }
        i += used;
        if (o->n > len * CLB_NORM_GROWTH + CLB_NORM_EXTRA)
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: the precompiled charsmap grows %zu bytes of text past "
                           "%zu bytes: the limit is %d x the text + %d", len, o->n, CLB_NORM_GROWTH, CLB_NORM_EXTRA);
    }
    if (rc == COLIBRI_OK && append) rc = clb_buf_put(o, space, sl);
    if (rc != COLIBRI_OK) return rc;
    return unigram_path(s, o->p, o->n);
}

/* ---------------- llama.cpp "bert" (WPM) ---------------- */

static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* The first code point of c's canonical decomposition (llama.cpp's one-to-one "NFD"). */
static uint32_t nfd_first(uint32_t c) {
    utf8proc_int32_t d[8];
    int opt = 0;
    utf8proc_ssize_t r = utf8proc_decompose_char((utf8proc_int32_t)c, d, 8, UTF8PROC_DECOMPOSE, &opt);
    return r > 0 ? (uint32_t)d[0] : c;
}

/* Greedy longest match of "▁" + word; the whole word is one unknown when some position
   matches nothing. */
static int wpm_word(clb_session *s, const char *w, size_t n) {
    const clb_tokenizer *t = s->tok;
    size_t first = s->n;
    for (size_t i = 0; i < n;) {
        size_t j = CLB_MIN(n, i + t->max_token_len);
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = clb_strmap_get(&t->vocab, t, w + i, j - i)) >= 0) break;
        if (id < 0) { s->n = first; break; }
        clb_emit(s, id);
        i = j;
    }
    if (s->n == first) clb_emit(s, t->unk_id >= 0 ? t->unk_id : 0);
    return COLIBRI_OK;
}

int clb_wpm_segment(clb_session *s, const char *in, size_t len) {
    clb_buf *o = &s->work;
    o->n = 0;
    int rc = clb_buf_put(o, "\xe2\x96\x81", 3);
    size_t word = 0; /* start of the current word in o */
    for (size_t i = 0; i < len && rc == COLIBRI_OK;) {
        utf8proc_int32_t c0;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)in + i, (utf8proc_ssize_t)(len - i), &c0);
        if (l <= 0) { i++; continue; } /* invalid: U+FFFD, which is dropped */
        i += (size_t)l;
        uint32_t c = nfd_first((uint32_t)c0);
        const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)c);
        int cat = pr->category;
        bool ws = c == 9 || c == 10 || c == 11 || c == 12 || c == 13 || c == 0x85 || cat == UTF8PROC_CATEGORY_ZS ||
                  c == 0x2028 || c == 0x2029;
        bool ctrl = cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CS ||
                    cat == UTF8PROC_CATEGORY_CO;
        bool punct = cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
        bool sym = cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO;
        if (ws || (!ws && (c == 0 || c == 0xFFFD || ctrl))) {
            if (ws && o->n > word + 3) { /* end the word */
                if ((rc = wpm_word(s, o->p + word, o->n - word)) != COLIBRI_OK) return rc;
                o->n = word + 3;
            }
            continue;
        }
        utf8proc_uint8_t u[4];
        utf8proc_ssize_t ul = utf8proc_encode_char(utf8proc_tolower((utf8proc_int32_t)c), u);
        if (punct || (c < 0x7F && sym) || is_chinese(c)) { /* a word of its own */
            if (o->n > word + 3 && (rc = wpm_word(s, o->p + word, o->n - word)) != COLIBRI_OK) return rc;
            o->n = word + 3;
            if ((rc = clb_buf_put(o, u, (size_t)ul)) != COLIBRI_OK) return rc;
            if ((rc = wpm_word(s, o->p + word, o->n - word)) != COLIBRI_OK) return rc;
            o->n = word + 3;
        } else {
            rc = clb_buf_put(o, u, (size_t)ul);
        }
    }
    if (rc == COLIBRI_OK && o->n > word + 3) rc = wpm_word(s, o->p + word, o->n - word);
    return rc;
}
