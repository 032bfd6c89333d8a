/* The etcd guard against a real etcd: the stack's (LAB_ETCD_URL, its two
 * inventory instances, stopped and paused with deploy/local/stack), or,
 * on a stack without etcd, one started here on the free test ports with
 * its own data folder and two instances of the stack's build pointed at
 * it. Exact on two instances, the short
 * lease refused with a 400, a waiter that gives up leaves no key, fencing
 * tokens that grow, a holder paused past its lease (without and with
 * fencing) refusing to write, a killed holder's lease freeing the lock, a
 * release under the lock, 503 backend_unavailable (not lock_timeout) when
 * etcd hangs while a sale waits for the lock, and 503 while etcd is
 * stopped or hung, serving again once it is back. The checks it shares
 * with test_zookeeper are in lock_suite.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"
#include "lock_suite.h"

#include "locks/etcd.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PREFIX "/locks/inventory/"

static long etcd_port, peer_port;
static char etcd_url[128], data_dir[600], inv_url[2][64];
static int etcd_pid = -1, inv_pid[2] = {-1, -1};
static int etcd_paused;
static int stack_etcd;          /* 1: the stack's etcd and instances */
static struct etcd_client *ec;  /* the test's own client, to look at lock keys */

/* Start an etcd on port/peer with data dir `dir` (kept between starts:
 * durable) and, when slow, a 2.5 s election timeout (so its minimum lease
 * is 4 s); wait up to 20 s for /health. Returns its pid, or -1. */
static int spawn_etcd(long port, long peer_port_, const char *dir, int slow)
{
    char listen[64], peer[64], cluster[96], log[700];
    snprintf(listen, sizeof(listen), "http://127.0.0.1:%ld", port);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%ld", peer_port_);
    snprintf(cluster, sizeof(cluster), "default=%s", peer);
    snprintf(log, sizeof(log), "%s/logs/etcd-test.log", it.stack_dir);
    int pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl("/usr/bin/etcd", "etcd", "--data-dir", dir, "--listen-client-urls", listen,
              "--advertise-client-urls", listen, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
              "--election-timeout", slow ? "2500" : "1000", "--heartbeat-interval",
              slow ? "250" : "100", (char *)NULL);
        _exit(127);
    }
    char health[96];
    snprintf(health, sizeof(health), "%s/health", listen);
    if (it_wait_status(health, 200, 20000) != 0) {
        it_kill(pid, SIGKILL, 5000);
        return -1;
    }
    return pid;
}

/* The test's main etcd (again). Returns 0. */
static int start_etcd(void)
{
    if (stack_etcd) {
        if (it_stack("start", "etcd") != 0)
            return -1;
        etcd_pid = 1;   /* running; the stack knows its pid */
        return 0;
    }
    etcd_pid = spawn_etcd(etcd_port, peer_port, data_dir, 0);
    return etcd_pid > 0 ? 0 : -1;
}

/* Hang / wake the main etcd (SIGSTOP / SIGCONT). */
static void pause_etcd(int on)
{
    if (stack_etcd)
        it_stack(on ? "pause" : "resume", "etcd");
    else
        kill(etcd_pid, on ? SIGSTOP : SIGCONT);
    etcd_paused = on;
}

static void stop_etcd(void)
{
    if (etcd_pid <= 0)
        return;
    if (etcd_paused)
        pause_etcd(0);
    if (stack_etcd)
        it_stack("stop", "etcd");
    else
        it_kill(etcd_pid, SIGTERM, 10000);
    etcd_pid = -1;
}

static int group_setup(void **state)
{
    if (it_setup() != 0)
        return -1;
    long base = it_port_base();
    const char *url = getenv("LAB_ETCD_URL");
    if (url && *url) {
        stack_etcd = 1;
        etcd_pid = 1;
        snprintf(etcd_url, sizeof(etcd_url), "%s", url);
        for (int i = 0; i < 2; i++)
            snprintf(inv_url[i], sizeof(inv_url[i]), "%.63s", it.inventory[i]);
        ec = etcd_client_new(etcd_url, 2000, NULL, NULL, 0);
        return ec ? 0 : -1;
    }
    etcd_port = base + 20;
    peer_port = base + 21;
    snprintf(etcd_url, sizeof(etcd_url), "http://127.0.0.1:%ld", etcd_port);
    snprintf(data_dir, sizeof(data_dir), "%s/etcd-test", it.stack_dir);
    if (start_etcd() != 0) {
        fprintf(stderr, "etcd did not start (see %s/logs/etcd-test.log)\n", it.stack_dir);
        stop_etcd();
        return -1;
    }
    char arg[128];
    snprintf(arg, sizeof(arg), "%s", etcd_url);
    const char *const args[] = {"--threads", "16", "--etcd-endpoints", arg, NULL};
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof(name), "inventory-etcd-%d", i + 1);
        snprintf(inv_url[i], sizeof(inv_url[i]), "http://127.0.0.1:%ld", base + 22 + i);
        inv_pid[i] = it_start_inventory(name, base + 22 + i, NULL, args);
        if (inv_pid[i] <= 0)
            return -1;
    }
    ec = etcd_client_new(etcd_url, 2000, NULL, NULL, 0);
    return ec ? 0 : -1;
}

static int group_teardown(void **state)
{
    etcd_client_free(ec);
    if (stack_etcd)
        return 0;   /* the stack's: left running */
    for (int i = 0; i < 2; i++)
        it_stop_pid(inv_pid[i]);
    stop_etcd();
    return 0;
}

/* Whatever a test did, etcd is running (and not paused) after it. */
static int restart_etcd(void **state)
{
    if (etcd_paused)
        pause_etcd(0);
    if (etcd_pid < 0)
        start_etcd();
    return 0;
}

/* Lock keys under PREFIX{sku}/ now (holder + waiters); -1 on error. */
static long lock_keys(const char *sku)
{
    char prefix[160], err[160];
    snprintf(prefix, sizeof(prefix), PREFIX "%s/", sku);
    long n = etcd_count_prefix(ec, prefix, 2000, err, sizeof(err));
    if (n < 0)
        fprintf(stderr, "%s\n", err);
    return n;
}

/* Leases etcd holds now (every holder and waiter has one); -1 on error. */
static long leases(void)
{
    char err[160];
    long n = etcd_lease_count(ec, 2000, err, sizeof(err));
    if (n < 0)
        fprintf(stderr, "%s\n", err);
    return n;
}

/* Both instances as the shared lock-service checks want them. */
static void bases(const char *base[2])
{
    base[0] = inv_url[0];
    base[1] = inv_url[1];
}

static void deduct_url(int inst, char *out, size_t len)
{
    ls_deduct_url(inv_url[inst], out, len);
}

/* 2 instances, stock 100, 1000 deductions from 32 clients: exactly 100 sold,
 * no lock key left once every request has answered, and every lease
 * revoked (none left to expire). */
static void test_etcd_exact(void **state)
{
    const char *base[2];
    bases(base);
    ls_exact("etcd", "ETCD-exact", base, lock_keys);
    assert_int_equal(leases(), 0);
}

/* A lock_ttl_ms below etcd's minimum lease (2 s) is a 400 that says so,
 * nothing sold and no lease asked for; 2000 ms sells. */
static void test_etcd_short_lease_400(void **state)
{
    const char *sku = "ETCD-short";
    assert_int_equal(it_seed(sku, 5), 200);
    char url[256];
    deduct_url(0, url, sizeof(url));
    struct it_resp r;
    long st = it_http("POST", url,
                      "{\"sku\":\"ETCD-short\",\"guard\":\"etcd\",\"lock_ttl_ms\":1500,"
                      "\"order_id\":\"ETCD-short-1\"}", &r);
    print_message("lock_ttl_ms 1500: %ld %.200s\n", st, r.body);
    assert_int_equal(st, 400);
    assert_string_equal(ls_error_of(&r), "bad_request");
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    if (!detail)
        detail = r.body;
    assert_non_null(strstr(detail, "minimum lease"));
    it_resp_free(&r);
    assert_int_equal(it_status("POST", url,
                               "{\"sku\":\"ETCD-short\",\"guard\":\"etcd\",\"lock_ttl_ms\":2000,"
                               "\"order_id\":\"ETCD-short-2\"}"), 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_true(a.consistent);
}

/* A holder on instance 1 (hold_ms 2000); a waiter on instance 2 with
 * lock_wait_ms 300 gives up with 503 lock_timeout, its key gone and its
 * lease revoked while the holder holds: once the holder is done no key is
 * left. */
static void test_etcd_waiter_gives_up(void **state)
{
    const char *base[2];
    bases(base);
    ls_waiter_gives_up("etcd", "ETCD-wait", base, lock_keys, leases, 1);
}

/* With fencing:true the token is the lock key's create revision: the
 * stored fence is positive and grows from one sale to the next. */
static void test_etcd_fencing(void **state)
{
    const char *base[2];
    bases(base);
    ls_fencing("etcd", "ETCD-fence", base);
}

/* A holder on its own instance, paused (SIGSTOP) past its 2 s lease: etcd
 * expires the lease (the watchdog is paused with it), the lock goes to a
 * buyer on instance 2 who sells the last unit. Resumed with hold time
 * left, the holder finds its lease out of date by its own clock and
 * answers 503 lease_expired (with fencing a refused fenced write, 409
 * fenced, is the other possible answer): sold 1, never 2. */
static void paused_holder(const char *sku, int fencing)
{
    long port = it_port_base() + 24;
    const char *const args[] = {"--threads", "4", "--etcd-endpoints", etcd_url, NULL};
    int pid = it_start_inventory("inventory-etcd-pause", port, NULL, args);
    assert_true(pid > 0);
    char base_p[64];
    snprintf(base_p, sizeof(base_p), "http://127.0.0.1:%ld", port);
    struct ls_paused p;
    ls_paused_holder("etcd", sku, base_p, pid,
                     fencing ? ",\"lock_ttl_ms\":2000,\"fencing\":true" : ",\"lock_ttl_ms\":2000",
                     inv_url[1], lock_keys, &p);
    assert_true(p.buyer_took_s >= 1.0);   /* the buyer waited for the lease to run out */
    if (fencing)
        assert_true((p.holder_status == 503 && strcmp(p.holder_error, "lease_expired") == 0) ||
                    (p.holder_status == 409 && strcmp(p.holder_error, "fenced") == 0));
    else {
        assert_int_equal(p.holder_status, 503);
        assert_string_equal(p.holder_error, "lease_expired");
    }
}

static void test_etcd_paused_holder(void **state)
{
    paused_holder("ETCD-pause", 0);
}

static void test_etcd_paused_holder_fenced(void **state)
{
    paused_holder("ETCD-pausef", 1);
}

/* A holder killed (SIGKILL) inside hold_ms: nobody renews its 2 s lease,
 * etcd expires it and deletes the lock key, and a waiting buyer on
 * instance 2 sells (after at least 0.5 s); the killed holder wrote
 * nothing. */
static void test_etcd_killed_holder_frees(void **state)
{
    long port = it_port_base() + 25;
    const char *const args[] = {"--threads", "4", "--etcd-endpoints", etcd_url, NULL};
    int pid = it_start_inventory("inventory-etcd-crash", port, NULL, args);
    assert_true(pid > 0);
    char base_c[64];
    snprintf(base_c, sizeof(base_c), "http://127.0.0.1:%ld", port);
    ls_killed_holder_frees("etcd", "ETCD-crash", base_c, pid, ",\"lock_ttl_ms\":2000",
                           inv_url[1], lock_keys, 0.5);
}

/* An etcd sale released on the other instance: the release runs under
 * the SKU's etcd lock and gives the unit back; no key left. */
static void test_etcd_release(void **state)
{
    const char *base[2];
    bases(base);
    ls_release("etcd", "ETCD-rel", base, lock_keys);
}

/* An etcd whose minimum lease is above --etcd-min-lease (election timeout
 * 2.5 s: minimum 4 s) lengthens a 3 s lease without saying so: the guard
 * sees it in the grant's answer and answers 400 naming the server's
 * minimum, nothing sold, no key left; a 4 s lease sells. */
static void test_etcd_server_minimum_400(void **state)
{
    const char *sku = "ETCD-srvmin";
    assert_int_equal(it_seed(sku, 5), 200);
    long base = it_port_base();
    char dir[700], url[96], deduct[128];
    snprintf(dir, sizeof(dir), "%s/etcd-test-slow", it.stack_dir);
    int epid = spawn_etcd(base + 26, base + 27, dir, 1);
    assert_true(epid > 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld", base + 26);
    const char *const args[] = {"--threads", "4", "--etcd-endpoints", url, NULL};
    int pid = it_start_inventory("inventory-etcd-slow", base + 24, NULL, args);
    snprintf(deduct, sizeof(deduct), "http://127.0.0.1:%ld/inventory/deduct", base + 24);
    struct it_resp r;
    long st = it_http("POST", deduct,
                      "{\"sku\":\"ETCD-srvmin\",\"guard\":\"etcd\",\"lock_ttl_ms\":3000,"
                      "\"order_id\":\"ETCD-srvmin-1\"}", &r);
    print_message("lock_ttl_ms 3000 on an etcd with a 4 s minimum: %ld %.200s\n", st, r.body);
    long st4 = it_status("POST", deduct,
                         "{\"sku\":\"ETCD-srvmin\",\"guard\":\"etcd\",\"lock_ttl_ms\":4000,"
                         "\"order_id\":\"ETCD-srvmin-2\"}");
    it_stop_pid(pid);
    it_kill(epid, SIGTERM, 10000);
    assert_true(pid > 0);
    assert_int_equal(st, 400);
    assert_string_equal(ls_error_of(&r), "bad_request");
    assert_non_null(strstr(r.body, "minimum lease of 4 s"));
    it_resp_free(&r);
    assert_int_equal(st4, 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_true(a.consistent);
}

/* etcd hangs (SIGSTOP) while a sale waits for a held lock: the waiter
 * cannot tell a busy lock from a hung etcd by its lock call alone, but it
 * must answer 503 backend_unavailable (not lock_timeout, which tells the
 * client to retry a busy SKU) well before its lock_wait_ms of 8 s and
 * within the request's deadline. */
static void test_etcd_hung_during_wait(void **state)
{
    const char *sku = "ETCD-hungwait";
    assert_int_equal(it_seed(sku, 10), 200);
    char url1[256], url2[256];
    deduct_url(0, url1, sizeof(url1));
    deduct_url(1, url2, sizeof(url2));
    struct ls_sale h = {.url = url1,
                        .body = "{\"sku\":\"ETCD-hungwait\",\"guard\":\"etcd\",\"hold_ms\":3000,"
                                "\"order_id\":\"ETCD-hungwait-holder\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ls_sale_run, &h), 0);
    int held = ls_wait_count(lock_keys, sku, 1);
    struct ls_sale w = {.url = url2,
                        .body = "{\"sku\":\"ETCD-hungwait\",\"guard\":\"etcd\","
                                "\"lock_wait_ms\":8000,\"order_id\":\"ETCD-hungwait-waiter\"}"};
    pthread_t tw;
    double t0 = ls_now_s();
    assert_int_equal(pthread_create(&tw, NULL, ls_sale_run, &w), 0);
    int waiting = ls_wait_count(lock_keys, sku, 2);   /* the waiter's key is queued */
    pause_etcd(1);
    pthread_join(tw, NULL);
    double took = ls_now_s() - t0;
    pause_etcd(0);
    pthread_join(t, NULL);
    print_message("waiter with etcd hung during its wait: %ld %s after %.2f s (holder: %ld %s)\n",
                  w.status, w.error, took, h.status, h.error);
    assert_int_equal(held, 0);
    assert_int_equal(waiting, 0);
    assert_int_equal(w.status, 503);
    assert_string_equal(w.error, "backend_unavailable");
    assert_true(took < 6.0);   /* well inside lock_wait_ms 8 s and the 10 s deadline */
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_true(a.sold <= 1);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
}

/* One deduction on instance inst; returns the status, error in err. */
static long deduct_once(int inst, const char *sku, const char *oid, char *err, size_t errlen,
                        double *took)
{
    char url[256], body[256];
    deduct_url(inst, url, sizeof(url));
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"etcd\",\"order_id\":\"%s\"}", sku,
             oid);
    struct it_resp r;
    double t0 = ls_now_s();
    long st = it_http("POST", url, body, &r);
    if (took)
        *took = ls_now_s() - t0;
    snprintf(err, errlen, "%s", ls_error_of(&r));
    it_resp_free(&r);
    return st;
}

/* etcd stopped, then hung (SIGSTOP): 503 backend_unavailable within the
 * bounded wait, /healthz 503, nothing sold; started again: the same
 * instances sell without a restart. */
static void test_etcd_down_then_back(void **state)
{
    const char *sku = "ETCD-down";
    assert_int_equal(it_seed(sku, 10), 200);
    char err[64], oid[64], hz[96];
    assert_int_equal(deduct_once(0, sku, "ETCD-down-0", err, sizeof(err), NULL), 200);

    stop_etcd();
    for (int i = 0; i < 2; i++) {
        double took;
        snprintf(oid, sizeof(oid), "ETCD-down-stopped-%d", i);
        long st = deduct_once(i, sku, oid, err, sizeof(err), &took);
        print_message("instance %d, etcd stopped: %ld %s in %.2f s\n", i + 1, st, err, took);
        assert_int_equal(st, 503);
        assert_string_equal(err, "backend_unavailable");
        assert_true(took < 3.0);
    }
    snprintf(hz, sizeof(hz), "%s/healthz", inv_url[0]);
    assert_int_equal(it_status("GET", hz, NULL), 503);

    assert_int_equal(start_etcd(), 0);
    pause_etcd(1);
    {
        double took;
        long st = deduct_once(1, sku, "ETCD-down-hung", err, sizeof(err), &took);
        print_message("instance 2, etcd hung: %ld %s in %.2f s\n", st, err, took);
        assert_int_equal(st, 503);
        assert_string_equal(err, "backend_unavailable");
        assert_true(took < 3.0);   /* --etcd-op-timeout 1 s, not the request's 10 s */
    }
    double t0 = ls_now_s();
    pause_etcd(0);
    for (int i = 0; i < 2; i++) {
        long st = 0;
        for (int k = 0; k < 100 && st != 200; k++) {
            snprintf(oid, sizeof(oid), "ETCD-down-back-%d", i);
            st = deduct_once(i, sku, oid, err, sizeof(err), NULL);
            if (st != 200)
                usleep(100 * 1000);
        }
        print_message("instance %d sells again %.1f s after etcd is back\n", i + 1,
                      ls_now_s() - t0);
        assert_int_equal(st, 200);
    }
    assert_int_equal(it_status("GET", hz, NULL), 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 3);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etcd_exact),
        cmocka_unit_test(test_etcd_short_lease_400),
        cmocka_unit_test(test_etcd_waiter_gives_up),
        cmocka_unit_test(test_etcd_fencing),
        cmocka_unit_test(test_etcd_paused_holder),
        cmocka_unit_test(test_etcd_paused_holder_fenced),
        cmocka_unit_test(test_etcd_killed_holder_frees),
        cmocka_unit_test(test_etcd_release),
        cmocka_unit_test(test_etcd_server_minimum_400),
        cmocka_unit_test_teardown(test_etcd_hung_during_wait, restart_etcd),
        cmocka_unit_test_teardown(test_etcd_down_then_back, restart_etcd),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
