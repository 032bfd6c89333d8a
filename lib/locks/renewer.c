/* The lease-renewing watchdog thread (see renewer.h). */
#include "renewer.h"

#include "base/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct entry {
    struct entry *next;
    uint64_t id;
    int64_t due;               /* next renewal, monotonic ms */
    int64_t renewed;           /* start of the last successful renewal, 0 none */
    int lost;                  /* renew found it not ours: no more renewals */
    struct renewer_lease lease;
};

struct renewer {
    struct renewer_ops ops;
    void *owner;
    atomic_ullong *renewals, *lost;
    /* Everything below is under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* on CLOCK_MONOTONIC */
    pthread_t thread;
    int started, stop;
    uint64_t next_id;
    struct entry *head;
};

static struct entry *find(struct renewer *w, uint64_t id)
{
    for (struct entry *e = w->head; e; e = e->next)
        if (e->id == id)
            return e;
    return NULL;
}

static long renew_period(long ttl_ms)
{
    return ttl_ms / 3 > 0 ? ttl_ms / 3 : 1;
}

/* cv runs on CLOCK_MONOTONIC, the clock of util_now_ms, so a wall clock
 * jump neither fires renewals early nor starves them. */
static void ms_to_abstime(int64_t due_ms, struct timespec *ts)
{
    struct timespec now;
    int64_t delta;

    clock_gettime(CLOCK_MONOTONIC, &now);
    delta = due_ms - util_now_ms();
    if (delta < 0)
        delta = 0;
    ts->tv_sec = now.tv_sec + delta / 1000;
    ts->tv_nsec = now.tv_nsec + (delta % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

static void count(atomic_ullong *c)
{
    if (c)
        atomic_fetch_add(c, 1);
}

/* Sleeps until the earliest due entry, renews it with the mutex released,
 * then files the result only if the entry is still registered (a removal
 * may have raced it). */
static void *renewer_main(void *arg)
{
    struct renewer *w = arg;
    void *conn = NULL;
    struct entry work;

    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct entry *next = NULL;
        for (struct entry *e = w->head; e; e = e->next)
            if (!e->lost && (!next || e->due < next->due))
                next = e;
        if (!next) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        int64_t now = util_now_ms();
        if (next->due > now) {
            struct timespec ts;
            ms_to_abstime(next->due, &ts);
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
            continue;
        }
        work = *next;
        next->due = now + renew_period(next->lease.ttl_ms);
        pthread_mutex_unlock(&w->mu);

        int rc = w->ops.renew(w->owner, &conn, &work.lease);

        pthread_mutex_lock(&w->mu);
        struct entry *e = find(w, work.id);
        if (!e)
            continue;
        if (rc == 1) {
            e->renewed = now;
            count(w->renewals);
        } else if (rc == 0) {
            e->lost = 1;
            count(w->lost);
        } else {
            long retry = e->lease.ttl_ms / 10;
            e->due = util_now_ms() + (retry < 10 ? 10 : retry);
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (conn && w->ops.close)
        w->ops.close(w->owner, conn);
    return NULL;
}

struct renewer *renewer_new(const struct renewer_ops *ops, void *owner,
                            atomic_ullong *renewals, atomic_ullong *lost)
{
    struct renewer *w = calloc(1, sizeof *w);
    pthread_condattr_t ca;

    if (!w)
        return NULL;
    w->ops = *ops;
    w->owner = owner;
    w->renewals = renewals;
    w->lost = lost;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    return w;
}

void renewer_free(struct renewer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->started)
        pthread_join(w->thread, NULL);
    while (w->head) {
        struct entry *e = w->head;
        w->head = e->next;
        free(e);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

uint64_t renewer_add(struct renewer *w, const struct renewer_lease *l)
{
    struct entry *e = calloc(1, sizeof *e);
    uint64_t id = 0;

    if (!e)
        return 0;
    e->lease = *l;
    e->due = util_now_ms() + renew_period(l->ttl_ms);

    pthread_mutex_lock(&w->mu);
    if (!w->started && !w->stop) {
        if (pthread_create(&w->thread, NULL, renewer_main, w) == 0)
            w->started = 1;
    }
    if (w->started) {
        e->id = id = ++w->next_id;
        e->next = w->head;
        w->head = e;
        pthread_cond_signal(&w->cv);
        e = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    free(e);
    return id;
}

int renewer_remove(struct renewer *w, uint64_t id)
{
    struct entry **pp, *e = NULL;
    int lost = 0;

    if (!id)
        return 0;
    pthread_mutex_lock(&w->mu);
    for (pp = &w->head; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            e = *pp;
            *pp = e->next;
            lost = e->lost;
            break;
        }
    }
    pthread_mutex_unlock(&w->mu);
    free(e);
    return lost;
}

int renewer_check(struct renewer *w, uint64_t id, int64_t *renewed_ms)
{
    struct entry *e;
    int lost = 0;

    if (renewed_ms)
        *renewed_ms = 0;
    if (!id)
        return 0;
    pthread_mutex_lock(&w->mu);
    e = find(w, id);
    if (e) {
        lost = e->lost;
        if (renewed_ms)
            *renewed_ms = e->renewed;
    }
    pthread_mutex_unlock(&w->mu);
    return lost;
}
