/* Orders that wait for payment (services/API.md, section 4, "pay_within_ms"):
 * the order reserves (POST /inventory/reserve) instead of deducting and
 * waits `awaiting_payment`; POST /orders/{id}/pay confirms the hold. The
 * reconciler expires what is never paid (order_reconcile.c). */
#ifndef ORDER_HOLD_H
#define ORDER_HOLD_H

#include "inventory_client.h"
#include "order_config.h"
#include "order_place.h"

#include "base/routes.h"

struct db_conn;
struct order_row;

/* pay_within_ms bounds: the inventory's ttl_ms bounds. */
#define ORDER_PAY_MIN_MS 100
#define ORDER_PAY_MAX_MS 3600000

/* The reserve body for o (order_id, sku, qty, ttl_ms, and the forwarded
 * guard); NULL with err when the forwarded body has a field a reserve does
 * not take (a 400: nothing was recorded). The caller frees it. */
char *order_hold_body(const struct order_req *o, char *err, size_t errlen);

/* The inventory held the units (a: its 200): the row goes pending ->
 * awaiting_payment and the client gets 201. */
void order_hold_finish(const struct order_conf *c, struct db_conn *db,
                       const struct order_req *o, const struct invc_answer *a,
                       struct http_resp *resp);

/* A repeat of an order that reserved (row r: awaiting_payment, paid,
 * expired): answered as its state says. Returns 1 when answered, 0 when r
 * is in another state. */
int order_hold_existing(const char *order_id, const struct order_row *r,
                        struct http_resp *resp);

/* POST /orders/{id}/pay */
void order_route_pay(void *app, struct route_call *call, const struct http_req *req,
                     struct http_resp *resp);

#endif
