/* A Redis endpoint: host:port, or the Sentinel-managed master it stands
 * for (see rconn.h, "Endpoint"). No process-wide state: each endpoint
 * object follows its own Sentinels. */
#include "rconn.h"
#include "rconn_sentinel.h"
#include "rconn_resolve.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ASK_CONNECT_MS 200
#define ASK_CMD_MS     300
#define RECHECK_MS     1000

/* An endpoint: the configured host:port, and when Sentinels are given the
 * follower state of the master they name. */
struct rconn_endpoint {
    pthread_mutex_t mu;        /* guards everything below but ask_mu */
    pthread_mutex_t ask_mu;    /* one thread asks at a time */
    int on;                    /* Sentinels given: follow their master */
    char host[128];            /* the configured endpoint */
    int port;
    char addr[160];            /* "host:port", for messages */
    char name[128];
    int n;
    char s_host[RCONN_SENTINELS_MAX][128];
    int s_port[RCONN_SENTINELS_MAX];
    char m_host[128];          /* the master last named; "" before the first answer */
    int m_port;
    long long asked_ms;        /* when; 0 = ask on the next connect */
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rconn_sentinel_parse(const char *list, char (*hosts)[128], int *ports, int max,
                         char *err, size_t errlen)
{
    int n = 0;
    const char *p = list;

    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        char num[16];
        char *tail;
        long port;

        if (n == max) {
            snprintf(err, errlen, "more than %d sentinels", max);
            return -1;
        }
        if (!colon || colon == p || (size_t)(colon - p) >= 128 ||
            len - (size_t)(colon - p) - 1 == 0 || len - (size_t)(colon - p) - 1 >= sizeof num) {
            snprintf(err, errlen, "sentinel '%.*s': want host:port", (int)(len > 100 ? 100 : len), p);
            return -1;
        }
        memcpy(num, colon + 1, len - (size_t)(colon - p) - 1);
        num[len - (size_t)(colon - p) - 1] = '\0';
        port = strtol(num, &tail, 10);
        if (*tail || port < 1 || port > 65535) {
            snprintf(err, errlen, "sentinel '%.*s': bad port", (int)(len > 100 ? 100 : len), p);
            return -1;
        }
        memcpy(hosts[n], p, (size_t)(colon - p));
        hosts[n][colon - p] = '\0';
        ports[n++] = (int)port;
        p = end ? end + 1 : NULL;
    }
    return n;
}

struct rconn_endpoint *rconn_endpoint_new(const char *host, int port, const char *sentinels,
                                          const char *master_name, char *err, size_t errlen)
{
    char hosts[RCONN_SENTINELS_MAX][128];
    int ports[RCONN_SENTINELS_MAX];
    int n = rconn_sentinel_parse(sentinels ? sentinels : "", hosts, ports,
                                 RCONN_SENTINELS_MAX, err, errlen);
    if (n < 0)
        return NULL;
    struct rconn_endpoint *ep = calloc(1, sizeof *ep);
    if (!ep) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&ep->mu, NULL);
    pthread_mutex_init(&ep->ask_mu, NULL);
    ep->on = n > 0;
    snprintf(ep->host, sizeof ep->host, "%s", host ? host : "127.0.0.1");
    ep->port = port;
    snprintf(ep->addr, sizeof ep->addr, "%s:%d", ep->host, port);
    snprintf(ep->name, sizeof ep->name, "%s", master_name && *master_name ? master_name : "lab");
    ep->n = n;
    memcpy(ep->s_host, hosts, sizeof hosts);
    memcpy(ep->s_port, ports, sizeof ports);
    return ep;
}

void rconn_endpoint_free(struct rconn_endpoint *ep)
{
    if (!ep)
        return;
    pthread_mutex_destroy(&ep->mu);
    pthread_mutex_destroy(&ep->ask_mu);
    free(ep);
}

const char *rconn_endpoint_addr(const struct rconn_endpoint *ep)
{
    return ep ? ep->addr : "";
}

int rconn_endpoint_followed(const struct rconn_endpoint *ep)
{
    return ep->on;
}

void rconn_endpoint_invalidate(struct rconn_endpoint *ep)
{
    if (!ep || !ep->on)
        return;
    pthread_mutex_lock(&ep->mu);
    ep->asked_ms = 0;
    pthread_mutex_unlock(&ep->mu);
}

void rconn_endpoint_master(struct rconn_endpoint *ep, char *buf, size_t len)
{
    pthread_mutex_lock(&ep->mu);
    if (ep->on && ep->m_host[0])
        snprintf(buf, len, "%s:%d", ep->m_host, ep->m_port);
    else if (len)
        buf[0] = '\0';
    pthread_mutex_unlock(&ep->mu);
}

/* One Sentinel's answer into host/port: 0, or -1 (down, slow, or it does
 * not know the master). */
static int ask_one(const char *s_host, int s_port, const char *name, char *host,
                   size_t hostlen, int *port)
{
    struct timeval ct = { 0, ASK_CONNECT_MS * 1000 };
    struct timeval rt = { 0, ASK_CMD_MS * 1000 };
    redisContext *c = NULL;
    redisReply *r = NULL;
    int rc = -1;
    char ip[64];

    /* A Sentinel's name resolves within the connect bound too (see
     * rconn_connect). */
    if (rconn_resolve(s_host, ASK_CONNECT_MS, ip, sizeof ip, NULL, 0) != 0)
        goto out;
    c = redisConnectWithTimeout(ip, s_port, ct);
    if (!c || c->err || redisSetTimeout(c, rt) != REDIS_OK)
        goto out;
    r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", name);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
        r->element[0]->len < hostlen) {
        long p = strtol(r->element[1]->str, NULL, 10);
        if (p > 0 && p <= 65535) {
            snprintf(host, hostlen, "%s", r->element[0]->str);
            *port = (int)p;
            rc = 0;
        }
    }
out:
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return rc;
}

/* Ask when stale (one thread at a time; the others use what is cached). */
static void refresh(struct rconn_endpoint *ep)
{
    char s_host[RCONN_SENTINELS_MAX][128], name[128], host[128];
    int s_port[RCONN_SENTINELS_MAX], n, port = 0;
    long long now = now_ms();

    pthread_mutex_lock(&ep->mu);
    int due = ep->asked_ms == 0 || now - ep->asked_ms >= RECHECK_MS;
    pthread_mutex_unlock(&ep->mu);
    if (!due || pthread_mutex_trylock(&ep->ask_mu) != 0)
        return;
    pthread_mutex_lock(&ep->mu);
    n = ep->n;
    memcpy(s_host, ep->s_host, sizeof s_host);
    memcpy(s_port, ep->s_port, sizeof s_port);
    memcpy(name, ep->name, sizeof name);
    pthread_mutex_unlock(&ep->mu);
    for (int i = 0; i < n; i++) {
        if (ask_one(s_host[i], s_port[i], name, host, sizeof host, &port) == 0) {
            pthread_mutex_lock(&ep->mu);
            memcpy(ep->m_host, host, sizeof host);
            ep->m_port = port;
            ep->asked_ms = now_ms();
            pthread_mutex_unlock(&ep->mu);
            break;
        }
    }
    /* No answer: keep asking on every connect (asked_ms stays old), which
     * is bounded by the per-Sentinel timeouts and the ask_mu. */
    pthread_mutex_unlock(&ep->ask_mu);
}

void rconn_endpoint_route(struct rconn_endpoint *ep, char *out_host, size_t hostlen,
                          int *out_port)
{
    if (ep->on)
        refresh(ep);
    pthread_mutex_lock(&ep->mu);
    if (ep->on && ep->m_host[0]) {
        snprintf(out_host, hostlen, "%s", ep->m_host);
        *out_port = ep->m_port;
    } else {
        snprintf(out_host, hostlen, "%s", ep->host);
        *out_port = ep->port;
    }
    pthread_mutex_unlock(&ep->mu);
}

int rconn_endpoint_moved(struct rconn_endpoint *ep, const char *ctx_host, int ctx_port)
{
    if (!ep->on)
        return 0;
    refresh(ep);
    pthread_mutex_lock(&ep->mu);
    int moved = ep->m_host[0] && ctx_host &&
                (ctx_port != ep->m_port || strcmp(ctx_host, ep->m_host) != 0);
    pthread_mutex_unlock(&ep->mu);
    return moved;
}
