/* fuzz_serve_request.c — libFuzzer target: the body of an HTTP request to `colibri serve`
   (cli/serve_openai.c) on the bundled model. The first byte picks the endpoint:
   /v1/chat/completions, /v1/completions, /tokenize or /detokenize; the rest is the body.
   An accepted generation request is then answered as the server would (the final JSON and
   the stream chunks) for a generated text made of the prompt's own tokens.
   Invariants: a refusal is a 4xx with a message (500 only for out of memory); an accepted
   request holds in-range ids and settings; every response is valid JSON. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* serve.c's two engine hooks without colibri-mpi's replay (serve.c itself is the HTTP
   start-up, not linked here); the scheduler thread is never started by this target */
int srv_decode(colibri_engine_t *e, const colibri_batch_tok *toks, size_t n, float *logits, size_t logits_cap) {
    return colibri_decode(e, toks, n, logits, logits_cap);
}
int srv_truncate(colibri_engine_t *e, int32_t seq, int32_t n) { return colibri_seq_truncate(e, seq, n); }

static colibri_engine_t *engine(void) {
    static colibri_engine_t *e;
    if (!e) {
        colibri_params p = colibri_params_default();
        p.n_threads = 1;
        e = colibri_init_params("models/colibri-tiny.colibri", &p);
        if (!e) __builtin_trap(); /* run from the repository root */
    }
    return e;
}

static void check_json(char *s) {
    if (!s) return;
    cJSON *j = cJSON_Parse(s);
    if (!j) __builtin_trap();
    cJSON_Delete(j);
    free(s);
}

/* The answer to an accepted request, as if its prompt's tokens had been generated. */
static void answer(srv *S, srv_req *r, const srv_parsed *p) {
    colibri_detok_t *dt = colibri_detok_new(S->e, 1);
    if (!dt) return;
    for (size_t i = 0; i < r->n_prompt && i < 64; i++) {
        char piece[256];
        size_t n = 0;
        if (colibri_detok_push(dt, r->prompt[i], piece, sizeof piece, &n) != COLIBRI_OK) break;
        if (r->len + n + 1 > r->cap) {
            size_t cap = (r->len + n + 1) * 2;
            char *t = realloc(r->text, cap);
            if (!t) break;
            r->text = t, r->cap = cap;
        }
        memcpy(r->text + r->len, piece, n);
        r->len += n;
        r->text[r->len] = 0;
        r->n_gen++;
    }
    colibri_detok_free(dt);
    r->shown = r->len;
    r->finish = SRV_FINISH_LENGTH;
    check_json(srv_json_final(S, r, p, "id-1", 1));
    check_json(srv_json_chunk(S, r, p, "id-1", 1, 0, r->len / 2, 0, 0, true, false));
    check_json(srv_json_chunk(S, r, p, "id-1", 1, r->len / 2, r->len, 0, 0, false, true));
    check_json(srv_json_usage_chunk(S, r, p, "id-1", 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    srv S;
    memset(&S, 0, sizeof S);
    S.e = engine();
    S.model_id = "colibri-tiny";
    S.max_body = 1 << 20;
    S.max_tokens = 64;
    S.n_ctx = colibri_max_seq_len(S.e);
    pthread_mutex_init(&S.sched.mu, NULL);
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    char msg[512] = "";
    const int which = data[0] % 4;
    if (which < 2) {
        srv_req *r = srv_req_new();
        if (!r) return 0;
        srv_parsed p;
        const char *code = NULL;
        const int st = srv_parse_generation(&S, body, len, which == 0, r, &p, msg, sizeof msg, &code);
        if (st) {
            if (!((st >= 400 && st < 500) || st == 500) || !msg[0]) __builtin_trap();
        } else {
            const int32_t nv = colibri_n_vocab(S.e);
            for (size_t i = 0; i < r->n_prompt; i++)
                if (r->prompt[i] < 0 || r->prompt[i] >= nv) __builtin_trap();
            if (r->max_tokens < 0 || r->n_stops < 0 || r->n_stops > SRV_MAX_STOPS || r->top_logprobs < 0 ||
                r->top_logprobs > SRV_MAX_TOP_LOGPROBS)
                __builtin_trap();
            answer(&S, r, &p);
        }
        srv_release(&S.sched, r);
    } else {
        char *out = NULL;
        const int st = which == 2 ? srv_tokenize_json(&S, body, len, &out, msg, sizeof msg)
                                  : srv_detokenize_json(&S, body, len, &out, msg, sizeof msg);
        if (st) {
            if (!((st >= 400 && st < 500) || st == 500) || !msg[0] || out) __builtin_trap();
        } else {
            check_json(out);
        }
    }
    pthread_mutex_destroy(&S.sched.mu);
    return 0;
}
