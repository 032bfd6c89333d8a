/* The lab's core claims on a real stack: `none` and cross-instance `mutex`
 * oversell; every database guard sells exactly the stock, never more. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <string.h>

static int group_setup(void **state) { return it_setup(); }

/* Seed `sku`, fire `total` deductions from `clients` under `guard` at the
 * given instances, and return the audit. */
static struct it_audit run_guard(const char *sku, const char *guard, long long stock,
                                 int total, int clients, int hold_ms, int ninst,
                                 struct it_load *l)
{
    assert_int_equal(it_seed(sku, stock), 200);
    static char urls[2][256];
    static const char *u[2] = {urls[0], urls[1]};
    for (int i = 0; i < 2; i++)
        snprintf(urls[i], sizeof(urls[i]), "%s/inventory/deduct", it.inventory[i]);
    static char fmt[512];
    snprintf(fmt, sizeof(fmt),
             "{\"sku\":\"%s\",\"guard\":\"%s\",\"hold_ms\":%d,\"order_id\":\"%s-%%d\"}",
             sku, guard, hold_ms, sku);
    *l = (struct it_load){.total = total, .clients = clients, .urls = u, .nurls = ninst,
                          .method = "POST", .body_fmt = fmt};
    it_hammer(l);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-20s %d inst: sold %lld oversold %lld lost %lld stock %lld | 200:%d 409:%d 503:%d\n",
                  guard, ninst, a.sold, a.oversold, a.lost_updates, a.stock, l->by_status[200],
                  l->by_status[409], l->by_status[503]);
    return a;
}

static void test_none_two_instances_oversells(void **state)
{
    struct it_load l;
    struct it_audit a = run_guard("T-none", "none", 1000, 2000, 32, 2, 2, &l);
    assert_true(a.lost_updates > 0 || a.oversold > 0);
    assert_false(a.consistent);
    /* The ledger and the answers agree: every 200 is a recorded sale. */
    assert_int_equal(a.sold, l.by_status[200]);
}

static void test_mutex_one_instance_is_correct(void **state)
{
    struct it_load l;
    struct it_audit a = run_guard("T-mutex1", "mutex", 1000, 1500, 32, 1, 1, &l);
    assert_true(a.consistent);
    assert_int_equal(a.sold, 1000);
    assert_int_equal(a.stock, 0);
    assert_int_equal(l.by_status[200], 1000);
    assert_int_equal(l.by_status[409], 500);
}

static void test_mutex_two_instances_oversells(void **state)
{
    struct it_load l;
    struct it_audit a = run_guard("T-mutex2", "mutex", 1000, 2000, 32, 2, 2, &l);
    assert_false(a.consistent);
    assert_true(a.lost_updates > 0 || a.oversold > 0);
}

static void exact_guard(const char *guard)
{
    char sku[64];
    snprintf(sku, sizeof(sku), "T-%s", guard);
    struct it_load l;
    struct it_audit a = run_guard(sku, guard, 100, 1000, 32, 0, 2, &l);
    assert_int_equal(a.sold, 100);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_int_equal(a.stock, 0);
    assert_true(a.consistent);
    assert_int_equal(l.by_status[200], 100);
    /* Everyone else was refused: sold out, or gave up retrying; never lost. */
    assert_int_equal(l.by_status[409] + l.by_status[503], 900);
    assert_int_equal(l.by_status[0], 0);
}

static void test_for_update_exact(void **state) { exact_guard("for-update"); }
static void test_optimistic_exact(void **state) { exact_guard("optimistic"); }
static void test_conditional_update_exact(void **state) { exact_guard("conditional-update"); }

/* Safe guards stay exact when the business call inside the guard is slow. */
static void test_safe_guards_with_hold(void **state)
{
    const char *guards[] = {"for-update", "conditional-update", "optimistic"};
    for (size_t i = 0; i < 3; i++) {
        char sku[64];
        snprintf(sku, sizeof(sku), "T-hold-%s", guards[i]);
        struct it_load l;
        struct it_audit a = run_guard(sku, guards[i], 20, 60, 16, 3, 2, &l);
        assert_true(a.consistent);
        assert_int_equal(a.sold, l.by_status[200]);
        assert_true(a.sold <= 20);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_two_instances_oversells),
        cmocka_unit_test(test_mutex_one_instance_is_correct),
        cmocka_unit_test(test_mutex_two_instances_oversells),
        cmocka_unit_test(test_for_update_exact),
        cmocka_unit_test(test_optimistic_exact),
        cmocka_unit_test(test_conditional_update_exact),
        cmocka_unit_test(test_safe_guards_with_hold),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
