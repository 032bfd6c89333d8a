/* rawdb: the raw MariaDB hot-row rate of a guard's statements, with no HTTP
 * and no service in between: N threads, each its own connection (lib/base/db.h),
 * all deducting one unit at a time from the same row for a fixed duration,
 * each deduction a transaction with its ledger row, through the very
 * statements the guards run (lib/stock/store.c).
 * `make bench` prints it next to the HTTP rate: their ratio is what the
 * service costs on top of the database. */
#include "base/config.h"
#include "base/db.h"
#include "base/util.h"
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
};

#define S(f) offsetof(struct rawdb_conf, f), sizeof(((struct rawdb_conf *)0)->f)
#define N(f) offsetof(struct rawdb_conf, f), 0

static const struct cfg_opt rawdb_options[] = {
    {"mode", "RAWDB_MODE", CFG_STR, "conditional-update", 0, 0, S(mode),
     "conditional-update (UPDATE .. WHERE stock>=1; SELECT; ledger INSERT) or "
     "for-update (SELECT .. FOR UPDATE; UPDATE; ledger INSERT)"},
    {"threads", "RAWDB_THREADS", CFG_INT, "16", 1, 1000, N(threads), "threads, one connection each"},
    {"duration", "RAWDB_DURATION", CFG_MS, "5s", 100, 3600000, N(duration_ms), "how long to run"},
    {"sku", "RAWDB_SKU", CFG_STR, "RAWDB-BENCH", 0, 0, S(sku), "row to hammer (seeded, then removed)"},
    {"max-retries", "RAWDB_MAX_RETRIES", CFG_INT, "50", 0, 10000, N(max_retries), "deadlock retries per deduction"},
    DB_CFG_OPTIONS(struct rawdb_conf, db, "db_shopping", "inventory schema"),
};
#define RAWDB_NOPTS (sizeof(rawdb_options) / sizeof(rawdb_options[0]))

#define RAWDB_STOCK 1000000000000LL   /* never runs out during a run */

struct rawdb_worker {
    pthread_t tid;
    const struct rawdb_conf *conf;
    int index;
    int for_update;
    double deadline;
    long long ops, retries, errors;
    char errstr[160];   /* room for "connect: " + db_conn.errstr */
};

/* One deduction as the guards run it. Returns DB_OK, DB_ERETRY or an error. */
static int deduct_once(struct db_conn *c, const struct rawdb_conf *conf, int for_update,
                       const char *order_id)
{
    long long n, stock = 0, version = 0;
    if ((n = db_begin(c)) < 0)
        goto fail;
    if (for_update) {
        n = store_read(c, conf->sku, 1, &stock, &version);
        if (n <= 0)
            goto fail_n;
        if ((n = store_set_stock(c, conf->sku, stock - 1)) < 0)
            goto fail;
        stock -= 1;
    } else {
        n = store_take_if_enough(c, conf->sku, 1);
        if (n <= 0)
            goto fail_n;
        n = store_read(c, conf->sku, 0, &stock, &version);
        if (n <= 0)
            goto fail_n;
    }
    if ((n = store_ledger_insert(c, order_id, conf->sku, 1, stock, conf->mode, "rawdb")) < 0 ||
        (n = db_commit(c)) < 0)
        goto fail;
    return DB_OK;
fail_n:
    if (n == 0)
        n = DB_ERR;   /* row missing or out of stock: the seed went wrong */
fail:
    db_rollback(c);
    return (int)n;
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
    while (util_now() < w->deadline) {
        snprintf(order_id, sizeof(order_id), "raw-%ld-%d-%lld", (long)getpid(), w->index, seq++);
        int rc = DB_ERETRY;
        for (long attempt = 0; rc == DB_ERETRY && attempt <= w->conf->max_retries; attempt++) {
            rc = deduct_once(c, w->conf, w->for_update, order_id);
            if (rc == DB_ERETRY)
                w->retries++;
        }
        if (rc == DB_OK) {
            w->ops++;
        } else {
            w->errors++;
            snprintf(w->errstr, sizeof(w->errstr), "%s", c->errstr);
            if (db_ensure(c) != DB_OK)
                util_sleep_ms(50);
        }
    }
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
    if (rc != CFG_OK) {
        fprintf(stderr, "rawdb: %s\n", err);
        return 2;
    }
    int for_update;
    if (strcmp(conf.mode, "conditional-update") == 0)
        for_update = 0;
    else if (strcmp(conf.mode, "for-update") == 0)
        for_update = 1;
    else {
        fprintf(stderr, "rawdb: --mode must be conditional-update or for-update\n");
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
        w[i] = (struct rawdb_worker){.conf = &conf, .index = (int)i, .for_update = for_update,
                                     .deadline = deadline};
        if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0)
            break;
        started++;
    }
    long long ops = 0, retries = 0, errors = 0;
    const char *last_err = "";
    for (long i = 0; i < started; i++) {
        pthread_join(w[i].tid, NULL);
        ops += w[i].ops;
        retries += w[i].retries;
        errors += w[i].errors;
        if (w[i].errstr[0])
            last_err = w[i].errstr;
    }
    double secs = util_now() - t0;
    long long sold = -1;
    long long initial, stock;
    store_audit(admin, conf.sku, &initial, &stock, &sold);   /* qty 1 each: units = rows */
    printf("rawdb mode=%s threads=%ld seconds=%.2f ops=%lld ops_per_s=%.1f retries=%lld "
           "errors=%lld ledger_rows=%lld%s%s\n",
           conf.mode, started, secs, ops, secs > 0 ? (double)ops / secs : 0.0, retries, errors,
           sold, errors ? " last_error=" : "", errors ? last_err : "");
    store_remove(admin, conf.sku);
    db_free(admin);
    free(w);
    db_global_end();
    return started == conf.threads && ops > 0 ? 0 : 1;
}
