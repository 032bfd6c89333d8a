/* Guard `redis-decr`: no lock at all. One Lua script checks and decrements
 * the Redis stock atomically; the sale is then written to MySQL (stock and
 * ledger). If MySQL refuses, the units go back to Redis and the client gets
 * 503: nothing is lost and nothing is sold twice. */
#include "guard.h"

#include "base/util.h"
#include "redis_shared.h"
#include "stock/keys.h"
#include "stock/txn.h"

#include <stdio.h>
#include <stdlib.h>

/* KEYS[1] stock key, ARGV[1] qty. -2: key missing (Redis restarted),
 * -1: not enough, else the new stock. */
static struct rconn_script decr_script = RCONN_SCRIPT(
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return -2 end "
    "if tonumber(v) < tonumber(ARGV[1]) then return -1 end "
    "return redis.call('DECRBY', KEYS[1], ARGV[1])");

/* One command on the shared pool: SET/INCRBY key n [NX]. */
static redisReply *key_cmd(const char *cmd, const char *key, long long n, const char *flag,
                           char *err, size_t errlen)
{
    char num[24];
    snprintf(num, sizeof(num), "%lld", n);
    const char *argv[4] = {cmd, key, num, flag};
    return rconn_cmd_argv(redis_shared_pool(), err, errlen, flag ? 4 : 3, argv);
}

/* After a Redis restart the key is gone: load it from MySQL once (NX, so
 * concurrent loaders cannot add the stock twice). Returns 1 loaded or
 * already there, 0 unknown SKU, -1 failure (res filled). */
static int load_from_mysql(const struct deduct_env *env, const char *sku, const char *key,
                           struct deduct_res *res)
{
    long long stock, version;
    int found = store_read(env->db, sku, 0, &stock, &version);
    if (found < 0) {
        stock_db_failure(env->db, found, res);
        return -1;
    }
    if (found == 0)
        return 0;
    redisReply *r = key_cmd("SET", key, stock, "NX", res->detail, sizeof(res->detail));
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return -1;
    }
    freeReplyObject(r);
    return 1;
}

static int redis_decr_deduct(const struct guard *self, const struct deduct_env *env,
                             const struct deduct_req *req, struct deduct_res *res)
{
    char key[KEYS_MAX], qty[24];
    keys_stock(key, req->sku);
    snprintf(qty, sizeof(qty), "%ld", req->qty);
    const char *argv[2] = {key, qty};
    long long left = -2;
    for (int attempt = 0; attempt < 2 && left == -2; attempt++) {
        redisReply *r = rconn_eval(redis_shared_pool(), res->detail, sizeof(res->detail),
                                   &decr_script, 1, 2, argv);
        if (!r) {
            res->outcome = DEDUCT_UNAVAILABLE;
            return 0;
        }
        left = r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
        freeReplyObject(r);
        if (left == -2 && attempt == 0) {
            int rc = load_from_mysql(env, req->sku, key, res);
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
    if (stock_record_relative(self->name, env, req, res) == STOCK_NOT_COMMITTED) {
        char err[128];
        redisReply *r = key_cmd("INCRBY", key, req->qty, NULL, err, sizeof(err));
        if (r)
            freeReplyObject(r);
        else    /* the units stay taken in Redis: an undersell, never an oversell */
            fprintf(stderr, "redis-decr: could not give %ld of %s back: %s\n", req->qty,
                    req->sku, err);
    }
    return 0;
}

/* SET or INCRBY the SKU's stock counter. Returns 0, or -1 with err. */
static int stock_key_cmd(const char *cmd, const char *sku, long long n, char *err,
                         size_t errlen)
{
    char key[KEYS_MAX];
    keys_stock(key, sku);
    redisReply *r = key_cmd(cmd, key, n, NULL, err, errlen);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

static int redis_decr_seed(const struct guard *self, const struct deduct_env *env,
                           const char *sku, long long stock, int segments,
                           struct deduct_res *res)
{
    return stock_key_cmd("SET", sku, stock, res->detail, sizeof(res->detail));
}

static int redis_decr_release(const struct guard *self, const struct deduct_env *env,
                              const char *sku, long qty, struct deduct_res *res)
{
    return stock_key_cmd("INCRBY", sku, qty, res->detail, sizeof(res->detail));
}

static int redis_decr_describe(const struct guard *self, const char *sku,
                               struct guard_facts *out)
{
    char key[KEYS_MAX], err[128];
    keys_stock(key, sku);
    const char *argv[2] = {"GET", key};
    redisReply *r = rconn_cmd_argv(redis_shared_pool(), err, sizeof(err), 2, argv);
    if (!r)
        return -1;
    if (r->type == REDIS_REPLY_STRING && out->n < GUARD_FACTS_MAX) {
        struct guard_fact *f = &out->fact[out->n++];
        f->name = "redis_stock";
        f->is_list = 0;
        f->n = 1;
        f->values[0] = atoll(r->str);
    }
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
    REDIS_SHARED_GUARD_FIELDS,
};
