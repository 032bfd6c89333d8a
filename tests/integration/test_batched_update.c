/* The `batched-update` guard (group commit): exact on two instances, a
 * batch larger than the stock split without an oversell, a repeated order
 * id inside one batch sold once, MariaDB lost mid-batch (503, nothing
 * counted twice), a lost COMMIT reply resolved for every member, and a
 * queued request whose deadline passes answered 503 and never sold. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int group_setup(void **state) { return it_setup(); }

static int restart_mysql(void **state)
{
    it_stack("start", "mysql");
    return 0;
}

/* One request of a concurrent wave. */
struct shot {
    char url[256];
    char body[320];
    const char *headers[2];
    char hdr[64];
    long delay_ms;             /* sent this long after the wave starts */
    long status;
    char error[48];            /* "error" of the answer, "" when none */
    int duplicate;             /* "duplicate": true */
    long long qty;
    double done_at;            /* monotonic seconds when the answer came */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *shoot(void *p)
{
    struct shot *s = p;
    if (s->delay_ms > 0)
        usleep((useconds_t)s->delay_ms * 1000);
    struct it_resp r;
    s->status = it_http_hdr("POST", s->url, s->body, s->hdr[0] ? s->headers : NULL, &r);
    s->done_at = now_s();
    snprintf(s->error, sizeof(s->error), "%s",
             json_string_value(json_object_get(r.json, "error")) ?: "");
    s->duplicate = json_is_true(json_object_get(r.json, "duplicate"));
    s->qty = json_integer_value(json_object_get(r.json, "qty"));
    it_resp_free(&r);
    return NULL;
}

/* Fire shots[0..n-1] at once (each after its delay) and wait for all. */
static void wave(struct shot *shots, int n)
{
    pthread_t th[64];
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) {
        shots[i].headers[0] = shots[i].hdr;
        shots[i].headers[1] = NULL;
        assert_int_equal(pthread_create(&th[i], NULL, shoot, &shots[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

static void aim(struct shot *s, int inst, const char *sku, const char *order_id, long qty,
                long hold_ms)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->url, sizeof(s->url), "%s/inventory/deduct", it.inventory[inst]);
    snprintf(s->body, sizeof(s->body),
             "{\"sku\":\"%s\",\"guard\":\"batched-update\",\"order_id\":\"%s\",\"qty\":%ld,"
             "\"hold_ms\":%ld}", sku, order_id, qty, hold_ms);
}

static long long ledger_rows(const char *order_id)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='%s'",
             order_id);
    return it_sql_value(sql);
}

static void assert_exact(const char *sku, long long sold)
{
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-10s sold %lld stock %lld oversold %lld lost %lld consistent %d\n", sku,
                  a.sold, a.stock, a.oversold, a.lost_updates, a.consistent);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    if (sold >= 0)
        assert_int_equal(a.sold, sold);
}

/* Stock 100, 1000 deductions from 32 connections over both instances:
 * exactly 100 sold, and requests were in fact combined. */
static void test_exact_on_two_instances(void **state)
{
    assert_int_equal(it_seed("B-exact", 100), 200);
    double n0 = it_metric(0, "lab_batch_size_count"), s0 = it_metric(0, "lab_batch_size_sum");
    static char urls[2][256];
    static const char *u[2] = {urls[0], urls[1]};
    for (int i = 0; i < 2; i++)
        snprintf(urls[i], sizeof(urls[i]), "%s/inventory/deduct", it.inventory[i]);
    struct it_load l = {.total = 1000, .clients = 32, .urls = u, .nurls = 2, .method = "POST",
                        .body_fmt = "{\"sku\":\"B-exact\",\"guard\":\"batched-update\","
                                    "\"order_id\":\"b-exact-%d\"}"};
    it_hammer(&l);
    print_message("200:%d 409:%d 503:%d\n", l.by_status[200], l.by_status[409],
                  l.by_status[503]);
    assert_int_equal(l.by_status[200], 100);
    assert_int_equal(l.by_status[409] + l.by_status[503], 900);
    assert_exact("B-exact", 100);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger "
                                  "WHERE sku='B-exact' AND guard='batched-update'"), 100);
    double n = it_metric(0, "lab_batch_size_count") - (n0 < 0 ? 0 : n0);
    double s = it_metric(0, "lab_batch_size_sum") - (s0 < 0 ? 0 : s0);
    print_message("instance 1: %.0f requests in %.0f batches (mean %.2f)\n", s, n,
                  n > 0 ? s / n : 0);
    assert_true(n > 0);
    assert_true(s > n);        /* at least one batch carried two or more */
}

/* --batch-inflight 2: the next batch of a SKU runs while the one before
 * commits, on one instance, next to a default instance: still exactly the
 * stock sold, every sale in the ledger once. */
static void test_exact_with_two_batches_in_flight(void **state)
{
    long port = it_port_base() + 34;
    static const char *const env[] = {"LAB_BATCH_INFLIGHT=2", NULL};
    static const char *const args[] = {"--threads", "16", NULL};
    int pid = it_start_inventory("inventory-batch-inflight", port, env, args);
    assert_true(pid > 0);
    assert_int_equal(it_seed("B-inflight", 300), 200);
    static char urls[3][256];
    static const char *u[3] = {urls[0], urls[1], urls[2]};
    snprintf(urls[0], sizeof(urls[0]), "http://127.0.0.1:%ld/inventory/deduct", port);
    snprintf(urls[1], sizeof(urls[1]), "http://127.0.0.1:%ld/inventory/deduct", port);
    snprintf(urls[2], sizeof(urls[2]), "%s/inventory/deduct", it.inventory[0]);
    struct it_load l = {.total = 1500, .clients = 32, .urls = u, .nurls = 3, .method = "POST",
                        .body_fmt = "{\"sku\":\"B-inflight\",\"guard\":\"batched-update\","
                                    "\"order_id\":\"b-inflight-%d\"}"};
    it_hammer(&l);
    it_stop_pid(pid);
    print_message("200:%d 409:%d 503:%d\n", l.by_status[200], l.by_status[409],
                  l.by_status[503]);
    assert_int_equal(l.by_status[200], 300);
    assert_int_equal(l.by_status[409] + l.by_status[503], 1200);
    assert_exact("B-inflight", 300);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger "
                                  "WHERE sku='B-inflight' AND guard='batched-update'"), 300);
}

/* Stock 5, 20 buyers at once on one instance while a sale holds the row:
 * they queue into one batch worth more than the stock. It is split: what
 * fits is sold, the rest answered out_of_stock, and the answers agree with
 * the ledger one by one. */
static void test_batch_larger_than_stock_is_split(void **state)
{
    assert_int_equal(it_seed("B-split", 6), 200);
    struct shot s[21];
    aim(&s[0], 0, "B-split", "b-split-hold", 1, 400);
    for (int i = 1; i <= 20; i++) {
        char id[32];
        snprintf(id, sizeof(id), "b-split-%d", i);
        aim(&s[i], 0, "B-split", id, i % 4 == 0 ? 3 : 1, 0);
        s[i].delay_ms = 100;   /* while the first holds the row */
    }
    wave(s, 21);
    assert_int_equal(s[0].status, 200);
    long long sold = 0;
    for (int i = 1; i <= 20; i++) {
        char id[32];
        snprintf(id, sizeof(id), "b-split-%d", i);
        long long rows = ledger_rows(id);
        if (s[i].status == 200) {
            assert_int_equal(rows, 1);
            sold += s[i].qty;
        } else {
            if (s[i].status != 409 || strcmp(s[i].error, "out_of_stock") != 0)
                fail_msg("%s: %ld %s", id, s[i].status, s[i].error);
            assert_int_equal(rows, 0);
        }
    }
    print_message("sold %lld of 5 after the holder\n", sold);
    assert_int_equal(sold, 5); /* 15 buyers of 1: the stock always fills */
    assert_exact("B-split", 6);
    /* Sold out now: a repeat of a sale still echoes it, a new order is 409. */
    struct shot again[2];
    aim(&again[0], 1, "B-split", "b-split-hold", 1, 0);
    aim(&again[1], 1, "B-split", "b-split-new", 1, 0);
    wave(again, 2);
    assert_int_equal(again[0].status, 200);
    assert_true(again[0].duplicate);
    assert_int_equal(again[1].status, 409);
    assert_string_equal(again[1].error, "out_of_stock");
    assert_exact("B-split", 6);
}

/* One order id sent 8 times at once, 4 with qty 1 and 4 with qty 2, all
 * queued behind a holder so they land in one batch: one sale; the repeats
 * of its quantity echo it, the others are order_id_conflict. */
static void test_duplicate_order_id_in_one_batch(void **state)
{
    assert_int_equal(it_seed("B-dup", 10), 200);
    struct shot s[9];
    aim(&s[0], 0, "B-dup", "b-dup-hold", 1, 400);
    for (int i = 1; i <= 8; i++) {
        aim(&s[i], 0, "B-dup", "b-dup-1", i % 2 ? 1 : 2, 0);
        s[i].delay_ms = 100;
    }
    wave(s, 9);
    assert_int_equal(s[0].status, 200);
    assert_int_equal(ledger_rows("b-dup-1"), 1);
    long long qty = it_sql_value("SELECT qty FROM db_shopping.ledger WHERE order_id='b-dup-1'");
    int sold = 0, echo = 0, conflict = 0;
    for (int i = 1; i <= 8; i++) {
        long q = i % 2 ? 1 : 2;
        if (q == qty && s[i].status == 200) {
            sold += !s[i].duplicate;
            echo += s[i].duplicate;
        } else if (q != qty && s[i].status == 409 &&
                   strcmp(s[i].error, "order_id_conflict") == 0) {
            conflict++;
        } else {
            fail_msg("request %d (qty %ld, sold qty %lld): %ld %s", i, q, qty, s[i].status,
                     s[i].error);
        }
    }
    print_message("sold %d, echoed %d, conflicts %d\n", sold, echo, conflict);
    assert_int_equal(sold, 1);
    assert_int_equal(echo, 3);
    assert_int_equal(conflict, 4);
    assert_exact("B-dup", 1 + qty);
    /* The same order id naming a SKU that does not exist: still the
     * order id's conflict, as guard_deduct's ledger check answers it. */
    struct shot other;
    aim(&other, 1, "B-dup-none", "b-dup-1", 1, 0);
    wave(&other, 1);
    assert_int_equal(other.status, 409);
    assert_string_equal(other.error, "order_id_conflict");
}

/* Stock 3, order b-rep-1 sold (stock 2); behind a holder
 * (stock 1 after it), a repeat of b-rep-1 and a new order queue into one
 * batch, the repeat first. The repeat is the first sale's echo and takes
 * nothing; the new order must get the unit that remains, never
 * out_of_stock ("has 0 left") while stock 1 is there. */
static void test_repeat_in_batch_does_not_starve_the_next(void **state)
{
    assert_int_equal(it_seed("B-rep", 3), 200);
    struct shot first;
    aim(&first, 0, "B-rep", "b-rep-1", 1, 0);
    wave(&first, 1);
    assert_int_equal(first.status, 200);
    struct shot s[3];
    aim(&s[0], 0, "B-rep", "b-rep-hold", 1, 600);
    aim(&s[1], 0, "B-rep", "b-rep-1", 1, 0);
    s[1].delay_ms = 150;       /* queued behind the holder, first in the batch */
    aim(&s[2], 0, "B-rep", "b-rep-new", 1, 0);
    s[2].delay_ms = 300;
    wave(s, 3);
    print_message("holder %ld %s; repeat %ld%s; new %ld %s\n", s[0].status, s[0].error,
                  s[1].status, s[1].duplicate ? " (duplicate)" : "", s[2].status, s[2].error);
    assert_int_equal(s[0].status, 200);
    assert_int_equal(s[1].status, 200);
    assert_true(s[1].duplicate);
    assert_int_equal(s[2].status, 200);
    assert_int_equal(ledger_rows("b-rep-new"), 1);
    assert_exact("B-rep", 3);
}

struct wave_arg {
    struct shot *shots;
    int n;
};

static void *wave_thread(void *p)
{
    struct wave_arg *w = p;
    wave(w->shots, w->n);
    return NULL;
}

/* MariaDB stops while a batch holds the row (hold_ms): every member is
 * answered 503 and nothing is written; once it is back, the same order
 * ids sell exactly once each. */
static void test_mysql_lost_mid_batch(void **state)
{
    assert_int_equal(it_seed("B-down", 20), 200);
    struct shot s[8];
    for (int i = 0; i < 8; i++) {
        char id[32];
        snprintf(id, sizeof(id), "b-down-%d", i);
        aim(&s[i], i % 2, "B-down", id, 1, i < 2 ? 2500 : 0);
        s[i].delay_ms = i < 2 ? 0 : 200;
    }
    struct wave_arg w = {s, 8};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wave_thread, &w), 0);
    usleep(900 * 1000);        /* the first batch holds the row for 2.5 s */
    assert_int_equal(it_stack("stop", "mysql"), 0);
    pthread_join(th, NULL);
    for (int i = 0; i < 8; i++)
        if (s[i].status != 503)
            fail_msg("b-down-%d with MariaDB stopped mid-batch: %ld %s", i, s[i].status,
                     s[i].error);
    assert_int_equal(it_stack("start", "mysql"), 0);
    char h[256];
    for (int i = 0; i < 2; i++) {
        snprintf(h, sizeof(h), "%s/healthz", it.inventory[i]);
        assert_int_equal(it_wait_status(h, 200, 30000), 0);
    }
    for (int i = 0; i < 8; i++) {
        char id[32];
        snprintf(id, sizeof(id), "b-down-%d", i);
        assert_int_equal(ledger_rows(id), 0);
        aim(&s[i], i % 2, "B-down", id, 1, 0);
    }
    wave(s, 8);
    for (int i = 0; i < 8; i++) {
        if (s[i].status != 200 || s[i].duplicate)
            fail_msg("b-down-%d after MariaDB returned: %ld %s dup %d", i, s[i].status,
                     s[i].error, s[i].duplicate);
    }
    wave(s, 8);                /* repeated: echoes, nothing sold twice */
    for (int i = 0; i < 8; i++)
        assert_true(s[i].status == 200 && s[i].duplicate);
    assert_exact("B-down", 8);
}

/* Every second COMMIT of an instance loses its reply (applied, then the
 * connection drops): each batch resolves it through the ledger, once for
 * all its members, and every answer agrees with the ledger. */
static void test_lost_commit_resolved_for_every_member(void **state)
{
    long port = it_port_base() + 33;
    static const char *const env[] = {"LAB_FAULT_COMMIT_LOST=2", NULL};
    static const char *const args[] = {"--threads", "8", NULL};
    int pid = it_start_inventory("inventory-batch-lost", port, env, args);
    assert_true(pid > 0);
    assert_int_equal(it_seed("B-lost", 100), 200);
    int ok = 0, refused = 0;
    for (int round = 0; round < 4; round++) {
        struct shot s[8];
        for (int i = 0; i < 8; i++) {
            char id[32];
            snprintf(id, sizeof(id), "b-lost-%d-%d", round, i);
            aim(&s[i], 0, "B-lost", id, 1, 0);
            snprintf(s[i].url, sizeof(s[i].url), "http://127.0.0.1:%ld/inventory/deduct",
                     port);
        }
        wave(s, 8);
        for (int i = 0; i < 8; i++) {
            char id[32];
            snprintf(id, sizeof(id), "b-lost-%d-%d", round, i);
            long long rows = ledger_rows(id);
            if (s[i].status == 200) {
                ok++;
                assert_int_equal(rows, 1);
            } else {
                refused++;
                if (s[i].status != 503 || rows != 0)
                    fail_msg("%s: %ld %s, ledger rows %lld", id, s[i].status, s[i].error,
                             rows);
            }
        }
    }
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/metrics", port);
    struct it_resp r;
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    int resolved = strstr(r.body, "lab_commit_lost_total{resolved=\"applied\"}") != NULL;
    it_resp_free(&r);
    it_stop_pid(pid);
    print_message("200: %d, 503: %d, lost commits resolved: %s\n", ok, refused,
                  resolved ? "yes" : "no");
    assert_true(resolved);
    assert_exact("B-lost", ok);
}

/* A request queued behind a committing batch whose deadline passes is
 * taken out of the queue before any write: 503 deadline_exceeded when its
 * deadline passes (before the holder commits), not in the ledger; the
 * batch it left still sells. */
static void test_deadline_while_queued(void **state)
{
    assert_int_equal(it_seed("B-late", 10), 200);
    struct shot s[3];
    aim(&s[0], 0, "B-late", "b-late-hold", 1, 1500);
    aim(&s[1], 0, "B-late", "b-late-next", 1, 0);
    s[1].delay_ms = 150;
    aim(&s[2], 0, "B-late", "b-late-short", 1, 0);
    s[2].delay_ms = 250;
    snprintf(s[2].hdr, sizeof(s[2].hdr), "X-Deadline-Ms: 400");
    wave(s, 3);
    assert_int_equal(s[0].status, 200);
    assert_int_equal(s[1].status, 200);
    assert_int_equal(s[2].status, 503);
    assert_string_equal(s[2].error, "deadline_exceeded");
    assert_true(s[2].done_at < s[0].done_at);   /* not held until the batch ran */
    assert_int_equal(ledger_rows("b-late-short"), 0);
    assert_exact("B-late", 2);
}

/* MariaDB drops the service's idle connections (a restart, wait_timeout,
 * a KILL) while MySQL itself stays up: the next batched sales must still
 * sell, on fresh connections. The first statement of a batched-update
 * request is the session's lock wait (it skips the ledger read other
 * guards start with), so every worker is first made to run one with
 * lock_wait_ms 1000, then the requests after the drop ask for 3000: each
 * worker's first statement on its dead connection is that SET. (This is
 * how test_repeat_in_batch_does_not_starve_the_next's holder once got a
 * 503 right after test_api restarted MariaDB.) */
static void test_dropped_idle_connections_still_sell(void **state)
{
    char user[64];
    assert_int_equal(it_stack_env("APP_DB_USER", user, sizeof(user)), 0);
    assert_int_equal(it_seed("B-drop", 1000), 200);
    struct shot s[48];
    for (int i = 0; i < 48; i++) {
        char id[32];
        snprintf(id, sizeof(id), "b-drop-a%d", i);
        aim(&s[i], 0, "B-drop", id, 1, 50);
        snprintf(s[i].body, sizeof(s[i].body),
                 "{\"sku\":\"B-drop\",\"guard\":\"batched-update\",\"order_id\":\"%s\","
                 "\"lock_wait_ms\":1000,\"hold_ms\":50}", id);
    }
    wave(s, 48);               /* every worker busy at once: each runs one */
    for (int i = 0; i < 48; i++)
        assert_int_equal(s[i].status, 200);
    /* Drop every service connection at once (one client run), well within
     * the 2 s after which a worker would ping an idle connection first. */
    char q[768];
    snprintf(q, sizeof(q), "SELECT COUNT(*) FROM information_schema.processlist WHERE user='%s'",
             user);
    long long killed = it_sql_value(q);
    snprintf(q, sizeof(q),
             "mariadb --no-defaults -h127.0.0.1 -P%ld -uroot -N -B -e \"SELECT CONCAT('KILL "
             "CONNECTION ', id, ';') FROM information_schema.processlist WHERE user='%s'\" "
             "| mariadb --no-defaults -h127.0.0.1 -P%ld -uroot --force >/dev/null 2>&1",
             it.mysql_port, user, it.mysql_port);
    assert_int_equal(system(q), 0);
    assert_true(killed > 0);
    int ok = 0;
    for (int i = 0; i < 32; i++) {
        char oid[32];
        snprintf(oid, sizeof(oid), "b-drop-b%d", i);
        aim(&s[i], 0, "B-drop", oid, 1, 50);
    }
    wave(s, 32);
    for (int i = 0; i < 32; i++) {
        ok += s[i].status == 200;
        if (s[i].status != 200)
            print_message("b-drop-b%d: %ld %s\n", i, s[i].status, s[i].error);
    }
    print_message("%lld service connections dropped; then %d of 32 sold\n", killed, ok);
    assert_int_equal(ok, 32);
    assert_exact("B-drop", 48 + 32);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_repeat_in_batch_does_not_starve_the_next),
    cmocka_unit_test(test_exact_on_two_instances),
    cmocka_unit_test(test_exact_with_two_batches_in_flight),
    cmocka_unit_test(test_batch_larger_than_stock_is_split),
    cmocka_unit_test(test_duplicate_order_id_in_one_batch),
    cmocka_unit_test(test_deadline_while_queued),
    cmocka_unit_test(test_lost_commit_resolved_for_every_member),
    cmocka_unit_test(test_dropped_idle_connections_still_sell),
    cmocka_unit_test_teardown(test_mysql_lost_mid_batch, restart_mysql),
};

int main(void) { return cmocka_run_group_tests(tests, group_setup, NULL); }
