/* Guard `batched-update`: group commit inside one instance (AliSQL's
 * hot-row idea). Concurrent deductions of one SKU queue in that SKU's
 * slot; the first to arrive leads. The leader waits only while the
 * previous batch of the SKU is still committing (a batch forms during the
 * commit before it: no fixed sleep on an idle system, unless
 * --batch-window asks for one), then takes everyone queued and sells them
 * in ONE transaction on its own connection (stock/batch.c), answering each.
 * The write is conditional under the row lock, so instances stay correct
 * against each other. hold_ms is spent once per batch, by the leader,
 * under the row lock: the largest hold_ms of its members. */
#include "guards/guard.h"

#include "base/metrics.h"
#include "base/util.h"
#include "guards/batched_update/batch.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* SKUs with a batch forming or committing at once, per instance: beyond
 * this a request is sold alone (still correct, just not combined). */
#define BATCH_SLOTS 64
/* A waiting thread re-checks its deadline at least this often. */
#define BATCH_WAIT_SLICE_S 0.05

struct batch_conf {
    long batch_max;            /* most requests per transaction */
    long window_us;            /* leader's extra wait on an idle SKU */
    long inflight;             /* batches of one SKU in their transaction at once */
};

static struct batch_conf conf = {128, 0, 1};   /* until options are parsed */

static const struct cfg_opt options[] = {
    {"batch-max", "LAB_BATCH_MAX", CFG_INT, "128", 1, STOCK_BATCH_MAX,
     offsetof(struct batch_conf, batch_max), 0,
     "batched-update: most deductions of one SKU per transaction"},
    {"batch-window-us", "LAB_BATCH_WINDOW_US", CFG_INT, "0", 0, 100000,
     offsetof(struct batch_conf, window_us), 0,
     "batched-update: extra wait (µs) of a leader when no commit is running (0: none)"},
    {"batch-inflight", "LAB_BATCH_INFLIGHT", CFG_INT, "1", 1, 4,
     offsetof(struct batch_conf, inflight), 0,
     "batched-update: batches of one SKU in their transaction at once per instance (2: the "
     "next batch takes the row lock while the one before waits for its log flush)"},
};

enum member_state { MEMBER_QUEUED, MEMBER_TAKEN, MEMBER_DONE };

struct member {
    const struct deduct_req *req;
    struct deduct_res *res;
    enum member_state state;
    pthread_cond_t cv;             /* signalled once: its answer is ready */
};

struct slot {
    char sku[STOCK_SKU_MAX + 1];   /* "" = free */
    int users;                     /* threads inside for this SKU */
    int has_leader;                /* the open batch has a leader waiting */
    int committing;                /* batches of this SKU in their transaction */
    int nopen;
    struct member *open[STOCK_BATCH_MAX];
    pthread_cond_t cv;             /* the next leader: a commit of the SKU ended */
};

static struct slot slots[BATCH_SLOTS];
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
    for (int i = 0; ok && i < BATCH_SLOTS; i++)
        ok = pthread_cond_init(&slots[i].cv, &cv_attr) == 0;
    cv_ok = ok;
}

/* Wait on cv until util_now() reaches `until` (capped at one slice).
 * Caller holds mu. */
static void timed_wait(pthread_cond_t *cv, double until)
{
    double now = util_now(), t = until;
    if (t > now + BATCH_WAIT_SLICE_S || t <= 0)
        t = now + BATCH_WAIT_SLICE_S;
    struct timespec ts = {.tv_sec = (time_t)t,
                          .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    pthread_cond_timedwait(cv, &mu, &ts);
}

/* The slot of sku, claimed when free; NULL when the table is full.
 * Caller holds mu. */
static struct slot *slot_find(const char *sku)
{
    struct slot *free_slot = NULL;
    for (int i = 0; i < BATCH_SLOTS; i++) {
        if (slots[i].sku[0] && strcmp(slots[i].sku, sku) == 0)
            return &slots[i];
        if (!slots[i].sku[0] && !free_slot)
            free_slot = &slots[i];
    }
    if (free_slot)
        snprintf(free_slot->sku, sizeof(free_slot->sku), "%s", sku);
    return free_slot;
}

static void slot_leave(struct slot *s)
{
    if (--s->users == 0)
        s->sku[0] = '\0';
}

/* Batch sizes as a Prometheus histogram: lab_batch_size_bucket{le},
 * _sum and _count (mean = sum / count). */
static void observe_batch(int n, int rounds)
{
    static const double le[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    metrics_observe_le("lab_batch_size", "", n, le, (int)(sizeof(le) / sizeof(le[0])));
    metrics_add("lab_batch_transactions_total", "", rounds);
}

/* Sell a batch of one, without the slot table (the table is full). */
static void sell_alone(const struct guard *self, const struct deduct_env *env,
                       const struct deduct_req *req, struct deduct_res *res)
{
    struct batch_item item = {req, res, 0};
    int rounds = 0;
    stock_batch_sell(self->name, env, &item, 1, &rounds);
    observe_batch(1, rounds);
}

/* The leader: wait for the SKU's previous commit, take the queue, sell
 * it. Called and returns with mu held. */
static void lead(const struct guard *self, const struct deduct_env *env, struct slot *s,
                 struct member *me)
{
    double t0 = util_now();
    while (s->committing >= conf.inflight && !deduct_expired(me->req))
        timed_wait(&s->cv, me->req->deadline);
    if (conf.window_us > 0 && s->committing == 0 && s->nopen < conf.batch_max) {
        double until = util_now() + (double)conf.window_us / 1e6;
        while (util_now() < until && s->nopen < conf.batch_max)
            timed_wait(&s->cv, until);
    }
    struct batch_item items[STOCK_BATCH_MAX];
    struct member *taken[STOCK_BATCH_MAX];
    int n = s->nopen;
    for (int i = 0; i < n; i++) {
        taken[i] = s->open[i];
        taken[i]->state = MEMBER_TAKEN;
        items[i] = (struct batch_item){taken[i]->req, taken[i]->res, 0};
    }
    s->nopen = 0;
    s->has_leader = 0;
    s->committing++;
    pthread_mutex_unlock(&mu);

    me->res->lock_wait_s = util_now() - t0;
    int rounds = 0;
    stock_batch_sell(self->name, env, items, n, &rounds);
    observe_batch(n, rounds);

    pthread_mutex_lock(&mu);
    /* One wake-up per member, and one for the next leader: no herd. */
    for (int i = 0; i < n; i++) {
        taken[i]->state = MEMBER_DONE;
        if (taken[i] != me)
            pthread_cond_signal(&taken[i]->cv);
    }
    s->committing--;
    pthread_cond_broadcast(&s->cv);
}

/* A member: wait for the leader's answer. Before the batch is taken a
 * member past its deadline leaves the queue (nothing can be written for
 * it); once taken it waits for the transaction, whose every step is
 * bounded by MySQL's timeouts. Called and returns with mu held. */
static void follow(struct slot *s, struct member *me)
{
    double t0 = util_now();
    while (me->state != MEMBER_DONE) {
        if (me->state == MEMBER_QUEUED && deduct_expired(me->req)) {
            for (int i = 0; i < s->nopen; i++)
                if (s->open[i] == me) {
                    memmove(&s->open[i], &s->open[i + 1],
                            (size_t)(s->nopen - i - 1) * sizeof(s->open[0]));
                    s->nopen--;
                    break;
                }
            stock_past_deadline(me->req, me->res);
            break;
        }
        if (me->state == MEMBER_QUEUED)
            me->res->lock_wait_s = util_now() - t0;
        timed_wait(&me->cv, me->req->deadline);
    }
}

static void batched_deduct(const struct guard *self, const struct deduct_env *env,
                           const struct deduct_req *req, struct deduct_res *res)
{
    pthread_once(&once, init_slots);
    pthread_mutex_lock(&mu);
    struct slot *s = cv_ok ? slot_find(req->sku) : NULL;
    if (!s || s->nopen >= conf.batch_max) {
        if (s && s->users == 0)
            s->sku[0] = '\0';
        pthread_mutex_unlock(&mu);
        sell_alone(self, env, req, res);
        return;
    }
    struct member me = {.req = req, .res = res, .state = MEMBER_QUEUED};
    if (pthread_cond_init(&me.cv, &cv_attr) != 0) {
        if (s->users == 0)
            s->sku[0] = '\0';
        pthread_mutex_unlock(&mu);
        sell_alone(self, env, req, res);
        return;
    }
    s->users++;
    s->open[s->nopen++] = &me;
    if (!s->has_leader) {
        s->has_leader = 1;
        lead(self, env, s, &me);
    } else {
        follow(s, &me);
    }
    slot_leave(s);
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&me.cv);
}

/* A cart is not batched: it is sold alone, as conditional-update sells
 * it (one transaction, UPDATE ... WHERE stock >= the lines' sum per row,
 * in sorted SKU order). Its rows' conditional UPDATEs and a batch's meet
 * in InnoDB's row locks, so neither can sell past zero. */
static void batched_cart(const struct guard *self, const struct deduct_env *env,
                         const struct cart *c, struct cart_res *res)
{
    stock_cart_sell(self->name, env, c, CART_STYLE_CONDITIONAL, res);
}

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Concurrent deductions of a SKU in one instance queue; the first leads.",
    "The leader runs one transaction for the batch: row lock, one conditional UPDATE "
    "of the sum, one multi-row ledger insert, one COMMIT.",
    "Each member gets its own answer; a batch bigger than the stock is split, never "
    "oversold.",
    NULL,
};
static const struct guard_metric doc_metrics[] = {
    {"lab_batch_size", "histogram", "deductions per batched-update batch", ""},
    {"lab_batch_transactions_total", "counter",
     "batched-update transactions (a batch runs again after a ledger duplicate)", ""},
};
static const struct guard_doc doc = {
    .needs = "MySQL",
    .use_when = "one very hot SKU and MySQL must stay the only system of record",
    .breaks = "nothing in correctness; a failed batch fails all its members (503, nothing "
        "written)",
    .origin = "AliSQL's inventory hint",
    .steps = doc_steps,
    .statements = "BEGIN; SELECT stock ... FOR UPDATE;\nUPDATE inventory SET stock=stock-SUM "
        "WHERE sku=? AND stock>=SUM;\nINSERT INTO ledger SELECT ... FROM "
        "JSON_TABLE(?); COMMIT",
    .code = __FILE__,
    .metrics = doc_metrics,
    .nmetrics = sizeof(doc_metrics) / sizeof(doc_metrics[0]),
};

const struct guard guard_batched_update = {
    .name = "batched-update",
    .doc = &doc,
    /* its sale is decided outside one MySQL transaction: refuses limited SKUs */
    .flags = GUARD_NO_PURCHASE_LIMITS
             | GUARD_LIMITS_IN_DEDUCT
             | GUARD_SAFE_ACROSS_INSTANCES
             /* A repeated order id fails the batch's ledger insert and is answered
              * from the ledger row (stock/batch.c): no read before every request. */
             | GUARD_OWN_IDEMPOTENCY,
    .how = "group commit: concurrent deductions of a SKU in one instance share one "
           "transaction (one UPDATE ... WHERE stock>=sum, one multi-row ledger insert)",
    .expect = "correct, one commit per batch",
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .deduct = batched_deduct,
    .deduct_cart = batched_cart,
};
