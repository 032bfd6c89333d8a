/* SQL of the order service, on db_order: the only place it is written.
 * An order row is written before its deduction (status pending) and moves
 * only forward, each step one conditional UPDATE so that a request thread
 * and any number of reconcilers can race without a lost transition:
 *
 *   pending --place--> placed
 *   pending --fail---> failed --reopen--> pending   (nothing was taken)
 *   pending --claim--> releasing --settle--> cancelled | failed
 *   pending --await--> awaiting_payment --pay--> paid   (a hold, see Holds)
 *   awaiting_payment --expire--> expired
 *   awaiting_payment --claim_unpaid--> releasing --settle--> expired | failed
 *
 * Every function returns the affected or found row count (0 or 1), or a
 * negative DB_E* code (base/db.h). */
#ifndef ORDER_STORE_H
#define ORDER_STORE_H

#include "stock/deduct.h"

struct db_conn;

/* Room for a cart's lines as compact JSON: 50 lines of a 64-byte SKU. */
#define ORDER_LINES_MAX 4608

struct order_row {
    char user_id[STOCK_ID_MAX + 1];
    char sku[STOCK_SKU_MAX + 1];
    long long qty;
    char guard[33];
    char instance[65];
    char status[17];
    long long remaining;         /* -1 when unknown (not placed, or an old row) */
    char lines[ORDER_LINES_MAX]; /* a cart's lines (sql/011), "" for one SKU */
};

/* Record the intent: a pending row whose deadline is now + budget_ms on the
 * database clock; lines a cart's lines (NULL or "": one SKU). DB_EDUP when
 * order_id already has a row. */
long long order_store_begin(struct db_conn *db, const char *order_id, const char *user_id,
                            const char *sku, long long qty, const char *lines,
                            const char *guard, long long budget_ms);

/* Read one order. 1 and *row filled, 0 when there is no such order. */
long long order_store_get(struct db_conn *db, const char *order_id, struct order_row *row);

/* pending -> placed, with what the inventory answered. 0: not pending. */
long long order_store_place(struct db_conn *db, const char *order_id, const char *guard,
                            const char *instance, long long remaining);

/* pending -> failed: the inventory surely took nothing. 0: not pending. */
long long order_store_fail(struct db_conn *db, const char *order_id);

/* failed -> pending with a new deadline: a repeat of an order that took
 * nothing tries again under the same order_id. 0: not failed. */
long long order_store_reopen(struct db_conn *db, const char *order_id, long long budget_ms);

/* pending -> releasing. With expired_margin_ms >= 0, only when the deadline
 * passed more than that long ago (the reconciler); -1: at once (the request
 * thread, after the inventory answered). 0: not (or not yet) claimable. */
long long order_store_claim(struct db_conn *db, const char *order_id,
                            long long expired_margin_ms);

/* releasing -> status ("cancelled" or "failed"). 0: not releasing. */
long long order_store_settle(struct db_conn *db, const char *order_id, const char *status);

/* pending -> awaiting_payment: the inventory holds the units until
 * now + pay_ms (database clock), the order's new deadline. 0: not pending. */
long long order_store_await(struct db_conn *db, const char *order_id, const char *guard,
                            const char *instance, long long pay_ms);
/* awaiting_payment -> paid, with the stock the sale left. 0: not awaiting. */
long long order_store_pay(struct db_conn *db, const char *order_id, long long remaining);
/* awaiting_payment -> expired: the inventory said hold_expired. 0: not awaiting. */
long long order_store_expire(struct db_conn *db, const char *order_id);
/* awaiting_payment -> releasing, only once its payment deadline passed more
 * than margin_ms ago (the reconciler). 0: not (yet). */
long long order_store_claim_unpaid(struct db_conn *db, const char *order_id,
                                   long long margin_ms);
/* 1 while order_id's payment deadline has not passed (database clock), 0
 * when it has or there is no such order, or a negative DB_E* code. */
long long order_store_pay_open(struct db_conn *db, const char *order_id);

/* The first order after `after` (byte order; "" for the start) that the
 * reconciler must settle: releasing, or pending or awaiting_payment past
 * deadline + margin.
 * 1 with id and status filled, 0 when none is left. */
long long order_store_next_unsettled(struct db_conn *db, const char *after,
                                     long long margin_ms, char *id, size_t idlen,
                                     char *status, size_t statuslen);

/* Placed (and paid) orders and units for sku. Returns 1, or a negative DB_E* code. */
long long order_store_count(struct db_conn *db, const char *sku, long long *orders,
                            long long *units);

/* Idempotency keys (sql/008_idempotency_keys.sql). A key row is in_flight
 * (held by a request until its lease ends), open (the last attempt had no
 * final answer: the next repeat runs its order again) or done (its answer
 * is replayed). */
#define ORDER_KEY_ANSWER_MAX 16384   /* a longer answer is not kept: the key stays open */

struct order_key_row {
    char order_id[STOCK_ID_MAX + 1];
    char state[17];
    int same_request;            /* 1 when the stored request equals this one */
    int lease_over;              /* 1 when an in_flight lease has ended */
    long long answer_status;
    char answer[ORDER_KEY_ANSWER_MAX];
};

/* Take a new key: in_flight for lease_ms, kept keep_s seconds. A row of
 * the key past its expiry is dropped first. DB_EDUP when the key exists. */
long long order_store_key_take(struct db_conn *db, const char *key, const char *request,
                               const char *order_id, long long lease_ms, long long keep_s);

/* Read a key, comparing its stored request with `request`. 1 and *row
 * filled, 0 when there is no such key. */
long long order_store_key_get(struct db_conn *db, const char *key, const char *request,
                              struct order_key_row *row);

/* open, or in_flight past its lease -> in_flight for lease_ms. 0: another
 * request holds it (or it is done). */
long long order_store_key_retake(struct db_conn *db, const char *key, long long lease_ms);

/* in_flight -> done with the answer to replay. 0: not in flight. */
long long order_store_key_done(struct db_conn *db, const char *key, long long status,
                               const char *answer);

/* in_flight -> open: no final answer, the next repeat runs the order again. */
long long order_store_key_open(struct db_conn *db, const char *key);

/* Delete at most `limit` keys past their expiry: the number deleted. */
long long order_store_key_purge(struct db_conn *db, long long limit);

#endif
