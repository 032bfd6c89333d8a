/* Correct at the edges (inventory side): one SKU identity, the
 * floor under a Redis decision, a COMMIT whose reply is lost, an order id
 * reused for another sale, one deadline per request, and a reseed that
 * touches only its own SKU and never races a sale. Every test ends on an
 * exact audit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int group_setup(void **state) { return it_setup(); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* POST /inventory/deduct on instance i; returns the status, fills r. */
static long deduct(int i, const char *body, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[i]);
    return it_http("POST", url, body, r);
}

static long deduct_status(int i, const char *body)
{
    struct it_resp r;
    long st = deduct(i, body, &r);
    it_resp_free(&r);
    return st;
}

static void assert_exact(const char *sku, long long sold)
{
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-12s sold %lld stock %lld oversold %lld lost %lld consistent %d\n", sku,
                  a.sold, a.stock, a.oversold, a.lost_updates, a.consistent);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    if (sold >= 0)
        assert_int_equal(a.sold, sold);
}

static void redis_set(const char *key, const char *value)
{
    redisContext *c = redisConnect("127.0.0.1", (int)it.redis_port);
    assert_true(c && !c->err);
    redisReply *r = redisCommand(c, "SET %s %s", key, value);
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
}

static long long redis_get_int(const char *key)
{
    redisContext *c = redisConnect("127.0.0.1", (int)it.redis_port);
    assert_true(c && !c->err);
    redisReply *r = redisCommand(c, "GET %s", key);
    long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* 1. MySQL used to compare SKUs without regard to case while Redis keys
 * compare bytes: "ab-1" found the row of "Ab-1" in MySQL and got its own
 * Redis counter, so the stock sold twice. */
static void test_sku_is_exact_bytes(void **state)
{
    assert_int_equal(it_seed("Case-1", 10), 200);
    int ok = 0, unknown = 0;
    for (int i = 0; i < 30; i++) {
        char body[160];
        snprintf(body, sizeof(body),
                 "{\"sku\":\"%s\",\"guard\":\"redis-decr\",\"order_id\":\"case-%d\"}",
                 i % 2 ? "case-1" : "Case-1", i);
        long st = deduct_status(i % 2, body);
        ok += st == 200;
        unknown += st == 404;
    }
    print_message("200: %d, 404: %d\n", ok, unknown);
    assert_int_equal(ok, 10);
    assert_int_equal(unknown, 15);
    assert_exact("Case-1", 10);
    /* Trailing spaces are not an identity either: they are refused. */
    assert_int_equal(deduct_status(0, "{\"sku\":\"Case-1 \",\"guard\":\"redis-decr\"}"), 400);
    /* Order ids are exact bytes too: O-1 and o-1 are two orders. */
    assert_int_equal(it_seed("Case-2", 10), 200);
    assert_int_equal(deduct_status(0, "{\"sku\":\"Case-2\",\"order_id\":\"O-1\"}"), 200);
    struct it_resp r;
    assert_int_equal(deduct(1, "{\"sku\":\"Case-2\",\"order_id\":\"o-1\"}", &r), 200);
    assert_null(json_object_get(r.json, "duplicate"));
    it_resp_free(&r);
    assert_exact("Case-2", 2);
}

/* The identifier alphabet is enforced at the edge with a clear 400. */
static void test_identifier_alphabet(void **state)
{
    const char *bad[] = {
        "{\"sku\":\"a b\"}", "{\"sku\":\"caf\\u00e9\"}", "{\"sku\":\"x;y\"}",
        "{\"sku\":\"A-1\",\"order_id\":\"o 1\"}", "{\"sku\":\"A-1\",\"order_id\":\"o*1\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct it_resp r;
        long st = deduct(0, bad[i], &r);
        if (st != 400)
            fail_msg("%s answered %ld: %s", bad[i], st, r.body);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")), "bad_request");
        it_resp_free(&r);
    }
    /* The full alphabet is accepted. */
    assert_int_equal(it_seed("Az09._:-", 1), 200);
    assert_int_equal(deduct_status(0, "{\"sku\":\"Az09._:-\",\"order_id\":\"Az09._:-\"}"), 200);
    assert_exact("Az09._:-", 1);
}

/* 7. An order id names one sale: a repeat echoes it, another SKU or qty
 * under the same id is a conflict, never a 200 for goods never touched. */
static void test_order_id_reused_for_another_sale(void **state)
{
    assert_int_equal(it_seed("Reuse-A", 10), 200);
    assert_int_equal(it_seed("Reuse-B", 10), 200);
    assert_int_equal(deduct_status(0, "{\"sku\":\"Reuse-A\",\"order_id\":\"reuse-1\"}"), 200);
    struct it_resp r;
    assert_int_equal(deduct(1, "{\"sku\":\"Reuse-B\",\"order_id\":\"reuse-1\"}", &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                        "order_id_conflict");
    it_resp_free(&r);
    assert_int_equal(deduct(0, "{\"sku\":\"Reuse-A\",\"qty\":2,\"order_id\":\"reuse-1\"}", &r),
                     409);
    it_resp_free(&r);
    assert_int_equal(deduct(1, "{\"sku\":\"Reuse-A\",\"order_id\":\"reuse-1\"}", &r), 200);
    assert_true(json_is_true(json_object_get(r.json, "duplicate")));
    it_resp_free(&r);
    assert_exact("Reuse-A", 1);
    assert_exact("Reuse-B", 0);
}

/* 2. The MySQL write after a Redis decision has a floor: a Redis that
 * believes in more units than MySQL holds costs 503s, never an oversell. */
static void test_relative_write_has_a_floor(void **state)
{
    assert_int_equal(it_seed("Floor-1", 10), 200);
    redis_set("stock:{Floor-1}", "20");
    int ok = 0, unavailable = 0;
    for (int i = 0; i < 15; i++) {
        char body[128];
        snprintf(body, sizeof(body),
                 "{\"sku\":\"Floor-1\",\"guard\":\"redis-decr\",\"order_id\":\"floor-%d\"}", i);
        long st = deduct_status(i % 2, body);
        ok += st == 200;
        unavailable += st == 503;
    }
    print_message("200: %d, 503: %d\n", ok, unavailable);
    assert_int_equal(ok, 10);
    assert_int_equal(unavailable, 5);
    assert_exact("Floor-1", 10);
    /* The divergence is not left standing: Redis is reconciled with MySQL
     * (after the reload wait) and the SKU answers out_of_stock again. */
    long st = 503;
    for (int i = 0; i < 100 && st == 503; i++) {
        char body[128];
        snprintf(body, sizeof(body),
                 "{\"sku\":\"Floor-1\",\"guard\":\"redis-decr\",\"order_id\":\"floor-r%d\"}", i);
        st = deduct_status(i % 2, body);
        if (st == 503)
            usleep(200 * 1000);
    }
    assert_int_equal(st, 409);
    assert_int_equal(redis_get_int("stock:{Floor-1}"), 0);
    assert_exact("Floor-1", 10);
}

/* Restart inventory-1 with the environment variable set (NULL: unset). */
static void restart_inventory_1(const char *var, const char *value)
{
    assert_int_equal(it_stack("stop", "inventory-1"), 0);
    if (value)
        setenv(var, value, 1);
    else
        unsetenv(var);
    assert_int_equal(it_stack("start", "inventory-1"), 0);
}

static int back_to_normal(void **state)
{
    restart_inventory_1("LAB_FAULT_COMMIT_LOST", NULL);
    return 0;
}

/* 3. A COMMIT applied on the server whose reply never reached the
 * service: the ledger row decides. Treated as a failure, redis-decr gave
 * its units back and sold them again. */
static void sell_with_lost_commits(const char *guard)
{
    char sku[48];
    snprintf(sku, sizeof(sku), "Lost-%s", guard);
    assert_int_equal(it_seed(sku, 10), 200);
    restart_inventory_1("LAB_FAULT_COMMIT_LOST", "1");
    int ok = 0;
    for (int i = 0; i < 10; i++) {
        char body[160];
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s-a%d\"}",
                 sku, guard, sku, i);
        ok += deduct_status(0, body) == 200;
    }
    restart_inventory_1("LAB_FAULT_COMMIT_LOST", NULL);
    int later = 0;
    for (int i = 0; i < 10; i++) {
        char body[160];
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s-b%d\"}",
                 sku, guard, sku, i);
        later += deduct_status(i % 2, body) == 200;
    }
    print_message("%s: answered 200 with lost commits: %d, sold later: %d\n", guard, ok, later);
    assert_int_equal(ok, 10);
    assert_int_equal(later, 0);
    assert_exact(sku, 10);
}

static void test_lost_commit_redis_decr(void **state) { sell_with_lost_commits("redis-decr"); }
static void test_lost_commit_conditional(void **state)
{
    sell_with_lost_commits("conditional-update");
}

struct bg_req { int inst; const char *body; long status; double took; };

static void *bg_deduct(void *p)
{
    struct bg_req *b = p;
    double t0 = now_s();
    b->status = deduct_status(b->inst, b->body);
    b->took = now_s() - t0;
    return NULL;
}

/* 8. One deadline per request: for-update used to wait InnoDB's own 5 s
 * per attempt, retried 50 times, whatever lock_wait_ms said. */
static void test_for_update_honours_lock_wait(void **state)
{
    assert_int_equal(it_seed("Wait-1", 10), 200);
    struct bg_req holder = {0, "{\"sku\":\"Wait-1\",\"guard\":\"for-update\",\"hold_ms\":4000,"
                               "\"order_id\":\"wait-holder\"}", 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, bg_deduct, &holder);
    usleep(300 * 1000);
    double t0 = now_s();
    struct it_resp r;
    long st = deduct(1, "{\"sku\":\"Wait-1\",\"guard\":\"for-update\",\"lock_wait_ms\":300,"
                        "\"order_id\":\"wait-buyer\"}", &r);
    double took = now_s() - t0;
    print_message("buyer: %ld after %.2f s: %s\n", st, took, r.body);
    it_resp_free(&r);
    pthread_join(t, NULL);
    assert_int_equal(holder.status, 200);
    assert_int_equal(st, 503);
    assert_true(took < 2.5);   /* 300 ms + the margin; InnoDB waits in whole seconds */
    assert_exact("Wait-1", 1);
}

/* The caller's budget (X-Deadline-Ms) wins over a longer hold. */
static void test_caller_deadline(void **state)
{
    assert_int_equal(it_seed("Wait-2", 10), 200);
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[0]);
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "curl -s -o /dev/null -w '%%{http_code}' -m 10 -H 'Content-Type: application/json' "
             "-H 'X-Deadline-Ms: 300' -d '{\"sku\":\"Wait-2\",\"hold_ms\":1000,"
             "\"order_id\":\"w2-1\"}' %s",
             url);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[16] = "";
    assert_non_null(fgets(out, sizeof(out), f));
    pclose(f);
    assert_string_equal(out, "503");
    snprintf(cmd, sizeof(cmd),
             "curl -s -o /dev/null -w '%%{http_code}' -m 10 -H 'Content-Type: application/json' "
             "-H 'X-Deadline-Ms: soon' -d '{\"sku\":\"Wait-2\"}' %s", url);
    f = popen(cmd, "r");
    assert_non_null(f);
    assert_non_null(fgets(out, sizeof(out), f));
    pclose(f);
    assert_string_equal(out, "400");
    assert_exact("Wait-2", 0);
}

/* Optimistic retries each spent hold_ms again: 50 retries x hold. */
static void test_optimistic_retries_stop_at_the_deadline(void **state)
{
    assert_int_equal(it_seed("Wait-3", 100), 200);
    enum { N = 8 };
    struct bg_req b[N];
    char bodies[N][160];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        snprintf(bodies[i], sizeof(bodies[i]),
                 "{\"sku\":\"Wait-3\",\"guard\":\"optimistic\",\"hold_ms\":400,"
                 "\"lock_wait_ms\":0,\"order_id\":\"w3-%d\"}", i);
        b[i] = (struct bg_req){i % 2, bodies[i], 0, 0};
        pthread_create(&t[i], NULL, bg_deduct, &b[i]);
    }
    double worst = 0;
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ok += b[i].status == 200;
        if (b[i].took > worst)
            worst = b[i].took;
    }
    print_message("sold %d of %d, slowest answer %.2f s\n", ok, N, worst);
    assert_true(worst < 3.0);   /* 400 ms + 1 s margin, not 50 x 400 ms */
    assert_exact("Wait-3", ok);
}

/* 9. The reseed's lock-row clean-up was a LIKE prefix: reseeding "P"
 * deleted the held lock row of "P2". Since reseeds became counted, a reseed deletes no
 * lock row at all (a holder elsewhere keeps its lock; its write is refused
 * by the row's reseed count instead): both rows stay. */
static void test_reseed_touches_only_its_sku(void **state)
{
    assert_int_equal(it_seed("P", 5), 200);
    assert_int_equal(it_seed("P2", 5), 200);
    it_sql("DELETE FROM db_shopping.lock_table WHERE lock_name IN ('inventory:P','inventory:P2')");
    assert_int_equal(it_sql("INSERT INTO db_shopping.lock_table (lock_name, owner, expires_at) VALUES "
                            "('inventory:P','t',NOW(3) + INTERVAL 1 HOUR),"
                            "('inventory:P2','t',NOW(3) + INTERVAL 1 HOUR)"),
                     0);
    assert_int_equal(it_seed("P", 5), 200);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.lock_table "
                                  "WHERE lock_name='inventory:P2'"), 1);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.lock_table "
                                  "WHERE lock_name='inventory:P'"), 1);
    it_sql("DELETE FROM db_shopping.lock_table WHERE lock_name IN ('inventory:P','inventory:P2')");
}

/* A reseed while a deduction of the SKU is in flight is refused. */
static void test_reseed_refused_while_selling(void **state)
{
    assert_int_equal(it_seed("Busy-1", 10), 200);
    struct bg_req holder = {0, "{\"sku\":\"Busy-1\",\"guard\":\"redis-lock\",\"hold_ms\":1500,"
                               "\"order_id\":\"busy-1\"}", 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, bg_deduct, &holder);
    usleep(400 * 1000);
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/Busy-1", it.inventory[0]);
    struct it_resp r;
    long st = it_http("PUT", url, "{\"stock\":50}", &r);
    print_message("reseed during a sale: %ld %s\n", st, r.body);
    it_resp_free(&r);
    pthread_join(t, NULL);
    assert_int_equal(holder.status, 200);
    assert_int_equal(st, 409);
    assert_exact("Busy-1", 1);
    assert_int_equal(it_seed("Busy-1", 50), 200);
    assert_exact("Busy-1", 0);
}

/* A reseed that cannot reach a guard's backend changes nothing. */
static void test_reseed_is_all_or_nothing(void **state)
{
    assert_int_equal(it_seed("Atomic-1", 10), 200);
    assert_int_equal(deduct_status(0, "{\"sku\":\"Atomic-1\",\"order_id\":\"atomic-1\"}"), 200);
    assert_int_equal(it_stack("stop", "redis"), 0);
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/Atomic-1", it.inventory[0]);
    long st = it_status("PUT", url, "{\"stock\":50}");
    assert_int_equal(it_stack("start", "redis"), 0);
    assert_int_equal(st, 503);
    struct it_audit a;
    assert_int_equal(it_audit("Atomic-1", &a), 0);
    assert_int_equal(a.initial, 10);
    assert_int_equal(a.stock, 9);
    assert_exact("Atomic-1", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sku_is_exact_bytes),
        cmocka_unit_test(test_identifier_alphabet),
        cmocka_unit_test(test_order_id_reused_for_another_sale),
        cmocka_unit_test(test_relative_write_has_a_floor),
        cmocka_unit_test_teardown(test_lost_commit_redis_decr, back_to_normal),
        cmocka_unit_test_teardown(test_lost_commit_conditional, back_to_normal),
        cmocka_unit_test(test_for_update_honours_lock_wait),
        cmocka_unit_test(test_caller_deadline),
        cmocka_unit_test(test_optimistic_retries_stop_at_the_deadline),
        cmocka_unit_test(test_reseed_touches_only_its_sku),
        cmocka_unit_test(test_reseed_refused_while_selling),
        cmocka_unit_test(test_reseed_is_all_or_nothing),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
