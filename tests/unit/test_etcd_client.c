/* The etcd client's pure parts (base64 as the gateway wants keys, lease
 * seconds, drift) and its behaviour without a server: bad endpoint lists
 * refused, a refused connection is ETCD_EUNAVAIL at once, a silent server
 * costs the call's bound and no more, free accepts NULL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "locks/etcd.h"

static void test_b64(void **state)
{
    static const struct {
        const char *plain, *b64, *label;
    } cases[] = {
        {"", "", "empty"},
        {"f", "Zg==", "one byte, two pads"},
        {"fo", "Zm8=", "two bytes, one pad"},
        {"foo", "Zm9v", "three bytes"},
        {"foobar", "Zm9vYmFy", "six bytes"},
        {"/locks/inventory/SKU-1", "L2xvY2tzL2ludmVudG9yeS9TS1UtMQ==", "a lock name"},
        {"\xff\xfe", "//4=", "high bytes use + and /"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char enc[128], dec[128];
        long n = etcd_b64_encode(cases[i].plain, strlen(cases[i].plain), enc, sizeof(enc));
        print_message("%s\n", cases[i].label);
        assert_int_equal(n, (long)strlen(cases[i].b64));
        assert_string_equal(enc, cases[i].b64);
        assert_int_equal(etcd_b64_decode(enc, dec, sizeof(dec)), (long)strlen(cases[i].plain));
        assert_string_equal(dec, cases[i].plain);
    }
    char small[4], dec[8];
    assert_int_equal(etcd_b64_encode("foo", 3, small, sizeof(small)), -1);   /* needs 5 */
    assert_int_equal(etcd_b64_decode("Zm9v!", dec, sizeof(dec)), -1);         /* bad char */
    assert_int_equal(etcd_b64_decode("Zm9vYmFy", dec, 4), -1);                /* too small */
}

static void test_ttl_and_drift(void **state)
{
    assert_int_equal(etcd_ttl_seconds(0), 0);
    assert_int_equal(etcd_ttl_seconds(1), 1);
    assert_int_equal(etcd_ttl_seconds(2000), 2);
    assert_int_equal(etcd_ttl_seconds(2001), 3);   /* rounded up, never shorter */
    assert_int_equal(etcd_ttl_seconds(30000), 30);
    assert_int_equal(etcd_drift_ms(2000), 22);
    assert_int_equal(etcd_drift_ms(0), 2);
}

static void test_bad_endpoints(void **state)
{
    char err[160];
    assert_null(etcd_client_new("", 100, NULL, err, sizeof(err)));
    assert_non_null(strstr(err, "empty"));
    assert_null(etcd_client_new("a,,b", 100, NULL, err, sizeof(err)));
    assert_null(etcd_client_new("a,b,c,d,e", 100, NULL, err, sizeof(err)));
    etcd_client_free(NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A port with a listener that never answers (backlog only), and one with
 * nothing: the calls are bounded and say ETCD_EUNAVAIL. */
static void test_no_server(void **state)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s, 16), 0);
    socklen_t al = sizeof(a);
    getsockname(s, (struct sockaddr *)&a, &al);
    int port = ntohs(a.sin_port);

    char ep[64], err[160];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    struct etcd_client *c = etcd_client_new(ep, 200, NULL, err, sizeof(err));
    assert_non_null(c);
    struct etcd_lease l;
    double t0 = now_s();
    assert_int_equal(etcd_lease_grant(c, 5, 0, 200, &l, err, sizeof(err)), ETCD_EUNAVAIL);
    double took = now_s() - t0;
    print_message("silent server: %.3f s: %s\n", took, err);
    assert_true(took >= 0.15 && took < 1.0);
    assert_int_equal(etcd_health(c, 200, err, sizeof(err)), -1);
    etcd_client_free(c);
    close(s);   /* the port now refuses */

    c = etcd_client_new(ep, 200, NULL, err, sizeof(err));
    assert_non_null(c);
    t0 = now_s();
    assert_int_equal(etcd_lease_grant(c, 5, 0, 2000, &l, err, sizeof(err)), ETCD_EUNAVAIL);
    print_message("refused: %.3f s: %s\n", now_s() - t0, err);
    assert_true(now_s() - t0 < 0.5);
    etcd_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64),
        cmocka_unit_test(test_ttl_and_drift),
        cmocka_unit_test(test_bad_endpoints),
        cmocka_unit_test(test_no_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
