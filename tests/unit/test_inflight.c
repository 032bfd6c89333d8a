/* The in-flight table: a reseed waits for deductions and deductions wait
 * for a reseed, per SKU, with exact bytes as the identity. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "stock/inflight.h"

#include <stdio.h>

static void test_reseed_refused_while_deducting(void **state)
{
    (void)state;
    int n = -1;
    assert_int_equal(inflight_enter("A-1"), INFLIGHT_OK);
    assert_int_equal(inflight_enter("A-1"), INFLIGHT_OK);
    assert_int_equal(inflight_reseed_begin("A-1", &n), INFLIGHT_BUSY);
    assert_int_equal(n, 2);
    /* Another spelling is another SKU. */
    assert_int_equal(inflight_reseed_begin("a-1", &n), INFLIGHT_OK);
    assert_int_equal(n, 0);
    inflight_reseed_done("a-1");
    inflight_leave("A-1");
    assert_int_equal(inflight_reseed_begin("A-1", &n), INFLIGHT_BUSY);
    inflight_leave("A-1");
    assert_int_equal(inflight_reseed_begin("A-1", &n), INFLIGHT_OK);
    inflight_reseed_done("A-1");
}

static void test_deduction_refused_while_reseeding(void **state)
{
    (void)state;
    int n;
    assert_int_equal(inflight_reseed_begin("B-1", &n), INFLIGHT_OK);
    assert_int_equal(inflight_enter("B-1"), INFLIGHT_BUSY);
    assert_int_equal(inflight_reseed_begin("B-1", &n), INFLIGHT_BUSY);
    inflight_reseed_done("B-1");
    assert_int_equal(inflight_enter("B-1"), INFLIGHT_OK);
    inflight_leave("B-1");
}

/* Slots are freed when idle, and a full table says so instead of
 * pretending the SKU is idle. */
static void test_bounded_and_reused(void **state)
{
    (void)state;
    char sku[32];
    for (int i = 0; i < INFLIGHT_SLOTS; i++) {
        snprintf(sku, sizeof(sku), "S-%d", i);
        assert_int_equal(inflight_enter(sku), INFLIGHT_OK);
    }
    int n;
    assert_int_equal(inflight_enter("one-more"), INFLIGHT_FULL);
    assert_int_equal(inflight_reseed_begin("one-more", &n), INFLIGHT_FULL);
    for (int i = 0; i < INFLIGHT_SLOTS; i++) {
        snprintf(sku, sizeof(sku), "S-%d", i);
        inflight_leave(sku);
    }
    assert_int_equal(inflight_enter("one-more"), INFLIGHT_OK);
    inflight_leave("one-more");
    inflight_leave("never-entered");   /* harmless */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reseed_refused_while_deducting),
        cmocka_unit_test(test_deduction_refused_while_reseeding),
        cmocka_unit_test(test_bounded_and_reused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
