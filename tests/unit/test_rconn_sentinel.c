/* rconn_sentinel_parse: the --redis-sentinels list. An endpoint with a
 * configured but unreachable Sentinel set must leave its own host:port in
 * use (bounded asks, no hang); endpoints are independent objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "locks/rconn.h"

static void test_parse_list(void **state)
{
    (void)state;
    char hosts[RCONN_SENTINELS_MAX][128], err[128];
    int ports[RCONN_SENTINELS_MAX];
    assert_int_equal(rconn_sentinel_parse("127.0.0.1:26390,localhost:1", hosts, ports,
                                          RCONN_SENTINELS_MAX, err, sizeof err), 2);
    assert_string_equal(hosts[0], "127.0.0.1");
    assert_int_equal(ports[0], 26390);
    assert_string_equal(hosts[1], "localhost");
    assert_int_equal(ports[1], 1);
    assert_int_equal(rconn_sentinel_parse("", hosts, ports, 3, err, sizeof err), 0);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    char hosts[2][128], err[128];
    int ports[2];
    const char *bad[] = { "127.0.0.1", ":26390", "h:", "h:0", "h:65536", "h:12x",
                          "a:1,,b:2", "a:1,b:2,c:3" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(rconn_sentinel_parse(bad[i], hosts, ports, 2, err, sizeof err), -1);
        assert_true(err[0] != '\0');
    }
}

static void test_unreachable_sentinels_keep_endpoint(void **state)
{
    (void)state;
    char err[128], m[64];
    /* port 1 on loopback: refused at once */
    struct rconn_endpoint *ep = rconn_endpoint_new("127.0.0.1", 1, "127.0.0.1:1", "lab", err,
                                                   sizeof err);
    assert_non_null(ep);
    assert_string_equal(rconn_endpoint_addr(ep), "127.0.0.1:1");
    struct rconn_pool *p = rconn_pool_new(ep, 100, 100);
    assert_non_null(p);
    assert_ptr_equal(rconn_pool_endpoint(p), ep);
    assert_null(rconn_get(p, err, sizeof err));   /* the endpoint itself, refused */
    assert_non_null(strstr(err, "127.0.0.1:1"));
    rconn_pool_free(p);
    rconn_endpoint_master(ep, m, sizeof m);
    assert_string_equal(m, "");                    /* nobody answered */
    rconn_endpoint_free(ep);
}

/* Each endpoint follows its own Sentinels: no process-wide table, so a
 * plain endpoint to the same host:port made next to a following one is
 * not redirected, and a bad list is refused without touching anything. */
static void test_endpoints_are_independent(void **state)
{
    (void)state;
    char err[128] = "", m[64];
    struct rconn_endpoint *followed = rconn_endpoint_new("127.0.0.1", 1, "127.0.0.1:1", "lab",
                                                         err, sizeof err);
    struct rconn_endpoint *plain = rconn_endpoint_new("127.0.0.1", 1, NULL, NULL, err,
                                                      sizeof err);
    assert_non_null(followed);
    assert_non_null(plain);
    rconn_endpoint_invalidate(plain);   /* nothing to ask: a no-op */
    rconn_endpoint_master(plain, m, sizeof m);
    assert_string_equal(m, "");
    assert_null(rconn_endpoint_new("127.0.0.1", 1, "no-port", "lab", err, sizeof err));
    assert_non_null(strstr(err, "no-port"));
    rconn_endpoint_free(followed);
    rconn_endpoint_free(plain);
    rconn_endpoint_free(NULL);
    rconn_endpoint_invalidate(NULL);
    assert_null(rconn_pool_new(NULL, 100, 100));
    /* A pool made from an address owns its endpoint (freed with it). */
    struct rconn_pool *own = rconn_pool_new_addr(NULL, 1, 100, 100);
    assert_non_null(own);
    assert_string_equal(rconn_pool_addr(own), "127.0.0.1:1");
    rconn_pool_free(own);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_list),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_unreachable_sentinels_keep_endpoint),
        cmocka_unit_test(test_endpoints_are_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
