/* jinja_builtins.c — filters, tests, string/dict/loop methods and global functions of the
   Jinja subset, with Python/Jinja2 semantics (case mapping is ASCII-only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja_impl.h"

#define CHECK(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)


/* positional argument pos, or keyword `name` */
bool clb_getarg(const jargs *A, size_t pos, const char *name, jv *out) {
    if (pos < A->n) {
        *out = A->a[pos];
        return true;
    }
    for (size_t k = 0; name && k < A->nk; k++) {
        if (strcmp(A->kn[k], name) == 0) {
            *out = A->kv[k];
            return true;
        }
    }
    return false;
}

jv clb_argor(const jargs *A, size_t pos, const char *name, jv dflt) {
    jv v;
    return clb_getarg(A, pos, name, &v) ? v : dflt;
}

int clb_need_str(jctx *c, jv v, const char *what, jstr *out) {
    if (v.t != JV_STR) return clb_jerr(c, "%s expects a string, got '%s'", what, clb_jv_type_name(v));
    *out = v.u.s;
    return 0;
}

int clb_mkstr(jctx *c, jbuf *b, jv *out) {
    if (b->over) return clb_jerr_limit(c, "string size");
    if (b->oom) return clb_jerr_oom(c);
    *out = clb_jv_str(b->p ? b->p : "", b->n);
    return 0;
}

int clb_as_str(jctx *c, jv v, jstr *out) {
    jv s = clb_jv_to_str(c->a, v);
    if (s.t != JV_STR) return clb_jerr_oom(c);
    *out = s.u.s;
    return 0;
}

/* ---- iteration and lookup ---- */

int clb_jiter(jctx *c, jv v, jlist **out) {
    switch (v.t) {
    case JV_LIST: *out = v.u.l; return 0;
    case JV_DICT: {
        if (v.flags & JV_F_NS) break;
        jv l = clb_jv_list_new(c->a, v.u.d->n);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        for (size_t i = 0; i < v.u.d->n; i++) l.u.l->items[l.u.l->n++] = v.u.d->keys[i];
        *out = l.u.l;
        return 0;
    }
    case JV_STR: {
        jv l = clb_jv_list_new(c->a, v.u.s.n);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t j = clb_u8_next(v.u.s.p, v.u.s.n, i);
            l.u.l->items[l.u.l->n++] = clb_jv_str(v.u.s.p + i, j - i);
            i = j;
        }
        *out = l.u.l;
        return 0;
    }
    case JV_UNDEF: {
        jv l = clb_jv_list_new(c->a, 0);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        *out = l.u.l;
        return 0;
    }
    default: break;
    }
    return clb_jerr(c, "'%s' object is not iterable", clb_jv_type_name(v));
}

bool clb_jloop_attr(jctx *c, const struct jloop *l, const char *name, jv *out) {
    (void)c;
    size_t i = l->index0, n = l->length;
    if (!strcmp(name, "index")) *out = clb_jv_int((int64_t)i + 1);
    else if (!strcmp(name, "index0")) *out = clb_jv_int((int64_t)i);
    else if (!strcmp(name, "revindex")) *out = clb_jv_int((int64_t)(n - i));
    else if (!strcmp(name, "revindex0")) *out = clb_jv_int((int64_t)(n - i - 1));
    else if (!strcmp(name, "first")) *out = clb_jv_bool(i == 0);
    else if (!strcmp(name, "last")) *out = clb_jv_bool(i + 1 == n);
    else if (!strcmp(name, "length")) *out = clb_jv_int((int64_t)n);
    else if (!strcmp(name, "depth")) *out = clb_jv_int(l->depth);
    else if (!strcmp(name, "depth0")) *out = clb_jv_int(l->depth - 1);
    else if (!strcmp(name, "previtem")) *out = i > 0 ? l->items->items[i - 1] : clb_jv_undef("previtem");
    else if (!strcmp(name, "nextitem")) *out = i + 1 < n ? l->items->items[i + 1] : clb_jv_undef("nextitem");
    else return false;
    return true;
}

int clb_jlookup(jctx *c, jv obj, jv key, bool attr_first, jv *out) {
    (void)attr_first;
    char kname[64];
    if (key.t == JV_STR) snprintf(kname, sizeof kname, "%.*s", (int)CLB_MIN(key.u.s.n, 60), key.u.s.p);
    else kname[0] = 0;
    switch (obj.t) {
    case JV_DICT: {
        const jv *v = clb_jd_get(obj.u.d, key);
        if (v) {
            *out = *v;
            return 0;
        }
        break;
    }
    case JV_LIST:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = key.t == JV_BOOL ? key.u.b : key.u.i, n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                *out = obj.u.l->items[i];
                return 0;
            }
        }
        break;
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = key.t == JV_BOOL ? key.u.b : key.u.i;
            int64_t n = (int64_t)clb_u8_len(obj.u.s.p, obj.u.s.n);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t b = clb_u8_offset(obj.u.s.p, obj.u.s.n, (size_t)i);
                *out = clb_jv_str(obj.u.s.p + b, clb_u8_next(obj.u.s.p, obj.u.s.n, b) - b);
                return 0;
            }
        }
        break;
    case JV_LOOP:
        if (key.t == JV_STR && clb_jloop_attr(c, obj.u.loop, kname, out)) return 0;
        break;
    case JV_UNDEF: return clb_jerr_undef(c, obj);
    default: break;
    }
    /* missing: an undefined value named after the key, for a later error message */
    char *nm = key.t == JV_STR ? clb_ja_strndup(c->a, key.u.s.p, key.u.s.n) : NULL;
    *out = clb_jv_undef(nm);
    return 0;
}

/* "a.b.0" attribute paths used by map/selectattr/sort/... */
static int attr_path(jctx *c, jv item, jstr path, jv *out) {
    size_t b = 0;
    jv v = item;
    while (b <= path.n) {
        size_t e = b;
        while (e < path.n && path.p[e] != '.') e++;
        jv key = clb_jv_str(path.p + b, e - b);
        bool digits = e > b;
        for (size_t i = b; i < e; i++) digits = digits && path.p[i] >= '0' && path.p[i] <= '9';
        if (digits && e - b < 18) key = clb_jv_int(strtoll(path.p + b, NULL, 10));
        if (v.t == JV_UNDEF) return clb_jerr_undef(c, v);
        CHECK(clb_jlookup(c, v, key, false, &v));
        b = e + 1;
    }
    *out = v;
    return 0;
}

/* ---- tests ---- */

int clb_jtest(jctx *c, const char *name, jv in, const jv *args, size_t nargs, bool *out) {
    jv a0 = nargs ? args[0] : clb_jv_undef(NULL);
    bool isint = in.t == JV_INT;
    if (!strcmp(name, "defined")) *out = in.t != JV_UNDEF;
    else if (!strcmp(name, "undefined")) *out = in.t == JV_UNDEF;
    else if (!strcmp(name, "none")) *out = in.t == JV_NONE;
    else if (!strcmp(name, "true")) *out = in.t == JV_BOOL && in.u.b;
    else if (!strcmp(name, "false")) *out = in.t == JV_BOOL && !in.u.b;
    else if (!strcmp(name, "boolean")) *out = in.t == JV_BOOL;
    else if (!strcmp(name, "integer")) *out = isint;
    else if (!strcmp(name, "float")) *out = in.t == JV_FLOAT;
    else if (!strcmp(name, "number")) *out = clb_jv_is_num(in);
    else if (!strcmp(name, "string")) *out = in.t == JV_STR;
    else if (!strcmp(name, "mapping")) *out = in.t == JV_DICT && !(in.flags & JV_F_NS);
    else if (!strcmp(name, "iterable") || !strcmp(name, "sequence"))
        *out = in.t == JV_STR || in.t == JV_LIST || (in.t == JV_DICT && !(in.flags & JV_F_NS));
    else if (!strcmp(name, "callable")) *out = in.t == JV_MACRO || in.t == JV_FUNC;
    else if (!strcmp(name, "sameas")) {
        *out = in.t == a0.t && (clb_jv_is_num(in) || in.t == JV_NONE || in.t == JV_UNDEF ? clb_jv_equal(in, a0)
                                : in.t == JV_STR ? in.u.s.p == a0.u.s.p && in.u.s.n == a0.u.s.n
                                                 : in.u.l == a0.u.l);
    } else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) *out = clb_jv_equal(in, a0);
    else if (!strcmp(name, "ne") || !strcmp(name, "!=")) *out = !clb_jv_equal(in, a0);
    else if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<") ||
             !strcmp(name, "le") || !strcmp(name, "<=") || !strcmp(name, "gt") ||
             !strcmp(name, "greaterthan") || !strcmp(name, ">") || !strcmp(name, "ge") ||
             !strcmp(name, ">=")) {
        int o;
        CHECK(clb_jorder(c, in, a0, name, &o));
        bool less = name[0] == 'l' || name[0] == '<';
        bool or_eq = !strcmp(name, "le") || !strcmp(name, "ge") || !strcmp(name, "<=") || !strcmp(name, ">=");
        *out = less ? (or_eq ? o <= 0 : o < 0) : (or_eq ? o >= 0 : o > 0);
    } else if (!strcmp(name, "in")) CHECK(clb_jcontains(c, in, a0, out));
    else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (!isint && in.t != JV_BOOL) return clb_jerr(c, "test '%s' needs an integer", name);
        int64_t x = in.t == JV_BOOL ? in.u.b : in.u.i;
        if (name[0] == 'o') *out = (x % 2) != 0;
        else if (name[0] == 'e') *out = x % 2 == 0;
        else {
            if (a0.t != JV_INT || a0.u.i == 0) return clb_jerr(c, "divisibleby needs a non-zero integer");
            *out = a0.u.i == -1 || x % a0.u.i == 0; /* INT64_MIN % -1 overflows */
        }
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jstr s;
        CHECK(clb_as_str(c, in, &s));
        bool up = name[0] == 'u', any = false, ok = true;
        for (size_t i = 0; i < s.n; i++) {
            if (clb_alpha_c(s.p[i])) {
                any = true;
                if ((s.p[i] >= 'a') == up) ok = false;
            }
        }
        *out = any && ok;
    } else if (!strcmp(name, "escaped")) *out = false;
    else return clb_jerr(c, "no test named '%s'", name);
    return 0;
}

/* ---- sorting (stable merge sort with Jinja's case-insensitive default) ---- */

typedef struct sort_ctx {
    jctx *c;
    bool case_sensitive, reverse, by_value; /* by_value: dictsort by='value' */
    const jstr *attr;
    int rc;
} sort_ctx;

static jv sort_key(sort_ctx *S, jv v) {
    if (S->attr && !S->rc) S->rc = attr_path(S->c, v, *S->attr, &v);
    if (v.t == JV_STR && !S->case_sensitive) {
        jv low;
        if (!S->rc && clb_str_case(S->c, v.u.s, 0, &low) == 0) v = low;
    }
    return v;
}

static int sort_cmp(sort_ctx *S, jv a, jv b) {
    if (S->rc) return 0;
    int o = 0;
    S->rc = clb_jorder(S->c, sort_key(S, a), sort_key(S, b), "<", &o);
    return S->reverse ? -o : o;
}

static void merge_sort(sort_ctx *S, jv *v, jv *tmp, size_t n) {
    if (n < 2 || S->rc) return;
    size_t h = n / 2;
    merge_sort(S, v, tmp, h);
    merge_sort(S, v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = sort_cmp(S, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static int sorted_copy(jctx *c, jlist *src, sort_ctx *S, jv *out) {
    jv l = clb_jv_list_new(c->a, src->n);
    jv *tmp = src->n ? clb_ja_alloc(c->a, src->n * sizeof(jv)) : NULL;
    if (l.t != JV_LIST || (src->n && !tmp)) return clb_jerr_oom(c);
    if (src->n) memcpy(l.u.l->items, src->items, src->n * sizeof(jv));
    l.u.l->n = src->n;
    merge_sort(S, l.u.l->items, tmp, src->n);
    if (S->rc) return S->rc;
    *out = l;
    return 0;
}

/* ---- filters ---- */

static int filter_tojson(jctx *c, jv in, const jargs *A, jv *out) {
    jv ind = clb_argor(A, 1, "indent", clb_jv_none()), seps = clb_argor(A, 2, "separators", clb_jv_none());
    jv sk = clb_argor(A, 3, "sort_keys", clb_jv_bool(false));
    int indent = -1;
    if (ind.t == JV_INT) indent = (int)CLB_MAX(0, CLB_MIN(ind.u.i, 64));
    else if (ind.t != JV_NONE) return clb_jerr(c, "tojson: indent must be an integer");
    const char *isep = NULL, *ksep = NULL;
    if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->items[0].t == JV_STR && seps.u.l->items[1].t == JV_STR) {
        isep = clb_ja_strndup(c->a, seps.u.l->items[0].u.s.p, seps.u.l->items[0].u.s.n);
        ksep = clb_ja_strndup(c->a, seps.u.l->items[1].u.s.p, seps.u.l->items[1].u.s.n);
        if (!isep || !ksep) return clb_jerr_oom(c);
    } else if (seps.t != JV_NONE) return clb_jerr(c, "tojson: separators must be a pair of strings");
    jbuf b;
    clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
    const char *bad = NULL;
    if (!clb_jv_write_json(&b, in, indent, isep, ksep, clb_jv_truthy(sk), &bad))
        return clb_jerr(c, "Object of type %s is not JSON serializable", bad ? bad : "?");
    return clb_mkstr(c, &b, out);
}

static int filter_indent(jctx *c, jstr s, const jargs *A, jv *out) {
    jv w = clb_argor(A, 0, "width", clb_jv_int(4));
    bool first = clb_jv_truthy(clb_argor(A, 1, "first", clb_jv_bool(false)));
    bool blank = clb_jv_truthy(clb_argor(A, 2, "blank", clb_jv_bool(false)));
    jstr ind;
    char spaces[65];
    if (w.t == JV_STR) ind = w.u.s;
    else {
        int64_t n = w.t == JV_INT ? CLB_MAX(0, CLB_MIN(w.u.i, 64)) : 4;
        memset(spaces, ' ', (size_t)n);
        ind.p = spaces;
        ind.n = (size_t)n;
    }
    jlist *lines;
    CHECK(clb_do_splitlines(c, s, &lines));
    jbuf b;
    clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
    if (first) clb_jb_put(&b, ind.p, ind.n);
    /* Jinja appends "\n" before splitlines, so a trailing newline yields a final empty line */
    bool trailing = s.n > 0 && (s.p[s.n - 1] == '\n' || s.p[s.n - 1] == '\r');
    size_t nl = lines->n + (trailing ? 1 : 0);
    for (size_t i = 0; i < nl; i++) {
        jstr line = i < lines->n ? lines->items[i].u.s : (jstr){"", 0};
        if (i > 0) {
            clb_jb_putc(&b, '\n');
            if (blank || line.n) clb_jb_put(&b, ind.p, ind.n);
        }
        clb_jb_put(&b, line.p, line.n);
    }
    return clb_mkstr(c, &b, out);
}

static int to_int(jv in, jv dflt, jv *out) {
    if (in.t == JV_INT) *out = in;
    else if (in.t == JV_BOOL) *out = clb_jv_int(in.u.b);
    else if (in.t == JV_FLOAT && isfinite(in.u.f) && fabs(in.u.f) < 9.2e18) *out = clb_jv_int((int64_t)in.u.f);
    else if (in.t == JV_STR) {
        jstr s = clb_do_strip(in.u.s, NULL, true, true);
        char buf[64];
        if (s.n == 0 || s.n >= sizeof buf) {
            *out = dflt;
            return 0;
        }
        size_t k = 0;
        for (size_t i = 0; i < s.n; i++)
            if (s.p[i] != '_') buf[k++] = s.p[i];
        buf[k] = 0;
        char *end;
        long long v = strtoll(buf, &end, 10);
        if (*end == 0) *out = clb_jv_int(v);
        else {
            double d = strtod(buf, &end);
            *out = (*end == 0 && isfinite(d) && fabs(d) < 9.2e18) ? clb_jv_int((int64_t)d) : dflt;
        }
    } else *out = dflt;
    return 0;
}

static int filter_select(jctx *c, jlist *items, bool by_attr, bool reject, const jargs *A, jv *out) {
    jv l = clb_jv_list_new(c->a, 0);
    if (l.t != JV_LIST) return clb_jerr_oom(c);
    size_t ti = by_attr ? 1 : 0;
    jv attr = clb_jv_undef(NULL), test = clb_jv_undef(NULL);
    if (by_attr && (!clb_getarg(A, 0, NULL, &attr) || attr.t != JV_STR))
        return clb_jerr(c, "selectattr/rejectattr need an attribute name");
    bool has_test = clb_getarg(A, ti, NULL, &test);
    if (has_test && test.t != JV_STR) return clb_jerr(c, "select: the test name must be a string");
    char tname[64] = "";
    if (has_test) snprintf(tname, sizeof tname, "%.*s", (int)CLB_MIN(test.u.s.n, 60), test.u.s.p);
    size_t nta = A->n > ti + 1 ? A->n - ti - 1 : 0;
    for (size_t i = 0; i < items->n; i++) {
        jv v = items->items[i];
        if (by_attr) CHECK(attr_path(c, v, attr.u.s, &v));
        bool r;
        if (has_test) CHECK(clb_jtest(c, tname, v, A->a + ti + 1, nta, &r));
        else r = clb_jv_truthy(v);
        if (r != reject && !clb_jl_push(c->a, l.u.l, items->items[i])) return clb_jerr_oom(c);
    }
    *out = l;
    return 0;
}

static int filter_map(jctx *c, jlist *items, const jargs *A, jv *out) {
    jv l = clb_jv_list_new(c->a, items->n);
    if (l.t != JV_LIST) return clb_jerr_oom(c);
    jv attr, dflt = clb_jv_undef(NULL);
    bool has_default = clb_getarg(A, A->n + 100, "default", &dflt);
    if (clb_getarg(A, A->n + 100, "attribute", &attr)) {
        if (attr.t != JV_STR) return clb_jerr(c, "map: attribute must be a string");
        for (size_t i = 0; i < items->n; i++) {
            jv v;
            CHECK(attr_path(c, items->items[i], attr.u.s, &v));
            if (v.t == JV_UNDEF && has_default) v = dflt;
            l.u.l->items[l.u.l->n++] = v;
        }
    } else {
        if (A->n == 0 || A->a[0].t != JV_STR) return clb_jerr(c, "map needs a filter name or attribute=");
        char fname[64];
        snprintf(fname, sizeof fname, "%.*s", (int)CLB_MIN(A->a[0].u.s.n, 60), A->a[0].u.s.p);
        for (size_t i = 0; i < items->n; i++) {
            jv v;
            CHECK(clb_jfilter(c, fname, items->items[i], A->a + 1, A->n - 1, A->kn, A->kv, A->nk, &v));
            l.u.l->items[l.u.l->n++] = v;
        }
    }
    *out = l;
    return 0;
}

static int html_escape(jctx *c, jstr s, jv *out) {
    jbuf b;
    clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
    for (size_t i = 0; i < s.n; i++) {
        switch (s.p[i]) {
        case '&': clb_jb_puts(&b, "&amp;"); break;
        case '<': clb_jb_puts(&b, "&lt;"); break;
        case '>': clb_jb_puts(&b, "&gt;"); break;
        case '"': clb_jb_puts(&b, "&#34;"); break;
        case '\'': clb_jb_puts(&b, "&#39;"); break;
        default: clb_jb_putc(&b, s.p[i]);
        }
    }
    return clb_mkstr(c, &b, out);
}

static int filter_minmax(jctx *c, jlist *items, const jargs *A, bool want_max, jv *out) {
    sort_ctx S = {c, clb_jv_truthy(clb_argor(A, 0, "case_sensitive", clb_jv_bool(false))), false, false, NULL, 0};
    jv attr;
    if (clb_getarg(A, 1, "attribute", &attr) && attr.t == JV_STR) S.attr = &attr.u.s;
    if (items->n == 0) {
        *out = clb_jv_undef("max");
        return 0;
    }
    jv best = items->items[0];
    for (size_t i = 1; i < items->n; i++) {
        int o = sort_cmp(&S, items->items[i], best);
        if (S.rc) return S.rc;
        if (want_max ? o > 0 : o < 0) best = items->items[i];
    }
    *out = best;
    return 0;
}

int clb_jfilter(jctx *c, const char *name, jv in, const jv *args, size_t nargs, const char **kwn,
            const jv *kwv, size_t nkw, jv *out) {
    jargs A = {args, nargs, kwn, kwv, nkw};
    jstr s;
    jlist *items;
    if (!strcmp(name, "safe") || !strcmp(name, "forceescape_off")) {
        *out = in;
        return 0;
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv dflt = clb_argor(&A, 0, "default_value", clb_jv_str("", 0));
        bool boolean = clb_jv_truthy(clb_argor(&A, 1, "boolean", clb_jv_bool(false)));
        *out = (in.t == JV_UNDEF || (boolean && !clb_jv_truthy(in))) ? dflt : in;
        return 0;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        if (in.t == JV_STR) *out = clb_jv_int((int64_t)clb_u8_len(in.u.s.p, in.u.s.n));
        else if (in.t == JV_LIST) *out = clb_jv_int((int64_t)in.u.l->n);
        else if (in.t == JV_DICT) *out = clb_jv_int((int64_t)in.u.d->n);
        else if (in.t == JV_UNDEF) *out = clb_jv_int(0);
        else return clb_jerr(c, "object of type '%s' has no len()", clb_jv_type_name(in));
        return 0;
    }
    if (!strcmp(name, "string")) {
        CHECK(clb_as_str(c, in, &s));
        *out = clb_jv_str(s.p, s.n);
        return 0;
    }
    if (!strcmp(name, "tojson")) return filter_tojson(c, in, &A, out);
    if (!strcmp(name, "int")) return to_int(in, clb_argor(&A, 0, "default", clb_jv_int(0)), out);
    if (!strcmp(name, "float")) {
        jv dflt = clb_argor(&A, 0, "default", clb_jv_float(0.0));
        if (clb_jv_is_num(in)) *out = clb_jv_float(clb_jv_num(in));
        else if (in.t == JV_STR) {
            jstr t = clb_do_strip(in.u.s, NULL, true, true);
            char buf[64], *end;
            if (t.n == 0 || t.n >= sizeof buf) *out = dflt;
            else {
                memcpy(buf, t.p, t.n);
                buf[t.n] = 0;
                double d = strtod(buf, &end);
                *out = *end ? dflt : clb_jv_float(d);
            }
        } else *out = dflt;
        return 0;
    }
    if (!strcmp(name, "abs")) {
        if (in.t == JV_INT && in.u.i == INT64_MIN) return clb_jerr(c, "integer overflow in abs()");
        if (in.t == JV_INT) *out = clb_jv_int(in.u.i < 0 ? -in.u.i : in.u.i);
        else if (in.t == JV_BOOL) *out = clb_jv_int(in.u.b);
        else if (in.t == JV_FLOAT) *out = clb_jv_float(fabs(in.u.f));
        else return clb_jerr(c, "bad operand type for abs(): '%s'", clb_jv_type_name(in));
        return 0;
    }
    if (!strcmp(name, "round")) {
        jv pv = clb_argor(&A, 0, "precision", clb_jv_int(0)), mv = clb_argor(&A, 1, "method", clb_jv_cstr("common"));
        if (!clb_jv_is_num(in)) return clb_jerr(c, "round: '%s' is not a number", clb_jv_type_name(in));
        int64_t p = pv.t == JV_INT ? CLB_MAX(-20, CLB_MIN(pv.u.i, 20)) : 0;
        double x = clb_jv_num(in), scale = pow(10.0, (double)p);
        if (mv.t == JV_STR && mv.u.s.n == 5 && !memcmp(mv.u.s.p, "floor", 5)) *out = clb_jv_float(floor(x * scale) / scale);
        else if (mv.t == JV_STR && mv.u.s.n == 4 && !memcmp(mv.u.s.p, "ceil", 4)) *out = clb_jv_float(ceil(x * scale) / scale);
        else if (in.t == JV_INT || in.t == JV_BOOL) *out = clb_jv_int(in.t == JV_BOOL ? in.u.b : in.u.i);
        else if (p >= 0) {
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)p, x); /* correctly rounded, ties to even */
            *out = clb_jv_float(strtod(buf, NULL));
        } else *out = clb_jv_float(nearbyint(x * scale) / scale);
        return 0;
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) {
        CHECK(clb_as_str(c, in, &s));
        return html_escape(c, s, out);
    }
    if (!strcmp(name, "items")) {
        if (in.t == JV_UNDEF) {
            *out = clb_jv_list_new(c->a, 0);
            return out->t == JV_LIST ? 0 : clb_jerr_oom(c);
        }
        if (in.t != JV_DICT) return clb_jerr(c, "items: expected a mapping, got '%s'", clb_jv_type_name(in));
        jv l = clb_jv_list_new(c->a, in.u.d->n);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        for (size_t i = 0; i < in.u.d->n; i++) {
            jv t = clb_jv_list_new(c->a, 2);
            if (t.t != JV_LIST) return clb_jerr_oom(c);
            t.flags = JV_F_TUPLE;
            t.u.l->items[0] = in.u.d->keys[i];
            t.u.l->items[1] = in.u.d->vals[i];
            t.u.l->n = 2;
            l.u.l->items[l.u.l->n++] = t;
        }
        *out = l;
        return 0;
    }
    if (!strcmp(name, "dictsort")) {
        jv items_v;
        CHECK(clb_jfilter(c, "items", in, NULL, 0, NULL, NULL, 0, &items_v));
        jv by = clb_argor(&A, 1, "by", clb_jv_cstr("key"));
        sort_ctx S = {c, clb_jv_truthy(clb_argor(&A, 0, "case_sensitive", clb_jv_bool(false))),
                      clb_jv_truthy(clb_argor(&A, 2, "reverse", clb_jv_bool(false))),
                      by.t == JV_STR && by.u.s.n == 5 && !memcmp(by.u.s.p, "value", 5), NULL, 0};
        /* sort by the pair's key (item 0) or value (item 1) */
        jstr path = {S.by_value ? "1" : "0", 1};
        S.attr = &path;
        return sorted_copy(c, items_v.u.l, &S, out);
    }
    /* string filters */
    if (!strcmp(name, "trim") || !strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        CHECK(clb_as_str(c, in, &s));
        jstr chars;
        bool has;
        CHECK(clb_strip_arg(c, &A, &chars, &has));
        bool l = name[0] != 'r', r = name[0] != 'l';
        jstr t = clb_do_strip(s, has ? &chars : NULL, l, r);
        *out = clb_jv_str(t.p, t.n);
        return 0;
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize")) {
        CHECK(clb_as_str(c, in, &s));
        return clb_str_case(c, s, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : 2, out);
    }
    if (!strcmp(name, "title")) {
        CHECK(clb_as_str(c, in, &s));
        return clb_jinja_title(c, s, out);
    }
    if (!strcmp(name, "replace")) {
        jv o, r;
        jstr os, rs;
        CHECK(clb_as_str(c, in, &s));
        if (!clb_getarg(&A, 0, "old", &o) || !clb_getarg(&A, 1, "new", &r)) return clb_jerr(c, "replace needs old and new");
        CHECK(clb_as_str(c, o, &os));
        CHECK(clb_as_str(c, r, &rs));
        jv cnt = clb_argor(&A, 2, "count", clb_jv_none());
        return clb_do_replace(c, s, os, rs, cnt.t == JV_INT ? cnt.u.i : -1, out);
    }
    if (!strcmp(name, "indent")) {
        CHECK(clb_as_str(c, in, &s));
        return filter_indent(c, s, &A, out);
    }
    if (!strcmp(name, "wordcount")) {
        CHECK(clb_as_str(c, in, &s));
        int64_t n = 0;
        bool inw = false;
        for (size_t i = 0; i < s.n; i++) {
            unsigned char ch = (unsigned char)s.p[i];
            bool w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') || clb_alpha_c((char)ch);
            if (w && !inw) n++;
            inw = w;
        }
        *out = clb_jv_int(n);
        return 0;
    }
    if (!strcmp(name, "attr")) {
        jv nm;
        if (!clb_getarg(&A, 0, "name", &nm)) return clb_jerr(c, "attr needs a name");
        if (in.t == JV_UNDEF) return clb_jerr_undef(c, in);
        return clb_jlookup(c, in, nm, true, out);
    }
    /* sequence filters */
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        CHECK(clb_jiter(c, in, &items));
        *out = items->n ? items->items[name[0] == 'f' ? 0 : items->n - 1] : clb_jv_undef(name);
        return 0;
    }
    if (!strcmp(name, "list")) {
        CHECK(clb_jiter(c, in, &items));
        jv l = clb_jv_list_new(c->a, items->n);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        if (items->n) memcpy(l.u.l->items, items->items, items->n * sizeof(jv));
        l.u.l->n = items->n;
        *out = l;
        return 0;
    }
    if (!strcmp(name, "reverse")) {
        CHECK(clb_jiter(c, in, &items));
        jbuf b;
        clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
        jv l = clb_jv_list_new(c->a, items->n);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        for (size_t i = items->n; i-- > 0;) {
            l.u.l->items[l.u.l->n++] = items->items[i];
            if (in.t == JV_STR) clb_jv_write_str(&b, items->items[i]);
        }
        if (in.t == JV_STR) return clb_mkstr(c, &b, out);
        *out = l;
        return 0;
    }
    if (!strcmp(name, "join")) {
        CHECK(clb_jiter(c, in, &items));
        jv d = clb_argor(&A, 0, "d", clb_jv_str("", 0)), attr;
        jstr ds;
        CHECK(clb_as_str(c, d, &ds));
        bool has_attr = clb_getarg(&A, 1, "attribute", &attr) && attr.t == JV_STR;
        jbuf b;
        clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
        for (size_t i = 0; i < items->n; i++) {
            jv v = items->items[i];
            if (has_attr) CHECK(attr_path(c, v, attr.u.s, &v));
            if (i) clb_jb_put(&b, ds.p, ds.n);
            clb_jv_write_str(&b, v);
        }
        return clb_mkstr(c, &b, out);
    }
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr") || !strcmp(name, "select") ||
        !strcmp(name, "reject")) {
        CHECK(clb_jiter(c, in, &items));
        return filter_select(c, items, strstr(name, "attr") != NULL, name[0] == 'r', &A, out);
    }
    if (!strcmp(name, "map")) {
        CHECK(clb_jiter(c, in, &items));
        return filter_map(c, items, &A, out);
    }
    if (!strcmp(name, "unique")) {
        CHECK(clb_jiter(c, in, &items));
        sort_ctx S = {c, clb_jv_truthy(clb_argor(&A, 0, "case_sensitive", clb_jv_bool(false))), false, false, NULL, 0};
        jv attr;
        if (clb_getarg(&A, 1, "attribute", &attr) && attr.t == JV_STR) S.attr = &attr.u.s;
        jv l = clb_jv_list_new(c->a, 0), seen = clb_jv_list_new(c->a, 0);
        if (l.t != JV_LIST || seen.t != JV_LIST) return clb_jerr_oom(c);
        for (size_t i = 0; i < items->n; i++) {
            jv k = sort_key(&S, items->items[i]);
            if (S.rc) return S.rc;
            bool dup;
            CHECK(clb_jcontains(c, k, seen, &dup));
            if (dup) continue;
            if (!clb_jl_push(c->a, seen.u.l, k) || !clb_jl_push(c->a, l.u.l, items->items[i])) return clb_jerr_oom(c);
        }
        *out = l;
        return 0;
    }
    if (!strcmp(name, "sort")) {
        CHECK(clb_jiter(c, in, &items));
        sort_ctx S = {c, clb_jv_truthy(clb_argor(&A, 1, "case_sensitive", clb_jv_bool(false))),
                      clb_jv_truthy(clb_argor(&A, 0, "reverse", clb_jv_bool(false))), false, NULL, 0};
        jv attr;
        if (clb_getarg(&A, 2, "attribute", &attr) && attr.t == JV_STR) S.attr = &attr.u.s;
        return sorted_copy(c, items, &S, out);
    }
    if (!strcmp(name, "max") || !strcmp(name, "min")) {
        CHECK(clb_jiter(c, in, &items));
        return filter_minmax(c, items, &A, name[1] == 'a', out);
    }
    if (!strcmp(name, "sum")) {
        CHECK(clb_jiter(c, in, &items));
        jv attr, acc = clb_argor(&A, 1, "start", clb_jv_int(0));
        bool has_attr = clb_getarg(&A, 0, "attribute", &attr) && attr.t == JV_STR;
        for (size_t i = 0; i < items->n; i++) {
            jv v = items->items[i];
            if (has_attr) CHECK(attr_path(c, v, attr.u.s, &v));
            jv sum = clb_jv_none();
            if (!clb_jv_is_num(v) || !clb_jv_is_num(acc)) return clb_jerr(c, "sum: '%s' is not a number", clb_jv_type_name(v));
            if (acc.t == JV_FLOAT || v.t == JV_FLOAT) sum = clb_jv_float(clb_jv_num(acc) + clb_jv_num(v));
            else {
                int64_t r;
                if (__builtin_add_overflow(acc.t == JV_BOOL ? acc.u.b : acc.u.i, v.t == JV_BOOL ? v.u.b : v.u.i, &r))
                    return clb_jerr(c, "integer overflow in sum");
                sum = clb_jv_int(r);
            }
            acc = sum;
        }
        *out = acc;
        return 0;
    }
    return clb_jerr(c, "no filter named '%s'", name);
}

int clb_jmethod(jctx *c, jv obj, const char *name, const jv *args, size_t nargs, const char **kwn,
            const jv *kwv, size_t nkw, jv *out, bool *handled) {
    jargs A = {args, nargs, kwn, kwv, nkw};
    *handled = false;
    if (obj.t == JV_STR) return clb_str_method(c, obj.u.s, name, &A, out, handled);
    if (obj.t == JV_DICT && !(obj.flags & JV_F_NS)) {
        *handled = true;
        if (!strcmp(name, "get")) {
            jv k;
            if (!clb_getarg(&A, 0, NULL, &k)) return clb_jerr(c, "get() takes at least 1 argument");
            const jv *v = clb_jd_get(obj.u.d, k);
            *out = v ? *v : clb_argor(&A, 1, NULL, clb_jv_none());
            return 0;
        }
        if (!strcmp(name, "items")) return clb_jfilter(c, "items", obj, NULL, 0, NULL, NULL, 0, out);
        if (!strcmp(name, "keys") || !strcmp(name, "values")) {
            jv l = clb_jv_list_new(c->a, obj.u.d->n);
            if (l.t != JV_LIST) return clb_jerr_oom(c);
            for (size_t i = 0; i < obj.u.d->n; i++)
                l.u.l->items[l.u.l->n++] = name[0] == 'k' ? obj.u.d->keys[i] : obj.u.d->vals[i];
            *out = l;
            return 0;
        }
        if (!strcmp(name, "update") || !strcmp(name, "pop") || !strcmp(name, "setdefault") || !strcmp(name, "clear"))
            return clb_jerr(c, "access to attribute '%s' of 'dict' object is unsafe", name);
        *handled = false;
        return 0;
    }
    if (obj.t == JV_LIST) {
        if (!strcmp(name, "append") || !strcmp(name, "extend") || !strcmp(name, "pop") ||
            !strcmp(name, "insert") || !strcmp(name, "remove") || !strcmp(name, "sort") ||
            !strcmp(name, "reverse") || !strcmp(name, "clear"))
            return clb_jerr(c, "access to attribute '%s' of '%s' object is unsafe", name, clb_jv_type_name(obj));
        if (!strcmp(name, "index") || !strcmp(name, "count")) {
            *handled = true;
            jv x;
            if (!clb_getarg(&A, 0, NULL, &x)) return clb_jerr(c, "%s() takes exactly one argument", name);
            int64_t n = 0, pos = -1;
            for (size_t i = 0; i < obj.u.l->n; i++) {
                if (clb_jv_equal(obj.u.l->items[i], x)) {
                    n++;
                    if (pos < 0) pos = (int64_t)i;
                }
            }
            if (name[0] == 'i' && pos < 0) return clb_jerr(c, "value is not in list");
            *out = clb_jv_int(name[0] == 'i' ? pos : n);
            return 0;
        }
        return 0;
    }
    if (obj.t == JV_LOOP && !strcmp(name, "cycle")) {
        *handled = true;
        if (nargs == 0) return clb_jerr(c, "no items for cycling given");
        *out = args[obj.u.loop->index0 % nargs];
        return 0;
    }
    return 0;
}

/* ---- globals ---- */

static const char *const global_names[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int clb_jglobal_id(const char *name) {
    for (size_t i = 0; i < CLB_ARRAY_LEN(global_names); i++)
        if (!strcmp(name, global_names[i])) return (int)i;
    return -1;
}

int clb_jcall_global(jctx *c, int fn, const jv *args, size_t nargs, const char **kwn, const jv *kwv,
                 size_t nkw, jv *out) {
    switch (fn) {
    case 0: { /* range */
        int64_t v[3] = {0, 0, 1};
        if (nargs < 1 || nargs > 3 || nkw) return clb_jerr(c, "range expected 1 to 3 integer arguments");
        for (size_t i = 0; i < nargs; i++) {
            if (args[i].t != JV_INT && args[i].t != JV_BOOL) return clb_jerr(c, "range: '%s' object cannot be interpreted as an integer", clb_jv_type_name(args[i]));
            v[nargs == 1 ? 1 : i] = args[i].t == JV_BOOL ? args[i].u.b : args[i].u.i;
        }
        if (v[2] == 0) return clb_jerr(c, "range() arg 3 must not be zero");
        /* the length in unsigned integers (exact near the limits, where doubles round), and
           each item as start + i * step, which is within [start, stop) */
        const uint64_t span = v[2] > 0 ? (v[1] > v[0] ? (uint64_t)v[1] - (uint64_t)v[0] : 0)
                                       : (v[0] > v[1] ? (uint64_t)v[0] - (uint64_t)v[1] : 0);
        const uint64_t st = v[2] > 0 ? (uint64_t)v[2] : (uint64_t)0 - (uint64_t)v[2];
        const uint64_t cnt = span ? (span - 1) / st + 1 : 0;
        if (cnt > CLB_JINJA_MAX_ITERATIONS) return clb_jerr_limit(c, "range size");
        jv l = clb_jv_list_new(c->a, (size_t)cnt);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        for (uint64_t i = 0; i < cnt; i++)
            l.u.l->items[l.u.l->n++] = clb_jv_int((int64_t)((uint64_t)v[0] + i * (uint64_t)v[2]));
        *out = l;
        return 0;
    }
    case 1: /* namespace */
    case 2: { /* dict */
        jv d = clb_jv_dict_new(c->a, nkw);
        if (d.t != JV_DICT) return clb_jerr_oom(c);
        for (size_t i = 0; i < nargs; i++) {
            if (args[i].t != JV_DICT) return clb_jerr(c, "%s: positional argument must be a mapping", global_names[fn]);
            for (size_t k = 0; k < args[i].u.d->n; k++)
                if (!clb_jd_set(c->a, d.u.d, args[i].u.d->keys[k], args[i].u.d->vals[k])) return clb_jerr_oom(c);
        }
        for (size_t i = 0; i < nkw; i++)
            if (!clb_jd_set(c->a, d.u.d, clb_jv_cstr(kwn[i]), kwv[i])) return clb_jerr_oom(c);
        if (fn == 1) d.flags = JV_F_NS;
        *out = d;
        return 0;
    }
    case 3: { /* raise_exception */
        jstr s = {"", 0};
        if (nargs) CHECK(clb_as_str(c, args[0], &s));
        return clb_jerr(c, "%.*s", (int)CLB_MIN(s.n, 600), s.p);
    }
    case 4: { /* strftime_now */
        jstr s = {"", 0};
        if (nargs != 1) return clb_jerr(c, "strftime_now takes one format string");
        CHECK(clb_need_str(c, args[0], "strftime_now", &s));
        char fmt[256], buf[512];
        snprintf(fmt, sizeof fmt, "%.*s", (int)CLB_MIN(s.n, 255), s.p);
        time_t now = time(NULL);
        struct tm tmv;
        if (!localtime_r(&now, &tmv)) return clb_jerr(c, "strftime_now: no local time");
        size_t n = fmt[0] ? strftime(buf, sizeof buf, fmt, &tmv) : 0;
        char *p = clb_ja_strndup(c->a, buf, n);
        if (!p) return clb_jerr_oom(c);
        *out = clb_jv_str(p, n);
        return 0;
    }
    default: return clb_jerr(c, "internal: unknown global %d", fn);
    }
}
