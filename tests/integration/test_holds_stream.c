/* Holds of the redis-stream guard (services/API.md, "Holds"): reserve,
 * confirm, release and the sweep each one script in Redis; a confirmed
 * hold reaches MySQL as the sale it became, through the flusher. On the 2
 * instances of the stack. Every test ends on an audit, read once the
 * flusher drained the SKU. Redis restart and failover are not covered
 * here (holds live in Redis only: out of scope). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define G "redis-stream"
#define DRAIN_MS 10000

static int group_setup(void **state) { return it_setup(); }

static long post(int i, const char *path, const char *body, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", it.inventory[i], path);
    return it_http("POST", url, body, r);
}

static long post_status(int i, const char *path, const char *fmt, ...)
{
    char body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    char url[256];
    snprintf(url, sizeof(url), "%s%s", it.inventory[i], path);
    return it_status("POST", url, body);
}

static long reserve(int i, const char *order, const char *sku, int qty, long ttl_ms)
{
    return post_status(i, "/inventory/reserve",
                       "{\"order_id\":\"%s\",\"sku\":\"%s\",\"qty\":%d,\"ttl_ms\":%ld,"
                       "\"guard\":\"" G "\"}", order, sku, qty, ttl_ms);
}

static long confirm(int i, const char *order)
{
    return post_status(i, "/inventory/confirm", "{\"order_id\":\"%s\"}", order);
}

static long sell(int i, const char *order, const char *sku)
{
    return post_status(i, "/inventory/deduct", "{\"order_id\":\"%s\",\"sku\":\"%s\","
                       "\"guard\":\"" G "\"}", order, sku);
}

static int flag(const struct it_resp *r, const char *name)
{
    return json_is_true(json_object_get(r->json, name));
}

static long long redis_stock(const char *sku)
{
    return it_redis_num("GET sstock:{%s}", sku);
}

/* The audit once the SKU's sales are all in MySQL (fails past DRAIN_MS). */
static void drained_audit(const char *sku, struct it_resp *r)
{
    for (int t = 0; t < DRAIN_MS / 50; t++) {
        it_audit_json(0, sku, r);
        if (it_audit_field(r, "pending") == 0)
            return;
        it_resp_free(r);
        it_sleep_us(50000);
    }
    fail_msg("%s did not drain in %d ms", sku, DRAIN_MS);
}

/* initial = stock + sold (MySQL, drained), the Redis stock apart from it
 * by exactly the units held in Redis (drift 0), nothing oversold. */
static void assert_exact(const char *sku, long long stock, long long sold, long long held)
{
    struct it_resp r;
    drained_audit(sku, &r);
    print_message("%-12s initial %lld stock %lld sold %lld held_redis %lld unswept %lld "
                  "drift %lld consistent %d\n", sku, it_audit_field(&r, "initial"),
                  it_audit_field(&r, "stock"), it_audit_field(&r, "sold"),
                  it_audit_field(&r, "held_redis"), it_audit_field(&r, "expired_unswept"),
                  it_audit_field(&r, "drift"), flag(&r, "consistent"));
    assert_true(flag(&r, "consistent"));
    assert_int_equal(it_audit_field(&r, "oversold"), 0);
    assert_int_equal(it_audit_field(&r, "lost_updates"), 0);
    assert_int_equal(it_audit_field(&r, "drift"), 0);
    assert_int_equal(it_audit_field(&r, "stock"), stock + held);
    assert_int_equal(it_audit_field(&r, "sold"), sold);
    assert_int_equal(it_audit_field(&r, "held_redis"), held);
    it_resp_free(&r);
    assert_int_equal(redis_stock(sku), stock);
}

static void sweep_both(void)
{
    assert_int_equal(post_status(0, "/inventory/sweep", ""), 200);
    assert_int_equal(post_status(1, "/inventory/sweep", ""), 200);
}

/* Reserve, repeat, confirm, repeat; reserve, release, repeat. */
static void test_happy_path(void **state)
{
    assert_int_equal(it_seed("Hs-happy", 10), 200);
    struct it_resp r;
    const char *body = "{\"order_id\":\"Hs-happy-1\",\"sku\":\"Hs-happy\",\"qty\":2,"
                       "\"ttl_ms\":60000,\"guard\":\"" G "\"}";
    assert_int_equal(post(0, "/inventory/reserve", body, &r), 200);
    assert_true(flag(&r, "held"));
    assert_string_equal(json_string_value(json_object_get(r.json, "guard")), G);
    long long exp = json_integer_value(json_object_get(r.json, "expires_at_ms"));
    assert_true(exp > 0);
    it_resp_free(&r);
    assert_int_equal(post(1, "/inventory/reserve", body, &r), 200);
    assert_true(flag(&r, "duplicate"));
    assert_int_equal(json_integer_value(json_object_get(r.json, "expires_at_ms")), exp);
    it_resp_free(&r);
    assert_exact("Hs-happy", 8, 0, 2);

    assert_int_equal(post(1, "/inventory/confirm", "{\"order_id\":\"Hs-happy-1\"}", &r), 200);
    assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), 8);
    assert_false(flag(&r, "fresh"));
    it_resp_free(&r);
    assert_int_equal(post(0, "/inventory/confirm", "{\"order_id\":\"Hs-happy-1\"}", &r), 200);
    assert_true(flag(&r, "duplicate"));
    it_resp_free(&r);
    assert_exact("Hs-happy", 8, 2, 0);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE "
                                  "order_id='Hs-happy-1'"), 1);

    assert_int_equal(reserve(0, "Hs-happy-2", "Hs-happy", 3, 60000), 200);
    assert_exact("Hs-happy", 5, 2, 3);
    const char *rel = "{\"order_id\":\"Hs-happy-2\"}";
    assert_int_equal(post(1, "/inventory/release", rel, &r), 200);
    assert_true(flag(&r, "released"));
    it_resp_free(&r);
    assert_int_equal(post(0, "/inventory/release", rel, &r), 200);
    assert_true(flag(&r, "duplicate"));
    it_resp_free(&r);
    assert_int_equal(confirm(0, "Hs-happy-2"), 409);
    assert_exact("Hs-happy", 8, 2, 0);
}

/* Past its deadline the sweeper script gives the units back. */
static void test_expiry_sweep(void **state)
{
    assert_int_equal(it_seed("Hs-exp", 5), 200);
    assert_int_equal(reserve(0, "Hs-exp-1", "Hs-exp", 3, 100), 200);
    assert_int_equal(reserve(1, "Hs-exp-2", "Hs-exp", 1, 100), 200);
    assert_int_equal(reserve(1, "Hs-exp-3", "Hs-exp", 2, 100), 409);   /* 1 left */
    it_sleep_us(300000);
    struct it_resp r;
    drained_audit("Hs-exp", &r);
    long long unswept = it_audit_field(&r, "expired_unswept");
    it_resp_free(&r);
    /* the stack's own sweeper loop may have been first */
    assert_true(unswept == 4 || unswept == 0 || unswept == 3 || unswept == 1);
    sweep_both();
    assert_exact("Hs-exp", 5, 0, 0);
    drained_audit("Hs-exp", &r);
    assert_int_equal(it_audit_field(&r, "expired_unswept"), 0);
    it_resp_free(&r);
}

/* A payment after the sweep, its unit sold since: 409, never oversold;
 * with stock left, a late payment takes fresh units. */
static void test_late_confirm(void **state)
{
    assert_int_equal(it_seed("Hs-late", 1), 200);
    assert_int_equal(reserve(0, "Hs-late-a", "Hs-late", 1, 100), 200);
    assert_int_equal(sell(1, "Hs-late-x", "Hs-late"), 409);   /* held: none to sell */
    it_sleep_us(250000);
    sweep_both();
    assert_int_equal(sell(1, "Hs-late-b", "Hs-late"), 200);
    struct it_resp r;
    assert_int_equal(post(1, "/inventory/confirm", "{\"order_id\":\"Hs-late-a\"}", &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "hold_expired");
    it_resp_free(&r);
    assert_int_equal(confirm(0, "Hs-late-a"), 409);
    assert_exact("Hs-late", 0, 1, 0);

    assert_int_equal(it_seed("Hs-fresh", 2), 200);
    assert_int_equal(reserve(1, "Hs-fresh-a", "Hs-fresh", 1, 100), 200);
    it_sleep_us(300000);   /* swept or not: decided alike */
    assert_int_equal(post(0, "/inventory/confirm", "{\"order_id\":\"Hs-fresh-a\"}", &r), 200);
    assert_true(flag(&r, "fresh"));
    it_resp_free(&r);
    assert_exact("Hs-fresh", 1, 1, 0);
}

/* A limited SKU and a cart: a clear 400 that holds nothing. A reseed
 * removes the SKU's holds. */
static void test_refused_and_reseed(void **state)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/Hs-lim", it.inventory[0]);
    assert_int_equal(it_status("PUT", url, "{\"stock\":5,\"limit_per_user\":1}"), 200);
    struct it_resp r;
    assert_int_equal(post(0, "/inventory/reserve", "{\"order_id\":\"Hs-lim-1\",\"sku\":"
                          "\"Hs-lim\",\"user_id\":\"u1\",\"guard\":\"" G "\"}", &r), 400);
    assert_non_null(strstr(r.body, "limit"));
    it_resp_free(&r);
    assert_int_equal(redis_stock("Hs-lim"), 5);
    assert_int_equal(it_seed("Hs-cart", 5), 200);
    assert_int_equal(post(1, "/inventory/reserve", "{\"order_id\":\"Hs-cart-1\",\"lines\":"
                          "[{\"sku\":\"Hs-cart\",\"qty\":1},{\"sku\":\"Hs-lim\",\"qty\":1}],"
                          "\"guard\":\"" G "\"}", &r), 400);
    it_resp_free(&r);
    assert_exact("Hs-cart", 5, 0, 0);

    assert_int_equal(reserve(0, "Hs-cart-2", "Hs-cart", 2, 60000), 200);
    assert_int_equal(it_seed("Hs-cart", 7), 200);
    assert_int_equal(confirm(1, "Hs-cart-2"), 404);
    assert_exact("Hs-cart", 7, 0, 0);
}

#define RACE_N 40
#define RACE_TTL_MS 400

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

struct racer {
    int k;
    double at_ms;
    long status;
};

static void wait_until(double at_ms)
{
    double left = at_ms - now_ms();
    if (left > 0)
        it_sleep_us((long)(left * 1000));
}

static void *confirm_racer(void *arg)
{
    struct racer *r = arg;
    char order[64];
    snprintf(order, sizeof(order), "Hs-race-%d", r->k);
    wait_until(r->at_ms);
    r->status = confirm(r->k % 2, order);
    return NULL;
}

static void *buyer_racer(void *arg)
{
    struct racer *r = arg;
    char order[64];
    snprintf(order, sizeof(order), "Hs-buy-%d", r->k);
    wait_until(r->at_ms);
    r->status = sell(r->k % 2, order, "Hs-race");
    return NULL;
}

static void *sweep_racer(void *arg)
{
    struct racer *r = arg;
    wait_until(r->at_ms);
    for (int i = 0; i < 10; i++)
        post_status(r->k % 2, "/inventory/sweep", "");
    return NULL;
}

/* 40 confirms spread over the holds' deadline, buyers of the units given
 * back and sweeps on both instances: each hold decided once. */
static void test_confirms_race_sweepers(void **state)
{
    assert_int_equal(it_seed("Hs-race", RACE_N), 200);
    double t0 = now_ms();
    for (int k = 0; k < RACE_N; k++) {
        char order[64];
        snprintf(order, sizeof(order), "Hs-race-%d", k);
        assert_int_equal(reserve(k % 2, order, "Hs-race", 1, RACE_TTL_MS), 200);
    }
    struct racer conf[RACE_N], buy[RACE_N], sw[4];
    pthread_t tc[RACE_N], tb[RACE_N], ts[4];
    for (int k = 0; k < RACE_N; k++) {
        conf[k] = (struct racer){k, t0 + RACE_TTL_MS - 40 + (k * 200.0) / RACE_N, -1};
        buy[k] = (struct racer){k, t0 + RACE_TTL_MS + (k * 60.0) / RACE_N, -1};
        assert_int_equal(pthread_create(&tc[k], NULL, confirm_racer, &conf[k]), 0);
        assert_int_equal(pthread_create(&tb[k], NULL, buyer_racer, &buy[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        sw[k] = (struct racer){k, t0 + RACE_TTL_MS - 10 + k * 10, -1};
        assert_int_equal(pthread_create(&ts[k], NULL, sweep_racer, &sw[k]), 0);
    }
    int paid = 0, expired = 0, bought = 0;
    for (int k = 0; k < RACE_N; k++) {
        pthread_join(tc[k], NULL);
        pthread_join(tb[k], NULL);
        paid += conf[k].status == 200;
        expired += conf[k].status == 409;
        bought += buy[k].status == 200;
    }
    for (int k = 0; k < 4; k++)
        pthread_join(ts[k], NULL);
    print_message("race: %d paid, %d hold_expired, %d bought by others\n", paid, expired,
                  bought);
    assert_int_equal(paid + expired, RACE_N);
    assert_true(paid + bought <= RACE_N);
    sweep_both();
    assert_exact("Hs-race", RACE_N - paid - bought, paid + bought, 0);
    for (int k = 0; k < RACE_N; k++) {
        char order[64];
        snprintf(order, sizeof(order), "Hs-race-%d", k);
        assert_int_equal(confirm((k + 1) % 2, order), conf[k].status);
    }
    assert_exact("Hs-race", RACE_N - paid - bought, paid + bought, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_happy_path),
        cmocka_unit_test(test_expiry_sweep),
        cmocka_unit_test(test_late_confirm),
        cmocka_unit_test(test_refused_and_reseed),
        cmocka_unit_test(test_confirms_race_sweepers),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
