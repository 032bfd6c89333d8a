/* Guard `lock-table`: a lock made of a MySQL row. INSERT into a table with
 * a unique lock name takes the lock (the unique key refuses a second
 * holder); DELETE by owner releases it; an expiry column lets a crashed
 * holder's lock be taken over, which is also how a slow holder loses it. */
#include "guard.h"

#include "base/db.h"
#include "base/util.h"
#include "guards/core/key_gate.h"
#include "guards/core/cart_locks.h"
#include "guards/core/lock_fields.h"
#include "stock/keys.h"
#include "stock/txn.h"

#include <stdio.h>
#include <string.h>

/* ---- one contender per process (no herd) ----
 * Threads of one process that want the same lock row queue on a local gate
 * and only the gate's holder polls MySQL: a release hands over locally at
 * once, and 16 workers no longer poll the row (and deadlock on it) in
 * parallel. Across processes the row still decides. A slot belongs to one
 * name while used; a name whose slot is taken contends without a gate
 * (guards/core/key_gate). */

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

static struct key_gate_table gates = KEY_GATE_TABLE_INIT(LT_RUN);

/* Enter name's gate (key_gate_enter). inherit gets the owner of a lock row
 * the last holder passed on (gate_pass_row), "" when none: the new holder
 * takes it over or deletes it. A waiter woken with the gate free always
 * becomes its holder, so a passed row always has one. */
static struct key_gate *gate_enter(const char *name, double deadline, int *timeout,
                                   int *yield, char inherit[96])
{
    size_t n;
    inherit[0] = '\0';
    return key_gate_enter(&gates, name, deadline, timeout, yield, inherit, 96, &n);
}

/* Leave the gate to a queued thread together with our lock row (still
 * ours in MySQL), sparing it the INSERT and this release the DELETE: 1
 * passed (gate left), 0 not (no waiter, or the run is at LT_RUN: delete
 * the row and gate_leave, which makes the next holder yield). */
static int gate_pass_row(struct key_gate *g, const char *owner)
{
    size_t len = strlen(owner) + 1;   /* the NUL travels with it */
    return len <= 96 && key_gate_pass(&gates, g, owner, len);
}

static void gate_leave(struct key_gate *g)
{
    key_gate_leave(&gates, g);
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
    char inherit[96];
    struct key_gate *gate = gate_enter(name, deadline, &gate_timeout, &yield, inherit);
    if (inherit[0] && !lo->fencing) {
        /* The last holder of this process passed its row on: make it ours
         * with a fresh lease (one UPDATE instead of DELETE + INSERT). */
        long long n = store_lock_row_pass(env->db, name, inherit, owner, ttl);
        if (n > 0)
            got = 1;
        else if (n < 0 && store_lock_row_delete(env->db, name, inherit) < 0)
            fprintf(stderr, "lock-table: passed row %s not released (expires by itself): %s\n",
                    name, env->db->errstr);
    } else if (inherit[0] && store_lock_row_delete(env->db, name, inherit) < 0) {
        /* Fencing wants a new row (a new id): give the passed one back. */
        fprintf(stderr, "lock-table: passed row %s not released (expires by itself): %s\n",
                name, env->db->errstr);
    }
    if (yield && !gate_timeout && !got) {
        long left_ms = (long)((deadline - util_now()) * 1000.0);
        util_sleep_ms(left_ms < LT_YIELD_MS ? (left_ms > 0 ? left_ms : 0) : LT_YIELD_MS);
    }
    for (int i = 0; !gate_timeout && !got; i++) {
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
    if (gate && gate_pass_row(gate, owner))
        return ret;
    if (store_lock_row_delete(env->db, name, owner) < 0)
        fprintf(stderr, "lock-table: release of %s failed (expires by itself): %s\n", name,
                env->db->errstr);
    gate_leave(gate);
    return ret;
}

static void lock_table_deduct(const struct guard *self, const struct deduct_env *env,
                              const struct deduct_req *req, struct deduct_res *res)
{
    lock_table_locked(self, env, req, guard_rmw_work, (void *)self->name, res);
}

static const struct guard_field lock_table_fields[] = {LOCK_FIELD_TTL, LOCK_FIELD_FENCING};

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Inserts a row into lock_table (unique lock_name); deletes it to release.",
    "An expired row (lock_ttl_ms) is taken over; fencing uses the row's "
    "AUTO_INCREMENT id.",
    NULL,
};
static const struct guard_doc doc = {
    .needs = "MySQL",
    .use_when = "a cross-instance lock without another server",
    .breaks = "a holder slower than lock_ttl_ms loses its row to the next buyer (without "
        "fencing)",
    .origin = "a database row as the lock",
    .steps = doc_steps,
    .statements = "INSERT INTO lock_table (lock_name, expires_at) ...\n... read-modify-write "
        "...\nDELETE FROM lock_table WHERE ...",
    .code = __FILE__,
    .lock_home = "mysql",
};

const struct guard guard_lock_table = {
    .name = "lock-table",
    .doc = &doc,
    .how = "MySQL lock row: INSERT into a unique-keyed lock table, DELETE to release, expiry column",
    .expect = "correct",
    .flags = GUARD_SAFE_ACROSS_INSTANCES,
    .fields = lock_table_fields,
    .nfields = sizeof(lock_table_fields) / sizeof(lock_table_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .deduct = lock_table_deduct,
    .locked = lock_table_locked,
    .deduct_cart = guard_lock_cart,   /* its locks nested, sorted (core/cart_locks) */
};
