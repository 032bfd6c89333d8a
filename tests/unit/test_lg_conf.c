/* loadgen options (short/long/repeatable/positional, exit-2 cases), URL
 * parsing, plan building and the --json summary schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "../../loadtest/loadgen/lg_conf.h"
#include "../../loadtest/loadgen/lg_report.h"

static struct lg_conf conf;

static int parse(const char *const *args, char *err, size_t errlen)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "loadgen";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    memset(&conf, 0, sizeof conf);
    return lg_conf_parse(&conf, argc, argv, err, errlen);
}

static void test_flags(void **state)
{
    char err[256] = "";
    const char *a[] = {"-t", "3", "-c64", "--requests", "2k", "-d", "30s", "-R", "500",
                       "-m", "PUT", "-H", "X-A: 1", "--header=X-B: {seq}", "-b",
                       "{\"order_id\":\"o-{seq}\"}", "--timeout=2s", "--latency-dist",
                       "http://127.0.0.1:8001/inventory/deduct", "-u", "http://h2:8002/x",
                       "--url", "http://[::1]:8003/", "--json", "/tmp/x.json", NULL};
    assert_int_equal(parse(a, err, sizeof err), CFG_OK);
    assert_int_equal(conf.threads, 3);
    assert_int_equal(conf.connections, 64);
    assert_int_equal(conf.requests, 2000);
    assert_int_equal(conf.duration_ms, 30000);
    assert_int_equal(conf.rate, 500);
    assert_string_equal(conf.method, "PUT");
    assert_int_equal(conf.timeout_ms, 2000);
    assert_int_equal(conf.latency_dist, 1);
    assert_string_equal(conf.json, "/tmp/x.json");
    assert_int_equal(conf.nheaders, 2);
    assert_string_equal(conf.headers[1], "X-B: {seq}");
    assert_int_equal(conf.nurls, 3);
    assert_string_equal(conf.urls[0], "http://127.0.0.1:8001/inventory/deduct");
    assert_string_equal(conf.urls[2], "http://[::1]:8003/");
    assert_string_equal(conf.body, "{\"order_id\":\"o-{seq}\"}");
}

static void test_defaults(void **state)
{
    char err[256];
    const char *a[] = {"http://127.0.0.1:18000/", NULL};
    assert_int_equal(parse(a, err, sizeof err), CFG_OK);
    assert_int_equal(conf.threads, 2);
    assert_int_equal(conf.connections, 10);
    assert_int_equal(conf.timeout_ms, 10000);
    struct lg_plan *p = lg_plan_create(&conf, 0);
    assert_non_null(p);
    assert_false(p->err);
    assert_int_equal(p->duration_us, 10000000);   /* neither -n nor -d: 10 s */
    assert_null(p->body);
    assert_false(p->send_clen);
    lg_plan_free(p);
}

struct bad_case {
    const char *label;
    const char *args[8];
    const char *errpart;
};

static const struct bad_case bad_cases[] = {
    {"no URL", {"-t", "2", NULL}, "no URL"},
    {"unknown short flag", {"-x", "http://a/", NULL}, "unknown option"},
    {"unknown long flag", {"--frobnicate=1", "http://a/", NULL}, "unknown"},
    {"threads not a number", {"-t", "two", "http://a/", NULL}, "cannot parse"},
    {"threads out of range", {"-t", "0", "http://a/", NULL}, "outside"},
    {"bad duration", {"-d", "5 weeks", "http://a/", NULL}, "cannot parse"},
    {"missing value", {"http://a/", "-c", NULL}, "needs a value"},
    {"retries out of range", {"--retries", "101", "http://a/", NULL}, "outside"},
    {"retries negative", {"--retries=-1", "http://a/", NULL}, "outside"},
};

static void test_bad_arguments(void **state)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        char err[256] = "";
        int r = parse(bad_cases[i].args, err, sizeof err);
        if (r != CFG_ERR || !strstr(err, bad_cases[i].errpart))
            fail_msg("%s: rc %d err '%s'", bad_cases[i].label, r, err);
    }
}

struct plan_bad {
    const char *label;
    const char *args[8];
    const char *errpart;
};

static const struct plan_bad plan_bad[] = {
    {"https", {"https://a/", NULL}, "only http://"},
    {"bad port", {"http://a:99999/", NULL}, "bad port"},
    {"threads above connections", {"-t", "4", "-c", "2", "http://a/", NULL}, "above"},
    {"more URLs than connections", {"-c", "2", "-t", "1", "http://a/", "http://b/", "http://c/", NULL},
     "at least as many"},
    {"malformed body placeholder", {"-b", "{\"id\":\"{rand:9..1}\"}", "http://a/", NULL}, "body template"},
    {"malformed path placeholder", {"http://a/x/{sequence}", NULL}, "unknown placeholder"},
    {"header without colon", {"-H", "NoColon", "http://a/", NULL}, "Name: value"},
    {"content-length header", {"-H", "Content-Length: 3", "http://a/", NULL}, "set by loadgen"},
    {"lower-case method", {"-m", "get", "http://a/", NULL}, "upper-case"},
    {"new ids without retries", {"--retry-new-ids", "http://a/", NULL}, "needs --retries"},
};

static void test_plan_rejects(void **state)
{
    for (size_t i = 0; i < sizeof plan_bad / sizeof plan_bad[0]; i++) {
        char err[256] = "";
        if (parse(plan_bad[i].args, err, sizeof err) != CFG_OK)
            fail_msg("%s: parse failed: %s", plan_bad[i].label, err);
        struct lg_plan *p = lg_plan_create(&conf, 0);
        assert_non_null(p);
        if (!p->err || !strstr(p->errstr, plan_bad[i].errpart))
            fail_msg("%s: err %d '%s'", plan_bad[i].label, p->err, p->errstr);
        lg_plan_free(p);
    }
    lg_plan_free(NULL);
}

static void test_urls(void **state)
{
    struct { const char *url, *host, *port, *auth, *path; } c[] = {
        {"http://127.0.0.1:8001/inventory/deduct", "127.0.0.1", "8001", "127.0.0.1:8001",
         "/inventory/deduct"},
        {"http://example.test", "example.test", "80", "example.test", "/"},
        {"HTTP://h:80/a?b=c#frag", "h", "80", "h", "/a?b=c"},
        {"http://h:8000?inventoryId=SKU-1", "h", "8000", "h:8000", "?inventoryId=SKU-1"},
        {"http://[::1]:8002/x", "::1", "8002", "[::1]:8002", "/x"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct lg_url u;
        char err[256];
        if (lg_url_parse(c[i].url, &u, err, sizeof err) != 0)
            fail_msg("%s: %s", c[i].url, err);
        assert_string_equal(u.host, c[i].host);
        assert_string_equal(u.port, c[i].port);
        assert_string_equal(u.authority, c[i].auth);
        assert_int_equal(u.pathlen, strlen(c[i].path));
        assert_memory_equal(u.path, c[i].path, u.pathlen);
    }
}

static void test_request_head(void **state)
{
    char err[256];
    const char *a[] = {"-H", "X-Guard: for-update", "-b", "{\"order_id\":\"o-{seq}\"}",
                       "http://127.0.0.1:8001/inventory/deduct", NULL};
    assert_int_equal(parse(a, err, sizeof err), CFG_OK);
    struct lg_plan *p = lg_plan_create(&conf, 0);
    assert_false(p->err);
    assert_true(p->send_clen);
    char buf[1024];
    uint64_t rng = 1;
    struct lg_tmpl_vars v = {7, 0, &rng};
    long n = lg_tmpl_expand(p->targets[0].head, &v, buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_string_equal(buf, "POST /inventory/deduct HTTP/1.1\r\nHost: 127.0.0.1:8001\r\n"
                             "X-Guard: for-update\r\nContent-Type: application/json\r\n"
                             "Content-Length: ");
    n = lg_tmpl_expand(p->body, &v, buf, sizeof buf - 1);
    buf[n] = '\0';
    assert_string_equal(buf, "{\"order_id\":\"o-7\"}");
    assert_true(p->req_max >= p->targets[0].head->max_len + 24 + p->body->max_len);
    lg_plan_free(p);
}

/* --retries and --retry-new-ids reach the plan; a key header made from
 * {seq} expands with the request, so a retry of the same bytes re-sends
 * the same key. */
static void test_retry_options(void **state)
{
    char err[256] = "";
    const char *none[] = {"http://127.0.0.1:8000/orders", NULL};
    assert_int_equal(parse(none, err, sizeof err), CFG_OK);
    struct lg_plan *p = lg_plan_create(&conf, 0);
    assert_false(p->err);
    assert_int_equal(p->retries, 0);
    assert_int_equal(p->retry_new_ids, 0);
    lg_plan_free(p);

    const char *a[] = {"--retries", "3", "--retry-new-ids", "-H", "Idempotency-Key: k-{seq}",
                       "-b", "{\"order_id\":\"o-{seq}\"}", "http://127.0.0.1:8000/orders", NULL};
    assert_int_equal(parse(a, err, sizeof err), CFG_OK);
    assert_int_equal(conf.retries, 3);
    assert_int_equal(conf.retry_new_ids, 1);
    p = lg_plan_create(&conf, 0);
    assert_false(p->err);
    assert_int_equal(p->retries, 3);
    assert_int_equal(p->retry_new_ids, 1);
    char buf[1024];
    uint64_t rng = 1;
    struct lg_tmpl_vars v = {42, 0, &rng};
    long n = lg_tmpl_expand(p->targets[0].head, &v, buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "\r\nIdempotency-Key: k-42\r\n"));
    lg_plan_free(p);

    const char *env_only[] = {"http://a/", NULL};
    setenv("LG_RETRIES", "2", 1);
    assert_int_equal(parse(env_only, err, sizeof err), CFG_OK);
    unsetenv("LG_RETRIES");
    assert_int_equal(conf.retries, 2);
}

static void test_json_schema(void **state)
{
    char err[256];
    const char *a[] = {"-c", "4", "--latency-dist", "http://127.0.0.1:8001/", NULL};
    assert_int_equal(parse(a, err, sizeof err), CFG_OK);
    struct lg_plan *p = lg_plan_create(&conf, 0);
    static struct lg_stats s;
    lg_stats_init(&s);
    for (int i = 0; i < 1000; i++) {
        s.requests++;
        lg_stats_status(&s, i < 990 ? 200 : 409);
        if (i >= 990)
            lg_stats_code(&s, "out_of_stock");
        lg_hist_record(&s.latency, 1000 + (uint64_t)i);
    }
    s.err_timeout = 2;
    s.retries = 5;
    struct lg_report_info ri = {p, 2.0, 0, 1, NULL};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lg_report_json(f, &s, &ri);
    fclose(f);
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    if (!j)
        fail_msg("invalid JSON: %s: %s", je.text, buf);
    assert_int_equal(json_integer_value(json_object_get(j, "requests")), 1000);
    assert_true(json_real_value(json_object_get(j, "rps")) == 500.0);
    assert_true(json_is_number(json_object_get(j, "duration_s")));
    json_t *bs = json_object_get(j, "by_status");
    assert_int_equal(json_integer_value(json_object_get(bs, "200")), 990);
    assert_int_equal(json_integer_value(json_object_get(bs, "409")), 10);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "by_error"), "out_of_stock")), 10);
    json_t *e = json_object_get(j, "errors");
    const char *ekeys[] = {"connect", "read", "write", "timeout"};
    for (int i = 0; i < 4; i++)
        assert_true(json_is_integer(json_object_get(e, ekeys[i])));
    assert_int_equal(json_integer_value(json_object_get(e, "timeout")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "retries")), 5);
    json_t *l = json_object_get(j, "latency_ms");
    const char *lkeys[] = {"p50", "p90", "p99", "p999", "max", "mean"};
    for (int i = 0; i < 6; i++)
        assert_true(json_is_number(json_object_get(l, lkeys[i])));
    double p50 = json_number_value(json_object_get(l, "p50"));
    assert_true(p50 > 1.49 && p50 < 1.51);
    assert_true(json_array_size(json_object_get(j, "latency_dist")) > 0);
    json_decref(j);
    free(buf);
    lg_plan_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_plan_rejects),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_request_head),
        cmocka_unit_test(test_retry_options),
        cmocka_unit_test(test_json_schema),
    };
    return cmocka_run_group_tests_name("lg_conf", tests, NULL, NULL);
}
