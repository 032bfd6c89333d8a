/* The window a lease check cannot close. An etcd holder checks its lease
 * right before the COMMIT (a zookeeper holder asks the server about its
 * lock node); a stop-the-world pause that starts right AFTER that check
 * (the --etcd- / --zk-fault-pause-after-check fault point, on a third
 * instance of its own) outlives the 2 s lease (4 s session): it expires, a
 * buyer on instance 2 takes the lock and reads the stock while the paused holder's
 * write is still uncommitted, and its own write waits on the row lock.
 * The holder wakes and commits without another look; then the buyer
 * commits the stock it read. Unfenced, that loses the holder's sale (two
 * sales, the stock moved by one). Fenced, the buyer's token claims the row
 * before its read, so it reads after the holder's COMMIT (or is refused,
 * 409 fenced): exact. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int group_setup(void **state) { return it_setup(); }

/* One lease guard's window: how its holder's fault point is armed, how
 * long it stops (longer than the lease or session plus the server's expiry
 * tick, 0.5 s, and the buyer's lock hand-over; shorter than that plus the
 * buyer's row-lock wait, innodb_lock_wait_timeout = its lock_wait_ms), and
 * the lease fields of both requests. */
struct window_case {
    const char *guard;
    const char *fault_env;        /* "LAB_FAULT_..._MS=N" */
    const char *lease;            /* body fields: ",\"lock_ttl_ms\":..." or "" */
    long buyer_wait_ms;
};

static const struct window_case etcd_case = {
    "etcd", "LAB_FAULT_ETCD_PAUSE_AFTER_CHECK_MS=4500", ",\"lock_ttl_ms\":2000", 4000};
/* ZooKeeper: the 4 s session (--zk-session-ms default) instead of a lease. */
static const struct window_case zk_case = {
    "zookeeper", "LAB_FAULT_ZK_PAUSE_AFTER_CHECK_MS=6500", "", 7000};

#define WINDOW_PORT 38

/* 1 once pid is stopped (state T), polled up to wait_ms. */
static int stopped_within(int pid, long wait_ms)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    for (long waited = 0; waited <= wait_ms; waited += 10) {
        FILE *f = fopen(path, "r");
        if (f) {
            char *end = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
            fclose(f);
            if (end && end[1] == ' ' && end[2] == 'T')
                return 1;
        }
        it_sleep_us(10000);
    }
    return 0;
}

struct window_run {
    long holder, buyer;       /* HTTP answers */
    struct it_audit audit;
};

/* One holder on its own instance paused after its check, one buyer on
 * instance 2 started once the pause began. */
static void run_window(const struct window_case *k, const char *sku, int fencing,
                       struct window_run *w)
{
    const char *const env[] = {k->fault_env, NULL};
    char zk[64];
    const char *zk_port = getenv("LAB_ZK_PORT");
    snprintf(zk, sizeof(zk), "127.0.0.1:%s", zk_port ? zk_port : "2191");
    const char *const args[] = {"--threads", "4", "--zk-hosts", zk, NULL};
    long port = it_port_base() + WINDOW_PORT;
    int pid = it_start_inventory("inventory-window", port, env, args);
    assert_true(pid > 0);
    char base[64], body[256];
    snprintf(base, sizeof(base), "http://127.0.0.1:%ld", port);
    assert_int_equal(it_seed(sku, 10), 200);

    const char *fence = fencing ? ",\"fencing\":true" : "";
    struct it_bg_post holder, buyer;
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"order_id\":\"%s-holder\",\"guard\":\"%s\","
             "\"lock_wait_ms\":3000%s%s}", sku, sku, k->guard, k->lease, fence);
    assert_int_equal(it_bg_deduct(&holder, base, body), 0);
    int paused = stopped_within(pid, 5000);
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"order_id\":\"%s-buyer\",\"guard\":\"%s\","
             "\"lock_wait_ms\":%ld%s%s}", sku, sku, k->guard, k->buyer_wait_ms, k->lease,
             fence);
    assert_int_equal(it_bg_deduct(&buyer, it.inventory[1], body), 0);
    it_bg_post_join(&buyer);
    it_bg_post_join(&holder);
    it_stop_pid(pid);
    assert_true(paused);   /* the fault point was reached: the holder passed its check */
    w->holder = holder.status;
    w->buyer = buyer.status;
    assert_int_equal(it_audit(sku, &w->audit), 0);
    printf("  %s, fencing %d: holder %ld, buyer %ld; sold %lld, stock %lld, lost_updates %lld\n",
           k->guard, fencing, w->holder, w->buyer, w->audit.sold, w->audit.stock,
           w->audit.lost_updates);
}

/* Unfenced: both answered "sold", both in the ledger, the stock moved once. */
static void loses_an_update(const struct window_case *k, const char *sku)
{
    struct window_run w;
    run_window(k, sku, 0, &w);
    assert_int_equal(w.holder, 200);
    assert_int_equal(w.buyer, 200);
    assert_int_equal(w.audit.sold, 2);
    assert_int_equal(w.audit.stock, 9);
    assert_int_equal(w.audit.lost_updates, 1);
    assert_false(w.audit.consistent);
}

/* Fenced: the buyer reads after the holder's COMMIT, or is refused. */
static void fenced_is_exact(const struct window_case *k, const char *sku)
{
    struct window_run w;
    run_window(k, sku, 1, &w);
    assert_int_equal(w.holder, 200);
    assert_true(w.buyer == 200 || w.buyer == 409);
    assert_int_equal(w.audit.sold, w.buyer == 200 ? 2 : 1);
    assert_int_equal(w.audit.stock, 10 - w.audit.sold);
    assert_int_equal(w.audit.lost_updates, 0);
    assert_true(w.audit.consistent);
}

static void test_etcd_pause_after_check_loses_an_update(void **state)
{
    loses_an_update(&etcd_case, "T-window");
}

static void test_etcd_pause_after_check_fenced_is_exact(void **state)
{
    fenced_is_exact(&etcd_case, "T-windowf");
}

static void test_zookeeper_pause_after_check_loses_an_update(void **state)
{
    loses_an_update(&zk_case, "T-windowz");
}

static void test_zookeeper_pause_after_check_fenced_is_exact(void **state)
{
    fenced_is_exact(&zk_case, "T-windowzf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etcd_pause_after_check_loses_an_update),
        cmocka_unit_test(test_etcd_pause_after_check_fenced_is_exact),
        cmocka_unit_test(test_zookeeper_pause_after_check_loses_an_update),
        cmocka_unit_test(test_zookeeper_pause_after_check_fenced_is_exact),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
