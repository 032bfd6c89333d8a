/* One thread that renews leases before they run out: the watchdog shared by
 * the Redis lock client (rlock_client.c) and Redlock (redlock.c).
 *
 * Each registered lease is renewed every ttl/3 by the owner's `renew`
 * callback, called from the renewal thread with no lock held. A lease the
 * callback finds no longer ours is marked lost and never renewed again; a
 * backend that could not be reached is tried again after ttl/10 (at least
 * 10 ms), well before the lease runs out. The thread starts on the first
 * registration: a process that never holds a watched lease never pays for
 * it.
 *
 * Threads: every call is safe from any thread. The callback runs only on
 * the renewal thread; its `conn` slot belongs to that thread. */
#ifndef LAB_RENEWER_H
#define LAB_RENEWER_H

#include "rlock.h"

#include <stdatomic.h>
#include <stdint.h>

/* What the renewal thread knows of one lease: copies, so it never touches
 * the holder's own structures. */
struct renewer_lease {
    char key[RLOCK_KEY_MAX + 1];
    char token[RLOCK_TOKEN_MAX];
    long ttl_ms;
    int flags;                 /* the owner's (rlock: 1 = reentrant hash lock) */
};

struct renewer_ops {
    /* Extend one lease to ttl_ms. 1 extended, 0 not ours any more (lost:
     * no more renewals), <0 could not tell (backend away: retried soon).
     * *conn is the renewal thread's slot for a connection of the owner's
     * own: NULL at first, kept between calls. */
    int (*renew)(void *owner, void **conn, const struct renewer_lease *l);
    /* Close what renew left in *conn when the thread stops; may be NULL. */
    void (*close)(void *owner, void *conn);
};

struct renewer;

/* New renewer calling ops with owner. renewals/lost, when not NULL, count
 * successful extensions and leases found lost. NULL when out of memory. */
struct renewer *renewer_new(const struct renewer_ops *ops, void *owner,
                            atomic_ullong *renewals, atomic_ullong *lost);

/* Stop the thread (waiting for a renewal in progress), drop every lease,
 * free. Accepts NULL. */
void renewer_free(struct renewer *w);

/* Renew l every ttl/3 from now on. Returns the registration id, 0 when the
 * thread could not start or memory ran out (no renewals then). */
uint64_t renewer_add(struct renewer *w, const struct renewer_lease *l);

/* Stop renewing registration id (0 is ignored). Returns 1 when it had been
 * found lost, so the caller does not count the loss twice. */
int renewer_remove(struct renewer *w, uint64_t id);

/* State of registration id: returns 1 when found lost, else 0. When
 * renewed_ms is not NULL it receives the util_now_ms() at which the last
 * successful renewal started (0: none yet). */
int renewer_check(struct renewer *w, uint64_t id, int64_t *renewed_ms);

#endif
