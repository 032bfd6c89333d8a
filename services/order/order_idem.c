/* Idempotency keys of POST /orders (see order_idem.h). The key's row is
 * taken before the order is placed, so two requests with one key cannot
 * both place it; the order under a key is always the same order_id, so
 * even a key whose request died (lease over) or had no final answer (5xx)
 * is placed again only through the order flow's own repeat handling, which
 * never sells an order_id twice. */
#include "order_idem.h"

#include "order_store.h"

#include "base/db.h"
#include "base/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int order_idem_parse_key(const char *value, char *out, char *err, size_t errlen)
{
    size_t n = strlen(value);
    if (n >= 2 && value[0] == '"' && value[n - 1] == '"') {   /* an sf-string */
        value++;
        n -= 2;
    }
    if (n == 0 || n > ORDER_IDEM_KEY_MAX) {
        snprintf(err, errlen, "Idempotency-Key must be 1..%d bytes", ORDER_IDEM_KEY_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)value[i];
        if (ch < 0x21 || ch > 0x7e || ch == '"' || ch == '\\') {
            snprintf(err, errlen, "Idempotency-Key may hold only visible ASCII characters "
                     "other than '\"' and '\\' (byte %zu is 0x%02x)", i, ch);
            return -1;
        }
    }
    memcpy(out, value, n);
    out[n] = '\0';
    return 0;
}

char *order_idem_request(json_t *body, const char *x_guard)
{
    char *canon = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    if (!canon)
        return NULL;
    size_t len = strlen(canon) + strlen(x_guard ? x_guard : "") + 16;
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "%s\nX-Guard: %s", canon, x_guard ? x_guard : "");
    free(canon);
    return out;
}

/* A request that holds a key longer than this is taken for dead: its
 * order's budget plus the reconciler's margin, after which the order is
 * settled one way or the other. */
static long long lease_ms(const struct order_conf *c)
{
    return c->deduct_timeout_ms + c->reconcile_margin_ms + 1000;
}

static void count(const char *result)
{
    char labels[48];
    snprintf(labels, sizeof(labels), "result=\"%s\"", result);
    metrics_add("lab_order_idempotency_total", labels, 1);
}

static void db_down(struct db_conn *db, struct http_resp *resp)
{
    snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
    http_error(resp, 503, "backend_unavailable", "order database: %s; nothing was taken",
               db->errstr);
}

/* The key exists: answer from it (1), or leave o->order_id set to the
 * key's order for the caller to place again (0). */
static int answer_from_key(const struct order_conf *c, struct db_conn *db,
                           struct order_req *o, const char *key, const char *request,
                           struct http_resp *resp)
{
    struct order_key_row *k = malloc(sizeof(*k));
    if (!k) {
        http_error(resp, 500, "internal", "out of memory");
        return 1;
    }
    int answered = 1;
    long long n = order_store_key_get(db, key, request, k);
    if (n < 0)
        db_down(db, resp);
    else if (n == 0) {
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 409, "request_in_progress", "Idempotency-Key %s changed hands; "
                   "repeat the request", key);
    } else if (!k->same_request) {
        count("reused");
        http_error(resp, 422, "idempotency_key_reused", "Idempotency-Key %s was first used "
                   "with another request (body or X-Guard); use a new key", key);
    } else if (strcmp(k->state, "done") == 0) {
        count("replayed");
        http_text(resp, (int)k->answer_status, "application/json", strdup(k->answer));
    } else if ((strcmp(k->state, "open") == 0 || k->lease_over) &&
               (n = order_store_key_retake(db, key, lease_ms(c))) == 1) {
        snprintf(o->order_id, sizeof(o->order_id), "%s", k->order_id);
        answered = 0;
    } else if (n < 0)
        db_down(db, resp);
    else {
        count("in_progress");
        snprintf(resp->retry_after, sizeof(resp->retry_after), "1");
        http_error(resp, 409, "request_in_progress", "a request with Idempotency-Key %s is "
                   "still being processed; repeat it later to get its answer", key);
    }
    free(k);
    return answered;
}

/* Record the answer: a final one (below 500) is replayed from now on; a
 * 5xx leaves the key open, so a repeat places the same order again. */
static void finish_key(struct db_conn *db, const char *key, const struct http_resp *resp)
{
    long long n;
    if (resp->status < 500 && resp->text && strlen(resp->text) < ORDER_KEY_ANSWER_MAX)
        n = order_store_key_done(db, key, resp->status, resp->text);
    else
        n = order_store_key_open(db, key);
    if (n < 0)
        fprintf(stderr, "order: Idempotency-Key %s not finished (%s): it is free again "
                "once its lease ends\n", key, db->errstr);
}

void order_idem_place(const struct order_conf *c, struct order_req *o, const char *key,
                      const char *request, struct http_resp *resp)
{
    struct db_conn *db = db_thread_conn(&c->db);
    if (!db) {
        http_error(resp, 500, "internal", "out of memory");
        return;
    }
    long long n = order_store_key_take(db, key, request, o->order_id, lease_ms(c),
                                       ORDER_IDEM_KEEP_S);
    if (n == DB_EDUP && answer_from_key(c, db, o, key, request, resp))
        return;
    if (n < 0 && n != DB_EDUP) {
        db_down(db, resp);
        return;
    }
    count(n == DB_EDUP ? "retried" : "new");
    order_place(c, o, resp);
    finish_key(db, key, resp);
}
