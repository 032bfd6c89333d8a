/* Guard `optimistic`: read stock and version without locking, then write
 * only if the version is still the one read. A miss means someone else sold
 * in between: back off (jittered) and try again, a bounded number of times. */
#include "guard.h"

#include "base/db.h"
#include "base/util.h"
#include "stock/limits.h"
#include "stock/txn.h"

#include <stdio.h>

static int optimistic_attempts(const struct guard *self, const struct deduct_env *env,
                               const struct deduct_req *req, struct deduct_res *res)
{
    for (int i = 0; i <= env->max_retries; i++) {
        long long stock, version, limit = 0, n;
        if (stock_past_deadline(req, res))
            return 0;
        int found = store_read_limit(env->db, req->sku, 0, &stock, &version, &limit);
        if (found < 0) {
            stock_db_failure(env->db, found, res);
            return 0;
        }
        if (found == 0 || stock < req->qty) {
            res->outcome = found ? DEDUCT_OUT_OF_STOCK : DEDUCT_UNKNOWN_SKU;
            res->remaining = found ? stock : 0;
            return 0;
        }
        if (stock_limit_needs_user(req, limit, res))
            return 0;
        /* limit: exact for this sale, its write is on the version read */
        util_sleep_ms(req->hold_ms);
        if (stock_past_deadline(req, res))
            return 0;
        long long remaining = stock - req->qty;
        if ((n = db_begin(env->db)) < 0 ||
            (n = store_set_stock_if_version(env->db, req->sku, remaining, version)) < 0)
            goto db_fail;
        if (n == 0) {                       /* lost the race: retry */
            db_rollback(env->db);
            res->retries++;
            util_sleep_ms(util_backoff_ms(i, 20));
            continue;
        }
        if ((n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty, remaining,
                                     self->name, env->instance, req->user_id)) < 0 ||
            (n = stock_limit_charge(env, req, limit, res)) < 0)
            goto db_fail;
        if (n == 0)   /* past the buyer's limit: rolled back, res filled */
            return 0;
        if (stock_commit_sale(env, req, self->name, res) != STOCK_COMMITTED) {
            if (!stock_conflicted(res))
                return 0;
            res->retries++;           /* lost certification (Galera): again */
            util_sleep_ms(util_backoff_ms(i, 20));
            continue;
        }
        res->outcome = DEDUCT_SOLD;
        res->remaining = remaining;
        return 0;
    db_fail:
        db_rollback(env->db);
        if (n == DB_ERETRY) {
            res->retries++;
            util_sleep_ms(util_backoff_ms(i, 20));
            continue;
        }
        if (n == DB_EDUP) {
            stock_conflict_duplicate(env, req, res);
            return 0;
        }
        stock_db_failure(env->db, (int)n, res);
        return 0;
    }
    res->outcome = DEDUCT_RETRY_EXHAUSTED;
    snprintf(res->detail, sizeof(res->detail),
             "version changed under us %d times; gave up", res->retries);
    return 0;
}

static void optimistic_deduct(const struct guard *self, const struct deduct_env *env,
                              const struct deduct_req *req, struct deduct_res *res)
{
    optimistic_attempts(self, env, req, res);
    stock_refused(env, req, res);
}

/* A cart: plain reads, then one transaction of version-checked writes in
 * sorted SKU order; a miss starts the cart again (stock/cart.h). */
static void optimistic_cart(const struct guard *self, const struct deduct_env *env,
                            const struct cart *c, struct cart_res *res)
{
    stock_cart_sell(self->name, env, c, CART_STYLE_VERSION, res);
}

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Reads stock and version, writes only if the version is unchanged.",
    "A miss retries with jittered backoff, at most --max-retries, then 503 "
    "retry_exhausted.",
    NULL,
};
static const struct guard_doc doc = {
    .needs = "MySQL",
    .use_when = "low contention per SKU; retries are cheap",
    .breaks = "nothing in correctness; collapses into retries on one hot row",
    .origin = "compare-and-set on a version column",
    .steps = doc_steps,
    .statements = "SELECT stock, version FROM inventory WHERE sku=?\nUPDATE inventory SET "
        "stock=?, version=version+1 WHERE sku=? AND version=?",
    .code = __FILE__,
};

const struct guard guard_optimistic = {
    .name = "optimistic",
    .doc = &doc,
    .how = "version column compare-and-set, bounded retries with jittered backoff",
    .expect = "correct, retries under contention",
    .flags = GUARD_SAFE_ACROSS_INSTANCES
             /* A repeated order id fails the ledger insert, or is found by the
              * refusal paths (stock_refused): no ledger read before every sale. */
             | GUARD_OWN_IDEMPOTENCY,
    .deduct_cart = optimistic_cart,
    .deduct = optimistic_deduct,
};
