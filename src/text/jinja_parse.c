/* jinja_parse.c — tokens -> AST by recursive descent, with Jinja2's grammar and operator
   precedence: condexpr > or > and > not > compare > + - > ~ > * / // % > ** > unary >
   primary/postfix/filters/tests. Nesting is capped at CLB_JINJA_MAX_DEPTH. */
#include <stdio.h>
#include <string.h>

#include "text/jinja_impl.h"

typedef struct parser {
    jarena *a;
    const jtok *t;
    size_t n, i;
    int depth;
} parser;

static const jtok *cur(const parser *P) { return &P->t[P->i]; }
static const jtok *peek(const parser *P, size_t k) {
    return P->i + k < P->n ? &P->t[P->i + k] : &P->t[P->n - 1];
}

static int perr(const parser *P, const char *fmt, const char *arg) {
    char msg[160];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    return clb_err(COLIBRI_ERR_FORMAT, "template syntax error (line %d): %s", cur(P)->line, msg);
}

static bool tok_is(const jtok *t, jtok_kind k, const char *s) {
    if (t->k != k) return false;
    if (!s) return true;
    size_t n = strlen(s);
    return t->n == n && memcmp(t->p, s, n) == 0;
}
static bool is_op(const parser *P, const char *s) { return tok_is(cur(P), TK_OP, s); }
static bool is_name(const parser *P, const char *s) { return tok_is(cur(P), TK_NAME, s); }

static bool accept_op(parser *P, const char *s) {
    if (!is_op(P, s)) return false;
    P->i++;
    return true;
}
static bool accept_name(parser *P, const char *s) {
    if (!is_name(P, s)) return false;
    P->i++;
    return true;
}
static int expect_op(parser *P, const char *s) {
    if (accept_op(P, s)) return 0;
    return perr(P, "expected '%s'", s);
}

static jnode *mk(parser *P, jnode_kind k) {
    jnode *n = clb_ja_alloc(P->a, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)k;
    n->line = cur(P)->line;
    return n;
}

static const char *tok_name(parser *P) {
    const jtok *t = cur(P);
    return clb_ja_strndup(P->a, t->p, t->n);
}

#define OOM() clb_err(COLIBRI_ERR_NOMEM, "template: out of memory while parsing")
#define CHECK(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

/* growable node arrays in the arena */
typedef struct nvec {
    jnode **v;
    const char **names;
    size_t n, cap;
} nvec;

static int nv_push(parser *P, nvec *v, jnode *x, const char *name) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = clb_ja_alloc(P->a, cap * sizeof *nv);
        const char **nn = clb_ja_alloc(P->a, cap * sizeof *nn);
        if (!nv || !nn) return OOM();
        if (v->n) {
            memcpy(nv, v->v, v->n * sizeof *nv);
            memcpy(nn, v->names, v->n * sizeof *nn);
        }
        v->v = nv;
        v->names = nn;
        v->cap = cap;
    }
    v->v[v->n] = x;
    v->names[v->n] = name;
    v->n++;
    return 0;
}

static int parse_expr(parser *P, bool condexpr, jnode **out);
static int parse_unary(parser *P, bool with_filter, jnode **out);
static int parse_or(parser *P, jnode **out);

static int enter(parser *P) {
    if (++P->depth > CLB_JINJA_MAX_DEPTH) return perr(P, "template nested too deeply", NULL);
    return 0;
}

/* (args, kw=v) after '(' has been consumed; fills n->args / n->kwnames / n->kwvals */
static int parse_call_args(parser *P, jnode *n) {
    nvec pos = {0}, kw = {0};
    while (!is_op(P, ")")) {
        if (pos.n + kw.n > 0) CHECK(expect_op(P, ","));
        if (is_op(P, ")")) break; /* trailing comma */
        if (is_op(P, "*") || is_op(P, "**")) return perr(P, "*args / **kwargs calls are not supported", NULL);
        jnode *e;
        if (cur(P)->k == TK_NAME && tok_is(peek(P, 1), TK_OP, "=")) {
            const char *nm = tok_name(P);
            if (!nm) return OOM();
            P->i += 2;
            CHECK(parse_expr(P, true, &e));
            CHECK(nv_push(P, &kw, e, nm));
        } else {
            if (kw.n) return perr(P, "positional argument after keyword argument", NULL);
            CHECK(parse_expr(P, true, &e));
            CHECK(nv_push(P, &pos, e, NULL));
        }
    }
    P->i++; /* ')' */
    n->args = pos.v;
    n->nargs = pos.n;
    n->kwnames = kw.names;
    n->kwvals = kw.v;
    n->nkw = kw.n;
    return 0;
}

static int parse_primary(parser *P, jnode **out) {
    const jtok *t = cur(P);
    jnode *n;
    CHECK(enter(P));
    if (t->k == TK_NAME) {
        n = mk(P, N_LIT);
        if (!n) return OOM();
        if (tok_is(t, TK_NAME, "true") || tok_is(t, TK_NAME, "True")) n->lit = clb_jv_bool(true);
        else if (tok_is(t, TK_NAME, "false") || tok_is(t, TK_NAME, "False")) n->lit = clb_jv_bool(false);
        else if (tok_is(t, TK_NAME, "none") || tok_is(t, TK_NAME, "None")) n->lit = clb_jv_none();
        else {
            n->kind = N_NAME;
            if (!(n->name = tok_name(P))) return OOM();
        }
        P->i++;
    } else if (t->k == TK_STRING) {
        n = mk(P, N_LIT);
        if (!n) return OOM();
        size_t len = 0, k = P->i;
        while (P->t[k].k == TK_STRING) len += P->t[k++].n;
        char *s = clb_ja_alloc(P->a, len + 1);
        if (!s) return OOM();
        size_t o = 0;
        while (cur(P)->k == TK_STRING) {
            memcpy(s + o, cur(P)->p, cur(P)->n);
            o += cur(P)->n;
            P->i++;
        }
        s[o] = 0;
        n->lit = clb_jv_str(s, o);
    } else if (t->k == TK_INT || t->k == TK_FLOAT) {
        n = mk(P, N_LIT);
        if (!n) return OOM();
        n->lit = t->k == TK_INT ? clb_jv_int(t->i) : clb_jv_float(t->f);
        P->i++;
    } else if (tok_is(t, TK_OP, "(")) {
        P->i++;
        if (accept_op(P, ")")) {
            if (!(n = mk(P, N_TUPLE))) return OOM();
        } else {
            jnode *e;
            CHECK(parse_expr(P, true, &e));
            if (is_op(P, ",")) {
                nvec items = {0};
                CHECK(nv_push(P, &items, e, NULL));
                while (accept_op(P, ",")) {
                    if (is_op(P, ")")) break;
                    CHECK(parse_expr(P, true, &e));
                    CHECK(nv_push(P, &items, e, NULL));
                }
                if (!(n = mk(P, N_TUPLE))) return OOM();
                n->args = items.v;
                n->nargs = items.n;
            } else n = e;
            CHECK(expect_op(P, ")"));
        }
    } else if (tok_is(t, TK_OP, "[")) {
        P->i++;
        nvec items = {0};
        while (!is_op(P, "]")) {
            if (items.n) CHECK(expect_op(P, ","));
            if (is_op(P, "]")) break;
            jnode *e;
            CHECK(parse_expr(P, true, &e));
            CHECK(nv_push(P, &items, e, NULL));
        }
        P->i++;
        if (!(n = mk(P, N_LIST))) return OOM();
        n->args = items.v;
        n->nargs = items.n;
    } else if (tok_is(t, TK_OP, "{")) {
        P->i++;
        nvec keys = {0}, vals = {0};
        while (!is_op(P, "}")) {
            if (keys.n) CHECK(expect_op(P, ","));
            if (is_op(P, "}")) break;
            jnode *k, *v;
            CHECK(parse_expr(P, true, &k));
            CHECK(expect_op(P, ":"));
            CHECK(parse_expr(P, true, &v));
            CHECK(nv_push(P, &keys, k, NULL));
            CHECK(nv_push(P, &vals, v, NULL));
        }
        P->i++;
        if (!(n = mk(P, N_DICT))) return OOM();
        n->args = keys.v;
        n->nargs = keys.n;
        n->kwvals = vals.v;
        n->nkw = vals.n;
    } else {
        if (t->k == TK_EOF) return perr(P, "unexpected end of template", NULL);
        if (t->k == TK_VAR_END || t->k == TK_BLOCK_END) return perr(P, "expected an expression before the end of the tag", NULL);
        char what[40];
        snprintf(what, sizeof what, "%.*s", (int)CLB_MIN(t->n, 30), t->p ? t->p : "?");
        return perr(P, "unexpected '%s'", what);
    }
    P->depth--;
    *out = n;
    return 0;
}

static int parse_subscript(parser *P, jnode *obj, jnode **out) {
    jnode *parts[3] = {NULL, NULL, NULL};
    int np = 0;
    bool slice = false;
    for (;;) {
        if (!is_op(P, ":") && !is_op(P, "]")) CHECK(parse_expr(P, true, &parts[np]));
        if (accept_op(P, ":")) {
            slice = true;
            if (++np > 2) return perr(P, "too many ':' in slice", NULL);
            continue;
        }
        break;
    }
    CHECK(expect_op(P, "]"));
    jnode *n = mk(P, slice ? N_SLICE : N_GETITEM);
    if (!n) return OOM();
    n->a = obj;
    if (slice) {
        n->args = clb_ja_alloc(P->a, 3 * sizeof(jnode *));
        if (!n->args) return OOM();
        memcpy(n->args, parts, sizeof parts);
        n->nargs = 3;
    } else {
        if (!parts[0]) return perr(P, "empty subscript", NULL);
        n->b = parts[0];
    }
    *out = n;
    return 0;
}

static int parse_postfix(parser *P, jnode *n, jnode **out) {
    for (;;) {
        if (accept_op(P, ".")) {
            jnode *g;
            if (cur(P)->k == TK_NAME) {
                if (!(g = mk(P, N_GETATTR))) return OOM();
                if (!(g->name = tok_name(P))) return OOM();
            } else if (cur(P)->k == TK_INT) {
                if (!(g = mk(P, N_GETITEM))) return OOM();
                if (!(g->b = mk(P, N_LIT))) return OOM();
                g->b->lit = clb_jv_int(cur(P)->i);
            } else return perr(P, "expected a name after '.'", NULL);
            P->i++;
            g->a = n;
            n = g;
        } else if (accept_op(P, "[")) {
            CHECK(parse_subscript(P, n, &n));
        } else if (accept_op(P, "(")) {
            jnode *c = mk(P, N_CALL);
            if (!c) return OOM();
            c->a = n;
            CHECK(parse_call_args(P, c));
            n = c;
        } else break;
    }
    *out = n;
    return 0;
}

/* filter name, possibly dotted, with optional (args); input node in->a */
static int parse_filter(parser *P, jnode *in, jnode **out) {
    if (cur(P)->k != TK_NAME) return perr(P, "expected a filter name after '|'", NULL);
    jnode *f = mk(P, N_FILTER);
    if (!f) return OOM();
    if (!(f->name = tok_name(P))) return OOM();
    P->i++;
    while (is_op(P, ".") && peek(P, 1)->k == TK_NAME) P->i += 2; /* dotted names: last part */
    f->a = in;
    if (accept_op(P, "(")) CHECK(parse_call_args(P, f));
    *out = f;
    return 0;
}

static int parse_filter_expr(parser *P, jnode *n, jnode **out) {
    for (;;) {
        if (accept_op(P, "|")) {
            CHECK(parse_filter(P, n, &n));
        } else if (is_name(P, "is")) {
            P->i++;
            jnode *t = mk(P, N_TEST);
            if (!t) return OOM();
            if (accept_name(P, "not")) t->op = 1;
            if (cur(P)->k != TK_NAME) return perr(P, "expected a test name after 'is'", NULL);
            if (!(t->name = tok_name(P))) return OOM();
            P->i++;
            t->a = n;
            const jtok *c = cur(P);
            if (accept_op(P, "(")) {
                CHECK(parse_call_args(P, t));
            } else if ((c->k == TK_NAME || c->k == TK_STRING || c->k == TK_INT || c->k == TK_FLOAT ||
                        tok_is(c, TK_OP, "[") || tok_is(c, TK_OP, "{")) &&
                       !tok_is(c, TK_NAME, "else") && !tok_is(c, TK_NAME, "or") &&
                       !tok_is(c, TK_NAME, "and")) {
                jnode *arg;
                CHECK(parse_primary(P, &arg));
                CHECK(parse_postfix(P, arg, &arg));
                t->args = clb_ja_alloc(P->a, sizeof(jnode *));
                if (!t->args) return OOM();
                t->args[0] = arg;
                t->nargs = 1;
            }
            n = t;
        } else if (accept_op(P, "(")) {
            jnode *c = mk(P, N_CALL);
            if (!c) return OOM();
            c->a = n;
            CHECK(parse_call_args(P, c));
            n = c;
        } else break;
    }
    *out = n;
    return 0;
}

static int parse_unary(parser *P, bool with_filter, jnode **out) {
    jnode *n;
    CHECK(enter(P));
    if (is_op(P, "-") || is_op(P, "+")) {
        n = mk(P, is_op(P, "-") ? N_NEG : N_POS);
        if (!n) return OOM();
        P->i++;
        CHECK(parse_unary(P, false, &n->a));
    } else {
        CHECK(parse_primary(P, &n));
    }
    CHECK(parse_postfix(P, n, &n));
    if (with_filter) CHECK(parse_filter_expr(P, n, &n));
    P->depth--;
    *out = n;
    return 0;
}

static int mk_bin(parser *P, int op, jnode *l, jnode *r, jnode **out) {
    jnode *n = mk(P, N_BIN);
    if (!n) return OOM();
    n->op = (uint8_t)op;
    n->a = l;
    n->b = r;
    *out = n;
    return 0;
}

static int parse_pow(parser *P, jnode **out) {
    jnode *l, *r;
    CHECK(parse_unary(P, true, &l));
    while (accept_op(P, "**")) {
        CHECK(parse_unary(P, true, &r));
        CHECK(mk_bin(P, OP_POW, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_math2(parser *P, jnode **out) {
    jnode *l, *r;
    CHECK(parse_pow(P, &l));
    for (;;) {
        int op = is_op(P, "*") ? OP_MUL : is_op(P, "/") ? OP_DIV : is_op(P, "//") ? OP_FLOORDIV
               : is_op(P, "%") ? OP_MOD : 0;
        if (!op) break;
        P->i++;
        CHECK(parse_pow(P, &r));
        CHECK(mk_bin(P, op, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_concat(parser *P, jnode **out) {
    jnode *l, *r;
    CHECK(parse_math2(P, &l));
    while (accept_op(P, "~")) {
        CHECK(parse_math2(P, &r));
        CHECK(mk_bin(P, OP_CONCAT, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_math1(parser *P, jnode **out) {
    jnode *l, *r;
    CHECK(parse_concat(P, &l));
    for (;;) {
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : 0;
        if (!op) break;
        P->i++;
        CHECK(parse_concat(P, &r));
        CHECK(mk_bin(P, op, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_compare(parser *P, jnode **out) {
    jnode *first;
    CHECK(parse_math1(P, &first));
    nvec operands = {0};
    uint8_t ops[64];
    size_t nops = 0;
    for (;;) {
        int op = is_op(P, "==") ? CMP_EQ : is_op(P, "!=") ? CMP_NE : is_op(P, "<") ? CMP_LT
               : is_op(P, "<=") ? CMP_LE : is_op(P, ">") ? CMP_GT : is_op(P, ">=") ? CMP_GE
               : is_name(P, "in") ? CMP_IN : 0;
        if (!op && is_name(P, "not") && tok_is(peek(P, 1), TK_NAME, "in")) {
            op = CMP_NOTIN;
            P->i++;
        }
        if (!op) break;
        P->i++;
        if (nops == sizeof ops) return perr(P, "comparison chain too long", NULL);
        if (!operands.n) CHECK(nv_push(P, &operands, first, NULL));
        jnode *r;
        CHECK(parse_math1(P, &r));
        CHECK(nv_push(P, &operands, r, NULL));
        ops[nops++] = (uint8_t)op;
    }
    if (!nops) {
        *out = first;
        return 0;
    }
    jnode *n = mk(P, N_CMP);
    if (!n) return OOM();
    n->args = operands.v;
    n->nargs = operands.n;
    n->ops = clb_ja_alloc(P->a, nops);
    if (!n->ops) return OOM();
    memcpy(n->ops, ops, nops);
    *out = n;
    return 0;
}

static int parse_not(parser *P, jnode **out) {
    if (is_name(P, "not")) {
        CHECK(enter(P));
        P->i++;
        jnode *n = mk(P, N_NOT);
        if (!n) return OOM();
        CHECK(parse_not(P, &n->a));
        P->depth--;
        *out = n;
        return 0;
    }
    return parse_compare(P, out);
}

static int parse_and(parser *P, jnode **out) {
    jnode *l;
    CHECK(parse_not(P, &l));
    while (accept_name(P, "and")) {
        jnode *n = mk(P, N_AND);
        if (!n) return OOM();
        n->a = l;
        CHECK(parse_not(P, &n->b));
        l = n;
    }
    *out = l;
    return 0;
}

static int parse_or(parser *P, jnode **out) {
    jnode *l;
    CHECK(parse_and(P, &l));
    while (accept_name(P, "or")) {
        jnode *n = mk(P, N_OR);
        if (!n) return OOM();
        n->a = l;
        CHECK(parse_and(P, &n->b));
        l = n;
    }
    *out = l;
    return 0;
}

static int parse_expr(parser *P, bool condexpr, jnode **out) {
    jnode *e;
    CHECK(enter(P));
    CHECK(parse_or(P, &e));
    while (condexpr && is_name(P, "if")) {
        P->i++;
        jnode *n = mk(P, N_COND);
        if (!n) return OOM();
        n->b = e;
        CHECK(parse_or(P, &n->a));
        if (accept_name(P, "else")) CHECK(parse_expr(P, true, &n->c));
        e = n;
    }
    P->depth--;
    *out = e;
    return 0;
}

/* expression or bare tuple "a, b" (as in {{ a, b }} / set x = a, b / for .. in a, b) */
static int parse_tuple(parser *P, bool condexpr, jnode **out) {
    jnode *e;
    CHECK(parse_expr(P, condexpr, &e));
    if (!is_op(P, ",")) {
        *out = e;
        return 0;
    }
    nvec items = {0};
    CHECK(nv_push(P, &items, e, NULL));
    while (accept_op(P, ",")) {
        if (cur(P)->k == TK_BLOCK_END || cur(P)->k == TK_VAR_END || is_op(P, ")")) break;
        CHECK(parse_expr(P, condexpr, &e));
        CHECK(nv_push(P, &items, e, NULL));
    }
    jnode *t = mk(P, N_TUPLE);
    if (!t) return OOM();
    t->args = items.v;
    t->nargs = items.n;
    *out = t;
    return 0;
}

/* assignment target: name, name.attr, or a tuple of names */
static int parse_target(parser *P, bool allow_attr, jnode **out) {
    nvec names = {0};
    bool paren = accept_op(P, "(");
    for (;;) {
        if (cur(P)->k != TK_NAME) return perr(P, "expected a variable name", NULL);
        jnode *n = mk(P, N_NAME);
        if (!n || !(n->name = tok_name(P))) return OOM();
        P->i++;
        if (allow_attr && !paren && names.n == 0 && accept_op(P, ".")) {
            if (cur(P)->k != TK_NAME) return perr(P, "expected an attribute name", NULL);
            jnode *g = mk(P, N_GETATTR);
            if (!g || !(g->name = tok_name(P))) return OOM();
            P->i++;
            g->a = n;
            *out = g;
            return 0;
        }
        CHECK(nv_push(P, &names, n, NULL));
        if (!accept_op(P, ",")) break;
        if (paren && is_op(P, ")")) break;
    }
    if (paren) CHECK(expect_op(P, ")"));
    if (names.n == 1 && !paren) {
        *out = names.v[0];
        return 0;
    }
    jnode *t = mk(P, N_TUPLE);
    if (!t) return OOM();
    t->args = names.v;
    t->nargs = names.n;
    *out = t;
    return 0;
}

static int expect_block_end(parser *P) {
    if (cur(P)->k == TK_BLOCK_END) {
        P->i++;
        return 0;
    }
    return perr(P, "expected end of block tag '%%}'", NULL);
}

static int parse_body(parser *P, const char *const *ends, jnode **out);

/* macro / call parameters: (name, name=default, ...) after '(' */
static int parse_params(parser *P, jnode *n) {
    nvec params = {0}, defs = {0};
    while (!is_op(P, ")")) {
        if (params.n) CHECK(expect_op(P, ","));
        if (is_op(P, ")")) break;
        if (cur(P)->k != TK_NAME) return perr(P, "expected a parameter name", NULL);
        jnode *p = mk(P, N_NAME);
        if (!p || !(p->name = tok_name(P))) return OOM();
        P->i++;
        jnode *d = NULL;
        if (accept_op(P, "=")) CHECK(parse_expr(P, true, &d));
        else if (defs.n && defs.v[defs.n - 1])
            return perr(P, "parameter without a default after one with a default", NULL);
        CHECK(nv_push(P, &params, p, NULL));
        CHECK(nv_push(P, &defs, d, NULL));
    }
    P->i++;
    n->args = params.v;
    n->nargs = params.n;
    n->kwvals = defs.v;
    n->nkw = defs.n;
    return 0;
}

static int parse_filter_chain(parser *P, jnode **out) {
    jnode *f = NULL;
    do {
        CHECK(parse_filter(P, f, &f));
    } while (accept_op(P, "|"));
    *out = f;
    return 0;
}

static int parse_stmt(parser *P, jnode **out) {
    const jtok *t = cur(P);
    if (t->k != TK_NAME) return perr(P, "expected a statement name after '{%%'", NULL);
    int line = t->line;
    jnode *n = NULL;
    CHECK(enter(P));
    if (accept_name(P, "if")) {
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        if (!(n = mk(P, S_IF))) return OOM();
        CHECK(parse_tuple(P, true, &n->a));
        CHECK(expect_block_end(P));
        CHECK(parse_body(P, ends, &n->body));
        jnode *tail = n;
        for (;;) {
            if (accept_name(P, "elif")) {
                jnode *e = mk(P, S_IF);
                if (!e) return OOM();
                CHECK(parse_tuple(P, true, &e->a));
                CHECK(expect_block_end(P));
                CHECK(parse_body(P, ends, &e->body));
                tail->orelse = e;
                tail = e;
            } else if (accept_name(P, "else")) {
                static const char *const end_only[] = {"endif", NULL};
                CHECK(expect_block_end(P));
                CHECK(parse_body(P, end_only, &tail->orelse));
            } else {
                P->i++; /* endif */
                break;
            }
        }
    } else if (accept_name(P, "for")) {
        static const char *const ends[] = {"else", "endfor", NULL};
        static const char *const end_only[] = {"endfor", NULL};
        if (!(n = mk(P, S_FOR))) return OOM();
        CHECK(parse_target(P, false, &n->a));
        if (!accept_name(P, "in")) return perr(P, "expected 'in' in for loop", NULL);
        CHECK(parse_tuple(P, false, &n->b));
        if (accept_name(P, "if")) CHECK(parse_expr(P, true, &n->c));
        if (accept_name(P, "recursive")) return perr(P, "recursive loops are not supported", NULL);
        CHECK(expect_block_end(P));
        CHECK(parse_body(P, ends, &n->body));
        if (accept_name(P, "else")) {
            CHECK(expect_block_end(P));
            CHECK(parse_body(P, end_only, &n->orelse));
        }
        P->i++; /* endfor */
    } else if (accept_name(P, "set")) {
        jnode *target;
        CHECK(parse_target(P, true, &target));
        if (accept_op(P, "=")) {
            if (!(n = mk(P, S_SET))) return OOM();
            n->a = target;
            CHECK(parse_tuple(P, true, &n->b));
        } else {
            static const char *const ends[] = {"endset", NULL};
            if (!(n = mk(P, S_SETBLOCK))) return OOM();
            n->a = target;
            if (accept_op(P, "|")) CHECK(parse_filter_chain(P, &n->c));
            CHECK(expect_block_end(P));
            CHECK(parse_body(P, ends, &n->body));
            P->i++;
        }
    } else if (accept_name(P, "macro")) {
        static const char *const ends[] = {"endmacro", NULL};
        if (!(n = mk(P, S_MACRO))) return OOM();
        if (cur(P)->k != TK_NAME) return perr(P, "expected a macro name", NULL);
        if (!(n->name = tok_name(P))) return OOM();
        P->i++;
        CHECK(expect_op(P, "("));
        CHECK(parse_params(P, n));
        CHECK(expect_block_end(P));
        CHECK(parse_body(P, ends, &n->body));
        P->i++;
        if (cur(P)->k == TK_NAME) P->i++; /* {% endmacro name %} */
    } else if (accept_name(P, "call")) {
        static const char *const ends[] = {"endcall", NULL};
        if (!(n = mk(P, S_CALLBLOCK))) return OOM();
        if (accept_op(P, "(")) CHECK(parse_params(P, n));
        CHECK(parse_expr(P, true, &n->a));
        if (n->a->kind != N_CALL) return perr(P, "expected a macro call after 'call'", NULL);
        CHECK(expect_block_end(P));
        CHECK(parse_body(P, ends, &n->body));
        P->i++;
    } else if (accept_name(P, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        if (!(n = mk(P, S_FILTERBLOCK))) return OOM();
        CHECK(parse_filter_chain(P, &n->c));
        CHECK(expect_block_end(P));
        CHECK(parse_body(P, ends, &n->body));
        P->i++;
    } else if (accept_name(P, "break") || accept_name(P, "continue")) {
        if (!(n = mk(P, tok_is(&P->t[P->i - 1], TK_NAME, "break") ? S_BREAK : S_CONTINUE))) return OOM();
    } else if (accept_name(P, "do")) {
        if (!(n = mk(P, S_DO))) return OOM();
        CHECK(parse_tuple(P, true, &n->a));
    } else if (accept_name(P, "generation") || accept_name(P, "block")) {
        bool gen = tok_is(&P->t[P->i - 1], TK_NAME, "generation");
        static const char *const gends[] = {"endgeneration", NULL};
        static const char *const bends[] = {"endblock", NULL};
        if (!(n = mk(P, S_BLOCK))) return OOM();
        if (!gen && cur(P)->k == TK_NAME) P->i++;
        CHECK(expect_block_end(P));
        CHECK(parse_body(P, gen ? gends : bends, &n->body));
        P->i++;
        if (!gen && cur(P)->k == TK_NAME) P->i++;
    } else {
        char nm[40];
        snprintf(nm, sizeof nm, "%.*s", (int)CLB_MIN(t->n, 30), t->p);
        return perr(P, "unknown or unexpected tag '%s'", nm);
    }
    CHECK(expect_block_end(P));
    n->line = line;
    P->depth--;
    *out = n;
    return 0;
}

/* statements until EOF (ends == NULL) or until "{% <one of ends>"; leaves P at that name */
static int parse_body(parser *P, const char *const *ends, jnode **out) {
    jnode *head = NULL, **tail = &head;
    CHECK(enter(P));
    for (;;) {
        const jtok *t = cur(P);
        jnode *n = NULL;
        if (t->k == TK_EOF) {
            if (ends) {
                const char *want = ends[0];
                for (const char *const *e = ends; *e; e++)
                    if (strncmp(*e, "end", 3) == 0) want = *e;
                return perr(P, "unexpected end of template, expected '%s'", want);
            }
            break;
        } else if (t->k == TK_TEXT) {
            if (!(n = mk(P, S_TEXT))) return OOM();
            n->lit = clb_jv_str(t->p, t->n);
            P->i++;
        } else if (t->k == TK_VAR_BEGIN) {
            P->i++;
            if (!(n = mk(P, S_OUT))) return OOM();
            CHECK(parse_tuple(P, true, &n->a));
            if (cur(P)->k != TK_VAR_END) return perr(P, "expected '}}'", NULL);
            P->i++;
        } else if (t->k == TK_BLOCK_BEGIN) {
            const jtok *nm = peek(P, 1);
            if (ends && nm->k == TK_NAME) {
                for (const char *const *e = ends; *e; e++) {
                    if (tok_is(nm, TK_NAME, *e)) {
                        P->i++;
                        P->depth--;
                        *out = head;
                        return 0;
                    }
                }
            }
            P->i++;
            CHECK(parse_stmt(P, &n));
        } else {
            return perr(P, "unexpected token", NULL);
        }
        *tail = n;
        tail = &n->next;
    }
    P->depth--;
    *out = head;
    return 0;
}

int clb_jparse(jarena *a, const jtok *toks, size_t ntoks, jnode **root) {
    parser P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.t = toks;
    P.n = ntoks;
    return parse_body(&P, NULL, root);
}
