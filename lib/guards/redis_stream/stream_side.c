/* The redis-stream guard's reads of its side state (see stream_side.h). */
#include "guards/redis_stream/stream_side.h"

#include "guards/core/redis_shared.h"
#include "guards/redis_stream/stream_flusher.h"
#include "guards/redis_stream/stream_scripts.h"
#include "stock/keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

/* HGET hash field as a number (0 when absent); -1 with err. */
static long long hash_num(struct redis_shared *rs, const char *hash, const char *field, char *err, size_t errlen)
{
    const char *argv[3] = {"HGET", hash, field};
    redisReply *r = rconn_cmd_argv(rs->pool, err, errlen, 3, argv);
    if (!r)
        return -1;
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return v;
}

int sside_pending(struct redis_shared *rs, const char *sku, long long *entries,
                  long long *units)
{
    char err[128];
    *entries = hash_num(rs, KEYS_SALES_PENDING, sku, err, sizeof(err));
    *units = *entries < 0 ? -1 : hash_num(rs, KEYS_SALES_PENDING_UNITS, sku, err, sizeof(err));
    if (*entries < 0 || *units < 0) {
        *entries = *units = 0;
        return -1;
    }
    return 0;
}

int sside_queued(struct redis_shared *rs, const char *order_id)
{
    char key[KEYS_MAX], err[128];
    keys_sorder(key, order_id);
    const char *argv[2] = {key, KEYS_SALES_PENDING};
    redisReply *r = rconn_eval(rs->pool, err, sizeof(err), &stream_queued_script, 2, 2,
                               argv);
    if (!r)
        return -1;
    int q = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return q;
}

int sside_read(struct redis_shared *rs, const char *sku, struct guard_side *out)
{
    char stock[KEYS_MAX], held[KEYS_MAX], holds[KEYS_MAX], err[128];
    keys_sstock(stock, sku);
    snprintf(held, sizeof(held), "sheld:{%s}", sku);
    snprintf(holds, sizeof(holds), "sholdsku:{%s}", sku);
    const char *argv[8] = {stock, KEYS_SALES_PENDING, KEYS_SALES_PENDING_UNITS,
                           KEYS_SALES_FLUSHING, KEYS_SALES_FLUSH_SEQ, held, holds, sku};
    redisReply *r = rconn_eval(rs->pool, err, sizeof(err), &stream_side_script, 7, 8, argv);
    if (!r)
        return -1;
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 8;
    for (size_t i = 0; ok && i < 8; i++)
        ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (ok) {
        out->has_stock = r->element[0]->integer == 1;
        out->stock = r->element[1]->integer;
        out->pending = r->element[2]->integer;
        out->pending_units = r->element[3]->integer;
        out->flush_seq = r->element[4]->integer;
        out->flushing = r->element[5]->integer > 0;
        out->held = r->element[6]->integer;
        out->expired_unswept = r->element[7]->integer;
    }
    freeReplyObject(r);
    return ok ? 0 : -1;
}

void sside_confirm_sale(struct redis_shared *rs, const char *id)
{
    char err[128];
    const char *argv[3] = {"ZREM", KEYS_SALES_UNACKED, id};
    redisReply *r = rconn_cmd_argv(rs->pool, err, sizeof(err), 3, argv);
    freeReplyObject(r);
}

static _Thread_local char hold_token[32];

int sside_freeze(struct redis_shared *rs, int on)
{
    char err[128], ms[24];
    redisReply *r;
    if (on) {
        snprintf(hold_token, sizeof(hold_token), "%08lx%08lx", (unsigned long)random(),
                 (unsigned long)random());
        snprintf(ms, sizeof(ms), "%d", SFLUSH_AUDIT_HOLD_MS);
        const char *argv[4] = {KEYS_SALES_FLUSHING, KEYS_SALES_AUDIT_HOLD, hold_token, ms};
        r = rconn_eval(rs->pool, err, sizeof(err), &stream_hold_script, 2, 4, argv);
    } else {
        const char *argv[2] = {KEYS_SALES_AUDIT_HOLD, hold_token};
        r = rconn_eval(rs->pool, err, sizeof(err), &stream_unhold_script, 1, 2, argv);
    }
    if (!r)
        return -1;
    int rc = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    freeReplyObject(r);
    return on ? rc : 1;
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
static long long oldest_age_ms(struct redis_shared *rs, char *err, size_t errlen)
{
    const char *argv[6] = {"XRANGE", KEYS_SALES_STREAM, "-", "+", "COUNT", "1"};
    redisReply *r = rconn_cmd_argv(rs->pool, err, errlen, 6, argv);
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

int sside_describe(struct redis_shared *rs, const struct rrec *k, const char *sku,
                   struct guard_facts *out)
{
    char err[128];
    long left;
    int st = rrec_status(k, &left, err, sizeof(err));
    if (st < 0)
        return -1;
    if (st == 0) {
        add_fact(out, "stream_stock_reconciling_ms", left);
    } else {
        const char *argv[2] = {"GET", k->state};
        redisReply *r = rconn_cmd_argv(rs->pool, err, sizeof(err), 2, argv);
        if (!r)
            return -1;
        if (r->type == REDIS_REPLY_STRING)
            add_fact(out, "stream_stock", atoll(r->str));
        freeReplyObject(r);
    }
    long long e, u;
    if (sside_pending(rs, sku, &e, &u) != 0)
        return -1;
    add_fact(out, "stream_pending", e);
    add_fact(out, "stream_pending_units", u);
    long long age = oldest_age_ms(rs, err, sizeof(err));
    if (age >= 0)
        add_fact(out, "stream_lag_ms", age);
    return 0;
}
