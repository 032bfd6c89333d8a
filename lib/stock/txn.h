/* The transactions every guard shares, on db_shopping: the unguarded
 * read-modify-write each lock guard protects, the relative write of a sale
 * decided elsewhere (Redis), the release of a recorded sale, and the
 * mapping of MySQL failures and ledger duplicates into a deduct_res. */
#ifndef LAB_TXN_H
#define LAB_TXN_H

#include "deduct.h"
#include "store.h"

/* Read stock, check, hold req->hold_ms, then write the computed value and
 * the ledger row (guard `guard_name`) in one transaction. Lock guards call
 * it while holding their lock. Fills res; returns 0. */
int stock_rmw(const char *guard_name, const struct deduct_env *env,
              const struct deduct_req *req, struct deduct_res *res);

/* stock_rmw asking may_write(ctx, res) right before the write, after the
 * hold: 0 means the guard no longer protects the write (a lease that ran
 * out), and nothing is written (may_write filled res). */
int stock_rmw_checked(const char *guard_name, const struct deduct_env *env,
                      const struct deduct_req *req,
                      int (*may_write)(void *ctx, struct deduct_res *res), void *ctx,
                      struct deduct_res *res);

/* Record a sale whose check happened outside MySQL (Redis): in one
 * transaction, stock -= qty and the ledger row. Fills res (SOLD, DUPLICATE
 * or a failure) and returns 0 only when sold: on anything else the caller
 * gives its side state back. */
int stock_record_relative(const char *guard_name, const struct deduct_env *env,
                          const struct deduct_req *req, struct deduct_res *res);

/* The first sale of a ledger row, as a DUPLICATE result. */
void stock_fill_duplicate(const struct ledger_row *row, struct deduct_res *res);

/* After the ledger's unique key refused our insert (DB_EDUP): answer with
 * the first sale of req->order_id. */
void stock_conflict_duplicate(const struct deduct_env *env, const struct deduct_req *req,
                              struct deduct_res *res);

/* Map a db_run()/db_* error into res (unavailable, retry, internal). */
void stock_db_failure(struct db_conn *db, int rc, struct deduct_res *res);

enum stock_release_result {
    STOCK_RELEASED = 1,        /* units back in stock, ledger row marked */
    STOCK_ALREADY_RELEASED,    /* a repeat: nothing changed */
    STOCK_UNKNOWN_ORDER,       /* no ledger row for the order id */
};

/* Give a recorded sale back in one transaction: stock += qty and the
 * ledger row marked released, once. *row receives the sale. Returns a
 * stock_release_result, or a negative DB_E* code (nothing changed). */
int stock_release(struct db_conn *db, const char *order_id, struct ledger_row *row);

#endif
