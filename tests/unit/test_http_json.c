/* The pure response helpers of lib/http: error bodies, JSON and text
 * bodies, ownership. No server is started. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/http.h"

static void resp_clear(struct http_resp *r)
{
    free(r->text);
    memset(r, 0, sizeof(*r));
}

static void test_error_body_exact(void **state)
{
    (void)state;
    static const struct {
        const char *label;
        int status;
        const char *code, *arg, *want_detail;
    } cases[] = {
        {"plain",        400, "bad_request",   "qty",   "qty must be 1..1000"},
        {"quotes",       404, "unknown_sku",   "\"x\"", "\"x\" must be 1..1000"},
        {"backslash",    503, "lock_timeout",  "a\\b",  "a\\b must be 1..1000"},
        {"utf-8",        409, "out_of_stock",  "caf\xc3\xa9", "caf\xc3\xa9 must be 1..1000"},
        {"newline",      400, "bad_request",   "l1\nl2", "l1\nl2 must be 1..1000"},
        {"empty arg",    405, "method",        "",      " must be 1..1000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct http_resp r = {0};
        http_error(&r, cases[i].status, cases[i].code, "%s must be 1..%d",
                   cases[i].arg, 1000);
        if (r.status != cases[i].status || !r.text)
            fail_msg("%s: status %d, text %s", cases[i].label, r.status,
                     r.text ? r.text : "(null)");
        assert_string_equal(r.content_type, "application/json");

        json_error_t je;
        json_t *o = json_loads(r.text, JSON_REJECT_DUPLICATES, &je);
        if (!o)
            fail_msg("%s: body is not JSON (%s): %s", cases[i].label, je.text, r.text);
        assert_true(json_is_object(o));
        if (json_object_size(o) != 3)
            fail_msg("%s: %zu keys, want exactly ok/error/detail: %s", cases[i].label,
                     json_object_size(o), r.text);
        assert_true(json_is_false(json_object_get(o, "ok")));
        assert_string_equal(json_string_value(json_object_get(o, "error")), cases[i].code);
        const char *detail = json_string_value(json_object_get(o, "detail"));
        assert_non_null(detail);
        if (strcmp(detail, cases[i].want_detail) != 0)
            fail_msg("%s: detail \"%s\", want \"%s\"", cases[i].label, detail,
                     cases[i].want_detail);
        json_decref(o);
        resp_clear(&r);
    }
}

static void test_error_long_detail(void **state)
{
    (void)state;
    /* A detail longer than any internal buffer is cut, still valid JSON. */
    char big[4000];
    memset(big, 'd', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    struct http_resp r = {0};
    http_error(&r, 400, "bad_request", "%s", big);
    assert_int_equal(r.status, 400);
    json_t *o = json_loads(r.text, 0, NULL);
    assert_non_null(o);
    const char *detail = json_string_value(json_object_get(o, "detail"));
    assert_non_null(detail);
    assert_true(strlen(detail) > 0 && strlen(detail) < sizeof big);
    json_decref(o);
    resp_clear(&r);
}

static void test_error_detail_with_broken_utf8(void **state)
{
    (void)state;
    /* A detail quoting client bytes (jansson's "near '...'" stops at the
     * byte it refused, in the middle of a character) is still a 4xx with a
     * JSON body: the broken bytes become '?', the rest is kept. Found by
     * fuzz_edge: "invalid escape near '"s\xde\x9c4\\\xde'". */
    const char *cases[] = {"near '\\\xde'", ("a\xde\x9c" "b\xc3"), "\xff\xfe ok", "\xe2\x82x"};
    const char *want[] = {"near '\\?'", ("a\xde\x9c" "b?"), "?? ok", "??x"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct http_resp r = {0};
        http_error(&r, 400, "bad_request", "%s", cases[i]);
        assert_int_equal(r.status, 400);
        json_t *o = json_loads(r.text, 0, NULL);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "detail")), want[i]);
        json_decref(o);
        resp_clear(&r);
    }
}

static void test_json_steals_reference(void **state)
{
    (void)state;
    json_t *j = json_pack("{s:b,s:s,s:i}", "ok", 1, "sku", "SKU-1", "remaining", 41);
    assert_non_null(j);
    json_incref(j);                      /* keep our own reference to watch it */
    assert_int_equal(j->refcount, 2);
    struct http_resp r = {0};
    http_json(&r, 200, j);
    assert_int_equal(j->refcount, 1);    /* http_json dropped the one it was given */
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "application/json");
    assert_non_null(r.text);

    json_t *back = json_loads(r.text, 0, NULL);
    assert_non_null(back);
    assert_true(json_equal(back, j));
    assert_null(strchr(r.text, '\n'));   /* one line */
    json_decref(back);
    json_decref(j);
    resp_clear(&r);
}

static void test_json_null_is_500(void **state)
{
    (void)state;
    struct http_resp r = {0};
    http_json(&r, 200, NULL);
    assert_int_equal(r.status, 500);
    assert_non_null(r.text);
    json_t *o = json_loads(r.text, 0, NULL);
    assert_non_null(o);
    assert_true(json_is_false(json_object_get(o, "ok")));
    json_decref(o);
    resp_clear(&r);
}

static void test_text_replaces_body(void **state)
{
    (void)state;
    struct http_resp r = {0};
    /* Each call replaces the previous body; ASan reports a leak otherwise. */
    static const struct { const char *label, *ctype, *body; int status; } steps[] = {
        {"first text",      "text/plain; version=0.0.4", "a 1\n", 200},
        {"replaced by text", "text/plain",               "second", 201},
        {"empty body",       "text/plain",               "", 204},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        http_text(&r, steps[i].status, steps[i].ctype, strdup(steps[i].body));
        if (r.status != steps[i].status || strcmp(r.text, steps[i].body) != 0 ||
            strcmp(r.content_type, steps[i].ctype) != 0)
            fail_msg("%s: status %d body \"%s\" type %s", steps[i].label, r.status,
                     r.text, r.content_type);
    }
    /* JSON and errors replace text too, and text replaces them. */
    http_json(&r, 200, json_pack("{s:i}", "n", 1));
    assert_string_equal(r.text, "{\"n\":1}");
    http_error(&r, 409, "out_of_stock", "none left");
    assert_int_equal(r.status, 409);
    http_text(&r, 200, "text/plain", strdup("last"));
    assert_string_equal(r.text, "last");
    assert_string_equal(r.content_type, "text/plain");
    /* NULL text clears the body. */
    http_text(&r, 204, "text/plain", NULL);
    assert_null(r.text);
    resp_clear(&r);
}

static void test_stop_null(void **state)
{
    (void)state;
    http_stop(NULL);   /* create/free pairs accept NULL */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_body_exact),
        cmocka_unit_test(test_error_long_detail),
        cmocka_unit_test(test_error_detail_with_broken_utf8),
        cmocka_unit_test(test_json_steals_reference),
        cmocka_unit_test(test_json_null_is_500),
        cmocka_unit_test(test_text_replaces_body),
        cmocka_unit_test(test_stop_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
