/* One ZooKeeper session per process, its Curator-style connection state,
 * predecessor watches, and the mutex recipe's naming logic (see zk.h). */
#include "zk.h"

#include "base/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct zk_session {
    zhandle_t *zh;
    struct zk_client *c;
    enum zk_state state;
    int refs;                  /* callers between acquire and release */
    int retired;               /* no longer the client's current session */
};

struct zk_client {
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* any session's state changed */
    char hosts[256];
    long session_ms;
    struct zk_session *cur;    /* NULL until the first acquire */
    struct zk_stats stats;
};

const char *zk_state_name(enum zk_state s)
{
    switch (s) {
    case ZK_CONNECTING: return "connecting";
    case ZK_CONNECTED: return "connected";
    case ZK_SUSPENDED: return "suspended";
    case ZK_LOST: return "lost";
    }
    return "unknown";
}

/* CLOCK_REALTIME deadline wait_ms from now, for pthread_cond_timedwait. */
static struct timespec abs_after(long wait_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    if (wait_ms < 0)
        wait_ms = 0;
    t.tv_sec += wait_ms / 1000;
    t.tv_nsec += (wait_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* ---- watch slots ------------------------------------------------------ */

#define ZK_WATCH_SLOTS 256

struct zk_watch {
    int used;
    int fired;
};

static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cv = PTHREAD_COND_INITIALIZER;
static struct zk_watch watch_slots[ZK_WATCH_SLOTS];

/* A session event (disconnect, expiry) ends every wait: the waiters look at
 * the session state again. */
static void watch_wake_all(void)
{
    pthread_mutex_lock(&watch_mu);
    for (int i = 0; i < ZK_WATCH_SLOTS; i++)
        if (watch_slots[i].used)
            watch_slots[i].fired = 1;
    pthread_cond_broadcast(&watch_cv);
    pthread_mutex_unlock(&watch_mu);
}

/* Runs on the client's completion thread: a one-shot watch fired (node
 * deleted or changed), or a session event reached the watch. A slot
 * reused since only gets a spurious wake-up; its waiter re-checks. */
static void watch_fn(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct zk_watch *w = ctx;
    pthread_mutex_lock(&watch_mu);
    w->fired = 1;
    pthread_cond_broadcast(&watch_cv);
    pthread_mutex_unlock(&watch_mu);
}

struct zk_watch *zk_watch_begin(void)
{
    struct zk_watch *w = NULL;
    pthread_mutex_lock(&watch_mu);
    for (int i = 0; i < ZK_WATCH_SLOTS && !w; i++) {
        if (!watch_slots[i].used) {
            w = &watch_slots[i];
            w->used = 1;
            w->fired = 0;
        }
    }
    pthread_mutex_unlock(&watch_mu);
    return w;
}

int zk_watch_exists(struct zk_watch *w, zhandle_t *zh, const char *path)
{
    pthread_mutex_lock(&watch_mu);
    w->fired = 0;
    pthread_mutex_unlock(&watch_mu);
    struct Stat st;
    return zoo_wexists(zh, path, watch_fn, w, &st);
}

int zk_watch_wait(struct zk_watch *w, long wait_ms)
{
    struct timespec until = abs_after(wait_ms);
    pthread_mutex_lock(&watch_mu);
    int rc = 0;
    while (!w->fired && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&watch_cv, &watch_mu, &until);
    int fired = w->fired;
    pthread_mutex_unlock(&watch_mu);
    return fired;
}

void zk_watch_end(struct zk_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&watch_mu);
    w->used = 0;
    w->fired = 0;
    pthread_mutex_unlock(&watch_mu);
}

/* ---- sessions --------------------------------------------------------- */

/* The session watcher (completion thread): Curator's connection states. */
static void session_fn(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    if (type != ZOO_SESSION_EVENT)
        return;
    struct zk_session *s = ctx;
    struct zk_client *c = s->c;
    pthread_mutex_lock(&c->mu);
    enum zk_state was = s->state;
    if (s->state != ZK_LOST) {
        if (state == ZOO_CONNECTED_STATE) {
            s->state = ZK_CONNECTED;
        } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
            s->state = ZK_LOST;
            c->stats.expired++;
        } else if (s->state == ZK_CONNECTED) {
            /* CONNECTING / ASSOCIATING after CONNECTED: the link dropped;
             * the client library reconnects by itself. */
            s->state = ZK_SUSPENDED;
            c->stats.suspended++;
        }
    }
    enum zk_state now = s->state;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (now != was)
        fprintf(stderr, "zookeeper %s: session %s -> %s\n", c->hosts, zk_state_name(was),
                zk_state_name(now));
    watch_wake_all();
}

struct zk_client *zk_client_new(const char *hosts, long session_ms)
{
    struct zk_client *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    snprintf(c->hosts, sizeof(c->hosts), "%s", hosts ? hosts : "");
    c->session_ms = session_ms;
    /* The library's own log writes a line per reconnect attempt (about
     * 30 a second while the server is away): off; session_fn logs each
     * change of state once instead. */
    zoo_set_debug_level((ZooLogLevel)0);
    return c;
}

static void session_close(struct zk_session *s)
{
    if (!s)
        return;
    /* Closing tells the server to end the session now: its ephemeral
     * nodes (our lock nodes) go at once, not after the timeout. */
    zookeeper_close(s->zh);
    free(s);
}

/* Under c->mu: the current session stops being current. Returns it when
 * nobody holds it (the caller closes it outside the lock), else NULL: the
 * last release closes it. */
static struct zk_session *retire_locked(struct zk_client *c)
{
    struct zk_session *s = c->cur;
    c->cur = NULL;
    if (!s)
        return NULL;
    s->retired = 1;
    return s->refs == 0 ? s : NULL;
}

void zk_client_free(struct zk_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    struct zk_session *s = retire_locked(c);
    pthread_mutex_unlock(&c->mu);
    session_close(s);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Under c->mu: start a new session (the library connects in its own
 * thread). 0, or -1 with err. */
static int session_start_locked(struct zk_client *c, char *err, size_t errlen)
{
    struct zk_session *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->c = c;
    s->state = ZK_CONNECTING;
    s->zh = zookeeper_init(c->hosts, session_fn, (int)c->session_ms, NULL, s, 0);
    if (!s->zh) {
        snprintf(err, errlen, "zookeeper_init(%.100s): %s", c->hosts, strerror(errno));
        free(s);
        return -1;
    }
    c->cur = s;
    c->stats.sessions++;
    return 0;
}

struct zk_session *zk_client_acquire(struct zk_client *c, long wait_ms, char *err,
                                     size_t errlen)
{
    struct zk_session *old = NULL, *got = NULL;
    struct timespec until = abs_after(wait_ms);
    pthread_mutex_lock(&c->mu);
    if (c->cur && c->cur->state == ZK_LOST)
        old = retire_locked(c);
    if (!c->cur && session_start_locked(c, err, errlen) != 0)
        goto out;
    struct zk_session *s = c->cur;
    int rc = 0;
    while (s->state != ZK_CONNECTED && s->state != ZK_LOST && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
    if (s->state == ZK_CONNECTED) {
        s->refs++;
        got = s;
    } else {
        snprintf(err, errlen, "ZooKeeper %.100s not connected within %ld ms (session %s)",
                 c->hosts, wait_ms, zk_state_name(s->state));
    }
out:
    pthread_mutex_unlock(&c->mu);
    session_close(old);
    return got;
}

void zk_client_release(struct zk_client *c, struct zk_session *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&c->mu);
    int close_it = --s->refs == 0 && s->retired;
    pthread_mutex_unlock(&c->mu);
    if (close_it)
        session_close(s);
}

zhandle_t *zk_session_handle(const struct zk_session *s)
{
    return s->zh;
}

enum zk_state zk_session_state(struct zk_client *c, const struct zk_session *s)
{
    pthread_mutex_lock(&c->mu);
    enum zk_state st = s->state;
    pthread_mutex_unlock(&c->mu);
    return st;
}

enum zk_state zk_session_wait_connected(struct zk_client *c, struct zk_session *s,
                                        long wait_ms)
{
    struct timespec until = abs_after(wait_ms);
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while ((s->state == ZK_SUSPENDED || s->state == ZK_CONNECTING) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
    enum zk_state st = s->state;
    pthread_mutex_unlock(&c->mu);
    return st;
}

void zk_session_abandon(struct zk_client *c, struct zk_session *s, const char *why)
{
    pthread_mutex_lock(&c->mu);
    if (s->state != ZK_LOST) {
        s->state = ZK_LOST;
        c->stats.expired++;
        fprintf(stderr, "zookeeper: session 0x%llx abandoned: %s\n",
                (unsigned long long)zoo_client_id(s->zh)->client_id, why);
    }
    if (c->cur == s)
        retire_locked(c);      /* the caller holds a ref: closed at its release */
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    watch_wake_all();
}

enum zk_state zk_client_state(struct zk_client *c)
{
    pthread_mutex_lock(&c->mu);
    enum zk_state st = c->cur ? c->cur->state : ZK_CONNECTING;
    pthread_mutex_unlock(&c->mu);
    return st;
}

void zk_client_stats(struct zk_client *c, struct zk_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}

/* The sync's answer is not needed: the exists sent after it is answered
 * after it (a session's requests are answered in order). */
static void sync_done(int rc, const char *value, const void *data)
{
    (void)rc;
    (void)value;
    (void)data;
}

int zk_session_confirm(struct zk_session *s, const char *node)
{
    struct Stat st;
    int rc = zoo_async(s->zh, node, sync_done, NULL);
    if (rc != ZOK)
        return rc;
    rc = zoo_exists(s->zh, node, 0, &st);
    if (rc != ZOK)
        return rc;
    const clientid_t *id = zoo_client_id(s->zh);
    return id && st.ephemeralOwner == id->client_id ? ZOK : ZNONODE;
}

long zk_session_timeout_ms(const struct zk_session *s)
{
    int t = zoo_recv_timeout(s->zh);
    return t > 0 ? t : 0;
}

/* ---- lock node names -------------------------------------------------- */

int zk_lock_dir_name(const char *sku, char *out, size_t outlen)
{
    size_t n = strlen(sku);
    int dots = n > 0 && strspn(sku, ".") == n;
    if ((dots ? n * 3 : n) + 1 > outlen)
        return -1;
    if (!dots) {
        memcpy(out, sku, n + 1);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(out + i * 3, "%2E", 3);
    out[n * 3] = '\0';
    return 0;
}

long long zk_lock_seq(const char *name)
{
    const char *dash = strrchr(name, '-');
    if (!dash || !dash[1] || strncmp(name, "lock-", 5) != 0)
        return -1;
    long long v = 0;
    int digits = 0;
    for (const char *p = dash + 1; *p; p++, digits++) {
        if (*p < '0' || *p > '9' || digits >= 12)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

int zk_lock_find(char *const *names, int n, const char *attempt)
{
    char prefix[128];
    int len = snprintf(prefix, sizeof(prefix), "lock-%s-", attempt);
    if (len <= 5 || (size_t)len >= sizeof(prefix))
        return -1;
    for (int i = 0; i < n; i++)
        if (strncmp(names[i], prefix, (size_t)len) == 0 && zk_lock_seq(names[i]) >= 0 &&
            strchr(names[i] + len, '-') == NULL)
            return i;
    return -1;
}

int zk_lock_position(char *const *names, int n, const char *ours, int *pred)
{
    long long mine = zk_lock_seq(ours);
    int found = 0, best = -1;
    long long best_seq = -1;
    if (mine < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], ours) == 0) {
            found = 1;
            continue;
        }
        long long q = zk_lock_seq(names[i]);
        if (q >= 0 && q < mine && q > best_seq) {
            best_seq = q;
            best = i;
        }
    }
    if (!found)
        return -1;
    if (best < 0)
        return 0;
    *pred = best;
    return 1;
}
