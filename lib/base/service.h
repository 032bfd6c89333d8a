/* What every service does the same way: the signal/listen loop of main(),
 * the /metrics route, and the MySQL half of /healthz. */
#ifndef LAB_SERVICE_H
#define LAB_SERVICE_H

#include "db.h"
#include "http.h"
#include "routes.h"

/* GET /metrics in Prometheus text format; 405 for other methods. */
void service_metrics(const struct http_req *req, struct http_resp *resp);

/* Ping this thread's MySQL connection. Returns 0 when it answers; else
 * answers 503 backend_unavailable naming MySQL and returns -1. */
int service_mysql_health(const struct db_conf *conf, struct http_resp *resp);

/* The MySQL half of a healthy /healthz body, from this thread's (just
 * pinged) connection: "sql_dialect" (the statements this service sends:
 * "mariadb" or "mysql", the portable forms) and "mysql_server" (the
 * server's version string). Adds nothing when there is no connection. */
void service_mysql_fields(const struct db_conf *conf, json_t *body);

/* Readiness of the worker pool: 0 when every worker is warm (its own
 * connections open, http_set_warm); else answers 503 backend_unavailable
 * "warming up: k of n workers connected" and returns -1. */
int service_warm_health(struct http_resp *resp);

/* The admin routes' gate: with a non-empty `token`, the request must carry
 * "Authorization: Bearer <token>". Returns 0 when it may go on; else answers
 * 401 unauthorized (no bearer token) or 403 forbidden (another one) and
 * returns -1. */
int service_admin_check(const char *token, const struct http_req *req,
                        struct http_resp *resp);

/* Block SIGINT/SIGTERM (every thread inherits the mask), ignore SIGPIPE,
 * listen on bind:port with `threads` workers, print "<name> <banner>" and
 * serve until a signal arrives, then stop. `fn` answers every request (a
 * service's fn hands it to route_dispatch with `routes`); the rows of
 * `routes` say which paths run on the control pool (ROUTE_CONTROL) and
 * which on the HTTP I/O threads without a hand-off (ROUTE_INLINE,
 * http_start). Returns 0, or 1 when the port cannot be listened on (the
 * reason printed on stderr). */
int service_run(const char *name, const char *bind, long port, long threads,
                const struct route_table *routes, http_handler_fn fn, void *app,
                const char *banner);

#endif
