/* redlock: one contender per process. Redlock has no queue: a
 * loser sleeps and retries, so with every worker of a process polling the
 * masters, rounds were lost over and over (saturation p99/p50 ~550). The
 * guard now queues a process's threads on a local gate and passes a held
 * lease on to the next one. On one instance nobody else contends, so:
 *   - every sale is exact (a passed lease still excludes: audit);
 *   - no quorum round is ever lost (lab_redlock_quorum_failures_total does
 *     not move: only the gate's holder asks the masters);
 *   - most sales take no lease of their own (lab_redlock_acquired_total
 *     grows by far fewer than the sales: the lease was passed on). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int group_setup(void **state) { return it_setup(); }

#define STOCK 300
#define CLIENTS 16

static void test_one_contender_per_process(void **state)
{
    char sku[64];
    snprintf(sku, sizeof(sku), "RG-%d", (int)getpid());
    assert_int_equal(it_seed(sku, STOCK), 200);
    double f0 = it_metric(0, "lab_redlock_quorum_failures_total");
    double a0 = it_metric(0, "lab_redlock_acquired_total");
    static char url[256];
    static const char *u[1] = {url};
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[0]);
    static char fmt[256];
    snprintf(fmt, sizeof(fmt),
             "{\"sku\":\"%s\",\"guard\":\"redlock\",\"hold_ms\":1,\"lock_wait_ms\":20000,"
             "\"order_id\":\"%s-%%d\"}",
             sku, sku);
    struct it_load l = {.total = STOCK, .clients = CLIENTS, .urls = u, .nurls = 1,
                        .method = "POST", .body_fmt = fmt};
    it_hammer(&l);
    double fails = it_metric(0, "lab_redlock_quorum_failures_total") - (f0 < 0 ? 0 : f0);
    double leases = it_metric(0, "lab_redlock_acquired_total") - (a0 < 0 ? 0 : a0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("redlock, %d buyers on one instance: 200:%d, %.0f leases taken, %.0f quorum "
                  "rounds lost, sold %lld\n",
                  CLIENTS, l.by_status[200], leases, fails, a.sold);
    assert_int_equal(l.by_status[200], STOCK);
    assert_int_equal(a.sold, STOCK);
    assert_int_equal(a.stock, 0);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_true(fails == 0);
    assert_true(leases >= 1 && leases <= STOCK / 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_contender_per_process),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
