/* Holds under the guards (services/API.md, "Holds"): which guards reserve,
 * and the entry points the inventory service calls for reserve, confirm,
 * release and the sweep. Every stock move of a hold runs under the lock of
 * the hold's guard when that guard is a lock guard (as a release of its
 * sale does), so a lock holder's read-modify-write never straddles it. */
#ifndef LAB_HOLD_ENTRY_H
#define LAB_HOLD_ENTRY_H

#include "guards/guard.h"
#include "stock/holds.h"

/* 1 when g reserves: its stock is MySQL's (no Redis side state, not
 * write-behind). The Redis-stock guards answer a reserve with a 400. */
int guard_holds(const struct guard *g);
/* "none, mutex, ...": the guards that reserve (static, built once). */
const char *guard_hold_names(void);

/* A hold call's answer: result an enum hold_result, h the hold's row,
 * left the stock a refused reserve saw, remaining the stock a confirmed
 * sale left; res the failure when a call returns -1. */
struct hold_answer {
    int result;
    struct hold_row h;
    long long left, remaining;
    struct deduct_res res;
};

/* Reserve under g (guard_holds(g) must be 1: else DEDUCT_BAD_REQUEST).
 * Returns 0 with a filled, or -1 with a->res (MySQL down, lock not had). */
int guard_reserve(const struct guard *g, const struct deduct_env *env,
                  const struct hold_reserve_req *r, struct hold_answer *a);
/* Confirm order_id's hold (check_deadline 0: the broken confirm). */
int guard_confirm(const struct deduct_env *env, const char *order_id, int check_deadline,
                  struct hold_answer *a);
/* Give order_id's hold back (POST /inventory/release of a hold). */
int guard_hold_release(const struct deduct_env *env, const char *order_id,
                       struct hold_answer *a);
/* Expire up to max holds past their deadline, each under its guard's lock.
 * Returns how many this call gave back, or -1 when MySQL failed. */
int guard_hold_sweep(const struct deduct_env *env, int max);

#endif
