/* Redis lock: a reentrant hash lock, or a SET NX lock with the classic mistakes on demand.
 *
 * Both come with a per-client watchdog, pub/sub-woken bounded waiting and
 * atomic counters.
 *
 * Two kinds of lock (struct rlock_opts.kind):
 *
 *   RLOCK_REENTRANT (default, Redisson's semantics)
 *     The key is a hash {token: count}. Acquire is one Lua script: create the
 *     hash when the key is absent, or add one to our count when the token is
 *     already there, refreshing PEXPIRE either way; otherwise it answers the
 *     holder's PTTL. Release is one Lua script: subtract one from our count,
 *     refresh PEXPIRE while it stays above zero, DEL + PUBLISH at zero, and
 *     report "not ours" (lost) when our token is gone. The owner is the
 *     struct rlock handle: acquiring the same handle again nests.
 *     `release` and `acquire` modes do not apply (always Lua).
 *
 *   RLOCK_SIMPLE (the seeds' "most ordinary" lock)
 *     The key is a string holding our token. Acquire and release follow the
 *     failure-mode options below; not reentrant (acquiring a held simple
 *     handle again is RLOCK_EINVAL).
 *       acquire  set-nx-px          SET key token NX PX ttl (one command)
 *                setnx-then-expire  SETNX then PEXPIRE (two commands: a crash
 *                                   in between leaves a key with no TTL)
 *       release  token-lua          Lua: GET == token ? DEL + PUBLISH : 0
 *                plain-del          GET (only to count), then DEL + PUBLISH
 *                                   whatever the value: deletes a foreign
 *                                   lock, counted as foreign_release
 *                get-then-del       GET, compare in C, DEL: two round trips,
 *                                   the lock may change hands in between
 *     Choosing any non-default acquire/release mode selects RLOCK_SIMPLE.
 *
 * Both kinds never mix on one key (a hash and a string are different types).
 *
 * Threads: struct rlock_client is shared by every thread of a process; it
 * keeps an rconn pool of hiredis contexts (a context is used by one thread
 * at a time, never shared) and ONE watchdog thread with its own connection that
 * renews every held lock with watchdog on (like Redisson's timer, rather than
 * a thread per lock). A struct rlock handle belongs to one thread at a time.
 *
 * Waiting: releases PUBLISH on "rlock:chan:{key}" from inside the release
 * script. The default lock's waiters share one subscription per channel per
 * client, held by one listener thread with its own connection, and each
 * message wakes ONE waiter (Redisson's semaphore per LockPubSub entry): no
 * herd. A waiter retries when woken or after a jittered slice of
 * min(remaining wait, holder's PTTL, 500 ms) (100 ms while the subscription
 * is not confirmed), at least 1 ms. A fair waiter subscribes to its own
 * channel on a pooled connection (slices of at most 100 ms). Never a hot
 * spin, never longer than wait_ms (plus one command timeout).
 *
 * Errors: Redis unreachable, a refused connection or an I/O timeout give
 * RLOCK_EUNAVAIL (callers answer 503); the broken context is freed and the
 * next call reconnects. Every command is bounded by cmd_timeout_ms. */
#ifndef LAB_RLOCK_H
#define LAB_RLOCK_H

#include <stdatomic.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "base/util.h"

/* Status codes returned by every call (and kept for rlock_err). */
#define RLOCK_OK        0
#define RLOCK_ERR      -1   /* unexpected reply / script error */
#define RLOCK_EUNAVAIL -2   /* Redis unreachable or timed out: answer 503 */
#define RLOCK_TIMEOUT  -3   /* lock still held by someone else after wait_ms */
#define RLOCK_ELOST    -4   /* at release, the lock was no longer ours */
#define RLOCK_EINVAL   -5   /* bad argument, or release of an unheld lock */
#define RLOCK_ENOACK   -6   /* granted, but fewer replicas than replicas_ack
                             * acknowledged it in time: released again */

#define RLOCK_KEY_MAX   200              /* longest key accepted */
#define RLOCK_TOKEN_MAX UTIL_TOKEN_MAX   /* buffer for a token, NUL included */

enum rlock_kind    { RLOCK_REENTRANT = 0, RLOCK_SIMPLE = 1 };
enum rlock_acquire { RLOCK_ACQUIRE_SET_NX_PX = 0, RLOCK_ACQUIRE_SETNX_THEN_EXPIRE = 1 };
enum rlock_release { RLOCK_RELEASE_TOKEN_LUA = 0, RLOCK_RELEASE_PLAIN_DEL = 1,
                     RLOCK_RELEASE_GET_THEN_DEL = 2 };

/* Counters, updated atomically by every thread and the watchdog. A metrics
 * endpoint reads them with rlock_stats_read() (or atomic_load). */
struct rlock_stats {
    atomic_ullong acquired;         /* successful acquisitions (nested too) */
    atomic_ullong released;         /* releases that found the lock ours */
    atomic_ullong timeouts;         /* acquire gave up after wait_ms */
    atomic_ullong waits;            /* acquisitions whose first try failed */
    atomic_ullong wait_us_total;    /* time spent waiting (acquired or not) */
    atomic_ullong notifications;    /* release messages received by waiters */
    atomic_ullong renewals;         /* successful watchdog extensions */
    atomic_ullong lost;             /* lock found not ours while held */
    atomic_ullong foreign_release;  /* plain-del deleted someone else's lock */
    atomic_ullong unavailable;      /* calls that ended in RLOCK_EUNAVAIL */
    atomic_ullong handoffs;         /* releases handed to a waiter of this
                                     * process without a Redis round trip */
};

/* Plain copy of the counters, same field names. */
struct rlock_stats_snap {
    unsigned long long acquired, released, timeouts, waits, wait_us_total,
        notifications, renewals, lost, foreign_release, unavailable, handoffs;
};

struct rconn_endpoint;

struct rlock_config {
    struct rconn_endpoint *endpoint;  /* where to connect (borrowed: it must
                                       * outlive the client); NULL: host:port */
    const char *host;          /* default "127.0.0.1" */
    int port;                  /* default 6379 */
    int connect_timeout_ms;    /* default 500 */
    int cmd_timeout_ms;        /* default 1000: bounds every command */
    const char *instance;      /* token prefix; default "<hostname>-<pid>" */
    struct rlock_stats *stats; /* shared counters; NULL: the client's own */
};

struct rlock_opts {
    enum rlock_kind kind;       /* default RLOCK_REENTRANT */
    long ttl_ms;                /* lease, default 30000, 1..86400000 */
    int watchdog;               /* renew every ttl/3 while held; default 1 */
    enum rlock_acquire acquire; /* default set-nx-px (RLOCK_SIMPLE only) */
    enum rlock_release release; /* default token-lua (RLOCK_SIMPLE only) */
    /* RLOCK_REENTRANT only (EINVAL on a simple lock): */
    int fencing;                /* INCR key":fence" inside the acquire script
                                 * and keep it as the handle's token
                                 * (rlock_fence); a nested acquire keeps it */
    int fair;                   /* Redisson's fair lock: waiters queue in
                                 * arrival order (list key":queue" and zset
                                 * key":queue:t" of waiter leases) and are
                                 * granted one at a time; a release
                                 * publishes to the next waiter's own
                                 * channel only */
    int replicas_ack;           /* 0..5: after a first grant, WAIT for this
                                 * many replicas; fewer in ack_timeout_ms
                                 * releases it and answers RLOCK_ENOACK */
    long ack_timeout_ms;        /* WAIT's bound, 1..60000 (default 100) */
};

struct rlock_client;

/* One lock on one key, owned by one thread at a time. Opaque: read it
 * through the accessors below. */
struct rlock;

/* ---- options ---------------------------------------------------------- */

/* Fill the safe defaults (reentrant, 30 s, watchdog on, set-nx-px,
 * token-lua; no fencing, not fair, no replica acknowledgement). */
void rlock_opts_default(struct rlock_opts *o);

/* TEST ONLY: milliseconds to sleep between SETNX and PEXPIRE in the seeds'
 * setnx-then-expire acquire, from LAB_TEST_SETNX_PAUSE_MS (0..60000, read
 * once; unset or bad = 0). Lets a test kill the holder between the two
 * commands and show the lock that never expires (loadtest/compare's crash
 * scenario). Never set it in production. */
long rlock_test_setnx_pause_ms(void);

/* Names used by flags and request bodies: "set-nx-px" "setnx-then-expire",
 * "token-lua" "plain-del" "get-then-del", "reentrant" "simple". parse
 * returns 0, or -1 for an unknown name (out untouched). */
int rlock_acquire_parse(const char *name, enum rlock_acquire *out);
int rlock_release_parse(const char *name, enum rlock_release *out);
int rlock_kind_parse(const char *name, enum rlock_kind *out);
const char *rlock_acquire_name(enum rlock_acquire a);
const char *rlock_release_name(enum rlock_release r);
const char *rlock_kind_name(enum rlock_kind k);
/* Every accepted name, for error messages: "token-lua, plain-del or
 * get-then-del" and "set-nx-px or setnx-then-expire". Built from the same
 * table as parse/name; constant strings. */
const char *rlock_release_choices(void);
const char *rlock_acquire_choices(void);

/* Short constant text for a status code ("ok", "unavailable", ...). */
const char *rlock_strerror(int code);

/* ---- client ----------------------------------------------------------- */

/* Create a client (thread-safe, one per process and Redis is enough). It
 * tries one connection at once: when Redis is down the client is still
 * returned with err = RLOCK_EUNAVAIL and later calls reconnect. NULL only
 * when out of memory. Free with rlock_client_free. */
struct rlock_client *rlock_client_new(const struct rlock_config *cfg);

/* Stop the watchdog thread, close every connection, free. Locks still held
 * are not released (they expire after their TTL). Accepts NULL. Every
 * struct rlock of this client must be freed first. */
void rlock_client_free(struct rlock_client *c);

/* The constructor's status: RLOCK_OK, or RLOCK_EUNAVAIL when the first
 * connection failed (the client still works once Redis is back). The
 * reason goes to *errstr when errstr is not NULL. */
int rlock_client_err(const struct rlock_client *c, const char **errstr);

/* PING over a pooled connection: RLOCK_OK or RLOCK_EUNAVAIL; a reason goes
 * to errbuf when given. For /healthz. */
int rlock_client_ping(struct rlock_client *c, char *errbuf, size_t errlen);

/* The counters this client updates (the config's, or its own). */
struct rlock_stats *rlock_client_stats(struct rlock_client *c);

/* The instance id used as token prefix. */
const char *rlock_client_instance(const struct rlock_client *c);

/* Snapshot counters with relaxed atomic loads. */
void rlock_stats_read(const struct rlock_stats *s, struct rlock_stats_snap *out);

/* ---- locks ------------------------------------------------------------ */

/* New unheld handle on `key` with a fresh token. o NULL = defaults. Returns
 * NULL only when out of memory; a bad key or option makes rlock_err()
 * RLOCK_EINVAL and every later call on it fails with RLOCK_EINVAL. */
struct rlock *rlock_new(struct rlock_client *c, const char *key,
                        const struct rlock_opts *o);

/* Acquire, waiting at most wait_ms (0 = one try). A held reentrant handle
 * nests (depth + 1). Returns RLOCK_OK, RLOCK_TIMEOUT, RLOCK_EUNAVAIL,
 * RLOCK_ERR or RLOCK_EINVAL; rlock_errstr says why. With watchdog on, the lock
 * is renewed every ttl/3 until fully released. */
int rlock_acquire(struct rlock *l, long wait_ms);

/* Release one level. At depth zero the key is deleted (never a foreign one
 * except in plain-del mode) and waiters are notified. Returns RLOCK_OK,
 * RLOCK_ELOST when the lock had expired or changed hands while held (counted
 * in stats.lost; the handle is unheld afterwards), RLOCK_EUNAVAIL (handle
 * becomes unheld; the key expires by its TTL), RLOCK_ERR, or RLOCK_EINVAL
 * when not held. */
int rlock_release(struct rlock *l);

/* 1 when the watchdog found this held lock no longer ours, else 0. A holder
 * can check it before committing work. */
int rlock_is_lost(struct rlock *l);

/* Release every level still held (best effort), then free. Accepts NULL. */
void rlock_free(struct rlock *l);

/* ---- reading a handle ------------------------------------------------ */

/* The last status and its sentence ("" when fine). A NULL handle reads as
 * RLOCK_EINVAL / "no lock". */
int rlock_err(const struct rlock *l);
const char *rlock_errstr(const struct rlock *l);
/* The key ("" for a handle rlock_new refused) and the owner token written
 * into Redis. */
const char *rlock_key(const struct rlock *l);
const char *rlock_token(const struct rlock *l);
/* The fencing token of the held lock (opts.fencing), 0 when none. */
unsigned long long rlock_fence(const struct rlock *l);
/* Local nesting count, 0 = not held. */
int rlock_depth(const struct rlock *l);
/* How long the last rlock_acquire waited (0 when its first try decided). */
long rlock_last_wait_ms(const struct rlock *l);
/* The effective options (a failure-mode option has made kind RLOCK_SIMPLE).
 * NULL for a NULL handle. */
const struct rlock_opts *rlock_get_opts(const struct rlock *l);

/* ---- shared with redlock.c -------------------------------------------- */

/* Token-checked delete on one connection: DEL key only if it holds token
 * (string lock), PUBLISH to chan when chan is not NULL. Returns 1 deleted,
 * 0 not ours, RLOCK_EUNAVAIL on I/O failure (the context is then dead and
 * must be freed), RLOCK_ERR on an unexpected reply. */
int rlock_raw_release(redisContext *ctx, const char *key, const char *chan,
                      const char *token);

/* Token-checked PEXPIRE on one connection: extend key to ttl_ms only if it
 * still holds token (hash: a reentrant lock's field, else a string lock).
 * Returns 1 extended, 0 not ours, RLOCK_EUNAVAIL on I/O failure (the
 * context is then dead and must be freed), RLOCK_ERR on an unexpected
 * reply. Used by the watchdogs of both lock kinds and of Redlock. */
int rlock_raw_renew(redisContext *ctx, const char *key, const char *token, long ttl_ms,
                    int hash);

#endif
