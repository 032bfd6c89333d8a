/* rconn's internal hooks into an endpoint's Sentinel follower
 * (rconn_sentinel.c); the public part is in rconn.h. */
#ifndef LAB_RCONN_SENTINEL_H
#define LAB_RCONN_SENTINEL_H

#include <stddef.h>

struct rconn_endpoint;

/* Where to connect for ep now: the master its Sentinels name (asking when
 * the answer is stale or older than a second), else its own host:port. */
void rconn_endpoint_route(struct rconn_endpoint *ep, char *out_host, size_t hostlen,
                          int *out_port);

/* 1 when ep follows Sentinels. */
int rconn_endpoint_followed(const struct rconn_endpoint *ep);

/* 1 when ep follows Sentinels and the cached master differs from
 * ctx_host:ctx_port (a pooled connection to a former master). Asks the
 * Sentinels at most once a second. */
int rconn_endpoint_moved(struct rconn_endpoint *ep, const char *ctx_host, int ctx_port);

#endif
