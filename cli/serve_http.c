/* serve_http.c — the HTTP side of `colibri serve` on libmicrohttpd, a thread per connection:
 * a generation request's thread tokenizes, queues the request and then blocks (plain JSON)
 * or streams Server-Sent Events from the response callback as the scheduler appends text.
 * Both poll the socket while they wait, so a client that goes away cancels its request. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

#define KEEPALIVE_S 10.0

typedef struct conn {
    srv *S;
    char *body;
    size_t len, cap;
    bool too_big, timeout_off;
} conn;

/* A streamed generation: what the response callback needs. */
typedef struct stream {
    srv *S;
    srv_req *r;
    srv_parsed p;
    char id[40];
    long created;
    int fd;
    char *out; /* bytes ready to send */
    size_t out_len, out_pos;
    size_t sent, lp_sent;
    bool role_sent, final_sent, ended;
    double last_send;
} stream;

static void make_id(char *id, size_t cap, const char *prefix) {
    static atomic_ullong counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(id, cap, "%s-%llx%06llx", prefix, (unsigned long long)ts.tv_sec,
             (unsigned long long)(atomic_fetch_add(&counter, 1) & 0xffffff));
}

/* The client closed its side (or the socket broke). */
static bool peer_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        const ssize_t k = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
}

static enum MHD_Result reply(struct MHD_Connection *c, srv *S, unsigned status, const char *ctype, char *body,
                             const char *retry) {
    atomic_fetch_add(&S->http_requests, 1);
    if (status >= 400) atomic_fetch_add(&S->http_errors, 1);
    const char *b = body ? body : "";
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
    free(body);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry) MHD_add_response_header(r, "x-should-retry", retry);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    const enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, srv *S, unsigned status, const char *msg, const char *code) {
    const char *type = status == 401 ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "invalid_request_error"
                       : status >= 500 ? (status == 503 ? "server_busy" : "server_error")
                                       : "invalid_request_error";
    return reply(c, S, status, "application/json", srv_json_error(msg, type, code),
                 status == 503 ? (atomic_load(&S->shutting_down) ? "false" : "true") : NULL);
}

static enum MHD_Result reply_json(struct MHD_Connection *c, srv *S, char *json) {
    if (!json) return reply_error(c, S, 500, "out of memory", NULL);
    return reply(c, S, 200, "application/json", json, NULL);
}

/* Constant-time comparison of the Authorization header's bearer token with the key. */
static bool key_ok(srv *S, struct MHD_Connection *c) {
    if (!S->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *tok = "";
    if (h && !strncasecmp(h, "Bearer ", 7)) tok = h + 7;
    const size_t n = strlen(tok), k = S->api_key_len;
    volatile unsigned char diff = (unsigned char)(n != k);
    for (size_t i = 0; i < k; i++) diff |= (unsigned char)(S->api_key[i] ^ (i < n ? tok[i] : 0));
    return diff == 0;
}

/* ---- streaming ---- */

static void out_append(stream *st, const char *s, size_t n) {
    if (st->out_pos == st->out_len) st->out_pos = st->out_len = 0;
    char *o = realloc(st->out, st->out_len + n + 1);
    if (!o) return;
    st->out = o;
    memcpy(st->out + st->out_len, s, n);
    st->out_len += n;
}

static void out_event(stream *st, char *json) {
    if (!json) return;
    out_append(st, "data: ", 6);
    out_append(st, json, strlen(json));
    out_append(st, "\n\n", 2);
    free(json);
}

/* Under the scheduler's mutex: turns what the request has gained into SSE events. */
static void stream_collect(stream *st) {
    srv_req *r = st->r;
    if (!st->role_sent && st->p.chat) {
        out_event(st, srv_json_chunk(st->S, r, &st->p, st->id, st->created, 0, 0, 0, 0, true, false));
        st->role_sent = true;
    }
    size_t shown = r->shown < r->len ? r->shown : r->len;
    /* logprobs go with the text they produced; a held-back tail keeps its logprobs back too */
    const size_t lp_to = r->done ? r->n_lp : (r->n_lp > 0 && shown < r->len ? r->n_lp - 1 : r->n_lp);
    if (shown > st->sent || lp_to > st->lp_sent) {
        out_event(st, srv_json_chunk(st->S, r, &st->p, st->id, st->created, st->sent, shown, st->lp_sent, lp_to, false, false));
        st->sent = shown > st->sent ? shown : st->sent;
        st->lp_sent = lp_to;
    }
    if (r->done && !st->final_sent) {
        if (r->finish == SRV_FINISH_ERROR) {
            char *e = srv_json_error(r->err[0] ? r->err : "generation failed", "server_error", NULL);
            out_event(st, e);
        } else {
            out_event(st, srv_json_chunk(st->S, r, &st->p, st->id, st->created, 0, 0, 0, 0, false, true));
            if (st->p.include_usage) out_event(st, srv_json_usage_chunk(st->S, r, &st->p, st->id, st->created));
        }
        out_append(st, "data: [DONE]\n\n", 14);
        st->final_sent = true;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    srv_sched *s = &st->S->sched;
    for (;;) {
        if (st->out_pos < st->out_len) {
            size_t k = st->out_len - st->out_pos;
            if (k > max) k = max;
            memcpy(buf, st->out + st->out_pos, k);
            st->out_pos += k;
            st->last_send = cli_now();
            return (ssize_t)k;
        }
        if (st->final_sent) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&s->mu);
        for (;;) {
            stream_collect(st);
            if (st->out_len > st->out_pos) break;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&st->r->cv, &s->mu, &ts);
            if (!st->r->done && peer_gone(st->fd)) {
                pthread_mutex_unlock(&s->mu);
                srv_cancel(s, st->r);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (cli_now() - st->last_send > KEEPALIVE_S) {
                out_append(st, ": keep-alive\n\n", 14);
                break;
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
}

static void stream_free(void *cls) {
    stream *st = cls;
    atomic_fetch_sub(&st->S->live_streams, 1);
    srv_cancel(&st->S->sched, st->r); /* nothing when it has finished */
    srv_release(&st->S->sched, st->r);
    free(st->out);
    free(st);
}

/* ---- generation ---- */

static enum MHD_Result generation(struct MHD_Connection *c, conn *cn, bool chat) {
    srv *S = cn->S;
    if (atomic_load(&S->shutting_down)) {
        atomic_fetch_add(&S->http_rejected, 1);
        return reply_error(c, S, 503, "the server is shutting down", "shutting_down");
    }
    srv_req *r = srv_req_new();
    if (!r) return reply_error(c, S, 500, "out of memory", NULL);
    srv_parsed p;
    char msg[512] = "";
    const char *code = NULL;
    const int st = srv_parse_generation(S, cn->body ? cn->body : "", cn->len, chat, r, &p, msg, sizeof msg, &code);
    if (st) {
        srv_release(&S->sched, r);
        return reply_error(c, S, (unsigned)st, st == 500 ? "out of memory" : msg, code);
    }
    const int q = srv_submit(&S->sched, r);
    if (q) {
        srv_release(&S->sched, r);
        atomic_fetch_add(&S->http_rejected, 1);
        return reply_error(c, S, 503, q == -2 ? "the server is shutting down" : "all slots are busy and the queue is full; retry later",
                           q == -2 ? "shutting_down" : "server_busy");
    }
    /* the request may outlive the idle timeout: the socket is polled instead */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    cn->timeout_off = true;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const int fd = ci ? ci->connect_fd : -1;
    char id[40];
    make_id(id, sizeof id, chat ? "chatcmpl" : "cmpl");
    const long created = (long)time(NULL);
    if (p.stream) {
        stream *s = calloc(1, sizeof *s);
        if (!s) {
            srv_cancel(&S->sched, r);
            srv_release(&S->sched, r);
            return reply_error(c, S, 500, "out of memory", NULL);
        }
        s->S = S;
        s->r = r;
        s->p = p;
        atomic_fetch_add(&S->live_streams, 1);
        snprintf(s->id, sizeof s->id, "%s", id);
        s->created = created;
        s->fd = fd;
        s->last_send = cli_now();
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free);
        if (!resp) {
            stream_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        atomic_fetch_add(&S->http_requests, 1);
        const enum MHD_Result rc = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return rc;
    }
    srv_sched *sc = &S->sched;
    pthread_mutex_lock(&sc->mu);
    while (!r->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&r->cv, &sc->mu, &ts);
        if (!r->done && peer_gone(fd)) {
            pthread_mutex_unlock(&sc->mu);
            srv_cancel(sc, r);
            srv_release(sc, r);
            return MHD_NO; /* closes the connection */
        }
    }
    pthread_mutex_unlock(&sc->mu);
    enum MHD_Result rc;
    if (r->finish == SRV_FINISH_ERROR) rc = reply_error(c, S, 500, r->err[0] ? r->err : "generation failed", NULL);
    else if (r->finish == SRV_FINISH_CANCEL) rc = reply_error(c, S, 503, "the request was cancelled (shutdown)", "shutting_down");
    else rc = reply_json(c, S, srv_json_final(S, r, &p, id, created));
    srv_release(sc, r);
    return rc;
}

/* ---- routing ---- */

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv *S = cls;
    conn *cn = *con_cls;
    if (!cn) {
        if (!(cn = calloc(1, sizeof *cn))) return MHD_NO;
        cn->S = S;
        *con_cls = cn;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > S->max_body) {
            char m[128];
            snprintf(m, sizeof m, "the request body is larger than this server's limit of %zu bytes", S->max_body);
            return reply_error(c, S, 413, m, "body_too_large");
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cn->too_big) {
            if (cn->len + *upload_size > S->max_body) {
                cn->too_big = true;
                free(cn->body);
                cn->body = NULL;
                cn->len = 0;
            } else {
                if (cn->len + *upload_size + 1 > cn->cap) {
                    size_t nc = cn->cap ? cn->cap : 4096;
                    while (nc < cn->len + *upload_size + 1) nc *= 2;
                    char *b = realloc(cn->body, nc);
                    if (!b) return MHD_NO;
                    cn->body = b;
                    cn->cap = nc;
                }
                memcpy(cn->body + cn->len, upload, *upload_size);
                cn->len += *upload_size;
                cn->body[cn->len] = 0;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cn->too_big) {
        char m[128];
        snprintf(m, sizeof m, "the request body is larger than this server's limit of %zu bytes", S->max_body);
        return reply_error(c, S, 413, m, "body_too_large");
    }
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health") && get) {
        if (atomic_load(&S->shutting_down)) return reply_error(c, S, 503, "the server is shutting down", "shutting_down");
        return reply(c, S, 200, "application/json", strdup("{\"status\":\"ok\"}"), NULL);
    }
    if ((!strcmp(url, "/") || !strcmp(url, "/index.html")) && get) /* static, no data: the page asks for the key */
        return reply(c, S, 200, "text/html; charset=utf-8", srv_page_html(), NULL);
    if (!key_ok(S, c)) return reply_error(c, S, 401, "invalid or missing API key (Authorization: Bearer KEY)", "invalid_api_key");
    const bool known = !strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/completions") || !strcmp(url, "/tokenize") ||
                       !strcmp(url, "/detokenize") || !strcmp(url, "/v1/models") || !strcmp(url, "/metrics") ||
                       !strcmp(url, "/v1/experts") || !strcmp(url, "/v1/chat/completions/") || !strcmp(url, "/v1/completions/");
    if (post && !strncmp(url, "/v1/chat/completions", 20) && (!url[20] || !strcmp(url + 20, "/"))) return generation(c, cn, true);
    if (post && !strncmp(url, "/v1/completions", 15) && (!url[15] || !strcmp(url + 15, "/"))) return generation(c, cn, false);
    char msg[512] = "";
    char *out = NULL;
    if (post && (!strcmp(url, "/tokenize") || !strcmp(url, "/detokenize"))) {
        const int st = url[1] == 't' ? srv_tokenize_json(S, cn->body ? cn->body : "", cn->len, &out, msg, sizeof msg)
                                     : srv_detokenize_json(S, cn->body ? cn->body : "", cn->len, &out, msg, sizeof msg);
        if (st) return reply_error(c, S, (unsigned)st, st == 500 ? "out of memory" : msg, NULL);
        return reply_json(c, S, out);
    }
    if (get && !strcmp(url, "/v1/models")) return reply_json(c, S, srv_json_models(S));
    if (get && !strncmp(url, "/v1/models/", 11)) {
        if (strcmp(url + 11, S->model_id)) return reply_error(c, S, 404, "no such model", "model_not_found");
        return reply_json(c, S, srv_json_models(S));
    }
    if (get && !strcmp(url, "/metrics")) {
        char *m = srv_metrics_text(S);
        if (!m) return reply_error(c, S, 500, "out of memory", NULL);
        return reply(c, S, 200, "text/plain; version=0.0.4", m, NULL);
    }
    if (get && !strcmp(url, "/v1/experts")) return reply_json(c, S, srv_experts_json(S));
    if (known) return reply_error(c, S, 405, "method not allowed on this route", "method_not_allowed");
    snprintf(msg, sizeof msg, "no route %.16s %.200s", method, url);
    return reply_error(c, S, 404, msg, "not_found");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    srv *S = cls;
    conn *cn = *con_cls;
    if (!cn) return;
    (void)S;
    if (cn->timeout_off && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)S->idle_timeout);
    free(cn->body);
    free(cn);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    (void)fmt;
    (void)ap; /* libmicrohttpd's own messages (a client's broken request): not ours to print */
}

struct MHD_Daemon *srv_http_start(srv *S, const char *host, int port, int max_conns, int timeout_s, int *bound_port) {
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) || !ai) {
        cli_fail("serve: cannot resolve --host '%s'", host);
        return NULL;
    }
    S->idle_timeout = timeout_s;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, handler, S, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)max_conns, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)65536, MHD_OPTION_NOTIFY_COMPLETED, completed, S, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        cli_fail("serve: cannot listen on %s:%d (%s)", host, port, strerror(errno ? errno : EADDRINUSE));
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : port;
    return d;
}

void srv_http_stop(struct MHD_Daemon *d) {
    if (d) MHD_stop_daemon(d);
}
