/* Every Redis key and lock name of the lab, formatted here and nowhere else,
 * so two modules can never spell one SKU's key two ways. The SKU sits in a
 * {hash tag}: all keys of one SKU land on one Redis Cluster slot, so a Lua
 * script may touch them together. */
#ifndef LAB_KEYS_H
#define LAB_KEYS_H

#include "deduct.h"

#include <stdio.h>

/* Room for any key below (SKU of STOCK_SKU_MAX bytes, 2-digit segment). */
#define KEYS_MAX (STOCK_SKU_MAX + 32)

/* redis-decr: the SKU's stock counter. */
static inline void keys_stock(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}", sku);
}

/* Redis-stock guards (redis-decr, segmented), each for its own state: the
 * epoch (set by every seed and reload; a sale carries the epoch it was
 * decided in, so its units are never given back into a newer state) and
 * the reconcile marker ("<not-before ms>-<token>", present while Redis has
 * lost the state and the guard waits for in-flight sales to reach MySQL). */
static inline void keys_stock_epoch(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}:epoch", sku);
}

static inline void keys_stock_reconcile(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}:reconcile", sku);
}

/* redis-decr: sales decided in Redis and not yet known to be in MySQL (the
 * intents): a sorted set nonce -> write deadline (Redis ms) and a hash
 * nonce -> "order_id\nepoch\nqty". One left past its deadline belongs to
 * an instance that died mid-sale; the next sale (or an audit of the SKU)
 * settles it. */
static inline void keys_stock_intents(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}:intents", sku);
}

static inline void keys_stock_intent(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}:intent", sku);
}

/* redis-decr: a counter that moves whenever an intent of SKU goes (its
 * sale landed, was given back, or was settled): the audit reads Redis and
 * MySQL as one snapshot only while it stands still. */
static inline void keys_stock_intents_gone(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}:intents_gone", sku);
}

/* redis-decr's last settlements of stale intents of SKU, newest first (a
 * capped list of JSON objects, kept a day): the audit shows them. */
static inline void keys_stock_settled(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}:settled", sku);
}

/* redis-decr: the MySQL row's `seeds` (reseed count) the Redis stock was
 * written from, set with it by every seed and reload: a sale decided on
 * that stock may only land in MySQL while the row still has it. */
static inline void keys_stock_seeds(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "stock:{%s}:seeds", sku);
}

static inline void keys_seg_epoch(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "seg:{%s}:epoch", sku);
}

static inline void keys_seg_reconcile(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "seg:{%s}:reconcile", sku);
}

/* redis-lock and redlock: the per-SKU lock. */
static inline void keys_lock(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "lock:inventory:{%s}", sku);
}

/* segmented: how many segments the SKU has. */
static inline void keys_seg_count(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "seg:{%s}:k", sku);
}

/* segmented: the units of segment i. */
static inline void keys_seg(char out[KEYS_MAX], const char *sku, int i)
{
    snprintf(out, KEYS_MAX, "seg:{%s}:%d", sku, i);
}

/* segmented: the lock of segment i. */
static inline void keys_seg_lock(char out[KEYS_MAX], const char *sku, int i)
{
    snprintf(out, KEYS_MAX, "lock:seg:{%s}:%d", sku, i);
}

/* lock-table: the lock row's name in db_shopping.lock_table. */
#define KEYS_LOCK_ROW_PREFIX "inventory:"
static inline void keys_lock_row(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, KEYS_LOCK_ROW_PREFIX "%s", sku);
}

/* redis-stream (write-behind): the SKU's stock, epoch and reconcile marker
 * (the same roles as redis-decr's, kept apart: this guard's Redis stock is
 * ahead of MySQL by its unflushed sales). */
static inline void keys_sstock(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "sstock:{%s}", sku);
}

static inline void keys_sstock_epoch(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "sstock:{%s}:epoch", sku);
}

static inline void keys_sstock_reconcile(char out[KEYS_MAX], const char *sku)
{
    snprintf(out, KEYS_MAX, "sstock:{%s}:reconcile", sku);
}

/* redis-stream: an order_id's first sale ("epoch\nsku\nqty\nremaining\n
 * instance"), so a repeat is answered from Redis. Global, not per SKU: a
 * reused order_id with another SKU must be seen. The Lua sale script
 * builds keys_sstock_epoch of that other SKU itself ("sstock:{" sku
 * "}:epoch"). */
static inline void keys_sorder(char out[KEYS_MAX], const char *order_id)
{
    snprintf(out, KEYS_MAX, "sorder:%s", order_id);
}

/* redis-stream: the one stream of unflushed sales, its consumer group, and
 * two hashes sku -> unflushed entries / units. One stream per Redis: on a
 * Redis Cluster it would need one per slot. */
#define KEYS_SALES_STREAM "lab:sales"
#define KEYS_SALES_GROUP "flushers"
#define KEYS_SALES_PENDING "lab:sales:pending"
#define KEYS_SALES_PENDING_UNITS "lab:sales:pending_units"
/* redis-stream flushers about to commit (instance -> until, Redis ms), the
 * count of acknowledged batches, and an audit's hold on new commits: the
 * audit reads Redis and MySQL while no flush can commit (guard.h, freeze). */
#define KEYS_SALES_FLUSHING "lab:sales:flushing"
#define KEYS_SALES_FLUSH_SEQ "lab:sales:flush_seq"
#define KEYS_SALES_AUDIT_HOLD "lab:sales:audit_hold"
/* redis-stream replicas_ack: entries whose sale still waits for replicas
 * (id -> until, Redis ms: flushers defer them), and entries taken back
 * after a flusher had read them (that flusher drops them). */
#define KEYS_SALES_UNACKED "lab:sales:unacked"
#define KEYS_SALES_CANCELLED "lab:sales:cancelled"

#endif
