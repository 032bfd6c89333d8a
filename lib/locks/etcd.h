/* A small etcd v3 client over the JSON gateway (etcd 3.4 serves it under
 * /v3/ on the client port), with libcurl: leases (grant, keep-alive,
 * revoke), the lock service (/v3/lock/lock), one range read and /health.
 *
 * Keys and values travel base64-encoded, 64-bit ids as decimal strings,
 * as the gateway's protobuf-to-JSON mapping wants them. Every call has a
 * bound (CURLOPT_TIMEOUT_MS); a refused connection, a timeout or a 5xx is
 * ETCD_EUNAVAIL, so the caller answers 503 and the next call connects
 * again by itself: nothing to restart when etcd comes back.
 *
 * A lease granted here can be watched: the shared renewer (renewer.h)
 * sends a keep-alive every ttl/3, and etcd_lease_validity_left tells the
 * holder, on the monotonic clock, how long the lease is surely still
 * alive on the server (counted from the moment the grant or the last
 * successful keep-alive was SENT, minus a drift allowance): never longer
 * than the server keeps it.
 *
 * Threads: struct etcd_client is shared by every thread (a pool of curl
 * handles, each keeping its connection open); a struct etcd_lease belongs
 * to its caller. */
#ifndef LAB_ETCD_H
#define LAB_ETCD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ETCD_OK        0
#define ETCD_ERR      -1   /* etcd answered with an error (err says which) */
#define ETCD_EUNAVAIL -2   /* no answer: refused, timed out, 5xx */
#define ETCD_TIMEOUT  -3   /* the lock call's wait ran out (lock busy) */
#define ETCD_ENOENT   -4   /* no such lease / key */

#define ETCD_ENDPOINTS_MAX 4
#define ETCD_KEY_MAX 256

struct etcd_stats {
    atomic_ullong calls;          /* HTTP calls made */
    atomic_ullong call_failures;  /* calls ending in ETCD_EUNAVAIL */
    atomic_ullong renewals;       /* keep-alives that extended a lease */
    atomic_ullong leases_lost;    /* keep-alives that found the lease gone */
};

struct etcd_client;

/* A granted lease. */
struct etcd_lease {
    int64_t id;
    long ttl_s;              /* granted by etcd (it may round a short TTL up) */
    long valid_ms;           /* what the holder counts on: at most ttl_s * 1000 */
    int64_t sent_ms;         /* util_now_ms() when the grant was sent */
    int64_t waited_ms;       /* when the lock wait's last successful keep-alive
                              * was sent (etcd_lock); 0 = none */
    uint64_t wd_id;          /* renewer registration, 0 = not watched */
    char name[ETCD_KEY_MAX]; /* what it is for (renewer's label) */
};

/* New client for "http://h:p[,http://h:p...]" (a bare host:port gets
 * http://). op_timeout_ms bounds every call but the lock wait. Connects
 * lazily. Returns NULL when out of memory or when the list is empty or
 * malformed (then err says why, when err is not NULL). */
struct etcd_client *etcd_client_new(const char *endpoints, long op_timeout_ms,
                                    struct etcd_stats *stats, char *err, size_t errlen);

/* Stop the renewer, close every connection, free. Accepts NULL. */
void etcd_client_free(struct etcd_client *c);

/* Grant a lease of ttl_s seconds; valid_ms is what the caller counts on
 * (at most ttl_s * 1000; <= 0: ttl_s * 1000). ETCD_OK with *out filled
 * (out->ttl_s is what etcd granted, which may be MORE than asked),
 * ETCD_EUNAVAIL or ETCD_ERR with err. */
int etcd_lease_grant(struct etcd_client *c, long ttl_s, long valid_ms, long timeout_ms,
                     struct etcd_lease *out, char *err, size_t errlen);

/* Keep lease alive every ttl/3 with the shared renewer until revoked.
 * Returns 0, or -1 when the renewer could not take it (the lease then
 * just runs out, and the validity check refuses). */
int etcd_lease_watch(struct etcd_client *c, struct etcd_lease *l);

/* Milliseconds the lease is surely still alive on the server, 0 when it
 * may be gone (too old, or a keep-alive found it gone). Monotonic clock. */
long etcd_lease_validity_left(struct etcd_client *c, const struct etcd_lease *l);

/* Stop renewing and revoke the lease: every key attached to it (the lock
 * key) goes with it. ETCD_OK (also when etcd no longer knew it),
 * ETCD_EUNAVAIL/ETCD_ERR with err: the lease then expires by itself. */
int etcd_lease_revoke(struct etcd_client *c, struct etcd_lease *l, long timeout_ms,
                      char *err, size_t errlen);

/* One keep-alive: the remaining TTL in seconds (> 0), 0 when the lease is
 * gone, ETCD_EUNAVAIL/ETCD_ERR. */
long etcd_lease_keepalive_once(struct etcd_client *c, int64_t id, long timeout_ms);

/* etcd's lock service: wait up to wait_ms for the lock `name`, owned by
 * lease (held until the lease is revoked or expires). While it waits, the
 * lease gets a keep-alive every op_timeout/2 as a probe (a hung etcd and
 * a busy lock both just do not answer); each one answered renews the lease
 * on the server, so it is recorded in lease->waited_ms and counts for
 * etcd_lease_validity_left (a lease nobody else renews is still alive). ETCD_OK with the lock's key in
 * key (the name, '/', the lease id in hex), ETCD_TIMEOUT when the wait ran
 * out with etcd answering (our waiting key may still exist: revoke the
 * lease), ETCD_EUNAVAIL when etcd was unreachable or a probe got no
 * answer within its bound (etcd hung during the wait), ETCD_ERR (the
 * lease is gone, or err says why). Never longer than wait_ms (a probe is
 * bounded by what is left of it); a hang is noticed within about 1.5 op
 * bounds plus libcurl's progress-callback period (up to a second). */
int etcd_lock(struct etcd_client *c, const char *name, struct etcd_lease *lease, long wait_ms,
              char *key, size_t keylen, char *err, size_t errlen);

/* The create revision of key (> 0), ETCD_ENOENT when it does not exist,
 * ETCD_EUNAVAIL/ETCD_ERR. */
int64_t etcd_create_revision(struct etcd_client *c, const char *key, long timeout_ms,
                             char *err, size_t errlen);

/* Number of keys under prefix (a range read), or <0 (ETCD_*). */
long etcd_count_prefix(struct etcd_client *c, const char *prefix, long timeout_ms,
                       char *err, size_t errlen);

/* Number of leases etcd holds now (all clients), or <0 (ETCD_*). */
long etcd_lease_count(struct etcd_client *c, long timeout_ms, char *err, size_t errlen);

/* GET /health on the endpoints: 0 healthy, -1 with err. */
int etcd_health(struct etcd_client *c, long timeout_ms, char *err, size_t errlen);

/* ---- pure helpers (unit-tested) --------------------------------------- */

/* Base64 (RFC 4648, padded) of n bytes into out (NUL-terminated). Returns
 * the length, or -1 when out is too small. */
long etcd_b64_encode(const void *in, size_t n, char *out, size_t outlen);
/* Decode base64 into out (NUL-terminated). Returns the length, or -1 on a
 * bad character or when out is too small. */
long etcd_b64_decode(const char *in, void *out, size_t outlen);

/* Whole seconds for a lease of ttl_ms: rounded up (etcd counts seconds). */
long etcd_ttl_seconds(long ttl_ms);

/* Drift allowance subtracted from a lease's validity: ttl/100 + 2 ms. */
long etcd_drift_ms(long ttl_ms);

#endif
