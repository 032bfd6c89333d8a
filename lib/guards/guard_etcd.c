/* Guard `etcd`: the read-modify-write under etcd's lock service. Each
 * attempt grants a lease of the request's lock_ttl_ms (whole seconds,
 * rounded up; etcd's minimum lease is refused with a 400 rather than
 * silently lengthened), keeps it alive with the shared renewer, and asks
 * /v3/lock/lock for PREFIX{sku} with that lease: etcd queues waiters by
 * their key's create revision and wakes each when its predecessor's key
 * is deleted (no herd). Releasing = revoking the lease, which deletes the
 * lock key with it; a crashed holder's lease simply runs out.
 *
 * Before the write the lease must still be alive by the holder's own
 * monotonic clock (counted from the SENDING of the grant or of the last
 * successful keep-alive): a holder paused past its lease answers 503
 * lease_expired and writes nothing. With "fencing":true the token is the
 * lock key's create revision, which grows with every new holder of the
 * SKU's lock (etcd's revision is cluster-wide and monotonic), through the
 * same fenced write as the other guards. */
#include "guard.h"

#include "base/metrics.h"
#include "base/util.h"
#include "guards/core/fault_point.h"
#include "guards/core/cart_locks.h"
#include "guards/core/lock_fields.h"
#include "locks/etcd.h"
#include "stock/txn.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static struct etcd_guard_conf {
    char endpoints[512];
    long op_timeout_ms;
    long min_lease_ms;
    char prefix[128];
    long fault_pause_ms;
} conf;

static const struct cfg_opt options[] = {
    {"etcd-endpoints", "LAB_ETCD_ENDPOINTS", CFG_STR, "", 0, 0,
     offsetof(struct etcd_guard_conf, endpoints), sizeof(conf.endpoints),
     "etcd client URLs for the etcd guard (http://host:port[,...]); empty: the guard answers "
     "503 and /healthz does not ask etcd"},
    {"etcd-op-timeout", "LAB_ETCD_OP_TIMEOUT_MS", CFG_MS, "1000", 50, 30000,
     offsetof(struct etcd_guard_conf, op_timeout_ms), 0,
     "bound of one etcd call (lease grant, keep-alive, revoke, read): etcd away or hung "
     "costs at most this before 503 backend_unavailable"},
    {"etcd-min-lease", "LAB_ETCD_MIN_LEASE_MS", CFG_MS, "2000", 1000, 60000,
     offsetof(struct etcd_guard_conf, min_lease_ms), 0,
     "shortest lock_ttl_ms the etcd guard accepts: etcd's minimum lease (1.5 election "
     "timeouts, 2 s by default; a shorter TTL is silently rounded up by etcd)"},
    {"etcd-prefix", "LAB_ETCD_PREFIX", CFG_STR, "/locks/inventory/", 0, 0,
     offsetof(struct etcd_guard_conf, prefix), sizeof(conf.prefix),
     "prefix of the per-SKU lock names in etcd"},
    {"etcd-fault-pause-after-check", "LAB_FAULT_ETCD_PAUSE_AFTER_CHECK_MS", CFG_MS, "0", 0, 60000,
     offsetof(struct etcd_guard_conf, fault_pause_ms), 0,
     "TEST ONLY, fault injection: stop this whole process this long right after "
     "the etcd lease check passed, before the COMMIT (the window the check cannot "
     "close); 0 = off"},
};

/* The lock service answers within a round trip when the lock is free:
 * a try-lock (lock_wait_ms 0) still gets this long. */
#define LOCK_WAIT_FLOOR_MS 50

static struct etcd_client *client;
static struct etcd_stats stats;
static atomic_ullong n_acquired, n_timeouts, n_unavailable, n_expired, n_short_lease,
    n_release_failures;

static int etcd_guard_init(const struct guard *self, const struct guard_backends *b, char *err,
                           size_t errlen)
{
    if (!conf.prefix[0] || strlen(conf.prefix) > 100) {
        snprintf(err, errlen, "--etcd-prefix must be 1..100 bytes");
        return -1;
    }
    /* Not configured: only this guard fails, per request, saying why. */
    if (!conf.endpoints[0])
        return 0;
    if (!(client = etcd_client_new(conf.endpoints, conf.op_timeout_ms, &stats, err, errlen)))
        return -1;
    return 0;
}

static void etcd_guard_fini(const struct guard *self)
{
    etcd_client_free(client);
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

/* One etcd call's bound: the op timeout, or less when the request has
 * less time left (at least 1 ms). */
static long op_bound(const struct deduct_req *req)
{
    long left = (long)(deduct_time_left(req) * 1000.0);
    long b = left < conf.op_timeout_ms ? left : conf.op_timeout_ms;
    return b > 0 ? b : 1;
}

struct etcd_held {
    struct etcd_lease lease;
    char key[ETCD_KEY_MAX];    /* the lock key: PREFIX{sku}/<lease hex> */
    int64_t revision;          /* its create revision, 0 when not read */
};

/* Revoke the lease (the lock key goes with it). Not reached: the lease
 * runs out by itself within its TTL, since nobody renews it any more. */
static void give_back_within(struct etcd_held *h, long bound_ms)
{
    char err[160];
    if (etcd_lease_revoke(client, &h->lease, bound_ms, err, sizeof(err)) != ETCD_OK)
        atomic_fetch_add(&n_release_failures, 1);
}

static void give_back(struct etcd_held *h, const struct deduct_req *req)
{
    (void)req;
    /* The release gets a full op bound even past the deadline: a lock
     * left behind blocks every buyer of the SKU for the TTL. */
    give_back_within(h, conf.op_timeout_ms);
}

/* Take the lock on req->sku. 0 held, -1 with res filled (nothing held). */
static int take(const struct deduct_env *env, const struct deduct_req *req, struct etcd_held *h,
                struct deduct_res *res)
{
    memset(h, 0, sizeof(*h));
    const struct lock_req_opts *lo = lock_opts_of(req);
    long ttl_ms = lock_opts_ttl(lo, env->default_ttl_ms);
    if (ttl_ms < conf.min_lease_ms) {
        fail(res, DEDUCT_BAD_REQUEST, &n_short_lease,
             "lock_ttl_ms %ld is below etcd's minimum lease of %ld ms (etcd would silently "
             "lengthen it)", ttl_ms, conf.min_lease_ms);
        return -1;
    }
    if (!client) {
        fail(res, DEDUCT_UNAVAILABLE, &n_unavailable,
             "no etcd configured (--etcd-endpoints / LAB_ETCD_ENDPOINTS)");
        return -1;
    }
    double t0 = util_now();
    char err[160];
    long ttl_s = etcd_ttl_seconds(ttl_ms);
    int rc = etcd_lease_grant(client, ttl_s, ttl_ms, op_bound(req), &h->lease, err, sizeof(err));
    if (rc != ETCD_OK) {
        res->lock_wait_s = util_now() - t0;
        fail(res, DEDUCT_UNAVAILABLE, &n_unavailable, "etcd lease grant: %.120s", err);
        return -1;
    }
    if (h->lease.ttl_s > ttl_s) {
        /* This etcd's minimum is above --etcd-min-lease: say so. */
        long granted = h->lease.ttl_s;
        give_back(h, req);
        res->lock_wait_s = util_now() - t0;
        fail(res, DEDUCT_BAD_REQUEST, &n_short_lease,
             "lock_ttl_ms %ld is below this etcd's minimum lease of %ld s", ttl_ms, granted);
        return -1;
    }
    snprintf(h->lease.name, sizeof(h->lease.name), "%s%s", conf.prefix, req->sku);
    /* Without renewals a holder outliving its lease would be refused at
     * the write; the watchdog keeps the lease alive instead. */
    if (lo->watchdog && etcd_lease_watch(client, &h->lease) != 0)
        fprintf(stderr, "etcd: watchdog not started for %s\n", h->lease.name);

    long wait = req->lock_wait_ms > LOCK_WAIT_FLOOR_MS ? req->lock_wait_ms : LOCK_WAIT_FLOOR_MS;
    long left = (long)(deduct_time_left(req) * 1000.0);
    if (left < wait)
        wait = left > 0 ? left : 1;
    rc = etcd_lock(client, h->lease.name, &h->lease, wait, h->key, sizeof(h->key), err,
                   sizeof(err));
    res->lock_wait_s = util_now() - t0;
    if (rc == ETCD_OK && lo->fencing) {
        int64_t rev = etcd_create_revision(client, h->key, op_bound(req), err, sizeof(err));
        if (rev > 0)
            h->revision = rev;
        else
            rc = (int)rev;
    }
    if (rc != ETCD_OK) {
        /* Revoking also removes our key from the lock's queue. When etcd
         * did not answer, the revoke will not be answered either: it gets
         * only what is left of the request's time (the lease still runs
         * out by itself), so the 503 comes within the deadline. */
        if (rc == ETCD_EUNAVAIL)
            give_back_within(h, op_bound(req));
        else
            give_back(h, req);
        if (rc == ETCD_TIMEOUT)
            fail(res, DEDUCT_LOCK_TIMEOUT, &n_timeouts, "etcd lock %.100s busy for %ld ms",
                 h->lease.name, wait);
        else
            fail(res, DEDUCT_UNAVAILABLE, &n_unavailable, "%.150s; nothing was written", err);
        return -1;
    }
    if (guard_deadline_passed(req, res)) {
        give_back(h, req);
        return -1;
    }
    atomic_fetch_add(&n_acquired, 1);
    return 0;
}

/* Right before the write: the lease must still be alive. Past it, etcd
 * may have deleted our key and another holder be writing: refuse. */
static int still_valid(void *ctx, struct deduct_res *res)
{
    struct etcd_held *h = ctx;
    if (etcd_lease_validity_left(client, &h->lease) > 0) {
        fault_point_pause(conf.fault_pause_ms);   /* test only: the window after the check */
        return 1;
    }
    fail(res, DEDUCT_LEASE_EXPIRED, &n_expired,
         "etcd lease %" PRIx64 " (%ld ms) on %.60s ran out before the write; nothing was "
         "written", (uint64_t)h->lease.id, h->lease.valid_ms, h->lease.name);
    return 0;
}

/* The request as the work sees it: with our fencing token when asked. */
static void fenced_req(const struct deduct_req *req, const struct etcd_held *h,
                       struct deduct_req *out)
{
    *out = *req;
    out->fencing = lock_opts_of(req)->fencing;
    if (out->fencing)
        out->fence = (unsigned long long)h->revision;
}

static int etcd_guard_locked(const struct guard *self, const struct deduct_env *env,
                             const struct deduct_req *req, guard_work_fn work, void *ctx,
                             struct deduct_res *res)
{
    struct etcd_held h;
    if (take(env, req, &h, res) != 0)
        return -1;
    struct deduct_req r;
    fenced_req(req, &h, &r);
    int ret = -1;
    if (still_valid(&h, res))
        ret = work(ctx, env, &r, res);
    give_back(&h, req);
    return ret;
}

static void etcd_guard_deduct(const struct guard *self, const struct deduct_env *env,
                              const struct deduct_req *req, struct deduct_res *res)
{
    struct etcd_held h;
    if (take(env, req, &h, res) != 0)
        return;
    struct deduct_req r;
    fenced_req(req, &h, &r);
    stock_rmw_checked(self->name, env, &r, still_valid, &h, res);
    give_back(&h, req);
}

/* /healthz: etcd's own /health, when etcd is configured. */
static int etcd_guard_health(const struct guard *self, const char **backend, char *err,
                             size_t errlen)
{
    (void)self;
    *backend = "etcd";
    if (!client)
        return 1;
    return etcd_health(client, conf.op_timeout_ms, err, errlen);
}

static void mirror(const char *name, atomic_ullong *v)
{
    metrics_set(name, "", (double)atomic_load(v));
}

static void etcd_guard_export_metrics(void)
{
    mirror("lab_etcd_lock_acquired_total", &n_acquired);
    mirror("lab_etcd_lock_timeouts_total", &n_timeouts);
    mirror("lab_etcd_unavailable_total", &n_unavailable);
    mirror("lab_etcd_lease_expired_total", &n_expired);
    mirror("lab_etcd_short_lease_refused_total", &n_short_lease);
    mirror("lab_etcd_release_failures_total", &n_release_failures);
    mirror("lab_etcd_renewals_total", &stats.renewals);
    mirror("lab_etcd_leases_lost_total", &stats.leases_lost);
    mirror("lab_etcd_calls_total", &stats.calls);
    mirror("lab_etcd_call_failures_total", &stats.call_failures);
}

/* The body fields it honours: the lease, its renewal, the fencing token. */
static const struct guard_field etcd_fields[] = {LOCK_FIELD_TTL, LOCK_FIELD_WATCHDOG,
                                                 LOCK_FIELD_FENCING};

/* The guard's description for GET /guards (guard.h: struct guard_doc). */
static const char *const doc_steps[] = {
    "Grants a lease of lock_ttl_ms (at least etcd's 2 s minimum; shorter is a 400), "
    "kept alive by the watchdog.",
    "etcd's lock service creates /locks/inventory/{sku}/<lease> and answers once "
    "every key with a lower create revision is gone.",
    "Right before the write the holder checks its lease on its own monotonic clock "
    "(503 lease_expired once past it).",
    "fencing=true uses the lock key's create revision as the token; release revokes "
    "the lease.",
    NULL,
};
static const struct guard_metric doc_metrics[] = {
    {"lab_etcd_lock_acquired_total", "counter", "etcd: locks acquired", ""},
    {"lab_etcd_lock_timeouts_total", "counter",
     "etcd: acquisitions that timed out (the waiter revoked its lease)", ""},
    {"lab_etcd_unavailable_total", "counter",
     "etcd: requests refused because etcd could not be reached in time", ""},
    {"lab_etcd_lease_expired_total", "counter",
     "etcd: holders whose lease was out of date before the write", ""},
    {"lab_etcd_short_lease_refused_total", "counter",
     "etcd: requests refused for a lease below etcd's minimum", ""},
    {"lab_etcd_release_failures_total", "counter",
     "etcd: revokes that failed (the lease runs out by itself)", ""},
    {"lab_etcd_renewals_total", "counter", "etcd: keep-alives that extended a lease", ""},
    {"lab_etcd_leases_lost_total", "counter", "etcd: keep-alives that found the lease gone", ""},
    {"lab_etcd_calls_total", "counter", "etcd: HTTP calls to the v3 gateway", ""},
    {"lab_etcd_call_failures_total", "counter",
     "etcd: HTTP calls to the v3 gateway that got no answer", ""},
};
static const struct guard_doc doc = {
    .needs = "etcd (v3 JSON gateway)",
    .use_when = "a coordination service with leases and a revision per key, the fencing "
        "token built in",
    .breaks = "only a stall between the lease check and the COMMIT (fencing closes it)",
    .origin = "seed 004: coordination services \"such as ZooKeeper, etcd\"",
    .steps = doc_steps,
    .statements = "POST /v3/lease/grant {TTL}\nPOST /v3/lock/lock {name, lease}\n... "
        "read-modify-write ...\nPOST /v3/lease/revoke {ID}",
    .code = __FILE__,
    .lock_home = "etcd",
    .metrics = doc_metrics,
    .nmetrics = sizeof(doc_metrics) / sizeof(doc_metrics[0]),
};

const struct guard guard_etcd = {
    .name = "etcd",
    .doc = &doc,
    .how = "etcd lock service: a lease of lock_ttl_ms kept alive by the watchdog, waiters "
           "queued by create revision, lease checked before the write, revoke releases",
    .expect = "correct",
    .flags = GUARD_SAFE_ACROSS_INSTANCES,
    .options = options,
    .noptions = sizeof(options) / sizeof(options[0]),
    .options_conf = &conf,
    .fields = etcd_fields,
    .nfields = sizeof(etcd_fields) / sizeof(etcd_fields[0]),
    .opts_size = sizeof(struct lock_req_opts),
    .opts_default = &lock_req_opts_default,
    .init = etcd_guard_init,
    .fini = etcd_guard_fini,
    .deduct = etcd_guard_deduct,
    .locked = etcd_guard_locked,
    .deduct_cart = guard_lock_cart,   /* its locks nested, sorted (core/cart_locks) */
    .health = etcd_guard_health,
    .export_metrics = etcd_guard_export_metrics,
};
