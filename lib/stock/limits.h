/* Purchase limits ("at most N per person"): the per-user count of a SKU
 * with limit_per_user moves in the sale's own MySQL transaction, by a
 * conditional statement (store_limit_take), so two sales of one user on
 * two instances cannot both pass the check. limit_check "separate" is the
 * field's defect kept for the lab: the count read and checked before the
 * sale's transaction, then added unchecked inside it. */
#ifndef LAB_LIMITS_H
#define LAB_LIMITS_H

#include "deduct.h"

/* Inside the sale's transaction, right after its ledger row: move the
 * buyer's count by `limit`, the SKU's limit as the sale's own statement
 * read it (0: nothing to do; no statement). Returns 1 when the sale may
 * commit; 0 when it may not (the transaction rolled back): res holds
 * limit_exceeded (the user past the limit), or bad_request (a limit but no
 * user_id); or a negative DB_E* code (the caller rolls back as for any
 * failed step). */
long long stock_limit_charge(const struct deduct_env *env, const struct deduct_req *req,
                             long long limit, struct deduct_res *res);
/* res = limit_exceeded for req (the limit, what the user holds now, read
 * in autocommit after the rollback). Inside a sale's transaction a repeat
 * of a recorded order never gets here (its ledger insert failed first). */
void stock_limit_refused(const struct deduct_env *env, const struct deduct_req *req,
                         long long limit, struct deduct_res *res);
/* res = bad_request: a limited SKU asked for without a user_id. */
void stock_limit_no_user(long long limit, struct deduct_res *res);
/* 1 (res: bad_request) when `limit` (the SKU's, as the sale read it) needs
 * a user_id req lacks: refused before any write. 0 otherwise. */
int stock_limit_needs_user(const struct deduct_req *req, long long limit,
                           struct deduct_res *res);
/* limit_check "separate": the check made apart from the sale (the race
 * window). 1 may go on, 0 refused (res: limit_exceeded; the caller
 * answers a repeat of a recorded order instead), negative DB_E*. */
int stock_limit_precheck(const struct deduct_env *env, const struct deduct_req *req,
                         struct deduct_res *res);
/* A release of `qty` units the ledger row gave `user_id` ("" none): the
 * count back, inside the release's transaction. Rows or DB_E*. */
long long stock_limit_give_back(struct db_conn *db, const char *sku, const char *user_id,
                                long long qty);
/* A cart line inside the cart's transaction: the SKU's limit read there
 * and the buyer's count moved as stock_limit_charge (atomic only: a cart
 * has no limit_check). Returns 1 may commit, STOCK_LIMIT_NO_USER (a limit
 * but no user_id), STOCK_LIMIT_OVER (past it; *limit set), or DB_E*. */
#define STOCK_LIMIT_NO_USER (-60)
#define STOCK_LIMIT_OVER (-61)
long long stock_limit_cart_line(struct db_conn *db, const char *sku, const char *user_id,
                                long long qty, long long *limit);

/* "atomic" 0 / "separate" 1 for the body's limit_check: 0, or -1. */
int stock_limit_check_choice(const char *s, int *separate);

#endif
