/* The ZooKeeper mutex recipe, with the semantics of Curator's
 * InterProcessMutex, on a zk_client session (zk.h). Each attempt creates an
 * EPHEMERAL_SEQUENTIAL node DIR/lock-<attempt>-<seq> (DIR = ROOT/{name});
 * the lowest sequence holds; a waiter watches only the node just before
 * its own (no herd) and gives up at its deadline, deleting its node. A
 * create whose reply was lost is found again by its attempt id (Curator's
 * protected mode) instead of being left behind as a lock nobody holds. The
 * node dies with the session, so a crashed holder frees the lock after the
 * session timeout; a holder whose session was lost no longer holds
 * anything. The sequence number increases per name because DIR is never
 * deleted: it is the lock's fencing token. */
#ifndef LAB_ZK_LOCK_H
#define LAB_ZK_LOCK_H

#include "zk.h"

#include <stdatomic.h>
#include <stddef.h>

#define ZK_PATH_MAX 448

/* Counted by the recipe; the caller owns them (its metrics). */
struct zk_lock_counters {
    atomic_ullong timeouts;          /* the lock stayed busy past the wait */
    atomic_ullong unavailable;       /* ZooKeeper could not be used */
    atomic_ullong lost;              /* our node vanished while we waited */
    atomic_ullong recovered_creates; /* a lost create reply, node found again */
    atomic_ullong release_failures;  /* a delete failed: the session given up */
};

struct zk_lock {
    struct zk_client *client;
    struct zk_session *s;
    struct zk_lock_counters *n;
    char dir[328];                 /* ROOT/{name}: 127 + 1 + 3 x 64 bytes */
    char node[ZK_PATH_MAX];        /* ROOT/{name}/lock-<attempt>-<seq> */
    char attempt[24];
    long long seq;                 /* the held node's sequence number */
    char *why;                     /* the caller's buffer for a failure */
    size_t whylen;
};

enum zk_lock_result {
    ZK_LOCK_HELD = 0,
    ZK_LOCK_BUSY,          /* another holder past `until` (why: a sentence) */
    ZK_LOCK_UNAVAILABLE,   /* no session, a lost session or node, an error */
    ZK_LOCK_BAD_NAME,      /* name too long for a lock path */
};

/* Take the lock `name` under `root` on a session of c, waiting for the
 * session at most connect_ms and for the lock until `until` (util_now()
 * seconds; wait_ms only names the wait in the busy sentence). ZK_LOCK_HELD:
 * l->s acquired, l->node and l->seq set; otherwise nothing is held, the
 * session is released and why (whylen bytes) says what happened. */
enum zk_lock_result zk_lock_take(struct zk_client *c, struct zk_lock_counters *n,
                                 const char *root, const char *name, long connect_ms,
                                 long wait_ms, double until, struct zk_lock *l, char *why,
                                 size_t whylen);

/* Delete our node (best effort; a delete that fails gives the session up,
 * and the server drops the node with it), keeping the session. */
void zk_lock_delete(struct zk_lock *l);
/* Delete our node and release the session. */
void zk_lock_release(struct zk_lock *l);

/* The last path component of path (a lock node's name). */
const char *zk_lock_node_name(const char *path);

#endif
