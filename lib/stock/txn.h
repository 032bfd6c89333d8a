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
 * it while holding their lock. Fills res; returns 0.
 * The write lands only while the SKU has not been reseeded since the read
 * (on any instance: the row's `seeds`); otherwise nothing is written and
 * res is DEDUCT_UNAVAILABLE ("reseeded"), counted in
 * lab_reseeded_during_sale_total.
 * Fenced (req->fence != 0, the guard's lock token): the row is first
 * claimed for the token (refused unless every token that wrote it is
 * older), and the write only lands while the claim is still ours; a
 * refusal is DEDUCT_FENCED with nothing written, counted in
 * lab_fenced_total{guard}. req->fencing without a token is an internal
 * error (a guard that promised one and gave none). */
int stock_rmw(const char *guard_name, const struct deduct_env *env,
              const struct deduct_req *req, struct deduct_res *res);

/* stock_rmw asking may_write(ctx, res) after the writes, right before the
 * COMMIT (the last moment the guard can still stop the sale): 0 means the
 * guard no longer protects the write (a lease that ran out, a lost
 * session); the transaction is rolled back and nothing is written
 * (may_write filled res). */
int stock_rmw_checked(const char *guard_name, const struct deduct_env *env,
                      const struct deduct_req *req,
                      int (*may_write)(void *ctx, struct deduct_res *res), void *ctx,
                      struct deduct_res *res);

/* Record a sale whose check happened outside MySQL (Redis): in one
 * transaction, stock -= qty (only while stock >= qty: a Redis that believes
 * in more units than MySQL has costs a 503, never an oversell) and the
 * ledger row. Fills res (SOLD, DUPLICATE or a failure). Returns 0 when
 * sold; STOCK_NOT_COMMITTED when nothing was written (the caller gives its
 * side state back); STOCK_DIVERGED when the floor refused it, and
 * STOCK_COMMIT_UNKNOWN when the COMMIT's outcome could not be learnt: in
 * both the caller neither gives back nor keeps, it has its side state
 * reconciled with MySQL. A SKU with a purchase limit is never sold here
 * (these guards enforce none): its write matches unlimited SKUs only, the
 * read that follows a miss brings the limit, and it returns
 * STOCK_LIMITED (no limit read per sale). The seeded form checks no
 * limit: its caller has the entry point refuse. */
int stock_record_relative(const char *guard_name, const struct deduct_env *env,
                          const struct deduct_req *req, struct deduct_res *res);

/* stock_record_relative for a sale decided on side state written from the
 * row's reseed generation `seeds` (>= 0; negative: unchecked, as
 * stock_record_relative): when the SKU was reseeded since (on any
 * instance), nothing is written, res is DEDUCT_UNAVAILABLE ("reseeded",
 * counted in lab_reseeded_during_sale_total) and it returns
 * STOCK_RESEEDED: the side state the sale was decided on is the old
 * seed's. Other returns as stock_record_relative. */
int stock_record_relative_seeded(const char *guard_name, const struct deduct_env *env,
                                 const struct deduct_req *req, long long seeds,
                                 struct deduct_res *res);

/* A repeat of req->order_id whose ledger row is `row`: stock_fill_duplicate,
 * unless the order id names a cart of several lines (stock/cart.h), which
 * a single-SKU sale never repeats: ORDER_CONFLICT. One more ledger read
 * (the repeat path only); when it fails, res is the MySQL failure. */
void stock_answer_repeat(const struct deduct_env *env, const struct ledger_row *row,
                         const struct deduct_req *req, struct deduct_res *res);

/* The first sale of a ledger row, as a DUPLICATE result — or, when `req`
 * asks for another SKU or quantity under the same order id, an
 * ORDER_CONFLICT (an order id names one sale, never two). */
void stock_fill_duplicate(const struct ledger_row *row, const struct deduct_req *req,
                          struct deduct_res *res);

/* What stock_commit_sale learnt. */
enum stock_commit {
    STOCK_COMMITTED = 0,       /* the sale is in the ledger */
    STOCK_NOT_COMMITTED = -1,  /* certainly not applied: compensate */
    STOCK_COMMIT_UNKNOWN = -2, /* could not find out: do NOT compensate */
    STOCK_DIVERGED = -3,       /* (stock_record_relative) MySQL holds fewer units
                                * than the side state sold: nothing written; the
                                * side state is wrong and must be reconciled,
                                * not given the units back */
    STOCK_RESEEDED = -4,       /* (stock_record_relative_seeded) the SKU was
                                * reseeded after the side state the sale was
                                * decided on: nothing written */
    STOCK_LIMITED = -5,        /* (stock_record_relative) the SKU has a purchase
                                * limit, which these guards do not enforce:
                                * nothing written, res a 400 with
                                * refused_limit set; compensate */
};

/* COMMIT the open transaction that wrote req's ledger row. A COMMIT whose
 * reply was lost is resolved by its commit marker, the ledger row: a
 * locking read on a fresh connection waits for the old transaction to
 * finish, then finds the row (applied) or not. On failure res is filled;
 * returns an enum stock_commit. A COMMIT refused by a conflict (a Galera
 * certification failure, 1213) is STOCK_NOT_COMMITTED with res's outcome
 * DEDUCT_RETRY_EXHAUSTED: stock_conflicted(res) says a guard that may
 * repeat its transaction should. */
int stock_commit_sale(const struct deduct_env *env, const struct deduct_req *req,
                      const char *guard_name, struct deduct_res *res);

/* 1 when res was filled by a conflict (deadlock, lock wait timeout,
 * certification failure): the transaction is rolled back, nothing was
 * written, and repeating it is safe. */
int stock_conflicted(const struct deduct_res *res);

/* After the ledger's unique key refused our insert (DB_EDUP): answer with
 * the first sale of req->order_id. */
void stock_conflict_duplicate(const struct deduct_env *env, const struct deduct_req *req,
                              struct deduct_res *res);

/* For a guard with own_idempotency (guard_deduct skipped the ledger read):
 * call when res says the sale was refused without a write (out of stock,
 * unknown SKU, outside any transaction). A repeat of an order id must not
 * answer that: when the ledger holds req->order_id, res becomes its
 * duplicate (or order_id_conflict). One ledger read, on the refusal path
 * only; a failed read leaves the refusal as it is (nothing was written:
 * the caller may repeat). */
void stock_refused(const struct deduct_env *env, const struct deduct_req *req,
                   struct deduct_res *res);

/* The deadline passed while the guard waited or held: give up before any
 * write, so a caller that stopped waiting finds nothing done. Returns 1
 * with res filled (DEDUCT_DEADLINE), else 0. */
int stock_past_deadline(const struct deduct_req *req, struct deduct_res *res);

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
