/* Pure parts of the Redis locks, no Redis needed.
 *
 * Token format and uniqueness, option words, Redlock quorum and validity
 * arithmetic, segment split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "locks/rconn.h"
#include "locks/redlock.h"
#include "locks/rlock.h"
#include "base/util.h"
#include "stock/segments.h"

/* ---- tokens ----------------------------------------------------------- */

/* Lock tokens are util tokens: a buffer sized for one fits the other. */
_Static_assert(RLOCK_TOKEN_MAX == UTIL_TOKEN_MAX, "token buffer sizes differ");

static void test_token_format(void **state)
{
    char tok[RLOCK_TOKEN_MAX], inst[64], hex[32];
    int tid;
    unsigned long long cnt;
    int len = util_make_token(tok, sizeof tok, "inventory-1");

    assert_true(len > 0);
    assert_int_equal((int)strlen(tok), len);
    assert_int_equal(sscanf(tok, "%63[^:]:%d:%llu:%31s", inst, &tid, &cnt, hex), 4);
    assert_string_equal(inst, "inventory-1");
    assert_true(tid > 0);
    assert_true(cnt > 0);
    assert_int_equal((int)strlen(hex), 16);
    assert_int_equal((int)strspn(hex, "0123456789abcdef"), 16);
}

static void test_token_instance_sanitized(void **state)
{
    static const struct { const char *in, *want; } cases[] = {
        { "a:b c/d", "a_b_c_d" },
        { NULL, "anon" },
        { "", "anon" },
        { "host.example-1_x", "host.example-1_x" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tok[RLOCK_TOKEN_MAX];
        assert_true(util_make_token(tok, sizeof tok, cases[i].in) > 0);
        size_t n = strlen(cases[i].want);
        assert_memory_equal(tok, cases[i].want, n);
        assert_int_equal(tok[n], ':');
    }
    /* A long instance is cut, and the token still fits. */
    char longinst[300], tok[RLOCK_TOKEN_MAX];
    memset(longinst, 'x', sizeof longinst - 1);
    longinst[sizeof longinst - 1] = '\0';
    int len = util_make_token(tok, sizeof tok, longinst);
    assert_true(len > 0 && len < RLOCK_TOKEN_MAX);
    assert_int_equal((int)strcspn(tok, ":"), 40);
}

static void test_token_small_buffer(void **state)
{
    char tok[8];
    assert_int_equal(util_make_token(tok, sizeof tok, "inventory-1"), -1);
}

#define TOK_THREADS 4
#define TOK_EACH    5000

static char tokens[TOK_THREADS * TOK_EACH][RLOCK_TOKEN_MAX];

static void *token_worker(void *arg)
{
    int base = (int)(intptr_t)arg * TOK_EACH;
    for (int i = 0; i < TOK_EACH; i++)
        util_make_token(tokens[base + i], RLOCK_TOKEN_MAX, "same");
    return NULL;
}

static int cmp_tok(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_token_unique_across_threads(void **state)
{
    pthread_t th[TOK_THREADS];
    for (int i = 0; i < TOK_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, token_worker, (void *)(intptr_t)i), 0);
    for (int i = 0; i < TOK_THREADS; i++)
        pthread_join(th[i], NULL);
    qsort(tokens, TOK_THREADS * TOK_EACH, RLOCK_TOKEN_MAX, cmp_tok);
    for (int i = 1; i < TOK_THREADS * TOK_EACH; i++)
        assert_true(strcmp(tokens[i - 1], tokens[i]) != 0);
}

/* ---- option names ----------------------------------------------------- */

static void test_option_names(void **state)
{
    static const char *rel[] = { "token-lua", "plain-del", "get-then-del" };
    static const char *acq[] = { "set-nx-px", "setnx-then-expire" };
    enum rlock_release r;
    enum rlock_acquire a;
    enum rlock_kind k;
    struct rlock_opts o;

    for (int i = 0; i < 3; i++) {
        assert_int_equal(rlock_release_parse(rel[i], &r), 0);
        assert_string_equal(rlock_release_name(r), rel[i]);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rlock_acquire_parse(acq[i], &a), 0);
        assert_string_equal(rlock_acquire_name(a), acq[i]);
    }
    assert_int_equal(rlock_kind_parse("simple", &k), 0);
    assert_int_equal(k, RLOCK_SIMPLE);
    assert_int_equal(rlock_release_parse("del", &r), -1);
    assert_int_equal(rlock_acquire_parse(NULL, &a), -1);
    rlock_opts_default(&o);
    assert_int_equal(o.kind, RLOCK_REENTRANT);
    assert_int_equal(o.release, RLOCK_RELEASE_TOKEN_LUA);
    assert_int_equal(o.acquire, RLOCK_ACQUIRE_SET_NX_PX);
    assert_true(o.watchdog);
    assert_int_equal(o.ttl_ms, 30000);
    assert_string_equal(rlock_strerror(RLOCK_EUNAVAIL), "unavailable");
    assert_string_equal(rlock_strerror(RLOCK_TIMEOUT), "timeout");
}

/* One table feeds parse, name and the choices text: every listed choice
 * parses back, and the texts are the words request validation prints. */
static void test_option_table(void **state)
{
    enum rlock_kind k;
    enum rlock_acquire a;
    enum rlock_release r;

    assert_string_equal(rlock_release_choices(), "token-lua, plain-del or get-then-del");
    assert_string_equal(rlock_acquire_choices(), "set-nx-px or setnx-then-expire");
    assert_ptr_equal(rlock_release_choices(), rlock_release_choices());

    assert_int_equal(rlock_kind_parse("reentrant", &k), 0);
    assert_int_equal(k, RLOCK_REENTRANT);
    assert_string_equal(rlock_kind_name(RLOCK_SIMPLE), "simple");
    assert_int_equal(rlock_acquire_parse("setnx-then-expire", &a), 0);
    assert_int_equal(a, RLOCK_ACQUIRE_SETNX_THEN_EXPIRE);
    assert_int_equal(rlock_release_parse("get-then-del", &r), 0);
    assert_int_equal(r, RLOCK_RELEASE_GET_THEN_DEL);

    /* A word of one option is not a word of another; out untouched. */
    r = RLOCK_RELEASE_PLAIN_DEL;
    assert_int_equal(rlock_release_parse("set-nx-px", &r), -1);
    assert_int_equal(r, RLOCK_RELEASE_PLAIN_DEL);
    assert_int_equal(rlock_kind_parse("token-lua", &k), -1);
    assert_int_equal(rlock_acquire_parse("Set-NX-PX", &a), -1);
    assert_int_equal(rlock_kind_parse(NULL, &k), -1);

    assert_string_equal(rlock_release_name((enum rlock_release)3), "?");
    assert_string_equal(rlock_acquire_name((enum rlock_acquire)-1), "?");
    assert_string_equal(rlock_kind_name((enum rlock_kind)2), "?");
    assert_string_equal(rlock_strerror(42), "unknown");
}

static void test_free_null(void **state)
{
    rlock_free(NULL);
    rlock_client_free(NULL);
    redlock_free(NULL);
    rconn_pool_free(NULL);
    assert_int_equal(rlock_acquire(NULL, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_release(NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_is_lost(NULL), 0);
    /* accessors read a NULL handle as an invalid one */
    assert_int_equal(rlock_err(NULL), RLOCK_EINVAL);
    assert_true(strlen(rlock_errstr(NULL)) > 0);
    assert_string_equal(rlock_key(NULL), "");
    assert_string_equal(rlock_token(NULL), "");
    assert_int_equal(rlock_depth(NULL), 0);
    assert_int_equal(rlock_last_wait_ms(NULL), 0);
    assert_null(rlock_get_opts(NULL));
}

/* A pool connects lazily: creating, naming and freeing it needs no Redis. */
static void test_rconn_pool_offline(void **state)
{
    struct rconn_pool *p = rconn_pool_new_addr("redis.example", 6390, 0, 0);

    assert_non_null(p);
    assert_string_equal(rconn_pool_addr(p), "redis.example:6390");
    rconn_put(p, NULL);
    rconn_pool_free(p);
    p = rconn_pool_new_addr(NULL, 6379, 10, 10);
    assert_non_null(p);
    assert_string_equal(rconn_pool_addr(p), "127.0.0.1:6379");
    rconn_pool_free(p);
}

/* ---- redlock math ----------------------------------------------------- */

static void test_redlock_quorum(void **state)
{
    static const int want[] = { 0, 1, 2, 2, 3, 3, 4, 4, 5 };
    for (int n = 1; n <= 8; n++)
        assert_int_equal(redlock_quorum(n), want[n]);
}

static void test_redlock_validity(void **state)
{
    static const struct { long ttl, elapsed, drift, validity; const char *label; } cases[] = {
        { 10000, 0, 102, 9898, "10 s lease, instant" },
        { 10000, 30, 102, 9868, "10 s lease, 30 ms to lock" },
        { 30000, 5, 302, 29693, "redisson default" },
        { 150, 0, 4, 146, "1.5 ms drift rounds up to 2" },
        { 100, 0, 3, 97, "exactly 1 ms" },
        { 1, 0, 3, -2, "tiny lease is worthless" },
        { 200, 200, 4, -4, "took the whole ttl" },
        { 1000, 988, 12, 0, "zero validity is a failure" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (redlock_drift_ms(cases[i].ttl) != cases[i].drift ||
            redlock_validity_ms(cases[i].ttl, cases[i].elapsed) != cases[i].validity)
            fail_msg("%s: drift %ld validity %ld", cases[i].label,
                     redlock_drift_ms(cases[i].ttl),
                     redlock_validity_ms(cases[i].ttl, cases[i].elapsed));
    }
}

static void test_redlock_parse_nodes(void **state)
{
    struct redlock_config cfg;

    redlock_config_default(&cfg);
    assert_int_equal(cfg.connect_timeout_ms, 50);
    assert_int_equal(redlock_parse_nodes("6391,6392,6393", NULL, &cfg), 0);
    assert_int_equal(cfg.nnodes, 3);
    assert_string_equal(cfg.nodes[0].host, "127.0.0.1");
    assert_int_equal(cfg.nodes[2].port, 6393);
    assert_int_equal(redlock_parse_nodes("10.0.0.1:7000,localhost:7001", NULL, &cfg), 0);
    assert_int_equal(cfg.nnodes, 2);
    assert_string_equal(cfg.nodes[1].host, "localhost");
    assert_int_equal(cfg.nodes[1].port, 7001);
    static const char *bad[] = { "", "6391,", ",6391", "abc", "0", "70000", "h:", ":1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (redlock_parse_nodes(bad[i], NULL, &cfg) != -1 || cfg.nnodes != 0)
            fail_msg("accepted bad node list '%s'", bad[i]);
    }
    assert_null(redlock_new(&cfg)); /* zero nodes */
}

/* ---- segments --------------------------------------------------------- */

static void test_seg_split_table(void **state)
{
    static const struct { long stock; int k; int nonzero; long want[10]; const char *label; } cases[] = {
        { 100, 10, 10, { 10, 10, 10, 10, 10, 10, 10, 10, 10, 10 }, "even" },
        { 10, 3, 3, { 4, 3, 3 }, "remainder 1 goes first" },
        { 11, 3, 3, { 4, 4, 3 }, "remainder 2" },
        { 7, 4, 4, { 2, 2, 2, 1 }, "remainder 3 of 4" },
        { 3, 5, 3, { 1, 1, 1, 0, 0 }, "k > stock leaves zeros" },
        { 0, 4, 0, { 0, 0, 0, 0 }, "no stock" },
        { 5, 1, 1, { 5 }, "one segment" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long out[SEG_MAX], sum = 0;
        int nz = seg_split(cases[i].stock, cases[i].k, out);
        if (nz != cases[i].nonzero)
            fail_msg("%s: nonzero %d", cases[i].label, nz);
        for (int j = 0; j < cases[i].k; j++) {
            if (out[j] != cases[i].want[j])
                fail_msg("%s: segment %d = %ld", cases[i].label, j, out[j]);
            if (seg_share(cases[i].stock, cases[i].k, j) != out[j])
                fail_msg("%s: seg_share disagrees at %d", cases[i].label, j);
            sum += out[j];
        }
        assert_int_equal(sum, cases[i].stock);
    }
}

static void test_seg_split_properties(void **state)
{
    /* Every (stock, k): sums to stock, shares differ by at most one, and
     * never increase from one segment to the next. */
    for (long stock = 0; stock <= 300; stock++) {
        for (int k = SEG_MIN; k <= SEG_MAX; k++) {
            long out[SEG_MAX], sum = 0;
            int nz = seg_split(stock, k, out);
            assert_int_equal(nz, stock < k ? (int)stock : k);
            for (int j = 0; j < k; j++) {
                sum += out[j];
                assert_true(out[j] == stock / k || out[j] == stock / k + 1);
                if (j > 0)
                    assert_true(out[j] <= out[j - 1]);
            }
            assert_int_equal(sum, stock);
        }
    }
}

static void test_seg_bounds(void **state)
{
    long out[SEG_MAX + 1];

    assert_int_equal(seg_split(10, 0, out), -1);
    assert_int_equal(seg_split(10, SEG_MAX + 1, out), -1);
    assert_int_equal(seg_split(-1, 4, out), -1);
    assert_int_equal(seg_split(1000000, SEG_MAX, out), SEG_MAX);
    assert_int_equal(seg_share(10, 3, 3), -1);
    assert_int_equal(seg_share(10, 3, -1), -1);
    assert_int_equal(seg_valid(10, 64), 0);
    assert_int_equal(seg_valid(10, 65), -1);
    assert_int_equal(seg_walk(3, 0, 4), 3);
    assert_int_equal(seg_walk(3, 1, 4), 0);
    assert_int_equal(seg_walk(3, 3, 4), 2);
    assert_int_equal(seg_walk(4, 0, 4), -1);
    assert_int_equal(seg_walk(0, 4, 4), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_format),
        cmocka_unit_test(test_token_instance_sanitized),
        cmocka_unit_test(test_token_small_buffer),
        cmocka_unit_test(test_token_unique_across_threads),
        cmocka_unit_test(test_option_names),
        cmocka_unit_test(test_option_table),
        cmocka_unit_test(test_free_null),
        cmocka_unit_test(test_rconn_pool_offline),
        cmocka_unit_test(test_redlock_quorum),
        cmocka_unit_test(test_redlock_validity),
        cmocka_unit_test(test_redlock_parse_nodes),
        cmocka_unit_test(test_seg_split_table),
        cmocka_unit_test(test_seg_split_properties),
        cmocka_unit_test(test_seg_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
