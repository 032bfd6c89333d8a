/* Process-wide Redis handles for the Redis guards: the lock client and the
 * Redlock object (both shared by all threads), and one plain hiredis
 * context per thread for data commands (hiredis contexts are not
 * thread-safe). Created on first use from the guard environment. */
#ifndef LAB_RCACHE_H
#define LAB_RCACHE_H

#include "guard.h"

#include <hiredis/hiredis.h>
#include <stddef.h>

struct rlock_client;
struct redlock;

/* The shared lock client; NULL only when out of memory. */
struct rlock_client *rcache_lock_client(const struct guard_env *env);
/* The shared Redlock over env->redlock_nodes; NULL when the node list is
 * unusable (err says why). */
struct redlock *rcache_redlock(const struct guard_env *env, char *err, size_t errlen);

/* This thread's data connection, (re)connected as needed. NULL with a
 * reason in err when Redis cannot be reached. */
redisContext *rcache_redis(const struct guard_env *env, char *err, size_t errlen);
/* Run one command on this thread's connection. Returns the reply (caller
 * frees with freeReplyObject) or NULL with err set; an I/O failure drops
 * the connection so the next call reconnects. An error reply is returned
 * as NULL too, with its text in err. */
redisReply *rcache_cmd(const struct guard_env *env, char *err, size_t errlen,
                       const char *fmt, ...);

struct rlock_opts;
/* The request's lock options (ttl, watchdog, acquire, release) as rlock
 * options: the safe reentrant lock unless a seeds' mistake is asked for. */
void rcache_lock_opts(const struct guard_env *env, const struct deduct_req *req,
                      struct rlock_opts *o);

/* Mirror the lock counters into the metrics table (call before rendering). */
void rcache_export_metrics(void);
/* Reachability for /healthz: 0 when Redis answers PING. */
int rcache_ping(const struct guard_env *env, char *err, size_t errlen);

#endif
