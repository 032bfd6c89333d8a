/* The statements of the fences (inventory_fence) and the lock table
 * (lock_table) (store.h), all through prepared statements. */
#include "store.h"

#include "base/db.h"

#include <stdio.h>
#include <stdlib.h>

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
