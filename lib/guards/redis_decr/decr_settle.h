/* redis-decr's intents after the Redis decision: forgotten once the sale
 * is in MySQL, given back when it will not be, and settled by others once
 * past their write deadline (the instance died, could not clear it, or its
 * write waited past the deadline) -- each settlement recorded in a short
 * list the audit shows (stock:{SKU}:settled). */
#ifndef LAB_DECR_SETTLE_H
#define LAB_DECR_SETTLE_H

#include "base/db.h"
#include "guards/redis_decr/decr_decide.h"
#include "guards/core/redis_reconcile.h"
#include "guards/core/redis_shared.h"

#include <stddef.h>

/* Settlements kept per SKU (newest first) and how long (ms). */
#define DECR_SETTLED_KEEP 16
#define DECR_SETTLED_TTL_MS 86400000L

/* The sale is in MySQL (or its fate is Redis's reconciliation's): forget
 * its intent. A failure leaves it to be settled as stale. */
void decr_intent_clear(struct redis_shared *redis, const struct decr_intent *in);

/* The units of a sale that will not be recorded go back, into the state
 * (k, epoch) they were taken from only, and its intent goes, in one
 * script: once, whoever removes the intent gives back. Returns 1 given,
 * 0 not needed (state lost or another epoch), -1 already settled, -2
 * Redis could not be reached (logged). */
int decr_give_back(struct redis_shared *redis, const struct rrec *k,
                   const struct decr_intent *in, const char *epoch, long qty, const char *sku);

/* Settle the intent `nonce` of sku, past its deadline: whether its sale
 * landed is asked of MySQL (db) with the SKU's stock row locked (see
 * relative_batch.h: a group commit checks its deadline under that lock),
 * by the ledger row's intent id; landed -> forgotten, not -> given back.
 * Recorded in the SKU's settled list with `by` ("audit", "sale"). Best
 * effort: a failure leaves it for the next sale or audit. */
void decr_settle_stale(struct redis_shared *redis, const struct rrec *k, struct db_conn *db,
                       const char *sku, const char *nonce, const char *by);

/* Every intent of sku past its deadline (at most 64 per call), settled as
 * decr_settle_stale by `by`. 0, or -1 when Redis could not be read. */
int decr_settle_all(struct redis_shared *redis, const struct rrec *k, struct db_conn *db,
                    const char *sku, const char *by);

/* The SKU's settled list as a JSON array text (newest first; the oldest
 * left out when buf is too small) into buf (len >= 3); "[]" when none.
 * 0, or -1 when Redis could not be read (buf holds "[]"). */
int decr_settled_json(struct redis_shared *redis, const char *sku, char *buf, size_t len);

#endif
