/* metrics: counters, label separation, histogram exposition, a full table
 * that drops instead of crashing, and exact sums under concurrent adds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"

static int reset(void **state)
{
    (void)state;
    metrics_reset();
    return 0;
}

/* The value on the exposition line that starts with `prefix` followed by a
 * space; -1 when absent. */
static double line_value(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static void test_counters_add_up(void **state)
{
    (void)state;
    static const struct { const char *label, *name, *labels; double v; } adds[] = {
        {"first",            "t_requests_total", "route=\"deduct\"", 1},
        {"second",           "t_requests_total", "route=\"deduct\"", 2},
        {"fraction",         "t_requests_total", "route=\"deduct\"", 0.5},
        {"other label",      "t_requests_total", "route=\"seed\"",   7},
        {"other name",       "t_errors_total",   "route=\"deduct\"", 4},
        {"no labels",        "t_plain_total",    "",                 3},
        {"NULL labels",      "t_plain_total",    NULL,               2},
    };
    for (size_t i = 0; i < sizeof adds / sizeof adds[0]; i++)
        metrics_add(adds[i].name, adds[i].labels, adds[i].v);

    static const struct { const char *label, *name, *labels; double want; } gets[] = {
        {"sum of three adds",          "t_requests_total", "route=\"deduct\"", 3.5},
        {"labels kept apart",          "t_requests_total", "route=\"seed\"",   7},
        {"names kept apart",           "t_errors_total",   "route=\"deduct\"", 4},
        {"empty and NULL labels same", "t_plain_total",    "",                 5},
        {"NULL labels lookup",         "t_plain_total",    NULL,               5},
        {"absent label set",           "t_requests_total", "route=\"x\"",      0},
        {"absent name",                "t_nothing_total",  "",                 0},
        {"labels are exact text",      "t_requests_total", "route=\"deduct\",", 0},
    };
    for (size_t i = 0; i < sizeof gets / sizeof gets[0]; i++) {
        double v = metrics_get(gets[i].name, gets[i].labels);
        if (v != gets[i].want)
            fail_msg("%s: %s{%s} = %g, want %g", gets[i].label, gets[i].name,
                     gets[i].labels ? gets[i].labels : "(null)", v, gets[i].want);
    }

    char *text = metrics_render();
    assert_non_null(text);
    assert_true(line_value(text, "t_requests_total{route=\"deduct\"}") == 3.5);
    assert_true(line_value(text, "t_requests_total{route=\"seed\"}") == 7);
    assert_true(line_value(text, "t_plain_total") == 5);
    assert_null(strstr(text, "t_plain_total{"));   /* empty labels: no braces */
    assert_non_null(strstr(text, "# TYPE t_requests_total counter\n"));
    free(text);
}

static void test_histogram_exposition(void **state)
{
    (void)state;
    /* 0.0005 sits exactly on the first bound: le is inclusive. */
    static const double obs[] = {0.0005, 0.003, 0.003, 0.2, 7, 42};
    double sum = 0;
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++) {
        metrics_observe("t_latency_seconds", "route=\"deduct\"", obs[i]);
        sum += obs[i];
    }
    metrics_observe("t_wait_seconds", "", 0.01);
    metrics_describe("t_latency_seconds", "histogram", "request latency");

    char *text = metrics_render();
    assert_non_null(text);

    static const struct { const char *label, *line; double want; } lines[] = {
        {"on the first bound", "t_latency_seconds_bucket{route=\"deduct\",le=\"0.0005\"}", 1},
        {"cumulative 0.001",   "t_latency_seconds_bucket{route=\"deduct\",le=\"0.001\"}", 1},
        {"cumulative 0.005",   "t_latency_seconds_bucket{route=\"deduct\",le=\"0.005\"}", 3},
        {"cumulative 0.25",    "t_latency_seconds_bucket{route=\"deduct\",le=\"0.25\"}", 4},
        {"cumulative 10",      "t_latency_seconds_bucket{route=\"deduct\",le=\"10\"}", 5},
        {"+Inf == count",      "t_latency_seconds_bucket{route=\"deduct\",le=\"+Inf\"}", 6},
        {"count",              "t_latency_seconds_count{route=\"deduct\"}", 6},
        {"no labels: le only", "t_wait_seconds_bucket{le=\"0.01\"}", 1},
        {"no labels: below",   "t_wait_seconds_bucket{le=\"0.005\"}", 0},
        {"no labels: +Inf",    "t_wait_seconds_bucket{le=\"+Inf\"}", 1},
        {"no labels: count",   "t_wait_seconds_count", 1},
        {"no labels: sum",     "t_wait_seconds_sum", 0.01},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        double v = line_value(text, lines[i].line);
        if (v != lines[i].want)
            fail_msg("%s: %s = %g, want %g\n%s", lines[i].label, lines[i].line, v,
                     lines[i].want, text);
    }
    double got_sum = line_value(text, "t_latency_seconds_sum{route=\"deduct\"}");
    assert_true(got_sum > sum - 1e-6 && got_sum < sum + 1e-6);

    /* Buckets never decrease, whatever the bounds are. */
    double prev = -1;
    const char *prefix = "t_latency_seconds_bucket{route=\"deduct\",le=\"";
    for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) {
        const char *sp = strchr(p, ' ');
        assert_non_null(sp);
        double v = strtod(sp + 1, NULL);
        assert_true(v >= prev);
        prev = v;
    }
    assert_true(prev == 6);

    assert_non_null(strstr(text, "# HELP t_latency_seconds request latency\n"));
    assert_non_null(strstr(text, "# TYPE t_latency_seconds histogram\n"));
    assert_null(strstr(text, "t_wait_seconds_sum{"));
    assert_null(strstr(text, "t_wait_seconds_count{"));
    /* A histogram is not a counter. */
    assert_true(metrics_get("t_latency_seconds", "route=\"deduct\"") == 0);
    free(text);
}

static void test_reset(void **state)
{
    (void)state;
    metrics_add("t_gone_total", "a=\"1\"", 9);
    metrics_observe("t_gone_seconds", "", 1);
    assert_true(metrics_get("t_gone_total", "a=\"1\"") == 9);
    metrics_reset();
    assert_true(metrics_get("t_gone_total", "a=\"1\"") == 0);
    char *text = metrics_render();
    assert_non_null(text);
    assert_null(strstr(text, "t_gone"));
    assert_true(line_value(text, "lab_metrics_dropped_total") == 0);
    free(text);
    /* Usable again after a reset. */
    metrics_add("t_gone_total", "a=\"1\"", 1);
    assert_true(metrics_get("t_gone_total", "a=\"1\"") == 1);
}

static void test_table_full_drops(void **state)
{
    (void)state;
    const int total = METRICS_MAX_SERIES + 200;
    char labels[64];
    for (int i = 0; i < total; i++) {
        snprintf(labels, sizeof labels, "i=\"%d\"", i);
        metrics_add("t_many_total", labels, 1);
    }
    /* Keep going once full: histograms and repeats must not crash either. */
    for (int i = 0; i < 50; i++) {
        snprintf(labels, sizeof labels, "h=\"%d\"", i);
        metrics_observe("t_many_seconds", labels, 0.1);
    }
    int kept = 0;
    for (int i = 0; i < total; i++) {
        snprintf(labels, sizeof labels, "i=\"%d\"", i);
        double v = metrics_get("t_many_total", labels);
        assert_true(v == 0 || v == 1);
        kept += v == 1;
    }
    assert_true(kept > 0);
    assert_true(kept <= METRICS_MAX_SERIES);

    char *text = metrics_render();
    assert_non_null(text);
    double dropped = line_value(text, "lab_metrics_dropped_total");
    if (dropped < total - kept)
        fail_msg("dropped_total %g, but %d of %d series were not kept", dropped,
                 total - kept, total);
    free(text);

    /* Too-long names and labels are dropped too, not truncated or crashed on. */
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    metrics_reset();
    metrics_add(longname, "", 1);
    metrics_add("t_ok_total", longname, 1);
    text = metrics_render();
    assert_non_null(text);
    assert_true(line_value(text, "lab_metrics_dropped_total") == 2);
    free(text);
}

#define NTHREADS 4
/* The catalogue types and describes what the services export, and what a
 * module above base registered (a guard's rows): a gauge set with
 * metrics_set is typed gauge, a count histogram has its own bounds. */
static void test_catalogue_types(void **state)
{
    (void)state;
    assert_int_equal(metrics_register("t_link_up", "gauge", "1 while the link is up"), 0);
    assert_int_equal(metrics_register("t_batch_size", "histogram", "sales per batch"), 0);
    /* again: kept once; a catalogued name keeps the catalogue's row */
    assert_int_equal(metrics_register("t_link_up", "counter", "other"), 0);
    assert_int_equal(metrics_register("lab_retries_total", "gauge", "other"), 0);
    assert_string_equal(metrics_family_of("t_link_up")->type, "gauge");
    assert_string_equal(metrics_family_of("lab_retries_total")->type, "counter");
    metrics_set("t_link_up", "", 1);
    metrics_add("lab_retries_total", "guard=\"optimistic\"", 2);
    static const double le[] = {1, 2, 4};
    metrics_observe_le("t_batch_size", "", 3, le, 3);
    metrics_observe_le("t_batch_size", "", 9, le, 3);
    char *text = metrics_render();
    assert_non_null(text);
    static const char *want[] = {
        "# TYPE t_link_up gauge\n",
        "# HELP t_link_up 1 while the link is up\n",
        "# TYPE lab_retries_total counter\n",
        "# HELP lab_retries_total ",
        "# TYPE t_batch_size histogram\n",
        "t_batch_size_bucket{le=\"2\"} 0\n",
        "t_batch_size_bucket{le=\"4\"} 1\n",
        "t_batch_size_bucket{le=\"+Inf\"} 2\n",
        "t_batch_size_sum 12\n",
        "t_batch_size_count 2\n",
        "# HELP lab_metrics_dropped_total ",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i]))
            fail_msg("missing '%s' in:\n%s", want[i], text);
    assert_null(strstr(text, "t_batch_size_bucket{le=\"8\"}"));
    free(text);
    assert_non_null(metrics_family_of("lab_http_requests_total"));
    assert_null(metrics_family_of("t_unknown_total"));
}

/* The per-guard deduction latency (lab_deduct_duration_seconds): typed a
 * histogram by the catalogue, one series per guard with the fixed bounds,
 * the guard label before le (the recording rule sums by guard, le). */
static void test_deduct_duration_per_guard(void **state)
{
    (void)state;
    const struct metrics_family *f = metrics_family_of("lab_deduct_duration_seconds");
    assert_non_null(f);
    assert_string_equal(f->type, "histogram");
    metrics_observe("lab_deduct_duration_seconds", "guard=\"redis-lock\"", 0.004);
    metrics_observe("lab_deduct_duration_seconds", "guard=\"redis-lock\"", 0.03);
    metrics_observe("lab_deduct_duration_seconds", "guard=\"optimistic\"", 0.0002);
    char *text = metrics_render();
    assert_non_null(text);
    static const struct { const char *line; double want; } lines[] = {
        {"lab_deduct_duration_seconds_bucket{guard=\"redis-lock\",le=\"0.0025\"}", 0},
        {"lab_deduct_duration_seconds_bucket{guard=\"redis-lock\",le=\"0.005\"}", 1},
        {"lab_deduct_duration_seconds_bucket{guard=\"redis-lock\",le=\"0.05\"}", 2},
        {"lab_deduct_duration_seconds_bucket{guard=\"redis-lock\",le=\"10\"}", 2},
        {"lab_deduct_duration_seconds_bucket{guard=\"redis-lock\",le=\"+Inf\"}", 2},
        {"lab_deduct_duration_seconds_count{guard=\"redis-lock\"}", 2},
        {"lab_deduct_duration_seconds_bucket{guard=\"optimistic\",le=\"0.0005\"}", 1},
        {"lab_deduct_duration_seconds_count{guard=\"optimistic\"}", 1},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        double v = line_value(text, lines[i].line);
        if (v != lines[i].want)
            fail_msg("%s = %g, want %g\n%s", lines[i].line, v, lines[i].want, text);
    }
    assert_non_null(strstr(text, "# TYPE lab_deduct_duration_seconds histogram\n"));
    assert_non_null(strstr(text, "# HELP lab_deduct_duration_seconds "));
    free(text);
}

#define NADDS 10000

static void *adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < NADDS; i++) {
        metrics_add("t_concurrent_total", "k=\"shared\"", 1);
        metrics_observe("t_concurrent_seconds", "", 0.002);
        if (i % 1000 == 0)
            free(metrics_render());
    }
    return NULL;
}

static void test_concurrent_adds(void **state)
{
    (void)state;
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, adder, NULL), 0);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_true(metrics_get("t_concurrent_total", "k=\"shared\"") == NTHREADS * NADDS);
    char *text = metrics_render();
    assert_non_null(text);
    assert_true(line_value(text, "t_concurrent_seconds_count") == NTHREADS * NADDS);
    assert_true(line_value(text, "t_concurrent_seconds_bucket{le=\"+Inf\"}") ==
                NTHREADS * NADDS);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_counters_add_up, reset),
        cmocka_unit_test_setup(test_histogram_exposition, reset),
        cmocka_unit_test_setup(test_reset, reset),
        cmocka_unit_test_setup(test_table_full_drops, reset),
        cmocka_unit_test_setup(test_concurrent_adds, reset),
        cmocka_unit_test_setup(test_catalogue_types, reset),
        cmocka_unit_test_setup(test_deduct_duration_per_guard, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
