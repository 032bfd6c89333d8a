/* The fair lock (Redisson's RedissonFairLock): waiters queue in arrival
 * order and a release wakes the next one only.
 *
 * Next to the lock hash, two keys per lock: a list of waiting tokens in
 * arrival order (key":queue") and a zset of each waiter's lease, the Redis
 * time in ms until which it counts as alive (key":queue:t"). A waiter
 * refreshes its lease on every try (at least every WAIT_SLICE_MAX ms); one
 * that died stops refreshing and is pruned from the head once its lease
 * has passed, so a crash costs the queue at most RLOCK_FAIR_WAITER_MS. A
 * free lock goes to the head of the queue only: a newcomer cannot barge in
 * ahead of someone who waited, which is what starves waiters of the
 * unfair lock at saturation. Time comes from Redis (TIME), never from the
 * instances' clocks. */
#include "rlock_private.h"

#include <stdio.h>

/* Prune the dead waiters at the head of the queue (leases past). */
#define FAIR_PRUNE                                                        \
    "local t = redis.call('time') "                                       \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "while true do "                                                      \
    "  local first = redis.call('lindex', QUEUE, 0) "                     \
    "  if not first then break end "                                      \
    "  local lease = redis.call('zscore', QTIME, first) "                 \
    "  if lease and tonumber(lease) > now then break end "                \
    "  redis.call('lpop', QUEUE) "                                        \
    "  redis.call('zrem', QTIME, first) "                                 \
    "end "

/* KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] leases;
 * ARGV[1] ttl ms, ARGV[2] owner, ARGV[3] "1" fence, ARGV[4] waiter lease
 * ms, ARGV[5] "1" join the queue when busy. {1, count, token} or
 * {0, holder pttl (-2: free but promised to the head)}. */
static struct rconn_script s_acquire_fair = RCONN_SCRIPT(
    "local QUEUE, QTIME = KEYS[3], KEYS[4] "
    FAIR_PRUNE
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return {1, n, 0} "
    "end "
    "if redis.call('exists', KEYS[1]) == 0 then "
    "  local first = redis.call('lindex', QUEUE, 0) "
    "  if not first or first == ARGV[2] then "
    "    if first then "
    "      redis.call('lpop', QUEUE) "
    "      redis.call('zrem', QTIME, ARGV[2]) "
    "    end "
    "    redis.call('hset', KEYS[1], ARGV[2], 1) "
    "    redis.call('pexpire', KEYS[1], ARGV[1]) "
    "    local f = 0 "
    "    if ARGV[3] == '1' then f = redis.call('incr', KEYS[2]) end "
    "    return {1, 1, f} "
    "  end "
    "end "
    "if ARGV[5] == '1' then "
    "  if not redis.call('zscore', QTIME, ARGV[2]) then "
    "    redis.call('rpush', QUEUE, ARGV[2]) "
    "  end "
    "  redis.call('zadd', QTIME, now + tonumber(ARGV[4]), ARGV[2]) "
    /* Every waiter refreshes these: they vanish once all waiters are gone. */
    "  redis.call('pexpire', QUEUE, 2 * tonumber(ARGV[4])) "
    "  redis.call('pexpire', QTIME, 2 * tonumber(ARGV[4])) "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}");

/* KEYS[1] lock, KEYS[2] queue, KEYS[3] leases; ARGV[1] ttl, ARGV[2] owner,
 * ARGV[3] channel prefix. n > 0 still ours, 0 released (the next live
 * waiter told on its own channel), -1 not ours. */
static struct rconn_script s_release_fair = RCONN_SCRIPT(
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return -1 end "
    "local n = redis.call('hincrby', KEYS[1], ARGV[2], -1) "
    "if n > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return n "
    "end "
    "redis.call('del', KEYS[1]) "
    "local QUEUE, QTIME = KEYS[2], KEYS[3] "
    FAIR_PRUNE
    "local nxt = redis.call('lindex', QUEUE, 0) "
    "if nxt then redis.call('publish', ARGV[3] .. nxt, 'released') end "
    "return 0");

/* KEYS[1] lock, KEYS[2] queue, KEYS[3] leases; ARGV[1] owner, ARGV[2]
 * channel prefix. Leave the queue; when the lock is free, wake the new
 * head (it may have been us, told of a release we no longer want). */
static struct rconn_script s_leave_fair = RCONN_SCRIPT(
    "redis.call('lrem', KEYS[2], 0, ARGV[1]) "
    "redis.call('zrem', KEYS[3], ARGV[1]) "
    "if redis.call('exists', KEYS[1]) == 0 then "
    "  local QUEUE, QTIME = KEYS[2], KEYS[3] "
    FAIR_PRUNE
    "  local nxt = redis.call('lindex', QUEUE, 0) "
    "  if nxt then redis.call('publish', ARGV[2] .. nxt, 'released') end "
    "end "
    "return 0");

static void chan_prefix(const struct rlock *l, char *out, size_t len)
{
    snprintf(out, len, "rlock:chan:{%s}:", l->key);
}

int rlock_fair_try(struct rlock *l, redisContext *ctx, long *pttl)
{
    char ttl[24], lease[24];
    snprintf(ttl, sizeof ttl, "%ld", l->opts.ttl_ms);
    snprintf(lease, sizeof lease, "%d", RLOCK_FAIR_WAITER_MS);
    const char *av[9] = { l->key, l->fence_key, l->queue_key, l->qtime_key,
                          ttl, l->token, l->opts.fencing ? "1" : "0", lease,
                          l->enqueue ? "1" : "0" };
    return rlock_grant_reply(l, ctx, rconn_script_run(ctx, &s_acquire_fair, 4, 9, av),
                             "fair acquire", pttl);
}

int rlock_fair_release(struct rlock *l, redisContext *ctx, long long *n)
{
    char ttl[24], prefix[RLOCK_KEY_MAX + 16];
    snprintf(ttl, sizeof ttl, "%ld", l->opts.ttl_ms);
    chan_prefix(l, prefix, sizeof prefix);
    const char *av[6] = { l->key, l->queue_key, l->qtime_key, ttl, l->token, prefix };
    redisReply *r = rconn_script_run(ctx, &s_release_fair, 3, 6, av);
    int rc = RLOCK_OK;

    if (!r || r->type != REDIS_REPLY_INTEGER)
        rc = rlock_reply_fail(l, ctx, r, "fair release");
    else
        *n = r->integer;
    if (r)
        freeReplyObject(r);
    return rc;
}

void rlock_fair_leave(struct rlock *l, redisContext *ctx)
{
    char prefix[RLOCK_KEY_MAX + 16];
    chan_prefix(l, prefix, sizeof prefix);
    const char *av[5] = { l->key, l->queue_key, l->qtime_key, l->token, prefix };
    redisReply *r = rconn_script_run(ctx, &s_leave_fair, 3, 5, av);
    /* Best effort: a waiter left behind is pruned once its lease passes. */
    if (r)
        freeReplyObject(r);
}
