/* Guard `redis-stream` (write-behind, the seeds' kv + MQ scheme): one Lua
 * script refuses a repeated order_id, checks and decrements the Redis stock
 * and appends the sale to a Redis stream, atomically; the client is
 * answered as soon as Redis has it. Before it, one ledger read (for a
 * script call's sales) answers repeats Redis cannot know (another guard's sale, one Redis
 * forgot); no MySQL write on the request path: a flusher thread in every
 * instance (stream_flusher.h) writes the stream to MySQL in batches. Redis is the system of record until then, hence its append-only
 * file (deploy/local/stack). When Redis has lost the stock (no AOF, a
 * FLUSHALL), sales wait for a reconciliation (redis_reconcile.h). */
#include "guards/guard.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/util.h"
#include "guards/core/coalesce.h"
#include "guards/core/lock_fields.h"
#include "guards/core/redis_reconcile.h"
#include "guards/core/redis_shared.h"
#include "stock/keys.h"
#include "stock/store.h"
#include "stock/txn.h"
#include "guards/redis_stream/stream_batch.h"
#include "guards/redis_stream/stream_cart.h"
#include "guards/redis_stream/stream_flusher.h"
#include "guards/redis_stream/stream_limit.h"
#include "guards/redis_stream/stream_scripts.h"
#include "guards/redis_stream/stream_holds.h"
#include "guards/redis_stream/stream_side.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_NAME "redis-stream"
/* replicas_ack: how long past the WAIT an entry stays deferred for the
 * sale's verdict (the round trips around the WAIT). */
#define REPLICAS_ACK_MARGIN_MS 1000

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
    {"stream-linger", "LAB_STREAM_LINGER_MS", CFG_MS, "10", 0, 1000,
     offsetof(struct sflush_conf, linger_ms), 0,
     "redis-stream: after a batch that was not full, let the next one gather this long "
     "(larger batches, fewer MySQL commits; an idle stream is still read at once)"},
    {"stream-flusher", "LAB_STREAM_FLUSHER", CFG_BOOL, "1", 0, 1,
     offsetof(struct sflush_conf, enabled), 0,
     "redis-stream: run a flusher in this instance (0: sales only queue here)"},
    {"stream-order-ttl", "LAB_STREAM_ORDER_TTL_MS", CFG_MS, "86400s", 1000, 604800000,
     offsetof(struct sflush_conf, order_ttl_ms), 0,
     "redis-stream: how long Redis remembers an order_id's sale (repeats answered)"},
    {"stream-coalesce", "LAB_STREAM_COALESCE", CFG_INT, "256", 1, COAL_GROUP_MAX,
     offsetof(struct sflush_conf, coalesce_max), 0,
     "redis-stream: most concurrent sales of one SKU in this instance sent to Redis as one "
     "script call (1: one call per sale)"},
};

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

/* A reload's snapshot: tries, and the nap between them (as the audit's:
 * a flush commits within milliseconds). */
#define RELOAD_TRIES 100
#define RELOAD_NAP_MS 2

/* A reload after Redis lost the stock: MySQL's stock less the sales still
 * queued for it (none when the whole Redis was lost). The two are read as
 * one snapshot, as the audit reads them: flushes held off (the audit's
 * hold), the queue read before and after MySQL, and the pair kept only
 * when no flush could commit in between (the flush counter did not move,
 * no flusher was marked). Read apart, a flush committing between them
 * counts its units twice: MySQL without them, less a queue without them.
 * So MySQL is read here again; rrec_recover's `stock` is not used. */
static int fill_state(const char *sku, long long stock, int segments, struct rrec_state *s,
                      struct deduct_res *res)
{
    (void)stock;
    (void)segments;
    struct db_conn *db = db_conf ? db_thread_conn(db_conf) : NULL;
    for (int t = 0; db && t < RELOAD_TRIES; t++) {
        if (t > 0)
            util_sleep_ms(RELOAD_NAP_MS);
        int held = sside_freeze(redis, 1);
        if (held == 0)
            continue;   /* a flusher is committing */
        struct guard_side before, after;
        long long mysql = 0, version, initial;
        int nseg, found = 0, rb = sside_read(redis, sku, &before), ra = -1;
        if (rb == 0)
            found = store_info(db, sku, &mysql, &version, &initial, &nseg);
        if (found > 0) {
            sflush_test_pause("LAB_TEST_STREAM_RELOAD_PAUSE_MS");
            ra = sside_read(redis, sku, &after);
        }
        if (held > 0)
            sside_freeze(redis, 0);
        if (rb != 0 || (found > 0 && ra != 0)) {
            res->outcome = DEDUCT_UNAVAILABLE;
            snprintf(res->detail, sizeof(res->detail),
                     "Redis unavailable while reloading the redis-stream stock of %.64s", sku);
            return -1;
        }
        if (found <= 0) {
            if (found < 0)
                stock_db_failure(db, found, res);
            else
                res->outcome = DEDUCT_UNKNOWN_SKU;
            return -1;
        }
        if (before.flushing || after.flushing || before.flush_seq != after.flush_seq)
            continue;   /* a flush may have committed between the reads */
        long long queued = after.pending_units + after.held;   /* its holds: out too */
        s->n = 1;
        keys_sstock(s->keys[0], sku);
        snprintf(s->vals[0], sizeof(s->vals[0]), "%lld", mysql > queued ? mysql - queued : 0);
        return 0;
    }
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail), db ? "the redis-stream flushes of %.64s never "
             "paused for the reload's reads; retry" : "no MySQL connection to reload %.64s",
             sku);
    return -1;
}

/* The reply of the sale script into res. Returns 1 when Redis lost the
 * stock (-2), else 0. A repeat while its first sale waits for replicas
 * (-5) is 503 order_in_progress: a 200 then could name a sale its undo
 * takes back. */
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
    } else if (code == -6 && a && a->type == REDIS_REPLY_STRING) {
        slimit_refuse(atoll(a->str), res);
    } else if (code == -5) {
        res->outcome = DEDUCT_IN_PROGRESS;
        snprintf(res->detail, sizeof(res->detail),
                 "the first sale of this order_id still waits for its replicas (replicas_ack) "
                 "and may yet be undone: nothing changed; repeat it to learn which");
    } else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "unexpected reply from the sale script");
    }
    (void)req;
    return 0;
}

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

/* replicas_ack not met for the sale `id`: take it back unless its wait
 * had run out. Always answers 503: "undone, nothing sold" when the undo
 * took it back, "may stand" when it could not (never "sold": the sale
 * reached too few replicas). Returns 1 when undone, 0 when it may stand. */
static int undo_sale(const struct deduct_req *req, const char *id, long long acked,
                     struct deduct_res *res)
{
    char stock[KEYS_MAX], order[KEYS_MAX], qty[24], err[128];
    keys_sstock(stock, req->sku);
    keys_sorder(order, req->order_id);
    snprintf(qty, sizeof(qty), "%ld", req->qty);
    sflush_test_pause("LAB_TEST_STREAM_UNDO_PAUSE_MS");
    const char *argv[11] = {stock, order, KEYS_SALES_STREAM, KEYS_SALES_PENDING,
                            KEYS_SALES_PENDING_UNITS, KEYS_SALES_UNACKED, KEYS_SALES_CANCELLED,
                            id, req->sku, qty, KEYS_SALES_GROUP};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &stream_undo_script, 7, 11,
                               argv);
    int undone = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    res->outcome = DEDUCT_UNAVAILABLE;
    if (!undone) {
        /* The sale could not be taken back (past its wait, or Redis did not
         * answer the undo): it may stand, but it reached too few replicas,
         * so "sold" would promise what a failover can still lose. Maybe
         * sold: the same order_id asked again tells which. */
        snprintf(res->detail, sizeof(res->detail),
                 "replicas_ack: the sale reached %lld of %d replica(s) within %ld ms and could "
                 "not be undone; it may stand: repeat the order_id to learn which",
                 acked > 0 ? acked : 0, acks_of(req), ack_wait_ms(req));
        return 0;
    }
    snprintf(res->detail, sizeof(res->detail),
             "replicas_ack: the sale reached %lld of %d replica(s) within %ld ms; undone, "
             "nothing sold", acked > 0 ? acked : 0, acks_of(req), ack_wait_ms(req));
    return 1;
}

/* One run of the sale script. Returns 1 when Redis lost the stock, else 0
 * with res filled. */
static int sell(const struct deduct_env *env, const struct deduct_req *req,
                struct deduct_res *res)
{
    char stock[KEYS_MAX], epoch[KEYS_MAX], order[KEYS_MAX], qty[24], ttl[24], hold[24];
    keys_sstock(stock, req->sku);
    keys_sstock_epoch(epoch, req->sku);
    keys_sorder(order, req->order_id);
    snprintf(qty, sizeof(qty), "%ld", req->qty);
    snprintf(ttl, sizeof(ttl), "%ld", conf.order_ttl_ms);
    /* The entry waits for our verdict at most the WAIT plus a margin for
     * the round trips around it; past that, flushers write it. */
    snprintf(hold, sizeof(hold), "%ld",
             acks_of(req) > 0 ? ack_wait_ms(req) + REPLICAS_ACK_MARGIN_MS : 0L);
    const char *argv[13] = {stock, epoch, order, KEYS_SALES_STREAM, KEYS_SALES_PENDING,
                            KEYS_SALES_PENDING_UNITS, KEYS_SALES_UNACKED, req->sku,
                            req->order_id, qty, env->instance, ttl, hold};
    long long acked = 0;
    redisReply *r = redis_shared_eval_acked(redis, &stream_sale_script, 7, 13, argv,
                                            acks_of(req), ack_wait_ms(req), &acked, res->detail,
                                            sizeof(res->detail));
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        return 0;
    }
    int lost = sale_reply(r, req, res);
    /* replicas_ack: a failover to a replica without this sale would lose
     * it (and sell its unit again); fewer replicas than asked undo it. */
    if (res->outcome == DEDUCT_SOLD && acks_of(req) > 0 &&
        r->elements >= 2 && r->element[1]->type == REDIS_REPLY_STRING) {
        if (acked < acks_of(req))
            undo_sale(req, r->element[1]->str, acked, res);
        else
            sside_confirm_sale(redis, r->element[1]->str);
    }
    freeReplyObject(r);
    return lost;
}

/* Concurrent sales of one SKU in this instance: one stream_group_script call. */
static struct coalescer sales_group = COALESCER_INIT;

/* A member's own part of a group call. */
struct group_sale {
    const struct deduct_env *env;
    int lost;                  /* the script found the stock lost (-2) */
    int answered;              /* a repeat the ledger answered: not sold */
};

#define GROUP_KEYS_FIXED 6
#define GROUP_ARGS_FIXED 3

/* replicas_ack met for these entries: flushers may write them now (best
 * effort: else they do once their wait has run out). */
static void confirm_sales(const char **ids, int n)
{
    if (n <= 0)
        return;
    char err[128];
    const char **argv = malloc((size_t)(n + 2) * sizeof(*argv));
    if (!argv)
        return;
    argv[0] = "ZREM";
    argv[1] = KEYS_SALES_UNACKED;
    memcpy(argv + 2, ids, (size_t)n * sizeof(*ids));
    redisReply *r = rconn_cmd_argv(redis->pool, err, sizeof(err), n + 2, argv);
    freeReplyObject(r);
    free(argv);
}

/* coal_run_fn: one stream_group_script call for m[0..n-1] (same SKU; all with
 * replicas_ack or all without), each member's answer from its own element
 * of the reply. With replicas_ack, one WAIT on the call's connection for
 * the group: the most replicas any member asks, within the least time any
 * member has left; then each sale is confirmed or undone against its own
 * number (undo_sale: 503 "undone" or "may stand", never "sold"). Redis
 * failing fails every member alike: nothing known to be written, as for
 * one sale. */
static void sell_group(struct coal_member *const *m, int n, void *ctx)
{
    (void)ctx;
    const struct deduct_req *first = m[0]->req;
    const struct group_sale *g0 = m[0]->arg;
    int nkeys = GROUP_KEYS_FIXED + n, argc = nkeys + GROUP_ARGS_FIXED + 3 * n;
    const char **argv = malloc((size_t)argc * sizeof(*argv));
    const char **ids = malloc((size_t)n * sizeof(*ids));
    char(*okey)[KEYS_MAX] = malloc((size_t)n * sizeof(*okey));
    char(*qty)[24] = malloc((size_t)n * sizeof(*qty));
    char(*hold)[24] = malloc((size_t)n * sizeof(*hold));
    char stock[KEYS_MAX], epoch[KEYS_MAX], ttl[24], err[sizeof(m[0]->res->detail)];
    redisReply *r = NULL;
    if (!argv || !ids || !okey || !qty || !hold) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    keys_sstock(stock, first->sku);
    keys_sstock_epoch(epoch, first->sku);
    snprintf(ttl, sizeof(ttl), "%ld", conf.order_ttl_ms);
    argv[0] = stock;
    argv[1] = epoch;
    argv[2] = KEYS_SALES_STREAM;
    argv[3] = KEYS_SALES_PENDING;
    argv[4] = KEYS_SALES_PENDING_UNITS;
    argv[5] = KEYS_SALES_UNACKED;
    int a = nkeys, acks = 0;
    long wait_ms = REDIS_REPLICAS_ACK_MAX_MS;
    argv[a++] = first->sku;
    argv[a++] = g0->env->instance;
    argv[a++] = ttl;
    for (int i = 0; i < n; i++) {
        const struct deduct_req *q = m[i]->req;
        keys_sorder(okey[i], q->order_id);
        snprintf(qty[i], sizeof(qty[i]), "%ld", q->qty);
        /* The entry waits for our verdict at most the WAIT plus a margin
         * for the round trips around it; past that, flushers write it. */
        long w = ack_wait_ms(q);
        snprintf(hold[i], sizeof(hold[i]), "%ld",
                 acks_of(q) > 0 ? w + REPLICAS_ACK_MARGIN_MS : 0L);
        if (acks_of(q) > acks)
            acks = acks_of(q);
        if (acks_of(q) > 0 && w < wait_ms)
            wait_ms = w;
        argv[GROUP_KEYS_FIXED + i] = okey[i];
        argv[a++] = q->order_id;
        argv[a++] = qty[i];
        argv[a++] = hold[i];
    }
    long long acked = 0;
    r = redis_shared_eval_acked(redis, &stream_group_script, nkeys, argc, argv, acks, wait_ms,
                                &acked, err, sizeof(err));
    if (!r)
        goto fail;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)n) {
        for (int i = 0; i < n; i++) {
            m[i]->res->outcome = DEDUCT_INTERNAL;
            snprintf(m[i]->res->detail, sizeof(m[i]->res->detail),
                     "unexpected reply from the sale script");
        }
        goto out;
    }
    int nconfirm = 0;
    for (int i = 0; i < n; i++) {
        struct group_sale *g = m[i]->arg;
        const redisReply *e = r->element[i];
        g->lost = sale_reply(e, m[i]->req, m[i]->res);
        /* replicas_ack: a failover to a replica without this sale would
         * lose it (and sell its unit again); fewer replicas than asked
         * undo it. */
        if (m[i]->res->outcome != DEDUCT_SOLD || acks_of(m[i]->req) <= 0 ||
            e->elements < 2 || e->element[1]->type != REDIS_REPLY_STRING)
            continue;
        if (acked < acks_of(m[i]->req))
            undo_sale(m[i]->req, e->element[1]->str, acked, m[i]->res);
        else
            ids[nconfirm++] = e->element[1]->str;
    }
    confirm_sales(ids, nconfirm);
    goto out;
fail:
    for (int i = 0; i < n; i++) {
        m[i]->res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(m[i]->res->detail, sizeof(m[i]->res->detail), "%s", err);
    }
out:
    freeReplyObject(r);
    free(argv);
    free(ids);
    free(okey);
    free(qty);
    free(hold);
}

/* The ledger lookup on the request path: after a failure it is skipped
 * (the sales go on from Redis alone) and one group per LEDGER_RETRY_MS
 * tries MySQL again while the others keep skipping. */
#define LEDGER_RETRY_MS 1000
static atomic_llong ledger_skip_until;   /* util_now() ms; 0: MySQL answers */

/* Members of the group whose order_id the ledger holds (sold by any guard,
 * flushed by ours, released or not): answered as every guard answers a
 * repeat (the first sale with "duplicate", or order_id_conflict), nothing
 * taken, and marked answered. One statement for the group. When MySQL
 * cannot be asked, nobody is answered: the sales go on from Redis alone,
 * as write-behind does with MySQL down; should an order_id turn out to be
 * in the ledger, the flusher gives its unit back (stream_batch.c
 * same_sale). */
static void ledger_repeats(struct coal_member *const *m, int n)
{
    long long now = (long long)(util_now() * 1000.0);
    long long until = atomic_load(&ledger_skip_until);
    if (until > 0) {
        /* Reserve the probe: MySQL's timeouts at most, then skip again. */
        long long probe_ms = 3 * (db_conf ? db_conf->timeout_ms : 0) + LEDGER_RETRY_MS;
        if (now < until ||
            !atomic_compare_exchange_strong(&ledger_skip_until, &until, now + probe_ms))
            return;
    }
    struct db_conn *db = db_conf ? db_thread_conn(db_conf) : NULL;
    const char **ids = malloc((size_t)n * sizeof(*ids));
    struct ledger_row *rows = malloc((size_t)n * sizeof(*rows));
    int *found = calloc((size_t)n, sizeof(*found));
    long long rc = DB_ERR;
    if (ids && rows && found && db && db->my) {
        for (int i = 0; i < n; i++)
            ids[i] = m[i]->req->order_id;
        rc = sbatch_ledger_find(db, ids, n, rows, found);
    }
    if (rc < 0)
        atomic_store(&ledger_skip_until, (long long)(util_now() * 1000.0) + LEDGER_RETRY_MS);
    else if (until > 0)
        atomic_store(&ledger_skip_until, 0);
    for (int i = 0; rc > 0 && i < n; i++) {
        if (!found[i])
            continue;
        stock_fill_duplicate(&rows[i], m[i]->req, m[i]->res);
        ((struct group_sale *)m[i]->arg)->answered = 1;
    }
    free(ids);
    free(rows);
    free(found);
}

/* coal_run_fn: the group's repeats of orders in the ledger answered from
 * it, the other sales sold by one script call (sell_group). */
static void sell_group_checked(struct coal_member *const *m, int n, void *ctx)
{
    ledger_repeats(m, n);
    struct coal_member **rest = malloc((size_t)n * sizeof(*rest));
    int k = 0;
    for (int i = 0; rest && i < n; i++)
        if (!((struct group_sale *)m[i]->arg)->answered)
            rest[k++] = m[i];
    if (!rest)
        sell_group(m, n, ctx);   /* out of memory: the script decides all */
    else if (k > 0)
        sell_group(rest, k, ctx);
    free(rest);
}

/* One sale through its SKU's group, the ledger's check for repeats
 * included (sales with replicas_ack group apart:
 * they wait for the WAIT). Returns 1 when Redis lost the stock, else 0
 * with res filled. */
static int sell_grouped(const struct deduct_env *env, const struct deduct_req *req,
                        struct deduct_res *res)
{
    struct group_sale g = {env, 0, 0};
    char key[COAL_KEY_MAX];
    snprintf(key, sizeof(key), "%s%s", req->sku, acks_of(req) > 0 ? "\n+ack" : "");
    coal_submit(&sales_group, key, req, res, &g, sell_group_checked, NULL);
    return g.lost;
}

static void stream_deduct(const struct guard *self, const struct deduct_env *env,
                          const struct deduct_req *req, struct deduct_res *res)
{
    if (!sell_grouped(env, req, res))
        return;
    /* Redis lost the stock: the reconciliation reads MySQL, with this
     * thread's own connection (the request path had none). */
    struct rrec k;
    rrec_keys(&k, req->sku);
    struct deduct_env e = *env;
    e.db = db_conf ? db_thread_conn(db_conf) : NULL;
    if (!e.db) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "no MySQL settings to reconcile with");
        return;
    }
    if (rrec_recover(&k, &e, req->sku, fill_state, res) == 0)
        return;
    if (!sell(env, req, res))
        return;
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail),
             "Redis lost the redis-stream stock of %.64s again; reconciling with MySQL",
             req->sku);
}

/* A cart: refused options and repeats in the ledger first (scart_check),
 * then every line decided by one script call (stream_cart.c). A SKU whose
 * stock Redis lost is reconciled as a single sale's is, and the cart
 * asked once more. */
static void stream_cart(const struct guard *self, const struct deduct_env *env,
                        const struct cart *c, struct cart_res *res)
{
    if (scart_check(env, c, res))
        return;
    for (int tries = 0; tries < 2; tries++) {
        char lost[STOCK_SKU_MAX + 1];
        if (!scart_sell(redis, conf.order_ttl_ms, env, c, res, lost))
            return;
        struct rrec k;
        rrec_keys(&k, lost);
        if (rrec_recover(&k, env, lost, fill_state, &res->base) == 0)
            return;
    }
    res->base.outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->base.detail, sizeof(res->base.detail),
             "Redis lost the redis-stream stock of a SKU of the cart again; reconciling");
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
                               &stream_seed_script, 4, 7, argv);
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
    /* the SKU's old holds go with its old stock (as in MySQL) */
    return shold_clear(redis, sku, res->detail, sizeof(res->detail)) != 0
               ? -1 : slimit_seed(redis, env, sku, res);
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

static int stream_pending(const struct guard *self, const char *sku, long long *entries,
                          long long *units)
{
    return sside_pending(redis, sku, entries, units);
}

static int stream_queued(const struct guard *self, const char *order_id)
{
    return sside_queued(redis, order_id);
}

static int stream_side(const struct guard *self, const char *sku, struct guard_side *out)
{
    return sside_read(redis, sku, out);
}

static int stream_freeze(const struct guard *self, int on)
{
    return sside_freeze(redis, on);
}

static int stream_describe(const struct guard *self, const char *sku, struct guard_facts *out)
{
    struct rrec k;
    rrec_keys(&k, sku);
    return sside_describe(redis, &k, sku, out);
}

static int stream_init(const struct guard *self, const struct guard_backends *b, char *err,
                       size_t errlen)
{
    redis = b->redis;
    db_conf = b->db;
    shold_bind(redis, conf.order_ttl_ms);
    /* Warm start: the request path's scripts compiled in Redis before
     * /healthz says ready. */
    redis_shared_preload(redis, &stream_group_script);
    redis_shared_preload(redis, &stream_sale_script);
    redis_shared_preload(redis, &stream_undo_script);
    redis_shared_preload(redis, &stream_cart_script);
    pthread_mutex_lock(&sales_group.mu);
    sales_group.max = (int)conf.coalesce_max;
    pthread_mutex_unlock(&sales_group.mu);
    if (sflush_start(&conf, db_conf, redis->endpoint, b->instance, err, errlen) != 0) {
        redis = NULL;
        return -1;
    }
    return 0;
}

static void stream_fini(const struct guard *self)
{
    sflush_stop();
    shold_bind(NULL, 0);
    redis = NULL;
}

/* The flusher's counters, and how many sales the group calls carried. */
static void stream_export_metrics(void)
{
    unsigned long long calls, members;
    coal_counts(&sales_group, &calls, &members);
    metrics_set("lab_stream_sale_calls_total", "", (double)calls);
    metrics_set("lab_stream_sale_call_members_total", "", (double)members);
    sflush_export_metrics();
}

/* replicas_ack (lock_fields.h's row; no lock is taken). */
static const struct guard_field stream_fields[] = {LOCK_FIELD_REPLICAS_ACK};

/* Its description (GET /guards): stream_doc.c, beside it (this file is long). */
extern const struct guard_doc stream_doc;

/* Its side state in Redis (guard.h: struct guard_mirror). */
static const struct guard_mirror mirror = {
    .hold_reserve = shold_hook_reserve,
    .hold_confirm = shold_hook_confirm,
    .hold_release = shold_hook_release,
    .hold_sweep = shold_hook_sweep,
    .seed = stream_seed,
    .release = stream_release,
    .describe = stream_describe,
    .side = stream_side,
    .pending = stream_pending,
    .queued = stream_queued,
    .freeze = stream_freeze,
};

const struct guard guard_redis_stream = {
    .name = GUARD_NAME,
    .doc = &stream_doc,
    /* its sale is decided outside one MySQL transaction: refuses limited SKUs */
    .flags = GUARD_NO_PURCHASE_LIMITS
             | GUARD_SAFE_ACROSS_INSTANCES
             | GUARD_USES_REDIS
             | GUARD_NO_MYSQL_DEDUCT,
    .how = "one Lua script checks, decrements and appends the sale to a Redis stream; "
           "a flusher writes MySQL in batches",
    .expect = "correct (MySQL behind by the unflushed tail)",
    .deduct = stream_deduct,
    .deduct_cart = stream_cart,
    .mirror = &mirror,
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .init = stream_init,
    .fini = stream_fini,
    .export_metrics = stream_export_metrics,
    .fields = stream_fields,
    .nfields = sizeof(stream_fields) / sizeof(stream_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
};
