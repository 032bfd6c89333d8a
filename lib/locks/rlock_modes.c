/* Lock option words (parse, print, list) from one table; status texts; default options. */
#include "rlock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum field { F_KIND, F_ACQUIRE, F_RELEASE };

/* The one list of option words: flags, request bodies, error messages and
 * metrics labels all go through it, so they cannot drift apart. */
static const struct mode {
    enum field field;
    int value;
    const char *name;
} modes[] = {
    { F_KIND,    RLOCK_REENTRANT,                 "reentrant" },
    { F_KIND,    RLOCK_SIMPLE,                    "simple" },
    { F_ACQUIRE, RLOCK_ACQUIRE_SET_NX_PX,         "set-nx-px" },
    { F_ACQUIRE, RLOCK_ACQUIRE_SETNX_THEN_EXPIRE, "setnx-then-expire" },
    { F_RELEASE, RLOCK_RELEASE_TOKEN_LUA,         "token-lua" },
    { F_RELEASE, RLOCK_RELEASE_PLAIN_DEL,         "plain-del" },
    { F_RELEASE, RLOCK_RELEASE_GET_THEN_DEL,      "get-then-del" },
};
#define NMODES (sizeof modes / sizeof modes[0])

static int mode_parse(enum field f, const char *name, int *out)
{
    for (size_t i = 0; name && i < NMODES; i++) {
        if (modes[i].field == f && strcmp(modes[i].name, name) == 0) {
            *out = modes[i].value;
            return 0;
        }
    }
    return -1;
}

static const char *mode_name(enum field f, int value)
{
    for (size_t i = 0; i < NMODES; i++)
        if (modes[i].field == f && modes[i].value == value)
            return modes[i].name;
    return "?";
}

int rlock_acquire_parse(const char *name, enum rlock_acquire *out)
{
    int v;
    if (mode_parse(F_ACQUIRE, name, &v) != 0)
        return -1;
    *out = (enum rlock_acquire)v;
    return 0;
}

int rlock_release_parse(const char *name, enum rlock_release *out)
{
    int v;
    if (mode_parse(F_RELEASE, name, &v) != 0)
        return -1;
    *out = (enum rlock_release)v;
    return 0;
}

int rlock_kind_parse(const char *name, enum rlock_kind *out)
{
    int v;
    if (mode_parse(F_KIND, name, &v) != 0)
        return -1;
    *out = (enum rlock_kind)v;
    return 0;
}

const char *rlock_acquire_name(enum rlock_acquire a)
{
    return mode_name(F_ACQUIRE, (int)a);
}

const char *rlock_release_name(enum rlock_release r)
{
    return mode_name(F_RELEASE, (int)r);
}

const char *rlock_kind_name(enum rlock_kind k)
{
    return mode_name(F_KIND, (int)k);
}

/* ---- choices: "a, b or c" --------------------------------------------- */

static char acquire_choices[128], release_choices[128];
static pthread_once_t choices_once = PTHREAD_ONCE_INIT;

static void join_choices(enum field f, char *buf, size_t len)
{
    size_t n = 0, total = 0, used = 0;

    for (size_t i = 0; i < NMODES; i++)
        total += modes[i].field == f;
    buf[0] = '\0';
    for (size_t i = 0; i < NMODES; i++) {
        if (modes[i].field != f)
            continue;
        const char *sep = n == 0 ? "" : n + 1 == total ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s%s", sep, modes[i].name);
        if (w < 0 || (size_t)w >= len - used)
            return;   /* cannot happen with these sizes; stay terminated */
        used += (size_t)w;
        n++;
    }
}

/* Built once, then read-only: callers may keep the pointers. */
static void build_choices(void)
{
    join_choices(F_ACQUIRE, acquire_choices, sizeof acquire_choices);
    join_choices(F_RELEASE, release_choices, sizeof release_choices);
}

const char *rlock_acquire_choices(void)
{
    pthread_once(&choices_once, build_choices);
    return acquire_choices;
}

const char *rlock_release_choices(void)
{
    pthread_once(&choices_once, build_choices);
    return release_choices;
}

/* ---- statuses and defaults -------------------------------------------- */

const char *rlock_strerror(int code)
{
    switch (code) {
    case RLOCK_OK:       return "ok";
    case RLOCK_ERR:      return "error";
    case RLOCK_EUNAVAIL: return "unavailable";
    case RLOCK_TIMEOUT:  return "timeout";
    case RLOCK_ELOST:    return "lost";
    case RLOCK_EINVAL:   return "invalid";
    case RLOCK_ENOACK:   return "not_replicated";
    default:             return "unknown";
    }
}

static long setnx_pause_ms;
static pthread_once_t setnx_pause_once = PTHREAD_ONCE_INIT;

static void setnx_pause_read(void)
{
    const char *v = getenv("LAB_TEST_SETNX_PAUSE_MS");
    char *end;
    long ms = v ? strtol(v, &end, 10) : 0;
    if (v && *v && !*end && ms > 0 && ms <= 60000)
        setnx_pause_ms = ms;
}

long rlock_test_setnx_pause_ms(void)
{
    pthread_once(&setnx_pause_once, setnx_pause_read);
    return setnx_pause_ms;
}

void rlock_opts_default(struct rlock_opts *o)
{
    o->kind = RLOCK_REENTRANT;
    o->ttl_ms = 30000;
    o->watchdog = 1;
    o->acquire = RLOCK_ACQUIRE_SET_NX_PX;
    o->release = RLOCK_RELEASE_TOKEN_LUA;
    o->fencing = 0;
    o->fair = 0;
    o->replicas_ack = 0;
    o->ack_timeout_ms = 100;
}
