/* A lock's request options: what a deduction body may ask of the lock a
 * lock guard takes (lease, watchdog, the seeds' acquire/release mistakes,
 * fencing, replica acks, fairness). One struct for every lock guard; each
 * guard accepts the fields it honours (its own field rows, guard.h) and
 * answers 400 for the others. Plain data, header only. */
#ifndef LAB_LOCK_OPTS_H
#define LAB_LOCK_OPTS_H

#include "rlock.h"

#define LOCK_OPTS_TTL_MAX_MS 600000
#define LOCK_OPTS_REPLICAS_ACK_MAX 2

struct lock_req_opts {
    long ttl_ms;               /* lock_ttl_ms: lease; 0 = the instance's --lock-ttl */
    int watchdog;              /* renew the lease while held */
    int acquire;               /* enum rlock_acquire */
    int release;               /* enum rlock_release */
    int fencing;               /* issue a monotonic token and fence the write */
    long replicas_ack;         /* replicas that must hold the lock (WAIT) */
    int fair;                  /* queue waiters in arrival order */
};

/* The safe lock: instance lease, watchdog on, SET NX PX + token Lua. */
#define LOCK_REQ_OPTS_DEFAULT                                               \
    {.ttl_ms = 0, .watchdog = 1, .acquire = RLOCK_ACQUIRE_SET_NX_PX,        \
     .release = RLOCK_RELEASE_TOKEN_LUA, .fencing = 0, .replicas_ack = 0, .fair = 0}

/* The lease of a lock: the request's, else the instance default. */
static inline long lock_opts_ttl(const struct lock_req_opts *o, long default_ttl_ms)
{
    return o->ttl_ms > 0 ? o->ttl_ms : default_ttl_ms;
}

#endif
