/* tok_normalize.c — the normalizers of tokenizer.json (Hugging Face's semantics):
 * NFC/NFKC/NFD/NFKD, Lowercase, Prepend, Replace (string or regex), Strip, StripAccents,
 * Nmt, BertNormalizer, Precompiled (SentencePiece's charsmap, tok_charsmap.c).
 * Every normalizer's output is bounded (CLB_NORM_GROWTH): a chain of growing Replaces in a
 * hostile file stops with an error naming the limit instead of exhausting memory. */
#include <string.h>

#include <utf8proc.h>

#include "text/tok_session.h"

static bool bert_is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int put_cp(clb_buf *o, uint32_t c) {
    utf8proc_uint8_t u[4];
    utf8proc_ssize_t l = utf8proc_encode_char((utf8proc_int32_t)c, u);
    return clb_buf_put(o, u, (size_t)(l > 0 ? l : 0));
}

/* One pass over the code points of s, keeping, dropping or replacing each (invalid bytes are
   kept as they are). pass: 0 StripAccents, 1 Nmt, 2 Bert clean_text, 3 Bert chinese
   padding, 4 drop non-spacing marks. */
static int char_pass(int pass, const char *s, size_t n, clb_buf *o) {
    int rc = COLIBRI_OK;
    for (size_t i = 0; i < n && rc == COLIBRI_OK;) {
        utf8proc_int32_t c0;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c0);
        if (l <= 0) { rc = clb_buf_put(o, s + i, 1); i++; continue; }
        uint32_t c = (uint32_t)c0;
        int cat = utf8proc_category(c0);
        const char *src = s + i;
        i += (size_t)l;
        switch (pass) {
        case 0: case 4: /* non-spacing marks go */
            if (cat == UTF8PROC_CATEGORY_MN) continue;
            break;
        case 1: /* Nmt: ASCII controls go, some spaces become ' ' */
            if ((c >= 1 && c <= 8) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F)
                continue;
            if (c == 9 || c == 10 || c == 12 || c == 13 || c == 0x1680 || (c >= 0x200B && c <= 0x200F) || c == 0x2028 ||
                c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD) {
                rc = clb_buf_put(o, " ", 1);
                continue;
            }
            break;
        case 2: /* clean_text: controls (not \t \n \r), NUL and U+FFFD go; whitespace becomes ' ' */
            if (c == 0 || c == 0xFFFD ||
                (c != 9 && c != 10 && c != 13 &&
                 (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CN ||
                  cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS)))
                continue;
            if (clb_cp_is_space(c)) { rc = clb_buf_put(o, " ", 1); continue; }
            break;
        case 3:
            if (bert_is_chinese(c)) {
                if ((rc = clb_buf_put(o, " ", 1)) == COLIBRI_OK && (rc = put_cp(o, c)) == COLIBRI_OK)
                    rc = clb_buf_put(o, " ", 1);
                continue;
            }
            break;
        }
        rc = clb_buf_put(o, src, (size_t)l);
    }
    return rc;
}

/* StripAccents, Nmt and BertNormalizer: passes through a scratch buffer into out. */
static int map_chars(const clb_norm_op *op, const char *s, size_t n, clb_buf *out) {
    int passes[4], np = 0;
    if (op->kind == CLB_N_STRIP_ACCENTS) passes[np++] = 0;
    else if (op->kind == CLB_N_NMT) passes[np++] = 1;
    else {
        if (op->clean) passes[np++] = 2;
        if (op->chinese) passes[np++] = 3;
        if (op->strip_accents) passes[np++] = -1; /* NFD, then marks go */
        if (op->lowercase) passes[np++] = -2;
    }
    clb_buf a = {0}, b = {0};
    int rc = clb_buf_put(&a, s, n);
    for (int k = 0; k < np && rc == COLIBRI_OK; k++) {
        b.n = 0;
        if (passes[k] >= 0) {
            rc = char_pass(passes[k], a.p, a.n, &b);
        } else {
            char *r = NULL;
            size_t rl = 0;
            rc = clb_unicode_normalize(passes[k] == -1 ? CLB_N_NFD : CLB_N_LOWER, a.p, a.n, &r, &rl);
            if (rc == COLIBRI_OK && passes[k] == -1) rc = char_pass(4, r, rl, &b);
            else if (rc == COLIBRI_OK) rc = clb_buf_put(&b, r, rl);
            clb_free(r);
        }
        clb_buf x = a;
        a = b;
        b = x;
    }
    if (rc == COLIBRI_OK) rc = clb_buf_put(out, a.p, a.n);
    clb_buf_free(&a);
    clb_buf_free(&b);
    return rc;
}

#define NORM_TOO_BIG 1 /* internal status of normalize_op */

/* Writes the result of op on in to out. The output may not pass limit bytes (checked as it
   grows, so a runaway replacement stops early): returns NORM_TOO_BIG then. */
static int normalize_op(clb_session *s, const clb_norm_op *op, const clb_buf *in, clb_buf *out,
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
    case CLB_N_BERT: case CLB_N_STRIP_ACCENTS: case CLB_N_NMT:
        if ((rc = map_chars(op, in->p, in->n, out)) != COLIBRI_OK) return rc;
        return out->n > limit ? NORM_TOO_BIG : COLIBRI_OK;
    case CLB_N_PRECOMPILED:
        if ((rc = clb_charsmap_hf(op->cm, in->p, in->n, out)) != COLIBRI_OK) return rc;
        return out->n > limit ? NORM_TOO_BIG : COLIBRI_OK;
    default:
        return clb_err(COLIBRI_ERR_INTERNAL, "tokenizer: unknown normalizer %d", op->kind);
    }
#undef PUT
}

static const char *norm_name(int kind) {
    static const char *const names[] = {"?", "NFC", "NFKC", "NFD", "NFKD", "Lowercase", "Prepend",
                                        "Replace", "Replace", "Strip", "BertNormalizer", "StripAccents",
                                        "Nmt", "Precompiled"};
    return kind > 0 && kind < (int)CLB_ARRAY_LEN(names) ? names[kind] : "?";
}

/* Runs the normalizers over s->work. Normalizers can grow text (NFKD turns one character into
   up to 18, a Replace can map one byte to many), and a chain of them multiplies: each one may
   give at most CLB_NORM_GROWTH x its input + CLB_NORM_EXTRA bytes, and the chain at most
   that much of the original text. */
int clb_tok_normalize(clb_session *s) {
    const clb_tokenizer *t = s->tok;
    size_t orig = s->work.n;
    size_t total_limit = orig > (SIZE_MAX - CLB_NORM_EXTRA) / CLB_NORM_GROWTH
                             ? SIZE_MAX : orig * CLB_NORM_GROWTH + CLB_NORM_EXTRA;
    clb_buf tmp = s->norm_tmp;
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
    s->norm_tmp = tmp; /* kept for the next segment */
    return rc;
}


int clb_tok_normalize_text(const clb_tokenizer *t, const char *s, size_t n, clb_buf *out) {
    clb_session ss;
    memset(&ss, 0, sizeof ss);
    ss.tok = t;
    ss.md = pcre2_match_data_create(4, NULL);
    int rc = ss.md ? clb_buf_put(&ss.work, s, n) : clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    if (rc == COLIBRI_OK && t->n_norm) rc = clb_tok_normalize(&ss);
    if (rc == COLIBRI_OK) rc = clb_buf_put(out, ss.work.p, ss.work.n);
    clb_buf_free(&ss.work);
    clb_buf_free(&ss.norm_tmp);
    if (ss.md) pcre2_match_data_free(ss.md);
    return rc;
}
