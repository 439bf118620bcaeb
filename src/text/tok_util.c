/* tok_util.c — hash maps, UTF-8 helpers, the GPT-2 byte-level alphabet, Unicode normalization
   (utf8proc) and regex compilation (PCRE2) for the tokenizer. */
#include <string.h>
#include <stdlib.h>

#include <utf8proc.h>

#include "text/tok_internal.h"

/* Built with -DCLB_HAVE_UTF8PROC (and -lutf8proc) the normalizers call utf8proc directly.
   Without it utf8proc is referenced weakly: a binary linked without the library still works for
   every tokenizer that does not ask for Unicode normalization, and reports UNSUPPORTED for one
   that does (weak references do not keep an --as-needed shared library, hence the macro). */
#ifndef CLB_HAVE_UTF8PROC
extern __typeof__(utf8proc_map) utf8proc_map __attribute__((weak));
extern __typeof__(utf8proc_iterate) utf8proc_iterate __attribute__((weak));
extern __typeof__(utf8proc_encode_char) utf8proc_encode_char __attribute__((weak));
extern __typeof__(utf8proc_tolower) utf8proc_tolower __attribute__((weak));
#endif

int clb_buf_put(clb_buf *b, const void *s, size_t n) {
    if (n > SIZE_MAX - b->n - 1) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: buffer overflow");
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = clb_realloc(b->p, nc);
        if (!p) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        b->p = p;
        b->cap = nc;
    }
    if (n && s) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return COLIBRI_OK;
}

void clb_buf_free(clb_buf *b) {
    clb_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

uint64_t clb_tok_hash(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

static size_t pow2_cap(size_t n) {
    size_t c = 16;
    while (c < n * 2 + 16) c *= 2;
    return c;
}

int clb_strmap_init(clb_strmap *m, size_t n_expected) {
    m->cap = pow2_cap(n_expected);
    m->n = 0;
    m->slots = clb_malloc(m->cap * sizeof(int32_t));
    if (!m->slots) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory (vocab map)");
    memset(m->slots, 0xff, m->cap * sizeof(int32_t));
    return COLIBRI_OK;
}

void clb_strmap_free(clb_strmap *m) {
    clb_free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

/* A slot holds a token id, or n_vocab + k for the k-th alias (another string of a token). */
static const char *slot_str(const clb_tokenizer *t, int32_t v, size_t *n) {
    if (v < t->n_vocab) {
        *n = t->len[v];
        return t->pool.p + t->off[v];
    }
    const clb_alias *a = &t->aliases[v - t->n_vocab];
    *n = a->len;
    return t->pool.p + a->off;
}

static int32_t slot_id(const clb_tokenizer *t, int32_t v) {
    return v < t->n_vocab ? v : t->aliases[v - t->n_vocab].id;
}

int32_t clb_strmap_get(const clb_strmap *m, const clb_tokenizer *tok, const char *s, size_t n) {
    if (!m->slots) return -1;
    size_t mask = m->cap - 1, i = (size_t)clb_tok_hash(s, n) & mask;
    for (;;) {
        int32_t v = m->slots[i];
        if (v < 0) return -1;
        size_t l;
        const char *e = slot_str(tok, v, &l);
        if (l == n && memcmp(e, s, n) == 0) return slot_id(tok, v);
        i = (i + 1) & mask;
    }
}

/* Inserts slot value v (an id or n_vocab + alias index); an equal string already there wins. */
static int strmap_put_slot(clb_strmap *m, const clb_tokenizer *tok, int32_t v) {
    size_t n;
    const char *s = slot_str(tok, v, &n);
    if ((m->n + 1) * 2 > m->cap) return clb_err(COLIBRI_ERR_INTERNAL, "tokenizer: vocab map full");
    size_t mask = m->cap - 1, i = (size_t)clb_tok_hash(s, n) & mask;
    for (;;) {
        int32_t e = m->slots[i];
        if (e < 0) break;
        size_t l;
        const char *es = slot_str(tok, e, &l);
        if (l == n && memcmp(es, s, n) == 0) return COLIBRI_OK;
        i = (i + 1) & mask;
    }
    m->slots[i] = v;
    m->n++;
    return COLIBRI_OK;
}

int clb_strmap_put(clb_strmap *m, const clb_tokenizer *tok, int32_t id) { return strmap_put_slot(m, tok, id); }

int clb_strmap_put_aliases(clb_strmap *m, const clb_tokenizer *tok) {
    int rc = COLIBRI_OK;
    for (int32_t k = 0; k < tok->n_aliases && rc == COLIBRI_OK; k++) rc = strmap_put_slot(m, tok, tok->n_vocab + k);
    return rc;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

int clb_pairmap_init(clb_pairmap *m, size_t n_expected) {
    m->cap = pow2_cap(n_expected);
    m->n = 0;
    m->keys = clb_malloc(m->cap * sizeof(uint64_t));
    m->rank = clb_malloc(m->cap * sizeof(int32_t));
    m->result = clb_malloc(m->cap * sizeof(int32_t));
    if (!m->keys || !m->rank || !m->result) {
        clb_pairmap_free(m);
        return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory (merges)");
    }
    memset(m->keys, 0xff, m->cap * sizeof(uint64_t));
    return COLIBRI_OK;
}

void clb_pairmap_free(clb_pairmap *m) {
    clb_free(m->keys);
    clb_free(m->rank);
    clb_free(m->result);
    memset(m, 0, sizeof *m);
}

/* The first insertion of a pair wins (a duplicate merge line keeps its earlier rank). */
void clb_pairmap_put(clb_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t result) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    if ((m->n + 1) * 2 > m->cap) return;
    size_t mask = m->cap - 1, i = (size_t)mix64(k) & mask;
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == k) return;
        i = (i + 1) & mask;
    }
    m->keys[i] = k;
    m->rank[i] = rank;
    m->result[i] = result;
    m->n++;
}

bool clb_pairmap_get(const clb_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *result) {
    if (!m->keys) return false;
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = m->cap - 1, i = (size_t)mix64(k) & mask;
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == k) {
            *rank = m->rank[i];
            *result = m->result[i];
            return true;
        }
        i = (i + 1) & mask;
    }
    return false;
}

size_t clb_utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;
}

size_t clb_utf8_valid_char(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t l;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) { l = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { l = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { l = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < l) return 0;
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return l;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
   U+0100.. in byte order. Inverse: code point -> byte, -1 outside the alphabet. */
static int bl_cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp >= 0x100 + 68) return -1;
    int k = (int)(cp - 0x100), seen = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        if (printable) continue;
        if (seen == k) return b;
        seen++;
    }
    return -1;
}

long clb_bytelevel_decode(const char *s, size_t n, char *out) {
    static int16_t table[0x144];
    static int ready;
    if (!ready) { /* benign race: every thread writes the same values */
        for (uint32_t cp = 0; cp < 0x144; cp++) table[cp] = (int16_t)bl_cp_to_byte(cp);
        ready = 1;
    }
    const unsigned char *u = (const unsigned char *)s;
    long o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = clb_utf8_valid_char(u + i, n - i);
        if (!l) return -1;
        uint32_t cp;
        if (l == 1) cp = u[i];
        else if (l == 2) cp = ((uint32_t)(u[i] & 0x1F) << 6) | (u[i + 1] & 0x3F);
        else return -1;
        if (cp >= 0x144 || table[cp] < 0) return -1;
        out[o++] = (char)table[cp];
        i += l;
    }
    return o;
}

int clb_unicode_normalize(int kind, const char *s, size_t n, char **out, size_t *out_len) {
#ifndef CLB_HAVE_UTF8PROC
    if (!utf8proc_map || !utf8proc_iterate)
        return clb_err(COLIBRI_ERR_UNSUPPORTED,
                       "tokenizer: Unicode normalization needs libutf8proc (not linked)");
#endif
    char *r = NULL;
    size_t rl = 0;
    if (kind == CLB_N_LOWER) {
        r = clb_malloc(n * 2 + 8);
        if (!r) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
        size_t i = 0;
        while (i < n) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
            if (l <= 0) { r[rl++] = s[i++]; continue; }
            if (cp == 0x130) { /* the one unconditional multi-character lowercase: i + U+0307 */
                memcpy(r + rl, "i\xcc\x87", 3);
                rl += 3;
            } else {
                rl += (size_t)utf8proc_encode_char(utf8proc_tolower(cp), (utf8proc_uint8_t *)r + rl);
            }
            i += (size_t)l;
        }
        r[rl] = 0;
    } else {
        /* Normalization is local: no ASCII character ever composes with what precedes it and
           all are starters, so the text is cut before each ASCII character and only the
           chunks holding non-ASCII characters (with their ASCII base) go through utf8proc. */
        int opt = UTF8PROC_STABLE;
        if (kind == CLB_N_NFC) opt |= UTF8PROC_COMPOSE;
        else if (kind == CLB_N_NFKC) opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        else if (kind == CLB_N_NFD) opt |= UTF8PROC_DECOMPOSE;
        else opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        clb_buf b = {0};
        int rc = clb_buf_put(&b, NULL, 0);
        size_t i = 0;
        while (i < n && rc == COLIBRI_OK) {
            size_t j = i;
            while (j < n && (unsigned char)s[j] < 0x80 && (j + 1 == n || (unsigned char)s[j + 1] < 0x80)) j++;
            if (j > i) { rc = clb_buf_put(&b, s + i, j - i); i = j; continue; }
            j = i + 1; /* an ASCII base or a non-ASCII byte, then the non-ASCII run */
            while (j < n && (unsigned char)s[j] >= 0x80) j++;
            utf8proc_uint8_t *m = NULL;
            utf8proc_ssize_t ml = utf8proc_map((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(j - i),
                                               &m, (utf8proc_option_t)opt);
            if (ml < 0) rc = clb_buf_put(&b, s + i, j - i); /* invalid UTF-8: left as it is */
            else rc = clb_buf_put(&b, m, (size_t)ml);
            free(m);
            i = j;
        }
        if (rc != COLIBRI_OK) { clb_buf_free(&b); return rc; }
        r = b.p;
        rl = b.n;
    }
    *out = r;
    *out_len = rl;
    return COLIBRI_OK;
}

unsigned char *clb_base64_decode(const char *s, size_t *n_out) {
    size_t n = strlen(s);
    unsigned char *o = clb_malloc(n / 4 * 3 + 4);
    if (!o) return NULL;
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0, i = 0;
    for (; i < n && s[i] != '='; i++) {
        char c = s[i];
        int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
              : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
        if (v < 0) { clb_free(o); return NULL; }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(acc >> bits);
        }
    }
    for (; i < n; i++)
        if (s[i] != '=') { clb_free(o); return NULL; }
    *n_out = k;
    return o;
}

bool clb_json_int(const cJSON *v, double lo, double hi, int32_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= lo && d < hi) || d != (double)(int64_t)d) return false; /* NaN fails too */
    *out = (int32_t)d;
    return true;
}

/* Hugging Face's tokenizers run their regexes with Oniguruma (Ruby syntax), whose escapes mean
   other things than PCRE2's in three places: \s is White_Space (PCRE2's, with UCP, also takes
   U+180E MONGOLIAN VOWEL SEPARATOR), \h is a hex digit (PCRE2: horizontal space) and \v is
   U+000B alone (PCRE2: vertical space). Rewrites those escapes into PCRE2 syntax with Oniguruma's
   meaning, inside character classes too; everything else is copied, \Q...\E verbatim. */
static char *onig_escapes(const char *p, size_t n, size_t *out_len, const char *what) {
    clb_buf b = {0};
    bool in_class = false;
    int rc = clb_buf_put(&b, "", 0);
    for (size_t i = 0; i < n && rc == COLIBRI_OK;) {
        const char *rep = NULL;
        size_t take = 1;
        if (p[i] == '\\' && i + 1 < n) {
            char e = p[i + 1];
            take = 2;
            if (e == 's') rep = "\\p{White_Space}";
            else if (e == 'S') rep = "\\P{White_Space}";
            else if (e == 'v') rep = "\\x{0B}";
            else if (e == 'h') rep = in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]";
            else if (e == 'H' && !in_class) rep = "[^0-9A-Fa-f]";
            else if (e == 'H') {
                rc = clb_err(COLIBRI_ERR_UNSUPPORTED,
                             "tokenizer: %s regex: \\H inside a character class is not supported", what);
                break;
            } else if (e == 'Q' || e == 'E') {
                rc = clb_err(COLIBRI_ERR_UNSUPPORTED,
                             "tokenizer: %s regex: \\%c (PCRE2 quoting; Oniguruma has none) is not supported", what, e);
                break;
            }
        } else if (p[i] == '[' && !in_class) {
            in_class = true;
            if (i + 1 < n && p[i + 1] == '^') take++;
            if (i + take < n && p[i + take] == ']') take++; /* a leading ] is a literal */
        } else if (p[i] == '[' && i + 1 < n && p[i + 1] == ':') {
            const char *end = memchr(p + i + 2, ']', n - i - 2); /* [:alpha:] */
            take = end ? (size_t)(end + 1 - (p + i)) : 1;
        } else if (p[i] == ']') {
            in_class = false;
        }
        rc = rep ? clb_buf_put(&b, rep, strlen(rep)) : clb_buf_put(&b, p + i, take);
        i += take;
    }
    if (rc != COLIBRI_OK) {
        clb_buf_free(&b);
        return NULL;
    }
    *out_len = b.n;
    return b.p;
}

pcre2_code *clb_regex_compile(const char *pattern_in, size_t len_in, const char *what) {
    int err = 0;
    PCRE2_SIZE erroff = 0;
    size_t len = 0;
    char *pattern = onig_escapes(pattern_in, len_in, &len, what);
    if (!pattern) return NULL;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                                   &err, &erroff, NULL);
    clb_free(pattern);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        clb_err(COLIBRI_ERR_UNSUPPORTED, "tokenizer: %s regex does not compile at offset %zu: %s",
                what, (size_t)erroff, (const char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* best effort: the interpreter works too */
    return re;
}
