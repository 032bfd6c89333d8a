/* Following a Sentinel-managed Redis master (see rconn.h, "Sentinel"). */
#include "rconn.h"
#include "rconn_sentinel.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ASK_CONNECT_MS 200
#define ASK_CMD_MS     300
#define RECHECK_MS     1000

static struct {
    pthread_mutex_t mu;        /* guards everything below but ask_mu */
    pthread_mutex_t ask_mu;    /* one thread asks at a time */
    int on;
    char host[128];            /* the followed (configured) endpoint */
    int port;
    char name[128];
    int n;
    char s_host[RCONN_SENTINELS_MAX][128];
    int s_port[RCONN_SENTINELS_MAX];
    char m_host[128];          /* the master last named; "" before the first answer */
    int m_port;
    long long asked_ms;        /* when; 0 = ask on the next connect */
} sn = { .mu = PTHREAD_MUTEX_INITIALIZER, .ask_mu = PTHREAD_MUTEX_INITIALIZER };

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

int rconn_sentinel_set(const char *host, int port, const char *sentinels,
                       const char *master_name, char *err, size_t errlen)
{
    char hosts[RCONN_SENTINELS_MAX][128];
    int ports[RCONN_SENTINELS_MAX];
    int n = rconn_sentinel_parse(sentinels ? sentinels : "", hosts, ports,
                                 RCONN_SENTINELS_MAX, err, errlen);

    if (n < 0)
        return -1;
    pthread_mutex_lock(&sn.mu);
    sn.on = n > 0;
    snprintf(sn.host, sizeof sn.host, "%s", host ? host : "127.0.0.1");
    sn.port = port;
    snprintf(sn.name, sizeof sn.name, "%s", master_name && *master_name ? master_name : "lab");
    sn.n = n;
    memcpy(sn.s_host, hosts, sizeof hosts);
    memcpy(sn.s_port, ports, sizeof ports);
    sn.m_host[0] = '\0';
    sn.m_port = 0;
    sn.asked_ms = 0;
    pthread_mutex_unlock(&sn.mu);
    return 0;
}

void rconn_sentinel_invalidate(void)
{
    pthread_mutex_lock(&sn.mu);
    sn.asked_ms = 0;
    pthread_mutex_unlock(&sn.mu);
}

void rconn_sentinel_master(char *buf, size_t len)
{
    pthread_mutex_lock(&sn.mu);
    if (sn.on && sn.m_host[0])
        snprintf(buf, len, "%s:%d", sn.m_host, sn.m_port);
    else if (len)
        buf[0] = '\0';
    pthread_mutex_unlock(&sn.mu);
}

/* One Sentinel's answer into host/port: 0, or -1 (down, slow, or it does
 * not know the master). */
static int ask_one(const char *s_host, int s_port, const char *name, char *host,
                   size_t hostlen, int *port)
{
    struct timeval ct = { 0, ASK_CONNECT_MS * 1000 };
    struct timeval rt = { 0, ASK_CMD_MS * 1000 };
    redisContext *c = redisConnectWithTimeout(s_host, s_port, ct);
    redisReply *r = NULL;
    int rc = -1;

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
static void refresh(void)
{
    char s_host[RCONN_SENTINELS_MAX][128], name[128], host[128];
    int s_port[RCONN_SENTINELS_MAX], n, port = 0;
    long long now = now_ms();

    pthread_mutex_lock(&sn.mu);
    int due = sn.asked_ms == 0 || now - sn.asked_ms >= RECHECK_MS;
    pthread_mutex_unlock(&sn.mu);
    if (!due || pthread_mutex_trylock(&sn.ask_mu) != 0)
        return;
    pthread_mutex_lock(&sn.mu);
    n = sn.n;
    memcpy(s_host, sn.s_host, sizeof s_host);
    memcpy(s_port, sn.s_port, sizeof s_port);
    memcpy(name, sn.name, sizeof name);
    pthread_mutex_unlock(&sn.mu);
    for (int i = 0; i < n; i++) {
        if (ask_one(s_host[i], s_port[i], name, host, sizeof host, &port) == 0) {
            pthread_mutex_lock(&sn.mu);
            memcpy(sn.m_host, host, sizeof host);
            sn.m_port = port;
            sn.asked_ms = now_ms();
            pthread_mutex_unlock(&sn.mu);
            break;
        }
    }
    /* No answer: keep asking on every connect (asked_ms stays old), which
     * is bounded by the per-Sentinel timeouts and the ask_mu. */
    pthread_mutex_unlock(&sn.ask_mu);
}

static int followed(const char *host, int port)
{
    return sn.on && port == sn.port && strcmp(host, sn.host) == 0;
}

int rconn_sentinel_followed(const char *host, int port)
{
    pthread_mutex_lock(&sn.mu);
    int f = followed(host, port);
    pthread_mutex_unlock(&sn.mu);
    return f;
}

int rconn_sentinel_route(const char *host, int port, char *out_host, size_t hostlen,
                         int *out_port)
{
    pthread_mutex_lock(&sn.mu);
    int f = followed(host, port);
    pthread_mutex_unlock(&sn.mu);
    if (!f)
        return 0;
    refresh();
    pthread_mutex_lock(&sn.mu);
    if (sn.m_host[0]) {
        snprintf(out_host, hostlen, "%s", sn.m_host);
        *out_port = sn.m_port;
    } else {
        snprintf(out_host, hostlen, "%s", host);
        *out_port = port;
    }
    pthread_mutex_unlock(&sn.mu);
    return 1;
}

int rconn_sentinel_moved(const char *host, int port, const char *ctx_host, int ctx_port)
{
    pthread_mutex_lock(&sn.mu);
    int f = followed(host, port);
    pthread_mutex_unlock(&sn.mu);
    if (!f)
        return 0;
    refresh();
    pthread_mutex_lock(&sn.mu);
    int moved = sn.m_host[0] && ctx_host &&
                (ctx_port != sn.m_port || strcmp(ctx_host, sn.m_host) != 0);
    pthread_mutex_unlock(&sn.mu);
    return moved;
}
