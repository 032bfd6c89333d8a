/* Releasing a lock: the hash script, the simple kind's three release modes, rlock_free. */
#include "rlock_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- scripts ---------------------------------------------------------- */

/* KEYS[1] lock, KEYS[2] channel, ARGV[1] ttl, ARGV[2] owner.
 * n > 0 still ours n times, 0 released, -1 not ours. */
static struct rconn_script s_release_hash = RCONN_SCRIPT(
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return -1 end "
    "local n = redis.call('hincrby', KEYS[1], ARGV[2], -1) "
    "if n > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return n "
    "end "
    "redis.call('del', KEYS[1]) "
    "redis.call('publish', KEYS[2], 'released') "
    "return 0");

/* KEYS[1] lock, optional KEYS[2] channel, ARGV[1] token. 1 deleted, 0 not ours. */
static struct rconn_script s_release_str = RCONN_SCRIPT(
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  redis.call('del', KEYS[1]) "
    "  if KEYS[2] then redis.call('publish', KEYS[2], 'released') end "
    "  return 1 "
    "end "
    "return 0");

int rlock_raw_release(redisContext *ctx, const char *key, const char *chan,
                      const char *token)
{
    const char *av[3] = { key, chan, token };
    redisReply *r;
    int rc;

    if (chan)
        r = rconn_script_run(ctx, &s_release_str, 2, 3, av);
    else {
        av[1] = token;
        r = rconn_script_run(ctx, &s_release_str, 1, 2, av);
    }
    if (!r)
        return RLOCK_EUNAVAIL;
    rc = r->type == REDIS_REPLY_INTEGER ? (r->integer == 1) : RLOCK_ERR;
    freeReplyObject(r);
    return rc;
}

/* ---- release ---------------------------------------------------------- */

/* The handle is no longer held; returns 1 when the watchdog already counted
 * the loss, so release does not count it twice. */
static int drop_hold(struct rlock *l)
{
    int counted = l->wd_lost_counted;

    if (l->wd_id) {
        counted |= rlock_wd_unregister(l->client, l->wd_id);
        l->wd_id = 0;
    }
    l->depth = 0;
    l->wd_lost_counted = 0;
    return counted;
}

static int release_lost(struct rlock *l, int counted)
{
    if (!counted)
        atomic_fetch_add(&l->client->stats->lost, 1);
    return rlock_set_err(l, RLOCK_ELOST, "lock %s was no longer ours", l->key);
}

static int release_hash(struct rlock *l, redisContext *ctx)
{
    char ttl[24];
    const char *av[4] = { l->key, l->chan, ttl, l->token };
    int counted = 0;
    redisReply *r;
    long long n;

    /* Stop renewals before the final delete, so a renewal that lands after
     * it is not mistaken for a loss. */
    if (l->depth == 1)
        counted = drop_hold(l);
    snprintf(ttl, sizeof ttl, "%ld", l->opts.ttl_ms);
    if (l->opts.fair) {
        int rc = rlock_fair_release(l, ctx, &n);
        if (rc != RLOCK_OK) {
            drop_hold(l);
            return rc;
        }
    } else {
        r = rconn_script_run(ctx, &s_release_hash, 2, 4, av);
        if (!r || r->type != REDIS_REPLY_INTEGER) {
            int rc = rlock_reply_fail(l, ctx, r, "release");
            if (r)
                freeReplyObject(r);
            drop_hold(l);
            return rc;
        }
        n = r->integer;
        freeReplyObject(r);
    }
    if (n < 0) {
        counted |= drop_hold(l);
        return release_lost(l, counted);
    }
    atomic_fetch_add(&l->client->stats->released, 1);
    if (n == 0 || l->depth <= 1)
        drop_hold(l);
    else
        l->depth--;
    return RLOCK_OK;
}

/* GET the key: 1 ours, 0 absent, 2 someone else's, <0 error. */
static int get_owner(struct rlock *l, redisContext *ctx)
{
    const char *av[2] = { "GET", l->key };
    redisReply *r = redisCommandArgv(ctx, 2, av, NULL);
    int rc;

    if (r && r->type == REDIS_REPLY_NIL)
        rc = 0;
    else if (r && r->type == REDIS_REPLY_STRING)
        rc = strcmp(r->str, l->token) == 0 ? 1 : 2;
    else
        rc = rlock_reply_fail(l, ctx, r, "GET");
    if (r)
        freeReplyObject(r);
    return rc;
}

/* One command of del_and_publish: RLOCK_OK or the failure's status. */
static int int_cmd(struct rlock *l, redisContext *ctx, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
    int rc = RLOCK_OK;

    if (!r || r->type != REDIS_REPLY_INTEGER)
        rc = rlock_reply_fail(l, ctx, r, argv[0]);
    if (r)
        freeReplyObject(r);
    return rc;
}

static int del_and_publish(struct rlock *l, redisContext *ctx)
{
    const char *dv[2] = { "DEL", l->key };
    const char *pv[3] = { "PUBLISH", l->chan, "released" };
    int rc = int_cmd(l, ctx, 2, dv);

    return rc < 0 ? rc : int_cmd(l, ctx, 3, pv);
}

static int release_simple(struct rlock *l, redisContext *ctx)
{
    int counted = drop_hold(l);
    int rc, owner;

    switch (l->opts.release) {
    case RLOCK_RELEASE_TOKEN_LUA:
        rc = rlock_raw_release(ctx, l->key, l->chan, l->token);
        if (rc == RLOCK_EUNAVAIL)
            return rlock_reply_fail(l, ctx, NULL, "release");
        if (rc < 0)
            return rlock_set_err(l, RLOCK_ERR, "release: script failed");
        if (rc == 0)
            return release_lost(l, counted);
        break;
    case RLOCK_RELEASE_PLAIN_DEL:
        /* The GET only feeds the counters; the DEL happens regardless. */
        owner = get_owner(l, ctx);
        if (owner < 0)
            return owner;
        rc = del_and_publish(l, ctx);
        if (rc < 0)
            return rc;
        if (owner == 2)
            atomic_fetch_add(&l->client->stats->foreign_release, 1);
        if (owner != 1)
            return release_lost(l, counted);
        break;
    case RLOCK_RELEASE_GET_THEN_DEL:
        owner = get_owner(l, ctx);
        if (owner < 0)
            return owner;
        if (owner != 1)
            return release_lost(l, counted);
        /* Window: the lock can expire and change hands right here. */
        rc = del_and_publish(l, ctx);
        if (rc < 0)
            return rc;
        break;
    }
    atomic_fetch_add(&l->client->stats->released, 1);
    return RLOCK_OK;
}

/* Hand a default lock at its last level straight to a waiter of this
 * process (rlock_sub_handoff) instead of releasing it through Redis: 1
 * handed over. Only while the lease is surely alive: watched, not found
 * lost, and granted or renewed less than half a lease ago (a paused or
 * cut-off holder releases through Redis, which checks ownership). */
static int try_handoff(struct rlock *l)
{
    struct rlock_client *c = l->client;
    int64_t renewed = 0;

    if (l->depth != 1 || l->opts.kind != RLOCK_REENTRANT || l->opts.fair ||
        l->opts.fencing || l->opts.replicas_ack > 0 || !l->opts.watchdog || !l->wd_id ||
        l->wd_lost_counted)
        return 0;
    struct rlock_sub *s = rlock_sub_of(c);
    if (!s || renewer_check(c->wd, l->wd_id, &renewed))
        return 0;
    int64_t since = renewed > l->granted_ms ? renewed : l->granted_ms;
    if (util_now_ms() - since >= l->opts.ttl_ms / 2)
        return 0;
    if (!rlock_sub_handoff(s, l))
        return 0;
    /* The old token is the new holder's now: this handle, acquiring
     * again, must not pass for it (the acquire script would nest). */
    util_make_token(l->token, sizeof l->token, c->instance);
    return 1;
}

int rlock_release(struct rlock *l)
{
    char why[128];
    redisContext *ctx;
    int rc;

    if (!l)
        return RLOCK_EINVAL;
    if (rlock_bad_handle(l))
        return l->err = RLOCK_EINVAL;
    if (l->depth <= 0)
        return rlock_set_err(l, RLOCK_EINVAL, "lock %s is not held", l->key);
    rlock_clear_err(l);
    if (try_handoff(l)) {
        atomic_fetch_add(&l->client->stats->released, 1);
        return RLOCK_OK;
    }
    ctx = rconn_get(l->client->pool, why, sizeof why);
    if (!ctx) {
        drop_hold(l);
        return rlock_set_err(l, RLOCK_EUNAVAIL, "%s", why);
    }
    if (l->opts.kind == RLOCK_REENTRANT)
        rc = release_hash(l, ctx);
    else
        rc = release_simple(l, ctx);
    rconn_put(l->client->pool, ctx);
    return rc;
}

void rlock_free(struct rlock *l)
{
    if (!l)
        return;
    while (l->depth > 0 && !rlock_bad_handle(l))
        rlock_release(l);
    drop_hold(l);
    free(l);
}
