/* lib/base/routes: a table of requests (method, path, body size) and what
 * the dispatch makes of each -- which handler ran with which parameter,
 * or the refusal (404, 400 from the parameter's check, 405 with Allow,
 * 413) -- and the metric label it counts under. No server is started. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "base/routes.h"

/* What the last handler saw; handlers answer 200 with their own name. */
static char ran[32], ran_param[ROUTE_PARAM_MAX];

#define HANDLER(name)                                                                   \
    static void name(void *app, struct route_call *call, const struct http_req *req,   \
                     struct http_resp *resp)                                            \
    {                                                                                   \
        (void)app, (void)req;                                                           \
        snprintf(ran, sizeof(ran), "%s", #name);                                        \
        snprintf(ran_param, sizeof(ran_param), "%s", call->param);                      \
        call->tag = "g1";                                                               \
        http_json(resp, 200, json_pack("{s:s}", "ran", #name));                         \
    }
HANDLER(h_deduct)
HANDLER(h_state)
HANDLER(h_seed)
HANDLER(h_audit)
HANDLER(h_small)
HANDLER(h_health)

/* Digits only, at most 8: the parameter check runs before the method's. */
static int digits(const char *s, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9' || n > 8) {
            snprintf(err, errlen, "id must be 1..8 digits");
            return -1;
        }
    return 0;
}

static const struct route rows[] = {
    {"/things/deduct", ROUTE_POST, h_deduct, "deduct", 0, ROUTE_WORKER, NULL},
    {"/small", ROUTE_POST | ROUTE_PUT, h_small, "small", 10, ROUTE_WORKER, NULL},
    {"/healthz", ROUTE_GET, h_health, "healthz", 0, ROUTE_CONTROL, NULL},
    {"/things/{id}/audit", ROUTE_GET, h_audit, "audit", 0, ROUTE_WORKER, digits},
    {"/things/{id}", ROUTE_GET, h_state, "thing", 0, ROUTE_WORKER, digits},
    {"/things/{id}", ROUTE_PUT, h_seed, "thing", 0, ROUTE_WORKER, digits},
    {"/free/{any}", ROUTE_GET, h_state, "free", 0, ROUTE_INLINE, NULL},
    {NULL, 0, NULL, NULL, 0, ROUTE_WORKER, NULL},
};
static const struct route_table table = {"svc", rows, "guard"};

static void test_dispatch_table(void **state)
{
    (void)state;
    char long_seg[200];
    snprintf(long_seg, sizeof(long_seg), "/free/%0150d", 7);
    static const char *const none = "";
    const struct {
        const char *label, *method, *path;
        size_t body_len;
        int status;
        const char *handler, *param, *allow, *detail, *metric;
    } cases[] = {
        {"exact", "POST", "/things/deduct", 5, 200, "h_deduct", "", "", NULL,
         "route=\"deduct\",status=\"200\",guard=\"g1\""},
        /* an exact path beats the pattern it also fits */
        {"exact before pattern", "GET", "/things/deduct", 0, 405, NULL, NULL, "POST",
         "use POST /things/deduct", "route=\"deduct\",status=\"405\",guard=\"-\""},
        {"pattern get", "GET", "/things/42", 0, 200, "h_state", "42", "", NULL,
         "route=\"thing\",status=\"200\",guard=\"g1\""},
        {"pattern put", "PUT", "/things/42", 3, 200, "h_seed", "42", "", NULL, NULL},
        {"pattern with tail", "GET", "/things/7/audit", 0, 200, "h_audit", "7", "", NULL,
         "route=\"audit\",status=\"200\",guard=\"g1\""},
        {"two rows, one resource", "DELETE", "/things/42", 0, 405, NULL, NULL, "GET, PUT",
         "use GET or PUT /things/42", "route=\"thing\",status=\"405\",guard=\"-\""},
        {"head is not get", "HEAD", "/healthz", 0, 405, NULL, NULL, "GET", "use GET /healthz",
         NULL},
        {"two methods, one row", "GET", "/small", 0, 405, NULL, NULL, "POST, PUT",
         "use POST or PUT /small", NULL},
        /* the parameter is checked before the method */
        {"bad parameter", "DELETE", "/things/4x2", 0, 400, NULL, NULL, "",
         "id must be 1..8 digits", "route=\"thing\",status=\"400\",guard=\"-\""},
        {"empty parameter", "GET", "/things/", 0, 404, NULL, NULL, "", "no route GET /things/",
         "route=\"other\",status=\"404\",guard=\"-\""},
        {"unknown tail", "GET", "/things/7/other", 0, 404, NULL, NULL, "",
         "no route GET /things/7/other", NULL},
        {"trailing slash", "GET", "/things/7/audit/", 0, 404, NULL, NULL, "", NULL, NULL},
        {"prefix only", "GET", "/things", 0, 404, NULL, NULL, "", NULL, NULL},
        {"unknown path", "GET", "/nope", 0, 404, NULL, NULL, "", "no route GET /nope", NULL},
        {"body at the row's limit", "POST", "/small", 10, 200, "h_small", "", "", NULL, NULL},
        {"body over the row's limit", "PUT", "/small", 11, 413, NULL, NULL, "",
         "request body exceeds 10 bytes", "route=\"small\",status=\"413\",guard=\"-\""},
        {"parameter over the buffer", "GET", long_seg, 0, 400, NULL, NULL, "",
         "the path segment is over 127 bytes", NULL},
    };
    metrics_reset();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_req req = {.method = cases[i].method, .path = cases[i].path,
                               .body_len = cases[i].body_len};
        struct http_resp resp = {0};
        ran[0] = ran_param[0] = '\0';
        route_dispatch(&table, "test-1", NULL, &req, &resp);
        const char *want_ran = cases[i].handler ? cases[i].handler : none;
        if (resp.status != cases[i].status || strcmp(ran, want_ran) != 0 ||
            strcmp(resp.allow, cases[i].allow) != 0)
            fail_msg("%s: status %d ran \"%s\" Allow \"%s\"; want %d \"%s\" \"%s\" (%s)",
                     cases[i].label, resp.status, ran, resp.allow, cases[i].status, want_ran,
                     cases[i].allow, resp.text ? resp.text : "");
        if (cases[i].param && strcmp(ran_param, cases[i].param) != 0)
            fail_msg("%s: param \"%s\", want \"%s\"", cases[i].label, ran_param,
                     cases[i].param);
        if (cases[i].detail && !strstr(resp.text, cases[i].detail))
            fail_msg("%s: body %s lacks \"%s\"", cases[i].label, resp.text, cases[i].detail);
        if (cases[i].metric && metrics_get("lab_http_requests_total", cases[i].metric) < 1)
            fail_msg("%s: no lab_http_requests_total{%s}", cases[i].label, cases[i].metric);
        free(resp.text);
    }
}

/* A table without a tag counts by route and status only. */
static void test_untagged_table_labels(void **state)
{
    (void)state;
    static const struct route_table plain = {"svc", rows, NULL};
    metrics_reset();
    struct http_req req = {.method = "GET", .path = "/nope"};
    struct http_resp resp = {0};
    route_dispatch(&plain, "test-1", NULL, &req, &resp);
    free(resp.text);
    assert_true(metrics_get("lab_http_requests_total", "route=\"other\",status=\"404\"") == 1);
}

/* The lists http_start takes: exact paths of one thread kind, once each. */
static void test_paths_by_thread(void **state)
{
    (void)state;
    const char *out[4];
    assert_int_equal(route_paths(&table, ROUTE_CONTROL, out, 4), 1);
    assert_string_equal(out[0], "/healthz");
    assert_null(out[1]);
    /* a pattern is never listed: http_start compares exact paths */
    assert_int_equal(route_paths(&table, ROUTE_INLINE, out, 4), 0);
    assert_null(out[0]);
    assert_int_equal(route_paths(&table, ROUTE_WORKER, out, 4), 2);
    assert_string_equal(out[0], "/things/deduct");
    assert_string_equal(out[1], "/small");
    assert_int_equal(route_paths(&table, ROUTE_WORKER, out, 2), 1);   /* room for one */
    assert_null(out[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_table),
        cmocka_unit_test(test_untagged_table_labels),
        cmocka_unit_test(test_paths_by_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
