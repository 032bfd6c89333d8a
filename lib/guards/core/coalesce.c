/* Coalescing per round trip (see coalesce.h). */
#include "guards/core/coalesce.h"

#include "base/util.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A waiting thread re-checks its deadline at least this often. */
#define COAL_WAIT_SLICE_S 0.05

/* A member's state; only QUEUED members are in a slot's open[]. LEAD: it
 * was named leader and no call of its key is in flight: it takes the
 * queue and runs it. WAKING: its answer is in, the leader is still waking
 * it (it must not return yet: its state word lives on its stack). */
enum { MEMBER_QUEUED, MEMBER_LEAD, MEMBER_TAKEN, MEMBER_WAKING, MEMBER_DONE };

/* Sleep while m->state is `seen`, at most `s` seconds (a wake-up may also
 * be spurious: callers re-read the state). */
static void member_sleep(struct coal_member *m, int seen, double s)
{
    if (s < 0.0005)
        s = 0.0005;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    syscall(SYS_futex, (int *)&m->state, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

/* Set m's state and wake it. `m` may be gone once it sees a final state
 * (DONE), so the wake-up goes out while it shows WAKING. */
static void member_set(struct coal_member *m, int state)
{
    if (state == MEMBER_DONE) {
        atomic_store(&m->state, MEMBER_WAKING);
        syscall(SYS_futex, (int *)&m->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        atomic_store(&m->state, MEMBER_DONE);
        return;
    }
    atomic_store(&m->state, state);
    syscall(SYS_futex, (int *)&m->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Caller holds c->mu. 1 when usable. */
static int ready(struct coalescer *c)
{
    if (!c->inited) {
        if (c->max <= 0 || c->max > COAL_GROUP_MAX)
            c->max = COAL_GROUP_MAX;
        c->inited = 1;
    }
    return 1;
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

/* Name the next leader among the queued, when none is named: it leads
 * now when no call is in flight, else when the call ends. Returns the
 * member to wake (state LEAD), or NULL. Caller holds mu. */
static struct coal_member *name_leader(struct coal_slot *s)
{
    if (!s->leader && s->nopen > 0)
        s->leader = s->open[0];
    if (s->leader && s->in_flight == 0) {
        struct coal_member *l = s->leader;
        atomic_store(&l->state, MEMBER_LEAD);
        return l;
    }
    return NULL;
}

/* Drop m from the queue. Caller holds mu. */
static void unqueue(struct coal_slot *s, struct coal_member *m)
{
    for (int i = 0; i < s->nopen; i++)
        if (s->open[i] == m) {
            memmove(&s->open[i], &s->open[i + 1], (size_t)(s->nopen - i - 1) * sizeof(s->open[0]));
            s->nopen--;
            break;
        }
    if (s->leader == m)
        s->leader = NULL;
}

/* The leader (state LEAD, so no call of the key is in flight): take the
 * queue, run it, answer and wake every member, name the next leader. */
static void lead(struct coalescer *c, struct coal_slot *s, struct coal_member *me,
                 coal_run_fn run, void *ctx)
{
    struct coal_member *taken[COAL_GROUP_MAX];
    pthread_mutex_lock(&c->mu);
    int n = s->nopen;
    double now = util_now();
    for (int i = 0; i < n; i++) {
        taken[i] = s->open[i];
        atomic_store(&taken[i]->state, MEMBER_TAKEN);
        taken[i]->res->lock_wait_s = now - taken[i]->t0;
    }
    s->nopen = 0;
    s->leader = NULL;
    s->in_flight++;
    c->calls++;
    c->members += (unsigned long long)n;
    pthread_mutex_unlock(&c->mu);

    run(taken, n, ctx);

    pthread_mutex_lock(&c->mu);
    s->in_flight--;
    s->users -= n;
    struct coal_member *next = name_leader(s);
    if (s->users == 0)
        s->key[0] = '\0';
    /* The next leader is woken under the lock: it cannot lead (and be
     * gone) before the wake-up is out. */
    if (next)
        member_set(next, MEMBER_LEAD);
    pthread_mutex_unlock(&c->mu);
    /* Outside the lock: a woken member returns without waiting for it. */
    for (int i = 0; i < n; i++)
        if (taken[i] != me)
            member_set(taken[i], MEMBER_DONE);
    atomic_store(&me->state, MEMBER_DONE);
}

void coal_submit(struct coalescer *c, const char *key, const struct deduct_req *req,
                 struct deduct_res *res, void *arg, coal_run_fn run, void *ctx)
{
    struct coal_member me = {.req = req, .res = res, .arg = arg, .state = MEMBER_QUEUED};
    struct coal_member *alone[1] = {&me};
    pthread_mutex_lock(&c->mu);
    struct coal_slot *s = ready(c) && strlen(key) < COAL_KEY_MAX ? slot_find(c, key) : NULL;
    if (!s || s->nopen >= c->max) {
        if (s && s->users == 0)
            s->key[0] = '\0';
        c->calls++;
        c->members++;
        pthread_mutex_unlock(&c->mu);
        run(alone, 1, ctx);
        return;
    }
    me.t0 = util_now();
    s->users++;
    s->open[s->nopen++] = &me;
    struct coal_member *lead_now = name_leader(s);   /* us, or a leader not yet woken */
    if (lead_now && lead_now != &me)
        member_set(lead_now, MEMBER_LEAD);
    pthread_mutex_unlock(&c->mu);
    for (;;) {
        int st = atomic_load(&me.state);
        if (st == MEMBER_DONE)
            return;
        if (st == MEMBER_LEAD) {
            lead(c, s, &me, run, ctx);
            return;
        }
        if (st == MEMBER_WAKING) {   /* the leader is between two stores */
            sched_yield();
            continue;
        }
        if (st == MEMBER_QUEUED && deduct_expired(req)) {
            pthread_mutex_lock(&c->mu);
            if (atomic_load(&me.state) == MEMBER_QUEUED) {
                /* Nothing was sent for us: leave, passing on the lead. */
                unqueue(s, &me);
                struct coal_member *next = name_leader(s);
                if (--s->users == 0)
                    s->key[0] = '\0';
                if (next)
                    member_set(next, MEMBER_LEAD);
                pthread_mutex_unlock(&c->mu);
                res->lock_wait_s = util_now() - me.t0;
                stock_past_deadline(req, res);
                return;
            }
            pthread_mutex_unlock(&c->mu);
            continue;
        }
        double left = st == MEMBER_QUEUED && req->deadline > 0 ? req->deadline - util_now()
                                                                : COAL_WAIT_SLICE_S;
        member_sleep(&me, st, left < COAL_WAIT_SLICE_S ? left : COAL_WAIT_SLICE_S);
    }
}

void coal_counts(struct coalescer *c, unsigned long long *calls, unsigned long long *members)
{
    pthread_mutex_lock(&c->mu);
    *calls = c->calls;
    *members = c->members;
    pthread_mutex_unlock(&c->mu);
}
