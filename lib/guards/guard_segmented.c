/* Guard `segmented`: the SKU's stock split over K Redis keys, each with its
 * own lock, so K buyers can sell at once. A deduction starts at a random
 * segment and walks on while segments are busy or empty; out_of_stock only
 * when every segment is empty. One deduction never spans segments: a qty
 * that no single segment holds is refused with a clear error (no
 * multi-lock, so no lock-ordering deadlock). MySQL stock and the ledger
 * follow every sale, so the audit stays exact. Segment writes and
 * give-backs go only into the epoch they read; when Redis lost the
 * segments, sales wait for a reconciliation (redis_reconcile.h).
 * replicas_ack=N: the segment write must reach N replicas (WAIT) before
 * MySQL is written; fewer undo it, so a failover to a lagging replica
 * cannot take back an answered sale. */
#include "guard.h"

#include "base/metrics.h"
#include "base/util.h"
#include "guards/core/lock_fields.h"
#include "guards/core/redis_reconcile.h"
#include "guards/core/redis_shared.h"
#include "stock/keys.h"
#include "stock/segments.h"
#include "stock/txn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shared Redis server, received at init. */
static struct redis_shared *redis;

static int segmented_init(const struct guard *self, const struct guard_backends *b, char *err,
                      size_t errlen)
{
    redis = b->redis;
    return 0;
}

static void segmented_fini(const struct guard *self)
{
    redis = NULL;
}

static void rrec_keys(struct rrec *k, const char *sku)
{
    k->guard = "segmented";
    k->redis = redis;
    keys_seg_count(k->state, sku);
    keys_seg_epoch(k->epoch, sku);
    keys_seg_reconcile(k->marker, sku);
}

/* The count key and the split of `stock` over k segments (seg_split, the
 * one split the unit tests pin down). */
static int fill_state(const char *sku, long long stock, int k, struct rrec_state *s,
                      struct deduct_res *res)
{
    long shares[SEG_MAX];
    if (k < SEG_MIN)
        k = 10;   /* a SKU seeded before segment counts were recorded */
    if (seg_split((long)stock, k, shares) < 0) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "cannot split %lld over %d segments",
                 stock, k);
        return -1;
    }
    keys_seg_count(s->keys[0], sku);
    snprintf(s->vals[0], sizeof(s->vals[0]), "%d", k);
    for (int i = 0; i < k; i++) {
        keys_seg(s->keys[1 + i], sku, i);
        snprintf(s->vals[1 + i], sizeof(s->vals[1 + i]), "%ld", shares[i]);
    }
    s->n = 1 + k;
    return 0;
}

/* A reseed replaces every segment and segment lock the SKU may have had,
 * in the same script that writes the new split and epoch. */
static int segmented_seed(const struct guard *self, const struct deduct_env *env,
                          const char *sku, long long stock, int segments,
                          struct deduct_res *res)
{
    struct rrec k;
    struct rrec_state s;
    rrec_keys(&k, sku);
    memset(&s, 0, sizeof(s));
    if (fill_state(sku, stock, segments, &s, res) != 0)
        return -1;
    for (int i = 0; i < SEG_MAX; i++) {
        keys_seg(s.del[s.ndel++], sku, i);
        keys_seg_lock(s.del[s.ndel++], sku, i);
    }
    return rrec_seed(&k, &s, res->detail, sizeof(res->detail));
}

/* GET of one key as a number: 1 with *v (0 when absent), -1 with err. */
static int get_number(const char *key, long long *v, char *err, size_t errlen)
{
    const char *argv[2] = {"GET", key};
    redisReply *r = rconn_cmd_argv(redis->pool, err, errlen, 2, argv);
    if (!r)
        return -1;
    *v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return 1;
}

/* Number of segments of sku; when Redis lost them, the reconciliation
 * (503 until it has run). Returns k >= 1, or 0 with res filled. */
static int segment_count(const struct deduct_env *env, const struct rrec *rk, const char *sku,
                         struct deduct_res *res)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        long long k;
        if (get_number(rk->state, &k, res->detail, sizeof(res->detail)) < 0) {
            res->outcome = DEDUCT_UNAVAILABLE;
            return 0;
        }
        if (k >= SEG_MIN && k <= SEG_MAX)
            return (int)k;
        if (attempt == 0 && rrec_recover(rk, env, sku, fill_state, res) == 0)
            return 0;
    }
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail),
             "Redis lost the segmented stock of %.64s again; reconciling with MySQL", sku);
    return 0;
}

enum seg_try { SEG_SOLD, SEG_SHORT, SEG_BUSY, SEG_FAILED };

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

/* KEYS[1] the count key, KEYS[2] the epoch, KEYS[3] the segment; ARGV[1]
 * the epoch read, ARGV[2] the units to take. 1 taken, 0 the state is gone
 * or another epoch. rrec_give_back's check, but run here because WAIT
 * must follow it on the connection that ran it (WAIT counts the replicas
 * that have that connection's writes). */
static struct rconn_script take_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
    "if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end "
    "redis.call('DECRBY', KEYS[3], ARGV[2]) "
    "return 1");

/* Take req->qty units from segment `key`, only in `epoch`, then (with
 * replicas_ack) WAIT for the replicas. Returns 1 taken (*acked: replicas
 * that acknowledged, -1 when WAIT failed; err says why), 0 the state was
 * lost or replaced (nothing taken), -1 with err (Redis failed: nothing
 * known to be taken). */
static int take_units(const struct rrec *rk, const char *key, const char *epoch,
                      const struct deduct_req *req, long long *acked, char *err, size_t errlen)
{
    char qty[24];
    snprintf(qty, sizeof(qty), "%ld", req->qty);
    const char *argv[5] = {rk->state, rk->epoch, key, epoch, qty};
    redisReply *r = redis_shared_eval_acked(redis, &take_script, 3, 5, argv, acks_of(req),
                                            ack_wait_ms(req), acked, err, errlen);
    if (!r)
        return -1;
    int rc = -1;
    if (r->type == REDIS_REPLY_INTEGER)
        rc = r->integer == 1;
    else
        snprintf(err, errlen, "unexpected reply from the segment write");
    freeReplyObject(r);
    return rc;
}

/* replicas_ack not met: the segment write reached `acked` replicas (-1:
 * WAIT failed, res->detail says why), fewer than asked. A failover to one
 * of the others would lose it and sell its units again, so the units go
 * back into the segment (same epoch) and nothing is written to MySQL:
 * 503, nothing sold. If even the give-back fails, the units stay taken in
 * Redis only (a unit stranded, never one sold twice); the audit's drift
 * shows it until a reconciliation. */
static void undo_take(const struct rrec *rk, const char *key, const char *epoch, int i,
                      const struct deduct_req *req, long long acked, struct deduct_res *res)
{
    char why[128], err[128];
    snprintf(why, sizeof(why), "%.100s", acked < 0 ? res->detail : "");
    if (rrec_give_back(rk, key, epoch, req->qty, err, sizeof(err)) < 0)
        fprintf(stderr, "segmented: replicas_ack not met; could not give %ld back to %s "
                "segment %d: %s\n", req->qty, req->sku, i, err);
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail),
             "replicas_ack: the sale reached %lld of %d replica(s) within %ld ms; undone, "
             "nothing sold%s%.60s", acked > 0 ? acked : 0, acks_of(req), ack_wait_ms(req),
             why[0] ? ": " : "", why);
}

/* The count, epoch and units of segment `key` in one round trip: 1 with
 * *units and epoch, 0 the state is gone (Redis lost it), -1 with err. */
static int read_segment(const struct rrec *rk, const char *key, long *units,
                        char epoch[RREC_EPOCH_MAX], char *err, size_t errlen)
{
    const char *argv[4] = {"MGET", rk->state, rk->epoch, key};
    redisReply *r = rconn_cmd_argv(redis->pool, err, errlen, 4, argv);
    if (!r)
        return -1;
    int rc = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
        rc = r->element[0]->type == REDIS_REPLY_STRING;
        rrec_epoch_copy(epoch, r->element[1]);
        *units = r->element[2]->type == REDIS_REPLY_STRING ? atol(r->element[2]->str) : 0;
    } else {
        snprintf(err, errlen, "unexpected reply to MGET");
    }
    freeReplyObject(r);
    return rc;
}

static void lost_while_held(const struct deduct_req *req, int i, struct deduct_res *res)
{
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail),
             "Redis lost or replaced the segments of %.40s while segment %d was held; "
             "nothing sold", req->sku, i);
}

/* Lock segment i (waiting at most wait_ms), check it, hold, write it, and
 * record the sale in MySQL. *units receives what the segment held. */
/* Nothing was written in MySQL: the segment's units go back (best effort,
 * logged: a unit lost here is one Redis undersells, never an oversell). */
static void unit_back(const struct rrec *rk, const char *key, const char *epoch,
                      const struct deduct_req *req, int i)
{
    char err[128];
    if (rrec_give_back(rk, key, epoch, req->qty, err, sizeof(err)) < 0)
        fprintf(stderr, "segmented: could not give %ld back to %s segment %d: %s\n",
                req->qty, req->sku, i, err);
}

static enum seg_try try_segment(const struct guard *self, const struct deduct_env *env,
                                const struct rrec *rk, const struct deduct_req *req, int i,
                                long wait_ms, long *units, struct deduct_res *res)
{
    struct rlock_opts o;
    redis_shared_lock_opts(env, req, &o);
    char lock_key[KEYS_MAX], key[KEYS_MAX], epoch[RREC_EPOCH_MAX];
    keys_seg_lock(lock_key, req->sku, i);
    keys_seg(key, req->sku, i);
    struct rlock *l = rlock_new(redis->locks, lock_key, &o);
    if (!l) {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "out of memory");
        return SEG_FAILED;
    }
    double t0 = util_now();
    int rc = rlock_acquire(l, wait_ms);
    res->lock_wait_s += util_now() - t0;
    if (rc != RLOCK_OK) {
        enum seg_try t = rc == RLOCK_TIMEOUT ? SEG_BUSY : SEG_FAILED;
        if (t == SEG_FAILED)
            redis_shared_lock_failure(rc, l, wait_ms, "segment lock", res);
        rlock_free(l);
        return t;
    }
    enum seg_try result = SEG_FAILED;
    int st = read_segment(rk, key, units, epoch, res->detail, sizeof(res->detail));
    if (st <= 0) {
        if (st == 0)
            lost_while_held(req, i, res);
        else
            res->outcome = DEDUCT_UNAVAILABLE;
        goto out;
    }
    if (*units < req->qty) {
        result = SEG_SHORT;
        goto out;
    }
    util_sleep_ms(req->hold_ms);
    if (stock_past_deadline(req, res))   /* the caller gave up: decide nothing */
        goto out;
    /* The segment's decrement, only into the state it read (after a
     * restart or a reseed the old epoch's units mean nothing). Relative,
     * not the absolute `units - qty` computed before the hold: a release
     * adds to segment 0 without its lock (rrec_release), and an absolute
     * write would wipe that unit out of Redis while MySQL has it. The lock
     * still makes the check above hold: only releases add meanwhile. */
    long long acked = 0;
    st = take_units(rk, key, epoch, req, &acked, res->detail, sizeof(res->detail));
    if (st <= 0) {
        if (st == 0)
            lost_while_held(req, i, res);
        else
            res->outcome = DEDUCT_UNAVAILABLE;
        goto out;
    }
    /* Before MySQL: an answered sale is one its replicas have. */
    if (acks_of(req) > 0 && acked < acks_of(req)) {
        undo_take(rk, key, epoch, i, req, acked, res);
        goto out;
    }
    int rec = stock_record_relative(self->name, env, req, res);
    /* STOCK_LIMITED: a limited SKU, refused (the entry point words it) */
    if (rec == STOCK_NOT_COMMITTED || rec == STOCK_LIMITED) {
        unit_back(rk, key, epoch, req, i);
        goto out;
    }
    if (rec == STOCK_DIVERGED || rec == STOCK_COMMIT_UNKNOWN) {
        char segs[SEG_MAX][KEYS_MAX], err[128];
        const char *drop[SEG_MAX];
        for (int s = 0; s < SEG_MAX; s++) {
            keys_seg(segs[s], req->sku, s);
            drop[s] = segs[s];
        }
        if (rrec_distrust(rk, epoch, drop, SEG_MAX, err, sizeof(err)) < 0)
            fprintf(stderr, "segmented: could not start reconciling %s: %s\n", req->sku, err);
        goto out;
    }
    result = SEG_SOLD;
out:
    rlock_release(l);
    rlock_free(l);
    return result;
}

static void segmented_deduct(const struct guard *self, const struct deduct_env *env,
                             const struct deduct_req *req, struct deduct_res *res)
{
    struct rrec rk;
    rrec_keys(&rk, req->sku);
    int k = segment_count(env, &rk, req->sku, res);
    if (k <= 0)
        return;
    int busy[SEG_MAX], nbusy = 0, start = (int)util_rand_range(0, k - 1);
    long biggest = 0, total = 0;
    /* Pass 1: take whichever segment is free right now. */
    for (int step = 0; step < k; step++) {
        int i = seg_walk(start, step, k);
        long units = 0;
        enum seg_try t = try_segment(self, env, &rk, req, i, 0, &units, res);
        if (t == SEG_SOLD || t == SEG_FAILED)
            return;
        if (t == SEG_BUSY)
            busy[nbusy++] = i;
        else {
            biggest = units > biggest ? units : biggest;
            total += units;
        }
        metrics_add("lab_segment_fallthrough_total", "guard=\"segmented\"", 1);
    }
    /* Pass 2: wait, within the request's budget, for the busy ones. */
    double deadline = util_now() + (double)req->lock_wait_ms / 1000.0;
    int still_busy = 0;
    for (int j = 0; j < nbusy; j++) {
        long left_ms = (long)((deadline - util_now()) * 1000.0);
        long units = 0;
        enum seg_try t = try_segment(self, env, &rk, req, busy[j], left_ms > 0 ? left_ms : 0,
                                     &units, res);
        if (t == SEG_SOLD || t == SEG_FAILED)
            return;
        if (t == SEG_BUSY)
            still_busy++;
        else {
            biggest = units > biggest ? units : biggest;
            total += units;
        }
    }
    if (still_busy) {
        res->outcome = DEDUCT_LOCK_TIMEOUT;
        snprintf(res->detail, sizeof(res->detail), "%d of %d segments stayed locked for %ld ms",
                 still_busy, k, req->lock_wait_ms);
    } else {
        res->outcome = DEDUCT_OUT_OF_STOCK;
        res->remaining = total;
        if (total >= req->qty)
            snprintf(res->detail, sizeof(res->detail),
                     "no single segment holds %ld units (largest holds %ld); the segmented "
                     "guard does not split one deduction across segments", req->qty, biggest);
    }
}

static int segmented_release(const struct guard *self, const struct deduct_env *env,
                             const char *sku, long qty, struct deduct_res *res)
{
    /* Returned units go to segment 0; any segment would do. The others are
     * named so that a release that must trigger a reconciliation drops the
     * whole split. */
    struct rrec rk;
    char keys[SEG_MAX][KEYS_MAX];
    const char *drop[SEG_MAX - 1];
    rrec_keys(&rk, sku);
    for (int i = 0; i < SEG_MAX; i++)
        keys_seg(keys[i], sku, i);
    for (int i = 1; i < SEG_MAX; i++)
        drop[i - 1] = keys[i];
    return rrec_release(&rk, keys[0], drop, SEG_MAX - 1, qty, res->detail,
                        sizeof(res->detail)) < 0 ? -1 : 0;
}

static int segmented_describe(const struct guard *self, const char *sku,
                              struct guard_facts *out)
{
    struct rrec rk;
    char key[KEYS_MAX], err[128];
    long long k;
    long left;
    rrec_keys(&rk, sku);
    int st = rrec_status(&rk, &left, err, sizeof(err));
    if (st < 0 || out->n >= GUARD_FACTS_MAX)
        return -1;
    struct guard_fact *f = &out->fact[out->n++];
    f->is_list = st == 1;
    f->n = 0;
    if (st == 0) {   /* being reconciled: when the segments will be back */
        f->name = "segments_reconciling_ms";
        f->n = 1;
        f->values[0] = left;
        return 0;
    }
    f->name = "segments";
    if (get_number(rk.state, &k, err, sizeof(err)) < 0)
        return -1;
    for (int i = 0; i < k && i < SEG_MAX && i < GUARD_FACT_VALUES; i++) {
        keys_seg(key, sku, i);
        if (get_number(key, &f->values[i], err, sizeof(err)) < 0)
            break;
        f->n++;
    }
    return 0;
}

/* KEYS[1] the segment count; ARGV[1] the segment keys' prefix
 * ("seg:{sku}:"). {1, sum of the segments} or {0} when the state is gone:
 * one read, so the sum is of one moment. */
static struct rconn_script side_script = RCONN_SCRIPT(
    "local k = tonumber(redis.call('GET', KEYS[1]) or '-1') "
    "if k < 0 then return {0} end "
    "local sum = 0 "
    "for i = 0, k - 1 do "
    "  sum = sum + tonumber(redis.call('GET', ARGV[1] .. i) or '0') "
    "end "
    "return {1, sum}");

/* The audit's read (guard.h `side`): the segments' sum is the Redis stock. */
static int segmented_side(const struct guard *self, const char *sku, struct guard_side *out)
{
    char count[KEYS_MAX], prefix[KEYS_MAX], err[128];
    keys_seg_count(count, sku);
    keys_seg(prefix, sku, 0);
    prefix[strlen(prefix) - 1] = '\0';   /* "seg:{sku}:0" -> "seg:{sku}:" */
    const char *argv[2] = {count, prefix};
    redisReply *r = rconn_eval(redis->pool, err, sizeof(err), &side_script, 1, 2, argv);
    if (!r)
        return -1;
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
             r->element[0]->type == REDIS_REPLY_INTEGER;
    out->has_stock = ok && r->element[0]->integer == 1 && r->elements == 2 &&
                     r->element[1]->type == REDIS_REPLY_INTEGER;
    out->stock = out->has_stock ? r->element[1]->integer : 0;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* The segment locks are Redis locks: their lease and the seeds' mistakes
 * (no fencing: a segment write is not a stock_rmw); replicas_ack for the
 * segment write (lock_fields.h's row, 0..LOCK_OPTS_REPLICAS_ACK_MAX: any
 * other value is a 400 naming the field). */
static const struct guard_field segmented_fields[] = {LOCK_FIELD_TTL, LOCK_FIELD_WATCHDOG,
                                                      LOCK_FIELD_ACQUIRE, LOCK_FIELD_RELEASE,
                                                      LOCK_FIELD_REPLICAS_ACK};

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Stock split over K Redis keys, one lock each.",
    "A deduction starts at a random segment and walks on past busy or empty ones; "
    "never spans segments.",
    "replicas_ack=N: WAIT N after the segment write, before MySQL; fewer replicas "
    "give the units back (503), so a failover cannot lose an answered sale.",
    NULL,
};
static const struct guard_metric doc_metrics[] = {
    {"lab_segment_fallthrough_total", "counter",
     "segmented sales that moved on to another segment", "guard"},
};
static const struct guard_doc doc = {
    .needs = "Redis",
    .use_when = "a hot SKU whose stock can be split into K independent parts",
    .breaks = "a failover to a lagging replica without replicas_ack (its segments hold "
        "more than MySQL: drift > 0); a buyer may see 409 while another segment "
        "holds fewer units than qty",
    .origin = "segment locks (ConcurrentHashMap style) for a hot SKU",
    .steps = doc_steps,
    .statements = "lock seg:{sku}:i; GET; DECRBY [; WAIT N t]; unlock; UPDATE inventory ...; "
        "INSERT INTO ledger ...",
    .code = __FILE__,
    .lock_home = "redis",
    .metrics = doc_metrics,
    .nmetrics = sizeof(doc_metrics) / sizeof(doc_metrics[0]),
};

/* Its side state in Redis (guard.h: struct guard_mirror). */
static const struct guard_mirror mirror = {
    .seed = segmented_seed,
    .release = segmented_release,
    .describe = segmented_describe,
    .side = segmented_side,
};

const struct guard guard_segmented = {
    .name = "segmented",
    .doc = &doc,
    /* its sale is decided outside one MySQL transaction: refuses limited SKUs */
    .flags = GUARD_NO_PURCHASE_LIMITS
             /* its MySQL write matches unlimited SKUs only (stock_record_relative) */
             | GUARD_LIMITS_IN_DEDUCT
             | GUARD_SAFE_ACROSS_INSTANCES
             | GUARD_USES_REDIS,
    .how = "stock split over K Redis segment keys, each with its own lock; walk until one has stock",
    .expect = "correct, higher throughput",
    .fields = segmented_fields,
    .nfields = sizeof(segmented_fields) / sizeof(segmented_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .deduct = segmented_deduct,
    .mirror = &mirror,
    .init = segmented_init,
    .fini = segmented_fini,
};
