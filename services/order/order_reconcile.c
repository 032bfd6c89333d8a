/* Compensation and the reconciler (see order_reconcile.h). A pending row is
 * released only once its deadline plus a margin has passed: by then every
 * inventory has finished or given up on the deduction (X-Deadline-Ms), so
 * a release cannot overtake a sale still in flight. */
#include "order_reconcile.h"

#include "inventory_client.h"
#include "order_store.h"

#include "base/db.h"
#include "base/metrics.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int stopping;   /* read between rows, so a stop need not wait a batch */

static void count(const char *result)
{
    char labels[48];
    snprintf(labels, sizeof(labels), "result=\"%s\"", result);
    metrics_add("lab_order_releases_total", labels, 1);
}

/* One release round over the instances: ORDER_CANCELLED on 200 (released
 * now or before), ORDER_FAILED on 404 unknown_order, else ORDER_UNSETTLED. */
static enum order_settled call_release(const struct order_conf *c, const char *order_id,
                                       int first)
{
    json_t *j = json_pack("{s:s}", "order_id", order_id);
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        return ORDER_UNSETTLED;
    char auth[160];
    const char *hdrs[] = {auth, NULL};
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->admin_token);
    struct invc_answer *a = malloc(sizeof(*a));
    enum order_settled out = ORDER_UNSETTLED;
    for (int i = 0; a && i < c->nurls && out == ORDER_UNSETTLED; i++) {
        int k = (first + i) % c->nurls;
        if (invc_call(c->urls[k], "/inventory/release", body,
                      c->admin_token[0] ? hdrs : NULL, c->inventory_timeout_ms,
                      c->connect_timeout_ms, a) != 0) {
            fprintf(stderr, "order: release %s on %s: %s\n", order_id, c->urls[k], a->error);
            continue;
        }
        json_t *ans = json_loads(a->body, 0, NULL);
        const char *code = json_string_value(json_object_get(ans, "error"));
        if (a->status == 200)
            out = ORDER_CANCELLED;
        else if (a->status == 404 && code && strcmp(code, "unknown_order") == 0)
            out = ORDER_FAILED;
        else
            fprintf(stderr, "order: release %s on %s answered %ld %.200s\n", order_id,
                    c->urls[k], a->status, a->body);
        json_decref(ans);
    }
    free(a);
    free(body);
    return out;
}

/* order_release, the row becoming `released_as` when the inventory gave the
 * stock back ("cancelled"; "expired" for an unpaid hold). */
static enum order_settled release_as(const struct order_conf *c, struct db_conn *db,
                                     const char *order_id, int first, const char *released_as)
{
    enum order_settled s = call_release(c, order_id, first);
    if (s == ORDER_UNSETTLED) {
        count("error");
        return s;
    }
    const char *status = s == ORDER_CANCELLED ? released_as : "failed";
    /* 0 rows: another reconciler recorded the same outcome first. */
    if (order_store_settle(db, order_id, status) < 0) {
        fprintf(stderr, "order: %s released but not marked %s (%s); the reconciler will "
                "release it again, which changes nothing\n", order_id, status, db->errstr);
        count("error");
        return ORDER_UNSETTLED;
    }
    count(status);
    return s;
}

enum order_settled order_release(const struct order_conf *c, struct db_conn *db,
                                 const char *order_id, int first)
{
    return release_as(c, db, order_id, first, "cancelled");
}

int order_reconcile_once(const struct order_conf *c, struct db_conn *db)
{
    char after[STOCK_ID_MAX + 1] = "", id[STOCK_ID_MAX + 1], status[17];
    int seen = 0;
    while (seen < c->reconcile_batch && !atomic_load(&stopping)) {
        long long n = order_store_next_unsettled(db, after, c->reconcile_margin_ms, id,
                                                 sizeof(id), status, sizeof(status));
        if (n < 0)
            return seen ? seen : -1;
        if (n == 0)
            break;
        seen++;
        snprintf(after, sizeof(after), "%s", id);   /* a failed row is not retried this tick */
        if (strcmp(status, "pending") == 0 &&
            order_store_claim(db, id, c->reconcile_margin_ms) != 1)
            continue;                                /* placed or claimed meanwhile */
        /* an unpaid hold: its payment deadline passed; the release gives the
         * hold back (or finds it swept already) */
        int unpaid = strcmp(status, "awaiting_payment") == 0;
        if (unpaid && order_store_claim_unpaid(db, id, c->reconcile_margin_ms) != 1)
            continue;                                /* paid or claimed meanwhile */
        enum order_settled s = release_as(c, db, id, 0, unpaid ? "expired" : "cancelled");
        fprintf(stderr, "order: reconciler: %s %s\n", id,
                s == ORDER_CANCELLED ? (unpaid ? "hold given back (expired)"
                                                : "released (cancelled)")
                : s == ORDER_FAILED  ? "had no sale (failed)"
                                     : "not settled yet, retried next tick");
    }
    return seen;
}

static pthread_t thread;
static int started;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;

static void *reconcile_main(void *arg)
{
    const struct order_conf *c = arg;
    int warned = 0;
    pthread_mutex_lock(&mu);
    while (!atomic_load(&stopping)) {
        pthread_mutex_unlock(&mu);
        struct db_conn *db = db_thread_conn(&c->db);
        int rc = db && db->my ? order_reconcile_once(c, db) : -1;
        if (rc >= 0)   /* keys past their day; a failure is tried again next tick */
            order_store_key_purge(db, c->reconcile_batch);
        if (rc < 0 && !warned)
            fprintf(stderr, "order: reconciler cannot read db_order (%s); retrying every "
                    "%ld ms\n", db ? db->errstr : "out of memory", c->reconcile_ms);
        warned = rc < 0;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += c->reconcile_ms / 1000;
        until.tv_nsec += (c->reconcile_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&mu);
        while (!atomic_load(&stopping) && pthread_cond_timedwait(&wake, &mu, &until) == 0)
            ;   /* woken without a stop request: keep the period */
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int order_reconcile_start(const struct order_conf *c, char *err, size_t errlen)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0 ||
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&wake, &attr) != 0) {
        snprintf(err, errlen, "reconciler: cannot set up its timer");
        return -1;
    }
    pthread_condattr_destroy(&attr);
    atomic_store(&stopping, 0);
    if (pthread_create(&thread, NULL, reconcile_main, (void *)c) != 0) {
        pthread_cond_destroy(&wake);
        snprintf(err, errlen, "reconciler: cannot start its thread");
        return -1;
    }
    started = 1;
    return 0;
}

void order_reconcile_stop(void)
{
    if (!started)
        return;
    pthread_mutex_lock(&mu);
    atomic_store(&stopping, 1);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    pthread_cond_destroy(&wake);
    started = 0;
}
