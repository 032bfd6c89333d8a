/* Routes shared by the inventory and order services. */
#include "service.h"

#include "edge.h"
#include "metrics.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* Paths per thread kind given to http_start (it keeps 8), NULL included. */
#define SERVICE_MAX_PATHS 9

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

void service_mysql_fields(const struct db_conf *conf, json_t *body)
{
    struct db_conn *db = db_thread_conn(conf);
    if (!db || !db->my || !body)
        return;
    json_object_set_new(body, "sql_dialect", json_string(db_dialect_name(db->dialect)));
    json_object_set_new(body, "mysql_server", json_string(db->server));
}

int service_warm_health(struct http_resp *resp)
{
    long warm, workers;
    http_warm_state(&warm, &workers);
    if (warm >= workers)
        return 0;
    http_error(resp, 503, "backend_unavailable", "warming up: %ld of %ld workers connected",
               warm, workers);
    return -1;
}

int service_admin_check(const char *token, const struct http_req *req,
                        struct http_resp *resp)
{
    switch (edge_bearer_check(http_header(req, "Authorization"), token)) {
    case EDGE_AUTH_OK:
        return 0;
    case EDGE_AUTH_MISSING:
        http_error(resp, 401, "unauthorized",
                   "%s %s needs Authorization: Bearer <admin token>", req->method, req->path);
        return -1;
    default:
        http_error(resp, 403, "forbidden", "wrong admin token for %s %s", req->method,
                   req->path);
        return -1;
    }
}

int service_run(const char *name, const char *bind, long port, long threads,
                const struct route_table *routes, http_handler_fn fn, void *app,
                const char *banner)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);   /* workers inherit the mask */
    signal(SIGPIPE, SIG_IGN);

    /* Cheap routes on their own threads: an operator or an orchestrator
     * must see the service answer while every worker holds a sale. */
    const char *control[SERVICE_MAX_PATHS], *inline_paths[SERVICE_MAX_PATHS];
    route_paths(routes, ROUTE_CONTROL, control, SERVICE_MAX_PATHS);
    route_paths(routes, ROUTE_INLINE, inline_paths, SERVICE_MAX_PATHS);
    char err[256];
    struct http_server *srv =
        http_start(bind, port, threads, control, inline_paths, fn, app, err, sizeof(err));
    if (!srv) {
        fprintf(stderr, "%s: %s\n", name, err);
        return 1;
    }
    fprintf(stderr, "%s %s\n", name, banner);
    int sig;
    sigwait(&sigs, &sig);
    fprintf(stderr, "%s: signal %d, stopping\n", name, sig);
    http_stop(srv);
    return 0;
}
