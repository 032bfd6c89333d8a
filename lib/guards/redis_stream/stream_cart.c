/* Carts under redis-stream: one script call decides every line (see
 * stream_scripts.c cart_script), so two carts crossing on two instances
 * never interleave; the flusher writes the entry's lines in one MySQL
 * transaction, one ledger row per line. */
#include "guards/redis_stream/stream_cart.h"

#include "guards/core/lock_fields.h"
#include "guards/core/redis_shared.h"
#include "guards/redis_stream/stream_scripts.h"
#include "stock/keys.h"
#include "stock/txn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CART_KEYS_FIXED 4
#define CART_ARGS_FIXED 4
#define CART_ARGC_MAX (CART_KEYS_FIXED + 2 * CART_LINES_MAX + CART_ARGS_FIXED + \
                       2 * CART_LINES_MAX + 2 * CART_LINES_MAX)

static const char *reply_str(const redisReply *r, size_t i)
{
    return r->elements > i && r->element[i]->type == REDIS_REPLY_STRING ? r->element[i]->str
                                                                          : NULL;
}

/* The per-line remaining stock from element `from` on: 0, or -1 when the
 * reply is short. */
static int fill_remaining(const redisReply *r, size_t from, int nlines, struct cart_res *res)
{
    for (int i = 0; i < nlines; i++) {
        const char *v = reply_str(r, from + (size_t)i);
        if (!v)
            return -1;
        res->remaining[i] = atoll(v);
    }
    return 0;
}

/* The script's reply into res. Returns 1 with lost_sku when a stock was
 * missing (-2), else 0. */
static int cart_reply(const redisReply *r, const struct cart *c, struct cart_res *res,
                      char *lost_sku)
{
    long long code = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                     r->element[0]->type == REDIS_REPLY_INTEGER ? r->element[0]->integer
                                                                : -100;
    int bad = 0;
    if (code == 0) {
        res->base.outcome = DEDUCT_SOLD;
        bad = fill_remaining(r, 2, c->nlines, res);
    } else if (code == -1) {
        res->base.outcome = DEDUCT_OUT_OF_STOCK;
        for (size_t i = 1; i + 2 < r->elements && res->nshort < CART_LINES_MAX; i += 3) {
            struct cart_short *s = &res->shortage[res->nshort++];
            const char *sku = reply_str(r, i), *q = reply_str(r, i + 1), *a = reply_str(r, i + 2);
            snprintf(s->sku, sizeof(s->sku), "%s", sku ? sku : "");
            s->requested = q ? atoll(q) : 0;
            s->available = a ? atoll(a) : 0;
        }
        bad = res->nshort == 0;
    } else if (code == -2 && reply_str(r, 1)) {
        snprintf(lost_sku, STOCK_SKU_MAX + 1, "%s", reply_str(r, 1));
        return 1;
    } else if (code == -3 && reply_str(r, 1)) {
        res->base.outcome = DEDUCT_DUPLICATE;
        snprintf(res->base.instance, sizeof(res->base.instance), "%s", reply_str(r, 1));
        bad = fill_remaining(r, 2, c->nlines, res);
    } else if (code == -4) {
        res->base.outcome = DEDUCT_ORDER_CONFLICT;
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "order_id already names another sale (%lld line(s))",
                 r->elements >= 2 && r->element[1]->type == REDIS_REPLY_INTEGER
                     ? r->element[1]->integer : 0);
    } else {
        bad = 1;
    }
    if (bad) {
        res->base.outcome = DEDUCT_INTERNAL;
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "unexpected reply from the cart script");
    }
    return 0;
}

/* Which touch (1-based, the script's k) holds line i's SKU. */
static int touch_of(const struct cart_touch *t, int nt, const char *sku)
{
    for (int k = 0; k < nt; k++)
        if (strcmp(t[k].sku, sku) == 0)
            return k + 1;
    return 0;
}

int scart_check(const struct deduct_env *env, const struct cart *c, struct cart_res *res)
{
    long acks = lock_opts_of(&c->req)->replicas_ack;
    if (acks > 0 || c->check == CART_CHECK_PER_LINE) {
        res->base.outcome = DEDUCT_BAD_REQUEST;
        snprintf(res->base.detail, sizeof(res->base.detail), "%s is not offered for "
                 "redis-stream carts (one script sums and decides every line)",
                 acks > 0 ? "replicas_ack" : "line_check \"per-line\"");
        return 1;
    }
    int rc = stock_cart_lookup(env, c, res);
    if (rc < 0)
        stock_db_failure(env->db, rc, &res->base);
    return rc != 0;
}

int scart_sell(struct redis_shared *redis, long order_ttl_ms, const struct deduct_env *env,
               const struct cart *c, struct cart_res *res, char *lost_sku)
{
    struct cart plan = *c;
    plan.order = CART_ORDER_SORTED;   /* one script: no order to wait in */
    struct cart_touch t[CART_LINES_MAX];
    int nt = cart_plan(&plan, t);
    char order[KEYS_MAX], ttl[24], ntxt[8];
    char stock[CART_LINES_MAX][KEYS_MAX], epoch[CART_LINES_MAX][KEYS_MAX];
    char sum[CART_LINES_MAX][24], kidx[CART_LINES_MAX][8], qty[CART_LINES_MAX][24];
    const char *argv[CART_ARGC_MAX];
    keys_sorder(order, c->req.order_id);
    snprintf(ttl, sizeof(ttl), "%ld", order_ttl_ms);
    snprintf(ntxt, sizeof(ntxt), "%d", nt);
    int a = 0;
    argv[a++] = order;
    argv[a++] = KEYS_SALES_STREAM;
    argv[a++] = KEYS_SALES_PENDING;
    argv[a++] = KEYS_SALES_PENDING_UNITS;
    for (int k = 0; k < nt; k++) {
        char sku[STOCK_SKU_MAX + 1];   /* a bound gcc's truncation check sees */
        snprintf(sku, sizeof(sku), "%.*s", STOCK_SKU_MAX, t[k].sku);
        keys_sstock(stock[k], sku);
        keys_sstock_epoch(epoch[k], sku);
        argv[a++] = stock[k];
        argv[a++] = epoch[k];
    }
    int nkeys = a;
    argv[a++] = c->req.order_id;
    argv[a++] = env->instance;
    argv[a++] = ttl;
    argv[a++] = ntxt;
    for (int k = 0; k < nt; k++) {
        snprintf(sum[k], sizeof(sum[k]), "%lld", t[k].qty);
        argv[a++] = t[k].sku;
        argv[a++] = sum[k];
    }
    for (int i = 0; i < c->nlines; i++) {
        snprintf(kidx[i], sizeof(kidx[i]), "%d", touch_of(t, nt, c->line[i].sku));
        snprintf(qty[i], sizeof(qty[i]), "%ld", c->line[i].qty);
        argv[a++] = kidx[i];
        argv[a++] = qty[i];
    }
    redisReply *r = rconn_eval(redis->pool, res->base.detail, sizeof(res->base.detail),
                               &stream_cart_script, nkeys, a, argv);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        res->base.outcome = DEDUCT_UNAVAILABLE;
        if (r)   /* nothing taken: a script error stops before any write */
            snprintf(res->base.detail, sizeof(res->base.detail), "cart script: %.140s", r->str);
        freeReplyObject(r);
        return 0;
    }
    int lost = cart_reply(r, c, res, lost_sku);
    freeReplyObject(r);
    return lost;
}
