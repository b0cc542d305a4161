/* server — swift-infer --serve's HTTP side on libmicrohttpd (see server.h). */
#include "lib/infer/server.h"
#include "lib/infer/server_int.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/preprocess/agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

void swift_serve_opts_init(struct swift_serve_opts *o)
{
    memset(o, 0, sizeof(*o));
    swift_infer_opts_init(&o->infer);
    o->port = 8000;
    o->max_request_bytes = 1L << 20;
    o->timeout_keep_alive = 5;
}

/* One HTTP request on a connection: its body, status and trace (MHD's con_cls). */
struct hreq {
    char *body;
    size_t len;
    int too_big;
    int status;
    int64_t t0, eng_id;
    char rid[48];
    char method[8], path[64];
};

static atomic_long next_id;
static atomic_int inflight; /* HTTP requests begun and not yet completed */

/* ---- answers ---- */

static enum MHD_Result reply(struct MHD_Connection *c, struct hreq *h, int status, json_t *body)
{
    char *s = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(body);
    size_t n = s ? strlen(s) : 0;
    struct MHD_Response *rsp = MHD_create_response_from_buffer(
        n, s ? s : (char *)"", s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (s)
        MHD_add_response_header(rsp, "Content-Type", "application/json");
    if (h->rid[0])
        MHD_add_response_header(rsp, "X-Request-Id", h->rid);
    if (status == 405)
        MHD_add_response_header(
            rsp,
            "Allow",
            strcmp(h->path, "/health") && strcmp(h->path, "/v1/models") ? "POST" : "GET");
    h->status = status;
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, rsp);
    MHD_destroy_response(rsp);
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, struct hreq *h,
                                   const struct swift_oai_error *er)
{
    return reply(c, h, er->status, swift_oai_error_json(er));
}

static enum MHD_Result fail(struct MHD_Connection *c, struct hreq *h, int status, const char *code,
                            const char *msg)
{
    struct swift_oai_error er;
    swift_oai_fail(&er, status, "", code, "%s", msg);
    return reply_error(c, h, &er);
}

/* The client closed its end (recv sees EOF). */
static int client_gone(int fd)
{
    char b;
    if (fd < 0)
        return 0;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Wait on r->cv up to 100 ms (under mu). */
static void wait_a_bit(struct sreq *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&r->cv, &r->s->mu, &ts);
}

/* ---- streaming ---- */

static void out_add(struct sreq *r, const char *p, size_t n)
{
    if (r->outlen + n > r->outcap) {
        r->outcap = (r->outlen + n) * 2 + 256;
        r->out = swift_xrealloc(r->out, r->outcap);
    }
    memcpy(r->out + r->outlen, p, n);
    r->outlen += n;
}

static void out_event(struct sreq *r, json_t *chunk)
{
    size_t n;
    char *s = swift_oai_sse(chunk, &n);
    json_decref(chunk);
    if (s)
        out_add(r, s, n);
    free(s);
}

/* chunk with the logprobs entries of c not streamed yet, when the request asks for them */
static json_t *with_logprobs(json_t *chunk, struct swift_oai_choice *c,
                             const struct swift_oai_request *rq)
{
    json_t *lp = swift_oai_choice_lp_delta(c, rq);
    if (lp)
        json_object_set_new(json_array_get(json_object_get(chunk, "choices"), 0), "logprobs", lp);
    return chunk;
}

/* A finished choice of a request with tools: its content and tool calls in one delta. */
static void tool_delta(struct sreq *r, int i)
{
    struct swift_oai_choice *c = &r->ch[i];
    char *content;
    json_t *calls;
    int nc = swift_agent_parse(r->rq.conv.agent,
                               c->text,
                               c->len,
                               swift_oai_call_seed(r->call_seed, i),
                               &content,
                               &calls,
                               NULL,
                               0);
    json_t *ch = swift_oai_chunk(&r->rq,
                                 r->id,
                                 r->created,
                                 r->s->model_name,
                                 i,
                                 0,
                                 content ? content : "",
                                 content ? strlen(content) : 0,
                                 swift_oai_finish_name(c->finish, nc > 0));
    if (nc > 0) {
        json_t *delta = json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta");
        for (size_t k = 0; k < json_array_size(calls); k++)
            json_object_set_new(json_array_get(calls, k), "index", json_integer((json_int_t)k));
        json_object_set(delta, "tool_calls", calls);
    }
    json_decref(calls);
    free(content);
    c->emitted = c->len;
    out_event(r, with_logprobs(ch, c, &r->rq));
}

/* What is new in r as SSE events (under mu). */
static void stream_fill(struct sreq *r)
{
    struct srv *s = r->s;
    int chat = r->rq.kind == SWIFT_OAI_CHAT, open = 0;
    if (r->failed) {
        out_event(r, swift_oai_error_json(&r->er));
        out_add(r, SWIFT_OAI_SSE_DONE, strlen(SWIFT_OAI_SSE_DONE));
        r->ended = 1;
        return;
    }
    for (int i = 0; i < r->n; i++) {
        struct swift_oai_choice *c = &r->ch[i];
        if (chat && !r->first_sent[i]) {
            out_event(r,
                      swift_oai_chunk(&r->rq, r->id, r->created, s->model_name, i, 1, "", 0, NULL));
            r->first_sent[i] = 1;
        }
        if (r->fin_sent[i])
            continue;
        int fin = c->finish != SWIFT_FINISH_NONE;
        if (chat && r->rq.tools_on) {
            if (fin) {
                tool_delta(r, i);
                r->fin_sent[i] = 1;
            }
            open += !fin;
            continue;
        }
        const char *t;
        size_t n = swift_oai_choice_delta(c, &r->rq, &t);
        if (n || fin)
            out_event(
                r,
                with_logprobs(swift_oai_chunk(&r->rq,
                                              r->id,
                                              r->created,
                                              s->model_name,
                                              i,
                                              0,
                                              t,
                                              n,
                                              fin ? swift_oai_finish_name(c->finish, 0) : NULL),
                              c,
                              &r->rq));
        r->fin_sent[i] = (char)fin;
        open += !fin;
    }
    if (open || !srv_sreq_done(r))
        return;
    if (r->engine_failed) { /* after the choices' "abort": why, as OpenAI's error object */
        struct swift_oai_error er;
        swift_oai_abort_error(&er, r->engine_failed);
        out_event(r, swift_oai_error_json(&er));
    }
    if (r->rq.include_usage)
        out_event(
            r,
            swift_oai_usage_chunk(&r->rq, r->id, r->created, s->model_name, r->ch, r->n, r->nids));
    out_add(r, SWIFT_OAI_SSE_DONE, strlen(SWIFT_OAI_SSE_DONE));
    r->ended = 1;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct sreq *r = cls;
    pthread_mutex_lock(&r->s->mu);
    for (;;) {
        if (r->outpos < r->outlen) {
            size_t n = r->outlen - r->outpos < max ? r->outlen - r->outpos : max;
            memcpy(buf, r->out + r->outpos, n);
            r->outpos += n;
            if (r->outpos == r->outlen)
                r->outpos = r->outlen = 0;
            pthread_mutex_unlock(&r->s->mu);
            return (ssize_t)n;
        }
        if (r->ended) {
            pthread_mutex_unlock(&r->s->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        stream_fill(r);
        if (r->outlen)
            continue;
        wait_a_bit(r);
        if (client_gone(r->fd)) {
            pthread_mutex_unlock(&r->s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls)
{
    srv_sreq_release(cls);
}

/* ---- completions ---- */

static struct sreq *sreq_new(struct srv *s, struct hreq *h, int fd)
{
    struct sreq *r = swift_xcalloc(1, sizeof(*r));
    r->s = s;
    r->fd = fd;
    r->t0 = h->t0;
    r->created = (long)time(NULL);
    pthread_cond_init(&r->cv, NULL);
    return r;
}

static void sreq_drop(struct sreq *r) /* never queued */
{
    if (r->ch) {
        for (int c = 0; c < r->n; c++)
            swift_oai_choice_release(&r->ch[c]);
        free(r->ch);
    }
    if (r->rq.body)
        swift_oai_request_release(&r->rq);
    free(r->ids);
    swift_infer_pixels_release(&r->px);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* Wait for every choice and answer with the whole body (or cancel: the client left). */
static enum MHD_Result answer_whole(struct MHD_Connection *c, struct hreq *h, struct sreq *r)
{
    struct srv *s = r->s;
    pthread_mutex_lock(&s->mu);
    while (!srv_sreq_done(r)) {
        wait_a_bit(r);
        if (!srv_sreq_done(r) && client_gone(r->fd)) {
            pthread_mutex_unlock(&s->mu);
            srv_sreq_release(r);
            h->status = 499; /* nginx's "client closed request", for the trace */
            return MHD_NO;
        }
    }
    h->eng_id = r->eng_id;
    pthread_mutex_unlock(&s->mu);
    json_t *body;
    int status = 200;
    if (r->failed) {
        status = r->er.status;
        body = swift_oai_error_json(&r->er);
    } else if (r->aborted) {
        struct swift_oai_error er;
        swift_oai_abort_error(&er, r->engine_failed);
        status = er.status;
        body = swift_oai_error_json(&er);
    } else if (r->rq.kind == SWIFT_OAI_CHAT) {
        body = swift_oai_chat_response(
            &r->rq, r->id, r->created, s->model_name, r->ch, r->n, r->nids, r->call_seed);
    } else {
        body = swift_oai_completion_response(
            &r->rq, r->id, r->created, s->model_name, r->ch, r->n, r->nids);
    }
    srv_sreq_release(r);
    return reply(c, h, status, body);
}

static enum MHD_Result answer_stream(struct MHD_Connection *c, struct hreq *h, struct sreq *r)
{
    r->first_sent = swift_xcalloc((size_t)r->n, 1);
    r->fin_sent = swift_xcalloc((size_t)r->n, 1);
    struct MHD_Response *rsp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, r, stream_free);
    MHD_add_response_header(rsp, "Content-Type", "text/event-stream");
    MHD_add_response_header(rsp, "Cache-Control", "no-cache");
    MHD_add_response_header(rsp, "X-Request-Id", h->rid);
    h->status = 200;
    enum MHD_Result rc = MHD_queue_response(c, 200, rsp);
    MHD_destroy_response(rsp);
    return rc;
}

static enum MHD_Result completion(struct srv *s, struct MHD_Connection *c, struct hreq *h,
                                  enum swift_oai_kind kind)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct sreq *r = sreq_new(s, h, ci ? ci->connect_fd : -1);
    snprintf(r->id, sizeof(r->id), "%s-%s", kind == SWIFT_OAI_CHAT ? "chatcmpl" : "cmpl", h->rid);
    r->call_seed = strtoull(h->rid, NULL, 16);
    if (swift_oai_parse_text(
            h->body ? h->body : "", h->len, kind, s->o->infer.served_name, &r->rq, &r->er) < 0) {
        enum MHD_Result rc = reply_error(c, h, &r->er);
        sreq_drop(r);
        return rc;
    }
    if (srv_prepare(s, r) < 0 || srv_submit(s, r) < 0) {
        enum MHD_Result rc = reply_error(c, h, &r->er);
        sreq_drop(r);
        return rc;
    }
    /* wait for the engine to take it: its id for the trace, and a request the engine refuses
     * is answered with its status before a stream begins */
    pthread_mutex_lock(&s->mu);
    while (!r->eng_id && !r->failed) {
        wait_a_bit(r);
        if (!r->eng_id && !r->failed && client_gone(r->fd)) {
            pthread_mutex_unlock(&s->mu);
            srv_sreq_release(r);
            h->status = 499;
            return MHD_NO;
        }
    }
    h->eng_id = r->eng_id;
    int failed = r->failed;
    pthread_mutex_unlock(&s->mu);
    return r->rq.stream && !failed ? answer_stream(c, h, r) : answer_whole(c, h, r);
}

static enum MHD_Result models(struct srv *s, struct MHD_Connection *c, struct hreq *h)
{
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:s,s:n,s:i}",
                          "id",
                          s->model_name,
                          "object",
                          "model",
                          "created",
                          (json_int_t)s->created,
                          "owned_by",
                          "swift-infer",
                          "root",
                          s->o->infer.model,
                          "parent",
                          "max_model_len",
                          s->im.max_len);
    return reply(c, h, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

/* ---- routing ---- */

static int authorized(struct srv *s, struct MHD_Connection *c)
{
    if (!s->api_key)
        return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return a && !strncmp(a, "Bearer ", 7) && !strcmp(a + 7, s->api_key);
}

static enum MHD_Result route(struct srv *s, struct MHD_Connection *c, struct hreq *h)
{
    static const struct {
        const char *path, *method;
        int kind; /* 0 health, 1 models, 2 chat, 3 completions */
    } routes[] = {{"/health", "GET", 0},
                  {"/v1/models", "GET", 1},
                  {"/v1/chat/completions", "POST", 2},
                  {"/v1/completions", "POST", 3}};
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(h->path, routes[i].path))
            k = i;
    if (k < 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "no such endpoint: %s %s", h->method, h->path);
        return fail(c, h, 404, NULL, msg);
    }
    if (k > 0 && !authorized(s, c))
        return fail(c,
                    h,
                    401,
                    "invalid_api_key",
                    "Unauthorized: a valid 'Authorization: Bearer' API key is required");
    if (strcmp(h->method, routes[k].method) && !(k < 2 && !strcmp(h->method, "HEAD")))
        return fail(c, h, 405, NULL, "Method Not Allowed");
    if (h->too_big) {
        char msg[160];
        snprintf(msg,
                 sizeof(msg),
                 "the request body is larger than %d bytes (--max-request-bytes)",
                 s->o->max_request_bytes);
        return fail(c, h, 413, NULL, msg);
    }
    if (k == 0) {
        pthread_mutex_lock(&s->mu);
        int up = s->up && !s->stopping;
        pthread_mutex_unlock(&s->mu);
        return up ? reply(c, h, 200, NULL) : fail(c, h, 503, NULL, "the engine is not running");
    }
    if (k == 1)
        return models(s, c, h);
    return completion(s, c, h, k == 2 ? SWIFT_OAI_CHAT : SWIFT_OAI_COMPLETION);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    struct srv *s = cls;
    struct hreq *h = *con_cls;
    if (!h) {
        h = swift_xcalloc(1, sizeof(*h));
        h->t0 = swift_trace_now();
        snprintf(h->method, sizeof(h->method), "%s", method);
        snprintf(h->path, sizeof(h->path), "%s", url);
        snprintf(h->rid,
                 sizeof(h->rid),
                 "%08lx%08lx",
                 (unsigned long)s->created & 0xffffffffUL,
                 (unsigned long)atomic_fetch_add(&next_id, 1) + 1);
        *con_cls = h;
        atomic_fetch_add(&inflight, 1);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!h->too_big && h->len + *upload_size > (size_t)s->o->max_request_bytes) {
            h->too_big = 1;
            free(h->body);
            h->body = NULL;
            h->len = 0;
        }
        if (!h->too_big) {
            h->body = swift_xrealloc(h->body, h->len + *upload_size + 1);
            memcpy(h->body + h->len, upload, *upload_size);
            h->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return route(s, c, h);
}

/* A request's end: its trace span, its memory. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    struct hreq *h = *con_cls;
    if (!h)
        return;
    /* 499 (nginx's "client closed request"): the client left before the whole answer */
    int status = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK ? 499 : h->status ? h->status : 200;
    swift_trace_span("infer",
                     "http_request",
                     h->t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_S("method", h->method),
                                           SWIFT_TARG_S("path", h->path),
                                           SWIFT_TARG_I("status", status),
                                           SWIFT_TARG_S("request_id", h->rid),
                                           SWIFT_TARG_I("req", h->eng_id)},
                     5);
    free(h->body);
    free(h);
    *con_cls = NULL;
    atomic_fetch_sub(&inflight, 1);
}

/* After the engine has stopped, every answer in flight has its end queued (streams: a finish and
 * [DONE]; waits: 503): let the connections send it before the daemon closes them (up to 5 s). */
static void drain(void)
{
    for (int i = 0; i < 500 && atomic_load(&inflight) > 0; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
}

/* ---- the daemon ---- */

static struct MHD_Daemon *start_daemon(struct srv *s)
{
    const struct swift_serve_opts *o = s->o;
    const char *host = o->host ? o->host : "127.0.0.1";
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai;
    char port[16];
    snprintf(port, sizeof(port), "%d", o->port);
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g) {
        swift_error("--host '%s': %s", host, gai_strerror(g));
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_POLL;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(flags,
                                            (uint16_t)o->port,
                                            NULL,
                                            NULL,
                                            handle,
                                            s,
                                            MHD_OPTION_SOCK_ADDR,
                                            ai->ai_addr,
                                            MHD_OPTION_CONNECTION_TIMEOUT,
                                            (unsigned)o->timeout_keep_alive,
                                            MHD_OPTION_NOTIFY_COMPLETED,
                                            completed,
                                            s,
                                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d)
        swift_error(
            "cannot listen on %s port %d (in use, or not an address of this host)", host, o->port);
    return d;
}

static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Serve until a stop signal, then stop in order (server.h). */
static int serve(struct srv *s, sigset_t *set)
{
    if (srv_engine_start(s) < 0)
        return SWIFT_FAILED;
    struct MHD_Daemon *d = start_daemon(s);
    if (!d) {
        srv_engine_stop(s);
        return SWIFT_FAILED;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    pthread_mutex_lock(&s->mu);
    s->up = 1;
    pthread_mutex_unlock(&s->mu);
    swift_info("serving '%s' as '%s' on http://%s:%u (SIGTERM or SIGINT stops)",
               s->o->infer.model,
               s->model_name,
               s->o->host ? s->o->host : "127.0.0.1",
               di ? (unsigned)di->port : (unsigned)s->o->port);
    int sig = 0;
    sigwait(set, &sig);
    swift_info("%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_socket ls = MHD_quiesce_daemon(d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    srv_engine_stop(s); /* cancels what is in flight: streams end, waits answer 503 */
    drain();
    MHD_stop_daemon(d); /* joins the connections' threads */
    return 0;
}

int swift_infer_serve(const struct swift_serve_opts *o)
{
    struct srv s = {.o = o, .created = (long)time(NULL)};
    pthread_mutex_init(&s.mu, NULL);
    pthread_mutex_init(&s.tok_mu, NULL);
    pthread_cond_init(&s.work, NULL);
    s.model_name = o->infer.served_name ? o->infer.served_name : o->infer.model;
    s.api_key = o->api_key ? o->api_key : getenv("VLLM_API_KEY");
    if (s.api_key && !*s.api_key)
        s.api_key = NULL;
    sigset_t set;
    block_signals(&set);
    int rc = srv_load(&s);
    if (rc == 0)
        rc = serve(&s, &set);
    if (s.im.eng) {
        struct swift_engine_stats es;
        swift_engine_stats(s.im.eng, &es);
        swift_info("%ld prompt and %ld generated tokens in %ld steps, %ld preemptions; %d KV "
                   "blocks in use",
                   es.prefill_tokens,
                   es.generated_tokens,
                   es.steps,
                   es.preemptions,
                   es.blocks_used);
    }
    srv_release(&s);
    pthread_cond_destroy(&s.work);
    pthread_mutex_destroy(&s.tok_mu);
    pthread_mutex_destroy(&s.mu);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    return rc < 0 ? SWIFT_FAILED : rc;
}
