/* The lock handle: create it, read it, free it (rlock_acquire.c takes it,
 * rlock_release.c gives it back). */
#include "rlock_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- handle ----------------------------------------------------------- */

struct rlock *rlock_new(struct rlock_client *c, const char *key,
                        const struct rlock_opts *o)
{
    struct rlock *l = calloc(1, sizeof *l);

    if (!l)
        return NULL;
    l->client = c;
    if (o)
        l->opts = *o;
    else
        rlock_opts_default(&l->opts);
    if (l->opts.acquire != RLOCK_ACQUIRE_SET_NX_PX ||
        l->opts.release != RLOCK_RELEASE_TOKEN_LUA)
        l->opts.kind = RLOCK_SIMPLE;
    util_make_token(l->token, sizeof l->token, c->instance);
    /* A refused handle keeps key "": every later call answers EINVAL. */
    if (!key || !*key || strlen(key) > RLOCK_KEY_MAX) {
        l->err = RLOCK_EINVAL;
        snprintf(l->errstr, sizeof l->errstr, "key empty or longer than %d", RLOCK_KEY_MAX);
        return l;
    }
    if (l->opts.ttl_ms < 1 || l->opts.ttl_ms > RLOCK_TTL_MAX ||
        (unsigned)l->opts.kind > RLOCK_SIMPLE ||
        (unsigned)l->opts.acquire > RLOCK_ACQUIRE_SETNX_THEN_EXPIRE ||
        (unsigned)l->opts.release > RLOCK_RELEASE_GET_THEN_DEL ||
        ((l->opts.fencing || l->opts.fair) && l->opts.kind != RLOCK_REENTRANT) ||
        l->opts.replicas_ack < 0 || l->opts.replicas_ack > 5 ||
        (l->opts.replicas_ack > 0 &&
         (l->opts.ack_timeout_ms < 1 || l->opts.ack_timeout_ms > 60000))) {
        l->err = RLOCK_EINVAL;
        snprintf(l->errstr, sizeof l->errstr, "bad lock options");
        return l;
    }
    snprintf(l->key, sizeof l->key, "%s", key);
    /* A fair waiter listens on a channel of its own: a release wakes the
     * next in line only, never every waiter. */
    if (l->opts.fair)
        snprintf(l->chan, sizeof l->chan, "rlock:chan:{%s}:%s", key, l->token);
    else
        snprintf(l->chan, sizeof l->chan, "rlock:chan:{%s}", key);
    snprintf(l->fence_key, sizeof l->fence_key, "%s:fence", key);
    snprintf(l->queue_key, sizeof l->queue_key, "%s:queue", key);
    snprintf(l->qtime_key, sizeof l->qtime_key, "%s:queue:t", key);
    return l;
}

int rlock_err(const struct rlock *l)         { return l ? l->err : RLOCK_EINVAL; }
const char *rlock_errstr(const struct rlock *l) { return l ? l->errstr : "no lock"; }
const char *rlock_key(const struct rlock *l)    { return l ? l->key : ""; }
const char *rlock_token(const struct rlock *l)  { return l ? l->token : ""; }
int rlock_depth(const struct rlock *l)          { return l ? l->depth : 0; }
unsigned long long rlock_fence(const struct rlock *l) { return l && l->depth ? l->fence : 0; }
long rlock_last_wait_ms(const struct rlock *l)  { return l ? l->last_wait_ms : 0; }
const struct rlock_opts *rlock_get_opts(const struct rlock *l) { return l ? &l->opts : NULL; }

int rlock_is_lost(struct rlock *l)
{
    if (!l || !l->wd_id)
        return 0;
    return rlock_wd_lost(l->client, l->wd_id);
}
