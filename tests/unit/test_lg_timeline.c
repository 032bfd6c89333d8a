/* The loadgen's per-second timeline: events land in the second they
 * happen in, 2xx are ok and the rest errors, the array grows past its
 * first size and clamps at LG_TL_MAX_S, per-thread timelines merge, the
 * per-second p99 comes from the coarse slots, and the JSON carries it
 * (open loop: offered per second and never_sent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../loadtest/loadgen/lg_report.h"
#include "../../loadtest/loadgen/lg_timeline.h"

#define S 1000000ull   /* one second in us */

static void test_events_land_in_their_second(void **state)
{
    (void)state;
    struct lg_timeline t;
    lg_tl_init(&t, 5 * S);
    lg_tl_response(&t, 5 * S, 200, 1000);          /* second 0 */
    lg_tl_response(&t, 6 * S - 1, 409, 1000);      /* still second 0 */
    lg_tl_response(&t, 6 * S, 201, 1000);          /* second 1 */
    lg_tl_sent(&t, 7 * S + 10);                    /* second 2 */
    lg_tl_errors(&t, 9 * S, 3);                    /* second 4 */
    lg_tl_errors(&t, 9 * S, 0);                    /* nothing, no growth either */
    lg_tl_response(&t, 4 * S, 503, 10);            /* before the start: second 0 */
    assert_int_equal(t.used, 5);
    assert_int_equal(t.sec[0].ok, 1);
    assert_int_equal(t.sec[0].errors, 2);
    assert_int_equal(t.sec[1].ok, 1);
    assert_int_equal(t.sec[2].sent, 1);
    assert_int_equal(t.sec[3].ok + t.sec[3].errors + t.sec[3].sent, 0);
    assert_int_equal(t.sec[4].errors, 3);
    lg_tl_free(&t);
}

static void test_grows_and_clamps(void **state)
{
    (void)state;
    struct lg_timeline t;
    lg_tl_init(&t, 0);
    lg_tl_response(&t, 100 * S, 200, 1);
    assert_int_equal(t.used, 101);
    assert_true(t.nsec >= 101);
    assert_int_equal(t.sec[100].ok, 1);
    lg_tl_response(&t, 100000 * S, 200, 1);        /* far past the bound */
    assert_int_equal(t.used, LG_TL_MAX_S);
    assert_int_equal(t.sec[LG_TL_MAX_S - 1].ok, 1);
    assert_int_equal(t.sec[100].ok, 1);            /* kept across the realloc */
    assert_int_equal(t.oom, 0);
    lg_tl_free(&t);
}

static void test_merge(void **state)
{
    (void)state;
    struct lg_timeline a, b;
    lg_tl_init(&a, 0);
    lg_tl_init(&b, 0);
    lg_tl_response(&a, 0, 200, 100);
    lg_tl_response(&b, 0, 200, 100);
    lg_tl_response(&b, 70 * S, 500, 100);
    assert_int_equal(lg_tl_merge(&a, &b), 0);
    assert_int_equal(a.used, 71);
    assert_int_equal(a.sec[0].ok, 2);
    assert_int_equal(a.sec[70].errors, 1);
    lg_tl_free(&a);
    lg_tl_free(&b);
}

static void test_slots_and_p99(void **state)
{
    (void)state;
    /* slots never go down as values grow, and a slot's value maps back to it */
    size_t prev = 0;
    for (uint64_t us = 0; us < 70 * S; us = us < 64 ? us + 1 : us + us / 7) {
        size_t k = lg_tl_slot(us);
        assert_true(k >= prev && k < LG_TL_SLOTS);
        assert_int_equal(lg_tl_slot(lg_tl_slot_value(k)), k);
        prev = k;
    }
    struct lg_tl_sec s;
    memset(&s, 0, sizeof s);
    assert_int_equal(lg_tl_percentile(&s, 99), 0);
    for (int i = 0; i < 98; i++)
        s.lat[lg_tl_slot(1000)]++;                  /* 98 x 1 ms */
    s.lat[lg_tl_slot(250000)] += 2;                 /* 2 x 250 ms */
    uint64_t p99 = lg_tl_percentile(&s, 99);
    assert_true(p99 >= 200000 && p99 <= 300000);   /* within the slot's 25% */
    uint64_t p50 = lg_tl_percentile(&s, 50);
    assert_true(p50 >= 800 && p50 <= 1300);
}

static void test_json_open_loop(void **state)
{
    (void)state;
    static struct lg_stats st;
    struct lg_plan plan;
    struct lg_timeline t;
    memset(&plan, 0, sizeof plan);
    plan.threads = 1;
    plan.connections = 1;
    plan.rate = 10;
    plan.requests = 25;
    lg_stats_init(&st);
    lg_tl_init(&t, 0);
    for (int i = 0; i < 10; i++) {
        lg_tl_sent(&t, (uint64_t)i * 100000);
        lg_tl_response(&t, (uint64_t)i * 100000, 200, 500);
    }
    lg_tl_sent(&t, 2 * S + 1);
    lg_tl_response(&t, 2 * S + 1, 503, 1000);
    struct lg_report_info ri = {&plan, 2.5, 0, 0, &t};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lg_report_json(f, &st, &ri);
    fclose(f);
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    assert_non_null(j);
    json_t *tl = json_object_get(j, "timeline");
    assert_non_null(tl);
    json_t *secs = json_object_get(tl, "seconds");
    assert_int_equal(json_array_size(secs), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(secs, 0), "ok")), 10);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(secs, 1), "sent")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(secs, 2), "errors")), 1);
    /* offered: 10, 10, then 5 (2.5 s elapsed, capped at 25 requests) */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(secs, 2), "offered")), 5);
    assert_int_equal(json_integer_value(json_object_get(tl, "offered")), 25);
    assert_int_equal(json_integer_value(json_object_get(tl, "never_sent")), 14);
    json_t *p99 = json_object_get(json_array_get(secs, 0), "p99_ms");
    assert_true(json_number_value(p99) > 0.3 && json_number_value(p99) < 0.7);
    json_decref(j);
    free(buf);
    lg_tl_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_land_in_their_second),
        cmocka_unit_test(test_grows_and_clamps),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_slots_and_p99),
        cmocka_unit_test(test_json_open_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
