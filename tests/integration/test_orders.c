/* Through the order service: orders recorded equal units sold, bad input
 * refused, and an order database failure takes nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <string.h>

static int group_setup(void **state) { return it_setup(); }

static long order_count(const char *sku, long long *units)
{
    char u[256];
    snprintf(u, sizeof(u), "%s/orders?sku=%s", it.order, sku);
    struct it_resp r;
    long s = it_http("GET", u, NULL, &r);
    long n = s == 200 ? (long)json_integer_value(json_object_get(r.json, "orders")) : -1;
    *units = s == 200 ? json_integer_value(json_object_get(r.json, "units")) : -1;
    it_resp_free(&r);
    return n;
}

static void test_orders_equal_ledger(void **state)
{
    assert_int_equal(it_seed("T-ord", 100), 200);
    assert_int_equal(it_sql("DELETE FROM db_order.orders WHERE sku='T-ord'"), 0);
    char u[256];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    const char *urls[] = {u};
    struct it_load l = {.total = 300, .clients = 32, .urls = urls, .nurls = 1,
                        .method = "POST",
                        .body_fmt = "{\"sku\":\"T-ord\",\"user_id\":\"u-%d\",\"guard\":\"for-update\"}"};
    it_hammer(&l);
    assert_int_equal(l.by_status[201], 100);
    assert_int_equal(l.by_status[409], 200);
    long long units;
    assert_int_equal(order_count("T-ord", &units), 100);
    assert_int_equal(units, 100);
    struct it_audit a;
    assert_int_equal(it_audit("T-ord", &a), 0);
    assert_int_equal(a.sold, 100);
    assert_true(a.consistent);
}

static void test_place_an_order_seed_endpoint(void **state)
{
    assert_int_equal(it_seed("T-place", 1), 200);
    assert_int_equal(it_sql("DELETE FROM db_order.orders WHERE sku='T-place'"), 0);
    char u[256];
    snprintf(u, sizeof(u), "%s/order/placeAnOrder?inventoryId=T-place", it.order);
    struct it_resp r;
    assert_int_equal(it_http("GET", u, NULL, &r), 201);
    assert_non_null(json_object_get(r.json, "inventory_instance"));
    it_resp_free(&r);
    assert_int_equal(it_http("GET", u, NULL, &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "out_of_stock");
    it_resp_free(&r);
}

static void test_order_bad_input(void **state)
{
    char u[256];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    const char *bodies[] = {"{", "{}", "{\"sku\":\"T-place\",\"qty\":0}",
                            "{\"sku\":\"T-place\",\"qty\":\"2\"}", "{\"sku\":\"T-place\",\"user_id\":7}",
                            "{\"sku\":\"T-place\",\"guard\":\"magic\"}"};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct it_resp r;
        long s = it_http("POST", u, bodies[i], &r);
        if (s != 400 || !r.json ||
            strcmp(json_string_value(json_object_get(r.json, "error")) ?: "", "bad_request"))
            fail_msg("body %s: got %ld %s", bodies[i], s, r.body);
        it_resp_free(&r);
    }
    snprintf(u, sizeof(u), "%s/orders", it.order);
    assert_int_equal(it_status("DELETE", u, NULL), 405);
    long long units;
    assert_int_equal(order_count("T-place", &units), 1);
}

static int restore_orders_table(void **state)
{
    it_sql("RENAME TABLE db_order.orders_off TO db_order.orders");
    return 0;
}

/* The order row cannot be written: since the intent is recorded before the
 * deduction, the order service says 503 and takes nothing. (A finalising
 * write that fails after the sale is test_order_crash's ambiguous cases.) */
static void test_order_db_failure_compensates(void **state)
{
    assert_int_equal(it_seed("T-comp", 10), 200);
    assert_int_equal(it_sql("RENAME TABLE db_order.orders TO db_order.orders_off"), 0);
    char u[256];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    for (int i = 0; i < 3; i++) {
        struct it_resp r;
        assert_int_equal(it_http("POST", u, "{\"sku\":\"T-comp\",\"qty\":2}", &r), 503);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                            "backend_unavailable");
        assert_non_null(strstr(r.body, "nothing was taken"));
        it_resp_free(&r);
    }
    struct it_audit a;
    assert_int_equal(it_audit("T-comp", &a), 0);
    assert_int_equal(a.stock, 10);
    assert_int_equal(a.sold, 0);
    assert_true(a.consistent);
    assert_int_equal(it_sql("RENAME TABLE db_order.orders_off TO db_order.orders"), 0);
    assert_int_equal(it_status("POST", u, "{\"sku\":\"T-comp\",\"qty\":2}"), 201);
    assert_int_equal(it_audit("T-comp", &a), 0);
    assert_int_equal(a.stock, 8);
    assert_true(a.consistent);
}

/* A cart through the order service (the body's "lines", forwarded to the
 * inventory): 201 with the lines, a repeat answers the first order, other
 * lines under its order_id are a conflict, a short line is the
 * inventory's 409 out_of_stock naming it; under load the orders match the
 * ledger per SKU. Under a MySQL guard and a lock guard. */
static void test_cart_orders(void **state)
{
    static const char *const guards[] = {"for-update", "redis-lock"};
    char u[256];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    for (size_t g = 0; g < 2; g++) {
        char a[32], b[32], id[32], body[512], q[256];
        snprintf(a, sizeof(a), "OC-a-%zu", g);
        snprintf(b, sizeof(b), "OC-b-%zu", g);
        snprintf(id, sizeof(id), "oc-%zu", g);
        assert_int_equal(it_seed(a, 10), 200);
        assert_int_equal(it_seed(b, 3), 200);
        snprintf(body, sizeof(body), "{\"lines\":[{\"sku\":\"%s\",\"qty\":2},{\"sku\":\"%s\","
                 "\"qty\":3}],\"guard\":\"%s\",\"order_id\":\"%s\"}", a, b, guards[g], id);
        struct it_resp r;
        for (int rep = 0; rep < 2; rep++) {
            long st = it_http("POST", u, body, &r);
            print_message("%s cart order: %ld %s\n", guards[g], st, r.body);
            assert_int_equal(st, 201);
            json_t *lines = json_object_get(r.json, "lines");
            assert_int_equal(json_array_size(lines), 2);
            assert_string_equal(json_string_value(json_object_get(json_array_get(lines, 1),
                                                                  "sku")), b);
            assert_int_equal(json_is_true(json_object_get(r.json, "duplicate")), rep);
            it_resp_free(&r);
        }
        snprintf(q, sizeof(q), "SELECT COUNT(*) FROM db_order.orders WHERE order_id='%s' AND "
                 "status='placed' AND qty=5 AND cart_lines IS NOT NULL", id);
        assert_int_equal(it_sql_value(q), 1);
        snprintf(body, sizeof(body), "{\"lines\":[{\"sku\":\"%s\",\"qty\":1}],\"guard\":\"%s\","
                 "\"order_id\":\"%s\"}", a, guards[g], id);
        assert_int_equal(it_http("POST", u, body, &r), 409);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                            "order_id_conflict");
        it_resp_free(&r);
        snprintf(body, sizeof(body), "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\","
                 "\"qty\":1}],\"guard\":\"%s\"}", a, b, guards[g]);
        long st = it_http("POST", u, body, &r);
        print_message("%s short cart order: %ld %s\n", guards[g], st, r.body);
        assert_int_equal(st, 409);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")), "out_of_stock");
        json_t *s0 = json_array_get(json_object_get(r.json, "short"), 0);
        assert_string_equal(json_string_value(json_object_get(s0, "sku")), b);
        assert_int_equal(json_array_size(json_object_get(r.json, "short")), 1);
        it_resp_free(&r);
        struct it_audit au;
        assert_int_equal(it_audit(a, &au), 0);
        assert_true(au.consistent && au.sold == 2 && au.stock == 8 && au.oversold == 0);
        assert_int_equal(it_audit(b, &au), 0);
        assert_true(au.consistent && au.sold == 3 && au.stock == 0 && au.oversold == 0);

        /* Under load: 40 carts {a:1, b:1} for 6 b's. */
        assert_int_equal(it_seed(a, 10), 200);
        assert_int_equal(it_seed(b, 6), 200);
        char fmt[256];
        snprintf(fmt, sizeof(fmt), "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\","
                 "\"qty\":1}],\"user_id\":\"u-%%d\",\"guard\":\"%s\"}", b, a, guards[g]);
        const char *urls[] = {u};
        struct it_load l = {.total = 40, .clients = 8, .urls = urls, .nurls = 1,
                            .method = "POST", .body_fmt = fmt};
        it_hammer(&l);
        print_message("%s: 40 cart orders: %d placed, %d refused\n", guards[g],
                      l.by_status[201], l.by_status[409]);
        assert_int_equal(l.by_status[201], 6);
        assert_int_equal(l.by_status[409], 34);
        assert_int_equal(it_audit(a, &au), 0);
        assert_true(au.consistent && au.sold == 6 && au.stock == 4 && au.oversold == 0);
        assert_int_equal(it_audit(b, &au), 0);
        assert_true(au.consistent && au.sold == 6 && au.stock == 0 && au.oversold == 0);
    }
    const char *bad[] = {
        "{\"lines\":[]}",
        "{\"lines\":[{\"sku\":\"OC-a-0\",\"qty\":1}],\"sku\":\"OC-a-0\"}",
        "{\"lines\":[{\"sku\":\"OC-a-0\",\"qty\":0}]}",
    };
    for (size_t i = 0; i < 3; i++) {
        struct it_resp r;
        long st = it_http("POST", u, bad[i], &r);
        if (st != 400)
            fail_msg("%s answered %ld %s", bad[i], st, r.body);
        it_resp_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orders_equal_ledger),
        cmocka_unit_test(test_place_an_order_seed_endpoint),
        cmocka_unit_test(test_order_bad_input),
        cmocka_unit_test(test_cart_orders),
        cmocka_unit_test_teardown(test_order_db_failure_compensates, restore_orders_table),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
