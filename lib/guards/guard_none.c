/* Guard `none`: the bare read-modify-write. Two requests that read the same
 * stock both write stock-1: a lost update, and past zero, an oversell. */
#include "guard.h"

#include "stock/txn.h"

static int none_deduct(const struct guard *self, const struct deduct_env *env, const struct deduct_req *req,
                       struct deduct_res *res)
{
    stock_rmw(self->name, env, req, res);
    stock_refused(env, req, res);
    return 0;
}

/* A cart: the same bare read-modify-write, every line in one transaction:
 * two carts on one SKU still race, as the guard means to show. */
static int none_cart(const struct guard *self, const struct deduct_env *env,
                     const struct cart *c, struct cart_res *res)
{
    return stock_cart_sell(self->name, env, c, CART_STYLE_RMW, res);
}

const struct guard guard_none = {
    .name = "none",
    .how = "read stock, compute in C, write it back (read-modify-write)",
    .expect = "oversells / loses updates",
    .safe_across_instances = 0,
    /* A repeated order id fails the ledger insert, or is found by the
     * refusal paths (stock_refused): no ledger read before every sale. */
    .own_idempotency = 1,
    .deduct_cart = none_cart,
    .deduct = none_deduct,
};
