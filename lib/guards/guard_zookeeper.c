/* Guard `zookeeper`: the read-modify-write under a ZooKeeper lock, with
 * the semantics of Curator's InterProcessMutex (the recipe is
 * lib/locks/zk_lock.c): one ephemeral-sequential node per attempt under
 * ROOT/{sku}, the lowest holds, waiters watch their predecessor and give up
 * after lock_wait_ms. The node dies with the session, so a crashed holder
 * frees the lock after the session timeout; the other side of that coin: a
 * holder whose session was lost (or stays disconnected past it) no longer
 * holds anything and refuses to write (still_held, right before the
 * COMMIT). The fencing token is the node's sequence number + 1, increasing
 * per SKU because the SKU's parent node is never deleted. */
#include "guard.h"

#include "base/metrics.h"
#include "base/util.h"
#include "guards/core/fault_point.h"
#include "guards/core/cart_locks.h"
#include "guards/core/lock_fields.h"
#include "locks/zk.h"
#include "locks/zk_lock.h"
#include "stock/txn.h"

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

static atomic_ullong n_acquired;
static struct zk_lock_counters counted;

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

struct zk_held {
    struct zk_lock lock;
    const struct deduct_req *req;
};

/* Take the lock on req->sku within lock_wait_ms and the deadline. 0 held
 * (the lock's session acquired), -1 with res filled (nothing held). */
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
    h->req = req;
    enum zk_lock_result r = zk_lock_take(client, &counted, conf.root, req->sku, connect_ms,
                                         req->lock_wait_ms, until, &h->lock, res->detail,
                                         sizeof(res->detail));
    if (r == ZK_LOCK_BAD_NAME) {
        fail(res, DEDUCT_INTERNAL, NULL, "SKU too long for a lock path");
        return -1;
    }
    res->lock_wait_s = util_now() - t0;
    if (r != ZK_LOCK_HELD) {
        res->outcome = r == ZK_LOCK_BUSY ? DEDUCT_LOCK_TIMEOUT : DEDUCT_UNAVAILABLE;
        return -1;
    }
    if (guard_deadline_passed(req, res)) {
        zk_lock_release(&h->lock);
        return -1;
    }
    atomic_fetch_add(&n_acquired, 1);
    return 0;
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
    struct zk_lock *l = &h->lock;
    long session = zk_session_timeout_ms(l->s);
    if (session <= 0 || session > conf.session_ms)
        session = conf.session_ms;
    int rc = ZOK;
    double took = 0;
    for (int tries = 0; tries < 2; tries++) {
        double t0 = util_now();
        rc = zk_session_confirm(l->s, l->node);
        took = util_now() - t0;
        if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT)
            break;
        long wait = (long)(deduct_time_left(h->req) * 1000.0);
        if (zk_session_wait_connected(client, l->s, wait < session ? wait : session) !=
            ZK_CONNECTED)
            break;
    }
    if (rc == ZOK && took * 1000.0 < (double)session / ZK_CONFIRM_FRACTION) {
        fault_point_pause(conf.fault_pause_ms);   /* test only: the window after the check */
        return 1;
    }
    atomic_fetch_add(&counted.lost, 1);
    res->outcome = DEDUCT_LEASE_EXPIRED;
    if (rc == ZOK)
        snprintf(res->detail, sizeof(res->detail),
                 "ZooKeeper confirmed %.60s only after %.0f ms (more than a third of the "
                 "%ld ms session); nothing was written", zk_lock_node_name(l->node), took * 1000.0,
                 session);
    else
        snprintf(res->detail, sizeof(res->detail),
                 "ZooKeeper did not confirm %.60s is still ours (%s, session %s); nothing "
                 "was written", zk_lock_node_name(l->node), zerror(rc),
                 zk_state_name(zk_session_state(client, l->s)));
    return 0;
}

/* The request as the work sees it: with our fencing token when asked. */
static void fenced_req(const struct deduct_req *req, const struct zk_held *h,
                       struct deduct_req *out)
{
    *out = *req;
    out->fencing = lock_opts_of(req)->fencing;
    if (out->fencing && h->lock.seq >= 0)
        out->fence = (unsigned long long)h->lock.seq + 1;
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
    zk_lock_release(&h.lock);
    return ret;
}

static void zk_deduct(const struct guard *self, const struct deduct_env *env,
                      const struct deduct_req *req, struct deduct_res *res)
{
    struct zk_held h;
    if (take(req, &h, res) != 0)
        return;
    struct deduct_req r;
    fenced_req(req, &h, &r);
    stock_rmw_checked(self->name, env, &r, still_held, &h, res);
    zk_lock_release(&h.lock);
}

static void mirror(const char *name, atomic_ullong *v)
{
    metrics_set(name, "", (double)atomic_load(v));
}

static void zk_export_metrics(void)
{
    mirror("lab_zk_lock_acquired_total", &n_acquired);
    mirror("lab_zk_lock_timeouts_total", &counted.timeouts);
    mirror("lab_zk_unavailable_total", &counted.unavailable);
    mirror("lab_zk_lock_lost_total", &counted.lost);
    mirror("lab_zk_create_recovered_total", &counted.recovered_creates);
    mirror("lab_zk_release_failures_total", &counted.release_failures);
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

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "An ephemeral-sequential node per attempt; the lowest holds; each waiter watches "
    "only its predecessor.",
    "Right before the COMMIT the holder asks the server (sync + exists) whether its "
    "node is still its session's, and commits only when that answer came within a "
    "third of the session timeout (503 lease_expired otherwise).",
    "fencing=true makes the write conditional on the node's sequence number.",
    NULL,
};
static const struct guard_metric doc_metrics[] = {
    {"lab_zk_lock_acquired_total", "counter", "zookeeper: locks acquired", ""},
    {"lab_zk_lock_timeouts_total", "counter", "zookeeper: acquisitions that timed out", ""},
    {"lab_zk_unavailable_total", "counter",
     "zookeeper: acquisitions refused because the ensemble was away", ""},
    {"lab_zk_lock_lost_total", "counter",
     "zookeeper: holders whose session or node was gone before the write", ""},
    {"lab_zk_create_recovered_total", "counter",
     "zookeeper: lost create answers whose node was found by its attempt id", ""},
    {"lab_zk_release_failures_total", "counter",
     "zookeeper: deletes that failed (the session is given up)", ""},
    {"lab_zk_sessions_total", "counter", "zookeeper: sessions established", ""},
    {"lab_zk_sessions_lost_total", "counter", "zookeeper: sessions expired or given up", ""},
    {"lab_zk_suspensions_total", "counter",
     "zookeeper: connection losses while a session lived", ""},
    {"lab_zk_connected", "gauge", "1 while the zookeeper guard's session is connected", ""},
};
static const struct guard_doc doc = {
    .needs = "ZooKeeper",
    .use_when = "FIFO fairness and a lock that goes with a crashed holder's session",
    .breaks = "only a stall between the server's confirmation and the COMMIT (fencing "
        "closes it)",
    .origin = "the seeds' third lock family (Curator's InterProcessMutex)",
    .steps = doc_steps,
    .statements = "create -e -s /locks/inventory/{sku}/lock-<id>-\n... read-modify-write "
        "...\nsync; exists node (owner = our session)\nCOMMIT; delete node",
    .code = __FILE__,
    .lock_home = "zookeeper",
    .metrics = doc_metrics,
    .nmetrics = sizeof(doc_metrics) / sizeof(doc_metrics[0]),
};

const struct guard guard_zookeeper = {
    .name = "zookeeper",
    .doc = &doc,
    .how = "ZooKeeper lock (Curator InterProcessMutex): ephemeral-sequential node per attempt, "
           "lowest holds, waiters watch their predecessor, session checked before the write",
    .expect = "correct",
    .flags = GUARD_SAFE_ACROSS_INSTANCES,
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
    .deduct_cart = guard_lock_cart,   /* its locks nested, sorted (core/cart_locks) */
    .export_metrics = zk_export_metrics,
};
