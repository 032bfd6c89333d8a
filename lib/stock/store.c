/* The inventory rows' statements (store.h): reads, the guards' stock
 * writes, seed and removal; all through prepared statements. The ledger's
 * are in store_ledger.c, the fences' and the lock table's in store_locks.c,
 * the audit's in store_audit.c. */
#include "store.h"
#include "holds.h"

#include "base/db.h"

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
                             "limit_per_user=0 AND " DB_IN_OUR_TXN, "lsll" "l", "", sum, sku, sum, seeds,
                         db->txn_seq);
    *left = (long long)db->insert_id;
    return m;
}

long long store_take_group_into_session(struct db_conn *db, const char *sku, long long sum,
                                        long long seeds)
{
    return db_run(db, "UPDATE inventory SET stock=(@lab_left:=stock-?), "
                      "version=version+1 WHERE sku=? AND stock>=? AND seeds=? "
                      "AND limit_per_user=0 AND @@in_transaction = 1",
                  "lsll", "", sum, sku, sum, seeds);
}

long long store_add_stock(struct db_conn *db, const char *sku, long long delta)
{
    return db_run(db, "UPDATE inventory SET stock=stock+?, version=version+1 WHERE sku=?",
                  "ls", "", delta, sku);
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
    if (rc >= 0)   /* the old seed's holds: their units are in the new stock */
        rc = store_holds_clear(db, sku);
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
        rc = store_holds_clear(db, sku);
    if (rc >= 0)
        rc = db_run(db, "DELETE FROM inventory WHERE sku=?", "s", "", sku);
    return rc < 0 ? (int)rc : 0;
}

int store_info(struct db_conn *db, const char *sku, long long *stock,
               long long *version, long long *initial, int *segments)
{
    long long n = db_run(db, "SELECT stock, version, initial, segments FROM inventory "
                             "WHERE sku=?", "s", "llli", sku, stock, version, initial,
                         segments);
    return n < 0 ? (int)n : n > 0;
}

long long store_take_floor(struct db_conn *db, const char *sku, long long qty)
{
    return db_run(db, "UPDATE inventory SET stock=GREATEST(stock-?, 0), version=version+1 "
                      "WHERE sku=?", "ls", "", qty, sku);
}

long long store_take_unchecked(struct db_conn *db, const char *sku, long long qty)
{
    return db_run(db, "UPDATE inventory SET stock=stock-?, version=version+1 WHERE sku=?",
                  "ls", "", qty, sku);
}

