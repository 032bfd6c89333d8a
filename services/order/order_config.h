/* Order service configuration: one struct, one option table. */
#ifndef ORDER_CONFIG_H
#define ORDER_CONFIG_H

#include "base/config.h"
#include "base/db.h"

#define ORDER_MAX_INVENTORY 16

struct order_conf {
    long port;
    char bind[64];
    char instance[48];
    char inventory_urls[1024];
    char guard[32];
    long threads;
    struct db_conf db;
    long deduct_timeout_ms;      /* one budget per order, failover included */
    long inventory_timeout_ms;   /* each release call (compensation, reconciler) */
    long connect_timeout_ms;
    long reconcile_ms;           /* reconciler tick */
    long reconcile_margin_ms;    /* pending rows are left alone this long past their deadline */
    long reconcile_batch;        /* rows settled per tick at most */
    char admin_token[128];       /* sent as Authorization: Bearer on releases; "" = none */
    long debug_pause_after_deduct_ms;   /* lab knob for tests: widens the crash window */
    /* derived from inventory_urls */
    char urls[ORDER_MAX_INVENTORY][128];
    int nurls;
};

extern const struct cfg_opt order_options[];
extern const size_t order_noptions;

/* Parse and validate (splits inventory_urls). CFG_OK / CFG_HELP / CFG_ERR. */
int order_conf_load(struct order_conf *c, int argc, char **argv, char *err, size_t errlen);
/* Split "u1,u2" into c->urls; -1 with err on an empty list or a bad URL. */
int order_split_urls(struct order_conf *c, char *err, size_t errlen);

#endif
