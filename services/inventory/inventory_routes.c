/* Inventory routes: parse, pick the guard, call the guard layer, answer
 * per services/API.md. No SQL and no Redis here. */
#include "inventory_routes.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/service.h"
#include "base/util.h"
#include "guards/guard.h"
#include "guards/core/hold_entry.h"
#include "stock/audit.h"
#include "cluster_audit.h"
#include "hold_routes.h"
#include "inv_request.h"
#include "stock/request.h"
#include "stock/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void store_failure(struct http_resp *resp, struct db_conn *db, int rc)
{
    if (rc == DB_EUNAVAIL)
        inv_db_down(resp, db);
    else
        http_error(resp, 500, "internal", "MySQL error: %s", db->errstr);
}

static void answer_deduct(const struct deduct_req *dr, const struct deduct_res *r,
                          struct http_resp *resp)
{
    switch (r->outcome) {
    case DEDUCT_SOLD:
    case DEDUCT_DUPLICATE: {
        json_t *j = json_pack("{s:b,s:s,s:i,s:I,s:s,s:s,s:s}", "ok", 1, "sku", dr->sku,
                              "qty", (int)r->qty, "remaining", (json_int_t)r->remaining,
                              "order_id", dr->order_id, "guard", r->guard,
                              "instance", r->instance);
        if (j && r->outcome == DEDUCT_DUPLICATE)
            json_object_set_new(j, "duplicate", json_true());
        if (j && r->retries)
            json_object_set_new(j, "retries", json_integer(r->retries));
        http_json(resp, 200, j);
        return;
    }
    default:
        break;
    }
    /* Outcomes whose detail a guard may leave empty get the API's wording. */
    char msg[256];
    const char *detail = NULL;
    if (r->outcome == DEDUCT_OUT_OF_STOCK && !r->detail[0]) {
        snprintf(msg, sizeof(msg), "%s has %lld left, %ld requested", dr->sku, r->remaining,
                 dr->qty);
        detail = msg;
    } else if (r->outcome == DEDUCT_UNKNOWN_SKU) {
        snprintf(msg, sizeof(msg), "no SKU '%s' (seed it with PUT /inventory/%s)", dr->sku,
                 dr->sku);
        detail = msg;
    } else if (r->outcome == DEDUCT_LOCK_TIMEOUT && !r->detail[0]) {
        detail = "lock wait timed out";
    }
    inv_answer_failure(r, detail, resp);
}

/* Room past lock_wait_ms + hold_ms for the MySQL round trips of a sale. */
#define DEADLINE_MARGIN_MS 1000
/* What a caller's X-Deadline-Ms is trimmed by: the answer's trip back. */
#define DEADLINE_CALLER_SLACK_MS 50

/* One deadline for the whole request, every retry included: lock_wait_ms
 * + hold_ms + a margin from the first byte, or sooner when the caller says
 * it stops waiting sooner (X-Deadline-Ms: its remaining budget). The lock
 * wait is trimmed to what the deadline leaves after hold_ms. Returns -1
 * after answering (bad header, or no time left). */
static int set_deadline(const struct http_req *req, struct deduct_req *dr,
                        struct http_resp *resp)
{
    double budget_ms = (double)(dr->lock_wait_ms + dr->hold_ms + DEADLINE_MARGIN_MS);
    const char *h = http_header(req, "X-Deadline-Ms");
    if (h) {
        char *end;
        long ms = strtol(h, &end, 10);
        if (end == h || *end || ms < 1 || ms > 3600000) {
            http_error(resp, 400, "bad_request",
                       "X-Deadline-Ms must be an integer 1..3600000 (milliseconds)");
            return -1;
        }
        if (ms - DEADLINE_CALLER_SLACK_MS < budget_ms)
            budget_ms = (double)(ms - DEADLINE_CALLER_SLACK_MS);
    }
    dr->deadline = req->started + budget_ms / 1000.0;
    long left_ms = (long)(deduct_time_left(dr) * 1000.0) - dr->hold_ms;
    if (budget_ms <= 0 || left_ms <= 0) {
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 503, "deadline_exceeded",
                   "the caller's deadline leaves no time for hold_ms %ld", dr->hold_ms);
        return -1;
    }
    if (dr->lock_wait_ms > left_ms)
        dr->lock_wait_ms = left_ms;
    return 0;
}

/* A write-behind guard answers without MySQL: neither a connection nor
 * its idle ping on the request path, and MySQL may be down. */
static int env_for_guard(const struct inv_conf *c, const struct guard *g,
                         struct deduct_env *env, struct http_resp *resp)
{
    if (!guard_has(g, GUARD_NO_MYSQL_DEDUCT))
        return inv_env_ready(c, env, resp);
    memset(env, 0, sizeof(*env));
    env->instance = c->instance;
    env->max_retries = c->max_retries;
    env->default_ttl_ms = c->lock_ttl_ms;
    env->default_wait_ms = c->lock_wait_ms;
    return 0;
}

/* body: the deduct body, parsed once (req_body_object), whose fields
 * beyond the sale's own the chosen guard must accept; NULL (the seeds'
 * GET): the guard's defaults. */
static void run_deduct(const struct inv_conf *c, struct route_call *call,
                       const struct http_req *req, struct deduct_req *dr,
                       const char *body_guard, json_t *body, struct http_resp *resp)
{
    const struct guard *g = inv_pick_guard(c, req, body_guard, resp);
    if (!g)
        return;
    struct guard_opts opts;   /* dr->opts points here until the answer */
    char err[512];
    if (body && guard_opts_from(g, body, &opts, &dr->opts, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        return;
    }
    if (set_deadline(req, dr, resp) != 0)
        return;
    call->tag = g->name;
    if (!dr->order_id[0])
        util_make_id(dr->order_id, sizeof(dr->order_id), c->instance);
    struct deduct_env env;
    if (env_for_guard(c, g, &env, resp) != 0)
        return;
    struct deduct_res r;
    guard_deduct(g, &env, dr, &r);
    answer_deduct(dr, &r, resp);
}

static void answer_cart(const struct cart *cart, const struct cart_res *r,
                        struct http_resp *resp)
{
    if (r->base.outcome == DEDUCT_SOLD || r->base.outcome == DEDUCT_DUPLICATE) {
        http_json(resp, 200, cart_answer_json(cart, r));
        return;
    }
    if (r->base.outcome != DEDUCT_OUT_OF_STOCK) {
        inv_answer_failure(&r->base, NULL, resp);
        return;
    }
    json_t *j = json_pack("{s:s,s:s,s:o}", "error", "out_of_stock", "detail",
                          "the cart was refused: nothing was sold; every short line is "
                          "listed in \"short\"", "short", cart_short_json(r));
    http_json(resp, 409, j);
}

/* A cart (the body's "lines"): the guard's options, the deadline, the
 * guard's cart sale. */
static void run_cart(const struct inv_conf *c, struct route_call *call,
                     const struct http_req *req, struct cart *cart, const char *body_guard,
                     json_t *body, struct http_resp *resp)
{
    const struct guard *g = inv_pick_guard(c, req, body_guard, resp);
    if (!g)
        return;
    struct guard_opts opts;
    char err[512];
    if (guard_opts_from(g, body, &opts, &cart->req.opts, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        return;
    }
    if (set_deadline(req, &cart->req, resp) != 0)
        return;
    call->tag = g->name;
    if (!cart->req.order_id[0])
        util_make_id(cart->req.order_id, sizeof(cart->req.order_id), c->instance);
    struct deduct_env env;
    if (g->deduct_cart && inv_env_ready(c, &env, resp) != 0)
        return;
    struct cart_res r;
    guard_deduct_cart(g, g->deduct_cart ? &env : NULL, cart, &r);
    answer_cart(cart, &r, resp);
}

static void route_deduct(void *app, struct route_call *call, const struct http_req *req,
                         struct http_resp *resp)
{
    const struct inv_conf *c = app;
    struct req_defaults d = {c->lock_wait_ms};
    struct cart cart;
    char guard[32], err[256];
    int lines = -1;
    json_t *body = req_body_object(req->body, req->body_len, err, sizeof(err));
    if (!body || req_deduct_from(body, &d, &cart.req, guard, sizeof(guard), err,
                                 sizeof(err)) != 0 ||
        (lines = cart_from(body, &cart, err, sizeof(err))) < 0)
        http_error(resp, 400, "bad_request", "%s", err);
    else if (lines == 0)
        run_cart(c, call, req, &cart, guard, body, resp);
    else
        run_deduct(c, call, req, &cart.req, guard, body, resp);
    json_decref(body);
}

/* The seeds' own endpoint: GET /inventory/minusInventory?inventoryId=SKU */
static void route_minus(void *app, struct route_call *call, const struct http_req *req,
                        struct http_resp *resp)
{
    const struct inv_conf *c = app;
    struct req_defaults d = {c->lock_wait_ms};
    struct deduct_req dr;
    char err[256];
    req_default_deduct(&d, &dr);
    const char *sku = http_query(req, "inventoryId");
    if (!sku || req_check_id("inventoryId", sku, err, sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", sku ? err : "inventoryId is required");
        return;
    }
    snprintf(dr.sku, sizeof(dr.sku), "%s", sku);
    run_deduct(c, call, req, &dr, NULL, NULL, resp);
}

/* The 200 of a release: the sale's sku and qty, or a cart's "lines"
 * (every line given back), then released (or duplicate: given back
 * before). */
static json_t *release_answer(const char *order_id, const struct ledger_row *rows, int nrows,
                              int released, int side_ok)
{
    json_t *j = json_pack("{s:b,s:s}", "ok", 1, "order_id", order_id);
    if (!j)
        return NULL;
    if (nrows > 1) {
        json_t *lines = json_array();
        for (int i = 0; lines && i < nrows; i++)
            json_array_append_new(lines, json_pack("{s:s,s:I}", "sku", rows[i].sku, "qty",
                                                   (json_int_t)rows[i].qty));
        json_object_set_new(j, "lines", lines);
    } else {
        json_object_set_new(j, "sku", json_string(rows[0].sku));
        json_object_set_new(j, "qty", json_integer((json_int_t)rows[0].qty));
    }
    if (released) {
        json_object_set_new(j, "released", json_true());
        json_object_set_new(j, "side_state_restored", json_boolean(side_ok));
    } else {
        json_object_set_new(j, "duplicate", json_true());
    }
    return j;
}

static void route_release(void *app, struct route_call *call, const struct http_req *req,
                          struct http_resp *resp)
{
    const struct inv_conf *c = app;
    char order_id[STOCK_ID_MAX + 1], err[256];
    /* Giving units back is an admin act: a stranger could release someone
     * else's order and keep the goods. */
    if (service_admin_check(c->admin_token, req, resp) != 0)
        return;
    if (req_parse_release(req->body, req->body_len, order_id, sizeof(order_id), err,
                          sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        return;
    }
    struct deduct_env env;
    if (inv_env_ready(c, &env, resp) != 0)
        return;
    struct ledger_row rows[CART_LINES_MAX];
    struct deduct_res r;
    int side_ok, nrows;
    int rc = guard_release_lines(&env, order_id, rows, &nrows, &side_ok, &r);
    switch (rc) {
    case STOCK_RELEASED:
    case STOCK_ALREADY_RELEASED:
        http_json(resp, 200, release_answer(order_id, rows, nrows, rc == STOCK_RELEASED,
                                            side_ok));
        return;
    case STOCK_UNKNOWN_ORDER:
        /* not a sale: a hold's units go back as a sale's would */
        if (inv_hold_release(&env, order_id, resp))
            return;
        http_error(resp, 404, "unknown_order", "no recorded deduction or hold for order "
                   "'%s'", order_id);
        return;
    default:
        inv_answer_failure(&r, NULL, resp);
    }
}

static void route_seed(void *app, struct route_call *call, const struct http_req *req,
                       struct http_resp *resp)
{
    const struct inv_conf *c = app;
    const char *sku = call->param;
    long long stock, limit;
    int segments;
    char err[256];
    /* A reseed wipes the SKU's ledger, the audit's evidence. */
    if (service_admin_check(c->admin_token, req, resp) != 0)
        return;
    if (req_parse_seed_limit(req->body, req->body_len, &stock, &segments, &limit, err,
                             sizeof(err)) != 0) {
        http_error(resp, 400, "bad_request", "%s", err);
        return;
    }
    struct deduct_env env;
    if (inv_env_ready(c, &env, resp) != 0)
        return;
    struct deduct_res r;
    if (guard_seed_limit(&env, sku, stock, segments, limit, &r) != 0) {
        inv_answer_failure(&r, NULL, resp);
        return;
    }
    /* The version goes on counting across reseeds: report the real one. */
    long long now_stock = stock, version = 0, initial = stock;
    int now_segments = segments;
    if (store_info(env.db, sku, &now_stock, &version, &initial, &now_segments) < 0)
        version = -1;   /* committed; only the echo failed */
    http_json(resp, 200, json_pack("{s:b,s:s,s:I,s:I,s:I,s:i,s:I}", "ok", 1, "sku", sku,
                                   "stock", (json_int_t)stock, "initial", (json_int_t)stock,
                                   "version", (json_int_t)version, "segments", segments,
                                   "limit_per_user", (json_int_t)limit));
}

static void route_state(void *app, struct route_call *call, const struct http_req *req,
                        struct http_resp *resp)
{
    const struct inv_conf *c = app;
    const char *sku = call->param;
    struct deduct_env env;
    if (inv_env_ready(c, &env, resp) != 0)
        return;
    struct db_conn *db = env.db;
    long long stock, version, initial;
    int segments;
    int rc = store_info(db, sku, &stock, &version, &initial, &segments);
    if (rc < 0) {
        store_failure(resp, db, rc);
        return;
    }
    if (rc == 0) {
        http_error(resp, 404, "unknown_sku", "no SKU '%s'", sku);
        return;
    }
    long long limit = 0;
    if ((rc = store_limit_of(db, sku, &limit)) < 0) {
        store_failure(resp, db, rc);
        return;
    }
    json_t *j = json_pack("{s:s,s:I,s:I,s:I,s:i,s:[],s:I}", "sku", sku, "stock",
                          (json_int_t)stock, "version", (json_int_t)version, "initial",
                          (json_int_t)initial, "segment_count", segments, "segments",
                          "limit_per_user", (json_int_t)limit);
    inv_hold_state(db, sku, stock, j);
    struct guard_facts facts;
    guard_describe(sku, &facts);
    for (int i = 0; j && i < facts.n; i++) {
        const struct guard_fact *f = &facts.fact[i];
        json_t *v = f->is_list ? json_array() : json_integer(f->values[0]);
        for (int k = 0; f->is_list && k < f->n; k++)
            json_array_append_new(v, json_integer(f->values[k]));
        json_object_set_new(j, f->name, v);
    }
    http_json(resp, 200, j);
}

/* A Galera cluster: every node's own stock and ledger, once they applied
 * the same write sets. Nodes that disagree make the audit inconsistent
 * (a divergence, a verdict of its own). */
static void add_cluster_view(const struct cluster_audit *cap, int n, json_t *j)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < (n > 0 ? n : 0); i++) {
        const struct cluster_node *nd = &cap->node[i];
        json_t *o = nd->ok ? json_pack("{s:s,s:b,s:I,s:I,s:I,s:I,s:s}", "node", nd->addr,
                                       "ok", 1, "stock", (json_int_t)nd->stock, "sold",
                                       (json_int_t)nd->sold, "ledger_rows",
                                       (json_int_t)nd->ledger_rows, "last_committed",
                                       (json_int_t)nd->last_committed, "state", nd->state)
                           : json_pack("{s:s,s:b,s:s}", "node", nd->addr, "ok", 0, "error",
                                       nd->error);
        if (o)
            json_array_append_new(arr, o);
    }
    json_object_set_new(j, "nodes", arr ? arr : json_null());
    json_object_set_new(j, "converged", n > 0 ? json_boolean(cap->converged) : json_null());
    json_object_set_new(j, "converge_wait_s", json_real(n > 0 ? cap->waited_s : 0.0));
    if (n > 0 && !cap->converged)
        json_object_set_new(j, "consistent", json_false());
}

/* The order ids of a comma-separated audit list as a JSON array. */
static json_t *order_ids(const char *csv)
{
    char ids[AUDIT_UNMOVED_MAX];
    json_t *arr = json_array();
    snprintf(ids, sizeof(ids), "%s", csv);
    for (char *save = NULL, *id = strtok_r(ids, ",", &save); arr && id;
         id = strtok_r(NULL, ",", &save))
        json_array_append_new(arr, json_string(id));
    return arr ? arr : json_null();
}

/* The audit's purchase-limit figures: limit_per_user, over_limit and
 * over_limit_users [{user_id, bought, limit}] from "user=bought,...". */
static void add_over_limit(const struct audit *a, json_t *j)
{
    char list[AUDIT_UNMOVED_MAX];
    json_t *arr = json_array();
    snprintf(list, sizeof(list), "%s", a->over_limit_users);
    for (char *save = NULL, *u = strtok_r(list, ",", &save); arr && u;
         u = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(u, '=');
        if (!eq)
            continue;
        *eq = '\0';
        json_array_append_new(arr, json_pack("{s:s,s:I,s:I}", "user_id", u, "bought",
                                             (json_int_t)strtoll(eq + 1, NULL, 10), "limit",
                                             (json_int_t)a->limit));
    }
    json_object_set_new(j, "limit_per_user", json_integer(a->limit));
    json_object_set_new(j, "over_limit", json_integer(a->over_limit));
    json_object_set_new(j, "over_limit_users", arr ? arr : json_null());
}

/* Why the audit says what it says: `why` (words, null when consistent),
 * each drift's terms, the settlements that moved Redis without a sale
 * (and those the ledger contradicts), the ledger rows without a stock
 * move. Called last: a cluster that did not converge has made
 * `consistent` false already. */
static void add_audit_why(const struct audit *a, json_t *j)
{
    char why[2048];
    audit_why(a, why, sizeof(why));
    if (!why[0] && json_is_false(json_object_get(j, "consistent")))
        snprintf(why, sizeof(why), "the cluster's nodes did not converge (see nodes)");
    json_object_set_new(j, "why", why[0] ? json_string(why) : json_null());
    json_t *detail = json_object();
    for (int i = 0; detail && i < a->nsides; i++)
        json_object_set_new(detail, a->side[i].guard,
                            json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "redis_stock",
                                      (json_int_t)a->side[i].redis_stock, "mysql_stock",
                                      (json_int_t)a->stock, "pending_units",
                                      (json_int_t)a->side[i].pending_units, "in_flight_units",
                                      (json_int_t)a->side[i].in_flight_units, "stale_intents",
                                      (json_int_t)a->side[i].stale_intents, "held",
                                      (json_int_t)a->side[i].held));
    json_object_set_new(j, "drift_terms", detail ? detail : json_null());
    json_t *settled = json_loads(a->settled, 0, NULL);
    json_object_set_new(j, "settled_intents", json_is_array(settled) ? settled : json_array());
    if (settled && !json_is_array(settled))
        json_decref(settled);
    json_object_set_new(j, "unmoved_orders", order_ids(a->unmoved));
    json_object_set_new(j, "landed_late", order_ids(a->landed_late));
}

static void route_audit(void *app, struct route_call *call, const struct http_req *req,
                        struct http_resp *resp)
{
    const struct inv_conf *c = app;
    const char *sku = call->param;
    struct deduct_env env;
    if (inv_env_ready(c, &env, resp) != 0)
        return;
    struct db_conn *db = env.db;
    /* On a cluster the nodes are read first, once they converged: this
     * node's audit below then sees every sale the others committed. */
    struct cluster_audit ca;
    int ncluster = c->mysql_nodes[0]
                       ? cluster_audit_read(&c->db, c->mysql_nodes, sku, c->cluster_wait_ms, &ca)
                       : 0;
    struct audit a;
    int rc = guard_audit(db, sku, &a);
    if (rc < 0) {
        store_failure(resp, db, rc);
        return;
    }
    if (rc == 0) {
        http_error(resp, 404, "unknown_sku", "no SKU '%s'", sku);
        return;
    }
    json_t *j = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:b}", "sku", sku,
                          "initial", (json_int_t)a.initial, "stock", (json_int_t)a.stock,
                          "sold", (json_int_t)a.sold, "oversold", (json_int_t)a.oversold,
                          "lost_updates", (json_int_t)a.lost_updates, "consistent",
                          a.consistent);
    /* Write-behind sales answered but not in MySQL yet: the audit above is
     * exact once they are 0 (null: their backend could not be read). The
     * drift: Redis apart from MySQL, per Redis-stock guard that sold. */
    if (j) {
        json_object_set_new(j, "pending", a.pending_known ? json_integer(a.pending)
                                                          : json_null());
        json_object_set_new(j, "pending_units", a.pending_known
                                                    ? json_integer(a.pending_units)
                                                    : json_null());
        json_object_set_new(j, "drift", a.drift_known ? json_integer(a.drift) : json_null());
        json_object_set_new(j, "held", json_integer(a.held));
        json_object_set_new(j, "held_redis", json_integer(a.held_redis));
        json_object_set_new(j, "expired_unswept", json_integer(a.expired_unswept));
        json_object_set_new(j, "late_confirms", order_ids(a.late_confirms));
        json_t *by = json_object();
        for (int i = 0; by && i < a.nsides; i++)
            json_object_set_new(by, a.side[i].guard, json_integer(a.side[i].drift));
        json_object_set_new(j, "drift_by_guard", by ? by : json_null());
        add_over_limit(&a, j);
        if (c->mysql_nodes[0])
            add_cluster_view(&ca, ncluster, j);
        add_audit_why(&a, j);
    }
    http_json(resp, 200, j);
}

static json_t *guards_json(const struct inv_conf *c)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, guard_json(all[i]));
    return json_pack("{s:s,s:o}", "default", c->guard, "guards", arr);
}

char *inv_guards_text(const struct inv_conf *c)
{
    json_t *j = guards_json(c);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

/* Built once by inv_routes_init (the guard table never changes while the
 * process runs): serializing ~2.5 KB of JSON per request cost 4-5x the
 * whole HTTP path. */
static char *guards_body;
static size_t guards_len;

static void answer_copy(struct http_resp *resp, const char *body, size_t len)
{
    char *b = body ? malloc(len + 1) : NULL;
    if (!b) {
        http_error(resp, 500, "internal", "out of memory");
        return;
    }
    memcpy(b, body, len + 1);
    http_text(resp, 200, "application/json", b);
}

static void route_guards(void *app, struct route_call *call, const struct http_req *req,
                         struct http_resp *resp)
{
    const struct inv_conf *c = app;
    if (guards_body)
        answer_copy(resp, guards_body, guards_len);
    else
        http_json(resp, 200, guards_json(c));
}

/* Liveness: the process answers HTTP; no backend is asked (that is
 * /healthz's job), so an orchestrator never restarts a live instance
 * because MySQL is slow. */
static char live_body[160];
static size_t live_len;

void inv_routes_init(const struct inv_conf *c)
{
    json_t *j = json_pack("{s:b,s:s,s:s}", "ok", 1, "service", "inventory", "instance",
                          c->instance);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    snprintf(live_body, sizeof(live_body), "%s", s ? s : "{\"ok\":true}");
    live_len = strlen(live_body);
    free(s);
    guards_body = inv_guards_text(c);   /* NULL: built per request */
    guards_len = guards_body ? strlen(guards_body) : 0;
}

/* The body is built once (inv_routes_init): a probe costs no JSON work. */
static void route_live(void *app, struct route_call *call, const struct http_req *req,
                       struct http_resp *resp)
{
    answer_copy(resp, live_body, live_len);
}

int inv_warm(void *app)
{
    const struct inv_conf *c = app;
    struct db_conn *db = db_thread_conn(&c->db);
    if (!db || !db->my || db_ping(db) != DB_OK)
        return -1;
    /* The session's row-lock wait as a default request wants it: the
     * first sale of this worker sends no SET before its transaction. */
    if (db_set_lock_wait(db, c->lock_wait_ms) != DB_OK)
        return -1;
    /* Redis: a pooled connection opened (or checked) by this worker, so
     * the pool holds about one per worker when the first sales come. */
    const char *up[8], *down = NULL;
    size_t nup;
    char err[160];
    return guard_health(up, 8, &nup, &down, err, sizeof(err)) == 0 ? 0 : -1;
}

static void route_health(void *app, struct route_call *call, const struct http_req *req,
                         struct http_resp *resp)
{
    const struct inv_conf *c = app;
    if (service_mysql_health(&c->db, resp) != 0 || service_warm_health(resp) != 0)
        return;
    const char *up[8], *down = NULL;
    size_t nup;
    char err[160];
    if (guard_health(up, 8, &nup, &down, err, sizeof(err)) != 0) {
        http_error(resp, 503, "backend_unavailable", "%s: %s", down, err);
        return;
    }
    json_t *j = json_pack("{s:b,s:s,s:s}", "ok", 1, "instance", c->instance, "mysql", "up");
    service_mysql_fields(&c->db, j);
    for (size_t i = 0; j && i < nup; i++)
        json_object_set_new(j, up[i], json_string("up"));
    http_json(resp, 200, j);
}

static void route_metrics(void *app, struct route_call *call, const struct http_req *req,
                          struct http_resp *resp)
{
    guard_export_metrics();
    service_metrics(req, resp);
}

/* services/API.md, one row per path and method set (lib/base/routes.h;
 * body 0: the server's 16 KiB cap). The exact /inventory/ paths come
 * before /inventory/{sku}, which they would also fit. */
static const struct route inv_route_rows[] = {
    /* path                     methods     handler        label          body thread      check */
    {"/inventory/deduct",       ROUTE_POST, route_deduct,  "deduct",        0, ROUTE_WORKER, NULL},
    {"/inventory/release",      ROUTE_POST, route_release, "release",       0, ROUTE_WORKER, NULL},
    {"/inventory/reserve",      ROUTE_POST, inv_route_reserve, "reserve",   0, ROUTE_WORKER, NULL},
    {"/inventory/confirm",      ROUTE_POST, inv_route_confirm, "confirm",   0, ROUTE_WORKER, NULL},
    {"/inventory/sweep",        ROUTE_POST, inv_route_sweep, "sweep",       0, ROUTE_WORKER, NULL},
    {"/inventory/minusInventory", ROUTE_GET, route_minus,  "minusInventory", 0, ROUTE_WORKER, NULL},
    /* the static guard table and a constant: no hand-off */
    {"/guards",                 ROUTE_GET,  route_guards,  "guards",        0, ROUTE_INLINE, NULL},
    {"/livez",                  ROUTE_GET,  route_live,    "livez",         0, ROUTE_INLINE, NULL},
    {"/healthz",                ROUTE_GET,  route_health,  "healthz",       0, ROUTE_CONTROL, NULL},
    {"/metrics",                ROUTE_GET,  route_metrics, "metrics",       0, ROUTE_CONTROL, NULL},
    {"/inventory/{sku}/audit",  ROUTE_GET,  route_audit,   "audit",         0, ROUTE_WORKER, req_check_sku_n},
    {"/inventory/{sku}",        ROUTE_GET,  route_state,   "sku",           0, ROUTE_WORKER, req_check_sku_n},
    {"/inventory/{sku}",        ROUTE_PUT,  route_seed,    "sku",           0, ROUTE_WORKER, req_check_sku_n},
    {NULL, 0, NULL, NULL, 0, ROUTE_WORKER, NULL},
};

const struct route_table inv_routes = {"inventory", inv_route_rows, "guard"};

void inv_handle(void *app, const struct http_req *req, struct http_resp *resp)
{
    const struct inv_conf *c = app;
    route_dispatch(&inv_routes, c->instance, app, req, resp);
}
