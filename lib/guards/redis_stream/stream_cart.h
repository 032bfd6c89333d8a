/* Carts under redis-stream (see stream_cart.c): every line decided by one
 * script call, one stream entry carrying every line. */
#ifndef LAB_STREAM_CART_H
#define LAB_STREAM_CART_H

#include "stock/cart.h"

struct redis_shared;
struct deduct_env;

/* What comes before the script: replicas_ack (one WAIT and undo per cart
 * are not built) and line_check "per-line" (the script always sums) are a
 * 400; a repeat Redis cannot know (sold under another guard, or forgotten
 * after --stream-order-ttl) is answered from the ledger (env->db), as the
 * MySQL guards' carts are. Returns 1 with res filled (answered), 0 when
 * the cart goes to the script. */
int scart_check(const struct deduct_env *env, const struct cart *c, struct cart_res *res);

/* Sell cart c (its lines summed per SKU, every SKU checked, then all
 * decremented or none) in one stream_cart_script call on redis, the order
 * remembered order_ttl_ms. Fills res (SOLD, DUPLICATE, ORDER_CONFLICT,
 * OUT_OF_STOCK with every short SKU, or UNAVAILABLE) and returns 0; returns
 * 1 with lost_sku (STOCK_SKU_MAX + 1 bytes) naming a SKU whose stock Redis
 * lost: nothing taken, reconcile that SKU and ask again. */
int scart_sell(struct redis_shared *redis, long order_ttl_ms, const struct deduct_env *env,
               const struct cart *c, struct cart_res *res, char *lost_sku);

#endif
