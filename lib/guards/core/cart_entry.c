/* The guard layer's entry point for carts: the SKUs marked in flight, the
 * guard's cart sale, the metrics of one deduction. */
#include "guards/guard.h"

#include "base/db.h"
#include "base/metrics.h"
#include "stock/inflight.h"
#include "stock/txn.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char cart_names_buf[256];
static pthread_once_t cart_names_once = PTHREAD_ONCE_INIT;

static void build_cart_names(void)
{
    size_t n, off = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n && off < sizeof(cart_names_buf); i++)
        if (all[i]->deduct_cart)
            off += (size_t)snprintf(cart_names_buf + off, sizeof(cart_names_buf) - off, "%s%s",
                                    off ? ", " : "", all[i]->name);
}

const char *guard_cart_names(void)
{
    pthread_once(&cart_names_once, build_cart_names);
    return cart_names_buf;
}

/* Every SKU of c in flight (a reseed of one waits for the cart), in the
 * plan's sorted order; on a refusal what was entered is left again.
 * Returns the count entered (all of them), or -1 with res filled. */
static int cart_enter(const struct cart *c, struct cart_touch *t, int *nt, struct cart_res *res)
{
    struct cart plan = *c;
    plan.order = CART_ORDER_SORTED;
    *nt = cart_plan(&plan, t);
    for (int k = 0; k < *nt; k++) {
        int rc = inflight_enter(t[k].sku);
        if (rc == INFLIGHT_OK)
            continue;
        while (k-- > 0)
            inflight_leave(t[k].sku);
        res->base.outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->base.detail, sizeof(res->base.detail), "%s",
                 rc == INFLIGHT_BUSY ? "a SKU of the cart is being reseeded"
                                     : "too many SKUs in flight");
        return -1;
    }
    return *nt;
}

static void cart_metrics(const struct guard *g, const struct cart_res *res, long conflicts,
                         double started)
{
    char labels[96];
    snprintf(labels, sizeof(labels), "guard=\"%s\",outcome=\"%s\"", g->name,
             deduct_outcome_info(res->base.outcome)->name);
    metrics_add("lab_deductions_total", labels, 1);
    metrics_add("lab_cart_deductions_total", labels, 1);
    snprintf(labels, sizeof(labels), "guard=\"%s\"", g->name);
    if (res->base.retries)
        metrics_add("lab_retries_total", labels, res->base.retries);
    if (conflicts > 0)
        metrics_add("lab_db_conflicts_total", labels, conflicts);
    metrics_observe("lab_deduct_duration_seconds", labels, util_now() - started);
    if (res->base.lock_wait_s > 0)
        metrics_observe("lab_lock_wait_seconds", labels, res->base.lock_wait_s);
    if (res->base.outcome == DEDUCT_LOCK_TIMEOUT)
        metrics_add("lab_lock_timeouts_total", labels, 1);
}

int guard_deduct_cart(const struct guard *g, const struct deduct_env *env,
                      const struct cart *c, struct cart_res *res)
{
    double started = util_now();
    memset(res, 0, sizeof(*res));
    snprintf(res->base.guard, sizeof(res->base.guard), "%s", g->name);
    if (!g->deduct_cart) {     /* before env: the caller opened nothing */
        res->base.outcome = DEDUCT_BAD_REQUEST;
        /* the whole list fits: a client learns every guard it may use */
        if (snprintf(res->base.detail, sizeof(res->base.detail),
                     "%.20s sells no carts (\"lines\"); these do: %s", g->name,
                     guard_cart_names()) < 0)
            res->base.detail[0] = '\0';
        return 0;
    }
    snprintf(res->base.instance, sizeof(res->base.instance), "%s", env->instance);
    long conflicts_before = env->db->conflicts;
    int rc = db_set_lock_wait(env->db, c->req.lock_wait_ms);
    struct cart_touch t[CART_LINES_MAX];
    int nt = 0;
    if (rc < 0)
        stock_db_failure(env->db, rc, &res->base);
    else if (guard_limit_cart_gate(g, env, c, res) && cart_enter(c, t, &nt, res) >= 0) {
        g->deduct_cart(g, env, c, res);
        for (int k = nt; k-- > 0;)
            inflight_leave(t[k].sku);
    }
    cart_metrics(g, res, env->db->conflicts - conflicts_before, started);
    return 0;
}
