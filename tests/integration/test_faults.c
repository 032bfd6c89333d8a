/* Lost backends: MariaDB stopped answers 503 and sells nothing; started
 * again, service resumes without restarting anything. An inventory
 * instance stopped: the order service fails over to the other. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <string.h>

static int group_setup(void **state) { return it_setup(); }

static int restart_all(void **state)
{
    it_stack("start", "mysql");
    it_stack("start", "inventory-2");
    return 0;
}

static void test_mysql_down_then_back(void **state)
{
    assert_int_equal(it_seed("T-fault", 50), 200);
    char u[256], h[256];
    snprintf(u, sizeof(u), "%s/inventory/deduct", it.inventory[0]);
    snprintf(h, sizeof(h), "%s/healthz", it.inventory[0]);
    assert_int_equal(it_status("POST", u, "{\"sku\":\"T-fault\",\"order_id\":\"f-1\"}"), 200);

    assert_int_equal(it_stack("stop", "mysql"), 0);
    const char *guards[] = {"none", "for-update", "optimistic", "conditional-update", "mutex"};
    for (size_t i = 0; i < 5; i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"sku\":\"T-fault\",\"guard\":\"%s\",\"order_id\":\"f-down-%zu\"}",
                 guards[i], i);
        struct it_resp r;
        long s = it_http("POST", u, body, &r);
        if (s != 503 || strcmp(json_string_value(json_object_get(r.json, "error")) ?: "",
                               "backend_unavailable") != 0)
            fail_msg("%s with MariaDB down: %ld %s", guards[i], s, r.body);
        it_resp_free(&r);
    }
    assert_int_equal(it_status("GET", h, NULL), 503);

    assert_int_equal(it_stack("start", "mysql"), 0);
    assert_int_equal(it_wait_status(h, 200, 30000), 0);
    /* Every worker thread must recover: more requests than threads. */
    char body[128];
    for (int i = 0; i < 40; i++) {
        snprintf(body, sizeof(body), "{\"sku\":\"T-fault\",\"order_id\":\"f-up-%d\"}", i);
        assert_int_equal(it_status("POST", u, body), 200);
    }
    struct it_audit a;
    assert_int_equal(it_audit("T-fault", &a), 0);
    assert_int_equal(a.sold, 41);
    assert_int_equal(a.stock, 9);
    assert_true(a.consistent);
}

static void test_order_fails_over_to_live_instance(void **state)
{
    assert_int_equal(it_seed("T-failover", 30), 200);
    assert_int_equal(it_stack("stop", "inventory-2"), 0);
    char u[256];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    const char *urls[] = {u};
    struct it_load l = {.total = 20, .clients = 4, .urls = urls, .nurls = 1, .method = "POST",
                        .body_fmt = "{\"sku\":\"T-failover\",\"user_id\":\"u-%d\",\"guard\":\"for-update\"}"};
    it_hammer(&l);
    assert_int_equal(l.by_status[201], 20);
    assert_int_equal(it_stack("start", "inventory-2"), 0);
    struct it_audit a;
    assert_int_equal(it_audit("T-failover", &a), 0);
    assert_int_equal(a.sold, 20);
    assert_true(a.consistent);
}

static void test_order_without_inventory_answers_502(void **state)
{
    assert_int_equal(it_seed("T-noinv", 5), 200);
    assert_int_equal(it_stack("stop", "inventory-1"), 0);
    assert_int_equal(it_stack("stop", "inventory-2"), 0);
    char u[256];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    struct it_resp r;
    assert_int_equal(it_http("POST", u, "{\"sku\":\"T-noinv\"}", &r), 502);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "inventory_unreachable");
    it_resp_free(&r);
    snprintf(u, sizeof(u), "%s/healthz", it.order);
    assert_int_equal(it_status("GET", u, NULL), 503);
    assert_int_equal(it_stack("start", "inventory-1"), 0);
    assert_int_equal(it_stack("start", "inventory-2"), 0);
    struct it_audit a;
    assert_int_equal(it_audit("T-noinv", &a), 0);
    assert_int_equal(a.stock, 5);
    assert_true(a.consistent);
}

static int restart_inventories(void **state)
{
    it_stack("start", "inventory-1");
    it_stack("start", "inventory-2");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_mysql_down_then_back, restart_all),
        cmocka_unit_test_teardown(test_order_fails_over_to_live_instance, restart_all),
        cmocka_unit_test_teardown(test_order_without_inventory_answers_502, restart_inventories),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
