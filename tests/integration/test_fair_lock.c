/* The fair Redis lock (Redisson's RedissonFairLock), against the
 * stack's Redis and its two inventory instances:
 *   - waiters queued in a known order get the lock in that order, and a
 *     release wakes only the next one (notifications = waiters);
 *   - the default lock wakes one waiter per process per release (no herd);
 *   - a waiter that died in the queue is skipped once its lease passes;
 *   - a waiter that gives up leaves the queue;
 *   - saturating load on two instances: nobody starves (no lock_timeout,
 *     every wait bounded) and the audit is exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "locks/rlock.h"
#include "base/util.h"

#define NWAITERS 6

/* A connection to the stack's Redis (1 s timeouts); fails the test when
 * there is none. */
static redisContext *raw(void)
{
    redisContext *c = it_redis_connect(1000);
    if (!c)
        fail_msg("no connection to redis on port %ld", it.redis_port);
    return c;
}

static long long raw_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -200;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        v = r->element[1]->integer;   /* PUBSUB NUMSUB chan -> {chan, n} */
    freeReplyObject(r);
    return v;
}

/* The lock client "fairtest"; fails the test when there is none. */
static struct rlock_client *client(void)
{
    struct rlock_client *c = it_rlock_client("fairtest");
    assert_non_null(c);
    return c;
}

static struct rlock_opts opts(int fair)
{
    struct rlock_opts o;
    rlock_opts_default(&o);
    o.ttl_ms = 10000;
    o.watchdog = 0;
    o.fair = fair;
    return o;
}

struct waiter {
    struct rlock_client *c;
    const char *key;
    int fair;
    int index;                 /* arrival order */
    atomic_int *next_slot;
    int got_slot;              /* order of acquisition, -1 none */
    int rc;
};

static void *waiter_main(void *p)
{
    struct waiter *w = p;
    struct rlock_opts o = opts(w->fair);
    struct rlock *l = rlock_new(w->c, w->key, &o);
    w->got_slot = -1;
    w->rc = rlock_acquire(l, 10000);
    if (w->rc == RLOCK_OK) {
        w->got_slot = atomic_fetch_add(w->next_slot, 1);
        it_sleep_us(20 * 1000L);
        rlock_release(l);
    }
    rlock_free(l);
    return NULL;
}

/* A holder, then NWAITERS waiters started one by one, each only once the
 * previous is waiting (fair: in the queue; default: counted as waiting,
 * with the process's one subscription to the channel open). Returns
 * the notifications the waiters received; slots[i] = when waiter i got it. */
static unsigned long long queue_run(int fair, const char *name, int slots[NWAITERS])
{
    char key[96], chan[160];
    snprintf(key, sizeof(key), "fairtest:%d:%s", (int)getpid(), name);
    snprintf(chan, sizeof(chan), "rlock:chan:{%s}", key);
    struct rlock_client *c = client();
    redisContext *rc = raw();
    struct rlock_opts o = opts(fair);
    struct rlock *holder = rlock_new(c, key, &o);
    assert_int_equal(rlock_acquire(holder, 0), RLOCK_OK);

    struct rlock_stats_snap before, after;
    rlock_stats_read(rlock_client_stats(c), &before);
    atomic_int next_slot = 0;
    struct waiter w[NWAITERS];
    pthread_t t[NWAITERS];
    for (int i = 0; i < NWAITERS; i++) {
        w[i] = (struct waiter){.c = c, .key = key, .fair = fair, .index = i,
                               .next_slot = &next_slot};
        assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &w[i]), 0);
        long long n = -1;
        for (int k = 0; k < 200; k++) {   /* bounded: 4 s */
            struct rlock_stats_snap now;
            rlock_stats_read(rlock_client_stats(c), &now);
            n = fair ? raw_int(rc, "LLEN %s:queue", key)
                     : (raw_int(rc, "PUBSUB NUMSUB %s", chan) >= 1
                            ? (long long)(now.waits - before.waits) : -1);
            if (n == i + 1)
                break;
            it_sleep_us(20 * 1000L);
        }
        assert_int_equal(n, i + 1);
        if (!fair)   /* waiters sit on their slices, not on their own sockets */
            it_sleep_us(30 * 1000L);
    }
    assert_int_equal(rlock_release(holder), RLOCK_OK);
    for (int i = 0; i < NWAITERS; i++)
        pthread_join(t[i], NULL);
    rlock_stats_read(rlock_client_stats(c), &after);
    for (int i = 0; i < NWAITERS; i++) {
        assert_int_equal(w[i].rc, RLOCK_OK);
        slots[i] = w[i].got_slot;
    }
    if (fair) {   /* nothing left behind */
        assert_int_equal(raw_int(rc, "EXISTS %s:queue", key), 0);
        assert_int_equal(raw_int(rc, "EXISTS %s:queue:t", key), 0);
    }
    rlock_free(holder);
    redisFree(rc);
    rlock_client_free(c);
    return after.notifications - before.notifications;
}

static void test_fair_grants_in_arrival_order_one_wakeup_each(void **state)
{
    int slots[NWAITERS];
    unsigned long long notes = queue_run(1, "order", slots);
    print_message("fair: notifications %llu for %d waiters; order", notes, NWAITERS);
    for (int i = 0; i < NWAITERS; i++)
        print_message(" %d", slots[i]);
    print_message("\n");
    for (int i = 0; i < NWAITERS; i++)
        assert_int_equal(slots[i], i);
    assert_true(notes <= NWAITERS);
}

/* The default lock has no herd either (Redisson's semantics): a process
 * keeps one subscription per channel and a release message wakes one of
 * its waiters, like a semaphore permit, so NWAITERS waiters of one process
 * get about one wake-up per release; one subscription per waiter woke all
 * of them on every release (21 wake-ups for 6 waiters). The order is not
 * promised. */
static void test_default_wakes_one_waiter_per_release(void **state)
{
    int slots[NWAITERS];
    unsigned long long notes = queue_run(0, "herd", slots);
    print_message("default: notifications %llu for %d waiters\n", notes, NWAITERS);
    assert_true(notes <= NWAITERS);
}

/* A waiter that died in the queue (its lease written, then nothing) holds
 * the free lock back only until its lease has passed. */
static void test_dead_waiter_is_skipped(void **state)
{
    char key[96];
    snprintf(key, sizeof(key), "fairtest:%d:dead", (int)getpid());
    redisContext *rc = raw();
    redisReply *r = redisCommand(rc, "TIME");
    assert_non_null(r);
    long long now_ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    assert_int_equal(raw_int(rc, "RPUSH %s:queue dead-waiter", key), 1);
    assert_int_equal(raw_int(rc, "ZADD %s:queue:t %lld dead-waiter", key, now_ms + 500), 1);

    struct rlock_client *c = client();
    struct rlock_opts o = opts(1);
    struct rlock *l = rlock_new(c, key, &o);
    assert_int_equal(rlock_acquire(l, 0), RLOCK_TIMEOUT);   /* the head goes first */
    double t0 = util_now();
    assert_int_equal(rlock_acquire(l, 5000), RLOCK_OK);
    double waited = util_now() - t0;
    print_message("dead head skipped after %.0f ms\n", waited * 1000);
    assert_true(waited < 2.5);
    assert_int_equal(raw_int(rc, "LLEN %s:queue", key), 0);
    rlock_release(l);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(rc);
}

/* A waiter that gives up leaves the queue (it does not make the next one
 * wait for its lease). */
static void test_timed_out_waiter_leaves_queue(void **state)
{
    char key[96];
    snprintf(key, sizeof(key), "fairtest:%d:leave", (int)getpid());
    redisContext *rc = raw();
    struct rlock_client *c = client();
    struct rlock_opts o = opts(1);
    struct rlock *holder = rlock_new(c, key, &o), *w = rlock_new(c, key, &o);
    assert_int_equal(rlock_acquire(holder, 0), RLOCK_OK);
    assert_int_equal(rlock_acquire(w, 200), RLOCK_TIMEOUT);
    assert_int_equal(raw_int(rc, "LLEN %s:queue", key), 0);
    assert_int_equal(rlock_release(holder), RLOCK_OK);
    rlock_free(holder);
    rlock_free(w);
    rlock_client_free(c);
    redisFree(rc);
}

/* Saturating load on both instances, hold_ms 0: with the fair queue no
 * request waits past its lock_wait_ms (no 503), and the audit is exact. */
static void test_fair_saturation_no_starvation_exact(void **state)
{
    const char *sku = "FL-sat";
    assert_int_equal(it_seed(sku, 150), 200);
    char u0[256], u1[256], fmt[256];
    snprintf(u0, sizeof(u0), "%s/inventory/deduct", it.inventory[0]);
    snprintf(u1, sizeof(u1), "%s/inventory/deduct", it.inventory[1]);
    const char *urls[2] = {u0, u1};
    snprintf(fmt, sizeof(fmt),
             "{\"sku\":\"%s\",\"guard\":\"redis-lock\",\"fair\":true,\"lock_wait_ms\":5000,"
             "\"order_id\":\"%s-%%d\"}", sku, sku);
    struct it_load l = {.total = 400, .clients = 48, .urls = urls, .nurls = 2,
                        .method = "POST", .body_fmt = fmt};
    it_hammer(&l);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("fair saturation: 200 %d, 409 %d, 503 %d; sold %lld stock %lld\n",
                  l.by_status[200], l.by_status[409], l.by_status[503], a.sold, a.stock);
    assert_int_equal(l.by_status[503], 0);
    assert_int_equal(l.by_status[200], 150);
    assert_int_equal(l.by_status[409], 250);
    assert_int_equal(a.sold, 150);
    assert_true(a.consistent);
}

/* calls=N of one command in INFO commandstats, 0 when never called. */
static long long cmd_calls(redisContext *c, const char *cmd)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    assert_non_null(r);
    char needle[64];
    snprintf(needle, sizeof(needle), "cmdstat_%s:calls=", cmd);
    const char *p = r->type == REDIS_REPLY_STRING ? strstr(r->str, needle) : NULL;
    long long n = p ? atoll(p + strlen(needle)) : 0;
    freeReplyObject(r);
    return n;
}

/* Every lock script runs by EVALSHA: after one warm-up round (a script
 * the server does not know yet is sent once by EVAL), redis-lock sales in
 * every mode add EVALSHA calls and no EVAL; after SCRIPT FLUSH the next
 * round sends each script once more and still sells. */
static void test_lock_paths_use_evalsha(void **state)
{
    static const char *modes[] = {"", ",\"fair\":true", ",\"fencing\":true",
                                  ",\"fair\":true,\"fencing\":true"};
    const char *sku = "FL-evalsha";
    assert_int_equal(it_seed(sku, 1000), 200);
    redisContext *rc = raw();
    long long eval0 = 0, sha0 = 0;
    for (int round = 0; round < 3; round++) {
        if (round == 1) {
            eval0 = cmd_calls(rc, "eval");
            sha0 = cmd_calls(rc, "evalsha");
        }
        if (round == 2)
            freeReplyObject(redisCommand(rc, "SCRIPT FLUSH"));
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            for (int inst = 0; inst < 2; inst++) {
                char url[256], body[256];
                snprintf(url, sizeof(url), "%s/inventory/deduct", it.inventory[inst]);
                snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"redis-lock\"%s}",
                         sku, modes[m]);
                assert_int_equal(it_status("POST", url, body), 200);
            }
        }
        if (round == 1) {
            long long eval1 = cmd_calls(rc, "eval"), sha1 = cmd_calls(rc, "evalsha");
            print_message("steady round: EVAL +%lld, EVALSHA +%lld\n", eval1 - eval0,
                          sha1 - sha0);
            assert_int_equal(eval1, eval0);
            assert_true(sha1 - sha0 >= 16);   /* 8 sales, acquire + release each */
        }
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 24);
    assert_true(a.consistent);
    redisFree(rc);
}

static int group_setup(void **state) { return it_setup(); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_grants_in_arrival_order_one_wakeup_each),
        cmocka_unit_test(test_default_wakes_one_waiter_per_release),
        cmocka_unit_test(test_dead_waiter_is_skipped),
        cmocka_unit_test(test_timed_out_waiter_leaves_queue),
        cmocka_unit_test(test_fair_saturation_no_starvation_exact),
        cmocka_unit_test(test_lock_paths_use_evalsha),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
