/* The etcd guard against a real etcd: the stack's (LAB_ETCD_URL, its two
 * inventory instances, stopped and paused with deploy/local/stack), or,
 * on a stack without etcd, one started here on the free test ports with
 * its own data folder and two instances of the stack's build pointed at
 * it. Exact on two instances, the short
 * lease refused with a 400, a waiter that gives up leaves no key, fencing
 * tokens that grow, a holder paused past its lease (without and with
 * fencing) refusing to write, a killed holder's lease freeing the lock, a
 * release under the lock, and 503 while etcd is stopped or hung, serving
 * again once it is back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

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

/* Wait until sku has n lock keys; 0 when it did within 10 s. */
static int wait_keys(const char *sku, long n)
{
    for (int i = 0; i < 200; i++) {
        if (lock_keys(sku) == n)
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

static void deduct_url(int inst, char *out, size_t len)
{
    snprintf(out, len, "%s/inventory/deduct", inv_url[inst]);
}

static const char *error_of(struct it_resp *r)
{
    const char *e = r->json ? json_string_value(json_object_get(r->json, "error")) : NULL;
    return e ? e : "";
}

/* 2 instances, stock 100, 1000 deductions from 32 clients: exactly 100 sold
 * and no lock key left once every request has answered. */
static void test_etcd_exact(void **state)
{
    const char *sku = "ETCD-exact";
    assert_int_equal(it_seed(sku, 100), 200);
    static char urls[2][256];
    static const char *u[2] = {urls[0], urls[1]};
    for (int i = 0; i < 2; i++)
        deduct_url(i, urls[i], sizeof(urls[i]));
    const char *fmt = "{\"sku\":\"ETCD-exact\",\"guard\":\"etcd\",\"hold_ms\":1,"
                      "\"lock_wait_ms\":20000,\"order_id\":\"ETCD-exact-%d\"}";
    struct it_load l = {.total = 1000, .clients = 32, .urls = u, .nurls = 2, .method = "POST",
                        .body_fmt = fmt};
    double t0 = now_s();
    it_hammer(&l);
    double took = now_s() - t0;
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("etcd: sold %lld oversold %lld lost %lld | 200:%d 409:%d 503:%d | "
                  "%.1f s, %.0f req/s (indicative)\n", a.sold, a.oversold, a.lost_updates,
                  l.by_status[200], l.by_status[409], l.by_status[503], took, 1000 / took);
    assert_int_equal(a.sold, 100);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(l.by_status[200], 100);
    assert_int_equal(l.by_status[409], 900);
    assert_int_equal(lock_keys(sku), 0);
    assert_int_equal(leases(), 0);          /* every lease revoked, none left to expire */
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
    assert_string_equal(error_of(&r), "bad_request");
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
    snprintf(h->error, sizeof(h->error), "%s", error_of(&r));
    it_resp_free(&r);
    return NULL;
}

/* A holder on instance 1 (hold_ms 2000); a waiter on instance 2 with
 * lock_wait_ms 300 gives up with 503 lock_timeout, its key and lease gone:
 * once the holder is done no key is left. */
static void test_etcd_waiter_gives_up(void **state)
{
    const char *sku = "ETCD-wait";
    assert_int_equal(it_seed(sku, 10), 200);
    char url1[256], url2[256];
    deduct_url(0, url1, sizeof(url1));
    deduct_url(1, url2, sizeof(url2));
    struct holder h = {.url = url1,
                       .body = "{\"sku\":\"ETCD-wait\",\"guard\":\"etcd\",\"hold_ms\":2000,"
                               "\"order_id\":\"ETCD-wait-holder\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_thread, &h), 0);
    int held = wait_keys(sku, 1);
    struct it_resp r;
    double t0 = now_s();
    long st = it_http("POST", url2,
                      "{\"sku\":\"ETCD-wait\",\"guard\":\"etcd\",\"lock_wait_ms\":300,"
                      "\"order_id\":\"ETCD-wait-waiter\"}", &r);
    double waited = now_s() - t0;
    long during = lock_keys(sku), during_leases = leases();
    pthread_join(t, NULL);
    print_message("waiter: %ld after %.2f s: %.160s; keys after it: %ld\n", st, waited, r.body,
                  during);
    assert_int_equal(held, 0);
    assert_int_equal(st, 503);
    assert_string_equal(error_of(&r), "lock_timeout");
    it_resp_free(&r);
    assert_true(waited >= 0.3);
    assert_int_equal(during, 1);            /* only the holder's key */
    assert_int_equal(during_leases, 1);     /* the waiter revoked its lease */
    assert_int_equal(h.status, 200);
    assert_int_equal(lock_keys(sku), 0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_true(a.consistent);
}

/* With fencing:true the token is the lock key's create revision: the
 * stored fence is positive and grows from one sale to the next. */
static void test_etcd_fencing(void **state)
{
    const char *sku = "ETCD-fence";
    assert_int_equal(it_seed(sku, 10), 200);
    char url[256], body[256];
    long long fence[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        deduct_url(i, url, sizeof(url));
        snprintf(body, sizeof(body),
                 "{\"sku\":\"%s\",\"guard\":\"etcd\",\"fencing\":true,\"order_id\":\"%s-%d\"}",
                 sku, sku, i);
        assert_int_equal(it_status("POST", url, body), 200);
        fence[i] = it_sql_value("SELECT fence FROM db_shopping.inventory WHERE sku='ETCD-fence'");
    }
    print_message("fence after each sale: %lld %lld\n", fence[0], fence[1]);
    assert_true(fence[0] > 0);
    assert_true(fence[1] > fence[0]);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 2);
    assert_true(a.consistent);
}

/* A holder on its own instance, paused (SIGSTOP) past its 2 s lease: etcd
 * expires the lease (the watchdog is paused with it), the lock goes to a
 * buyer on instance 2 who sells the last unit. Resumed with hold time
 * left, the holder finds its lease out of date by its own clock and
 * answers 503 lease_expired (with fencing a refused fenced write, 409
 * fenced, is the other possible answer): sold 1, never 2. */
static void paused_holder(const char *sku, int fencing)
{
    assert_int_equal(it_seed(sku, 1), 200);
    long port = it_port_base() + 24;
    const char *const args[] = {"--threads", "4", "--etcd-endpoints", etcd_url, NULL};
    int pid = it_start_inventory("inventory-etcd-pause", port, NULL, args);
    assert_true(pid > 0);
    char url_p[256], url2[256], hb[320], bb[320];
    snprintf(url_p, sizeof(url_p), "http://127.0.0.1:%ld/inventory/deduct", port);
    deduct_url(1, url2, sizeof(url2));
    const char *f = fencing ? ",\"fencing\":true" : "";
    snprintf(hb, sizeof(hb),
             "{\"sku\":\"%s\",\"guard\":\"etcd\",\"hold_ms\":6000,\"lock_ttl_ms\":2000%s,"
             "\"order_id\":\"%s-holder\"}", sku, f, sku);
    snprintf(bb, sizeof(bb),
             "{\"sku\":\"%s\",\"guard\":\"etcd\",\"lock_wait_ms\":8000,\"lock_ttl_ms\":2000%s,"
             "\"order_id\":\"%s-buyer\"}", sku, f, sku);
    struct holder h = {.url = url_p, .body = hb};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_thread, &h), 0);
    int held = wait_keys(sku, 1);
    usleep(300 * 1000);        /* into hold_ms */
    kill(pid, SIGSTOP);
    struct it_resp r;
    double t0 = now_s();
    long st = it_http("POST", url2, bb, &r);
    double took = now_s() - t0;
    kill(pid, SIGCONT);
    pthread_join(t, NULL);
    print_message("%s: buyer %ld after %.2f s; holder resumed: %ld %s\n",
                  fencing ? "fencing" : "no fencing", st, took, h.status, h.error);
    it_resp_free(&r);
    it_stop_pid(pid);
    assert_int_equal(held, 0);
    assert_int_equal(st, 200);
    assert_true(took >= 1.0);   /* the buyer waited for the lease to run out */
    if (fencing)
        assert_true((h.status == 503 && strcmp(h.error, "lease_expired") == 0) ||
                    (h.status == 409 && strcmp(h.error, "fenced") == 0));
    else {
        assert_int_equal(h.status, 503);
        assert_string_equal(h.error, "lease_expired");
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
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
 * instance 2 sells; the killed holder wrote nothing. */
static void test_etcd_killed_holder_frees(void **state)
{
    const char *sku = "ETCD-crash";
    assert_int_equal(it_seed(sku, 5), 200);
    long port = it_port_base() + 25;
    const char *const args[] = {"--threads", "4", "--etcd-endpoints", etcd_url, NULL};
    int pid = it_start_inventory("inventory-etcd-crash", port, NULL, args);
    assert_true(pid > 0);
    char url_c[256], url2[256];
    snprintf(url_c, sizeof(url_c), "http://127.0.0.1:%ld/inventory/deduct", port);
    deduct_url(1, url2, sizeof(url2));
    struct holder h = {.url = url_c,
                       .body = "{\"sku\":\"ETCD-crash\",\"guard\":\"etcd\",\"hold_ms\":8000,"
                               "\"lock_ttl_ms\":2000,\"order_id\":\"ETCD-crash-holder\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_thread, &h), 0);
    int held = wait_keys(sku, 1);
    it_kill(pid, SIGKILL, 5000);
    double t0 = now_s();
    long st = it_status("POST", url2,
                        "{\"sku\":\"ETCD-crash\",\"guard\":\"etcd\",\"lock_wait_ms\":8000,"
                        "\"order_id\":\"ETCD-crash-buyer\"}");
    double took = now_s() - t0;
    pthread_join(t, NULL);
    print_message("buyer after the holder's kill: %ld in %.2f s (holder: %ld)\n", st, took,
                  h.status);
    assert_int_equal(held, 0);
    assert_int_equal(h.status, 0);          /* the holder never answered */
    assert_int_equal(st, 200);
    assert_true(took >= 0.5);               /* it waited for the lease */
    assert_int_equal(lock_keys(sku), 0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 4);
    assert_true(a.consistent);
}

/* An etcd sale released on the other instance: the release runs under
 * the SKU's etcd lock and gives the unit back; no key left. */
static void test_etcd_release(void **state)
{
    const char *sku = "ETCD-rel";
    assert_int_equal(it_seed(sku, 3), 200);
    char url[256], rel[256];
    deduct_url(0, url, sizeof(url));
    assert_int_equal(it_status("POST", url,
                               "{\"sku\":\"ETCD-rel\",\"guard\":\"etcd\","
                               "\"order_id\":\"ETCD-rel-1\"}"), 200);
    snprintf(rel, sizeof(rel), "%s/inventory/release", inv_url[1]);
    struct it_resp r;
    assert_int_equal(it_http("POST", rel, "{\"order_id\":\"ETCD-rel-1\"}", &r), 200);
    assert_non_null(r.json);
    assert_true(json_is_true(json_object_get(r.json, "released")));
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.stock, 3);
    assert_true(a.consistent);
    assert_int_equal(lock_keys(sku), 0);
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
    assert_string_equal(error_of(&r), "bad_request");
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
    struct holder h = {.url = url1,
                       .body = "{\"sku\":\"ETCD-hungwait\",\"guard\":\"etcd\",\"hold_ms\":3000,"
                               "\"order_id\":\"ETCD-hungwait-holder\"}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_thread, &h), 0);
    int held = wait_keys(sku, 1);
    struct holder w = {.url = url2,
                       .body = "{\"sku\":\"ETCD-hungwait\",\"guard\":\"etcd\","
                               "\"lock_wait_ms\":8000,\"order_id\":\"ETCD-hungwait-waiter\"}"};
    pthread_t tw;
    double t0 = now_s();
    assert_int_equal(pthread_create(&tw, NULL, hold_thread, &w), 0);
    int waiting = wait_keys(sku, 2);   /* the waiter's key is queued */
    pause_etcd(1);
    pthread_join(tw, NULL);
    double took = now_s() - t0;
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
    double t0 = now_s();
    long st = it_http("POST", url, body, &r);
    if (took)
        *took = now_s() - t0;
    snprintf(err, errlen, "%s", error_of(&r));
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
    double t0 = now_s();
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
                      now_s() - t0);
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
