/* Shared transactions of the guards (see txn.h). */
#include "txn.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/util.h"
#include "limits.h"

#include <stdio.h>
#include <string.h>

void stock_db_failure(struct db_conn *db, int rc, struct deduct_res *res)
{
    if (rc == DB_EUNAVAIL) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "MySQL unavailable: %.120s",
                 db->errstr);
    } else if (rc == DB_ERETRY) {
        res->outcome = DEDUCT_RETRY_EXHAUSTED;
        snprintf(res->detail, sizeof(res->detail), "MySQL lock conflict: %.120s",
                 db->errstr);
    } else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "MySQL error: %.120s", db->errstr);
    }
}

void stock_fill_duplicate(const struct ledger_row *row, const struct deduct_req *req,
                          struct deduct_res *res)
{
    if (strcmp(row->sku, req->sku) != 0 || row->qty != req->qty) {
        res->outcome = DEDUCT_ORDER_CONFLICT;
        snprintf(res->detail, sizeof(res->detail),
                 "order_id already names another sale (%lld of %.64s)", row->qty,
                 row->sku);
        return;
    }
    res->outcome = DEDUCT_DUPLICATE;
    res->qty = (long)row->qty;
    res->remaining = row->remaining;
    snprintf(res->guard, sizeof(res->guard), "%s", row->guard);
    snprintf(res->instance, sizeof(res->instance), "%s", row->instance);
}

void stock_answer_repeat(const struct deduct_env *env, const struct ledger_row *row,
                         const struct deduct_req *req, struct deduct_res *res)
{
    long long lines = store_ledger_count(env->db, req->order_id);
    if (lines < 0) {
        stock_db_failure(env->db, (int)lines, res);
    } else if (lines > 1) {
        res->outcome = DEDUCT_ORDER_CONFLICT;
        snprintf(res->detail, sizeof(res->detail),
                 "order_id already names a cart of %lld lines", lines);
    } else {
        stock_fill_duplicate(row, req, res);
    }
}

/* A repeated order_id can race past the first check; the unique key then
 * refuses the insert and we answer with the first sale. */
void stock_conflict_duplicate(const struct deduct_env *env, const struct deduct_req *req,
                              struct deduct_res *res)
{
    struct ledger_row row;
    int rc = store_ledger_get(env->db, req->order_id, 0, &row);
    if (rc == 1)
        stock_answer_repeat(env, &row, req, res);
    else if (rc < 0)
        stock_db_failure(env->db, rc, res);
    else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "ledger conflict without a row");
    }
}

void stock_refused(const struct deduct_env *env, const struct deduct_req *req,
                   struct deduct_res *res)
{
    if (res->outcome != DEDUCT_OUT_OF_STOCK && res->outcome != DEDUCT_UNKNOWN_SKU)
        return;
    struct ledger_row row;
    if (store_ledger_get(env->db, req->order_id, 0, &row) == 1)
        stock_answer_repeat(env, &row, req, res);
}

/* A failed transaction step: roll back and say why. */
static void txn_failed(const struct deduct_env *env, const struct deduct_req *req,
                       long long n, struct deduct_res *res)
{
    db_rollback(env->db);
    if (n == DB_EDUP)
        stock_conflict_duplicate(env, req, res);
    else
        stock_db_failure(env->db, (int)n, res);
}

/* A COMMIT whose reply never came: ask the commit marker. The locking read
 * (FOR UPDATE on the unique order_id) waits while the first transaction
 * still holds the row, so "no row" means it rolled back. */
static int resolve_lost_commit(const struct deduct_env *env, const struct deduct_req *req,
                               const char *guard_name)
{
    struct ledger_row row;
    int n = db_begin(env->db);
    if (n == DB_OK)
        n = store_ledger_get(env->db, req->order_id, 1, &row);
    db_rollback(env->db);
    if (n < 0)
        return STOCK_COMMIT_UNKNOWN;
    if (n == 0)
        return STOCK_NOT_COMMITTED;
    /* The row could be another request's with the same order id (a repeat
     * racing us on another instance): only ours if it matches us. */
    return strcmp(row.sku, req->sku) == 0 && row.qty == req->qty &&
                   strcmp(row.guard, guard_name) == 0 &&
                   strcmp(row.instance, env->instance) == 0
               ? STOCK_COMMITTED
               : STOCK_NOT_COMMITTED;
}

int stock_commit_sale(const struct deduct_env *env, const struct deduct_req *req,
                      const char *guard_name, struct deduct_res *res)
{
    int rc = db_commit(env->db);
    if (rc == DB_OK)
        return STOCK_COMMITTED;
    if (rc != DB_EUNAVAIL) {
        txn_failed(env, req, rc, res);
        return STOCK_NOT_COMMITTED;
    }
    char lost[128];
    snprintf(lost, sizeof(lost), "%s", env->db->errstr);
    int r = resolve_lost_commit(env, req, guard_name);
    metrics_add("lab_commit_lost_total",
                r == STOCK_COMMITTED       ? "resolved=\"applied\""
                : r == STOCK_NOT_COMMITTED ? "resolved=\"not_applied\""
                                           : "resolved=\"unknown\"", 1);
    if (r == STOCK_NOT_COMMITTED) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "MySQL lost the COMMIT: %.100s", lost);
        res->remaining = 0;
    } else if (r == STOCK_COMMIT_UNKNOWN) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail),
                 "COMMIT outcome unknown (%.50s): repeat with the same order_id", lost);
    }
    return r;
}

int stock_conflicted(const struct deduct_res *res)
{
    return res->outcome == DEDUCT_RETRY_EXHAUSTED;
}

int stock_past_deadline(const struct deduct_req *req, struct deduct_res *res)
{
    if (!deduct_expired(req))
        return 0;
    res->outcome = DEDUCT_DEADLINE;
    snprintf(res->detail, sizeof(res->detail),
             "request deadline passed before the write; nothing was sold");
    return 1;
}

int stock_rmw(const char *guard_name, const struct deduct_env *env,
              const struct deduct_req *req, struct deduct_res *res)
{
    return stock_rmw_checked(guard_name, env, req, NULL, NULL, res);
}

/* A stale lock holder's write refused by the row's fence. */
static void rmw_fenced(const char *guard_name, const struct deduct_req *req,
                       struct deduct_res *res)
{
    char labels[64];
    snprintf(labels, sizeof(labels), "guard=\"%s\"", guard_name);
    metrics_add("lab_fenced_total", labels, 1);
    res->outcome = DEDUCT_FENCED;
    snprintf(res->detail, sizeof(res->detail),
             "fencing token %llu is older than the row's: this holder's lock was "
             "taken over; nothing was written", req->fence);
}

/* The SKU was reseeded (on any instance) after this sale read its stock:
 * the value it computed belongs to the old stock, and is not written. */
static void rmw_reseeded(const struct deduct_req *req, struct deduct_res *res)
{
    metrics_add("lab_reseeded_during_sale_total", "", 1);
    res->outcome = DEDUCT_UNAVAILABLE;
    snprintf(res->detail, sizeof(res->detail),
             "SKU %.64s was reseeded while this sale held its lock; nothing was sold: "
             "repeat it", req->sku);
}

/* A conditional write that matched no row: a reseed since our read, or
 * (fenced) a newer token. Rolls back and fills res. */
static void rmw_refused(const char *guard_name, const struct deduct_env *env,
                        const struct deduct_req *req, long long seeds, struct deduct_res *res)
{
    long long stock, version, now_seeds = seeds;
    db_rollback(env->db);
    if (req->fence != 0 &&
        (store_read_seeded(env->db, req->sku, &stock, &version, &now_seeds) != 1 ||
         now_seeds == seeds))
        rmw_fenced(guard_name, req, res);
    else
        rmw_reseeded(req, res);
}

/* The read half of a checked read-modify-write: refuse a lock guard's
 * fencing without a token, claim the row for a fenced write BEFORE reading
 * it, read stock, version and reseed counter, and refuse what cannot sell.
 * Returns 1 when the write may follow (res untouched), 0 when res holds the
 * answer. */
static int rmw_read(const char *guard_name, const struct deduct_env *env,
                    const struct deduct_req *req, long long *stock, long long *version,
                    long long *seeds, long long *limit, struct deduct_res *res)
{
    long long claimed = 1;
    if (req->fencing && req->fence == 0) {
        /* A lock guard that accepted fencing but issued no token: refuse
         * rather than write unfenced behind the caller's back. */
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail),
                 "guard %.31s issued no fencing token", guard_name);
        return 0;
    }
    /* Fenced: claim the row for our token BEFORE reading it. A newer holder
     * claims it before its own read, so any write of ours that is accepted
     * (fence still ours) happened before that read: the newer holder sees
     * it. Checking the token only at the write would let an older holder
     * write between a newer holder's read and write: a lost update. The
     * write also wants the version we read: a release (which takes the
     * lock but no token) landing while we were stale is not overwritten. */
    if (req->fence != 0 && (claimed = store_fence_claim(env->db, req->sku, guard_name, req->fence)) < 0) {
        stock_db_failure(env->db, (int)claimed, res);
        return 0;
    }
    int rc = store_read_seeded_limit(env->db, req->sku, stock, version, seeds, limit);
    if (rc < 0) {
        stock_db_failure(env->db, rc, res);
        return 0;
    }
    if (rc == 0) {
        res->outcome = DEDUCT_UNKNOWN_SKU;
        return 0;
    }
    if (claimed == 0) {
        rmw_fenced(guard_name, req, res);
        return 0;
    }
    if (*stock < req->qty) {
        res->outcome = DEDUCT_OUT_OF_STOCK;
        res->remaining = *stock;
        return 0;
    }
    return !stock_limit_needs_user(req, *limit, res);
}

int stock_rmw_checked(const char *guard_name, const struct deduct_env *env,
                      const struct deduct_req *req,
                      int (*may_write)(void *ctx, struct deduct_res *res), void *ctx,
                      struct deduct_res *res)
{
    long long stock, version, seeds, limit = 0;
    /* limit: read with the row, exact for the write on its seeds/version */
    if (!rmw_read(guard_name, env, req, &stock, &version, &seeds, &limit, res))
        return 0;
    util_sleep_ms(req->hold_ms);   /* the source articles' slow business call */
    if (stock_past_deadline(req, res))
        return 0;
    long long remaining = stock - req->qty;
    long long n;
    /* Unfenced, the write is conditional on `seeds` only: a reseed made on
     * any instance after our read refuses it, while an overlapping holder
     * (a lease that ran out) still overwrites, as the lab shows. Fenced,
     * the version (which a reseed bumps too) and the token decide. */
    if ((n = db_begin(env->db)) < 0 ||
        (n = req->fence != 0
                 ? store_set_stock_fenced(env->db, req->sku, guard_name, remaining, req->fence,
                                          version)
                 : store_set_stock_seeded(env->db, req->sku, remaining, seeds)) < 0) {
        txn_failed(env, req, n, res);
        return 0;
    }
    if (n == 0) {
        rmw_refused(guard_name, env, req, seeds, res);
        return 0;
    }
    if ((n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty, remaining,
                                 guard_name, env->instance, req->user_id)) < 0 ||
        (n = stock_limit_charge(env, req, limit, res)) < 0) {
        txn_failed(env, req, n, res);
        return 0;
    }
    if (n == 0)   /* past the buyer's limit: rolled back, res filled */
        return 0;
    /* The guard's last word comes after the writes, right before the
     * COMMIT: whatever time the MySQL round trips took is inside what it
     * checks (a lease's validity, a ZooKeeper session confirmed by the
     * server). Refused, nothing is committed. */
    if (may_write && !may_write(ctx, res)) {
        db_rollback(env->db);
        return 0;
    }
    if (stock_commit_sale(env, req, guard_name, res) != STOCK_COMMITTED)
        return 0;
    res->outcome = DEDUCT_SOLD;
    res->remaining = remaining;
    res->qty = req->qty;
    return 0;
}

int stock_record_relative(const char *guard_name, const struct deduct_env *env,
                          const struct deduct_req *req, struct deduct_res *res)
{
    return stock_record_relative_seeded(guard_name, env, req, -1, res);
}

/* A sale decided outside MySQL of a SKU with a purchase limit (the
 * unseeded write matches unlimited SKUs only; its read after brings the
 * limit): these guards enforce none, so nothing is sold (the caller gives
 * its side state back and answers the 400). */
static int relative_limited(const struct deduct_env *env, long long limit,
                            struct deduct_res *res)
{
    db_rollback(env->db);
    res->outcome = DEDUCT_BAD_REQUEST;
    res->refused_limit = limit;
    return STOCK_LIMITED;
}

int stock_record_relative_seeded(const char *guard_name, const struct deduct_env *env,
                                 const struct deduct_req *req, long long seeds,
                                 struct deduct_res *res)
{
    long long n, stock = 0, version, now_seeds = seeds, limit = 0;
    if (stock_past_deadline(req, res))
        return STOCK_NOT_COMMITTED;
    if ((n = db_begin(env->db)) < 0 ||
        (n = seeds < 0 ? store_take_if_enough_unlimited(env->db, req->sku, req->qty, &stock)
                       : store_take_if_enough_seeded(env->db, req->sku, req->qty, seeds)) < 0)
        goto fail;
    /* Unseeded, a write that took hands back what it left: no read. */
    int found = seeds < 0 && n == 1 ? 1
                : seeds < 0 ? store_read_limit(env->db, req->sku, 0, &stock, &version, &limit)
                            : store_read_seeded(env->db, req->sku, &stock, &version, &now_seeds);
    if (found == 1 && n == 0 && limit > 0)
        return relative_limited(env, limit, res);
    if (found <= 0) {
        if (found == 0) {
            db_rollback(env->db);
            res->outcome = DEDUCT_UNKNOWN_SKU;
            return STOCK_NOT_COMMITTED;
        }
        n = found;
        goto fail;
    }
    if (n == 0 && now_seeds != seeds) {
        /* Decided on the stock of an older seed: writing it would take a
         * unit of the new seed that its side state never counted. */
        db_rollback(env->db);
        metrics_add("lab_reseeded_during_sale_total", "", 1);
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail),
                 "SKU %.64s was reseeded after this sale was decided; nothing was sold: "
                 "repeat it", req->sku);
        return STOCK_RESEEDED;
    }
    if (n == 0) {
        /* Redis sold a unit MySQL does not have: the two disagree. Refuse
         * rather than drive MySQL below zero. */
        db_rollback(env->db);
        metrics_add("lab_stock_divergence_total", "", 1);
        res->outcome = DEDUCT_UNAVAILABLE;
        res->remaining = stock;
        snprintf(res->detail, sizeof(res->detail),
                 "MySQL has %lld left, fewer than Redis sold (%ld): refused; "
                 "reconciling Redis", stock, req->qty);
        return STOCK_DIVERGED;
    }
    if ((n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty, stock,
                                 guard_name, env->instance, req->user_id)) < 0)
        goto fail;
    int c = stock_commit_sale(env, req, guard_name, res);
    if (c != STOCK_COMMITTED)
        return c;
    res->outcome = DEDUCT_SOLD;
    res->remaining = stock;
    return 0;
fail:
    txn_failed(env, req, n, res);
    return STOCK_NOT_COMMITTED;
}

int stock_release(struct db_conn *db, const char *order_id, struct ledger_row *row)
{
    long long n;
    if ((n = db_begin(db)) < 0 || (n = store_ledger_get(db, order_id, 1, row)) < 0)
        goto fail;
    if (n == 0 || row->released) {
        db_rollback(db);
        return n == 0 ? STOCK_UNKNOWN_ORDER : STOCK_ALREADY_RELEASED;
    }
    if ((n = store_add_stock(db, row->sku, row->qty)) < 0 ||
        (n = store_ledger_mark_released(db, order_id)) < 0 ||
        (n = stock_limit_give_back(db, row->sku, row->user_id, row->qty)) < 0)
        goto fail;
    if ((n = db_commit(db)) == DB_EUNAVAIL) {
        /* The reply was lost: the released flag is the commit marker. */
        struct ledger_row again;
        int m = db_begin(db);
        if (m == DB_OK)
            m = store_ledger_get(db, order_id, 1, &again);
        db_rollback(db);
        if (m == 1 && again.released)
            return STOCK_RELEASED;
        return DB_EUNAVAIL;
    }
    if (n < 0)
        goto fail;
    return STOCK_RELEASED;
fail:
    db_rollback(db);
    return (int)n;
}
