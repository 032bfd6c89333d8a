/* Redis connections over hiredis, the one copy every Redis user shares (the
 * lock client, its watchdog, Redlock's nodes and the guards' data
 * commands): connect with both timeouts, a mutex-protected pool of idle
 * contexts per endpoint, and Lua scripts run by EVALSHA with a cached SHA
 * (EVAL once when the server answers NOSCRIPT).
 *
 * A hiredis context is not thread-safe: one is used by one thread at a
 * time, taken from the pool and given back. A context that saw an I/O error
 * is freed together with every idle one of its pool (after a Redis restart
 * they are all dead), so the next call reconnects; so is an idle one found
 * closed by the server before it is handed out. */
#ifndef LAB_RCONN_H
#define LAB_RCONN_H

#include <stdatomic.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#define RCONN_IDLE_MAX 64

/* ---- endpoint --------------------------------------------------------- */

/* Where connections go: host:port, or -- when Sentinels are given -- the
 * master that Redis Sentinel manages under master_name. Such an endpoint
 * asks SENTINEL get-master-addr-by-name on the first connect, again after
 * a connection error or a READONLY reply (the old master came back as a
 * replica: rconn_endpoint_invalidate), and at most once a second while
 * connections are handed out (a failover while ours stayed open). Each
 * question is bounded: every Sentinel in turn, 200 ms to connect and
 * 300 ms to answer. While none answers, the last known master (or
 * host:port itself) is used. Every endpoint keeps its own state: there is
 * no process-wide table. */
struct rconn_endpoint;

#define RCONN_SENTINELS_MAX 8
/* sentinels: "host:port,host:port,..." (at most RCONN_SENTINELS_MAX), NULL
 * or "" for a plain host:port. Returns the endpoint (the caller frees it
 * after every pool and client made on it), or NULL with a reason in err:
 * a malformed list, out of memory. Thread-safe once made. */
struct rconn_endpoint *rconn_endpoint_new(const char *host, int port, const char *sentinels,
                                          const char *master_name, char *err, size_t errlen);
/* Accepts NULL. */
void rconn_endpoint_free(struct rconn_endpoint *ep);
/* The configured "host:port", for messages. */
const char *rconn_endpoint_addr(const struct rconn_endpoint *ep);
/* The master the last question answered ("host:port" into buf), for
 * messages and tests; "" when ep follows no Sentinel or none answered. */
void rconn_endpoint_master(struct rconn_endpoint *ep, char *buf, size_t len);
/* Ask the Sentinels again on the next connect (a connection error or a
 * READONLY reply); nothing for a plain endpoint. Accepts NULL. */
void rconn_endpoint_invalidate(struct rconn_endpoint *ep);
/* 1 when r is a READONLY error: the server is a replica now. */
int rconn_readonly(const redisReply *r);

/* Connect to ep (its master, with Sentinels) with both timeouts applied.
 * Returns a live context, or NULL with a reason in errbuf (may be NULL;
 * the failed context is freed). */
redisContext *rconn_connect(struct rconn_endpoint *ep, int connect_timeout_ms,
                            int cmd_timeout_ms, char *errbuf, size_t errlen);

/* ---- pool ------------------------------------------------------------- */

struct rconn_pool;

/* A pool for endpoint ep (borrowed: it must outlive the pool); connects
 * lazily. NULL only when out of memory. Timeouts <= 0 take 500 ms
 * (connect) and 1000 ms (command). */
struct rconn_pool *rconn_pool_new(struct rconn_endpoint *ep, int connect_timeout_ms,
                                  int cmd_timeout_ms);
/* The same for a plain host:port (NULL host: 127.0.0.1), the pool owning
 * its endpoint. */
struct rconn_pool *rconn_pool_new_addr(const char *host, int port, int connect_timeout_ms,
                                       int cmd_timeout_ms);
/* The pool's endpoint. */
struct rconn_endpoint *rconn_pool_endpoint(const struct rconn_pool *p);
/* Close every idle context and free; accepts NULL. Contexts still taken
 * must be given back first. */
void rconn_pool_free(struct rconn_pool *p);

/* 1 when ctx may carry a command: no error, and its socket has neither
 * the server's FIN (Redis restarted or closed it) nor unread bytes. One
 * non-blocking peek, no round trip. */
int rconn_alive(const redisContext *ctx);

/* An idle context that is still alive (see rconn_alive; finding a dead one
 * drops every idle context of the pool), or a new connection. NULL with a
 * reason in errbuf when Redis cannot be reached. */
redisContext *rconn_get(struct rconn_pool *p, char *errbuf, size_t errlen);
/* Give a context back. One with ctx->err set is freed along with every idle
 * context of the pool. Accepts NULL. */
void rconn_put(struct rconn_pool *p, redisContext *ctx);

/* "host:port" of the pool, for messages. */
const char *rconn_pool_addr(const struct rconn_pool *p);

/* ---- scripts ---------------------------------------------------------- */

/* A Lua script, defined once as a static: RCONN_SCRIPT("return 1"). */
struct rconn_script {
    const char *src;
    atomic_int ready;          /* sha valid; written once */
    char sha[41];
};
#define RCONN_SCRIPT(lua) { .src = (lua) }

#define RCONN_SCRIPT_ARGS_MAX 136  /* keys + args kept on the stack; more are copied to the heap */

/* Run a script on ctx with nkeys keys then the rest of argv as arguments
 * (any argc; past RCONN_SCRIPT_ARGS_MAX the list is copied to the heap).
 * Returns the reply (caller frees), an error reply as is, or NULL when the connection failed (ctx->err set).
 * A READONLY reply is the caller's to notice (rconn_readonly): ctx alone
 * does not know its endpoint. */
redisReply *rconn_script_run(redisContext *ctx, struct rconn_script *s, int nkeys,
                             int argc, const char **argv);

/* ---- one command on a pooled context ---------------------------------- */

/* Run one command on a pooled context and give it back. Returns the reply
 * (caller frees with freeReplyObject), or NULL with a reason in err: Redis
 * unreachable, an I/O failure, or an error reply (its text). An EOF on a
 * kept connection is retried once on a new one: the server went away
 * before our command reached it, so it cannot apply twice. A timeout might
 * have applied it and is not retried. */
redisReply *rconn_cmd(struct rconn_pool *p, char *err, size_t errlen, const char *fmt, ...);
redisReply *rconn_cmd_argv(struct rconn_pool *p, char *err, size_t errlen, int argc,
                           const char **argv);
/* rconn_script_run on a pooled context, with the same NULL/err and EOF
 * retry rules as rconn_cmd. */
redisReply *rconn_eval(struct rconn_pool *p, char *err, size_t errlen,
                       struct rconn_script *s, int nkeys, int argc, const char **argv);

/* PING: 0 when Redis answers, -1 with a reason in err. */
int rconn_ping(struct rconn_pool *p, char *err, size_t errlen);

/* ---- Sentinel --------------------------------------------------------- */

/* Parse "host:port,host:port" into hosts[i] (each hostlen bytes) and
 * ports[i]; at most max entries. Returns the count, or -1 with a reason in
 * err (empty entry, bad port, too many). Exposed for the unit tests. */
int rconn_sentinel_parse(const char *list, char (*hosts)[128], int *ports, int max,
                         char *err, size_t errlen);

#endif
