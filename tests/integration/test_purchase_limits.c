/* Purchase limits ("at most N per person"): one user racing from many tabs
 * on 2 instances buys exactly the limit under every guard that enforces
 * limits, the count moving in the sale's own transaction; the field's
 * defect (limit_check:"separate", the count checked apart from the sale)
 * is shown to break first. A release gives the quota back, a reseed resets
 * it, bad input changes nothing, and a guard that does not enforce limits
 * refuses a limited SKU instead of selling past it. Every test ends on an
 * audit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int group_setup(void **state) { return it_setup(); }

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
    print_message("  %ld %s\n", st, r.body);
    it_resp_free(&r);
    return st;
}

/* PUT /inventory/{sku} with a body of our own; returns the status. */
static long seed_body(const char *sku, const char *body)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    return it_status("PUT", url, body);
}

static long seed_limit(const char *sku, long long stock, long limit)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"stock\":%lld,\"limit_per_user\":%ld}", stock, limit);
    return seed_body(sku, body);
}

/* GET /inventory/{sku}'s field (or -1). */
static long long state_field(const char *sku, const char *name)
{
    char url[256];
    struct it_resp r;
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[1], sku);
    long st = it_http("GET", url, NULL, &r);
    json_t *v = st == 200 ? json_object_get(r.json, name) : NULL;
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    it_resp_free(&r);
    return x;
}

/* 16 sales of one unit by user u1 at once, over both instances, each held
 * hold_ms inside its guard. Fills l's status counts. */
static void race(struct it_load *l, const char *sku, const char *guard, const char *extra,
                 long hold_ms, char *fmt, size_t fmtlen)
{
    static char deduct_urls[2][256];
    static const char *const urls[2] = {deduct_urls[0], deduct_urls[1]};
    for (int i = 0; i < 2; i++)
        snprintf(deduct_urls[i], sizeof(deduct_urls[i]), "%s/inventory/deduct", it.inventory[i]);
    snprintf(fmt, fmtlen,
             "{\"sku\":\"%s\",\"qty\":1,\"user_id\":\"u1\",\"order_id\":\"%s-%%d\","
             "\"guard\":\"%s\",\"hold_ms\":%ld%s}", sku, sku, guard, hold_ms, extra);
    memset(l, 0, sizeof(*l));
    l->total = 16;
    l->clients = 16;
    l->urls = urls;
    l->nurls = 2;
    l->method = "POST";
    l->body_fmt = fmt;
    it_hammer(l);
    print_message("%-22s %-18s 200:%d 409:%d 400:%d 503:%d other:%d\n", sku, guard,
                  l->by_status[200], l->by_status[409], l->by_status[400], l->by_status[503],
                  l->total - l->by_status[200] - l->by_status[409] - l->by_status[400] -
                      l->by_status[503]);
}

/* The guards of GET /guards with their "limits" flag. */
static json_t *guard_list(void)
{
    char url[256];
    struct it_resp r;
    snprintf(url, sizeof(url), "%s/guards", it.inventory[0]);
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    json_t *g = json_incref(json_object_get(r.json, "guards"));
    it_resp_free(&r);
    assert_true(json_is_array(g) && json_array_size(g) > 0);
    return g;
}

/* Limit 2, 16 sales of one user at once on 2 instances: exactly 2 sold
 * under each guard that enforces limits (its count moves in the sale's
 * transaction), 14 refused as limit_exceeded; a guard that does not
 * enforce limits refuses them all (400), nothing sold. */
static void test_one_user_races_every_guard(void **state)
{
    json_t *guards = guard_list();
    size_t i;
    json_t *g;
    json_array_foreach(guards, i, g) {
        const char *name = json_string_value(json_object_get(g, "name"));
        json_t *lim = json_object_get(g, "limits");
        assert_true(json_is_boolean(lim));
        char sku[48], fmt[512];
        snprintf(sku, sizeof(sku), "Lim-race-%zu", i);
        assert_int_equal(seed_limit(sku, 100, 2), 200);
        struct it_load l;
        race(&l, sku, name, "", 20, fmt, sizeof(fmt));
        struct it_resp a;
        it_audit_json(1, sku, &a);
        long long sold = it_audit_field(&a, "sold");
        long long over = it_audit_field(&a, "over_limit");
        long long limit = it_audit_field(&a, "limit_per_user");
        print_message("  audit: %s\n", a.body);
        it_resp_free(&a);
        assert_int_equal(limit, 2);
        assert_int_equal(over, 0);
        if (json_is_true(lim)) {
            assert_int_equal(l.by_status[200], 2);
            assert_int_equal(l.by_status[409], 14);
            assert_int_equal(sold, 2);
        } else {
            assert_int_equal(l.by_status[400], 16);
            assert_int_equal(sold, 0);
            assert_int_equal(state_field(sku, "stock"), 100);
        }
    }
    json_decref(guards);
}

/* The field's defect: the user's count read and checked apart from the
 * sale's transaction. Under conditional-update (the stock itself is safe)
 * one user racing from 16 tabs buys past the limit of 2: the audit says
 * over_limit and is inconsistent. Bounded tries, each on a new SKU. */
static void test_separate_check_breaks(void **state)
{
    long long over = 0;
    for (int t = 0; t < 3 && over == 0; t++) {
        char sku[48], fmt[512];
        snprintf(sku, sizeof(sku), "Lim-sep-%d", t);
        assert_int_equal(seed_limit(sku, 100, 2), 200);
        struct it_load l;
        race(&l, sku, "conditional-update", ",\"limit_check\":\"separate\"", 50, fmt,
             sizeof(fmt));
        struct it_resp a;
        it_audit_json(0, sku, &a);
        over = it_audit_field(&a, "over_limit");
        json_t *users = json_object_get(a.json, "over_limit_users");
        print_message("  audit: %s\n", a.body);
        if (over > 0) {
            assert_true(json_is_false(json_object_get(a.json, "consistent")));
            assert_int_equal(json_array_size(users), 1);
            json_t *u = json_array_get(users, 0);
            assert_string_equal(json_string_value(json_object_get(u, "user_id")), "u1");
            assert_true(json_integer_value(json_object_get(u, "bought")) > 2);
            assert_int_equal(json_integer_value(json_object_get(u, "limit")), 2);
            assert_int_equal(it_audit_field(&a, "oversold"), 0);
        }
        it_resp_free(&a);
    }
    assert_true(over > 0);   /* the variant's verdict: broke */
}

/* A release gives the quota back; a reseed resets every count and sets
 * the limit anew (absent: none). */
static void test_release_and_reseed(void **state)
{
    const char *sku = "Lim-rel";
    char body[256];
    struct it_resp r;
    assert_int_equal(seed_limit(sku, 10, 2), 200);
    assert_int_equal(state_field(sku, "limit_per_user"), 2);
    for (int k = 0; k < 2; k++) {
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u7\",\"order_id\":"
                 "\"lim-rel-%d\",\"guard\":\"for-update\"}", sku, k);
        assert_int_equal(deduct_status(k % 2, body), 200);
    }
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u7\",\"order_id\":\"lim-rel-2\","
             "\"guard\":\"mutex\"}", sku);
    assert_int_equal(deduct(0, body, &r), 409);
    print_message("  %s\n", r.body);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "limit_exceeded");
    assert_non_null(strstr(r.body, "already has 2"));
    it_resp_free(&r);
    /* another user has a quota of their own */
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u8\",\"order_id\":\"lim-rel-u8\","
             "\"guard\":\"optimistic\"}", sku);
    assert_int_equal(deduct_status(1, body), 200);

    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[1]);
    assert_int_equal(it_status("POST", url, "{\"order_id\":\"lim-rel-0\"}"), 200);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u7\",\"order_id\":\"lim-rel-3\","
             "\"guard\":\"conditional-update\"}", sku);
    assert_int_equal(deduct_status(0, body), 200);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u7\",\"order_id\":\"lim-rel-4\","
             "\"guard\":\"conditional-update\"}", sku);
    assert_int_equal(deduct_status(0, body), 409);
    struct it_resp a;
    it_audit_json(0, sku, &a);
    assert_int_equal(it_audit_field(&a, "sold"), 3);
    assert_int_equal(it_audit_field(&a, "stock"), 7);
    assert_int_equal(it_audit_field(&a, "over_limit"), 0);
    assert_true(json_is_true(json_object_get(a.json, "consistent")));
    it_resp_free(&a);

    /* reseed, same limit: u7 starts again at 0 */
    assert_int_equal(seed_limit(sku, 10, 2), 200);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u7\",\"order_id\":\"lim-rel-5\","
             "\"guard\":\"for-update\",\"qty\":2}", sku);
    assert_int_equal(deduct_status(1, body), 200);
    /* reseed without the field: no limit any more */
    assert_int_equal(seed_body(sku, "{\"stock\":10}"), 200);
    assert_int_equal(state_field(sku, "limit_per_user"), 0);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u7\",\"order_id\":\"lim-rel-6\","
             "\"guard\":\"for-update\",\"qty\":5}", sku);
    assert_int_equal(deduct_status(1, body), 200);
    it_audit_json(1, sku, &a);
    assert_int_equal(it_audit_field(&a, "sold"), 5);
    assert_int_equal(it_audit_field(&a, "limit_per_user"), 0);
    assert_true(json_is_true(json_object_get(a.json, "consistent")));
    it_resp_free(&a);
}

/* Bad input is a 400 and changes nothing: a bad limit on the seed, a sale
 * without user_id on a limited SKU, a bad limit_check, and a guard that
 * does not enforce limits (its 400 names those that do). */
static void test_bad_input(void **state)
{
    const char *sku = "Lim-bad";
    assert_int_equal(seed_limit(sku, 10, 3), 200);
    const char *bad_seeds[] = {"{\"stock\":5,\"limit_per_user\":-1}",
                               "{\"stock\":5,\"limit_per_user\":\"2\"}",
                               "{\"stock\":5,\"limit_per_user\":1.5}",
                               "{\"stock\":5,\"limit_per_user\":10000001}"};
    for (size_t i = 0; i < sizeof(bad_seeds) / sizeof(bad_seeds[0]); i++)
        assert_int_equal(seed_body(sku, bad_seeds[i]), 400);
    assert_int_equal(state_field(sku, "stock"), 10);
    assert_int_equal(state_field(sku, "limit_per_user"), 3);

    char body[256];
    struct it_resp r;
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"for-update\"}", sku);
    assert_int_equal(deduct(0, body, &r), 400);
    assert_non_null(strstr(r.body, "user_id required"));
    it_resp_free(&r);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u1\",\"limit_check\":\"maybe\"}",
             sku);
    assert_int_equal(deduct_status(1, body), 400);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"user_id\":\"u1\",\"guard\":\"redis-decr\"}",
             sku);
    assert_int_equal(deduct(1, body, &r), 400);
    print_message("  %s\n", r.body);
    assert_non_null(strstr(r.body, "enforces no limits"));
    assert_non_null(strstr(r.body, "conditional-update"));
    assert_non_null(strstr(r.body, "etcd"));
    it_resp_free(&r);
    snprintf(body, sizeof(body), "{\"lines\":[{\"sku\":\"%s\",\"qty\":1}],\"guard\":"
             "\"for-update\"}", sku);
    assert_int_equal(deduct_status(0, body), 400);

    struct it_resp a;
    it_audit_json(0, sku, &a);
    assert_int_equal(it_audit_field(&a, "sold"), 0);
    assert_int_equal(it_audit_field(&a, "stock"), 10);
    assert_true(json_is_true(json_object_get(a.json, "consistent")));
    it_resp_free(&a);
}

/* A cart counts each line against the buyer's limit of its SKU in the
 * cart's transaction: past it, the whole cart is refused (nothing sold). */
static void test_cart_counts(void **state)
{
    assert_int_equal(seed_limit("Lim-cart-a", 10, 2), 200);
    assert_int_equal(seed_limit("Lim-cart-b", 10, 0), 200);
    const char *cart = "{\"lines\":[{\"sku\":\"Lim-cart-a\",\"qty\":%d},{\"sku\":\"Lim-cart-b\","
                       "\"qty\":3}],\"user_id\":\"u3\",\"order_id\":\"lim-cart-%d\",\"guard\":"
                       "\"conditional-update\"}";
    char body[400];
    snprintf(body, sizeof(body), cart, 2, 1);
    assert_int_equal(deduct_status(0, body), 200);
    snprintf(body, sizeof(body), cart, 1, 2);
    assert_int_equal(deduct_status(1, body), 409);
    struct it_resp a;
    it_audit_json(0, "Lim-cart-a", &a);
    assert_int_equal(it_audit_field(&a, "sold"), 2);
    assert_int_equal(it_audit_field(&a, "over_limit"), 0);
    it_resp_free(&a);
    it_audit_json(0, "Lim-cart-b", &a);
    assert_int_equal(it_audit_field(&a, "sold"), 3);
    it_resp_free(&a);
}

/* A guard that does not enforce limits (redis-stream sells carts) must not
 * sell a cart with a limited line: a 400, and no line of it is sold. */
static void test_cart_of_limited_sku_under_non_enforcing_guard(void **state)
{
    assert_int_equal(seed_limit("Lim-rs-a", 10, 2), 200);
    assert_int_equal(seed_limit("Lim-rs-b", 10, 0), 200);
    const char *body = "{\"lines\":[{\"sku\":\"Lim-rs-b\",\"qty\":1},{\"sku\":\"Lim-rs-a\","
                       "\"qty\":1}],\"user_id\":\"u4\",\"order_id\":\"rs-cart-1\",\"guard\":"
                       "\"redis-stream\"}";
    for (int i = 0; i < 2; i++)
        assert_int_equal(deduct_status(i, body), 400);
    assert_int_equal(state_field("Lim-rs-b", "stock"), 10);
    assert_int_equal(state_field("Lim-rs-a", "stock"), 10);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE "
                                  "order_id='rs-cart-1'"), 0);
}

/* POST /orders passes the buyer on: the same limit holds through it. */
static void test_orders_pass_user(void **state)
{
    assert_int_equal(seed_limit("Lim-ord", 10, 1), 200);
    char url[256];
    snprintf(url, sizeof(url), "%s/orders", it.order);
    long a = it_status("POST", url, "{\"sku\":\"Lim-ord\",\"user_id\":\"u5\",\"order_id\":"
                                    "\"ord-1\",\"guard\":\"for-update\"}");
    long b = it_status("POST", url, "{\"sku\":\"Lim-ord\",\"user_id\":\"u5\",\"order_id\":"
                                    "\"ord-2\",\"guard\":\"for-update\"}");
    print_message("orders: %ld %ld\n", a, b);
    assert_true(a == 200 || a == 201);
    assert_int_equal(b, 409);
    assert_int_equal(state_field("Lim-ord", "stock"), 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_separate_check_breaks),
        cmocka_unit_test(test_one_user_races_every_guard),
        cmocka_unit_test(test_release_and_reseed),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_cart_counts),
        cmocka_unit_test(test_cart_of_limited_sku_under_non_enforcing_guard),
        cmocka_unit_test(test_orders_pass_user),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
