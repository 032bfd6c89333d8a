/* What every inventory route needs of a request (inventory_routes.c and
 * hold_routes.c alike): its guard environment, its guard, and a failed
 * outcome worded as the API's error body. */
#include "inv_request.h"

#include "base/db.h"
#include "guards/guard.h"

#include <stdio.h>
#include <string.h>

static void env_for(const struct inv_conf *c, struct deduct_env *env)
{
    memset(env, 0, sizeof(*env));
    env->db = db_thread_conn(&c->db);
    env->instance = c->instance;
    env->max_retries = c->max_retries;
    env->default_ttl_ms = c->lock_ttl_ms;
    env->default_wait_ms = c->lock_wait_ms;
}

int inv_db_down(struct http_resp *resp, struct db_conn *db)
{
    snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
    http_error(resp, 503, "backend_unavailable", "MySQL unavailable: %s",
               db ? db->errstr : "out of memory");
    return 503;
}

/* The request's guard environment with a live MySQL connection; answers
 * 503 and returns -1 when MySQL cannot be reached. */
int inv_env_ready(const struct inv_conf *c, struct deduct_env *env, struct http_resp *resp)
{
    env_for(c, env);
    if (env->db && env->db->my)
        return 0;
    inv_db_down(resp, env->db);
    return -1;
}

/* Guard choice: the body's "guard", else X-Guard, else the instance's. */
const struct guard *inv_pick_guard(const struct inv_conf *c, const struct http_req *req,
                                   const char *body_guard, struct http_resp *resp)
{
    const char *name = body_guard && *body_guard ? body_guard : http_header(req, "X-Guard");
    if (!name || !*name)
        name = c->guard;
    const struct guard *g = guard_find(name);
    if (!g)
        http_error(resp, 400, "bad_request", "unknown guard '%.40s'; known guards: %s",
                   name, guard_names());
    return g;
}

/* A failed outcome as the API's error body, from the outcome table;
 * `detail` NULL means the guard's r->detail. */
void inv_answer_failure(const struct deduct_res *r, const char *detail,
                        struct http_resp *resp)
{
    const struct deduct_outcome_info *info = deduct_outcome_info(r->outcome);
    if (info->retry_after)
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
    http_error(resp, info->http_status, info->error_code, "%s", detail ? detail : r->detail);
}
