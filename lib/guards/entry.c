/* The guard layer's entry points: deduct, seed, release, describe. Each is
 * the one route from a service into MySQL and the guards' side state. */
#include "guard.h"

#include "base/metrics.h"
#include "stock/store.h"
#include "stock/txn.h"

#include <stdio.h>
#include <string.h>

int guard_deduct(const struct guard *g, const struct deduct_env *env,
                 const struct deduct_req *req, struct deduct_res *res)
{
    memset(res, 0, sizeof(*res));
    snprintf(res->guard, sizeof(res->guard), "%s", g->name);
    snprintf(res->instance, sizeof(res->instance), "%s", env->instance);
    res->qty = req->qty;

    struct ledger_row row;
    int rc = store_ledger_get(env->db, req->order_id, 0, &row);
    if (rc < 0)
        stock_db_failure(env->db, rc, res);
    else if (rc == 1)
        stock_fill_duplicate(&row, res);
    else
        g->deduct(g, env, req, res);

    char labels[96];
    snprintf(labels, sizeof(labels), "guard=\"%s\",outcome=\"%s\"", g->name,
             deduct_outcome_info(res->outcome)->name);
    metrics_add("lab_deductions_total", labels, 1);
    snprintf(labels, sizeof(labels), "guard=\"%s\"", g->name);
    if (res->retries)
        metrics_add("lab_retries_total", labels, res->retries);
    if (res->lock_wait_s > 0)
        metrics_observe("lab_lock_wait_seconds", labels, res->lock_wait_s);
    if (res->outcome == DEDUCT_LOCK_TIMEOUT)
        metrics_add("lab_lock_timeouts_total", labels, 1);
    return 0;
}

int guard_seed(const struct deduct_env *env, const char *sku, long long stock,
               int segments, struct deduct_res *res)
{
    memset(res, 0, sizeof(*res));
    int rc = store_seed(env->db, sku, stock, segments);
    if (rc < 0) {
        stock_db_failure(env->db, rc, res);
        return -1;
    }
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        struct deduct_res r = {0};
        if (all[i]->seed && all[i]->seed(all[i], env, sku, stock, segments, &r) != 0) {
            res->outcome = DEDUCT_UNAVAILABLE;
            snprintf(res->detail, sizeof(res->detail), "seeding %s state: %.120s",
                     all[i]->name, r.detail);
            return -1;
        }
    }
    return 0;
}

int guard_release(const struct deduct_env *env, const char *order_id,
                  struct ledger_row *row, int *side_ok, struct deduct_res *res)
{
    memset(res, 0, sizeof(*res));
    *side_ok = 1;
    int rc = stock_release(env->db, order_id, row);
    if (rc < 0) {
        stock_db_failure(env->db, rc, res);
        return -1;
    }
    if (rc != STOCK_RELEASED)
        return rc;
    /* Side state (Redis stock) follows the guard that sold it, after the
     * commit: if its backend fails now the units stay missing there, an
     * undersell, never an oversell. */
    const struct guard *g = guard_find(row->guard);
    struct deduct_res r = {0};
    if (g && g->release && g->release(g, env, row->sku, (long)row->qty, &r) != 0) {
        *side_ok = 0;
        fprintf(stderr, "inventory %s: release of %s: %s stock not restored: %s\n",
                env->instance, order_id, row->guard, r.detail);
    }
    return rc;
}

void guard_describe(const char *sku, struct guard_facts *out)
{
    memset(out, 0, sizeof(*out));
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i]->describe)
            all[i]->describe(all[i], sku, out);   /* best effort: Redis may be down */
}
