/* The default Redis lock hands over inside a process: a holder
 * whose process has a waiter blocked on the same lock gives it the lock
 * directly, with no release script, message or retry. Against the stack's
 * Redis, two rlock clients standing for two processes:
 *   - exclusion holds across both clients (a counter written without
 *     atomics under the lock, a flag that would see two holders), most
 *     acquisitions are hand-overs, and a sale costs far fewer than the two
 *     script calls (acquire + release) that every acquisition paid before;
 *   - a handed-over holder is the owner Redis knows (its token is the hash
 *     field), its lease is renewed by the same watchdog past several TTLs,
 *     and every release finds the lock its own;
 *   - a run of hand-overs is bounded: a waiter of the other client gets the
 *     lock while one client's threads keep taking it. */
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

#include "base/util.h"
#include "locks/rlock.h"

/* A connection to the stack's Redis (1 s timeouts); fails the test when
 * there is none. */
static redisContext *raw(void)
{
    redisContext *c = it_redis_connect(1000);
    if (!c)
        fail_msg("no connection to redis on port %ld", it.redis_port);
    return c;
}

/* Script calls Redis has run so far (EVAL + EVALSHA). */
static long long script_calls(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long n = 0;
    for (const char *p = r->str; (p = strstr(p, "cmdstat_eval")); p++) {
        const char *q = strstr(p, "calls=");
        if (q)
            n += atoll(q + 6);
    }
    freeReplyObject(r);
    return n;
}

/* A lock client as `instance`; fails the test when there is none. */
static struct rlock_client *client(const char *instance)
{
    struct rlock_client *c = it_rlock_client(instance);
    assert_non_null(c);
    return c;
}

struct shared {
    const char *key;
    long ttl_ms;
    long hold_us;
    int loops;
    atomic_int inside;         /* holders right now: never above 1 */
    atomic_int overlaps;
    atomic_long counter;       /* read, then written, under the lock: a
                                * second holder would lose an update
                                * (relaxed atomics only so a thread
                                * checker does not flag a lock it cannot
                                * see) */
    atomic_int stop;           /* loops == 0: run until set */
};

struct worker {
    struct shared *sh;
    struct rlock_client *c;
    int done, failed, lost, bad_owner;
    long max_wait_ms;
    redisContext *check;       /* not NULL: verify the owner in Redis */
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct shared *sh = w->sh;
    struct rlock_opts o;
    rlock_opts_default(&o);
    o.ttl_ms = sh->ttl_ms;
    for (int i = 0; sh->loops ? i < sh->loops : !atomic_load(&sh->stop); i++) {
        struct rlock *l = rlock_new(w->c, sh->key, &o);
        int64_t t0 = util_now_ms();
        int rc = rlock_acquire(l, 5000);
        long waited = (long)(util_now_ms() - t0);
        if (waited > w->max_wait_ms)
            w->max_wait_ms = waited;
        if (rc != RLOCK_OK) {
            w->failed++;
            rlock_free(l);
            continue;
        }
        if (atomic_fetch_add(&sh->inside, 1) != 0)
            atomic_fetch_add(&sh->overlaps, 1);
        long v = atomic_load_explicit(&sh->counter, memory_order_relaxed);
        it_sleep_us(sh->hold_us);
        atomic_store_explicit(&sh->counter, v + 1, memory_order_relaxed);
        if (w->check) {   /* the hash field Redis holds is this holder's token */
            redisReply *r = redisCommand(w->check, "HGET %s %s", sh->key, rlock_token(l));
            if (!r || r->type != REDIS_REPLY_STRING || strcmp(r->str, "1") != 0)
                w->bad_owner++;
            if (r)
                freeReplyObject(r);
        }
        atomic_fetch_sub(&sh->inside, 1);
        if (rlock_release(l) == RLOCK_ELOST)
            w->lost++;
        rlock_free(l);
        w->done++;
    }
    return NULL;
}

#define THREADS 4
#define LOOPS 40

static void test_handoff_excludes_across_clients(void **state)
{
    char key[96];
    snprintf(key, sizeof(key), "handoff:%d:excl", (int)getpid());
    struct rlock_client *c[2] = {client("handoff-a"), client("handoff-b")};
    redisContext *rc = raw();
    struct shared sh = {.key = key, .ttl_ms = 10000, .hold_us = 300, .loops = LOOPS};
    struct worker w[2 * THREADS];
    pthread_t t[2 * THREADS];
    long long calls0 = script_calls(rc);
    for (int i = 0; i < 2 * THREADS; i++) {
        w[i] = (struct worker){.sh = &sh, .c = c[i % 2]};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    int done = 0, failed = 0, lost = 0;
    for (int i = 0; i < 2 * THREADS; i++) {
        pthread_join(t[i], NULL);
        done += w[i].done, failed += w[i].failed, lost += w[i].lost;
    }
    long long calls = script_calls(rc) - calls0;
    struct rlock_stats_snap a, b;
    rlock_stats_read(rlock_client_stats(c[0]), &a);
    rlock_stats_read(rlock_client_stats(c[1]), &b);
    print_message("handoff: %d acquisitions, %llu+%llu handed over, %lld script calls "
                  "(%.2f per acquisition), overlaps %d\n", done, a.handoffs, b.handoffs, calls,
                  (double)calls / done, atomic_load(&sh.overlaps));
    assert_int_equal(failed, 0);
    assert_int_equal(lost, 0);
    assert_int_equal(atomic_load(&sh.overlaps), 0);
    assert_int_equal(done, 2 * THREADS * LOOPS);
    assert_int_equal(atomic_load(&sh.counter), 2 * THREADS * LOOPS);
    assert_true(a.handoffs + b.handoffs >= (unsigned long long)done / 2);
    /* Every acquisition through Redis costs an acquire and a release
     * script (plus retries): hand-overs cost none. */
    assert_true(calls < done);
    redisReply *r = redisCommand(rc, "EXISTS %s", key);
    assert_non_null(r);
    assert_int_equal(r->integer, 0);   /* the last holder released it */
    freeReplyObject(r);
    redisFree(rc);
    rlock_client_free(c[0]);
    rlock_client_free(c[1]);
}

/* ttl 300 ms with the watchdog on, a chain of hand-overs for ~1.5 s: the
 * lease lives on (renewed), every holder is the owner Redis knows, no
 * release finds the lock lost. */
static void test_handoff_keeps_owner_and_lease(void **state)
{
    char key[96];
    snprintf(key, sizeof(key), "handoff:%d:lease", (int)getpid());
    struct rlock_client *c = client("handoff-lease");
    struct shared sh = {.key = key, .ttl_ms = 300, .hold_us = 10000, .loops = 40};
    struct worker w[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (struct worker){.sh = &sh, .c = c, .check = raw()};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    int done = 0, bad = 0, lost = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        done += w[i].done, bad += w[i].bad_owner, lost += w[i].lost;
        redisFree(w[i].check);
    }
    struct rlock_stats_snap s;
    rlock_stats_read(rlock_client_stats(c), &s);
    print_message("lease: %d acquisitions, %llu handed over, %llu renewals, %llu lost\n", done,
                  s.handoffs, s.renewals, s.lost);
    assert_int_equal(done, 120);
    assert_int_equal(bad, 0);
    assert_int_equal(lost, 0);
    assert_int_equal(s.lost, 0);
    assert_true(s.handoffs > 0);
    assert_int_equal(atomic_load(&sh.overlaps), 0);
    rlock_client_free(c);
}

/* Client A's threads keep the lock busy (each one back in line at once);
 * client B's single waiter still gets it, well within its wait: a run of
 * hand-overs ends with a release through Redis. */
static void test_handoff_run_is_bounded(void **state)
{
    char key[96];
    snprintf(key, sizeof(key), "handoff:%d:bound", (int)getpid());
    struct rlock_client *a = client("handoff-busy"), *b = client("handoff-other");
    struct shared sh = {.key = key, .ttl_ms = 10000, .hold_us = 2000};
    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.sh = &sh, .c = a};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    it_sleep_us(200000);   /* A's chain is running */
    struct shared sb = {.key = key, .ttl_ms = 10000, .hold_us = 1000, .loops = 5};
    struct worker wb = {.sh = &sb, .c = b};
    worker_main(&wb);
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    struct rlock_stats_snap sa;
    rlock_stats_read(rlock_client_stats(a), &sa);
    print_message("bound: other client %d of 5, longest wait %ld ms; busy client %llu "
                  "handed over\n", wb.done, wb.max_wait_ms, sa.handoffs);
    assert_int_equal(wb.done, 5);
    assert_int_equal(wb.failed, 0);
    assert_true(wb.max_wait_ms < 2000);
    assert_true(sa.handoffs > 0);
    rlock_client_free(a);
    rlock_client_free(b);
}

static int group_setup(void **state) { return it_setup(); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoff_excludes_across_clients),
        cmocka_unit_test(test_handoff_keeps_owner_and_lease),
        cmocka_unit_test(test_handoff_run_is_bounded),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
