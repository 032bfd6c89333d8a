/* Lock guards, one more round, on the stack's two instances:
 *   - fencing tokens belong to one lock service: after a fenced `etcd`
 *     sale (whose token is etcd's cluster-wide revision, a large number),
 *     uncontended fenced sales under `zookeeper`, `lock-table` and `mutex`
 *     (small tokens of their own) still sell;
 *   - `etcd` with "watchdog":false: a waiter whose lease the lock wait's
 *     own keep-alives kept alive on the server holds a live lease when the
 *     lock comes, and sells. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <string.h>

static int group_setup(void **state) { return it_setup(); }

/* POST /inventory/deduct on instance `inst`; the status, the body in
 * answer (at most n bytes). */
static long sell(int inst, const char *body, char *answer, size_t n)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[inst]);
    struct it_resp r;
    long st = it_http("POST", url, body, &r);
    snprintf(answer, n, "%.400s", r.body);
    it_resp_free(&r);
    return st;
}

static long sell_fenced(const char *sku, const char *guard, int n)
{
    char body[256], answer[512];
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"%s\",\"fencing\":true,\"order_id\":\"%s-%s-%d\"}", sku,
             guard, sku, guard, n);
    long st = sell(0, body, answer, sizeof(answer));
    print_message("%-10s fenced: %ld %s\n", guard, st, answer);
    return st;
}

/* One etcd fenced sale, then one uncontended fenced sale per other guard
 * with a token: each sells, and the audit is exact. */
static void test_fences_are_per_guard(void **state)
{
    const char *sku = "TL2-fence-per-guard";
    assert_int_equal(it_seed(sku, 10), 200);
    assert_int_equal(sell_fenced(sku, "etcd", 1), 200);
    long st_zk = sell_fenced(sku, "zookeeper", 1);
    long st_table = sell_fenced(sku, "lock-table", 1);
    long st_mutex = sell_fenced(sku, "mutex", 1);
    long st_redis = sell_fenced(sku, "redis-lock", 1);
    assert_int_equal(st_zk, 200);
    assert_int_equal(st_table, 200);
    assert_int_equal(st_mutex, 200);
    assert_int_equal(st_redis, 200);
    /* And back: etcd's next token is still past its own last one. */
    assert_int_equal(sell_fenced(sku, "etcd", 2), 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 6);
    assert_int_equal(a.stock, 4);
    assert_true(a.consistent);
}

/* A holder on instance 0 keeps the lock 3.5 s (its watchdog renews its
 * 4 s lease); a waiter on instance 1 with a 2 s lease and no watchdog
 * waits for it: the lock wait's keep-alives (one per half op bound) keep
 * the waiter's lease alive on etcd, so when the lock comes the lease is
 * alive and was renewed well within 2 s. */
static void test_etcd_waiter_kept_alive_by_its_wait(void **state)
{
    const char *sku = "TL2-etcd-waiter";
    assert_int_equal(it_seed(sku, 10), 200);
    char body[256];
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"etcd\",\"hold_ms\":3500,\"lock_ttl_ms\":4000,"
             "\"order_id\":\"%s-holder\"}", sku, sku);
    struct it_bg_post holder;
    assert_int_equal(it_bg_deduct(&holder, it.inventory[0], body), 0);
    it_sleep_us(500 * 1000);   /* the holder has its lock (an etcd grant is ms) */
    char answer[512];
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"etcd\",\"watchdog\":false,\"lock_ttl_ms\":2000,"
             "\"lock_wait_ms\":8000,\"order_id\":\"%s-waiter\"}", sku, sku);
    long st = sell(1, body, answer, sizeof(answer));
    it_bg_post_join(&holder);
    print_message("holder: %ld; waiter (2 s lease, no watchdog): %ld %s\n", holder.status, st,
                  answer);
    assert_int_equal(holder.status, 200);
    assert_int_equal(st, 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 2);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fences_are_per_guard),
        cmocka_unit_test(test_etcd_waiter_kept_alive_by_its_wait),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
