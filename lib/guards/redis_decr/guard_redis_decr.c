/* Guard `redis-decr`: no lock at all. One Lua script checks and decrements
 * the Redis stock atomically; the sale is then written to MySQL (stock and
 * ledger). If MySQL refuses, the units go back to Redis (into the same
 * epoch only) and the client gets 503: nothing is lost and nothing is sold
 * twice. When Redis has lost the key, sales wait for a reconciliation
 * (redis_reconcile.h) instead of reloading MySQL at once. */
#include "guards/guard.h"

#include "base/db.h"
#include "base/util.h"
#include "guards/redis_decr/decr_decide.h"
#include "guards/redis_decr/decr_group.h"
#include "guards/redis_decr/decr_settle.h"
#include "guards/core/coalesce.h"
#include "guards/core/lock_fields.h"
#include "guards/core/redis_reconcile.h"
#include "guards/core/redis_shared.h"
#include "stock/keys.h"
#include "stock/store.h"
#include "stock/txn.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* KEYS[1] intents, [2] intent details, [3] the gone counter; ARGV the
 * nonces of a group's sales that are in MySQL (at most STOCK_BATCH_MAX):
 * forget them all, in one round trip. */
static struct rconn_script clear_group_script = RCONN_SCRIPT(
    "redis.call('ZREM', KEYS[1], unpack(ARGV)) "
    "redis.call('HDEL', KEYS[2], unpack(ARGV)) "
    "redis.call('INCR', KEYS[3]) "
    "return #ARGV");

/* KEYS[1] intent details; ARGV[1] an order_id. 1 when a sale of that
 * order is an intent (decided in Redis, its MySQL write not yet known),
 * else 0. Scans the intents: run only on the out-of-stock path, and there
 * are at most as many as sales on their way to MySQL. */
static struct rconn_script in_flight_script = RCONN_SCRIPT(
    "local p = ARGV[1] .. '\\n' "
    "for _, d in ipairs(redis.call('HVALS', KEYS[1])) do "
    "  if string.sub(d, 1, #p) == p then return 1 end "
    "end "
    "return 0");

/* The shared Redis server, received at init. */
static struct redis_shared *redis;

/* This process's life among the instance's lives: part of every intent
 * id, so a restarted instance (same name, its counter from 0 again) never
 * reuses the id of a sale its previous life left behind. */
static unsigned long long life_id;

static void pick_life_id(void)
{
    if (getrandom(&life_id, sizeof(life_id), GRND_NONBLOCK) == (ssize_t)sizeof(life_id) &&
        life_id != 0)
        return;
    struct timespec ts;   /* no entropy yet: the clock and the pid */
    clock_gettime(CLOCK_REALTIME, &ts);
    life_id = ((unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec) ^
              ((unsigned long long)getpid() << 40);
}

static int decr_init(const struct guard *self, const struct guard_backends *b, char *err,
                      size_t errlen)
{
    redis = b->redis;
    pick_life_id();
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
    /* written with the stock, atomically: the generation it belongs to */
    s->n = 2;
    keys_stock_seeds(s->keys[1], sku);
    snprintf(s->vals[1], sizeof(s->vals[1]), "%lld", s->seeds);
    return 0;
}

static atomic_ullong intent_seq;

/* The request's replicas_ack (0 when the body has none). */
static int acks_of(const struct deduct_req *req)
{
    return (int)lock_opts_of(req)->replicas_ack;
}

/* The WAIT of replicas_ack: REDIS_REPLICAS_ACK_MAX_MS, or what the
 * request's deadline leaves. */
static long ack_wait_ms(const struct deduct_req *req)
{
    long left = (long)(deduct_time_left(req) * 1000.0);
    return left < REDIS_REPLICAS_ACK_MAX_MS ? (left > 1 ? left : 1) : REDIS_REPLICAS_ACK_MAX_MS;
}

static void intent_init(struct decr_intent *in, const struct deduct_env *env, const char *sku)
{
    /* at most 48 + 1 + 16 + 1 + 20 characters: fits the ledger's intent */
    snprintf(in->nonce, sizeof(in->nonce), "%.48s-%016llx-%llu", env->instance, life_id,
             (unsigned long long)atomic_fetch_add(&intent_seq, 1));
    keys_stock_intents(in->zset, sku);
    keys_stock_intent(in->hash, sku);
    keys_stock_intents_gone(in->gone, sku);
}

/* How long a sale decided in Redis may take to reach MySQL before a stale
 * intent is settled without it: hold_ms, the write margin, and as much
 * again for the write that started just in time. */
static long write_window_ms(const struct deduct_req *req)
{
    return req->hold_ms + 2 * REDIS_DECIDED_WRITE_MARGIN_MS;
}

/* decr_group_done_fn: the intents of the group's recorded sales (rc 0)
 * go in one script call, before anyone is answered. A failure leaves them
 * to be settled as stale (the ledger says they landed). The others' intents
 * are their own threads' (a give-back, a reconciliation). */
static void clear_recorded(struct relative_item *items, int n)
{
    const char *argv[3 + STOCK_BATCH_MAX];
    int argc = 3;
    for (int i = 0; i < n && argc < 3 + STOCK_BATCH_MAX; i++) {
        const struct decr_intent *in = items[i].ctx;
        if (items[i].rc != 0 || !in)
            continue;
        argv[0] = in->zset;    /* one SKU: the same keys for all */
        argv[1] = in->hash;
        argv[2] = in->gone;
        argv[argc++] = in->nonce;
    }
    if (argc == 3)
        return;
    char err[128];
    freeReplyObject(rconn_eval(redis->pool, err, sizeof(err), &clear_group_script, 3, argc, argv));
}

/* Is a sale of order_id an intent in `hash` (on its way to MySQL)? 0 no;
 * 1 yes, res answered DEDUCT_IN_PROGRESS; -1 Redis could not tell, res
 * answered DEDUCT_UNAVAILABLE (nothing changed either way). */
static int order_in_flight(const char *hash, const char *order_id, struct deduct_res *res)
{
    char err[128];
    const char *argv[2] = {hash, order_id};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &in_flight_script, 1, 2, argv);
    int busy = !r || r->type != REDIS_REPLY_INTEGER ? -1 : r->integer == 1;
    if (r && busy < 0)
        snprintf(err, sizeof(err), "unexpected reply");
    freeReplyObject(r);
    if (busy == 1) {
        res->outcome = DEDUCT_IN_PROGRESS;
        snprintf(res->detail, sizeof(res->detail),
                 "order %.64s in progress: its sale is on its way to MySQL; nothing changed, "
                 "repeat it later", order_id);
    } else if (busy < 0) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail),
                 "Redis could not tell whether order %.40s is in progress: %.40s", order_id,
                 err);
    }
    return busy;
}

/* The sale as written to MySQL: from the Redis decision on, it has
 * hold_ms plus the margin to reach MySQL, whatever lock_wait_ms (which
 * this guard never waits) added to the request's deadline: that bound is
 * what --redis-reload-wait must exceed, and what its intent's deadline
 * (write_window_ms) exceeds. */
static void sale_of(struct deduct_req *sale, const struct deduct_req *req)
{
    *sale = *req;
    double cap = util_now() + (double)(req->hold_ms + REDIS_DECIDED_WRITE_MARGIN_MS) / 1000.0;
    if (sale->deadline <= 0 || sale->deadline > cap)
        sale->deadline = cap;
}

/* decide_record's run: the leader's guard name and MySQL connection. */
struct record_ctx {
    const char *guard_name;
    const struct deduct_env *env;
};

/* coal_run_fn: decide members[] (one SKU) in one script call, then record
 * the sales taken in one group commit on the leader's connection and
 * forget their intents in one more call, before anyone is answered. */
static void decide_record_many(struct coal_member *const *m, int n, void *ctx)
{
    const struct record_ctx *c = ctx;
    decr_decide_many(redis, m, n);
    struct relative_item items[DECR_DECIDE_MAX];
    struct decr_decision *taken[DECR_DECIDE_MAX];
    int nt = 0;
    for (int i = 0; i < n && nt < STOCK_BATCH_MAX; i++) {
        struct decr_decision *d = m[i]->arg;
        if (d->left < 0)
            continue;
        sale_of(&d->sale, d->req);
        items[nt] = (struct relative_item){.req = &d->sale, .seeds = d->seeds, .res = d->res,
                                           .ctx = (void *)d->in, .intent = d->in->nonce,
                                           .rc = STOCK_NOT_COMMITTED};
        taken[nt++] = d;
    }
    decr_group_record_many(c->guard_name, c->env, items, nt, clear_recorded);
    for (int i = 0; i < nt; i++) {
        taken[i]->item = items[i];
        taken[i]->recorded = 1;
    }
}

static struct coalescer decide_recorders = {.mu = PTHREAD_MUTEX_INITIALIZER, .max = DECR_DECIDE_MAX};

/* A sale with no hold_ms and no replicas_ack: its decision and its MySQL
 * write in ONE coalesced run with the other such sales of the SKU on this
 * instance (one wake-up per sale, one script call and one group commit
 * per group). Same returns as decr_decrement(); d->recorded says whether the
 * write ran (d->item.rc its answer). */
static long long decide_record(const struct rrec *k, const struct decr_intent *in,
                               const struct deduct_req *req, const struct guard *self,
                               const struct deduct_env *env, struct decr_decision *d,
                               struct deduct_res *res)
{
    *d = (struct decr_decision){.k = k, .in = in, .req = req, .write_ms = write_window_ms(req),
                           .res = res, .left = -3, .seeds = -1};
    struct record_ctx c = {self->name, env};
    coal_submit(&decide_recorders, req->sku, req, res, d, decide_record_many, &c);
    return d->left;
}

static void redis_decr_deduct(const struct guard *self, const struct deduct_env *env,
                              const struct deduct_req *req, struct deduct_res *res)
{
    struct rrec k;
    struct decr_intent in;
    rrec_keys(&k, req->sku);
    intent_init(&in, env, req->sku);
    char epoch[RREC_EPOCH_MAX] = "", stale[96] = "";
    long long left = -2, acked = 0, seeds = -1;
    /* hold_ms puts a sleep between the decision and the write, and
     * replicas_ack its own WAIT: those decide and write in two steps */
    int fused = req->hold_ms <= 0 && acks_of(req) == 0;
    struct decr_decision d = {.recorded = 0};
    for (int attempt = 0; attempt < 2 && left == -2; attempt++) {
        if (fused) {
            left = decide_record(&k, &in, req, self, env, &d, res);
            memcpy(epoch, d.epoch, RREC_EPOCH_MAX);
            memcpy(stale, d.stale, 96);
            seeds = d.seeds;
        } else {
            left = decr_decide_grouped(redis, &k, &in, req, write_window_ms(req), acks_of(req),
                                       ack_wait_ms(req), epoch, &seeds, stale, &acked, res);
        }
        if (left == -2 && attempt == 0 && rrec_recover(&k, env, req->sku, fill_state, res) == 0)
            return;
    }
    if (stale[0])
        decr_settle_stale(redis, &k, env->db, req->sku, stale, "sale");
    if (left == -2) {   /* lost again between the reload and our retry */
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail),
                 "Redis lost the redis-decr stock of %.64s again; reconciling with MySQL", req->sku);
        return;
    }
    if (left == -1) {
        /* A repeat of a sale still on its way to MySQL (its intent holds
         * the unit; no ledger row yet) is not out of stock: asked first,
         * so a first sale that lands in between is found in the ledger. */
        int busy = order_in_flight(in.hash, req->order_id, res);
        if (busy != 0)
            return;
        /* own_idempotency: a repeat of a sale already recorded is its echo,
         * whatever the stock is now (asked only here, on the rare path). */
        struct ledger_row row;
        int rc = store_ledger_get(env->db, req->order_id, 0, &row);
        if (rc == 1)
            stock_answer_repeat(env, &row, req, res);
        else if (rc < 0)
            stock_db_failure(env->db, rc, res);
        else
            res->outcome = DEDUCT_OUT_OF_STOCK;
        return;
    }
    if (left < 0)
        return;
    /* replicas_ack: a failover to a replica without this decrement would
     * sell the unit again; so fewer replicas than asked undo the sale. */
    if (acks_of(req) > 0 && acked < acks_of(req)) {
        char why[160];
        snprintf(why, sizeof(why), "%s", res->detail);
        decr_give_back(redis, &k, &in, epoch, req->qty, req->sku);
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail),
                 "replicas_ack: the sale reached %lld of %d replica(s) within %ld ms; undone, "
                 "nothing sold%s%.40s", acked > 0 ? acked : 0, acks_of(req),
                 ack_wait_ms(req), acked < 0 ? ": " : "", acked < 0 ? why : "");
        return;
    }
    struct deduct_req sale;
    int rc;
    if (d.recorded) {
        rc = d.item.rc;        /* written with its group, deadline checked there */
    } else {
        sale_of(&sale, req);
        req = &sale;
        util_sleep_ms(req->hold_ms);   /* between the Redis sale and the MySQL write */
        /* Past its deadline the caller has given up: writing now could
         * also land after a reconciliation already counted these units as
         * unsold. */
        if (stock_past_deadline(req, res)) {
            decr_give_back(redis, &k, &in, epoch, req->qty, req->sku);
            return;
        }
        rc = decr_group_record(self->name, env, req, seeds, &in, in.nonce, clear_recorded, res);
    }
    /* Refused: the units go back into their epoch. Floor refusal or a
     * COMMIT with no known outcome: Redis is reconciled from MySQL instead,
     * so a unit is neither sold twice nor lost. Reseeded (on any instance)
     * since the stock the sale was decided on was written: nothing lands
     * in the new seed; the old state is normally replaced already (the
     * reseed writes Redis before its COMMIT), else it is reconciled. */
    if (rc == 0)
        return;                /* in MySQL, its intent forgotten with its group's */
    if (rc == STOCK_NOT_COMMITTED) {
        decr_give_back(redis, &k, &in, epoch, req->qty, req->sku);
        return;
    }
    if (rc == STOCK_DIVERGED || rc == STOCK_COMMIT_UNKNOWN || rc == STOCK_RESEEDED) {
        char err[128];
        if (rrec_distrust(&k, epoch, NULL, 0, err, sizeof(err)) < 0) {
            /* the intent stays: settled as stale, the ledger will tell */
            fprintf(stderr, "redis-decr: could not start reconciling %s: %s\n", req->sku, err);
            return;
        }
    }
    decr_intent_clear(redis, &in);
}

static int redis_decr_seed(const struct guard *self, const struct deduct_env *env,
                           const char *sku, long long stock, int segments,
                           struct deduct_res *res)
{
    struct rrec k;
    struct rrec_state s;
    rrec_keys(&k, sku);
    memset(&s, 0, sizeof(s));
    /* The seed runs inside the reseed's MySQL transaction (the row locked,
     * its seeds already counted up): the generation this stock belongs to.
     * A write of a sale decided on the old stock waits for the row lock and
     * then finds the new count. */
    if (env->db) {
        long long st, ver;
        int rc = store_read_seeded(env->db, sku, &st, &ver, &s.seeds);
        if (rc < 0) {
            stock_db_failure(env->db, rc, res);
            return -1;
        }
    }
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

/* guard.h `settle`: every intent of sku past its deadline (a dead
 * instance's sale) is settled now, the ledger telling whether it landed,
 * so an idle SKU's Redis stock equals MySQL's without waiting for a sale. */
static int redis_decr_settle(const struct guard *self, struct db_conn *db, const char *sku)
{
    struct rrec k;
    rrec_keys(&k, sku);
    return decr_settle_all(redis, &k, db, sku, "audit");
}

/* KEYS[1] stock, [2] intents, [3] intent details, [4] the gone counter;
 * ARGV[1] "1" to list the live intents. {has stock, stock, units of the
 * intents still within their deadline, intents past it, the gone counter,
 * then (listed) per live intent its nonce and details}: sales on their
 * way to MySQL. A stale intent is not counted: the audit settles those
 * first (redis_decr_settle); one it could not settle shows as drift (and
 * in the count). */
static struct rconn_script side_script = RCONN_SCRIPT(
    "local v = redis.call('GET', KEYS[1]) "
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf') "
    "local units, list = 0, {} "
    "for _, n in ipairs(live) do "
    "  local d = redis.call('HGET', KEYS[3], n) "
    "  if d then "
    "    units = units + (tonumber(string.match(d, '([^\\n]*)$')) or 0) "
    "    if ARGV[1] == '1' then list[#list + 1] = n list[#list + 1] = d end "
    "  end "
    "end "
    "local out = {v and 1 or 0, tonumber(v or '0'), units, "
    "             redis.call('ZCARD', KEYS[2]) - #live, "
    "             tonumber(redis.call('GET', KEYS[4]) or '0')} "
    "for _, x in ipairs(list) do out[#out + 1] = x end "
    "return out");

#define SIDE_FIELDS 5

/* side_script's reply into out; NULL unless it has the expected shape. */
static redisReply *side_read(const char *sku, int list, struct guard_side *out)
{
    char key[KEYS_MAX], zset[KEYS_MAX], hash[KEYS_MAX], gone[KEYS_MAX], err[128];
    keys_stock(key, sku);
    keys_stock_intents(zset, sku);
    keys_stock_intent(hash, sku);
    keys_stock_intents_gone(gone, sku);
    const char *argv[5] = {key, zset, hash, gone, list ? "1" : "0"};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &side_script, 4, 5, argv);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= SIDE_FIELDS;
    for (size_t i = 0; ok && i < SIDE_FIELDS; i++)
        ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (!ok) {
        freeReplyObject(r);
        return NULL;
    }
    out->has_stock = r->element[0]->integer == 1;
    out->stock = r->element[1]->integer;
    out->in_flight_units = r->element[2]->integer;
    out->stale_intents = r->element[3]->integer;
    out->flush_seq = r->element[4]->integer;
    return r;
}

/* The audit's read (guard.h `side`). */
static int redis_decr_side(const struct guard *self, const char *sku, struct guard_side *out)
{
    redisReply *r = side_read(sku, 0, out);
    freeReplyObject(r);
    return r ? 0 : -1;
}

/* The units of the listed live intents (nonce, "order_id\nepoch\nqty"
 * pairs from element `from` on) whose sale db's snapshot holds: their
 * ledger row, with their intent id. Negative DB_E* on failure. */
static long long landed_units(struct db_conn *db, const redisReply *r, size_t from)
{
    json_t *arr = json_array();
    for (size_t i = from; arr && i + 1 < r->elements; i += 2) {
        const redisReply *n = r->element[i], *d = r->element[i + 1];
        const char *nl = d->type == REDIS_REPLY_STRING ? memchr(d->str, '\n', d->len) : NULL;
        if (n->type == REDIS_REPLY_STRING && nl)
            json_array_append_new(arr, json_pack("[s%,s]", d->str, (size_t)(nl - d->str),
                                                 n->str));
    }
    char *json = arr && json_array_size(arr) ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    if (!json)
        return 0;
    long long units = 0;
    long long n = store_ledger_units_of_intents(db, json, &units);
    json_free_t free_fn;
    json_get_alloc_funcs(NULL, &free_fn);
    free_fn(json);
    return n < 0 ? n : units;
}

/* guard.h `side_in_snapshot`: `side`, with the live intents whose sale the
 * audit's MySQL snapshot already holds (committed, not yet forgotten) not
 * counted as in flight. */
static int redis_decr_side_in_snapshot(const struct guard *self, struct db_conn *db,
                                       const char *sku, struct guard_side *out)
{
    redisReply *r = side_read(sku, 1, out);
    if (!r)
        return -1;
    long long landed = landed_units(db, r, SIDE_FIELDS);
    freeReplyObject(r);
    if (landed < 0)
        return -1;
    out->in_flight_units -= landed;
    return 0;
}

/* The audit's account of the settlements (guard.h `settled`). */
static int redis_decr_settled(const struct guard *self, const char *sku, char *buf, size_t len)
{
    return decr_settled_json(redis, sku, buf, len);
}

/* replicas_ack (lock_fields.h's row; the other lock options mean nothing
 * here: no lock is taken). */
static const struct guard_field decr_fields[] = {LOCK_FIELD_REPLICAS_ACK};

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "One Lua script checks and decrements stock:{sku}; the sale is then written to "
    "MySQL.",
    "If MySQL refuses, the units go back to Redis (503).",
    "After Redis lost its data, sales answer 503 for --redis-reload-wait before "
    "reloading from MySQL.",
    NULL,
};
static const struct guard_metric doc_metrics[] = {
    {"lab_decr_group_size", "histogram", "redis-decr sales per MySQL group commit", ""},
};
static const struct guard_doc doc = {
    .needs = "Redis",
    .use_when = "high throughput with Redis as the gate and MySQL following",
    .breaks = "nothing found; Redis restarts cost a reload wait",
    .origin = "decide in the kv store",
    .steps = doc_steps,
    .statements = "EVAL if stock>=qty then DECRBY ... end\nUPDATE inventory ...; INSERT INTO "
        "ledger ...",
    .code = __FILE__,
    .metrics = doc_metrics,
    .nmetrics = sizeof(doc_metrics) / sizeof(doc_metrics[0]),
};

/* Its side state in Redis (guard.h: struct guard_mirror). */
static const struct guard_mirror mirror = {
    .seed = redis_decr_seed,
    .release = redis_decr_release,
    .describe = redis_decr_describe,
    .side = redis_decr_side,
    .side_in_snapshot = redis_decr_side_in_snapshot,
    .settle = redis_decr_settle,
    .settled = redis_decr_settled,
};

const struct guard guard_redis_decr = {
    .name = "redis-decr",
    .doc = &doc,
    /* its sale is decided outside one MySQL transaction: refuses limited SKUs */
    .flags = GUARD_NO_PURCHASE_LIMITS
             /* its group commit's writes match unlimited SKUs only (relative_batch.c) */
             | GUARD_LIMITS_IN_DEDUCT
             | GUARD_SAFE_ACROSS_INSTANCES
             /* A repeated order id is answered by the group's ledger insert (its
              * units go back) or, out of stock, by a ledger read: no ledger read
              * before every sale. */
             | GUARD_OWN_IDEMPOTENCY
             | GUARD_USES_REDIS,
    .how = "one Lua script checks and decrements stock in Redis; MySQL updated after",
    .expect = "correct",
    .deduct = redis_decr_deduct,
    .mirror = &mirror,
    .fields = decr_fields,
    .nfields = sizeof(decr_fields) / sizeof(decr_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .init = decr_init,
    .fini = decr_fini,
};
