/* lg_tmpl: placeholder expansion ({seq} {uuid} {rand:A..B} {zipf:N:S} {thread}),
 * literal braces, malformed placeholders rejected, bounded output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../loadtest/loadgen/lg_tmpl.h"

static struct lg_tmpl *compile(const char *s)
{
    struct lg_tmpl *t = lg_tmpl_compile(s, strlen(s));
    assert_non_null(t);
    return t;
}

/* expand into a NUL-terminated static buffer */
static const char *expand(const struct lg_tmpl *t, uint64_t seq, unsigned thread, uint64_t *rng)
{
    static char buf[4096];
    struct lg_tmpl_vars v = {seq, thread, rng};
    long n = lg_tmpl_expand(t, &v, buf, sizeof buf - 1);
    assert_true(n >= 0);
    assert_true((size_t)n <= t->max_len);
    buf[n] = '\0';
    return buf;
}

struct expand_case {
    const char *label, *src;
    uint64_t seq;
    unsigned thread;
    const char *want;
};

static const struct expand_case expand_cases[] = {
    {"plain text", "GET / HTTP/1.1", 0, 0, "GET / HTTP/1.1"},
    {"empty", "", 5, 0, ""},
    {"seq in JSON", "{\"sku\":\"SKU-1\",\"order_id\":\"o-{seq}\"}", 42, 0,
     "{\"sku\":\"SKU-1\",\"order_id\":\"o-42\"}"},
    {"seq twice is the same request's value", "/o/{seq}?again={seq}", 7, 0, "/o/7?again=7"},
    {"seq zero", "{seq}", 0, 0, "0"},
    {"seq max", "{seq}", UINT64_MAX, 0, "18446744073709551615"},
    {"thread", "t{thread}-s{seq}", 9, 3, "t3-s9"},
    {"nested JSON braces stay", "{\"a\":{\"b\":{}}}", 0, 0, "{\"a\":{\"b\":{}}}"},
    {"brace then space", "{ seq}", 0, 0, "{ seq}"},
    {"brace then upper case", "{Seq}", 0, 0, "{Seq}"},
    {"unknown word without delimiter", "{abc def}", 0, 0, "{abc def}"},
    {"escaped braces", "\\{seq\\} is {seq}", 5, 0, "{seq} is 5"},
    {"lone closing brace", "}{", 0, 0, "}{"},
    {"backslash kept elsewhere", "a\\nb\\\"", 0, 0, "a\\nb\\\""},
    {"rand with equal bounds", "{rand:7..7}", 0, 0, "7"},
    {"rand negative equal bounds", "{rand:-3..-3}", 0, 0, "-3"},
    {"trailing brace", "x{", 0, 0, "x{"},
};

static void test_expand_table(void **state)
{
    for (size_t i = 0; i < sizeof expand_cases / sizeof expand_cases[0]; i++) {
        const struct expand_case *c = &expand_cases[i];
        struct lg_tmpl *t = compile(c->src);
        if (t->err)
            fail_msg("%s: unexpected error: %s", c->label, t->errstr);
        uint64_t rng = lg_rand_seed(i);
        const char *got = expand(t, c->seq, c->thread, &rng);
        if (strcmp(got, c->want) != 0)
            fail_msg("%s: got '%s', want '%s'", c->label, got, c->want);
        lg_tmpl_free(t);
    }
}

struct reject_case {
    const char *label, *src, *errpart;
};

static const struct reject_case reject_cases[] = {
    {"unknown placeholder", "x{nope}", "unknown placeholder"},
    {"unknown with argument", "{foo:1}", "unknown placeholder"},
    {"unterminated seq", "o-{seq", "unterminated"},
    {"seq followed by other text", "{seq x}", "unterminated"},
    {"uuid with argument", "{uuid:4}", "takes no argument"},
    {"rand without range", "{rand}", "rand:A..B"},
    {"rand missing upper", "{rand:1..}", "rand:A..B"},
    {"rand single dot", "{rand:1.5}", "rand:A..B"},
    {"rand letters", "{rand:a..b}", "rand:A..B"},
    {"rand unterminated", "{rand:1..5", "rand:A..B"},
    {"rand reversed", "{rand:5..1}", "lower bound above"},
    {"rand overflow", "{rand:1..99999999999999999999999}", "rand:A..B"},
    {"zipf without arguments", "{zipf}", "zipf:N:S"},
    {"zipf missing exponent", "{zipf:100}", "zipf:N:S"},
    {"zipf empty exponent", "{zipf:100:}", "zipf:N:S"},
    {"zipf letters", "{zipf:n:s}", "zipf:N:S"},
    {"zipf two dots", "{zipf:100:1.0.1}", "zipf:N:S"},
    {"zipf trailing dot", "{zipf:100:1.}", "zipf:N:S"},
    {"zipf negative exponent", "{zipf:100:-1}", "zipf:N:S"},
    {"zipf unterminated", "{zipf:100:1.0", "zipf:N:S"},
    {"zipf extra argument", "{zipf:100:1.0:3}", "zipf:N:S"},
    {"zipf zero ranks", "{zipf:0:1.0}", "N must be 1.."},
    {"zipf negative ranks", "{zipf:-5:1.0}", "N must be 1.."},
    {"zipf too many ranks", "{zipf:1000000000001:1.0}", "N must be 1.."},
    {"zipf zero exponent", "{zipf:100:0}", "S in (0, 20]"},
    {"zipf exponent too steep", "{zipf:100:20.5}", "S in (0, 20]"},
};

static void test_malformed_rejected(void **state)
{
    for (size_t i = 0; i < sizeof reject_cases / sizeof reject_cases[0]; i++) {
        const struct reject_case *c = &reject_cases[i];
        struct lg_tmpl *t = compile(c->src);
        if (!t->err)
            fail_msg("%s: '%s' accepted", c->label, c->src);
        if (!strstr(t->errstr, c->errpart))
            fail_msg("%s: error '%s' lacks '%s'", c->label, t->errstr, c->errpart);
        lg_tmpl_free(t);
    }
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static void test_uuid_format(void **state)
{
    struct lg_tmpl *t = compile("id={uuid};");
    assert_false(t->err);
    uint64_t rng = lg_rand_seed(1);
    char prev[37] = "";
    for (int k = 0; k < 1000; k++) {
        const char *s = expand(t, 0, 0, &rng);
        assert_int_equal(strlen(s), 3 + 36 + 1);
        assert_memory_equal(s, "id=", 3);
        const char *u = s + 3;
        for (int i = 0; i < 36; i++) {
            if (i == 8 || i == 13 || i == 18 || i == 23)
                assert_int_equal(u[i], '-');
            else
                assert_true(is_hex(u[i]));
        }
        assert_int_equal(u[14], '4');                 /* version */
        assert_non_null(strchr("89ab", u[19]));       /* variant */
        assert_int_equal(u[36], ';');
        assert_true(strncmp(prev, u, 36) != 0);       /* fresh each time */
        memcpy(prev, u, 36);
        prev[36] = '\0';
    }
    lg_tmpl_free(t);
}

static void test_rand_bounds(void **state)
{
    struct { const char *src; long lo, hi; } cases[] = {
        {"{rand:1..5}", 1, 5}, {"{rand:0..0}", 0, 0}, {"{rand:-2..2}", -2, 2},
        {"{rand:1000000..1000009}", 1000000, 1000009},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct lg_tmpl *t = compile(cases[k].src);
        assert_false(t->err);
        uint64_t rng = lg_rand_seed(k + 100);
        int seen[16] = {0};
        for (int i = 0; i < 5000; i++) {
            long v = strtol(expand(t, 0, 0, &rng), NULL, 10);
            if (v < cases[k].lo || v > cases[k].hi)
                fail_msg("%s gave %ld", cases[k].src, v);
            seen[(v - cases[k].lo) % 16] = 1;
        }
        for (long v = cases[k].lo; v <= cases[k].hi; v++)   /* every value shows up */
            assert_true(seen[(v - cases[k].lo) % 16]);
        lg_tmpl_free(t);
    }
    /* the full 64-bit range must not divide by zero */
    struct lg_tmpl *t = compile("{rand:-9223372036854775808..9223372036854775807}");
    assert_false(t->err);
    uint64_t rng = 3;
    expand(t, 0, 0, &rng);
    lg_tmpl_free(t);
}

static void test_bounded_output(void **state)
{
    struct lg_tmpl *t = compile("order-{seq}-{uuid}-{rand:1..1000}-{thread}");
    assert_false(t->err);
    assert_true(t->dynamic);
    assert_true(t->uses_seq);
    char buf[256];
    uint64_t rng = 9;
    struct lg_tmpl_vars v = {UINT64_MAX, 4000000000u, &rng};
    long n = lg_tmpl_expand(t, &v, buf, t->max_len);
    assert_true(n > 0 && (size_t)n <= t->max_len);
    /* too small a buffer is refused, never overrun */
    for (size_t cap = 0; cap < (size_t)n; cap++)
        assert_int_equal(lg_tmpl_expand(t, &v, buf, cap), -1);
    lg_tmpl_free(t);
}

static void test_static_template(void **state)
{
    struct lg_tmpl *t = compile("{\"sku\":\"SKU-1\"}");
    assert_false(t->dynamic);
    assert_int_equal(t->nsegs, 1);   /* one literal run, one memcpy */
    assert_int_equal(t->max_len, strlen("{\"sku\":\"SKU-1\"}"));
    lg_tmpl_free(t);
}

/* Every rank stays in 1..N, across catalogue sizes and exponents, with the
 * edges included: N = 1 always gives 1, a steep S still reaches rank 2. */
static void test_zipf_bounds(void **state)
{
    struct { const char *src; unsigned long n; } cases[] = {
        {"{zipf:1:1.0}", 1}, {"{zipf:2:1.0}", 2}, {"{zipf:10:0.1}", 10},
        {"{zipf:1000:1.0}", 1000}, {"{zipf:100000:1.0}", 100000},
        {"{zipf:100000:0.5}", 100000}, {"{zipf:7:20}", 7},
        {"{zipf:1000000000000:1.2}", 1000000000000ul},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct lg_tmpl *t = compile(cases[k].src);
        if (t->err)
            fail_msg("%s: %s", cases[k].src, t->errstr);
        uint64_t rng = lg_rand_seed(k + 7);
        for (int i = 0; i < 20000; i++) {
            const char *s = expand(t, 0, 0, &rng);
            char *e;
            unsigned long v = strtoul(s, &e, 10);
            if (*e || v < 1 || v > cases[k].n)
                fail_msg("%s gave '%s'", cases[k].src, s);
        }
        lg_tmpl_free(t);
    }
}

/* For a fixed seed, the share of each top rank matches k^-S / H(N,S) within
 * 5 standard errors of a binomial count (a wrong law, e.g. uniform or S off
 * by 0.1, misses rank 1 by dozens of them), and the tail gets its share too. */
static void test_zipf_frequencies(void **state)
{
    struct { unsigned n; double s; } laws[] = {{1000, 1.0}, {100000, 1.0}, {50, 0.7}, {1000, 1.5}};
    enum { DRAWS = 200000, TOP = 10 };
    for (size_t k = 0; k < sizeof laws / sizeof laws[0]; k++) {
        char src[64];
        snprintf(src, sizeof src, "{zipf:%u:%.2f}", laws[k].n, laws[k].s);
        struct lg_tmpl *t = compile(src);
        assert_false(t->err);
        double norm = 0;
        for (unsigned r = 1; r <= laws[k].n; r++)
            norm += pow(r, -laws[k].s);
        long count[TOP + 1] = {0}, tail = 0;
        uint64_t rng = lg_rand_seed(2024 + k);
        for (int i = 0; i < DRAWS; i++) {
            unsigned long v = strtoul(expand(t, 0, 0, &rng), NULL, 10);
            if (v <= TOP)
                count[v]++;
            else
                tail++;
        }
        double tail_p = 1.0;
        for (unsigned r = 1; r <= TOP; r++) {
            double p = pow(r, -laws[k].s) / norm;
            double sd = sqrt(DRAWS * p * (1 - p));
            tail_p -= p;
            if (fabs(count[r] - DRAWS * p) > 5 * sd)
                fail_msg("%s rank %u: %ld draws, want %.0f +- %.0f", src, r, count[r], DRAWS * p, 5 * sd);
        }
        double tail_sd = sqrt(DRAWS * tail_p * (1 - tail_p)) + 1;
        if (fabs(tail - DRAWS * tail_p) > 5 * tail_sd)
            fail_msg("%s ranks above %d: %ld draws, want %.0f", src, TOP, tail, DRAWS * tail_p);
        lg_tmpl_free(t);
    }
}

/* The op log re-expands a body from the rng state saved before it: the same
 * state must give the same ranks. */
static void test_zipf_replays(void **state)
{
    struct lg_tmpl *t = compile("{\"sku\":\"CAT-{zipf:100000:1.0}\",\"n\":{zipf:9:2}}");
    assert_false(t->err);
    assert_true(t->dynamic);
    uint64_t a = lg_rand_seed(5), b = a;
    char first[128];
    snprintf(first, sizeof first, "%s", expand(t, 0, 0, &a));
    assert_string_equal(first, expand(t, 0, 0, &b));
    assert_memory_equal(first, "{\"sku\":\"CAT-", 11);
    lg_tmpl_free(t);
}

static void test_free_null(void **state)
{
    lg_tmpl_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_table),
        cmocka_unit_test(test_malformed_rejected),
        cmocka_unit_test(test_uuid_format),
        cmocka_unit_test(test_rand_bounds),
        cmocka_unit_test(test_bounded_output),
        cmocka_unit_test(test_static_template),
        cmocka_unit_test(test_zipf_bounds),
        cmocka_unit_test(test_zipf_frequencies),
        cmocka_unit_test(test_zipf_replays),
        cmocka_unit_test(test_free_null),
    };
    return cmocka_run_group_tests_name("lg_template", tests, NULL, NULL);
}
