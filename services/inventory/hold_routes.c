/* The hold routes (hold_routes.h): parse, pick the guard, call the guard
 * layer's hold entry points, answer per services/API.md ("Holds"). No SQL
 * here beyond the store's reads. */
#include "hold_routes.h"

#include "inv_request.h"

#include "base/db.h"
#include "base/service.h"
#include "base/util.h"
#include "guards/core/hold_entry.h"
#include "stock/cart.h"
#include "stock/request.h"
#include "stock/store.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define HOLD_TTL_DEFAULT_MS 600000
/* GET /inventory/{sku} shows no late confirms: a short buffer (cut). */
#define AUDIT_LATE_IGNORED 8

static const char *const reserve_fields[] = {"order_id", "sku", "qty", "ttl_ms", "guard",
                                             "user_id", "lines"};
static const char *const confirm_fields[] = {"order_id", "confirm_check"};

/* Every key of o is one of names[0..n-1]; else -1 with err naming it. */
static int only_fields(json_t *o, const char *const *names, size_t n, const char *route,
                       char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        size_t i = 0;
        while (i < n && strcmp(key, names[i]) != 0)
            i++;
        if (i == n) {
            snprintf(err, errlen, "unknown field '%.40s' for %s", key, route);
            return -1;
        }
    }
    return 0;
}

/* A required identifier (order_id, sku) into out; -1 with err. */
static int get_id(json_t *o, const char *key, char *out, size_t len, char *err,
                  size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        snprintf(err, errlen, "%s is required (a string)", key);
        return -1;
    }
    if (req_check_id(key, json_string_value(v), err, errlen) != 0)
        return -1;
    snprintf(out, len, "%s", json_string_value(v));
    return 0;
}

/* An optional integer lo..hi into *out; -1 with err. */
static int get_num(json_t *o, const char *key, long long lo, long long hi, long long *out,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    long long x = json_is_integer(v) ? json_integer_value(v) : lo - 1;
    if (!json_is_integer(v) || x < lo || x > hi) {
        snprintf(err, errlen, "%s must be an integer %lld..%lld", key, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

struct reserve_body {
    char order_id[STOCK_ID_MAX + 1], sku[STOCK_SKU_MAX + 1], guard[33];
    char user_id[STOCK_ID_MAX + 1];   /* "" when not given */
    long long qty, ttl_ms;
    int cart;                  /* "lines" given */
    int nlines;                /* sorted by SKU, one per SKU (summed) */
    struct hold_line line[HOLD_LINES_MAX];
};

/* The lines of a cart's reserve (cart_from's rules), or the one SKU, into
 * b->line[]: sorted by SKU, one per SKU. 0, or -1 with err. */
static int parse_lines(json_t *o, struct reserve_body *b, char *err, size_t errlen)
{
    static __thread struct cart c;   /* large: not on the stack */
    struct cart_touch t[CART_LINES_MAX];
    memset(&c, 0, sizeof(c));
    int rc = cart_from(o, &c, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 1) {             /* no lines: the one SKU */
        if (get_id(o, "sku", b->sku, sizeof(b->sku), err, errlen) ||
            get_num(o, "qty", 1, REQ_QTY_MAX, &b->qty, err, errlen))
            return -1;
        b->nlines = 1;
        snprintf(b->line[0].sku, sizeof(b->line[0].sku), "%s", b->sku);
        b->line[0].qty = b->qty;
        return 0;
    }
    b->cart = 1;
    b->nlines = cart_plan(&c, t);
    for (int i = 0; i < b->nlines; i++) {
        memcpy(b->line[i].sku, t[i].sku, sizeof(b->line[i].sku));   /* the same size */
        b->line[i].qty = t[i].qty;
    }
    return 0;
}

static int parse_reserve(json_t *o, struct reserve_body *b, char *err, size_t errlen)
{
    memset(b, 0, sizeof(*b));
    b->qty = 1;
    b->ttl_ms = HOLD_TTL_DEFAULT_MS;
    json_t *g = json_object_get(o, "guard");
    if (g && !json_is_string(g)) {
        snprintf(err, errlen, "guard must be a string");
        return -1;
    }
    if (g)
        snprintf(b->guard, sizeof(b->guard), "%s", json_string_value(g));
    if (only_fields(o, reserve_fields, 7, "POST /inventory/reserve", err, errlen) ||
        (json_object_get(o, "user_id") &&
         get_id(o, "user_id", b->user_id, sizeof(b->user_id), err, errlen)) ||
        get_id(o, "order_id", b->order_id, sizeof(b->order_id), err, errlen) ||
        parse_lines(o, b, err, errlen) ||
        get_num(o, "ttl_ms", HOLD_TTL_MIN_MS, HOLD_TTL_MAX_MS, &b->ttl_ms, err, errlen))
        return -1;
    return 0;
}

/* A cart hold's lines [{sku, qty}] (with `left_key`: each line's left). */
static json_t *lines_json(const struct hold_row *h, const char *left_key)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < h->nlines; i++) {
        json_t *l = json_pack("{s:s,s:I}", "sku", h->line[i].sku, "qty",
                              (json_int_t)h->line[i].qty);
        if (l && left_key)
            json_object_set_new(l, left_key, json_integer(h->line[i].left));
        json_array_append_new(arr, l);
    }
    return arr;
}

/* A cart's hold (several SKUs) shows "lines" in place of sku and qty. */
static void set_lines(json_t *j, const struct hold_row *h, const char *left_key)
{
    if (!j || h->nlines <= 1)
        return;
    json_object_del(j, "sku");
    json_object_del(j, "qty");
    json_object_del(j, "remaining");
    json_object_set_new(j, "lines", lines_json(h, left_key));
}

static json_t *hold_json(const char *order_id, const struct hold_answer *a)
{
    json_t *j = json_pack("{s:b,s:s,s:s,s:I,s:b,s:s,s:I,s:s}", "ok", 1, "order_id", order_id,
                          "sku", a->h.sku, "qty", (json_int_t)a->h.qty, "held",
                          strcmp(a->h.state, "held") == 0, "state", a->h.state,
                          "expires_at_ms", (json_int_t)a->h.expires_at_ms, "guard",
                          a->h.guard);
    if (j && a->h.user_id[0])
        json_object_set_new(j, "user_id", json_string(a->h.user_id));
    set_lines(j, &a->h, NULL);
    return j;
}

/* 409 out_of_stock with every short line in "short" (a cart's lines all
 * or nothing; one SKU: its one line). */
static void answer_short(const struct reserve_body *b, const struct hold_answer *a,
                         struct http_resp *resp)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < a->h.nlines; i++)
        if (a->h.line[i].left < a->h.line[i].qty)
            json_array_append_new(arr, json_pack("{s:s,s:I,s:I}", "sku", a->h.line[i].sku,
                                                 "requested", (json_int_t)a->h.line[i].qty,
                                                 "available", (json_int_t)a->h.line[i].left));
    json_t *j = json_pack("{s:b,s:s,s:s}", "ok", 0, "error", "out_of_stock", "detail", "");
    char detail[256];
    if (b->cart)
        snprintf(detail, sizeof(detail), "the cart was refused: nothing was held; every "
                 "short line is listed in \"short\"");
    else
        snprintf(detail, sizeof(detail), "%s has %lld left, %lld requested", b->sku, a->left,
                 b->qty);
    if (j) {
        json_object_set_new(j, "detail", json_string(detail));
        json_object_set_new(j, "short", arr ? arr : json_array());
    } else {
        json_decref(arr);
    }
    http_json(resp, 409, j);
}

static void answer_reserve(const struct reserve_body *b, const struct hold_answer *a,
                           struct http_resp *resp)
{
    json_t *j;
    const char *sku = a->h.sku[0] ? a->h.sku : b->line[0].sku;
    switch (a->result) {
    case HOLD_HELD:
    case HOLD_REPEAT:
        j = hold_json(b->order_id, a);
        if (j && a->result == HOLD_REPEAT)
            json_object_set_new(j, "duplicate", json_true());
        http_json(resp, 200, j);
        return;
    case HOLD_OUT_OF_STOCK:
        answer_short(b, a, resp);
        return;
    case HOLD_UNKNOWN_SKU:
        http_error(resp, 404, "unknown_sku", "no SKU '%s' (seed it with PUT /inventory/%s); "
                   "nothing was held", sku, sku);
        return;
    case HOLD_NO_USER:
        http_error(resp, 400, "bad_request", "user_id required: %s has a limit of %lld per "
                   "user; nothing was held", sku, a->left);
        return;
    case HOLD_LIMIT_UNENFORCED:
        http_error(resp, 400, "bad_request", "%s has a limit of %lld per user, which guard "
                   "%s cannot enforce on a hold: reserve it under a guard that holds in "
                   "MySQL; nothing was held", sku, a->left, a->h.guard);
        return;
    case HOLD_LIMIT_EXCEEDED:
        http_error(resp, 409, "limit_exceeded", "limit %lld per user: user %s's holds and "
                   "purchases of %s leave no room for this order; nothing was held", a->left,
                   b->user_id, sku);
        return;
    default:
        http_error(resp, 409, "order_id_conflict", "order '%s' already has another hold or "
                   "a sale", b->order_id);
    }
}

void inv_route_reserve(void *app, struct route_call *call, const struct http_req *req,
                       struct http_resp *resp)
{
    const struct inv_conf *c = app;
    struct reserve_body b;
    char err[256];
    json_t *body = req_body_object(req->body, req->body_len, err, sizeof(err));
    if (!body || parse_reserve(body, &b, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        json_decref(body);
        return;
    }
    json_decref(body);
    const struct guard *g = inv_pick_guard(c, req, b.guard, resp);
    if (!g)
        return;
    call->tag = g->name;
    if (!guard_holds(g)) {
        http_error(resp, 400, "bad_request", "guard %s keeps its stock in Redis and does not "
                   "reserve; the guards that reserve: %s", g->name, guard_hold_names());
        return;
    }
    struct deduct_env env;
    if (inv_env_ready(c, &env, resp) != 0)
        return;
    struct hold_reserve_req r = {b.order_id, g->name, c->instance, b.user_id, b.ttl_ms,
                                 b.nlines, b.line};
    struct hold_answer a;
    if (guard_reserve(g, &env, &r, &a) != 0)
        inv_answer_failure(&a.res, NULL, resp);
    else
        answer_reserve(&b, &a, resp);
}

/* "confirm_check": "deadline" (the default) or "none" (the broken variant:
 * a late payment confirms a hold whose units were given back). */
static int parse_confirm(json_t *o, char *order_id, size_t len, int *check, char *err,
                         size_t errlen)
{
    *check = 1;
    if (only_fields(o, confirm_fields, 2, "POST /inventory/confirm", err, errlen) ||
        get_id(o, "order_id", order_id, len, err, errlen))
        return -1;
    json_t *v = json_object_get(o, "confirm_check");
    if (!v)
        return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (strcmp(s, "deadline") != 0 && strcmp(s, "none") != 0) {
        snprintf(err, errlen, "confirm_check must be deadline | none");
        return -1;
    }
    *check = strcmp(s, "deadline") == 0;
    return 0;
}

static void answer_confirm(const char *order_id, const struct hold_answer *a,
                           const char *instance, struct http_resp *resp)
{
    int r = a->result;
    if (r == HOLD_CONFIRMED || r == HOLD_CONFIRMED_FRESH || r == HOLD_CONFIRM_REPEAT) {
        json_t *j = json_pack("{s:b,s:s,s:s,s:I,s:I,s:s,s:s,s:b,s:b}", "ok", 1, "order_id",
                              order_id, "sku", a->h.sku, "qty", (json_int_t)a->h.qty,
                              "remaining", (json_int_t)a->remaining, "guard", a->h.guard,
                              "instance", instance, "confirmed", 1, "fresh",
                              r == HOLD_CONFIRMED_FRESH || a->h.fresh);
        if (j && r == HOLD_CONFIRM_REPEAT)
            json_object_set_new(j, "duplicate", json_true());
        /* a repeat read the lines, not the stock each sale left */
        set_lines(j, &a->h, r == HOLD_CONFIRM_REPEAT ? NULL : "remaining");
        http_json(resp, 200, j);
    } else if (r == HOLD_EXPIRED) {
        http_error(resp, 409, "hold_expired", "the hold of order '%s' passed its deadline "
                   "and its units were given back; none are left to sell", order_id);
    } else if (r == HOLD_LIMIT_EXCEEDED) {
        http_error(resp, 409, "limit_exceeded", "the hold of order '%s' passed its deadline "
                   "and gave its quota back; user %s has used it since (limit per user), so "
                   "none is sold", order_id, a->h.user_id);
    } else if (r == HOLD_CONFLICT) {
        http_error(resp, 409, "order_id_conflict", "order '%s' was sold outright since its "
                   "reserve; the hold stays until it is released or expires", order_id);
    } else if (r == HOLD_NOT_HELD) {
        http_error(resp, 409, "hold_released", "the hold of order '%s' was released",
                   order_id);
    } else {
        http_error(resp, 404, "unknown_order", "no hold for order '%s'", order_id);
    }
}

void inv_route_confirm(void *app, struct route_call *call, const struct http_req *req,
                       struct http_resp *resp)
{
    const struct inv_conf *c = app;
    char order_id[STOCK_ID_MAX + 1], err[256];
    int check;
    json_t *body = req_body_object(req->body, req->body_len, err, sizeof(err));
    if (!body || parse_confirm(body, order_id, sizeof(order_id), &check, err,
                               sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        json_decref(body);
        return;
    }
    json_decref(body);
    struct deduct_env env;
    if (inv_env_ready(c, &env, resp) != 0)
        return;
    struct hold_answer a;
    if (guard_confirm(&env, order_id, check, &a) != 0) {
        inv_answer_failure(&a.res, NULL, resp);
        return;
    }
    const struct guard *g = a.result == HOLD_UNKNOWN_ORDER ? NULL : guard_find(a.h.guard);
    call->tag = g ? g->name : "-";   /* static storage, as the label needs */
    answer_confirm(order_id, &a, c->instance, resp);
}

/* Most holds one sweep gives back (the rest wait for the next one). */
#define SWEEP_BATCH 100

void inv_route_sweep(void *app, struct route_call *call, const struct http_req *req,
                     struct http_resp *resp)
{
    const struct inv_conf *c = app;
    if (service_admin_check(c->admin_token, req, resp) != 0)
        return;
    struct deduct_env env;
    if (inv_env_ready(c, &env, resp) != 0)
        return;
    int n = guard_hold_sweep(&env, SWEEP_BATCH);
    if (n < 0) {
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 503, "backend_unavailable", "MySQL failed during the sweep");
        return;
    }
    http_json(resp, 200, json_pack("{s:b,s:i}", "ok", 1, "swept", n));
}

int inv_hold_release(const struct deduct_env *env, const char *order_id,
                     struct http_resp *resp)
{
    struct hold_answer a;
    if (guard_hold_release(env, order_id, &a) != 0) {
        inv_answer_failure(&a.res, NULL, resp);
        return 1;
    }
    if (a.result == HOLD_UNKNOWN_ORDER)
        return 0;
    json_t *j = json_pack("{s:b,s:s,s:s,s:I,s:b,s:s}", "ok", 1, "order_id", order_id, "sku",
                          a.h.sku, "qty", (json_int_t)a.h.qty, "released",
                          a.result == HOLD_GIVEN_BACK, "hold", a.result == HOLD_GIVEN_BACK
                                                                  ? "released" : a.h.state);
    if (j && a.result != HOLD_GIVEN_BACK)
        json_object_set_new(j, "duplicate", json_true());
    set_lines(j, &a.h, NULL);
    http_json(resp, 200, j);
    return 1;
}

void inv_hold_state(struct db_conn *db, const char *sku, long long stock, json_t *j)
{
    long long held = 0, unswept = 0;
    char late[AUDIT_LATE_IGNORED];
    if (!j)
        return;
    /* best effort: when the holds cannot be read, stock stands and held is null */
    int rc = store_holds_audit(db, sku, &held, &unswept, late, sizeof(late));
    json_object_set_new(j, "held", rc < 0 ? json_null() : json_integer(held));
    json_object_set_new(j, "available", json_integer(stock));
}

/* ---- the background sweeper ------------------------------------------- */

static pthread_t sweeper;
static int sweeper_on;
static volatile int sweeper_stop;

static void *sweeper_main(void *arg)
{
    const struct inv_conf *c = arg;
    struct deduct_env env;
    memset(&env, 0, sizeof(env));
    env.instance = c->instance;
    env.default_ttl_ms = c->lock_ttl_ms;
    env.default_wait_ms = c->lock_wait_ms;
    while (!__atomic_load_n(&sweeper_stop, __ATOMIC_ACQUIRE)) {
        env.db = db_thread_conn(&c->db);
        /* a whole batch swept: more may be due, go again at once */
        /* the guards with holds in Redis sweep even while MySQL is down */
        int n = guard_hold_sweep(&env, SWEEP_BATCH);
        /* slept in slices: a stop never waits a whole long period */
        for (long t = 0; n < SWEEP_BATCH && t < c->hold_sweep_ms &&
                         !__atomic_load_n(&sweeper_stop, __ATOMIC_ACQUIRE); t += 50)
            util_sleep_ms(c->hold_sweep_ms - t < 50 ? c->hold_sweep_ms - t : 50);
    }
    return NULL;
}

int inv_sweeper_start(const struct inv_conf *c)
{
    if (c->hold_sweep_ms <= 0)
        return 0;
    if (pthread_create(&sweeper, NULL, sweeper_main, (void *)c) != 0)
        return -1;
    sweeper_on = 1;
    return 0;
}

void inv_sweeper_stop(void)
{
    if (!sweeper_on)
        return;
    __atomic_store_n(&sweeper_stop, 1, __ATOMIC_RELEASE);
    pthread_join(sweeper, NULL);
    sweeper_on = 0;
}
