/* redis-stream under the interleavings its trust rests on. The stack's own
 * two inventory instances are stopped for the whole group, so the only
 * flushers are the instances each test starts itself, with the test-only
 * pause knobs (LAB_TEST_STREAM_*_PAUSE_MS) that hold one thread at a named
 * point while another acts: deterministic, not a race.
 *   - replicas_ack not met: a sale's undo that lands after a flusher marked
 *     the sale for its COMMIT must not answer "undone" (the sale stands);
 *   - replicas_ack: a repeat of an order whose first sale still waits for
 *     its replicas is not answered as a sold duplicate;
 *   - a reload of a lost stock key that read MySQL before a flush commits
 *     must not count the flushed units twice;
 *   - a repeat of a released order after the order memory expired takes
 *     nothing (MySQL and Redis agree);
 *   - a repeat of an order sold under another guard is its duplicate. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define G "\"guard\":\"redis-stream\""
#define DRAIN_MS 30000

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int group_setup(void **state)
{
    if (it_setup() != 0)
        return -1;
    /* Only the test's own instances flush. */
    if (it_stack("stop", "inventory-1") != 0 || it_stack("stop", "inventory-2") != 0)
        return -1;
    return 0;
}

/* Instances a test started, and MariaDB stopped by one: a test that fails
 * half-way leaves neither behind for the tests after this group. */
#define MAX_STARTED 8
static int started[MAX_STARTED];
static int mysql_stopped;

static int group_teardown(void **state)
{
    for (int i = 0; i < MAX_STARTED; i++)
        if (started[i] > 0)
            it_stop_pid(started[i]);
    if (mysql_stopped)
        it_stack("start", "mysql");
    int a = it_stack("start", "inventory-1"), b = it_stack("start", "inventory-2");
    return a == 0 && b == 0 ? 0 : -1;
}

/* it_stop_pid of an instance start_inst started. */
static void stop_inst(int pid)
{
    for (int i = 0; i < MAX_STARTED; i++)
        if (started[i] == pid)
            started[i] = 0;
    it_stop_pid(pid);
}

/* One instance of ours on port base+off with extra environment and flags;
 * its base URL into url. Fails the test when it does not come up. */
static int start_inst(const char *name, int off, const char *const *env,
                      const char *const *extra, char *url, size_t urllen)
{
    const char *args[16] = {"--threads", "4"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    long port = it_port_base() + off;
    snprintf(url, urllen, "http://127.0.0.1:%ld", port);
    int pid = it_start_inventory(name, port, env, args);
    if (pid <= 0)
        fail_msg("%s did not start", name);
    char h[256];
    snprintf(h, sizeof(h), "%s/healthz", url);
    if (it_wait_status(h, 200, 30000) != 0) {
        it_kill(pid, SIGKILL, 2000);
        fail_msg("%s did not come up", name);
    }
    for (int i = 0; i < MAX_STARTED; i++)
        if (started[i] <= 0) {
            started[i] = pid;
            break;
        }
    return pid;
}

static void seed_at(const char *base, const char *sku, long long stock)
{
    char url[256], body[64];
    snprintf(url, sizeof(url), "%s/inventory/%s", base, sku);
    snprintf(body, sizeof(body), "{\"stock\":%lld}", stock);
    assert_int_equal(it_status("PUT", url, body), 200);
}

/* POST deduct to base with the body's guard, order and extra fields; the
 * answer's body into answer. Returns the status. */
static long sell(const char *base, const char *sku, const char *guard, const char *order,
                 const char *extra, char *answer, size_t len)
{
    char url[256], body[512];
    snprintf(url, sizeof(url), "%s/inventory/deduct", base);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s\"%s}",
             sku, guard, order, extra);
    static const char *const hdr[] = {"X-Deadline-Ms: 30000", NULL};
    struct it_resp r;
    long st = it_http_hdr("POST", url, body, hdr, &r);
    if (answer)
        snprintf(answer, len, "%.400s", r.body);
    it_resp_free(&r);
    return st;
}

static long long mysql_stock(const char *sku)
{
    char q[200];
    snprintf(q, sizeof(q), "SELECT stock FROM db_shopping.inventory WHERE sku='%s'", sku);
    return it_sql_value(q);
}

static long long ledger_rows(const char *order)
{
    char q[200];
    snprintf(q, sizeof(q), "SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='%s'",
             order);
    return it_sql_value(q);
}

static long long redis_stock(const char *sku)
{
    return it_redis_num("GET sstock:{%s}", sku);
}

/* Wait until no sale of sku is queued for MySQL and the stream is empty
 * (an entry a flusher holds is gone only once it committed and
 * acknowledged it, also one whose sale counted itself off); fails past
 * DRAIN_MS. */
static void drain(const char *sku)
{
    long long p = -2, len = -2;
    for (long waited = 0; waited < DRAIN_MS; waited += 50) {
        p = it_redis_num("HGET lab:sales:pending %s", sku);
        len = it_redis_num("XLEN lab:sales");
        if ((p == -1 || p == 0) && len == 0)
            return;
        nap_ms(50);
    }
    fail_msg("%s did not drain in %d ms: %lld pending, %lld in the stream", sku, DRAIN_MS, p,
             len);
}

struct bg_sale {
    const char *base, *sku, *order, *extra;
    long status;
    char answer[420];
    pthread_t thread;
};

static void *bg_sale_main(void *p)
{
    struct bg_sale *b = p;
    b->status = sell(b->base, b->sku, "redis-stream", b->order, b->extra, b->answer,
                     sizeof(b->answer));
    return NULL;
}

static void bg_sale_start(struct bg_sale *b)
{
    b->status = -1;
    assert_int_equal(pthread_create(&b->thread, NULL, bg_sale_main, b), 0);
}

/* The counts assume no replica of the stack's Redis (replicas_ack 1 is
 * then never met). */
static void skip_if_replicated(void)
{
    long long slaves = it_redis_num("EVAL %s 0",
                                    "return tonumber(string.match(redis.call('INFO',"
                                    "'replication'),'connected_slaves:(%d+)'))");
    if (slaves != 0)
        skip();
}

/* replicas_ack not met, and the sale's undo lands after the flusher had
 * marked the sale for its COMMIT (the undo held 2 s, past the sale's wait
 * of 100 ms + 1 s margin; the flusher held 2.5 s between its mark and its
 * COMMIT). The undo must not say "undone": the flusher commits it. Then
 * selling out must not sell more than the 10 units. */
static void test_undo_after_flusher_mark(void **state)
{
    const char *sku = "Ts-undo";
    char url[160], answer[420];
    skip_if_replicated();
    static const char *const env[] = {"LAB_TEST_STREAM_UNDO_PAUSE_MS=2000",
                                      "LAB_TEST_STREAM_MARK_PAUSE_MS=2500", NULL};
    int pid = start_inst("inventory-ts-undo", 20, env, NULL, url, sizeof(url));
    seed_at(url, sku, 10);
    long st = sell(url, sku, "redis-stream", "ts-undo-1", ",\"replicas_ack\":1", answer,
                   sizeof(answer));
    int undone = strstr(answer, "undone, nothing sold") != NULL;
    drain(sku);
    long long rs = redis_stock(sku), ms = mysql_stock(sku), rows = ledger_rows("ts-undo-1");
    print_message("first sale %ld %s\nafter the flush: Redis %lld, MySQL %lld, ledger rows "
                  "%lld\n", st, answer, rs, ms, rows);
    int sold = 0;
    for (int i = 0; i < 12; i++) {
        char order[32];
        snprintf(order, sizeof(order), "ts-undo-b%d", i);
        sold += sell(url, sku, "redis-stream", order, "", NULL, 0) == 200;
    }
    drain(sku);
    char q[160];
    snprintf(q, sizeof(q), "SELECT COALESCE(SUM(qty),0) FROM db_shopping.ledger WHERE sku='%s' "
             "AND released=0", sku);
    long long ledger_units = it_sql_value(q);
    print_message("then %d more sold; ledger %lld units of 10, MySQL %lld, Redis %lld\n", sold,
                  ledger_units, mysql_stock(sku), redis_stock(sku));
    stop_inst(pid);
    assert_int_equal(st, 503);
    assert_int_equal(rs, ms);
    assert_int_equal(rows, undone ? 0 : 1);
    assert_true(ledger_units <= 10);
    assert_int_equal(sold + (undone ? 0 : 1), 10);
}

/* replicas_ack: a repeat on another instance while the first sale waits
 * (its undo held 600 ms, within its wait's margin) must not be answered
 * 200 when the first is then undone. */
static void test_repeat_while_first_waits_for_replicas(void **state)
{
    const char *sku = "Ts-wait";
    char url_a[160], url_b[160], answer[420];
    skip_if_replicated();
    static const char *const env[] = {"LAB_TEST_STREAM_UNDO_PAUSE_MS=600", NULL};
    int pa = start_inst("inventory-ts-wait-a", 21, env, NULL, url_a, sizeof(url_a));
    int pb = start_inst("inventory-ts-wait-b", 22, NULL, NULL, url_b, sizeof(url_b));
    seed_at(url_a, sku, 10);
    struct bg_sale first = {url_a, sku, "ts-wait-1", ",\"replicas_ack\":1", 0, "", 0};
    bg_sale_start(&first);
    nap_ms(300);
    long st = sell(url_b, sku, "redis-stream", "ts-wait-1", "", answer, sizeof(answer));
    pthread_join(first.thread, NULL);
    drain(sku);
    long long rows = ledger_rows("ts-wait-1"), rs = redis_stock(sku), ms = mysql_stock(sku);
    print_message("first (replicas_ack 1): %ld %s\nrepeat while it waited: %ld %s\n"
                  "ledger rows %lld, Redis %lld, MySQL %lld\n", first.status, first.answer, st,
                  answer, rows, rs, ms);
    stop_inst(pa);
    stop_inst(pb);
    assert_int_equal(first.status, 503);
    /* an order answered 200 is sold */
    if (st == 200)
        assert_int_equal(rows, 1);
    assert_int_equal(rs, ms);
}

/* A lost sstock key reloaded by instance R, which read MySQL (10) while a
 * sale of 3 units was still queued, and was held 4 s between that read and
 * its read of the queued units; meanwhile the flusher of instance F
 * committed the sale. The reload must count 7, so the next sale leaves 6. */
static void test_reload_races_flush(void **state)
{
    const char *sku = "Ts-reload";
    char url_f[160], url_r[160], answer[420];
    static const char *const fargs[] = {"--stream-hold", "6s", NULL};
    static const char *const renv[] = {"LAB_TEST_STREAM_RELOAD_PAUSE_MS=4000", NULL};
    static const char *const rargs[] = {"--stream-flusher", "0", NULL};
    int pf = start_inst("inventory-ts-flush", 23, NULL, fargs, url_f, sizeof(url_f));
    int pr = start_inst("inventory-ts-reload", 24, renv, rargs, url_r, sizeof(url_r));
    seed_at(url_f, sku, 10);
    assert_int_equal(sell(url_f, sku, "redis-stream", "ts-reload-a", ",\"qty\":3", NULL, 0),
                     200);
    assert_int_equal(it_redis_num("DEL sstock:{%s}", sku), 1);
    long st = 0;
    for (int i = 0; i < 200; i++) {
        st = sell(url_r, sku, "redis-stream", "ts-reload-b", "", answer, sizeof(answer));
        if (st != 503)
            break;
        nap_ms(100);
    }
    drain(sku);
    long long rs = redis_stock(sku), ms = mysql_stock(sku);
    print_message("sale after the reload: %ld %s\nafter the flush: Redis %lld, MySQL %lld\n",
                  st, answer, rs, ms);
    stop_inst(pf);
    stop_inst(pr);
    assert_int_equal(st, 200);
    assert_non_null(strstr(answer, "\"remaining\":6"));
    assert_int_equal(rs, 6);
    assert_int_equal(ms, 6);
}

/* An order sold, flushed and released; its order memory (1 s) expired; the
 * repeat must take nothing: MySQL and Redis both back at 10. */
static void test_repeat_of_released_order_after_ttl(void **state)
{
    const char *sku = "Ts-rel";
    char url[160], answer[420], rel[200];
    static const char *const args[] = {"--stream-order-ttl", "1s", NULL};
    int pid = start_inst("inventory-ts-rel", 25, NULL, args, url, sizeof(url));
    seed_at(url, sku, 10);
    assert_int_equal(sell(url, sku, "redis-stream", "ts-rel-1", "", NULL, 0), 200);
    drain(sku);
    snprintf(rel, sizeof(rel), "%s/inventory/release", url);
    assert_int_equal(it_status("POST", rel, "{\"order_id\":\"ts-rel-1\"}"), 200);
    nap_ms(1500);   /* the order memory is gone */
    long st = sell(url, sku, "redis-stream", "ts-rel-1", "", answer, sizeof(answer));
    drain(sku);
    long long rs = redis_stock(sku), ms = mysql_stock(sku);
    print_message("repeat of the released order: %ld %s\nRedis %lld, MySQL %lld\n", st, answer,
                  rs, ms);
    stop_inst(pid);
    assert_int_equal(ms, 10);
    assert_int_equal(rs, ms);
    assert_int_equal(st, 200);
    assert_non_null(strstr(answer, "\"duplicate\":true"));
}

/* The same with MariaDB stopped at the repeat: the request path cannot
 * look the order up, the sale is answered from Redis, and the flusher must
 * find the ledger row released (not this sale) and give the unit back. */
static void test_repeat_of_released_order_mysql_down(void **state)
{
    const char *sku = "Ts-reldown";
    char url[160], answer[420], rel[200];
    static const char *const args[] = {"--stream-order-ttl", "1s", NULL};
    int pid = start_inst("inventory-ts-reldown", 26, NULL, args, url, sizeof(url));
    seed_at(url, sku, 10);
    assert_int_equal(sell(url, sku, "redis-stream", "ts-reldown-1", "", NULL, 0), 200);
    drain(sku);
    snprintf(rel, sizeof(rel), "%s/inventory/release", url);
    assert_int_equal(it_status("POST", rel, "{\"order_id\":\"ts-reldown-1\"}"), 200);
    nap_ms(1500);
    mysql_stopped = 1;
    assert_int_equal(it_stack("stop", "mysql"), 0);
    long st = sell(url, sku, "redis-stream", "ts-reldown-1", "", answer, sizeof(answer));
    assert_int_equal(it_stack("start", "mysql"), 0);
    mysql_stopped = 0;
    drain(sku);
    long long rs = redis_stock(sku), ms = mysql_stock(sku);
    print_message("repeat with MariaDB stopped: %ld %s\nRedis %lld, MySQL %lld\n", st, answer,
                  rs, ms);
    stop_inst(pid);
    assert_int_equal(ms, 10);
    assert_int_equal(rs, ms);
}

/* An order sold under `none`, repeated under redis-stream: its duplicate,
 * nothing taken (`none` sold from MySQL alone: the Redis stock stays 10). */
static void test_repeat_of_other_guards_order(void **state)
{
    const char *sku = "Ts-other";
    char url[160], answer[420];
    int pid = start_inst("inventory-ts-other", 27, NULL, NULL, url, sizeof(url));
    seed_at(url, sku, 10);
    assert_int_equal(sell(url, sku, "none", "ts-other-1", "", NULL, 0), 200);
    long st = sell(url, sku, "redis-stream", "ts-other-1", "", answer, sizeof(answer));
    drain(sku);
    long long rs = redis_stock(sku), ms = mysql_stock(sku);
    print_message("repeat under redis-stream of a `none` sale: %ld %s\nRedis %lld, MySQL %lld\n",
                  st, answer, rs, ms);
    stop_inst(pid);
    assert_int_equal(st, 200);
    assert_non_null(strstr(answer, "\"duplicate\":true"));
    assert_non_null(strstr(answer, "\"guard\":\"none\""));
    assert_int_equal(ms, 9);
    assert_int_equal(rs, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_undo_after_flusher_mark),
        cmocka_unit_test(test_repeat_while_first_waits_for_replicas),
        cmocka_unit_test(test_reload_races_flush),
        cmocka_unit_test(test_repeat_of_released_order_after_ttl),
        cmocka_unit_test(test_repeat_of_released_order_mysql_down),
        cmocka_unit_test(test_repeat_of_other_guards_order),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
