/* Guard `redlock`: the read-modify-write under a Redlock lease over K
 * independent Redis masters (quorum K/2+1). Survives losing a minority of
 * masters; with a majority gone it answers 503 and sells nothing. */
#include "guard.h"

#include "base/metrics.h"
#include "base/redlock.h"
#include "base/util.h"
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

static int redlock_init(const struct guard *self, const char *instance, char *err,
                        size_t errlen)
{
    struct redlock_config cfg;
    redlock_config_default(&cfg);
    cfg.instance = instance;
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

static int redlock_deduct(const struct guard *self, const struct deduct_env *env,
                          const struct deduct_req *req, struct deduct_res *res)
{
    if (!redlock) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "%s", unusable);
        return 0;
    }
    char key[KEYS_MAX];
    keys_lock(key, req->sku);
    long ttl = req->lock_ttl_ms > 0 ? req->lock_ttl_ms : env->default_ttl_ms;
    struct redlock_lease lease;
    double t0 = util_now();
    int rc = redlock_lock(redlock, key, ttl, req->lock_wait_ms, &lease);
    res->lock_wait_s = util_now() - t0;
    if (rc != REDLOCK_OK) {
        res->outcome = rc == REDLOCK_TIMEOUT    ? DEDUCT_LOCK_TIMEOUT
                       : rc == REDLOCK_EUNAVAIL ? DEDUCT_UNAVAILABLE
                                                : DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "redlock over %d masters: %.100s",
                 redlock_nodes(redlock), lease.errstr);
        return 0;
    }
    stock_rmw(self->name, env, req, res);
    redlock_unlock(redlock, &lease);
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
}

const struct guard guard_redlock = {
    .name = "redlock",
    .how = "Redlock: the lock on a quorum (N/2+1) of N independent Redis masters",
    .expect = "correct, survives loss of a minority",
    .safe_across_instances = 1,
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .init = redlock_init,
    .fini = redlock_fini,
    .deduct = redlock_deduct,
    .export_metrics = redlock_export_metrics,
};
