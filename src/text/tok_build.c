/* tok_build.c — constructing and freeing a tokenizer, shared by the HF and GGUF loaders,
   plus the small accessors of tokenizer.h. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

clb_tokenizer *clb_tok_alloc(int32_t n_vocab) {
    if (n_vocab <= 0 || n_vocab > (1 << 30)) {
        clb_err(COLIBRI_ERR_FORMAT, "tokenizer: bad vocabulary size %d", (int)n_vocab);
        return NULL;
    }
    clb_tokenizer *t = clb_calloc(1, sizeof *t);
    if (!t) goto oom;
    t->n_vocab = n_vocab;
    size_t n = (size_t)n_vocab;
    t->off = clb_calloc(n, sizeof *t->off);
    t->len = clb_calloc(n, sizeof *t->len);
    t->foff = clb_calloc(n, sizeof *t->foff);
    t->flen = clb_calloc(n, sizeof *t->flen);
    t->poff = clb_calloc(n, sizeof *t->poff);
    t->plen = clb_calloc(n, sizeof *t->plen);
    t->attr = clb_calloc(n, sizeof *t->attr);
    if (!t->off || !t->len || !t->foff || !t->flen || !t->poff || !t->plen || !t->attr) goto oom;
    /* offset 0 of the pool is an empty string: ids without a string point there */
    if (clb_buf_put(&t->pool, "", 1) != COLIBRI_OK) goto oom;
    t->unk_id = t->bos_id = t->eos_id = t->pad_id = -1;
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    return t;
oom:
    clb_tokenizer_free(t);
    clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    return NULL;
}

int clb_tok_set_token(clb_tokenizer *tok, int32_t id, const char *s, size_t n) {
    if (id < 0 || id >= tok->n_vocab || n > UINT32_MAX / 2)
        return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: token id %d out of range", (int)id);
    uint64_t fo = tok->pool.n;
    if (clb_buf_put(&tok->pool, s, n) != COLIBRI_OK || clb_buf_put(&tok->pool, "", 1) != COLIBRI_OK)
        return COLIBRI_ERR_NOMEM;
    tok->foff[id] = fo;
    tok->flen[id] = (uint32_t)n;
    tok->off[id] = fo;
    tok->len[id] = (uint32_t)n;
    if (tok->byte_level && n) {
        char tmp[256];
        char *d = n <= sizeof tmp ? tmp : clb_malloc(n);
        if (!d) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        long r = clb_bytelevel_decode(tok->pool.p + fo, n, d);
        if (r >= 0 && ((size_t)r != n || memcmp(d, tok->pool.p + fo, n) != 0)) {
            uint64_t mo = tok->pool.n;
            if (clb_buf_put(&tok->pool, d, (size_t)r) != COLIBRI_OK ||
                clb_buf_put(&tok->pool, "", 1) != COLIBRI_OK) {
                if (d != tmp) clb_free(d);
                return COLIBRI_ERR_NOMEM;
            }
            tok->off[id] = mo;
            tok->len[id] = (uint32_t)r;
        }
        if (d != tmp) clb_free(d);
    }
    return COLIBRI_OK;
}

int clb_tok_add_alias(clb_tokenizer *tok, int32_t id, const char *s, size_t n) {
    if (id < 0 || id >= tok->n_vocab) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: token id %d out of range", (int)id);
    clb_alias *na = clb_realloc(tok->aliases, (size_t)(tok->n_aliases + 1) * sizeof *na);
    if (!na) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    tok->aliases = na;
    uint64_t off = tok->off[id], foff = tok->foff[id];
    uint32_t len = tok->len[id], flen = tok->flen[id];
    int rc = clb_tok_set_token(tok, id, s, n); /* the forms of s, then the token's back */
    na[tok->n_aliases] = (clb_alias){tok->off[id], tok->len[id], id};
    tok->off[id] = off, tok->foff[id] = foff, tok->len[id] = len, tok->flen[id] = flen;
    if (rc == COLIBRI_OK) tok->n_aliases++;
    return rc;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xAB>" -> 0xAB, else -1 */
static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int h = hexval(s[3]), l = hexval(s[4]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
}

/* Added tokens sorted by first byte of the pattern they match, longest first. */
static int cmp_added(const void *a, const void *b) {
    const clb_added_tok *x = a, *y = b;
    const char *px = x->normalized && x->norm ? x->norm : x->content;
    const char *py = y->normalized && y->norm ? y->norm : y->content;
    size_t lx = x->normalized && x->norm ? x->norm_len : x->len;
    size_t ly = y->normalized && y->norm ? y->norm_len : y->len;
    unsigned char cx = lx ? (unsigned char)px[0] : 0, cy = ly ? (unsigned char)py[0] : 0;
    if (cx != cy) return cx < cy ? -1 : 1;
    if (lx != ly) return lx > ly ? -1 : 1; /* longest first */
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The decoded piece of id: s[0, n) copied to the pool. */
static int set_piece(clb_tokenizer *tok, int32_t id, const char *s, size_t n) {
    uint64_t o = tok->pool.n;
    int rc;
    if ((rc = clb_buf_put(&tok->pool, s, n)) != COLIBRI_OK || (rc = clb_buf_put(&tok->pool, "", 1)) != COLIBRI_OK)
        return rc;
    tok->poff[id] = o;
    tok->plen[id] = (uint32_t)n;
    return COLIBRI_OK;
}

/* Pieces of decoders that join tokens: with no decoder, a space before each token; the
   WordPiece decoder glues "##x" to what precedes it and cleans up " ." and the like (per
   token, as tokenizers does). The space before the very first token goes (dec_strip). */
static int joined_piece(clb_tokenizer *tok, int32_t id, const char *f, size_t fl) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve", "'re"};
    clb_buf b = {0}, c = {0};
    size_t pl = tok->dec_prefix ? strlen(tok->dec_prefix) : 0;
    int rc;
    if (tok->dec_wordpiece && pl && fl >= pl && memcmp(f, tok->dec_prefix, pl) == 0) rc = clb_buf_put(&b, f + pl, fl - pl);
    else if ((rc = clb_buf_put(&b, " ", 1)) == COLIBRI_OK) rc = clb_buf_put(&b, f, fl);
    for (size_t r = 0; tok->dec_cleanup && r < CLB_ARRAY_LEN(from) && rc == COLIBRI_OK; r++) {
        size_t al = strlen(from[r]);
        c.n = 0;
        rc = clb_buf_put(&c, NULL, 0);
        for (size_t k = 0; k < b.n && rc == COLIBRI_OK;) {
            if (k + al <= b.n && memcmp(b.p + k, from[r], al) == 0) {
                rc = clb_buf_put(&c, to[r], strlen(to[r]));
                k += al;
            } else {
                rc = clb_buf_put(&c, b.p + k, 1);
                k++;
            }
        }
        clb_buf x = b;
        b = c;
        c = x;
    }
    if (rc == COLIBRI_OK) rc = set_piece(tok, id, b.p, b.n);
    clb_buf_free(&b);
    clb_buf_free(&c);
    return rc;
}

typedef struct sort_ent {
    const char *s;
    uint32_t len;
    int32_t id;
} sort_ent;

static int cmp_sort_ent(const void *a, const void *b) {
    const sort_ent *x = a, *y = b;
    int c = memcmp(x->s, y->s, CLB_MIN(x->len, y->len));
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Unigram: the ids its lattice may use, sorted by their strings (tok_models.c narrows a
   range of them byte by byte). Hugging Face: every model piece; llama.cpp (UGM): normal,
   user-defined and unused pieces. One id per string (the vocabulary map's). */
static int unigram_sorted(clb_tokenizer *t) {
    if (t->model != CLB_MODEL_UNIGRAM && t->model != CLB_MODEL_UGM) return COLIBRI_OK;
    int32_t n = t->model == CLB_MODEL_UNIGRAM ? t->n_model : t->n_vocab;
    sort_ent *e = clb_malloc((size_t)(n > 0 ? n : 1) * sizeof *e);
    t->sorted = clb_malloc((size_t)(n > 0 ? n : 1) * sizeof *t->sorted);
    if (!e || !t->sorted) {
        clb_free(e);
        return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    }
    size_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!t->len[i]) continue;
        if (t->model == CLB_MODEL_UGM && (t->attr[i] & (CLB_TA_UNKNOWN | CLB_TA_SPECIAL | CLB_TA_BYTE))) continue;
        if (clb_strmap_get(&t->vocab, t, t->pool.p + t->off[i], t->len[i]) != i) continue;
        e[m++] = (sort_ent){t->pool.p + t->off[i], t->len[i], i};
    }
    qsort(e, m, sizeof *e, cmp_sort_ent);
    for (size_t k = 0; k < m; k++) t->sorted[k] = e[k].id;
    t->n_sorted = (int32_t)m;
    clb_free(e);
    return COLIBRI_OK;
}

int clb_tok_finish(clb_tokenizer *tok) {
    int rc;
    if (!tok->vocab.slots) {
        if ((rc = clb_strmap_init(&tok->vocab, (size_t)tok->n_vocab)) != COLIBRI_OK) return rc;
        /* model vocabulary first, so a model token wins over an added token of equal text */
        for (int pass = 0; pass < 2; pass++)
            for (int32_t i = 0; i < tok->n_vocab; i++) {
                bool added = (tok->attr[i] & CLB_TA_ADDED) != 0;
                if ((pass == 0) == added) continue;
                if ((rc = clb_strmap_put(&tok->vocab, tok, i)) != COLIBRI_OK) return rc;
            }
    }
    size_t from_len = tok->dec_from ? strlen(tok->dec_from) : 0;
    size_t to_len = tok->dec_to ? strlen(tok->dec_to) : 0;
    tok->max_piece = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        const char *f = tok->pool.p + tok->foff[i];
        size_t fl = tok->flen[i];
        int bv = byte_token_value(f, fl);
        if (bv >= 0 && tok->byte_fallback && !(tok->attr[i] & CLB_TA_ADDED)) {
            tok->attr[i] |= CLB_TA_BYTE;
            if (tok->byte_id[bv] < 0) tok->byte_id[bv] = i;
            char c = (char)bv;
            tok->poff[i] = tok->pool.n;
            tok->plen[i] = 1;
            if ((rc = clb_buf_put(&tok->pool, &c, 1)) != COLIBRI_OK) return rc;
            if ((rc = clb_buf_put(&tok->pool, "", 1)) != COLIBRI_OK) return rc;
        } else if (tok->dec_join || tok->dec_wordpiece) {
            if ((rc = joined_piece(tok, i, f, fl)) != COLIBRI_OK) return rc;
        } else if ((tok->attr[i] & CLB_TA_ADDED) || !from_len) {
            /* added tokens decode to their content; byte-level tokens to their raw bytes */
            bool raw = tok->attr[i] & CLB_TA_ADDED;
            tok->poff[i] = raw ? tok->foff[i] : tok->off[i];
            tok->plen[i] = raw ? tok->flen[i] : tok->len[i];
        } else { /* apply the decoder's Replace (e.g. "▁" -> " ") */
            tok->poff[i] = tok->pool.n;
            size_t start = tok->pool.n;
            for (size_t k = 0; k < fl;) {
                const char *base = tok->pool.p + tok->foff[i]; /* re-read: the pool may move */
                if (k + from_len <= fl && memcmp(base + k, tok->dec_from, from_len) == 0) {
                    if ((rc = clb_buf_put(&tok->pool, tok->dec_to, to_len)) != COLIBRI_OK) return rc;
                    k += from_len;
                } else {
                    char c = base[k];
                    if ((rc = clb_buf_put(&tok->pool, &c, 1)) != COLIBRI_OK) return rc;
                    k++;
                }
            }
            tok->plen[i] = (uint32_t)(tok->pool.n - start);
            if ((rc = clb_buf_put(&tok->pool, "", 1)) != COLIBRI_OK) return rc;
        }
    }
    /* an added token matched after normalization decodes to its normalized content */
    for (int k = 0; k < tok->n_added; k++) {
        const clb_added_tok *a = &tok->added[k];
        if (!a->normalized || !a->norm) continue;
        if (tok->dec_join || tok->dec_wordpiece) rc = joined_piece(tok, a->id, a->norm, a->norm_len);
        else rc = set_piece(tok, a->id, a->norm, a->norm_len);
        if (rc != COLIBRI_OK) return rc;
    }
    for (int32_t i = 0; i < tok->n_vocab; i++)
        if (tok->plen[i] > tok->max_piece) tok->max_piece = tok->plen[i];
    if (tok->byte_level)
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            tok->byte_id[b] = clb_strmap_get(&tok->vocab, tok, &c, 1);
        }
    bool merges = tok->model == CLB_MODEL_BPE || tok->model == CLB_MODEL_SPM;
    if (merges && !tok->byte_level && !tok->cont_prefix && !tok->eow_suffix) {
        size_t total = 0;
        for (int32_t i = 0; i < tok->n_vocab; i++) total += tok->len[i];
        if ((rc = clb_pairmap_init(&tok->char_pairs, total)) != COLIBRI_OK) return rc;
        for (int32_t i = 0; i < tok->n_vocab + tok->n_aliases; i++) { /* every string, aliases too */
            bool al = i >= tok->n_vocab;
            const char *s = tok->pool.p + (al ? tok->aliases[i - tok->n_vocab].off : tok->off[i]);
            size_t n = al ? tok->aliases[i - tok->n_vocab].len : tok->len[i], k = 0;
            uint32_t prev = 0;
            bool have = false;
            while (k < n) {
                size_t l = clb_utf8_len((unsigned char)s[k]);
                if (l > n - k) l = n - k;
                uint32_t c = clb_char_code(s + k, l);
                if (have) {
                    clb_pairmap_put(&tok->char_pairs, (int32_t)prev, (int32_t)c, 0, 0);
                    if (prev < 128 && c < 128) tok->ascii_pairs[(prev * 128 + c) / 8] |= (uint8_t)(1u << (c % 8));
                }
                prev = c;
                have = true;
                k += l;
            }
        }
    }
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        tok->ascii_id[c] = clb_strmap_get(&tok->vocab, tok, &ch, 1);
    }
    if ((rc = unigram_sorted(tok)) != COLIBRI_OK) return rc;
    if (tok->n_added > 1) qsort(tok->added, (size_t)tok->n_added, sizeof *tok->added, cmp_added);
    memset(tok->added_first, 0, sizeof tok->added_first);
    tok->n_raw_added = tok->n_norm_added = 0;
    for (int i = 0; i < tok->n_added; i++) {
        const clb_added_tok *a = &tok->added[i];
        if (a->normalized && !a->norm) return clb_err(COLIBRI_ERR_INTERNAL, "tokenizer: added token not normalized");
        const char *pat = a->normalized ? a->norm : a->content;
        size_t pl = a->normalized ? a->norm_len : a->len;
        if (pl) tok->added_first[(unsigned char)pat[0]] = 1;
        if (a->normalized) tok->n_norm_added++;
        else tok->n_raw_added++;
    }
    if (!tok->tmpl) { /* default post-processing: [BOS] text [EOS] as the flags say */
        tok->tmpl = clb_malloc(3 * sizeof(int32_t));
        if (!tok->tmpl) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        tok->n_tmpl = 0;
        if (tok->add_bos && tok->bos_id >= 0) tok->tmpl[tok->n_tmpl++] = tok->bos_id;
        tok->tmpl[tok->n_tmpl++] = CLB_TMPL_SEQ;
        if (tok->add_eos && tok->eos_id >= 0) tok->tmpl[tok->n_tmpl++] = tok->eos_id;
    }
    for (int i = 0; i < tok->n_tmpl; i++)
        if (tok->tmpl[i] != CLB_TMPL_SEQ && (tok->tmpl[i] < 0 || tok->tmpl[i] >= tok->n_vocab))
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: post-processor id %d out of range",
                           (int)tok->tmpl[i]);
    return COLIBRI_OK;
}

int clb_tok_add_added(clb_tokenizer *tok, const clb_added_tok *a) {
    if (a->id < 0 || a->id >= tok->n_vocab)
        return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: added token id %d out of range", (int)a->id);
    if (!a->len) return COLIBRI_OK; /* an empty added token can never match */
    clb_added_tok *n = clb_realloc(tok->added, (size_t)(tok->n_added + 1) * sizeof *n);
    if (!n) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    tok->added = n;
    clb_added_tok *d = &n[tok->n_added];
    *d = *a;
    d->content = clb_malloc(a->len + 1);
    if (!d->content) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(d->content, a->content, a->len);
    d->content[a->len] = 0;
    d->norm = NULL; /* set by the loader after the normalizers are known */
    d->norm_len = 0;
    tok->n_added++;
    tok->attr[a->id] |= CLB_TA_ADDED | (a->special ? CLB_TA_SPECIAL : 0);
    return COLIBRI_OK;
}

int clb_tok_add_norm(clb_tokenizer *tok, const clb_norm_op *op) {
    clb_norm_op *n = clb_realloc(tok->norm, (size_t)(tok->n_norm + 1) * sizeof *n);
    if (!n) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    tok->norm = n;
    n[tok->n_norm++] = *op;
    return COLIBRI_OK;
}

int clb_tok_add_pre(clb_tokenizer *tok, const clb_pre_op *op) {
    clb_pre_op *n = clb_realloc(tok->pre, (size_t)(tok->n_pre + 1) * sizeof *n);
    if (!n) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    tok->pre = n;
    n[tok->n_pre++] = *op;
    return COLIBRI_OK;
}

int clb_tok_add_split_regex(clb_tokenizer *tok, const char *pattern, int behavior, bool invert) {
    clb_pre_op op = {0};
    op.kind = CLB_P_SPLIT;
    op.behavior = behavior;
    op.invert = invert;
    op.re = clb_regex_compile(pattern, strlen(pattern), "pre-tokenizer");
    if (!op.re) return COLIBRI_ERR_UNSUPPORTED;
    int rc = clb_tok_add_pre(tok, &op);
    if (rc != COLIBRI_OK) pcre2_code_free(op.re);
    return rc;
}

void clb_tokenizer_free(clb_tokenizer *t) {
    if (!t) return;
    clb_buf_free(&t->pool);
    clb_free(t->off);
    clb_free(t->len);
    clb_free(t->foff);
    clb_free(t->flen);
    clb_free(t->poff);
    clb_free(t->plen);
    clb_free(t->attr);
    clb_free(t->scores);
    clb_strmap_free(&t->vocab);
    clb_free(t->aliases);
    clb_pairmap_free(&t->merges);
    clb_pairmap_free(&t->char_pairs);
    clb_free(t->cont_prefix);
    clb_free(t->eow_suffix);
    clb_free(t->tmpl);
    for (int i = 0; i < t->n_added; i++) {
        clb_free(t->added[i].content);
        clb_free(t->added[i].norm);
    }
    clb_free(t->added);
    for (int i = 0; i < t->n_norm; i++) {
        clb_free(t->norm[i].a);
        clb_free(t->norm[i].b);
        if (t->norm[i].re) pcre2_code_free(t->norm[i].re);
        if (t->norm[i].cm) clb_charsmap_free(t->norm[i].cm);
        clb_free(t->norm[i].cm);
    }
    clb_free(t->norm);
    for (int i = 0; i < t->n_pre; i++) {
        if (t->pre[i].re) pcre2_code_free(t->pre[i].re);
        clb_free(t->pre[i].repl);
    }
    clb_free(t->pre);
    clb_free(t->dec_from);
    clb_free(t->dec_to);
    clb_free(t->chat_template);
    clb_free(t->dscores);
    clb_free(t->sorted);
    clb_free(t->dec_prefix);
    clb_charsmap_free(&t->charsmap);
    clb_free(t);
}

int32_t clb_tokenizer_n_vocab(const clb_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t clb_tokenizer_bos(const clb_tokenizer *t) { return t ? t->bos_id : -1; }
int32_t clb_tokenizer_eos(const clb_tokenizer *t) { return t ? t->eos_id : -1; }
int32_t clb_tokenizer_pad(const clb_tokenizer *t) { return t ? t->pad_id : -1; }
int32_t clb_tokenizer_unk(const clb_tokenizer *t) { return t ? t->unk_id : -1; }
const char *clb_tokenizer_chat_template(const clb_tokenizer *t) { return t ? t->chat_template : NULL; }

bool clb_token_is_special(const clb_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && (t->attr[id] & CLB_TA_SPECIAL);
}

bool clb_tokenizer_adds_bos(const clb_tokenizer *t) {
    return t && t->n_tmpl > 1 && t->tmpl[0] != CLB_TMPL_SEQ;
}

bool clb_tokenizer_adds_eos(const clb_tokenizer *t) {
    return t && t->n_tmpl > 1 && t->tmpl[t->n_tmpl - 1] != CLB_TMPL_SEQ;
}

const char *clb_token_text(const clb_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_vocab) {
        clb_err(COLIBRI_ERR_ARG, "tokenizer: token id %d out of range [0, %d)", (int)id,
                t ? (int)t->n_vocab : 0);
        return NULL;
    }
    return t->pool.p + t->foff[id];
}

int32_t clb_token_lookup(const clb_tokenizer *t, const char *text, size_t len) {
    if (!t || !text) return -1;
    for (int32_t i = 0; i < t->n_vocab; i++) /* rare call: a linear scan over file forms */
        if (t->flen[i] == len && memcmp(t->pool.p + t->foff[i], text, len) == 0) return i;
    return -1;
}

const char *clb_token_to_piece(const clb_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        clb_err(COLIBRI_ERR_ARG, "tokenizer: token id %d out of range [0, %d)", (int)id,
                t ? (int)t->n_vocab : 0);
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->plen[id];
    return t->pool.p + t->poff[id];
}
