/* The HTTP contract's edges: idempotent order ids, releases, and every bad
 * input answered with the right status and JSON error while nothing
 * changes and the service keeps serving. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <string.h>

static int group_setup(void **state) { return it_setup(); }

static void url(char *buf, size_t n, const char *path)
{
    snprintf(buf, n, "%s%s", it.inventory[0], path);
}

static void test_repeated_order_id_takes_stock_once(void **state)
{
    char u[256];
    assert_int_equal(it_seed("T-idem", 10), 200);
    url(u, sizeof(u), "/inventory/deduct");
    const char *body = "{\"sku\":\"T-idem\",\"qty\":3,\"order_id\":\"idem-1\",\"guard\":\"for-update\"}";
    struct it_resp r;
    assert_int_equal(it_http("POST", u, body, &r), 200);
    assert_non_null(r.json);
    assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), 7);
    assert_null(json_object_get(r.json, "duplicate"));
    it_resp_free(&r);
    /* Repeat on the other instance and with another guard: same answer. */
    char u2[256];
    snprintf(u2, sizeof(u2), "%s/inventory/deduct", it.inventory[1]);
    const char *again = "{\"sku\":\"T-idem\",\"qty\":3,\"order_id\":\"idem-1\",\"guard\":\"none\"}";
    assert_int_equal(it_http("POST", u2, again, &r), 200);
    assert_true(json_is_true(json_object_get(r.json, "duplicate")));
    assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), 7);
    assert_string_equal(json_string_value(json_object_get(r.json, "guard")), "for-update");
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit("T-idem", &a), 0);
    assert_int_equal(a.stock, 7);
    assert_int_equal(a.sold, 3);
    assert_true(a.consistent);
}

/* A repeat is answered as the first sale whatever the stock says now:
 * after the sale took the last unit (not out_of_stock), and under the
 * same id on a sold-out SKU (order_id_conflict, not out_of_stock), for
 * every MySQL guard, whether it reads the ledger first or lets its own
 * ledger insert (and its refusals) find the repeat. */
static void test_repeat_after_the_last_unit(void **state)
{
    static const char *const guards[] = {"conditional-update", "for-update", "optimistic",
                                         "none", "mutex", "batched-update"};
    char u[256], sku[64], other[64], body[256];
    url(u, sizeof(u), "/inventory/deduct");
    for (size_t i = 0; i < sizeof(guards) / sizeof(guards[0]); i++) {
        snprintf(sku, sizeof(sku), "T-last-%zu", i);
        snprintf(other, sizeof(other), "T-last-other-%zu", i);
        assert_int_equal(it_seed(sku, 2), 200);
        assert_int_equal(it_seed(other, 0), 200);
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"order_id\":\"last-%zu\",\"guard\":\"%s\"}",
                 sku, i, guards[i]);
        char first[256];
        snprintf(first, sizeof(first), "{\"sku\":\"%s\",\"order_id\":\"first-%zu\",\"guard\":\"%s\"}",
                 sku, i, guards[i]);
        struct it_resp r;
        assert_int_equal(it_http("POST", u, first, &r), 200);
        assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), 1);
        it_resp_free(&r);
        assert_int_equal(it_http("POST", u, body, &r), 200);
        assert_null(json_object_get(r.json, "duplicate"));
        assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), 0);
        it_resp_free(&r);
        /* The first sale's repeat: its own remaining, from its ledger row. */
        assert_int_equal(it_http("POST", u, first, &r), 200);
        assert_true(json_is_true(json_object_get(r.json, "duplicate")));
        assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), 1);
        it_resp_free(&r);
        long st = it_http("POST", u, body, &r);
        if (st != 200 || !json_is_true(json_object_get(r.json, "duplicate")))
            fail_msg("%s: a repeat after the last unit answered %ld: %s", guards[i], st, r.body);
        assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), 0);
        it_resp_free(&r);
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"order_id\":\"last-%zu\",\"guard\":\"%s\"}",
                 other, i, guards[i]);
        st = it_http("POST", u, body, &r);
        if (st != 409 || !json_is_string(json_object_get(r.json, "error")) ||
            strcmp(json_string_value(json_object_get(r.json, "error")), "order_id_conflict") != 0)
            fail_msg("%s: the id on a sold-out SKU answered %ld: %s", guards[i], st, r.body);
        it_resp_free(&r);
        struct it_audit a;
        assert_int_equal(it_audit(sku, &a), 0);
        assert_int_equal(a.stock, 0);
        assert_int_equal(a.sold, 2);
        assert_true(a.consistent);
    }
}

static void test_release_gives_stock_back_once(void **state)
{
    char u[256];
    assert_int_equal(it_seed("T-rel", 5), 200);
    url(u, sizeof(u), "/inventory/deduct");
    assert_int_equal(it_status("POST", u, "{\"sku\":\"T-rel\",\"qty\":2,\"order_id\":\"rel-1\"}"), 200);
    url(u, sizeof(u), "/inventory/release");
    struct it_resp r;
    assert_int_equal(it_http("POST", u, "{\"order_id\":\"rel-1\"}", &r), 200);
    assert_null(json_object_get(r.json, "duplicate"));
    it_resp_free(&r);
    assert_int_equal(it_http("POST", u, "{\"order_id\":\"rel-1\"}", &r), 200);
    assert_true(json_is_true(json_object_get(r.json, "duplicate")));
    it_resp_free(&r);
    assert_int_equal(it_status("POST", u, "{\"order_id\":\"rel-unknown\"}"), 404);
    struct it_audit a;
    assert_int_equal(it_audit("T-rel", &a), 0);
    assert_int_equal(a.stock, 5);
    assert_int_equal(a.sold, 0);
    assert_true(a.consistent);
}

static void test_seed_endpoint_minus_inventory(void **state)
{
    char u[256];
    assert_int_equal(it_seed("T-minus", 2), 200);
    url(u, sizeof(u), "/inventory/minusInventory?inventoryId=T-minus");
    assert_int_equal(it_status("GET", u, NULL), 200);
    assert_int_equal(it_status("GET", u, NULL), 200);
    assert_int_equal(it_status("GET", u, NULL), 409);
    url(u, sizeof(u), "/inventory/minusInventory?inventoryId=T-nosuch");
    assert_int_equal(it_status("GET", u, NULL), 404);
}

struct bad_case {
    const char *label, *method, *path, *body;
    long status;
    const char *error;
};

static void test_bad_input_changes_nothing(void **state)
{
    static char big[20000];
    memset(big, 'x', sizeof(big) - 1);
    memcpy(big, "{\"sku\":\"", 8);
    big[sizeof(big) - 3] = '"';
    big[sizeof(big) - 2] = '}';
    char long_sku[128];
    snprintf(long_sku, sizeof(long_sku), "{\"sku\":\"%065d\"}", 0);
    const struct bad_case cases[] = {
        {"malformed json", "POST", "/inventory/deduct", "{\"sku\":", 400, "bad_request"},
        {"not an object", "POST", "/inventory/deduct", "[1,2]", 400, "bad_request"},
        {"empty body", "POST", "/inventory/deduct", NULL, 400, "bad_request"},
        {"sku wrong type", "POST", "/inventory/deduct", "{\"sku\":5}", 400, "bad_request"},
        {"qty zero", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"qty\":0}", 400, "bad_request"},
        {"qty negative", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"qty\":-3}", 400, "bad_request"},
        {"qty too big", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"qty\":1001}", 400, "bad_request"},
        {"qty string", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"qty\":\"1\"}", 400, "bad_request"},
        {"qty float", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"qty\":1.5}", 400, "bad_request"},
        {"sku 65 bytes", "POST", "/inventory/deduct", long_sku, 400, "bad_request"},
        {"sku control char", "POST", "/inventory/deduct", "{\"sku\":\"T-\\u0001bad\"}", 400, "bad_request"},
        {"unknown guard", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"guard\":\"magic\"}", 400, "bad_request"},
        {"hold too long", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"hold_ms\":10001}", 400, "bad_request"},
        {"bad release mode", "POST", "/inventory/deduct", "{\"sku\":\"T-bad\",\"release\":\"yolo\"}", 400, "bad_request"},
        {"unknown sku", "POST", "/inventory/deduct", "{\"sku\":\"T-nosuch\"}", 404, "unknown_sku"},
        {"body too large", "POST", "/inventory/deduct", big, 413, "body_too_large"},
        {"wrong method", "GET", "/inventory/deduct", NULL, 405, "method_not_allowed"},
        {"wrong method put", "DELETE", "/inventory/T-bad", NULL, 405, "method_not_allowed"},
        {"unknown path", "GET", "/nope", NULL, 404, "not_found"},
        {"seed negative", "PUT", "/inventory/T-bad", "{\"stock\":-1}", 400, "bad_request"},
        {"seed no stock", "PUT", "/inventory/T-bad", "{}", 400, "bad_request"},
        {"release no id", "POST", "/inventory/release", "{}", 400, "bad_request"},
        {"minus no id", "GET", "/inventory/minusInventory", NULL, 400, "bad_request"},
    };
    assert_int_equal(it_seed("T-bad", 50), 200);
    char u[512];
    url(u, sizeof(u), "/inventory/deduct");
    assert_int_equal(it_status("POST", u, "{\"sku\":\"T-bad\",\"qty\":4}"), 200);
    struct it_audit before, after;
    assert_int_equal(it_audit("T-bad", &before), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        url(u, sizeof(u), c->path);
        struct it_resp r;
        long s = it_http(c->method, u, c->body, &r);
        if (s != c->status || !r.json ||
            !json_is_false(json_object_get(r.json, "ok")) ||
            strcmp(json_string_value(json_object_get(r.json, "error")) ?: "", c->error) != 0 ||
            !json_is_string(json_object_get(r.json, "detail")))
            fail_msg("%s: got %ld %s, want %ld %s", c->label, s, r.body, c->status, c->error);
        it_resp_free(&r);
    }
    assert_int_equal(it_audit("T-bad", &after), 0);
    assert_memory_equal(&before, &after, sizeof(before));
    url(u, sizeof(u), "/healthz");
    assert_int_equal(it_status("GET", u, NULL), 200);
}

static void test_guard_header_and_listing(void **state)
{
    char u[256];
    assert_int_equal(it_seed("T-hdr", 3), 200);
    url(u, sizeof(u), "/guards");
    struct it_resp r;
    assert_int_equal(it_http("GET", u, NULL, &r), 200);
    json_t *g = json_object_get(r.json, "guards");
    assert_true(json_array_size(g) >= 5);
    /* every entry keeps its old fields and carries its description,
     * capabilities and metric rows (lib/guards/core/guard_doc.c) */
    static const char *const keys[] = {"name", "how", "expect", "safe_across_instances", "carts",
                                       "needs", "use_when", "breaks", "origin", "steps",
                                       "statements", "code", "fields", "capabilities", "metrics"};
    for (size_t i = 0; i < json_array_size(g); i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (!json_object_get(json_array_get(g, i), keys[k]))
                fail_msg("GET /guards: %s has no %s", json_string_value(json_object_get(
                                                          json_array_get(g, i), "name")), keys[k]);
    it_resp_free(&r);
    url(u, sizeof(u), "/inventory/minusInventory?inventoryId=T-hdr");
    /* libcurl helper sends no X-Guard; the body-less GET uses the instance's. */
    assert_int_equal(it_http("GET", u, NULL, &r), 200);
    assert_non_null(json_object_get(r.json, "guard"));
    it_resp_free(&r);
    url(u, sizeof(u), "/metrics");
    assert_int_equal(it_http("GET", u, NULL, &r), 200);
    assert_non_null(strstr(r.body, "lab_http_requests_total"));
    assert_non_null(strstr(r.body, "lab_deductions_total"));
    it_resp_free(&r);
}

/* Liveness asks no backend: it answers with MySQL stopped, where
 * readiness (/healthz) says 503. */
static void test_livez_needs_no_backend(void **state)
{
    char u[256];
    url(u, sizeof(u), "/livez");
    struct it_resp r;
    assert_int_equal(it_http("GET", u, NULL, &r), 200);
    assert_true(json_is_true(json_object_get(r.json, "ok")));
    assert_string_equal(json_string_value(json_object_get(r.json, "service")), "inventory");
    assert_non_null(json_string_value(json_object_get(r.json, "instance")));
    it_resp_free(&r);
    assert_int_equal(it_status("POST", u, "{}"), 405);
    assert_int_equal(it_stack("stop", "mysql"), 0);
    long live = it_status("GET", u, NULL);
    url(u, sizeof(u), "/healthz");
    long ready = it_status("GET", u, NULL);
    assert_int_equal(it_stack("start", "mysql"), 0);
    assert_int_equal(it_wait_status(u, 200, 30000), 0);
    assert_int_equal(live, 200);
    assert_int_equal(ready, 503);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeated_order_id_takes_stock_once),
        cmocka_unit_test(test_repeat_after_the_last_unit),
        cmocka_unit_test(test_livez_needs_no_backend),
        cmocka_unit_test(test_release_gives_stock_back_once),
        cmocka_unit_test(test_seed_endpoint_minus_inventory),
        cmocka_unit_test(test_bad_input_changes_nothing),
        cmocka_unit_test(test_guard_header_and_listing),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
