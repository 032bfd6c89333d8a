/* POST /orders with an Idempotency-Key header: a finished key answers as
 * the first request did, a key in flight is 409, a key with another body
 * is 422, a malformed key is 400; no key sells twice. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int group_setup(void **state) { return it_setup(); }

static char orders_url[256];

/* A fresh key per run: keys are kept a day, so a rerun on the same stack
 * must not find the previous run's answers. */
static void fresh_key(char *out, size_t outlen, const char *tag)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, outlen, "%s-%lld-%ld", tag, (long long)ts.tv_sec, ts.tv_nsec);
}

static long post_keyed(const char *key, const char *body, struct it_resp *r)
{
    char hdr[512];
    snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", key);
    const char *hdrs[] = {hdr, NULL};
    char url[256];   /* per call: several threads post at once */
    snprintf(url, sizeof(url), "%s/orders", it.order);
    return it_http_hdr("POST", url, body, hdrs, r);
}

static long long ledger_rows(const char *sku)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_shopping.ledger WHERE sku='%s'", sku);
    return it_sql_value(sql);
}

static long long placed_orders(const char *sku)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_order.orders WHERE sku='%s' "
             "AND status='placed'", sku);
    return it_sql_value(sql);
}

static void assert_error(const struct it_resp *r, const char *code)
{
    const char *e = json_string_value(json_object_get(r->json, "error"));
    assert_non_null(e);
    assert_string_equal(e, code);
}

static void test_finished_key_replays_first_answer(void **state)
{
    assert_int_equal(it_seed("I-replay", 5), 200);
    char key[96];
    fresh_key(key, sizeof(key), "replay");
    const char *body = "{\"sku\":\"I-replay\",\"user_id\":\"u-1\",\"guard\":\"for-update\"}";
    struct it_resp a, b;
    assert_int_equal(post_keyed(key, body, &a), 201);
    assert_int_equal(post_keyed(key, body, &b), 201);
    assert_string_equal(a.body, b.body);           /* byte for byte */
    it_resp_free(&a);
    it_resp_free(&b);
    assert_int_equal(ledger_rows("I-replay"), 1);
    struct it_audit au;
    assert_int_equal(it_audit("I-replay", &au), 0);
    assert_int_equal(au.stock, 4);
    assert_true(au.consistent);
}

static void test_finished_refusal_replays_too(void **state)
{
    assert_int_equal(it_seed("I-refuse", 0), 200);
    char key[96];
    fresh_key(key, sizeof(key), "refuse");
    const char *body = "{\"sku\":\"I-refuse\",\"guard\":\"for-update\"}";
    struct it_resp a, b;
    assert_int_equal(post_keyed(key, body, &a), 409);
    assert_error(&a, "out_of_stock");
    assert_int_equal(it_seed("I-refuse", 5), 200);  /* stock now: the answer stays */
    assert_int_equal(post_keyed(key, body, &b), 409);
    assert_string_equal(a.body, b.body);
    it_resp_free(&a);
    it_resp_free(&b);
    assert_int_equal(ledger_rows("I-refuse"), 0);
}

static void test_same_key_other_body_is_422(void **state)
{
    assert_int_equal(it_seed("I-reuse", 5), 200);
    char key[96];
    fresh_key(key, sizeof(key), "reuse");
    struct it_resp a, b;
    assert_int_equal(post_keyed(key, "{\"sku\":\"I-reuse\",\"guard\":\"for-update\"}", &a), 201);
    assert_int_equal(post_keyed(key, "{\"sku\":\"I-reuse\",\"qty\":2,\"guard\":\"for-update\"}",
                                &b), 422);
    assert_error(&b, "idempotency_key_reused");
    it_resp_free(&a);
    it_resp_free(&b);
    assert_int_equal(ledger_rows("I-reuse"), 1);
    struct it_audit au;
    assert_int_equal(it_audit("I-reuse", &au), 0);
    assert_int_equal(au.stock, 4);
}

struct slow_post {
    const char *key;
    const char *body;
    long status;
    char answer[131072];
};

static void *slow_post_run(void *arg)
{
    struct slow_post *p = arg;
    struct it_resp r;
    p->status = post_keyed(p->key, p->body, &r);
    snprintf(p->answer, sizeof(p->answer), "%s", r.body);
    it_resp_free(&r);
    return NULL;
}

static void test_key_in_flight_is_409(void **state)
{
    assert_int_equal(it_seed("I-flight", 5), 200);
    char key[96];
    fresh_key(key, sizeof(key), "flight");
    /* hold_ms keeps the first request inside the inventory for 1.5 s */
    static struct slow_post p;
    p = (struct slow_post){.key = key, .body = "{\"sku\":\"I-flight\",\"guard\":\"for-update\","
                                               "\"hold_ms\":1500}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_post_run, &p), 0);
    it_sleep_us(400 * 1000);
    struct it_resp r;
    long s = post_keyed(key, p.body, &r);
    pthread_join(t, NULL);
    assert_int_equal(s, 409);
    assert_error(&r, "request_in_progress");
    it_resp_free(&r);
    assert_int_equal(p.status, 201);
    assert_int_equal(post_keyed(key, p.body, &r), 201);   /* finished now: the first answer */
    assert_string_equal(r.body, p.answer);
    it_resp_free(&r);
    assert_int_equal(ledger_rows("I-flight"), 1);
    assert_int_equal(placed_orders("I-flight"), 1);
}

static void test_malformed_key_is_400(void **state)
{
    assert_int_equal(it_seed("I-bad", 5), 200);
    char longkey[400];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    const char *bad[] = {"", "two words", longkey, "tab\there", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char hdr[512];
        if (bad[i][0])
            snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", bad[i]);
        else
            snprintf(hdr, sizeof(hdr), "Idempotency-Key;");   /* curl: an empty header */
        const char *hdrs[] = {hdr, NULL};
        snprintf(orders_url, sizeof(orders_url), "%s/orders", it.order);
        struct it_resp r;
        long s = it_http_hdr("POST", orders_url, "{\"sku\":\"I-bad\",\"guard\":\"for-update\"}",
                             hdrs, &r);
        if (s != 400)
            fprintf(stderr, "key #%zu answered %ld: %s\n", i, s, r.body);
        assert_int_equal(s, 400);
        assert_error(&r, "bad_idempotency_key");
        it_resp_free(&r);
    }
    assert_int_equal(ledger_rows("I-bad"), 0);
}

static void test_without_key_unchanged(void **state)
{
    assert_int_equal(it_seed("I-nokey", 5), 200);
    snprintf(orders_url, sizeof(orders_url), "%s/orders", it.order);
    const char *body = "{\"sku\":\"I-nokey\",\"guard\":\"for-update\"}";
    assert_int_equal(it_status("POST", orders_url, body), 201);
    assert_int_equal(it_status("POST", orders_url, body), 201);   /* two orders, as before */
    assert_int_equal(ledger_rows("I-nokey"), 2);
}

/* Many clients sending the same keys at once: each key sells once. */
static void test_racing_repeats_sell_once(void **state)
{
    assert_int_equal(it_seed("I-race", 100), 200);
    char key[96];
    fresh_key(key, sizeof(key), "race");
    enum { N = 8 };
    static struct slow_post p[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        p[i] = (struct slow_post){.key = key, .body = "{\"sku\":\"I-race\",\"guard\":"
                                                      "\"for-update\",\"hold_ms\":300}"};
        assert_int_equal(pthread_create(&t[i], NULL, slow_post_run, &p[i]), 0);
    }
    int created = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        created += p[i].status == 201;
        busy += p[i].status == 409;
    }
    assert_int_equal(created + busy, N);
    assert_true(created >= 1);
    assert_int_equal(ledger_rows("I-race"), 1);
    assert_int_equal(placed_orders("I-race"), 1);
}

/* loadgen as a client whose deadline (200 ms) is shorter than each sale
 * (hold_ms 400): every first attempt times out, the sale goes on, and the
 * client retries twice. Buyer n buys one unit of its own SKU "<sku>-n", so
 * that the sales do not queue on one row lock. Returns the buyers with a
 * placed order, and the placed orders in *orders. */
enum { RETRY_BUYERS = 12 };

static long long retrying_buyers(const char *sku, const char *extra, const char *body,
                                 long long *orders)
{
    char bin[512], cmd[2048], one[96], sql[512];
    assert_int_equal(it_stack_env("BIN", bin, sizeof(bin)), 0);
    for (int n = 0; n < RETRY_BUYERS; n++) {
        snprintf(one, sizeof(one), "%s-%d", sku, n);
        assert_int_equal(it_seed(one, 1000), 200);
    }
    snprintf(cmd, sizeof(cmd), "'%s/loadgen' -t 1 -c 4 -n %d --timeout 200ms --retries 2 "
             "%s -b '%s' --progress off '%s/orders' > '%s/logs/loadgen-%s.log' 2>&1", bin,
             RETRY_BUYERS, extra, body, it.order, it.stack_dir, sku);
    assert_int_equal(system(cmd), 0);
    it_sleep_us(3000 * 1000);   /* the sales the client gave up on finish */
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_order.orders WHERE sku LIKE '%s-%%' "
             "AND status='placed'", sku);
    *orders = it_sql_value(sql);
    snprintf(sql, sizeof(sql), "SELECT COUNT(DISTINCT user_id) FROM db_order.orders "
             "WHERE sku LIKE '%s-%%' AND status='placed'", sku);
    long long buyers = it_sql_value(sql);
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_shopping.ledger WHERE sku LIKE '%s-%%' "
             "AND released=0", sku);
    long long sold = it_sql_value(sql);
    fprintf(stderr, "%s: %lld buyers, %lld placed orders, %lld ledger sales\n", sku, buyers,
            *orders, sold);
    assert_int_equal(sold, *orders);   /* every sale has its order, none is stranded */
    return buyers;
}

static void test_client_retries_double_buy_without_keys(void **state)
{
    long long orders;
    /* no order_id: each retry is a new order */
    long long buyers = retrying_buyers(
        "IRplain", "", "{\"sku\":\"IRplain-{seq}\",\"user_id\":\"u-{seq}\","
        "\"guard\":\"for-update\",\"hold_ms\":400}", &orders);
    assert_int_equal(buyers, RETRY_BUYERS);
    assert_true(orders > buyers);
    /* an order_id, but the careless client draws a new one per attempt */
    buyers = retrying_buyers(
        "IRnew", "--retry-new-ids", "{\"sku\":\"IRnew-{seq}\",\"user_id\":\"u-{seq}\","
        "\"order_id\":\"r-{uuid}\",\"guard\":\"for-update\",\"hold_ms\":400}", &orders);
    assert_int_equal(buyers, RETRY_BUYERS);
    assert_true(orders > buyers);
}

static void test_client_retries_with_keys_buy_once(void **state)
{
    long long orders;
    char extra[128];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(extra, sizeof(extra), "-H 'Idempotency-Key: k%lld-{seq}'", (long long)ts.tv_sec);
    long long buyers = retrying_buyers(
        "IRkey", extra, "{\"sku\":\"IRkey-{seq}\",\"user_id\":\"u-{seq}\","
        "\"guard\":\"for-update\",\"hold_ms\":400}", &orders);
    assert_int_equal(buyers, RETRY_BUYERS);
    assert_int_equal(orders, buyers);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finished_key_replays_first_answer),
        cmocka_unit_test(test_finished_refusal_replays_too),
        cmocka_unit_test(test_same_key_other_body_is_422),
        cmocka_unit_test(test_key_in_flight_is_409),
        cmocka_unit_test(test_malformed_key_is_400),
        cmocka_unit_test(test_without_key_unchanged),
        cmocka_unit_test(test_racing_repeats_sell_once),
        cmocka_unit_test(test_client_retries_double_buy_without_keys),
        cmocka_unit_test(test_client_retries_with_keys_buy_once),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
