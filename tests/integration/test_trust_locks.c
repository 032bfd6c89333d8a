/* Lock guards meeting reseeds, stalls and odd SKUs, on the
 * stack's two instances:
 *   - a reseed on instance 0 while a lock-guard sale holds its lock on
 *     instance 1 (redis-lock, lock-table, zookeeper): the reseed does not
 *     take the holder's lock away, and the held sale never writes a value
 *     computed from the stock it read before the reseed;
 *   - a zookeeper holder stopped (SIGSTOP) past its session and resumed
 *     once its hold is over: it must not trust the session state its
 *     client cached before the stop;
 *   - the SKUs "." and ".." sell under zookeeper;
 *   - segmented: a release into a segment while its holder writes keeps
 *     the returned unit in Redis as in MySQL. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include "locks/zk.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char zk_hosts[64];
static struct zk_client *zk;   /* the test's own session, to look at lock nodes */

static int group_setup(void **state)
{
    if (it_setup() != 0)
        return -1;
    const char *port = getenv("LAB_ZK_PORT");
    if (!port) {
        fprintf(stderr, "LAB_ZK_PORT not set (run by tests/run)\n");
        return -1;
    }
    snprintf(zk_hosts, sizeof(zk_hosts), "127.0.0.1:%s", port);
    zk = zk_client_new(zk_hosts, 4000);
    return zk ? 0 : -1;
}

static int group_teardown(void **state)
{
    zk_client_free(zk);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Lock nodes under /locks/inventory/<node name> now; -1 when ZooKeeper
 * cannot be asked, 0 when the SKU was never locked. */
static int lock_nodes(const char *node_name)
{
    char err[160], path[160];
    struct zk_session *s = zk_client_acquire(zk, 10000, err, sizeof(err));
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    snprintf(path, sizeof(path), "/locks/inventory/%s", node_name);
    struct String_vector kids = {0};
    int rc = zoo_get_children(zk_session_handle(s), path, 0, &kids);
    int n = rc == ZOK ? kids.count : rc == ZNONODE ? 0 : -1;
    deallocate_String_vector(&kids);
    zk_client_release(zk, s);
    return n;
}

/* 1 while some request holds (or waits for) sku's lock of `guard`. */
static int lock_held(const char *guard, const char *sku)
{
    if (strcmp(guard, "zookeeper") == 0)
        return lock_nodes(sku) > 0;
    if (strcmp(guard, "lock-table") == 0) {
        char q[256];
        snprintf(q, sizeof(q), "SELECT COUNT(*) FROM db_shopping.lock_table "
                               "WHERE lock_name='inventory:%s'", sku);
        return it_sql_value(q) == 1;
    }
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    int held = 0;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "EXISTS lock:inventory:{%s}", sku);
        held = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r)
            freeReplyObject(r);
    }
    redisFree(c);
    return held;
}

static int wait_held(const char *guard, const char *sku)
{
    for (int i = 0; i < 250; i++) {
        if (lock_held(guard, sku))
            return 1;
        sleep_ms(20);
    }
    return 0;
}

struct sale {
    char url[256];
    char body[512];
    long status;
    char error[64];
    char answer[512];
};

static void *sale_main(void *p)
{
    struct sale *s = p;
    struct it_resp r;
    s->status = it_http("POST", s->url, s->body, &r);
    const char *e = r.json ? json_string_value(json_object_get(r.json, "error")) : NULL;
    snprintf(s->error, sizeof(s->error), "%s", e ? e : "");
    snprintf(s->answer, sizeof(s->answer), "%.400s", r.body);
    it_resp_free(&r);
    return NULL;
}

static void aim(struct sale *s, const char *base, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void aim(struct sale *s, const char *base, const char *fmt, ...)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->url, sizeof(s->url), "%s/inventory/deduct", base);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->body, sizeof(s->body), fmt, ap);
    va_end(ap);
}

/* Item 2. Stock 10; a sale on instance 1 takes sku's lock and holds it
 * 2 s (it has read 10); meanwhile instance 0 reseeds the SKU to 2. Then 12
 * more sales. Whatever the reseed answers, the audit must be exact: a 200
 * reseed means the new stock (2) is what is sold from, and the reseed must
 * not have freed the holder's lock. */
static void reseed_during_hold(const char *guard, int fencing)
{
    char sku[64];
    const char *fence = fencing ? ",\"fencing\":true" : "";
    snprintf(sku, sizeof(sku), "TL-reseed-%s%s", guard, fencing ? "-f" : "");
    assert_int_equal(it_seed(sku, 10), 200);
    struct sale holder;
    aim(&holder, it.inventory[1],
        "{\"sku\":\"%s\",\"guard\":\"%s\",\"hold_ms\":2000,\"lock_wait_ms\":5000%s,"
        "\"order_id\":\"%s-holder\"}", sku, guard, fence, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sale_main, &holder), 0);
    int held = wait_held(guard, sku);
    sleep_ms(500);             /* the holder has read 10 and sits in hold_ms */
    long put = it_seed(sku, 2);
    int held_after = lock_held(guard, sku);
    pthread_join(t, NULL);
    int ok = holder.status == 200;
    for (int i = 0; i < 12; i++) {
        struct sale s;
        aim(&s, it.inventory[i % 2], "{\"sku\":\"%s\",\"guard\":\"%s\",\"lock_wait_ms\":5000%s,"
            "\"order_id\":\"%s-%d\"}", sku, guard, fence, sku, i);
        sale_main(&s);
        ok += s.status == 200;
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-10s reseed %ld (lock still held after it: %d); holder %ld %.160s\n"
                  "%-10s then %d sold in all | audit initial %lld stock %lld sold %lld "
                  "oversold %lld lost %lld consistent %d\n", guard, put, held_after,
                  holder.status, holder.answer, guard, ok, a.initial, a.stock, a.sold,
                  a.oversold, a.lost_updates, a.consistent);
    assert_true(held);
    assert_true(put == 200 || put == 409 || put == 503);
    if (put == 200) {
        assert_true(held_after);           /* the reseed left the holder's lock alone */
        /* The held sale read the old stock: refused, and saying why. */
        assert_int_equal(holder.status, 503);
        assert_non_null(strstr(holder.answer, "reseeded"));
        assert_int_equal(a.initial, 2);
    } else {
        assert_int_equal(a.initial, 10);
    }
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(a.sold, ok);          /* every 200 is a recorded sale */
    assert_int_equal(a.sold, a.initial);   /* and the stock sold out exactly */
}

static void test_reseed_during_redis_lock_hold(void **state) { reseed_during_hold("redis-lock", 0); }
static void test_reseed_during_lock_table_hold(void **state) { reseed_during_hold("lock-table", 0); }
static void test_reseed_during_zookeeper_hold(void **state) { reseed_during_hold("zookeeper", 0); }
/* Fenced, the reseed puts the row's fence back to 0: the holder's write is
 * refused by it, and must say "reseeded", not "fenced". */
static void test_reseed_during_fenced_hold(void **state)
{
    reseed_during_hold("lock-table", 1);
}

/* Item 3. A zookeeper holder on its own instance (1 s session) reads
 * stock 1 and sits in a 2 s hold; stopped 500 ms into it, its session
 * expires, a buyer on instance 1 takes the lock and sells the unit. The
 * holder is resumed only after its hold is over, so the first thing it
 * does is the check before the write, with the session state its client
 * cached before the stop ("connected"). It must not write: sold 1. */
static void test_zookeeper_resumed_after_hold_does_not_write(void **state)
{
    const char *sku = "TL-zk-stall";
    assert_int_equal(it_seed(sku, 1), 200);
    long port = it_port_base() + 33;
    const char *const args[] = {"--threads", "4", "--zk-hosts", zk_hosts, "--zk-session-ms",
                                "1000", NULL};
    int pid = it_start_inventory("inventory-zk-stall", port, NULL, args);
    assert_true(pid > 0);
    char base[128];
    snprintf(base, sizeof(base), "http://127.0.0.1:%ld", port);
    struct sale holder, buyer;
    aim(&holder, base, "{\"sku\":\"%s\",\"guard\":\"zookeeper\",\"hold_ms\":2000,"
        "\"order_id\":\"%s-holder\"}", sku, sku);
    aim(&buyer, it.inventory[1], "{\"sku\":\"%s\",\"guard\":\"zookeeper\","
        "\"lock_wait_ms\":8000,\"order_id\":\"%s-buyer\"}", sku, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sale_main, &holder), 0);
    int held = wait_held("zookeeper", sku);
    sleep_ms(500);             /* past the lock wait and the read, into hold_ms */
    double stopped = now_s();
    kill(pid, SIGSTOP);
    sale_main(&buyer);
    double left = 3.0 - (now_s() - stopped);   /* well past the holder's hold */
    if (left > 0)
        sleep_ms((long)(left * 1000));
    kill(pid, SIGCONT);
    pthread_join(t, NULL);
    it_stop_pid(pid);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("buyer %ld %s; holder resumed after %.1f s: %ld %.200s\n"
                  "audit: stock %lld sold %lld oversold %lld consistent %d\n", buyer.status,
                  buyer.error, now_s() - stopped, holder.status, holder.answer, a.stock, a.sold,
                  a.oversold, a.consistent);
    assert_true(held);
    assert_int_equal(buyer.status, 200);
    assert_int_equal(holder.status, 503);
    assert_string_equal(holder.error, "lease_expired");
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
}

/* A raw request to instance 0 (libcurl would squash the dot segments of
 * /inventory/. and /inventory/..); returns the status. */
static long raw(const char *method, const char *path, const char *body, char *out,
                size_t outlen)
{
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, body ? strlen(body) : 0, body ? body : "");
    return it_raw(it.inventory[0], req, (size_t)n, out, outlen);
}

/* Item 12. "." and ".." are valid SKUs; as ZooKeeper path components
 * they are not: the guard must name their lock nodes otherwise. */
static void test_zookeeper_dot_skus(void **state)
{
    const char *skus[] = {".", ".."};
    for (int k = 0; k < 2; k++) {
        char path[64], out[4096];
        snprintf(path, sizeof(path), "/inventory/%s", skus[k]);
        assert_int_equal(raw("PUT", path, "{\"stock\":3,\"segments\":2}", out, sizeof(out)),
                         200);
        int sold = 0;
        for (int i = 0; i < 4; i++) {
            struct sale s;
            aim(&s, it.inventory[i % 2], "{\"sku\":\"%s\",\"guard\":\"zookeeper\","
                "\"order_id\":\"TL-dot-%d-%d\"}", skus[k], k, i);
            sale_main(&s);
            print_message("sku \"%s\" sale %d: %ld %.160s\n", skus[k], i, s.status, s.answer);
            sold += s.status == 200;
            assert_true(s.status == 200 || (i == 3 && s.status == 409));
        }
        snprintf(path, sizeof(path), "/inventory/%s/audit", skus[k]);
        assert_int_equal(raw("GET", path, NULL, out, sizeof(out)), 200);
        char *json = strstr(out, "\r\n\r\n");
        assert_non_null(json);
        json_t *a = json_loads(json + 4, 0, NULL);
        assert_non_null(a);
        assert_int_equal(json_integer_value(json_object_get(a, "sold")), 3);
        assert_true(json_is_true(json_object_get(a, "consistent")));
        json_decref(a);
        assert_int_equal(sold, 3);
    }
}

/* A Redis key as a number (0 when absent), -1 when Redis cannot be asked. */
static long long redis_number(const char *key)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    long long v = -1;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "GET %s", key);
        if (r && r->type == REDIS_REPLY_STRING)
            v = atoll(r->str);
        else if (r && r->type == REDIS_REPLY_NIL)
            v = 0;
        if (r)
            freeReplyObject(r);
    }
    redisFree(c);
    return v;
}

static int seg_lock_held(const char *sku)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    int held = 0;
    for (int i = 0; i < 250 && !held && c && !c->err; i++) {
        redisReply *r = redisCommand(c, "EXISTS lock:seg:{%s}:0", sku);
        held = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r)
            freeReplyObject(r);
        if (!held)
            sleep_ms(20);
    }
    redisFree(c);
    return held;
}

/* Item 4. One segment, stock 10; order 1 sold (9 left). A sale on
 * instance 1 locks segment 0, reads 9 and holds; meanwhile order 1 is
 * released on instance 0 (MySQL 10, segment 0 + 1). The holder's write
 * must not wipe the returned unit out: Redis and MySQL agree afterwards
 * (9 each) and all 10 units sell. */
static void test_segmented_release_during_hold_keeps_the_unit(void **state)
{
    const char *sku = "TL-seg-rel";
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    assert_int_equal(it_status("PUT", url, "{\"stock\":10,\"segments\":1}"), 200);
    struct sale first, holder;
    aim(&first, it.inventory[0], "{\"sku\":\"%s\",\"guard\":\"segmented\","
        "\"order_id\":\"%s-1\"}", sku, sku);
    sale_main(&first);
    assert_int_equal(first.status, 200);
    aim(&holder, it.inventory[1], "{\"sku\":\"%s\",\"guard\":\"segmented\",\"hold_ms\":2000,"
        "\"lock_wait_ms\":5000,\"order_id\":\"%s-holder\"}", sku, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sale_main, &holder), 0);
    int held = seg_lock_held(sku);
    sleep_ms(500);             /* the holder has read 9 */
    char rel[256], body[128];
    snprintf(rel, sizeof(rel), "%s/inventory/release", it.inventory[0]);
    snprintf(body, sizeof(body), "{\"order_id\":\"%s-1\"}", sku);
    long st = it_status("POST", rel, body);
    pthread_join(t, NULL);
    char key[128], q[256];
    snprintf(key, sizeof(key), "seg:{%s}:0", sku);
    snprintf(q, sizeof(q), "SELECT stock FROM db_shopping.inventory WHERE sku='%s'", sku);
    long long redis = redis_number(key), mysql = it_sql_value(q);
    int sold = holder.status == 200;
    for (int i = 0; i < 12; i++) {
        struct sale s;
        aim(&s, it.inventory[i % 2], "{\"sku\":\"%s\",\"guard\":\"segmented\","
            "\"order_id\":\"%s-more-%d\"}", sku, sku, i);
        sale_main(&s);
        sold += s.status == 200;
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("release %ld during the hold; holder %ld; then segment 0 = %lld, MySQL "
                  "stock %lld; %d sold in all | audit stock %lld sold %lld consistent %d\n",
                  st, holder.status, redis, mysql, sold, a.stock, a.sold, a.consistent);
    assert_true(held);
    assert_int_equal(st, 200);
    assert_int_equal(holder.status, 200);
    assert_int_equal(redis, mysql);        /* the returned unit is in both */
    assert_int_equal(mysql, 9);
    assert_int_equal(a.sold, 10);          /* and it sells: nothing stranded */
    assert_int_equal(a.stock, 0);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reseed_during_redis_lock_hold),
        cmocka_unit_test(test_reseed_during_lock_table_hold),
        cmocka_unit_test(test_reseed_during_zookeeper_hold),
        cmocka_unit_test(test_reseed_during_fenced_hold),
        cmocka_unit_test(test_zookeeper_resumed_after_hold_does_not_write),
        cmocka_unit_test(test_zookeeper_dot_skus),
        cmocka_unit_test(test_segmented_release_during_hold_keeps_the_unit),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
