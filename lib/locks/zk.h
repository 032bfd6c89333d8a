/* A ZooKeeper client for one process: ONE session shared by every thread
 * (libzookeeper_mt is thread-safe), its connection state tracked from the
 * session watcher the way Curator does (connected / suspended / lost), a
 * fresh session made when the old one is lost, and the pieces of Curator's
 * InterProcessMutex that are pure logic (names, order, predecessor). The
 * lock recipe itself is in zk_lock.c.
 *
 * State, as Curator names it:
 *   CONNECTING  no session yet (the server never answered)
 *   CONNECTED   the session is alive and this client knows it
 *   SUSPENDED   the connection dropped; the session may still be alive on
 *               the server (ephemeral nodes still there) or may not: a
 *               holder cannot know, so it must not act as the holder
 *   LOST        the session expired (or we closed it): every ephemeral
 *               node it created is gone, every lock taken under it lost */
#ifndef LAB_ZK_H
#define LAB_ZK_H

#include <stddef.h>

#include <zookeeper.h>

enum zk_state { ZK_CONNECTING, ZK_CONNECTED, ZK_SUSPENDED, ZK_LOST };

/* "connecting", "connected", "suspended", "lost". */
const char *zk_state_name(enum zk_state s);

struct zk_client;
/* One zookeeper session handle; a caller holds it between
 * zk_client_acquire and zk_client_release, so it is never closed under
 * the caller even when a newer session replaces it. */
struct zk_session;

struct zk_stats {
    unsigned long long sessions;    /* sessions created */
    unsigned long long expired;     /* sessions lost (expired, or closed on purpose) */
    unsigned long long suspended;   /* connection drops */
};

/* A client for `hosts` ("127.0.0.1:2181[,h:p...]") with sessions of
 * session_ms. Connects lazily (first acquire). NULL only when out of
 * memory. */
struct zk_client *zk_client_new(const char *hosts, long session_ms);
/* Closes every session (their ephemeral nodes go at once). Every session
 * must have been released. Accepts NULL. */
void zk_client_free(struct zk_client *c);

/* The current session once it is CONNECTED, waiting at most wait_ms for
 * it (a lost session is replaced by a new one first). Returns the session
 * (release it with zk_client_release), or NULL with err saying why (not
 * connected within wait_ms; bad host list). */
struct zk_session *zk_client_acquire(struct zk_client *c, long wait_ms, char *err,
                                     size_t errlen);
void zk_client_release(struct zk_client *c, struct zk_session *s);

/* The session's handle, for zoo_* calls. */
zhandle_t *zk_session_handle(const struct zk_session *s);
/* Its state now. */
enum zk_state zk_session_state(struct zk_client *c, const struct zk_session *s);
/* Wait up to wait_ms for a SUSPENDED session to be CONNECTED again.
 * Returns its state then (CONNECTED, SUSPENDED or LOST). */
enum zk_state zk_session_wait_connected(struct zk_client *c, struct zk_session *s,
                                        long wait_ms);
/* Give the session up on purpose: its ephemeral nodes can no longer be
 * trusted to be ours (a delete that failed, a create whose outcome could
 * not be learnt). It is marked LOST, counted, and closed once the last
 * holder releases it, so the server removes its nodes; the next acquire
 * makes a new session. */
void zk_session_abandon(struct zk_client *c, struct zk_session *s, const char *why);

/* Ask the server, not the client's cached state, whether `node` still
 * exists and belongs to session s: a sync (so the server we talk to has
 * caught up with the leader, where a session's expiry is decided) and an
 * exists, one round trip after the other on the session's FIFO order.
 * Returns ZOK when it exists and its ephemeral owner is s, ZNONODE when it
 * is gone or owned by another session, or the error of the call
 * (ZSESSIONEXPIRED, ZCONNECTIONLOSS, ...). An answer of ZOK to requests
 * sent at time T means the server heard from the session after T, so it
 * cannot expire before T + the session timeout. */
int zk_session_confirm(struct zk_session *s, const char *node);
/* The session timeout the server granted s, in ms (0 when not known). */
long zk_session_timeout_ms(const struct zk_session *s);

/* The state of the client's current session (CONNECTING when none). */
enum zk_state zk_client_state(struct zk_client *c);
void zk_client_stats(struct zk_client *c, struct zk_stats *out);

/* ---- waiting for a node to go (the predecessor watch) -----------------
 * A watch slot: zk_watch_begin claims one, zk_watch_exists sets the
 * one-shot watch on `path`, zk_watch_wait sleeps until the watch fired (or
 * a session event came), zk_watch_end frees the slot. The watcher's
 * context is a slot of a static table, so a watch firing after its waiter
 * gave up touches nothing freed. */
struct zk_watch;
/* NULL when every slot is taken (the caller polls instead). */
struct zk_watch *zk_watch_begin(void);
/* zoo_wexists on path with the slot's watcher. Returns the ZOK/ZNONODE/...
 * of zoo_wexists; ZOK means it exists and the watch is set. */
int zk_watch_exists(struct zk_watch *w, zhandle_t *zh, const char *path);
/* 1 when the watch fired, 0 when wait_ms passed. */
int zk_watch_wait(struct zk_watch *w, long wait_ms);
void zk_watch_end(struct zk_watch *w);

/* ---- the mutex recipe's pure logic (unit-tested) ----------------------
 * Lock nodes are named "lock-<attempt>-<10-digit sequence>". */

/* The name of a SKU's lock folder (one path component): the SKU itself,
 * except a SKU made only of dots ("." and ".." are valid SKUs but not
 * valid ZooKeeper path components), whose dots are written "%2E". No SKU
 * contains '%', so no two SKUs share a name. Returns 0, or -1 when out
 * (outlen bytes) is too small. */
int zk_lock_dir_name(const char *sku, char *out, size_t outlen);

/* The sequence number of a lock node name, or -1 when it has none. */
long long zk_lock_seq(const char *name);
/* Index in names[0..n-1] of the node created by `attempt` (its name starts
 * with "lock-<attempt>-"), or -1. */
int zk_lock_find(char *const *names, int n, const char *attempt);
/* Where `ours` stands among names[0..n-1] by sequence: returns 0 when it
 * is the lowest (the holder), 1 when another node comes before it (then
 * *pred is the index of the node just before it: the one to watch), -1
 * when `ours` is not among them (our node is gone). Names without a
 * sequence are ignored. */
int zk_lock_position(char *const *names, int n, const char *ours, int *pred);

#endif
