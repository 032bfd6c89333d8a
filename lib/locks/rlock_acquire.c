/* Acquire a lock handle: one try, then a bounded wait, then the replica
 * acknowledgements (replicas_ack). Apart from rlock.c (the handle) because
 * a lock granted on too few replicas is given back at once, through
 * rlock_release.c: acquire -> release -> handle, one way. */
#include "rlock_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* The default lock with waiters of this process already queued on a
     * live subscription is busy: queue behind them rather than ask Redis
     * (their lock's release reaches the queue, rlock_sub_join). */
    struct rlock_sub *sub = l->opts.fair || wait_ms <= 0 ? NULL : rlock_sub_of(c);
    pttl = -1;
    if (sub && l->depth == 0 && rlock_sub_queued(sub, l->chan))
        rc = 0;
    else
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
    if (rc == 1 && l->handed) {
        /* A holder of this process handed it over: its token, lease and
         * watchdog registration are ours now (rlock_sub_handoff). */
        l->handed = 0;
        l->depth = 1;
        atomic_fetch_add(&st->handoffs, 1);
        atomic_fetch_add(&st->acquired, 1);
        return RLOCK_OK;
    }
    if (rc == 1) {
        if (l->depth == 0)
            l->granted_ms = l->try_ms;
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
