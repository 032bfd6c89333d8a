/* Order service: parse options, serve HTTP until SIGINT/SIGTERM. */
#include "db.h"
#include "http.h"
#include "inventory_client.h"
#include "order_config.h"
#include "order_routes.h"

#include <pthread.h>
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
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct http_server *srv = http_start(conf.bind, conf.port, conf.threads, order_handle,
                                         &conf, err, sizeof(err));
    if (!srv) {
        fprintf(stderr, "order: %s\n", err);
        return 1;
    }
    fprintf(stderr, "order %s listening on %s:%ld, %d inventory instance(s), mysql %s:%ld/%s\n",
            conf.instance, conf.bind, conf.port, conf.nurls, conf.db.host, conf.db.port,
            conf.db.dbname);
    int sig;
    sigwait(&sigs, &sig);
    fprintf(stderr, "order %s: signal %d, stopping\n", conf.instance, sig);
    http_stop(srv);
    invc_global_end();
    db_global_end();
    return 0;
}
