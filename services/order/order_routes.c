/* Order routes: check the request, then hand it to order_place (the
 * crash-safe flow); counts, health and metrics. */
#include "order_routes.h"

#include "inventory_client.h"
#include "order_hold.h"
#include "order_idem.h"
#include "order_place.h"
#include "order_store.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/service.h"
#include "base/util.h"
#include "stock/cart.h"
#include "stock/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A generated id: "o-<instance>-<hex ms>-<n>-<4 hex>". util_make_id keeps
 * the unique tail whole and shortens a long instance name with a hash of
 * all of it, so two instances never share a prefix. */
static void make_order_id(const struct order_conf *c, char *out, size_t outlen)
{
    char prefix[sizeof(c->instance) + 2];
    snprintf(prefix, sizeof(prefix), "o-%s", c->instance);
    util_make_id(out, outlen, prefix);
}

/* Guard of the request: the body's "guard" beats X-Guard, which beats the
 * instance's --guard; none of them: the inventory's default. */
static void choose_guard(const struct order_conf *c, const struct http_req *req, json_t *o)
{
    if (json_object_get(o, "guard"))
        return;
    const char *g = http_header(req, "X-Guard");
    if (g && *g)
        json_object_set_new(o, "guard", json_string(g));
    else if (c->guard[0])
        json_object_set_new(o, "guard", json_string(c->guard));
}

/* A string identifier field: absent (returns 0, *out = NULL), valid (0),
 * or invalid (-1 with err). */
static int id_field(json_t *o, const char *key, const char **out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_string(v)) {
        snprintf(err, errlen, "%s must be a string", key);
        return -1;
    }
    if (req_check_id(key, json_string_value(v), err, errlen) != 0)
        return -1;
    *out = json_string_value(v);
    return 0;
}

static void place_keyed(const struct order_conf *c, struct order_req *r, const char *key,
                        const struct http_req *req, struct http_resp *resp);

/* What the body orders: one SKU ("sku", "qty" 1 by default) or a cart
 * ("lines", checked as the inventory checks them: stock/cart.h), into r's
 * sku, qty and lines (a cart: line 0's SKU, every line's units, the lines
 * as compact JSON in the client's order). Returns 0, or -1 with err. */
static int order_what(json_t *o, struct order_req *r, char *err, size_t errlen)
{
    struct cart *cart = malloc(sizeof(*cart));
    int rc = cart ? cart_from(o, cart, err, errlen) : -1;
    if (!cart)
        snprintf(err, errlen, "out of memory");
    if (rc == 0) {
        size_t off = 0;
        r->qty = 0;
        snprintf(r->sku, sizeof(r->sku), "%s", cart->line[0].sku);
        for (int i = 0; i < cart->nlines && off < sizeof(r->lines); i++) {
            r->qty += cart->line[i].qty;
            off += (size_t)snprintf(r->lines + off, sizeof(r->lines) - off,
                                    "%s{\"sku\":\"%s\",\"qty\":%ld}%s", i ? "," : "[",
                                    cart->line[i].sku, cart->line[i].qty,
                                    i == cart->nlines - 1 ? "]" : "");
        }
    }
    free(cart);
    if (rc <= 0)
        return rc;
    const char *sku = NULL;
    json_t *qty = json_object_get(o, "qty");
    if (id_field(o, "sku", &sku, err, errlen) != 0 || !sku) {
        if (!sku && !json_object_get(o, "sku"))
            snprintf(err, errlen, "sku (string) or lines (array) is required");
        return -1;
    }
    if (qty && (!json_is_integer(qty) || json_integer_value(qty) < 1 ||
                json_integer_value(qty) > REQ_QTY_MAX)) {
        snprintf(err, errlen, "qty must be an integer 1..%d", REQ_QTY_MAX);
        return -1;
    }
    snprintf(r->sku, sizeof(r->sku), "%s", sku);
    r->qty = qty ? json_integer_value(qty) : 1;
    return 0;
}


static void route_post_orders(void *app, struct route_call *call, const struct http_req *req,
                              struct http_resp *resp)
{
    const struct order_conf *c = app;
    json_error_t je;
    json_t *o = req->body_len ? json_loadb(req->body, req->body_len, 0, &je) : NULL;
    if (!o || !json_is_object(o)) {
        json_decref(o);
        http_error(resp, 400, "bad_request", "a JSON object body is required");
        return;
    }
    char err[256], key[ORDER_IDEM_KEY_MAX + 1];
    const char *key_header = http_header(req, "Idempotency-Key");
    if (key_header && order_idem_parse_key(key_header, key, err, sizeof(err)) != 0) {
        json_decref(o);
        http_error(resp, 400, "bad_idempotency_key", "%s", err);
        return;
    }
    const char *user = NULL, *order_id = NULL;
    json_t *pay = json_object_get(o, "pay_within_ms");
    struct order_req *r = calloc(1, sizeof(*r));   /* a cart's lines: 4.6 KB */
    int form = r ? order_what(o, r, err, sizeof(err)) : -2;
    if (form == -2)
        http_error(resp, 500, "internal", "out of memory");
    else if (form < 0)
        http_error(resp, 400, "bad_request", "%s", err);
    else if (id_field(o, "user_id", &user, err, sizeof(err)) != 0 ||
             id_field(o, "order_id", &order_id, err, sizeof(err)) != 0)
        http_error(resp, 400, "bad_request", "%s", err);
    else if (pay && (!json_is_integer(pay) || json_integer_value(pay) < ORDER_PAY_MIN_MS ||
                     json_integer_value(pay) > ORDER_PAY_MAX_MS))
        http_error(resp, 400, "bad_request", "pay_within_ms must be an integer %d..%d",
                   ORDER_PAY_MIN_MS, ORDER_PAY_MAX_MS);
    else {
        r->forward = o;
        r->started = req->started;
        r->pay_within_ms = pay ? json_integer_value(pay) : 0;
        snprintf(r->user_id, sizeof(r->user_id), "%s", user ? user : "anonymous");
        if (order_id)
            snprintf(r->order_id, sizeof(r->order_id), "%s", order_id);
        else
            make_order_id(c, r->order_id, sizeof(r->order_id));
        place_keyed(c, r, key_header ? key : NULL, req, resp);
    }
    free(r);
    json_decref(o);
}

/* Place r, under an Idempotency-Key when key is not NULL. The key's
 * request is the body as the client sent it plus X-Guard, taken before
 * the instance's defaults are filled in. */
static void place_keyed(const struct order_conf *c, struct order_req *r, const char *key,
                        const struct http_req *req, struct http_resp *resp)
{
    char *request = key ? order_idem_request(r->forward, http_header(req, "X-Guard")) : NULL;
    if (key && !request) {
        http_error(resp, 500, "internal", "out of memory");
        return;
    }
    choose_guard(c, req, r->forward);
    if (key)
        order_idem_place(c, r, key, request, resp);
    else
        order_place(c, r, resp);
    free(request);
}

/* The seeds' endpoint: GET /order/placeAnOrder?inventoryId=SKU */
static void route_place(void *app, struct route_call *call, const struct http_req *req,
                        struct http_resp *resp)
{
    const struct order_conf *c = app;
    const char *sku = http_query(req, "inventoryId");
    char err[256];
    if (!sku || req_check_id("inventoryId", sku, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", sku ? err : "inventoryId is required");
        return;
    }
    json_t *o = json_pack("{s:s}", "sku", sku);
    if (!o) {
        http_error(resp, 500, "internal", "out of memory");
        return;
    }
    struct order_req r = {.qty = 1, .forward = o, .started = req->started};
    snprintf(r.sku, sizeof(r.sku), "%s", sku);
    snprintf(r.user_id, sizeof(r.user_id), "anonymous");
    make_order_id(c, r.order_id, sizeof(r.order_id));
    choose_guard(c, req, o);
    order_place(c, &r, resp);
    json_decref(o);
}

static void route_count(void *app, struct route_call *call, const struct http_req *req,
                        struct http_resp *resp)
{
    const struct order_conf *c = app;
    const char *sku = http_query(req, "sku");
    char err[256];
    if (!sku || req_check_id("sku", sku, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", sku ? err : "sku is required");
        return;
    }
    struct db_conn *db = db_thread_conn(&c->db);
    long long orders = 0, units = 0;
    long long n = db ? order_store_count(db, sku, &orders, &units) : DB_EUNAVAIL;
    if (n < 0) {
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 503, "backend_unavailable", "order database: %s",
                   db ? db->errstr : "out of memory");
        return;
    }
    http_json(resp, 200, json_pack("{s:s,s:I,s:I}", "sku", sku, "orders",
                                   (json_int_t)orders, "units", (json_int_t)units));
}

static void route_health(void *app, struct route_call *call, const struct http_req *req,
                         struct http_resp *resp)
{
    const struct order_conf *c = app;
    if (service_mysql_health(&c->db, resp) != 0)
        return;
    json_t *inv = json_object();
    int up = 0;
    for (int i = 0; i < c->nurls; i++) {
        struct invc_answer a;
        int ok = invc_call(c->urls[i], "/healthz", NULL, NULL, 2000, c->connect_timeout_ms,
                           &a) == 0 &&
                 a.status == 200;
        up += ok;
        json_object_set_new(inv, c->urls[i], json_string(ok ? "up" : "down"));
    }
    if (!up) {
        json_decref(inv);
        http_error(resp, 503, "backend_unavailable", "no inventory instance is healthy");
        return;
    }
    json_t *j = json_pack("{s:b,s:s,s:s,s:o}", "ok", 1, "instance", c->instance, "mysql",
                          "up", "inventory", inv);
    service_mysql_fields(&c->db, j);
    http_json(resp, 200, j);
}

static void route_metrics(void *app, struct route_call *call, const struct http_req *req,
                          struct http_resp *resp)
{
    service_metrics(req, resp);
}

/* services/API.md, one row per path and method set (lib/base/routes.h;
 * body 0: the server's 16 KiB cap): POST /orders places an order, GET
 * /orders counts them (a label of its own). */
static const struct route order_route_rows[] = {
    /* path                 methods     handler            label           body  thread         check */
    {"/orders",             ROUTE_POST, route_post_orders, "orders",       0, ROUTE_WORKER,  NULL},
    {"/orders",             ROUTE_GET,  route_count,       "orders_count", 0, ROUTE_WORKER,  NULL},
    {"/orders/{id}/pay",    ROUTE_POST, order_route_pay,   "orders_pay",   0, ROUTE_WORKER,  NULL},
    {"/order/placeAnOrder", ROUTE_GET,  route_place,       "placeAnOrder", 0, ROUTE_WORKER,  NULL},
    {"/healthz",            ROUTE_GET,  route_health,      "healthz",      0, ROUTE_CONTROL, NULL},
    {"/metrics",            ROUTE_GET,  route_metrics,     "metrics",      0, ROUTE_CONTROL, NULL},
    {NULL, 0, NULL, NULL, 0, ROUTE_WORKER, NULL},
};

const struct route_table order_routes = {"order", order_route_rows, NULL};

void order_handle(void *app, const struct http_req *req, struct http_resp *resp)
{
    const struct order_conf *c = app;
    route_dispatch(&order_routes, c->instance, app, req, resp);
}
