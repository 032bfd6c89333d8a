/* Redlock over K independent Redis masters: quorum, validity, undo on all, bounded retries. */
#include "redlock.h"

#include "rconn.h"
#include "renewer.h"
#include "base/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct redlock {
    struct redlock_config cfg;
    char instance[64];
    struct redlock_stats own_stats;
    struct redlock_stats *stats;
    struct rconn_pool *nodes[REDLOCK_NODES_MAX];   /* one pool per node */
    struct renewer *wd;        /* watchdog of watched leases */
};

static int wd_renew(void *owner, void **conn, const struct renewer_lease *l);
static const struct renewer_ops wd_ops = { wd_renew, NULL };

/* ---- pure arithmetic -------------------------------------------------- */

int redlock_quorum(int n)
{
    return n / 2 + 1;
}

long redlock_drift_ms(long ttl_ms)
{
    /* Rounded up: a lock slightly too short is safe, too long is not. */
    return (ttl_ms + 99) / 100 + 2;
}

long redlock_validity_ms(long ttl_ms, long elapsed_ms)
{
    return ttl_ms - elapsed_ms - redlock_drift_ms(ttl_ms);
}

int redlock_parse_nodes(const char *list, const char *default_host,
                        struct redlock_config *cfg)
{
    const char *p = list;

    cfg->nnodes = 0;
    if (!list || !*list)
        return -1;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[96], *colon, *portstr, *stop;
        struct redlock_node *n;
        long port;

        if (len == 0 || len >= sizeof item || cfg->nnodes >= REDLOCK_NODES_MAX)
            goto err;
        memcpy(item, p, len);
        item[len] = '\0';
        n = &cfg->nodes[cfg->nnodes];
        colon = strrchr(item, ':');
        if (colon) {
            *colon = '\0';
            size_t hl = strlen(item);
            if (hl == 0 || hl >= sizeof n->host)
                goto err;
            memcpy(n->host, item, hl + 1);
            portstr = colon + 1;
        } else {
            snprintf(n->host, sizeof n->host, "%s",
                     default_host && *default_host ? default_host : "127.0.0.1");
            portstr = item;
        }
        errno = 0;
        port = strtol(portstr, &stop, 10);
        if (errno || stop == portstr || *stop || port < 1 || port > 65535)
            goto err;
        n->port = (int)port;
        cfg->nnodes++;
        p += len;
        if (*p == ',' && *++p == '\0')
            goto err;   /* trailing comma */
    }
    return 0;
err:
    cfg->nnodes = 0;
    return -1;
}

/* ---- object ----------------------------------------------------------- */

void redlock_config_default(struct redlock_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->connect_timeout_ms = 50;
    cfg->cmd_timeout_ms = 50;
    cfg->retry_delay_ms = 50;
}

struct redlock *redlock_new(const struct redlock_config *cfg)
{
    struct redlock *r;

    if (!cfg || cfg->nnodes < 1 || cfg->nnodes > REDLOCK_NODES_MAX)
        return NULL;
    r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->cfg = *cfg;
    /* Short defaults: a dead or hung node must cost little per round. */
    if (r->cfg.connect_timeout_ms <= 0)
        r->cfg.connect_timeout_ms = 50;
    if (r->cfg.cmd_timeout_ms <= 0)
        r->cfg.cmd_timeout_ms = 50;
    if (r->cfg.retry_delay_ms <= 0)
        r->cfg.retry_delay_ms = 50;
    if (cfg->instance && *cfg->instance)
        snprintf(r->instance, sizeof r->instance, "%s", cfg->instance);
    else
        util_default_instance(r->instance, sizeof r->instance);
    r->cfg.instance = NULL;   /* the caller's string need not outlive us */
    r->stats = cfg->stats ? cfg->stats : &r->own_stats;
    /* A lost lease is counted once, by the unlock that finds it gone. */
    r->wd = renewer_new(&wd_ops, r, &r->stats->renewals, NULL);
    if (!r->wd) {
        free(r);
        return NULL;
    }
    for (int i = 0; i < cfg->nnodes; i++) {
        r->nodes[i] = rconn_pool_new_addr(cfg->nodes[i].host, cfg->nodes[i].port,
                                          r->cfg.connect_timeout_ms, r->cfg.cmd_timeout_ms);
        if (!r->nodes[i]) {
            redlock_free(r);
            return NULL;
        }
    }
    return r;
}

void redlock_free(struct redlock *r)
{
    if (!r)
        return;
    renewer_free(r->wd);   /* first: its thread uses the node pools */
    for (int i = 0; i < r->cfg.nnodes; i++)
        rconn_pool_free(r->nodes[i]);
    free(r);
}

int redlock_nodes(const struct redlock *r)
{
    return r ? r->cfg.nnodes : 0;
}

struct redlock_stats *redlock_stats(struct redlock *r)
{
    return r ? r->stats : NULL;
}

/* Node failures are counted where they are seen: a connection that could
 * not be made, and a context given back broken (which rconn_put then drops
 * with every idle one of that node: a restarted node leaves them all dead). */
static redisContext *node_get(struct redlock *r, int i)
{
    redisContext *ctx = rconn_get(r->nodes[i], NULL, 0);

    if (!ctx)
        atomic_fetch_add(&r->stats->node_errors, 1);
    return ctx;
}

static void node_put(struct redlock *r, int i, redisContext *ctx)
{
    if (ctx && ctx->err)
        atomic_fetch_add(&r->stats->node_errors, 1);
    rconn_put(r->nodes[i], ctx);
}

static void lease_err(struct redlock_lease *l, int code, const char *fmt, ...)
{
    va_list ap;

    l->err = code;
    va_start(ap, fmt);
    vsnprintf(l->errstr, sizeof l->errstr, fmt, ap);
    va_end(ap);
}

/* Token-checked delete on every node not in `skip` (NULL: none); returns
 * how many deleted our key. */
static int unlock_nodes(struct redlock *r, const char *key, const char *token,
                        const char *skip)
{
    int deleted = 0;

    for (int i = 0; i < r->cfg.nnodes; i++) {
        if (skip && skip[i])
            continue;
        redisContext *ctx = node_get(r, i);
        if (!ctx)
            continue;
        if (rlock_raw_release(ctx, key, NULL, token) == 1)
            deleted++;
        node_put(r, i, ctx);
    }
    return deleted;
}

/* Random in [d/2, 3d/2]: contenders that collided spread out, so one of
 * them can win a quorum next round. */
static long retry_delay(const struct redlock *r)
{
    long d = r->cfg.retry_delay_ms;

    return util_rand_range(d / 2, d / 2 + d);
}

static int unlock_all(struct redlock *r, const char *key, const char *token)
{
    return unlock_nodes(r, key, token, NULL);
}

int redlock_lock(struct redlock *r, const char *key, long ttl_ms, long wait_ms,
                 struct redlock_lease *lease)
{
    int q, attempt = 0;
    int64_t deadline;
    char ttl[24];

    memset(lease, 0, sizeof *lease);
    if (!r || !key || !*key || strlen(key) > RLOCK_KEY_MAX || ttl_ms < 1) {
        lease_err(lease, REDLOCK_EINVAL, "bad key or ttl");
        return REDLOCK_EINVAL;
    }
    q = redlock_quorum(r->cfg.nnodes);
    snprintf(lease->key, sizeof lease->key, "%s", key);
    lease->ttl_ms = ttl_ms;
    util_make_token(lease->token, sizeof lease->token, r->instance);
    snprintf(ttl, sizeof ttl, "%ld", ttl_ms);
    deadline = util_now_ms() + (wait_ms > 0 ? wait_ms : 0);

    for (;;) {
        const char *av[6] = { "SET", key, lease->token, "NX", "PX", ttl };
        int locked = 0, reached = 0;
        char refused[REDLOCK_NODES_MAX] = {0};   /* answered "not set" */
        int64_t t0 = util_now_ms();

        attempt++;
        atomic_fetch_add(&r->stats->attempts, 1);
        for (int i = 0; i < r->cfg.nnodes; i++) {
            redisContext *ctx = node_get(r, i);
            redisReply *rep;
            if (!ctx)
                continue;
            rep = redisCommandArgv(ctx, 6, av, NULL);
            if (rep && rep->type != REDIS_REPLY_ERROR) {
                reached++;
                if (rep->type == REDIS_REPLY_STATUS)
                    locked++;
                else if (rep->type == REDIS_REPLY_NIL)
                    refused[i] = 1;
            }
            if (rep)
                freeReplyObject(rep);
            node_put(r, i, ctx);
        }
        long validity = redlock_validity_ms(ttl_ms, (long)(util_now_ms() - t0));
        lease->attempts = attempt;
        lease->nodes_locked = locked;
        if (locked >= q && validity > 0) {
            lease->validity_ms = validity;
            lease->expires_ms = t0 + validity;
            atomic_fetch_add(&r->stats->acquired, 1);
            return REDLOCK_OK;
        }
        /* Partial locks would block others until their TTL: undo them all,
         * including nodes whose reply we may have missed. A node that
         * answered nil to SET NX holds someone else's key, never ours:
         * skipped (a contender that lost everywhere sends no deletes). */
        unlock_nodes(r, key, lease->token, refused);
        atomic_fetch_add(&r->stats->quorum_failures, 1);
        if (reached < q) {
            atomic_fetch_add(&r->stats->unavailable, 1);
            lease_err(lease, REDLOCK_EUNAVAIL, "only %d of %d redlock nodes reachable, "
                      "quorum is %d", reached, r->cfg.nnodes, q);
            return REDLOCK_EUNAVAIL;
        }
        long remaining = (long)(deadline - util_now_ms());
        if (remaining <= 0 || (r->cfg.max_attempts > 0 && attempt >= r->cfg.max_attempts)) {
            atomic_fetch_add(&r->stats->timeouts, 1);
            lease_err(lease, REDLOCK_TIMEOUT, "no quorum for %s after %d attempts "
                      "(last: %d of %d locked, validity %ld ms)", key, attempt,
                      locked, r->cfg.nnodes, validity);
            return REDLOCK_TIMEOUT;
        }
        long d = retry_delay(r);
        util_sleep_ms(d < remaining ? d : remaining);
    }
}

int redlock_unlock(struct redlock *r, struct redlock_lease *lease)
{
    int deleted;

    if (!r || !lease || !lease->token[0]) {
        if (lease)
            lease_err(lease, REDLOCK_EINVAL, "no lease");
        return REDLOCK_EINVAL;
    }
    /* Stop renewing first, so no renewal round runs after the delete. */
    renewer_remove(r->wd, lease->wd_id);
    lease->wd_id = 0;
    deleted = unlock_all(r, lease->key, lease->token);
    lease->token[0] = '\0';
    if (deleted >= redlock_quorum(r->cfg.nnodes)) {
        atomic_fetch_add(&r->stats->released, 1);
        lease->err = REDLOCK_OK;
        lease->errstr[0] = '\0';
        return REDLOCK_OK;
    }
    atomic_fetch_add(&r->stats->lost, 1);
    lease_err(lease, REDLOCK_ELOST, "lock %s held on only %d of %d nodes at unlock",
              lease->key, deleted, r->cfg.nnodes);
    return REDLOCK_ELOST;
}

/* ---- watchdog and validity -------------------------------------------- */

/* One renewal round on every node, from the renewal thread (over the node
 * pools: the thread is one more pool user). 1 when a quorum extended the
 * key, 0 when a majority answered "not ours" (the lease is gone for good),
 * <0 when too few nodes answered to tell: tried again soon. */
static int wd_renew(void *owner, void **conn, const struct renewer_lease *l)
{
    struct redlock *r = owner;
    int extended = 0, gone = 0, q = redlock_quorum(r->cfg.nnodes);

    for (int i = 0; i < r->cfg.nnodes; i++) {
        redisContext *ctx = node_get(r, i);
        if (!ctx)
            continue;
        int rc = rlock_raw_renew(ctx, l->key, l->token, l->ttl_ms, 0);
        if (rc == 1)
            extended++;
        else if (rc == 0)
            gone++;
        node_put(r, i, ctx);
    }
    if (extended >= q)
        return 1;
    if (gone > r->cfg.nnodes - q)
        return 0;
    return REDLOCK_EUNAVAIL;
}

int redlock_watch(struct redlock *r, struct redlock_lease *lease)
{
    struct renewer_lease l;

    if (!r || !lease || !lease->token[0] || lease->wd_id)
        return -1;
    memcpy(l.key, lease->key, sizeof l.key);
    memcpy(l.token, lease->token, sizeof l.token);
    l.ttl_ms = lease->ttl_ms;
    l.flags = 0;
    lease->wd_id = renewer_add(r->wd, &l);
    return lease->wd_id ? 0 : -1;
}

long redlock_validity_left(struct redlock *r, const struct redlock_lease *lease)
{
    int64_t renewed = 0, until = lease->expires_ms;
    long left = 0;

    if (renewer_check(r->wd, lease->wd_id, &renewed) == 0) {
        /* A quorum-extended round started at `renewed`: each of those
         * nodes keeps the key until at least renewed + ttl. */
        if (renewed > 0 && renewed + lease->ttl_ms - redlock_drift_ms(lease->ttl_ms) > until)
            until = renewed + lease->ttl_ms - redlock_drift_ms(lease->ttl_ms);
        left = (long)(until - util_now_ms());
        if (left < 0)
            left = 0;
    }
    if (left == 0)
        atomic_fetch_add(&r->stats->expired, 1);
    return left;
}
