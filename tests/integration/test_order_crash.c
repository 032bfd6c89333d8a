/* The order service under crashes, timeouts and hostile input. Each test ends with the exact audit
 * of the lab: units sold in the inventory ledger == units of placed orders
 * == stock taken, on 2 inventory instances. Tests that need other options
 * start their own order instance on a free port of the stack's range and
 * stop it by pid. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSLOTS 4
static int pids[NSLOTS];
static char order_url[NSLOTS][128];

static int group_setup(void **state) { return it_setup(); }

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Start an order instance of our own in slot (port base+20+slot) with the
 * stack's databases and both inventories, plus `extra` options; waits for
 * its /healthz. Returns 0 when it answers. */
static int start_order(int slot, const char *name, const char *const *extra)
{
    static char port[NSLOTS][24], mysql[24], urls[300];
    snprintf(port[slot], sizeof(port[slot]), "%ld", it_port_base() + 20 + slot);
    snprintf(mysql, sizeof(mysql), "%ld", it.mysql_port);
    snprintf(urls, sizeof(urls), "%s,%s", it.inventory[0], it.inventory[1]);
    const char *args[40] = {"--port", port[slot], "--instance", name, "--threads", "4",
                            "--mysql-port", mysql, "--inventory-urls", urls};
    size_t n = 10;
    for (size_t i = 0; extra && extra[i] && n < 39; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    pids[slot] = it_spawn("order", name, args);
    if (pids[slot] <= 0)
        return -1;
    snprintf(order_url[slot], sizeof(order_url[slot]), "http://127.0.0.1:%s", port[slot]);
    char h[160];
    snprintf(h, sizeof(h), "%s/healthz", order_url[slot]);
    return it_wait_status(h, 200, 30000);
}

static int stop_orders(void **state)
{
    for (int i = 0; i < NSLOTS; i++) {
        it_kill(pids[i], SIGTERM, 10000);
        pids[i] = 0;
    }
    return 0;
}

static long long sql_ll(const char *fmt, const char *arg)
{
    char q[512];
    snprintf(q, sizeof(q), fmt, arg);
    return it_sql_value(q);
}

static long long placed_units(const char *sku)
{
    return sql_ll("SELECT COALESCE(SUM(qty),0) FROM db_order.orders WHERE sku='%s' "
                  "AND status='placed'", sku);
}

static long long unsettled(const char *sku)
{
    return sql_ll("SELECT COUNT(*) FROM db_order.orders WHERE sku='%s' "
                  "AND status IN ('pending','releasing')", sku);
}

/* The lab's exact audit: ledger sold == placed orders == stock taken, and
 * nothing left pending. */
static void assert_exact(const char *sku, long long initial)
{
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    long long placed = placed_units(sku);
    if (a.sold != placed || a.stock != initial - a.sold || !a.consistent ||
        unsettled(sku) != 0)
        fail_msg("%s: ledger sold %lld, orders placed %lld, stock %lld of %lld, "
                 "consistent %d, unsettled %lld", sku, a.sold, placed, a.stock, initial,
                 a.consistent, unsettled(sku));
}

/* Poll until sold == placed with nothing unsettled (the reconciler ran). */
static int wait_settled(const char *sku, long timeout_ms)
{
    for (long waited = 0; waited <= timeout_ms; waited += 200) {
        struct it_audit a;
        if (it_audit(sku, &a) == 0 && a.sold == placed_units(sku) && unsettled(sku) == 0)
            return 0;
        nap_ms(200);
    }
    return -1;
}

static void reset_sku(const char *sku, long long stock)
{
    char q[256];
    assert_int_equal(it_seed(sku, stock), 200);
    snprintf(q, sizeof(q), "DELETE FROM db_order.orders WHERE sku='%s'", sku);
    assert_int_equal(it_sql(q), 0);
}

struct bg_post { const char *url; const char *req; long status; char body[1024]; };

static void *bg_post_run(void *p)
{
    struct bg_post *b = p;
    struct it_resp *r = malloc(sizeof(*r));   /* large: not on the thread's stack */
    if (!r)
        return NULL;
    b->status = it_http("POST", b->url, b->req, r);
    snprintf(b->body, sizeof(b->body), "%.1000s", r->body);
    it_resp_free(r);
    free(r);
    return NULL;
}

/* (a) The order service dies between the deduction and the order row. A
 * test-only pause widens that window; SIGKILL lands inside it. Before the
 * fix: ledger sold 1, orders 0, forever. After: the restarted instance's
 * reconciler releases the pending order (sold 0 / orders 0). */
static void test_crash_between_deduct_and_order_row(void **state)
{
    reset_sku("T-crash", 5);
    const char *paused[] = {"--debug-pause-after-deduct", "5000", "--deduct-timeout", "1000",
                            "--reconcile-ms", "200", "--reconcile-margin", "500", NULL};
    assert_int_equal(start_order(0, "order-crash", paused), 0);
    char u[200];
    snprintf(u, sizeof(u), "%s/orders", order_url[0]);
    struct bg_post b = {u, "{\"sku\":\"T-crash\",\"order_id\":\"crash-1\",\"guard\":\"for-update\"}", -1, ""};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, bg_post_run, &b), 0);
    long long sold = 0;
    for (int i = 0; i < 100 && sold < 1; i++) {
        nap_ms(100);
        sold = sql_ll("SELECT COUNT(*) FROM db_shopping.ledger WHERE sku='%s'", "T-crash");
    }
    assert_int_equal(sold, 1);
    assert_int_equal(it_kill(pids[0], SIGKILL, 5000), 0);   /* inside the pause */
    pids[0] = 0;
    pthread_join(t, NULL);
    assert_int_equal(b.status, 0);                          /* no answer: it died */
    assert_int_equal(placed_units("T-crash"), 0);           /* the window we hit */

    const char *normal[] = {"--deduct-timeout", "1000", "--reconcile-ms", "200",
                            "--reconcile-margin", "500", NULL};
    assert_int_equal(start_order(0, "order-crash", normal), 0);
    if (wait_settled("T-crash", 15000) != 0)
        fail_msg("after the restart the orphan sale was never settled");
    assert_exact("T-crash", 5);
    struct it_audit a;
    assert_int_equal(it_audit("T-crash", &a), 0);
    assert_int_equal(a.sold, 0);                            /* released, not placed */
    assert_int_equal(sql_ll("SELECT COUNT(*) FROM db_order.orders WHERE order_id='%s' "
                            "AND status='cancelled'", "crash-1"), 1);
}

/* Drop every MySQL connection to db_order: the next write of an order
 * service fails without an answer, like a commit whose reply was lost. */
static int kill_order_db_connections(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "for id in $(mariadb --no-defaults -h127.0.0.1 -P%ld -uroot -N -B -e "
             "\"SELECT id FROM information_schema.processlist WHERE db='db_order'\"); do "
             "mariadb --no-defaults -h127.0.0.1 -P%ld -uroot -e \"KILL $id\" || exit 1; done",
             it.mysql_port, it.mysql_port);
    return system(cmd);
}

/* POST order_id to the order instance of `slot`, which must run with
 * --debug-pause-after-deduct: once the ledger shows the sale, run `during`
 * (SQL or NULL) and cut the order database connections inside the pause.
 * Returns the answer's status (-1 when the window was missed); its body
 * goes to body (may be NULL). */
static long cut_during_pause(int slot, const char *sku, const char *order_id,
                             const char *during, char *body, size_t bodylen)
{
    char u[200], req[200];
    snprintf(u, sizeof(u), "%s/orders", order_url[slot]);
    snprintf(req, sizeof(req), "{\"sku\":\"%s\",\"order_id\":\"%s\"}", sku, order_id);
    struct bg_post b = {u, req, -1, ""};
    pthread_t t;
    if (pthread_create(&t, NULL, bg_post_run, &b) != 0)
        return -1;
    long long sold = 0;
    for (int i = 0; i < 100 && sold < 1; i++) {
        nap_ms(50);
        sold = sql_ll("SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='%s'", order_id);
    }
    if (sold == 1 && during)
        it_sql(during);
    int killed = sold == 1 ? kill_order_db_connections() : -1;
    pthread_join(t, NULL);
    if (body)
        snprintf(body, bodylen, "%s", b.body);
    return killed == 0 ? b.status : -1;
}

static long ambiguous_finalise(const char *order_id, const char *during)
{
    const char *paused[] = {"--debug-pause-after-deduct", "1500", NULL};
    if (start_order(0, "order-amb", paused) != 0)
        return -1;
    return cut_during_pause(0, "T-amb", order_id, during, NULL, 0);
}

/* The finalising UPDATE committed but its reply was lost (the test writes
 * 'placed' itself, then cuts the connection): the service must read the row
 * again and answer 201, never release a sale whose order row is placed. */
static void test_ambiguous_finalise_committed(void **state)
{
    reset_sku("T-amb", 5);
    long s = ambiguous_finalise("amb-1", "UPDATE db_order.orders SET status='placed' "
                                "WHERE order_id='amb-1'");
    assert_int_equal(s, 201);
    assert_exact("T-amb", 5);
    assert_int_equal(placed_units("T-amb"), 1);
}

/* The finalising UPDATE did not happen (connection cut, row still
 * pending): the stock is given back at once, the row ends cancelled. */
static void test_ambiguous_finalise_lost(void **state)
{
    reset_sku("T-amb", 5);
    assert_int_equal(ambiguous_finalise("amb-2", NULL), 503);
    assert_exact("T-amb", 5);
    assert_int_equal(placed_units("T-amb"), 0);
    assert_int_equal(sql_ll("SELECT COUNT(*) FROM db_order.orders WHERE order_id='%s' "
                            "AND status='cancelled'", "amb-2"), 1);
}

static int inv_pid;

static int stop_all(void **state)
{
    stop_orders(state);
    it_kill(inv_pid, SIGTERM, 10000);
    inv_pid = 0;
    return 0;
}

/* The order service's releases carry its admin token. An inventory of our
 * own requires token T; an order instance holding T gives the stock back
 * at once after a failed finalisation, one holding another token cannot
 * (the row waits for the reconciler). Needs the inventory's --admin-token
 * (the edge part): skipped on a build without it. */
static void test_release_sends_admin_token(void **state)
{
    int has = it_bin_has_option("inventory", "admin-token");
    assert_true(has >= 0);
    if (!has)
        skip();
    reset_sku("T-tok", 5);
    static char port[24], mysql[24], redis[24], inv_url[64];
    const char *redlock = getenv("LAB_REDLOCK_PORTS");
    snprintf(port, sizeof(port), "%ld", it_port_base() + 30);
    snprintf(mysql, sizeof(mysql), "%ld", it.mysql_port);
    snprintf(redis, sizeof(redis), "%ld", it.redis_port);
    snprintf(inv_url, sizeof(inv_url), "http://127.0.0.1:%s", port);
    const char *inv_args[] = {"--port", port, "--instance", "inventory-tok", "--threads", "4",
                              "--mysql-port", mysql, "--redis-port", redis, "--redlock-nodes",
                              redlock ? redlock : "", "--admin-token", "order-test-T", NULL};
    inv_pid = it_spawn("inventory", "inventory-tok", inv_args);
    char h[128];
    snprintf(h, sizeof(h), "%s/healthz", inv_url);
    assert_int_equal(it_wait_status(h, 200, 30000), 0);

    char body[1024];
    const char *wrong[] = {"--inventory-urls", inv_url, "--admin-token", "not-T",
                           "--debug-pause-after-deduct", "1500", NULL};
    assert_int_equal(start_order(0, "order-tok-wrong", wrong), 0);
    assert_int_equal(cut_during_pause(0, "T-tok", "tok-1", NULL, body, sizeof(body)), 503);
    if (!strstr(body, "reconciler"))
        fail_msg("release with a wrong token: %s", body);
    stop_orders(state);

    const char *right[] = {"--inventory-urls", inv_url, "--admin-token", "order-test-T",
                           "--debug-pause-after-deduct", "1500", "--reconcile-ms", "200", NULL};
    assert_int_equal(start_order(0, "order-tok", right), 0);
    assert_int_equal(cut_during_pause(0, "T-tok", "tok-2", NULL, body, sizeof(body)), 503);
    if (!strstr(body, "given back"))
        fail_msg("release with the token: %s", body);
    if (wait_settled("T-tok", 15000) != 0)
        fail_msg("tok-1 was never settled");
    assert_exact("T-tok", 5);
    assert_int_equal(placed_units("T-tok"), 0);
}

/* (b) The deduction outlives the order's budget: the order service gives up
 * while the inventory still commits. No failover may sell it twice, and
 * once the reconciler ran no sale is left without an order. */
static void test_deduct_timeout_then_reconciled(void **state)
{
    reset_sku("T-slow", 5);
    const char *opts[] = {"--deduct-timeout", "500", "--reconcile-ms", "200",
                          "--reconcile-margin", "2500", NULL};
    assert_int_equal(start_order(1, "order-slow", opts), 0);
    char u[200];
    snprintf(u, sizeof(u), "%s/orders", order_url[1]);
    struct it_resp r;
    long s = it_http("POST", u, "{\"sku\":\"T-slow\",\"order_id\":\"slow-1\","
                     "\"guard\":\"for-update\",\"hold_ms\":1500}", &r);
    /* An inventory that ignores X-Deadline-Ms sells after the order service
     * gave up (504); one that honours it gives up first (503, nothing sold).
     * Either way the audit below must be exact. */
    const char *code = json_string_value(json_object_get(r.json, "error")) ?: "";
    if (!(s == 504 && strcmp(code, "inventory_timeout") == 0) &&
        !(s == 503 && strcmp(code, "deadline_exceeded") == 0))
        fail_msg("slow deduction: %ld %s", s, r.body);
    it_resp_free(&r);
    if (wait_settled("T-slow", 15000) != 0)
        fail_msg("the timed-out order was never settled");
    /* One ledger row at most: the same order_id never sold twice. */
    assert_true(sql_ll("SELECT COUNT(*) FROM db_shopping.ledger WHERE sku='%s'", "T-slow") <= 1);
    assert_int_equal(placed_units("T-slow"), 0);
    /* A fresh order on the same instance still sells. */
    assert_int_equal(it_status("POST", u, "{\"sku\":\"T-slow\",\"guard\":\"for-update\"}"), 201);
    assert_exact("T-slow", 5);
    assert_int_equal(placed_units("T-slow"), 1);
}

/* (c) A client's order_id is kept, a repeat returns the first order, a reuse
 * for another sku/qty/user is 409 order_id_conflict, bad ids are 400, and
 * db_order compares ids as exact bytes. */
static void test_client_order_id_idempotent(void **state)
{
    reset_sku("T-idem", 10);
    reset_sku("T-idem2", 10);
    char u[200];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    const char *body = "{\"sku\":\"T-idem\",\"qty\":2,\"order_id\":\"Idem-1\",\"user_id\":\"u-1\"}";
    struct it_resp r;
    assert_int_equal(it_http("POST", u, body, &r), 201);
    assert_string_equal(json_string_value(json_object_get(r.json, "order_id")), "Idem-1");
    json_int_t remaining = json_integer_value(json_object_get(r.json, "remaining"));
    it_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(it_http("POST", u, body, &r), 201);
        assert_string_equal(json_string_value(json_object_get(r.json, "order_id")), "Idem-1");
        assert_true(json_is_true(json_object_get(r.json, "duplicate")));
        assert_int_equal(json_integer_value(json_object_get(r.json, "qty")), 2);
        assert_int_equal(json_integer_value(json_object_get(r.json, "remaining")), remaining);
        it_resp_free(&r);
    }
    const char *conflicts[] = {
        "{\"sku\":\"T-idem\",\"qty\":3,\"order_id\":\"Idem-1\",\"user_id\":\"u-1\"}",
        "{\"sku\":\"T-idem2\",\"qty\":2,\"order_id\":\"Idem-1\",\"user_id\":\"u-1\"}",
        "{\"sku\":\"T-idem\",\"order_id\":\"Idem-1\",\"user_id\":\"u-1\"}",
    };
    for (size_t i = 0; i < sizeof(conflicts) / sizeof(conflicts[0]); i++) {
        long s = it_http("POST", u, conflicts[i], &r);
        if (s != 409 || strcmp(json_string_value(json_object_get(r.json, "error")) ?: "",
                               "order_id_conflict") != 0)
            fail_msg("reuse %s: got %ld %s", conflicts[i], s, r.body);
        it_resp_free(&r);
    }
    const char *bad[] = {"{\"sku\":\"T-idem\",\"order_id\":\"a/b\"}",
                         "{\"sku\":\"T-idem\",\"order_id\":\"\"}",
                         "{\"sku\":\"T-idem\",\"order_id\":7}",
                         ("{\"sku\":\"T-idem\",\"order_id\":\"x123456789x123456789x123456789"
                          "x123456789x123456789x123456789abcde\"}")};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long s = it_http("POST", u, bad[i], &r);
        if (s != 400 || strcmp(json_string_value(json_object_get(r.json, "error")) ?: "",
                               "bad_request") != 0)
            fail_msg("order_id in %s: got %ld %s", bad[i], s, r.body);
        it_resp_free(&r);
    }
    /* Exact bytes in db_order: ids differing only in case are two rows. */
    assert_int_equal(it_sql("INSERT INTO db_order.orders (order_id,user_id,sku,qty,guard,"
                            "inventory_instance,status) VALUES "
                            "('Bin-1','u','T-bin',1,'','','failed'),"
                            "('bin-1','u','T-bin',1,'','','failed')"), 0);
    assert_int_equal(sql_ll("SELECT COUNT(*) FROM db_order.orders WHERE sku='%s'", "T-bin"), 2);
    assert_int_equal(sql_ll("SELECT COUNT(*) FROM db_order.orders WHERE sku='%s' "
                            "AND order_id='BIN-1'", "T-bin"), 0);
    assert_int_equal(it_sql("DELETE FROM db_order.orders WHERE sku='T-bin'"), 0);
    assert_exact("T-idem", 10);
    assert_exact("T-idem2", 10);
    assert_int_equal(placed_units("T-idem"), 2);
}

/* (d) X-Guard picks the guard on POST /orders; the body's "guard" beats it. */
static void test_x_guard_on_post_orders(void **state)
{
    reset_sku("T-xg", 10);
    char u[200];
    snprintf(u, sizeof(u), "%s/orders", it.order);
    const char *cu[] = {"X-Guard: conditional-update", NULL};
    const char *magic[] = {"X-Guard: magic", NULL};
    struct it_resp r;
    assert_int_equal(it_http_hdr("POST", u, "{\"sku\":\"T-xg\"}", cu, &r), 201);
    assert_string_equal(json_string_value(json_object_get(r.json, "guard")), "conditional-update");
    it_resp_free(&r);
    assert_int_equal(it_http_hdr("POST", u, "{\"sku\":\"T-xg\",\"guard\":\"for-update\"}", cu, &r), 201);
    assert_string_equal(json_string_value(json_object_get(r.json, "guard")), "for-update");
    it_resp_free(&r);
    long s = it_http_hdr("POST", u, "{\"sku\":\"T-xg\"}", magic, &r);
    if (s != 400)
        fail_msg("X-Guard: magic answered %ld %s", s, r.body);
    it_resp_free(&r);
    assert_exact("T-xg", 10);
    assert_int_equal(placed_units("T-xg"), 2);
}

/* The instance part of a generated id: everything before "-<ms>-<n>-<rand>". */
static void id_prefix(const char *id, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", id);
    for (int dashes = 0; dashes < 3; dashes++) {
        char *d = strrchr(out, '-');
        if (!d)
            return;
        *d = '\0';
    }
}

static int valid_id(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789._:-") == n;
}

/* (e) Two order instances with 47-character names that differ only at the
 * end generate ids that can never collide: the instance is in the id,
 * whatever its length, and the unique tail is never cut. */
static void test_long_instance_names_distinct_ids(void **state)
{
    const char *name[2] = {"order-with-a-very-long-instance-name-for-ids-01",
                           "order-with-a-very-long-instance-name-for-ids-02"};
    assert_int_equal(strlen(name[0]), 47);
    reset_sku("T-ids", 100);
    for (int k = 0; k < 2; k++)
        assert_int_equal(start_order(2 + k, name[k], NULL), 0);
    enum { PER = 15 };
    static char ids[2][PER][80];
    for (int i = 0; i < PER; i++)
        for (int k = 0; k < 2; k++) {
            char u[200];
            snprintf(u, sizeof(u), "%s/orders", order_url[2 + k]);
            struct it_resp r;
            assert_int_equal(it_http("POST", u, "{\"sku\":\"T-ids\",\"guard\":\"for-update\"}", &r), 201);
            snprintf(ids[k][i], sizeof(ids[k][i]), "%s",
                     json_string_value(json_object_get(r.json, "order_id")) ?: "");
            it_resp_free(&r);
            if (!valid_id(ids[k][i]))
                fail_msg("generated id '%s' breaks the identifier rules", ids[k][i]);
        }
    char pa[80], pb[80];
    id_prefix(ids[0][0], pa, sizeof(pa));
    id_prefix(ids[1][0], pb, sizeof(pb));
    if (strcmp(pa, pb) == 0)
        fail_msg("instances %s and %s share the id prefix '%s': their ids differ only by "
                 "time, counter and 16 random bits", name[0], name[1], pa);
    for (int a = 0; a < 2 * PER; a++)
        for (int b = a + 1; b < 2 * PER; b++)
            if (strcmp(ids[a / PER][a % PER], ids[b / PER][b % PER]) == 0)
                fail_msg("duplicate id %s", ids[a / PER][a % PER]);
    assert_exact("T-ids", 100);
    assert_int_equal(placed_units("T-ids"), 2 * PER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_crash_between_deduct_and_order_row, stop_orders),
        cmocka_unit_test_teardown(test_ambiguous_finalise_committed, stop_orders),
        cmocka_unit_test_teardown(test_ambiguous_finalise_lost, stop_orders),
        cmocka_unit_test_teardown(test_release_sends_admin_token, stop_all),
        cmocka_unit_test_teardown(test_deduct_timeout_then_reconciled, stop_orders),
        cmocka_unit_test(test_client_order_id_idempotent),
        cmocka_unit_test(test_x_guard_on_post_orders),
        cmocka_unit_test_teardown(test_long_instance_names_distinct_ids, stop_orders),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
