/* The Redis server the Redis guards share (redis-lock, segmented,
 * redis-decr): its option rows, one lock client (with its watchdog) and one
 * pool of data connections per process, opened by the first of those
 * guards' init and closed by the last fini. Each guard points its own
 * options/init/fini/health/export_metrics at these. */
#ifndef LAB_REDIS_SHARED_H
#define LAB_REDIS_SHARED_H

#include "guards/guard.h"

#include "locks/rconn.h"
#include "locks/rlock.h"

/* A sale decided in Redis (redis-decr) must reach MySQL within hold_ms plus
 * this, or give up; the default --redis-reload-wait (12 s) exceeds the
 * longest hold_ms (10 s) plus it. */
#define REDIS_DECIDED_WRITE_MARGIN_MS 1000

#define REDIS_SHARED_NOPTIONS 5
extern const struct cfg_opt redis_shared_options[REDIS_SHARED_NOPTIONS];
/* The rows' storage: options_conf of every Redis guard. */
struct redis_shared_conf {
    char host[128];
    long port;
    long reload_wait_ms;       /* the reconcile horizon (redis_reconcile.h) */
    char sentinels[512];       /* --redis-sentinels; "" = none */
    char master_name[128];
};
extern struct redis_shared_conf redis_shared_conf;

/* The fields every Redis guard sets the same way, in its struct guard. */
#define REDIS_SHARED_GUARD_FIELDS                                      \
    .options = redis_shared_options, .noptions = REDIS_SHARED_NOPTIONS, \
    .options_conf = &redis_shared_conf, .init = redis_shared_init,     \
    .fini = redis_shared_fini, .health = redis_shared_health,          \
    .export_metrics = redis_shared_export_metrics

/* Guard hooks (see guard.h). init is reference-counted. */
int redis_shared_init(const struct guard *self, const char *instance, char *err,
                      size_t errlen);
void redis_shared_fini(const struct guard *self);
int redis_shared_health(const char **backend, char *err, size_t errlen);
void redis_shared_export_metrics(void);

/* The shared handles; valid between init and the last fini. */
struct rlock_client *redis_shared_locks(void);
struct rconn_pool *redis_shared_pool(void);

/* The request's lock options (ttl, watchdog, acquire, release) as rlock
 * options: the safe reentrant lock unless a seeds' mistake is asked for. */
void redis_shared_lock_opts(const struct deduct_env *env, const struct deduct_req *req,
                            struct rlock_opts *o);

/* Map a failed rlock call into res: lock_timeout, backend_unavailable or
 * internal, with `what` ("Redis lock", "segment lock") in the detail. */
void redis_shared_lock_failure(int rc, const struct rlock *l, long wait_ms, const char *what,
                               struct deduct_res *res);

#endif
