/* Guard `redis-lock`: the read-modify-write under a Redis lock per SKU.
 * Safe by default (reentrant token lock, Lua release, watchdog renewal);
 * the request's acquire/release/watchdog/ttl options reproduce the seeds'
 * mistakes, and the audit shows what each one costs. A reseed leaves the
 * lock alone: a holder elsewhere keeps it, and its write is refused by the
 * row's reseed count instead (stock_rmw). */
#include "guard.h"

#include "base/db.h"
#include "base/util.h"
#include "guards/core/cart_locks.h"
#include "guards/core/lock_fields.h"
#include "guards/core/redis_shared.h"
#include "stock/keys.h"
#include "stock/store.h"
#include "stock/txn.h"

#include <stdio.h>

/* The shared Redis server, received at init. */
static struct redis_shared *redis;

static int redis_lock_init(const struct guard *self, const struct guard_backends *b, char *err,
                      size_t errlen)
{
    redis = b->redis;
    return 0;
}

static void redis_lock_fini(const struct guard *self)
{
    redis = NULL;
}

/* The WAIT of replicas_ack: 100 ms, or less when the request has less. */
#define REPLICAS_ACK_MAX_MS 100

/* The options only the safe reentrant lock can honour: the fencing token
 * and the fair queue live in its Lua scripts. Returns 1 with res filled
 * (bad_request) when the request mixes them with a seeds' mistake. */
static int refuse_options(const struct lock_req_opts *req, const struct rlock_opts *o,
                          struct deduct_res *res)
{
    if (o->kind == RLOCK_REENTRANT || (!req->fencing && !req->fair))
        return 0;
    res->outcome = DEDUCT_BAD_REQUEST;
    snprintf(res->detail, sizeof(res->detail),
             "%s needs the default acquire/release (set-nx-px, token-lua): the %s is "
             "taken inside the lock's Lua script", req->fencing ? "fencing" : "fair",
             req->fencing ? "token" : "queue");
    return 1;
}

/* KEYS[1] lock, [2] fence counter; ARGV[1] owner, [2] the row's fence.
 * While ARGV[1] still holds the lock: raise the counter past the row's
 * fence and return the new token; else 0. */
static struct rconn_script raise_script = RCONN_SCRIPT(
    "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 or "
    "   redis.call('pttl', KEYS[1]) <= 0 then return 0 end "
    "local c = tonumber(redis.call('get', KEYS[2]) or '0') "
    "local f = tonumber(ARGV[2]) "
    "if c < f then redis.call('set', KEYS[2], ARGV[2]) end "
    "return redis.call('incr', KEYS[2])");

/* A fenced write refused although this holder still holds the lock: the
 * fence counter went back (a failover to a replica that had not seen the
 * last INCRs, a lost key) while the row kept the newer token. A stale
 * holder has lost its lock, so it is never raised here. Returns the new
 * token, or 0 (not ours any more, or Redis/MySQL failed: stay fenced). */
static unsigned long long raise_fence(const struct deduct_env *env, const struct rlock *l,
                                      const char *guard_name, const char *sku)
{
    unsigned long long row = 0;
    if (!env->db || store_fence_get(env->db, sku, guard_name, &row) != 1)
        return 0;
    char fence_key[KEYS_MAX + 8], rowv[24], err[128];
    snprintf(fence_key, sizeof(fence_key), "%s:fence", rlock_key(l));
    snprintf(rowv, sizeof(rowv), "%llu", row);
    const char *argv[4] = {rlock_key(l), fence_key, rlock_token(l), rowv};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &raise_script, 2, 4,
                               argv);
    unsigned long long t = r && r->type == REDIS_REPLY_INTEGER && r->integer > 0 &&
                                   (unsigned long long)r->integer > row
                               ? (unsigned long long)r->integer : 0;
    freeReplyObject(r);
    return t;
}

static int redis_lock_locked(const struct guard *self, const struct deduct_env *env,
                             const struct deduct_req *req, guard_work_fn work, void *ctx,
                             struct deduct_res *res)
{
    const struct lock_req_opts *lo = lock_opts_of(req);
    struct rlock_opts o;
    redis_shared_lock_opts(env, req, &o);
    if (refuse_options(lo, &o, res))
        return -1;
    o.fencing = lo->fencing;
    o.fair = lo->fair;
    o.replicas_ack = (int)lo->replicas_ack;
    if (o.replicas_ack > 0) {
        long left = (long)(deduct_time_left(req) * 1000.0);
        o.ack_timeout_ms = left < REPLICAS_ACK_MAX_MS ? (left > 1 ? left : 1)
                                                      : REPLICAS_ACK_MAX_MS;
    }
    char key[KEYS_MAX];
    keys_lock(key, req->sku);
    struct rlock *l = rlock_new(redis->locks, key, &o);
    if (!l) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "out of memory");
        return -1;
    }
    double t0 = util_now();
    int rc = rlock_acquire(l, req->lock_wait_ms);
    res->lock_wait_s = util_now() - t0;
    if (rc == RLOCK_ENOACK) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "replicas_ack: %.140s", rlock_errstr(l));
        rlock_free(l);
        return -1;
    }
    if (rc != RLOCK_OK) {
        redis_shared_lock_failure(rc, l, req->lock_wait_ms, "Redis lock", res);
        rlock_free(l);
        return -1;
    }
    int ret = -1;
    if (!guard_deadline_passed(req, res)) {
        /* The write is fenced with the token taken with the lock. */
        struct deduct_req fenced = *req;
        fenced.fencing = lo->fencing;
        if (lo->fencing)
            fenced.fence = rlock_fence(l);
        ret = work(ctx, env, &fenced, res);
        unsigned long long t;
        if (lo->fencing && res->outcome == DEDUCT_FENCED &&
            (t = raise_fence(env, l, self->name, req->sku)) != 0) {
            fenced.fence = t;
            ret = work(ctx, env, &fenced, res);
        }
    }
    /* A release that finds the lock gone (expired while held) is counted
     * in the lock stats; the work stands, and the audit judges it. */
    rlock_release(l);
    rlock_free(l);
    return ret;
}

static void redis_lock_deduct(const struct guard *self, const struct deduct_env *env,
                              const struct deduct_req *req, struct deduct_res *res)
{
    redis_lock_locked(self, env, req, guard_rmw_work, (void *)self->name, res);
}

/* Every lock option: the seeds' mistakes, and Redisson's fencing,
 * replica acks and fair queue. */
static const struct guard_field redis_lock_fields[] = {
    LOCK_FIELD_TTL,     LOCK_FIELD_WATCHDOG,     LOCK_FIELD_ACQUIRE, LOCK_FIELD_RELEASE,
    LOCK_FIELD_FENCING, LOCK_FIELD_REPLICAS_ACK, LOCK_FIELD_FAIR,
};

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Redisson-style reentrant lock per SKU: unique token, Lua release of our own "
    "lock only, a watchdog that renews every ttl/3.",
    "Waiting is bounded by lock_wait_ms (503 lock_timeout).",
    "fencing=true: a counter INCR'd at each grant; MySQL refuses an older token (409 "
    "fenced).",
    "replicas_ack=N: WAIT N after the grant, so a failover cannot promote a replica "
    "without the lock.",
    NULL,
};
static const struct guard_doc doc = {
    .needs = "Redis (+ Sentinel for failover)",
    .use_when = "a lock is needed across instances and Redis is already there; add fencing "
        "against pauses",
    .breaks = "a holder paused past its lease (lost update) without fencing; a failover "
        "before the lock reached the replica without replicas_ack",
    .origin = "the seeds' mistakes: SETNX without TTL, DEL of another's lock (the ABC "
        "problem)",
    .steps = doc_steps,
    .statements = "EVAL acquire (HSET lock:inventory:{sku} token 1, PEXPIRE ttl)\n... "
        "read-modify-write in MySQL ...\nEVAL release (delete only our token; "
        "PUBLISH)",
    .code = __FILE__,
    .lock_home = "redis",
};

const struct guard guard_redis_lock = {
    .name = "redis-lock",
    .doc = &doc,
    .how = "Redis lock: SET NX PX with a token, Lua compare-and-delete release, watchdog renewal",
    .expect = "correct",
    .flags = GUARD_SAFE_ACROSS_INSTANCES
             | GUARD_USES_REDIS,
    .fields = redis_lock_fields,
    .nfields = sizeof(redis_lock_fields) / sizeof(redis_lock_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .deduct = redis_lock_deduct,
    .locked = redis_lock_locked,
    .deduct_cart = guard_lock_cart,   /* its locks nested, sorted (core/cart_locks) */
    .init = redis_lock_init,
    .fini = redis_lock_fini,
};
