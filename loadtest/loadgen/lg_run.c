/* The load engine (see lg_run.h). One epoll loop per thread; connections are
 * small state machines; timers are due times scanned lazily, so the hot path
 * is recv -> parse -> count -> build -> send with no allocation. */
#include "lg_run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "lg_conf.h"
#include "lg_http.h"
#include "lg_oplog.h"
#include "lg_report.h"

#define LG_RBUF       65536
#define LG_EVENTS     256
#define LG_TICK_MS    100      /* longest sleep: how fast a stop is seen */
#define LG_BACKOFF_MIN_US 10000
#define LG_BACKOFF_MAX_US 500000

enum conn_state {
    C_DOWN,        /* no socket; reconnect at due */
    C_CONNECTING,  /* connect in progress; timeout at due */
    C_READY,       /* connected, no request in flight; open loop sends at due */
    C_BUSY,        /* request written or being written; timeout at due */
    C_FINISHED,    /* no more work, or gave up connecting */
};

struct lg_worker;

struct lg_conn {
    struct lg_worker *w;
    const struct lg_target *tgt;
    int fd;
    enum conn_state state;
    int want_out;            /* EPOLLOUT registered */
    int has_connected;
    uint64_t due;            /* 0: no timer */
    uint64_t start_us;       /* latency origin of the request in flight */
    double next_send;        /* open loop: intended time of the next request */
    uint64_t fail_since;     /* first connect failure in a row, 0 if none */
    uint64_t backoff_us;
    uint32_t id;             /* the connection's index: its process in --history */
    long op;                 /* its open --history operation, -1 if none */
    uint64_t seq;            /* {seq} of the request in flight */
    uint64_t req_rng;        /* the random state it was expanded from (--history) */
    unsigned attempt;        /* retries of it made so far (--retries) */
    int resend;              /* send it again as soon as connected */
    char *wbuf;
    size_t wlen, woff;
    struct lg_http_parser parser;
};

struct lg_worker {
    pthread_t tid;
    unsigned id;
    int epfd;
    const struct lg_plan *plan;
    struct lg_conn *conns;
    size_t nconns;
    size_t active;           /* connections not FINISHED */
    uint64_t next_due;
    uint64_t end_us;         /* 0: no duration bound */
    uint64_t finished_at;
    double interval_us;      /* open loop: per-connection spacing */
    uint64_t rng;
    char *body;              /* scratch for the expanded body */
    struct lg_stats stats;
    struct lg_oplog oplog;   /* --history: this thread's operations */
    struct lg_timeline tl;   /* this thread's seconds, merged after join */
    uint64_t tl_errors;      /* socket errors already put on the timeline */
    _Atomic uint64_t prog_requests, prog_errors;
    atomic_int done;
    char rbuf[LG_RBUF];
};

static atomic_int lg_stop_flag;
static _Atomic uint64_t lg_next_seq;
static uint64_t lg_start_us;

void lg_run_stop(void)
{
    atomic_store(&lg_stop_flag, 1);
}

uint64_t lg_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void set_due(struct lg_conn *c, uint64_t t)
{
    c->due = t;
    if (t && t < c->w->next_due)
        c->w->next_due = t;
}

static void publish(struct lg_worker *w)
{
    atomic_store_explicit(&w->prog_requests, w->stats.requests, memory_order_relaxed);
    atomic_store_explicit(&w->prog_errors, lg_stats_errors(&w->stats), memory_order_relaxed);
}

static void conn_close_fd(struct lg_conn *c)
{
    if (c->fd >= 0) {
        close(c->fd);   /* also drops it from the epoll set */
        c->fd = -1;
    }
    c->want_out = 0;
}

static void conn_finish(struct lg_conn *c)
{
    conn_close_fd(c);
    if (c->state != C_FINISHED) {
        c->state = C_FINISHED;
        c->due = 0;
        c->w->active--;
    }
}

static void conn_connect(struct lg_conn *c, uint64_t now);
static void conn_send(struct lg_conn *c, uint64_t now);
static void conn_resend(struct lg_conn *c, uint64_t now);

/* The request in flight got no answer (a timeout, a reset, a close): with
 * --retries left it is sent again once the connection is back. */
static void request_unanswered(struct lg_conn *c)
{
    struct lg_worker *w = c->w;
    if (c->state != C_BUSY || c->attempt >= w->plan->retries ||
        atomic_load_explicit(&lg_stop_flag, memory_order_relaxed))
        return;
    c->attempt++;
    c->resend = 1;
    w->stats.retries++;
}

/* A connect attempt failed: back off, or give up when a count-bounded run
 * has not been able to connect for a whole timeout. */
static void connect_failed(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    conn_close_fd(c);
    if (!c->fail_since)
        c->fail_since = now;
    if (!w->end_us && now - c->fail_since >= w->plan->timeout_us) {
        conn_finish(c);
        return;
    }
    c->backoff_us = c->backoff_us ? c->backoff_us * 2 : LG_BACKOFF_MIN_US;
    if (c->backoff_us > LG_BACKOFF_MAX_US)
        c->backoff_us = LG_BACKOFF_MAX_US;
    c->state = C_DOWN;
    set_due(c, now + c->backoff_us);
}

/* Drop the connection after an error or a close and open a new one; a
 * request in flight on it ends without an answer (why). */
static void conn_reset(struct lg_conn *c, uint64_t now, enum lg_op_fail why)
{
    if (c->op >= 0)
        lg_oplog_fail(&c->w->oplog, c->op, now, why);
    c->op = -1;
    conn_close_fd(c);
    c->state = C_DOWN;
    conn_connect(c, now);
}

static void conn_connect(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    if (c->has_connected)
        w->stats.reconnects++;
    c->has_connected = 1;
    int fd = socket(c->tgt->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        w->stats.err_connect++;
        connect_failed(c, now);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    if (connect(fd, (const struct sockaddr *)&c->tgt->addr, c->tgt->addrlen) != 0 &&
        errno != EINPROGRESS) {
        w->stats.err_connect++;
        connect_failed(c, now);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        w->stats.err_connect++;
        connect_failed(c, now);
        return;
    }
    c->want_out = 1;
    c->state = C_CONNECTING;
    set_due(c, now + w->plan->timeout_us);
}

static void want_out(struct lg_conn *c, int on)
{
    if (c->want_out == on)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = on;
}

/* Connected, nothing in flight: send now (closed loop, or open loop behind
 * schedule) or wait for the intended time. */
static void conn_idle(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    c->state = C_READY;
    if (atomic_load_explicit(&lg_stop_flag, memory_order_relaxed)) {
        c->due = 0;
        return;
    }
    if (c->resend) {   /* a retry is not a new request: no slot, no schedule */
        c->due = 0;
        conn_resend(c, now);
        return;
    }
    const struct lg_plan *p = w->plan;
    if (p->requests &&
        atomic_load_explicit(&lg_next_seq, memory_order_relaxed) - p->seq_start >= p->requests) {
        conn_finish(c);   /* every request is claimed: don't wait for a slot */
        return;
    }
    if (w->interval_us > 0 && c->next_send > (double)now) {
        set_due(c, (uint64_t)ceil(c->next_send));
        return;
    }
    c->due = 0;
    conn_send(c, now);
}

static void conn_write(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n > 0) {
            c->woff += (size_t)n;
            w->stats.bytes_written += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            want_out(c, 1);
            return;
        }
        w->stats.err_write++;
        publish(w);
        request_unanswered(c);
        conn_reset(c, now, LG_OP_WRITE);
        return;
    }
    want_out(c, 0);
}

/* Expand the request of seq into c->wbuf; -1 when it does not fit (which
 * cannot happen: buffers are sized by max_len). */
static long build_request(struct lg_conn *c, uint64_t seq)
{
    struct lg_worker *w = c->w;
    const struct lg_plan *p = w->plan;
    struct lg_tmpl_vars v = {.seq = seq, .thread = w->id, .rng = &w->rng};
    long blen = 0;
    if (p->body)
        blen = lg_tmpl_expand(p->body, &v, w->body, p->body->max_len);
    long hlen = lg_tmpl_expand(c->tgt->head, &v, c->wbuf, p->req_max);
    if (hlen < 0 || blen < 0)
        return -1;
    size_t o = (size_t)hlen;
    if (p->send_clen) {
        o += lg_put_dec(c->wbuf + o, (uint64_t)blen);
        memcpy(c->wbuf + o, "\r\n\r\n", 4);
        o += 4;
        memcpy(c->wbuf + o, w->body, (size_t)blen);
        o += (size_t)blen;
    }
    return (long)o;
}

/* c->wbuf[0..wlen) is the request: put it on the wire. */
static void start_request(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    lg_tl_sent(&w->tl, now);
    lg_http_init(&c->parser, w->plan->head_method);
    c->woff = 0;
    c->state = C_BUSY;
    set_due(c, now + w->plan->timeout_us);
    conn_write(c, now);
}

static void conn_send(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    const struct lg_plan *p = w->plan;
    uint64_t seq = atomic_fetch_add_explicit(&lg_next_seq, 1, memory_order_relaxed);
    if (p->requests && seq - p->seq_start >= p->requests) {
        conn_finish(c);
        return;
    }
    if (p->history)
        c->op = lg_oplog_begin(&w->oplog, c->id, seq, w->rng, now);
    c->req_rng = w->rng;
    long len = build_request(c, seq);
    if (len < 0) {
        conn_finish(c);
        return;
    }
    c->seq = seq;
    c->attempt = 0;
    c->wlen = (size_t)len;
    if (w->interval_us > 0) {
        /* wrk2: latency counts from when the request should have gone out */
        c->start_us = (uint64_t)c->next_send;
        c->next_send += w->interval_us;
    } else {
        c->start_us = now;
    }
    start_request(c, now);
}

/* Send the request in flight again (--retries). Its latency still counts
 * from the first attempt, as the client waits from there. The same bytes,
 * or with --retry-new-ids the templates expanded again, as a client that
 * rebuilds its request does: the same {seq} (the same buyer and item), new
 * {uuid}, {rand} and {zipf} draws (an order_id made of them is new). */
static void conn_resend(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    const struct lg_plan *p = w->plan;
    c->resend = 0;
    uint64_t seq = c->seq;
    if (p->retry_new_ids) {
        c->req_rng = w->rng;
        long len = build_request(c, seq);
        if (len < 0) {
            conn_finish(c);
            return;
        }
        c->wlen = (size_t)len;
    }
    if (p->history)   /* each attempt is an operation of its own */
        c->op = lg_oplog_begin(&w->oplog, c->id, seq, c->req_rng, now);
    start_request(c, now);
}

static void response_done(struct lg_conn *c, uint64_t now)
{
    struct lg_worker *w = c->w;
    struct lg_stats *s = &w->stats;
    s->requests++;
    lg_stats_status(s, c->parser.status);
    char code[LG_CODE_LEN];
    if (c->parser.body_len &&
        lg_http_error_code(c->parser.body, c->parser.body_len, code, sizeof code))
        lg_stats_code(s, code);
    lg_hist_record(&s->latency, now > c->start_us ? now - c->start_us : 0);
    lg_tl_response(&w->tl, now, c->parser.status, now > c->start_us ? now - c->start_us : 0);
    if (c->op >= 0)
        lg_oplog_answer(&w->oplog, c->op, now, c->parser.status, c->parser.body,
                        c->parser.body_len);
    c->op = -1;
    publish(w);
    if (c->parser.conn_close) {
        conn_reset(c, now, LG_OP_ANSWERED);
        return;
    }
    conn_idle(c, now);
}

static void conn_readable(struct lg_conn *c)
{
    struct lg_worker *w = c->w;
    for (;;) {
        ssize_t n = recv(c->fd, w->rbuf, sizeof w->rbuf, 0);
        uint64_t now = lg_now_us();
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            w->stats.err_read++;
            publish(w);
            request_unanswered(c);
            conn_reset(c, now, LG_OP_READ);
            return;
        }
        if (n == 0) {
            if (c->state == C_BUSY) {
                if (lg_http_eof(&c->parser) == LG_HTTP_DONE) {
                    c->parser.conn_close = 1;
                    response_done(c, now);
                    return;
                }
                w->stats.err_read++;
                publish(w);
                request_unanswered(c);
            }
            conn_reset(c, now, LG_OP_READ);   /* idle keep-alive closed by the server */
            return;
        }
        w->stats.bytes_read += (uint64_t)n;
        size_t off = 0;
        while (off < (size_t)n) {
            if (c->state != C_BUSY) {
                /* bytes nobody asked for: the stream is out of step */
                w->stats.err_parse++;
                publish(w);
                conn_reset(c, now, LG_OP_PARSE);
                return;
            }
            size_t used;
            int r = lg_http_feed(&c->parser, w->rbuf + off, (size_t)n - off, &used);
            off += used;
            if (r == LG_HTTP_ERR) {
                w->stats.err_parse++;
                publish(w);
                conn_reset(c, now, LG_OP_PARSE);
                return;
            }
            if (r == LG_HTTP_MORE)
                break;
            if (off < (size_t)n) {
                /* we never pipeline, so bytes after a whole response mean
                 * the stream is out of step: count the response, drop it */
                c->parser.conn_close = 1;
                response_done(c, now);
                w->stats.err_parse++;
                publish(w);
                return;
            }
            response_done(c, now);
            return;   /* next request sent (or reconnecting): wait for epoll */
        }
        if ((size_t)n < sizeof w->rbuf)
            return;   /* level-triggered epoll reports the rest */
        /* buffer was full: read on, the response is not complete yet */
    }
}

static void conn_connected(struct lg_conn *c, uint64_t now)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
        c->w->stats.err_connect++;
        publish(c->w);
        connect_failed(c, now);
        return;
    }
    c->fail_since = 0;
    c->backoff_us = 0;
    want_out(c, 0);
    conn_idle(c, now);
}

static void on_event(struct lg_conn *c, uint32_t ev)
{
    uint64_t now = lg_now_us();
    if (c->fd < 0)
        return;
    switch (c->state) {
    case C_CONNECTING:
        if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            conn_connected(c, now);
        return;
    case C_BUSY:
        if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
            conn_readable(c);
            if (c->state != C_BUSY || c->fd < 0)
                return;
        }
        if ((ev & EPOLLOUT) && c->woff < c->wlen)
            conn_write(c, now);
        return;
    case C_READY:
        if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
            conn_readable(c);   /* a close, or stray bytes: both reset */
        return;
    default:
        return;
    }
}

/* Fire every due timer and recompute the earliest one. */
static void service_timers(struct lg_worker *w, uint64_t now)
{
    w->next_due = UINT64_MAX;
    for (size_t i = 0; i < w->nconns; i++) {
        struct lg_conn *c = &w->conns[i];
        if (c->due && c->due <= now) {
            c->due = 0;
            switch (c->state) {
            case C_DOWN:
                conn_connect(c, now);
                break;
            case C_CONNECTING:
                w->stats.err_timeout++;
                publish(w);
                connect_failed(c, now);
                break;
            case C_BUSY:
                w->stats.err_timeout++;
                publish(w);
                request_unanswered(c);
                conn_reset(c, now, LG_OP_TIMEOUT);
                break;
            case C_READY:
                conn_send(c, now);
                break;
            default:
                break;
            }
        }
        if (c->due && c->due < w->next_due)
            w->next_due = c->due;
    }
}

static atomic_int lg_no_pwait2;

/* epoll_pwait2 wakes an open-loop timer to the microsecond; epoll_wait's
 * millisecond would add up to 1 ms of false latency to every request. */
static int wait_events(int epfd, struct epoll_event *evs, uint64_t wait_us)
{
    if (!atomic_load_explicit(&lg_no_pwait2, memory_order_relaxed)) {
        struct timespec ts = {(time_t)(wait_us / 1000000), (long)(wait_us % 1000000) * 1000};
        int n = epoll_pwait2(epfd, evs, LG_EVENTS, &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        atomic_store(&lg_no_pwait2, 1);
    }
    return epoll_wait(epfd, evs, LG_EVENTS, (int)((wait_us + 999) / 1000));
}

/* Socket errors are counted where they happen, in many places; they reach
 * the timeline here, at most one loop turn (<= 100 ms) late. */
static void timeline_errors(struct lg_worker *w, uint64_t now)
{
    uint64_t e = lg_stats_errors(&w->stats);
    lg_tl_errors(&w->tl, now, e - w->tl_errors);
    w->tl_errors = e;
}

static void *worker_main(void *arg)
{
    struct lg_worker *w = arg;
    struct epoll_event evs[LG_EVENTS];
    uint64_t now = lg_now_us();
    w->next_due = UINT64_MAX;
    for (size_t i = 0; i < w->nconns; i++)
        conn_connect(&w->conns[i], now);
    while (w->active > 0 && !atomic_load_explicit(&lg_stop_flag, memory_order_relaxed)) {
        now = lg_now_us();
        if (w->end_us && now >= w->end_us)
            break;
        if (now >= w->next_due) {
            service_timers(w, now);
            if (w->active == 0)
                break;
        }
        if (w->plan->requests && w->interval_us > 0 &&
            atomic_load_explicit(&lg_next_seq, memory_order_relaxed) - w->plan->seq_start >=
                w->plan->requests) {
            /* open loop, all requests claimed: idle connections need not
             * wait for their next slot to learn it */
            for (size_t i = 0; i < w->nconns; i++)
                if (w->conns[i].state == C_READY)
                    conn_finish(&w->conns[i]);
            if (w->active == 0)
                break;
        }
        uint64_t wake = w->next_due;
        if (w->end_us && w->end_us < wake)
            wake = w->end_us;
        uint64_t wait_us = wake > now ? wake - now : 0;
        uint64_t tick = w->plan->requests && w->interval_us > 0 ? 10000 : LG_TICK_MS * 1000;
        if (wait_us > tick)
            wait_us = tick;
        int n = wait_events(w->epfd, evs, wait_us);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++)
            on_event(evs[i].data.ptr, evs[i].events);
        timeline_errors(w, lg_now_us());
    }
    w->finished_at = lg_now_us();
    for (size_t i = 0; i < w->nconns; i++) {
        /* sent, never answered: it may still take effect after the end */
        if (w->conns[i].state == C_BUSY)
            w->stats.in_flight++;
        lg_oplog_fail(&w->oplog, w->conns[i].op, w->finished_at, LG_OP_IN_FLIGHT);
        w->conns[i].op = -1;
    }
    timeline_errors(w, w->finished_at);
    publish(w);
    atomic_store(&w->done, 1);
    return NULL;
}

static void progress_line(struct lg_worker *ws, unsigned nw, uint64_t now,
                          uint64_t *last_req, uint64_t *last_t)
{
    uint64_t req = 0, err = 0;
    for (unsigned i = 0; i < nw; i++) {
        req += atomic_load_explicit(&ws[i].prog_requests, memory_order_relaxed);
        err += atomic_load_explicit(&ws[i].prog_errors, memory_order_relaxed);
    }
    double dt = (double)(now - *last_t) / 1e6;
    lg_report_progress(stderr, (double)(now - lg_start_us) / 1e6, req,
                       dt > 0 ? (double)(req - *last_req) / dt : 0, err);
    *last_req = req;
    *last_t = now;
}

int lg_run(const struct lg_plan *plan, struct lg_stats *out, double *elapsed_s)
{
    unsigned nw = plan->threads;
    int rc = -1;
    size_t started = 0;
    struct lg_worker *ws = calloc(nw, sizeof *ws);
    struct lg_conn *conns = calloc(plan->connections, sizeof *conns);
    char *wbufs = malloc((size_t)plan->connections * plan->req_max);
    lg_stats_init(out);
    *elapsed_s = 0;
    if (plan->timeline)
        lg_tl_init(plan->timeline, 0);
    if (!ws || !conns || !wbufs) {
        fprintf(stderr, "loadgen: out of memory for %u connections\n", plan->connections);
        goto out;
    }
    lg_raise_nofile(plan->connections);
    atomic_store(&lg_stop_flag, 0);
    atomic_store(&lg_next_seq, plan->seq_start);
    lg_start_us = lg_now_us();
    if (plan->timeline)
        plan->timeline->start_us = lg_start_us;
    double interval = plan->rate > 0 ? 1e6 * plan->connections / plan->rate : 0;
    size_t ci = 0;
    for (unsigned i = 0; i < nw; i++) {
        struct lg_worker *w = &ws[i];
        w->id = i;
        w->plan = plan;
        w->epfd = -1;
        w->rng = lg_rand_seed((plan->seed ? plan->seed : lg_start_us ^ (uint64_t)getpid()) ^
                              ((uint64_t)i << 32));
        w->interval_us = interval;
        w->end_us = plan->duration_us ? lg_start_us + plan->duration_us : 0;
        w->nconns = plan->connections / nw + (i < plan->connections % nw);
        w->conns = conns + ci;
        w->active = w->nconns;
        lg_stats_init(&w->stats);
        lg_tl_init(&w->tl, lg_start_us);
        for (size_t k = 0; k < w->nconns; k++, ci++) {
            struct lg_conn *c = &conns[ci];
            c->w = w;
            c->fd = -1;
            c->id = (uint32_t)ci;
            c->op = -1;
            c->tgt = &plan->targets[ci % plan->ntargets];
            c->wbuf = wbufs + ci * plan->req_max;
            /* spread first sends over one interval so connections do not
             * fire in lockstep */
            c->next_send = (double)lg_start_us + interval * (double)ci / plan->connections;
        }
    }
    for (unsigned i = 0; i < nw; i++) {
        struct lg_worker *w = &ws[i];
        w->body = malloc(plan->body ? plan->body->max_len : 1);
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (!w->body || w->epfd < 0) {
            fprintf(stderr, "loadgen: cannot set up thread %u\n", i);
            lg_run_stop();
            goto join;
        }
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            fprintf(stderr, "loadgen: cannot start thread %u\n", i);
            lg_run_stop();
            goto join;
        }
        started++;
    }
    uint64_t last_req = 0, last_t = lg_start_us, last_print = lg_start_us;
    for (;;) {
        unsigned ndone = 0;
        for (unsigned i = 0; i < nw; i++)
            ndone += (unsigned)atomic_load(&ws[i].done);
        if (ndone == nw)
            break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        uint64_t now = lg_now_us();
        if (plan->progress && now - last_print >= 1000000) {
            progress_line(ws, nw, now, &last_req, &last_t);
            last_print = now;
        }
    }
    rc = 0;
join:
    for (size_t i = 0; i < started; i++)
        pthread_join(ws[i].tid, NULL);
    if (plan->progress)
        fprintf(stderr, "\r\033[K");
    uint64_t end = lg_start_us;
    for (size_t i = 0; i < started; i++) {
        lg_stats_merge(out, &ws[i].stats);
        if (plan->timeline && lg_tl_merge(plan->timeline, &ws[i].tl) != 0)
            fprintf(stderr, "loadgen: out of memory for the timeline\n");
        if (ws[i].finished_at > end)
            end = ws[i].finished_at;
    }
    if (plan->history) {
        struct lg_oplog_part parts[256];   /* --threads <= 256 */
        for (size_t i = 0; i < started && i < 256; i++)
            parts[i] = (struct lg_oplog_part){&ws[i].oplog, ws[i].id, ws[i].body};
        if (lg_oplog_write_file(plan->history, parts, started, plan->body) != 0)
            rc = -1;
    }
    if (plan->duration_us && end - lg_start_us > plan->duration_us &&
        !atomic_load(&lg_stop_flag))
        end = lg_start_us + plan->duration_us;
    *elapsed_s = (double)(end - lg_start_us) / 1e6;
out:
    for (size_t i = 0; ws && i < nw; i++) {
        if (ws[i].epfd >= 0 || ws[i].body) {
            for (size_t k = 0; k < ws[i].nconns; k++)
                conn_close_fd(&ws[i].conns[k]);
        }
        if (ws[i].epfd > 0)
            close(ws[i].epfd);
        free(ws[i].body);
        lg_oplog_free(&ws[i].oplog);
        lg_tl_free(&ws[i].tl);
    }
    free(wbufs);
    free(conns);
    free(ws);
    return rc;
}
