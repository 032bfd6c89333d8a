/* redis-lock's `replicas_ack` (issue 10): the lock must reach N replicas
 * (WAIT) before the holder writes. The test starts its own replica of the
 * stack's Redis (`redis-server --replicaof`, on a free port of the stack's
 * range) and stops it again, whatever happens:
 *   - no replica, or fewer than asked: 503 backend_unavailable, nothing
 *     sold, and the lock is free again at once;
 *   - a live replica: sells;
 *   - the replica stalled (SIGSTOP of the process this test started): 503
 *     and nothing sold; resumed: sells again. */
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
    /* Linked when both sides say so (bounded: 10 s). */
    for (int i = 0; i < 200; i++) {
        if (info_has(replica_port, "master_link_status:up") &&
            !info_has(it.redis_port, "connected_slaves:0"))
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_replica_refuses),
        cmocka_unit_test(test_live_replica_sells_stalled_refuses),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
