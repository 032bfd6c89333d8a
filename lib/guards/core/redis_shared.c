/* The Redis handles the Redis guards share (see redis_shared.h). */
#include "guards/core/redis_shared.h"

#include "base/metrics.h"
#include "guards/core/lock_fields.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 500
#define CMD_TIMEOUT_MS 2000

struct redis_shared_conf redis_shared_conf;

const struct cfg_opt redis_shared_options[REDIS_SHARED_NOPTIONS] = {
    {"redis-host", "REDIS_HOST", CFG_STR, "127.0.0.1", 0, 0,
     offsetof(struct redis_shared_conf, host), sizeof(redis_shared_conf.host),
     "Redis host (locks, segments, counters)"},
    {"redis-port", "REDIS_PORT", CFG_INT, "6390", 1, 65535,
     offsetof(struct redis_shared_conf, port), 0, "Redis port"},
    {"redis-reload-wait", "REDIS_RELOAD_WAIT_MS", CFG_MS, "12000", 0, 600000,
     offsetof(struct redis_shared_conf, reload_wait_ms), 0,
     "after Redis lost a SKU's stock, refuse redis-decr/segmented sales this long before "
     "reloading it from MySQL; must exceed the longest time a sale decided in Redis takes to "
     "reach MySQL (hold_ms <= 10 s, plus margin)"},
    {"redis-sentinels", "LAB_REDIS_SENTINELS", CFG_STR, "", 0, 0,
     offsetof(struct redis_shared_conf, sentinels), sizeof(redis_shared_conf.sentinels),
     "host:port,... of Redis Sentinels: find the master through them (and follow a "
     "failover) instead of using --redis-host/--redis-port; empty = no Sentinel"},
    {"redis-master-name", "LAB_REDIS_MASTER_NAME", CFG_STR, "lab", 0, 0,
     offsetof(struct redis_shared_conf, master_name), sizeof(redis_shared_conf.master_name),
     "the master's name in Sentinel"},
};

struct redis_shared *redis_shared_new(const struct redis_shared_conf *conf,
                                      const char *instance, char *err, size_t errlen)
{
    struct redis_shared *rs = calloc(1, sizeof(*rs));
    if (!rs) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rs->conf = *conf;
    /* With Sentinels, every connection to --redis-host/--redis-port (pool,
     * lock client, its watchdog, the stream flusher) goes to the master
     * they name. */
    rs->endpoint = rconn_endpoint_new(rs->conf.host, (int)rs->conf.port, rs->conf.sentinels,
                                      rs->conf.master_name, err, errlen);
    if (!rs->endpoint)
        goto err;
    struct rlock_config cfg = {
        .endpoint = rs->endpoint,
        .host = rs->conf.host,
        .port = (int)rs->conf.port,
        .connect_timeout_ms = CONNECT_TIMEOUT_MS,
        .cmd_timeout_ms = CMD_TIMEOUT_MS,
        .instance = instance,
        .stats = &rs->lock_stats,
    };
    /* Redis may be down now and up later: both handles reconnect. */
    rs->locks = rlock_client_new(&cfg);
    rs->pool = rconn_pool_new(rs->endpoint, CONNECT_TIMEOUT_MS, CMD_TIMEOUT_MS);
    if (!rs->locks || !rs->pool) {
        snprintf(err, errlen, "out of memory");
        goto err;
    }
    return rs;
err:
    redis_shared_free(rs);
    return NULL;
}

void redis_shared_free(struct redis_shared *rs)
{
    if (!rs)
        return;
    rlock_client_free(rs->locks);
    rconn_pool_free(rs->pool);
    rconn_endpoint_free(rs->endpoint);   /* after everything made on it */
    free(rs);
}

redisReply *redis_shared_eval_acked(struct redis_shared *rs, struct rconn_script *s, int nkeys,
                                    int argc, const char **argv, int acks, long wait_ms,
                                    long long *acked, char *err, size_t errlen)
{
    *acked = 0;
    if (acks <= 0)
        return rconn_eval(rs->pool, err, errlen, s, nkeys, argc, argv);
    for (int attempt = 0; attempt < 2; attempt++) {
        redisContext *ctx = rconn_get(rs->pool, err, errlen);
        if (!ctx)
            return NULL;
        redisReply *r = rconn_script_run(ctx, s, nkeys, argc, argv);
        if (!r) {
            snprintf(err, errlen, "redis: %.100s", ctx->errstr[0] ? ctx->errstr : "no reply");
            /* EOF on a kept connection: the script never ran; once more */
            int retry = ctx->err == REDIS_ERR_EOF;
            rconn_put(rs->pool, ctx);   /* errored: dropped with the idle ones */
            if (retry)
                continue;
            return NULL;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "redis error: %.100s", r->str);
            if (strncmp(r->str, "READONLY", 8) == 0)
                ctx->err = REDIS_ERR_OTHER;
            freeReplyObject(r);
            rconn_put(rs->pool, ctx);
            return NULL;
        }
        /* WAIT counts the replicas that have this connection's writes. */
        char n[16], ms[24];
        snprintf(n, sizeof(n), "%d", acks);
        snprintf(ms, sizeof(ms), "%ld", wait_ms > 0 ? wait_ms : 1);
        const char *av[3] = {"WAIT", n, ms};
        redisReply *w = redisCommandArgv(ctx, 3, av, NULL);
        if (w && w->type == REDIS_REPLY_INTEGER) {
            *acked = w->integer;
        } else {
            *acked = -1;
            snprintf(err, errlen, "WAIT failed: %.100s",
                     w && w->type == REDIS_REPLY_ERROR ? w->str : ctx->errstr);
        }
        freeReplyObject(w);
        rconn_put(rs->pool, ctx);
        return r;
    }
    return NULL;
}

int redis_shared_preload(struct redis_shared *rs, struct rconn_script *s)
{
    if (rs->npreload >= REDIS_SHARED_PRELOAD_MAX)
        return -1;
    rs->preload[rs->npreload++] = s;
    return 0;
}

/* SCRIPT LOAD every listed script, pipelined on one connection. 0, or -1
 * with err. Concurrent callers may both load: harmless (same SHA). */
static int preload_scripts(struct redis_shared *rs, char *err, size_t errlen)
{
    redisContext *ctx = rconn_get(rs->pool, err, errlen);
    if (!ctx)
        return -1;
    int rc = 0;
    for (int i = 0; i < rs->npreload; i++)
        if (redisAppendCommand(ctx, "SCRIPT LOAD %s", rs->preload[i]->src) != REDIS_OK)
            rc = -1;
    for (int i = 0; i < rs->npreload && rc == 0; i++) {
        redisReply *r = NULL;
        if (redisGetReply(ctx, (void **)&r) != REDIS_OK || !r) {
            snprintf(err, errlen, "redis: %.100s", ctx->errstr[0] ? ctx->errstr : "no reply");
            rc = -1;
        } else if (r->type != REDIS_REPLY_STRING) {
            snprintf(err, errlen, "loading scripts: %.100s",
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            rc = -1;
            if (ctx->err == 0)
                ctx->err = REDIS_ERR_OTHER;   /* replies left unread: drop it */
        }
        freeReplyObject(r);
    }
    if (rc != 0 && ctx->err == 0)
        ctx->err = REDIS_ERR_OTHER;
    rconn_put(rs->pool, ctx);
    return rc;
}

int redis_shared_health(struct redis_shared *rs, const char **backend, char *err,
                        size_t errlen)
{
    *backend = "redis";
    if (!atomic_load(&rs->preloaded) && rs->npreload > 0) {
        if (preload_scripts(rs, err, errlen) != 0)
            return -1;
        atomic_store(&rs->preloaded, 1);
    }
    return rconn_ping(rs->pool, err, errlen);
}

void redis_shared_lock_opts(const struct deduct_env *env, const struct deduct_req *req,
                            struct rlock_opts *o)
{
    const struct lock_req_opts *lo = lock_opts_of(req);
    rlock_opts_default(o);
    o->ttl_ms = lock_opts_ttl(lo, env->default_ttl_ms);
    o->watchdog = lo->watchdog;
    o->acquire = (enum rlock_acquire)lo->acquire;
    o->release = (enum rlock_release)lo->release;
    /* The seeds' mistakes live in the simple SET-NX lock; the safe default
     * is Redisson's reentrant hash lock. */
    o->kind = (o->acquire != RLOCK_ACQUIRE_SET_NX_PX || o->release != RLOCK_RELEASE_TOKEN_LUA)
                  ? RLOCK_SIMPLE : RLOCK_REENTRANT;
}

void redis_shared_lock_failure(int rc, const struct rlock *l, long wait_ms, const char *what,
                               struct deduct_res *res)
{
    if (rc == RLOCK_TIMEOUT) {
        res->outcome = DEDUCT_LOCK_TIMEOUT;
        snprintf(res->detail, sizeof(res->detail), "%s %.60s busy for %ld ms", what,
                 rlock_key(l), wait_ms);
    } else if (rc == RLOCK_EUNAVAIL) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "Redis unavailable: %.120s", rlock_errstr(l));
    } else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "%s: %.120s", what, rlock_errstr(l));
    }
}

static void mirror(const char *name, unsigned long long v)
{
    metrics_set(name, "", (double)v);
}

void redis_shared_export_metrics(struct redis_shared *rs)
{
    struct rlock_stats_snap s;
    rlock_stats_read(&rs->lock_stats, &s);
    mirror("lab_lock_acquired_total", s.acquired);
    mirror("lab_lock_timeouts_redis_total", s.timeouts);
    mirror("lab_lock_waits_total", s.waits);
    metrics_set("lab_lock_wait_seconds_total", "", (double)s.wait_us_total / 1e6);
    mirror("lab_lock_notifications_total", s.notifications);
    mirror("lab_lock_renewals_total", s.renewals);
    mirror("lab_lock_lost_total", s.lost);
    mirror("lab_lock_foreign_release_total", s.foreign_release);
    mirror("lab_lock_unavailable_total", s.unavailable);
    mirror("lab_lock_handoffs_total", s.handoffs);
}

/* The shared Redis lock client's metric families (rlock's counters,
 * mirrored by redis_shared_export_metrics), registered with the guards'. */
const struct guard_metric redis_shared_metrics[] = {
    {"lab_lock_acquired_total", "counter", "Redis lock client: locks acquired", ""},
    {"lab_lock_handoffs_total", "counter",
     "Redis lock client: releases handed to a waiter of the same process without a "
     "Redis round trip", ""},
    {"lab_lock_timeouts_redis_total", "counter",
     "Redis lock client: acquisitions that timed out", ""},
    {"lab_lock_waits_total", "counter", "Redis lock client: acquisitions that had to wait", ""},
    {"lab_lock_wait_seconds_total", "counter",
     "Redis lock client: seconds spent waiting for locks", ""},
    {"lab_lock_notifications_total", "counter",
     "Redis lock client: release notifications received", ""},
    {"lab_lock_renewals_total", "counter", "Redis lock client: watchdog lease renewals", ""},
    {"lab_lock_lost_total", "counter", "Redis lock client: holders that found their lock gone", ""},
    {"lab_lock_foreign_release_total", "counter",
     "Redis lock client: releases that found another holder's token", ""},
    {"lab_lock_unavailable_total", "counter",
     "Redis lock client: acquisitions refused because Redis was away", ""},
};
const size_t redis_shared_nmetrics = sizeof(redis_shared_metrics) / sizeof(redis_shared_metrics[0]);
