/* Holds (services/API.md, "Holds"): units taken from MySQL stock for one
 * order at checkout, confirmed into a ledger row at payment, or given back
 * by a release or, past their deadline, by the sweeper. Physical expiry:
 * a live hold's units are out of `stock` (a sale never sees them), so
 * initial = stock + sold + held at every commit. Every function here is
 * one transaction of its own on the caller's connection (a guard's lock,
 * when it has one, is the caller's: lib/guards/core/hold_entry.c).
 * store_hold* (store_holds.c) are its statements. */
#ifndef LAB_HOLDS_H
#define LAB_HOLDS_H

#include "deduct.h"

#include <stddef.h>

struct db_conn;

/* ttl_ms bounds of POST /inventory/reserve. */
#define HOLD_TTL_MIN_MS 100
#define HOLD_TTL_MAX_MS 3600000
/* A cart's hold: one row per (order, SKU), its lines summed per SKU
 * (as many as a cart has lines, CART_LINES_MAX). */
#define HOLD_LINES_MAX 50

struct hold_line {
    char sku[STOCK_SKU_MAX + 1];
    long long qty;
    long long left;            /* OUT_OF_STOCK: the stock found; confirm: the
                                * stock the sale left */
};

/* An order's hold: its rows share state, guard, buyer and deadline (they
 * move together, by one UPDATE ... WHERE order_id); sku and qty are the
 * first line's (sorted), line[] every line's. */
struct hold_row {
    char sku[STOCK_SKU_MAX + 1];
    long long qty;
    int nlines;
    struct hold_line line[HOLD_LINES_MAX];
    char state[16];            /* held | confirmed | released | expired */
    char guard[33];
    char user_id[STOCK_ID_MAX + 1];   /* the buyer ("" none): its quota */
    long long expires_at_ms;   /* Unix ms, the DB clock */
    long long past_deadline;   /* 1: expires_at <= NOW(3) when read */
    long long fresh;           /* 1: confirmed late on fresh units */
};

/* What a hold call came to (negative: a DB_E* code, nothing changed). */
enum hold_result {
    HOLD_HELD = 1,             /* reserved now */
    HOLD_REPEAT,               /* the order already has this hold (row filled) */
    HOLD_CONFLICT,             /* the order id has another hold, or a sale */
    HOLD_OUT_OF_STOCK,         /* *left units, fewer than asked */
    HOLD_UNKNOWN_SKU,
    HOLD_CONFIRMED,            /* a sale now (ledger row written) */
    HOLD_CONFIRMED_FRESH,      /* late, on fresh units after the sweep */
    HOLD_CONFIRM_REPEAT,       /* confirmed before: answered as then */
    HOLD_EXPIRED,              /* deadline passed, no fresh units: 409 */
    HOLD_NOT_HELD,             /* released (or, for release, not held) */
    HOLD_UNKNOWN_ORDER,
    HOLD_GIVEN_BACK,           /* release: the units are back in stock */
    HOLD_NO_USER,              /* the SKU has a purchase limit, no user_id */
    HOLD_LIMIT_EXCEEDED,       /* the buyer's live holds and sales fill the
                                * limit (*left: the limit); nothing changed */
    HOLD_LIMIT_UNENFORCED,     /* the guard cannot hold a limited SKU within
                                * its limit (redis-stream): a 400 (*left:
                                * the limit); nothing changed */
};

/* user_id: the buyer ("" none). On a SKU with limit_per_user > 0 it is
 * required, and a live hold counts against it as a sale does: the count
 * (user_purchases) moves in the reserve's transaction and goes back with
 * a release or an expiry in theirs. */
struct hold_reserve_req {
    const char *order_id, *guard, *instance, *user_id;
    long long ttl_ms;
    int nlines;                /* 1..HOLD_LINES_MAX, sorted by SKU, one per SKU */
    const struct hold_line *line;
};

/* ---- statements (store_holds.c) ---------------------------------------- */

/* order_id's first row (by SKU; FOR UPDATE locks it: every transaction
 * on the order locks that row first, so it stands for the order): 1 found
 * (h filled, nlines 0), 0 not, or DB_E*. */
int store_hold_get(struct db_conn *db, const char *order_id, int for_update,
                   struct hold_row *h);
/* Line i (by SKU) of order_id into l: 1, 0 none, or DB_E*. */
int store_hold_line(struct db_conn *db, const char *order_id, int i, struct hold_line *l);
/* A held row expiring ttl_ms from the DB's now: 1, DB_EDUP, or DB_E*. */
long long store_hold_insert(struct db_conn *db, const char *order_id, const char *sku,
                            long long qty, const char *guard, const char *instance,
                            const char *user_id, long long ttl_ms);
/* Another row of the order (a cart's next SKU), with the first row's
 * guard, instance, buyer and deadline: 1, DB_EDUP, or DB_E*. */
long long store_hold_insert_more(struct db_conn *db, const char *order_id, const char *sku,
                                 long long qty);
/* held -> confirmed, only before the deadline (check_deadline 1); 0: the
 * broken variant, held or expired -> confirmed whatever the deadline.
 * The transitions move every row of the order: rows moved (> 0), 0 not,
 * or DB_E*. */
long long store_hold_confirm(struct db_conn *db, const char *order_id, int check_deadline);
/* expired -> confirmed with fresh=1 (new units taken): 1, 0, DB_E*. */
long long store_hold_confirm_fresh(struct db_conn *db, const char *order_id);
/* held -> expired, only once past the deadline: 1, 0, DB_E*. */
long long store_hold_expire(struct db_conn *db, const char *order_id);
/* held -> released: 1, 0, DB_E*. */
long long store_hold_release(struct db_conn *db, const char *order_id);
/* The order ids of held rows past their deadline, oldest first, at most
 * max, comma-separated into buf: the count, or DB_E*. */
long long store_holds_due(struct db_conn *db, int max, char *buf, size_t len);
/* sku's units held, holds past their deadline not swept yet, and the
 * order ids confirmed after their deadline on their own units (late, the
 * broken confirm) into late. 1, or DB_E*. */
int store_holds_audit(struct db_conn *db, const char *sku, long long *held,
                      long long *expired_unswept, char *late, size_t late_len);
/* Every hold of sku (a reseed, a removal): 0 or DB_E*. */
int store_holds_clear(struct db_conn *db, const char *sku);

/* ---- transactions (holds.c) -------------------------------------------- */

/* order_id's hold with every line (h->line[], nlines): 1, 0 none, DB_E*. */
int stock_hold_load(struct db_conn *db, const char *order_id, int for_update,
                    struct hold_row *h);

/* Take every line's qty from stock (only while stock >= qty; all or
 * nothing, rows in r's sorted order) and write the hold's rows.
 * HOLD_HELD / HOLD_REPEAT (h: the rows, the same answer as the first),
 * HOLD_CONFLICT, HOLD_OUT_OF_STOCK (h->line[]: every line, left the stock
 * found; *left line 0's), HOLD_UNKNOWN_SKU (h->sku), HOLD_NO_USER,
 * HOLD_LIMIT_EXCEEDED (*left: the limit, h->sku the line), or DB_E*. */
int stock_hold_reserve(struct db_conn *db, const struct hold_reserve_req *r,
                       struct hold_row *h, long long *left);
/* Confirm order_id's hold as a sale by `instance`: the ledger row is
 * written in the same transaction as held -> confirmed. A hold past its
 * deadline is expired first (its units back), then new units are taken
 * when there are (HOLD_CONFIRMED_FRESH, the buyer's quota charged again),
 * else HOLD_EXPIRED, or HOLD_LIMIT_EXCEEDED when the quota the expiry gave
 * back was taken meanwhile (the expiry stays committed). check_deadline
 * 0 is the broken variant (confirm_check "none"). *remaining: the stock
 * the sale left. HOLD_CONFLICT (nothing changed): the order id was sold
 * outright since the reserve. */
int stock_hold_confirm(struct db_conn *db, const char *order_id, const char *instance,
                       int check_deadline, struct hold_row *h, long long *remaining);
/* Give a held hold's units back: HOLD_GIVEN_BACK, HOLD_NOT_HELD (h
 * filled), HOLD_UNKNOWN_ORDER, or DB_E*. */
int stock_hold_release(struct db_conn *db, const char *order_id, struct hold_row *h);
/* The sweeper's step for one hold: held -> expired and its units back, if
 * it is still held past its deadline. 1 swept, 0 not (decided elsewhere),
 * or DB_E*. */
int stock_hold_expire(struct db_conn *db, const char *order_id);

#endif
