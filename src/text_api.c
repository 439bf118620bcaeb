/* text_api.c — the text calls of colibri.h: tokenizer, streaming decode, chat template,
 * sampler. */
#include <stdio.h>
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
