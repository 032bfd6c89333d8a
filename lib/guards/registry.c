/* The guard registry: the list from guard_list.h, lookup, merged option
 * rows, and the per-process hooks (init/fini, health, metrics). */
#include "guard.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define GUARD(id) extern const struct guard guard_##id;
#include "guard_list.h"
#undef GUARD

static const struct guard *const guards[] = {
#define GUARD(id) &guard_##id,
#include "guard_list.h"
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

size_t guard_option_groups(struct cfg_group *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < NGUARDS; i++) {
        const struct guard *g = guards[i];
        int seen = 0;
        for (size_t k = 0; k < n; k++)
            seen |= out[k].opts == g->options;
        if (!g->noptions || seen || n == max)
            continue;
        out[n++] = (struct cfg_group){g->options, g->noptions, g->options_conf};
    }
    return n;
}

static size_t started;   /* guards whose init ran, in list order */

int guard_init_all(const char *instance, char *err, size_t errlen)
{
    for (started = 0; started < NGUARDS; started++) {
        const struct guard *g = guards[started];
        char why[160] = "";
        if (g->init && g->init(g, instance, why, sizeof(why)) != 0) {
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
}

/* 1 when an earlier guard has the same hook (call shared hooks once). */
static int hook_seen(size_t upto, int health)
{
    for (size_t i = 0; i < upto; i++) {
        if (health ? guards[i]->health == guards[upto]->health
                   : guards[i]->export_metrics == guards[upto]->export_metrics)
            return 1;
    }
    return 0;
}

int guard_health(const char **up, size_t nup, size_t *nup_out, const char **backend,
                 char *err, size_t errlen)
{
    *nup_out = 0;
    for (size_t i = 0; i < NGUARDS; i++) {
        if (!guards[i]->health || hook_seen(i, 1))
            continue;
        const char *name = guards[i]->name;
        int h = guards[i]->health(&name, err, errlen);
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
    for (size_t i = 0; i < NGUARDS; i++)
        if (guards[i]->export_metrics && !hook_seen(i, 0))
            guards[i]->export_metrics();
}

static const struct db_conf *db_conf;

void guard_use_db(const struct db_conf *conf)
{
    db_conf = conf;
}

const struct db_conf *guard_db(void)
{
    return db_conf;
}
