/* tok_decode.c — ids -> text: whole sequences and a streaming decoder that only ever emits
 * complete UTF-8 characters.
 *
 * Every token has a precomputed piece (its raw bytes: byte-level tokens are stored as bytes,
 * "▁" is already a space, <0xXX> is its byte). Decoding concatenates pieces, removes the
 * decoder's leading-space strip at the very start, and repairs invalid UTF-8 the way the
 * Hugging Face decoders do: a run of byte-fallback tokens that is not valid UTF-8 gives one
 * U+FFFD per byte; byte-level output is converted lossily (one U+FFFD per invalid sequence). */
#include <string.h>

#include "text/tok_internal.h"

static const char k_fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Appends src (n bytes) to b with every invalid UTF-8 sequence replaced by U+FFFD. If
   per_byte, each invalid byte becomes one U+FFFD; else a maximal invalid prefix of a
   sequence (lead byte + its valid continuations) becomes one. */
static int put_lossy(clb_buf *b, const char *src, size_t n, bool per_byte) {
    const unsigned char *u = (const unsigned char *)src;
    size_t i = 0, run = 0;
    int rc = COLIBRI_OK;
    while (i < n) {
        size_t l = clb_utf8_valid_char(u + i, n - i);
        if (l) { i += l; run += l; continue; }
        if ((rc = clb_buf_put(b, src + i - run, run)) != COLIBRI_OK) return rc;
        run = 0;
        if ((rc = clb_buf_put(b, k_fffd, 3)) != COLIBRI_OK) return rc;
        size_t skip = 1;
        if (!per_byte) { /* skip the continuation bytes that belonged to this lead */
            size_t want = clb_utf8_len(u[i]);
            while (skip < want && i + skip < n && (u[i + skip] & 0xC0) == 0x80) skip++;
        }
        i += skip;
    }
    return clb_buf_put(b, src + i - run, run);
}

static int check_id(const clb_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab)
        return clb_err(COLIBRI_ERR_ARG, "detokenize: token id %d out of range [0, %d)", (int)id,
                       (int)t->n_vocab);
    return COLIBRI_OK;
}

int clb_detokenize(const clb_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                   char *out, size_t cap, size_t *n_out) {
    if (!t || (!ids && n) || !n_out) return clb_err(COLIBRI_ERR_ARG, "detokenize: NULL argument");
    *n_out = 0;
    clb_buf raw = {0}, res = {0};
    int rc = COLIBRI_OK;
    for (size_t i = 0; i < n && rc == COLIBRI_OK; i++) {
        if ((rc = check_id(t, ids[i])) != COLIBRI_OK) break;
        if (skip_special && (t->attr[ids[i]] & CLB_TA_SPECIAL)) continue;
        if (t->attr[ids[i]] & CLB_TA_BYTE) { /* a run of byte tokens is checked as a unit */
            size_t j = i;
            clb_buf run = {0};
            while (j < n && ids[j] >= 0 && ids[j] < t->n_vocab && (t->attr[ids[j]] & CLB_TA_BYTE)) {
                rc = clb_buf_put(&run, t->pool.p + t->poff[ids[j]], 1);
                if (rc != COLIBRI_OK) break;
                j++;
            }
            if (rc == COLIBRI_OK) rc = put_lossy(&raw, run.p, run.n, true);
            clb_buf_free(&run);
            i = j - 1;
            continue;
        }
        rc = clb_buf_put(&raw, t->pool.p + t->poff[ids[i]], t->plen[ids[i]]);
    }
    if (rc == COLIBRI_OK) {
        size_t start = 0;
        for (int k = 0; k < t->dec_strip && start < raw.n && raw.p[start] == ' '; k++) start++;
        if (raw.n == start) { /* nothing decoded (raw.p may be NULL: no pointer arithmetic on it) */
        } else if (t->dec_utf8_lossy) rc = put_lossy(&res, raw.p + start, raw.n - start, false);
        else rc = clb_buf_put(&res, raw.p + start, raw.n - start);
    }
    if (rc == COLIBRI_OK) {
        *n_out = res.n;
        if (res.n > cap || (!out && res.n))
            rc = clb_err(COLIBRI_ERR_ARG, "detokenize: %zu bytes do not fit in a buffer of %zu",
                         res.n, cap);
        else if (res.n)
            memcpy(out, res.p, res.n);
    }
    clb_buf_free(&raw);
    clb_buf_free(&res);
    return rc;
}

/* ---------------- streaming ---------------- */

struct clb_detok_stream {
    const clb_tokenizer *tok;
    bool skip_special;
    bool started;      /* something was emitted (the leading-space strip is over) */
    int strip_left;
    unsigned char pend[4]; /* an incomplete UTF-8 sequence */
    size_t npend;
};

clb_detok_stream *clb_detok_stream_new(const clb_tokenizer *tok, bool skip_special) {
    if (!tok) {
        clb_err(COLIBRI_ERR_ARG, "detok_stream: NULL tokenizer");
        return NULL;
    }
    clb_detok_stream *s = clb_calloc(1, sizeof *s);
    if (!s) {
        clb_err(COLIBRI_ERR_NOMEM, "detok_stream: out of memory");
        return NULL;
    }
    s->tok = tok;
    s->skip_special = skip_special;
    s->strip_left = tok->dec_strip;
    return s;
}

void clb_detok_stream_free(clb_detok_stream *s) { clb_free(s); }

/* Runs bytes through the stream state; writes to o (capacity checked by the caller: at most
   3 * (npend + n) bytes are written). Returns the bytes written. */
static size_t stream_feed(clb_detok_stream *s, const unsigned char *p, size_t n, char *o) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (!s->started && s->strip_left > 0 && s->npend == 0 && c == ' ') {
            s->strip_left--;
            continue;
        }
        s->started = true;
        s->pend[s->npend++] = c;
        for (;;) {
            size_t want = clb_utf8_len(s->pend[0]);
            size_t l = clb_utf8_valid_char(s->pend, s->npend);
            if (l) { /* complete character */
                memcpy(o + w, s->pend, l);
                w += l;
                s->npend = 0;
                break;
            }
            /* still a valid prefix of a longer sequence? */
            bool prefix = s->pend[0] >= 0xC2 && s->pend[0] <= 0xF4 && s->npend < want;
            for (size_t k = 1; prefix && k < s->npend; k++) prefix = (s->pend[k] & 0xC0) == 0x80;
            if (prefix && s->npend >= 2) { /* reject overlongs / surrogates early */
                unsigned char a = s->pend[0], b = s->pend[1];
                if ((a == 0xE0 && b < 0xA0) || (a == 0xED && b > 0x9F) || (a == 0xF0 && b < 0x90) ||
                    (a == 0xF4 && b > 0x8F))
                    prefix = false;
            }
            if (prefix) break;
            /* invalid: the first byte becomes U+FFFD, the rest is examined again */
            memcpy(o + w, k_fffd, 3);
            w += 3;
            memmove(s->pend, s->pend + 1, --s->npend);
            if (s->npend == 0) break;
        }
    }
    return w;
}

int clb_detok_stream_push(clb_detok_stream *s, int32_t id, char *out, size_t cap, size_t *n_out) {
    if (!s || !n_out) return clb_err(COLIBRI_ERR_ARG, "detok_stream: NULL argument");
    *n_out = 0;
    int rc = check_id(s->tok, id);
    if (rc != COLIBRI_OK) return rc;
    if (s->skip_special && (s->tok->attr[id] & CLB_TA_SPECIAL)) return COLIBRI_OK;
    size_t n = s->tok->plen[id];
    size_t need = 3 * (n + s->npend) + 4;
    if (!out || cap < need) {
        *n_out = need;
        return clb_err(COLIBRI_ERR_ARG, "detok_stream: output buffer of %zu bytes, need %zu", cap,
                       need);
    }
    *n_out = stream_feed(s, (const unsigned char *)s->tok->pool.p + s->tok->poff[id], n, out);
    return COLIBRI_OK;
}

int clb_detok_stream_flush(clb_detok_stream *s, char *out, size_t cap, size_t *n_out) {
    if (!s || !n_out) return clb_err(COLIBRI_ERR_ARG, "detok_stream: NULL argument");
    size_t need = 3 * s->npend;
    *n_out = need;
    if (need && (!out || cap < need))
        return clb_err(COLIBRI_ERR_ARG, "detok_stream: output buffer of %zu bytes, need %zu", cap,
                       need);
    for (size_t i = 0; i < s->npend; i++) memcpy(out + 3 * i, k_fffd, 3);
    s->npend = 0;
    s->started = false;
    s->strip_left = s->tok->dec_strip;
    return COLIBRI_OK;
}
