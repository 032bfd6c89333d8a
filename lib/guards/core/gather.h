/* Leader/follower gathering per key (a SKU) inside one instance: the
 * first thread to arrive leads; it waits only while the key's previous
 * run is still going (a group forms meanwhile: no sleep when idle), takes
 * everyone queued and runs them in one go, then wakes each member once.
 * batched-update's scheme (guard_batched_update.c), for any work. */
#ifndef LAB_GATHER_H
#define LAB_GATHER_H

#include "stock/deduct.h"
#include "stock/keys.h"

#include <pthread.h>

#define GATHER_SLOTS 64        /* keys gathering at once; beyond: run alone */
#define GATHER_MAX 128         /* most members per run */

struct gather_member {
    void *arg;                 /* the caller's work item */
    const struct deduct_req *req;  /* its deadline bounds its wait in the queue */
    int state;                 /* internal */
    pthread_cond_t cv;         /* internal */
};

/* Run members[0..n-1] (one key, arrival order) in one go. */
typedef void (*gather_fn)(struct gather_member **members, int n, void *ctx);

struct gather_slot {
    char key[STOCK_SKU_MAX + 1];   /* "" = free */
    int users, has_leader, running, nopen;
    struct gather_member *open[GATHER_MAX];
    pthread_cond_t cv;
};

/* One table per kind of work (static storage, zero-initialised). */
struct gather_table {
    pthread_mutex_t mu;
    pthread_once_t once;
    int cv_ok;
    struct gather_slot slots[GATHER_SLOTS];
};

#define GATHER_TABLE_INIT {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT}

enum { GATHER_RAN = 0, GATHER_EXPIRED = 1, GATHER_ALONE = 2 };

/* Queue me (arg and req set) under key and return once it has been run
 * by fn (GATHER_RAN: by us as the leader or by another), or it left the
 * queue past its request's deadline before being taken (GATHER_EXPIRED:
 * never run), or the table was full (GATHER_ALONE: run with n = 1 by us).
 * The run is the leader's: its fn and ctx (the same fn for every call on a
 * table; ctx carries what belongs to the leader, such as its MySQL
 * connection). */
int gather_run(struct gather_table *t, const char *key, struct gather_member *me, gather_fn fn,
               void *ctx);

#endif
