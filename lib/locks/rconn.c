/* Redis connections: connect with timeouts, per-endpoint idle pools, cached Lua scripts. */
#include "rconn.h"
#include "rconn_sentinel.h"
#include "rconn_resolve.h"

#include "base/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CONNECT_TIMEOUT_DEF 500
#define CMD_TIMEOUT_DEF     1000

struct rconn_pool {
    struct rconn_endpoint *ep;
    int own_ep;                         /* rconn_pool_new_addr made it */
    int connect_timeout_ms, cmd_timeout_ms;
    pthread_mutex_t mu;
    redisContext *idle[RCONN_IDLE_MAX]; /* a stack: the warmest on top */
    int nidle;
};

/* err/errlen are optional everywhere: callers that only need the status
 * pass NULL. */
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int rconn_readonly(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0;
}

redisContext *rconn_connect(struct rconn_endpoint *ep, int connect_timeout_ms,
                            int cmd_timeout_ms, char *errbuf, size_t errlen)
{
    struct timeval ct = { connect_timeout_ms / 1000, (connect_timeout_ms % 1000) * 1000 };
    struct timeval rt = { cmd_timeout_ms / 1000, (cmd_timeout_ms % 1000) * 1000 };
    char host[128], ip[64];
    int port;
    /* With Sentinel, the configured endpoint stands for "the master". */
    rconn_endpoint_route(ep, host, sizeof host, &port);
    /* hiredis resolves inside its connect, outside connect_timeout: a name
     * whose resolver hangs (a stopped container under compose) would hold
     * the caller 10 s and more. Resolve within the connect bound first,
     * then connect to the address with what is left of it. */
    int64_t t0 = util_now_ms();
    char rerr[128];
    if (rconn_resolve(host, connect_timeout_ms, ip, sizeof ip, rerr, sizeof rerr) != 0) {
        set_err(errbuf, errlen, "redis %s:%d: %s", host, port, rerr);
        return NULL;
    }
    long long left = connect_timeout_ms - (long long)(util_now_ms() - t0);
    if (left < 1)
        left = 1;
    ct.tv_sec = (time_t)(left / 1000);
    ct.tv_usec = (suseconds_t)(left % 1000) * 1000;
    redisContext *ctx = redisConnectWithTimeout(ip, port, ct);

    if (!ctx) {
        set_err(errbuf, errlen, "redis %s:%d: out of memory", host, port);
        return NULL;
    }
    /* Without the read timeout a hung server would block the caller forever. */
    if (ctx->err || redisSetTimeout(ctx, rt) != REDIS_OK) {
        set_err(errbuf, errlen, "redis %s:%d: %s", host, port,
                ctx->errstr[0] ? ctx->errstr : "cannot set timeout");
        redisFree(ctx);
        return NULL;
    }
    /* The context names the host it was asked for, not the address it
     * resolved to: rconn_endpoint_moved compares it with the name the
     * Sentinels give. hiredis allocates and frees tcp.host with malloc. */
    if (strcmp(ip, host) != 0 && ctx->tcp.host) {
        char *name = strdup(host);
        if (name) {
            free(ctx->tcp.host);
            ctx->tcp.host = name;
        }
    }
    return ctx;
}

/* ---- pool ------------------------------------------------------------- */

struct rconn_pool *rconn_pool_new(struct rconn_endpoint *ep, int connect_timeout_ms,
                                  int cmd_timeout_ms)
{
    struct rconn_pool *p = ep ? calloc(1, sizeof *p) : NULL;

    if (!p)
        return NULL;
    p->ep = ep;
    p->connect_timeout_ms = connect_timeout_ms > 0 ? connect_timeout_ms : CONNECT_TIMEOUT_DEF;
    p->cmd_timeout_ms = cmd_timeout_ms > 0 ? cmd_timeout_ms : CMD_TIMEOUT_DEF;
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

struct rconn_pool *rconn_pool_new_addr(const char *host, int port, int connect_timeout_ms,
                                       int cmd_timeout_ms)
{
    struct rconn_endpoint *ep = rconn_endpoint_new(host, port, NULL, NULL, NULL, 0);
    struct rconn_pool *p = rconn_pool_new(ep, connect_timeout_ms, cmd_timeout_ms);
    if (!p) {
        rconn_endpoint_free(ep);
        return NULL;
    }
    p->own_ep = 1;
    return p;
}

struct rconn_endpoint *rconn_pool_endpoint(const struct rconn_pool *p)
{
    return p->ep;
}

/* Close every idle context. The frees happen outside the mutex: closing a
 * socket can take a while and other threads should not wait on it. */
static void pool_flush(struct rconn_pool *p)
{
    redisContext *all[RCONN_IDLE_MAX];
    int n;

    pthread_mutex_lock(&p->mu);
    n = p->nidle;
    memcpy(all, p->idle, sizeof(all[0]) * (size_t)n);
    p->nidle = 0;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++)
        redisFree(all[i]);
}

void rconn_pool_free(struct rconn_pool *p)
{
    if (!p)
        return;
    pool_flush(p);
    pthread_mutex_destroy(&p->mu);
    if (p->own_ep)
        rconn_endpoint_free(p->ep);
    free(p);
}

const char *rconn_pool_addr(const struct rconn_pool *p)
{
    return p ? rconn_endpoint_addr(p->ep) : "";
}

int rconn_alive(const redisContext *ctx)
{
    char b;
    ssize_t n;

    if (!ctx || ctx->err || ctx->fd < 0)
        return 0;
    do
        n = recv(ctx->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    /* 0 is the server's FIN (a restart closed it), > 0 bytes nobody asked
     * for: neither connection can carry our next command. */
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

redisContext *rconn_get(struct rconn_pool *p, char *errbuf, size_t errlen)
{
    redisContext *ctx = NULL;

    pthread_mutex_lock(&p->mu);
    if (p->nidle > 0)
        ctx = p->idle[--p->nidle];
    pthread_mutex_unlock(&p->mu);
    /* After a Redis restart every idle context is dead, and the first
     * command on one would fail although Redis is back (a lock acquire then
     * answers 503). The kernel already knows: check before handing it out,
     * and drop the whole pool with it. */
    if (ctx && !rconn_alive(ctx)) {
        redisFree(ctx);
        pool_flush(p);
        ctx = NULL;
    }
    /* Sentinel named another master since this one was opened (a failover
     * while the old master kept our socket open): every idle one is stale. */
    if (ctx && rconn_endpoint_moved(p->ep, ctx->tcp.host, ctx->tcp.port)) {
        redisFree(ctx);
        pool_flush(p);
        ctx = NULL;
    }
    if (ctx)
        return ctx;
    ctx = rconn_connect(p->ep, p->connect_timeout_ms, p->cmd_timeout_ms, errbuf, errlen);
    /* The master we knew is gone: ask the Sentinels now and try the one
     * they name, once, rather than fail this call and the next few. */
    if (!ctx && rconn_endpoint_followed(p->ep)) {
        rconn_endpoint_invalidate(p->ep);
        ctx = rconn_connect(p->ep, p->connect_timeout_ms, p->cmd_timeout_ms, errbuf, errlen);
    }
    return ctx;
}

/* A broken context is freed, and so is every idle one: after a Redis
 * restart they are all dead, and the next call should reconnect rather
 * than find out one stale context at a time. */
static void pool_drop(struct rconn_pool *p, redisContext *ctx)
{
    rconn_endpoint_invalidate(p->ep);   /* maybe a failover: ask before reconnecting */
    redisFree(ctx);
    pool_flush(p);
}

void rconn_put(struct rconn_pool *p, redisContext *ctx)
{
    if (!ctx)
        return;
    if (ctx->err) {
        pool_drop(p, ctx);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (p->nidle < RCONN_IDLE_MAX) {
        p->idle[p->nidle++] = ctx;
        ctx = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    if (ctx)
        redisFree(ctx);   /* pool full: more threads than we keep warm */
}

/* ---- scripts ---------------------------------------------------------- */

/* Guards the one-time SHA write of every script; readers after that only
 * need the acquire load of ->ready. */
static pthread_mutex_t script_mu = PTHREAD_MUTEX_INITIALIZER;

/* SCRIPT LOAD once per process. NULL or an odd reply is returned to the
 * caller as the script's result (the reply is the caller's to free). */
static redisReply *script_load(redisContext *ctx, struct rconn_script *s)
{
    redisReply *r = redisCommand(ctx, "SCRIPT LOAD %s", s->src);

    if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
        return r;
    pthread_mutex_lock(&script_mu);
    if (!atomic_load_explicit(&s->ready, memory_order_relaxed)) {
        memcpy(s->sha, r->str, 40);
        s->sha[40] = '\0';
        atomic_store_explicit(&s->ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&script_mu);
    freeReplyObject(r);
    return NULL;
}

/* Report a call that cannot be sent the way a failed one is: NULL with
 * ctx->err set. The context is then given up, which is harmless. */
static redisReply *refuse(redisContext *ctx, int code, const char *why)
{
    ctx->err = code;
    snprintf(ctx->errstr, sizeof ctx->errstr, "%s", why);
    return NULL;
}

redisReply *rconn_script_run(redisContext *ctx, struct rconn_script *s, int nkeys,
                             int argc, const char **argv)
{
    const char *stack[3 + RCONN_SCRIPT_ARGS_MAX], **av = stack;
    char nk[16];
    redisReply *r;

    if (argc < 0 || nkeys < 0 || nkeys > argc)
        return refuse(ctx, REDIS_ERR_OTHER, "bad script call: more keys than arguments");
    if (!atomic_load_explicit(&s->ready, memory_order_acquire)) {
        r = script_load(ctx, s);
        if (r || ctx->err)
            return r;
    }
    /* The stack array covers every lock script; a longer call (a guard
     * spreading stock over many keys) still works, from the heap. */
    if (argc > RCONN_SCRIPT_ARGS_MAX && !(av = malloc(sizeof *av * (size_t)(3 + argc))))
        return refuse(ctx, REDIS_ERR_OOM, "Out of memory");
    snprintf(nk, sizeof nk, "%d", nkeys);
    av[0] = "EVALSHA";
    av[1] = s->sha;
    av[2] = nk;
    for (int i = 0; i < argc; i++)
        av[3 + i] = argv[i];
    r = redisCommandArgv(ctx, 3 + argc, av, NULL);
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        /* Server restarted or SCRIPT FLUSH: EVAL also re-caches it there. */
        freeReplyObject(r);
        av[0] = "EVAL";
        av[1] = s->src;
        r = redisCommandArgv(ctx, 3 + argc, av, NULL);
    }
    if (av != stack)
        free(av);
    return r;
}

/* ---- one command on a pooled context ---------------------------------- */

/* What to send: a format with its arguments, an argv, or a script. */
struct call {
    const char *fmt;
    va_list *ap;
    int argc;
    const char **argv;
    struct rconn_script *script;
    int nkeys;
};

static redisReply *call_send(redisContext *ctx, const struct call *c)
{
    if (c->script)
        return rconn_script_run(ctx, c->script, c->nkeys, c->argc, c->argv);
    if (c->fmt) {
        va_list ap;
        va_copy(ap, *c->ap);   /* a retry needs the arguments again */
        redisReply *r = redisvCommand(ctx, c->fmt, ap);
        va_end(ap);
        return r;
    }
    return redisCommandArgv(ctx, c->argc, c->argv, NULL);
}

static redisReply *call_run(struct rconn_pool *p, char *err, size_t errlen,
                            const struct call *c)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        /* The retry connects afresh: another thread may have pooled a
         * context that is just as dead as ours. */
        redisContext *ctx = attempt == 0
            ? rconn_get(p, err, errlen)
            : rconn_connect(p->ep, p->connect_timeout_ms, p->cmd_timeout_ms, err, errlen);
        if (!ctx)
            return NULL;
        redisReply *r = call_send(ctx, c);
        if (r) {
            /* A write on a replica: the master we knew was demoted (it
             * came back after a failover). Ask Sentinel again before the
             * next connect, and drop this pool's connections to it. */
            if (rconn_readonly(r)) {
                rconn_endpoint_invalidate(p->ep);
                ctx->err = REDIS_ERR_OTHER;
            }
            rconn_put(p, ctx);
            if (r->type == REDIS_REPLY_ERROR) {
                set_err(err, errlen, "redis error: %.100s", r->str);
                freeReplyObject(r);
                return NULL;
            }
            return r;
        }
        set_err(err, errlen, "redis %s: %.80s", rconn_endpoint_addr(p->ep),
                ctx->errstr[0] ? ctx->errstr : "no reply");
        /* EOF on a kept connection: the server went away (restarted) before
         * our command reached it, so sending it again on a new connection
         * cannot apply it twice. A timeout might have, and is not retried. */
        int retry = ctx->err == REDIS_ERR_EOF;
        pool_drop(p, ctx);
        if (!retry)
            break;
    }
    return NULL;
}

redisReply *rconn_cmd(struct rconn_pool *p, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct call c = { .fmt = fmt, .ap = &ap };
    redisReply *r = call_run(p, err, errlen, &c);
    va_end(ap);
    return r;
}

redisReply *rconn_cmd_argv(struct rconn_pool *p, char *err, size_t errlen, int argc,
                           const char **argv)
{
    struct call c = { .argc = argc, .argv = argv };
    return call_run(p, err, errlen, &c);
}

redisReply *rconn_eval(struct rconn_pool *p, char *err, size_t errlen,
                       struct rconn_script *s, int nkeys, int argc, const char **argv)
{
    struct call c = { .script = s, .nkeys = nkeys, .argc = argc, .argv = argv };
    return call_run(p, err, errlen, &c);
}

int rconn_ping(struct rconn_pool *p, char *err, size_t errlen)
{
    redisReply *r = rconn_cmd(p, err, errlen, "PING");

    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}
