/* redis-decr's MySQL half as group commits: the sales of one SKU that
 * reach their MySQL write at the same time on this instance are recorded
 * in one transaction (stock/relative_batch.h). The first to arrive leads;
 * it waits only while the SKU's previous group is committing (a group
 * forms during the commit before it: no sleep when idle), takes everyone
 * queued and records them, each with its own answer. Durable before each
 * answer: an answer comes after the COMMIT that holds its ledger row. */
#ifndef LAB_DECR_GROUP_H
#define LAB_DECR_GROUP_H

#include "stock/deduct.h"

#include "guards/redis_decr/relative_batch.h"

/* Called by the thread that recorded a group, once its transaction is
 * over and before any member is answered, with every member (ctx as given
 * to decr_group_record): the guard's follow-up for the whole group in one
 * go (redis-decr: forget the intents of the sales that landed). */
typedef void (*decr_group_done_fn)(struct relative_item *items, int n);

/* Record req (decided in Redis on stock of the row's reseed count
 * `seeds`, < 0 unchecked) with whatever other sales of its SKU are
 * waiting, its ledger row carrying `intent` (relative_item's, may be
 * NULL); done(), when not NULL, sees the group before the answers.
 * Fills res; returns what stock_record_relative_seeded would (0 sold, or
 * an enum stock_commit). */
int decr_group_record(const char *guard_name, const struct deduct_env *env,
                      const struct deduct_req *req, long long seeds, void *ctx,
                      const char *intent, decr_group_done_fn done, struct deduct_res *res);

/* The same group commit for items[0..n-1] (n <= STOCK_BATCH_MAX, one
 * SKU; the caller set req, seeds, res, ctx, intent, rc =
 * STOCK_NOT_COMMITTED, answered = 0) that the caller gathered itself (redis-decr's decision and
 * write in one coalesced run): recorded on env->db, counted in
 * lab_decr_group_size, then done(). Every item is answered on return. */
void decr_group_record_many(const char *guard_name, const struct deduct_env *env,
                            struct relative_item *items, int n, decr_group_done_fn done);

#endif
