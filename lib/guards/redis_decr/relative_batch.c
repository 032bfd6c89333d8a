/* Group commit of Redis-decided sales (see relative_batch.h). */
#include "guards/redis_decr/relative_batch.h"

#include "stock/store.h"
#include "stock/txn.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/util.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Rounds of one batch: each answers at least one item (or ends on a
 * conflict, retried after a backoff); the bound stops a pathological
 * repeat. */
#define ROUNDS_MAX 8

static void answer(struct relative_item *it, int rc)
{
    it->rc = rc;
    it->answered = 1;
}

/* Every open item among pick[] gets a copy of `from` and rc. */
static void answer_open(struct relative_item **pick, int n, const struct deduct_res *from,
                        int rc)
{
    for (int i = 0; i < n; i++) {
        if (pick[i]->answered)
            continue;
        pick[i]->res->outcome = from->outcome;
        pick[i]->res->remaining = from->remaining;
        memcpy(pick[i]->res->detail, from->detail, sizeof(from->detail));
        pick[i]->res->refused_limit = from->refused_limit;
        answer(pick[i], rc);
    }
}

static void failed(const struct deduct_env *env, struct relative_item **pick, int n, int dbrc)
{
    struct deduct_res why;
    memset(&why, 0, sizeof(why));
    db_rollback(env->db);
    stock_db_failure(env->db, dbrc, &why);
    answer_open(pick, n, &why, STOCK_NOT_COMMITTED);
}

static char *rows_json(struct relative_item **take, int n, const long long *remaining,
                       const char *instance)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *o = json_pack("[s,s,I,I,s,s?]", take[i]->req->order_id, take[i]->req->sku,
                              (json_int_t)take[i]->req->qty, (json_int_t)remaining[i],
                              instance, take[i]->intent);
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    return s;
}

/* The ledger refused the round's insert: the order ids already there
 * answer as duplicates (nothing recorded for them), and so do their twins
 * waiting in all[] for a later round. Returns how many, or -1 when the
 * ledger could not be read (every open item taken answered). */
static int ledger_duplicates(const struct deduct_env *env, struct relative_item **take, int n,
                             struct relative_item *all, int nall)
{
    int found = 0;
    for (int i = 0; i < n; i++) {
        struct ledger_row row;
        int rc = store_ledger_get(env->db, take[i]->req->order_id, 0, &row);
        if (rc < 0) {
            failed(env, take + i, n - i, rc);
            return -1;
        }
        if (rc != 1)
            continue;
        for (int k = 0; k < nall; k++)
            if (!all[k].answered &&
                strcmp(all[k].req->order_id, take[i]->req->order_id) == 0) {
                stock_answer_repeat(env, &row, all[k].req, all[k].res);
                answer(&all[k], STOCK_NOT_COMMITTED);
                found++;
            }
    }
    return found;
}

static int finish(const char *guard_name, const struct deduct_env *env,
                  struct relative_item **take, int ntake, const long long *remaining,
                  long long m, int round, struct relative_item *all, int nall);

/* fast_round's statements in forms MySQL 8 runs too (no RETURNING, no
 * @@in_transaction, no variable assigned inside an expression): the
 * conditional stock write hands the new stock back in its own reply
 * (LAST_INSERT_ID(expr), as store_take_if_enough_left), so the ledger rows
 * carry their remaining from the client; same statement count. after[i]:
 * the units sold after pick[i] in the group; sum: all of them. */
static int fast_round_portable(const char *guard_name, const struct deduct_env *env,
                               struct relative_item **pick, int n, int round,
                               struct relative_item *all, int nall, long long sum,
                               long long seeds, const long long *after)
{
    struct db_conn *db = env->db;
    long long left = 0, remaining[STOCK_BATCH_MAX];
    long long m = store_take_group_left(db, pick[0]->req->sku, sum, seeds, &left);
    if (m == 0)
        return -1;
    for (int i = 0; i < n; i++)
        remaining[i] = left + after[i];
    char *json = m > 0 ? rows_json(pick, n, remaining, env->instance) : NULL;
    if (m > 0 && !json)
        m = DB_ERR;
    if (m > 0)
        m = store_ledger_insert_rows(db, json, guard_name);
    json_free_t free_fn;
    json_get_alloc_funcs(NULL, &free_fn);
    free_fn(json);
    return finish(guard_name, env, pick, n, remaining, m, round, all, nall);
}

/* The usual round in 4 statements instead of 5 (no read first): every
 * item live and decided on the same seeds, and the row holds them all ->
 * one conditional stock write that also leaves the new stock in a session
 * variable, one ledger insert that computes each row's remaining from it
 * and returns it (RETURNING). Returns as round_run, or -1 when it does not
 * apply or the row refused the write (nothing written, the transaction
 * still open: the caller reads the row and decides item by item). */
static int fast_round(const char *guard_name, const struct deduct_env *env,
                      struct relative_item **pick, int n, int round, struct relative_item *all,
                      int nall)
{
    long long seeds = pick[0]->seeds, sum = 0, after[STOCK_BATCH_MAX];
    for (int i = 0; i < n; i++)
        if (pick[i]->seeds != seeds || seeds < 0 || deduct_expired(pick[i]->req))
            return -1;
    for (int i = n - 1; i >= 0; i--) {
        after[i] = sum;
        sum += pick[i]->req->qty;
    }
    if (env->db->dialect == DB_DIALECT_MYSQL)
        return fast_round_portable(guard_name, env, pick, n, round, all, nall, sum, seeds,
                                   after);
    long long m = store_take_group_into_session(env->db, pick[0]->req->sku, sum, seeds);
    if (m == 0)
        return -1;
    /* its ledger rows carry, in place of remaining, the units sold after
     * each in the group: remaining = the row's new stock + that */
    char *json = m > 0 ? rows_json(pick, n, after, env->instance) : NULL;
    if (m > 0 && !json)
        m = DB_ERR;
    long long left = 0;
    if (m > 0)
        m = store_ledger_insert_rows_after_left(env->db, json, guard_name, &left);
    json_free_t free_fn;
    json_get_alloc_funcs(NULL, &free_fn);
    free_fn(json);
    if (m == 0)
        m = DB_ERETRY;         /* the transaction is gone: nothing kept */
    long long remaining[STOCK_BATCH_MAX];
    for (int i = 0; i < n; i++)
        remaining[i] = left + after[i];
    return finish(guard_name, env, pick, n, remaining, m, round, all, nall);
}

/* round_run's locking read (the fast write took nothing, or did not
 * apply): the row with its seeds and purchase limit. A limited SKU is
 * refused for every item, from this read the round makes anyway (the
 * group writes match unlimited SKUs only): redis-decr enforces no limits,
 * and the entry point reads none for it. Its units go back to Redis
 * (STOCK_NOT_COMMITTED). 1 read, 0 no SKU, or DB_E* (the transaction open
 * in both); ROUND_LIMITED: rolled back, all answered. */
#define ROUND_LIMITED 2
static int locked_read(const struct deduct_env *env, struct relative_item **pick, int n,
                       long long *stock, long long *seeds)
{
    long long limit = 0;
    int rc = store_read_seeds_limit_locked(env->db, pick[0]->req->sku, stock, seeds, &limit);
    if (rc != 1 || limit <= 0)
        return rc;
    db_rollback(env->db);
    struct deduct_res why;
    memset(&why, 0, sizeof(why));
    why.outcome = DEDUCT_BAD_REQUEST;
    why.refused_limit = limit;   /* the entry point words the 400 */
    answer_open(pick, n, &why, STOCK_NOT_COMMITTED);
    return ROUND_LIMITED;
}

/* round_run's row read failed (rc DB_E*) or found no SKU (0): answered.
 * Returns 1 (round_run's "made progress"). */
static int round_unread(const struct deduct_env *env, struct relative_item **pick, int n,
                        int round, int rc)
{
    if (rc == 0) {
        db_rollback(env->db);
        for (int i = 0; i < n; i++) {
            pick[i]->res->outcome = DEDUCT_UNKNOWN_SKU;
            answer(pick[i], STOCK_NOT_COMMITTED);
        }
        return 1;
    }
    if (rc == DB_ERETRY && round + 1 < ROUNDS_MAX) {
        db_rollback(env->db);
        util_sleep_ms(util_backoff_ms(round, 20));
        return 1;
    }
    failed(env, pick, n, rc);
    return 1;
}

/* One transaction over pick[] (distinct order ids). Returns 1 when it made
 * progress (or everything is answered), 0 when not. */
static int round_run(const char *guard_name, const struct deduct_env *env,
                     struct relative_item **pick, int n, int round, struct relative_item *all,
                     int nall)
{
    const char *sku = pick[0]->req->sku;
    long long stock = 0, seeds = 0;
    int rc = db_begin(env->db);
    if (rc == DB_OK) {
        int f = fast_round(guard_name, env, pick, n, round, all, nall);
        if (f >= 0)
            return f;
        rc = locked_read(env, pick, n, &stock, &seeds);
    }
    if (rc == ROUND_LIMITED)
        return 1;
    if (rc <= 0)
        return round_unread(env, pick, n, round, rc);
    struct relative_item *take[STOCK_BATCH_MAX];
    long long remaining[STOCK_BATCH_MAX], left = stock;
    int ntake = 0;
    for (int i = 0; i < n; i++) {
        struct relative_item *it = pick[i];
        if (stock_past_deadline(it->req, it->res)) {
            answer(it, STOCK_NOT_COMMITTED);
        } else if (it->seeds >= 0 && it->seeds != seeds) {
            metrics_add("lab_reseeded_during_sale_total", "", 1);
            it->res->outcome = DEDUCT_UNAVAILABLE;
            snprintf(it->res->detail, sizeof(it->res->detail),
                     "SKU %.64s was reseeded after this sale was decided; nothing was sold: "
                     "repeat it", sku);
            answer(it, STOCK_RESEEDED);
        } else if (it->req->qty > left) {
            metrics_add("lab_stock_divergence_total", "", 1);
            it->res->outcome = DEDUCT_UNAVAILABLE;
            it->res->remaining = left;
            snprintf(it->res->detail, sizeof(it->res->detail),
                     "MySQL has %lld left, fewer than Redis sold (%ld): refused; "
                     "reconciling Redis", left, it->req->qty);
            answer(it, STOCK_DIVERGED);
        } else {
            left -= it->req->qty;
            remaining[ntake] = left;
            take[ntake++] = it;
        }
    }
    if (ntake == 0) {
        db_rollback(env->db);
        return 1;
    }
    long long m = store_take_locked(env->db, sku, stock - left);
    if (m == 0)
        m = DB_ERETRY;         /* under our row lock: the transaction is gone */
    char *json = m > 0 ? rows_json(take, ntake, remaining, env->instance) : NULL;
    if (m > 0 && !json)
        m = DB_ERR;
    if (m > 0)
        m = store_ledger_insert_rows(env->db, json, guard_name);
    json_free_t free_fn;
    json_get_alloc_funcs(NULL, &free_fn);
    free_fn(json);
    return finish(guard_name, env, take, ntake, remaining, m, round, all, nall);
}

/* The end of a round whose stock write and ledger insert gave m (rows
 * inserted, or a DB_E* code): a conflict retried, a duplicate answered,
 * else the COMMIT and every taken item answered. As round_run returns. */
static int finish(const char *guard_name, const struct deduct_env *env,
                  struct relative_item **take, int ntake, const long long *remaining,
                  long long m, int round, struct relative_item *all, int nall)
{
    if (m == DB_EDUP) {
        db_rollback(env->db);
        return ledger_duplicates(env, take, ntake, all, nall) != 0;
    }
    if (m >= 0 && m != ntake)
        m = DB_ERR;
    if (m == DB_ERETRY && round + 1 < ROUNDS_MAX) {
        db_rollback(env->db);
        util_sleep_ms(util_backoff_ms(round, 20));
        return 1;
    }
    if (m < 0) {
        failed(env, take, ntake, (int)m);
        return 1;
    }
    /* The deadline again, now that the row is ours until the COMMIT: the
     * stock write may have waited on the row lock past it (lock_wait_ms
     * allows longer than a decided sale's deadline), and a sale past it is
     * settled by others as never landed. Rolled back, the next round
     * answers the late ones and takes the rest. */
    for (int k = 0; k < ntake; k++)
        if (deduct_expired(take[k]->req)) {
            db_rollback(env->db);
            return 1;
        }
    struct deduct_res commit;
    memset(&commit, 0, sizeof(commit));
    int c = stock_commit_sale(env, take[0]->req, guard_name, &commit);
    if (c != STOCK_COMMITTED) {
        if (c == STOCK_NOT_COMMITTED && stock_conflicted(&commit) && round + 1 < ROUNDS_MAX) {
            util_sleep_ms(util_backoff_ms(round, 20));
            return 1;          /* lost certification: nothing written, next round */
        }
        answer_open(take, ntake, &commit, c);
        return 1;
    }
    for (int k = 0; k < ntake; k++) {
        take[k]->res->outcome = DEDUCT_SOLD;
        take[k]->res->remaining = remaining[k];
        take[k]->res->qty = take[k]->req->qty;
        answer(take[k], 0);
    }
    return 1;
}

void stock_record_relative_batch(const char *guard_name, const struct deduct_env *env,
                                 struct relative_item *items, int n)
{
    if (n > STOCK_BATCH_MAX)
        n = STOCK_BATCH_MAX;
    for (int r = 0; r < ROUNDS_MAX; r++) {
        /* Each order id once per round: a repeat goes in a later round and
         * finds the first in the ledger (a duplicate, nothing recorded). */
        struct relative_item *pick[STOCK_BATCH_MAX];
        int npick = 0;
        for (int i = 0; i < n; i++) {
            if (items[i].answered)
                continue;
            int twin = 0;
            for (int k = 0; k < npick && !twin; k++)
                twin = strcmp(pick[k]->req->order_id, items[i].req->order_id) == 0;
            if (!twin)
                pick[npick++] = &items[i];
        }
        if (npick == 0 || !round_run(guard_name, env, pick, npick, r, items, n))
            break;
    }
    for (int i = 0; i < n; i++)
        if (!items[i].answered) {
            items[i].res->outcome = DEDUCT_RETRY_EXHAUSTED;
            snprintf(items[i].res->detail, sizeof(items[i].res->detail),
                     "group commit: no answer after %d transactions; nothing was sold: repeat "
                     "it", ROUNDS_MAX);
            answer(&items[i], STOCK_NOT_COMMITTED);
        }
}
