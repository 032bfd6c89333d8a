/* The guard layer's entry points: deduct, seed, release, describe. Each is
 * the one route from a service into MySQL and the guards' side state. */
#include "guards/guard.h"

#include "base/db.h"
#include "base/metrics.h"
#include "guards/core/cart_locks.h"
#include "stock/inflight.h"
#include "stock/store.h"
#include "stock/txn.h"

#include <stdio.h>
#include <string.h>

/* The guard's deduction, with the SKU marked in flight so a reseed waits
 * for it (and it does not start under a reseed). */
static void deduct_reserved(const struct guard *g, const struct deduct_env *env,
                            const struct deduct_req *req, struct deduct_res *res)
{
    int rc = inflight_enter(req->sku);
    if (rc != INFLIGHT_OK) {
        res->outcome = DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail), "%s",
                 rc == INFLIGHT_BUSY ? "the SKU is being reseeded" : "too many SKUs in flight");
        return;
    }
    g->deduct(g, env, req, res);
    inflight_leave(req->sku);
}

int guard_deduct(const struct guard *g, const struct deduct_env *env,
                 const struct deduct_req *req, struct deduct_res *res)
{
    double started = util_now();
    memset(res, 0, sizeof(*res));
    snprintf(res->guard, sizeof(res->guard), "%s", g->name);
    snprintf(res->instance, sizeof(res->instance), "%s", env->instance);
    res->qty = req->qty;

    /* The conflicts MySQL (or a Galera cluster's certification) answered
     * during this sale, retried or not: per connection, so a difference. */
    long conflicts_before = env->db ? env->db->conflicts : 0;
    struct ledger_row row;
    /* A write-behind guard answers from its own backend (no MySQL here);
     * a batching guard answers repeats from its batch's insert. */
    int rc = (guard_has(g, GUARD_OWN_IDEMPOTENCY) || guard_has(g, GUARD_NO_MYSQL_DEDUCT))
                 ? 0 : store_ledger_get(env->db, req->order_id, 0, &row);
    /* MySQL's own row-lock waits (for-update, conditional-update, the
     * absolute writes) last no longer than the request may wait. */
    if (rc >= 0 && !guard_has(g, GUARD_NO_MYSQL_DEDUCT)) {
        int w = db_set_lock_wait(env->db, req->lock_wait_ms);
        if (w < 0)
            rc = w;
    }
    if (rc < 0)
        stock_db_failure(env->db, rc, res);
    else if (rc == 1)
        stock_answer_repeat(env, &row, req, res);
    else {
        struct deduct_req limited;
        if (guard_limit_gate(g, env, req, &limited, res))
            deduct_reserved(g, env, &limited, res);
        if (res->refused_limit > 0)   /* refused by the guard itself */
            guard_limit_refuse(g->name, res->refused_limit, res);
    }

    char labels[96];
    snprintf(labels, sizeof(labels), "guard=\"%s\",outcome=\"%s\"", g->name,
             deduct_outcome_info(res->outcome)->name);
    metrics_add("lab_deductions_total", labels, 1);
    snprintf(labels, sizeof(labels), "guard=\"%s\"", g->name);
    if (res->retries)
        metrics_add("lab_retries_total", labels, res->retries);
    if (env->db && env->db->conflicts > conflicts_before)
        metrics_add("lab_db_conflicts_total", labels,
                    env->db->conflicts - conflicts_before);
    if (res->lock_wait_s > 0)
        metrics_observe("lab_lock_wait_seconds", labels, res->lock_wait_s);
    /* Once per deduction, whatever its outcome: the per-guard latency the
     * recording rule guard:lab_deduct_duration_seconds:p99_rate30s reads
     * (the HTTP histogram has no guard label). Fixed buckets, this
     * thread's metrics shard: no lock shared with other threads. */
    metrics_observe("lab_deduct_duration_seconds", labels, util_now() - started);
    if (res->outcome == DEDUCT_LOCK_TIMEOUT)
        metrics_add("lab_lock_timeouts_total", labels, 1);
    if (res->outcome == DEDUCT_LIMIT_EXCEEDED)
        metrics_add("lab_limit_refusals_total", labels, 1);
    return 0;
}

/* Every guard's side state for sku set to (stock, segments). Returns 0, or
 * -1 with res naming the guard whose backend failed. */
static int seed_side_state(const struct deduct_env *env, const char *sku, long long stock,
                           int segments, struct deduct_res *res)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        struct deduct_res r = {0};
        const struct guard_mirror *m = all[i]->mirror;
        if (m && m->seed && m->seed(all[i], env, sku, stock, segments, &r) != 0) {
            res->outcome = DEDUCT_UNAVAILABLE;
            snprintf(res->detail, sizeof(res->detail), "seeding %s state: %.120s",
                     all[i]->name, r.detail);
            return -1;
        }
    }
    return 0;
}

/* The reseed proper, with the SKU reserved. MySQL's transaction stays open
 * while the side state is written, so a backend that fails rolls MySQL
 * back; side state already written is put back to what MySQL still says
 * (best effort: if that fails too, the floor under every Redis-decided
 * write keeps the difference a 503, never an oversell). */
/* The reseed's COMMIT reply was lost: it may or may not have applied, and
 * the side state already holds the new seed. Learn it from MySQL on a new
 * connection: the row as the seed wrote it (stock = initial = the new
 * stock, its segments, the version one past the one read before; a new
 * row: version 0) -> applied: 0, the reseed stands. Otherwise (not
 * applied, or changed since) the side state follows what MySQL holds now,
 * as after a failed seed: -1 with res as the caller filled it (503). */
static int seed_commit_lost(const struct deduct_env *env, const char *sku, long long stock,
                            int segments, int existed, long long old_version,
                            struct deduct_res *res)
{
    long long cur_stock = 0, cur_version = 0, cur_initial = 0;
    int cur_segments = 0;
    if (db_ensure(env->db) != DB_OK)
        return -1;
    int n = store_info(env->db, sku, &cur_stock, &cur_version, &cur_initial, &cur_segments);
    if (n < 0)
        return -1;
    if (n == 1 && cur_stock == stock && cur_initial == stock && cur_segments == segments &&
        cur_version == (existed == 1 ? old_version + 1 : 0)) {
        memset(res, 0, sizeof(*res));
        return 0;
    }
    struct deduct_res ignored = {0};
    if (n == 1)
        seed_side_state(env, sku, cur_stock, cur_segments > 0 ? cur_segments : segments,
                        &ignored);
    snprintf(res->detail, sizeof(res->detail),
             "the reseed's COMMIT reply was lost and MySQL does not show it (not applied, or "
             "changed since): the Redis state follows MySQL; retry");
    return -1;
}

static int seed_reserved(const struct deduct_env *env, const char *sku, long long stock,
                         int segments, long long limit, struct deduct_res *res)
{
    long long old_stock = 0, old_version = 0, old_initial;
    int old_segments = 0;
    int existed = store_info(env->db, sku, &old_stock, &old_version, &old_initial,
                             &old_segments);
    int rc = existed < 0 ? existed : db_begin(env->db);
    if (rc >= 0)
        rc = store_seed(env->db, sku, stock, segments);
    if (rc >= 0)
        rc = store_limit_set(env->db, sku, limit);
    if (rc < 0) {
        db_rollback(env->db);
        stock_db_failure(env->db, rc, res);
        return -1;
    }
    if (seed_side_state(env, sku, stock, segments, res) != 0) {
        db_rollback(env->db);
        struct deduct_res ignored = {0};
        if (existed == 1)
            seed_side_state(env, sku, old_stock, old_segments > 0 ? old_segments : segments,
                            &ignored);
        return -1;
    }
    if ((rc = db_commit(env->db)) < 0) {
        stock_db_failure(env->db, rc, res);
        return rc == DB_EUNAVAIL ? seed_commit_lost(env, sku, stock, segments, existed,
                                                    old_version, res)
                                 : -1;
    }
    return 0;
}

int guard_seed(const struct deduct_env *env, const char *sku, long long stock,
               int segments, struct deduct_res *res)
{
    return guard_seed_limit(env, sku, stock, segments, 0, res);
}

int guard_seed_limit(const struct deduct_env *env, const char *sku, long long stock,
                     int segments, long long limit, struct deduct_res *res)
{
    memset(res, 0, sizeof(*res));
    int deducting = 0;
    int rc = inflight_reseed_begin(sku, &deducting);
    if (rc != INFLIGHT_OK) {
        res->outcome = rc == INFLIGHT_BUSY ? DEDUCT_SKU_BUSY : DEDUCT_UNAVAILABLE;
        snprintf(res->detail, sizeof(res->detail),
                 rc == INFLIGHT_BUSY
                     ? "%d deduction(s) of this SKU in flight, or a reseed: try again"
                     : "too many SKUs in flight (%d)", rc == INFLIGHT_BUSY ? deducting
                                                                         : INFLIGHT_SLOTS);
        return -1;
    }
    rc = seed_reserved(env, sku, stock, segments, limit, res);
    inflight_reseed_done(sku);
    return rc;
}

/* Room past the lock wait for the release's own MySQL round trips. */
#define RELEASE_MARGIN_MS 1000
#define RELEASE_DEFAULT_WAIT_MS 3000

struct release_work {
    const char *order_id;
    struct ledger_row *rows;   /* [0]: the sale, or a cart's line 0 */
    int lines;                 /* 1: a single sale; more: a cart */
    int rc;                    /* stock_release's answer */
};

static int release_under_lock(void *ctx, const struct deduct_env *env,
                              const struct deduct_req *req, struct deduct_res *res)
{
    struct release_work *w = ctx;
    w->rc = w->lines > 1 ? stock_cart_release(env->db, w->order_id, w->lines, &w->rows[0])
                         : stock_release(env->db, w->order_id, &w->rows[0]);
    if (w->rc < 0)
        stock_db_failure(env->db, w->rc, res);
    return 0;
}

/* An order the ledger does not have may be a write-behind sale still on
 * its way to MySQL: releasing it now would find nothing to give back, so
 * the caller is asked to retry (503) once it has landed. Returns
 * STOCK_UNKNOWN_ORDER, or -1 with res filled. */
static int queued_elsewhere(const char *order_id, struct deduct_res *res)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        const struct guard_mirror *m = all[i]->mirror;
        int q = m && m->queued ? m->queued(all[i], order_id) : 0;
        if (q != 0) {
            res->outcome = DEDUCT_UNAVAILABLE;
            snprintf(res->detail, sizeof(res->detail), q > 0
                     ? "the %s sale of this order is still queued for MySQL: retry shortly"
                     : "cannot tell whether %s still queues this order: retry shortly",
                     all[i]->name);
            return -1;
        }
    }
    return STOCK_UNKNOWN_ORDER;
}

/* Every line of order_id into rows (a plain read: the release re-reads
 * them under FOR UPDATE), *nrows the count. Returns 1, 0 unknown order,
 * or a negative DB_E* code. */
static int release_read_lines(const struct deduct_env *env, const char *order_id,
                              struct ledger_row *rows, int *nrows)
{
    int rc = store_ledger_get(env->db, order_id, 0, &rows[0]);
    if (rc <= 0)
        return rc;
    long long lines = store_ledger_count(env->db, order_id);
    if (lines < 0)
        return (int)lines;
    *nrows = lines > CART_LINES_MAX ? CART_LINES_MAX : lines > 1 ? (int)lines : 1;
    for (int i = 0; *nrows > 1 && i < *nrows; i++)
        if ((rc = store_ledger_get_line(env->db, order_id, i, &rows[i])) <= 0)
            return rc < 0 ? rc : DB_ERETRY;   /* a line gone meanwhile: a reseed */
    return 1;
}

/* The MySQL half of a release, under the lock of the guard that sold it
 * when that guard is a lock guard: every line's SKU locked in the order
 * its carts take them (sorted by SKU, guards/core/cart_locks, or the
 * guard's lock_sort), then every line
 * given back in one transaction. The locks need the SKUs, which only the
 * ledger knows: a plain read finds them. Returns a stock_release_result,
 * or -1 with res filled (MySQL failed, a lock not obtained). */
static int release_stock(const struct deduct_env *env, const char *order_id,
                         struct ledger_row *rows, int *nrows, struct deduct_res *res)
{
    int rc = release_read_lines(env, order_id, rows, nrows);
    if (rc < 0) {
        stock_db_failure(env->db, rc, res);
        return -1;
    }
    if (rc == 0)
        return queued_elsewhere(order_id, res);
    if (rows[0].released)
        return STOCK_ALREADY_RELEASED;
    const struct guard *g = guard_find(rows[0].guard);
    struct release_work w = {order_id, rows, *nrows, 0};
    if (!g || !g->locked) {
        release_under_lock(&w, env, NULL, res);
        return w.rc < 0 ? -1 : w.rc;
    }
    /* The locks as a plain request would take them: the instance's wait,
     * the guard's default options (opts NULL: for a lock, the instance's
     * lease and the safe lock), one deadline over waits and write. */
    struct cart c;
    memset(&c, 0, sizeof(c));
    c.nlines = *nrows;
    for (int i = 0; i < *nrows; i++) {
        snprintf(c.line[i].sku, sizeof(c.line[i].sku), "%s", rows[i].sku);
        c.line[i].qty = (long)rows[i].qty;
    }
    struct cart_touch t[CART_LINES_MAX];
    int nt = cart_plan(&c, t);
    if (g->lock_sort)
        g->lock_sort(t, nt);   /* the order its cart sales take them */
    struct deduct_req *req = &c.req;
    snprintf(req->order_id, sizeof(req->order_id), "%s", order_id);
    req->lock_wait_ms = env->default_wait_ms > 0 ? env->default_wait_ms : RELEASE_DEFAULT_WAIT_MS;
    req->deadline = util_now() + (double)(req->lock_wait_ms + RELEASE_MARGIN_MS) / 1000.0;
    if (guard_locked_each(g, env, req, t, nt, 0, release_under_lock, &w, res) != 0) {
        char labels[64];
        snprintf(labels, sizeof(labels), "guard=\"%s\"", g->name);
        metrics_add("lab_release_lock_failures_total", labels, 1);
        return -1;             /* res says why; nothing changed */
    }
    return w.rc < 0 ? -1 : w.rc;
}

int guard_release_lines(const struct deduct_env *env, const char *order_id,
                        struct ledger_row *rows, int *nrows, int *side_ok,
                        struct deduct_res *res)
{
    memset(res, 0, sizeof(*res));
    *side_ok = 1;
    *nrows = 1;
    int rc = release_stock(env, order_id, rows, nrows, res);
    if (rc < 0)
        return -1;             /* res filled */
    if (rc != STOCK_RELEASED)
        return rc;
    /* Side state (Redis stock) follows the guard that sold it, after the
     * commit, line by line: if its backend fails now the units stay
     * missing there, an undersell, never an oversell. */
    const struct guard *g = guard_find(rows[0].guard);
    const struct guard_mirror *m = g ? g->mirror : NULL;
    for (int i = 0; m && m->release && i < *nrows; i++) {
        struct deduct_res r = {0};
        if (m->release(g, env, rows[i].sku, (long)rows[i].qty, &r) != 0) {
            *side_ok = 0;
            fprintf(stderr, "inventory %s: release of %s line %d: %s stock not restored: %s\n",
                    env->instance, order_id, i, rows[i].guard, r.detail);
        }
    }
    return rc;
}

int guard_release(const struct deduct_env *env, const char *order_id,
                  struct ledger_row *row, int *side_ok, struct deduct_res *res)
{
    struct ledger_row rows[CART_LINES_MAX];
    int n;
    int rc = guard_release_lines(env, order_id, rows, &n, side_ok, res);
    *row = rows[0];
    return rc;
}

void guard_describe(const char *sku, struct guard_facts *out)
{
    memset(out, 0, sizeof(*out));
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i]->mirror && all[i]->mirror->describe)
            all[i]->mirror->describe(all[i], sku, out);   /* best effort: Redis may be down */
}

int guard_pending(const char *sku, long long *entries, long long *units)
{
    int rc = 0;
    size_t n;
    const struct guard *const *all = guard_all(&n);
    *entries = *units = 0;
    for (size_t i = 0; i < n; i++) {
        long long e = 0, u = 0;
        const struct guard_mirror *m = all[i]->mirror;
        if (!m || !m->pending)
            continue;
        if (m->pending(all[i], sku, &e, &u) != 0)
            rc = -1;
        *entries += e;
        *units += u;
    }
    return rc;
}
