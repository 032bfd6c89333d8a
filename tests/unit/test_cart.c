/* Carts: the body's lines (labelled tables of good and bad bodies), the
 * plan (each SKU once, its lines summed, sorted unless as-given) and the
 * per-line remaining. Error texts are checked loosely (they name the
 * field). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "stock/cart.h"

/* Parse body into c; returns cart_from's answer, err filled. */
static int parse(const char *body, struct cart *c, char *err, size_t errlen)
{
    json_t *o = json_loads(body, 0, NULL);
    assert_non_null(o);
    memset(c, 0, sizeof(*c));
    err[0] = '\0';
    int rc = cart_from(o, c, err, errlen);
    json_decref(o);
    return rc;
}

static void test_cart_bodies(void **state)
{
    (void)state;
    static const struct { const char *label, *body; int rc; const char *names; } cases[] = {
        {"single form",       "{\"sku\":\"A\",\"qty\":2}",                       1, NULL},
        {"one line",          "{\"lines\":[{\"sku\":\"A\",\"qty\":2}]}",          0, NULL},
        {"two lines",         "{\"lines\":[{\"sku\":\"A\",\"qty\":1},{\"sku\":\"B\",\"qty\":3}]}", 0, NULL},
        {"variants",          "{\"lines\":[{\"sku\":\"A\",\"qty\":1}],\"line_check\":\"per-line\","
                              "\"lock_order\":\"as-given\"}",                      0, NULL},
        {"lines and sku",     "{\"lines\":[{\"sku\":\"A\",\"qty\":1}],\"sku\":\"A\"}", -1, "sku"},
        {"lines and qty",     "{\"lines\":[{\"sku\":\"A\",\"qty\":1}],\"qty\":1}",  -1, "qty"},
        {"empty",             "{\"lines\":[]}",                                   -1, "1..50"},
        {"not an array",      "{\"lines\":\"A\"}",                                -1, "lines"},
        {"line not object",   "{\"lines\":[1]}",                                  -1, "lines[0]"},
        {"bad sku",           "{\"lines\":[{\"sku\":\"a b\",\"qty\":1}]}",        -1, "lines[0].sku"},
        {"sku missing",       "{\"lines\":[{\"qty\":1}]}",                        -1, "lines[0]"},
        {"qty 0",             "{\"lines\":[{\"sku\":\"A\",\"qty\":0}]}",          -1, "lines[0].qty"},
        {"qty 1001",          "{\"lines\":[{\"sku\":\"A\",\"qty\":1001}]}",       -1, "lines[0].qty"},
        {"qty string",        "{\"lines\":[{\"sku\":\"A\",\"qty\":\"1\"}]}",      -1, "lines[0]"},
        {"unknown in line",   "{\"lines\":[{\"sku\":\"A\",\"qty\":1,\"x\":1}]}",  -1, "\"x\""},
        {"second line bad",   "{\"lines\":[{\"sku\":\"A\",\"qty\":1},{\"sku\":\"\",\"qty\":1}]}", -1, "lines[1].sku"},
        {"bad line_check",    "{\"lines\":[{\"sku\":\"A\",\"qty\":1}],\"line_check\":\"x\"}", -1, "line_check"},
        {"bad lock_order",    "{\"lines\":[{\"sku\":\"A\",\"qty\":1}],\"lock_order\":1}", -1, "lock_order"},
        {"variant w/o lines", "{\"sku\":\"A\",\"lock_order\":\"sorted\"}",        -1, "lock_order"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cart c;
        char err[256];
        int rc = parse(cases[i].body, &c, err, sizeof(err));
        if (rc != cases[i].rc)
            fail_msg("%s: cart_from %d, want %d (%s)", cases[i].label, rc, cases[i].rc, err);
        if (cases[i].names && !strstr(err, cases[i].names))
            fail_msg("%s: \"%s\" does not name %s", cases[i].label, err, cases[i].names);
    }
}

static void test_cart_limit(void **state)
{
    (void)state;
    char body[4096];
    for (int n = 50; n <= 51; n++) {
        size_t off = (size_t)snprintf(body, sizeof(body), "{\"lines\":[");
        for (int i = 0; i < n; i++)
            off += (size_t)snprintf(body + off, sizeof(body) - off,
                                    "%s{\"sku\":\"S%d\",\"qty\":1}", i ? "," : "", i);
        snprintf(body + off, sizeof(body) - off, "]}");
        struct cart c;
        char err[256];
        assert_int_equal(parse(body, &c, err, sizeof(err)), n == 50 ? 0 : -1);
        if (n == 50)
            assert_int_equal(c.nlines, 50);
    }
}

static void test_cart_plan(void **state)
{
    (void)state;
    struct cart c;
    char err[256];
    assert_int_equal(parse("{\"lines\":[{\"sku\":\"B\",\"qty\":1},{\"sku\":\"A\",\"qty\":2},"
                           "{\"sku\":\"B\",\"qty\":4}]}", &c, err, sizeof(err)), 0);
    assert_int_equal(c.check, CART_CHECK_SUMMED);
    assert_int_equal(c.order, CART_ORDER_SORTED);
    struct cart_touch t[CART_LINES_MAX];
    int nt = cart_plan(&c, t);
    assert_int_equal(nt, 2);
    assert_string_equal(t[0].sku, "A");       /* sorted */
    assert_int_equal(t[0].qty, 2);
    assert_string_equal(t[1].sku, "B");
    assert_int_equal(t[1].qty, 5);            /* summed */
    /* remaining per line, in the cart's order: B 10-1, A 7-2, B 9-4 */
    t[0].before = 7;
    t[1].before = 10;
    struct cart_res res;
    memset(&res, 0, sizeof(res));
    cart_fill_remaining(&c, t, nt, &res);
    assert_int_equal(res.remaining[0], 9);
    assert_int_equal(res.remaining[1], 5);
    assert_int_equal(res.remaining[2], 5);

    c.order = CART_ORDER_AS_GIVEN;
    nt = cart_plan(&c, t);
    assert_int_equal(nt, 2);
    assert_string_equal(t[0].sku, "B");       /* first appearance */
    assert_string_equal(t[1].sku, "A");
}

static void test_cart_fields(void **state)
{
    (void)state;
    assert_true(cart_field("lines"));
    assert_true(cart_field("line_check"));
    assert_true(cart_field("lock_order"));
    assert_false(cart_field("sku"));
    assert_false(cart_field("line"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cart_bodies),
        cmocka_unit_test(test_cart_limit),
        cmocka_unit_test(test_cart_plan),
        cmocka_unit_test(test_cart_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
