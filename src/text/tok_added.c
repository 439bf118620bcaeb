/* tok_added.c — finding the added tokens a text is split on, by Hugging Face's rules
 * (tokenizers' AddedVocabulary, which is what `encode(text, add_special_tokens=False)` does):
 *
 *   - tokens with normalized=false are matched in the raw text, tokens with normalized=true in
 *     each normalized piece between those (their pattern is their normalized content);
 *   - matches are leftmost-longest and do not overlap: a match that is refused (single_word
 *     with a word character beside it, or a special token while specials are not parsed) is
 *     still consumed, and the search goes on after it;
 *   - lstrip takes the whitespace before the token (not past the previous split), rstrip the
 *     whitespace after it; "word character" and "whitespace" are Unicode's (\w, \s).
 * GGUF vocabularies follow llama.cpp instead: with parse_special off, control tokens are not
 * candidates at all (user-defined ones still are).
 *
 * Plain spans (session.plain, offsets into the caller's text) mark text that must not become
 * a special token, whatever parse_special says: chat messages typed by a user. */
#include <string.h>

#include <utf8proc.h>

#include "text/tok_session.h"

static uint32_t cp_at(const char *s, size_t n, size_t *len) {
    utf8proc_int32_t c;
    utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    if (l <= 0) { *len = 1; return 0xFFFD; }
    *len = (size_t)l;
    return (uint32_t)c;
}

/* the code point ending at s[n - 1] */
static uint32_t cp_before(const char *s, size_t n) {
    size_t i = n - 1, l;
    while (i > 0 && n - i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    uint32_t c = cp_at(s + i, n - i, &l);
    return i + l == n ? c : 0xFFFD;
}

/* Rust regex \s: Unicode White_Space */
bool clb_cp_is_space(uint32_t c) {
    if (c == ' ' || (c >= 9 && c <= 13) || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
        c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000)
        return true;
    return false;
}

/* Rust regex \w: Alphabetic, marks, decimal digits, connector punctuation, joiners */
bool clb_cp_is_word(uint32_t c) {
    if (c < 128) return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
    if (c == 0x200C || c == 0x200D) return true;
    int cat = utf8proc_category((utf8proc_int32_t)c);
    return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_ND) || cat == UTF8PROC_CATEGORY_NL ||
           cat == UTF8PROC_CATEGORY_PC;
}

static size_t space_back(const char *s, size_t floor, size_t i) {
    while (i > floor) {
        size_t k = i - 1;
        while (k > floor && i - k < 4 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        size_t l;
        uint32_t c = cp_at(s + k, i - k, &l);
        if (k + l != i || !clb_cp_is_space(c)) break;
        i = k;
    }
    return i;
}

static size_t space_fwd(const char *s, size_t n, size_t i) {
    while (i < n) {
        size_t l;
        uint32_t c = cp_at(s + i, n - i, &l);
        if (!clb_cp_is_space(c)) break;
        i += l;
    }
    return i;
}

static bool in_plain(const clb_session *s, size_t a, size_t b) {
    for (size_t k = 0; k < s->n_plain; k++)
        if (a < s->plain[2 * k + 1] && s->plain[2 * k] < b) return true;
    return false;
}

int clb_find_added(const clb_session *s, const char *text, size_t len, size_t from, bool normalized,
                   size_t *start, size_t *end) {
    const clb_tokenizer *t = s->tok;
    bool hf = !t->gguf_added_rules;
    size_t pos = from;
    while (pos < len) {
        int k = -1;
        size_t ms = len;
        for (size_t i = pos; i < len && k < 0; i++) { /* leftmost, then longest */
            unsigned char c = (unsigned char)text[i];
            if (!t->added_first[c]) continue;
            for (int j = 0; j < t->n_added; j++) {
                const clb_added_tok *a = &t->added[j];
                const char *pat = normalized ? a->norm : a->content;
                size_t pl = normalized ? a->norm_len : a->len;
                if (a->normalized != normalized || !pl || (unsigned char)pat[0] != c) continue;
                if (pl > len - i || memcmp(text + i, pat, pl) != 0) continue;
                if (!hf && a->special && !s->parse_special) continue; /* llama.cpp: not a candidate */
                k = j;
                ms = i;
                break; /* sorted longest first within a first byte */
            }
        }
        if (k < 0) return -1;
        const clb_added_tok *a = &t->added[k];
        size_t pl = normalized ? a->norm_len : a->len, me = ms + pl;
        pos = me; /* a refused match is consumed */
        /* plain spans are offsets into the raw text: a normalized piece that touches one
           gets no special token at all */
        bool plain = normalized ? in_plain(s, s->seg_off, s->seg_off + s->seg_len) : in_plain(s, ms, me);
        if (a->special && (!s->parse_special || plain)) continue;
        size_t cl;
        if (a->single_word && ((ms > 0 && clb_cp_is_word(cp_before(text, ms))) ||
                               (me < len && clb_cp_is_word(cp_at(text + me, len - me, &cl)))))
            continue;
        *start = a->lstrip ? space_back(text, from, ms) : ms;
        *end = a->rstrip ? space_fwd(text, len, me) : me;
        return k;
    }
    return -1;
}

size_t clb_tokenizer_special_at(const clb_tokenizer *t, const char *s, size_t n) {
    if (!t || !n || !t->added_first[(unsigned char)s[0]]) return 0;
    size_t best = 0;
    for (int k = 0; k < t->n_added; k++) {
        const clb_added_tok *a = &t->added[k];
        if (a->special && a->len > best && a->len <= n && memcmp(s, a->content, a->len) == 0) best = a->len;
    }
    return best;
}
