/* Routes every service answers the same way: /metrics, and the MySQL half
 * of /healthz. */
#ifndef LAB_SERVICE_H
#define LAB_SERVICE_H

#include "db.h"
#include "http.h"

/* GET /metrics in Prometheus text format; 405 for other methods. */
void service_metrics(const struct http_req *req, struct http_resp *resp);

/* Ping this thread's MySQL connection. Returns 0 when it answers; else
 * answers 503 backend_unavailable naming MySQL and returns -1. */
int service_mysql_health(const struct db_conf *conf, struct http_resp *resp);

#endif
