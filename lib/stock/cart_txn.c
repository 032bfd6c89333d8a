/* The cart transaction of the MySQL guards (see cart.h): every row taken
 * in one canonical order inside one transaction, checked, written, and
 * one ledger row per line; all or nothing. */
#include "cart.h"

#include "limits.h"
#include "txn.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/util.h"

#include <stdio.h>
#include <string.h>

#define MYSQL_ER_LOCK_DEADLOCK 1213
#define MYSQL_ER_LOCK_WAIT_TIMEOUT 1205
/* A conditional cart refused whose rows, read again, are no longer short:
 * repeat it (no conflict: stock came back meanwhile). */
#define CART_STOCK_BACK (-50)
/* An optimistic cart found a row's version moved since its read: repeat. */
#define CART_VERSION_MISS (-51)
/* A read-modify-write cart found a row reseeded since its read (on any
 * instance): its computed values belong to the old stock, nothing written. */
#define CART_RESEEDED (-52)

/* A conflict MySQL answered, counted by kind before the rollback. */
static void cart_conflict(const char *guard_name, const struct db_conn *db,
                          struct cart_res *res)
{
    const char *kind = db->my_errno == MYSQL_ER_LOCK_DEADLOCK      ? "deadlock"
                       : db->my_errno == MYSQL_ER_LOCK_WAIT_TIMEOUT ? "lock_wait_timeout"
                                                                     : "other";
    res->deadlocks += db->my_errno == MYSQL_ER_LOCK_DEADLOCK;
    res->lock_timeouts += db->my_errno == MYSQL_ER_LOCK_WAIT_TIMEOUT;
    char labels[96];
    snprintf(labels, sizeof(labels), "guard=\"%s\",kind=\"%s\"", guard_name, kind);
    metrics_add("lab_cart_conflicts_total", labels, 1);
}

int stock_cart_lookup(const struct deduct_env *env, const struct cart *c, struct cart_res *res)
{
    long long n = store_ledger_count(env->db, c->req.order_id);
    if (n <= 0)
        return (int)n;
    int same = n == c->nlines;
    for (int i = 0; same && i < c->nlines; i++) {
        struct ledger_row row;
        int rc = store_ledger_get_line(env->db, c->req.order_id, i, &row);
        if (rc < 0)
            return rc;
        same = rc == 1 && strcmp(row.sku, c->line[i].sku) == 0 && row.qty == c->line[i].qty;
        res->remaining[i] = row.remaining;
        if (i == 0) {
            snprintf(res->base.guard, sizeof(res->base.guard), "%s", row.guard);
            snprintf(res->base.instance, sizeof(res->base.instance), "%s", row.instance);
        }
    }
    res->base.outcome = same ? DEDUCT_DUPLICATE : DEDUCT_ORDER_CONFLICT;
    if (!same)
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "order_id already names another sale (%lld line(s))", n);
    return 1;
}

static void cart_unknown(const char *sku, struct cart_res *res)
{
    res->base.outcome = DEDUCT_UNKNOWN_SKU;
    snprintf(res->base.detail, sizeof(res->base.detail),
             "no SKU '%.64s' in the cart (seed it first)", sku);
}

static void add_short(struct cart_res *res, const char *sku, long long requested,
                      long long available)
{
    struct cart_short *s = &res->shortage[res->nshort++];
    snprintf(s->sku, sizeof(s->sku), "%s", sku);
    s->requested = requested;
    s->available = available;
}

/* The check of a cart whose rows were read into t[].before: every short
 * SKU (summed) or every short line (per-line, each against the one read)
 * into res. Returns the count. */
static int cart_check(const struct cart *c, const struct cart_touch *t, int nt,
                      struct cart_res *res)
{
    res->nshort = 0;
    for (int k = 0; k < nt; k++) {
        if (c->check == CART_CHECK_SUMMED) {
            if (t[k].before < t[k].qty)
                add_short(res, t[k].sku, t[k].qty, t[k].before);
            continue;
        }
        for (int i = 0; i < c->nlines; i++)
            if (strcmp(c->line[i].sku, t[k].sku) == 0 && c->line[i].qty > t[k].before)
                add_short(res, t[k].sku, c->line[i].qty, t[k].before);
    }
    if (res->nshort)
        res->base.outcome = DEDUCT_OUT_OF_STOCK;
    return res->nshort;
}

/* A conditional cart refused at row k: after the rollback, read every row
 * (no lock) to name every short SKU. 0 with res filled, CART_STOCK_BACK
 * when none is short any more, or DB_E*. */
static int conditional_shorts(const struct deduct_env *env, const struct cart *c,
                              struct cart_touch *t, int nt, struct cart_res *res)
{
    for (int k = 0; k < nt; k++) {
        long long version;
        int found = store_read(env->db, t[k].sku, 0, &t[k].before, &version);
        if (found < 0)
            return found;
        if (found == 0) {
            cart_unknown(t[k].sku, res);
            return 0;
        }
    }
    struct cart c_summed = *c;
    c_summed.check = CART_CHECK_SUMMED;
    return cart_check(&c_summed, t, nt, res) ? 0 : CART_STOCK_BACK;
}

/* Take the rows in plan order, hold_ms spread over them. Returns 1 all
 * taken (t[].before set), 0 res filled (refused: rolled back),
 * CART_STOCK_BACK, or a negative DB_E* code (the caller rolls back). */
static long long cart_take_rows(const struct deduct_env *env, const struct cart *c,
                                enum cart_style style, struct cart_touch *t, int nt,
                                struct cart_res *res)
{
    long share = nt ? c->req.hold_ms / nt : 0;
    int conditional = style == CART_STYLE_CONDITIONAL && c->check == CART_CHECK_SUMMED;
    for (int k = 0; k < nt; k++) {
        long long n, left = 0;
        if (conditional) {
            if ((n = store_take_if_enough_left(env->db, t[k].sku, t[k].qty, &left)) < 0)
                return n;
            if (n == 0) {
                db_rollback(env->db);
                return conditional_shorts(env, c, t, nt, res);
            }
            t[k].before = left + t[k].qty;
        } else {
            /* row-lock: the locking read; the others: a plain read */
            int found = style == CART_STYLE_RMW
                            ? store_read_seeded(env->db, t[k].sku, &t[k].before, &t[k].version,
                                                &t[k].seeds)
                            : store_read(env->db, t[k].sku, style == CART_STYLE_ROW_LOCK,
                                         &t[k].before, &t[k].version);
            if (found <= 0) {
                if (found == 0) {
                    db_rollback(env->db);
                    cart_unknown(t[k].sku, res);
                }
                return found;
            }
        }
        util_sleep_ms(share);
    }
    if (!conditional && cart_check(c, t, nt, res)) {
        db_rollback(env->db);
        return 0;
    }
    return 1;
}


/* A line past its SKU's purchase limit (or with no user_id for it): the
 * answer of the whole cart, nothing sold (the caller rolls back). */
static void cart_limit_refused(const struct cart *c, int i, long long limit, long long why,
                               struct cart_res *res)
{
    res->base.outcome = why == STOCK_LIMIT_NO_USER ? DEDUCT_BAD_REQUEST : DEDUCT_LIMIT_EXCEEDED;
    if (why == STOCK_LIMIT_NO_USER)
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "user_id required: line %d's SKU %.40s has a limit of %lld per user", i,
                 c->line[i].sku, limit);
    else
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "limit %lld per user on line %d's SKU %.40s: user %.30s cannot buy %ld more; "
                 "nothing was sold", limit, i, c->line[i].sku, c->req.user_id, c->line[i].qty);
}

/* The writes of a cart whose rows are taken and checked: the stock (unless
 * the conditional UPDATEs wrote it), then one ledger row per line. */
static long long cart_write(const char *guard_name, const struct deduct_env *env,
                            const struct cart *c, enum cart_style style,
                            const struct cart_touch *t, int nt, struct cart_res *res)
{
    long long n = 1;
    for (int k = 0; k < nt && n > 0; k++) {
        if (c->check == CART_CHECK_PER_LINE) {
            /* the defect: each line's write trusts the one read */
            for (int i = 0; i < c->nlines && n > 0; i++)
                if (strcmp(c->line[i].sku, t[k].sku) == 0)
                    n = store_take_unchecked(env->db, t[k].sku, c->line[i].qty);
        } else if (style == CART_STYLE_ROW_LOCK) {
            /* 0 rows: our transaction is gone (see store_set_stock) */
            if ((n = store_set_stock(env->db, t[k].sku, t[k].before - t[k].qty)) == 0)
                n = DB_ERETRY;
        } else if (style == CART_STYLE_RMW) {
            n = store_set_stock_seeded(env->db, t[k].sku, t[k].before - t[k].qty, t[k].seeds);
            if (n == 0)
                n = CART_RESEEDED;
        } else if (style == CART_STYLE_VERSION) {
            n = store_set_stock_if_version(env->db, t[k].sku, t[k].before - t[k].qty,
                                           t[k].version);
            if (n == 0)
                n = CART_VERSION_MISS;
        }
    }
    if (n == 0)                /* the row read a moment ago is gone */
        return DB_ERETRY;
    cart_fill_remaining(c, t, nt, res);
    for (int i = 0; i < c->nlines && n > 0; i++)
        n = store_ledger_insert_line(env->db, c->req.order_id, i, c->line[i].sku,
                                     c->line[i].qty, res->remaining[i], guard_name,
                                     env->instance, c->req.user_id);
    /* The buyer's count per (sku, user) in the same transaction: the rows
     * of the SKUs are held already, so carts of one user queue here. */
    for (int i = 0; i < c->nlines && n > 0; i++) {
        long long limit;
        n = stock_limit_cart_line(env->db, c->line[i].sku, c->req.user_id, c->line[i].qty,
                                  &limit);
        if (n == STOCK_LIMIT_NO_USER || n == STOCK_LIMIT_OVER)
            cart_limit_refused(c, i, limit, n, res);
    }
    return n < 0 ? n : 1;
}

/* One attempt. Returns DB_ERETRY when a conflict rolled it back, else 0
 * with res filled. */
static int cart_attempt(const char *guard_name, const struct deduct_env *env,
                        const struct cart *c, enum cart_style style, struct cart_touch *t,
                        int nt, struct cart_res *res)
{
    double t0 = util_now();
    long long n = db_begin(env->db);
    if (n == DB_OK)
        n = cart_take_rows(env, c, style, t, nt, res);
    res->base.lock_wait_s += util_now() - t0;
    if (n == 0)
        return 0;                      /* refused, rolled back */
    if (n == CART_STOCK_BACK)
        return DB_ERETRY;
    if (n > 0 && stock_past_deadline(&c->req, &res->base)) {
        db_rollback(env->db);
        return 0;
    }
    if (n > 0)
        n = cart_write(guard_name, env, c, style, t, nt, res);
    if (n > 0)
        n = db_commit(env->db);
    if (n == DB_OK) {
        res->base.outcome = DEDUCT_SOLD;
        return 0;
    }
    if (n == DB_ERETRY)
        cart_conflict(guard_name, env->db, res);
    db_rollback(env->db);
    if (n == CART_RESEEDED) {
        metrics_add("lab_reseeded_during_sale_total", "", 1);
        res->base.outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "a SKU of the cart was reseeded while the cart held it; nothing was sold: "
                 "repeat it");
        return 0;
    }
    if (n == DB_ERETRY || n == CART_VERSION_MISS)
        return DB_ERETRY;
    if (n == STOCK_LIMIT_NO_USER || n == STOCK_LIMIT_OVER)
        return 0;                      /* res says which line and why */
    if (n == DB_EDUP) {                /* a repeat of the order landed first */
        int rc = stock_cart_lookup(env, c, res);
        if (rc < 0)
            stock_db_failure(env->db, rc, &res->base);
        return 0;
    }
    stock_db_failure(env->db, (int)n, &res->base);
    if (n == DB_EUNAVAIL)
        snprintf(res->base.detail, sizeof(res->base.detail),
                 "MySQL unavailable during the cart (its outcome may be unknown): repeat "
                 "with the same order_id");
    return 0;
}

int stock_cart_sell(const char *guard_name, const struct deduct_env *env, const struct cart *c,
                    enum cart_style style, struct cart_res *res)
{
    struct cart_touch t[CART_LINES_MAX];
    int nt = cart_plan(c, t);
    int rc = stock_cart_lookup(env, c, res);
    if (rc != 0) {
        if (rc < 0)
            stock_db_failure(env->db, rc, &res->base);
        return 0;
    }
    for (int i = 0; i <= env->max_retries; i++) {
        if (cart_attempt(guard_name, env, c, style, t, nt, res) != DB_ERETRY) {
            /* a repeat of this order may have landed while we were refused */
            if (res->base.outcome == DEDUCT_OUT_OF_STOCK ||
                res->base.outcome == DEDUCT_UNKNOWN_SKU)
                stock_cart_lookup(env, c, res);
            return 0;
        }
        res->base.retries++;
        util_sleep_ms(util_backoff_ms(i, 20));
        if (stock_past_deadline(&c->req, &res->base))
            return 0;
    }
    res->base.outcome = DEDUCT_RETRY_EXHAUSTED;
    snprintf(res->base.detail, sizeof(res->base.detail),
             "conflicting with other sales after %d retries (nothing sold)", res->base.retries);
    return 0;
}

int stock_cart_release(struct db_conn *db, const char *order_id, long long lines,
                       struct ledger_row *first)
{
    long long n, released = 0;
    if ((n = db_begin(db)) < 0 || (n = store_ledger_get_line(db, order_id, 0, first)) < 0)
        goto fail;
    for (int i = 0; i < lines; i++) {
        struct ledger_row row;
        if ((n = store_ledger_get_line(db, order_id, i, &row)) < 0 ||
            (n = store_release_line(db, order_id, i)) < 0)
            goto fail;
        released += n;
        /* the buyer's quota back with the line's units */
        if (n > 0 && (n = stock_limit_give_back(db, row.sku, row.user_id, row.qty)) < 0)
            goto fail;
    }
    if (released == 0) {
        db_rollback(db);
        return STOCK_ALREADY_RELEASED;
    }
    if ((n = db_commit(db)) < 0)
        goto fail;
    return STOCK_RELEASED;
fail:
    db_rollback(db);
    return (int)n;
}
