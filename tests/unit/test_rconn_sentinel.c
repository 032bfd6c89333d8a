/* rconn_sentinel_parse: the --redis-sentinels list. And a configured but
 * unreachable Sentinel set must leave the configured endpoint in use
 * (bounded asks, no hang). */
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
    assert_int_equal(rconn_sentinel_set("127.0.0.1", 6390, "127.0.0.1:1", "lab", err,
                                        sizeof err), 0);
    struct rconn_pool *p = rconn_pool_new("127.0.0.1", 1, 100, 100);
    assert_non_null(p);
    assert_null(rconn_get(p, err, sizeof err));   /* not the followed endpoint: as before */
    rconn_pool_free(p);
    rconn_sentinel_master(m, sizeof m);
    assert_string_equal(m, "");                    /* nobody answered */
    assert_int_equal(rconn_sentinel_set("127.0.0.1", 6390, "", "lab", err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_list),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_unreachable_sentinels_keep_endpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
