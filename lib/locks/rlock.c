/* The lock handle: create it, read it, acquire it (one try, then a bounded wait). */
#include "rlock_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- handle ----------------------------------------------------------- */

struct rlock *rlock_new(struct rlock_client *c, const char *key,
                        const struct rlock_opts *o)
{
    struct rlock *l = calloc(1, sizeof *l);

    if (!l)
        return NULL;
    l->client = c;
    if (o)
        l->opts = *o;
    else
        rlock_opts_default(&l->opts);
    if (l->opts.acquire != RLOCK_ACQUIRE_SET_NX_PX ||
        l->opts.release != RLOCK_RELEASE_TOKEN_LUA)
        l->opts.kind = RLOCK_SIMPLE;
    util_make_token(l->token, sizeof l->token, c->instance);
    /* A refused handle keeps key "": every later call answers EINVAL. */
    if (!key || !*key || strlen(key) > RLOCK_KEY_MAX) {
        l->err = RLOCK_EINVAL;
        snprintf(l->errstr, sizeof l->errstr, "key empty or longer than %d", RLOCK_KEY_MAX);
        return l;
    }
    if (l->opts.ttl_ms < 1 || l->opts.ttl_ms > RLOCK_TTL_MAX ||
        (unsigned)l->opts.kind > RLOCK_SIMPLE ||
        (unsigned)l->opts.acquire > RLOCK_ACQUIRE_SETNX_THEN_EXPIRE ||
        (unsigned)l->opts.release > RLOCK_RELEASE_GET_THEN_DEL ||
        ((l->opts.fencing || l->opts.fair) && l->opts.kind != RLOCK_REENTRANT) ||
        l->opts.replicas_ack < 0 || l->opts.replicas_ack > 5 ||
        (l->opts.replicas_ack > 0 &&
         (l->opts.ack_timeout_ms < 1 || l->opts.ack_timeout_ms > 60000))) {
        l->err = RLOCK_EINVAL;
        snprintf(l->errstr, sizeof l->errstr, "bad lock options");
        return l;
    }
    snprintf(l->key, sizeof l->key, "%s", key);
    /* A fair waiter listens on a channel of its own: a release wakes the
     * next in line only, never every waiter. */
    if (l->opts.fair)
        snprintf(l->chan, sizeof l->chan, "rlock:chan:{%s}:%s", key, l->token);
    else
        snprintf(l->chan, sizeof l->chan, "rlock:chan:{%s}", key);
    snprintf(l->fence_key, sizeof l->fence_key, "%s:fence", key);
    snprintf(l->queue_key, sizeof l->queue_key, "%s:queue", key);
    snprintf(l->qtime_key, sizeof l->qtime_key, "%s:queue:t", key);
    return l;
}

int rlock_err(const struct rlock *l)         { return l ? l->err : RLOCK_EINVAL; }
const char *rlock_errstr(const struct rlock *l) { return l ? l->errstr : "no lock"; }
const char *rlock_key(const struct rlock *l)    { return l ? l->key : ""; }
const char *rlock_token(const struct rlock *l)  { return l ? l->token : ""; }
int rlock_depth(const struct rlock *l)          { return l ? l->depth : 0; }
unsigned long long rlock_fence(const struct rlock *l) { return l && l->depth ? l->fence : 0; }
long rlock_last_wait_ms(const struct rlock *l)  { return l ? l->last_wait_ms : 0; }
const struct rlock_opts *rlock_get_opts(const struct rlock *l) { return l ? &l->opts : NULL; }

/* ---- acquire ---------------------------------------------------------- */

/* WAIT on the connection that took the lock: how many replicas have it
 * (>= 0), or 0 with l->errstr set when WAIT itself failed (a broken
 * connection counts as no acknowledgement). */
static int wait_replicas(struct rlock *l, redisContext *ctx)
{
    char n[16], ms[24];
    snprintf(n, sizeof n, "%d", l->opts.replicas_ack);
    snprintf(ms, sizeof ms, "%ld", l->opts.ack_timeout_ms);
    const char *av[3] = { "WAIT", n, ms };
    redisReply *r = redisCommandArgv(ctx, 3, av, NULL);
    int acks = 0;

    l->errstr[0] = '\0';
    if (r && r->type == REDIS_REPLY_INTEGER)
        acks = (int)r->integer;
    else
        snprintf(l->errstr, sizeof l->errstr, "WAIT failed: %.80s",
                 r && r->type == REDIS_REPLY_ERROR ? r->str
                 : ctx->errstr[0]                  ? ctx->errstr
                                                   : "unexpected reply");
    if (r)
        freeReplyObject(r);
    return acks;
}

int rlock_acquire(struct rlock *l, long wait_ms)
{
    struct rlock_client *c;
    struct rlock_stats *st;
    redisContext *ctx;
    char why[128];
    int64_t t0 = util_now_us();
    long pttl;
    int rc, waited = 0;

    if (!l)
        return RLOCK_EINVAL;
    c = l->client;
    st = c->stats;
    if (rlock_bad_handle(l))
        return l->err = RLOCK_EINVAL;
    if (l->opts.kind == RLOCK_SIMPLE && l->depth > 0)
        return rlock_set_err(l, RLOCK_EINVAL, "simple lock is not reentrant");
    rlock_clear_err(l);
    l->last_wait_ms = 0;

    ctx = rconn_get(c->pool, why, sizeof why);
    if (!ctx)
        return rlock_set_err(l, RLOCK_EUNAVAIL, "%s", why);
    if (l->depth == 0)
        l->fence = 0;
    l->enqueue = wait_ms > 0;   /* a single try never joins a fair queue */
    rc = rlock_try_once(l, ctx, &pttl);
    if (rc == 0 && wait_ms > 0) {
        waited = 1;
        atomic_fetch_add(&st->waits, 1);
        rc = rlock_wait_acquire(l, ctx, t0 + (int64_t)wait_ms * 1000, pttl);
    }
    if (rc != 1 && l->opts.fair && wait_ms > 0 && !ctx->err)
        rlock_fair_leave(l, ctx);
    int acks = -1;
    if (rc == 1 && l->depth == 0 && l->opts.replicas_ack > 0)
        acks = wait_replicas(l, ctx);
    rconn_put(c->pool, ctx);

    if (waited) {
        int64_t us = util_now_us() - t0;
        atomic_fetch_add(&st->wait_us_total, (unsigned long long)us);
        l->last_wait_ms = (long)(us / 1000);
    }
    if (rc == 1 && acks >= 0 && acks < l->opts.replicas_ack) {
        /* Granted on the master only: a failover now would hand it to a
         * second holder. Give it back and say so. */
        char ackwhy[128];
        snprintf(ackwhy, sizeof ackwhy, "%s", l->errstr);
        l->depth = 1;
        rlock_release(l);
        l->fence = 0;
        return rlock_set_err(l, RLOCK_ENOACK,
                             "lock %s reached %d of %d replica(s) within %ld ms%s%s; released",
                             l->key, acks, l->opts.replicas_ack, l->opts.ack_timeout_ms,
                             ackwhy[0] ? ": " : "", ackwhy);
    }
    if (rc == 1) {
        if (++l->depth == 1 && l->opts.watchdog) {
            l->wd_lost_counted = 0;
            l->wd_id = rlock_wd_register(c, l);
        }
        atomic_fetch_add(&st->acquired, 1);
        return RLOCK_OK;
    }
    if (rc == 0) {
        atomic_fetch_add(&st->timeouts, 1);
        return rlock_set_err(l, RLOCK_TIMEOUT, "lock %s still held after %ld ms", l->key,
                             wait_ms > 0 ? wait_ms : 0);
    }
    return rc;
}

int rlock_is_lost(struct rlock *l)
{
    if (!l || !l->wd_id)
        return 0;
    return rlock_wd_lost(l->client, l->wd_id);
}
