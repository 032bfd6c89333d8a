/* Placing one order, crash-safe: the intent is recorded (a pending row)
 * before the deduction, finalised after it; whatever cannot be finalised
 * is released, now or by the reconciler, never while it may be placed. */
#ifndef ORDER_PLACE_H
#define ORDER_PLACE_H

#include "order_config.h"
#include "order_store.h"

#include "base/http.h"
#include "stock/deduct.h"

#include <jansson.h>

/* A validated order (the routes check every field first). */
struct order_req {
    char order_id[STOCK_ID_MAX + 1];   /* the client's, or a generated one */
    char user_id[STOCK_ID_MAX + 1];
    char sku[STOCK_SKU_MAX + 1];       /* a cart: its line 0's */
    long long qty;                     /* a cart: the units of all its lines */
    char lines[ORDER_LINES_MAX];       /* a cart's lines as the order row keeps
                                        * them (compact JSON), "" for one SKU */
    /* The body for POST /inventory/deduct, borrowed: order_place sets its
     * order_id and (one SKU) qty and drops user_id; a cart's "lines", guard, hold_ms and lock options
     * pass through for the inventory to validate. */
    json_t *forward;
    double started;                    /* util_now() at the request: the budget starts here */
    long long pay_within_ms;           /* > 0: reserve, the order awaits payment (order_hold.h) */
};

/* Place the order and answer the client (services/API.md, section 4). */
void order_place(const struct order_conf *c, struct order_req *o, struct http_resp *resp);

#endif
