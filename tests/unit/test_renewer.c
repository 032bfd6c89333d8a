/* The shared lease watchdog (lib/locks/renewer.c) on its own: what it does
 * with each answer of the owner's renew callback. The callback here is the
 * owner's real contract (no backend is involved at this layer): it answers
 * from a script and records its calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>

#include "locks/renewer.h"
#include "base/util.h"

struct owner {
    atomic_int calls;
    atomic_int answer;         /* what renew answers */
    atomic_int closed;
};

static int renew(void *o, void **conn, const struct renewer_lease *l)
{
    struct owner *w = o;
    *conn = w;                 /* the thread's slot is kept between calls */
    atomic_fetch_add(&w->calls, 1);
    return atomic_load(&w->answer);
}

static void close_conn(void *o, void *conn)
{
    struct owner *w = o;
    if (conn == w)
        atomic_fetch_add(&w->closed, 1);
}

static const struct renewer_ops ops = {renew, close_conn};

static struct renewer_lease lease(long ttl_ms)
{
    struct renewer_lease l;
    memset(&l, 0, sizeof(l));
    strcpy(l.key, "k");
    strcpy(l.token, "t");
    l.ttl_ms = ttl_ms;
    return l;
}

/* Poll until renew was called n times or 2 s pass. */
static int wait_calls(struct owner *w, int n)
{
    for (int i = 0; i < 200; i++) {
        if (atomic_load(&w->calls) >= n)
            return 1;
        util_sleep_ms(10);
    }
    return 0;
}

static void test_renews_every_third_of_ttl(void **state)
{
    struct owner w = {0};
    atomic_ullong renewals = 0, lost = 0;
    atomic_store(&w.answer, 1);
    struct renewer *r = renewer_new(&ops, &w, &renewals, &lost);
    assert_non_null(r);
    struct renewer_lease l = lease(60);
    int64_t t0 = util_now_ms();
    uint64_t id = renewer_add(r, &l);
    assert_true(id != 0);
    assert_true(wait_calls(&w, 3));
    int64_t renewed;
    assert_int_equal(renewer_check(r, id, &renewed), 0);
    assert_true(renewed >= t0);
    assert_true(atomic_load(&renewals) >= 2);
    assert_int_equal(atomic_load(&lost), 0);
    assert_int_equal(renewer_remove(r, id), 0);
    /* Removed: no more calls. */
    util_sleep_ms(30);
    int calls = atomic_load(&w.calls);
    util_sleep_ms(80);
    assert_int_equal(atomic_load(&w.calls), calls);
    renewer_free(r);
    assert_int_equal(atomic_load(&w.closed), 1);
}

static void test_not_ours_is_lost_for_good(void **state)
{
    struct owner w = {0};
    atomic_ullong renewals = 0, lost = 0;
    atomic_store(&w.answer, 0);
    struct renewer *r = renewer_new(&ops, &w, &renewals, &lost);
    struct renewer_lease l = lease(30);
    uint64_t id = renewer_add(r, &l);
    assert_true(wait_calls(&w, 1));
    util_sleep_ms(60);
    int64_t renewed;
    assert_int_equal(renewer_check(r, id, &renewed), 1);
    assert_int_equal(renewed, 0);
    assert_int_equal(atomic_load(&w.calls), 1);   /* never tried again */
    assert_int_equal(atomic_load(&lost), 1);
    assert_int_equal(renewer_remove(r, id), 1);
    renewer_free(r);
}

static void test_unreachable_is_retried_soon(void **state)
{
    struct owner w = {0};
    atomic_store(&w.answer, -2);
    struct renewer *r = renewer_new(&ops, &w, NULL, NULL);
    struct renewer_lease l = lease(3000);   /* period 1000 ms, retry 300 ms */
    int64_t t0 = util_now_ms();
    uint64_t id = renewer_add(r, &l);
    /* The second call comes a retry (ttl/10) after the first, not a period
     * (ttl/3): periods alone would put it at 2000 ms. */
    while (atomic_load(&w.calls) < 2 && util_now_ms() - t0 < 1950)
        util_sleep_ms(10);
    assert_true(atomic_load(&w.calls) >= 2);
    int64_t renewed;
    assert_int_equal(renewer_check(r, id, &renewed), 0);
    assert_int_equal(renewed, 0);
    renewer_free(r);   /* with the lease still registered */
}

static void test_unknown_ids(void **state)
{
    struct owner w = {0};
    struct renewer *r = renewer_new(&ops, &w, NULL, NULL);
    int64_t renewed = 5;
    assert_int_equal(renewer_check(r, 0, &renewed), 0);
    assert_int_equal(renewed, 0);
    assert_int_equal(renewer_check(r, 42, NULL), 0);
    assert_int_equal(renewer_remove(r, 0), 0);
    assert_int_equal(renewer_remove(r, 42), 0);
    renewer_free(r);   /* never started: nothing to join */
    renewer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_renews_every_third_of_ttl),
        cmocka_unit_test(test_not_ours_is_lost_for_good),
        cmocka_unit_test(test_unreachable_is_retried_soon),
        cmocka_unit_test(test_unknown_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
