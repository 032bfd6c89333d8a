/* The MySQL statements of one redis-stream flush batch, in the flusher's
 * open transaction (stream_flusher.c owns the thread, Redis and the
 * transaction around these): a multi-row ledger insert, one stock update
 * per SKU by the units actually inserted, and the cut that keeps a batch
 * to SKUS_MAX SKUs. */
#ifndef LAB_STREAM_BATCH_H
#define LAB_STREAM_BATCH_H

#include "stock/store.h"

struct db_conn;

#define SKUS_MAX 64            /* distinct SKUs per batch; more wait a batch */

/* One sale of a stream entry (an entry carries one sale, a group's, or
 * every line of one cart: then each line is a sale of its own SKU). */
struct sale {
    char id[48];               /* stream entry id */
    char sku[STOCK_SKU_MAX + 1];
    char order_id[STOCK_ID_MAX + 1];
    char instance[64];
    int line;                  /* its line in its order: 0, or a cart's */
    long long qty, remaining, t_ms;
    int valid;                 /* 0: deleted or malformed: only acknowledged */
    int inserted;              /* this transaction wrote its ledger row */
    int deferred;              /* its sale still waits for replicas: left
                                * unacknowledged, read again later */
    int give_back;             /* the ledger holds another sale of its order_id */
};

/* The ledger rows of sales[0..nsales), in the open transaction. Usually
 * one statement; when an order_id is already there (a replay), one INSERT
 * IGNORE per sale learns which rows are new. Marks sale.inserted (and
 * give_back for another sale under that order_id); adds the rows found
 * already there to *skipped. Returns 0 or a negative DB_E* code. */
long long sbatch_insert_rows(struct db_conn *db, struct sale *sales, int nsales,
                           unsigned long long *skipped);
/* One stock update per SKU by the units of the rows inserted, never below
 * 0 (each floored update adds 1 to *floored). 0 or a negative DB_E*. */
long long sbatch_update_stock(struct db_conn *db, const struct sale *sales, int nsales,
                            unsigned long long *floored);
/* The ledger rows of order_ids[0..n) in one statement (the request path's
 * check for repeats Redis cannot know): found[i] = 1 and rows[i] filled
 * (sku, qty, remaining, guard, instance) for each that has one; found[]
 * is not cleared first. Returns how many were found, or a negative DB_E*
 * code (DB_ERR also for an answer that could not be read). */
long long sbatch_ledger_find(struct db_conn *db, const char *const *order_ids, int n,
                            struct ledger_row *rows, int *found);
/* Keep at most SKUS_MAX distinct SKUs (whole entries only): lowers *nsales
 * and returns 1 when it cut, else 0. The rest stay pending in the
 * flusher's list and come back with its next read of its own entries. */
int sbatch_cut(const struct sale *sales, int *nsales);

#endif
