/* redis-stream's description for GET /guards (guard.h: struct guard_doc):
 * what it does, needs and breaks, and its metric families (most are its
 * flusher's, stream_flusher.c). In a file of its own because
 * guard_redis_stream.c is near the length limit. */
#include "guards/guard.h"

#include <stddef.h>

static const char *const doc_steps[] = {
    "One Lua script: idempotency by order_id, check-and-decrement, XADD to lab:sales.",
    "A flusher per instance writes batches of up to 500 to MySQL in one transaction.",
    "Exact once drained; the audit reports the unflushed tail as pending.",
    NULL,
};
static const struct guard_metric doc_metrics[] = {
    {"lab_stream_batches_total", "counter", "redis-stream flusher: batches committed", ""},
    {"lab_stream_entries_total", "counter",
     "redis-stream flusher: sales in committed batches (a stream entry carries one "
     "or a whole group)", ""},
    {"lab_stream_inserted_total", "counter", "redis-stream flusher: ledger rows inserted", ""},
    {"lab_stream_flush_failures_total", "counter",
     "redis-stream flusher: failed flush attempts", ""},
    {"lab_stream_claimed_total", "counter",
     "redis-stream flusher: entries taken over from a dead consumer", ""},
    {"lab_stream_replayed_total", "counter",
     "redis-stream flusher: rows a replay found already there", ""},
    {"lab_stream_floor_total", "counter",
     "redis-stream flusher: sales whose MySQL stock was floored at 0", ""},
    {"lab_stream_last_batch_size", "gauge", "redis-stream flusher: entries in the last batch", ""},
    {"lab_stream_lag_max_seconds", "gauge",
     "redis-stream flusher: largest write-behind lag seen", ""},
    {"lab_stream_lag_seconds", "histogram",
     "redis-stream: Redis time of a sale to its MySQL commit", ""},
    {"lab_stream_sale_calls_total", "counter",
     "redis-stream: sale script calls (each carries a group of concurrent sales of one SKU)", ""},
    {"lab_stream_sale_call_members_total", "counter",
     "redis-stream: sales carried by those calls", ""},
};
const struct guard_doc stream_doc = {
    .needs = "Redis (AOF, fsync always) + MySQL behind",
    .use_when = "the hottest sales: answer from Redis, write MySQL in batches behind",
    .breaks = "nothing found; Redis is the system of record until the flush",
    .origin = "seed 001: decide in the kv store, write the database later through a queue",
    .steps = doc_steps,
    .statements = "EVAL (SISMEMBER order; DECRBY sstock:{sku}; XADD lab:sales ...)\nflusher: "
        "XREADGROUP; BEGIN; INSERT INTO ledger ...; UPDATE inventory ...; COMMIT; "
        "XACK",
    .code = "lib/guards/redis_stream/guard_redis_stream.c",
    .metrics = doc_metrics,
    .nmetrics = sizeof(doc_metrics) / sizeof(doc_metrics[0]),
};
