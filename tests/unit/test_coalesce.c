/* The coalescer (guards/core/coalesce.c): every request is answered exactly
 * once, by the one call that carried it; one call per key at a time; a
 * queued request past its deadline leaves without being sent and hands the
 * lead on; requests group under load. Real threads, no backend. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "guards/core/coalesce.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 12
#define PER_THREAD 3000

struct run_stats {
    atomic_int in_flight, max_in_flight, calls, members;
    atomic_int sleep_ms;       /* each call sleeps this long */
};

/* A member's arg: how often a call answered it. */
struct answer {
    atomic_int times;
};

static void run_group(struct coal_member *const *m, int n, void *ctx)
{
    struct run_stats *st = ctx;
    int f = atomic_fetch_add(&st->in_flight, 1) + 1;
    int mx = atomic_load(&st->max_in_flight);
    while (f > mx && !atomic_compare_exchange_weak(&st->max_in_flight, &mx, f))
        ;
    atomic_fetch_add(&st->calls, 1);
    atomic_fetch_add(&st->members, n);
    int ms = atomic_load(&st->sleep_ms);
    if (ms > 0)
        usleep((useconds_t)ms * 1000);
    for (int i = 0; i < n; i++) {
        struct answer *a = m[i]->arg;
        atomic_fetch_add(&a->times, 1);
        m[i]->res->outcome = DEDUCT_SOLD;
    }
    atomic_fetch_sub(&st->in_flight, 1);
}

static struct coalescer hot = COALESCER_INIT;
static struct run_stats hot_stats;
static atomic_int wrong;

static void *hammer(void *arg)
{
    const char *key = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        struct deduct_req req = {.qty = 1, .deadline = util_now() + 10};
        snprintf(req.sku, sizeof(req.sku), "%s", key);
        struct deduct_res res;
        memset(&res, 0, sizeof(res));
        res.outcome = DEDUCT_INTERNAL;
        struct answer a = {0};
        coal_submit(&hot, key, &req, &res, &a, run_group, &hot_stats);
        if (res.outcome != DEDUCT_SOLD || atomic_load(&a.times) != 1)
            atomic_fetch_add(&wrong, 1);
    }
    return NULL;
}

static void test_every_request_answered_once_in_groups(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer, "HOT-1"), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&wrong), 0);
    assert_int_equal(atomic_load(&hot_stats.members), THREADS * PER_THREAD);
    /* One call of the key at a time. */
    assert_int_equal(atomic_load(&hot_stats.max_in_flight), 1);
    unsigned long long calls, members;
    coal_counts(&hot, &calls, &members);
    assert_int_equal((int)members, THREADS * PER_THREAD);
    assert_int_equal((int)calls, atomic_load(&hot_stats.calls));
    printf("# %d requests in %llu calls\n", THREADS * PER_THREAD, calls);
    /* Every slot is free again. */
    for (int i = 0; i < COAL_SLOTS; i++)
        assert_string_equal(hot.slots[i].key, "");
}

/* Two keys at once: their calls overlap (each key's own one at a time). */
static struct coalescer two = COALESCER_INIT;
static struct run_stats two_stats[2];

static void *hammer_two(void *arg)
{
    int k = (int)(long)arg;
    const char *key = k ? "B" : "A";
    for (int i = 0; i < 500; i++) {
        struct deduct_req req = {.qty = 1, .deadline = util_now() + 10};
        struct deduct_res res = {.outcome = DEDUCT_INTERNAL};
        struct answer a = {0};
        coal_submit(&two, key, &req, &res, &a, run_group, &two_stats[k]);
        if (res.outcome != DEDUCT_SOLD || atomic_load(&a.times) != 1)
            atomic_fetch_add(&wrong, 1);
    }
    return NULL;
}

static void test_keys_apart(void **state)
{
    (void)state;
    atomic_store(&wrong, 0);
    atomic_store(&two_stats[0].sleep_ms, 1);
    atomic_store(&two_stats[1].sleep_ms, 1);
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer_two, (void *)(i % 2)), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&wrong), 0);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(atomic_load(&two_stats[k].members), 4 * 500);
        assert_int_equal(atomic_load(&two_stats[k].max_in_flight), 1);
        assert_true(atomic_load(&two_stats[k].calls) < 4 * 500);
    }
}

/* A slow call holds the key; a request queued behind it with a short
 * deadline leaves in time, never sent; one queued with a long deadline
 * (queued after it: the short one was named leader first) still leads
 * once the slow call ends. */
static struct coalescer slow = COALESCER_INIT;
static struct run_stats slow_stats;

struct slow_arg {
    double deadline_in;
    struct deduct_res res;
    struct answer a;
    double took;
};

static void *submit_one(void *p)
{
    struct slow_arg *s = p;
    struct deduct_req req = {.qty = 1, .deadline = util_now() + s->deadline_in};
    s->res.outcome = DEDUCT_INTERNAL;
    double t0 = util_now();
    coal_submit(&slow, "S", &req, &s->res, &s->a, run_group, &slow_stats);
    s->took = util_now() - t0;
    return NULL;
}

static void test_deadline_while_queued(void **state)
{
    (void)state;
    atomic_store(&slow_stats.sleep_ms, 400);
    struct slow_arg first = {.deadline_in = 5}, brief = {.deadline_in = 0.1},
                    patient = {.deadline_in = 5};
    pthread_t t1, t2, t3;
    assert_int_equal(pthread_create(&t1, NULL, submit_one, &first), 0);
    usleep(50 * 1000);   /* first's call is in flight */
    assert_int_equal(pthread_create(&t2, NULL, submit_one, &brief), 0);
    usleep(20 * 1000);
    assert_int_equal(pthread_create(&t3, NULL, submit_one, &patient), 0);
    pthread_join(t2, NULL);
    assert_int_equal(brief.res.outcome, DEDUCT_DEADLINE);
    assert_int_equal(atomic_load(&brief.a.times), 0);
    assert_true(brief.took < 0.3);
    atomic_store(&slow_stats.sleep_ms, 0);
    pthread_join(t1, NULL);
    pthread_join(t3, NULL);
    assert_int_equal(first.res.outcome, DEDUCT_SOLD);
    assert_int_equal(patient.res.outcome, DEDUCT_SOLD);
    assert_int_equal(atomic_load(&patient.a.times), 1);
    assert_int_equal(atomic_load(&slow_stats.calls), 2);
    assert_int_equal(atomic_load(&slow_stats.max_in_flight), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_request_answered_once_in_groups),
        cmocka_unit_test(test_keys_apart),
        cmocka_unit_test(test_deadline_while_queued),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
