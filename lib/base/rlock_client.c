/* The lock client: config, counters, connection pool and the one lease-renewing watchdog. */
#include "rlock_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* 1 extended, 0 not ours, RLOCK_EUNAVAIL / RLOCK_ERR. */
static int wd_renew(redisContext *ctx, const struct wd_entry *e)
{
    char ttl[24];
    const char *av[3] = { e->key, ttl, e->token };
    redisReply *r;
    int rc;

    snprintf(ttl, sizeof ttl, "%ld", e->ttl_ms);
    r = rconn_script_run(ctx, e->hash ? &s_renew_hash : &s_renew_str, 1, 3, av);
    if (!r)
        return RLOCK_EUNAVAIL;
    rc = r->type == REDIS_REPLY_INTEGER ? (r->integer == 1) : RLOCK_ERR;
    freeReplyObject(r);
    return rc;
}

static struct wd_entry *wd_find(struct rlock_client *c, uint64_t id)
{
    for (struct wd_entry *e = c->wd_head; e; e = e->next)
        if (e->id == id)
            return e;
    return NULL;
}

static long renew_period(long ttl_ms)
{
    return ttl_ms / 3 > 0 ? ttl_ms / 3 : 1;
}

/* wd_cv runs on CLOCK_MONOTONIC, the clock of util_now_ms, so a wall clock
 * jump neither fires renewals early nor starves them. */
static void ms_to_abstime(int64_t due_ms, struct timespec *ts)
{
    struct timespec now;
    int64_t delta;

    clock_gettime(CLOCK_MONOTONIC, &now);
    delta = due_ms - util_now_ms();
    if (delta < 0)
        delta = 0;
    ts->tv_sec = now.tv_sec + delta / 1000;
    ts->tv_nsec = now.tv_nsec + (delta % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

/* The single renewal thread: sleeps until the earliest due entry, renews it
 * over its own connection with the mutex released, then files the result
 * only if the entry is still registered (a release may have raced it). */
static void *wd_main(void *arg)
{
    struct rlock_client *c = arg;
    redisContext *ctx = NULL;
    struct wd_entry work;

    pthread_mutex_lock(&c->wd_mu);
    while (!c->wd_stop) {
        struct wd_entry *next = NULL;
        for (struct wd_entry *e = c->wd_head; e; e = e->next)
            if (!e->lost && (!next || e->due < next->due))
                next = e;
        if (!next) {
            pthread_cond_wait(&c->wd_cv, &c->wd_mu);
            continue;
        }
        int64_t now = util_now_ms();
        if (next->due > now) {
            struct timespec ts;
            ms_to_abstime(next->due, &ts);
            pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &ts);
            continue;
        }
        work = *next;
        next->due = now + renew_period(next->ttl_ms);
        pthread_mutex_unlock(&c->wd_mu);

        int rc = RLOCK_EUNAVAIL;
        if (ctx && !rconn_alive(ctx)) {   /* Redis restarted since the last renewal */
            redisFree(ctx);
            ctx = NULL;
        }
        if (!ctx)
            ctx = rconn_connect(c->host, c->port, c->connect_timeout_ms,
                                c->cmd_timeout_ms, NULL, 0);
        if (ctx) {
            rc = wd_renew(ctx, &work);
            if (ctx->err) {
                redisFree(ctx);
                ctx = NULL;
            }
        }

        pthread_mutex_lock(&c->wd_mu);
        struct wd_entry *e = wd_find(c, work.id);
        if (!e)
            continue;
        if (rc == 1) {
            atomic_fetch_add(&c->stats->renewals, 1);
        } else if (rc == 0) {
            e->lost = 1;
            atomic_fetch_add(&c->stats->lost, 1);
        } else {
            /* Redis away: try again soon, well before the lease runs out. */
            long retry = e->ttl_ms / 10;
            e->due = util_now_ms() + (retry < 10 ? 10 : retry);
        }
    }
    pthread_mutex_unlock(&c->wd_mu);
    if (ctx)
        redisFree(ctx);
    return NULL;
}

uint64_t rlock_wd_register(struct rlock_client *c, const struct rlock *l)
{
    struct wd_entry *e = calloc(1, sizeof *e);
    uint64_t id = 0;

    if (!e)
        return 0;
    memcpy(e->key, l->key, sizeof e->key);
    memcpy(e->token, l->token, sizeof e->token);
    e->ttl_ms = l->opts.ttl_ms;
    e->hash = l->opts.kind == RLOCK_REENTRANT;
    e->due = util_now_ms() + renew_period(e->ttl_ms);

    pthread_mutex_lock(&c->wd_mu);
    /* Started on first use: a process that never holds a watched lock
     * never pays for the thread or its connection. */
    if (!c->wd_started && !c->wd_stop) {
        if (pthread_create(&c->wd_thread, NULL, wd_main, c) == 0)
            c->wd_started = 1;
    }
    if (c->wd_started) {
        e->id = id = ++c->wd_next_id;
        e->next = c->wd_head;
        c->wd_head = e;
        pthread_cond_signal(&c->wd_cv);
        e = NULL;
    }
    pthread_mutex_unlock(&c->wd_mu);
    free(e);
    return id;
}

int rlock_wd_unregister(struct rlock_client *c, uint64_t id)
{
    struct wd_entry **pp, *e = NULL;
    int lost = 0;

    if (!id)
        return 0;
    pthread_mutex_lock(&c->wd_mu);
    for (pp = &c->wd_head; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            e = *pp;
            *pp = e->next;
            lost = e->lost;
            break;
        }
    }
    pthread_mutex_unlock(&c->wd_mu);
    free(e);
    return lost;
}

int rlock_wd_lost(struct rlock_client *c, uint64_t id)
{
    struct wd_entry *e;
    int lost = 0;

    if (!id)
        return 0;
    pthread_mutex_lock(&c->wd_mu);
    e = wd_find(c, id);
    if (e)
        lost = e->lost;
    pthread_mutex_unlock(&c->wd_mu);
    return lost;
}

/* ---- client ----------------------------------------------------------- */

struct rlock_client *rlock_client_new(const struct rlock_config *cfg)
{
    struct rlock_client *c = calloc(1, sizeof *c);
    pthread_condattr_t ca;
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
    c->pool = rconn_pool_new(c->host, c->port, c->connect_timeout_ms, c->cmd_timeout_ms);
    if (!c->pool) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->wd_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wd_cv, &ca);
    pthread_condattr_destroy(&ca);

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
    pthread_mutex_lock(&c->wd_mu);
    c->wd_stop = 1;
    pthread_cond_signal(&c->wd_cv);
    pthread_mutex_unlock(&c->wd_mu);
    if (c->wd_started)
        pthread_join(c->wd_thread, NULL);
    while (c->wd_head) {
        struct wd_entry *e = c->wd_head;
        c->wd_head = e->next;
        free(e);
    }
    rconn_pool_free(c->pool);
    pthread_cond_destroy(&c->wd_cv);
    pthread_mutex_destroy(&c->wd_mu);
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
#undef RD
}
