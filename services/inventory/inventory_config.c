/* The inventory service's options: flags, environment twins, defaults that
 * match the embedded stack (deploy/local/stack). Guards bring their own
 * rows (Redis address, Redlock nodes), merged in at parse time. */
#include "inventory_config.h"

#include "guards/guard.h"

#include <stddef.h>
#include <stdio.h>

#define S(f) offsetof(struct inv_conf, f), sizeof(((struct inv_conf *)0)->f)
#define N(f) offsetof(struct inv_conf, f), 0

const struct cfg_opt inv_options[] = {
    {"port", "PORT", CFG_INT, "8001", 1, 65535, N(port), "HTTP port"},
    {"bind", "BIND", CFG_STR, "127.0.0.1", 0, 0, S(bind), "IPv4 address to listen on"},
    {"instance", "INSTANCE_ID", CFG_STR, "inventory-1", 0, 0, S(instance), "name reported in answers and the ledger"},
    {"guard", "GUARD", CFG_STR, "none", 0, 0, S(guard), "default guard (GET /guards lists them)"},
    {"threads", "THREADS", CFG_INT, "16", 1, 256, N(threads), "HTTP worker threads (one MySQL connection each)"},
    DB_CFG_OPTIONS(struct inv_conf, db, "db_shopping", "inventory schema"),
    {"max-retries", "MAX_RETRIES", CFG_INT, "50", 0, 10000, N(max_retries), "optimistic / deadlock retry bound"},
    {"lock-wait", "LOCK_WAIT_MS", CFG_MS, "3000", 0, 60000, N(lock_wait_ms), "default lock_wait_ms"},
    {"lock-ttl", "LOCK_TTL_MS", CFG_MS, "30000", 1, 600000, N(lock_ttl_ms), "default lock_ttl_ms (lease)"},
    {"mysql-nodes", "LAB_MYSQL_NODES", CFG_STR, "", 0, 0, S(mysql_nodes), "Galera cluster nodes host:port,...: the audit reads every one (empty: one server)"},
    {"cluster-audit-wait", "LAB_CLUSTER_AUDIT_WAIT_MS", CFG_MS, "10s", 0, 120000, N(cluster_wait_ms), "how long the audit waits for the cluster's nodes to converge"},
    {"hold-sweep", "LAB_HOLD_SWEEP_MS", CFG_MS, "200ms", 0, 60000, N(hold_sweep_ms), "how often this instance gives back the units of holds past their deadline (0: never; any instance may sweep)"},
    {"admin-token", "LAB_ADMIN_TOKEN", CFG_STR, "", 0, 0, S(admin_token), "bearer token for reseed and release (empty: no check)"},
    {"print-guards", "LAB_PRINT_GUARDS", CFG_BOOL, "0", 0, 1, N(print_guards), "print the GET /guards body and exit (no backend is opened)"},
};
const size_t inv_noptions = sizeof(inv_options) / sizeof(inv_options[0]);

int inv_conf_load(struct inv_conf *c, int argc, char **argv, char *err, size_t errlen)
{
    struct cfg_group groups[1 + GUARD_GROUPS_MAX] = {{inv_options, inv_noptions, c}};
    size_t n = 1 + guard_option_groups(groups + 1, GUARD_GROUPS_MAX);
    int rc = cfg_parse_groups(groups, n, argc, argv,
                              "Inventory service of the oversell lab (API: services/API.md).",
                              err, errlen);
    if (rc != CFG_OK)
        return rc;
    if (db_conf_check(&c->db, err, errlen) != DB_OK)
        return CFG_ERR;
    if (!guard_find(c->guard)) {
        snprintf(err, errlen, "--guard: unknown guard '%s' (known: %s)", c->guard,
                 guard_names());
        return CFG_ERR;
    }
    return CFG_OK;
}
