/* The # HELP and # TYPE of the services' own metric families, so /metrics
 * passes `promtool check metrics` (every family described, gauges typed as
 * gauges). A guard's own families are in its file (struct guard_doc's
 * metrics) and registered at start (metrics_register). services/API.md
 * lists the service's families with their labels;
 * tests/checks/test_promtool_metrics.sh keeps every name used in lib/ and
 * services/ in this table or in a guard's rows. */
#include "metrics.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

static const struct metrics_family catalog[] = {
    {"lab_http_requests_total", "counter", "HTTP requests by route, status and guard"},
    {"lab_http_request_duration_seconds", "histogram", "HTTP request duration by route"},
    {"lab_deductions_total", "counter", "deductions by guard and outcome"},
    {"lab_retries_total", "counter", "optimistic misses and deadlock retries by guard"},
    {"lab_db_conflicts_total", "counter",
     "deadlocks, lock wait timeouts and Galera certification failures MySQL answered, by guard"},
    {"lab_cart_deductions_total", "counter", "cart deductions (several lines, one order) by guard and outcome"},
    {"lab_cart_conflicts_total", "counter",
     "MySQL deadlocks (1213) and lock wait timeouts (1205) met by cart deductions, by guard and kind"},
    {"lab_lock_timeouts_total", "counter", "deductions whose guard gave up waiting for its lock"},
    {"lab_limit_refusals_total", "counter", "sales refused as past the buyer's purchase limit (limit_exceeded)"},
    {"lab_fenced_total", "counter", "writes refused because a newer lock holder fenced them"},
    {"lab_test_pauses_total", "counter", "whole-process pauses injected by a --*-fault-pause-after-check option (tests only)"},
    {"lab_lock_wait_seconds", "histogram", "time spent acquiring a guard"},
    {"lab_deduct_duration_seconds", "histogram", "time the guard layer took to answer one deduction, by guard"},
    {"lab_redis_reloads_total", "counter", "Redis stock states reloaded from MySQL after a reconcile wait"},
    {"lab_redis_divergence_reconciles_total", "counter", "Redis stock states found diverged from MySQL and reconciled"},
    {"lab_stock_divergence_total", "counter", "sales whose Redis and MySQL stock disagreed"},
    {"lab_commit_lost_total", "counter", "commits whose answer was lost (outcome unknown, checked in the ledger)"},
    {"lab_holds_total", "counter", "hold steps (reserve, confirm, release, expiry) by guard and outcome"},
    {"lab_holds_swept_total", "counter", "holds past their deadline whose units the sweeper gave back, by guard"},
    {"lab_release_lock_failures_total", "counter", "releases refused because the selling guard's lock was not obtained"},
    {"lab_reseeded_during_sale_total", "counter", "lock-guard writes refused because the SKU was reseeded after the sale read its stock"},
    {"lab_order_failovers_total", "counter", "orders retried on another inventory instance"},
    {"lab_order_releases_total", "counter", "order service: releases of stock for failed orders"},
    {"lab_order_idempotency_total", "counter", "order service: requests with an Idempotency-Key, by result (new, replayed, in_progress, reused, retried)"},
    {"lab_metrics_dropped_total", "counter", "series that did not fit the metrics table"},
};

static pthread_mutex_t registered_mu = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_family registered[METRICS_MAX_REGISTERED];
static size_t nregistered;

static const struct metrics_family *catalogued(const char *name)
{
    for (size_t i = 0; i < sizeof(catalog) / sizeof(catalog[0]); i++)
        if (strcmp(catalog[i].name, name) == 0)
            return &catalog[i];
    return NULL;
}

/* Called with registered_mu held. */
static const struct metrics_family *registered_of(const char *name)
{
    for (size_t i = 0; i < nregistered; i++)
        if (strcmp(registered[i].name, name) == 0)
            return &registered[i];
    return NULL;
}

int metrics_register(const char *name, const char *type, const char *help)
{
    if (catalogued(name))
        return 0;
    pthread_mutex_lock(&registered_mu);
    int rc = 0;
    if (!registered_of(name)) {
        if (nregistered < METRICS_MAX_REGISTERED)
            registered[nregistered++] = (struct metrics_family){name, type, help};
        else
            rc = -1;
    }
    pthread_mutex_unlock(&registered_mu);
    return rc;
}

/* A registered row is never changed or removed, so its pointer stays good
 * after the mutex is let go. */
const struct metrics_family *metrics_family_of(const char *name)
{
    const struct metrics_family *f = catalogued(name);
    if (f)
        return f;
    pthread_mutex_lock(&registered_mu);
    f = registered_of(name);
    pthread_mutex_unlock(&registered_mu);
    return f;
}
