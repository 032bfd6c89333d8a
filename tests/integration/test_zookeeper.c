/* The zookeeper guard against the stack's real ZooKeeper: exact on two
 * instances, 503 while ZooKeeper is away and serving again once it is
 * back, a waiter that gives up leaves no node behind, and a holder whose
 * session expired while it was paused refuses to write. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Lock nodes under /locks/inventory/{sku} now; -1 when ZooKeeper cannot be
 * asked. A SKU never locked has no parent yet: 0. */
static int lock_nodes(const char *sku)
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
    int n = rc == ZOK ? kids.count : rc == ZNONODE ? 0 : -1;
    deallocate_String_vector(&kids);
    zk_client_release(zk, s);
    return n;
}

static void deduct_url(int inst, char *out, size_t len)
{
    snprintf(out, len, "%s/inventory/deduct", it.inventory[inst]);
}

/* 2 instances, stock 100, 1000 deductions from 32 clients: exactly 100 sold
 * and no lock node left once every request has answered. */
static void test_zookeeper_exact(void **state)
{
    const char *sku = "ZK-exact";
    assert_int_equal(it_seed(sku, 100), 200);
    static char urls[2][256];
    static const char *u[2] = {urls[0], urls[1]};
    for (int i = 0; i < 2; i++)
        deduct_url(i, urls[i], sizeof(urls[i]));
    const char *fmt = "{\"sku\":\"ZK-exact\",\"guard\":\"zookeeper\",\"hold_ms\":1,"
                      "\"lock_wait_ms\":20000,\"order_id\":\"ZK-exact-%d\"}";
    struct it_load l = {.total = 1000, .clients = 32, .urls = u, .nurls = 2, .method = "POST",
                        .body_fmt = fmt};
    double t0 = now_s();
    it_hammer(&l);
    double took = now_s() - t0;
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("zookeeper: sold %lld oversold %lld lost %lld | 200:%d 409:%d 503:%d | "
                  "%.1f s, %.0f req/s (indicative)\n", a.sold, a.oversold, a.lost_updates,
                  l.by_status[200], l.by_status[409], l.by_status[503], took, 1000 / took);
    assert_int_equal(a.sold, 100);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(l.by_status[200], 100);
    assert_int_equal(l.by_status[409], 900);
    assert_int_equal(lock_nodes(sku), 0);
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
        double t0 = now_s();
        long st = it_http("POST", url, body, &r);
        print_message("instance %d with ZooKeeper down: %ld in %.2f s: %.160s\n", i + 1, st,
                      now_s() - t0, r.body);
        assert_int_equal(st, 503);
        assert_non_null(r.json);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                            "backend_unavailable");
        it_resp_free(&r);
    }

    double t0 = now_s();
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
        print_message("instance %d sells again %.1f s after the start\n", i + 1, now_s() - t0);
        assert_int_equal(st, 200);
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 3);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
}

struct holder {
    const char *url;
    const char *body;
    long status;
    char error[64];
};

static void *hold_thread(void *arg)
{
    struct holder *h = arg;
    struct it_resp r;
    h->status = it_http("POST", h->url, h->body, &r);
    const char *e = r.json ? json_string_value(json_object_get(r.json, "error")) : NULL;
    snprintf(h->error, sizeof(h->error), "%s", e ? e : "");
    it_resp_free(&r);
    return NULL;
}

/* Wait until sku has n lock nodes (a request holds or waits); 0 when it
 * did within 10 s. */
static int wait_nodes(const char *sku, int n)
{
    for (int i = 0; i < 200; i++) {
        if (lock_nodes(sku) == n)
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

/* A holder on instance 1 (hold_ms 2000); a waiter on instance 2 with
 * lock_wait_ms 300 gives up with 503 lock_timeout and deletes its node:
 * once the holder is done no node is left. */
static void test_zookeeper_waiter_gives_up(void **state)
{
    const char *sku = "ZK-wait";
    assert_int_equal(it_seed(sku, 10), 200);
    char url1[256], url2[256];
    deduct_url(0, url1, sizeof(url1));
    deduct_url(1, url2, sizeof(url2));
    struct holder h = {.url = url1,
                       .body = "{\"sku\":\"ZK-wait\",\"guard\":\"zookeeper\",\"hold_ms\":2000,"
                               "\"order_id\":\"ZK-wait-holder\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_thread, &h), 0);
    int held = wait_nodes(sku, 1);
    struct it_resp r;
    double t0 = now_s();
    long st = it_http("POST", url2,
                      "{\"sku\":\"ZK-wait\",\"guard\":\"zookeeper\",\"lock_wait_ms\":300,"
                      "\"order_id\":\"ZK-wait-waiter\"}", &r);
    double waited = now_s() - t0;
    int during = lock_nodes(sku);
    pthread_join(t, NULL);
    print_message("waiter: %ld after %.2f s: %.160s; nodes after it: %d\n", st, waited, r.body,
                  during);
    assert_int_equal(held, 0);
    assert_int_equal(st, 503);
    assert_non_null(r.json);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "lock_timeout");
    it_resp_free(&r);
    assert_true(waited >= 0.3);
    assert_int_equal(during, 1);            /* only the holder's node */
    assert_int_equal(h.status, 200);
    assert_int_equal(lock_nodes(sku), 0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_true(a.consistent);
}

/* With fencing:true the zookeeper guard still sells (its token is the
 * node's sequence + 1); where the fenced write exists (the fence column),
 * the stored token grows from one sale to the next. */
static void test_zookeeper_fencing(void **state)
{
    const char *sku = "ZK-fence";
    assert_int_equal(it_seed(sku, 10), 200);
    char url[256], body[256];
    long long fence[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        deduct_url(i, url, sizeof(url));
        snprintf(body, sizeof(body),
                 "{\"sku\":\"%s\",\"guard\":\"zookeeper\",\"fencing\":true,"
                 "\"order_id\":\"%s-%d\"}", sku, sku, i);
        assert_int_equal(it_status("POST", url, body), 200);
        fence[i] = it_sql_value("SELECT fence FROM db_shopping.inventory WHERE sku='ZK-fence'");
    }
    print_message("fence after each sale: %lld %lld (-1: no fence column in this build)\n",
                  fence[0], fence[1]);
    if (fence[0] >= 0) {
        assert_true(fence[0] > 0);
        assert_true(fence[1] > fence[0]);
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 2);
    assert_true(a.consistent);
}

/* A holder paused (SIGSTOP) past its 1 s session: ZooKeeper ends the
 * session, the lock goes to a buyer on instance 2, who sells the last
 * unit. Resumed with hold time left, the holder learns the session is lost
 * and answers 503 lease_expired without writing: sold 1, never 2. */
static void test_zookeeper_paused_holder_refuses(void **state)
{
    const char *sku = "ZK-pause";
    assert_int_equal(it_seed(sku, 1), 200);
    long port = it_port_base() + 36;
    char zkarg[80], url_p[256], url2[256];
    snprintf(zkarg, sizeof(zkarg), "%s", zk_hosts);
    const char *const args[] = {"--threads", "4", "--zk-hosts", zkarg, "--zk-session-ms",
                                "1000", NULL};
    int pid = it_start_inventory("inventory-zk-pause", port, NULL, args);
    assert_true(pid > 0);
    snprintf(url_p, sizeof(url_p), "http://127.0.0.1:%ld/inventory/deduct", port);
    deduct_url(1, url2, sizeof(url2));
    struct holder h = {.url = url_p,
                       .body = "{\"sku\":\"ZK-pause\",\"guard\":\"zookeeper\",\"hold_ms\":6000,"
                               "\"order_id\":\"ZK-pause-holder\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_thread, &h), 0);
    int held = wait_nodes(sku, 1);
    usleep(300 * 1000);        /* past the lock wait, into hold_ms */
    kill(pid, SIGSTOP);
    /* The buyer waits for the lock; it gets it once the session expired. */
    struct it_resp r;
    double t0 = now_s();
    long st = it_http("POST", url2,
                      "{\"sku\":\"ZK-pause\",\"guard\":\"zookeeper\",\"lock_wait_ms\":8000,"
                      "\"order_id\":\"ZK-pause-buyer\"}", &r);
    double took = now_s() - t0;
    kill(pid, SIGCONT);
    pthread_join(t, NULL);
    print_message("buyer: %ld after %.2f s; holder resumed: %ld %s\n", st, took, h.status,
                  h.error);
    it_resp_free(&r);
    it_stop_pid(pid);
    assert_int_equal(held, 0);
    assert_int_equal(st, 200);
    assert_int_equal(h.status, 503);
    assert_string_equal(h.error, "lease_expired");
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
}

/* A holder killed (SIGKILL) inside hold_ms: its node is ephemeral, so the
 * lock is free once its 1 s session expires, and a buyer on instance 2
 * that waits sells; the killed holder wrote nothing. */
static void test_zookeeper_crashed_holder_frees(void **state)
{
    const char *sku = "ZK-crash";
    assert_int_equal(it_seed(sku, 5), 200);
    long port = it_port_base() + 37;
    char url_c[256], url2[256];
    const char *const args[] = {"--threads", "4", "--zk-hosts", zk_hosts, "--zk-session-ms",
                                "1000", NULL};
    int pid = it_start_inventory("inventory-zk-crash", port, NULL, args);
    assert_true(pid > 0);
    snprintf(url_c, sizeof(url_c), "http://127.0.0.1:%ld/inventory/deduct", port);
    deduct_url(1, url2, sizeof(url2));
    struct holder h = {.url = url_c,
                       .body = "{\"sku\":\"ZK-crash\",\"guard\":\"zookeeper\",\"hold_ms\":8000,"
                               "\"order_id\":\"ZK-crash-holder\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_thread, &h), 0);
    int held = wait_nodes(sku, 1);
    it_kill(pid, SIGKILL, 5000);
    double t0 = now_s();
    long st = it_status("POST", url2,
                        "{\"sku\":\"ZK-crash\",\"guard\":\"zookeeper\",\"lock_wait_ms\":8000,"
                        "\"order_id\":\"ZK-crash-buyer\"}");
    double took = now_s() - t0;
    pthread_join(t, NULL);
    print_message("buyer after the holder's crash: %ld in %.2f s (holder: %ld)\n", st, took,
                  h.status);
    assert_int_equal(held, 0);
    assert_int_equal(h.status, 0);          /* the holder never answered */
    assert_int_equal(st, 200);
    assert_int_equal(lock_nodes(sku), 0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 4);
    assert_true(a.consistent);
}

/* A zookeeper sale released: the release runs under the SKU's ZooKeeper
 * lock and gives the unit back. */
static void test_zookeeper_release(void **state)
{
    const char *sku = "ZK-rel";
    assert_int_equal(it_seed(sku, 3), 200);
    char url[256], rel[256];
    deduct_url(0, url, sizeof(url));
    assert_int_equal(it_status("POST", url,
                               "{\"sku\":\"ZK-rel\",\"guard\":\"zookeeper\","
                               "\"order_id\":\"ZK-rel-1\"}"), 200);
    snprintf(rel, sizeof(rel), "%s/inventory/release", it.inventory[1]);
    struct it_resp r;
    assert_int_equal(it_http("POST", rel, "{\"order_id\":\"ZK-rel-1\"}", &r), 200);
    assert_non_null(r.json);
    assert_true(json_is_true(json_object_get(r.json, "released")));
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.stock, 3);
    assert_true(a.consistent);
    assert_int_equal(lock_nodes(sku), 0);
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
