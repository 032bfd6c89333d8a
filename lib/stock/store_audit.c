/* The audit's statements (store.h): a SKU's figures, and on a Galera
 * node its causal view of a SKU and its replication state. */
#include "store.h"

#include "base/db.h"

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

int store_cluster_causal_reads(struct db_conn *db)
{
    return db_exec(db, "SET SESSION wsrep_sync_wait=1");
}

long long store_cluster_sku_view(struct db_conn *db, const char *sku, long long *stock,
                                 long long *sold, long long *ledger_rows, long long *initial)
{
    return db_run(db, "SELECT i.stock, "
                      "(SELECT CAST(COALESCE(SUM(l.qty), 0) AS SIGNED) FROM ledger l "
                      " WHERE l.sku=i.sku AND l.released=0), "
                      "(SELECT COUNT(*) FROM ledger l WHERE l.sku=i.sku), i.initial "
                      "FROM inventory i WHERE i.sku=?",
                  "s", "llll", sku, stock, sold, ledger_rows, initial);
}

long long store_cluster_last_committed(struct db_conn *db, long long *seqno)
{
    return db_run(db, "SELECT CAST(VARIABLE_VALUE AS SIGNED) FROM information_schema.GLOBAL_STATUS "
                      "WHERE VARIABLE_NAME='WSREP_LAST_COMMITTED'",
                  "", "l", seqno);
}

long long store_cluster_state(struct db_conn *db, char *state, size_t len)
{
    return db_run(db, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                      "WHERE VARIABLE_NAME='WSREP_LOCAL_STATE_COMMENT'",
                  "", "s", state, len);
}
