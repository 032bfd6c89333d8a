/* The primitives every part of the lock client shares: setting a handle's
 * error, and reading a failed or granting script reply. They call nothing
 * else of rlock*, so the parts (rlock.c, rlock_try.c, rlock_fair.c,
 * rlock_wait.c, rlock_release.c) depend on them without a circle. */
#include "rlock_private.h"

#include <stdarg.h>
#include <stdio.h>

/* ---- errors ----------------------------------------------------------- */

int rlock_set_err(struct rlock *l, int code, const char *fmt, ...)
{
    va_list ap;

    l->err = code;
    va_start(ap, fmt);
    vsnprintf(l->errstr, sizeof l->errstr, fmt, ap);
    va_end(ap);
    if (code == RLOCK_EUNAVAIL)
        atomic_fetch_add(&l->client->stats->unavailable, 1);
    return code;
}

int rlock_reply_fail(struct rlock *l, redisContext *ctx, redisReply *r, const char *what)
{
    /* A write on a replica: the master was demoted; ask Sentinel again. */
    if (rconn_readonly(r))
        rconn_endpoint_invalidate(rconn_pool_endpoint(l->client->pool));
    if (!r)
        return rlock_set_err(l, RLOCK_EUNAVAIL, "%s: redis %s", what,
                             ctx->errstr[0] ? ctx->errstr : "connection failed");
    if (r->type == REDIS_REPLY_ERROR)
        return rlock_set_err(l, RLOCK_ERR, "%s: %.100s", what, r->str);
    return rlock_set_err(l, RLOCK_ERR, "%s: unexpected reply type %d", what, r->type);
}

int rlock_grant_reply(struct rlock *l, redisContext *ctx, redisReply *r, const char *what,
                      long *pttl)
{
    int rc;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER ||
        (r->element[0]->integer == 1 &&
         (r->elements != 3 || r->element[2]->type != REDIS_REPLY_INTEGER))) {
        rc = rlock_reply_fail(l, ctx, r, what);
        if (r)
            freeReplyObject(r);
        return rc;
    }
    rc = r->element[0]->integer == 1;
    if (!rc)
        *pttl = (long)r->element[1]->integer;
    else if (r->element[1]->integer == 1)
        l->fence = (unsigned long long)r->element[2]->integer;
    freeReplyObject(r);
    return rc;
}
