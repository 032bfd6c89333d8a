/* Bounded waiting for a busy lock: pub/sub wake-ups on release (shared per
 * process for the default lock, rlock_sub.c), jittered retry slices. */
#include "rlock_private.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#define WAIT_SLICE_MAX  100   /* ms: a lost notification costs at most this */
#define WAIT_SLICE_DEF  50    /* ms: when the holder's PTTL is unknown */

/* Subscribe a pooled connection to the lock's channel; NULL with l->err set. */
static redisContext *sub_open(struct rlock *l)
{
    char why[128];
    redisContext *ctx = rconn_get(l->client->pool, why, sizeof why);
    redisReply *r;
    const char *av[2] = { "SUBSCRIBE", l->chan };

    if (!ctx) {
        rlock_set_err(l, RLOCK_EUNAVAIL, "subscribe: %s", why);
        return NULL;
    }
    r = redisCommandArgv(ctx, 2, av, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
        rlock_reply_fail(l, ctx, r, "SUBSCRIBE");
        if (r)
            freeReplyObject(r);
        /* Its subscription state is unknown: never pool it. */
        redisFree(ctx);
        return NULL;
    }
    freeReplyObject(r);
    return ctx;
}

/* Unsubscribe and give the connection back (only if it is clean again). */
static void sub_close(struct rlock *l, redisContext *ctx)
{
    const char *av[1] = { "UNSUBSCRIBE" };
    int clean = 0;

    if (!ctx)
        return;
    if (!ctx->err && redisAppendCommandArgv(ctx, 1, av, NULL) == REDIS_OK) {
        /* Messages may still be queued ahead of the confirmation. */
        for (int i = 0; i < 256; i++) {
            redisReply *r = NULL;
            if (redisGetReply(ctx, (void **)&r) != REDIS_OK || !r)
                break;
            int done = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                       r->element[0]->type == REDIS_REPLY_STRING &&
                       strcmp(r->element[0]->str, "unsubscribe") == 0 &&
                       r->element[2]->type == REDIS_REPLY_INTEGER &&
                       r->element[2]->integer == 0;
            freeReplyObject(r);
            if (done) {
                clean = 1;
                break;
            }
        }
    }
    /* A context still subscribed would answer the next user's command
     * with channel messages: only a confirmed clean one goes back. */
    if (clean)
        rconn_put(l->client->pool, ctx);
    else
        redisFree(ctx);
}

/* Wait up to ms for a message. 1 woken, 0 slice over, <0 connection lost.
 * poll() rather than a socket timeout: in hiredis 0.14 a read timeout
 * leaves the context unusable. */
static int sub_wait(redisContext *ctx, long ms)
{
    void *reply = NULL;
    struct pollfd pfd = { .fd = ctx->fd, .events = POLLIN };
    int n;

    if (redisReaderGetReply(ctx->reader, &reply) != REDIS_OK)
        return RLOCK_EUNAVAIL;
    if (reply) {
        freeReplyObject(reply);
        return 1;
    }
    n = poll(&pfd, 1, (int)ms);
    if (n == 0 || (n < 0 && errno == EINTR))
        return 0;
    if (n < 0 || redisBufferRead(ctx) != REDIS_OK)
        return RLOCK_EUNAVAIL;
    if (redisReaderGetReply(ctx->reader, &reply) != REDIS_OK)
        return RLOCK_EUNAVAIL;
    if (reply)
        freeReplyObject(reply);
    return 1;   /* even a partial message means "something happened": retry */
}

static long wait_slice(long pttl, long remaining)
{
    long base = pttl > 0 ? pttl : WAIT_SLICE_DEF;
    long slice;

    if (base > WAIT_SLICE_MAX)
        base = WAIT_SLICE_MAX;
    /* 0.75x .. 1.25x so waiters woken together spread out again. */
    slice = base * 3 / 4 + (long)(util_rand() % (uint64_t)(base / 2 + 1));
    if (slice < 1)
        slice = 1;
    return slice < remaining ? slice : remaining;
}

/* The client's shared subscriptions, started on first use; NULL when
 * they could not start. */
static struct rlock_sub *shared_subs(struct rlock_client *c)
{
    pthread_mutex_lock(&c->sub_mu);
    if (!c->sub && !c->sub_failed) {
        c->sub = rlock_sub_new(c);
        c->sub_failed = !c->sub;
    }
    struct rlock_sub *s = c->sub;
    pthread_mutex_unlock(&c->sub_mu);
    return s;
}

/* The default lock: one subscription per channel per process, a release
 * wakes one waiter of it (rlock_sub.c). Notifications are reliable while
 * the listener's connection holds (a drop wakes every waiter), so a waiter
 * sleeps up to the holder's PTTL (a lock that expires publishes nothing),
 * capped at WAIT_SLICE_SHARED_MAX. */
#define WAIT_SLICE_SHARED_MAX 500   /* ms */

static int wait_shared(struct rlock *l, redisContext *ctx, int64_t deadline_us, long pttl,
                       struct rlock_sub *s, struct rlock_sub_entry *e, int queued)
{
    int rc;
    int64_t since = util_now_us();
    long remaining = (long)((deadline_us - since) / 1000);
    /* Subscribed first, then retried: no release can slip between. When
     * the confirmation is slow, short slices cover the gap. */
    int ready = remaining > 0 && rlock_sub_ready(s, e, remaining < WAIT_SLICE_MAX ? remaining : WAIT_SLICE_MAX);
    /* Joined behind waiters of our own on a live subscription: the lock
     * is busy and its release reaches us (rlock_sub_join); wait first. */
    int skip = queued && ready;
    for (;;) {
        rc = skip ? 0 : rlock_try_once(l, ctx, &pttl);
        skip = 0;
        if (rc != 0)
            break;
        remaining = (long)((deadline_us - util_now_us()) / 1000);
        if (remaining <= 0)
            break;
        long base = pttl > 0 ? pttl : WAIT_SLICE_DEF;
        long cap = ready ? WAIT_SLICE_SHARED_MAX : WAIT_SLICE_MAX;
        if (base > cap)
            base = cap;
        long slice = base * 3 / 4 + (long)(util_rand() % (uint64_t)(base / 2 + 1));
        if (slice < 1)
            slice = 1;
        int w = rlock_sub_wait(s, e, slice < remaining ? slice : remaining, since, l);
        if (w == 2) {   /* handed over by a holder of this process: ours */
            rc = 1;
            break;
        }
        if (w == 1) {
            atomic_fetch_add(&l->client->stats->notifications, 1);
            long y = (rlock_sub_yield_us(s, e) + 999) / 1000;   /* our run ended: others first */
            remaining = (long)((deadline_us - util_now_us()) / 1000);
            util_sleep_ms(y < remaining ? y : remaining);
        }
        if (!ready)
            ready = rlock_sub_ready(s, e, 0);
    }
    rlock_sub_leave(s, e);
    return rc;
}

int rlock_wait_acquire(struct rlock *l, redisContext *ctx, int64_t deadline_us, long pttl)
{
    if (!l->opts.fair) {
        struct rlock_sub *s = shared_subs(l->client);
        int queued = 0;
        struct rlock_sub_entry *e = s ? rlock_sub_join(s, l->chan, &queued) : NULL;
        if (e)
            return wait_shared(l, ctx, deadline_us, pttl, s, e, queued);
    }
    /* Fair (a channel per waiter) or no shared subscription: our own. */
    redisContext *sub = sub_open(l);
    int rc;

    if (!sub)
        return l->err;
    for (;;) {
        /* Subscribed first, then retried: no release can slip between. */
        rc = rlock_try_once(l, ctx, &pttl);
        if (rc != 0)
            break;
        long remaining = (long)((deadline_us - util_now_us()) / 1000);
        if (remaining <= 0)
            break;
        int w = sub_wait(sub, wait_slice(pttl, remaining));
        if (w < 0) {
            rc = rlock_set_err(l, RLOCK_EUNAVAIL, "subscription: %s",
                               sub->errstr[0] ? sub->errstr : "connection lost");
            redisFree(sub);
            sub = NULL;
            break;
        }
        if (w == 1)
            atomic_fetch_add(&l->client->stats->notifications, 1);
    }
    sub_close(l, sub);
    return rc;
}
