/* The HTTP edge and access: non-UTF-8 input is a 400 (never a
 * 500), POST/PUT need application/json (415), every error we can answer is
 * the JSON body, reseed/release need the admin token when one is set,
 * /healthz answers while every worker holds a sale, and the services log in
 * to MariaDB as the least-privilege account. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOKEN "edge-s3cret"

static int tok_pid = -1;        /* the extra inventory instance with a token */
static char tok_url[128];

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static int group_setup(void **state)
{
    if (it_setup() != 0)
        return -1;
    /* A port inside the stack's reserved range (order port + 30 is unused). */
    long base = 0;
    sscanf(it.order, "http://127.0.0.1:%ld", &base);
    long port = base + 30;
    snprintf(tok_url, sizeof(tok_url), "http://127.0.0.1:%ld", port);
    static const char *const env[] = {"LAB_ADMIN_TOKEN=" TOKEN, NULL};
    static const char *const args[] = {"--threads", "4", "--guard", "none", NULL};
    tok_pid = it_start_inventory("inventory-edge-token", port, env, args);
    if (tok_pid < 0)
        fprintf(stderr, "could not start the token instance on %ld\n", port);
    return 0;
}

static int group_teardown(void **state)
{
    it_stop_pid(tok_pid);
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The answer is the API's error body with this code. */
static void assert_error(struct it_resp *r, long status, const char *code)
{
    if (r->status != status || !r->json)
        fprintf(stderr, "expected %ld %s, got %ld: %.300s\n", status, code, r->status, r->body);
    assert_int_equal(r->status, status);
    assert_non_null(r->json);
    assert_true(json_is_false(json_object_get(r->json, "ok")));
    assert_string_equal(json_string_value(json_object_get(r->json, "error")), code);
    assert_non_null(json_string_value(json_object_get(r->json, "detail")));
}

static long long stock_of(const char *sku)
{
    struct it_audit a;
    return it_audit(sku, &a) == 0 ? a.stock : -1;
}

/* ---- non-UTF-8 anywhere: 400, nothing changes ---- */

static void test_invalid_utf8_header_is_400(void **state)
{
    char u[256];
    assert_int_equal(it_seed("T-edge-u8h", 5), 200);
    /* Today: X-Guard's bytes reach the "unknown guard" detail, jansson
     * refuses to encode it, and the answer is 500 internal. */
    snprintf(u, sizeof(u), "%s/inventory/minusInventory?inventoryId=T-edge-u8h", it.inventory[0]);
    const char *const hdr[] = {"X-Guard: gu\xff\xfe", NULL};
    struct it_resp r;
    it_request("GET", u, hdr, NULL, 0, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    /* Any header, on either service, on any route. */
    const char *const other[] = {"X-Anything: \xc3\x28", NULL};
    snprintf(u, sizeof(u), "%s/orders?sku=T-edge-u8h", it.order);
    it_request("GET", u, other, NULL, 0, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    assert_int_equal(stock_of("T-edge-u8h"), 5);
}

static void test_invalid_utf8_path_and_query_are_400(void **state)
{
    char u[256];
    struct it_resp r;
    /* %FF unescapes to a lone 0xFF byte in the SKU. */
    snprintf(u, sizeof(u), "%s/inventory/T-edge-%%FF%%FE", it.inventory[0]);
    it_request("GET", u, NULL, NULL, 0, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    snprintf(u, sizeof(u), "%s/inventory/T-edge-%%C3%%28", it.inventory[1]);
    it_request("PUT", u, json_ct, "{\"stock\":5}", 11, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    snprintf(u, sizeof(u), "%s/inventory/minusInventory?inventoryId=T-edge-%%ED%%A0%%80",
             it.inventory[0]);
    it_request("GET", u, NULL, NULL, 0, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    snprintf(u, sizeof(u), "%s/orders?sku=%%C0%%AF", it.order);   /* overlong '/' */
    it_request("GET", u, NULL, NULL, 0, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    /* Nothing was created under any spelling. */
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.inventory "
                                  "WHERE sku LIKE 'T-edge-%' AND sku NOT LIKE 'T-edge-u8%' "
                                  "AND sku NOT LIKE 'T-edge-ct%' AND sku NOT LIKE 'T-edge-tok%' "
                                  "AND sku NOT LIKE 'T-edge-sat%' AND sku NOT LIKE 'T-edge-user%'"),
                     0);
}

static void test_invalid_utf8_body_is_400(void **state)
{
    char u[256];
    struct it_resp r;
    assert_int_equal(it_seed("T-edge-u8b", 5), 200);
    snprintf(u, sizeof(u), "%s/inventory/deduct", it.inventory[0]);
    static const char body[] = "{\"sku\":\"T-edge-u8b\",\"qty\":1,\"order_id\":\"u8b-\xf5\"}";
    it_request("POST", u, json_ct, body, sizeof(body) - 1, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    snprintf(u, sizeof(u), "%s/orders", it.order);
    static const char obody[] = "{\"sku\":\"T-edge-u8b\",\"qty\":1,\"user_id\":\"\xe2\x82\"}";
    it_request("POST", u, json_ct, obody, sizeof(obody) - 1, &r);
    assert_error(&r, 400, "bad_request");
    it_resp_free(&r);
    assert_int_equal(stock_of("T-edge-u8b"), 5);
}

/* ---- Content-Type: the cross-site text/plain POST ---- */

static void test_post_without_json_type_is_415(void **state)
{
    char u[256];
    struct it_resp r;
    assert_int_equal(it_seed("T-edge-ct", 5), 200);
    snprintf(u, sizeof(u), "%s/inventory/deduct", it.inventory[0]);
    static const char body[] = "{\"sku\":\"T-edge-ct\",\"qty\":1}";
    /* What an HTML form or fetch(no-cors) can send cross-site. */
    const char *const plain[] = {"Content-Type: text/plain", NULL};
    it_request("POST", u, plain, body, sizeof(body) - 1, &r);
    assert_error(&r, 415, "unsupported_media_type");
    it_resp_free(&r);
    const char *const form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    it_request("POST", u, form, body, sizeof(body) - 1, &r);
    assert_error(&r, 415, "unsupported_media_type");
    it_resp_free(&r);
    const char *const none[] = {"Content-Type:", NULL};
    it_request("POST", u, none, body, sizeof(body) - 1, &r);
    assert_error(&r, 415, "unsupported_media_type");
    it_resp_free(&r);
    const char *const lookalike[] = {"Content-Type: application/jsonx", NULL};
    it_request("POST", u, lookalike, body, sizeof(body) - 1, &r);
    assert_error(&r, 415, "unsupported_media_type");
    it_resp_free(&r);
    /* Reseed and the order service too. */
    snprintf(u, sizeof(u), "%s/inventory/T-edge-ct", it.inventory[1]);
    it_request("PUT", u, plain, "{\"stock\":99}", 12, &r);
    assert_error(&r, 415, "unsupported_media_type");
    it_resp_free(&r);
    snprintf(u, sizeof(u), "%s/orders", it.order);
    it_request("POST", u, plain, body, sizeof(body) - 1, &r);
    assert_error(&r, 415, "unsupported_media_type");
    it_resp_free(&r);
    assert_int_equal(stock_of("T-edge-ct"), 5);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_order.orders WHERE sku='T-edge-ct'"), 0);

    /* Parameters and case are fine. */
    snprintf(u, sizeof(u), "%s/inventory/deduct", it.inventory[0]);
    const char *const charset[] = {"Content-Type: application/json; charset=utf-8", NULL};
    assert_int_equal(it_request("POST", u, charset, body, sizeof(body) - 1, &r), 200);
    it_resp_free(&r);
    const char *const upper[] = {"Content-Type: Application/JSON", NULL};
    assert_int_equal(it_request("POST", u, upper, body, sizeof(body) - 1, &r), 200);
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit("T-edge-ct", &a), 0);
    assert_int_equal(a.stock, 3);
    assert_int_equal(a.sold, 2);
    assert_true(a.consistent);
}

/* ---- errors raised before a route: still the JSON body ---- */

static void test_edge_errors_are_json(void **state)
{
    char out[8192];
    /* A body over the limit, declared and chunked: our 413, JSON. */
    char req[20480];
    int n = snprintf(req, sizeof(req),
                     "POST /inventory/deduct HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "4000\r\n");
    memset(req + n, 'a', 0x4000);
    n += 0x4000;
    n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n10\r\naaaaaaaaaaaaaaaa\r\n0\r\n\r\n");
    assert_int_equal(it_raw(it.inventory[0], req, (size_t)n, out, sizeof(out)), 413);
    assert_non_null(strstr(out, "Content-Type: application/json"));
    assert_non_null(strstr(out, "\"error\":\"body_too_large\""));
    /* A request the edge refuses before routing, on a keep-alive
     * connection: JSON, and the status line is the edge's. */
    n = snprintf(req, sizeof(req),
                 "PUT /inventory/T-edge-raw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 "Content-Length: 12\r\n\r\n{\"stock\":10}");
    assert_int_equal(it_raw(it.inventory[0], req, (size_t)n, out, sizeof(out)), 415);
    assert_non_null(strstr(out, "Content-Type: application/json"));
    assert_non_null(strstr(out, "\"error\":\"unsupported_media_type\""));
    n = snprintf(req, sizeof(req),
                 "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-A: \x80\r\n\r\n");
    assert_int_equal(it_raw(it.order, req, (size_t)n, out, sizeof(out)), 400);
    assert_non_null(strstr(out, "\"error\":\"bad_request\""));
}

/* ---- the admin token ---- */

/* A known path with a method it does not take: 405, the detail and the
 * Allow header name the methods it does take (RFC 9110 asks for Allow). */
static void test_wrong_method_names_the_allowed_ones(void **state)
{
    const struct {
        const char *base, *method, *path, *allow, *detail;
    } cases[] = {
        {it.inventory[0], "GET", "/inventory/deduct", "POST", "use POST /inventory/deduct"},
        {it.inventory[0], "DELETE", "/inventory/T-edge-allow", "GET, PUT",
         "use GET or PUT /inventory/T-edge-allow"},
        {it.inventory[0], "PUT", "/inventory/T-edge-allow/audit", "GET",
         "use GET /inventory/T-edge-allow/audit"},
        {it.inventory[0], "POST", "/metrics", "GET", "use GET /metrics"},
        {it.order, "DELETE", "/orders", "POST, GET", "use POST or GET /orders"},
        {it.order, "POST", "/order/placeAnOrder", "GET", "use GET /order/placeAnOrder"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char req[512], out[8192], want[128];
        int n = snprintf(req, sizeof(req),
                         "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         "Content-Type: application/json\r\nContent-Length: 0\r\n\r\n",
                         cases[i].method, cases[i].path);
        long status = it_raw(cases[i].base, req, (size_t)n, out, sizeof(out));
        snprintf(want, sizeof(want), "Allow: %s\r\n", cases[i].allow);
        if (status != 405 || !strstr(out, want) || !strstr(out, cases[i].detail))
            fail_msg("%s %s: want 405 with \"%s\" and \"%s\", got:\n%.600s", cases[i].method,
                     cases[i].path, cases[i].allow, cases[i].detail, out);
    }
}

static void test_reseed_and_release_need_the_token(void **state)
{
    if (tok_pid < 0)
        fail_msg("token instance did not start");
    char u[256];
    struct it_resp r;
    snprintf(u, sizeof(u), "%s/inventory/T-edge-tok", tok_url);
    const char *const no_auth[] = {"Content-Type: application/json", NULL};
    const char *const wrong[] = {"Content-Type: application/json",
                                 "Authorization: Bearer not-" TOKEN, NULL};
    const char *const basic[] = {"Content-Type: application/json",
                                 "Authorization: Basic ZWRnZTpzM2NyZXQ=", NULL};
    const char *const right[] = {"Content-Type: application/json",
                                 "Authorization: Bearer " TOKEN, NULL};
    /* Today anyone may reseed (and wipe the ledger). */
    it_request("PUT", u, no_auth, "{\"stock\":5}", 11, &r);
    assert_error(&r, 401, "unauthorized");
    it_resp_free(&r);
    char raw[512], out[4096];
    int n = snprintf(raw, sizeof(raw),
                     "PUT /inventory/T-edge-tok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"stock\":5}");
    assert_int_equal(it_raw(tok_url, raw, (size_t)n, out, sizeof(out)), 401);
    assert_non_null(strstr(out, "WWW-Authenticate: Bearer"));
    it_request("PUT", u, basic, "{\"stock\":5}", 11, &r);
    assert_error(&r, 401, "unauthorized");
    it_resp_free(&r);
    it_request("PUT", u, wrong, "{\"stock\":5}", 11, &r);
    assert_error(&r, 403, "forbidden");
    it_resp_free(&r);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.inventory WHERE sku='T-edge-tok'"), 0);
    assert_int_equal(it_request("PUT", u, right, "{\"stock\":5}", 11, &r), 200);
    it_resp_free(&r);

    /* A sale needs no token; giving it back does. */
    snprintf(u, sizeof(u), "%s/inventory/deduct", tok_url);
    static const char sale[] = "{\"sku\":\"T-edge-tok\",\"qty\":2,\"order_id\":\"edge-tok-1\"}";
    assert_int_equal(it_request("POST", u, no_auth, sale, sizeof(sale) - 1, &r), 200);
    it_resp_free(&r);
    snprintf(u, sizeof(u), "%s/inventory/release", tok_url);
    static const char rel[] = "{\"order_id\":\"edge-tok-1\"}";
    it_request("POST", u, no_auth, rel, sizeof(rel) - 1, &r);
    assert_error(&r, 401, "unauthorized");
    it_resp_free(&r);
    it_request("POST", u, wrong, rel, sizeof(rel) - 1, &r);
    assert_error(&r, 403, "forbidden");
    it_resp_free(&r);
    assert_int_equal(stock_of("T-edge-tok"), 3);
    assert_int_equal(it_request("POST", u, right, rel, sizeof(rel) - 1, &r), 200);
    assert_true(json_is_true(json_object_get(r.json, "released")));
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit("T-edge-tok", &a), 0);
    assert_int_equal(a.stock, 5);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
}

/* ---- /healthz while every worker holds a sale ---- */

struct bg_load { struct it_load l; const char *urls[1]; };

static void *bg_hammer(void *p)
{
    struct bg_load *b = p;
    it_hammer(&b->l);
    return NULL;
}

static void test_healthz_answers_while_workers_are_busy(void **state)
{
    if (tok_pid < 0)
        fail_msg("token instance did not start");
    char u[256];
    struct it_resp r;
    const char *const right[] = {"Content-Type: application/json",
                                 "Authorization: Bearer " TOKEN, NULL};
    snprintf(u, sizeof(u), "%s/inventory/T-edge-sat", tok_url);
    assert_int_equal(it_request("PUT", u, right, "{\"stock\":100}", 13, &r), 200);
    it_resp_free(&r);
    /* 8 sales holding 3 s each on an instance with 4 workers: every worker
     * is inside hold_ms and 4 more wait in the queue. Today the MHD pool
     * threads are the workers, so /healthz waits 3 s or more. */
    char durl[256];
    snprintf(durl, sizeof(durl), "%s/inventory/deduct", tok_url);
    struct bg_load b = {.urls = {durl}};
    b.l = (struct it_load){.total = 8, .clients = 8, .urls = b.urls, .nurls = 1,
                           .method = "POST",
                           .body_fmt = "{\"sku\":\"T-edge-sat\",\"qty\":1,\"hold_ms\":3000,"
                                       "\"order_id\":\"edge-sat-%d\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, bg_hammer, &b), 0);
    struct timespec nap = {0, 700 * 1000000L};
    nanosleep(&nap, NULL);
    snprintf(u, sizeof(u), "%s/healthz", tok_url);
    double t0 = now_s();
    long hs = it_status("GET", u, NULL);
    double health_s = now_s() - t0;
    snprintf(u, sizeof(u), "%s/metrics", tok_url);
    t0 = now_s();
    long ms = it_status("GET", u, NULL);
    double metrics_s = now_s() - t0;
    /* /guards never blocks: answered on the I/O threads, no queue. */
    snprintf(u, sizeof(u), "%s/guards", tok_url);
    t0 = now_s();
    long gs = it_status("GET", u, NULL);
    double guards_s = now_s() - t0;
    pthread_join(t, NULL);
    fprintf(stderr, "saturated: /healthz %ld in %.3f s, /metrics %ld in %.3f s, /guards %ld in %.3f s\n",
            hs, health_s, ms, metrics_s, gs, guards_s);
    assert_int_equal(hs, 200);
    assert_int_equal(ms, 200);
    assert_int_equal(gs, 200);
    assert_true(health_s < 1.0);
    assert_true(metrics_s < 1.0);
    assert_true(guards_s < 1.0);
    /* Every held sale was answered (guard none may lose updates: that is
     * its verdict, not this test's). */
    assert_int_equal(b.l.by_status[200], 8);
}

/* ---- MariaDB: the services are not root ---- */

static void test_services_use_the_least_privilege_account(void **state)
{
    char u[256], user[64], pw[128];
    /* Make sure every service has its connections open. */
    assert_int_equal(it_seed("T-edge-user", 3), 200);
    for (int i = 0; i < 2; i++) {
        snprintf(u, sizeof(u), "%s/inventory/T-edge-user", it.inventory[i]);
        assert_int_equal(it_status("GET", u, NULL), 200);
    }
    snprintf(u, sizeof(u), "%s/orders?sku=T-edge-user", it.order);
    assert_int_equal(it_status("GET", u, NULL), 200);
    assert_int_equal(it_stack_env("APP_DB_USER", user, sizeof(user)), 0);
    assert_int_equal(it_stack_env("APP_DB_PASSWORD", pw, sizeof(pw)), 0);
    assert_string_not_equal(user, "root");
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='%s' "
             "AND DB='db_shopping'", user);
    assert_true(it_sql_value(sql) > 0);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='%s' "
             "AND DB='db_order'", user);
    assert_true(it_sql_value(sql) > 0);
    /* Nobody in the lab's schemas logged in as root. */
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                  "WHERE USER='root' AND DB IN ('db_shopping','db_order')"),
                     0);
    /* The account reads rows, but cannot drop, create or reach other schemas. */
    assert_int_equal(it_sql_value_as(user, pw, "SELECT 7 FROM db_shopping.inventory LIMIT 1"), 7);
    assert_int_equal(it_sql_value_as(user, pw,
                                     "DROP TABLE IF EXISTS db_shopping.edge_no_such; SELECT 7"),
                     -1);
    assert_int_equal(it_sql_value_as(user, pw,
                                     "CREATE TABLE db_order.edge_probe (x INT); SELECT 7"),
                     -1);
    assert_int_equal(it_sql_value_as(user, pw, "SELECT COUNT(*) FROM mysql.user"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_utf8_header_is_400),
        cmocka_unit_test(test_invalid_utf8_path_and_query_are_400),
        cmocka_unit_test(test_invalid_utf8_body_is_400),
        cmocka_unit_test(test_post_without_json_type_is_415),
        cmocka_unit_test(test_edge_errors_are_json),
        cmocka_unit_test(test_wrong_method_names_the_allowed_ones),
        cmocka_unit_test(test_reseed_and_release_need_the_token),
        cmocka_unit_test(test_healthz_answers_while_workers_are_busy),
        cmocka_unit_test(test_services_use_the_least_privilege_account),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
