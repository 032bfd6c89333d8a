/* Redlock: one lock over K independent Redis masters (the Redis "distlock" algorithm).
 *
 * A lease is granted when SET key token NX PX ttl succeeds on a
 * quorum (K/2+1) of nodes and time is left: validity = ttl - elapsed - drift,
 * drift = ceil(ttl * 0.01) + 2 ms. A failed attempt deletes the key (token-
 * checked Lua) on EVERY node, then waits a random delay before the next try;
 * attempts and total wait are both bounded. Each node has short connect and
 * command timeouts (default 50 ms) so a dead or hung node costs little.
 *
 * A watched lease (redlock_watch) is renewed by the watchdog shared with
 * the Redis lock client (renewer.h), and a holder asks
 * redlock_validity_left right before its write.
 *
 * Threads: struct redlock is shared by all threads (each node has its own
 * rconn pool of hiredis contexts). A struct redlock_lease belongs
 * to the caller and carries the per-call error, hiredis-style. */
#ifndef LAB_REDLOCK_H
#define LAB_REDLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rlock.h"

#define REDLOCK_OK        0
#define REDLOCK_ERR      -1   /* unexpected reply */
#define REDLOCK_EUNAVAIL -2   /* fewer than a quorum of nodes answered: 503 */
#define REDLOCK_TIMEOUT  -3   /* contended: no quorum within wait/attempts */
#define REDLOCK_ELOST    -4   /* unlock deleted the key on less than a quorum */
#define REDLOCK_EINVAL   -5

#define REDLOCK_NODES_MAX 16

struct redlock_stats {
    atomic_ullong acquired;        /* leases granted */
    atomic_ullong released;        /* unlocks that deleted on a quorum */
    atomic_ullong attempts;        /* rounds over all nodes */
    atomic_ullong quorum_failures; /* rounds without quorum or validity */
    atomic_ullong timeouts;        /* lock calls ending in REDLOCK_TIMEOUT */
    atomic_ullong unavailable;     /* lock calls ending in REDLOCK_EUNAVAIL */
    atomic_ullong lost;            /* unlocks that found < quorum still ours */
    atomic_ullong node_errors;     /* per-node connect/command failures */
    atomic_ullong renewals;        /* watchdog rounds that extended a quorum */
    atomic_ullong expired;         /* holders that found their validity gone */
};

struct redlock_node {
    char host[64];
    int port;
};

struct redlock_config {
    int nnodes;                                  /* 1..REDLOCK_NODES_MAX */
    struct redlock_node nodes[REDLOCK_NODES_MAX];
    int connect_timeout_ms;   /* per node, default 50 */
    int cmd_timeout_ms;       /* per node, default 50 */
    int retry_delay_ms;       /* random in [d/2, 3d/2], default 50 */
    int max_attempts;         /* per lock call; 0 = until wait_ms runs out */
    const char *instance;     /* token prefix; default "<hostname>-<pid>" */
    struct redlock_stats *stats; /* shared counters; NULL: the object's own */
};

/* A granted lock. Filled by redlock_lock, consumed by redlock_unlock. */
struct redlock_lease {
    int err;                  /* last status for this lease */
    char errstr[128];
    char key[RLOCK_KEY_MAX + 1];
    char token[RLOCK_TOKEN_MAX];
    long ttl_ms;              /* the lease asked for */
    long validity_ms;         /* time the lock was safe for, at grant */
    int64_t expires_ms;       /* util_now_ms() deadline of that validity */
    uint64_t wd_id;           /* watchdog registration, 0 = none */
    int nodes_locked;         /* how many nodes accepted the SET */
    int attempts;             /* rounds this lock call took */
};

struct redlock;

/* ---- pure arithmetic (unit-tested) ------------------------------------ */

/* Majority of n nodes: n/2 + 1 (n >= 1). */
int redlock_quorum(int n);

/* Clock drift allowance: ceil(ttl * 0.01) + 2 ms. */
long redlock_drift_ms(long ttl_ms);

/* ttl - elapsed - drift; <= 0 means the lease is already worthless. */
long redlock_validity_ms(long ttl_ms, long elapsed_ms);

/* Parse "p1,p2" or "host:p1,host:p2" (host defaults to default_host or
 * 127.0.0.1) into cfg->nodes/nnodes; other cfg fields are untouched.
 * Returns 0, or -1 on a bad list (nnodes then 0). */
int redlock_parse_nodes(const char *list, const char *default_host,
                        struct redlock_config *cfg);

/* ---- lock ------------------------------------------------------------- */

/* Fill defaults (no nodes). */
void redlock_config_default(struct redlock_config *cfg);

/* New shared Redlock object; connects lazily. NULL only when out of memory
 * or when cfg is invalid (nnodes out of range). Free with redlock_free. */
struct redlock *redlock_new(const struct redlock_config *cfg);

/* Close every connection and free. Accepts NULL. */
void redlock_free(struct redlock *r);

/* Try to take `key` for ttl_ms, retrying with random delays for at most
 * wait_ms (0 = one round). Returns REDLOCK_OK with *lease filled,
 * REDLOCK_TIMEOUT, REDLOCK_EUNAVAIL (less than a quorum reachable: returned
 * at once, no retries), or REDLOCK_EINVAL; lease->err/errstr say why. */
int redlock_lock(struct redlock *r, const char *key, long ttl_ms, long wait_ms,
                 struct redlock_lease *lease);

/* Renew a granted lease every ttl/3 until unlock: a token-checked PEXPIRE
 * on every node, a round counting only when a quorum extended it (then
 * the validity runs ttl - drift from the round's start). Renewals stop
 * for good once a majority answers "not ours". Returns 0, or -1 when the
 * watchdog could not start (the lease then just runs out). */
int redlock_watch(struct redlock *r, struct redlock_lease *lease);

/* Milliseconds of validity left: from the grant, or from the last round
 * the watchdog extended on a quorum, whichever ends later, minus the drift
 * allowance; 0 when it has run out or a majority was found lost. A holder
 * checks it right before the write the lock protects; on 0 it must not
 * write (counted in stats.expired). */
long redlock_validity_left(struct redlock *r, const struct redlock_lease *lease);

/* Token-checked delete on every node (the watchdog stops first).
 * REDLOCK_OK when a quorum still held our token, REDLOCK_ELOST otherwise
 * (expired or taken; counted). */
int redlock_unlock(struct redlock *r, struct redlock_lease *lease);

int redlock_nodes(const struct redlock *r);
struct redlock_stats *redlock_stats(struct redlock *r);

#endif
