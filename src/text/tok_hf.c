/* tok_hf.c — loading a Hugging Face tokenizer.json (+ tokenizer_config.json).
 *
 * Supported: model BPE (vocab, merges as "a b" strings or ["a","b"] pairs, byte_fallback,
 * fuse_unk, unk_token, ignore_merges, continuing_subword_prefix, end_of_word_suffix);
 * normalizers Sequence, NFC, NFKC, NFD, NFKD, Lowercase, Prepend, Replace, Strip;
 * pre-tokenizers Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace,
 * WhitespaceSplit, BertPreTokenizer; post-processors TemplateProcessing, ByteLevel,
 * RobertaProcessing, BertProcessing, Sequence; decoders Sequence, ByteLevel, Replace,
 * ByteFallback, Fuse, Strip, Metaspace. Anything else is COLIBRI_ERR_UNSUPPORTED, never
 * silently ignored on the encoding side. */
#include <stdio.h>
#include <string.h>

#include "text/tok_internal.h"

/* Rust regex's \w (tokenizers' Whitespace pre-tokenizer): Alphabetic, marks, decimal
   digits, connector punctuation, joiners (PCRE2's \w has other digits and fewer marks) */
#define RE_WORD_CHARS "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"
#define RE_WORD "[" RE_WORD_CHARS "]"

#define GPT2_REGEX \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool jbool(const cJSON *o, const char *k, bool def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return def;
}

static const char *jtype(const cJSON *o) { return cJSON_IsObject(o) ? jstr(o, "type") : NULL; }

static char *dupn(const char *s, size_t n) {
    char *d = clb_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* A token given as a string or as {"content": "..."} (tokenizer_config.json style). */
static const char *token_content(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return jstr(v, "content");
    return NULL;
}

static bool has_type(const cJSON *o, const char *type, const char *list_key) {
    if (!cJSON_IsObject(o)) return false;
    const char *t = jtype(o);
    if (t && strcmp(t, type) == 0) return true;
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, list_key);
    const cJSON *e;
    cJSON_ArrayForEach(e, l) if (has_type(e, type, list_key)) return true;
    return false;
}

/* Escapes a literal for PCRE2 (bytes >= 0x80 and alphanumerics pass through). */
static char *regex_escape(const char *s) {
    size_t n = strlen(s);
    char *d = clb_malloc(2 * n + 1), *o = d;
    if (!d) return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80 && !((c | 32) >= 'a' && (c | 32) <= 'z') && !(c >= '0' && c <= '9'))
            *o++ = '\\';
        *o++ = (char)c;
    }
    *o = 0;
    return d;
}

/* pattern {"String": s} or {"Regex": r} -> PCRE2 source (heap) */
static char *pattern_source(const cJSON *pat, bool *is_regex) {
    const char *s = jstr(pat, "String");
    if (s) {
        *is_regex = false;
        return regex_escape(s);
    }
    s = jstr(pat, "Regex");
    if (!s) return NULL;
    *is_regex = true;
    return dupn(s, strlen(s));
}

static int parse_normalizer(clb_tokenizer *t, const cJSON *n) {
    if (!n || cJSON_IsNull(n)) return COLIBRI_OK;
    const char *ty = jtype(n);
    if (!ty) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: normalizer without a type");
    clb_norm_op op = {0};
    if (!strcmp(ty, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "normalizers")) {
            int rc = parse_normalizer(t, e);
            if (rc != COLIBRI_OK) return rc;
        }
        return COLIBRI_OK;
    } else if (!strcmp(ty, "NFC")) op.kind = CLB_N_NFC;
    else if (!strcmp(ty, "NFKC")) op.kind = CLB_N_NFKC;
    else if (!strcmp(ty, "NFD")) op.kind = CLB_N_NFD;
    else if (!strcmp(ty, "NFKD")) op.kind = CLB_N_NFKD;
    else if (!strcmp(ty, "Lowercase")) op.kind = CLB_N_LOWER;
    else if (!strcmp(ty, "Strip")) {
        op.kind = CLB_N_STRIP;
        op.left = jbool(n, "strip_left", true);
        op.right = jbool(n, "strip_right", true);
    } else if (!strcmp(ty, "Prepend")) {
        const char *p = jstr(n, "prepend");
        if (!p) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: Prepend without prepend");
        op.kind = CLB_N_PREPEND;
        op.a = dupn(p, op.alen = strlen(p));
        if (!op.a) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    } else if (!strcmp(ty, "Replace")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const char *content = jstr(n, "content");
        if (!content) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: Replace without content");
        op.b = dupn(content, op.blen = strlen(content));
        if (!op.b) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        const char *lit = jstr(pat, "String");
        if (lit) {
            op.kind = CLB_N_REPLACE;
            op.a = dupn(lit, op.alen = strlen(lit));
        } else {
            const char *re = jstr(pat, "Regex");
            if (!re) {
                clb_free(op.b);
                return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: Replace without pattern");
            }
            op.kind = CLB_N_REPLACE_RE;
            op.re = clb_regex_compile(re, strlen(re), "Replace normalizer");
            if (!op.re) { clb_free(op.b); return COLIBRI_ERR_UNSUPPORTED; }
        }
    } else if (!strcmp(ty, "BertNormalizer")) {
        op.kind = CLB_N_BERT;
        op.clean = jbool(n, "clean_text", true);
        op.chinese = jbool(n, "handle_chinese_chars", true);
        op.lowercase = jbool(n, "lowercase", true);
        op.strip_accents = jbool(n, "strip_accents", op.lowercase); /* null: as lowercase */
    } else if (!strcmp(ty, "StripAccents")) {
        op.kind = CLB_N_STRIP_ACCENTS;
    } else if (!strcmp(ty, "Nmt")) {
        op.kind = CLB_N_NMT;
    } else if (!strcmp(ty, "Precompiled")) {
        const char *b64 = jstr(n, "precompiled_charsmap");
        size_t bn = 0;
        unsigned char *blob = b64 ? clb_base64_decode(b64, &bn) : NULL;
        if (!blob) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: Precompiled without a base64 precompiled_charsmap");
        op.kind = CLB_N_PRECOMPILED;
        op.cm = clb_calloc(1, sizeof *op.cm);
        int rc = op.cm ? clb_charsmap_parse(blob, bn, op.cm) : clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        clb_free(blob);
        if (rc != COLIBRI_OK) {
            clb_free(op.cm);
            return rc;
        }
    } else {
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "tokenizer.json: normalizer %s is not supported", ty);
    }
    int rc = clb_tok_add_norm(t, &op);
    if (rc != COLIBRI_OK && op.cm) {
        clb_charsmap_free(op.cm);
        clb_free(op.cm);
    }
    return rc;
}

static int behavior_of(const char *b) {
    if (!b || !strcmp(b, "Isolated")) return CLB_SPLIT_ISOLATED;
    if (!strcmp(b, "Removed")) return CLB_SPLIT_REMOVED;
    if (!strcmp(b, "MergedWithPrevious")) return CLB_SPLIT_MERGED_PREV;
    if (!strcmp(b, "MergedWithNext")) return CLB_SPLIT_MERGED_NEXT;
    if (!strcmp(b, "Contiguous")) return CLB_SPLIT_CONTIGUOUS;
    return -1;
}

static int parse_pre(clb_tokenizer *t, const cJSON *p) {
    if (!p || cJSON_IsNull(p)) return COLIBRI_OK;
    const char *ty = jtype(p);
    if (!ty) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: pre_tokenizer without a type");
    if (!strcmp(ty, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p, "pretokenizers")) {
            int rc = parse_pre(t, e);
            if (rc != COLIBRI_OK) return rc;
        }
        return COLIBRI_OK;
    }
    if (!strcmp(ty, "Split")) {
        bool is_re;
        char *src = pattern_source(cJSON_GetObjectItemCaseSensitive(p, "pattern"), &is_re);
        int beh = behavior_of(jstr(p, "behavior"));
        if (!src || beh < 0) {
            clb_free(src);
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: Split needs a pattern and a behavior");
        }
        int rc = clb_tok_add_split_regex(t, src, beh, jbool(p, "invert", false));
        clb_free(src);
        return rc;
    }
    if (!strcmp(ty, "ByteLevel")) {
        if (jbool(p, "add_prefix_space", true)) {
            clb_pre_op op = {0};
            op.kind = CLB_P_PREFIX_SPACE;
            int rc = clb_tok_add_pre(t, &op);
            if (rc != COLIBRI_OK) return rc;
        }
        if (jbool(p, "use_regex", true))
            return clb_tok_add_split_regex(t, GPT2_REGEX, CLB_SPLIT_ISOLATED, false);
        return COLIBRI_OK; /* the byte mapping itself is built into the vocabulary */
    }
    if (!strcmp(ty, "Metaspace")) {
        clb_pre_op op = {0};
        op.kind = CLB_P_METASPACE;
        const char *r = jstr(p, "replacement");
        if (!r) r = "\xe2\x96\x81";
        if (!*r || clb_utf8_valid_char((const unsigned char *)r, strlen(r)) != strlen(r))
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: Metaspace replacement \"%.20s\" is not one character", r);
        op.repl = dupn(r, op.repl_len = strlen(r));
        if (!op.repl) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        const char *ps = jstr(p, "prepend_scheme");
        if (ps) op.prepend = !strcmp(ps, "always") ? 1 : !strcmp(ps, "first") ? 2 : 0;
        else op.prepend = jbool(p, "add_prefix_space", true) ? 1 : 0;
        op.split = jbool(p, "split", true);
        return clb_tok_add_pre(t, &op);
    }
    if (!strcmp(ty, "Digits"))
        return clb_tok_add_split_regex(t, jbool(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+",
                                       CLB_SPLIT_ISOLATED, false);
    if (!strcmp(ty, "Punctuation")) {
        int beh = behavior_of(jstr(p, "behavior"));
        return clb_tok_add_split_regex(t, "[\\p{P}!-/:-@\\[-`{-~]", beh < 0 ? CLB_SPLIT_ISOLATED : beh,
                                       false);
    }
    if (!strcmp(ty, "CharDelimiterSplit")) {
        const char *d = jstr(p, "delimiter");
        bool is_re;
        if (!d || !*d || clb_utf8_valid_char((const unsigned char *)d, strlen(d)) != strlen(d))
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: CharDelimiterSplit needs a one-character delimiter");
        cJSON *pat = cJSON_CreateObject();
        if (!pat || !cJSON_AddStringToObject(pat, "String", d)) {
            cJSON_Delete(pat);
            return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        }
        char *src = pattern_source(pat, &is_re);
        cJSON_Delete(pat);
        int rc = src ? clb_tok_add_split_regex(t, src, CLB_SPLIT_REMOVED, false)
                     : clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        clb_free(src);
        return rc;
    }
    if (!strcmp(ty, "Whitespace"))
        return clb_tok_add_split_regex(t, RE_WORD "+|[^\\s" RE_WORD_CHARS "]+", CLB_SPLIT_REMOVED, true);
    if (!strcmp(ty, "WhitespaceSplit"))
        return clb_tok_add_split_regex(t, "\\s+", CLB_SPLIT_REMOVED, false);
    if (!strcmp(ty, "BertPreTokenizer")) {
        int rc = clb_tok_add_split_regex(t, "\\s+", CLB_SPLIT_REMOVED, false);
        if (rc != COLIBRI_OK) return rc;
        return clb_tok_add_split_regex(t, "[\\p{P}!-/:-@\\[-`{-~]", CLB_SPLIT_ISOLATED, false);
    }
    return clb_err(COLIBRI_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer %s is not supported", ty);
}

static void parse_decoder_step(clb_tokenizer *t, const cJSON *d) {
    const char *ty = jtype(d);
    if (!ty) return;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(d, "decoders")) parse_decoder_step(t, e);
    } else if (!strcmp(ty, "ByteLevel")) {
        t->dec_utf8_lossy = true;
    } else if (!strcmp(ty, "Replace")) {
        const char *from = jstr(cJSON_GetObjectItemCaseSensitive(d, "pattern"), "String");
        const char *to = jstr(d, "content");
        if (from && to && !t->dec_from) {
            t->dec_from = dupn(from, strlen(from));
            t->dec_to = dupn(to, strlen(to));
        }
    } else if (!strcmp(ty, "Strip")) {
        const char *c = jstr(d, "content");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(d, "start");
        if (c && !strcmp(c, " ") && cJSON_IsNumber(st)) t->dec_strip = st->valueint;
    } else if (!strcmp(ty, "Metaspace")) {
        const char *r = jstr(d, "replacement");
        if (!r) r = "\xe2\x96\x81";
        if (!t->dec_from) {
            t->dec_from = dupn(r, strlen(r));
            t->dec_to = dupn(" ", 1);
        }
        const char *ps = jstr(d, "prepend_scheme");
        bool strip = ps ? strcmp(ps, "never") != 0 : jbool(d, "add_prefix_space", true);
        if (strip) t->dec_strip = 1;
    } else if (!strcmp(ty, "WordPiece")) { /* "##x" glues to the previous token, others get a space */
        const char *pf = jstr(d, "prefix");
        t->dec_wordpiece = true;
        t->dec_cleanup = jbool(d, "cleanup", true);
        t->dec_strip = 1;
        clb_free(t->dec_prefix);
        t->dec_prefix = dupn(pf ? pf : "##", strlen(pf ? pf : "##"));
    }
    /* ByteFallback and Fuse need nothing: byte tokens and concatenation are built in */
}

static int parse_decoder(clb_tokenizer *t, const cJSON *d) {
    if (!d || cJSON_IsNull(d)) { /* tokenizers with no decoder join the tokens with spaces */
        t->dec_join = true;
        t->dec_strip = 1;
        return COLIBRI_OK;
    }
    parse_decoder_step(t, d);
    if ((t->dec_wordpiece && !t->dec_prefix) || (t->dec_from && !t->dec_to))
        return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    return COLIBRI_OK;
}

static int32_t vocab_id(const clb_tokenizer *t, const char *s) {
    if (!s) return -1;
    for (int i = 0; i < t->n_added; i++)
        if (!strcmp(t->added[i].content, s)) return t->added[i].id;
    /* the model form of a file string: byte-level tokens are stored decoded */
    size_t n = strlen(s);
    char *d = clb_malloc(n + 1);
    if (!d) return -1;
    long r = t->byte_level ? clb_bytelevel_decode(s, n, d) : -1;
    int32_t id = r >= 0 ? clb_strmap_get(&t->vocab, t, d, (size_t)r) : clb_strmap_get(&t->vocab, t, s, n);
    clb_free(d);
    return id;
}

/* A post-processor special token id that is not a token of the vocabulary. */
static int post_bad_id(const clb_tokenizer *t, const char *name, const cJSON *v) {
    char shown[64];
    if (cJSON_IsNumber(v)) snprintf(shown, sizeof shown, "%.17g", v->valuedouble);
    else snprintf(shown, sizeof shown, "not a number");
    return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: post_processor token \"%.40s\" has id %s, "
                   "not a token id in [0, %d)", name ? name : "?", shown, (int)t->n_vocab);
}

static int parse_post(clb_tokenizer *t, const cJSON *p, bool *found) {
    const char *ty = jtype(p);
    *found = false;
    if (!ty) return COLIBRI_OK;
    int32_t buf[64];
    int n = 0;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p, "processors")) {
            int rc = parse_post(t, e, found);
            if (rc != COLIBRI_OK || *found) return rc;
        }
        return COLIBRI_OK;
    } else if (!strcmp(ty, "ByteLevel")) {
        return COLIBRI_OK;
    } else if (!strcmp(ty, "TemplateProcessing")) {
        const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p, "single")) {
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
            if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
                if (n < 64) buf[n++] = CLB_TMPL_SEQ;
            } else if (sp) {
                const char *name = jstr(sp, "id");
                const cJSON *st = name ? cJSON_GetObjectItemCaseSensitive(specials, name) : NULL;
                const cJSON *ids = cJSON_GetObjectItemCaseSensitive(st, "ids"), *x;
                if (!cJSON_IsArray(ids))
                    return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: template token %s has no ids",
                                   name ? name : "?");
                cJSON_ArrayForEach(x, ids) {
                    if (n == 64)
                        return clb_err(COLIBRI_ERR_UNSUPPORTED, "tokenizer.json: post_processor template "
                                       "longer than 64 tokens");
                    if (!clb_json_int(x, 0, t->n_vocab, &buf[n]))
                        return post_bad_id(t, name, x);
                    n++;
                }
            }
        }
    } else if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(p, "cls");
        const cJSON *sep = cJSON_GetObjectItemCaseSensitive(p, "sep");
        const cJSON *ci = cJSON_GetArrayItem(cls, 1), *si = cJSON_GetArrayItem(sep, 1);
        if (!ci || !si) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: %s without cls/sep", ty);
        if (!clb_json_int(ci, 0, t->n_vocab, &buf[0])) return post_bad_id(t, "cls", ci);
        if (!clb_json_int(si, 0, t->n_vocab, &buf[2])) return post_bad_id(t, "sep", si);
        buf[1] = CLB_TMPL_SEQ;
        n = 3;
    } else {
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "tokenizer.json: post_processor %s is not supported", ty);
    }
    bool has_seq = false;
    for (int i = 0; i < n; i++) has_seq = has_seq || buf[i] == CLB_TMPL_SEQ;
    if (!has_seq && n < 64) buf[n++] = CLB_TMPL_SEQ;
    t->tmpl = clb_malloc((size_t)n * sizeof(int32_t));
    if (!t->tmpl) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(t->tmpl, buf, (size_t)n * sizeof(int32_t));
    t->n_tmpl = n;
    *found = true;
    return COLIBRI_OK;
}

static int parse_merges(clb_tokenizer *t, const cJSON *merges) {
    int n = cJSON_GetArraySize(merges);
    int rc = clb_pairmap_init(&t->merges, (size_t)(n > 0 ? n : 1));
    if (rc != COLIBRI_OK) return rc;
    size_t pl = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    clb_buf tmp = {0};
    const cJSON *m;
    int32_t rank = 0;
    cJSON_ArrayForEach(m, merges) {
        const char *a, *b;
        size_t al, bl;
        if (cJSON_IsString(m)) {
            const char *s = m->valuestring, *sp = s[0] ? strchr(s + 1, ' ') : NULL;
            if (!sp) { rc = clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: merge %d is not \"a b\"", (int)rank); break; }
            a = s; al = (size_t)(sp - s); b = sp + 1; bl = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
            a = m->child->valuestring; al = strlen(a);
            b = m->child->next->valuestring; bl = strlen(b);
        } else {
            rc = clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: merge %d is malformed", (int)rank);
            break;
        }
        /* model forms of a, b and a + b (without b's continuing prefix) */
        tmp.n = 0;
        if ((rc = clb_buf_put(&tmp, NULL, 2 * (al + bl) + 2)) != COLIBRI_OK) break;
        char *da = tmp.p, *db = tmp.p + al + 1, *dab = tmp.p + al + bl + 2;
        long ra = t->byte_level ? clb_bytelevel_decode(a, al, da) : -1;
        if (ra < 0) { memcpy(da, a, al); ra = (long)al; }
        long rb = t->byte_level ? clb_bytelevel_decode(b, bl, db) : -1;
        if (rb < 0) { memcpy(db, b, bl); rb = (long)bl; }
        size_t skip = (pl && (size_t)rb >= pl && memcmp(db, t->cont_prefix, pl) == 0) ? pl : 0;
        memcpy(dab, da, (size_t)ra);
        memcpy(dab + ra, db + skip, (size_t)rb - skip);
        int32_t ia = clb_strmap_get(&t->vocab, t, da, (size_t)ra);
        int32_t ib = clb_strmap_get(&t->vocab, t, db, (size_t)rb);
        int32_t iab = clb_strmap_get(&t->vocab, t, dab, (size_t)ra + (size_t)rb - skip);
        if (ia >= 0 && ib >= 0 && iab >= 0) clb_pairmap_put(&t->merges, ia, ib, rank, iab);
        rank++;
    }
    clb_buf_free(&tmp);
    return rc;
}

/* The error for an id that is not an integer in [0, limit). */
static int bad_id(const char *what, const char *name, const cJSON *v, size_t n_entries, double limit) {
    char shown[64];
    if (cJSON_IsNumber(v)) snprintf(shown, sizeof shown, "%.17g", v->valuedouble);
    else snprintf(shown, sizeof shown, "%s", v ? "not a number" : "missing");
    return clb_err(COLIBRI_ERR_FORMAT,
                   "tokenizer.json: %s \"%.40s\" has id %s: ids must be integers in [0, %.0f) "
                   "(2 x the %zu entries + %d)", what, name ? name : "?", shown, limit, n_entries,
                   CLB_TOK_ID_SLACK);
}

/* Added tokens with normalized=true are matched in normalized text, by their normalized
   content (tokenizers' normalized_cache), which is also what they decode to. */
static int normalize_added(clb_tokenizer *t) {
    clb_buf b = {0};
    int rc = COLIBRI_OK;
    for (int i = 0; i < t->n_added && rc == COLIBRI_OK; i++) {
        clb_added_tok *a = &t->added[i];
        if (!a->normalized) continue;
        b.n = 0;
        if ((rc = clb_tok_normalize_text(t, a->content, a->len, &b)) != COLIBRI_OK) break;
        if (!(a->norm = dupn(b.p ? b.p : "", b.n))) rc = clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        a->norm_len = b.n;
    }
    clb_buf_free(&b);
    return rc;
}

static int model_kind(const char *mt) {
    if (!strcmp(mt, "BPE")) return CLB_MODEL_BPE;
    if (!strcmp(mt, "WordPiece")) return CLB_MODEL_WORDPIECE;
    if (!strcmp(mt, "WordLevel")) return CLB_MODEL_WORDLEVEL;
    if (!strcmp(mt, "Unigram")) return CLB_MODEL_UNIGRAM;
    return 0;
}

/* A Unigram vocabulary entry [piece, score]. */
static bool unigram_entry(const cJSON *e, const char **piece, double *score) {
    const cJSON *p = cJSON_GetArrayItem(e, 0), *sc = cJSON_GetArrayItem(e, 1);
    if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsString(p) || !cJSON_IsNumber(sc) ||
        !(sc->valuedouble > -1e300 && sc->valuedouble < 1e300))
        return false;
    *piece = p->valuestring;
    *score = sc->valuedouble;
    return true;
}

/* Model-specific settings after the vocabulary is known. */
static int load_model_params(clb_tokenizer *t, const cJSON *model) {
    if (t->model == CLB_MODEL_WORDPIECE) {
        const char *cp = jstr(model, "continuing_subword_prefix");
        if (!(t->cont_prefix = dupn(cp ? cp : "##", strlen(cp ? cp : "##"))))
            return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        const cJSON *mc = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
        t->max_chars = 100;
        if (mc && !clb_json_int(mc, 0, 2147483648.0, &t->max_chars))
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: WordPiece max_input_chars_per_word is not a count");
    }
    if (t->model == CLB_MODEL_UNIGRAM) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(model, "unk_id");
        t->unk_id = -1;
        if (u && !cJSON_IsNull(u) && !clb_json_int(u, 0, t->n_model, &t->unk_id))
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: Unigram unk_id is not an id of its %d pieces",
                           (int)t->n_model);
        double mn = 1e300;
        for (int32_t i = 0; i < t->n_model; i++) mn = CLB_MIN(mn, t->dscores[i]);
        t->unk_score = mn - 10.0; /* tokenizers' K_UNK_PENALTY */
    } else {
        t->unk_id = vocab_id(t, jstr(model, "unk_token"));
    }
    return COLIBRI_OK;
}

static int load(clb_tokenizer **out, const cJSON *root, const cJSON *cfg) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mt = jtype(model);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!mt && cJSON_IsArray(merges)) mt = "BPE";
    if (!mt) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: no model type");
    int kind = model_kind(mt);
    if (!kind)
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "tokenizer.json: model %s is not supported (BPE, WordPiece, "
                       "WordLevel and Unigram are)", mt);
    if (kind == CLB_MODEL_UNIGRAM ? !cJSON_IsArray(vocab) : !cJSON_IsObject(vocab))
        return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: %s model without a vocab %s", mt,
                       kind == CLB_MODEL_UNIGRAM ? "array" : "object");
    if (kind == CLB_MODEL_BPE && !cJSON_IsArray(merges))
        return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: BPE model without merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), *e;
    /* Arrays are sized by the largest id, so the largest id is bounded by the number of
       entries that give ids (a few holes are allowed, a huge id in a small file is not). */
    int32_t max_id = -1, id;
    size_t n_entries = 0, n_model = 0;
    cJSON_ArrayForEach(e, vocab) n_entries++;
    n_model = n_entries;
    cJSON_ArrayForEach(e, added) n_entries++;
    double id_limit = CLB_MIN(2.0 * (double)n_entries + CLB_TOK_ID_SLACK, (double)(1 << 30));
    if (kind == CLB_MODEL_UNIGRAM) { /* ids are the positions */
        const char *piece;
        double score;
        if (n_model >= (1u << 30)) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: %zu Unigram pieces", n_model);
        cJSON_ArrayForEach(e, vocab) if (!unigram_entry(e, &piece, &score))
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: a Unigram vocab entry is not [piece, score]");
        max_id = (int32_t)n_model - 1;
    } else {
        cJSON_ArrayForEach(e, vocab) {
            if (!clb_json_int(e, 0, id_limit, &id))
                return bad_id("vocab entry", e->string, e, n_entries, id_limit);
            if (id > max_id) max_id = id;
        }
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!jstr(e, "content"))
            return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: added token without content");
        if (!clb_json_int(v, 0, id_limit, &id))
            return bad_id("added token", jstr(e, "content"), v, n_entries, id_limit);
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: the vocabulary is empty");
    clb_tokenizer *t = clb_tok_alloc(max_id + 1);
    if (!t) return COLIBRI_ERR_NOMEM;
    *out = t;
    t->model = kind;
    t->n_model = (int32_t)CLB_MIN(n_model, (size_t)t->n_vocab);
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    t->byte_level = has_type(pre, "ByteLevel", "pretokenizers") || has_type(dec, "ByteLevel", "decoders");
    t->byte_fallback = jbool(model, "byte_fallback", false);
    t->fuse_unk = jbool(model, "fuse_unk", false);
    t->ignore_merges = jbool(model, "ignore_merges", false);
    const char *cp = jstr(model, "continuing_subword_prefix"), *ew = jstr(model, "end_of_word_suffix");
    if (kind == CLB_MODEL_BPE && cp && *cp) t->cont_prefix = dupn(cp, strlen(cp));
    if (kind == CLB_MODEL_BPE && ew && *ew) t->eow_suffix = dupn(ew, strlen(ew));
    int rc;
    if (kind == CLB_MODEL_UNIGRAM) {
        if (!(t->dscores = clb_calloc((size_t)t->n_vocab, sizeof *t->dscores)))
            return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        id = 0;
        cJSON_ArrayForEach(e, vocab) {
            const char *piece;
            unigram_entry(e, &piece, &t->dscores[id]);
            if ((rc = clb_tok_set_token(t, id, piece, strlen(piece))) != COLIBRI_OK) return rc;
            id++;
        }
    } else {
        cJSON_ArrayForEach(e, vocab) { /* a second string of one id is an alias, as in tokenizers */
            clb_json_int(e, 0, id_limit, &id);
            bool taken = t->flen[id] || t->foff[id];
            if ((rc = taken ? clb_tok_add_alias(t, id, e->string, strlen(e->string))
                            : clb_tok_set_token(t, id, e->string, strlen(e->string))) != COLIBRI_OK)
                return rc;
        }
    }
    bool bl = t->byte_level;
    cJSON_ArrayForEach(e, added) {
        clb_json_int(cJSON_GetObjectItemCaseSensitive(e, "id"), 0, id_limit, &id); /* checked above */
        const char *c = jstr(e, "content");
        clb_added_tok a = {.id = id, .content = (char *)c, .len = strlen(c), .special = jbool(e, "special", false),
                           .lstrip = jbool(e, "lstrip", false), .rstrip = jbool(e, "rstrip", false),
                           .single_word = jbool(e, "single_word", false),
                           .normalized = jbool(e, "normalized", false)};
        if (t->flen[id] == 0 && t->foff[id] == 0) { /* not in the model vocabulary */
            t->byte_level = false; /* added tokens are raw text */
            rc = clb_tok_set_token(t, id, c, strlen(c));
            t->byte_level = bl;
            if (rc != COLIBRI_OK) return rc;
        }
        if ((rc = clb_tok_add_added(t, &a)) != COLIBRI_OK) return rc;
    }
    if ((rc = parse_decoder(t, dec)) != COLIBRI_OK) return rc;
    /* vocabulary map (before merges and post-processor lookups); a Unigram string given
       twice is the later piece, as in tokenizers */
    if ((rc = clb_strmap_init(&t->vocab, (size_t)t->n_vocab + (size_t)t->n_aliases)) != COLIBRI_OK) return rc;
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t k = 0; k < t->n_vocab; k++) {
            int32_t i = kind == CLB_MODEL_UNIGRAM ? t->n_vocab - 1 - k : k;
            bool is_added = (t->attr[i] & CLB_TA_ADDED) != 0;
            if ((pass == 0) == is_added) continue;
            if ((rc = clb_strmap_put(&t->vocab, t, i)) != COLIBRI_OK) return rc;
        }
        if (pass == 0 && (rc = clb_strmap_put_aliases(&t->vocab, t)) != COLIBRI_OK) return rc;
    }
    if (kind == CLB_MODEL_BPE && (rc = parse_merges(t, merges)) != COLIBRI_OK) return rc;
    if ((rc = load_model_params(t, model)) != COLIBRI_OK) return rc;

    if ((rc = parse_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"))) != COLIBRI_OK)
        return rc;
    if ((rc = normalize_added(t)) != COLIBRI_OK) return rc;
    if ((rc = parse_pre(t, pre)) != COLIBRI_OK) return rc;
    bool found = false;
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if ((rc = parse_post(t, post, &found)) != COLIBRI_OK) return rc;
    /* special token ids from tokenizer_config.json */
    if (cfg) {
        const char *bos = token_content(cJSON_GetObjectItemCaseSensitive(cfg, "bos_token"));
        const char *eos = token_content(cJSON_GetObjectItemCaseSensitive(cfg, "eos_token"));
        const char *pad = token_content(cJSON_GetObjectItemCaseSensitive(cfg, "pad_token"));
        const char *unk = token_content(cJSON_GetObjectItemCaseSensitive(cfg, "unk_token"));
        t->bos_id = vocab_id(t, bos);
        t->eos_id = vocab_id(t, eos);
        t->pad_id = vocab_id(t, pad);
        if (unk && t->unk_id < 0 && t->model == CLB_MODEL_BPE) t->unk_id = vocab_id(t, unk);
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        const char *tmpl = cJSON_IsString(ct) ? ct->valuestring : NULL;
        if (cJSON_IsArray(ct)) { /* [{"name": "default", "template": ...}, ...] */
            cJSON_ArrayForEach(e, ct) {
                const char *nm = jstr(e, "name");
                if (!tmpl || (nm && !strcmp(nm, "default"))) tmpl = jstr(e, "template");
            }
        }
        if (tmpl && !(t->chat_template = dupn(tmpl, strlen(tmpl))))
            return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        /* transformers rebuilds the template of Llama/Gemma tokenizers from these flags, and
           uses them when the file has no post-processor */
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        const cJSON *ae = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
        const char *cls = jstr(cfg, "tokenizer_class");
        bool rebuild = !found || (cls && (strstr(cls, "Llama") || strstr(cls, "Gemma")));
        if (rebuild && (cJSON_IsBool(ab) || cJSON_IsBool(ae))) {
            t->add_bos = cJSON_IsTrue(ab);
            t->add_eos = cJSON_IsTrue(ae);
            clb_free(t->tmpl);
            t->tmpl = NULL;
            t->n_tmpl = 0;
        }
    }
    if (t->bos_id < 0 && t->tmpl && t->n_tmpl > 1 && t->tmpl[0] != CLB_TMPL_SEQ) t->bos_id = t->tmpl[0];
    return clb_tok_finish(t);
}

clb_tokenizer *clb_tokenizer_from_hf_json(const cJSON *tokenizer, const cJSON *config) {
    if (!cJSON_IsObject(tokenizer)) {
        clb_err(COLIBRI_ERR_ARG, "tokenizer.json: not a JSON object");
        return NULL;
    }
    clb_tokenizer *t = NULL;
    int rc = load(&t, tokenizer, cJSON_IsObject(config) ? config : NULL);
    if (rc != COLIBRI_OK) {
        clb_tokenizer_free(t);
        return NULL;
    }
    return t;
}

clb_tokenizer *clb_tokenizer_from_hf(const char *json, size_t len, const char *config_json) {
    if (!json) {
        clb_err(COLIBRI_ERR_ARG, "tokenizer.json: NULL text");
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        clb_err(COLIBRI_ERR_FORMAT, "tokenizer.json: invalid JSON");
        return NULL;
    }
    cJSON *cfg = NULL;
    if (config_json && !(cfg = cJSON_Parse(config_json))) {
        cJSON_Delete(root);
        clb_err(COLIBRI_ERR_FORMAT, "tokenizer_config.json: invalid JSON");
        return NULL;
    }
    clb_tokenizer *t = clb_tokenizer_from_hf_json(root, cfg);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return t;
}

cJSON *clb_tokenizer_hf_to_json(const cJSON *tokenizer, const cJSON *config) {
    cJSON *o = cJSON_CreateObject(), *hf = cJSON_CreateObject();
    cJSON *tj = cJSON_Duplicate(tokenizer, 1);
    cJSON *cj = config ? cJSON_Duplicate(config, 1) : cJSON_CreateNull();
    if (!o || !hf || !tj || !cj) {
        cJSON_Delete(o); cJSON_Delete(hf); cJSON_Delete(tj); cJSON_Delete(cj);
        clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        return NULL;
    }
    cJSON_AddItemToObject(hf, "tokenizer_json", tj);
    cJSON_AddItemToObject(hf, "tokenizer_config", cj);
    cJSON_AddItemToObject(o, "hf", hf);
    return o;
}
