/* jinja_impl.h — internals shared by jinja_lex.c, jinja_parse.c, jinja_value.c,
   jinja_eval.c and jinja_builtins.c. Not part of any public interface. */
#ifndef CLB_JINJA_IMPL_H
#define CLB_JINJA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "text/jinja.h"

/* ---- arena: a chain of chunks, freed at once; capped ---- */
typedef struct ja_chunk {
    struct ja_chunk *next;
    size_t size, used;
    /* data follows, max_align_t aligned */
} ja_chunk;

typedef struct jarena {
    ja_chunk *head;
    size_t total, cap;
} jarena;

void *clb_ja_alloc(jarena *a, size_t n); /* NULL when the cap is reached or malloc fails */
void clb_ja_release(jarena *a);
char *clb_ja_strndup(jarena *a, const char *s, size_t n); /* NUL-terminated copy */

/* ---- values ---- */
typedef enum {
    JV_UNDEF = 0, /* u.s holds the name, for error messages (may be empty) */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* flags & JV_F_TUPLE for tuples */
    JV_DICT, /* flags & JV_F_NS for namespace() objects */
    JV_MACRO,
    JV_FUNC, /* a global built-in function (range, namespace, ...) */
    JV_LOOP
} jtype;

enum { JV_F_TUPLE = 1, JV_F_NS = 2 };

struct jlist;
struct jdict;
struct jmacro;
struct jloop;

typedef struct jstr {
    const char *p;
    size_t n;
} jstr;

typedef struct jv {
    uint8_t t, flags;
    union {
        bool b;
        int64_t i;
        double f;
        jstr s;
        struct jlist *l;
        struct jdict *d;
        struct jmacro *m;
        struct jloop *loop;
        int fn;
    } u;
} jv;

typedef struct jlist {
    jv *items;
    size_t n, cap;
} jlist;

typedef struct jdict {
    jv *keys, *vals;
    size_t n, cap;
} jdict;

/* growable byte buffer living in the arena */
typedef struct jbuf {
    jarena *a;
    char *p;
    size_t n, cap, limit;
    bool oom, over; /* allocation failed / limit exceeded */
} jbuf;

void clb_jb_init(jbuf *b, jarena *a, size_t limit);
void clb_jb_put(jbuf *b, const char *s, size_t n);
void clb_jb_putc(jbuf *b, char c);
void clb_jb_puts(jbuf *b, const char *s);
void clb_jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

jv clb_jv_undef(const char *name);
jv clb_jv_none(void);
jv clb_jv_bool(bool b);
jv clb_jv_int(int64_t i);
jv clb_jv_float(double f);
jv clb_jv_str(const char *p, size_t n);
jv clb_jv_cstr(const char *s);
jv clb_jv_list_new(jarena *a, size_t cap); /* t == JV_UNDEF with empty name on OOM */
jv clb_jv_dict_new(jarena *a, size_t cap);
bool clb_jl_push(jarena *a, jlist *l, jv v);
bool clb_jd_set(jarena *a, jdict *d, jv key, jv val); /* insert or replace */
const jv *clb_jd_get(const jdict *d, jv key);
const jv *clb_jd_get_str(const jdict *d, const char *k, size_t n);

bool clb_jv_truthy(jv v);
bool clb_jv_equal(jv a, jv b);
bool clb_jv_is_num(jv v); /* bool, int or float */
double clb_jv_num(jv v);
const char *clb_jv_type_name(jv v); /* Python-ish: 'str', 'dict', 'NoneType', ... */
/* str(v) appended to b (Python semantics; undefined prints nothing) */
void clb_jv_write_str(jbuf *b, jv v);
/* repr(v) appended to b */
void clb_jv_write_repr(jbuf *b, jv v);
/* json.dumps(v, ensure_ascii=False, indent, separators, sort_keys); false on a
   non-serialisable value (type name in *bad) */
bool clb_jv_write_json(jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep,
                   bool sort_keys, const char **bad);
void clb_fmt_float(double x, char out[40]); /* Python repr(float) */
/* str(v) as a string value (no copy for strings) */
jv clb_jv_to_str(jarena *a, jv v);
/* cJSON -> value (strings borrowed from the cJSON tree) */
jv clb_jv_from_json(jarena *a, const cJSON *j, int depth);

/* UTF-8 helpers */
size_t clb_u8_len(const char *p, size_t n);             /* code points */
size_t clb_u8_next(const char *p, size_t n, size_t i);   /* byte index of the next code point */
size_t clb_u8_offset(const char *p, size_t n, size_t k); /* byte index of code point k (clamped) */
bool clb_u8_space_at(const char *p, size_t n, size_t i, size_t *len); /* Python str.isspace */

/* ---- lexer ---- */
typedef enum {
    TK_EOF = 0,
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP
} jtok_kind;

typedef struct jtok {
    jtok_kind k;
    int line;
    const char *p; /* TEXT/NAME/STRING/OP: bytes (arena or source) */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* Tokenises src into *toks (arena); returns status with clb_err set on error. */
int clb_jlex(jarena *a, const char *src, jtok **toks, size_t *ntoks);

/* ---- AST ---- */
typedef enum {
    /* expressions */
    N_LIT,
    N_NAME,
    N_GETATTR, /* a.name */
    N_GETITEM, /* a[b] */
    N_SLICE,   /* a[b:c:d], NULL parts omitted */
    N_CALL,    /* a(args, kw=...) */
    N_FILTER,  /* a | name(args) ; a == NULL inside {% filter %} */
    N_TEST,    /* a is [not] name(args) ; op = negated */
    N_NEG,
    N_POS,
    N_NOT,
    N_AND,
    N_OR,
    N_BIN,     /* op: + - * / // % ** ~ */
    N_CMP,     /* chain: args[0] ops[0] args[1] ops[1] ... */
    N_COND,    /* b if a else c (c may be NULL) */
    N_LIST,
    N_TUPLE,
    N_DICT,    /* args = keys, kwvals = values */
    /* statements */
    S_TEXT,
    S_OUT,
    S_IF,      /* a = cond, body, orelse */
    S_FOR,     /* a = target, b = iter, c = filter cond, body, orelse, op = recursive */
    S_SET,     /* a = target, b = value */
    S_SETBLOCK,/* a = target, body, c = filter chain (N_FILTER with innermost a NULL) */
    S_MACRO,   /* name, params (args as N_NAME), defaults (kwvals, NULL when none), body */
    S_CALLBLOCK, /* a = call expression, params/defaults as macro, body = caller body */
    S_FILTERBLOCK, /* c = filter chain, body */
    S_BREAK,
    S_CONTINUE,
    S_DO,
    S_BLOCK    /* a transparent container: {% generation %}, {% block %} */
} jnode_kind;

enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT };
enum { CMP_EQ = 1, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

typedef struct jnode {
    uint8_t kind, op;
    int line;
    struct jnode *a, *b, *c;
    struct jnode **args; /* positional args / list items / dict keys / macro params / cmp operands */
    size_t nargs;
    const char **kwnames;  /* keyword argument names */
    struct jnode **kwvals; /* keyword values / dict values / macro defaults */
    size_t nkw;
    uint8_t *ops;          /* N_CMP operators, nargs - 1 of them */
    const char *name;      /* NUL-terminated */
    jv lit;
    struct jnode *body, *orelse; /* statement lists (linked through next) */
    struct jnode *next;
} jnode;

struct clb_jinja_tpl {
    jarena arena; /* tokens + AST */
    jnode *root;
};

int clb_jparse(jarena *a, const jtok *toks, size_t ntoks, jnode **root);

/* ---- evaluation ---- */
typedef struct jframe {
    struct jframe *parent;
    jstr *names;
    jv *vals;
    size_t n, cap;
} jframe;

struct jmacro {
    const jnode *def;       /* S_MACRO or S_CALLBLOCK node */
    const char *name;
    struct jmacro *caller;  /* the caller() available inside a macro invoked by {% call %} */
    jframe *scope;          /* frame the body's parent resolves to */
};

struct jloop {
    size_t index0, length;
    const jlist *items;
    int depth;
};

typedef struct jctx {
    jarena *a;
    jbuf *out;        /* current output (swapped while capturing) */
    jframe *frame;    /* innermost scope */
    jframe *root;
    int depth;        /* evaluation nesting */
    int call_depth;
    uint64_t iterations;
    int line;         /* line of the node being evaluated, for errors */
    int ctl;          /* 0, or CTL_BREAK / CTL_CONTINUE while unwinding */
    struct jmacro *caller;
} jctx;

enum { CTL_BREAK = 1, CTL_CONTINUE = 2 };

/* every failing step returns this after setting clb_err */
int clb_jerr(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int clb_jerr_oom(jctx *c);
int clb_jerr_limit(jctx *c, const char *what);
int clb_jerr_undef(jctx *c, jv undefined_value); /* "'name' is undefined" */
/* Python ordering (numbers, strings, lists): *res < 0, 0, > 0; error for other types */
int clb_jorder(jctx *c, jv a, jv b, const char *opname, int *res);
/* `item in seq` */
int clb_jcontains(jctx *c, jv item, jv seq, bool *res);

int clb_jeval(jctx *c, const jnode *n, jv *out);
/* calls a macro value with evaluated args */
int clb_jcall_macro(jctx *c, struct jmacro *m, const jv *args, size_t nargs, const char **kwn,
                const jv *kwv, size_t nkw, jv *out);

/* builtins (jinja_builtins.c) */
int clb_jfilter(jctx *c, const char *name, jv in, const jv *args, size_t nargs, const char **kwn,
            const jv *kwv, size_t nkw, jv *out);
int clb_jtest(jctx *c, const char *name, jv in, const jv *args, size_t nargs, bool *out);
/* method call obj.name(args): *handled false when obj has no such method */
int clb_jmethod(jctx *c, jv obj, const char *name, const jv *args, size_t nargs, const char **kwn,
            const jv *kwv, size_t nkw, jv *out, bool *handled);
/* global functions: returns -1 as fn id when unknown */
int clb_jglobal_id(const char *name);
int clb_jcall_global(jctx *c, int fn, const jv *args, size_t nargs, const char **kwn, const jv *kwv,
                 size_t nkw, jv *out);
/* attribute lookup on a loop object */
bool clb_jloop_attr(jctx *c, const struct jloop *l, const char *name, jv *out);
/* iterate: materialises any iterable into a list (strings -> characters, dicts -> keys) */
int clb_jiter(jctx *c, jv v, jlist **out);
/* a[b] / a.b lookup (attr_first: Jinja's getattr order); returns 0 and an undefined
   value when missing */
int clb_jlookup(jctx *c, jv obj, jv key, bool attr_first, jv *out);

/* call arguments as seen by builtins */
typedef struct jargs {
    const jv *a;
    size_t n;
    const char **kn;
    const jv *kv;
    size_t nk;
} jargs;
/* positional argument pos, or keyword `name` (NULL: positional only) */
bool clb_getarg(const jargs *A, size_t pos, const char *name, jv *out);
jv clb_argor(const jargs *A, size_t pos, const char *name, jv dflt); /* clb_getarg or dflt */
int clb_need_str(jctx *c, jv v, const char *what, jstr *out);       /* error unless a string */
int clb_mkstr(jctx *c, jbuf *b, jv *out);                            /* buffer -> value (limits) */
int clb_as_str(jctx *c, jv v, jstr *out);                            /* str(v) */

/* string operations (jinja_str.c) */
bool clb_alpha_c(char ch);
int clb_str_case(jctx *c, jstr s, int mode, jv *out); /* 0 lower, 1 upper, 2 capitalize, 3 str.title */
int clb_jinja_title(jctx *c, jstr s, jv *out);        /* the title filter */
jstr clb_do_strip(jstr s, const jstr *chars, bool left, bool right); /* chars NULL: whitespace */
int clb_strip_arg(jctx *c, const jargs *A, jstr *chars, bool *has);
int clb_do_replace(jctx *c, jstr s, jstr old, jstr rep, int64_t count, jv *out);
int clb_do_split(jctx *c, jstr s, const jstr *sep, int64_t maxsplit, bool from_right, jv *out);
int clb_do_splitlines(jctx *c, jstr s, jlist **out);
int clb_str_method(jctx *c, jstr s, const char *name, const jargs *A, jv *out, bool *handled);

#endif
