/* Guard `redlock`: the read-modify-write under a Redlock lease over K
 * independent Redis masters (quorum K/2+1). Survives losing a minority of
 * masters; with a majority gone it answers 503 and sells nothing. */
#include "guard.h"

#include "rcache.h"
#include "redlock.h"
#include "util.h"

#include <stdio.h>

static int redlock_deduct(const struct guard_env *env, const struct deduct_req *req,
                          struct deduct_res *res)
{
    struct redlock *r = rcache_redlock(env, res->detail, sizeof(res->detail));
    if (!r) {
        res->outcome = DEDUCT_INTERNAL;
        return 0;
    }
    char key[GUARD_SKU_MAX + 32];
    snprintf(key, sizeof(key), "lock:inventory:{%s}", req->sku);
    long ttl = req->lock_ttl_ms > 0 ? req->lock_ttl_ms : env->default_ttl_ms;
    struct redlock_lease lease;
    double t0 = util_now();
    int rc = redlock_lock(r, key, ttl, req->lock_wait_ms, &lease);
    res->lock_wait_s = util_now() - t0;
    if (rc != REDLOCK_OK) {
        res->outcome = rc == REDLOCK_TIMEOUT    ? DEDUCT_LOCK_TIMEOUT
                       : rc == REDLOCK_EUNAVAIL ? DEDUCT_UNAVAILABLE
                                                : DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "redlock over %d masters: %.100s",
                 redlock_nodes(r), lease.errstr);
        return 0;
    }
    guard_rmw("redlock", env, req, res);
    redlock_unlock(r, &lease);
    return 0;
}

const struct guard guard_redlock = {
    .name = "redlock",
    .how = "Redlock: the lock on a quorum (N/2+1) of N independent Redis masters",
    .expect = "correct, survives loss of a minority",
    .safe_across_instances = 1,
    .deduct = redlock_deduct,
};
