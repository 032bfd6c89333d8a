/* rconn, rlock and redlock against real Redis servers.
 *
 * LAB_REDIS_PORT (one Redis) and LAB_REDLOCK_PORTS (comma list of
 * independent masters), on 127.0.0.1; skipped when those are absent.
 * test_slow_* start their own redis-server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "locks/rconn.h"
#include "locks/redlock.h"
#include "locks/rlock.h"
#include "base/util.h"

static int redis_port;
static struct redlock_config rl_cfg;
static int have_redlock;

/* ---- helpers ---------------------------------------------------------- */

/* A loopback port nothing listens on: bind an ephemeral one, then close. */
static int dead_port(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static void key_for(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "rlocktest:%d:%s", (int)getpid(), name);
}

static redisContext *raw(int port)
{
    struct timeval tv = { 1, 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    assert_non_null(c);
    if (c->err)
        fail_msg("connect to redis %d: %s", port, c->errstr);
    redisSetTimeout(c, tv);
    return c;
}

/* Run a command, return its integer (or -100 for nil, -200 otherwise). */
static long long raw_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    long long v;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    v = r->type == REDIS_REPLY_INTEGER ? r->integer :
        r->type == REDIS_REPLY_NIL ? -100 :
        r->type == REDIS_REPLY_STRING ? atoll(r->str) : -200;
    freeReplyObject(r);
    return v;
}

/* GET into buf; "" when absent. */
static void raw_get(redisContext *c, const char *key, char *buf, size_t len)
{
    redisReply *r = redisCommand(c, "GET %s", key);
    assert_non_null(r);
    snprintf(buf, len, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

static struct rlock_client *client_on(int port)
{
    struct rlock_config cfg = { .port = port, .instance = "itest",
                                .connect_timeout_ms = 200, .cmd_timeout_ms = 500 };
    struct rlock_client *c = rlock_client_new(&cfg);
    assert_non_null(c);
    return c;
}

static struct rlock_opts opts(enum rlock_kind kind, long ttl, int watchdog)
{
    struct rlock_opts o;
    rlock_opts_default(&o);
    o.kind = kind;
    o.ttl_ms = ttl;
    o.watchdog = watchdog;
    return o;
}

static struct rlock_stats_snap snap(struct rlock_client *c)
{
    struct rlock_stats_snap s;
    rlock_stats_read(rlock_client_stats(c), &s);
    return s;
}

#define NEED_REDIS() do { if (!redis_port) { skip(); } } while (0)
#define NEED_REDLOCK() do { if (!have_redlock) { skip(); } } while (0)

/* ---- rconn ------------------------------------------------------------ */

/* The server-side id of a connection, to kill it or tell two apart. */
static long long client_id(redisContext *ctx)
{
    redisReply *r = redisCommand(ctx, "CLIENT ID");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long id = r->integer;
    freeReplyObject(r);
    return id;
}

static void test_rconn_cmd(void **state)
{
    NEED_REDIS();
    struct rconn_pool *p = rconn_pool_new_addr("127.0.0.1", redis_port, 200, 500);
    char key[128], err[160] = "", want[64];
    redisReply *r;

    key_for(key, sizeof key, "rconn-cmd");
    snprintf(want, sizeof want, "127.0.0.1:%d", redis_port);
    assert_string_equal(rconn_pool_addr(p), want);
    assert_int_equal(rconn_ping(p, err, sizeof err), 0);

    r = rconn_cmd(p, err, sizeof err, "SET %s %s", key, "v 1");
    assert_non_null(r);
    freeReplyObject(r);
    const char *av[2] = { "GET", key };
    r = rconn_cmd_argv(p, err, sizeof err, 2, av);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "v 1");
    freeReplyObject(r);

    /* An error reply is NULL with its text; the connection stays pooled. */
    r = rconn_cmd(p, err, sizeof err, "INCR %s", key);
    assert_null(r);
    if (strncmp(err, "redis error: ", 13) != 0 || !strstr(err, "not an integer"))
        fail_msg("error reply text: '%s'", err);
    r = rconn_cmd(p, NULL, 0, "DEL %s", key);   /* err is optional */
    assert_non_null(r);
    freeReplyObject(r);
    rconn_pool_free(p);
}

static void test_rconn_unreachable(void **state)
{
    int port = dead_port();
    struct rconn_pool *p = rconn_pool_new_addr("127.0.0.1", port, 200, 200);
    char err[160] = "", want[64];

    snprintf(want, sizeof want, "redis 127.0.0.1:%d: ", port);
    assert_null(rconn_cmd(p, err, sizeof err, "PING"));
    if (strncmp(err, want, strlen(want)) != 0 || strlen(err) <= strlen(want))
        fail_msg("unreachable text: '%s'", err);
    assert_int_equal(rconn_ping(p, NULL, 0), -1);
    assert_null(rconn_get(p, NULL, 0));
    assert_null(rconn_connect(rconn_pool_endpoint(p), 200, 200, NULL, 0));
    rconn_pool_free(p);
}

/* SCRIPT FLUSH (or a restart) forgets our SHA: the next call falls back
 * to EVAL and keeps working. */
static void test_rconn_script_noscript(void **state)
{
    NEED_REDIS();
    static struct rconn_script s = RCONN_SCRIPT(
        "return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}");
    struct rconn_pool *p = rconn_pool_new_addr("127.0.0.1", redis_port, 200, 500);
    redisContext *r = raw(redis_port);
    const char *av[3] = { "k", "a", "41" };
    char err[160] = "";

    for (int round = 0; round < 3; round++) {
        if (round == 2)
            freeReplyObject(redisCommand(r, "SCRIPT FLUSH"));
        redisReply *rep = rconn_eval(p, err, sizeof err, &s, 1, 3, av);
        if (!rep)
            fail_msg("round %d: %s", round, err);
        assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
        assert_int_equal(rep->elements, 3);
        assert_string_equal(rep->element[0]->str, "k");
        assert_string_equal(rep->element[1]->str, "a");
        assert_int_equal(rep->element[2]->integer, 42);
        freeReplyObject(rep);
        assert_int_equal(atomic_load(&s.ready), 1);
        assert_int_equal((int)strlen(s.sha), 40);
    }
    /* After a flush a plain EVALSHA would fail; ours re-caches it. */
    freeReplyObject(redisCommand(r, "SCRIPT FLUSH"));
    redisContext *ctx = rconn_get(p, err, sizeof err);
    assert_non_null(ctx);
    redisReply *rep = rconn_script_run(ctx, &s, 1, 3, av);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    freeReplyObject(rep);
    rep = redisCommand(r, "SCRIPT EXISTS %s", s.sha);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    assert_int_equal(rep->element[0]->integer, 1);   /* cached again */
    freeReplyObject(rep);
    /* A script error is an error reply, not a dead connection. */
    static struct rconn_script bad = RCONN_SCRIPT("return redis.call('nosuchcommand')");
    rep = rconn_script_run(ctx, &bad, 0, 0, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    assert_int_equal(ctx->err, 0);
    /* Longer than the stack array (a guard over 64 segment keys) works. */
    static struct rconn_script count = RCONN_SCRIPT("return {#KEYS, #ARGV}");
    const char *many[2 * RCONN_SCRIPT_ARGS_MAX];
    for (int i = 0; i < 2 * RCONN_SCRIPT_ARGS_MAX; i++)
        many[i] = "x";
    rep = rconn_script_run(ctx, &count, RCONN_SCRIPT_ARGS_MAX, 2 * RCONN_SCRIPT_ARGS_MAX, many);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    assert_int_equal(rep->element[0]->integer, RCONN_SCRIPT_ARGS_MAX);
    assert_int_equal(rep->element[1]->integer, RCONN_SCRIPT_ARGS_MAX);
    freeReplyObject(rep);
    assert_int_equal(ctx->err, 0);
    /* More keys than arguments is refused before anything is sent. */
    assert_null(rconn_script_run(ctx, &s, 4, 3, av));
    assert_true(ctx->err != 0);
    rconn_put(p, ctx);   /* broken: freed, not pooled */
    assert_null(rconn_eval(p, err, sizeof err, &bad, 0, 0, NULL));
    assert_non_null(strstr(err, "redis error: "));
    redisFree(r);
    rconn_pool_free(p);
}

/* A pooled connection the server closed (a restart, a CLIENT KILL) fails
 * with EOF: the command is sent once more on a new connection. */
static void test_rconn_eof_retry(void **state)
{
    NEED_REDIS();
    struct rconn_pool *p = rconn_pool_new_addr("127.0.0.1", redis_port, 200, 500);
    redisContext *r = raw(redis_port);
    char err[160] = "";

    redisContext *ctx = rconn_get(p, err, sizeof err);
    assert_non_null(ctx);
    long long id = client_id(ctx);
    rconn_put(p, ctx);
    assert_int_equal(raw_int(r, "CLIENT KILL ID %lld", id), 1);
    redisReply *rep = rconn_cmd(p, err, sizeof err, "PING");
    if (!rep)
        fail_msg("not retried: %s", err);
    freeReplyObject(rep);
    /* and the retry's connection went back to the pool */
    ctx = rconn_get(p, err, sizeof err);
    assert_true(client_id(ctx) > id);
    rconn_put(p, ctx);

    /* A timeout may have applied the command: reported, not retried. */
    struct rconn_pool *slow = rconn_pool_new_addr("127.0.0.1", redis_port, 200, 100);
    char key[128];
    key_for(key, sizeof key, "rconn-timeout");
    int64_t t0 = util_now_ms();
    assert_null(rconn_cmd(slow, err, sizeof err, "BLPOP %s 1", key));
    long took = (long)(util_now_ms() - t0);
    char want[64];
    snprintf(want, sizeof want, "redis 127.0.0.1:%d: ", redis_port);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("timeout text: '%s'", err);
    if (took < 90 || took > 190)
        fail_msg("timeout took %ld ms: retried?", took);
    rconn_pool_free(slow);
    redisFree(r);
    rconn_pool_free(p);
}

/* A context given back broken takes every idle one with it. */
static void test_rconn_pool_flush(void **state)
{
    NEED_REDIS();
    struct rconn_pool *p = rconn_pool_new_addr("127.0.0.1", redis_port, 200, 500);
    redisContext *r = raw(redis_port);

    redisContext *a = rconn_get(p, NULL, 0);
    redisContext *b = rconn_get(p, NULL, 0);
    assert_non_null(a);
    assert_non_null(b);
    long long ida = client_id(a), idb = client_id(b);
    rconn_put(p, b);
    assert_ptr_equal(rconn_get(p, NULL, 0), b);   /* a healthy one is reused */
    rconn_put(p, b);

    assert_int_equal(raw_int(r, "CLIENT KILL ID %lld", ida), 1);
    assert_null(redisCommand(a, "PING"));
    assert_true(a->err != 0);
    rconn_put(p, a);                               /* frees a, and b with it */
    redisContext *c = rconn_get(p, NULL, 0);
    assert_non_null(c);
    assert_true(client_id(c) > idb);
    rconn_put(p, c);
    redisFree(r);
    rconn_pool_free(p);
}

/* ---- mutual exclusion ------------------------------------------------- */

#define MX_THREADS 8
#define MX_EACH    250

struct mx_arg {
    struct rlock_client *client;
    struct redlock *redlock;
    const char *key;
    struct rlock_opts o;
    atomic_int *counter;
    atomic_int failures;
    char why[160];
};

/* A deliberately non-atomic read-modify-write (relaxed load, yield, store):
 * only the Redis lock keeps increments from being lost. The atomics are
 * there to keep ThreadSanitizer quiet, not to help. */
static void unsafe_increment(atomic_int *counter)
{
    int v = atomic_load_explicit(counter, memory_order_relaxed);
    sched_yield();
    atomic_store_explicit(counter, v + 1, memory_order_relaxed);
}

static void *mx_worker(void *p)
{
    struct mx_arg *a = p;
    struct rlock *l = rlock_new(a->client, a->key, &a->o);

    for (int i = 0; l && i < MX_EACH; i++) {
        int rc = rlock_acquire(l, 20000);
        if (rc != RLOCK_OK) {
            if (atomic_fetch_add(&a->failures, 1) == 0)
                snprintf(a->why, sizeof a->why, "acquire: %s", rlock_errstr(l));
            continue;
        }
        unsafe_increment(a->counter);
        if (rlock_release(l) != RLOCK_OK)
            atomic_fetch_add(&a->failures, 1);
    }
    rlock_free(l);
    return NULL;
}

static void run_mutex(enum rlock_kind kind, const char *name)
{
    char key[128];
    pthread_t th[MX_THREADS];
    atomic_int counter = 0;
    struct rlock_client *c = client_on(redis_port);
    struct mx_arg a = { .client = c, .key = key, .counter = &counter };
    struct timespec t0, t1;

    key_for(key, sizeof key, name);
    a.o = opts(kind, 5000, 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < MX_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, mx_worker, &a), 0);
    for (int i = 0; i < MX_THREADS; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (atomic_load(&a.failures))
        fail_msg("%d failures, first: %s", atomic_load(&a.failures), a.why);
    assert_int_equal(atomic_load(&counter), MX_THREADS * MX_EACH);
    struct rlock_stats_snap s = snap(c);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("# %s: %d contended lock+unlock in %.2f s (%.0f/s), waits %llu, "
           "notifications %llu, avg wait %.2f ms\n", name, MX_THREADS * MX_EACH, secs,
           MX_THREADS * MX_EACH / secs, s.waits, s.notifications,
           s.waits ? (double)s.wait_us_total / (double)s.waits / 1000.0 : 0.0);
    assert_int_equal(s.acquired, MX_THREADS * MX_EACH);
    assert_int_equal(s.lost, 0);
    rlock_client_free(c);
}

static void test_mutex_reentrant_8_threads(void **state)
{
    NEED_REDIS();
    run_mutex(RLOCK_REENTRANT, "mx-hash");
}

static void test_mutex_simple_8_threads(void **state)
{
    NEED_REDIS();
    run_mutex(RLOCK_SIMPLE, "mx-simple");
}

static void test_uncontended_rate(void **state)
{
    NEED_REDIS();
    static const enum rlock_kind kinds[] = { RLOCK_REENTRANT, RLOCK_SIMPLE };
    struct rlock_client *c = client_on(redis_port);
    char key[128];

    key_for(key, sizeof key, "rate");
    for (int k = 0; k < 2; k++) {
        struct rlock_opts o = opts(kinds[k], 10000, 1);
        struct rlock *l = rlock_new(c, key, &o);
        int n = 3000;
        int64_t t0 = util_now_ms();
        for (int i = 0; i < n; i++) {
            assert_int_equal(rlock_acquire(l, 1000), RLOCK_OK);
            assert_int_equal(rlock_release(l), RLOCK_OK);
        }
        int64_t ms = util_now_ms() - t0;
        printf("# uncontended %s lock+unlock: %d in %lld ms (%.0f/s)\n",
               rlock_kind_name(kinds[k]), n, (long long)ms, n * 1000.0 / (double)(ms ? ms : 1));
        rlock_free(l);
    }
    rlock_client_free(c);
}

/* ---- reentrancy and token safety ------------------------------------- */

static void test_reentrant(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    redisContext *r = raw(redis_port);
    char key[128];
    struct rlock_opts o = opts(RLOCK_REENTRANT, 5000, 1);

    key_for(key, sizeof key, "reentrant");
    struct rlock *l = rlock_new(c, key, &o);
    struct rlock *other = rlock_new(c, key, &o);

    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    assert_int_equal(rlock_depth(l), 2);
    assert_int_equal(raw_int(r, "HGET %s %s", key, rlock_token(l)), 2);
    assert_int_equal(rlock_acquire(other, 0), RLOCK_TIMEOUT);

    assert_int_equal(rlock_release(l), RLOCK_OK);
    assert_int_equal(raw_int(r, "EXISTS %s", key), 1);
    assert_int_equal(raw_int(r, "HGET %s %s", key, rlock_token(l)), 1);
    assert_true(raw_int(r, "PTTL %s", key) > 4000);
    assert_int_equal(rlock_acquire(other, 0), RLOCK_TIMEOUT);

    assert_int_equal(rlock_release(l), RLOCK_OK);
    assert_int_equal(raw_int(r, "EXISTS %s", key), 0);
    assert_int_equal(rlock_depth(l), 0);
    assert_int_equal(rlock_release(l), RLOCK_EINVAL);

    assert_int_equal(rlock_acquire(other, 0), RLOCK_OK);
    assert_int_equal(rlock_release(other), RLOCK_OK);
    struct rlock_stats_snap s = snap(c);
    assert_int_equal(s.lost, 0);
    assert_int_equal(s.timeouts, 2);

    /* A simple lock does not nest. */
    struct rlock_opts so = opts(RLOCK_SIMPLE, 5000, 0);
    struct rlock *simple = rlock_new(c, key, &so);
    assert_int_equal(rlock_acquire(simple, 0), RLOCK_OK);
    assert_int_equal(rlock_acquire(simple, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_release(simple), RLOCK_OK);

    rlock_free(l);
    rlock_free(other);
    rlock_free(simple);
    redisFree(r);
    rlock_client_free(c);
}

static void test_bad_handles(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    char longkey[RLOCK_KEY_MAX + 10];
    struct rlock_opts o = opts(RLOCK_REENTRANT, 0, 1);

    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    struct rlock *l1 = rlock_new(c, longkey, NULL);
    struct rlock *l2 = rlock_new(c, "rlocktest:badttl", &o);
    assert_int_equal(rlock_err(l1), RLOCK_EINVAL);
    assert_int_equal(rlock_err(l2), RLOCK_EINVAL);
    assert_int_equal(rlock_acquire(l1, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_acquire(l2, 0), RLOCK_EINVAL);
    rlock_free(l1);
    rlock_free(l2);
    /* A failure-mode option selects the simple kind. */
    struct rlock_opts po = opts(RLOCK_REENTRANT, 1000, 0);
    po.release = RLOCK_RELEASE_PLAIN_DEL;
    struct rlock *l3 = rlock_new(c, "rlocktest:kind", &po);
    assert_int_equal(rlock_get_opts(l3)->kind, RLOCK_SIMPLE);
    rlock_free(l3);
    rlock_client_free(c);
}

static void test_token_release_refuses_foreign(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    redisContext *r = raw(redis_port);
    char key[128], val[RLOCK_TOKEN_MAX];

    /* Simple lock: expired while held, someone else set the key since. */
    key_for(key, sizeof key, "foreign-simple");
    struct rlock_opts o = opts(RLOCK_SIMPLE, 100, 0);
    struct rlock *l = rlock_new(c, key, &o);
    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    raw_get(r, key, val, sizeof val);
    assert_string_equal(val, rlock_token(l));
    util_sleep_ms(200);
    assert_int_equal(raw_int(r, "EXISTS %s", key), 0);
    freeReplyObject(redisCommand(r, "SET %s someone-else PX 5000", key));
    assert_int_equal(rlock_release(l), RLOCK_ELOST);
    raw_get(r, key, val, sizeof val);
    assert_string_equal(val, "someone-else");
    assert_int_equal(snap(c).lost, 1);
    assert_int_equal(snap(c).foreign_release, 0);
    rlock_free(l);

    /* Reentrant lock: same story with another owner's hash. */
    key_for(key, sizeof key, "foreign-hash");
    struct rlock_opts ho = opts(RLOCK_REENTRANT, 100, 0);
    struct rlock *a = rlock_new(c, key, &ho);
    assert_int_equal(rlock_acquire(a, 0), RLOCK_OK);
    util_sleep_ms(200);
    ho.ttl_ms = 5000;
    struct rlock *b = rlock_new(c, key, &ho);
    assert_int_equal(rlock_get_opts(b)->ttl_ms, 5000);
    assert_int_equal(rlock_acquire(b, 0), RLOCK_OK);
    assert_int_equal(rlock_release(a), RLOCK_ELOST);
    assert_int_equal(raw_int(r, "HGET %s %s", key, rlock_token(b)), 1);
    assert_int_equal(rlock_release(b), RLOCK_OK);
    assert_int_equal(snap(c).lost, 2);
    rlock_free(a);
    rlock_free(b);

    /* get-then-del: also refuses (its bug is the window, not the check). */
    key_for(key, sizeof key, "foreign-getdel");
    struct rlock_opts go = opts(RLOCK_SIMPLE, 100, 0);
    go.release = RLOCK_RELEASE_GET_THEN_DEL;
    struct rlock *g = rlock_new(c, key, &go);
    assert_int_equal(rlock_acquire(g, 0), RLOCK_OK);
    util_sleep_ms(200);
    freeReplyObject(redisCommand(r, "SET %s someone-else PX 5000", key));
    assert_int_equal(rlock_release(g), RLOCK_ELOST);
    raw_get(r, key, val, sizeof val);
    assert_string_equal(val, "someone-else");
    /* and releases its own lock normally */
    freeReplyObject(redisCommand(r, "DEL %s", key));
    assert_int_equal(rlock_acquire(g, 0), RLOCK_OK);
    assert_int_equal(rlock_release(g), RLOCK_OK);
    assert_int_equal(raw_int(r, "EXISTS %s", key), 0);
    rlock_free(g);

    redisFree(r);
    rlock_client_free(c);
}

static void test_plain_del_deletes_foreign(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    redisContext *r = raw(redis_port);
    char key[128];

    /* The seeds' ABC: A's lock expires, B takes it, A deletes B's. */
    key_for(key, sizeof key, "plain-del");
    struct rlock_opts ao = opts(RLOCK_SIMPLE, 150, 0);
    ao.release = RLOCK_RELEASE_PLAIN_DEL;
    struct rlock_opts bo = opts(RLOCK_SIMPLE, 5000, 0);
    struct rlock *a = rlock_new(c, key, &ao);
    struct rlock *b = rlock_new(c, key, &bo);
    struct rlock *cc = rlock_new(c, key, &bo);

    assert_int_equal(rlock_acquire(a, 0), RLOCK_OK);
    util_sleep_ms(250);
    assert_int_equal(rlock_acquire(b, 0), RLOCK_OK);
    assert_int_equal(rlock_release(a), RLOCK_ELOST);
    assert_int_equal(raw_int(r, "EXISTS %s", key), 0);     /* B's lock gone */
    assert_int_equal(rlock_acquire(cc, 0), RLOCK_OK);      /* C walks in */
    struct rlock_stats_snap s = snap(c);
    assert_int_equal(s.foreign_release, 1);
    assert_int_equal(s.lost, 1);
    assert_int_equal(rlock_release(b), RLOCK_ELOST);       /* B's turn to be robbed */
    assert_int_equal(rlock_release(cc), RLOCK_OK);         /* token-lua left C's alone */
    rlock_free(a);
    rlock_free(b);
    rlock_free(cc);

    /* setnx-then-expire still sets a TTL when nothing crashes in between. */
    key_for(key, sizeof key, "setnx-expire");
    struct rlock_opts so = opts(RLOCK_SIMPLE, 3000, 0);
    so.acquire = RLOCK_ACQUIRE_SETNX_THEN_EXPIRE;
    struct rlock *x = rlock_new(c, key, &so);
    struct rlock *y = rlock_new(c, key, &so);
    assert_int_equal(rlock_acquire(x, 0), RLOCK_OK);
    long long pttl = raw_int(r, "PTTL %s", key);
    assert_true(pttl > 2000 && pttl <= 3000);
    assert_int_equal(rlock_acquire(y, 0), RLOCK_TIMEOUT);
    assert_int_equal(rlock_release(x), RLOCK_OK);
    rlock_free(x);
    rlock_free(y);

    redisFree(r);
    rlock_client_free(c);
}

/* ---- watchdog --------------------------------------------------------- */

static void test_watchdog_keeps_lock(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    redisContext *r = raw(redis_port);
    char key[128];
    struct rlock_opts o = opts(RLOCK_REENTRANT, 300, 1);

    key_for(key, sizeof key, "watchdog");
    struct rlock *l = rlock_new(c, key, &o);
    struct rlock *other = rlock_new(c, key, &o);
    /* a simple lock renewed by the same thread at the same time */
    char key2[128];
    key_for(key2, sizeof key2, "watchdog-simple");
    struct rlock_opts so = opts(RLOCK_SIMPLE, 300, 1);
    struct rlock *s = rlock_new(c, key2, &so);

    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    assert_int_equal(rlock_acquire(s, 0), RLOCK_OK);
    for (int i = 0; i < 5; i++) {
        util_sleep_ms(200);
        assert_int_equal(raw_int(r, "HGET %s %s", key, rlock_token(l)), 1);
        assert_true(raw_int(r, "PTTL %s", key) > 0);
        assert_true(raw_int(r, "PTTL %s", key2) > 0);
    }
    assert_int_equal(rlock_acquire(other, 0), RLOCK_TIMEOUT);
    assert_int_equal(rlock_is_lost(l), 0);
    struct rlock_stats_snap st = snap(c);
    assert_true(st.renewals >= 12);   /* ~9 per lock over 1 s at ttl/3 */
    assert_int_equal(rlock_release(l), RLOCK_OK);
    assert_int_equal(rlock_release(s), RLOCK_OK);
    assert_int_equal(snap(c).lost, 0);
    /* renewals stop on release */
    unsigned long long before = snap(c).renewals;
    util_sleep_ms(250);
    assert_int_equal(snap(c).renewals, before);
    assert_int_equal(raw_int(r, "EXISTS %s", key), 0);

    rlock_free(l);
    rlock_free(other);
    rlock_free(s);
    redisFree(r);
    rlock_client_free(c);
}

static void test_watchdog_marks_lost(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    redisContext *r = raw(redis_port);
    char key[128];
    struct rlock_opts o = opts(RLOCK_REENTRANT, 300, 1);

    key_for(key, sizeof key, "watchdog-lost");
    struct rlock *l = rlock_new(c, key, &o);
    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    /* someone deletes it behind our back (an operator, a plain-del peer) */
    freeReplyObject(redisCommand(r, "DEL %s", key));
    util_sleep_ms(250);
    assert_int_equal(rlock_is_lost(l), 1);
    assert_int_equal(snap(c).lost, 1);
    assert_int_equal(rlock_release(l), RLOCK_ELOST);
    assert_int_equal(snap(c).lost, 1);   /* counted once */
    rlock_free(l);
    redisFree(r);
    rlock_client_free(c);
}

static void test_no_watchdog_lock_expires(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    redisContext *r = raw(redis_port);
    char key[128];

    key_for(key, sizeof key, "no-watchdog");
    struct rlock_opts o = opts(RLOCK_SIMPLE, 200, 0);
    struct rlock *l = rlock_new(c, key, &o);
    struct rlock *other = rlock_new(c, key, &o);
    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    util_sleep_ms(400);
    assert_int_equal(raw_int(r, "EXISTS %s", key), 0);
    assert_int_equal(rlock_acquire(other, 0), RLOCK_OK);
    assert_int_equal(rlock_release(l), RLOCK_ELOST);
    assert_int_equal(snap(c).lost, 1);
    assert_int_equal(snap(c).renewals, 0);
    assert_int_equal(rlock_release(other), RLOCK_OK);
    rlock_free(l);
    rlock_free(other);
    redisFree(r);
    rlock_client_free(c);
}

/* ---- waiting ---------------------------------------------------------- */

struct waiter {
    struct rlock *l;
    long wait_ms;
    int rc;
    int64_t done_ms;
};

static void *waiter_main(void *p)
{
    struct waiter *w = p;
    w->rc = rlock_acquire(w->l, w->wait_ms);
    w->done_ms = util_now_ms();
    return NULL;
}

static void test_wait_wakes_on_release(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    char key[128];
    pthread_t th;

    key_for(key, sizeof key, "wait-wake");
    for (int kind = 0; kind < 2; kind++) {
        struct rlock_opts o = opts((enum rlock_kind)kind, 30000, 1);
        struct rlock *holder = rlock_new(c, key, &o);
        struct waiter w = { .l = rlock_new(c, key, &o), .wait_ms = 5000 };
        /* Woken by the release message, or (the default lock, same
         * process) handed the lock by the holder itself. */
        unsigned long long notes = snap(c).notifications + snap(c).handoffs;

        assert_int_equal(rlock_acquire(holder, 0), RLOCK_OK);
        int64_t t0 = util_now_ms();
        assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
        util_sleep_ms(300);
        int64_t released = util_now_ms();
        assert_int_equal(rlock_release(holder), RLOCK_OK);
        pthread_join(th, NULL);
        assert_int_equal(w.rc, RLOCK_OK);
        /* The fallback slice is 75..125 ms: waking within 60 ms of the
         * release means the PUBLISH woke it. */
        long lag = (long)(w.done_ms - released);
        printf("# %s: woke %ld ms after release, waited %ld ms of 5000\n",
               rlock_kind_name((enum rlock_kind)kind), lag, (long)(w.done_ms - t0));
        assert_true(lag < 60);
        assert_true(w.done_ms - t0 < 1000);
        assert_true(snap(c).notifications + snap(c).handoffs > notes);
        assert_true(rlock_last_wait_ms(w.l) >= 250);
        assert_int_equal(rlock_release(w.l), RLOCK_OK);
        rlock_free(holder);
        rlock_free(w.l);
    }
    rlock_client_free(c);
}

static void test_wait_times_out(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    char key[128];
    struct rlock_opts o = opts(RLOCK_REENTRANT, 30000, 1);

    key_for(key, sizeof key, "wait-timeout");
    struct rlock *holder = rlock_new(c, key, &o);
    struct rlock *l = rlock_new(c, key, &o);
    assert_int_equal(rlock_acquire(holder, 0), RLOCK_OK);
    int64_t t0 = util_now_ms();
    assert_int_equal(rlock_acquire(l, 300), RLOCK_TIMEOUT);
    long took = (long)(util_now_ms() - t0);
    assert_int_equal(rlock_err(l), RLOCK_TIMEOUT);
    assert_true(took >= 295 && took < 450);
    struct rlock_stats_snap s = snap(c);
    assert_int_equal(s.timeouts, 1);
    assert_int_equal(s.waits, 1);
    assert_true(s.wait_us_total >= 295000);
    /* the pooled subscriber came back clean: a plain command still works */
    assert_int_equal(rlock_client_ping(c, NULL, 0), RLOCK_OK);
    assert_int_equal(rlock_release(holder), RLOCK_OK);
    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    assert_int_equal(rlock_release(l), RLOCK_OK);
    rlock_free(holder);
    rlock_free(l);
    rlock_client_free(c);
}

/* A waiter whose holder's lock simply expires (no PUBLISH) gets it soon
 * after the expiry, because it sleeps no longer than the holder's PTTL. */
static void test_wait_for_expiry(void **state)
{
    NEED_REDIS();
    struct rlock_client *c = client_on(redis_port);
    char key[128];
    struct rlock_opts ho = opts(RLOCK_SIMPLE, 250, 0);
    struct rlock_opts wo = opts(RLOCK_SIMPLE, 5000, 0);

    key_for(key, sizeof key, "wait-expiry");
    struct rlock *holder = rlock_new(c, key, &ho);
    struct rlock *l = rlock_new(c, key, &wo);
    assert_int_equal(rlock_acquire(holder, 0), RLOCK_OK);
    int64_t t0 = util_now_ms();
    assert_int_equal(rlock_acquire(l, 2000), RLOCK_OK);
    long took = (long)(util_now_ms() - t0);
    assert_true(took >= 200 && took < 450);
    assert_int_equal(rlock_release(l), RLOCK_OK);
    assert_int_equal(rlock_release(holder), RLOCK_ELOST);
    rlock_free(holder);
    rlock_free(l);
    rlock_client_free(c);
}

/* ---- Redis unreachable ----------------------------------------------- */

static void test_unreachable_is_eunavail(void **state)
{
    int port = dead_port();
    struct rlock_client *c = client_on(port);
    char why[128] = "";

    assert_int_equal(rlock_client_err(c, NULL), RLOCK_EUNAVAIL);
    struct rlock *l = rlock_new(c, "rlocktest:unreachable", NULL);
    int64_t t0 = util_now_ms();
    assert_int_equal(rlock_acquire(l, 3000), RLOCK_EUNAVAIL);
    assert_true(util_now_ms() - t0 < 1000);
    assert_int_equal(rlock_err(l), RLOCK_EUNAVAIL);
    assert_true(strlen(rlock_errstr(l)) > 0);
    assert_int_equal(rlock_client_ping(c, why, sizeof why), RLOCK_EUNAVAIL);
    assert_non_null(strstr(why, "redis"));
    assert_int_equal(snap(c).unavailable, 1);
    rlock_free(l);
    rlock_client_free(c);
}

/* Own redis-server: kill it while a client is pooled, expect EUNAVAIL, then
 * restart it on the same port and expect the client to recover by itself. */
static pid_t start_redis(int port, const char *dir)
{
    char portstr[16];
    pid_t pid;

    snprintf(portstr, sizeof portstr, "%d", port);
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execlp("redis-server", "redis-server", "--port", portstr, "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", "--dir", dir, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) {
        struct timeval tv = { 0, 100000 };
        redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
        int ok = r && !r->err;
        redisFree(r);
        if (ok)
            return pid;
        util_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void test_slow_reconnect(void **state)
{
    char dir[] = "/tmp/rlock-itest-XXXXXX";
    if (system("command -v redis-server >/dev/null 2>&1") != 0 || !mkdtemp(dir))
        skip();
    int port = dead_port();
    pid_t pid = start_redis(port, dir);
    if (pid < 0) {
        rmdir(dir);
        skip();
    }
    struct rlock_client *c = client_on(port);
    struct rlock *l = rlock_new(c, "rlocktest:reconnect", NULL);
    assert_int_equal(rlock_acquire(l, 0), RLOCK_OK);
    assert_int_equal(rlock_release(l), RLOCK_OK);

    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    int64_t t0 = util_now_ms();
    assert_int_equal(rlock_acquire(l, 2000), RLOCK_EUNAVAIL);
    assert_true(util_now_ms() - t0 < 1000);
    assert_int_equal(rlock_acquire(l, 2000), RLOCK_EUNAVAIL);

    pid = start_redis(port, dir);
    assert_true(pid > 0);
    assert_int_equal(rlock_acquire(l, 1000), RLOCK_OK);   /* no restart needed */
    assert_int_equal(rlock_release(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    rmdir(dir);
}

/* ---- redlock ---------------------------------------------------------- */

static struct redlock *redlock_with_dead(int ndead)
{
    struct redlock_config cfg = rl_cfg;
    cfg.instance = "itest";
    for (int i = 0; i < ndead; i++)
        cfg.nodes[cfg.nnodes - 1 - i].port = dead_port();
    struct redlock *r = redlock_new(&cfg);
    assert_non_null(r);
    return r;
}

static int count_keys(const char *key)
{
    int n = 0;
    for (int i = 0; i < rl_cfg.nnodes; i++) {
        redisContext *r = raw(rl_cfg.nodes[i].port);
        n += (int)raw_int(r, "EXISTS %s", key);
        redisFree(r);
    }
    return n;
}

static void redlock_round(int ndead, const char *name)
{
    struct redlock *rl = redlock_with_dead(ndead);
    struct redlock_lease lease, other;
    char key[128];

    key_for(key, sizeof key, name);
    assert_int_equal(redlock_lock(rl, key, 2000, 500, &lease), REDLOCK_OK);
    assert_int_equal(lease.nodes_locked, rl_cfg.nnodes - ndead);
    assert_true(lease.validity_ms > 1900 && lease.validity_ms < 2000);
    assert_int_equal(count_keys(key), rl_cfg.nnodes - ndead);
    /* contended: bounded retries, then TIMEOUT, and it left nothing behind */
    int64_t t0 = util_now_ms();
    assert_int_equal(redlock_lock(rl, key, 2000, 200, &other), REDLOCK_TIMEOUT);
    long took = (long)(util_now_ms() - t0);
    assert_true(took >= 195 && took < 400);
    assert_true(other.attempts >= 2);
    assert_int_equal(redlock_unlock(rl, &lease), REDLOCK_OK);
    assert_int_equal(count_keys(key), 0);
    assert_int_equal(redlock_unlock(rl, &lease), REDLOCK_EINVAL);
    struct redlock_stats *s = redlock_stats(rl);
    assert_int_equal(atomic_load(&s->acquired), 1);
    assert_int_equal(atomic_load(&s->timeouts), 1);
    assert_int_equal(atomic_load(&s->released), 1);
    redlock_free(rl);
}

static void test_redlock_all_nodes(void **state)
{
    NEED_REDLOCK();
    redlock_round(0, "redlock-all");
}

static void test_redlock_one_node_down(void **state)
{
    NEED_REDLOCK();
    redlock_round(1, "redlock-one-down");
}

static void test_redlock_two_nodes_down(void **state)
{
    NEED_REDLOCK();
    struct redlock *rl = redlock_with_dead(2);
    struct redlock_lease lease;
    char key[128];

    key_for(key, sizeof key, "redlock-two-down");
    int64_t t0 = util_now_ms();
    assert_int_equal(redlock_lock(rl, key, 2000, 3000, &lease), REDLOCK_EUNAVAIL);
    assert_true(util_now_ms() - t0 < 500);
    assert_int_equal(lease.err, REDLOCK_EUNAVAIL);
    assert_int_equal(count_keys(key), 0);   /* the one partial lock was undone */
    assert_int_equal(atomic_load(&redlock_stats(rl)->unavailable), 1);
    /* each dead node failed to connect twice: the SET round and the undo */
    assert_int_equal(atomic_load(&redlock_stats(rl)->node_errors), 4);
    redlock_free(rl);
}

static void *rl_worker(void *p)
{
    struct mx_arg *a = p;
    for (int i = 0; i < 50; i++) {
        struct redlock_lease lease;
        if (redlock_lock(a->redlock, a->key, 5000, 20000, &lease) != REDLOCK_OK) {
            atomic_fetch_add(&a->failures, 1);
            continue;
        }
        unsafe_increment(a->counter);
        if (redlock_unlock(a->redlock, &lease) != REDLOCK_OK)
            atomic_fetch_add(&a->failures, 1);
    }
    return NULL;
}

static void test_redlock_mutual_exclusion(void **state)
{
    NEED_REDLOCK();
    char key[128];
    pthread_t th[4];
    atomic_int counter = 0;
    struct redlock_config cfg = rl_cfg;
    cfg.retry_delay_ms = 5;
    struct mx_arg a = { .redlock = redlock_new(&cfg), .key = key, .counter = &counter };

    key_for(key, sizeof key, "redlock-mx");
    int64_t t0 = util_now_ms();
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, rl_worker, &a), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&a.failures), 0);
    assert_int_equal(atomic_load(&counter), 200);
    printf("# redlock x%d: 200 contended lock+unlock in %lld ms, %llu rounds\n",
           cfg.nnodes, (long long)(util_now_ms() - t0),
           (unsigned long long)atomic_load(&redlock_stats(a.redlock)->attempts));
    redlock_free(a.redlock);
}

int main(void)
{
    const char *p = getenv("LAB_REDIS_PORT");
    const char *rp = getenv("LAB_REDLOCK_PORTS");
    const char *quick = getenv("LAB_QUICK");

    if (p && *p)
        redis_port = atoi(p);
    redlock_config_default(&rl_cfg);
    if (rp && *rp && redlock_parse_nodes(rp, "127.0.0.1", &rl_cfg) == 0 && rl_cfg.nnodes >= 3)
        have_redlock = 1;
    if (!redis_port)
        fprintf(stderr, "# LAB_REDIS_PORT not set: Redis tests skipped\n");
    if (!have_redlock)
        fprintf(stderr, "# LAB_REDLOCK_PORTS (3+ ports) not set: Redlock tests skipped\n");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rconn_cmd),
        cmocka_unit_test(test_rconn_unreachable),
        cmocka_unit_test(test_rconn_script_noscript),
        cmocka_unit_test(test_rconn_eof_retry),
        cmocka_unit_test(test_rconn_pool_flush),
        cmocka_unit_test(test_mutex_reentrant_8_threads),
        cmocka_unit_test(test_mutex_simple_8_threads),
        cmocka_unit_test(test_uncontended_rate),
        cmocka_unit_test(test_reentrant),
        cmocka_unit_test(test_bad_handles),
        cmocka_unit_test(test_token_release_refuses_foreign),
        cmocka_unit_test(test_plain_del_deletes_foreign),
        cmocka_unit_test(test_watchdog_keeps_lock),
        cmocka_unit_test(test_watchdog_marks_lost),
        cmocka_unit_test(test_no_watchdog_lock_expires),
        cmocka_unit_test(test_wait_wakes_on_release),
        cmocka_unit_test(test_wait_times_out),
        cmocka_unit_test(test_wait_for_expiry),
        cmocka_unit_test(test_unreachable_is_eunavail),
        cmocka_unit_test(test_redlock_all_nodes),
        cmocka_unit_test(test_redlock_one_node_down),
        cmocka_unit_test(test_redlock_two_nodes_down),
        cmocka_unit_test(test_redlock_mutual_exclusion),
        cmocka_unit_test(test_slow_reconnect),
    };
    size_t n = sizeof tests / sizeof tests[0];
    if (quick && strcmp(quick, "1") == 0)
        n--;   /* test_slow_* last */
    return _cmocka_run_group_tests("test_rlock", tests, n, NULL, NULL);
}
