/* Every statement on db_shopping: stock rows, the ledger and the lock
 * table (services, guards and loadtest/tools/rawdb all run these, never a
 * copy), split by table: store.c the inventory rows, store_ledger.c the
 * ledger (one sale's row, group commits, cart lines, the guards' and the
 * audit's reads), store_locks.c the fences (inventory_fence) and the lock
 * table, store_audit.c the audit's figures and the Galera cluster status;
 * tests/checks/test_sql_home.sh keeps SQL out of every other file. Every
 * function takes
 * the caller's connection and returns 1 found / 0 not found, an affected row
 * count, or a negative DB_E* code (see db.h). Transactions are the caller's. */
#ifndef LAB_STORE_H
#define LAB_STORE_H

#include "deduct.h"

struct db_conn;

struct ledger_row {
    char sku[STOCK_SKU_MAX + 1];
    long long qty;
    long long remaining;
    char guard[32];
    char instance[64];
    int released;
    char user_id[STOCK_ID_MAX + 1];   /* the buyer ("" not given) */
};

int store_ledger_get(struct db_conn *db, const char *order_id, int for_update,
                     struct ledger_row *row);
/* Read stock and version; for_update locks the row (inside a transaction). */
int store_read(struct db_conn *db, const char *sku, int for_update,
               long long *stock, long long *version);
/* Read stock, version and seeds (the reseed count) without a lock. */
int store_read_seeded(struct db_conn *db, const char *sku, long long *stock,
                      long long *version, long long *seeds);
/* Read stock and seeds, locking the row (inside a transaction): 1 found,
 * 0 no SKU, or a negative DB_E* code. */
int store_read_seeds_locked(struct db_conn *db, const char *sku, long long *stock,
                            long long *seeds);
/* The lock guards' absolute write, only while the row has not been
 * reseeded since the read that gave `seeds`: 1 written, 0 reseeded (or no
 * SKU). Other writes do not stop it (overlapping holders still lose
 * updates, as the lab means to show). */
long long store_set_stock_seeded(struct db_conn *db, const char *sku, long long stock,
                                 long long seeds);
/* Absolute write of the computed value (the read-modify-write's write). */
long long store_set_stock(struct db_conn *db, const char *sku, long long stock);
/* Fencing (see stock_rmw), per lock service: `guard`'s fence on the SKU.
 * Claim it for `token` (fence = token, only while fence < token; 1
 * claimed, 0 a token as new or newer was there, or no such SKU), then
 * write the computed value only while that fence is still `token` and the
 * row is still at the `version` read after the claim (1 written, 0 a newer
 * token claimed it, or an unfenced write such as a release changed it).
 * Other guards' fences are not looked at: their tokens are no order with
 * this one's. */
long long store_fence_claim(struct db_conn *db, const char *sku, const char *guard,
                            unsigned long long token);
long long store_set_stock_fenced(struct db_conn *db, const char *sku, const char *guard,
                                 long long stock, unsigned long long token, long long version);
/* `guard`'s fence on the SKU into *fence (0: never claimed since the last
 * seed). 1, or a negative DB_E* code. */
int store_fence_get(struct db_conn *db, const char *sku, const char *guard,
                    unsigned long long *fence);
/* Compare-and-set on version: 1 when it won, 0 when someone else wrote. */
long long store_set_stock_if_version(struct db_conn *db, const char *sku,
                                     long long stock, long long version);
/* stock -= qty only when stock >= qty: 1 taken, 0 not enough (or no SKU). */
long long store_take_if_enough(struct db_conn *db, const char *sku, long long qty);
/* The same write, which also hands back the stock it left (*left, set when
 * it returns 1) in its own reply: one round trip where take + read are two. */
long long store_take_if_enough_left(struct db_conn *db, const char *sku, long long qty,
                                    long long *left);
/* store_take_if_enough only while the row's `seeds` is still `seeds`: 1
 * taken, 0 not enough, reseeded since, or no SKU. */
long long store_take_if_enough_seeded(struct db_conn *db, const char *sku, long long qty,
                                      long long seeds);
/* store_take_if_enough for a row this transaction holds locked (FOR
 * UPDATE): 0 rows then means the transaction itself is gone (a Galera
 * brute-force abort), never "not enough", and nothing was written. */
long long store_take_locked(struct db_conn *db, const char *sku, long long qty);
/* redis-decr's group commit (relative_batch.c): stock -= sum for a group
 * decided on `seeds`, only while stock >= sum, the row still on those
 * seeds and of a SKU without a purchase limit (a limited one is refused
 * from the locking read that follows a miss), inside this transaction.
 * The portable form (any dialect) hands the
 * stock it left back in its own reply (*left, LAST_INSERT_ID(expr) as
 * store_take_if_enough_left) and checks the transaction by its marker
 * (DB_IN_OUR_TXN); the MariaDB form leaves it in the session variable
 * @lab_left for store_ledger_insert_rows_after_left. 1 taken, 0 not, or a
 * negative DB_E* code. */
long long store_take_group_left(struct db_conn *db, const char *sku, long long sum,
                                long long seeds, long long *left);
long long store_take_group_into_session(struct db_conn *db, const char *sku, long long sum,
                                        long long seeds);
/* stock += delta unconditionally (redis-decr follow-up, releases). */
long long store_add_stock(struct db_conn *db, const char *sku, long long delta);
/* One sale's ledger row, user_id its buyer ("" none), inside the caller's
 * transaction only. */
long long store_ledger_insert(struct db_conn *db, const char *order_id,
                              const char *sku, long long qty, long long remaining,
                              const char *guard, const char *instance, const char *user_id);
long long store_ledger_mark_released(struct db_conn *db, const char *order_id);
/* Create or reset a SKU: stock = initial = `stock`, version and seeds bumped
 * (0 for a new SKU), every guard's fence back to 0, its ledger cleared (its lock-table row,
 * which a holder elsewhere may own, is not touched). Runs inside the
 * caller's transaction (the reseed commits MySQL and the guards' side
 * state together). Returns 0 or a negative DB_E* code. */
int store_seed(struct db_conn *db, const char *sku, long long stock, int segments);
/* Remove a SKU and its ledger (benchmark clean-up). Returns 0 or a
 * negative DB_E* code. */
int store_remove(struct db_conn *db, const char *sku);
/* The order ids of sku's ledger rows without a stock move, as the audit
 * names them: unreleased rows whose `remaining` repeats an earlier
 * unreleased row's (two sales that read the same stock and wrote the same
 * value: the later moved nothing), oldest first, at most `max`,
 * comma-separated into buf ("" none). Reads every unreleased row of the
 * SKU: run it only when the audit found lost updates. Returns the ids
 * listed, or a negative DB_E* code. */
int store_unmoved_orders(struct db_conn *db, const char *sku, int max, char *buf, size_t len);
/* Audit inputs: initial, stock, units sold (unreleased ledger rows). */
int store_audit(struct db_conn *db, const char *sku, long long *initial,
                long long *stock, long long *sold);
int store_info(struct db_conn *db, const char *sku, long long *stock,
               long long *version, long long *initial, int *segments);

/* lock-table rows (name from keys_lock_row). Insert: 1 affected, DB_EDUP
 * when held. Expire: deletes the row only if its lease ran out (1 / 0).
 * Delete: the owner's row only (1 / 0). */
long long store_lock_row_insert(struct db_conn *db, const char *name, const char *owner,
                                long ttl_ms);
long long store_lock_row_expire(struct db_conn *db, const char *name);
long long store_lock_row_delete(struct db_conn *db, const char *name, const char *owner);
/* Pass the row from owner `from` to owner `to` with a fresh lease of
 * ttl_ms, only while `from` still holds it and its lease has not run out:
 * 1 passed, 0 not (gone or expired: take it as usual), or DB_E*. The
 * row keeps its id (no new fencing token). */
long long store_lock_row_pass(struct db_conn *db, const char *name, const char *from,
                              const char *to, long ttl_ms);
/* The id of the lock row `name` while `owner` holds it (the lock-table
 * guard's fencing token: AUTO_INCREMENT, larger on every take). 1 found
 * (*id set), 0 not ours any more, or a negative DB_E* code. */
int store_lock_row_id(struct db_conn *db, const char *name, const char *owner,
                      unsigned long long *id);

/* ---- batches (batched-update, redis-stream's flusher) ------------------ */

/* Insert a batch of ledger rows in one statement, in array order: `rows` is a JSON array of
 * [order_id, sku, qty, remaining, instance] (MariaDB/MySQL JSON_TABLE),
 * plus, optionally, the sale's intent id (the row's `intent`; absent or
 * null: NULL), all under `guard`. Returns the rows inserted, DB_EDUP when any order_id
 * is already there (nothing inserted), or a negative DB_E* code. */
long long store_ledger_insert_rows(struct db_conn *db, const char *rows, const char *guard);
/* The same with each row's line (a cart's lines, sql/007): `rows` is
 * [order_id, line, sku, qty, remaining, instance] per row (redis-stream's
 * flusher: a single sale is line 0). Returns as store_ledger_insert_rows. */
long long store_ledger_insert_lines(struct db_conn *db, const char *rows, const char *guard);
/* One ledger row (line `line` of its order), skipped when (order_id, line)
 * is there: 1 inserted, 0 not, or a negative DB_E* code. */
long long store_ledger_insert_ignore(struct db_conn *db, const char *order_id, int line,
                                     const char *sku, long long qty, long long remaining,
                                     const char *guard, const char *instance);
/* stock -= qty, but never below 0 (units already answered elsewhere that
 * MySQL did not have): 1 written, 0 no such SKU, or a negative code. */
long long store_take_floor(struct db_conn *db, const char *sku, long long qty);


/* ---- ledger reads of the guards and the audit (store_ledger.c) --------- */

/* The intent id ("" none) and guard of order_id's ledger row (redis-decr's
 * settlement): 1 found, 0 not, or a negative DB_E* code. */
long long store_ledger_intent_of(struct db_conn *db, const char *order_id, char *intent,
                                 size_t intent_len, char *guard, size_t guard_len);
/* 1 when order_id has a ledger row carrying `intent`, 0 not, or DB_E*. */
long long store_ledger_has_intent(struct db_conn *db, const char *order_id, const char *intent);
/* The units of the ledger rows matching `pairs`, a JSON array of
 * [order_id, intent], into *units: 1, or a negative DB_E* code. */
long long store_ledger_units_of_intents(struct db_conn *db, const char *pairs, long long *units);

/* A ledger row as redis-stream's flusher compares it with a sale. */
struct ledger_sale {
    char guard[33];
    char sku[STOCK_SKU_MAX + 1];
    long long qty;
    long long remaining;
    char instance[65];
    long long released;
};
/* order_id's ledger row, without a lock: 1 found, 0 not, or DB_E*. */
long long store_ledger_sale(struct db_conn *db, const char *order_id, struct ledger_sale *out);
/* The ledger rows of order_ids (a JSON array of order ids) as one JSON
 * array of [order_id, sku, qty, remaining, guard, instance] into out (cap
 * bytes, cut short when too small): 1, or a negative DB_E* code. */
long long store_ledger_rows_of(struct db_conn *db, const char *order_ids, char *out,
                               size_t cap);
/* 1 when `guard` has a ledger row of sku (sold it since the seed, released
 * or not), 0 not, negative DB_E*. */
long long store_ledger_guard_sold(struct db_conn *db, const char *sku, const char *guard);
/* How many guards sold sku since its seed (ledger rows, released or not);
 * negative DB_E*. */
long long store_ledger_guards_count(struct db_conn *db, const char *sku);
/* store_ledger_insert_rows after store_take_group_into_session (MariaDB
 * only): each row's `remaining` is @lab_left + its [3], and the statement
 * returns @lab_left into *left. Inside a transaction only. Rows inserted,
 * DB_EDUP, 0 when the transaction is gone, or a negative DB_E* code. */
long long store_ledger_insert_rows_after_left(struct db_conn *db, const char *rows,
                                              const char *guard, long long *left);

/* ---- cluster status (store_audit.c): the audit on a Galera node -------- */

/* Reads on this connection wait until the node applied every write set
 * the cluster had committed when they arrive (wsrep_sync_wait=1). DB_OK
 * or a negative DB_E* code. */
int store_cluster_causal_reads(struct db_conn *db);
/* sku's stock, unreleased units sold, ledger rows and initial: 1 found, 0
 * not, or a negative DB_E* code. */
long long store_cluster_sku_view(struct db_conn *db, const char *sku, long long *stock,
                                 long long *sold, long long *ledger_rows, long long *initial);
/* The node's wsrep_last_committed, and its state comment (Synced, ...). */
long long store_cluster_last_committed(struct db_conn *db, long long *seqno);
long long store_cluster_state(struct db_conn *db, char *state, size_t len);

/* ---- carts (stock/cart_txn.c): one ledger row per line ------------------ */

/* The ledger row of line `line` of a cart order, inside the caller's
 * transaction: 1 inserted, DB_EDUP when the order id already has that
 * line, or a negative DB_E* code. */
long long store_ledger_insert_line(struct db_conn *db, const char *order_id, int line,
                                   const char *sku, long long qty, long long remaining,
                                   const char *guard, const char *instance,
                                   const char *user_id);
/* How many ledger rows (lines) order_id has: >= 0, or a negative DB_E* code. */
long long store_ledger_count(struct db_conn *db, const char *order_id);
/* Line `line` of order_id: 1 found, 0 not, or a negative DB_E* code. */
int store_ledger_get_line(struct db_conn *db, const char *order_id, int line,
                          struct ledger_row *row);
/* stock -= qty without a check (the per-line cart variant's write, which
 * trusted an earlier read): 1 written, 0 no such SKU, or DB_E*. */
long long store_take_unchecked(struct db_conn *db, const char *sku, long long qty);
/* Give back the units of line `line` of order_id and mark that row
 * released, once: 1 done, 0 no such unreleased line, or DB_E*. Inside the
 * caller's transaction (a cart's release gives every line back at once). */
long long store_release_line(struct db_conn *db, const char *order_id, int line);

/* ---- purchase limits (store_limits.c, sql/009_purchase_limits.sql) ------ */

/* The SKU's limit_per_user (0 = none) into *limit: 1 found, 0 no SKU, or
 * a negative DB_E* code. */
int store_limit_of(struct db_conn *db, const char *sku, long long *limit);
/* Set the SKU's limit and clear its buyers' counts (the reseed, inside its
 * transaction). 0 or a negative DB_E* code. */
int store_limit_set(struct db_conn *db, const char *sku, long long limit);
/* The sale's own reads with the SKU's limit in the same row (no extra
 * round trip to learn it): store_read / store_read_seeded plus *limit.
 * Exact for the sale they decide: a limit changes only in a reseed, which
 * bumps version and seeds, so the conditional write that follows (or the
 * row lock, for_update) refuses a sale decided on an older limit. */
int store_read_limit(struct db_conn *db, const char *sku, int for_update, long long *stock,
                     long long *version, long long *limit);
int store_read_seeded_limit(struct db_conn *db, const char *sku, long long *stock,
                            long long *version, long long *seeds, long long *limit);
/* store_read_seeds_locked with the SKU's limit (redis-decr's group
 * commit, whose writes match unlimited SKUs only: it refuses a limited
 * one from this read). */
int store_read_seeds_limit_locked(struct db_conn *db, const char *sku, long long *stock,
                                  long long *seeds, long long *limit);
/* store_take_if_enough_left only for an unlimited SKU (limit_per_user 0):
 * the unlimited sale's one statement, as before limits existed. 0 rows:
 * not enough, no SKU, or a limited SKU (the caller's locked read tells). */
long long store_take_if_enough_unlimited(struct db_conn *db, const char *sku, long long qty,
                                         long long *left);
/* Inside the sale's transaction: the user's count += qty only while it
 * stays <= limit. > 0 taken, 0 over the limit (nothing moved), DB_ERETRY
 * when the transaction is gone (a Galera brute-force abort: nothing
 * written), or another DB_E* code. */
long long store_limit_take(struct db_conn *db, const char *sku, const char *user_id,
                           long long qty, long long limit);
/* The user's count += qty, unchecked (limit_check "separate": the check
 * was made apart, before). Affected rows, or DB_E*. */
long long store_limit_add(struct db_conn *db, const char *sku, const char *user_id,
                          long long qty);
/* A release: the user's count -= qty (never below 0). Rows, or DB_E*. */
long long store_limit_give(struct db_conn *db, const char *sku, const char *user_id,
                           long long qty);
/* The user's count (0 when no row) into *bought: 1 row, 0 none, DB_E*. */
int store_limit_bought(struct db_conn *db, const char *sku, const char *user_id,
                       long long *bought);
/* The audit's overbuys, from the ledger (unreleased rows) and the live
 * holds (state 'held', which took the quota too) grouped by user_id: *limit the SKU's limit, *count the users past it, and buf
 * (len bytes) "user=bought,user=bought" ("" none). Returns *count (0 when
 * the SKU has no limit), or a negative DB_E* code. */
int store_over_limit(struct db_conn *db, const char *sku, long long *limit, long long *count,
                     char *buf, size_t len);

#endif
