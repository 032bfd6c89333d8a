/* A guard as GET /guards shows it: the texts its own file writes (struct
 * guard_doc), and its capabilities, derived here from its fields and hooks
 * so that no list of "the lease guards" or "the Redis guards" is typed by
 * hand anywhere (the report and the fault plan read these). */
#include "guards/guard.h"
#include "guards/core/hold_entry.h"

#include <string.h>

static int has_field(const struct guard *g, const char *name)
{
    for (size_t i = 0; i < g->nfields; i++)
        if (strcmp(g->fields[i].name, name) == 0)
            return 1;
    return 0;
}

/* A guard that checks its lease right before the write has a fault point
 * right after that check (core/fault_point.h), armed by an option named
 * "...-fault-pause-after-check". */
static int checks_lease(const struct guard *g)
{
    static const char suffix[] = "-fault-pause-after-check";
    for (size_t i = 0; i < g->noptions; i++) {
        const char *n = g->options[i].name;
        size_t len = strlen(n), sl = sizeof(suffix) - 1;
        if (len >= sl && strcmp(n + len - sl, suffix) == 0)
            return 1;
    }
    return 0;
}

static json_t *capabilities(const struct guard *g)
{
    const char *home = g->doc ? g->doc->lock_home : NULL;
    json_t *c = json_object();
    if (!c)
        return NULL;
    /* a lock around the read-modify-write (its `locked` hook) */
    json_object_set_new(c, "lock", json_boolean(g->locked != NULL));
    /* the lock (or segment lock) runs out: a lock_ttl_ms lease */
    json_object_set_new(c, "lease", json_boolean(has_field(g, "lock_ttl_ms")));
    json_object_set_new(c, "watchdog", json_boolean(has_field(g, "watchdog")));
    json_object_set_new(c, "fencing", json_boolean(has_field(g, "fencing")));
    json_object_set_new(c, "replicas_ack", json_boolean(has_field(g, "replicas_ack")));
    json_object_set_new(c, "checks_lease_before_write", json_boolean(checks_lease(g)));
    json_object_set_new(c, "redis_stock", json_boolean(g->mirror && g->mirror->side));
    json_object_set_new(c, "write_behind", json_boolean(guard_has(g, GUARD_NO_MYSQL_DEDUCT)));
    json_object_set_new(c, "carts", json_boolean(g->deduct_cart != NULL));
    json_object_set_new(c, "holds", json_boolean(guard_holds(g)));
    json_object_set_new(c, "limits", json_boolean(!guard_has(g, GUARD_NO_PURCHASE_LIMITS)));
    json_object_set_new(c, "safe_across_instances",
                        json_boolean(guard_has(g, GUARD_SAFE_ACROSS_INSTANCES)));
    json_object_set_new(c, "uses_redis", json_boolean(guard_has(g, GUARD_USES_REDIS)));
    json_object_set_new(c, "settles_intents", json_boolean(g->mirror && g->mirror->settle));
    json_object_set_new(c, "lock_home", home ? json_string(home) : json_null());
    return c;
}

static json_t *field_names(const struct guard *g)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < g->nfields; i++)
        json_array_append_new(a, json_string(g->fields[i].name));
    return a;
}

static json_t *metric_rows(const struct guard_doc *d)
{
    json_t *a = json_array();
    for (size_t i = 0; a && d && i < d->nmetrics; i++) {
        const struct guard_metric *m = &d->metrics[i];
        json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s}", "name", m->name, "type",
                                           m->type, "help", m->help, "labels", m->labels));
    }
    return a;
}

static json_t *steps(const struct guard_doc *d)
{
    json_t *a = json_array();
    for (size_t i = 0; a && d && d->steps && d->steps[i]; i++)
        json_array_append_new(a, json_string(d->steps[i]));
    return a;
}

static const char *text(const char *s)
{
    return s ? s : "";
}

json_t *guard_json(const struct guard *g)
{
    const struct guard_doc *d = g->doc;
    json_t *j = json_pack("{s:s,s:s,s:s,s:b,s:b}", "name", g->name, "how", g->how, "expect",
                          g->expect, "safe_across_instances",
                          guard_has(g, GUARD_SAFE_ACROSS_INSTANCES),
                          "carts", g->deduct_cart != NULL);
    if (!j)
        return NULL;
    json_object_set_new(j, "holds", json_boolean(guard_holds(g)));
    json_object_set_new(j, "limits", json_boolean(!guard_has(g, GUARD_NO_PURCHASE_LIMITS)));
    json_object_set_new(j, "needs", json_string(text(d ? d->needs : NULL)));
    json_object_set_new(j, "use_when", json_string(text(d ? d->use_when : NULL)));
    json_object_set_new(j, "breaks", json_string(text(d ? d->breaks : NULL)));
    json_object_set_new(j, "origin", json_string(text(d ? d->origin : NULL)));
    json_object_set_new(j, "steps", steps(d));
    json_object_set_new(j, "statements", json_string(text(d ? d->statements : NULL)));
    json_object_set_new(j, "code", json_string(text(d ? d->code : NULL)));
    json_object_set_new(j, "fields", field_names(g));
    json_object_set_new(j, "capabilities", capabilities(g));
    json_object_set_new(j, "metrics", metric_rows(d));
    return j;
}
