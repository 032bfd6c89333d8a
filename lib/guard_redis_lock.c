/* Guard `redis-lock`: the read-modify-write under a Redis lock per SKU.
 * Safe by default (reentrant token lock, Lua release, watchdog renewal);
 * the request's acquire/release/watchdog/ttl options reproduce the seeds'
 * mistakes, and the audit shows what each one costs. */
#include "guard.h"

#include "rcache.h"
#include "rlock.h"
#include "util.h"

#include <stdio.h>

/* Map a lock failure into the answer. */
static void lock_failure(int rc, const struct rlock *l, long wait_ms, struct deduct_res *res)
{
    if (rc == RLOCK_TIMEOUT) {
        res->outcome = DEDUCT_LOCK_TIMEOUT;
        snprintf(res->detail, sizeof(res->detail), "Redis lock %.60s busy for %ld ms",
                 l->key, wait_ms);
    } else if (rc == RLOCK_EUNAVAIL) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "Redis unavailable: %.120s", l->errstr);
    } else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "Redis lock: %.120s", l->errstr);
    }
}

static int redis_lock_deduct(const struct guard_env *env, const struct deduct_req *req,
                             struct deduct_res *res)
{
    struct rlock_client *client = rcache_lock_client(env);
    struct rlock_opts o;
    rcache_lock_opts(env, req, &o);
    char key[GUARD_SKU_MAX + 32];
    snprintf(key, sizeof(key), "lock:inventory:{%s}", req->sku);
    struct rlock *l = client ? rlock_new(client, key, &o) : NULL;
    if (!l) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "out of memory");
        return 0;
    }
    double t0 = util_now();
    int rc = rlock_acquire(l, req->lock_wait_ms);
    res->lock_wait_s = util_now() - t0;
    if (rc != RLOCK_OK) {
        lock_failure(rc, l, req->lock_wait_ms, res);
        rlock_free(l);
        return 0;
    }
    guard_rmw("redis-lock", env, req, res);
    /* A release that finds the lock gone (expired while held) is counted
     * in the lock stats; the sale stands, and the audit judges it. */
    rlock_release(l);
    rlock_free(l);
    return 0;
}

static int redis_lock_seed(const struct guard_env *env, const char *sku, long long stock,
                           int segments, struct deduct_res *res)
{
    redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail),
                               "DEL lock:inventory:{%s}", sku);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

const struct guard guard_redis_lock = {
    .name = "redis-lock",
    .how = "Redis lock: SET NX PX with a token, Lua compare-and-delete release, watchdog renewal",
    .expect = "correct",
    .safe_across_instances = 1,
    .deduct = redis_lock_deduct,
    .seed = redis_lock_seed,
};
