/* Shared transactions of the guards (see txn.h). */
#include "txn.h"

#include "base/db.h"
#include "base/util.h"

#include <stdio.h>

void stock_db_failure(struct db_conn *db, int rc, struct deduct_res *res)
{
    if (rc == DB_EUNAVAIL) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "MySQL unavailable: %.120s",
                 db->errstr);
    } else if (rc == DB_ERETRY) {
        res->outcome = DEDUCT_RETRY_EXHAUSTED;
        snprintf(res->detail, sizeof(res->detail), "MySQL lock conflict: %.120s",
                 db->errstr);
    } else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "MySQL error: %.120s", db->errstr);
    }
}

void stock_fill_duplicate(const struct ledger_row *row, struct deduct_res *res)
{
    res->outcome = DEDUCT_DUPLICATE;
    res->qty = (long)row->qty;
    res->remaining = row->remaining;
    snprintf(res->guard, sizeof(res->guard), "%s", row->guard);
    snprintf(res->instance, sizeof(res->instance), "%s", row->instance);
}

/* A repeated order_id can race past the first check; the unique key then
 * refuses the insert and we answer with the first sale. */
void stock_conflict_duplicate(const struct deduct_env *env, const struct deduct_req *req,
                              struct deduct_res *res)
{
    struct ledger_row row;
    int rc = store_ledger_get(env->db, req->order_id, 0, &row);
    if (rc == 1)
        stock_fill_duplicate(&row, res);
    else if (rc < 0)
        stock_db_failure(env->db, rc, res);
    else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "ledger conflict without a row");
    }
}

/* A failed transaction step: roll back and say why. */
static void txn_failed(const struct deduct_env *env, const struct deduct_req *req,
                       long long n, struct deduct_res *res)
{
    db_rollback(env->db);
    if (n == DB_EDUP)
        stock_conflict_duplicate(env, req, res);
    else
        stock_db_failure(env->db, (int)n, res);
}

int stock_rmw(const char *guard_name, const struct deduct_env *env,
              const struct deduct_req *req, struct deduct_res *res)
{
    return stock_rmw_checked(guard_name, env, req, NULL, NULL, res);
}

int stock_rmw_checked(const char *guard_name, const struct deduct_env *env,
                      const struct deduct_req *req,
                      int (*may_write)(void *ctx, struct deduct_res *res), void *ctx,
                      struct deduct_res *res)
{
    long long stock, version;
    int rc = store_read(env->db, req->sku, 0, &stock, &version);
    if (rc < 0) {
        stock_db_failure(env->db, rc, res);
        return 0;
    }
    if (rc == 0) {
        res->outcome = DEDUCT_UNKNOWN_SKU;
        return 0;
    }
    if (stock < req->qty) {
        res->outcome = DEDUCT_OUT_OF_STOCK;
        res->remaining = stock;
        return 0;
    }
    util_sleep_ms(req->hold_ms);   /* the seeds' slow business call */
    if (may_write && !may_write(ctx, res))
        return 0;
    long long remaining = stock - req->qty;
    long long n;
    if ((n = db_begin(env->db)) < 0 ||
        (n = store_set_stock(env->db, req->sku, remaining)) < 0 ||
        (n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty,
                                 remaining, guard_name, env->instance)) < 0 ||
        (n = db_commit(env->db)) < 0) {
        txn_failed(env, req, n, res);
        return 0;
    }
    res->outcome = DEDUCT_SOLD;
    res->remaining = remaining;
    res->qty = req->qty;
    return 0;
}

int stock_record_relative(const char *guard_name, const struct deduct_env *env,
                          const struct deduct_req *req, struct deduct_res *res)
{
    long long n, stock = 0, version;
    if ((n = db_begin(env->db)) < 0 || (n = store_add_stock(env->db, req->sku, -req->qty)) < 0)
        goto fail;
    if (n == 0) {
        db_rollback(env->db);
        res->outcome = DEDUCT_UNKNOWN_SKU;
        return -1;
    }
    int found = store_read(env->db, req->sku, 0, &stock, &version);
    if (found <= 0) {
        n = found < 0 ? found : DB_ERR;
        goto fail;
    }
    if ((n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty, stock,
                                 guard_name, env->instance)) < 0 ||
        (n = db_commit(env->db)) < 0)
        goto fail;
    res->outcome = DEDUCT_SOLD;
    res->remaining = stock;
    return 0;
fail:
    txn_failed(env, req, n, res);
    return -1;
}

int stock_release(struct db_conn *db, const char *order_id, struct ledger_row *row)
{
    long long n;
    if ((n = db_begin(db)) < 0 || (n = store_ledger_get(db, order_id, 1, row)) < 0)
        goto fail;
    if (n == 0 || row->released) {
        db_rollback(db);
        return n == 0 ? STOCK_UNKNOWN_ORDER : STOCK_ALREADY_RELEASED;
    }
    if ((n = store_add_stock(db, row->sku, row->qty)) < 0 ||
        (n = store_ledger_mark_released(db, order_id)) < 0 ||
        (n = db_commit(db)) < 0)
        goto fail;
    return STOCK_RELEASED;
fail:
    db_rollback(db);
    return (int)n;
}
