/* The hold transactions (holds.h): reserve, confirm, release, expire. Each
 * decides with one conditional state transition on the hold's row, inside
 * the transaction that moves the stock, so a unit is given back once and
 * a hold becomes a sale at most once. */
#include "holds.h"

#include "base/db.h"
#include "base/util.h"
#include "limits.h"
#include "store.h"

#include <string.h>

/* Roll back and hand rc on (a DB_E* code, or a result). */
static int undo(struct db_conn *db, long long rc)
{
    db_rollback(db);
    return (int)rc;
}

static int commit_as(struct db_conn *db, int result)
{
    int rc = db_commit(db);
    return rc < 0 ? undo(db, rc) : result;
}

/* The answer to a reserve whose order id has a hold already. */
static int reserve_repeat(const struct hold_reserve_req *r, const struct hold_row *h)
{
    return strcmp(h->sku, r->sku) == 0 && h->qty == r->qty && strcmp(h->user_id, r->user_id) == 0
               ? HOLD_REPEAT : HOLD_CONFLICT;
}

/* An order id that has a hold already (the insert met its key): the
 * answer of a repeat, read once the twin committed. */
static int reserve_existing(struct db_conn *db, const struct hold_reserve_req *r,
                            struct hold_row *h)
{
    long long n = store_hold_get(db, r->order_id, 0, h);
    return n < 0 ? (int)n : n == 0 ? DB_ERETRY : reserve_repeat(r, h);
}

/* The buyer's quota after the stock, as a sale moves them (the stock row,
 * then user_purchases: one order of locks, no deadlock with the sales).
 * 1 may commit, else rolled back: HOLD_NO_USER, HOLD_LIMIT_EXCEEDED
 * (*left: the limit), or DB_E*. */
static long long reserve_quota(struct db_conn *db, const struct hold_reserve_req *r,
                               long long *left)
{
    long long limit = 0;
    long long n = stock_limit_cart_line(db, r->sku, r->user_id, r->qty, &limit);
    if (n == 1)
        return 1;
    *left = limit;
    return undo(db, n == STOCK_LIMIT_NO_USER ? HOLD_NO_USER
                    : n == STOCK_LIMIT_OVER ? HOLD_LIMIT_EXCEEDED : n);
}

/* The hold row first, then the stock: twins of one order id queue on the
 * row's key (the later one meets the committed row: a repeat) instead of
 * all taking gap locks on a row not there yet and deadlocking. */
static int reserve_once(struct db_conn *db, const struct hold_reserve_req *r,
                        struct hold_row *h, long long *left)
{
    struct ledger_row sale;
    long long n, version;
    *left = 0;
    if ((n = db_begin(db)) < 0)
        return undo(db, n);
    n = store_hold_insert(db, r->order_id, r->sku, r->qty, r->guard, r->instance, r->user_id,
                          r->ttl_ms);
    if (n == DB_EDUP) {
        db_rollback(db);
        return reserve_existing(db, r, h);
    }
    /* An order id sold outright cannot also be a hold: its confirm would
     * meet the sale's ledger row. */
    if (n >= 0 && (n = store_ledger_get(db, r->order_id, 0, &sale)) != 0)
        return undo(db, n < 0 ? n : HOLD_CONFLICT);
    if (n < 0 || (n = store_take_if_enough_left(db, r->sku, r->qty, left)) < 0)
        return undo(db, n);
    if (n == 0) {              /* the hold row goes with the rollback */
        n = store_read(db, r->sku, 0, left, &version);
        return undo(db, n < 0 ? n : n == 0 ? HOLD_UNKNOWN_SKU : HOLD_OUT_OF_STOCK);
    }
    /* A live hold counts against the buyer's limit as a sale does: else a
     * buyer could hold past it and confirm every hold. */
    if ((n = reserve_quota(db, r, left)) != 1)
        return (int)n;
    if ((n = store_hold_get(db, r->order_id, 0, h)) < 0)
        return undo(db, n);
    return commit_as(db, HOLD_HELD);
}

/* A deadlock (the stock row among many reserves) is run again, a little
 * later each time. */
#define RESERVE_TRIES 4

int stock_hold_reserve(struct db_conn *db, const struct hold_reserve_req *r,
                       struct hold_row *h, long long *left)
{
    int rc = DB_ERETRY;
    for (int t = 0; t < RESERVE_TRIES && rc == DB_ERETRY; t++) {
        if (t > 0)
            util_sleep_ms(5L * t);
        rc = reserve_once(db, r, h, left);
    }
    return rc;
}

/* The sale of a confirmed hold: its ledger row under the hold's guard,
 * `remaining` the stock now (the hold's units left it at reserve). */
static long long confirm_ledger(struct db_conn *db, const char *order_id,
                                const struct hold_row *h, const char *instance,
                                long long *remaining)
{
    long long version;
    long long n = store_read(db, h->sku, 0, remaining, &version);
    if (n <= 0)
        return n < 0 ? n : DB_ERR;
    return store_ledger_insert(db, order_id, h->sku, h->qty, *remaining, h->guard, instance,
                               h->user_id);
}

/* The units and the quota of a hold back, in the caller's transaction:
 * the quota moves with the units, so the buyer may hold or buy again. */
static long long give_back(struct db_conn *db, const struct hold_row *h)
{
    long long n = store_add_stock(db, h->sku, h->qty);
    return n < 0 ? n : stock_limit_give_back(db, h->sku, h->user_id, h->qty);
}

/* A late confirm's fresh units: the stock taken, then the buyer's quota
 * charged again (the expiry gave it back). 1 taken; 0 no stock; or
 * HOLD_LIMIT_EXCEEDED with the stock put back (nothing of the fresh take
 * stays, the expiry does); or DB_E*. */
static long long take_fresh(struct db_conn *db, const struct hold_row *h, long long *remaining)
{
    long long limit = 0;
    long long n = store_take_if_enough_left(db, h->sku, h->qty, remaining);
    if (n <= 0)
        return n;
    n = stock_limit_cart_line(db, h->sku, h->user_id, h->qty, &limit);
    if (n != STOCK_LIMIT_OVER && n != STOCK_LIMIT_NO_USER)
        return n;
    n = store_add_stock(db, h->sku, h->qty);
    return n < 0 ? n : HOLD_LIMIT_EXCEEDED;
}

/* A hold past its deadline or swept: expire it now when the sweeper has not
 * (its units and quota back), then take new units if there are. */
static int confirm_late(struct db_conn *db, const char *order_id, const char *instance,
                        struct hold_row *h, long long *remaining)
{
    long long n;
    if (strcmp(h->state, "held") == 0) {
        if ((n = store_hold_expire(db, order_id)) < 0)
            return undo(db, n);
        if (n == 1 && (n = give_back(db, h)) < 0)
            return undo(db, n);
    }
    if ((n = take_fresh(db, h, remaining)) < 0)
        return undo(db, n);
    if (n == 0 || n == HOLD_LIMIT_EXCEEDED)   /* what the expiry gave back stays given back */
        return commit_as(db, n == 0 ? HOLD_EXPIRED : HOLD_LIMIT_EXCEEDED);
    if ((n = store_hold_confirm_fresh(db, order_id)) < 0 ||
        (n = store_ledger_insert(db, order_id, h->sku, h->qty, *remaining, h->guard,
                                 instance, h->user_id)) < 0)
        return undo(db, n == DB_EDUP ? HOLD_CONFLICT : n);
    h->fresh = 1;
    return commit_as(db, HOLD_CONFIRMED_FRESH);
}

int stock_hold_confirm(struct db_conn *db, const char *order_id, const char *instance,
                       int check_deadline, struct hold_row *h, long long *remaining)
{
    struct ledger_row sale;
    long long n;
    *remaining = 0;
    if ((n = db_begin(db)) < 0 || (n = store_hold_get(db, order_id, 1, h)) < 0)
        return undo(db, n);
    if (n == 0)
        return undo(db, HOLD_UNKNOWN_ORDER);
    if (strcmp(h->state, "confirmed") == 0) {
        n = store_ledger_get(db, order_id, 0, &sale);
        *remaining = sale.remaining;
        return undo(db, n < 0 ? n : HOLD_CONFIRM_REPEAT);
    }
    if (strcmp(h->state, "released") == 0)
        return undo(db, HOLD_NOT_HELD);
    if ((n = store_hold_confirm(db, order_id, check_deadline)) < 0)
        return undo(db, n);
    if (n == 0)
        return confirm_late(db, order_id, instance, h, remaining);
    /* DB_EDUP: the order id was sold outright (a deduct) since the reserve:
     * nothing changes, the hold stays until its release or expiry. The
     * broken confirm of a swept hold charges no quota again either: its
     * ledger row shows the buyer, so the audit's over_limit sees it. */
    if ((n = confirm_ledger(db, order_id, h, instance, remaining)) < 0)
        return undo(db, n == DB_EDUP ? HOLD_CONFLICT : n);
    return commit_as(db, HOLD_CONFIRMED);
}

int stock_hold_release(struct db_conn *db, const char *order_id, struct hold_row *h)
{
    long long n;
    if ((n = db_begin(db)) < 0 || (n = store_hold_get(db, order_id, 1, h)) < 0)
        return undo(db, n);
    if (n == 0)
        return undo(db, HOLD_UNKNOWN_ORDER);
    if ((n = store_hold_release(db, order_id)) < 0)
        return undo(db, n);
    if (n == 0)
        return undo(db, HOLD_NOT_HELD);
    if ((n = give_back(db, h)) < 0)
        return undo(db, n);
    return commit_as(db, HOLD_GIVEN_BACK);
}

int stock_hold_expire(struct db_conn *db, const char *order_id)
{
    struct hold_row h;
    long long n;
    if ((n = db_begin(db)) < 0 || (n = store_hold_get(db, order_id, 1, &h)) < 0)
        return undo(db, n);
    if (n == 0 || (n = store_hold_expire(db, order_id)) <= 0)
        return undo(db, n);
    if ((n = give_back(db, &h)) < 0)
        return undo(db, n);
    return commit_as(db, 1);
}
