/* Guard `lock-table`: a lock made of a MySQL row. INSERT into a table with
 * a unique lock name takes the lock (the unique key refuses a second
 * holder); DELETE by owner releases it; an expiry column lets a crashed
 * holder's lock be taken over, which is also how a slow holder loses it. */
#include "guard.h"

#include "base/db.h"
#include "base/util.h"
#include "guards/core/lock_fields.h"
#include "stock/keys.h"
#include "stock/txn.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- one contender per process (no herd) ----
 * Threads of one process that want the same lock row queue on a local gate
 * and only the gate's holder polls MySQL: a release hands over locally at
 * once, and 16 workers no longer poll the row (and deadlock on it) in
 * parallel. Across processes the row still decides. A slot belongs to one
 * name while used; a name whose slot is taken contends without a gate. */
#define LT_GATES 64

/* Fairness across processes. A gate hands over at once while the other
 * process's gate holder polls the row with backoff, so it only wins in the
 * instant between our DELETE and our next INSERT: at saturation it starved
 * (p99/p50 10-12). After LT_RUN hand-overs in a row the next holder first
 * yields LT_YIELD_MS, longer than a poller's sleep (LT_POLL_CAP_MS), so a
 * waiting process takes its turn; with nobody else waiting the cost is
 * one short pause per LT_RUN sales. */
#define LT_RUN 32
#define LT_YIELD_MS 5
#define LT_POLL_CAP_MS 4

struct lt_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char name[KEYS_MAX];   /* "" = free slot */
    int held, waiters;
    int run;               /* hand-overs in a row to a waiting thread */
    int yield;             /* the next holder yields before its first try */
};

static struct lt_gate gates[LT_GATES] = {
    [0 ... LT_GATES - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER}};

static unsigned long name_hash(const char *s)
{
    unsigned long h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h;
}

/* Enter name's gate by deadline (util_now clock). Returns the gate (held),
 * NULL to contend without one (slot used by another name), and sets
 * *timeout when the deadline passed while queued; *yield is 1 when this
 * holder should give other processes a turn first (LT_RUN). */
static struct lt_gate *gate_enter(const char *name, double deadline, int *timeout,
                                  int *yield)
{
    struct lt_gate *g = &gates[name_hash(name) % LT_GATES];
    *timeout = 0;
    *yield = 0;
    pthread_mutex_lock(&g->mu);
    if (g->name[0] && strcmp(g->name, name) != 0) {
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->waiters++;
    while (g->held) {
        double left = deadline - util_now();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + (long long)(left * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    g->waiters--;
    if (g->held) {
        *timeout = 1;
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    g->held = 1;
    *yield = g->yield;
    g->yield = 0;
    pthread_mutex_unlock(&g->mu);
    return g;
}

static void gate_leave(struct lt_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->held = 0;
    if (g->waiters) {
        if (++g->run >= LT_RUN) {
            g->run = 0;
            g->yield = 1;
        }
        pthread_cond_signal(&g->cv);
    } else {
        g->name[0] = '\0';
        g->run = 0;
        g->yield = 0;
    }
    pthread_mutex_unlock(&g->mu);
}

/* 1 taken, 0 held by someone else (and not expired), <0 DB error. */
static int try_take_once(struct db_conn *db, const char *name, const char *owner, long ttl_ms)
{
    long long n = store_lock_row_insert(db, name, owner, ttl_ms);
    if (n >= 0)
        return 1;
    if (n != DB_EDUP)
        return (int)n;
    /* Held: take it over only if the holder's lease ran out. */
    n = store_lock_row_expire(db, name);
    if (n < 0)
        return (int)n;
    if (n == 0)
        return 0;
    n = store_lock_row_insert(db, name, owner, ttl_ms);
    return n >= 0 ? 1 : n == DB_EDUP ? 0 : (int)n;
}

/* InnoDB may pick our INSERT or DELETE as a deadlock victim when many
 * contenders race for the same lock row: that only means "not yet". */
static int try_take(struct db_conn *db, const char *name, const char *owner, long ttl_ms)
{
    int rc = try_take_once(db, name, owner, ttl_ms);
    return rc == DB_ERETRY ? 0 : rc;
}

/* The fencing token: our lock row's id (AUTO_INCREMENT: every take, a
 * take-over of an expired row included, gets a larger one). 0 with *fence
 * set, -1 with res filled when the row is gone already or MySQL failed. */
static int fence_of(const struct deduct_env *env, const char *name, const char *owner,
                    unsigned long long *fence, struct deduct_res *res)
{
    int rc = store_lock_row_id(env->db, name, owner, fence);
    if (rc == 1 && *fence > 0)
        return 0;
    if (rc < 0) {
        stock_db_failure(env->db, rc, res);
    } else {
        res->outcome = DEDUCT_LEASE_EXPIRED;
        snprintf(res->detail, sizeof(res->detail),
                 "lock row %.70s taken over before its fencing token was read", name);
    }
    return -1;
}

static int lock_table_locked(const struct guard *self, const struct deduct_env *env,
                             const struct deduct_req *req, guard_work_fn work, void *ctx,
                             struct deduct_res *res)
{
    char name[KEYS_MAX], owner[96];
    keys_lock_row(name, req->sku);
    util_make_id(owner, sizeof(owner), env->instance);
    const struct lock_req_opts *lo = lock_opts_of(req);
    long ttl = lock_opts_ttl(lo, env->default_ttl_ms);
    double t0 = util_now(), deadline = t0 + (double)req->lock_wait_ms / 1000.0;
    int got = 0, gate_timeout, yield;
    struct lt_gate *gate = gate_enter(name, deadline, &gate_timeout, &yield);
    if (yield && !gate_timeout) {
        long left_ms = (long)((deadline - util_now()) * 1000.0);
        util_sleep_ms(left_ms < LT_YIELD_MS ? (left_ms > 0 ? left_ms : 0) : LT_YIELD_MS);
    }
    for (int i = 0; !gate_timeout; i++) {
        got = try_take(env->db, name, owner, ttl);
        if (got != 0 || util_now() >= deadline)
            break;
        long left_ms = (long)((deadline - util_now()) * 1000.0) + 1;
        long nap = util_backoff_ms(i, LT_POLL_CAP_MS);
        util_sleep_ms(nap < left_ms ? nap : left_ms);
    }
    res->lock_wait_s = util_now() - t0;
    if (got < 0) {
        gate_leave(gate);
        stock_db_failure(env->db, got, res);
        return -1;
    }
    if (got == 0) {
        gate_leave(gate);
        res->outcome = DEDUCT_LOCK_TIMEOUT;
        snprintf(res->detail, sizeof(res->detail), "lock row %.70s busy for %ld ms", name,
                 req->lock_wait_ms);
        return -1;
    }
    int ret = -1;
    struct deduct_req fenced = *req;
    fenced.fencing = lo->fencing;
    if (lo->fencing && fence_of(env, name, owner, &fenced.fence, res) != 0)
        goto release;
    if (!guard_deadline_passed(req, res))
        ret = work(ctx, env, &fenced, res);
release:
    if (store_lock_row_delete(env->db, name, owner) < 0)
        fprintf(stderr, "lock-table: release of %s failed (expires by itself): %s\n", name,
                env->db->errstr);
    gate_leave(gate);
    return ret;
}

static int lock_table_deduct(const struct guard *self, const struct deduct_env *env,
                             const struct deduct_req *req, struct deduct_res *res)
{
    lock_table_locked(self, env, req, guard_rmw_work, (void *)self->name, res);
    return 0;
}

static const struct guard_field lock_table_fields[] = {LOCK_FIELD_TTL, LOCK_FIELD_FENCING};

const struct guard guard_lock_table = {
    .name = "lock-table",
    .how = "MySQL lock row: INSERT into a unique-keyed lock table, DELETE to release, expiry column",
    .expect = "correct",
    .safe_across_instances = 1,
    .fields = lock_table_fields,
    .nfields = sizeof(lock_table_fields) / sizeof(lock_table_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .deduct = lock_table_deduct,
    .locked = lock_table_locked,
};
