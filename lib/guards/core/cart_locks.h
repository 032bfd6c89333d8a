/* Carts under the lock guards: every SKU's lock taken one inside the other
 * (the guard's own `locked`, nested one level per SKU, as Redisson's
 * MultiLock takes its locks), the cart's transaction innermost. */
#ifndef LAB_CART_LOCKS_H
#define LAB_CART_LOCKS_H

#include "guards/guard.h"

/* Run work(ctx, env, base, res) while holding g's lock (g->locked) on every
 * SKU of t[0..nt-1], taken in that order, each wait bounded by what is
 * left of base->lock_wait_ms (one budget for all of them) and the
 * deadline; hold_ms is spent in equal parts after each lock is taken (the
 * per-item work done while holding the items). A lock not obtained
 * releases the ones taken (each level's `locked` unwinds) and work does
 * not run: -1 with res filled (lock_timeout, deadline_exceeded,
 * backend_unavailable as a single-SKU lock answers), its detail saying
 * how many of the locks were held. Returns work's value otherwise;
 * res->lock_wait_s is the sum of the waits. */
int guard_locked_each(const struct guard *g, const struct deduct_env *env,
                      const struct deduct_req *base, const struct cart_touch *t, int nt,
                      long hold_ms, guard_work_fn work, void *ctx, struct deduct_res *res);

/* The deduct_cart of a lock guard: c's SKUs locked in sorted order (in
 * the cart's order with lock_order "as-given": crossed carts then wait on
 * each other until lock_wait_ms), then every line sold in one MySQL
 * transaction (stock_cart_sell, the read-modify-write the single-SKU lock
 * path does) while all are held. "fencing" is refused (400): a token per
 * lock, but several rows to fence. Fills res. */
void guard_lock_cart(const struct guard *g, const struct deduct_env *env, const struct cart *c,
                     struct cart_res *res);

#endif
