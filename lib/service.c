/* Routes shared by the inventory and order services. */
#include "service.h"

#include "metrics.h"

#include <string.h>

void service_metrics(const struct http_req *req, struct http_resp *resp)
{
    if (strcmp(req->method, "GET") != 0) {
        http_error(resp, 405, "method_not_allowed", "use GET %s", req->path);
        return;
    }
    char *text = metrics_render();
    if (text)
        http_text(resp, 200, "text/plain; version=0.0.4", text);
    else
        http_error(resp, 500, "internal", "out of memory");
}

int service_mysql_health(const struct db_conf *conf, struct http_resp *resp)
{
    struct db_conn *db = db_thread_conn(conf);
    if (db && db_ping(db) == DB_OK)
        return 0;
    http_error(resp, 503, "backend_unavailable", "mysql: %s",
               db ? db->errstr : "out of memory");
    return -1;
}
