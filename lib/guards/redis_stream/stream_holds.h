/* The redis-stream guard's holds (services/API.md, "Holds"): each step is
 * one Lua script deciding in Redis, as the guard's sales do. A hold is a
 * hash shold:<order_id> (sku, qty, user, deadline, state) and a member of
 * two sorted sets by deadline: the guard's (the sweeper's batch) and the
 * SKU's (the audit's and the reseed's); sheld:{sku} counts its units held.
 * A live hold's units are out of the Redis stock (physical expiry: the
 * sweeper script gives them back), still in MySQL's: the flusher writes a
 * confirmed hold as the sale it becomes. */
#ifndef LAB_STREAM_HOLDS_H
#define LAB_STREAM_HOLDS_H

#include "guards/core/hold_entry.h"

struct redis_shared;

/* r->nlines must be 1. 0 with a->result, or -1 with a->res (Redis). */
int shold_reserve(struct redis_shared *rs, const struct hold_reserve_req *r,
                  struct hold_answer *a);
/* A live hold becomes a sale (the stream entry, the order memory); a late
 * one sells fresh units if the stock has them, else HOLD_EXPIRED.
 * a->result HOLD_UNKNOWN_ORDER: no hold of this guard. */
int shold_confirm(struct redis_shared *rs, const char *order_id, const char *instance,
                  long order_ttl_ms, struct hold_answer *a);
/* Give a held hold's units back: HOLD_GIVEN_BACK, HOLD_NOT_HELD,
 * HOLD_UNKNOWN_ORDER; or -1 with a->res. */
int shold_release(struct redis_shared *rs, const char *order_id, long order_ttl_ms,
                  struct hold_answer *a);
/* Give back up to max holds past their deadline: how many, or -1. */
int shold_sweep(struct redis_shared *rs, int max, long order_ttl_ms);
/* Remove every hold of sku (a reseed): 0, or -1 with err. */
int shold_clear(struct redis_shared *rs, const char *sku, char *err, size_t errlen);

/* The guard's hooks (struct guard_mirror), on the Redis shold_bind gave
 * (the guard's init: its Redis and its order memory's ttl; NULL, 0 at
 * fini). */
void shold_bind(struct redis_shared *rs, long order_ttl_ms);
int shold_hook_reserve(const struct guard *self, const struct deduct_env *env,
                       const struct hold_reserve_req *r, struct hold_answer *a);
int shold_hook_confirm(const struct guard *self, const struct deduct_env *env,
                       const char *order_id, struct hold_answer *a);
int shold_hook_release(const struct guard *self, const struct deduct_env *env,
                       const char *order_id, struct hold_answer *a);
int shold_hook_sweep(const struct guard *self, int max);

#endif
