/* The HTTP edge's pure rules (lib/base/edge.h): UTF-8, the JSON media type,
 * the body rule per method, the bearer check. Labelled tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/edge.h"

static void test_utf8(void **state)
{
    static const struct { const char *label, *s; size_t n; int ok; } cases[] = {
        {"empty",                 "",                  0, 1},
        {"ascii",                 "SKU-1",             5, 1},
        {"2-byte e-acute",        "\xc3\xa9",          2, 1},
        {"3-byte euro",           "\xe2\x82\xac",      3, 1},
        {"4-byte max U+10FFFF",   "\xf4\x8f\xbf\xbf",  4, 1},
        {"NUL inside",            "a\0b",              3, 1},
        {"lone continuation",     "\x80",              1, 0},
        {"0xFF",                  "\xff",              1, 0},
        {"overlong slash C0 AF",  "\xc0\xaf",          2, 0},
        {"overlong C1",           "\xc1\xbf",          2, 0},
        {"overlong 3-byte",       "\xe0\x80\xaf",      3, 0},
        {"overlong 4-byte",       "\xf0\x80\x80\xaf",  4, 0},
        {"surrogate D800",        "\xed\xa0\x80",      3, 0},
        {"above U+10FFFF",        "\xf4\x90\x80\x80",  4, 0},
        {"F5 lead",               "\xf5\x80\x80\x80",  4, 0},
        {"truncated 2-byte",      "a\xc3",             2, 0},
        {"truncated 4-byte",      "\xf0\x9f\x98",      3, 0},
        {"bad continuation",      "\xc3\x28",          2, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = edge_utf8_valid(cases[i].s, cases[i].n);
        if (got != cases[i].ok)
            fail_msg("utf8 '%s': got %d", cases[i].label, got);
    }
    assert_int_equal(edge_utf8_valid(NULL, 0), 1);
}

static void test_json_type(void **state)
{
    static const struct { const char *ct; int ok; } cases[] = {
        {"application/json", 1},
        {"Application/JSON", 1},
        {"application/json; charset=utf-8", 1},
        {"  application/json  ", 1},
        {"application/json;", 1},
        {"application/jsonx", 0},
        {"application/json-patch+json", 0},
        {"text/plain", 0},
        {"application/x-www-form-urlencoded", 0},
        {"multipart/form-data; boundary=x", 0},
        {"", 0},
        {NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (edge_is_json_type(cases[i].ct) != cases[i].ok)
            fail_msg("content type '%s'", cases[i].ct ? cases[i].ct : "(null)");
}

static void test_body_rule(void **state)
{
    struct edge_verdict v;
    assert_int_equal(edge_check_body("POST", "text/plain", "{}", 2, &v), 415);
    assert_string_equal(v.code, "unsupported_media_type");
    assert_int_equal(edge_check_body("PUT", NULL, NULL, 0, &v), 415);
    assert_int_equal(edge_check_body("POST", "application/json", "{}", 2, &v), 0);
    /* GET and friends carry no body we parse: no media type needed. */
    assert_int_equal(edge_check_body("GET", NULL, NULL, 0, &v), 0);
    assert_int_equal(edge_check_body("DELETE", "text/plain", NULL, 0, &v), 0);
    assert_int_equal(edge_check_body("POST", "application/json", "\"\xff\"", 3, &v), 400);
    assert_string_equal(v.code, "bad_request");
    /* The detail is always UTF-8, whatever the field name held. */
    assert_int_equal(edge_check_text("header \xff\xfe", "\xc0", 1, &v), 400);
    assert_int_equal(edge_utf8_valid(v.detail, strlen(v.detail)), 1);
    assert_non_null(strstr(v.detail, "not valid UTF-8"));
}

static void test_bearer(void **state)
{
    static const struct { const char *label, *authz, *token; int want; } cases[] = {
        {"no token configured",   NULL,                 "",      EDGE_AUTH_OK},
        {"no token, any header",  "Bearer x",           NULL,    EDGE_AUTH_OK},
        {"right",                 "Bearer s3cret",      "s3cret", EDGE_AUTH_OK},
        {"scheme case",           "bearer s3cret",      "s3cret", EDGE_AUTH_OK},
        {"missing",               NULL,                 "s3cret", EDGE_AUTH_MISSING},
        {"basic scheme",          "Basic czNjcmV0",     "s3cret", EDGE_AUTH_MISSING},
        {"bare token",            "s3cret",             "s3cret", EDGE_AUTH_MISSING},
        {"wrong",                 "Bearer s3cres",      "s3cret", EDGE_AUTH_WRONG},
        {"prefix of token",       "Bearer s3cre",       "s3cret", EDGE_AUTH_WRONG},
        {"token plus more",       "Bearer s3crets",     "s3cret", EDGE_AUTH_WRONG},
        {"empty bearer",          "Bearer ",            "s3cret", EDGE_AUTH_WRONG},
        {"token case matters",    "Bearer S3CRET",      "s3cret", EDGE_AUTH_WRONG},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = edge_bearer_check(cases[i].authz, cases[i].token);
        if (got != cases[i].want)
            fail_msg("bearer '%s': got %d want %d", cases[i].label, got, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_json_type),
        cmocka_unit_test(test_body_rule),
        cmocka_unit_test(test_bearer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
