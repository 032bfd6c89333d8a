/* One attempt at a lock on a given connection: the reentrant script, the
 * simple SET NX PX or SETNX + PEXPIRE, or the fair queue (rlock_fair.c).
 * rlock_acquire and the wait loop (rlock_wait.c) both call it. */
#include "rlock_private.h"

#include <stdio.h>
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
    l->try_ms = util_now_ms();   /* a grant's lease starts no earlier */
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
