/* Group commits of redis-decr's MySQL writes (see decr_group.h); the
 * gathering is batched-update's (guard_batched_update.c), the writes are
 * stock_record_relative_batch's. */
#include "guards/core/decr_group.h"

#include "base/metrics.h"
#include "base/util.h"
#include "stock/relative_batch.h"
#include "stock/txn.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* SKUs with a group forming or committing at once, per instance: beyond
 * this a sale is recorded alone (still correct, just not combined). */
#define GROUP_SLOTS 64
/* Most sales per transaction. */
#define GROUP_MAX 128
/* A waiting thread re-checks its deadline at least this often. */
#define GROUP_WAIT_SLICE_S 0.05

enum member_state { MEMBER_QUEUED, MEMBER_TAKEN, MEMBER_DONE };

struct member {
    struct relative_item item;
    enum member_state state;
    pthread_cond_t cv;             /* signalled once: its answer is ready */
};

struct slot {
    char sku[STOCK_SKU_MAX + 1];   /* "" = free */
    int users;                     /* threads inside for this SKU */
    int has_leader;                /* the open group has a leader waiting */
    int committing;                /* groups of this SKU in their transaction */
    int nopen;
    struct member *open[GROUP_MAX];
    pthread_cond_t cv;             /* the next leader: a commit of the SKU ended */
};

static struct slot slots[GROUP_SLOTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_condattr_t cv_attr;
static int cv_ok;

/* Condition variables on the monotonic clock, the one deadlines use. */
static void init_slots(void)
{
    if (pthread_condattr_init(&cv_attr) != 0)
        return;
    int ok = pthread_condattr_setclock(&cv_attr, CLOCK_MONOTONIC) == 0;
    for (int i = 0; ok && i < GROUP_SLOTS; i++)
        ok = pthread_cond_init(&slots[i].cv, &cv_attr) == 0;
    cv_ok = ok;
}

/* Wait on cv until util_now() reaches `until` (one slice at most). Caller
 * holds mu. */
static void timed_wait(pthread_cond_t *cv, double until)
{
    double now = util_now(), t = until;
    if (t > now + GROUP_WAIT_SLICE_S || t <= 0)
        t = now + GROUP_WAIT_SLICE_S;
    struct timespec ts = {.tv_sec = (time_t)t,
                          .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    pthread_cond_timedwait(cv, &mu, &ts);
}

/* The slot of sku, claimed when free; NULL when the table is full. Caller
 * holds mu. */
static struct slot *slot_find(const char *sku)
{
    struct slot *free_slot = NULL;
    for (int i = 0; i < GROUP_SLOTS; i++) {
        if (slots[i].sku[0] && strcmp(slots[i].sku, sku) == 0)
            return &slots[i];
        if (!slots[i].sku[0] && !free_slot)
            free_slot = &slots[i];
    }
    if (free_slot)
        snprintf(free_slot->sku, sizeof(free_slot->sku), "%s", sku);
    return free_slot;
}

static void observe_group(int n)
{
    static const double le[] = {1, 2, 4, 8, 16, 32, 64, 128};
    metrics_observe_le("lab_decr_group_size", "", n, le, (int)(sizeof(le) / sizeof(le[0])));
}

static int record_alone(const char *guard_name, const struct deduct_env *env,
                        struct relative_item *it, decr_group_done_fn done)
{
    stock_record_relative_batch(guard_name, env, it, 1);
    observe_group(1);
    if (done)
        done(it, 1);
    return it->rc;
}

/* The leader: wait for the SKU's previous commit, take the queue, record
 * it. Called and returns with mu held. */
static void lead(const char *guard_name, const struct deduct_env *env, struct slot *s,
                 struct member *me, decr_group_done_fn done)
{
    while (s->committing > 0 && !deduct_expired(me->item.req))
        timed_wait(&s->cv, me->item.req->deadline);
    struct relative_item items[GROUP_MAX];
    struct member *taken[GROUP_MAX];
    int n = s->nopen;
    for (int i = 0; i < n; i++) {
        taken[i] = s->open[i];
        taken[i]->state = MEMBER_TAKEN;
        items[i] = taken[i]->item;
    }
    s->nopen = 0;
    s->has_leader = 0;
    s->committing++;
    pthread_mutex_unlock(&mu);

    stock_record_relative_batch(guard_name, env, items, n);
    observe_group(n);
    if (done)
        done(items, n);

    pthread_mutex_lock(&mu);
    /* One wake-up per member, and one for the next leader: no herd. */
    for (int i = 0; i < n; i++) {
        taken[i]->item.rc = items[i].rc;
        taken[i]->item.answered = items[i].answered;
        taken[i]->state = MEMBER_DONE;
        if (taken[i] != me)
            pthread_cond_signal(&taken[i]->cv);
    }
    s->committing--;
    pthread_cond_broadcast(&s->cv);
}

/* A member: wait for the leader's answer. Before the group is taken a
 * member past its deadline leaves the queue (nothing can be written for
 * it); once taken it waits for the transaction, whose every step is
 * bounded by MySQL's timeouts. Called and returns with mu held. */
static void follow(struct slot *s, struct member *me)
{
    while (me->state != MEMBER_DONE) {
        if (me->state == MEMBER_QUEUED && deduct_expired(me->item.req)) {
            for (int i = 0; i < s->nopen; i++)
                if (s->open[i] == me) {
                    memmove(&s->open[i], &s->open[i + 1],
                            (size_t)(s->nopen - i - 1) * sizeof(s->open[0]));
                    s->nopen--;
                    break;
                }
            stock_past_deadline(me->item.req, me->item.res);
            me->item.rc = STOCK_NOT_COMMITTED;
            break;
        }
        timed_wait(&me->cv, me->item.req->deadline);
    }
}

int decr_group_record(const char *guard_name, const struct deduct_env *env,
                      const struct deduct_req *req, long long seeds, void *ctx,
                      decr_group_done_fn done, struct deduct_res *res)
{
    pthread_once(&once, init_slots);
    pthread_mutex_lock(&mu);
    struct slot *s = cv_ok ? slot_find(req->sku) : NULL;
    struct member me = {.item = {.req = req, .seeds = seeds, .res = res, .ctx = ctx},
                        .state = MEMBER_QUEUED};
    if (!s || s->nopen >= GROUP_MAX || pthread_cond_init(&me.cv, &cv_attr) != 0) {
        if (s && s->users == 0)
            s->sku[0] = '\0';
        pthread_mutex_unlock(&mu);
        return record_alone(guard_name, env, &me.item, done);
    }
    s->users++;
    s->open[s->nopen++] = &me;
    if (!s->has_leader) {
        s->has_leader = 1;
        lead(guard_name, env, s, &me, done);
    } else {
        follow(s, &me);
    }
    if (--s->users == 0)
        s->sku[0] = '\0';
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&me.cv);
    return me.item.rc;
}
