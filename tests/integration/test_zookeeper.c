/* The zookeeper guard against the stack's real ZooKeeper: exact on two
 * instances, 503 while ZooKeeper is away and serving again once it is
 * back, a waiter that gives up leaves no node behind, and a holder whose
 * session expired while it was paused refuses to write. The checks it
 * shares with test_etcd are in lock_suite.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"
#include "lock_suite.h"

#include "locks/zk.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char zk_hosts[64];
static struct zk_client *zk;   /* the test's own session, to look at lock nodes */
static int zk_stopped;         /* a test stopped the stack's ZooKeeper */

static int group_setup(void **state)
{
    if (it_setup() != 0)
        return -1;
    const char *port = getenv("LAB_ZK_PORT");
    if (!port) {
        fprintf(stderr, "LAB_ZK_PORT not set (run by tests/run)\n");
        return -1;
    }
    snprintf(zk_hosts, sizeof(zk_hosts), "127.0.0.1:%s", port);
    zk = zk_client_new(zk_hosts, 4000);
    return zk ? 0 : -1;
}

static int group_teardown(void **state)
{
    zk_client_free(zk);
    return 0;
}

/* Whatever a test did, ZooKeeper is running again after it. */
static int restart_zk(void **state)
{
    if (zk_stopped) {
        it_stack("start", "zookeeper");
        zk_stopped = 0;
    }
    return 0;
}

/* Lock nodes under /locks/inventory/{sku} now; -1 when ZooKeeper cannot be
 * asked. A SKU never locked has no parent yet: 0. */
static long lock_nodes(const char *sku)
{
    char err[160], path[160];
    struct zk_session *s = zk_client_acquire(zk, 10000, err, sizeof(err));
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    snprintf(path, sizeof(path), "/locks/inventory/%s", sku);
    struct String_vector kids = {0};
    int rc = zoo_get_children(zk_session_handle(s), path, 0, &kids);
    long n = rc == ZOK ? kids.count : rc == ZNONODE ? 0 : -1;
    deallocate_String_vector(&kids);
    zk_client_release(zk, s);
    return n;
}

static void deduct_url(int inst, char *out, size_t len)
{
    ls_deduct_url(it.inventory[inst], out, len);
}

/* The stack's two instances, as the shared lock-service checks want them. */
static void bases(const char *base[2])
{
    base[0] = it.inventory[0];
    base[1] = it.inventory[1];
}

/* 2 instances, stock 100, 1000 deductions from 32 clients: exactly 100 sold
 * and no lock node left once every request has answered. */
static void test_zookeeper_exact(void **state)
{
    const char *base[2];
    bases(base);
    ls_exact("zookeeper", "ZK-exact", base, lock_nodes);
}

/* ZooKeeper stopped: 503 backend_unavailable, nothing sold; started again:
 * the same instances sell without a restart. */
static void test_zookeeper_down_then_back(void **state)
{
    const char *sku = "ZK-down";
    assert_int_equal(it_seed(sku, 10), 200);
    char url[256], body[256];
    deduct_url(0, url, sizeof(url));
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"zookeeper\",\"order_id\":\"%s-0\"}", sku, sku);
    assert_int_equal(it_status("POST", url, body), 200);

    assert_int_equal(it_stack("stop", "zookeeper"), 0);
    zk_stopped = 1;
    for (int i = 0; i < 2; i++) {
        deduct_url(i, url, sizeof(url));
        snprintf(body, sizeof(body),
                 "{\"sku\":\"%s\",\"guard\":\"zookeeper\",\"order_id\":\"%s-down-%d\"}", sku,
                 sku, i);
        struct it_resp r;
        double t0 = ls_now_s();
        long st = it_http("POST", url, body, &r);
        print_message("instance %d with ZooKeeper down: %ld in %.2f s: %.160s\n", i + 1, st,
                      ls_now_s() - t0, r.body);
        assert_int_equal(st, 503);
        assert_non_null(r.json);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                            "backend_unavailable");
        it_resp_free(&r);
    }

    double t0 = ls_now_s();
    assert_int_equal(it_stack("start", "zookeeper"), 0);
    zk_stopped = 0;
    /* Each instance's client reconnects by itself (bounded wait). */
    for (int i = 0; i < 2; i++) {
        deduct_url(i, url, sizeof(url));
        long st = 0;
        for (int k = 0; k < 300 && st != 200; k++) {
            snprintf(body, sizeof(body),
                     "{\"sku\":\"%s\",\"guard\":\"zookeeper\",\"order_id\":\"%s-back-%d\"}",
                     sku, sku, i);
            st = it_status("POST", url, body);
            if (st != 200)
                usleep(100 * 1000);
        }
        print_message("instance %d sells again %.1f s after the start\n", i + 1, ls_now_s() - t0);
        assert_int_equal(st, 200);
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 3);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
}

/* A holder on instance 1 (hold_ms 2000); a waiter on instance 2 with
 * lock_wait_ms 300 gives up with 503 lock_timeout and deletes its node:
 * once the holder is done no node is left. */
static void test_zookeeper_waiter_gives_up(void **state)
{
    const char *base[2];
    bases(base);
    ls_waiter_gives_up("zookeeper", "ZK-wait", base, lock_nodes, NULL, 0);
}

/* With fencing:true the zookeeper guard sells (its token is the node's
 * sequence + 1) and the stored token grows from one sale to the next. */
static void test_zookeeper_fencing(void **state)
{
    const char *base[2];
    bases(base);
    ls_fencing("zookeeper", "ZK-fence", base);
}

/* A holder paused (SIGSTOP) past its 1 s session: ZooKeeper ends the
 * session, the lock goes to a buyer on instance 2, who sells the last
 * unit. Resumed with hold time left, the holder learns the session is lost
 * and answers 503 lease_expired without writing: sold 1, never 2. */
static void test_zookeeper_paused_holder_refuses(void **state)
{
    long port = it_port_base() + 36;
    const char *const args[] = {"--threads", "4", "--zk-hosts", zk_hosts, "--zk-session-ms",
                                "1000", NULL};
    int pid = it_start_inventory("inventory-zk-pause", port, NULL, args);
    assert_true(pid > 0);
    char base_p[64];
    snprintf(base_p, sizeof(base_p), "http://127.0.0.1:%ld", port);
    struct ls_paused p;
    ls_paused_holder("zookeeper", "ZK-pause", base_p, pid, "", it.inventory[1], lock_nodes, &p);
    assert_int_equal(p.holder_status, 503);
    assert_string_equal(p.holder_error, "lease_expired");
}

/* A holder killed (SIGKILL) inside hold_ms: its node is ephemeral, so the
 * lock is free once its 1 s session expires, and a buyer on instance 2
 * that waits sells (after at least 0.5 s); the killed holder wrote
 * nothing. */
static void test_zookeeper_crashed_holder_frees(void **state)
{
    long port = it_port_base() + 37;
    const char *const args[] = {"--threads", "4", "--zk-hosts", zk_hosts, "--zk-session-ms",
                                "1000", NULL};
    int pid = it_start_inventory("inventory-zk-crash", port, NULL, args);
    assert_true(pid > 0);
    char base_c[64];
    snprintf(base_c, sizeof(base_c), "http://127.0.0.1:%ld", port);
    ls_killed_holder_frees("zookeeper", "ZK-crash", base_c, pid, "", it.inventory[1],
                           lock_nodes, 0.5);
}

/* A zookeeper sale released on the other instance: the release runs under
 * the SKU's ZooKeeper lock and gives the unit back; no node left. */
static void test_zookeeper_release(void **state)
{
    const char *base[2];
    bases(base);
    ls_release("zookeeper", "ZK-rel", base, lock_nodes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zookeeper_exact),
        cmocka_unit_test(test_zookeeper_waiter_gives_up),
        cmocka_unit_test(test_zookeeper_fencing),
        cmocka_unit_test(test_zookeeper_paused_holder_refuses),
        cmocka_unit_test(test_zookeeper_crashed_holder_frees),
        cmocka_unit_test(test_zookeeper_release),
        cmocka_unit_test_teardown(test_zookeeper_down_then_back, restart_zk),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
