/* Case: Redis restarted with sales in flight. The stack's Redis
 * keeps an append-only file (redis-stream needs it); deleting it between
 * stop and start is exactly "Redis lost its data". The Redis-stock guards
 * (redis-decr, segmented) must refuse to sell until a reconciliation that
 * waited for the in-flight sales has reloaded MySQL, then resume by
 * themselves; units given back must never inflate a reloaded Redis; and a
 * redis-lock request right after the restart must not trip on a stale
 * pooled connection. tests/run starts the stack with a short reconcile
 * horizon (REDIS_RELOAD_WAIT_MS); every wait below is bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOLD_MS 4500            /* in-flight sales: decided in Redis, MySQL later */
#define RESUME_BOUND_MS 40000   /* horizon + slack, whatever the build */

static int group_setup(void **state) { return it_setup(); }

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long redis_stock(const char *sku) { return it_redis_num("GET stock:{%s}", sku); }

/* Sum of the SKU's segments in Redis, -1 when its count key is missing. */
static long long redis_segments_sum(const char *sku)
{
    long long k = it_redis_num("GET seg:{%s}:k", sku), sum = 0;
    for (long long i = 0; i < k; i++) {
        char key[160];
        snprintf(key, sizeof(key), "seg:{%s}:%lld", sku, i);
        long long v = it_redis_num("GET %s", key);
        sum += v > 0 ? v : 0;
    }
    return k < 0 ? -1 : sum;
}

/* Stop and start the stack's Redis with its data lost (the append-only
 * file deleted in between); 0 when all worked. Does not assert: callers
 * may have a load running on their stack frame. */
static int restart_redis(void)
{
    double t0 = now_s();
    int rc = it_stack("stop", "redis") != 0 || it_redis_wipe() != 0 ||
             it_stack("start", "redis") != 0;
    print_message("Redis restarted in %.0f ms, %lld keys\n", (now_s() - t0) * 1000,
                  it_redis_num("DBSIZE"));
    return rc;
}

static int backends_up(void **state)
{
    it_stack("start", "redis");
    it_stack("start", "mysql");
    char h[256];
    for (int i = 0; i < 2; i++) {
        snprintf(h, sizeof(h), "%s/healthz", it.inventory[i]);
        it_wait_status(h, 200, 30000);
    }
    return 0;
}

/* Written once, before any load thread reads it. */
static const char *deduct_url(int i)
{
    static char u[2][256];
    if (!u[i][0])
        snprintf(u[i], sizeof(u[i]), "%s/inventory/deduct", it.inventory[i]);
    return u[i];
}

static void seed(const char *sku, long long stock, int segments)
{
    char url[256], body[96];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    snprintf(body, sizeof(body), "{\"stock\":%lld,\"segments\":%d}", stock, segments);
    assert_int_equal(it_status("PUT", url, body), 200);
}

struct bg_load {
    struct it_load l;
    const char *u[2];
    char fmt[256];
};

static void *bg(void *p)
{
    it_hammer(&((struct bg_load *)p)->l);
    return NULL;
}

static void load_init(struct bg_load *b, int total, const char *fmt_head, const char *sku,
                      const char *guard, long hold_ms, const char *tag)
{
    memset(b, 0, sizeof(*b));
    b->u[0] = deduct_url(0);
    b->u[1] = deduct_url(1);
    snprintf(b->fmt, sizeof(b->fmt),
             "%s\"sku\":\"%s\",\"guard\":\"%s\",\"hold_ms\":%ld,\"order_id\":\"%s-%s-%%d\"}",
             fmt_head, sku, guard, hold_ms, sku, tag);
    b->l = (struct it_load){.total = total, .clients = total, .urls = b->u, .nurls = 2,
                            .method = "POST", .body_fmt = b->fmt};
}

/* Poll with one-unit deductions (alternating instances) until one answers
 * something else than 503. Returns that status; *waited_ms the time it took. */
static long until_not_503(const char *sku, const char *guard, const char *tag, long *waited_ms)
{
    double t0 = now_s();
    long s = 0;
    for (int n = 0; (now_s() - t0) * 1000 < RESUME_BOUND_MS; n++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s-%s-%d\"}", sku, guard, sku,
                 tag, n);
        s = it_status("POST", deduct_url(n % 2), body);
        if (s != 503)
            break;
        nap_ms(200);
    }
    *waited_ms = (long)((now_s() - t0) * 1000);
    return s;
}

/* Sales on `guard` held in flight while Redis restarts, buyers arriving
 * right after: nothing may be sold twice, and the guard resumes alone. */
static void in_flight_restart(const char *guard, const char *sku, int segments)
{
    seed(sku, 10, segments ? segments : 4);
    /* One connection at a time: an HTTP thread of the service that takes
     * two connections at once serves the second after the first's hold. */
    struct bg_load held[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "held%d", i);
        load_init(&held[i], 1, "{", sku, guard, HOLD_MS, tag);
        held[i].u[0] = deduct_url(i % 2);
        pthread_create(&t[i], NULL, bg, &held[i]);
        nap_ms(60);
    }
    /* All six decided in Redis (redis-decr) or holding a segment. No
     * assertion may leave this function while `held` runs. */
    long long before = -1;
    for (int n = 0; n < 30 && before != 4; n++) {
        nap_ms(100);
        before = segments ? 4 : redis_stock(sku);
    }
    nap_ms(200);
    int restarted = restart_redis();

    /* Right after the restart: a reconciliation, not a reload. */
    char body[256];
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s-first\"}",
             sku, guard, sku);
    struct it_resp r;
    long first = it_http("POST", deduct_url(0), body, &r);
    print_message("%s first answer after the restart: %ld %s\n", guard, first, r.body);
    int reconciling = first == 503 && strstr(r.body, "backend_unavailable") &&
                      strstr(r.body, "reconcil");
    it_resp_free(&r);
    struct bg_load rush;
    load_init(&rush, 10, "{", sku, guard, 0, "rush");
    it_hammer(&rush.l);
    int held_ok = 0, held_503 = 0;
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        held_ok += held[i].l.by_status[200];
        held_503 += held[i].l.by_status[503];
    }

    long waited;
    long s = until_not_503(sku, guard, "poll", &waited);
    int more = s == 200;
    for (int n = 0; n < 20 && s == 200; n++) {
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"order_id\":\"%s-after-%d\"}",
                 sku, guard, sku, n);
        s = it_status("POST", deduct_url(n % 2), body);
        more += s == 200;
    }
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    long long side = segments ? redis_segments_sum(sku) : redis_stock(sku);
    print_message("%s: in flight 200:%d 503:%d | rush 200:%d 503:%d | resumed after %ld ms, "
                  "then sold %d, last %ld | sold %lld oversold %lld lost %lld redis %lld\n",
                  guard, held_ok, held_503, rush.l.by_status[200],
                  rush.l.by_status[503], waited, more, s, a.sold, a.oversold, a.lost_updates,
                  side);
    assert_int_equal(restarted, 0);
    assert_int_equal(before, 4);
    assert_true(a.sold <= 10);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_true(reconciling);
    assert_int_equal(rush.l.by_status[503], 10);   /* nobody sold before the reconciliation */
    assert_int_equal(s, 409);                      /* resumed, and sold out at the end */
    assert_int_equal(a.sold, 10);                  /* ... with every unit sold once */
    assert_int_equal(a.stock, 0);
    assert_int_equal(side, 0);                     /* Redis agrees with MySQL */
}

static void test_redis_decr_in_flight_restart(void **state)
{
    in_flight_restart("redis-decr", "RR-decr", 0);
}

static void test_segmented_in_flight_restart(void **state)
{
    in_flight_restart("segmented", "RR-seg", 10);
}

/* A qty no SKU here has: reloads if due, sells nothing, answers 409
 * once the guard works again (503 while reconciling). */
static long probe(const char *sku, const char *guard, int i)
{
    char body[160];
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"%s\",\"qty\":1000}", sku, guard);
    return it_status("POST", deduct_url(i), body);
}

static long until_probe_not_503(const char *sku, const char *guard)
{
    double t0 = now_s();
    long s = 0;
    while ((now_s() - t0) * 1000 < RESUME_BOUND_MS && (s = probe(sku, guard, 1)) == 503)
        nap_ms(200);
    return s;
}

/* A sale decided before the restart whose MySQL write is refused after the
 * reload (the ledger already has its order id): giving its unit back must
 * not add it to the reloaded count, which never included it. */
static void test_give_back_after_reload_does_not_inflate(void **state)
{
    const char *sku = "RR-give";
    /* The reload must come before the held sale's write (10 s): only a
     * horizon well below it puts the give-back after a reload. */
    const char *h = getenv("REDIS_RELOAD_WAIT_MS");
    if (!h || atol(h) > 5000)
        fail_msg("needs REDIS_RELOAD_WAIT_MS <= 5000 on the stack (tests/run sets 4000), got %s",
                 h ? h : "the default");
    seed(sku, 10, 4);
    struct bg_load held;
    load_init(&held, 1, "{", sku, "redis-decr", 10000, "held");
    pthread_t t;
    pthread_create(&t, NULL, bg, &held);
    long long before = -1;
    for (int n = 0; n < 20 && before != 9; n++) {
        nap_ms(100);
        before = redis_stock(sku);
    }
    int restarted = restart_redis();
    probe(sku, "redis-decr", 0);                  /* finds the key gone */
    long s = until_probe_not_503(sku, "redis-decr");
    long long reloaded = redis_stock(sku);
    /* The held sale's MySQL write will now hit the ledger's unique key. */
    char sql[512];
    snprintf(sql, sizeof(sql),
             "INSERT INTO db_shopping.ledger (order_id, sku, qty, remaining, guard, instance) "
             "VALUES ('%s-held-0', '%s', 1, 0, 'test', 'test')", sku, sku);
    int inserted = it_sql(sql);
    pthread_join(t, NULL);
    assert_int_equal(restarted, 0);
    assert_int_equal(before, 9);
    assert_int_equal(inserted, 0);
    snprintf(sql, sizeof(sql), "DELETE FROM db_shopping.ledger WHERE order_id = '%s-held-0'",
             sku);
    assert_int_equal(it_sql(sql), 0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("probe %ld, reloaded %lld, held sale %d/%d/%d (200/409/503), redis after "
                  "give-back %lld, mysql %lld\n", s, reloaded, held.l.by_status[200],
                  held.l.by_status[409], held.l.by_status[503], redis_stock(sku), a.stock);
    assert_int_equal(s, 409);
    assert_int_equal(reloaded, 10);
    assert_int_equal(a.stock, 10);
    assert_true(a.consistent);
    assert_int_equal(redis_stock(sku), a.stock);
}

/* A release while Redis has lost the SKU: the reload will count the units,
 * so the release must not create the key (that would both hide the loss
 * from the reconciliation and hold one unit instead of the stock). */
static void test_release_while_reconciling_does_not_create_key(void **state)
{
    const char *sku = "RR-rel";
    seed(sku, 10, 4);
    char body[160], url[256];
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"redis-decr\",\"order_id\":\"%s-%d\"}",
                 sku, sku, i);
        assert_int_equal(it_status("POST", deduct_url(i), body), 200);
    }
    assert_int_equal(restart_redis(), 0);
    snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[1]);
    snprintf(body, sizeof(body), "{\"order_id\":\"%s-0\"}", sku);
    assert_int_equal(it_status("POST", url, body), 200);
    long long after_release = redis_stock(sku);
    long s = until_probe_not_503(sku, "redis-decr");
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("redis after release %lld, probe %ld, redis %lld, mysql %lld\n",
                  after_release, s, redis_stock(sku), a.stock);
    assert_int_equal(after_release, -1);
    assert_int_equal(s, 409);
    assert_int_equal(a.stock, 9);
    assert_true(a.consistent);
    assert_int_equal(redis_stock(sku), 9);
}

/* A release right after a reload: the reload may or may not have read its
 * MySQL commit, so Redis cannot tell whether to add the units. The state is
 * dropped and reconciled again, and ends equal to MySQL. */
static void test_release_right_after_reload_reconciles_again(void **state)
{
    const char *sku = "RR-rel2";
    seed(sku, 10, 4);
    char body[160], url[256];
    snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"redis-decr\",\"order_id\":\"%s-0\"}",
             sku, sku);
    assert_int_equal(it_status("POST", deduct_url(0), body), 200);
    assert_int_equal(restart_redis(), 0);
    assert_int_equal(until_probe_not_503(sku, "redis-decr"), 409);   /* reloaded: 9 */
    long long reloaded = redis_stock(sku);
    snprintf(url, sizeof(url), "%s/inventory/release", it.inventory[1]);
    snprintf(body, sizeof(body), "{\"order_id\":\"%s-0\"}", sku);
    assert_int_equal(it_status("POST", url, body), 200);
    long long after_release = redis_stock(sku);
    long first = probe(sku, "redis-decr", 0);
    long s = until_probe_not_503(sku, "redis-decr");
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("reloaded %lld, after the release %lld, next probe %ld, then %ld, redis %lld, "
                  "mysql %lld\n", reloaded, after_release, first, s, redis_stock(sku), a.stock);
    assert_int_equal(reloaded, 9);
    assert_int_equal(after_release, -1);   /* dropped, not guessed */
    assert_int_equal(first, 503);
    assert_int_equal(s, 409);
    assert_int_equal(a.stock, 10);
    assert_true(a.consistent);
    assert_int_equal(redis_stock(sku), 10);
}

/* GET /inventory/{sku} says the Redis stock is being reconciled instead of
 * omitting it or reporting a number Redis does not have. */
static void test_state_reports_reconciling(void **state)
{
    const char *sku = "RR-state";
    seed(sku, 10, 4);
    assert_int_equal(restart_redis(), 0);
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    struct it_resp r;
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    print_message("state while reconciling: %s\n", r.body);
    json_t *decr = json_object_get(r.json, "redis_stock_reconciling_ms");
    json_t *seg = json_object_get(r.json, "segments_reconciling_ms");
    int ok = json_is_integer(decr) && json_is_integer(seg) &&
             !json_object_get(r.json, "redis_stock");
    it_resp_free(&r);
    assert_true(ok);
    assert_int_equal(until_probe_not_503(sku, "redis-decr"), 409);
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    ok = json_integer_value(json_object_get(r.json, "redis_stock")) == 10 &&
         !json_object_get(r.json, "redis_stock_reconciling_ms");
    it_resp_free(&r);
    assert_true(ok);
}

/* The first redis-lock request on each instance after a restart must not
 * pay for the pooled connections the restart killed. */
static void test_redis_lock_first_request_after_restart(void **state)
{
    const char *sku = "RR-lock";
    seed(sku, 10, 4);
    char body[160];
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"redis-lock\",\"order_id\":\"%s-w%d\"}",
                 sku, sku, i);
        assert_int_equal(it_status("POST", deduct_url(i), body), 200);
    }
    assert_int_equal(restart_redis(), 0);
    long s[2];
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof(body), "{\"sku\":\"%s\",\"guard\":\"redis-lock\",\"order_id\":\"%s-r%d\"}",
                 sku, sku, i);
        struct it_resp r;
        s[i] = it_http("POST", deduct_url(i), body, &r);
        print_message("instance %d, first redis-lock request after the restart: %ld %s\n", i + 1,
                      s[i], r.body);
        it_resp_free(&r);
    }
    assert_int_equal(s[0], 200);
    assert_int_equal(s[1], 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 4);
    assert_true(a.consistent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_redis_decr_in_flight_restart, backends_up),
        cmocka_unit_test_teardown(test_segmented_in_flight_restart, backends_up),
        cmocka_unit_test_teardown(test_give_back_after_reload_does_not_inflate, backends_up),
        cmocka_unit_test_teardown(test_release_while_reconciling_does_not_create_key, backends_up),
        cmocka_unit_test_teardown(test_release_right_after_reload_reconciles_again, backends_up),
        cmocka_unit_test_teardown(test_state_reports_reconciling, backends_up),
        cmocka_unit_test_teardown(test_redis_lock_first_request_after_restart, backends_up),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
