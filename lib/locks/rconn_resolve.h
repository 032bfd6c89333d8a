/* Name resolution with a bound: getaddrinfo has none of its own (glibc
 * waits RES_OPTIONS timeout x attempts per query, 10 s and more when a
 * stopped container's name reaches a resolver that does not answer), so
 * rconn resolves a Redis or Sentinel host name here before it connects. */
#ifndef LAB_RCONN_RESOLVE_H
#define LAB_RCONN_RESOLVE_H

#include <stddef.h>

/* Lookups abandoned by their caller and still running at most, process
 * wide: past it a new lookup fails at once instead of adding a thread. */
#define RCONN_RESOLVE_PENDING_MAX 16

/* The first IPv4 or IPv6 address of host (numeric text into ip, iplen >=
 * 46) within timeout_ms (at least 1). A numeric host is copied without a
 * lookup. Returns 0, or -1 with a reason in err (may be NULL): no such
 * name, the lookup took longer than timeout_ms (it goes on in a detached
 * thread that frees itself; its answer is dropped), too many such lookups
 * still pending, out of memory. Thread-safe. */
int rconn_resolve(const char *host, int timeout_ms, char *ip, size_t iplen, char *err,
                  size_t errlen);

#endif
