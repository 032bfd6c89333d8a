/* The hold transactions (holds.h): reserve, confirm, release, expire. Each
 * decides with one conditional state transition on the hold's row, inside
 * the transaction that moves the stock, so a unit is given back once and
 * a hold becomes a sale at most once. */
#include "holds.h"

#include "base/db.h"
#include "base/util.h"
#include "limits.h"
#include "store.h"

#include <stdio.h>
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

int stock_hold_load(struct db_conn *db, const char *order_id, int for_update,
                    struct hold_row *h)
{
    int n = store_hold_get(db, order_id, for_update, h);
    if (n <= 0)
        return n;
    for (int i = 0; i < HOLD_LINES_MAX; i++) {
        if ((n = store_hold_line(db, order_id, i, &h->line[i])) < 0)
            return n;
        if (n == 0)
            break;
        h->nlines++;
    }
    return h->nlines > 0 ? 1 : DB_ERETRY;   /* removed meanwhile (a reseed) */
}

/* The answer to a reserve whose order id has a hold already. */
static int reserve_repeat(const struct hold_reserve_req *r, const struct hold_row *h)
{
    int same = h->nlines == r->nlines && strcmp(h->user_id, r->user_id) == 0;
    for (int i = 0; same && i < r->nlines; i++)
        same = strcmp(h->line[i].sku, r->line[i].sku) == 0 && h->line[i].qty == r->line[i].qty;
    return same ? HOLD_REPEAT : HOLD_CONFLICT;
}

/* An order id that has a hold already (the insert met its key): the
 * answer of a repeat, read once the twin committed. */
static int reserve_existing(struct db_conn *db, const struct hold_reserve_req *r,
                            struct hold_row *h)
{
    long long n = stock_hold_load(db, r->order_id, 0, h);
    return n < 0 ? (int)n : n == 0 ? DB_ERETRY : reserve_repeat(r, h);
}

/* Every line's stock, in r's sorted order (a cart crossing another takes
 * the rows in the same order: no deadlock). All or nothing: 1 every line
 * taken; else rolled back: HOLD_OUT_OF_STOCK (h->line[] every line with
 * the stock found), HOLD_UNKNOWN_SKU (h->sku), or DB_E*. */
static long long reserve_take(struct db_conn *db, const struct hold_reserve_req *r,
                              struct hold_row *h, long long *left)
{
    long long n, version;
    int shorts = 0;
    h->nlines = r->nlines;
    for (int i = 0; i < r->nlines; i++) {
        h->line[i] = r->line[i];
        if ((n = store_take_if_enough_left(db, r->line[i].sku, r->line[i].qty,
                                           &h->line[i].left)) < 0)
            return undo(db, n);
        if (n == 1)
            continue;
        if ((n = store_read(db, r->line[i].sku, 0, &h->line[i].left, &version)) <= 0) {
            snprintf(h->sku, sizeof(h->sku), "%s", r->line[i].sku);
            return undo(db, n < 0 ? n : HOLD_UNKNOWN_SKU);
        }
        shorts++;              /* go on: the answer lists every short line */
    }
    *left = h->line[0].left;
    return shorts ? undo(db, HOLD_OUT_OF_STOCK) : 1;
}

/* Every line's quota after the stock, as a sale moves them (the stock
 * rows, then user_purchases: one order of locks with the sales). 1 may
 * commit, else rolled back: HOLD_NO_USER, HOLD_LIMIT_EXCEEDED (*left: the
 * limit, h->sku the line), or DB_E*. */
static long long reserve_quota(struct db_conn *db, const struct hold_reserve_req *r,
                               struct hold_row *h, long long *left)
{
    for (int i = 0; i < r->nlines; i++) {
        long long limit = 0;
        long long n = stock_limit_cart_line(db, r->line[i].sku, r->user_id, r->line[i].qty,
                                            &limit);
        if (n == 1)
            continue;
        *left = limit;
        snprintf(h->sku, sizeof(h->sku), "%s", r->line[i].sku);
        return undo(db, n == STOCK_LIMIT_NO_USER ? HOLD_NO_USER
                        : n == STOCK_LIMIT_OVER ? HOLD_LIMIT_EXCEEDED : n);
    }
    return 1;
}

/* The hold's rows, one per SKU: the first sets the deadline, the others
 * copy it (one NOW(3) for the order, so a transition on the deadline moves
 * all of its rows or none). 1, DB_EDUP, or DB_E*. */
static long long reserve_rows(struct db_conn *db, const struct hold_reserve_req *r)
{
    long long n = store_hold_insert(db, r->order_id, r->line[0].sku, r->line[0].qty,
                                    r->guard, r->instance, r->user_id, r->ttl_ms);
    for (int i = 1; n >= 0 && i < r->nlines; i++)
        n = store_hold_insert_more(db, r->order_id, r->line[i].sku, r->line[i].qty);
    return n;
}

/* The hold rows first, then the stock: twins of one order id queue on the
 * first row's key (the later one meets the committed rows: a repeat)
 * instead of all taking gap locks on rows not there yet and deadlocking. */
static int reserve_once(struct db_conn *db, const struct hold_reserve_req *r,
                        struct hold_row *h, long long *left)
{
    struct ledger_row sale;
    long long n;
    *left = 0;
    if ((n = db_begin(db)) < 0)
        return undo(db, n);
    if ((n = reserve_rows(db, r)) == DB_EDUP) {
        db_rollback(db);
        return reserve_existing(db, r, h);
    }
    /* An order id sold outright cannot also be a hold: its confirm would
     * meet the sale's ledger row. */
    if (n >= 0 && (n = store_ledger_get(db, r->order_id, 0, &sale)) != 0)
        return undo(db, n < 0 ? n : HOLD_CONFLICT);
    if ((n = reserve_take(db, r, h, left)) != 1)
        return (int)n;         /* the hold rows go with the rollback */
    /* A live hold counts against the buyer's limit as a sale does: else a
     * buyer could hold past it and confirm every hold. */
    if ((n = reserve_quota(db, r, h, left)) != 1)
        return (int)n;
    if ((n = stock_hold_load(db, r->order_id, 0, h)) < 0)
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

/* The sale of a confirmed hold: a ledger row per line under the hold's
 * guard (a cart's lines numbered in SKU order), each line's `left` the
 * stock now (the hold's units left it at reserve). */
static long long confirm_ledger(struct db_conn *db, const char *order_id, struct hold_row *h,
                                const char *instance)
{
    long long n = 1, version;
    for (int i = 0; n >= 0 && i < h->nlines; i++) {
        struct hold_line *l = &h->line[i];
        if ((n = store_read(db, l->sku, 0, &l->left, &version)) <= 0)
            return n < 0 ? n : DB_ERR;
        n = h->nlines == 1
                ? store_ledger_insert(db, order_id, l->sku, l->qty, l->left, h->guard,
                                      instance, h->user_id)
                : store_ledger_insert_line(db, order_id, i, l->sku, l->qty, l->left, h->guard,
                                           instance, h->user_id);
    }
    return n;
}

/* Every line's units and quota back, in the caller's transaction: the
 * quota moves with the units, so the buyer may hold or buy again. */
static long long give_back(struct db_conn *db, const struct hold_row *h)
{
    long long n = 0;
    for (int i = 0; n >= 0 && i < h->nlines; i++) {
        n = store_add_stock(db, h->line[i].sku, h->line[i].qty);
        if (n >= 0)
            n = stock_limit_give_back(db, h->line[i].sku, h->user_id, h->line[i].qty);
    }
    return n;
}

/* Undo the first k lines of a fresh take: their stock back, and their
 * quota when `quota`. 0 or DB_E*. */
static long long untake(struct db_conn *db, const struct hold_row *h, int k, int quota)
{
    long long n = 0;
    for (int i = 0; n >= 0 && i < k; i++) {
        n = quota ? stock_limit_give_back(db, h->line[i].sku, h->user_id, h->line[i].qty)
                  : store_add_stock(db, h->line[i].sku, h->line[i].qty);
    }
    return n < 0 ? n : 0;
}

/* A late confirm's fresh units, every line or none: the stock taken, then
 * the buyer's quota charged again (the expiry gave it back). 1 taken; 0 a
 * line short; HOLD_LIMIT_EXCEEDED (h->sku the line); or DB_E*. Refused,
 * nothing of the fresh take stays (the expiry does). */
static long long take_fresh(struct db_conn *db, struct hold_row *h)
{
    long long n, limit = 0;
    for (int i = 0; i < h->nlines; i++) {
        if ((n = store_take_if_enough_left(db, h->line[i].sku, h->line[i].qty,
                                           &h->line[i].left)) <= 0)
            return n < 0 ? n : untake(db, h, i, 0);
    }
    for (int i = 0; i < h->nlines; i++) {
        n = stock_limit_cart_line(db, h->line[i].sku, h->user_id, h->line[i].qty, &limit);
        if (n == 1)
            continue;
        if (n != STOCK_LIMIT_OVER && n != STOCK_LIMIT_NO_USER)
            return n;
        snprintf(h->sku, sizeof(h->sku), "%s", h->line[i].sku);
        if ((n = untake(db, h, i, 1)) < 0 || (n = untake(db, h, h->nlines, 0)) < 0)
            return n;
        return HOLD_LIMIT_EXCEEDED;
    }
    return 1;
}

/* A hold past its deadline or swept: expire it now when the sweeper has not
 * (its units and quota back), then take new units if there are. */
static int confirm_late(struct db_conn *db, const char *order_id, const char *instance,
                        struct hold_row *h)
{
    long long n;
    if (strcmp(h->state, "held") == 0) {
        if ((n = store_hold_expire(db, order_id)) < 0)
            return undo(db, n);
        if (n > 0 && (n = give_back(db, h)) < 0)
            return undo(db, n);
    }
    if ((n = take_fresh(db, h)) < 0)
        return undo(db, n);
    if (n == 0 || n == HOLD_LIMIT_EXCEEDED)   /* what the expiry gave back stays given back */
        return commit_as(db, n == 0 ? HOLD_EXPIRED : HOLD_LIMIT_EXCEEDED);
    if ((n = store_hold_confirm_fresh(db, order_id)) < 0 ||
        (n = confirm_ledger(db, order_id, h, instance)) < 0)
        return undo(db, n == DB_EDUP ? HOLD_CONFLICT : n);
    h->fresh = 1;
    return commit_as(db, HOLD_CONFIRMED_FRESH);
}

int stock_hold_confirm(struct db_conn *db, const char *order_id, const char *instance,
                       int check_deadline, struct hold_row *h, long long *remaining)
{
    struct ledger_row sale;
    long long n;
    int rc;
    *remaining = 0;
    if ((n = db_begin(db)) < 0 || (n = stock_hold_load(db, order_id, 1, h)) < 0)
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
    if (n == 0) {
        rc = confirm_late(db, order_id, instance, h);
        *remaining = h->line[0].left;
        return rc;
    }
    /* DB_EDUP: the order id was sold outright (a deduct) since the reserve:
     * nothing changes, the hold stays until its release or expiry. The
     * broken confirm of a swept hold charges no quota again either: its
     * ledger row shows the buyer, so the audit's over_limit sees it. */
    if ((n = confirm_ledger(db, order_id, h, instance)) < 0)
        return undo(db, n == DB_EDUP ? HOLD_CONFLICT : n);
    *remaining = h->line[0].left;
    return commit_as(db, HOLD_CONFIRMED);
}

int stock_hold_release(struct db_conn *db, const char *order_id, struct hold_row *h)
{
    long long n;
    if ((n = db_begin(db)) < 0 || (n = stock_hold_load(db, order_id, 1, h)) < 0)
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
    if ((n = db_begin(db)) < 0 || (n = stock_hold_load(db, order_id, 1, &h)) < 0)
        return undo(db, n);
    if (n == 0 || (n = store_hold_expire(db, order_id)) <= 0)
        return undo(db, n);
    if ((n = give_back(db, &h)) < 0)
        return undo(db, n);
    return commit_as(db, 1);
}
