/* Graceful drain (services/API.md "Stopping"): on SIGTERM an instance stops
 * accepting, answers requests still waiting for a worker 503 at once,
 * finishes the sales already running and exits 0, so a stop never needs
 * the KILL that strands a unit between Redis and MySQL. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static int group_setup(void **state) { return it_setup(); }

static void *hammer_main(void *arg)
{
    it_hammer(arg);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait for pid to exit (at most wait_ms); its exit status, or -1 when it
 * had to be killed. */
static int wait_exit(int pid, long wait_ms)
{
    int st = 0;
    struct timespec nap = {0, 10 * 1000000L};
    for (long waited = 0; waited <= wait_ms; waited += 10) {
        if (waitpid((pid_t)pid, &st, WNOHANG) == (pid_t)pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        nanosleep(&nap, NULL);
    }
    it_kill(pid, SIGKILL, 5000);
    return -1;
}

/* 40 concurrent redis-decr sales of 300 ms on 4 workers: 4 run, 36 wait.
 * SIGTERM 0.8 s in: every request is answered 200 or 503 (or refused), the
 * process is gone well before the queue could have been worked off (3 s) and exits
 * 0, every 200 is in the ledger, and the units of the 503s can still be
 * sold elsewhere (nothing stranded in Redis). */
static void test_sigterm_drains_without_stranding(void **state)
{
    const char *sku = "T-drain";
    const long long initial = 50;
    long port = it_port_base() + 21;
    const char *args[] = {"--threads", "4", "--guard", "redis-decr", NULL};
    int pid = it_start_inventory("inventory-drain", port, NULL, args);
    assert_true(pid > 0);
    assert_int_equal(it_seed(sku, initial), 200);

    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/inventory/deduct", port);
    const char *urls[] = {url};
    struct it_load l = {
        .total = 40, .clients = 40, .urls = urls, .nurls = 1, .method = "POST",
        .body_fmt = "{\"sku\":\"T-drain\",\"qty\":1,\"order_id\":\"drain-%d\","
                    "\"guard\":\"redis-decr\",\"hold_ms\":300}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hammer_main, &l), 0);
    struct timespec half = {0, 800 * 1000000L};
    nanosleep(&half, NULL);
    double t0 = now_s();
    kill((pid_t)pid, SIGTERM);
    int code = wait_exit(pid, 10000);
    double took = now_s() - t0;
    pthread_join(t, NULL);
    print_message("drain: exit %d after %.2f s; 200: %d, 503: %d, failed: %d\n", code, took,
                  l.by_status[200], l.by_status[503], l.by_status[0]);

    assert_int_equal(code, 0);
    assert_true(took < 1.5);
    /* A connection still in the listen backlog when the socket closes is
     * refused (status 0 here): not answered, nothing sold, the client
     * retries elsewhere. */
    assert_int_equal(l.by_status[200] + l.by_status[503] + l.by_status[0], 40);
    assert_true(l.by_status[503] > 0);

    /* Every answered sale is in MySQL, and no unit is lost: the rest of the
     * stock sells, one by one, on a stack instance with the same guard. */
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, l.by_status[200]);
    char u0[256], body[160];
    snprintf(u0, sizeof(u0), "%s/inventory/deduct", it.inventory[0]);
    long long more = 0;
    for (int i = 0; i < initial + 5; i++) {
        snprintf(body, sizeof(body),
                 "{\"sku\":\"%s\",\"qty\":1,\"order_id\":\"drain-after-%d\",\"guard\":\"redis-decr\"}",
                 sku, i);
        long st = it_status("POST", u0, body);
        if (st != 200)
            break;
        more++;
    }
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("drain: sold during drain %d, after %lld, stock %lld\n", l.by_status[200],
                  more, a.stock);
    assert_int_equal(l.by_status[200] + more, initial);
    assert_int_equal(a.stock, 0);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_drains_without_stranding),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
