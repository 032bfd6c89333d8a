/* Coalescing per round trip: concurrent requests of one key (a SKU) in one
 * process travel to the backend together. The first to arrive leads: it
 * waits only while the key's previous call is still in flight (a group
 * forms during the call before it: no sleep on an idle system), then takes
 * everyone queued and runs them in ONE call (the caller's run function),
 * which answers each member. A queued member past its deadline leaves the
 * queue (nothing was sent for it); a taken one waits for the call, whose
 * every step the run function bounds. One key has at most one call in
 * flight, so its requests reach the backend in arrival order.
 * Each member sleeps on its own word (a Linux futex), woken once: by the
 * call that answered it, or to lead. A woken member never takes the
 * coalescer's lock again (the leader did its bookkeeping), so a group's
 * answers cost one wake-up each, not a convoy on one mutex. */
#ifndef LAB_COALESCE_H
#define LAB_COALESCE_H

#include "guards/guard.h"

#include <pthread.h>
#include <stdatomic.h>

#define COAL_SLOTS 64          /* keys with a group at once; more run alone */
#define COAL_GROUP_MAX 256     /* members of one call at most */
#define COAL_KEY_MAX (STOCK_SKU_MAX + 16)   /* a SKU and a short suffix */

/* One request waiting in a group. */
struct coal_member {
    const struct deduct_req *req;
    struct deduct_res *res;
    void *arg;                 /* the caller's, per member */
    atomic_int state;          /* coalesce.c's; the word the member sleeps on */
    double t0;                 /* when it queued (lock_wait_s) */
};

/* Run the group `m` (n >= 1, in arrival order) in one call and fill every
 * member's res. Called without any coalescer lock held. */
typedef void (*coal_run_fn)(struct coal_member *const *m, int n, void *ctx);

struct coal_slot {
    char key[COAL_KEY_MAX];        /* "" = free */
    int users, in_flight, nopen;
    struct coal_member *leader;    /* the queued member that leads next */
    struct coal_member *open[COAL_GROUP_MAX];
};

/* A coalescer: zero-initialised static storage (a guard's), ready on first
 * use. `max` (<= COAL_GROUP_MAX; 0: COAL_GROUP_MAX) caps a group. */
struct coalescer {
    pthread_mutex_t mu;
    int inited;                    /* 1 ready */
    int max;
    struct coal_slot slots[COAL_SLOTS];
    /* counters: calls made, members they carried */
    unsigned long long calls, members;
};
#define COALESCER_INIT {.mu = PTHREAD_MUTEX_INITIALIZER}

/* Sell req in a group of its key: returns when res is filled (by run, or
 * DEDUCT_DEADLINE when it expired queued). When no slot is free (more
 * than COAL_SLOTS keys at once), or the key is COAL_KEY_MAX long or more,
 * the request runs as a group of one. */
void coal_submit(struct coalescer *c, const char *key, const struct deduct_req *req,
                 struct deduct_res *res, void *arg, coal_run_fn run, void *ctx);

/* Calls made and members carried so far (for metrics). */
void coal_counts(struct coalescer *c, unsigned long long *calls, unsigned long long *members);

#endif
