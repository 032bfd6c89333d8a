/* redis-decr's decision in Redis (see decr_decide.h). */
#include "guards/redis_decr/decr_decide.h"

#include "guards/core/redis_shared.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS[1] stock key, [2] its epoch, [3] intents, [4] intent details, [5]
 * the MySQL seeds the stock was written from; ARGV[1] qty, [2] nonce, [3]
 * order_id, [4] ms the write may take. {-2}: key missing (Redis lost it,
 * or it is of an older generation: dropped, see RREC_LUA_GEN); {-1,
 * stale, stock}: not enough (stock: what is left); else {new stock, epoch, stale, seeds}: the epoch the
 * sale was decided in (for a give-back, redis_reconcile.h), the seeds its
 * MySQL write must still find ("" unknown: a state written before seeds
 * were kept), and the sale is recorded as an intent until its write is
 * known (settled by this instance, or after its deadline, when the
 * instance died, by the next sale or an audit). stale: the nonce of one
 * intent past its deadline, or "". */
static struct rconn_script decr_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return {-2} end "
    "local ep = redis.call('GET', KEYS[2]) or '' "
    "if not in_gen(ep) then "
    "  redis.call('DEL', KEYS[1]) return {-2} end "
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1) "
    "local stale = old[1] or '' "
    "if tonumber(v) < tonumber(ARGV[1]) then return {-1, stale, tonumber(v)} end "
    "local left = redis.call('DECRBY', KEYS[1], ARGV[1]) "
    "redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), ARGV[2]) "
    "redis.call('HSET', KEYS[4], ARGV[2], ARGV[3] .. '\\n' .. ep .. '\\n' .. ARGV[1]) "
    "return {left, ep, stale, redis.call('GET', KEYS[5]) or ''}");

/* decr_script for several sales of one SKU in one call (the sales of an
 * instance that reach Redis at the same time): KEYS as decr_script; ARGV
 * per sale: qty, nonce, order_id, ms the write may take. {-2} as
 * decr_script; else {epoch, stale, seeds, then per sale in order: its new
 * stock (>= 0), or not enough: -1 - the stock left then (< 0)}. Each sale
 * taken is an intent, as one alone. */
static struct rconn_script decide_many_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    "local g = redis.call('MGET', KEYS[1], KEYS[2], KEYS[5]) "
    "local v = g[1] "
    "if not v then return {-2} end "
    "local ep = g[2] or '' "
    "if not in_gen(ep) then "
    "  redis.call('DEL', KEYS[1]) return {-2} end "
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1) "
    "local out = {ep, old[1] or '', g[3] or ''} "
    "local left = tonumber(v) "
    "local z, h = {}, {} "
    "for i = 1, #ARGV, 4 do "
    "  local q = tonumber(ARGV[i]) "
    "  if left < q then out[#out + 1] = -1 - left else "
    "    left = left - q "
    "    out[#out + 1] = left "
    "    z[#z + 1] = now + tonumber(ARGV[i + 3]) "
    "    z[#z + 1] = ARGV[i + 1] "
    "    h[#h + 1] = ARGV[i + 1] "
    "    h[#h + 1] = ARGV[i + 2] .. '\\n' .. ep .. '\\n' .. ARGV[i] "
    "  end "
    "end "
    "if #z > 0 then "
    "  redis.call('DECRBY', KEYS[1], tonumber(v) - left) "
    "  redis.call('ZADD', KEYS[3], unpack(z)) "
    "  redis.call('HSET', KEYS[4], unpack(h)) "
    "end "
    "return out");

long long decr_decrement(struct redis_shared *redis, const struct rrec *k,
                         const struct decr_intent *in, const struct deduct_req *req,
                         long write_ms, int acks, long wait_ms,
                           char epoch[RREC_EPOCH_MAX], long long *seeds, char stale[96],
                           long long *acked, struct deduct_res *res)
{
    char n[24], ms[24], seeds_key[KEYS_MAX];
    snprintf(n, sizeof(n), "%ld", req->qty);
    snprintf(ms, sizeof(ms), "%ld", write_ms);
    keys_stock_seeds(seeds_key, req->sku);
    const char *argv[9] = {k->state, k->epoch, in->zset, in->hash, seeds_key, n, in->nonce,
                           req->order_id, ms};
    *seeds = -1;
    redisReply *r = redis_shared_eval_acked(redis, &decr_script, 5, 9, argv, acks, wait_ms, acked, res->detail,
                                            sizeof(res->detail));
    stale[0] = '\0';
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return -3;
    }
    long long left = -3;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER) {
        left = r->element[0]->integer;
        const redisReply *st = left >= 0 && r->elements == 4 ? r->element[2]
                               : left == -1 && r->elements == 3 ? r->element[1] : NULL;
        if (st && st->type == REDIS_REPLY_STRING)
            snprintf(stale, 96, "%s", st->str);
        if (left == -1 && r->elements == 3 && r->element[2]->type == REDIS_REPLY_INTEGER)
            res->remaining = r->element[2]->integer;   /* out_of_stock's "has N left" */
        if (left >= 0 && r->elements == 4) {
            rrec_epoch_copy(epoch, r->element[1]);
            const redisReply *sd = r->element[3];
            if (sd->type == REDIS_REPLY_STRING && sd->len > 0)
                *seeds = atoll(sd->str);
        } else if (left >= 0 || left < -2)
            left = -3;
    }
    freeReplyObject(r);
    if (left == -3) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "unexpected reply from the decrement script");
    }
    return left;
}


/* coal_run_fn: the decisions of members[] (one SKU) in one script call.
 * Only the first member is told of a stale intent (one settler). */
static void decide_many(struct coal_member *const *m, int n, void *ctx)
{
    struct redis_shared *redis = ctx;
    const struct decr_decision *d0 = m[0]->arg;
    const char *argv[5 + 4 * DECR_DECIDE_MAX];
    char qty[DECR_DECIDE_MAX][24], ms[DECR_DECIDE_MAX][24], seeds_key[KEYS_MAX], err[128];
    keys_stock_seeds(seeds_key, d0->req->sku);
    argv[0] = d0->k->state;
    argv[1] = d0->k->epoch;
    argv[2] = d0->in->zset;
    argv[3] = d0->in->hash;
    argv[4] = seeds_key;
    int argc = 5;
    for (int i = 0; i < n; i++) {
        struct decr_decision *d = m[i]->arg;
        snprintf(qty[i], sizeof(qty[i]), "%ld", d->req->qty);
        snprintf(ms[i], sizeof(ms[i]), "%ld", d->write_ms);
        argv[argc++] = qty[i];
        argv[argc++] = d->in->nonce;
        argv[argc++] = d->req->order_id;
        argv[argc++] = ms[i];
    }
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &decide_many_script, 5, argc,
                               argv);
    int missing = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
                  r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == -2;
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)(3 + n);
    for (int i = 0; ok && i < 3; i++)
        ok = r->element[i]->type == REDIS_REPLY_STRING;
    for (int i = 0; ok && i < n; i++)
        ok = r->element[3 + i]->type == REDIS_REPLY_INTEGER;
    for (int i = 0; i < n; i++) {
        struct decr_decision *d = m[i]->arg;
        d->seeds = -1;
        d->stale[0] = '\0';
        if (missing) {
            d->left = -2;
        } else if (!ok) {
            d->left = -3;
            d->res->outcome = r ? DEDUCT_INTERNAL : DEDUCT_UNAVAILABLE;
            snprintf(d->res->detail, sizeof(d->res->detail), "%s",
                     r ? "unexpected reply from the decrement script" : err);
        } else {
            d->left = r->element[3 + i]->integer;
            if (d->left < 0) {   /* not enough: out_of_stock's "has N left" */
                d->res->remaining = -1 - d->left;
                d->left = -1;
            }
            rrec_epoch_copy(d->epoch, r->element[0]);
            if (i == 0)
                snprintf(d->stale, sizeof(d->stale), "%.*s", (int)r->element[1]->len,
                         r->element[1]->str);
            if (r->element[2]->len > 0)
                d->seeds = atoll(r->element[2]->str);
        }
    }
    freeReplyObject(r);
}

static struct coalescer deciders = {.mu = PTHREAD_MUTEX_INITIALIZER, .max = DECR_DECIDE_MAX};

void decr_decide_many(struct redis_shared *redis, struct coal_member *const *m, int n)
{
    decide_many(m, n, redis);
}

long long decr_decide_grouped(struct redis_shared *redis, const struct rrec *k,
                              const struct decr_intent *in, const struct deduct_req *req,
                              long write_ms, int acks, long wait_ms,
                              char epoch[RREC_EPOCH_MAX], long long *seeds, char stale[96],
                              long long *acked, struct deduct_res *res)
{
    if (acks > 0)
        return decr_decrement(redis, k, in, req, write_ms, acks, wait_ms, epoch, seeds, stale,
                              acked, res);
    /* left stays -3 unless the call answers it: a sale that expired in
     * the queue (coal_submit answered it deadline_exceeded) took nothing */
    struct decr_decision d = {.k = k, .in = in, .req = req, .write_ms = write_ms,
                              .res = res, .left = -3, .seeds = -1};
    *acked = 0;
    coal_submit(&deciders, req->sku, req, res, &d, decide_many, redis);
    memcpy(epoch, d.epoch, RREC_EPOCH_MAX);
    memcpy(stale, d.stale, 96);
    *seeds = d.seeds;
    return d.left;
}

