/* Guard `redis-stream` (write-behind, the seeds' kv + MQ scheme): one Lua
 * script refuses a repeated order_id, checks and decrements the Redis stock
 * and appends the sale to a Redis stream, atomically; the client is
 * answered as soon as Redis has it. No MySQL on the request path: a flusher
 * thread in every instance (stream_flusher.h) writes the stream to MySQL in
 * batches. Redis is the system of record until then, hence its append-only
 * file (deploy/local/stack). When Redis has lost the stock (no AOF, a
 * FLUSHALL), sales wait for a reconciliation (redis_reconcile.h). */
#include "guard.h"

#include "base/db.h"
#include "guards/core/redis_reconcile.h"
#include "guards/core/redis_shared.h"
#include "stock/keys.h"
#include "guards/core/stream_flusher.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define GUARD_NAME "redis-stream"

static struct sflush_conf conf;

static const struct cfg_opt options[] = {
    {"stream-batch", "LAB_STREAM_BATCH", CFG_INT, "500", 1, SFLUSH_BATCH_MAX,
     offsetof(struct sflush_conf, batch), 0,
     "redis-stream: sales per flush (one MySQL transaction)"},
    {"stream-block", "LAB_STREAM_BLOCK_MS", CFG_MS, "100", 1, 5000,
     offsetof(struct sflush_conf, block_ms), 0,
     "redis-stream: XREADGROUP BLOCK when the stream is empty"},
    {"stream-claim-idle", "LAB_STREAM_CLAIM_IDLE_MS", CFG_MS, "10s", 100, 600000,
     offsetof(struct sflush_conf, claim_idle_ms), 0,
     "redis-stream: a sale read by another flusher and not flushed for this long is "
     "taken over (XAUTOCLAIM: that instance died)"},
    {"stream-backoff-max", "LAB_STREAM_BACKOFF_MAX_MS", CFG_MS, "2s", 10, 60000,
     offsetof(struct sflush_conf, backoff_max_ms), 0,
     "redis-stream: longest wait between flush attempts while MySQL or Redis fail"},
    {"stream-hold", "LAB_STREAM_HOLD_MS", CFG_MS, "0", 0, 3600000,
     offsetof(struct sflush_conf, hold_ms), 0,
     "redis-stream, tests: hold each batch read this long before writing it to MySQL"},
    {"stream-flusher", "LAB_STREAM_FLUSHER", CFG_BOOL, "1", 0, 1,
     offsetof(struct sflush_conf, enabled), 0,
     "redis-stream: run a flusher in this instance (0: sales only queue here)"},
    {"stream-order-ttl", "LAB_STREAM_ORDER_TTL_MS", CFG_MS, "86400s", 1000, 604800000,
     offsetof(struct sflush_conf, order_ttl_ms), 0,
     "redis-stream: how long Redis remembers an order_id's sale (repeats answered)"},
};

/* KEYS[1] stock, [2] epoch, [3] order, [4] stream, [5] pending entries,
 * [6] pending units; ARGV[1] sku, [2] order_id, [3] qty, [4] instance,
 * [5] order ttl ms. Returns {left} sold; {-1, stock} not enough; {-2} the
 * stock is missing (Redis lost it); {-3, remaining, instance} a repeat of
 * the order's first sale; {-4, sku, qty} the order_id names another sale.
 * A remembered order of an older epoch (its SKU was reseeded since, which
 * wiped its ledger) does not count, as in MySQL. */
static struct rconn_script sale_script = RCONN_SCRIPT(
    "local q = tonumber(ARGV[3]) "
    "local ep = redis.call('GET', KEYS[2]) or '' "
    "local o = redis.call('GET', KEYS[3]) "
    "if o then "
    "  local oep, osku, oqty, orem, oinst = "
    "    string.match(o, '^(.-)\\n(.-)\\n(.-)\\n(.-)\\n(.*)$') "
    "  local cur = ep "
    "  if osku and osku ~= ARGV[1] then "
    "    cur = redis.call('GET', 'sstock:{' .. osku .. '}:epoch') or '' "
    "  end "
    "  if osku and oep == cur then "
    "    if osku ~= ARGV[1] or tonumber(oqty) ~= q then return {-4, osku, oqty} end "
    "    return {-3, orem, oinst} "
    "  end "
    "end "
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return {-2} end "
    "if tonumber(v) < q then return {-1, v} end "
    "local left = redis.call('DECRBY', KEYS[1], q) "
    "local t = redis.call('TIME') "
    "local ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) "
    "redis.call('XADD', KEYS[4], '*', 's', ARGV[1], 'o', ARGV[2], 'q', ARGV[3], "
    "  'r', left, 'i', ARGV[4], 'g', '" GUARD_NAME "', 't', ms) "
    "redis.call('SET', KEYS[3], ep .. '\\n' .. ARGV[1] .. '\\n' .. ARGV[3] .. '\\n' .. left "
    "  .. '\\n' .. ARGV[4], 'PX', ARGV[5]) "
    "redis.call('HINCRBY', KEYS[5], ARGV[1], 1) "
    "redis.call('HINCRBY', KEYS[6], ARGV[1], q) "
    "return {left}");

/* KEYS[1] stock, [2] epoch, [3] marker, [4] pending entries; ARGV[1] sku,
 * [2] stock, [3] a random token. Refuses (returns the count) while sales of
 * the SKU wait for MySQL: a reseed wipes the SKU's ledger, and a sale
 * flushed after it would land in the new stock. */
static struct rconn_script seed_script = RCONN_SCRIPT(
    "local p = tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0') "
    "if p > 0 then return p end "
    "local t = redis.call('TIME') "
    "redis.call('SET', KEYS[1], ARGV[2]) "
    "redis.call('SET', KEYS[2], 's' .. t[1] .. string.format('%06d', tonumber(t[2])) "
    "  .. '-' .. ARGV[3]) "
    "redis.call('DEL', KEYS[3]) "
    "return 0");

/* The shared Redis and the MySQL settings, received at init. */
static struct redis_shared *redis;
static const struct db_conf *db_conf;

static void rrec_keys(struct rrec *k, const char *sku)
{
    k->guard = GUARD_NAME;
    k->redis = redis;
    keys_sstock(k->state, sku);
    keys_sstock_epoch(k->epoch, sku);
    keys_sstock_reconcile(k->marker, sku);
}

static long long hash_num(const char *hash, const char *field, char *err, size_t errlen);

/* A reload after Redis lost the stock: MySQL's stock less the sales still
 * queued for it (none when the whole Redis was lost). */
static int fill_state(const char *sku, long long stock, int segments, struct rrec_state *s,
                      struct deduct_res *res)
{
    char err[128];
    long long queued = hash_num(KEYS_SALES_PENDING_UNITS, sku, err, sizeof(err));
    if (queued < 0) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "Redis unavailable: %.100s", err);
        return -1;
    }
    s->n = 1;
    keys_sstock(s->keys[0], sku);
    snprintf(s->vals[0], sizeof(s->vals[0]), "%lld", stock > queued ? stock - queued : 0);
    return 0;
}

/* The reply of the sale script into res. Returns 1 when Redis lost the
 * stock (-2), else 0. */
static int sale_reply(const redisReply *r, const struct deduct_req *req, struct deduct_res *res)
{
    long long code = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                     r->element[0]->type == REDIS_REPLY_INTEGER ? r->element[0]->integer
                                                                : -100;
    const redisReply *a = r->elements >= 2 ? r->element[1] : NULL;
    const redisReply *b = r->elements >= 3 ? r->element[2] : NULL;
    if (code >= 0) {
        res->outcome = DEDUCT_SOLD;
        res->remaining = code;
    } else if (code == -1) {
        res->outcome = DEDUCT_OUT_OF_STOCK;
        res->remaining = a && a->type == REDIS_REPLY_STRING ? atoll(a->str) : 0;
    } else if (code == -2) {
        return 1;
    } else if (code == -3 && a && b && a->type == REDIS_REPLY_STRING &&
               b->type == REDIS_REPLY_STRING) {
        res->outcome = DEDUCT_DUPLICATE;
        res->remaining = atoll(a->str);
        snprintf(res->instance, sizeof(res->instance), "%s", b->str);
    } else if (code == -4 && a && b && a->type == REDIS_REPLY_STRING &&
               b->type == REDIS_REPLY_STRING) {
        res->outcome = DEDUCT_ORDER_CONFLICT;
        snprintf(res->detail, sizeof(res->detail),
                 "order_id already names another sale (%s of %.64s)", b->str, a->str);
    } else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "unexpected reply from the sale script");
    }
    (void)req;
    return 0;
}

/* One run of the sale script. Returns 1 when Redis lost the stock, else 0
 * with res filled. */
static int sell(const struct deduct_env *env, const struct deduct_req *req,
                struct deduct_res *res)
{
    char stock[KEYS_MAX], epoch[KEYS_MAX], order[KEYS_MAX], qty[24], ttl[24];
    keys_sstock(stock, req->sku);
    keys_sstock_epoch(epoch, req->sku);
    keys_sorder(order, req->order_id);
    snprintf(qty, sizeof(qty), "%ld", req->qty);
    snprintf(ttl, sizeof(ttl), "%ld", conf.order_ttl_ms);
    const char *argv[11] = {stock, epoch, order, KEYS_SALES_STREAM, KEYS_SALES_PENDING,
                            KEYS_SALES_PENDING_UNITS, req->sku, req->order_id, qty,
                            env->instance, ttl};
    redisReply *r = rconn_eval(redis->pool, res->detail, sizeof(res->detail),
                               &sale_script, 6, 11, argv);
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return 0;
    }
    int lost = sale_reply(r, req, res);
    freeReplyObject(r);
    return lost;
}

static int stream_deduct(const struct guard *self, const struct deduct_env *env,
                         const struct deduct_req *req, struct deduct_res *res)
{
    if (!sell(env, req, res))
        return 0;
    /* Redis lost the stock: the reconciliation reads MySQL, with this
     * thread's own connection (the request path had none). */
    struct rrec k;
    rrec_keys(&k, req->sku);
    struct deduct_env e = *env;
    e.db = db_conf ? db_thread_conn(db_conf) : NULL;
    if (!e.db) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "no MySQL settings to reconcile with");
        return 0;
    }
    if (rrec_recover(&k, &e, req->sku, fill_state, res) == 0)
        return 0;
    if (!sell(env, req, res))
        return 0;
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail),
             "Redis lost the redis-stream stock of %.64s again; reconciling with MySQL",
             req->sku);
    return 0;
}

static int stream_seed(const struct guard *self, const struct deduct_env *env, const char *sku,
                       long long stock, int segments, struct deduct_res *res)
{
    struct rrec k;
    rrec_keys(&k, sku);
    char val[24], token[24];
    snprintf(val, sizeof(val), "%lld", stock);
    snprintf(token, sizeof(token), "%08lx", (unsigned long)random());
    const char *argv[7] = {k.state, k.epoch, k.marker, KEYS_SALES_PENDING, sku, val, token};
    redisReply *r = rconn_eval(redis->pool, res->detail, sizeof(res->detail),
                               &seed_script, 4, 7, argv);
    if (!r)
        return -1;
    long long busy = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    if (busy != 0) {
        snprintf(res->detail, sizeof(res->detail), busy > 0
                 ? "%lld sale(s) still queued for MySQL: retry once they are flushed"
                 : "unexpected reply from the seed script", busy);
        return -1;
    }
    return 0;
}

/* MySQL has the units back already (the ledger row was flushed). */
static int stream_release(const struct guard *self, const struct deduct_env *env,
                          const char *sku, long qty, struct deduct_res *res)
{
    struct rrec k;
    rrec_keys(&k, sku);
    return rrec_release(&k, k.state, NULL, 0, qty, res->detail, sizeof(res->detail)) < 0 ? -1
                                                                                           : 0;
}

/* HGET hash field as a number (0 when absent); -1 with err. */
static long long hash_num(const char *hash, const char *field, char *err, size_t errlen)
{
    const char *argv[3] = {"HGET", hash, field};
    redisReply *r = rconn_cmd_argv(redis->pool, err, errlen, 3, argv);
    if (!r)
        return -1;
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return v;
}

static int stream_pending(const struct guard *self, const char *sku, long long *entries,
                          long long *units)
{
    char err[128];
    *entries = hash_num(KEYS_SALES_PENDING, sku, err, sizeof(err));
    *units = *entries < 0 ? -1 : hash_num(KEYS_SALES_PENDING_UNITS, sku, err, sizeof(err));
    if (*entries < 0 || *units < 0) {
        *entries = *units = 0;
        return -1;
    }
    return 0;
}

/* KEYS[1] order, [2] pending entries; 1 when the order is a sale of its
 * SKU's current epoch and that SKU still has sales queued, else 0. (Which
 * entry is the order's would need a scan of the stream; while any sale of
 * the SKU is queued a release waits, which also covers it.) */
static struct rconn_script queued_script = RCONN_SCRIPT(
    "local o = redis.call('GET', KEYS[1]) "
    "if not o then return 0 end "
    "local oep, osku = string.match(o, '^(.-)\\n(.-)\\n') "
    "if not osku then return 0 end "
    "if (redis.call('GET', 'sstock:{' .. osku .. '}:epoch') or '') ~= oep then return 0 end "
    "if tonumber(redis.call('HGET', KEYS[2], osku) or '0') > 0 then return 1 end "
    "return 0");

static int stream_queued(const struct guard *self, const char *order_id)
{
    char key[KEYS_MAX], err[128];
    keys_sorder(key, order_id);
    const char *argv[2] = {key, KEYS_SALES_PENDING};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &queued_script, 2, 2,
                               argv);
    if (!r)
        return -1;
    int q = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return q;
}

static void add_fact(struct guard_facts *out, const char *name, long long v)
{
    if (out->n >= GUARD_FACTS_MAX)
        return;
    struct guard_fact *f = &out->fact[out->n++];
    f->name = name;
    f->is_list = 0;
    f->n = 1;
    f->values[0] = v;
}

/* The age of the stream's oldest entry (ms), 0 when empty, -1 with err.
 * Flushed entries are deleted, so the first one left is the oldest sale
 * not yet in MySQL. */
static long long oldest_age_ms(char *err, size_t errlen)
{
    const char *argv[6] = {"XRANGE", KEYS_SALES_STREAM, "-", "+", "COUNT", "1"};
    redisReply *r = rconn_cmd_argv(redis->pool, err, errlen, 6, argv);
    if (!r)
        return -1;
    long long age = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements >= 1 &&
        r->element[0]->element[0]->type == REDIS_REPLY_STRING) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        long long now = (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
        age = now - atoll(r->element[0]->element[0]->str);
        if (age < 0)
            age = 0;
    }
    freeReplyObject(r);
    return age;
}

static int stream_describe(const struct guard *self, const char *sku, struct guard_facts *out)
{
    struct rrec k;
    char err[128];
    long left;
    rrec_keys(&k, sku);
    int st = rrec_status(&k, &left, err, sizeof(err));
    if (st < 0)
        return -1;
    if (st == 0) {
        add_fact(out, "stream_stock_reconciling_ms", left);
    } else {
        const char *argv[2] = {"GET", k.state};
        redisReply *r = rconn_cmd_argv(redis->pool, err, sizeof(err), 2, argv);
        if (!r)
            return -1;
        if (r->type == REDIS_REPLY_STRING)
            add_fact(out, "stream_stock", atoll(r->str));
        freeReplyObject(r);
    }
    long long e, u;
    if (stream_pending(self, sku, &e, &u) != 0)
        return -1;
    add_fact(out, "stream_pending", e);
    add_fact(out, "stream_pending_units", u);
    long long age = oldest_age_ms(err, sizeof(err));
    if (age >= 0)
        add_fact(out, "stream_lag_ms", age);
    return 0;
}

static int stream_init(const struct guard *self, const struct guard_backends *b, char *err,
                       size_t errlen)
{
    redis = b->redis;
    db_conf = b->db;
    if (sflush_start(&conf, db_conf, redis->endpoint, b->instance, err, errlen) != 0) {
        redis = NULL;
        return -1;
    }
    return 0;
}

static void stream_fini(const struct guard *self)
{
    sflush_stop();
    redis = NULL;
}

const struct guard guard_redis_stream = {
    .name = GUARD_NAME,
    .how = "one Lua script checks, decrements and appends the sale to a Redis stream; "
           "a flusher writes MySQL in batches",
    .expect = "correct (MySQL behind by the unflushed tail)",
    .safe_across_instances = 1,
    .deduct = stream_deduct,
    .seed = stream_seed,
    .release = stream_release,
    .describe = stream_describe,
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .init = stream_init,
    .fini = stream_fini,
    .uses_redis = 1,
    .export_metrics = sflush_export_metrics,
    .no_mysql_deduct = 1,
    .pending = stream_pending,
    .queued = stream_queued,
};
