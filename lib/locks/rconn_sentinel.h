/* rconn's internal hooks into the Sentinel follower (rconn_sentinel.c);
 * the public part is in rconn.h. */
#ifndef LAB_RCONN_SENTINEL_H
#define LAB_RCONN_SENTINEL_H

#include <stddef.h>

/* When host:port is the followed endpoint: the master to connect to in
 * out_host/out_port (asking the Sentinels when the answer is stale or
 * older than a second) and 1. Otherwise 0 and out_* untouched. */
int rconn_sentinel_route(const char *host, int port, char *out_host, size_t hostlen,
                         int *out_port);

/* 1 when host:port is the endpoint that follows Sentinel's master. */
int rconn_sentinel_followed(const char *host, int port);

/* 1 when host:port is the followed endpoint and the cached master differs
 * from ctx_host:ctx_port (a pooled connection to a former master). Asks the
 * Sentinels at most once a second. */
int rconn_sentinel_moved(const char *host, int port, const char *ctx_host, int ctx_port);

#endif
