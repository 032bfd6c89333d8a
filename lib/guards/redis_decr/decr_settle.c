/* redis-decr's intents after the decision (see decr_settle.h). */
#include "guards/redis_decr/decr_settle.h"

#include "stock/keys.h"
#include "stock/store.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* KEYS[1] intents, [2] intent details, [3] the gone counter; ARGV[1]
 * nonce. */
static struct rconn_script clear_script = RCONN_SCRIPT(
    "redis.call('HDEL', KEYS[2], ARGV[1]) "
    "redis.call('INCR', KEYS[3]) "
    "return redis.call('ZREM', KEYS[1], ARGV[1])");

/* KEYS[1] stock, [2] epoch, [3] intents, [4] intent details, [5] the gone
 * counter; ARGV[1] nonce, [2] the sale's epoch, [3] qty. The sale will not be in MySQL:
 * its units go back into the state they came from, once -- whoever
 * removes the intent gives back (its own instance, or the settler of a
 * stale one). 1 given, 0 not needed (state lost or another epoch), -1
 * already settled. */
static struct rconn_script give_clear_script = RCONN_SCRIPT(
    "if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then return -1 end "
    "redis.call('HDEL', KEYS[4], ARGV[1]) "
    "redis.call('INCR', KEYS[5]) "
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
    "if (redis.call('GET', KEYS[2]) or '') ~= ARGV[2] then return 0 end "
    "redis.call('INCRBY', KEYS[1], ARGV[3]) "
    "return 1");

/* KEYS[1] settled list; ARGV[1] one settlement (JSON), [2] how many to
 * keep, [3] for how long (ms). */
static struct rconn_script record_script = RCONN_SCRIPT(
    "redis.call('LPUSH', KEYS[1], ARGV[1]) "
    "redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1) "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[3])");

/* KEYS[1] intents; ARGV[1] at most this many. The nonces of the intents
 * past their write deadline. */
static struct rconn_script stale_script = RCONN_SCRIPT(
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))");

/* Stale intents settled per call: more wait for the next audit or sale. */
#define SETTLE_MAX 64

void decr_intent_clear(struct redis_shared *redis, const struct decr_intent *in)
{
    char err[128];
    const char *argv[4] = {in->zset, in->hash, in->gone, in->nonce};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &clear_script, 3, 4, argv);
    freeReplyObject(r);
}

int decr_give_back(struct redis_shared *redis, const struct rrec *k,
                   const struct decr_intent *in, const char *epoch, long qty, const char *sku)
{
    char err[128], n[24];
    snprintf(n, sizeof(n), "%ld", qty);
    const char *argv[8] = {k->state, k->epoch, in->zset, in->hash, in->gone, in->nonce, epoch, n};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &give_clear_script, 5, 8,
                               argv);
    int given = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -2;
    if (!r)
        /* the units stay taken in Redis until the intent is settled as
         * stale: an undersell for a while, never an oversell */
        fprintf(stderr, "redis-decr: could not give %ld of %s back: %s\n", qty, sku, err);
    freeReplyObject(r);
    return given;
}

/* Did the sale `nonce` (of order_id `order`) reach MySQL? Asked with the
 * SKU's stock row locked: a group commit holds that lock from its stock
 * write to its COMMIT and checks its deadline under it (relative_batch.h),
 * so once the lock is ours, a sale past its deadline has either committed
 * (its row is read here) or never will, however long it waited on the
 * lock. The row must be its own: a row of the order written by another
 * sale (the first sale of a repeat) is not. 1 landed, 0 not, negative
 * DB_E*. Read only: rolled back. */
static int sale_landed(struct db_conn *db, const char *sku, const char *order, const char *nonce)
{
    long long stock = 0, seeds = 0, n;
    char intent[STOCK_INTENT_MAX + 1] = "", guard[40] = "";
    int rc = db_begin(db);
    if (rc == DB_OK)
        rc = store_read_seeds_locked(db, sku, &stock, &seeds);
    /* a plain read after the locking one: its snapshot starts now */
    n = rc <= 0 ? rc : store_ledger_intent_of(db, order, intent, sizeof(intent), guard,
                                              sizeof(guard));
    db_rollback(db);
    if (n <= 0)
        return (int)n;
    /* a row written before rows kept their intent id: its own, as before */
    return strcmp(intent, nonce) == 0 || (!intent[0] && strcmp(guard, "redis-decr") == 0);
}

/* One settlement into the SKU's settled list (best effort). */
static void record(struct redis_shared *redis, const char *sku, const char *nonce,
                   const char *order, long qty, const char *outcome, const char *by)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_int_t at = (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:I}", "intent", nonce, "order_id", order,
                          "qty", (json_int_t)qty, "outcome", outcome, "by", by, "at_ms", at);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return;
    char key[KEYS_MAX], keep[16], ttl[24], err[128];
    keys_stock_settled(key, sku);
    snprintf(keep, sizeof(keep), "%d", DECR_SETTLED_KEEP);
    snprintf(ttl, sizeof(ttl), "%ld", DECR_SETTLED_TTL_MS);
    const char *argv[4] = {key, text, keep, ttl};
    freeReplyObject(rconn_eval(redis->pool, err, sizeof(err), &record_script, 1, 4, argv));
    json_free_t free_fn;
    json_get_alloc_funcs(NULL, &free_fn);
    free_fn(text);
}

/* The intent's details ("order_id\nepoch\nqty"): 1 read, 0 gone or
 * malformed (nothing to give back), -1 Redis could not be read. */
static int intent_details(struct redis_shared *redis, const struct decr_intent *in,
                          char order[STOCK_ID_MAX + 1], char epoch[RREC_EPOCH_MAX], long *qty)
{
    char err[128];
    const char *argv[3] = {"HGET", in->hash, in->nonce};
    redisReply *r = rconn_cmd_argv(redis->pool, err, sizeof(err), 3, argv);
    if (!r)
        return -1;
    int have = 0;
    if (r->type == REDIS_REPLY_STRING) {
        const char *a = strchr(r->str, '\n'), *b = a ? strchr(a + 1, '\n') : NULL;
        if (a && b && (size_t)(a - r->str) <= STOCK_ID_MAX &&
            (size_t)(b - a - 1) < RREC_EPOCH_MAX) {
            memcpy(order, r->str, (size_t)(a - r->str));
            order[a - r->str] = '\0';
            memcpy(epoch, a + 1, (size_t)(b - a - 1));
            epoch[b - a - 1] = '\0';
            *qty = atol(b + 1);
            have = *qty > 0;
        }
    }
    freeReplyObject(r);
    return have;
}

void decr_settle_stale(struct redis_shared *redis, const struct rrec *k, struct db_conn *db,
                       const char *sku, const char *nonce, const char *by)
{
    struct decr_intent in;
    keys_stock_intents(in.zset, sku);
    keys_stock_intent(in.hash, sku);
    keys_stock_intents_gone(in.gone, sku);
    snprintf(in.nonce, sizeof(in.nonce), "%s", nonce);
    char order[STOCK_ID_MAX + 1] = "", epoch[RREC_EPOCH_MAX] = "";
    long qty = 0;
    int have = intent_details(redis, &in, order, epoch, &qty);
    if (have <= 0) {
        if (have == 0) {   /* details lost or malformed: nothing to give back */
            decr_intent_clear(redis, &in);
            record(redis, sku, nonce, order, 0, "no_details", by);
        }
        return;
    }
    int landed = db ? sale_landed(db, sku, order, nonce) : DB_EUNAVAIL;
    if (landed < 0)
        return;
    if (landed > 0) {
        decr_intent_clear(redis, &in);
        record(redis, sku, nonce, order, qty, "landed", by);
        return;
    }
    int given = decr_give_back(redis, k, &in, epoch, qty, sku);
    if (given == -2)
        return;
    record(redis, sku, nonce, order, qty,
           given == 1 ? "given_back" : given == 0 ? "not_needed" : "already_settled", by);
    if (given == 1)
        fprintf(stderr, "redis-decr: sale %s of %s (%ld) never reached MySQL: units given back\n",
                order, sku, qty);
}

int decr_settle_all(struct redis_shared *redis, const struct rrec *k, struct db_conn *db,
                    const char *sku, const char *by)
{
    char zset[KEYS_MAX], err[128], max[16];
    keys_stock_intents(zset, sku);
    snprintf(max, sizeof(max), "%d", SETTLE_MAX);
    const char *argv[2] = {zset, max};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &stale_script, 1, 2, argv);
    if (!r)
        return -1;
    int ok = r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING && r->element[i]->len < 96)
            decr_settle_stale(redis, k, db, sku, r->element[i]->str, by);
    freeReplyObject(r);
    return ok ? 0 : -1;
}

int decr_settled_json(struct redis_shared *redis, const char *sku, char *buf, size_t len)
{
    char key[KEYS_MAX], err[128];
    keys_stock_settled(key, sku);
    snprintf(buf, len, "[]");
    const char *argv[4] = {"LRANGE", key, "0", "-1"};
    redisReply *r = rconn_cmd_argv(redis->pool, err, sizeof(err), 4, argv);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        return -1;
    }
    /* newest first: what does not fit is the oldest, left out */
    size_t used = 0;
    if (len >= 3)
        buf[used++] = '[';
    for (size_t i = 0; used && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        /* room for a comma, the entry, the closing bracket and the NUL */
        if (e->type != REDIS_REPLY_STRING || used + 1 + e->len + 2 > len)
            break;
        if (i > 0)
            buf[used++] = ',';
        memcpy(buf + used, e->str, e->len);
        used += e->len;
    }
    if (used) {
        buf[used++] = ']';
        buf[used] = '\0';
    }
    freeReplyObject(r);
    return 0;
}
