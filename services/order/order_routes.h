/* HTTP routes of the order service (services/API.md). */
#ifndef ORDER_ROUTES_H
#define ORDER_ROUTES_H

#include "base/http.h"
#include "base/routes.h"
#include "order_config.h"

/* The service's routes (services/API.md). */
extern const struct route_table order_routes;

/* The http_handler_fn: order_routes' dispatch; app is a const struct order_conf *. */
void order_handle(void *app, const struct http_req *req, struct http_resp *resp);

#endif
