/* audit_compute: the reconciliation every report is built on, pinned down
 * as a labelled table (initial, stock, sold) -> (oversold, lost, consistent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "stock/audit.h"

struct audit_case {
    const char *label;
    long long initial, stock, sold;
    long long oversold, lost_updates;
    int consistent;
};

static const struct audit_case cases[] = {
    /* label                                   init   stock  sold   over  lost  ok */
    {"seeds: 1013 sold of 1000, stock 0",       1000,     0, 1013,   13,   13, 0},
    {"lost updates without oversell",           1000,   500,  600,    0,  100, 0},
    {"exact sell-out",                           100,     0,  100,    0,    0, 1},
    {"nothing sold",                             100,   100,    0,    0,    0, 1},
    {"partial sales, consistent",               1000,   750,  250,    0,    0, 1},
    {"released stock given back (10 sold, 3 released)",
                                                 100,    93,    7,    0,    0, 1},
    {"release returned stock but ledger still counts it",
                                                 100,    93,   10,    0,    3, 0},
    {"negative stock: oversold and seen by stock",
                                                 100,    -5,  105,    5,    0, 0},
    {"stock dropped more than sold (missing ledger rows)",
                                                 100,    50,   40,    0,  -10, 0},
    {"zero initial, zero everything",              0,     0,    0,    0,    0, 1},
    {"zero initial, one sold, stock untouched",    0,     0,    1,    1,    1, 0},
    {"large numbers",                   1000000000LL,     0, 1000000007LL, 7, 7, 0},
};

static void test_audit_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct audit_case *c = &cases[i];
        struct audit a;
        memset(&a, 0x5a, sizeof a);   /* outputs must not depend on old contents */
        a.initial = c->initial;
        a.stock = c->stock;
        a.sold = c->sold;
        a.held = 0;                  /* an input: no holds */
        a.drift_known = 0;           /* an input: no Redis side read */
        a.over_limit = 0;            /* an input: no user past a limit */
        audit_compute(&a);
        if (a.oversold != c->oversold || a.lost_updates != c->lost_updates ||
            a.consistent != c->consistent)
            fail_msg("%s: got oversold=%lld lost=%lld consistent=%d, want %lld %lld %d",
                     c->label, a.oversold, a.lost_updates, a.consistent,
                     c->oversold, c->lost_updates, c->consistent);
        /* Inputs are left alone. */
        assert_int_equal(a.initial, c->initial);
        assert_int_equal(a.stock, c->stock);
        assert_int_equal(a.sold, c->sold);
    }
}

/* A live hold's units are out of stock and not sold: counted, they make
 * the audit add up; forgotten, they would look like a lost update. */
static void test_audit_holds(void **state)
{
    (void)state;
    struct audit a = {.initial = 10, .stock = 6, .sold = 3, .held = 1};
    audit_compute(&a);
    assert_true(a.consistent);
    assert_int_equal(a.lost_updates, 0);
    a.held = 0;
    audit_compute(&a);
    assert_false(a.consistent);
    a.held = 2;    /* a hold confirmed into a sale and still counted held */
    audit_compute(&a);
    assert_int_equal(a.lost_updates, 1);
}

/* A known nonzero drift (Redis apart from MySQL) is inconsistent even when
 * MySQL's own figures add up; an unknown one does not decide. */
static void test_audit_drift(void **state)
{
    (void)state;
    struct audit a = {.initial = 10, .stock = 7, .sold = 3, .drift_known = 1, .drift = 0};
    audit_compute(&a);
    assert_true(a.consistent);
    a.drift = -1;
    audit_compute(&a);
    assert_false(a.consistent);
    a.drift_known = 0;
    audit_compute(&a);
    assert_true(a.consistent);
}

/* audit_why: nothing when consistent; each cause in words with its
 * numbers when not (the drift with its terms, the rows without a stock
 * move), and a buffer too small stays a string. */
static void test_audit_why(void **state)
{
    (void)state;
    char why[512];
    struct audit a = {.initial = 10, .stock = 9, .sold = 1, .drift_known = 1, .nsides = 1};
    a.side[0].guard = "redis-decr";
    a.side[0].redis_stock = 9;
    audit_compute(&a);
    audit_why(&a, why, sizeof(why));
    assert_string_equal(why, "");
    a.side[0].redis_stock = 10;
    a.side[0].drift = a.drift = 1;
    audit_compute(&a);
    audit_why(&a, why, sizeof(why));
    assert_string_equal(why, "redis-decr drift +1: Redis 10, MySQL 9 - 0 pending - 0 in flight");
    a.side[0].drift = a.drift = 0;
    a.sold = 3;    /* two sales the stock row never saw */
    snprintf(a.unmoved, sizeof(a.unmoved), "o-2,o-3");
    audit_compute(&a);
    audit_why(&a, why, sizeof(why));
    assert_string_equal(why, "lost_updates 2: the ledger holds 3 unit(s), the stock moved 1 "
                             "(rows without a stock move: o-2,o-3)");
    a.sold = 1;    /* a sale given back by a settler, then committed */
    a.unmoved[0] = '\0';
    a.side[0].drift = a.drift = 1;
    snprintf(a.landed_late, sizeof(a.landed_late), "o-5");
    audit_compute(&a);
    audit_why(&a, why, sizeof(why));
    assert_string_equal(why, "given back as never landed, yet in the ledger (their write "
                             "committed after the settlement): o-5; redis-decr drift +1: "
                             "Redis 10, MySQL 9 - 0 pending - 0 in flight");
    a.sold = 3;
    snprintf(a.unmoved, sizeof(a.unmoved), "o-2,o-3");
    audit_compute(&a);
    char tiny[8];
    audit_why(&a, tiny, sizeof(tiny));
    assert_string_equal(tiny, "lost_up");
}

/* A user past the SKU's purchase limit is a violation of its own: the
 * stock figures can be exact and the audit still inconsistent. */
static void test_audit_over_limit(void **state)
{
    (void)state;
    char why[512];
    struct audit a = {.initial = 10, .stock = 6, .sold = 4, .limit = 2};
    audit_compute(&a);
    assert_true(a.consistent);
    a.over_limit = 1;
    snprintf(a.over_limit_users, sizeof(a.over_limit_users), "u1=4");
    audit_compute(&a);
    assert_false(a.consistent);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    audit_why(&a, why, sizeof(why));
    assert_string_equal(why, "over_limit 1: user(s) hold more than the limit of 2 per user "
                             "(u1=4)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audit_table),
        cmocka_unit_test(test_audit_drift),
        cmocka_unit_test(test_audit_holds),
        cmocka_unit_test(test_audit_why),
        cmocka_unit_test(test_audit_over_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
