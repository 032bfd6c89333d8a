/* Guard registry, the idempotent entry point and the shared
 * read-modify-write that every lock guard protects. */
#include "guard.h"

#include "db.h"
#include "metrics.h"
#include "store.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

extern const struct guard guard_none, guard_mutex, guard_for_update,
    guard_optimistic, guard_conditional_update, guard_redis_lock, guard_segmented,
    guard_redis_decr, guard_redlock, guard_lock_table;

static const struct guard *const guards[] = {
    &guard_none,
    &guard_mutex,
    &guard_optimistic,
    &guard_for_update,
    &guard_conditional_update,
    &guard_redis_lock,
    &guard_segmented,
    &guard_redis_decr,
    &guard_redlock,
    &guard_lock_table,
};

#define NGUARDS (sizeof(guards) / sizeof(guards[0]))

const struct guard *guard_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < NGUARDS; i++)
        if (strcmp(guards[i]->name, name) == 0)
            return guards[i];
    return NULL;
}

const struct guard *const *guard_all(size_t *n)
{
    *n = NGUARDS;
    return guards;
}

static char names_buf[512];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void build_names(void)
{
    size_t off = 0;
    for (size_t i = 0; i < NGUARDS && off < sizeof(names_buf); i++)
        off += (size_t)snprintf(names_buf + off, sizeof(names_buf) - off, "%s%s",
                                i ? ", " : "", guards[i]->name);
}

const char *guard_names(void)
{
    pthread_once(&names_once, build_names);
    return names_buf;
}

void guard_db_failure(struct db_conn *db, int rc, struct deduct_res *res)
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

static void fill_duplicate(const struct ledger_row *row, struct deduct_res *res)
{
    res->outcome = DEDUCT_DUPLICATE;
    res->qty = (long)row->qty;
    res->remaining = row->remaining;
    snprintf(res->guard, sizeof(res->guard), "%s", row->guard);
    snprintf(res->instance, sizeof(res->instance), "%s", row->instance);
}

/* A repeated order_id can race past the first check; the unique key then
 * refuses the insert and we answer with the first sale. */
void guard_conflict_duplicate(const struct guard_env *env,
                                            const struct deduct_req *req,
                                            struct deduct_res *res)
{
    struct ledger_row row;
    int rc = store_ledger_get(env->db, req->order_id, 0, &row);
    if (rc == 1)
        fill_duplicate(&row, res);
    else if (rc < 0)
        guard_db_failure(env->db, rc, res);
    else {
        res->outcome = DEDUCT_INTERNAL;
        snprintf(res->detail, sizeof(res->detail), "ledger conflict without a row");
    }
}

int guard_rmw(const char *guard_name, const struct guard_env *env,
              const struct deduct_req *req, struct deduct_res *res)
{
    long long stock, version;
    int rc = store_read(env->db, req->sku, 0, &stock, &version);
    if (rc < 0) {
        guard_db_failure(env->db, rc, res);
        return 0;
    }
    if (rc == 0) {
        res->outcome = DEDUCT_UNKNOWN_SKU;
        return 0;
    }
    if (stock < req->qty) {
        res->outcome = DEDUCT_OUT_OF_STOCK;
        res->remaining = stock;
        return 0;
    }
    util_sleep_ms(req->hold_ms);   /* the seeds' slow business call */
    long long remaining = stock - req->qty;
    long long n;
    if ((n = db_begin(env->db)) < 0 ||
        (n = store_set_stock(env->db, req->sku, remaining)) < 0 ||
        (n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty,
                                 remaining, guard_name, env->instance)) < 0 ||
        (n = db_commit(env->db)) < 0) {
        db_rollback(env->db);
        if (n == DB_EDUP)
            guard_conflict_duplicate(env, req, res);
        else
            guard_db_failure(env->db, (int)n, res);
        return 0;
    }
    res->outcome = DEDUCT_SOLD;
    res->remaining = remaining;
    res->qty = req->qty;
    return 0;
}

int guard_record_relative(const char *guard_name, const struct guard_env *env,
                          const struct deduct_req *req, struct deduct_res *res)
{
    long long n, stock = 0, version;
    if ((n = db_begin(env->db)) < 0 || (n = store_add_stock(env->db, req->sku, -req->qty)) < 0)
        goto fail;
    if (n == 0) {
        db_rollback(env->db);
        res->outcome = DEDUCT_UNKNOWN_SKU;
        return -1;
    }
    int found = store_read(env->db, req->sku, 0, &stock, &version);
    if (found <= 0) {
        n = found < 0 ? found : DB_ERR;
        goto fail;
    }
    if ((n = store_ledger_insert(env->db, req->order_id, req->sku, req->qty, stock,
                                 guard_name, env->instance)) < 0 ||
        (n = db_commit(env->db)) < 0)
        goto fail;
    res->outcome = DEDUCT_SOLD;
    res->remaining = stock;
    return 0;
fail:
    db_rollback(env->db);
    if (n == DB_EDUP)
        guard_conflict_duplicate(env, req, res);
    else
        guard_db_failure(env->db, (int)n, res);
    return -1;
}

static const char *outcome_name(enum deduct_outcome o)
{
    switch (o) {
    case DEDUCT_SOLD: return "sold";
    case DEDUCT_DUPLICATE: return "duplicate";
    case DEDUCT_OUT_OF_STOCK: return "out_of_stock";
    case DEDUCT_UNKNOWN_SKU: return "unknown_sku";
    case DEDUCT_LOCK_TIMEOUT: return "lock_timeout";
    case DEDUCT_RETRY_EXHAUSTED: return "retry_exhausted";
    case DEDUCT_UNAVAILABLE: return "backend_unavailable";
    default: return "internal";
    }
}

int guard_deduct(const struct guard *g, const struct guard_env *env,
                 const struct deduct_req *req, struct deduct_res *res)
{
    memset(res, 0, sizeof(*res));
    snprintf(res->guard, sizeof(res->guard), "%s", g->name);
    snprintf(res->instance, sizeof(res->instance), "%s", env->instance);
    res->qty = req->qty;

    struct ledger_row row;
    int rc = store_ledger_get(env->db, req->order_id, 0, &row);
    if (rc < 0)
        guard_db_failure(env->db, rc, res);
    else if (rc == 1)
        fill_duplicate(&row, res);
    else
        g->deduct(env, req, res);

    char labels[96];
    snprintf(labels, sizeof(labels), "guard=\"%s\",outcome=\"%s\"", g->name,
             outcome_name(res->outcome));
    metrics_add("lab_deductions_total", labels, 1);
    snprintf(labels, sizeof(labels), "guard=\"%s\"", g->name);
    if (res->retries)
        metrics_add("lab_retries_total", labels, res->retries);
    if (res->lock_wait_s > 0)
        metrics_observe("lab_lock_wait_seconds", labels, res->lock_wait_s);
    if (res->outcome == DEDUCT_LOCK_TIMEOUT)
        metrics_add("lab_lock_timeouts_total", labels, 1);
    return 0;
}
