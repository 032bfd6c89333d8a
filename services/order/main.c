/* Order service: parse options, serve HTTP until SIGINT/SIGTERM. */
#include "inventory_client.h"
#include "order_config.h"
#include "order_routes.h"

#include "base/db.h"
#include "base/service.h"

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
    char banner[512];
    snprintf(banner, sizeof(banner),
             "%s listening on %s:%ld, %d inventory instance(s), mysql %s:%ld/%s", conf.instance,
             conf.bind, conf.port, conf.nurls, conf.db.host, conf.db.port, conf.db.dbname);
    rc = service_run("order", conf.bind, conf.port, conf.threads, order_handle, &conf, banner);
    invc_global_end();
    db_global_end();
    return rc;
}
