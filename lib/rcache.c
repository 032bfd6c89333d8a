/* Lazily created Redis handles shared by the Redis guards (see rcache.h). */
#include "rcache.h"

#include "metrics.h"
#include "redlock.h"
#include "rlock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 500
#define CMD_TIMEOUT_MS 2000

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rlock_client *lock_client;
static struct redlock *redlock;
static struct rlock_stats lock_stats;
static struct redlock_stats redlock_stats_shared;

struct rlock_client *rcache_lock_client(const struct guard_env *env)
{
    pthread_mutex_lock(&init_mu);
    if (!lock_client) {
        struct rlock_config cfg = {
            .host = env->redis_host,
            .port = (int)env->redis_port,
            .connect_timeout_ms = CONNECT_TIMEOUT_MS,
            .cmd_timeout_ms = CMD_TIMEOUT_MS,
            .instance = env->instance,
            .stats = &lock_stats,
        };
        lock_client = rlock_client_new(&cfg);
    }
    pthread_mutex_unlock(&init_mu);
    return lock_client;
}

struct redlock *rcache_redlock(const struct guard_env *env, char *err, size_t errlen)
{
    pthread_mutex_lock(&init_mu);
    if (!redlock) {
        struct redlock_config cfg;
        redlock_config_default(&cfg);
        cfg.instance = env->instance;
        cfg.stats = &redlock_stats_shared;
        if (redlock_parse_nodes(env->redlock_nodes, env->redis_host, &cfg) != 0)
            snprintf(err, errlen, "bad redlock node list '%.100s'", env->redlock_nodes);
        else if (!(redlock = redlock_new(&cfg)))
            snprintf(err, errlen, "out of memory");
    }
    pthread_mutex_unlock(&init_mu);
    return redlock;
}

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void free_ctx(void *p) { redisFree(p); }
static void make_key(void) { pthread_key_create(&ctx_key, free_ctx); }

static void drop_ctx(void)
{
    redisContext *c = pthread_getspecific(ctx_key);
    if (c)
        redisFree(c);
    pthread_setspecific(ctx_key, NULL);
}

redisContext *rcache_redis(const struct guard_env *env, char *err, size_t errlen)
{
    pthread_once(&ctx_once, make_key);
    redisContext *c = pthread_getspecific(ctx_key);
    if (c && c->err) {
        drop_ctx();
        c = NULL;
    }
    if (!c) {
        c = rlock_connect(env->redis_host, (int)env->redis_port, CONNECT_TIMEOUT_MS,
                          CMD_TIMEOUT_MS, err, errlen);
        if (c)
            pthread_setspecific(ctx_key, c);
    }
    return c;
}

redisReply *rcache_cmd(const struct guard_env *env, char *err, size_t errlen,
                       const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        redisContext *c = rcache_redis(env, err, errlen);
        if (!c)
            return NULL;
        va_list ap;
        va_start(ap, fmt);
        redisReply *r = redisvCommand(c, fmt, ap);
        va_end(ap);
        if (r) {
            if (r->type == REDIS_REPLY_ERROR) {
                snprintf(err, errlen, "redis error: %.100s", r->str);
                freeReplyObject(r);
                return NULL;
            }
            return r;
        }
        snprintf(err, errlen, "redis %s:%ld: %.80s", env->redis_host, env->redis_port,
                 c->errstr[0] ? c->errstr : "no reply");
        /* EOF on a kept connection: the server went away (restarted) before
         * our command reached it, so sending it again on a new connection
         * cannot apply it twice. A timeout might have, and is not retried. */
        int retry = c->err == REDIS_ERR_EOF;
        drop_ctx();
        if (!retry)
            break;
    }
    return NULL;
}

int rcache_ping(const struct guard_env *env, char *err, size_t errlen)
{
    redisReply *r = rcache_cmd(env, err, errlen, "PING");
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

void rcache_lock_opts(const struct guard_env *env, const struct deduct_req *req,
                      struct rlock_opts *o)
{
    rlock_opts_default(o);
    o->ttl_ms = req->lock_ttl_ms > 0 ? req->lock_ttl_ms : env->default_ttl_ms;
    o->watchdog = req->watchdog;
    o->acquire = req->acquire == ACQUIRE_SETNX_THEN_EXPIRE ? RLOCK_ACQUIRE_SETNX_THEN_EXPIRE
                                                           : RLOCK_ACQUIRE_SET_NX_PX;
    o->release = req->release == RELEASE_PLAIN_DEL      ? RLOCK_RELEASE_PLAIN_DEL
                 : req->release == RELEASE_GET_THEN_DEL ? RLOCK_RELEASE_GET_THEN_DEL
                                                        : RLOCK_RELEASE_TOKEN_LUA;
    /* The seeds' mistakes live in the simple SET-NX lock; the safe default
     * is Redisson's reentrant hash lock. */
    o->kind = (o->acquire != RLOCK_ACQUIRE_SET_NX_PX || o->release != RLOCK_RELEASE_TOKEN_LUA)
                  ? RLOCK_SIMPLE : RLOCK_REENTRANT;
}

static void mirror(const char *name, unsigned long long v)
{
    metrics_set(name, "", (double)v);
}

void rcache_export_metrics(void)
{
    struct rlock_stats_snap s;
    rlock_stats_read(&lock_stats, &s);
    mirror("lab_lock_acquired_total", s.acquired);
    mirror("lab_lock_timeouts_redis_total", s.timeouts);
    mirror("lab_lock_waits_total", s.waits);
    metrics_set("lab_lock_wait_seconds_total", "", (double)s.wait_us_total / 1e6);
    mirror("lab_lock_notifications_total", s.notifications);
    mirror("lab_lock_renewals_total", s.renewals);
    mirror("lab_lock_lost_total", s.lost);
    mirror("lab_lock_foreign_release_total", s.foreign_release);
    mirror("lab_lock_unavailable_total", s.unavailable);
    mirror("lab_redlock_acquired_total", atomic_load(&redlock_stats_shared.acquired));
    mirror("lab_redlock_quorum_failures_total",
           atomic_load(&redlock_stats_shared.quorum_failures));
    mirror("lab_redlock_timeouts_total", atomic_load(&redlock_stats_shared.timeouts));
    mirror("lab_redlock_unavailable_total", atomic_load(&redlock_stats_shared.unavailable));
    mirror("lab_redlock_lost_total", atomic_load(&redlock_stats_shared.lost));
    mirror("lab_redlock_node_errors_total", atomic_load(&redlock_stats_shared.node_errors));
}
