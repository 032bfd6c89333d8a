/* --sql-dialect: its spellings, the check both services run after parsing,
 * the option row every MySQL table shares (flag and SQL_DIALECT twin), and
 * which statements a connection picks from the server's version string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/db.h"

static void test_parse_and_name(void **state)
{
    (void)state;
    static const struct { const char *text; int want; } cases[] = {
        {"auto", DB_DIALECT_AUTO},       {"", DB_DIALECT_AUTO},
        {NULL, DB_DIALECT_AUTO},         {"mariadb", DB_DIALECT_MARIADB},
        {"mysql", DB_DIALECT_MYSQL},     {"MySQL", -1},
        {"mysql8", -1},                  {"maria", -1},
        {" mysql", -1},                  {"postgres", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = db_dialect_parse(cases[i].text);
        if (got != cases[i].want)
            fail_msg("'%s': %d, want %d", cases[i].text ? cases[i].text : "(null)", got,
                     cases[i].want);
    }
    assert_string_equal(db_dialect_name(DB_DIALECT_AUTO), "auto");
    assert_string_equal(db_dialect_name(DB_DIALECT_MARIADB), "mariadb");
    assert_string_equal(db_dialect_name(DB_DIALECT_MYSQL), "mysql");
}

static void test_conf_check(void **state)
{
    (void)state;
    struct db_conf c;
    char err[128] = "";
    memset(&c, 0, sizeof(c));
    assert_int_equal(db_conf_check(&c, err, sizeof(err)), DB_OK);   /* zeroed = auto */
    strcpy(c.sql_dialect, "mysql");
    assert_int_equal(db_conf_check(&c, err, sizeof(err)), DB_OK);
    strcpy(c.sql_dialect, "oracle");
    assert_int_equal(db_conf_check(&c, err, sizeof(err)), DB_ERR);
    assert_non_null(strstr(err, "--sql-dialect"));
    assert_non_null(strstr(err, "oracle"));
}

static void test_dialect_of_server(void **state)
{
    (void)state;
    static const struct { const char *conf, *server; int want; const char *label; } cases[] = {
        {"auto", "10.11.6-MariaDB-0+deb12u1", DB_DIALECT_MARIADB, "Debian's MariaDB"},
        {"auto", "5.5.5-10.11.6-MariaDB", DB_DIALECT_MARIADB, "MariaDB behind the 5.5.5 prefix"},
        {"auto", "11.4.2-MariaDB-ubu2404", DB_DIALECT_MARIADB, "MariaDB 11"},
        {"", "10.6.18-MariaDB-log", DB_DIALECT_MARIADB, "empty = auto"},
        {"auto", "8.0.36", DB_DIALECT_MYSQL, "MySQL 8.0"},
        {"auto", "8.0.36-28", DB_DIALECT_MYSQL, "Percona Server 8.0"},
        {"auto", "", DB_DIALECT_MYSQL, "no version string: portable"},
        {"mysql", "10.11.6-MariaDB-0+deb12u1", DB_DIALECT_MYSQL, "portable forced on MariaDB"},
        {"mariadb", "8.0.36", DB_DIALECT_MARIADB, "MariaDB forms forced on MySQL"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct db_conf c;
        memset(&c, 0, sizeof(c));
        strcpy(c.sql_dialect, cases[i].conf);
        int got = db_dialect_of(&c, cases[i].server);
        if (got != cases[i].want)
            fail_msg("%s: %s", cases[i].label, db_dialect_name((enum db_dialect)got));
    }
}

/* The shared option row: flag beats SQL_DIALECT, which beats "auto". */
struct dialect_conf { struct db_conf db; };
static const struct cfg_opt dialect_opts[] = {
    DB_CFG_OPTIONS(struct dialect_conf, db, "db_shopping", "schema"),
};

static void parse_dialect(char *out, size_t outlen, const char *env, const char *flag)
{
    static char prog[] = "t";
    char arg[64];
    char *argv[3] = {prog, NULL, NULL};
    int argc = 1;
    if (flag) {
        snprintf(arg, sizeof(arg), "--sql-dialect=%s", flag);
        argv[argc++] = arg;
    }
    if (env)
        setenv("SQL_DIALECT", env, 1);
    else
        unsetenv("SQL_DIALECT");
    optind = 0;
    struct dialect_conf c;
    char err[128];
    memset(&c, 0, sizeof(c));
    assert_int_equal(cfg_parse(dialect_opts, sizeof(dialect_opts) / sizeof(dialect_opts[0]), &c,
                               argc, argv, "t", err, sizeof(err)),
                     CFG_OK);
    snprintf(out, outlen, "%s", c.db.sql_dialect);
    unsetenv("SQL_DIALECT");
}

static void test_option_row(void **state)
{
    (void)state;
    char got[16];
    parse_dialect(got, sizeof(got), NULL, NULL);
    assert_string_equal(got, "auto");
    parse_dialect(got, sizeof(got), "mysql", NULL);
    assert_string_equal(got, "mysql");
    parse_dialect(got, sizeof(got), "mysql", "mariadb");
    assert_string_equal(got, "mariadb");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_name),
        cmocka_unit_test(test_conf_check),
        cmocka_unit_test(test_dialect_of_server),
        cmocka_unit_test(test_option_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
