/* Guard `zookeeper`: the read-modify-write under a ZooKeeper lock, with
 * the semantics of Curator's InterProcessMutex. Each attempt creates an
 * EPHEMERAL_SEQUENTIAL node ROOT/{sku}/lock-<attempt>-<seq>; the lowest
 * sequence holds; a waiter watches only the node just before its own (no
 * herd) and gives up after lock_wait_ms, deleting its node. A create whose
 * reply was lost is found again by its attempt id (Curator's protected
 * mode) instead of being left behind as a lock nobody holds. The node dies
 * with the session, so a crashed holder frees the lock after the session
 * timeout; the other side of that coin: a holder whose session was lost
 * (or stays disconnected past it) no longer holds anything and refuses to
 * write. The fencing token is the node's sequence number + 1, increasing
 * per SKU because the SKU's parent node is never deleted. */
#include "guard.h"

#include "base/metrics.h"
#include "base/util.h"
#include "guards/core/fault_point.h"
#include "guards/core/lock_fields.h"
#include "locks/zk.h"
#include "stock/txn.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static struct zk_guard_conf {
    char hosts[256];
    long session_ms;
    long connect_wait_ms;
    char root[128];
    long fault_pause_ms;
} conf;

/* Session bounds: ZooKeeper grants 2..20 ticks; the stack's tickTime is
 * 500 ms. */
static const struct cfg_opt options[] = {
    {"zk-hosts", "LAB_ZK_HOSTS", CFG_STR, "127.0.0.1:2191", 0, 0,
     offsetof(struct zk_guard_conf, hosts), sizeof(conf.hosts),
     "ZooKeeper servers for the zookeeper guard (host:port[,host:port...])"},
    {"zk-session-ms", "LAB_ZK_SESSION_MS", CFG_MS, "4000", 1000, 10000,
     offsetof(struct zk_guard_conf, session_ms), 0,
     "ZooKeeper session timeout: a crashed holder's lock is freed after it, and a holder "
     "disconnected this long has lost its lock"},
    {"zk-connect-wait", "LAB_ZK_CONNECT_WAIT_MS", CFG_MS, "1000", 0, 10000,
     offsetof(struct zk_guard_conf, connect_wait_ms), 0,
     "how long a request waits for a ZooKeeper connection before 503 backend_unavailable"},
    {"zk-root", "LAB_ZK_ROOT", CFG_STR, "/locks/inventory", 0, 0,
     offsetof(struct zk_guard_conf, root), sizeof(conf.root),
     "parent of the per-SKU lock nodes (created persistent, never deleted)"},
    {"zk-fault-pause-after-check", "LAB_FAULT_ZK_PAUSE_AFTER_CHECK_MS", CFG_MS, "0", 0, 60000,
     offsetof(struct zk_guard_conf, fault_pause_ms), 0,
     "TEST ONLY, fault injection: stop this whole process this long right after "
     "the server confirmed the lock node, before the COMMIT (the window that check "
     "cannot close); 0 = off"},
};

static struct zk_client *client;

static atomic_ullong n_acquired, n_timeouts, n_unavailable, n_lost, n_recovered_creates,
    n_release_failures;

#define ZK_PATH_MAX 448

static int zk_init(const struct guard *self, const struct guard_backends *b, char *err,
                   size_t errlen)
{
    size_t n = strlen(conf.root);
    if (n < 2 || conf.root[0] != '/' || conf.root[n - 1] == '/' || strstr(conf.root, "//")) {
        snprintf(err, errlen, "--zk-root must be an absolute path like /locks/inventory");
        return -1;
    }
    if (!conf.hosts[0]) {
        snprintf(err, errlen, "--zk-hosts is empty");
        return -1;
    }
    /* No connection yet: a stack without ZooKeeper (docker-compose) only
     * pays for it when a request asks for this guard. */
    if (!(client = zk_client_new(conf.hosts, conf.session_ms))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    metrics_describe("lab_zk_connected", "gauge",
                     "1 while the zookeeper guard's session is connected");
    return 0;
}

static void zk_fini(const struct guard *self)
{
    zk_client_free(client);
    client = NULL;
}

/* Milliseconds until `until` (util_now() seconds), at least 0. */
static long ms_left(double until)
{
    double left = (until - util_now()) * 1000.0;
    return left > 0 ? (long)left : 0;
}

/* Fill res with outcome o and a printf detail; count it. */
__attribute__((format(printf, 4, 5))) static void fail(struct deduct_res *res,
                                                       enum deduct_outcome o,
                                                       atomic_ullong *counter,
                                                       const char *fmt, ...)
{
    res->outcome = o;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
    va_end(ap);
    if (counter)
        atomic_fetch_add(counter, 1);
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

struct zk_held {
    struct zk_session *s;
    char dir[328];                 /* ROOT/{name}: 127 + 1 + 3 x 64 bytes */
    char node[ZK_PATH_MAX];        /* ROOT/{sku}/lock-<attempt>-<seq> */
    char attempt[24];
    long long seq;
    const struct deduct_req *req;
};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* After a connection loss: wait for the session to come back within
 * until. 0 connected again (same session: our nodes are still there), -1
 * with res filled (lost, or still away: the session is given up so that
 * whatever node it may have made goes with it). */
static int reconnect(struct zk_held *h, double until, const char *doing, struct deduct_res *res)
{
    enum zk_state st = zk_session_wait_connected(client, h->s, ms_left(until));
    if (st == ZK_CONNECTED)
        return 0;
    if (st != ZK_LOST)
        zk_session_abandon(client, h->s, "disconnected past the request's wait");
    fail(res, DEDUCT_UNAVAILABLE, &n_unavailable,
         "ZooKeeper connection lost while %s (%s); nothing was written", doing,
         zk_state_name(st));
    return -1;
}

/* Create our lock node. 0 with h->node set, or -1 with res filled. */
static int create_node(struct zk_held *h, double until, struct deduct_res *res)
{
    zhandle_t *zh = zk_session_handle(h->s);
    char prefix[ZK_PATH_MAX];
    snprintf(prefix, sizeof(prefix), "%s/lock-%.23s-", h->dir, h->attempt);
    for (int tries = 0; tries < 4; tries++) {
        int rc = zoo_create(zh, prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                            ZOO_EPHEMERAL_SEQUENTIAL, h->node, sizeof(h->node));
        if (rc == ZOK)
            return 0;
        if (rc == ZNONODE) {
            rc = ensure_parents(zh, h->dir);
            if (rc == ZOK)
                continue;
        }
        if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) {
            fail(res, DEDUCT_UNAVAILABLE, &n_unavailable, "ZooKeeper create under %.200s: %s",
                 h->dir, zerror(rc));
            return -1;
        }
        /* The create may have happened and only its answer was lost: look
         * for the node carrying our attempt id before trying again. */
        if (reconnect(h, until, "creating the lock node", res) != 0)
            return -1;
        struct String_vector kids = {0};
        rc = zoo_get_children(zh, h->dir, 0, &kids);
        int i = rc == ZOK ? zk_lock_find(kids.data, kids.count, h->attempt) : -1;
        if (i >= 0) {
            snprintf(h->node, sizeof(h->node), "%s/%.100s", h->dir, kids.data[i]);
            atomic_fetch_add(&n_recovered_creates, 1);
        }
        deallocate_String_vector(&kids);
        if (i >= 0)
            return 0;
        if (rc != ZOK && rc != ZNONODE) {
            /* Unknown whether the node exists: giving the session up
             * removes it if it does. */
            zk_session_abandon(client, h->s, "lost create could not be looked up");
            fail(res, DEDUCT_UNAVAILABLE, &n_unavailable, "ZooKeeper lookup under %.200s: %s",
                 h->dir, zerror(rc));
            return -1;
        }
    }
    fail(res, DEDUCT_UNAVAILABLE, &n_unavailable, "ZooKeeper create under %.200s kept failing",
         h->dir);
    return -1;
}

/* Delete our node (best effort). A delete that did not happen would leave
 * a lock held by a live session forever: then the session is given up,
 * and the server drops the node with it. */
static void delete_node(struct zk_held *h)
{
    int rc = zoo_delete(zk_session_handle(h->s), h->node, -1);
    /* A lost session took the node with it. */
    if (rc == ZOK || rc == ZNONODE || zk_session_state(client, h->s) == ZK_LOST)
        return;
    atomic_fetch_add(&n_release_failures, 1);
    zk_session_abandon(client, h->s, "lock node delete failed");
}

/* Wait until our node is the lowest. 0 held; -1 with res filled. */
static int wait_turn(struct zk_held *h, long wait_ms, double until, struct deduct_res *res)
{
    zhandle_t *zh = zk_session_handle(h->s);
    struct zk_watch *w = zk_watch_begin();
    int ret = -1;
    for (int round = 0;; round++) {
        struct String_vector kids = {0};
        int rc = zoo_get_children(zh, h->dir, 0, &kids);
        int pred = -1, pos = -1;
        char pred_path[ZK_PATH_MAX] = "";
        if (rc == ZOK) {
            pos = zk_lock_position(kids.data, kids.count, base_name(h->node), &pred);
            if (pos == 1)
                snprintf(pred_path, sizeof(pred_path), "%s/%.100s", h->dir, kids.data[pred]);
        }
        deallocate_String_vector(&kids);
        if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
            if (reconnect(h, until, "waiting for the lock", res) != 0)
                break;
            continue;
        }
        if (rc != ZOK || pos < 0) {
            fail(res, DEDUCT_UNAVAILABLE, &n_lost,
                 "our lock node %.100s is gone (session %s); nothing was written",
                 base_name(h->node), zk_state_name(zk_session_state(client, h->s)));
            break;
        }
        if (pos == 0) {
            ret = 0;
            break;
        }
        long left = ms_left(until);
        if (left <= 0) {
            fail(res, DEDUCT_LOCK_TIMEOUT, &n_timeouts, "ZooKeeper lock %.120s busy for %ld ms",
                 h->dir, wait_ms);
            break;
        }
        /* Watch only the predecessor. Without a free watch slot, poll. */
        rc = w ? zk_watch_exists(w, zh, pred_path) : ZOK;
        if (rc == ZNONODE)
            continue;
        if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
            if (reconnect(h, until, "watching the lock", res) != 0)
                break;
            continue;
        }
        if (rc != ZOK) {
            fail(res, DEDUCT_UNAVAILABLE, &n_unavailable, "ZooKeeper exists %.200s: %s",
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

/* Take the lock on req->sku within lock_wait_ms and the deadline. 0 held
 * (h->s acquired), -1 with res filled (h->s released). */
static int take(const struct deduct_req *req, struct zk_held *h, struct deduct_res *res)
{
    double t0 = util_now();
    double until = t0 + (double)req->lock_wait_ms / 1000.0;
    if (req->deadline > 0 && req->deadline < until)
        until = req->deadline;
    /* The connection wait is not the lock wait (lock_wait_ms 0 is a
     * try-lock, yet needs a session): bounded by the request's deadline. */
    long to_deadline = (long)(deduct_time_left(req) * 1000.0);
    long connect_ms = to_deadline < conf.connect_wait_ms ? to_deadline : conf.connect_wait_ms;
    char err[160];
    memset(h, 0, sizeof(*h));
    h->req = req;
    h->s = zk_client_acquire(client, connect_ms, err, sizeof(err));
    if (!h->s) {
        res->lock_wait_s = util_now() - t0;
        fail(res, DEDUCT_UNAVAILABLE, &n_unavailable, "%s", err);
        return -1;
    }
    char name[STOCK_SKU_MAX * 3 + 1];
    if (zk_lock_dir_name(req->sku, name, sizeof(name)) != 0) {
        zk_client_release(client, h->s);
        fail(res, DEDUCT_INTERNAL, NULL, "SKU too long for a lock path");
        return -1;
    }
    snprintf(h->dir, sizeof(h->dir), "%.127s/%.192s", conf.root, name);
    snprintf(h->attempt, sizeof(h->attempt), "%016" PRIx64, util_rand());
    int rc = create_node(h, until, res);
    if (rc == 0) {
        rc = wait_turn(h, req->lock_wait_ms, until, res);
        if (rc != 0)
            delete_node(h);
    }
    res->lock_wait_s = util_now() - t0;
    if (rc == 0 && guard_deadline_passed(req, res)) {
        delete_node(h);
        rc = -1;
    }
    if (rc != 0) {
        zk_client_release(client, h->s);
        return -1;
    }
    atomic_fetch_add(&n_acquired, 1);
    h->seq = zk_lock_seq(base_name(h->node));
    return 0;
}

static void give_back(struct zk_held *h)
{
    delete_node(h);
    zk_client_release(client, h->s);
}

/* The part of the session timeout a confirmation may take and still
 * count: the COMMIT that follows has the rest to land. */
#define ZK_CONFIRM_FRACTION 3

/* Right before the COMMIT (stock_rmw_checked's last check): the server,
 * not this client's cached state, must say our node is still ours. A
 * process stopped past its session (SIGSTOP, a long GC-like stall) wakes
 * with a client that still believes it is connected; only a round trip
 * finds out. The answer covers us for a session timeout after the moment
 * the question was sent (the server heard from us then); we accept it only
 * when it came within a third of that, so the COMMIT sent right after
 * has the other two thirds to land before anyone else can hold the lock.
 * A stall between this check and the COMMIT still escapes it: only a
 * fencing token closes that gap. A dropped connection is waited for
 * (within the session timeout and the deadline) and asked once more. */
static int still_held(void *ctx, struct deduct_res *res)
{
    struct zk_held *h = ctx;
    long session = zk_session_timeout_ms(h->s);
    if (session <= 0 || session > conf.session_ms)
        session = conf.session_ms;
    int rc = ZOK;
    double took = 0;
    for (int tries = 0; tries < 2; tries++) {
        double t0 = util_now();
        rc = zk_session_confirm(h->s, h->node);
        took = util_now() - t0;
        if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT)
            break;
        long wait = (long)(deduct_time_left(h->req) * 1000.0);
        if (zk_session_wait_connected(client, h->s, wait < session ? wait : session) !=
            ZK_CONNECTED)
            break;
    }
    if (rc == ZOK && took * 1000.0 < (double)session / ZK_CONFIRM_FRACTION) {
        fault_point_pause(conf.fault_pause_ms);   /* test only: the window after the check */
        return 1;
    }
    atomic_fetch_add(&n_lost, 1);
    res->outcome = DEDUCT_LEASE_EXPIRED;
    if (rc == ZOK)
        snprintf(res->detail, sizeof(res->detail),
                 "ZooKeeper confirmed %.60s only after %.0f ms (more than a third of the "
                 "%ld ms session); nothing was written", base_name(h->node), took * 1000.0,
                 session);
    else
        snprintf(res->detail, sizeof(res->detail),
                 "ZooKeeper did not confirm %.60s is still ours (%s, session %s); nothing "
                 "was written", base_name(h->node), zerror(rc),
                 zk_state_name(zk_session_state(client, h->s)));
    return 0;
}

/* The request as the work sees it: with our fencing token when asked. */
static void fenced_req(const struct deduct_req *req, const struct zk_held *h,
                       struct deduct_req *out)
{
    *out = *req;
    out->fencing = lock_opts_of(req)->fencing;
    if (out->fencing && h->seq >= 0)
        out->fence = (unsigned long long)h->seq + 1;
}

static int zk_locked(const struct guard *self, const struct deduct_env *env,
                     const struct deduct_req *req, guard_work_fn work, void *ctx,
                     struct deduct_res *res)
{
    struct zk_held h;
    if (take(req, &h, res) != 0)
        return -1;
    struct deduct_req r;
    fenced_req(req, &h, &r);
    int ret = -1;
    if (still_held(&h, res))
        ret = work(ctx, env, &r, res);
    give_back(&h);
    return ret;
}

static int zk_deduct(const struct guard *self, const struct deduct_env *env,
                     const struct deduct_req *req, struct deduct_res *res)
{
    struct zk_held h;
    if (take(req, &h, res) != 0)
        return 0;
    struct deduct_req r;
    fenced_req(req, &h, &r);
    stock_rmw_checked(self->name, env, &r, still_held, &h, res);
    give_back(&h);
    return 0;
}

static void mirror(const char *name, atomic_ullong *v)
{
    metrics_set(name, "", (double)atomic_load(v));
}

static void zk_export_metrics(void)
{
    mirror("lab_zk_lock_acquired_total", &n_acquired);
    mirror("lab_zk_lock_timeouts_total", &n_timeouts);
    mirror("lab_zk_unavailable_total", &n_unavailable);
    mirror("lab_zk_lock_lost_total", &n_lost);
    mirror("lab_zk_create_recovered_total", &n_recovered_creates);
    mirror("lab_zk_release_failures_total", &n_release_failures);
    if (!client)
        return;
    struct zk_stats s;
    zk_client_stats(client, &s);
    metrics_set("lab_zk_sessions_total", "", (double)s.sessions);
    metrics_set("lab_zk_sessions_lost_total", "", (double)s.expired);
    metrics_set("lab_zk_suspensions_total", "", (double)s.suspended);
    metrics_set("lab_zk_connected", "", zk_client_state(client) == ZK_CONNECTED ? 1 : 0);
}

/* Its token is the lock node's sequence number (fenced_req). */
static const struct guard_field zk_fields[] = {LOCK_FIELD_FENCING};

const struct guard guard_zookeeper = {
    .name = "zookeeper",
    .how = "ZooKeeper lock (Curator InterProcessMutex): ephemeral-sequential node per attempt, "
           "lowest holds, waiters watch their predecessor, session checked before the write",
    .expect = "correct",
    .safe_across_instances = 1,
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .fields = zk_fields,
    .nfields = sizeof(zk_fields) / sizeof(zk_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .init = zk_init,
    .fini = zk_fini,
    .deduct = zk_deduct,
    .locked = zk_locked,
    .export_metrics = zk_export_metrics,
};
