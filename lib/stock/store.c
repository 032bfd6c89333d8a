/* Inventory SQL, all through prepared statements. */
#include "store.h"

#include "keys.h"

#include "base/db.h"

#include <stdio.h>
#include <stdlib.h>

int store_ledger_get(struct db_conn *db, const char *order_id, int for_update,
                     struct ledger_row *r)
{
    long long n = for_update
        ? db_run(db, "SELECT sku, qty, remaining, guard, instance, released "
                     "FROM ledger WHERE order_id=? FOR UPDATE", "s", "sllssi", order_id,
                 r->sku, sizeof(r->sku), &r->qty, &r->remaining, r->guard,
                 sizeof(r->guard), r->instance, sizeof(r->instance), &r->released)
        : db_run(db, "SELECT sku, qty, remaining, guard, instance, released "
                     "FROM ledger WHERE order_id=?", "s", "sllssi", order_id,
                 r->sku, sizeof(r->sku), &r->qty, &r->remaining, r->guard,
                 sizeof(r->guard), r->instance, sizeof(r->instance), &r->released);
    return n < 0 ? (int)n : n > 0;
}

int store_read(struct db_conn *db, const char *sku, int for_update,
               long long *stock, long long *version)
{
    long long n = for_update
        ? db_run(db, "SELECT stock, version FROM inventory WHERE sku=? FOR UPDATE",
                 "s", "ll", sku, stock, version)
        : db_run(db, "SELECT stock, version FROM inventory WHERE sku=?",
                 "s", "ll", sku, stock, version);
    return n < 0 ? (int)n : n > 0;
}

int store_read_seeded(struct db_conn *db, const char *sku, long long *stock,
                      long long *version, long long *seeds)
{
    long long n = db_run(db, "SELECT stock, version, seeds FROM inventory WHERE sku=?",
                         "s", "lll", sku, stock, version, seeds);
    return n < 0 ? (int)n : n > 0;
}

long long store_set_stock_seeded(struct db_conn *db, const char *sku, long long stock,
                                 long long seeds)
{
    return db_run(db, "UPDATE inventory SET stock=?, version=version+1 WHERE sku=? AND seeds=?",
                  "lsl", "", stock, sku, seeds);
}

long long store_set_stock(struct db_conn *db, const char *sku, long long stock)
{
    /* After a locking read: inside that transaction only (see
     * ledger_refused below). */
    if (db->dialect == DB_DIALECT_MYSQL)
        return db_run(db, "UPDATE inventory SET stock=?, version=version+1 WHERE sku=? "
                          "AND " DB_IN_OUR_TXN, "lsl", "", stock, sku, db->txn_seq);
    return db_run(db, "UPDATE inventory SET stock=?, version=version+1 WHERE sku=? "
                      "AND @@in_transaction = 1", "ls", "", stock, sku);
}

/* The token travels as a decimal string: db_run binds signed 64-bit only,
 * and a token may use the whole unsigned range. The fence row is made on
 * the first claim of a guard, and only for a SKU that exists. Affected
 * rows: 1 inserted, 2 raised, 0 left alone (a token as new or newer). */
long long store_fence_claim(struct db_conn *db, const char *sku, const char *guard,
                            unsigned long long token)
{
    char t[24];
    snprintf(t, sizeof(t), "%llu", token);
    long long n = db_run(db, "INSERT INTO inventory_fence (sku, guard, fence) "
                             "SELECT sku, ?, CAST(? AS UNSIGNED) FROM inventory WHERE sku=? "
                             "ON DUPLICATE KEY UPDATE inventory_fence.fence = "
                             "IF(inventory_fence.fence < VALUES(fence), VALUES(fence), "
                             "inventory_fence.fence)",
                         "sss", "", guard, t, sku);
    return n < 0 ? n : n > 0;
}

long long store_set_stock_fenced(struct db_conn *db, const char *sku, const char *guard,
                                 long long stock, unsigned long long token, long long version)
{
    char t[24];
    snprintf(t, sizeof(t), "%llu", token);
    /* The fence row is "written" too (to itself): both rows are then read
     * with their row locks, whatever the isolation level, so a newer
     * holder's claim waits for this transaction, and its read after the
     * claim sees this write. */
    return db_run(db, "UPDATE inventory i JOIN inventory_fence f "
                      "ON f.sku = i.sku AND f.guard = ? "
                      "SET i.stock=?, i.version=i.version+1, f.fence=f.fence "
                      "WHERE i.sku=? AND f.fence = CAST(? AS UNSIGNED) AND i.version=?",
                  "slssl", "", guard, stock, sku, t, version);
}

int store_fence_get(struct db_conn *db, const char *sku, const char *guard,
                    unsigned long long *fence)
{
    char t[24] = "0";
    long long n = db_run(db, "SELECT CAST(fence AS CHAR) FROM inventory_fence "
                             "WHERE sku=? AND guard=?", "ss", "s", sku, guard, t, sizeof(t));
    if (n < 0)
        return (int)n;
    *fence = n > 0 ? strtoull(t, NULL, 10) : 0;
    return 1;
}

long long store_set_stock_if_version(struct db_conn *db, const char *sku,
                                     long long stock, long long version)
{
    return db_run(db, "UPDATE inventory SET stock=?, version=version+1 "
                      "WHERE sku=? AND version=?", "lsl", "", stock, sku, version);
}

long long store_take_if_enough(struct db_conn *db, const char *sku, long long qty)
{
    return db_run(db, "UPDATE inventory SET stock=stock-?, version=version+1 "
                      "WHERE sku=? AND stock>=?", "lsl", "", qty, sku, qty);
}

long long store_take_if_enough_left(struct db_conn *db, const char *sku, long long qty,
                                    long long *left)
{
    /* LAST_INSERT_ID(expr) hands the value written back in the UPDATE's
     * own OK packet (mysql_stmt_insert_id): no SELECT after it. */
    long long n = db_run(db, "UPDATE inventory SET stock=LAST_INSERT_ID(stock-?), "
                             "version=version+1 WHERE sku=? AND stock>=?",
                         "lsl", "", qty, sku, qty);
    if (n == 1)
        *left = (long long)db->insert_id;
    return n;
}

int store_read_seeds_locked(struct db_conn *db, const char *sku, long long *stock,
                            long long *seeds)
{
    long long n = db_run(db, "SELECT stock, seeds FROM inventory WHERE sku=? FOR UPDATE", "s",
                         "ll", sku, stock, seeds);
    return n < 0 ? (int)n : n > 0;
}

long long store_take_if_enough_seeded(struct db_conn *db, const char *sku, long long qty,
                                      long long seeds)
{
    return db_run(db, "UPDATE inventory SET stock=stock-?, version=version+1 "
                      "WHERE sku=? AND stock>=? AND seeds=?", "lsll", "", qty, sku, qty, seeds);
}

long long store_take_locked(struct db_conn *db, const char *sku, long long qty)
{
    if (db->dialect == DB_DIALECT_MYSQL)
        return db_run(db, "UPDATE inventory SET stock=stock-?, version=version+1 "
                          "WHERE sku=? AND stock>=? AND " DB_IN_OUR_TXN, "lsll", "", qty, sku,
                      qty, db->txn_seq);
    return db_run(db, "UPDATE inventory SET stock=stock-?, version=version+1 "
                      "WHERE sku=? AND stock>=? AND @@in_transaction = 1", "lsl", "", qty, sku,
                  qty);
}

long long store_take_group_left(struct db_conn *db, const char *sku, long long sum,
                                long long seeds, long long *left)
{
    long long m = db_run(db, "UPDATE inventory SET stock=LAST_INSERT_ID(stock-?), "
                             "version=version+1 WHERE sku=? AND stock>=? AND seeds=? AND "
                             DB_IN_OUR_TXN, "lsll" "l", "", sum, sku, sum, seeds,
                         db->txn_seq);
    *left = (long long)db->insert_id;
    return m;
}

long long store_take_group_into_session(struct db_conn *db, const char *sku, long long sum,
                                        long long seeds)
{
    return db_run(db, "UPDATE inventory SET stock=(@lab_left:=stock-?), "
                      "version=version+1 WHERE sku=? AND stock>=? AND seeds=? "
                      "AND @@in_transaction = 1",
                  "lsll", "", sum, sku, sum, seeds);
}

long long store_add_stock(struct db_conn *db, const char *sku, long long delta)
{
    return db_run(db, "UPDATE inventory SET stock=stock+?, version=version+1 WHERE sku=?",
                  "ls", "", delta, sku);
}

/* A Galera node can abort our transaction (a brute-force abort by a write
 * set from another node) between two statements; measured here, the next
 * prepared statement then sometimes ran on its own, in autocommit, instead
 * of failing with 1213: a ledger row committed without the stock write it
 * belonged to. The ledger row is only written inside a transaction; when
 * ours is gone, nothing is written and the caller gets DB_ERETRY, as for
 * any conflict (the stock write was rolled back with the transaction).
 * MariaDB says so itself (@@in_transaction); the portable form asks the
 * transaction's marker (DB_IN_OUR_TXN, db.h). */
static long long ledger_refused(struct db_conn *db, long long n)
{
    if (n != 0)
        return n;
    db->conflicts++;
    snprintf(db->errstr, sizeof(db->errstr),
             "the transaction was aborted before the ledger write (Galera brute-force abort)");
    return db->err = DB_ERETRY;
}

long long store_ledger_insert(struct db_conn *db, const char *order_id,
                              const char *sku, long long qty, long long remaining,
                              const char *guard, const char *instance)
{
    if (db->dialect == DB_DIALECT_MYSQL)
        return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, sku, qty, remaining, "
                                             "guard, instance) SELECT ?, ?, ?, ?, ?, ? FROM DUAL "
                                             "WHERE " DB_IN_OUR_TXN, "ssllssl", "", order_id,
                                         sku, qty, remaining, guard, instance, db->txn_seq));
    return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, sku, qty, remaining, "
                                         "guard, instance) SELECT ?, ?, ?, ?, ?, ? FROM DUAL "
                                         "WHERE @@in_transaction = 1", "ssllss", "",
                                     order_id, sku, qty, remaining, guard, instance));
}

long long store_ledger_mark_released(struct db_conn *db, const char *order_id)
{
    return db_run(db, "UPDATE ledger SET released=1 WHERE order_id=? AND released=0",
                  "s", "", order_id);
}

int store_seed(struct db_conn *db, const char *sku, long long stock, int segments)
{
    /* version goes on counting (never back to 0): an optimistic sale that
     * read the old row must not match the new one. */
    long long rc = db_run(db, "INSERT INTO inventory (sku, stock, initial, version, segments) "
                              "VALUES (?, ?, ?, 0, ?) ON DUPLICATE KEY UPDATE "
                              "stock=VALUES(stock), initial=VALUES(initial), "
                              "version=version+1, segments=VALUES(segments), "
                              "seeds=seeds+1",
                          "slli", "", sku, stock, stock, segments);
    if (rc >= 0)
        rc = db_run(db, "DELETE FROM ledger WHERE sku=?", "s", "", sku);
    if (rc >= 0)   /* every guard's fence back to 0 */
        rc = db_run(db, "DELETE FROM inventory_fence WHERE sku=?", "s", "", sku);
    /* The SKU's lock-table row is left alone: a holder on another instance
     * still holds it, and its write is refused by `seeds` instead. */
    return rc < 0 ? (int)rc : 0;
}

int store_remove(struct db_conn *db, const char *sku)
{
    long long rc = db_run(db, "DELETE FROM ledger WHERE sku=?", "s", "", sku);
    if (rc >= 0)
        rc = db_run(db, "DELETE FROM inventory_fence WHERE sku=?", "s", "", sku);
    if (rc >= 0)
        rc = db_run(db, "DELETE FROM inventory WHERE sku=?", "s", "", sku);
    return rc < 0 ? (int)rc : 0;
}

int store_audit(struct db_conn *db, const char *sku, long long *initial,
                long long *stock, long long *sold)
{
    long long n = db_run(db, "SELECT i.initial, i.stock, "
                             "(SELECT CAST(COALESCE(SUM(l.qty), 0) AS SIGNED) FROM ledger l "
                             " WHERE l.sku=i.sku AND l.released=0) "
                             "FROM inventory i WHERE i.sku=?",
                         "s", "lll", sku, initial, stock, sold);
    return n < 0 ? (int)n : n > 0;
}

int store_unmoved_orders(struct db_conn *db, const char *sku, int max, char *buf, size_t len)
{
    long long n = 0;
    buf[0] = '\0';
    /* one row back (db_run reads the first): the ids joined; the earliest
     * row of each repeated `remaining` is the one that moved the stock */
    long long rc = db_run(db, "SELECT COUNT(*), COALESCE(GROUP_CONCAT(x.order_id ORDER BY x.id "
                              "SEPARATOR ','), '') FROM (SELECT l.order_id, l.id FROM ledger l "
                              "JOIN (SELECT remaining, MIN(id) AS first FROM ledger "
                              "WHERE sku=? AND released=0 GROUP BY remaining "
                              "HAVING COUNT(*) > 1) d ON l.remaining = d.remaining "
                              "AND l.id > d.first WHERE l.sku=? AND l.released=0 "
                              "ORDER BY l.id LIMIT ?) x",
                          "ssi", "ls", sku, sku, max, &n, buf, len);
    return rc < 0 ? (int)rc : (int)n;
}

int store_info(struct db_conn *db, const char *sku, long long *stock,
               long long *version, long long *initial, int *segments)
{
    long long n = db_run(db, "SELECT stock, version, initial, segments FROM inventory "
                             "WHERE sku=?", "s", "llli", sku, stock, version, initial,
                         segments);
    return n < 0 ? (int)n : n > 0;
}

long long store_lock_row_insert(struct db_conn *db, const char *name, const char *owner,
                                long ttl_ms)
{
    return db_run(db, "INSERT INTO lock_table (lock_name, owner, expires_at) "
                      "VALUES (?, ?, TIMESTAMPADD(MICROSECOND, ? * 1000, NOW(3)))",
                  "ssl", "", name, owner, (long long)ttl_ms);
}

long long store_lock_row_expire(struct db_conn *db, const char *name)
{
    return db_run(db, "DELETE FROM lock_table WHERE lock_name=? AND expires_at < NOW(3)",
                  "s", "", name);
}

long long store_lock_row_delete(struct db_conn *db, const char *name, const char *owner)
{
    return db_run(db, "DELETE FROM lock_table WHERE lock_name=? AND owner=?", "ss", "",
                  name, owner);
}

long long store_lock_row_pass(struct db_conn *db, const char *name, const char *from,
                              const char *to, long ttl_ms)
{
    return db_run(db, "UPDATE lock_table SET owner=?, "
                      "expires_at=TIMESTAMPADD(MICROSECOND, ? * 1000, NOW(3)) "
                      "WHERE lock_name=? AND owner=? AND expires_at >= NOW(3)",
                  "slss", "", to, (long long)ttl_ms, name, from);
}

int store_lock_row_id(struct db_conn *db, const char *name, const char *owner,
                      unsigned long long *id)
{
    char buf[24];
    long long n = db_run(db, "SELECT CAST(id AS CHAR) FROM lock_table "
                             "WHERE lock_name=? AND owner=?", "ss", "s", name, owner,
                         buf, sizeof(buf));
    if (n > 0)
        *id = strtoull(buf, NULL, 10);
    return n < 0 ? (int)n : n > 0;
}

long long store_ledger_insert_rows(struct db_conn *db, const char *rows, const char *guard)
{
    /* One statement whatever the row count: the rows travel as one JSON
     * parameter, so the prepared statement (and its cache slot) is one.
     * Inside a transaction only, as store_ledger_insert. JSON_TABLE: MariaDB
     * 10.6+ and MySQL 8.0.4+ alike. */
#define LEDGER_ROWS_INSERT                                                              \
    "INSERT INTO ledger (order_id, sku, qty, remaining, guard, instance, intent) "      \
    "SELECT j.o, j.s, j.q, j.r, ?, j.i, j.t FROM JSON_TABLE(?, '$[*]' COLUMNS ("       \
    "o VARCHAR(64) CHARACTER SET ascii PATH '$[0]' ERROR ON EMPTY, "                    \
    "s VARCHAR(64) CHARACTER SET ascii PATH '$[1]' ERROR ON EMPTY, "                    \
    "q BIGINT PATH '$[2]' ERROR ON EMPTY, "                                             \
    "r BIGINT PATH '$[3]' ERROR ON EMPTY, "                                             \
    "i VARCHAR(64) PATH '$[4]' ERROR ON EMPTY, "                                        \
    "t VARCHAR(96) CHARACTER SET ascii PATH '$[5]', "                                   \
    "n FOR ORDINALITY)) AS j WHERE "
    if (db->dialect == DB_DIALECT_MYSQL)
        return ledger_refused(db, db_run(db, LEDGER_ROWS_INSERT DB_IN_OUR_TXN " ORDER BY j.n",
                                         "ssl", "", guard, rows, db->txn_seq));
    return ledger_refused(db, db_run(db, LEDGER_ROWS_INSERT "@@in_transaction = 1 ORDER BY j.n",
                                     "ss", "", guard, rows));
#undef LEDGER_ROWS_INSERT
}

long long store_ledger_insert_ignore(struct db_conn *db, const char *order_id,
                                     const char *sku, long long qty, long long remaining,
                                     const char *guard, const char *instance)
{
    return db_run(db, "INSERT IGNORE INTO ledger (order_id, sku, qty, remaining, guard, instance) "
                      "VALUES (?, ?, ?, ?, ?, ?)", "ssllss", "",
                  order_id, sku, qty, remaining, guard, instance);
}

long long store_take_floor(struct db_conn *db, const char *sku, long long qty)
{
    return db_run(db, "UPDATE inventory SET stock=GREATEST(stock-?, 0), version=version+1 "
                      "WHERE sku=?", "ls", "", qty, sku);
}

/* ---- carts -------------------------------------------------------------- */

long long store_ledger_insert_line(struct db_conn *db, const char *order_id, int line,
                                   const char *sku, long long qty, long long remaining,
                                   const char *guard, const char *instance)
{
    /* Inside the cart's transaction only, as store_ledger_insert: a line
     * whose transaction a Galera brute-force abort took is refused
     * (DB_ERETRY), never written alone in autocommit. */
    if (db->dialect == DB_DIALECT_MYSQL)
        return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, line, sku, qty, "
                                             "remaining, guard, instance) SELECT ?, ?, ?, ?, ?, "
                                             "?, ? FROM DUAL WHERE " DB_IN_OUR_TXN,
                                         "sisllssl", "", order_id, line, sku, qty, remaining,
                                         guard, instance, db->txn_seq));
    return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, line, sku, qty, "
                                         "remaining, guard, instance) SELECT ?, ?, ?, ?, ?, ?, ? "
                                         "FROM DUAL WHERE @@in_transaction = 1",
                                     "sisllss", "", order_id, line, sku, qty, remaining, guard,
                                     instance));
}

long long store_ledger_count(struct db_conn *db, const char *order_id)
{
    long long count = 0;
    long long n = db_run(db, "SELECT COUNT(*) FROM ledger WHERE order_id=?", "s", "l",
                         order_id, &count);
    return n < 0 ? n : count;
}

int store_ledger_get_line(struct db_conn *db, const char *order_id, int line,
                          struct ledger_row *r)
{
    long long n = db_run(db, "SELECT sku, qty, remaining, guard, instance, released "
                             "FROM ledger WHERE order_id=? AND line=?", "si", "sllssi",
                         order_id, line, r->sku, sizeof(r->sku), &r->qty, &r->remaining,
                         r->guard, sizeof(r->guard), r->instance, sizeof(r->instance),
                         &r->released);
    return n < 0 ? (int)n : n > 0;
}

long long store_take_unchecked(struct db_conn *db, const char *sku, long long qty)
{
    return db_run(db, "UPDATE inventory SET stock=stock-?, version=version+1 WHERE sku=?",
                  "ls", "", qty, sku);
}

long long store_release_line(struct db_conn *db, const char *order_id, int line)
{
    long long n = db_run(db, "UPDATE inventory i JOIN ledger l ON l.sku = i.sku "
                             "SET i.stock = i.stock + l.qty, i.version = i.version + 1, "
                             "l.released = 1 "
                             "WHERE l.order_id=? AND l.line=? AND l.released=0",
                         "si", "", order_id, line);
    return n < 0 ? n : n > 0;
}
