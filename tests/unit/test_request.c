/* Request validation: identifiers, and labelled tables of bodies for
 * deduct, seed and release. Error texts are checked loosely (they name the
 * field) so wording can change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "stock/request.h"

#define A16 "aaaaaaaaaaaaaaaa"
#define A64 A16 A16 A16 A16
#define A65 A64 "a"

static const struct req_defaults defaults = {.lock_wait_ms = 3000};

/* ---- req_check_id ----------------------------------------------------- */

static void test_check_id(void **state)
{
    (void)state;
    static const struct { const char *label, *id; int ok; } cases[] = {
        {"minimal",            "A",            1},
        {"typical sku",        "SKU-1",        1},
        {"punctuation",        "o-42_x.y:z",   1},
        {"tilde",              "a~b",          0},
        {"space",              "a b",          0},
        {"trailing space",     "SKU-1 ",       0},
        {"UTF-8",              "caf\xc3\xa9",  0},
        {"semicolon",          "a;b",          0},
        {"star",               "a*b",          0},
        {"64 bytes",           A64,            1},
        {"65 bytes",           A65,            0},
        {"empty",              "",             0},
        {"NULL",               NULL,           0},
        {"control char",       "a\x01" "b",    0},
        {"tab",                "a\tb",         0},
        {"newline",            "a\n",          0},
        {"DEL",                "a\x7f",        0},
        {"slash",              "a/b",          0},
        {"question mark",      "a?b",          0},
        {"leading slash",      "/etc",         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[160] = "";
        int rc = req_check_id("order_id", cases[i].id, err, sizeof err);
        if ((rc == 0) != cases[i].ok)
            fail_msg("%s: rc %d, want %s (err: %s)", cases[i].label, rc,
                     cases[i].ok ? "valid" : "invalid", err);
        if (!cases[i].ok && !strstr(err, "order_id"))
            fail_msg("%s: error does not name the field: %s", cases[i].label, err);
    }
}

/* ---- deduct: valid bodies --------------------------------------------- */

/* The sale's own fields; anything else is counted in nextra for the chosen
 * guard to accept or refuse (tests/unit/test_guard_opts.c). */
struct deduct_ok {
    const char *label, *body;
    const char *sku, *order_id, *user_id, *guard;
    long qty, hold_ms, lock_wait_ms;
    int nextra;
};

static const struct deduct_ok deduct_ok_cases[] = {
    {"valid minimal: defaults everywhere", "{\"sku\":\"SKU-1\"}",
     "SKU-1", "", "", "", 1, 0, 3000, 0},
    {"API example",
     "{\"sku\":\"SKU-1\",\"qty\":1,\"order_id\":\"o-42\",\"guard\":\"for-update\",\"hold_ms\":0}",
     "SKU-1", "o-42", "", "for-update", 1, 0, 3000, 0},
    {"every sale field set",
     "{\"sku\":\"S\",\"qty\":1000,\"order_id\":\"o\",\"user_id\":\"u-7\",\"guard\":\"redis-lock\","
     "\"hold_ms\":10000,\"lock_wait_ms\":0}",
     "S", "o", "u-7", "redis-lock", 1000, 10000, 0, 0},
    {"lock options are the guard's: counted, not read",
     "{\"sku\":\"S\",\"lock_ttl_ms\":5,\"watchdog\":false,\"release\":\"plain-del\","
     "\"acquire\":\"setnx-then-expire\",\"fencing\":true,\"replicas_ack\":2,\"fair\":true}",
     "S", "", "", "", 1, 0, 3000, 7},
    {"an unknown field is counted too", "{\"sku\":\"S\",\"lock_wiat_ms\":5}",
     "S", "", "", "", 1, 0, 3000, 1},
    {"upper bounds", "{\"sku\":\"S\",\"lock_wait_ms\":60000}",
     "S", "", "", "", 1, 0, 60000, 0},
    {"64-byte sku and order_id", "{\"sku\":\"" A64 "\",\"order_id\":\"" A64 "\"}",
     A64, A64, "", "", 1, 0, 3000, 0},
    {"unknown guard name left to the service", "{\"sku\":\"S\",\"guard\":\"no-such\"}",
     "S", "", "", "no-such", 1, 0, 3000, 0},
    {"whitespace around", " \n{ \"sku\" : \"S\" , \"qty\" : 7 }\n ",
     "S", "", "", "", 7, 0, 3000, 0},
};

/* A SKU as a path segment: its length is given, the bytes after it (the
 * rest of the path) are not read. */
static void test_check_sku_segment(void **state)
{
    (void)state;
    static const struct {
        const char *label, *path;
        size_t n;
        int ok;
        const char *err_has;
    } cases[] = {
        {"plain", "SKU-1/audit", 5, 1, NULL},
        {"64 bytes", A64 "/audit", 64, 1, NULL},
        {"65 bytes", A65, 65, 0, "1..64 bytes"},
        {"far over", A65 A65, 130, 0, "1..64 bytes"},
        {"bad byte", "SK U", 4, 0, "byte 0x20 at 2"},
        {"stops at n", "SKU!", 3, 1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        int rc = req_check_sku_n(cases[i].path, cases[i].n, err, sizeof err);
        if ((rc == 0) != cases[i].ok || (cases[i].err_has && !strstr(err, cases[i].err_has)))
            fail_msg("%s: rc %d err \"%s\"", cases[i].label, rc, err);
    }
}

static void test_deduct_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof deduct_ok_cases / sizeof deduct_ok_cases[0]; i++) {
        const struct deduct_ok *c = &deduct_ok_cases[i];
        struct deduct_req r;
        char guard[32], err[160] = "";
        int nextra = -1;
        memset(&r, 0x7e, sizeof r);
        memset(guard, 'x', sizeof guard);
        if (req_parse_deduct(c->body, strlen(c->body), &defaults, &r, guard,
                             sizeof guard, &nextra, err, sizeof err) != 0)
            fail_msg("%s: rejected: %s", c->label, err);
        if (strcmp(r.sku, c->sku) || strcmp(r.order_id, c->order_id) ||
            strcmp(r.user_id, c->user_id) || strcmp(guard, c->guard))
            fail_msg("%s: sku '%s' order_id '%s' user_id '%s' guard '%s'", c->label, r.sku,
                     r.order_id, r.user_id, guard);
        if (r.qty != c->qty || r.hold_ms != c->hold_ms || r.lock_wait_ms != c->lock_wait_ms)
            fail_msg("%s: qty %ld hold %ld wait %ld", c->label, r.qty, r.hold_ms,
                     r.lock_wait_ms);
        if (nextra != c->nextra || r.opts != NULL || r.fencing || r.fence)
            fail_msg("%s: nextra %d (want %d), opts %p, fencing %d, fence %llu", c->label,
                     nextra, c->nextra, r.opts, r.fencing, r.fence);
    }
}

/* The sale's own fields, in the order the 400 for a guard lists them. */
static void test_deduct_common_fields(void **state)
{
    (void)state;
    static const char *const want[] = {"sku",   "qty",     "order_id",     "user_id",
                                       "guard", "hold_ms", "lock_wait_ms", "limit_check"};
    assert_int_equal(req_deduct_nfields, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < req_deduct_nfields; i++) {
        assert_string_equal(req_deduct_fields[i], want[i]);
        assert_true(req_deduct_field(want[i]));
    }
    assert_false(req_deduct_field("lock_ttl_ms"));
    assert_false(req_deduct_field("fencing"));
    assert_false(req_deduct_field(""));
}

/* limit_check: absent and "atomic" are the default, "separate" the
 * field's defect (limits.h). */
static void test_deduct_limit_check(void **state)
{
    (void)state;
    static const struct { const char *body; int separate; } cases[] = {
        {"{\"sku\":\"S\"}", 0},
        {"{\"sku\":\"S\",\"limit_check\":\"atomic\"}", 0},
        {"{\"sku\":\"S\",\"limit_check\":\"separate\"}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct deduct_req r;
        char guard[32], err[160] = "";
        int nextra;
        assert_int_equal(req_parse_deduct(cases[i].body, strlen(cases[i].body), &defaults, &r,
                                          guard, sizeof guard, &nextra, err, sizeof err), 0);
        assert_int_equal(r.limit_separate, cases[i].separate);
        assert_int_equal(r.limit, 0);   /* the entry point reads it, never the body */
        assert_int_equal(nextra, 0);
    }
}

static void test_deduct_uses_len_not_nul(void **state)
{
    (void)state;
    /* The body is (pointer, length): bytes past len are not read. */
    const char body[] = "{\"sku\":\"S\"}GARBAGE";
    struct deduct_req r;
    char guard[32], err[160];
    int nextra;
    assert_int_equal(req_parse_deduct(body, 11, &defaults, &r, guard, sizeof guard, &nextra,
                                      err, sizeof err), 0);
    assert_string_equal(r.sku, "S");
    assert_int_not_equal(req_parse_deduct(body, strlen(body), &defaults, &r, guard,
                                          sizeof guard, &nextra, err, sizeof err), 0);
}

static void test_deduct_defaults_follow_instance(void **state)
{
    (void)state;
    const struct req_defaults d = {.lock_wait_ms = 123};
    const char *body = "{\"sku\":\"S\"}";
    struct deduct_req r, g;
    char guard[32], err[160];
    int nextra;
    assert_int_equal(req_parse_deduct(body, strlen(body), &d, &r, guard, sizeof guard, &nextra,
                                      err, sizeof err), 0);
    assert_int_equal(r.lock_wait_ms, 123);

    /* The seeds' GET deduction gets the same defaults and no sku/order. */
    memset(&g, 0x7e, sizeof g);
    req_default_deduct(&d, &g);
    assert_int_equal(g.qty, 1);
    assert_int_equal(g.hold_ms, 0);
    assert_int_equal(g.lock_wait_ms, 123);
    assert_null(g.opts);
    assert_string_equal(g.sku, "");
    assert_string_equal(g.order_id, "");
    assert_string_equal(g.user_id, "");
}

/* ---- deduct: invalid bodies ------------------------------------------- */

/* A bare scalar is refused by the JSON layer ("'[' or '{' expected"). */
static const struct { const char *label, *body, *mention; } deduct_bad_cases[] = {
    {"malformed JSON",           "{\"sku\":",                          "JSON"},
    {"not JSON at all",          "sku=S&qty=1",                        "JSON"},
    {"trailing garbage",         "{\"sku\":\"S\"} x",                  "JSON"},
    {"array body",               "[{\"sku\":\"S\"}]",                  "object"},
    {"string body",              "\"S\"",                              "{"},
    {"number body",              "42",                                 "{"},
    {"limit_check unknown",      "{\"sku\":\"S\",\"limit_check\":\"lax\"}", "limit_check"},
    {"limit_check not a string", "{\"sku\":\"S\",\"limit_check\":1}",     "limit_check"},
    {"null body",                "null",                               "{"},
    {"empty object",             "{}",                                 "sku"},
    {"qty 0",                    "{\"sku\":\"S\",\"qty\":0}",          "qty"},
    {"qty -1",                   "{\"sku\":\"S\",\"qty\":-1}",         "qty"},
    {"qty 1001",                 "{\"sku\":\"S\",\"qty\":1001}",       "qty"},
    {"qty as string",            "{\"sku\":\"S\",\"qty\":\"1\"}",      "qty"},
    {"qty 1.5",                  "{\"sku\":\"S\",\"qty\":1.5}",        "qty"},
    {"qty 1.0 is not an integer", "{\"sku\":\"S\",\"qty\":1.0}",       "qty"},
    {"qty true",                 "{\"sku\":\"S\",\"qty\":true}",       "qty"},
    {"qty null",                 "{\"sku\":\"S\",\"qty\":null}",       "qty"},
    {"qty huge",                 "{\"sku\":\"S\",\"qty\":9223372036854775807}", "qty"},
    {"qty beyond int64",         "{\"sku\":\"S\",\"qty\":99999999999999999999}", "JSON"},
    {"hold_ms 10001",            "{\"sku\":\"S\",\"hold_ms\":10001}",  "hold_ms"},
    {"hold_ms -1",               "{\"sku\":\"S\",\"hold_ms\":-1}",     "hold_ms"},
    {"lock_wait_ms 60001",       "{\"sku\":\"S\",\"lock_wait_ms\":60001}", "lock_wait_ms"},
    {"lock_wait_ms -1",          "{\"sku\":\"S\",\"lock_wait_ms\":-1}", "lock_wait_ms"},
    {"sku missing",              "{\"qty\":1}",                        "sku"},
    {"sku empty",                "{\"sku\":\"\"}",                     "sku"},
    {"sku 65 bytes",             "{\"sku\":\"" A65 "\"}",              "sku"},
    {"sku control char",         "{\"sku\":\"a\\u0001b\"}",            "sku"},
    {"sku newline",              "{\"sku\":\"a\\nb\"}",                "sku"},
    {"sku NUL escape",           "{\"sku\":\"a\\u0000b\"}",            "JSON"},
    {"sku with slash",           "{\"sku\":\"a/b\"}",                  "sku"},
    {"sku with question mark",   "{\"sku\":\"a?b\"}",                  "sku"},
    {"sku number",               "{\"sku\":42}",                       "sku"},
    {"sku null",                 "{\"sku\":null}",                     "sku"},
    {"order_id with slash",      "{\"sku\":\"S\",\"order_id\":\"o/1\"}", "order_id"},
    {"order_id empty",           "{\"sku\":\"S\",\"order_id\":\"\"}",  "order_id"},
    {"order_id 65 bytes",        "{\"sku\":\"S\",\"order_id\":\"" A65 "\"}", "order_id"},
    {"order_id number",          "{\"sku\":\"S\",\"order_id\":42}",    "order_id"},
    {"user_id with slash",       "{\"sku\":\"S\",\"user_id\":\"u/1\"}", "user_id"},
    {"user_id number",           "{\"sku\":\"S\",\"user_id\":7}",     "user_id"},
    {"guard empty",              "{\"sku\":\"S\",\"guard\":\"\"}",     "guard"},
    {"guard not a string",       "{\"sku\":\"S\",\"guard\":1}",        "guard"},
    {"guard too long",           "{\"sku\":\"S\",\"guard\":\"" A64 "\"}", "guard"},
    {"duplicate sku",            "{\"sku\":\"A\",\"sku\":\"B\"}",      "duplicate"},
    {"duplicate qty",            "{\"sku\":\"A\",\"qty\":1,\"qty\":1000}", "duplicate"},
};

static void test_deduct_invalid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof deduct_bad_cases / sizeof deduct_bad_cases[0]; i++) {
        const char *body = deduct_bad_cases[i].body;
        struct deduct_req r;
        char guard[32], err[160] = "";
        memset(guard, 'x', sizeof guard);
        int nextra;
        if (req_parse_deduct(body, strlen(body), &defaults, &r, guard, sizeof guard, &nextra,
                             err, sizeof err) == 0)
            fail_msg("%s: accepted %s", deduct_bad_cases[i].label, body);
        if (!err[0] || !strstr(err, deduct_bad_cases[i].mention))
            fail_msg("%s: error \"%s\" does not mention %s", deduct_bad_cases[i].label,
                     err, deduct_bad_cases[i].mention);
        if (guard[0] != '\0')
            fail_msg("%s: guard left as \"%.*s\" after an error",
                     deduct_bad_cases[i].label, (int)sizeof guard, guard);
    }
}

static void test_deduct_empty_body(void **state)
{
    (void)state;
    static const struct { const char *label, *body; size_t len; } cases[] = {
        {"NULL body", NULL, 0},
        {"zero length", "{\"sku\":\"S\"}", 0},
        {"empty string", "", 0},
        {"only spaces", "   ", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct deduct_req r;
        char guard[32], err[160] = "";
        int nextra;
        if (req_parse_deduct(cases[i].body, cases[i].len, &defaults, &r, guard,
                             sizeof guard, &nextra, err, sizeof err) == 0)
            fail_msg("%s: accepted", cases[i].label);
        if (!err[0])
            fail_msg("%s: no error text", cases[i].label);
    }
}

/* ---- seed ------------------------------------------------------------- */

static void test_seed(void **state)
{
    (void)state;
    static const struct {
        const char *label, *body;
        int ok;
        long long stock;
        int segments;
        const char *mention;   /* for errors */
    } cases[] = {
        {"API example",        "{\"stock\":1000,\"segments\":10}", 1, 1000, 10, NULL},
        {"segments default",   "{\"stock\":1000}",                 1, 1000, REQ_SEGMENTS_DEFAULT, NULL},
        {"stock 0",            "{\"stock\":0}",                    1, 0, REQ_SEGMENTS_DEFAULT, NULL},
        {"stock max",          "{\"stock\":1000000000}",           1, REQ_STOCK_MAX, REQ_SEGMENTS_DEFAULT, NULL},
        {"segments 1",         "{\"stock\":5,\"segments\":1}",     1, 5, 1, NULL},
        {"segments 64",        "{\"stock\":5,\"segments\":64}",    1, 5, 64, NULL},
        {"stock -1",           "{\"stock\":-1}",                   0, 0, 0, "stock"},
        {"stock missing",      "{\"segments\":4}",                 0, 0, 0, "stock"},
        {"stock over max",     "{\"stock\":1000000001}",           0, 0, 0, "stock"},
        {"stock string",       "{\"stock\":\"1000\"}",             0, 0, 0, "stock"},
        {"stock real",         "{\"stock\":10.5}",                 0, 0, 0, "stock"},
        {"stock null",         "{\"stock\":null}",                 0, 0, 0, "stock"},
        {"segments 0",         "{\"stock\":5,\"segments\":0}",     0, 0, 0, "segments"},
        {"segments 65",        "{\"stock\":5,\"segments\":65}",    0, 0, 0, "segments"},
        {"segments -1",        "{\"stock\":5,\"segments\":-1}",    0, 0, 0, "segments"},
        {"segments string",    "{\"stock\":5,\"segments\":\"4\"}", 0, 0, 0, "segments"},
        {"duplicate stock",    "{\"stock\":5,\"stock\":6}",        0, 0, 0, "duplicate"},
        {"array body",         "[1000]",                           0, 0, 0, "object"},
        {"malformed",          "{\"stock\":}",                     0, 0, 0, "JSON"},
        {"empty body",         "",                                 0, 0, 0, "body"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long long stock = -42;
        int segments = -42;
        char err[160] = "";
        int rc = req_parse_seed(cases[i].body, strlen(cases[i].body), &stock,
                                &segments, err, sizeof err);
        if ((rc == 0) != cases[i].ok)
            fail_msg("%s: rc %d (err: %s)", cases[i].label, rc, err);
        if (cases[i].ok && (stock != cases[i].stock || segments != cases[i].segments))
            fail_msg("%s: stock %lld segments %d, want %lld %d", cases[i].label, stock,
                     segments, cases[i].stock, cases[i].segments);
        if (!cases[i].ok && !strstr(err, cases[i].mention))
            fail_msg("%s: error \"%s\" does not mention %s", cases[i].label, err,
                     cases[i].mention);
    }
    /* The purchase limit: 0..REQ_LIMIT_MAX, absent = 0 (no limit). */
    static const struct { const char *body; int ok; long long limit; } limits[] = {
        {"{\"stock\":5}", 1, 0},
        {"{\"stock\":5,\"limit_per_user\":0}", 1, 0},
        {"{\"stock\":5,\"limit_per_user\":2}", 1, 2},
        {"{\"stock\":5,\"limit_per_user\":1000000}", 1, 1000000},
        {"{\"stock\":5,\"limit_per_user\":1000001}", 0, 0},
        {"{\"stock\":5,\"limit_per_user\":-1}", 0, 0},
        {"{\"stock\":5,\"limit_per_user\":\"2\"}", 0, 0},
        {"{\"stock\":5,\"limit_per_user\":1.5}", 0, 0},
        {"{\"stock\":5,\"limit_per_user\":null}", 0, 0},
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        long long st, lim = -42;
        int seg;
        char e[160] = "";
        int rc = req_parse_seed_limit(limits[i].body, strlen(limits[i].body), &st, &seg, &lim, e,
                                      sizeof e);
        if ((rc == 0) != limits[i].ok || (rc == 0 && lim != limits[i].limit))
            fail_msg("%s: rc %d limit %lld (err: %s)", limits[i].body, rc, lim, e);
        if (rc != 0 && !strstr(e, "limit_per_user"))
            fail_msg("%s: error \"%s\" does not name limit_per_user", limits[i].body, e);
    }
    /* NULL body is the empty body. */
    long long stock;
    int segments;
    char err[160] = "";
    assert_int_not_equal(req_parse_seed(NULL, 0, &stock, &segments, err, sizeof err), 0);
    assert_true(err[0] != '\0');
}

/* ---- release ---------------------------------------------------------- */

static void test_release(void **state)
{
    (void)state;
    static const struct {
        const char *label, *body;
        int ok;
        const char *want;      /* order_id when ok, mention when not */
    } cases[] = {
        {"API example",          "{\"order_id\":\"o-42\"}",               1, "o-42"},
        {"64 bytes",             "{\"order_id\":\"" A64 "\"}",           1, A64},
        {"extra sku ignored",    "{\"order_id\":\"o\",\"sku\":\"S\"}",  1, "o"},
        {"without order_id",     "{\"sku\":\"S\"}",                       0, "order_id"},
        {"empty object",         "{}",                                    0, "order_id"},
        {"order_id empty",       "{\"order_id\":\"\"}",                   0, "order_id"},
        {"order_id 65 bytes",    "{\"order_id\":\"" A65 "\"}",           0, "order_id"},
        {"order_id slash",       "{\"order_id\":\"a/b\"}",                0, "order_id"},
        {"order_id control",     "{\"order_id\":\"a\\u001fb\"}",          0, "order_id"},
        {"order_id number",      "{\"order_id\":42}",                     0, "order_id"},
        {"order_id null",        "{\"order_id\":null}",                   0, "order_id"},
        {"duplicate order_id",   "{\"order_id\":\"a\",\"order_id\":\"b\"}", 0, "duplicate"},
        {"array body",           "[\"o-42\"]",                            0, "object"},
        {"malformed",            "{\"order_id\"",                         0, "JSON"},
        {"empty body",           "",                                      0, "body"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char id[STOCK_ID_MAX + 1] = "untouched", err[160] = "";
        int rc = req_parse_release(cases[i].body, strlen(cases[i].body), id, sizeof id,
                                   err, sizeof err);
        if ((rc == 0) != cases[i].ok)
            fail_msg("%s: rc %d (err: %s)", cases[i].label, rc, err);
        if (cases[i].ok && strcmp(id, cases[i].want) != 0)
            fail_msg("%s: order_id \"%s\", want \"%s\"", cases[i].label, id, cases[i].want);
        if (!cases[i].ok && !strstr(err, cases[i].want))
            fail_msg("%s: error \"%s\" does not mention %s", cases[i].label, err,
                     cases[i].want);
    }
}

static void test_errors_fit_small_buffers(void **state)
{
    (void)state;
    /* err is bounded by errlen and always terminated. */
    char err[8];
    memset(err, 'x', sizeof err);
    assert_int_not_equal(req_check_id("order_id", "", err, sizeof err), 0);
    assert_int_equal(strlen(err), sizeof err - 1);
    struct deduct_req r;
    char guard[32];
    int nextra;
    const char *body = "{\"qty\":\"x\"}";
    memset(err, 'x', sizeof err);
    assert_int_not_equal(req_parse_deduct(body, strlen(body), &defaults, &r, guard,
                                          sizeof guard, &nextra, err, sizeof err), 0);
    assert_true(memchr(err, '\0', sizeof err) != NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_id),
        cmocka_unit_test(test_check_sku_segment),
        cmocka_unit_test(test_deduct_valid),
        cmocka_unit_test(test_deduct_common_fields),
        cmocka_unit_test(test_deduct_limit_check),
        cmocka_unit_test(test_deduct_uses_len_not_nul),
        cmocka_unit_test(test_deduct_defaults_follow_instance),
        cmocka_unit_test(test_deduct_invalid),
        cmocka_unit_test(test_deduct_empty_body),
        cmocka_unit_test(test_seed),
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_errors_fit_small_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
