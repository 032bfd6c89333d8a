/* The redis-stream guard's reads of its side state in Redis, and the
 * audit's hold on flushes: the queue counts, whether an order is still
 * queued, one consistent read of stock, queue and flush counter, and the
 * facts of GET /inventory/{sku}. Each takes the guard's shared Redis. */
#ifndef LAB_STREAM_SIDE_H
#define LAB_STREAM_SIDE_H

#include "guards/guard.h"
#include "guards/core/redis_reconcile.h"

struct redis_shared;

/* Sales of sku answered and not yet in MySQL: *entries sales, *units
 * units. 0, or -1 (both 0) when Redis cannot be read. */
int sside_pending(struct redis_shared *rs, const char *sku, long long *entries,
                  long long *units);
/* 1 when order_id is a sale of its SKU's current epoch and that SKU still
 * has sales queued, 0 when not, -1 when Redis cannot be read. */
int sside_queued(struct redis_shared *rs, const char *order_id);
/* Stock, queue, flush counter and flushers marked now, in one script.
 * 0, or -1 when Redis cannot be read. */
int sside_read(struct redis_shared *rs, const char *sku, struct guard_side *out);
/* on: hold flush commits off (SFLUSH_AUDIT_HOLD_MS at most) unless a
 * flusher is marked right now: 1 held, 0 a flusher is committing, -1
 * Redis failed. off: let go of this thread's hold (1). */
int sside_freeze(struct redis_shared *rs, int on);
/* replicas_ack met for the sale entry `id`: flushers may write it now
 * (best effort: else they do once its wait has run out). */
void sside_confirm_sale(struct redis_shared *rs, const char *id);
/* The facts of sku for GET /inventory/{sku} (k: the guard's keys of it).
 * 0, or -1 when Redis cannot be read. */
int sside_describe(struct redis_shared *rs, const struct rrec *k, const char *sku,
                   struct guard_facts *out);

#endif
