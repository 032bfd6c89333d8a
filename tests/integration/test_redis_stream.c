/* The redis-stream write-behind guard. A sale is answered once
 * Redis has it (stock decremented and the sale appended to a stream, in one
 * script); flushers in the inventory instances move the stream into MySQL.
 * Every answered sale must reach the ledger exactly once: across two
 * instances, with an instance killed while holding unflushed sales, with
 * Redis killed (its append-only file keeps them), and with MariaDB down
 * (the stream backs up and drains when it returns). All waits are bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DRAIN_MS 40000          /* claim idle (tests/run) + retries, whatever the build */
#define G "\"guard\":\"redis-stream\""

static int group_setup(void **state) { return it_setup(); }

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long long redis_stock(const char *sku) { return it_redis_num("GET sstock:{%s}", sku); }

/* Unflushed sales of a SKU as the guard counts them (0 when none). */
static long long redis_pending(const char *sku)
{
    long long v = it_redis_num("HGET lab:sales:pending %s", sku);
    return v == -1 ? 0 : v;
}

/* Sales read by `consumer` and not acknowledged yet. */
static long long consumer_pending(const char *consumer)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    if (!c || c->err) {
        redisFree(c);
        return -2;
    }
    redisReply *r = redisCommand(c, "XPENDING lab:sales flushers - + 1000 %s", consumer);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* The order_id of the first sale `consumer` read and has not flushed;
 * 0 when found. */
static int held_order(const char *consumer, char *out, size_t outlen)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    int rc = -1;
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *p = redisCommand(c, "XPENDING lab:sales flushers - + 1 %s", consumer);
    if (p && p->type == REDIS_REPLY_ARRAY && p->elements == 1 &&
        p->element[0]->type == REDIS_REPLY_ARRAY && p->element[0]->elements >= 1) {
        const char *id = p->element[0]->element[0]->str;
        redisReply *e = redisCommand(c, "XRANGE lab:sales %s %s", id, id);
        if (e && e->type == REDIS_REPLY_ARRAY && e->elements == 1) {
            const redisReply *kv = e->element[0]->element[1];
            for (size_t k = 0; rc != 0 && k + 1 < kv->elements; k += 2)
                if (strcmp(kv->element[k]->str, "o") == 0) {   /* its first sale */
                    snprintf(out, outlen, "%s", kv->element[k + 1]->str);
                    rc = 0;
                }
        }
        freeReplyObject(e);
    }
    freeReplyObject(p);
    redisFree(c);
    return rc;
}

static const char *deduct_url(int i)
{
    static char u[2][256];
    if (!u[i][0])
        snprintf(u[i], sizeof(u[i]), "%s/inventory/deduct", it.inventory[i]);
    return u[i];
}

static void seed(const char *sku, long long stock)
{
    char url[256], body[96];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    snprintf(body, sizeof(body), "{\"stock\":%lld}", stock);
    assert_int_equal(it_status("PUT", url, body), 200);
}

/* GET .../audit's "pending"; -1 when it cannot be read. */
static long long audit_pending(const char *sku)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/%s/audit", it.inventory[1], sku);
    struct it_resp r;
    long long p = -1;
    if (it_http("GET", url, NULL, &r) == 200 && r.json) {
        json_t *v = json_object_get(r.json, "pending");
        p = json_is_integer(v) ? json_integer_value(v) : -1;
    }
    it_resp_free(&r);
    return p;
}

/* Wait until the SKU has no unflushed sale; fails the test past DRAIN_MS. */
static void drain(const char *sku)
{
    long long p = -1;
    for (long waited = 0; waited < DRAIN_MS; waited += 100) {
        if ((p = audit_pending(sku)) == 0)
            return;
        nap_ms(100);
    }
    fail_msg("%s did not drain in %d ms: %lld pending", sku, DRAIN_MS, p);
}

static long long ledger_rows(const char *sku)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM db_shopping.ledger WHERE sku='%s' AND guard='redis-stream'",
             sku);
    return it_sql_value(sql);
}

/* Every answered sale in MySQL once, MySQL = Redis, nothing oversold. */
static void assert_exact(const char *sku, long long initial, long long answered)
{
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%s: answered %lld, ledger %lld, stock %lld, redis %lld\n", sku, answered,
                  a.sold, a.stock, redis_stock(sku));
    assert_true(a.consistent);
    assert_int_equal(a.sold, answered);
    assert_int_equal(ledger_rows(sku), answered);
    assert_int_equal(a.stock, initial - answered);
    assert_int_equal(redis_stock(sku), a.stock);
}

/* total deductions of sku from `clients` threads over both instances,
 * order ids <prefix>-<n>. */
static void hammer(const char *sku, const char *prefix, int total, int clients,
                   struct it_load *l)
{
    static char fmt[160];
    static const char *urls[2];
    urls[0] = deduct_url(0);
    urls[1] = deduct_url(1);
    snprintf(fmt, sizeof(fmt), "{\"sku\":\"%s\",\"order_id\":\"%s-%%d\"," G "}", sku,
             prefix);
    memset(l, 0, sizeof(*l));
    l->total = total;
    l->clients = clients;
    l->urls = urls;
    l->nurls = 2;
    l->method = "POST";
    l->body_fmt = fmt;
    it_hammer(l);
}

/* Stock 100, 1000 deductions over both instances: exactly 100 answered,
 * and once drained exactly 100 in MySQL, with Redis = MySQL. */
static void test_exact_on_two_instances(void **state)
{
    seed("Rs-exact", 100);
    struct it_load l;
    hammer("Rs-exact", "rs-exact", 1000, 16, &l);
    assert_int_equal(l.by_status[200], 100);
    assert_int_equal(l.by_status[409], 900);
    drain("Rs-exact");
    assert_exact("Rs-exact", 100, 100);
}

/* One order_id sent 40 times at once to both instances decrements once;
 * the same id with another quantity or SKU is a conflict. */
static void test_duplicate_order_never_twice(void **state)
{
    seed("Rs-dup", 10);
    seed("Rs-dup2", 10);
    static const char *urls[2];
    urls[0] = deduct_url(0);
    urls[1] = deduct_url(1);
    struct it_load l = {.total = 40, .clients = 8, .urls = urls, .nurls = 2, .method = "POST",
                        .body_fmt = "{\"sku\":\"Rs-dup\",\"order_id\":\"rs-dup-1\"," G "}"};
    it_hammer(&l);
    assert_int_equal(l.by_status[200], 40);
    struct it_resp r;
    assert_int_equal(it_http("POST", deduct_url(1),
                             "{\"sku\":\"Rs-dup\",\"order_id\":\"rs-dup-1\",\"qty\":2," G "}",
                             &r), 409);
    assert_non_null(strstr(r.body, "order_id_conflict"));
    it_resp_free(&r);
    assert_int_equal(it_http("POST", deduct_url(0),
                             "{\"sku\":\"Rs-dup2\",\"order_id\":\"rs-dup-1\"," G "}", &r), 409);
    assert_non_null(strstr(r.body, "order_id_conflict"));
    it_resp_free(&r);
    assert_int_equal(it_http("POST", deduct_url(0),
                             "{\"sku\":\"Rs-dup\",\"order_id\":\"rs-dup-1\"," G "}", &r), 200);
    assert_non_null(strstr(r.body, "\"duplicate\":true"));
    it_resp_free(&r);
    drain("Rs-dup");
    assert_exact("Rs-dup", 10, 1);
    assert_exact("Rs-dup2", 10, 0);
}

/* A reseed waits for the SKU's queue; a release of a flushed sale gives
 * the unit back to MySQL and Redis alike. */
static void test_release_after_flush(void **state)
{
    seed("Rs-rel", 5);
    assert_int_equal(it_status("POST", deduct_url(0),
                               "{\"sku\":\"Rs-rel\",\"order_id\":\"rs-rel-1\"," G "}"), 200);
    drain("Rs-rel");
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[1]);
    assert_int_equal(it_status("POST", url, "{\"order_id\":\"rs-rel-1\"}"), 200);
    struct it_audit a;
    assert_int_equal(it_audit("Rs-rel", &a), 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 5);
    assert_int_equal(redis_stock("Rs-rel"), 5);
}

static void *bg_hammer(void *p)
{
    it_hammer(p);
    return NULL;
}

/* MariaDB stopped in the middle of a load (flushers may lose a COMMIT
 * reply): every sale is answered from Redis, the stream backs up, and it
 * drains exactly when MariaDB returns. The first load may end before the
 * stop on a fast machine, so a second one runs once MariaDB is surely down:
 * the backlog does not depend on timing. */
static void test_mariadb_stopped_during_load(void **state)
{
    seed("Rs-mid", 5000);
    static const char *urls[2];
    urls[0] = deduct_url(0);
    urls[1] = deduct_url(1);
    struct it_load l = {.total = 1000, .clients = 8, .urls = urls, .nurls = 2, .method = "POST",
                        .body_fmt = "{\"sku\":\"Rs-mid\",\"order_id\":\"rs-mid-%d\"," G "}"};
    struct it_load down = {.total = 500, .clients = 8, .urls = urls, .nurls = 2, .method = "POST",
                           .body_fmt = "{\"sku\":\"Rs-mid\",\"order_id\":\"rs-mid-down-%d\"," G "}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, bg_hammer, &l), 0);
    nap_ms(300);
    int stopped = it_stack("stop", "mysql");
    pthread_join(t, NULL);
    it_hammer(&down);
    long long queued = redis_pending("Rs-mid");
    int started = it_stack("start", "mysql");
    print_message("MariaDB stopped mid-load: %d + %d answered, %lld queued when it returned\n",
                  l.by_status[200], down.by_status[200], queued);
    assert_int_equal(stopped, 0);
    assert_int_equal(started, 0);
    assert_int_equal(l.by_status[200], 1000);
    assert_int_equal(down.by_status[200], 500);
    assert_true(queued >= 500);
    drain("Rs-mid");
    assert_exact("Rs-mid", 5000, 1500);
}

/* MariaDB stopped under load: sales keep being answered from Redis, the
 * stream backs up; Redis is then killed -9 and restarted with them still
 * queued (the append-only file keeps them); MariaDB returns and the queue
 * drains exactly. */
static void test_mariadb_down_then_redis_crash(void **state)
{
    seed("Rs-down", 500);
    assert_int_equal(it_stack("stop", "mysql"), 0);
    struct it_load l;
    hammer("Rs-down", "rs-down", 200, 8, &l);
    long long queued = redis_pending("Rs-down");
    print_message("MariaDB down: %d answered, %lld queued\n", l.by_status[200], queued);
    int answered = l.by_status[200];
    /* Redis crashes with everything queued: the AOF (appendfsync always)
     * has every answered sale. */
    char pidfile[700], line[32] = "";
    snprintf(pidfile, sizeof(pidfile), "%s/pids/redis.pid", it.stack_dir);
    FILE *f = fopen(pidfile, "r");
    if (f) {
        if (!fgets(line, sizeof(line), f))
            line[0] = 0;
        fclose(f);
    }
    int pid = atoi(line);
    int killed = pid > 0 && kill(pid, SIGKILL) == 0;
    for (int i = 0; killed && i < 100 && kill(pid, 0) == 0; i++)
        nap_ms(50);
    int restarted = it_stack("start", "redis");
    /* Redis listens while it replays the append-only file (LOADING) */
    for (int i = 0; i < 200 && it_redis_num("EXISTS x") < 0; i++)
        nap_ms(50);
    long long after = redis_pending("Rs-down");
    long long stock_after = redis_stock("Rs-down");
    int mysql_back = it_stack("start", "mysql");
    assert_int_equal(answered, 200);
    assert_int_equal(queued, 200);
    assert_true(killed);
    assert_int_equal(restarted, 0);
    assert_int_equal(mysql_back, 0);
    assert_int_equal(after, 200);
    assert_int_equal(stock_after, 300);
    char h[256];
    for (int i = 0; i < 2; i++) {
        snprintf(h, sizeof(h), "%s/healthz", it.inventory[i]);
        assert_int_equal(it_wait_status(h, 200, 30000), 0);
    }
    drain("Rs-down");
    assert_exact("Rs-down", 500, 200);
}

/* An instance killed -9 with sales read and not yet written (its flusher
 * holds each batch): another instance takes them over (XAUTOCLAIM) and
 * the ledger ends with every answered sale once. */
static void test_killed_instance_sales_claimed(void **state)
{
    long base = it_port_base();
    char port[24], url[160];
    snprintf(port, sizeof(port), "%ld", base + 41);
    snprintf(url, sizeof(url), "http://127.0.0.1:%s", port);
    static const char *const args[] = {"--threads", "4", "--stream-hold", "60s", NULL};
    int pid = it_start_inventory("inventory-stream-held", base + 41, NULL, args);
    assert_true(pid > 0);
    char h[200];
    snprintf(h, sizeof(h), "%s/healthz", url);
    if (it_wait_status(h, 200, 30000) != 0) {
        it_kill(pid, SIGKILL, 2000);
        fail_msg("the held instance did not come up");
    }
    seed("Rs-kill", 1000);
    /* Sales until the held flusher has read some (the stack's flushers
     * compete for the same stream); bounded. */
    int answered = 0;
    for (int round = 0; round < 50 && consumer_pending("inventory-stream-held") <= 0; round++) {
        struct it_load l;
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "rs-kill-%d", round);
        hammer("Rs-kill", prefix, 20, 4, &l);
        answered += l.by_status[200];
        nap_ms(150);
    }
    long long held = consumer_pending("inventory-stream-held");
    /* A release of a sale still queued is refused (retry), not a 404. */
    char order[80] = "", body[128], rel[200];
    int found = held_order("inventory-stream-held", order, sizeof(order));
    snprintf(body, sizeof(body), "{\"order_id\":\"%s\"}", order);
    snprintf(rel, sizeof(rel), "%s/inventory/release", it.inventory[0]);
    struct it_resp r;
    long early = found == 0 ? it_http("POST", rel, body, &r) : 0;
    int said_queued = found == 0 && strstr(r.body, "still queued for MySQL") != NULL;
    if (found == 0)
        it_resp_free(&r);
    it_kill(pid, SIGKILL, 5000);
    print_message("answered %d, %lld held by the killed instance; release of %s: %ld\n",
                  answered, held, order, early);
    assert_true(held > 0);
    assert_int_equal(found, 0);
    assert_int_equal(early, 503);
    assert_true(said_queued);
    drain("Rs-kill");
    assert_exact("Rs-kill", 1000, answered);
    assert_int_equal(it_status("POST", rel, "{\"order_id\":\"rs-kill-never\"}"), 404);
    /* flushed now: the release goes through and the unit is back in both */
    assert_int_equal(it_status("POST", rel, body), 200);
    struct it_audit a;
    assert_int_equal(it_audit("Rs-kill", &a), 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, answered - 1);
    assert_int_equal(redis_stock("Rs-kill"), a.stock);
}

/* A counter of an instance's /metrics (-1 when unreadable). */
static double metric(const char *base_url, const char *name)
{
    char url[200], pat[96];
    snprintf(url, sizeof(url), "%s/metrics", base_url);
    snprintf(pat, sizeof(pat), "\n%s ", name);
    struct it_resp r;
    double v = -1;
    if (it_http("GET", url, NULL, &r) == 200) {
        const char *p = strstr(r.body, pat);
        v = p ? atof(p + strlen(pat)) : 0;
    }
    it_resp_free(&r);
    return v;
}

/* Concurrent sales of one SKU in one instance share script calls (a
 * group per round trip), each keeping its own answer: stock 150, 1200
 * deductions from 24 clients over both instances: exactly 150 sold, every
 * one in MySQL once, and the instances made fewer sale calls than sales. */
static void test_concurrent_sales_share_calls(void **state)
{
    double c0 = metric(it.inventory[0], "lab_stream_sale_calls_total") +
                metric(it.inventory[1], "lab_stream_sale_calls_total");
    double m0 = metric(it.inventory[0], "lab_stream_sale_call_members_total") +
                metric(it.inventory[1], "lab_stream_sale_call_members_total");
    seed("Rs-group", 150);
    struct it_load l;
    hammer("Rs-group", "rs-group", 1200, 24, &l);
    assert_int_equal(l.by_status[200], 150);
    assert_int_equal(l.by_status[409], 1050);
    double calls = metric(it.inventory[0], "lab_stream_sale_calls_total") +
                   metric(it.inventory[1], "lab_stream_sale_calls_total") - c0;
    double members = metric(it.inventory[0], "lab_stream_sale_call_members_total") +
                     metric(it.inventory[1], "lab_stream_sale_call_members_total") - m0;
    print_message("1200 sales in %.0f script calls (%.0f members)\n", calls, members);
    assert_true(members >= 1200);
    assert_true(calls > 0 && calls < members);
    drain("Rs-group");
    assert_exact("Rs-group", 150, 150);
}

/* XADD calls Redis has run so far (INFO commandstats); -1 unreadable. */
static long long xadd_calls(void)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    long long n = -1;
    redisReply *r = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
    const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
    if (p) {
        const char *x = strstr(p, "cmdstat_xadd:calls=");
        n = x ? atoll(x + strlen("cmdstat_xadd:calls=")) : 0;
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* A group's sales travel to the flushers as one stream entry: 2000 sales
 * of one SKU from 32 clients over both instances append fewer entries
 * than sales, and still every sale reaches MySQL exactly once (each entry
 * is acknowledged whole, counted off by its number of sales). */
static void test_group_is_one_entry(void **state)
{
    seed("Rs-entry", 2000);
    long long x0 = xadd_calls();
    assert_true(x0 >= 0);
    struct it_load l;
    hammer("Rs-entry", "rs-entry", 2400, 32, &l);
    assert_int_equal(l.by_status[200], 2000);
    assert_int_equal(l.by_status[409], 400);
    long long entries = xadd_calls() - x0;
    print_message("2000 sales in %lld stream entries\n", entries);
    assert_true(entries > 0 && entries < 2000);
    drain("Rs-entry");
    assert_exact("Rs-entry", 2000, 2000);
    assert_int_equal(redis_pending("Rs-entry"), 0);
}

/* A flusher whose COMMIT replies get lost (applied, answer dropped: every
 * 2nd COMMIT of the process) writes the batch again: the replay inserts no
 * ledger row and takes no stock, so nothing is counted twice. */
static void test_lost_commit_replay_counts_once(void **state)
{
    long base = it_port_base();
    char url[160];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld", base + 42);
    static const char *const args[] = {"--threads", "4", "--fault-commit-lost", "2", NULL};
    int pid = it_start_inventory("inventory-stream-lossy", base + 42, NULL, args);
    assert_true(pid > 0);
    char h[200];
    snprintf(h, sizeof(h), "%s/healthz", url);
    if (it_wait_status(h, 200, 30000) != 0) {
        it_kill(pid, SIGKILL, 2000);
        fail_msg("the lossy instance did not come up");
    }
    seed("Rs-lost", 5000);
    int answered = 0;
    double replayed = 0;
    for (int round = 0; round < 50 && replayed <= 0; round++) {
        struct it_load l;
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "rs-lost-%d", round);
        hammer("Rs-lost", prefix, 20, 4, &l);
        answered += l.by_status[200];
        nap_ms(300);
        replayed = metric(url, "lab_stream_replayed_total");
    }
    drain("Rs-lost");
    it_stop_pid(pid);
    print_message("answered %d, %.0f ledger rows found already there on a replay\n", answered,
                  replayed);
    assert_true(replayed > 0);
    assert_exact("Rs-lost", 5000, answered);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_on_two_instances),
        cmocka_unit_test(test_duplicate_order_never_twice),
        cmocka_unit_test(test_release_after_flush),
        cmocka_unit_test(test_killed_instance_sales_claimed),
        cmocka_unit_test(test_lost_commit_replay_counts_once),
        cmocka_unit_test(test_concurrent_sales_share_calls),
        cmocka_unit_test(test_group_is_one_entry),
        cmocka_unit_test(test_mariadb_stopped_during_load),
        cmocka_unit_test(test_mariadb_down_then_redis_crash),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
