/* tok_charsmap.c — SentencePiece's precompiled normalization map ("precompiled_charsmap").
 *
 * The blob (base64 in tokenizer.json's Precompiled normalizer, a byte array in GGUF's
 * tokenizer.ggml.precompiled_charsmap) is: a little-endian u32 byte size of a double-array
 * trie (darts-clone units, one u32 each), the units, then NUL-terminated replacement strings.
 * A trie key is a UTF-8 sequence; its leaf value is the offset of its replacement.
 *
 * Two users, two rules (both as their reference implementations do):
 *   - Hugging Face's Precompiled normalizer cuts the text into extended grapheme clusters; a
 *     cluster shorter than 6 bytes is replaced when some prefix of it is a key (the shortest
 *     such prefix decides), otherwise each of its characters is looked up alone;
 *   - SentencePiece (llama.cpp's UGM) replaces, at each position, the longest key that is a
 *     prefix of the rest of the text.
 * Every unit index and replacement offset is checked: a hostile blob gives no match, never a
 * read outside it. */
#include <string.h>

#include <utf8proc.h>

#include "text/tok_internal.h"

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int clb_charsmap_parse(const unsigned char *blob, size_t n, clb_charsmap *m) {
    memset(m, 0, sizeof *m);
    if (n < 4) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: precompiled_charsmap of %zu bytes is truncated", n);
    uint32_t trie_bytes = rd32(blob);
    if (trie_bytes % 4 || trie_bytes < 4 || (size_t)trie_bytes > n - 4)
        return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: precompiled_charsmap trie size %u does not fit its %zu bytes",
                       trie_bytes, n);
    m->n_units = trie_bytes / 4;
    m->units = clb_malloc(m->n_units * sizeof *m->units);
    m->norm_len = n - 4 - trie_bytes;
    m->norm = clb_malloc(m->norm_len + 1);
    if (!m->units || !m->norm) {
        clb_charsmap_free(m);
        return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < m->n_units; i++) m->units[i] = rd32(blob + 4 + 4 * i);
    memcpy(m->norm, blob + 4 + trie_bytes, m->norm_len);
    m->norm[m->norm_len] = 0;
    /* the replacements are UTF-8 text (NUL-separated) */
    for (size_t i = 0; i < m->norm_len;) {
        size_t l = m->norm[i] ? clb_utf8_valid_char((const unsigned char *)m->norm + i, m->norm_len - i) : 1;
        if (!l) {
            clb_charsmap_free(m);
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer: precompiled_charsmap replacement at byte %zu is not UTF-8", i);
        }
        i += l;
    }
    return COLIBRI_OK;
}

void clb_charsmap_free(clb_charsmap *m) {
    clb_free(m->units);
    clb_free(m->norm);
    memset(m, 0, sizeof *m);
}

/* darts-clone unit fields */
static bool u_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t u_value(uint32_t u) { return u & ((1u << 31) - 1); }
static uint32_t u_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static uint32_t u_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* Walks the keys that are prefixes of s[0, n): for each, in order of length, *len and *value
   get the prefix length and replacement offset; stops at the first (shortest) when
   want_shortest, else keeps the longest. Returns whether one was found. */
static bool prefix_search(const clb_charsmap *m, const unsigned char *s, size_t n, bool want_shortest,
                          size_t *len, uint32_t *value) {
    if (!m->n_units) return false;
    bool found = false;
    size_t pos = u_offset(m->units[0]);
    for (size_t i = 0; i < n && s[i]; i++) {
        pos ^= s[i];
        if (pos >= m->n_units) break;
        uint32_t u = m->units[pos];
        if (u_label(u) != s[i]) break;
        pos ^= u_offset(u);
        if (pos >= m->n_units) break;
        if (u_leaf(u)) {
            uint32_t v = u_value(m->units[pos]);
            if (v < m->norm_len) {
                *len = i + 1;
                *value = v;
                found = true;
                if (want_shortest) return true;
            }
        }
    }
    return found;
}

static int put_repl(const clb_charsmap *m, uint32_t v, clb_buf *out) {
    return clb_buf_put(out, m->norm + v, strlen(m->norm + v));
}

/* One character (l bytes at s) replaced when it is a key (Hugging Face's per-character step). */
static int hf_char(const clb_charsmap *m, const char *s, size_t l, clb_buf *out) {
    size_t ml;
    uint32_t v;
    if (prefix_search(m, (const unsigned char *)s, l, true, &ml, &v)) return put_repl(m, v, out);
    return clb_buf_put(out, s, l);
}

int clb_charsmap_hf(const clb_charsmap *m, const char *s, size_t n, clb_buf *out) {
    int rc = COLIBRI_OK;
    size_t i = 0;
    while (i < n && rc == COLIBRI_OK) {
        /* one extended grapheme cluster [i, j); an invalid byte is a cluster of its own */
        utf8proc_int32_t c1, c2;
        utf8proc_int32_t state = 0;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c1);
        if (l <= 0) {
            rc = clb_buf_put(out, s + i, 1);
            i++;
            continue;
        }
        size_t j = i + (size_t)l;
        while (j < n) {
            utf8proc_ssize_t l2 = utf8proc_iterate((const utf8proc_uint8_t *)s + j, (utf8proc_ssize_t)(n - j), &c2);
            if (l2 <= 0 || utf8proc_grapheme_break_stateful(c1, c2, &state)) break;
            c1 = c2;
            j += (size_t)l2;
        }
        size_t ml;
        uint32_t v;
        if (j - i < 6 && prefix_search(m, (const unsigned char *)s + i, j - i, true, &ml, &v)) {
            rc = put_repl(m, v, out);
        } else {
            for (size_t k = i; k < j && rc == COLIBRI_OK;) {
                size_t cl = clb_utf8_len((unsigned char)s[k]);
                if (cl > j - k) cl = j - k;
                rc = hf_char(m, s + k, cl, out);
                k += cl;
            }
        }
        i = j;
    }
    return rc;
}

size_t clb_charsmap_spm_prefix(const clb_charsmap *m, const char *s, size_t n, const char **repl,
                               size_t *repl_len) {
    size_t ml;
    uint32_t v;
    if (!prefix_search(m, (const unsigned char *)s, n, false, &ml, &v)) return 0;
    *repl = m->norm + v;
    *repl_len = strlen(m->norm + v);
    return ml;
}
