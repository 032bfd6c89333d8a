/* libmicrohttpd glue: body collection, the edge rules, the hand-off from
 * MHD's I/O threads to our worker pools (suspend/resume), response
 * queueing, JSON errors. */
#include "http.h"

#include "edge.h"
#include "util.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A queue of suspended requests and the threads that run the handler for
 * them. Each worker owns its thread-local MySQL connection (db.h). */
struct http_pool {
    struct http_server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct req_state *head, *tail;   /* FIFO of requests waiting for a worker */
    int stopping;                    /* set by http_stop: drain, then exit */
    pthread_t *tids;
    long nthreads;                   /* started */
};

#define HTTP_MAX_CONTROL 8
/* How long a stop waits for answers already made to be sent. */
#define HTTP_STOP_FLUSH_MS 2000

/* One open connection, for the request-read deadline: MHD's own timeout
 * is an idle timeout, which a client sending one byte a second extends
 * forever. */
struct conn_info {
    int fd;
    _Atomic int reading;            /* between requests or reading one */
    _Atomic double since;           /* util_now() when reading started */
    int cut;                        /* shut down by the reaper */
    struct conn_info *prev, *next;  /* the server's list, under conns_mu */
};

struct http_server {
    struct MHD_Daemon *d;
    pthread_mutex_t conns_mu;
    struct conn_info *conns;         /* open connections */
    _Atomic long nconns;
    pthread_t reaper;
    int reaper_started;
    _Atomic int reaper_stop;
    http_handler_fn fn;
    void *app;
    const char *control[HTTP_MAX_CONTROL + 1];
    const char *inline_paths[HTTP_MAX_CONTROL + 1];
    struct http_pool work, ctl;
    /* Requests handed to a pool whose answer MHD has not finished sending
     * (dispatch to on_completed): a stop waits for them, or a sale that
     * was made would reach its client as a dropped connection. */
    _Atomic long unsent;
};

struct req_state {
    struct http_req req;
    struct conn_info *ci;       /* the connection's deadline record (may be NULL) */
    char *buf;
    size_t cap;
    struct http_resp resp;      /* filled by a worker, sent by MHD's thread */
    int done;                   /* resp is ready (read/written under pool mu) */
    int dispatched;             /* handed to a pool (MHD's thread only) */
    struct req_state *next;     /* pool queue link */
};

void http_text(struct http_resp *resp, int status, const char *ctype, char *text)
{
    free(resp->text);
    resp->status = status;
    resp->text = text;
    resp->content_type = ctype;
}

void http_json(struct http_resp *resp, int status, json_t *json)
{
    char *s = json ? json_dumps(json, JSON_COMPACT) : NULL;
    json_decref(json);
    if (!s) {
        s = strdup("{\"ok\":false,\"error\":\"internal\",\"detail\":\"cannot encode response\"}");
        status = 500;
    }
    http_text(resp, status, "application/json", s);
}

void http_error(struct http_resp *resp, int status, const char *code,
                const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    /* jansson refuses a string that is not UTF-8, which would turn the
     * answer into a 500: a detail may quote client bytes that stop in the
     * middle of a character, and truncation may cut one. */
    edge_utf8_scrub(detail);
    http_json(resp, status, json_pack("{s:b,s:s,s:s}", "ok", 0, "error", code,
                                      "detail", detail));
}

const char *http_query(const struct http_req *req, const char *key)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(const struct http_req *req, const char *key)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, key);
}

static int append_body(struct req_state *st, const char *data, size_t n)
{
    if (st->req.body_too_large)
        return 0;
    if (st->req.body_len + n > HTTP_MAX_BODY) {
        st->req.body_too_large = 1;
        return 0;
    }
    if (st->req.body_len + n + 1 > st->cap) {
        size_t cap = st->cap ? st->cap : 1024;
        while (cap < st->req.body_len + n + 1)
            cap *= 2;
        char *b = realloc(st->buf, cap);
        if (!b)
            return -1;
        st->buf = b;
        st->cap = cap;
    }
    memcpy(st->buf + st->req.body_len, data, n);
    st->req.body_len += n;
    st->buf[st->req.body_len] = '\0';
    return 0;
}

static enum MHD_Result send_resp(struct MHD_Connection *conn, struct http_resp *r)
{
    /* The body moves to MHD (freed with the response): no copy. */
    char *body = r->text;
    size_t len = body ? strlen(body) : 0;
    struct MHD_Response *mr = MHD_create_response_from_buffer(
        len, body ? (void *)body : (void *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!mr)
        return MHD_NO;
    r->text = NULL;
    MHD_add_response_header(mr, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    if (r->retry_after[0])
        MHD_add_response_header(mr, "Retry-After", r->retry_after);
    if (r->allow[0])
        MHD_add_response_header(mr, "Allow", r->allow);
    if (r->status == 401)   /* RFC 9110: a 401 names the scheme it wants */
        MHD_add_response_header(mr, "WWW-Authenticate", "Bearer realm=\"oversell-lab\"");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned int)r->status, mr);
    MHD_destroy_response(mr);
    return ret;
}

/* ---- the edge: every text a client sends, before any route runs ---- */

struct text_walk {
    struct edge_verdict *v;
    const char *kind;           /* "header" or "query" */
};

static enum MHD_Result check_kv(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    struct text_walk *w = cls;
    (void)kind;
    if (key && edge_check_text(w->kind, key, strlen(key), w->v) != 0)
        return MHD_NO;
    /* The value's name ("header X-Foo") is formatted only for a rejection:
     * an snprintf per header per request showed in the profile. */
    if (value && !edge_utf8_valid(value, strlen(value))) {
        char what[96];
        snprintf(what, sizeof(what), "%s %.60s", w->kind, key ? key : "");
        if (edge_check_text(what, value, strlen(value), w->v) != 0)
            return MHD_NO;
    }
    return MHD_YES;
}

/* Apply edge.h's rules to a complete request; 0 when it may go to a route,
 * else resp holds the JSON error. Invalid UTF-8 would otherwise reach a
 * detail message (jansson refuses it: a 500) or MySQL (a utf8mb4 error). */
static int edge_reject(const struct req_state *st, struct http_resp *resp)
{
    struct edge_verdict v = {0};
    const struct http_req *rq = &st->req;
    struct text_walk hw = {&v, "header"}, qw = {&v, "query"};
    const char *ct = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Content-Type");
    if (edge_check_text("path", rq->path, strlen(rq->path), &v) == 0)
        MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, check_kv, &qw);
    if (v.status == 0)
        MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, check_kv, &hw);
    if (v.status == 0)
        edge_check_body(rq->method, ct, rq->body_too_large ? NULL : rq->body,
                        rq->body_too_large ? 0 : rq->body_len, &v);
    if (v.status == 0 && rq->body_too_large)
        http_error(resp, 413, "body_too_large", "request body exceeds %d bytes",
                   HTTP_MAX_BODY);
    else if (v.status != 0)
        http_error(resp, v.status, v.code, "%s", v.detail);
    return resp->text ? -1 : 0;
}

/* ---- worker pools ---- */

static void run_handler(struct http_server *s, struct req_state *st)
{
    st->resp.status = 500;
    s->fn(s->app, &st->req, &st->resp);
    if (!st->resp.text)
        http_error(&st->resp, 500, "internal", "handler produced no response");
}

static void answer_stopping(struct http_resp *resp)
{
    snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
    http_error(resp, 503, "backend_unavailable", "the service is stopping");
}

static http_warm_fn warm_fn;
static _Atomic long warm_workers, all_workers;

void http_set_warm(http_warm_fn fn) { warm_fn = fn; }

void http_warm_state(long *warm, long *workers)
{
    *warm = atomic_load(&warm_workers);
    *workers = atomic_load(&all_workers);
}

/* One warm-up attempt of a worker that is not warm yet; updates *warm. */
static void warm_try(struct http_pool *p, int *warm, double *next)
{
    if (*warm || util_now() < *next)
        return;
    if (!warm_fn || warm_fn(p->srv->app) == 0) {
        *warm = 1;
        atomic_fetch_add(&warm_workers, 1);
    } else {
        *next = util_now() + 1.0;
    }
}

static void *pool_main(void *arg)
{
    struct http_pool *p = arg;
    /* Only the handler's pool warms up: the control pool's answers
     * (/healthz) must not wait for a backend. */
    int warm = p != &p->srv->work;
    double next_warm = 0;
    if (!warm)
        warm_try(p, &warm, &next_warm);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->head && !p->stopping) {
            if (warm) {
                pthread_cond_wait(&p->cv, &p->mu);
                continue;
            }
            /* Not warm: wake once a second to try again while idle. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            pthread_mutex_unlock(&p->mu);
            warm_try(p, &warm, &next_warm);
            pthread_mutex_lock(&p->mu);
        }
        struct req_state *st = p->head;
        if (st) {
            p->head = st->next;
            if (!p->head)
                p->tail = NULL;
        }
        int stopping = p->stopping;
        pthread_mutex_unlock(&p->mu);
        if (!st)
            return NULL;   /* stopping and drained */
        /* Draining: a request that has not started is answered at once
         * (the client retries elsewhere) instead of starting work that a
         * stop's KILL could cut in half. */
        if (stopping) {
            answer_stopping(&st->resp);
        } else {
            run_handler(p->srv, st);
            warm_try(p, &warm, &next_warm);
        }
        /* Once done is set, st belongs to MHD's thread (on_request sends
         * st->resp after the resume, on_completed frees it): touch it no
         * more. */
        struct MHD_Connection *conn = st->req.conn;
        pthread_mutex_lock(&p->mu);
        st->done = 1;
        pthread_mutex_unlock(&p->mu);
        MHD_resume_connection(conn);
    }
}

/* Suspend the connection and queue it for a worker. Returns -1 (nothing
 * suspended) once the pool is stopping. */
static int pool_submit(struct http_pool *p, struct req_state *st)
{
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    /* Under mu, so no worker can resume it before it is suspended. */
    MHD_suspend_connection(st->req.conn);
    st->next = NULL;
    if (p->tail)
        p->tail->next = st;
    else
        p->head = st;
    p->tail = st;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static int req_done(struct http_pool *p, struct req_state *st)
{
    pthread_mutex_lock(&p->mu);
    int d = st->done;
    pthread_mutex_unlock(&p->mu);
    return d;
}

/* Drain and join; the queue stays usable (submit answers -1) until
 * pool_free, because MHD's threads may still call in until MHD stops. */
static void pool_stop(struct http_pool *p)
{
    if (!p->srv)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (long i = 0; i < p->nthreads; i++)
        pthread_join(p->tids[i], NULL);
    p->nthreads = 0;
}

static void pool_free(struct http_pool *p)
{
    if (!p->srv)
        return;
    free(p->tids);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->srv = NULL;
}

static int pool_start(struct http_pool *p, struct http_server *s, long n)
{
    p->tids = calloc((size_t)n, sizeof(*p->tids));
    if (!p->tids)
        return -1;
    p->srv = s;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (p->nthreads = 0; p->nthreads < n; p->nthreads++)
        if (pthread_create(&p->tids[p->nthreads], NULL, pool_main, p) != 0)
            return -1;   /* the caller stops and frees the started ones */
    return 0;
}

static int path_in(const char *const *list, const char *path)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], path) == 0)
            return 1;
    return 0;
}

static struct http_pool *pool_for(struct http_server *s, const char *path)
{
    for (int i = 0; s->control[i]; i++)
        if (strcmp(s->control[i], path) == 0)
            return &s->ctl;
    return &s->work;
}

/* ---- connection limits ---- */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn_info *ci = calloc(1, sizeof(*ci));
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !info) {
            free(ci);
            *socket_context = NULL;   /* no deadline for it; MHD's idle timeout stays */
            return;
        }
        ci->fd = info->connect_fd;
        atomic_store(&ci->since, util_now());
        atomic_store(&ci->reading, 1);
        pthread_mutex_lock(&s->conns_mu);
        ci->next = s->conns;
        if (s->conns)
            s->conns->prev = ci;
        s->conns = ci;
        pthread_mutex_unlock(&s->conns_mu);
        atomic_fetch_add(&s->nconns, 1);
        *socket_context = ci;
        return;
    }
    struct conn_info *ci = *socket_context;
    if (!ci)
        return;
    /* MHD closes the socket after this call: under conns_mu the reaper
     * never shuts down an fd that was already reused. */
    pthread_mutex_lock(&s->conns_mu);
    if (ci->prev)
        ci->prev->next = ci->next;
    else
        s->conns = ci->next;
    if (ci->next)
        ci->next->prev = ci->prev;
    pthread_mutex_unlock(&s->conns_mu);
    atomic_fetch_sub(&s->nconns, 1);
    free(ci);
    *socket_context = NULL;
}

static int server_busy(struct http_server *s)
{
    return atomic_load(&s->nconns) > HTTP_MAX_CONNS - HTTP_RESERVED_CONNS;
}

/* Every 100 ms: shut down (both ways) each connection still reading a
 * request past its deadline; MHD sees the socket end and closes it on its
 * own thread. */
static void *reaper_main(void *arg)
{
    struct http_server *s = arg;
    struct timespec nap = {0, 100 * 1000000L};
    while (!atomic_load(&s->reaper_stop)) {
        nanosleep(&nap, NULL);
        double limit = (server_busy(s) ? HTTP_READ_DEADLINE_BUSY_MS : HTTP_READ_DEADLINE_MS) / 1000.0;
        double now = util_now();
        pthread_mutex_lock(&s->conns_mu);
        for (struct conn_info *ci = s->conns; ci; ci = ci->next)
            if (!ci->cut && atomic_load(&ci->reading) && now - atomic_load(&ci->since) > limit) {
                shutdown(ci->fd, SHUT_RDWR);
                ci->cut = 1;
            }
        pthread_mutex_unlock(&s->conns_mu);
    }
    return NULL;
}

static struct conn_info *conn_info_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* MHD calls this several times per request: headers, body chunks, the end,
 * and once more after a worker resumed the connection. We answer only after
 * the first call: queueing on the first callback makes MHD 0.9.75 close the
 * connection every time (no keep-alive, ~5x slower). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct http_server *s = cls;
    struct req_state *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof(*st));
        if (!st)
            return MHD_NO;
        st->req.conn = conn;
        st->req.method = method;
        st->req.path = url;
        st->req.started = util_now();
        st->ci = conn_info_of(conn);
        *con_cls = st;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (append_body(st, upload_data, *upload_data_size) != 0)
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct http_pool *pool = pool_for(s, st->req.path);
    if (st->dispatched) {   /* a worker resumed us: its answer is ready */
        if (!req_done(pool, st))
            return MHD_YES;
        return send_resp(conn, &st->resp);
    }
    st->req.body = st->buf;
    if (st->ci)   /* the request is in: its read deadline no longer runs */
        atomic_store(&st->ci->reading, 0);
    if (edge_reject(st, &st->resp) == 0 && path_in(s->inline_paths, st->req.path)) {
        /* Never blocks: a hand-off would cost more than the answer. */
        run_handler(s, st);
    } else if (!st->resp.text && pool == &s->work && server_busy(s)) {
        /* The last HTTP_RESERVED_CONNS connections are for the control
         * paths: an orchestrator must still reach /healthz. */
        snprintf(st->resp.retry_after, sizeof(st->resp.retry_after), "1");
        http_error(&st->resp, 503, "backend_unavailable",
                   "too many open connections (%d); retry", HTTP_MAX_CONNS);
    } else if (!st->resp.text) {
        st->dispatched = 1;
        atomic_fetch_add(&s->unsent, 1);
        if (pool_submit(pool, st) == 0)
            return MHD_YES;
        atomic_fetch_sub(&s->unsent, 1);
        st->dispatched = 0;
        answer_stopping(&st->resp);
    }
    return send_resp(conn, &st->resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_server *s = cls;
    struct req_state *st = *con_cls;
    if (st && st->dispatched)
        atomic_fetch_sub(&s->unsent, 1);
    if (st && st->ci) {   /* keep-alive: the next request's deadline starts now */
        atomic_store(&st->ci->since, util_now());
        atomic_store(&st->ci->reading, 1);
    }
    if (st) {
        free(st->resp.text);
        free(st->buf);
        free(st);
    }
    *con_cls = NULL;
}

struct http_server *http_start(const char *bind_addr, long port, long threads,
                               const char *const *control, const char *const *inline_paths,
                               http_handler_fn fn, void *app, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "bad bind address '%s' (IPv4 expected)", bind_addr);
        return NULL;
    }
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->fn = fn;
    s->app = app;
    pthread_mutex_init(&s->conns_mu, NULL);
    for (int i = 0; control && control[i] && i < HTTP_MAX_CONTROL; i++)
        s->control[i] = control[i];
    for (int i = 0; inline_paths && inline_paths[i] && i < HTTP_MAX_CONTROL; i++)
        s->inline_paths[i] = inline_paths[i];
    atomic_store(&all_workers, threads);
    if (pool_start(&s->work, s, threads) != 0 ||
        pool_start(&s->ctl, s, HTTP_CONTROL_THREADS) != 0) {
        snprintf(err, errlen, "cannot start %ld worker threads", threads);
        goto err;
    }
    /* MHD's threads only read, parse and write; handlers run on the pools
     * above (suspend/resume), so a slow handler never holds up /healthz. */
    s->d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
            MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO | MHD_USE_ITC,
        (uint16_t)port, NULL, NULL, on_request, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)HTTP_IO_THREADS,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_MAX_CONNS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)HTTP_PER_CLIENT_CONNS,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)1024,
        MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%ld (port taken?)", bind_addr, port);
        goto err;
    }
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        snprintf(err, errlen, "cannot start the connection reaper thread");
        MHD_stop_daemon(s->d);
        goto err;
    }
    s->reaper_started = 1;
    return s;
err:
    pool_stop(&s->work);
    pool_stop(&s->ctl);
    pool_free(&s->work);
    pool_free(&s->ctl);
    pthread_mutex_destroy(&s->conns_mu);
    free(s);
    return NULL;
}

void http_stop(struct http_server *s)
{
    if (!s)
        return;
    /* Stop accepting first (the listen socket closes: a new connection is
     * refused and goes to another instance). Then the workers: what they
     * hold finishes within its deadline and is resumed, what waits in the
     * queue is answered 503 at once, requests that arrive meanwhile on open
     * connections get 503 on MHD's thread. Then no connection is left
     * suspended when MHD stops. */
    MHD_socket lfd = MHD_quiesce_daemon(s->d);
    /* shutdown, not close: it stops the listening at once (a connect is
     * refused) but keeps the descriptor, which MHD's threads may still be
     * taking out of their epoll sets; it is closed once they are gone. */
    if (lfd != MHD_INVALID_SOCKET)
        shutdown(lfd, SHUT_RDWR);
    pool_stop(&s->work);
    pool_stop(&s->ctl);
    /* The workers are done, but MHD's threads may still be sending what
     * they answered: stopping MHD now would close those connections with
     * the answer unsent (a sale made, its client told nothing). Bounded:
     * a client that does not read its answer cannot hold the stop. */
    struct timespec nap = {0, 5 * 1000000L};
    for (int i = 0; i < HTTP_STOP_FLUSH_MS / 5 && atomic_load(&s->unsent) > 0; i++)
        nanosleep(&nap, NULL);
    MHD_stop_daemon(s->d);
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    if (s->reaper_started) {
        atomic_store(&s->reaper_stop, 1);
        pthread_join(s->reaper, NULL);
    }
    pool_free(&s->work);
    pool_free(&s->ctl);
    pthread_mutex_destroy(&s->conns_mu);
    free(s);
}
