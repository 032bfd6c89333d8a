/* Guard `segmented`: the SKU's stock split over K Redis keys, each with its
 * own lock, so K buyers can sell at once. A deduction starts at a random
 * segment and walks on while segments are busy or empty; out_of_stock only
 * when every segment is empty. One deduction never spans segments: a qty
 * that no single segment holds is refused with a clear error (no
 * multi-lock, so no lock-ordering deadlock). MySQL stock and the ledger
 * follow every sale, so the audit stays exact. */
#include "guard.h"

#include "metrics.h"
#include "rcache.h"
#include "rlock.h"
#include "segments.h"
#include "store.h"
#include "util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* Creates every segment key at once if the count key is missing (first use
 * after a Redis restart), atomically, so two instances cannot both do it.
 * ARGV: sku, stock, k. */
static const char init_lua[] =
    "local p = 'seg:{' .. ARGV[1] .. '}:' "
    "if redis.call('EXISTS', p .. 'k') == 1 then return 0 end "
    "local s, k = tonumber(ARGV[2]), tonumber(ARGV[3]) "
    "for i = 0, k - 1 do "
    "  local share = math.floor(s / k) "
    "  if i < s % k then share = share + 1 end "
    "  redis.call('SET', p .. i, share) "
    "end "
    "redis.call('SET', p .. 'k', k) "
    "return 1";

static int write_segments(const struct guard_env *env, const char *sku, long long stock,
                          int k, int only_if_missing, struct deduct_res *res)
{
    redisReply *r;
    if (!only_if_missing) {
        r = rcache_cmd(env, res->detail, sizeof(res->detail), "DEL seg:{%s}:k", sku);
        if (!r)
            return -1;
        freeReplyObject(r);
        for (int i = 0; i < SEG_MAX; i++) {
            r = rcache_cmd(env, res->detail, sizeof(res->detail),
                           "DEL seg:{%s}:%d lock:seg:{%s}:%d", sku, i, sku, i);
            if (!r)
                return -1;
            freeReplyObject(r);
        }
    }
    r = rcache_cmd(env, res->detail, sizeof(res->detail), "EVAL %s 0 %s %lld %d", init_lua,
                   sku, stock, k);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

static int segmented_seed(const struct guard_env *env, const char *sku, long long stock,
                          int segments, struct deduct_res *res)
{
    return write_segments(env, sku, stock, segments, 0, res);
}

/* Number of segments of sku, loading them from MySQL if Redis lost them.
 * Returns k >= 1, 0 for an unknown SKU, -1 on failure (res filled). */
static int segment_count(const struct guard_env *env, const char *sku, struct deduct_res *res)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail), "GET seg:{%s}:k", sku);
        if (!r) {
            res->outcome = DEDUCT_UNAVAILABLE;
            return -1;
        }
        int k = r->type == REDIS_REPLY_STRING ? atoi(r->str) : 0;
        freeReplyObject(r);
        if (k >= SEG_MIN && k <= SEG_MAX)
            return k;
        long long stock, version, initial;
        int nseg;
        int found = store_info(env->db, sku, &stock, &version, &initial, &nseg);
        if (found <= 0) {
            if (found < 0)
                guard_db_failure(env->db, found, res);
            return found;
        }
        if (write_segments(env, sku, stock, nseg >= SEG_MIN ? nseg : 10, 1, res) != 0) {
            res->outcome = DEDUCT_UNAVAILABLE;
            return -1;
        }
    }
    res->outcome = DEDUCT_INTERNAL;
    snprintf(res->detail, sizeof(res->detail), "segment count for %s unreadable", sku);
    return -1;
}

enum seg_try { SEG_SOLD, SEG_SHORT, SEG_BUSY, SEG_FAILED };

/* Lock segment i (waiting at most wait_ms), check it, hold, write it, and
 * record the sale in MySQL. *units receives what the segment held. */
static enum seg_try try_segment(const struct guard_env *env, const struct deduct_req *req,
                                int i, long wait_ms, long *units, struct deduct_res *res)
{
    struct rlock_opts o;
    rcache_lock_opts(env, req, &o);
    char key[GUARD_SKU_MAX + 32];
    snprintf(key, sizeof(key), "lock:seg:{%s}:%d", req->sku, i);
    struct rlock *l = rlock_new(rcache_lock_client(env), key, &o);
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
        if (t == SEG_FAILED) {
            res->outcome = rc == RLOCK_EUNAVAIL ? DEDUCT_UNAVAILABLE : DEDUCT_INTERNAL;
            snprintf(res->detail, sizeof(res->detail), "segment lock: %.120s", l->errstr);
        }
        rlock_free(l);
        return t;
    }
    enum seg_try result = SEG_FAILED;
    redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail), "GET seg:{%s}:%d",
                               req->sku, i);
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
    r = rcache_cmd(env, res->detail, sizeof(res->detail), "SET seg:{%s}:%d %ld", req->sku, i,
                   *units - req->qty);
    if (!r) {
        res->outcome = DEDUCT_UNAVAILABLE;
        goto out;
    }
    freeReplyObject(r);
    if (guard_record_relative("segmented", env, req, res) != 0) {
        char err[128];
        r = rcache_cmd(env, err, sizeof(err), "INCRBY seg:{%s}:%d %ld", req->sku, i, req->qty);
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

static int segmented_deduct(const struct guard_env *env, const struct deduct_req *req,
                            struct deduct_res *res)
{
    int k = segment_count(env, req->sku, res);
    if (k <= 0) {
        if (k == 0)
            res->outcome = DEDUCT_UNKNOWN_SKU;
        return 0;
    }
    int busy[SEG_MAX], nbusy = 0, start = (int)util_rand_range(0, k - 1);
    long biggest = 0, total = 0;
    char labels[64];
    snprintf(labels, sizeof(labels), "guard=\"segmented\"");
    /* Pass 1: take whichever segment is free right now. */
    for (int step = 0; step < k; step++) {
        int i = seg_walk(start, step, k);
        long units = 0;
        enum seg_try t = try_segment(env, req, i, 0, &units, res);
        if (t == SEG_SOLD || t == SEG_FAILED)
            return 0;
        if (t == SEG_BUSY)
            busy[nbusy++] = i;
        else {
            biggest = units > biggest ? units : biggest;
            total += units;
        }
        metrics_add("lab_segment_fallthrough_total", labels, 1);
    }
    /* Pass 2: wait, within the request's budget, for the busy ones. */
    double deadline = util_now() + (double)req->lock_wait_ms / 1000.0;
    int still_busy = 0;
    for (int j = 0; j < nbusy; j++) {
        long left_ms = (long)((deadline - util_now()) * 1000.0);
        long units = 0;
        enum seg_try t = try_segment(env, req, busy[j], left_ms > 0 ? left_ms : 0, &units, res);
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

static int segmented_release(const struct guard_env *env, const char *sku, long qty,
                             struct deduct_res *res)
{
    /* Returned units go to segment 0; any segment would do. */
    redisReply *r = rcache_cmd(env, res->detail, sizeof(res->detail),
                               "INCRBY seg:{%s}:0 %ld", sku, qty);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

static int segmented_describe(const struct guard_env *env, const char *sku, void *out)
{
    char err[128];
    redisReply *r = rcache_cmd(env, err, sizeof(err), "GET seg:{%s}:k", sku);
    if (!r)
        return -1;
    int k = r->type == REDIS_REPLY_STRING ? atoi(r->str) : 0;
    freeReplyObject(r);
    json_t *arr = json_array();
    for (int i = 0; i < k && i < SEG_MAX; i++) {
        r = rcache_cmd(env, err, sizeof(err), "GET seg:{%s}:%d", sku, i);
        if (!r)
            break;
        json_array_append_new(arr, json_integer(r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0));
        freeReplyObject(r);
    }
    json_object_set_new(out, "segments", arr);
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
};
