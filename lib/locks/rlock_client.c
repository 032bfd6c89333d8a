/* The lock client: config, counters, connection pool and the one lease-renewing watchdog. */
#include "rlock_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- watchdog --------------------------------------------------------- */

/* KEYS[1] lock, ARGV[1] ttl, ARGV[2] owner. 1 extended, 0 not ours. */
static struct rconn_script s_renew_hash = RCONN_SCRIPT(
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  return redis.call('pexpire', KEYS[1], ARGV[1]) "
    "end "
    "return 0");

static struct rconn_script s_renew_str = RCONN_SCRIPT(
    "if redis.call('get', KEYS[1]) == ARGV[2] then "
    "  return redis.call('pexpire', KEYS[1], ARGV[1]) "
    "end "
    "return 0");

int rlock_raw_renew(redisContext *ctx, const char *key, const char *token, long ttl_ms,
                    int hash)
{
    char ttl[24];
    const char *av[3] = { key, ttl, token };
    redisReply *r;
    int rc;

    snprintf(ttl, sizeof ttl, "%ld", ttl_ms);
    r = rconn_script_run(ctx, hash ? &s_renew_hash : &s_renew_str, 1, 3, av);
    if (!r)
        return RLOCK_EUNAVAIL;
    rc = r->type == REDIS_REPLY_INTEGER ? (r->integer == 1) : RLOCK_ERR;
    freeReplyObject(r);
    return rc;
}

/* The renewal thread keeps a connection of its own, so renewals never wait
 * behind a busy pool. */
static int wd_renew(void *owner, void **conn, const struct renewer_lease *l)
{
    struct rlock_client *c = owner;
    redisContext *ctx = *conn;
    int rc;

    if (ctx && !rconn_alive(ctx)) {   /* Redis restarted since the last renewal */
        redisFree(ctx);
        ctx = NULL;
    }
    if (!ctx)
        ctx = rconn_connect(rconn_pool_endpoint(c->pool), c->connect_timeout_ms,
                            c->cmd_timeout_ms, NULL, 0);
    if (!ctx)
        return RLOCK_EUNAVAIL;
    rc = rlock_raw_renew(ctx, l->key, l->token, l->ttl_ms, l->flags);
    /* An error reply (READONLY: the master was demoted) or a broken
     * connection: ask Sentinel again and reconnect next time. */
    if (rc == RLOCK_ERR)
        rconn_endpoint_invalidate(rconn_pool_endpoint(c->pool));
    if (ctx->err || rc == RLOCK_ERR) {
        redisFree(ctx);
        ctx = NULL;
    }
    *conn = ctx;
    return rc;
}

static void wd_close(void *owner, void *conn)
{
    redisFree(conn);
}

static const struct renewer_ops wd_ops = { wd_renew, wd_close };

uint64_t rlock_wd_register(struct rlock_client *c, const struct rlock *l)
{
    struct renewer_lease lease;

    memcpy(lease.key, l->key, sizeof lease.key);
    memcpy(lease.token, l->token, sizeof lease.token);
    lease.ttl_ms = l->opts.ttl_ms;
    lease.flags = l->opts.kind == RLOCK_REENTRANT;
    return renewer_add(c->wd, &lease);
}

int rlock_wd_unregister(struct rlock_client *c, uint64_t id)
{
    return renewer_remove(c->wd, id);
}

int rlock_wd_lost(struct rlock_client *c, uint64_t id)
{
    return renewer_check(c->wd, id, NULL);
}

/* ---- client ----------------------------------------------------------- */

struct rlock_client *rlock_client_new(const struct rlock_config *cfg)
{
    struct rlock_client *c = calloc(1, sizeof *c);
    redisContext *ctx;

    if (!c)
        return NULL;
    snprintf(c->host, sizeof c->host, "%s", cfg && cfg->host ? cfg->host : "127.0.0.1");
    c->port = cfg && cfg->port > 0 ? cfg->port : 6379;
    c->connect_timeout_ms = cfg && cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 500;
    c->cmd_timeout_ms = cfg && cfg->cmd_timeout_ms > 0 ? cfg->cmd_timeout_ms : 1000;
    if (cfg && cfg->instance && *cfg->instance)
        snprintf(c->instance, sizeof c->instance, "%s", cfg->instance);
    else
        util_default_instance(c->instance, sizeof c->instance);
    c->stats = cfg && cfg->stats ? cfg->stats : &c->own_stats;
    pthread_mutex_init(&c->sub_mu, NULL);
    c->pool = cfg && cfg->endpoint
                  ? rconn_pool_new(cfg->endpoint, c->connect_timeout_ms, c->cmd_timeout_ms)
                  : rconn_pool_new_addr(c->host, c->port, c->connect_timeout_ms,
                                        c->cmd_timeout_ms);
    if (!c->pool) {
        free(c);
        return NULL;
    }
    c->wd = renewer_new(&wd_ops, c, &c->stats->renewals, &c->stats->lost);
    if (!c->wd) {
        rconn_pool_free(c->pool);
        free(c);
        return NULL;
    }

    /* One connection now, so a wrong address shows at startup; the client
     * is returned either way and reconnects on later calls. */
    ctx = rconn_get(c->pool, c->errstr, sizeof c->errstr);
    if (!ctx)
        c->err = RLOCK_EUNAVAIL;
    rconn_put(c->pool, ctx);
    return c;
}

void rlock_client_free(struct rlock_client *c)
{
    if (!c)
        return;
    rlock_sub_free(c->sub);
    pthread_mutex_destroy(&c->sub_mu);
    renewer_free(c->wd);
    rconn_pool_free(c->pool);
    free(c);
}

int rlock_client_ping(struct rlock_client *c, char *errbuf, size_t errlen)
{
    char tmp[128];
    redisContext *ctx = rconn_get(c->pool, tmp, sizeof tmp);
    redisReply *r;
    int rc = RLOCK_EUNAVAIL;

    if (!ctx) {
        if (errbuf)
            snprintf(errbuf, errlen, "%s", tmp);
        return rc;
    }
    r = redisCommand(ctx, "PING");
    if (r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING))
        rc = RLOCK_OK;
    else if (errbuf)
        snprintf(errbuf, errlen, "redis %s: %s", rconn_pool_addr(c->pool),
                 r ? (r->type == REDIS_REPLY_ERROR ? r->str : "odd reply") : ctx->errstr);
    if (r)
        freeReplyObject(r);
    rconn_put(c->pool, ctx);
    return rc;
}

int rlock_client_err(const struct rlock_client *c, const char **errstr)
{
    if (errstr)
        *errstr = c->errstr;
    return c->err;
}

struct rlock_stats *rlock_client_stats(struct rlock_client *c)
{
    return c->stats;
}

const char *rlock_client_instance(const struct rlock_client *c)
{
    return c->instance;
}

void rlock_stats_read(const struct rlock_stats *s, struct rlock_stats_snap *o)
{
#define RD(f) o->f = atomic_load_explicit(&s->f, memory_order_relaxed)
    RD(acquired); RD(released); RD(timeouts); RD(waits); RD(wait_us_total);
    RD(notifications); RD(renewals); RD(lost); RD(foreign_release); RD(unavailable);
    RD(handoffs);
#undef RD
}
