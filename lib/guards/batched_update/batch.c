/* One group commit of a hot SKU (see batch.h). */
#include "guards/batched_update/batch.h"

#include "stock/store.h"
#include "stock/txn.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/util.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Rounds of one batch: a round answers at least one request or ends on a
 * duplicate found in the ledger, so a few suffice; the bound only stops a
 * pathological repeat. */
#define BATCH_ROUNDS_MAX 8

static void answer(struct batch_item *it, enum deduct_outcome o, long long remaining,
                   const char *detail)
{
    it->res->outcome = o;
    it->res->remaining = remaining;
    if (detail)
        snprintf(it->res->detail, sizeof(it->res->detail), "%s", detail);
    it->answered = 1;
}

/* Every picked item not answered yet gets a copy of `from`'s failure. */
static void answer_all(struct batch_item **pick, int n, const struct deduct_res *from)
{
    for (int i = 0; i < n; i++) {
        if (pick[i]->answered)
            continue;
        pick[i]->res->outcome = from->outcome;
        pick[i]->res->remaining = from->remaining;
        memcpy(pick[i]->res->detail, from->detail, sizeof(from->detail));
        pick[i]->res->refused_limit = from->refused_limit;
        pick[i]->answered = 1;
    }
}

/* A failed step of the round's transaction: roll back, everyone picked
 * and unanswered learns why. */
static void round_failed(const struct deduct_env *env, struct batch_item **pick, int n,
                         int rc)
{
    struct deduct_res why;
    memset(&why, 0, sizeof(why));
    db_rollback(env->db);
    stock_db_failure(env->db, rc, &why);
    answer_all(pick, n, &why);
}

/* After the ledger refused the batch's insert: the order ids already
 * there answer as duplicates (or conflicts); the rest go to the next
 * round. The read is a fresh one: the transaction was rolled back. */
static int answer_ledger_duplicates(const struct deduct_env *env, struct batch_item **take,
                                    int n)
{
    int found = 0;
    for (int i = 0; i < n; i++) {
        struct ledger_row row;
        int rc = store_ledger_get(env->db, take[i]->req->order_id, 0, &row);
        if (rc < 0) {
            round_failed(env, take + i, n - i, rc);
            return 1;
        }
        if (rc == 1) {
            stock_answer_repeat(env, &row, take[i]->req, take[i]->res);
            take[i]->answered = 1;
            found++;
        }
    }
    return found;
}

/* Answer `it` with `o` (out of stock, unknown SKU) — unless its order id
 * is in the ledger already: a repeat is the first sale's echo (or an
 * order_id_conflict) whatever the stock is now, since the guard skips
 * guard_deduct's ledger check. Returns 0, or a negative DB_E* code
 * (nothing answered). */
static int answer_unless_repeat(const struct deduct_env *env, struct batch_item *it,
                                enum deduct_outcome o, long long remaining)
{
    struct ledger_row row;
    int rc = store_ledger_get(env->db, it->req->order_id, 0, &row);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        stock_answer_repeat(env, &row, it->req, it->res);
        it->answered = 1;
    } else {
        answer(it, o, remaining, NULL);
    }
    return 0;
}

/* The members a committed (or empty) round left short: out_of_stock with
 * what the round left, or their first sale's echo when repeats. A failed
 * ledger read answers them with the failure (nothing was sold for them). */
static void answer_shorts(const struct deduct_env *env, struct batch_item **shorts, int n,
                          long long left)
{
    for (int i = 0; i < n; i++) {
        int rc = answer_unless_repeat(env, shorts[i], DEDUCT_OUT_OF_STOCK, left);
        if (rc < 0) {
            struct deduct_res why;
            memset(&why, 0, sizeof(why));
            stock_db_failure(env->db, rc, &why);
            answer_all(shorts + i, n - i, &why);
            return;
        }
    }
}

/* The ledger rows of the requests taken, as JSON for
 * store_ledger_insert_rows. NULL when out of memory. */
static char *rows_json(struct batch_item **take, int n, const long long *remaining,
                       const char *sku, const char *instance)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *o = json_pack("[s,s,I,I,s]", take[i]->req->order_id, sku,
                              (json_int_t)take[i]->req->qty, (json_int_t)remaining[i],
                              instance);
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    return s;
}

/* A conflict (deadlock, lock wait timeout, a Galera certification
 * failure) rolled the round back: nothing was written, every open member
 * goes to the next round after a short backoff. Returns 1. */
static int round_conflicted(const struct deduct_env *env, int round)
{
    db_rollback(env->db);
    util_sleep_ms(util_backoff_ms(round, 20));
    return 1;
}

/* sell_round's locking read (the fast write took nothing): the row with
 * its purchase limit. A limited SKU is refused for everyone picked, from
 * this read the round makes anyway: the guard does not enforce limits,
 * and the entry point reads no limit for it (guard.h, GUARD_LIMITS_IN_DEDUCT).
 * 1 found, 0 no SKU, BATCH_LIMITED (rolled back, all answered), DB_E*. */
#define BATCH_LIMITED 2
static int locked_read(const struct deduct_env *env, struct batch_item **pick, int n,
                       long long *stock, long long *version)
{
    long long limit = 0;
    int rc = store_read_limit(env->db, pick[0]->req->sku, 1, stock, version, &limit);
    if (rc != 1 || limit <= 0)
        return rc;
    db_rollback(env->db);
    struct deduct_res why;
    memset(&why, 0, sizeof(why));
    why.outcome = DEDUCT_BAD_REQUEST;
    why.refused_limit = limit;   /* the entry point words the 400 */
    answer_all(pick, n, &why);
    return BATCH_LIMITED;
}

/* One transaction over pick[0..n-1] (distinct order ids). Returns 1 when
 * every picked item is answered or may be retried in another round (a
 * ledger duplicate was answered), 0 when the round made no progress. */
static int sell_round(const char *guard_name, const struct deduct_env *env,
                      struct batch_item **pick, int n, int round)
{
    const char *sku = pick[0]->req->sku;
    long long stock = 0, version;
    long hold = 0;
    for (int i = 0; i < n; i++) {
        if (stock_past_deadline(pick[i]->req, pick[i]->res))
            pick[i]->answered = 1;    /* before any write: nothing sold */
        else if (pick[i]->req->hold_ms > hold)
            hold = pick[i]->req->hold_ms;
    }
    int open = 0;
    for (int i = 0; i < n; i++)
        open += !pick[i]->answered;
    if (open == 0)
        return 1;              /* all past their deadline: no transaction */
    /* Without a hold, the common case (stock for everyone) is one
     * conditional write of the sum that also hands back what it left: the
     * row lock is taken by the write itself, one round trip shorter than
     * read-then-write, and held that much less. When it does not fit (or
     * the SKU is unknown, or has a purchase limit) it wrote nothing: the
     * locking read below apportions what there is. */
    int fast = 0;
    int rc = db_begin(env->db);
    if (rc == DB_OK && hold == 0) {
        long long sum = 0, after = 0;
        for (int i = 0; i < n; i++)
            if (!pick[i]->answered)
                sum += pick[i]->req->qty;
        long long m = store_take_if_enough_unlimited(env->db, sku, sum, &after);
        if (m < 0)
            rc = (int)m;
        else if (m == 1) {
            stock = after + sum;
            fast = 1;
        }
    }
    if (rc == DB_OK)
        rc = fast ? 1 : locked_read(env, pick, n, &stock, &version);
    if (rc == BATCH_LIMITED)
        return 1;
    if (rc <= 0) {
        if (rc == 0) {
            db_rollback(env->db);
            for (int i = 0; i < n && rc == 0; i++)
                if (!pick[i]->answered)
                    rc = answer_unless_repeat(env, pick[i], DEDUCT_UNKNOWN_SKU, 0);
            if (rc == 0)
                return 1;
        }
        if (rc == DB_ERETRY)
            return round_conflicted(env, round);
        round_failed(env, pick, n, rc);
        return 1;
    }
    /* The batch's hold, spent once under the row lock: the seeds' slow
     * business call, paid per transaction rather than per request. */
    util_sleep_ms(hold);
    struct batch_item *take[STOCK_BATCH_MAX];
    long long remaining[STOCK_BATCH_MAX];
    int ntake = 0;
    long long left = stock;
    for (int i = 0; i < n; i++) {
        /* (fast: the sum is written already, and the deadlines were
         * checked right before it, with no hold since) */
        if (pick[i]->answered || (!fast && stock_past_deadline(pick[i]->req, pick[i]->res))) {
            pick[i]->answered = 1;
            continue;
        }
        if (pick[i]->req->qty > left)
            continue;          /* answered below, with what the batch left */
        left -= pick[i]->req->qty;
        remaining[ntake] = left;
        take[ntake++] = pick[i];
    }
    /* The members the batch left short are answered only once the round
     * committed: a repeated order id among the taken is refused by the
     * ledger and takes nothing, and the next round must still offer its
     * units to them (an out_of_stock now would be a lost sale). */
    struct batch_item *shorts[STOCK_BATCH_MAX];
    int nshort = 0;
    for (int i = 0; i < n; i++) {
        int taken = 0;
        for (int k = 0; k < ntake && !taken; k++)
            taken = take[k] == pick[i];
        if (!pick[i]->answered && !taken)
            shorts[nshort++] = pick[i];
    }
    if (ntake == 0) {
        db_rollback(env->db);
        answer_shorts(env, shorts, nshort, left);
        return 1;
    }
    long long m = fast ? 1 : store_take_locked(env->db, sku, stock - left);
    if (m == 0)
        m = DB_ERETRY;         /* under our row lock: the transaction is gone */
    char *json = m > 0 ? rows_json(take, ntake, remaining, sku, env->instance) : NULL;
    if (m > 0 && !json)
        m = DB_ERR;
    if (m > 0)
        m = store_ledger_insert_rows(env->db, json, guard_name);
    json_free_t free_fn;
    json_get_alloc_funcs(NULL, &free_fn);
    free_fn(json);
    if (m == DB_EDUP) {
        db_rollback(env->db);
        return answer_ledger_duplicates(env, take, ntake) > 0;
    }
    if (m >= 0 && m != ntake)
        m = DB_ERR;
    if (m == DB_ERETRY)
        return round_conflicted(env, round);
    if (m < 0) {
        round_failed(env, pick, n, (int)m);
        return 1;
    }
    /* One COMMIT for all: a lost reply is resolved once, by the first
     * member's ledger row, and is the answer of every member. */
    struct deduct_res commit;
    memset(&commit, 0, sizeof(commit));
    if (stock_commit_sale(env, take[0]->req, guard_name, &commit) != STOCK_COMMITTED) {
        if (stock_conflicted(&commit))   /* lost certification: next round */
            return round_conflicted(env, round);
        answer_all(pick, n, &commit);   /* the short ones too: the stock is unknown */
        return 1;
    }
    for (int k = 0; k < ntake; k++) {
        take[k]->res->qty = take[k]->req->qty;
        answer(take[k], DEDUCT_SOLD, remaining[k], NULL);
    }
    answer_shorts(env, shorts, nshort, left);
    return 1;
}

/* item i repeats the order id of an earlier item of the batch. */
static int earlier_twin(struct batch_item *items, int i)
{
    for (int k = 0; k < i; k++)
        if (strcmp(items[k].req->order_id, items[i].req->order_id) == 0)
            return k;
    return -1;
}

void stock_batch_sell(const char *guard_name, const struct deduct_env *env,
                      struct batch_item *items, int n, int *rounds)
{
    int r = 0;
    if (n > STOCK_BATCH_MAX)
        n = STOCK_BATCH_MAX;   /* the caller's bound; never more */
    for (; r < BATCH_ROUNDS_MAX; r++) {
        /* A round carries each order id once: a repeat waits for the first
         * and then answers from it, as a repeat from another client does. */
        struct batch_item *pick[STOCK_BATCH_MAX];
        int npick = 0;
        for (int i = 0; i < n; i++) {
            if (items[i].answered)
                continue;
            int twin = earlier_twin(items, i);
            if (twin >= 0 && !items[twin].answered)
                continue;
            if (twin >= 0 && items[twin].res->outcome == DEDUCT_SOLD) {
                struct ledger_row row;
                memset(&row, 0, sizeof(row));
                snprintf(row.sku, sizeof(row.sku), "%s", items[twin].req->sku);
                row.qty = items[twin].req->qty;
                row.remaining = items[twin].res->remaining;
                snprintf(row.guard, sizeof(row.guard), "%s", guard_name);
                snprintf(row.instance, sizeof(row.instance), "%s", env->instance);
                stock_fill_duplicate(&row, items[i].req, items[i].res);
                items[i].answered = 1;
                continue;
            }
            int dup = 0;
            for (int k = 0; k < npick && !dup; k++)
                dup = strcmp(pick[k]->req->order_id, items[i].req->order_id) == 0;
            if (!dup)
                pick[npick++] = &items[i];
        }
        if (npick == 0)
            break;
        if (!sell_round(guard_name, env, pick, npick, r))
            break;
    }
    for (int i = 0; i < n; i++)
        if (!items[i].answered) {
            items[i].res->outcome = DEDUCT_RETRY_EXHAUSTED;
            snprintf(items[i].res->detail, sizeof(items[i].res->detail),
                     "batch: no answer after %d transactions (ledger duplicates or "
                     "conflicts); "
                     "repeat with the same order_id", BATCH_ROUNDS_MAX);
            items[i].answered = 1;
        }
    if (rounds)
        *rounds = r;
}
