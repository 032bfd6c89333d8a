/* What purchase limits cost a SKU that has none: nothing. A sale of an
 * unlimited SKU (with a user_id, so the limit's path is not skipped by its
 * absence) runs the statements it ran before limits existed: the limit
 * comes back in the statement the guard runs anyway, never in a read of
 * its own. Counted with MariaDB's global Questions (statements the server
 * received) around N sequential sales, less what the counting itself
 * sends, measured the same way with no sale in between. Each ceiling is
 * the guard's count before limits existed; one more per sale (the limit
 * read once per deduction) is N statements over it, far past the slack
 * for a stray background statement (0.5 per sale: on the tree before
 * this test, conditional-update 5.0, for-update 6.05, segmented 6.15). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SALES 40

static int group_setup(void **state) { return it_setup(); }

static long long questions(void)
{
    return it_sql_value("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                        "WHERE VARIABLE_NAME='QUESTIONS'");
}

/* The statements one Questions read adds (its client's own, and the
 * read): the smallest of a few reads with nothing else between. */
static long long read_cost(void)
{
    long long best = -1;
    for (int i = 0; i < 3; i++) {
        long long a = questions(), b = questions();
        if (a >= 0 && b >= a && (best < 0 || b - a < best))
            best = b - a;
    }
    return best;
}

/* Statements per sale of SALES sequential sales (unique orders and
 * users) of an unlimited SKU under guard. -1 when a sale did not sell. */
static double statements_per_sale(const char *guard, const char *sku, long long cost)
{
    char url[256], body[256];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    assert_int_equal(it_status("PUT", url, "{\"stock\":1000,\"limit_per_user\":0}"), 200);
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[0]);
    /* SALES sales first, uncounted: every worker's connection has made its
     * first transaction (the portable dialect's marker table) and prepared
     * the guard's statements, which a later sale does not repeat */
    long long before = 0;
    for (int i = -SALES; i < SALES; i++) {
        if (i == 0)
            before = questions();
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"qty\":1,\"user_id\":\"u%d\","
                 "\"order_id\":\"%s-%d\",\"guard\":\"%s\"}", sku, i, sku, i, guard);
        if (it_status("POST", url, body) != 200)
            return -1;
    }
    long long after = questions();
    return (double)(after - before - cost) / SALES;
}

/* The ceilings: each guard's statements per sale before limits existed
 * (sequential sales, no conflict to retry). */
static void test_unlimited_sale_costs_what_it_did(void **state)
{
    static const struct { const char *guard; double before; } ceil[] = {
        {"conditional-update", 4}, {"for-update", 5}, {"optimistic", 5},
        {"none", 5}, {"redis-lock", 6}, {"batched-update", 4}, {"segmented", 5},
    };
    /* The MySQL-portable dialect marks each transaction with a statement
     * of its own (DB_IN_OUR_TXN): one more per sale, limits or not. */
    const char *dialect = getenv("LAB_SQL_DIALECT");
    double txn_mark = dialect && strcmp(dialect, "mysql") == 0 ? 1 : 0;
    long long cost = read_cost();
    assert_true(cost >= 0);
    int over = 0;   /* every guard measured and printed, then the verdict */
    char worst[512] = "";
    for (size_t i = 0; i < sizeof(ceil) / sizeof(ceil[0]); i++) {
        char sku[48];
        snprintf(sku, sizeof(sku), "Cost-%zu", i);
        double per = statements_per_sale(ceil[i].guard, sku, cost);
        print_message("  %-20s %.2f statements per sale (before limits: %.0f)\n",
                      ceil[i].guard, per, ceil[i].before + txn_mark);
        /* slack: a few stray statements of the stack's own over SALES */
        if (per < 0 || per > ceil[i].before + txn_mark + 0.5) {
            over++;
            size_t w = strlen(worst);
            snprintf(worst + w, sizeof(worst) - w, " %s %.2f", ceil[i].guard, per);
        }
    }
    if (over)   /* last: what the runner's tail shows */
        print_message("  %d guard(s) over their count:%s\n", over, worst);
    assert_int_equal(over, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlimited_sale_costs_what_it_did),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
