/* Guard `none`: the bare read-modify-write. Two requests that read the same
 * stock both write stock-1: a lost update, and past zero, an oversell. */
#include "guard.h"

#include "stock/txn.h"

static void none_deduct(const struct guard *self, const struct deduct_env *env,
                        const struct deduct_req *req, struct deduct_res *res)
{
    stock_rmw(self->name, env, req, res);
    stock_refused(env, req, res);
}

/* A cart: the same bare read-modify-write, every line in one transaction:
 * two carts on one SKU still race, as the guard means to show. */
static void none_cart(const struct guard *self, const struct deduct_env *env,
                      const struct cart *c, struct cart_res *res)
{
    stock_cart_sell(self->name, env, c, CART_STYLE_RMW, res);
}

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Reads the stock row, computes stock - qty in C, writes it back.",
    "Two requests that both read 800 both write 799: one sale is lost to the stock "
    "row.",
    NULL,
};
static const struct guard_doc doc = {
    .needs = "MySQL",
    .use_when = "never: the baseline that shows the race",
    .breaks = "any concurrency, even on one instance",
    .origin = "the seeds' \"item 799 sold twice\"",
    .steps = doc_steps,
    .statements = "SELECT stock FROM inventory WHERE sku=?\nUPDATE inventory SET stock=? WHERE "
        "sku=?\nINSERT INTO ledger ...",
    .code = __FILE__,
};

const struct guard guard_none = {
    .name = "none",
    .doc = &doc,
    .how = "read stock, compute in C, write it back (read-modify-write)",
    .expect = "oversells / loses updates",
    /* A repeated order id fails the ledger insert, or is found by the
     * refusal paths (stock_refused): no ledger read before every sale. */
    .flags = GUARD_OWN_IDEMPOTENCY,
    .deduct_cart = none_cart,
    .deduct = none_deduct,
};
