/* The audit on a Galera cluster: every node's own view of a SKU, read once
 * the nodes have applied the same write sets (services/API.md, audit). */
#ifndef CLUSTER_AUDIT_H
#define CLUSTER_AUDIT_H

#include "base/db.h"

#define CLUSTER_NODES_MAX 8

struct cluster_node {
    char addr[80];               /* host:port as configured */
    int ok;                      /* 1 when the node answered */
    char error[96];              /* why not, when !ok */
    long long stock, sold, ledger_rows;
    long long last_committed;    /* wsrep_last_committed at the read */
    char state[32];              /* wsrep_local_state_comment */
};

struct cluster_audit {
    int nnodes;
    struct cluster_node node[CLUSTER_NODES_MAX];
    int converged;               /* every answering node has the same stock,
                                  * sold and ledger rows of the SKU (each
                                  * read causal: wsrep_sync_wait) */
    double waited_s;             /* how long the audit waited for that */
};

/* Read `sku` on every node of `nodes` ("host:port,host:port,...", the
 * credentials and schema of `base`), again every 100 ms up to wait_ms
 * until the nodes agree on the SKU; each read runs with wsrep_sync_wait=1,
 * so it sees what the cluster committed before it (the nodes' own
 * wsrep_last_committed, which other SKUs' writes move, is only reported). A node that cannot be
 * reached is listed with ok 0 and does not count for `converged` (it is
 * out of the cluster). Returns the number of nodes parsed (0 when `nodes`
 * is empty: not a cluster), -1 when the list cannot be parsed. */
int cluster_audit_read(const struct db_conf *base, const char *nodes, const char *sku,
                       long wait_ms, struct cluster_audit *out);

#endif
