/* Orders that wait for payment (order_hold.h): the reserve's body and
 * answer, and the payment: confirm the hold on any inventory instance (the
 * confirm is idempotent by order id, so failing over is safe), then
 * awaiting_payment -> paid. */
#include "order_hold.h"

#include "order_store.h"

#include "base/db.h"
#include "stock/request.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const hold_fields[] = {"sku", "qty", "order_id", "user_id", "guard",
                                          "pay_within_ms", "lines"};

char *order_hold_body(const struct order_req *o, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(o->forward, key, v) {
        size_t i = 0;
        while (i < 7 && strcmp(key, hold_fields[i]) != 0)
            i++;
        if (i == 7) {
            snprintf(err, errlen, "%.40s: an order with pay_within_ms takes only sku, qty, "
                     "lines, order_id, user_id, guard", key);
            return NULL;
        }
    }
    json_t *j = json_pack("{s:s,s:I}", "order_id", o->order_id, "ttl_ms",
                          (json_int_t)o->pay_within_ms);
    json_t *lines = json_object_get(o->forward, "lines");
    if (j && lines) {          /* a cart: held whole, as the inventory checks it */
        json_object_set(j, "lines", lines);
    } else if (j) {
        json_object_set_new(j, "sku", json_string(o->sku));
        json_object_set_new(j, "qty", json_integer(o->qty));
    }
    json_t *g = json_object_get(o->forward, "guard");
    if (j && g)
        json_object_set(j, "guard", g);
    /* The client's buyer (not "anonymous": every anonymous order would
     * share one quota): a limited SKU's hold counts against it. */
    json_t *u = json_object_get(o->forward, "user_id");
    if (j && u)
        json_object_set(j, "user_id", u);
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        snprintf(err, errlen, "out of memory");
    return body;
}

static json_t *awaiting_json(const char *order_id, const struct order_row *r,
                             long long expires_at_ms)
{
    json_t *j = json_pack("{s:b,s:s,s:s,s:I,s:s,s:s}", "ok", 1, "order_id", order_id, "sku",
                          r->sku, "qty", (json_int_t)r->qty, "status", r->status, "guard",
                          r->guard);
    if (j && expires_at_ms > 0)
        json_object_set_new(j, "expires_at_ms", json_integer(expires_at_ms));
    json_t *lines = r->lines[0] ? json_loads(r->lines, 0, NULL) : NULL;
    if (j && lines) {          /* a cart: its lines for sku and qty, as a placed one */
        json_object_del(j, "sku");
        json_object_del(j, "qty");
        json_object_set_new(j, "lines", lines);
    } else {
        json_decref(lines);
    }
    return j;
}

void order_hold_finish(const struct order_conf *c, struct db_conn *db,
                       const struct order_req *o, const struct invc_answer *a,
                       struct http_resp *resp)
{
    json_t *ans = json_loads(a->body, 0, NULL);
    json_int_t expires = 0;
    const char *guard = "";
    json_unpack(ans, "{s?I,s?s}", "expires_at_ms", &expires, "guard", &guard);
    struct order_row r = {.qty = o->qty, .remaining = -1};
    snprintf(r.sku, sizeof(r.sku), "%s", o->sku);
    snprintf(r.lines, sizeof(r.lines), "%s", o->lines);
    snprintf(r.guard, sizeof(r.guard), "%s", guard);
    snprintf(r.status, sizeof(r.status), "awaiting_payment");
    json_decref(ans);
    long long n = order_store_await(db, o->order_id, r.guard, "", o->pay_within_ms);
    if (n == 1) {
        http_json(resp, 201, awaiting_json(o->order_id, &r, expires));
        return;
    }
    /* Still pending (the write failed) or claimed by the reconciler: it
     * gives the hold back after the order's budget; the inventory's
     * sweeper would anyway at the hold's deadline. */
    snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
    http_error(resp, 503, "backend_unavailable", "order %s was reserved but could not be "
               "recorded (%s); its hold is given back", o->order_id,
               n < 0 ? db->errstr : "settled meanwhile");
}

int order_hold_existing(const char *order_id, const struct order_row *r,
                        struct http_resp *resp)
{
    if (strcmp(r->status, "awaiting_payment") == 0 || strcmp(r->status, "paid") == 0) {
        json_t *j = awaiting_json(order_id, r, 0);
        if (j)
            json_object_set_new(j, "duplicate", json_true());
        http_json(resp, 201, j);
        return 1;
    }
    if (strcmp(r->status, "expired") == 0) {
        http_error(resp, 409, "hold_expired", "order %s was not paid in time; its units were "
                   "given back; use a new order_id to buy again", order_id);
        return 1;
    }
    return 0;
}

/* Confirm order_id on the instances in turn until one answers. Returns 0
 * with a filled, -1 when none answered. */
static int confirm_any(const struct order_conf *c, const char *order_id,
                       struct invc_answer *a)
{
    char body[ROUTE_PARAM_MAX + 32];
    snprintf(body, sizeof(body), "{\"order_id\":\"%s\"}", order_id);
    for (int i = 0; i < c->nurls; i++)
        if (invc_call(c->urls[i], "/inventory/confirm", body, NULL, c->inventory_timeout_ms,
                      c->connect_timeout_ms, a) == 0)
            return 0;
    return -1;
}

static int is_error(const struct invc_answer *a, const char *code)
{
    json_t *j = json_loads(a->body, 0, NULL);
    const char *e = json_string_value(json_object_get(j, "error"));
    int yes = e && strcmp(e, code) == 0;
    json_decref(j);
    return yes;
}

static void answer_expired(struct db_conn *db, const char *order_id, struct http_resp *resp)
{
    order_store_expire(db, order_id);   /* 0: expired or settled already */
    http_error(resp, 409, "hold_expired", "order %s was not paid within its pay_within_ms; "
               "its units were given back and the payment is refused", order_id);
}

/* The confirm answered 200: the row becomes paid, unless the reconciler
 * claimed it meanwhile (it then gives the sale back: refused). */
static void answer_paid(struct db_conn *db, const char *order_id, const struct order_row *r,
                        const struct invc_answer *a, struct http_resp *resp)
{
    json_t *ans = json_loads(a->body, 0, NULL);
    json_int_t remaining = -1;
    json_unpack(ans, "{s?I}", "remaining", &remaining);
    json_decref(ans);
    long long n = order_store_pay(db, order_id, remaining);
    if (n != 1) {
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, n < 0 ? 503 : 409, n < 0 ? "backend_unavailable" : "hold_expired",
                   "order %s: the payment could not be recorded%s", order_id,
                   n < 0 ? "; repeat it (the confirm is idempotent)" : ": it expired meanwhile");
        return;
    }
    http_json(resp, 200, json_pack("{s:b,s:s,s:s,s:I,s:s,s:I}", "ok", 1, "order_id", order_id,
                                   "sku", r->sku, "qty", (json_int_t)r->qty, "status", "paid",
                                   "remaining", (json_int_t)remaining));
}

static void pay(const struct order_conf *c, struct db_conn *db, const char *order_id,
                const struct order_row *r, struct http_resp *resp)
{
    long long open = order_store_pay_open(db, order_id);
    if (open == 0) {
        answer_expired(db, order_id, resp);
        return;
    }
    struct invc_answer *a = malloc(sizeof(*a));
    if (open < 0 || !a || confirm_any(c, order_id, a) != 0) {
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 503, "backend_unavailable", "order %s: %s; repeat the payment",
                   order_id, open < 0 ? "order database unavailable" : "no inventory answered");
    } else if (a->status == 200) {
        answer_paid(db, order_id, r, a, resp);
    } else if (a->status == 409 && is_error(a, "hold_expired")) {
        answer_expired(db, order_id, resp);
    } else {
        if (a->retry_after[0])
            snprintf(resp->retry_after, sizeof(resp->retry_after), "%s", a->retry_after);
        http_text(resp, (int)a->status, "application/json", strdup(a->body));
    }
    free(a);
}

void order_route_pay(void *app, struct route_call *call, const struct http_req *req,
                     struct http_resp *resp)
{
    const struct order_conf *c = app;
    const char *order_id = call->param;
    char err[256];
    if (req_check_id("order_id", order_id, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        return;
    }
    if (req->body_len) {
        http_error(resp, 400, "bad_request", "POST /orders/{id}/pay takes no body");
        return;
    }
    struct db_conn *db = db_thread_conn(&c->db);
    struct order_row r;
    long long n = db ? order_store_get(db, order_id, &r) : DB_EUNAVAIL;
    if (n < 0) {
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 503, "backend_unavailable", "order database unavailable");
    } else if (n == 0) {
        http_error(resp, 404, "unknown_order", "no order %s", order_id);
    } else if (strcmp(r.status, "paid") == 0) {
        http_json(resp, 200, json_pack("{s:b,s:s,s:s,s:b}", "ok", 1, "order_id", order_id,
                                       "status", "paid", "duplicate", 1));
    } else if (strcmp(r.status, "awaiting_payment") == 0) {
        pay(c, db, order_id, &r, resp);
    } else if (strcmp(r.status, "expired") == 0 || strcmp(r.status, "releasing") == 0) {
        http_error(resp, 409, "hold_expired", "order %s was not paid in time", order_id);
    } else {
        http_error(resp, 409, "not_awaiting_payment", "order %s is %s: nothing to pay",
                   order_id, r.status);
    }
}
