/* Warm start (services/API.md GET /healthz): an instance says ready only
 * once every worker holds an open MySQL connection and has reached Redis,
 * so the first requests after "ready" pay no connection set-up. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "itest.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int group_setup(void **state) { return it_setup(); }

static long long app_connections(void)
{
    return it_sql_value("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                        "WHERE USER = 'lab_app'");
}

/* Starts inventory `name` on port base + port_off with `threads` workers
 * (it_start_inventory returns once /healthz answers 200), reads probe()
 * while it is up, stops it; fails the test when it does not start. */
static long long probe_at_ready(const char *name, long port_off, const char *threads,
                                long long (*probe)(void))
{
    const char *args[] = {"--threads", threads, NULL};
    int pid = it_start_inventory(name, it_port_base() + port_off, NULL, args);
    assert_true(pid > 0);
    long long v = probe();
    it_stop_pid(pid);
    return v;
}

static void test_ready_means_every_worker_connected(void **state)
{
    const long threads = 6;
    long long before = app_connections();
    assert_true(before >= 0);
    long long after = probe_at_ready("inventory-warm", 23, "6", app_connections);
    print_message("warm: lab_app connections %lld -> %lld (%ld workers)\n", before, after,
                  threads);
    /* Every worker's own connection, plus the one of the /healthz thread. */
    assert_true(after - before >= threads + 1);
}

/* A Redis command on the stack's Redis: its reply (caller frees), NULL
 * when unreachable. */
static redisReply *redis_do(const char *cmd)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    if (!c || c->err) {
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, cmd);
    redisFree(c);
    return r;
}

/* Lua scripts cached in Redis (INFO memory), -1 when unreadable. */
static long long cached_scripts(void)
{
    redisReply *r = redis_do("INFO memory");
    const char *p = NULL;
    long long n = -1;
    if (r && (r->type == REDIS_REPLY_STRING) &&
        (p = strstr(r->str, "number_of_cached_scripts:")))
        n = atoll(p + strlen("number_of_cached_scripts:"));
    freeReplyObject(r);
    return n;
}

/* The scripts of the sale path are compiled in Redis before the instance
 * says ready: the first sales find them cached (no load, no compile).
 * Scripts flushed from Redis, then an instance started: once /healthz
 * answers 200, Redis holds them again. */
static void test_ready_means_scripts_loaded(void **state)
{
    freeReplyObject(redis_do("SCRIPT FLUSH"));
    assert_int_equal(cached_scripts(), 0);
    long long n = probe_at_ready("inventory-warm2", 24, "2", cached_scripts);
    print_message("warm: %lld script(s) cached in Redis at ready\n", n);
    assert_true(n >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_means_every_worker_connected),
        cmocka_unit_test(test_ready_means_scripts_loaded),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
