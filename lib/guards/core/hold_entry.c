/* Holds under the guards (hold_entry.h): the lock of the hold's guard
 * around each stock move, and the metrics of holds. */
#include "hold_entry.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/util.h"
#include "guards/core/cart_locks.h"
#include "stock/cart.h"
#include "stock/txn.h"

#include <stdio.h>
#include <string.h>

/* Room past the lock wait for a hold's own MySQL round trips. */
#define HOLD_MARGIN_MS 1000
#define HOLD_DEFAULT_WAIT_MS 3000

int guard_holds(const struct guard *g)
{
    if (g && g->mirror && g->mirror->hold_reserve)
        return 1;   /* holds of its own, in its backend */
    return g && !(g->mirror && g->mirror->seed) && !guard_has(g, GUARD_NO_MYSQL_DEDUCT);
}

/* The guards with holds of their own: a hold not in MySQL may be theirs.
 * Calls each one's hook (which) until one knows order_id; 0 with
 * a->result (HOLD_UNKNOWN_ORDER when none does), -1 with a->res. */
static int own_holds(const struct deduct_env *env, const char *order_id, int confirm,
                     struct hold_answer *a)
{
    size_t n;
    const struct guard *const *all = guard_all(&n);
    a->result = HOLD_UNKNOWN_ORDER;
    for (size_t i = 0; i < n && a->result == HOLD_UNKNOWN_ORDER; i++) {
        const struct guard_mirror *m = all[i]->mirror;
        if (!m || !m->hold_reserve)
            continue;
        int rc = confirm ? m->hold_confirm(all[i], env, order_id, a)
                         : m->hold_release(all[i], env, order_id, a);
        if (rc != 0)
            return -1;
    }
    return 0;
}

const char *guard_hold_names(void)
{
    static char buf[512];
    static int built;
    if (built)
        return buf;
    size_t n, used = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n && used < sizeof(buf); i++) {
        if (!guard_holds(all[i]))
            continue;
        int w = snprintf(buf + used, sizeof(buf) - used, "%s%s", used ? ", " : "",
                         all[i]->name);
        used += w > 0 ? (size_t)w : 0;
    }
    built = 1;
    return buf;
}

static void count(const char *guard, const char *outcome)
{
    char labels[96];
    snprintf(labels, sizeof(labels), "guard=\"%s\",outcome=\"%s\"", guard, outcome);
    metrics_add("lab_holds_total", labels, 1);
}

/* One hold step: fn(ctx, db) returns an enum hold_result, 1/0, or DB_E*. */
struct hold_work {
    int (*fn)(void *ctx, struct db_conn *db);
    void *ctx;
    int rc;
};

static int hold_work_run(void *ctx, const struct deduct_env *env,
                         const struct deduct_req *req, struct deduct_res *res)
{
    struct hold_work *w = ctx;
    w->rc = w->fn(w->ctx, env->db);
    if (w->rc < 0)
        stock_db_failure(env->db, w->rc, res);
    return 0;
}

/* Run fn under g's lock for every SKU of lines (sorted, one per SKU: a
 * cart's locks nest in one order, core/cart_locks.c) when g is a lock
 * guard, as a plain request would take them (the instance's wait, the
 * guard's defaults, one wait budget for all). Returns fn's value, or -1
 * with res filled (MySQL, a lock not had). */
static int hold_locked(const struct guard *g, const struct deduct_env *env,
                       const struct hold_line *lines, int nlines, const char *order_id,
                       struct hold_work *w, struct deduct_res *res)
{
    memset(res, 0, sizeof(*res));
    if (!g || !g->locked) {
        hold_work_run(w, env, NULL, res);
        return w->rc < 0 ? -1 : w->rc;
    }
    struct deduct_req req;
    struct cart_touch t[HOLD_LINES_MAX];
    memset(&req, 0, sizeof(req));
    for (int i = 0; i < nlines; i++) {
        memset(&t[i], 0, sizeof(t[i]));
        snprintf(t[i].sku, sizeof(t[i].sku), "%s", lines[i].sku);
        t[i].qty = 1;
    }
    snprintf(req.sku, sizeof(req.sku), "%s", lines[0].sku);
    snprintf(req.order_id, sizeof(req.order_id), "%s", order_id);
    req.qty = 1;
    req.lock_wait_ms = env->default_wait_ms > 0 ? env->default_wait_ms : HOLD_DEFAULT_WAIT_MS;
    req.deadline = util_now() + (double)(req.lock_wait_ms + HOLD_MARGIN_MS) / 1000.0;
    if (guard_locked_each(g, env, &req, t, nlines, 0, hold_work_run, w, res) != 0)
        return -1;
    return w->rc < 0 ? -1 : w->rc;
}

struct reserve_ctx {
    const struct hold_reserve_req *r;
    struct hold_answer *a;
};

static int reserve_fn(void *ctx, struct db_conn *db)
{
    struct reserve_ctx *c = ctx;
    return stock_hold_reserve(db, c->r, &c->a->h, &c->a->left);
}

int guard_reserve(const struct guard *g, const struct deduct_env *env,
                  const struct hold_reserve_req *r, struct hold_answer *a)
{
    memset(a, 0, sizeof(*a));
    if (!guard_holds(g)) {
        a->res.outcome = DEDUCT_BAD_REQUEST;
        snprintf(a->res.detail, sizeof(a->res.detail),
                 "guard %.32s keeps its stock in Redis and does not reserve (GET /guards: "
                 "\"holds\")", g ? g->name : "?");
        return -1;
    }
    if (g->mirror && g->mirror->hold_reserve) {
        if (g->mirror->hold_reserve(g, env, r, a) != 0)
            return -1;
        count(g->name, a->result == HOLD_HELD ? "held" : a->result == HOLD_REPEAT ? "repeat"
                       : a->result == HOLD_OUT_OF_STOCK ? "out_of_stock" : "refused");
        return 0;
    }
    struct reserve_ctx c = {r, a};
    struct hold_work w = {reserve_fn, &c, 0};
    int rc = hold_locked(g, env, r->line, r->nlines, r->order_id, &w, &a->res);
    if (rc < 0)
        return -1;
    a->result = rc;
    count(g->name, rc == HOLD_HELD ? "held" : rc == HOLD_REPEAT ? "repeat"
                   : rc == HOLD_OUT_OF_STOCK ? "out_of_stock" : "refused");
    return 0;
}

struct order_ctx {
    const char *order_id;
    const char *instance;
    int check_deadline;
    struct hold_answer *a;
};

static int confirm_fn(void *ctx, struct db_conn *db)
{
    struct order_ctx *c = ctx;
    return stock_hold_confirm(db, c->order_id, c->instance, c->check_deadline, &c->a->h,
                              &c->a->remaining);
}

static int release_fn(void *ctx, struct db_conn *db)
{
    struct order_ctx *c = ctx;
    return stock_hold_release(db, c->order_id, &c->a->h);
}

static int expire_fn(void *ctx, struct db_conn *db)
{
    struct order_ctx *c = ctx;
    return stock_hold_expire(db, c->order_id);
}

/* Find order_id's hold (its SKU and guard name the lock), then run fn on
 * it under that lock. Returns 0 with a->result (HOLD_UNKNOWN_ORDER when
 * there is no hold), or -1 with a->res. */
static int on_hold(const struct deduct_env *env, struct order_ctx *c,
                   int (*fn)(void *, struct db_conn *))
{
    struct hold_answer *a = c->a;
    int rc = stock_hold_load(env->db, c->order_id, 0, &a->h);
    if (rc < 0) {
        stock_db_failure(env->db, rc, &a->res);
        return -1;
    }
    if (rc == 0) {
        a->result = HOLD_UNKNOWN_ORDER;
        return 0;
    }
    struct hold_work w = {fn, c, 0};
    rc = hold_locked(guard_find(a->h.guard), env, a->h.line, a->h.nlines, c->order_id, &w,
                     &a->res);
    if (rc < 0)
        return -1;
    a->result = rc;
    return 0;
}

static const char *confirm_outcome(int result)
{
    switch (result) {
    case HOLD_CONFIRMED: return "confirmed";
    case HOLD_CONFIRMED_FRESH: return "confirmed_fresh";
    case HOLD_CONFIRM_REPEAT: return "confirm_repeat";
    case HOLD_EXPIRED: return "hold_expired";
    default: return "confirm_refused";
    }
}

int guard_confirm(const struct deduct_env *env, const char *order_id, int check_deadline,
                  struct hold_answer *a)
{
    memset(a, 0, sizeof(*a));
    struct order_ctx c = {order_id, env->instance, check_deadline, a};
    if (on_hold(env, &c, confirm_fn) != 0)
        return -1;
    if (a->result == HOLD_UNKNOWN_ORDER && own_holds(env, order_id, 1, a) != 0)
        return -1;
    if (a->result != HOLD_UNKNOWN_ORDER)
        count(a->h.guard, confirm_outcome(a->result));
    return 0;
}

int guard_hold_release(const struct deduct_env *env, const char *order_id,
                       struct hold_answer *a)
{
    memset(a, 0, sizeof(*a));
    struct order_ctx c = {order_id, env->instance, 1, a};
    if (on_hold(env, &c, release_fn) != 0)
        return -1;
    if (a->result == HOLD_UNKNOWN_ORDER && own_holds(env, order_id, 0, a) != 0)
        return -1;
    if (a->result == HOLD_GIVEN_BACK)
        count(a->h.guard, "released");
    return 0;
}

/* Due holds per read: their ids come back joined in one value, which the
 * server cuts at group_concat_max_len (1024 bytes by default): 15 ids of
 * up to 64 bytes and their commas fit. */
#define SWEEP_READ_IDS 15

/* Expire the due holds of one read; returns how many were read (-1: MySQL
 * failed), *swept how many this call gave back. */
static int sweep_read(const struct deduct_env *env, int *swept)
{
    char ids[SWEEP_READ_IDS * 65 + 1];
    long long n = store_holds_due(env->db, SWEEP_READ_IDS, ids, sizeof(ids));
    if (n < 0)
        return -1;
    for (char *save = NULL, *id = strtok_r(ids, ",", &save); id;
         id = strtok_r(NULL, ",", &save)) {
        struct hold_answer a;
        memset(&a, 0, sizeof(a));
        struct order_ctx c = {id, env->instance, 1, &a};
        /* 0: a confirm or another instance's sweep decided it first */
        if (on_hold(env, &c, expire_fn) != 0 || a.result != 1)
            continue;
        char labels[64];
        snprintf(labels, sizeof(labels), "guard=\"%s\"", a.h.guard);
        metrics_add("lab_holds_swept_total", labels, 1);
        count(a.h.guard, "expired");
        (*swept)++;
    }
    return (int)n;
}

/* The guards with holds of their own sweep theirs in one script each. */
static int sweep_own(int max)
{
    size_t n;
    int swept = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        const struct guard_mirror *m = all[i]->mirror;
        int k = m && m->hold_sweep ? m->hold_sweep(all[i], max) : 0;
        if (k <= 0)
            continue;
        char labels[64];
        snprintf(labels, sizeof(labels), "guard=\"%s\"", all[i]->name);
        metrics_add("lab_holds_swept_total", labels, k);
        swept += k;
    }
    return swept;
}

int guard_hold_sweep(const struct deduct_env *env, int max)
{
    int swept = sweep_own(max);
    if (!env->db || !env->db->my)
        return swept;
    for (int read = 0; read < max;) {
        int before = swept;
        int n = sweep_read(env, &swept);
        if (n < 0)
            return swept ? swept : -1;
        read += n;
        /* all read, or none given back (their locks busy): next time */
        if (n < SWEEP_READ_IDS || swept == before)
            break;
    }
    return swept;
}
