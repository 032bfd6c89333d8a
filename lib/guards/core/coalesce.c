/* Coalescing per round trip (see coalesce.h). */
#include "guards/core/coalesce.h"

#include "base/util.h"

#include <string.h>
#include <time.h>

/* A waiting thread re-checks its deadline at least this often. */
#define COAL_WAIT_SLICE_S 0.05

enum { MEMBER_QUEUED, MEMBER_TAKEN, MEMBER_DONE };

static pthread_condattr_t cv_attr;
static pthread_once_t attr_once = PTHREAD_ONCE_INIT;
static int attr_ok;

/* Condition variables on the monotonic clock, the one deadlines use. */
static void attr_init(void)
{
    attr_ok = pthread_condattr_init(&cv_attr) == 0 &&
              pthread_condattr_setclock(&cv_attr, CLOCK_MONOTONIC) == 0;
}

/* Caller holds c->mu. 1 when usable. */
static int ready(struct coalescer *c)
{
    if (c->inited)
        return c->inited > 0;
    pthread_once(&attr_once, attr_init);
    int ok = attr_ok;
    for (int i = 0; ok && i < COAL_SLOTS; i++)
        ok = pthread_cond_init(&c->slots[i].cv, &cv_attr) == 0;
    if (c->max <= 0 || c->max > COAL_GROUP_MAX)
        c->max = COAL_GROUP_MAX;
    c->inited = ok ? 1 : -1;
    return ok;
}

/* Wait on cv until util_now() reaches `until` (capped at one slice).
 * Caller holds mu. */
static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, double until)
{
    double now = util_now(), t = until;
    if (t > now + COAL_WAIT_SLICE_S || t <= 0)
        t = now + COAL_WAIT_SLICE_S;
    struct timespec ts = {.tv_sec = (time_t)t,
                          .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    pthread_cond_timedwait(cv, mu, &ts);
}

/* The slot of key, claimed when free; NULL when the table is full.
 * Caller holds mu. */
static struct coal_slot *slot_find(struct coalescer *c, const char *key)
{
    struct coal_slot *free_slot = NULL;
    for (int i = 0; i < COAL_SLOTS; i++) {
        if (c->slots[i].key[0] && strcmp(c->slots[i].key, key) == 0)
            return &c->slots[i];
        if (!c->slots[i].key[0] && !free_slot)
            free_slot = &c->slots[i];
    }
    if (free_slot)
        snprintf(free_slot->key, sizeof(free_slot->key), "%s", key);
    return free_slot;
}

/* The leader: wait for the key's call in flight, take the queue, run it.
 * Called and returns with mu held. */
static void lead(struct coalescer *c, struct coal_slot *s, struct coal_member *me,
                 coal_run_fn run, void *ctx)
{
    double t0 = util_now();
    while (s->in_flight > 0 && !deduct_expired(me->req))
        timed_wait(&s->cv, &c->mu, me->req->deadline);
    struct coal_member *taken[COAL_GROUP_MAX];
    int n = 0;
    if (s->in_flight > 0) {
        /* Past our deadline behind a slow call: leave alone; the next
         * member queued leads. */
        for (int i = 0; i < s->nopen; i++)
            if (s->open[i] == me) {
                memmove(&s->open[i], &s->open[i + 1],
                        (size_t)(s->nopen - i - 1) * sizeof(s->open[0]));
                s->nopen--;
                break;
            }
        s->has_leader = 0;
        if (s->nopen > 0)
            pthread_cond_signal(&s->open[0]->cv);   /* it becomes leader */
        stock_past_deadline(me->req, me->res);
        return;
    }
    n = s->nopen;
    for (int i = 0; i < n; i++) {
        taken[i] = s->open[i];
        taken[i]->state = MEMBER_TAKEN;
    }
    s->nopen = 0;
    s->has_leader = 0;
    s->in_flight++;
    c->calls++;
    c->members += (unsigned long long)n;
    pthread_mutex_unlock(&c->mu);

    me->res->lock_wait_s = util_now() - t0;
    run(taken, n, ctx);

    pthread_mutex_lock(&c->mu);
    /* One wake-up per member, and one for the next leader: no herd. */
    for (int i = 0; i < n; i++) {
        taken[i]->state = MEMBER_DONE;
        if (taken[i] != me)
            pthread_cond_signal(&taken[i]->cv);
    }
    s->in_flight--;
    pthread_cond_broadcast(&s->cv);
}

void coal_submit(struct coalescer *c, const char *key, const struct deduct_req *req,
                 struct deduct_res *res, void *arg, coal_run_fn run, void *ctx)
{
    struct coal_member me = {.req = req, .res = res, .arg = arg, .state = MEMBER_QUEUED};
    struct coal_member *alone[1] = {&me};
    pthread_mutex_lock(&c->mu);
    struct coal_slot *s = ready(c) && strlen(key) < COAL_KEY_MAX ? slot_find(c, key) : NULL;
    if (!s || s->nopen >= c->max || pthread_cond_init(&me.cv, &cv_attr) != 0) {
        if (s && s->users == 0)
            s->key[0] = '\0';
        c->calls++;
        c->members++;
        pthread_mutex_unlock(&c->mu);
        run(alone, 1, ctx);
        return;
    }
    s->users++;
    s->open[s->nopen++] = &me;
    double t0 = util_now();
    for (;;) {
        if (me.state == MEMBER_DONE)
            break;
        if (me.state == MEMBER_QUEUED && !s->has_leader) {
            s->has_leader = 1;
            lead(c, s, &me, run, ctx);
            break;
        }
        if (me.state == MEMBER_QUEUED && deduct_expired(req)) {
            for (int i = 0; i < s->nopen; i++)
                if (s->open[i] == &me) {
                    memmove(&s->open[i], &s->open[i + 1],
                            (size_t)(s->nopen - i - 1) * sizeof(s->open[0]));
                    s->nopen--;
                    break;
                }
            stock_past_deadline(req, res);
            break;
        }
        if (me.state == MEMBER_QUEUED)
            res->lock_wait_s = util_now() - t0;
        timed_wait(&me.cv, &c->mu, req->deadline);
    }
    if (--s->users == 0)
        s->key[0] = '\0';
    pthread_mutex_unlock(&c->mu);
    pthread_cond_destroy(&me.cv);
}

void coal_counts(struct coalescer *c, unsigned long long *calls, unsigned long long *members)
{
    pthread_mutex_lock(&c->mu);
    *calls = c->calls;
    *members = c->members;
    pthread_mutex_unlock(&c->mu);
}
