/* Guard registry: lookup, names list, and the table's promises. Iterates
 * guard_all() so guards added later are covered without editing this file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "guards/guard.h"
#include "guards/core/redis_shared.h"

static void test_find_every_guard(void **state)
{
    (void)state;
    size_t n = 0;
    const struct guard *const *all = guard_all(&n);
    assert_non_null(all);
    assert_true(n >= 5);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(all[i]);
        assert_non_null(all[i]->name);
        const struct guard *g = guard_find(all[i]->name);
        if (g != all[i])
            fail_msg("guard_find(\"%s\") did not return its table entry", all[i]->name);
    }
}

static void test_find_unknown(void **state)
{
    (void)state;
    static const struct { const char *label, *name; } cases[] = {
        {"NULL", NULL},
        {"empty", ""},
        {"unknown", "no-such-guard"},
        {"case differs", "NONE"},
        {"prefix", "for"},
        {"trailing space", "none "},
        {"leading space", " mutex"},
        {"longer", "mutexes"},
        {"list text", "none, mutex"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (guard_find(cases[i].name) != NULL)
            fail_msg("%s: guard_find returned a guard", cases[i].label);
}

static void test_names_unique_and_wellformed(void **state)
{
    (void)state;
    size_t n = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        const char *name = all[i]->name;
        assert_true(strlen(name) > 0);
        /* Names travel in JSON, headers and comma lists. */
        if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name))
            fail_msg("guard name \"%s\" has characters outside [a-z0-9-]", name);
        if (strlen(name) >= sizeof(((struct deduct_res *)0)->guard))
            fail_msg("guard name \"%s\" does not fit deduct_res.guard", name);
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(name, all[j]->name) == 0)
                fail_msg("guard name \"%s\" appears twice (%zu and %zu)", name, i, j);
    }
}

static void test_names_list(void **state)
{
    (void)state;
    size_t n = 0;
    const struct guard *const *all = guard_all(&n);
    const char *list = guard_names();
    assert_non_null(list);
    assert_ptr_equal(guard_names(), list);   /* built once */

    /* Split "a, b, c" and expect exactly the table, in table order. */
    char *copy = strdup(list);
    assert_non_null(copy);
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (k >= n)
            fail_msg("guard_names() lists more than %zu names: %s", n, list);
        if (strcmp(tok, all[k]->name) != 0)
            fail_msg("guard_names() item %zu is \"%s\", table has \"%s\"", k, tok,
                     all[k]->name);
        k++;
    }
    free(copy);
    if (k != n)
        fail_msg("guard_names() lists %zu names, table has %zu: %s", k, n, list);
}

static void test_every_guard_described(void **state)
{
    (void)state;
    size_t n = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        const struct guard *g = all[i];
        if (!g->how || !*g->how)
            fail_msg("guard %s has no `how` text", g->name);
        if (!g->expect || !*g->expect)
            fail_msg("guard %s has no `expect` text", g->name);
        if (!g->deduct)
            fail_msg("guard %s has no deduct function", g->name);
        if (strchr(g->how, '\n') || strchr(g->expect, '\n'))
            fail_msg("guard %s: how/expect must be one line", g->name);
        if (g->flags & ~GUARD_FLAGS_ALL)
            fail_msg("guard %s: flags 0x%x has a bit no GUARD_* names", g->name, g->flags);
    }
}

/* Every guard writes its description in its own file: each text set, its
 * steps listed, its file named. */
static void test_every_guard_documented(void **state)
{
    (void)state;
    size_t n = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        const struct guard_doc *d = all[i]->doc;
        if (!d)
            fail_msg("guard %s has no doc", all[i]->name);
        const char *texts[] = {d->needs, d->use_when, d->breaks, d->origin, d->statements,
                               d->code};
        for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
            if (!texts[k] || !*texts[k])
                fail_msg("guard %s: doc text %zu is empty", all[i]->name, k);
        if (!d->steps || !d->steps[0])
            fail_msg("guard %s: doc has no steps", all[i]->name);
        if (!strstr(d->code, "lib/guards/"))
            fail_msg("guard %s: code %s is not under lib/guards/", all[i]->name, d->code);
        if ((all[i]->locked != NULL) != (d->lock_home != NULL) &&
            strcmp(all[i]->name, "segmented") != 0)
            fail_msg("guard %s: a lock_home iff it has `locked`", all[i]->name);
    }
}

static int cap(json_t *g, const char *name)
{
    json_t *c = json_object_get(json_object_get(g, "capabilities"), name);
    if (!json_is_boolean(c))
        fail_msg("capability %s missing", name);
    return json_is_true(c);
}

/* The capabilities follow from fields and hooks: the lease guards are
 * the ones taking lock_ttl_ms, the Redis-stock ones have `side`, and so on;
 * the metric rows come with them and are registered with lib/base/metrics. */
static void test_capabilities_derived(void **state)
{
    (void)state;
    static const struct { const char *name; int lease, redis_stock, write_behind, carts,
                          check; } want[] = {
        {"none", 0, 0, 0, 1, 0},          {"mutex", 0, 0, 0, 1, 0},
        {"redis-lock", 1, 0, 0, 1, 0},    {"segmented", 1, 1, 0, 0, 0},
        {"redis-decr", 0, 1, 0, 0, 0},    {"redlock", 1, 0, 0, 1, 1},
        {"lock-table", 1, 0, 0, 1, 0},    {"redis-stream", 0, 1, 1, 1, 0},
        {"zookeeper", 0, 0, 0, 1, 1},     {"etcd", 1, 0, 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *g = guard_json(guard_find(want[i].name));
        assert_non_null(g);
        if (cap(g, "lease") != want[i].lease || cap(g, "redis_stock") != want[i].redis_stock ||
            cap(g, "write_behind") != want[i].write_behind || cap(g, "carts") != want[i].carts ||
            cap(g, "checks_lease_before_write") != want[i].check)
            fail_msg("guard %s: capabilities %s", want[i].name,
                     json_dumps(json_object_get(g, "capabilities"), JSON_COMPACT));
        json_decref(g);
    }
    json_t *zk = guard_json(guard_find("zookeeper"));
    json_t *m = json_object_get(zk, "metrics");
    assert_true(json_array_size(m) > 0);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(zk, "capabilities"), "lock_home")), "zookeeper");
    json_decref(zk);
    assert_int_equal(guard_register_metrics(), 0);
    assert_int_equal(guard_register_metrics(), 0);
    const struct metrics_family *f = metrics_family_of("lab_zk_connected");
    assert_non_null(f);
    assert_string_equal(f->type, "gauge");
    assert_non_null(metrics_family_of("lab_stream_lag_seconds"));
    assert_non_null(metrics_family_of("lab_lock_handoffs_total"));
}

static void test_safety_flags(void **state)
{
    (void)state;
    static const struct { const char *name; int safe; } known[] = {
        {"none", 0},
        {"mutex", 0},
        {"for-update", 1},
        {"optimistic", 1},
        {"conditional-update", 1},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const struct guard *g = guard_find(known[i].name);
        if (!g)
            fail_msg("guard %s is missing", known[i].name);
        if (guard_has(g, GUARD_SAFE_ACROSS_INSTANCES) != known[i].safe)
            fail_msg("guard %s: safe_across_instances=%d, want %d", known[i].name,
                     guard_has(g, GUARD_SAFE_ACROSS_INSTANCES), known[i].safe);
    }
    /* An unsafe guard must say so in its expectation, a safe one must not. */
    size_t n = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++)
        if (!guard_has(all[i], GUARD_SAFE_ACROSS_INSTANCES) && !strstr(all[i]->expect, "oversell"))
            fail_msg("unsafe guard %s does not mention oversells: %s", all[i]->name,
                     all[i]->expect);
}

/* Option tables: every guard row is well formed, a table shared by several
 * guards is offered once, and no name is claimed twice (cfg_parse_groups
 * would refuse to start). */
static void test_option_groups(void **state)
{
    (void)state;
    struct cfg_group groups[GUARD_GROUPS_MAX];
    size_t ng = guard_option_groups(groups, GUARD_GROUPS_MAX);
    size_t n = 0, with_options = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        if (!all[i]->noptions)
            continue;
        with_options++;
        if (!all[i]->options || !all[i]->options_conf)
            fail_msg("guard %s declares options without a table or a conf", all[i]->name);
        int listed = 0;
        for (size_t g = 0; g < ng; g++)
            listed += groups[g].opts == all[i]->options;
        if (listed != 1)
            fail_msg("guard %s's option table is offered %d times", all[i]->name, listed);
    }
    /* The shared Redis rows are the backend's: one group of their own,
     * offered once when any guard uses Redis, and no guard's. */
    size_t uses_redis = 0, redis_groups = 0;
    for (size_t i = 0; i < n; i++) {
        uses_redis += guard_has(all[i], GUARD_USES_REDIS);
        if (all[i]->options == redis_shared_options)
            fail_msg("guard %s lists the shared Redis rows as its own", all[i]->name);
    }
    for (size_t g = 0; g < ng; g++)
        redis_groups += groups[g].opts == redis_shared_options;
    assert_int_equal(redis_groups, uses_redis > 0);
    assert_true(with_options >= 1);   /* redlock */
    assert_int_equal(ng, with_options + redis_groups);
    for (size_t g = 0; g < ng; g++) {
        for (size_t i = 0; i < groups[g].nopts; i++) {
            const struct cfg_opt *o = &groups[g].opts[i];
            if (!o->name || !o->env || !o->help)
                fail_msg("guard option %zu of group %zu lacks name, env or help", i, g);
            for (size_t h = 0; h < ng; h++)
                for (size_t j = 0; j < groups[h].nopts; j++)
                    if ((h != g || j != i) && strcmp(o->name, groups[h].opts[j].name) == 0)
                        fail_msg("option --%s appears twice", o->name);
        }
    }
    /* Parsing them all with no arguments fills every default. */
    char arg0[] = "test", *argv[] = {arg0, NULL}, err[256] = "";
    assert_int_equal(cfg_parse_groups(groups, ng, 1, argv, NULL, err, sizeof err), CFG_OK);
}

/* init and fini come in pairs, a health check belongs to a guard that
 * opens its backend, and no two guards share a hook (a shared backend's
 * checks are the registry's, called once, not a shared function). */
static void test_hooks_paired(void **state)
{
    (void)state;
    size_t n = 0;
    const struct guard *const *all = guard_all(&n);
    for (size_t i = 0; i < n; i++) {
        const struct guard *g = all[i];
        if (!g->init != !g->fini)
            fail_msg("guard %s has init without fini or fini without init", g->name);
        if (g->health && !g->init)
            fail_msg("guard %s checks a backend it never opens", g->name);
        if (guard_has(g, GUARD_USES_REDIS) && !g->init)
            fail_msg("guard %s uses Redis but has no init to receive it", g->name);
        for (size_t j = 0; j < n; j++)
            if (j != i && ((g->health && g->health == all[j]->health) ||
                           (g->export_metrics && g->export_metrics == all[j]->export_metrics)))
                fail_msg("guards %s and %s share a hook", g->name, all[j]->name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_every_guard),
        cmocka_unit_test(test_find_unknown),
        cmocka_unit_test(test_names_unique_and_wellformed),
        cmocka_unit_test(test_names_list),
        cmocka_unit_test(test_every_guard_described),
        cmocka_unit_test(test_safety_flags),
        cmocka_unit_test(test_every_guard_documented),
        cmocka_unit_test(test_capabilities_derived),
        cmocka_unit_test(test_option_groups),
        cmocka_unit_test(test_hooks_paired),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
