/* The ledger's statements that read it for a guard's bookkeeping or the
 * audit (store.h, "ledger reads"), all through prepared statements. */
#include "store.h"

#include "base/db.h"

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
