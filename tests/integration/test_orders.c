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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orders_equal_ledger),
        cmocka_unit_test(test_place_an_order_seed_endpoint),
        cmocka_unit_test(test_order_bad_input),
        cmocka_unit_test_teardown(test_order_db_failure_compensates, restore_orders_table),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
