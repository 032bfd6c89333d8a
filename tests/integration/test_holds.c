/* Holds that expire (services/API.md, "Holds"): reserve at checkout,
 * confirm at payment, give back what is never paid, never sell a unit
 * twice when a payment comes late; on the 2 instances of the stack, both
 * running the sweeper. The broken confirm (confirm_check:"none") is shown
 * to oversell. Every test ends on an audit. */
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

static int group_setup(void **state) { return it_setup(); }

static long post(int i, const char *path, const char *body, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", it.inventory[i], path);
    return it_http("POST", url, body, r);
}

/* POST and the status only. */
static long post_status(int i, const char *path, const char *fmt, ...)
{
    char body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    char url[256];
    snprintf(url, sizeof(url), "%s%s", it.inventory[i], path);
    return it_status("POST", url, body);
}

static long reserve(int i, const char *guard, const char *order, const char *sku, int qty,
                    long ttl_ms)
{
    return post_status(i, "/inventory/reserve",
                       "{\"order_id\":\"%s\",\"sku\":\"%s\",\"qty\":%d,\"ttl_ms\":%ld,"
                       "\"guard\":\"%s\"}", order, sku, qty, ttl_ms, guard);
}

static long confirm(int i, const char *order)
{
    return post_status(i, "/inventory/confirm", "{\"order_id\":\"%s\"}", order);
}

static long long field(const struct it_resp *r, const char *name)
{
    json_t *v = json_object_get(r->json, name);
    if (!json_is_integer(v))
        fail_msg("no integer '%s' in %s", name, r->body);
    return json_integer_value(v);
}

static int flag(const struct it_resp *r, const char *name)
{
    return json_is_true(json_object_get(r->json, name));
}

/* The audit's figures, printed; every test reads it at its end. */
static void audit(const char *sku, struct it_resp *r)
{
    it_audit_json(0, sku, r);
    print_message("%-12s initial %lld stock %lld sold %lld held %lld unswept %lld "
                  "oversold %lld lost %lld consistent %d\n", sku, it_audit_field(r, "initial"),
                  it_audit_field(r, "stock"), it_audit_field(r, "sold"),
                  it_audit_field(r, "held"), it_audit_field(r, "expired_unswept"),
                  it_audit_field(r, "oversold"), it_audit_field(r, "lost_updates"),
                  flag(r, "consistent"));
}

static void assert_exact(const char *sku, long long stock, long long sold, long long held)
{
    struct it_resp r;
    audit(sku, &r);
    assert_true(flag(&r, "consistent"));
    assert_int_equal(it_audit_field(&r, "oversold"), 0);
    assert_int_equal(it_audit_field(&r, "lost_updates"), 0);
    assert_int_equal(it_audit_field(&r, "stock"), stock);
    assert_int_equal(it_audit_field(&r, "sold"), sold);
    assert_int_equal(it_audit_field(&r, "held"), held);
    it_resp_free(&r);
}

/* Sweep on both instances until sku holds nothing (at most 5 s). */
static void sweep_until_free(const char *sku)
{
    for (int t = 0; t < 100; t++) {
        struct it_resp r;
        assert_int_equal(post(t % 2, "/inventory/sweep", "", &r), 200);
        it_resp_free(&r);
        it_audit_json(0, sku, &r);
        long long held = it_audit_field(&r, "held");
        it_resp_free(&r);
        if (held == 0)
            return;
        it_sleep_us(50000);
    }
    fail_msg("%s still holds units after 5 s of sweeping", sku);
}

/* Reserve, repeat, confirm, repeat; reserve, release, repeat; under a MySQL
 * guard and a lock guard. */
static void happy_paths(const char *guard, const char *sku)
{
    char o1[64], o2[64];
    snprintf(o1, sizeof(o1), "%s-o1", sku);
    snprintf(o2, sizeof(o2), "%s-o2", sku);
    assert_int_equal(it_seed(sku, 10), 200);
    struct it_resp r, again;
    char body[256];
    snprintf(body, sizeof(body), "{\"order_id\":\"%s\",\"sku\":\"%s\",\"qty\":2,"
             "\"ttl_ms\":60000,\"guard\":\"%s\"}", o1, sku, guard);
    assert_int_equal(post(0, "/inventory/reserve", body, &r), 200);
    assert_true(flag(&r, "held"));
    assert_true(field(&r, "expires_at_ms") > 0);
    assert_int_equal(post(1, "/inventory/reserve", body, &again), 200);   /* a repeat */
    assert_true(flag(&again, "duplicate"));
    assert_int_equal(field(&again, "expires_at_ms"), field(&r, "expires_at_ms"));
    it_resp_free(&r);
    it_resp_free(&again);
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[1], sku);
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    assert_int_equal(field(&r, "stock"), 8);
    assert_int_equal(field(&r, "held"), 2);
    assert_int_equal(field(&r, "available"), 8);
    it_resp_free(&r);
    assert_exact(sku, 8, 0, 2);
    snprintf(body, sizeof(body), "{\"order_id\":\"%s\"}", o1);
    assert_int_equal(post(1, "/inventory/confirm", body, &r), 200);
    assert_int_equal(field(&r, "remaining"), 8);
    assert_false(flag(&r, "fresh"));
    assert_int_equal(post(0, "/inventory/confirm", body, &again), 200);
    assert_true(flag(&again, "duplicate"));
    assert_int_equal(field(&again, "remaining"), 8);
    it_resp_free(&r);
    it_resp_free(&again);
    assert_exact(sku, 8, 2, 0);
    assert_int_equal(reserve(0, guard, o2, sku, 3, 60000), 200);
    assert_exact(sku, 5, 2, 3);
    snprintf(body, sizeof(body), "{\"order_id\":\"%s\"}", o2);
    assert_int_equal(post(1, "/inventory/release", body, &r), 200);
    assert_true(flag(&r, "released"));
    assert_int_equal(post(0, "/inventory/release", body, &again), 200);
    assert_true(flag(&again, "duplicate"));
    it_resp_free(&r);
    it_resp_free(&again);
    assert_int_equal(confirm(0, o2), 409);   /* released: nothing to pay for */
    assert_exact(sku, 8, 2, 0);
}

static void test_happy_paths(void **state)
{
    happy_paths("conditional-update", "Hold-cu");
    happy_paths("for-update", "Hold-fu");
    happy_paths("redis-lock", "Hold-rl");
    assert_int_equal(confirm(0, "Hold-never-reserved"), 404);
}

#define TWINS 16

struct twin {
    int i;
    long status;
    char body[200];
};

static void *twin_reserve(void *arg)
{
    struct twin *t = arg;
    static struct it_resp r[TWINS];   /* large: not on the thread's stack */
    t->status = post(t->i % 2, "/inventory/reserve", "{\"order_id\":\"Hold-twin-1\","
                     "\"sku\":\"Hold-twin\",\"qty\":2,\"ttl_ms\":60000,"
                     "\"guard\":\"conditional-update\"}", &r[t->i]);
    snprintf(t->body, sizeof(t->body), "%s", r[t->i].body);
    it_resp_free(&r[t->i]);
    return NULL;
}

/* The same reserve TWINS times at once on 2 instances: one hold, every
 * answer 200 (a deadlock among them would be a 503). */
static void test_twin_reserves(void **state)
{
    assert_int_equal(it_seed("Hold-twin", 10), 200);
    struct twin t[TWINS];
    pthread_t th[TWINS];
    for (int i = 0; i < TWINS; i++) {
        t[i] = (struct twin){i, -1, ""};
        assert_int_equal(pthread_create(&th[i], NULL, twin_reserve, &t[i]), 0);
    }
    for (int i = 0; i < TWINS; i++) {
        pthread_join(th[i], NULL);
        if (t[i].status != 200)
            fail_msg("twin %d: %ld %s", i, t[i].status, t[i].body);
    }
    assert_exact("Hold-twin", 8, 0, 2);
}

/* GET /guards says which guards reserve; a Redis-stock guard answers a
 * reserve with a 400 that names them, and nothing changes. */
static void test_guards_that_reserve(void **state)
{
    char url[256];
    struct it_resp r;
    snprintf(url, sizeof(url), "%s/guards", it.inventory[0]);
    assert_int_equal(it_http("GET", url, NULL, &r), 200);
    json_t *gs = json_object_get(r.json, "guards");
    size_t i;
    json_t *g;
    int seen = 0;
    json_array_foreach(gs, i, g) {
        const char *name = json_string_value(json_object_get(g, "name"));
        int holds = json_is_true(json_object_get(g, "holds"));
        assert_true(json_is_boolean(json_object_get(g, "holds")));
        if (strcmp(name, "conditional-update") == 0 || strcmp(name, "redis-lock") == 0 ||
            strcmp(name, "redis-stream") == 0)   /* redis-stream: holds in Redis */
            assert_true(holds), seen++;
        if (strcmp(name, "redis-decr") == 0 || strcmp(name, "segmented") == 0)
            assert_false(holds), seen++;
    }
    assert_int_equal(seen, 5);
    it_resp_free(&r);
    assert_int_equal(it_seed("Hold-redis", 5), 200);
    assert_int_equal(post(0, "/inventory/reserve", "{\"order_id\":\"Hold-redis-1\","
                          "\"sku\":\"Hold-redis\",\"guard\":\"redis-decr\"}", &r), 400);
    assert_non_null(strstr(r.body, "conditional-update"));
    it_resp_free(&r);
    assert_exact("Hold-redis", 5, 0, 0);
}

/* lab_holds_swept_total over both instances (absent: 0). */
static double swept_total(void)
{
    double sum = 0;
    for (int i = 0; i < 2; i++) {
        double v = it_metric(i, "lab_holds_swept_total");
        sum += v > 0 ? v : 0;
    }
    return sum;
}

/* A hold never paid: past its deadline the sweeper gives its units back. */
static void test_expiry_gives_back(void **state)
{
    assert_int_equal(it_seed("Hold-exp", 5), 200);
    double swept = swept_total();
    assert_int_equal(reserve(0, "conditional-update", "Hold-exp-1", "Hold-exp", 3, 100), 200);
    assert_int_equal(reserve(1, "redis-lock", "Hold-exp-2", "Hold-exp", 1, 100), 200);
    assert_exact("Hold-exp", 1, 0, 4);
    sweep_until_free("Hold-exp");
    assert_exact("Hold-exp", 5, 0, 0);
    struct it_resp r;
    audit("Hold-exp", &r);
    assert_int_equal(it_audit_field(&r, "expired_unswept"), 0);
    it_resp_free(&r);
    assert_true(swept_total() - swept >= 2);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE "
                                  "sku='Hold-exp' AND state='expired'"), 2);
}

/* A payment after the deadline: the hold was swept and its unit sold to
 * someone else, the stock is gone: 409 hold_expired, never a second sale
 * of that unit. With stock left, the late payment takes a fresh unit. */
static void test_late_confirm(void **state)
{
    assert_int_equal(it_seed("Hold-late", 1), 200);
    assert_int_equal(reserve(0, "conditional-update", "Hold-late-a", "Hold-late", 1, 100), 200);
    sweep_until_free("Hold-late");
    assert_int_equal(post_status(1, "/inventory/deduct", "{\"order_id\":\"Hold-late-b\","
                                 "\"sku\":\"Hold-late\",\"guard\":\"conditional-update\"}"),
                     200);
    struct it_resp r;
    assert_int_equal(post(1, "/inventory/confirm", "{\"order_id\":\"Hold-late-a\"}", &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "hold_expired");
    it_resp_free(&r);
    assert_exact("Hold-late", 0, 1, 0);

    assert_int_equal(it_seed("Hold-fresh", 2), 200);
    assert_int_equal(reserve(1, "conditional-update", "Hold-fresh-a", "Hold-fresh", 1, 100),
                     200);
    it_sleep_us(300000);   /* past the deadline, swept or not: both are decided alike */
    assert_int_equal(post(0, "/inventory/confirm", "{\"order_id\":\"Hold-fresh-a\"}", &r), 200);
    assert_true(flag(&r, "fresh"));
    it_resp_free(&r);
    assert_exact("Hold-fresh", 1, 1, 0);
}

/* Bad input is a 400 that changes nothing. */
static void test_bad_input(void **state)
{
    static const char *const bodies[] = {
        "{\"order_id\":\"Hold-bad-1\",\"sku\":\"Hold-bad\",\"ttl_ms\":99}",
        "{\"order_id\":\"Hold-bad-1\",\"sku\":\"Hold-bad\",\"ttl_ms\":3600001}",
        "{\"order_id\":\"Hold-bad-1\",\"sku\":\"Hold-bad\",\"ttl_ms\":\"5s\"}",
        "{\"order_id\":\"Hold-bad-1\",\"sku\":\"Hold-bad\",\"hold_ms\":10}",
        "{\"order_id\":\"Hold-bad-1\",\"lines\":[]}",
        "{\"order_id\":\"Hold-bad-1\",\"lines\":[{\"sku\":\"Hold-bad\",\"qty\":0}]}",
        "{\"order_id\":\"Hold-bad-1\",\"sku\":\"Hold-bad\",\"lines\":[{\"sku\":"
        "\"Hold-bad\",\"qty\":1}]}",
        "{\"order_id\":\"Hold-bad-1\",\"lines\":[{\"sku\":\"Hold-bad\",\"qty\":1}],"
        "\"line_check\":\"per-line\"}",
        "{\"sku\":\"Hold-bad\"}",
        "{\"order_id\":\"Hold-bad-1\",\"sku\":\"Hold-bad\",\"qty\":0}",
        "{\"order_id\":\"bad id!\",\"sku\":\"Hold-bad\"}",
        "[1]",
        "not json",
    };
    assert_int_equal(it_seed("Hold-bad", 3), 200);
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct it_resp r;
        long st = post(i % 2, "/inventory/reserve", bodies[i], &r);
        if (st != 400 || !json_is_string(json_object_get(r.json, "detail")))
            fail_msg("reserve %s: %ld %s", bodies[i], st, r.body);
        it_resp_free(&r);
    }
    assert_int_equal(reserve(0, "conditional-update", "Hold-bad-2", "Hold-bad", 1, 60000), 200);
    assert_int_equal(post_status(0, "/inventory/confirm", "{\"order_id\":\"Hold-bad-2\","
                                 "\"confirm_check\":\"maybe\"}"), 400);
    assert_int_equal(post_status(0, "/inventory/confirm", "{\"order_id\":\"Hold-bad-2\","
                                 "\"qty\":1}"), 400);
    assert_int_equal(post_status(0, "/inventory/confirm", "{}"), 400);
    assert_exact("Hold-bad", 2, 0, 1);
    /* a sale under a hold's order id, then its confirm: refused, nothing changes */
    assert_int_equal(post_status(1, "/inventory/deduct", "{\"order_id\":\"Hold-bad-2\","
                                 "\"sku\":\"Hold-bad\",\"guard\":\"conditional-update\"}"),
                     200);
    assert_int_equal(confirm(0, "Hold-bad-2"), 409);
    assert_exact("Hold-bad", 1, 1, 1);
    assert_int_equal(reserve(0, "conditional-update", "Hold-bad-2", "Hold-bad", 1, 60000),
                     200);   /* a repeat of the hold itself */
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE sku='Hold-bad'"),
                     1);
}

/* The broken confirm: confirm_check "none" pays a hold whose unit the
 * sweeper gave back and another buyer bought: that unit is sold twice. */
/* ---- holds that carry a buyer: purchase limits ----------------------- */

static long seed_limit(const char *sku, long long stock, long limit)
{
    char url[256], body[128];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    snprintf(body, sizeof(body), "{\"stock\":%lld,\"limit_per_user\":%ld}", stock, limit);
    return it_status("PUT", url, body);
}

static long reserve_as(int i, const char *guard, const char *order, const char *sku,
                       const char *user, long ttl_ms)
{
    return post_status(i, "/inventory/reserve",
                       "{\"order_id\":\"%s\",\"sku\":\"%s\",\"user_id\":\"%s\","
                       "\"ttl_ms\":%ld,\"guard\":\"%s\"}", order, sku, user, ttl_ms, guard);
}

static long long bought(const char *sku, const char *user)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COALESCE(SUM(bought), 0) FROM db_shopping."
             "user_purchases WHERE sku='%s' AND user_id='%s'", sku, user);
    return it_sql_value(sql);
}

static void assert_no_over_limit(const char *sku)
{
    struct it_resp r;
    audit(sku, &r);
    assert_int_equal(it_audit_field(&r, "over_limit"), 0);
    it_resp_free(&r);
}

/* 16 reserves of one unit by user u1 at once over both instances. */
static void hold_race(struct it_load *l, const char *sku, const char *guard, char *fmt,
                      size_t fmtlen)
{
    static char urls_buf[2][256];
    static const char *const urls[2] = {urls_buf[0], urls_buf[1]};
    for (int i = 0; i < 2; i++)
        snprintf(urls_buf[i], sizeof(urls_buf[i]), "%s/inventory/reserve", it.inventory[i]);
    snprintf(fmt, fmtlen, "{\"sku\":\"%s\",\"user_id\":\"u1\",\"order_id\":\"%s-%%d\","
             "\"ttl_ms\":1500,\"guard\":\"%s\"}", sku, sku, guard);
    memset(l, 0, sizeof(*l));
    l->total = l->clients = 16;
    l->urls = urls;
    l->nurls = 2;
    l->method = "POST";
    l->body_fmt = fmt;
    it_hammer(l);
    print_message("%-12s %-18s 200:%d 409:%d other:%d\n", sku, guard, l->by_status[200],
                  l->by_status[409], l->total - l->by_status[200] - l->by_status[409]);
}

/* Limit 2: one user racing 16 reserves on 2 instances holds exactly 2 (a
 * live hold counts as a sale); the expiry gives the quota back (2 more may
 * be held), and so does a release. */
static void limited_holds(const char *guard, const char *sku)
{
    char fmt[256], o[64];
    struct it_load l;
    assert_int_equal(seed_limit(sku, 20, 2), 200);
    hold_race(&l, sku, guard, fmt, sizeof(fmt));
    assert_int_equal(l.by_status[200], 2);
    assert_int_equal(l.by_status[409], 14);
    assert_int_equal(bought(sku, "u1"), 2);
    assert_exact(sku, 18, 0, 2);
    assert_no_over_limit(sku);
    sweep_until_free(sku);
    assert_int_equal(bought(sku, "u1"), 0);
    assert_exact(sku, 20, 0, 0);
    for (int i = 0; i < 3; i++) {
        snprintf(o, sizeof(o), "%s-again-%d", sku, i);
        assert_int_equal(reserve_as(i % 2, guard, o, sku, "u1", 60000), i < 2 ? 200 : 409);
    }
    snprintf(o, sizeof(o), "%s-u2", sku);
    assert_int_equal(reserve_as(0, guard, o, sku, "u2", 60000), 200);   /* another quota */
    snprintf(o, sizeof(o), "%s-again-0", sku);
    assert_int_equal(post_status(1, "/inventory/release", "{\"order_id\":\"%s\"}", o), 200);
    assert_int_equal(bought(sku, "u1"), 1);
    snprintf(o, sizeof(o), "%s-again-3", sku);
    assert_int_equal(reserve_as(0, guard, o, sku, "u1", 60000), 200);
    assert_int_equal(confirm(1, o), 200);
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_shopping.ledger WHERE order_id='%s' "
             "AND user_id='u1'", o);
    assert_int_equal(it_sql_value(sql), 1);   /* the confirm's sale names its buyer */
    assert_int_equal(bought(sku, "u1"), 2);
    assert_exact(sku, 17, 1, 2);
    assert_no_over_limit(sku);
}

static void test_limited_holds(void **state)
{
    limited_holds("conditional-update", "Hold-lim-cu");
    limited_holds("redis-lock", "Hold-lim-rl");
}

/* A late confirm on fresh units charges the quota again: refused (409
 * limit_exceeded, the expiry stays) when the buyer used it meanwhile. */
static void test_limited_late_confirm(void **state)
{
    struct it_resp r;
    assert_int_equal(seed_limit("Hold-liml", 5, 1), 200);
    assert_int_equal(reserve_as(0, "conditional-update", "Hold-liml-a", "Hold-liml", "u1", 100),
                     200);
    sweep_until_free("Hold-liml");
    assert_int_equal(reserve_as(1, "conditional-update", "Hold-liml-b", "Hold-liml", "u1",
                                60000), 200);
    assert_int_equal(post(1, "/inventory/confirm", "{\"order_id\":\"Hold-liml-a\"}", &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "limit_exceeded");
    it_resp_free(&r);
    assert_exact("Hold-liml", 4, 0, 1);
    assert_int_equal(post_status(0, "/inventory/release", "{\"order_id\":\"Hold-liml-b\"}"),
                     200);
    assert_int_equal(post(0, "/inventory/confirm", "{\"order_id\":\"Hold-liml-a\"}", &r), 200);
    assert_true(flag(&r, "fresh"));
    it_resp_free(&r);
    assert_int_equal(bought("Hold-liml", "u1"), 1);
    assert_exact("Hold-liml", 4, 1, 0);
    assert_no_over_limit("Hold-liml");
}

/* A limited SKU's reserve without a buyer, or with a bad one, is a 400
 * that changes nothing. */
static void test_limited_bad_input(void **state)
{
    static const char *const bodies[] = {
        "{\"order_id\":\"Hold-limb-1\",\"sku\":\"Hold-limb\"}",
        "{\"order_id\":\"Hold-limb-1\",\"sku\":\"Hold-limb\",\"user_id\":\"\"}",
        "{\"order_id\":\"Hold-limb-1\",\"sku\":\"Hold-limb\",\"user_id\":\"bad id!\"}",
        "{\"order_id\":\"Hold-limb-1\",\"sku\":\"Hold-limb\",\"user_id\":7}",
        "{\"order_id\":\"Hold-limb-1\",\"sku\":\"Hold-limb\",\"user_id\":\"u1\",\"qty\":0}",
    };
    assert_int_equal(seed_limit("Hold-limb", 5, 1), 200);
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct it_resp r;
        long st = post(i % 2, "/inventory/reserve", bodies[i], &r);
        if (st != 400 || !json_is_string(json_object_get(r.json, "detail")))
            fail_msg("reserve %s: %ld %s", bodies[i], st, r.body);
        it_resp_free(&r);
    }
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE "
                                  "sku='Hold-limb'"), 0);
    assert_int_equal(bought("Hold-limb", "u1"), 0);
    assert_exact("Hold-limb", 5, 0, 0);
}

static void test_confirm_check_none_oversells(void **state)
{
    assert_int_equal(it_seed("Hold-none", 1), 200);
    assert_int_equal(reserve(0, "conditional-update", "Hold-none-a", "Hold-none", 1, 100), 200);
    sweep_until_free("Hold-none");
    assert_int_equal(post_status(1, "/inventory/deduct", "{\"order_id\":\"Hold-none-b\","
                                 "\"sku\":\"Hold-none\",\"guard\":\"conditional-update\"}"),
                     200);
    assert_int_equal(post_status(1, "/inventory/confirm", "{\"order_id\":\"Hold-none-a\","
                                 "\"confirm_check\":\"none\"}"), 200);
    struct it_resp r;
    audit("Hold-none", &r);
    assert_false(flag(&r, "consistent"));       /* broke, as expected */
    assert_int_equal(it_audit_field(&r, "sold"), 2);
    assert_int_equal(it_audit_field(&r, "oversold"), 1);
    assert_non_null(strstr(r.body, "Hold-none-a"));   /* named in late_confirms */
    it_resp_free(&r);
}

/* ---- a confirm racing the sweeper, decided once ----------------------- */

#define RACE_N 40
#define RACE_TTL_MS 400

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

struct racer {
    int k;
    double at_ms;              /* when to fire (monotonic ms) */
    long status;
};

static void wait_until(double at_ms)
{
    double left = at_ms - now_ms();
    if (left > 0)
        it_sleep_us((long)(left * 1000));
}

static void *confirm_racer(void *arg)
{
    struct racer *r = arg;
    char order[64];
    snprintf(order, sizeof(order), "Hold-race-%d", r->k);
    wait_until(r->at_ms);
    r->status = confirm(r->k % 2, order);
    return NULL;
}

/* Buyers of units the sweeper gives back, and sweeps on both instances. */
static void *buyer_racer(void *arg)
{
    struct racer *r = arg;
    wait_until(r->at_ms);
    r->status = post_status(r->k % 2, "/inventory/deduct", "{\"order_id\":\"Hold-buy-%d\","
                            "\"sku\":\"Hold-race\",\"guard\":\"conditional-update\"}", r->k);
    return NULL;
}

static void *sweep_racer(void *arg)
{
    struct racer *r = arg;
    wait_until(r->at_ms);
    for (int i = 0; i < 10; i++)
        post_status(r->k % 2, "/inventory/sweep", "");
    return NULL;
}

static void test_confirm_races_sweeper(void **state)
{
    assert_int_equal(it_seed("Hold-race", RACE_N), 200);
    double t0 = now_ms();
    for (int k = 0; k < RACE_N; k++) {
        char order[64];
        snprintf(order, sizeof(order), "Hold-race-%d", k);
        assert_int_equal(reserve(k % 2, "conditional-update", order, "Hold-race", 1,
                                 RACE_TTL_MS), 200);
    }
    /* confirms spread over the deadline of the holds (-40..+160 ms), buyers
     * and sweeps in the first part of that window: late confirms meet
     * units given back, some taken by buyers already */
    struct racer conf[RACE_N], buy[RACE_N], sw[4];
    pthread_t tc[RACE_N], tb[RACE_N], ts[4];
    for (int k = 0; k < RACE_N; k++) {
        conf[k] = (struct racer){k, t0 + RACE_TTL_MS - 40 + (k * 200.0) / RACE_N, -1};
        buy[k] = (struct racer){k, t0 + RACE_TTL_MS + (k * 60.0) / RACE_N, -1};
        assert_int_equal(pthread_create(&tc[k], NULL, confirm_racer, &conf[k]), 0);
        assert_int_equal(pthread_create(&tb[k], NULL, buyer_racer, &buy[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        sw[k] = (struct racer){k, t0 + RACE_TTL_MS - 10 + k * 10, -1};
        assert_int_equal(pthread_create(&ts[k], NULL, sweep_racer, &sw[k]), 0);
    }
    int paid = 0, expired = 0, bought = 0;
    for (int k = 0; k < RACE_N; k++) {
        pthread_join(tc[k], NULL);
        pthread_join(tb[k], NULL);
        paid += conf[k].status == 200;
        expired += conf[k].status == 409;
        bought += buy[k].status == 200;
    }
    for (int k = 0; k < 4; k++)
        pthread_join(ts[k], NULL);
    print_message("race: %d paid, %d hold_expired, %d bought by others\n", paid, expired,
                  bought);
    assert_int_equal(paid + expired, RACE_N);
    assert_true(paid + bought <= RACE_N);       /* no unit sold twice */
    sweep_until_free("Hold-race");
    assert_exact("Hold-race", RACE_N - paid - bought, paid + bought, 0);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE "
                                  "sku='Hold-race' AND state='confirmed'"), paid);
    for (int k = 0; k < RACE_N; k++) {   /* a paid one answers as before */
        char order[64];
        snprintf(order, sizeof(order), "Hold-race-%d", k);
        if (conf[k].status == 200)
            assert_int_equal(confirm((k + 1) % 2, order), 200);
    }
}

/* ---- the order service: pay_within_ms, POST /orders/{id}/pay ---------- */

static long order_post(const char *body, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/orders", it.order);
    return it_http("POST", url, body, r);
}

static long order_pay(const char *order_id, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/orders/%s/pay", it.order, order_id);
    return it_http("POST", url, NULL, r);
}

static long long order_status_is(const char *order_id, const char *status)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM db_order.orders WHERE order_id='%s' "
             "AND status='%s'", order_id, status);
    return it_sql_value(sql);
}

/* Paid in the window: paid; paid late: 409 hold_expired and the order
 * expired; never paid: the reconciler expires it and the units are back. */
static void test_orders_awaiting_payment(void **state)
{
    assert_int_equal(it_seed("Hold-ord", 3), 200);
    struct it_resp r;
    assert_int_equal(order_post("{\"sku\":\"Hold-ord\",\"order_id\":\"Hold-ord-1\","
                                "\"pay_within_ms\":60000,\"guard\":\"conditional-update\"}",
                                &r), 201);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")),
                        "awaiting_payment");
    it_resp_free(&r);
    assert_exact("Hold-ord", 2, 0, 1);
    assert_int_equal(order_pay("Hold-ord-1", &r), 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "paid");
    it_resp_free(&r);
    assert_int_equal(order_pay("Hold-ord-1", &r), 200);   /* a repeat */
    assert_true(flag(&r, "duplicate"));
    it_resp_free(&r);
    assert_exact("Hold-ord", 2, 1, 0);

    assert_int_equal(order_post("{\"sku\":\"Hold-ord\",\"order_id\":\"Hold-ord-2\","
                                "\"pay_within_ms\":100,\"guard\":\"conditional-update\"}",
                                &r), 201);
    it_resp_free(&r);
    assert_int_equal(order_post("{\"sku\":\"Hold-ord\",\"order_id\":\"Hold-ord-3\","
                                "\"pay_within_ms\":100,\"guard\":\"redis-lock\"}", &r), 201);
    it_resp_free(&r);
    it_sleep_us(300000);
    assert_int_equal(order_pay("Hold-ord-2", &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "hold_expired");
    it_resp_free(&r);
    assert_int_equal(order_status_is("Hold-ord-2", "expired"), 1);
    int t = 0;   /* never paid: the reconciler (1 s, 2 s margin) expires it */
    while (order_status_is("Hold-ord-3", "expired") != 1 && t++ < 100)
        it_sleep_us(100000);
    assert_int_equal(order_status_is("Hold-ord-3", "expired"), 1);
    sweep_until_free("Hold-ord");
    assert_exact("Hold-ord", 2, 1, 0);
    assert_int_equal(order_post("{\"sku\":\"Hold-ord\",\"pay_within_ms\":99}", &r), 400);
    it_resp_free(&r);
    assert_int_equal(order_post("{\"sku\":\"Hold-ord\",\"pay_within_ms\":1000,"
                                "\"hold_ms\":5}", &r), 400);
    it_resp_free(&r);
    assert_int_equal(order_pay("Hold-ord-none", &r), 404);
    it_resp_free(&r);
    assert_exact("Hold-ord", 2, 1, 0);
}

/* POST /orders with pay_within_ms passes the buyer to the reserve: the
 * limit holds through the order service too. */
static void test_orders_hold_limited(void **state)
{
    struct it_resp r;
    assert_int_equal(seed_limit("Hold-ordl", 5, 1), 200);
    assert_int_equal(order_post("{\"sku\":\"Hold-ordl\",\"order_id\":\"Hold-ordl-1\","
                                "\"user_id\":\"u7\",\"pay_within_ms\":60000,"
                                "\"guard\":\"conditional-update\"}", &r), 201);
    it_resp_free(&r);
    long st = order_post("{\"sku\":\"Hold-ordl\",\"order_id\":\"Hold-ordl-2\",\"user_id\":"
                         "\"u7\",\"pay_within_ms\":60000,\"guard\":\"conditional-update\"}", &r);
    print_message("second order of u7: %ld %s\n", st, r.body);
    assert_int_equal(st, 409);
    it_resp_free(&r);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE "
                                  "order_id='Hold-ordl-1' AND user_id='u7'"), 1);
    assert_int_equal(bought("Hold-ordl", "u7"), 1);
    assert_exact("Hold-ordl", 4, 0, 1);
    assert_int_equal(order_pay("Hold-ordl-1", &r), 200);
    it_resp_free(&r);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE "
                                  "order_id='Hold-ordl-1' AND user_id='u7'"), 1);
    assert_exact("Hold-ordl", 4, 1, 0);
    assert_no_over_limit("Hold-ordl");
}

/* ---- holds of carts ("lines") ------------------------------------------ */

static long cart_reserve(int i, const char *guard, const char *order, const char *lines,
                         long ttl_ms, struct it_resp *r)
{
    char body[512];
    snprintf(body, sizeof(body), "{\"order_id\":\"%s\",\"lines\":%s,\"ttl_ms\":%ld,"
             "\"guard\":\"%s\"}", order, lines, ttl_ms, guard);
    return post(i, "/inventory/reserve", body, r);
}

/* A cart held whole (lines on one SKU summed), repeated, refused whole
 * with every short line listed, confirmed whole into a ledger row per SKU. */
static void test_cart_hold(void **state)
{
    struct it_resp r;
    assert_int_equal(it_seed("Hold-cA", 5), 200);
    assert_int_equal(it_seed("Hold-cB", 5), 200);
    const char *lines = "[{\"sku\":\"Hold-cB\",\"qty\":2},{\"sku\":\"Hold-cA\",\"qty\":1},"
                        "{\"sku\":\"Hold-cA\",\"qty\":1}]";
    assert_int_equal(cart_reserve(0, "conditional-update", "Hold-c-1", lines, 60000, &r), 200);
    json_t *l = json_object_get(r.json, "lines");
    assert_int_equal(json_array_size(l), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "sku")),
                        "Hold-cA");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(l, 0), "qty")), 2);
    it_resp_free(&r);
    assert_int_equal(cart_reserve(1, "conditional-update", "Hold-c-1", lines, 60000, &r), 200);
    assert_true(flag(&r, "duplicate"));
    it_resp_free(&r);
    assert_exact("Hold-cA", 3, 0, 2);
    assert_exact("Hold-cB", 3, 0, 2);
    assert_int_equal(cart_reserve(1, "redis-lock", "Hold-c-2", "[{\"sku\":\"Hold-cA\",\"qty\":"
                                  "4},{\"sku\":\"Hold-cB\",\"qty\":4}]", 60000, &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "out_of_stock");
    assert_int_equal(json_array_size(json_object_get(r.json, "short")), 2);
    it_resp_free(&r);
    assert_int_equal(cart_reserve(0, "redis-lock", "Hold-c-3", "[{\"sku\":\"Hold-cA\",\"qty\":"
                                  "1},{\"sku\":\"Hold-none-such\",\"qty\":1}]", 60000, &r), 404);
    it_resp_free(&r);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE "
                                  "order_id IN ('Hold-c-2', 'Hold-c-3')"), 0);
    assert_exact("Hold-cA", 3, 0, 2);
    assert_exact("Hold-cB", 3, 0, 2);
    assert_int_equal(post(1, "/inventory/confirm", "{\"order_id\":\"Hold-c-1\"}", &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "lines")), 2);
    it_resp_free(&r);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE "
                                  "order_id='Hold-c-1'"), 2);
    assert_exact("Hold-cA", 3, 2, 0);
    assert_exact("Hold-cB", 3, 2, 0);
    assert_int_equal(post_status(0, "/inventory/release", "{\"order_id\":\"Hold-c-1\"}"), 200);
    assert_exact("Hold-cA", 5, 0, 0);
    assert_exact("Hold-cB", 5, 0, 0);
}

/* A cart hold never paid: the sweeper gives every line back at once; a
 * release gives every line back too. */
static void test_cart_hold_expiry(void **state)
{
    struct it_resp r;
    assert_int_equal(it_seed("Hold-ceA", 4), 200);
    assert_int_equal(it_seed("Hold-ceB", 4), 200);
    const char *lines = "[{\"sku\":\"Hold-ceA\",\"qty\":3},{\"sku\":\"Hold-ceB\",\"qty\":1}]";
    assert_int_equal(cart_reserve(0, "redis-lock", "Hold-ce-1", lines, 100, &r), 200);
    it_resp_free(&r);
    assert_int_equal(cart_reserve(1, "conditional-update", "Hold-ce-2", lines, 60000, &r), 409);
    it_resp_free(&r);
    sweep_until_free("Hold-ceA");
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE "
                                  "order_id='Hold-ce-1' AND state='expired'"), 2);
    assert_exact("Hold-ceA", 4, 0, 0);
    assert_exact("Hold-ceB", 4, 0, 0);
    assert_int_equal(confirm(1, "Hold-ce-1"), 200);   /* late, fresh units: every line */
    assert_exact("Hold-ceA", 1, 3, 0);
    assert_exact("Hold-ceB", 3, 1, 0);
    assert_int_equal(post_status(0, "/inventory/release", "{\"order_id\":\"Hold-ce-1\"}"), 200);
    assert_int_equal(cart_reserve(1, "conditional-update", "Hold-ce-3", lines, 60000, &r), 200);
    it_resp_free(&r);
    assert_int_equal(post_status(0, "/inventory/release", "{\"order_id\":\"Hold-ce-3\"}"), 200);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.holds WHERE "
                                  "order_id='Hold-ce-3' AND state='released'"), 2);
    assert_exact("Hold-ceA", 4, 0, 0);
    assert_exact("Hold-ceB", 4, 0, 0);
}

/* A cart with a limited line counts that line against the buyer: a second
 * cart past the limit is refused whole (its other line not held either);
 * the release gives the quota back. */
static void test_cart_hold_limited(void **state)
{
    struct it_resp r;
    char body[512];
    assert_int_equal(seed_limit("Hold-clL", 10, 1), 200);
    assert_int_equal(it_seed("Hold-clA", 10), 200);
    const char *fmt = "{\"order_id\":\"%s\",\"user_id\":\"u1\",\"guard\":\"redis-lock\","
                      "\"lines\":[{\"sku\":\"Hold-clL\",\"qty\":1},{\"sku\":\"Hold-clA\","
                      "\"qty\":2}]}";
    snprintf(body, sizeof(body), fmt, "Hold-cl-1");
    assert_int_equal(post(0, "/inventory/reserve", body, &r), 200);
    it_resp_free(&r);
    snprintf(body, sizeof(body), fmt, "Hold-cl-2");
    assert_int_equal(post(1, "/inventory/reserve", body, &r), 409);
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "limit_exceeded");
    it_resp_free(&r);
    assert_int_equal(post(1, "/inventory/reserve", "{\"order_id\":\"Hold-cl-3\",\"lines\":"
                          "[{\"sku\":\"Hold-clA\",\"qty\":1},{\"sku\":\"Hold-clL\",\"qty\":1}]}",
                          &r), 400);   /* a limited line, no buyer */
    it_resp_free(&r);
    assert_exact("Hold-clL", 9, 0, 1);
    assert_exact("Hold-clA", 8, 0, 2);
    assert_int_equal(bought("Hold-clL", "u1"), 1);
    assert_int_equal(post_status(0, "/inventory/release", "{\"order_id\":\"Hold-cl-1\"}"), 200);
    assert_int_equal(bought("Hold-clL", "u1"), 0);
    assert_int_equal(post(1, "/inventory/reserve", body, &r), 200);
    it_resp_free(&r);
    assert_exact("Hold-clL", 9, 0, 1);
    assert_exact("Hold-clA", 8, 0, 2);
    assert_no_over_limit("Hold-clL");
}

/* POST /orders with lines and pay_within_ms holds the cart whole; the
 * payment confirms every line. */
static void test_orders_cart_hold(void **state)
{
    struct it_resp r;
    assert_int_equal(it_seed("Hold-ocA", 3), 200);
    assert_int_equal(it_seed("Hold-ocB", 3), 200);
    assert_int_equal(order_post("{\"order_id\":\"Hold-oc-1\",\"pay_within_ms\":60000,"
                                "\"guard\":\"redis-lock\",\"lines\":[{\"sku\":\"Hold-ocA\","
                                "\"qty\":1},{\"sku\":\"Hold-ocB\",\"qty\":2}]}", &r), 201);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")),
                        "awaiting_payment");
    assert_int_equal(json_array_size(json_object_get(r.json, "lines")), 2);
    it_resp_free(&r);
    assert_exact("Hold-ocA", 2, 0, 1);
    assert_exact("Hold-ocB", 1, 0, 2);
    long st = order_post("{\"order_id\":\"Hold-oc-2\",\"pay_within_ms\":60000,\"lines\":"
                         "[{\"sku\":\"Hold-ocA\",\"qty\":1},{\"sku\":\"Hold-ocB\",\"qty\":2}]}",
                         &r);
    print_message("short cart order: %ld %s\n", st, r.body);
    assert_int_equal(st, 409);
    it_resp_free(&r);
    assert_int_equal(order_pay("Hold-oc-1", &r), 200);
    it_resp_free(&r);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM db_shopping.ledger WHERE "
                                  "order_id='Hold-oc-1'"), 2);
    assert_exact("Hold-ocA", 2, 1, 0);
    assert_exact("Hold-ocB", 1, 2, 0);
}

#define CROSSED 32

struct crossed {
    int i;
    const char *guard;
    long status;
};

static void *crossed_reserve(void *arg)
{
    struct crossed *c = arg;
    static struct it_resp r[CROSSED];
    char order[64];
    snprintf(order, sizeof(order), "Hold-x-%s-%d", c->guard, c->i);
    /* half the carts name X then Y, half Y then X */
    c->status = cart_reserve(c->i % 2, c->guard, order, c->i % 4 < 2
                             ? "[{\"sku\":\"Hold-xX\",\"qty\":1},{\"sku\":\"Hold-xY\",\"qty\":1}]"
                             : "[{\"sku\":\"Hold-xY\",\"qty\":1},{\"sku\":\"Hold-xX\",\"qty\":1}]",
                             60000, &r[c->i]);
    it_resp_free(&r[c->i]);
    return NULL;
}

static void *twin_cart(void *arg)
{
    struct crossed *c = arg;
    static struct it_resp r[CROSSED];
    c->status = cart_reserve(c->i % 2, c->guard, "Hold-tc-1", "[{\"sku\":\"Hold-tcB\",\"qty\":"
                             "1},{\"sku\":\"Hold-tcA\",\"qty\":2}]", 60000, &r[c->i]);
    it_resp_free(&r[c->i]);
    return NULL;
}

/* The same cart reserve 16 times at once on 2 instances: one hold (two
 * rows), every answer 200 (a deadlock among them would be a 503). */
static void test_twin_cart_holds(void **state)
{
    assert_int_equal(it_seed("Hold-tcA", 10), 200);
    assert_int_equal(it_seed("Hold-tcB", 10), 200);
    struct crossed c[16];
    pthread_t th[16];
    for (int i = 0; i < 16; i++) {
        c[i] = (struct crossed){i, "conditional-update", -1};
        assert_int_equal(pthread_create(&th[i], NULL, twin_cart, &c[i]), 0);
    }
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        if (c[i].status != 200)
            fail_msg("twin cart %d: %ld", i, c[i].status);
    }
    assert_exact("Hold-tcA", 8, 0, 2);
    assert_exact("Hold-tcB", 9, 0, 1);
}

/* CROSSED carts on X and Y at once, named in both orders, on 2 instances,
 * 10 units each: exactly 10 held, the rest out_of_stock, no deadlock (503),
 * the audit exact on both SKUs. */
static void crossed_carts(const char *guard)
{
    assert_int_equal(it_seed("Hold-xX", 10), 200);
    assert_int_equal(it_seed("Hold-xY", 10), 200);
    struct crossed c[CROSSED];
    pthread_t th[CROSSED];
    for (int i = 0; i < CROSSED; i++) {
        c[i] = (struct crossed){i, guard, -1};
        assert_int_equal(pthread_create(&th[i], NULL, crossed_reserve, &c[i]), 0);
    }
    int held = 0, shorts = 0;
    for (int i = 0; i < CROSSED; i++) {
        pthread_join(th[i], NULL);
        held += c[i].status == 200;
        shorts += c[i].status == 409;
    }
    print_message("crossed carts under %s: 200:%d 409:%d\n", guard, held, shorts);
    assert_int_equal(held, 10);
    assert_int_equal(shorts, CROSSED - 10);
    assert_exact("Hold-xX", 0, 0, 10);
    assert_exact("Hold-xY", 0, 0, 10);
}

static void test_crossed_cart_holds(void **state)
{
    crossed_carts("conditional-update");
    crossed_carts("redis-lock");
}

/* sql/010 is safe to re-apply, and widens a holds table made before
 * carts and buyers (keyed by order_id alone, no user_id) in place: applied
 * twice to a scratch copy of the old table, its row kept. */
static void test_sql_010_reapplies(void **state)
{
    const char *root = getenv("LAB_ROOT");
    assert_non_null(root);
    assert_int_equal(it_sql("DROP DATABASE IF EXISTS holds_mig; CREATE DATABASE holds_mig; "
                            "CREATE TABLE holds_mig.holds (order_id VARCHAR(64) NOT NULL "
                            "PRIMARY KEY, sku VARCHAR(64) NOT NULL, qty INT NOT NULL, state "
                            "VARCHAR(16) NOT NULL, guard VARCHAR(32) NOT NULL, instance "
                            "VARCHAR(64) NOT NULL, expires_at TIMESTAMP(3) NOT NULL, fresh "
                            "TINYINT(1) NOT NULL DEFAULT 0); INSERT INTO holds_mig.holds "
                            "VALUES ('o1', 'A', 1, 'held', 'none', 'i1', NOW(3), 0)"), 0);
    char cmd[1024];
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof(cmd), "sed s/db_shopping/holds_mig/g '%s/sql/010_holds.sql' | "
                 "mariadb --no-defaults -h127.0.0.1 -P%ld -uroot", root, it.mysql_port);
        assert_int_equal(system(cmd), 0);
    }
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM information_schema.key_column_usage "
                                  "WHERE table_schema='holds_mig' AND table_name='holds' AND "
                                  "constraint_name='PRIMARY'"), 2);
    assert_int_equal(it_sql_value("SELECT COUNT(*) FROM holds_mig.holds WHERE order_id='o1' "
                                  "AND user_id=''"), 1);
    assert_int_equal(it_sql("DROP DATABASE holds_mig"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_happy_paths),
        cmocka_unit_test(test_twin_reserves),
        cmocka_unit_test(test_guards_that_reserve),
        cmocka_unit_test(test_expiry_gives_back),
        cmocka_unit_test(test_late_confirm),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_limited_holds),
        cmocka_unit_test(test_limited_late_confirm),
        cmocka_unit_test(test_limited_bad_input),
        cmocka_unit_test(test_confirm_check_none_oversells),
        cmocka_unit_test(test_confirm_races_sweeper),
        cmocka_unit_test(test_orders_awaiting_payment),
        cmocka_unit_test(test_orders_hold_limited),
        cmocka_unit_test(test_cart_hold),
        cmocka_unit_test(test_cart_hold_expiry),
        cmocka_unit_test(test_cart_hold_limited),
        cmocka_unit_test(test_crossed_cart_holds),
        cmocka_unit_test(test_twin_cart_holds),
        cmocka_unit_test(test_orders_cart_hold),
        cmocka_unit_test(test_sql_010_reapplies),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
