/* Guard `conditional-update`: the check and the write are one statement,
 * UPDATE ... WHERE stock >= qty, so there is no window to race in. The row
 * lock it takes lasts until COMMIT: hold_ms is spent there, inside it. */
#include "guard.h"

#include "base/db.h"
#include "base/util.h"
#include "stock/limits.h"
#include "stock/txn.h"

/* The one statement took nothing: not enough stock, no SKU, or a SKU
 * with a purchase limit (which it leaves to this path, so an unlimited
 * sale never reads the limit). Inside the same transaction: lock the row,
 * read it with its limit, and take from the locked row if it can sell.
 * Returns 1 taken (*stock left, *limit the SKU's), 0 refused (rolled
 * back, res filled), or a negative DB_E* code. */
static long long take_checked(const struct deduct_env *env, const struct deduct_req *req,
                              long long *stock, long long *limit, struct deduct_res *res)
{
    long long version;
    int found = store_read_limit(env->db, req->sku, 1, stock, &version, limit);
    if (found < 0)
        return found;
    if (found == 0 || *stock < req->qty) {
        db_rollback(env->db);
        res->outcome = found ? DEDUCT_OUT_OF_STOCK : DEDUCT_UNKNOWN_SKU;
        res->remaining = found ? *stock : 0;
        return 0;
    }
    if (stock_limit_needs_user(req, *limit, res)) {
        db_rollback(env->db);
        return 0;
    }
    /* 0 rows from the locked row: our transaction is gone (Galera). */
    long long n = store_take_locked(env->db, req->sku, req->qty);
    if (n == 0)
        return DB_ERETRY;
    *stock -= req->qty;
    return n;
}

/* One attempt. Returns DB_ERETRY when a conflict rolled it back. */
static int attempt(const struct guard *self, const struct deduct_env *env,
                   const struct deduct_req *req, struct deduct_res *res)
{
    long long n, stock = 0, limit = 0;
    double t0 = util_now();
    if ((n = db_begin(env->db)) < 0 ||
        (n = store_take_if_enough_unlimited(env->db, req->sku, req->qty, &stock)) < 0 ||
        (n == 0 && (n = take_checked(env, req, &stock, &limit, res)) < 0))
        goto db_fail;
    res->lock_wait_s = util_now() - t0;
    if (n == 0)   /* refused: rolled back, res filled */
        return 0;
    util_sleep_ms(req->hold_ms);
    if (stock_past_deadline(req, res)) {
        db_rollback(env->db);
        return 0;
    }
    /* stock: what our UPDATE left, from its own reply (no read after it). */
    if ((n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty, stock,
                                 self->name, env->instance, req->user_id)) < 0 ||
        (n = stock_limit_charge(env, req, limit, res)) < 0)
        goto db_fail;
    if (n == 0)   /* past the buyer's limit: rolled back, res filled */
        return 0;
    if (stock_commit_sale(env, req, self->name, res) != STOCK_COMMITTED)
        return stock_conflicted(res) ? DB_ERETRY : 0;
    res->outcome = DEDUCT_SOLD;
    res->remaining = stock;
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

/* On one server the statement waits for the row lock and conflicts are
 * rare (a lock wait timeout); on a Galera cluster a sale on another node
 * can win certification at our COMMIT or abort us at our next statement.
 * Either way nothing was written, so the statement is simply repeated,
 * a bounded number of times within the request's deadline. */
static void conditional_deduct(const struct guard *self, const struct deduct_env *env,
                               const struct deduct_req *req, struct deduct_res *res)
{
    for (int i = 0; i <= env->max_retries; i++) {
        if (attempt(self, env, req, res) != DB_ERETRY) {
            stock_refused(env, req, res);
            return;
        }
        res->retries++;
        util_sleep_ms(util_backoff_ms(i, 20));
        if (stock_past_deadline(req, res))
            return;
    }
    res->outcome = DEDUCT_RETRY_EXHAUSTED;
    snprintf(res->detail, sizeof(res->detail),
             "conflicting with other sales after %d retries", res->retries);
}

/* A cart: every row in one transaction, in sorted SKU order (stock/cart.h). */
static void conditional_cart(const struct guard *self, const struct deduct_env *env,
                             const struct cart *c, struct cart_res *res)
{
    stock_cart_sell(self->name, env, c, CART_STYLE_CONDITIONAL, res);
}

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "No window at all: the check and the write are one statement.",
    "0 rows changed means out of stock.",
    NULL,
};
static const struct guard_doc doc = {
    .needs = "MySQL",
    .use_when = "the default choice: one statement checks and writes",
    .breaks = "nothing found; bounded by one durable commit per sale",
    .origin = "the seeds' fix: let the database decide",
    .steps = doc_steps,
    .statements = "UPDATE inventory SET stock=stock-? WHERE sku=? AND stock>=?\nINSERT INTO "
        "ledger ...",
    .code = __FILE__,
};

const struct guard guard_conditional_update = {
    .name = "conditional-update",
    .doc = &doc,
    .how = "one statement: UPDATE ... SET stock=stock-? WHERE sku=? AND stock>=?",
    .expect = "correct",
    .flags = GUARD_SAFE_ACROSS_INSTANCES
             /* A repeated order id fails the ledger insert, or is found by the
              * refusal paths (stock_refused): no ledger read before every sale. */
             | GUARD_OWN_IDEMPOTENCY,
    .deduct_cart = conditional_cart,
    .deduct = conditional_deduct,
};
