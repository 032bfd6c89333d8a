/* SQL of the order service, on db_order: the only place it is written. */
#ifndef ORDER_STORE_H
#define ORDER_STORE_H

struct db_conn;

/* Insert one order row. Returns 1, or a negative DB_E* code (base/db.h). */
long long order_store_insert(struct db_conn *db, const char *order_id, const char *user_id,
                             const char *sku, long long qty, const char *guard,
                             const char *inventory_instance);

/* Orders and units recorded for sku. Returns 1, or a negative DB_E* code. */
long long order_store_count(struct db_conn *db, const char *sku, long long *orders,
                            long long *units);

#endif
