/* Internals of lib/locks/rlock*.c only: the handle and client structs, calls
 * between files. The calls point one way (no circle; test_layers.sh checks
 * the objects): rlock.c (acquire) -> rlock_wait.c -> rlock_try.c ->
 * rlock_fair.c -> rlock_reply.c; rlock.c -> rlock_release.c -> rlock_fair.c;
 * rlock_client.c (watchdog) is called by rlock.c and rlock_release.c. */
#ifndef LAB_RLOCK_PRIVATE_H
#define LAB_RLOCK_PRIVATE_H

#include "rconn.h"
#include "renewer.h"
#include "rlock.h"

#include <pthread.h>
#include <stdint.h>

#define RLOCK_TTL_MAX 86400000L   /* one day: a longer lease is a mistake */

struct rlock_client {
    int err;
    char errstr[128];
    char host[128];
    int port;
    int connect_timeout_ms, cmd_timeout_ms;
    char instance[64];
    struct rlock_stats own_stats;
    struct rlock_stats *stats;
    struct rconn_pool *pool;   /* lock commands and subscriptions */

    /* Watchdog: one renewal thread per client (renewer.h) renewing
     * every held lock with watchdog on, over a connection of its own. */
    struct renewer *wd;

    /* Shared subscriptions of the default lock's waiters (rlock_sub.c),
     * started on the first wait. */
    pthread_mutex_t sub_mu;
    struct rlock_sub *sub;
    int sub_failed;             /* could not start: waiters subscribe alone */
};

struct rlock {
    int err;                    /* last status, RLOCK_OK when fine */
    char errstr[128];           /* human sentence for err */
    char key[RLOCK_KEY_MAX + 1];/* "" marks a handle rlock_new refused */
    char token[RLOCK_TOKEN_MAX];/* owner id written into Redis */
    int depth;                  /* local nesting count, 0 = not held */
    long last_wait_ms;          /* time the last rlock_acquire waited */
    struct rlock_opts opts;     /* effective options */
    struct rlock_client *client;
    char chan[RLOCK_KEY_MAX + 16 + RLOCK_TOKEN_MAX]; /* fair: this handle's own */
    char fence_key[RLOCK_KEY_MAX + 8];   /* key":fence", the token counter */
    char queue_key[RLOCK_KEY_MAX + 8];   /* fair: key":queue", waiters in order */
    char qtime_key[RLOCK_KEY_MAX + 8];   /* fair: key":queue:t", waiter leases */
    unsigned long long fence;   /* token of the held lock, 0 = none */
    int enqueue;                /* fair: a busy try joins the queue */
    uint64_t wd_id;             /* watchdog registration, 0 = none */
    int wd_lost_counted;        /* lost already counted by the watchdog */
    int64_t try_ms;             /* util_now_ms() when the last try was sent */
    int64_t granted_ms;         /* held: no later than Redis set the lease
                                 * (a lock handed over keeps the first) */
    int handed;                 /* rlock_sub_handoff gave us the lock */
};

/* ---- watchdog (rlock_client.c) ---------------------------------------- */

/* Register a freshly acquired lock for renewal every ttl/3. Returns the
 * registration id, 0 when the thread could not start (no renewals). */
uint64_t rlock_wd_register(struct rlock_client *c, const struct rlock *l);
/* Remove a registration (id 0 is ignored); returns 1 when the watchdog had
 * found the lock lost, so the caller does not count the loss twice. */
int rlock_wd_unregister(struct rlock_client *c, uint64_t id);
/* 1 when registration id is still there and was found lost. */
int rlock_wd_lost(struct rlock_client *c, uint64_t id);

/* ---- handle state (inline, no file) ----------------------------------- */

/* rlock_new refused it (bad key or options): every call answers EINVAL. */
static inline int rlock_bad_handle(const struct rlock *l)
{
    return l->key[0] == '\0';
}

static inline void rlock_clear_err(struct rlock *l)
{
    l->err = RLOCK_OK;
    l->errstr[0] = '\0';
}

/* ---- reply primitives (rlock_reply.c): call nothing else of rlock* ---- */

/* Set l->err/errstr and return code; RLOCK_EUNAVAIL is counted. */
int rlock_set_err(struct rlock *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Map a NULL (I/O failure) or unexpected reply to a status; r not freed. */
int rlock_reply_fail(struct rlock *l, redisContext *ctx, redisReply *r, const char *what);
/* Read (and free) the reply of an acquire script, {granted, pttl-or-fenced[,
 * fence]}: 1 granted (l->fence set when a token came with it), 0 busy
 * (*pttl = the holder's PTTL), <0 malformed or failed (l->err set). */
int rlock_grant_reply(struct rlock *l, redisContext *ctx, redisReply *r, const char *what,
                      long *pttl);

/* ---- one attempt (rlock_try.c) ---------------------------------------- */

/* One attempt on ctx. 1 acquired, 0 busy (*pttl = holder's PTTL or -1),
 * <0 error (l->err set). */
int rlock_try_once(struct rlock *l, redisContext *ctx, long *pttl);

/* ---- fair lock (rlock_fair.c) ----------------------------------------- */

/* How long a queued waiter stays in the queue without trying again: a
 * waiter that died is skipped after this; a live one retries at least
 * every WAIT_SLICE_MAX ms. */
#define RLOCK_FAIR_WAITER_MS 1000

/* One fair attempt on ctx (see rlock_try_once); joins or refreshes the
 * queue when busy and l->enqueue is set. */
int rlock_fair_try(struct rlock *l, redisContext *ctx, long *pttl);
/* The fair release script: *n receives the count left (0 released, -1 not
 * ours); returns the reply status like rlock_reply_fail. */
int rlock_fair_release(struct rlock *l, redisContext *ctx, long long *n);
/* Leave the queue after giving up (timeout, error), waking the next
 * waiter if the lock is free. Best effort. */
void rlock_fair_leave(struct rlock *l, redisContext *ctx);

/* ---- shared subscriptions (rlock_sub.c) -------------------------------- */

struct rlock_sub;
struct rlock_sub_entry;

/* Start the listener thread of client c (its own Redis connection, made
 * and remade by the thread). NULL when out of memory or threads. */
struct rlock_sub *rlock_sub_new(struct rlock_client *c);
/* Stop the thread, free everything; accepts NULL. No waiter may be left. */
void rlock_sub_free(struct rlock_sub *s);
/* Become a waiter on chan (subscribing it if this is the first). NULL
 * when the channel table is full: subscribe on your own then. *queued
 * (when not NULL) is 1 when other waiters of this process were already
 * there on a confirmed subscription: the lock is busy, and its release
 * reaches this process either as a hand-over or as a message that wakes
 * the oldest waiter, so a newcomer need not ask Redis first. */
struct rlock_sub_entry *rlock_sub_join(struct rlock_sub *s, const char *chan, int *queued);
/* 1 when waiters of this process are queued on chan on a confirmed
 * subscription (see rlock_sub_join); a peek, nothing joined. */
int rlock_sub_queued(struct rlock_sub *s, const char *chan);
/* The client's shared subscriptions when they run, else NULL (never
 * starts them). */
struct rlock_sub *rlock_sub_of(struct rlock_client *c);
/* Wait up to ms for Redis to confirm the subscription: 1 confirmed. */
int rlock_sub_ready(struct rlock_sub *s, struct rlock_sub_entry *e, long ms);
/* Wait up to ms for a release message (a permit): 1 woken (the permit is
 * taken), 2 a holder of this process handed us the lock (self->handed set,
 * self holds it: see rlock_sub_handoff), 0 the time passed. since_us
 * (util_now_us) is when this waiter began waiting: the oldest blocked
 * waiter gets the next message or hand-over. */
int rlock_sub_wait(struct rlock_sub *s, struct rlock_sub_entry *e, long ms, int64_t since_us,
                   struct rlock *self);
/* Hand the held lock `from` (depth 1) to the oldest blocked waiter of its
 * channel in this process, without a Redis round trip: the waiter takes
 * over from's Redis owner token, watchdog registration and grant time, so
 * the key in Redis, its lease and its renewals stay exactly as they are
 * (a crashed process's lease still expires). Refused (0) when no waiter
 * is blocked, the oldest one's options differ (ttl, watchdog, kind), or
 * RLOCK_HANDOFF_RUN hand-overs in a row already kept the lock in this
 * process: then release through Redis so other processes get their turn.
 * 1 handed over: from is no longer held (depth 0, no registration). */
int rlock_sub_handoff(struct rlock_sub *s, struct rlock *from);
/* 32: at saturation on 2 instances (c64, hold 0) 8 gave 1,500-1,650
 * sales/s, 32 gave 2,070-2,330 with p99/p50 2.8-3.5, 64 and 128 pushed
 * p99/p50 to 10-36 (the other instance waits a whole run). */
#define RLOCK_HANDOFF_RUN 32
/* After a run of RLOCK_HANDOFF_RUN ended in a release through Redis, the
 * waiters of that process woken by its message wait this long before they
 * try (rlock_sub_yield_us): the other processes' waiters, woken by the same
 * message, take the key first. Longer than a pub/sub wake-up on a loaded
 * host; with no other process waiting it costs one pause per run. At c64
 * on 2 instances (hold 0, medians of 7 cells alternating): p99/p50 1.44
 * and 1,751 sales/s with it, 3.89 and 1,418 without. */
#define RLOCK_YIELD_US 3000
/* Microseconds left of e's yield (0: none), see RLOCK_YIELD_US. */
long rlock_sub_yield_us(struct rlock_sub *s, struct rlock_sub_entry *e);
/* Stop waiting on e (unsubscribed once its last waiter left); NULL ok. */
void rlock_sub_leave(struct rlock_sub *s, struct rlock_sub_entry *e);

/* ---- waiting (rlock_wait.c) ------------------------------------------- */

/* After a failed first try: subscribe to the lock's channel on a second
 * pooled connection, then retry on ctx whenever a release is published or
 * a jittered slice of min(remaining, pttl, 100 ms) passes, until
 * deadline_us (util_now_us clock). Returns what rlock_try_once last did:
 * 1 acquired, 0 still busy, <0 error with l->err set. */
int rlock_wait_acquire(struct rlock *l, redisContext *ctx, int64_t deadline_us, long pttl);

#endif
