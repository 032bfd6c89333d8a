/* Group commits of redis-decr's MySQL writes (see decr_group.h): the
 * gathering is coalesce.h's, the writes stock_record_relative_batch's. */
#include "guards/redis_decr/decr_group.h"

#include "base/metrics.h"
#include "guards/core/coalesce.h"
#include "stock/txn.h"

/* A group is one transaction: at most this many sales (STOCK_BATCH_MAX). */
static struct coalescer groups = {.mu = PTHREAD_MUTEX_INITIALIZER, .max = 128};

struct run_ctx {
    const char *guard_name;
    const struct deduct_env *env;  /* the leader's: its MySQL connection */
    decr_group_done_fn done;
};

static void observe_group(int n)
{
    static const double le[] = {1, 2, 4, 8, 16, 32, 64, 128};
    metrics_observe_le("lab_decr_group_size", "", n, le, (int)(sizeof(le) / sizeof(le[0])));
}

/* coal_run_fn: one transaction for the members' sales, then the guard's
 * follow-up, before anyone is answered. */
static void record_many(struct coal_member *const *m, int n, void *ctx)
{
    const struct run_ctx *c = ctx;
    struct relative_item items[128];
    for (int i = 0; i < n; i++)
        items[i] = *(struct relative_item *)m[i]->arg;
    stock_record_relative_batch(c->guard_name, c->env, items, n);
    observe_group(n);
    if (c->done)
        c->done(items, n);
    for (int i = 0; i < n; i++)
        *(struct relative_item *)m[i]->arg = items[i];
}

void decr_group_record_many(const char *guard_name, const struct deduct_env *env,
                            struct relative_item *items, int n, decr_group_done_fn done)
{
    if (n <= 0)
        return;
    stock_record_relative_batch(guard_name, env, items, n);
    observe_group(n);
    if (done)
        done(items, n);
}

int decr_group_record(const char *guard_name, const struct deduct_env *env,
                      const struct deduct_req *req, long long seeds, void *ctx,
                      const char *intent, decr_group_done_fn done, struct deduct_res *res)
{
    /* rc stays NOT_COMMITTED unless a run answers it: a sale that expired
     * in the queue (coal_submit answered it deadline_exceeded) wrote
     * nothing. */
    struct relative_item it = {.req = req, .seeds = seeds, .res = res, .ctx = ctx,
                               .intent = intent, .rc = STOCK_NOT_COMMITTED};
    struct run_ctx c = {guard_name, env, done};
    coal_submit(&groups, req->sku, req, res, &it, record_many, &c);
    return it.rc;
}
