/* Redis and MySQL never apart for long. Each test reproduces one
 * way the Redis-backed guards drifted from MySQL and checks the audit sees
 * (drift) or prevents it:
 *   - the audit's `drift` (Redis stock - (MySQL stock - pending units)) for
 *     every Redis guard that sold the SKU; a nonzero drift is inconsistent;
 *   - redis-stream: an order_id repeated after the order memory expired
 *     takes no second unit for good (the flusher gives it back);
 *   - the audit during a redis-stream drain is one snapshot
 *     (sold + pending_units == units answered, drift 0, every time);
 *   - redis-lock fencing: a fence counter that went backwards (a failover
 *     to a replica that had not seen the last INCR) does not refuse
 *     uncontended sales. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DRAIN_MS 40000
#define G "\"guard\":\"redis-stream\""

static int group_setup(void **state) { return it_setup(); }

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *deduct_url(int i)
{
    static char u[2][256];
    if (!u[i][0])
        snprintf(u[i], sizeof(u[i]), "%s/inventory/deduct", it.inventory[i]);
    return u[i];
}

static void drain(const char *sku)
{
    for (long waited = 0; waited < DRAIN_MS; waited += 100) {
        struct it_resp r;
        it_audit_json(1, sku, &r);
        long long p = it_audit_field(&r, "pending");
        it_resp_free(&r);
        if (p == 0)
            return;
        nap_ms(100);
    }
    fail_msg("%s did not drain in %d ms", sku, DRAIN_MS);
}

static long sell(int inst, const char *sku, const char *order, const char *guard_json)
{
    char body[320];
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"order_id\":\"%s\",%s}", sku, order,
             guard_json);
    return it_status("POST", deduct_url(inst), body);
}

/* drift: 0 once settled; a unit Redis lost (or gained) behind MySQL's back
 * is reported and makes the audit inconsistent. Per Redis-stock guard. */
static void drift_case(const char *sku, const char *guard_json, const char *redis_key)
{
    assert_int_equal(it_seed(sku, 10), 200);
    char o[64];
    for (int i = 0; i < 3; i++) {
        snprintf(o, sizeof(o), "%s-%d", sku, i);
        assert_int_equal(sell(i % 2, sku, o, guard_json), 200);
    }
    drain(sku);
    struct it_resp r;
    it_audit_json(1, sku, &r);
    print_message("%s settled: %s\n", sku, r.body);
    assert_int_equal(it_audit_field(&r, "drift"), 0);
    assert_true(json_is_true(json_object_get(r.json, "consistent")));
    it_resp_free(&r);
    assert_true(it_redis_num("DECRBY %s %s", redis_key, "2") >= 0);
    it_audit_json(1, sku, &r);
    print_message("%s with 2 units gone from Redis: %s\n", sku, r.body);
    assert_int_equal(it_audit_field(&r, "drift"), -2);
    assert_true(json_is_false(json_object_get(r.json, "consistent")));
    it_resp_free(&r);
}

static void test_drift_redis_stream(void **state)
{
    drift_case("Tb-drift-s", G, "sstock:{Tb-drift-s}");
}

static void test_drift_redis_decr(void **state)
{
    drift_case("Tb-drift-d", "\"guard\":\"redis-decr\"", "stock:{Tb-drift-d}");
}

/* Another guard's sales do not count as drift of a Redis guard that never
 * sold the SKU (every seed writes every guard's side state). */
static void test_drift_only_for_guards_that_sold(void **state)
{
    assert_int_equal(it_seed("Tb-drift-c", 10), 200);
    assert_int_equal(sell(0, "Tb-drift-c", "tb-drift-c-1", "\"guard\":\"conditional-update\""),
                     200);
    struct it_resp r;
    it_audit_json(1, "Tb-drift-c", &r);
    assert_int_equal(it_audit_field(&r, "drift"), 0);
    assert_true(json_is_true(json_object_get(r.json, "consistent")));
    it_resp_free(&r);
}

/* Item 5: an order_id repeated after --stream-order-ttl is a new sale to
 * Redis; the flusher finds it in the ledger already (replayed) and must
 * give the unit back, or Redis holds one unit less than MySQL for good. */
static void test_stream_repeat_after_order_ttl(void **state)
{
    long base = it_port_base();
    char url[160], h[200];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld", base + 43);
    static const char *const args[] = {"--threads", "4", "--stream-order-ttl", "1s", NULL};
    int pid = it_start_inventory("inventory-stream-ttl", base + 43, NULL, args);
    assert_true(pid > 0);
    snprintf(h, sizeof(h), "%s/healthz", url);
    if (it_wait_status(h, 200, 30000) != 0) {
        it_kill(pid, SIGKILL, 2000);
        fail_msg("the short-TTL instance did not come up");
    }
    assert_int_equal(it_seed("Tb-rep", 10), 200);
    char durl[200];
    snprintf(durl, sizeof(durl), "%s/inventory/deduct", url);
    const char *body = "{\"sku\":\"Tb-rep\",\"order_id\":\"tb-rep-1\"," G "}";
    long s1 = it_status("POST", durl, body);
    drain("Tb-rep");
    nap_ms(1500);   /* the order memory (1 s) is gone */
    long s2 = it_status("POST", durl, body);
    drain("Tb-rep");
    it_stop_pid(pid);
    long long rs = it_redis_num("GET sstock:{Tb-rep}");
    struct it_audit a;
    assert_int_equal(it_audit("Tb-rep", &a), 0);
    print_message("first %ld, repeat %ld: MySQL stock %lld sold %lld, Redis %lld\n", s1, s2,
                  a.stock, a.sold, rs);
    assert_int_equal(s1, 200);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 9);
    assert_int_equal(rs, 9);
    assert_true(a.consistent);
}

static atomic_int bg_done;

static void *bg_hammer(void *p)
{
    it_hammer(p);
    atomic_store(&bg_done, 1);
    return NULL;
}

/* Item 8: with MariaDB stopped, 600 sales queue in the stream; while it
 * drains after MariaDB returns, every audit is one snapshot: sold +
 * pending_units = 3600 and drift 0. Audits during a load of 3000: drift 0. */
static void test_audit_one_snapshot_during_drain(void **state)
{
    const char *sku = "Tb-snap";
    assert_int_equal(it_seed(sku, 5000), 200);
    static const char *urls[2];
    urls[0] = deduct_url(0);
    urls[1] = deduct_url(1);
    struct it_load warm = {.total = 3000, .clients = 6, .urls = urls, .nurls = 2,
                           .method = "POST",
                           .body_fmt = "{\"sku\":\"Tb-snap\",\"order_id\":\"tb-snapw-%d\"," G "}"};
    pthread_t t;
    atomic_store(&bg_done, 0);
    assert_int_equal(pthread_create(&t, NULL, bg_hammer, &warm), 0);
    int bad_load = 0, audits_load = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 2000 && !atomic_load(&bg_done); i++) {
        struct it_resp r;
        it_audit_json(1, sku, &r);
        json_t *dv = json_object_get(r.json, "drift");
        audits_load++;
        if (!json_is_integer(dv) || json_integer_value(dv) != 0) {
            if (!bad_load)
                print_message("under load: %s\n", r.body);
            bad_load++;
        }
        it_resp_free(&r);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    double load_ms = (double)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    print_message("%d audits in %.0f ms of load (%.1f ms each)\n", audits_load, load_ms,
                  audits_load ? load_ms / audits_load : 0);
    assert_int_equal(warm.by_status[200], 3000);
    drain(sku);

    assert_int_equal(it_stack("stop", "mysql"), 0);
    struct it_load l = {.total = 600, .clients = 8, .urls = urls, .nurls = 2, .method = "POST",
                        .body_fmt = "{\"sku\":\"Tb-snap\",\"order_id\":\"tb-snap-%d\"," G "}"};
    it_hammer(&l);
    assert_int_equal(it_stack("start", "mysql"), 0);
    assert_int_equal(l.by_status[200], 600);
    long long answered = 3600;
    int audits = 0, bad = 0, bad_sum = 0;
    for (long waited = 0; waited < DRAIN_MS; waited += 5) {
        char url[256];
        snprintf(url, sizeof(url), "%s/inventory/%s/audit", it.inventory[waited % 2], sku);
        struct it_resp r;
        if (it_http("GET", url, NULL, &r) != 200 || !r.json) {
            it_resp_free(&r);   /* MariaDB still coming back */
            nap_ms(5);
            continue;
        }
        long long sold = it_audit_field(&r, "sold"), pu = it_audit_field(&r, "pending_units");
        json_t *dv = json_object_get(r.json, "drift");
        audits++;
        bad_sum += sold + pu != answered;
        if (sold + pu != answered || !json_is_integer(dv) || json_integer_value(dv) != 0) {
            if (!bad)
                print_message("not one snapshot: %s\n", r.body);
            bad++;
        }
        it_resp_free(&r);
        if (pu == 0 && sold == answered)
            break;
        nap_ms(5);
    }
    print_message("under load: %d of %d audits with drift; drain: %d of %d audits off "
                  "(%d with sold + pending_units != %lld)\n",
                  bad_load, audits_load, bad, audits, bad_sum, answered);
    assert_true(audits > 0);
    assert_int_equal(bad_load, 0);
    assert_int_equal(bad, 0);
}

/* Item 9: the fence counter goes back (a failover to a replica that had
 * not seen the last INCRs): the row's fence is ahead of every token Redis
 * gives now. Five uncontended fenced sales must still be sold. */
static void test_fence_counter_behind_row(void **state)
{
    const char *sku = "Tb-fence";
    assert_int_equal(it_seed(sku, 10), 200);
    const char *fj = "\"guard\":\"redis-lock\",\"fencing\":true";
    char o[64];
    for (int i = 0; i < 3; i++) {
        snprintf(o, sizeof(o), "tb-fence-a%d", i);
        assert_int_equal(sell(0, sku, o, fj), 200);
    }
    /* what the promoted replica has: the counter from before those INCRs */
    assert_true(it_redis_num("DEL lock:inventory:{%s}:fence", sku) >= 0);
    int sold = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(o, sizeof(o), "tb-fence-b%d", i);
        long s = sell(i % 2, sku, o, fj);
        print_message("fenced sale %d after the counter went back: %ld\n", i, s);
        sold += s == 200;
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(sold, 5);
    assert_int_equal(a.sold, 8);
    assert_true(a.consistent);
}

/* Item 6: an instance killed (-9) between redis-decr's Redis decision and
 * its MySQL write. The unit taken in Redis must come back once that sale
 * can no longer land (its write deadline has passed): Redis = MySQL. */
static void test_decr_killed_between_redis_and_mysql(void **state)
{
    long st;
    long long rs = it_decr_kill_mid_sale("inventory-decr-kill", it_port_base() + 44, "Tb-kill",
                                         "tb-kill-1", 3000, 100, &st);
    print_message("Redis decided (stock %lld), instance killed; the sale answered %ld\n", rs,
                  st);
    assert_int_equal(rs, 9);
    nap_ms(6000);   /* hold 3 s + the write margin + the grace: it cannot land now */
    assert_int_equal(sell(0, "Tb-kill", "tb-kill-2", "\"guard\":\"redis-decr\""), 200);
    struct it_audit a;
    assert_int_equal(it_audit("Tb-kill", &a), 0);
    rs = it_redis_num("GET stock:{Tb-kill}");
    print_message("after one more sale: MySQL stock %lld sold %lld, Redis %lld\n", a.stock,
                  a.sold, rs);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 9);
    assert_int_equal(rs, 9);
    assert_true(a.consistent);
}

/* Item 10: a reseed whose COMMIT reply is lost (applied, the answer
 * dropped: --fault-commit-lost 1 loses every one). The instance must learn
 * the outcome from MySQL: the seed applied, so 200, with Redis's states
 * equal to MySQL's (not a 503 that leaves the new Redis state behind an
 * answer saying nothing changed). */
static void test_reseed_commit_lost(void **state)
{
    long base = it_port_base();
    char url[160], h[200];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld", base + 46);
    static const char *const args[] = {"--threads", "2", "--fault-commit-lost", "1", NULL};
    int pid = it_start_inventory("inventory-seed-lossy", base + 46, NULL, args);
    assert_true(pid > 0);
    snprintf(h, sizeof(h), "%s/healthz", url);
    if (it_wait_status(h, 200, 30000) != 0) {
        it_kill(pid, SIGKILL, 2000);
        fail_msg("the lossy instance did not come up");
    }
    assert_int_equal(it_seed("Tb-seedlost", 10), 200);
    assert_int_equal(sell(0, "Tb-seedlost", "tb-seedlost-1", "\"guard\":\"redis-decr\""), 200);
    char surl[256];
    snprintf(surl, sizeof(surl), "%s/inventory/Tb-seedlost", url);
    struct it_resp r;
    long st = it_http("PUT", surl, "{\"stock\":7}", &r);
    print_message("reseed with its COMMIT reply lost: %ld %s\n", st, r.body);
    it_resp_free(&r);
    it_stop_pid(pid);
    long long my = it_sql_value("SELECT stock FROM db_shopping.inventory WHERE sku='Tb-seedlost'");
    long long rd = it_redis_num("GET stock:{Tb-seedlost}");
    long long rs = it_redis_num("GET sstock:{Tb-seedlost}");
    print_message("MySQL %lld, redis-decr %lld, redis-stream %lld\n", my, rd, rs);
    assert_int_equal(st, 200);
    assert_int_equal(my, 7);
    assert_int_equal(rd, 7);
    assert_int_equal(rs, 7);
    assert_int_equal(sell(1, "Tb-seedlost", "tb-seedlost-2", "\"guard\":\"redis-decr\""), 200);
    struct it_audit a;
    assert_int_equal(it_audit("Tb-seedlost", &a), 0);
    assert_int_equal(a.stock, 6);
    assert_int_equal(it_redis_num("GET stock:{Tb-seedlost}"), 6);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drift_redis_stream),
        cmocka_unit_test(test_drift_redis_decr),
        cmocka_unit_test(test_drift_only_for_guards_that_sold),
        cmocka_unit_test(test_stream_repeat_after_order_ttl),
        cmocka_unit_test(test_fence_counter_behind_row),
        cmocka_unit_test(test_decr_killed_between_redis_and_mysql),
        cmocka_unit_test(test_reseed_commit_lost),
        cmocka_unit_test(test_audit_one_snapshot_during_drain),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
