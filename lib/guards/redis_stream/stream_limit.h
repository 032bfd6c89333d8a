/* Purchase limits and the redis-stream guard: it sells without MySQL, so
 * the entry point cannot read a SKU's limit for it. Its seed (inside the
 * reseed's MySQL transaction) mirrors the limit into slimit:{sku}, and a
 * sale of a SKU with one is refused by the sale's own script: this guard
 * does not enforce limits, and never sells past one. */
#ifndef LAB_STREAM_LIMIT_H
#define LAB_STREAM_LIMIT_H

#include "guards/guard.h"

struct redis_shared;

/* res = the 400 of a sale of a SKU with `limit` (naming where to find the
 * guards that enforce limits). The sale scripts read the mirror
 * themselves (stream_scripts.c, STREAM_LUA_LIMIT) and answer {-6, limit}:
 * no Redis call of its own per sale. */
void slimit_refuse(long long limit, struct deduct_res *res);
/* The seed's mirror of sku's limit, read from env->db (the reseed's
 * transaction). 0, or -1 with res->detail. */
int slimit_seed(struct redis_shared *rs, const struct deduct_env *env, const char *sku,
                struct deduct_res *res);

#endif
