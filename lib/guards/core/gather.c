/* Leader/follower gathering (see gather.h). */
#include "guards/core/gather.h"

#include "base/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* A waiting thread re-checks its deadline at least this often. */
#define WAIT_SLICE_S 0.05

enum { QUEUED, TAKEN, DONE };

static pthread_condattr_t cv_attr;
static pthread_once_t attr_once = PTHREAD_ONCE_INIT;
static int attr_ok;

static void init_attr(void)
{
    attr_ok = pthread_condattr_init(&cv_attr) == 0 &&
              pthread_condattr_setclock(&cv_attr, CLOCK_MONOTONIC) == 0;
}

static struct gather_table *initing;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

static void init_table(void)
{
    struct gather_table *t = initing;
    int ok = attr_ok;
    for (int i = 0; ok && i < GATHER_SLOTS; i++)
        ok = pthread_cond_init(&t->slots[i].cv, &cv_attr) == 0;
    t->cv_ok = ok;
}

/* Condition variables on the monotonic clock, the one deadlines use. */
static void table_init(struct gather_table *t)
{
    pthread_once(&attr_once, init_attr);
    pthread_mutex_lock(&init_mu);
    initing = t;
    pthread_once(&t->once, init_table);
    pthread_mutex_unlock(&init_mu);
}

static void timed_wait(struct gather_table *t, pthread_cond_t *cv, double until)
{
    double now = util_now(), at = until;
    if (at > now + WAIT_SLICE_S || at <= 0)
        at = now + WAIT_SLICE_S;
    struct timespec ts = {.tv_sec = (time_t)at,
                          .tv_nsec = (long)((at - (double)(time_t)at) * 1e9)};
    pthread_cond_timedwait(cv, &t->mu, &ts);
}

static struct gather_slot *slot_find(struct gather_table *t, const char *key)
{
    struct gather_slot *free_slot = NULL;
    for (int i = 0; i < GATHER_SLOTS; i++) {
        if (t->slots[i].key[0] && strcmp(t->slots[i].key, key) == 0)
            return &t->slots[i];
        if (!t->slots[i].key[0] && !free_slot)
            free_slot = &t->slots[i];
    }
    if (free_slot)
        snprintf(free_slot->key, sizeof(free_slot->key), "%s", key);
    return free_slot;
}

/* Called and returns with mu held. */
static void lead(struct gather_table *t, struct gather_slot *s, struct gather_member *me,
                 gather_fn fn, void *ctx)
{
    while (s->running > 0 && !deduct_expired(me->req))
        timed_wait(t, &s->cv, me->req->deadline);
    struct gather_member *taken[GATHER_MAX];
    int n = s->nopen;
    for (int i = 0; i < n; i++) {
        taken[i] = s->open[i];
        taken[i]->state = TAKEN;
    }
    s->nopen = 0;
    s->has_leader = 0;
    s->running++;
    pthread_mutex_unlock(&t->mu);
    fn(taken, n, ctx);
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < n; i++) {
        taken[i]->state = DONE;
        if (taken[i] != me)
            pthread_cond_signal(&taken[i]->cv);
    }
    s->running--;
    pthread_cond_broadcast(&s->cv);
}

/* Called and returns with mu held. GATHER_RAN or GATHER_EXPIRED. */
static int follow(struct gather_table *t, struct gather_slot *s, struct gather_member *me)
{
    while (me->state != DONE) {
        if (me->state == QUEUED && deduct_expired(me->req)) {
            for (int i = 0; i < s->nopen; i++)
                if (s->open[i] == me) {
                    memmove(&s->open[i], &s->open[i + 1],
                            (size_t)(s->nopen - i - 1) * sizeof(s->open[0]));
                    s->nopen--;
                    break;
                }
            return GATHER_EXPIRED;
        }
        timed_wait(t, &me->cv, me->req->deadline);
    }
    return GATHER_RAN;
}

int gather_run(struct gather_table *t, const char *key, struct gather_member *me, gather_fn fn,
               void *ctx)
{
    table_init(t);
    pthread_mutex_lock(&t->mu);
    struct gather_slot *s = t->cv_ok ? slot_find(t, key) : NULL;
    me->state = QUEUED;
    if (!s || s->nopen >= GATHER_MAX || pthread_cond_init(&me->cv, &cv_attr) != 0) {
        if (s && s->users == 0)
            s->key[0] = '\0';
        pthread_mutex_unlock(&t->mu);
        struct gather_member *one[1] = {me};
        fn(one, 1, ctx);
        return GATHER_ALONE;
    }
    s->users++;
    s->open[s->nopen++] = me;
    int rc = GATHER_RAN;
    if (!s->has_leader) {
        s->has_leader = 1;
        lead(t, s, me, fn, ctx);
    } else {
        rc = follow(t, s, me);
    }
    if (--s->users == 0)
        s->key[0] = '\0';
    pthread_mutex_unlock(&t->mu);
    pthread_cond_destroy(&me->cv);
    return rc;
}
