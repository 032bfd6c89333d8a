/* The errors a Galera cluster answers with, injected on the real MariaDB
 * by a trigger on the ledger (SIGNAL ... SET MYSQL_ERRNO): a node outside
 * the primary component (1047) is a 503, never a 500; a certification
 * conflict (1213) at a guard's statement is retried where the guard may
 * repeat its transaction, counted in lab_db_conflicts_total, and sells. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A MyISAM marker table survives the statement rollback the SIGNAL causes:
 * "gx1213-" order ids conflict exactly once, "gx1047-" ones always. */
static const char *const fault_sql[] = {
    "DROP TRIGGER IF EXISTS db_shopping.lab_fault_galera",
    "CREATE TABLE IF NOT EXISTS db_shopping.lab_fault_once "
    "(order_id VARCHAR(64) PRIMARY KEY) ENGINE=MyISAM",
    /* the client splits -e on ';': the body needs its own delimiter */
    "DELIMITER //\n"
    "CREATE TRIGGER db_shopping.lab_fault_galera BEFORE INSERT ON db_shopping.ledger "
    "FOR EACH ROW BEGIN "
    "IF NEW.order_id LIKE 'gx1213-%' AND NOT EXISTS (SELECT 1 FROM "
    "db_shopping.lab_fault_once WHERE order_id=NEW.order_id) THEN "
    "INSERT INTO db_shopping.lab_fault_once VALUES (NEW.order_id); "
    "SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO=1213, MESSAGE_TEXT="
    "'Deadlock found when trying to get lock; try restarting transaction'; "
    "ELSEIF NEW.order_id LIKE 'gx1047-%' THEN "
    "SIGNAL SQLSTATE '08S01' SET MYSQL_ERRNO=1047, MESSAGE_TEXT="
    "'WSREP has not yet prepared node for application use'; "
    "ELSEIF NEW.order_id LIKE 'gxslow-%' THEN DO SLEEP(7); "
    "ELSEIF NEW.order_id LIKE 'gx1180-%' THEN "
    "SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO=1180, MESSAGE_TEXT="
    "'Got error 6 during COMMIT'; "
    "END IF; END //",
};

static int group_setup(void **state)
{
    (void)state;
    if (it_setup() != 0)
        return -1;
    for (size_t i = 0; i < sizeof(fault_sql) / sizeof(fault_sql[0]); i++)
        if (it_sql(fault_sql[i]) != 0) {
            fprintf(stderr, "cannot install the fault trigger: %s\n", fault_sql[i]);
            return -1;
        }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    it_sql("DROP TRIGGER IF EXISTS db_shopping.lab_fault_galera");
    it_sql("DROP TABLE IF EXISTS db_shopping.lab_fault_once");
    return 0;
}

/* The value of `metric{guard="g"}` on instance 0, 0 when absent. */
static long long metric_value(const char *metric, const char *guard)
{
    char url[256], want[160];
    snprintf(url, sizeof(url), "%s/metrics", it.inventory[0]);
    snprintf(want, sizeof(want), "%s{guard=\"%s\"} ", metric, guard);
    struct it_resp r;
    long st = it_http("GET", url, NULL, &r);
    long long v = 0;
    const char *p = st == 200 ? strstr(r.body, want) : NULL;
    if (p)
        v = atoll(p + strlen(want));
    it_resp_free(&r);
    return v;
}

/* One deduction of `sku` under `guard` with `order_id`; returns the status
 * and copies the "error" of the answer into err. */
static long sell(const char *sku, const char *guard, const char *order_id, char *err,
                 size_t errlen)
{
    char url[256], body[256];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[0]);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s\"}",
             sku, guard, order_id);
    struct it_resp r;
    long st = it_http("POST", url, body, &r);
    snprintf(err, errlen, "%s", json_string_value(json_object_get(r.json, "error")) ?: "");
    it_resp_free(&r);
    return st;
}

/* Every guard that writes in MySQL: 1047 and 1180 are 503 with nothing sold. */
static void test_not_primary_is_503(void **state)
{
    (void)state;
    static const char *const guards[] = {"none", "mutex", "optimistic", "for-update",
                                         "conditional-update", "batched-update",
                                         "lock-table"};
    static const char *const codes[] = {"gx1047", "gx1180"};
    assert_int_equal(it_seed("T-gx503", 50), 200);
    for (size_t c = 0; c < 2; c++)
        for (size_t i = 0; i < sizeof(guards) / sizeof(guards[0]); i++) {
            char oid[64], err[64];
            snprintf(oid, sizeof(oid), "%s-%zu", codes[c], i);
            long st = sell("T-gx503", guards[i], oid, err, sizeof(err));
            print_message("%s %-20s -> %ld %s\n", codes[c], guards[i], st, err);
            assert_int_equal(st, 503);
        }
    struct it_audit a;
    assert_int_equal(it_audit("T-gx503", &a), 0);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 50);
}

/* A conflict at the statement after the guard's write is retried by the
 * guards that repeat their transaction, counted, and the sale goes through
 * once. */
static void test_conflict_retried_and_counted(void **state)
{
    (void)state;
    static const char *const guards[] = {"optimistic", "for-update", "conditional-update",
                                         "batched-update"};
    assert_int_equal(it_seed("T-gx1213", 50), 200);
    for (size_t i = 0; i < sizeof(guards) / sizeof(guards[0]); i++) {
        char oid[64], err[64];
        long long before = metric_value("lab_db_conflicts_total", guards[i]);
        snprintf(oid, sizeof(oid), "gx1213-%zu", i);
        long st = sell("T-gx1213", guards[i], oid, err, sizeof(err));
        long long after = metric_value("lab_db_conflicts_total", guards[i]);
        print_message("gx1213 %-20s -> %ld %s, conflicts %lld -> %lld\n", guards[i], st,
                      err, before, after);
        assert_int_equal(st, 200);
        assert_int_equal(after - before, 1);
    }
    struct it_audit a;
    assert_int_equal(it_audit("T-gx1213", &a), 0);
    assert_int_equal(a.sold, 4);
    assert_int_equal(a.stock, 46);
    assert_int_equal(a.oversold, 0);
}

/* A statement that outlives the client's read timeout (a node stalled by a
 * peer's failure for the suspect timeout, 6.5 s): the connection is given
 * up, the answer is a 503 and nothing is sold. */
static void test_read_timeout_is_503(void **state)
{
    (void)state;
    assert_int_equal(it_seed("T-gxslow", 50), 200);
    char err[64];
    long st = sell("T-gxslow", "conditional-update", "gxslow-1", err, sizeof(err));
    print_message("gxslow conditional-update -> %ld %s\n", st, err);
    assert_int_equal(st, 503);
    struct it_audit a;
    for (int i = 0; i < 40; i++) {   /* the server finishes the sleep, then rolls back */
        assert_int_equal(it_audit("T-gxslow", &a), 0);
        if (a.sold == 0 && a.stock == 50)
            break;
        usleep(100 * 1000);
    }
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_primary_is_503),
        cmocka_unit_test(test_conflict_retried_and_counted),
        cmocka_unit_test(test_read_timeout_is_503),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
