/* text_api.c — the text calls of colibri.h: tokenizer, streaming decode, chat template,
 * sampler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "engine.h"
#include "text/chat.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

/* The tokenizer is built on first use, so running on token ids never depends on it. */
static int need_tok(colibri_engine_t *e) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (e->tok) return COLIBRI_OK;
    if (e->tok_failed) return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s", e->tok_error);
    const cJSON *stored = e->model->src.tokenizer;
    if (!stored) {
        e->tok_failed = true;
        snprintf(e->tok_error, sizeof e->tok_error, "%s: the model file has no tokenizer", e->model->src.path);
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s", e->tok_error);
    }
    e->tok = clb_tokenizer_from_json(stored);
    if (e->tok && clb_tokenizer_n_vocab(e->tok) > e->hp->n_vocab) {
        clb_err(COLIBRI_ERR_FORMAT, "the tokenizer has %d tokens, the model only %d", clb_tokenizer_n_vocab(e->tok),
                e->hp->n_vocab);
        clb_tokenizer_free(e->tok);
        e->tok = NULL;
    }
    if (!e->tok) {
        e->tok_failed = true;
        snprintf(e->tok_error, sizeof e->tok_error, "%s: tokenizer: %s", e->model->src.path, clb_last_error());
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s", e->tok_error);
    }
    clb_text_init_eog(e);
    return COLIBRI_OK;
}

void clb_text_init_eog(colibri_engine_t *e) {
    e->n_eog = 0;
    int32_t eos = clb_tokenizer_eos(e->tok);
    if (eos < 0) eos = e->hp->eos_id;
    if (eos >= 0) e->eog[e->n_eog++] = eos;
    /* end-of-turn markers of common chat formats, when they are special tokens */
    static const char *const eot[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end|>", "<end_of_turn>",
                                      "<|end_of_text|>", "<｜end▁of▁sentence｜>", "<|return|>"};
    for (size_t i = 0; i < CLB_ARRAY_LEN(eot) && e->n_eog < (int)CLB_ARRAY_LEN(e->eog); i++) {
        int32_t id = clb_token_lookup(e->tok, eot[i], strlen(eot[i]));
        if (id < 0 || !clb_token_is_special(e->tok, id)) continue;
        bool dup = false;
        for (int k = 0; k < e->n_eog; k++) dup |= e->eog[k] == id;
        if (!dup) e->eog[e->n_eog++] = id;
    }
}

int colibri_has_tokenizer(colibri_engine_t *e) { return e && need_tok(e) == COLIBRI_OK; }

int colibri_tokenize(colibri_engine_t *e, const char *text, size_t len, int add_special, int parse_special,
                     int32_t *ids, size_t cap, size_t *n_out) {
    int rc = need_tok(e);
    if (rc) return rc;
    if (!text && len) return clb_err(COLIBRI_ERR_ARG, "NULL text");
    return clb_tokenize(e->tok, text ? text : "", len, add_special, parse_special, ids, cap, n_out);
}

int colibri_detokenize(colibri_engine_t *e, const int32_t *ids, size_t n, int skip_special, char *out,
                       size_t cap, size_t *n_out) {
    int rc = need_tok(e);
    if (rc) return rc;
    return clb_detokenize(e->tok, ids, n, skip_special, out, cap, n_out);
}

struct colibri_detok {
    clb_detok_stream *s;
};

colibri_detok_t *colibri_detok_new(colibri_engine_t *e, int skip_special) {
    if (need_tok(e)) return NULL;
    colibri_detok_t *d = clb_calloc(1, sizeof *d);
    if (!d) return NULL;
    d->s = clb_detok_stream_new(e->tok, skip_special);
    if (!d->s) {
        clb_free(d);
        clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return d;
}

int colibri_detok_push(colibri_detok_t *d, int32_t id, char *out, size_t cap, size_t *n_out) {
    if (!d) return clb_err(COLIBRI_ERR_ARG, "NULL detokenizer");
    return clb_detok_stream_push(d->s, id, out, cap, n_out);
}

int colibri_detok_flush(colibri_detok_t *d, char *out, size_t cap, size_t *n_out) {
    if (!d) return clb_err(COLIBRI_ERR_ARG, "NULL detokenizer");
    return clb_detok_stream_flush(d->s, out, cap, n_out);
}

void colibri_detok_free(colibri_detok_t *d) {
    if (!d) return;
    clb_detok_stream_free(d->s);
    clb_free(d);
}

int colibri_is_eog(colibri_engine_t *e, int32_t id) {
    if (!e) return 0;
    if (!e->tok && !e->tok_failed) need_tok(e);
    if (!e->tok) return id >= 0 && id == e->hp->eos_id;
    for (int i = 0; i < e->n_eog; i++)
        if (e->eog[i] == id) return 1;
    return 0;
}

int colibri_chat_template_is_default(colibri_engine_t *e) {
    return !e || need_tok(e) || !clb_tokenizer_chat_template(e->tok);
}

/* The model's template (ChatML when it has none) with the special tokens' strings. */
char *colibri_chat_render(colibri_engine_t *e, const colibri_chat_msg *msgs, size_t n, int add_generation_prompt) {
    if (!e || (!msgs && n)) {
        clb_err(COLIBRI_ERR_ARG, "NULL argument");
        return NULL;
    }
    need_tok(e); /* without a tokenizer: ChatML and no special tokens */
    const char *tpl = e->tok ? clb_tokenizer_chat_template(e->tok) : NULL, *bos = NULL, *eos = NULL;
    if (e->tok) {
        int32_t b = clb_tokenizer_bos(e->tok), x = clb_tokenizer_eos(e->tok);
        if (b >= 0) bos = clb_token_text(e->tok, b);
        if (x >= 0) eos = clb_token_text(e->tok, x);
    }
    clb_chat_msg *m = clb_calloc(n ? n : 1, sizeof *m);
    if (!m) {
        clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) m[i] = (clb_chat_msg){msgs[i].role, msgs[i].content};
    char *out = NULL;
    int rc = clb_chat_render(tpl, m, n, add_generation_prompt != 0, bos, eos, &out);
    clb_free(m);
    return rc ? NULL : out;
}

/* Marks for the special-token text inside message contents while the template renders: a
   private-use character, the index of the original, another private-use character (a pair
   absent from the template and every message). */
typedef struct plain_marks {
    char open[4], close[4];
    char **orig;   /* [n] the special-token texts replaced */
    size_t n, cap;
} plain_marks;

static bool mark_pair_free(const char *tpl, const colibri_chat_msg *msgs, size_t n, const char *a, const char *b) {
    if (tpl && (strstr(tpl, a) || strstr(tpl, b))) return false;
    for (size_t i = 0; i < n; i++)
        if (msgs[i].content && (strstr(msgs[i].content, a) || strstr(msgs[i].content, b))) return false;
    return true;
}

/* content with every special token's text replaced by a mark (heap). */
static char *mark_content(const clb_tokenizer *tok, plain_marks *pm, const char *c) {
    size_t n = strlen(c);
    char *o = clb_malloc(n * 4 + 1), *p = o; /* a mark (3+<=20+3 bytes) replaces >= 2 bytes... */
    if (!o) return NULL;
    size_t cap = n * 4 + 1;
    for (size_t i = 0; i < n;) {
        size_t l = clb_tokenizer_special_at(tok, c + i, n - i);
        if (!l) { *p++ = c[i++]; continue; }
        if (pm->n == pm->cap) {
            size_t nc = pm->cap ? pm->cap * 2 : 8;
            char **no = clb_realloc(pm->orig, nc * sizeof *no);
            if (!no) { clb_free(o); return NULL; }
            pm->orig = no;
            pm->cap = nc;
        }
        if (!(pm->orig[pm->n] = clb_malloc(l + 1))) { clb_free(o); return NULL; }
        memcpy(pm->orig[pm->n], c + i, l);
        pm->orig[pm->n][l] = 0;
        char mark[40];
        int ml = snprintf(mark, sizeof mark, "%s%zu%s", pm->open, pm->n, pm->close);
        pm->n++;
        size_t used = (size_t)(p - o);
        if (used + (size_t)ml + (n - i) + 1 > cap) {
            cap = (used + (size_t)ml + (n - i) + 1) * 2;
            char *no = clb_realloc(o, cap);
            if (!no) { clb_free(o); return NULL; }
            o = no;
            p = o + used;
        }
        memcpy(p, mark, (size_t)ml);
        p += ml;
        i += l;
    }
    *p = 0;
    return o;
}

int colibri_chat_tokenize(colibri_engine_t *e, const colibri_chat_msg *msgs, size_t n, int add_generation_prompt,
                          int add_special, int parse_special_in_content, int32_t *ids, size_t cap, size_t *n_out) {
    int rc = need_tok(e);
    if (rc) return rc;
    if ((!msgs && n) || !n_out) return clb_err(COLIBRI_ERR_ARG, "NULL argument");
    const char *tpl = clb_tokenizer_chat_template(e->tok);
    if (!tpl) tpl = clb_chat_default_template();
    plain_marks pm = {0};
    colibri_chat_msg *m = NULL;
    char *text = NULL, *out = NULL;
    size_t *spans = NULL, n_spans = 0;
    if (!parse_special_in_content) {
        for (unsigned cp = 0xE000; cp < 0xF8FE; cp += 2) { /* a pair of private-use characters */
            pm.open[0] = (char)(0xE0 | (cp >> 12)), pm.open[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            pm.open[2] = (char)(0x80 | (cp & 0x3F));
            pm.close[0] = pm.open[0], pm.close[1] = pm.open[1], pm.close[2] = (char)(0x80 | ((cp + 1) & 0x3F));
            if ((cp & 0x3F) != 0x3F && mark_pair_free(tpl, msgs, n, pm.open, pm.close)) break;
            pm.open[0] = 0;
        }
        if (!pm.open[0]) return clb_err(COLIBRI_ERR_ARG, "chat: the messages use every private-use mark");
        m = clb_calloc(n ? n : 1, sizeof *m);
        rc = m ? COLIBRI_OK : clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n && rc == COLIBRI_OK; i++) {
            m[i].role = msgs[i].role;
            m[i].content = msgs[i].content ? mark_content(e->tok, &pm, msgs[i].content) : NULL;
            if (msgs[i].content && !m[i].content) rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        }
    }
    if (rc == COLIBRI_OK && !(text = colibri_chat_render(e, m ? m : msgs, n, add_generation_prompt)))
        rc = COLIBRI_ERR_FORMAT; /* the message is set */
    size_t len = text ? strlen(text) : 0;
    /* what the template made must be able to fit the context before it is tokenized (a
       template looping a million times made tens of millions of tokens and used GBs) */
    const uint64_t max_bytes = (uint64_t)CLB_CHAT_MAX_BYTES_PER_TOKEN * (uint64_t)CLB_MAX(e->max_seq, 1) + 4096;
    if (rc == COLIBRI_OK && len > max_bytes)
        rc = clb_err(COLIBRI_ERR_RANGE,
                     "chat template: the rendered conversation (%zu bytes) cannot fit the context of %d tokens "
                     "(the limit is %d bytes a token: %llu bytes)",
                     len, e->max_seq, CLB_CHAT_MAX_BYTES_PER_TOKEN, (unsigned long long)max_bytes);
    if (rc == COLIBRI_OK && pm.n) { /* the originals back, their spans kept as plain text */
        size_t total = 0; /* the text may hold each mark many times, and a mark (>= 7 bytes) may */
        for (size_t i = 0; i < pm.n; i++) total = CLB_MAX(total, strlen(pm.orig[i])); /* be shorter */
        out = clb_malloc(len / 7 * total + len + 1);
        spans = clb_malloc(2 * (len / 7 + 1) * sizeof *spans);
        if (!out || !spans) rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        size_t o = 0, ol = strlen(pm.open), cl = strlen(pm.close);
        for (size_t i = 0; i < len && rc == COLIBRI_OK;) {
            char *end;
            unsigned long k;
            if (!memcmp(text + i, pm.open, CLB_MIN(ol, len - i)) && len - i > ol &&
                (k = strtoul(text + i + ol, &end, 10), end > text + i + ol) && k < pm.n &&
                !strncmp(end, pm.close, cl)) {
                size_t l = strlen(pm.orig[k]);
                spans[2 * n_spans] = o;
                spans[2 * n_spans + 1] = o + l;
                n_spans++;
                memcpy(out + o, pm.orig[k], l);
                o += l;
                i = (size_t)(end - text) + cl;
            } else {
                out[o++] = text[i++];
            }
        }
        if (rc == COLIBRI_OK) {
            out[o] = 0;
            len = o;
        }
    }
    if (rc == COLIBRI_OK)
        rc = clb_tokenize_plain(e->tok, out ? out : text, len, add_special != 0, true, spans, n_spans, ids, cap, n_out);
    for (size_t i = 0; m && i < n; i++) clb_free((char *)m[i].content);
    for (size_t i = 0; i < pm.n; i++) clb_free(pm.orig[i]);
    clb_free(pm.orig);
    clb_free(m);
    clb_free(text);
    clb_free(out);
    clb_free(spans);
    return rc;
}

int colibri_stop_check(const char *text, size_t len, size_t from, const char *const *stops, size_t n_stops,
                       size_t *match_pos, size_t *hold_back) {
    return clb_stop_check(text, len, from, stops, n_stops, match_pos, hold_back, NULL);
}

/* ---- sampler ---- */

struct colibri_sampler {
    clb_sampler *s;
};

colibri_sampling colibri_sampling_default(void) {
    clb_sampler_params p = clb_sampler_params_default();
    colibri_sampling o = {.temperature = p.temperature, .top_k = p.top_k, .top_p = p.top_p, .min_p = p.min_p,
                          .repeat_penalty = p.repeat_penalty, .frequency_penalty = p.frequency_penalty,
                          .presence_penalty = p.presence_penalty, .penalty_last_n = p.penalty_last_n,
                          .seed = p.seed};
    return o;
}

colibri_sampler_t *colibri_sampler_new(const colibri_sampling *p, int32_t n_vocab) {
    colibri_sampling d = p ? *p : colibri_sampling_default();
    clb_sampler_params sp = {.temperature = d.temperature, .top_k = d.top_k, .top_p = d.top_p, .min_p = d.min_p,
                             .repeat_penalty = d.repeat_penalty, .frequency_penalty = d.frequency_penalty,
                             .presence_penalty = d.presence_penalty, .penalty_last_n = d.penalty_last_n,
                             .seed = d.seed};
    colibri_sampler_t *s = clb_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->s = clb_sampler_create(&sp, n_vocab);
    if (!s->s) {
        clb_free(s);
        return NULL;
    }
    return s;
}

int colibri_sampler_sample(colibri_sampler_t *s, const float *logits, int32_t *token) {
    if (!s) return clb_err(COLIBRI_ERR_ARG, "NULL sampler");
    return clb_sampler_sample(s->s, logits, token);
}
void colibri_sampler_accept(colibri_sampler_t *s, int32_t token) {
    if (s) clb_sampler_accept(s->s, token);
}
void colibri_sampler_reset(colibri_sampler_t *s) {
    if (s) clb_sampler_reset(s->s);
}
void colibri_sampler_free(colibri_sampler_t *s) {
    if (!s) return;
    clb_sampler_free(s->s);
    clb_free(s);
}
