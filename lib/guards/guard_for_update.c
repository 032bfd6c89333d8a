/* Guard `for-update`: pessimistic row lock. SELECT ... FOR UPDATE inside a
 * transaction makes every other deduction of the SKU wait for our COMMIT.
 * Deadlocks, lock wait timeouts and certification failures (Galera) are
 * retried, a bounded number of times within the request's deadline. */
#include "guard.h"

#include "base/db.h"
#include "base/util.h"
#include "stock/limits.h"
#include "stock/txn.h"

#include <stdio.h>

/* One attempt. Returns DB_ERETRY when the attempt should be repeated. */
static int attempt(const struct guard *self, const struct deduct_env *env,
                   const struct deduct_req *req, struct deduct_res *res)
{
    long long stock, version, limit = 0, n;
    if ((n = db_begin(env->db)) < 0)
        goto db_fail;
    double t0 = util_now();
    int found = store_read_limit(env->db, req->sku, 1, &stock, &version, &limit);
    res->lock_wait_s += util_now() - t0;
    if (found < 0) {
        n = found;
        goto db_fail;
    }
    if (found == 0 || stock < req->qty) {
        db_rollback(env->db);
        res->outcome = found ? DEDUCT_OUT_OF_STOCK : DEDUCT_UNKNOWN_SKU;
        res->remaining = found ? stock : 0;
        return 0;
    }
    if (stock_limit_needs_user(req, limit, res)) {
        db_rollback(env->db);
        return 0;
    }
    util_sleep_ms(req->hold_ms);   /* inside the row lock */
    if (stock_past_deadline(req, res)) {
        db_rollback(env->db);
        return 0;
    }
    long long remaining = stock - req->qty;
    /* 0 rows: our transaction was aborted after the locking read (Galera):
     * nothing written, repeat. */
    if ((n = store_set_stock(env->db, req->sku, remaining)) == 0)
        n = DB_ERETRY;
    if (n < 0 ||
        (n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty, remaining,
                                 self->name, env->instance, req->user_id)) < 0 ||
        (n = stock_limit_charge(env, req, limit, res)) < 0)
        goto db_fail;
    if (n == 0)   /* past the buyer's limit: rolled back, res filled */
        return 0;
    if (stock_commit_sale(env, req, self->name, res) != STOCK_COMMITTED)
        /* On a Galera cluster our row lock held on this node only: another
         * node's sale can win certification at our COMMIT. */
        return stock_conflicted(res) ? DB_ERETRY : 0;
    res->outcome = DEDUCT_SOLD;
    res->remaining = remaining;
    return 0;

db_fail:
    db_rollback(env->db);
    if (n == DB_ERETRY)
        return DB_ERETRY;
    if (n == DB_EDUP) {
        stock_conflict_duplicate(env, req, res);
        return 0;
    }
    stock_db_failure(env->db, (int)n, res);
    return 0;
}

static void for_update_deduct(const struct guard *self, const struct deduct_env *env,
                              const struct deduct_req *req, struct deduct_res *res)
{
    for (int i = 0; i <= env->max_retries; i++) {
        if (attempt(self, env, req, res) != DB_ERETRY) {
            stock_refused(env, req, res);
            return;
        }
        res->retries++;
        util_sleep_ms(util_backoff_ms(i, 50));
        if (stock_past_deadline(req, res))
            return;
    }
    res->outcome = DEDUCT_RETRY_EXHAUSTED;
    snprintf(res->detail, sizeof(res->detail),
             "row lock not obtained after %d deadlock/lock-wait retries", res->retries);
}

/* A cart: every row in one transaction, in sorted SKU order (stock/cart.h). */
static void for_update_cart(const struct guard *self, const struct deduct_env *env,
                            const struct cart *c, struct cart_res *res)
{
    stock_cart_sell(self->name, env, c, CART_STYLE_ROW_LOCK, res);
}

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Holds the row lock from the read to the commit.",
    "Deadlocks and lock-wait timeouts are retried a bounded number of times.",
    NULL,
};
static const struct guard_doc doc = {
    .needs = "MySQL",
    .use_when = "the read-modify-write must stay in application code",
    .breaks = "nothing in correctness; one hot row serialises every instance",
    .origin = "pessimistic locking in the database",
    .steps = doc_steps,
    .statements = "BEGIN; SELECT stock FROM inventory WHERE sku=? FOR UPDATE;\nUPDATE "
        "inventory SET stock=? WHERE sku=?; INSERT INTO ledger ...; COMMIT",
    .code = __FILE__,
};

const struct guard guard_for_update = {
    .name = "for-update",
    .doc = &doc,
    .how = "SELECT ... FOR UPDATE inside a transaction (row lock until COMMIT)",
    .expect = "correct",
    .flags = GUARD_SAFE_ACROSS_INSTANCES
             /* A repeated order id fails the ledger insert, or is found by the
              * refusal paths (stock_refused): no ledger read before every sale. */
             | GUARD_OWN_IDEMPOTENCY,
    .deduct_cart = for_update_cart,
    .deduct = for_update_deduct,
};
