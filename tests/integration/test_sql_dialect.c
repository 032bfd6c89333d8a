/* The two SQL dialects on the stack's MariaDB, through the library as the
 * services use it (the service account, lib/stock/store.c): `auto`
 * recognises MariaDB; in both dialects the writes that must stay inside
 * their transaction (the stock write after a locking read, the ledger
 * inserts) write nothing once the transaction is gone behind the client's
 * back, as after a Galera brute-force abort, while a plain write on the
 * same connection shows it really runs in autocommit then; and inside a
 * live transaction they write and commit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include "base/db.h"
#include "stock/store.h"

#include <stdio.h>
#include <string.h>

static struct db_conf conf;

static int group_setup(void **state)
{
    (void)state;
    if (it_setup() != 0)
        return -1;
    memset(&conf, 0, sizeof(conf));
    snprintf(conf.host, sizeof(conf.host), "127.0.0.1");
    conf.port = it.mysql_port;
    snprintf(conf.user, sizeof(conf.user), "lab_app");
    if (it_stack_env("APP_DB_PASSWORD", conf.password, sizeof(conf.password)) != 0) {
        fprintf(stderr, "no APP_DB_PASSWORD in the stack's stack.env\n");
        return -1;
    }
    snprintf(conf.dbname, sizeof(conf.dbname), "db_shopping");
    conf.timeout_ms = 5000;
    conf.lock_wait_s = 5;
    return db_global_init() == DB_OK ? 0 : -1;
}

static struct db_conn *connect_as(const char *dialect, struct db_conf *c)
{
    *c = conf;
    snprintf(c->sql_dialect, sizeof(c->sql_dialect), "%s", dialect);
    struct db_conn *db = db_connect(c);
    assert_non_null(db);
    if (!db->my)
        fail_msg("connect (%s): %s", dialect, db->errstr);
    return db;
}

static long long sql_value(const char *fmt, const char *arg)
{
    char q[256];
    snprintf(q, sizeof(q), fmt, arg);
    return it_sql_value(q);
}

static void test_auto_recognises_mariadb(void **state)
{
    (void)state;
    struct db_conf c;
    struct db_conn *db = connect_as("auto", &c);
    assert_non_null(strstr(db->server, "MariaDB"));
    assert_int_equal(db->dialect, DB_DIALECT_MARIADB);
    db_free(db);
    db = connect_as("mysql", &c);
    assert_int_equal(db->dialect, DB_DIALECT_MYSQL);
    db_free(db);
}

/* The transaction db_begin opened is rolled back without the client
 * knowing (its in_txn still says open): the next statements run on their
 * own, in autocommit. */
static void lose_transaction(struct db_conn *db)
{
    assert_int_equal(mysql_query(db->my, "ROLLBACK"), 0);
    assert_int_equal(db->in_txn, 1);
}

static void writes_stay_in_their_transaction(const char *dialect)
{
    char sku[32], o1[48], o2[48], rows[160];
    snprintf(sku, sizeof(sku), "DX-%s", dialect);
    snprintf(o1, sizeof(o1), "dx-%s-1", dialect);
    snprintf(o2, sizeof(o2), "dx-%s-2", dialect);
    snprintf(rows, sizeof(rows), "[[\"%s\",\"%s\",1,9,\"t\"]]", o2, sku);
    assert_int_equal(it_seed(sku, 10), 200);
    struct db_conf c;
    struct db_conn *db = connect_as(dialect, &c);
    long long stock = 0, version = 0;

    /* Gone: none of the transaction-bound writes writes. */
    assert_int_equal(db_begin(db), DB_OK);
    assert_int_equal(store_read(db, sku, 1, &stock, &version), 1);
    lose_transaction(db);
    assert_int_equal(store_take_locked(db, sku, 1), 0);
    assert_int_equal(store_set_stock(db, sku, 5), 0);
    assert_int_equal(store_ledger_insert(db, o1, sku, 1, 9, "test", "t", ""), DB_ERETRY);
    assert_int_equal(store_ledger_insert_rows(db, rows, "test"), DB_ERETRY);
    assert_int_equal(store_limit_take(db, sku, "u1", 1, 5), DB_ERETRY);
    /* ...while a write without that condition runs alone and commits: the
     * refusals above are the condition's doing. */
    assert_int_equal(store_add_stock(db, sku, 0), 1);
    db_rollback(db);
    assert_int_equal(sql_value("SELECT stock FROM db_shopping.inventory WHERE sku='%s'", sku), 10);
    assert_int_equal(sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE sku='%s'", sku), 0);
    assert_int_equal(sql_value("SELECT COUNT(*) FROM db_shopping.user_purchases WHERE sku='%s'",
                               sku), 0);

    /* Live: they write, and COMMIT keeps them. */
    assert_int_equal(db_begin(db), DB_OK);
    assert_int_equal(store_read(db, sku, 1, &stock, &version), 1);
    assert_int_equal(store_take_locked(db, sku, 2), 1);
    assert_int_equal(store_ledger_insert(db, o1, sku, 1, 9, "test", "t", "u1"), 1);
    assert_int_equal(store_ledger_insert_rows(db, rows, "test"), 1);
    assert_true(store_limit_take(db, sku, "u1", 1, 5) > 0);    /* a new buyer: inserted */
    assert_true(store_limit_take(db, sku, "u1", 3, 5) > 0);    /* 1 + 3 <= 5: moved */
    assert_int_equal(store_limit_take(db, sku, "u1", 2, 5), 0); /* 4 + 2 > 5: refused */
    assert_int_equal(store_limit_take(db, sku, "u2", 6, 5), 0); /* past it at once */
    assert_int_equal(db_commit(db), DB_OK);
    assert_int_equal(sql_value("SELECT bought FROM db_shopping.user_purchases WHERE sku='%s' "
                               "AND user_id='u1'", sku), 4);
    assert_int_equal(sql_value("SELECT COUNT(*) FROM db_shopping.user_purchases WHERE sku='%s'",
                               sku), 1);
    assert_int_equal(sql_value("SELECT stock FROM db_shopping.inventory WHERE sku='%s'", sku), 8);
    assert_int_equal(sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE sku='%s'", sku), 2);

    /* A later transaction on the same connection is guarded afresh. */
    assert_int_equal(db_begin(db), DB_OK);
    assert_int_equal(store_read(db, sku, 1, &stock, &version), 1);
    lose_transaction(db);
    assert_int_equal(store_set_stock(db, sku, 1), 0);
    db_rollback(db);
    assert_int_equal(sql_value("SELECT stock FROM db_shopping.inventory WHERE sku='%s'", sku), 8);
    db_free(db);
}

static void test_mariadb_writes_stay_in_their_transaction(void **state)
{
    (void)state;
    writes_stay_in_their_transaction("mariadb");
}

static void test_portable_writes_stay_in_their_transaction(void **state)
{
    (void)state;
    writes_stay_in_their_transaction("mysql");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_recognises_mariadb),
        cmocka_unit_test(test_mariadb_writes_stay_in_their_transaction),
        cmocka_unit_test(test_portable_writes_stay_in_their_transaction),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
