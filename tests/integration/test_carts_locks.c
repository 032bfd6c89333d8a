/* Carts under the lock guards (redis-lock, redlock, lock-table, zookeeper,
 * etcd), on 2 instances: every SKU's lock taken in sorted SKU order, the
 * lines sold in one MySQL transaction while all are held. Crossed carts
 * {A,B}/{B,A} then never wait on each other (0 lock timeouts); taken in
 * the cart's order (lock_order "as-given") they do. A lock not obtained
 * releases the ones taken and sells nothing. Every test ends on an audit. */
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

static int group_setup(void **state) { return it_setup(); }

static const char *const lock_guards[] = {"redis-lock", "redlock", "lock-table", "zookeeper",
                                          "etcd"};
#define NLOCK (sizeof(lock_guards) / sizeof(lock_guards[0]))

static long deduct(int i, const char *body, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[i]);
    return it_http("POST", url, body, r);
}

static void assert_exact(const char *sku, long long sold, long long stock)
{
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-16s initial %lld sold %lld stock %lld oversold %lld lost %lld\n", sku,
                  a.initial, a.sold, a.stock, a.oversold, a.lost_updates);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, sold);
    assert_int_equal(a.stock, stock);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double timeouts(void)
{
    double a = it_metric(0, "lab_lock_timeouts_total"), b = it_metric(1, "lab_lock_timeouts_total");
    return (a < 0 ? 0 : a) + (b < 0 ? 0 : b);
}

struct client {
    const char *guard, *x, *y, *extra;
    int instance, reverse, requests, base;
    long hold_ms, lock_wait_ms;
    int ok, refused, timed_out;
};

static void *client_run(void *arg)
{
    struct client *c = arg;
    for (int i = 0; i < c->requests; i++) {
        char body[512];
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":1}],"
                 "\"guard\":\"%s\",\"hold_ms\":%ld,\"lock_wait_ms\":%ld,"
                 "\"order_id\":\"cl-%s-%d-%d\"%s}",
                 c->reverse ? c->y : c->x, c->reverse ? c->x : c->y, c->guard, c->hold_ms,
                 c->lock_wait_ms, c->guard, c->base, i, c->extra);
        struct it_resp r;
        long st = deduct(c->instance, body, &r);
        const char *err = json_string_value(json_object_get(r.json, "error"));
        c->ok += st == 200;
        c->refused += st == 409;
        c->timed_out += err && strcmp(err, "lock_timeout") == 0;
        if (st != 200 && st != 409 && !(err && strcmp(err, "lock_timeout") == 0))
            print_message("  %s %ld %.240s\n", c->guard, st, r.body);
        it_resp_free(&r);
    }
    return NULL;
}

#define CLIENTS 4

/* CLIENTS clients on 2 instances, half of them {x,y}, half {y,x}. Returns
 * the 200s; *lock_timeouts gets the lock timeouts the instances counted. */
static int run_clients(const char *guard, const char *x, const char *y, const char *extra,
                       int base, int requests, long hold_ms, long wait_ms, double *lock_timeouts)
{
    double before = timeouts();
    pthread_t t[CLIENTS];
    struct client c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = (struct client){guard, x, y, extra, i % 2, (i / 2) % 2, requests,
                               base * 100 + i, hold_ms, wait_ms, 0, 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, client_run, &c[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        ok += c[i].ok;
    }
    *lock_timeouts = timeouts() - before;
    return ok;
}

/* Crossed carts under every lock guard: as-given they wait on each other
 * (lock timeouts, the variant's defect), sorted never; audit exact. */
static void test_crossed_lock_carts(void **state)
{
    for (size_t g = 0; g < NLOCK; g++) {
        char x[32], y[32];
        snprintf(x, sizeof(x), "LX-%zu", g);
        snprintf(y, sizeof(y), "LY-%zu", g);
        double to;
        assert_int_equal(it_seed(x, 1000), 200);
        assert_int_equal(it_seed(y, 1000), 200);
        int ok = run_clients(lock_guards[g], x, y, ",\"lock_order\":\"as-given\"", 1, 4, 200,
                             300, &to);
        print_message("%s as-given: %d of %d sold, %.0f lock timeouts\n", lock_guards[g], ok,
                      CLIENTS * 4, to);
        assert_exact(x, ok, 1000 - ok);
        assert_exact(y, ok, 1000 - ok);
        assert_true(to > 0);                  /* the variant's defect: broke */

        assert_int_equal(it_seed(x, 1000), 200);
        assert_int_equal(it_seed(y, 1000), 200);
        ok = run_clients(lock_guards[g], x, y, "", 2, 6, 20, 5000, &to);
        print_message("%s sorted: %d of %d sold, %.0f lock timeouts\n", lock_guards[g], ok,
                      CLIENTS * 6, to);
        assert_true(to == 0);
        assert_int_equal(ok, CLIENTS * 6);
        assert_exact(x, ok, 1000 - ok);
        assert_exact(y, ok, 1000 - ok);
    }
}

/* The same SKU on two lines of every cart, racing from 2 instances for 11
 * units: each cart asks for 2 (summed), 5 carts sell, never a sixth. */
static void test_same_sku_twice_under_load(void **state)
{
    for (size_t g = 0; g < NLOCK; g++) {
        char s[32];
        snprintf(s, sizeof(s), "LTwice-%zu", g);
        assert_int_equal(it_seed(s, 11), 200);
        double to;
        int ok = run_clients(lock_guards[g], s, s, "", 3, 4, 0, 5000, &to);
        print_message("%s {S:1,S:1} x %d on 11: %d sold\n", lock_guards[g], CLIENTS * 4, ok);
        assert_int_equal(ok, 5);
        assert_exact(s, 10, 1);
    }
}

/* A short line refuses the whole cart and names every short line. */
static void test_short_lines(void **state)
{
    for (size_t g = 0; g < NLOCK; g++) {
        char a[32], b[32], c[32], body[512];
        snprintf(a, sizeof(a), "LShort-a-%zu", g);
        snprintf(b, sizeof(b), "LShort-b-%zu", g);
        snprintf(c, sizeof(c), "LShort-c-%zu", g);
        assert_int_equal(it_seed(a, 5), 200);
        assert_int_equal(it_seed(b, 1), 200);
        assert_int_equal(it_seed(c, 0), 200);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":2},"
                 "{\"sku\":\"%s\",\"qty\":2}],\"guard\":\"%s\"}", c, a, b, lock_guards[g]);
        struct it_resp r;
        long st = deduct((int)(g % 2), body, &r);
        print_message("%s: %ld %s\n", lock_guards[g], st, r.body);
        assert_int_equal(st, 409);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")), "out_of_stock");
        json_t *shortl = json_object_get(r.json, "short");
        assert_int_equal(json_array_size(shortl), 2);
        int seen = 0;
        for (size_t i = 0; i < 2; i++) {
            const char *k = json_string_value(json_object_get(json_array_get(shortl, i), "sku"));
            seen += strcmp(k, b) == 0 || strcmp(k, c) == 0;
        }
        assert_int_equal(seen, 2);
        it_resp_free(&r);
        assert_exact(a, 0, 5);
        assert_exact(b, 0, 1);
        assert_exact(c, 0, 0);
    }
}

struct holder {
    const char *guard, *sku;
    long hold_ms;
    long status;
    int instance;
};

static void *hold_one(void *arg)
{
    struct holder *h = arg;
    char body[256];
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"qty\":1,\"guard\":\"%s\",\"hold_ms\":%ld,"
             "\"lock_wait_ms\":3000}", h->sku, h->guard, h->hold_ms);
    struct it_resp r;
    h->status = deduct(h->instance, body, &r);
    it_resp_free(&r);
    return NULL;
}

/* B's lock held by a slow single sale: the cart {A,B} times out on B,
 * sells nothing, and gives A's lock back at once (a sale of A right after
 * needs no wait). Fencing is refused for carts. */
static void test_lock_not_obtained_sells_nothing(void **state)
{
    for (size_t g = 0; g < NLOCK; g++) {
        char a[32], b[32], body[512];
        snprintf(a, sizeof(a), "LWait-a-%zu", g);
        snprintf(b, sizeof(b), "LWait-b-%zu", g);
        assert_int_equal(it_seed(a, 10), 200);
        assert_int_equal(it_seed(b, 10), 200);
        struct holder h = {lock_guards[g], b, 1500, 0, 1};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, hold_one, &h), 0);
        struct timespec nap = {0, 300 * 1000000L};
        nanosleep(&nap, NULL);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":1}],"
                 "\"guard\":\"%s\",\"lock_wait_ms\":300}", a, b, lock_guards[g]);
        struct it_resp r;
        long st = deduct(0, body, &r);
        print_message("%s cart vs held lock: %ld %s\n", lock_guards[g], st, r.body);
        assert_int_equal(st, 503);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")), "lock_timeout");
        it_resp_free(&r);
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"qty\":1,\"guard\":\"%s\","
                 "\"lock_wait_ms\":300}", a, lock_guards[g]);
        st = deduct(0, body, &r);
        print_message("%s single sale of A: %ld %s\n", lock_guards[g], st, r.body);
        assert_int_equal(st, 200);
        it_resp_free(&r);
        pthread_join(t, NULL);
        assert_int_equal(h.status, 200);
        assert_exact(a, 1, 9);
        assert_exact(b, 1, 9);

        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1}],\"guard\":\"%s\",\"fencing\":true}",
                 a, lock_guards[g]);
        st = deduct(1, body, &r);
        print_message("%s fencing: %ld %s\n", lock_guards[g], st, r.body);
        assert_int_equal(st, 400);
        assert_non_null(strstr(r.body, "fencing"));
        it_resp_free(&r);
        assert_exact(a, 1, 9);
    }
}

/* A release of a cart takes every line's lock (mutex: every stripe, in
 * its own process): with B's lock held by a slow sale, the release of
 * {A,B} waits for it, then answers every line; audit exact. */
static void test_release_takes_every_lock(void **state)
{
    static const char *const guards[] = {"mutex", "redis-lock", "redlock", "lock-table",
                                         "zookeeper", "etcd"};
    for (size_t g = 0; g < sizeof(guards) / sizeof(guards[0]); g++) {
        char a[32], b[32], id[32], body[512], url[256];
        snprintf(a, sizeof(a), "LRel-a-%zu", g);
        snprintf(b, sizeof(b), "LRel-b-%zu", g);
        snprintf(id, sizeof(id), "lrel-%zu", g);
        assert_int_equal(it_seed(a, 10), 200);
        assert_int_equal(it_seed(b, 10), 200);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":2},{\"sku\":\"%s\",\"qty\":3}],"
                 "\"guard\":\"%s\",\"order_id\":\"%s\"}", b, a, guards[g], id);
        struct it_resp r;
        assert_int_equal(deduct(0, body, &r), 200);
        it_resp_free(&r);
        struct holder h = {guards[g], b, 1200, 0, 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, hold_one, &h), 0);
        struct timespec nap = {0, 200 * 1000000L};
        nanosleep(&nap, NULL);
        snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[0]);
        snprintf(body, sizeof(body), "{\"order_id\":\"%s\"}", id);
        double t0 = now_s();
        long st = it_http("POST", url, body, &r);
        double took = now_s() - t0;
        print_message("%s release under a held lock: %ld after %.0f ms %s\n", guards[g], st,
                      took * 1000, r.body);
        assert_int_equal(st, 200);
        json_t *lines = json_object_get(r.json, "lines");
        assert_int_equal(json_array_size(lines), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(lines, 1), "sku")),
                            a);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 1), "qty")), 3);
        it_resp_free(&r);
        assert_true(took > 0.6);              /* it waited for B's holder */
        pthread_join(t, NULL);
        assert_int_equal(h.status, 200);
        assert_exact(a, 0, 10);
        assert_exact(b, 1, 9);
    }
}

/* mutex's stripe of a SKU, as lib/guards/guard_mutex.c computes it. */
static unsigned mutex_stripe(const char *sku)
{
    unsigned h = 2166136261u;
    for (; *sku; sku++)
        h = (h ^ (unsigned char)*sku) * 16777619u;
    return h % 256;
}

struct cart_sale {
    const char *a, *b;
    long status;
    char body[256];
};

static void *slow_mutex_cart(void *arg)
{
    struct cart_sale *s = arg;
    char body[512];
    snprintf(body, sizeof(body),
             "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":1}],"
             "\"guard\":\"mutex\",\"hold_ms\":1200,\"lock_wait_ms\":3000}", s->a, s->b);
    struct it_resp r;
    s->status = deduct(0, body, &r);
    snprintf(s->body, sizeof(s->body), "%.200s", r.body);
    it_resp_free(&r);
    return NULL;
}

/* A mutex cart sale and the release of a cart order crossing in one
 * process: SKUs a < b whose stripes go the other way. Both take the
 * stripes in one order, so the release waits for the sale, and neither
 * runs out its lock wait; audit exact. */
static void test_mutex_sale_and_release_cross(void **state)
{
    char a[32], b[32], body[512], url[256];
    for (int i = 0;; i++) {
        snprintf(a, sizeof(a), "LMx-a-%d", i);
        snprintf(b, sizeof(b), "LMx-b-%d", i);
        if (mutex_stripe(a) > mutex_stripe(b))
            break;
    }
    assert_int_equal(it_seed(a, 10), 200);
    assert_int_equal(it_seed(b, 10), 200);
    snprintf(body, sizeof(body),
             "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":1}],"
             "\"guard\":\"mutex\",\"order_id\":\"lmx-1\"}", a, b);
    struct it_resp r;
    assert_int_equal(deduct(0, body, &r), 200);
    it_resp_free(&r);
    struct cart_sale sale = {a, b, 0, ""};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_mutex_cart, &sale), 0);
    struct timespec nap = {0, 250 * 1000000L};
    nanosleep(&nap, NULL);     /* the sale holds b's stripe, sleeping */
    snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[0]);
    double t0 = now_s();
    long st = it_http("POST", url, "{\"order_id\":\"lmx-1\"}", &r);
    double took = now_s() - t0;
    print_message("mutex release crossing a cart sale: %ld after %.0f ms %s\n", st,
                  took * 1000, r.body);
    it_resp_free(&r);
    pthread_join(t, NULL);
    print_message("the crossing sale: %ld %s\n", sale.status, sale.body);
    assert_int_equal(st, 200);
    assert_int_equal(sale.status, 200);
    assert_exact(a, 1, 9);
    assert_exact(b, 1, 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crossed_lock_carts),
        cmocka_unit_test(test_same_sku_twice_under_load),
        cmocka_unit_test(test_short_lines),
        cmocka_unit_test(test_lock_not_obtained_sells_nothing),
        cmocka_unit_test(test_release_takes_every_lock),
        cmocka_unit_test(test_mutex_sale_and_release_cross),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
