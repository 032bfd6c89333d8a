/* The guard registry: the list from guard_list.h, lookup, merged option
 * rows, the shared backends (guard_backends) and the per-process hooks
 * (init/fini, health, metrics). */
#include "guards/guard.h"

#include "base/metrics.h"
#include "guards/core/redis_shared.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define GUARD(id) extern const struct guard guard_##id;
#include "guards/guard_list.h"
#undef GUARD

static const struct guard *const guards[] = {
#define GUARD(id) &guard_##id,
#include "guards/guard_list.h"
#undef GUARD
};

#define NGUARDS (sizeof(guards) / sizeof(guards[0]))

const struct guard *guard_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < NGUARDS; i++)
        if (strcmp(guards[i]->name, name) == 0)
            return guards[i];
    return NULL;
}

const struct guard *const *guard_all(size_t *n)
{
    *n = NGUARDS;
    return guards;
}

static char names_buf[512];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void build_names(void)
{
    size_t off = 0;
    for (size_t i = 0; i < NGUARDS && off < sizeof(names_buf); i++)
        off += (size_t)snprintf(names_buf + off, sizeof(names_buf) - off, "%s%s",
                                i ? ", " : "", guards[i]->name);
}

const char *guard_names(void)
{
    pthread_once(&names_once, build_names);
    return names_buf;
}

static int register_rows(const struct guard_metric *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (metrics_register(m[i].name, m[i].type, m[i].help) != 0)
            return -1;
    return 0;
}

static int any_uses_redis(void);

/* Idempotent (metrics_register keeps a name once): init may run again. */
int guard_register_metrics(void)
{
    if (any_uses_redis() && register_rows(redis_shared_metrics, redis_shared_nmetrics) != 0)
        return -1;
    for (size_t i = 0; i < NGUARDS; i++) {
        const struct guard_doc *d = guards[i]->doc;
        if (d && register_rows(d->metrics, d->nmetrics) != 0)
            return -1;
    }
    return 0;
}

static int any_uses_redis(void)
{
    for (size_t i = 0; i < NGUARDS; i++)
        if (guard_has(guards[i], GUARD_USES_REDIS))
            return 1;
    return 0;
}

size_t guard_option_groups(struct cfg_group *out, size_t max)
{
    size_t n = 0;
    if (any_uses_redis() && n < max)
        out[n++] = (struct cfg_group){redis_shared_options, REDIS_SHARED_NOPTIONS,
                                      &redis_shared_conf};
    for (size_t i = 0; i < NGUARDS && n < max; i++)
        if (guards[i]->noptions)
            out[n++] = (struct cfg_group){guards[i]->options, guards[i]->noptions,
                                          guards[i]->options_conf};
    return n;
}

/* The shared backends, owned here from guard_init_all to guard_fini_all. */
static struct guard_backends backends;
static size_t started;   /* guards whose init ran, in list order */

int guard_init_all(const char *instance, const struct db_conf *db, char *err, size_t errlen)
{
    if (guard_register_metrics() != 0) {
        snprintf(err, errlen, "metrics: too many families to register");
        return -1;
    }
    backends = (struct guard_backends){.instance = instance, .db = db};
    if (any_uses_redis()) {
        char why[160] = "";
        backends.redis = redis_shared_new(&redis_shared_conf, instance, why, sizeof(why));
        if (!backends.redis) {
            snprintf(err, errlen, "redis: %s", why);
            return -1;
        }
    }
    for (started = 0; started < NGUARDS; started++) {
        const struct guard *g = guards[started];
        struct guard_backends b = backends;
        if (!guard_has(g, GUARD_USES_REDIS))
            b.redis = NULL;
        char why[160] = "";
        if (g->init && g->init(g, &b, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "guard %s: %s", g->name, why);
            guard_fini_all();
            return -1;
        }
    }
    return 0;
}

void guard_fini_all(void)
{
    while (started > 0) {
        const struct guard *g = guards[--started];
        if (g->fini)
            g->fini(g);
    }
    redis_shared_free(backends.redis);
    backends.redis = NULL;
}

int guard_health(const char **up, size_t nup, size_t *nup_out, const char **backend,
                 char *err, size_t errlen)
{
    *nup_out = 0;
    if (backends.redis) {
        const char *name = "redis";
        if (redis_shared_health(backends.redis, &name, err, errlen) != 0) {
            *backend = name;
            return -1;
        }
        if (*nup_out < nup)
            up[(*nup_out)++] = name;
    }
    for (size_t i = 0; i < NGUARDS; i++) {
        if (!guards[i]->health)
            continue;
        const char *name = guards[i]->name;
        int h = guards[i]->health(guards[i], &name, err, errlen);
        if (h < 0) {
            *backend = name;
            return -1;
        }
        if (h > 0)
            continue;   /* not configured: neither up nor down */
        if (*nup_out < nup)
            up[(*nup_out)++] = name;
    }
    return 0;
}

void guard_export_metrics(void)
{
    if (backends.redis)
        redis_shared_export_metrics(backends.redis);
    for (size_t i = 0; i < NGUARDS; i++)
        if (guards[i]->export_metrics)
            guards[i]->export_metrics();
}
