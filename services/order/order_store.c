/* Order SQL, all through prepared statements (see order_store.h). Times
 * come from the database clock only, so order instances on different
 * machines agree on when a deadline has passed. */
#include "order_store.h"

#include "base/db.h"

long long order_store_begin(struct db_conn *db, const char *order_id, const char *user_id,
                            const char *sku, long long qty, const char *guard,
                            long long budget_ms)
{
    return db_run(db, "INSERT INTO orders (order_id, user_id, sku, qty, guard, "
                      "inventory_instance, status, deadline_at) VALUES (?, ?, ?, ?, ?, '', "
                      "'pending', NOW(3) + INTERVAL ? MICROSECOND)",
                  "sssl" "sl", "", order_id, user_id, sku, qty, guard, budget_ms * 1000);
}

long long order_store_get(struct db_conn *db, const char *order_id, struct order_row *r)
{
    return db_run(db, "SELECT user_id, sku, qty, guard, inventory_instance, status, "
                      "COALESCE(remaining, -1) FROM orders WHERE order_id = ?",
                  "s", "ssl" "sssl", order_id, r->user_id, sizeof(r->user_id), r->sku,
                  sizeof(r->sku), &r->qty, r->guard, sizeof(r->guard), r->instance,
                  sizeof(r->instance), r->status, sizeof(r->status), &r->remaining);
}

long long order_store_place(struct db_conn *db, const char *order_id, const char *guard,
                            const char *instance, long long remaining)
{
    return db_run(db, "UPDATE orders SET status = 'placed', guard = ?, inventory_instance = ?, "
                      "remaining = ? WHERE order_id = ? AND status = 'pending'",
                  "ssls", "", guard, instance, remaining, order_id);
}

long long order_store_fail(struct db_conn *db, const char *order_id)
{
    return db_run(db, "UPDATE orders SET status = 'failed' "
                      "WHERE order_id = ? AND status = 'pending'", "s", "", order_id);
}

long long order_store_reopen(struct db_conn *db, const char *order_id, long long budget_ms)
{
    return db_run(db, "UPDATE orders SET status = 'pending', "
                      "deadline_at = NOW(3) + INTERVAL ? MICROSECOND "
                      "WHERE order_id = ? AND status = 'failed'",
                  "ls", "", budget_ms * 1000, order_id);
}

long long order_store_claim(struct db_conn *db, const char *order_id,
                            long long expired_margin_ms)
{
    if (expired_margin_ms < 0)
        return db_run(db, "UPDATE orders SET status = 'releasing' "
                          "WHERE order_id = ? AND status = 'pending'", "s", "", order_id);
    return db_run(db, "UPDATE orders SET status = 'releasing' WHERE order_id = ? "
                      "AND status = 'pending' "
                      "AND COALESCE(deadline_at, created_at) < NOW(3) - INTERVAL ? MICROSECOND",
                  "sl", "", order_id, expired_margin_ms * 1000);
}

long long order_store_settle(struct db_conn *db, const char *order_id, const char *status)
{
    return db_run(db, "UPDATE orders SET status = ? "
                      "WHERE order_id = ? AND status = 'releasing'", "ss", "", status, order_id);
}

long long order_store_next_unsettled(struct db_conn *db, const char *after,
                                     long long margin_ms, char *id, size_t idlen,
                                     char *status, size_t statuslen)
{
    return db_run(db, "SELECT order_id, status FROM orders "
                      "WHERE status IN ('pending', 'releasing') AND order_id > ? "
                      "AND (status = 'releasing' OR COALESCE(deadline_at, created_at) "
                      "< NOW(3) - INTERVAL ? MICROSECOND) ORDER BY order_id LIMIT 1",
                  "sl", "ss", after, margin_ms * 1000, id, idlen, status, statuslen);
}

long long order_store_count(struct db_conn *db, const char *sku, long long *orders,
                            long long *units)
{
    return db_run(db, "SELECT COUNT(*), CAST(COALESCE(SUM(qty), 0) AS SIGNED) "
                      "FROM orders WHERE sku = ? AND status = 'placed'", "s", "ll", sku,
                  orders, units);
}
