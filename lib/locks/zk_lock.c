/* The ZooKeeper mutex recipe (zk_lock.h): create, wait for our turn,
 * delete. */
#include "zk_lock.h"

#include "base/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Milliseconds until `until` (util_now() seconds), at least 0. */
static long ms_left(double until)
{
    double left = (until - util_now()) * 1000.0;
    return left > 0 ? (long)left : 0;
}

/* Write a printf sentence into the caller's why; count it; return r. */
__attribute__((format(printf, 4, 5))) static enum zk_lock_result
fail(struct zk_lock *l, enum zk_lock_result r, atomic_ullong *counter, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->why, l->whylen, fmt, ap);
    va_end(ap);
    if (counter)
        atomic_fetch_add(counter, 1);
    return r;
}

const char *zk_lock_node_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The persistent parents of dir, created once; ZNODEEXISTS is success
 * (another instance made it first). */
static int ensure_parents(zhandle_t *zh, const char *dir)
{
    char path[ZK_PATH_MAX];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        int rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        *p = saved;
        if (rc != ZOK && rc != ZNODEEXISTS)
            return rc;
        if (saved == '\0')
            return ZOK;
    }
}

/* After a connection loss: wait for the session to come back within
 * until. 0 connected again (same session: our nodes are still there), -1
 * with why filled (lost, or still away: the session is given up so that
 * whatever node it may have made goes with it). */
static int reconnect(struct zk_lock *l, double until, const char *doing)
{
    enum zk_state st = zk_session_wait_connected(l->client, l->s, ms_left(until));
    if (st == ZK_CONNECTED)
        return 0;
    if (st != ZK_LOST)
        zk_session_abandon(l->client, l->s, "disconnected past the request's wait");
    fail(l, ZK_LOCK_UNAVAILABLE, &l->n->unavailable,
         "ZooKeeper connection lost while %s (%s); nothing was written", doing,
         zk_state_name(st));
    return -1;
}

/* After a create whose answer was lost: find the node carrying our attempt
 * id. 1 found (l->node set), 0 not there, -1 with why filled. */
static int find_lost_create(struct zk_lock *l, zhandle_t *zh, double until)
{
    if (reconnect(l, until, "creating the lock node") != 0)
        return -1;
    struct String_vector kids = {0};
    int rc = zoo_get_children(zh, l->dir, 0, &kids);
    int i = rc == ZOK ? zk_lock_find(kids.data, kids.count, l->attempt) : -1;
    if (i >= 0) {
        snprintf(l->node, sizeof(l->node), "%s/%.100s", l->dir, kids.data[i]);
        atomic_fetch_add(&l->n->recovered_creates, 1);
    }
    deallocate_String_vector(&kids);
    if (i >= 0)
        return 1;
    if (rc != ZOK && rc != ZNONODE) {
        /* Unknown whether the node exists: giving the session up removes
         * it if it does. */
        zk_session_abandon(l->client, l->s, "lost create could not be looked up");
        fail(l, ZK_LOCK_UNAVAILABLE, &l->n->unavailable, "ZooKeeper lookup under %.200s: %s",
             l->dir, zerror(rc));
        return -1;
    }
    return 0;
}

/* Create our lock node. 0 with l->node set, or -1 with why filled. */
static int create_node(struct zk_lock *l, double until)
{
    zhandle_t *zh = zk_session_handle(l->s);
    char prefix[ZK_PATH_MAX];
    snprintf(prefix, sizeof(prefix), "%s/lock-%.23s-", l->dir, l->attempt);
    for (int tries = 0; tries < 4; tries++) {
        int rc = zoo_create(zh, prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                            ZOO_EPHEMERAL_SEQUENTIAL, l->node, sizeof(l->node));
        if (rc == ZOK)
            return 0;
        if (rc == ZNONODE) {
            rc = ensure_parents(zh, l->dir);
            if (rc == ZOK)
                continue;
        }
        if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) {
            fail(l, ZK_LOCK_UNAVAILABLE, &l->n->unavailable, "ZooKeeper create under %.200s: %s",
                 l->dir, zerror(rc));
            return -1;
        }
        /* The create may have happened and only its answer was lost: look
         * for the node carrying our attempt id before trying again. */
        int found = find_lost_create(l, zh, until);
        if (found != 0)
            return found > 0 ? 0 : -1;
    }
    fail(l, ZK_LOCK_UNAVAILABLE, &l->n->unavailable,
         "ZooKeeper create under %.200s kept failing", l->dir);
    return -1;
}

void zk_lock_delete(struct zk_lock *l)
{
    int rc = zoo_delete(zk_session_handle(l->s), l->node, -1);
    /* A lost session took the node with it. */
    if (rc == ZOK || rc == ZNONODE || zk_session_state(l->client, l->s) == ZK_LOST)
        return;
    atomic_fetch_add(&l->n->release_failures, 1);
    zk_session_abandon(l->client, l->s, "lock node delete failed");
}

void zk_lock_release(struct zk_lock *l)
{
    zk_lock_delete(l);
    zk_client_release(l->client, l->s);
}

/* Our place in the queue: 0 lowest (held), 1 behind pred_path, -1 our node
 * is gone; *rc the ZooKeeper result of the listing. */
static int position(struct zk_lock *l, zhandle_t *zh, char *pred_path, size_t len, int *rc)
{
    struct String_vector kids = {0};
    int pred = -1, pos = -1;
    *rc = zoo_get_children(zh, l->dir, 0, &kids);
    if (*rc == ZOK) {
        pos = zk_lock_position(kids.data, kids.count, zk_lock_node_name(l->node), &pred);
        if (pos == 1)
            snprintf(pred_path, len, "%s/%.100s", l->dir, kids.data[pred]);
    }
    deallocate_String_vector(&kids);
    return pos;
}

/* Wait until our node is the lowest. ZK_LOCK_HELD, or another result with
 * why filled. */
static enum zk_lock_result wait_turn(struct zk_lock *l, long wait_ms, double until)
{
    zhandle_t *zh = zk_session_handle(l->s);
    struct zk_watch *w = zk_watch_begin();
    enum zk_lock_result ret = ZK_LOCK_UNAVAILABLE;
    for (int round = 0;; round++) {
        char pred_path[ZK_PATH_MAX] = "";
        int rc;
        int pos = position(l, zh, pred_path, sizeof(pred_path), &rc);
        if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
            if (reconnect(l, until, "waiting for the lock") != 0)
                break;
            continue;
        }
        if (rc != ZOK || pos < 0) {
            fail(l, ZK_LOCK_UNAVAILABLE, &l->n->lost,
                 "our lock node %.100s is gone (session %s); nothing was written",
                 zk_lock_node_name(l->node), zk_state_name(zk_session_state(l->client, l->s)));
            break;
        }
        if (pos == 0) {
            ret = ZK_LOCK_HELD;
            break;
        }
        long left = ms_left(until);
        if (left <= 0) {
            ret = fail(l, ZK_LOCK_BUSY, &l->n->timeouts, "ZooKeeper lock %.120s busy for %ld ms",
                       l->dir, wait_ms);
            break;
        }
        /* Watch only the predecessor. Without a free watch slot, poll. */
        rc = w ? zk_watch_exists(w, zh, pred_path) : ZOK;
        if (rc == ZNONODE)
            continue;
        if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
            if (reconnect(l, until, "watching the lock") != 0)
                break;
            continue;
        }
        if (rc != ZOK) {
            fail(l, ZK_LOCK_UNAVAILABLE, &l->n->unavailable, "ZooKeeper exists %.200s: %s",
                 pred_path, zerror(rc));
            break;
        }
        if (w)
            zk_watch_wait(w, left);
        else
            util_sleep_ms(left < 20 ? left : util_backoff_ms(round, 20));
    }
    zk_watch_end(w);
    return ret;
}

enum zk_lock_result zk_lock_take(struct zk_client *c, struct zk_lock_counters *n,
                                 const char *root, const char *name, long connect_ms,
                                 long wait_ms, double until, struct zk_lock *l, char *why,
                                 size_t whylen)
{
    char err[160];
    memset(l, 0, sizeof(*l));
    l->client = c;
    l->n = n;
    l->why = why;
    l->whylen = whylen;
    l->s = zk_client_acquire(c, connect_ms, err, sizeof(err));
    if (!l->s)
        return fail(l, ZK_LOCK_UNAVAILABLE, &n->unavailable, "%s", err);
    char dirname[64 * 3 + 1];
    if (zk_lock_dir_name(name, dirname, sizeof(dirname)) != 0) {
        zk_client_release(c, l->s);
        return fail(l, ZK_LOCK_BAD_NAME, NULL, "name too long for a lock path");
    }
    snprintf(l->dir, sizeof(l->dir), "%.127s/%.192s", root, dirname);
    snprintf(l->attempt, sizeof(l->attempt), "%016" PRIx64, util_rand());
    enum zk_lock_result r = ZK_LOCK_UNAVAILABLE;
    if (create_node(l, until) == 0) {
        r = wait_turn(l, wait_ms, until);
        if (r != ZK_LOCK_HELD)
            zk_lock_delete(l);
    }
    if (r != ZK_LOCK_HELD) {
        zk_client_release(c, l->s);
        return r;
    }
    l->seq = zk_lock_seq(zk_lock_node_name(l->node));
    return ZK_LOCK_HELD;
}
