/* Every statement on db_shopping.holds (sql/010_holds.sql): a hold's row
 * and its conditional state transitions. Each transition names the state
 * it leaves in its WHERE, so two racers (a confirm and the sweeper) cannot
 * both move the same hold: the one that updates 0 rows lost. */
#include "holds.h"

#include "base/db.h"

#include <stdio.h>
#include <string.h>

int store_hold_get(struct db_conn *db, const char *order_id, int for_update,
                   struct hold_row *h)
{
    memset(h, 0, sizeof(*h));
    const char *sql = for_update
        ? "SELECT sku, qty, state, guard, user_id, "
          "CAST(UNIX_TIMESTAMP(expires_at) * 1000 AS SIGNED), "
          "expires_at <= NOW(3), fresh FROM holds WHERE order_id=? ORDER BY sku LIMIT 1 "
          "FOR UPDATE"
        : "SELECT sku, qty, state, guard, user_id, "
          "CAST(UNIX_TIMESTAMP(expires_at) * 1000 AS SIGNED), "
          "expires_at <= NOW(3), fresh FROM holds WHERE order_id=? ORDER BY sku LIMIT 1";
    long long n = db_run(db, sql, "s", "slssslll", order_id, h->sku, sizeof(h->sku), &h->qty,
                         h->state, sizeof(h->state), h->guard, sizeof(h->guard), h->user_id,
                         sizeof(h->user_id), &h->expires_at_ms, &h->past_deadline, &h->fresh);
    return n < 0 ? (int)n : n > 0;
}

int store_hold_line(struct db_conn *db, const char *order_id, int i, struct hold_line *l)
{
    memset(l, 0, sizeof(*l));
    long long n = db_run(db, "SELECT sku, qty FROM holds WHERE order_id=? ORDER BY sku "
                             "LIMIT 1 OFFSET ?", "si", "sl", order_id, i, l->sku,
                         sizeof(l->sku), &l->qty);
    return n < 0 ? (int)n : n > 0;
}

long long store_hold_insert(struct db_conn *db, const char *order_id, const char *sku,
                            long long qty, const char *guard, const char *instance,
                            const char *user_id, long long ttl_ms)
{
    return db_run(db, "INSERT INTO holds (order_id, sku, qty, state, guard, instance, "
                      "user_id, expires_at) VALUES (?, ?, ?, 'held', ?, ?, ?, "
                      "TIMESTAMPADD(MICROSECOND, ? * 1000, NOW(3)))",
                  "sslsssl", "", order_id, sku, qty, guard, instance, user_id, ttl_ms);
}

long long store_hold_insert_more(struct db_conn *db, const char *order_id, const char *sku,
                                 long long qty)
{
    /* the first row's guard, instance, buyer and deadline: one NOW(3) for
     * every row of the order */
    return db_run(db, "INSERT INTO holds (order_id, sku, qty, state, guard, instance, "
                      "user_id, expires_at) SELECT order_id, ?, ?, 'held', guard, instance, "
                      "user_id, expires_at FROM holds WHERE order_id=? ORDER BY sku LIMIT 1",
                  "sls", "", sku, qty, order_id);
}

long long store_hold_confirm(struct db_conn *db, const char *order_id, int check_deadline)
{
    if (check_deadline)
        return db_run(db, "UPDATE holds SET state='confirmed', confirmed_at=NOW(3) "
                          "WHERE order_id=? AND state='held' AND expires_at > NOW(3)",
                      "s", "", order_id);
    /* The broken variant: any hold not confirmed or released, whatever its
     * deadline and whether its units were given back. */
    return db_run(db, "UPDATE holds SET state='confirmed', confirmed_at=NOW(3) "
                      "WHERE order_id=? AND state IN ('held', 'expired')",
                  "s", "", order_id);
}

long long store_hold_confirm_fresh(struct db_conn *db, const char *order_id)
{
    return db_run(db, "UPDATE holds SET state='confirmed', confirmed_at=NOW(3), fresh=1 "
                      "WHERE order_id=? AND state='expired'",
                  "s", "", order_id);
}

long long store_hold_expire(struct db_conn *db, const char *order_id)
{
    return db_run(db, "UPDATE holds SET state='expired' "
                      "WHERE order_id=? AND state='held' AND expires_at <= NOW(3)",
                  "s", "", order_id);
}

long long store_hold_release(struct db_conn *db, const char *order_id)
{
    return db_run(db, "UPDATE holds SET state='released' WHERE order_id=? AND state='held'",
                  "s", "", order_id);
}

long long store_holds_due(struct db_conn *db, int max, char *buf, size_t len)
{
    long long n = 0;
    buf[0] = '\0';
    long long rc = db_run(db, "SELECT COUNT(*), COALESCE(GROUP_CONCAT(x.order_id "
                              "SEPARATOR ','), '') FROM (SELECT order_id FROM holds "
                              "WHERE state='held' AND expires_at <= NOW(3) GROUP BY "
                              "order_id ORDER BY MIN(expires_at) LIMIT ?) x",
                          "i", "ls", max, &n, buf, len);
    return rc < 0 ? rc : n;
}

int store_holds_audit(struct db_conn *db, const char *sku, long long *held,
                      long long *expired_unswept, char *late, size_t late_len)
{
    long long n = db_run(db, "SELECT CAST(COALESCE(SUM(IF(state='held', qty, 0)), 0) AS SIGNED), "
                             "CAST(COALESCE(SUM(state='held' AND expires_at <= NOW(3)), 0) "
                             "AS SIGNED), COALESCE(GROUP_CONCAT(IF(state='confirmed' AND "
                             "fresh=0 AND confirmed_at > expires_at, order_id, NULL) "
                             "SEPARATOR ','), '') FROM holds WHERE sku=?",
                         "s", "lls", sku, held, expired_unswept, late, late_len);
    return n < 0 ? (int)n : 1;
}

int store_holds_clear(struct db_conn *db, const char *sku)
{
    long long rc = db_run(db, "DELETE FROM holds WHERE sku=?", "s", "", sku);
    return rc < 0 ? (int)rc : 0;
}
