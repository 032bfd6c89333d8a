/* The audit on a Galera cluster (see cluster_audit.h). */
#include "cluster_audit.h"

#include "base/util.h"
#include "stock/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "host:port" -> conf; 0 when it parses. */
static int parse_addr(const char *s, size_t len, struct db_conf *conf)
{
    char buf[80];
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *colon = strrchr(buf, ':'), *end;
    if (!colon || colon == buf)
        return -1;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535)
        return -1;
    *colon = '\0';
    snprintf(conf->host, sizeof(conf->host), "%s", buf);
    conf->port = port;
    return 0;
}

/* One node's view of the SKU, on its own short-lived connection. */
static void read_node(struct db_conn *db, const char *sku, struct cluster_node *n)
{
    long long initial, found;
    n->ok = 0;
    /* wsrep_sync_wait=1: the read waits until this node applied every
     * write set the cluster had committed when it arrived. */
    if (store_cluster_causal_reads(db) != DB_OK ||
        (found = store_cluster_sku_view(db, sku, &n->stock, &n->sold, &n->ledger_rows,
                                        &initial)) < 0 ||
        store_cluster_last_committed(db, &n->last_committed) < 0 ||
        store_cluster_state(db, n->state, sizeof(n->state)) < 0) {
        snprintf(n->error, sizeof(n->error), "%.95s", db->errstr);
        return;
    }
    if (found == 0)
        n->stock = n->sold = n->ledger_rows = 0;   /* not there (yet) */
    n->ok = 1;
}

/* Every answering node agrees on the SKU: its stock, its unreleased units
 * and its ledger rows. Each read was causal (wsrep_sync_wait), so a node
 * behind on this SKU's write sets has caught up with them before it
 * answered. The cluster-wide wsrep_last_committed is not compared: writes
 * to OTHER SKUs keep it moving on every node at its own pace, and an idle,
 * consistent SKU would wait out the whole bound and be called diverged. */
static int all_agree(const struct cluster_audit *a)
{
    const struct cluster_node *first = NULL;
    for (int i = 0; i < a->nnodes; i++) {
        const struct cluster_node *n = &a->node[i];
        if (!n->ok)
            continue;
        if (!first) {
            first = n;
            continue;
        }
        if (n->stock != first->stock || n->sold != first->sold ||
            n->ledger_rows != first->ledger_rows)
            return 0;
    }
    return first != NULL;
}

int cluster_audit_read(const struct db_conf *base, const char *nodes, const char *sku,
                       long wait_ms, struct cluster_audit *out)
{
    memset(out, 0, sizeof(*out));
    struct db_conf conf[CLUSTER_NODES_MAX];
    for (const char *p = nodes; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len > 0) {
            if (out->nnodes == CLUSTER_NODES_MAX)
                return -1;
            conf[out->nnodes] = *base;
            if (parse_addr(p, len, &conf[out->nnodes]) != 0)
                return -1;
            snprintf(out->node[out->nnodes].addr, sizeof(out->node[0].addr), "%.*s",
                     (int)len, p);
            /* A paused node must not hold the audit: short timeouts. */
            conf[out->nnodes].timeout_ms = 1000;
            out->nnodes++;
        }
        p += len + (p[len] == ',');
    }
    if (out->nnodes == 0)
        return 0;
    struct db_conn *db[CLUSTER_NODES_MAX] = {0};
    for (int i = 0; i < out->nnodes; i++)
        db[i] = db_connect(&conf[i]);
    double t0 = util_now();
    /* Bounded: the SKU still being written (the nodes read it at slightly
     * different moments), a node that keeps falling behind or a real
     * divergence is reported as not converged once wait_ms has passed. */
    for (;;) {
        for (int i = 0; i < out->nnodes; i++) {
            if (db[i])
                read_node(db[i], sku, &out->node[i]);
            else
                snprintf(out->node[i].error, sizeof(out->node[i].error), "out of memory");
        }
        out->converged = all_agree(out);
        out->waited_s = util_now() - t0;
        if (out->converged || out->waited_s * 1000.0 >= (double)wait_ms)
            break;
        util_sleep_ms(100);
    }
    for (int i = 0; i < out->nnodes; i++)
        db_free(db[i]);
    return out->nnodes;
}
