/* serve.h — `colibri serve`: an OpenAI-compatible HTTP server (docs/SERVER.md).
 *
 *   serve.c         options, start-up, signals, shutdown
 *   serve_http.c    libmicrohttpd (a thread per connection): routes, limits, key, SSE
 *   serve_sched.c   the one thread that runs the model: slots, queue, continuous batching
 *   serve_openai.c  OpenAI request parsing and response / chunk building (cJSON)
 *   serve_page.c    the web page at / (chat + live expert view)
 *
 * Only include/colibri.h is used. HTTP threads tokenize (the text calls are thread-safe once
 * the tokenizer is built) and wait on their request; the scheduler thread alone evaluates. */
#ifndef CLB_CLI_SERVE_H
#define CLB_CLI_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

#define SRV_MAX_STOPS 16
#define SRV_MAX_TOP_LOGPROBS 20

/* One generated token's log-probabilities (logprobs requests). */
typedef struct srv_lp {
    int32_t id;
    float lp;
    int32_t n_top;
    int32_t top_id[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
} srv_lp;

typedef enum { SRV_FINISH_NONE = 0, SRV_FINISH_STOP, SRV_FINISH_LENGTH, SRV_FINISH_CANCEL, SRV_FINISH_ERROR } srv_finish;

/* A generation request: filled by an HTTP thread, run by the scheduler. The fields below
   "shared" are guarded by the scheduler's mutex. */
typedef struct srv_req {
    int32_t *prompt;
    size_t n_prompt;
    colibri_sampling sampling;
    long max_tokens;
    char *stops[SRV_MAX_STOPS];
    int n_stops;
    int logprobs;     /* record srv_lp per token */
    int top_logprobs; /* 0..SRV_MAX_TOP_LOGPROBS */
    bool ignore_eos;
    bool cache_prompt; /* may start from the slot's cached common prefix (default) */
    /* shared */
    pthread_cond_t cv;
    int refs;
    bool cancel, done, running;
    srv_finish finish;
    char err[256];
    char *text;           /* generated text */
    size_t len, cap;      /* its bytes, allocation */
    size_t shown;         /* text[0..shown) may be sent (the rest may still become a stop string) */
    srv_lp *lps;
    size_t n_lp, cap_lp;
    size_t n_gen;         /* tokens generated */
    size_t n_cached;      /* prompt tokens whose KV the slot still held from its last request */
    double t_submit, t_start, t_first, t_done;
    struct srv_req *next; /* queue link */
} srv_req;

typedef struct srv_slot {
    srv_req *req;
    int phase;     /* 0 free, 1 prompt, 2 decoding */
    size_t n_fed;  /* prompt tokens evaluated */
    int32_t last;  /* the token to evaluate next (decoding) */
    colibri_sampler_t *smp;
    colibri_detok_t *dt;
    /* the tokens in this slot's KV cache, positions 0..n_hist-1: kept when a request ends, so
       the next request that starts with the same tokens (a chat's next turn, a shared system
       prompt) evaluates only the rest */
    int32_t *hist;
    size_t n_hist;
    double t_used; /* when its last request ended (least recently used slot first) */
} srv_slot;

typedef struct srv_snapshot {
    colibri_stats_t *stats;
    uint32_t *last;    /* [n_layers][n_experts]: tokens of the last batch that chose each expert */
    uint8_t *resident; /* [n_layers][n_experts] */
    uint8_t *is_moe;   /* [n_layers]: the layer has routed experts */
    int32_t n_layers, n_experts;
    uint64_t seq;      /* snapshots taken */
} srv_snapshot;

typedef struct srv_sched {
    colibri_engine_t *e;
    int n_slots, n_batch, n_ctx, n_vocab;
    srv_slot *slots;
    pthread_mutex_t mu;
    pthread_cond_t cv, snap_cv;
    pthread_t th;
    bool started, stop, reuse;
    srv_req *qhead, *qtail;
    int qlen, qmax;
    float *logits;
    size_t logits_cap;
    colibri_batch_tok *batch;
    int *batch_slot;
    int rr; /* round-robin start for prompt chunks */
    /* each step's draws, made outside mu before the slots' bookkeeping: the scheduler draws
       the even logits rows, a helper thread the odd ones (a draw over a 152k vocabulary costs
       milliseconds; the engine's threads are idle meanwhile) */
    int32_t *drawn; /* [n_slots] token of each logits row */
    int *draw_rc;   /* [n_slots] colibri_sampler_sample's status */
    int n_draw;     /* rows of the current step */
    pthread_t helper;
    pthread_mutex_t hmu;
    pthread_cond_t hcv;
    uint64_t hgen, hdone; /* steps handed to the helper, finished by it */
    bool helper_on, hstop;
    /* metrics (under mu) */
    uint64_t steps, step_tokens, tokens_prompt, tokens_cached, tokens_gen, requests_done, requests_cancelled, decode_errors;
    double busy_s;
    double win_t0;              /* tokens/s over a sliding window */
    uint64_t win_tok0;
    double tok_per_s;
    /* expert view (under mu) */
    srv_snapshot snap;
    atomic_int snap_want;
} srv_sched;

/* reuse: a slot keeps its KV cache between requests for their common prefix */
int srv_sched_start(srv_sched *s, colibri_engine_t *e, int n_slots, int qmax, int n_batch, bool reuse);
/* 0 = queued; -1 = the queue is full; -2 = shutting down. Takes a reference for the scheduler. */
int srv_submit(srv_sched *s, srv_req *r);
void srv_cancel(srv_sched *s, srv_req *r);
/* Drops one reference (the HTTP thread's or the scheduler's); the last frees. */
void srv_release(srv_sched *s, srv_req *r);
/* Cancels everything, joins the thread, frees the slots. */
void srv_sched_stop(srv_sched *s);
/* colibri_decode and colibri_seq_truncate, through cli_set_serve_ops's calls when set */
int srv_decode(colibri_engine_t *e, const colibri_batch_tok *toks, size_t n, float *logits, size_t logits_cap);
int srv_truncate(colibri_engine_t *e, int32_t seq, int32_t n);
srv_req *srv_req_new(void);
/* Waits (up to ms) until the scheduler has taken a new snapshot of the statistics and expert
   state, then calls fn with it under the lock. */
void srv_with_snapshot(srv_sched *s, int ms, void (*fn)(const srv_snapshot *, void *), void *user);

/* The server's settings and shared state. */
typedef struct srv {
    colibri_engine_t *e;
    srv_sched sched;
    const char *model_id;
    char *api_key;
    size_t api_key_len;
    size_t max_body;
    long max_tokens;  /* per-request generation limit */
    int n_ctx;
    int idle_timeout; /* seconds */
    double t_start;
    atomic_bool shutting_down;
    atomic_int live_streams; /* SSE responses not yet destroyed: shutdown lets them finish */
    atomic_ullong http_requests, http_errors, http_rejected;
} srv;

/* serve_http.c */
struct MHD_Daemon;
struct MHD_Daemon *srv_http_start(srv *S, const char *host, int port, int max_conns, int timeout_s, int *bound_port);
void srv_http_stop(struct MHD_Daemon *d);

/* serve_openai.c. Parsing returns 0, or an HTTP status with msg/param filled. */
typedef struct srv_parsed {
    bool chat, stream, include_usage;
    int logprobs_chat;   /* chat logprobs: true/false */
    int logprobs_cmpl;   /* completions logprobs: N (0 = none) */
} srv_parsed;
int srv_parse_generation(srv *S, const char *body, size_t len, bool chat, srv_req *r, srv_parsed *p, char *msg,
                         size_t msg_cap, const char **code);
char *srv_json_final(srv *S, const srv_req *r, const srv_parsed *p, const char *id, long created);
/* The SSE chunk(s) for text[from..to) and logprobs [lp_from, lp_to) (NULL when nothing to say). */
char *srv_json_chunk(srv *S, const srv_req *r, const srv_parsed *p, const char *id, long created, size_t from,
                     size_t to, size_t lp_from, size_t lp_to, bool role, bool final);
char *srv_json_usage_chunk(srv *S, const srv_req *r, const srv_parsed *p, const char *id, long created);
char *srv_json_error(const char *msg, const char *type, const char *code);
char *srv_json_models(srv *S);
int srv_tokenize_json(srv *S, const char *body, size_t len, char **out, char *msg, size_t msg_cap);
int srv_detokenize_json(srv *S, const char *body, size_t len, char **out, char *msg, size_t msg_cap);
char *srv_metrics_text(srv *S);
char *srv_experts_json(srv *S);
bool srv_utf8_valid(const char *s, size_t n);
const char *srv_finish_name(srv_finish f);

/* serve_page.c */
char *srv_page_html(void); /* heap */

#endif
