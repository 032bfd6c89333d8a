/* The lock guards at their edges, on two instances, each ending with an
 * exact audit:
 *   - a release landing while a holder sits between its read and its write
 *     must not vanish (it runs under the selling guard's lock);
 *   - a Redlock lease shorter than the work is renewed by the watchdog, and
 *     without the watchdog a holder whose validity has passed refuses to
 *     write (503) instead of overselling. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int group_setup(void **state) { return it_setup(); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct slow_sale {
    char url[256];
    char body[512];
    long status;
    char answer[512];
};

static void *slow_sale_main(void *p)
{
    struct slow_sale *s = p;
    struct it_resp r;
    s->status = it_http("POST", s->url, s->body, &r);
    snprintf(s->answer, sizeof(s->answer), "%.400s", r.body);
    it_resp_free(&r);
    return NULL;
}

/* Sell one unit of `sku` (stock 10) under `guard` on instance 0, then start
 * a second sale on instance 0 that holds the guard for 1.5 s between its
 * read and its write, and release the first sale on instance 1 while it
 * holds (on instance 1 unless told). Today the release adds its unit outside the guard and the
 * holder's absolute write wipes it out (lost_updates -1). */
static void release_during_hold_on(const char *guard, int release_instance)
{
    char sku[64], url[256], body[512];
    snprintf(sku, sizeof(sku), "LE-rel-%s", guard);
    assert_int_equal(it_seed(sku, 10), 200);

    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[0]);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s-first\"}",
             sku, guard, sku);
    assert_int_equal(it_status("POST", url, body), 200);

    struct slow_sale s = {0};
    snprintf(s.url, sizeof(s.url), "%s", url);
    snprintf(s.body, sizeof(s.body),
             "{\"sku\":\"%s\",\"guard\":\"%s\",\"hold_ms\":1500,\"lock_wait_ms\":5000,"
             "\"order_id\":\"%s-slow\"}", sku, guard, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_sale_main, &s), 0);
    sleep_ms(400);   /* the holder has read 9 and sleeps */

    char rel_url[256], rel_body[256];
    snprintf(rel_url, sizeof(rel_url), "%s/inventory/release", it.inventory[release_instance]);
    snprintf(rel_body, sizeof(rel_body), "{\"order_id\":\"%s-first\"}", sku);
    struct it_resp r;
    long rel = it_http("POST", rel_url, rel_body, &r);
    print_message("%-10s release during hold: %ld %s\n", guard, rel, r.body);
    it_resp_free(&r);
    pthread_join(t, NULL);
    print_message("%-10s holder: %ld %s\n", guard, s.status, s.answer);
    assert_int_equal(s.status, 200);
    assert_int_equal(rel, 200);

    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-10s audit: stock %lld sold %lld oversold %lld lost %lld consistent %d\n",
                  guard, a.stock, a.sold, a.oversold, a.lost_updates, a.consistent);
    assert_int_equal(a.lost_updates, 0);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 9);
    assert_true(a.consistent);
}

static void release_during_hold(const char *guard) { release_during_hold_on(guard, 1); }

static void test_release_during_hold_redis_lock(void **state) { release_during_hold("redis-lock"); }
static void test_release_during_hold_lock_table(void **state) { release_during_hold("lock-table"); }
static void test_release_during_hold_redlock(void **state) { release_during_hold("redlock"); }
/* mutex protects within one process: a release on the holder's own
 * instance waits for its mutex (across instances it races, as `mutex`
 * is there to show). */
static void test_release_during_hold_mutex_same_instance(void **state)
{
    release_during_hold_on("mutex", 0);
}

/* A release that cannot get the lock within the instance's lock wait
 * changes nothing and says so (503 lock_timeout); repeated once the holder
 * is gone, it succeeds. */
static void test_release_refused_while_lock_held_too_long(void **state)
{
    const char *sku = "LE-rel-busy";
    char url[256], body[512];
    assert_int_equal(it_seed(sku, 10), 200);
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[0]);
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"redis-lock\",\"order_id\":\"%s-first\"}", sku, sku);
    assert_int_equal(it_status("POST", url, body), 200);

    /* The stack's instances wait 3000 ms for a lock by default; this holder
     * keeps it for 4.5 s. */
    struct slow_sale s = {0};
    snprintf(s.url, sizeof(s.url), "%s", url);
    snprintf(s.body, sizeof(s.body),
             "{\"sku\":\"%s\",\"guard\":\"redis-lock\",\"hold_ms\":4500,\"order_id\":\"%s-slow\"}",
             sku, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_sale_main, &s), 0);
    sleep_ms(300);
    char rel_url[256], rel_body[256];
    snprintf(rel_url, sizeof(rel_url), "%s/inventory/release", it.inventory[1]);
    snprintf(rel_body, sizeof(rel_body), "{\"order_id\":\"%s-first\"}", sku);
    struct it_resp r;
    long rel = it_http("POST", rel_url, rel_body, &r);
    print_message("release against a 4.5 s holder: %ld %s\n", rel, r.body);
    assert_int_equal(rel, 503);
    assert_non_null(strstr(r.body, "lock_timeout"));
    it_resp_free(&r);
    pthread_join(t, NULL);
    assert_int_equal(s.status, 200);
    assert_int_equal(it_status("POST", rel_url, rel_body), 200);

    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 9);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
}

static struct it_audit hammer(const char *sku, const char *extra, long long stock, int total,
                              int clients, struct it_load *l)
{
    assert_int_equal(it_seed(sku, stock), 200);
    static char urls[2][256];
    static const char *u[2] = {urls[0], urls[1]};
    for (int i = 0; i < 2; i++)
        snprintf(urls[i], sizeof(urls[i]), "%s/inventory/deduct", it.inventory[i]);
    static char fmt[512];
    snprintf(fmt, sizeof(fmt), "{\"sku\":\"%s\",%s,\"order_id\":\"%s-%%d\"}", sku, extra, sku);
    *l = (struct it_load){.total = total, .clients = clients, .urls = u, .nurls = 2,
                          .method = "POST", .body_fmt = fmt};
    it_hammer(l);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-70s sold %lld oversold %lld lost %lld stock %lld | 200:%d 409:%d 503:%d\n",
                  extra, a.sold, a.oversold, a.lost_updates, a.stock, l->by_status[200],
                  l->by_status[409], l->by_status[503]);
    return a;
}

#define SHORT_LEASE "\"guard\":\"redlock\",\"lock_ttl_ms\":60,\"hold_ms\":200,\"lock_wait_ms\":20000"

/* Default options (watchdog on): the lease is renewed on a majority of
 * masters while the work runs, so 80 buyers get exactly the 20 units. */
static void test_redlock_short_lease_renewed(void **state)
{
    struct it_load l;
    struct it_audit a = hammer("LE-redlock-wd", SHORT_LEASE, 20, 80, 16, &l);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, 20);
    assert_int_equal(a.stock, 0);
    assert_int_equal(l.by_status[200], 20);
}

/* Watchdog off: every holder outlives its lease, so every one must refuse
 * to write (503 lease_expired) and nothing is sold — never an oversell. */
static void test_redlock_expired_lease_refuses_to_write(void **state)
{
    struct it_load l;
    struct it_audit a = hammer("LE-redlock-nowd", SHORT_LEASE ",\"watchdog\":false", 20, 80, 16,
                               &l);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 20);
    assert_int_equal(l.by_status[503], 80);

    /* One holder alone, no contention: still refused, and says why. */
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[1]);
    struct it_resp r;
    long s = it_http("POST", url,
                     "{\"sku\":\"LE-redlock-nowd\"," SHORT_LEASE
                     ",\"watchdog\":false,\"order_id\":\"LE-alone\"}", &r);
    print_message("lone holder past its validity: %ld %s\n", s, r.body);
    assert_int_equal(s, 503);
    assert_non_null(strstr(r.body, "lease_expired"));
    it_resp_free(&r);
    assert_int_equal(it_audit("LE-redlock-nowd", &a), 0);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 20);
    assert_true(a.consistent);
}

static int restart_masters(void **state)
{
    it_stack("start", "redis-m1");
    it_stack("start", "redis-m2");
    return 0;
}

static void *stop_m1(void *p)
{
    *(int *)p = it_stack("stop", "redis-m1");
    return NULL;
}

/* Watchdog on, then a majority of masters goes away mid-hold: renewals stop
 * reaching a quorum, the validity runs out, and the holder refuses to write
 * (503 lease_expired) instead of writing unprotected. */
static void test_redlock_refuses_once_majority_lost_mid_hold(void **state)
{
    const char *sku = "LE-redlock-maj";
    assert_int_equal(it_seed(sku, 10), 200);
    struct slow_sale s = {0};
    snprintf(s.url, sizeof(s.url), "%s/inventory/deduct", it.inventory[0]);
    snprintf(s.body, sizeof(s.body),
             "{\"sku\":\"%s\",\"guard\":\"redlock\",\"lock_ttl_ms\":400,\"hold_ms\":6000,"
             "\"order_id\":\"%s-1\"}", sku, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_sale_main, &s), 0);
    sleep_ms(300);
    /* Both at once: a Redis can take seconds to stop. The holder's
     * renewals reach a quorum until the second one is gone. */
    int m1 = -1;
    pthread_t t1;
    assert_int_equal(pthread_create(&t1, NULL, stop_m1, &m1), 0);
    assert_int_equal(it_stack("stop", "redis-m2"), 0);
    pthread_join(t1, NULL);
    assert_int_equal(m1, 0);
    pthread_join(t, NULL);
    print_message("holder after losing 2 of 3 masters: %ld %s\n", s.status, s.answer);
    assert_int_equal(s.status, 503);
    assert_non_null(strstr(s.answer, "lease_expired"));
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 10);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_during_hold_redis_lock),
        cmocka_unit_test(test_release_during_hold_lock_table),
        cmocka_unit_test(test_release_during_hold_redlock),
        cmocka_unit_test(test_release_during_hold_mutex_same_instance),
        cmocka_unit_test(test_release_refused_while_lock_held_too_long),
        cmocka_unit_test(test_redlock_short_lease_renewed),
        cmocka_unit_test(test_redlock_expired_lease_refuses_to_write),
        cmocka_unit_test_teardown(test_redlock_refuses_once_majority_lost_mid_hold,
                                  restart_masters),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
