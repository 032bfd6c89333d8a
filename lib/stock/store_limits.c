/* Purchase limits' statements (store.h): the SKU's limit, the per-user
 * counts in user_purchases, and the audit's per-user overbuys from the
 * ledger; all through prepared statements. */
#include "store.h"

#include "base/db.h"

#include <stdio.h>

int store_limit_of(struct db_conn *db, const char *sku, long long *limit)
{
    long long n = db_run(db, "SELECT limit_per_user FROM inventory WHERE sku=?", "s", "l",
                         sku, limit);
    return n < 0 ? (int)n : n > 0;
}

int store_read_limit(struct db_conn *db, const char *sku, int for_update, long long *stock,
                     long long *version, long long *limit)
{
    long long n = for_update
        ? db_run(db, "SELECT stock, version, limit_per_user FROM inventory WHERE sku=? "
                     "FOR UPDATE", "s", "lll", sku, stock, version, limit)
        : db_run(db, "SELECT stock, version, limit_per_user FROM inventory WHERE sku=?",
                 "s", "lll", sku, stock, version, limit);
    return n < 0 ? (int)n : n > 0;
}

int store_read_seeded_limit(struct db_conn *db, const char *sku, long long *stock,
                            long long *version, long long *seeds, long long *limit)
{
    long long n = db_run(db, "SELECT stock, version, seeds, limit_per_user FROM inventory "
                             "WHERE sku=?", "s", "llll", sku, stock, version, seeds, limit);
    return n < 0 ? (int)n : n > 0;
}

int store_read_seeds_limit_locked(struct db_conn *db, const char *sku, long long *stock,
                                  long long *seeds, long long *limit)
{
    long long n = db_run(db, "SELECT stock, seeds, limit_per_user FROM inventory WHERE sku=? "
                             "FOR UPDATE", "s", "lll", sku, stock, seeds, limit);
    return n < 0 ? (int)n : n > 0;
}

long long store_take_if_enough_unlimited(struct db_conn *db, const char *sku, long long qty,
                                         long long *left)
{
    /* LAST_INSERT_ID(expr): the stock left comes back in the OK packet. */
    long long n = db_run(db, "UPDATE inventory SET stock=LAST_INSERT_ID(stock-?), "
                             "version=version+1 WHERE sku=? AND stock>=? AND limit_per_user=0",
                         "lsl", "", qty, sku, qty);
    if (n == 1)
        *left = (long long)db->insert_id;
    return n;
}

int store_limit_set(struct db_conn *db, const char *sku, long long limit)
{
    long long rc = db_run(db, "UPDATE inventory SET limit_per_user=? WHERE sku=?", "ls", "",
                          limit, sku);
    if (rc >= 0)   /* a reseed starts every buyer's count again */
        rc = db_run(db, "DELETE FROM user_purchases WHERE sku=?", "s", "", sku);
    return rc < 0 ? (int)rc : 0;
}

long long store_limit_take(struct db_conn *db, const char *sku, const char *user_id,
                           long long qty, long long limit)
{
    /* One round trip inside the sale's row lock: a new buyer's row is
     * inserted only when qty fits the limit; an existing one moves only
     * while bought + qty <= limit. Affected rows: 1 inserted, 2 moved, 0
     * refused (the value left as it was; no CLIENT_FOUND_ROWS). The upsert
     * takes the user's row lock at once (no shared lock to upgrade), held
     * until COMMIT: a second sale of the same user waits and re-checks the
     * committed count. */
    /* Only inside our transaction, as the ledger's insert (store_ledger.c,
     * ledger_refused): after a Galera brute-force abort the statement
     * would otherwise count a sale that never commits. No row selected:
     * neither branch runs. */
    long long n;
    if (db->dialect == DB_DIALECT_MYSQL)
        n = db_run(db, "INSERT INTO user_purchases (sku, user_id, bought) SELECT ?, ?, ? "
                       "FROM DUAL WHERE ? <= ? AND " DB_IN_OUR_TXN " ON DUPLICATE KEY UPDATE "
                       "bought = IF(bought + ? <= ?, bought + ?, bought)",
                   "sslllllll", "", sku, user_id, qty, qty, limit, db->txn_seq, qty, limit, qty);
    else
        n = db_run(db, "INSERT INTO user_purchases (sku, user_id, bought) SELECT ?, ?, ? "
                       "FROM DUAL WHERE ? <= ? AND @@in_transaction = 1 ON DUPLICATE KEY "
                       "UPDATE bought = IF(bought + ? <= ?, bought + ?, bought)",
                   "ssllllll", "", sku, user_id, qty, qty, limit, qty, limit, qty);
    if (n != 0)
        return n;
    /* Refused: over the limit, or our transaction is gone (then DB_ERETRY,
     * as for any conflict; nothing was written). */
    long long alive = 0;
    long long m = db->dialect == DB_DIALECT_MYSQL
                      ? db_run(db, "SELECT " DB_IN_OUR_TXN, "l", "l", db->txn_seq, &alive)
                      : db_run(db, "SELECT @@in_transaction", "", "l", &alive);
    if (m < 0)
        return m;
    if (alive)
        return 0;
    db->conflicts++;
    snprintf(db->errstr, sizeof(db->errstr),
             "the transaction was aborted before the purchase count (Galera brute-force abort)");
    return db->err = DB_ERETRY;
}

long long store_limit_add(struct db_conn *db, const char *sku, const char *user_id,
                          long long qty)
{
    return db_run(db, "INSERT INTO user_purchases (sku, user_id, bought) VALUES (?, ?, ?) "
                      "ON DUPLICATE KEY UPDATE bought=bought+VALUES(bought)", "ssl", "",
                  sku, user_id, qty);
}

long long store_limit_give(struct db_conn *db, const char *sku, const char *user_id,
                           long long qty)
{
    return db_run(db, "UPDATE user_purchases SET bought=GREATEST(bought-?, 0) "
                      "WHERE sku=? AND user_id=?", "lss", "", qty, sku, user_id);
}

int store_limit_bought(struct db_conn *db, const char *sku, const char *user_id,
                       long long *bought)
{
    *bought = 0;
    long long n = db_run(db, "SELECT bought FROM user_purchases WHERE sku=? AND user_id=?",
                         "ss", "l", sku, user_id, bought);
    return n < 0 ? (int)n : n > 0;
}

int store_over_limit(struct db_conn *db, const char *sku, long long *limit, long long *count,
                     char *buf, size_t len)
{
    *limit = *count = 0;
    buf[0] = '\0';
    long long n = db_run(db, "SELECT limit_per_user FROM inventory WHERE sku=?", "s", "l",
                         sku, limit);
    if (n <= 0 || *limit <= 0)
        return n < 0 ? (int)n : 0;
    /* '=' and ',' are outside the identifier alphabet: safe separators */
    /* A live hold counts as a sale does (it took the quota at reserve); a
     * confirmed one is in the ledger already, so only state 'held'. */
    n = db_run(db, "SELECT COUNT(*), COALESCE(GROUP_CONCAT(CONCAT(x.user_id, '=', x.b) "
                   "ORDER BY x.user_id SEPARATOR ','), '') FROM (SELECT u.user_id, "
                   "SUM(u.qty) AS b FROM (SELECT user_id, qty FROM ledger WHERE sku=? AND "
                   "released=0 AND user_id<>'' UNION ALL SELECT user_id, qty FROM holds "
                   "WHERE sku=? AND state='held' AND user_id<>'') u GROUP BY u.user_id "
                   "HAVING SUM(u.qty) > ?) x", "ssl", "ls", sku, sku, *limit, count, buf, len);
    return n < 0 ? (int)n : (int)*count;
}
