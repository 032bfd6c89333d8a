/* Guard `redis-decr`: no lock at all. One Lua script checks and decrements
 * the Redis stock atomically; the sale is then written to MySQL (stock and
 * ledger). If MySQL refuses, the units go back to Redis and the client gets
 * 503: nothing is lost and nothing is sold twice. */
#include "guard.h"

#include "rcache.h"
#include "store.h"
#include "util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* -2: key missing (Redis restarted), -1: not enough, else the new stock. */
static const char decr_lua[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return -2 end "
    "if tonumber(v) < tonumber(ARGV[1]) then return -1 end "
    "return redis.call('DECRBY', KEYS[1], ARGV[1])";

/* After a Redis restart the key is gone: load it from MySQL once (NX, so
 * concurrent loaders cannot add the stock twice). Returns 1 loaded or
 * already there, 0 unknown SKU, -1 failure (res filled). */
static int load_from_mysql(const struct guard_env *env, const char *sku,
                           struct deduct_res *res)
{
    long long stock, version;
    int found = store_read(env->db, sku, 0, &stock, &version);
    if (found < 0) {
        guard_db_failure(env->db, found, res);
        return -1;
    }
    if (found == 0)
        return 0;
    redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail),
                               "SET stock:{%s} %lld NX", sku, stock);
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return -1;
    }
    freeReplyObject(r);
    return 1;
}

static int redis_decr_deduct(const struct guard_env *env, const struct deduct_req *req,
                             struct deduct_res *res)
{
    long long left = -2;
    for (int attempt = 0; attempt < 2 && left == -2; attempt++) {
        redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail),
                                   "EVAL %s 1 stock:{%s} %ld", decr_lua, req->sku, req->qty);
        if (!r) {
            res->outcome = DEDUCT_UNAVAILABLE;
            return 0;
        }
        left = r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
        freeReplyObject(r);
        if (left == -2 && attempt == 0) {
            int rc = load_from_mysql(env, req->sku, res);
            if (rc <= 0) {
                if (rc == 0)
                    res->outcome = DEDUCT_UNKNOWN_SKU;
                return 0;
            }
        }
    }
    if (left < 0) {
        res->outcome = left == -1 ? DEDUCT_OUT_OF_STOCK : DEDUCT_INTERNAL;
        if (left != -1)
            snprintf(res->detail, sizeof(res->detail), "unexpected reply from the decrement script");
        return 0;
    }
    util_sleep_ms(req->hold_ms);   /* between the Redis sale and the MySQL write */
    if (guard_record_relative("redis-decr", env, req, res) != 0) {
        char err[128];
        redisReply *r = rcache_cmd(env, err, sizeof(err), "INCRBY stock:{%s} %ld",
                                   req->sku, req->qty);
        if (r)
            freeReplyObject(r);
        else    /* the units stay taken in Redis: an undersell, never an oversell */
            fprintf(stderr, "redis-decr: could not give %ld of %s back: %s\n", req->qty,
                    req->sku, err);
    }
    return 0;
}

static int redis_decr_seed(const struct guard_env *env, const char *sku, long long stock,
                           int segments, struct deduct_res *res)
{
    redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail), "SET stock:{%s} %lld",
                               sku, stock);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

static int redis_decr_release(const struct guard_env *env, const char *sku, long qty,
                              struct deduct_res *res)
{
    redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail),
                               "INCRBY stock:{%s} %ld", sku, qty);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

static int redis_decr_describe(const struct guard_env *env, const char *sku, void *out)
{
    char err[128];
    redisReply *r = rcache_cmd(env, err, sizeof(err), "GET stock:{%s}", sku);
    if (!r)
        return -1;
    if (r->type == REDIS_REPLY_STRING)
        json_object_set_new(out, "redis_stock", json_integer(atoll(r->str)));
    freeReplyObject(r);
    return 0;
}

const struct guard guard_redis_decr = {
    .name = "redis-decr",
    .how = "one Lua script checks and decrements stock in Redis; MySQL updated after",
    .expect = "correct",
    .safe_across_instances = 1,
    .deduct = redis_decr_deduct,
    .seed = redis_decr_seed,
    .release = redis_decr_release,
    .describe = redis_decr_describe,
};
