/* The ZooKeeper mutex recipe's pure logic: sequence numbers from node
 * names, finding our node by its attempt id after a create whose answer
 * was lost, and who holds / whom a waiter watches. Plus the client's
 * behaviour with no server: a bounded wait, then NULL with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "locks/zk.h"

static void test_seq(void **state)
{
    static const struct {
        const char *name;
        long long seq;
        const char *label;
    } cases[] = {
        {"lock-00ab-0000000042", 42, "plain"},
        {"lock-00ab-0000000000", 0, "first node"},
        {"lock-00ab-2147483647", 2147483647LL, "int32 max"},
        {"lock-00ab-", -1, "no digits"},
        {"lock-00ab-00x1", -1, "not digits"},
        {"lease-00ab-0000000001", -1, "not a lock node"},
        {"lock00ab0000000001", -1, "no dash"},
        {"lock-00ab-0000000000001", -1, "too many digits"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (zk_lock_seq(cases[i].name) != cases[i].seq)
            fail_msg("%s: %s gave %lld", cases[i].label, cases[i].name,
                     zk_lock_seq(cases[i].name));
    }
}

/* A create's answer was lost: the children list is all we have, and the
 * node carrying our attempt id is ours, whatever its sequence. */
static void test_find_by_attempt(void **state)
{
    char *kids[] = {"lock-aaaa-0000000007", "lock-bbbb-0000000003", "lock-aaaab-0000000009",
                    "lock-cccc-0000000005"};
    assert_int_equal(zk_lock_find(kids, 4, "bbbb"), 1);
    assert_int_equal(zk_lock_find(kids, 4, "cccc"), 3);
    /* "aaaa" must not match "aaaab"'s node, and does match its own. */
    assert_int_equal(zk_lock_find(kids, 4, "aaaa"), 0);
    assert_int_equal(zk_lock_find(kids, 4, "aaaab"), 2);
    assert_int_equal(zk_lock_find(kids, 4, "dddd"), -1);   /* never created: create again */
    assert_int_equal(zk_lock_find(kids, 0, "aaaa"), -1);
    assert_int_equal(zk_lock_find(kids, 4, ""), -1);
}

/* Children come back in no particular order: the holder is the lowest
 * sequence and each waiter watches the next lower one only. */
static void test_position(void **state)
{
    char *kids[] = {"lock-c-0000000012", "lock-a-0000000010", "lock-d-0000000015",
                    "lock-b-0000000011", "stray-node"};
    int pred = -1;
    assert_int_equal(zk_lock_position(kids, 5, "lock-a-0000000010", &pred), 0);
    assert_int_equal(zk_lock_position(kids, 5, "lock-b-0000000011", &pred), 1);
    assert_int_equal(pred, 1);
    assert_int_equal(zk_lock_position(kids, 5, "lock-c-0000000012", &pred), 1);
    assert_int_equal(pred, 3);
    assert_int_equal(zk_lock_position(kids, 5, "lock-d-0000000015", &pred), 1);
    assert_int_equal(pred, 0);                    /* 12, not 10 or 11: no herd */
    /* Our node is gone (session lost): -1, never "held". */
    assert_int_equal(zk_lock_position(kids, 5, "lock-e-0000000009", &pred), -1);
    assert_int_equal(zk_lock_position(kids, 5, "not-a-lock", &pred), -1);
}

/* Nothing listens on the port: acquire gives up after its wait, says why,
 * and a second try does too (no hang, no crash). */
static void test_no_server_bounded(void **state)
{
    struct zk_client *c = zk_client_new("127.0.0.1:1", 2000);
    assert_non_null(c);
    char err[160] = "";
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct zk_session *s = zk_client_acquire(c, 200, err, sizeof(err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_null(s);
    assert_non_null(strstr(err, "not connected"));
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(took >= 0.19);
    assert_null(zk_client_acquire(c, 0, err, sizeof(err)));
    assert_int_equal(zk_client_state(c), ZK_CONNECTING);
    zk_client_free(c);
    zk_client_free(NULL);
}

/* A SKU's lock folder name: the SKU itself, except the all-dot SKUs that
 * ZooKeeper refuses as path components; no two SKUs share a name. */
static void test_dir_name(void **state)
{
    static const struct {
        const char *sku, *want;
        const char *label;
    } cases[] = {
        {"SKU-1", "SKU-1", "plain"},
        {"a.b", "a.b", "dots inside"},
        {".x", ".x", "leading dot"},
        {".", "%2E", "dot"},
        {"..", "%2E%2E", "dot dot"},
        {"...", "%2E%2E%2E", "three dots"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[200];
        assert_int_equal(zk_lock_dir_name(cases[i].sku, out, sizeof(out)), 0);
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("%s: got %s", cases[i].label, out);
    }
    char small[4];
    assert_int_equal(zk_lock_dir_name("..", small, sizeof(small)), -1);
    assert_int_equal(zk_lock_dir_name("abc", small, sizeof(small)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seq),
        cmocka_unit_test(test_dir_name),
        cmocka_unit_test(test_find_by_attempt),
        cmocka_unit_test(test_position),
        cmocka_unit_test(test_no_server_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
