/* Carts: one order of several lines, sold all or nothing by the guards
 * that decide in MySQL (for-update, conditional-update, optimistic,
 * batched-update; none and mutex, whose read-modify-write still races
 * across instances on purpose) and by the lock guards (their locks nested,
 * sorted: test_carts_locks.c), on 2 instances.
 * Each field defect is shown by its variant first (line_check:"per-line":
 * the same SKU twice oversells; lock_order:"as-given": crossed carts
 * deadlock), then the safe default holds. Every test ends on an audit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
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

static struct it_audit audit_of(const char *sku)
{
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-14s initial %lld sold %lld stock %lld oversold %lld lost %lld\n", sku,
                  a.initial, a.sold, a.stock, a.oversold, a.lost_updates);
    return a;
}

static void assert_exact(const char *sku, long long sold, long long stock)
{
    struct it_audit a = audit_of(sku);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, sold);
    assert_int_equal(a.stock, stock);
}

/* Apply every sql/ file, as deploy/local/stack does; 0 when all applied. */
static int apply_sql_files(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "for f in '%s'/sql/*.sql; do mariadb --no-defaults -h127.0.0.1 -P%ld -uroot "
             "< \"$f\" || exit 1; done >/dev/null 2>&1", it.root, it.mysql_port);
    return system(cmd);
}

static long long ledger_schema(const char *what, const char *name)
{
    char q[400];
    snprintf(q, sizeof(q),
             "SELECT COUNT(*) FROM information_schema.%s WHERE table_schema='db_shopping' "
             "AND table_name='ledger' AND %s='%s'", what,
             strcmp(what, "columns") == 0 ? "column_name" : "index_name", name);
    return it_sql_value(q);
}

/* A database from before carts (order_id unique alone, no line) is
 * upgraded by sql/ in place, and applying sql/ again changes nothing. */
static void test_ledger_migration(void **state)
{
    assert_int_equal(it_seed("Mig-1", 5), 200);
    assert_int_equal(it_sql("ALTER TABLE db_shopping.ledger DROP KEY uq_ledger_order_line, "
                            "DROP COLUMN line, ADD UNIQUE KEY uq_ledger_order (order_id)"), 0);
    assert_int_equal(ledger_schema("columns", "line"), 0);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(apply_sql_files(), 0);
        assert_int_equal(ledger_schema("columns", "line"), 1);
        assert_int_equal(ledger_schema("statistics", "uq_ledger_order"), 0);
        /* a two-column key: one row per column in information_schema */
        assert_int_equal(ledger_schema("statistics", "uq_ledger_order_line"), 2);
    }
    struct it_resp r;
    assert_int_equal(deduct(0, "{\"lines\":[{\"sku\":\"Mig-1\",\"qty\":1},"
                               "{\"sku\":\"Mig-1\",\"qty\":2}],\"guard\":\"for-update\"}", &r),
                     200);
    it_resp_free(&r);
    assert_exact("Mig-1", 3, 2);
}

static const char *const cart_guards[] = {"for-update", "conditional-update", "optimistic",
                                          "none",       "mutex",      "redis-lock",
                                          "redlock",    "lock-table", "zookeeper",
                                          "etcd",       "batched-update"};
#define NGUARDS (sizeof(cart_guards) / sizeof(cart_guards[0]))

/* The same SKU on two lines, 1 unit in stock. Checked line by line against
 * one read, each line passes and the cart sells 2 (the variant breaks);
 * summed first, the cart asks for 2 and is refused (the default holds). */
static void test_same_sku_twice(void **state)
{
    for (size_t g = 0; g < NGUARDS; g++) {
        char sku[32], body[400];
        struct it_resp r;
        snprintf(sku, sizeof(sku), "Twice-per-%zu", g);
        assert_int_equal(it_seed(sku, 1), 200);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":1}],"
                 "\"guard\":\"%s\",\"line_check\":\"per-line\"}", sku, sku, cart_guards[g]);
        long st = deduct((int)(g % 2), body, &r);
        print_message("%s per-line: %ld %s\n", cart_guards[g], st, r.body);
        it_resp_free(&r);
        struct it_audit a = audit_of(sku);
        assert_int_equal(st, 200);
        assert_int_equal(a.oversold, 1);      /* the variant's defect: broke */

        snprintf(sku, sizeof(sku), "Twice-sum-%zu", g);
        assert_int_equal(it_seed(sku, 1), 200);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":1}],"
                 "\"guard\":\"%s\"}", sku, sku, cart_guards[g]);
        st = deduct((int)(g % 2), body, &r);
        print_message("%s summed: %ld %s\n", cart_guards[g], st, r.body);
        assert_int_equal(st, 409);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")), "out_of_stock");
        json_t *shortl = json_object_get(r.json, "short");
        assert_int_equal(json_array_size(shortl), 1);
        json_t *s0 = json_array_get(shortl, 0);
        assert_string_equal(json_string_value(json_object_get(s0, "sku")), sku);
        assert_int_equal(json_integer_value(json_object_get(s0, "requested")), 2);
        assert_int_equal(json_integer_value(json_object_get(s0, "available")), 1);
        it_resp_free(&r);
        assert_exact(sku, 0, 1);
    }
}

/* A cart with short lines and a line that would fit sells nothing and
 * names every short line. */
static void test_short_line_sells_nothing(void **state)
{
    for (size_t g = 0; g < NGUARDS; g++) {
        char a[32], b[32], c[32], body[512];
        snprintf(a, sizeof(a), "Short-a-%zu", g);
        snprintf(b, sizeof(b), "Short-b-%zu", g);
        snprintf(c, sizeof(c), "Short-c-%zu", g);
        assert_int_equal(it_seed(a, 5), 200);
        assert_int_equal(it_seed(b, 1), 200);
        assert_int_equal(it_seed(c, 0), 200);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":2},{\"sku\":\"%s\",\"qty\":2},"
                 "{\"sku\":\"%s\",\"qty\":1}],\"guard\":\"%s\"}", a, b, c, cart_guards[g]);
        struct it_resp r;
        long st = deduct((int)(g % 2), body, &r);
        print_message("%s: %ld %s\n", cart_guards[g], st, r.body);
        assert_int_equal(st, 409);
        /* b (2 of 1) and c (1 of 0) are short; a (2 of 5) is not */
        json_t *shortl = json_object_get(r.json, "short");
        assert_int_equal(json_array_size(shortl), 2);
        int seen_b = 0, seen_c = 0;
        for (size_t i = 0; i < 2; i++) {
            json_t *s = json_array_get(shortl, i);
            const char *k = json_string_value(json_object_get(s, "sku"));
            long long req = json_integer_value(json_object_get(s, "requested"));
            long long av = json_integer_value(json_object_get(s, "available"));
            seen_b += strcmp(k, b) == 0 && req == 2 && av == 1;
            seen_c += strcmp(k, c) == 0 && req == 1 && av == 0;
        }
        assert_int_equal(seen_b, 1);
        assert_int_equal(seen_c, 1);
        it_resp_free(&r);
        assert_exact(a, 0, 5);
        assert_exact(b, 0, 1);
        assert_exact(c, 0, 0);
        /* Once every line fits, the cart sells every line. */
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":2},{\"sku\":\"%s\",\"qty\":1}],"
                 "\"guard\":\"%s\",\"order_id\":\"fits-%zu\"}", a, b, cart_guards[g], g);
        st = deduct(1 - (int)(g % 2), body, &r);
        print_message("%s: %ld %s\n", cart_guards[g], st, r.body);
        assert_int_equal(st, 200);
        json_t *lines = json_object_get(r.json, "lines");
        assert_int_equal(json_array_size(lines), 2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 0),
                                                            "remaining")), 3);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 1),
                                                            "remaining")), 0);
        it_resp_free(&r);
        assert_exact(a, 2, 3);
        assert_exact(b, 1, 0);
    }
}

/* The order id is the idempotency key of the whole cart: a repeat (on the
 * other instance) answers the first sale, other lines under it are a
 * conflict, and the ledger keeps one row per line. */
static void test_repeat_is_duplicate(void **state)
{
    for (size_t g = 0; g < NGUARDS; g++) {
        char a[32], b[32], id[32], body[512];
        snprintf(a, sizeof(a), "Rep-a-%zu", g);
        snprintf(b, sizeof(b), "Rep-b-%zu", g);
        snprintf(id, sizeof(id), "cart-rep-%zu", g);
        assert_int_equal(it_seed(a, 10), 200);
        assert_int_equal(it_seed(b, 10), 200);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":3},"
                 "{\"sku\":\"%s\",\"qty\":2}],\"guard\":\"%s\",\"order_id\":\"%s\"}",
                 b, a, b, cart_guards[g], id);
        struct it_resp r;
        assert_int_equal(deduct(0, body, &r), 200);
        assert_null(json_object_get(r.json, "duplicate"));
        it_resp_free(&r);
        long st = deduct(1, body, &r);
        print_message("%s repeat: %ld %s\n", cart_guards[g], st, r.body);
        assert_int_equal(st, 200);
        assert_true(json_is_true(json_object_get(r.json, "duplicate")));
        json_t *lines = json_object_get(r.json, "lines");
        assert_int_equal(json_array_size(lines), 3);
        /* per line, the stock after that line: b 10-1, a 10-3, b 9-2 */
        assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 0),
                                                            "remaining")), 9);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 1),
                                                            "remaining")), 7);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 2),
                                                            "remaining")), 7);
        it_resp_free(&r);
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":1}],"
                 "\"guard\":\"%s\",\"order_id\":\"%s\"}", b, a, cart_guards[g], id);
        st = deduct(0, body, &r);
        assert_int_equal(st, 409);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                            "order_id_conflict");
        it_resp_free(&r);
        /* A single-SKU sale is a cart of one line: even its first line
         * alone is another sale than the whole cart, under any guard. */
        static const char *const single_guards[] = {"for-update", "redis-decr", "mutex"};
        for (size_t k = 0; k < 6; k++) {   /* qty 1: line 0's, qty 2: line 2's */
            snprintf(body, sizeof(body),
                     "{\"sku\":\"%s\",\"qty\":%zu,\"guard\":\"%s\",\"order_id\":\"%s\"}",
                     b, 1 + k / 3, single_guards[k % 3], id);
            st = deduct((int)(k % 2), body, &r);
            print_message("single form, %s: %ld %s\n", single_guards[k % 3], st, r.body);
            assert_int_equal(st, 409);
            assert_string_equal(json_string_value(json_object_get(r.json, "error")),
                                "order_id_conflict");
            it_resp_free(&r);
        }
        char q[160];
        snprintf(q, sizeof(q), "SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='%s'", id);
        assert_int_equal(it_sql_value(q), 3);
        assert_exact(a, 3, 7);
        assert_exact(b, 3, 7);
        /* A release gives every line back, once. */
        char url[256];
        snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[1]);
        snprintf(body, sizeof(body), "{\"order_id\":\"%s\"}", id);
        assert_int_equal(it_http("POST", url, body, &r), 200);
        print_message("release: %s\n", r.body);
        assert_null(json_object_get(r.json, "duplicate"));
        assert_int_equal(json_array_size(json_object_get(r.json, "lines")), 3);
        it_resp_free(&r);
        assert_int_equal(it_http("POST", url, body, &r), 200);
        assert_true(json_is_true(json_object_get(r.json, "duplicate")));
        it_resp_free(&r);
        assert_exact(a, 0, 10);
        assert_exact(b, 0, 10);
    }
}

/* Bad carts: a clear 400, nothing sold. */
static void test_bad_carts(void **state)
{
    assert_int_equal(it_seed("Bad-cart", 10), 200);
    char many[4096];
    size_t off = (size_t)snprintf(many, sizeof(many), "{\"lines\":[");
    for (int i = 0; i < 51; i++)
        off += (size_t)snprintf(many + off, sizeof(many) - off, "%s{\"sku\":\"Bad-cart\",\"qty\":1}",
                                i ? "," : "");
    snprintf(many + off, sizeof(many) - off, "],\"guard\":\"for-update\"}");
    const char *bad[] = {
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"sku\":\"Bad-cart\"}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"qty\":1}",
        "{\"lines\":[]}",
        "{\"lines\":{}}",
        "{\"lines\":[{\"sku\":\"Bad cart\",\"qty\":1}]}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":0}]}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1001}]}",
        "{\"lines\":[{\"sku\":\"Bad-cart\"}]}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1,\"price\":3}]}",
        "{\"lines\":[\"Bad-cart\"]}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"line_check\":\"sometimes\"}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"lock_order\":\"random\"}",
        "{\"sku\":\"Bad-cart\",\"line_check\":\"per-line\"}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"guard\":\"for-update\",\"colour\":1}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"guard\":\"redis-decr\"}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"guard\":\"redis-lock\",\"fencing\":true}",
        "{\"lines\":[{\"sku\":\"Bad-cart\",\"qty\":1}],\"guard\":\"mutex\",\"fencing\":true}",
        many,
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct it_resp r;
        long st = deduct((int)(i % 2), bad[i], &r);
        print_message("%ld %.300s\n", st, r.body);
        if (st != 400)
            fail_msg("%.200s answered %ld: %s", bad[i], st, r.body);
        assert_string_equal(json_string_value(json_object_get(r.json, "error")), "bad_request");
        it_resp_free(&r);
    }
    /* A guard without carts names the ones that take them. */
    struct it_resp r;
    deduct(0, bad[14], &r);
    assert_non_null(strstr(r.body, "for-update"));
    assert_non_null(strstr(r.body, "conditional-update"));
    it_resp_free(&r);
    assert_exact("Bad-cart", 0, 10);
    /* GET /guards says which guards take carts. */
    char url[256];
    snprintf(url, sizeof(url), "%s/guards", it.inventory[1]);
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    json_t *guards = json_object_get(r.json, "guards");
    int carts = 0;
    for (size_t i = 0; i < json_array_size(guards); i++) {
        json_t *g = json_array_get(guards, i);
        const char *name = json_string_value(json_object_get(g, "name"));
        int takes = json_is_true(json_object_get(g, "carts"));
        carts += takes;
        /* and redis-stream, whose carts wait for its flusher (their own
         * test: test_carts_redis.c) */
        int listed = strcmp(name, "redis-stream") == 0;
        for (size_t k = 0; k < NGUARDS; k++)
            listed |= strcmp(name, cart_guards[k]) == 0;
        if (takes != listed)
            fail_msg("GET /guards says %s %s carts", name, takes ? "sells" : "does not sell");
    }
    assert_int_equal(carts, (int)NGUARDS + 1);
    it_resp_free(&r);
}

/* Crossed carts {X, Y} and {Y, X} from 2 instances at once. */
struct crossed {
    int instance;
    int reverse;
    const char *extra;         /* the body's variant fields */
    int requests;
    int base;
    int ok, other;
    const char *guard;         /* NULL: for-update */
    const char *x, *y;         /* NULL: Cross-X, Cross-Y */
    long hold_ms;
    int reverse_qty;           /* qty of the reversed cart's second line */
    long lock_wait_ms;         /* 0: 3000 */
};

static void *crossed_client(void *arg)
{
    struct crossed *c = arg;
    const char *x = c->x ? c->x : "Cross-X", *y = c->y ? c->y : "Cross-Y";
    for (int i = 0; i < c->requests; i++) {
        char body[400];
        snprintf(body, sizeof(body),
                 "{\"lines\":[{\"sku\":\"%s\",\"qty\":1},{\"sku\":\"%s\",\"qty\":%d}],"
                 "\"guard\":\"%s\",\"hold_ms\":%ld,\"lock_wait_ms\":%ld,"
                 "\"order_id\":\"cross-%d-%d\"%s}",
                 c->reverse ? y : x, c->reverse ? x : y,
                 c->reverse && c->reverse_qty ? c->reverse_qty : 1,
                 c->guard ? c->guard : "for-update", c->guard ? c->hold_ms : 40,
                 c->lock_wait_ms ? c->lock_wait_ms : 3000, c->base, i,
                 c->extra);
        struct it_resp r;
        long st = deduct(c->instance, body, &r);
        c->ok += st == 200;
        c->other += st != 200;
        if (st != 200 && st != 409)
            print_message("  %ld %.200s\n", st, r.body);
        it_resp_free(&r);
    }
    return NULL;
}

#define CROSS_CLIENTS 6
#define CROSS_REQUESTS 8

/* Runs the crossed load; returns the deadlocks and lock wait timeouts the
 * two instances counted for for-update meanwhile; *ok gets the 200s. */
static double run_crossed(const char *extra, int base, int *ok)
{
    double before = it_metric(0, "lab_cart_conflicts_total") +
                    it_metric(1, "lab_cart_conflicts_total");
    pthread_t t[CROSS_CLIENTS];
    struct crossed c[CROSS_CLIENTS];
    for (int i = 0; i < CROSS_CLIENTS; i++) {
        c[i] = (struct crossed){i % 2, (i / 2) % 2, extra, CROSS_REQUESTS, base * 100 + i, 0, 0,
                                NULL, NULL, NULL, 0, 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, crossed_client, &c[i]), 0);
    }
    *ok = 0;
    for (int i = 0; i < CROSS_CLIENTS; i++) {
        pthread_join(t[i], NULL);
        *ok += c[i].ok;
    }
    double after = it_metric(0, "lab_cart_conflicts_total") +
                   it_metric(1, "lab_cart_conflicts_total");
    /* absent before the first conflict: -1 */
    return (after < 0 ? 0 : after) - (before < 0 ? 0 : before);
}

static void test_crossed_carts(void **state)
{
    int ok;
    assert_int_equal(it_seed("Cross-X", 1000), 200);
    assert_int_equal(it_seed("Cross-Y", 1000), 200);
    double as_given = run_crossed(",\"lock_order\":\"as-given\"", 1, &ok);
    print_message("lock_order as-given: %d of %d sold, %.0f deadlocks/lock timeouts\n", ok,
                  CROSS_CLIENTS * CROSS_REQUESTS, as_given);
    struct it_audit ax = audit_of("Cross-X"), ay = audit_of("Cross-Y");
    assert_int_equal(ax.oversold + ay.oversold, 0);
    assert_int_equal(ax.sold, ok);
    assert_int_equal(ay.sold, ok);
    assert_true(as_given > 0);                /* the variant's defect: broke */

    assert_int_equal(it_seed("Cross-X", 1000), 200);
    assert_int_equal(it_seed("Cross-Y", 1000), 200);
    double sorted = run_crossed("", 2, &ok);
    print_message("lock_order sorted: %d of %d sold, %.0f deadlocks/lock timeouts\n", ok,
                  CROSS_CLIENTS * CROSS_REQUESTS, sorted);
    assert_true(sorted == 0);
    assert_int_equal(ok, CROSS_CLIENTS * CROSS_REQUESTS);
    assert_exact("Cross-X", ok, 1000 - ok);
    assert_exact("Cross-Y", ok, 1000 - ok);
}

/* Carts {H1:1, H2:1} and {H2:1, H1:2} racing from 2 instances for less
 * stock than they ask: every cart sells all its lines or none, nothing
 * past zero, every unit the stock lost is in the ledger. */
static void test_hot_carts_all_or_nothing(void **state)
{
    static const char *const safe[] = {"for-update", "conditional-update", "optimistic",
                                       "batched-update", "redis-lock", "redlock",
                                       "lock-table", "zookeeper", "etcd"};
    for (size_t g = 0; g < sizeof(safe) / sizeof(safe[0]); g++) {
        char h1[32], h2[32];
        snprintf(h1, sizeof(h1), "Hot-1-%zu", g);
        snprintf(h2, sizeof(h2), "Hot-2-%zu", g);
        assert_int_equal(it_seed(h1, 20), 200);
        assert_int_equal(it_seed(h2, 20), 200);
        pthread_t t[CROSS_CLIENTS];
        struct crossed c[CROSS_CLIENTS];
        for (int i = 0; i < CROSS_CLIENTS; i++) {
            c[i] = (struct crossed){i % 2, (i / 2) % 2, "", CROSS_REQUESTS,
                                   (int)(10 + g) * 100 + i, 0, 0, safe[g], h1, h2, 5, 2, 0};
            assert_int_equal(pthread_create(&t[i], NULL, crossed_client, &c[i]), 0);
        }
        int plain = 0, reversed = 0;
        for (int i = 0; i < CROSS_CLIENTS; i++) {
            pthread_join(t[i], NULL);
            if (c[i].reverse)
                reversed += c[i].ok;
            else
                plain += c[i].ok;
        }
        print_message("%s: %d {H1:1,H2:1} and %d {H2:1,H1:2} sold\n", safe[g], plain, reversed);
        assert_exact(h1, plain + 2 * reversed, 20 - plain - 2 * reversed);
        assert_exact(h2, plain + reversed, 20 - plain - reversed);
    }
}

/* mutex, on one instance: crossed carts taking the stripes in the cart's
 * order wait on each other until lock_wait_ms (lock timeouts, nothing
 * sold by either); in stripe order, none. Returns the lock timeouts. */
static double mutex_crossed(const char *extra, int base, int *ok)
{
    double before = it_metric(0, "lab_lock_timeouts_total");
    pthread_t t[4];
    struct crossed c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (struct crossed){0, i % 2, extra, 4, base * 100 + i, 0, 0, "mutex",
                                "Mutex-X", "Mutex-Y", 40, 0, 400};
        assert_int_equal(pthread_create(&t[i], NULL, crossed_client, &c[i]), 0);
    }
    *ok = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        *ok += c[i].ok;
    }
    double after = it_metric(0, "lab_lock_timeouts_total");
    return (after < 0 ? 0 : after) - (before < 0 ? 0 : before);
}

static void test_mutex_crossed_carts(void **state)
{
    int ok;
    assert_int_equal(it_seed("Mutex-X", 100), 200);
    assert_int_equal(it_seed("Mutex-Y", 100), 200);
    double as_given = mutex_crossed(",\"lock_order\":\"as-given\"", 30, &ok);
    print_message("mutex as-given: %d of 16 sold, %.0f lock timeouts\n", ok, as_given);
    assert_exact("Mutex-X", ok, 100 - ok);
    assert_exact("Mutex-Y", ok, 100 - ok);
    assert_true(as_given > 0);                /* the variant's defect: broke */
    assert_int_equal(it_seed("Mutex-X", 100), 200);
    assert_int_equal(it_seed("Mutex-Y", 100), 200);
    double sorted = mutex_crossed("", 31, &ok);
    print_message("mutex sorted: %d of 16 sold, %.0f lock timeouts\n", ok, sorted);
    assert_true(sorted == 0);
    assert_int_equal(ok, 16);
    assert_exact("Mutex-X", 16, 84);
    assert_exact("Mutex-Y", 16, 84);
}

struct single_client {
    int instance, requests, ok;
    const char *sku;
};

static void *single_run(void *arg)
{
    struct single_client *c = arg;
    for (int i = 0; i < c->requests; i++) {
        char body[200];
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"qty\":1,\"guard\":\"batched-update\"}",
                 c->sku);
        struct it_resp r;
        c->ok += deduct(c->instance, body, &r) == 200;
        it_resp_free(&r);
    }
    return NULL;
}

/* batched-update: carts (sold alone, conditionally) racing batched single
 * sales of the same SKU from 2 instances, for less stock than asked: not
 * a unit past zero, every unit in the ledger. */
static void test_batched_carts_with_batches(void **state)
{
    assert_int_equal(it_seed("Batch-M", 30), 200);
    assert_int_equal(it_seed("Batch-N", 100), 200);
    pthread_t t[6];
    struct single_client s[4];
    struct crossed c[2];
    for (int i = 0; i < 4; i++) {
        s[i] = (struct single_client){i % 2, 10, 0, "Batch-M"};
        assert_int_equal(pthread_create(&t[i], NULL, single_run, &s[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        c[i] = (struct crossed){i % 2, i, "", 12, 4000 + i, 0, 0, "batched-update", "Batch-M",
                                "Batch-N", 0, 0, 0};
        assert_int_equal(pthread_create(&t[4 + i], NULL, crossed_client, &c[i]), 0);
    }
    int singles = 0, carts = 0;
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        singles += s[i].ok;
    for (int i = 0; i < 2; i++)
        carts += c[i].ok;
    print_message("batched-update: %d single sales, %d carts {M:1,N:1} sold on 30 M\n",
                  singles, carts);
    assert_exact("Batch-M", singles + carts, 30 - singles - carts);
    assert_exact("Batch-N", carts, 100 - carts);
    assert_int_equal(singles + carts, 30);    /* 64 asked, every unit sold */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ledger_migration),   /* first: no cart in the ledger yet */
        cmocka_unit_test(test_same_sku_twice),
        cmocka_unit_test(test_short_line_sells_nothing),
        cmocka_unit_test(test_repeat_is_duplicate),
        cmocka_unit_test(test_bad_carts),
        cmocka_unit_test(test_crossed_carts),
        cmocka_unit_test(test_hot_carts_all_or_nothing),
        cmocka_unit_test(test_mutex_crossed_carts),
        cmocka_unit_test(test_batched_carts_with_batches),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
