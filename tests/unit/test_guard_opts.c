/* A guard's request options: every guard declares the body fields it
 * accepts (lib/guards/guard_*.c) and parses them itself through
 * guard_parse_opts. Tables of bodies per guard: what each accepts, the
 * values and defaults it reads, and the 400 for a field it does not take
 * (it names the guard and lists what it accepts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "guards/guard.h"
#include "locks/lock_opts.h"

static const struct guard *find(const char *name)
{
    const struct guard *g = guard_find(name);
    if (!g)
        fail_msg("guard %s not in this build", name);
    return g;
}

/* Parse body for guard; returns the rc, fills *lo when the guard has lock
 * options (NULL opts: its defaults). */
static int parse(const char *guard, const char *body, struct lock_req_opts *lo, char *err,
                 size_t errlen)
{
    const struct guard *g = find(guard);
    struct guard_opts store;
    const void *opts = NULL;
    err[0] = '\0';
    int rc = guard_parse_opts(g, body, strlen(body), &store, &opts, err, errlen);
    if (rc == 0 && lo) {
        const void *o = opts ? opts : g->opts_default;
        if (!o)
            fail_msg("%s: no options and no defaults", guard);
        memcpy(lo, o, sizeof *lo);
    }
    return rc;
}

/* Which guard accepts which option field (beyond the sale's own). */
static void test_accepted_fields(void **state)
{
    (void)state;
    static const char *const fields[] = {"lock_ttl_ms", "watchdog", "acquire", "release",
                                         "fencing", "replicas_ack", "fair"};
    static const struct { const char *guard, *accepts; } cases[] = {
        {"none",               ""},
        {"optimistic",         ""},
        {"for-update",         ""},
        {"conditional-update", ""},
        {"batched-update",     ""},
        {"redis-decr",         " replicas_ack "},
        {"redis-stream",       " replicas_ack "},
        {"mutex",              " fencing "},
        {"lock-table",         " lock_ttl_ms fencing "},
        {"zookeeper",          " fencing "},
        {"redlock",            " lock_ttl_ms watchdog fencing "},
        {"etcd",               " lock_ttl_ms watchdog fencing "},
        {"segmented",          " lock_ttl_ms watchdog acquire release replicas_ack "},
        {"redis-lock",         " lock_ttl_ms watchdog acquire release fencing replicas_ack fair "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!guard_find(cases[i].guard))
            continue;   /* a build without it */
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            char body[128], err[512], want[32];
            /* false / 0 are in range for every one of these fields. */
            int is_bool = !strcmp(fields[f], "watchdog") || !strcmp(fields[f], "fencing") ||
                          !strcmp(fields[f], "fair");
            int is_enum = !strcmp(fields[f], "acquire") || !strcmp(fields[f], "release");
            snprintf(body, sizeof body, "{\"sku\":\"S\",\"%s\":%s}", fields[f],
                     is_bool ? "false" : is_enum
                         ? (!strcmp(fields[f], "acquire") ? "\"set-nx-px\"" : "\"token-lua\"")
                         : "0");
            snprintf(want, sizeof want, " %s ", fields[f]);
            int accepts = strstr(cases[i].accepts, want) != NULL;
            int rc = parse(cases[i].guard, body, NULL, err, sizeof err);
            if ((rc == 0) != accepts)
                fail_msg("%s with %s: rc %d, want %s (%s)", cases[i].guard, fields[f], rc,
                         accepts ? "accepted" : "400", err);
            if (!accepts && (!strstr(err, cases[i].guard) || !strstr(err, fields[f]) ||
                             !strstr(err, "accepts")))
                fail_msg("%s with %s: the 400 must name the guard, the field and what it "
                         "accepts: %s", cases[i].guard, fields[f], err);
        }
    }
}

/* Every guard takes the sale's own fields, and nothing else unknown. */
static void test_common_fields_and_unknown(void **state)
{
    (void)state;
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        char err[512];
        struct guard_opts store;
        const void *opts;
        static const char common[] =
            "{\"sku\":\"S\",\"qty\":2,\"order_id\":\"o-1\",\"user_id\":\"u-7\",\"guard\":\"x\","
            "\"hold_ms\":5,\"lock_wait_ms\":100}";
        if (guard_parse_opts(all[i], common, strlen(common), &store, &opts, err, sizeof err))
            fail_msg("%s refuses the sale's own fields: %s", all[i]->name, err);
        static const char typo[] = "{\"sku\":\"S\",\"lock_wiat_ms\":100}";
        if (guard_parse_opts(all[i], typo, strlen(typo), &store, &opts, err, sizeof err) == 0)
            fail_msg("%s accepts an unknown field", all[i]->name);
        /* The list of accepted fields is in the answer, the sale's own included. */
        if (!strstr(err, all[i]->name) || !strstr(err, "lock_wiat_ms") ||
            !strstr(err, "sku") || !strstr(err, "lock_wait_ms") || !strstr(err, "hold_ms"))
            fail_msg("%s: unknown-field 400 lacks the guard, the field or the list: %s",
                     all[i]->name, err);
    }
}

/* redis-lock: values, defaults, types and bounds, with the 400 texts. */
static void test_redis_lock_values(void **state)
{
    (void)state;
    struct lock_req_opts o;
    char err[512];
    assert_int_equal(parse("redis-lock", "{\"sku\":\"S\"}", &o, err, sizeof err), 0);
    assert_int_equal(o.ttl_ms, 0);   /* 0: the instance's --lock-ttl */
    assert_int_equal(o.watchdog, 1);
    assert_int_equal(o.acquire, RLOCK_ACQUIRE_SET_NX_PX);
    assert_int_equal(o.release, RLOCK_RELEASE_TOKEN_LUA);
    assert_int_equal(o.fencing, 0);
    assert_int_equal(o.replicas_ack, 0);
    assert_int_equal(o.fair, 0);

    assert_int_equal(parse("redis-lock",
                           "{\"sku\":\"S\",\"lock_ttl_ms\":600000,\"watchdog\":false,"
                           "\"acquire\":\"setnx-then-expire\",\"release\":\"get-then-del\","
                           "\"fencing\":true,\"replicas_ack\":2,\"fair\":true}",
                           &o, err, sizeof err), 0);
    assert_int_equal(o.ttl_ms, 600000);
    assert_int_equal(o.watchdog, 0);
    assert_int_equal(o.acquire, RLOCK_ACQUIRE_SETNX_THEN_EXPIRE);
    assert_int_equal(o.release, RLOCK_RELEASE_GET_THEN_DEL);
    assert_int_equal(o.fencing, 1);
    assert_int_equal(o.replicas_ack, 2);
    assert_int_equal(o.fair, 1);

    static const struct { const char *label, *body, *mention; } bad[] = {
        {"ttl too long",      "{\"sku\":\"S\",\"lock_ttl_ms\":600001}", "lock_ttl_ms must be 0..600000"},
        {"ttl negative",      "{\"sku\":\"S\",\"lock_ttl_ms\":-1}",     "lock_ttl_ms must be 0..600000"},
        {"ttl a string",      "{\"sku\":\"S\",\"lock_ttl_ms\":\"5\"}",  "lock_ttl_ms must be an integer"},
        {"ttl a float",       "{\"sku\":\"S\",\"lock_ttl_ms\":1.5}",    "lock_ttl_ms must be an integer"},
        {"watchdog 1",        "{\"sku\":\"S\",\"watchdog\":1}",         "watchdog must be true or false"},
        {"fair a string",     "{\"sku\":\"S\",\"fair\":\"yes\"}",       "fair must be true or false"},
        {"replicas 3",        "{\"sku\":\"S\",\"replicas_ack\":3}",     "replicas_ack must be 0..2"},
        {"release unknown",   "{\"sku\":\"S\",\"release\":\"yolo\"}",   "release must be token-lua"},
        {"acquire a number",  "{\"sku\":\"S\",\"acquire\":1}",          "acquire must be set-nx-px"},
        {"null",              "{\"sku\":\"S\",\"fencing\":null}",       "fencing must be true or false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse("redis-lock", bad[i].body, &o, err, sizeof err) == 0)
            fail_msg("%s: accepted", bad[i].label);
        if (!strstr(err, bad[i].mention))
            fail_msg("%s: want \"%s\" in \"%s\"", bad[i].label, bad[i].mention, err);
    }
}

/* The body is already checked by req_parse_deduct; a broken one is still a
 * clean -1 here, never a crash. */
static void test_bad_bodies(void **state)
{
    (void)state;
    char err[512];
    static const char *const bodies[] = {"", "[]", "{", "\"x\"", "{\"sku\":\"S\"} x"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        if (parse("redis-lock", bodies[i], NULL, err, sizeof err) == 0)
            fail_msg("body %zu accepted: %s", i, bodies[i]);
}

/* Each guard's options fit the caller's storage, and a guard with fields
 * has defaults to read when the body sets none. */
static void test_option_storage(void **state)
{
    (void)state;
    size_t n;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        const struct guard *g = all[i];
        if (g->opts_size > sizeof(struct guard_opts))
            fail_msg("%s: options of %zu bytes exceed struct guard_opts", g->name,
                     g->opts_size);
        if (g->nfields && (!g->opts_default || !g->opts_size))
            fail_msg("%s: fields without defaults", g->name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted_fields),
        cmocka_unit_test(test_common_fields_and_unknown),
        cmocka_unit_test(test_redis_lock_values),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_option_storage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
