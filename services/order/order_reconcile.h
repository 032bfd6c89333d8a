/* Giving stock back for orders that did not complete: the compensation a
 * request thread runs after a failed finalisation, and the reconciler thread
 * that settles whatever a crash or a timeout left pending. */
#ifndef ORDER_RECONCILE_H
#define ORDER_RECONCILE_H

#include "order_config.h"

struct db_conn;

enum order_settled {
    ORDER_CANCELLED,   /* the inventory released the sale (or had already) */
    ORDER_FAILED,      /* the inventory has no sale for this order_id */
    ORDER_UNSETTLED,   /* no definite answer: the row stays `releasing` */
};

/* For a row this caller moved to `releasing`: POST /inventory/release
 * (admin token attached), trying each instance from `first`, then record
 * the outcome (cancelled / failed). Never call it for a row that may still
 * become placed. */
enum order_settled order_release(const struct order_conf *c, struct db_conn *db,
                                 const char *order_id, int first);

/* Start the reconciler thread: every --reconcile-ms it settles at most
 * --reconcile-batch rows that are `releasing`, or `pending` past their
 * deadline plus --reconcile-margin. Returns 0, or -1 (err filled). Block
 * SIGINT/SIGTERM before calling (the thread inherits the mask). */
int order_reconcile_start(const struct order_conf *c, char *err, size_t errlen);
/* Ask the thread to stop and join it: returns after the call in flight
 * (bounded by --inventory-timeout per instance). Safe without a start. */
void order_reconcile_stop(void);

/* One tick on `db`: settles at most --reconcile-batch rows; returns how
 * many were looked at, or -1 when the database could not be read. */
int order_reconcile_once(const struct order_conf *c, struct db_conn *db);

#endif
