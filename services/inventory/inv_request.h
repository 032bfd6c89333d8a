/* What every inventory route needs of a request (services/API.md section
 * 3): its guard environment with a live MySQL connection, the guard it
 * names, and a failed outcome as the API's error body. */
#ifndef INV_REQUEST_H
#define INV_REQUEST_H

#include "base/http.h"
#include "inventory_config.h"

struct db_conn;
struct deduct_env;
struct deduct_res;
struct guard;

/* 503 backend_unavailable naming MySQL's error (db NULL: out of memory),
 * with Retry-After. Returns 503. */
int inv_db_down(struct http_resp *resp, struct db_conn *db);
/* env for this request: this thread's MySQL connection and the instance's
 * defaults. 0 when MySQL answers; -1 after answering 503. */
int inv_env_ready(const struct inv_conf *c, struct deduct_env *env, struct http_resp *resp);
/* The body's "guard", else X-Guard, else the instance's; NULL after
 * answering 400 (an unknown name, listing the known ones). */
const struct guard *inv_pick_guard(const struct inv_conf *c, const struct http_req *req,
                                   const char *body_guard, struct http_resp *resp);
/* A failed outcome as the API's error body, from the outcome table
 * (status, code, Retry-After); detail NULL means r->detail. */
void inv_answer_failure(const struct deduct_res *r, const char *detail,
                        struct http_resp *resp);

#endif
