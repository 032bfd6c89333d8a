/* Order SQL, all through prepared statements (see order_store.h). Times
 * come from the database clock only, so order instances on different
 * machines agree on when a deadline has passed. */
#include "order_store.h"

#include "base/db.h"

long long order_store_begin(struct db_conn *db, const char *order_id, const char *user_id,
                            const char *sku, long long qty, const char *lines,
                            const char *guard, long long budget_ms)
{
    return db_run(db, "INSERT INTO orders (order_id, user_id, sku, qty, cart_lines, guard, "
                      "inventory_instance, status, deadline_at) VALUES (?, ?, ?, ?, "
                      "NULLIF(?, ''), ?, '', 'pending', NOW(3) + INTERVAL ? MICROSECOND)",
                  "sssl" "ssl", "", order_id, user_id, sku, qty, lines ? lines : "", guard,
                  budget_ms * 1000);
}

long long order_store_get(struct db_conn *db, const char *order_id, struct order_row *r)
{
    return db_run(db, "SELECT user_id, sku, qty, guard, inventory_instance, status, "
                      "COALESCE(remaining, -1), COALESCE(cart_lines, '') FROM orders "
                      "WHERE order_id = ?",
                  "s", "ssl" "sssl" "s", order_id, r->user_id, sizeof(r->user_id), r->sku,
                  sizeof(r->sku), &r->qty, r->guard, sizeof(r->guard), r->instance,
                  sizeof(r->instance), r->status, sizeof(r->status), &r->remaining, r->lines,
                  sizeof(r->lines));
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

long long order_store_await(struct db_conn *db, const char *order_id, const char *guard,
                            const char *instance, long long pay_ms)
{
    return db_run(db, "UPDATE orders SET status = 'awaiting_payment', guard = ?, "
                      "inventory_instance = ?, deadline_at = NOW(3) + INTERVAL ? MICROSECOND "
                      "WHERE order_id = ? AND status = 'pending'",
                  "ssls", "", guard, instance, pay_ms * 1000, order_id);
}

long long order_store_pay(struct db_conn *db, const char *order_id, long long remaining)
{
    return db_run(db, "UPDATE orders SET status = 'paid', remaining = ? "
                      "WHERE order_id = ? AND status = 'awaiting_payment'",
                  "ls", "", remaining, order_id);
}

long long order_store_expire(struct db_conn *db, const char *order_id)
{
    return db_run(db, "UPDATE orders SET status = 'expired' "
                      "WHERE order_id = ? AND status = 'awaiting_payment'", "s", "", order_id);
}

long long order_store_claim_unpaid(struct db_conn *db, const char *order_id,
                                   long long margin_ms)
{
    return db_run(db, "UPDATE orders SET status = 'releasing' WHERE order_id = ? "
                      "AND status = 'awaiting_payment' "
                      "AND deadline_at < NOW(3) - INTERVAL ? MICROSECOND",
                  "sl", "", order_id, margin_ms * 1000);
}

long long order_store_pay_open(struct db_conn *db, const char *order_id)
{
    long long open = 0;
    long long n = db_run(db, "SELECT deadline_at > NOW(3) FROM orders WHERE order_id = ? "
                             "AND status = 'awaiting_payment'", "s", "l", order_id, &open);
    return n < 0 ? n : n > 0 && open;
}

long long order_store_next_unsettled(struct db_conn *db, const char *after,
                                     long long margin_ms, char *id, size_t idlen,
                                     char *status, size_t statuslen)
{
    return db_run(db, "SELECT order_id, status FROM orders "
                      "WHERE status IN ('pending', 'releasing', 'awaiting_payment') "
                      "AND order_id > ? "
                      "AND (status = 'releasing' OR COALESCE(deadline_at, created_at) "
                      "< NOW(3) - INTERVAL ? MICROSECOND) ORDER BY order_id LIMIT 1",
                  "sl", "ss", after, margin_ms * 1000, id, idlen, status, statuslen);
}

long long order_store_count(struct db_conn *db, const char *sku, long long *orders,
                            long long *units)
{
    return db_run(db, "SELECT COUNT(*), CAST(COALESCE(SUM(qty), 0) AS SIGNED) "
                      "FROM orders WHERE sku = ? AND status IN ('placed', 'paid')", "s", "ll", sku,
                  orders, units);
}

long long order_store_key_take(struct db_conn *db, const char *key, const char *request,
                               const char *order_id, long long lease_ms, long long keep_s)
{
    long long n = db_run(db, "DELETE FROM idempotency_keys WHERE idem_key = ? "
                             "AND expires_at < NOW(3)", "s", "", key);
    if (n < 0)
        return n;
    return db_run(db, "INSERT INTO idempotency_keys (idem_key, request, order_id, state, "
                      "locked_until, expires_at) VALUES (?, ?, ?, 'in_flight', "
                      "NOW(3) + INTERVAL ? MICROSECOND, NOW(3) + INTERVAL ? SECOND)",
                  "sssll", "", key, request, order_id, lease_ms * 1000, keep_s);
}

long long order_store_key_get(struct db_conn *db, const char *key, const char *request,
                              struct order_key_row *r)
{
    return db_run(db, "SELECT order_id, state, request = ?, "
                      "COALESCE(locked_until < NOW(3), 1), COALESCE(answer_status, 0), "
                      "COALESCE(answer, '') FROM idempotency_keys WHERE idem_key = ?",
                  "ss", "ssiils", request, key, r->order_id, sizeof(r->order_id), r->state,
                  sizeof(r->state), &r->same_request, &r->lease_over, &r->answer_status,
                  r->answer, sizeof(r->answer));
}

long long order_store_key_retake(struct db_conn *db, const char *key, long long lease_ms)
{
    return db_run(db, "UPDATE idempotency_keys SET state = 'in_flight', "
                      "locked_until = NOW(3) + INTERVAL ? MICROSECOND WHERE idem_key = ? "
                      "AND (state = 'open' OR (state = 'in_flight' AND locked_until < NOW(3)))",
                  "ls", "", lease_ms * 1000, key);
}

long long order_store_key_done(struct db_conn *db, const char *key, long long status,
                               const char *answer)
{
    return db_run(db, "UPDATE idempotency_keys SET state = 'done', locked_until = NULL, "
                      "answer_status = ?, answer = ? WHERE idem_key = ? AND state = 'in_flight'",
                  "lss", "", status, answer, key);
}

long long order_store_key_open(struct db_conn *db, const char *key)
{
    return db_run(db, "UPDATE idempotency_keys SET state = 'open', locked_until = NULL "
                      "WHERE idem_key = ? AND state = 'in_flight'", "s", "", key);
}

long long order_store_key_purge(struct db_conn *db, long long limit)
{
    return db_run(db, "DELETE FROM idempotency_keys WHERE expires_at < NOW(3) LIMIT ?",
                  "l", "", limit);
}
