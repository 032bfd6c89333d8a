/* One group commit of a hot SKU: several deductions of the same SKU sold
 * in ONE transaction (one conditional stock write for their sum, one
 * multi-row ledger insert), each answered on its own. The `batched-update`
 * guard gathers the requests; this is its MySQL half. */
#ifndef LAB_BATCH_H
#define LAB_BATCH_H

#include "stock/deduct.h"

struct batch_item {
    const struct deduct_req *req;
    struct deduct_res *res;    /* filled; guard/instance already set */
    int answered;              /* 1 once res is final (the caller sets 0) */
};

/* Sell items[0..n-1] (n ≤ STOCK_BATCH_MAX, all of one SKU, in arrival
 * order) on env->db, as guard `guard_name`. In one transaction: the stock
 * row is read FOR UPDATE, the largest hold_ms of the batch is spent once,
 * requests whose deadline passed are dropped (503 deadline_exceeded,
 * nothing written for them), then each request in order is taken while it
 * fits what is left (others: out_of_stock), the sum is written with
 * `stock >= sum`, and the ledger rows are inserted in one statement.
 * Repeated order ids — within the batch or already in the ledger — answer
 * as guard_deduct's idempotency check does (duplicate or
 * order_id_conflict). A lost COMMIT reply is resolved once by its ledger
 * rows (stock_commit_sale) and applies to every member. Every item is
 * answered on return (*rounds receives the transactions run, may be NULL). */
void stock_batch_sell(const char *guard_name, const struct deduct_env *env,
                      struct batch_item *items, int n, int *rounds);

#endif
