/* redis-decr: Redis and MySQL never apart once things settle.
 *   - an instance killed (-9) between the Redis decision and the MySQL
 *     write leaves an intent behind; the audit of the SKU, with no sale
 *     after, settles it (Redis = MySQL, drift 0), not only the next sale;
 *   - a reseed made on another instance while a sale decided in Redis is
 *     on its way to MySQL: that sale, decided under the old seed, must not
 *     change the reseeded row nor be answered "sold" (drift 0 after). */
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

static int group_setup(void **state) { return it_setup(); }

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The SKU's redis-decr stock in Redis (see it_redis_num). */
static long long redis_stock(const char *sku) { return it_redis_num("GET stock:{%s}", sku); }

/* Killed mid-sale, then nothing sold: the audit alone must settle the
 * intent once its write deadline has passed. */
static void test_decr_stale_intent_settled_by_audit(void **state)
{
    long st;
    long long rs = it_decr_kill_mid_sale("inventory-decr-idle-kill", it_port_base() + 48,
                                         "Td-idle", "td-idle-1", 2000, 200, &st);
    assert_int_equal(rs, 9);
    nap_ms(5000);   /* hold 2 s + twice the write margin: it cannot land now */
    struct it_resp r;
    it_audit_json(0, "Td-idle", &r);
    long long rd = redis_stock("Td-idle");
    long long intents = it_redis_num("ZCARD stock:{%s}:intents", "Td-idle");
    print_message("idle SKU after the kill: %s; Redis %lld, intents %lld\n", r.body, rd,
                  intents);
    long long drift = it_audit_field(&r, "drift"), stock = it_audit_field(&r, "stock");
    int consistent = json_is_true(json_object_get(r.json, "consistent"));
    it_resp_free(&r);
    assert_int_equal(drift, 0);
    assert_true(consistent);
    assert_int_equal(stock, 10);
    assert_int_equal(rd, 10);
}

/* A sale decided in Redis on inventory-2 (hold_ms 1500), the SKU reseeded
 * through inventory-1 meanwhile: the sale must not land in the new seed. */
static void test_decr_reseed_during_sale_elsewhere(void **state)
{
    assert_int_equal(it_seed("Td-reseed", 10), 200);
    struct it_bg_post held;
    assert_int_equal(it_bg_deduct(&held, it.inventory[1],
                                  "{\"sku\":\"Td-reseed\",\"order_id\":\"td-reseed-1\","
                                  "\"guard\":\"redis-decr\",\"hold_ms\":1500}"), 0);
    long long rs = it_redis_get_until("stock:{Td-reseed}", 9, 200, 10);
    assert_int_equal(rs, 9);                           /* decided in Redis */
    assert_int_equal(it_seed("Td-reseed", 10), 200);   /* on inventory-1 */
    it_bg_post_join(&held);
    struct it_resp r;
    it_audit_json(0, "Td-reseed", &r);
    long long rd = redis_stock("Td-reseed");
    print_message("sale held across a reseed answered %ld; audit %s; Redis %lld\n",
                  held.status, r.body, rd);
    long long drift = it_audit_field(&r, "drift"), stock = it_audit_field(&r, "stock");
    long long sold = it_audit_field(&r, "sold");
    it_resp_free(&r);
    assert_int_not_equal(held.status, 200);
    assert_int_equal(stock, 10);
    assert_int_equal(sold, 0);
    assert_int_equal(drift, 0);
    /* and the SKU sells on, both sides together */
    char body[200];
    snprintf(body, sizeof(body),
             "{\"sku\":\"Td-reseed\",\"order_id\":\"td-reseed-2\",\"guard\":\"redis-decr\"}");
    char u[200];
    snprintf(u, sizeof(u), "%s/inventory/deduct", it.inventory[1]);
    assert_int_equal(it_status("POST", u, body), 200);
    struct it_audit a;
    assert_int_equal(it_audit("Td-reseed", &a), 0);
    assert_int_equal(a.stock, 9);
    assert_int_equal(redis_stock("Td-reseed"), 9);
    assert_true(a.consistent);
}

/* Group commits and no ledger read before a sale: a repeated order_id,
 * concurrent with itself on both instances, is sold once (its repeats are
 * the echo and give their Redis unit back); a repeat after the stock ran
 * out is still the echo; another quantity under it is a conflict. */
static void test_decr_repeats_in_groups(void **state)
{
    /* Enough stock for every repeat to take a Redis unit while the first
     * is in flight: with less, a repeat that finds Redis empty before the
     * first sale's COMMIT answers out_of_stock (no ledger row yet). */
    assert_int_equal(it_seed("Td-rep", 50), 200);
    char u0[200], u1[200];
    snprintf(u0, sizeof(u0), "%s/inventory/deduct", it.inventory[0]);
    snprintf(u1, sizeof(u1), "%s/inventory/deduct", it.inventory[1]);
    const char *const urls[2] = {u0, u1};
    struct it_load l = {.total = 40, .clients = 20, .urls = urls, .nurls = 2, .method = "POST",
                        .body_fmt = "{\"sku\":\"Td-rep\",\"order_id\":\"td-rep-1\","
                                    "\"guard\":\"redis-decr\"}"};
    it_hammer(&l);
    print_message("40 repeats of one order: 200:%d 503:%d 409:%d\n", l.by_status[200],
                  l.by_status[503], l.by_status[409]);
    struct it_resp r;
    it_audit_json(1, "Td-rep", &r);
    long long stock = it_audit_field(&r, "stock"), sold = it_audit_field(&r, "sold");
    long long drift = it_audit_field(&r, "drift");
    it_resp_free(&r);
    assert_int_equal(l.by_status[200], 40);
    assert_int_equal(stock, 49);
    assert_int_equal(sold, 1);
    assert_int_equal(drift, 0);
    assert_int_equal(redis_stock("Td-rep"), 49);
    assert_int_equal(it_status("POST", u0, "{\"sku\":\"Td-rep\",\"order_id\":\"td-rep-2\","
                                           "\"qty\":49,\"guard\":\"redis-decr\"}"), 200);
    /* out of stock in Redis now: the repeat is still the first sale's echo */
    assert_int_equal(it_http("POST", u1, "{\"sku\":\"Td-rep\",\"order_id\":\"td-rep-1\","
                                         "\"guard\":\"redis-decr\"}", &r), 200);
    assert_true(json_is_true(json_object_get(r.json, "duplicate")));
    it_resp_free(&r);
    assert_int_equal(it_status("POST", u1, "{\"sku\":\"Td-rep\",\"order_id\":\"td-rep-1\","
                                           "\"qty\":2,\"guard\":\"redis-decr\"}"), 409);
    assert_int_equal(it_status("POST", u1, "{\"sku\":\"Td-rep\",\"order_id\":\"td-rep-3\","
                                           "\"guard\":\"redis-decr\"}"), 409);
    struct it_audit a;
    assert_int_equal(it_audit("Td-rep", &a), 0);
    assert_int_equal(a.stock, 0);
    assert_int_equal(a.sold, 50);
    assert_true(a.consistent);
    assert_int_equal(redis_stock("Td-rep"), 0);
}

/* A repeat of an order whose first sale is still on its way to MySQL
 * (decided in Redis, the last unit, not yet committed), on the other
 * instance: Redis is empty and the ledger has no row yet, but it is not
 * out of stock for that order. It answers 503 order_in_progress and
 * changes nothing; once the first is answered, the repeat is its echo. */
static void test_decr_repeat_in_flight_is_in_progress(void **state)
{
    assert_int_equal(it_seed("Td-infl", 1), 200);
    struct it_bg_post held;
    assert_int_equal(it_bg_deduct(&held, it.inventory[0],
                                  "{\"sku\":\"Td-infl\",\"order_id\":\"td-infl-1\","
                                  "\"guard\":\"redis-decr\",\"hold_ms\":1500}"), 0);
    assert_int_equal(it_redis_get_until("stock:{Td-infl}", 0, 200, 10), 0);
    char u1[200];
    snprintf(u1, sizeof(u1), "%s/inventory/deduct", it.inventory[1]);
    const char *rep = "{\"sku\":\"Td-infl\",\"order_id\":\"td-infl-1\",\"guard\":\"redis-decr\"}";
    struct it_resp r;
    long st = it_http("POST", u1, rep, &r);
    const char *err = json_string_value(json_object_get(r.json, "error"));
    print_message("repeat while the first is in flight: %ld %s\n", st, r.body);
    assert_int_equal(st, 503);
    assert_non_null(err);
    assert_string_equal(err, "order_in_progress");
    it_resp_free(&r);
    assert_int_equal(redis_stock("Td-infl"), 0);            /* nothing changed */
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='td-infl-1'"), 0);
    it_bg_post_join(&held);
    assert_int_equal(held.status, 200);
    assert_int_equal(it_http("POST", u1, rep, &r), 200);      /* now the echo */
    assert_true(json_is_true(json_object_get(r.json, "duplicate")));
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit("Td-infl", &a), 0);
    assert_int_equal(a.stock, 0);
    assert_int_equal(a.sold, 1);
    assert_true(a.consistent);
    assert_int_equal(redis_stock("Td-infl"), 0);
}

/* Group commits answer each sale with its own remaining: 300 sales of one
 * unit on both instances at once leave ledger rows whose remaining values
 * are exactly 999..700, once each (each row's stock after it), whether a
 * group took the fast write or read the row first. */
static void test_decr_group_remaining_exact(void **state)
{
    assert_int_equal(it_seed("Td-rem", 1000), 200);
    char u0[200], u1[200];
    snprintf(u0, sizeof(u0), "%s/inventory/deduct", it.inventory[0]);
    snprintf(u1, sizeof(u1), "%s/inventory/deduct", it.inventory[1]);
    const char *const urls[2] = {u0, u1};
    struct it_load l = {.total = 300, .clients = 32, .urls = urls, .nurls = 2, .method = "POST",
                        .body_fmt = "{\"sku\":\"Td-rem\",\"order_id\":\"td-rem-%d\","
                                    "\"guard\":\"redis-decr\"}"};
    it_hammer(&l);
    assert_int_equal(l.by_status[200], 300);
    const char *w = "FROM db_shopping.ledger WHERE sku='Td-rem'";
    char q[256];
    snprintf(q, sizeof(q), "SELECT COUNT(DISTINCT remaining) %s", w);
    assert_int_equal(it_sql_value(q), 300);
    snprintf(q, sizeof(q), "SELECT MIN(remaining) %s", w);
    assert_int_equal(it_sql_value(q), 700);
    snprintf(q, sizeof(q), "SELECT MAX(remaining) %s", w);
    assert_int_equal(it_sql_value(q), 999);
    struct it_audit a;
    assert_int_equal(it_audit("Td-rem", &a), 0);
    assert_int_equal(a.stock, 700);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decr_stale_intent_settled_by_audit),
        cmocka_unit_test(test_decr_reseed_during_sale_elsewhere),
        cmocka_unit_test(test_decr_repeats_in_groups),
        cmocka_unit_test(test_decr_repeat_in_flight_is_in_progress),
        cmocka_unit_test(test_decr_group_remaining_exact),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
