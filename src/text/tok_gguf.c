/* tok_gguf.c — tokenizers from GGUF metadata (tokenizer.ggml.*), directly or through the JSON
 * form stored in .colibri files ({"gguf": {key: value, ...}}).
 *
 * A GGUF file is first turned into that JSON form, so both paths share one builder.
 * Models: "llama" (SentencePiece: scores, token types, <0xXX> byte tokens, dummy-prefix
 * space) and "gpt2" (byte-level BPE with merges). The pre-tokenizer of "gpt2" vocabularies is
 * chosen by tokenizer.ggml.pre: a list of regexes applied one after the other, each splitting
 * the pieces of the previous one, matches and the text between them both kept (the facts —
 * which names map to which expressions — follow llama.cpp's llama-vocab.cpp). */
#include <string.h>

#include "text/tok_internal.h"

/* ---- pre-tokenizer regexes by tokenizer.ggml.pre ---- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"
#define RE_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"

typedef struct pre_def {
    const char *names; /* '|'-separated */
    const char *re[6];
    bool ignore_merges, add_bos, no_bos;
} pre_def;

static const pre_def k_pre[] = {
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", {RE_LLAMA3}, true, true, false},
    {"dbrx|smaug-bpe", {RE_LLAMA3}, false, false, false},
    {"glm4|chatglm-bpe", {RE_LLAMA3}, false, false, true},
    {"deepseek-llm",
     {"[\r\n]",
      "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-"
      "\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce"
      "\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-"
      "\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-"
      "\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-"
      "\xe1\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-"
      "\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd"
      "\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-"
      "\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-"
      "\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95"
      "\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-"
      "\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83"
      "\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2"
      "\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-"
      "\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-"
      "\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0"
      "\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0"
      "\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
      "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-"
      "\xe3\x80\x82]+",
      "\\s+\\z", RE_CJK, "\\p{N}+"},
     false, false, false},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false, false, false},
    {"deepseek-v3|hunyuan-dense",
     {"\\p{N}{1,3}", "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     false, false, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false, false, false},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", {"\\p{N}", RE_GPT2}, false,
     false, false},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|jina-v1-en|"
     "jina-v2-code|roberta-bpe|exaone4|mpt|olmo|jais|trillion|granite-docling",
     {RE_GPT2}, false, false, false},
    {"qwen2|deepseek-r1-qwen|kormo|megrez|stablelm2|hunyuan|grok-2", {RE_QWEN2}, false, false, false},
    {"poro-chat|bloom|gpt3-finnish",
     {" ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"},
     false, false, false},
    {"viking",
     {" ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+",
      "\\p{N}"},
     false, false, false},
    {"tekken",
     {"[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER
      "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     true, true, false},
    {"gpt-4o|llama4|minimax-m2",
     {"[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+" RE_CONTR "?|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER
      "+" RE_LOWER "*" RE_CONTR "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false, false, false},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2},
     false, true, false},
    {"bailingmoe|bailingmoe2|llada-moe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
     false, false, false},
    {"seed-coder",
     {RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+"},
     false, false, false},
    /* "default" and unknown names */
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false, false},
};

static const pre_def *find_pre(const char *name) {
    size_t nl = name ? strlen(name) : 0;
    for (size_t i = 0; name && i < CLB_ARRAY_LEN(k_pre); i++) {
        const char *p = k_pre[i].names;
        while (*p) {
            const char *e = strchr(p, '|');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == nl && memcmp(p, name, l) == 0) return &k_pre[i];
            p += l + (e ? 1 : 0);
        }
    }
    return &k_pre[CLB_ARRAY_LEN(k_pre) - 1];
}

/* ---- GGUF -> JSON ---- */

static cJSON *str_json(const clb_gguf_str *s) {
    char tmp[256];
    char *b = s->len < sizeof tmp ? tmp : clb_malloc(s->len + 1);
    if (!b) return NULL;
    memcpy(b, s->ptr, s->len);
    b[s->len] = 0;
    cJSON *j = cJSON_CreateString(b);
    if (b != tmp) clb_free(b);
    return j;
}

static cJSON *value_json(const clb_gguf_value *v);

static cJSON *array_json(const clb_gguf_value *v) {
    cJSON *a = cJSON_CreateArray();
    if (!a) return NULL;
    clb_gguf_kv fake = {NULL, *v};
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        cJSON *e = NULL;
        int t = v->v.arr.type;
        if (t == CLB_GGUF_STRING) {
            e = str_json(&v->v.arr.strs[i]);
        } else if (t == CLB_GGUF_ARRAY) {
            e = value_json(&v->v.arr.items[i]);
        } else if (t == CLB_GGUF_FLOAT32 || t == CLB_GGUF_FLOAT64) {
            double d;
            if (clb_gguf_arr_f64(&fake, i, &d)) e = cJSON_CreateNumber(d);
        } else if (t == CLB_GGUF_BOOL) {
            int64_t x;
            if (clb_gguf_arr_i64(&fake, i, &x)) e = cJSON_CreateBool(x != 0);
        } else {
            int64_t x;
            if (clb_gguf_arr_i64(&fake, i, &x)) e = cJSON_CreateNumber((double)x);
        }
        if (!e) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

static cJSON *value_json(const clb_gguf_value *v) {
    switch (v->type) {
    case CLB_GGUF_STRING: return str_json(&v->v.s);
    case CLB_GGUF_ARRAY: return array_json(v);
    case CLB_GGUF_BOOL: return cJSON_CreateBool(v->v.u != 0);
    case CLB_GGUF_FLOAT32: case CLB_GGUF_FLOAT64: return cJSON_CreateNumber(v->v.f);
    case CLB_GGUF_INT8: case CLB_GGUF_INT16: case CLB_GGUF_INT32: case CLB_GGUF_INT64:
        return cJSON_CreateNumber((double)v->v.i);
    default: return cJSON_CreateNumber((double)v->v.u);
    }
}

cJSON *clb_tokenizer_gguf_to_json(const clb_gguf *g) {
    if (!g) {
        clb_err(COLIBRI_ERR_ARG, "tokenizer: NULL gguf");
        return NULL;
    }
    cJSON *o = cJSON_CreateObject(), *k = cJSON_CreateObject();
    if (!o || !k) goto oom;
    cJSON_AddItemToObject(o, "gguf", k);
    for (int64_t i = 0; i < g->n_kv; i++) {
        const clb_gguf_kv *kv = &g->kv[i];
        if (strncmp(kv->key, "tokenizer.", 10) != 0) continue;
        cJSON *v = value_json(&kv->val);
        if (!v) goto oom;
        cJSON_AddItemToObject(k, kv->key, v);
    }
    return o;
oom:
    cJSON_Delete(o);
    clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory converting GGUF metadata");
    return NULL;
}

/* ---- JSON (gguf form) -> tokenizer ---- */

static const cJSON *key(const cJSON *g, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(g, k);
}

static int32_t key_id(const cJSON *g, const char *k, int32_t def) {
    const cJSON *v = key(g, k);
    int32_t id;
    if (!v) return def;
    return clb_json_int(v, 0, 2147483648.0, &id) ? id : -1; /* a bad id means no such token */
}

static bool key_bool(const cJSON *g, const char *k, bool def) {
    const cJSON *v = key(g, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* The "▁" of these vocabularies decodes to a space; the rest per vocabulary type. */
static int wpm_ugm_setup(clb_tokenizer *t, const cJSON *g, bool wpm, int32_t sep_id) {
    t->dec_from = clb_strdup("\xe2\x96\x81");
    t->dec_to = clb_strdup(" ");
    if (!t->dec_from || !t->dec_to) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    for (int32_t i = 0; i < t->n_vocab; i++) t->max_token_len = CLB_MAX(t->max_token_len, (size_t)t->len[i]);
    if (wpm) { /* [CLS] text [SEP] */
        t->dec_strip = 1;
        t->max_token_len += 1; /* llama.cpp tries one byte more than the longest token */
        if (t->add_bos && t->bos_id >= 0 && sep_id >= 0) {
            if (!(t->tmpl = clb_malloc(3 * sizeof *t->tmpl))) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
            t->tmpl[0] = t->bos_id;
            t->tmpl[1] = CLB_TMPL_SEQ;
            t->tmpl[2] = sep_id;
            t->n_tmpl = 3;
        }
        return COLIBRI_OK;
    }
    t->ugm_add_prefix = key_bool(g, "tokenizer.ggml.add_space_prefix", false);
    t->ugm_merge_spaces = key_bool(g, "tokenizer.ggml.remove_extra_whitespaces", false);
    t->ugm_escape_ws = true;
    t->ugm_ws_suffix = false;
    t->dec_strip = t->ugm_add_prefix ? 1 : 0;
    float mn = 3.402823466e38f;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (!(t->attr[i] & (CLB_TA_ADDED | CLB_TA_UNKNOWN | CLB_TA_BYTE | CLB_TA_UNUSED)))
            mn = CLB_MIN(mn, (float)t->dscores[i]);
    t->unk_score = (double)(mn - 10.0f);
    const cJSON *cm = key(g, "tokenizer.ggml.precompiled_charsmap");
    int n = cJSON_GetArraySize(cm);
    if (!cJSON_IsArray(cm) || n <= 0) return COLIBRI_OK; /* no normalization map: text as it is */
    unsigned char *blob = clb_malloc((size_t)n);
    if (!blob) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cm) {
        int32_t b;
        if (!clb_json_int(e, 0, 256, &b)) {
            clb_free(blob);
            return clb_err(COLIBRI_ERR_FORMAT, "gguf: tokenizer.ggml.precompiled_charsmap is not an array of bytes");
        }
        blob[i++] = (unsigned char)b;
    }
    int rc = clb_charsmap_parse(blob, (size_t)n, &t->charsmap);
    clb_free(blob);
    return rc;
}

static int build(clb_tokenizer **out, const cJSON *g) {
    const cJSON *model = key(g, "tokenizer.ggml.model"), *tokens = key(g, "tokenizer.ggml.tokens");
    if (!cJSON_IsString(model))
        return clb_err(COLIBRI_ERR_FORMAT, "gguf: tokenizer.ggml.model missing");
    const char *mn = model->valuestring;
    bool spm = !strcmp(mn, "llama"), bpe = !strcmp(mn, "gpt2"), wpm = !strcmp(mn, "bert"), ugm = !strcmp(mn, "t5");
    if (!spm && !bpe && !wpm && !ugm)
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "gguf: tokenizer model '%s' is not supported (llama, gpt2, "
                       "bert and t5 are)", mn);
    int n = cJSON_GetArraySize(tokens);
    if (!cJSON_IsArray(tokens) || n <= 0)
        return clb_err(COLIBRI_ERR_FORMAT, "gguf: tokenizer.ggml.tokens missing or empty");
    const cJSON *scores = key(g, "tokenizer.ggml.scores"), *types = key(g, "tokenizer.ggml.token_type");
    if (scores && cJSON_GetArraySize(scores) != n)
        return clb_err(COLIBRI_ERR_FORMAT, "gguf: tokenizer.ggml.scores has %d entries, tokens %d",
                       cJSON_GetArraySize(scores), n);
    if (types && cJSON_GetArraySize(types) != n)
        return clb_err(COLIBRI_ERR_FORMAT, "gguf: tokenizer.ggml.token_type has %d entries, tokens %d",
                       cJSON_GetArraySize(types), n);
    clb_tokenizer *t = clb_tok_alloc(n);
    if (!t) return COLIBRI_ERR_NOMEM;
    *out = t;
    t->model = spm ? CLB_MODEL_SPM : bpe ? CLB_MODEL_BPE : wpm ? CLB_MODEL_WPM : CLB_MODEL_UGM;
    t->byte_level = bpe;
    t->byte_fallback = spm;
    t->gguf_added_rules = true;
    int rc, i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, tokens) {
        if (!cJSON_IsString(e)) return clb_err(COLIBRI_ERR_FORMAT, "gguf: token %d is not a string", i);
        if ((rc = clb_tok_set_token(t, i, e->valuestring, strlen(e->valuestring))) != COLIBRI_OK)
            return rc;
        i++;
    }
    if (spm) {
        t->scores = clb_calloc((size_t)n, sizeof(float));
        if (!t->scores) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        i = 0;
        cJSON_ArrayForEach(e, scores) t->scores[i++] = cJSON_IsNumber(e) ? (float)e->valuedouble : 0.0f;
    }
    if (ugm) { /* the file's floats, summed as llama.cpp does (tok_models.c) */
        t->dscores = clb_calloc((size_t)n, sizeof(double));
        if (!t->dscores) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        i = 0;
        cJSON_ArrayForEach(e, scores) t->dscores[i++] = cJSON_IsNumber(e) ? (double)(float)e->valuedouble : 0.0;
    }
    /* token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte */
    i = 0;
    cJSON_ArrayForEach(e, types) {
        int ty = cJSON_IsNumber(e) ? e->valueint : 1;
        const char *s = t->pool.p + t->foff[i];
        clb_added_tok a = {.id = i, .content = (char *)s, .len = t->flen[i], .special = true};
        if (ty == 2) t->attr[i] |= CLB_TA_UNKNOWN;
        if (ty == 6 && ugm) t->attr[i] |= CLB_TA_BYTE;
        if (ty == 5) t->attr[i] |= CLB_TA_UNUSED;
        if (ty == 2 || ty == 3 || ty == 4) {
            a.special = ty != 4;
            if ((rc = clb_tok_add_added(t, &a)) != COLIBRI_OK) return rc;
            if (ty == 4) t->attr[i] |= CLB_TA_USER_DEFINED;
        }
        i++;
    }
    const cJSON *pre_name = key(g, "tokenizer.ggml.pre");
    const pre_def *pd = bpe ? find_pre(cJSON_IsString(pre_name) ? pre_name->valuestring : NULL) : NULL;
    /* llama.cpp's defaults per vocabulary type, then the file's keys */
    t->bos_id = key_id(g, "tokenizer.ggml.bos_token_id", spm ? 1 : wpm ? 101 : -1);
    t->eos_id = key_id(g, "tokenizer.ggml.eos_token_id", spm ? 2 : ugm ? 1 : -1);
    t->unk_id = key_id(g, "tokenizer.ggml.unknown_token_id", spm ? 0 : wpm ? 100 : ugm ? 2 : -1);
    t->pad_id = key_id(g, "tokenizer.ggml.padding_token_id", wpm || ugm ? 0 : -1);
    int32_t sep_id = key_id(g, "tokenizer.ggml.seperator_token_id", wpm ? 102 : -1);
    if (sep_id >= n) sep_id = -1;
    if (pd && pd->no_bos) t->bos_id = -1;
    int32_t *const special_ids[] = {&t->bos_id, &t->eos_id, &t->unk_id, &t->pad_id};
    for (size_t k = 0; k < CLB_ARRAY_LEN(special_ids); k++)
        if (*special_ids[k] >= n) *special_ids[k] = -1; /* no such token */
    t->add_bos = key_bool(g, "tokenizer.ggml.add_bos_token", spm || wpm || (pd && pd->add_bos));
    t->add_eos = key_bool(g, "tokenizer.ggml.add_eos_token", ugm);
    if (wpm || ugm) {
        if ((rc = wpm_ugm_setup(t, g, wpm, sep_id)) != COLIBRI_OK) return rc;
    } else if (spm) {
        bool prefix = key_bool(g, "tokenizer.ggml.add_space_prefix", true);
        clb_norm_op rep = {0};
        rep.kind = CLB_N_REPLACE;
        rep.a = clb_strdup(" ");
        rep.alen = 1;
        rep.b = clb_strdup("\xe2\x96\x81");
        rep.blen = 3;
        if (!rep.a || !rep.b || (rc = clb_tok_add_norm(t, &rep)) != COLIBRI_OK) {
            clb_free(rep.a);
            clb_free(rep.b);
            return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        }
        if (prefix) {
            clb_norm_op pp = {0};
            pp.kind = CLB_N_PREPEND;
            pp.a = clb_strdup("\xe2\x96\x81");
            pp.alen = 3;
            if (!pp.a || (rc = clb_tok_add_norm(t, &pp)) != COLIBRI_OK) {
                clb_free(pp.a);
                return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
            }
        }
        t->dec_from = clb_strdup("\xe2\x96\x81");
        t->dec_to = clb_strdup(" ");
        if (!t->dec_from || !t->dec_to) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
        t->dec_strip = prefix ? 1 : 0;
    } else {
        t->ignore_merges = pd->ignore_merges;
        t->dec_utf8_lossy = true;
        for (int k = 0; k < 6 && pd->re[k]; k++)
            if ((rc = clb_tok_add_split_regex(t, pd->re[k], CLB_SPLIT_ISOLATED, false)) != COLIBRI_OK)
                return rc;
    }
    /* vocabulary map, then merges */
    if ((rc = clb_strmap_init(&t->vocab, (size_t)n)) != COLIBRI_OK) return rc;
    for (int32_t id = 0; id < n; id++)
        if ((rc = clb_strmap_put(&t->vocab, t, id)) != COLIBRI_OK) return rc;
    if (bpe) {
        const cJSON *merges = key(g, "tokenizer.ggml.merges");
        if (!cJSON_IsArray(merges)) return clb_err(COLIBRI_ERR_FORMAT, "gguf: tokenizer.ggml.merges missing");
        if ((rc = clb_pairmap_init(&t->merges, (size_t)cJSON_GetArraySize(merges) + 1)) != COLIBRI_OK)
            return rc;
        clb_buf tmp = {0};
        int32_t rank = 0;
        cJSON_ArrayForEach(e, merges) {
            const char *s = cJSON_IsString(e) ? e->valuestring : NULL;
            const char *sp = s && s[0] ? strchr(s + 1, ' ') : NULL;
            if (!sp) { rank++; continue; }
            size_t al = (size_t)(sp - s), bl = strlen(sp + 1);
            tmp.n = 0;
            if ((rc = clb_buf_put(&tmp, NULL, al + bl + 2)) != COLIBRI_OK) break;
            long ra = clb_bytelevel_decode(s, al, tmp.p);
            if (ra < 0) { memcpy(tmp.p, s, al); ra = (long)al; }
            long rb = clb_bytelevel_decode(sp + 1, bl, tmp.p + ra);
            if (rb < 0) { memcpy(tmp.p + ra, sp + 1, bl); rb = (long)bl; }
            int32_t ia = clb_strmap_get(&t->vocab, t, tmp.p, (size_t)ra);
            int32_t ib = clb_strmap_get(&t->vocab, t, tmp.p + ra, (size_t)rb);
            int32_t iab = clb_strmap_get(&t->vocab, t, tmp.p, (size_t)(ra + rb));
            if (ia >= 0 && ib >= 0 && iab >= 0) clb_pairmap_put(&t->merges, ia, ib, rank, iab);
            rank++;
        }
        clb_buf_free(&tmp);
        if (rc != COLIBRI_OK) return rc;
    }
    const cJSON *ct = key(g, "tokenizer.chat_template");
    if (cJSON_IsString(ct) && !(t->chat_template = clb_strdup(ct->valuestring)))
        return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    return clb_tok_finish(t);
}

clb_tokenizer *clb_tok_from_gguf_json(const cJSON *g) {
    clb_tokenizer *t = NULL;
    if (!cJSON_IsObject(g)) {
        clb_err(COLIBRI_ERR_FORMAT, "tokenizer: gguf metadata is not an object");
        return NULL;
    }
    if (build(&t, g) != COLIBRI_OK) {
        clb_tokenizer_free(t);
        return NULL;
    }
    return t;
}

clb_tokenizer *clb_tokenizer_from_gguf(const clb_gguf *g) {
    cJSON *j = clb_tokenizer_gguf_to_json(g);
    if (!j) return NULL;
    clb_tokenizer *t = clb_tok_from_gguf_json(cJSON_GetObjectItemCaseSensitive(j, "gguf"));
    cJSON_Delete(j);
    return t;
}

clb_tokenizer *clb_tokenizer_from_json(const cJSON *stored) {
    const cJSON *hf = cJSON_GetObjectItemCaseSensitive(stored, "hf");
    if (cJSON_IsObject(hf))
        return clb_tokenizer_from_hf_json(cJSON_GetObjectItemCaseSensitive(hf, "tokenizer_json"),
                                          cJSON_GetObjectItemCaseSensitive(hf, "tokenizer_config"));
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(stored, "gguf");
    if (cJSON_IsObject(g)) return clb_tok_from_gguf_json(g);
    clb_err(COLIBRI_ERR_FORMAT, "tokenizer: stored metadata has neither \"hf\" nor \"gguf\"");
    return NULL;
}
