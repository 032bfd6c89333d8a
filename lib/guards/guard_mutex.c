/* Guard `mutex`: the read-modify-write inside a pthread mutex, the seeds'
 * `synchronized`. Correct inside one process; a second instance has its own
 * mutexes, so two processes still race (the point the seeds make). SKUs map
 * onto a fixed set of striped mutexes: bounded memory whatever SKUs arrive;
 * two SKUs sharing a stripe only serialize more, never less. */
#include "guard.h"

#include "base/util.h"
#include "guards/core/lock_fields.h"
#include "stock/txn.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MUTEX_STRIPES 256

static pthread_mutex_t stripes[MUTEX_STRIPES] = {
    [0 ... MUTEX_STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER};

/* The fencing token of this process: a counter no other instance sees.
 * Monotonic here, meaningless across instances: one instance's counter
 * runs ahead and the other's writes are refused (tests/integration/
 * test_fencing.c shows it). */
static atomic_ullong fence_counter;

static unsigned stripe_of(const char *sku)
{
    unsigned h = 2166136261u;
    for (; *sku; sku++)
        h = (h ^ (unsigned char)*sku) * 16777619u;
    return h % MUTEX_STRIPES;
}

/* The absolute time a lock wait of ms milliseconds gives up at. */
static struct timespec wait_until(long ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

/* The stripes this thread holds through mutex_locked: a release of a
 * cart nests one mutex_locked per SKU (guards/core/cart_locks), and two
 * SKUs on one stripe must not wait on this thread itself. */
static _Thread_local unsigned held_stripe[CART_LINES_MAX];
static _Thread_local int nheld;

static int held_here(unsigned s)
{
    for (int i = 0; i < nheld; i++)
        if (held_stripe[i] == s)
            return 1;
    return 0;
}

/* Within this process only: a release on another instance does not see
 * this mutex, which is the cross-instance race `mutex` exists to show. */
static int mutex_locked(const struct guard *self, const struct deduct_env *env,
                        const struct deduct_req *req, guard_work_fn work, void *ctx,
                        struct deduct_res *res)
{
    const struct lock_req_opts *lo = lock_opts_of(req);
    unsigned s = stripe_of(req->sku);
    if (held_here(s)) {
        res->lock_wait_s = 0;  /* already ours (nested) */
        return guard_deadline_passed(req, res) ? -1 : work(ctx, env, req, res);
    }
    pthread_mutex_t *m = &stripes[s];
    struct timespec until = wait_until(req->lock_wait_ms);
    double t0 = util_now();
    int rc = pthread_mutex_timedlock(m, &until);
    res->lock_wait_s = util_now() - t0;
    if (rc == ETIMEDOUT) {
        res->outcome = DEDUCT_LOCK_TIMEOUT;
        snprintf(res->detail, sizeof(res->detail),
                 "in-process lock not acquired within %ld ms", req->lock_wait_ms);
        return -1;
    }
    if (rc != 0) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "pthread_mutex_timedlock: %d", rc);
        return -1;
    }
    int ret = -1;
    struct deduct_req fenced = *req;
    fenced.fencing = lo->fencing;
    if (lo->fencing)
        fenced.fence = atomic_fetch_add(&fence_counter, 1) + 1;
    int pushed = nheld < CART_LINES_MAX;   /* a cart has no more SKUs */
    if (pushed)
        held_stripe[nheld++] = s;
    if (!guard_deadline_passed(req, res))
        ret = work(ctx, env, &fenced, res);
    nheld -= pushed;
    pthread_mutex_unlock(m);
    return ret;
}

static void mutex_deduct(const struct guard *self, const struct deduct_env *env,
                         const struct deduct_req *req, struct deduct_res *res)
{
    mutex_locked(self, env, req, guard_rmw_work, (void *)self->name, res);
    stock_refused(env, req, res);
}

/* A cart's touches by stripe, then SKU: the one order in which a cart's
 * sale and a cart order's release take their stripes. By SKU alone two
 * carts could still cross: {A,B,C} with A and C on one stripe takes it
 * before B's, {B,D} with D on that stripe takes B's first. */
static int touch_stripe_cmp(const void *a, const void *b)
{
    const struct cart_touch *x = a, *y = b;
    unsigned sx = stripe_of(x->sku), sy = stripe_of(y->sku);
    return sx != sy ? (sx < sy ? -1 : 1) : strcmp(x->sku, y->sku);
}

static void mutex_lock_sort(struct cart_touch *t, int nt)
{
    qsort(t, (size_t)nt, sizeof(*t), touch_stripe_cmp);
}

/* The stripes of c's SKUs, each once (a stripe is not recursive: taking
 * it twice would wait on ourselves): ascending, as a release takes them
 * (mutex_lock_sort), or in the cart's order when c->order is AS_GIVEN.
 * Returns the count. */
static int cart_stripes(const struct cart *c, unsigned *out)
{
    struct cart_touch t[CART_LINES_MAX];
    int nt = cart_plan(c, t), n = 0;
    if (c->order == CART_ORDER_SORTED)
        mutex_lock_sort(t, nt);
    for (int k = 0; k < nt; k++) {
        unsigned s = stripe_of(t[k].sku);
        int i = 0;
        while (i < n && out[i] != s)
            i++;
        if (i == n)
            out[n++] = s;
    }
    return n;
}

/* A cart: every SKU's stripe taken in ascending order (as-given: in the
 * cart's order, on which two crossed carts of this process wait for each
 * other until lock_wait_ms runs out), a stripe not taken in time releases
 * the ones taken and sells nothing; then the bare read-modify-write of
 * every line in one transaction. Across instances it still races. */
static void mutex_cart(const struct guard *self, const struct deduct_env *env,
                       const struct cart *c, struct cart_res *res)
{
    if (lock_opts_of(&c->req)->fencing) {
        res->base.outcome = DEDUCT_BAD_REQUEST;
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "fencing is not offered for carts (one token, several rows)");
        return;
    }
    unsigned stripe[CART_LINES_MAX];
    int n = cart_stripes(c, stripe), taken = 0, rc = 0;
    struct timespec until = wait_until(c->req.lock_wait_ms);
    /* hold_ms in equal parts after each stripe, as the MySQL guards spend
     * it after each row: the per-item work done while holding the items */
    struct cart held = *c;
    held.req.hold_ms = 0;
    double t0 = util_now(), slept = 0;
    while (taken < n && (rc = pthread_mutex_timedlock(&stripes[stripe[taken]], &until)) == 0) {
        taken++;
        double s0 = util_now();
        util_sleep_ms(c->req.hold_ms / n);
        slept += util_now() - s0;
    }
    res->base.lock_wait_s = util_now() - t0 - slept;
    if (taken < n) {
        res->base.outcome = rc == ETIMEDOUT ? DEDUCT_LOCK_TIMEOUT : DEDUCT_INTERNAL;
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "in-process locks of the cart not all acquired within %ld ms (%d of %d); "
                 "nothing was sold", c->req.lock_wait_ms, taken, n);
    } else if (!guard_deadline_passed(&c->req, &res->base)) {
        stock_cart_sell(self->name, env, &held, CART_STYLE_RMW, res);
    }
    while (taken-- > 0)
        pthread_mutex_unlock(&stripes[stripe[taken]]);
}

/* Its fence is a per-process counter (see API.md: fencing). */
static const struct guard_field mutex_fields[] = {LOCK_FIELD_FENCING};

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "`none` inside a pthread mutex striped per SKU.",
    "A second instance has its own mutex: the race is back.",
    NULL,
};
static const struct guard_doc doc = {
    .needs = "MySQL",
    .use_when = "one instance only (a pthread mutex orders the threads of one process)",
    .breaks = "two or more instances",
    .origin = "the seeds' point about `synchronized`",
    .steps = doc_steps,
    .statements = "lock(stripe(sku)); SELECT stock ...; UPDATE inventory SET stock=? ...; "
        "unlock",
    .code = __FILE__,
    .lock_home = "process",
};

const struct guard guard_mutex = {
    .name = "mutex",
    .doc = &doc,
    .how = "read-modify-write inside an in-process pthread mutex per SKU",
    .expect = "correct on 1 instance, oversells on 2+",
    /* A repeated order id fails the ledger insert, or is found by the
     * refusal paths (stock_refused): no ledger read before every sale. */
    .flags = GUARD_OWN_IDEMPOTENCY,
    .fields = mutex_fields,
    .nfields = sizeof(mutex_fields) / sizeof(mutex_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .deduct = mutex_deduct,
    .deduct_cart = mutex_cart,
    .locked = mutex_locked,
    .lock_sort = mutex_lock_sort,
};
