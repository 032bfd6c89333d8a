/* The lock handle: create it, read it, acquire it (one try, then a bounded wait). */
#include "rlock_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- scripts ---------------------------------------------------------- */

/* KEYS[1] lock, KEYS[2] fence counter, ARGV[1] ttl ms, ARGV[2] owner,
 * ARGV[3] "1" to fence. {1, count, token} or {0, holder pttl}. The token is
 * taken in the same script as the lock, so no other holder can come
 * between the grant and its token (0 when not fencing or nested: a nested
 * acquire keeps the first one's token). */
static struct rconn_script s_acquire_hash = RCONN_SCRIPT(
    "if redis.call('exists', KEYS[1]) == 0 or "
    "   redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  local f = 0 "
    "  if n == 1 and ARGV[3] == '1' then f = redis.call('incr', KEYS[2]) end "
    "  return {1, n, f} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}");

/* ---- errors ----------------------------------------------------------- */

int rlock_set_err(struct rlock *l, int code, const char *fmt, ...)
{
    va_list ap;

    l->err = code;
    va_start(ap, fmt);
    vsnprintf(l->errstr, sizeof l->errstr, fmt, ap);
    va_end(ap);
    if (code == RLOCK_EUNAVAIL)
        atomic_fetch_add(&l->client->stats->unavailable, 1);
    return code;
}

int rlock_reply_fail(struct rlock *l, redisContext *ctx, redisReply *r, const char *what)
{
    if (!r)
        return rlock_set_err(l, RLOCK_EUNAVAIL, "%s: redis %s", what,
                             ctx->errstr[0] ? ctx->errstr : "connection failed");
    if (r->type == REDIS_REPLY_ERROR)
        return rlock_set_err(l, RLOCK_ERR, "%s: %.100s", what, r->str);
    return rlock_set_err(l, RLOCK_ERR, "%s: unexpected reply type %d", what, r->type);
}

int rlock_grant_reply(struct rlock *l, redisContext *ctx, redisReply *r, const char *what,
                      long *pttl)
{
    int rc;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER ||
        (r->element[0]->integer == 1 &&
         (r->elements != 3 || r->element[2]->type != REDIS_REPLY_INTEGER))) {
        rc = rlock_reply_fail(l, ctx, r, what);
        if (r)
            freeReplyObject(r);
        return rc;
    }
    rc = r->element[0]->integer == 1;
    if (!rc)
        *pttl = (long)r->element[1]->integer;
    else if (r->element[1]->integer == 1)
        l->fence = (unsigned long long)r->element[2]->integer;
    freeReplyObject(r);
    return rc;
}

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

/* The simple kind: SET NX PX, or the seeds' SETNX + PEXPIRE. */
static int try_simple(struct rlock *l, redisContext *ctx, const char *ttl)
{
    redisReply *r;
    int rc;

    if (l->opts.acquire == RLOCK_ACQUIRE_SET_NX_PX) {
        const char *av[6] = { "SET", l->key, l->token, "NX", "PX", ttl };
        r = redisCommandArgv(ctx, 6, av, NULL);
        if (r && r->type == REDIS_REPLY_STATUS)
            rc = 1;
        else if (r && r->type == REDIS_REPLY_NIL)
            rc = 0;
        else
            rc = rlock_reply_fail(l, ctx, r, "SET NX PX");
    } else {
        const char *av[3] = { "SETNX", l->key, l->token };
        r = redisCommandArgv(ctx, 3, av, NULL);
        if (r && r->type == REDIS_REPLY_INTEGER) {
            rc = r->integer == 1;
            if (rc) {
                /* The seeds' mistake: a second command, not atomic. */
                const char *ev[3] = { "PEXPIRE", l->key, ttl };
                long gap = rlock_test_setnx_pause_ms();
                freeReplyObject(r);
                if (gap > 0) {   /* test knob: a crash here leaves a lock without TTL */
                    struct timespec ts = { gap / 1000, (gap % 1000) * 1000000L };
                    nanosleep(&ts, NULL);
                }
                r = redisCommandArgv(ctx, 3, ev, NULL);
                if (!r || r->type != REDIS_REPLY_INTEGER)
                    rc = rlock_reply_fail(l, ctx, r, "PEXPIRE");
            }
        } else {
            rc = rlock_reply_fail(l, ctx, r, "SETNX");
        }
    }
    if (r)
        freeReplyObject(r);
    return rc;
}

int rlock_try_once(struct rlock *l, redisContext *ctx, long *pttl)
{
    char ttl[24];
    redisReply *r;
    int rc;

    *pttl = -1;
    snprintf(ttl, sizeof ttl, "%ld", l->opts.ttl_ms);
    if (l->opts.fair)
        return rlock_fair_try(l, ctx, pttl);
    if (l->opts.kind == RLOCK_REENTRANT) {
        const char *av[5] = { l->key, l->fence_key, ttl, l->token,
                              l->opts.fencing ? "1" : "0" };
        r = rconn_script_run(ctx, &s_acquire_hash, 2, 5, av);
        return rlock_grant_reply(l, ctx, r, "acquire", pttl);
    }

    rc = try_simple(l, ctx, ttl);
    if (rc == 0) {
        /* The holder's PTTL bounds the wait slice: an expiring lock is
         * retried soon after, with no PUBLISH to wake us. */
        const char *av[2] = { "PTTL", l->key };
        r = redisCommandArgv(ctx, 2, av, NULL);
        if (r && r->type == REDIS_REPLY_INTEGER)
            *pttl = (long)r->integer;
        else
            rc = rlock_reply_fail(l, ctx, r, "PTTL");
        if (r)
            freeReplyObject(r);
    }
    return rc;
}

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
