/* redis-decr: Redis and MySQL stay together across the interleavings
 * where a sale's intent and its MySQL write part ways.
 *   - a group commit that waits on the row lock past its intent's deadline
 *     must not land after its intent was settled "never landed";
 *   - a restarted instance (same name, after kill -9) must not reuse the
 *     intent ids of the sales its previous life left behind;
 *   - a repeat of a recorded order, killed during its hold, is not
 *     "landed" because the first sale's ledger row exists;
 *   - out_of_stock says how many units are left;
 *   - an inconsistent audit says why (drift terms, settled intents, ledger
 *     rows without a stock move);
 *   - an audit under load is not inconsistent when nothing is wrong. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int group_setup(void **state) { return it_setup(); }

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long long redis_stock(const char *sku) { return it_redis_num("GET stock:{%s}", sku); }

/* A second MySQL session (the mariadb client, as root) that locks sku's
 * stock row FOR UPDATE and holds it for hold_ms, then commits. Returns its
 * pid once the lock is held (the locking read answered), -1 on failure. */
static int hold_row_lock(const char *sku, long hold_ms)
{
    char port[16], sql[512];
    int out[2];
    snprintf(port, sizeof(port), "-P%ld", it.mysql_port);
    snprintf(sql, sizeof(sql),
             "START TRANSACTION; SELECT stock FROM db_shopping.inventory WHERE sku='%s' "
             "FOR UPDATE; DO SLEEP(%ld.%03ld); COMMIT;", sku, hold_ms / 1000, hold_ms % 1000);
    if (pipe(out) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        /* -n: each answer written as it comes, not at exit */
        execlp("mariadb", "mariadb", "--no-defaults", "-h127.0.0.1", port, "-uroot", "-N",
               "-B", "-n", "-e", sql, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char line[64] = "";
    FILE *f = fdopen(out[0], "r");
    int held = f && fgets(line, sizeof(line), f) != NULL;   /* the stock: locked */
    if (f)
        fclose(f);
    else
        close(out[0]);
    if (held)
        return pid;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* A sale decided in Redis whose group commit waits on the row lock (a
 * second session holds it) past its intent's deadline, with lock_wait_ms
 * long enough to wait it out. Meanwhile the audit settles the intent.
 * Whatever the sale answers, Redis and MySQL must agree after. */
static void test_decr_commit_waiting_past_intent_deadline(void **state)
{
    const char *sku = "Tt-lockwait";
    assert_int_equal(it_seed(sku, 10), 200);
    int holder = hold_row_lock(sku, 5000);
    assert_true(holder > 0);
    struct it_bg_post sale;
    assert_int_equal(it_bg_deduct(&sale, it.inventory[0],
                                  "{\"sku\":\"Tt-lockwait\",\"order_id\":\"tt-lockwait-1\","
                                  "\"guard\":\"redis-decr\",\"lock_wait_ms\":10000}"), 0);
    assert_int_equal(it_redis_get_until("stock:{Tt-lockwait}", 9, 200, 10), 9);  /* decided */
    nap_ms(2400);   /* past the intent's deadline (2 s), the row still locked */
    struct it_resp r;
    it_audit_json(1, sku, &r);   /* settles the stale intent */
    print_message("audit while the commit waits: %s\n", r.body);
    it_resp_free(&r);
    it_bg_post_join(&sale);
    waitpid(holder, NULL, 0);
    it_audit_json(1, sku, &r);
    long long rd = redis_stock(sku), stock = it_audit_field(&r, "stock");
    long long drift = it_audit_field(&r, "drift");
    int consistent = json_is_true(json_object_get(r.json, "consistent"));
    print_message("sale answered %ld; then audit %s; Redis %lld\n", sale.status, r.body, rd);
    it_resp_free(&r);
    assert_int_equal(drift, 0);
    assert_true(consistent);
    assert_int_equal(rd, stock);
    assert_int_equal(stock, sale.status == 200 ? 9 : 10);
}

/* kill -9 during a sale's hold, the instance started again at once under
 * the same name, one sale on it: the dead sale's intent is its own, and
 * its unit comes back once its deadline passed. */
static void test_decr_restart_does_not_reuse_intent_ids(void **state)
{
    const char *name = "inventory-decr-restart";
    long port = it_port_base() + 20, st;
    long long rs = it_decr_kill_mid_sale(name, port, "Tt-restart", "tt-restart-1", 2000, 200, &st);
    assert_int_equal(rs, 9);
    char url[160], u[200];
    int pid = it_start_inventory_up(name, port, url, sizeof(url));
    assert_true(pid > 0);
    snprintf(u, sizeof(u), "%s/inventory/deduct", url);
    long sold = it_status("POST", u, "{\"sku\":\"Tt-restart\",\"order_id\":\"tt-restart-2\","
                                     "\"guard\":\"redis-decr\"}");
    long long intents = it_redis_num("ZCARD stock:{Tt-restart}:intents");
    it_kill(pid, SIGTERM, 5000);
    nap_ms(5000);   /* the dead sale's deadline (hold 2 s + 2 s) has passed */
    struct it_resp r;
    it_audit_json(0, "Tt-restart", &r);
    long long rd = redis_stock("Tt-restart"), stock = it_audit_field(&r, "stock");
    long long drift = it_audit_field(&r, "drift");
    print_message("new sale %ld, intents after it %lld; audit %s; Redis %lld\n", sold, intents,
                  r.body, rd);
    it_resp_free(&r);
    assert_int_equal(sold, 200);
    assert_int_equal(intents, 1);   /* the dead sale's, still there */
    assert_int_equal(stock, 9);
    assert_int_equal(rd, 9);
    assert_int_equal(drift, 0);
}

/* An order sold, then repeated with hold_ms on an instance killed during
 * the hold: the repeat never reached MySQL (and could not: its order is
 * there), so its unit goes back, although a ledger row of that order
 * exists. */
static void test_decr_killed_repeat_is_given_back(void **state)
{
    const char *name = "inventory-decr-repeat";
    long port = it_port_base() + 22;
    char url[160], u[200];
    int pid = it_start_inventory_up(name, port, url, sizeof(url));
    assert_true(pid > 0);
    assert_int_equal(it_seed("Tt-rep", 10), 200);
    snprintf(u, sizeof(u), "%s/inventory/deduct", url);
    assert_int_equal(it_status("POST", u, "{\"sku\":\"Tt-rep\",\"order_id\":\"tt-rep-1\","
                                          "\"guard\":\"redis-decr\"}"), 200);
    struct it_bg_post rep;
    assert_int_equal(it_bg_deduct(&rep, url, "{\"sku\":\"Tt-rep\",\"order_id\":\"tt-rep-1\","
                                             "\"guard\":\"redis-decr\",\"hold_ms\":2000}"), 0);
    assert_int_equal(it_redis_get_until("stock:{Tt-rep}", 8, 200, 10), 8);
    assert_int_equal(it_kill(pid, SIGKILL, 2000), 0);
    it_bg_post_join(&rep);
    nap_ms(5000);   /* past the repeat's deadline */
    struct it_resp r;
    it_audit_json(0, "Tt-rep", &r);
    long long rd = redis_stock("Tt-rep"), stock = it_audit_field(&r, "stock");
    long long drift = it_audit_field(&r, "drift"), sold = it_audit_field(&r, "sold");
    print_message("killed repeat answered %ld; audit %s; Redis %lld\n", rep.status, r.body, rd);
    /* and the audit says what it settled, and when */
    json_t *last = json_array_get(json_object_get(r.json, "settled_intents"), 0);
    const char *order = json_string_value(json_object_get(last, "order_id"));
    const char *outcome = json_string_value(json_object_get(last, "outcome"));
    long long at = json_integer_value(json_object_get(last, "at_ms"));
    assert_non_null(order);
    assert_string_equal(order, "tt-rep-1");
    assert_non_null(outcome);
    assert_string_equal(outcome, "given_back");
    assert_true(at > 1700000000000LL);
    it_resp_free(&r);
    assert_int_equal(stock, 9);
    assert_int_equal(sold, 1);
    assert_int_equal(rd, 9);
    assert_int_equal(drift, 0);
}

/* qty 2 with 1 unit left: out_of_stock, and its words say 1 is left. */
static void test_decr_out_of_stock_says_what_is_left(void **state)
{
    assert_int_equal(it_seed("Tt-oos", 1), 200);
    char u[200];
    snprintf(u, sizeof(u), "%s/inventory/deduct", it.inventory[0]);
    struct it_resp r;
    long st = it_http("POST", u, "{\"sku\":\"Tt-oos\",\"order_id\":\"tt-oos-1\",\"qty\":2,"
                                 "\"guard\":\"redis-decr\"}", &r);
    const char *msg = json_string_value(json_object_get(r.json, "detail"));
    print_message("qty 2 of 1: %ld %s\n", st, r.body);
    assert_int_equal(st, 409);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "has 1 left"));
    it_resp_free(&r);
    assert_int_equal(redis_stock("Tt-oos"), 1);
}

/* An inconsistent audit says why: a drift with its terms (Redis moved
 * behind the guard's back), and lost updates with the order ids of the
 * ledger rows that moved no stock (two rows that wrote the same stock). */
static void test_decr_audit_says_why(void **state)
{
    assert_int_equal(it_seed("Tt-why", 10), 200);
    char u[200];
    snprintf(u, sizeof(u), "%s/inventory/deduct", it.inventory[0]);
    assert_int_equal(it_status("POST", u, "{\"sku\":\"Tt-why\",\"order_id\":\"tt-why-1\","
                                          "\"guard\":\"redis-decr\"}"), 200);
    assert_int_equal(it_redis_num("DECRBY stock:{Tt-why} 1"), 8);
    struct it_resp r;
    it_audit_json(0, "Tt-why", &r);
    print_message("Redis moved alone: %s\n", r.body);
    const char *why = json_string_value(json_object_get(r.json, "why"));
    json_t *terms = json_object_get(json_object_get(r.json, "drift_terms"), "redis-decr");
    assert_false(json_is_true(json_object_get(r.json, "consistent")));
    assert_non_null(why);
    assert_non_null(strstr(why, "redis-decr drift -1: Redis 8, MySQL 9"));
    assert_int_equal(json_integer_value(json_object_get(terms, "redis_stock")), 8);
    assert_int_equal(json_integer_value(json_object_get(terms, "mysql_stock")), 9);
    it_resp_free(&r);

    assert_int_equal(it_seed("Tt-lost", 10), 200);
    assert_int_equal(it_sql("INSERT INTO db_shopping.ledger (order_id, sku, qty, remaining, "
                            "guard, instance) VALUES ('tt-lost-1','Tt-lost',1,9,'for-update',"
                            "'t'),('tt-lost-2','Tt-lost',1,9,'for-update','t'),('tt-lost-3',"
                            "'Tt-lost',1,8,'for-update','t'); UPDATE db_shopping.inventory "
                            "SET stock=8 WHERE sku='Tt-lost'"), 0);
    it_audit_json(1, "Tt-lost", &r);
    print_message("two sales wrote the same stock: %s\n", r.body);
    why = json_string_value(json_object_get(r.json, "why"));
    json_t *rows = json_object_get(r.json, "unmoved_orders");
    assert_int_equal(it_audit_field(&r, "lost_updates"), 1);
    assert_non_null(why);
    assert_non_null(strstr(why, "rows without a stock move: tt-lost-2"));
    assert_int_equal(json_array_size(rows), 1);
    assert_string_equal(json_string_value(json_array_get(rows, 0)), "tt-lost-2");
    it_resp_free(&r);
    it_audit_json(1, "Tt-oos", &r);   /* consistent: no why */
    assert_true(json_is_null(json_object_get(r.json, "why")));
    it_resp_free(&r);
}

struct bg_load {
    struct it_load l;
    atomic_int done;
};

static void *bg_load_main(void *arg)
{
    struct bg_load *b = arg;
    it_hammer(&b->l);
    atomic_store(&b->done, 1);
    return NULL;
}

/* Audits taken while redis-decr sells on both instances: a sale whose
 * COMMIT is in MySQL while its intent is not yet forgotten, or one decided
 * between the audit's Redis and MySQL reads, must not show as drift. An
 * audit under load either pins the drift (0) or says it cannot (null);
 * it is never inconsistent when nothing is wrong. */
static void test_decr_audit_exact_under_load(void **state)
{
    assert_int_equal(it_seed("Tt-load", 100000), 200);
    char u0[200], u1[200];
    snprintf(u0, sizeof(u0), "%s/inventory/deduct", it.inventory[0]);
    snprintf(u1, sizeof(u1), "%s/inventory/deduct", it.inventory[1]);
    const char *const urls[2] = {u0, u1};
    struct bg_load b = {.l = {.total = 20000, .clients = 32, .urls = urls, .nurls = 2,
                              .method = "POST",
                              .body_fmt = "{\"sku\":\"Tt-load\",\"order_id\":\"tt-load-%d\","
                                          "\"guard\":\"redis-decr\"}"}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_load_main, &b), 0);
    int audits = 0, wrong = 0, known = 0;
    while (!atomic_load(&b.done)) {
        struct it_resp r;
        it_audit_json(audits % 2, "Tt-load", &r);
        json_t *drift = json_object_get(r.json, "drift");
        audits++;
        known += json_is_integer(drift);
        if (!json_is_true(json_object_get(r.json, "consistent"))) {
            if (wrong++ < 3)
                print_message("under load: %s\n", r.body);
        }
        it_resp_free(&r);
        nap_ms(50);
    }
    pthread_join(th, NULL);
    print_message("%d audits under load: %d inconsistent, %d with a known drift; sold %d\n",
                  audits, wrong, known, b.l.by_status[200]);
    struct it_audit a;
    assert_int_equal(it_audit("Tt-load", &a), 0);
    assert_int_equal(b.l.by_status[200], 20000);
    assert_true(audits >= 3);
    assert_int_equal(wrong, 0);
    assert_true(a.consistent);
    assert_int_equal(a.stock, 100000 - 20000);
    assert_int_equal(redis_stock("Tt-load"), 100000 - 20000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decr_out_of_stock_says_what_is_left),
        cmocka_unit_test(test_decr_commit_waiting_past_intent_deadline),
        cmocka_unit_test(test_decr_restart_does_not_reuse_intent_ids),
        cmocka_unit_test(test_decr_killed_repeat_is_given_back),
        cmocka_unit_test(test_decr_audit_says_why),
        cmocka_unit_test(test_decr_audit_exact_under_load),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
