/* Guard `redlock`: the read-modify-write under a Redlock lease over K
 * independent Redis masters (quorum K/2+1). Survives losing a minority of
 * masters; with a majority gone it answers 503 and sells nothing. The
 * lease is renewed by a watchdog while the work runs (like redis-lock) and
 * its validity is checked right before the write: a holder that outlived
 * it answers 503 lease_expired and writes nothing. */
#include "guard.h"

#include "base/metrics.h"
#include "locks/redlock.h"
#include "base/util.h"
#include "guards/core/lock_fields.h"
#include "stock/keys.h"
#include "stock/txn.h"

#include <stddef.h>
#include <stdio.h>

static struct redlock_guard_conf {
    char nodes[512];
} conf;

static const struct cfg_opt options[] = {
    {"redlock-nodes", "REDLOCK_NODES", CFG_STR,
     "127.0.0.1:6391,127.0.0.1:6392,127.0.0.1:6393", 0, 0,
     offsetof(struct redlock_guard_conf, nodes), sizeof(conf.nodes),
     "independent Redis masters for redlock (host:port,...; a bare port means 127.0.0.1)"},
};

static struct redlock *redlock;
static struct redlock_stats stats;
static char unusable[160];   /* why there is no redlock (a bad node list) */

static int redlock_init(const struct guard *self, const struct guard_backends *b, char *err,
                        size_t errlen)
{
    struct redlock_config cfg;
    redlock_config_default(&cfg);
    cfg.instance = b->instance;
    cfg.stats = &stats;
    /* A stack may run without Redlock masters: only this guard fails then,
     * per request, saying why. */
    if (redlock_parse_nodes(conf.nodes, "127.0.0.1", &cfg) != 0) {
        snprintf(unusable, sizeof(unusable), "bad redlock node list '%.100s'", conf.nodes);
        return 0;
    }
    if (!(redlock = redlock_new(&cfg))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void redlock_fini(const struct guard *self)
{
    redlock_free(redlock);
    redlock = NULL;
}

struct held {
    struct redlock_lease lease;
};

/* Take the Redlock lease on req->sku with req's ttl and wait, watched by
 * the watchdog unless the request turned it off. 0 held, -1 with res
 * filled. */
static int take(const struct deduct_env *env, const struct deduct_req *req, struct held *h,
                struct deduct_res *res)
{
    const struct lock_req_opts *lo = lock_opts_of(req);
    if (lo->fencing) {
        /* Kleppmann's point ("How to do distributed locking", 2016): the
         * masters share no counter, so no token Redlock could hand out is
         * monotonic across holders, and a paused holder cannot be fenced. */
        res->outcome = DEDUCT_BAD_REQUEST;
        snprintf(res->detail, sizeof(res->detail),
                 "redlock cannot issue fencing tokens: its masters share no counter, so no "
                 "token is monotonic (Kleppmann); use redis-lock or lock-table");
        return -1;
    }
    if (!redlock) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "%s", unusable);
        return -1;
    }
    char key[KEYS_MAX];
    keys_lock(key, req->sku);
    long ttl = lock_opts_ttl(lo, env->default_ttl_ms);
    double t0 = util_now();
    int rc = redlock_lock(redlock, key, ttl, req->lock_wait_ms, &h->lease);
    res->lock_wait_s = util_now() - t0;
    if (rc != REDLOCK_OK) {
        res->outcome = rc == REDLOCK_TIMEOUT    ? DEDUCT_LOCK_TIMEOUT
                       : rc == REDLOCK_EUNAVAIL ? DEDUCT_UNAVAILABLE
                                                : DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "redlock over %d masters: %.100s",
                 redlock_nodes(redlock), h->lease.errstr);
        return -1;
    }
    /* Without renewals a holder outliving its lease would write
     * unprotected; the watchdog keeps the quorum's keys alive instead. A
     * watchdog that cannot start leaves the validity check to refuse. */
    if (lo->watchdog && redlock_watch(redlock, &h->lease) != 0)
        fprintf(stderr, "redlock: watchdog not started for %s\n", key);
    if (guard_deadline_passed(req, res)) {
        redlock_unlock(redlock, &h->lease);
        return -1;
    }
    return 0;
}

/* Right before a write: the lease must still be valid (ttl - elapsed -
 * drift, renewals included). Past it, another holder may already be in:
 * refuse rather than write over its work. */
static int still_valid(void *ctx, struct deduct_res *res)
{
    struct held *h = ctx;
    if (redlock_validity_left(redlock, &h->lease) > 0)
        return 1;
    res->outcome = DEDUCT_LEASE_EXPIRED;
    snprintf(res->detail, sizeof(res->detail),
             "redlock lease on %.60s (%ld ms) ran out before the write; nothing was written",
             h->lease.key, h->lease.ttl_ms);
    return 0;
}

static int redlock_locked(const struct guard *self, const struct deduct_env *env,
                          const struct deduct_req *req, guard_work_fn work, void *ctx,
                          struct deduct_res *res)
{
    struct held h;
    if (take(env, req, &h, res) != 0)
        return -1;
    int ret = -1;
    if (still_valid(&h, res))
        ret = work(ctx, env, req, res);
    redlock_unlock(redlock, &h.lease);
    return ret;
}

static int redlock_deduct(const struct guard *self, const struct deduct_env *env,
                          const struct deduct_req *req, struct deduct_res *res)
{
    struct held h;
    if (take(env, req, &h, res) != 0)
        return 0;
    stock_rmw_checked(self->name, env, req, still_valid, &h, res);
    redlock_unlock(redlock, &h.lease);
    return 0;
}

static void mirror(const char *name, atomic_ullong *v)
{
    metrics_set(name, "", (double)atomic_load(v));
}

static void redlock_export_metrics(void)
{
    mirror("lab_redlock_acquired_total", &stats.acquired);
    mirror("lab_redlock_quorum_failures_total", &stats.quorum_failures);
    mirror("lab_redlock_timeouts_total", &stats.timeouts);
    mirror("lab_redlock_unavailable_total", &stats.unavailable);
    mirror("lab_redlock_lost_total", &stats.lost);
    mirror("lab_redlock_node_errors_total", &stats.node_errors);
    mirror("lab_redlock_renewals_total", &stats.renewals);
    mirror("lab_redlock_expired_total", &stats.expired);
}

/* fencing is accepted to be refused with its reason (take). */
static const struct guard_field redlock_fields[] = {LOCK_FIELD_TTL, LOCK_FIELD_WATCHDOG,
                                                    LOCK_FIELD_FENCING};

const struct guard guard_redlock = {
    .name = "redlock",
    .how = "Redlock: the lock on a quorum (N/2+1) of N independent Redis masters, watchdog renewal, validity checked before the write",
    .expect = "correct, survives loss of a minority",
    .safe_across_instances = 1,
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .fields = redlock_fields,
    .nfields = sizeof(redlock_fields) / sizeof(redlock_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .init = redlock_init,
    .fini = redlock_fini,
    .deduct = redlock_deduct,
    .locked = redlock_locked,
    .export_metrics = redlock_export_metrics,
};
