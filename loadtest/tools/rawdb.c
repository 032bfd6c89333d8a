/* rawdb: the raw MariaDB hot-row rate of a guard's statements, with no HTTP
 * and no service in between: N threads, each its own connection (lib/base/db.h),
 * all deducting one unit at a time from the same row for a fixed duration.
 * Each deduction is the guard's own code path (guard_deduct, the entry the
 * service calls: the ledger check when the guard wants it, the session's
 * lock wait, the guard's transaction with its ledger row, durable COMMIT),
 * so the statements are the service's by construction, not a copy of them.
 * It also counts them: statements per sale from each connection's
 * session Questions (`make bench` prints the service's next to it).
 * `make bench` prints the rate next to the HTTP rate: their ratio is what
 * the service (HTTP, parsing, the hand-off) costs on top of the database. */
#include "base/config.h"
#include "base/db.h"
#include "base/util.h"
#include "guards/guard.h"
#include "stock/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rawdb_conf {
    struct db_conf db;
    char mode[32];
    char sku[64];
    long threads;
    long duration_ms;
    long max_retries;
    long lock_wait_ms;
};

#define S(f) offsetof(struct rawdb_conf, f), sizeof(((struct rawdb_conf *)0)->f)
#define N(f) offsetof(struct rawdb_conf, f), 0

static const struct cfg_opt rawdb_options[] = {
    {"mode", "RAWDB_MODE", CFG_STR, "conditional-update", 0, 0, S(mode),
     "the guard whose deductions to run: a MySQL-only guard (none, mutex, optimistic, "
     "for-update, conditional-update, batched-update)"},
    {"threads", "RAWDB_THREADS", CFG_INT, "16", 1, 1000, N(threads), "threads, one connection each"},
    {"duration", "RAWDB_DURATION", CFG_MS, "5s", 100, 3600000, N(duration_ms), "how long to run"},
    {"sku", "RAWDB_SKU", CFG_STR, "RAWDB-BENCH", 0, 0, S(sku), "row to hammer (seeded, then removed)"},
    {"max-retries", "RAWDB_MAX_RETRIES", CFG_INT, "50", 0, 10000, N(max_retries),
     "retry bound of a deduction (the service's --max-retries)"},
    {"lock-wait", "RAWDB_LOCK_WAIT_MS", CFG_MS, "3000", 0, 60000, N(lock_wait_ms),
     "lock_wait_ms of every deduction (the service's --lock-wait)"},
    DB_CFG_OPTIONS(struct rawdb_conf, db, "db_shopping", "inventory schema"),
};
#define RAWDB_NOPTS (sizeof(rawdb_options) / sizeof(rawdb_options[0]))

#define RAWDB_STOCK 1000000000000LL   /* never runs out during a run */

/* Room past lock_wait_ms for a sale's round trips: the service's
 * DEADLINE_MARGIN_MS (services/inventory), so retries stop where its do. */
#define RAWDB_DEADLINE_MARGIN_MS 1000

struct rawdb_worker {
    pthread_t tid;
    const struct rawdb_conf *conf;
    const struct guard *g;
    int index;
    double deadline;
    long long ops, errors, statements;
    char errstr[200];
};

/* The statements this connection sent so far (its session Questions;
 * the SHOW itself counts one). Returns -1 when it cannot be read. */
static long long session_questions(struct db_conn *c)
{
    long long q = -1;
    if (!c->my || mysql_query(c->my, "SHOW SESSION STATUS LIKE 'Questions'") != 0)
        return -1;
    MYSQL_RES *r = mysql_store_result(c->my);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    if (row && row[1])
        q = atoll(row[1]);
    if (r)
        mysql_free_result(r);
    return q;
}

/* One sale as the service makes it: guard_deduct with the request the
 * service would build from {"sku","order_id","guard"} (qty 1, hold_ms 0,
 * the default lock wait, the same deadline). */
static void sell_one(struct db_conn *c, const struct rawdb_worker *w, const char *order_id,
                     struct deduct_res *res)
{
    const struct rawdb_conf *conf = w->conf;
    struct deduct_req req;
    memset(&req, 0, sizeof(req));
    snprintf(req.sku, sizeof(req.sku), "%s", conf->sku);
    snprintf(req.order_id, sizeof(req.order_id), "%s", order_id);
    req.qty = 1;
    req.lock_wait_ms = conf->lock_wait_ms;
    req.deadline = util_now() + (double)(conf->lock_wait_ms + RAWDB_DEADLINE_MARGIN_MS) / 1000.0;
    struct deduct_env env = {.db = c, .instance = "rawdb", .max_retries = conf->max_retries,
                             .default_wait_ms = conf->lock_wait_ms};
    guard_deduct(w->g, &env, &req, res);
}

static void *worker_main(void *arg)
{
    struct rawdb_worker *w = arg;
    struct db_conn *c = db_connect(&w->conf->db);
    if (!c || !c->my) {
        snprintf(w->errstr, sizeof(w->errstr), "connect: %s", c ? c->errstr : "out of memory");
        w->errors++;
        db_free(c);
        return NULL;
    }
    char order_id[64];
    long long seq = 0;
    long long q0 = session_questions(c);
    struct deduct_res res;
    while (util_now() < w->deadline) {
        snprintf(order_id, sizeof(order_id), "raw-%ld-%d-%lld", (long)getpid(), w->index, seq++);
        sell_one(c, w, order_id, &res);
        if (res.outcome == DEDUCT_SOLD) {
            w->ops++;
        } else {
            w->errors++;
            snprintf(w->errstr, sizeof(w->errstr), "%s: %.160s",
                     deduct_outcome_info(res.outcome)->name, res.detail);
            if (db_ensure(c) != DB_OK)
                util_sleep_ms(50);
        }
    }
    long long q1 = session_questions(c);
    w->statements = q0 >= 0 && q1 >= 0 ? q1 - q0 - 1 : -1;
    db_free(c);
    return NULL;
}

static int seed(struct db_conn *c, const struct rawdb_conf *conf)
{
    if (db_begin(c) < 0)
        return -1;
    if (store_seed(c, conf->sku, RAWDB_STOCK, 0) < 0) {
        db_rollback(c);
        return -1;
    }
    return db_commit(c) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct rawdb_conf conf;
    char err[256];
    memset(&conf, 0, sizeof(conf));
    int rc = cfg_parse(rawdb_options, RAWDB_NOPTS, &conf, argc, argv,
                       "Raw MariaDB hot-row deduction rate (no HTTP): N threads, one row.",
                       err, sizeof(err));
    if (rc == CFG_HELP)
        return 0;
    if (rc == CFG_OK && db_conf_check(&conf.db, err, sizeof(err)) != DB_OK)
        rc = CFG_ERR;
    if (rc != CFG_OK) {
        fprintf(stderr, "rawdb: %s\n", err);
        return 2;
    }
    /* MySQL-only guards: their whole deduction is MySQL statements (and,
     * for mutex and batched-update, this process's own threads). */
    static const char *const mysql_only[] = {"none", "mutex", "optimistic", "for-update",
                                             "conditional-update", "batched-update"};
    const struct guard *g = NULL;
    for (size_t i = 0; i < sizeof(mysql_only) / sizeof(mysql_only[0]); i++)
        if (strcmp(conf.mode, mysql_only[i]) == 0)
            g = guard_find(conf.mode);
    if (!g) {
        fprintf(stderr, "rawdb: --mode must be one of none, mutex, optimistic, for-update, "
                        "conditional-update, batched-update\n");
        return 2;
    }
    if (db_global_init() != 0) {
        fprintf(stderr, "rawdb: mysql_library_init failed\n");
        return 1;
    }
    struct db_conn *admin = db_connect(&conf.db);
    if (!admin || !admin->my || seed(admin, &conf) != 0) {
        fprintf(stderr, "rawdb: cannot seed %s on %s:%ld: %s\n", conf.sku, conf.db.host,
                conf.db.port, admin ? admin->errstr : "out of memory");
        db_free(admin);
        db_global_end();
        return 1;
    }

    struct rawdb_worker *w = calloc((size_t)conf.threads, sizeof(*w));
    if (!w) {
        db_free(admin);
        db_global_end();
        return 1;
    }
    double t0 = util_now();
    double deadline = t0 + (double)conf.duration_ms / 1000.0;
    long started = 0;
    for (long i = 0; i < conf.threads; i++) {
        w[i] = (struct rawdb_worker){.conf = &conf, .g = g, .index = (int)i,
                                     .deadline = deadline};
        if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0)
            break;
        started++;
    }
    long long ops = 0, errors = 0, statements = 0;
    const char *last_err = "";
    for (long i = 0; i < started; i++) {
        pthread_join(w[i].tid, NULL);
        ops += w[i].ops;
        if (statements >= 0)
            statements = w[i].statements < 0 ? -1 : statements + w[i].statements;
        errors += w[i].errors;
        if (w[i].errstr[0])
            last_err = w[i].errstr;
    }
    double secs = util_now() - t0;
    long long sold = -1;
    long long initial, stock;
    store_audit(admin, conf.sku, &initial, &stock, &sold);   /* qty 1 each: units = rows */
    char per_sale[32] = "n/a";
    if (statements >= 0 && ops > 0)
        snprintf(per_sale, sizeof(per_sale), "%.2f", (double)statements / (double)ops);
    printf("rawdb mode=%s threads=%ld seconds=%.2f ops=%lld ops_per_s=%.1f "
           "statements_per_sale=%s errors=%lld ledger_rows=%lld%s%s\n",
           conf.mode, started, secs, ops, secs > 0 ? (double)ops / secs : 0.0, per_sale,
           errors, sold, errors ? " last_error=" : "", errors ? last_err : "");
    store_remove(admin, conf.sku);
    db_free(admin);
    free(w);
    db_global_end();
    return started == conf.threads && ops > 0 ? 0 : 1;
}
