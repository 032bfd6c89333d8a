/* Fencing tokens, on the stack's two instances:
 *   - a stale holder, made deterministic: a short lease and no watchdog on
 *     instance 0 while it sits in hold_ms, a buyer on instance 1 takes the
 *     lock over and sells, then the first writes. Unfenced, the audit
 *     shows the lost update; fenced, the stale write is 409 `fenced` and
 *     the audit is exact. For redis-lock (INCR token) and lock-table (the
 *     lock row's AUTO_INCREMENT id);
 *   - mutex's per-process counter is no token across instances: the
 *     instance whose counter is behind has an uncontested sale refused;
 *   - guards that cannot fence answer 400 and change nothing;
 *   - fenced load on two instances stays exact, and a reseed puts the
 *     row's fence back to 0. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int group_setup(void **state) { return it_setup(); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct sale {
    char url[256];
    char body[512];
    long status;
    char answer[512];
};

static void *sale_main(void *p)
{
    struct sale *s = p;
    struct it_resp r;
    s->status = it_http("POST", s->url, s->body, &r);
    snprintf(s->answer, sizeof(s->answer), "%.400s", r.body);
    it_resp_free(&r);
    return NULL;
}

/* One sale, answered synchronously; returns the status, body in s. */
static long sell(struct sale *s, int instance, const char *body)
{
    snprintf(s->url, sizeof(s->url), "%s/inventory/deduct", it.inventory[instance]);
    snprintf(s->body, sizeof(s->body), "%s", body);
    sale_main(s);
    return s->status;
}

/* The SKU's fence: each test's SKU is fenced by one guard only, so the
 * highest of the per-guard fences is that guard's (0: none since the seed). */
static long long fence_of(const char *sku)
{
    char q[256];
    snprintf(q, sizeof(q), "SELECT COALESCE(MAX(fence), 0) FROM db_shopping.inventory_fence "
                           "WHERE sku='%s'", sku);
    return it_sql_value(q);
}

/* 1 once the first buyer holds its lock on sku (the Redis key, or the
 * lock row), so the take-over cannot come first however slow the machine
 * is. Polls for at most 5 s. */
static int wait_held(const char *guard, const char *sku)
{
    char q[256];
    snprintf(q, sizeof(q), "SELECT COUNT(*) FROM db_shopping.lock_table "
                           "WHERE lock_name='inventory:%s'", sku);
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    int held = 0;
    for (int i = 0; i < 250 && !held && c && !c->err; i++) {
        if (strcmp(guard, "lock-table") == 0) {
            held = it_sql_value(q) == 1;
        } else {
            redisReply *r = redisCommand(c, "EXISTS lock:inventory:{%s}", sku);
            held = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
            if (r)
                freeReplyObject(r);
        }
        if (!held)
            sleep_ms(20);
    }
    redisFree(c);
    return held;
}

/* The stale holder. `lease` is the guard's lease option for the first
 * buyer (watchdog off where the guard has one). Returns the first buyer's
 * status; *a receives the audit. */
static long stale_holder(const char *guard, const char *lease, int fencing, const char *tag,
                         struct it_audit *a)
{
    char sku[64];
    snprintf(sku, sizeof(sku), "FE-%s-%s", tag, guard);
    assert_int_equal(it_seed(sku, 10), 200);
    assert_int_equal(fence_of(sku), 0);
    const char *fence = fencing ? ",\"fencing\":true" : "";

    struct sale first = {0};
    snprintf(first.url, sizeof(first.url), "%s/inventory/deduct", it.inventory[0]);
    snprintf(first.body, sizeof(first.body),
             "{\"sku\":\"%s\",\"guard\":\"%s\",\"hold_ms\":2500%s%s,\"order_id\":\"%s-1\"}",
             sku, guard, lease, fence, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sale_main, &first), 0);
    assert_true(wait_held(guard, sku));
    sleep_ms(500);   /* first has read 10 and holds; its 300 ms lease is gone */

    struct sale second = {0};
    char body[512];
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"%s\",\"lock_wait_ms\":3000%s,\"order_id\":\"%s-2\"}",
             sku, guard, fence, sku);
    long st2 = sell(&second, 1, body);
    pthread_join(t, NULL);
    print_message("%-10s %-9s second: %ld %s\n", guard, tag, st2, second.answer);
    print_message("%-10s %-9s first:  %ld %s\n", guard, tag, first.status, first.answer);
    assert_int_equal(st2, 200);   /* the take-over happened while first held */
    assert_int_equal(it_audit(sku, a), 0);
    print_message("%-10s %-9s audit: stock %lld sold %lld lost %lld consistent %d\n", guard,
                  tag, a->stock, a->sold, a->lost_updates, a->consistent);
    if (fencing)
        assert_true(fence_of(sku) > 0);
    return first.status;
}

#define REDIS_SHORT ",\"watchdog\":false,\"lock_ttl_ms\":300"
#define TABLE_SHORT ",\"lock_ttl_ms\":300"

static void test_redis_lock_stale_holder_unfenced_loses_update(void **state)
{
    struct it_audit a;
    long st = stale_holder("redis-lock", REDIS_SHORT, 0, "unfenced", &a);
    assert_int_equal(st, 200);
    assert_int_equal(a.sold, 2);
    assert_int_equal(a.lost_updates, 1);   /* both wrote 9 */
    assert_false(a.consistent);
}

static void test_redis_lock_stale_holder_fenced(void **state)
{
    struct it_audit a;
    long st = stale_holder("redis-lock", REDIS_SHORT, 1, "fenced", &a);
    assert_int_equal(st, 409);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 9);
    assert_true(a.consistent);
}

static void test_lock_table_stale_holder_unfenced_loses_update(void **state)
{
    struct it_audit a;
    long st = stale_holder("lock-table", TABLE_SHORT, 0, "unfenced", &a);
    assert_int_equal(st, 200);
    assert_int_equal(a.sold, 2);
    assert_int_equal(a.lost_updates, 1);
    assert_false(a.consistent);
}

static void test_lock_table_stale_holder_fenced(void **state)
{
    struct it_audit a;
    long st = stale_holder("lock-table", TABLE_SHORT, 1, "fenced", &a);
    assert_int_equal(st, 409);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 9);
    assert_true(a.consistent);
}

/* The refusal says `fenced` and is counted per guard. */
static void test_fenced_answer_and_metric(void **state)
{
    struct it_audit a;
    assert_int_equal(stale_holder("redis-lock", REDIS_SHORT, 1, "metric", &a), 409);
    struct it_resp r;
    char url[256];
    snprintf(url, sizeof(url), "%s/metrics", it.inventory[0]);
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    int counted = strstr(r.body, "lab_fenced_total{guard=\"redis-lock\"}") != NULL;
    it_resp_free(&r);
    assert_true(counted);
}

/* mutex's token is a per-process counter. Instance 0 sells (token A);
 * instance 1 sells until its counter passes A (each refused try moves it
 * on by one) and writes token B > A; then instance 0 sells alone, nothing
 * else holding or selling, with token A+1 <= B: refused. Two processes'
 * counters are not one order, so fencing a mutex only refuses sales that
 * nobody contested (it does not oversell: the claim still guards the row). */
static void test_mutex_counter_is_not_a_token_across_instances(void **state)
{
    const char *sku = "FE-mutex-counter";
    assert_int_equal(it_seed(sku, 100), 200);
    char body[256];
    struct sale s;
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"mutex\",\"fencing\":true}", sku);
    assert_int_equal(sell(&s, 0, body), 200);
    long long a_token = fence_of(sku);
    int refused = 0;
    long st = 0;
    for (int i = 0; i < 50 && (st = sell(&s, 1, body)) == 409; i++)
        refused++;
    assert_int_equal(st, 200);
    long long b_token = fence_of(sku);
    print_message("mutex: instance 0 wrote token %lld; instance 1 was refused %d time(s), "
                  "then wrote token %lld\n", a_token, refused, b_token);
    assert_true(b_token > a_token);
    st = sell(&s, 0, body);
    print_message("mutex: instance 0 sells alone: %ld %s\n", st, s.answer);
    assert_int_equal(st, 409);
    assert_non_null(strstr(s.answer, "fenced"));
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 2);
    assert_true(a.consistent);
}

/* Guards that take no lock, and redlock, refuse fencing with a 400 and
 * sell nothing. A guard without a lock does not take the field at all:
 * its 400 names it (the JSON answer escapes the quotes). */
#define NO_FENCING "does not accept \\\"fencing\\\""
static void test_fencing_refused_where_no_token(void **state)
{
    static const struct { const char *guard, *extra, *mention; } cases[] = {
        {"none",               "", NO_FENCING},
        {"optimistic",         "", NO_FENCING},
        {"for-update",         "", NO_FENCING},
        {"conditional-update", "", NO_FENCING},
        {"redis-decr",         "", NO_FENCING},
        {"segmented",          "", NO_FENCING},
        {"redlock",            "", "Kleppmann"},
        {"redis-lock",         ",\"acquire\":\"setnx-then-expire\"", "Lua script"},
        {"redis-lock",         ",\"release\":\"plain-del\"", "Lua script"},
    };
    const char *sku = "FE-refused";
    assert_int_equal(it_seed(sku, 10), 200);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[256];
        struct sale s;
        snprintf(body, sizeof(body),
                 "{\"sku\":\"%s\",\"guard\":\"%s\",\"fencing\":true%s}", sku,
                 cases[i].guard, cases[i].extra);
        long st = sell(&s, 0, body);
        print_message("%-18s %ld %s\n", cases[i].guard, st, s.answer);
        assert_int_equal(st, 400);
        assert_non_null(strstr(s.answer, "bad_request"));
        assert_non_null(strstr(s.answer, cases[i].mention));
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 10);
}

/* Fenced load on both instances: each guard's token keeps growing across
 * instances (redis-lock: one counter in Redis; lock-table: the table's
 * AUTO_INCREMENT), so no correct holder is refused and the audit is exact.
 * A reseed puts the fence back to 0. */
static void fenced_load(const char *guard)
{
    char sku[64], fmt[256];
    snprintf(sku, sizeof(sku), "FE-load-%s", guard);
    assert_int_equal(it_seed(sku, 50), 200);
    const char *urls[2];
    char u0[256], u1[256];
    snprintf(u0, sizeof(u0), "%s/inventory/deduct", it.inventory[0]);
    snprintf(u1, sizeof(u1), "%s/inventory/deduct", it.inventory[1]);
    urls[0] = u0;
    urls[1] = u1;
    snprintf(fmt, sizeof(fmt),
             "{\"sku\":\"%s\",\"guard\":\"%s\",\"fencing\":true,\"lock_wait_ms\":10000,"
             "\"order_id\":\"%s-%%d\"}", sku, guard, sku);
    struct it_load l = {.total = 120, .clients = 8, .urls = urls, .nurls = 2,
                        .method = "POST", .body_fmt = fmt};
    it_hammer(&l);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%-10s fenced load: 200 %d, 409 %d, 503 %d; sold %lld stock %lld\n", guard,
                  l.by_status[200], l.by_status[409], l.by_status[503], a.sold, a.stock);
    assert_int_equal(l.by_status[200], 50);
    assert_int_equal(a.sold, 50);
    assert_int_equal(a.stock, 0);
    assert_true(a.consistent);
    assert_true(fence_of(sku) > 0);
    assert_int_equal(it_seed(sku, 5), 200);
    assert_int_equal(fence_of(sku), 0);
}

static void test_redis_lock_fenced_load_exact(void **state) { fenced_load("redis-lock"); }

/* A release lands while a fenced holder is stale (its lease gone): the
 * release takes the lock but issues no token, so the fence alone would let
 * the holder write its stale value over the unit given back. The fenced
 * write also wants the version it read: refused, and the audit is exact. */
static void test_release_during_stale_fenced_hold(void **state)
{
    const char *sku = "FE-release-stale";
    assert_int_equal(it_seed(sku, 10), 200);
    char body[512];
    struct sale s;
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"guard\":\"redis-lock\",\"order_id\":\"%s-sold\"}", sku, sku);
    assert_int_equal(sell(&s, 0, body), 200);

    struct sale holder = {0};
    snprintf(holder.url, sizeof(holder.url), "%s/inventory/deduct", it.inventory[0]);
    snprintf(holder.body, sizeof(holder.body),
             "{\"sku\":\"%s\",\"guard\":\"redis-lock\",\"hold_ms\":2500" REDIS_SHORT
             ",\"fencing\":true,\"order_id\":\"%s-stale\"}", sku, sku);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sale_main, &holder), 0);
    assert_true(wait_held("redis-lock", sku));
    sleep_ms(500);   /* the holder read 9; its lease is gone */

    char url[256], rel[128];
    snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[1]);
    snprintf(rel, sizeof(rel), "{\"order_id\":\"%s-sold\"}", sku);
    long st = it_status("POST", url, rel);
    pthread_join(t, NULL);
    print_message("release %ld; stale holder %ld %s\n", st, holder.status, holder.answer);
    assert_int_equal(st, 200);
    assert_int_equal(holder.status, 409);
    assert_non_null(strstr(holder.answer, "fenced"));
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 0);
    assert_int_equal(a.stock, 10);
    assert_true(a.consistent);
}
static void test_lock_table_fenced_load_exact(void **state) { fenced_load("lock-table"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_lock_stale_holder_unfenced_loses_update),
        cmocka_unit_test(test_redis_lock_stale_holder_fenced),
        cmocka_unit_test(test_lock_table_stale_holder_unfenced_loses_update),
        cmocka_unit_test(test_lock_table_stale_holder_fenced),
        cmocka_unit_test(test_fenced_answer_and_metric),
        cmocka_unit_test(test_mutex_counter_is_not_a_token_across_instances),
        cmocka_unit_test(test_fencing_refused_where_no_token),
        cmocka_unit_test(test_redis_lock_fenced_load_exact),
        cmocka_unit_test(test_lock_table_fenced_load_exact),
        cmocka_unit_test(test_release_during_stale_fenced_hold),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
