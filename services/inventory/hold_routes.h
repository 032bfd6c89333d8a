/* The inventory's hold routes (services/API.md, "Holds"): reserve,
 * confirm, sweep, the release of a hold, and the hold figures of GET
 * /inventory/{sku} and its audit; plus the background sweeper. */
#ifndef INVENTORY_HOLD_ROUTES_H
#define INVENTORY_HOLD_ROUTES_H

#include "base/routes.h"
#include "inventory_config.h"

#include <jansson.h>

struct db_conn;
struct deduct_env;

void inv_route_reserve(void *app, struct route_call *call, const struct http_req *req,
                       struct http_resp *resp);
void inv_route_confirm(void *app, struct route_call *call, const struct http_req *req,
                       struct http_resp *resp);
void inv_route_sweep(void *app, struct route_call *call, const struct http_req *req,
                     struct http_resp *resp);

/* POST /inventory/release of an order the ledger does not have: give its
 * hold back. Returns 1 after answering, 0 when order_id has no hold (the
 * caller answers 404). */
int inv_hold_release(const struct deduct_env *env, const char *order_id,
                     struct http_resp *resp);

/* "held" and "available" of GET /inventory/{sku} into j (stock: the row's). */
void inv_hold_state(struct db_conn *db, const char *sku, long long stock, json_t *j);

/* Start the background sweeper (every conf->hold_sweep_ms; 0: none).
 * 0, or -1 when the thread could not start. Stop it with
 * inv_sweeper_stop (accepts a sweeper never started). */
int inv_sweeper_start(const struct inv_conf *c);
void inv_sweeper_stop(void);

#endif
