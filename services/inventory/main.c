/* Inventory service: parse options, serve HTTP until SIGINT/SIGTERM. */
#include "db.h"
#include "http.h"
#include "inventory_config.h"
#include "inventory_routes.h"
#include "metrics.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    static struct inv_conf conf;
    char err[256];
    int rc = inv_conf_load(&conf, argc, argv, err, sizeof(err));
    if (rc == CFG_HELP)
        return 0;
    if (rc != CFG_OK) {
        fprintf(stderr, "inventory: %s\n", err);
        return 2;
    }
    if (db_global_init() != DB_OK) {
        fprintf(stderr, "inventory: mysql_library_init failed\n");
        return 1;
    }
    metrics_describe("lab_http_requests_total", "counter", "HTTP requests by route, status and guard");
    metrics_describe("lab_deductions_total", "counter", "deductions by guard and outcome");
    metrics_describe("lab_retries_total", "counter", "optimistic misses and deadlock retries");
    metrics_describe("lab_lock_wait_seconds", "histogram", "time spent acquiring a guard");

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);   /* workers inherit the mask */
    signal(SIGPIPE, SIG_IGN);

    struct http_server *srv = http_start(conf.bind, conf.port, conf.threads, inv_handle,
                                         &conf, err, sizeof(err));
    if (!srv) {
        fprintf(stderr, "inventory: %s\n", err);
        db_global_end();
        return 1;
    }
    fprintf(stderr, "inventory %s listening on %s:%ld, guard %s, mysql %s:%ld/%s\n",
            conf.instance, conf.bind, conf.port, conf.guard, conf.db.host, conf.db.port,
            conf.db.dbname);
    int sig;
    sigwait(&sigs, &sig);
    fprintf(stderr, "inventory %s: signal %d, stopping\n", conf.instance, sig);
    http_stop(srv);
    db_global_end();
    return 0;
}
