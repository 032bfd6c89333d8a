/* The order flow (see order_place.h and services/API.md section 4):
 *   1. INSERT the order as pending, with its deadline;
 *   2. deduct with failover, the same order_id on every instance, each call
 *      told the budget left (X-Deadline-Ms) and cut off at it;
 *   3. finalise: pending -> placed (a sale), or -> failed (surely no sale).
 * Anything else stays pending: the reconciler releases it once the deadline
 * plus a margin has passed, when no instance can still commit it. An order
 * is released now only after an inventory answered, and only when its row
 * could be claimed (pending -> releasing), so a placed row is never
 * released. */
#include "order_place.h"

#include "inventory_client.h"
#include "order_hold.h"
#include "order_reconcile.h"
#include "order_store.h"

#include "base/db.h"
#include "base/metrics.h"
#include "base/util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The inventory keeps 50 ms of the X-Deadline-Ms budget for itself (API.md):
 * an attempt with less than this left cannot sell, so it is not made. */
#define ORDER_MIN_ATTEMPT_MS 60

static atomic_uint next_instance;

static long ms_left(double deadline)
{
    return (long)((deadline - util_now()) * 1000.0);
}

static void pass_through(const struct invc_answer *a, struct http_resp *resp)
{
    if (a->retry_after[0])
        snprintf(resp->retry_after, sizeof(resp->retry_after), "%s", a->retry_after);
    http_text(resp, (int)a->status, "application/json", strdup(a->body));
}

static void retry_later(struct http_resp *resp)
{
    snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
}

/* 201 with a placed row (a cart: its "lines" for sku and qty); duplicate
 * marks a repeat of an earlier request. */
static void answer_placed(struct http_resp *resp, const char *order_id,
                          const struct order_row *r, int duplicate)
{
    json_t *j = json_pack("{s:b,s:s,s:s,s:s}", "ok", 1, "order_id", order_id, "guard",
                          r->guard, "inventory_instance", r->instance);
    json_t *lines = r->lines[0] ? json_loads(r->lines, 0, NULL) : NULL;
    if (j && lines) {
        json_object_set_new(j, "lines", lines);
    } else if (j) {
        json_object_set_new(j, "sku", json_string(r->sku));
        json_object_set_new(j, "qty", json_integer((json_int_t)r->qty));
    }
    if (j && r->remaining >= 0)
        json_object_set_new(j, "remaining", json_integer(r->remaining));
    if (j && duplicate)
        json_object_set_new(j, "duplicate", json_true());
    http_json(resp, 201, j);
}

enum order_deduct_outcome {
    DEDUCT_ANSWERED,    /* an instance answered (a->status) */
    DEDUCT_UNREACHED,   /* no request reached any instance: surely no sale */
    DEDUCT_UNKNOWN,     /* a request may have arrived, no answer within the budget */
};

/* Round-robin with failover. Moving on after a timeout is safe because the
 * same order_id goes everywhere (the ledger's unique key: a second instance
 * cannot sell it again); *ambiguous says an earlier instance may still be
 * working on it. */
static enum order_deduct_outcome deduct(const struct order_conf *c, const char *path,
                                        const char *body, double deadline,
                                        struct invc_answer *a, int *used, int *ambiguous)
{
    unsigned start = atomic_fetch_add(&next_instance, 1);
    *ambiguous = 0;
    snprintf(a->error, sizeof(a->error), "the order's budget ran out before a call");
    for (int i = 0; i < c->nurls; i++) {
        long left = ms_left(deadline);
        if (left < ORDER_MIN_ATTEMPT_MS)
            break;
        int k = (int)((start + (unsigned)i) % (unsigned)c->nurls);
        char dl[48];
        snprintf(dl, sizeof(dl), "X-Deadline-Ms: %ld", left);
        const char *hdrs[] = {dl, NULL};
        long connect = c->connect_timeout_ms < left ? c->connect_timeout_ms : left;
        if (invc_call(c->urls[k], path, body, hdrs, left, connect, a) == 0) {
            *used = k;
            return DEDUCT_ANSWERED;
        }
        *ambiguous |= a->connected;
        metrics_add("lab_order_failovers_total", "", 1);
        fprintf(stderr, "order: inventory %s failed: %s\n", c->urls[k], a->error);
    }
    return *ambiguous ? DEDUCT_UNKNOWN : DEDUCT_UNREACHED;
}

/* An answer after which the inventory surely wrote nothing for this order:
 * its 4xx refusals, and the 503s decided before any write. */
static int sold_nothing(const struct invc_answer *a)
{
    if (a->status >= 400 && a->status < 500)
        return 1;
    if (a->status != 503)
        return 0;
    json_t *j = json_loads(a->body, 0, NULL);
    const char *code = json_string_value(json_object_get(j, "error"));
    int none = code && (strcmp(code, "lock_timeout") == 0 ||
                        strcmp(code, "retry_exhausted") == 0 ||
                        strcmp(code, "deadline_exceeded") == 0);
    json_decref(j);
    return none;
}

/* Claim the row and give its stock back now. For rows whose deduction was
 * answered: no instance can still be selling it. */
static enum order_settled release_now(const struct order_conf *c, struct db_conn *db,
                                      const char *order_id, int first)
{
    if (order_store_claim(db, order_id, -1) != 1)
        return ORDER_UNSETTLED;       /* not pending any more, or no database */
    return order_release(c, db, order_id, first);
}

/* The order_id already has a row. Returns 1 when the caller should go on
 * (a failed order reopened), else 0 with resp answered. */
static int answer_existing(struct db_conn *db, const struct order_req *o, long long budget,
                           struct http_resp *resp)
{
    struct order_row r;
    long long n = order_store_get(db, o->order_id, &r);
    if (n < 0) {
        retry_later(resp);
        http_error(resp, 503, "backend_unavailable", "order database: %s", db->errstr);
        return 0;
    }
    if (n == 1 && (strcmp(r.sku, o->sku) != 0 || r.qty != o->qty ||
                   strcmp(r.lines, o->lines) != 0 || strcmp(r.user_id, o->user_id) != 0)) {
        http_error(resp, 409, "order_id_conflict", "order_id %s already names another "
                   "order (its sku, qty, lines or user_id differ); use a new order_id",
                   o->order_id);
        return 0;
    }
    if (n == 1 && strcmp(r.status, "placed") == 0) {
        answer_placed(resp, o->order_id, &r, 1);
        return 0;
    }
    if (n == 1 && order_hold_existing(o->order_id, &r, resp))
        return 0;
    if (n == 1 && strcmp(r.status, "cancelled") == 0) {
        http_error(resp, 409, "order_cancelled", "order %s was cancelled and its stock given "
                   "back; use a new order_id to buy again", o->order_id);
        return 0;
    }
    if (n == 1 && strcmp(r.status, "failed") == 0 &&
        order_store_reopen(db, o->order_id, budget) == 1)
        return 1;
    retry_later(resp);
    http_error(resp, 503, "order_pending", "order %s is still being placed or settled; "
               "repeat the request to learn its outcome", o->order_id);
    return 0;
}

/* The finalising UPDATE failed or its reply was lost: read the row again
 * before giving anything back. */
static void resolve_place_failure(const struct order_conf *c, struct db_conn *db,
                                  const struct order_req *o, int used,
                                  struct http_resp *resp)
{
    struct order_row r;
    char why[160];
    snprintf(why, sizeof(why), "%s", db->errstr);
    long long n = order_store_get(db, o->order_id, &r);
    if (n == 1 && strcmp(r.status, "placed") == 0) {
        answer_placed(resp, o->order_id, &r, 0);   /* the write had gone through */
        return;
    }
    int pending = n == 1 && strcmp(r.status, "pending") == 0;
    enum order_settled s = pending ? release_now(c, db, o->order_id, used) : ORDER_UNSETTLED;
    retry_later(resp);
    http_error(resp, 503, "backend_unavailable", "order %s could not be recorded (%s); %s",
               o->order_id, why,
               s != ORDER_UNSETTLED ? "the stock was given back"
               : pending ? "the release did not get through: the reconciler retries it"
                         : "it stays pending and the reconciler gives the stock back once the "
                           "order database answers");
    if (s == ORDER_UNSETTLED)
        fprintf(stderr, "order: %s sold, not recorded: left to the reconciler\n", o->order_id);
}

static void finish_sale(const struct order_conf *c, struct db_conn *db,
                        const struct order_req *o, const struct invc_answer *a, int used,
                        struct http_resp *resp)
{
    json_t *ans = json_loads(a->body, 0, NULL);
    struct order_row r = {.qty = o->qty, .remaining = -1};
    const char *guard = NULL, *instance = NULL;
    json_int_t remaining = -1;
    /* a cart's answer has the remaining stock per line, not one */
    if (!ans || json_unpack(ans, "{s:s,s:s}", "guard", &guard, "instance", &instance) != 0 ||
        (!o->lines[0] && json_unpack(ans, "{s:I}", "remaining", &remaining) != 0)) {
        enum order_settled s = release_now(c, db, o->order_id, used);
        http_error(resp, 502, "bad_inventory_answer", "inventory answered 200 with an "
                   "unexpected body; %s", s == ORDER_CANCELLED ? "stock given back"
                   : "the reconciler gives the stock back");
        json_decref(ans);
        return;
    }
    snprintf(r.sku, sizeof(r.sku), "%s", o->sku);
    snprintf(r.lines, sizeof(r.lines), "%s", o->lines);
    snprintf(r.guard, sizeof(r.guard), "%s", guard);
    snprintf(r.instance, sizeof(r.instance), "%s", instance);
    r.remaining = remaining;
    json_decref(ans);

    util_sleep_ms(c->debug_pause_after_deduct_ms);   /* lab knob: 0 in service */
    long long n = order_store_place(db, o->order_id, r.guard, r.instance, r.remaining);
    if (n == 1) {
        answer_placed(resp, o->order_id, &r, 0);
        return;
    }
    if (n < 0) {
        resolve_place_failure(c, db, o, used, resp);
        return;
    }
    /* Not pending any more: the reconciler judged it expired and releases it. */
    struct order_row now;
    if (order_store_get(db, o->order_id, &now) == 1 && strcmp(now.status, "placed") == 0) {
        answer_placed(resp, o->order_id, &now, 0);
        return;
    }
    http_error(resp, 504, "order_expired", "order %s outlived its budget (%ld ms) and was "
               "cancelled; its stock is given back", o->order_id, c->deduct_timeout_ms);
}

/* The deduct body: the client's, with order_id and qty set, user_id
 * dropped (guard, hold_ms and lock options pass through). */
static char *forward_body(struct order_req *o)
{
    json_object_set_new(o->forward, "order_id", json_string(o->order_id));
    if (!o->lines[0])          /* a cart's units are in its lines */
        json_object_set_new(o->forward, "qty", json_integer(o->qty));
    /* The client's user_id (when it gave one) goes with the sale: a SKU
     * with a purchase limit counts it against that buyer in the sale's own
     * transaction. Without one the inventory sees none (not "anonymous":
     * every anonymous order would share one quota). */
    return json_dumps(o->forward, JSON_COMPACT);
}

void order_place(const struct order_conf *c, struct order_req *o, struct http_resp *resp)
{
    char err[160];
    double deadline = o->started + (double)c->deduct_timeout_ms / 1000.0;
    long long budget = ms_left(deadline) > 0 ? ms_left(deadline) : 1;
    struct db_conn *db = db_thread_conn(&c->db);
    if (!db) {
        http_error(resp, 500, "internal", "out of memory");
        return;
    }
    long long n = order_store_begin(db, o->order_id, o->user_id, o->sku, o->qty, o->lines, "",
                                    budget);
    if (n == DB_EDUP && !answer_existing(db, o, budget, resp))
        return;
    if (n < 0 && n != DB_EDUP) {
        retry_later(resp);
        http_error(resp, 503, "backend_unavailable", "the order could not be recorded (%s); "
                   "nothing was taken", db->errstr);
        return;
    }
    char *body = o->pay_within_ms > 0 ? order_hold_body(o, err, sizeof(err)) : forward_body(o);
    struct invc_answer *a = malloc(sizeof(*a));
    if (o->pay_within_ms > 0 && !body) {
        order_store_fail(db, o->order_id);   /* nothing was sent */
        http_error(resp, 400, "bad_request", "%s", err);
        goto out;
    }
    if (!body || !a) {
        order_store_fail(db, o->order_id);   /* nothing was sent */
        http_error(resp, 500, "internal", "out of memory");
        goto out;
    }
    int used = 0, ambiguous = 0;
    const char *path = o->pay_within_ms > 0 ? "/inventory/reserve" : "/inventory/deduct";
    switch (deduct(c, path, body, deadline, a, &used, &ambiguous)) {
    case DEDUCT_UNREACHED:
        order_store_fail(db, o->order_id);   /* on error the reconciler finds no sale */
        http_error(resp, 502, "inventory_unreachable",
                   "no inventory instance answered (last: %s)", a->error);
        break;
    case DEDUCT_UNKNOWN:
        http_error(resp, 504, "inventory_timeout", "no inventory answered order %s within "
                   "its budget of %ld ms; it stays pending and, if it was sold, the "
                   "reconciler gives the stock back; repeat with the same order_id to learn "
                   "the outcome", o->order_id, c->deduct_timeout_ms);
        break;
    case DEDUCT_ANSWERED:
        if (a->status == 200 && o->pay_within_ms > 0)
            order_hold_finish(c, db, o, a, resp);
        else if (a->status == 200)
            finish_sale(c, db, o, a, used, resp);
        else {
            /* After an ambiguous attempt an earlier instance may still
             * sell: the reconciler settles the row after the deadline. */
            if (!ambiguous && sold_nothing(a))
                order_store_fail(db, o->order_id);
            else if (!ambiguous)
                release_now(c, db, o->order_id, used);   /* sold despite the error? */
            pass_through(a, resp);
        }
        break;
    }
out:
    free(a);
    free(body);
}
