/* Purchase limits and the redis-stream guard: it sells without MySQL, so
 * the entry point cannot read a SKU's limit for it. Its seed (inside the
 * reseed's MySQL transaction) mirrors the limit into slimit:{sku}, and a
 * sale of a SKU with one is refused: this guard does not enforce limits,
 * and never sells past one. */
#ifndef LAB_STREAM_LIMIT_H
#define LAB_STREAM_LIMIT_H

#include "guards/guard.h"

struct redis_shared;

/* 1 when req's SKU has a limit (res filled: the 400 naming the guards
 * that enforce limits), 0 may sell. Redis unreachable: 0 (the sale's own
 * script fails then as well). */
int slimit_refused(struct redis_shared *rs, const struct deduct_req *req,
                   struct deduct_res *res);
/* The seed's mirror of sku's limit, read from env->db (the reseed's
 * transaction). 0, or -1 with res->detail. */
int slimit_seed(struct redis_shared *rs, const struct deduct_env *env, const char *sku,
                struct deduct_res *res);

#endif
