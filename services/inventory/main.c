/* Inventory service: parse options, open the guards, serve HTTP until
 * SIGINT/SIGTERM. */
#include "inventory_config.h"
#include "inventory_routes.h"
#include "hold_routes.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/service.h"
#include "guards/guard.h"

#include <stdio.h>
#include <stdlib.h>

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
    if (conf.print_guards) {
        char *body = inv_guards_text(&conf);
        if (!body)
            return 1;
        puts(body);
        free(body);
        return 0;
    }
    if (db_global_init() != DB_OK) {
        fprintf(stderr, "inventory: mysql_library_init failed\n");
        return 1;
    }
    /* conf.db: the MySQL settings of the guards' own connections (the
     * redis-stream flusher). */
    if (guard_init_all(conf.instance, &conf.db, err, sizeof(err)) != 0) {
        fprintf(stderr, "inventory: %s\n", err);
        db_global_end();
        return 2;
    }
    metrics_describe("lab_http_requests_total", "counter", "HTTP requests by route, status and guard");
    metrics_describe("lab_deductions_total", "counter", "deductions by guard and outcome");
    metrics_describe("lab_retries_total", "counter", "optimistic misses and deadlock retries");
    metrics_describe("lab_lock_wait_seconds", "histogram", "time spent acquiring a guard");

    inv_routes_init(&conf);
    http_set_warm(inv_warm);   /* /healthz: ready once every worker is connected */
    char banner[512];
    snprintf(banner, sizeof(banner), "%s listening on %s:%ld, guard %s, mysql %s:%ld/%s",
             conf.instance, conf.bind, conf.port, conf.guard, conf.db.host, conf.db.port,
             conf.db.dbname);
    /* Holds past their deadline go back to stock on any instance that
     * sweeps: none of them is special. */
    if (inv_sweeper_start(&conf) != 0)
        fprintf(stderr, "inventory: the hold sweeper did not start (holds expire only "
                "through POST /inventory/sweep and late confirms)\n");
    rc = service_run("inventory", conf.bind, conf.port, conf.threads, &inv_routes, inv_handle,
                     &conf, banner);
    inv_sweeper_stop();
    guard_fini_all();
    db_global_end();
    return rc;
}
