/* util: backoff bounds, random ranges, id uniqueness and size, zero sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

/* ---- backoff ---------------------------------------------------------- */

static void test_backoff_bounds(void **state)
{
    (void)state;
    static const struct {
        const char *label;
        int attempt;
        long cap, lo, hi;   /* every draw must land in [lo, hi] */
    } cases[] = {
        {"attempt 0: base 1",                0,  1000,    0,    1},
        {"attempt 1: base 2",                1,  1000,    1,    2},
        {"attempt 4: base 16",               4,  1000,    8,   16},
        {"attempt 10: base 1024 capped",    10,  1000,  500, 1000},
        {"attempt 9: base 512 under cap",    9,  1000,  256,  512},
        {"attempt 20: capped",              20,   100,   50,  100},
        {"attempt 40: no overflow, capped", 40,   250,  125,  250},
        {"attempt 63: no overflow, capped", 63, 30000, 15000, 30000},
        {"attempt 29: base 2^29 capped",    29,  5000, 2500, 5000},
        {"cap 1",                            8,     1,    0,    1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int k = 0; k < 2000; k++) {
            long v = util_backoff_ms(cases[i].attempt, cases[i].cap);
            if (v < cases[i].lo || v > cases[i].hi)
                fail_msg("%s: %ld outside [%ld, %ld]", cases[i].label, v,
                         cases[i].lo, cases[i].hi);
        }
    }
}

static void test_backoff_spreads(void **state)
{
    (void)state;
    /* Jitter: over many draws both ends of [base/2, base] show up. */
    long seen_lo = 0, seen_hi = 0;
    for (int k = 0; k < 20000; k++) {
        long v = util_backoff_ms(3, 1000);   /* base 8 -> [4, 8] */
        seen_lo |= v == 4;
        seen_hi |= v == 8;
    }
    assert_true(seen_lo);
    assert_true(seen_hi);
}

/* ---- random range ----------------------------------------------------- */

static void test_rand_range(void **state)
{
    (void)state;
    static const struct { const char *label; long lo, hi, want_lo, want_hi; } cases[] = {
        {"small range",        1,    6,    1,    6},
        {"single value",       7,    7,    7,    7},
        {"negative range",   -10,   -3,  -10,   -3},
        {"spans zero",        -5,    5,   -5,    5},
        {"hi < lo gives lo",  10,    2,   10,   10},
        {"hi < lo negative",  -1,   -9,   -1,   -1},
        {"wide range",         0, 1L << 40, 0, 1L << 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 5000; k++) {
            long v = util_rand_range(cases[i].lo, cases[i].hi);
            if (v < cases[i].want_lo || v > cases[i].want_hi)
                fail_msg("%s: %ld outside [%ld, %ld]", cases[i].label, v,
                         cases[i].want_lo, cases[i].want_hi);
        }
}

static void test_rand_range_covers(void **state)
{
    (void)state;
    int seen[6] = {0};
    for (int k = 0; k < 6000; k++)
        seen[util_rand_range(0, 5)]++;
    for (int i = 0; i < 6; i++)
        assert_true(seen[i] > 0);
}

/* ---- ids -------------------------------------------------------------- */

#define NIDS 10000
static char ids[NIDS][80];

static int cmp_id(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void test_make_id_unique_and_fits(void **state)
{
    (void)state;
    const char *prefix = "abcdefghij0123456789";   /* 20 chars */
    assert_int_equal(strlen(prefix), 20);
    for (int i = 0; i < NIDS; i++) {
        char big[256];
        char *r = util_make_id(big, sizeof big, prefix);
        assert_ptr_equal(r, big);
        size_t n = strlen(big);
        if (n >= 64)
            fail_msg("id %d is %zu bytes: %s", i, n, big);
        assert_memory_equal(big, prefix, 20);
        assert_int_equal(big[20], '-');
        memcpy(ids[i], big, n + 1);
    }
    qsort(ids, NIDS, sizeof ids[0], cmp_id);
    for (int i = 1; i < NIDS; i++)
        if (strcmp(ids[i - 1], ids[i]) == 0)
            fail_msg("duplicate id %s", ids[i]);
}

/* The part of an id before "-<hex ms>-<n>-<rand>". */
static void id_head(const char *id, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", id);
    for (int i = 0; i < 3; i++) {
        char *d = strrchr(out, '-');
        if (d)
            *d = '\0';
    }
}

/* A 47-character instance name (the longest the services take) in a 64-byte
 * id: the unique tail is never cut (it was: ids of one millisecond then
 * collided), two names that differ only at the end keep different heads,
 * and every byte is in the identifier alphabet [A-Za-z0-9._:-]. */
static void test_make_id_long_prefix(void **state)
{
    (void)state;
    const char *pa = "o-order-with-a-very-long-instance-name-for-ids-01";
    const char *pb = "o-order-with-a-very-long-instance-name-for-ids-02";
    enum { N = 4000 };
    for (int i = 0; i < N; i++) {
        char *dst = ids[i];
        util_make_id(dst, 65, i % 2 ? pb : pa);
        size_t n = strlen(dst);
        if (n > 64 || strspn(dst, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789._:-") != n)
            fail_msg("id %d breaks the identifier rules: %s", i, dst);
    }
    char ha[80], hb[80];
    id_head(ids[0], ha, sizeof ha);
    id_head(ids[1], hb, sizeof hb);
    qsort(ids, N, sizeof ids[0], cmp_id);
    for (int i = 1; i < N; i++)
        if (strcmp(ids[i - 1], ids[i]) == 0)
            fail_msg("duplicate id %s", ids[i]);
    if (strcmp(ha, hb) == 0)
        fail_msg("two instance names share the id head %s", ha);
    /* Characters outside the alphabet become '_'. */
    char id[65];
    util_make_id(id, sizeof id, "inv 1/ü");
    assert_int_equal(strncmp(id, "inv_1_", 6), 0);
    assert_int_equal(strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789._:-"), strlen(id));
}

static void test_make_id_small_buffer(void **state)
{
    (void)state;
    /* Bounded: a short buffer is truncated and terminated, never overrun. */
    char buf[16];
    memset(buf, 'Z', sizeof buf);
    util_make_id(buf, 8, "order");
    assert_int_equal(strlen(buf), 7);
    for (size_t i = 8; i < sizeof buf; i++)
        assert_int_equal(buf[i], 'Z');
}

/* ---- sleeps and clocks ------------------------------------------------ */

static void test_sleep_zero_and_negative(void **state)
{
    (void)state;
    static const struct { const char *label; long ms; } cases[] = {
        {"zero", 0}, {"negative", -5}, {"very negative", -1000000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double t0 = util_now();
        util_sleep_ms(cases[i].ms);
        double dt = util_now() - t0;
        if (dt > 0.05)
            fail_msg("%s: util_sleep_ms(%ld) took %.3fs", cases[i].label,
                     cases[i].ms, dt);
    }
}

static void test_sleep_short(void **state)
{
    (void)state;
    double t0 = util_now();
    util_sleep_ms(20);
    double dt = util_now() - t0;
    assert_true(dt >= 0.019);
    assert_true(dt < 2.0);
}

static void test_clocks(void **state)
{
    (void)state;
    double a = util_now(), b = util_now();
    assert_true(a > 0);
    assert_true(b >= a);
    assert_true(util_wall_ms() > 1500000000000LL);   /* after 2017 */
    /* The three monotonic clocks are one clock in three units. */
    int64_t ms = util_now_ms(), us = util_now_us();
    double s = util_now();
    assert_true(us / 1000 >= ms);
    assert_true(s * 1000.0 + 1.0 >= (double)ms);
    assert_true(util_now_ms() >= ms);
}

static void test_default_instance(void **state)
{
    (void)state;
    char buf[64];
    assert_ptr_equal(util_default_instance(buf, sizeof buf), buf);
    const char *dash = strrchr(buf, '-');
    assert_non_null(dash);
    assert_int_equal(atoi(dash + 1), (int)getpid());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_bounds),
        cmocka_unit_test(test_backoff_spreads),
        cmocka_unit_test(test_rand_range),
        cmocka_unit_test(test_rand_range_covers),
        cmocka_unit_test(test_make_id_unique_and_fits),
        cmocka_unit_test(test_make_id_small_buffer),
        cmocka_unit_test(test_make_id_long_prefix),
        cmocka_unit_test(test_sleep_zero_and_negative),
        cmocka_unit_test(test_sleep_short),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_default_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
