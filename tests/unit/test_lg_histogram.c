/* lg_hist: percentiles of known distributions within 1%, merge, bounds,
 * constant memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../loadtest/loadgen/lg_hist.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* exact percentile with the same rank rule as the histogram */
static uint64_t exact_pct(const uint64_t *sorted, size_t n, double pct)
{
    if (pct >= 100)
        return sorted[n - 1];
    size_t want = (size_t)ceil(pct / 100.0 * (double)n);
    if (want < 1)
        want = 1;
    return sorted[want - 1];
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

enum dist { UNIFORM, CONSTANT, EXPONENTIAL, BIMODAL };

struct dist_case {
    const char *label;
    enum dist kind;
    size_t n;
    uint64_t a, b;
};

static const struct dist_case dist_cases[] = {
    {"uniform 1us..100ms", UNIFORM, 200000, 1, 100000},
    {"uniform 100us..200us (exact range)", UNIFORM, 50000, 100, 200},
    {"constant 4321us", CONSTANT, 10000, 4321, 0},
    {"constant 0us", CONSTANT, 1000, 0, 0},
    {"exponential mean 2ms", EXPONENTIAL, 200000, 2000, 0},
    {"bimodal 300us / 45ms", BIMODAL, 100000, 300, 45000},
    {"uniform up to 59s", UNIFORM, 100000, 1000, 59000000},
};

static uint64_t draw(const struct dist_case *c, uint64_t *s)
{
    switch (c->kind) {
    case UNIFORM:
        return c->a + lcg(s) % (c->b - c->a + 1);
    case CONSTANT:
        return c->a;
    case EXPONENTIAL: {
        double u = ((double)(lcg(s) % 1000000) + 0.5) / 1000000.0;
        return (uint64_t)(-log(u) * (double)c->a) + 1;
    }
    case BIMODAL:
        return (lcg(s) % 10 < 9 ? c->a : c->b) + lcg(s) % 50;
    }
    return 0;
}

static void test_percentiles_known_distributions(void **state)
{
    static const double pcts[] = {0, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100};
    for (size_t k = 0; k < sizeof dist_cases / sizeof dist_cases[0]; k++) {
        const struct dist_case *c = &dist_cases[k];
        uint64_t *v = malloc(c->n * sizeof *v);
        assert_non_null(v);
        struct lg_hist *h = malloc(sizeof *h);
        assert_non_null(h);
        lg_hist_init(h);
        uint64_t seed = 42 + k;
        double sum = 0;
        for (size_t i = 0; i < c->n; i++) {
            v[i] = draw(c, &seed);
            sum += (double)v[i];
            lg_hist_record(h, v[i]);
        }
        qsort(v, c->n, sizeof *v, cmp_u64);
        assert_int_equal(h->count, c->n);
        assert_int_equal(h->min, v[0]);
        assert_int_equal(h->max, v[c->n - 1]);
        double mean = sum / (double)c->n;
        if (fabs(lg_hist_mean(h) - mean) > 1e-6 * (mean + 1))
            fail_msg("%s: mean %f, want %f", c->label, lg_hist_mean(h), mean);
        for (size_t p = 0; p < sizeof pcts / sizeof pcts[0]; p++) {
            double want = (double)exact_pct(v, c->n, pcts[p]);
            double got = (double)lg_hist_percentile(h, pcts[p]);
            double tol = want * 0.01 + 0.5;   /* 1%, and exact below 256us */
            if (fabs(got - want) > tol)
                fail_msg("%s: p%g = %.0f, want %.0f (+-%.1f)", c->label, pcts[p], got, want, tol);
        }
        free(h);
        free(v);
    }
}

static void test_bucket_bounds(void **state)
{
    /* every value maps to a bucket whose bounds contain it, buckets are
     * contiguous and 1/128 wide at most */
    for (uint64_t v = 0; v <= LG_HIST_MAX_US; v = v < 5000 ? v + 1 : v + v / 97 + 1) {
        size_t i = lg_hist_index(v);
        assert_true(i < LG_HIST_SLOTS);
        assert_true(lg_hist_lowest(i) <= v && v <= lg_hist_highest(i));
        double width = (double)(lg_hist_highest(i) - lg_hist_lowest(i) + 1);
        assert_true(width <= 1.0 || width / (double)lg_hist_lowest(i) <= 1.0 / 128 + 1e-9);
    }
    for (size_t i = 1; i <= lg_hist_index(LG_HIST_MAX_US); i++)
        assert_int_equal(lg_hist_lowest(i), lg_hist_highest(i - 1) + 1);
}

static void test_clamp_and_empty(void **state)
{
    struct lg_hist h;
    lg_hist_init(&h);
    assert_int_equal(lg_hist_percentile(&h, 50), 0);
    assert_true(lg_hist_mean(&h) == 0.0);
    lg_hist_record(&h, 3600ull * 1000000);   /* one hour: clamped to 60 s */
    assert_int_equal(h.clamped, 1);
    assert_int_equal(h.max, LG_HIST_MAX_US);
    assert_int_equal(lg_hist_percentile(&h, 99.9), LG_HIST_MAX_US);
}

static void test_merge_equals_single(void **state)
{
    static struct lg_hist a, b, all;
    lg_hist_init(&a);
    lg_hist_init(&b);
    lg_hist_init(&all);
    uint64_t s = 7;
    for (int i = 0; i < 100000; i++) {
        uint64_t v = lcg(&s) % 2000000;
        lg_hist_record(i % 3 ? &a : &b, v);
        lg_hist_record(&all, v);
    }
    static struct lg_hist m;
    lg_hist_init(&m);
    lg_hist_merge(&m, &a);
    lg_hist_merge(&m, &b);
    assert_memory_equal(&m, &all, sizeof m);
    struct lg_hist empty;
    lg_hist_init(&empty);
    lg_hist_merge(&m, &empty);   /* merging an empty one changes nothing */
    assert_memory_equal(&m, &all, sizeof m);
}

static void test_memory_constant(void **state)
{
    /* the histogram is one fixed block: recording millions of values
     * allocates nothing and touches no memory outside the struct */
    assert_true(sizeof(struct lg_hist) <= 32 * 1024);
    struct lg_hist *h = malloc(sizeof *h);
    assert_non_null(h);
    lg_hist_init(h);
    struct mallinfo2 before = mallinfo2();
    uint64_t s = 1;
    for (int i = 0; i < 3000000; i++)
        lg_hist_record(h, lcg(&s) % 70000000);
    struct mallinfo2 after = mallinfo2();
    assert_int_equal(before.uordblks, after.uordblks);
    assert_int_equal(h->count, 3000000);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles_known_distributions),
        cmocka_unit_test(test_bucket_bounds),
        cmocka_unit_test(test_clamp_and_empty),
        cmocka_unit_test(test_merge_equals_single),
        cmocka_unit_test(test_memory_constant),
    };
    return cmocka_run_group_tests_name("lg_histogram", tests, NULL, NULL);
}
