/* Guard `segmented`: the SKU's stock split over K Redis keys, each with its
 * own lock, so K buyers can sell at once. A deduction starts at a random
 * segment and walks on while segments are busy or empty; out_of_stock only
 * when every segment is empty. One deduction never spans segments: a qty
 * that no single segment holds is refused with a clear error (no
 * multi-lock, so no lock-ordering deadlock). MySQL stock and the ledger
 * follow every sale, so the audit stays exact. */
#include "guard.h"

#include "base/metrics.h"
#include "base/util.h"
#include "redis_shared.h"
#include "stock/keys.h"
#include "stock/segments.h"
#include "stock/txn.h"

#include <stdio.h>
#include <stdlib.h>

/* KEYS[1] the count key, KEYS[2..k+1] the segments; ARGV[i] segment i's
 * share (from seg_split, the one split the unit tests pin down). Writes
 * them all only if the count key is missing (first use after a Redis
 * restart), atomically, so two instances cannot both do it. */
static struct rconn_script init_script = RCONN_SCRIPT(
    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end "
    "for i = 1, #ARGV do redis.call('SET', KEYS[i + 1], ARGV[i]) end "
    "redis.call('SET', KEYS[1], #ARGV) "
    "return 1");

/* Write the split of `stock` over k segments; a reseed first deletes every
 * segment and segment lock the SKU may have had. */
static int write_segments(const char *sku, long long stock, int k, int only_if_missing,
                          struct deduct_res *res)
{
    struct rconn_pool *pool = redis_shared_pool();
    char keys[1 + 2 * SEG_MAX][KEYS_MAX];
    const char *argv[2 + 2 * SEG_MAX];
    redisReply *r;
    if (!only_if_missing) {
        keys_seg_count(keys[0], sku);
        for (int i = 0; i < SEG_MAX; i++) {
            keys_seg(keys[1 + i], sku, i);
            keys_seg_lock(keys[1 + SEG_MAX + i], sku, i);
        }
        argv[0] = "DEL";
        for (int i = 0; i < 1 + 2 * SEG_MAX; i++)
            argv[1 + i] = keys[i];
        r = rconn_cmd_argv(pool, res->detail, sizeof(res->detail), 2 + 2 * SEG_MAX, argv);
        if (!r)
            return -1;
        freeReplyObject(r);
    }
    long shares[SEG_MAX];
    char nums[SEG_MAX][24];
    if (seg_split((long)stock, k, shares) < 0) {
        snprintf(res->detail, sizeof(res->detail), "cannot split %lld over %d segments",
                 stock, k);
        return -1;
    }
    keys_seg_count(keys[0], sku);
    argv[0] = keys[0];
    for (int i = 0; i < k; i++) {
        keys_seg(keys[1 + i], sku, i);
        argv[1 + i] = keys[1 + i];
        snprintf(nums[i], sizeof(nums[i]), "%ld", shares[i]);
        argv[1 + k + i] = nums[i];
    }
    r = rconn_eval(pool, res->detail, sizeof(res->detail), &init_script, 1 + k, 1 + 2 * k,
                   argv);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

static int segmented_seed(const struct guard *self, const struct deduct_env *env,
                          const char *sku, long long stock, int segments,
                          struct deduct_res *res)
{
    return write_segments(sku, stock, segments, 0, res);
}

/* GET of one key as a number: 1 with *v (0 when absent), -1 with err. */
static int get_number(const char *key, long long *v, char *err, size_t errlen)
{
    const char *argv[2] = {"GET", key};
    redisReply *r = rconn_cmd_argv(redis_shared_pool(), err, errlen, 2, argv);
    if (!r)
        return -1;
    *v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return 1;
}

/* Number of segments of sku, loading them from MySQL if Redis lost them.
 * Returns k >= 1, 0 for an unknown SKU, -1 on failure (res filled). */
static int segment_count(const struct deduct_env *env, const char *sku, struct deduct_res *res)
{
    char key[KEYS_MAX];
    keys_seg_count(key, sku);
    for (int attempt = 0; attempt < 2; attempt++) {
        long long k;
        if (get_number(key, &k, res->detail, sizeof(res->detail)) < 0) {
            res->outcome = DEDUCT_UNAVAILABLE;
            return -1;
        }
        if (k >= SEG_MIN && k <= SEG_MAX)
            return (int)k;
        long long stock, version, initial;
        int nseg;
        int found = store_info(env->db, sku, &stock, &version, &initial, &nseg);
        if (found <= 0) {
            if (found < 0)
                stock_db_failure(env->db, found, res);
            return found;
        }
        if (write_segments(sku, stock, nseg >= SEG_MIN ? nseg : 10, 1, res) != 0) {
            res->outcome = DEDUCT_UNAVAILABLE;
            return -1;
        }
    }
    res->outcome = DEDUCT_INTERNAL;
    snprintf(res->detail, sizeof(res->detail), "segment count for %s unreadable", sku);
    return -1;
}

enum seg_try { SEG_SOLD, SEG_SHORT, SEG_BUSY, SEG_FAILED };

/* One segment command (GET / SET / INCRBY key [n]) on the shared pool. */
static redisReply *seg_cmd(const char *cmd, const char *key, long n, char *err, size_t errlen)
{
    char num[24];
    snprintf(num, sizeof(num), "%ld", n);
    const char *argv[3] = {cmd, key, num};
    return rconn_cmd_argv(redis_shared_pool(), err, errlen, n < 0 ? 2 : 3, argv);
}

/* Lock segment i (waiting at most wait_ms), check it, hold, write it, and
 * record the sale in MySQL. *units receives what the segment held. */
static enum seg_try try_segment(const struct guard *self, const struct deduct_env *env,
                                const struct deduct_req *req, int i, long wait_ms,
                                long *units, struct deduct_res *res)
{
    struct rlock_opts o;
    redis_shared_lock_opts(env, req, &o);
    char lock_key[KEYS_MAX], key[KEYS_MAX];
    keys_seg_lock(lock_key, req->sku, i);
    keys_seg(key, req->sku, i);
    struct rlock *l = rlock_new(redis_shared_locks(), lock_key, &o);
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
    redisReply *r = seg_cmd("GET", key, -1, res->detail, sizeof(res->detail));
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        goto out;
    }
    *units = r->type == REDIS_REPLY_STRING ? atol(r->str) : 0;
    freeReplyObject(r);
    if (*units < req->qty) {
        result = SEG_SHORT;
        goto out;
    }
    util_sleep_ms(req->hold_ms);
    /* The read-modify-write of the segment, protected by its lock only. */
    r = seg_cmd("SET", key, *units - req->qty, res->detail, sizeof(res->detail));
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        goto out;
    }
    freeReplyObject(r);
    if (stock_record_relative(self->name, env, req, res) == STOCK_NOT_COMMITTED) {
        char err[128];
        r = seg_cmd("INCRBY", key, req->qty, err, sizeof(err));
        if (r)
            freeReplyObject(r);
        else
            fprintf(stderr, "segmented: could not give %ld back to %s segment %d: %s\n",
                    req->qty, req->sku, i, err);
        goto out;
    }
    result = SEG_SOLD;
out:
    rlock_release(l);
    rlock_free(l);
    return result;
}

static int segmented_deduct(const struct guard *self, const struct deduct_env *env,
                            const struct deduct_req *req, struct deduct_res *res)
{
    int k = segment_count(env, req->sku, res);
    if (k <= 0) {
        if (k == 0)
            res->outcome = DEDUCT_UNKNOWN_SKU;
        return 0;
    }
    int busy[SEG_MAX], nbusy = 0, start = (int)util_rand_range(0, k - 1);
    long biggest = 0, total = 0;
    /* Pass 1: take whichever segment is free right now. */
    for (int step = 0; step < k; step++) {
        int i = seg_walk(start, step, k);
        long units = 0;
        enum seg_try t = try_segment(self, env, req, i, 0, &units, res);
        if (t == SEG_SOLD || t == SEG_FAILED)
            return 0;
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
        enum seg_try t = try_segment(self, env, req, busy[j], left_ms > 0 ? left_ms : 0,
                                     &units, res);
        if (t == SEG_SOLD || t == SEG_FAILED)
            return 0;
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
    return 0;
}

static int segmented_release(const struct guard *self, const struct deduct_env *env,
                             const char *sku, long qty, struct deduct_res *res)
{
    /* Returned units go to segment 0; any segment would do. */
    char key[KEYS_MAX];
    keys_seg(key, sku, 0);
    redisReply *r = seg_cmd("INCRBY", key, qty, res->detail, sizeof(res->detail));
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

static int segmented_describe(const struct guard *self, const char *sku,
                              struct guard_facts *out)
{
    char key[KEYS_MAX], err[128];
    long long k;
    keys_seg_count(key, sku);
    if (get_number(key, &k, err, sizeof(err)) < 0 || out->n >= GUARD_FACTS_MAX)
        return -1;
    struct guard_fact *f = &out->fact[out->n++];
    f->name = "segments";
    f->is_list = 1;
    f->n = 0;
    for (int i = 0; i < k && i < SEG_MAX && i < GUARD_FACT_VALUES; i++) {
        keys_seg(key, sku, i);
        if (get_number(key, &f->values[i], err, sizeof(err)) < 0)
            break;
        f->n++;
    }
    return 0;
}

const struct guard guard_segmented = {
    .name = "segmented",
    .how = "stock split over K Redis segment keys, each with its own lock; walk until one has stock",
    .expect = "correct, higher throughput",
    .safe_across_instances = 1,
    .deduct = segmented_deduct,
    .seed = segmented_seed,
    .release = segmented_release,
    .describe = segmented_describe,
    REDIS_SHARED_GUARD_FIELDS,
};
