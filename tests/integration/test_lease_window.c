/* The window a lease check cannot close. An etcd holder checks its lease
 * right before the COMMIT; a stop-the-world pause that starts right AFTER
 * that check (the --etcd-fault-pause-after-check fault point, on a third
 * instance of its own) outlives the 2 s lease: etcd expires it, a buyer on
 * instance 2 takes the lock and reads the stock while the paused holder's
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
#include <string.h>
#include <time.h>

static int group_setup(void **state) { return it_setup(); }

/* Longer than the 2 s lease plus etcd's expiry tick (0.5 s) and the
 * buyer's lock hand-over, shorter than that plus the buyer's row-lock wait
 * (lock_wait_ms 4000: innodb_lock_wait_timeout 4 s). */
#define PAUSE_MS "4500"
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
static void run_window(const char *sku, int fencing, struct window_run *w)
{
    const char *const env[] = {"LAB_FAULT_ETCD_PAUSE_AFTER_CHECK_MS=" PAUSE_MS, NULL};
    const char *const args[] = {"--threads", "4", NULL};
    long port = it_port_base() + WINDOW_PORT;
    int pid = it_start_inventory("inventory-window", port, env, args);
    assert_true(pid > 0);
    char base[64], body[256];
    snprintf(base, sizeof(base), "http://127.0.0.1:%ld", port);
    assert_int_equal(it_seed(sku, 10), 200);

    const char *fence = fencing ? ",\"fencing\":true" : "";
    struct it_bg_post holder, buyer;
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"order_id\":\"%s-holder\",\"guard\":\"etcd\","
             "\"lock_ttl_ms\":2000,\"lock_wait_ms\":3000%s}", sku, sku, fence);
    assert_int_equal(it_bg_deduct(&holder, base, body), 0);
    int paused = stopped_within(pid, 5000);
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"order_id\":\"%s-buyer\",\"guard\":\"etcd\","
             "\"lock_ttl_ms\":2000,\"lock_wait_ms\":4000%s}", sku, sku, fence);
    assert_int_equal(it_bg_deduct(&buyer, it.inventory[1], body), 0);
    it_bg_post_join(&buyer);
    it_bg_post_join(&holder);
    it_stop_pid(pid);
    assert_true(paused);   /* the fault point was reached: the holder passed its check */
    w->holder = holder.status;
    w->buyer = buyer.status;
    assert_int_equal(it_audit(sku, &w->audit), 0);
    printf("  fencing %d: holder %ld, buyer %ld; sold %lld, stock %lld, lost_updates %lld\n",
           fencing, w->holder, w->buyer, w->audit.sold, w->audit.stock, w->audit.lost_updates);
}

static void test_pause_after_check_loses_an_update(void **state)
{
    struct window_run w;
    run_window("T-window", 0, &w);
    /* Both answered "sold", both in the ledger, the stock moved once. */
    assert_int_equal(w.holder, 200);
    assert_int_equal(w.buyer, 200);
    assert_int_equal(w.audit.sold, 2);
    assert_int_equal(w.audit.stock, 9);
    assert_int_equal(w.audit.lost_updates, 1);
    assert_false(w.audit.consistent);
}

static void test_pause_after_check_fenced_is_exact(void **state)
{
    struct window_run w;
    run_window("T-windowf", 1, &w);
    assert_int_equal(w.holder, 200);
    assert_true(w.buyer == 200 || w.buyer == 409);
    assert_int_equal(w.audit.sold, w.buyer == 200 ? 2 : 1);
    assert_int_equal(w.audit.stock, 10 - w.audit.sold);
    assert_int_equal(w.audit.lost_updates, 0);
    assert_true(w.audit.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pause_after_check_loses_an_update),
        cmocka_unit_test(test_pause_after_check_fenced_is_exact),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
