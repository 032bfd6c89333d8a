/* The order service's options; defaults match the embedded stack. */
#include "order_config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define S(f) offsetof(struct order_conf, f), sizeof(((struct order_conf *)0)->f)
#define N(f) offsetof(struct order_conf, f), 0

const struct cfg_opt order_options[] = {
    {"port", "PORT", CFG_INT, "8000", 1, 65535, N(port), "HTTP port"},
    {"bind", "BIND", CFG_STR, "127.0.0.1", 0, 0, S(bind), "IPv4 address to listen on"},
    {"instance", "INSTANCE_ID", CFG_STR, "order-1", 0, 0, S(instance), "name reported in answers"},
    {"inventory-urls", "INVENTORY_URLS", CFG_STR, "http://127.0.0.1:8001,http://127.0.0.1:8002", 0, 0, S(inventory_urls), "inventory instances, round-robin"},
    {"guard", "GUARD", CFG_STR, "", 0, 0, S(guard), "guard to ask for (empty: each inventory's own)"},
    {"threads", "THREADS", CFG_INT, "16", 1, 256, N(threads), "HTTP worker threads"},
    DB_CFG_OPTIONS(struct order_conf, db, "db_order", "order schema"),
    {"deduct-timeout", "DEDUCT_TIMEOUT_MS", CFG_MS, "10s", 100, 600000, N(deduct_timeout_ms), "budget of one order's deduction, failover included (sent as X-Deadline-Ms)"},
    {"inventory-timeout", "INVENTORY_TIMEOUT_MS", CFG_MS, "5s", 100, 600000, N(inventory_timeout_ms), "timeout of each release call"},
    {"connect-timeout", "CONNECT_TIMEOUT_MS", CFG_MS, "500ms", 10, 60000, N(connect_timeout_ms), "inventory connect timeout"},
    {"reconcile-ms", "RECONCILE_MS", CFG_MS, "1s", 10, 600000, N(reconcile_ms), "reconciler period"},
    {"reconcile-margin", "RECONCILE_MARGIN_MS", CFG_MS, "2s", 0, 600000, N(reconcile_margin_ms), "a pending order is released this long after its deadline"},
    {"reconcile-batch", "RECONCILE_BATCH", CFG_INT, "100", 1, 10000, N(reconcile_batch), "orders settled per reconciler tick at most"},
    {"admin-token", "LAB_ADMIN_TOKEN", CFG_STR, "", 0, 0, S(admin_token), "sent as 'Authorization: Bearer' on every release (empty: none)"},
    {"debug-pause-after-deduct", NULL, CFG_MS, "0", 0, 60000, N(debug_pause_after_deduct_ms), "lab knob for tests: sleep between the deduction and the order row"},
};
const size_t order_noptions = sizeof(order_options) / sizeof(order_options[0]);

int order_split_urls(struct order_conf *c, char *err, size_t errlen)
{
    c->nurls = 0;
    const char *p = c->inventory_urls;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 0) {
            if (c->nurls == ORDER_MAX_INVENTORY || n >= sizeof(c->urls[0])) {
                snprintf(err, errlen, "--inventory-urls: at most %d URLs of < %zu bytes",
                         ORDER_MAX_INVENTORY, sizeof(c->urls[0]));
                return -1;
            }
            memcpy(c->urls[c->nurls], p, n);
            c->urls[c->nurls][n] = '\0';
            while (n > 0 && c->urls[c->nurls][n - 1] == '/')
                c->urls[c->nurls][--n] = '\0';   /* we append /inventory/... */
            if (strncmp(c->urls[c->nurls], "http://", 7) != 0) {
                snprintf(err, errlen, "--inventory-urls: '%s' is not an http:// URL",
                         c->urls[c->nurls]);
                return -1;
            }
            c->nurls++;
        }
        p += comma ? n + 1 : n;
    }
    if (c->nurls == 0) {
        snprintf(err, errlen, "--inventory-urls: at least one URL is needed");
        return -1;
    }
    return 0;
}

int order_conf_load(struct order_conf *c, int argc, char **argv, char *err, size_t errlen)
{
    int rc = cfg_parse(order_options, order_noptions, c, argc, argv,
                       "Order service of the oversell lab (API: services/API.md).", err,
                       errlen);
    if (rc != CFG_OK)
        return rc;
    if (db_conf_check(&c->db, err, errlen) != DB_OK)
        return CFG_ERR;
    return order_split_urls(c, err, errlen) == 0 ? CFG_OK : CFG_ERR;
}
