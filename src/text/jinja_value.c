/* jinja_value.c — the arena, byte buffers and the value type of the Jinja subset:
   construction, truthiness, equality, str()/repr()/json.dumps() formatting with Python's
   conventions, UTF-8 helpers and conversion from cJSON. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

/* ---- arena ---- */

#define JA_ALIGN 16
#define JA_CHUNK (64u << 10)

void *clb_ja_alloc(jarena *a, size_t n) {
    n = (n + JA_ALIGN - 1) & ~(size_t)(JA_ALIGN - 1);
    if (n == 0) n = JA_ALIGN;
    size_t hdr = (sizeof(ja_chunk) + JA_ALIGN - 1) & ~(size_t)(JA_ALIGN - 1);
    ja_chunk *h = a->head;
    if (!h || h->size - h->used < n) {
        size_t sz = n > JA_CHUNK / 2 ? n : JA_CHUNK;
        if (sz > a->cap || a->total > a->cap - sz) return NULL;
        h = clb_malloc(hdr + sz);
        if (!h) return NULL;
        h->size = sz;
        h->used = 0;
        a->total += sz;
        if (n > JA_CHUNK / 2 && a->head) {
            /* big block: keep the current chunk in front for small allocations */
            h->next = a->head->next;
            a->head->next = h;
            h->used = n;
            return (char *)h + hdr;
        }
        h->next = a->head;
        a->head = h;
    }
    void *p = (char *)h + hdr + h->used;
    h->used += n;
    return p;
}

void clb_ja_release(jarena *a) {
    ja_chunk *h = a->head;
    while (h) {
        ja_chunk *nx = h->next;
        clb_free(h);
        h = nx;
    }
    a->head = NULL;
    a->total = 0;
}

char *clb_ja_strndup(jarena *a, const char *s, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *d = clb_ja_alloc(a, n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* ---- byte buffer ---- */

void clb_jb_init(jbuf *b, jarena *a, size_t limit) {
    memset(b, 0, sizeof *b);
    b->a = a;
    b->limit = limit;
}

static bool jb_reserve(jbuf *b, size_t extra) {
    if (b->oom || b->over) return false;
    if (extra > b->limit || b->n > b->limit - extra) {
        b->over = true;
        return false;
    }
    size_t need = b->n + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = clb_ja_alloc(b->a, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
    return true;
}

void clb_jb_put(jbuf *b, const char *s, size_t n) {
    if (n == 0 || !jb_reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void clb_jb_putc(jbuf *b, char c) { clb_jb_put(b, &c, 1); }
void clb_jb_puts(jbuf *b, const char *s) { clb_jb_put(b, s, strlen(s)); }

void clb_jb_printf(jbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) clb_jb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* ---- constructors ---- */

jv clb_jv_undef(const char *name) {
    jv v;
    memset(&v, 0, sizeof v);
    v.t = JV_UNDEF;
    v.u.s.p = name ? name : "";
    v.u.s.n = strlen(v.u.s.p);
    return v;
}
jv clb_jv_none(void) {
    jv v;
    memset(&v, 0, sizeof v);
    v.t = JV_NONE;
    return v;
}
jv clb_jv_bool(bool b) {
    jv v = clb_jv_none();
    v.t = JV_BOOL;
    v.u.b = b;
    return v;
}
jv clb_jv_int(int64_t i) {
    jv v = clb_jv_none();
    v.t = JV_INT;
    v.u.i = i;
    return v;
}
jv clb_jv_float(double f) {
    jv v = clb_jv_none();
    v.t = JV_FLOAT;
    v.u.f = f;
    return v;
}
jv clb_jv_str(const char *p, size_t n) {
    jv v = clb_jv_none();
    v.t = JV_STR;
    v.u.s.p = p ? p : "";
    v.u.s.n = p ? n : 0;
    return v;
}
jv clb_jv_cstr(const char *s) { return clb_jv_str(s, strlen(s)); }

jv clb_jv_list_new(jarena *a, size_t cap) {
    jlist *l = clb_ja_alloc(a, sizeof *l);
    if (!l) return clb_jv_undef(NULL);
    l->n = 0;
    l->cap = cap;
    l->items = cap ? clb_ja_alloc(a, cap * sizeof(jv)) : NULL;
    if (cap && !l->items) return clb_jv_undef(NULL);
    jv v = clb_jv_none();
    v.t = JV_LIST;
    v.u.l = l;
    return v;
}

jv clb_jv_dict_new(jarena *a, size_t cap) {
    jdict *d = clb_ja_alloc(a, sizeof *d);
    if (!d) return clb_jv_undef(NULL);
    d->n = 0;
    d->cap = cap;
    d->keys = cap ? clb_ja_alloc(a, cap * sizeof(jv)) : NULL;
    d->vals = cap ? clb_ja_alloc(a, cap * sizeof(jv)) : NULL;
    if (cap && (!d->keys || !d->vals)) return clb_jv_undef(NULL);
    jv v = clb_jv_none();
    v.t = JV_DICT;
    v.u.d = d;
    return v;
}

bool clb_jl_push(jarena *a, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *it = clb_ja_alloc(a, cap * sizeof(jv));
        if (!it) return false;
        if (l->n) memcpy(it, l->items, l->n * sizeof(jv));
        l->items = it;
        l->cap = cap;
    }
    l->items[l->n++] = v;
    return true;
}

const jv *clb_jd_get(const jdict *d, jv key) {
    for (size_t i = 0; i < d->n; i++)
        if (clb_jv_equal(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

const jv *clb_jd_get_str(const jdict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++) {
        const jv *kk = &d->keys[i];
        if (kk->t == JV_STR && kk->u.s.n == n && memcmp(kk->u.s.p, k, n) == 0) return &d->vals[i];
    }
    return NULL;
}

bool clb_jd_set(jarena *a, jdict *d, jv key, jv val) {
    for (size_t i = 0; i < d->n; i++) {
        if (clb_jv_equal(d->keys[i], key)) {
            d->vals[i] = val;
            return true;
        }
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *k = clb_ja_alloc(a, cap * sizeof(jv)), *v = clb_ja_alloc(a, cap * sizeof(jv));
        if (!k || !v) return false;
        if (d->n) {
            memcpy(k, d->keys, d->n * sizeof(jv));
            memcpy(v, d->vals, d->n * sizeof(jv));
        }
        d->keys = k;
        d->vals = v;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    return true;
}

/* ---- semantics ---- */

bool clb_jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s.n > 0;
    case JV_LIST: return v.u.l->n > 0;
    case JV_DICT: return (v.flags & JV_F_NS) || v.u.d->n > 0;
    default: return true;
    }
}

bool clb_jv_is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }

double clb_jv_num(jv v) {
    if (v.t == JV_BOOL) return v.u.b ? 1.0 : 0.0;
    if (v.t == JV_INT) return (double)v.u.i;
    if (v.t == JV_FLOAT) return v.u.f;
    return 0.0;
}

bool clb_jv_equal(jv a, jv b) {
    if (clb_jv_is_num(a) && clb_jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = a.t == JV_BOOL ? a.u.b : a.u.i, y = b.t == JV_BOOL ? b.u.b : b.u.i;
            return x == y;
        }
        return clb_jv_num(a) == clb_jv_num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!clb_jv_equal(a.u.l->items[i], b.u.l->items[i])) return false;
        return true;
    case JV_DICT:
        if (a.u.d == b.u.d) return true;
        if ((a.flags & JV_F_NS) || (b.flags & JV_F_NS)) return false;
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            const jv *o = clb_jd_get(b.u.d, a.u.d->keys[i]);
            if (!o || !clb_jv_equal(a.u.d->vals[i], *o)) return false;
        }
        return true;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

const char *clb_jv_type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return (v.flags & JV_F_TUPLE) ? "tuple" : "list";
    case JV_DICT: return (v.flags & JV_F_NS) ? "Namespace" : "dict";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "builtin_function_or_method";
    case JV_LOOP: return "LoopContext";
    default: return "object";
    }
}

/* Python repr(float): shortest digits that round-trip; exponent form outside 1e-4..1e16 */
void clb_fmt_float(double x, char out[40]) {
    if (isnan(x)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(x)) {
        strcpy(out, x < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX */
    const char *p = tmp;
    char *o = out;
    if (*p == '-') *o++ = *p++;
    char digits[20];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int e10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int decpt = e10 + 1; /* value = 0.DIGITS * 10^decpt */
    if (x == 0.0) decpt = 1;
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -decpt; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else if (decpt >= nd) {
            for (int i = 0; i < nd; i++) *o++ = digits[i];
            for (int i = nd; i < decpt; i++) *o++ = '0';
            *o++ = '.';
            *o++ = '0';
        } else {
            for (int i = 0; i < nd; i++) {
                if (i == decpt) *o++ = '.';
                *o++ = digits[i];
            }
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        int ex = decpt - 1;
        snprintf(o, (size_t)(out + 40 - o), "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
}

static void write_str_repr(jbuf *b, jstr s) {
    bool has_sq = memchr(s.p, '\'', s.n) != NULL, has_dq = memchr(s.p, '"', s.n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    clb_jb_putc(b, q);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch == '\\') clb_jb_puts(b, "\\\\");
        else if (ch == (unsigned char)q) {
            clb_jb_putc(b, '\\');
            clb_jb_putc(b, q);
        } else if (ch == '\n') clb_jb_puts(b, "\\n");
        else if (ch == '\r') clb_jb_puts(b, "\\r");
        else if (ch == '\t') clb_jb_puts(b, "\\t");
        else if (ch < 0x20 || ch == 0x7f) clb_jb_printf(b, "\\x%02x", ch);
        else if (ch == 0xC2 && i + 1 < s.n && (unsigned char)s.p[i + 1] >= 0x80 &&
                 (unsigned char)s.p[i + 1] <= 0xA0) {
            /* C1 controls and NBSP are not printable for Python's repr */
            clb_jb_printf(b, "\\x%02x", (unsigned char)s.p[i + 1]);
            i++;
        } else clb_jb_putc(b, (char)ch);
    }
    clb_jb_putc(b, q);
}

void clb_jv_write_repr(jbuf *b, jv v) {
    if (v.t == JV_STR) {
        write_str_repr(b, v.u.s);
    } else if (v.t == JV_LIST) {
        bool tup = v.flags & JV_F_TUPLE;
        clb_jb_putc(b, tup ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) clb_jb_puts(b, ", ");
            clb_jv_write_repr(b, v.u.l->items[i]);
        }
        if (tup && v.u.l->n == 1) clb_jb_putc(b, ',');
        clb_jb_putc(b, tup ? ')' : ']');
    } else if (v.t == JV_DICT && !(v.flags & JV_F_NS)) {
        clb_jb_putc(b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) clb_jb_puts(b, ", ");
            clb_jv_write_repr(b, v.u.d->keys[i]);
            clb_jb_puts(b, ": ");
            clb_jv_write_repr(b, v.u.d->vals[i]);
        }
        clb_jb_putc(b, '}');
    } else if (v.t == JV_UNDEF) {
        clb_jb_puts(b, "Undefined");
    } else {
        clb_jv_write_str(b, v);
    }
}

void clb_jv_write_str(jbuf *b, jv v) {
    char tmp[40];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: clb_jb_puts(b, "None"); return;
    case JV_BOOL: clb_jb_puts(b, v.u.b ? "True" : "False"); return;
    case JV_INT: clb_jb_printf(b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT: clb_fmt_float(v.u.f, tmp); clb_jb_puts(b, tmp); return;
    case JV_STR: clb_jb_put(b, v.u.s.p, v.u.s.n); return;
    case JV_LIST: clb_jv_write_repr(b, v); return;
    case JV_DICT:
        if (v.flags & JV_F_NS) clb_jb_puts(b, "<Namespace>");
        else clb_jv_write_repr(b, v);
        return;
    case JV_MACRO: clb_jb_printf(b, "<Macro '%s'>", v.u.m->name ? v.u.m->name : "caller"); return;
    case JV_FUNC: clb_jb_puts(b, "<built-in function>"); return;
    case JV_LOOP: clb_jb_puts(b, "<LoopContext>"); return;
    default: return;
    }
}

jv clb_jv_to_str(jarena *a, jv v) {
    if (v.t == JV_STR) return v;
    jbuf b;
    clb_jb_init(&b, a, CLB_JINJA_MAX_OUTPUT);
    clb_jv_write_str(&b, v);
    if (b.oom || b.over) return clb_jv_undef(NULL);
    return clb_jv_str(b.p ? b.p : "", b.n);
}

static void write_json_str(jbuf *b, const char *p, size_t n) {
    clb_jb_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        switch (ch) {
        case '"': clb_jb_puts(b, "\\\""); break;
        case '\\': clb_jb_puts(b, "\\\\"); break;
        case '\n': clb_jb_puts(b, "\\n"); break;
        case '\r': clb_jb_puts(b, "\\r"); break;
        case '\t': clb_jb_puts(b, "\\t"); break;
        case '\b': clb_jb_puts(b, "\\b"); break;
        case '\f': clb_jb_puts(b, "\\f"); break;
        default:
            if (ch < 0x20) clb_jb_printf(b, "\\u%04x", ch);
            else clb_jb_putc(b, (char)ch);
        }
    }
    clb_jb_putc(b, '"');
}

static void json_newline(jbuf *b, int indent, int level) {
    clb_jb_putc(b, '\n');
    for (int i = 0; i < indent * level; i++) clb_jb_putc(b, ' ');
}

static bool json_key(jbuf *b, jv k, const char **bad) {
    char tmp[40];
    switch (k.t) {
    case JV_STR: write_json_str(b, k.u.s.p, k.u.s.n); return true;
    case JV_INT: clb_jb_printf(b, "\"%lld\"", (long long)k.u.i); return true;
    case JV_FLOAT: clb_fmt_float(k.u.f, tmp); clb_jb_printf(b, "\"%s\"", tmp); return true;
    case JV_BOOL: clb_jb_puts(b, k.u.b ? "\"true\"" : "\"false\""); return true;
    case JV_NONE: clb_jb_puts(b, "\"null\""); return true;
    default: *bad = clb_jv_type_name(k); return false;
    }
}

static int key_cmp(jv a, jv b) {
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = CLB_MIN(a.u.s.n, b.u.s.n);
        int r = memcmp(a.u.s.p, b.u.s.p, n);
        return r ? r : (a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n);
    }
    double x = clb_jv_num(a), y = clb_jv_num(b);
    return x < y ? -1 : x > y;
}

static bool json_rec(jbuf *b, jv v, int indent, const char *isep, const char *ksep, bool sort,
                     const char **bad, int level) {
    char tmp[40];
    if (level > 200) {
        *bad = "nesting too deep for";
        return false;
    }
    switch (v.t) {
    case JV_NONE: clb_jb_puts(b, "null"); return true;
    case JV_BOOL: clb_jb_puts(b, v.u.b ? "true" : "false"); return true;
    case JV_INT: clb_jb_printf(b, "%lld", (long long)v.u.i); return true;
    case JV_FLOAT:
        if (isnan(v.u.f)) clb_jb_puts(b, "NaN");
        else if (isinf(v.u.f)) clb_jb_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            clb_fmt_float(v.u.f, tmp);
            clb_jb_puts(b, tmp);
        }
        return true;
    case JV_STR: write_json_str(b, v.u.s.p, v.u.s.n); return true;
    case JV_LIST: {
        const jlist *l = v.u.l;
        if (l->n == 0) {
            clb_jb_puts(b, "[]");
            return true;
        }
        clb_jb_putc(b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) clb_jb_puts(b, isep);
            if (indent >= 0) json_newline(b, indent, level + 1);
            if (!json_rec(b, l->items[i], indent, isep, ksep, sort, bad, level + 1)) return false;
        }
        if (indent >= 0) json_newline(b, indent, level);
        clb_jb_putc(b, ']');
        return true;
    }
    case JV_DICT: {
        if (v.flags & JV_F_NS) break;
        const jdict *d = v.u.d;
        if (d->n == 0) {
            clb_jb_puts(b, "{}");
            return true;
        }
        /* order: insertion, or sorted by key (insertion sort over an index array) */
        size_t order_small[64], *order = order_small;
        if (d->n > 64) {
            order = clb_ja_alloc(b->a, d->n * sizeof *order);
            if (!order) {
                b->oom = true;
                return true;
            }
        }
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (sort) {
            for (size_t i = 1; i < d->n; i++) {
                size_t x = order[i], j = i;
                while (j > 0 && key_cmp(d->keys[order[j - 1]], d->keys[x]) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        clb_jb_putc(b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) clb_jb_puts(b, isep);
            if (indent >= 0) json_newline(b, indent, level + 1);
            if (!json_key(b, d->keys[order[i]], bad)) return false;
            clb_jb_puts(b, ksep);
            if (!json_rec(b, d->vals[order[i]], indent, isep, ksep, sort, bad, level + 1))
                return false;
        }
        if (indent >= 0) json_newline(b, indent, level);
        clb_jb_putc(b, '}');
        return true;
    }
    default: break;
    }
    *bad = clb_jv_type_name(v);
    return false;
}

bool clb_jv_write_json(jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep,
                   bool sort_keys, const char **bad) {
    if (!item_sep) item_sep = indent >= 0 ? "," : ", ";
    if (!key_sep) key_sep = ": ";
    return json_rec(b, v, indent, item_sep, key_sep, sort_keys, bad, 0);
}

jv clb_jv_from_json(jarena *a, const cJSON *j, int depth) {
    if (!j || depth > 200) return clb_jv_undef(NULL);
    if (cJSON_IsNull(j)) return clb_jv_none();
    if (cJSON_IsBool(j)) return clb_jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0) return clb_jv_int((int64_t)d);
        return clb_jv_float(d);
    }
    if (cJSON_IsString(j)) return clb_jv_cstr(j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        jv l = clb_jv_list_new(a, (size_t)cJSON_GetArraySize(j));
        if (l.t != JV_LIST) return l;
        for (const cJSON *e = j->child; e; e = e->next) {
            jv x = clb_jv_from_json(a, e, depth + 1);
            if (x.t == JV_UNDEF || !clb_jl_push(a, l.u.l, x)) return clb_jv_undef(NULL);
        }
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv d = clb_jv_dict_new(a, (size_t)cJSON_GetArraySize(j));
        if (d.t != JV_DICT) return d;
        for (const cJSON *e = j->child; e; e = e->next) {
            jv x = clb_jv_from_json(a, e, depth + 1);
            if (x.t == JV_UNDEF || !clb_jd_set(a, d.u.d, clb_jv_cstr(e->string ? e->string : ""), x))
                return clb_jv_undef(NULL);
        }
        return d;
    }
    return clb_jv_undef(NULL);
}

/* ---- UTF-8 ---- */

size_t clb_u8_next(const char *p, size_t n, size_t i) {
    unsigned char c = (unsigned char)p[i];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    size_t j = i + 1;
    while (j < n && j < i + len && ((unsigned char)p[j] & 0xC0) == 0x80) j++;
    return j;
}

size_t clb_u8_len(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i = clb_u8_next(p, n, i)) k++;
    return k;
}

size_t clb_u8_offset(const char *p, size_t n, size_t k) {
    size_t i = 0;
    while (k > 0 && i < n) {
        i = clb_u8_next(p, n, i);
        k--;
    }
    return i;
}

bool clb_u8_space_at(const char *p, size_t n, size_t i, size_t *len) {
    unsigned char c = (unsigned char)p[i];
    *len = 1;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return true;
    if (c < 0x80) return false;
    size_t j = clb_u8_next(p, n, i);
    uint32_t cp = 0;
    if (j - i == 2) cp = ((c & 0x1Fu) << 6) | ((unsigned char)p[i + 1] & 0x3Fu);
    else if (j - i == 3)
        cp = ((c & 0x0Fu) << 12) | (((unsigned char)p[i + 1] & 0x3Fu) << 6) |
             ((unsigned char)p[i + 2] & 0x3Fu);
    else return false;
    bool sp = cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
              cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
    if (sp) *len = j - i;
    return sp;
}
