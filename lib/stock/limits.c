/* Purchase limits inside the sale's transaction (see limits.h). */
#include "limits.h"

#include "base/db.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

void stock_limit_no_user(long long limit, struct deduct_res *res)
{
    res->outcome = DEDUCT_BAD_REQUEST;
    snprintf(res->detail, sizeof(res->detail),
             "user_id required: the SKU has a limit of %lld per user", limit);
}

int stock_limit_needs_user(const struct deduct_req *req, long long limit,
                           struct deduct_res *res)
{
    if (limit <= 0 || req->user_id[0])
        return 0;
    stock_limit_no_user(limit, res);
    return 1;
}

long long stock_limit_charge(const struct deduct_env *env, const struct deduct_req *req,
                             long long limit, struct deduct_res *res)
{
    if (limit <= 0)
        return 1;
    if (!req->user_id[0]) {   /* whose quota would it count against? */
        db_rollback(env->db);
        stock_limit_no_user(limit, res);
        return 0;
    }
    long long n = req->limit_separate
                      ? store_limit_add(env->db, req->sku, req->user_id, req->qty)
                      : store_limit_take(env->db, req->sku, req->user_id, req->qty, limit);
    if (n < 0)
        return n;
    if (n > 0)
        return 1;
    db_rollback(env->db);
    stock_limit_refused(env, req, limit, res);
    return 0;
}

void stock_limit_refused(const struct deduct_env *env, const struct deduct_req *req,
                         long long limit, struct deduct_res *res)
{
    long long bought = 0;
    int rc = store_limit_bought(env->db, req->sku, req->user_id, &bought);
    res->outcome = DEDUCT_LIMIT_EXCEEDED;
    if (rc < 0)
        snprintf(res->detail, sizeof(res->detail),
                 "limit %lld per user: user %.40s cannot buy %ld more; nothing was sold",
                 limit, req->user_id, req->qty);
    else
        snprintf(res->detail, sizeof(res->detail),
                 "limit %lld per user: user %.40s already has %lld, asked for %ld; nothing "
                 "was sold", limit, req->user_id, bought, req->qty);
}

int stock_limit_precheck(const struct deduct_env *env, const struct deduct_req *req,
                         struct deduct_res *res)
{
    long long bought = 0;
    int rc = store_limit_bought(env->db, req->sku, req->user_id, &bought);
    if (rc < 0)
        return rc;
    if (bought + req->qty <= req->limit)
        return 1;
    stock_limit_refused(env, req, req->limit, res);
    return 0;
}

long long stock_limit_give_back(struct db_conn *db, const char *sku, const char *user_id,
                                long long qty)
{
    return user_id[0] ? store_limit_give(db, sku, user_id, qty) : 0;
}

int stock_limit_check_choice(const char *s, int *separate)
{
    if (strcmp(s, "atomic") == 0)
        *separate = 0;
    else if (strcmp(s, "separate") == 0)
        *separate = 1;
    else
        return -1;
    return 0;
}

long long stock_limit_cart_line(struct db_conn *db, const char *sku, const char *user_id,
                                long long qty, long long *limit)
{
    *limit = 0;
    int rc = store_limit_of(db, sku, limit);
    if (rc < 0)
        return rc;
    if (rc == 0 || *limit <= 0)
        return 1;
    if (!user_id[0])
        return STOCK_LIMIT_NO_USER;
    long long n = store_limit_take(db, sku, user_id, qty, *limit);
    return n < 0 ? n : n > 0 ? 1 : STOCK_LIMIT_OVER;
}
