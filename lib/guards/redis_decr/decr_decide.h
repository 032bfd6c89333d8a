/* redis-decr's decision in Redis: one Lua script checks and decrements
 * the stock and records the sale as an intent (see guard_redis_decr.c),
 * for one sale or for the sales of a SKU that reach Redis at the same
 * time on this instance (one script call for all). */
#ifndef LAB_DECR_DECIDE_H
#define LAB_DECR_DECIDE_H

#include "guards/core/coalesce.h"
#include "guards/core/redis_reconcile.h"
#include "stock/keys.h"
#include "guards/redis_decr/relative_batch.h"

/* Most decisions per script call. */
#define DECR_DECIDE_MAX 128

/* A sale's intent: its nonce and keys (gone: keys_stock_intents_gone). */
struct decr_intent {
    char nonce[96];
    char zset[KEYS_MAX], hash[KEYS_MAX], gone[KEYS_MAX];
};

/* One sale's decision in a group. */
struct decr_decision {
    const struct rrec *k;
    const struct decr_intent *in;
    const struct deduct_req *req;
    long write_ms;
    long long left, seeds;     /* out: as decr_decrement() */
    char epoch[RREC_EPOCH_MAX], stale[96];
    struct deduct_res *res;
    /* the guard's decide_record only: the sale as written (deadline capped) and its
     * group commit's answer, when recorded is 1 */
    struct deduct_req sale;
    struct relative_item item;
    int recorded;
};

/* One run of the decrement script for req alone, with replicas_ack
 * `acks` waited up to wait_ms (*acked: replicas reached): the new stock
 * (>= 0), -1 not enough (res->remaining: the stock left), -2 key
 * missing, -3 failure (res filled). *epoch receives the epoch, *seeds the
 * MySQL seeds of the stock (-1 unknown), stale the nonce of an intent past
 * its deadline ("" none). */
long long decr_decrement(struct redis_shared *redis, const struct rrec *k,
                         const struct decr_intent *in, const struct deduct_req *req,
                         long write_ms, int acks, long wait_ms, char epoch[RREC_EPOCH_MAX],
                         long long *seeds, char stale[96], long long *acked,
                         struct deduct_res *res);

/* The decisions of m[0..n-1] (their arg: struct decr_decision, one SKU,
 * n <= DECR_DECIDE_MAX) in one script call; each gets left, epoch, seeds
 * (and the first, stale) as decr_decrement's, or res filled on failure. */
void decr_decide_many(struct redis_shared *redis, struct coal_member *const *m, int n);

/* decr_decrement with the other sales of the SKU deciding at the same
 * time on this instance: one script call for all. A sale with
 * replicas_ack is decided alone (its WAIT is its own). Same returns. */
long long decr_decide_grouped(struct redis_shared *redis, const struct rrec *k,
                              const struct decr_intent *in, const struct deduct_req *req,
                              long write_ms, int acks, long wait_ms,
                              char epoch[RREC_EPOCH_MAX], long long *seeds, char stale[96],
                              long long *acked, struct deduct_res *res);

#endif
