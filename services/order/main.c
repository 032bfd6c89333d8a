/* Order service: parse options, run the reconciler, serve HTTP until
 * SIGINT/SIGTERM. */
#include "inventory_client.h"
#include "order_config.h"
#include "order_reconcile.h"
#include "order_routes.h"

#include "base/db.h"
#include "base/service.h"

#include <signal.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    static struct order_conf conf;
    char err[256];
    int rc = order_conf_load(&conf, argc, argv, err, sizeof(err));
    if (rc == CFG_HELP)
        return 0;
    if (rc != CFG_OK) {
        fprintf(stderr, "order: %s\n", err);
        return 2;
    }
    if (db_global_init() != DB_OK || invc_global_init() != 0) {
        fprintf(stderr, "order: library initialisation failed\n");
        return 1;
    }
    /* The reconciler starts before service_run blocks the signals, so block
     * them here: the thread inherits the mask and sigwait sees them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (order_reconcile_start(&conf, err, sizeof(err)) != 0) {
        fprintf(stderr, "order: %s\n", err);
        invc_global_end();
        db_global_end();
        return 1;
    }
    char banner[512];
    snprintf(banner, sizeof(banner),
             "%s listening on %s:%ld, %d inventory instance(s), mysql %s:%ld/%s, "
             "deduct budget %ld ms, reconciler every %ld ms (margin %ld ms)%s", conf.instance,
             conf.bind, conf.port, conf.nurls, conf.db.host, conf.db.port, conf.db.dbname,
             conf.deduct_timeout_ms, conf.reconcile_ms, conf.reconcile_margin_ms,
             conf.debug_pause_after_deduct_ms ? ", DEBUG pause after deduct" : "");
    rc = service_run("order", conf.bind, conf.port, conf.threads, &order_routes, order_handle,
                     &conf, banner);
    order_reconcile_stop();
    invc_global_end();
    db_global_end();
    return rc;
}
