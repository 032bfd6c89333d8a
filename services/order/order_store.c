/* Order SQL, all through prepared statements (see order_store.h). */
#include "order_store.h"

#include "base/db.h"

long long order_store_insert(struct db_conn *db, const char *order_id, const char *user_id,
                             const char *sku, long long qty, const char *guard,
                             const char *inventory_instance)
{
    return db_run(db, "INSERT INTO orders (order_id, user_id, sku, qty, guard, "
                      "inventory_instance) VALUES (?, ?, ?, ?, ?, ?)",
                  "sssl" "ss", "", order_id, user_id, sku, qty, guard, inventory_instance);
}

long long order_store_count(struct db_conn *db, const char *sku, long long *orders,
                            long long *units)
{
    return db_run(db, "SELECT COUNT(*), CAST(COALESCE(SUM(qty), 0) AS SIGNED) "
                      "FROM orders WHERE sku=?", "s", "ll", sku, orders, units);
}
