/* redis-lock's `replicas_ack`: the lock must reach N replicas
 * (WAIT) before the holder writes. The test starts its own replica of the
 * stack's Redis (`redis-server --replicaof`, on a free port of the stack's
 * range) and stops it again, whatever happens:
 *   - no replica, or fewer than asked: 503 backend_unavailable, nothing
 *     sold, and the lock is free again at once;
 *   - a live replica: sells;
 *   - the replica stalled (SIGSTOP of the process this test started): 503
 *     and nothing sold; resumed: sells again.
 * The same for the Redis-stock guards (redis-stream, redis-decr,
 * segmented): WAIT after the sale, undone when too few replicas have it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int replica_pid = -1;
static long replica_port;
static char replica_dir[600];

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* 1 when `field` appears in INFO replication of 127.0.0.1:port. */
static int info_has(long port, const char *field)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)port, tv);
    if (!c || c->err) {
        redisFree(c);
        return 0;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, "INFO replication");
    int has = r && r->type == REDIS_REPLY_STRING && strstr(r->str, field) != NULL;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return has;
}

/* 1 when a write of ours reaches one replica within 200 ms (WAIT). */
static int replica_acks(void)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    if (!c || c->err) {
        redisFree(c);
        return 0;
    }
    redisSetTimeout(c, tv);
    redisReply *w = redisCommand(c, "SET lab:test:replica-probe 1");
    if (w)
        freeReplyObject(w);
    redisReply *r = redisCommand(c, "WAIT 1 200");
    int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return ok;
}

static int start_replica(void)
{
    replica_port = it_port_base() + 35;
    snprintf(replica_dir, sizeof(replica_dir), "%s/test-replica", it.stack_dir);
    mkdir(replica_dir, 0700);
    char port[16], master[16], log[700];
    snprintf(port, sizeof(port), "%ld", replica_port);
    snprintf(master, sizeof(master), "%ld", it.redis_port);
    snprintf(log, sizeof(log), "%s/logs/test-replica.log", it.stack_dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setsid();
        execl("/usr/bin/redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
              "--replicaof", "127.0.0.1", master, "--save", "", "--appendonly", "no",
              "--dir", replica_dir, "--daemonize", "no", (char *)NULL);
        _exit(127);
    }
    replica_pid = (int)pid;
    /* Linked when both sides say so, and acknowledging: after a diskless
     * full sync the master streams writes only once the replica's first
     * ACK came (up to 1 s later), so a write of ours must reach it within
     * a WAIT (bounded: 10 s in all). */
    for (int i = 0; i < 200; i++) {
        if (info_has(replica_port, "master_link_status:up") &&
            !info_has(it.redis_port, "connected_slaves:0") && replica_acks())
            return 0;
        sleep_ms(50);
    }
    fprintf(stderr, "replica on %ld did not link to %ld\n", replica_port, it.redis_port);
    return -1;
}

static void stop_replica(void)
{
    if (replica_pid > 0) {
        kill(replica_pid, SIGCONT);   /* a stopped process cannot act on SIGTERM */
        it_kill(replica_pid, SIGTERM, 5000);
    }
    replica_pid = -1;
    /* The master notices at once (the connection closes). */
    for (int i = 0; i < 100 && !info_has(it.redis_port, "connected_slaves:0"); i++)
        sleep_ms(50);
}

static int group_setup(void **state) { return it_setup(); }
static int group_teardown(void **state)
{
    stop_replica();
    return 0;
}

static long sell(const char *sku, const char *extra, int n, char *answer, size_t len)
{
    char url[256], body[512];
    snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[n % 2]);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"redis-lock\"%s}", sku, extra);
    struct it_resp r;
    long st = it_http("POST", url, body, &r);
    snprintf(answer, len, "%.300s", r.body);
    it_resp_free(&r);
    return st;
}

static void expect_refused(const char *sku, const char *extra, const char *why)
{
    char answer[320];
    struct it_audit before, after;
    assert_int_equal(it_audit(sku, &before), 0);
    long st = sell(sku, extra, 0, answer, sizeof(answer));
    print_message("%s: %ld %s\n", why, st, answer);
    assert_int_equal(st, 503);
    assert_non_null(strstr(answer, "backend_unavailable"));
    assert_non_null(strstr(answer, "replicas_ack"));
    assert_int_equal(it_audit(sku, &after), 0);
    assert_int_equal(after.sold, before.sold);
    /* The refused holder gave the lock back: a one-try sale gets it. */
    assert_int_equal(sell(sku, ",\"lock_wait_ms\":0", 1, answer, sizeof(answer)), 200);
}

/* The counts below assume the stack's Redis has no replica of its own (a
 * stack started with --redis-replica has one: skipped then). */
static void skip_if_replicated(void)
{
    if (!info_has(it.redis_port, "connected_slaves:0"))
        skip();
}

static void test_no_replica_refuses(void **state)
{
    const char *sku = "RA-none";
    skip_if_replicated();
    assert_int_equal(it_seed(sku, 10), 200);
    expect_refused(sku, ",\"replicas_ack\":1", "no replica, replicas_ack 1");
}

static void test_live_replica_sells_stalled_refuses(void **state)
{
    const char *sku = "RA-live";
    char answer[320];
    skip_if_replicated();
    assert_int_equal(it_seed(sku, 10), 200);
    assert_int_equal(start_replica(), 0);

    long st = sell(sku, ",\"replicas_ack\":1", 0, answer, sizeof(answer));
    print_message("live replica, replicas_ack 1: %ld %s\n", st, answer);
    assert_int_equal(st, 200);
    expect_refused(sku, ",\"replicas_ack\":2", "one replica, replicas_ack 2");

    /* Stalled replica: the lock never reaches it within the WAIT. */
    assert_int_equal(kill(replica_pid, SIGSTOP), 0);
    expect_refused(sku, ",\"replicas_ack\":1", "stalled replica, replicas_ack 1");
    assert_int_equal(kill(replica_pid, SIGCONT), 0);

    /* Resumed, it catches up and acknowledges again (bounded retries: the
     * replica needs a moment to read what piled up). */
    for (int i = 0; i < 50; i++) {
        st = sell(sku, ",\"replicas_ack\":1", 0, answer, sizeof(answer));
        if (st == 200)
            break;
        sleep_ms(100);
    }
    print_message("resumed replica, replicas_ack 1: %ld %s\n", st, answer);
    assert_int_equal(st, 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_true(a.consistent);
    stop_replica();
}

/* ---- the Redis-stock guards ------------------------- */

/* One Redis command on 127.0.0.1:port as a number (string or integer
 * reply), -1 nil, -2 unreachable. */
static long long redis_num_at(long port, const char *cmd, const char *arg)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)port, tv);
    if (!c || c->err) {
        redisFree(c);
        return -2;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, cmd, arg);
    long long v = !r ? -2 : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                  : r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return v;
}

static long sell_guard(const char *base, const char *sku, const char *guard, const char *order,
                       const char *extra, char *answer, size_t len)
{
    char url[256], body[512];
    snprintf(url, sizeof(url), "%s/inventory/deduct", base);
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s\"%s}",
             sku, guard, order, extra);
    struct it_resp r;
    long st = it_http("POST", url, body, &r);
    snprintf(answer, len, "%.300s", r.body);
    it_resp_free(&r);
    return st;
}

/* Redis stock key of a Redis-stock guard. */
static const char *stock_key(const char *guard, const char *sku)
{
    static char k[128];
    snprintf(k, sizeof(k), strcmp(guard, "redis-stream") == 0 ? "sstock:{%s}" : "stock:{%s}",
             sku);
    return k;
}

/* The Redis stock of a Redis-stock guard on 127.0.0.1:port: its stock key,
 * or for segmented the sum of its segments; -1 when absent, -2 unreachable. */
static long long redis_stock_at(long port, const char *guard, const char *sku)
{
    if (strcmp(guard, "segmented") != 0)
        return redis_num_at(port, "GET %s", stock_key(guard, sku));
    char key[128];
    snprintf(key, sizeof(key), "seg:{%s}:k", sku);
    long long k = redis_num_at(port, "GET %s", key), sum = 0;
    if (k < 0)
        return k;
    for (long long i = 0; i < k; i++) {
        snprintf(key, sizeof(key), "seg:{%s}:%lld", sku, i);
        long long v = redis_num_at(port, "GET %s", key);
        if (v == -2)
            return -2;
        sum += v > 0 ? v : 0;
    }
    return sum;
}

/* A sale refused for replicas_ack: 503, and nothing sold anywhere (Redis
 * stock as before, no ledger row once the stream has drained). */
static void expect_refused_stock(const char *guard, const char *sku, const char *order,
                                 const char *why)
{
    char answer[320];
    long long before = redis_stock_at(it.redis_port, guard, sku);
    long st = sell_guard(it.inventory[0], sku, guard, order, ",\"replicas_ack\":1", answer,
                         sizeof(answer));
    print_message("%s %s: %ld %s\n", guard, why, st, answer);
    assert_int_equal(st, 503);
    assert_non_null(strstr(answer, "replicas_ack"));
    assert_int_equal(redis_stock_at(it.redis_port, guard, sku), before);
    sleep_ms(500);   /* a flusher would have written it by now */
    char q[256];
    snprintf(q, sizeof(q), "SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='%s'", order);
    assert_int_equal(it_sql_value(q), 0);
}

static void stock_guards_ack(const char *guard, const char *sku)
{
    char answer[320], order[64];
    assert_int_equal(it_seed(sku, 10), 200);
    snprintf(order, sizeof(order), "%s-none", sku);
    expect_refused_stock(guard, sku, order, "no replica, replicas_ack 1");
    assert_int_equal(start_replica(), 0);
    snprintf(order, sizeof(order), "%s-live", sku);
    long st = sell_guard(it.inventory[1], sku, guard, order, ",\"replicas_ack\":1", answer,
                         sizeof(answer));
    print_message("%s live replica, replicas_ack 1: %ld %s\n", guard, st, answer);
    assert_int_equal(st, 200);
    /* Answered only once the replica had it: its copy already agrees. */
    assert_int_equal(redis_stock_at(replica_port, guard, sku),
                     redis_stock_at(it.redis_port, guard, sku));
    assert_int_equal(kill(replica_pid, SIGSTOP), 0);
    snprintf(order, sizeof(order), "%s-stalled", sku);
    expect_refused_stock(guard, sku, order, "stalled replica, replicas_ack 1");
    stop_replica();
}

static void test_redis_stream_replicas_ack(void **state)
{
    skip_if_replicated();
    stock_guards_ack("redis-stream", "RA-stream");
}

static void test_redis_decr_replicas_ack(void **state)
{
    skip_if_replicated();
    stock_guards_ack("redis-decr", "RA-decr");
}

/* segmented: a value out of range or of the wrong type
 * is a 400 with nothing sold; then the same checks as the guards above: no
 * replica 503, a live one sells (and has the segment write when the answer
 * comes), a stalled one 503 with the segment given back. */
static void test_segmented_replicas_ack(void **state)
{
    const char *sku = "RA-seg";
    static const struct {
        const char *extra, *label;
    } bad[] = {
        {",\"replicas_ack\":3", "above the maximum (2)"},
        {",\"replicas_ack\":-1", "negative"},
        {",\"replicas_ack\":\"one\"", "a string"},
    };
    char answer[320], order[64];
    skip_if_replicated();
    assert_int_equal(it_seed(sku, 10), 200);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(order, sizeof(order), "RA-seg-bad%zu", i);
        long st = sell_guard(it.inventory[0], sku, "segmented", order, bad[i].extra, answer,
                             sizeof(answer));
        print_message("segmented replicas_ack %s: %ld %s\n", bad[i].label, st, answer);
        assert_int_equal(st, 400);
        assert_non_null(strstr(answer, "bad_request"));
        assert_non_null(strstr(answer, "replicas_ack"));
    }
    assert_int_equal(redis_stock_at(it.redis_port, "segmented", sku), 10);
    stock_guards_ack("segmented", sku);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_true(a.consistent);
}

/* One command on 127.0.0.1:port, reply ignored; 0 when it answered. */
static int redis_do(long port, const char *cmd)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)port, tv);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, cmd);
    int rc = r && r->type != REDIS_REPLY_ERROR ? 0 : -1;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* A failover to a replica that lagged: 5 redis-stream sales answered and
 * flushed to MySQL (stock 5) while the replica's link was cut; the master
 * goes, the replica is promoted with the old stock (10). The guard must
 * notice the master changed and reload from MySQL (less pending) instead
 * of selling 10 more: at most 10 sold in all, the audit exact. */
static void test_promoted_lagging_replica_no_oversell(void **state)
{
    const char *sku = "RA-promo";
    char answer[320], order[64];
    skip_if_replicated();
    assert_int_equal(it_seed(sku, 10), 200);
    assert_int_equal(start_replica(), 0);
    for (int i = 0; i < 100 && redis_num_at(replica_port, "GET %s", "sstock:{RA-promo}") != 10;
         i++)
        sleep_ms(50);
    assert_int_equal(redis_num_at(replica_port, "GET %s", "sstock:{RA-promo}"), 10);
    /* the link cut: the replica follows a master that is not there, and
     * keeps its data */
    assert_int_equal(redis_do(replica_port, "REPLICAOF 127.0.0.1 1"), 0);
    for (int i = 0; i < 100 && !info_has(it.redis_port, "connected_slaves:0"); i++)
        sleep_ms(50);
    for (int i = 0; i < 5; i++) {
        snprintf(order, sizeof(order), "ra-promo-a%d", i);
        assert_int_equal(sell_guard(it.inventory[i % 2], sku, "redis-stream", order, "", answer,
                                    sizeof(answer)), 200);
    }
    char q[256];
    snprintf(q, sizeof(q), "SELECT stock FROM db_shopping.inventory WHERE sku='%s'", sku);
    for (int i = 0; i < 100 && it_sql_value(q) != 5; i++)
        sleep_ms(100);
    assert_int_equal(it_sql_value(q), 5);
    /* the master goes; the lagging replica is promoted */
    assert_int_equal(it_stack("stop", "redis"), 0);
    assert_int_equal(redis_do(replica_port, "REPLICAOF NO ONE"), 0);
    long long promoted_stock = redis_num_at(replica_port, "GET %s", "sstock:{RA-promo}");
    print_message("promoted replica holds sstock %lld (MySQL 5)\n", promoted_stock);

    long base = it_port_base();
    char url[160], h[200], rport[16];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld", base + 45);
    snprintf(rport, sizeof(rport), "%ld", replica_port);
    const char *args[] = {"--threads", "4", "--redis-port", rport, NULL};
    int pid = it_start_inventory("inventory-promoted", base + 45, NULL, args);
    snprintf(h, sizeof(h), "%s/healthz", url);
    int up = pid > 0 && it_wait_status(h, 200, 30000) == 0;
    int sold = 0, refused = 0;
    for (int i = 0; up && i < 200 && sold < 10; i++) {
        snprintf(order, sizeof(order), "ra-promo-b%d", i);
        long st = sell_guard(url, sku, "redis-stream", order, "", answer, sizeof(answer));
        sold += st == 200;
        refused += st == 503;
        if (st == 409)
            break;   /* out of stock */
        if (st == 503)
            sleep_ms(200);
    }
    /* the promoted instance's flusher drains; its audit judges */
    json_int_t asold = -1, aover = -1, astock = -1;
    int cons = 0;
    char aurl[256];
    snprintf(aurl, sizeof(aurl), "%s/inventory/%s/audit", url, sku);
    for (int i = 0; up && i < 100; i++) {
        struct it_resp r;
        json_int_t pend = -1;
        if (it_http("GET", aurl, NULL, &r) == 200 && r.json)
            json_unpack(r.json, "{s:I,s:I,s:I,s:b,s:I}", "sold", &asold, "oversold", &aover,
                        "stock", &astock, "consistent", &cons, "pending", &pend);
        if (pend == 0)
            print_message("audit on the promoted master: %s\n", r.body);
        it_resp_free(&r);
        if (pend == 0)
            break;
        sleep_ms(100);
    }
    it_stop_pid(pid);
    stop_replica();
    assert_int_equal(it_stack("start", "redis"), 0);
    print_message("after the promotion: %d more sold (%d refused while reconciling); audit "
                  "sold %lld of 10, oversold %lld, stock %lld\n", sold, refused,
                  (long long)asold, (long long)aover, (long long)astock);
    assert_true(up);
    assert_int_equal(aover, 0);
    assert_int_equal(sold, 5);
    assert_int_equal(asold, 10);
    assert_true(cons);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_replica_refuses),
        cmocka_unit_test(test_live_replica_sells_stalled_refuses),
        cmocka_unit_test(test_redis_stream_replicas_ack),
        cmocka_unit_test(test_redis_decr_replicas_ack),
        cmocka_unit_test(test_segmented_replicas_ack),
        cmocka_unit_test(test_promoted_lagging_replica_no_oversell),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
