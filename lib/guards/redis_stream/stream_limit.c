/* The redis-stream guard's mirror of purchase limits (stream_limit.h). */
#include "guards/redis_stream/stream_limit.h"

#include "base/db.h"
#include "guards/core/redis_shared.h"
#include "locks/rconn.h"
#include "stock/store.h"

#include <hiredis/hiredis.h>
#include <stdio.h>

#define GUARD_NAME "redis-stream"

void slimit_refuse(long long limit, struct deduct_res *res)
{
    /* The guards that do are listed by the registry, which lists this one:
     * pointing at GET /guards keeps this file out of that circle. */
    res->outcome = DEDUCT_BAD_REQUEST;
    snprintf(res->detail, sizeof(res->detail), GUARD_NAME " does not enforce limits (%lld "
             "per user here); GET /guards marks those that do (\"limits\": true), e.g. "
             "conditional-update", limit);
}

int slimit_seed(struct redis_shared *rs, const struct deduct_env *env, const char *sku,
                struct deduct_res *res)
{
    long long limit = 0;
    if (env->db && store_limit_of(env->db, sku, &limit) < 0) {
        snprintf(res->detail, sizeof(res->detail), "reading the purchase limit: %.100s",
                 env->db->errstr);
        return -1;
    }
    redisReply *r = limit > 0 ? rconn_cmd(rs->pool, res->detail, sizeof(res->detail),
                                          "SET slimit:{%s} %lld", sku, limit)
                              : rconn_cmd(rs->pool, res->detail, sizeof(res->detail),
                                          "DEL slimit:{%s}", sku);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    return ok ? 0 : -1;
}
