/* Inventory service configuration: one struct, one option table; the
 * guards add their own rows (lib/guards, guard_merge_options). */
#ifndef INVENTORY_CONFIG_H
#define INVENTORY_CONFIG_H

#include "base/config.h"
#include "base/db.h"

struct inv_conf {
    long port;
    char bind[64];
    char instance[48];
    char guard[32];
    long threads;
    struct db_conf db;
    long max_retries;
    long lock_wait_ms;
    long lock_ttl_ms;
    char admin_token[128];   /* "" = reseed and release are open (loopback) */
    char mysql_nodes[512];   /* Galera nodes "host:port,...": "" = one server */
    long cluster_wait_ms;    /* how long the audit waits for them to converge */
    long hold_sweep_ms;      /* the hold sweeper's period; 0: no sweeper */
    int print_guards;        /* 1: print GET /guards' body and exit (the lab
                              * reads the guards' descriptions without a stack) */
};

extern const struct cfg_opt inv_options[];
extern const size_t inv_noptions;

/* Parse the service's and the guards' options and validate (the guard name
 * must exist). CFG_OK / CFG_HELP / CFG_ERR. */
int inv_conf_load(struct inv_conf *c, int argc, char **argv, char *err, size_t errlen);

#endif
