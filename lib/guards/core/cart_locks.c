/* Carts under the lock guards (see cart_locks.h): one nested `locked` per
 * SKU, so each guard's own lock (Redis, Redlock, lock row, ZooKeeper,
 * etcd) is taken and released exactly as for one SKU. */
#include "guards/core/cart_locks.h"

#include "base/util.h"
#include "guards/core/lock_fields.h"
#include "stock/cart.h"

#include <stdio.h>
#include <string.h>

struct nest {
    const struct guard *g;
    const struct deduct_req *base;
    const struct cart_touch *t;
    int nt;
    int level;                 /* the next lock to take */
    long hold_share_ms;
    double wait_until;         /* the one lock_wait_ms budget of them all */
    double waited;             /* the waits of the levels taken */
    guard_work_fn work;
    void *ctx;
};

static int nest_level(struct nest *n, const struct deduct_env *env, struct deduct_res *res);

/* Run by level k's `locked` once lock k is held: the next level. */
static int nest_work(void *ctx, const struct deduct_env *env, const struct deduct_req *req,
                     struct deduct_res *res)
{
    struct nest *n = ctx;
    n->waited += res->lock_wait_s;
    res->lock_wait_s = 0;
    n->level++;
    util_sleep_ms(n->hold_share_ms);
    return nest_level(n, env, res);
}

static int nest_level(struct nest *n, const struct deduct_env *env, struct deduct_res *res)
{
    if (n->level == n->nt)
        return n->work(n->ctx, env, n->base, res);
    long left_ms = (long)((n->wait_until - util_now()) * 1000.0);
    if (left_ms <= 0) {
        res->outcome = DEDUCT_LOCK_TIMEOUT;
        snprintf(res->detail, sizeof(res->detail), "lock wait of %ld ms spent",
                 n->base->lock_wait_ms);
        return -1;
    }
    struct deduct_req r = *n->base;
    snprintf(r.sku, sizeof(r.sku), "%s", n->t[n->level].sku);
    r.qty = (long)n->t[n->level].qty;
    r.lock_wait_ms = left_ms;
    r.hold_ms = 0;
    return n->g->locked(n->g, env, &r, nest_work, n, res);
}

int guard_locked_each(const struct guard *g, const struct deduct_env *env,
                      const struct deduct_req *base, const struct cart_touch *t, int nt,
                      long hold_ms, guard_work_fn work, void *ctx, struct deduct_res *res)
{
    struct nest n = {g, base, t, nt, 0, nt ? hold_ms / nt : 0,
                     util_now() + (double)base->lock_wait_ms / 1000.0, 0, work, ctx};
    res->lock_wait_s = 0;
    int rc = nest_level(&n, env, res);
    res->lock_wait_s += n.waited;
    if (rc != 0 && n.level < nt && nt > 1) {   /* one lock: its own words */
        char why[sizeof(res->detail)];
        snprintf(why, sizeof(why), "%s", res->detail);
        /* a long reason is cut: its start says what failed */
        if (snprintf(res->detail, sizeof(res->detail),
                     "%d of the cart's %d locks held, the next (%.40s) not: %.100s; "
                     "nothing was sold", n.level, nt, t[n.level].sku, why) < 0)
            res->detail[0] = '\0';
    }
    return rc;
}

struct cart_work {
    const struct guard *g;
    const struct cart *c;
    struct cart_res *res;
};

/* Innermost: every lock held, the cart's transaction. */
static int cart_sell_work(void *ctx, const struct deduct_env *env, const struct deduct_req *req,
                          struct deduct_res *res)
{
    struct cart_work *w = ctx;
    struct cart held = *w->c;
    held.req.hold_ms = 0;      /* spent while the locks were taken */
    stock_cart_sell(w->g->name, env, &held, CART_STYLE_RMW, w->res);
    return 0;
}

void guard_lock_cart(const struct guard *g, const struct deduct_env *env, const struct cart *c,
                     struct cart_res *res)
{
    if (lock_opts_of(&c->req)->fencing) {
        res->base.outcome = DEDUCT_BAD_REQUEST;
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "fencing is not offered for carts (one token per lock, several rows)");
        return;
    }
    struct cart_touch t[CART_LINES_MAX];
    int nt = cart_plan(c, t);  /* sorted, or as given */
    struct cart_work w = {g, c, res};
    /* -1: res says why (lock_timeout, ...); nothing was sold */
    guard_locked_each(g, env, &c->req, t, nt, c->req.hold_ms, cart_sell_work, &w, &res->base);
}
