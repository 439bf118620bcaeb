/* serve_openai.c — OpenAI request parsing and response building for `colibri serve`:
 * /v1/chat/completions and /v1/completions (plain and streamed), /v1/models, /tokenize,
 * /detokenize, /metrics and the expert view. Every field is checked: a wrong type, a number
 * out of range, invalid UTF-8 or an unknown field is a 400 naming it. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

bool srv_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        const unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned cp;
        if (c >= 0xc2 && c <= 0xdf) k = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) k = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) k = 3, cp = c & 0x07;
        else return false;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += k + 1;
    }
    return true;
}

const char *srv_finish_name(srv_finish f) {
    switch (f) {
    case SRV_FINISH_STOP: return "stop";
    case SRV_FINISH_LENGTH: return "length";
    case SRV_FINISH_CANCEL: return "cancelled";
    case SRV_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

char *srv_json_error(const char *msg, const char *type, const char *code) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

#define BAD(...) (snprintf(msg, msg_cap, __VA_ARGS__), 400)

/* A number field within [lo, hi] (integral when want_int). 0, or 400 with msg. */
static int num_field(const cJSON *v, const char *name, double lo, double hi, bool want_int, double *out, char *msg,
                     size_t msg_cap) {
    if (!cJSON_IsNumber(v)) return BAD("'%s' must be a number", name);
    const double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi) return BAD("'%s' must be in [%g, %g]", name, lo, hi);
    if (want_int && d != floor(d)) return BAD("'%s' must be an integer", name);
    *out = d;
    return 0;
}

static int string_ok(const cJSON *v, const char *name, char *msg, size_t msg_cap) {
    if (!cJSON_IsString(v) || !v->valuestring) return BAD("'%s' must be a string", name);
    if (!srv_utf8_valid(v->valuestring, strlen(v->valuestring))) return BAD("'%s' is not valid UTF-8", name);
    return 0;
}

/* The text of a message's content: a string, or an array of {"type":"text","text":...}. */
static int content_text(const cJSON *c, char **out, char *msg, size_t msg_cap) {
    *out = NULL;
    if (cJSON_IsNull(c)) {
        *out = strdup("");
        return *out ? 0 : 500;
    }
    if (cJSON_IsString(c)) {
        if (string_ok(c, "messages[].content", msg, msg_cap)) return 400;
        *out = strdup(c->valuestring);
        return *out ? 0 : 500;
    }
    if (!cJSON_IsArray(c)) return BAD("'messages[].content' must be a string or an array of text parts");
    size_t len = 0;
    char *s = calloc(1, 1);
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "type"), *x = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") || string_ok(x, "messages[].content[].text", msg, msg_cap)) {
            free(s);
            if (cJSON_IsString(t) && strcmp(t->valuestring, "text"))
                return BAD("content parts of type '%.40s' are not supported (text only)", t->valuestring);
            return BAD("'messages[].content[]' must be {\"type\":\"text\",\"text\":STRING}");
        }
        const size_t k = strlen(x->valuestring);
        char *n = realloc(s, len + k + 1);
        if (!n) return free(s), 500;
        s = n;
        memcpy(s + len, x->valuestring, k + 1);
        len += k;
    }
    *out = s;
    return 0;
}

static int tokenize_alloc(colibri_engine_t *e, const char *text, int add_special, int parse_special, int32_t **ids,
                          size_t *n) {
    size_t len = strlen(text), cap = len + 8;
    *ids = malloc(sizeof(int32_t) * cap);
    if (!*ids) return COLIBRI_ERR_NOMEM;
    int rc = colibri_tokenize(e, text, len, add_special, parse_special, *ids, cap, n);
    if (rc == COLIBRI_ERR_ARG && *n > cap) {
        int32_t *m = realloc(*ids, sizeof(int32_t) * *n);
        if (!m) return COLIBRI_ERR_NOMEM;
        *ids = m;
        rc = colibri_tokenize(e, text, len, add_special, parse_special, *ids, *n, n);
    }
    return rc;
}

static const char *const CHAT_FIELDS[] = {"model", "messages", "stream", "stream_options", "max_tokens",
                                          "max_completion_tokens", "temperature", "top_p", "stop", "seed",
                                          "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs",
                                          "response_format", "n", "user", "store", "metadata", "top_k", "min_p",
                                          "repeat_penalty", "ignore_eos", "cache_prompt", NULL};
static const char *const CMPL_FIELDS[] = {"model", "prompt", "stream", "stream_options", "max_tokens", "temperature",
                                          "top_p", "stop", "seed", "presence_penalty", "frequency_penalty",
                                          "logprobs", "n", "user", "echo", "top_k", "min_p", "repeat_penalty",
                                          "ignore_eos", "cache_prompt", NULL};

static int parse_chat_messages(srv *S, const cJSON *msgs, srv_req *r, char *msg, size_t msg_cap) {
    if (!msgs) return BAD("'messages' is required");
    if (!cJSON_IsArray(msgs)) return BAD("'messages' must be an array");
    const int n = cJSON_GetArraySize(msgs);
    if (n == 0) return BAD("'messages' must not be empty");
    if (n > 4096) return BAD("'messages' has more than 4096 entries");
    colibri_chat_msg *cm = calloc((size_t)n, sizeof *cm);
    char **texts = calloc((size_t)n, sizeof *texts);
    int rc = cm && texts ? 0 : 500, i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (rc) break;
        if (!cJSON_IsObject(m)) {
            rc = BAD("'messages[%d]' must be an object", i);
            break;
        }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (string_ok(role, "messages[].role", msg, msg_cap)) {
            rc = 400;
            break;
        }
        const char *rn = role->valuestring;
        if (!strcmp(rn, "developer")) rn = "system";
        if (strcmp(rn, "system") && strcmp(rn, "user") && strcmp(rn, "assistant") && strcmp(rn, "tool")) {
            rc = BAD("'messages[%d].role' must be system, developer, user, assistant or tool", i);
            break;
        }
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!c) {
            rc = BAD("'messages[%d].content' is required", i);
            break;
        }
        if ((rc = content_text(c, &texts[i], msg, msg_cap))) break;
        cm[i].role = rn;
        cm[i].content = texts[i];
        i++;
    }
    if (!rc) {
        size_t cap = 256, got = 0;
        for (int k = 0; k < n; k++) cap += strlen(texts[k]) + 16;
        r->prompt = malloc(sizeof(int32_t) * cap);
        int t = r->prompt ? colibri_chat_tokenize(S->e, cm, (size_t)n, 1, 1, 0, r->prompt, cap, &got) : COLIBRI_ERR_NOMEM;
        if (t == COLIBRI_ERR_ARG && got > cap) {
            int32_t *p = realloc(r->prompt, sizeof(int32_t) * got);
            t = p ? colibri_chat_tokenize(S->e, cm, (size_t)n, 1, 1, 0, (r->prompt = p), got, &got) : COLIBRI_ERR_NOMEM;
        }
        if (t) rc = BAD("the chat template failed: %s", colibri_last_error());
        r->n_prompt = got;
    }
    for (int k = 0; k < n && texts; k++) free(texts[k]);
    free(texts);
    free(cm);
    return rc;
}

static int parse_prompt(srv *S, const cJSON *p, srv_req *r, char *msg, size_t msg_cap) {
    if (!p) return BAD("'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0))) p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) {
        if (string_ok(p, "prompt", msg, msg_cap)) return 400;
        if (tokenize_alloc(S->e, p->valuestring, 1, 1, &r->prompt, &r->n_prompt))
            return BAD("the prompt cannot be tokenized: %s", colibri_last_error());
        return 0;
    }
    if (!cJSON_IsArray(p)) return BAD("'prompt' must be a string or an array of token ids");
    const int n = cJSON_GetArraySize(p);
    r->prompt = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!r->prompt) return 500;
    const cJSON *x;
    int i = 0;
    cJSON_ArrayForEach(x, p) {
        double d;
        if (num_field(x, "prompt[]", 0, colibri_n_vocab(S->e) - 1, true, &d, msg, msg_cap))
            return BAD("'prompt' must be a string or an array of token ids below %d", colibri_n_vocab(S->e));
        r->prompt[i++] = (int32_t)d;
    }
    r->n_prompt = (size_t)n;
    return 0;
}

int srv_parse_generation(srv *S, const char *body, size_t len, bool chat, srv_req *r, srv_parsed *p, char *msg,
                         size_t msg_cap, const char **code) {
    memset(p, 0, sizeof *p);
    p->chat = chat;
    *code = NULL;
    if (!srv_utf8_valid(body, len)) return BAD("the request body is not valid UTF-8");
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!j) return BAD("the request body is not valid JSON");
    int rc = 0;
    double d;
    const cJSON *v;
    if (!cJSON_IsObject(j)) {
        rc = BAD("the request body must be a JSON object");
        goto out;
    }
    for (const cJSON *f = j->child; f; f = f->next) {
        bool known = false;
        for (const char *const *k = chat ? CHAT_FIELDS : CMPL_FIELDS; *k; k++) known |= !strcmp(f->string, *k);
        if (!known) {
            rc = BAD("unknown field '%.60s'", f->string);
            goto out;
        }
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (v) {
        if ((rc = string_ok(v, "model", msg, msg_cap))) goto out;
        if (strcmp(v->valuestring, S->model_id)) {
            snprintf(msg, msg_cap, "the model '%.80s' does not exist (this server has '%s')", v->valuestring, S->model_id);
            *code = "model_not_found";
            rc = 404;
            goto out;
        }
    }
#define BOOL_FIELD(name, dst)                                                         \
    if ((v = cJSON_GetObjectItemCaseSensitive(j, name))) {                              \
        if (!cJSON_IsBool(v)) {                                                         \
            rc = BAD("'%s' must be a boolean", name);                                   \
            goto out;                                                                   \
        }                                                                               \
        dst = cJSON_IsTrue(v);                                                          \
    }
#define NUM_FIELD(name, lo, hi, isint, stmt)                                            \
    if ((v = cJSON_GetObjectItemCaseSensitive(j, name)) && !cJSON_IsNull(v)) {          \
        if ((rc = num_field(v, name, lo, hi, isint, &d, msg, msg_cap))) goto out;       \
        stmt;                                                                           \
    }
    BOOL_FIELD("stream", p->stream);
    BOOL_FIELD("ignore_eos", r->ignore_eos);
    BOOL_FIELD("cache_prompt", r->cache_prompt);
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "stream_options")) && !cJSON_IsNull(v)) {
        const cJSON *iu = cJSON_GetObjectItemCaseSensitive(v, "include_usage");
        if (!cJSON_IsObject(v) || (iu && !cJSON_IsBool(iu))) {
            rc = BAD("'stream_options' must be {\"include_usage\": BOOLEAN}");
            goto out;
        }
        p->include_usage = cJSON_IsTrue(iu);
    }
    colibri_sampling *s = &r->sampling;
    s->temperature = 1.0f;
    s->top_p = 1.0f;
    s->top_k = 0;
    s->min_p = 0;
    s->seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)(uintptr_t)r;
    r->max_tokens = -1;
    NUM_FIELD("temperature", 0, 2, false, s->temperature = (float)d);
    NUM_FIELD("top_p", 0, 1, false, s->top_p = (float)d);
    NUM_FIELD("top_k", 0, 1 << 20, true, s->top_k = (int32_t)d);
    NUM_FIELD("min_p", 0, 1, false, s->min_p = (float)d);
    NUM_FIELD("repeat_penalty", 0.001, 100, false, s->repeat_penalty = (float)d);
    NUM_FIELD("presence_penalty", -2, 2, false, s->presence_penalty = (float)d);
    NUM_FIELD("frequency_penalty", -2, 2, false, s->frequency_penalty = (float)d);
    NUM_FIELD("seed", -9007199254740991.0, 9007199254740991.0, true, s->seed = (uint64_t)(int64_t)d);
    NUM_FIELD("n", 1, 1, true, (void)d);
    NUM_FIELD("max_tokens", 0, 1e9, true, r->max_tokens = (long)d);
    NUM_FIELD("max_completion_tokens", 0, 1e9, true, r->max_tokens = (long)d);
    if (r->max_tokens > S->max_tokens) {
        rc = BAD("'max_tokens' is %ld, above this server's limit of %ld per request", r->max_tokens, S->max_tokens);
        goto out;
    }
    if (r->max_tokens < 0) r->max_tokens = S->max_tokens;
    if (chat) {
        bool lp = false;
        BOOL_FIELD("logprobs", lp);
        p->logprobs_chat = lp;
        NUM_FIELD("top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, true, r->top_logprobs = (int)d);
        if (r->top_logprobs && !lp) {
            rc = BAD("'top_logprobs' needs 'logprobs': true");
            goto out;
        }
        r->logprobs = lp;
        if ((v = cJSON_GetObjectItemCaseSensitive(j, "response_format")) && !cJSON_IsNull(v)) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "type");
            if (!cJSON_IsObject(v) || !cJSON_IsString(t)) {
                rc = BAD("'response_format' must be {\"type\": \"text\"}");
                goto out;
            }
            if (strcmp(t->valuestring, "text")) {
                rc = BAD("'response_format' of type '%.40s' is not supported yet (only \"text\"): this server does not "
                         "constrain output to JSON",
                         t->valuestring);
                goto out;
            }
        }
    } else {
        NUM_FIELD("logprobs", 0, 5, true, p->logprobs_cmpl = (int)d);
        r->logprobs = p->logprobs_cmpl > 0;
        r->top_logprobs = p->logprobs_cmpl;
        bool echo = false;
        BOOL_FIELD("echo", echo);
        if (echo) {
            rc = BAD("'echo' is not supported");
            goto out;
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "stop")) && !cJSON_IsNull(v)) {
        if (cJSON_IsString(v)) {
            if ((rc = string_ok(v, "stop", msg, msg_cap))) goto out;
            if (*v->valuestring) r->stops[r->n_stops++] = strdup(v->valuestring);
        } else if (cJSON_IsArray(v)) {
            if (cJSON_GetArraySize(v) > SRV_MAX_STOPS) {
                rc = BAD("'stop' has more than %d strings", SRV_MAX_STOPS);
                goto out;
            }
            const cJSON *x;
            cJSON_ArrayForEach(x, v) {
                if ((rc = string_ok(x, "stop[]", msg, msg_cap))) goto out;
                if (*x->valuestring) r->stops[r->n_stops++] = strdup(x->valuestring);
            }
        } else {
            rc = BAD("'stop' must be a string or an array of strings");
            goto out;
        }
        for (int k = 0; k < r->n_stops; k++)
            if (!r->stops[k]) {
                rc = 500;
                goto out;
            }
    }
    rc = chat ? parse_chat_messages(S, cJSON_GetObjectItemCaseSensitive(j, "messages"), r, msg, msg_cap)
              : parse_prompt(S, cJSON_GetObjectItemCaseSensitive(j, "prompt"), r, msg, msg_cap);
    if (rc) goto out;
    if (r->n_prompt == 0) {
        rc = BAD("the prompt is empty");
        goto out;
    }
    if (r->n_prompt >= (size_t)S->n_ctx) {
        snprintf(msg, msg_cap, "the prompt has %zu tokens; this server's context is %d tokens per request", r->n_prompt,
                 S->n_ctx);
        *code = "context_length_exceeded";
        rc = 400;
        goto out;
    }
out:
#undef BOOL_FIELD
#undef NUM_FIELD
    cJSON_Delete(j);
    return rc;
}

/* A token's text for logprobs: its bytes, and a string with invalid UTF-8 replaced. */
static void add_token_entry(srv *S, cJSON *o, int32_t id, float lp, const char *key_token) {
    char buf[256], fixed[768];
    size_t n = 0;
    if (colibri_detokenize(S->e, &id, 1, 0, buf, sizeof buf, &n)) n = 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) { /* keep valid sequences, U+FFFD for the rest */
        size_t step = 1;
        while (step <= 4 && i + step <= n && !srv_utf8_valid(buf + i, step)) step++;
        if (step <= 4 && i + step <= n) {
            memcpy(fixed + k, buf + i, step);
            k += step;
            i += step;
        } else {
            memcpy(fixed + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    fixed[k] = 0;
    cJSON_AddStringToObject(o, key_token, fixed);
    cJSON_AddNumberToObject(o, "logprob", lp);
    cJSON *b = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)buf[i]));
}

static cJSON *chat_logprobs(srv *S, const srv_req *r, size_t from, size_t to) {
    cJSON *lp = cJSON_CreateObject(), *c = cJSON_AddArrayToObject(lp, "content");
    for (size_t i = from; i < to && i < r->n_lp; i++) {
        const srv_lp *t = &r->lps[i];
        cJSON *o = cJSON_CreateObject();
        add_token_entry(S, o, t->id, t->lp, "token");
        cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs");
        for (int k = 0; k < t->n_top; k++) {
            cJSON *x = cJSON_CreateObject();
            add_token_entry(S, x, t->top_id[k], t->top_lp[k], "token");
            cJSON_AddItemToArray(tops, x);
        }
        cJSON_AddItemToArray(c, o);
    }
    return lp;
}

static cJSON *cmpl_logprobs(srv *S, const srv_req *r, size_t from, size_t to) {
    cJSON *lp = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(lp, "tokens"),
          *tlp = cJSON_AddArrayToObject(lp, "token_logprobs"), *top = cJSON_AddArrayToObject(lp, "top_logprobs");
    for (size_t i = from; i < to && i < r->n_lp; i++) {
        const srv_lp *t = &r->lps[i];
        cJSON *tmp = cJSON_CreateObject();
        add_token_entry(S, tmp, t->id, t->lp, "token");
        cJSON_AddItemToArray(toks, cJSON_CreateString(cJSON_GetObjectItem(tmp, "token")->valuestring));
        cJSON_AddItemToArray(tlp, cJSON_CreateNumber(t->lp));
        cJSON *m = cJSON_CreateObject();
        for (int k = 0; k < t->n_top; k++) {
            cJSON *x = cJSON_CreateObject();
            add_token_entry(S, x, t->top_id[k], t->top_lp[k], "token");
            cJSON_AddNumberToObject(m, cJSON_GetObjectItem(x, "token")->valuestring, t->top_lp[k]);
            cJSON_Delete(x);
        }
        cJSON_AddItemToArray(top, m);
        cJSON_Delete(tmp);
    }
    return lp;
}

static cJSON *usage_obj(const srv_req *r) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->n_prompt + r->n_gen));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    if (d) cJSON_AddNumberToObject(d, "cached_tokens", (double)r->n_cached);
    return u;
}

static cJSON *envelope(srv *S, const srv_parsed *p, const char *id, long created, bool chunk) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", p->chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)created);
    cJSON_AddStringToObject(o, "model", S->model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "colibri");
    return o;
}

static char *text_dup(const srv_req *r, size_t from, size_t to) {
    char *t = malloc(to - from + 1);
    if (!t) return NULL;
    if (to > from) memcpy(t, r->text + from, to - from); /* no text yet: r->text is NULL */
    t[to - from] = 0;
    return t;
}

char *srv_json_final(srv *S, const srv_req *r, const srv_parsed *p, const char *id, long created) {
    cJSON *o = envelope(S, p, id, created, false), *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    char *t = text_dup(r, 0, r->len);
    if (p->chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", t ? t : "");
        if (p->logprobs_chat) cJSON_AddItemToObject(c, "logprobs", chat_logprobs(S, r, 0, r->n_lp));
        else cJSON_AddNullToObject(c, "logprobs");
    } else {
        cJSON_AddStringToObject(c, "text", t ? t : "");
        if (p->logprobs_cmpl) cJSON_AddItemToObject(c, "logprobs", cmpl_logprobs(S, r, 0, r->n_lp));
        else cJSON_AddNullToObject(c, "logprobs");
    }
    free(t);
    cJSON_AddStringToObject(c, "finish_reason", srv_finish_name(r->finish) ? srv_finish_name(r->finish) : "stop");
    cJSON_AddItemToObject(o, "usage", usage_obj(r));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *srv_json_chunk(srv *S, const srv_req *r, const srv_parsed *p, const char *id, long created, size_t from,
                     size_t to, size_t lp_from, size_t lp_to, bool role, bool final) {
    cJSON *o = envelope(S, p, id, created, true), *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    char *t = text_dup(r, from, to);
    if (p->chat) {
        cJSON *dl = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(dl, "role", "assistant");
        if (role || to > from) cJSON_AddStringToObject(dl, "content", t ? t : "");
        if (p->logprobs_chat && lp_to > lp_from) cJSON_AddItemToObject(c, "logprobs", chat_logprobs(S, r, lp_from, lp_to));
        else cJSON_AddNullToObject(c, "logprobs");
    } else {
        cJSON_AddStringToObject(c, "text", t ? t : "");
        if (p->logprobs_cmpl && lp_to > lp_from) cJSON_AddItemToObject(c, "logprobs", cmpl_logprobs(S, r, lp_from, lp_to));
        else cJSON_AddNullToObject(c, "logprobs");
    }
    free(t);
    if (final) cJSON_AddStringToObject(c, "finish_reason", srv_finish_name(r->finish) ? srv_finish_name(r->finish) : "stop");
    else cJSON_AddNullToObject(c, "finish_reason");
    if (p->include_usage) cJSON_AddNullToObject(o, "usage");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *srv_json_usage_chunk(srv *S, const srv_req *r, const srv_parsed *p, const char *id, long created) {
    cJSON *o = envelope(S, p, id, created, true);
    cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToObject(o, "usage", usage_obj(r));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *srv_json_models(srv *S) {
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", S->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)(long)S->t_start);
    cJSON_AddStringToObject(m, "owned_by", "colibri");
    cJSON_AddNumberToObject(m, "context_length", S->n_ctx);
    cJSON_AddItemToArray(d, m);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static cJSON *parse_object(const char *body, size_t len, char *msg, size_t msg_cap) {
    if (!srv_utf8_valid(body, len)) return snprintf(msg, msg_cap, "the request body is not valid UTF-8"), NULL;
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!j) return snprintf(msg, msg_cap, "the request body is not valid JSON"), NULL;
    if (!cJSON_IsObject(j)) return cJSON_Delete(j), snprintf(msg, msg_cap, "the request body must be a JSON object"), NULL;
    return j;
}

int srv_tokenize_json(srv *S, const char *body, size_t len, char **out, char *msg, size_t msg_cap) {
    cJSON *j = parse_object(body, len, msg, msg_cap);
    if (!j) return 400;
    int rc = 0;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "content"), *as = cJSON_GetObjectItemCaseSensitive(j, "add_special"),
                *ps = cJSON_GetObjectItemCaseSensitive(j, "parse_special");
    for (const cJSON *f = j->child; f && !rc; f = f->next)
        if (strcmp(f->string, "content") && strcmp(f->string, "add_special") && strcmp(f->string, "parse_special"))
            rc = BAD("unknown field '%.60s'", f->string);
    if (!rc && !c) rc = BAD("'content' is required");
    if (!rc && ((as && !cJSON_IsBool(as)) || (ps && !cJSON_IsBool(ps)))) rc = BAD("'add_special' and 'parse_special' must be booleans");
    if (!rc) rc = string_ok(c, "content", msg, msg_cap);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!rc && tokenize_alloc(S->e, c->valuestring, cJSON_IsTrue(as), ps ? cJSON_IsTrue(ps) : 1, &ids, &n))
        rc = BAD("cannot tokenize: %s", colibri_last_error());
    if (!rc) {
        cJSON *o = cJSON_CreateObject(), *t = cJSON_AddArrayToObject(o, "tokens");
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(ids[i]));
        *out = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    free(ids);
    cJSON_Delete(j);
    return rc;
}

int srv_detokenize_json(srv *S, const char *body, size_t len, char **out, char *msg, size_t msg_cap) {
    cJSON *j = parse_object(body, len, msg, msg_cap);
    if (!j) return 400;
    int rc = 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "tokens");
    for (const cJSON *f = j->child; f && !rc; f = f->next)
        if (strcmp(f->string, "tokens")) rc = BAD("unknown field '%.60s'", f->string);
    if (!rc && !cJSON_IsArray(t)) rc = BAD("'tokens' must be an array of token ids");
    const int n = rc ? 0 : cJSON_GetArraySize(t);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!ids) rc = 500;
    int i = 0;
    const cJSON *x;
    if (!rc) cJSON_ArrayForEach(x, t) {
        double d;
        if (num_field(x, "tokens[]", 0, colibri_n_vocab(S->e) - 1, true, &d, msg, msg_cap)) {
            rc = BAD("'tokens' must hold token ids in [0, %d]", colibri_n_vocab(S->e) - 1);
            break;
        }
        ids[i++] = (int32_t)d;
    }
    if (!rc) {
        size_t cap = (size_t)n * 16 + 16, got = 0;
        char *s = malloc(cap + 1);
        int d = s ? colibri_detokenize(S->e, ids, (size_t)n, 0, s, cap, &got) : COLIBRI_ERR_NOMEM;
        if (d == COLIBRI_ERR_ARG && got > cap) {
            char *ns = realloc(s, got + 1);
            d = ns ? colibri_detokenize(S->e, ids, (size_t)n, 0, (s = ns), got, &got) : COLIBRI_ERR_NOMEM;
        }
        if (d) {
            rc = BAD("cannot detokenize: %s", colibri_last_error());
        } else {
            s[got] = 0;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "content", s);
            *out = cJSON_PrintUnformatted(o);
            cJSON_Delete(o);
        }
        free(s);
    }
    free(ids);
    cJSON_Delete(j);
    return rc;
}

/* ---- /metrics and /v1/experts (from the scheduler's snapshot) ---- */

typedef struct {
    srv *S;
    char *buf;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        const int k = vsnprintf(b->buf ? b->buf + b->len : NULL, b->buf ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->buf && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->len + (size_t)k + 1) nc *= 2;
        char *n = realloc(b->buf, nc);
        if (!n) return;
        b->buf = n;
        b->cap = nc;
    }
}

static uint64_t rss_now(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &res) != 2) res = 0;
        fclose(f);
    }
    return (uint64_t)res * 4096u;
}

static void metrics_fill(const srv_snapshot *sn, void *user) {
    sbuf *b = user;
    srv *S = b->S;
    srv_sched *s = &S->sched;
    const colibri_stats_t *st = sn->stats;
    int busy = 0;
    for (int i = 0; i < s->n_slots; i++) busy += s->slots[i].req != NULL;
#define M(name, type, help, fmt, val) sb_printf(b, "# HELP colibri_" name " " help "\n# TYPE colibri_" name " " type "\ncolibri_" name " " fmt "\n", val)
    M("http_requests_total", "counter", "HTTP requests answered.", "%llu", (unsigned long long)atomic_load(&S->http_requests));
    M("http_errors_total", "counter", "HTTP requests answered with a 4xx or 5xx status.", "%llu", (unsigned long long)atomic_load(&S->http_errors));
    M("http_rejected_total", "counter", "Generation requests refused with 503 (queue full or shutting down).", "%llu", (unsigned long long)atomic_load(&S->http_rejected));
    M("requests_completed_total", "counter", "Generation requests run to their end.", "%llu", (unsigned long long)s->requests_done);
    M("requests_cancelled_total", "counter", "Generation requests cancelled (client gone, shutdown).", "%llu", (unsigned long long)s->requests_cancelled);
    M("prompt_tokens_total", "counter", "Prompt tokens evaluated.", "%llu", (unsigned long long)s->tokens_prompt);
    M("prompt_tokens_cached_total", "counter", "Prompt tokens not evaluated: a slot's KV cache held them from its last request.", "%llu", (unsigned long long)s->tokens_cached);
    M("generated_tokens_total", "counter", "Tokens generated.", "%llu", (unsigned long long)s->tokens_gen);
    M("generation_tokens_per_second", "gauge", "Tokens generated per second over the last window of about 2 s of activity.", "%.3f", s->tok_per_s);
    M("queue_depth", "gauge", "Requests waiting for a slot.", "%d", s->qlen);
    M("slots_busy", "gauge", "Slots running a request.", "%d", busy);
    M("slots_total", "gauge", "Slots (--parallel).", "%d", s->n_slots);
    M("decode_steps_total", "counter", "Batches evaluated by the scheduler.", "%llu", (unsigned long long)s->steps);
    M("decode_batch_tokens_total", "counter", "Tokens in those batches.", "%llu", (unsigned long long)s->step_tokens);
    M("decode_busy_seconds_total", "counter", "Time spent evaluating batches.", "%.6f", s->busy_s);
    M("moe_layer_runs_total", "counter", "MoE layer evaluations (one per layer per batch).", "%llu", (unsigned long long)st->moe_layer_runs);
    M("moe_experts_run_total", "counter", "Distinct experts those evaluations ran.", "%llu", (unsigned long long)st->moe_experts_run);
    M("moe_expert_bytes_run_total", "counter", "Bytes of the weights of those experts (read from memory).", "%llu", (unsigned long long)st->moe_expert_bytes_run);
    M("expert_cache_hits_total", "counter", "Expert acquires served from the pool (memory budget mode).", "%llu", (unsigned long long)st->expert_hits_total);
    M("expert_cache_misses_total", "counter", "Expert acquires that waited for a read.", "%llu", (unsigned long long)st->expert_misses_total);
    M("expert_bytes_read_total", "counter", "Bytes read from the model file into the expert pool.", "%llu", (unsigned long long)st->expert_bytes_read_total);
    M("expert_evictions_total", "counter", "Experts evicted from the pool.", "%llu", (unsigned long long)st->expert_evictions_total);
    M("peak_rss_bytes", "gauge", "Peak resident set of the process.", "%llu", (unsigned long long)st->peak_rss_bytes);
    M("rss_bytes", "gauge", "Resident set of the process now.", "%llu", (unsigned long long)rss_now());
    M("kv_cache_bytes", "gauge", "The KV cache's allocation (all slots).", "%llu", (unsigned long long)st->kv_bytes);
#undef M
}

char *srv_metrics_text(srv *S) {
    sbuf b = {S, NULL, 0, 0};
    srv_with_snapshot(&S->sched, 200, metrics_fill, &b);
    return b.buf;
}

static void experts_fill(const srv_snapshot *sn, void *user) {
    sbuf *b = user;
    const colibri_stats_t *st = sn->stats;
    sb_printf(b, "{\"n_layers\":%d,\"n_experts\":%d,\"step\":%llu,\"steps\":%llu,\"pool_slots\":%d,\"layers\":[", sn->n_layers,
              sn->n_experts, (unsigned long long)sn->seq, (unsigned long long)b->S->sched.steps, st->expert_pool_slots);
    int first = 1;
    for (int l = 0; l < sn->n_layers && sn->n_experts > 0; l++) {
        const uint32_t *last = sn->last + (size_t)l * (size_t)sn->n_experts;
        const uint8_t *res = sn->resident + (size_t)l * (size_t)sn->n_experts;
        if (!sn->is_moe[l]) continue; /* a dense layer */
        sb_printf(b, "%s{\"layer\":%d,\"last\":[", first ? "" : ",", l);
        first = 0;
        for (int x = 0; x < sn->n_experts; x++) sb_printf(b, "%s%u", x ? "," : "", last[x]);
        sb_printf(b, "],\"resident\":[");
        for (int x = 0; x < sn->n_experts; x++) sb_printf(b, "%s%u", x ? "," : "", res[x]);
        sb_printf(b, "],\"count\":[");
        for (int x = 0; x < sn->n_experts; x++) sb_printf(b, "%s%u", x ? "," : "", st->expert_counts[l][x]);
        sb_printf(b, "]}");
    }
    sb_printf(b, "]}");
}

char *srv_experts_json(srv *S) {
    sbuf b = {S, NULL, 0, 0};
    srv_with_snapshot(&S->sched, 200, experts_fill, &b);
    return b.buf;
}
