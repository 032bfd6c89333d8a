/* Guard `redis-decr`: no lock at all. One Lua script checks and decrements
 * the Redis stock atomically; the sale is then written to MySQL (stock and
 * ledger). If MySQL refuses, the units go back to Redis (into the same
 * epoch only) and the client gets 503: nothing is lost and nothing is sold
 * twice. When Redis has lost the key, sales wait for a reconciliation
 * (redis_reconcile.h) instead of reloading MySQL at once. */
#include "guard.h"

#include "base/util.h"
#include "guards/core/redis_reconcile.h"
#include "guards/core/redis_shared.h"
#include "stock/keys.h"
#include "stock/txn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS[1] stock key, KEYS[2] its epoch; ARGV[1] qty. {-2}: key missing
 * (Redis lost it), {-1}: not enough, else {new stock, epoch}: the epoch the
 * sale was decided in, for a give-back (redis_reconcile.h). */
static struct rconn_script decr_script = RCONN_SCRIPT(
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return {-2} end "
    "if tonumber(v) < tonumber(ARGV[1]) then return {-1} end "
    "return {redis.call('DECRBY', KEYS[1], ARGV[1]), redis.call('GET', KEYS[2]) or ''}");

/* The shared Redis server, received at init. */
static struct redis_shared *redis;

static int decr_init(const struct guard *self, const struct guard_backends *b, char *err,
                      size_t errlen)
{
    redis = b->redis;
    return 0;
}

static void decr_fini(const struct guard *self)
{
    redis = NULL;
}

static void rrec_keys(struct rrec *k, const char *sku)
{
    k->guard = "redis-decr";
    k->redis = redis;
    keys_stock(k->state, sku);
    keys_stock_epoch(k->epoch, sku);
    keys_stock_reconcile(k->marker, sku);
}

static int fill_state(const char *sku, long long stock, int segments, struct rrec_state *s,
                      struct deduct_res *res)
{
    s->n = 1;
    keys_stock(s->keys[0], sku);
    snprintf(s->vals[0], sizeof(s->vals[0]), "%lld", stock);
    return 0;
}

/* One run of the decrement script: the new stock (>= 0), -1 not enough,
 * -2 key missing, -3 failure (res filled). *epoch receives the epoch. */
static long long decrement(const struct rrec *k, long qty, char epoch[RREC_EPOCH_MAX],
                           struct deduct_res *res)
{
    char n[24];
    snprintf(n, sizeof(n), "%ld", qty);
    const char *argv[3] = {k->state, k->epoch, n};
    redisReply *r = rconn_eval(redis->pool, res->detail, sizeof(res->detail),
                               &decr_script, 2, 3, argv);
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return -3;
    }
    long long left = -3;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER) {
        left = r->element[0]->integer;
        if (left >= 0 && r->elements == 2)
            rrec_epoch_copy(epoch, r->element[1]);
        else if (left >= 0 || left < -2)
            left = -3;
    }
    freeReplyObject(r);
    if (left == -3) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "unexpected reply from the decrement script");
    }
    return left;
}

/* The units of a sale that will not be recorded go back, into the state
 * they were taken from only. */
static void give_back(const struct rrec *k, const char *epoch, const struct deduct_req *req)
{
    char err[128];
    if (rrec_give_back(k, k->state, epoch, req->qty, err, sizeof(err)) < 0)
        /* the units stay taken in Redis: an undersell, never an oversell */
        fprintf(stderr, "redis-decr: could not give %ld of %s back: %s\n", req->qty, req->sku,
                err);
}

static int redis_decr_deduct(const struct guard *self, const struct deduct_env *env,
                             const struct deduct_req *req, struct deduct_res *res)
{
    struct rrec k;
    rrec_keys(&k, req->sku);
    char epoch[RREC_EPOCH_MAX] = "";
    long long left = -2;
    for (int attempt = 0; attempt < 2 && left == -2; attempt++) {
        left = decrement(&k, req->qty, epoch, res);
        if (left == -2 && attempt == 0 && rrec_recover(&k, env, req->sku, fill_state, res) == 0)
            return 0;
    }
    if (left == -2) {   /* lost again between the reload and our retry */
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail),
                 "Redis lost the redis-decr stock of %.64s again; reconciling with MySQL", req->sku);
        return 0;
    }
    if (left < 0) {
        if (left == -1)
            res->outcome = DEDUCT_OUT_OF_STOCK;
        return 0;
    }
    /* From the Redis decision on, the sale has hold_ms plus the margin to
     * reach MySQL, whatever lock_wait_ms (which this guard never waits)
     * added to the request's deadline: that bound is what
     * --redis-reload-wait must exceed. */
    struct deduct_req sale = *req;
    double cap = util_now() + (double)(req->hold_ms + REDIS_DECIDED_WRITE_MARGIN_MS) / 1000.0;
    if (sale.deadline <= 0 || sale.deadline > cap)
        sale.deadline = cap;
    req = &sale;
    util_sleep_ms(req->hold_ms);   /* between the Redis sale and the MySQL write */
    /* Past its deadline the caller has given up: writing now could also
     * land after a reconciliation already counted these units as unsold. */
    if (stock_past_deadline(req, res)) {
        give_back(&k, epoch, req);
        return 0;
    }
    /* Refused: the units go back into their epoch. Floor refusal or a
     * COMMIT with no known outcome: Redis is reconciled from MySQL instead,
     * so a unit is neither sold twice nor lost. */
    int rc = stock_record_relative(self->name, env, req, res);
    if (rc == STOCK_NOT_COMMITTED) {
        give_back(&k, epoch, req);
    } else if (rc == STOCK_DIVERGED || rc == STOCK_COMMIT_UNKNOWN) {
        char err[128];
        if (rrec_distrust(&k, epoch, NULL, 0, err, sizeof(err)) < 0)
            fprintf(stderr, "redis-decr: could not start reconciling %s: %s\n", req->sku, err);
    }
    return 0;
}

static int redis_decr_seed(const struct guard *self, const struct deduct_env *env,
                           const char *sku, long long stock, int segments,
                           struct deduct_res *res)
{
    struct rrec k;
    struct rrec_state s;
    rrec_keys(&k, sku);
    memset(&s, 0, sizeof(s));
    fill_state(sku, stock, segments, &s, res);
    return rrec_seed(&k, &s, res->detail, sizeof(res->detail));
}

/* MySQL has the units back already. A missing key is left missing: the
 * reconciliation reads MySQL and counts them. */
static int redis_decr_release(const struct guard *self, const struct deduct_env *env,
                              const char *sku, long qty, struct deduct_res *res)
{
    struct rrec k;
    rrec_keys(&k, sku);
    return rrec_release(&k, k.state, NULL, 0, qty, res->detail, sizeof(res->detail)) < 0 ? -1 : 0;
}

static int redis_decr_describe(const struct guard *self, const char *sku,
                               struct guard_facts *out)
{
    struct rrec k;
    char err[128];
    long left;
    rrec_keys(&k, sku);
    int st = rrec_status(&k, &left, err, sizeof(err));
    if (st < 0 || out->n >= GUARD_FACTS_MAX)
        return -1;
    struct guard_fact *f = &out->fact[out->n];
    f->is_list = 0;
    f->n = 1;
    if (st == 0) {   /* no number Redis does not have: when it will have one */
        f->name = "redis_stock_reconciling_ms";
        f->values[0] = left;
        out->n++;
        return 0;
    }
    const char *argv[2] = {"GET", k.state};
    redisReply *r = rconn_cmd_argv(redis->pool, err, sizeof(err), 2, argv);
    if (!r)
        return -1;
    if (r->type == REDIS_REPLY_STRING) {
        f->name = "redis_stock";
        f->values[0] = atoll(r->str);
        out->n++;
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
    .uses_redis = 1,
    .init = decr_init,
    .fini = decr_fini,
};
