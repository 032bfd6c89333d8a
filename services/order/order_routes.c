/* Order routes: take stock from an inventory instance, then record the
 * order; if the order cannot be recorded, give the stock back. */
#include "order_routes.h"

#include "inventory_client.h"
#include "order_store.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/service.h"
#include "base/util.h"
#include "stock/request.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint next_instance;

static void pass_through(const struct invc_answer *a, struct http_resp *resp)
{
    if (a->retry_after[0])
        snprintf(resp->retry_after, sizeof(resp->retry_after), "%s", a->retry_after);
    http_text(resp, (int)a->status, "application/json", strdup(a->body));
}

/* Ask instances in round-robin order, moving on when one cannot be reached.
 * Moving on after a timeout is safe too: the order_id makes the deduction
 * idempotent, so a second instance can never take the stock twice. */
static int call_inventory(const struct order_conf *c, const char *path, const char *json,
                          struct invc_answer *a, int *used)
{
    unsigned start = atomic_fetch_add(&next_instance, 1);
    for (int i = 0; i < c->nurls; i++) {
        int k = (int)((start + (unsigned)i) % (unsigned)c->nurls);
        if (invc_call(c->urls[k], path, json, c->inventory_timeout_ms,
                      c->connect_timeout_ms, a) == 0) {
            *used = k;
            return 0;
        }
        metrics_add("lab_order_failovers_total", "", 1);
        fprintf(stderr, "order: inventory %s failed: %s\n", c->urls[k], a->error);
    }
    return -1;
}

/* Give a deduction back after the order row could not be written. */
static int compensate(const struct order_conf *c, int first, const char *order_id)
{
    json_t *j = json_pack("{s:s}", "order_id", order_id);
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        return -1;
    int ok = -1;
    for (int i = 0; i < c->nurls && ok != 0; i++) {
        struct invc_answer a;
        int k = (first + i) % c->nurls;
        if (invc_call(c->urls[k], "/inventory/release", body, c->inventory_timeout_ms,
                      c->connect_timeout_ms, &a) == 0 && a.status == 200)
            ok = 0;
    }
    free(body);
    metrics_add("lab_order_compensations_total", ok == 0 ? "result=\"released\""
                                                        : "result=\"failed\"", 1);
    return ok;
}

static void place_order(const struct order_conf *c, json_t *order, const char *user_id,
                        struct http_resp *resp)
{
    char order_id[STOCK_ID_MAX + 1];
    char prefix[40];
    snprintf(prefix, sizeof(prefix), "o-%.20s", c->instance);
    util_make_id(order_id, sizeof(order_id), prefix);
    json_object_set_new(order, "order_id", json_string(order_id));
    json_object_del(order, "user_id");
    if (c->guard[0] && !json_object_get(order, "guard"))
        json_object_set_new(order, "guard", json_string(c->guard));
    char *body = json_dumps(order, JSON_COMPACT);
    if (!body) {
        http_error(resp, 500, "internal", "cannot encode inventory request");
        return;
    }
    struct invc_answer *a = malloc(sizeof(*a));
    if (!a) {
        free(body);
        http_error(resp, 500, "internal", "out of memory");
        return;
    }
    int used = 0;
    if (call_inventory(c, "/inventory/deduct", body, a, &used) != 0) {
        http_error(resp, 502, "inventory_unreachable",
                   "no inventory instance answered (last: %s)", a->error);
        goto out;
    }
    if (a->status != 200) {
        pass_through(a, resp);
        goto out;
    }
    json_t *ans = json_loads(a->body, 0, NULL);
    const char *sku = NULL, *guard = "", *instance = "";
    json_int_t qty = 0, remaining = 0;
    if (!ans || json_unpack(ans, "{s:s,s:I,s:I,s:s,s:s}", "sku", &sku, "qty", &qty,
                            "remaining", &remaining, "guard", &guard, "instance",
                            &instance) != 0) {
        json_decref(ans);
        compensate(c, used, order_id);
        http_error(resp, 502, "bad_inventory_answer", "inventory answered 200 with an "
                   "unexpected body; stock given back");
        goto out;
    }
    struct db_conn *db = db_thread_conn(&c->db);
    long long n = db ? order_store_insert(db, order_id, user_id, sku, (long long)qty, guard,
                                          instance)
                     : DB_EUNAVAIL;
    if (n < 0) {
        int back = compensate(c, used, order_id);
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 503, "backend_unavailable",
                   "order database failed (%s); %s", db ? db->errstr : "out of memory",
                   back == 0 ? "the stock was given back"
                             : "the stock could NOT be given back: release this order_id");
        if (back != 0)
            fprintf(stderr, "order: order %s sold but neither recorded nor released\n",
                    order_id);
    } else {
        http_json(resp, 201, json_pack("{s:b,s:s,s:s,s:I,s:I,s:s,s:s}", "ok", 1,
                                       "order_id", order_id, "sku", sku, "qty", qty,
                                       "remaining", remaining, "guard", guard,
                                       "inventory_instance", instance));
    }
    json_decref(ans);
out:
    free(a);
    free(body);
}

static void handle_post_orders(const struct order_conf *c, const struct http_req *req,
                               struct http_resp *resp)
{
    json_error_t je;
    json_t *o = req->body_len ? json_loadb(req->body, req->body_len, 0, &je) : NULL;
    if (!o || !json_is_object(o)) {
        json_decref(o);
        http_error(resp, 400, "bad_request", "a JSON object body is required");
        return;
    }
    char err[256];
    json_t *sku = json_object_get(o, "sku"), *qty = json_object_get(o, "qty"),
           *user = json_object_get(o, "user_id");
    if (!json_is_string(sku) ||
        req_check_id("sku", json_string_value(sku), err, sizeof(err)) != 0)
        http_error(resp, 400, "bad_request", "%s", json_is_string(sku) ? err : "sku (string) is required");
    else if (qty && (!json_is_integer(qty) || json_integer_value(qty) < 1 ||
                     json_integer_value(qty) > REQ_QTY_MAX))
        http_error(resp, 400, "bad_request", "qty must be an integer 1..%d", REQ_QTY_MAX);
    else if (user && (!json_is_string(user) ||
                      req_check_id("user_id", json_string_value(user), err, sizeof(err)) != 0))
        http_error(resp, 400, "bad_request", "%s", json_is_string(user) ? err : "user_id must be a string");
    else {
        char user_id[STOCK_ID_MAX + 1];
        snprintf(user_id, sizeof(user_id), "%s", user ? json_string_value(user) : "anonymous");
        place_order(c, o, user_id, resp);
    }
    json_decref(o);
}

/* The seeds' endpoint: GET /order/placeAnOrder?inventoryId=SKU */
static void handle_place(const struct order_conf *c, const struct http_req *req,
                         struct http_resp *resp)
{
    const char *sku = http_query(req, "inventoryId");
    char err[256];
    if (!sku || req_check_id("inventoryId", sku, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", sku ? err : "inventoryId is required");
        return;
    }
    json_t *o = json_pack("{s:s,s:i}", "sku", sku, "qty", 1);
    const char *g = http_header(req, "X-Guard");
    if (o && g && *g)
        json_object_set_new(o, "guard", json_string(g));
    if (o)
        place_order(c, o, "anonymous", resp);
    else
        http_error(resp, 500, "internal", "out of memory");
    json_decref(o);
}

static void handle_count(const struct order_conf *c, const struct http_req *req,
                         struct http_resp *resp)
{
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

static void handle_health(const struct order_conf *c, struct http_resp *resp)
{
    if (service_mysql_health(&c->db, resp) != 0)
        return;
    json_t *inv = json_object();
    int up = 0;
    for (int i = 0; i < c->nurls; i++) {
        struct invc_answer a;
        int ok = invc_call(c->urls[i], "/healthz", NULL, 2000, c->connect_timeout_ms, &a) == 0 &&
                 a.status == 200;
        up += ok;
        json_object_set_new(inv, c->urls[i], json_string(ok ? "up" : "down"));
    }
    if (!up) {
        json_decref(inv);
        http_error(resp, 503, "backend_unavailable", "no inventory instance is healthy");
        return;
    }
    http_json(resp, 200, json_pack("{s:b,s:s,s:s,s:o}", "ok", 1, "instance", c->instance,
                                   "mysql", "up", "inventory", inv));
}

static int is(const struct http_req *r, const char *m) { return strcmp(r->method, m) == 0; }

void order_handle(void *app, const struct http_req *req, struct http_resp *resp)
{
    const struct order_conf *c = app;
    const char *p = req->path, *route = "other";
    if (strcmp(p, "/orders") == 0) {
        route = "orders";
        if (is(req, "POST")) handle_post_orders(c, req, resp);
        else if (is(req, "GET")) { route = "orders_count"; handle_count(c, req, resp); }
        else http_error(resp, 405, "method_not_allowed", "use POST or GET %s", p);
    } else if (strcmp(p, "/order/placeAnOrder") == 0) {
        route = "placeAnOrder";
        if (is(req, "GET")) handle_place(c, req, resp);
        else http_error(resp, 405, "method_not_allowed", "use GET %s", p);
    } else if (strcmp(p, "/healthz") == 0) {
        route = "healthz";
        if (is(req, "GET")) handle_health(c, resp);
        else http_error(resp, 405, "method_not_allowed", "use GET %s", p);
    } else if (strcmp(p, "/metrics") == 0) {
        route = "metrics";
        service_metrics(req, resp);
    } else {
        http_error(resp, 404, "not_found", "no route %s %s", req->method, p);
    }
    if (resp->status >= 500)
        fprintf(stderr, "order %s: %s %s -> %d %.300s\n", c->instance, req->method, p,
                resp->status, resp->text ? resp->text : "");
    char labels[96];
    snprintf(labels, sizeof(labels), "route=\"%s\",status=\"%d\"", route, resp->status);
    metrics_add("lab_http_requests_total", labels, 1);
    snprintf(labels, sizeof(labels), "route=\"%s\"", route);
    metrics_observe("lab_http_request_duration_seconds", labels, util_now() - req->started);
}
