/* The ledger's statements (store.h): one sale's row, the group commits'
 * rows, a cart's lines, and the reads of the guards' bookkeeping and the
 * audit; all through prepared statements. */
#include "store.h"

#include "base/db.h"

#include <stdio.h>

int store_ledger_get(struct db_conn *db, const char *order_id, int for_update,
                     struct ledger_row *r)
{
    long long n = for_update
        ? db_run(db, "SELECT sku, qty, remaining, guard, instance, released, user_id "
                     "FROM ledger WHERE order_id=? FOR UPDATE", "s", "sllssis", order_id,
                 r->sku, sizeof(r->sku), &r->qty, &r->remaining, r->guard,
                 sizeof(r->guard), r->instance, sizeof(r->instance), &r->released,
                 r->user_id, sizeof(r->user_id))
        : db_run(db, "SELECT sku, qty, remaining, guard, instance, released, user_id "
                     "FROM ledger WHERE order_id=?", "s", "sllssis", order_id,
                 r->sku, sizeof(r->sku), &r->qty, &r->remaining, r->guard,
                 sizeof(r->guard), r->instance, sizeof(r->instance), &r->released,
                 r->user_id, sizeof(r->user_id));
    return n < 0 ? (int)n : n > 0;
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
                              const char *guard, const char *instance, const char *user_id)
{
    if (db->dialect == DB_DIALECT_MYSQL)
        return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, sku, qty, remaining, "
                                             "guard, instance, user_id) SELECT ?, ?, ?, ?, ?, ?, ? "
                                             "FROM DUAL WHERE " DB_IN_OUR_TXN, "ssllsssl", "",
                                         order_id, sku, qty, remaining, guard, instance,
                                         user_id, db->txn_seq));
    return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, sku, qty, remaining, "
                                         "guard, instance, user_id) SELECT ?, ?, ?, ?, ?, ?, ? "
                                         "FROM DUAL WHERE @@in_transaction = 1", "ssllsss", "",
                                     order_id, sku, qty, remaining, guard, instance, user_id));
}

long long store_ledger_mark_released(struct db_conn *db, const char *order_id)
{
    return db_run(db, "UPDATE ledger SET released=1 WHERE order_id=? AND released=0",
                  "s", "", order_id);
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

long long store_ledger_insert_lines(struct db_conn *db, const char *rows, const char *guard)
{
    /* As store_ledger_insert_rows, with the line: inside a transaction
     * only, one statement whatever the row count. */
#define LEDGER_LINES_INSERT                                                             \
    "INSERT INTO ledger (order_id, line, sku, qty, remaining, guard, instance) "        \
    "SELECT j.o, j.l, j.s, j.q, j.r, ?, j.i FROM JSON_TABLE(?, '$[*]' COLUMNS ("        \
    "o VARCHAR(64) CHARACTER SET ascii PATH '$[0]' ERROR ON EMPTY, "                    \
    "l INT PATH '$[1]' ERROR ON EMPTY, "                                                \
    "s VARCHAR(64) CHARACTER SET ascii PATH '$[2]' ERROR ON EMPTY, "                    \
    "q BIGINT PATH '$[3]' ERROR ON EMPTY, "                                             \
    "r BIGINT PATH '$[4]' ERROR ON EMPTY, "                                             \
    "i VARCHAR(64) PATH '$[5]' ERROR ON EMPTY, "                                        \
    "n FOR ORDINALITY)) AS j WHERE "
    if (db->dialect == DB_DIALECT_MYSQL)
        return ledger_refused(db, db_run(db, LEDGER_LINES_INSERT DB_IN_OUR_TXN " ORDER BY j.n",
                                         "ssl", "", guard, rows, db->txn_seq));
    return ledger_refused(db, db_run(db, LEDGER_LINES_INSERT "@@in_transaction = 1 ORDER BY j.n",
                                     "ss", "", guard, rows));
#undef LEDGER_LINES_INSERT
}

long long store_ledger_insert_ignore(struct db_conn *db, const char *order_id, int line,
                                     const char *sku, long long qty, long long remaining,
                                     const char *guard, const char *instance)
{
    return db_run(db, "INSERT IGNORE INTO ledger (order_id, line, sku, qty, remaining, guard, "
                      "instance) VALUES (?, ?, ?, ?, ?, ?, ?)", "sisllss", "",
                  order_id, line, sku, qty, remaining, guard, instance);
}

long long store_ledger_insert_line(struct db_conn *db, const char *order_id, int line,
                                   const char *sku, long long qty, long long remaining,
                                   const char *guard, const char *instance,
                                   const char *user_id)
{
    /* Inside the cart's transaction only, as store_ledger_insert: a line
     * whose transaction a Galera brute-force abort took is refused
     * (DB_ERETRY), never written alone in autocommit. */
    if (db->dialect == DB_DIALECT_MYSQL)
        return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, line, sku, qty, "
                                             "remaining, guard, instance, user_id) SELECT ?, ?, "
                                             "?, ?, ?, ?, ?, ? FROM DUAL WHERE " DB_IN_OUR_TXN,
                                         "sisllsssl", "", order_id, line, sku, qty, remaining,
                                         guard, instance, user_id, db->txn_seq));
    return ledger_refused(db, db_run(db, "INSERT INTO ledger (order_id, line, sku, qty, "
                                         "remaining, guard, instance, user_id) SELECT ?, ?, ?, "
                                         "?, ?, ?, ?, ? FROM DUAL WHERE @@in_transaction = 1",
                                     "sisllsss", "", order_id, line, sku, qty, remaining, guard,
                                     instance, user_id));
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
    long long n = db_run(db, "SELECT sku, qty, remaining, guard, instance, released, user_id "
                             "FROM ledger WHERE order_id=? AND line=?", "si", "sllssis",
                         order_id, line, r->sku, sizeof(r->sku), &r->qty, &r->remaining,
                         r->guard, sizeof(r->guard), r->instance, sizeof(r->instance),
                         &r->released, r->user_id, sizeof(r->user_id));
    return n < 0 ? (int)n : n > 0;
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

long long store_ledger_intent_of(struct db_conn *db, const char *order_id, char *intent,
                                 size_t intent_len, char *guard, size_t guard_len)
{
    return db_run(db, "SELECT COALESCE(intent, ''), guard FROM ledger WHERE order_id=?", "s",
                  "ss", order_id, intent, intent_len, guard, guard_len);
}

long long store_ledger_has_intent(struct db_conn *db, const char *order_id, const char *intent)
{
    long long one = 0;
    return db_run(db, "SELECT 1 FROM ledger WHERE order_id=? AND intent=?", "ss", "l", order_id,
                  intent, &one);
}

long long store_ledger_units_of_intents(struct db_conn *db, const char *pairs, long long *units)
{
    return db_run(db, "SELECT CAST(COALESCE(SUM(l.qty), 0) AS SIGNED) FROM JSON_TABLE(?, "
                      "'$[*]' COLUMNS (o VARCHAR(64) CHARACTER SET ascii PATH '$[0]', "
                      "t VARCHAR(96) CHARACTER SET ascii PATH '$[1]')) AS j JOIN ledger l "
                      "ON l.order_id = j.o COLLATE ascii_bin AND l.intent = j.t COLLATE ascii_bin",
                  "s", "l", pairs, units);
}

long long store_ledger_sale(struct db_conn *db, const char *order_id, struct ledger_sale *out)
{
    return db_run(db, "SELECT guard, sku, qty, remaining, instance, released FROM ledger "
                      "WHERE order_id=?", "s", "ssllsl", order_id,
                  out->guard, sizeof(out->guard), out->sku, sizeof(out->sku), &out->qty,
                  &out->remaining, out->instance, sizeof(out->instance), &out->released);
}

long long store_ledger_rows_of(struct db_conn *db, const char *order_ids, char *out,
                               size_t cap)
{
    return db_run(db, "SELECT COALESCE(JSON_ARRAYAGG(JSON_ARRAY(l.order_id, l.sku, "
                      "l.qty, l.remaining, l.guard, l.instance)), '[]') FROM ledger l "
                      "WHERE l.order_id IN (SELECT j.o COLLATE ascii_bin FROM "
                      "JSON_TABLE(?, '$[*]' COLUMNS (o VARCHAR(64) CHARACTER SET ascii "
                      "PATH '$')) AS j)", "s", "s", order_ids, out, cap);
}

long long store_ledger_guard_sold(struct db_conn *db, const char *sku, const char *guard)
{
    long long one = 0;
    long long n = db_run(db, "SELECT 1 FROM ledger WHERE sku=? AND guard=? LIMIT 1", "ss", "l",
                         sku, guard, &one);
    return n < 0 ? n : n > 0;
}

long long store_ledger_guards_count(struct db_conn *db, const char *sku)
{
    long long k = 0;
    long long n = db_run(db, "SELECT COUNT(DISTINCT guard) FROM ledger WHERE sku=?", "s", "l",
                         sku, &k);
    return n < 0 ? n : k;
}

long long store_ledger_insert_rows_after_left(struct db_conn *db, const char *rows,
                                              const char *guard, long long *left)
{
    /* As store_ledger_insert_rows: inside a transaction only (a Galera
     * abort between statements must not let it run alone). */
    return db_run(db, "INSERT INTO ledger (order_id, sku, qty, remaining, guard, instance, intent) "
                  "SELECT j.o, j.s, j.q, @lab_left + j.r, ?, j.i, j.t FROM JSON_TABLE(?, '$[*]' COLUMNS ("
                  "o VARCHAR(64) CHARACTER SET ascii PATH '$[0]' ERROR ON EMPTY, "
                  "s VARCHAR(64) CHARACTER SET ascii PATH '$[1]' ERROR ON EMPTY, "
                  "q BIGINT PATH '$[2]' ERROR ON EMPTY, "
                  "r BIGINT PATH '$[3]' ERROR ON EMPTY, "
                  "i VARCHAR(64) PATH '$[4]' ERROR ON EMPTY, "
                  "t VARCHAR(96) CHARACTER SET ascii PATH '$[5]', "
                  "n FOR ORDINALITY)) AS j WHERE @@in_transaction = 1 ORDER BY j.n "
                  "RETURNING @lab_left",
                  "ss", "l", guard, rows, left);
}
