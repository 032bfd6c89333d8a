/* The redis-stream guard's holds (stream_holds.h): one script per step. */
#include "guards/redis_stream/stream_holds.h"

#include "guards/core/redis_reconcile.h"
#include "guards/core/redis_shared.h"
#include "locks/rconn.h"
#include "stock/keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_NAME "redis-stream"
#define SHOLDS_DUE "lab:sholds:due"

/* Lua: Redis's clock in ms; a hold's hash and SKU keys; give(h) puts a
 * held hold's units back (into the stock only while it is of the SKU's
 * current epoch: a reseed set a new stock) and takes it out of the sets. */
#define SHOLD_LUA_COMMON                                                           \
    "local function now_ms() local t = redis.call('TIME') "                        \
    "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end "       \
    "local function hold_of(oid) "                                                  \
    "  local v = redis.call('HMGET', 'shold:' .. oid, 's', 'q', 'u', 'd', 'st', 'ep', 'r', 'f') " \
    "  if not v[1] then return nil end "                                            \
    "  return {s = v[1], q = tonumber(v[2]), u = v[3], d = tonumber(v[4]), st = v[5], " \
    "    ep = v[6], r = v[7] or '0', f = v[8] or '0'} end "                         \
    "local function give(oid, h) "                                                  \
    "  local sk = 'sstock:{' .. h.s .. '}' "                                        \
    "  if (redis.call('GET', sk .. ':epoch') or '') == h.ep "                       \
    "     and redis.call('EXISTS', sk) == 1 then redis.call('INCRBY', sk, h.q) end " \
    "  redis.call('DECRBY', 'sheld:{' .. h.s .. '}', h.q) "                         \
    "  redis.call('ZREM', '" SHOLDS_DUE "', oid) "                                  \
    "  redis.call('ZREM', 'sholdsku:{' .. h.s .. '}', oid) end "                    \
    "local function settle(oid, st, keep) "                                         \
    "  redis.call('HSET', 'shold:' .. oid, 'st', st) "                              \
    "  redis.call('PEXPIRE', 'shold:' .. oid, keep) end "

/* KEYS[1] stock, [2] epoch, [3] hold, [4] order memory; ARGV[1] sku, [2]
 * order_id, [3] qty, [4] user, [5] ttl ms. {1, deadline} held; {2,
 * deadline, state, user} a repeat; {-1, stock}; {-2} no stock (missing or
 * of an older generation); {-4} the order_id has another hold or a sale;
 * {-6, limit} the SKU has a purchase limit. */
static struct rconn_script reserve_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    SHOLD_LUA_COMMON
    "local q = tonumber(ARGV[3]) "
    "local h = hold_of(ARGV[2]) "
    "if h then "
    "  if h.s == ARGV[1] and h.q == q then return {2, h.d, h.st, h.u} end "
    "  return {-4} end "
    "if redis.call('EXISTS', KEYS[4]) == 1 then return {-4} end "
    "local lim = redis.call('GET', 'slimit:{' .. ARGV[1] .. '}') "
    "if lim and tonumber(lim) > 0 then return {-6, tonumber(lim)} end "
    "local ep = redis.call('GET', KEYS[2]) or '' "
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return {-2} end "
    "if not in_gen(ep) then redis.call('DEL', KEYS[1]) return {-2} end "
    "if tonumber(v) < q then return {-1, tonumber(v)} end "
    "redis.call('DECRBY', KEYS[1], q) "
    "local d = now_ms() + tonumber(ARGV[5]) "
    "redis.call('HSET', KEYS[3], 's', ARGV[1], 'q', q, 'u', ARGV[4], 'd', d, 'st', 'held', "
    "  'ep', ep) "
    "redis.call('ZADD', '" SHOLDS_DUE "', d, ARGV[2]) "
    "redis.call('ZADD', 'sholdsku:{' .. ARGV[1] .. '}', d, ARGV[2]) "
    "redis.call('INCRBY', 'sheld:{' .. ARGV[1] .. '}', q) "
    "return {1, d}");

/* KEYS[1] stream, [2] pending entries, [3] pending units; ARGV[1]
 * order_id, [2] instance, [3] order ttl ms. Decided once: {0} no hold;
 * {1, remaining, fresh, sku, qty, deadline} sold now (live: its own units;
 * late: fresh ones); {3, remaining, fresh, sku, qty, deadline} confirmed
 * before; {4, sku, qty} released; {5, sku, qty, deadline} late and no
 * stock left (hold_expired). A sale is written exactly as the sale script
 * writes one: a stream entry for the flusher and the order's memory. */
static struct rconn_script confirm_script = RCONN_SCRIPT(
    SHOLD_LUA_COMMON
    "local h = hold_of(ARGV[1]) "
    "if not h then return {0} end "
    "if h.st == 'confirmed' then return {3, tonumber(h.r), tonumber(h.f), h.s, h.q, h.d} end "
    "if h.st == 'released' then return {4, h.s, h.q} end "
    "local sk = 'sstock:{' .. h.s .. '}' "
    "if (redis.call('GET', sk .. ':epoch') or '') ~= h.ep then return {0} end "
    "local now = now_ms() "
    "local fresh = 0 "
    "if h.st == 'held' and h.d > now then "
    "  redis.call('DECRBY', 'sheld:{' .. h.s .. '}', h.q) "
    "  redis.call('ZREM', '" SHOLDS_DUE "', ARGV[1]) "
    "  redis.call('ZREM', 'sholdsku:{' .. h.s .. '}', ARGV[1]) "
    "else "
    "  if h.st == 'held' then give(ARGV[1], h) settle(ARGV[1], 'expired', ARGV[3]) end "
    "  local v = tonumber(redis.call('GET', sk) or '-1') "
    "  if v < h.q then return {5, h.s, h.q, h.d} end "
    "  redis.call('DECRBY', sk, h.q) "
    "  fresh = 1 "
    "end "
    "local left = tonumber(redis.call('GET', sk) or '0') "
    "redis.call('XADD', KEYS[1], '*', 's', h.s, 'o', ARGV[1], 'q', h.q, 'r', left, "
    "  'i', ARGV[2], 'g', '" GUARD_NAME "', 't', string.format('%.0f', now)) "
    "redis.call('SET', 'sorder:' .. ARGV[1], h.ep .. '\\n' .. h.s .. '\\n' .. h.q .. '\\n' "
    "  .. left .. '\\n' .. ARGV[2], 'PX', ARGV[3]) "
    "redis.call('HINCRBY', KEYS[2], h.s, 1) "
    "redis.call('HINCRBY', KEYS[3], h.s, h.q) "
    "redis.call('HSET', 'shold:' .. ARGV[1], 'r', left, 'f', fresh) "
    "settle(ARGV[1], 'confirmed', ARGV[3]) "
    "return {1, left, fresh, h.s, h.q, h.d}");

/* ARGV[1] order_id, [2] order ttl ms. {0} no hold; {1, sku, qty} given
 * back; {2, sku, qty, state} not held (confirmed, released, expired). */
static struct rconn_script release_script = RCONN_SCRIPT(
    SHOLD_LUA_COMMON
    "local h = hold_of(ARGV[1]) "
    "if not h then return {0} end "
    "if h.st ~= 'held' then return {2, h.s, h.q, h.st} end "
    "give(ARGV[1], h) "
    "settle(ARGV[1], 'released', ARGV[2]) "
    "return {1, h.s, h.q}");

/* ARGV[1] most holds, [2] order ttl ms. The due holds of one bounded batch
 * (oldest deadline first) given back; returns how many. */
static struct rconn_script sweep_script = RCONN_SCRIPT(
    SHOLD_LUA_COMMON
    "local due = redis.call('ZRANGEBYSCORE', '" SHOLDS_DUE "', '-inf', now_ms(), "
    "  'LIMIT', 0, tonumber(ARGV[1])) "
    "local n = 0 "
    "for _, oid in ipairs(due) do "
    "  local h = hold_of(oid) "
    "  if h and h.st == 'held' then "
    "    give(oid, h) settle(oid, 'expired', ARGV[2]) n = n + 1 "
    "  else redis.call('ZREM', '" SHOLDS_DUE "', oid) end "
    "end "
    "return n");

/* ARGV[1] sku: every hold of it gone (a reseed set a new stock). */
static struct rconn_script clear_script = RCONN_SCRIPT(
    "local z = 'sholdsku:{' .. ARGV[1] .. '}' "
    "for _, oid in ipairs(redis.call('ZRANGE', z, 0, -1)) do "
    "  redis.call('DEL', 'shold:' .. oid) "
    "  redis.call('ZREM', '" SHOLDS_DUE "', oid) "
    "end "
    "redis.call('DEL', z, 'sheld:{' .. ARGV[1] .. '}') "
    "return 0");

static long long int_at(const redisReply *r, size_t i)
{
    if (i >= r->elements)
        return 0;
    const redisReply *e = r->element[i];
    return e->type == REDIS_REPLY_INTEGER ? e->integer
           : e->type == REDIS_REPLY_STRING ? atoll(e->str) : 0;
}

static void str_at(const redisReply *r, size_t i, char *out, size_t len)
{
    if (i < r->elements && r->element[i]->type == REDIS_REPLY_STRING)
        snprintf(out, len, "%s", r->element[i]->str);
}

static redisReply *run(struct redis_shared *rs, struct rconn_script *s, int nkeys, int nargs,
                       const char **argv, struct hold_answer *a)
{
    redisReply *r = rconn_eval(rs->pool, a->res.detail, sizeof(a->res.detail), s, nkeys,
                               nargs, argv);
    if (r && (r->type != REDIS_REPLY_ARRAY || r->elements < 1)) {
        snprintf(a->res.detail, sizeof(a->res.detail), "unexpected reply from a hold script");
        freeReplyObject(r);
        r = NULL;
    }
    if (!r)
        a->res.outcome = DEDUCT_UNAVAILABLE;
    return r;
}

static void fill_row(struct hold_row *h, const char *sku, long long qty, const char *state)
{
    snprintf(h->sku, sizeof(h->sku), "%s", sku);
    h->qty = qty;
    h->nlines = 1;
    snprintf(h->line[0].sku, sizeof(h->line[0].sku), "%s", sku);
    h->line[0].qty = qty;
    snprintf(h->state, sizeof(h->state), "%s", state);
    snprintf(h->guard, sizeof(h->guard), GUARD_NAME);
}

int shold_reserve(struct redis_shared *rs, const struct hold_reserve_req *r,
                  struct hold_answer *a)
{
    char stock[KEYS_MAX], epoch[KEYS_MAX], hold[KEYS_MAX], order[KEYS_MAX], qty[24], ttl[24];
    const char *sku = r->line[0].sku;
    keys_sstock(stock, sku);
    keys_sstock_epoch(epoch, sku);
    snprintf(hold, sizeof(hold), "shold:%s", r->order_id);
    keys_sorder(order, r->order_id);
    snprintf(qty, sizeof(qty), "%lld", r->line[0].qty);
    snprintf(ttl, sizeof(ttl), "%lld", r->ttl_ms);
    const char *argv[9] = {stock, epoch, hold, order, sku, r->order_id, qty,
                           r->user_id ? r->user_id : "", ttl};
    redisReply *rep = run(rs, &reserve_script, 4, 9, argv, a);
    if (!rep)
        return -1;
    long long code = int_at(rep, 0);
    fill_row(&a->h, sku, r->line[0].qty, "held");
    str_at(rep, 3, a->h.user_id, sizeof(a->h.user_id));
    if (code == 1 && r->user_id)
        snprintf(a->h.user_id, sizeof(a->h.user_id), "%s", r->user_id);
    str_at(rep, 2, a->h.state, sizeof(a->h.state));
    a->h.expires_at_ms = code > 0 ? int_at(rep, 1) : 0;
    a->left = code == -1 ? int_at(rep, 1) : code == -6 ? int_at(rep, 1) : 0;
    a->h.line[0].left = a->left;
    a->result = code == 1 ? HOLD_HELD : code == 2 ? HOLD_REPEAT : code == -1 ? HOLD_OUT_OF_STOCK
                : code == -2 ? HOLD_UNKNOWN_SKU : code == -6 ? HOLD_LIMIT_UNENFORCED
                : HOLD_CONFLICT;
    freeReplyObject(rep);
    return 0;
}

int shold_confirm(struct redis_shared *rs, const char *order_id, const char *instance,
                  long order_ttl_ms, struct hold_answer *a)
{
    char ttl[24], sku[STOCK_SKU_MAX + 1] = "";
    snprintf(ttl, sizeof(ttl), "%ld", order_ttl_ms);
    const char *argv[6] = {KEYS_SALES_STREAM, KEYS_SALES_PENDING, KEYS_SALES_PENDING_UNITS,
                           order_id, instance, ttl};
    redisReply *rep = run(rs, &confirm_script, 3, 6, argv, a);
    if (!rep)
        return -1;
    long long code = int_at(rep, 0);
    if (code == 1 || code == 3) {
        str_at(rep, 3, sku, sizeof(sku));
        fill_row(&a->h, sku, int_at(rep, 4), "confirmed");
        a->remaining = int_at(rep, 1);
        a->h.fresh = int_at(rep, 2);
        a->h.expires_at_ms = int_at(rep, 5);
        a->result = code == 1 ? (a->h.fresh ? HOLD_CONFIRMED_FRESH : HOLD_CONFIRMED)
                              : HOLD_CONFIRM_REPEAT;
    } else if (code == 4 || code == 5) {
        str_at(rep, 1, sku, sizeof(sku));
        fill_row(&a->h, sku, int_at(rep, 2), code == 4 ? "released" : "expired");
        a->result = code == 4 ? HOLD_NOT_HELD : HOLD_EXPIRED;
    } else {
        a->result = HOLD_UNKNOWN_ORDER;
    }
    freeReplyObject(rep);
    return 0;
}

int shold_release(struct redis_shared *rs, const char *order_id, long order_ttl_ms,
                  struct hold_answer *a)
{
    char ttl[24], sku[STOCK_SKU_MAX + 1] = "", state[16] = "released";
    snprintf(ttl, sizeof(ttl), "%ld", order_ttl_ms);
    const char *argv[2] = {order_id, ttl};
    redisReply *rep = run(rs, &release_script, 0, 2, argv, a);
    if (!rep)
        return -1;
    long long code = int_at(rep, 0);
    str_at(rep, 1, sku, sizeof(sku));
    str_at(rep, 3, state, sizeof(state));
    fill_row(&a->h, sku, int_at(rep, 2), state);
    a->result = code == 1 ? HOLD_GIVEN_BACK : code == 2 ? HOLD_NOT_HELD : HOLD_UNKNOWN_ORDER;
    freeReplyObject(rep);
    return 0;
}

int shold_sweep(struct redis_shared *rs, int max, long order_ttl_ms)
{
    char n[24], ttl[24], err[128];
    snprintf(n, sizeof(n), "%d", max);
    snprintf(ttl, sizeof(ttl), "%ld", order_ttl_ms);
    const char *argv[2] = {n, ttl};
    redisReply *rep = rconn_eval(rs->pool, err, sizeof(err), &sweep_script, 0, 2, argv);
    if (!rep)
        return -1;
    int swept = rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
    freeReplyObject(rep);
    return swept;
}

int shold_clear(struct redis_shared *rs, const char *sku, char *err, size_t errlen)
{
    const char *argv[1] = {sku};
    redisReply *rep = rconn_eval(rs->pool, err, errlen, &clear_script, 0, 1, argv);
    if (!rep)
        return -1;
    freeReplyObject(rep);
    return 0;
}

/* The guard's Redis and its order memory's ttl (stream_init binds them). */
static struct redis_shared *bound;
static long bound_ttl_ms;

void shold_bind(struct redis_shared *rs, long order_ttl_ms)
{
    bound = rs;
    bound_ttl_ms = order_ttl_ms;
}

/* Holds of its own (stream_holds.h). A purchase limit is enforced by the
 * sale script from the per-user counts MySQL writes behind; a hold would
 * have to count against it before that (in Redis, per user, given back by
 * the sweeper): not done, so a limited SKU is refused, never held around
 * its limit. A cart would need every line in one script: not done. */
int shold_hook_reserve(const struct guard *self, const struct deduct_env *env,
                       const struct hold_reserve_req *r, struct hold_answer *a)
{
    (void)self;
    (void)env;
    if (r->nlines != 1) {
        a->res.outcome = DEDUCT_BAD_REQUEST;
        snprintf(a->res.detail, sizeof(a->res.detail),
                 "redis-stream holds one SKU per order: a cart (\"lines\") is not reserved; "
                 "nothing was held");
        return -1;
    }
    return shold_reserve(bound, r, a);
}

int shold_hook_confirm(const struct guard *self, const struct deduct_env *env,
                       const char *order_id, struct hold_answer *a)
{
    (void)self;
    return shold_confirm(bound, order_id, env->instance, bound_ttl_ms, a);
}

int shold_hook_release(const struct guard *self, const struct deduct_env *env,
                       const char *order_id, struct hold_answer *a)
{
    (void)self;
    (void)env;
    return shold_release(bound, order_id, bound_ttl_ms, a);
}

int shold_hook_sweep(const struct guard *self, int max)
{
    (void)self;
    return bound ? shold_sweep(bound, max, bound_ttl_ms) : -1;
}
