/* jinja_str.c — Python str semantics for the Jinja subset: case mapping (ASCII), strip,
   replace, split/rsplit/splitlines, and the string methods templates call
   (startswith, split, strip, find, join, ...). */
#include <string.h>

#include "text/jinja_impl.h"

#define CHECK(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

/* ---- string helpers ---- */

static char lower_c(char ch) { return (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch; }
static char upper_c(char ch) { return (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch; }
bool clb_alpha_c(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

int clb_str_case(jctx *c, jstr s, int mode, jv *out) {
    /* mode 0 lower, 1 upper, 2 capitalize, 3 str.title */
    char *p = clb_ja_alloc(c->a, s.n + 1);
    if (!p) return clb_jerr_oom(c);
    bool prev_cased = false;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        switch (mode) {
        case 0: ch = lower_c(ch); break;
        case 1: ch = upper_c(ch); break;
        case 2: ch = i == 0 ? upper_c(ch) : lower_c(ch); break;
        default:
            ch = prev_cased ? lower_c(ch) : upper_c(ch);
            prev_cased = clb_alpha_c(ch) || ((unsigned char)ch >= 0x80);
        }
        p[i] = ch;
    }
    p[s.n] = 0;
    *out = clb_jv_str(p, s.n);
    return 0;
}

/* Jinja's title filter: words start after whitespace, '-', '(', '{', '[' or '<' */
int clb_jinja_title(jctx *c, jstr s, jv *out) {
    char *p = clb_ja_alloc(c->a, s.n + 1);
    if (!p) return clb_jerr_oom(c);
    bool start = true;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        bool sep = ch == ' ' || (ch >= 9 && ch <= 13) || ch == '-' || ch == '(' || ch == '{' ||
                   ch == '[' || ch == '<';
        p[i] = sep ? ch : start ? upper_c(ch) : lower_c(ch);
        start = sep;
    }
    p[s.n] = 0;
    *out = clb_jv_str(p, s.n);
    return 0;
}

/* does the code point at s[i..] appear among the code points of set? */
static bool cp_in(const char *s, size_t n, size_t i, size_t *len, jstr set) {
    size_t j = clb_u8_next(s, n, i);
    *len = j - i;
    for (size_t k = 0; k < set.n; k = clb_u8_next(set.p, set.n, k)) {
        size_t kl = clb_u8_next(set.p, set.n, k) - k;
        if (kl == *len && memcmp(set.p + k, s + i, kl) == 0) return true;
    }
    return false;
}

/* Python strip/lstrip/rstrip; chars NULL = whitespace */
jstr clb_do_strip(jstr s, const jstr *chars, bool left, bool right) {
    size_t b = 0, e = s.n, l;
    if (left) {
        while (b < e && (chars ? cp_in(s.p, e, b, &l, *chars) : clb_u8_space_at(s.p, e, b, &l))) b += l;
    }
    if (right) {
        while (e > b) {
            size_t k = e - 1;
            while (k > b && ((unsigned char)s.p[k] & 0xC0) == 0x80) k--;
            bool hit = chars ? cp_in(s.p, e, k, &l, *chars) : clb_u8_space_at(s.p, e, k, &l);
            if (!hit || k + l != e) break;
            e = k;
        }
    }
    jstr r = {s.p + b, e - b};
    return r;
}

int clb_strip_arg(jctx *c, const jargs *A, jstr *chars, bool *has) {
    jv v;
    *has = false;
    if (clb_getarg(A, 0, "chars", &v) && v.t != JV_NONE) {
        CHECK(clb_need_str(c, v, "strip()", chars));
        *has = true;
    }
    return 0;
}

int clb_do_replace(jctx *c, jstr s, jstr old, jstr rep, int64_t count, jv *out) {
    jbuf b;
    clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
    size_t i = 0;
    int64_t done = 0;
    if (old.n == 0) {
        for (; i <= s.n; i = clb_u8_next(s.p, s.n, i)) {
            if (count < 0 || done < count) {
                clb_jb_put(&b, rep.p, rep.n);
                done++;
            }
            if (i == s.n) break;
            size_t j = clb_u8_next(s.p, s.n, i);
            clb_jb_put(&b, s.p + i, j - i);
        }
        return clb_mkstr(c, &b, out);
    }
    while (i < s.n) {
        const char *hit = (count < 0 || done < count) ? memmem(s.p + i, s.n - i, old.p, old.n) : NULL;
        if (!hit) break;
        size_t at = (size_t)(hit - s.p);
        clb_jb_put(&b, s.p + i, at - i);
        clb_jb_put(&b, rep.p, rep.n);
        i = at + old.n;
        done++;
    }
    clb_jb_put(&b, s.p + i, s.n - i);
    return clb_mkstr(c, &b, out);
}

static int push_str(jctx *c, jlist *l, const char *p, size_t n) {
    if (!clb_jl_push(c->a, l, clb_jv_str(p, n))) return clb_jerr_oom(c);
    return 0;
}

/* Python str.split / str.rsplit (rsplit only differs with maxsplit) */
int clb_do_split(jctx *c, jstr s, const jstr *sep, int64_t maxsplit, bool from_right, jv *out) {
    jv lv = clb_jv_list_new(c->a, 0);
    if (lv.t != JV_LIST) return clb_jerr_oom(c);
    jlist *l = lv.u.l;
    if (sep && sep->n == 0) return clb_jerr(c, "empty separator");
    if (from_right && maxsplit >= 0) {
        /* collect from the right, then reverse */
        size_t e = s.n;
        int64_t done = 0;
        if (!sep) {
            size_t sl;
            while (e > 0 && clb_u8_space_at(s.p, s.n, e - 1, &sl)) e--;
        }
        while (e > 0 && done < maxsplit) {
            size_t k = e;
            bool found = false;
            if (sep) {
                while (k >= sep->n) {
                    if (memcmp(s.p + k - sep->n, sep->p, sep->n) == 0) {
                        found = true;
                        break;
                    }
                    k--;
                }
                if (!found) break;
                CHECK(push_str(c, l, s.p + k, e - k));
                e = k - sep->n;
            } else {
                size_t sl;
                while (k > 0 && !clb_u8_space_at(s.p, s.n, k - 1, &sl)) k--;
                if (k == 0) break;
                CHECK(push_str(c, l, s.p + k, e - k));
                e = k;
                while (e > 0 && clb_u8_space_at(s.p, s.n, e - 1, &sl)) e--;
            }
            done++;
        }
        if (sep || e > 0) CHECK(push_str(c, l, s.p, e));
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
        *out = lv;
        return 0;
    }
    size_t i = 0;
    int64_t done = 0;
    if (sep) {
        for (;;) {
            const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s.p + i, s.n - i, sep->p, sep->n) : NULL;
            if (!hit) break;
            size_t at = (size_t)(hit - s.p);
            CHECK(push_str(c, l, s.p + i, at - i));
            i = at + sep->n;
            done++;
        }
        CHECK(push_str(c, l, s.p + i, s.n - i));
    } else {
        size_t sl;
        for (;;) {
            while (i < s.n && clb_u8_space_at(s.p, s.n, i, &sl)) i += sl;
            if (i >= s.n) break;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t e = s.n;
                jstr rest = clb_do_strip((jstr){s.p + i, e - i}, NULL, false, true);
                CHECK(push_str(c, l, rest.p, rest.n));
                break;
            }
            size_t b = i;
            while (i < s.n && !clb_u8_space_at(s.p, s.n, i, &sl)) i = clb_u8_next(s.p, s.n, i);
            CHECK(push_str(c, l, s.p + b, i - b));
            done++;
        }
    }
    *out = lv;
    return 0;
}

/* str.splitlines() on \n, \r\n, \r */
int clb_do_splitlines(jctx *c, jstr s, jlist **out) {
    jv lv = clb_jv_list_new(c->a, 0);
    if (lv.t != JV_LIST) return clb_jerr_oom(c);
    size_t b = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] == '\n' || s.p[i] == '\r') {
            CHECK(push_str(c, lv.u.l, s.p + b, i - b));
            if (s.p[i] == '\r' && i + 1 < s.n && s.p[i + 1] == '\n') i++;
            b = i + 1;
        }
    }
    if (b < s.n) CHECK(push_str(c, lv.u.l, s.p + b, s.n - b));
    *out = lv.u.l;
    return 0;
}



int clb_str_method(jctx *c, jstr s, const char *name, const jargs *A, jv *out, bool *handled) {
    *handled = true;
    jv a0;
    jstr t;
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        if (!clb_getarg(A, 0, NULL, &a0)) return clb_jerr(c, "%s() takes at least 1 argument", name);
        bool start = name[0] == 's', r = false;
        jv one[1] = {a0};
        const jv *cands = one;
        size_t nc = 1;
        if (a0.t == JV_LIST) {
            cands = a0.u.l->items;
            nc = a0.u.l->n;
        }
        for (size_t i = 0; i < nc && !r; i++) {
            CHECK(clb_need_str(c, cands[i], name, &t));
            r = t.n <= s.n && memcmp(start ? s.p : s.p + s.n - t.n, t.p, t.n) == 0;
        }
        *out = clb_jv_bool(r);
        return 0;
    }
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        jstr chars;
        bool has;
        CHECK(clb_strip_arg(c, A, &chars, &has));
        t = clb_do_strip(s, has ? &chars : NULL, name[0] != 'r', name[0] != 'l');
        *out = clb_jv_str(t.p, t.n);
        return 0;
    }
    if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
        jv sep = clb_argor(A, 0, "sep", clb_jv_none()), ms = clb_argor(A, 1, "maxsplit", clb_jv_int(-1));
        jstr sp;
        if (sep.t != JV_NONE) CHECK(clb_need_str(c, sep, "split()", &sp));
        return clb_do_split(c, s, sep.t == JV_NONE ? NULL : &sp, ms.t == JV_INT ? ms.u.i : -1, name[0] == 'r', out);
    }
    if (!strcmp(name, "splitlines")) {
        jlist *l;
        CHECK(clb_do_splitlines(c, s, &l));
        *out = clb_jv_none();
        out->t = JV_LIST;
        out->u.l = l;
        return 0;
    }
    if (!strcmp(name, "upper")) return clb_str_case(c, s, 1, out);
    if (!strcmp(name, "lower")) return clb_str_case(c, s, 0, out);
    if (!strcmp(name, "capitalize")) return clb_str_case(c, s, 2, out);
    if (!strcmp(name, "title")) return clb_str_case(c, s, 3, out);
    if (!strcmp(name, "replace")) {
        jv o, r;
        jstr os, rs;
        if (!clb_getarg(A, 0, NULL, &o) || !clb_getarg(A, 1, NULL, &r)) return clb_jerr(c, "replace() takes at least 2 arguments");
        CHECK(clb_need_str(c, o, "replace()", &os));
        CHECK(clb_need_str(c, r, "replace()", &rs));
        jv cnt = clb_argor(A, 2, "count", clb_jv_int(-1));
        return clb_do_replace(c, s, os, rs, cnt.t == JV_INT ? cnt.u.i : -1, out);
    }
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "rindex") ||
        !strcmp(name, "count")) {
        if (!clb_getarg(A, 0, NULL, &a0)) return clb_jerr(c, "%s() takes at least 1 argument", name);
        CHECK(clb_need_str(c, a0, name, &t));
        if (name[0] == 'c') {
            int64_t n = 0;
            if (t.n == 0) n = (int64_t)clb_u8_len(s.p, s.n) + 1;
            else
                for (const char *p = s.p, *e = s.p + s.n; (p = memmem(p, (size_t)(e - p), t.p, t.n)); p += t.n) n++;
            *out = clb_jv_int(n);
            return 0;
        }
        int64_t pos = -1;
        if (name[0] == 'r') {
            for (size_t i = s.n + 1; i-- > 0;)
                if (i + t.n <= s.n && memcmp(s.p + i, t.p, t.n) == 0) {
                    pos = (int64_t)i;
                    break;
                }
        } else {
            const char *h = t.n ? memmem(s.p, s.n, t.p, t.n) : s.p;
            if (h) pos = h - s.p;
        }
        if (pos < 0 && strstr(name, "index")) return clb_jerr(c, "substring not found");
        *out = clb_jv_int(pos < 0 ? -1 : (int64_t)clb_u8_len(s.p, (size_t)pos));
        return 0;
    }
    if (!strcmp(name, "join")) {
        if (!clb_getarg(A, 0, NULL, &a0)) return clb_jerr(c, "join() takes exactly one argument");
        jlist *items;
        CHECK(clb_jiter(c, a0, &items));
        jbuf b;
        clb_jb_init(&b, c->a, CLB_JINJA_MAX_OUTPUT);
        for (size_t i = 0; i < items->n; i++) {
            CHECK(clb_need_str(c, items->items[i], "join()", &t));
            if (i) clb_jb_put(&b, s.p, s.n);
            clb_jb_put(&b, t.p, t.n);
        }
        return clb_mkstr(c, &b, out);
    }
    if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
        if (!clb_getarg(A, 0, NULL, &a0)) return clb_jerr(c, "%s() takes exactly one argument", name);
        CHECK(clb_need_str(c, a0, name, &t));
        bool pre = name[6] == 'p';
        if (t.n <= s.n && memcmp(pre ? s.p : s.p + s.n - t.n, t.p, t.n) == 0)
            *out = clb_jv_str(pre ? s.p + t.n : s.p, s.n - t.n);
        else *out = clb_jv_str(s.p, s.n);
        return 0;
    }
    if (!strcmp(name, "isdigit") || !strcmp(name, "isalpha") || !strcmp(name, "isalnum") ||
        !strcmp(name, "isspace") || !strcmp(name, "islower") || !strcmp(name, "isupper")) {
        bool r = s.n > 0, cased = false;
        for (size_t i = 0; i < s.n && r; i++) {
            char ch = s.p[i];
            bool dg = ch >= '0' && ch <= '9', al = clb_alpha_c(ch);
            size_t sl;
            switch (name[2]) {
            case 'd': r = dg; break;
            case 'a': r = name[4] == 'h' ? al : (al || dg); break;
            case 's': r = clb_u8_space_at(s.p, s.n, i, &sl); i += sl - 1; break;
            case 'l': if (ch >= 'A' && ch <= 'Z') r = false; cased |= ch >= 'a' && ch <= 'z'; break;
            default: if (ch >= 'a' && ch <= 'z') r = false; cased |= ch >= 'A' && ch <= 'Z'; break;
            }
        }
        if (name[2] == 'l' || name[2] == 'u') r = r && cased;
        *out = clb_jv_bool(r);
        return 0;
    }
    *handled = false;
    return 0;
}

