/* Purchase limits at the guard layer's entry: the SKU's limit read once
 * per sale, the sales no guard may make refused before the guard runs.
 * The count itself moves inside the guard's transaction (stock/limits.h). */
#include "guards/guard.h"

#include "base/db.h"
#include "stock/limits.h"
#include "stock/store.h"
#include "stock/txn.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char limit_names_buf[256];
static pthread_once_t limit_names_once = PTHREAD_ONCE_INIT;

static void build_limit_names(void)
{
    size_t n, off = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n && off < sizeof(limit_names_buf); i++)
        if (!guard_has(all[i], GUARD_NO_PURCHASE_LIMITS))
            off += (size_t)snprintf(limit_names_buf + off, sizeof(limit_names_buf) - off,
                                    "%s%s", off ? ", " : "", all[i]->name);
}

const char *guard_limit_names(void)
{
    pthread_once(&limit_names_once, build_limit_names);
    return limit_names_buf;
}

void guard_limit_refuse(const char *guard, long long limit, struct deduct_res *res)
{
    char text[512];
    res->outcome = DEDUCT_BAD_REQUEST;
    snprintf(text, sizeof(text), "%.20s enforces no limits (%lld/user); these "
             "do: %s", guard, limit, guard_limit_names());
    /* cut to the detail's room (the list is what may not fit) */
    size_t n = strlen(text) < sizeof(res->detail) - 1 ? strlen(text) : sizeof(res->detail) - 1;
    memcpy(res->detail, text, n);
    res->detail[n] = '\0';
}

/* A limited SKU under a guard that does not enforce limits. */
static int limit_unsupported(const struct guard *g, const struct deduct_req *r,
                             struct deduct_res *res)
{
    guard_limit_refuse(g->name, r->limit, res);
    return 0;
}

int guard_limit_gate(const struct guard *g, const struct deduct_env *env,
                     const struct deduct_req *req, struct deduct_req *r,
                     struct deduct_res *res)
{
    *r = *req;
    r->limit = 0;
    /* A write-behind guard sells without MySQL: it learns a SKU's limit
     * from its own mirror of it (redis-stream's stream_limit.c) and
     * refuses the sale there. A guard that enforces limits atomically
     * learns the limit from its own read or write of the row, inside the
     * sale (stock_limit_charge): no statement here, so an unlimited SKU
     * runs exactly the statements it ran before limits existed. */
    if (!env->db || guard_has(g, GUARD_NO_MYSQL_DEDUCT) ||
        guard_has(g, GUARD_LIMITS_IN_DEDUCT) ||
        (!guard_has(g, GUARD_NO_PURCHASE_LIMITS) && !req->limit_separate))
        return 1;
    int rc = store_limit_of(env->db, req->sku, &r->limit);
    if (rc < 0) {
        stock_db_failure(env->db, rc, res);
        return 0;
    }
    if (rc == 0 || r->limit <= 0)
        return 1;
    if (guard_has(g, GUARD_NO_PURCHASE_LIMITS))
        return limit_unsupported(g, r, res);
    if (!r->user_id[0]) {
        stock_limit_no_user(r->limit, res);
        return 0;
    }
    /* limit_check "separate" (the field's defect): the check apart. */
    rc = stock_limit_precheck(env, r, res);
    if (rc < 0)
        stock_db_failure(env->db, rc, res);
    struct ledger_row row;   /* refused: a repeat of a recorded sale is answered as one */
    if (rc == 0 && r->order_id[0] && store_ledger_get(env->db, r->order_id, 0, &row) == 1)
        stock_answer_repeat(env, &row, r, res);
    return rc > 0;
}

int guard_limit_cart_gate(const struct guard *g, const struct deduct_env *env,
                          const struct cart *c, struct cart_res *res)
{
    /* The guards that enforce limits count each line in the cart's own
     * transaction (stock/cart_txn.c); the others must not sell a limited
     * line at all. */
    if (!guard_has(g, GUARD_NO_PURCHASE_LIMITS))
        return 1;
    if (!env->db) {            /* fail closed: a limit that cannot be read */
        res->base.outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "MySQL unavailable: the cart's purchase limits cannot be read; nothing sold");
        return 0;
    }
    for (int i = 0; i < c->nlines; i++) {
        long long limit = 0;
        int rc = store_limit_of(env->db, c->line[i].sku, &limit);
        if (rc < 0) {
            stock_db_failure(env->db, rc, &res->base);
            return 0;
        }
        if (rc == 1 && limit > 0) {
            guard_limit_refuse(g->name, limit, &res->base);
            return 0;
        }
    }
    return 1;
}
