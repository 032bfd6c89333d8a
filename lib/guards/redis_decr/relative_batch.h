/* Group commit of sales decided outside MySQL (redis-decr): several
 * sales of one SKU, each already decided in Redis, recorded in ONE
 * transaction, each with its own answer: what stock_record_relative_seeded
 * would have answered it alone. */
#ifndef LAB_RELATIVE_BATCH_H
#define LAB_RELATIVE_BATCH_H

#include "stock/deduct.h"

struct relative_item {
    const struct deduct_req *req;
    long long seeds;           /* as stock_record_relative_seeded (< 0: unchecked) */
    struct deduct_res *res;    /* filled */
    int rc;                    /* filled: 0 sold, or an enum stock_commit */
    int answered;              /* 1 once res and rc are final (caller sets 0) */
    void *ctx;                 /* the caller's, untouched */
    /* the caller's id of this sale (at most STOCK_INTENT_MAX), kept in its
     * ledger row's `intent`: who settles a sale its caller never answered
     * can tell it from another sale of the same order_id. NULL: none */
    const char *intent;
};

/* Record items[0..n-1] (n <= STOCK_BATCH_MAX, one SKU, arrival order) on
 * env->db as guard `guard_name`. In one transaction: the row is read FOR
 * UPDATE; each item in order, unless past its deadline (DEDUCT_DEADLINE,
 * STOCK_NOT_COMMITTED), decided under another seeds (STOCK_RESEEDED) or
 * more than is left (the floor: STOCK_DIVERGED), is taken; one stock write
 * for the sum and one multi-row ledger insert. An order id already in the
 * ledger answers DEDUCT_DUPLICATE (or ORDER_CONFLICT) with
 * STOCK_NOT_COMMITTED: this request recorded nothing; the others go on in
 * another round. One COMMIT for all: a lost reply is resolved once, by the
 * first taken item's ledger row (STOCK_COMMITTED / NOT_COMMITTED /
 * COMMIT_UNKNOWN for every taken item). The deadlines are checked again
 * right before the COMMIT, with the row locked: a group that waited on
 * the lock past one of them is rolled back (that item answered
 * DEDUCT_DEADLINE, the others tried again), so a sale never lands after
 * its deadline, whoever took the lock first. Every item is answered on
 * return. */
void stock_record_relative_batch(const char *guard_name, const struct deduct_env *env,
                                 struct relative_item *items, int n);

#endif
