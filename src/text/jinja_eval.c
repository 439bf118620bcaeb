/* jinja_eval.c — renders a parsed template: scopes, statements, expressions, macros.
 *
 * Supported (Jinja2 semantics as transformers configures it):
 *   {{ }} {% %} {# #}, whitespace control, trim_blocks/lstrip_blocks, {% raw %};
 *   if/elif/else; for (tuple targets, `if` filter clause, else, loop.index/index0/revindex/
 *   revindex0/first/last/length/previtem/nextitem/depth/cycle(), break/continue);
 *   set (names, tuples, ns.attr, block set with filters); macro (defaults, keyword args,
 *   caller via {% call %}); {% filter %}; {% do %}; {% generation %} and {% block %} as plain
 *   containers; literals, attribute/item access, slices, arithmetic, ~, chained comparisons,
 *   in/not in, and/or/not, tests, ternaries, filters and string/dict methods
 *   (jinja_builtins.c).
 * Scoping as Jinja2: a for loop body is its own scope (assignments inside do not leak out;
 *   use namespace()); if blocks are not scopes; macros see their defining scope.
 * Undefined as Jinja2's default Undefined: prints as "", is falsy, iterates as empty, has
 *   length 0, and attribute/item access or arithmetic on it is an error.
 * Not supported: extends/include/import/from, recursive loops, star-args / double-star-kwargs in calls,
 *   varargs/kwargs inside macros, the `%` string-format operator and the format filter,
 *   autoescaping, tojson(ensure_ascii=True) (output stays raw UTF-8), Unicode case mapping
 *   (upper/lower/title are ASCII-only), groupby/batch/slice/truncate/wordwrap/urlencode/
 *   center/xmlattr/pprint filters, cycler/joiner/lipsum globals, mutating list/dict methods
 *   (rejected as unsafe, like transformers' ImmutableSandboxedEnvironment), non-ASCII
 *   whitespace in `-` trimming and Unicode line separators in source normalisation.
 * Numbers: int64 (overflow is an error, Python has bigints); JSON numbers with no fractional
 *   part become ints (so a JSON 1.0 prints as 1).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "text/jinja_impl.h"

int clb_jerr(jctx *c, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return clb_err(COLIBRI_ERR_FORMAT, "template error (line %d): %s", c->line, msg);
}

int clb_jerr_oom(jctx *c) {
    return clb_err(COLIBRI_ERR_NOMEM, "template error (line %d): memory limit of %u MiB exceeded",
                   c->line, CLB_JINJA_MAX_MEMORY >> 20);
}

int clb_jerr_limit(jctx *c, const char *what) {
    return clb_err(COLIBRI_ERR_RANGE, "template error (line %d): %s limit exceeded", c->line, what);
}

#define CHECK(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

/* ---- scopes ---- */

static jframe *frame_new(jctx *c, jframe *parent) {
    jframe *f = clb_ja_alloc(c->a, sizeof *f);
    if (!f) return NULL;
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static int frame_set(jctx *c, jframe *f, const char *name, size_t n, jv v) {
    for (size_t i = 0; i < f->n; i++) {
        if (f->names[i].n == n && memcmp(f->names[i].p, name, n) == 0) {
            f->vals[i] = v;
            return 0;
        }
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        jstr *nn = clb_ja_alloc(c->a, cap * sizeof *nn);
        jv *nv = clb_ja_alloc(c->a, cap * sizeof *nv);
        if (!nn || !nv) return clb_jerr_oom(c);
        if (f->n) {
            memcpy(nn, f->names, f->n * sizeof *nn);
            memcpy(nv, f->vals, f->n * sizeof *nv);
        }
        f->names = nn;
        f->vals = nv;
        f->cap = cap;
    }
    f->names[f->n].p = name;
    f->names[f->n].n = n;
    f->vals[f->n] = v;
    f->n++;
    return 0;
}

static bool frame_get(const jframe *f, const char *name, jv *out) {
    size_t n = strlen(name);
    for (; f; f = f->parent) {
        for (size_t i = f->n; i-- > 0;) {
            if (f->names[i].n == n && memcmp(f->names[i].p, name, n) == 0) {
                *out = f->vals[i];
                return true;
            }
        }
    }
    return false;
}

/* ---- output ---- */

static int out_check(jctx *c) {
    if (c->out->over) return clb_jerr_limit(c, "output size");
    if (c->out->oom) return clb_jerr_oom(c);
    return 0;
}

static int exec_list(jctx *c, const jnode *n);

static int capture(jctx *c, const jnode *body, jv *out) {
    jbuf b, *saved = c->out;
    clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
    c->out = &b;
    int rc = exec_list(c, body);
    if (!rc) rc = out_check(c);
    c->out = saved;
    if (rc) return rc;
    *out = clb_jv_str(b.p ? b.p : "", b.n);
    return 0;
}

/* ---- expressions ---- */

static int eval_args(jctx *c, const jnode *n, jv **args, jv **kwv) {
    *args = NULL;
    *kwv = NULL;
    if (n->nargs) {
        if (!(*args = clb_ja_alloc(c->a, n->nargs * sizeof(jv)))) return clb_jerr_oom(c);
        for (size_t i = 0; i < n->nargs; i++) CHECK(clb_jeval(c, n->args[i], &(*args)[i]));
    }
    if (n->nkw) {
        if (!(*kwv = clb_ja_alloc(c->a, n->nkw * sizeof(jv)))) return clb_jerr_oom(c);
        for (size_t i = 0; i < n->nkw; i++) CHECK(clb_jeval(c, n->kwvals[i], &(*kwv)[i]));
    }
    return 0;
}

int clb_jerr_undef(jctx *c, jv v) {
    if (v.u.s.n) return clb_jerr(c, "'%.*s' is undefined", (int)CLB_MIN(v.u.s.n, 200), v.u.s.p);
    return clb_jerr(c, "undefined value used");
}

static int64_t floordiv_i(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

static int repeat_seq(jctx *c, jv seq, int64_t times, jv *out) {
    if (times < 0) times = 0;
    if (seq.t == JV_STR) {
        uint64_t total;
        if (!clb_mul_u64(seq.u.s.n, (uint64_t)times, &total) || total > CLB_JINJA_MAX_OUTPUT)
            return clb_jerr_limit(c, "string size");
        char *p = clb_ja_alloc(c->a, (size_t)total + 1);
        if (!p) return clb_jerr_oom(c);
        for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * seq.u.s.n, seq.u.s.p, seq.u.s.n);
        p[total] = 0;
        *out = clb_jv_str(p, (size_t)total);
        return 0;
    }
    uint64_t total;
    if (!clb_mul_u64(seq.u.l->n, (uint64_t)times, &total) || total > CLB_JINJA_MAX_ITERATIONS)
        return clb_jerr_limit(c, "list size");
    jv l = clb_jv_list_new(c->a, (size_t)total);
    if (l.t != JV_LIST) return clb_jerr_oom(c);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) l.u.l->items[l.u.l->n++] = seq.u.l->items[k];
    *out = l;
    return 0;
}

static int binop(jctx *c, int op, jv a, jv b, jv *out) {
    if (op == OP_CONCAT) {
        jbuf buf;
        clb_jb_init(&buf, c->a, CLB_JINJA_MAX_OUTPUT);
        clb_jv_write_str(&buf, a);
        clb_jv_write_str(&buf, b);
        if (buf.over) return clb_jerr_limit(c, "string size");
        if (buf.oom) return clb_jerr_oom(c);
        *out = clb_jv_str(buf.p ? buf.p : "", buf.n);
        return 0;
    }
    if (a.t == JV_UNDEF) return clb_jerr_undef(c, a);
    if (b.t == JV_UNDEF) return clb_jerr_undef(c, b);
    static const char *const names[] = {"", "+", "-", "*", "/", "//", "%", "**", "~"};
    bool ints = (a.t == JV_INT || a.t == JV_BOOL) && (b.t == JV_INT || b.t == JV_BOOL);
    int64_t x = a.t == JV_BOOL ? a.u.b : a.u.i, y = b.t == JV_BOOL ? b.u.b : b.u.i;
    if (clb_jv_is_num(a) && clb_jv_is_num(b)) {
        double fx = clb_jv_num(a), fy = clb_jv_num(b);
        switch (op) {
        case OP_ADD:
        case OP_SUB:
        case OP_MUL:
            if (ints) {
                int64_t r;
                bool ov = op == OP_ADD ? __builtin_add_overflow(x, y, &r)
                        : op == OP_SUB ? __builtin_sub_overflow(x, y, &r)
                                       : __builtin_mul_overflow(x, y, &r);
                if (ov) return clb_jerr(c, "integer overflow in '%s'", names[op]);
                *out = clb_jv_int(r);
            } else {
                *out = clb_jv_float(op == OP_ADD ? fx + fy : op == OP_SUB ? fx - fy : fx * fy);
            }
            return 0;
        case OP_DIV:
            if (fy == 0.0) return clb_jerr(c, "division by zero");
            *out = clb_jv_float(fx / fy);
            return 0;
        case OP_FLOORDIV:
        case OP_MOD:
            if (ints) {
                if (y == 0) return clb_jerr(c, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) return clb_jerr(c, "integer overflow in '%s'", names[op]);
                /* Python's modulo has the divisor's sign: x % y, moved by y when the signs
                   differ (never overflows, where x - floor(x / y) * y may: 5 % INT64_MIN) */
                int64_t r = x % y;
                if (r != 0 && (r < 0) != (y < 0)) r += y;
                *out = clb_jv_int(op == OP_FLOORDIV ? floordiv_i(x, y) : r);
            } else {
                if (fy == 0.0) return clb_jerr(c, "float division or modulo by zero");
                double q = floor(fx / fy);
                *out = clb_jv_float(op == OP_FLOORDIV ? q : fx - q * fy);
            }
            return 0;
        case OP_POW:
            if (ints && y >= 0) {
                int64_t r = 1, base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) return clb_jerr(c, "integer overflow in '**'");
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) return clb_jerr(c, "integer overflow in '**'");
                }
                *out = clb_jv_int(r);
            } else {
                *out = clb_jv_float(pow(fx, fy));
            }
            return 0;
        default: break;
        }
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n + b.u.s.n;
        if (n > CLB_JINJA_MAX_OUTPUT) return clb_jerr_limit(c, "string size");
        char *p = clb_ja_alloc(c->a, n + 1);
        if (!p) return clb_jerr_oom(c);
        memcpy(p, a.u.s.p, a.u.s.n);
        memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
        p[n] = 0;
        *out = clb_jv_str(p, n);
        return 0;
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST) {
        jv l = clb_jv_list_new(c->a, a.u.l->n + b.u.l->n);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        for (size_t i = 0; i < a.u.l->n; i++) l.u.l->items[l.u.l->n++] = a.u.l->items[i];
        for (size_t i = 0; i < b.u.l->n; i++) l.u.l->items[l.u.l->n++] = b.u.l->items[i];
        l.flags = a.flags & JV_F_TUPLE;
        *out = l;
        return 0;
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat_seq(c, a, y, out);
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat_seq(c, b, x, out);
    return clb_jerr(c, "unsupported operand type(s) for %s: '%s' and '%s'", names[op], clb_jv_type_name(a),
                clb_jv_type_name(b));
}

/* <0 / 0 / >0, or an error for unorderable types */
int clb_jorder(jctx *c, jv a, jv b, const char *opname, int *res) {
    if (clb_jv_is_num(a) && clb_jv_is_num(b)) {
        double x = clb_jv_num(a), y = clb_jv_num(b);
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t p = a.t == JV_BOOL ? a.u.b : a.u.i, q = b.t == JV_BOOL ? b.u.b : b.u.i;
            *res = p < q ? -1 : p > q;
        } else *res = x < y ? -1 : x > y ? 1 : 0;
        return 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = CLB_MIN(a.u.s.n, b.u.s.n);
        int r = memcmp(a.u.s.p, b.u.s.p, n);
        *res = r ? r : (a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n);
        return 0;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        size_t n = CLB_MIN(a.u.l->n, b.u.l->n);
        for (size_t i = 0; i < n; i++) {
            if (clb_jv_equal(a.u.l->items[i], b.u.l->items[i])) continue;
            return clb_jorder(c, a.u.l->items[i], b.u.l->items[i], opname, res);
        }
        *res = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
        return 0;
    }
    if (a.t == JV_UNDEF) return clb_jerr_undef(c, a);
    if (b.t == JV_UNDEF) return clb_jerr_undef(c, b);
    return clb_jerr(c, "'%s' not supported between instances of '%s' and '%s'", opname, clb_jv_type_name(a),
                clb_jv_type_name(b));
}

int clb_jcontains(jctx *c, jv item, jv seq, bool *res) {
    switch (seq.t) {
    case JV_STR:
        if (item.t != JV_STR)
            return clb_jerr(c, "'in <string>' requires string as left operand, not %s", clb_jv_type_name(item));
        *res = item.u.s.n == 0 || memmem(seq.u.s.p, seq.u.s.n, item.u.s.p, item.u.s.n) != NULL;
        return 0;
    case JV_LIST:
        *res = false;
        for (size_t i = 0; i < seq.u.l->n && !*res; i++) *res = clb_jv_equal(item, seq.u.l->items[i]);
        return 0;
    case JV_DICT: *res = clb_jd_get(seq.u.d, item) != NULL; return 0;
    case JV_UNDEF: *res = false; return 0;
    default: return clb_jerr(c, "argument of type '%s' is not iterable", clb_jv_type_name(seq));
    }
}

static int eval_slice(jctx *c, jv obj, const jnode *n, jv *out) {
    int64_t v[3];
    bool has[3];
    for (int i = 0; i < 3; i++) {
        has[i] = false;
        if (!n->args[i]) continue;
        jv x;
        CHECK(clb_jeval(c, n->args[i], &x));
        if (x.t == JV_NONE) continue;
        if (x.t != JV_INT && x.t != JV_BOOL) return clb_jerr(c, "slice indices must be integers or None");
        v[i] = x.t == JV_BOOL ? x.u.b : x.u.i;
        has[i] = true;
    }
    int64_t step = has[2] ? v[2] : 1;
    if (step == 0) return clb_jerr(c, "slice step cannot be zero");
    if (obj.t == JV_UNDEF) return clb_jerr_undef(c, obj);
    bool is_str = obj.t == JV_STR;
    if (!is_str && obj.t != JV_LIST) return clb_jerr(c, "'%s' object is not subscriptable", clb_jv_type_name(obj));
    int64_t len = is_str ? (int64_t)clb_u8_len(obj.u.s.p, obj.u.s.n) : (int64_t)obj.u.l->n;
    /* Python's slice.indices() */
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
    int64_t start = has[0] ? v[0] : (step < 0 ? hi : lo), stop = has[1] ? v[1] : (step < 0 ? lo : hi);
    if (has[0]) {
        if (start < 0) start = start + len < lo ? lo : start + len;
        else if (start > hi) start = hi;
    }
    if (has[1]) {
        if (stop < 0) stop = stop + len < lo ? lo : stop + len;
        else if (stop > hi) stop = hi;
    }
    if (is_str && step == 1) {
        size_t b = clb_u8_offset(obj.u.s.p, obj.u.s.n, (size_t)start);
        size_t e = stop > start ? clb_u8_offset(obj.u.s.p, obj.u.s.n, (size_t)stop) : b;
        *out = clb_jv_str(obj.u.s.p + b, e - b);
        return 0;
    }
    jv l = clb_jv_list_new(c->a, 0);
    if (l.t != JV_LIST) return clb_jerr_oom(c);
    jlist *src = NULL;
    if (is_str) CHECK(clb_jiter(c, obj, &src));
    else src = obj.u.l;
    /* the count first, in unsigned integers: i += step past the end may overflow */
    const uint64_t span = step > 0 ? (stop > start ? (uint64_t)stop - (uint64_t)start : 0)
                                   : (start > stop ? (uint64_t)start - (uint64_t)stop : 0);
    const uint64_t ast = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
    const uint64_t cnt = span ? (span - 1) / ast + 1 : 0;
    for (uint64_t k = 0; k < cnt; k++)
        if (!clb_jl_push(c->a, l.u.l, src->items[(int64_t)((uint64_t)start + k * (uint64_t)step)]))
            return clb_jerr_oom(c);
    if (!is_str) {
        l.flags = obj.flags & JV_F_TUPLE;
        *out = l;
        return 0;
    }
    jbuf b;
    clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
    for (size_t i = 0; i < l.u.l->n; i++) clb_jv_write_str(&b, l.u.l->items[i]);
    if (b.oom) return clb_jerr_oom(c);
    *out = clb_jv_str(b.p ? b.p : "", b.n);
    return 0;
}

static int call_value(jctx *c, jv fn, const jv *args, size_t nargs, const char **kwn, const jv *kwv,
                      size_t nkw, jv *out) {
    if (fn.t == JV_MACRO) return clb_jcall_macro(c, fn.u.m, args, nargs, kwn, kwv, nkw, out);
    if (fn.t == JV_FUNC) return clb_jcall_global(c, fn.u.fn, args, nargs, kwn, kwv, nkw, out);
    if (fn.t == JV_UNDEF) return clb_jerr_undef(c, fn);
    return clb_jerr(c, "'%s' object is not callable", clb_jv_type_name(fn));
}

static int eval_call(jctx *c, const jnode *n, struct jmacro *caller, jv *out) {
    jv *args, *kwv;
    jv fn;
    if (n->a->kind == N_GETATTR) {
        jv obj;
        CHECK(clb_jeval(c, n->a->a, &obj));
        if (obj.t == JV_UNDEF) return clb_jerr_undef(c, obj);
        CHECK(eval_args(c, n, &args, &kwv));
        c->line = n->line;
        if (!(obj.t == JV_DICT && (obj.flags & JV_F_NS))) {
            bool handled = false;
            CHECK(clb_jmethod(c, obj, n->a->name, args, n->nargs, n->kwnames, kwv, n->nkw, out, &handled));
            if (handled) return 0;
        }
        CHECK(clb_jlookup(c, obj, clb_jv_cstr(n->a->name), true, &fn));
        if (fn.t == JV_UNDEF)
            return clb_jerr(c, "'%s' object has no attribute '%s'", clb_jv_type_name(obj), n->a->name);
    } else {
        CHECK(clb_jeval(c, n->a, &fn));
        CHECK(eval_args(c, n, &args, &kwv));
        c->line = n->line;
    }
    if (caller) {
        if (fn.t != JV_MACRO) return clb_jerr(c, "{%% call %%} needs a macro");
        struct jmacro m = *fn.u.m;
        m.caller = caller;
        return clb_jcall_macro(c, &m, args, n->nargs, n->kwnames, kwv, n->nkw, out);
    }
    return call_value(c, fn, args, n->nargs, n->kwnames, kwv, n->nkw, out);
}

static int apply_filter(jctx *c, const jnode *f, jv in, jv *out) {
    if (f->a) CHECK(clb_jeval(c, f->a, &in));
    jv *args, *kwv;
    CHECK(eval_args(c, f, &args, &kwv));
    c->line = f->line;
    return clb_jfilter(c, f->name, in, args, f->nargs, f->kwnames, kwv, f->nkw, out);
}

/* the filter chain of {% filter %} / {% set x | f %}: innermost node has a == NULL */
static int apply_chain(jctx *c, const jnode *f, jv in, jv *out) {
    if (!f) {
        *out = in;
        return 0;
    }
    if (f->a) {
        jv mid;
        CHECK(apply_chain(c, f->a, in, &mid));
        in = mid;
    }
    jv *args, *kwv;
    CHECK(eval_args(c, f, &args, &kwv));
    return clb_jfilter(c, f->name, in, args, f->nargs, f->kwnames, kwv, f->nkw, out);
}

static int eval_inner(jctx *c, const jnode *n, jv *out) {
    jv a, b;
    switch (n->kind) {
    case N_LIT: *out = n->lit; return 0;
    case N_NAME:
        if (frame_get(c->frame, n->name, out)) return 0;
        if (strcmp(n->name, "caller") == 0 && c->caller) {
            out->t = JV_MACRO;
            out->flags = 0;
            out->u.m = c->caller;
            return 0;
        }
        {
            int id = clb_jglobal_id(n->name);
            if (id >= 0) {
                *out = clb_jv_none();
                out->t = JV_FUNC;
                out->u.fn = id;
                return 0;
            }
        }
        *out = clb_jv_undef(n->name);
        return 0;
    case N_GETATTR:
        CHECK(clb_jeval(c, n->a, &a));
        if (a.t == JV_UNDEF) return clb_jerr_undef(c, a);
        return clb_jlookup(c, a, clb_jv_cstr(n->name), true, out);
    case N_GETITEM:
        CHECK(clb_jeval(c, n->a, &a));
        CHECK(clb_jeval(c, n->b, &b));
        if (a.t == JV_UNDEF) return clb_jerr_undef(c, a);
        return clb_jlookup(c, a, b, false, out);
    case N_SLICE: CHECK(clb_jeval(c, n->a, &a)); return eval_slice(c, a, n, out);
    case N_CALL: return eval_call(c, n, NULL, out);
    case N_FILTER: return apply_filter(c, n, clb_jv_undef(NULL), out);
    case N_TEST: {
        CHECK(clb_jeval(c, n->a, &a));
        jv *args, *kwv;
        CHECK(eval_args(c, n, &args, &kwv));
        c->line = n->line;
        bool r;
        CHECK(clb_jtest(c, n->name, a, args, n->nargs, &r));
        *out = clb_jv_bool(n->op ? !r : r);
        return 0;
    }
    case N_NEG:
    case N_POS:
        CHECK(clb_jeval(c, n->a, &a));
        if (a.t == JV_UNDEF) return clb_jerr_undef(c, a);
        if (!clb_jv_is_num(a)) return clb_jerr(c, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', clb_jv_type_name(a));
        if (n->kind == N_POS) *out = a.t == JV_BOOL ? clb_jv_int(a.u.b) : a;
        else if (a.t == JV_FLOAT) *out = clb_jv_float(-a.u.f);
        else {
            int64_t x = a.t == JV_BOOL ? a.u.b : a.u.i;
            if (x == INT64_MIN) return clb_jerr(c, "integer overflow in unary -");
            *out = clb_jv_int(-x);
        }
        return 0;
    case N_NOT: CHECK(clb_jeval(c, n->a, &a)); *out = clb_jv_bool(!clb_jv_truthy(a)); return 0;
    case N_AND:
        CHECK(clb_jeval(c, n->a, &a));
        if (!clb_jv_truthy(a)) {
            *out = a;
            return 0;
        }
        return clb_jeval(c, n->b, out);
    case N_OR:
        CHECK(clb_jeval(c, n->a, &a));
        if (clb_jv_truthy(a)) {
            *out = a;
            return 0;
        }
        return clb_jeval(c, n->b, out);
    case N_BIN:
        CHECK(clb_jeval(c, n->a, &a));
        CHECK(clb_jeval(c, n->b, &b));
        c->line = n->line;
        return binop(c, n->op, a, b, out);
    case N_CMP: {
        static const char *const cn[] = {"", "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
        CHECK(clb_jeval(c, n->args[0], &a));
        for (size_t i = 0; i + 1 < n->nargs; i++) {
            CHECK(clb_jeval(c, n->args[i + 1], &b));
            bool r;
            int op = n->ops[i], o;
            switch (op) {
            case CMP_EQ: r = clb_jv_equal(a, b); break;
            case CMP_NE: r = !clb_jv_equal(a, b); break;
            case CMP_IN: CHECK(clb_jcontains(c, a, b, &r)); break;
            case CMP_NOTIN: CHECK(clb_jcontains(c, a, b, &r)); r = !r; break;
            default:
                CHECK(clb_jorder(c, a, b, cn[op], &o));
                r = op == CMP_LT ? o < 0 : op == CMP_LE ? o <= 0 : op == CMP_GT ? o > 0 : o >= 0;
            }
            if (!r) {
                *out = clb_jv_bool(false);
                return 0;
            }
            a = b;
        }
        *out = clb_jv_bool(true);
        return 0;
    }
    case N_COND:
        CHECK(clb_jeval(c, n->a, &a));
        if (clb_jv_truthy(a)) return clb_jeval(c, n->b, out);
        if (n->c) return clb_jeval(c, n->c, out);
        *out = clb_jv_undef(NULL);
        return 0;
    case N_LIST:
    case N_TUPLE: {
        jv l = clb_jv_list_new(c->a, n->nargs);
        if (l.t != JV_LIST) return clb_jerr_oom(c);
        for (size_t i = 0; i < n->nargs; i++) CHECK(clb_jeval(c, n->args[i], &l.u.l->items[l.u.l->n++]));
        if (n->kind == N_TUPLE) l.flags = JV_F_TUPLE;
        *out = l;
        return 0;
    }
    case N_DICT: {
        jv d = clb_jv_dict_new(c->a, n->nargs);
        if (d.t != JV_DICT) return clb_jerr_oom(c);
        for (size_t i = 0; i < n->nargs; i++) {
            CHECK(clb_jeval(c, n->args[i], &a));
            CHECK(clb_jeval(c, n->kwvals[i], &b));
            if (!clb_jd_set(c->a, d.u.d, a, b)) return clb_jerr_oom(c);
        }
        *out = d;
        return 0;
    }
    default: return clb_jerr(c, "internal: not an expression (kind %d)", n->kind);
    }
}

int clb_jeval(jctx *c, const jnode *n, jv *out) {
    if (++c->depth > 4 * CLB_JINJA_MAX_DEPTH) return clb_jerr_limit(c, "evaluation depth");
    int saved = c->line;
    c->line = n->line;
    int rc = eval_inner(c, n, out);
    c->depth--;
    if (!rc) c->line = saved;
    return rc;
}

/* ---- macros ---- */

int clb_jcall_macro(jctx *c, struct jmacro *m, const jv *args, size_t nargs, const char **kwn,
                const jv *kwv, size_t nkw, jv *out) {
    const jnode *def = m->def;
    if (nargs > def->nargs)
        return clb_jerr(c, "macro '%s' takes not more than %zu argument(s)", m->name ? m->name : "caller", def->nargs);
    if (c->call_depth >= CLB_JINJA_MAX_CALL_DEPTH) return clb_jerr_limit(c, "macro recursion depth");
    jframe *f = frame_new(c, m->scope);
    if (!f) return clb_jerr_oom(c);
    jframe *saved_frame = c->frame;
    struct jmacro *saved_caller = c->caller;
    c->frame = f;
    for (size_t k = 0; k < nkw; k++) {
        bool found = false;
        for (size_t i = 0; i < def->nargs && !found; i++) found = strcmp(def->args[i]->name, kwn[k]) == 0;
        if (!found) {
            c->frame = saved_frame;
            return clb_jerr(c, "macro '%s' takes no keyword argument '%s'", m->name ? m->name : "caller", kwn[k]);
        }
    }
    int rc = 0;
    for (size_t i = 0; i < def->nargs && !rc; i++) {
        const char *pn = def->args[i]->name;
        jv v;
        bool have = false;
        if (i < nargs) {
            v = args[i];
            have = true;
        }
        for (size_t k = 0; k < nkw && !have; k++) {
            if (strcmp(kwn[k], pn) == 0) {
                v = kwv[k];
                have = true;
            }
        }
        if (!have) {
            if (def->kwvals && def->kwvals[i]) rc = clb_jeval(c, def->kwvals[i], &v);
            else v = clb_jv_undef(pn);
        }
        if (!rc) rc = frame_set(c, f, pn, strlen(pn), v);
    }
    c->caller = m->caller;
    c->call_depth++;
    if (!rc) rc = capture(c, def->body, out);
    c->call_depth--;
    c->caller = saved_caller;
    c->frame = saved_frame;
    return rc;
}

/* ---- statements ---- */

static int assign(jctx *c, const jnode *target, jv v) {
    if (target->kind == N_NAME) return frame_set(c, c->frame, target->name, strlen(target->name), v);
    if (target->kind == N_TUPLE) {
        jlist *items;
        CHECK(clb_jiter(c, v, &items));
        if (items->n != target->nargs)
            return clb_jerr(c, "cannot unpack %zu value(s) into %zu name(s)", items->n, target->nargs);
        for (size_t i = 0; i < target->nargs; i++) CHECK(assign(c, target->args[i], items->items[i]));
        return 0;
    }
    if (target->kind == N_GETATTR) {
        jv obj;
        if (!frame_get(c->frame, target->a->name, &obj)) obj = clb_jv_undef(target->a->name);
        if (obj.t != JV_DICT || !(obj.flags & JV_F_NS))
            return clb_jerr(c, "cannot assign attribute on non-namespace object '%s'", target->a->name);
        char *key = clb_ja_strndup(c->a, target->name, strlen(target->name));
        if (!key || !clb_jd_set(c->a, obj.u.d, clb_jv_cstr(key), v)) return clb_jerr_oom(c);
        return 0;
    }
    return clb_jerr(c, "cannot assign to this expression");
}

static int exec_for(jctx *c, const jnode *n) {
    jv seq;
    CHECK(clb_jeval(c, n->b, &seq));
    jlist *items;
    CHECK(clb_jiter(c, seq, &items));
    jframe *f = frame_new(c, c->frame);
    if (!f) return clb_jerr_oom(c);
    jframe *saved = c->frame;
    c->frame = f;
    int rc = 0;
    if (n->c) { /* filter clause: evaluated with the loop variable bound */
        jv kept = clb_jv_list_new(c->a, items->n);
        if (kept.t != JV_LIST) rc = clb_jerr_oom(c);
        for (size_t i = 0; i < items->n && !rc; i++) {
            jv cond;
            if (++c->iterations > CLB_JINJA_MAX_ITERATIONS) rc = clb_jerr_limit(c, "loop iteration");
            if (!rc) rc = assign(c, n->a, items->items[i]);
            if (!rc) rc = clb_jeval(c, n->c, &cond);
            if (!rc && clb_jv_truthy(cond)) kept.u.l->items[kept.u.l->n++] = items->items[i];
        }
        if (!rc) items = kept.u.l;
    }
    struct jloop *lp = clb_ja_alloc(c->a, sizeof *lp);
    if (!rc && !lp) rc = clb_jerr_oom(c);
    if (!rc) {
        lp->items = items;
        lp->length = items->n;
        lp->depth = 1; /* only recursive loops (unsupported) go deeper */
    }
    jv lv = clb_jv_none();
    lv.t = JV_LOOP;
    lv.u.loop = lp;
    for (size_t i = 0; !rc && i < items->n; i++) {
        if (++c->iterations > CLB_JINJA_MAX_ITERATIONS) {
            rc = clb_jerr_limit(c, "loop iteration");
            break;
        }
        lp->index0 = i;
        f->n = 0; /* every iteration starts from the enclosing scope, as in Jinja2 */
        rc = assign(c, n->a, items->items[i]);
        if (!rc) rc = frame_set(c, f, "loop", 4, lv);
        if (!rc) rc = exec_list(c, n->body);
        if (c->ctl == CTL_CONTINUE) c->ctl = 0;
        if (c->ctl == CTL_BREAK) {
            c->ctl = 0;
            break;
        }
    }
    c->frame = saved;
    if (!rc && items->n == 0 && n->orelse) rc = exec_list(c, n->orelse);
    return rc;
}

static int in_loop(const jctx *c) {
    jv v;
    return frame_get(c->frame, "loop", &v) && v.t == JV_LOOP;
}

static int exec_stmt(jctx *c, const jnode *n) {
    jv v;
    c->line = n->line;
    switch (n->kind) {
    case S_TEXT: clb_jb_put(c->out, n->lit.u.s.p, n->lit.u.s.n); return out_check(c);
    case S_OUT:
        CHECK(clb_jeval(c, n->a, &v));
        clb_jv_write_str(c->out, v);
        return out_check(c);
    case S_IF:
        CHECK(clb_jeval(c, n->a, &v));
        if (clb_jv_truthy(v)) return exec_list(c, n->body);
        return exec_list(c, n->orelse);
    case S_FOR: return exec_for(c, n);
    case S_SET:
        CHECK(clb_jeval(c, n->b, &v));
        return assign(c, n->a, v);
    case S_SETBLOCK:
        CHECK(capture(c, n->body, &v));
        CHECK(apply_chain(c, n->c, v, &v));
        return assign(c, n->a, v);
    case S_MACRO: {
        struct jmacro *m = clb_ja_alloc(c->a, sizeof *m);
        if (!m) return clb_jerr_oom(c);
        memset(m, 0, sizeof *m);
        m->def = n;
        m->name = n->name;
        m->scope = c->frame;
        v = clb_jv_none();
        v.t = JV_MACRO;
        v.u.m = m;
        return frame_set(c, c->frame, n->name, strlen(n->name), v);
    }
    case S_CALLBLOCK: {
        struct jmacro *m = clb_ja_alloc(c->a, sizeof *m);
        if (!m) return clb_jerr_oom(c);
        memset(m, 0, sizeof *m);
        m->def = n;
        m->scope = c->frame;
        m->caller = c->caller;
        CHECK(eval_call(c, n->a, m, &v));
        clb_jv_write_str(c->out, v);
        return out_check(c);
    }
    case S_FILTERBLOCK:
        CHECK(capture(c, n->body, &v));
        CHECK(apply_chain(c, n->c, v, &v));
        clb_jv_write_str(c->out, v);
        return out_check(c);
    case S_BREAK:
    case S_CONTINUE:
        if (!in_loop(c)) return clb_jerr(c, "'%s' outside of a loop", n->kind == S_BREAK ? "break" : "continue");
        c->ctl = n->kind == S_BREAK ? CTL_BREAK : CTL_CONTINUE;
        return 0;
    case S_DO: return clb_jeval(c, n->a, &v);
    case S_BLOCK: return exec_list(c, n->body);
    default: return clb_jerr(c, "internal: not a statement (kind %d)", n->kind);
    }
}

static int exec_list(jctx *c, const jnode *n) {
    if (++c->depth > 4 * CLB_JINJA_MAX_DEPTH) return clb_jerr_limit(c, "evaluation depth");
    for (; n && !c->ctl; n = n->next) {
        int rc = exec_stmt(c, n);
        if (rc) return rc;
    }
    c->depth--;
    return 0;
}

/* ---- entry points ---- */

int clb_jinja_parse(const char *src, clb_jinja_tpl **out) {
    if (!out) return clb_err(COLIBRI_ERR_ARG, "clb_jinja_parse: NULL output");
    *out = NULL;
    if (!src) return clb_err(COLIBRI_ERR_ARG, "clb_jinja_parse: NULL template");
    clb_jinja_tpl *t = clb_calloc(1, sizeof *t);
    if (!t) return clb_err(COLIBRI_ERR_NOMEM, "template: out of memory");
    t->arena.cap = CLB_JINJA_MAX_MEMORY;
    jtok *toks;
    size_t ntoks;
    int rc = clb_jlex(&t->arena, src, &toks, &ntoks);
    if (!rc) rc = clb_jparse(&t->arena, toks, ntoks, &t->root);
    if (rc) {
        clb_jinja_free(t);
        return rc;
    }
    *out = t;
    return COLIBRI_OK;
}

void clb_jinja_free(clb_jinja_tpl *t) {
    if (!t) return;
    clb_ja_release(&t->arena);
    clb_free(t);
}

int clb_jinja_render(const clb_jinja_tpl *t, const cJSON *ctx, char **out) {
    if (!t || !out) return clb_err(COLIBRI_ERR_ARG, "clb_jinja_render: NULL argument");
    *out = NULL;
    if (ctx && !cJSON_IsObject(ctx)) return clb_err(COLIBRI_ERR_ARG, "clb_jinja_render: context is not a JSON object");
    jarena a = {NULL, 0, CLB_JINJA_MAX_MEMORY};
    jctx c;
    memset(&c, 0, sizeof c);
    c.a = &a;
    jbuf ob;
    clb_jb_init(&ob, &a, CLB_JINJA_MAX_OUTPUT);
    c.out = &ob;
    c.line = 1;
    int rc = 0;
    c.root = c.frame = frame_new(&c, NULL);
    if (!c.root) rc = clb_jerr_oom(&c);
    for (const cJSON *e = ctx ? ctx->child : NULL; e && !rc; e = e->next) {
        if (!e->string) continue;
        jv v = clb_jv_from_json(&a, e, 0);
        if (v.t == JV_UNDEF) rc = clb_jerr_oom(&c);
        else rc = frame_set(&c, c.root, e->string, strlen(e->string), v);
    }
    if (!rc) rc = exec_list(&c, t->root);
    if (!rc) {
        *out = clb_malloc(ob.n + 1);
        if (!*out) rc = clb_err(COLIBRI_ERR_NOMEM, "template: out of memory for %zu bytes of output", ob.n);
        else {
            if (ob.n) memcpy(*out, ob.p, ob.n);
            (*out)[ob.n] = 0;
        }
    }
    clb_ja_release(&a);
    return rc;
}

int clb_jinja_render_string(const char *src, const cJSON *ctx, char **out) {
    clb_jinja_tpl *t;
    if (out) *out = NULL;
    int rc = clb_jinja_parse(src, &t);
    if (rc) return rc;
    rc = clb_jinja_render(t, ctx, out);
    clb_jinja_free(t);
    return rc;
}
