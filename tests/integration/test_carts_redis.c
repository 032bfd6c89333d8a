/* Carts under redis-stream, on 2 instances: every line decided by one
 * Lua script call (lines summed per SKU, every SKU checked, then all
 * decremented or none), one stream entry carrying every line, the flusher
 * writing one ledger row per line in one MySQL transaction. Crossed carts
 * and the same SKU twice never oversell, every short line is named, the
 * audit of each SKU is exact (its pending units only its own lines'),
 * repeats answer the first answer, a release gives every line back in
 * Redis too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DRAIN_MS 15000

static int group_setup(void **state) { return it_setup(); }

static long deduct(int i, const char *body, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[i]);
    return it_http("POST", url, body, r);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long long redis_stock(const char *sku) { return it_redis_num("GET sstock:{%s}", sku); }

static long long ledger_rows(const char *sku)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM db_shopping.ledger WHERE sku='%s' AND guard='redis-stream'",
             sku);
    return it_sql_value(sql);
}

/* The audit's field `name` of sku, read on instance 1. */
static long long audit_field(const char *sku, const char *name)
{
    struct it_resp r;
    it_audit_json(1, sku, &r);
    long long v = it_audit_field(&r, name);
    it_resp_free(&r);
    return v;
}

/* Wait until the SKU has no unflushed sale; fails the test past DRAIN_MS. */
static void drain(const char *sku)
{
    long long p = -1;
    for (long waited = 0; waited < DRAIN_MS; waited += 100) {
        if ((p = audit_field(sku, "pending")) == 0)
            return;
        nap_ms(100);
    }
    fail_msg("%s did not drain in %d ms: %lld pending", sku, DRAIN_MS, p);
}

/* Drained, then every answered line in MySQL once (`rows` ledger rows),
 * MySQL = Redis, nothing oversold. */
static void assert_exact(const char *sku, long long initial, long long sold, long long rows)
{
    drain(sku);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-10s initial %lld sold %lld stock %lld redis %lld rows %lld\n", sku,
                  a.initial, a.sold, a.stock, redis_stock(sku), ledger_rows(sku));
    assert_true(a.consistent);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_int_equal(a.initial, initial);
    assert_int_equal(a.sold, sold);
    assert_int_equal(a.stock, initial - sold);
    assert_int_equal(ledger_rows(sku), rows);
    assert_int_equal(redis_stock(sku), a.stock);
}

struct client {
    int instance, requests, id;
    char lines[160];
    int ok, refused, other;
};

static void *client_run(void *arg)
{
    struct client *c = arg;
    for (int i = 0; i < c->requests; i++) {
        char body[512];
        snprintf(body, sizeof(body), "{\"lines\":[%s],\"guard\":\"redis-stream\","
                 "\"order_id\":\"cr-%d-%d\"}", c->lines, c->id, i);
        struct it_resp r;
        long st = deduct(c->instance, body, &r);
        c->ok += st == 200;
        c->refused += st == 409;
        if (st != 200 && st != 409) {
            c->other++;
            print_message("  %ld %.240s\n", st, r.body);
        }
        it_resp_free(&r);
    }
    return NULL;
}

#define CLIENTS 6

/* CLIENTS clients over both instances, client i sending lines[i % 2].
 * Returns the 200s; fails on any answer but 200 and 409. */
static int run_clients(int id0, int requests, const char *const lines[2])
{
    pthread_t t[CLIENTS];
    struct client c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].instance = i % 2;
        c[i].requests = requests;
        c[i].id = id0 + i;
        snprintf(c[i].lines, sizeof(c[i].lines), "%s", lines[(i / 2) % 2]);
        assert_int_equal(pthread_create(&t[i], NULL, client_run, &c[i]), 0);
    }
    int ok = 0, other = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        ok += c[i].ok;
        other += c[i].other;
    }
    assert_int_equal(other, 0);
    return ok;
}

/* Crossed carts {X:1, Y:2} and {Y:2, X:1} from both instances, more than
 * the stock: Y runs out first and every cart after it is refused whole.
 * Before the flusher drains, each SKU's audit is consistent (its pending
 * units count only its own lines); after, exact. */
static void test_crossed_carts(void **state)
{
    assert_int_equal(it_seed("Rc-X", 30), 200);
    assert_int_equal(it_seed("Rc-Y", 20), 200);
    const char *const lines[2] = {"{\"sku\":\"Rc-X\",\"qty\":1},{\"sku\":\"Rc-Y\",\"qty\":2}",
                                  "{\"sku\":\"Rc-Y\",\"qty\":2},{\"sku\":\"Rc-X\",\"qty\":1}"};
    int ok = run_clients(100, 6, lines);
    print_message("crossed carts: %d of %d sold\n", ok, CLIENTS * 6);
    assert_int_equal(ok, 10);  /* Y: 20 units, 2 per cart */
    struct it_audit a;
    assert_int_equal(it_audit("Rc-X", &a), 0);
    assert_true(a.consistent);
    assert_int_equal(it_audit("Rc-Y", &a), 0);
    assert_true(a.consistent);
    assert_exact("Rc-X", 30, ok, ok);
    assert_exact("Rc-Y", 20, 2L * ok, ok);
}

/* The same SKU twice in one cart, on both instances at once: the lines are
 * summed before the check, so stock 5 sells two carts of 2 and refuses
 * the rest (one unit left), never a third. */
static void test_same_sku_twice(void **state)
{
    assert_int_equal(it_seed("Rc-S", 5), 200);
    const char *const lines[2] = {"{\"sku\":\"Rc-S\",\"qty\":1},{\"sku\":\"Rc-S\",\"qty\":1}",
                                  "{\"sku\":\"Rc-S\",\"qty\":1},{\"sku\":\"Rc-S\",\"qty\":1}"};
    int ok = run_clients(200, 4, lines);
    print_message("same SKU twice: %d of %d sold\n", ok, CLIENTS * 4);
    assert_int_equal(ok, 2);
    assert_exact("Rc-S", 5, 4, 4);
}

/* Every short SKU named with what it asked (its lines summed) and what it
 * has; nothing taken from the SKUs that had enough. */
static void test_short_lines(void **state)
{
    assert_int_equal(it_seed("Rc-A", 5), 200);
    assert_int_equal(it_seed("Rc-B", 1), 200);
    assert_int_equal(it_seed("Rc-C", 9), 200);
    assert_int_equal(it_seed("Rc-D", 0), 200);
    struct it_resp r;
    long st = deduct(0, "{\"lines\":[{\"sku\":\"Rc-A\",\"qty\":2},{\"sku\":\"Rc-B\",\"qty\":2},"
                     "{\"sku\":\"Rc-C\",\"qty\":3},{\"sku\":\"Rc-D\",\"qty\":1},"
                     "{\"sku\":\"Rc-A\",\"qty\":4}],\"guard\":\"redis-stream\"}", &r);
    print_message("short: %ld %s\n", st, r.body);
    assert_int_equal(st, 409);
    json_t *sh = json_object_get(r.json, "short");
    assert_int_equal(json_array_size(sh), 3);
    const char *want[3] = {"Rc-A", "Rc-B", "Rc-D"};
    long long req[3] = {6, 2, 1}, avail[3] = {5, 1, 0};
    for (size_t i = 0; i < 3; i++) {
        json_t *e = json_array_get(sh, i);
        assert_string_equal(json_string_value(json_object_get(e, "sku")), want[i]);
        assert_int_equal(json_integer_value(json_object_get(e, "requested")), req[i]);
        assert_int_equal(json_integer_value(json_object_get(e, "available")), avail[i]);
    }
    it_resp_free(&r);
    assert_int_equal(redis_stock("Rc-C"), 9);
    assert_exact("Rc-A", 5, 0, 0);
    assert_exact("Rc-C", 9, 0, 0);
}

static long long line_remaining(const struct it_resp *r, size_t i)
{
    return json_integer_value(json_object_get(json_array_get(json_object_get(r->json, "lines"), i),
                                              "remaining"));
}

/* A repeat of a cart answers its first answer (from Redis's memory, and
 * from the ledger once flushed), on either instance; other lines or a
 * single sale under its order_id are a conflict. The ledger has one row
 * per line; a release gives every line back in MySQL and Redis. */
static void test_repeats_and_release(void **state)
{
    assert_int_equal(it_seed("Rc-P", 10), 200);
    assert_int_equal(it_seed("Rc-Q", 10), 200);
    const char *body = "{\"lines\":[{\"sku\":\"Rc-P\",\"qty\":2},{\"sku\":\"Rc-Q\",\"qty\":3},"
                       "{\"sku\":\"Rc-P\",\"qty\":1}],\"guard\":\"redis-stream\","
                       "\"order_id\":\"rc-rep-1\"}";
    struct it_resp r;
    assert_int_equal(deduct(0, body, &r), 200);
    print_message("sold: %s\n", r.body);
    assert_int_equal(line_remaining(&r, 0), 8);
    assert_int_equal(line_remaining(&r, 1), 7);
    assert_int_equal(line_remaining(&r, 2), 7);
    it_resp_free(&r);
    for (int pass = 0; pass < 2; pass++) {   /* before and after the flush */
        assert_int_equal(deduct(1, body, &r), 200);
        print_message("repeat %d: %s\n", pass, r.body);
        assert_true(json_is_true(json_object_get(r.json, "duplicate")));
        assert_int_equal(line_remaining(&r, 0), 8);
        assert_int_equal(line_remaining(&r, 2), 7);
        it_resp_free(&r);
        assert_int_equal(deduct(pass, "{\"lines\":[{\"sku\":\"Rc-P\",\"qty\":2}],"
                         "\"guard\":\"redis-stream\",\"order_id\":\"rc-rep-1\"}", &r), 409);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                            "order_id_conflict");
        it_resp_free(&r);
        assert_int_equal(deduct(1 - pass, "{\"sku\":\"Rc-P\",\"qty\":2,"
                         "\"guard\":\"redis-stream\",\"order_id\":\"rc-rep-1\"}", &r), 409);
        print_message("single sale under the cart's id: %s\n", r.body);
        it_resp_free(&r);
        if (pass == 0)
            drain("Rc-P");
    }
    assert_exact("Rc-P", 10, 3, 2);
    assert_exact("Rc-Q", 10, 3, 1);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE "
                                  "order_id='rc-rep-1' AND line IN (0, 1, 2)"), 3);
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[1]);
    long st = it_http("POST", url, "{\"order_id\":\"rc-rep-1\"}", &r);
    print_message("release: %ld %s\n", st, r.body);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "lines")), 3);
    it_resp_free(&r);
    assert_int_equal(redis_stock("Rc-P"), 10);
    assert_int_equal(redis_stock("Rc-Q"), 10);
    struct it_audit a;
    assert_int_equal(it_audit("Rc-P", &a), 0);
    assert_true(a.consistent);
    assert_int_equal(a.stock, 10);
    assert_int_equal(it_audit("Rc-Q", &a), 0);
    assert_true(a.consistent);
    assert_int_equal(a.stock, 10);
}

/* What one script cannot do for a cart is refused, nothing taken. */
static void test_refused_options(void **state)
{
    assert_int_equal(it_seed("Rc-O", 4), 200);
    const char *bad[] = {
        "{\"lines\":[{\"sku\":\"Rc-O\",\"qty\":1}],\"guard\":\"redis-stream\","
        "\"replicas_ack\":1}",
        "{\"lines\":[{\"sku\":\"Rc-O\",\"qty\":1}],\"guard\":\"redis-stream\","
        "\"line_check\":\"per-line\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct it_resp r;
        long st = deduct((int)i, bad[i], &r);
        print_message("%ld %s\n", st, r.body);
        assert_int_equal(st, 400);
        it_resp_free(&r);
    }
    assert_exact("Rc-O", 4, 0, 0);
}

/* Entries read by `consumer` and not acknowledged yet (-1 unreadable). */
static long long consumer_pending(const char *consumer)
{
    redisContext *c = it_redis_connect(2000);
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "XPENDING lab:sales flushers - + 1000 %s", consumer);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* The order_id of the first entry `consumer` read and has not flushed;
 * 0 when found. */
static int held_order(const char *consumer, char *out, size_t outlen)
{
    redisContext *c = it_redis_connect(2000);
    int rc = -1;
    if (!c)
        return -1;
    redisReply *p = redisCommand(c, "XPENDING lab:sales flushers - + 1 %s", consumer);
    if (p && p->type == REDIS_REPLY_ARRAY && p->elements == 1 &&
        p->element[0]->type == REDIS_REPLY_ARRAY && p->element[0]->elements >= 1) {
        const char *id = p->element[0]->element[0]->str;
        redisReply *e = redisCommand(c, "XRANGE lab:sales %s %s", id, id);
        if (e && e->type == REDIS_REPLY_ARRAY && e->elements == 1) {
            const redisReply *kv = e->element[0]->element[1];
            for (size_t k = 0; rc != 0 && k + 1 < kv->elements; k += 2)
                if (strcmp(kv->element[k]->str, "o") == 0) {
                    snprintf(out, outlen, "%s", kv->element[k + 1]->str);
                    rc = 0;
                }
        }
        freeReplyObject(e);
    }
    freeReplyObject(p);
    redisFree(c);
    return rc;
}

/* An instance whose flusher holds every batch (--stream-hold) reads cart
 * entries and is killed -9: a release of such a cart is refused while it
 * is queued (its lines' SKUs have sales queued), another instance's
 * flusher takes the entries over, every line of every answered cart lands
 * once (one row per line), and the release then gives every line back. */
static void test_killed_flusher_carts(void **state)
{
    long base = it_port_base();
    static const char *const args[] = {"--threads", "4", "--stream-hold", "60s", NULL};
    int pid = it_start_inventory("inventory-cart-held", base + 43, NULL, args);
    assert_true(pid > 0);
    char h[200];
    snprintf(h, sizeof(h), "http://127.0.0.1:%ld/healthz", base + 43);
    if (it_wait_status(h, 200, 30000) != 0) {
        it_kill(pid, SIGKILL, 2000);
        fail_msg("the held instance did not come up");
    }
    assert_int_equal(it_seed("Rc-K1", 1000), 200);
    assert_int_equal(it_seed("Rc-K2", 1000), 200);
    const char *const lines[2] = {"{\"sku\":\"Rc-K1\",\"qty\":1},{\"sku\":\"Rc-K2\",\"qty\":2}",
                                  "{\"sku\":\"Rc-K2\",\"qty\":2},{\"sku\":\"Rc-K1\",\"qty\":1}"};
    int ok = 0;
    for (int round = 0; round < 40 && consumer_pending("inventory-cart-held") <= 0; round++) {
        ok += run_clients(1000 + round * CLIENTS, 2, lines);
        nap_ms(150);
    }
    char order[80] = "", body[128], rel[200];
    int found = held_order("inventory-cart-held", order, sizeof(order));
    snprintf(body, sizeof(body), "{\"order_id\":\"%s\"}", order);
    snprintf(rel, sizeof(rel), "%s/inventory/release", it.inventory[0]);
    struct it_resp r;
    long early = found == 0 ? it_http("POST", rel, body, &r) : 0;
    int said_queued = found == 0 && strstr(r.body, "still queued for MySQL") != NULL;
    if (found == 0)
        it_resp_free(&r);
    it_kill(pid, SIGKILL, 5000);
    print_message("answered %d carts; release of held %s: %ld\n", ok, order, early);
    assert_int_equal(found, 0);
    assert_int_equal(early, 503);
    assert_true(said_queued);
    assert_exact("Rc-K1", 1000, ok, ok);
    assert_exact("Rc-K2", 1000, 2L * ok, ok);
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='%s' "
             "AND ((line = 0 AND qty IN (1, 2)) OR (line = 1 AND qty IN (1, 2)))", order);
    assert_int_equal(it_sql_value(sql), 2);
    long st = it_http("POST", rel, body, &r);
    print_message("release once flushed: %ld %s\n", st, r.body);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "lines")), 2);
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit("Rc-K1", &a), 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, ok - 1);
    assert_int_equal(redis_stock("Rc-K1"), a.stock);
    assert_int_equal(it_audit("Rc-K2", &a), 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, 2L * (ok - 1));
    assert_int_equal(redis_stock("Rc-K2"), a.stock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crossed_carts),
        cmocka_unit_test(test_same_sku_twice),
        cmocka_unit_test(test_short_lines),
        cmocka_unit_test(test_repeats_and_release),
        cmocka_unit_test(test_refused_options),
        cmocka_unit_test(test_killed_flusher_carts),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
