/* The # HELP and # TYPE of every metric family the services export, in one
 * table, so /metrics passes `promtool check metrics` (every family
 * described, gauges typed as gauges). services/API.md lists the same
 * families with their labels; tests/checks/test_promtool_metrics.sh keeps
 * every name used in lib/ and services/ in this table. */
#include "metrics.h"

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
    {"lab_segment_fallthrough_total", "counter", "segmented sales that moved on to another segment"},
    {"lab_redis_reloads_total", "counter", "Redis stock states reloaded from MySQL after a reconcile wait"},
    {"lab_redis_divergence_reconciles_total", "counter", "Redis stock states found diverged from MySQL and reconciled"},
    {"lab_stock_divergence_total", "counter", "sales whose Redis and MySQL stock disagreed"},
    {"lab_commit_lost_total", "counter", "commits whose answer was lost (outcome unknown, checked in the ledger)"},
    {"lab_release_lock_failures_total", "counter", "releases refused because the selling guard's lock was not obtained"},
    {"lab_reseeded_during_sale_total", "counter", "lock-guard writes refused because the SKU was reseeded after the sale read its stock"},
    {"lab_lock_acquired_total", "counter", "Redis lock client: locks acquired"},
    {"lab_lock_handoffs_total", "counter", "Redis lock client: releases handed to a waiter of the same process without a Redis round trip"},
    {"lab_lock_timeouts_redis_total", "counter", "Redis lock client: acquisitions that timed out"},
    {"lab_lock_waits_total", "counter", "Redis lock client: acquisitions that had to wait"},
    {"lab_lock_wait_seconds_total", "counter", "Redis lock client: seconds spent waiting for locks"},
    {"lab_lock_notifications_total", "counter", "Redis lock client: release notifications received"},
    {"lab_lock_renewals_total", "counter", "Redis lock client: watchdog lease renewals"},
    {"lab_lock_lost_total", "counter", "Redis lock client: holders that found their lock gone"},
    {"lab_lock_foreign_release_total", "counter", "Redis lock client: releases that found another holder's token"},
    {"lab_lock_unavailable_total", "counter", "Redis lock client: acquisitions refused because Redis was away"},
    {"lab_redlock_acquired_total", "counter", "redlock: locks acquired on a quorum"},
    {"lab_redlock_quorum_failures_total", "counter", "redlock: rounds that missed the quorum"},
    {"lab_redlock_timeouts_total", "counter", "redlock: acquisitions that timed out"},
    {"lab_redlock_unavailable_total", "counter", "redlock: acquisitions refused because too few masters answered"},
    {"lab_redlock_lost_total", "counter", "redlock: holders that found their lock gone"},
    {"lab_redlock_node_errors_total", "counter", "redlock: errors talking to one master"},
    {"lab_redlock_renewals_total", "counter", "redlock: watchdog rounds extended on a quorum"},
    {"lab_redlock_expired_total", "counter", "redlock: holders that found their validity gone before the write"},
    {"lab_batch_size", "histogram", "deductions per batched-update batch"},
    {"lab_decr_group_size", "histogram", "redis-decr sales per MySQL group commit"},
    {"lab_batch_transactions_total", "counter", "batched-update transactions (a batch runs again after a ledger duplicate)"},
    {"lab_zk_lock_acquired_total", "counter", "zookeeper: locks acquired"},
    {"lab_zk_lock_timeouts_total", "counter", "zookeeper: acquisitions that timed out"},
    {"lab_zk_unavailable_total", "counter", "zookeeper: acquisitions refused because the ensemble was away"},
    {"lab_zk_lock_lost_total", "counter", "zookeeper: holders whose session or node was gone before the write"},
    {"lab_zk_create_recovered_total", "counter", "zookeeper: lost create answers whose node was found by its attempt id"},
    {"lab_zk_release_failures_total", "counter", "zookeeper: deletes that failed (the session is given up)"},
    {"lab_zk_sessions_total", "counter", "zookeeper: sessions established"},
    {"lab_zk_sessions_lost_total", "counter", "zookeeper: sessions expired or given up"},
    {"lab_zk_suspensions_total", "counter", "zookeeper: connection losses while a session lived"},
    {"lab_zk_connected", "gauge", "1 while the zookeeper guard's session is connected"},
    {"lab_etcd_lock_acquired_total", "counter", "etcd: locks acquired"},
    {"lab_etcd_lock_timeouts_total", "counter", "etcd: acquisitions that timed out (the waiter revoked its lease)"},
    {"lab_etcd_unavailable_total", "counter", "etcd: requests refused because etcd could not be reached in time"},
    {"lab_etcd_lease_expired_total", "counter", "etcd: holders whose lease was out of date before the write"},
    {"lab_etcd_short_lease_refused_total", "counter", "etcd: requests refused for a lease below etcd's minimum"},
    {"lab_etcd_release_failures_total", "counter", "etcd: revokes that failed (the lease runs out by itself)"},
    {"lab_etcd_renewals_total", "counter", "etcd: keep-alives that extended a lease"},
    {"lab_etcd_leases_lost_total", "counter", "etcd: keep-alives that found the lease gone"},
    {"lab_etcd_calls_total", "counter", "etcd: HTTP calls to the v3 gateway"},
    {"lab_etcd_call_failures_total", "counter", "etcd: HTTP calls to the v3 gateway that got no answer"},
    {"lab_stream_batches_total", "counter", "redis-stream flusher: batches committed"},
    {"lab_stream_entries_total", "counter", "redis-stream flusher: sales in committed batches (a stream entry carries one or a whole group)"},
    {"lab_stream_inserted_total", "counter", "redis-stream flusher: ledger rows inserted"},
    {"lab_stream_flush_failures_total", "counter", "redis-stream flusher: failed flush attempts"},
    {"lab_stream_claimed_total", "counter", "redis-stream flusher: entries taken over from a dead consumer"},
    {"lab_stream_replayed_total", "counter", "redis-stream flusher: rows a replay found already there"},
    {"lab_stream_floor_total", "counter", "redis-stream flusher: sales whose MySQL stock was floored at 0"},
    {"lab_stream_last_batch_size", "gauge", "redis-stream flusher: entries in the last batch"},
    {"lab_stream_lag_max_seconds", "gauge", "redis-stream flusher: largest write-behind lag seen"},
    {"lab_stream_lag_seconds", "histogram", "redis-stream: Redis time of a sale to its MySQL commit"},
    {"lab_stream_sale_calls_total", "counter", "redis-stream: sale script calls (each carries a group of concurrent sales of one SKU)"},
    {"lab_stream_sale_call_members_total", "counter", "redis-stream: sales carried by those calls"},
    {"lab_order_failovers_total", "counter", "orders retried on another inventory instance"},
    {"lab_order_releases_total", "counter", "order service: releases of stock for failed orders"},
    {"lab_order_idempotency_total", "counter", "order service: requests with an Idempotency-Key, by result (new, replayed, in_progress, reused, retried)"},
    {"lab_metrics_dropped_total", "counter", "series that did not fit the metrics table"},
};

const struct metrics_family *metrics_family_of(const char *name)
{
    for (size_t i = 0; i < sizeof(catalog) / sizeof(catalog[0]); i++)
        if (strcmp(catalog[i].name, name) == 0)
            return &catalog[i];
    return NULL;
}
