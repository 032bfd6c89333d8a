/* A guard's request options: the deduct body checked against the guard's
 * own field rows (guard.h), with the 400 that names the guard and lists
 * what it accepts; and the rows the lock guards share (lock_fields.h). */
#include "guards/guard.h"

#include "guards/core/lock_fields.h"
#include "stock/request.h"

#include <jansson.h>
#include <string.h>

const struct lock_req_opts lock_req_opts_default = LOCK_REQ_OPTS_DEFAULT;

int lock_field_acquire(const char *s, int *out)
{
    enum rlock_acquire a;
    if (rlock_acquire_parse(s, &a) != 0)
        return -1;
    *out = (int)a;
    return 0;
}

int lock_field_release(const char *s, int *out)
{
    enum rlock_release r;
    if (rlock_release_parse(s, &r) != 0)
        return -1;
    *out = (int)r;
    return 0;
}

/* The 400 for a field g does not take: g's name and every field it does. */
static void refuse_field(const struct guard *g, const char *key, char *err, size_t errlen)
{
    size_t off = (size_t)snprintf(err, errlen, "guard %s does not accept \"%.40s\"; it accepts: ",
                                  g->name, key);
    for (size_t i = 0; i < req_deduct_nfields + g->nfields && off < errlen; i++)
        off += (size_t)snprintf(err + off, errlen - off, "%s%s", i ? ", " : "",
                                i < req_deduct_nfields ? req_deduct_fields[i]
                                                       : g->fields[i - req_deduct_nfields].name);
}

/* One value into its row's slot. Returns 0, or -1 with the row's 400. */
static int set_field(const struct guard_field *f, json_t *v, unsigned char *opts, char *err,
                     size_t errlen)
{
    switch (f->type) {
    case GUARD_FIELD_INT: {
        if (!json_is_integer(v)) {
            snprintf(err, errlen, "%s must be an integer", f->name);
            return -1;
        }
        long long x = json_integer_value(v);
        if (x < f->lo || x > f->hi) {
            snprintf(err, errlen, "%s must be %lld..%lld, got %lld", f->name, f->lo, f->hi, x);
            return -1;
        }
        long l = (long)x;
        memcpy(opts + f->offset, &l, sizeof l);
        return 0;
    }
    case GUARD_FIELD_BOOL: {
        if (!json_is_boolean(v)) {
            snprintf(err, errlen, "%s must be true or false", f->name);
            return -1;
        }
        int b = json_is_true(v);
        memcpy(opts + f->offset, &b, sizeof b);
        return 0;
    }
    case GUARD_FIELD_CHOICE: {
        int c;
        if (!json_is_string(v) || f->choice(json_string_value(v), &c) != 0) {
            snprintf(err, errlen, "%s must be %s", f->name, f->choices());
            return -1;
        }
        memcpy(opts + f->offset, &c, sizeof c);
        return 0;
    }
    }
    snprintf(err, errlen, "%s: unknown field type", f->name);
    return -1;
}

int guard_opts_from(const struct guard *g, json_t *o, struct guard_opts *store,
                    const void **opts, char *err, size_t errlen)
{
    *opts = NULL;
    if (g->opts_size > sizeof(store->u.bytes)) {
        snprintf(err, errlen, "guard %s: options too large", g->name);
        return -1;
    }
    if (g->opts_size)
        memcpy(store->u.bytes, g->opts_default, g->opts_size);
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(o, key, v) {
        if (req_deduct_field(key) || cart_field(key))   /* the sale's, a cart's */
            continue;
        size_t i = 0;
        while (i < g->nfields && strcmp(g->fields[i].name, key) != 0)
            i++;
        if (i == g->nfields) {
            refuse_field(g, key, err, errlen);
            rc = -1;
            break;
        }
        if ((rc = set_field(&g->fields[i], v, store->u.bytes, err, errlen)) != 0)
            break;
    }
    if (rc == 0 && g->opts_size)
        *opts = store;
    return rc;
}

int guard_parse_opts(const struct guard *g, const char *body, size_t len,
                     struct guard_opts *store, const void **opts, char *err, size_t errlen)
{
    *opts = NULL;
    json_t *o = body && len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (!json_is_object(o)) {
        snprintf(err, errlen, "the body must be a JSON object");
        json_decref(o);
        return -1;
    }
    int rc = guard_opts_from(g, o, store, opts, err, errlen);
    json_decref(o);
    return rc;
}
