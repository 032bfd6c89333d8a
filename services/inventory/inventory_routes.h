/* HTTP routes of the inventory service (services/API.md). */
#ifndef INVENTORY_ROUTES_H
#define INVENTORY_ROUTES_H

#include "base/http.h"
#include "base/routes.h"
#include "inventory_config.h"

/* The service's routes (services/API.md). */
extern const struct route_table inv_routes;

/* The http_handler_fn: inv_routes' dispatch; app is a const struct inv_conf *. */
void inv_handle(void *app, const struct http_req *req, struct http_resp *resp);

/* The workers' warm-up (http_set_warm): this thread's MySQL connection
 * open and answering, Redis reachable through the shared pool. 0 when so. */
int inv_warm(void *app);

/* GET /guards' body, malloc'd (caller frees); NULL when out of memory. */
char *inv_guards_text(const struct inv_conf *c);

/* Prepare the constant answers (GET /livez) once, before serving. */
void inv_routes_init(const struct inv_conf *c);

#endif
