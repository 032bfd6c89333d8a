/* The lock-service guard checks shared by test_etcd and test_zookeeper
 * (see lock_suite.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "lock_suite.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double ls_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

const char *ls_error_of(const struct it_resp *r)
{
    const char *e = r->json ? json_string_value(json_object_get(r->json, "error")) : NULL;
    return e ? e : "";
}

void *ls_sale_run(void *arg)
{
    struct ls_sale *s = arg;
    struct it_resp r;
    s->status = it_http("POST", s->url, s->body, &r);
    snprintf(s->error, sizeof(s->error), "%s", ls_error_of(&r));
    it_resp_free(&r);
    return NULL;
}

void ls_deduct_url(const char *base, char *out, size_t len)
{
    snprintf(out, len, "%s/inventory/deduct", base);
}

/* A deduct body: {"sku":sku,"guard":guard<fields>,"order_id":"<sku>-<role>"};
 * fields starts with a comma (or is ""). */
static void sale_body(char *out, size_t len, const char *sku, const char *guard,
                      const char *fields, const char *role)
{
    snprintf(out, len, "{\"sku\":\"%s\",\"guard\":\"%s\"%s,\"order_id\":\"%s-%s\"}", sku, guard,
             fields, sku, role);
}

int ls_wait_count(ls_count_fn count, const char *sku, long n)
{
    for (int i = 0; i < 200; i++) {
        if (count(sku) == n)
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

void ls_exact(const char *guard, const char *sku, const char *const base[2], ls_count_fn count)
{
    assert_int_equal(it_seed(sku, 100), 200);
    char urls[2][256], fmt[256];
    const char *u[2] = {urls[0], urls[1]};
    for (int i = 0; i < 2; i++)
        ls_deduct_url(base[i], urls[i], sizeof(urls[i]));
    snprintf(fmt, sizeof(fmt),
             "{\"sku\":\"%s\",\"guard\":\"%s\",\"hold_ms\":1,\"lock_wait_ms\":20000,"
             "\"order_id\":\"%s-%%d\"}", sku, guard, sku);
    struct it_load l = {.total = 1000, .clients = 32, .urls = u, .nurls = 2, .method = "POST",
                        .body_fmt = fmt};
    double t0 = ls_now_s();
    it_hammer(&l);
    double took = ls_now_s() - t0;
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    print_message("%s: sold %lld oversold %lld lost %lld | 200:%d 409:%d 503:%d | "
                  "%.1f s, %.0f req/s (indicative)\n", guard, a.sold, a.oversold, a.lost_updates,
                  l.by_status[200], l.by_status[409], l.by_status[503], took, 1000 / took);
    assert_int_equal(a.sold, 100);
    assert_int_equal(a.oversold, 0);
    assert_int_equal(a.lost_updates, 0);
    assert_true(a.consistent);
    assert_int_equal(l.by_status[200], 100);
    assert_int_equal(l.by_status[409], 900);
    assert_int_equal(count(sku), 0);
}

void ls_waiter_gives_up(const char *guard, const char *sku, const char *const base[2],
                        ls_count_fn count, long (*extra)(void), long extra_want)
{
    assert_int_equal(it_seed(sku, 10), 200);
    char url1[256], url2[256], hb[256], wb[256];
    ls_deduct_url(base[0], url1, sizeof(url1));
    ls_deduct_url(base[1], url2, sizeof(url2));
    sale_body(hb, sizeof(hb), sku, guard, ",\"hold_ms\":2000", "holder");
    sale_body(wb, sizeof(wb), sku, guard, ",\"lock_wait_ms\":300", "waiter");
    struct ls_sale h = {.url = url1, .body = hb};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ls_sale_run, &h), 0);
    int held = ls_wait_count(count, sku, 1);
    struct it_resp r;
    double t0 = ls_now_s();
    long st = it_http("POST", url2, wb, &r);
    double waited = ls_now_s() - t0;
    long during = count(sku), during_extra = extra ? extra() : extra_want;
    pthread_join(t, NULL);
    print_message("waiter: %ld after %.2f s: %.160s; entries after it: %ld\n", st, waited,
                  r.body, during);
    assert_int_equal(held, 0);
    assert_int_equal(st, 503);
    assert_string_equal(ls_error_of(&r), "lock_timeout");
    it_resp_free(&r);
    assert_true(waited >= 0.3);
    assert_int_equal(during, 1);            /* only the holder's entry */
    assert_int_equal(during_extra, extra_want);
    assert_int_equal(h.status, 200);
    assert_int_equal(count(sku), 0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_true(a.consistent);
}

void ls_fencing(const char *guard, const char *sku, const char *const base[2])
{
    assert_int_equal(it_seed(sku, 10), 200);
    char url[256], body[256], sql[300];
    long long fence[2] = {-1, -1};
    snprintf(sql, sizeof(sql), "SELECT fence FROM db_shopping.inventory_fence "
                               "WHERE sku='%s' AND guard='%s'", sku, guard);
    for (int i = 0; i < 2; i++) {
        ls_deduct_url(base[i], url, sizeof(url));
        char role[16];
        snprintf(role, sizeof(role), "%d", i);
        sale_body(body, sizeof(body), sku, guard, ",\"fencing\":true", role);
        assert_int_equal(it_status("POST", url, body), 200);
        fence[i] = it_sql_value(sql);
    }
    print_message("%s: fence after each sale: %lld %lld\n", guard, fence[0], fence[1]);
    assert_true(fence[0] > 0);
    assert_true(fence[1] > fence[0]);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 2);
    assert_true(a.consistent);
}

/* A lock holder and a buyer after it: their deduct URLs and bodies, the
 * holder's sale and thread. */
struct holder_buyer {
    char url_h[256], url_b[256], hb[320], bb[320];
    struct ls_sale h;
    pthread_t t;
};

/* Seeds sku with `stock`, sends the holder's sale (holding the lock
 * hold_ms, plus holder_extra fields) in p->t, and prepares the buyer's
 * (waiting up to 8 s for the lock, plus buyer_extra). Returns
 * ls_wait_count for the holder's lock entry (0: it holds the lock); fails
 * the test when the seed or the thread fails. */
static int start_holder(struct holder_buyer *p, const char *guard, const char *sku,
                        long long stock, const char *holder_base, long hold_ms,
                        const char *holder_extra, const char *buyer_base,
                        const char *buyer_extra, ls_count_fn count)
{
    assert_int_equal(it_seed(sku, stock), 200);
    ls_deduct_url(holder_base, p->url_h, sizeof(p->url_h));
    ls_deduct_url(buyer_base, p->url_b, sizeof(p->url_b));
    char fields[200];
    snprintf(fields, sizeof(fields), ",\"hold_ms\":%ld%s", hold_ms, holder_extra);
    sale_body(p->hb, sizeof(p->hb), sku, guard, fields, "holder");
    snprintf(fields, sizeof(fields), ",\"lock_wait_ms\":8000%s", buyer_extra);
    sale_body(p->bb, sizeof(p->bb), sku, guard, fields, "buyer");
    p->h = (struct ls_sale){.url = p->url_h, .body = p->hb};
    assert_int_equal(pthread_create(&p->t, NULL, ls_sale_run, &p->h), 0);
    return ls_wait_count(count, sku, 1);
}

void ls_killed_holder_frees(const char *guard, const char *sku, const char *holder_base,
                            int pid, const char *holder_extra, const char *buyer_base,
                            ls_count_fn count, double min_wait_s)
{
    struct holder_buyer p;
    int held = start_holder(&p, guard, sku, 5, holder_base, 8000, holder_extra, buyer_base, "",
                            count);
    it_kill(pid, SIGKILL, 5000);
    double t0 = ls_now_s();
    long st = it_status("POST", p.url_b, p.bb);
    double took = ls_now_s() - t0;
    pthread_join(p.t, NULL);
    print_message("%s: buyer after the holder's kill: %ld in %.2f s (holder: %ld)\n", guard, st,
                  took, p.h.status);
    assert_int_equal(held, 0);
    assert_int_equal(p.h.status, 0);        /* the holder never answered */
    assert_int_equal(st, 200);
    assert_true(took >= min_wait_s);        /* it waited for the holder's entry to go */
    assert_int_equal(count(sku), 0);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.stock, 4);
    assert_true(a.consistent);
}

void ls_paused_holder(const char *guard, const char *sku, const char *holder_base, int pid,
                      const char *extra, const char *buyer_base, ls_count_fn count,
                      struct ls_paused *out)
{
    memset(out, 0, sizeof(*out));
    struct holder_buyer p;
    int held = start_holder(&p, guard, sku, 1, holder_base, 6000, extra, buyer_base, extra,
                            count);
    usleep(300 * 1000);        /* past the lock wait, into hold_ms */
    kill(pid, SIGSTOP);
    /* The buyer waits for the lock; it gets it once the holder's lease or
     * session ran out. */
    double t0 = ls_now_s();
    out->buyer_status = it_status("POST", p.url_b, p.bb);
    out->buyer_took_s = ls_now_s() - t0;
    kill(pid, SIGCONT);
    pthread_join(p.t, NULL);
    out->holder_status = p.h.status;
    snprintf(out->holder_error, sizeof(out->holder_error), "%s", p.h.error);
    print_message("%s [%s]: buyer %ld after %.2f s; holder resumed: %ld %s\n", guard, extra,
                  out->buyer_status, out->buyer_took_s, p.h.status, p.h.error);
    it_stop_pid(pid);
    assert_int_equal(held, 0);
    assert_int_equal(out->buyer_status, 200);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.sold, 1);
    assert_int_equal(a.oversold, 0);
    assert_true(a.consistent);
}

void ls_release(const char *guard, const char *sku, const char *const base[2],
                ls_count_fn count)
{
    assert_int_equal(it_seed(sku, 3), 200);
    char url[256], rel[256], body[256], rb[128];
    ls_deduct_url(base[0], url, sizeof(url));
    sale_body(body, sizeof(body), sku, guard, "", "1");
    assert_int_equal(it_status("POST", url, body), 200);
    snprintf(rel, sizeof(rel), "%s/inventory/release", base[1]);
    snprintf(rb, sizeof(rb), "{\"order_id\":\"%s-1\"}", sku);
    struct it_resp r;
    assert_int_equal(it_http("POST", rel, rb, &r), 200);
    assert_non_null(r.json);
    assert_true(json_is_true(json_object_get(r.json, "released")));
    it_resp_free(&r);
    struct it_audit a;
    assert_int_equal(it_audit(sku, &a), 0);
    assert_int_equal(a.stock, 3);
    assert_true(a.consistent);
    assert_int_equal(count(sku), 0);
}
