/* The Redis server the Redis guards share (redis-lock, segmented,
 * redis-decr, redis-stream): its option rows, and one object holding one
 * lock client (with its watchdog) and one pool of data connections, which
 * the guards receive at init (guard.h: struct guard_backends). */
#ifndef LAB_REDIS_SHARED_H
#define LAB_REDIS_SHARED_H

#include "guards/guard.h"

#include "locks/rconn.h"
#include "locks/rlock.h"

#include <stdatomic.h>

/* A sale decided in Redis (redis-decr) must reach MySQL within hold_ms plus
 * this, or give up; the default --redis-reload-wait (12 s) exceeds the
 * longest hold_ms (10 s) plus it. */
#define REDIS_DECIDED_WRITE_MARGIN_MS 1000

#define REDIS_SHARED_NOPTIONS 5
#define REDIS_SHARED_PRELOAD_MAX 16
/* The Redis backend's option rows (--redis-host, ...), listed once in the
 * inventory's options by the registry when a guard uses Redis. */
extern const struct cfg_opt redis_shared_options[REDIS_SHARED_NOPTIONS];
/* The rows' storage. */
struct redis_shared_conf {
    char host[128];
    long port;
    long reload_wait_ms;       /* the reconcile horizon (redis_reconcile.h) */
    char sentinels[512];       /* --redis-sentinels; "" = none */
    char master_name[128];
};
extern struct redis_shared_conf redis_shared_conf;

/* The Redis server the Redis guards share: a plain object the registry
 * opens once (guard_init_all) when a guard has GUARD_USES_REDIS, hands to every
 * guard's init in struct guard_backends, and frees after their fini. */
struct redis_shared {
    struct redis_shared_conf conf;   /* a copy, read-only after new */
    struct rconn_endpoint *endpoint; /* host:port, or the master the
                                      * --redis-sentinels name */
    struct rlock_client *locks;      /* lock commands, its watchdog */
    struct rconn_pool *pool;         /* data commands and scripts */
    struct rlock_stats lock_stats;
    /* Warm start: the scripts the guards asked to have loaded in Redis
     * before the instance says ready (redis_shared_preload). */
    struct rconn_script *preload[REDIS_SHARED_PRELOAD_MAX];
    int npreload;              /* written at init only */
    atomic_int preloaded;      /* 1 once Redis has them all (SCRIPT LOAD) */
};

/* Open the handles (Redis may be down: they reconnect). Returns the
 * object, or NULL with err (out of memory, a bad Sentinel list). */
struct redis_shared *redis_shared_new(const struct redis_shared_conf *conf,
                                      const char *instance, char *err, size_t errlen);
/* Close it; NULL is fine. */
void redis_shared_free(struct redis_shared *rs);
/* Warm start: have s loaded in Redis (SCRIPT LOAD, compiled there) before
 * redis_shared_health first answers 0, so the first sales find it cached.
 * Call from a guard's init (before requests). Returns 0, or -1 when
 * REDIS_SHARED_PRELOAD_MAX scripts are listed already (it then loads on
 * first use, as every script does). */
int redis_shared_preload(struct redis_shared *rs, struct rconn_script *s);
/* /healthz and each worker's warm-up: 0, or -1 with err; *backend =
 * "redis". Until the listed scripts are loaded (once per process; a Redis
 * restart later costs an EVAL on first use, rconn_script_run), loads them
 * first: a failure is -1 ("not ready"). */
int redis_shared_health(struct redis_shared *rs, const char **backend, char *err,
                        size_t errlen);
/* Mirror the lock client's counters into lib/base/metrics. */
void redis_shared_export_metrics(struct redis_shared *rs);

/* replicas_ack for the Redis-stock guards: the WAIT is at most this (or
 * what the request's deadline leaves). */
#define REDIS_REPLICAS_ACK_MAX_MS 100

/* Run script s on one connection of rs's pool and, when acks > 0, WAIT
 * acks wait_ms on that same connection (WAIT counts the replicas that have
 * this connection's writes). Returns the script's reply (caller frees;
 * NULL with err when Redis failed or answered an error: nothing known to
 * be written, except a timeout). *acked: replicas that acknowledged, -1
 * when WAIT itself failed (err says why; the script did run). */
redisReply *redis_shared_eval_acked(struct redis_shared *rs, struct rconn_script *s, int nkeys,
                                    int argc, const char **argv, int acks, long wait_ms,
                                    long long *acked, char *err, size_t errlen);

/* The request's lock options (lock_fields.h: ttl, watchdog, acquire,
 * release) as rlock options: the safe reentrant lock unless a seeds'
 * mistake is asked for. */
void redis_shared_lock_opts(const struct deduct_env *env, const struct deduct_req *req,
                            struct rlock_opts *o);

/* Map a failed rlock call into res: lock_timeout, backend_unavailable or
 * internal, with `what` ("Redis lock", "segment lock") in the detail. */
void redis_shared_lock_failure(int rc, const struct rlock *l, long wait_ms, const char *what,
                               struct deduct_res *res);

/* The shared lock client's metric families (its rows), registered by the
 * registry when a guard uses Redis. */
extern const struct guard_metric redis_shared_metrics[];
extern const size_t redis_shared_nmetrics;

#endif
