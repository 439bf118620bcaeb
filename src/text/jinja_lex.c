/* jinja_lex.c — template source -> tokens, following Jinja2's lexer with the options
   transformers uses: trim_blocks (drop the newline after a block/comment tag), lstrip_blocks
   (drop spaces/tabs before a block/comment tag that starts a line), `-`/`+` whitespace
   control on tags, newlines normalised to \n, one trailing newline dropped
   (keep_trailing_newline=False), {% raw %} blocks, balanced brackets inside tags. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "text/jinja_impl.h"

typedef struct lexer {
    jarena *a;
    const char *s; /* normalised source */
    size_t n, pos;
    int line;
    jtok *toks;
    size_t ntoks, cap;
} lexer;

static int lex_err(lexer *L, const char *msg) {
    return clb_err(COLIBRI_ERR_FORMAT, "template syntax error (line %d): %s", L->line, msg);
}

static int push(lexer *L, jtok t) {
    if (L->ntoks == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok *nt = clb_ja_alloc(L->a, cap * sizeof *nt);
        if (!nt) return clb_err(COLIBRI_ERR_NOMEM, "template: out of memory in lexer");
        if (L->ntoks) memcpy(nt, L->toks, L->ntoks * sizeof *nt);
        L->toks = nt;
        L->cap = cap;
    }
    L->toks[L->ntoks++] = t;
    return COLIBRI_OK;
}

static int push_simple(lexer *L, jtok_kind k, const char *p, size_t n) {
    jtok t;
    memset(&t, 0, sizeof t);
    t.k = k;
    t.line = L->line;
    t.p = p;
    t.n = n;
    return push(L, t);
}

/* moves pos to `to`, counting lines */
static void adv(lexer *L, size_t to) {
    for (size_t i = L->pos; i < to; i++)
        if (L->s[i] == '\n') L->line++;
    L->pos = to;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name(char c) { return is_name0(c) || is_digit(c); }

static bool at(const lexer *L, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return i <= L->n && L->n - i >= k && memcmp(L->s + i, lit, k) == 0;
}

static void skip_ws(lexer *L) {
    size_t i = L->pos;
    while (i < L->n && is_ws(L->s[i])) i++;
    adv(L, i);
}

/* applies `-` (rstrip) or lstrip_blocks to text [b, e) before a tag; returns the new end */
static size_t strip_before(const lexer *L, size_t b, size_t e, char sign, bool lstrip_ok,
                           bool line_starting) {
    if (sign == '-') {
        while (e > b && is_ws(L->s[e - 1])) e--;
        return e;
    }
    if (sign == '+' || !lstrip_ok) return e;
    size_t l = e;
    while (l > b && L->s[l - 1] != '\n') l--;
    if (l == b && !line_starting) return e;
    for (size_t i = l; i < e; i++)
        if (!is_ws(L->s[i])) return e;
    return l;
}

static void put_utf8(char *o, size_t *k, uint32_t cp) {
    if (cp < 0x80) o[(*k)++] = (char)cp;
    else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | (cp >> 6));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | (cp >> 12));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | (cp >> 18));
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* a quoted string literal at pos; Python unicode-escape semantics */
static int lex_string(lexer *L) {
    char q = L->s[L->pos];
    size_t i = L->pos + 1;
    while (i < L->n && L->s[i] != q) {
        if (L->s[i] == '\\' && i + 1 < L->n) i++;
        i++;
    }
    if (i >= L->n) return lex_err(L, "unterminated string literal");
    size_t b = L->pos + 1, e = i;
    char *o = clb_ja_alloc(L->a, e - b + 1);
    if (!o) return clb_err(COLIBRI_ERR_NOMEM, "template: out of memory in lexer");
    size_t k = 0;
    for (size_t j = b; j < e; j++) {
        char c = L->s[j];
        if (c != '\\' || j + 1 >= e) {
            o[k++] = c;
            continue;
        }
        char d = L->s[++j];
        switch (d) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case '\n': break; /* line continuation */
        case 'x':
        case 'u':
        case 'U': {
            int nd = d == 'x' ? 2 : d == 'u' ? 4 : 8;
            uint32_t cp = 0;
            if (e - (j + 1) < (size_t)nd) return lex_err(L, "truncated \\x/\\u escape in string");
            for (int t = 0; t < nd; t++) {
                int h = hexval(L->s[j + 1 + (size_t)t]);
                if (h < 0) return lex_err(L, "bad \\x/\\u escape in string");
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF) return lex_err(L, "\\U escape out of range");
            j += (size_t)nd;
            /* the escape (>= 2 source bytes) never encodes to more bytes than it spans */
            put_utf8(o, &k, cp);
            break;
        }
        default:
            if (d >= '0' && d <= '7') {
                uint32_t cp = (uint32_t)(d - '0');
                for (int t = 0; t < 2 && j + 1 < e && L->s[j + 1] >= '0' && L->s[j + 1] <= '7'; t++)
                    cp = cp * 8 + (uint32_t)(L->s[++j] - '0');
                put_utf8(o, &k, cp);
            } else {
                o[k++] = '\\';
                o[k++] = d;
            }
        }
    }
    o[k] = 0;
    jtok t;
    memset(&t, 0, sizeof t);
    t.k = TK_STRING;
    t.line = L->line;
    t.p = o;
    t.n = k;
    adv(L, i + 1);
    return push(L, t);
}

static int lex_number(lexer *L) {
    size_t i = L->pos;
    char buf[64];
    size_t k = 0;
    bool is_float = false;
    while (i < L->n && (is_digit(L->s[i]) || (L->s[i] == '_' && i + 1 < L->n && is_digit(L->s[i + 1])))) {
        if (L->s[i] != '_' && k < sizeof buf - 1) buf[k++] = L->s[i];
        i++;
    }
    if (i + 1 < L->n && L->s[i] == '.' && is_digit(L->s[i + 1])) {
        is_float = true;
        if (k < sizeof buf - 1) buf[k++] = '.';
        i++;
        while (i < L->n && (is_digit(L->s[i]) || (L->s[i] == '_' && i + 1 < L->n && is_digit(L->s[i + 1])))) {
            if (L->s[i] != '_' && k < sizeof buf - 1) buf[k++] = L->s[i];
            i++;
        }
    }
    if (i < L->n && (L->s[i] == 'e' || L->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->n && (L->s[j] == '+' || L->s[j] == '-')) j++;
        if (j < L->n && is_digit(L->s[j])) {
            is_float = true;
            if (k < sizeof buf - 1) buf[k++] = 'e';
            for (size_t t = i + 1; t < j; t++)
                if (k < sizeof buf - 1) buf[k++] = L->s[t];
            i = j;
            while (i < L->n && is_digit(L->s[i])) {
                if (k < sizeof buf - 1) buf[k++] = L->s[i];
                i++;
            }
        }
    }
    buf[k] = 0;
    jtok t;
    memset(&t, 0, sizeof t);
    t.line = L->line;
    if (is_float) {
        t.k = TK_FLOAT;
        t.f = strtod(buf, NULL);
    } else {
        t.k = TK_INT;
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (k > 18 && (k > 19 || v > (unsigned long long)INT64_MAX))
            return lex_err(L, "integer literal too large");
        t.i = (int64_t)v;
    }
    adv(L, i);
    return push(L, t);
}

static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char ops1[] = "+-/*%~[](){}<>=.:|,;";

/* tokens of one {{ }} or {% %} tag, up to and including its end */
static int lex_tag(lexer *L, bool is_block, bool *line_starting) {
    char stack[CLB_JINJA_MAX_DEPTH];
    int depth = 0;
    for (;;) {
        skip_ws(L);
        if (L->pos >= L->n) return lex_err(L, is_block ? "missing '%}'" : "missing '}}'");
        if (depth == 0) {
            const char *end = is_block ? "%}" : "}}";
            if (is_block && at(L, L->pos, "+%}")) {
                adv(L, L->pos + 3);
                *line_starting = false;
                return push_simple(L, TK_BLOCK_END, NULL, 0);
            }
            if (L->s[L->pos] == '-' && at(L, L->pos + 1, end)) {
                adv(L, L->pos + 3);
                size_t before = L->pos;
                skip_ws(L);
                *line_starting = L->pos > before ? L->s[L->pos - 1] == '\n' : false;
                return push_simple(L, is_block ? TK_BLOCK_END : TK_VAR_END, NULL, 0);
            }
            if (at(L, L->pos, end)) {
                adv(L, L->pos + 2);
                *line_starting = false;
                if (is_block && L->pos < L->n && L->s[L->pos] == '\n') { /* trim_blocks */
                    adv(L, L->pos + 1);
                    *line_starting = true;
                }
                return push_simple(L, is_block ? TK_BLOCK_END : TK_VAR_END, NULL, 0);
            }
        }
        char c = L->s[L->pos];
        int rc;
        if (c == '\'' || c == '"') rc = lex_string(L);
        else if (is_digit(c)) rc = lex_number(L);
        else if (is_name0(c)) {
            size_t i = L->pos;
            while (i < L->n && is_name(L->s[i])) i++;
            rc = push_simple(L, TK_NAME, L->s + L->pos, i - L->pos);
            adv(L, i);
        } else {
            size_t len = 0;
            for (size_t k = 0; k < CLB_ARRAY_LEN(ops2); k++)
                if (at(L, L->pos, ops2[k])) len = 2;
            if (!len && strchr(ops1, c) && c) len = 1;
            if (!len) {
                char msg[48];
                snprintf(msg, sizeof msg, "unexpected character '%c'", c);
                return lex_err(L, msg);
            }
            if (len == 1 && (c == '(' || c == '[' || c == '{')) {
                if (depth >= CLB_JINJA_MAX_DEPTH) return lex_err(L, "brackets nested too deeply");
                stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
            } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
                if (depth == 0 || stack[depth - 1] != c) {
                    char msg[48];
                    snprintf(msg, sizeof msg, "unexpected '%c'", c);
                    return lex_err(L, msg);
                }
                depth--;
            }
            rc = push_simple(L, TK_OP, L->s + L->pos, len);
            adv(L, L->pos + len);
        }
        if (rc) return rc;
    }
}

/* {% raw %}: pos is just after "{%" and its sign; returns 1 if this is not a raw tag */
static int lex_raw(lexer *L, bool *line_starting) {
    size_t i = L->pos;
    while (i < L->n && is_ws(L->s[i])) i++;
    if (!at(L, i, "raw") || (i + 3 < L->n && is_name(L->s[i + 3]))) return 1;
    i += 3;
    while (i < L->n && is_ws(L->s[i])) i++;
    bool strip_after = false, keep = false;
    if (at(L, i, "-%}")) {
        strip_after = true;
        i += 3;
    } else if (at(L, i, "+%}")) {
        keep = true;
        i += 3;
    } else if (at(L, i, "%}")) i += 2;
    else return 1;
    adv(L, i);
    if (strip_after) skip_ws(L);
    else if (!keep && L->pos < L->n && L->s[L->pos] == '\n') adv(L, L->pos + 1);
    /* find {%[-+]? endraw [-+]?%} */
    for (size_t j = L->pos; j + 1 < L->n; j++) {
        if (L->s[j] != '{' || L->s[j + 1] != '%') continue;
        size_t k = j + 2;
        char sign = 0;
        if (k < L->n && (L->s[k] == '-' || L->s[k] == '+')) sign = L->s[k++];
        while (k < L->n && is_ws(L->s[k])) k++;
        if (!at(L, k, "endraw")) continue;
        k += 6;
        while (k < L->n && is_ws(L->s[k])) k++;
        char esign = 0;
        if (k < L->n && (L->s[k] == '-' || L->s[k] == '+')) esign = L->s[k++];
        if (!at(L, k, "%}")) continue;
        k += 2;
        size_t e = strip_before(L, L->pos, j, sign, true, *line_starting);
        int rc = e > L->pos ? push_simple(L, TK_TEXT, L->s + L->pos, e - L->pos) : 0;
        if (rc) return rc;
        adv(L, k);
        *line_starting = false;
        if (esign == '-') {
            size_t b = L->pos;
            skip_ws(L);
            *line_starting = L->pos > b && L->s[L->pos - 1] == '\n';
        } else if (esign != '+' && L->pos < L->n && L->s[L->pos] == '\n') {
            adv(L, L->pos + 1);
            *line_starting = true;
        }
        return 0;
    }
    return lex_err(L, "missing end of raw directive");
}

int clb_jlex(jarena *a, const char *src, jtok **toks, size_t *ntoks) {
    lexer L;
    memset(&L, 0, sizeof L);
    L.a = a;
    L.line = 1;
    size_t sn = strlen(src);
    char *s = clb_ja_alloc(a, sn + 1);
    if (!s) return clb_err(COLIBRI_ERR_NOMEM, "template: out of memory (%zu bytes)", sn);
    size_t k = 0;
    for (size_t i = 0; i < sn; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < sn && src[i + 1] == '\n') i++;
        } else s[k++] = src[i];
    }
    if (k > 0 && s[k - 1] == '\n') k--; /* keep_trailing_newline=False */
    s[k] = 0;
    L.s = s;
    L.n = k;
    bool line_starting = true;
    while (L.pos < L.n) {
        /* next tag start */
        size_t t = L.pos;
        while (t + 1 < L.n && !(L.s[t] == '{' && (L.s[t + 1] == '{' || L.s[t + 1] == '%' || L.s[t + 1] == '#')))
            t++;
        if (t + 1 >= L.n) {
            int rc = push_simple(&L, TK_TEXT, L.s + L.pos, L.n - L.pos);
            if (rc) return rc;
            adv(&L, L.n);
            break;
        }
        char kind = L.s[t + 1];
        char sign = (t + 2 < L.n && (L.s[t + 2] == '-' || L.s[t + 2] == '+')) ? L.s[t + 2] : 0;
        size_t e = strip_before(&L, L.pos, t, sign, kind != '{', line_starting);
        if (e > L.pos) {
            int rc = push_simple(&L, TK_TEXT, L.s + L.pos, e - L.pos);
            if (rc) return rc;
        }
        adv(&L, t + 2 + (sign ? 1 : 0));
        int rc;
        if (kind == '#') {
            size_t j = L.pos;
            while (j + 1 < L.n && !(L.s[j] == '#' && L.s[j + 1] == '}')) j++;
            if (j + 1 >= L.n) return lex_err(&L, "missing end of comment tag");
            char esign = j > L.pos && (L.s[j - 1] == '-' || L.s[j - 1] == '+') ? L.s[j - 1] : 0;
            adv(&L, j + 2);
            line_starting = false;
            if (esign == '-') {
                size_t b = L.pos;
                skip_ws(&L);
                line_starting = L.pos > b && L.s[L.pos - 1] == '\n';
            } else if (esign != '+' && L.pos < L.n && L.s[L.pos] == '\n') {
                adv(&L, L.pos + 1);
                line_starting = true;
            }
            continue;
        }
        if (kind == '%') {
            rc = lex_raw(&L, &line_starting);
            if (rc == 0) continue;
            if (rc < 0) return rc;
        }
        rc = push_simple(&L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, NULL, 0);
        if (rc) return rc;
        rc = lex_tag(&L, kind == '%', &line_starting);
        if (rc) return rc;
    }
    int rc = push_simple(&L, TK_EOF, NULL, 0);
    if (rc) return rc;
    *toks = L.toks;
    *ntoks = L.ntoks;
    return COLIBRI_OK;
}
