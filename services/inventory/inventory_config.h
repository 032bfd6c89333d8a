/* Inventory service configuration: one struct, one option table. */
#ifndef INVENTORY_CONFIG_H
#define INVENTORY_CONFIG_H

#include "config.h"
#include "db.h"

struct inv_conf {
    long port;
    char bind[64];
    char instance[48];
    char guard[32];
    long threads;
    struct db_conf db;
    char redis_host[128];
    long redis_port;
    char redlock_nodes[512];
    long max_retries;
    long lock_wait_ms;
    long lock_ttl_ms;
};

extern const struct cfg_opt inv_options[];
extern const size_t inv_noptions;

/* Parse and validate (guard name must exist). CFG_OK / CFG_HELP / CFG_ERR. */
int inv_conf_load(struct inv_conf *c, int argc, char **argv, char *err, size_t errlen);

#endif
